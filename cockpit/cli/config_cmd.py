"""`r37-cockpit config …`: check a cluster.toml, import the recipe's cluster.env and export one rank's.

`check`, `import_env` and `export_env` return `(ok, text, data)`: `text` is what the CLI prints, `data`
what `--json` prints. Expected failures come back as ok=False, never as a traceback, with `data["error"]`
saying which kind: "config" (a bad cluster.toml or cluster.env, a rank no host has: exit 2), "exists" (the
output file exists and `force` was not given: refused, exit 3) or "io" (the output could not be written:
exit 1).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    add_json,
    load,
    print_json,
    table,
    usage_error,
)
from cockpit.config import (
    ClusterConfig,
    ConfigError,
    discover_config,
    dump_config,
    load_config,
    read_text_file,
)
from cockpit.envfile import config_from_env, env_for_rank, parse_env
from cockpit.files import write_atomic
from cockpit.safetext import neutralise, neutralise_block

Result = tuple[bool, str, dict[str, Any]]
CONFIG, EXISTS, IO = "config", "exists", "io"     # data["error"] of a failure


def _config_failure(exc: ConfigError) -> Result:
    return False, exc.render(), {**exc.as_json(), "error": CONFIG, "code": exc.code}


def host_rows(cfg: ClusterConfig) -> list[dict[str, Any]]:
    """Every host with its resolved paths, ordered by rank."""
    return [{
        "rank": h.rank, "ssh": h.ssh, "user": h.user, "port": h.port, "fabric_ip": h.fabric_ip,
        "fabric_iface": h.fabric_iface, "ib_hca": list(h.ib_hca), "gid_index": h.gid_index,
        "model_path": cfg.model_path(h.rank), "engram_path": cfg.engram_path(h.rank),
        "cache_path": cfg.cache_path(h.rank), "recipe_dir": cfg.recipe_dir(h.rank),
    } for h in cfg.by_rank()]


def config_notes(cfg: ClusterConfig) -> list[str]:
    """Things that are valid but worth a second look."""
    notes = []
    if cfg.model.revision is None:
        notes.append("model.revision is not set: checkpoint downloads are not pinned to a commit")
    same = [h.rank for h in cfg.by_rank() if h.ssh == h.fabric_ip]
    if same:
        notes.append(f"rank{'s' if len(same) > 1 else ''} {', '.join(map(str, same))}: the SSH target is "
                     "the fabric IP; review hosts[].ssh (the admin box usually reaches hosts another way)")
    return notes


def summary(cfg: ClusterConfig) -> str:
    """Human summary of a resolved config: cluster, model, runtime, serving, hosts table."""
    c, m, r, s = cfg.cluster, cfg.model, cfg.runtime, cfg.serving
    lines = [
        f"cluster   {c.name}: container {c.container_name}, API port {c.api_port}, "
        f"coordination port {c.coord_port}",
        f"model     {m.repo} @ {m.revision or 'unpinned'}"
        f"{' (shared read-only)' if m.shared_readonly else ''}",
        f"runtime   {r.image_tag} {r.image_id}",
        f"serving   maxlen {s.maxlen}, seqs {s.seqs}, gmu {s.gmu:g}, spec_k {s.spec_k}, "
        f"max batched tokens {s.max_batched_tokens}, "
        f"local Engram edges {'on' if s.local_engram_edges else 'off'}",
        "",
    ]
    rows = [[str(h.rank), h.target, h.fabric_ip, h.fabric_iface, ",".join(h.ib_hca), str(h.gid_index)]
            for h in cfg.by_rank()]
    lines.append(table(rows, ["RANK", "SSH TARGET", "FABRIC IP", "IFACE", "HCA", "GID"]))
    path_rows = [[str(h.rank), cfg.model_path(h.rank), cfg.engram_path(h.rank), cfg.cache_path(h.rank),
                  cfg.recipe_dir(h.rank)] for h in cfg.by_rank()]
    lines += ["", table(path_rows, ["RANK", "MODEL", "ENGRAM", "CACHE", "RECIPE DIR"])]
    return "\n".join(lines)


def check(path: str | os.PathLike[str] | None = None) -> Result:
    """Load and validate cluster.toml (discovered when `path` is None) and summarise it."""
    try:
        where = discover_config(path)
        cfg = load_config(where)
    except ConfigError as exc:
        return _config_failure(exc)
    notes = config_notes(cfg)
    plural = "s" if len(cfg.hosts) != 1 else ""
    text = f"{neutralise(str(where))}: OK, {len(cfg.hosts)} host{plural}\n\n{summary(cfg)}"
    if notes:
        text += "\n\n" + "\n".join(f"note: {n}" for n in notes)
    data = {"ok": True, "path": str(where), "hosts": host_rows(cfg), "notes": notes,
            "config": cfg.model_dump(mode="json")}
    return True, text, data


def _write_failure(path: Path, exc: OSError) -> str:
    if isinstance(exc, FileExistsError):
        return f"{path} exists (use --force to replace it)"
    if isinstance(exc, IsADirectoryError):
        return f"{path} is a directory"
    return f"{path}: cannot write: {exc.strerror or exc}"


def _write_kind(exc: OSError) -> str:
    return EXISTS if isinstance(exc, FileExistsError) else IO


def import_env(env_path: str | os.PathLike[str], out_path: str | os.PathLike[str],
               force: bool = False) -> Result:
    """cluster.env -> cluster.toml (never overwrites without force; written atomically)."""
    src, dst = Path(env_path), Path(out_path)
    try:
        values = parse_env(read_text_file(src, "cluster.env"), src)
        cfg = config_from_env(values, src)
    except ConfigError as exc:
        return _config_failure(exc)
    header = (f"cluster.toml imported by r37-cockpit from {src.name}.\n"
              f"model.repo ({cfg.model.repo}) was inferred from MODEL_PATH: check it.\n"
              "SSH targets (hosts[].ssh) were set to the fabric IPs: review them, and add user/port\n"
              "where your ~/.ssh/config does not cover them.")
    try:
        write_atomic(dst, dump_config(cfg, header=header), overwrite=force)
    except OSError as exc:
        reason = _write_failure(dst, exc)
        return False, reason, {"ok": False, "path": str(dst), "problems": [{"key": "", "reason": reason}],
                               "error": _write_kind(exc)}
    notes = config_notes(cfg)
    text = f"wrote {dst} ({len(cfg.hosts)} hosts from {src})\n" + "\n".join(f"note: {n}" for n in notes)
    return True, text.rstrip("\n"), {"ok": True, "path": str(dst), "source": str(src),
                                     "hosts": host_rows(cfg), "notes": notes}


def export_env(cfg: ClusterConfig, rank: int, out_path: str | os.PathLike[str] | None = None,
               force: bool = False) -> Result:
    """One rank's cluster.env: returned as `text` when out_path is None, else written (no overwrite)."""
    if rank not in cfg.ranks:
        reason = f"no host has rank {rank} (ranks: {', '.join(map(str, sorted(cfg.ranks)))})"
        return False, reason, {"ok": False, "rank": rank, "problems": [{"key": "rank", "reason": reason}],
                               "error": CONFIG}
    text = env_for_rank(cfg, rank)
    if out_path is None:
        return True, text, {"ok": True, "rank": rank, "path": None, "env": text}
    dst = Path(out_path)
    try:
        write_atomic(dst, text, overwrite=force)
    except OSError as exc:
        reason = _write_failure(dst, exc)
        return False, reason, {"ok": False, "rank": rank, "path": str(dst),
                               "problems": [{"key": "", "reason": reason}], "error": _write_kind(exc)}
    return True, f"wrote {dst} (cluster.env for rank {rank})", {"ok": True, "rank": rank,
                                                                "path": str(dst), "env": text}


# ---- the command line ------------------------------------------------------------------------------

EXIT_FOR = {CONFIG: EXIT_USAGE, EXISTS: EXIT_REFUSED, IO: EXIT_FAILURE}
CODE_FOR = {CONFIG: "config-invalid", EXISTS: "file-exists", IO: "write-failed"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("config", help=SUMMARY["config"],
                       description="Check cluster.toml, import the recipe's cluster.env (read, never "
                                   "executed) and export one rank's cluster.env.")
    s = p.add_subparsers(dest="config_command", metavar="CONFIG_COMMAND", required=True)

    check = s.add_parser("check", help="validate a cluster.toml and print the resolved config",
                         description="Validate cluster.toml. Every problem is printed as FILE: KEY: REASON; "
                                     "exit 2 if there is any.")
    add_config_path(check)
    add_json(check)
    check.set_defaults(func=cmd_check)

    imp = s.add_parser("import-env", help="write cluster.toml from the recipe's cluster.env",
                       description="Read a cluster.env WITHOUT executing it (assignments and the NODE_IPS "
                                   "array only; command substitution and expansions are refused) and "
                                   "write cluster.toml: to -o/--out, else to the --config PATH, else "
                                   "./cluster.toml. Never overwrites without --force (exit 3).")
    imp.add_argument("env", type=Path, help="the cluster.env to read")
    imp.add_argument("-o", "--out", type=Path, default=None, metavar="FILE",
                     help="the cluster.toml to write (default: --config PATH when given, else "
                          "./cluster.toml)")
    imp.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                     help="the cluster.toml to write when -o/--out is not given (also accepted before the "
                          "command)")
    imp.add_argument("--force", action="store_true", help="replace an existing output file")
    add_json(imp)
    imp.set_defaults(func=cmd_import)

    exp = s.add_parser("export-env", help="write one rank's cluster.env from cluster.toml",
                       description="Print (or write with -o/--out) one rank's cluster.env, every value "
                                   "quoted safely. Never overwrites without --force (exit 3).")
    add_config_path(exp)
    exp.add_argument("--rank", type=int, required=True, metavar="N",
                     help="the rank whose cluster.env to write")
    exp.add_argument("-o", "--out", type=Path, default=None, metavar="FILE",
                     help="file to write (default: stdout)")
    exp.add_argument("--force", action="store_true", help="replace an existing output file")
    add_json(exp)
    exp.set_defaults(func=cmd_export)


CONFIG_PATH_HELP = ("the cluster.toml to read, the same as --config PATH (default: ./cluster.toml, then "
                    "$XDG_CONFIG_HOME/r37-cockpit/cluster.toml)")
CONFIG_OPTION_HELP = "the cluster.toml to read, the same as PATH (also accepted before the command)"


def add_config_path(parser: argparse.ArgumentParser) -> None:
    """The cluster.toml a `config` subcommand reads: `--config PATH` (as for every command) or, the same,
    a positional `PATH`."""
    parser.add_argument("path", nargs="?", default=None, metavar="PATH", help=CONFIG_PATH_HELP)
    parser.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS, help=CONFIG_OPTION_HELP)


def resolve_config_path(args: argparse.Namespace) -> None:
    """The positional PATH and `--config` are one option: whichever was given becomes `args.config`
    (used by every later step and quoted in remedies); both, naming different files, is a usage error."""
    positional, option = getattr(args, "path", None), getattr(args, "config", None)
    if positional and option and Path(positional) != Path(option):
        raise usage_error(f"two configs given: PATH {positional} and --config {option}: give one")
    args.config = positional or option


def _emit(ok: bool, text: str, data: dict, as_json: bool) -> int:
    """Print the result (text neutralised: a path or key of a hostile file may hold escapes)."""
    if as_json:
        if not ok:   # the stable error code beside the kind (cockpit.errorcodes)
            data.setdefault("code", CODE_FOR.get(data.get("error", CONFIG), "config-invalid"))
        print_json(data)
    elif ok:
        text = neutralise_block(text)
        print(text, end="" if text.endswith("\n") else "\n")
    else:
        print(neutralise_block(text), file=sys.stderr)
    return EXIT_OK if ok else EXIT_FOR.get(data.get("error", CONFIG), EXIT_FAILURE)


def cmd_check(args: argparse.Namespace) -> int:
    resolve_config_path(args)
    ok, text, data = check(args.config)
    return _emit(ok, text, data, args.json)


def cmd_import(args: argparse.Namespace) -> int:
    out = args.out or Path(getattr(args, "config", None) or "cluster.toml")
    ok, text, data = import_env(args.env, out, force=args.force)
    return _emit(ok, text, data, args.json)


def cmd_export(args: argparse.Namespace) -> int:
    resolve_config_path(args)
    _, config = load(args)
    ok, text, data = export_env(config, args.rank, args.out, force=args.force)
    return _emit(ok, text, data, args.json)
