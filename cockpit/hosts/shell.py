"""Shell lines for hosts, built from argv lists. The only module that writes shell syntax."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True, slots=True)
class ShellCommand:
    """A quoted shell line for a host's login shell; `line` is also what the operator is shown."""

    line: str

    def __str__(self) -> str:
        return self.line


Cmd = ShellCommand | Sequence[str]


def command(argv: Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
            merge_stderr: bool = False) -> ShellCommand:
    """`cd CWD && env K=V ARGV [2>&1]`, every word quoted.

    A cwd of `-` means the directory named `-` (bash's `cd -` would go back to `$OLDPWD`). With `env`, an
    argv[0] holding `=` or starting with `-` is refused (env would read it as an assignment or an option).
    """
    if not argv:
        raise ValueError("empty argv")
    words = list(argv)
    if env:
        for key in env:
            if not _ENV_NAME.match(key):
                raise ValueError(f"bad environment variable name: {key!r}")
        if "=" in words[0] or words[0].startswith("-"):
            raise ValueError(f"a command name cannot follow env assignments: {words[0]!r}")
        words = ["env", *(f"{k}={v}" for k, v in env.items()), *words]
    line = shlex.join(words)
    if merge_stderr:
        line += " 2>&1"
    if cwd:
        line = f"cd -- {shlex.quote('./-' if cwd == '-' else cwd)} && {line}"
    return ShellCommand(line)


def as_command(cmd: Cmd) -> ShellCommand:
    return cmd if isinstance(cmd, ShellCommand) else command(cmd)


def sequence(*cmds: Cmd) -> ShellCommand:
    """Run each command in turn whatever the previous one returned; exit status is the last one's.

    A command that changes directory (`command(..., cwd=...)`) runs in a subshell, so the next one
    starts where the sequence started (relative directories never pile up)."""
    lines = (as_command(c).line for c in cmds)
    return ShellCommand("; ".join(f"( {line} )" if line.startswith("cd -- ") else line for line in lines))


def every(seconds: float, cmd: Cmd, *, marker: str | None = None, status: bool = False) -> ShellCommand:
    """A long-lived loop that runs `cmd` every `seconds` (one channel, no new SSH session per sample).

    With `marker`, a line holding only the marker is printed after each round, so a reader can tell
    where one sample ends; with `status` too, the line is `MARKER STATUS` (the command's exit status), so
    a failed round is told from an empty one.
    """
    if seconds <= 0:
        raise ValueError("interval must be positive")
    body = as_command(cmd).line
    if marker is not None:
        body += f"; echo {shlex.quote(marker)}" + (' "$?"' if status else "")
    return ShellCommand(f"while :; do {body}; sleep {seconds:g}; done")


SAME = "="     # `every_changed`'s status word for a round whose output equalled the last one's


def every_changed(seconds: float, cmd: Cmd, *, marker: str) -> ShellCommand:
    """`every` with `marker` and `status`, but a round whose output (stdout and stderr, merged) and status
    equal the previous round's prints only `MARKER =` (`SAME`): the reader keeps the last round's output.
    Most rounds of a look at a steady container repeat the last one: ~200 lines a second per host, then
    one. The first round of each channel is printed whole."""
    if seconds <= 0:
        raise ValueError("interval must be positive")
    if not _LABEL.match(marker):
        raise ValueError(f"bad marker: {marker!r}")
    body = as_command(cmd).line
    return ShellCommand(
        f'last=; while :; do out=$( {{ {body}; }} 2>&1 </dev/null; echo {marker} "$?"); '
        f'if [ "$out" = "$last" ]; then echo {marker} {SAME}; else printf \'%s\\n\' "$out"; last=$out; fi; '
        f"sleep {seconds:g}; done")


def read_files(paths: Sequence[str]) -> ShellCommand:
    """Print `PATH<TAB>first line` for every readable file (missing ones print `PATH<TAB>` nothing)."""
    quoted = " ".join(shlex.quote(p) for p in paths)
    return ShellCommand(
        f"for f in {quoted}; do if [ -r \"$f\" ]; then printf '%s\\t' \"$f\"; head -n 1 -- \"$f\"; fi; done"
    )


def tcp_probe(host: str, port: int, timeout_s: int = 3) -> ShellCommand:
    """Exit 0 if a TCP connection to host:port opens from the host itself (bash /dev/tcp, no nc needed)."""
    target = shlex.quote(f"/dev/tcp/{host}/{int(port)}")
    return ShellCommand(f"timeout {int(timeout_s)} bash -c {shlex.quote(f'exec 3<>{target}')}")


_LABEL = re.compile(r"[A-Za-z0-9_.:@-]+\Z")


def sections(parts: Sequence[tuple[str, Cmd]], marker: str) -> ShellCommand:
    """Several commands on one channel, each framed so its output and exit status can be told apart.

    For each `(label, cmd)` in turn: a line `MARKER begin LABEL`, the command's stdout and stderr (merged,
    stdin from /dev/null), then a newline and a line `MARKER end LABEL STATUS`. Split the output with
    `cockpit.recipe.parsers.split_sections`.
    """
    if not _LABEL.match(marker):
        raise ValueError(f"bad section marker: {marker!r}")
    body = []
    for label, cmd in parts:
        if not _LABEL.match(label):
            raise ValueError(f"bad section label: {label!r}")
        begin = shlex.quote(f"{marker} begin {label}")
        body.append(f"echo {begin}; {{ {as_command(cmd).line}\n}} </dev/null 2>&1; "
                    f"printf '\\n%s %s\\n' {shlex.quote(f'{marker} end {label}')} \"$?\"")
    return ShellCommand("; ".join(body) if body else "true")


def streamed(cmd: Cmd, marker: str) -> ShellCommand:
    """A long command for `Host.stream`: stdin from /dev/null, stderr merged into stdout, every carriage
    return turned into a newline (so tqdm-style progress arrives line by line, unbuffered when `stdbuf` is
    there), and a last line `MARKER exit STATUS` with the command's exit status."""
    if not _LABEL.match(marker):
        raise ValueError(f"bad stream marker: {marker!r}")
    end = shlex.quote(f"{marker} exit")
    return ShellCommand(
        f"{{ {{ {as_command(cmd).line}\n}} </dev/null 2>&1; printf '\\n%s %s\\n' {end} \"$?\"; }} | "
        "{ if command -v stdbuf >/dev/null 2>&1; then stdbuf -oL tr '\\r' '\\n'; else tr '\\r' '\\n'; fi; }"
    )


def write_stdin_atomic(path: str, *, replace_sha256: str | None = None, mode: str = "644") -> ShellCommand:
    """Write stdin to PATH atomically: a temp file next to it (`PATH.r37tmp.XXXXXX`), then one rename.

    Without `replace_sha256` an existing PATH is never replaced (the temp file is hard-linked into place,
    which fails if PATH exists). With it, PATH is replaced only while its sha256 is still that digest.
    Exit 17 when PATH was left alone for either reason; the temp file never stays behind.
    """
    if not re.fullmatch(r"[0-7]{3,4}", mode):
        raise ValueError(f"bad file mode: {mode!r}")
    if replace_sha256 is not None and not re.fullmatch(r"[0-9a-f]{64}", replace_sha256):
        raise ValueError(f"bad sha256: {replace_sha256!r}")
    p = shlex.quote(path)
    tmp = shlex.quote(f"{path}.r37tmp.XXXXXX")
    head = (f"t=$(mktemp -- {tmp}) || exit 1; "
            f"if ! {{ cat >\"$t\" && chmod {mode} -- \"$t\"; }}; then rm -f -- \"$t\"; exit 1; fi; ")
    if replace_sha256 is None:
        body = (f"if ln -- \"$t\" {p} 2>/dev/null; then rm -f -- \"$t\"; exit 0; fi; rm -f -- \"$t\"; "
                f"echo {shlex.quote(f'{path} exists: not replaced')} >&2; exit 17")
    else:
        body = (f"c=$(sha256sum <{p} 2>/dev/null); c=${{c%% *}}; "
                f"if [ \"$c\" != {replace_sha256} ]; then rm -f -- \"$t\"; "
                f"echo {shlex.quote(f'{path} changed since it was shown: not replaced')} >&2; exit 17; fi; "
                f"mv -f -- \"$t\" {p}")
    return ShellCommand(f"( {head}{body} )")


def safetensors_headers(directory: str, *, limit: int, budget: int) -> ShellCommand:
    """Read the header of every `*.safetensors` file in DIRECTORY (not below it) whose name is plain
    (`[A-Za-z0-9._-]`; other names are skipped): one line `NAME<TAB>SIZE<TAB>N<TAB>HEX` per file, with its
    size, the little-endian u64 N of its first 8 bytes (its header length) and the N header bytes in hex.
    N is empty for a file shorter than 8 bytes; HEX is empty when N is over `limit` or the headers read so
    far would pass `budget` bytes. Reads only (stat, od), in a subshell with LC_ALL=C."""
    if limit <= 0 or budget <= 0:
        raise ValueError("limit and budget must be positive")
    d = shlex.quote(directory.rstrip("/") or "/")
    return ShellCommand(
        f"( LC_ALL=C; export LC_ALL; t=0; for f in {d}/*.safetensors; do "
        "[ -f \"$f\" ] || continue; n=${f##*/}; case $n in *[!A-Za-z0-9._-]*) continue;; esac; "
        "s=$(stat -L -c %s -- \"$f\") || continue; h=''; "
        "if [ \"$s\" -ge 8 ]; then h=$(od -An -v -tu8 -N8 --endian=little -- \"$f\" | tr -d ' \\n'); fi; "
        "printf '%s\\t%s\\t%s\\t' \"$n\" \"$s\" \"$h\"; "
        f"if [ -n \"$h\" ] && [ ${{#h}} -le 12 ] && [ \"$h\" -le {int(limit)} ] "
        f"&& [ $((t + h)) -le {int(budget)} ]; then t=$((t + h)); "
        "od -An -v -tx1 -j8 -N\"$h\" -- \"$f\" | tr -d ' \\n'; fi; echo; done )"
    )


MEMINFO_KEYS = ("MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapTotal", "SwapFree")
SYSROOT_VAR = "R37_SIM_ROOT"   # unset on a real host: the sampler reads /proc and /sys themselves


KLOG_TAG = "#r37"   # the kernel-log reader's own notes (`K #r37 source …`, `K #r37 readable`)
# what passes the kernel-log filter besides Xid lines: journalctl's and dmesg's refusals
ISO_DATE = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]T"   # a case pattern: how a kernel line begins
KLOG_DENIED_PATTERNS = ("*Hint:*", "*'not seeing messages'*",
                        "*'insufficient permissions'*", "*'not permitted'*", "*'ermission denied'*")


def kernel_log_reader(since_s: int, max_lines: int = 10000) -> str:
    """The kernel-log part of the sampler channel (a bash background job): `K LINE` per NVRM Xid line (and
    per refusal of journalctl/dmesg), `K #r37 source journalctl|dmesg|none` first, `K #r37 readable` once a
    kernel line of any kind was read (one that begins with an ISO date, as both tools print them with the
    options used here: the log is readable even when it holds no Xid; a hint or `-- No entries --` is not),
    `X K STATUS` when the reader ended. journalctl -k: first the newest kernel line of this boot (a readable
    journal always has one), then the last `since_s` seconds (at most `max_lines` lines) and every new line;
    without journalctl, `dmesg -w`. Read-only; everything else of the kernel log is dropped on the host."""
    since = int(since_s)
    lines = int(max_lines)
    if since <= 0 or lines <= 0:
        raise ValueError("since_s and max_lines must be positive")
    probe = shlex.join(["journalctl", "-k", "-b", "-n", "1", "-o", "short-iso", "--no-pager"])
    follow = shlex.join(["journalctl", "-k", "-f", "-o", "short-iso", "--no-pager", f"--since=-{since}s",
                         "-n", str(lines)])
    dmesg = shlex.join(["dmesg", "-w", "--time-format=iso"])
    note = f"printf '{KLOG_TAG} source %s\\n'"
    passed = "|".join([f"'{KLOG_TAG} '*", "*'NVRM: Xid'*", *KLOG_DENIED_PATTERNS])
    return (
        "{ if command -v journalctl >/dev/null 2>&1; then " + note + " journalctl; "
        f"{probe} 2>&1; {follow} 2>&1; "
        "elif command -v dmesg >/dev/null 2>&1; then " + note + f" dmesg; {dmesg} 2>&1; "
        "else " + note + " none; false; fi </dev/null | "
        "{ s=0; while IFS= read -r l; do case $l in " + passed + ") printf 'K %s\\n' \"$l\";; "
        f"{ISO_DATE}*) if [ $s = 0 ]; then s=1; printf 'K {KLOG_TAG} readable\\n'; fi;; esac; done; }}; "
        "printf 'X K %s\\n' \"${PIPESTATUS[0]}\"; } &"
    )


ROUND_WRITE_MAX = 4000
"""The longest sampler round written at once: under PIPE_BUF (4096), so the write is atomic."""


def stats_sampler(interval_s: float, gpu_fields: Sequence[str], app_fields: Sequence[str],
                  hcas: Sequence[str], port: int = 1, klog_since_s: int | None = None) -> ShellCommand:
    """One long-lived channel of a host's readings, started once: after start-up no process is forked.

    `nvidia-smi --query-gpu=… -lms` and `nvidia-smi --query-compute-apps=… -lms` loop in the background
    (their lines prefixed `G ` and `A `, and `X G STATUS` / `X A STATUS` when one ends). The foreground
    loop uses bash builtins only (`read`, `printf`, `case`, globs, `read -t` on a pipe nobody writes as its
    sleep): each round prints `T EPOCHREALTIME`, the `/proc/meminfo` lines of MEMINFO_KEYS as `M LINE`,
    one `F PATH<TAB>VALUE` per port file of every HCA (its state, the two data counters, every hw_counter)
    — or, when every one of them reads as in the last round, the one line `F =` (an idle port's ~30 lines
    a second per host become one: `SamplerReader` takes the last round's again) — and `E`, the round in
    one write when it fits ROUND_WRITE_MAX. Paths are read under `${R37_SIM_ROOT-}`, which only a
    simulated host sets.
    With `klog_since_s`, the kernel log's NVRM Xid lines too (`kernel_log_reader`, tag `K`).
    """
    if interval_s <= 0:
        raise ValueError("interval must be positive")
    ms = max(1, round(interval_s * 1000))
    for hca in hcas:
        if not _LABEL.match(hca) or "/" in hca or hca.startswith("."):
            raise ValueError(f"bad HCA name: {hca!r}")

    def smi(query: str, fields: Sequence[str], tag: str) -> str:
        argv = shlex.join(["nvidia-smi", f"--query-{query}={','.join(fields)}",
                           "--format=csv,noheader,nounits", "-lms", str(ms)])
        return (f"{{ {argv} 2>&1 </dev/null | while IFS= read -r l; do printf '{tag} %s\\n' \"$l\"; done; "
                f"printf 'X {tag} %s\\n' \"${{PIPESTATUS[0]}}\"; }} &")

    ports = " ".join(shlex.quote(f"/sys/class/infiniband/{h}/ports/{int(port)}") for h in hcas)
    loop = (
        f"R=${{{SYSROOT_VAR}-}}; "
        f"{smi('gpu', gpu_fields, 'G')} {smi('compute-apps', app_fields, 'A')} "
        + (kernel_log_reader(klog_since_s) + " " if klog_since_s else "") +
        "exec 3<> <(:); "
        "while :; do printf -v r 'T %s\\n' \"$EPOCHREALTIME\"; "
        "while IFS= read -r l; do case $l in " + "|".join(f"{k}:*" for k in MEMINFO_KEYS)
        + ") printf -v r '%sM %s\\n' \"$r\" \"$l\";; esac; done < \"$R/proc/meminfo\"; "
        f"b=; for p in {ports}; do "
        "for f in \"$R$p/state\" \"$R$p/counters/port_xmit_data\" \"$R$p/counters/port_rcv_data\" "
        "\"$R$p\"/hw_counters/*; do "
        "if IFS= read -r v < \"$f\"; then printf -v b '%sF %s\\t%s\\n' \"$b\" \"${f#\"$R\"}\" \"$v\"; fi; "
        "done 2>/dev/null; done; "
        "if [[ $b == \"$o\" ]]; then r+=$'F =\\n'; else r+=$b; o=$b; fi; r+=$'E\\n'; "
        # one write a round (one SSH packet, not one per line) while it fits the pipe's atomic write,
        # which the nvidia-smi readers' lines cannot cut into; a longer round goes out line by line
        f"if (( ${{#r}} <= {ROUND_WRITE_MAX} )); then printf '%s' \"$r\"; "
        "else while IFS= read -r l; do printf '%s\\n' \"$l\"; done <<< \"${r%$'\\n'}\"; fi; "
        f"read -r -t {interval_s:g} -u 3; done"
    )
    return ShellCommand(f"exec bash -c {shlex.quote(loop)}")


PERFTEST_TOOLS = ("ib_write_bw", "ib_write_lat")
PID_TAG = "R37PID"


def perftest(tool: str, hca: str, gid_index: int, port: int, size: int, iterations: int, deadline_s: float,
             server_ip: str | None = None) -> ShellCommand:
    """One side of a perftest run, bounded by `timeout` (TERM at the deadline, KILL 2 s later): the
    server without `server_ip` (it first prints `R37PID PID`, the pid to end it by: `sh -c` prints its own
    pid, then `exec` makes that process the `timeout`), the client with it.
    `--report_gbits` for the bandwidth test."""
    if tool not in PERFTEST_TOOLS:
        raise ValueError(f"unknown perftest tool: {tool!r}")
    if not _LABEL.match(hca):
        raise ValueError(f"bad HCA name: {hca!r}")
    argv = ["timeout", "-k", "2", f"{max(1, round(deadline_s))}", tool, "-d", hca, "-i", "1",
            "-x", str(int(gid_index)), "-p", str(int(port)), "-s", str(int(size)), "-n", str(int(iterations)),
            "-F"]
    if tool == "ib_write_bw":
        argv.append("--report_gbits")
    if server_ip is not None:
        return ShellCommand(shlex.join([*argv, server_ip]))
    return ShellCommand("sh -c " + shlex.quote(f"echo {PID_TAG} $$; exec {shlex.join(argv)}"))


def end_perftest(pid: int) -> ShellCommand:
    """TERM to the perftest server this cockpit started (by its pid), only while that pid still runs a
    perftest tool (a pid used again by another program is left alone); quiet when it is gone."""
    if pid <= 1:
        raise ValueError(f"bad pid: {pid}")
    p = int(pid)
    return ShellCommand(f"if grep -qa -e ib_write_bw -e ib_write_lat /proc/{p}/cmdline 2>/dev/null; then "
                        f"kill -TERM {p} 2>/dev/null; fi; true")
