"""State of the docker stand-in under `<root>/docker/` (shared by the `docker` tool and the shim).

images/<hex>.json                  {"Id": "sha256:<hex>", "RepoTags": [...], "Created", "Size",
                                    "Architecture", "Os"}
containers/<id>/config.json        what `docker run` was given (docker inspect's shape, minus State)
containers/<id>/state.json         `.State` plus "ShimPid"; written by the container shim
containers/<id>/<id>-json.log      docker's json-file log: {"log": "...\\n", "stream", "time"}
containers/<id>/oom_killed         created by the engine before it dies of (simulated) OOM
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from cockpit.sim.procs import alive
from cockpit.sim.tools import _host

ZERO_TIME = "0001-01-01T00:00:00Z"


def base() -> str:
    return os.path.join(_host.root(), "docker")


def images_dir() -> str:
    return os.path.join(base(), "images")


def containers_dir() -> str:
    return os.path.join(base(), "containers")


def container_dir(cid: str) -> str:
    return os.path.join(containers_dir(), cid)


def log_path(cid: str) -> str:
    return os.path.join(container_dir(cid), f"{cid}-json.log")


def write_json(path: str, obj: object) -> None:
    _host.write_atomic(path, json.dumps(obj, indent=2) + "\n")


# --- images -----------------------------------------------------------------------------------


def images() -> list[dict]:
    d = images_dir()
    out = []
    for name in sorted(os.listdir(d)) if os.path.isdir(d) else []:
        if name.endswith(".json"):
            img = _host.read_json(os.path.join(d, name), None)
            if isinstance(img, dict):
                out.append(img)
    return sorted(out, key=lambda i: i.get("Created", ""), reverse=True)


def normalize_ref(ref: str) -> str:
    """`repo` -> `repo:latest` (digests and IDs are left alone)."""
    last = ref.rsplit("/", 1)[-1]
    return ref if ":" in last or "@" in ref else f"{ref}:latest"


def find_image(ref: str) -> dict | None:
    want = normalize_ref(ref)
    for img in images():
        if want in img.get("RepoTags", []):
            return img
    hexref = ref.removeprefix("sha256:")
    if len(hexref) >= 4 and all(c in "0123456789abcdef" for c in hexref):
        for img in images():
            if img["Id"].removeprefix("sha256:").startswith(hexref):
                return img
    return None


def save_image(img: dict) -> None:
    """Store an image; its tags move away from any image that had them (that one keeps its ID)."""
    os.makedirs(images_dir(), exist_ok=True)
    for other in images():
        if other["Id"] != img["Id"] and set(other.get("RepoTags", [])) & set(img["RepoTags"]):
            other["RepoTags"] = [t for t in other["RepoTags"] if t not in img["RepoTags"]]
            write_json(os.path.join(images_dir(), other["Id"].removeprefix("sha256:") + ".json"), other)
    write_json(os.path.join(images_dir(), img["Id"].removeprefix("sha256:") + ".json"), img)


# --- containers -------------------------------------------------------------------------------


def read_state(cid: str) -> dict:
    """`.State` of a container; a 'running' container whose shim is gone is reported dead-exited."""
    raw = _host.read_json(os.path.join(container_dir(cid), "state.json"), None)
    st: dict[str, Any] = (
        raw
        if isinstance(raw, dict)
        else {
            "Status": "created",
            "Running": False,
            "Paused": False,
            "Restarting": False,
            "OOMKilled": False,
            "Dead": False,
            "Pid": 0,
            "ExitCode": 0,
            "Error": "",
            "StartedAt": ZERO_TIME,
            "FinishedAt": ZERO_TIME,
        }
    )
    if st.get("Running") and not alive(int(st.get("ShimPid", 0))):
        st.update(Status="exited", Running=False, Pid=0, ExitCode=255, FinishedAt=_host.rfc3339nano())
    return st


def catches(pid: int, signum: int) -> bool:
    """Whether the process has a handler for the signal (`SigCgt` in /proc/PID/status). The kernel drops a
    signal sent to a PID namespace's init (a container's PID 1) from outside unless it has one."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def write_state(cid: str, st: dict) -> None:
    write_json(os.path.join(container_dir(cid), "state.json"), st)


def containers() -> list[dict]:
    """Every container's config with `State` merged in, newest first."""
    d = containers_dir()
    out = []
    for cid in os.listdir(d) if os.path.isdir(d) else []:
        cfg = _host.read_json(os.path.join(d, cid, "config.json"), None)
        if isinstance(cfg, dict):
            cfg["State"] = {k: v for k, v in read_state(cid).items() if k != "ShimPid"}
            out.append(cfg)
    return sorted(out, key=lambda c: c.get("Created", ""), reverse=True)


def find_container(ref: str) -> dict | None:
    ref = ref.removeprefix("/")
    all_ = containers()
    for c in all_:
        if c["Id"] == ref or c["Name"] == "/" + ref:
            return c
    hits = [c for c in all_ if len(ref) >= 1 and c["Id"].startswith(ref)]
    return hits[0] if len(hits) == 1 else None


# --- time helpers -----------------------------------------------------------------------------


def parse_time_ns(text: str) -> int:
    """RFC3339(Nano) UTC -> ns since the epoch (0 for docker's zero time)."""
    import calendar

    if text.startswith("0001-"):
        return 0
    text = text.rstrip("Z")
    main, _, frac = text.partition(".")
    secs = calendar.timegm(time.strptime(main, "%Y-%m-%dT%H:%M:%S"))
    return secs * 1_000_000_000 + int((frac + "000000000")[:9] or 0)


def human_duration(seconds: float) -> str:
    """go-units HumanDuration, as in `Up 5 minutes` and `3 hours ago`."""
    s = int(seconds)
    if s < 1:
        return "Less than a second"
    if s == 1:
        return "1 second"
    if s < 60:
        return f"{s} seconds"
    m = s // 60
    if m == 1:
        return "About a minute"
    if m < 60:
        return f"{m} minutes"
    h = round(s / 3600)
    if h == 1:
        return "About an hour"
    if h < 48:
        return f"{h} hours"
    if h < 24 * 7 * 2:
        return f"{h // 24} days"
    if h < 24 * 30 * 2:
        return f"{h // 24 // 7} weeks"
    if h < 24 * 365 * 2:
        return f"{h // 24 // 30} months"
    return f"{h // 24 // 365} years"


def human_size(n: float) -> str:
    """go-units HumanSize (decimal, 3 significant digits): 40.7GB, 0B."""
    units = ["B", "kB", "MB", "GB", "TB", "PB"]
    i = 0
    while n >= 1000 and i < len(units) - 1:
        n /= 1000
        i += 1
    return f"{n:.3g}{units[i]}" if i else f"{int(n)}B"
