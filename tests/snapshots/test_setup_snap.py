"""Snapshots of the setup pane fed the typed events the runner produces: a checkpoint download mid-way on
four hosts (bytes, rate, ETA per host, one host failed with its cause), and a finished runtime job with a
refused image ID on one rank; and the confirm dialog as `s` opens it, with the plan in it."""

from __future__ import annotations

from tuihelpers import setup_plan

from cockpit.recipe.progress import Progress
from cockpit.recipe.setup_model import (
    JobLog,
    RankDone,
    RankState,
    SetupEvent,
    SetupFinished,
    SetupPlan,
    SetupStarted,
    StepProgress,
    StepStarted,
)
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs import ConfirmCommands
from cockpit.tui.panes import setup as setup_pane_module
from cockpit.tui.panes.setup import COLUMNS, SetupPane

SIZE = (130, 36)
GB = 10**9
DL = "download"
CMD = ("hf download dealignai/DeepSeek-V4.1-Flash-UNCENSORED-FP8 --revision "
       "5f3c1e0a9b2d4c6e8f0a1b3c5d7e9f1a2b4c6d8e --local-dir /srv/models/DeepSeek-V4.1-Flash-dealignai")


async def show(app: CockpitApp, pilot, events: list[SetupEvent]) -> None:  # type: ignore[no-untyped-def]
    """Show the setup pane with the checkpoint job picked, fed `events` as the runner would post them."""
    await pilot.pause()
    await pilot.pause()
    app.set_focus(None)
    app.action_show_pane("setup")
    await pilot.pause()
    pane = app.query_one(SetupPane)
    pane.job = "checkpoint"
    for ev in events:
        pane.apply(ev)
    await pilot.pause()
    await pilot.pause(0.3)  # let deferred focus and refresh settle, also on a loaded machine


def app_with(fixed_config, events: list[SetupEvent]) -> tuple[CockpitApp, object]:  # type: ignore[no-untyped-def]
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await show(app, pilot, events)

    return app, before


def checkpoint_mid_way() -> list[SetupEvent]:
    evs: list[SetupEvent] = [SetupStarted(("checkpoint",), (0, 1, 2, 3))]
    for r in range(4):
        evs.append(StepStarted("checkpoint", r, 0, 3, DL, (CMD,)))
        evs.append(JobLog("checkpoint", r, f"$ {CMD}"))
    evs += [
        StepProgress("checkpoint", 0, DL, Progress(212 * GB, 510 * GB, 20, 54, 118e6, 2525.0)),
        StepProgress("checkpoint", 1, DL, Progress(198 * GB, 510 * GB, 19, 54, 111e6, 2810.0)),
        StepProgress("checkpoint", 2, DL, Progress(455 * GB, 510 * GB, 49, 54, 121e6, 455.0)),
        JobLog("checkpoint", 3, "Error: Revision Not Found for url: https://huggingface.co/api/models/"
                                "dealignai/DeepSeek-V4.1-Flash-UNCENSORED-FP8/revision/5f3c1e0a9b2d."),
        RankDone("checkpoint", 3, RankState.FAILED, "download: exit 1: Invalid rev id: 5f3c1e0a9b2d"),
    ]
    return evs


def runtime_finished() -> list[SetupEvent]:
    img = "sha256:638d63b0f4bb9741c4afd4936e184659053e8a5ec466d6e7a8994ae0094e58fa"
    bad = "sha256:0d4b2a1e9c7f5d3b1a0e8c6f4d2b0a9e7c5f3d1b0a8e6c4f2d0b9a7e5c3f1d0b"
    evs: list[SetupEvent] = [SetupStarted(("runtime",), (0, 1, 2, 3))]
    outs = []
    for r in range(4):
        evs.append(StepStarted("runtime", r, 5, 6, "verify image ID", ("docker image inspect …",)))
        evs.append(StepProgress("runtime", r, "download", Progress(None, None, 1, 1, None, 0.0)))
        if r == 2:
            why = f"verify image ID: image ID mismatch: observed {bad}, expected {img}"
            out = RankDone("runtime", r, RankState.FAILED, why)
        else:
            out = RankDone("runtime", r, RankState.DONE, "6 steps, last: verify image ID")
        evs.append(out)
        outs.append(out)
    evs.append(SetupFinished(tuple(outs), 42.0))
    return evs


def test_checkpoint_progress(snap_compare, fixed_config) -> None:
    app, before = app_with(fixed_config, checkpoint_mid_way())
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_runtime_refused_on_one_rank(snap_compare, fixed_config) -> None:
    app, before = app_with(fixed_config, runtime_finished())
    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_confirm_dialog_with_the_plan(snap_compare, fixed_config, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """`s` on the recipe job: the dialog holds the plan's twelve commands; under it the status line says
    the plan is read and waits for the dialog (not "reading the hosts …")."""
    async def planner(*args: object, **kwargs: object) -> SetupPlan:
        return setup_plan()

    monkeypatch.setattr(setup_pane_module, "plan_setup", planner)
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.pause()
        app.action_show_pane("setup")
        pane = app.query_one(SetupPane)
        pane.job = "recipe"
        await pilot.press("s")
        for _ in range(100):
            if isinstance(app.screen, ConfirmCommands):
                break
            await pilot.pause(0.05)
        assert isinstance(app.screen, ConfirmCommands)
        await pilot.pause()
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


async def test_causes_name_the_config_discovery_would_not_find(fixed_config, tmp_path, monkeypatch) -> None:
    """A refusal that quotes a cockpit command, in a cockpit opened with a config outside discovery."""
    from textual.widgets import Static

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    conf = tmp_path / "lab" / "cluster.toml"
    app = CockpitApp(fixed_config, conf, connect=False)
    why = ("r37-recipe/cluster.env differs from cluster.toml (diff shown); nothing replaced — review the "
           "diff and replace it with `r37-cockpit setup env --rank 3 --overwrite-env`, or fix cluster.toml")
    async with app.run_test(size=SIZE) as pilot:
        app.action_show_pane("setup")
        await pilot.pause()
        pane = app.query_one(SetupPane)
        pane.apply(SetupStarted(("env",), (3,)))
        pane.apply(RankDone("env", 3, RankState.REFUSED, why))
        await pilot.pause()
        shown = str(pane.query_one("#setup-causes", Static).render())
        assert f"`r37-cockpit --config {conf} setup env --rank 3 --overwrite-env`" in shown


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's setup state: a checkpoint download mid-way on three hosts, failed on the fourth (its
    cause below the table); rate, ETA and state must show at every size."""
    await show(app, pilot, checkpoint_mid_way())


async def test_at_80x24_rate_eta_and_state_stay_in_the_table(fixed_config) -> None:
    """The issue's small terminal: the table drops host and done (shown below it for the selected rank)
    and merges job and step, so that nothing scrolls out sideways."""
    from textual.widgets import DataTable, Static

    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await scene(app, pilot)
        pane = app.query_one(SetupPane)
        table = pane.query_one(DataTable)
        assert [str(c.label) for c in table.columns.values()] == ["rank", "job · step", "progress", "rate",
                                                                  "ETA", "state"]
        assert table.virtual_size.width <= table.size.width, "the table scrolls sideways"
        assert [str(c) for c in table.get_row_at(0)][3:] == ["118.0 MB/s", "42:05", "running"]
        assert str(table.get_row_at(3)[-1]) == "failed"
        row = str(pane.query_one("#setup-row", Static).render())
        assert row.startswith("rank 0 spark-0") and "212.0GB/510.0GB · 20/54 files" in row
        await pilot.press("down")
        await pilot.pause()
        assert str(pane.query_one("#setup-row", Static).render()).startswith("rank 1 spark-1")
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await scene(app, pilot)
        table = app.query_one(SetupPane).query_one(DataTable)
        assert [str(c.label) for c in table.columns.values()] == list(COLUMNS)
        assert not app.query_one("#setup-row").display
