"""Log lines: timestamps, neutralised text, the bounded store and its merged order, the follower."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from unittest import mock

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cockpit.telemetry.logstore as logs_mod
from cockpit.hosts.shell import ShellCommand
from cockpit.hosts.state import HostState, HostUnavailable
from cockpit.recipe.containers import ContainerState, worth_following
from cockpit.safetext import neutralise
from cockpit.telemetry.logfollow import FollowEvent, ResumePoint, follow, logs_command
from cockpit.telemetry.logline import (
    LogLine,
    format_line,
    format_timestamp,
    line_from_raw,
    parse_stamped,
    parse_timestamp,
    save_lines,
)
from cockpit.telemetry.logstore import LogStore, RankBuffer

T0 = 1_795_000_000_000_000_000  # 2026-11-18T…Z in ns


def test_parse_docker_fixed_width_timestamp() -> None:
    assert parse_timestamp("2026-11-29T22:59:17.123456789Z") == 1_795_993_157_123_456_789
    assert parse_timestamp("2026-11-29T22:59:17Z") == 1_795_993_157_000_000_000
    assert parse_timestamp("2026-11-29T22:59:17.5Z") == 1_795_993_157_500_000_000
    assert parse_timestamp("2026-11-29T23:59:17.5+01:00") == 1_795_993_157_500_000_000
    assert parse_timestamp("garbage") is None
    assert parse_timestamp("2026-13-29T22:59:17Z") is None


def test_format_round_trips() -> None:
    for ns in (T0, T0 + 1, T0 + 999_999_999):
        assert parse_timestamp(format_timestamp(ns)) == ns


def test_parse_stamped_splits_prefix_and_keeps_the_rest() -> None:
    assert parse_stamped("2026-11-29T22:59:17.000000001Z INFO  two  spaces") == (
        1_795_993_157_000_000_001, "INFO  two  spaces")
    assert parse_stamped("2026-11-29T22:59:17.000000001Z ") == (1_795_993_157_000_000_001, "")
    assert parse_stamped("Error response from daemon: No such container: ds41_r37") is None


def test_neutralise_makes_controls_visible() -> None:
    assert neutralise("plain text") == "plain text"
    assert neutralise("\x1b[31mred\x1b[0m") == "red"                   # colour codes dropped
    assert neutralise("a\x1b]0;title\x07b") == "a␛]0;title␇b"          # other escapes made visible
    assert neutralise("50%\r100%") == "50%␍100%"
    assert neutralise("crlf\r") == "crlf"
    assert neutralise("a\tb") == "a       b"
    assert neutralise("\u202eevil") == "\\u202eevil"                    # bidi override
    assert neutralise("x\x9by") == "x\\x9by"                            # C1 CSI
    assert neutralise("café ✓") == "café ✓"


@given(st.text())
def test_neutralised_text_has_no_control_characters(text: str) -> None:
    out = neutralise(text)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in out)
    assert "\n" not in out


def test_line_from_raw_and_format_line() -> None:
    line = line_from_raw(2, "2026-11-29T22:59:17.123456789Z \x1b[32mINFO\x1b[0m ready")
    assert line == LogLine(1_795_993_157_123_456_789, 2, "INFO ready")
    assert format_line(line) == "2  2026-11-29T22:59:17.123456789Z  INFO ready"
    assert line_from_raw(0, "no stamp") is None


def test_logs_command_is_quoted_argv() -> None:
    cmd = logs_command("ds41_r37", since="2026-11-29T22:59:17.000000001Z", tail=5)
    assert cmd.line == "docker logs -t -f --since 2026-11-29T22:59:17.000000001Z --tail 5 ds41_r37 2>&1"
    assert "'x; rm'" in logs_command("x; rm").line


def test_ring_buffer_drops_oldest_and_counts() -> None:
    buf = RankBuffer(0, capacity=3)
    buf.add([LogLine(T0 + i, 0, str(i)) for i in range(5)])
    assert [ln.text for ln in buf.lines] == ["2", "3", "4"]
    assert (buf.received, buf.dropped) == (5, 2)
    with pytest.raises(ValueError):
        RankBuffer(0, capacity=0)


def test_ring_buffer_clamps_a_clock_step_back() -> None:
    buf = RankBuffer(0)
    buf.add([LogLine(T0 + 10, 0, "a"), LogLine(T0 + 5, 0, "b"), LogLine(T0 + 20, 0, "c")])
    assert [ln.ts for ln in buf.lines] == [T0 + 10, T0 + 10, T0 + 20]
    assert [ln.text for ln in buf.lines] == ["a", "b", "c"]


def _random_batches(seed: int, ranks: int = 4, n: int = 400) -> list[dict[int, list[LogLine]]]:
    rng = random.Random(seed)
    clocks = {r: T0 for r in range(ranks)}
    batches = []
    for _ in range(n // 10):
        batch: dict[int, list[LogLine]] = {}
        for r in range(ranks):
            lines = []
            for _ in range(rng.randint(0, 6)):
                clocks[r] += rng.randint(0, 3_000)
                lines.append(LogLine(clocks[r], r, f"r{r} {clocks[r]}"))
            batch[r] = lines
        batches.append(batch)
    return batches


def test_merged_view_is_time_ordered_across_batches() -> None:
    store = LogStore(range(4))
    every: list[LogLine] = []
    for batch in _random_batches(1):
        store.add(batch)
        for lines in batch.values():
            every.extend(lines)
    assert list(store.merged) == sorted(every)


def test_late_lines_after_a_reconnect_are_merged_into_place() -> None:
    store = LogStore(range(2))
    store.add({0: [LogLine(T0 + i * 10, 0, f"a{i}") for i in range(10)]})
    result = store.add({1: [LogLine(T0 + 15, 1, "late1"), LogLine(T0 + 55, 1, "late2")]}, anchor=3)
    texts = [ln.text for ln in store.merged]
    assert texts[:3] == ["a0", "a1", "late1"] and texts.index("late2") == 7
    assert result.moved_from is not None
    assert result.anchor_shift == 1  # the anchor (a3) moved down by the one line inserted above it
    assert store.merged[3 + result.anchor_shift].text == "a3"
    assert store.late_lines == 2


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 50))
def test_bounded_store_keeps_merged_equal_to_what_the_ranks_hold(seed: int, cap: int) -> None:
    store = LogStore(range(4), capacity=cap)
    for batch in _random_batches(seed, n=200):
        before = len(store.merged)
        anchor = before // 2 if before else None
        top = store.merged[anchor] if anchor is not None else None
        result = store.add(batch, anchor=anchor)
        if top is not None and store.ranks[top.rank].holds(top):
            assert store.merged[anchor + result.anchor_shift] == top  # type: ignore[operator]
    live = sorted(ln for b in store.ranks.values() for ln in b.lines)
    merged = list(store.merged)
    assert merged == sorted(merged)
    assert set(live) <= set(merged)
    assert len(merged) <= len(live) + max(1024, len(live) >> 3)
    assert all(len(b.lines) <= cap for b in store.ranks.values())
    assert store.dropped == store.received - store.live


def test_many_dropped_lines_are_compacted_out_of_the_merged_view() -> None:
    store = LogStore(range(2), capacity=100)
    store.add({1: [LogLine(T0, 1, "old and lonely")]})        # holds the merged front
    for k in range(50):
        store.add({0: [LogLine(T0 + 1 + k * 100 + i, 0, str(i)) for i in range(100)]})
    assert store.ranks[0].dropped == 4900
    assert len(store.merged) <= 101 + 1024
    assert store.merged[0].text == "old and lonely"


def test_save_lines_is_atomic_and_never_overwrites(tmp_path) -> None:
    path = tmp_path / "out.log"
    lines = [LogLine(T0, 0, "a"), None, LogLine(T0 + 1, 3, "b")]
    assert save_lines(path, lines) == 2
    assert path.read_text().splitlines() == [format_line(lines[0]), "--", format_line(lines[2])]  # type: ignore[arg-type]
    with pytest.raises(FileExistsError):
        save_lines(path, [LogLine(T0, 0, "new")])
    assert "new" not in path.read_text()
    assert save_lines(path, [LogLine(T0, 0, "new")], overwrite=True) == 1
    assert path.read_text().endswith("new\n")
    assert [p.name for p in tmp_path.iterdir()] == ["out.log"]  # no temp file left behind


class FakeHost:
    """Scripted `docker logs` runs: each run yields its lines, then ends or loses the host."""

    def __init__(self, runs: list[tuple[list[str], bool]], rank: int = 1):
        self.rank = rank
        self.runs = runs
        self.commands: list[str] = []

    async def stream(self, cmd: ShellCommand) -> AsyncIterator[str]:
        self.commands.append(cmd.line)
        lines, lost = self.runs.pop(0)
        for line in lines:
            yield line
            await asyncio.sleep(0)
        if lost:
            raise HostUnavailable(self.rank, HostState.LOST, "connection lost during stream")

    async def wait_connected(self, timeout: float | None = None) -> bool:
        return True


def stamped(i: int, text: str | None = None) -> str:
    return f"{format_timestamp(T0 + i * 1000)} {text or f'line {i}'}"


async def collect(agen: AsyncIterator[LogLine | FollowEvent]) -> tuple[list[LogLine], list[FollowEvent]]:
    lines, events = [], []
    async for item in agen:
        (lines if isinstance(item, LogLine) else events).append(item)
    return lines, events


async def test_follow_resumes_after_a_lost_host_without_duplicates() -> None:
    first = [stamped(i) for i in range(5)] + [stamped(5, "same ns a"), stamped(5, "same ns b")]
    # docker --since is inclusive: the second run repeats the lines at the last timestamp
    second = [stamped(5, "same ns a"), stamped(5, "same ns b"), stamped(5, "same ns c"), stamped(6)]
    host = FakeHost([(first, True), (second, False)])
    lines, events = await collect(follow(host, "ds41_r37"))
    assert [ln.text for ln in lines] == [*(f"line {i}" for i in range(5)), "same ns a", "same ns b",
                                         "same ns c", "line 6"]
    assert [e.state for e in events] == ["following", "lost", "resumed", "ended"]
    assert "--since" not in host.commands[0]
    assert f"--since {format_timestamp(T0 + 5000)} " in host.commands[1]
    assert all(ln.rank == 1 for ln in lines)


async def test_follow_reports_a_missing_container() -> None:
    host = FakeHost([(["Error response from daemon: No such container: ds41_r37"], False)])
    lines, events = await collect(follow(host, "ds41_r37"))
    assert lines == []
    assert [(e.state, e.detail) for e in events] == [
        ("error", "Error response from daemon: No such container: ds41_r37")]


async def test_follow_with_rejoin_picks_up_a_restarted_container() -> None:
    host = FakeHost([([stamped(0), stamped(1)], False), ([], False), ([stamped(1), stamped(2)], False)])
    agen = follow(host, "ds41_r37", rejoin=0.01)
    got: list[LogLine | FollowEvent] = []
    async for item in agen:
        got.append(item)
        if isinstance(item, LogLine) and item.text == "line 2":
            break
    await agen.aclose()  # type: ignore[attr-defined]
    states = [g.state for g in got if isinstance(g, FollowEvent)]
    assert states == ["following", "waiting", "following"]
    assert [g.text for g in got if isinstance(g, LogLine)] == ["line 0", "line 1", "line 2"]


async def test_follow_rejoins_when_its_rejoin_awaitable_says_so() -> None:
    host = FakeHost([(["Error response from daemon: No such container: ds41_r37"], False),
                     ([stamped(0)], False)])
    asked: list[int] = []

    async def container_came() -> None:
        asked.append(len(host.commands))

    agen = follow(host, "ds41_r37", rejoin=container_came)
    got = [item async for item in _take_until(agen, "line 0")]
    assert asked == [1]   # asked once, after the first follow, before the second
    assert [g.state for g in got if isinstance(g, FollowEvent)] == ["waiting", "following"]


async def _take_until(agen: AsyncIterator[LogLine | FollowEvent],
                      text: str) -> AsyncIterator[LogLine | FollowEvent]:
    async for item in agen:
        yield item
        if isinstance(item, LogLine) and item.text == text:
            break
    await agen.aclose()  # type: ignore[attr-defined]


def test_a_log_is_worth_following_again_once_a_container_runs_or_another_came() -> None:
    def c(cid: str, running: bool) -> ContainerState:
        return ContainerState(cid, "ds41_r37", "running" if running else "exited", running)

    assert not worth_following(None, None)                 # still no container: do not ask docker
    assert not worth_following(c("a", False), c("a", False))   # the same stopped one: nothing new
    assert not worth_following(c("a", False), None)        # removed
    assert worth_following(None, c("a", False))            # one came (created, not yet running)
    assert worth_following(c("a", False), c("a", True))    # restarted
    assert worth_following(c("a", False), c("b", False))   # another of that name
    assert worth_following(c("a", True), c("a", True))     # running: its follow ended for another reason


async def test_follow_waits_for_a_host_that_is_not_connected_yet() -> None:
    host = FakeHost([([], True), ([stamped(0)], False)])
    lines, events = await collect(follow(host, "ds41_r37", tail=10))
    assert [e.state for e in events] == ["waiting", "following", "ended"]
    assert "--tail 10" in host.commands[1]  # the first real run still honours --tail
    assert [ln.text for ln in lines] == ["line 0"]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 40))
def test_compact_store_matches_a_plain_model_across_chunks(seed: int, cap: int) -> None:
    """Chunks of 3 lines: ring wrap, pinned dropped lines and chunk release, against lists of LogLines."""
    with mock.patch.object(logs_mod, "CHUNK", 3):
        store = LogStore(range(3), capacity=cap)
        model: dict[int, list[LogLine]] = {r: [] for r in range(3)}
        frozen = None
        for k, batch in enumerate(_random_batches(seed, ranks=3, n=300)):
            store.add(batch)
            for r, lines in batch.items():
                model[r].extend(lines)
            if k == 5:
                frozen = (store.merged.snapshot(), list(store.merged), store.ranks[1].lines.snapshot(),
                          list(store.ranks[1].lines))
        for r, buf in store.ranks.items():
            assert list(buf.lines) == model[r][-cap:]
            assert [buf.lines[i] for i in range(-len(buf), len(buf))] == model[r][-cap:] * 2
            assert buf.dropped == len(model[r]) - min(cap, len(model[r]))
            # whole chunks below what is held or still referred to are freed
            assert buf._base + 3 > min(store._ref_first[store._slot[r]], buf.first_seq)
        merged = list(store.merged)
        assert merged == sorted(merged, key=lambda ln: (ln.ts, ln.rank))
        held = sorted((ln for r in model for ln in model[r][-cap:]), key=lambda ln: (ln.ts, ln.rank))
        view = store.merged  # which entries are held, by key (equal duplicate lines are told apart)
        held_now = [(k >> logs_mod.SLOT_BITS) >= view.slots[k & logs_mod.SLOT_MASK].first_seq
                    for k in view.keys[view.head:]]
        assert [ln for ln, h in zip(merged, held_now, strict=True) if h] == held
        assert frozen is not None and list(frozen[0]) == frozen[1] and list(frozen[2]) == frozen[3]


def test_lines_skipped_before_the_buffer_count_as_dropped() -> None:
    buf = RankBuffer(0, capacity=5)
    buf.add([LogLine(T0 + i, 0, str(i)) for i in range(3)])
    buf.note_skipped(4)
    assert (buf.received, len(buf), buf.dropped) == (7, 3, 4)
    assert buf.lines[0].text == "0"


def test_merge_orders_ranks_beyond_the_packed_sort_key() -> None:
    store = LogStore([300, 5])
    store.add({300: [LogLine(T0 + 2, 300, "b"), LogLine(T0 + 3, 300, "c")],
               5: [LogLine(T0 + 2, 5, "a"), LogLine(T0 + 4, 5, "d")]})
    assert [ln.text for ln in store.merged] == ["a", "b", "c", "d"]


async def test_a_second_follow_with_the_callers_resume_point_repeats_nothing() -> None:
    """The launcher follows again after a lost host or a restarted task: it passes its own point."""
    first = [stamped(0), stamped(1, "same ns a")]
    second = [stamped(0), stamped(1, "same ns a"), stamped(1, "same ns b"), stamped(2)]
    host = FakeHost([(first, True), (second, False)])
    point = ResumePoint()
    lines1, events1 = await collect(follow(host, "ds41_r37", resume=False, point=point))
    assert [e.state for e in events1] == ["following", "lost"]
    lines2, _ = await collect(follow(host, "ds41_r37", tail=50, point=point))
    assert [ln.text for ln in lines1 + lines2] == ["line 0", "same ns a", "same ns b", "line 2"]
    assert f"--since {format_timestamp(T0 + 1000)} " in host.commands[1]
    assert "--tail" not in host.commands[1]  # a continuation, not a first look
