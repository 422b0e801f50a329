"""The live cluster model, kept up to date: one watcher per cockpit over the fleet's existing connections.

Per rank, one long-lived channel runs `docker inspect NAME` every `interval` seconds (`hosts.every`: no
new SSH session per look), so a container that starts, stops or disappears anywhere — also by another
cockpit or by hand — shows within about a second; the rank's log is read (its tail for a container this
watcher did not see start, all of it for one it launched) and then followed, through the same follower
as the Logs pane. Rank 0's API is probed through the SSH tunnel and its `/metrics` sampled for liveness.
Everything lands in one `ClusterTimeline`: the header, every pane and `status` render that.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

from cockpit import constants as C
from cockpit.api import readiness
from cockpit.api.client import ApiClient
from cockpit.api.liveness import EngineSample, HangTracker, parse_sample, read_metrics_text
from cockpit.api.status import ApiStatus
from cockpit.config import ClusterConfig
from cockpit.hosts import CommandTimeout, Fleet, HostUnavailable, every
from cockpit.recipe import containers as dk
from cockpit.recipe.containers import ContainerState
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.phases import PHASE_INDEX, Phase
from cockpit.recipe.timeline import DEFAULT_STUCK_LIMITS, ClusterTimeline, LaunchEvent, RankTimeline
from cockpit.telemetry.logfollow import ResumePoint, follow
from cockpit.telemetry.logline import LogLine

FRAME_MARK = "r37-cockpit-inspect-end"
STATUS_TAIL = 400            # log lines read of a container this watcher did not see start
API_EVERY = 2.0              # seconds between API probes while rank 0 has a running container
RETRY = 1.0
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
        self.limits = DEFAULT_STUCK_LIMITS if stuck_limits is None else stuck_limits
        self.probe_api = probe_api
        self.timeline = ClusterTimeline(cfg.ranks, hang_after_s=cfg.engine.hang_after_s)
        self.changed = asyncio.Event()
        self.hang = HangTracker(cfg.engine.hang_after_s)
        self._listeners: list[Listener] = []
        self._tasks: list[asyncio.Task[None]] = []
        self._followers: dict[int, asyncio.Task[None]] = {}
        self._points: dict[int, ResumePoint] = {}
        self._from_start: set[int] = set()          # ranks this cockpit is launching: read their whole log
        self._seen: dict[int, str | None] = {}      # rank -> container ID of its last frame (None: none)
        self._tail_read: set[int] = set()           # ranks whose current log has been read up to now
        self._api_probed = False
        self._last_sample: EngineSample | None = None
        self._metrics_listeners: list[MetricsListener] = []
        self.metrics_every = API_EVERY             # seconds between /metrics reads while the API is ready
        self._client: ApiClient | None = None

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
        self._tasks = [asyncio.create_task(self._watch_rank(r), name=f"watch-{r}") for r in self.cfg.ranks]
        self._tasks.append(asyncio.create_task(self._tick_loop(), name="watch-tick"))
        if self.probe_api:
            self._tasks.append(asyncio.create_task(self._api_loop(), name="watch-api"))

    async def close(self) -> None:
        tasks = [*self._tasks, *self._followers.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks, self._followers = [], {}
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> ClusterWatcher:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def looked(self) -> bool:
        """Every rank looked at once (its container and log, or its host is not reachable) and the API
        probed once: enough for a one-off `status`."""
        for rank in self.cfg.ranks:
            host_ok = self.fleet[rank].status.connected
            if host_ok and (rank not in self._seen or (self._seen[rank] and rank not in self._tail_read)):
                return False
        return self._api_probed or not self.probe_api

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
        self._from_start.add(rank)
        self._stop_follower(rank)
        self._seen.pop(rank, None)
        self._tail_read.discard(rank)
        self._points.pop(rank, None)
        return self._reset(rank)

    def apply(self, events: list[LaunchEvent]) -> None:
        for event in self.timeline.settle(events):
            for listener in list(self._listeners):
                listener(event)
        self.changed.set()

    # ---- per rank: container frames and logs ----------------------------------------------------------

    async def _watch_rank(self, rank: int) -> None:
        host = self.fleet[rank]
        name = self.cfg.cluster.container_name
        cmd = every(self.interval, dk.inspect_argv(name), marker=FRAME_MARK)
        while True:
            try:
                if not host.status.connected:
                    await host.wait_connected()
                chunk: list[str] = []
                async for line in host.stream(cmd, merge_stderr=False):
                    if line.strip() != FRAME_MARK:
                        if len(chunk) < 5000:       # a container's inspect is ~200 lines; bound junk
                            chunk.append(line)
                        continue
                    states = dk.parse_inspect("\n".join(chunk))
                    chunk = []
                    self._frame(rank, states[0] if states else None)
            except (HostUnavailable, CommandTimeout):
                pass
            await asyncio.sleep(RETRY)

    def _frame(self, rank: int, state: ContainerState | None) -> None:
        """One `docker inspect` of rank's container (None: there is none)."""
        now = time.time()
        tl = self.timeline[rank]
        previous = self._seen.get(rank, "?")
        self._seen[rank] = state.id if state else None
        if state is None:
            if tl.container is not None:                       # removed: the rank has nothing now
                self._stop_follower(rank)
                self._reset(rank)
                self.apply([])
            elif previous == "?":
                self.apply([])
            return
        if tl.container_id not in (None, state.id) or (previous not in ("?", None, state.id)):
            self._stop_follower(rank)                          # another container of that name: relaunched
            self._points.pop(rank, None)
            self._tail_read.discard(rank)
            tl = self._reset(rank)
        rec = self.ledger.records().get(rank)      # one read of the ledger per look
        unrecorded = rec is None or rec.container_id != state.id
        if unrecorded and self.ledger.adopt(rank, state.id, state.created_at):
            rec = self.ledger.records().get(rank)  # its docker run was in flight when the host was lost
        ours = rec is not None and rec.container_id == state.id
        tl.owner = "cockpit" if ours else "by hand"
        if ours and rec is not None and rec.stop_requested_at is not None:
            tl.request_stop(rec.stop_requested_at)
        changed = tl.container != state
        if changed:
            self.apply(tl.feed_container(state, now))
        idle = rank not in self._followers or self._followers[rank].done()
        if idle and not (state.exited and rank in self._tail_read):
            self._followers[rank] = asyncio.create_task(self._follow(rank, state), name=f"log-{rank}")

    async def _follow(self, rank: int, state: ContainerState) -> None:
        """Read the container's log up to now (its tail, or all of it), then follow it while it runs."""
        host = self.fleet[rank]
        point = self._points.setdefault(rank, ResumePoint())
        tail = None if rank in self._from_start else STATUS_TAIL
        tl = self.timeline[rank]
        if rank not in self._tail_read:
            async for item in follow(host, state.id, follow=False, tail=tail, resume=False, point=point):
                if isinstance(item, LogLine):
                    self._feed(tl, item)
            self._tail_read.add(rank)
            self.apply([])
        if not state.running:
            return
        async for item in follow(host, state.id, follow=True, point=point):
            if isinstance(item, LogLine):
                self._feed(tl, item)

    def _feed(self, tl: RankTimeline, line: LogLine) -> None:
        """One log line into its rank's timeline; the model is settled when the line said something (a
        phase, a failure, progress), else at the next tick: a log flood costs a regex search per line,
        not a verdict per line."""
        events = tl.feed_line(line.text, line.ts / 1e9)
        if events:
            self.apply(events)

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
        if rank == min(self.cfg.ranks):
            self.hang = HangTracker(self.cfg.engine.hang_after_s)   # a new engine: a new series
            self._last_sample = None
        return self.timeline.reset_rank(rank)

    def _stop_follower(self, rank: int) -> None:
        task = self._followers.pop(rank, None)
        if task is not None:
            task.cancel()

    # ---- hosts, stuck ranks, deferred verdicts ---------------------------------------------------------

    async def _tick_loop(self) -> None:
        while True:
            self.tick()
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

    # ---- the API and the engine's liveness --------------------------------------------------------------

    async def _api_loop(self) -> None:
        next_probe = 0.0
        while True:
            now, api = time.monotonic(), self.timeline.api
            if now >= next_probe or api is None or not api.ready or not api.url:
                await self.probe()
                next_probe = now + API_EVERY
            else:
                self.apply(await self._read_metrics(api.url))
            await asyncio.sleep(self.metrics_every)

    async def probe(self) -> None:
        """One readiness probe (and a /metrics sample when ready). Rank 0's container exited, failed or
        being stopped: the API is `down`, not what it was. No container of that name: the API is probed
        all the same (it may be served some other way), and reported as it answers."""
        head = self.timeline[min(self.timeline.ranks)]
        gone = head.container is not None and not head.container.running
        if self.api_url is None and (gone or head.failed or head.stop_began is not None):
            if head.rank in self._seen and self.timeline.api != NO_ENGINE:
                self.apply(self.timeline.mark_api(NO_ENGINE, time.time()))
            self._api_probed = self._api_probed or head.rank in self._seen
            return
        if head.rank in self._from_start and PHASE_INDEX[head.phase] < PHASE_INDEX[Phase.CUDA_GRAPHS]:
            return
        ready = await readiness.check(self.fleet, self.cfg.cluster.api_port, C.SERVED_MODEL,
                                      api_url=self.api_url)
        at = time.time()
        if head.rank not in self._from_start and not head.ready and head.spans:
            at = head.spans[-1].start     # found serving: it has been since its last boot line, not "now"
        events = self.timeline.mark_api(ready, at)
        if ready.ready and ready.url:
            events += await self._read_metrics(ready.url)
        self._api_probed = True
        self.apply(events)

    async def _read_metrics(self, url: str) -> list[LaunchEvent]:
        """One /metrics read over a kept connection: the liveness series, then every metrics listener."""
        if self._client is None or self._client.base_url != url.rstrip("/"):
            if self._client is not None:
                with contextlib.suppress(Exception):
                    await self._client.aclose()
            self._client = ApiClient(url, connect_timeout=5, read_timeout=5, env_key=self.api_url is not None)
        try:
            text = await read_metrics_text(self._client)
        except Exception:   # unreadable now: the next readiness probe says how the API is
            return []
        at = time.time()
        sample = parse_sample(text, time.monotonic())
        events = self.timeline.mark_liveness(self.hang.feed(sample))
        self._note_flat(sample)
        for listener in list(self._metrics_listeners):
            listener(text, at)
        return events
