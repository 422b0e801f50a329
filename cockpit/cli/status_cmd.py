"""`status`: one look of the live model (read-only, also for a cluster launched by hand), printed as a
table of ranks, the API and the verdict, or `--json`. Its own module, so that it imports only what a look
needs (not the launch, stop, lock and preflight code): it is the command run most often.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_OK,
    add_json,
    connected_fleet,
    load,
    print_json,
    remedy,
    run_async,
    table,
)
from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe.ledger import Ledger
from cockpit.recipe.phases import Phase
from cockpit.recipe.status import StatusReport, cluster_status
from cockpit.recipe.stuck import StuckReport
from cockpit.safetext import safe

if TYPE_CHECKING:
    from cockpit.recipe.recording import Recording


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    s = sub.add_parser("status", help=SUMMARY["status"],
                       description="Container state, boot phase (from the log tail) and API readiness of "
                                   "every rank; changes nothing, also for a cluster launched by hand. Exit 0 "
                                   "when the cluster is ready and the engine not hung, 1 otherwise.")
    add_json(s)
    s.add_argument("--watch-engine", type=float, default=0.0, metavar="S",
                   help="also sample the engine's /metrics for S seconds to tell serving from hung")
    s.add_argument("--stacks", action="store_true",
                   help="when the engine is hung, also read the engine's Python stacks on every rank "
                        "(`py-spy dump` inside the container, read-only, when the image has py-spy)")
    s.set_defaults(func=run_status)



def run_status(args: argparse.Namespace) -> int:
    _, cfg = load(args)
    ledger = Ledger(cfg)
    report = run_async(_status(cfg, args.watch_engine, ledger, stacks=args.stacks))
    notices = ledger.pop_warnings()
    if args.json:
        data = report.to_dict()
        data["warnings"] = [{"code": n.code, "message": n.message} for n in notices]
        data["verdict"]["remedy"] = remedy(args, data["verdict"]["remedy"])
        for r in data["ranks"]:
            if r["failure"]:
                r["failure"]["remedy"] = remedy(args, r["failure"]["remedy"])
        if data["stuck"]:
            data["stuck"]["remedy"] = remedy(args, data["stuck"]["remedy"])
        print_json(data)
    else:
        for n in notices:
            print(f"warning: {safe(n.message)}", file=sys.stderr)
        print(remedy(args, status_text(report, cfg)))
    return EXIT_OK if report.ok else EXIT_FAILURE


async def _status(cfg: ClusterConfig, watch_engine: float = 0.0,
                  ledger: Ledger | None = None, stacks: bool = False) -> StatusReport:
    async with Fleet(cfg) as fleet:
        await connected_fleet(fleet, cfg)
        context: AbstractContextManager[Recording | None] = nullcontext()
        if watch_engine > 0:
            from cockpit.recipe.recording import recorded  # the recording: only when it watches
            context = recorded(cfg, "status --watch-engine")
        with context as recording:
            return await cluster_status(fleet, cfg, ledger, watch_engine=watch_engine, recording=recording,
                                        stacks=stacks)


def status_text(report: StatusReport, cfg: ClusterConfig) -> str:
    rows = []
    for r in report.ranks:
        c = r.container
        state = c.status if c else "-"
        exit_ = str(c.exit_code) + (" OOM" if c.oom_killed else "") if c and c.ended else "-"
        prog = f"{r.progress[0]}/{r.progress[1]}" if r.progress and r.phase is Phase.LOADING else ""
        rows.append([str(r.rank), r.target, r.host, c.short_id if c else "-", state, exit_, r.owner,
                     r.condition.upper() if r.condition in ("failed", "unknown") else r.condition,
                     r.phase_text if c and r.condition != "stopped" else "-", prog])
    out = [table(rows, ["RANK", "TARGET", "HOST", "CONTAINER", "STATE", "EXIT", "STARTED BY", "RANK IS",
                        "PHASE", "PROGRESS"])]
    out.append(f"API: {report.api.message}" + (f" — engine {report.engine}" if report.engine != "unknown"
                                                else ""))
    out.append(report.verdict.summary)
    if report.verdict.remedy and report.verdict.state != "ready":
        out.append(f"what to do: {report.verdict.remedy}")
    if report.stuck is not None:
        out.append(stuck_text(report.stuck))
    for r in report.ranks:
        if r.condition == "stopped" and "killed" in r.detail:
            out.append(f"rank {r.rank}: stopped ({r.detail})")
        if r.failure:
            out.append(f"rank {r.rank}: {r.failure.label}\n    cause: {r.failure.cause}\n"
                       f"    remedy: {r.failure.remedy}")
    if any(r.owner == "by hand" for r in report.ranks):
        out.append(f"containers marked 'by hand' were not started by this cockpit: shown read-only; "
                   f"`r37-cockpit stop` never stops them ({cfg.cluster.container_name})")
    return "\n".join(out)


def stuck_text(stuck: StuckReport) -> str:
    """The per-rank evidence of a hung engine as `status` prints it (the rank that differs marked)."""
    rows = [[("> " if e.rank in stuck.odd else "  ") + str(e.rank), e.load,
             "-" if e.util is None else f"{e.util} %", "-" if e.sm_mhz is None else f"{e.sm_mhz} MHz",
             "-" if e.rdma_moving is None else ("moving" if e.rdma_moving else "still"),
             "-" if e.last_line_age_s is None else f"{e.last_line_age_s:.0f} s ago",
             safe(e.last_line or e.note or "-", 70)] for e in stuck.ranks]
    out = ["which rank is stuck: " + stuck.reason,
           table(rows, ["RANK", "GPU", "UTIL", "SM CLOCK", "RDMA", "LAST LOG", "LAST LINE"])]
    if stuck.remedy:
        out.append(f"what to do: {stuck.remedy}")
    for e in stuck.ranks:
        st = e.stacks
        if st is None:
            continue
        if st.state != "read":
            out.append(f"rank {e.rank} stacks: {safe(st.detail or st.state)}")
            continue
        out.append(f"rank {e.rank} stacks (py-spy dump):" + "".join(f"\n    {safe(s)}" for s in st.summary))
    return "\n".join(out)
