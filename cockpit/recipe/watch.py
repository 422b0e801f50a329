"""The live cluster model, kept up to date: one watcher per cockpit over the fleet's existing connections.

Per rank, one long-lived channel runs `docker inspect NAME` every `interval` seconds
(`hosts.every_changed`: no new SSH session per look, a round equal to the last one sent as one line), so
a container that starts, stops or disappears anywhere — also by another cockpit or by hand — shows
within about a second; the rank's log is read (its tail for a container this watcher did not see start,
all of it for one it launched) and then followed, through the same follower as the Logs pane. Rank 0's
API is probed through the SSH tunnel and its `/metrics` sampled for liveness.
Everything lands in one `ClusterTimeline`: the header, every pane and `status` render that.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from functools import partial

from cockpit import constants
from cockpit.api import readiness
from cockpit.api.client import ApiClient, via
from cockpit.api.liveness import EngineSample, HangTracker, parse_sample, read_metrics_text
from cockpit.api.status import ApiStatus
from cockpit.config import ClusterConfig
from cockpit.hosts import SAME, CommandTimeout, Fleet, HostUnavailable, every_changed
from cockpit.recipe import containers
from cockpit.recipe.containers import ContainerState, InspectFrame, read_inspect_frame
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.lock import LockError, read_lock
from cockpit.recipe.phases import PHASE_INDEX, PHASES, Phase
from cockpit.recipe.supervise import supervised
from cockpit.recipe.timeline import (
    DEFAULT_STUCK_LIMITS,
    READ_SKEW,
    ClusterTimeline,
    LaunchEvent,
    RankFailed,
    RankTimeline,
)
from cockpit.telemetry.logfollow import ResumePoint, follow
from cockpit.telemetry.logline import LogLine, format_timestamp

log = logging.getLogger(__name__)

FRAME_MARK = "r37-cockpit-inspect-end"
STATUS_TAIL = 400            # log lines read of a container this watcher did not see start
API_EVERY = 2.0              # seconds between API probes while rank 0 has a running container
LOCK_EVERY = 5.0             # seconds between reads of the cluster lock while a launch may be running
RETRY = 1.0
READING_CONTAINER = "reading its container"
READING_LOG = "reading its log"
READING_API = "probing its API"
READING_HEAD = "its head (rank 0) is not read yet"
NO_ENGINE = ApiStatus("down", "rank 0 has no running ds41_r37 container",
                      "launch the cluster (pane 4, or `r37-cockpit launch`)", checked_at=0.0)

Listener = Callable[[LaunchEvent], None]
MetricsListener = Callable[[str, float], None]     # (rank 0's /metrics text, time.time() it was read)


class ClusterWatcher:
    """Watch every rank's container, log and the API until closed; `timeline` is always current."""

    def __init__(self, fleet: Fleet, cfg: ClusterConfig, *, ledger: Ledger | None = None,
                 interval: float = 1.0, api_url: str | None = None,
                 stuck_limits: dict[Phase, float] | None = None, probe_api: bool = True):
        self.fleet = fleet
        self.cfg = cfg
        self.ledger = ledger or Ledger(cfg)
        self.interval = interval
        self.api_url = api_url
        self.limits = phase_limits(cfg.engine.phase_limit_s) if stuck_limits is None else stuck_limits
        self.probe_api = probe_api
        self.timeline = ClusterTimeline(cfg.ranks, hang_after_s=cfg.engine.hang_after_s)
        for tl in self.timeline.ranks.values():
            tl.pending = READING_CONTAINER        # nothing is judged before it is read
        self.changed = asyncio.Event()
        self.hang = HangTracker(cfg.engine.hang_after_s)
        self._listeners: list[Listener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._followers: dict[int, asyncio.Task[None]] = {}
        self._points: dict[int, ResumePoint] = {}
        self._from_start: set[int] = set()          # ranks this cockpit is launching: read their whole log
        self._seen: dict[int, str | None] = {}      # rank -> container ID of its last frame (None: none)
        self._tail_read: set[int] = set()           # ranks whose current log has been read up to now
        self._fed: dict[int, ResumePoint] = {}      # per rank: the last log line fed to the model
        self._catching_up: dict[int, asyncio.Task[None]] = {}
        self._launching = False                     # this cockpit is launching (its Launcher said so)
        self._lock_task: asyncio.Task[None] | None = None
        self._lock_read_at = 0.0
        self._api_probed = False
        self._last_sample: EngineSample | None = None
        self._metrics_listeners: list[MetricsListener] = []
        self.metrics_every = API_EVERY             # seconds between /metrics reads while the API is ready
        self._client: ApiClient | None = None
        self._closing: set[asyncio.Task[None]] = set()      # old clients being closed

    # ---- life ------------------------------------------------------------------------------------------

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def subscribe_metrics(self, listener: MetricsListener, every: float) -> None:
        """Hand every /metrics text the liveness probe reads to `listener` too (one fetch for both), and
        read it every `every` seconds (readiness is still probed every API_EVERY)."""
        self._metrics_listeners.append(listener)
        self.metrics_every = min(self.metrics_every, every)

    def start(self) -> None:
        if self._tasks:
            return
        self.ledger.records()  # read once now: a corrupt ledger is kept aside and noted before any launch
        self._tasks = [asyncio.create_task(supervised(f"watcher of rank {r}", partial(self._watch_rank, r),
                                                      partial(self._rank_down, r)), name=f"watch-{r}")
                       for r in self.cfg.ranks]
        self._tasks.append(asyncio.create_task(
            supervised("the watcher's tick", self._tick_loop, partial(self._loop_down, "tick")),
            name="watch-tick"))
        if self.probe_api:
            self._tasks.append(asyncio.create_task(
                supervised("the API probe", self._api_loop, partial(self._loop_down, "API probe")),
                name="watch-api"))

    def _rank_down(self, rank: int, what: str, delay: float) -> None:
        """A rank's watcher failed: what it showed is not current; the next good look clears this."""
        self.timeline[rank].unknown = f"its watcher failed: {what}; restarting in {delay:g} s"
        self.apply([])

    def _loop_down(self, loop: str, what: str, delay: float) -> None:
        self.timeline.watch_problems[loop] = f"the {loop} failed: {what}; restarting in {delay:g} s"
        self.apply([])

    async def close(self) -> None:
        tasks = [*self._tasks, *self._followers.values(), *self._catching_up.values()]
        if self._lock_task is not None:
            tasks.append(self._lock_task)
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks, self._followers, self._catching_up, self._lock_task = [], {}, {}, None
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None
        await asyncio.gather(*self._closing, return_exceptions=True)

    async def __aenter__(self) -> ClusterWatcher:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def looked(self) -> bool:
        """Every rank read once (its container and log, its API for rank 0, or its host is not reachable),
        and whether a launch is running read where the verdict needs it: enough for a one-off `status`."""
        for rank, tl in self.timeline.ranks.items():
            if tl.pending and not self.fleet[rank].status.down:
                return False
        if self._needs_lock() and self.timeline.launch_in_progress is None:
            return False
        v = self.timeline.compute_verdict()
        if v.state == "down" and v.first_failed is None and any(
                t.failure is not None and not t.failure.secondary for t in self.timeline.ranks.values()):
            return False       # who failed first is still being read from the other ranks' logs
        head = min(self.timeline.ranks)
        return self._api_probed or not self.probe_api or self.fleet[head].status.down

    async def first_look(self, timeout: float) -> bool:
        """Wait until `looked()` (False when `timeout` ran out first)."""
        deadline = time.monotonic() + timeout
        while not self.looked():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self.changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 0.5))
        return True

    # ---- what the launcher tells it --------------------------------------------------------------------

    def expect_launch(self, rank: int) -> RankTimeline:
        """This cockpit is about to launch rank: a fresh timeline, whose container log is read whole."""
        self._launching = True
        self.timeline.launch_in_progress, self.timeline.launch_note = True, "by this cockpit"
        self._from_start.add(rank)
        self._forget_log(rank)
        self._seen.pop(rank, None)
        tl = self._reset(rank)
        tl.pending = ""
        return tl

    def launch_over(self) -> None:
        """This cockpit's launch has run every `docker run` it will: from now on whether a launch is
        running is read from the cluster lock again, when the verdict needs it."""
        self._launching = False
        self.timeline.launch_in_progress, self.timeline.launch_note = None, ""
        self._lock_read_at = 0.0
        self.apply([])

    def expect_stop(self, ranks: list[int], at: float | None = None) -> None:
        """This cockpit is about to stop these ranks: what they print from now on is their shutdown."""
        at = time.time() if at is None else at
        events: list[LaunchEvent] = []
        for rank in ranks:
            events += self.timeline[rank].request_stop(at)
        self.apply(events)

    def apply(self, events: list[LaunchEvent]) -> None:
        for event in self.timeline.settle(events):
            for listener in list(self._listeners):
                listener(event)
        self.changed.set()
        self._catch_up_if_needed()

    # ---- per rank: container frames and logs ----------------------------------------------------------

    async def _watch_rank(self, rank: int) -> None:
        host = self.fleet[rank]
        name = self.cfg.cluster.container_name
        # a round equal to the last one comes as one line (SAME): that frame again, seen now
        cmd = every_changed(self.interval, containers.inspect_argv(name), marker=FRAME_MARK)
        while True:
            try:
                if not host.status.connected:
                    await host.wait_connected()
                chunk: list[str] = []
                last: InspectFrame | None = None
                async for line in host.stream(cmd, merge_stderr=True):
                    mark, _, rc = line.strip().partition(" ")
                    if mark != FRAME_MARK:
                        if len(chunk) < 5000:       # a container's inspect is ~200 lines; bound junk
                            chunk.append(line)
                        continue
                    if rc == SAME and not chunk and last is not None:
                        frame = last
                    else:
                        status = int(rc) if rc.isdigit() else None
                        frame = last = read_inspect_frame("\n".join(chunk), status)
                    chunk = []
                    self._frame(rank, frame)
            except (HostUnavailable, CommandTimeout):
                pass
            await asyncio.sleep(RETRY)

    def _frame(self, rank: int, frame: InspectFrame) -> None:
        """One `docker inspect` of rank's container: a container, a sure "none", or docker not answering
        (then the container is unknown: never read as "none", and the rank is not reset)."""
        now = time.time()
        tl = self.timeline[rank]
        if not frame.known:
            detail = f"docker not answering: {frame.error}"
            if tl.unknown != detail:
                tl.unknown = detail
                self.apply([])
            return
        state = frame.state
        if tl.unknown and not tl.failed:
            tl.unknown = ""                                   # docker answers again (or the host is back)
        previous = self._seen.get(rank, "?")
        self._seen[rank] = state.id if state else None
        if state is None:
            if tl.container is not None:                       # removed: the rank has nothing now
                self._forget_log(rank)
                self._reset(rank)
            tl = self.timeline[rank]
            if tl.pending:
                self._mark_read(rank)
            self.apply([])
            return
        if tl.container_id not in (None, state.id) or (previous not in ("?", None, state.id)):
            self._forget_log(rank)                             # another container of that name: relaunched
            tl = self._reset(rank)
        if previous in ("?", None) and state.id != tl.container_id and not self._launching:
            self.timeline.launch_in_progress = None            # a container came: who launched it is re-read
        # a rank is unread until its log is; a log already read for this container (seen `created`, with no
        # line yet, before it ran) stays read: its next follower resumes after it and never reads it again
        if tl.pending == READING_CONTAINER or (not tl.spans and rank not in self._from_start
                                               and rank not in self._tail_read):
            tl.pending = READING_LOG
        rec = self.ledger.records().get(rank)      # one read of the ledger per look
        unrecorded = rec is None or rec.container_id != state.id
        if unrecorded and self.ledger.adopt(rank, state.id, state.created_at):
            rec = self.ledger.records().get(rank)  # its docker run was in flight when the host was lost
        ours = rec is not None and rec.container_id == state.id
        tl.owner = "cockpit" if ours else "by hand"
        events: list[LaunchEvent] = []
        if ours and rec is not None and rec.stop_requested_at is not None:
            first_seen = tl.stop_began is None
            events += tl.request_stop(rec.stop_requested_at)
            if first_seen:      # a stop is cluster-wide: every rank it names is stopping, not only this one
                events += self._stops_from_ledger()
        changed = tl.container != state
        if changed:
            events += tl.feed_container(state, now)
        if events or changed:
            self.apply(events)
        idle = rank not in self._followers or self._followers[rank].done()
        if idle and not (state.exited and rank in self._tail_read):
            self._followers[rank] = asyncio.create_task(self._follow(rank, state), name=f"log-{rank}")

    def _mark_read(self, rank: int) -> None:
        """Rank's container and log are read: it is judged from now on. A worker whose log says it waits
        for the head stays unread until the head is (it may have served for hours); the head, until its
        API was probed."""
        tl = self.timeline[rank]
        head = min(self.timeline.ranks)
        if rank == head:
            running = tl.container is not None and tl.container.running
            tl.pending = READING_API if running and self.probe_api and not self._api_probed else ""
        elif self.timeline[head].pending and tl.phase is Phase.WAIT_HEAD:
            tl.pending = READING_HEAD
        else:
            tl.pending = ""
        if rank == head and not tl.pending:
            for other in self.timeline.ranks.values():
                if other.pending == READING_HEAD:
                    other.pending = ""

    async def _follow(self, rank: int, state: ContainerState) -> None:
        """`_read_log`, and if it fails the rank is unknown until its next look starts a new follower."""
        try:
            await self._read_log(rank, state)
        except asyncio.CancelledError:
            raise
        except Exception as exc:           # a bug must not leave a dead follower shown as current
            log.warning("the log follower of rank %d failed", rank, exc_info=True)
            self.timeline[rank].unknown = f"its log follower failed: {type(exc).__name__}: {exc}"[:300]
            self.apply([])

    async def _read_log(self, rank: int, state: ContainerState) -> None:
        """Read the container's log up to now (its tail, or all of it), then follow it while it runs."""
        host = self.fleet[rank]
        point = self._points.setdefault(rank, ResumePoint())
        tail = None if rank in self._from_start else STATUS_TAIL
        tl = self.timeline[rank]
        if rank not in self._tail_read:
            began, count = time.time(), 0
            async for item in follow(host, state.id, follow=False, tail=tail, resume=False, point=point):
                if isinstance(item, LogLine):
                    count += 1
                    self._feed(rank, item)
            if tail is not None and count >= tail:
                tl.partial = True       # the tail may begin after the boot: its phase is not evidence
            self._tail_read.add(rank)
            tl.read_to = float("inf") if state.exited else max(tl.read_to, began)
            if tl.pending:
                self._mark_read(rank)
            self.apply([])
        if not state.running:
            return
        async for item in follow(host, state.id, follow=True, point=point):
            if isinstance(item, LogLine):
                self._feed(rank, item)
        if self.timeline[rank] is tl and tl.container is not None and tl.container.id == state.id:
            tl.read_to = float("inf") if tl.container.exited else tl.read_to

    def _feed(self, rank: int, line: LogLine) -> None:
        """One log line into its rank's timeline (once: a catch-up read and the follower may both bring
        it); the model is settled when the line said something (a phase, a failure, progress), else at the
        next tick: a log flood costs a regex search per line, not a verdict per line."""
        fed = self._fed.setdefault(rank, ResumePoint())
        if line.ts < fed.ts or (line.ts == fed.ts and fed.texts[line.text] > 0):
            return
        fed.note(line.ts, line.text)
        tl = self.timeline[rank]
        events = tl.feed_line(line.text, line.ts / 1e9)
        if any(isinstance(e, RankFailed) for e in events):
            events += self._stops_from_ledger()     # a stop another cockpit began: its shutdown, no failure
        if events:
            self.apply(events)

    def _stops_from_ledger(self) -> list[LaunchEvent]:
        """Stop requests noted in the ledger (by any cockpit on this admin box) for the containers seen."""
        events: list[LaunchEvent] = []
        for rank, rec in self.ledger.records().items():
            tl = self.timeline.ranks.get(rank)
            if (tl is not None and rec.stop_requested_at is not None and tl.container_id == rec.container_id):
                events += tl.request_stop(rec.stop_requested_at)
        return events

    # ---- naming the rank that failed first ----------------------------------------------------------------

    def _catch_up_if_needed(self) -> None:
        """A failure is known but not yet who failed first: read, once, each rank whose log has not been
        read up to that moment (`docker logs --since` its last line fed), instead of waiting on its
        follower, which a busy admin box may serve late."""
        v = self.timeline.verdict
        if v.state != "down" or v.first_failed is not None:
            return
        failures = [t.failure for t in self.timeline.ranks.values() if t.failure is not None]
        if not failures:
            return
        first_at = min(f.at for f in failures)
        for rank in self.timeline.blame_pending(first_at):
            task = self._catching_up.get(rank)
            if rank in self._tail_read and (task is None or task.done()):
                self._catching_up[rank] = asyncio.create_task(self._catch_up(rank, first_at),
                                                              name=f"catch-up-{rank}")

    async def _catch_up(self, rank: int, first_at: float) -> None:
        tl = self.timeline[rank]
        await asyncio.sleep(max(0.0, first_at + READ_SKEW - time.time()))   # what it may still write then
        container = tl.container_id or self.cfg.cluster.container_name
        fed = self._fed.get(rank, ResumePoint())
        began = time.time()
        point = ResumePoint()
        point.ts, point.texts = fed.ts, fed.texts.copy()
        try:
            async for item in follow(self.fleet[rank], container, follow=False, resume=False, point=point,
                                     since=format_timestamp(fed.ts) if fed.ts else None):
                if isinstance(item, LogLine):
                    self._feed(rank, item)
        except (HostUnavailable, CommandTimeout) as exc:
            tl.unknown = tl.unknown or f"log not readable up to the failure: {exc}"
        else:
            if self.timeline[rank] is tl:
                tl.read_to = max(tl.read_to, began)
        self.apply([])

    def _note_flat(self, sample: EngineSample) -> None:
        """Two samples in a row with requests in the engine and no counter growth: flat until now."""
        prev, self._last_sample = self._last_sample, sample
        flat = (prev is not None and sample.busy and sample.complete
                and sample.generation_tokens_total == prev.generation_tokens_total
                and sample.prompt_tokens_total == prev.prompt_tokens_total)
        self.timeline.metrics_flat_until = time.time() if flat else None

    def suspect_hang(self) -> bool:
        """The head's last stats line shows requests in the engine and no tokens: worth a second look."""
        stats = self.timeline[min(self.timeline.ranks)].stats
        return bool(stats) and stats[-1][1] == stats[-1][2] == 0 and stats[-1][3] + stats[-1][4] > 0

    def _reset(self, rank: int) -> RankTimeline:
        """A new timeline for rank (a new container, or none)."""
        if rank == min(self.cfg.ranks):
            self.hang = HangTracker(self.cfg.engine.hang_after_s)   # a new engine: a new series
            self._last_sample = None
        return self.timeline.reset_rank(rank)

    def _forget_log(self, rank: int) -> None:
        """Rank's container is gone or replaced: its follower stops and the next one reads the new log."""
        task = self._followers.pop(rank, None)
        if task is not None:
            task.cancel()
        self._tail_read.discard(rank)
        self._points.pop(rank, None)
        self._fed.pop(rank, None)

    # ---- hosts, stuck ranks, deferred verdicts ---------------------------------------------------------

    async def _tick_loop(self) -> None:
        while True:
            self.tick()
            if self.timeline.watch_problems.pop("tick", None) is not None:
                self.apply([])
            await asyncio.sleep(self.interval)

    def tick(self) -> None:
        now = time.time()
        events: list[LaunchEvent] = []
        for rank, tl in self.timeline.ranks.items():
            status = self.fleet[rank].status
            if status.connected:
                events += tl.host_back(now)
            elif status.down:
                # whatever runs there is not known now: never "nothing launched" for that rank
                events += tl.host_lost(status.error or status.state.value, now)
            events += tl.check_stuck(now, self.limits)
        self.apply(events)
        if self._needs_lock() and time.monotonic() - self._lock_read_at >= LOCK_EVERY and (
                self._lock_task is None or self._lock_task.done()):
            self._lock_read_at = time.monotonic()
            self._lock_task = asyncio.create_task(self._read_lock(), name="watch-lock")

    def _needs_lock(self) -> bool:
        """Some ranks boot while others have no container and this cockpit is not launching: whether a
        launch is running (another cockpit's) is read from the cluster lock on rank 0."""
        if self._launching:
            return False
        ranks = self.timeline.ranks.values()
        return (any(t.condition == "none" for t in ranks)
                and any(t.container is not None and t.container.running for t in ranks))

    async def _read_lock(self) -> None:
        try:
            lock = await read_lock(self.fleet, self.cfg)
        except (LockError, HostUnavailable, CommandTimeout):
            return                          # not known: the verdict stays unknown, read again later
        if self._launching:
            return
        holder = lock.holder
        live = lock.held and holder is not None and lock.stale is None and holder.purpose == "launch"
        self.timeline.launch_in_progress = live
        if live and holder is not None:
            self.timeline.launch_note = f"by {holder.describe()}"
        elif lock.held and lock.stale:
            self.timeline.launch_note = f"the launcher is gone: {lock.stale}"
        else:
            self.timeline.launch_note = ""
        self.apply([])

    # ---- the API and the engine's liveness --------------------------------------------------------------

    async def _api_loop(self) -> None:
        next_probe = 0.0
        while True:
            now, api = time.monotonic(), self.timeline.api
            if now >= next_probe or api is None or not api.ready or not api.url:
                await self.probe()
                next_probe = now + API_EVERY
                if self.timeline.watch_problems.pop("API probe", None) is not None:
                    self.apply([])
            else:
                self.apply(await self._read_metrics(api.url))
            await asyncio.sleep(self.metrics_every)

    async def probe(self) -> None:
        """One readiness probe (and a /metrics sample when ready). Rank 0's container exited, failed or
        being stopped: the API is `down`, not what it was. No container of that name: the API is probed
        all the same (it may be served some other way), and reported as it answers."""
        head = self.timeline[min(self.timeline.ranks)]
        gone = head.container is not None and not head.container.running
        # "stuck" is a judgement of absence (no progress within the limit), withdrawn when the rank moves on:
        # the API is still probed, else a slow head that does come up would stay failed for good
        failed = head.failure is not None and head.failure.source != "stuck"
        if self.api_url is None and (gone or failed or head.stop_began is not None):
            if head.rank in self._seen and self.timeline.api != NO_ENGINE:
                self.timeline.liveness, self._last_sample = None, None   # nothing serves: no liveness
                self.hang = HangTracker(self.cfg.engine.hang_after_s)
                self.apply(self.timeline.mark_api(NO_ENGINE, time.time()))
            self._api_probed = self._api_probed or head.rank in self._seen
            return
        if head.rank in self._from_start and PHASE_INDEX[head.phase] < PHASE_INDEX[Phase.CUDA_GRAPHS]:
            return
        connected = self.api_url is not None or self.fleet[head.rank].status.connected
        ready = await readiness.check(self.fleet, self.cfg.cluster.api_port, constants.SERVED_MODEL,
                                      api_url=self.api_url, client_for=self._kept_client)
        if not connected:       # no tunnel without rank 0's host: not a look at the API, whatever it said
            if self.fleet[head.rank].status.down:
                self.apply(self.timeline.mark_api(ready, time.time()))
            return
        at = time.time()
        if head.rank not in self._from_start and not head.ready and head.spans:
            at = head.spans[-1].start     # found serving: it has been since its last boot line, not "now"
        # what the probe changed is published before anything else is awaited: a model changed but not yet
        # announced would let another event publish its verdict first (and a reader stop on it)
        events = self.timeline.mark_api(ready, at)
        self._api_probed = True
        if head.pending == READING_API:
            self._mark_read(head.rank)
        self.apply(events)
        if ready.ready and ready.url:
            self.apply(await self._read_metrics(ready.url))

    def _kept_client(self, url: str) -> ApiClient:
        """The one client of the probes and /metrics reads, for `url`: its connection is kept between
        them (a new one per probe opened an SSH channel every two seconds). A new URL (the tunnel's port
        changed) gets a new client; the old one is closed in the background."""
        if self._client is None or self._client.base_url != url.rstrip("/"):
            old, self._client = self._client, ApiClient(url, connect_timeout=5, read_timeout=5,
                                                        via=via(self.api_url))
            if old is not None:
                self._closing.add(task := asyncio.create_task(old.aclose()))
                task.add_done_callback(self._closing.discard)
        return self._client

    async def _read_metrics(self, url: str) -> list[LaunchEvent]:
        """One /metrics read over the kept connection: the liveness series, then every metrics listener."""
        client = self._kept_client(url)
        try:
            text = await read_metrics_text(client)
        except Exception:   # unreadable now: the next readiness probe says how the API is
            return []
        at = time.time()
        sample = parse_sample(text, time.monotonic())
        events = self.timeline.mark_liveness(self.hang.feed(sample))
        self._note_flat(sample)
        for listener in list(self._metrics_listeners):
            listener(text, at)
        return events


def phase_limits(limit_s: float | None) -> dict[Phase, float]:
    """Seconds a rank may stay in each boot phase: the card's defaults, or one limit for every phase."""
    if limit_s is None:
        return dict(DEFAULT_STUCK_LIMITS)
    return {p: limit_s for p in PHASES if p not in (Phase.PENDING, Phase.READY)}
