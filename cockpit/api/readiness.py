"""Is the R37 API ready? `GET /health` answers 200 and `GET /v1/models` lists the served model.

The API is reached through the SSH tunnel to rank 0's 127.0.0.1:API_PORT (`api_url_via_tunnel`), or a
given `--api-url`. Nothing here raises for network trouble: the answer is an `ApiStatus` (the one API
status type), `ready` only when /health is 200 AND /v1/models lists the served model.

Other OpenAI-compatible servers may have no `/health` (404): for them `/v1/models` answering 200 is the
sign of life (`look`). A 401 or 403 from either is `unauthorized`: an API key is needed or was refused.
vLLM always has `/health`, so through the tunnel nothing changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from cockpit.api.apikey import ApiKey
from cockpit.api.choose import listing
from cockpit.api.client import ApiClient
from cockpit.api.errors import ApiError
from cockpit.api.status import ApiState, ApiStatus
from cockpit.hosts import Fleet, HostUnavailable

NO_HEALTH = "ready: no /health (404)"


async def api_url_via_tunnel(fleet: Fleet, api_port: int) -> str:
    """`http://127.0.0.1:<local port>` forwarded to rank 0's own 127.0.0.1:api_port over SSH."""
    port = await fleet[0].forward_local("127.0.0.1", api_port)
    return f"http://127.0.0.1:{port}"


async def look(client: ApiClient) -> ApiStatus:
    """Is the API up: `/health` 200, or no `/health` (404) and `/v1/models` 200 (its ids in `models`)."""
    health = await client.health()
    if health.http_status != 404:
        return health
    t0 = time.perf_counter()
    try:
        models = tuple(m.id for m in await client.models())
    except ApiError as exc:
        state: ApiState = (exc.kind if exc.kind in ("unauthorized", "unreachable", "not_ready", "timeout")
                           else "engine_dead" if exc.kind == "engine_dead" else "models_error")
        return ApiStatus(state, f"no /health (404), and /v1/models failed: {exc.message}", exc.remedy,
                         client.base_url, http_status=exc.status,
                         seconds=health.seconds + time.perf_counter() - t0)
    return ApiStatus("ready", f"{NO_HEALTH}; /v1/models answered 200", "", client.base_url,
                     models=models, http_status=200, seconds=health.seconds + time.perf_counter() - t0)


async def probe(url: str, model: str, timeout: float = 5.0, *, api_key: ApiKey | None = None,
                gateway: bool = False, client: ApiClient | None = None) -> ApiStatus:
    """Ask /health (or, without one, /v1/models), then /v1/models for `model`, at `url`.

    `api_key`: sent as a bearer key; without one, `OPENAI_API_KEY` is to a gateway only. `gateway`
    (`--api-url`): a server that does not list `model` but lists exactly one other is ready with that
    one (what `chat` and `smoke` would ask; `choose.choose_model`). `client`: a kept client for `url`
    (a watcher probing every few seconds reuses its connection); without one, a client of its own.
    """
    if client is not None:
        return await _probe_with(client, url, model, gateway)
    async with ApiClient(url, connect_timeout=timeout, read_timeout=timeout, health_timeout=timeout,
                         api_key=api_key, via="gateway" if gateway else "tunnel") as api:
        return await _probe_with(api, url, model, gateway)


async def _probe_with(api: ApiClient, url: str, model: str, gateway: bool) -> ApiStatus:
    health = await look(api)
    if not health.ok:
        return replace(health, url=url)
    if health.models:
        models = list(health.models)
    else:
        try:
            models = [m.id for m in await api.models()]
        except ApiError as exc:
            state: ApiState = "unauthorized" if exc.kind == "unauthorized" else "models_error"
            return ApiStatus(state, f"/health is 200 but /v1/models failed: {exc.message}",
                             exc.remedy, url)
    if model not in models and gateway and len(models) == 1:
        model = models[0]
    if model not in models:
        remedy = ("name the model with --model NAME" if gateway and models
                  else "check --served-model-name in launch/node.sh")
        return ApiStatus("model_missing", f"/v1/models lists {listing(models) or 'nothing'}, not {model}",
                         remedy, url, models=tuple(models))
    first = "no /health" if health.message.startswith(NO_HEALTH) else "/health 200"
    return ApiStatus("ready", f"ready: {first}, /v1/models lists {model}", "", url, models=tuple(models))


async def check(fleet: Fleet, api_port: int, model: str, *, api_url: str | None = None,
                timeout: float = 5.0, api_key: ApiKey | None = None,
                client_for: Callable[[str], ApiClient] | None = None) -> ApiStatus:
    """Probe through the SSH tunnel to rank 0 (or `api_url`); a lost rank 0 host is 'tunnel_down'.
    `client_for(url)`: the caller's kept client for the URL found (its connection reused)."""
    gateway = api_url is not None
    if api_url is None:
        try:
            api_url = await api_url_via_tunnel(fleet, api_port)
        except HostUnavailable as exc:
            return ApiStatus("tunnel_down", f"no SSH tunnel to rank 0: {exc}",
                             "rank 0's host must be connected to reach the API")
    client = client_for(api_url) if client_for is not None else None
    return await probe(api_url, model, timeout, api_key=api_key, gateway=gateway, client=client)
