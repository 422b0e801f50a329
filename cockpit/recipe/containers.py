"""Docker output on a host, parsed: `docker ps --format '{{json .}}'` and `docker inspect`.

Formats: docs/host-tools.md#docker-ps and docs/host-tools.md#docker-inspect.

`ContainerState` is the cockpit's model of one container: status, exit code, OOM kill, start and finish
times. Every key of docker's JSON is treated as optional; values of the wrong type are ignored.
The argv lists of the docker commands the launch code runs live here too (quoted in `cockpit.hosts`).

Removal: the cockpit never removes a container automatically, never a running one, and never one it did
not start. A stopped container it started (its full ID is in the launch ledger) is removed only on the
operator's confirmed request (`launch --replace-stopped`, see `cockpit.recipe.replace`), after its full log
was archived, by its full ID (`rm_argv`: never by name, never `-f`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cockpit.safetext import neutralise
from cockpit.telemetry.logline import parse_timestamp

_HEX_ID = re.compile(r"^[0-9a-f]{64}$")

SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def parse_time(text: str | None) -> float | None:
    """RFC3339(Nano) → seconds since the epoch; docker's zero time and junk → None."""
    if not text or text.startswith("0001-"):
        return None
    ns = parse_timestamp(text.strip())
    return None if ns is None else ns / 1e9


@dataclass(frozen=True, slots=True)
class ContainerState:
    """One container as `docker inspect` describes it."""

    id: str
    name: str
    status: str                       # created|running|paused|restarting|exited|dead
    running: bool = False
    exit_code: int | None = None
    oom_killed: bool = False
    error: str = ""
    started_at: float | None = None
    finished_at: float | None = None
    image: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    created_at: float | None = None

    @property
    def exited(self) -> bool:
        return self.status in ("exited", "dead")

    @property
    def start_failed(self) -> bool:
        """Created, then its start failed (`docker run -d` printed its ID and exited 125/127): it never ran,
        holds the name, and `State.Error` says why. A plain `created` (no error) may be starting now."""
        return self.status == "created" and not self.running and bool(self.error)

    @property
    def ended(self) -> bool:
        """Not running and never will by itself: exited, dead, or a start that failed."""
        return self.exited or self.start_failed

    @property
    def short_id(self) -> str:
        return self.id[:12]

    def exit_reason(self) -> str:
        """A sentence for an exited container: OOM kill, signal, or exit code (or why it never started)."""
        if self.start_failed:
            shown = f" (exit code {self.exit_code})" if self.exit_code is not None else ""
            return f"created but never started{shown}: {self.error}"
        if self.oom_killed:
            return f"killed by the out-of-memory killer (exit code {self.exit_code})"
        code = self.exit_code
        if code is None:
            return f"container is {self.status}"
        if code > 128 and code - 128 in SIGNALS:
            return f"exited with code {code} ({SIGNALS[code - 128]})"
        text = f"exited with code {code}"
        return text + (f": {self.error}" if self.error else "")

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "status": self.status, "running": self.running,
                "exit_code": self.exit_code, "oom_killed": self.oom_killed, "error": self.error,
                "started_at": self.started_at, "finished_at": self.finished_at, "image": self.image,
                "created_at": self.created_at}


@dataclass(frozen=True, slots=True)
class PsEntry:
    """One line of `docker ps --format '{{json .}}'` (all values are strings there)."""

    id: str
    names: tuple[str, ...]
    state: str
    status: str
    image: str


def _s(value: Any) -> str:
    """A string of docker's JSON, host text: neutralised for a terminal (anything else: "")."""
    return neutralise(value) if isinstance(value, str) else ""


def parse_ps(text: str) -> list[PsEntry]:
    """Every JSON object line of `docker ps --format '{{json .}}'`; other lines are skipped."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):   # deep nesting raises RecursionError
            continue
        if not isinstance(obj, dict):
            continue
        names = tuple(n.strip().lstrip("/") for n in _s(obj.get("Names")).split(",") if n.strip())
        out.append(PsEntry(_s(obj.get("ID")), names, _s(obj.get("State")), _s(obj.get("Status")),
                           _s(obj.get("Image"))))
    return out


def ps_named(text: str, name: str) -> PsEntry | None:
    """The container named exactly `name` (docker's name filter also matches substrings)."""
    for entry in parse_ps(text):
        if name in entry.names:
            return entry
    return None


def parse_inspect(text: str) -> list[ContainerState]:
    """`docker inspect` output (a JSON array) → states; `[]` or junk → empty list."""
    try:
        data = json.loads(text) if text.strip() else []
    except (ValueError, RecursionError):   # deep nesting raises RecursionError
        return []
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list):
        return []
    return [s for s in (_state(obj) for obj in data if isinstance(obj, dict)) if s is not None]


def _state(obj: dict[str, Any]) -> ContainerState | None:
    cid = _s(obj.get("Id"))
    st = obj.get("State")
    if not cid or not isinstance(st, dict):
        return None
    code = st.get("ExitCode")
    config = obj.get("Config")
    cfg: dict[str, Any] = config if isinstance(config, dict) else {}
    labels = cfg.get("Labels")
    labels = labels if isinstance(labels, dict) else {}
    status = _s(st.get("Status")) or ("running" if st.get("Running") else "exited")
    return ContainerState(
        id=cid, name=_s(obj.get("Name")).lstrip("/"), status=status, running=st.get("Running") is True,
        exit_code=code if isinstance(code, int) and not isinstance(code, bool) else None,
        oom_killed=st.get("OOMKilled") is True, error=_s(st.get("Error")),
        started_at=parse_time(_s(st.get("StartedAt"))), finished_at=parse_time(_s(st.get("FinishedAt"))),
        image=_s(obj.get("Image")) or _s(cfg.get("Image")),
        labels={str(k): str(v) for k, v in labels.items()}, created_at=parse_time(_s(obj.get("Created"))))


ABSENT_MARKS = ("No such object", "No such container")


@dataclass(frozen=True, slots=True)
class InspectFrame:
    """One `docker inspect NAME` round: the container, or a sure "none", or why it is not known."""

    state: ContainerState | None
    error: str = ""                   # non-empty: docker did not answer (the container is unknown)

    @property
    def known(self) -> bool:
        return not self.error


def read_inspect_frame(text: str, status: int | None) -> InspectFrame:
    """`docker inspect NAME` output (stdout and stderr merged) and its exit status → what it proves.

    Exit 0 with a container's JSON: that container. Non-zero with docker's "No such object/container":
    there is none. Anything else — the daemon unreachable, permission denied, a CLI that printed no JSON —
    proves nothing: the frame carries the reason and the container is unknown, never "none"."""
    lines = text.splitlines()
    json_part = "\n".join(ln for ln in lines if not ln.startswith(("Error", "error", "Cannot", "permission",
                                                                   "WARNING", "docker:")))
    states = parse_inspect(json_part)
    if status == 0 and states:
        return InspectFrame(states[0])
    noise = [neutralise(ln).strip() for ln in lines if ln.strip() and ln.strip() != "[]"]
    if status not in (0, None) and any(m in ln for ln in noise for m in ABSENT_MARKS):
        return InspectFrame(None)
    if status not in (0, None):
        why = next((ln for ln in noise if not ln.startswith(("[", "{", "]", "}"))), "")
        why = why or f"docker inspect exited {status}"
    else:
        why = "docker inspect printed no container" if status == 0 else "docker inspect did not finish"
    return InspectFrame(None, why[:300])


def container_id_from_output(stdout: str) -> str | None:
    """The 64-hex container ID `docker run -d` prints as its last line."""
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if _HEX_ID.match(line):
            return line
    return None


# ---- argv of the docker commands (the hosts layer quotes them) ----------------------------------------

def inspect_argv(ref: str) -> list[str]:
    return ["docker", "inspect", ref]


def ps_argv(name: str) -> list[str]:
    return ["docker", "ps", "-a", "--filter", f"name=^/{name}$", "--format", "{{json .}}"]


def stop_argv(ref: str) -> list[str]:
    """`docker stop`: stopping never removes a container (see `rm_argv` for the one way the cockpit does)."""
    return ["docker", "stop", ref]


def rm_argv(container_id: str) -> list[str]:
    """`docker rm ID` for one full 64-hex container ID; a name, a short ID or anything else is refused
    (ValueError), and there is no `-f`: docker itself refuses to remove a running container."""
    if not isinstance(container_id, str) or not _HEX_ID.fullmatch(container_id):
        raise ValueError(f"docker rm needs a full 64-hex container ID, not {container_id!r}")
    return ["docker", "rm", container_id]


def image_id_argv(image: str) -> list[str]:
    """`docker image inspect` as one JSON object: `.Id` and what tells the image stores apart
    (`cockpit.recipe.image_identity`)."""
    return ["docker", "image", "inspect", image, "--format", "{{json .}}"]


def archive_ids_argv(archive: str) -> list[str]:
    """The runtime archive's `index.json` and `manifest.json`, back to back (tar skips the blobs)."""
    return ["tar", "-xOf", archive, "index.json", "manifest.json"]


def worth_following(before: ContainerState | None, now: ContainerState | None) -> bool:
    """Whether a rank's log is worth following again, given its container when the last follow ended
    (`before`) and now, as the live model sees them: one is running, or another container has come."""
    if now is None:
        return False
    return now.running or before is None or now.id != before.id
