"""Snapshots of the hosts pane: all connected, one host lost, one host key refused."""

from __future__ import annotations

import time

from cockpit.hosts.state import HostState, HostStatus
from cockpit.tui.app import CockpitApp

SIZE = (130, 30)
LONG_AGO = time.time() - 3 * 3600  # ages render as "3h": stable while the test runs


def connected(rank: int) -> HostStatus:
    return HostStatus(rank=rank, target=f"spark-{rank}", state=HostState.CONNECTED,
                      latency_ms=1.5 + rank / 10, hostname=f"spark-{rank}",
                      fingerprint=f"SHA256:fixedfingerprintforrank{rank}AAAAAAAAAAAAAAAAAA", since=LONG_AGO)


def app_with(fixed_config, statuses: list[HostStatus]) -> CockpitApp:
    app = CockpitApp(fixed_config, connect=False)

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        for s in statuses:
            app.show_status(s)
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
        await pilot.press("down", "down")

    assert snap_compare(app, terminal_size=SIZE, run_before=before)


def test_host_key_refused(snap_compare, fixed_config) -> None:
    refused = HostStatus(rank=1, target="spark-1", state=HostState.KEY_REFUSED,
                         fingerprint="SHA256:Zm9yZWlnbmtleWZpbmdlcnByaW50AAAAAAAAAAAAAAA", since=LONG_AGO,
                         error="Host key is not trusted for host spark-1",
                         remedy="verify SHA256:Zm9yZWlnbmtleWZpbmdlcnByaW50AAAAAAAAAAAAAAA with the host's "
                                "administrator, then add it: ssh-keyscan spark-1 >> ~/.ssh/known_hosts")
    app = app_with(fixed_config, [connected(0), refused, connected(2), connected(3)])

    async def before(pilot) -> None:  # type: ignore[no-untyped-def]
        await app._snap_before(pilot)
        await pilot.press("down")

    assert snap_compare(app, terminal_size=SIZE, run_before=before)
