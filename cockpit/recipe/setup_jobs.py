"""The five setup jobs of the recipe (steps 2-5) as data: what each reads on a host before planning, and
the steps it plans from that (or why it has nothing to do, or why it refuses). Completed work is detected,
so a re-run resumes: `hf download` skips identical files, an image with the expected ID is not loaded
again, a rank with complete Engram rows and an identical cluster.env are left alone."""

from __future__ import annotations

import difflib
import hashlib
import json
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cockpit import constants
from cockpit.config import ClusterConfig
from cockpit.envfile import env_for_rank
from cockpit.hosts.shell import Cmd, ShellCommand, as_command, command, sections, write_stdin_atomic
from cockpit.recipe import containers, parsers
from cockpit.recipe.checks import Probe, Verdict, majority, ranks_text
from cockpit.recipe.checks_host import image_cmds, image_identity
from cockpit.recipe.checks_storage import (
    ENGRAM,
    RECIPE,
    REVISION_FILE,
    _ckpt_cmds,
    _engram_cmds,
    checkpoint_state,
    engram_ready,
    revision_of,
)
from cockpit.recipe.image_identity import ArchiveIds, identify, parse_archive_ids, parse_image_inspect
from cockpit.recipe.setup_model import Checked, Finalize, RankPlan, Step, StepOutput

VERIFY_MARKER = "@@r37-setup-verify"
ENV_FILE = "cluster.env"


@dataclass(frozen=True)
class PlanContext:
    cfg: ClusterConfig
    rank: int
    revision: str | None          # the resolved 40-hex commit of the checkpoint (None: not needed)
    overwrite_env: bool = False


@dataclass(frozen=True)
class JobSpec:
    name: str
    inspect: Callable[[ClusterConfig, int], dict[str, Cmd]]
    plan: Callable[[PlanContext, Probe], RankPlan]
    finalize: Finalize | None = None


def _join(base: str, name: str) -> str:
    return posixpath.join(base, name)


def _tail(text: str, n: int = 3) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " | ".join(lines[-n:]) if lines else "no output"


def exit_check(out: StepOutput) -> Checked:
    """The default judgement: exit 0 passes; otherwise the exit status and the last lines of output."""
    if out.status == 0:
        return Checked()
    if out.status is None:
        return Checked(f"ended without an exit status ({_tail(out.text)})")
    return Checked(f"exit {out.status}: {_tail(out.text)}")


def verify_step(label: str, cmds: dict[str, Cmd],
                judge: Callable[[dict[str, parsers.Section]], Checked]) -> Step:
    """A read-only step running several commands framed on one channel, judged from their sections."""

    def check(out: StepOutput) -> Checked:
        return judge(parsers.split_sections(out.text, VERIFY_MARKER))

    return Step(label, sections(list(cmds.items()), VERIFY_MARKER),
                shown=tuple(as_command(c).line for c in cmds.values()), check=check, log=False)


def _mkdir(path: str) -> Step:
    return Step("mkdir", command(["mkdir", "-p", "--", path]))


def _probe(cfg: ClusterConfig, rank: int, secs: dict[str, parsers.Section]) -> Probe:
    return Probe(cfg, rank, secs)


# ---- recipe ------------------------------------------------------------------------------------------


def recipe_download(cfg: ClusterConfig, rank: int) -> ShellCommand:
    return command(["hf", "download", cfg.runtime.recipe_repo, "--include", *constants.RECIPE_INCLUDE,
                    "--local-dir", cfg.recipe_dir(rank)])


def _plan_recipe(ctx: PlanContext, probe: Probe) -> RankPlan:
    cfg, rank = ctx.cfg, ctx.rank

    def judge(secs: dict[str, parsers.Section]) -> Checked:
        out = RECIPE.evaluate(_probe(cfg, rank, secs))
        return Checked(None if out.verdict is Verdict.PASS else out.value)

    steps = (_mkdir(cfg.recipe_dir(rank)),
             Step("download", recipe_download(cfg, rank)),
             verify_step("verify", RECIPE.commands(cfg, rank), judge))
    return RankPlan("recipe", rank, steps)


# ---- checkpoint --------------------------------------------------------------------------------------


def revision_marker(repo: str, revision: str) -> str:
    """The one-line JSON preflight reads from `<model path>/.r37-revision`."""
    return json.dumps({"repo": repo, "revision": revision}) + "\n"


def _ckpt_inspect(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {"ckpt.revision": _ckpt_cmds(cfg, rank)["ckpt.revision"]}


def checkpoint_download(cfg: ClusterConfig, rank: int, revision: str) -> ShellCommand:
    return command(["hf", "download", cfg.model.repo, "--revision", revision, "--local-dir",
                    cfg.model_path(rank)])


Judge = Callable[[dict[str, parsers.Section]], Checked]


def _ckpt_judge(cfg: ClusterConfig, rank: int, revision: str | None) -> Judge:
    def judge(secs: dict[str, parsers.Section]) -> Checked:
        st = checkpoint_state(_probe(cfg, rank, secs))
        model = cfg.model_path(rank)
        if st.index is None:
            return Checked(f"{model}: no readable {constants.CHECKPOINT_INDEX}")
        if st.missing:
            return Checked(f"{len(st.missing)} of {len(st.index.shards)} shards missing: "
                           + ", ".join(st.missing[:3]) + (" …" if len(st.missing) > 3 else ""))
        if st.empty:
            return Checked("empty shards: " + ", ".join(st.empty[:3]))
        got = st.revision.revision if st.revision else None
        if revision and got and got != revision:
            return Checked(f"revision mismatch: observed {got}, expected {revision}")
        sizes = {s: st.files[s] for s in st.index.shards}
        return Checked(facts={"shards": sizes})

    return judge


def _plan_checkpoint(ctx: PlanContext, probe: Probe) -> RankPlan:
    cfg, rank, want = ctx.cfg, ctx.rank, ctx.revision
    model = cfg.model_path(rank)
    have = revision_of(model, parsers.parse_head_verbose(probe.output("ckpt.revision")))
    marker = parsers.parse_head_verbose(probe.output("ckpt.revision")).get(_join(model, REVISION_FILE))
    other_repo = bool(have and have.repo and have.repo != cfg.model.repo)
    if have and have.revision and want and (have.revision != want or other_repo):
        what = f"{have.repo or cfg.model.repo}@{have.revision}"
        return RankPlan("checkpoint", rank, refused=(
            f"{model} holds {what}, the config pins {cfg.model.repo}@{want}: an existing checkpoint of "
            "another revision is never overwritten or mixed — download into a fresh model path (per-host "
            "model_path) or pin that revision in [model] revision"))
    verify = verify_step("verify", _ckpt_cmds(cfg, rank), _ckpt_judge(cfg, rank, want))
    if cfg.model.shared_readonly:
        return RankPlan("checkpoint", rank, (verify,))
    if want is None:
        raise ValueError("a checkpoint download needs a resolved revision")
    steps = [Step("download", checkpoint_download(cfg, rank, want)), verify]
    text = revision_marker(cfg.model.repo, want)
    if not marker:
        path = _join(model, REVISION_FILE)
        steps.append(Step("record revision", write_stdin_atomic(path), input=text,
                          shown=(f"{write_stdin_atomic(path).line}   # stdin: {text.strip()}",)))
    return RankPlan("checkpoint", rank, tuple(steps))


def same_shards(facts: dict[int, dict[str, Any]]) -> dict[int, str]:
    """Ranks whose shard sizes differ from the majority's, with the first difference."""
    sizes = {r: tuple(sorted(f["shards"].items())) for r, f in facts.items() if "shards" in f}
    if len(sizes) < 2:
        return {}
    best, odd = majority(sizes)
    peers = [r for r in sizes if r not in odd]
    out = {}
    ref = dict(best)
    for rank in odd:
        mine = dict(sizes[rank])
        diff = sorted(k for k in set(mine) | set(ref) if mine.get(k) != ref.get(k))
        first = diff[0] if diff else "?"
        out[rank] = (f"shard sizes differ from rank {ranks_text(peers)}: {first} is {mine.get(first)} bytes "
                     f"here, {ref.get(first)} there — use ONE checkpoint on every rank")
    return out


# ---- runtime -----------------------------------------------------------------------------------------


def archive_path(cfg: ClusterConfig, rank: int) -> str:
    return _join(cfg.recipe_dir(rank), cfg.runtime.archive)


def _size_check(want: int) -> Callable[[StepOutput], Checked]:
    def check(out: StepOutput) -> Checked:
        if out.status != 0:
            return exit_check(out)
        got = out.text.strip().splitlines()[-1].strip() if out.text.strip() else ""
        if got != str(want):
            return Checked(f"archive size mismatch: observed {got or 'nothing'} bytes, expected {want} bytes "
                           "— not loaded; download it again (never load an unverified archive)")
        return Checked()
    return check


def _sha_check(want: str) -> Callable[[StepOutput], Checked]:
    def check(out: StepOutput) -> Checked:
        if out.status != 0:
            return exit_check(out)
        m = re.search(r"\b[0-9a-f]{64}\b", out.text)
        got = m.group(0) if m else "nothing"
        if got != want:
            return Checked(f"archive sha256 mismatch: observed {got}, expected {want} — not loaded; "
                           "stop and investigate, never substitute another archive")
        return Checked()
    return check


def _archive_ids_check(seen: dict[str, ArchiveIds]) -> Callable[[StepOutput], Checked]:
    """Keeps what the verified archive names (for `_image_check` on a containerd image store)."""
    def check(out: StepOutput) -> Checked:
        seen["archive"] = parse_archive_ids(out.text) if out.status == 0 else ArchiveIds((), ())
        return Checked()
    return check


def _image_check(want: str, seen: dict[str, ArchiveIds] | None = None) -> Callable[[StepOutput], Checked]:
    def check(out: StepOutput) -> Checked:
        facts = parse_image_inspect(out.text)
        if facts is None:
            return Checked(f"image ID mismatch: observed no image, expected {want} — this is not "
                           "the verified R37 image; do not launch with it")
        ident = identify(facts, want, (seen or {}).get("archive"))
        if not ident.ok:
            return Checked(f"image ID mismatch: {ident.how} — this is not the verified R37 image; do not "
                           "launch with it")
        return Checked()
    return check


def image_inspect(cfg: ClusterConfig) -> ShellCommand:
    return command(containers.image_id_argv(cfg.runtime.image_tag))


def _plan_runtime(ctx: PlanContext, probe: Probe) -> RankPlan:
    cfg, rank = ctx.cfg, ctx.rank
    facts, ident = image_identity(probe)
    have = facts.id if facts is not None else None
    if have is not None and ident is not None and ident.ok:
        via = "" if have == cfg.runtime.image_id else f" ({ident.how})"
        return RankPlan("runtime", rank, done=f"{cfg.runtime.image_tag} is loaded with the expected ID "
                                              f"{have[:19]}…{via}")
    path = archive_path(cfg, rank)
    seen: dict[str, ArchiveIds] = {}
    steps = (
        _mkdir(cfg.recipe_dir(rank)),
        Step("download", command(["hf", "download", cfg.runtime.recipe_repo, cfg.runtime.archive,
                                             "--local-dir", cfg.recipe_dir(rank)])),
        Step("verify size", command(["stat", "-c", "%s", "--", path]),
             check=_size_check(cfg.runtime.size_bytes)),
        Step("verify sha256", command(["sha256sum", "--", path]), check=_sha_check(cfg.runtime.sha256)),
        Step("docker load", command(["docker", "load", "-i", path])),
        Step("read the archive's digests", command(containers.archive_ids_argv(path)),
             check=_archive_ids_check(seen), log=False),
        Step("verify image ID", image_inspect(cfg), check=_image_check(cfg.runtime.image_id, seen)),
    )
    note = f"loaded image has ID {have}, expected {cfg.runtime.image_id}: loading again" if have else ""
    return RankPlan("runtime", rank, steps, note=note)


# ---- Engram ------------------------------------------------------------------------------------------


def prepare_engram(cfg: ClusterConfig, rank: int) -> ShellCommand:
    argv = ["python3", "tools/prepare-engram.py", str(rank), cfg.model_path(rank), cfg.engram_path(rank)]
    return command(argv, cwd=cfg.recipe_dir(rank))


def _coverage_rank(text: str) -> int | None:
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    rank = doc.get("rank") if isinstance(doc, dict) else None
    return rank if isinstance(rank, int) else None


def _plan_engram(ctx: PlanContext, probe: Probe) -> RankPlan:
    cfg, rank = ctx.cfg, ctx.rank
    eng = cfg.engram_path(rank)
    if rank == 0:
        return RankPlan("engram", rank, done="not needed on rank 0 (it reads the complete checkpoint)")
    files = parsers.parse_find_sizes(probe.output("engram.files"))
    if engram_ready(probe):
        owner = _coverage_rank(probe.output("engram.coverage"))
        if owner is not None and owner != rank:
            return RankPlan("engram", rank, refused=f"{eng} holds rows prepared for rank {owner}, not rank "
                                                    f"{rank}: use a fresh destination (rows are never "
                                                    "overwritten)")
        return RankPlan("engram", rank, done=f"complete rows in {eng}: {constants.ENGRAM_COVERAGE_FILE} + "
                                             f"{len(files) - 1} overlay files")
    if files:
        shown = ", ".join(sorted(files)[:4]) + (" …" if len(files) > 4 else "")
        return RankPlan("engram", rank, refused=(
            f"destination {eng} is not empty ({shown}) but has no complete rows: Engram rows are never "
            "overwritten — inspect why the earlier preparation stopped, then prepare into a fresh "
            "destination (per-host engram_path)"))

    def judge(secs: dict[str, parsers.Section]) -> Checked:
        out = ENGRAM.evaluate(_probe(cfg, rank, secs))
        return Checked(None if out.verdict is Verdict.PASS else out.value)

    steps = (Step("prepare-engram", prepare_engram(cfg, rank)),
             Step("du -h", command(["du", "-h", "--", eng])),
             verify_step("verify rows", _engram_cmds(cfg, rank), judge))
    return RankPlan("engram", rank, steps)


# ---- cluster.env -------------------------------------------------------------------------------------


def env_path(cfg: ClusterConfig, rank: int) -> str:
    return _join(cfg.recipe_dir(rank), ENV_FILE)


def _env_inspect(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {"env.current": ["cat", "--", env_path(cfg, rank)]}


def env_diff(old: str, new: str, path: str) -> str:
    return "".join(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                        f"{path} (on the host)", f"{path} (from cluster.toml)"))


def _write_check(path: str) -> Callable[[StepOutput], Checked]:
    def check(out: StepOutput) -> Checked:
        if out.status == 17:
            return Checked(f"{path} was created or changed on the host since it was inspected: left alone")
        return exit_check(out)
    return check


def _plan_env(ctx: PlanContext, probe: Probe) -> RankPlan:
    cfg, rank = ctx.cfg, ctx.rank
    path = env_path(cfg, rank)
    want = env_for_rank(cfg, rank)
    sec = probe.section("env.current")
    what = f"# stdin: cluster.env for rank {rank} from cluster.toml ({len(want.splitlines())} lines)"
    if sec is not None and sec.status == 0:
        have = sec.output
        if have == want:
            return RankPlan("env", rank, done=f"{path} is identical to cluster.toml's")
        diff = env_diff(have, want, path)
        if not ctx.overwrite_env:
            return RankPlan("env", rank, note=diff, refused=(
                f"{path} differs from cluster.toml (diff shown); nothing replaced — review the diff and "
                f"replace it with `r37-cockpit setup env --rank {rank} --overwrite-env`, or fix "
                "cluster.toml"))
        sha = hashlib.sha256(have.encode()).hexdigest()
        cmd = write_stdin_atomic(path, replace_sha256=sha)
        step = Step("replace", cmd, shown=(f"{cmd.line}   {what}",), input=want, check=_write_check(path))
        return RankPlan("env", rank, (step,), note=diff)
    output = sec.output if sec is not None else ""
    if sec is None or "No such file" not in output:
        return RankPlan("env", rank, refused=f"cannot read {path}: {_tail(output)}")
    cmd = write_stdin_atomic(path)
    return RankPlan("env", rank, (_mkdir(cfg.recipe_dir(rank)),
                                  Step("write", cmd, shown=(f"{cmd.line}   {what}",), input=want,
                                       check=_write_check(path))))


# ---- registry ----------------------------------------------------------------------------------------


def _nothing(cfg: ClusterConfig, rank: int) -> dict[str, Cmd]:
    return {}


SPECS: dict[str, JobSpec] = {
    "recipe": JobSpec("recipe", _nothing, _plan_recipe),
    "checkpoint": JobSpec("checkpoint", _ckpt_inspect, _plan_checkpoint, same_shards),
    "runtime": JobSpec("runtime", image_cmds, _plan_runtime),
    "engram": JobSpec("engram", _engram_cmds, _plan_engram),
    "env": JobSpec("env", _env_inspect, _plan_env),
}
