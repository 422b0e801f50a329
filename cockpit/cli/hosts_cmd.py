"""`r37-cockpit hosts`: connect to every host and report state, latency, hostname and host key;
`hosts trust`: add one host key the operator verified to known_hosts."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import asdict, replace

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_REFUSED,
    CliError,
    add_json,
    check_ranks,
    load,
    print_json,
    remedy,
    run_async,
    table,
)
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet, HostState, HostStatus, known_hosts
from cockpit.hosts.sshconfig import resolve
from cockpit.safetext import neutralise, safe

REFUSED_CODES = {"ssh-config-unsafe", "fingerprint-mismatch", "host-key-changed", "host-key-revoked"}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("hosts", help=SUMMARY["hosts"],
                       description="Connect to every host over SSH in parallel and report state, SSH "
                                   "latency, remote hostname and host key fingerprint. Exit 1 if any host "
                                   "is not connected. Host keys are always checked against known_hosts "
                                   "([ssh] known_hosts, else UserKnownHostsFile of ~/.ssh/config, else "
                                   "~/.ssh/known_hosts); a setting that would turn the check off is refused.")
    add_json(p)
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for the hosts (default: ssh.connect_timeout + 2)")
    p.set_defaults(func=run)
    hsub = p.add_subparsers(dest="hosts_command", metavar="SUBCOMMAND")
    t = hsub.add_parser("trust", help="add a host key you verified to known_hosts",
                        description="Read the host key rank N offers, and if its fingerprint is the one "
                                    "given (verified with the host's administrator), append one line for "
                                    "it to the known_hosts file the cockpit checks. Refuses a key that "
                                    "differs from the one known_hosts holds, or one marked @revoked. "
                                    "Never rewrites the file; never trusts a key unseen.")
    add_json(t)
    t.add_argument("--rank", type=int, required=True, help="the host's rank")
    t.add_argument("--fingerprint", required=True, metavar="SHA256:…",
                   help="the SHA256 fingerprint you verified (as `r37-cockpit hosts` shows it)")
    t.add_argument("--yes", action="store_true", help="append without asking")
    t.add_argument("--timeout", type=float, default=None,
                   help="seconds to wait for the host key (default: ssh.connect_timeout)")
    t.set_defaults(func=run_trust)


def _settled(s: HostStatus) -> bool:
    return s.connected or s.down


async def probe(config: ClusterConfig, timeout: float) -> list[HostStatus]:
    """Connect to all hosts at once; return each host's state once it settled or the time is up."""
    async with Fleet(config) as fleet:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(_settled(s) for s in fleet.statuses):
                break
            await asyncio.sleep(0.05)
        return [_settle(s, timeout) for s in fleet.statuses]


def _settle(s: HostStatus, waited: float) -> HostStatus:
    """A host still connecting when the time is up did not answer: say so, with what to check."""
    if s.state is not HostState.CONNECTING:
        return s
    return replace(s, state=HostState.TIMEOUT, error=f"no answer within {waited:g} s",
                   remedy="check that the host is up and reachable; raise --timeout for slow links")


def status_dict(s: HostStatus) -> dict[str, object]:
    d = asdict(s)
    d["state"] = s.state.value
    d["code"] = s.code
    d["known_fingerprints"] = list(s.known_fingerprints)
    return d


def run(args: argparse.Namespace) -> int:
    _, config = load(args)
    timeout = args.timeout if args.timeout is not None else config.ssh.connect_timeout + 2
    statuses = run_async(probe(config, timeout))
    if args.json:
        print_json({"hosts": [{**status_dict(s), "remedy": remedy(args, s.remedy) if s.remedy else None}
                              for s in statuses],
                    "connected": sum(s.connected for s in statuses), "total": len(statuses)})
    else:
        rows = [[str(s.rank), safe(s.target, 200), s.state.value,
                 f"{s.latency_ms:.1f} ms" if s.latency_ms is not None else "-",
                 safe(s.hostname, 200) if s.hostname else "-", s.fingerprint or "-"] for s in statuses]
        print(table(rows, ["RANK", "TARGET", "STATE", "LATENCY", "HOSTNAME", "HOST KEY"]))
        for s in statuses:
            if not s.connected:
                print(f"rank {s.rank}: [{s.code or s.state.value}] {safe(s.error or s.state.value)}")
                for old in s.known_fingerprints:  # a changed key: the old one(s) and the new one
                    print(f"  known_hosts holds: {neutralise(old)}")
                if s.known_fingerprints and s.fingerprint:
                    print(f"  host offers:       {neutralise(s.fingerprint)}")
                if s.remedy:
                    print(f"  remedy: {safe(remedy(args, s.remedy))}")
    return EXIT_OK if all(s.connected for s in statuses) else EXIT_FAILURE


# ---- hosts trust -------------------------------------------------------------------------------------


def _confirm(question: str) -> bool:
    if not sys.stdin.isatty():
        raise CliError("refusing to change known_hosts without confirmation: add --yes", EXIT_REFUSED,
                       "needs-confirmation")
    return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")


def run_trust(args: argparse.Namespace) -> int:
    _, config = load(args)
    check_ranks(config, [args.rank])
    entry = next(h for h in config.hosts if h.rank == args.rank)
    policy = resolve(entry, config.ssh)
    timeout = args.timeout if args.timeout is not None else config.ssh.connect_timeout
    try:
        plan = run_async(known_hosts.plan_trust(policy, entry.ssh, entry.port, args.fingerprint, timeout))
    except known_hosts.TrustRefused as exc:
        text = safe(exc) + (f"; what to do: {exc.remedy}" if exc.remedy else "")
        raise CliError(text, EXIT_REFUSED if exc.code in REFUSED_CODES else EXIT_FAILURE, exc.code) from None
    base = {"rank": entry.rank, "target": entry.target, "fingerprint": args.fingerprint}
    if plan is None:
        if args.json:
            print_json({"ok": True, **base, "appended": False, "file": policy.write_file,
                        "message": "the key is trusted already"})
        else:
            print(f"rank {entry.rank}: {neutralise(args.fingerprint)} is trusted already; nothing written")
        return EXIT_OK
    what = (f"append to {plan.file}" + (" (a new file, mode 0600)" if plan.creates else "")
            + f":\n    {plan.line}")
    if not args.json:
        print(f"rank {entry.rank} ({safe(entry.target)}) offers {plan.fingerprint}, the fingerprint given.")
        print(f"will {what}")
    if not args.yes and (args.json or not _confirm("Append this line?")):
        raise CliError(f"not confirmed: would {what}", EXIT_REFUSED, "needs-confirmation")
    known_hosts.append_line(plan.file, plan.line)
    if args.json:
        print_json({"ok": True, **base, "appended": True, "file": plan.file, "line": plan.line,
                    "created": plan.creates})
    else:
        print(f"appended 1 line to {plan.file}; `r37-cockpit hosts` now connects to rank {entry.rank}")
    return EXIT_OK
