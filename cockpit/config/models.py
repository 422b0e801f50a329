"""The pydantic models of cluster.toml (unknown keys rejected, frozen, strict) and the rules across keys
(ranks 0..N-1 once each, unique fabric IPs and SSH targets, separate model/Engram/cache trees).
"""

from __future__ import annotations

import ipaddress
from typing import Annotated

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

from cockpit import constants
from cockpit.config.validators import (
    SSH_CIPHERS,
    LocalPath,
    MountPath,
    Port,
    Positive,
    RecipeDir,
    Seconds,
    argv_list,
    cipher_list,
    cluster_name,
    container_name_text,
    float_range,
    hca_list,
    hca_list_rules,
    hca_name,
    image_id_text,
    image_ref,
    int_range,
    interface_name,
    ip_text,
    keymap_rules,
    listen_address,
    login_name,
    normal_path,
    repo_id,
    repo_relative_path,
    revision_text,
    sha256_hex,
    shown,
    ssh_target,
    theme_name,
)


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ClusterSection(Strict):
    name: Annotated[str, AfterValidator(cluster_name)] = "r37"
    container_name: Annotated[str, AfterValidator(container_name_text)] = constants.CONTAINER_NAME
    api_port: Port = constants.API_PORT
    coord_port: Port = constants.COORD_PORT


class ModelSection(Strict):
    repo: Annotated[str, AfterValidator(repo_id)] = constants.DEALIGNAI_REPO
    revision: Annotated[str, AfterValidator(revision_text)] | None = None
    path: MountPath = "/srv/models/DeepSeek-V4.1-Flash-dealignai"
    shared_readonly: bool = False


class RuntimeSection(Strict):
    recipe_repo: Annotated[str, AfterValidator(repo_id)] = constants.RECIPE_REPO
    image_tag: Annotated[str, AfterValidator(image_ref)] = constants.IMAGE_TAG
    image_id: Annotated[str, AfterValidator(image_id_text)] = constants.IMAGE_ID
    archive: Annotated[str, AfterValidator(repo_relative_path)] = constants.RUNTIME_ARCHIVE
    sha256: Annotated[str, AfterValidator(sha256_hex)] = constants.ARCHIVE_SHA256
    size_bytes: Positive = constants.ARCHIVE_SIZE


class ServingSection(Strict):
    maxlen: Positive = constants.MAXLEN
    seqs: Positive = constants.SEQS
    gmu: Annotated[float, float_range(0.0, 1.0, "gmu")] = constants.GMU
    spec_k: Annotated[int, int_range(0, None, "spec_k")] = constants.SPEC_K
    max_batched_tokens: Positive = 4096
    local_engram_edges: bool = True


class PathsSection(Strict):
    engram: MountPath = "/srv/engram-local/DeepSeek-V4.1-Flash"
    cache: MountPath = "/srv/cache"
    recipe_dir: RecipeDir = "r37-recipe"


class BudgetSection(Strict):
    checkpoint_bytes: Positive = constants.CHECKPOINT_BUDGET
    engram_bytes: Positive = constants.ENGRAM_BUDGET
    runtime_bytes: Positive = constants.RUNTIME_BUDGET
    min_mem_available_bytes: Positive = constants.MIN_MEM_AVAILABLE




class SSHSection(Strict):
    known_hosts: LocalPath | None = None
    identity_file: LocalPath | None = None
    connect_timeout: Seconds = 10.0
    keepalive_interval: Annotated[float, float_range(0, None, "seconds", lo_open=False)] = 2.0
    keepalive_count_max: Positive = 3
    ciphers: Annotated[list[str], AfterValidator(cipher_list)] = Field(
        default_factory=lambda: list(SSH_CIPHERS))




class UISection(Strict):
    theme: Annotated[str, AfterValidator(theme_name)] | None = None
    keymap: Annotated[dict[str, str], AfterValidator(keymap_rules)] = Field(default_factory=dict)
    log_buffer_lines: Annotated[int, int_range(1000, 10_000_000, "log buffer lines")] = 200_000
    # After an answer's first token its socket is read (and the answer redrawn) once per frame: every
    # wakeup costs the client more than the bytes it brings. 0 = read every piece as it arrives.
    stream_frame_ms: Annotated[int, int_range(0, 2000, "stream frame ms")] = constants.STREAM_FRAME_MS
    # hide and refuse every host-changing action (setup, launch, stop); `--read-only` cannot turn it off
    read_only: bool = False


class EngineSection(Strict):
    """How the cockpit judges a serving engine and how long it waits for one."""

    # hung: /metrics shows requests running while vllm:generation_tokens_total stays flat this long
    hang_after_s: Seconds = 90.0
    # stuck: seconds a rank may stay in one boot phase; unset: the card's limits per phase (300-3600 s)
    phase_limit_s: Seconds | None = None
    # chat and smoke: seconds to the first token (prefill of a long prompt counts), then between tokens
    first_token_timeout_s: Seconds = 300.0
    idle_timeout_s: Seconds = 60.0
    # chat and smoke: seconds one read may wait for any byte at all (never less than a deadline + 1 s)
    read_timeout_s: Annotated[float, float_range(1, None, "seconds")] = 600.0
    # stop: the longest wait for rank 0's running and waiting requests to finish before SIGTERM (0: never
    # wait); `stop --drain=SECONDS` / `--no-drain` override it
    drain_timeout_s: Annotated[float, float_range(0, 3600, "seconds", lo_open=False)] = 120.0


STATS_INTERVAL_S = (0.2, 60.0)     # the bounds of `[stats] interval_s` (and of `stats --interval`)


class StatsSection(Strict):
    """The Stats pane, `r37-cockpit stats` and its Prometheus endpoint."""

    interval_s: Annotated[float, float_range(*STATS_INTERVAL_S, "seconds")] = 1.0
    # `stats` serves what it samples in Prometheus text format here (loopback unless you say otherwise)
    serve_metrics: Annotated[str, AfterValidator(listen_address)] | None = None
    min_available_gib: Annotated[float, float_range(0, None, "GiB", lo_open=False)] = 5.0  # operators' guard
    kv_cache_alert_pct: Annotated[float, float_range(0, 100, "percent")] = 95.0
    # an NVRM Xid line younger than this (host clock) is an alert; the kernel log is read this far back
    xid_alert_s: Annotated[int, int_range(10, 7 * 86400, "seconds")] = 3600
    # a throttling clock event reason (thermal, power brake, HW slowdown) active this long is an alert
    throttle_hold_s: Annotated[float, float_range(0, 3600, "seconds")] = 5.0


class AlertsSection(Strict):
    """`[alerts] command`: run on the admin box with each alert raised or cleared as JSON on stdin."""

    command: Annotated[list[str], AfterValidator(argv_list)] = Field(default_factory=list)
    timeout_s: Annotated[float, float_range(0.1, 600, "seconds")] = 10.0
    max_per_minute: Annotated[int, int_range(1, 600, "commands per minute")] = 12
    queue: Annotated[int, int_range(1, 10_000, "events")] = 100


class FabricSection(Strict):
    """`r37-cockpit fabric`: the perftest pair test, and whether a launch needs it passed."""

    require_passed: bool = False
    size_bytes: Annotated[int, int_range(2, 1 << 30, "bytes")] = 1 << 20
    port: Port = 18515
    # a pair below this share of the port's active rate, or of the best pair, is slow
    min_rate_ratio: Annotated[float, float_range(0.0, 1.0, "ratio")] = 0.8
    timeout_s: Annotated[float, float_range(1, 600, "seconds")] = 30.0


class RecorderSection(Strict):
    """The flight recorder (`cockpit.telemetry.recorder`): one SQLite database per cluster under the state
    directory, and how long the command log keeps host-changing sessions."""

    enabled: bool = True
    # oldest first: rows older than this many days go, and the oldest go while the file is over max_mb
    retention_days: Annotated[int, int_range(1, 3650, "retention days")] = 30
    max_mb: Annotated[int, int_range(1, 1_000_000, "max MB")] = 500


class HostEntry(Strict):
    rank: Annotated[int, int_range(0, None, "rank")]
    ssh: Annotated[str, AfterValidator(ssh_target)]
    user: Annotated[str, AfterValidator(login_name)] | None = None
    port: Port | None = None
    fabric_ip: Annotated[str, AfterValidator(ip_text)]
    fabric_iface: Annotated[str, AfterValidator(interface_name)]
    ib_hca: Annotated[list[Annotated[str, AfterValidator(hca_name)]],
                      BeforeValidator(hca_list), AfterValidator(hca_list_rules)]
    gid_index: Annotated[int, int_range(0, 255, "gid_index")] = 3
    model_path: MountPath | None = None
    engram_path: MountPath | None = None
    cache_path: MountPath | None = None
    recipe_dir: RecipeDir | None = None

    @property
    def target(self) -> str:
        """`user@host:port` as the operator would type it (user and port only when set)."""
        where = self.ssh if self.port is None else f"{self.ssh}:{self.port}"
        return f"{self.user}@{where}" if self.user else where


class ClusterConfig(Strict):
    cluster: ClusterSection = Field(default_factory=ClusterSection)
    model: ModelSection = Field(default_factory=ModelSection)
    runtime: RuntimeSection = Field(default_factory=RuntimeSection)
    serving: ServingSection = Field(default_factory=ServingSection)
    paths: PathsSection = Field(default_factory=PathsSection)
    budget: BudgetSection = Field(default_factory=BudgetSection)
    ssh: SSHSection = Field(default_factory=SSHSection)
    ui: UISection = Field(default_factory=UISection)
    engine: EngineSection = Field(default_factory=EngineSection)
    stats: StatsSection = Field(default_factory=StatsSection)
    alerts: AlertsSection = Field(default_factory=AlertsSection)
    fabric: FabricSection = Field(default_factory=FabricSection)
    recorder: RecorderSection = Field(default_factory=RecorderSection)
    hosts: list[HostEntry]

    @model_validator(mode="after")
    def _cross_checks(self) -> ClusterConfig:
        problems = cross_problems(self)
        if problems:
            raise PydanticCustomError("cluster_problems", "{summary}",
                                      {"summary": "; ".join(f"{k}: {r}" for k, r in problems),
                                       "problems": problems})
        return self

    def host(self, rank: int) -> HostEntry:
        for h in self.hosts:
            if h.rank == rank:
                return h
        raise KeyError(f"no host has rank {rank} (ranks: {sorted(self.ranks)})")

    @property
    def ranks(self) -> list[int]:
        return [h.rank for h in self.hosts]

    def by_rank(self) -> list[HostEntry]:
        """Hosts ordered by rank."""
        return sorted(self.hosts, key=lambda h: h.rank)

    def fabric_ips(self) -> list[str]:
        """Fabric IPs ordered by rank (the recipe's NODE_IPS)."""
        return [h.fabric_ip for h in self.by_rank()]

    def model_path(self, rank: int) -> str:
        return self.host(rank).model_path or self.model.path

    def engram_path(self, rank: int) -> str:
        return self.host(rank).engram_path or self.paths.engram

    def cache_path(self, rank: int) -> str:
        return self.host(rank).cache_path or self.paths.cache

    def recipe_dir(self, rank: int) -> str:
        return self.host(rank).recipe_dir or self.paths.recipe_dir


MAX_HOSTS = 256


def cross_problems(cfg: ClusterConfig) -> list[tuple[str, str]]:
    """Rules across keys: ranks 0..N-1 once each, unique fabric IPs and SSH targets, distinct ports."""
    problems: list[tuple[str, str]] = []
    n = len(cfg.hosts)
    if n == 0:
        return [("hosts", "at least one [[hosts]] entry is required")]
    if n > MAX_HOSTS:
        return [("hosts", f"{n} hosts: the cockpit drives at most {MAX_HOSTS}")]
    seen_rank: dict[int, int] = {}
    for i, h in enumerate(cfg.hosts):
        if h.rank >= n:
            problems.append((f"hosts[{i}].rank", f"rank {h.rank} is out of range: "
                                                  f"{n} host{'s' if n > 1 else ''} need ranks 0..{n - 1}"))
        elif h.rank in seen_rank:
            problems.append((f"hosts[{i}].rank",
                             f"rank {h.rank} is used twice (also by hosts[{seen_rank[h.rank]}])"))
        else:
            seen_rank[h.rank] = i
    for missing in sorted(set(range(n)) - set(seen_rank)):
        problems.append(("hosts", f"no host has rank {missing} "
                                  f"({n} hosts need ranks 0..{n - 1}, each exactly once)"))
    ips: dict[ipaddress.IPv4Address | ipaddress.IPv6Address, int] = {}
    targets: dict[tuple[str, int | None], int] = {}
    for i, h in enumerate(cfg.hosts):
        ip = ipaddress.ip_address(h.fabric_ip)
        if ip in ips:
            problems.append((f"hosts[{i}].fabric_ip",
                             f"{h.fabric_ip!r} is also the fabric IP of rank {cfg.hosts[ips[ip]].rank}"))
        else:
            ips[ip] = i
        key = (h.ssh, h.port)
        if key in targets:
            problems.append((f"hosts[{i}].ssh", f"{h.ssh!r} is also the SSH target of rank "
                                                f"{cfg.hosts[targets[key]].rank} (one host per rank)"))
        else:
            targets[key] = i
    problems += path_problems(cfg)
    if cfg.cluster.api_port == cfg.cluster.coord_port:
        problems.append(("cluster.coord_port", f"the coordination port {cfg.cluster.coord_port} is the "
                                               "same as the API port; they must differ"))
    return problems


def _path_keys(cfg: ClusterConfig, i: int, host: HostEntry) -> list[tuple[str, str]]:
    """(key that sets it, path) of the model, Engram and cache directory of hosts[i]."""
    return [
        (f"hosts[{i}].model_path" if host.model_path else "model.path", cfg.model_path(host.rank)),
        (f"hosts[{i}].engram_path" if host.engram_path else "paths.engram", cfg.engram_path(host.rank)),
        (f"hosts[{i}].cache_path" if host.cache_path else "paths.cache", cfg.cache_path(host.rank)),
    ]


def path_problems(cfg: ClusterConfig) -> list[tuple[str, str]]:
    """Model, Engram and cache directories of one host are three separate trees: none equal to another
    or inside another (the Engram overlay would be written into the checkpoint, the cache into either)."""
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for i, host in enumerate(cfg.hosts):
        entries = _path_keys(cfg, i, host)
        for a in range(len(entries)):
            for b in range(a + 1, len(entries)):
                (key_a, path_a), (key_b, path_b) = entries[a], entries[b]
                na, nb = normal_path(path_a), normal_path(path_b)
                if na == nb:
                    why = f"{shown(path_b)} is the same directory as {key_a} ({shown(path_a)})"
                elif nb.startswith(na + "/"):
                    why = f"{shown(path_b)} lies inside {key_a} ({shown(path_a)})"
                elif na.startswith(nb + "/"):
                    why = f"{shown(path_b)} contains {key_a} ({shown(path_a)})"
                else:
                    continue
                if (key_a, key_b) not in seen:
                    seen.add((key_a, key_b))
                    problems.append((key_b, why + "; model, Engram and cache directories must be "
                                            "separate trees"))
    return problems
