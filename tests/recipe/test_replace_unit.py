"""Replacing stopped containers without hosts: the archive writer never overwrites, the plan refuses what
must not be removed, and execute removes only after a complete archive of the very container planned."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, HostState, HostUnavailable, Result
from cockpit.hosts.shell import as_command
from cockpit.recipe import containers as dk
from cockpit.recipe import replace as R
from cockpit.recipe.ledger import Ledger, cluster_key

CID = "c" * 64
OTHER = "d" * 64
NAME = "ds41_r37"
LOG = ["2025-05-01T10:00:00.000000001Z INFO starting", "2025-05-01T10:00:01.000000000Z ",
       "2025-05-01T10:00:02.000000000Z tqdm 10%\r20%\r30%", "2025-05-01T10:00:03.000000000Z bye é"]


def inspect_json(cid: str = CID, status: str = "exited", running: bool = False, name: str = NAME) -> str:
    return json.dumps([{"Id": cid, "Name": f"/{name}",
                        "State": {"Status": status, "Running": running, "ExitCode": 143,
                                  "StartedAt": "2025-05-01T10:00:00Z", "FinishedAt": "2025-05-01T11:00:00Z"},
                        "Config": {"Image": "local/ds41-r37-spark:runtime"}}])


def raw(path: Path) -> str:
    """A file's text exactly (no newline translation: a CR inside a log line stays one)."""
    return path.read_bytes().decode()


# ---- a host that answers docker commands from a script ---------------------------------------------------


class FakeHost:
    """`inspect` answers from a list (one per call, the last repeats); `logs` streams framed lines."""

    def __init__(self, rank: int, inspects: list[str | Exception], log: list[str] | None = None,
                 logs_status: int | None = 0, rm_status: int = 0, hang: bool = False):
        self.rank = rank
        self.inspects = inspects
        self.log = LOG if log is None else log
        self.logs_status = logs_status
        self.rm_status = rm_status
        self.hang = hang
        self.lines: list[str] = []

    async def run(self, cmd, *, timeout: float | None = 60.0, input: str | None = None) -> Result:  # type: ignore[no-untyped-def]
        assert timeout is not None and timeout > 0
        line = as_command(cmd).line
        self.lines.append(line)
        if line.startswith("docker inspect"):
            answer = self.inspects.pop(0) if len(self.inspects) > 1 else self.inspects[0]
            if isinstance(answer, Exception):
                raise answer
            if answer == "none":
                return Result(self.rank, line, 1, "[]\n", f"Error: No such object: {NAME}\n", 0.01)
            if answer == "down":
                return Result(self.rank, line, 1, "", "Cannot connect to the Docker daemon\n", 0.01)
            return Result(self.rank, line, 0, answer, "", 0.01)
        if line.startswith("docker rm"):
            return Result(self.rank, line, self.rm_status, CID if not self.rm_status else "",
                          "" if not self.rm_status else "Error response from daemon: busy", 0.01)
        raise AssertionError(f"unexpected command {line}")

    async def stream(self, cmd, *, merge_stderr: bool = True) -> AsyncIterator[str]:  # type: ignore[no-untyped-def]
        line = as_command(cmd).line
        self.lines.append(line)
        assert f"docker logs -t {CID}" in line
        marker = re.search(r"(@@r37-archive-[0-9a-f]+) begin logs", line)
        assert marker is not None
        yield "motd chatter before the framing"
        yield f"{marker[1]} begin logs"
        for text in self.log:
            yield text
        if self.hang:
            await asyncio.sleep(3600)
        if self.logs_status is not None:
            yield ""
            yield f"{marker[1]} end logs {self.logs_status}"


class FakeFleet:
    def __init__(self, hosts: dict[int, FakeHost]):
        self.hosts = hosts

    def __getitem__(self, rank: int) -> FakeHost:
        return self.hosts[rank]


@pytest.fixture
def ledger(fixed_config: ClusterConfig, tmp_path: Path) -> Ledger:
    return Ledger(fixed_config, tmp_path / "launched.json")


def every_rank(factory: Callable[[int], FakeHost]) -> FakeFleet:
    return FakeFleet({r: factory(r) for r in range(4)})


# ---- commands --------------------------------------------------------------------------------------------


def test_rm_argv_takes_only_a_full_id() -> None:
    assert dk.rm_argv(CID) == ["docker", "rm", CID]
    for bad in (NAME, CID[:12], CID.upper(), CID + "\n", f"{CID} -f", "-f", "", "c" * 65):
        with pytest.raises(ValueError):
            dk.rm_argv(bad)
    assert R.replace_commands(CID) == [f"docker logs -t {CID}", f"docker rm {CID}"]
    with pytest.raises(ValueError):
        R.logs_argv(NAME)


# ---- the archive writer ------------------------------------------------------------------------------------


def test_archiving_twice_into_one_time_dir_never_overwrites(tmp_path: Path) -> None:
    directory = R.new_archive_dir(tmp_path, "r37-test-abc", now=1746093600)
    assert directory == tmp_path / "r37-test-abc" / "20250501T100000Z"
    path = directory / "rank-1.log"
    with R.ArchiveFile(path) as f:
        f.write_line("first")
        f.commit()
    with pytest.raises(FileExistsError):
        R.ArchiveFile(path)
    # a file that appears while the second archive is written is not replaced either
    late = directory / "rank-2.log"
    with R.ArchiveFile(late) as f:
        f.write_line("second")
        late.write_text("someone else's\n")
        with pytest.raises(FileExistsError):
            f.commit()
    assert path.read_text() == "first\n" and late.read_text() == "someone else's\n"
    assert sorted(p.name for p in directory.iterdir()) == ["rank-1.log", "rank-2.log"]  # no temp files left
    # the same second again: a directory of its own
    again = R.new_archive_dir(tmp_path, "r37-test-abc", now=1746093600)
    assert again.name == "20250501T100000Z-2" and not list(again.iterdir())


def test_an_uncommitted_archive_leaves_nothing(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError), R.ArchiveFile(tmp_path / "rank-0.log") as f:
        f.write_line("partial")
        raise RuntimeError("stream broke")
    assert list(tmp_path.iterdir()) == []


async def test_archive_log_keeps_the_log_as_docker_printed_it(tmp_path: Path) -> None:
    # a blank line inside the log stays; a line that imitates the framing (another marker) is log text
    log = [*LOG, "", "@@r37-archive-0123456789abcdef end logs 0", "2025-05-01T10:00:04.000000000Z after"]
    host = FakeHost(1, [inspect_json()], log=log)
    got = await R.archive_log(host, CID, tmp_path / "rank-1.log")
    text = raw(tmp_path / "rank-1.log")
    assert text == "\n".join(log) + "\n"
    assert (got.lines, got.bytes) == (7, len(text.encode()))


async def test_archive_log_has_a_deadline(tmp_path: Path) -> None:
    host = FakeHost(1, [inspect_json()], hang=True)
    with pytest.raises(R.ArchiveFailed, match=r"did not finish within 0\.2 s"):
        await R.archive_log(host, CID, tmp_path / "rank-1.log", timeout=0.2)
    assert list(tmp_path.iterdir()) == []


async def test_archive_log_without_exit_zero_leaves_no_file(tmp_path: Path) -> None:
    for status in (1, None):
        host = FakeHost(1, [inspect_json()], log=["Error response from daemon: No such container"],
                        logs_status=status)
        with pytest.raises(R.ArchiveFailed, match="exited with status 1" if status else "no exit status"):
            await R.archive_log(host, CID, tmp_path / "rank-1.log")
        assert list(tmp_path.iterdir()) == []


# ---- plan --------------------------------------------------------------------------------------------------


async def test_plan_replaces_only_exited_containers_the_cockpit_started(fixed_config: ClusterConfig,
                                                                        ledger: Ledger) -> None:
    for rank in (0, 1, 2):
        ledger.record(rank, CID, NAME, f"spark-{rank}")
    ledger.record(3, OTHER, NAME, "spark-3")
    answers: dict[int, list[str | Exception]] = {
        0: [inspect_json()],
        1: [inspect_json(status="running", running=True)],
        2: ["none"],
        3: [inspect_json()],  # a container of that name, but not the one the cockpit started
    }
    plan = await R.plan_replace(FakeFleet({r: FakeHost(r, a) for r, a in answers.items()}),  # type: ignore[arg-type]
                                fixed_config, ledger)
    assert [(i.rank, i.action) for i in plan] == [(0, "replace"), (1, "refuse"), (2, "none"), (3, "refuse")]
    assert plan[0].commands == [f"docker logs -t {CID}", f"docker rm {CID}"] and plan[0].container_id == CID
    assert plan[1].reason == f"rank 1: {NAME} ({CID[:12]}) is running: stop it first (`r37-cockpit stop`)"
    assert plan[2].reason == f"rank 2: no container named {NAME}" and not plan[2].commands
    assert plan[3].reason == (f"rank 3: {NAME} ({CID[:12]}) was not started by this cockpit: inspect and "
                              "remove it yourself on that host")
    assert [i.rank for i in R.refused(plan)] == [1, 3]
    assert all(not i.commands for i in plan if i.action != "replace")
    assert json.loads(json.dumps([i.to_dict() for i in plan]))[0]["commands"] == plan[0].commands


async def test_plan_refuses_unreachable_hosts_and_a_dead_daemon(fixed_config: ClusterConfig,
                                                                ledger: Ledger) -> None:
    ledger.record(0, CID, NAME, "spark-0")
    answers: dict[int, list[str | Exception]] = {
        0: [HostUnavailable(0, HostState.UNREACHABLE, "no answer within 5 s")],
        1: [CommandTimeout(1, "docker inspect ds41_r37", 20)],
        2: ["down"],
        3: [inspect_json(cid="not-an-id")],
    }
    plan = await R.plan_replace(FakeFleet({r: FakeHost(r, a) for r, a in answers.items()}),  # type: ignore[arg-type]
                                fixed_config, ledger)
    assert [i.action for i in plan] == ["refuse"] * 4
    assert plan[0].reason.startswith("rank 0: host not reachable (unreachable: no answer within 5 s)")
    assert plan[1].reason.startswith("rank 1: host not reachable (`docker inspect ds41_r37` did not finish")
    assert "docker inspect ds41_r37 failed: Cannot connect to the Docker daemon" in plan[2].reason
    assert "no valid container ID" in plan[3].reason


# ---- execute ----------------------------------------------------------------------------------------------


async def _execute(cfg: ClusterConfig, ledger: Ledger, host: FakeHost, root: Path) -> R.ReplaceOutcome:
    ledger.record(host.rank, CID, NAME, f"spark-{host.rank}")
    fleet = FakeFleet({host.rank: host})
    plan = [R.judge(host.rank, NAME, dk.parse_inspect(inspect_json())[0], CID)]
    assert plan[0].action == "replace"
    (out,) = await R.execute_replace(fleet, cfg, plan, ledger, archive_root=root)  # type: ignore[arg-type]
    return out


async def test_execute_archives_then_removes_by_full_id(fixed_config: ClusterConfig, ledger: Ledger,
                                                        tmp_path: Path) -> None:
    host = FakeHost(2, [inspect_json()])
    out = await _execute(fixed_config, ledger, host, tmp_path / "archive")
    assert out.ok, out.message
    path = Path(out.archive_path or "")
    assert path.parent.parent == tmp_path / "archive" / cluster_key(fixed_config)
    assert path.name == "rank-2.log"
    assert re.fullmatch(r"\d{8}T\d{6}Z", path.parent.name)
    assert raw(path) == "\n".join(LOG) + "\n" and out.archived_lines == 4
    assert out.archived_bytes == path.stat().st_size
    assert [ln.split()[1] for ln in host.lines if ln.startswith("docker")] == ["inspect", "inspect", "rm"]
    assert host.lines[-1] == f"docker rm {CID}"  # the ID only: never the name, never -f
    assert out.to_dict()["archive_path"] == str(path)


async def test_execute_keeps_the_container_when_the_archive_is_incomplete(
        fixed_config: ClusterConfig, ledger: Ledger, tmp_path: Path) -> None:
    host = FakeHost(1, [inspect_json()], logs_status=1)
    out = await _execute(fixed_config, ledger, host, tmp_path)
    assert not out.ok and "not archived" in out.message and "not removed" in out.message
    assert out.archive_path is None and not any(ln.startswith("docker rm") for ln in host.lines)
    assert not list(tmp_path.rglob("*.log")) and not list(tmp_path.rglob("*Z"))  # no empty time dir either


async def test_execute_refuses_when_the_container_changed_before_rm(
        fixed_config: ClusterConfig, ledger: Ledger, tmp_path: Path) -> None:
    for second, expect in ((inspect_json(status="running", running=True), "is running now"),
                           (inspect_json(cid=OTHER), "is now another container"),
                           ("none", "no longer exists")):
        host = FakeHost(1, [inspect_json(), second])
        out = await _execute(fixed_config, ledger, host, tmp_path)
        assert not out.ok and expect in out.message and "not removed" in out.message, out.message
        assert out.archive_path and raw(Path(out.archive_path)) == "\n".join(LOG) + "\n"
        assert not any(ln.startswith("docker rm") for ln in host.lines)


async def test_execute_rechecks_the_ledger_and_the_state_before_archiving(
        fixed_config: ClusterConfig, ledger: Ledger, tmp_path: Path) -> None:
    host = FakeHost(0, [inspect_json(status="running", running=True)])
    out = await _execute(fixed_config, ledger, host, tmp_path)
    assert not out.ok and "nothing archived or removed" in out.message
    assert [ln.split()[1] for ln in host.lines] == ["inspect"]
    # planned, then the ledger records another launch on that rank: not ours any more
    host = FakeHost(0, [inspect_json()])
    plan = [R.judge(0, NAME, dk.parse_inspect(inspect_json())[0], CID)]
    ledger.record(0, OTHER, NAME, "spark-0")
    (out,) = await R.execute_replace(FakeFleet({0: host}), fixed_config, plan, ledger,  # type: ignore[arg-type]
                                     archive_root=tmp_path)
    assert not out.ok and "no longer recorded as started by this cockpit" in out.message
    assert not any(ln.startswith("docker rm") for ln in host.lines)


async def test_execute_reports_a_failed_rm_and_keeps_the_archive(
        fixed_config: ClusterConfig, ledger: Ledger, tmp_path: Path) -> None:
    host = FakeHost(3, [inspect_json()], rm_status=1)
    out = await _execute(fixed_config, ledger, host, tmp_path)
    assert not out.ok and "docker rm cccccccccccc failed: Error response from daemon: busy" in out.message
    assert out.archive_path and Path(out.archive_path).exists()


async def test_execute_does_nothing_without_replace_items(fixed_config: ClusterConfig, ledger: Ledger,
                                                          tmp_path: Path) -> None:
    plan = [R.ReplaceItem(1, "refuse", "rank 1: …"), R.ReplaceItem(2, "none", "rank 2: …")]
    assert await R.execute_replace(FakeFleet({}), fixed_config, plan, ledger,  # type: ignore[arg-type]
                                   archive_root=tmp_path) == []
    assert list(tmp_path.iterdir()) == []
