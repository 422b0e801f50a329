"""Storage preflight checks: the recipe download, the checkpoint, Engram rows and free disk space
(recipe steps 1, 2 and 5). Disk budgets count only what is still to be written, per filesystem."""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

from cockpit import constants
from cockpit.config import ClusterConfig
from cockpit.hosts.shell import Cmd, safetensors_headers
from cockpit.recipe import parsers
from cockpit.recipe.checks import Check, Outcome, Probe, Verdict, human_bytes, majority, ranks_text
from cockpit.recipe.checks_host import image_cmds, image_loaded

REVISION_FILE = ".r37-revision"  # by the checkpoint setup job: one line {"repo": …, "revision": …}
# `hf download --local-dir` records the commit of every file it fetched: first line of this file.
HF_METADATA = ".cache/huggingface/download/" + constants.CHECKPOINT_INDEX + ".metadata"
RECIPE_FILES = ("launch/node.sh", "tools/prepare-engram.py")
# size first, NUL after the name: a name with a newline, a tab or undecodable bytes cannot pose as another
LIST = ["-maxdepth", "1", "-type", "f", "-printf", "%s\\t%f\\0\\n"]
HEADER_LIMIT = 100 * 1024 * 1024      # a safetensors header longer than this is itself a failure
HEADER_BUDGET = 512 * 1024 * 1024     # header bytes read per host in one preflight at most


def _join(base: str, name: str) -> str:
    return posixpath.join(base, name)


# ---- recipe ------------------------------------------------------------------------------------------


def _recipe_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    base = cfg.recipe_dir(rank)
    return {"recipe": ["find", *(_join(base, f) for f in RECIPE_FILES), "-maxdepth", "0", "-type", "f",
                       "-printf", "%p\\n"]}


def _recipe(p: Probe) -> Outcome:
    base = p.cfg.recipe_dir(p.rank)
    found = {line.strip() for line in p.output("recipe").splitlines()}
    missing = [f for f in RECIPE_FILES if _join(base, f) not in found]
    if not missing:
        return Outcome(Verdict.PASS, f"{base}: {', '.join(RECIPE_FILES)}")
    return Outcome(Verdict.FAIL, f"{base}: missing {', '.join(missing)}",
                   f"`r37-cockpit setup recipe --rank {p.rank}` downloads the recipe into {base}")


RECIPE = Check("recipe", 2, "recipe downloaded", _recipe_cmds, _recipe)


# ---- checkpoint --------------------------------------------------------------------------------------


def _ckpt_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    model = cfg.model_path(rank)
    return {"ckpt.index": ["cat", "--", _join(model, constants.CHECKPOINT_INDEX)],
            "ckpt.files": ["find", model, *LIST],
            "ckpt.revision": ["head", "-v", "-n", "1", "--", _join(model, REVISION_FILE),
                              _join(model, HF_METADATA)]}


@dataclass
class CheckpointState:
    index: parsers.SafetensorsIndex | None
    files: dict[str, int]
    missing: list[str]
    empty: list[str]
    revision: parsers.Revision | None

    @property
    def complete(self) -> bool:
        return self.index is not None and bool(self.index.shards) and not self.missing and not self.empty

    @property
    def present_bytes(self) -> int:
        """Bytes of checkpoint files already there (other files in the directory do not count)."""
        return sum(n for name, n in self.files.items() if _is_weights(name))


def _is_weights(name: str) -> bool:
    return name.endswith(".safetensors")


def checkpoint_state(p: Probe) -> CheckpointState:
    index = parsers.parse_safetensors_index(p.output("ckpt.index")) if p.status("ckpt.index") == 0 else None
    files = parsers.parse_find_sizes(p.output("ckpt.files"))
    shards = index.shards if index else []
    rev = revision_of(p.cfg.model_path(p.rank), parsers.parse_head_verbose(p.output("ckpt.revision")))
    return CheckpointState(index, files, [s for s in shards if s not in files],
                           [s for s in shards if files.get(s) == 0], rev)


def _is_commit(revision: str) -> bool:
    """A pinned commit, as opposed to a branch or tag name (which the hosts' markers never hold)."""
    return len(revision) == 40 and all(c in "0123456789abcdef" for c in revision.lower())


def revision_of(model: str, first_lines: dict[str, str | None]) -> parsers.Revision | None:
    """The setup job's marker if present, else the commit hf recorded when it downloaded the index."""
    marker = first_lines.get(_join(model, REVISION_FILE))
    if marker:
        return parsers.parse_revision_file(marker)
    meta = first_lines.get(_join(model, HF_METADATA))
    return parsers.Revision(None, meta.strip()) if meta and meta.strip() else None


def _short(names: list[str], n: int = 3) -> str:
    return ", ".join(names[:n]) + (f" and {len(names) - n} more" if len(names) > n else "")


def _ckpt_check_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    """The checkpoint reads, and every shard's safetensors header (one command on the host)."""
    return {**_ckpt_cmds(cfg, rank),
            "ckpt.headers": safetensors_headers(cfg.model_path(rank), limit=HEADER_LIMIT,
                                                budget=HEADER_BUDGET)}


def judge_shard(h: parsers.ShardHeader | None) -> tuple[Verdict, str]:
    """One shard against its own header: its size must be 8 + N + the end of its tensors' data."""
    if h is None:
        return Verdict.UNKNOWN, "header not read"
    if h.header_len is None:
        if h.size < 8:
            return Verdict.FAIL, f"{h.size} bytes, shorter than the 8-byte header length"
        return Verdict.UNKNOWN, "header length not read"
    if h.header_len > HEADER_LIMIT:
        return Verdict.FAIL, f"header length {h.header_len} is over the {human_bytes(HEADER_LIMIT)} bound"
    if h.size < 8 + h.header_len:
        return Verdict.FAIL, f"{h.size} bytes, ends inside its {h.header_len}-byte header"
    if not h.read:
        return Verdict.UNKNOWN, f"header not read (over the {human_bytes(HEADER_BUDGET)} read budget)"
    if h.problem is not None or h.expected_size is None:
        return Verdict.FAIL, h.problem or "header not understood"
    if h.size < h.expected_size:
        return Verdict.FAIL, f"{h.size} bytes, its header says {h.expected_size}: truncated"
    if h.size > h.expected_size:
        return Verdict.FAIL, f"{h.size} bytes, its header says {h.expected_size}: trailing bytes"
    return Verdict.PASS, f"{h.size} bytes as its header says"


def verify_shards(p: Probe, shards: list[str]) -> tuple[list[str], list[str]]:
    """(shards that do not match their header, shards whose header could not be read), each with why."""
    sec = p.section("ckpt.headers")
    if sec is None or sec.status != 0:
        why = "not run" if sec is None else f"exit {sec.status}" if sec.status is not None else "cut off"
        return [], [f"shard headers not read ({why}: {_first(sec.output) if sec else 'no output'})"]
    headers = parsers.parse_safetensors_headers(sec.output)
    bad, unread = [], []
    for name in shards:
        verdict, why = judge_shard(headers.get(name))
        if verdict is Verdict.FAIL:
            bad.append(f"{name} ({why})")
        elif verdict is Verdict.UNKNOWN:
            unread.append(f"{name} ({why})")
    return bad, unread


def _checkpoint(p: Probe) -> Outcome:
    model, cfg = p.cfg.model_path(p.rank), p.cfg
    st = checkpoint_state(p)
    setup = f"`r37-cockpit setup checkpoint --rank {p.rank}` downloads {cfg.model.repo} into {model}"
    if st.index is None:
        why = "no checkpoint" if not st.files else f"no readable {constants.CHECKPOINT_INDEX}"
        return Outcome(Verdict.FAIL, f"{model}: {why}", setup)
    rev = st.revision.revision if st.revision and st.revision.revision else "unknown"
    repo = st.revision.repo if st.revision else None
    shard_bytes = sum(st.files.get(s, 0) for s in st.index.shards)
    facts = {"checkpoint": (repo, rev, len(st.index.shards), shard_bytes), "revision": rev}
    if st.missing or st.empty:
        parts = []
        if st.missing:
            parts.append(f"{len(st.missing)} of {len(st.index.shards)} shards missing: {_short(st.missing)}")
        if st.empty:
            parts.append(f"empty: {_short(st.empty)}")
        return Outcome(Verdict.FAIL, "; ".join(parts), setup + " (resumes with the same revision)",
                       facts=facts)
    bad, unread = verify_shards(p, st.index.shards)
    if bad:
        return Outcome(Verdict.FAIL, f"{len(bad)} of {len(st.index.shards)} shards do not match their own "
                                     f"headers: {_short(bad, 2)}",
                       f"those shards are truncated or corrupt: move them aside on that host, then {setup} "
                       "again", "a shard's size must be 8 + its header length + the end of its data",
                       facts)
    if unread:
        return Outcome(Verdict.UNKNOWN, f"{len(unread)} of {len(st.index.shards)} shard headers could not be "
                                        f"checked: {_short(unread, 2)}",
                       "re-run the preflight; `stat` and `od` must work on the host", facts=facts)
    value = f"{len(st.index.shards)} shards, {human_bytes(shard_bytes)}, revision {rev[:12]}"
    if repo and repo != cfg.model.repo:
        return Outcome(Verdict.FAIL, f"{value}: checkpoint is {repo}, config says {cfg.model.repo}",
                       "use ONE checkpoint on every rank: download the configured one with "
                       f"`r37-cockpit setup checkpoint --rank {p.rank}` or fix [model] repo", facts=facts)
    pinned = cfg.model.revision if cfg.model.revision and _is_commit(cfg.model.revision) else None
    if pinned and rev != "unknown" and rev != pinned:
        return Outcome(Verdict.FAIL, f"{value}, config pins {pinned[:12]}",
                       f"download the pinned revision: `r37-cockpit setup checkpoint --rank {p.rank}`",
                       facts=facts)
    if len(st.index.shards) != constants.CHECKPOINT_SHARDS:
        return Outcome(Verdict.WARN, f"{value} (the Engram helper expects {constants.CHECKPOINT_SHARDS})",
                       "the R37 Engram helper is specific to the 48-shard layout: use the card's checkpoint",
                       facts=facts)
    return Outcome(Verdict.PASS, value, detail="every shard's size matches its safetensors header",
                   facts=facts)


def _same_checkpoint(cfg: ClusterConfig, outcomes: dict[int, Outcome]) -> dict[int, Outcome]:
    values = {r: o.facts["checkpoint"] for r, o in outcomes.items() if o.facts.get("checkpoint")}
    if len(values) < 2:
        return {}
    # Ranks without a revision marker are compared on shards and sizes only.
    known = {r: v for r, v in values.items() if v[1] != "unknown"}
    shape = {r: v[2:] for r, v in values.items()}
    _, odd_shape = majority(shape)
    odd_rev: list[int] = []
    if len(known) >= 2:
        _, odd_rev = majority({r: v[:2] for r, v in known.items()})
    changed = {}
    remedy = ("use the same checkpoint and revision on every rank: `r37-cockpit setup checkpoint` with the "
              "revision pinned in [model] revision")
    for rank in sorted(set(odd_shape) | set(odd_rev)):
        o = outcomes[rank]
        if o.verdict is Verdict.FAIL:
            continue
        peers = [r for r in values if r != rank and r not in odd_shape and r not in odd_rev]
        what = "revision" if rank in odd_rev else "shard sizes"
        changed[rank] = Outcome(Verdict.FAIL, f"{o.value} — {what} differ from rank {ranks_text(peers)}",
                                remedy, o.detail, o.facts)
    if not changed and known and len(known) < len(values):
        for rank in sorted(set(values) - set(known)):
            o = outcomes[rank]
            if o.verdict is Verdict.PASS:
                changed[rank] = Outcome(Verdict.WARN, o.value + " (no revision marker)",
                                        f"re-run `r37-cockpit setup checkpoint --rank {rank}` so the "
                                        "revision is recorded", o.detail, o.facts)
    return changed


CHECKPOINT = Check("checkpoint", 2, "checkpoint complete, same everywhere", _ckpt_check_cmds, _checkpoint,
                   compare=_same_checkpoint)


# ---- Engram rows -------------------------------------------------------------------------------------


def _engram_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    if rank == 0:
        return {}
    eng = cfg.engram_path(rank)
    return {"engram.files": ["find", eng, *LIST],
            "engram.coverage": ["cat", "--", _join(eng, constants.ENGRAM_COVERAGE_FILE)]}


def engram_ready(p: Probe) -> bool:
    if p.rank == 0:
        return True
    if p.status("engram.coverage") != 0:
        return False
    try:
        parsers.loads(p.output("engram.coverage"))
    except ValueError:
        return False
    files = parsers.parse_find_sizes(p.output("engram.files"))
    return any(_is_weights(name) for name in files)


def _engram(p: Probe) -> Outcome:
    if p.rank == 0:
        return Outcome(Verdict.PASS, "not needed on rank 0 (it reads the full checkpoint)")
    eng = p.cfg.engram_path(p.rank)
    files = parsers.parse_find_sizes(p.output("engram.files"))
    rows = sorted(n for n in files if _is_weights(n))   # other files (notes, odd names) are not rows
    if engram_ready(p):
        return Outcome(Verdict.PASS, f"{constants.ENGRAM_COVERAGE_FILE} + {len(rows)} overlay files in {eng}")
    setup = (f"`r37-cockpit setup engram --rank {p.rank}` runs tools/prepare-engram.py {p.rank} "
             f"{p.cfg.model_path(p.rank)} {eng}")
    if not files:
        return Outcome(Verdict.FAIL, f"no Engram rows in {eng}", setup)
    if constants.ENGRAM_COVERAGE_FILE not in files:
        return Outcome(Verdict.FAIL,
                       f"{eng}: {len(rows)} files but no {constants.ENGRAM_COVERAGE_FILE} (partial?)",
                       "preparation did not finish: inspect the error and prepare into a fresh destination "
                       "(the helper refuses to overwrite shards; do not reuse partial overlays)")
    return Outcome(Verdict.FAIL, f"{eng}: {constants.ENGRAM_COVERAGE_FILE} unreadable or no overlays", setup)


ENGRAM = Check("engram", 5, "Engram rows on workers", _engram_cmds, _engram)


# ---- disk --------------------------------------------------------------------------------------------


def _chain(path: str) -> list[str]:
    """The path and its parents up to '/' (or '.' for a path relative to the login's home)."""
    out = [path]
    while True:
        parent = posixpath.dirname(out[-1].rstrip("/")) or "."
        if parent == out[-1]:
            return out
        out.append(parent)
        if parent in ("/", "."):
            return out


def _disk_paths(cfg: ClusterConfig, rank: int) -> list[tuple[str, str]]:
    """(role, path) on this rank: model, engram (workers), cache, recipe dir (archive and image)."""
    out = [("model", cfg.model_path(rank))]
    if rank != 0:
        out.append(("engram", cfg.engram_path(rank)))
    out += [("cache", cfg.cache_path(rank)), ("recipe", cfg.recipe_dir(rank))]
    return out


def _df_operands(cfg: ClusterConfig, rank: int) -> list[str]:
    seen: dict[str, None] = {}
    for _, path in _disk_paths(cfg, rank):
        for p in _chain(path):
            seen.setdefault(p, None)
    return list(seen)


def _disk_cmds(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {"df": ["df", "-P", "-B1", *_df_operands(cfg, rank)],
            **_ckpt_cmds(cfg, rank), **_engram_cmds(cfg, rank), **image_cmds(cfg, rank)}


def cache_headroom(cfg: ClusterConfig) -> int:
    """Free space kept for the cache path even when everything is in place: an eighth of the runtime budget
    (≈10.6 GB with the card's figures) for compile and multimodal caches."""
    return cfg.budget.runtime_bytes // 8


def disk_needs(p: Probe) -> dict[str, int]:
    """Bytes still to be written per role (what is already complete needs no space)."""
    cfg, b = p.cfg, p.cfg.budget
    ckpt = checkpoint_state(p)
    needs = {"model": 0 if cfg.model.shared_readonly or ckpt.complete
             else max(0, b.checkpoint_bytes - ckpt.present_bytes)}
    if p.rank != 0:
        needs["engram"] = 0 if engram_ready(p) else b.engram_bytes
    needs["cache"] = cache_headroom(cfg)
    needs["recipe"] = 0 if image_loaded(p) else b.runtime_bytes
    return needs


@dataclass
class _Filesystem:
    """One filesystem the disk check found: its df row, the paths on it and what they still need."""

    row: parsers.DfRow
    roles: list[str] = field(default_factory=list)
    need: int = 0


def _disk(p: Probe) -> Outcome:
    operands = _df_operands(p.cfg, p.rank)
    rows = parsers.df_by_path(p.output("df"), operands)
    if not rows:
        return Outcome(Verdict.UNKNOWN, _first(p.output("df")), "run `df -P -B1` on the host")
    needs = disk_needs(p)
    by_fs: dict[tuple[str, str], _Filesystem] = {}
    for role, path in _disk_paths(p.cfg, p.rank):
        at = next((q for q in _chain(path) if q in rows), None)
        if at is None:
            return Outcome(Verdict.UNKNOWN, f"df reported nothing for {path}", "run `df -P -B1` on the host")
        row = rows[at]
        fs = by_fs.setdefault((row.source, row.mount), _Filesystem(row))
        fs.roles.append(f"{role}" + (f" (at {at})" if at != path else ""))
        fs.need += needs.get(role, 0)
    parts, short = [], []
    for (_, mount), fs in by_fs.items():
        avail, need = fs.row.avail, fs.need
        text = f"{mount} {human_bytes(avail)} free, needs {human_bytes(need)}"
        parts.append(text)
        if avail < need:
            short.append(f"{mount} ({', '.join(fs.roles)}): {human_bytes(avail)} free, "
                         f"needs {human_bytes(need)}")
    detail = "budgets still to be written: " + ", ".join(f"{k} {human_bytes(v)}" for k, v in needs.items())
    if not short:
        return Outcome(Verdict.PASS, "; ".join(parts), detail=detail)
    return Outcome(Verdict.FAIL, "; ".join(short),
                   "free space on that filesystem or point the paths at a larger one (per-host model_path, "
                   "engram_path, cache_path, recipe_dir in cluster.toml); paths on one filesystem share it",
                   detail)


def _first(text: str) -> str:
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")[:160]


DISK = Check("disk", 1, "free disk for checkpoint, Engram, runtime, cache", _disk_cmds, _disk)
