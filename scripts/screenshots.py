"""Make the README's screenshots from the app itself: one SVG per pane, with real data.

    python scripts/screenshots.py [--out docs/screenshots]

Starts a simulated demo cluster in a temporary directory, prepares and launches it headless through the
CLI (`setup all --yes`, `launch --yes`, with their own state directory), then opens the cockpit under
Textual's pilot at 160×48 and puts each pane of `PANES` into a state worth showing: Hosts connected with a
row selected, a finished preflight, the setup plan, the ready cluster's timeline, the merged logs
following, stats sampled while an answer streams, that answer in Chat, a short bench run (the quick
suite at concurrency 1 with a 2 s idle probe), and the session's commands. Every wait has a deadline on
the model's state. Files: `<N>-<pane id>.svg` in PANES order, and `1-hosts-light.svg` in the light
theme. The cluster is stopped at the end, also on error. The SVGs are checked for this machine's paths
and host name before the run counts as done.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SIZE = (160, 48)
PROMPT = "Briefly: what should an operator check before launching the cluster?"
COMMANDS_FILTER = "pane:Preflight"
STATS_AFTER_S = 20.0   # seconds of bench load before the stats shot (their sparklines show it)
CHECKOUT = Path(__file__).resolve().parents[1]
TEXT_NODE = re.compile(r"<text[^>]*>([^<]*)</text>")


class Timeout(Exception):
    """A state the screenshot waits for did not come within its deadline."""


async def until(pilot: Any, what: str, ready: Callable[[], bool], timeout: float) -> None:
    """Let the app run until `ready()` (checked every 0.1 s); `Timeout` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not ready():
        if time.monotonic() > deadline:
            raise Timeout(f"{what}: not within {timeout:g} s")
        await pilot.pause(0.1)


def cli(config: Path, *args: str, env: dict[str, str], timeout: float) -> None:
    """`python -m cockpit --config CONFIG ARGS…` headless; its output is shown only when it fails."""
    cmd = [sys.executable, "-m", "cockpit", "--config", str(config), *args]
    print("$ r37-cockpit " + " ".join(args), flush=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-4000:])
        raise SystemExit(f"`r37-cockpit {' '.join(args)}` exited with {done.returncode}")


def leaks(text: str, forbidden: list[str]) -> list[str]:
    """What of `forbidden` the screenshot's visible text shows (Textual draws each run of cells as one
    <text> node; a non-breaking space stands for a space)."""
    shown = " ".join(TEXT_NODE.findall(text)).replace("&#160;", " ").replace("\xa0", " ")
    found = []
    for word in forbidden:
        if re.search(rf"(?<![\w.-]){re.escape(word)}(?![\w-])", shown):
            found.append(word)
    return found


def bound_key(node: Any, action: str) -> str:
    """The first key of `node`'s binding for `action`, with the app's keymap applied (what to press, where
    the key shown may be a symbol: "/" for slash)."""
    from textual.binding import BindingsMap
    bindings = BindingsMap(type(node).BINDINGS)
    if node.app.keymap:
        bindings.apply_keymap(node.app.keymap)
    for key, binding in bindings:
        if binding.action == action:
            return key
    raise Timeout(f"{type(node).__name__} has no key for {action}")


def pane_key(pane: Any, action: str) -> str:
    """The key bound to a pane's `action` now (the Pane base's `key_for`; the first of several)."""
    key: str = pane.key_for(action).split("/")[0]
    if not key:
        raise Timeout(f"{pane.TITLE}: no key for {action} now")
    return key


def forbidden_words() -> list[str]:
    """This machine's home and checkout paths and its host name: none may show in a screenshot."""
    words = {"/root", "/work", str(Path.home()), str(CHECKOUT)}
    for name in (socket.gethostname(), socket.getfqdn()):
        if name and name not in ("localhost", "localhost.localdomain"):
            words.add(name)
    return sorted(w for w in words if w and w != "/")


async def shoot(config_path: Path, out: Path, results: Path) -> list[Path]:
    """Open the cockpit on the launched cluster and save one screenshot per pane; returns the files."""
    from textual.widgets import Input

    from cockpit import __version__
    from cockpit.config import load_config
    from cockpit.recipe import history
    from cockpit.tui.app import PANES, CockpitApp
    from cockpit.tui.dialogs.confirm import ConfirmCommands
    from cockpit.tui.panes.bench import BenchPane
    from cockpit.tui.panes.chat import ChatPane
    from cockpit.tui.panes.commands import CommandsPane
    from cockpit.tui.panes.hosts import HostsPane
    from cockpit.tui.panes.launch import LaunchPane
    from cockpit.tui.panes.logs import LogsPane
    from cockpit.tui.panes.preflight import PreflightPane
    from cockpit.tui.panes.setup import SetupPane
    from cockpit.tui.panes.stats import StatsPane

    saved: list[Path] = []
    number = {pid: n for n, (pid, _) in enumerate(PANES, start=1)}

    with history.session("tui", ["--config", str(config_path), "tui"], str(config_path), __version__):
        app = CockpitApp(load_config(config_path), config_path)
        async with app.run_test(size=SIZE) as pilot:

            def save(pid: str, suffix: str = "") -> None:
                name = f"{number[pid]}-{pid}{suffix}.svg"
                app.save_screenshot(name, str(out))
                saved.append(out / name)
                print(f"saved {name}", flush=True)

            async def show(pid: str) -> Any:
                await pilot.press(f"f{number[pid]}")
                pane = app.pane(pid)
                await until(pilot, f"pane {pid} shown", lambda: pane.shown, 10)
                await pilot.pause()
                return pane

            for box in app.query(Input):
                box.cursor_blink = False        # a blinking cursor is caught on or off at random

            async def settle() -> None:
                await pilot.pause(0.3)
                await pilot.pause()

            # 1 Hosts: every host connected, the second row selected
            hosts = await show("hosts")
            assert isinstance(hosts, HostsPane)
            ranks = app.config.ranks
            await until(pilot, "every host connected",
                        lambda: len(hosts.statuses) == len(ranks)
                        and all(s.connected and s.hostname for s in hosts.statuses), 60)
            await pilot.press("down")
            await settle()
            save("hosts")
            app.theme = "cockpit-light"
            await settle()
            save("hosts", "-light")
            app.theme = "cockpit-dark"
            await settle()

            # 2 Preflight: a run finished
            preflight = await show("preflight")
            assert isinstance(preflight, PreflightPane)
            await pilot.press(pane_key(preflight, "run_all"))
            await until(pilot, "preflight started", lambda: preflight.running or preflight.finished, 10)
            await until(pilot, "preflight finished", lambda: preflight.finished and not preflight.running,
                        120)
            await settle()
            save("preflight")

            # 3 Setup: every job run again from the pane (all done by the headless setup: nothing to do)
            setup = await show("setup")
            assert isinstance(setup, SetupPane)
            await pilot.press(pane_key(setup, "start"))
            await until(pilot, "setup confirmation", lambda: isinstance(app.screen, ConfirmCommands), 60)
            await pilot.press(bound_key(app.screen, "confirm"))
            await until(pilot, "setup finished", lambda: setup.final is not None and not setup.running, 120)
            await settle()
            save("setup")

            # 4 Launch: the ready cluster's timeline
            launch = await show("launch")
            assert isinstance(launch, LaunchPane)
            await until(pilot, "cluster ready", lambda: launch.timeline.verdict.state == "ready", 60)
            await settle()
            save("launch")

            # 7 Chat: one short answer streamed (low effort: a short thinking part)
            chat = await show("chat")
            assert isinstance(chat, ChatPane)
            for line in ("/effort low", PROMPT):
                await pilot.press(*line)
                await pilot.press("enter")
            await until(pilot, "answer streaming", lambda: chat._streaming, 10)
            await until(pilot, "answer streamed", lambda: not chat._streaming, 120)
            await settle()
            save("chat")

            # 8 Bench, and 6 Stats while it runs: the quick suite, as its start key runs it
            bench = await show("bench")
            assert isinstance(bench, BenchPane)
            bench.results_base = results
            model = app.ctx.monitor.stats
            await until(pilot, "API idle", lambda: model.engine is not None and model.engine.running == 0, 60)
            await pilot.press(pane_key(bench, "start"))
            await until(pilot, "bench running", lambda: bench.phase in ("running", "refused"), 60)
            if bench.phase == "refused":
                raise Timeout(f"bench refused: {bench.refusal}")
            started = time.monotonic()
            stats = await show("stats")
            assert isinstance(stats, StatsPane)

            def busy() -> bool:
                e = model.engine
                return (time.monotonic() - started > STATS_AFTER_S and e is not None and (e.running or 0) > 0
                        and (e.generation_tokens_per_s or 0) > 0
                        and all(r.gpu is not None for r in model.ranks.values()))

            await until(pilot, "engine busy in the stats", busy, 90)
            await settle()
            save("stats")
            await show("bench")
            await until(pilot, "bench finished", lambda: bench.phase == "finished", 240)
            await settle()
            save("bench")

            # 5 Logs: merged, following (the bench's requests among them)
            logs = await show("logs")
            assert isinstance(logs, LogsPane)
            await until(pilot, "log lines", lambda: len(logs.store.merged) >= 40 and logs.queued == 0, 60)
            await until(pilot, "logs following", lambda: logs.view.following, 10)
            await settle()
            save("logs")

            # 9 Commands: what this session ran on the hosts, filtered to the preflight's
            commands = await show("commands")
            assert isinstance(commands, CommandsPane)
            await until(pilot, "commands listed", lambda: len(commands.listed) > 0, 10)
            await pilot.press(bound_key(commands, "filter"), *COMMANDS_FILTER, "enter")
            await until(pilot, "commands filtered", lambda: commands.text == COMMANDS_FILTER
                        and len(commands.listed) > 0, 10)
            await settle()
            save("commands")
    return saved


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=CHECKOUT / "docs" / "screenshots",
                        help="where the SVGs go (default: docs/screenshots in this checkout)")
    args = parser.parse_args(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)

    from cockpit.sim import cluster

    with tempfile.TemporaryDirectory(prefix="r37-demo-") as demo, \
            tempfile.TemporaryDirectory(prefix="r37-shots-") as work:
        cluster_dir, home = Path(demo), Path(work)
        env = {**os.environ, "XDG_STATE_HOME": str(home / "state"), "XDG_CONFIG_HOME": str(home / "config")}
        os.environ.update(XDG_STATE_HOME=env["XDG_STATE_HOME"], XDG_CONFIG_HOME=env["XDG_CONFIG_HOME"])
        print(f"starting the simulated cluster in {cluster_dir} …", flush=True)
        try:
            toml = cluster.demo_up(cluster_dir)
            cli(toml, "setup", "all", "--yes", env=env, timeout=300)
            cli(toml, "launch", "--yes", env=env, timeout=300)
            files = asyncio.run(shoot(toml, out, home))
        finally:
            cluster.down(cluster_dir)

    words, bad = forbidden_words(), []
    for path in files:
        text = path.read_text(encoding="utf-8")
        found = leaks(text, words)
        if found:
            bad.append(f"{path.name}: shows {', '.join(found)}")
        print(f"{path.name}: {len(text.encode()) // 1024} KB", flush=True)
    if bad:
        raise SystemExit("screenshots show this machine:\n" + "\n".join(bad))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
