"""Hostile cluster.toml and cluster.env files: a committed corpus plus generated ones.

For every file, loading gives a valid config or a ConfigError naming the file, the key (when there is
one) and a reason — never another exception — and `r37-cockpit config check` / `config import-env` exit
0 or 2 (never 70, an internal error) and print no raw control, C1 or bidi character.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from make_corpus import COMMITTED_MAX, CORPUS, GOOD_ENV, GOOD_TOML, all_cases

from cockpit.cli import main as cli_main
from cockpit.config import ClusterConfig, ConfigError, load_config, parse_config, read_text_file
from cockpit.envfile import EnvFileError, config_from_env, parse_env
from cockpit.errorcodes import CODES

CASES = all_cases()
# valid files among the hostile ones: CRLF line ends, a private-use character (printable, no control),
# an escape inside a cluster.env comment (never read)
ACCEPTED = {"good.toml", "crlf.toml", "private-use.toml", "good.env", "esc-in-comment.env"}
# what a terminal could act on: C0 controls but LF, DEL, C1, line/paragraph separators, bidi controls
RAW_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def case_file(tmp_path: Path, name: str) -> Path:
    """The committed corpus file, or (huge cases) the generated one written to tmp_path."""
    committed = CORPUS / name
    if committed.exists():
        return committed
    path = tmp_path / name
    path.write_bytes(CASES[name])
    return path


def load_any(path: Path) -> ClusterConfig:
    """load_config for a .toml, the cluster.env import for a .env."""
    if path.suffix == ".toml":
        return load_config(path)
    return config_from_env(parse_env(read_text_file(path, "cluster.env"), path), path)


def assert_named(exc: ConfigError, path: Path) -> None:
    assert exc.path == path
    assert exc.problems and exc.code in CODES
    for key, reason in exc.problems:
        assert isinstance(key, str) and isinstance(reason, str) and reason.strip()
    text = exc.render()
    assert RAW_CONTROL.search(text) is None, repr(text[:300])
    assert all(line.startswith(str(path)) for line in text.splitlines()), text[:300]


def test_committed_corpus_is_what_the_generator_writes() -> None:
    committed = {p.name: p.read_bytes() for p in CORPUS.iterdir()}
    expected = {k: v for k, v in CASES.items() if len(v) <= COMMITTED_MAX}
    assert committed == expected
    assert len([n for n in CASES if n.endswith(".toml")]) >= 50
    assert len([n for n in CASES if n.endswith(".env")]) >= 30


@pytest.mark.parametrize("name", sorted(CASES))
def test_file_loads_or_names_file_key_and_reason(tmp_path: Path, name: str) -> None:
    path = case_file(tmp_path, name)
    try:
        cfg = load_any(path)
    except ConfigError as exc:
        assert_named(exc, path)
        if path.suffix == ".env" and not isinstance(exc, EnvFileError):
            assert "cluster.env" in exc.render() or exc.problems[0][0] == ""
    else:
        assert isinstance(cfg, ClusterConfig)
        assert name in ACCEPTED, f"{name} was accepted"


@pytest.mark.parametrize("name", sorted(n for n in CASES if n.endswith(".toml")))
def test_config_check_exits_0_or_2_and_prints_no_raw_control(tmp_path: Path, name: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = case_file(tmp_path, name)
    code = cli_main(["config", "check", "--config", str(path)])
    out = capsys.readouterr()
    assert code in (0, 2), out.err
    assert RAW_CONTROL.search(out.out + out.err) is None, repr((out.out + out.err)[:300])
    assert code == (0 if name in ACCEPTED else 2)
    code = cli_main(["config", "check", "--config", str(path), "--json"])
    data = json.loads(capsys.readouterr().out)
    assert code in (0, 2) and data["ok"] is (code == 0)


@pytest.mark.parametrize("name", sorted(n for n in CASES if n.endswith(".env")))
def test_config_import_env_exits_0_or_2_and_prints_no_raw_control(tmp_path: Path, name: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = case_file(tmp_path, name)
    out_toml = tmp_path / "out" / "cluster.toml"
    out_toml.parent.mkdir()
    code = cli_main(["config", "import-env", str(path), "--out", str(out_toml)])
    out = capsys.readouterr()
    assert code in (0, 2), out.err
    assert RAW_CONTROL.search(out.out + out.err) is None, repr((out.out + out.err)[:300])
    assert out_toml.exists() is (code == 0)
    if code == 0:
        load_config(out_toml)


@pytest.mark.parametrize("name", ["esc-in-unknown-key.toml", "c1-csi-in-path.toml", "bidi-in-key.toml",
                                  "deep-inline-tables.toml", "too-many-digits.toml", "non-utf8.toml"])
def test_real_cli_process_exits_2_with_neutral_output(name: str) -> None:
    res = subprocess.run([sys.executable, "-m", "cockpit", "config", "check", "--config", str(CORPUS / name)],
                         capture_output=True, timeout=60)
    assert res.returncode == 2, res.stderr
    text = (res.stdout + res.stderr).decode("utf-8")
    assert RAW_CONTROL.search(text) is None, repr(text)
    assert str(CORPUS / name) in text


def test_oversized_and_special_files_are_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.toml"
    big.write_bytes(GOOD_TOML.encode() + b"# " + b"x" * (1 << 20) + b"\n")
    with pytest.raises(ConfigError) as info:
        load_config(big)
    assert "larger than 1 MiB" in info.value.render()
    with pytest.raises(ConfigError) as info:
        load_config(Path("/dev/zero"))
    assert "not a regular file" in info.value.render()


# ---- generated: mutations of a good file ---------------------------------------------------------------

HOSTILE = st.sampled_from(["\x00", "\x1b[2J", "\x1b]52;c;aGk=\x07", "\x9b", "\x85", "\u202e", "\u2066",
                           "\u2028", "\u200b", "\x7f", "\r", "\n", " ", "$(id)", "`id`", "'", '"', "\\",
                           "[", "]", "{", "}", "=", "#", ",", "--help", "-", "/", "..", "[[hosts]]\n",
                           "\ufeff", "\ud800", "é", "9" * 40])


@st.composite
def mutated(draw: st.DrawFn, base: str) -> bytes:
    text = base
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["insert", "delete", "truncate", "duplicate"]))
        at = draw(st.integers(0, len(text)))
        if op == "insert":
            text = text[:at] + draw(HOSTILE | st.text(max_size=8)) + text[at:]
        elif op == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 20)):]
        elif op == "truncate":
            text = text[:at]
        else:
            lines = text.splitlines(keepends=True)
            if lines:
                i = draw(st.integers(0, len(lines) - 1))
                lines.insert(i, lines[i])
            text = "".join(lines)
    raw = text.encode("utf-8", "surrogatepass")
    if draw(st.booleans()):
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(st.binary(min_size=1, max_size=4)) + raw[at:]
    return raw


def check_loaded(path: Path) -> None:
    try:
        load_any(path)
    except ConfigError as exc:
        assert_named(exc, path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=mutated(GOOD_TOML))
def test_mutated_toml_never_escapes_config_error(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "cluster.toml"
    path.write_bytes(raw)
    check_loaded(path)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=mutated(GOOD_ENV))
def test_mutated_env_never_escapes_config_error(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "cluster.env"
    path.write_bytes(raw)
    check_loaded(path)


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_text_parses_or_raises_config_error(text: str) -> None:
    try:
        parse_config(text, Path("x.toml"))
    except ConfigError as exc:
        assert RAW_CONTROL.search(exc.render()) is None
    try:
        config_from_env(parse_env(text, "x.env"), "x.env")
    except ConfigError as exc:
        assert RAW_CONTROL.search(exc.render()) is None
