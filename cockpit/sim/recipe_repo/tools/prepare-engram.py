#!/usr/bin/env python3
"""Prepare local Engram row overlays for one worker rank (simulated R37 recipe helper).

usage: python3 tools/prepare-engram.py RANK MODEL_PATH ENGRAM_PATH

Checks the 48-shard checkpoint index, refuses rank 0 (and ranks beyond the workers) and refuses to
overwrite existing destination shards, then writes sparse overlays for shards 47 and 48 (large apparent
size, few blocks allocated) and r37-row-coverage.json (rank, row ranges per Engram layer, checkpoint
fingerprint and revision). The rows are split evenly over the workers: every rank but 0 of the host's
world (the simulated host's sim.json, under $R37_SIM_ROOT or /var/lib/r37-sim), or three (the card's
TP4) where that is unknown.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys

SHARDS = 48
OVERLAY_SHARDS = (47, 48)
OVERLAY_APPARENT = 64 * 1024 * 1024
ENGRAM_LAYERS = (40, 41, 42, 43)
ENGRAM_ROWS = 1_048_576
DEFAULT_WORKERS = 3
SIM_ROOT = "/var/lib/r37-sim"
COVERAGE = "r37-row-coverage.json"


def shard_name(n: int) -> str:
    return f"model-{n:05d}-of-{SHARDS:05d}.safetensors"


def fail(msg: str, code: int = 1) -> None:
    print(f"prepare-engram: error: {msg}", file=sys.stderr)
    sys.exit(code)


def workers() -> int:
    """Worker ranks of this host's world (its size less the head)."""
    path = os.path.join(os.environ.get("R37_SIM_ROOT", SIM_ROOT), "sim.json")
    try:
        with open(path, "rb") as f:
            n = json.loads(f.read(1 << 16))["nranks"]
    except (OSError, ValueError, KeyError, TypeError):
        return DEFAULT_WORKERS
    return n - 1 if isinstance(n, int) and not isinstance(n, bool) and 2 <= n <= 256 else DEFAULT_WORKERS


def revision(model: str) -> str | None:
    meta = os.path.join(model, ".cache", "huggingface", "download", "model.safetensors.index.json.metadata")
    try:
        with open(meta) as f:
            return f.readline().strip() or None
    except OSError:
        return None


def write_overlay(path: str, shard: int, rank: int, rows: dict[int, list[int]]) -> int:
    header: dict[str, dict[str, object]] = {
        "__metadata__": {"format": "pt", "r37_overlay": f"rank{rank}", "shard": str(shard)}
    }
    for layer, (start, end) in rows.items():
        header[f"model.layers.{layer}.engram.rows"] = {
            "dtype": "F8_E4M3",
            "shape": [end - start, 4096],
            "data_offsets": [0, (end - start) * 4096],
        }
    blob = json.dumps(header).encode()
    tmp = path + ".partial"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for k in range(1, 4):  # a few written blocks spread over the file; the rest stays a hole
            f.seek(k * OVERLAY_APPARENT // 4)
            f.write(hashlib.sha256(f"{rank}:{shard}:{k}".encode()).digest() * 128)
        f.truncate(OVERLAY_APPARENT)
    os.replace(tmp, path)
    return os.stat(path).st_blocks * 512


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    rank_s, model, dest = argv
    if not rank_s.isdigit():
        fail(f"RANK must be an integer, got {rank_s!r}", 2)
    rank = int(rank_s)
    nworkers = workers()
    if rank == 0:
        fail(
            "rank 0 reads the complete checkpoint and does not use Engram overlays; "
            f"run this helper on the worker ranks 1..{nworkers} only",
            2,
        )
    if rank > nworkers:
        fail(f"rank {rank} is out of range (workers are 1..{nworkers})", 2)
    index_path = os.path.join(model, "model.safetensors.index.json")
    try:
        with open(index_path, "rb") as f:
            index_bytes = f.read()
        weight_map = json.loads(index_bytes)["weight_map"]
    except (OSError, ValueError, KeyError) as e:
        fail(f"cannot read the checkpoint index {index_path}: {e}")
    shards = sorted(set(weight_map.values()))
    if shards != [shard_name(n) for n in range(1, SHARDS + 1)]:
        fail(f"{index_path} does not describe the expected {SHARDS}-shard layout ({len(shards)} shards)")
    for n in OVERLAY_SHARDS:
        if not os.path.isfile(os.path.join(model, shard_name(n))):
            fail(f"checkpoint shard {shard_name(n)} is missing from {model}")
    os.makedirs(dest, exist_ok=True)
    present = [n for n in os.listdir(dest) if n.endswith(".safetensors") or n.endswith(".partial")]
    if present or os.path.exists(os.path.join(dest, COVERAGE)):
        fail(
            f"{dest} already contains {', '.join(sorted(present)) or COVERAGE}; refusing to overwrite "
            "existing overlays (use a fresh destination)"
        )
    per = ENGRAM_ROWS // nworkers
    start = (rank - 1) * per
    end = ENGRAM_ROWS if rank == nworkers else start + per
    print(f"prepare-engram: rank {rank}: checkpoint {model} ({SHARDS} shards), destination {dest}")
    allocated = 0
    layers = []
    for i, shard in enumerate(OVERLAY_SHARDS):
        mine = {layer: [start, end] for layer in ENGRAM_LAYERS[i * 2 : i * 2 + 2]}
        for layer in mine:
            print(f"prepare-engram: layer {layer} rows [{start}, {end}) -> {shard_name(shard)}", flush=True)
            layers.append({"layer": layer, "rows": [start, end], "shard": shard_name(shard)})
        allocated += write_overlay(os.path.join(dest, shard_name(shard)), shard, rank, mine)
    coverage = {
        "rank": rank,
        "workers": nworkers,
        "total_rows": ENGRAM_ROWS,
        "layers": layers,
        "shards": [shard_name(n) for n in OVERLAY_SHARDS],
        "checkpoint": {
            "path": os.path.abspath(model),
            "revision": revision(model),
            "index_sha256": hashlib.sha256(index_bytes).hexdigest(),
        },
    }
    tmp = os.path.join(dest, COVERAGE + ".partial")
    with open(tmp, "w") as f:
        json.dump(coverage, f, indent=2)
        f.write("\n")
    os.replace(tmp, os.path.join(dest, COVERAGE))
    apparent = OVERLAY_APPARENT * len(OVERLAY_SHARDS)
    print(
        f"prepare-engram: done: {len(OVERLAY_SHARDS)} overlays, apparent {apparent} bytes, "
        f"allocated {allocated} bytes, coverage {COVERAGE}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
