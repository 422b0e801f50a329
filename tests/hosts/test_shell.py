"""Shell lines built in hosts/ run exactly the argv they were built from (checked in a real bash)."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cockpit.hosts.shell import command, every, read_files, sequence, tcp_probe

# printable text including every shell metacharacter; no NUL (argv cannot carry it)
words = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=0, max_size=20)


def bash(line: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=10)


@settings(max_examples=60, deadline=None)
@given(st.lists(words, min_size=1, max_size=5))
def test_command_round_trips_any_argv(argv: list[str]) -> None:
    line = command(["printf", "%s\\0", *argv]).line
    out = subprocess.run(["bash", "-c", line], capture_output=True, timeout=10).stdout
    assert out.split(b"\0")[:-1] == [a.encode("utf-8", "surrogateescape") for a in argv]


def test_env_cwd_and_stderr_merge(tmp_path) -> None:
    line = command(["sh", "-c", 'echo "$X" "$(pwd)"; echo err >&2'], cwd=str(tmp_path),
                   env={"X": "a b;$(touch /tmp/nope)"}, merge_stderr=True).line
    res = bash(line)
    assert res.stdout.splitlines() == [f"a b;$(touch /tmp/nope) {tmp_path}", "err"]


def test_bad_env_name_refused() -> None:
    with pytest.raises(ValueError):
        command(["true"], env={"A;B": "1"})


def test_sequence_runs_all_and_keeps_last_status() -> None:
    res = bash(sequence(["false"], ["echo", "after"]).line)
    assert res.stdout == "after\n" and res.returncode == 0


def test_read_files_prints_path_and_first_line(tmp_path) -> None:
    (tmp_path / "a b").write_text("1\n2\n")
    line = read_files([str(tmp_path / "a b"), str(tmp_path / "missing")]).line
    assert bash(line).stdout == f"{tmp_path / 'a b'}\t1\n"


def test_every_loops_with_marker() -> None:
    line = every(0.01, ["echo", "x"], marker="--").line
    proc = subprocess.Popen(["bash", "-c", line], stdout=subprocess.PIPE, text=True)
    got = [proc.stdout.readline() for _ in range(4)]  # type: ignore[union-attr]
    proc.kill()
    proc.wait()
    assert got == ["x\n", "--\n", "x\n", "--\n"]


def test_tcp_probe_closed_port_fails() -> None:
    assert bash(tcp_probe("127.0.0.1", 1, 2).line).returncode != 0


def test_sections_frame_each_command_with_its_status() -> None:
    from cockpit.hosts.shell import sections
    from cockpit.recipe.parsers import split_sections

    line = sections([("a", ["echo", "hi"]), ("b", ["sh", "-c", "printf x; echo err >&2; exit 3"]),
                     ("c", ["cat"]), ("d", ["printf", "%s", "it's; $(x)"])], "@@m-1").line
    got = split_sections(subprocess.run(["bash", "-c", line], capture_output=True, text=True, input="stdin",
                                        timeout=10).stdout, "@@m-1")
    assert [(s.label, s.output, s.status) for s in got.values()] == [
        ("a", "hi\n", 0), ("b", "xerr\n", 3), ("c", "", 0), ("d", "it's; $(x)", 0)]
    with pytest.raises(ValueError):
        sections([("bad label", ["true"])], "@@m")


def test_streamed_splits_carriage_returns_and_reports_status() -> None:
    from cockpit.hosts.shell import streamed

    line = streamed(["sh", "-c", "printf 'a 1%%\\ra 50%%\\r' >&2; echo done; exit 4"], "@@s-1").line
    res = subprocess.run(["bash", "-c", line], capture_output=True, text=True, input="ignored", timeout=10)
    assert res.stdout.splitlines() == ["a 1%", "a 50%", "done", "", "@@s-1 exit 4"]
    with pytest.raises(ValueError):
        streamed(["true"], "bad marker")


def test_write_stdin_atomic_never_clobbers_and_replaces_only_the_shown_file(tmp_path) -> None:
    import hashlib

    from cockpit.hosts.shell import write_stdin_atomic

    target = tmp_path / "dir x" / "cluster.env"
    target.parent.mkdir()

    def write(text: str, **kw: str) -> int:
        line = write_stdin_atomic(str(target), **kw).line
        return subprocess.run(["bash", "-c", line], input=text, text=True, timeout=10).returncode

    assert write("A='1'\n") == 0 and target.read_text() == "A='1'\n"
    assert oct(target.stat().st_mode & 0o777) == "0o644"
    assert write("B=2\n") == 17 and target.read_text() == "A='1'\n"          # no clobber
    assert write("B=2\n", replace_sha256="0" * 64) == 17 and target.read_text() == "A='1'\n"
    shown = hashlib.sha256(b"A='1'\n").hexdigest()
    assert write("B=2\n", replace_sha256=shown) == 0 and target.read_text() == "B=2\n"
    assert sorted(p.name for p in target.parent.iterdir()) == ["cluster.env"]   # no temp file left
    with pytest.raises(ValueError):
        write_stdin_atomic("x", replace_sha256="nothex")


def test_every_changed_sends_a_repeated_round_as_one_line(tmp_path) -> None:
    """The watcher's look at a steady container: the first round whole, then `MARKER =` while nothing
    changed, the whole round again (with its status) when its output or status changed."""
    from cockpit.hosts.shell import SAME, every_changed
    state = tmp_path / "state"
    state.write_text("a\n")
    script = tmp_path / "look"
    script.write_text('cat "$1"; echo err >&2; [ "$(cat "$1")" = a ]\n')
    line = every_changed(0.05, ["sh", str(script), str(state)], marker="@@m-1").line
    proc = subprocess.Popen(["bash", "-c", line], stdout=subprocess.PIPE, text=True)
    out = proc.stdout
    assert out is not None
    got = [out.readline() for _ in range(4)]
    assert got == ["a\n", "err\n", "@@m-1 0\n", f"@@m-1 {SAME}\n"], got
    state.write_text("b\n")
    lines = []
    while (line := out.readline()) != "@@m-1 1\n":      # the changed round, whole, with its status
        lines.append(line)
    proc.kill()
    proc.wait()
    assert lines[-2:] == ["b\n", "err\n"] and set(lines[:-2]) <= {f"@@m-1 {SAME}\n"}
    with pytest.raises(ValueError):
        every_changed(1, ["true"], marker="bad marker")
