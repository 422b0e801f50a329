"""cluster.env: the non-executing reader, config import, per-rank export, bash agreement, CLI helpers."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_config import cluster_configs

from cockpit import constants as C
from cockpit.cli.config_cmd import export_env, import_env
from cockpit.config import ClusterConfig, ConfigError, load_config, parse_config
from cockpit.envfile import (
    ENV_VARS,
    EnvFileError,
    config_from_env,
    env_for_rank,
    env_values,
    parse_env,
)

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash not installed")

CARD_ENV = """\
# cluster.env for the four Sparks
NODE_IPS=(
  192.168.100.10   # head
  "192.168.100.11" '192.168.100.12'
  192.168.100.13
)
export FABRIC_IFACE=enp1s0f0np0
IB_HCA=rocep1s0f0
IB_GID_INDEX=3
MODEL_PATH="/srv/models/DeepSeek-V4.1-Flash-dealignai"
ENGRAM_PATH='/srv/engram-local/DeepSeek-V4.1-Flash'
CACHE_PATH=/srv/cache   # local disk
IMAGE=local/ds41-r37-spark:runtime
CONTAINER_NAME=ds41_r37
API_PORT=8000
MASTER_PORT=29543
MAXLEN=600000
SEQS=8
GMU=0.81
SPEC_K=3
MAX_BATCHED_TOKENS=4096
R37_USE_LOCAL_ENGRAM_EDGES=1
"""


def bash_values(env_file: Path, names: list[str], arrays: set[str]) -> dict[str, str | list[str]]:
    """Source the file in bash (the test machine's shell, never our code) and read the variables back."""
    script = ['source "$1"']
    for name in names:
        if name in arrays:
            script.append(f'printf "%s\\0" {name} "${{#{name}[@]}}" "${{{name}[@]}}"')
        else:
            script.append(f'printf "%s\\0" {name} 1 "${{{name}}}"')
    out = subprocess.run([BASH, "--noprofile", "--norc", "-c", "\n".join(script), "bash", str(env_file)],
                         capture_output=True, check=True).stdout.decode()
    fields = out.split("\0")[:-1]
    result: dict[str, str | list[str]] = {}
    i = 0
    while i < len(fields):
        name, count = fields[i], int(fields[i + 1])
        items = fields[i + 2: i + 2 + count]
        result[name] = items if name in arrays else items[0]
        i += 2 + count
    return result


# ---- reading ------------------------------------------------------------------------------------------


def test_parse_card_style_file() -> None:
    values = parse_env(CARD_ENV, "cluster.env")
    assert values["NODE_IPS"] == [f"192.168.100.{n}" for n in range(10, 14)]
    assert values["FABRIC_IFACE"] == "enp1s0f0np0"
    assert values["MODEL_PATH"] == "/srv/models/DeepSeek-V4.1-Flash-dealignai"
    assert values["CACHE_PATH"] == "/srv/cache"
    assert values.lines["FABRIC_IFACE"] == 7
    assert list(values) == list(ENV_VARS)


ACCEPTED = """\
A='single $quoted `x` "y"'
B="dq \\"esc\\" \\\\ \\$ \\` kept\\n"
C=bare/word#notacomment
D=con"cat"'enated'\\ word
E=
F=()
G=( 'a b' "c"d  e\\ f   # comment inside the array
    '' )
H="multi
line"
  export   I=x  # trailing comment
J=a!b%c+d=e,f
"""


def test_accepted_constructs() -> None:
    values = parse_env(ACCEPTED)
    assert values == {
        "A": 'single $quoted `x` "y"', "B": 'dq "esc" \\ $ ` kept\\n', "C": "bare/word#notacomment",
        "D": "concatenated word", "E": "", "F": [], "G": ["a b", "cd", "e f", ""], "H": "multi\nline",
        "I": "x", "J": "a!b%c+d=e,f",
    }


@needs_bash
def test_accepted_constructs_agree_with_bash(tmp_path: Path) -> None:
    path = tmp_path / "cluster.env"
    path.write_text(ACCEPTED)
    values = parse_env(ACCEPTED)
    arrays = {k for k, v in values.items() if isinstance(v, list)}
    assert bash_values(path, list(values), arrays) == dict(values)


REFUSED = [
    ("X=$(id)", 1, "command substitution $(...)"),
    ("X=`id`", 1, "command substitution `...`"),
    ("X=$HOME", 1, "variable expansion $H"),
    ("X=${HOME}", 1, "variable expansion ${...}"),
    ("X=$((1+2))", 1, "arithmetic expansion"),
    ('X="a$HOME"', 1, "inside double quotes"),
    ('X="$(id)"', 1, "command substitution $(...) is not allowed inside double quotes"),
    ('X="`id`"', 1, "command substitution `...` is not allowed inside double quotes"),
    ("X=$'a\\n'", 1, "ANSI-C quoting"),
    ("X=1; Y=2", 1, "';' (command separator)"),
    ("X=1 && rm -rf /", 1, "'&&' (command list)"),
    ("X=1 || true", 1, "'||' (command list)"),
    ("X=1 | cat", 1, "'|' (pipe)"),
    ("X=1 &", 1, "'&' (background job)"),
    ("X=1 > /tmp/f", 1, "'>' (redirection)"),
    ("X=1 <<EOF", 1, "'<' (redirection)"),
    ("source other.env", 1, "'source' would run another file"),
    (". other.env", 1, "'.' (source) would run another file"),
    ("echo hi", 1, "command 'echo' is not allowed"),
    ("declare -a X=(1)", 1, "command 'declare' is not allowed"),
    ("if true; then X=1; fi", 1, "shell keyword 'if'"),
    ("f() { :; }", 1, "function definition f()"),
    ("{ X=1; }", 1, "command group"),
    ("(X=1)", 1, "subshell"),
    ("X = 1", 1, "spaces around '='"),
    ("X=1 Y=2", 1, "only one assignment per line"),
    ("X=1 cmd", 1, "a command after an assignment"),
    ("export X", 1, "'export X' without '=value'"),
    ("X+=1", 1, "append"),
    ("X[0]=1", 1, "array element assignment"),
    ("X=(a [1]=b)", 1, "indexed array elements"),
    ("X=(a\n  $(id) b)", 2, "command substitution $(...)"),
    ("X=(a b", 1, "unterminated array (opened on line 1)"),
    ("\nX='abc\n", 2, "unterminated single quote (opened on line 2)"),
    ('X="abc', 1, "unterminated double quote"),
    ("X=a*", 1, "glob pattern"),
    ("X=(a?)", 1, "glob pattern"),
    ("X={a,b}", 1, "brace expansion"),
    ("X=~/foo", 1, "'~' would be expanded"),
    ("X=a\\\nb", 1, "line continuation"),
    ("X=1\r\n", 1, "Windows line endings"),
    ("1X=2", 1, "is not a NAME=value assignment"),
    ("X=a\x00b", 1, "NUL byte"),
]


@pytest.mark.parametrize(("text", "line", "reason"), REFUSED, ids=[t for t, _, _ in REFUSED])
def test_refused_constructs(text: str, line: int, reason: str) -> None:
    with pytest.raises(EnvFileError) as info:
        parse_env(text, "cluster.env")
    entries = info.value.entries
    assert any(ln == line and reason in r for ln, _, r in entries), entries
    assert info.value.render().startswith(f"cluster.env:{line}: ")


def test_duplicate_assignment_and_several_errors_listed() -> None:
    text = "A=1\nB=$(id)\nA=2\nC=ok\nD=`x`\n"
    with pytest.raises(EnvFileError) as info:
        parse_env(text, Path("/r/cluster.env"))
    assert info.value.render().splitlines() == [
        "/r/cluster.env:2: command substitution $(...) is not allowed",
        "/r/cluster.env:3: A: assigned twice (first on line 1)",
        "/r/cluster.env:5: command substitution `...` is not allowed",
    ]
    assert isinstance(info.value, ConfigError)


def test_error_inside_array_does_not_cascade() -> None:
    with pytest.raises(EnvFileError) as info:
        parse_env("X=(a\n $HOME\n c)\nY=ok\nZ=$Q\n")
    assert [ln for ln, _, _ in info.value.entries] == [2, 5]


# ---- building a config ----------------------------------------------------------------------------------


def test_config_from_card_env() -> None:
    cfg = config_from_env(parse_env(CARD_ENV), "cluster.env")
    assert cfg.ranks == [0, 1, 2, 3]
    assert [h.ssh for h in cfg.by_rank()] == cfg.fabric_ips() == [f"192.168.100.{n}" for n in range(10, 14)]
    assert all(h.fabric_iface == "enp1s0f0np0" and h.ib_hca == ["rocep1s0f0"] and h.gid_index == 3
               for h in cfg.hosts)
    assert cfg.model.repo == C.DEALIGNAI_REPO
    assert cfg.model_path(3) == "/srv/models/DeepSeek-V4.1-Flash-dealignai"
    assert (cfg.serving.maxlen, cfg.serving.seqs, cfg.serving.gmu, cfg.serving.spec_k) == (600000, 8, 0.81, 3)
    assert cfg.serving.local_engram_edges is True
    assert cfg.cluster.coord_port == 29543


def test_several_hcas_and_standard_checkpoint() -> None:
    text = CARD_ENV.replace("IB_HCA=rocep1s0f0", "IB_HCA=rocep1s0f0,roceP2p1s0f0").replace(
        "DeepSeek-V4.1-Flash-dealignai", "DeepSeek-V4.1-Flash")
    cfg = config_from_env(parse_env(text))
    assert cfg.host(2).ib_hca == ["rocep1s0f0", "roceP2p1s0f0"]
    assert cfg.model.repo == C.STANDARD_REPO
    assert "IB_HCA=rocep1s0f0,roceP2p1s0f0\n" in env_for_rank(cfg, 2)


def card_env_with(name: str, assignment: str | None) -> str:
    """CARD_ENV with NAME's assignment (a multi-line array too) replaced, or dropped when None."""
    lines = CARD_ENV.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.lstrip("export ").startswith(name + "="))
    end = start
    if lines[start].rstrip().endswith("("):
        while not lines[end].startswith(")"):
            end += 1
    return "".join([*lines[:start], *([assignment + "\n"] if assignment is not None else []),
                    *lines[end + 1:]])


BAD_ENV = [
    ("NODE_IPS", "NODE_IPS=(192.168.100.10 300.1.2.3)", "NODE_IPS",
     "rank 1: '300.1.2.3' is not an IPv4 or IPv6 address"),
    ("NODE_IPS", "NODE_IPS=(192.168.100.10 192.168.100.10)", "NODE_IPS",
     "rank 1: '192.168.100.10' is also the fabric IP of rank 0"),
    ("NODE_IPS", "NODE_IPS='192.168.100.10 192.168.100.11'", "NODE_IPS", "must be a bash array"),
    ("NODE_IPS", "NODE_IPS=()", "NODE_IPS", "is empty"),
    ("API_PORT", "API_PORT=80x", "API_PORT", "'80x' is not a whole number"),
    ("API_PORT", "API_PORT=29543", "MASTER_PORT", "same as the API port"),
    ("MASTER_PORT", "MASTER_PORT=99999", "MASTER_PORT", "port 99999 is out of range"),
    ("GMU", "GMU=1.2", "GMU", "gmu 1.2 is out of range (0, 1]"),
    ("GMU", "GMU=nan", "GMU", "'nan' is not a number"),
    ("IB_HCA", "IB_HCA=(rocep1s0f0)", "IB_HCA", "not an array (comma-separated"),
    ("IB_HCA", "IB_HCA='roce;x'", "IB_HCA", "is not a valid RDMA device name"),
    ("FABRIC_IFACE", "FABRIC_IFACE='a b'", "FABRIC_IFACE", "network interface name"),
    ("IB_GID_INDEX", "IB_GID_INDEX=300", "IB_GID_INDEX", "out of range (0..255)"),
    ("CACHE_PATH", "CACHE_PATH=cache", "CACHE_PATH", "is not an absolute path"),
    ("CONTAINER_NAME", "CONTAINER_NAME='ds 41'", "CONTAINER_NAME", "docker container name"),
    ("R37_USE_LOCAL_ENGRAM_EDGES", "R37_USE_LOCAL_ENGRAM_EDGES=yes", "R37_USE_LOCAL_ENGRAM_EDGES",
     "must be 0 or 1"),
    ("SEQS", "SEQS=8\nHF_TOKEN=secret", "HF_TOKEN", "unknown variable"),
    ("MODEL_PATH", None, "MODEL_PATH", "required variable is missing"),
    # issue 11: option-like names, unsafe characters, system and overlapping directories
    ("FABRIC_IFACE", "FABRIC_IFACE=--help", "FABRIC_IFACE", "would be read as a command option"),
    ("FABRIC_IFACE", "FABRIC_IFACE='-oProxy'", "FABRIC_IFACE", "would be read as a command option"),
    ("IB_HCA", "IB_HCA=rocep1s0f0,--help", "IB_HCA", "would be read as a command option"),
    ("MODEL_PATH", "MODEL_PATH=/", "MODEL_PATH", "is a system directory (/)"),
    ("CACHE_PATH", "CACHE_PATH=/usr", "CACHE_PATH", "is a system directory (/usr)"),
    ("ENGRAM_PATH", "ENGRAM_PATH=/srv/models/DeepSeek-V4.1-Flash-dealignai", "ENGRAM_PATH",
     "is the same directory as model.path"),
    ("CACHE_PATH", "CACHE_PATH=/srv/engram-local/DeepSeek-V4.1-Flash/c", "CACHE_PATH",
     "lies inside paths.engram"),
    ("MODEL_PATH", "MODEL_PATH='/srv/my models/x'", "MODEL_PATH", "contains a space"),
    ("MODEL_PATH", "MODEL_PATH='/srv/\u202emodels'", "MODEL_PATH", "bidirectional override"),
    ("ENGRAM_PATH", "ENGRAM_PATH='/srv/e\x9bx'", "ENGRAM_PATH", "control character (U+009B)"),
]


@pytest.mark.parametrize(("name", "assignment", "key", "reason"), BAD_ENV,
                         ids=[f"{b[2]}:{b[1]}" for b in BAD_ENV])
def test_config_from_env_errors_name_the_variable(name: str, assignment: str | None, key: str,
                                                  reason: str) -> None:
    text = card_env_with(name, assignment)
    assert text != CARD_ENV
    with pytest.raises(ConfigError) as info:
        config_from_env(parse_env(text), "cluster.env")
    matching = [r for k, r in info.value.problems if k == key]
    assert any(reason in r for r in matching), info.value.problems


def test_config_error_render_names_line() -> None:
    with pytest.raises(EnvFileError) as info:
        config_from_env(parse_env(CARD_ENV.replace("GMU=0.81", "GMU=1.2")), "cluster.env")
    assert info.value.render() == "cluster.env:19: GMU: gmu 1.2 is out of range (0, 1]"


# ---- writing and round trips ------------------------------------------------------------------------------


def test_env_for_rank_uses_that_ranks_host_values() -> None:
    cfg = config_from_env(parse_env(CARD_ENV))
    hosts = [h.model_copy(update={"fabric_iface": f"eth{h.rank}", "gid_index": h.rank,
                                  "model_path": "/nfs/model#2" if h.rank == 2 else None})
             for h in cfg.hosts]
    cfg = ClusterConfig.model_validate({**cfg.model_dump(), "hosts": [h.model_dump() for h in hosts]})
    text = env_for_rank(cfg, 2)
    assert "FABRIC_IFACE=eth2\n" in text and "IB_GID_INDEX=2\n" in text
    assert "MODEL_PATH='/nfs/model#2'\n" in text
    assert text.startswith("# cluster.env for rank 2 of 4")
    names = [line.split("=", 1)[0] for line in text.splitlines() if not line.startswith("#")]
    assert names == list(ENV_VARS)


@needs_bash
def test_bash_sources_exactly_the_values(tmp_path: Path) -> None:
    cfg = parse_config(
        '[model]\npath = "/srv/my_models/ok"\n[paths]\nengram = "/srv/eng-ram/!#%^,=+@é~"\n'
        'cache = "/srv/~cache/a^^b"\n'
        '[[hosts]]\nrank = 1\nssh = "b"\nfabric_ip = "10.0.0.2"\nfabric_iface = "e@1"\nib_hca = "z"\n'
        '[[hosts]]\nrank = 0\nssh = "a"\nfabric_ip = "fd00::1"\nfabric_iface = "eth0.100"\n'
        'ib_hca = ["x", "y_1"]\n')
    path = tmp_path / "cluster.env"
    for rank in (0, 1):
        path.write_text(env_for_rank(cfg, rank))
        expected = env_values(cfg, rank)
        assert bash_values(path, list(ENV_VARS), {"NODE_IPS"}) == expected
    assert expected["NODE_IPS"] == ["fd00::1", "10.0.0.2"]


def _carried_fields(cfg: ClusterConfig, rank: int) -> tuple[object, ...]:
    host = cfg.host(rank)
    return (cfg.fabric_ips(), host.fabric_iface, host.ib_hca, host.gid_index, cfg.model_path(rank),
            cfg.engram_path(rank), cfg.cache_path(rank), cfg.runtime.image_tag, cfg.cluster.container_name,
            cfg.cluster.api_port, cfg.cluster.coord_port, cfg.serving)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster_configs(), st.data())
def test_env_round_trip_is_lossless(cfg: ClusterConfig, data: st.DataObject) -> None:
    rank = data.draw(st.sampled_from(cfg.ranks))
    text = env_for_rank(cfg, rank)
    again = config_from_env(parse_env(text, "cluster.env"), "cluster.env")
    assert env_for_rank(again, rank) == text
    assert _carried_fields(again, rank) == _carried_fields(cfg, rank)


@needs_bash
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                 HealthCheck.function_scoped_fixture])
@given(cluster_configs(), st.data())
def test_generated_env_agrees_with_bash(tmp_path: Path, cfg: ClusterConfig, data: st.DataObject) -> None:
    rank = data.draw(st.sampled_from(cfg.ranks))
    path = tmp_path / "cluster.env"
    path.write_text(env_for_rank(cfg, rank))
    assert bash_values(path, list(ENV_VARS), {"NODE_IPS"}) == env_values(cfg, rank)
    assert dict(parse_env(path.read_text())) == env_values(cfg, rank)


# ---- import / export commands ------------------------------------------------------------------------------


def test_import_env_writes_toml_and_refuses_to_overwrite(tmp_path: Path) -> None:
    src, dst = tmp_path / "cluster.env", tmp_path / "cluster.toml"
    src.write_text(CARD_ENV)
    ok, text, _ = import_env(src, dst)
    assert ok, text
    assert "review hosts[].ssh" in text
    cfg = load_config(dst)
    assert cfg == config_from_env(parse_env(CARD_ENV))
    assert dst.read_text().startswith("# cluster.toml imported by r37-cockpit from cluster.env.")
    before = dst.read_text()
    ok, text, _ = import_env(src, dst)
    assert not ok and "exists" in text and "--force" in text
    assert dst.read_text() == before
    src.write_text(CARD_ENV.replace("SEQS=8", "SEQS=4"))
    ok, text, _ = import_env(src, dst, force=True)
    assert ok and load_config(dst).serving.seqs == 4
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.env", "cluster.toml"]


def test_import_env_reports_bad_input_without_writing(tmp_path: Path) -> None:
    src, dst = tmp_path / "cluster.env", tmp_path / "cluster.toml"
    src.write_text(CARD_ENV.replace("SEQS=8", "SEQS=$(nproc)"))
    ok, text, data = import_env(src, dst)
    assert not ok
    assert text == f"{src}:18: command substitution $(...) is not allowed"
    assert data["problems"] == [{"key": "", "reason": "command substitution $(...) is not allowed"}]
    assert not dst.exists()
    src.write_bytes(b"NODE_IPS=(\xff)\n")
    ok, text, _ = import_env(src, dst)
    assert not ok and "not UTF-8" in text
    ok, text, _ = import_env(tmp_path / "missing.env", dst)
    assert not ok and "cluster.env not found" in text


def test_import_env_refuses_option_like_iface_and_names_it(tmp_path: Path) -> None:
    src, dst = tmp_path / "cluster.env", tmp_path / "cluster.toml"
    src.write_text(CARD_ENV.replace("export FABRIC_IFACE=enp1s0f0np0", "FABRIC_IFACE=--help"))
    ok, text, data = import_env(src, dst)
    assert not ok and not dst.exists()
    assert text.startswith(f"{src}:7: FABRIC_IFACE: '--help' is not a valid network interface name")
    assert data["problems"][0]["key"] == "FABRIC_IFACE"


def test_exported_files_follow_the_umask(tmp_path: Path) -> None:
    cfg = config_from_env(parse_env(CARD_ENV))
    old = os.umask(0o027)
    try:
        ok, text, _ = export_env(cfg, 0, tmp_path / "a.env")
        assert ok, text
        os.umask(0o002)
        ok, text, _ = export_env(cfg, 0, tmp_path / "b.env")
        assert ok, text
        os.umask(0o077)
        src = tmp_path / "cluster.env"
        src.write_text(CARD_ENV)
        ok, text, _ = import_env(src, tmp_path / "c.toml")
        assert ok, text
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.env").stat().st_mode) == 0o640
    assert stat.S_IMODE((tmp_path / "b.env").stat().st_mode) == 0o664
    assert stat.S_IMODE((tmp_path / "c.toml").stat().st_mode) == 0o600


def test_export_env_stdout_file_and_no_overwrite(tmp_path: Path) -> None:
    cfg = config_from_env(parse_env(CARD_ENV))
    ok, text, data = export_env(cfg, 1, None)
    assert ok and text == env_for_rank(cfg, 1) and data["env"] == text
    out = tmp_path / "cluster.env"
    ok, text, _ = export_env(cfg, 1, out)
    assert ok and out.read_text() == env_for_rank(cfg, 1)
    ok, text, _ = export_env(cfg, 2, out)
    assert not ok and "exists" in text
    assert out.read_text() == env_for_rank(cfg, 1)
    ok, _, _ = export_env(cfg, 2, out, force=True)
    assert ok and out.read_text() == env_for_rank(cfg, 2)
    ok, text, _ = export_env(cfg, 9, None)
    assert not ok and "no host has rank 9" in text
    ok, text, _ = export_env(cfg, 0, tmp_path)
    assert not ok and "is a directory" in text
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cluster.env"]


def test_saved_logs_follow_the_umask_and_never_overwrite(tmp_path: Path) -> None:
    """telemetry.logline.save_lines (the Logs pane's save) creates its file like any program would."""
    from cockpit.telemetry.logline import LogLine, save_lines
    lines = [LogLine(1_700_000_000 * 10**9, 0, "a")]
    old = os.umask(0o027)
    try:
        assert save_lines(tmp_path / "a.log", lines) == 1
        os.umask(0o077)
        assert save_lines(tmp_path / "b.log", lines) == 1
        os.umask(0o022)
        assert save_lines(tmp_path / "a.log", lines, overwrite=True) == 1
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.log").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.log").stat().st_mode) == 0o600
    with pytest.raises(FileExistsError):
        save_lines(tmp_path / "b.log", lines)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.log", "b.log"]
