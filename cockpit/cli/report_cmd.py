"""`r37-cockpit report [-o FILE]`: the support bundle (`cockpit.recipe.report`), redacted by default, written
atomically and never over an existing file. Exit 0 when written (parts that could not be read are listed
in it and on stderr), 2 for a bad option, 3 when FILE exists, 1 when it cannot be written."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_REFUSED,
    CliError,
    add_json,
    load,
    print_json,
    run_async,
    usage_error,
)
from cockpit.config import ClusterConfig
from cockpit.safetext import safe

DESCRIPTION = (
    "Collect what a bug report needs into one tar.gz: versions (cockpit, driver, CUDA, Docker, image ID, "
    "vLLM), cluster.toml, preflight and status as JSON, each rank's docker inspect, nvidia-smi -q, fabric "
    "facts and the log lines around its first failure, the last fabric test and the command log. Secrets "
    "are always replaced; host names, IPs and user names too unless --no-redact-hosts (consistently: the "
    "same value, the same placeholder). Read-only. Never overwrites a file (exit 3).")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help=SUMMARY["report"], description=DESCRIPTION)
    p.add_argument("-o", "--output", metavar="FILE", default=None,
                   help="where to write the archive (default: ./r37-report-CLUSTER-TIME.tar.gz)")
    p.add_argument("--no-redact-hosts", action="store_true",
                   help="keep host names, IP addresses and user names (secrets are still replaced)")
    p.add_argument("--lines", type=int, default=None, metavar="N",
                   help="log lines per rank (default 300: the lines around the first failure, else the last)")
    add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from cockpit.recipe.report import LOG_LINES, bundle_name
    path_cfg, cfg = load(args)
    lines = args.lines if args.lines is not None else LOG_LINES
    if not 1 <= lines <= 100_000:
        raise usage_error(f"--lines {lines}: give 1 to 100000")
    now = time.time()
    out = Path(args.output) if args.output else Path.cwd() / f"{bundle_name(cfg.cluster.name, now)}.tar.gz"
    if out.exists() or out.is_symlink():
        raise CliError(f"{out} exists: the report never overwrites a file; choose another -o", EXIT_REFUSED,
                       "file-exists")
    if not out.parent.is_dir():
        raise CliError(f"{out.parent} is not a directory", EXIT_FAILURE, "write-failed")
    data = run_async(_run(args, cfg, path_cfg, out, lines, now))
    if args.json:
        print_json(data)
    else:
        for problem in data["problems"]:
            print(f"r37-cockpit: not in the report: {safe(problem, 400)}", file=sys.stderr)
        print(f"wrote {safe(data['path'])} ({data['bytes']} bytes, {len(data['files'])} files; "
              + ("host names, IPs and user names redacted" if data["redacted_hosts"] else "hosts kept")
              + ", secrets redacted)")
    return EXIT_OK


async def _run(args: argparse.Namespace, cfg: ClusterConfig, path_cfg: Path, out: Path, lines: int,
               now: float) -> dict[str, Any]:
    from cockpit.hosts import Fleet
    from cockpit.locations import state_dir
    from cockpit.recipe.report import gather, redactor_for, write_bundle

    def say(text: str) -> None:
        if not args.json:
            print(f"… {text}", file=sys.stderr, flush=True)

    async with Fleet(cfg) as fleet:
        await fleet.wait_connected(cfg.ssh.connect_timeout + 5)
        bundle = await gather(fleet, cfg, path_cfg, lines=lines, state_dir=state_dir(), now=now, progress=say)
    redact_hosts = not args.no_redact_hosts
    redactor = redactor_for(cfg, bundle, redact_hosts=redact_hosts)
    try:
        written, files = write_bundle(bundle, redactor, out, redact_hosts)
    except FileExistsError:
        raise CliError(f"{out} exists: the report never overwrites a file; choose another -o", EXIT_REFUSED,
                       "file-exists") from None
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror or exc}", EXIT_FAILURE, "write-failed") from None
    return {"ok": True, "path": str(written), "bytes": written.stat().st_size, "files": files,
            "redacted_hosts": redact_hosts, "replaced": redactor.replaced, "problems": bundle.problems}
