"""Every top-level command: the module that registers and runs it, and its one-line summary, in help
order. The CLI imports a command's module only when that command runs (or its own `--help` is asked
for), so `r37-cockpit --help` and `--version` start without importing the cockpit's layers, and a
headless command pays only for what it uses (perf/startup.py)."""

from __future__ import annotations

# command -> (module under cockpit.cli, summary shown by `r37-cockpit --help` and the command's help)
COMMANDS: dict[str, tuple[str, str]] = {
    "tui": ("tui_cmd", "open the cockpit (the default command)"),
    "demo": ("tui_cmd", "start a simulated cluster, open the cockpit on it, stop it on exit"),
    "config": ("config_cmd", "check, import and export cluster.toml"),
    "hosts": ("hosts_cmd", "connect to every host and report its state"),
    "preflight": ("preflight_cmd", "check every host against the recipe (changes nothing)"),
    "setup": ("setup_cmd", "run a setup job on the hosts (download, load, prepare; asks first)"),
    "launch": ("launch_cmd", "dry-run, then launch ranks N-1 … 1 and 0; follow until the API is up"),
    "stop": ("launch_cmd", "stop the containers this cockpit started, head first"),
    "status": ("status_cmd", "per-rank container state, phase and API readiness (read-only)"),
    "logs": ("logs_cmd", "print the container logs of the ranks, merged by time"),
    "chat": ("chat_cmd", "send one prompt to the model and stream the answer"),
    "smoke": ("chat_cmd", "run the recipe's smoke test against the API"),
    "bench": ("bench_cmd", "benchmark the deployment by the card's method"),
    "stats": ("stats_cmd", "GPU, memory, RDMA and engine stats of every rank, and their alerts"),
    "fabric": ("fabric_cmd", "test the RDMA fabric between ranks with perftest (bandwidth and latency)"),
    "report": ("report_cmd", "write a redacted support bundle (tar.gz) for a bug report"),
    "history": ("history_cmd", "the commands past cockpit sessions ran on the hosts"),
    "events": ("events_cmd", "what happened to the cluster, in order, from its recording"),
    "replay": ("replay_cmd", "open the cockpit read-only on the cluster's recording, with a replay clock"),
    "sim": ("sim_cmd", "start, stop and break the simulated GB10 cluster"),
    "serve": ("serve_cmd", "serve the cockpit in a web browser (on 127.0.0.1 by default)"),
    "ssh": ("ssh_cmd", "open a shell on a host (or in its container) with the cockpit's SSH settings"),
}
SUMMARY: dict[str, str] = {name: summary for name, (_module, summary) in COMMANDS.items()}
