"""Is the R37 API ready? `GET /health` answers 200 and `GET /v1/models` lists the served model.

The API is reached through the SSH tunnel to rank 0's 127.0.0.1:API_PORT (`api_url_via_tunnel`), or a
given `--api-url`. Nothing here raises for network trouble: the answer is an `ApiReadiness`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.hosts import Fleet, HostUnavailable


@dataclass(frozen=True, slots=True)
class ApiReadiness:
    """One readiness probe: `ready` only when /health is 200 AND /v1/models lists `model`."""

    ready: bool
    health: str                       # ready | not_ready | unreachable | engine_dead | timeout | ...
    message: str
    remedy: str = ""
    models: list[str] = field(default_factory=list)
    url: str = ""
    checked_at: float = field(default_factory=time.time)

    @property
    def engine_dead(self) -> bool:
        return self.health == "engine_dead"

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


async def api_url_via_tunnel(fleet: Fleet, api_port: int) -> str:
    """`http://127.0.0.1:<local port>` forwarded to rank 0's own 127.0.0.1:api_port over SSH."""
    port = await fleet[0].forward_local("127.0.0.1", api_port)
    return f"http://127.0.0.1:{port}"


async def probe(url: str, model: str, timeout: float = 5.0) -> ApiReadiness:
    """Ask /health, then /v1/models, at `url`."""
    async with ApiClient(url, connect_timeout=timeout, read_timeout=timeout, health_timeout=timeout) as api:
        health = await api.health()
        if not health.ok:
            return ApiReadiness(False, health.state, health.message, health.remedy, url=url)
        try:
            models = [m.id for m in await api.models()]
        except ApiError as exc:
            return ApiReadiness(False, "models_error", f"/health is 200 but /v1/models failed: {exc.message}",
                                exc.remedy, url=url)
    if model not in models:
        return ApiReadiness(False, "model_missing",
                            f"/v1/models lists {', '.join(models) or 'nothing'}, not {model}",
                            "check --served-model-name in launch/node.sh", models, url)
    return ApiReadiness(True, "ready", f"ready: /health 200, /v1/models lists {model}", "", models, url)


async def check(fleet: Fleet, api_port: int, model: str, *, api_url: str | None = None,
                timeout: float = 5.0) -> ApiReadiness:
    """Probe through the SSH tunnel to rank 0 (or `api_url`); a lost rank 0 host is 'unreachable'."""
    if api_url is None:
        try:
            api_url = await api_url_via_tunnel(fleet, api_port)
        except HostUnavailable as exc:
            return ApiReadiness(False, "unreachable", f"no SSH tunnel to rank 0: {exc}",
                                "rank 0's host must be connected to reach the API")
    return await probe(api_url, model, timeout)
