"""A real Docker daemon of the tests' own: Debian's `dockerd` without networking, its own data root, exec
root, pidfile and socket under a fresh temporary directory; the CLI reaches it through DOCKER_HOST. A
system daemon is never touched. Images are made locally (`docker import` of a busybox rootfs): no
registry is reachable.

`./scripts/test` installs `docker.io` and `busybox-static` when it runs as root; without root, or without
`dockerd`, the tests are skipped with the reason. With `R37_REQUIRE_DOCKER=1` (what `./scripts/test` sets
as root) a daemon that cannot start fails the tests instead of skipping them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

IMAGE = "r37-mini:1"
BUSYBOX_APPLETS = ("sh", "sleep", "echo", "cat", "true", "false", "trap", "kill")
START_TIMEOUT = 90.0


@dataclass
class RealDocker:
    dir: Path
    sock: Path
    pid: int
    cli: str

    @property
    def host(self) -> str:
        return f"unix://{self.sock}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("DOCKER_")}
        env["DOCKER_HOST"] = self.host
        env["DOCKER_CONFIG"] = str(self.dir / "cli-config")   # never the login's ~/.docker
        return env

    def run(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """The real `docker` CLI against this daemon: stdout, stderr and status as a host would give them."""
        return subprocess.run([self.cli, *args], env=self.env(), capture_output=True, text=True,
                              timeout=timeout, check=False)

    def version(self) -> str:
        return self.run("version", "--format", "{{.Client.Version}} / {{.Server.Version}}").stdout.strip()


def unavailable() -> str | None:
    """Why a real daemon cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "a real Docker daemon needs root (./scripts/test installs docker.io as root)"
    if not shutil.which("dockerd"):
        return "dockerd is not installed (./scripts/test installs Debian's docker.io as root)"
    if not shutil.which("docker"):
        return "the docker CLI is not installed"
    if not Path("/bin/busybox").exists():
        return "/bin/busybox is missing (./scripts/test installs busybox-static as root)"
    return None


def _mounts_under(path: Path) -> list[str]:
    prefix = str(path) + "/"
    with contextlib.suppress(OSError), open("/proc/self/mounts") as f:
        return [line.split()[1] for line in f if len(line.split()) > 1 and line.split()[1].startswith(prefix)]
    return []


def start() -> RealDocker:
    """Start a private dockerd and import the test image; raises RuntimeError with dockerd's log tail."""
    d = Path(tempfile.mkdtemp(prefix="r37dk-", dir="/tmp"))     # short: containerd's socket lives under it
    for sub in ("data", "exec", "cli-config"):
        (d / sub).mkdir()
    sock = d / "docker.sock"
    log = open(d / "dockerd.log", "wb")  # noqa: SIM115 - the daemon's own output, closed with it
    proc = subprocess.Popen(
        ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
         "--data-root", str(d / "data"), "--exec-root", str(d / "exec"), "--pidfile", str(d / "dockerd.pid"),
         "-H", f"unix://{sock}", "--log-level", "warn"],
        stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    log.close()
    cli = shutil.which("docker") or "docker"
    dk = RealDocker(d, sock, proc.pid, cli)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if proc.poll() is not None:
            break
        if sock.exists() and dk.run("version", "--format", "{{.Server.Version}}", timeout=30).returncode == 0:
            break
        if time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if proc.poll() is not None or not sock.exists():
        tail = (d / "dockerd.log").read_text(errors="replace")[-1500:]
        stop(dk)
        raise RuntimeError(f"dockerd did not start (exit {proc.poll()}): {tail}")
    rootfs = d / "rootfs.tar"
    with tarfile.open(rootfs, "w") as tar:
        tar.add("/bin/busybox", arcname="bin/busybox")
        for applet in BUSYBOX_APPLETS:
            info = tarfile.TarInfo(f"bin/{applet}")
            info.type, info.linkname = tarfile.SYMTYPE, "busybox"
            tar.addfile(info)
    res = dk.run("import", "-c", 'CMD ["/bin/sh"]', str(rootfs), IMAGE)
    if res.returncode != 0:
        stop(dk)
        raise RuntimeError(f"docker import failed: {res.stderr.strip()}")
    return dk


def stop(dk: RealDocker) -> None:
    """Remove this daemon's containers, stop it (SIGTERM, then SIGKILL) and delete its directory."""
    with contextlib.suppress(Exception):
        ids = dk.run("ps", "-aq", timeout=30).stdout.split()
        if ids:
            dk.run("rm", "-f", *ids, timeout=60)
    for sig, wait in ((signal.SIGTERM, 30.0), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            if sig == signal.SIGTERM:
                os.kill(dk.pid, sig)      # dockerd stops its containerd itself
            else:
                os.killpg(dk.pid, sig)    # its session: dockerd and the containerd it started
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(dk.pid, os.WNOHANG)
            except ChildProcessError:
                done = dk.pid
            if done:
                break
            time.sleep(0.1)
        else:
            continue
        break
    # dockerd leaves its host network namespace's bind mount (exec/netns/default, nsfs) behind: unmount what
    # is mounted under this daemon's own directory, deepest first, and delete the directory only when
    # nothing is mounted there any more
    for point in sorted(_mounts_under(dk.dir), key=len, reverse=True):
        subprocess.run(["umount", point], capture_output=True, check=False, timeout=30)
    if not _mounts_under(dk.dir):
        shutil.rmtree(dk.dir, ignore_errors=True)
