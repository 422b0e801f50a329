"""`r37-cockpit hosts`: connect to every host and report state, latency, hostname and host key."""

from __future__ import annotations

import argparse
import asyncio
import time
from dataclasses import asdict, replace

from cockpit.cli.common import EXIT_FAILURE, EXIT_OK, add_json, load, print_json, remedy, run_async, table
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet, HostState, HostStatus

SETTLED = {HostState.CONNECTED, HostState.UNREACHABLE, HostState.KEY_REFUSED, HostState.AUTH_FAILED}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("hosts", help="connect to every host and report its state",
                       description="Connect to every host over SSH in parallel and report state, SSH "
                                   "latency, remote hostname and host key fingerprint. Exit 1 if any host "
                                   "is not connected.")
    add_json(p)
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for the hosts (default: ssh.connect_timeout + 2)")
    p.set_defaults(func=run)


async def probe(config: ClusterConfig, timeout: float) -> list[HostStatus]:
    """Connect to all hosts at once; return each host's state once it settled or the time is up."""
    async with Fleet(config) as fleet:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(s.state in SETTLED for s in fleet.statuses):
                break
            await asyncio.sleep(0.05)
        return [_settle(s, timeout) for s in fleet.statuses]


def _settle(s: HostStatus, waited: float) -> HostStatus:
    """A host still connecting when the time is up did not answer: say so, with what to check."""
    if s.state is not HostState.CONNECTING:
        return s
    return replace(s, state=HostState.UNREACHABLE, error=f"no answer within {waited:g} s",
                   remedy="check that the host is up and reachable; raise --timeout for slow links")


def status_dict(s: HostStatus) -> dict[str, object]:
    d = asdict(s)
    d["state"] = s.state.value
    return d


def run(args: argparse.Namespace) -> int:
    _, config = load(args)
    timeout = args.timeout if args.timeout is not None else config.ssh.connect_timeout + 2
    statuses = run_async(probe(config, timeout))
    if args.json:
        print_json({"hosts": [{**status_dict(s), "remedy": remedy(args, s.remedy)} for s in statuses],
                    "connected": sum(s.connected for s in statuses), "total": len(statuses)})
    else:
        rows = [[str(s.rank), s.target, s.state.value,
                 f"{s.latency_ms:.1f} ms" if s.latency_ms is not None else "-",
                 s.hostname or "-", s.fingerprint or "-"] for s in statuses]
        print(table(rows, ["RANK", "TARGET", "STATE", "LATENCY", "HOSTNAME", "HOST KEY"]))
        for s in statuses:
            if not s.connected:
                print(f"rank {s.rank}: {s.error or s.state.value}")
                if s.remedy:
                    print(f"  remedy: {remedy(args, s.remedy)}")
    return EXIT_OK if all(s.connected for s in statuses) else EXIT_FAILURE
