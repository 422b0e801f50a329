"""`hf` (huggingface_hub CLI) stand-in: `hf download` from the sim hub (`cockpit.sim.hub`).

`hf download REPO [FILES...] [--include PAT...] [--exclude PAT...] [--revision REV] [--local-dir DIR]
[--cache-dir DIR] [--force-download] [--quiet]`. Progress goes to stderr, the local path to stdout.
Fault `missing-shard`: this host's downloads of a checkpoint repo never get shard 17 (see `faults`).
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import sys
import time

from cockpit.sim.tools import _host

MISSING_SHARD = "model-00017-of-00048.safetensors"
CHECKPOINT_PREFIX = "model-"
VERSION = "0.35.3"


class HfError(Exception):
    pass


def _parse(args: list[str]) -> dict:
    o: dict = {
        "files": [],
        "include": [],
        "exclude": [],
        "revision": None,
        "local_dir": None,
        "cache_dir": None,
        "quiet": False,
        "force": False,
        "repo": None,
    }
    multi = None
    i = 0
    while i < len(args):
        a = args[i]
        key, eq, val = a.partition("=")
        if key in ("--include", "--exclude"):
            multi = key[2:]
            if eq:
                o[multi].append(val)
        elif key in ("--revision", "--local-dir", "--cache-dir", "--repo-type", "--token", "--max-workers"):
            multi = None
            if not eq:
                i += 1
                if i >= len(args):
                    raise HfError(f"Option '{key}' requires an argument.")
                val = args[i]
            if key == "--repo-type" and val != "model":
                raise HfError(f"Repository type '{val}' is not available in the simulated hub.")
            o[key[2:].replace("-", "_")] = val
        elif a in ("--quiet", "-q"):
            o["quiet"] = True
        elif a == "--force-download":
            o["force"] = True
        elif a.startswith("-"):
            raise HfError(f"No such option: {a}")
        elif multi:
            o[multi].append(a)
        elif o["repo"] is None:
            o["repo"] = a
        else:
            o["files"].append(a)
        i += 1
    if o["repo"] is None:
        raise HfError("Missing argument 'REPO_ID'.")
    return o


def _match(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(path, p + "*" if p.endswith("/") else p) for p in patterns)


def _bar(n: int, elapsed: float) -> str:
    rate = n / elapsed if elapsed > 0 else 0.0
    return f"Fetching {n} files: 100%|██████████| {n}/{n} [00:00<00:00, {rate:.2f}it/s]"


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def download(o: dict) -> str:
    spec = _host.spec()
    hub = spec.get("hub_dir") or ""
    index = _host.read_json(os.path.join(hub, "hub.json"), None)
    repo = o["repo"]
    if not isinstance(index, dict) or repo not in index["repos"]:
        raise HfError(
            f"Repository Not Found for url: https://huggingface.co/api/models/{repo}/revision/"
            f"{o['revision'] or 'main'}.\nPlease make sure you specified the correct `repo_id` and "
            "`repo_type`.\nIf you are trying to access a private or gated repo, make sure you are "
            "authenticated."
        )
    info = index["repos"][repo]
    rev = o["revision"] or "main"
    if rev not in ("main", info["commit"]):
        raise HfError(
            f"Revision Not Found for url: https://huggingface.co/api/models/{repo}/revision/{rev}.\n"
            f"Invalid rev id: {rev}"
        )
    commit = info["commit"]
    files: dict = info["files"]
    hidden = _host.fault("missing-shard") and any(p.startswith(CHECKPOINT_PREFIX) for p in files)
    if o["files"]:
        for f in o["files"]:
            if f not in files or (hidden and f == MISSING_SHARD):
                raise HfError(f"Entry Not Found for url: https://huggingface.co/{repo}/resolve/{commit}/{f}.")
        wanted = list(o["files"])
    else:
        wanted = [
            p
            for p in files
            if (not o["include"] or _match(p, o["include"]))
            and not (o["exclude"] and _match(p, o["exclude"]))
        ]
    if hidden:
        wanted = [p for p in wanted if p != MISSING_SHARD]
    if o["local_dir"]:
        dest = os.path.abspath(o["local_dir"])
        meta_dir = os.path.join(dest, ".cache", "huggingface")
    else:
        cache = o["cache_dir"] or os.path.join(
            os.environ.get("HF_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "huggingface"), "hub"
        )
        dest = os.path.join(cache, "models--" + repo.replace("/", "--"), "snapshots", commit)
        meta_dir = None
    start = time.monotonic()
    for path in wanted:
        _fetch(
            os.path.join(hub, "repos", repo, commit, path),
            dest,
            path,
            files[path],
            commit,
            meta_dir,
            o["force"],
        )
    if not o["quiet"]:
        sys.stderr.write(_bar(len(wanted), time.monotonic() - start) + "\n")
    single = len(o["files"]) == 1 and not o["include"] and not o["exclude"]
    return os.path.join(dest, o["files"][0]) if single else dest


def _fetch(
    src: str, dest: str, path: str, meta: dict, commit: str, meta_dir: str | None, force: bool
) -> None:
    target = os.path.join(dest, path)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    if meta_dir:
        dl = os.path.join(meta_dir, "download", os.path.dirname(path))
        os.makedirs(dl, exist_ok=True)
        gi = os.path.join(meta_dir, ".gitignore")
        if not os.path.exists(gi):
            _host.write_atomic(gi, "*\n")
    fresh = (
        not force
        and os.path.isfile(target)
        and os.path.getsize(target) == meta["size"]
        and _sha256(target) == meta["sha256"]
    )
    if not fresh:
        tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.{os.getpid()}.incomplete")
        with open(src, "rb") as fin, open(tmp, "wb") as fout:
            while chunk := fin.read(1 << 20):
                fout.write(chunk)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    if meta_dir:
        _host.write_atomic(
            os.path.join(meta_dir, "download", path + ".metadata"),
            f"{commit}\n{meta['sha256']}\n{time.time():.6f}\n",
        )


def main(argv: list[str] | None = None) -> int:
    _host.quiet_pipes()
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(
            "Usage: hf [OPTIONS] COMMAND [ARGS]...\n\nCommands:\n  download  Download files from "
            "the Hub.\n  version   Print information about the hf version.\n"
        )
        return 0 if args else 2
    if args[0] in ("version", "--version"):
        sys.stdout.write(f"huggingface_hub version: {VERSION}\n")
        return 0
    if args[0] != "download":
        sys.stderr.write(
            f"Usage: hf [OPTIONS] COMMAND [ARGS]...\nTry 'hf -h' for help.\n\n"
            f"Error: No such command '{args[0]}'.\n"
        )
        return 2
    try:
        o = _parse(args[1:])
        path = download(o)
    except HfError as e:
        sys.stderr.write(f"Error: {e}\n")
        return 1
    sys.stdout.write(path + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
