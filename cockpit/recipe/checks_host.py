"""Per-host preflight checks: architecture, GPU, driver, SM clocks, memory, Docker, runtime image,
an existing container and the ports rank 0 needs (recipe steps 1, 3 and 6).

A running engine changes what four of them read: it holds the GPU (P0 at an idle clock), most of the
unified memory and, on rank 0, the API and coordination ports, and it is itself a container of the
launch's name. When that container is running and this cockpit started it (its full ID is the launch
ledger's record for the rank, `Probe.launched`), those checks pass as "in use by the running <name>
(<short id>)"; a container started by hand is reported as before. The container's state comes from one
`docker container inspect` in the host's batch, shared by the four checks (`ENGINE`)."""

from __future__ import annotations

import ipaddress
import posixpath
from dataclasses import asdict

from cockpit.config import ClusterConfig
from cockpit.hosts.shell import Cmd
from cockpit.recipe import containers, parsers
from cockpit.recipe.checks import Check, Outcome, Probe, Verdict, differs
from cockpit.recipe.image_identity import (
    Identity,
    ImageFacts,
    identify,
    parse_archive_ids,
    parse_image_inspect,
)
from cockpit.safetext import safe
from cockpit.telemetry import gpu

SMI_FIELDS = ["name", "driver_version", "clocks.sm", "clocks.max.sm", "utilization.gpu", "pstate"]
SMI_QUERY = ["nvidia-smi", f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits"]
MIN_CUDA_MAJOR = 13
MIN_DRIVER_MAJOR = 580              # the first driver branch that ships CUDA 13
TIMEOUT = ["timeout", "20"]         # a hung tool must not hold the whole batch


# ---- the engine this cockpit launched (shared by clocks, memory, container and ports) -----------------

ENGINE = "docker.container"


def _engine_cmd(cfg: ClusterConfig) -> Cmd:
    return [*TIMEOUT, "docker", "container", "inspect", "--format", "{{json .}}", cfg.cluster.container_name]


def named_container(p: Probe) -> containers.ContainerState | None:
    """The container of the launch's name on this host as `docker container inspect` saw it (None: there
    is none, or Docker did not answer)."""
    if p.status(ENGINE) != 0:
        return None
    name = p.cfg.cluster.container_name
    for line in p.output(ENGINE).splitlines():
        if line.lstrip().startswith("{"):
            for state in containers.parse_inspect(line):
                if state.name == name:
                    return state
    return None


def started_here(p: Probe, state: containers.ContainerState | None) -> bool:
    """Did this cockpit start that container? Its full ID is the launch ledger's record for the rank."""
    return state is not None and bool(state.id) and p.launched.get(p.rank) == state.id


def engine_in_use(p: Probe) -> containers.ContainerState | None:
    """The running container of the launch's name on this host, when this cockpit started it."""
    state = named_container(p)
    return state if state is not None and state.running and started_here(p, state) else None


def in_use_value(p: Probe, state: containers.ContainerState) -> str:
    return f"in use by the running {p.cfg.cluster.container_name} ({state.short_id})"


def _gpu_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {"nvsmi.query": [*TIMEOUT, *SMI_QUERY]}


def _clock_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {"nvsmi.query": [*TIMEOUT, *SMI_QUERY], ENGINE: _engine_cmd(cfg)}


def _driver_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {"nvsmi.query": [*TIMEOUT, *SMI_QUERY], "nvsmi.table": [*TIMEOUT, "nvidia-smi"]}


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:160]
    return "no output"


def _gpu_row(p: Probe) -> dict[str, str | None] | None:
    if p.status("nvsmi.query") != 0:
        return None
    rows = parsers.parse_nvsmi_csv(p.output("nvsmi.query"), SMI_FIELDS)
    return rows[0] if rows else None


# ---- arch --------------------------------------------------------------------------------------------


def _arch(p: Probe) -> Outcome:
    arch = parsers.parse_uname(p.output("uname"))
    if p.status("uname") != 0 or arch is None:
        return Outcome(Verdict.UNKNOWN, _first_line(p.output("uname")), "run `uname -m` on the host")
    if arch == "aarch64":
        return Outcome(Verdict.PASS, arch)
    return Outcome(Verdict.FAIL, arch, f"R37 needs an ARM64 (aarch64) DGX Spark; rank {p.rank}'s host is "
                                       f"{arch}: point rank {p.rank} at a GB10 host in cluster.toml")


ARCH = Check("arch", 1, "architecture is aarch64", lambda cfg, r: {"uname": ["uname", "-m"]}, _arch)


# ---- GPU ---------------------------------------------------------------------------------------------


def _gpu(p: Probe) -> Outcome:
    row = _gpu_row(p)
    if row is None:
        return Outcome(Verdict.FAIL, _first_line(p.output("nvsmi.query")),
                       "nvidia-smi cannot reach the GPU: check that the NVIDIA driver is loaded "
                       "(`nvidia-smi`, `sudo dmesg | grep -i nvrm`); reboot after a driver update")
    name = row.get("name") or "unknown GPU"
    if "GB10" in name:
        return Outcome(Verdict.PASS, name)
    return Outcome(Verdict.FAIL, name, f"the recipe needs a GB10 (DGX Spark) GPU; rank {p.rank} has {name}")


GPU = Check("gpu", 1, "GB10 GPU visible", _gpu_cmds, _gpu)


def _driver(p: Probe) -> Outcome:
    row = _gpu_row(p)
    table = (parsers.parse_nvsmi_table(p.output("nvsmi.table")) if p.status("nvsmi.table") == 0
             else parsers.SmiTable())
    driver = (row or {}).get("driver_version") or table.driver_version
    if driver is None:
        return Outcome(Verdict.UNKNOWN, "nvidia-smi gave no driver version (see the gpu check)",
                       "fix the gpu check first")
    cuda = table.cuda_version
    facts = {"driver": driver}
    remedy = (f"install a CUDA-13-compatible NVIDIA driver ({MIN_DRIVER_MAJOR} branch or newer), the same "
              "version on every host, then reboot")
    if cuda is not None:
        major = parsers.to_int(cuda.split(".")[0])
        ok = major is not None and major >= MIN_CUDA_MAJOR
        value = f"driver {driver}, CUDA {cuda}"
    else:
        major = parsers.to_int(driver.split(".")[0])
        ok = major is not None and major >= MIN_DRIVER_MAJOR
        value = f"driver {driver} (CUDA version not shown)"
    if ok:
        return Outcome(Verdict.PASS, value, facts=facts)
    return Outcome(Verdict.FAIL, value + f" — CUDA {MIN_CUDA_MAJOR} needs driver {MIN_DRIVER_MAJOR}+",
                   remedy, facts=facts)


def _same_driver(cfg: ClusterConfig, outcomes: dict[int, Outcome]) -> dict[int, Outcome]:
    return differs(outcomes, "driver", "driver", "install the same NVIDIA driver version on every host "
                                                  "(the ranks must run identical CUDA stacks)")


DRIVER = Check("driver", 1, "CUDA-13 driver, same on every host", _driver_cmds, _driver, compare=_same_driver)


# ---- SM clocks ---------------------------------------------------------------------------------------
#
# The rule is `cockpit.telemetry.gpu.clock_verdicts` (observe only, no load probe; the Stats pane shares
# it): loaded by utilisation (>= 5 %), not by pstate; loaded below half of clocks.max.sm or below 70 % of
# the loaded peers' median fails; idle inside the latched band (600-1000 MHz) fails when the idle peers
# read more than 30 % apart, warns with no idle peer. A rank whose GPU this cockpit's running engine holds
# (P0 at an idle clock between requests) passes as in use below the load threshold and is no peer.

LATCH_BAND = gpu.LATCH_BAND
LOADED_UTIL = gpu.LOADED_UTIL

CLOCK_REMEDY = ("the SM clock looks latched low (a reported GB10 state): check `nvidia-smi -q -d CLOCK,"
                "PERFORMANCE` for throttle reasons; a host reboot usually clears it")
CLOCK_VERDICT = {"ok": Verdict.PASS, "in_use": Verdict.PASS, "latched": Verdict.FAIL, "suspect": Verdict.WARN,
                 "unknown": Verdict.UNKNOWN}


def _clock_reading(p: Probe) -> gpu.GpuReading | None:
    if p.status("nvsmi.query") != 0:
        return None
    for r in gpu.parse_gpu_lines(p.output("nvsmi.query"), SMI_FIELDS):
        if isinstance(r, gpu.GpuReading):
            return r
    return None


def _clock_value(r: gpu.GpuReading) -> str:
    mx = f"/{r.max_sm}" if r.max_sm else ""
    util = f"{r.util}%" if r.util is not None else "?%"
    load = gpu.is_loaded(r)
    state = "load unknown" if load is None else "loaded" if load else "idle"
    return f"{r.sm}{mx} MHz, {r.pstate or '?'} {util} ({state})"


def _clock_outcome(r: gpu.GpuReading, v: gpu.ClockVerdict, in_use: str) -> Outcome:
    """The clocks outcome of one rank; `in_use` is the in-use value when this cockpit's engine holds the
    GPU (a pass then shows it, with the reading as detail)."""
    facts: dict[str, object] = {"clock": asdict(r), "in_use": in_use} if in_use else {"clock": asdict(r)}
    verdict = CLOCK_VERDICT[v.state]
    if verdict is Verdict.PASS:
        if in_use:
            return Outcome(verdict, in_use, "", _clock_value(r), facts)
        return Outcome(verdict, _clock_value(r), "", v.why, facts)
    detail = f"{v.why}; {in_use}" if in_use else v.why
    remedy = CLOCK_REMEDY if verdict is not Verdict.UNKNOWN else "read `nvidia-smi --query-gpu=clocks.sm," \
        "utilization.gpu --format=csv` on the host: the clock rule needs both"
    return Outcome(verdict, _clock_value(r), remedy, detail, facts)


def _clocks(p: Probe) -> Outcome:
    r = _clock_reading(p)
    if r is None or r.sm is None:
        return Outcome(Verdict.UNKNOWN, "no SM clock reading (see the gpu check)", "fix the gpu check first")
    engine = engine_in_use(p)
    in_use = in_use_value(p, engine) if engine is not None else ""
    v = gpu.clock_verdicts({p.rank: r}, held={p.rank} if in_use else ())[p.rank]
    return _clock_outcome(r, v, in_use)


def _compare_clocks(cfg: ClusterConfig, outcomes: dict[int, Outcome]) -> dict[int, Outcome]:
    readings = {r: gpu.GpuReading(**o.facts["clock"]) for r, o in outcomes.items()
                if isinstance(o.facts.get("clock"), dict)}
    held = {r for r in readings if outcomes[r].facts.get("in_use")}
    changed = {}
    for rank, v in gpu.clock_verdicts(readings, held).items():
        o = outcomes[rank]
        now = _clock_outcome(readings[rank], v, str(o.facts.get("in_use") or ""))
        if now != o:
            changed[rank] = now
    return changed


CLOCKS = Check("clocks", 1, "SM clocks not latched low", _clock_cmds, _clocks, compare=_compare_clocks)


# ---- memory ------------------------------------------------------------------------------------------


def _mem(p: Probe) -> Outcome:
    info = parsers.parse_meminfo(p.output("meminfo"))
    avail = info.get("MemAvailable")
    need = p.cfg.budget.min_mem_available_bytes
    if avail is None:
        return Outcome(Verdict.UNKNOWN, _first_line(p.output("meminfo")), "read /proc/meminfo on the host")
    gib = 1 << 30
    value = f"MemAvailable {avail / gib:.1f} GiB of {info.get('MemTotal', 0) / gib:.1f} GiB"
    if avail >= need:
        return Outcome(Verdict.PASS, value)
    engine = engine_in_use(p)
    if engine is not None:   # the engine holds the memory it needs: the guard is for a launch, not this
        return Outcome(Verdict.PASS, in_use_value(p, engine), detail=value)
    return Outcome(Verdict.FAIL, f"{value} (needs ≥ {need / gib:.0f} GiB)",
                   "free memory before launch: find what holds it (`free -g`, `ps aux --sort=-rss | head`, "
                   "`nvidia-smi --query-compute-apps=pid,used_memory --format=csv`) and stop it if it is "
                   "yours to stop; the cockpit stops nothing it did not start")


MEMORY = Check("memory", 1, "MemAvailable before launch",
               lambda cfg, r: {"meminfo": ["cat", "/proc/meminfo"], ENGINE: _engine_cmd(cfg)}, _mem)


# ---- docker ------------------------------------------------------------------------------------------

DOCKER_INFO: list[str] = [*TIMEOUT, "docker", "info", "--format", "{{json .}}"]
DOCKER_REMEDY = ("start Docker and let the SSH login use it: `sudo systemctl start docker`, "
                 "`docker info` (the login needs the docker group)")
DOCKER_DOWN_REMEDY = ("the Docker daemon is not running: start it (`sudo systemctl start docker`; "
                      "`sudo journalctl -u docker` says why it stopped), then `docker info`")
DOCKER_DENIED_REMEDY = ("the SSH login may not use the Docker socket: add it to the docker group "
                        "(`sudo usermod -aG docker USER`), log in again, then `docker info`")


def docker_remedy(reason: str) -> str:
    """The remedy for what `docker info` said (the daemon down, the socket refused, or anything else)."""
    low = reason.lower()
    if "permission denied" in low:
        return DOCKER_DENIED_REMEDY
    if "cannot connect to the docker daemon" in low or "is the docker daemon running" in low:
        return DOCKER_DOWN_REMEDY
    return DOCKER_REMEDY


def _docker_info(p: Probe) -> parsers.DockerInfo | None:
    return parsers.parse_docker_info(p.output("docker.info"))


def _docker(p: Probe) -> Outcome:
    info = _docker_info(p)
    if info is None or not info.ok:
        why = (info.errors[0] if info and info.errors else _first_line(p.output("docker.info")))
        return Outcome(Verdict.FAIL, safe(why, 300), docker_remedy(why))
    return Outcome(Verdict.PASS, f"Docker {info.server_version}")


DOCKER = Check("docker", 1, "Docker working", lambda cfg, r: {"docker.info": DOCKER_INFO}, _docker)


def _runtime(p: Probe) -> Outcome:
    info = _docker_info(p)
    if info is None or not info.ok:
        return Outcome(Verdict.UNKNOWN, "Docker not answering (see the docker check)", DOCKER_REMEDY)
    value = f"runtimes: {', '.join(info.runtimes) or 'none'} (default {info.default_runtime or '?'})"
    if "nvidia" in info.runtimes:
        return Outcome(Verdict.PASS, value)
    return Outcome(Verdict.FAIL, value,
                   "install the NVIDIA Container Toolkit and register its runtime: `sudo nvidia-ctk runtime "
                   "configure --runtime=docker && sudo systemctl restart docker`")


RUNTIME = Check("nvidia-runtime", 1, "NVIDIA container runtime", lambda cfg, r: {"docker.info": DOCKER_INFO},
                _runtime)


def image_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    """The commands that read rank's runtime image: docker info, the loaded image's ID, the archive's IDs.
    Shared by the `image` check, the storage checks and the setup `runtime` job."""
    archive = posixpath.join(cfg.recipe_dir(rank), cfg.runtime.archive)
    return {"docker.info": DOCKER_INFO,
            "docker.image": [*TIMEOUT, *containers.image_id_argv(cfg.runtime.image_tag)],
            "image.archive": [*TIMEOUT, *containers.archive_ids_argv(archive)]}


def image_identity(p: Probe) -> tuple[ImageFacts | None, Identity | None]:
    """The loaded image of the runtime tag and whether it is the verified one (None, None: not loaded)."""
    facts = parse_image_inspect(p.output("docker.image")) if p.status("docker.image") == 0 else None
    if facts is None:
        return None, None
    archive = parse_archive_ids(p.output("image.archive")) if facts.id != p.cfg.runtime.image_id else None
    return facts, identify(facts, p.cfg.runtime.image_id, archive)


def image_loaded(p: Probe) -> bool | None:
    """True if the expected runtime image is loaded, None if Docker could not tell."""
    info = _docker_info(p)
    if info is None or not info.ok:
        return None
    _, ident = image_identity(p)
    return ident is not None and ident.ok


def _image(p: Probe) -> Outcome:
    info = _docker_info(p)
    if info is None or not info.ok:
        return Outcome(Verdict.UNKNOWN, "Docker not answering (see the docker check)", DOCKER_REMEDY)
    want, tag = p.cfg.runtime.image_id, p.cfg.runtime.image_tag
    facts, ident = image_identity(p)
    if facts is None or ident is None:
        return Outcome(Verdict.FAIL, f"{tag} not loaded",
                       f"`r37-cockpit setup runtime --rank {p.rank}` downloads the archive, verifies its "
                       "sha256 and loads it")
    got = facts.id
    if ident.ok:
        # the same verified image on every rank, whichever store shows it: compared by the pinned digest
        via = "" if got == want else f" (ID {got[:19]}…: {ident.how})"
        return Outcome(Verdict.PASS, f"{tag} {want[:19]}…{via}", facts={"image": want})
    return Outcome(Verdict.FAIL, f"{tag} is {got[:19]}…, expected {want[:19]}…",
                   f"this is not the verified R37 image ({safe(ident.how, 300)}): reload the verified "
                   f"archive with `r37-cockpit setup runtime --rank {p.rank}`; never substitute another "
                   "image",
                   facts={"image": got})


def _same_image(cfg: ClusterConfig, outcomes: dict[int, Outcome]) -> dict[int, Outcome]:
    return differs(outcomes, "image", "image ID", "load the same verified archive on every rank")


IMAGE = Check("image", 3, "runtime image ID, same everywhere", image_cmds, _image, compare=_same_image)


def _container_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {"docker.info": DOCKER_INFO,
            "docker.ps": [*TIMEOUT, "docker", "ps", "-a", "--format", "{{json .}}"],
            ENGINE: _engine_cmd(cfg)}


def _container(p: Probe) -> Outcome:
    name = p.cfg.cluster.container_name
    info = _docker_info(p)
    if info is None or not info.ok or p.status("docker.ps") != 0:
        return Outcome(Verdict.UNKNOWN, "Docker not answering (see the docker check)", DOCKER_REMEDY)
    row = containers.ps_named(p.output("docker.ps"), name)
    if row is None:
        return Outcome(Verdict.PASS, f"no container named {name}")
    state = named_container(p)
    if state is not None and state.running and started_here(p, state):
        return Outcome(Verdict.PASS, in_use_value(p, state),
                       detail=f"{row.status}, image {row.image or '?'}; started by this cockpit",
                       facts={"container": asdict(row), "owner": "cockpit"})
    value = f"{name} exists: {row.state or '?'} ({row.status}), image {row.image or '?'}"
    owner = None if state is None else ("cockpit" if started_here(p, state) else "by hand")
    if owner is not None:
        value += ", started by this cockpit" if owner == "cockpit" else ", not started by this cockpit"
    facts = {"container": asdict(row), "owner": owner}
    if state is not None and state.start_failed:
        value += f"; it never started: {state.error}"
    if state is not None and owner == "cockpit" and state.ended:
        return Outcome(Verdict.FAIL, value,
                       f"a stopped {name} this cockpit started: `r37-cockpit launch --replace-stopped` "
                       "archives its log, then removes that container (by its ID) and launches; inspect it "
                       f"first if you need to (`docker logs --tail 100 {name}`)", facts=facts)
    return Outcome(Verdict.FAIL, value,
                   f"the launcher refuses an existing {name}: inspect it (`docker inspect {name}`, "
                   f"`docker logs --tail 100 {name}`) and stop or remove it yourself if it is stale — "
                   "the cockpit never removes a container it did not start", facts=facts)


CONTAINER = Check("container", 6, "no leftover container", _container_cmds, _container)


# ---- ports on rank 0 ---------------------------------------------------------------------------------


def _conflicts(listener: parsers.Listener, fabric_ip: str) -> bool:
    """Would this listener stop the engine from binding 0.0.0.0:PORT? Other 127/8 aliases do not count
    (on the demo cluster they are the other simulated hosts sharing this machine's loopback)."""
    addr = listener.address
    if addr in ("*", "0.0.0.0", "::", fabric_ip):
        return True
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return True
    return not (ip.is_loopback and str(ip) not in ("127.0.0.1", "::1"))


def _ports(p: Probe) -> Outcome:
    if p.status("ss") != 0:
        return Outcome(Verdict.UNKNOWN, _first_line(p.output("ss")), "install iproute2 (`ss`) on the host")
    want = {p.cfg.cluster.api_port: "API", p.cfg.cluster.coord_port: "coordination"}
    busy = sorted({f"{lst.address}:{lst.port} ({want[lst.port]})"
                   for lst in parsers.parse_ss_listeners(p.output("ss"))
                   if lst.port in want and _conflicts(lst, p.host.fabric_ip)})
    ports = " and ".join(str(x) for x in want)
    if not busy:
        return Outcome(Verdict.PASS, f"ports {ports} free")
    engine = engine_in_use(p)
    if engine is not None:   # the engine runs with host networking: these are its own listeners
        return Outcome(Verdict.PASS, in_use_value(p, engine), detail="listening: " + ", ".join(busy))
    return Outcome(Verdict.FAIL, "in use: " + ", ".join(busy),
                   "something already listens there (see `sudo ss -ltnp`): stop it if it is yours, or choose "
                   "other ports in [cluster]; the cockpit never stops a model it did not start")


PORTS = Check("ports", 6, "API and coordination ports free on rank 0",
              lambda cfg, r: {"ss": ["ss", "-Hltn"], ENGINE: _engine_cmd(cfg)}, _ports,
              applies=lambda cfg, r: r == 0)

