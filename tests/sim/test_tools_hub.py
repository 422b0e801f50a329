"""hf download against the sim hub, the recipe's node.sh and prepare-engram, the missing-shard fault."""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path

import pytest
from test_tools_formats import PEERS, ToolHost, make_host

from cockpit import constants as C
from cockpit.sim.hub import HubInfo, build_hub, shard_name

CKPT = C.DEALIGNAI_REPO


@pytest.fixture(scope="module")
def hub_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("hub")
    build_hub(d)
    return d


@pytest.fixture
def hhost(tmp_path: Path, hub_dir: Path) -> ToolHost:
    return make_host(tmp_path, hub_dir)


def test_build_hub_is_deterministic(hub_dir: Path, tmp_path: Path) -> None:
    info = build_hub(hub_dir)
    again = build_hub(tmp_path / "other")
    assert isinstance(info, HubInfo) and info == again
    assert set(info.repos) == {*C.CHECKPOINT_REPOS, C.RECIPE_REPO}
    assert 1_000_000 <= info.archive_size <= 4_000_000 and info.image_id == C.IMAGE_ID
    index = json.loads((hub_dir / "repos" / CKPT / info.repos[CKPT].commit / C.CHECKPOINT_INDEX).read_text())
    assert sorted(set(index["weight_map"].values())) == [shard_name(n) for n in range(1, 49)]


def test_recipe_download_with_include(hhost: ToolHost, hub_dir: Path) -> None:
    r = hhost.sh(
        f"hf download {C.RECIPE_REPO} --include 'README.md' 'launch/*' 'tools/*' 'bench/*' --local-dir .",
        check=True,
    )
    home = Path(hhost.env()["HOME"])
    assert r.stdout == f"{home}\n" and r.stderr.startswith("Fetching 6 files: 100%|")
    assert (home / "launch" / "node.sh").is_file() and not (home / "runtime").exists()
    meta = (home / ".cache/huggingface/download/launch/node.sh.metadata").read_text().splitlines()
    assert meta[0] == build_hub(hub_dir).repos[C.RECIPE_REPO].commit
    one = hhost.sh(f"hf download {C.RECIPE_REPO} {C.RUNTIME_ARCHIVE} --local-dir .", check=True)
    archive = home / C.RUNTIME_ARCHIVE
    assert one.stdout == f"{archive}\n"
    sha = hhost.sh(f"sha256sum {C.RUNTIME_ARCHIVE}", check=True).stdout.split()[0]
    assert sha == build_hub(hub_dir).archive_sha256
    before = archive.stat().st_ino
    hhost.sh(f"hf download {C.RECIPE_REPO} {C.RUNTIME_ARCHIVE} --local-dir .", check=True)
    assert archive.stat().st_ino == before  # identical file skipped, not rewritten


def test_revision_pinning(hhost: ToolHost, hub_dir: Path) -> None:
    commit = build_hub(hub_dir).repos[CKPT].commit
    dest = f"{hhost.spec.srv_dir}/models/m"
    ok = hhost.sh(f"hf download {CKPT} config.json --revision {commit} --local-dir {dest}", check=True)
    assert ok.stdout == f"{dest}/config.json\n"
    assert hhost.sh(f"hf download {CKPT} config.json --revision main --local-dir {dest}").returncode == 0
    bad = hhost.sh(f"hf download {CKPT} --revision deadbeef --local-dir {dest}")
    assert (
        bad.returncode == 1
        and "Revision Not Found" in bad.stderr
        and "Invalid rev id: deadbeef" in bad.stderr
    )
    nope = hhost.sh("hf download someone/nothing --local-dir x")
    assert nope.returncode == 1 and "Repository Not Found" in nope.stderr


def test_missing_shard_fault(hhost: ToolHost) -> None:
    dest = Path(hhost.spec.srv_dir) / "models" / "ckpt"
    hhost.sh(f"hf download {CKPT} --local-dir {dest}", check=True)
    assert (dest / shard_name(17)).is_file()
    hhost.fault("missing-shard")
    assert not (dest / shard_name(17)).exists()  # the copy on disk is hidden
    fresh = dest.parent / "fresh"
    r = hhost.sh(f"hf download {CKPT} --local-dir {fresh}", check=True)
    assert "Fetching 53 files" in r.stderr and not (fresh / shard_name(17)).exists()
    assert (fresh / shard_name(16)).exists()
    hhost.fault("missing-shard", on=False)
    assert (dest / shard_name(17)).is_file()  # restored


def _recipe(h: ToolHost, rank: int) -> Path:
    h.sh(f"hf download {C.RECIPE_REPO} --include 'launch/*' 'tools/*' --local-dir r37-recipe", check=True)
    home = Path(h.env()["HOME"]) / "r37-recipe"
    srv = h.spec.srv_dir
    env = (home / "launch" / "cluster.env.example").read_text()
    env = (
        env.replace("/srv/", f"{srv}/")
        .replace("NODE_IPS=(", "NODE_IPS=(")
        .replace("IB_HCA=rocep1s0f0", "IB_HCA=rocep1s0f0,rocep1s0f1")
    )
    (home / "cluster.env").write_text(env)
    return home


def test_node_sh_dry_run_and_refusal(hhost: ToolHost, tmp_path: Path) -> None:
    home = _recipe(hhost, 1)
    srv = hhost.spec.srv_dir
    r = hhost.sh("cd r37-recipe && DRY_RUN=1 bash launch/node.sh 1 cluster.env", check=True)
    assert r.stdout.count("\n") == 1
    argv = shlex.split(r.stdout)
    assert argv[:6] == ["docker", "run", "-d", "--name", "ds41_r37", "--network"]
    for pair in (
        ["--network", "host"],
        ["--ipc", "host"],
        ["--gpus", "all"],
        ["--device", "/dev/infiniband"],
        ["--ulimit", "memlock=-1"],
        ["-e", "NCCL_IB_HCA=rocep1s0f0,rocep1s0f1"],
        ["-e", "NCCL_IB_GID_INDEX=3"],
        ["-e", "NCCL_SOCKET_IFNAME=enp1s0f0np0"],
        ["-e", "GLOO_SOCKET_IFNAME=enp1s0f0np0"],
        ["-e", "R37_USE_LOCAL_ENGRAM_EDGES=1"],
        ["--node-rank", "1"],
        ["--master-addr", PEERS[0]],
        ["--master-port", "29543"],
        ["--tensor-parallel-size", "4"],
        ["--nnodes", "4"],
        ["--max-model-len", "600000"],
        ["--max-num-seqs", "8"],
        ["--gpu-memory-utilization", "0.81"],
        ["--kv-cache-dtype", "fp8"],
        ["--speculative-config", '{"method":"deepseek_mtp","num_speculative_tokens":3}'],
    ):
        assert any(argv[i : i + 2] == pair for i in range(len(argv))), pair
    model = f"{srv}/models/DeepSeek-V4.1-Flash-dealignai"
    assert argv[argv.index("vllm") : argv.index("vllm") + 3] == ["vllm", "serve", model]
    assert argv[argv.index("local/ds41-r37-spark:runtime") + 1] == "vllm"
    assert "--headless" in argv and f"{model}:{model}:ro" in argv
    head = shlex.split(hhost.sh("cd r37-recipe && DRY_RUN=1 bash launch/node.sh 0 cluster.env").stdout)
    assert "--headless" not in head and head[head.index("--node-rank") + 1] == "0"
    assert hhost.sh("cd r37-recipe && bash launch/node.sh 7 cluster.env").returncode == 2
    # an existing container of that name: the launcher refuses and leaves it alone
    hhost.sh(f"hf download {C.RECIPE_REPO} {C.RUNTIME_ARCHIVE} --local-dir r37-recipe", check=True)
    hhost.sh(f"docker load -i r37-recipe/{C.RUNTIME_ARCHIVE}", check=True)
    hhost.sh(f"docker run -d --name ds41_r37 --entrypoint true {C.IMAGE_TAG}", check=True)
    refused = hhost.sh("cd r37-recipe && bash launch/node.sh 1 cluster.env")
    assert refused.returncode == 1 and "already exists" in refused.stderr and "refusing" in refused.stderr
    assert len(hhost.sh("docker ps -a -q").stdout.split()) == 1
    assert home.is_dir()


def test_prepare_engram_sparse_and_refusals(hhost: ToolHost) -> None:
    _recipe(hhost, 1)
    srv = Path(hhost.spec.srv_dir)
    model = srv / "models" / "DeepSeek-V4.1-Flash-dealignai"
    hhost.sh(f"hf download {CKPT} --local-dir {model}", check=True)
    dest = srv / "engram-local" / "DeepSeek-V4.1-Flash"
    cmd = f"cd r37-recipe && python3 tools/prepare-engram.py {{rank}} {model} {dest}"
    rank0 = hhost.sh(cmd.format(rank=0))
    assert rank0.returncode != 0 and "rank 0" in rank0.stderr and not dest.exists()
    ok = hhost.sh(cmd.format(rank=2), check=True)
    assert "layer 40 rows [" in ok.stdout and ok.stdout.rstrip().splitlines()[-1].startswith(
        "prepare-engram: done"
    )
    for n in C.ENGRAM_SHARDS:
        st = os.stat(dest / shard_name(n))
        assert st.st_size == 64 * 2**20 and st.st_blocks * 512 < 1 * 2**20  # sparse
    cov = json.loads((dest / C.ENGRAM_COVERAGE_FILE).read_text())
    assert cov["rank"] == 2 and cov["layers"] and cov["checkpoint"]["revision"]
    again = hhost.sh(cmd.format(rank=2))
    assert again.returncode == 1 and "refusing to overwrite" in again.stderr
    (model / C.CHECKPOINT_INDEX).write_text(
        json.dumps({"weight_map": {"a": "model-00001-of-00002.safetensors"}})
    )
    broken = hhost.sh(f"python3 r37-recipe/tools/prepare-engram.py 1 {model} {srv}/other")
    assert broken.returncode == 1 and "48-shard" in broken.stderr
