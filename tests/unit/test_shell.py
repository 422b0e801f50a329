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
