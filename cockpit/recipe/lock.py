"""One launcher at a time: the cluster lock on rank 0's host, seen by every cockpit on every admin box.

A launch or a stop holds the lock for as long as it runs. The lock is a directory under rank 0's SSH
login home, `~/.r37-cockpit/locks/<container name>.lock` (relative paths on a command's channel start
at the login's home), created with `mkdir`, which succeeds for exactly one of any number of cockpits
trying at once. Inside it `holder.json` names the holder (owner, admin host, pid, purpose, since when,
a random token, last heartbeat); it is written through stdin to a temp file and linked or renamed into
place (`hosts.shell.write_stdin_atomic`), never echoed through a shell line. Only coreutils run on
the host: mkdir, mv, rm, stat, date, head.

Liveness: the holder rewrites its record every `heartbeat_s` seconds (compare-and-swap on the record's
sha256, so a holder never writes over a record that is no longer its own). The heartbeat's age is
measured on rank 0's own clock (its `date` against the record's mtime), so two admin boxes whose clocks
disagree still agree on it. A lock is stale when that age exceeds `stale_after_s`, or when its holder is
a process on this admin box that is gone ("this admin box": the same hostname and the same Linux boot id,
so a box that merely shares the name, or this box before a reboot, is judged by the heartbeat alone).
A lock dir whose record is unreadable or garbled counts as held until its mtime is older than the limit
(a record missing for a moment is a holder between its `mkdir` and its write: the reader waits a little
for it).

Takeover of a stale lock: `mv -T` of the lock dir to a name of the taker's own (only one taker's `mv`
succeeds), then the moved dir is checked to be the very lock that was judged stale (same inode, same
record); if it is not (the lock was replaced in between), it is put back with `mv -n`, which never
replaces a lock that appeared meanwhile. Then `mkdir` as usual, and only after that is the stale lock
removed. Release checks the token, then uses the same move-aside-then-check, so it removes only a lock
carrying its own token. Every command has a timeout and every wait a deadline.

A holder killed between those steps (Ctrl-C twice, a lost connection) leaves a `<lock>.release.<token>` or
`<lock>.takeover.<token>` dir behind: the next holder removes those whose last change is over
LEFTOVER_AGE_MIN minutes old on rank 0's clock (`find -mmin`), once it holds the lock. A launch whose
holder is gone while its lock is still there is an interrupted launch (`interrupted_launch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import hashlib
import json
import os
import re
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Any, Literal

from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, Host, HostUnavailable, Result, command, sequence
from cockpit.hosts.shell import Cmd, sections, write_stdin_atomic
from cockpit.recipe.parsers import Section, split_sections

LOCK_ROOT = ".r37-cockpit/locks"  # relative: rank 0's SSH login home
RECORD_NAME = "holder.json"
RECORD_VERSION = 1
RECORD_MAX_BYTES = 65536
PURPOSES = ("launch", "stop")

HEARTBEAT_S = 5.0            # the holder rewrites its record this often ...
STALE_AFTER_S = 30.0         # ... and a record not rewritten for this long is stale
ACQUIRE_TIMEOUT_S = 20.0     # the whole acquisition, waiting for rank 0's connection included
SETTLE_S = 3.0               # how long a lock dir without a record is given to get one (while acquiring)
COMMAND_TIMEOUT_S = 10.0     # one command on rank 0
RELEASE_TIMEOUT_S = 10.0
SETTLE_POLL_S = 0.1
WRITE_ATTEMPTS = 3
PROBE_ATTEMPTS = 3
NO_RECORD = "no holder record"
LEFTOVER_AGE_MIN = 2         # minutes: a release/takeover dir not changed for this long was left behind

Purpose = Literal["launch", "stop"]

_TOKEN = re.compile(r"[0-9a-f]{8,64}\Z")
_PURPOSE = re.compile(r"[a-z][a-z0-9_-]{0,31}\Z")
_STAT_LINE = re.compile(r"(\d+) (\d+(?:\.\d+)?) (.+)\Z")
_TEXT_MAX = 256


# ---- the holder record (pure) ---------------------------------------------------------------------------


def _utc(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def iso_utc(when: datetime) -> str:
    """`2026-12-01T10:31:02.123Z`: UTC, milliseconds."""
    return when.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _shown_utc(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds the cluster lock: the content of `holder.json`."""

    owner: str              # local user on the holder's admin box
    admin_host: str         # the holder's admin box (its hostname)
    pid: int                # the holder's process on its admin box
    purpose: str            # "launch" or "stop"
    started_at: datetime    # UTC, when the lock was taken
    heartbeat_at: datetime  # UTC, the holder's clock at its last heartbeat
    token: str              # random, one per acquisition: release removes only a lock with its own token
    boot_id: str | None = None  # the admin box's boot (Linux boot_id): two boxes of one name never share it

    def to_dict(self) -> dict[str, Any]:
        return {"version": RECORD_VERSION, "owner": self.owner, "admin_host": self.admin_host,
                "pid": self.pid, "purpose": self.purpose, "started_at": iso_utc(self.started_at),
                "heartbeat_at": iso_utc(self.heartbeat_at), "token": self.token, "boot_id": self.boot_id}

    def describe(self) -> str:
        """`alice@admin2 (pid 4242), launch since 2026-12-01 10:31:02 UTC`"""
        return (f"{self.owner}@{self.admin_host} (pid {self.pid}), {self.purpose} since "
                f"{_shown_utc(self.started_at)}")


def record_text(holder: Holder) -> str:
    return json.dumps(holder.to_dict(), indent=1) + "\n"


def _text_field(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value or len(value) > _TEXT_MAX or not value.isprintable():
        raise ValueError(f"{key}: missing or not a short printable string")
    return value


def _time_field(data: dict[str, Any], key: str) -> datetime:
    value = data.get(key)
    if not isinstance(value, str):
        raise ValueError(f"{key}: missing or not an ISO time")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"{key}: {value[:40]!r} is not an ISO time") from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def parse_record(text: str) -> Holder:
    """A `holder.json` as read from rank 0; ValueError (with the reason) when it is not a holder record."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):   # deep nesting raises RecursionError
        raise ValueError("not JSON") from None
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    pid = data.get("pid")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        raise ValueError("pid: missing or not a positive integer")
    purpose = _text_field(data, "purpose")
    if not _PURPOSE.match(purpose):
        raise ValueError(f"purpose: {purpose[:40]!r} is not a purpose")
    token = _text_field(data, "token")
    if not _TOKEN.match(token):
        raise ValueError("token: not a hex token")
    boot = data.get("boot_id")
    return Holder(owner=_text_field(data, "owner"), admin_host=_text_field(data, "admin_host"), pid=pid,
                  purpose=purpose, started_at=_time_field(data, "started_at"),
                  heartbeat_at=_time_field(data, "heartbeat_at"), token=token,
                  boot_id=None if boot is None else _text_field(data, "boot_id"))


# ---- what a look at the lock found (pure) -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LockProbe:
    """One look at a lock dir on rank 0."""

    path: str
    exists: bool
    inode: int | None = None
    age_s: float | None = None     # rank 0's clock now minus the newest mtime of the dir and its record
    record: str | None = None      # the record's text as read (None: missing or unreadable)
    holder: Holder | None = None
    problem: str | None = None     # why there is no holder although the dir exists
    torn: bool = False             # the lock changed while it was looked at: look again

    @property
    def missing_record(self) -> bool:
        return self.exists and self.record is None

    def same_lock(self, other: LockProbe) -> bool:
        """The very lock dir `other` saw (moved, perhaps): same inode, same record."""
        return self.exists and other.exists and self.inode == other.inode and self.record == other.record


def probe_command(path: str, marker: str) -> Cmd:
    """rank 0's clock, the lock's inode and mtimes, its record, and the inode and mtimes again (a look
    that raced a change sees them differ)."""
    record = f"{path}/{RECORD_NAME}"
    c = {"LC_ALL": "C"}  # a decimal point, whatever the login's locale
    stat = command(["stat", "-c", "%i %.9Y %n", "--", path, record], env=c)
    return sections([("now", command(["date", "+%s.%N"], env=c)), ("stat", stat),
                     ("record", ["head", "-c", str(RECORD_MAX_BYTES), "--", record]), ("again", stat)],
                    marker)


def _seconds(text: str) -> float | None:
    word = text.strip()
    try:
        return float(word)
    except ValueError:
        head = word.split(".", 1)[0]  # a `date` without %N prints `1796117380.N`
        return float(head) if head.isascii() and head.isdigit() else None


def _stats(sec: Section | None) -> dict[str, tuple[int, float]]:
    out: dict[str, tuple[int, float]] = {}
    for line in sec.output.splitlines() if sec is not None else []:
        m = _STAT_LINE.match(line)
        if m:
            out[m.group(3)] = (int(m.group(1)), float(m.group(2)))
    return out


def parse_probe(text: str, marker: str, path: str) -> LockProbe:
    """The output of `probe_command(path, marker)`."""
    parts = split_sections(text, marker)
    record_path = f"{path}/{RECORD_NAME}"
    now = _seconds(parts["now"].output) if "now" in parts else None
    stats = _stats(parts.get("stat"))
    torn = "again" in parts and _stats(parts["again"]) != stats
    if path not in stats:
        return LockProbe(path, exists=False, torn=torn)
    inode, mtime = stats[path]
    if record_path in stats:
        mtime = max(mtime, stats[record_path][1])
    age = max(0.0, now - mtime) if now is not None else None
    sec = parts.get("record")
    if sec is None or sec.status != 0 or record_path not in stats:
        why = NO_RECORD if record_path not in stats else f"record unreadable: {_tail(sec)}"
        return LockProbe(path, True, inode, age, None, None, why, torn)
    try:
        holder = parse_record(sec.output)
    except ValueError as exc:
        return LockProbe(path, True, inode, age, sec.output, None, f"record garbled: {exc}", torn)
    return LockProbe(path, True, inode, age, sec.output, holder, None, torn)


def _tail(sec: object) -> str:
    out = getattr(sec, "output", "") or ""
    lines = [ln.strip() for ln in out.splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


# ---- staleness (pure) -------------------------------------------------------------------------------------


def local_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no USER/LOGNAME and no passwd entry
        return f"uid{os.getuid()}"


@dataclass(frozen=True, slots=True)
class AdminBox:
    """This admin box as a holder record names it: hostname, and the boot it runs in."""

    host: str
    boot_id: str | None = None

    def runs(self, holder: Holder) -> bool:
        """Whether `holder` is a process of this box in this boot (only then can its pid be checked here;
        a box of the same name, or this box before a reboot, is judged by the heartbeat alone)."""
        return holder.admin_host == self.host and holder.boot_id == self.boot_id


def local_host() -> str:
    return socket.gethostname()


def local_boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        return None
    return boot if boot and len(boot) <= _TEXT_MAX and boot.isprintable() else None


def this_box() -> AdminBox:
    return AdminBox(local_host(), local_boot_id())


def pid_alive(pid: int) -> bool:
    """Whether process `pid` on this box still runs (a zombie does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    except (OverflowError, ValueError):
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc: kill(0) is all we know
    return state not in ("Z", "X")


def stale_reason(probe: LockProbe, *, stale_after_s: float, here: AdminBox,
                 alive: Callable[[int], bool] = pid_alive) -> str | None:
    """Why the lock `probe` saw may be taken over, or None while it counts as held."""
    if not probe.exists:
        return None
    age = probe.age_s
    old = age is not None and age > stale_after_s
    holder = probe.holder
    if holder is None:
        if old:
            return f"{probe.problem or NO_RECORD}, lock last changed {age:.0f} s ago " \
                   f"(limit {stale_after_s:g} s)"
        return None
    if old:
        return f"its last heartbeat is {age:.0f} s old (limit {stale_after_s:g} s)"
    if here.runs(holder) and not alive(holder.pid):
        return f"its process {holder.pid} on this admin box ({here.host}) is gone"
    return None


# ---- errors ----------------------------------------------------------------------------------------------


class LockError(Exception):
    """The cluster lock could not be taken: the launch or stop must not proceed."""


class LockUnavailable(LockError):
    """Rank 0 cannot be reached (or the lock dir cannot be made there)."""

    def __init__(self, detail: str, purpose: str | None = "launch"):
        self.detail = detail
        self.purpose = purpose
        if purpose is None:  # only looking
            super().__init__(f"cannot read the cluster lock on rank 0: {detail}")
        else:
            super().__init__(f"cannot take the cluster lock on rank 0: {detail}; the {purpose} did not "
                             "proceed (no cockpit launches or stops without the lock)")


class LockHeld(LockError):
    """Another cockpit holds the lock (`holder` is None when its record is unreadable)."""

    def __init__(self, holder: Holder | None, *, path: str, target: str, stale_after_s: float,
                 age_s: float | None = None, problem: str | None = None):
        self.holder = holder
        self.path = path
        self.target = target
        self.age_s = age_s
        self.problem = problem
        seen = f", last heartbeat {age_s:.0f} s ago" if age_s is not None and holder else ""
        if holder is not None:
            who = f"{holder.describe()}{seen}"
        else:
            when = f", changed {age_s:.0f} s ago" if age_s is not None else ""
            who = f"holder unknown ({problem or NO_RECORD}{when})"
        clear = command(["rm", "-r", "--", path]).line
        super().__init__(
            f"refused: another cockpit holds the cluster lock: {who}; wait for it, or, if that cockpit is "
            f"really gone, retry after {stale_after_s:g} s without a heartbeat (a stale lock is taken over "
            f"with a warning) or remove the lock on rank 0 ({target}) from the login's home: {clear}")


# ---- the lock --------------------------------------------------------------------------------------------


def lock_path(cfg: ClusterConfig) -> str:
    """The lock dir on rank 0, relative to its SSH login's home."""
    return f"{LOCK_ROOT}/{cfg.cluster.container_name}.lock"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def _run(host: Host, cmd: Cmd, purpose: str | None, *, timeout: float = COMMAND_TIMEOUT_S,
               input: str | None = None) -> Result:
    try:
        return await host.run(cmd, timeout=max(timeout, 0.5), input=input)
    except (HostUnavailable, CommandTimeout) as exc:
        raise LockUnavailable(f"{exc} ({host.target})", purpose) from None


async def _probe(host: Host, path: str, purpose: str | None, timeout: float = COMMAND_TIMEOUT_S) -> LockProbe:
    """One consistent look (a look that raced a change is repeated a few times)."""
    for _ in range(PROBE_ATTEMPTS):
        marker = f"@@r37lock-{secrets.token_hex(6)}"
        res = await _run(host, probe_command(path, marker), purpose, timeout=timeout)
        probe = parse_probe(res.stdout, marker, path)
        if not probe.torn:
            break
        await asyncio.sleep(SETTLE_POLL_S / 2)
    return probe


async def _rank0(fleet: Fleet, purpose: str | None, timeout: float) -> Host:
    host = fleet[0]
    if not await host.wait_connected(max(timeout, 0.1)):
        st = host.status
        why = f": {st.error}" if st.error else ""
        raise LockUnavailable(f"rank 0 ({host.target}) is {st.state.value}{why}", purpose)
    return host


@dataclass(frozen=True, slots=True)
class LockStatus:
    """The lock as a display shows it."""

    path: str
    held: bool
    holder: Holder | None
    age_s: float | None
    stale: str | None
    problem: str | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["holder"] = self.holder.to_dict() if self.holder else None
        return d


async def read_lock(fleet: Fleet, cfg: ClusterConfig, *, stale_after_s: float = STALE_AFTER_S,
                    timeout_s: float = COMMAND_TIMEOUT_S) -> LockStatus:
    """Look at the lock (read-only). LockUnavailable when rank 0 cannot be reached."""
    host = await _rank0(fleet, None, timeout_s)
    probe = await _probe(host, lock_path(cfg), None, timeout_s)
    return LockStatus(probe.path, probe.exists, probe.holder, probe.age_s,
                      stale_reason(probe, stale_after_s=stale_after_s, here=this_box()), probe.problem)


async def read_holder(fleet: Fleet, cfg: ClusterConfig) -> Holder | None:
    """Who holds the lock now (None: nobody, or a record that cannot be read). LockUnavailable when rank 0
    cannot be reached."""
    return (await read_lock(fleet, cfg)).holder


INTERRUPTED_REMEDY = ("stop what it started (`r37-cockpit stop`, head first), then launch again "
                      "(`r37-cockpit launch --replace-stopped`); the next lock holder clears the stale lock")


def launch_interrupted(status: LockStatus) -> str | None:
    """Why `status` shows an interrupted launch (a launch lock whose holder is gone: its process on this
    admin box has ended, or its heartbeat is older than the stale limit), or None (no lock, a live
    launcher, a stop's lock, or a lock whose record cannot be read). For `status`: a cluster that looks
    "launching" while this returns a reason has no launcher left and never gets further."""
    holder = status.holder
    if not status.held or holder is None or holder.purpose != "launch" or status.stale is None:
        return None
    return f"launch interrupted: the launcher {holder.describe()} is gone ({status.stale})"


async def interrupted_launch(fleet: Fleet, cfg: ClusterConfig, *,
                             stale_after_s: float = STALE_AFTER_S) -> str | None:
    """`launch_interrupted` of the lock on rank 0 now (read-only). LockUnavailable when rank 0 cannot be
    reached."""
    return launch_interrupted(await read_lock(fleet, cfg, stale_after_s=stale_after_s))


class ClusterLock:
    """`async with ClusterLock(fleet, cfg, purpose="launch") as lock:` — the launch runs inside.

    Entering raises `LockHeld` (another cockpit holds it) or `LockUnavailable` (rank 0 unreachable, or
    no decision within `timeout_s`). After a takeover of a stale lock, `taken_over` is the old holder
    (None when its record was unreadable) and `warning` says whom it was taken from and why.
    While held, a background task refreshes the heartbeat; if the lock is found to be someone else's
    (rank 0 was unreachable longer than the stale limit and another cockpit took it over), `lost` says
    so and `on_lost` is called once. Leaving releases it (only a lock with this token); a release that
    fails leaves `release_problem` and the lock goes stale on its own.
    """

    def __init__(self, fleet: Fleet, cfg: ClusterConfig, purpose: Purpose = "launch", *,
                 heartbeat_s: float = HEARTBEAT_S, stale_after_s: float = STALE_AFTER_S,
                 timeout_s: float = ACQUIRE_TIMEOUT_S, settle_s: float = SETTLE_S,
                 on_lost: Callable[[str], None] | None = None):
        if purpose not in PURPOSES:
            raise ValueError(f"purpose must be one of {', '.join(PURPOSES)}, not {purpose!r}")
        if heartbeat_s <= 0 or stale_after_s < 2 * heartbeat_s:
            raise ValueError("the stale limit must be at least twice the heartbeat interval")
        self.fleet = fleet
        self.cfg = cfg
        self.purpose: str = purpose
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.timeout_s = timeout_s
        self.settle_s = settle_s
        self.on_lost = on_lost
        self.path = lock_path(cfg)
        self.record_path = f"{self.path}/{RECORD_NAME}"
        self.token = secrets.token_hex(16)
        self.here = this_box()
        self.holder: Holder | None = None       # our own record while held
        self.taken_over: Holder | None = None
        self.warning: str | None = None
        self.lost: str | None = None
        self.release_problem: str | None = None
        self.cleared: list[str] = []            # leftover release/takeover dirs this holder removed
        self.beats = 0                          # heartbeats written
        self._text = ""                         # the record as last written (its sha256 guards the next)
        self._held = False
        self._heartbeat: asyncio.Task[None] | None = None

    @property
    def held(self) -> bool:
        return self._held and self.lost is None

    @property
    def target(self) -> str:
        return self.fleet[0].target

    async def __aenter__(self) -> ClusterLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    # ---- acquire -----------------------------------------------------------------------------------------

    def _new_holder(self) -> Holder:
        now = _utc(time.time())
        return Holder(owner=local_user(), admin_host=self.here.host, pid=os.getpid(), purpose=self.purpose,
                      started_at=now, heartbeat_at=now, token=self.token, boot_id=self.here.boot_id)

    def _held_error(self, probe: LockProbe) -> LockHeld:
        return LockHeld(probe.holder, path=self.path, target=self.target, stale_after_s=self.stale_after_s,
                        age_s=probe.age_s, problem=probe.problem)

    async def acquire(self) -> ClusterLock:
        """Take the lock: LockHeld, LockUnavailable, or held (with the heartbeat running)."""
        if self._held:
            raise RuntimeError("this ClusterLock is already held")
        try:
            await self._acquire()
            await self._clear_leftovers()
            return self
        except BaseException:
            if self._held:  # cancelled (or failed) after the lock was ours: do not leave it beating
                if self._heartbeat is not None:
                    self._heartbeat.cancel()
                with contextlib.suppress(Exception):
                    await self.release()
            raise

    async def _clear_leftovers(self) -> None:
        """Remove the release and takeover dirs of this lock that earlier holders left behind (killed
        between their `mv` and their `rm`) and that have not changed for LEFTOVER_AGE_MIN minutes. Best
        effort: a failure leaves them for the next holder."""
        base = self.path.rsplit("/", 1)[-1]
        argv = ["find", LOCK_ROOT, "-mindepth", "1", "-maxdepth", "1", "-type", "d",
                "(", "-name", f"{base}.release.*", "-o", "-name", f"{base}.takeover.*", ")",
                "-mmin", f"+{LEFTOVER_AGE_MIN}", "-print", "-exec", "rm", "-r", "-f", "--", "{}", "+"]
        with contextlib.suppress(LockUnavailable):
            res = await _run(self.fleet[0], argv, self.purpose)
            self.cleared = [line.rsplit("/", 1)[-1] for line in res.stdout.splitlines() if line.strip()]

    async def _acquire(self) -> ClusterLock:
        deadline = time.monotonic() + self.timeout_s

        def left() -> float:
            return min(COMMAND_TIMEOUT_S, deadline - time.monotonic())

        host = await _rank0(self.fleet, self.purpose, deadline - time.monotonic())
        settle_until: float | None = None
        vanished = 0
        last: LockProbe | None = None
        raced: tuple[LockProbe, str] | None = None
        while time.monotonic() < deadline:
            made = await self._make(host, left())
            if made is True:
                if raced is not None:  # the stale lock we judged was moved aside by another taker
                    self._took_over(*raced, by_other=True)
                return self
            raced = None
            if isinstance(made, str):  # mkdir failed, yet there is no lock: gone meanwhile, or cannot be made
                vanished += 1
                if vanished >= 3:
                    raise LockUnavailable(f"cannot create {self.path} on rank 0 ({self.target}): {made}",
                                          self.purpose)
                continue
            last = probe = made
            reason = stale_reason(probe, stale_after_s=self.stale_after_s, here=self.here)
            if reason is None:
                if probe.missing_record and probe.problem == NO_RECORD:
                    # a holder between its mkdir and its record: give it a moment, to name it
                    settle_until = settle_until or time.monotonic() + self.settle_s
                    if time.monotonic() < min(settle_until, deadline):
                        await asyncio.sleep(SETTLE_POLL_S)
                        continue
                raise self._held_error(probe)
            outcome = await self._take_over(host, probe, reason, left())
            if outcome == "won":
                return self
            raced = (probe, reason) if outcome == "raced" else None
        if last is not None:
            raise self._held_error(last)
        raise LockUnavailable(f"no decision on {self.path} within {self.timeout_s:g} s", self.purpose)

    async def _make(self, host: Host, timeout: float) -> Literal[True] | LockProbe | str:
        """mkdir the lock and write our record. True: held. A probe: the lock exists (as that probe saw
        it). A string: there is no lock, yet none could be made (why)."""
        res = await _run(host, sequence(["mkdir", "-p", "--", LOCK_ROOT], ["mkdir", "--", self.path]),
                         self.purpose, timeout=timeout)
        if not res.ok:
            probe = await _probe(host, self.path, self.purpose, timeout)
            return probe if probe.exists else (res.stderr.strip() or f"exit status {res.exit_status}")
        return await self._write_record(host, timeout)

    async def _write_record(self, host: Host, timeout: float) -> Literal[True] | LockProbe | str:
        """Our record into the lock dir we just made; then the heartbeat starts."""
        holder = self._new_holder()
        text = record_text(holder)
        for attempt in range(WRITE_ATTEMPTS):
            res = await _run(host, write_stdin_atomic(self.record_path), self.purpose, timeout=timeout,
                             input=text)
            if res.ok:
                self.holder, self._text, self._held = holder, text, True
                self._heartbeat = asyncio.create_task(self._beat(), name=f"cluster-lock-{self.purpose}")
                return True
            probe = await _probe(host, self.path, self.purpose, timeout)
            if probe.exists and probe.problem != NO_RECORD:
                return probe  # exit 17: another record is there (a lock was put back over our empty dir)
            if attempt + 1 < WRITE_ATTEMPTS:
                await asyncio.sleep(SETTLE_POLL_S)  # our dir moved aside for a moment by a taker's check
        if not probe.exists:
            return "the new lock dir vanished"
        # our own dir, still empty, and the write keeps failing (disk full?): leave nothing behind
        with contextlib.suppress(LockUnavailable):
            await _run(host, ["rmdir", "--", self.path], self.purpose, timeout=timeout)
        raise LockUnavailable(f"cannot write {self.record_path} on rank 0 ({self.target}): "
                              f"{res.stderr.strip() or res.exit_status}", self.purpose)

    async def _put_back(self, host: Host, grave: str, timeout: float) -> None:
        """The lock moved to `grave` was not the one judged: back into place, never over a lock that
        appeared meanwhile (`mv -n`). If one did, an empty dir (a holder between mkdir and record) is
        dropped; a lock with a record stays under `grave`, and its holder's heartbeat reports it lost."""
        await _run(host, ["mv", "-T", "-n", "--", grave, self.path], self.purpose, timeout=timeout)
        await _run(host, ["rmdir", "--ignore-fail-on-non-empty", "--", grave], self.purpose, timeout=timeout)

    async def _take_over(self, host: Host, probe: LockProbe, reason: str,
                         timeout: float) -> Literal["won", "raced", "changed"]:
        """Move the stale lock aside to a name of our own (only one taker's `mv` succeeds), check that
        what moved is the lock judged, then mkdir ours."""
        grave = f"{self.path}.takeover.{self.token}"
        res = await _run(host, ["mv", "-T", "--", self.path, grave], self.purpose, timeout=timeout)
        if not res.ok:
            return "raced"  # another taker moved it first (or it was released)
        if not probe.same_lock(await _probe(host, grave, self.purpose, timeout)):
            await self._put_back(host, grave, timeout)
            return "changed"
        try:
            made = await self._make(host, timeout)
        finally:
            # only now: while the old lock exists under its new name, no new lock can get its inode
            with contextlib.suppress(LockUnavailable):
                await _run(host, ["rm", "-r", "-f", "--", grave], self.purpose, timeout=timeout)
        if made is not True:
            return "changed"
        self._took_over(probe, reason)
        return "won"

    def _took_over(self, probe: LockProbe, reason: str, *, by_other: bool = False) -> None:
        old = probe.holder
        self.taken_over = old
        who = old.describe() if old else f"an unknown holder ({probe.problem})"
        how = " (another cockpit cleared it at the same moment)" if by_other else ""
        self.warning = f"took over a stale cluster lock from {who}: {reason}{how}"

    # ---- heartbeat ---------------------------------------------------------------------------------------

    def _lose(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
            if self.on_lost:
                self.on_lost(why)

    async def _beat(self) -> None:
        try:
            await self._beat_loop()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a heartbeat that stops must say so: the lock will go stale
            self._lose(f"the cluster lock's heartbeat failed: {exc}")

    async def _beat_loop(self) -> None:
        host = self.fleet[0]
        strikes = 0
        while self.lost is None:
            await asyncio.sleep(self.heartbeat_s)
            assert self.holder is not None
            new = replace(self.holder, heartbeat_at=_utc(time.time()))
            text = record_text(new)
            timeout = max(self.heartbeat_s, 2.0)
            try:
                res = await _run(host, write_stdin_atomic(self.record_path, replace_sha256=_sha(self._text)),
                                 self.purpose, timeout=timeout, input=text)
                if res.ok:
                    self.holder, self._text, strikes = new, text, 0
                    self.beats += 1
                    continue
                probe = await _probe(host, self.path, self.purpose, timeout)
            except LockUnavailable:
                continue  # rank 0 unreachable: the record ages; the next beat tries again
            if probe.holder is not None and probe.holder.token == self.token:
                self._text = probe.record or ""  # a beat that landed although its answer was lost
                strikes = 0
                continue
            strikes += 1  # twice in a row: a taker's check moves a live lock aside for a moment only
            if strikes < 2:
                continue
            if probe.holder is not None:
                self._lose(f"the cluster lock was taken over by {probe.holder.describe()}")
            else:
                self._lose(f"the cluster lock on rank 0 ({self.target}) is gone "
                           f"({probe.problem or 'removed'}): another cockpit may launch or stop")

    async def _stop_beat(self) -> None:
        task, self._heartbeat = self._heartbeat, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await asyncio.wait_for(task, RELEASE_TIMEOUT_S)

    # ---- release -----------------------------------------------------------------------------------------

    async def release(self) -> bool:
        """Remove the lock if it still carries our token; True when removed. Never raises for the host:
        a release that fails is `release_problem`, and the lock goes stale on its own."""
        if not self._held:
            return False
        await self._stop_beat()
        self._held = False
        host = self.fleet[0]

        def ours(p: LockProbe) -> bool:
            return p.holder is not None and p.holder.token == self.token

        try:
            probe = await _probe(host, self.path, self.purpose, RELEASE_TIMEOUT_S)
            if not ours(probe):
                other = probe.holder.describe() if probe.holder else probe.problem
                self.release_problem = ("the cluster lock was no longer ours: left alone"
                                        + (f" (held by {other})" if probe.exists else " (already gone)"))
                return False
            # moved aside first, then checked: a lock that became another's in between is put back
            grave = f"{self.path}.release.{self.token}"
            t = RELEASE_TIMEOUT_S
            res = await _run(host, ["mv", "-T", "--", self.path, grave], self.purpose, timeout=t)
            if not res.ok:
                self.release_problem = "the cluster lock vanished while it was released"
                return False
            if not ours(await _probe(host, grave, self.purpose, t)):
                await self._put_back(host, grave, timeout=t)
                self.release_problem = "the cluster lock changed while it was released: left alone"
                return False
            res = await _run(host, ["rm", "-r", "-f", "--", grave], self.purpose, timeout=t)
            if not res.ok:
                self.release_problem = f"could not remove {grave} on rank 0: {res.stderr.strip()}"
            return True
        except LockUnavailable as exc:
            self.release_problem = (f"could not release the cluster lock: {exc.detail}; it goes stale "
                                    f"{self.stale_after_s:g} s after its last heartbeat")
            return False
