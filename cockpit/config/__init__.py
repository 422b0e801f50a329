"""cluster.toml: the deployment's config, validated so the layers above can rely on every value.

- `validators`: the value rules (paths, names, interfaces, HCAs, ports, image references): no control
  characters, no shell metacharacters, absolute paths;
- `models`: the pydantic models (unknown keys rejected) and the rules across keys;
- `errors`: `ConfigError`, every problem as (key path, reason);
- `loading`: reading, parsing and validating a file, and finding it (`--config`, `./cluster.toml`, the
  user's config dir: `cockpit.locations.config_search`);
- `dumping`: the TOML text of a config.

The names below are the package's API: `from cockpit.config import ClusterConfig, load_config, ...`.

The names are imported at first use (`cockpit.lazy`): `cockpit.config.errors` costs nothing of pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cockpit.lazy import lazy_exports

if TYPE_CHECKING:
    from cockpit.config.dumping import dump_config, toml_key, toml_string, toml_value
    from cockpit.config.errors import ConfigError
    from cockpit.config.loading import (
        MAX_FILE_BYTES,
        config_from_data,
        discover_config,
        load_config,
        parse_config,
        problems_from,
        read_text_file,
    )
    from cockpit.config.models import (
        MAX_HOSTS,
        BudgetSection,
        ClusterConfig,
        ClusterSection,
        EngineSection,
        HostEntry,
        ModelSection,
        PathsSection,
        RecorderSection,
        RuntimeSection,
        ServingSection,
        SSHSection,
        StatsSection,
        UISection,
    )
    from cockpit.config.validators import SSH_CIPHERS, host_path, split_listen

EXPORTS = {
    "cockpit.config.dumping": ("dump_config", "toml_key", "toml_string", "toml_value",),
    "cockpit.config.errors": ("ConfigError",),
    "cockpit.config.loading": ("MAX_FILE_BYTES", "config_from_data", "discover_config", "load_config",
                               "parse_config", "problems_from", "read_text_file",),
    "cockpit.config.models": ("MAX_HOSTS", "BudgetSection", "ClusterConfig", "ClusterSection",
                              "EngineSection", "HostEntry", "ModelSection", "PathsSection",
                              "RecorderSection", "RuntimeSection", "ServingSection", "SSHSection",
                              "StatsSection", "UISection",),
    "cockpit.config.validators": ("SSH_CIPHERS", "host_path", "split_listen",),
}
__all__ = [
    "MAX_FILE_BYTES", "MAX_HOSTS", "SSH_CIPHERS", "BudgetSection", "ClusterConfig", "ClusterSection",
    "ConfigError", "EngineSection", "HostEntry", "ModelSection", "PathsSection", "RecorderSection",
    "RuntimeSection",
    "SSHSection", "ServingSection", "StatsSection", "UISection", "config_from_data", "discover_config",
    "dump_config", "host_path", "load_config", "parse_config", "problems_from", "read_text_file",
    "split_listen", "toml_key", "toml_string", "toml_value",
]
if not TYPE_CHECKING:
    __getattr__, __dir__ = lazy_exports(__name__, EXPORTS)
