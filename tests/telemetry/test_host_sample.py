"""The stats sampler channel: its shell line forks nothing per round, and its output parses into rounds."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cockpit.hosts.shell import ROUND_WRITE_MAX, stats_sampler
from cockpit.telemetry.gpu import GpuParseError, GpuReading
from cockpit.telemetry.host_sample import (
    APP_FIELDS,
    GPU_FIELDS,
    GpuApp,
    HostRound,
    SamplerReader,
    ToolExit,
    parse_app_line,
    parse_meminfo,
)
from cockpit.telemetry.sampler import memory_of

SAMPLES = Path(__file__).parents[1] / "fixtures" / "samples" / "h200"
PORT = "/sys/class/infiniband/rocep1s0f0/ports/1"


def _fake_root(tmp: Path) -> Path:
    (tmp / "proc").mkdir(parents=True)
    (tmp / "proc" / "meminfo").write_text((SAMPLES / "meminfo.txt").read_text())
    port = tmp / PORT.lstrip("/")
    (port / "counters").mkdir(parents=True)
    (port / "hw_counters").mkdir()
    (port / "state").write_text("4: ACTIVE\n")
    (port / "counters" / "port_xmit_data").write_text("1000\n")
    (port / "counters" / "port_rcv_data").write_text("2000\n")
    (port / "hw_counters" / "out_of_sequence").write_text("7\n")
    return tmp


def _run(cmd: str, root: Path, seconds: float, tmp: Path) -> tuple[str, str]:
    """Run the sampler line under strace for `seconds`; its output and the processes it started."""
    trace = tmp / "trace.txt"
    env = dict(os.environ, R37_SIM_ROOT=str(root), PATH="/usr/bin:/bin")
    proc = subprocess.Popen(["strace", "-f", "-qq", "-e", "trace=clone,clone3,fork,vfork", "-o", str(trace),
                             "bash", "-c", cmd], stdout=subprocess.PIPE, env=env, text=True,
                            start_new_session=True)
    time.sleep(seconds)
    os.killpg(proc.pid, signal.SIGKILL)
    out, _ = proc.communicate(timeout=10)
    return out, trace.read_text()


def _sampled(root: Path, seconds: float = 0.5) -> str:
    """What the sampler line (0.1 s rounds, a real bash over `root`) printed in `seconds`."""
    cmd = stats_sampler(0.1, GPU_FIELDS, APP_FIELDS, ["rocep1s0f0"]).line
    env = dict(os.environ, R37_SIM_ROOT=str(root), PATH="/usr/bin:/bin")
    proc = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, env=env, text=True)
    time.sleep(seconds)
    proc.terminate()
    out, _ = proc.communicate(timeout=10)
    return out


@pytest.mark.skipif(not Path("/usr/bin/strace").exists(), reason="needs strace")
def test_the_loop_forks_only_at_start(tmp_path: Path) -> None:
    root = _fake_root(tmp_path / "root")
    cmd = stats_sampler(0.1, GPU_FIELDS, APP_FIELDS, ["rocep1s0f0"]).line
    out, trace = _run(cmd, root, 2.0, tmp_path)
    rounds = out.count("\nE\n")
    forks = [line for line in trace.splitlines() if "clone" in line or "fork" in line]
    assert rounds >= 8                                   # ~20 rounds in 2 s at 0.1 s
    # started once: the two nvidia-smi pipelines (a subshell, the tool and its reader each) and the sleep
    # pipe; after that nothing, however many rounds
    assert len([f for f in forks if "resumed" not in f]) <= 8, trace


@pytest.mark.skipif(not Path("/usr/bin/strace").exists(), reason="needs strace")
def test_the_kernel_log_reader_forks_only_at_start_too(tmp_path: Path) -> None:
    """With the kernel-log reader (whatever this machine has: journalctl, dmesg or neither), the channel
    still starts its processes once: a handful more at start, none per round."""
    root = _fake_root(tmp_path / "root")
    cmd = stats_sampler(0.1, GPU_FIELDS, APP_FIELDS, ["rocep1s0f0"], klog_since_s=60).line
    out, trace = _run(cmd, root, 2.0, tmp_path)
    assert out.count("\nE\n") >= 3 and "K #r37 source " in out        # rounds ran (however loaded the box)
    forks = [line for line in trace.splitlines() if ("clone" in line or "fork" in line)
             and "resumed" not in line]
    assert len(forks) <= 8 + 6, trace                                  # 12 here: the same at 2 s as at 20


def test_sampler_output_parses_into_rounds(tmp_path: Path) -> None:
    root = _fake_root(tmp_path / "root")
    out = _sampled(root)
    reader = SamplerReader()
    events = [e for line in out.splitlines() if (e := reader.feed(line)) is not None]
    rounds = [e for e in events if isinstance(e, HostRound)]
    assert rounds and rounds[0].meminfo["MemTotal"] == 131961788 * 1024
    port = rounds[0].ports[0]
    got = (port.hca, port.port, port.active, port.xmit_words, port.rcv_words)
    assert got == ("rocep1s0f0", 1, True, 1000, 2000)
    assert port.hw == {"out_of_sequence": 7}
    # no nvidia-smi on this PATH: each loop says it ended, with what the shell printed
    exits = {e.which: e for e in events if isinstance(e, ToolExit)}
    assert exits["G"].status == 127 and "nvidia-smi" in exits["G"].said


def test_an_unchanged_round_of_port_files_is_one_line_and_reads_whole(tmp_path: Path) -> None:
    """A real bash: the first round prints every port file; while none changes a round says `F =` and the
    reader takes the last round's files again; a counter that moves, or a file gone, prints the round
    whole again. A steady round's ports are the last round's, not parsed again."""
    root = _fake_root(tmp_path / "root")
    port = root / PORT.lstrip("/")
    cmd = stats_sampler(0.1, GPU_FIELDS, APP_FIELDS, ["rocep1s0f0"]).line
    env = dict(os.environ, R37_SIM_ROOT=str(root), PATH="/usr/bin:/bin")
    proc = subprocess.Popen(["bash", "-c", cmd], stdout=subprocess.PIPE, env=env, text=True)
    reader = SamplerReader()
    rounds: list[tuple[HostRound, list[str]]] = []
    lines: list[str] = []
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            event = reader.feed(line.rstrip("\n"))
            if isinstance(event, HostRound):
                rounds.append((event, [ln for ln in lines if ln.startswith("F ")]))
                lines = []
                if len(rounds) == 3:
                    (port / "counters" / "port_xmit_data").write_text("5000\n")
                if len(rounds) == 6:
                    (port / "hw_counters" / "out_of_sequence").unlink()
                if len(rounds) == 9:
                    break
    finally:
        proc.kill()
        proc.communicate(timeout=10)
    said = [f_lines for _, f_lines in rounds]
    assert len(said[0]) == 4 and said[1] == said[2] == ["F ="]
    assert any(len(f) == 4 and any("\t5000" in ln for ln in f) for f in said[3:5])   # printed whole …
    for event, _ in rounds:                                  # … and every round reads whole
        assert event.ports[0].active and event.ports[0].rcv_words == 2000
    assert [r.ports[0].xmit_words for r, _ in rounds[:3]] == [1000, 1000, 1000]
    assert rounds[5][0].ports[0].xmit_words == 5000
    assert rounds[8][0].ports[0].hw == {}                    # the file gone: gone from the reading
    assert rounds[2][0].ports[0].hw == {"out_of_sequence": 7}
    assert rounds[1][0].ports is rounds[0][0].ports is rounds[2][0].ports   # steady: not parsed again


def test_a_round_longer_than_an_atomic_write_goes_out_line_by_line(tmp_path: Path) -> None:
    """A round that fits ROUND_WRITE_MAX is one write; a longer one (many counters) goes out a line at a
    time, so the nvidia-smi readers' lines, written beside it, never land inside one of its lines."""
    root = _fake_root(tmp_path / "root")
    hw = root / PORT.lstrip("/") / "hw_counters"
    for i in range(80):
        (hw / f"counter_with_a_long_name_{i:03d}").write_text(f"{i}\n")
    out = _sampled(root)
    assert len(out.split("\nE\n")[0]) > ROUND_WRITE_MAX
    reader = SamplerReader()
    rounds = [e for line in out.splitlines() if isinstance(e := reader.feed(line), HostRound)]
    assert len(rounds) >= 2
    assert all(len(r.ports[0].hw) == 81 and r.ports[0].hw["counter_with_a_long_name_079"] == 79
               for r in rounds)


def test_reader_takes_real_h200_lines_and_rejects_junk() -> None:
    reader = SamplerReader()
    line = ("2026/12/01 07:56:19.870, 0, NVIDIA H200, 100, 1485, 1980, 706.23, 60, P0, 143771, 1011, "
            "0x0000000000000000")
    got = reader.feed("G " + line)
    assert isinstance(got, GpuReading) and got.sm == 1485 and got.memory_kind == "discrete"
    assert isinstance(reader.feed("G NVIDIA-SMI has failed because it couldn't communicate"), GpuParseError)
    app = parse_app_line((SAMPLES / "smi-apps.csv").read_text().strip())
    assert app == GpuApp(523, "python3", 1002)
    assert reader.feed("A 523, python3, 1002") == app
    assert reader.feed("A no such thing") is None
    # round lines outside a round, a bad time, an unknown tag: ignored, never an exception
    for junk in ("M MemTotal: 1 kB", "E", "F /etc/passwd\troot", "T not-a-time", "Z \x1b[2J", "", "X"):
        reader.feed(junk)
    assert reader.feed("E") is None                       # no round began: nothing to end


def test_round_is_bounded_and_only_port_files_count() -> None:
    reader = SamplerReader()
    reader.feed("T 100.5")
    for i in range(10_000):
        reader.feed(f"M Key{i}: {i} kB")
    reader.feed("F /etc/shadow\tsecret")
    reader.feed(f"F {PORT}/hw_counters/../../x\t1")
    reader.feed(f"F {PORT}/hw_counters/np_cnp_sent\t12")
    reader.feed(f"F {PORT}/counters/port_xmit_data\t{'9' * 40}")
    rnd = reader.feed("E")
    assert isinstance(rnd, HostRound) and rnd.at == 100.5
    assert len(rnd.meminfo) == 2000
    assert len(rnd.ports) == 1 and rnd.ports[0].hw == {"np_cnp_sent": 12}
    assert rnd.ports[0].xmit_words is None                # 40 digits: not a number a kernel prints


def test_memory_kind_comes_from_the_readings() -> None:
    meminfo = parse_meminfo((SAMPLES / "meminfo.txt").read_text())
    gb10 = GpuReading(util=80, sm=2300, mem_total_mib=None, mem_used_mib=None, memory_asked=True)
    h200 = GpuReading(util=100, sm=1485, mem_total_mib=143771, mem_used_mib=1011, memory_asked=True)
    apps = (GpuApp(7, "python3", 70_000),)
    uni = memory_of(meminfo, gb10, apps)
    assert uni.kind == "unified" and uni.engine_bytes == 70_000 << 20 and uni.gpu_total_mib is None
    disc = memory_of(meminfo, h200, ())
    assert disc.kind == "discrete" and disc.gpu_used_mib == 1011 and disc.engine_bytes is None
    assert memory_of(meminfo, None, ()).kind is None           # no GPU reading: not assumed either way


def test_a_gpu_line_after_the_first_rounds_gives_the_memory_its_kind() -> None:
    """The rounds can begin before nvidia-smi's first line (a slow tool start): the memory read then has no
    kind, and the first GPU reading gives it one at once, not a round later (the lab saw `kind=None`)."""
    from cockpit.telemetry.cluster_stats import ClusterStats
    from cockpit.telemetry.sampler import _RankSampler

    stats = ClusterStats([0], 1.0)
    s = _RankSampler(0, stats)
    for line in ("T 100.0", "M MemTotal: 131961788 kB", "M MemAvailable: 100000000 kB", "E"):
        s.feed(line)
    assert stats.ranks[0].memory is not None and stats.ranks[0].memory.kind is None
    s.feed("G 2026/12/01 07:56:19.870, 0, NVIDIA GB10, 3, 2400, 3003, 40.00, 60, P0, [N/A], [N/A], [N/A]")
    mem = stats.ranks[0].memory
    assert mem is not None and mem.kind == "unified" and mem.total_bytes == 131961788 * 1024
