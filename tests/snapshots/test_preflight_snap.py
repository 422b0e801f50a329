"""Snapshots of the preflight pane fed the typed events the runner produces: all pass, mixed results with
one rank differing, and the detail view of that rank."""

from __future__ import annotations

from textual.widgets import DataTable

from cockpit.config import ClusterConfig
from cockpit.recipe.checks import CheckInfo, CheckResult, PreflightFinished, PreflightStarted, Verdict
from cockpit.recipe.preflight import CHECKS
from cockpit.tui.app import CockpitApp
from cockpit.tui.dialogs import Detail

SIZE = (130, 36)

VALUES = {
    "ssh": "spark-{r}, 1.{r} ms",
    "arch": "aarch64",
    "gpu": "NVIDIA GB10",
    "driver": "driver 580.95.05, CUDA 13.0",
    "clocks": "208/3003 MHz, P8 0% (idle)",
    "memory": "MemAvailable 113.4 GiB of 121.7 GiB",
    "disk": "/srv 2.9 TB free, needs 10.6 GB",
    "docker": "Docker 28.3.3",
    "nvidia-runtime": "runtimes: io.containerd.runc.v2, nvidia, runc (default runc)",
    "fabric-ip": "192.168.100.1{r}/24 on enp1s0f0np0 (UP)",
    "rdma-link": "rocep1s0f0/1 ACTIVE LINK_UP → enp1s0f0np0",
    "ibv-port": "rocep1s0f0 port 1 PORT_ACTIVE, Ethernet, mtu 4096 (5)",
    "gid": "rocep1s0f0 GID 3: RoCE v2 192.168.100.1{r} on enp1s0f0np0",
    "reach": "192.168.100.1{r} reached by every peer",
    "recipe": "r37-recipe: launch/node.sh, tools/prepare-engram.py",
    "checkpoint": "48 shards, 509.8 GB, revision 5f3c1e0a9b2d",
    "image": "local/ds41-r37-spark:runtime sha256:638d63b0f4bb…",
    "engram": "r37-row-coverage.json + 2 overlay files in /srv/engram-local/DeepSeek-V4.1-Flash",
    "container": "no container named ds41_r37",
    "ports": "ports 8000 and 29543 free",
}


def healthy(cfg: ClusterConfig) -> list[CheckResult]:
    out = []
    for c in CHECKS:
        for r in cfg.ranks:
            if c.applies(cfg, r):
                value = VALUES[c.id].format(r=r)
                if c.id == "engram" and r == 0:
                    value = "not needed on rank 0 (it reads the full checkpoint)"
                cmds = tuple(c.command_lines(cfg, r).values())
                out.append(CheckResult(c.id, r, c.step, c.title, Verdict.PASS, value, commands=cmds))
    return out


def started(cfg: ClusterConfig) -> PreflightStarted:
    infos = tuple(
        CheckInfo(c.id, c.step, c.title, tuple(r for r in cfg.ranks if c.applies(cfg, r))) for c in CHECKS
    )
    return PreflightStarted(infos, tuple(cfg.ranks))


SMI = (
    "timeout 20 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,utilization.gpu,"
    "pstate --format=csv,noheader,nounits"
)
SLOW = CheckResult(
    "clocks",
    2,
    1,
    "SM clocks not latched low",
    Verdict.FAIL,
    "900/3003 MHz, P8 0% (idle)",
    remedy="the SM clock looks latched low (a reported GB10 state): check "
    "`nvidia-smi -q -d CLOCK,PERFORMANCE` for throttle reasons; a host reboot usually clears it",
    detail="idle at 900 MHz while idle peers read 208 MHz: latched",
    commands=(SMI,),
    raw=f"$ {SMI}\nNVIDIA GB10, 580.95.05, 900, 3003, 0, P8\n[exit 0]",
)
NO_IMAGE = CheckResult(
    "image",
    3,
    3,
    "runtime image ID, same everywhere",
    Verdict.FAIL,
    "local/ds41-r37-spark:runtime not loaded",
    remedy="`r37-cockpit setup runtime --rank 3` downloads the archive, verifies its sha256 and loads it",
)


def app_fed(cfg: ClusterConfig, results: list[CheckResult], *, finish: bool = True) -> CockpitApp:
    app = CockpitApp(cfg, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await pilot.press("2")
        pane = app.query_one("#preflight-pane")
        pane.apply(started(cfg))
        for r in results:
            pane.apply(r)
        if finish:
            pane.apply(PreflightFinished(tuple(results), 1.2))
        await pilot.pause()

    app._snap_before = before  # type: ignore[attr-defined]
    return app


def mixed(cfg: ClusterConfig) -> list[CheckResult]:
    swap = {("clocks", 2): SLOW, ("image", 3): NO_IMAGE}
    return [swap.get((r.check, r.rank), r) for r in healthy(cfg)]


def test_all_pass(snap_compare, fixed_config) -> None:
    app = app_fed(fixed_config, healthy(fixed_config))
    assert snap_compare(app, terminal_size=SIZE, run_before=app._snap_before)
    summary = app.ctx.preflight
    assert summary.ok and not summary.running and summary.failed == ()


def test_mixed_results_highlight_the_differing_rank(snap_compare, fixed_config) -> None:
    app = app_fed(fixed_config, mixed(fixed_config))
    assert snap_compare(app, terminal_size=SIZE, run_before=app._snap_before)
    summary = app.ctx.preflight
    assert not summary.ok and summary.failed == (("clocks", 2), ("image", 3))


def test_detail_view_of_the_differing_rank(snap_compare, fixed_config) -> None:
    app = app_fed(fixed_config, mixed(fixed_config))

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app._snap_before(pilot)
        pane = app.query_one("#preflight-pane")
        row = next(i for i, r in enumerate(pane.rows) if r.check == "clocks" and r.ranks == (2,))
        await pilot.press(*["down"] * row, "enter")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


async def test_detail_remedy_names_the_config_discovery_would_not_find(fixed_config, tmp_path,
                                                                       monkeypatch) -> None:
    """The cockpit opened with a config outside discovery: the remedy's command carries --config."""
    from textual.widgets import Static

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    conf = tmp_path / "lab" / "cluster.toml"
    app = CockpitApp(fixed_config, conf, connect=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("2")
        pane = app.query_one("#preflight-pane")
        pane.apply(started(fixed_config))
        for r in mixed(fixed_config):
            pane.apply(r)
        pane.apply(PreflightFinished(tuple(mixed(fixed_config)), 1.2))
        await pilot.pause()
        row = next(i for i, r in enumerate(pane.rows) if r.check == "image" and r.ranks == (3,))
        await pilot.press(*["down"] * row, "enter")
        await pilot.pause()
        assert isinstance(app.screen, Detail) and pane._selected().check == "image"
        shown = str(app.screen.query_one("#detail-text", Static).render())
        assert f"`r37-cockpit --config {conf} setup runtime --rank 3`" in shown


EVIL = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
HOSTILE = CheckResult(
    "gpu", 1, 1, "GPU visible", Verdict.FAIL, f"NVIDIA-SMI has failed {EVIL}",
    remedy="check the driver (`nvidia-smi`)", detail=f"the host said: {EVIL}\nsecond line {EVIL}",
    commands=("timeout 20 nvidia-smi",), raw=f"$ timeout 20 nvidia-smi\n{EVIL}\n[exit 9]",
)
UNKNOWN = CheckResult("disk", 3, 1, "free disk", Verdict.UNKNOWN, "no answer: timed out",
                      remedy="re-run once the host answers")


def hostile(cfg: ClusterConfig) -> list[CheckResult]:
    swap = {("gpu", 1): HOSTILE, ("disk", 3): UNKNOWN}
    return [swap.get((r.check, r.rank), r) for r in healthy(cfg)]


def test_unknown_is_counted_apart_and_host_escapes_are_inert(snap_compare, fixed_config) -> None:
    """A check whose value holds OSC 52 (clipboard), OSC 0 (title), CSI 2J (clear) and OSC 8 (hyperlink):
    shown as visible symbols; an unknown check is summed apart from the passes."""
    app = app_fed(fixed_config, hostile(fixed_config))

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app._snap_before(pilot)
        status = str(app.query_one("#preflight-status").render())
        assert "1 unknown (not a pass)" in status and "\x1b" not in status

    assert snap_compare(app, terminal_size=SIZE, run_before=before)
    assert not app.ctx.preflight.ok


def test_detail_of_a_check_with_escapes_in_its_output(snap_compare, fixed_config) -> None:
    app = app_fed(fixed_config, hostile(fixed_config))

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app._snap_before(pilot)
        pane = app.query_one("#preflight-pane")
        row = next(i for i, r in enumerate(pane.rows) if r.check == "gpu" and r.ranks == (1,))
        await pilot.press(*["down"] * row, "enter")
        await pilot.pause()
        shown = str(app.screen.query_one("#detail-text").render())
        assert "\x1b" not in shown and "\x07" not in shown and "␛]52;c;" in shown

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's preflight state: finished with one rank's clocks and another's image failed and a
    check unknown; the failed clocks row selected."""
    cfg = app.config
    app.action_show_pane("preflight")
    await pilot.pause()
    pane = app.query_one("#preflight-pane")
    results = [{("disk", 3): UNKNOWN}.get((r.check, r.rank), r) for r in mixed(cfg)]
    pane.apply(started(cfg))
    for r in results:
        pane.apply(r)
    pane.apply(PreflightFinished(tuple(results), 1.2))
    await pilot.pause()
    row = next(i for i, r in enumerate(pane.rows) if r.check == "clocks" and r.ranks == (2,))
    app.query_one("#preflight-table", DataTable).move_cursor(row=row)
    await pilot.pause()


async def test_at_80x24_every_column_fits_and_observed_is_cut_not_scrolled(fixed_config) -> None:
    app = CockpitApp(fixed_config, connect=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await scene(app, pilot)
        table = app.query_one("#preflight-table", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert labels == ["step", "check", "result", "ranks", "observed"]
        assert table.virtual_size.width <= table.size.width, "the table scrolls sideways"
        observed = [str(table.get_row_at(i)[4]) for i in range(table.row_count)]
        assert any(v.endswith("…") for v in observed)        # cut to the width; Enter shows it in full
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, Detail)
        assert "rank 2: FAIL  900/3003 MHz" in str(app.screen.query_one("#detail-text").render())
