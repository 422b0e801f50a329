"""Where the API is: an SSH local forward to rank 0's 127.0.0.1:<api_port>, or a given ``--api-url``.

:class:`ApiEndpoint` hands out a ready :class:`ApiClient` and reports, as an :class:`ApiStatus`,
whether the tunnel is down (rank 0's SSH connection is not up), the API is not ready (booting, engine
dead) or everything answers. The forward binds 127.0.0.1 only and the transport re-establishes it on the
same local port after rank 0's host reconnects, so the URL stays valid across reconnects.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import replace

from cockpit.api.apikey import ApiKey
from cockpit.api.client import STREAM_INTERVAL, ApiClient, via
from cockpit.api.readiness import look
from cockpit.api.smoke import SmokeStep, run_smoke
from cockpit.api.status import ApiStatus, Route
from cockpit.api.stream import StreamDeadlines
from cockpit.api.urls import redact
from cockpit.hosts import Fleet, HostUnavailable

API_RANK = 0
REMEDY_TUNNEL = (
    "The API is reached through an SSH tunnel to rank 0: rank 0's host must be connected "
    "(see the Hosts pane or `r37-cockpit hosts`); the tunnel comes back on the same port when it reconnects."
)


class EndpointDown(Exception):
    """No usable URL: the SSH tunnel to rank 0 cannot be opened right now."""

    def __init__(self, status: ApiStatus):
        super().__init__(status.message)
        self.status = status


class ApiEndpoint:
    """The API base URL (tunnel or gateway) and a shared :class:`ApiClient` for it.

    Call :meth:`aclose` when done. The fleet is not owned: starting and closing it is the caller's job.
    ``deadlines`` bound every chat request of its client (``[engine]`` in cluster.toml, or ``--timeout``);
    ``health_timeout`` is the total deadline of ``/health`` and ``/v1/models``. ``api_key`` is sent as a
    bearer key; without one, ``OPENAI_API_KEY`` is sent to an ``api_url`` (a gateway) only, never
    through the tunnel to our own engine (the operator's key for some other service stays theirs).
    """

    def __init__(self, fleet: Fleet | None, api_port: int, *, api_url: str | None = None,
                 health_timeout: float = 5.0, read_timeout: float = 600.0,
                 stream_interval: float = STREAM_INTERVAL,
                 deadlines: StreamDeadlines | None = None, api_key: ApiKey | None = None) -> None:
        if fleet is None and api_url is None:
            raise ValueError("an endpoint needs a fleet (SSH tunnel) or an api_url")
        self.fleet = fleet
        self.api_port = api_port
        self.api_url = api_url.rstrip("/") if api_url else None
        self.health_timeout = health_timeout
        self.read_timeout = read_timeout
        self.stream_interval = stream_interval
        self.deadlines = deadlines
        self._api_key = api_key
        self._client: ApiClient | None = None
        self._lock = asyncio.Lock()
        self._client_url: str | None = None

    @property
    def via(self) -> Route:
        return via(self.api_url)

    def describe(self) -> str:
        """Where requests go, for a status line."""
        if self.api_url:
            return f"{redact(self.api_url)} (--api-url)"
        if self._client is None:
            return f"SSH tunnel to rank 0's 127.0.0.1:{self.api_port} not open yet"
        return f"{self._client.base_url} → rank 0's 127.0.0.1:{self.api_port} over SSH"

    def _tunnel_down(self, detail: str, remedy: str | None = None) -> ApiStatus:
        return ApiStatus("tunnel_down", f"SSH tunnel to rank 0 is down: {detail}", remedy or REMEDY_TUNNEL,
                         None, "tunnel")

    async def url(self) -> str:
        """The base URL; for the tunnel, opens (or reuses) the forward. Raises :class:`EndpointDown`."""
        if self.api_url:
            return self.api_url
        assert self.fleet is not None
        host = self.fleet[API_RANK]
        if not host.status.connected:
            s = host.status
            raise EndpointDown(self._tunnel_down(
                f"rank 0 ({s.target}) is {s.state.value}" + (f": {s.error}" if s.error else ""),
                (s.remedy + "; " if s.remedy else "") + REMEDY_TUNNEL))
        try:
            port = await host.forward_local("127.0.0.1", self.api_port)
        except HostUnavailable as exc:
            raise EndpointDown(self._tunnel_down(str(exc))) from None
        return f"http://127.0.0.1:{port}"

    async def client(self) -> ApiClient:
        """A client for the current URL (the same one while the URL holds). Raises :class:`EndpointDown`."""
        async with self._lock:
            url = await self.url()
            if self._client is not None and self._client_url != url:
                await self._client.aclose()
                self._client = None
            if self._client is None:
                self._client_url = url      # may hold credentials: compared, never shown
                self._client = ApiClient(url, health_timeout=self.health_timeout,
                                         connect_timeout=self.health_timeout, read_timeout=self.read_timeout,
                                         stream_interval=self.stream_interval, deadlines=self.deadlines,
                                         api_key=self._api_key, via=via(self.api_url))
            return self._client

    async def check(self) -> ApiStatus:
        """Tunnel, then ``GET /health`` (or ``/v1/models`` where there is no ``/health``): never raises for
        network trouble."""
        try:
            client = await self.client()
        except EndpointDown as exc:
            return exc.status
        return self.status_from_health(await look(client), client.base_url)

    def status_from_health(self, health: ApiStatus, url: str) -> ApiStatus:
        """Turn a health answer into an endpoint status (a tunnel that was lost meanwhile wins)."""
        if not health.ok and self.fleet is not None and not self.api_url:
            host = self.fleet[API_RANK]
            if not host.status.connected:
                return self._tunnel_down(f"rank 0 is {host.status.state.value}")
        return replace(health, url=url, via=self.via)

    async def watch(self, *, ready_every: float = 5.0, first_retry: float = 0.5,
                    max_retry: float = 8.0, wake: asyncio.Event | None = None
                    ) -> AsyncIterator[ApiStatus]:
        """Statuses forever: every ``ready_every`` s while ready, else with backoff up to ``max_retry`` s.

        Setting ``wake`` checks again at once (e.g. when another pane saw the API come up).
        """
        delay = first_retry
        while True:
            status = await self.check()
            yield status
            pause = ready_every if status.ok else delay
            delay = first_retry if status.ok else min(delay * 2, max_retry)
            if wake is None:
                await asyncio.sleep(pause)
                continue
            try:
                await asyncio.wait_for(wake.wait(), pause)
                delay = first_retry  # something changed: start the backoff over
            except TimeoutError:
                pass
            wake.clear()

    async def wait_ready(self, timeout: float) -> ApiStatus:
        """Poll with backoff until ready or ``timeout`` s passed; returns the last status. A refused key
        (``unauthorized``) ends the wait at once: waiting does not change it."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        delay = 0.25
        while True:
            status = await self.check()
            left = deadline - loop.time()
            if status.ok or status.state == "unauthorized" or left <= 0:
                return status
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, 4.0)

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> ApiEndpoint:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


async def rank0_fleet_connected(fleet: Fleet, timeout: float) -> bool:
    """Start only rank 0's connection (all the API needs) and wait for it."""
    host = fleet[API_RANK]
    host.start()
    return await host.wait_connected(timeout)


async def smoke_through(endpoint: ApiEndpoint, *, model: str | None = None) -> AsyncIterator[SmokeStep]:
    """The smoke test through ``endpoint``: one failed ``tunnel`` step if it cannot be reached, else
    :func:`run_smoke`'s steps."""
    t0 = time.perf_counter()
    try:
        client = await endpoint.client()
    except EndpointDown as exc:  # nothing else can run
        yield SmokeStep("tunnel", False, exc.status.message, time.perf_counter() - t0, exc.status.remedy)
        return
    async for step in run_smoke(client, model=model, gateway=endpoint.via == "gateway"):
        yield step
