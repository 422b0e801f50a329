"""Several clusters in one place: the main cluster.toml, every `cluster.d/*.toml` beside it, and every
further `--config`, each known by its `[cluster] name`.

The main file is the first `--config`, else the one discovery finds (`discover_config`). A broken file
is listed with its error (so the TUI can name it) and refused only when chosen; two files with the same
name are an error naming both, since `--cluster NAME` could not tell them apart.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cockpit.config.errors import ConfigError
from cockpit.config.loading import discover_config, load_config
from cockpit.config.models import ClusterConfig

CLUSTER_DIR = "cluster.d"     # beside the main cluster.toml: one more cluster per *.toml file
MAX_CLUSTERS = 64             # files read from cluster.d at most: a directory of junk costs nothing


@dataclass(frozen=True)
class ClusterRef:
    """One cluster the cockpit can open: its name, file, and config (or the reason it has none)."""

    name: str
    path: Path
    config: ClusterConfig | None = None
    error: ConfigError | None = None

    def loaded(self) -> ClusterConfig:
        """The config, or its ConfigError raised."""
        if self.error is not None:
            raise self.error
        assert self.config is not None
        return self.config


def cluster_files(explicit: Sequence[str | os.PathLike[str]] = ()) -> list[Path]:
    """The main config, then `cluster.d/*.toml` beside it (by name), then every further `--config`;
    each file once."""
    main = discover_config(explicit[0] if explicit else None)
    extra = sorted(p for p in (main.parent / CLUSTER_DIR).glob("*.toml") if p.is_file())[:MAX_CLUSTERS]
    seen: dict[Path, Path] = {}
    for path in (main, *extra, *map(Path, explicit[1:])):
        seen.setdefault(file_identity(path), path)
    return list(seen.values())


def file_identity(path: Path) -> Path:
    """One name per file (symlinks and `..` resolved), so a file given twice is seen once."""
    try:
        return Path(path).resolve()
    except OSError:
        return Path(path).absolute()


def load_clusters(explicit: Sequence[str | os.PathLike[str]] = ()) -> list[ClusterRef]:
    """Every cluster of `cluster_files`, loaded; the main one first. Raises ConfigError when two share
    a name."""
    refs: list[ClusterRef] = []
    for path in cluster_files(explicit):
        try:
            config = load_config(path)
        except ConfigError as exc:
            refs.append(ClusterRef(path.stem, path, error=exc))
        else:
            refs.append(ClusterRef(config.cluster.name, path, config))
    by_name: dict[str, ClusterRef] = {}
    for ref in refs:
        other = by_name.setdefault(ref.name, ref)
        if other is not ref:
            raise ConfigError(ref.path, [("cluster.name", f"{ref.name!r} is also the name of {other.path}: "
                                                          "every cluster needs a name of its own")],
                              "cluster-name-taken")
    return refs


def choose_cluster(refs: Sequence[ClusterRef], name: str | None) -> ClusterRef:
    """The cluster called `name` (the main one when None); ConfigError naming the known ones if none is."""
    if not refs:
        raise ConfigError(None, [("", "no cluster.toml found")], "config-missing")
    if name is None:
        return refs[0]
    for ref in refs:
        if ref.name == name:
            return ref
    known = ", ".join(f"{r.name} ({r.path})" for r in refs)
    raise ConfigError(None, [("--cluster", f"no cluster named {name!r}; known: {known}")], "cluster-unknown")
