"""Clear the way for a relaunch (`launch --replace-stopped`): archive, then remove, the stopped containers
of the launch's name that this cockpit started.

    plan = await plan_replace(fleet, cfg, ledger)               # reads only: replace/refuse/none per rank
    [line for item in plan for line in item.commands]           # what the operator confirms (and --dry-run)
    outcomes = await execute_replace(fleet, cfg, plan, ledger)  # only the `replace` items

A rank is replaced only when its container of the launch's name is exited (or dead), or `created` with a
start that failed (`ContainerState.start_failed`: `docker run -d` printed its ID, exited 125/127 and the
container never ran), and has exactly the full ID the launch ledger recorded when this cockpit started it.
A running container, one the cockpit did not start, or a host that does not answer is refused with the
reason, and nothing is removed there.

Replacing one rank: inspect again (still ended, same ID, still in the ledger), save its full log
(`docker logs -t ID`, stdout and stderr merged, streamed into the file) to
`<state dir>/archive/<cluster key>/<UTC YYYYmmddTHHMMSSZ>/rank-N.log`, inspect again, then `docker rm ID`
(the full ID, never the name, never `-f`). The container is removed only if docker logs exited 0 and the
archive file is complete and in place. An archive file is never overwritten: it is written to a temp file
and hard-linked to its name, which fails if the name exists; each run gets a time directory of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import AsyncGenerator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from cockpit.config import ClusterConfig
from cockpit.files import AtomicFile
from cockpit.hosts import CommandTimeout, Fleet, HostUnavailable, Result, command
from cockpit.hosts.shell import Cmd, sections
from cockpit.locations import archive_dir
from cockpit.recipe import containers
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.ledger import Ledger, cluster_key
from cockpit.recipe.recording import note_action
from cockpit.safetext import neutralise

INSPECT_TIMEOUT = 20.0       # seconds for one `docker inspect`
ARCHIVE_TIMEOUT = 900.0      # seconds for the whole `docker logs -t ID` stream (a long-running engine's log)
RM_TIMEOUT = 60.0            # seconds for `docker rm ID`
STAMP_FORMAT = "%Y%m%dT%H%M%SZ"
SAME_SECOND_LIMIT = 100      # time directories tried for one second (`…Z`, `…Z-2`, …) before giving up
MESSAGE_CHARS = 300          # host text quoted in a message is cut to this

Action = Literal["replace", "refuse", "none"]


class Transport(Protocol):
    """What replacing needs of a host (`cockpit.hosts.Host` has it)."""

    rank: int

    async def run(self, cmd: Cmd, *, timeout: float | None = 60.0, input: str | None = None) -> Result: ...

    def stream(self, cmd: Cmd, *, merge_stderr: bool = True) -> AsyncGenerator[str, None]: ...


# ---- commands ---------------------------------------------------------------------------------------


def is_container_id(text: str) -> bool:
    """A full 64-hex container ID (what `rm_argv` accepts)."""
    try:
        containers.rm_argv(text)
    except ValueError:
        return False
    return True


def logs_argv(container_id: str) -> list[str]:
    """The whole log with docker's timestamps, by full ID (ValueError for anything else, like `rm_argv`)."""
    if not is_container_id(container_id):
        raise ValueError(f"docker logs needs a full 64-hex container ID, not {container_id!r}")
    return ["docker", "logs", "-t", container_id]


def replace_commands(container_id: str) -> list[str]:
    """The lines shown to the operator for one rank: archive the log, then remove the container."""
    return [command(logs_argv(container_id)).line, command(containers.rm_argv(container_id)).line]


# ---- plan -------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplaceItem:
    """What `launch --replace-stopped` will do on one rank, and why."""

    rank: int
    action: Action
    reason: str
    container_id: str = ""
    commands: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class DockerFailed(Exception):
    """`docker inspect` failed for another reason than "no such container" (daemon down, …)."""


def _quote_host(text: str) -> str:
    text = neutralise(" ".join(text.split()))
    return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "…"


def _no_such(res: Result) -> bool:
    return "no such" in (res.stderr + res.stdout).lower()


async def inspect_named(host: Transport, name: str) -> ContainerState | None:
    """The container named exactly `name` on one host; None when there is none.

    Raises DockerFailed when docker itself fails, HostUnavailable / CommandTimeout for the host.
    """
    res = await host.run(containers.inspect_argv(name), timeout=INSPECT_TIMEOUT)
    states = containers.parse_inspect(res.stdout)
    if not res.ok and not states:
        if _no_such(res):
            return None
        raise DockerFailed(_quote_host(res.stderr or res.stdout) or f"exit status {res.exit_status}")
    for state in states:
        if state.name == name:  # `docker inspect REF` also matches an ID prefix: only the name counts
            return state
    return None


def _host_detail(exc: Exception, rank: int) -> str:
    return str(exc).removeprefix(f"rank {rank}: ")


def _label(rank: int, name: str, state: ContainerState) -> str:
    return f"rank {rank}: {name} ({state.short_id})"


def judge(rank: int, name: str, state: ContainerState | None, ledger_id: str | None) -> ReplaceItem:
    """One rank's item from its container's state and the ID the ledger recorded for it (pure)."""
    if state is None:
        return ReplaceItem(rank, "none", f"rank {rank}: no container named {name}")
    if not is_container_id(state.id):
        return ReplaceItem(rank, "refuse", f"rank {rank}: {name}: docker gave no valid container ID "
                                           f"({_quote_host(state.id)!r}): inspect it yourself on that host")
    label = _label(rank, name, state)
    if ledger_id != state.id:
        return ReplaceItem(rank, "refuse", f"{label} was not started by this cockpit: inspect and remove it "
                                           "yourself on that host", state.id)
    status = _quote_host(state.status) or "in an unknown state"
    if state.running or state.status in ("running", "paused", "restarting"):
        return ReplaceItem(rank, "refuse", f"{label} is {status}: stop it first (`r37-cockpit stop`)",
                           state.id)
    if not state.ended:
        return ReplaceItem(rank, "refuse", f"{label} is {status}, not exited: inspect and remove it yourself "
                                           "on that host", state.id)
    ended = _quote_host(state.exit_reason())
    return ReplaceItem(rank, "replace", f"{label} was started by this cockpit and {ended}: archive its log, "
                                        "then remove it", state.id, replace_commands(state.id))


async def plan_replace(fleet: Fleet, cfg: ClusterConfig, ledger: Ledger) -> list[ReplaceItem]:
    """Per rank (in rank order): replace, refuse (with the reason) or none. Changes nothing."""
    records = ledger.records()
    name = cfg.cluster.container_name

    async def one(rank: int) -> ReplaceItem:
        try:
            state = await inspect_named(fleet[rank], name)
        except (HostUnavailable, CommandTimeout) as exc:
            detail = _host_detail(exc, rank)
            return ReplaceItem(rank, "refuse", f"rank {rank}: host not reachable ({detail}): every host must "
                                               "answer to clear the way")
        except DockerFailed as exc:
            return ReplaceItem(rank, "refuse", f"rank {rank}: docker inspect {name} failed: {exc}; check "
                                               "that docker runs on that host (`docker info`)")
        if state is not None and ledger.claim(rank, state.id, state.created_at):
            return judge(rank, name, state, state.id)
        rec = records.get(rank)
        return judge(rank, name, state, rec.container_id if rec else None)

    return sorted(await asyncio.gather(*(one(r) for r in cfg.ranks)), key=lambda i: i.rank)


def refused(plan: list[ReplaceItem]) -> list[ReplaceItem]:
    """The ranks that block the relaunch even after replacing (the caller launches only if this is empty)."""
    return [i for i in plan if i.action == "refuse"]


# ---- the archive on the admin box ----------------------------------------------------------------------


def default_archive_root() -> Path:
    """`<state dir>/archive` (`cockpit.locations.archive_dir`): the cluster key and the time directory go
    under it."""
    return archive_dir()


def new_archive_dir(root: Path, key: str, now: float | None = None) -> Path:
    """A time directory of this run's own: `root/key/YYYYmmddTHHMMSSZ` (UTC), created here (mode 700).

    A directory that exists is never reused: the next free one of that second is `…Z-2`, `…Z-3`, …
    """
    base = Path(root) / key
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    stamp = time.strftime(STAMP_FORMAT, time.gmtime(now))
    for n in range(1, SAME_SECOND_LIMIT + 1):
        path = base / (stamp if n == 1 else f"{stamp}-{n}")
        try:
            path.mkdir(mode=0o700)
        except FileExistsError:
            continue
        return path
    raise FileExistsError(f"{base / stamp}: {SAME_SECOND_LIMIT} archive directories exist for that second")


class ArchiveFile(AtomicFile):
    """One archive being written line by line (`cockpit.files.AtomicFile`, mode 0600): a temp file next to
    `path`, hard-linked to `path` by `commit` (which fails with FileExistsError if the name exists: never
    overwritten). Leaving the `with` block without a commit removes the temp file; the temp file never
    stays behind."""

    def __init__(self, path: Path):
        super().__init__(path, mode=0o600)
        self.lines = 0

    def write_line(self, text: str) -> None:
        self.write(text.encode("utf-8", "replace") + b"\n")
        self.lines += 1


@dataclass(frozen=True, slots=True)
class Archived:
    path: Path
    lines: int
    bytes: int


class ArchiveFailed(Exception):
    """The log could not be archived completely; nothing was left at the archive's name."""


async def archive_log(host: Transport, container_id: str, path: Path, *,
                      timeout: float = ARCHIVE_TIMEOUT) -> Archived:
    """Stream `docker logs -t ID` (stdout and stderr merged) into `path`; complete only if it exited 0.

    The command runs framed (`hosts.shell.sections`, a random marker) so that its exit status arrives
    after its output on the same channel. Host bytes that are not UTF-8 are archived as U+FFFD.
    """
    marker = f"@@r37-archive-{secrets.token_hex(8)}"
    begin, end = f"{marker} begin logs", f"{marker} end logs "
    framed = sections([("logs", command(logs_argv(container_id)))], marker)
    status: int | None = None
    ended = False
    last = ""
    with ArchiveFile(path) as out:
        started = False
        blank = False  # an empty line held back: the framing prints one newline before its end line
        try:
            async with asyncio.timeout(timeout):
                stream = host.stream(framed)
                async with contextlib.aclosing(stream):
                    async for line in stream:
                        if not started:
                            started = line == begin  # a login shell's chatter before it is not the log
                            continue
                        if ended:
                            continue
                        if line.startswith(end):
                            tail = line[len(end):].strip()
                            status = int(tail) if tail.lstrip("-").isdigit() else None
                            ended = True
                            continue
                        if blank:
                            out.write_line("")
                        blank = line == ""
                        if not blank:
                            out.write_line(line)
                            last = line
        except TimeoutError:
            raise ArchiveFailed(f"`docker logs` did not finish within {timeout:g} s") from None
        if not ended:
            raise ArchiveFailed("the log stream ended before `docker logs` did (no exit status)")
        if status != 0:
            said = f": {_quote_host(last)}" if last else ""
            raise ArchiveFailed(f"`docker logs` exited with status {status}{said}")
        try:
            await asyncio.to_thread(out.commit)
        except OSError as exc:
            raise ArchiveFailed(f"could not write {path}: {exc}") from None
        return Archived(out.path, out.lines, out.bytes)


# ---- execute ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReplaceOutcome:
    """What replacing one rank did. `ok`: its log is archived and its container removed."""

    rank: int
    ok: bool
    message: str
    container_id: str = ""
    archive_path: str | None = None
    archived_bytes: int = 0
    archived_lines: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


async def _still_replaceable(host: Transport, rank: int, name: str, cid: str, ledger: Ledger) -> str:
    """"" when the container of `name` is still the planned one, exited and in the ledger; else why not."""
    try:
        state = await inspect_named(host, name)
    except DockerFailed as exc:
        return f"rank {rank}: docker inspect {name} failed: {exc}"
    short = cid[:12]
    if state is None:
        return f"rank {rank}: {name} ({short}) no longer exists"
    if state.id != cid:
        return f"rank {rank}: {name} is now another container ({state.short_id}), not the planned {short}"
    if not state.ended:
        status = _quote_host(state.status)
        return f"rank {rank}: {name} ({short}) is {status} now: stop it first (`r37-cockpit stop`)"
    if not ledger.owns(rank, cid):
        return f"rank {rank}: {name} ({short}) is no longer recorded as started by this cockpit"
    return ""


async def _replace_one(fleet: Fleet, cfg: ClusterConfig, item: ReplaceItem, ledger: Ledger,
                       directory: Path) -> ReplaceOutcome:
    rank, cid, name = item.rank, item.container_id, cfg.cluster.container_name
    host = fleet[rank]
    try:
        rm = containers.rm_argv(cid)
    except ValueError as exc:
        return ReplaceOutcome(rank, False, f"rank {rank}: {exc}", cid)
    short = cid[:12]
    archived: Archived | None = None

    def outcome(ok: bool, message: str) -> ReplaceOutcome:
        if archived is None:
            return ReplaceOutcome(rank, ok, message, cid)
        return ReplaceOutcome(rank, ok, message, cid, str(archived.path), archived.bytes, archived.lines)

    try:
        why = await _still_replaceable(host, rank, name, cid, ledger)
        if why:
            return outcome(False, f"{why}: nothing archived or removed")
        try:
            archived = await archive_log(host, cid, directory / f"rank-{rank}.log")
        except (ArchiveFailed, OSError) as exc:
            return outcome(False, f"rank {rank}: log of {name} ({short}) not archived: {exc}; not removed")
        kept = f"its log is archived at {archived.path}"
        why = await _still_replaceable(host, rank, name, cid, ledger)
        if why:
            return outcome(False, f"{why}: {kept}; not removed")
        res = await host.run(rm, timeout=RM_TIMEOUT)
        if not res.ok:
            said = _quote_host(res.stderr or res.stdout) or f"exit status {res.exit_status}"
            return outcome(False, f"rank {rank}: docker rm {short} failed: {said}; {kept}")
    except (HostUnavailable, CommandTimeout) as exc:
        detail = _host_detail(exc, rank)
        if archived is None:
            return outcome(False, f"rank {rank}: host not reachable ({detail}): nothing archived or removed")
        return outcome(False, f"rank {rank}: host not reachable ({detail}); {kept}; whether {short} was "
                              "removed is not known: plan again")
    return outcome(True, f"rank {rank}: archived {archived.lines} log lines ({archived.bytes} bytes) to "
                         f"{archived.path}; removed {name} ({short})")


async def execute_replace(fleet: Fleet, cfg: ClusterConfig, plan: list[ReplaceItem], ledger: Ledger, *,
                          archive_root: Path | str | None = None) -> list[ReplaceOutcome]:
    """Archive and remove every `replace` item's container (ranks in parallel); one outcome per such item,
    in rank order. `archive_root` replaces `<state dir>/archive` (the cluster key and time are added)."""
    todo = [i for i in plan if i.action == "replace"]
    if not todo:
        return []
    root = Path(archive_root) if archive_root is not None else default_archive_root()
    try:
        directory = new_archive_dir(root, cluster_key(cfg))
    except OSError as exc:
        return [ReplaceOutcome(i.rank, False, f"rank {i.rank}: cannot create an archive directory under "
                                              f"{root}: {exc}; nothing archived or removed", i.container_id)
                for i in todo]
    try:
        outcomes = await asyncio.gather(*(_replace_one(fleet, cfg, i, ledger, directory) for i in todo))
    finally:
        with contextlib.suppress(OSError):
            directory.rmdir()  # only if nothing was archived (rmdir refuses a directory with files)
    for o in outcomes:
        note_action(cfg, "relaunch", o.message, rank=o.rank, data={"ok": o.ok, "archive": o.archive_path})
    return sorted(outcomes, key=lambda o: o.rank)
