"""Check units judged on framed output: verdicts, observed values, remedies, comparisons across ranks."""

from __future__ import annotations

import json

from cockpit import constants as C
from cockpit.config import ClusterConfig, config_from_data
from cockpit.recipe import checks_fabric as F
from cockpit.recipe import checks_host as H
from cockpit.recipe import checks_storage as S
from cockpit.recipe import parsers as P
from cockpit.recipe.checks import CheckResult, Outcome, Probe, Verdict, group_results, ranks_text
from cockpit.recipe.preflight import CHECKS

GIB = 1 << 30


def probe(cfg: ClusterConfig, rank: int, launched: dict[int, str] | None = None,
          **outputs: str | tuple[str, int]) -> Probe:
    secs = {}
    for label, out in outputs.items():
        text, status = out if isinstance(out, tuple) else (out, 0)
        label = label.replace("__", ".")
        secs[label] = P.Section(label, text, status)
    return Probe(cfg, rank, secs, launched or {})


def smi(sm: int, util: int, pstate: str, mx: int = 3003) -> str:
    return f"NVIDIA GB10, 580.95.05, {sm}, {mx}, {util}, {pstate}\n"


def test_every_check_has_an_id_step_and_commands_that_read(fixed_config: ClusterConfig) -> None:
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
    writers = ("rm", "mv", "cp", "dd", "tee", "mkdir", "touch", "stop", "kill", "load", "run", "pull")
    for c in CHECKS:
        for rank in fixed_config.ranks:
            for line in c.command_lines(fixed_config, rank).values():
                words = line.replace("'", " ").split()
                assert not (set(words) & set(writers)), (c.id, line)


def test_arch_and_gpu(fixed_config: ClusterConfig) -> None:
    assert H.ARCH.evaluate(probe(fixed_config, 0, uname="aarch64\n")).verdict is Verdict.PASS
    x86 = H.ARCH.evaluate(probe(fixed_config, 1, uname="x86_64\n"))
    assert x86.verdict is Verdict.FAIL and "rank 1" in x86.remedy
    dead = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"
    g = H.GPU.evaluate(probe(fixed_config, 0, nvsmi__query=(dead, 9)))
    assert g.verdict is Verdict.FAIL and g.value.startswith("NVIDIA-SMI has failed")
    assert H.DRIVER.evaluate(probe(fixed_config, 0, nvsmi__query=(dead, 9))).verdict is Verdict.UNKNOWN


def test_driver_needs_cuda_13_and_the_same_version_everywhere(fixed_config: ClusterConfig) -> None:
    old = H.DRIVER.evaluate(
        probe(
            fixed_config, 0, nvsmi__query="NVIDIA GB10, 570.86.10, 2400, 3003, 90, P0\n", nvsmi__table=("", 9)
        )
    )
    assert old.verdict is Verdict.FAIL and "570.86.10" in old.value
    outs = {r: Outcome(Verdict.PASS, "x", facts={"driver": "580.95.05"}) for r in range(4)}
    outs[2] = Outcome(Verdict.PASS, "y", facts={"driver": "580.82.07"})
    changed = H.DRIVER.compare(fixed_config, outs)  # type: ignore[misc]
    assert set(changed) == {2} and changed[2].verdict is Verdict.FAIL and "rank 0-1,3" in changed[2].value


def clocks(cfg: ClusterConfig, readings: dict[int, str]) -> dict[int, Verdict]:
    outs = {r: H.CLOCKS.evaluate(probe(cfg, r, nvsmi__query=t)) for r, t in readings.items()}
    changed = H.CLOCKS.compare(cfg, outs)  # type: ignore[misc]
    return {r: changed.get(r, o).verdict for r, o in outs.items()}


def test_clock_rule_idle_alike_passes_latched_rank_fails(fixed_config: ClusterConfig) -> None:
    idle = smi(208, 0, "P8")
    assert clocks(fixed_config, dict.fromkeys(range(4), idle)) == dict.fromkeys(range(4), Verdict.PASS)
    latched = {0: idle, 1: idle, 2: smi(900, 0, "P8"), 3: idle}
    assert clocks(fixed_config, latched) == {
        0: Verdict.PASS,
        1: Verdict.PASS,
        2: Verdict.FAIL,
        3: Verdict.PASS,
    }
    loaded = {0: smi(2400, 95, "P0"), 1: smi(2380, 96, "P0"), 2: smi(2410, 94, "P0"), 3: smi(900, 95, "P0")}
    assert clocks(fixed_config, loaded)[3] is Verdict.FAIL
    assert set(clocks(fixed_config, {r: smi(2400, 95, "P0") for r in range(4)}).values()) == {Verdict.PASS}
    # one rank alone, idle inside the latched band: cannot tell from peers
    assert clocks(fixed_config, {0: smi(900, 0, "P8")}) == {0: Verdict.WARN}
    # all ranks idle at 900 alike: no peer differs; not a failure
    assert set(clocks(fixed_config, dict.fromkeys(range(4), smi(900, 0, "P8"))).values()) == {Verdict.PASS}


def test_memory(fixed_config: ClusterConfig) -> None:
    ok = H.MEMORY.evaluate(
        probe(
            fixed_config,
            0,
            meminfo=f"MemTotal: {127 * GIB // 1024} kB\nMemAvailable: {110 * GIB // 1024} kB\n",
        )
    )
    assert ok.verdict is Verdict.PASS
    low = H.MEMORY.evaluate(probe(fixed_config, 0, meminfo=f"MemAvailable: {40 * GIB // 1024} kB\n"))
    assert low.verdict is Verdict.FAIL and "40.0 GiB" in low.value and "100 GiB" in low.value


DOCKER_OK = json.dumps({"ServerVersion": "28.3.3", "Runtimes": {"nvidia": {}, "runc": {}}})
DOCKER_DOWN = '{"ServerErrors":["Cannot connect to the Docker daemon at unix:///var/run/docker.sock."]}'


def test_docker_runtime_image_and_container(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    down = probe(cfg, 0, docker__info=(DOCKER_DOWN, 1))
    assert H.DOCKER.evaluate(down).verdict is Verdict.FAIL
    assert {
        H.RUNTIME.evaluate(down).verdict,
        H.IMAGE.evaluate(down).verdict,
        H.CONTAINER.evaluate(down).verdict,
    } == {Verdict.UNKNOWN}
    no_nv = probe(cfg, 0, docker__info=json.dumps({"ServerVersion": "28.3.3", "Runtimes": {"runc": {}}}))
    assert H.RUNTIME.evaluate(no_nv).verdict is Verdict.FAIL
    wrong = "sha256:" + "1" * 64
    img = H.IMAGE.evaluate(probe(cfg, 3, docker__info=DOCKER_OK, docker__image=wrong + "\n"))
    assert img.verdict is Verdict.FAIL and "expected sha256:638d63b0f4bb" in img.value
    assert "--rank 3" in img.remedy
    good = H.IMAGE.evaluate(probe(cfg, 3, docker__info=DOCKER_OK, docker__image=C.IMAGE_ID + "\n"))
    assert good.verdict is Verdict.PASS
    missing = H.IMAGE.evaluate(
        probe(
            cfg,
            3,
            docker__info=DOCKER_OK,
            docker__image=("Error: No such image: local/ds41-r37-spark:runtime", 1),
        )
    )
    assert missing.verdict is Verdict.FAIL and "not loaded" in missing.value
    ps = '{"Names":"ds41_r37","State":"exited","Status":"Exited (137) 2 hours ago","Image":"x"}\n'
    c = H.CONTAINER.evaluate(probe(cfg, 0, docker__info=DOCKER_OK, docker__ps=ps))
    assert c.verdict is Verdict.FAIL and "exited" in c.value and "never removes" in c.remedy


def test_ports_conflicts(fixed_config: ClusterConfig) -> None:
    def ports(text: str) -> Outcome:
        return H.PORTS.evaluate(probe(fixed_config, 0, ss=text))

    assert ports("LISTEN 0 128 0.0.0.0:22 0.0.0.0:*\n").verdict is Verdict.PASS
    busy = ports("LISTEN 0 4096 0.0.0.0:8000 0.0.0.0:*\nLISTEN 0 10 192.168.100.10:29543 0.0.0.0:*\n")
    assert (
        busy.verdict is Verdict.FAIL and "0.0.0.0:8000 (API)" in busy.value and "(coordination)" in busy.value
    )
    # another loopback alias (the demo's other hosts) does not block this host's bind
    assert ports("LISTEN 0 4096 127.40.2.10:8000 0.0.0.0:*\n").verdict is Verdict.PASS
    assert ports("LISTEN 0 4096 127.0.0.1:8000 0.0.0.0:*\n").verdict is Verdict.FAIL
    assert not H.PORTS.applies(fixed_config, 1)


def test_fabric_ip_and_rdma(fixed_config: ClusterConfig) -> None:
    ip = json.dumps(
        [
            {
                "ifname": "enp1s0f1np1",
                "flags": ["UP"],
                "operstate": "UP",
                "addr_info": [{"family": "inet", "local": "192.168.100.10", "prefixlen": 24}],
            }
        ]
    )
    moved = F.FABRIC_IP.evaluate(probe(fixed_config, 0, ip__addr=ip))
    assert moved.verdict is Verdict.FAIL and 'fabric_iface = "enp1s0f1np1"' in moved.remedy
    down = (
        '[{"ifname":"rocep1s0f0","port":1,"state":"DOWN","physical_state":"DISABLED","netdev":"enp1s0f0np0"}]'
    )
    assert F.RDMA_LINK.evaluate(probe(fixed_config, 0, rdma__link=down)).verdict is Verdict.FAIL
    other = '[{"ifname":"rocep1s0f0","port":1,"state":"ACTIVE","physical_state":"LINK_UP","netdev":"enP7s7"}]'
    assert F.RDMA_LINK.evaluate(probe(fixed_config, 0, rdma__link=other)).verdict is Verdict.WARN
    ibv = (
        "hca_id:\trocep1s0f0\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n\t\t\tlink_layer:\t\tEthernet\n"
    )
    assert F.IBV_PORT.evaluate(probe(fixed_config, 0, **{"ibv.rocep1s0f0": ibv})).verdict is Verdict.FAIL


def gid_output(entries: list[tuple[str, str]]) -> str:
    d = "/sys/class/infiniband/rocep1s0f0/ports/1"
    out = []
    for n in range(16):
        gid, typ = entries[n] if n < len(entries) else (P.ZERO_GID, "")
        out += [f"==> {d}/gids/{n} <==", gid, ""]
        out += (
            [f"==> {d}/gid_attrs/types/{n} <==", typ, ""]
            if typ
            else [
                f"==> {d}/gid_attrs/types/{n} <==",
                f"head: error reading '{d}/gid_attrs/types/{n}': Invalid argument",
            ]
        )
    return "\n".join(out)


def test_gid_index_and_suggestion(fixed_config: ClusterConfig) -> None:
    ll = "fe80:0000:0000:0000:4ebb:47ff:fe2c:0010"
    ip = P.ipv4_mapped_gid("192.168.100.11")
    ok = gid_output([(ll, "IB/RoCE v1"), (ll, "RoCE v2"), (ip, "IB/RoCE v1"), (ip, "RoCE v2")])
    assert F.GID.evaluate(probe(fixed_config, 1, gids=(ok, 1))).verdict is Verdict.PASS
    ula = "fd37:0000:0000:0001:0000:0000:0001:0100"
    moved = gid_output(
        [
            (ll, "IB/RoCE v1"),
            (ll, "RoCE v2"),
            (ip, "IB/RoCE v1"),
            (ula, "IB/RoCE v1"),
            (ula, "RoCE v2"),
            (ip, "RoCE v2"),
        ]
    )
    bad = F.GID.evaluate(probe(fixed_config, 1, gids=(moved, 1)))
    assert bad.verdict is Verdict.FAIL and "gid_index = 5 for rank 1" in bad.remedy
    none = F.GID.evaluate(probe(fixed_config, 1, gids=(gid_output([(ll, "RoCE v2")]), 1)))
    assert none.verdict is Verdict.FAIL and "no RoCE v2 GID carries 192.168.100.11" in none.value


def reach(cfg: ClusterConfig, seen: dict[int, dict[int, str]]) -> dict[int, Verdict]:
    outs = {r: Outcome(Verdict.UNKNOWN, "", facts={"reach": s}) for r, s in seen.items()}
    return {r: o.verdict for r, o in F.REACH.compare(cfg, outs).items()}  # type: ignore[misc]


def test_reach_attribution(fixed_config: ClusterConfig) -> None:
    ok = {a: {b: "refused" for b in range(4) if b != a} for a in range(4)}
    assert set(reach(fixed_config, ok).values()) == {Verdict.PASS}
    # rank 2 is down: its peers cannot reach it and it reports nothing itself
    down = {a: {b: ("timeout" if b == 2 else "open") for b in range(4) if b != a} for a in (0, 1, 3)}
    down[2] = {}
    assert reach(fixed_config, down) == {0: Verdict.PASS, 1: Verdict.PASS, 2: Verdict.FAIL, 3: Verdict.PASS}
    # rank 1 reaches nobody but everyone reaches it: its own outgoing path is broken
    blind = {a: {b: "open" for b in range(4) if b != a} for a in range(4)}
    blind[1] = {0: "unreachable", 2: "unreachable", 3: "unreachable"}
    assert reach(fixed_config, blind) == {0: Verdict.PASS, 1: Verdict.FAIL, 2: Verdict.PASS, 3: Verdict.PASS}


def reach_rows(cfg: ClusterConfig, seen: dict[int, dict[int, str]]) -> list[tuple[str, tuple[int, ...]]]:
    outs = {r: Outcome(Verdict.UNKNOWN, "", facts={"reach": s}) for r, s in seen.items()}
    done = F.REACH.compare(cfg, outs)  # type: ignore[misc]
    return [(row.value, row.ranks) for row in group_results(
        [CheckResult("reach", r, 1, "reach", o.verdict, o.value, o.remedy) for r, o in done.items()])]


def test_grouped_reach_rows_never_show_one_ranks_target_for_the_others(fixed_config: ClusterConfig) -> None:
    ok = {a: {b: "refused" for b in range(4) if b != a} for a in range(4)}
    assert reach_rows(fixed_config, ok) == [("reached by every peer", (0, 1, 2, 3))]
    down = {a: {b: ("timeout" if b == 2 else "open") for b in range(4) if b != a} for a in (0, 1, 3)}
    down[2] = {}
    rows = dict(reach_rows(fixed_config, down))
    assert rows["reached by every peer that could probe it"] == (0, 1, 3)
    assert not any("others alike" in text for text in rows)


def cfg_with(**paths: str) -> ClusterConfig:
    hosts = [
        {
            "rank": r,
            "ssh": f"spark-{r}",
            "fabric_ip": f"10.0.0.{r + 1}",
            "fabric_iface": "enp1s0f0np0",
            "ib_hca": "rocep1s0f0",
        }
        for r in range(2)
    ]
    return config_from_data({"paths": paths, "hosts": hosts})


def df_text(rows: list[tuple[str, int, str]]) -> str:
    out = ["Filesystem 1-blocks Used Available Capacity Mounted on"]
    out += [f"{dev} {avail * 2} {avail} {avail} 50% {mount}" for dev, avail, mount in rows]
    return "\n".join(out) + "\n"


def test_disk_budgets_add_up_on_a_shared_filesystem() -> None:
    cfg = cfg_with()
    ops = S._df_operands(cfg, 1)
    assert ops[:3] == ["/srv/models/DeepSeek-V4.1-Flash-dealignai", "/srv/models", "/srv"]
    missing = {
        "/srv/models/DeepSeek-V4.1-Flash-dealignai",
        "/srv/models",
        "/srv/engram-local/DeepSeek-V4.1-Flash",
        "/srv/engram-local",
        "/srv/cache",
        "r37-recipe",
    }
    errors = "".join(f"df: {p}: No such file or directory\n" for p in ops if p in missing)
    srv, home = ("/dev/nvme0n1p2", "/srv"), ("/dev/nvme0n1p1", "/")

    def text(avail_srv: int) -> str:
        rows = [
            (*srv[:1], avail_srv, srv[1]) if p.startswith("/srv") else (home[0], 10**12, home[1])
            for p in ops
            if p not in missing
        ]
        return errors + df_text(rows)

    need = cfg.budget.checkpoint_bytes + cfg.budget.engram_bytes + S.cache_headroom(cfg)
    nothing_yet = {
        "ckpt.index": ("", 1),
        "engram.coverage": ("", 1),
        "docker.info": DOCKER_OK,
        "docker.image": ("", 1),
    }
    short = S.DISK.evaluate(
        Probe(
            cfg,
            1,
            {
                k: P.Section(k, *(v if isinstance(v, tuple) else (v, 0)))
                for k, v in {"df": (text(need - 1), 1), **nothing_yet}.items()
            },
        )
    )
    assert short.verdict is Verdict.FAIL and short.value.startswith("/srv (model (at /srv), engram (at /srv)")
    enough = S.DISK.evaluate(
        Probe(
            cfg,
            1,
            {
                k: P.Section(k, *(v if isinstance(v, tuple) else (v, 0)))
                for k, v in {"df": (text(need), 1), **nothing_yet}.items()
            },
        )
    )
    assert enough.verdict is Verdict.PASS, enough


def st_header(size: int, tensors: int = 1) -> tuple[int, bytes]:
    """(N, header bytes) of a safetensors file of `size` bytes whose tensors' data fill the rest."""
    n = 0
    for _ in range(5):     # the header's length depends (a little) on the data end it names
        end = size - 8 - n
        step = end // tensors
        doc = {"__metadata__": {"format": "pt"}}
        doc.update({f"t{i}": {"dtype": "U8", "shape": [step], "data_offsets": [i * step, (i + 1) * step]}
                    for i in range(tensors - 1)})
        doc[f"t{tensors - 1}"] = {"dtype": "U8", "shape": [end - (tensors - 1) * step],
                                  "data_offsets": [(tensors - 1) * step, end]}
        blob = json.dumps(doc).encode()
        if len(blob) == n:
            return n, blob
        n = len(blob)
    raise AssertionError("no fixed point")


def header_line(name: str, size: int, claims: int | None = None) -> str:
    """One line of `safetensors_headers` output: a shard of `size` bytes whose header says `claims`."""
    n, blob = st_header(claims if claims is not None else size)
    return f"{name}\t{size}\t{n}\t{blob.hex()}\n"


SHARD = 4096


def ckpt_probe(
    cfg: ClusterConfig, rank: int, shards: int, skip: int | None = None, rev: str = "abc",
    sizes: dict[int, int] | None = None, headers: str | None = None,
) -> Probe:
    """A checkpoint of `shards` shards of SHARD bytes; `sizes` makes shard n that long on disk (its header
    still says SHARD: truncated or padded); `headers` replaces the header read's output."""
    names = [f"model-{n:05d}-of-{shards:05d}.safetensors" for n in range(1, shards + 1)]
    size = {n: (sizes or {}).get(i, SHARD) for i, n in enumerate(names, 1)}
    index = json.dumps({"weight_map": {f"w{i}": n for i, n in enumerate(names)}})
    files = (
        "".join(f"{size[n]}\t{n}\0\n" for i, n in enumerate(names, 1) if i != skip)
        + f"50\t{C.CHECKPOINT_INDEX}\0\n"
    )
    if headers is None:
        headers = "".join(header_line(n, size[n], SHARD) for i, n in enumerate(names, 1) if i != skip)
    model = cfg.model_path(rank)
    head = f"==> {model}/{S.HF_METADATA} <==\n{rev}\n" if rev else ""
    return probe(cfg, rank, ckpt__index=index, ckpt__files=files, ckpt__revision=(head, 1),
                 ckpt__headers=headers)


def test_checkpoint_complete_missing_and_compared(fixed_config: ClusterConfig) -> None:
    ok = S.CHECKPOINT.evaluate(ckpt_probe(fixed_config, 0, 48))
    assert ok.verdict is Verdict.PASS and ok.value.startswith("48 shards") and "revision abc" in ok.value
    miss = S.CHECKPOINT.evaluate(ckpt_probe(fixed_config, 1, 48, skip=17))
    assert miss.verdict is Verdict.FAIL and "model-00017-of-00048.safetensors" in miss.value
    assert "setup checkpoint --rank 1" in miss.remedy
    outs = {
        r: S.CHECKPOINT.evaluate(ckpt_probe(fixed_config, r, 48, rev="abc" if r != 3 else "def"))
        for r in range(4)
    }
    changed = S.CHECKPOINT.compare(fixed_config, outs)  # type: ignore[misc]
    assert set(changed) == {3} and "revision differ" in changed[3].value
    norev = {r: S.CHECKPOINT.evaluate(ckpt_probe(fixed_config, r, 48, rev="")) for r in range(4)}
    assert S.CHECKPOINT.compare(fixed_config, norev) == {}  # type: ignore[misc]
    assert norev[0].value.endswith("revision unknown")


def test_engram_on_workers_only(fixed_config: ClusterConfig) -> None:
    assert S.ENGRAM.commands(fixed_config, 0) == {}
    assert S.ENGRAM.evaluate(probe(fixed_config, 0)).verdict is Verdict.PASS
    ready = probe(
        fixed_config,
        2,
        engram__files="model-00047-of-00048.safetensors\t67108864\nr37-row-coverage.json\t300\n",
        engram__coverage='{"rank": 2}',
    )
    assert S.ENGRAM.evaluate(ready).verdict is Verdict.PASS
    partial = probe(
        fixed_config,
        2,
        engram__files="model-00047-of-00048.safetensors\t67108864\n",
        engram__coverage=("cat: no such file", 1),
    )
    bad = S.ENGRAM.evaluate(partial)
    assert bad.verdict is Verdict.FAIL and "partial" in bad.value and "fresh destination" in bad.remedy


def result(check: str, rank: int, verdict: Verdict, value: str) -> CheckResult:
    return CheckResult(check, rank, 1, check, verdict, value, "fix it" if verdict is not Verdict.PASS else "")


def test_grouping_is_clush_style() -> None:
    rows = group_results(
        [result("arch", r, Verdict.PASS, "aarch64") for r in range(4)]
        + [result("gpu", r, Verdict.PASS, "NVIDIA GB10") for r in (0, 1, 3)]
        + [result("gpu", 2, Verdict.FAIL, "NVIDIA-SMI has failed")]
        + [result("ip", r, Verdict.PASS, f"10.0.0.{r}") for r in range(4)]
    )
    assert [(r.check, r.verdict, r.ranks, r.odd) for r in rows] == [
        ("arch", Verdict.PASS, (0, 1, 2, 3), False),
        ("gpu", Verdict.PASS, (0, 1, 3), False),
        ("gpu", Verdict.FAIL, (2,), True),
        ("ip", Verdict.PASS, (0, 1, 2, 3), False),
    ]
    assert rows[3].value == "10.0.0.0 (rank 0; others alike)"
    assert ranks_text([0, 1, 2, 3]) == "0-3" and ranks_text([3, 0, 2]) == "0,2-3"


# ---- the engine this cockpit launched: clocks, memory, container and ports ------------------------------

OURS = "d4013f9d39ad" + "6e2a4d73" * 6 + "e98f"
THEIRS = "5f0c1a2b3c4d" + "0badc0de" * 6 + "beef"
NAME = "ds41_r37"
IN_USE = f"in use by the running {NAME} ({OURS[:12]})"
BUSY_SS = "LISTEN 0 4096 0.0.0.0:29543 0.0.0.0:*\nLISTEN 0 4096 0.0.0.0:8000 0.0.0.0:*\n"
LOW_MEM = f"MemTotal: {122 * GIB // 1024} kB\nMemAvailable: {17 * GIB // 1024} kB\n"


def inspected(cid: str, running: bool = True, name: str = NAME) -> str:
    """`docker container inspect --format '{{json .}}' NAME` of one container."""
    state = {"Status": "running" if running else "exited", "Running": running,
             "ExitCode": 0 if running else 137}
    return json.dumps({"Id": cid, "Name": "/" + name, "State": state,
                       "Config": {"Image": "local/ds41-r37-spark:runtime"}}) + "\n"


NO_SUCH = (f"[]\nError: No such container: {NAME}", 1)


def ps_line(state: str, status: str) -> str:
    return json.dumps({"ID": OURS[:12], "Names": NAME, "State": state, "Status": status,
                       "Image": "local/ds41-r37-spark:runtime"}) + "\n"


def test_the_engine_checks_share_one_read_of_the_container(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    mine = [H.CLOCKS, H.MEMORY, H.CONTAINER, H.PORTS]
    lines = {c.id: c.command_lines(cfg, 0)[H.ENGINE] for c in mine}
    assert len(set(lines.values())) == 1 and f"docker container inspect --format '{{{{json .}}}}' {NAME}" \
        in lines["clocks"]
    batch: dict[str, object] = {}
    for c in CHECKS:      # what preflight frames into the host's one command: one read per label
        batch.update(c.commands(cfg, 0))
    assert sum(1 for label in batch if label == H.ENGINE) == 1


def test_clocks_of_this_cockpits_engine_pass_as_in_use(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    idle_p0 = smi(800, 0, "P0")     # what a loaded engine's GPU reads between requests
    mine = {r: H.CLOCKS.evaluate(probe(cfg, r, {r: OURS}, nvsmi__query=idle_p0,
                                       docker__container=inspected(OURS))) for r in range(4)}
    assert {(o.verdict, o.value) for o in mine.values()} == {(Verdict.PASS, IN_USE)}
    assert "800/3003 MHz, P0 0%" in mine[0].detail and not mine[0].remedy
    assert H.CLOCKS.compare(cfg, mine) == {}     # left out of the comparison across ranks
    # a rank without the engine idles in P8 next to them: still fine, and they are no idle peers of it
    mixed = {**mine, 3: H.CLOCKS.evaluate(probe(cfg, 3, nvsmi__query=smi(208, 0, "P8"),
                                                docker__container=NO_SUCH))}
    assert H.CLOCKS.compare(cfg, mixed) == {}
    # the same reading with a container this cockpit did not start: judged like any rank; P0 at 0 % is
    # idle (load is utilisation), and 800 MHz idle with no idle peer sits in the latched band: a warning
    hand = H.CLOCKS.evaluate(probe(cfg, 0, {0: OURS}, nvsmi__query=idle_p0,
                                   docker__container=inspected(THEIRS)))
    assert hand.verdict is Verdict.WARN and hand.value == "800/3003 MHz, P0 0% (idle)"
    assert hand.remedy == H.CLOCK_REMEDY
    # under real load a latched clock is still a finding, engine or not
    slow = H.CLOCKS.evaluate(probe(cfg, 1, {1: OURS}, nvsmi__query=smi(900, 93, "P0"),
                                   docker__container=inspected(OURS)))
    assert slow.verdict is Verdict.FAIL and "900 MHz" in slow.detail and IN_USE in slow.detail
    fast = H.CLOCKS.evaluate(probe(cfg, 1, {1: OURS}, nvsmi__query=smi(2300, 95, "P0"),
                                   docker__container=inspected(OURS)))
    assert (fast.verdict, fast.value) == (Verdict.PASS, IN_USE) and "2300/3003 MHz" in fast.detail
    loaded = {r: H.CLOCKS.evaluate(probe(cfg, r, {r: OURS}, nvsmi__query=smi(2300, 95, "P0"),
                                         docker__container=inspected(OURS))) for r in range(4)}
    loaded[2] = H.CLOCKS.evaluate(probe(cfg, 2, {2: OURS}, nvsmi__query=smi(1550, 95, "P0"),
                                        docker__container=inspected(OURS)))
    changed = H.CLOCKS.compare(cfg, loaded)
    assert set(changed) == {2} and changed[2].verdict is Verdict.FAIL and "loaded peers" in changed[2].detail


def test_memory_held_by_this_cockpits_engine_passes_as_in_use(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config

    def mem(launched: dict[int, str], container: str | tuple[str, int]) -> Outcome:
        return H.MEMORY.evaluate(probe(cfg, 2, launched, meminfo=LOW_MEM, docker__container=container))

    ours = mem({2: OURS}, inspected(OURS))
    assert (ours.verdict, ours.value) == (Verdict.PASS, IN_USE) and "17.0 GiB" in ours.detail
    for launched, container in (({2: OURS}, inspected(THEIRS)),        # launched by hand
                                ({}, inspected(OURS)),                  # ledger emptied
                                ({1: OURS}, inspected(OURS)),           # another rank's record
                                ({2: OURS}, inspected(OURS, running=False)),   # ours, but it exited
                                ({2: OURS}, NO_SUCH),
                                ({2: OURS}, ("Cannot connect to the Docker daemon", 1))):
        o = mem(launched, container)
        assert o.verdict is Verdict.FAIL and "needs ≥ 100 GiB" in o.value, (launched, container)


def test_container_of_this_cockpit_running_passes_others_are_named(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config

    def container(launched: dict[int, str], ps: str, inspect: str | tuple[str, int]) -> Outcome:
        return H.CONTAINER.evaluate(probe(cfg, 1, launched, docker__info=DOCKER_OK, docker__ps=ps,
                                          docker__container=inspect))

    up = ps_line("running", "Up 3 minutes")
    ours = container({1: OURS}, up, inspected(OURS))
    assert (ours.verdict, ours.value) == (Verdict.PASS, IN_USE) and "started by this cockpit" in ours.detail
    hand = container({1: OURS}, up, inspected(THEIRS))
    assert hand.verdict is Verdict.FAIL
    assert hand.value == f"{NAME} exists: running (Up 3 minutes), image local/ds41-r37-spark:runtime, " \
                         "not started by this cockpit"
    assert "never removes" in hand.remedy and hand.facts["owner"] == "by hand"
    emptied = container({}, up, inspected(OURS))
    assert emptied.verdict is Verdict.FAIL and "not started by this cockpit" in emptied.value
    exited = container({1: OURS}, ps_line("exited", "Exited (137) 2 hours ago"),
                       inspected(OURS, running=False))
    assert exited.verdict is Verdict.FAIL and exited.value.endswith(", started by this cockpit")
    assert "`r37-cockpit launch --replace-stopped`" in exited.remedy   # the one way it is cleared
    assert "--replace-stopped" not in hand.remedy and "--replace-stopped" not in emptied.remedy
    # Docker answered ps but not inspect: nothing is claimed about who started it
    unsure = container({1: OURS}, up, ("error during connect", 1))
    assert unsure.verdict is Verdict.FAIL and "started by" not in unsure.value
    # a container whose name merely contains the launch's name is not the launch's container
    other = container({1: OURS}, ps_line("running", "Up 1 minute"), inspected(OURS, name="ds41_r37_old"))
    assert other.verdict is Verdict.FAIL and "not started" not in other.value


def test_ports_held_by_this_cockpits_engine_pass_as_in_use(fixed_config: ClusterConfig) -> None:
    cfg = fixed_config
    ours = H.PORTS.evaluate(probe(cfg, 0, {0: OURS}, ss=BUSY_SS, docker__container=inspected(OURS)))
    assert (ours.verdict, ours.value) == (Verdict.PASS, IN_USE)
    assert "0.0.0.0:8000 (API)" in ours.detail and "0.0.0.0:29543 (coordination)" in ours.detail
    hand = H.PORTS.evaluate(probe(cfg, 0, {0: OURS}, ss=BUSY_SS, docker__container=inspected(THEIRS)))
    assert hand.verdict is Verdict.FAIL and hand.value.startswith("in use: 0.0.0.0:29543")
    free = H.PORTS.evaluate(probe(cfg, 0, {0: OURS}, ss="", docker__container=inspected(OURS)))
    assert (free.verdict, free.value) == (Verdict.PASS, "ports 8000 and 29543 free")


def test_in_use_rows_of_every_rank_group_into_one() -> None:
    ids = [OURS[:12], "1aa306c7b536", "8e9c5781abea", "a9e495df09b0"]
    rows = group_results([result("memory", r, Verdict.PASS, f"in use by the running {NAME} ({ids[r]})")
                          for r in range(4)])
    assert [(r.ranks, r.value) for r in rows] == [((0, 1, 2, 3), f"{IN_USE} (rank 0; others alike)")]


# ---- shards against their own headers ---------------------------------------------------------------


def test_a_shard_truncated_alike_on_every_host_fails_everywhere(fixed_config: ClusterConfig) -> None:
    """The cross-host comparison alone passed this: every host had the same (short) size."""
    outs = {r: S.CHECKPOINT.evaluate(ckpt_probe(fixed_config, r, 48, sizes={17: 1000})) for r in range(4)}
    for o in outs.values():
        assert o.verdict is Verdict.FAIL
        assert "model-00017-of-00048.safetensors" in o.value and "truncated" in o.value
        assert "1000 bytes, its header says 4096" in o.value
        assert "move them aside" in o.remedy and "setup checkpoint --rank" in o.remedy
    assert S.CHECKPOINT.compare(fixed_config, outs) == {}  # type: ignore[misc]
    fine = S.CHECKPOINT.evaluate(ckpt_probe(fixed_config, 0, 48))
    assert fine.verdict is Verdict.PASS and "matches its safetensors header" in fine.detail


def test_shard_header_cases(fixed_config: ClusterConfig) -> None:
    name = "model-00001-of-00001.safetensors"

    def judge(headers: str, size: int = SHARD) -> Outcome:
        return S.CHECKPOINT.evaluate(ckpt_probe(fixed_config, 0, 1, sizes={1: size}, headers=headers))

    padded = judge(header_line(name, SHARD + 10, SHARD), SHARD + 10)
    assert padded.verdict is Verdict.FAIL and "trailing bytes" in padded.value
    huge = judge(f"{name}\t{SHARD}\t{S.HEADER_LIMIT + 1}\t\n")
    assert huge.verdict is Verdict.FAIL and "over the" in huge.value
    tiny = judge(f"{name}\t5\t\t\n", 5)
    assert tiny.verdict is Verdict.FAIL and "shorter than the 8-byte header length" in tiny.value
    inside = judge(f"{name}\t{SHARD}\t{SHARD * 2}\t\n")
    assert inside.verdict is Verdict.FAIL and "ends inside its" in inside.value
    garbage = judge(f"{name}\t{SHARD}\t4\t{b'{oops'.hex()[:8]}\n")
    assert garbage.verdict is Verdict.FAIL and "not UTF-8 JSON" in garbage.value
    blob = b'{"t": {}}'
    no_offsets = judge(f"{name}\t{SHARD}\t{len(blob)}\t{blob.hex()}\n")
    assert no_offsets.verdict is Verdict.FAIL and "no valid data_offsets" in no_offsets.value
    zero = judge(f"{name}\t{SHARD}\t0\t\n")
    assert zero.verdict is Verdict.FAIL and "header length is 0" in zero.value
    over_budget = judge(f"{name}\t{SHARD}\t100\t\n")      # N within the bound, bytes not sent
    assert over_budget.verdict is Verdict.UNKNOWN and "read budget" in over_budget.value
    unread = judge("")                                     # the shard's line is missing
    assert unread.verdict is Verdict.UNKNOWN and "header not read" in unread.value
    failed = S.CHECKPOINT.evaluate(Probe(fixed_config, 0, {
        **ckpt_probe(fixed_config, 0, 1).sections, "ckpt.headers": P.Section("ckpt.headers", "od: boom", 1)}))
    assert failed.verdict is Verdict.UNKNOWN and "exit 1" in failed.value and failed.remedy


def test_the_header_read_is_one_bounded_command_per_host(fixed_config: ClusterConfig) -> None:
    lines = S.CHECKPOINT.command_lines(fixed_config, 1)
    line = lines["ckpt.headers"]
    assert "od -An -v -tu8 -N8 --endian=little" in line and str(S.HEADER_LIMIT) in line
    assert str(S.HEADER_BUDGET) in line and fixed_config.model_path(1) in line
    assert "ckpt.headers" not in S.DISK.command_lines(fixed_config, 1)    # the disk check needs no headers


def test_odd_file_names_in_the_model_dir_are_ignored(fixed_config: ClusterConfig) -> None:
    """Spaces, newlines, tabs and undecodable bytes (U+FFFD after decoding) in names of files nobody
    expects: the checkpoint still passes, and a name with a newline cannot pose as a shard."""
    base = ckpt_probe(fixed_config, 0, 48)
    files = base.output("ckpt.files") + "".join(
        f"{size}\t{name}\0\n" for name, size in [
            ("notes-caf\ufffd.txt", 12), ("a file with spaces.txt", 3), ("tab\there", 1),
            ("junk\nmodel-00001-of-00048.safetensors", 0), ("\nleading-newline", 7)])
    secs = {**base.sections, "ckpt.files": P.Section("ckpt.files", files, 0)}
    out = S.CHECKPOINT.evaluate(Probe(fixed_config, 0, secs))
    assert out.verdict is Verdict.PASS, out
    state = S.checkpoint_state(Probe(fixed_config, 0, secs))
    assert state.files["model-00001-of-00048.safetensors"] == SHARD
    assert state.present_bytes == 48 * SHARD                          # notes do not count as weights


def test_engram_rows_count_only_overlay_shards(fixed_config: ClusterConfig) -> None:
    cov = '{"rank": 2}'
    notes = probe(fixed_config, 2, engram__files="12\tnotes-caf\ufffd.txt\0\n300\tr37-row-coverage.json\0\n",
                  engram__coverage=cov)
    assert S.ENGRAM.evaluate(notes).verdict is Verdict.FAIL          # notes are not rows
    rows = probe(fixed_config, 2, engram__coverage=cov, engram__files=(
        "64\tmodel-00047-of-00048.safetensors\0\n300\tr37-row-coverage.json\0\n5\todd\nname\0\n"))
    ok = S.ENGRAM.evaluate(rows)
    assert ok.verdict is Verdict.PASS and "+ 1 overlay files" in ok.value


# ---- unknown is never a pass ------------------------------------------------------------------------


def test_unknown_is_never_a_pass() -> None:
    from cockpit.recipe.checks import PreflightFinished
    from cockpit.recipe.launch import preflight_failures

    passes = [result("arch", r, Verdict.PASS, "aarch64") for r in range(4)]
    unknown = [result("gpu", r, Verdict.UNKNOWN, "no answer: timed out") for r in (1, 2)]
    clean = PreflightFinished(tuple(passes), 1.0)
    assert clean.ok and clean.code is None and preflight_failures(clean.results) == []
    final = PreflightFinished(tuple(passes + unknown), 1.0)
    assert not final.ok and final.code == "preflight-unknown" and len(final.unknown) == 2
    assert [r.as_dict()["code"] for r in final.results] == [None] * 4 + ["preflight-unknown"] * 2
    lines = preflight_failures(final.results)
    assert len(lines) == 2 and all("UNKNOWN (not a pass)" in line for line in lines)
    failed = PreflightFinished(tuple(passes + unknown + [result("disk", 3, Verdict.FAIL, "full")]), 1.0)
    assert failed.code == "preflight-failed" and len(preflight_failures(failed.results)) == 3
    own = [result("container", 0, Verdict.UNKNOWN, "docker unreadable")]   # the gate judges it itself
    assert preflight_failures(own) == []


def test_cli_text_names_unknown_checks_and_neutralises_host_text() -> None:
    from cockpit.cli.preflight_cmd import render
    from cockpit.recipe.checks import PreflightFinished

    evil = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"
    results = (result("arch", 0, Verdict.PASS, "aarch64"), result("gpu", 1, Verdict.UNKNOWN, "no answer"),
               result("driver", 2, Verdict.FAIL, "driver " + evil))
    text = render(PreflightFinished(results, 1.0))
    assert "\x1b" not in text and "\x07" not in text
    assert "unknown: gpu on rank 1: no answer" in text and "never a pass" in text
    assert "1 passed, 1 failed, 0 warnings, 1 unknown" in text
