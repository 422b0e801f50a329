"""Every shell line `cockpit.hosts.shell` builds from arbitrary strings runs exactly the intended argv on a
real host: the demo cluster's hosts run each line in a real `bash -c` over asyncssh, the lab's in OpenSSH's
bash. Hypothesis throws quotes, `$(…)`, backticks, `;`, newlines, globs, leading `-`, unicode and spaces
at `command` (argv, env, cwd), `sequence`, `every`, `read_files`, `streamed`, `sections` and
`write_stdin_atomic`; a python3 on the host echoes what it received as JSON, and it must come back identical.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
import uuid
from collections.abc import Coroutine, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.hosts import Fleet, Host, Result
from cockpit.hosts.shell import (
    ShellCommand,
    command,
    every,
    read_files,
    sections,
    sequence,
    streamed,
    write_stdin_atomic,
)
from cockpit.recipe.parsers import split_sections

ECHO = ["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))"]
ENV_ECHO = ["python3", "-c",
            "import sys, os, json; print(json.dumps({k: os.environ.get(k) for k in sys.argv[1:]}))"]
PWD = ["python3", "-c", "import os; print(os.getcwd())"]
NASTY = [
    "", " ", "a b", "'", '"', "'\"'", "$(touch /tmp/r37-pwned)", "`touch /tmp/r37-pwned`", "; rm -rf /",
    "a\nb", "line\r\nfeed", "*", "?", "[a-z]*", "~", "~root", "-n", "--", "-e", "--help", "$HOME", "${PATH}",
    "\\", "\\n", "!", "!!", "&", "&&", "|", "|| true", ">x", "<x", "2>&1", "#", "a#b", "{a,b}", "é",
    "日本語", "emoji 🚀", "\t", "\x1b[31mred", "%s%n", "=", "K=V",
]
# every character a Python str in argv can hold: no NUL (argv is NUL-terminated), no lone surrogates
WORD = st.one_of(st.sampled_from(NASTY),
                 st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=24))
ARGV = st.lists(WORD, min_size=0, max_size=6)
NAME = st.one_of(
    st.sampled_from([n for n in NASTY if n and "/" not in n and n not in (".", "..")]),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00/"), min_size=1, max_size=24)
    .filter(lambda s: s not in (".", "..")),
)
ENV_NAME = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True).map(lambda s: "R37T_" + s)
FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Remote:
    """One connected fleet on an event loop of its own thread, so sync Hypothesis tests can use it."""

    def __init__(self, config: Any):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.fleet = Fleet(config)
        self.call(self._start())

    async def _start(self) -> None:
        self.fleet.start()
        assert await self.fleet.wait_connected(30), [s.state for s in self.fleet.statuses]

    def call(self, coro: Coroutine[Any, Any, Any], timeout: float = 60) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def host(self, rank: int = 1) -> Host:
        return self.fleet[rank]

    def run(self, cmd: ShellCommand, *, rank: int = 1, input: str | None = None) -> Result:
        return self.call(self.host(rank).run(cmd, timeout=30, input=input))

    def stream(self, cmd: ShellCommand, *, rank: int = 1, limit: int | None = None) -> list[str]:
        async def collect() -> list[str]:
            out: list[str] = []
            stream = self.host(rank).stream(cmd)
            try:
                async for line in stream:
                    out.append(line)
                    if limit is not None and len(out) >= limit:
                        break
            finally:
                await stream.aclose()  # type: ignore[attr-defined]
            return out
        return self.call(collect())

    def close(self) -> None:
        self.call(self.fleet.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


def scratch(remote: Remote, base: str) -> str:
    """A fresh directory on the host (its real path, as the host's python would print it)."""
    path = f"{base}/r37-shell-{uuid.uuid4().hex[:8]}"
    res = remote.run(command(["mkdir", "-p", "--", path]))
    assert res.ok, res.stderr
    real = remote.run(command(["python3", "-c", "import os, sys; print(os.path.realpath(sys.argv[1]))",
                               path]))
    return real.stdout.strip()


@pytest.fixture(scope="module")
def remote(demo_cluster) -> Iterator[Remote]:  # type: ignore[no-untyped-def]
    r = Remote(demo_cluster.config)
    try:
        yield r
    finally:
        r.close()


@pytest.fixture(scope="module")
def base(remote: Remote, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = scratch(remote, str(tmp_path_factory.mktemp("shell")))
    yield path
    remote.run(command(["rm", "-rf", "--", path]))


def echoed(res: Result) -> Any:
    assert res.ok, (res.command, res.stderr)
    return json.loads(res.stdout)


@FUZZ
@given(argv=ARGV)
def test_command_runs_exactly_the_argv(remote: Remote, argv: list[str]) -> None:
    assert echoed(remote.run(command([*ECHO, *argv]))) == argv


@FUZZ
@given(env=st.dictionaries(ENV_NAME, WORD, max_size=4), argv=ARGV)
def test_env_values_arrive_unchanged(remote: Remote, env: dict[str, str], argv: list[str]) -> None:
    assert echoed(remote.run(command([*ENV_ECHO, *env], env=env))) == env
    assert echoed(remote.run(command([*ECHO, *argv], env=env))) == argv


def test_env_refuses_a_name_the_shell_would_read_as_syntax() -> None:
    for bad in ("A B", "$(x)", "A;B", "1A", "", "A=B"):
        with pytest.raises(ValueError):
            command(["true"], env={bad: "v"})


@FUZZ
@given(name=NAME, argv=ARGV)
def test_cwd_with_odd_names(remote: Remote, base: str, name: str, argv: list[str]) -> None:
    path = f"{base}/{name}"
    assert remote.run(command(["mkdir", "-p", "--", path])).ok
    res = remote.run(command(PWD, cwd=path))
    assert res.ok, res.stderr
    assert res.stdout == path + "\n"
    assert echoed(remote.run(command([*ECHO, *argv], cwd=path, env={"R37T_X": name}))) == argv


def test_relative_cwds_in_a_sequence_do_not_pile_up_and_dash_is_a_name(remote: Remote) -> None:
    rel = f"r37-shell-rel-{uuid.uuid4().hex[:8]}"          # relative to the login's home
    home = remote.run(command(PWD)).stdout.strip()
    assert remote.run(command(["mkdir", "-p", "--", f"{rel}/-"])).ok
    try:
        res = remote.run(sequence(command(PWD, cwd=rel), command(PWD, cwd=rel), command(PWD, cwd=f"{rel}/-"),
                                  command(PWD)))
        assert res.stdout.splitlines() == [f"{home}/{rel}", f"{home}/{rel}", f"{home}/{rel}/-", home]
        dash = remote.run(sequence(command(PWD, cwd=rel), command(PWD, cwd="-")))
        assert not dash.ok or dash.stdout.splitlines()[-1] != f"{home}/{rel}"   # never $OLDPWD
    finally:
        remote.run(command(["rm", "-rf", "--", rel]))
    with pytest.raises(ValueError):
        command(["A=B"], env={"X": "1"})      # env would read the command name as an assignment
    with pytest.raises(ValueError):
        command(["-i"], env={"X": "1"})       # … or as an option


@FUZZ
@given(first=ARGV, second=ARGV, err=WORD)
def test_sequence_and_merged_stderr(remote: Remote, first: list[str], second: list[str], err: str) -> None:
    res = remote.run(sequence(command([*ECHO, *first]), ["false"], command([*ECHO, *second])))
    assert [json.loads(line) for line in res.stdout.splitlines()] == [first, second]
    to_err = ["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1]), file=sys.stderr)", err]
    merged = remote.run(command(to_err, merge_stderr=True))
    assert (json.loads(merged.stdout), merged.stderr) == (err, "")


@FUZZ
@given(names=st.lists(NAME, min_size=1, max_size=4, unique=True),
       firsts=st.lists(WORD, min_size=4, max_size=4))
def test_write_stdin_atomic_then_read_files(remote: Remote, base: str, names: list[str],
                                            firsts: list[str]) -> None:
    d = scratch(remote, base)
    paths = [f"{d}/{n}" for n in names]
    expected = ""
    for path, first in zip(paths, firsts, strict=False):
        first = first.replace("\n", " ").replace("\r", " ")  # one line: read_files prints the first
        body = f"{first}\nsecond line {path}\n"
        assert remote.run(write_stdin_atomic(path), input=body).ok
        assert remote.run(command(["cat", "--", path])).stdout == body
        refused = remote.run(write_stdin_atomic(path), input="other\n")      # never replaces by default
        assert refused.exit_status == 17
        assert remote.run(command(["cat", "--", path])).stdout == body
        digest = hashlib.sha256(body.encode()).hexdigest()
        assert remote.run(write_stdin_atomic(path, replace_sha256=digest), input=body).ok
        expected += f"{path}\t{first}\n"
    res = remote.run(read_files([*paths, f"{d}/missing $(touch {d}/pwned)"]))
    assert res.stdout == expected
    listing = remote.run(command(["python3", "-c", "import os, sys, json; print(json.dumps(sorted(os.listdir("
                                  "sys.argv[1]))))", d]))
    assert echoed(listing) == sorted(names)  # nothing else was created (no temp files, no `pwned`)


@FUZZ
@given(argv=ARGV, status=st.integers(0, 7))
def test_streamed_reports_the_lines_and_the_status(remote: Remote, argv: list[str], status: int) -> None:
    marker = "@@r37-test-" + uuid.uuid4().hex[:8]
    cmd = sequence(command([*ECHO, *argv]), command(["sh", "-c", f"exit {status}"]))
    lines = [line for line in remote.stream(streamed(cmd, marker)) if line]
    assert [json.loads(lines[0]), lines[1:]] == [argv, [f"{marker} exit {status}"]]


@FUZZ
@given(parts=st.lists(ARGV, min_size=1, max_size=3))
def test_sections_frame_each_command(remote: Remote, parts: list[list[str]]) -> None:
    marker = "@@r37-sec-" + uuid.uuid4().hex[:8]
    framed = [(f"part-{i}", command([*ECHO, *argv])) for i, argv in enumerate(parts)]
    res = remote.run(sections(framed, marker))
    got = split_sections(res.stdout, marker)
    assert [(k, json.loads(s.output), s.status) for k, s in got.items()] == \
        [(f"part-{i}", argv, 0) for i, argv in enumerate(parts)]


@settings(max_examples=10, deadline=None)
@given(argv=ARGV)
def test_every_repeats_the_argv(remote: Remote, argv: list[str]) -> None:
    marker = "@@r37-tick-" + uuid.uuid4().hex[:8]
    lines = remote.stream(every(0.05, command([*ECHO, *argv]), marker=marker), limit=4)
    assert [json.loads(lines[0]), lines[1], json.loads(lines[2]), lines[3]] == [argv, marker, argv, marker]


def test_section_and_stream_markers_refuse_shell_syntax() -> None:
    for bad in ("a b", "$(x)", "a;b", "`x`", ""):
        with pytest.raises(ValueError):
            sections([("ok", ["true"])], bad)
        with pytest.raises(ValueError):
            sections([(bad, ["true"])], "@@ok")
        with pytest.raises(ValueError):
            streamed(["true"], bad)


@pytest.mark.lab
def test_nasty_strings_on_the_lab_sshd(lab_cluster) -> None:  # type: ignore[no-untyped-def]
    """Real OpenSSH sshd and its bash: the same lines, a fixed handful of nasty strings."""
    r = Remote(lab_cluster.config)
    try:
        d = scratch(r, "/srv")
        assert echoed(r.run(command([*ECHO, *NASTY]))) == NASTY
        env = {f"R37T_{i}": s for i, s in enumerate(NASTY)}
        assert echoed(r.run(command([*ENV_ECHO, *env], env=env))) == env
        for name in ("a b", "$(touch pwned)", "-n", "日本語", "'\"", "a\nb", "*"):
            path = f"{d}/{name}"
            assert r.run(command(["mkdir", "--", path])).ok
            assert r.run(command(PWD, cwd=path)).stdout == path + "\n"
            assert r.run(write_stdin_atomic(f"{path}/f"), input="first\nsecond\n").ok
            assert r.run(read_files([f"{path}/f"])).stdout == f"{path}/f\tfirst\n"
        marker = "@@r37-lab-" + uuid.uuid4().hex[:8]
        lines = [ln for ln in r.stream(streamed(command([*ECHO, *NASTY]), marker)) if ln]
        assert json.loads(lines[0]) == NASTY and lines[1:] == [f"{marker} exit 0"]
        sec = split_sections(r.run(sections([("one", command([*ECHO, *NASTY]))], marker)).stdout, marker)
        assert json.loads(sec["one"].output) == NASTY
        assert r.run(command(["test", "-e", f"{d}/pwned"])).exit_status == 1
        assert r.run(command(["test", "-e", "/tmp/r37-pwned"])).exit_status == 1
        r.run(command(["rm", "-rf", "--", d]))
    finally:
        r.close()
