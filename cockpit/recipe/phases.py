"""Launch phases and failure signatures of an R37 rank, AS DATA: pattern → phase / failure.

The log lines: docs/vllm.md#launch-phases and docs/vllm.md#failure-signatures.

A rank's container log moves through the phases of `PHASES` in order. `PHASE_RULES` say which log line
enters which phase (some only on the head, rank 0, or only on workers); `FAILURE_RULES` say which lines
are failure signatures, with a short label and a remedy. A failure rule's `priority` ranks how specific
it is: the generic "Engine core initialization failed. See root cause above." loses to the NCCL or
memory line that came before it, so the operator is shown the real cause.
"""

from __future__ import annotations

import re
import re._constants as _sre
import re._parser as _sre_parser
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

Role = Literal["any", "head", "worker"]


class Phase(StrEnum):
    """Where a rank is in its boot, in order."""

    PENDING = "pending"
    LAUNCHED = "launched"
    RUNNING = "container running"
    DIST_INIT = "distributed init"
    ENGRAM = "Engram rows"
    LOADING = "loading weights"
    KV_CACHE = "KV cache"
    CUDA_GRAPHS = "CUDA graphs"
    WAIT_HEAD = "waiting for head"
    API_START = "API starting"
    READY = "ready"


PHASES: tuple[Phase, ...] = tuple(Phase)
PHASE_INDEX = {p: i for i, p in enumerate(PHASES)}

# Short labels for narrow timeline columns.
PHASE_SHORT = {
    Phase.PENDING: "pend", Phase.LAUNCHED: "launch", Phase.RUNNING: "run", Phase.DIST_INIT: "dist",
    Phase.ENGRAM: "engram", Phase.LOADING: "load", Phase.KV_CACHE: "kv", Phase.CUDA_GRAPHS: "graphs",
    Phase.WAIT_HEAD: "wait", Phase.API_START: "api", Phase.READY: "ready",
}


def phase_order(phase: Phase) -> int:
    return PHASE_INDEX[phase]


def role_of(rank: int) -> Role:
    return "head" if rank == 0 else "worker"


@dataclass(frozen=True, slots=True)
class PhaseRule:
    """A log line matching `pattern` moves a rank of `role` into `phase` (never backwards)."""

    pattern: re.Pattern[str]
    phase: Phase
    role: Role = "any"


@dataclass(frozen=True, slots=True)
class FailureRule:
    """A failure signature: `label` says what happened, `remedy` what to do.

    `secondary`: the line reports another rank's death (the head lost a worker, a worker lost the head),
    so the cluster verdict blames a rank with a primary failure first.
    `exits_clean`: after this failure the process still exits with code 0 (real vLLM 0.32's API server
    shuts down cleanly when its engine core died), so a clean exit nobody asked for is no stop.
    `at_warning`: the signature counts on a vLLM WARNING line too (other rules never fire on
    DEBUG/INFO/WARNING lines: a warning that names an error is not that error).
    """

    name: str
    pattern: re.Pattern[str]
    label: str
    remedy: str
    priority: int
    secondary: bool = False
    exits_clean: bool = False
    at_warning: bool = False


def _re(text: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(text, flags)


PHASE_RULES: tuple[PhaseRule, ...] = (
    # distributed init: the engine process comes up and joins the TP group
    PhaseRule(_re(r"Initializing a V1 LLM engine"), Phase.DIST_INIT),
    PhaseRule(_re(r"DP group leader: node_rank="), Phase.DIST_INIT),
    PhaseRule(_re(r"\brank \d+ in world size \d+ is assigned as"), Phase.DIST_INIT),
    PhaseRule(_re(r"world_size=\d+ rank=\d+ local_rank=\d+ distributed_init_method="), Phase.DIST_INIT),
    PhaseRule(_re(r"\bNCCL INFO\b|vLLM is using nccl=="), Phase.DIST_INIT),
    # a worker node's `vllm serve --headless`: "Launching vLLM (vX) headless multiproc executor, with head
    # node address …" (older texts kept: they cost nothing)
    PhaseRule(_re(r"[Hh]eadless mode|headless multiproc executor|Connecting to the head at"), Phase.DIST_INIT,
              "worker"),
    # disk Engram patch: the rows this rank serves
    PhaseRule(_re(r"Engram DISK mode: layer \d+ rows \[|Engram DISK mode enabled"), Phase.ENGRAM),
    # weights
    PhaseRule(_re(r"Starting to load model"), Phase.LOADING),
    PhaseRule(_re(r"Loading (?:safetensors )?checkpoint shards:"), Phase.LOADING),
    # KV cache sizing (after "Loading weights took" / "Model loading took")
    PhaseRule(_re(r"Loading weights took|Model loading took"), Phase.KV_CACHE),
    # the pinned version: "GPU KV cache size: N tokens" and "Maximum concurrency for …" on two lines;
    # 0.32: one line "CPU|GPU KV cache size: N tokens, Maximum concurrency for L tokens per request: X"
    PhaseRule(_re(r"Available KV cache memory|[CG]PU KV cache size|Maximum concurrency for"), Phase.KV_CACHE),
    # CUDA graph capture
    PhaseRule(_re(r"Capturing CUDA graphs?"), Phase.CUDA_GRAPHS),
    # after graphs: workers wait for the head to serve, the head starts its API server
    PhaseRule(_re(r"Graph capturing finished|Worker ready; running headless"), Phase.WAIT_HEAD, "worker"),
    PhaseRule(_re(r"Graph capturing finished|init engine \(profile, create kv cache"), Phase.API_START,
              "head"),
    # the pinned version: "Starting vLLM API server 0 on …" and uvicorn's "Uvicorn running on …";
    # 0.32: "Starting vLLM server on http://…" and no "Uvicorn running on"
    PhaseRule(_re(r"Starting vLLM (?:API )?server|Uvicorn running on|Application startup complete\."),
              Phase.API_START, "head"),
)

# Loading progress: tqdm line "Loading safetensors checkpoint shards:  50% Completed | 24/48 [...]".
PROGRESS_RULE = _re(r"Loading (?:safetensors )?checkpoint shards:.*?(\d+)/(\d+)")

REMEDY_FABRIC = ("wrong HCA or GID index, or the ports are not cabled together: check that rank's `ib_hca` "
                 "and `gid_index` in cluster.toml against `ibdev2netdev` and the GID table (RoCE v2, the "
                 "fabric IP; `r37-cockpit preflight` checks both), write cluster.env again "
                 "(`r37-cockpit setup env --overwrite-env`), then run your site's RDMA/NCCL test before "
                 "relaunching")
REMEDY_HEAD = ("read rank 0's log for the first failure; stop every rank (head first) before "
               "relaunching, or new workers may join the old rendezvous and hang")
REMEDY_MEMORY = ("free unified memory first: MemAvailable must be ≥ 100 GiB on every rank (another "
                 "model or process may hold it: `nvidia-smi --query-compute-apps=pid,used_memory`); keep "
                 "the recipe's GMU=0.81")
REMEDY_PEER = ("find the worker that failed first (its own rank turns red with the cause); stop every rank, "
               "head first, fix it and relaunch")
REMEDY_ENGINE_CORE = ("the engine core process died under the API server (a signal, the kernel's OOM killer, "
                      "a crash in native code): read the lines before it and the host's kernel log "
                      "(`dmesg`), then stop every rank (head first) and relaunch")
REMEDY_ROOT = "the real cause is earlier in this rank's log (shown above); fix it, stop all ranks, relaunch"

FAILURE_RULES: tuple[FailureRule, ...] = (
    FailureRule("worker-died", _re(r"Worker proc \S+ (?:\(node_rank=\d+\) )?died unexpectedly"),
                "a worker rank died (the head stops serving)", REMEDY_PEER, 95, secondary=True),
    # the head's own engine core process died (SIGKILL, OOM kill, a native crash): 0.32's API server says
    # "[shutdown] MPClient: engine core exited unexpectedly; starting cleanup", older ones "Engine core proc
    # EngineCore_DP0 died unexpectedly"; an EngineDeadError follows and the server then EXITS 0. Priority
    # 95: above the EngineDeadError that follows, not above a worker's death read before it.
    FailureRule("engine-core-died",
                _re(r"engine core exited unexpectedly|Engine core proc \S+ died unexpectedly"),
                "the engine core process died (the API server shuts down)", REMEDY_ENGINE_CORE, 95,
                exits_clean=True, at_warning=True),
    # the head's engine core reporting that a worker died (its own traceback follows the worker's death)
    FailureRule("engine-dead", _re(r"Worker failed with error|EngineDeadError"),
                "the engine lost a worker (the head stops serving)", REMEDY_PEER, 94, secondary=True),
    FailureRule("ibv-modify-qp", _re(r"Call to ibv_modify_qp failed with 110 Connection timed out"),
                "RoCE connection timed out (ibv_modify_qp 110)", REMEDY_FABRIC, 90),
    FailureRule("ib-completion-12", _re(r"NET/IB: Got completion from peer.*status=12"),
                "RDMA transport retries exceeded (completion status=12)",
                "a peer stopped answering over RoCE: check the peer ranks' logs and `rdma link show` "
                "on every host", 85),
    FailureRule("ibv-reg-mr", _re(r"wrap_ibv_reg_mr_iova2.*Cannot allocate memory"),
                "cannot register RDMA memory (ibv_reg_mr)",
                "the container needs --ulimit memlock=-1 (launch/node.sh sets it) and enough free "
                "memory; check MemAvailable on this host", 85),
    FailureRule("no-common-block-size", _re(r"No common block size"),
                "no common KV block size across ranks",
                "the ranks disagree on the model or attention settings: use the same image and checkpoint "
                "on every rank and one cluster.toml for all (`r37-cockpit setup env --overwrite-env` "
                "writes every rank's cluster.env from it)", 80),
    FailureRule("too-many-open-files", _re(r"Too many open files"),
                "too many open files",
                "raise the open-files limit for docker (the launcher passes --ulimit nofile); check the "
                "host's `ulimit -n` and dockerd's LimitNOFILE", 80),
    FailureRule("cuda-error", _re(r"CUDA error: (?!out of memory)"),
                "CUDA error on this rank's GPU",
                "a GPU fault: read the lines before it, check `nvidia-smi` and the kernel log (Xid) on "
                "that host; stop every rank (head first) and relaunch", 75),
    FailureRule("out-of-memory", _re(r"out of memory|OutOfMemoryError", re.IGNORECASE),
                "out of memory", REMEDY_MEMORY, 80),
    FailureRule("killed", _re(r"(?:^|\s)Killed(?:\s|$)"),
                "process killed (often the kernel's OOM killer)", REMEDY_MEMORY, 70),
    FailureRule("tcpstore", _re(r"TCPStore recvValue failed|recvValue failed|DistStoreError: Failed to recv"),
                "lost the head's TCPStore (rank 0 died or restarted)", REMEDY_HEAD, 60, secondary=True),
    FailureRule("nccl-system-error", _re(r"unhandled system error"),
                "NCCL unhandled system error", REMEDY_FABRIC, 50),
    FailureRule("nccl-warn", _re(r"\bNCCL WARN\b"), "NCCL warning", REMEDY_FABRIC, 40),
    FailureRule("exception", _re(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception): "
                                     r"(?!Engine core initialization failed)\S"),
                "Python exception", REMEDY_ROOT, 35),
    FailureRule("traceback", _re(r"Traceback \(most recent call last\)"), "Python traceback",
                REMEDY_ROOT, 30),
    FailureRule("engine-init-failed", _re(r"Engine core initialization failed"),
                "engine core initialization failed", REMEDY_ROOT, 10, secondary=True),
)

# Lines that look like failures but are not: a headless worker retrying the head's store while the
# head is not up yet (it logs a traceback ending "still retrying" and keeps trying).
BENIGN_RULES: tuple[re.Pattern[str], ...] = (
    _re(r"still retrying"),
    _re(r"\[c10d\] The client socket has failed to connect to .*Connection refused"),
)

# A line vLLM itself logged below ERROR: what it names (a warning quotes `OSError: [Errno 24] Too many open
# files` when the open-files limit is low) is not a failure that happened. Tracebacks, NCCL's own lines and
# ERROR/CRITICAL lines have no such level and are judged as before.
_QUIET_LEVEL = re.compile(r"^(?:\([\w.-]+ pid=\d+\) )?(?:DEBUG|INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d \[")

# One uvicorn access-log line per HTTP request (real vLLM writes them; the cockpit's own /health and
# /metrics probes make one every few seconds): `INFO:     127.0.0.1:43686 - "GET /health HTTP/1.1" 200 OK`.
ACCESS_LOG = re.compile(r'^INFO: +\S+:\d+ - "[A-Z]+ \S+ HTTP/[\d.]+" \d{3}\b')


def is_access_log(line: str) -> bool:
    """An access-log line: never a phase or a failure, and kept out of a failure's context window (the
    log view still shows it)."""
    return line.startswith("INFO:") and ACCESS_LOG.match(line) is not None


_VLLM_PREFIX = re.compile(r"^(?:\([\w.-]+ pid=\d+\) )?"
                          r"(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d \[[^\]]*\] )?")
_EXC_RULE = next(r for r in FAILURE_RULES if r.name == "exception")
TRACEBACK_RULE = next(r for r in FAILURE_RULES if r.name == "traceback")


def last_segment(line: str) -> str:
    """tqdm redraws with carriage returns: the text after the last one is what the terminal shows."""
    if "\r" not in line:
        return line
    parts = [p for p in line.split("\r") if p.strip()]
    return parts[-1] if parts else ""


def required_literals(pattern: re.Pattern[str], shortest: int = 3) -> tuple[str, ...] | None:
    """Literal texts of which every match of `pattern` contains one (one per top-level alternative),
    or None when that cannot be said (an alternative without a literal run). For a case-insensitive
    pattern the literals hold in any case.

    A prefilter: nearly every log line matches no rule, and `text in line` costs a fraction of a
    regex search, so a rule's regex runs only on lines holding one of its literals.
    """
    items = list(_sre_parser.parse(pattern.pattern, pattern.flags & ~re.IGNORECASE))
    branches = ([list(b) for b in items[0][1][1]] if len(items) == 1 and items[0][0] is _sre.BRANCH
                else [items])
    out = []
    for branch in branches:
        best = cur = ""
        for op, arg in branch:
            if op is _sre.LITERAL:
                cur += chr(arg)
            else:
                best, cur = max(best, cur, key=len), ""
        best = max(best, cur, key=len)
        if len(best) < shortest:
            return None
        out.append(best)
    return tuple(out)


class Prefilter:
    """Which of several rules may match a text: one C-level search for all their literals at once (the
    case-insensitive ones looked for in the lowered text); only on a text that holds one of them (rare in
    a log) is each rule's own literal list looked at."""

    def __init__(self, patterns: Sequence[re.Pattern[str]],
                 literals: Sequence[tuple[str, ...] | None] | None = None):
        lits = list(literals) if literals is not None else [required_literals(p) for p in patterns]
        self._rules = [(lits_i, bool(p.flags & re.IGNORECASE))
                       for p, lits_i in zip(patterns, lits, strict=True)]
        self.always = tuple(i for i, lits_i in enumerate(lits) if lits_i is None)
        self._cs = self._combined([lt for lits_i, ci in self._rules if lits_i and not ci for lt in lits_i], 0)
        self._ci = tuple({lt.lower() for lits_i, ci in self._rules if lits_i and ci for lt in lits_i})

    @staticmethod
    def _combined(literals: list[str], flags: int) -> re.Pattern[str] | None:
        ordered = sorted(set(literals), key=len, reverse=True)
        return re.compile("|".join(map(re.escape, ordered)), flags) if ordered else None

    def candidates(self, text: str) -> tuple[int, ...]:
        low = text.lower() if self._ci else text
        if ((self._cs is None or self._cs.search(text) is None)
                and not any(lt in low for lt in self._ci)):
            return self.always
        return tuple(i for i, (lits, ci) in enumerate(self._rules)
                     if lits is None or any((lt.lower() in low) if ci else (lt in text) for lt in lits))


_PHASE_FILTER = Prefilter([r.pattern for r in PHASE_RULES])


def match_phase(line: str, rank: int) -> Phase | None:
    """The phase this line announces for this rank (the latest one if several rules match)."""
    text = last_segment(line)
    role = role_of(rank)
    best: Phase | None = None
    for i in _PHASE_FILTER.candidates(text):
        rule = PHASE_RULES[i]
        if rule.role not in ("any", role):
            continue
        if rule.pattern.search(text) and (best is None or PHASE_INDEX[rule.phase] > PHASE_INDEX[best]):
            best = rule.phase
    return best


# vLLM's periodic engine stats line (every 10 s while busy): throughputs and request counts.
STATS_RULE = _re(r"Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, "
                 r"Running: (\d+) reqs, Waiting: (\d+) reqs")


def match_stats(line: str) -> tuple[float, float, int, int] | None:
    """`(prompt tok/s, generation tok/s, running, waiting)` of an engine stats line."""
    m = STATS_RULE.search(line)
    if not m:
        return None
    try:
        return float(m.group(1)), float(m.group(2)), int(m.group(3)), int(m.group(4))
    except ValueError:
        return None


def match_progress(line: str) -> tuple[int, int] | None:
    """`(done, total)` of the checkpoint shard loader, if this line reports it."""
    m = PROGRESS_RULE.search(last_segment(line))
    if not m:
        return None
    done, total = int(m.group(1)), int(m.group(2))
    return (done, total) if 0 <= done <= total and total > 0 else None


def strip_prefix(line: str) -> str:
    """The message of a vLLM log line (`(Proc pid=N) LEVEL MM-DD HH:MM:SS [file:line] ` removed)."""
    return _VLLM_PREFIX.sub("", line.rstrip())


def is_benign(line: str) -> bool:
    return any(p.search(line) for p in BENIGN_RULES)


def starts_traceback(line: str) -> bool:
    return TRACEBACK_RULE.pattern.search(line) is not None


def in_traceback(line: str) -> bool:
    """A frame of a Python traceback (indented `File …` / code lines, chained-exception separators)."""
    msg = strip_prefix(line)
    return (not msg.strip() or msg.startswith((" ", "\t")) or starts_traceback(msg)
            or msg.startswith(("During handling of the above exception",
                               "The above exception was the direct cause")))


# _EXC_RULE runs on the message without its prefix, and every match of it holds one of these
_FAILURE_FILTER = Prefilter([r.pattern for r in FAILURE_RULES],
                            [("Error: ", "Exception: ") if r is _EXC_RULE else required_literals(r.pattern)
                             for r in FAILURE_RULES])


def match_failure(line: str) -> FailureRule | None:
    """The most specific failure signature in this line, if any (None for benign lines)."""
    candidates = [FAILURE_RULES[i] for i in _FAILURE_FILTER.candidates(line)]
    if not candidates or is_benign(line):
        return None
    quiet = _QUIET_LEVEL.match(line)
    if quiet is not None:
        # 0.32 reports its engine core's death at WARNING level; no other signature counts there
        candidates = [r for r in candidates if r.at_warning and "WARNING" in quiet.group(0)]
        if not candidates:
            return None
    best: FailureRule | None = None
    stripped = strip_prefix(line.strip())
    for rule in candidates:
        target = stripped if rule is _EXC_RULE else line
        if rule.pattern.search(target) and (best is None or rule.priority > best.priority):
            best = rule
    return best
