"""Setup jobs without hosts: tqdm progress parsing, revision resolution, per-rank planning from what a host
holds (skip what is complete, refuse what must not be overwritten), step checks with observed and expected
values, and the shard comparison across hosts."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

from cockpit import constants as C
from cockpit.config import ClusterConfig
from cockpit.envfile import env_for_rank
from cockpit.recipe.checks import Probe
from cockpit.recipe.parsers import Section
from cockpit.recipe.progress import ProgressTracker, parse_tqdm
from cockpit.recipe.setup import expand_jobs, resolve_revision
from cockpit.recipe.setup_jobs import SPECS, PlanContext, revision_marker, same_shards
from cockpit.recipe.setup_model import SetupError, StepOutput

SHA = "5f3c1e0a9b2d4c6e8f0a1b3c5d7e9f1a2b4c6d8e"


def probe(cfg: ClusterConfig, rank: int, **outputs: tuple[str, int]) -> Probe:
    secs = {k.replace("_", "."): Section(k.replace("_", "."), text, status)
            for k, (text, status) in outputs.items()}
    return Probe(cfg, rank, secs)


def plan(cfg: ClusterConfig, job: str, rank: int, p: Probe, **kw: object):  # type: ignore[no-untyped-def]
    return SPECS[job].plan(PlanContext(cfg, rank, kw.pop("revision", SHA), **kw), p)  # type: ignore[arg-type]


def with_revision(cfg: ClusterConfig, rev: str | None) -> ClusterConfig:
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"revision": rev})})


# ---- progress ----------------------------------------------------------------------------------------


def test_tqdm_lines_of_hf_download() -> None:
    b = parse_tqdm("model-00001-of-00048.safetensors:  45%|████▌     | 2.25G/5.00G [00:20<00:24, 112MB/s]")
    assert b and (b.desc, b.done, b.total, b.is_bytes, b.rate, b.left) == (
        "model-00001-of-00048.safetensors", 2.25e9, 5e9, True, 112e6, 24.0)
    f = parse_tqdm("Fetching 52 files:  25%|██▌       | 13/52 [00:01<00:03, 10.2it/s]")
    assert f and (f.done, f.total, f.is_bytes, f.left) == (13, 52, False, 3.0)
    u = parse_tqdm("x.bin: 1.20GB [00:10, 123MB/s]")
    assert u and u.total is None and u.is_bytes and u.done == 1.2e9
    assert parse_tqdm("a:   0%|          | 0.00/5.00G [00:00<?, ?B/s]").left is None  # type: ignore[union-attr]
    for junk in ("Downloading 'x' to '/srv'", "", "[ok]", "prepare-engram: done: 2 overlays [a, b]"):
        assert parse_tqdm(junk) is None


def test_tracker_sums_file_bars_and_measures_rate() -> None:
    now = [100.0]
    t = ProgressTracker(clock=lambda: now[0])
    assert t.feed("Fetching 4 files:  0%|   | 0/4 [00:00<?, ?it/s]") is not None
    t.feed("a: 10%|#  | 1.00G/10.0G [00:05<00:45, 200MB/s]")
    now[0] = 102.0
    p = t.feed("b: 10%|#  | 1.00G/10.0G [00:05<00:45, 200MB/s]")
    assert p is not None and p.bytes_done == 2_000_000_000 and p.bytes_total == 20_000_000_000
    assert p.rate == pytest.approx(0.5e9)                  # 1 GB more in 2 s, measured over both bars
    assert p.files_done == 0 and p.files_total == 4 and p.eta == pytest.approx(36.0)   # 18 GB at 0.5 GB/s
    done = t.feed("Fetching 4 files: 100%|###| 4/4 [01:00<00:00, 0.07it/s]")
    assert done is not None and done.eta == 0.0 and done.fraction == pytest.approx(0.1)
    assert t.feed("not a bar") is None


# ---- revision ----------------------------------------------------------------------------------------


def test_pinned_commit_needs_no_network(fixed_config: ClusterConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("the network must not be used")

    monkeypatch.setattr(huggingface_hub, "HfApi", boom)
    assert resolve_revision(with_revision(fixed_config, SHA.upper())) == SHA


def test_branch_without_huggingface_hub_asks_for_a_pinned_commit(fixed_config: ClusterConfig,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)     # as if the `hf` extra is not installed
    with pytest.raises(SetupError, match=r"huggingface_hub is not installed.*\[model\] revision"):
        resolve_revision(with_revision(fixed_config, "main"))
    assert resolve_revision(with_revision(fixed_config, SHA)) == SHA


def test_branch_offline_or_unreachable_asks_for_a_pinned_commit(fixed_config: ClusterConfig,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    cfg = with_revision(fixed_config, "main")
    with pytest.raises(SetupError, match=r"offline.*\[model\] revision"):
        resolve_revision(cfg, online=False)

    class Down:
        def model_info(self, *a: object, **k: object) -> None:
            raise OSError("Network is unreachable")

    class Hub:
        def model_info(self, repo: str, revision: str, timeout: float) -> object:
            assert (repo, revision) == (cfg.model.repo, "main")
            return type("Info", (), {"sha": SHA})()

    monkeypatch.setattr(huggingface_hub, "HfApi", Down)
    with pytest.raises(SetupError, match=r"Network is unreachable.*pin the commit"):
        resolve_revision(cfg)
    monkeypatch.setattr(huggingface_hub, "HfApi", Hub)
    assert resolve_revision(cfg) == SHA
    with pytest.raises(SetupError):
        expand_jobs("everything")
    assert expand_jobs("all") == ["recipe", "checkpoint", "runtime", "engram", "env"]


# ---- planning ----------------------------------------------------------------------------------------


def test_checkpoint_refuses_another_revision_and_records_the_pinned_one(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    model = cfg.model_path(1)
    other = json.dumps({"repo": cfg.model.repo, "revision": "a" * 40})
    held = probe(cfg, 1, ckpt_revision=(f"==> {model}/.r37-revision <==\n{other}\n", 0))
    rp = plan(cfg, "checkpoint", 1, held)
    assert not rp.steps and f"{cfg.model.repo}@{'a' * 40}" in rp.refused and SHA in rp.refused
    fresh = plan(cfg, "checkpoint", 1, probe(cfg, 1, ckpt_revision=("head: cannot open …", 1)))
    assert [s.label for s in fresh.steps] == ["download", "verify", "record revision"]
    assert fresh.steps[0].cmd.line == (f"hf download {cfg.model.repo} --revision {SHA} --local-dir {model}")
    record = fresh.steps[2]
    assert record.input == revision_marker(cfg.model.repo, SHA) and SHA not in record.cmd.line
    assert json.loads(record.input) == {"repo": cfg.model.repo, "revision": SHA}
    shared = cfg.model_copy(update={"model": cfg.model.model_copy(update={"shared_readonly": True})})
    assert [s.label for s in plan(shared, "checkpoint", 1, probe(shared, 1)).steps] == ["verify"]


def test_checkpoint_verify_names_missing_shards(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    step = plan(cfg, "checkpoint", 0, probe(cfg, 0)).steps[1]
    index = json.dumps({"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}})
    marker = "@@r37-setup-verify"
    text = (f"{marker} begin ckpt.index\n{index}\n{marker} end ckpt.index 0\n"
            f"{marker} begin ckpt.files\ns1.safetensors\t10\n\n{marker} end ckpt.files 0\n")
    assert step.check is not None
    assert step.check(StepOutput(0, text)).reason == "1 of 2 shards missing: s2.safetensors"
    full = text.replace("s1.safetensors\t10\n", "s1.safetensors\t10\ns2.safetensors\t12\n")
    ok = step.check(StepOutput(0, full))
    assert ok.reason is None and ok.facts == {"shards": {"s1.safetensors": 10, "s2.safetensors": 12}}


def test_same_shards_names_the_odd_rank() -> None:
    good = {"shards": {"s1": 10, "s2": 12}}
    out = same_shards({0: good, 1: good, 2: {"shards": {"s1": 10, "s2": 11}}, 3: good})
    assert list(out) == [2] and "s2 is 11 bytes here, 12 there" in out[2] and "rank 0-1,3" in out[2]
    assert same_shards({0: good, 1: good}) == {}


def test_runtime_skips_a_verified_image_and_checks_every_value(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    loaded = plan(cfg, "runtime", 1, probe(cfg, 1, docker_image=(C.IMAGE_ID + "\n", 0)))
    assert not loaded.steps and "expected ID" in loaded.done
    wrong = "sha256:" + "1" * 64
    rp = plan(cfg, "runtime", 1, probe(cfg, 1, docker_image=(wrong + "\n", 0)))
    assert [s.label for s in rp.steps] == ["mkdir", "download", "verify size", "verify sha256", "docker load",
                                          "read the archive's digests", "verify image ID"]
    assert wrong in rp.note
    size, sha, image = rp.steps[2].check, rp.steps[3].check, rp.steps[6].check
    assert size and sha and image
    assert size(StepOutput(0, f"{C.ARCHIVE_SIZE}\n")).reason is None
    bad = size(StepOutput(0, "1234\n")).reason
    assert bad and "observed 1234 bytes" in bad and f"expected {C.ARCHIVE_SIZE} bytes" in bad
    path = f"{cfg.recipe_dir(1)}/{C.RUNTIME_ARCHIVE}"
    assert sha(StepOutput(0, f"{C.ARCHIVE_SHA256}  {path}\n")).reason is None
    bad = sha(StepOutput(0, f"{'0' * 64}  {path}\n")).reason
    assert bad and f"observed {'0' * 64}" in bad and f"expected {C.ARCHIVE_SHA256}" in bad
    bad = image(StepOutput(0, wrong + "\n")).reason
    assert bad and f"its ID is {wrong}" in bad and f"expected {C.IMAGE_ID}" in bad
    assert "No such file" in (sha(StepOutput(1, "sha256sum: x: No such file or directory\n")).reason or "")


def test_engram_workers_only_never_over_existing_files(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    assert "rank 0" in plan(cfg, "engram", 0, probe(cfg, 0)).done
    empty = plan(cfg, "engram", 2, probe(cfg, 2, engram_files=("", 1), engram_coverage=("", 1)))
    assert empty.steps[0].cmd.line == (f"cd -- {cfg.recipe_dir(2)} && python3 tools/prepare-engram.py 2 "
                                       f"{cfg.model_path(2)} {cfg.engram_path(2)}")
    assert [s.label for s in empty.steps] == ["prepare-engram", "du -h", "verify rows"]
    partial = plan(cfg, "engram", 2, probe(cfg, 2, engram_files=("model-00047-of-00048.safetensors\t64\n", 0),
                                           engram_coverage=("cat: …: No such file or directory", 1)))
    assert not partial.steps and "not empty" in partial.refused
    cov = json.dumps({"rank": 2})
    files = f"model-00047-of-00048.safetensors\t64\n{C.ENGRAM_COVERAGE_FILE}\t20\n"
    done = plan(cfg, "engram", 2, probe(cfg, 2, engram_files=(files, 0), engram_coverage=(cov, 0)))
    assert not done.steps and not done.refused and "complete rows" in done.done
    theirs = plan(cfg, "engram", 2, probe(cfg, 2, engram_files=(files, 0),
                                          engram_coverage=(json.dumps({"rank": 3}), 0)))
    assert "rank 3" in theirs.refused


def test_env_identical_absent_different(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    want = env_for_rank(cfg, 1)
    same = plan(cfg, "env", 1, probe(cfg, 1, env_current=(want, 0)))
    assert not same.steps and "identical" in same.done
    absent = plan(cfg, "env", 1, probe(cfg, 1, env_current=("cat: r37-recipe/cluster.env: No such file or "
                                                             "directory", 1)))
    write = absent.steps[1]
    assert write.input == want and "NODE_IPS" not in write.cmd.line and "stdin" in write.lines[0]
    old = want.replace("IB_GID_INDEX=3", "IB_GID_INDEX=5")
    refused = plan(cfg, "env", 1, probe(cfg, 1, env_current=(old, 0)))
    assert not refused.steps and "--overwrite-env" in refused.refused
    assert "-IB_GID_INDEX=5\n+IB_GID_INDEX=3" in refused.note
    replace = plan(cfg, "env", 1, probe(cfg, 1, env_current=(old, 0)), overwrite_env=True)
    assert hashlib.sha256(old.encode()).hexdigest() in replace.steps[0].cmd.line and replace.note
    unreadable = plan(cfg, "env", 1, probe(cfg, 1, env_current=("cat: cluster.env: Permission denied", 1)))
    assert "cannot read" in unreadable.refused
