"""cluster.toml: pydantic models of the deployment, loading with clear errors, discovery."""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cockpit import constants as C


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ClusterSection(Strict):
    name: str = "r37"
    container_name: str = C.CONTAINER_NAME
    api_port: int = C.API_PORT
    coord_port: int = C.COORD_PORT


class ModelSection(Strict):
    repo: str = C.DEALIGNAI_REPO
    revision: str | None = None
    path: str = "/srv/models/DeepSeek-V4.1-Flash-dealignai"
    shared_readonly: bool = False


class RuntimeSection(Strict):
    recipe_repo: str = C.RECIPE_REPO
    image_tag: str = C.IMAGE_TAG
    image_id: str = C.IMAGE_ID
    archive: str = C.RUNTIME_ARCHIVE
    sha256: str = C.ARCHIVE_SHA256
    size_bytes: int = C.ARCHIVE_SIZE


class ServingSection(Strict):
    maxlen: int = C.MAXLEN
    seqs: int = C.SEQS
    gmu: float = C.GMU
    spec_k: int = C.SPEC_K
    max_batched_tokens: int = 4096
    local_engram_edges: bool = True


class PathsSection(Strict):
    engram: str = "/srv/engram-local/DeepSeek-V4.1-Flash"
    cache: str = "/srv/cache"
    recipe_dir: str = "r37-recipe"


class BudgetSection(Strict):
    checkpoint_bytes: int = C.CHECKPOINT_BUDGET
    engram_bytes: int = C.ENGRAM_BUDGET
    runtime_bytes: int = C.RUNTIME_BUDGET
    min_mem_available_bytes: int = C.MIN_MEM_AVAILABLE


class SSHSection(Strict):
    known_hosts: str | None = None
    identity_file: str | None = None
    connect_timeout: float = 10.0
    keepalive_interval: float = 2.0
    keepalive_count_max: int = 3


class HostEntry(Strict):
    rank: int
    ssh: str
    user: str | None = None
    port: int | None = None
    fabric_ip: str
    fabric_iface: str
    ib_hca: list[str]
    gid_index: int = 3
    model_path: str | None = None
    engram_path: str | None = None
    cache_path: str | None = None
    recipe_dir: str | None = None


class ClusterConfig(Strict):
    cluster: ClusterSection = Field(default_factory=ClusterSection)
    model: ModelSection = Field(default_factory=ModelSection)
    runtime: RuntimeSection = Field(default_factory=RuntimeSection)
    serving: ServingSection = Field(default_factory=ServingSection)
    paths: PathsSection = Field(default_factory=PathsSection)
    budget: BudgetSection = Field(default_factory=BudgetSection)
    ssh: SSHSection = Field(default_factory=SSHSection)
    hosts: list[HostEntry]

    def host(self, rank: int) -> HostEntry:
        return next(h for h in self.hosts if h.rank == rank)

    @property
    def ranks(self) -> list[int]:
        return [h.rank for h in self.hosts]


class ConfigError(Exception):
    """A config that cannot be used; `problems` are (key path, reason) pairs."""

    def __init__(self, path: Path | None, problems: list[tuple[str, str]]):
        self.path = path
        self.problems = problems
        super().__init__(self.render())

    def render(self) -> str:
        where = str(self.path) if self.path else "<config>"
        return "\n".join(f"{where}: {key}: {reason}" if key else f"{where}: {reason}"
                         for key, reason in self.problems)


def _loc(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_config(text: str, path: Path | None = None) -> ClusterConfig:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [("", f"TOML syntax error: {exc}")]) from None
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(path, [(_loc(e["loc"]), e["msg"]) for e in exc.errors()]) from None


def load_config(path: Path) -> ClusterConfig:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(path, [("", "file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, [("", f"cannot read: {exc}")]) from None
    return parse_config(text, path)


def discover_config(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--config, then ./cluster.toml, then $XDG_CONFIG_HOME/r37-cockpit/cluster.toml."""
    if explicit:
        return Path(explicit)
    local = Path("cluster.toml")
    if local.is_file():
        return local
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    user = xdg / "r37-cockpit" / "cluster.toml"
    if user.is_file():
        return user
    raise ConfigError(None, [("", "no cluster.toml: pass --config PATH, or put one in ./cluster.toml or "
                                  f"{user}; `r37-cockpit demo` runs on a simulated cluster")])

