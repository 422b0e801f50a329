"""`r37-cockpit serve`: the cockpit in a web browser (textual-serve), one `tui` process per browser tab."""

from __future__ import annotations

import argparse
import errno
import shlex
import sys
from pathlib import Path

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import EXIT_USAGE, CliError, load
from cockpit.loopback import is_loopback

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 3  # cockpit.tui.web.server's (not imported here: the parser stays light)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("serve", help=SUMMARY["serve"],
                       description="Serve the cockpit to a web browser: each browser tab runs its own "
                                   "`r37-cockpit tui` with this command's --config, --cluster and "
                                   "--read-only. Bound to 127.0.0.1; from another machine use an SSH tunnel "
                                   "(ssh -L 8000:127.0.0.1:8000 ADMIN-BOX) rather than --host 0.0.0.0. "
                                   "The URL it prints holds this run's secret: only a browser that "
                                   "opened it gets in. Ctrl-C stops it and every session.")
    p.add_argument("--host", default=DEFAULT_HOST,
                   help="address to listen on (default: 127.0.0.1; any other prints a warning)")
    p.add_argument("--port", type=_port, default=DEFAULT_PORT, help="TCP port (default: 8000)")
    p.add_argument("--max-sessions", type=_sessions, default=DEFAULT_MAX_SESSIONS,
                   help=f"browser sessions open at once, each a TUI with its own SSH connections "
                        f"(default: {DEFAULT_MAX_SESSIONS})")
    p.set_defaults(func=run_serve)


def _sessions(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 1 <= n <= 64:
        raise argparse.ArgumentTypeError(f"{n} is not between 1 and 64")
    return n


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} is not between 1 and 65535")
    return port


def tui_argv(configs: list[Path], read_only: bool, cluster: str | None = None) -> list[str]:
    """The command each browser session runs: this cockpit's own TUI on the same config files, cluster
    and mode."""
    argv = [sys.executable, "-m", "cockpit"]
    for config in configs:
        argv += ["--config", str(config)]
    if cluster is not None:
        argv += ["--cluster", cluster]
    return [*argv, *(["--read-only"] if read_only else []), "tui"]


def exposure_warning(host: str, port: int) -> str | None:
    """The warning printed when the cockpit would be reachable from the network, or None on loopback."""
    if is_loopback(host):
        return None
    return (f"warning: serving on {host}, not 127.0.0.1: anyone who can reach port {port} of this machine "
            f"gets the cockpit, with control of every host in cluster.toml and the engine's API and no "
            f"login. Prefer the default and an SSH tunnel from your machine: "
            f"ssh -L {port}:127.0.0.1:{port} THIS-HOST, then open http://127.0.0.1:{port}/")


def url(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host
    return f"http://[{shown}]:{port}/" if ":" in shown else f"http://{shown}:{port}/"


def run_serve(args: argparse.Namespace) -> int:
    import asyncio

    from cockpit.tui.web.server import CockpitServer
    path, config = load(args)  # a broken cluster.toml fails here, not in every browser tab
    given = [Path(p).resolve() for p in getattr(args, "config_files", None) or ()]  # every --config
    # `exec`: textual-serve runs it through /bin/sh, and the server stops the TUI, not only the shell
    command = "exec " + shlex.join(tui_argv(given or [path.resolve()], config.ui.read_only,
                                  getattr(args, "cluster", None)))
    warning = exposure_warning(args.host, args.port)
    if warning:
        print(f"r37-cockpit: {warning}", file=sys.stderr, flush=True)

    server = CockpitServer(command, args.host, args.port, max_sessions=args.max_sessions)
    try:
        sock = server.listen()   # bound before "serving … on" is printed: a port in use fails first
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise CliError(f"port {args.port} on {args.host} is in use (another `serve`, or another "
                           f"program): choose another with --port", EXIT_USAGE, "port-in-use") from None
        raise CliError(f"cannot listen on {args.host} port {args.port}: {exc.strerror or exc}",
                       EXIT_USAGE, "usage") from None
    mode = " (read-only)" if config.ui.read_only else ""
    # the one place the secret is shown: this run's URL, on this terminal only
    print(f"serving the cockpit{mode} for {path} on {server.secret_url(url(args.host, args.port))} "
          f"— open this URL (it holds this run's secret); Ctrl-C stops it", flush=True)
    asyncio.set_event_loop(asyncio.new_event_loop())
    server.serve_on(sock)
    return 0
