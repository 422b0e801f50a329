"""`r37-cockpit sim …` and `r37-cockpit demo`: the simulated cluster."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from cockpit.cli.commands import SUMMARY
from cockpit.cli.common import (
    EXIT_FAILURE,
    EXIT_REFUSED,
    EXIT_USAGE,
    CliError,
    add_json,
    print_json,
    table,
)
from cockpit.locations import sim_dir
from cockpit.safetext import safe


def default_dir() -> Path:
    return sim_dir()


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("sim", help=SUMMARY["sim"],
                       description="The simulated GB10 cluster (2 to 16 hosts, four by default): stand-in "
                                   "host tools, a simulated R37 engine, reachable over real SSH.")
    s = p.add_subparsers(dest="sim_command", metavar="SIM_COMMAND", required=True)

    up = s.add_parser("up", help="start a simulated cluster in the background",
                      description="Start a simulated cluster and write DIR/cluster.toml, an identity key, "
                                  "known_hosts and ssh_config for it.")
    up.add_argument("--lab", action="store_true",
                    help="network-namespace lab with real OpenSSH sshd (root, Linux)")
    up.add_argument("--dir", type=Path, default=None, help=f"cluster directory (default {default_dir()})")
    up.add_argument("--speed", type=float, default=None,
                    help="boot time compression of the simulated engine (default: a boot takes ~20 s)")
    up.add_argument("--engine", choices=("sim", "vllm"), default="sim",
                    help="rank 0's engine: the simulated one (default) or the real vLLM (its CPU build, "
                         "installed by scripts/vllm-venv.sh) on a tiny local model; the workers stay "
                         "simulated")
    add_hosts(up)
    add_json(up)
    up.set_defaults(func=cmd_up)

    down = s.add_parser("down", help="stop what `sim up` started and remove its namespaces")
    down.add_argument("--dir", type=Path, default=None)
    add_json(down)
    down.set_defaults(func=cmd_down)

    fault = s.add_parser("fault", help="switch a fault on for one host",
                         description="Switch a fault on for one simulated host.")
    fault.add_argument("rank", type=int)
    fault.add_argument("name", help="fault name (see `sim faults`)")
    fault.add_argument("--dir", type=Path, default=None)
    fault.add_argument("--params", default=None, metavar="JSON",
                       help='the fault\'s JSON params, e.g. \'{"rank_idle": 2}\' for tp-deadlock')
    fault.set_defaults(func=cmd_fault, on=True)

    heal = s.add_parser("heal", help="switch one fault (or all) off for one host")
    heal.add_argument("rank", type=int)
    heal.add_argument("name", nargs="?", default=None)
    heal.add_argument("--dir", type=Path, default=None)
    heal.set_defaults(func=cmd_fault, on=False)

    faults = s.add_parser("faults", help="list the fault switches and which are on")
    faults.add_argument("--dir", type=Path, default=None)
    add_json(faults)
    faults.set_defaults(func=cmd_faults)

    info = s.add_parser("info", help="the simulated engine's timing schedule (and the cluster's host count)")
    info.add_argument("--dir", type=Path, default=None)
    add_json(info)
    info.set_defaults(func=cmd_info)

    engine = s.add_parser("engine", help="serve an already-booted simulated engine alone")
    engine.add_argument("--port", type=int, required=True)
    engine.add_argument("--bind", default="127.0.0.1")
    engine.set_defaults(func=cmd_engine)


def add_hosts(p: argparse.ArgumentParser) -> None:
    from cockpit.sim.size import DEFAULT_HOSTS, MAX_HOSTS, MIN_HOSTS
    p.add_argument("--hosts", type=int, default=DEFAULT_HOSTS, metavar="N",
                   help=f"number of simulated hosts, ranks 0..N-1 ({MIN_HOSTS} to {MAX_HOSTS}; "
                        f"default {DEFAULT_HOSTS})")


def host_count(args: argparse.Namespace) -> int:
    """--hosts, or a usage error naming the range."""
    from cockpit.sim.size import BadHostCount, check_host_count
    try:
        return check_host_count(args.hosts)
    except BadHostCount as exc:
        raise CliError(str(exc), EXIT_USAGE, "usage") from None


def _dir(args: argparse.Namespace) -> Path:
    return (args.dir or Path(os.environ.get("R37_SIM_DIR", default_dir()))).expanduser()


def _check_demo_dir(directory: Path) -> None:
    """The demo's per-host paths lie inside DIR: refuse a DIR its cluster.toml could not hold."""
    from cockpit.config import host_path
    from cockpit.sim.cluster import host_root
    try:
        host_path(str(host_root(directory.resolve(), 0) / "srv" / "models"))
    except ValueError as exc:
        raise CliError(f"--dir {safe(directory)} cannot hold a simulated cluster: {safe(exc)}",
                       EXIT_USAGE, "usage") from None


def cmd_up(args: argparse.Namespace) -> int:
    from cockpit.sim import cluster
    directory = _dir(args)
    n = host_count(args)
    kwargs: dict[str, Any] = {"speed": args.speed} if args.speed else {}
    if args.engine != "sim":
        kwargs["engine"] = args.engine
    if not args.lab:
        _check_demo_dir(directory)
    try:
        if args.lab:
            from cockpit.sim.lab import lab_up
            toml = lab_up(directory, n=n, **kwargs)
        else:
            toml = cluster.demo_up(directory, n=n, **kwargs)
    except cluster.DirInUse as exc:
        raise CliError(safe(exc), EXIT_REFUSED, "file-exists") from None
    except cluster.SimError as exc:
        raise CliError(str(exc)) from None
    if args.json:
        print_json({"dir": str(directory), "config": str(toml), "kind": "lab" if args.lab else "demo",
                    "hosts": n, "engine": args.engine})
    else:
        real = "; rank 0 runs the real vLLM (CPU, tiny model)" if args.engine == "vllm" else ""
        print(f"simulated cluster up ({'lab' if args.lab else 'demo'}, {n} hosts, ranks 0-{n - 1}){real}; "
              f"config: {toml}")
        print(f"  r37-cockpit --config {toml} hosts")
        print(f"  ssh -F {directory / 'ssh_config'} spark-0")
        print(f"  r37-cockpit sim down --dir {directory}")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    from cockpit.sim import cluster
    try:
        stopped = cluster.down(_dir(args))
    except cluster.SimError as exc:
        raise CliError(str(exc)) from None
    kept = [s for s in stopped if s.startswith("kept ")]
    stopped = [s for s in stopped if not s.startswith("kept ")]
    if args.json:
        print_json({"stopped": stopped, "kept": kept})
    else:
        print(f"simulated cluster down; stopped {len(stopped)} item(s)")
        for note in kept:
            print(f"  {safe(note)}")
    return 0



def _root(args: argparse.Namespace) -> Path:
    from cockpit.sim.cluster import host_root, host_roots
    root = host_root(_dir(args), args.rank)
    if root not in host_roots(_dir(args)):
        if _dir(args).is_dir() and host_root(_dir(args), 0).is_dir():
            raise CliError(f"no simulated host of rank {args.rank} in {_dir(args)}", EXIT_USAGE)
        raise CliError(f"no simulated cluster in {_dir(args)} (is it up? `r37-cockpit sim up`)", EXIT_FAILURE)
    return root


def cmd_fault(args: argparse.Namespace) -> int:
    from cockpit.sim import faults, layout
    root = _root(args)
    names = [args.name] if args.name else (layout.active_faults(root) if not args.on else [])
    params = None
    if getattr(args, "params", None):
        try:
            params = json.loads(args.params)
        except ValueError as exc:
            raise CliError(f"--params: not JSON: {exc}", EXIT_USAGE) from None
        if not isinstance(params, dict):
            raise CliError("--params: a JSON object is needed", EXIT_USAGE)
    for name in names:
        try:
            faults.set_fault(root, name, args.on, params)
        except ValueError as exc:
            raise CliError(str(exc), EXIT_USAGE) from None
    state = ", ".join(layout.active_faults(root)) or "none"
    print(f"rank {args.rank}: faults on: {state}")
    return 0


def cmd_faults(args: argparse.Namespace) -> int:
    from cockpit.sim import faults, layout
    from cockpit.sim.cluster import host_roots
    roots = host_roots(_dir(args)) if _dir(args).is_dir() else []
    active = {int(r.name.split("-")[1]): layout.active_faults(r) for r in roots}
    if args.json:
        print_json({"faults": faults.DESCRIPTIONS, "params": faults.PARAMS, "active": active,
                    "ranks": sorted(active)})
        return 0
    if active:
        print(f"{len(active)} hosts in {safe(_dir(args))} (ranks 0-{max(active)}); "
              "`sim fault RANK NAME` switches one on")
    for name, text in faults.DESCRIPTIONS.items():
        on = [str(rank) for rank, names in active.items() if name in names]
        print(f"{name:18} {text}" + (f"  [on: rank {', '.join(on)}]" if on else ""))
        for key, what in faults.PARAMS.get(name, {}).items():
            print(f"{'':18}   --params '{{\"{key}\": …}}': {what}")
    return 0


def cmd_info(args: argparse.Namespace) -> int:
    from cockpit.sim.cluster import host_roots
    from cockpit.sim.engine import schedule_info
    info = schedule_info()
    roots = host_roots(_dir(args)) if _dir(args).is_dir() else []
    if roots:
        info = {"cluster": {"dir": str(_dir(args)), "hosts": len(roots)}, **info}
    if args.json:
        print_json(info)
    else:
        print(info_text(info))
    return 0


def _num(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


CELLS = ("2", "4", "8")   # the aggregate columns: the card's decode cells beyond one stream


def _by_category(info: dict[str, Any]) -> str:
    """Per category: tokens per step, acceptance rate, single-stream and after-idle decode, and the
    aggregate decode of the card's cells (`--json` has every concurrency)."""
    model = info.get("model", {})
    per_step, accept = model.get("tokens_per_step", {}), model.get("acceptance_rate", {})
    single, idle = info.get("single_stream_tok_s", {}), info.get("after_idle_tok_s", {})
    aggregate: dict[str, dict[str, object]] = info.get("aggregate_tok_s", {})
    streams = [n for n in sorted({n for row in aggregate.values() for n in row}, key=int) if n in CELLS]
    rows = [[c, _num(per_step.get(c, "-")), _num(accept.get(c, "-")), _num(single.get(c, "-")),
             _num(idle.get(c, "-")), *(_num(aggregate.get(c, {}).get(n, "-")) for n in streams)]
            for c in dict.fromkeys([*per_step, *single, *aggregate])]
    return table(rows, ["CATEGORY", "TOKENS/STEP", "ACCEPTED", "1 STREAM", "AFTER IDLE",
                        *(f"C={n}" for n in streams)])


SHOWN = ("cluster", "model", "single_stream_tok_s", "after_idle_tok_s", "aggregate_tok_s", "step_time_s",
         "tokenizer", "settings")


def info_text(info: dict[str, Any]) -> str:
    """`sim info` for a reader: the engine's timing model, a decode table per category (tok/s; C=N is
    the aggregate of N streams), the step time per batch size and the tokenizer. `--json` has it all."""
    m = info.get("model", {})
    lines = []
    if "cluster" in info:
        lines.append(f"cluster     {safe(info['cluster'].get('dir'))}: {info['cluster'].get('hosts')} hosts")
    lines += [
        f"step time   {m.get('step_time_s')}: base_s {_num(m.get('base_s'))} s, per_seq_s "
        f"{_num(m.get('per_seq_s'))} s; spec_k {m.get('spec_k')}",
        f"prefill     {_num(m.get('prefill_tok_s'))} tok/s, max batched tokens {m.get('max_batched_tokens')}",
        f"ttft        {m.get('ttft')}",
        f"idle        after {_num(m.get('idle_after_s'))} s idle the next request is "
        f"{_num(m.get('idle_factor'))}x faster",
        f"noise       jitter {_num(m.get('jitter'))}, seed {m.get('seed')}, "
        f"time scale {_num(m.get('time_scale'))}",
        "",
        "decode tok/s by category (C=N: the aggregate of N streams; every N in --json)",
        _by_category(info),
    ]
    steps: dict[str, object] = info.get("step_time_s", {})
    if steps:
        lines += ["", "step time by running sequences (s)",
                  table([[_num(v) for v in steps.values()]], [f"N={n}" for n in steps])]
    if "tokenizer" in info:
        lines += ["", f"tokenizer   {info['tokenizer']}"]
    for key, value in info.items():   # anything newer than this table: shown, not lost
        if key not in SHOWN:
            lines.append(f"{key}: {json.dumps(value, default=str)}")
    return "\n".join(lines)


def cmd_engine(args: argparse.Namespace) -> int:
    from cockpit.sim.engine import main as engine_main
    return int(engine_main(["serve-ready", "--port", str(args.port), "--bind", args.bind]) or 0)
