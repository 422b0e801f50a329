"""Every parser of host output, fed truncated, garbage, huge, non-UTF-8-decoded (U+FFFD) text and lines with
unexpected fields or columns: it returns its empty/None/unknown form and never raises (the raw text is
kept by the check that ran the command: see test_prop_checks)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cockpit.recipe import containers as K
from cockpit.recipe import lock as LK
from cockpit.recipe import parsers as P
from cockpit.recipe import progress as PR
from cockpit.telemetry import logline as TL

FAST = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MARKER = "@@r37-preflight-0a1b2c3d"

# One real-looking output per parser: the seed the mutations start from.
SAMPLES: dict[str, str] = {
    "uname": "aarch64\n",
    "nvsmi_csv": "NVIDIA GB10, 580.95.05, 208, 3003, 0, P8\n",
    "nvsmi_table": (
        "| NVIDIA-SMI 580.95.05    Driver Version: 580.95.05      CUDA Version: 13.0     |\n"
        "|   0  NVIDIA GB10                    On  |   0000000F:01:00.0 Off |                  N/A |\n"
        "| N/A   41C    P8              4W /  N/A  | Not Supported          |      0%      Default |\n"),
    "meminfo": "MemTotal:       127600748 kB\nMemAvailable:   118912344 kB\nHugePages_Total:       0\n",
    "df": ("Filesystem         1-blocks         Used    Available Capacity Mounted on\n"
           "/dev/nvme0n1p2 3936818806784 521123614720 3215611613184      14% /\n"
           "df: /nope: No such file or directory\n"),
    "ip": '[{"ifname":"enp1s0f0np0","operstate":"UP","flags":["BROADCAST","UP"],'
          '"addr_info":[{"family":"inet","local":"192.168.100.10","prefixlen":24}]}]\n',
    "rdma": '[{"ifindex":1,"ifname":"rocep1s0f0","port":1,"state":"ACTIVE","physical_state":"LINK_UP",'
            '"netdev":"enp1s0f0np0"}]\n'
            "link rocep1s0f1/1 state DOWN physical_state DISABLED netdev enp1s0f1np1\n",
    "ibv": ("hca_id:\trocep1s0f0\n\ttransport:\t\t\tInfiniBand (0)\n\t\tport:\t1\n"
            "\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_mtu:\t\t4096 (5)\n"
            "\t\t\tlink_layer:\t\tEthernet\n"),
    "head": ("==> /sys/class/infiniband/rocep1s0f0/ports/1/gids/3 <==\n"
             "0000:0000:0000:0000:0000:ffff:c0a8:640a\n"
             "head: error reading '/sys/class/infiniband/rocep1s0f0/ports/1/gid_attrs/types/4': "
             "Invalid argument\n"),
    "read_files": "/sys/a\tACTIVE\n/sys/b\t\n",
    "docker_info": '{"ServerVersion":"28.3.3","Runtimes":{"nvidia":{},"runc":{}},"DefaultRuntime":"runc",'
                   '"DockerRootDir":"/var/lib/docker","ServerErrors":null,"Architecture":"aarch64"}\n',
    "image_id": "sha256:" + "63" * 32 + "\n",
    "ss": "LISTEN 0 4096 0.0.0.0:22 0.0.0.0:*\n"
          "LISTEN 0 4096 [::]:8000 [::]:* users:((\"vllm\",pid=1,fd=3))\n",
    "st_index": '{"metadata":{"total_size":1024},"weight_map":{"a":"model-00001-of-00048.safetensors"}}',
    "find": "2432\tmodel-00001-of-00048.safetensors\0\n50\tmodel.safetensors.index.json\0\n",
    "find_old": "model-00001-of-00048.safetensors\t2432\nmodel.safetensors.index.json\t50\n",
    "st_headers": "model-00001-of-00048.safetensors\t40\t24\t" + (
        b'{"t":{"data_offsets":[0,8]}}'[:24].hex()) + "\ntiny.safetensors\t3\t\t\n",
    "revision": '{"repo": "deepseek-ai/DeepSeek-V4.1-Flash", "revision": "' + "a" * 40 + '"}\n',
    "sections": (f"{MARKER} begin uname\naarch64\n\n{MARKER} end uname 0\n"
                 f"{MARKER} begin df\ndf: oops\n\n{MARKER} end df 1\n{MARKER} begin cut\npartial"),
    "ps": '{"ID":"0123456789ab","Names":"ds41_r37","State":"running","Status":"Up 2 hours",'
          '"Image":"local/ds41-r37-spark:runtime"}\n',
    "inspect": '[{"Id":"' + "ab" * 32 + '","Name":"/ds41_r37","Image":"sha256:1","Created":'
               '"2026-11-29T22:59:17.123456789Z","State":{"Status":"exited","Running":false,"ExitCode":137,'
               '"OOMKilled":true,"StartedAt":"2026-11-29T22:59:17Z","FinishedAt":"0001-01-01T00:00:00Z"},'
               '"Config":{"Labels":{"r37":"1"}}}]',
    "tqdm": "model-00001-of-00048.safetensors:  45%|####5     | 2.25G/5.00G [00:20<00:24, 112MB/s]",
    "stamped": "2026-11-29T22:59:17.123456789Z INFO engine started\n",
    "lock_record": '{"version":1,"owner":"alice","admin_host":"admin2","pid":4242,"purpose":"launch",'
                   '"started_at":"2026-12-01T10:31:02+00:00","heartbeat_at":"2026-12-01T10:31:05+00:00",'
                   '"token":"0123456789abcdef","boot_id":null}',
    "lock_probe": (f"{MARKER} begin now\n1796117380.5\n\n{MARKER} end now 0\n{MARKER} begin stat\n"
                   "123 1796117370.0 /tmp/lock\n\n" f"{MARKER} end stat 0\n{MARKER} begin record\n{{}}\n\n"
                   f"{MARKER} end record 0\n"),
}


def _all(text: str) -> list[Any]:
    """Run every parser of host output on `text`; any exception is a failure of the property."""
    return [
        P.na(text), P.to_int(text), P.to_float(text), P.uint(text),
        P.split_sections(text, MARKER), P.parse_uname(text),
        P.parse_nvsmi_csv(text, ["name", "driver_version", "clocks.sm", "clocks.max.sm", "util", "pstate"]),
        P.parse_nvsmi_table(text), P.parse_meminfo(text), P.parse_df(text), P.parse_df_errors(text),
        P.df_by_path(text, ["/", "/srv", "."]), P.iface_with_ip(P.parse_ip_addr(text), "192.168.100.10"),
        P.parse_rdma_links(text), P.parse_ibv_devinfo(text),
        P.gid_table(P.parse_head_verbose(text), "/sys/class/infiniband/rocep1s0f0/ports/1", 8),
        P.parse_read_files(text), P.parse_docker_info(text), P.parse_image_id(text),
        P.parse_ss_listeners(text), P.parse_safetensors_index(text), P.parse_find_sizes(text),
        P.parse_safetensors_headers(text), P.parse_revision_file(text), P.parse_tcp_probe(1, text),
        P.gid_ipv4(text),
        K.parse_time(text), K.parse_ps(text), K.ps_named(text, "ds41_r37"), K.parse_inspect(text),
        K.container_id_from_output(text), PR.parse_tqdm(text),
        TL.parse_timestamp(text), TL.parse_stamped(text), TL.line_from_raw(0, text),
        LK.parse_probe(text, MARKER, "/tmp/lock"), _record(text),
    ]


def _record(text: str) -> object:
    """`lock.parse_record`'s error form is ValueError with the reason (its caller keeps the text)."""
    try:
        return LK.parse_record(text)
    except ValueError as exc:
        return exc


# ---- strategies -------------------------------------------------------------------------------------

sample = st.sampled_from(sorted(SAMPLES.values()))


@st.composite
def truncated(draw: st.DrawFn) -> str:
    text = draw(sample)
    return text[:draw(st.integers(0, len(text)))]


@st.composite
def replaced(draw: st.DrawFn) -> str:
    """Bytes a strict decoder could not read, as `Host.run` hands them on: U+FFFD in their place."""
    text = draw(sample)
    spots = draw(st.lists(st.integers(0, len(text)), max_size=6))
    for i in sorted(spots, reverse=True):
        text = text[:i] + "\ufffd" + text[i:]
    return text


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """Unexpected fields and columns: cells, words and lines inserted, doubled, removed or swapped."""
    lines = draw(sample).split("\n")
    junk = st.sampled_from([",", "\t", " ", ":", "extra", "N/A", "[N/A]", "-1", "²", "٣", "١٢",
                            "9" * 40, "1e999", "NaN", "Infinity", '{"x":', "]", "\x00", "\x1b[2J",
                            f"{MARKER} end x", f"{MARKER} begin y", "==> x <==", "hca_id:", "port: 1"])
    for _ in range(draw(st.integers(1, 6))):
        if not lines:
            lines = [""]
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["insert", "dup", "drop", "cell"]))
        if op == "insert":
            pos = draw(st.integers(0, len(lines[i])))
            lines[i] = lines[i][:pos] + draw(junk) + lines[i][pos:]
        elif op == "dup":
            lines.insert(i, lines[i])
        elif op == "drop":
            lines.pop(i)
        else:
            lines[i] = lines[i] + draw(st.sampled_from([",", "\t", " "])) + draw(junk)
    return "\n".join(lines)


@st.composite
def lookalike_digits(draw: st.DrawFn) -> str:
    """Digits only `str.isdigit` believes in (superscripts, other scripts) where a tool prints 0-9."""
    text = draw(st.sampled_from([*sorted(SAMPLES.values()), "2026-11-29T22:59:17.123456789Z x\n"]))
    spots = [i for i, c in enumerate(text) if c.isdigit()]
    for i in draw(st.lists(st.sampled_from(spots), max_size=4)) if spots else []:
        text = text[:i] + draw(st.sampled_from("²³¹٣۵߃")) + text[i + 1:]
    return text


huge = st.one_of(
    st.integers(1, 20_000).map(lambda n: "[" * n),
    st.integers(1, 20_000).map(lambda n: '{"a":' * n),
    st.integers(1, 6000).map(lambda n: "9" * n),
    st.integers(1, 6000).map(lambda n: f"MemTotal: {'9' * n} kB\n"),
    st.integers(1, 6000).map(lambda n: f"x\t{'9' * n}\n{'9' * n}\tx\0\n"),
    st.integers(1, 6000).map(lambda n: f"/dev/x {'9' * n} 1 1 1% /\n"),
    st.integers(1, 2000).map(lambda n: "2026-11-29T22:59:17." + "9" * n + "Z x"),
    st.integers(1, 50_000).map(lambda n: "a" * n),
)
garbage = st.text(max_size=400)


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_the_samples_parse(name: str) -> None:
    _all(SAMPLES[name])


@FAST
@given(truncated())
def test_truncated_output_never_raises(text: str) -> None:
    _all(text)


@FAST
@given(garbage)
def test_garbage_never_raises(text: str) -> None:
    _all(text)


@FAST
@given(replaced())
def test_replacement_characters_never_raise(text: str) -> None:
    _all(text)


@FAST
@given(mutated())
def test_unexpected_fields_and_columns_never_raise(text: str) -> None:
    _all(text)


@FAST
@given(lookalike_digits())
def test_lookalike_digits_never_raise(text: str) -> None:
    _all(text)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(huge)
def test_huge_output_never_raises(text: str) -> None:
    _all(text)


PARSERS_GIVING_NONE: dict[str, Callable[[str], object]] = {
    "uname": P.parse_uname, "docker_info": P.parse_docker_info, "image_id": P.parse_image_id,
    "st_index": P.parse_safetensors_index, "revision": P.parse_revision_file, "tqdm": PR.parse_tqdm,
    "stamped": TL.parse_stamped,
}


@FAST
@given(st.text(alphabet=" \t\n\r", max_size=50))
def test_blank_output_is_the_unknown_form(text: str) -> None:
    """Nothing readable: None or empty, never a made-up value."""
    for name, parse in PARSERS_GIVING_NONE.items():
        got = parse(text)
        assert got is None or (name == "revision" and got.repo is None), (name, got)
    assert P.parse_find_sizes(text) == {} and P.parse_safetensors_headers(text) == {}
    assert P.parse_df(text) == [] and P.parse_meminfo(text) == {} and K.parse_ps(text) == []
