"""`docker` CLI stand-in with state under `<root>/docker` (see `_docker`); containers run via the shim.

Subcommands: info, version, ps, inspect, image inspect|ls, images, load, run, exec, logs, stop, rm.

`exec [-i] [-t] [-d] [-e K=V] [-w DIR] [-u USER] NAME CMD…` refuses a container that does not exist or
does not run (docker's messages, exit 1), then becomes CMD (found on the host PATH, as the container's
own command is) with the container's view: the environment its command got (`run -e`), HOSTNAME (the
host's name), TERM=xterm with `-t`, cwd its `--workdir` or `/`. `-i` keeps stdin (else /dev/null); `-t`
uses the session's terminal (with `-i`, refused when stdin is none, like docker), without `-t` a terminal
stays the command's too; `-u` is accepted but the command runs as the host's user; `-d` leaves it running
in the background. An interactive bash gets a PS1 (and a PROMPT_COMMAND that keeps it over the machine's
bashrc) naming the simulated host, since bash's own host escape would name the real machine.
Faults: `docker-down` (every subcommand fails like a dead daemon), `docker-denied` (like a login outside
the docker group: the socket refuses it); with either, `info --format` prints CLI 28's empty info object on
stdout and the reason on stderr (exit 1). `no-nvidia-runtime` (no `nvidia` runtime in `info`; `run --gpus`
creates the container, cannot start it and leaves it `created`, printing its ID, exit 125),
`wrong-image-id` (`load` gives the image another ID). A command that cannot be run leaves its container
`created` too (exit 127), and a container's command without a SIGTERM handler ignores `docker stop`'s
SIGTERM until the timeout's SIGKILL (137), as PID 1 of a real container does.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import sys
import time

from cockpit.sim.tools import _docker, _gotemplate, _host

SERVER_VERSION = "28.3.3"
DOWN = "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
DENIED = ("permission denied while trying to connect to the Docker daemon socket at "
          "unix:///var/run/docker.sock: "
          'Get "http://%2Fvar%2Frun%2Fdocker.sock/v1.51/{path}": dial unix /var/run/docker.sock: connect: '
          "permission denied")
NCPU = 20
MEM_TOTAL = 127600748 * 1024
PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class DockerError(Exception):
    def __init__(self, message: str, code: int = 1):
        super().__init__(message)
        self.code = code


def out(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# --- info / version ---------------------------------------------------------------------------


def info_obj() -> dict:
    runtimes = {
        "io.containerd.runc.v2": {"path": "runc", "status": {}},
        "runc": {"path": "runc", "status": {}},
    }
    if not _host.fault("no-nvidia-runtime"):
        runtimes["nvidia"] = {"path": "nvidia-container-runtime"}
    cs = _docker.containers()
    running = sum(1 for c in cs if c["State"]["Running"])
    spec = _host.spec()
    return {
        "ID": f"5d1f2b7c-r37-{spec['rank']}",
        "Containers": len(cs),
        "ContainersRunning": running,
        "ContainersPaused": 0,
        "ContainersStopped": len(cs) - running,
        "Images": len(_docker.images()),
        "Driver": "overlay2",
        "DriverStatus": [["Backing Filesystem", "extfs"], ["Supports d_type", "true"]],
        "Plugins": {
            "Volume": ["local"],
            "Network": ["bridge", "host", "ipvlan", "macvlan", "null", "overlay"],
            "Log": [
                "awslogs",
                "fluentd",
                "gcplogs",
                "gelf",
                "journald",
                "json-file",
                "local",
                "splunk",
                "syslog",
            ],
        },
        "MemoryLimit": True,
        "SwapLimit": True,
        "CpuCfsPeriod": True,
        "CpuCfsQuota": True,
        "IPv4Forwarding": True,
        "Debug": False,
        "NFd": 31,
        "NGoroutines": 48,
        "SystemTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "LoggingDriver": "json-file",
        "CgroupDriver": "systemd",
        "CgroupVersion": "2",
        "KernelVersion": "6.11.0-1016-nvidia",
        "OperatingSystem": "Ubuntu 24.04.3 LTS",
        "OSVersion": "24.04",
        "OSType": "linux",
        "Architecture": "aarch64",
        "NCPU": NCPU,
        "MemTotal": MEM_TOTAL,
        "IndexServerAddress": "https://index.docker.io/v1/",
        "DockerRootDir": "/var/lib/docker",
        "Name": spec["hostname"],
        "Labels": [],
        "ExperimentalBuild": False,
        "ServerVersion": SERVER_VERSION,
        "Runtimes": runtimes,
        "DefaultRuntime": "runc",
        "LiveRestoreEnabled": False,
        "Isolation": "",
        "InitBinary": "docker-init",
        "ContainerdCommit": {"ID": "05044ec0a9a75232cad458027ca83437aae3f4da"},
        "RuncCommit": {"ID": "v1.2.5-0-g59923ef"},
        "SecurityOptions": ["name=apparmor", "name=seccomp,profile=builtin", "name=cgroupns"],
        "Warnings": None,
    }


def empty_info_obj() -> dict:
    """What the Docker 28 CLI prints for `docker info --format '{{json .}}'` without a daemon to ask
    (down, or its socket refused): the whole object, every server field empty, no `ServerErrors`."""
    return {
        "ID": "", "Containers": 0, "ContainersRunning": 0, "ContainersPaused": 0, "ContainersStopped": 0,
        "Images": 0, "Driver": "", "DriverStatus": None,
        "Plugins": {"Volume": None, "Network": None, "Authorization": None, "Log": None},
        "MemoryLimit": False, "SwapLimit": False, "CpuCfsPeriod": False, "CpuCfsQuota": False,
        "CPUShares": False, "CPUSet": False, "PidsLimit": False, "IPv4Forwarding": False, "Debug": False,
        "NFd": 0, "OomKillDisable": False, "NGoroutines": 0, "SystemTime": "", "LoggingDriver": "",
        "CgroupDriver": "", "NEventsListener": 0, "KernelVersion": "", "OperatingSystem": "", "OSVersion": "",
        "OSType": "", "Architecture": "", "IndexServerAddress": "", "RegistryConfig": None, "NCPU": 0,
        "MemTotal": 0, "GenericResources": None, "DockerRootDir": "", "HttpProxy": "", "HttpsProxy": "",
        "NoProxy": "", "Name": "", "Labels": None, "ExperimentalBuild": False, "ServerVersion": "",
        "Runtimes": None, "DefaultRuntime": "",
        "Swarm": {"NodeID": "", "NodeAddr": "", "LocalNodeState": "", "ControlAvailable": False, "Error": "",
                  "RemoteManagers": None},
        "LiveRestoreEnabled": False, "Isolation": "", "InitBinary": "", "ContainerdCommit": {"ID": ""},
        "RuncCommit": {"ID": ""}, "InitCommit": {"ID": ""}, "SecurityOptions": None, "CDISpecDirs": None,
        "Warnings": None,
        "ClientInfo": {"Debug": False, "Version": SERVER_VERSION, "DefaultAPIVersion": "1.51",
                       "GitCommit": "980b856", "GoVersion": "go1.24.5", "Os": "linux", "Arch": "arm64",
                       "BuildTime": "Fri Jul 25 11:32:19 2025", "Context": "default", "Plugins": [],
                       "Warnings": None},
    }


def info_text(i: dict) -> str:
    return f"""Client: Docker Engine - Community
 Version:    {SERVER_VERSION}
 Context:    default
 Debug Mode: false
 Plugins:
  buildx: Docker Buildx (Docker Inc.)
    Version:  v0.26.1
    Path:     /usr/libexec/docker/cli-plugins/docker-buildx
  compose: Docker Compose (Docker Inc.)
    Version:  v2.39.1
    Path:     /usr/libexec/docker/cli-plugins/docker-compose

Server:
 Containers: {i["Containers"]}
  Running: {i["ContainersRunning"]}
  Paused: 0
  Stopped: {i["ContainersStopped"]}
 Images: {i["Images"]}
 Server Version: {SERVER_VERSION}
 Storage Driver: overlay2
  Backing Filesystem: extfs
  Supports d_type: true
  Using metacopy: false
  Native Overlay Diff: true
  userxattr: false
 Logging Driver: json-file
 Cgroup Driver: systemd
 Cgroup Version: 2
 Plugins:
  Volume: local
  Network: bridge host ipvlan macvlan null overlay
  Log: awslogs fluentd gcplogs gelf journald json-file local splunk syslog
 CDI spec directories:
  /etc/cdi
  /var/run/cdi
 Swarm: inactive
 Runtimes: {" ".join(sorted(i["Runtimes"]))}
 Default Runtime: {i["DefaultRuntime"]}
 Init Binary: docker-init
 containerd version: 05044ec0a9a75232cad458027ca83437aae3f4da
 runc version: v1.2.5-0-g59923ef
 init version: de40ad0
 Security Options:
  apparmor
  seccomp
   Profile: builtin
  cgroupns
 Kernel Version: {i["KernelVersion"]}
 Operating System: {i["OperatingSystem"]}
 OSType: linux
 Architecture: aarch64
 CPUs: {NCPU}
 Total Memory: {MEM_TOTAL / (1 << 30):.1f}GiB
 Name: {i["Name"]}
 ID: {i["ID"]}
 Docker Root Dir: /var/lib/docker
 Debug Mode: false
 Experimental: false
 Insecure Registries:
  ::1/128
  127.0.0.0/8
 Live Restore Enabled: false
"""


def cmd_info(args: list[str]) -> int:
    fmt = _opt(args, "--format", "-f")
    i = info_obj()
    out(_gotemplate.render(fmt, i) if fmt else info_text(i))
    return 0


def cmd_version(args: list[str]) -> int:
    fmt = _opt(args, "--format", "-f")
    v = {
        "Client": {"Version": SERVER_VERSION, "ApiVersion": "1.51", "Os": "linux", "Arch": "arm64"},
        "Server": {"Version": SERVER_VERSION, "ApiVersion": "1.51", "Os": "linux", "Arch": "arm64"},
    }
    if fmt:
        out(_gotemplate.render(fmt, v))
    else:
        out(
            f"Client: Docker Engine - Community\n Version:           {SERVER_VERSION}\n"
            " API version:       1.51\n"
            f" OS/Arch:           linux/arm64\n\nServer: Docker Engine - Community\n Engine:\n"
            f"  Version:          {SERVER_VERSION}\n  API version:      1.51 (minimum version 1.24)\n"
            "  OS/Arch:          linux/arm64"
        )
    return 0


# --- option helpers ---------------------------------------------------------------------------


def _opt(args: list[str], *names: str) -> str | None:
    """Remove `--name VALUE` / `--name=VALUE` from args and return the value (last wins)."""
    value = None
    i = 0
    while i < len(args):
        key, eq, val = args[i].partition("=")
        if key in names:
            if eq:
                del args[i]
                value = val
            else:
                value = args[i + 1] if i + 1 < len(args) else ""
                del args[i : i + 2]
            continue
        i += 1
    return value


def _opts(args: list[str], *names: str) -> list[str]:
    values = []
    while (v := _opt(args, *names)) is not None:
        values.append(v)
    return values


def _flag(args: list[str], *names: str) -> bool:
    hit = False
    for n in names:
        while n in args:
            args.remove(n)
            hit = True
    return hit


# --- ps ---------------------------------------------------------------------------------------


def _status(st: dict) -> str:
    now = time.time()
    if st["Status"] == "running":
        return "Up " + _docker.human_duration(now - _docker.parse_time_ns(st["StartedAt"]) / 1e9)
    if st["Status"] == "exited":
        return (
            f"Exited ({st['ExitCode']}) "
            f"{_docker.human_duration(now - _docker.parse_time_ns(st['FinishedAt']) / 1e9)} ago"
        )
    return st["Status"].capitalize()


def ps_row(c: dict) -> dict:
    cfg = c["Config"]
    cmd = " ".join(list(cfg.get("Entrypoint") or []) + list(cfg.get("Cmd") or []))
    created = _docker.parse_time_ns(c["Created"]) / 1e9
    return {
        "Command": json.dumps(cmd if len(cmd) <= 20 else cmd[:19] + "…", ensure_ascii=False),
        "CreatedAt": time.strftime("%Y-%m-%d %H:%M:%S +0000 UTC", time.gmtime(created)),
        "ID": c["Id"][:12],
        "Image": cfg["Image"],
        "Labels": ",".join(f"{k}={v}" for k, v in sorted((cfg.get("Labels") or {}).items())),
        "LocalVolumes": "0",
        "Mounts": ",".join(m["Source"] for m in c.get("Mounts", [])),
        "Names": c["Name"].lstrip("/"),
        "Networks": c["HostConfig"].get("NetworkMode", "default"),
        "Ports": "",
        "RunningFor": _docker.human_duration(time.time() - created) + " ago",
        "Size": "0B",
        "State": c["State"]["Status"],
        "Status": _status(c["State"]),
    }


def _filter_ok(c: dict, filters: list[str]) -> bool:
    by_key: dict[str, list[str]] = {}
    for f in filters:
        k, _, v = f.partition("=")
        by_key.setdefault(k, []).append(v)
    labels = c["Config"].get("Labels") or {}
    tests = {
        "name": lambda v: re.search(v, c["Name"]) is not None,
        "id": lambda v: c["Id"].startswith(v),
        "status": lambda v: c["State"]["Status"] == v,
        "ancestor": lambda v: v in (c["Config"]["Image"], c["Image"]),
        "label": lambda v: (
            v.partition("=")[0] in labels
            and (not v.partition("=")[1] or labels[v.partition("=")[0]] == v.partition("=")[2])
        ),
    }
    for k, values in by_key.items():
        if k not in tests:
            raise DockerError(f"Error response from daemon: invalid filter '{k}'")
        if k == "label":
            if not all(tests[k](v) for v in values):
                return False
        elif not any(tests[k](v) for v in values):
            return False
    return True


def table(rows: list[list[str]]) -> str:
    """docker's tabwriter: min width 10, padding 3; the last column is not padded."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [cell.ljust(max(widths[i] + 3, 10)) for i, cell in enumerate(r[:-1])]
        lines.append(("".join(cells) + r[-1]).rstrip())
    return "\n".join(lines) + "\n"


def cmd_ps(args: list[str]) -> int:
    fmt = _opt(args, "--format")
    filters = _opts(args, "--filter", "-f")
    show_all = _flag(args, "-a", "--all")
    quiet = _flag(args, "-q", "--quiet")
    no_trunc = _flag(args, "--no-trunc")
    if _flag(args, "-aq", "-qa"):
        show_all = quiet = True
    cs = [c for c in _docker.containers() if (show_all or c["State"]["Running"]) and _filter_ok(c, filters)]
    if quiet:
        for c in cs:
            out(c["Id"] if no_trunc else c["Id"][:12])
        return 0
    if fmt:
        for c in cs:
            out(_gotemplate.render(fmt, ps_row(c)))
        return 0
    rows = [["CONTAINER ID", "IMAGE", "COMMAND", "CREATED", "STATUS", "PORTS", "NAMES"]]
    for c in cs:
        r = ps_row(c)
        rows.append([r["ID"], r["Image"], r["Command"], r["RunningFor"], r["Status"], r["Ports"], r["Names"]])
    sys.stdout.write(table(rows))
    return 0


# --- inspect / images -------------------------------------------------------------------------


def cmd_inspect(args: list[str], kind: str = "any") -> int:
    fmt = _opt(args, "--format", "-f")
    _opt(args, "--type")
    _flag(args, "-s", "--size")
    objs, rc = [], 0
    for ref in args:
        obj = None
        if kind in ("any", "container"):
            obj = _docker.find_container(ref)
        if obj is None and kind in ("any", "image"):
            obj = _docker.find_image(ref)
        if obj is None:
            what = {"any": "object", "container": "container", "image": "image"}[kind]
            sys.stderr.write(f"Error: No such {what}: {ref}\n")
            rc = 1
            continue
        objs.append(obj)
    if fmt:
        for o in objs:
            out(_gotemplate.render(fmt, o))
    else:
        out(json.dumps(objs, indent=4))
    return rc


def cmd_images(args: list[str]) -> int:
    fmt = _opt(args, "--format")
    quiet = _flag(args, "-q", "--quiet")
    rows = [["REPOSITORY", "TAG", "IMAGE ID", "CREATED", "SIZE"]]
    for img in _docker.images():
        tags = img.get("RepoTags") or ["<none>:<none>"]
        for tag in tags:
            repo, _, t = tag.rpartition(":")
            created = (
                _docker.human_duration(time.time() - _docker.parse_time_ns(img["Created"]) / 1e9) + " ago"
            )
            row = {
                "Repository": repo,
                "Tag": t,
                "ID": img["Id"].removeprefix("sha256:")[:12],
                "CreatedSince": created,
                "CreatedAt": img["Created"],
                "Size": _docker.human_size(img["Size"]),
                "Containers": "N/A",
                "Digest": "<none>",
                "SharedSize": "N/A",
                "UniqueSize": "N/A",
                "VirtualSize": _docker.human_size(img["Size"]),
            }
            if quiet:
                out(row["ID"])
            elif fmt:
                out(_gotemplate.render(fmt, row))
            else:
                rows.append([repo, t, row["ID"], created, row["Size"]])
    if not quiet and not fmt:
        sys.stdout.write(table(rows))
    return 0


def cmd_image(args: list[str]) -> int:
    sub = args.pop(0) if args else ""
    if sub == "inspect":
        return cmd_inspect(args, "image")
    if sub in ("ls", "list"):
        return cmd_images(args)
    if sub == "load":
        return cmd_load(args)
    raise DockerError(
        f"docker: unknown command: docker image {sub}\n\nRun 'docker image --help' for more information"
    )


# --- load -------------------------------------------------------------------------------------


def cmd_load(args: list[str]) -> int:
    import tarfile  # only here: start-up cost matters, every stand-in call is a new process

    path = _opt(args, "-i", "--input")
    _flag(args, "-q", "--quiet")
    try:
        tar = tarfile.open(path) if path else tarfile.open(fileobj=sys.stdin.buffer, mode="r|")  # noqa: SIM115
    except FileNotFoundError:
        raise DockerError(f"open {path}: no such file or directory") from None
    except tarfile.TarError:
        raise DockerError("Error response from daemon: unexpected EOF") from None
    with tar:
        members = {}
        for m in tar:
            if m.name in ("manifest.json", "index.json", "repositories"):
                members[m.name] = tar.extractfile(m).read()  # type: ignore[union-attr]
            else:
                members[m.name] = b""
    if "manifest.json" not in members:
        raise DockerError(
            "Error response from daemon: open /var/lib/docker/tmp/docker-import/manifest.json: "
            "no such file or directory"
        )
    try:
        manifest = json.loads(members["manifest.json"])
        entry = manifest[0]
        config = entry["Config"]
        tags = list(entry.get("RepoTags") or [])
    except (ValueError, LookupError, TypeError):
        raise DockerError("Error response from daemon: invalid manifest.json") from None
    if config not in members:
        raise DockerError(f'Error response from daemon: file integrity checksum failed for "{config}"')
    # The sim trusts the config blob's name as the image ID (a real daemon hashes the blob).
    hexid = config.rsplit("/", 1)[-1].removesuffix(".json")
    if _host.fault("wrong-image-id"):
        import hashlib

        hexid = hashlib.sha256(("wrong-image-id:" + hexid).encode()).hexdigest()
    size = int(entry.get("SimImageSize", os.path.getsize(path) if path else 0))
    _docker.save_image(
        {
            "Id": f"sha256:{hexid}",
            "RepoTags": tags,
            "Created": _host.rfc3339nano(),
            "Size": size,
            "Architecture": "arm64",
            "Os": "linux",
            "Config": {
                "Entrypoint": None,
                "Cmd": ["bash"],
                "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
            },
        }
    )
    for t in tags:
        out(f"Loaded image: {t}")
    if not tags:
        out(f"Loaded image ID: sha256:{hexid}")
    return 0


# --- run --------------------------------------------------------------------------------------

RUN_VALUE_OPTS = (
    "--name",
    "--label",
    "-l",
    "-e",
    "--env",
    "--network",
    "--net",
    "--ipc",
    "--gpus",
    "--device",
    "--ulimit",
    "-v",
    "--volume",
    "--shm-size",
    "--entrypoint",
    "--runtime",
    "--restart",
    "-w",
    "--workdir",
    "-u",
    "--user",
    "--pid",
    "--cap-add",
    "--security-opt",
    "--env-file",
    "-p",
    "--publish",
    "--hostname",
    "-h",
    "--memory",
    "-m",
    "--cpus",
    "--log-driver",
    "--log-opt",
    "--platform",
    "--pull",
    "--mount",
    "--init-path",
    "--group-add",
    "--add-host",
)
RUN_BOOL_OPTS = (
    "-d",
    "--detach",
    "--rm",
    "-i",
    "--interactive",
    "-t",
    "--tty",
    "--privileged",
    "--init",
    "-it",
    "-ti",
    "-dit",
    "-itd",
)


def parse_run(args: list[str]) -> tuple[dict[str, list[str]], set[str], str, list[str]]:
    vals: dict[str, list[str]] = {}
    bools: set[str] = set()
    i = 0
    while i < len(args):
        a = args[i]
        if not a.startswith("-") or a == "-":
            return vals, bools, a, args[i + 1 :]
        key, eq, val = a.partition("=")
        if key in RUN_VALUE_OPTS:
            if not eq:
                i += 1
                if i >= len(args):
                    raise DockerError(f"flag needs an argument: {key}", 125)
                val = args[i]
            vals.setdefault(key, []).append(val)
        elif a in RUN_BOOL_OPTS:
            bools.update(
                {"-d"}
                if "d" in a.strip("-")
                and a not in ("--rm",)
                and a != "--privileged"
                and a != "--detach"
                and len(a) <= 4
                else set()
            )
            bools.add(a)
        else:
            raise DockerError(f"unknown flag: {key}\nSee 'docker run --help'.", 125)
        i += 1
    raise DockerError("\"docker run\" requires at least 1 argument.\nSee 'docker run --help'.", 125)


def _get(vals: dict[str, list[str]], *keys: str) -> list[str]:
    return [v for k in keys for v in vals.get(k, [])]


def _mount(spec_: str) -> dict:
    parts = spec_.split(":")
    src, dst = parts[0], parts[1] if len(parts) > 1 else parts[0]
    mode = parts[2] if len(parts) > 2 else ""
    return {
        "Type": "bind",
        "Source": src,
        "Destination": dst,
        "Mode": mode,
        "RW": "ro" not in mode.split(","),
        "Propagation": "rprivate",
    }


def cmd_run(args: list[str]) -> int:
    import secrets
    import subprocess

    vals, bools, image_ref, cmd = parse_run(args)
    detach = bool(bools & {"-d", "--detach", "-dit", "-itd"})
    names = _get(vals, "--name")
    name = names[-1] if names else None
    if name is not None and not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*", name):
        raise DockerError(
            f"docker: Error response from daemon: Invalid container name ({name}), only "
            "[a-zA-Z0-9][a-zA-Z0-9_.-] are allowed.\nSee 'docker run --help'.",
            125,
        )
    if name is not None:
        existing = _docker.find_container(name)
        if existing is not None and existing["Name"] == "/" + name:
            raise DockerError(
                f'docker: Error response from daemon: Conflict. The container name "/{name}" is '
                f'already in use by container "{existing["Id"]}". You have to remove (or rename) '
                "that container to be able to reuse that name.\nSee 'docker run --help'.",
                125,
            )
    image = _docker.find_image(image_ref)
    if image is None:
        repo = _docker.normalize_ref(image_ref)
        sys.stderr.write(f"Unable to find image '{repo}' locally\n")
        raise DockerError(
            f"docker: Error response from daemon: pull access denied for {repo.rsplit(':', 1)[0]}, "
            "repository does not exist or may require 'docker login': denied: requested access "
            "to the resource is denied\n\nRun 'docker run --help' for more information",
            125,
        )
    gpus = _get(vals, "--gpus")
    if "nvidia" in _get(vals, "--runtime") and _host.fault("no-nvidia-runtime"):
        raise DockerError(  # refused before the container is created (real daemon: nothing printed)
            "docker: Error response from daemon: Unknown runtime specified nvidia\n\n"
            "Run 'docker run --help' for more information",
            125,
        )
    entry = _get(vals, "--entrypoint")
    labels = dict(lbl.partition("=")[::2] for lbl in _get(vals, "--label", "-l"))
    env = [e if "=" in e else f"{e}={os.environ.get(e, '')}" for e in _get(vals, "-e", "--env")]
    cid = secrets.token_hex(32)
    name = name or f"sim_{cid[:8]}"
    img_cfg = image.get("Config", {})
    cfg = {
        "Id": cid,
        "Created": _host.rfc3339nano(),
        "Path": (entry or cmd or ["bash"])[0],
        "Args": (cmd if entry else cmd[1:]),
        "Image": image["Id"],
        "Name": "/" + name,
        "RestartCount": 0,
        "Driver": "overlay2",
        "Platform": "linux",
        "LogPath": f"/var/lib/docker/containers/{cid}/{cid}-json.log",
        "HostConfig": {
            "NetworkMode": (_get(vals, "--network", "--net") or ["bridge"])[-1],
            "IpcMode": (_get(vals, "--ipc") or ["private"])[-1],
            "AutoRemove": "--rm" in bools,
            "Binds": _get(vals, "-v", "--volume"),
            "Devices": [
                {
                    "PathOnHost": d.split(":")[0],
                    "PathInContainer": d.split(":")[-1],
                    "CgroupPermissions": "rwm",
                }
                for d in _get(vals, "--device")
            ],
            "Ulimits": [
                {
                    "Name": u.split("=")[0],
                    "Soft": u.split("=")[1].split(":")[0],
                    "Hard": u.split("=")[1].split(":")[-1],
                }
                for u in _get(vals, "--ulimit")
                if "=" in u
            ],
            "ShmSize": (_get(vals, "--shm-size") or ["64m"])[-1],
            "DeviceRequests": [{"Driver": "", "Count": -1, "Capabilities": [["gpu"]]}] if gpus else None,
            "Runtime": (_get(vals, "--runtime") or ["runc"])[-1],
        },
        "Mounts": [_mount(v) for v in _get(vals, "-v", "--volume")],
        "Config": {
            "Hostname": _host.spec()["hostname"],
            "Env": env + list(img_cfg.get("Env") or []),
            "Cmd": cmd or ([] if entry else list(img_cfg.get("Cmd") or [])),
            "Image": image_ref,
            "Entrypoint": entry or img_cfg.get("Entrypoint"),
            "Labels": labels,
            "WorkingDir": (_get(vals, "-w", "--workdir") or [""])[-1],
        },
        "NetworkSettings": {"Networks": {(_get(vals, "--network", "--net") or ["bridge"])[-1]: {}}},
    }
    cdir = _docker.container_dir(cid)
    os.makedirs(cdir)
    _docker.write_json(os.path.join(cdir, "config.json"), cfg)
    open(_docker.log_path(cid), "a").close()
    if gpus and _host.fault("no-nvidia-runtime"):
        # a real daemon creates the container, then cannot start it: it stays `created` (holding the name),
        # `docker run -d` has printed its ID and exits 125
        st = _docker.read_state(cid)
        st.update(ExitCode=128, Error='could not select device driver "" with capabilities: [[gpu]]')
        _docker.write_state(cid, st)
        if detach:
            out(cid)
        raise DockerError(f"docker: Error response from daemon: {st['Error']}\n\n"
                          "Run 'docker run --help' for more information", 125)
    spec = _host.spec()
    python = spec.get("python") or sys.executable
    shim = [python, "-m", "cockpit.sim.container", "--root", _host.root(), "--id", cid]
    env_shim = dict(
        os.environ,
        PYTHONPATH=PACKAGE_PARENT
        + (os.pathsep + os.environ["PYTHONPATH"] if os.environ.get("PYTHONPATH") else ""),
    )
    env_shim[_host.ROOT_ENV] = _host.root()
    if not detach:
        rc = subprocess.call([*shim, "--attach"], env=env_shim)
        st = _docker.read_state(cid)
        if cfg["HostConfig"]["AutoRemove"]:
            import shutil

            shutil.rmtree(cdir, ignore_errors=True)
        if st.get("Error"):
            raise DockerError(
                f"docker: Error response from daemon: {st['Error']}\n\n"
                "Run 'docker run --help' for more information",
                rc,
            )
        return rc
    subprocess.Popen(
        shim,
        env=env_shim,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    deadline = time.time() + 10
    while time.time() < deadline:
        st = _docker.read_state(cid)
        if st["Status"] in ("running", "exited") or st.get("Error"):
            break
        time.sleep(0.02)
    if st.get("Error"):
        out(cid)       # a real `docker run -d` prints the ID of the container it created, then the error
        raise DockerError(
            f"docker: Error response from daemon: {st['Error']}\n\n"
            "Run 'docker run --help' for more information",
            127,
        )
    if _host.fault("lost-during-run"):
        _lose_host_now()
    out(cid)
    return 0


def _lose_host_now() -> None:
    """The `lost-during-run` fault (one-shot): the container runs, then the host vanishes before
    `docker run` answers (it switches `host-down` on), so the caller never learns the container ID."""
    faults = os.path.join(_host.root(), "faults")
    with contextlib.suppress(OSError):
        os.replace(os.path.join(faults, "lost-during-run"), os.path.join(faults, "host-down"))
    time.sleep(3.0)


# --- exec -------------------------------------------------------------------------------------

EXEC_VALUE_OPTS = {"-e": "env", "--env": "env", "-w": "workdir", "--workdir": "workdir", "-u": "user",
                   "--user": "user", "--env-file": "env-file", "--detach-keys": "detach-keys"}
EXEC_BOOLS = {"i": "-i", "t": "-t", "d": "-d"}


def parse_exec(args: list[str]) -> tuple[dict[str, list[str]], set[str], list[str]]:
    """Options (values by their long name without dashes, flags as -i/-t/-d/--privileged) and the rest:
    NAME CMD…"""
    vals: dict[str, list[str]] = {}
    flags: set[str] = set()
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        a = args[i]
        key, eq, val = a.partition("=")
        if a == "--":
            i += 1
            break
        if key in EXEC_VALUE_OPTS:
            if not eq:
                i += 1
                if i >= len(args):
                    raise DockerError(f"flag needs an argument: {key}\nSee 'docker exec --help'.", 125)
                val = args[i]
            vals.setdefault(EXEC_VALUE_OPTS[key], []).append(val)
        elif a in ("--interactive", "--tty", "--detach", "--privileged"):
            flags.add({"--interactive": "-i", "--tty": "-t", "--detach": "-d"}.get(a, a))
        elif len(a) > 1 and a[1] != "-" and all(ch in EXEC_BOOLS for ch in a[1:]):
            flags.update(EXEC_BOOLS[ch] for ch in a[1:])
        else:
            raise DockerError(f"unknown flag: {key}\nSee 'docker exec --help'.", 125)
        i += 1
    return vals, flags, args[i:]


def exec_env(c: dict, tty: bool, extra: list[str]) -> dict[str, str]:
    """What a command started by `docker exec` in container `c` sees."""
    from cockpit.sim.container import child_env  # only here: every stand-in call is a new process

    env = child_env(_host.root(), c, _docker.container_dir(c["Id"]))
    hostname = c["Config"].get("Hostname") or _host.spec()["hostname"]
    env["HOSTNAME"] = hostname
    env.pop("PS1", None)
    env.pop("PROMPT_COMMAND", None)
    if tty:
        from cockpit.sim.layout import prompt

        env["TERM"] = "xterm"
        ps1 = prompt(hostname)
        env["PS1"] = ps1
        env["PROMPT_COMMAND"] = f"PS1='{ps1}'"
    for e in extra:
        key, eq, value = e.partition("=")
        env[key] = value if eq else os.environ.get(key, "")
    return env


def env_file_lines(paths: list[str]) -> list[str]:
    """`--env-file` contents as docker reads them: KEY=VALUE or KEY lines; blank and # lines skipped."""
    out = []
    for path in paths:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as exc:
            raise DockerError(f"open {path}: {exc.strerror.lower() if exc.strerror else exc}", 125) from None
        out += [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    return out


def cmd_exec(args: list[str]) -> int:
    import shutil
    import subprocess

    vals, flags, rest = parse_exec(args)
    if len(rest) < 2:
        raise DockerError(
            "\"docker exec\" requires at least 2 arguments.\nSee 'docker exec --help'.\n\n"
            "Usage:  docker exec [OPTIONS] CONTAINER COMMAND [ARG...]\n\n"
            "Execute a command in a running container"
        )
    ref, argv = rest[0], rest[1:]
    c = _docker.find_container(ref)
    if c is None:
        raise DockerError(f"Error response from daemon: No such container: {ref}")
    if not c["State"]["Running"]:
        raise DockerError(f"Error response from daemon: container {c['Id']} is not running")
    tty, interactive = "-t" in flags, "-i" in flags
    if tty and interactive and not os.isatty(0):
        raise DockerError("the input device is not a TTY")
    env = exec_env(c, tty, [*env_file_lines(vals.get("env-file", [])), *vals.get("env", [])])
    exe = shutil.which(argv[0], path=env.get("PATH")) if "/" not in argv[0] else argv[0]
    if exe is None or not os.access(exe, os.X_OK):
        raise DockerError(
            "OCI runtime exec failed: exec failed: unable to start container process: exec: "
            f'"{argv[0]}": executable file not found in $PATH: unknown',
            127,
        )
    cwd = (vals.get("workdir") or [c["Config"].get("WorkingDir") or "/"])[-1]
    if not os.path.isdir(cwd):
        raise DockerError(
            "OCI runtime exec failed: exec failed: unable to start container process: chdir to cwd "
            f'("{cwd}") set in config.json failed: no such file or directory: unknown',
            126,
        )
    if "-d" in flags:
        subprocess.Popen([exe, *argv[1:]], env=env, cwd=cwd, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        return 0
    if not interactive:
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
    sys.stdout.flush()
    os.chdir(cwd)
    os.execve(exe, argv, env)


# --- logs -------------------------------------------------------------------------------------


def _since_ns(text: str) -> int:
    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+(?:\.\d+)?)s)?", text)
    if text and m and any(m.groups()):
        h, mi, s = (float(g or 0) for g in m.groups())
        return time.time_ns() - int((h * 3600 + mi * 60 + s) * 1e9)
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return int(float(text) * 1e9)
    if "T" not in text:
        text += "T00:00:00"
    return _docker.parse_time_ns(text.replace("+00:00", ""))


def _slow_docker_s() -> float:
    """The `slow-docker` fault's delay in seconds (0: off)."""
    if not _host.fault("slow-docker"):
        return 0.0
    value = _host.fault_params("slow-docker").get("delay_s", 8)
    return float(value) if isinstance(value, (int, float)) and 0 < value <= 120 else 8.0


def cmd_logs(args: list[str]) -> int:
    follow = _flag(args, "-f", "--follow")
    stamps = _flag(args, "-t", "--timestamps")
    tail = _opt(args, "-n", "--tail")
    since = _opt(args, "--since")
    _flag(args, "--details")
    for combo in ("-ft", "-tf"):
        if _flag(args, combo):
            follow = stamps = True
    if len(args) != 1:
        raise DockerError("\"docker logs\" requires exactly 1 argument.\nSee 'docker logs --help'.")
    c = _docker.find_container(args[0])
    if c is None:
        raise DockerError(f"Error response from daemon: No such container: {args[0]}")
    since_ns = _since_ns(since) if since else 0
    lag = _slow_docker_s()

    def emit(line: str) -> None:
        try:
            rec = json.loads(line)
        except ValueError:
            return
        if since_ns and _docker.parse_time_ns(rec["time"]) < since_ns:
            return
        if lag:     # a busy host: each line leaves `lag` seconds after it was written
            wait = _docker.parse_time_ns(rec["time"]) / 1e9 + lag - time.time()
            if wait > 0:
                time.sleep(wait)
        stream = sys.stdout if rec.get("stream") == "stdout" else sys.stderr
        stream.write((rec["time"] + " " if stamps else "") + rec["log"])
        stream.flush()

    path = _docker.log_path(c["Id"])
    with open(path, encoding="utf-8") as f:
        lines = f.readlines()
        complete = lines if not lines or lines[-1].endswith("\n") else lines[:-1]
        pos = sum(len(x.encode()) for x in complete)
        if tail not in (None, "all") and int(tail) >= 0:
            complete = complete[len(complete) - int(tail) :] if int(tail) else []
        for line in complete:
            emit(line)
        if not follow:
            return 0
        f.seek(pos)
        buf = ""
        while True:
            chunk = f.read()
            if chunk:
                buf += chunk
                *done, buf = buf.split("\n")
                for line in done:
                    emit(line)
                continue
            if not _docker.read_state(c["Id"])["Running"]:
                rest = f.read()
                for line in (buf + rest).split("\n"):
                    if line:
                        emit(line)
                return 0
            time.sleep(0.05)


# --- stop / rm --------------------------------------------------------------------------------


def _kill_and_wait(c: dict, grace: float) -> None:
    cid = c["Id"]
    st = _docker.read_state(cid)
    if not st["Running"]:
        return
    pid = int(st.get("Pid", 0))
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        if sig == signal.SIGTERM and grace <= 0:
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if sig == signal.SIGKILL:
                os.killpg(pid, sig)  # the command leads its own process group (see the shim)
            elif _docker.catches(pid, sig):
                os.kill(pid, sig)    # PID 1 of a container: a signal it does not catch is dropped
        deadline = time.time() + wait
        while time.time() < deadline:
            if not _docker.read_state(cid)["Running"]:
                return
            time.sleep(0.05)


def cmd_stop(args: list[str]) -> int:
    grace = float(_opt(args, "-t", "--time", "--timeout") or 10)
    _opt(args, "-s", "--signal")
    rc = 0
    for ref in args:
        c = _docker.find_container(ref)
        if c is None:
            sys.stderr.write(f"Error response from daemon: No such container: {ref}\n")
            rc = 1
            continue
        _kill_and_wait(c, grace)
        out(ref)
    return rc


def cmd_rm(args: list[str]) -> int:
    import shutil

    force = _flag(args, "-f", "--force")
    _flag(args, "-v", "--volumes")
    rc = 0
    for ref in args:
        c = _docker.find_container(ref)
        if c is None:
            sys.stderr.write(f"Error response from daemon: No such container: {ref}\n")
            rc = 1
            continue
        if c["State"]["Running"]:
            if not force:
                sys.stderr.write(
                    f'Error response from daemon: cannot remove container "{c["Name"]}": container '
                    "is running: stop the container before removing or force remove\n"
                )
                rc = 1
                continue
            _kill_and_wait(c, 0)
        shutil.rmtree(_docker.container_dir(c["Id"]), ignore_errors=True)
        out(ref)
    return rc


COMMANDS = {
    "info": cmd_info,
    "version": cmd_version,
    "ps": cmd_ps,
    "inspect": cmd_inspect,
    "images": cmd_images,
    "image": cmd_image,
    "load": cmd_load,
    "run": cmd_run,
    "exec": cmd_exec,
    "logs": cmd_logs,
    "stop": cmd_stop,
    "rm": cmd_rm,
}
ALIASES = {
    "container": {
        "ls": "ps",
        "list": "ps",
        "inspect": "inspect",
        "logs": "logs",
        "stop": "stop",
        "rm": "rm",
        "run": "run",
        "exec": "exec",
    }
}


def main(argv: list[str] | None = None) -> int:
    _host.quiet_pipes()
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("--version", "-v"):
        out(f"Docker version {SERVER_VERSION}, build 980b856")
        return 0
    sub = args.pop(0)
    if sub == "container" and args and args[0] in ALIASES["container"]:
        sub = ALIASES["container"][args.pop(0)]
    if sub not in COMMANDS:
        sys.stderr.write(
            f"docker: unknown command: docker {sub}\n\nRun 'docker --help' for more information\n"
        )
        return 1
    if _host.fault("docker-down") or _host.fault("docker-denied"):
        reason = DOWN if _host.fault("docker-down") else DENIED.format(path=sub)
        fmt = _opt(list(args), "--format", "-f") if sub == "info" else None
        if fmt:
            # CLI 28: the client still renders the info object, every server field empty, then the reason
            out(_gotemplate.render(fmt, empty_info_obj()))
        sys.stderr.write(("docker: " if sub == "run" else "") + reason + "\n")
        return 1
    if sub == "inspect" and _slow_docker_s():
        time.sleep(_slow_docker_s())
    try:
        return COMMANDS[sub](args)
    except DockerError as e:
        sys.stderr.write(str(e) + "\n")
        return e.code


if __name__ == "__main__":
    sys.exit(main())
