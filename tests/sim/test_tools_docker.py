"""docker stand-in and container shim: load, run/refuse, ps/inspect/logs, stop, faults."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from test_tools_formats import ToolHost, make_host

from cockpit import constants as C
from cockpit.sim.hub import build_hub


@pytest.fixture
def dhost(tmp_path: Path) -> ToolHost:
    hub_dir = tmp_path / "hub"
    build_hub(hub_dir)
    h = make_host(tmp_path, hub_dir)
    h.sh(f"hf download {C.RECIPE_REPO} {C.RUNTIME_ARCHIVE} --local-dir r37", check=True)
    return h


def test_info_text_and_json_and_faults(dhost: ToolHost) -> None:
    text = dhost.sh("docker info", check=True).stdout
    assert " Runtimes: io.containerd.runc.v2 nvidia runc\n" in text and " Architecture: aarch64\n" in text
    info = json.loads(dhost.sh("docker info --format '{{json .}}'", check=True).stdout)
    assert "nvidia" in info["Runtimes"] and info["Architecture"] == "aarch64" and info["NCPU"] == 20
    assert info["ServerVersion"] and info["DefaultRuntime"] == "runc" and info["MemTotal"] > 100 * 2**30
    dhost.fault("no-nvidia-runtime")
    assert "nvidia" not in json.loads(dhost.sh("docker info --format '{{json .Runtimes}}'").stdout)
    dhost.fault("docker-down")
    for sub in ("info", "ps -a", "images"):
        r = dhost.sh(f"docker {sub}")
        assert r.returncode == 1 and r.stderr == (
            "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
            "Is the docker daemon running?\n"
        )


def test_load_and_image_inspect(dhost: ToolHost) -> None:
    missing = dhost.sh(f"docker image inspect {C.IMAGE_TAG} --format '{{{{.Id}}}}'")
    assert missing.returncode == 1 and "No such image" in missing.stderr
    r = dhost.sh(f"docker load -i r37/{C.RUNTIME_ARCHIVE}", check=True)
    assert r.stdout == f"Loaded image: {C.IMAGE_TAG}\n"
    assert dhost.sh(f"docker image inspect {C.IMAGE_TAG} --format '{{{{.Id}}}}'").stdout == C.IMAGE_ID + "\n"
    images = dhost.sh("docker images", check=True).stdout.splitlines()
    assert images[0].split()[:2] == ["REPOSITORY", "TAG"] and images[1].split()[:3] == [
        "local/ds41-r37-spark",
        "runtime",
        C.IMAGE_ID[7:19],
    ]
    dhost.fault("wrong-image-id")
    dhost.sh(f"docker load -i r37/{C.RUNTIME_ARCHIVE}", check=True)
    new_id = dhost.sh(f"docker image inspect {C.IMAGE_TAG} --format '{{{{.Id}}}}'").stdout.strip()
    assert new_id.startswith("sha256:") and new_id != C.IMAGE_ID
    bad = dhost.sh("docker load -i r37/README.md")
    assert bad.returncode == 1


def _wait(pred, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_run_logs_stop_lifecycle(dhost: ToolHost, tmp_path: Path) -> None:
    dhost.sh(f"docker load -i r37/{C.RUNTIME_ARCHIVE}", check=True)
    script = tmp_path / "fake-engine.sh"
    script.write_text(
        '#!/bin/bash\necho "boot $R37_SIM_CONTAINER_DIR $FOO"\necho warn >&2\n'
        "trap 'echo bye; exit 0' TERM\nwhile :; do sleep 0.05; done\n"
    )
    script.chmod(0o755)
    run = dhost.sh(
        f"docker run -d --name ds41_r37 --label {C.LAUNCH_LABEL}=1 -e FOO=bar --network host "
        f"--ipc host --gpus all --entrypoint {script} {C.IMAGE_TAG}",
        check=True,
    )
    cid = run.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", cid)
    again = dhost.sh(f"docker run -d --name ds41_r37 {C.IMAGE_TAG} true")
    assert again.returncode == 125 and again.stderr.startswith(
        f'docker: Error response from daemon: Conflict. The container name "/ds41_r37" is already in use by '
        f'container "{cid}". You have to remove (or rename) that container to be able to reuse that name.'
    )
    ps = json.loads(dhost.sh("docker ps --filter name=^/ds41_r37$ --format '{{json .}}'", check=True).stdout)
    assert ps["Names"] == "ds41_r37" and ps["State"] == "running" and ps["Status"].startswith("Up ")
    assert ps["ID"] == cid[:12] and ps["Labels"] == f"{C.LAUNCH_LABEL}=1" and ps["Image"] == C.IMAGE_TAG
    assert all(isinstance(v, str) for v in ps.values())
    assert dhost.sh("docker ps --filter name=other --format '{{json .}}'").stdout == ""
    _wait(lambda: "warn" in dhost.sh("docker logs ds41_r37").stderr)
    logs = dhost.sh("docker logs -t ds41_r37")
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z boot \S+/docker/containers/" + cid + " bar\n", logs.stdout
    )
    assert logs.stderr.endswith(" warn\n")
    inspect = json.loads(dhost.sh("docker inspect ds41_r37", check=True).stdout)[0]
    assert inspect["Id"] == cid and inspect["Name"] == "/ds41_r37" and inspect["Image"] == C.IMAGE_ID
    assert inspect["State"]["Running"] and inspect["State"]["Pid"] > 0
    assert inspect["Config"]["Labels"] == {C.LAUNCH_LABEL: "1"} and "FOO=bar" in inspect["Config"]["Env"]
    follow = __import__("subprocess").Popen(
        ["bash", "-c", "docker logs -f ds41_r37"], env=dhost.env(), stdout=-1, stderr=-1, text=True
    )
    assert dhost.sh("docker stop -t 5 ds41_r37", check=True).stdout == "ds41_r37\n"
    out, _ = follow.communicate(timeout=15)
    assert follow.returncode == 0 and out.splitlines()[-1] == "bye"
    state = json.loads(dhost.sh("docker inspect --format '{{json .State}}' ds41_r37", check=True).stdout)
    assert state["Status"] == "exited" and state["ExitCode"] == 0 and not state["Running"]
    assert state["FinishedAt"] > state["StartedAt"]
    assert dhost.sh("docker inspect --format '{{.State.Status}}' ds41_r37").stdout == "exited\n"
    assert dhost.sh("docker ps --format '{{.Names}}'").stdout == ""
    assert "Exited (0)" in dhost.sh("docker ps -a", check=True).stdout
    assert dhost.sh("docker logs --tail 1 ds41_r37").stdout == "bye\n"


def test_killed_and_oom_exit_codes(dhost: ToolHost, tmp_path: Path) -> None:
    dhost.sh(f"docker load -i r37/{C.RUNTIME_ARCHIVE}", check=True)
    stubborn = tmp_path / "stubborn.sh"
    stubborn.write_text("#!/bin/bash\ntrap '' TERM\nwhile :; do sleep 0.05; done\n")
    oom = tmp_path / "oom.sh"
    oom.write_text(
        "#!/bin/bash\necho 'torch.OutOfMemoryError: out of memory' >&2\n"
        'touch "$R37_SIM_CONTAINER_DIR/oom_killed"\nkill -KILL $$\n'
    )
    for s in (stubborn, oom):
        s.chmod(0o755)
    dhost.sh(f"docker run -d --name a --entrypoint {stubborn} {C.IMAGE_TAG}", check=True)
    dhost.sh("docker stop -t 1 a", check=True)
    assert dhost.sh("docker inspect --format '{{.State.ExitCode}}' a").stdout == "137\n"
    dhost.sh(f"docker run -d --name b --entrypoint {oom} {C.IMAGE_TAG}", check=True)
    _wait(lambda: dhost.sh("docker inspect --format '{{.State.Status}}' b").stdout == "exited\n")
    st = json.loads(dhost.sh("docker inspect --format '{{json .State}}' b").stdout)
    assert st["OOMKilled"] is True and st["ExitCode"] == 137
    running = dhost.sh(f"docker run -d --name c --entrypoint {stubborn} {C.IMAGE_TAG}", check=True)
    refused = dhost.sh("docker rm c")
    assert refused.returncode == 1 and "container is running" in refused.stderr
    assert dhost.sh("docker rm -f c", check=True).stdout == "c\n"
    assert running.stdout.strip()[:12] not in dhost.sh("docker ps -a -q").stdout


def test_run_errors_and_foreground_nvidia_smi(dhost: ToolHost) -> None:
    unknown = dhost.sh(f"docker run -d --name x {C.IMAGE_TAG} vllm serve /m")
    assert unknown.returncode == 125
    assert unknown.stderr.startswith(f"Unable to find image '{C.IMAGE_TAG}' locally\n")
    dhost.sh(f"docker load -i r37/{C.RUNTIME_ARCHIVE}", check=True)
    fg = dhost.sh(f"docker run --rm --gpus all --entrypoint nvidia-smi {C.IMAGE_TAG}", check=True)
    assert "NVIDIA GB10" in fg.stdout
    assert dhost.sh("docker ps -a -q").stdout == ""
    dhost.fault("no-nvidia-runtime")
    nogpu = dhost.sh(f"docker run --rm --gpus all --entrypoint nvidia-smi {C.IMAGE_TAG}")
    assert nogpu.returncode == 125 and "could not select device driver" in nogpu.stderr
