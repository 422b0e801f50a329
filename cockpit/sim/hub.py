"""The simulated Hugging Face hub shared by the hosts of a sim cluster (read by the `hf` stand-in).

    <hub>/hub.json                                  index: version, repos -> commit + files, archive facts
    <hub>/repos/<owner>/<name>/<commit>/<path>      the files of each repo at its (single) commit

Repos: the two checkpoints of the card (config, tokenizer, index naming 48 shards, 48 small shards with
real safetensors headers) and the recipe repo (files of `recipe_repo/` plus a small runtime archive the
docker stand-in can `load`). Commits are content hashes, so a rebuilt hub has the same shas.
"""

from __future__ import annotations

import hashlib
import io
import json
import random
import shutil
import struct
import tarfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cockpit import constants

HUB_VERSION = 1
RECIPE_SRC = Path(__file__).with_name("recipe_repo")
LAYER_BYTES = 2 * 1024 * 1024


@dataclass
class RepoInfo:
    commit: str
    files: dict[str, int] = field(default_factory=dict)  # path -> size in bytes


@dataclass
class HubInfo:
    repos: dict[str, RepoInfo]
    archive_sha256: str
    archive_size: int
    image_id: str
    image_tag: str


def shard_name(n: int) -> str:
    return f"model-{n:05d}-of-{constants.CHECKPOINT_SHARDS:05d}.safetensors"


def _safetensors(tensors: dict[str, tuple[str, list[int]]], rng: random.Random) -> bytes:
    header: dict = {"__metadata__": {"format": "pt"}}
    data = b""
    for name, (dtype, shape) in tensors.items():
        n = 1
        for d in shape:
            n *= d
        nbytes = n * (2 if dtype == "BF16" else 1)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + nbytes]}
        data += rng.randbytes(nbytes)
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    return struct.pack("<Q", len(blob)) + blob + data


def checkpoint_files(repo: str) -> dict[str, bytes]:
    """Every file of a checkpoint repo (small, deterministic per repo)."""
    rng = random.Random(repo)
    files: dict[str, bytes] = {}
    weight_map: dict[str, str] = {}
    for n in range(1, constants.CHECKPOINT_SHARDS + 1):
        layer = n - 1
        tensors = {
            f"model.layers.{layer}.mlp.experts.w1.weight": ("F8_E4M3", [32, 32]),
            f"model.layers.{layer}.mlp.experts.w1.weight_scale_inv": ("BF16", [4, 4]),
            f"model.layers.{layer}.self_attn.wq_a.weight": ("F8_E4M3", [16, 64]),
        }
        if n in constants.ENGRAM_SHARDS:
            tensors[f"model.layers.{layer}.engram.table"] = ("F8_E4M3", [64, 16])
        files[shard_name(n)] = _safetensors(tensors, rng)
        weight_map.update(dict.fromkeys(tensors, shard_name(n)))
    total = sum(len(b) for b in files.values())
    files[constants.CHECKPOINT_INDEX] = json.dumps(
        {"metadata": {"total_size": total}, "weight_map": weight_map}, indent=2
    ).encode()
    files["config.json"] = json.dumps(
        {
            "architectures": ["DeepseekV4ForCausalLM"],
            "model_type": "deepseek_v4",
            "hidden_size": 7168,
            "num_hidden_layers": 47,
            "num_nextn_predict_layers": 1,
            "max_position_embeddings": 600000,
            "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "weight_block_size": [128, 128]},
            "torch_dtype": "bfloat16",
            "vocab_size": 129280,
            "_name_or_path": repo,
        },
        indent=2,
    ).encode()
    files["generation_config.json"] = json.dumps(
        {"bos_token_id": 0, "eos_token_id": 1, "temperature": 1.0, "top_p": 0.95}, indent=2
    ).encode()
    files["tokenizer_config.json"] = json.dumps(
        {
            "tokenizer_class": "LlamaTokenizerFast",
            "model_max_length": 600000,
            "bos_token": "<｜begin▁of▁sentence｜>",
            "eos_token": "<｜end▁of▁sentence｜>",
        },
        indent=2,
    ).encode()
    files["tokenizer.json"] = json.dumps(
        {
            "version": "1.0",
            "model": {"type": "BPE", "vocab": {f"tok{i}": i for i in range(256)}, "merges": []},
        }
    ).encode()
    files["README.md"] = f"# {repo}\n\nSimulated checkpoint for the r37-cockpit sim (48 shards).\n".encode()
    return files


def runtime_archive() -> bytes:
    """A docker-save style tar (OCI layout + manifest.json) naming the recipe's image tag and ID.

    The config blob is *named* by the card's image ID (the sim cannot produce a real preimage); the
    docker stand-in takes the ID from that name.
    """
    config_hex = constants.IMAGE_ID.removeprefix("sha256:")
    layer = random.Random("r37-runtime-layer").randbytes(LAYER_BYTES)
    layer_hex = hashlib.sha256(layer).hexdigest()
    config = json.dumps(
        {
            "architecture": "arm64",
            "os": "linux",
            "config": {
                "Env": [
                    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "VLLM_COMMIT=c687594b",
                ]
            },
            "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_hex}"]},
        }
    ).encode()
    manifest = json.dumps(
        [
            {
                "Config": f"blobs/sha256/{config_hex}",
                "RepoTags": [constants.IMAGE_TAG],
                "Layers": [f"blobs/sha256/{layer_hex}"],
                "SimImageSize": constants.ARCHIVE_SIZE,
            }
        ]
    ).encode()
    index = json.dumps(
        {
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.index.v1+json",
            "manifests": [
                {
                    "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "annotations": {
                        "io.containerd.image.name": "docker.io/" + constants.IMAGE_TAG,
                        "org.opencontainers.image.ref.name": "runtime",
                    },
                }
            ],
        }
    ).encode()
    members = [
        ("blobs/sha256/" + config_hex, config),
        ("blobs/sha256/" + layer_hex, layer),
        ("index.json", index),
        ("manifest.json", manifest),
        ("oci-layout", b'{"imageLayoutVersion":"1.0.0"}'),
        ("repositories", json.dumps({constants.IMAGE_TAG.split(":")[0]: {"runtime": config_hex}}).encode()),
    ]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for d in ("blobs", "blobs/sha256"):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(info)
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def recipe_files() -> dict[str, bytes]:
    files = {
        p.relative_to(RECIPE_SRC).as_posix(): p.read_bytes()
        for p in sorted(RECIPE_SRC.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
    files[constants.RUNTIME_ARCHIVE] = runtime_archive()
    return files


def commit_of(repo: str, files: dict[str, bytes]) -> str:
    h = hashlib.sha1(repo.encode())
    for path in sorted(files):
        h.update(f"{path}\0{hashlib.sha256(files[path]).hexdigest()}\n".encode())
    return h.hexdigest()


def _load(index: Path) -> HubInfo:
    d = json.loads(index.read_text())
    return HubInfo(
        repos={
            k: RepoInfo(v["commit"], {p: f["size"] for p, f in v["files"].items()})
            for k, v in d["repos"].items()
        },
        archive_sha256=d["archive_sha256"],
        archive_size=d["archive_size"],
        image_id=d["image_id"],
        image_tag=d["image_tag"],
    )


def build_hub(hub_dir: Path) -> HubInfo:
    """Create the hub (idempotent: an existing hub of this version is reused as is)."""
    hub_dir = Path(hub_dir)
    index = hub_dir / "hub.json"
    if index.exists() and json.loads(index.read_text()).get("version") == HUB_VERSION:
        return _load(index)
    contents = {repo: checkpoint_files(repo) for repo in constants.CHECKPOINT_REPOS}
    contents[constants.RECIPE_REPO] = recipe_files()
    repos_json = {}
    for repo, files in contents.items():
        commit = commit_of(repo, files)
        base = hub_dir / "repos" / repo / commit
        if base.exists():
            shutil.rmtree(base)
        for path, data in files.items():
            (base / path).parent.mkdir(parents=True, exist_ok=True)
            (base / path).write_bytes(data)
        repos_json[repo] = {
            "commit": commit,
            "files": {
                p: {"size": len(b), "sha256": hashlib.sha256(b).hexdigest()} for p, b in sorted(files.items())
            },
        }
    archive = contents[constants.RECIPE_REPO][constants.RUNTIME_ARCHIVE]
    doc = {
        "version": HUB_VERSION,
        "repos": repos_json,
        "archive_sha256": hashlib.sha256(archive).hexdigest(),
        "archive_size": len(archive),
        "image_id": constants.IMAGE_ID,
        "image_tag": constants.IMAGE_TAG,
    }
    tmp = index.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2))
    tmp.replace(index)
    return _load(index)


def hub_info_dict(info: HubInfo) -> dict:
    return asdict(info)
