"""Who asked: the origin contextvar, inherited by tasks, stamped on each record by the host; resolvers
first; the fleet's record listeners and the process-wide fleet watchers."""

from __future__ import annotations

import asyncio

from cockpit.hosts import CommandRecord, Fleet, Host, origin
from cockpit.hosts.fleet import watch_fleets


def test_asking_nests_and_resets() -> None:
    assert origin.current() == ""
    with origin.asking("launch"):
        assert origin.current() == "launch"
        with origin.asking("watcher"):
            assert origin.current() == "watcher"
        assert origin.current() == "launch"
    assert origin.current() == ""


async def test_tasks_started_inside_inherit_it() -> None:
    async def who() -> str:
        await asyncio.sleep(0)
        return origin.current()

    with origin.asking("stats sampler"):
        task = asyncio.create_task(who())
    outside = asyncio.create_task(who())
    assert await task == "stats sampler"
    assert await outside == ""


def test_a_resolver_answers_first_and_only_when_it_knows(monkeypatch) -> None:
    monkeypatch.setattr(origin, "_RESOLVERS", [])
    answer = {"now": ""}
    origin.add_resolver(lambda: answer["now"])
    origin.add_resolver(lambda: 1 / 0)          # a broken resolver is no answer, never an error
    with origin.asking("tui"):
        assert origin.current() == "tui"
        answer["now"] = "pane:Setup"
        assert origin.current() == "pane:Setup"


def test_the_host_stamps_each_record_and_the_fleet_passes_it_on(fixed_config) -> None:
    got: list[CommandRecord] = []
    host = Host(fixed_config.host(0), fixed_config.ssh, None, got.append)
    with origin.asking("preflight"):
        host._record(CommandRecord(0, "uname -m", 1.0))
    host._record(CommandRecord(0, "true", 1.0, origin="pane:Logs"))   # an origin given is kept
    host._record(CommandRecord(0, "true", 1.0))
    assert [r.origin for r in got] == ["preflight", "pane:Logs", ""]

    seen: list[Fleet] = []
    stop_watching = watch_fleets(seen.append)
    fleet = Fleet(fixed_config)
    stop_watching()
    Fleet(fixed_config)
    assert seen == [fleet]
    heard: list[CommandRecord] = []
    fleet.on_command(lambda r: 1 / 0)           # a broken listener never fails the command
    stop = fleet.on_command(heard.append)
    with origin.asking("setup"):
        fleet[1]._record(CommandRecord(1, "df -h", 2.0, 0.1, 0))
    stop()
    fleet[1]._record(CommandRecord(1, "df -h", 3.0, 0.1, 0))
    assert [(r.rank, r.origin, r.done) for r in heard] == [(1, "setup", True)]
    assert len(fleet.command_log) == 2
    assert not CommandRecord(1, "df", 2.0).done and CommandRecord(1, "x", 2.0, note="stream").done
