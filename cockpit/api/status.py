"""The one API status type: what the cockpit knows about rank 0's OpenAI-compatible API at one look.

The client's `/health` answer, the endpoint's (tunnel or gateway) status and the readiness probe that
also asks `/v1/models` are all an `ApiStatus`; the live model keeps the latest and everything renders
that. `state` is for code, `message` and `remedy` for the operator.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Literal

ApiState = Literal[
    "ready",          # /health 200, or no /health (404) and /v1/models 200 (and, for a readiness probe,
                      # /v1/models lists the served model)
    "not_ready",      # booting: refused, closed, 503 without the engine-dead body …
    "tunnel_down",    # no SSH tunnel to rank 0
    "unreachable",    # the address does not answer
    "engine_dead",    # /health says the engine behind the API died
    "timeout",        # no whole answer within the deadline
    "http_error",     # another HTTP status
    "unauthorized",   # 401/403: an API key is needed, or the one sent was refused
    "models_error",   # /health 200 but /v1/models failed
    "model_missing",  # /v1/models does not list the served model
    "down",           # rank 0 has no running container: nothing to ask
]


Route = Literal["tunnel", "gateway"]
"""The way to the cluster's engine: the cockpit's SSH tunnel, or a gateway the operator named."""


@dataclass(frozen=True, slots=True)
class ApiStatus:
    """One look at the API."""

    state: ApiState
    message: str
    remedy: str = ""
    url: str | None = None
    via: Route = "tunnel"
    models: tuple[str, ...] = ()
    http_status: int | None = None       # the /health answer's HTTP status, when there was one
    seconds: float = 0.0                 # how long that answer took
    checked_at: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.state == "ready"

    @property
    def ready(self) -> bool:
        return self.state == "ready"

    @property
    def engine_dead(self) -> bool:
        return self.state == "engine_dead"

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "models": list(self.models), "ready": self.ready}
