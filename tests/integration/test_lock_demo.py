"""The cluster lock on the demo cluster: the lock dir lives in rank 0's login home, reached over SSH only.

Every test locks a container name of its own, so the shared demo cluster needs no cleaning between them.
Records of other cockpits (stale, garbled, on another admin box) are planted straight into rank 0's
home directory, as another cockpit or a crash would have left them.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cockpit.config import ClusterConfig
from cockpit.hosts import Fleet
from cockpit.recipe import lock as K
from cockpit.sim import layout

FAST = {"heartbeat_s": 0.2, "stale_after_s": 1.5, "timeout_s": 15.0, "settle_s": 2.0}
OLD = 3600.0


def own_config(cluster) -> ClusterConfig:  # type: ignore[no-untyped-def]
    cfg = cluster.config
    name = f"locktest-{secrets.token_hex(4)}"
    return cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"container_name": name})})


def lock_dir(cluster, cfg: ClusterConfig) -> Path:  # type: ignore[no-untyped-def]
    return layout.home_dir(cluster.root(0)) / K.lock_path(cfg)


def plant(d: Path, text: str | None, age_s: float = 0.0) -> None:
    """A lock dir as another cockpit left it; its record `text` (None: no record), `age_s` old."""
    d.mkdir(parents=True)
    when = time.time() - age_s
    if text is not None:
        (d / K.RECORD_NAME).write_text(text)
        os.utime(d / K.RECORD_NAME, (when, when))
    os.utime(d, (when, when))


def other(age_s: float = 0.0, *, host: str = "admin2", pid: int = 4242, purpose: str = "launch",
          boot_id: str | None = None) -> str:
    t = datetime.fromtimestamp(time.time() - age_s, UTC)
    return K.record_text(K.Holder("alice", host, pid, purpose, t, t, secrets.token_hex(16), boot_id))


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def leftovers(cluster, cfg: ClusterConfig) -> list[str]:  # type: ignore[no-untyped-def]
    d = lock_dir(cluster, cfg)
    return sorted(p.name for p in d.parent.glob(f"{d.name}*")) if d.parent.exists() else []


async def connected(cfg: ClusterConfig) -> Fleet:
    fleet = Fleet(cfg)
    fleet.start()
    assert await fleet[0].wait_connected(15)
    return fleet


async def test_two_fleets_at_once_exactly_one_wins(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    a, b = await connected(cfg), await connected(cfg)
    try:
        for _ in range(5):
            locks = [K.ClusterLock(a, cfg, "launch", **FAST), K.ClusterLock(b, cfg, "launch", **FAST)]
            got = await asyncio.gather(*(lk.acquire() for lk in locks), return_exceptions=True)
            won = [g for g in got if isinstance(g, K.ClusterLock)]
            refused = [g for g in got if isinstance(g, K.LockHeld)]
            assert len(won) == 1 and len(refused) == 1, got
            winner, err = won[0], refused[0]
            assert err.holder is not None and err.holder.token == winner.token
            assert err.holder.pid == os.getpid() and err.holder.admin_host == socket.gethostname()
            assert str(err).startswith(f"refused: another cockpit holds the cluster lock: "
                                       f"{K.local_user()}@{socket.gethostname()} (pid {os.getpid()}), "
                                       "launch since ")
            holder = await K.read_holder(a, cfg)
            assert holder is not None and holder.token == winner.token
            assert await winner.release()
            assert leftovers(demo_cluster, cfg) == []
            assert await K.read_holder(b, cfg) is None
    finally:
        await asyncio.gather(a.close(), b.close())


RACER = """
import asyncio, json, os, sys, time
from cockpit.config import load_config
from cockpit.hosts import Fleet
from cockpit.recipe.lock import ClusterLock, LockHeld

async def main(toml, name, start_at, release):
    cfg = load_config(toml)
    cfg = cfg.model_copy(update={"cluster": cfg.cluster.model_copy(update={"container_name": name})})
    async with Fleet(cfg) as fleet:
        assert await fleet[0].wait_connected(15)
        await asyncio.sleep(max(0.0, start_at - time.time()))
        try:
            async with ClusterLock(fleet, cfg, "stop", heartbeat_s=0.2, stale_after_s=5) as lock:
                print(json.dumps({"won": lock.token, "pid": os.getpid()}), flush=True)
                deadline = time.time() + 30
                while not os.path.exists(release) and time.time() < deadline:
                    await asyncio.sleep(0.05)
        except LockHeld as exc:
            print(json.dumps({"held": exc.holder.to_dict() if exc.holder else None, "message": str(exc)}),
                  flush=True)

asyncio.run(main(*sys.argv[1:3], float(sys.argv[3]), sys.argv[4]))
"""


def test_separate_processes_at_once_exactly_one_wins(demo_cluster, tmp_path: Path) -> None:
    cfg = own_config(demo_cluster)
    name = cfg.cluster.container_name
    for round_ in range(2):
        release = tmp_path / f"release-{round_}"
        start_at = time.time() + 2.5  # all connected by then; then all try in the same instant
        procs = [subprocess.Popen([sys.executable, "-c", RACER, str(demo_cluster.config_path), name,
                                   str(start_at), str(release)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for _ in range(3)]
        try:
            outs = [json.loads(p.stdout.readline() or "{}") for p in procs]  # type: ignore[union-attr]
        finally:
            release.touch()  # the winner holds the lock until every racer has answered
            for p in procs:
                _, err = p.communicate(timeout=60)
                assert p.returncode == 0, err
        won = [o for o in outs if "won" in o]
        held = [o for o in outs if "held" in o]
        assert len(won) == 1 and len(held) == 2, outs
        for h in held:
            assert h["held"]["token"] == won[0]["won"] and h["held"]["pid"] == won[0]["pid"]
            assert h["held"]["purpose"] == "stop"
            assert h["message"].startswith("refused: another cockpit holds the cluster lock: ")
        assert leftovers(demo_cluster, cfg) == []


async def test_stale_heartbeat_is_taken_over_with_a_warning(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    plant(lock_dir(demo_cluster, cfg), other(OLD), age_s=OLD)
    fleet = await connected(cfg)
    try:
        async with K.ClusterLock(fleet, cfg, "launch", **FAST) as lock:
            assert lock.taken_over is not None and lock.taken_over.owner == "alice"
            assert lock.taken_over.admin_host == "admin2"
            assert "took over a stale cluster lock from alice@admin2 (pid 4242), launch since" in lock.warning
            assert "heartbeat" in lock.warning
            holder = await K.read_holder(fleet, cfg)
            assert holder is not None and holder.token == lock.token
            assert leftovers(demo_cluster, cfg) == [lock_dir(demo_cluster, cfg).name]  # no takeover dir left
        assert leftovers(demo_cluster, cfg) == []
    finally:
        await fleet.close()


async def test_a_dead_pid_on_this_box_is_stale_at_once_one_elsewhere_is_not(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    d = lock_dir(demo_cluster, cfg)
    pid = dead_pid()
    here = K.this_box()
    plant(d, other(host="admin2", pid=pid))  # fresh heartbeat on another box: its pid means nothing here
    fleet = await connected(cfg)
    try:
        with pytest.raises(K.LockHeld) as err:
            await K.ClusterLock(fleet, cfg, "launch", **FAST).acquire()
        assert err.value.holder is not None and err.value.holder.pid == pid
        assert str(err.value).startswith(f"refused: another cockpit holds the cluster lock: alice@admin2 "
                                         f"(pid {pid}), launch since ")
        # this hostname, another boot: a box of the same name (or this one before a reboot): held
        (d / K.RECORD_NAME).write_text(other(host=here.host, pid=pid, boot_id="another-boot"))
        with pytest.raises(K.LockHeld):
            await K.ClusterLock(fleet, cfg, "launch", **FAST).acquire()
        (d / K.RECORD_NAME).write_text(other(host=here.host, pid=pid, purpose="stop", boot_id=here.boot_id))
        async with K.ClusterLock(fleet, cfg, "launch", **FAST) as lock:
            assert lock.taken_over is not None and lock.taken_over.pid == pid
            assert lock.taken_over.purpose == "stop"
            assert f"its process {pid} on this admin box" in (lock.warning or "")
        assert leftovers(demo_cluster, cfg) == []
    finally:
        await fleet.close()


async def test_two_takers_of_one_stale_lock_exactly_one_wins(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    a, b = await connected(cfg), await connected(cfg)
    try:
        for _ in range(4):
            plant(lock_dir(demo_cluster, cfg), other(OLD), age_s=OLD)
            locks = [K.ClusterLock(a, cfg, "launch", **FAST), K.ClusterLock(b, cfg, "launch", **FAST)]
            got = await asyncio.gather(*(lk.acquire() for lk in locks), return_exceptions=True)
            won = [g for g in got if isinstance(g, K.ClusterLock)]
            refused = [g for g in got if isinstance(g, K.LockHeld)]
            assert len(won) == 1 and len(refused) == 1, got
            assert refused[0].holder is not None and refused[0].holder.token == won[0].token
            holder = await K.read_holder(a, cfg)
            assert holder is not None and holder.token == won[0].token  # alice's record is gone
            # the winner warns when it saw the stale lock (it may have won the mkdir after the other
            # cockpit moved the stale lock aside while this one was still looking)
            if won[0].taken_over is not None:
                assert won[0].taken_over.owner == "alice" and "alice@admin2" in (won[0].warning or "")
            assert await won[0].release()
            assert leftovers(demo_cluster, cfg) == []
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_heartbeat_moves_while_held(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    fleet = await connected(cfg)
    try:
        async with K.ClusterLock(fleet, cfg, "stop", **FAST) as lock:
            first = await K.read_lock(fleet, cfg, stale_after_s=FAST["stale_after_s"])
            mtime = (lock_dir(demo_cluster, cfg) / K.RECORD_NAME).stat().st_mtime
            await asyncio.sleep(1.0)
            second = await K.read_lock(fleet, cfg, stale_after_s=FAST["stale_after_s"])
            assert first.holder is not None and second.holder is not None
            assert second.holder.heartbeat_at > first.holder.heartbeat_at
            assert second.holder.started_at == first.holder.started_at
            assert (lock_dir(demo_cluster, cfg) / K.RECORD_NAME).stat().st_mtime > mtime
            assert lock.beats >= 2 and lock.held and lock.lost is None
            assert second.held and second.stale is None and second.age_s is not None and second.age_s < 1.0
            assert second.to_dict()["holder"]["token"] == lock.token
            await asyncio.sleep(FAST["stale_after_s"] + 0.5)  # longer than the stale limit: still ours
            with pytest.raises(K.LockHeld):
                await K.ClusterLock(fleet, cfg, "launch", **FAST).acquire()
        assert leftovers(demo_cluster, cfg) == []
    finally:
        await fleet.close()


async def test_garbled_or_missing_record_is_held_until_its_mtime_is_old(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    d = lock_dir(demo_cluster, cfg)
    fleet = await connected(cfg)
    try:
        plant(d, "{garbage")
        with pytest.raises(K.LockHeld) as err:
            await K.ClusterLock(fleet, cfg, "launch", **FAST).acquire()
        assert err.value.holder is None and "record garbled: not JSON" in str(err.value)
        assert await K.read_holder(fleet, cfg) is None
        old = time.time() - OLD
        os.utime(d / K.RECORD_NAME, (old, old))
        os.utime(d, (old, old))
        async with K.ClusterLock(fleet, cfg, "launch", **FAST) as lock:
            assert lock.taken_over is None and "unknown holder (record garbled" in (lock.warning or "")
        (d.parent / "x").mkdir()  # an empty lock dir: a holder between its mkdir and its record ...
        (d.parent / "x").rename(d)
        t0 = time.monotonic()
        with pytest.raises(K.LockHeld) as err:
            await K.ClusterLock(fleet, cfg, "launch", **{**FAST, "settle_s": 0.5}).acquire()
        assert time.monotonic() - t0 >= 0.5  # ... was given the moment to write it
        assert err.value.holder is None and K.NO_RECORD in str(err.value)
        os.utime(d, (old, old))
        async with K.ClusterLock(fleet, cfg, "launch", **FAST) as lock:
            assert lock.warning and K.NO_RECORD in lock.warning
        assert leftovers(demo_cluster, cfg) == []
    finally:
        await fleet.close()


async def test_release_removes_only_its_own_lock(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    d = lock_dir(demo_cluster, cfg)
    fleet = await connected(cfg)
    lost: list[str] = []
    try:
        async with K.ClusterLock(fleet, cfg, "launch", **FAST, on_lost=lost.append) as lock:
            d.rename(d.with_name("moved-away"))  # another cockpit took it over meanwhile
            plant(d, other())
            for _ in range(50):
                if lock.lost:
                    break
                await asyncio.sleep(0.1)
            assert lock.lost and "taken over by alice@admin2 (pid 4242)" in lock.lost
            assert lost == [lock.lost] and not lock.held
        assert "no longer ours" in (lock.release_problem or "")
        holder = await K.read_holder(fleet, cfg)
        assert holder is not None and holder.owner == "alice"  # left alone
        assert json.loads((d / K.RECORD_NAME).read_text())["owner"] == "alice"
    finally:
        await fleet.close()


async def test_rank0_unreachable_is_lock_unavailable(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    with socket.socket() as s:  # a port nobody listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    hosts = [h.model_copy(update={"port": port}) if h.rank == 0 else h for h in cfg.hosts]
    bad = cfg.model_copy(update={"hosts": hosts})
    async with Fleet(bad) as fleet:
        t0 = time.monotonic()
        with pytest.raises(K.LockUnavailable) as err:
            async with K.ClusterLock(fleet, bad, "stop", **{**FAST, "timeout_s": 2.0}):
                raise AssertionError("the body ran without the lock")
        assert time.monotonic() - t0 < 5
        msg = str(err.value)
        assert "rank 0" in msg and "unreachable" in msg and "the stop did not proceed" in msg
        with pytest.raises(K.LockUnavailable, match="cannot read the cluster lock on rank 0"):
            await K.read_lock(fleet, bad, timeout_s=1.0)


async def test_a_release_that_cannot_reach_rank0_leaves_a_lock_that_goes_stale(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    slow = {**FAST, "stale_after_s": 3.0}  # room for the close and the failed release before it is stale
    a, b = await connected(cfg), await connected(cfg)
    try:
        lock = await K.ClusterLock(a, cfg, "launch", **slow).acquire()
        await a[0].close()  # rank 0 gone for this cockpit
        assert not await lock.release()
        assert "could not release the cluster lock" in (lock.release_problem or "")
        with pytest.raises(K.LockHeld):  # its pid still runs here: held until the heartbeat is old
            await K.ClusterLock(b, cfg, "launch", **slow).acquire()
        await asyncio.sleep(slow["stale_after_s"] + 0.3)
        async with K.ClusterLock(b, cfg, "launch", **slow) as second:
            assert second.taken_over is not None and second.taken_over.token == lock.token
        assert leftovers(demo_cluster, cfg) == []
    finally:
        await asyncio.gather(a.close(), b.close())


async def test_a_cancelled_holder_releases(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    fleet = await connected(cfg)
    held = asyncio.Event()

    async def launch() -> None:
        async with K.ClusterLock(fleet, cfg, "launch", **FAST):
            held.set()
            await asyncio.sleep(60)

    try:
        task = asyncio.create_task(launch())
        await asyncio.wait_for(held.wait(), 15)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert leftovers(demo_cluster, cfg) == []
    finally:
        await fleet.close()


async def test_leftover_release_and_takeover_dirs_are_cleared_by_the_next_holder(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    d = lock_dir(demo_cluster, cfg)
    old_release = d.with_name(f"{d.name}.release.{secrets.token_hex(16)}")
    old_takeover = d.with_name(f"{d.name}.takeover.{secrets.token_hex(16)}")
    fresh_release = d.with_name(f"{d.name}.release.{secrets.token_hex(16)}")   # a releaser at work now
    plant(old_release, other(OLD), age_s=OLD)
    plant(old_takeover, other(OLD), age_s=OLD)
    plant(fresh_release, other())
    other_lock = d.with_name("someone-else.lock.release.0123abcd")                # another container's
    plant(other_lock, other(OLD), age_s=OLD)
    fleet = await connected(cfg)
    try:
        async with K.ClusterLock(fleet, cfg, "stop", **FAST) as lock:
            assert sorted(lock.cleared) == sorted([old_release.name, old_takeover.name])
            assert not old_release.exists() and not old_takeover.exists()
            assert fresh_release.exists() and other_lock.exists()
    finally:
        await fleet.close()
        for left in (fresh_release, other_lock):
            subprocess.run(["rm", "-r", "-f", "--", str(left)], check=True)


async def test_a_launch_lock_of_a_gone_process_reads_as_an_interrupted_launch(demo_cluster) -> None:
    cfg = own_config(demo_cluster)
    d = lock_dir(demo_cluster, cfg)
    here = K.this_box()
    pid = dead_pid()
    fleet = await connected(cfg)
    try:
        assert await K.interrupted_launch(fleet, cfg) is None                    # no lock
        plant(d, other(host=here.host, pid=pid, boot_id=here.boot_id))           # fresh heartbeat, pid gone
        found = await K.interrupted_launch(fleet, cfg)
        assert found is not None and found.startswith("launch interrupted: the launcher alice@")
        assert f"its process {pid} on this admin box" in found
        async with K.ClusterLock(fleet, cfg, "launch", **FAST) as lock:         # a live launcher again
            assert lock.taken_over is not None
            assert await K.interrupted_launch(fleet, cfg) is None
    finally:
        await fleet.close()
