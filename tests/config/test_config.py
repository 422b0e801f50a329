"""cluster.toml: validation with exact key paths and reasons, helpers, dump round trip, `check`."""

from __future__ import annotations

import copy
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit import constants as C
from cockpit.cli.config_cmd import check
from cockpit.config import (
    ClusterConfig,
    ConfigError,
    HostEntry,
    dump_config,
    load_config,
    parse_config,
    toml_value,
)
from cockpit.config.validators import SYSTEM_ROOTS, normal_path

REPO_ROOT = Path(__file__).resolve().parents[2]


def base_data() -> dict[str, Any]:
    return {
        "cluster": {"name": "r37", "api_port": 8000, "coord_port": 29543},
        "model": {"path": "/srv/models/m"},
        "serving": {"gmu": 0.81},
        "paths": {"recipe_dir": "r37-recipe"},
        "hosts": [{"rank": r, "ssh": f"spark-{r}", "fabric_ip": f"192.168.100.{10 + r}",
                   "fabric_iface": "enp1s0f0np0", "ib_hca": ["rocep1s0f0"], "gid_index": 3}
                  for r in range(4)],
    }


def to_toml(data: dict[str, Any]) -> str:
    """Test-side TOML writer for plain dicts (tables, arrays of tables, scalar values)."""
    lines: list[str] = []
    for key, value in data.items():
        if not isinstance(value, (dict, list)) or (isinstance(value, list) and value
                                                    and not isinstance(value[0], dict)):
            lines.append(f"{key} = {toml_value(value)}")
    for key, value in data.items():
        if isinstance(value, dict):
            lines.append(f"[{key}]")
            lines += [f"{k} = {toml_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for table in value:
                lines.append(f"[[{key}]]")
                lines += [f"{k} = {toml_value(v)}" for k, v in table.items()]
        elif value == []:
            lines.insert(0, f"{key} = []")
    return "\n".join(lines) + "\n"


def variant(change: Callable[[dict[str, Any]], None]) -> str:
    data = copy.deepcopy(base_data())
    change(data)
    return to_toml(data)


def problems_of(text: str) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as info:
        parse_config(text, Path("cluster.toml"))
    return info.value.problems


def host_set(i: int, **kv: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["hosts"][i].update(kv)


def sect_set(section: str, **kv: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.setdefault(section, {}).update(kv)


def ranks(*values: int) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        for host, r in zip(d["hosts"], values, strict=True):
            host["rank"] = r
    return change


def drop_host_key(i: int, key: str) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["hosts"][i].pop(key)


BAD: list[tuple[str, Callable[[dict[str, Any]], None] | str, str, str]] = [
    ("syntax", "[cluster\nname = 'x'\n", "", "TOML syntax error at line 1, column"),
    ("duplicate toml key", "[cluster]\nname = 'a'\nname = 'b'\n", "", "TOML syntax error at line 3"),
    ("wrong type", sect_set("cluster", api_port="8000"), "cluster.api_port",
     "expected an integer, got string '8000'"),
    ("bool for int", host_set(1, gid_index=True), "hosts[1].gid_index", "expected an integer, got boolean"),
    ("duplicate rank", ranks(0, 1, 1, 3), "hosts[2].rank", "rank 1 is used twice (also by hosts[1])"),
    ("missing rank 0", ranks(1, 2, 3, 4), "hosts", "no host has rank 0"),
    ("rank out of range", ranks(1, 2, 3, 4), "hosts[3].rank",
     "rank 4 is out of range: 4 hosts need ranks 0..3"),
    ("gap in ranks", ranks(0, 1, 3, 4), "hosts", "no host has rank 2"),
    ("negative rank", host_set(0, rank=-1), "hosts[0].rank", "rank -1 is out of range"),
    ("bad ip", host_set(2, fabric_ip="300.1.2.3"), "hosts[2].fabric_ip",
     "'300.1.2.3' is not an IPv4 or IPv6 address"),
    ("scoped ipv6", host_set(2, fabric_ip="fe80::1%eth0"), "hosts[2].fabric_ip", "scoped IPv6"),
    ("duplicate fabric ip", host_set(3, fabric_ip="192.168.100.10"), "hosts[3].fabric_ip",
     "'192.168.100.10' is also the fabric IP of rank 0"),
    ("duplicate ipv6 spelled differently",
     lambda d: (d["hosts"][0].update(fabric_ip="fd00::1"), d["hosts"][1].update(fabric_ip="fd00:0::0001")),
     "hosts[1].fabric_ip", "is also the fabric IP of rank 0"),
    ("newline in path", sect_set("model", path="/srv/models/a\nb"), "model.path", "contains a newline"),
    ("NUL in path", sect_set("paths", cache="/srv/ca\x00che"), "paths.cache", "contains a NUL byte"),
    ("relative model path", sect_set("model", path="srv/models/m"), "model.path",
     "'srv/models/m' is not an absolute path"),
    ("relative host override", host_set(1, engram_path="engram"), "hosts[1].engram_path",
     "is not an absolute path"),
    ("dotdot in path", sect_set("paths", engram="/srv/../etc"), "paths.engram", "contains a '..' component"),
    ("colon in mounted path", host_set(0, cache_path="/srv/a:b"), "hosts[0].cache_path", "docker -v"),
    ("shell meta in path", sect_set("paths", cache="/srv/$HOME"), "paths.cache", "shell metacharacter $"),
    ("tilde recipe dir", sect_set("paths", recipe_dir="~/r37"), "paths.recipe_dir", "'~' is not expanded"),
    ("meta in iface", host_set(1, fabric_iface="enp1s0;reboot"), "hosts[1].fabric_iface",
     "not a valid network interface name"),
    ("iface too long", host_set(1, fabric_iface="enp1s0f0np0abcde"), "hosts[1].fabric_iface",
     "1-15 characters"),
    ("slash in iface", host_set(1, fabric_iface="en/p1"), "hosts[1].fabric_iface", "no '/'"),
    ("meta in hca", host_set(2, ib_hca=["rocep1s0f0", "roce$x"]), "hosts[2].ib_hca[1]",
     "'roce$x' is not a valid RDMA device name"),
    ("hca listed twice", host_set(2, ib_hca=["a", "a"]), "hosts[2].ib_hca", "listed twice"),
    ("empty hca list", host_set(2, ib_hca=[]), "hosts[2].ib_hca", "at least one HCA"),
    ("meta in container name", sect_set("cluster", container_name="ds41;rm"), "cluster.container_name",
     "not a valid docker container name"),
    ("unknown top-level key", lambda d: d.update(extra={"a": 1}), "extra", "unknown key"),
    ("unknown host key", host_set(0, fabric_ipp="1.2.3.4"), "hosts[0].fabric_ipp",
     "unknown key (did you mean 'fabric_ip'?)"),
    ("unknown section key", sect_set("serving", gmuu=0.5), "serving.gmuu", "unknown key"),
    ("missing host key", drop_host_key(2, "fabric_iface"), "hosts[2].fabric_iface",
     "required key is missing"),
    ("port too big", sect_set("cluster", api_port=70000), "cluster.api_port", "port 70000 is out of range"),
    ("port zero", host_set(0, port=0), "hosts[0].port", "port 0 is out of range (1..65535)"),
    ("equal ports", sect_set("cluster", api_port=29543), "cluster.coord_port",
     "the coordination port 29543 is the same as the API port"),
    ("bad sha256", sect_set("runtime", sha256="abc123"), "runtime.sha256", "is not a sha256 digest"),
    ("bad image id", sect_set("runtime", image_id="638d63b0"), "runtime.image_id",
     "is not a docker image ID ('sha256:' and 64 hex digits)"),
    ("bad image tag", sect_set("runtime", image_tag="local/DS41:x y"), "runtime.image_tag",
     "not a valid docker image reference"),
    ("bad repo", sect_set("model", repo="DeepSeek-V4.1-Flash"), "model.repo",
     "is not a Hugging Face repository id 'owner/name'"),
    ("bad revision", sect_set("model", revision="main; rm -rf /"), "model.revision",
     "is not a 40-hex commit or a safe ref name"),
    ("option-like revision", sect_set("model", revision="--force"), "model.revision", "safe ref name"),
    ("gmu above 1", sect_set("serving", gmu=1.5), "serving.gmu", "gmu 1.5 is out of range (0, 1]"),
    ("gmu zero", sect_set("serving", gmu=0.0), "serving.gmu", "out of range (0, 1]"),
    ("gmu nan", "[serving]\ngmu = nan\n" + variant(lambda d: d.pop("serving")), "serving.gmu",
     "out of range"),
    ("negative gid", host_set(1, gid_index=-1), "hosts[1].gid_index",
     "gid_index -1 is out of range (0..255)"),
    ("gid too big", host_set(1, gid_index=256), "hosts[1].gid_index", "out of range (0..255)"),
    ("zero size", sect_set("runtime", size_bytes=0), "runtime.size_bytes", "value 0 is out of range (1.."),
    ("beyond int64", sect_set("serving", maxlen=2**63), "serving.maxlen",
     "value 9223372036854775808 is out of range (1..9223372036854775807)"),
    ("too many hosts", lambda d: d.update(hosts=[{**d["hosts"][0], "rank": r, "ssh": f"h{r}",
                                                  "fabric_ip": f"10.{r // 250}.0.{r % 250}"}
                                                 for r in range(257)]), "hosts", "at most 256"),
    ("empty hosts", lambda d: d.update(hosts=[]), "hosts", "at least one [[hosts]] entry is required"),
    ("hosts as table", "[hosts]\nrank = 0\n", "hosts", "expected an array of tables ([[hosts]])"),
    ("user in ssh target", host_set(0, ssh="admin@spark-0"), "hosts[0].ssh", "put the login name in 'user'"),
    ("port in ssh target", host_set(0, ssh="spark-0:2222"), "hosts[0].ssh", "put the port in 'port'"),
    ("option-like ssh target", host_set(0, ssh="-oProxyCommand=x"), "hosts[0].ssh",
     "must not start with '-'"),
    ("duplicate ssh target", host_set(1, ssh="spark-0"), "hosts[1].ssh",
     "'spark-0' is also the SSH target of rank 0"),
    ("bad login name", host_set(0, user="ad min"), "hosts[0].user", "is not a valid login name"),
    ("zero timeout", sect_set("ssh", connect_timeout=0.0), "ssh.connect_timeout", "out of range"),
    ("unknown cipher", sect_set("ssh", ciphers=["arcfour"]), "ssh.ciphers",
     "'arcfour' is not a cipher the cockpit offers; known: aes128-gcm@openssh.com"),
    ("no cipher", sect_set("ssh", ciphers=[]), "ssh.ciphers", "at least one cipher is needed"),
    ("cipher twice", sect_set("ssh", ciphers=["aes128-ctr", "aes128-ctr"]), "ssh.ciphers",
     "a cipher is listed twice"),
    ("bad keymap keys", sect_set("ui", keymap={"quit": "ctrl q"}), "ui.keymap",
     "quit: 'ctrl q' is not a key or comma-separated keys"),
    ("bad theme", sect_set("ui", theme="../x"), "ui.theme", "is not a theme name"),
    # control, C1, bidi and invisible characters in every path (issue 11)
    ("C1 control in path", sect_set("model", path="/srv/models/a\x9bb"), "model.path",
     "contains a control character (U+009B)"),
    ("NEL in path", sect_set("paths", engram="/srv/e\x85x"), "paths.engram", "next-line control (U+0085)"),
    ("DEL in path", host_set(1, cache_path="/srv/c\x7fx"), "hosts[1].cache_path",
     "control character (U+007F)"),
    ("bidi override in path", sect_set("model", path="/srv/models/\u202egnp.exe"), "model.path",
     "bidirectional override or isolate (U+202E)"),
    ("bidi isolate in recipe dir", sect_set("paths", recipe_dir="r37\u2066x"), "paths.recipe_dir",
     "bidirectional override or isolate (U+2066)"),
    ("line separator in path", sect_set("paths", cache="/srv/c\u2028x"), "paths.cache",
     "a line separator (U+2028)"),
    ("zero-width space in path", sect_set("paths", cache="/srv/c\u200bx"), "paths.cache",
     "an invisible format character (U+200B)"),
    ("bidi in archive path", sect_set("runtime", archive="r\u202dx.tar"), "runtime.archive",
     "bidirectional override"),
    ("C1 in local path", sect_set("ssh", known_hosts="/home/a/\x9b31mkh"), "ssh.known_hosts",
     "control character (U+009B)"),
    ("bidi in local path", sect_set("ssh", identity_file="~/.ssh/\u202eid"), "ssh.identity_file",
     "bidirectional override"),
    ("space in model path", sect_set("model", path="/data/my models/m"), "model.path",
     "contains a space: host paths may not hold whitespace"),
    ("trailing space in path", host_set(2, engram_path="/srv/engram "), "hosts[2].engram_path",
     "contains a space"),
    ("nbsp in path", sect_set("paths", cache="/srv/a\u00a0b"), "paths.cache", "whitespace (U+00A0)"),
    ("space in recipe dir", sect_set("paths", recipe_dir="r37 recipe"), "paths.recipe_dir", "whitespace"),
    # names that become command arguments (issue 11)
    ("option iface", host_set(0, fabric_iface="--help"), "hosts[0].fabric_iface",
     "starts with '-' and would be read as a command option"),
    ("dash iface", host_set(3, fabric_iface="-x"), "hosts[3].fabric_iface", "read as a command option"),
    ("colon iface", host_set(0, fabric_iface="eth0:1"), "hosts[0].fabric_iface", "no '/', ':'"),
    ("space iface", host_set(0, fabric_iface="eth 0"), "hosts[0].fabric_iface",
     "not a valid network interface name"),
    ("non-ascii iface", host_set(0, fabric_iface="eth\u0430"), "hosts[0].fabric_iface",
     "not a valid network interface name"),
    ("dot iface", host_set(0, fabric_iface=".."), "hosts[0].fabric_iface", "not a valid network interface"),
    ("option hca", host_set(1, ib_hca=["--help"]), "hosts[1].ib_hca[0]", "read as a command option"),
    ("hca too long", host_set(1, ib_hca=["m" * 64]), "hosts[1].ib_hca[0]", "not a valid RDMA device name"),
    # model, Engram and cache directories (issue 11)
    ("root model path", sect_set("model", path="/"), "model.path", "is a system directory (/)"),
    ("usr engram path", sect_set("paths", engram="/usr/"), "paths.engram", "is a system directory (/usr)"),
    ("etc cache path", host_set(1, cache_path="//etc"), "hosts[1].cache_path", "system directory (/etc)"),
    ("proc subdir", sect_set("paths", cache="/proc/self"), "paths.cache",
     "inside the system directory /proc"),
    ("sys subdir", sect_set("paths", engram="/sys/x"), "paths.engram", "inside the system directory /sys"),
    ("root recipe dir", sect_set("paths", recipe_dir="/"), "paths.recipe_dir", "system directory"),
    ("engram equals model", sect_set("paths", engram="/srv/models/m"), "paths.engram",
     "is the same directory as model.path ('/srv/models/m')"),
    ("engram equals model spelled differently", sect_set("paths", engram="/srv//models/./m/"), "paths.engram",
     "is the same directory as model.path"),
    ("cache inside model", sect_set("paths", cache="/srv/models/m/cache"), "paths.cache",
     "lies inside model.path"),
    ("cache contains engram", lambda d: d["paths"].update(cache="/srv", engram="/srv/engram"), "paths.cache",
     "contains paths.engram ('/srv/engram')"),
    ("host override inside model", host_set(2, engram_path="/srv/models/m/e"), "hosts[2].engram_path",
     "lies inside model.path"),
    ("host overrides equal", host_set(1, model_path="/data/x", cache_path="/data/x"), "hosts[1].cache_path",
     "is the same directory as hosts[1].model_path"),
]


@pytest.mark.parametrize(("text_or_change", "key", "reason"),
                         [pytest.param(c, k, r, id=name) for name, c, k, r in BAD])
def test_bad_config_names_key_and_reason(text_or_change: Any, key: str, reason: str) -> None:
    text = text_or_change if isinstance(text_or_change, str) else variant(text_or_change)
    problems = problems_of(text)
    matching = [r for k, r in problems if k == key]
    assert matching, f"no problem at {key!r}: {problems}"
    assert any(reason in r for r in matching), problems


def test_distinct_bad_input_kinds() -> None:
    assert len({name for name, *_ in BAD}) == len(BAD) >= 25


def test_render_is_file_key_reason() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(variant(host_set(2, fabric_ip="300.1.2.3")), Path("/etc/r37/cluster.toml"))
    assert info.value.render() == (
        "/etc/r37/cluster.toml: hosts[2].fabric_ip: '300.1.2.3' is not an IPv4 or IPv6 address")


def test_every_field_problem_reported_at_once() -> None:
    text = variant(lambda d: (d["hosts"][0].update(fabric_ip="x"), d["serving"].update(gmu=2.0),
                              d["cluster"].update(bogus=1)))
    keys = {k for k, _ in problems_of(text)}
    assert keys == {"hosts[0].fabric_ip", "serving.gmu", "cluster.bogus"}


def test_ib_hca_string_is_accepted_and_normalised() -> None:
    cfg = parse_config(variant(lambda d: (d["hosts"][0].update(ib_hca="rocep1s0f0"),
                                          d["hosts"][1].update(ib_hca="rocep1s0f0, rocep1s0f1"))))
    assert cfg.host(0).ib_hca == ["rocep1s0f0"]
    assert cfg.host(1).ib_hca == ["rocep1s0f0", "rocep1s0f1"]


def test_values_are_normalised() -> None:
    cfg = parse_config(variant(lambda d: (d["hosts"][0].update(fabric_ip="FD00::0001"),
                                          d.update(runtime={"sha256": C.ARCHIVE_SHA256.upper()}))))
    assert cfg.host(0).fabric_ip == "fd00::1"
    assert cfg.runtime.sha256 == C.ARCHIVE_SHA256


def test_odd_but_legal_values_are_accepted() -> None:
    cfg = parse_config(variant(lambda d: (
        d["hosts"][0].update(fabric_iface="eth0.100", user="ops_admin", port=2222, ssh="10.0.0.5",
                             model_path="/data/my_models/é+v4", recipe_dir="/opt/r37-recipe"),
        d["hosts"][2].update(fabric_iface="vlan@bond0", ib_hca=["mlx5_0", "rocep1s0f1"]),
        d.update(ssh={"known_hosts": "~/Library/Application Support/r37/known_hosts"}),
        d["paths"].update(engram="/srv/models/m-engram", cache="/srv/models/mcache"),  # siblings, not nested
        d["model"].update(revision="refs/pr/12"),
        d["hosts"][1].update(fabric_ip="2001:db8::11", ssh="node1.example.com"),
    )))
    assert cfg.host(0).port == 2222
    assert cfg.model.revision == "refs/pr/12"
    assert cfg.host(2).ib_hca == ["mlx5_0", "rocep1s0f1"]
    assert cfg.ssh.known_hosts == "~/Library/Application Support/r37/known_hosts"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.toml")
    assert info.value.problems == [("", "file not found")]


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert info.value.problems == [("", "is a directory, not a file")]


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_bytes(b"[cluster]\nname = \"r\xff37\"\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.problems == [("", "not UTF-8 text (byte 0xff on line 2)")]
    assert info.value.render().startswith(f"{path}: not UTF-8")


def test_ui_section_round_trips() -> None:
    text = variant(sect_set("ui", theme="nord", keymap={"quit": "ctrl+q", "pane.logs": "5,l"}))
    cfg = parse_config(text)
    assert cfg.ui.keymap == {"quit": "ctrl+q", "pane.logs": "5,l"}
    dumped = dump_config(cfg)
    assert '[ui.keymap]\nquit = "ctrl+q"\n"pane.logs" = "5,l"\n' in dumped
    assert parse_config(dumped) == cfg


def test_resolved_paths_prefer_host_overrides() -> None:
    cfg = parse_config(variant(lambda d: d["hosts"][2].update(
        model_path="/nfs/model", engram_path="/local/engram", cache_path="/local/cache", recipe_dir="r")))
    assert (cfg.model_path(2), cfg.engram_path(2), cfg.cache_path(2), cfg.recipe_dir(2)) == (
        "/nfs/model", "/local/engram", "/local/cache", "r")
    assert (cfg.model_path(1), cfg.engram_path(1), cfg.cache_path(1), cfg.recipe_dir(1)) == (
        "/srv/models/m", cfg.paths.engram, cfg.paths.cache, "r37-recipe")
    with pytest.raises(KeyError):
        cfg.host(7)


def test_example_file_loads_and_matches_the_card() -> None:
    cfg = load_config(REPO_ROOT / "cluster.toml.example")
    assert [h.ssh for h in cfg.by_rank()] == ["spark-0", "spark-1", "spark-2", "spark-3"]
    assert cfg.fabric_ips() == [f"192.168.100.{n}" for n in range(10, 14)]
    assert {h.fabric_iface for h in cfg.hosts} == {"enp1s0f0np0"}
    assert all(h.ib_hca == ["rocep1s0f0"] and h.gid_index == 3 for h in cfg.hosts)
    assert cfg.model.repo == C.DEALIGNAI_REPO
    assert cfg.model_path(0) == "/srv/models/DeepSeek-V4.1-Flash-dealignai"
    assert cfg.engram_path(3) == "/srv/engram-local/DeepSeek-V4.1-Flash"
    assert cfg.cache_path(1) == "/srv/cache" and cfg.recipe_dir(2) == "r37-recipe"
    assert (cfg.runtime.image_tag, cfg.runtime.image_id, cfg.runtime.sha256, cfg.runtime.size_bytes) == (
        C.IMAGE_TAG, C.IMAGE_ID, C.ARCHIVE_SHA256, C.ARCHIVE_SIZE)
    assert parse_config(dump_config(cfg)) == cfg


# ---- generated valid configs (shared with test_envfile) --------------------------------------------------

_PATH_CHARS = string.ascii_letters + string.digits + "-_.+@%=,!#^~éß"
_component = st.text(_PATH_CHARS, min_size=1, max_size=10).filter(lambda s: s not in (".", ".."))
abs_paths = st.lists(_component, min_size=1, max_size=4).map(lambda parts: "/" + "/".join(parts))


def _under(top: str) -> st.SearchStrategy[str]:
    """Absolute paths in a tree of their own (model, Engram and cache directories may not overlap)."""
    return abs_paths.map(lambda p: f"/{top}{p}")


_rel_dirs = st.lists(_component, min_size=1, max_size=3).map("/".join).filter(
    lambda p: not p.startswith(("-", "~")))
_recipe_dirs = _rel_dirs | abs_paths.filter(lambda p: normal_path(p) not in SYSTEM_ROOTS)  # not /run, /usr …
_ifaces = st.text(string.ascii_letters + string.digits + "._-@", min_size=1, max_size=15).filter(
    lambda s: s not in (".", "..") and not s.startswith("-"))
_hcas = st.lists(st.from_regex(r"[A-Za-z0-9_]{1,20}", fullmatch=True), min_size=1, max_size=3, unique=True)
_hex = st.sampled_from("0123456789abcdef")


@st.composite
def cluster_configs(draw: st.DrawFn) -> ClusterConfig:
    """Valid configs with 1-6 hosts, IPv4/IPv6 fabric IPs, and paths with odd characters."""
    n = draw(st.integers(1, 6))
    ips = [str(ip) for ip in draw(st.lists(st.ip_addresses(), min_size=n, max_size=n, unique=True))]
    order = draw(st.permutations(range(n)))
    hosts = []
    for i, rank in enumerate(order):
        hosts.append(HostEntry(
            rank=rank, ssh=draw(st.sampled_from([f"spark-{rank}", ips[i]])),
            user=draw(st.none() | st.from_regex(r"[a-z_][a-z0-9_-]{0,8}", fullmatch=True)),
            port=draw(st.none() | st.integers(1, 65535)), fabric_ip=ips[i], fabric_iface=draw(_ifaces),
            ib_hca=draw(_hcas), gid_index=draw(st.integers(0, 255)),
            model_path=draw(st.none() | _under("m")), engram_path=draw(st.none() | _under("e")),
            cache_path=draw(st.none() | _under("c")), recipe_dir=draw(st.none() | _recipe_dirs)))
    api, coord = draw(st.lists(st.integers(1, 65535), min_size=2, max_size=2, unique=True))
    data = {
        "cluster": {"name": draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 _.-]{0,20}", fullmatch=True)),
                    "container_name": draw(st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,20}", fullmatch=True)),
                    "api_port": api, "coord_port": coord},
        "model": {"repo": draw(st.sampled_from(C.CHECKPOINT_REPOS)),
                  "revision": draw(st.none() | st.text(_hex, min_size=40, max_size=40)
                                   | st.sampled_from(["main", "v1.0", "refs/pr/3"])),
                  "path": draw(_under("m")), "shared_readonly": draw(st.booleans())},
        "runtime": {"image_tag": draw(st.sampled_from(
            [C.IMAGE_TAG, "registry.example.com:5000/r37/spark:v1", "ubuntu", "a/b_c:T.1-x"])),
            "sha256": draw(st.text(_hex, min_size=64, max_size=64))},
        "serving": {"maxlen": draw(st.integers(1, 10**7)), "seqs": draw(st.integers(1, 64)),
                    "gmu": draw(st.floats(0, 1, exclude_min=True)), "spec_k": draw(st.integers(0, 8)),
                    "max_batched_tokens": draw(st.integers(1, 10**6)),
                    "local_engram_edges": draw(st.booleans())},
        "paths": {"engram": draw(_under("e")), "cache": draw(_under("c")),

                  "recipe_dir": draw(_recipe_dirs)},
        "ui": {"theme": draw(st.none() | st.sampled_from(["textual-dark", "r37_amber"])),
               "keymap": draw(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_.-]{0,10}", fullmatch=True),
                                              st.sampled_from(["ctrl+q", "f1,question_mark", "j"]),
                                              max_size=3))},
        "hosts": hosts,
    }
    if data["model"]["revision"] is None:
        del data["model"]["revision"]
    return ClusterConfig.model_validate(data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_configs())
def test_dump_round_trip(cfg: ClusterConfig) -> None:
    assert parse_config(dump_config(cfg, header="generated\nfor a test")) == cfg


# ---- check() -----------------------------------------------------------------------------------------


def test_check_summarises_a_good_config(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(variant(host_set(1, user="ops", port=2201)))
    ok, text, data = check(path)
    assert ok and data["ok"]
    assert "RANK  SSH TARGET" in text
    assert "ops@spark-1:2201" in text
    assert [h["fabric_ip"] for h in data["hosts"]] == [f"192.168.100.{n}" for n in range(10, 14)]
    assert data["hosts"][0]["model_path"] == "/srv/models/m"
    assert data["config"]["cluster"]["name"] == "r37"


def test_check_reports_problems(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(variant(host_set(2, fabric_ip="300.1.2.3")))
    ok, text, data = check(path)
    assert not ok
    assert text == f"{path}: hosts[2].fabric_ip: '300.1.2.3' is not an IPv4 or IPv6 address"
    assert data["problems"] == [{"key": "hosts[2].fabric_ip",
                                 "reason": "'300.1.2.3' is not an IPv4 or IPv6 address"}]


def test_stream_frame_ms_default_range_and_error() -> None:
    assert parse_config(variant(lambda d: None)).ui.stream_frame_ms == 300
    assert parse_config(variant(sect_set("ui", stream_frame_ms=0))).ui.stream_frame_ms == 0
    (problem,) = problems_of(variant(sect_set("ui", stream_frame_ms=5000)))
    assert problem[0] == "ui.stream_frame_ms" and "2000" in problem[1]


@pytest.mark.parametrize(("recorder", "key", "reason"), [
    ({"retention_days": 0}, "recorder.retention_days", "out of range (1..3650)"),
    ({"max_mb": 0}, "recorder.max_mb", "out of range"),
    ({"max_mb": "500"}, "recorder.max_mb", ""),
    ({"keep": 3}, "recorder.keep", ""),
])
def test_recorder_section_is_validated(recorder: dict[str, Any], key: str, reason: str) -> None:
    problems = problems_of(variant(lambda d: d.update(recorder=recorder)))
    assert any(k == key and reason in r for k, r in problems), problems


def test_recorder_section_defaults_and_values() -> None:
    assert parse_config(variant(lambda d: None)).recorder.retention_days == 30
    cfg = parse_config(variant(lambda d: d.update(recorder={"enabled": False, "retention_days": 7,
                                                             "max_mb": 50})))
    assert (cfg.recorder.enabled, cfg.recorder.retention_days, cfg.recorder.max_mb) == (False, 7, 50)
