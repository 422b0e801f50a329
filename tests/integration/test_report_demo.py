"""`r37-cockpit report` on the demo cluster: secrets planted in the config, a container's environment, its
log and the caller's environment never reach the archive; host names, IPs and user names are replaced
consistently (the same value, the same placeholder in every file) unless --no-redact-hosts; the log
excerpt is the one around the first failure; an existing file is never overwritten."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

from simcluster import SimCluster, prepare_hosts

from cockpit.hosts import Fleet, command

SECRETS = ("hf_PlantedConfigToken123456", "sk-plantedcomment123456", "hf_PlantedEnvToken123456",
           "sk-plantedenvkey123456", "plantedpw99", "plantedbearer0123456", "plantedlogtoken77")
USER = "operatorjane"
LOG = ("echo INFO booting; echo 'Authorization: Bearer plantedbearer0123456'; "
       "echo 'HF_TOKEN=hf_PlantedEnvToken123456 token=plantedlogtoken77'; "
       f"echo 'cache in /home/{USER}/.cache'; for i in $(seq 1 400); do echo INFO step $i; done; "
       "echo 'Traceback (most recent call last):'; echo '  File \"x.py\", line 1, in <module>'; "
       "echo 'RuntimeError: NCCL error: unhandled system error'; "
       "for i in $(seq 1 600); do echo INFO after $i; done")


def report(config: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, USER=USER, OPENAI_API_KEY="sk-plantedenvkey123456")
    return subprocess.run([sys.executable, "-m", "cockpit", "--config", str(config), "report", *args],
                          capture_output=True, text=True, timeout=240, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL)


def members(path: Path) -> dict[str, str]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read().decode()  # type: ignore[union-attr]
                for m in tar.getmembers() if m.isfile()}


def test_planted_secrets_and_hosts_never_reach_the_archive(fresh_demo_cluster: SimCluster,
                                                           tmp_path: Path) -> None:
    cfg = fresh_demo_cluster.config
    toml = tmp_path / "cluster.toml"
    toml.write_text("# api_key = sk-plantedcomment123456\n" + fresh_demo_cluster.config_path.read_text()
                    + '\n[alerts]\ncommand = ["notify", "--token", "hf_PlantedConfigToken123456"]\n')
    hostnames: dict[int, str] = {}

    async def start() -> None:
        async with Fleet(cfg) as fleet:
            assert await fleet.wait_connected(20)
            await prepare_hosts(fleet, cfg)
            res = await fleet[2].run(command([
                "docker", "run", "-d", "--name", cfg.cluster.container_name, "-e",
                "HF_TOKEN=hf_PlantedEnvToken123456", "-e", "OPENAI_API_KEY=sk-plantedenvkey123456", "-e",
                "DB_PASSWORD=plantedpw99", cfg.runtime.image_tag, "bash", "-c", LOG]))
            assert res.ok, res.stderr
            for rank in cfg.ranks:
                hostnames[rank] = (await fleet[rank].run(command(["hostname"]))).stdout.strip()

    asyncio.run(start())
    out = tmp_path / "bundle.tar.gz"
    res = report(toml, "-o", str(out), "--json", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    data = json.loads(res.stdout)
    assert data["path"] == str(out) and data["redacted_hosts"] is True
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    files = members(out)
    for name in ("README.txt", "versions.json", "config/cluster.toml", "preflight.json", "status.json",
                 "commands.jsonl", "ranks/2/docker-inspect.json", "ranks/2/log-tail.txt",
                 "ranks/0/nvidia-smi-q.txt", "ranks/0/fabric.txt"):
        assert name in files, sorted(files)
    everything = "\n".join(files.values())
    raw = out.read_bytes()
    for secret in SECRETS:
        assert secret not in everything, secret
    for value in [USER, *hostnames.values(), *(h.fabric_ip for h in cfg.hosts)]:
        assert value not in everything, value
    assert "HF_TOKEN" in files["ranks/2/docker-inspect.json"] and "<secret-" in everything
    assert b"planted" not in raw                       # the gzip bytes hold none either (not stored raw)
    # one value, one placeholder, in every file
    ip2 = re.search(r'rank = 2\n.*?fabric_ip = "(ip-\d+)"', files["config/cluster.toml"], re.S)
    assert ip2 is not None and ip2.group(1) in files["ranks/2/fabric.txt"]
    # versions and the log around the first failure
    versions = json.loads(files["versions.json"])
    assert versions["ranks"][0]["driver"] == "580.95.05" and versions["ranks"][0]["cuda"] == "13.0"
    assert versions["ranks"][2]["first_failure_line"] is not None
    log = files["ranks/2/log-tail.txt"]
    assert "RuntimeError: NCCL error" in log and "around the first failure" in log
    lines = log.splitlines()[1:]
    assert len(lines) == 300 and lines[0] == "INFO step 301" and "INFO after 197" in lines   # a third before
    assert "INFO step 300" not in log and "INFO after 198" not in log

    # --no-redact-hosts keeps the IPs, never the secrets
    kept = tmp_path / "kept.tar.gz"
    res = report(toml, "-o", str(kept), "--no-redact-hosts", cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    text = "\n".join(members(kept).values())
    assert cfg.host(2).fabric_ip in text and hostnames[2] in text
    assert not any(secret in text for secret in SECRETS)

    # never over an existing file
    before = hashlib.sha256(out.read_bytes()).hexdigest()
    res = report(toml, "-o", str(out), "--json", cwd=tmp_path)
    assert res.returncode == 3 and json.loads(res.stdout)["error"]["code"] == "file-exists"
    assert hashlib.sha256(out.read_bytes()).hexdigest() == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".bundle")] == []
