"""Contract tests against a real Docker daemon (Debian's dockerd, no networking, a private socket; see
realdocker.py), each run the same way against the `docker` stand-in (cockpit/sim/tools/docker.py): the
cockpit's parsers must read both alike. Where they differ by version (wording, exit code), the test says
which drift the cockpit accepts."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import realdocker
from test_tools_formats import ToolHost

from cockpit import constants as C
from cockpit.recipe import checks_host as H
from cockpit.recipe import containers as dk
from cockpit.recipe import parsers as P
from cockpit.recipe.checks import Probe, Verdict
from cockpit.recipe.image_identity import parse_image_inspect
from cockpit.telemetry.logline import parse_stamped

STOP_GRACE = 2          # `docker stop -t`: seconds a PID 1 without a handler holds docker stop


@dataclass
class Out:
    rc: int
    stdout: str
    stderr: str

    @property
    def merged(self) -> str:
        return self.stdout + self.stderr


class Real:
    """The real CLI on the test daemon, with the test image."""

    image = realdocker.IMAGE
    name = "real"

    def __init__(self, d: realdocker.RealDocker):
        self.d = d

    def docker(self, *args: str, env: dict[str, str] | None = None, user: int | None = None) -> Out:
        argv = [self.d.cli, *args]
        if user is not None:
            argv = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *argv]
        r = subprocess.run(argv, env=env or self.d.env(), capture_output=True, text=True, timeout=120)
        return Out(r.returncode, r.stdout, r.stderr)


class Standin:
    """The stand-in on a simulated host, with the R37 image loaded."""

    image = C.IMAGE_TAG
    name = "stand-in"

    def __init__(self, h: ToolHost):
        self.h = h

    def docker(self, *args: str) -> Out:
        r = subprocess.run(["docker", *args], env=self.h.env(), cwd=self.h.root, capture_output=True,
                           text=True, timeout=120)
        return Out(r.returncode, r.stdout, r.stderr)


def probe(cfg, **outputs: tuple[str, int]) -> Probe:  # type: ignore[no-untyped-def]
    return Probe(cfg, 0, {k.replace("__", "."): P.Section(k.replace("__", "."), t, rc)
                          for k, (t, rc) in outputs.items()}, {})


def info_reading(cfg, out: Out) -> tuple[Verdict, str, str]:  # type: ignore[no-untyped-def]
    res = H.DOCKER.evaluate(probe(cfg, docker__info=(out.merged, out.rc)))
    return res.verdict, res.value, res.remedy


# ---- docker info -------------------------------------------------------------------------------------


def clis(real_docker) -> list[str]:  # type: ignore[no-untyped-def]
    """Every docker CLI on this machine (here: Docker 28 in /usr/local/bin and Debian's 20.10)."""
    found = [real_docker.cli] + [p for p in ("/usr/local/bin/docker", "/usr/bin/docker") if os.path.exists(p)]
    return sorted({os.path.realpath(p): p for p in found}.values())


def test_info_live_down_and_denied_read_alike(real_docker, standin, fixed_config, tmp_path: Path) -> None:
    real, sim = Real(real_docker), Standin(standin)
    fmt = ("info", "--format", "{{json .}}")
    live = info_reading(fixed_config, real.docker(*fmt))
    assert live[0] is Verdict.PASS and live[1].startswith("Docker 20.10"), live
    assert info_reading(fixed_config, sim.docker(*fmt))[0] is Verdict.PASS

    cfg_dir = Path(tempfile.mkdtemp(prefix="r37-nobody-"))   # a login that may not use the socket: uid 65534
    cfg_dir.chmod(0o777)
    gone = dict(real_docker.env(), DOCKER_HOST=f"unix://{tmp_path}/no-daemon.sock")
    nobody = dict(real_docker.env(), DOCKER_CONFIG=str(cfg_dir), HOME=str(cfg_dir))
    down, denied = [], []
    for cli in clis(real_docker):
        real.d.cli = cli
        down.append(real.docker(*fmt, env=gone))          # CLI 28: exit 1; CLI 20: ServerErrors, exit 0
        denied.append(real.docker(*fmt, env=nobody, user=65534))
    for fault, outs in (("docker-down", down), ("docker-denied", denied)):
        standin.fault(fault)
        sim_out = sim.docker(*fmt)
        standin.fault(fault, on=False)
        assert sim_out.rc == 1 and sim_out.stdout.startswith('{"ID":"","Containers":0')   # CLI 28's shape
        outs.append(sim_out)
    shutil.rmtree(cfg_dir, ignore_errors=True)
    for out in down:
        verdict, value, remedy = info_reading(fixed_config, out)
        assert verdict is Verdict.FAIL and value.startswith("Cannot connect to the Docker daemon at unix://")
        assert value.endswith("Is the docker daemon running?") and remedy == H.DOCKER_DOWN_REMEDY
    for out in denied:
        verdict, value, remedy = info_reading(fixed_config, out)
        assert verdict is Verdict.FAIL, out
        assert not value.startswith("WARNING")
        assert "permission denied while trying to connect to the Docker daemon socket at unix://" in value
        assert remedy == H.DOCKER_DENIED_REMEDY


# ---- run, ps, inspect, logs -t, stop, rm ------------------------------------------------------------


SCRIPT = "trap 'echo bye; exit 0' TERM; echo hello; echo oops >&2; while :; do sleep 0.1; done"


def lifecycle(d: Real | Standin, name: str) -> dict[str, object]:
    """One container's life through the commands the cockpit runs, as the cockpit reads it."""
    seen: dict[str, object] = {}
    run = d.docker("run", "-d", "--network", "none", "--name", name, d.image, "sh", "-c", SCRIPT)
    cid = dk.container_id_from_output(run.stdout)
    assert run.rc == 0 and cid is not None, run
    ps = d.docker(*dk.ps_argv(name)[1:])
    entry = dk.ps_named(ps.stdout, name)
    assert entry is not None and entry.id == cid[:12]
    seen["ps"] = entry.state
    [state] = dk.parse_inspect(d.docker(*dk.inspect_argv(name)[1:]).stdout)
    seen["inspect"] = (state.id == cid, state.name, state.status, state.running, state.started_at is not None)
    deadline = time.monotonic() + 30
    while True:
        logs = d.docker("logs", "-t", cid)
        stamped = [parse_stamped(line) for line in logs.merged.splitlines()]
        if len(stamped) >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert all(s is not None for s in stamped), logs
    seen["logs"] = sorted(text for _, text in stamped if text)    # type: ignore[misc]
    refused = d.docker(*dk.rm_argv(cid)[1:])
    said = refused.stderr
    seen["rm running"] = (refused.rc, "running" in said, "Error response from daemon" in said)
    stop = d.docker(*dk.stop_argv(name)[1:])
    seen["stop"] = (stop.rc, stop.stdout)
    [after] = dk.parse_inspect(d.docker(*dk.inspect_argv(cid)[1:]).stdout)
    seen["stopped"] = (after.status, after.exit_code, after.exited, after.finished_at is not None)
    rm = d.docker(*dk.rm_argv(cid)[1:])
    seen["rm"] = (rm.rc, rm.stdout.strip() == cid)
    missing = d.docker(*dk.inspect_argv(cid)[1:])
    seen["gone"] = (missing.rc, dk.parse_inspect(missing.stdout), "No such" in missing.stderr)
    nostop = d.docker("stop", "r37-nope")
    seen["stop missing"] = (nostop.rc, nostop.stderr.strip())
    return seen


def test_container_lifecycle_reads_the_same_on_both(real_docker, standin) -> None:
    real = lifecycle(Real(real_docker), "r37-life")
    sim = lifecycle(Standin(standin), "r37-life")
    assert real == sim
    assert real["inspect"] == (True, "r37-life", "running", True, True)
    assert real["logs"] == ["hello", "oops"] and real["stop"] == (0, "r37-life\n")
    assert real["stopped"] == ("exited", 0, True, True)
    assert real["stop missing"] == (1, "Error response from daemon: No such container: r37-nope")


# ---- docker run whose start fails -----------------------------------------------------------------------


def failed_start(d: Real | Standin, name: str, *args: str) -> tuple[object, ...]:
    run = d.docker("run", "-d", "--name", name, *args)
    cid = dk.container_id_from_output(run.stdout)
    [state] = dk.parse_inspect(d.docker(*dk.inspect_argv(name)[1:]).stdout)
    again = d.docker("run", "-d", "--name", name, d.image, "true")     # the name is taken
    return (run.rc, cid == state.id, state.status, state.start_failed, state.running, again.rc,
            f'The container name "/{name}" is already in use' in again.stderr)


def test_failed_start_leaves_a_created_container_on_both(real_docker, standin) -> None:
    real, sim = Real(real_docker), Standin(standin)
    standin.fault("no-nvidia-runtime")
    gpus = (failed_start(real, "r37-gpus", "--gpus", "all", real.image, "sleep", "1"),
            failed_start(sim, "r37-gpus", "--gpus", "all", sim.image, "sleep", "1"))
    assert gpus[0] == gpus[1] == (125, True, "created", True, False, 125, True)
    [r] = dk.parse_inspect(real.docker("inspect", "r37-gpus").stdout)
    [s] = dk.parse_inspect(sim.docker("inspect", "r37-gpus").stdout)
    assert r.error == s.error == 'could not select device driver "" with capabilities: [[gpu]]'
    assert r.exit_code == s.exit_code == 128
    bad = (failed_start(real, "r37-badcmd", real.image, "/no/such/binary"),
           failed_start(sim, "r37-badcmd", sim.image, "/no/such/binary"))
    assert bad[0] == bad[1] == (127, True, "created", True, False, 125, True)
    [r] = dk.parse_inspect(real.docker("inspect", "r37-badcmd").stdout)
    [s] = dk.parse_inspect(sim.docker("inspect", "r37-badcmd").stdout)
    # runc's wording: 20.10 stats the path, the stand-in (a Docker 28 daemon) looks it up in $PATH
    for state in (r, s):
        assert state.error.startswith("failed to create shim task: OCI runtime create failed: runc create "
                                      'failed: unable to start container process: exec: "/no/such/binary"')
    # a created container can be removed (the cockpit does so only for its own, after archiving its log)
    for d, state in ((real, r), (sim, s)):
        assert d.docker("logs", "-t", state.id).rc == 0
        assert d.docker(*dk.rm_argv(state.id)[1:]).rc == 0


# ---- docker stop of a PID 1 without a SIGTERM handler ------------------------------------------------


def stop_timed(d: Real | Standin, name: str, *cmd: str) -> tuple[int, float, int | None, bool]:
    run = d.docker("run", "-d", "--network", "none", "--name", name, d.image, *cmd)
    assert run.rc == 0, run
    time.sleep(0.5)                      # let sh install its trap
    t0 = time.monotonic()
    stop = d.docker("stop", "-t", str(STOP_GRACE), name)
    took = time.monotonic() - t0
    [state] = dk.parse_inspect(d.docker(*dk.inspect_argv(name)[1:]).stdout)
    return stop.rc, took, state.exit_code, state.oom_killed


def test_pid1_without_sigterm_handler_is_killed_after_the_timeout_on_both(real_docker, standin) -> None:
    for d in (Real(real_docker), Standin(standin)):
        rc, took, code, oom = stop_timed(d, "r37-pid1", "sleep", "1000")
        assert (rc, code, oom) == (0, 137, False), d.name
        assert took >= STOP_GRACE - 0.2, (d.name, took)          # docker waited the whole timeout
        rc, took, code, oom = stop_timed(d, "r37-handler", "sh", "-c", SCRIPT)
        assert (rc, code, oom) == (0, 0, False), d.name
        assert took < STOP_GRACE + 30                              # no deadline on a loaded machine


# ---- image inspect ---------------------------------------------------------------------------------------


def test_image_inspect_json_reads_the_id_on_both(real_docker, standin) -> None:
    real, sim = Real(real_docker), Standin(standin)
    for d in (real, sim):
        out = d.docker(*dk.image_id_argv(d.image)[1:])
        facts = parse_image_inspect(out.stdout)
        assert out.rc == 0 and facts is not None and not facts.containerd_store, (d.name, out)
        short = d.docker("image", "inspect", d.image, "--format", "{{.Id}}").stdout.strip()
        assert facts.id == short
        missing = d.docker(*dk.image_id_argv("nope:1")[1:])
        assert missing.rc == 1 and parse_image_inspect(missing.merged) is None
    sim_json = sim.docker("image", "inspect", sim.image, "--format", "{{json .}}").stdout
    assert json.loads(sim_json)["Id"] == C.IMAGE_ID


@pytest.fixture(autouse=True)
def _clean(real_docker) -> None:
    """Every test starts with no container on the test daemon."""
    ids = real_docker.run("ps", "-aq").stdout.split()
    if ids:
        real_docker.run("rm", "-f", *ids)
