"""The support bundle: one tar.gz an operator attaches to a bug report.

What it holds (under one directory `r37-report-<cluster>-<UTC time>/`): `README.txt`; `versions.json` (the
cockpit, Python, and per rank the driver, CUDA, Docker client/server, the runtime image's ID and the vLLM
version its log names); `config/cluster.toml`; `preflight.json` and `status.json` (what `preflight --json`
and `status --json` hold); per rank `ranks/N/` with `docker-inspect.json`, `log-tail.txt` (the last lines,
or the lines around the first failure the log-signature rules find), `nvidia-smi-q.txt`, `fabric.txt`
(`ibv_devinfo -v`, the port's rate, GID table, the fabric interface) and `host.txt` (uname, hostname);
`fabric-last.json` (the last fabric test); `commands.jsonl` (the command log of the last sessions).

Everything goes through `cockpit.redact.Redactor` before it is written: secrets always; host names, SSH
targets, IP addresses and user names unless `redact_hosts=False` — the same value gets the same
placeholder across all files of one bundle. The archive is written atomically and never over an existing
file (`cockpit.files`). Reads only: no command changes a host.
"""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import io
import json
import os
import platform
import re
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cockpit import __version__
from cockpit.config import ClusterConfig
from cockpit.files import AtomicFile
from cockpit.hosts import CommandTimeout, Fleet, HostUnavailable, command
from cockpit.hosts.shell import sections
from cockpit.recipe.containers import image_id_argv, inspect_argv
from cockpit.recipe.parsers import split_sections
from cockpit.recipe.phases import match_failure
from cockpit.redact import Redactor

MARKER = "R37REPORT"
LOG_LINES = 300             # default: log lines kept per rank
LOG_READ = 20000            # log lines read per rank to find the first failure in
RUN_TIMEOUT = 60.0
SESSIONS = 5                # sessions of the command log included
_VLLM = re.compile(r"vLLM (?:API server )?version:? v?(\d+\.\d+[\w.+-]*)")
_CUDA = re.compile(r"CUDA Version\s*:\s*(\S+)")
_DRIVER = re.compile(r"Driver Version\s*:\s*(\S+)")


@dataclass
class Bundle:
    """The files of the bundle by path inside it (text, not yet redacted) and what could not be read."""

    name: str
    files: dict[str, str] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    names: set[str] = field(default_factory=set)     # host names learned on the way (to redact)


def bundle_name(cluster: str, now: float) -> str:
    safe_name = re.sub(r"[^A-Za-z0-9_.-]", "_", cluster) or "cluster"
    return f"r37-report-{safe_name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime(now))}"


def log_excerpt(text: str, rank: int, lines: int) -> tuple[str, int | None]:
    """The last `lines` lines, or `lines` lines around the first failure (a third before it); returns the
    excerpt and the 1-based number of the failure line in `text` (None: no failure found)."""
    rows = text.splitlines()
    first = next((i for i, row in enumerate(rows) if match_failure(row) is not None), None)
    if first is None:
        return "\n".join(rows[-lines:]) + ("\n" if rows else ""), None
    start = max(0, first - lines // 3)
    return "\n".join(rows[start:start + lines]) + "\n", first + 1


def _rank_parts(cfg: ClusterConfig, rank: int) -> list[tuple[str, list[str]]]:
    host = cfg.host(rank)
    hca = host.ib_hca[0]
    port = f"/sys/class/infiniband/{hca}/ports/1"
    gids = []
    for n in range(8):
        gids += [f"{port}/gids/{n}", f"{port}/gid_attrs/types/{n}"]
    return [
        ("hostname", ["hostname"]),
        ("uname", ["uname", "-a"]),
        ("smi", ["nvidia-smi", "-q"]),
        ("docker-version", ["docker", "version", "--format", "{{json .}}"]),
        ("image-id", image_id_argv(cfg.runtime.image_tag)),
        ("inspect", inspect_argv(cfg.cluster.container_name)),
        ("ibv", ["ibv_devinfo", "-v", "-d", hca]),
        ("rate", ["cat", "--", f"{port}/rate"]),
        ("gids", ["head", "-v", "-n", "1", "--", *gids]),
        ("ip", ["ip", "-br", "addr", "show", "dev", host.fabric_iface]),
    ]


async def _rank(fleet: Fleet, cfg: ClusterConfig, rank: int, bundle: Bundle, lines: int) -> dict[str, Any]:
    d = f"{bundle.name}/ranks/{rank}"
    facts: dict[str, Any] = {"rank": rank}
    parts = _rank_parts(cfg, rank)
    try:
        res = await fleet[rank].run(sections([(k, command(v)) for k, v in parts], MARKER),
                                    timeout=RUN_TIMEOUT)
    except (CommandTimeout, HostUnavailable) as exc:
        bundle.problems.append(f"rank {rank}: {exc}")
        facts["error"] = str(exc)
        return facts
    secs = split_sections(res.stdout, MARKER)

    def out(key: str) -> str:
        s = secs.get(key)
        return s.output if s is not None else ""

    def status(key: str) -> int | None:
        s = secs.get(key)
        return s.status if s is not None else None

    name = out("hostname").strip()
    if name:
        bundle.names.add(name)
    bundle.files[f"{d}/host.txt"] = f"$ hostname\n{out('hostname')}\n$ uname -a\n{out('uname')}"
    bundle.files[f"{d}/nvidia-smi-q.txt"] = out("smi")
    bundle.files[f"{d}/docker-inspect.json"] = out("inspect")
    bundle.files[f"{d}/fabric.txt"] = "".join(
        f"$ {' '.join(argv)}\n{out(key)}\n" for key, argv in parts if key in ("ibv", "rate", "gids", "ip"))
    smi = out("smi")
    facts["driver"] = m.group(1) if (m := _DRIVER.search(smi)) else None
    facts["cuda"] = m.group(1) if (m := _CUDA.search(smi)) else None
    facts["docker"] = _docker_versions(out("docker-version"))
    facts["image_id"] = out("image-id").strip() if status("image-id") == 0 else None
    try:
        logs = await fleet[rank].run(command(["docker", "logs", "--tail", str(LOG_READ),
                                              cfg.cluster.container_name], merge_stderr=True),
                                     timeout=RUN_TIMEOUT)
        text = logs.stdout
    except (CommandTimeout, HostUnavailable) as exc:
        text = ""
        bundle.problems.append(f"rank {rank} log: {exc}")
    excerpt, failure_at = log_excerpt(text, rank, lines)
    head = (f"# the {lines} lines around the first failure (line {failure_at} of the last {LOG_READ})\n"
            if failure_at else f"# the last {lines} lines\n")
    bundle.files[f"{d}/log-tail.txt"] = head + excerpt
    facts["first_failure_line"] = failure_at
    facts["vllm"] = m.group(1) if (m := _VLLM.search(text)) else None
    return facts


def _docker_versions(text: str) -> dict[str, Any]:
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                client, server = obj.get("Client") or {}, obj.get("Server") or {}
                return {"client": client.get("Version") if isinstance(client, dict) else None,
                        "server": server.get("Version") if isinstance(server, dict) else None}
    return {"client": None, "server": None}


async def gather(fleet: Fleet, cfg: ClusterConfig, config_path: Path | None, *, lines: int = LOG_LINES,
                 state_dir: Path | None = None, sessions_dir: Path | None = None,
                 now: float | None = None,
                 progress: Callable[[str], None] | None = None) -> Bundle:
    """Read everything the bundle holds (see the module doc); a part that cannot be read is named in
    `problems` and in the bundle's README, never fatal."""
    from cockpit.recipe.fabric import last_result
    from cockpit.recipe.history import list_sessions
    from cockpit.recipe.ledger import Ledger
    from cockpit.recipe.preflight import preflight_results
    from cockpit.recipe.status import cluster_status

    now = time.time() if now is None else now
    bundle = Bundle(bundle_name(cfg.cluster.name, now))
    say = progress or (lambda _text: None)
    if config_path is not None:
        try:
            bundle.files[f"{bundle.name}/config/cluster.toml"] = config_path.read_text(errors="replace")
        except OSError as exc:
            bundle.problems.append(f"config: {exc}")
    say("reading every rank (versions, docker inspect, logs, nvidia-smi -q, fabric)")
    facts = await asyncio.gather(*(_rank(fleet, cfg, r, bundle, lines) for r in sorted(cfg.ranks)))
    bundle.files[f"{bundle.name}/versions.json"] = json.dumps(
        {"cockpit": __version__, "python": platform.python_version(), "admin_os": platform.platform(),
         "image_tag": cfg.runtime.image_tag, "image_id_expected": cfg.runtime.image_id,
         "ranks": list(facts)}, indent=2, default=str)
    say("running preflight (read-only)")
    try:
        pre = await preflight_results(fleet, cfg)
        bundle.files[f"{bundle.name}/preflight.json"] = json.dumps(
            {"ok": pre.ok, "code": pre.code, "results": [r.as_dict() for r in pre.results]}, indent=2,
            default=str)
    except Exception as exc:
        bundle.problems.append(f"preflight: {type(exc).__name__}: {exc}")
    say("reading the cluster's status")
    try:
        status = await cluster_status(fleet, cfg, Ledger(cfg))
        bundle.files[f"{bundle.name}/status.json"] = json.dumps(status.to_dict(), indent=2, default=str)
    except Exception as exc:
        bundle.problems.append(f"status: {type(exc).__name__}: {exc}")
    if state_dir is not None:
        fabric = last_result(state_dir, cfg.cluster.name)
        if fabric is not None:
            bundle.files[f"{bundle.name}/fabric-last.json"] = json.dumps(fabric, indent=2, default=str)
    sessions, _notes = list_sessions(sessions_dir)
    entries = []
    for s in sessions[-SESSIONS:]:
        entries.append(json.dumps({"session": s.summary()}, default=str))
        entries += [json.dumps(e.as_json(), default=str) for e in s.entries]
    bundle.files[f"{bundle.name}/commands.jsonl"] = "\n".join(entries) + ("\n" if entries else "")
    return bundle


def redactor_for(cfg: ClusterConfig, bundle: Bundle, *, redact_hosts: bool) -> Redactor:
    """Secrets always; with `redact_hosts` also every SSH target, host name and login name we know."""
    names = {h.ssh for h in cfg.hosts} | bundle.names
    users = {h.user for h in cfg.hosts if h.user}
    with contextlib.suppress(OSError, KeyError):
        users.add(getpass.getuser())
    users |= {os.environ.get(k, "") for k in ("USER", "LOGNAME", "SUDO_USER")} - {""}
    return Redactor(hosts=redact_hosts, names=sorted(names), users=sorted(users))


def readme(bundle: Bundle, redact_hosts: bool) -> str:
    lines = ["r37-cockpit support bundle", "",
             "Made by `r37-cockpit report`: read-only, nothing on the hosts was changed.",
             "Secrets (tokens, API keys, Authorization values, *_TOKEN/*_KEY/… values) are replaced by "
             "<secret-N>."]
    if redact_hosts:
        lines.append("Host names, SSH targets, IP addresses and user names are replaced by host-N, ip-N and "
                     "user-N: the same value has the same placeholder in every file of this bundle.")
    else:
        lines.append("Host names and IP addresses were kept (--no-redact-hosts).")
    if bundle.problems:
        lines += ["", "Parts that could not be read:"] + [f"  - {p}" for p in bundle.problems]
    return "\n".join(lines) + "\n"


def write_bundle(bundle: Bundle, redact: Redactor, path: Path, redact_hosts: bool) -> tuple[Path, list[str]]:
    """Redact every file, then write the tar.gz atomically (FileExistsError: `path` exists already)."""
    files = dict(bundle.files)
    files[f"{bundle.name}/README.txt"] = readme(bundle, redact_hosts)
    names = sorted(files)
    with AtomicFile(path, mode=0o600) as out:
        with tarfile.open(fileobj=_Writer(out), mode="w:gz") as tar:
            for name in names:
                data = redact(files[name]).encode("utf-8", "replace")
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = int(time.time())
                info.mode = 0o600
                tar.addfile(info, io.BytesIO(data))
        done = out.commit()
    return done, names


class _Writer(io.RawIOBase):
    """A write-only file object over an AtomicFile, for tarfile."""

    def __init__(self, target: AtomicFile) -> None:
        self.target = target

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        data = bytes(b)
        self.target.write(data)
        return len(data)
