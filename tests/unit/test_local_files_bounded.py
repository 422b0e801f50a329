"""Every local file the cockpit reads from its state and config directories is read bounded: a FIFO is never
waited on, a link to /dev/zero is refused, a huge file is cut at its cap, deep nesting is an error, not a
RecursionError. Each file kind gets each hostile file; each must end at once with the kind's own outcome
(the ledger: kept aside with the `file-corrupt` notice; ui.json: defaults; a theme: a reported problem; a
history session: skipped or noted; a bench summary or prompt file, a chat file, cluster.toml: their
errors naming the file).

A guard alarm turns a hang (the old code blocked in open() on a FIFO, or read /dev/zero forever) into a
failure instead of a stuck test run.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

import pytest

from cockpit.api.chat import FileInputError, read_json_file
from cockpit.bench.prompts import PromptFileError
from cockpit.bench.prompts import load as load_prompts
from cockpit.bench.summary import CompareError, load_earlier
from cockpit.config import ClusterConfig, ConfigError, load_config
from cockpit.files import NotReadable, loads_bounded, read_bounded, read_json
from cockpit.recipe.history import READ_FILE_MAX, read_session
from cockpit.recipe.ledger import MAX_LEDGER_BYTES, Ledger
from cockpit.tui import uistate
from cockpit.tui.themes import load_themes

GUARD_S = 60  # seconds: only a hang gets near it
HUGE = 200 << 20
HOSTILE = ["fifo", "dev-zero", "huge", "deep"]
HEADER = b'{"kind": "session", "id": "20250102-000000-2", "command": "setup", "cluster": "c", "started": 1}\n'


@pytest.fixture(autouse=True)
def no_hang() -> Iterator[None]:
    def hung(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"a read did not return within {GUARD_S} s (it waits on a FIFO or reads forever)")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(GUARD_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def make(path: Path, kind: str, deep: bytes, huge_prefix: bytes = b"") -> Path:
    """`path` made a hostile file of `kind`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "huge":   # sparse: takes no disk
        path.write_bytes(huge_prefix)
        os.truncate(path, HUGE)
    else:
        path.write_bytes(deep)
    return path


DEEP_JSON = b"[" * 100_000


@pytest.mark.parametrize("kind", HOSTILE)
def test_the_ledger_keeps_a_hostile_file_aside_with_the_notice(tmp_path: Path, fixed_config: ClusterConfig,
                                                             kind: str) -> None:
    path = make(tmp_path / "launched.json", kind, DEEP_JSON, b'{"x": {}, "y": "' + b"a" * 100)
    ledger = Ledger(fixed_config, path)
    assert ledger.records() == {} and ledger.pending() == {}
    (notice,) = ledger.pop_warnings()
    assert notice.code == "file-corrupt" and str(path) in notice.message
    (aside,) = tmp_path.glob("launched.json.corrupt-*")
    assert os.path.lexists(aside) and not os.path.lexists(path)
    ledger.record(0, "c" * 64, "ds41_r37", "spark-0")      # a fresh ledger works
    assert Ledger(fixed_config, path).owns(0, "c" * 64)


@pytest.mark.parametrize(("field", "value"), [("container_id", 5), ("launched_at", "yesterday"),
                                              ("rank", True), ("stopped_at", [1])])
def test_a_ledger_record_of_the_wrong_type_is_corrupt_not_dropped(tmp_path: Path, fixed_config: ClusterConfig,
                                                                 field: str, value: object) -> None:
    path = tmp_path / "launched.json"
    ledger = Ledger(fixed_config, path)
    ledger.record(0, "c" * 64, "ds41_r37", "spark-0")
    ledger.record(1, "d" * 64, "ds41_r37", "spark-1")
    data = json.loads(path.read_text())
    data[ledger.key]["1"][field] = value
    original = json.dumps(data)
    path.write_text(original)
    fresh = Ledger(fixed_config, path)
    assert fresh.records() == {}
    (notice,) = fresh.pop_warnings()
    assert notice.code == "file-corrupt" and "rank 1" in notice.message and field in notice.message
    (aside,) = tmp_path.glob("launched.json.corrupt-*")
    assert aside.read_text() == original          # the operator still has the record to act on


def test_a_ledger_record_missing_a_field_or_under_no_rank_is_corrupt(tmp_path: Path,
                                                                    fixed_config: ClusterConfig) -> None:
    ledger = Ledger(fixed_config, tmp_path / "launched.json")
    for broken in ({ledger.key: {"0": {"rank": 0, "name": "x", "target": "t", "launched_at": 1.0}}},
                   {ledger.key: {"zero": {}}}, {ledger.key: []}):
        (tmp_path / "launched.json").write_text(json.dumps(broken))
        assert ledger.records() == {}
    assert [n.code for n in ledger.pop_warnings()] == ["file-corrupt"] * 3


@pytest.mark.parametrize("kind", HOSTILE)
def test_ui_state_falls_back_to_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path))
    make(uistate.path(), kind, DEEP_JSON, b'{"theme": "' + b"x" * 100)
    assert uistate.load() == {}


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_user_theme_is_a_reported_problem(tmp_path: Path, kind: str) -> None:
    themes = tmp_path / "themes"
    path = make(themes / "mine.toml", kind, b"a = " + b"[" * 100_000, b'name = "mine"\n')
    found = load_themes(themes)
    assert "mine" not in found.themes
    (problem,) = [p for p in found.problems if p.path == path]
    assert problem.reason


@pytest.mark.parametrize("kind", HOSTILE)
def test_a_hostile_history_session_is_skipped_or_cut_with_a_note(tmp_path: Path, kind: str) -> None:
    deep = HEADER + b'{"kind": "cmd", "x": ' + b"[" * 100_000 + b"\n" + \
        b'{"kind": "cmd", "t": 1, "rank": 0, "line": "true", "exit": 0, "duration": 0.1}\n'
    path = make(tmp_path / "20250102-000000-2.jsonl", kind, deep, HEADER)
    found = read_session(path)
    if kind in ("fifo", "dev-zero"):
        assert found is None
    elif kind == "huge":
        assert found is not None and any(f"larger than {READ_FILE_MAX >> 20} MiB" in n for n in found.notes)
    else:
        assert found is not None and [e.line for e in found.entries] == ["true"]
        assert any("line 2: not JSON (or nested too deeply)" in n for n in found.notes), found.notes


@pytest.mark.parametrize("kind", HOSTILE)
def test_bench_compare_and_prompt_files_are_errors_naming_the_file(tmp_path: Path, kind: str) -> None:
    summary = make(tmp_path / "run" / "summary.json", kind, DEEP_JSON, b'{"format": "')
    with pytest.raises(CompareError, match=str(summary)):
        load_earlier(summary.parent)
    prompts = make(tmp_path / "prompts.json", kind, DEEP_JSON, b'{"version": "')
    with pytest.raises(PromptFileError, match=str(prompts)):
        load_prompts(prompts)


@pytest.mark.parametrize("kind", HOSTILE)
def test_chat_session_and_tool_files_are_errors_naming_the_file(tmp_path: Path, kind: str) -> None:
    path = make(tmp_path / "session.json", kind, DEEP_JSON, b'{"messages": "')
    with pytest.raises(FileInputError, match=str(path)):
        read_json_file(path)


@pytest.mark.parametrize("kind", HOSTILE)
def test_cluster_toml_is_a_config_error(tmp_path: Path, kind: str) -> None:
    path = make(tmp_path / "cluster.toml", kind, b"a = " + b"[" * 100_000, b'[cluster]\nname = "')
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize(("reader", "arg"), [(read_bounded, MAX_LEDGER_BYTES), (read_json, MAX_LEDGER_BYTES)])
def test_the_reader_refuses_what_is_not_a_regular_file_and_reads_one_byte_past_the_cap(
        tmp_path: Path, reader: Callable[[Path, int], object], arg: int) -> None:
    for kind in ("fifo", "dev-zero"):
        path = make(tmp_path / kind, kind, b"")
        with pytest.raises(NotReadable) as err:
            reader(path, arg)
        assert err.value.kind == "not-regular"
    with pytest.raises(IsADirectoryError):
        reader(tmp_path, arg)
    with pytest.raises(FileNotFoundError):
        reader(tmp_path / "none", arg)
    exact = tmp_path / "exact"
    exact.write_bytes(b"1" * 10)
    assert reader(exact, 10) in (b"1" * 10, 1111111111)
    with pytest.raises(NotReadable) as err:
        reader(exact, 9)
    assert err.value.kind == "too-large"


def test_json_depth_is_bounded_without_recursion() -> None:
    assert loads_bounded("[" * 64 + "]" * 64) is not None
    for text in ("[" * 65 + "]" * 65, '{"a":' * 65 + "1" + "}" * 65, "[" * 1_000_000):
        with pytest.raises(ValueError, match="nested"):
            loads_bounded(text)
    with pytest.raises(ValueError):
        loads_bounded("{")


def test_known_hosts_is_read_bounded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """known_hosts too: a FIFO is refused at once (never a hung connect), a link to /dev/zero at the cap."""
    import os

    import pytest as _pytest

    from cockpit.hosts import known_hosts as kh

    fifo = tmp_path / "known_hosts.fifo"
    os.mkfifo(fifo)
    with _pytest.raises(ValueError, match="not a regular file"):
        kh.load([str(fifo)])
    zero = tmp_path / "known_hosts.zero"
    zero.symlink_to("/dev/zero")
    with _pytest.raises(ValueError):
        kh.load([str(zero)])
    good = tmp_path / "known_hosts"
    good.write_text("[127.0.0.1]:2222 ssh-ed25519 "
                    "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
    assert kh.load([str(good)]) is not None
