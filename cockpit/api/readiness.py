"""Is the R37 API ready? `GET /health` answers 200 and `GET /v1/models` lists the served model.

The API is reached through the SSH tunnel to rank 0's 127.0.0.1:API_PORT (`api_url_via_tunnel`), or a
given `--api-url`. Nothing here raises for network trouble: the answer is an `ApiStatus` (the one API
status type), `ready` only when /health is 200 AND /v1/models lists the served model.
"""

from __future__ import annotations

from dataclasses import replace

from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.status import ApiStatus
from cockpit.hosts import Fleet, HostUnavailable


async def api_url_via_tunnel(fleet: Fleet, api_port: int) -> str:
    """`http://127.0.0.1:<local port>` forwarded to rank 0's own 127.0.0.1:api_port over SSH."""
    port = await fleet[0].forward_local("127.0.0.1", api_port)
    return f"http://127.0.0.1:{port}"


async def probe(url: str, model: str, timeout: float = 5.0) -> ApiStatus:
    """Ask /health, then /v1/models, at `url`."""
    async with ApiClient(url, connect_timeout=timeout, read_timeout=timeout, health_timeout=timeout) as api:
        health = await api.health()
        if not health.ok:
            return replace(health, url=url)
        try:
            models = [m.id for m in await api.models()]
        except ApiError as exc:
            return ApiStatus("models_error", f"/health is 200 but /v1/models failed: {exc.message}",
                             exc.remedy, url)
    if model not in models:
        return ApiStatus("model_missing", f"/v1/models lists {', '.join(models) or 'nothing'}, not {model}",
                         "check --served-model-name in launch/node.sh", url, models=tuple(models))
    return ApiStatus("ready", f"ready: /health 200, /v1/models lists {model}", "", url, models=tuple(models))


async def check(fleet: Fleet, api_port: int, model: str, *, api_url: str | None = None,
                timeout: float = 5.0) -> ApiStatus:
    """Probe through the SSH tunnel to rank 0 (or `api_url`); a lost rank 0 host is 'tunnel_down'."""
    if api_url is None:
        try:
            api_url = await api_url_via_tunnel(fleet, api_port)
        except HostUnavailable as exc:
            return ApiStatus("tunnel_down", f"no SSH tunnel to rank 0: {exc}",
                             "rank 0's host must be connected to reach the API")
    return await probe(api_url, model, timeout)
