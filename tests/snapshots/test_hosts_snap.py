"""Snapshots of the hosts pane: all connected, one host lost, an unknown host key, a changed host key
(old and new fingerprints), and a host whose error carries terminal escapes (shown inert)."""

from __future__ import annotations

import time

from textual.widgets import DataTable
from tuihelpers import report_status

from cockpit.hosts.state import HostState, HostStatus
from cockpit.tui.app import CockpitApp

SIZE = (130, 30)
LONG_AGO = time.time() - 3 * 3600  # ages render as "3h": stable while the test runs


def connected(rank: int) -> HostStatus:
    return HostStatus(rank=rank, target=f"spark-{rank}", state=HostState.CONNECTED,
                      latency_ms=1.5 + rank / 10, hostname=f"spark-{rank}",
                      fingerprint=f"SHA256:fixedfingerprintforrank{rank}AAAAAAAAAAAAAAAAAA", since=LONG_AGO)


async def select_row(app: CockpitApp, pilot, row: int) -> None:  # type: ignore[no-untyped-def]
    """Put the hosts table's cursor on `row` (the detail below shows that host)."""
    app.query_one("#hosts-table", DataTable).move_cursor(row=row)
    await pilot.pause()


def app_with(fixed_config, statuses: list[HostStatus]) -> CockpitApp:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        for s in statuses:
            report_status(app, s)
        await pilot.pause()

    app._snap_before = before  # type: ignore[attr-defined]
    return app


def test_all_connected(snap_compare, fixed_config) -> None:
    app = app_with(fixed_config, [connected(r) for r in range(4)])
    assert snap_compare(app, terminal_size=SIZE, run_before=app._snap_before)


def test_one_host_lost(snap_compare, fixed_config) -> None:
    lost = HostStatus(rank=2, target="spark-2", state=HostState.LOST, hostname="spark-2",
                      fingerprint=connected(2).fingerprint, since=LONG_AGO,
                      error="connection lost (no keepalive answer)",
                      remedy="waiting for the host to come back; reconnecting with backoff")
    app = app_with(fixed_config, [connected(0), connected(1), lost, connected(3)])

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app._snap_before(pilot)
        await select_row(app, pilot, 2)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_host_key_unknown(snap_compare, fixed_config) -> None:
    fp, kh = "SHA256:Zm9yZWlnbmtleWZpbmdlcnByaW50AAAAAAAAAAAAAAA", "/home/op/.ssh/known_hosts"
    unknown = HostStatus(rank=1, target="spark-1", state=HostState.KEY_UNKNOWN, fingerprint=fp,
                         since=LONG_AGO, known_hosts=kh,
                         error=f"the host key {fp} of spark-1 is in no known_hosts file ({kh})",
                         remedy=f"verify {fp} with the host's administrator (on the host: `ssh-keygen -lf "
                                "/etc/ssh/ssh_host_ed25519_key.pub`), then "
                                f"`r37-cockpit hosts trust --rank 1 --fingerprint {fp}`")
    app = app_with(fixed_config, [connected(0), unknown, connected(2), connected(3)])

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app._snap_before(pilot)
        await select_row(app, pilot, 1)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_host_key_changed(snap_compare, fixed_config) -> None:
    old = "SHA256:b2xka2V5b2xka2V5b2xka2V5b2xka2V5b2xka2V5AAA"
    new = "SHA256:bmV3a2V5bmV3a2V5bmV3a2V5bmV3a2V5bmV3AAA"
    changed = HostStatus(rank=2, target="spark-2", state=HostState.KEY_CHANGED, fingerprint=new,
                         known_fingerprints=(old,), known_hosts="/home/op/.ssh/known_hosts", since=LONG_AGO,
                         error=f"HOST KEY CHANGED for spark-2: known_hosts (/home/op/.ssh/known_hosts) holds "
                               f"{old}, the host now offers {new}: someone may be intercepting the "
                               "connection",
                         remedy="do not connect: ask the host's administrator whether its key changed; if it "
                                "did, remove the old line (`ssh-keygen -R 'spark-2' -f "
                                "/home/op/.ssh/known_hosts`), then verify and trust the new key")
    app = app_with(fixed_config, [connected(0), connected(1), changed, connected(3)])

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app._snap_before(pilot)
        await select_row(app, pilot, 2)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_escapes_in_host_text_are_inert(snap_compare, fixed_config) -> None:
    """A hostile server's disconnect reason and hostname: clipboard write (OSC 52), window title, clear
    screen, a hyperlink and a bidi override, all shown as visible symbols."""
    lost = HostStatus(rank=3, target="spark-3", state=HostState.UNREACHABLE,
                      hostname="spark-3\x1b]0;owned\x07", since=LONG_AGO,
                      error="disconnected by the host: \x1b]52;c;cm0gLXJmIH4=\x07bye\x1b[2J\x1b[H "
                            "\x1b]8;;http://evil.example/\x07click\x1b]8;;\x07 \u202eevil",
                      remedy="check that spark-3 is up and sshd answers; retrying in 8 s")
    app = app_with(fixed_config, [connected(0), connected(1), connected(2), lost])

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app._snap_before(pilot)
        await select_row(app, pilot, 3)

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


async def scene(app: CockpitApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """The matrix's hosts state: three connected, one lost with its error and remedy selected."""
    lost = HostStatus(rank=2, target="spark-2", state=HostState.LOST, hostname="spark-2",
                      fingerprint=connected(2).fingerprint, since=LONG_AGO,
                      error="connection lost (no keepalive answer)",
                      remedy="waiting for the host to come back; reconnecting with backoff")
    for s in (connected(0), connected(1), lost, connected(3)):
        report_status(app, s)
    await pilot.pause()
    await select_row(app, pilot, 2)
