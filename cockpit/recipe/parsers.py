"""Parsers of real host tool output (formats: docs/host-tools.md), defensive by default.

Every parser takes the text a tool printed and returns plain data; a value the tool could not report
(`[N/A]`, `N/A`, `Not Supported`, an empty field, a missing key) becomes None instead of an error, and
lines that do not fit the format are skipped. Nothing here runs commands or knows about verdicts.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from cockpit.telemetry.host_sample import parse_meminfo  # noqa: F401  (/proc/meminfo: one parser, the sampler's)

UNAVAILABLE = {"", "n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]"}


def na(value: str | None) -> str | None:
    """A tool's field with the 'cannot report' spellings turned into None."""
    if value is None:
        return None
    value = value.strip()
    return None if value.lower() in UNAVAILABLE else value


def uint(text: str) -> int | None:
    """A plain ASCII decimal of at most 30 digits as an int, else None (`²`, `١٢` or 5000 digits are not
    numbers a tool prints: int() would raise or take long on them)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 30 else None


def _int_or_none(text: str) -> int | None:
    """Like `uint`, with an optional leading minus sign (exit statuses)."""
    n = uint(text.removeprefix("-"))
    return None if n is None else -n if text.startswith("-") else n


def to_int(value: str | None) -> int | None:
    value = na(value)
    if value is None:
        return None
    m = re.match(r"[-+]?[0-9]{1,30}(?:\.[0-9]+)?", value)
    try:
        return int(float(m.group(0))) if m else None
    except (OverflowError, ValueError):
        return None


def to_float(value: str | None) -> float | None:
    value = na(value)
    if value is None:
        return None
    m = re.match(r"[-+]?[0-9]{1,30}(?:\.[0-9]+)?", value)
    return float(m.group(0)) if m else None


def loads(text: str) -> Any:
    """`json.loads` whose only failure is ValueError (a deeply nested document raises RecursionError)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


# ---- framed sections (hosts.shell.sections) ----------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """One command's merged output and exit status (None if the frame was cut off)."""

    label: str
    output: str
    status: int | None


def split_sections(text: str, marker: str) -> dict[str, Section]:
    """Split the output of `hosts.shell.sections(parts, marker)` back into one Section per label."""
    out: dict[str, Section] = {}
    label: str | None = None
    buf: list[str] = []
    begin, end = f"{marker} begin ", f"{marker} end "
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\n")
        if bare.startswith(begin):
            if label is not None:
                out[label] = Section(label, "".join(buf), None)
            label, buf = bare[len(begin):], []
        elif bare.startswith(end) and label is not None:
            _, _, status = bare[len(end):].rpartition(" ")
            body = "".join(buf)
            out[label] = Section(label, body[:-1] if body.endswith("\n") else body,
                                 _int_or_none(status))
            label, buf = None, []
        elif label is not None:
            buf.append(line)
    if label is not None:
        out[label] = Section(label, "".join(buf), None)
    return out


# ---- uname, nvidia-smi -------------------------------------------------------------------------------


def parse_uname(text: str) -> str | None:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else None


def parse_nvsmi_csv(text: str, fields: list[str]) -> list[dict[str, str | None]]:
    """`nvidia-smi --query-…=F1,F2 --format=csv,noheader[,nounits]`: one dict per row, N/A as None.

    Lines with a different number of columns (error messages, a header) are skipped.
    """
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != len(fields) or cells == fields:
            continue
        rows.append({f: na(c) for f, c in zip(fields, cells, strict=True)})
    return rows


@dataclass
class SmiTable:
    """What the default `nvidia-smi` table tells: versions and one entry per GPU."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[dict[str, str | None]] = field(default_factory=list)


_SMI_HEAD = re.compile(r"Driver Version:\s*(\S+).*?CUDA Version:\s*(\S+)")
_SMI_GPU = re.compile(r"^\|\s*(\d+)\s+(.+?)\s+(On|Off)\s*\|\s*(\S+)\s+(\S+)\s*\|")
_SMI_GPU2 = re.compile(r"^\|\s*(\S+)\s+(\S+)\s+(P\d+)\s+(\S+)\s*/\s*(\S+)\s*\|"
                       r"\s*(.*?)\s*\|\s*(\S+)\s+(\S+)\s*\|")


def parse_nvsmi_table(text: str) -> SmiTable:
    table = SmiTable()
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _SMI_HEAD.search(line)
        if m and table.driver_version is None:
            table.driver_version, table.cuda_version = na(m.group(1)), na(m.group(2))
            continue
        m = _SMI_GPU.match(line)
        if m and i + 1 < len(lines):
            gpu: dict[str, str | None] = {"index": m.group(1), "name": m.group(2).strip(),
                                          "persistence": m.group(3), "bus_id": m.group(4)}
            m2 = _SMI_GPU2.match(lines[i + 1])
            if m2:
                gpu.update({"fan": na(m2.group(1)), "temperature": na(m2.group(2)), "pstate": m2.group(3),
                            "power": na(m2.group(4)), "power_cap": na(m2.group(5)),
                            "memory": na(m2.group(6)), "utilization": na(m2.group(7))})
            table.gpus.append(gpu)
    return table


# ---- df -P -B1 ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DfRow:
    source: str
    size: int
    used: int
    avail: int
    mount: str


def parse_df(text: str) -> list[DfRow]:
    """`df -P -B1 PATH…` data rows in operand order (failed operands print no row)."""
    rows = []
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) < 6 or not parts[5].startswith("/"):
            continue
        size, used, avail = (uint(x) for x in parts[1:4])
        if size is None or used is None or avail is None:
            continue
        rows.append(DfRow(parts[0], size, used, avail, parts[5]))
    return rows


_DF_ERR = re.compile(r"^(?:\S*/)?df: (?:cannot access )?['‘]?(.+?)['’]?: (.+)$")


def parse_df_errors(text: str) -> dict[str, str]:
    """Operands df could not report, with its reason (`No such file or directory`, …)."""
    out = {}
    for line in text.splitlines():
        m = _DF_ERR.match(line.strip())
        if m:
            out[m.group(1)] = m.group(2)
    return out


def df_by_path(text: str, operands: list[str]) -> dict[str, DfRow]:
    """Map each operand of one `df -P -B1 -- OPERAND…` call to its row, skipping the operands df refused."""
    failed = parse_df_errors(text)
    rows = parse_df(text)
    ok = [p for p in operands if p not in failed]
    if len(ok) != len(rows):
        return {}
    return dict(zip(ok, rows, strict=True))


# ---- ip -j addr --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IfAddr:
    family: str
    local: str
    prefixlen: int | None


@dataclass
class Iface:
    name: str
    operstate: str | None
    flags: list[str]
    addrs: list[IfAddr]

    @property
    def up(self) -> bool:
        return "UP" in self.flags or self.operstate == "UP"


def _json_values(text: str) -> list[Any]:
    """Every JSON value in the text: a whole document, or one per line (tools print either)."""
    text = text.strip()
    if not text:
        return []
    try:
        return [loads(text)]
    except ValueError:
        pass
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith(("{", "[")):
            try:
                out.append(loads(line))
            except ValueError:
                continue
    return out


def _json_list(text: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for value in _json_values(text):
        if isinstance(value, list):
            items += [v for v in value if isinstance(v, dict)]
        elif isinstance(value, dict):
            items.append(value)
    return items


def parse_ip_addr(text: str) -> list[Iface]:
    out = []
    for item in _json_list(text):
        name = item.get("ifname")
        if not isinstance(name, str):
            continue
        addrs = []
        for a in item.get("addr_info") or []:
            if isinstance(a, dict) and isinstance(a.get("local"), str):
                plen = a.get("prefixlen")
                addrs.append(IfAddr(str(a.get("family", "")), a["local"],
                                    plen if isinstance(plen, int) else None))
        flags = [str(f) for f in item.get("flags") or [] if isinstance(f, str)]
        state = item.get("operstate")
        out.append(Iface(name, state if isinstance(state, str) else None, flags, addrs))
    return out


def iface_with_ip(ifaces: list[Iface], ip: str) -> Iface | None:
    want = ipaddress.ip_address(ip)
    for iface in ifaces:
        for a in iface.addrs:
            try:
                if ipaddress.ip_address(a.local.split("%")[0]) == want:
                    return iface
            except ValueError:
                continue
    return None


# ---- rdma -j link, ibv_devinfo -----------------------------------------------------------------------


@dataclass(frozen=True)
class RdmaLink:
    ifname: str
    port: int | None
    state: str | None
    physical_state: str | None
    netdev: str | None


def parse_rdma_links(text: str) -> list[RdmaLink]:
    """`rdma -j link show` (JSON), or the text form `link DEV/PORT state S physical_state P netdev N`."""
    out = []
    items = _json_list(text)
    for item in items:
        name = item.get("ifname")
        if not isinstance(name, str):
            continue
        port = item.get("port")
        out.append(RdmaLink(name, port if isinstance(port, int) else to_int(str(port)),
                            _str(item.get("state")), _str(item.get("physical_state")),
                            _str(item.get("netdev"))))
    if items:
        return out
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2 or words[0] != "link":
            continue
        dev, _, port = words[1].partition("/")
        kv = dict(zip(words[2::2], words[3::2], strict=False))
        out.append(RdmaLink(dev, to_int(port), kv.get("state"), kv.get("physical_state"), kv.get("netdev")))
    return out


def _str(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


@dataclass
class IbvPort:
    port: int
    state: str | None = None          # PORT_ACTIVE, PORT_DOWN, …
    active_mtu: str | None = None
    link_layer: str | None = None


@dataclass
class IbvDevice:
    hca_id: str
    fields: dict[str, str] = field(default_factory=dict)
    ports: dict[int, IbvPort] = field(default_factory=dict)


def parse_ibv_devinfo(text: str) -> list[IbvDevice]:
    """`ibv_devinfo` blocks: `hca_id:` starts a device, `port:` a port, `key: value` lines fill them."""
    devices: list[IbvDevice] = []
    port: IbvPort | None = None
    for raw in text.splitlines():
        key, sep, value = raw.strip().partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            devices.append(IbvDevice(value))
            port = None
        elif not devices:
            continue
        elif key == "port" and uint(value) is not None:
            port = IbvPort(int(value))
            devices[-1].ports[port.port] = port
        elif port is not None and key in ("state", "active_mtu", "link_layer"):
            setattr(port, key, value.split()[0] if key == "state" and value else value)
        elif port is None:
            devices[-1].fields[key] = value
    return devices


# ---- first lines of files (sysfs) --------------------------------------------------------------------


def parse_head_verbose(text: str) -> dict[str, str | None]:
    """`head -v -n 1 -- FILE…`: {path: first line}; a file head could not read maps to None.

    head's own complaints (`head: cannot open …`, `head: error reading …`) are recognised and skipped.
    """
    out: dict[str, str | None] = {}
    current: str | None = None
    for line in text.splitlines():
        m = re.fullmatch(r"==> (.*) <==", line)
        if m:
            current = m.group(1)
            out[current] = None
            continue
        if line.startswith("head: "):
            m = re.match(r"head: (?:cannot open|error reading) ['‘](.+?)['’]", line)
            if m:
                out[m.group(1)] = None
            continue
        if current is not None and out.get(current) is None and line != "":
            out[current] = line.strip()
    return out


def parse_read_files(text: str) -> dict[str, str]:
    """`hosts.shell.read_files(paths)`: {path: first line} for every readable file."""
    out = {}
    for line in text.splitlines():
        path, sep, value = line.partition("\t")
        if sep:
            out[path] = value.strip()
    return out


@dataclass(frozen=True)
class GidEntry:
    index: int
    gid: str
    type: str | None
    ndev: str | None

    @property
    def ipv4(self) -> str | None:
        return gid_ipv4(self.gid)


ZERO_GID = "0000:0000:0000:0000:0000:0000:0000:0000"


def gid_ipv4(gid: str) -> str | None:
    """The IPv4 address of an IPv4-mapped GID (`…:ffff:c0a8:0348` → 192.168.3.72), else None."""
    try:
        addr = ipaddress.IPv6Address(gid.strip())
    except ValueError:
        return None
    mapped = addr.ipv4_mapped
    return str(mapped) if mapped else None


def ipv4_mapped_gid(ip: str) -> str:
    """The sysfs spelling of the GID that carries an IPv4 address."""
    packed = ipaddress.IPv6Address(f"::ffff:{ip}").packed
    return ":".join(packed[i:i + 2].hex() for i in range(0, 16, 2))


def gid_table(values: dict[str, str | None], port_dir: str, count: int) -> list[GidEntry]:
    """GID entries 0..count-1 of one port from `{path: first line}`, leaving out unused (zero) ones."""
    out = []
    for n in range(count):
        gid = values.get(f"{port_dir}/gids/{n}")
        if not gid or gid.replace(":", "").strip("0") == "":
            continue
        out.append(GidEntry(n, gid, na(values.get(f"{port_dir}/gid_attrs/types/{n}")),
                            na(values.get(f"{port_dir}/gid_attrs/ndevs/{n}"))))
    return out


# ---- docker ------------------------------------------------------------------------------------------


@dataclass
class DockerInfo:
    server_version: str | None
    runtimes: list[str]
    default_runtime: str | None
    root_dir: str | None
    errors: list[str]
    architecture: str | None = None

    @property
    def ok(self) -> bool:
        return self.server_version is not None and not self.errors


def _text_lines(text: str) -> list[str]:
    """The lines of a tool's merged output that are not JSON: what it said on stderr."""
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith(("{", "["))]


def parse_docker_info(text: str) -> DockerInfo | None:
    """`docker info --format '{{json .}}'` (stdout and stderr merged); None when no JSON object came back.

    Without a daemon to talk to (it is down, or the login may not use its socket) the CLI 20 prints
    `{"ServerErrors": [reason], …}`, the CLI 28 a whole object with every server field empty and the reason
    on stderr: both give `errors` = the reason, never the JSON."""
    docs = [v for v in _json_values(text) if isinstance(v, dict)]
    if not docs:
        return None
    d = docs[0]
    runtimes = d.get("Runtimes")
    errors = [str(e) for e in d.get("ServerErrors") or [] if e]
    if not errors and not _str(d.get("ServerVersion")):
        said = _text_lines(text)
        reasons = [line for line in said if not line.upper().startswith("WARNING")]   # e.g. a config warning
        errors = (reasons or said)[:3] or ["docker info: the daemon gave no server information"]
    return DockerInfo(server_version=_str(d.get("ServerVersion")),
                      runtimes=sorted(runtimes) if isinstance(runtimes, dict) else [],
                      default_runtime=_str(d.get("DefaultRuntime")), root_dir=_str(d.get("DockerRootDir")),
                      errors=errors, architecture=_str(d.get("Architecture")))


_IMAGE_ID = re.compile(r"sha256:[0-9a-f]{64}")


def parse_image_id(text: str) -> str | None:
    """`docker image inspect IMAGE --format '{{.Id}}'` → `sha256:…`, None if the image is not there."""
    m = _IMAGE_ID.search(text)
    return m.group(0) if m else None


# ---- ss -Hltn ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Listener:
    address: str       # '0.0.0.0', '::', '*', '127.0.0.1', …
    port: int


def parse_ss_listeners(text: str) -> list[Listener]:
    """`ss -Hltn`: `LISTEN 0 4096 ADDR:PORT PEER [process]` (IPv6 in brackets, `%iface` suffixes)."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 5:
            continue
        local = parts[3]
        addr, sep, port = local.rpartition(":")
        if not sep or uint(port) is None:
            continue
        addr = addr.split("%")[0]
        if addr.startswith("[") and addr.endswith("]"):
            addr = addr[1:-1]
        out.append(Listener(addr, int(port)))
    return out


# ---- checkpoint --------------------------------------------------------------------------------------


@dataclass
class SafetensorsIndex:
    shards: list[str]
    total_size: int | None


def parse_safetensors_index(text: str) -> SafetensorsIndex | None:
    """`model.safetensors.index.json`: the shard files its weight_map names; None if it is not that."""
    try:
        doc = loads(text)
    except ValueError:
        return None
    if not isinstance(doc, dict) or not isinstance(doc.get("weight_map"), dict):
        return None
    shards = sorted({str(v) for v in doc["weight_map"].values() if isinstance(v, str)})
    meta = doc.get("metadata")
    total = meta.get("total_size") if isinstance(meta, dict) else None
    if isinstance(total, bool) or not isinstance(total, int | float) or not math.isfinite(total):
        total = None
    return SafetensorsIndex(shards, None if total is None else int(total))


def parse_find_sizes(text: str) -> dict[str, int]:
    """`find DIR -maxdepth 1 -type f -printf '%s\\t%f\\0\\n'` → {name: size in bytes}.

    Records end with a NUL (a file name never holds one: names with newlines, tabs or undecodable bytes
    cannot pose as another file). Output without NULs is read in the older line form `NAME<TAB>SIZE`.
    """
    out = {}
    if "\0" in text:
        for record in text.split("\0"):
            record = record.removeprefix("\n")
            size, sep, name = record.partition("\t")
            n = uint(size)
            if sep and name and n is not None:
                out[name] = n
        return out
    for line in text.splitlines():
        name, sep, size = line.rpartition("\t")
        n = uint(size.strip())
        if sep and n is not None:
            out[name] = n
    return out


# safetensors: 8 bytes little-endian header length N, N bytes of JSON header, then the tensors' data


@dataclass(frozen=True)
class ShardHeader:
    """What `hosts.shell.safetensors_headers` read of one shard: its size, the header length N in its
    first 8 bytes, and (when the header was read and is a safetensors header) where its data ends."""

    name: str
    size: int
    header_len: int | None      # None: the file is shorter than 8 bytes (or od could not read it)
    data_end: int | None = None  # the largest data_offsets end; None when the header was not parsed
    read: bool = False          # the header's bytes came back (not over the bound, not skipped)
    problem: str | None = None  # why the header read is not a safetensors header

    @property
    def expected_size(self) -> int | None:
        """8 + N + max(E): the size a complete file has, by its own header."""
        if self.header_len is None or self.data_end is None:
            return None
        return 8 + self.header_len + self.data_end


def tensor_data_end(doc: Any) -> tuple[int | None, str | None]:
    """The end of the data a safetensors header describes (max of its data_offsets ends), or the reason
    it is not one."""
    if not isinstance(doc, dict):
        return None, "header is not a JSON object"
    end = 0
    for name, spec in doc.items():
        if name == "__metadata__":
            continue
        offsets = spec.get("data_offsets") if isinstance(spec, dict) else None
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            return None, f"tensor {str(name)[:60]!r} has no valid data_offsets"
        end = max(end, offsets[1])
    return end, None


def _header(name: str, size: int, length: str, hexed: str) -> ShardHeader:
    n = uint(length)
    if n is None:
        return ShardHeader(name, size, None)
    if n == 0:
        return ShardHeader(name, size, n, read=True, problem="header length is 0")
    if not hexed:
        return ShardHeader(name, size, n)
    try:
        raw = bytes.fromhex(hexed)
    except ValueError:
        return ShardHeader(name, size, n, read=True, problem="header bytes garbled in transit")
    if len(raw) < n:
        return ShardHeader(name, size, n, read=True, problem=f"only {len(raw)} of its {n} header bytes exist")
    try:
        doc = loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return ShardHeader(name, size, n, read=True, problem="header is not UTF-8 JSON")
    end, why = tensor_data_end(doc)
    return ShardHeader(name, size, n, end, True, why)


def parse_safetensors_headers(text: str) -> dict[str, ShardHeader]:
    """`hosts.shell.safetensors_headers(dir, …)`: one line `NAME<TAB>SIZE<TAB>N<TAB>HEX` per shard (N and
    HEX empty when not read) → {name: ShardHeader}; lines of another shape are skipped."""
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 4 or not parts[0]:
            continue
        size = uint(parts[1])
        if size is None:
            continue
        out[parts[0]] = _header(parts[0], size, parts[2], parts[3].strip())
    return out


@dataclass(frozen=True)
class Revision:
    repo: str | None
    revision: str | None


def parse_revision_file(text: str) -> Revision | None:
    """The checkpoint revision marker the setup job writes: JSON {"repo", "revision"}, `repo@rev` or `rev`."""
    text = text.strip()
    if not text:
        return None
    try:
        doc = loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict):
        return Revision(_str(doc.get("repo")), _str(doc.get("revision")))
    first = text.splitlines()[0].strip()
    repo, sep, rev = first.rpartition("@")
    return Revision(repo or None, rev or None) if sep else Revision(None, first)


# ---- tcp probe ---------------------------------------------------------------------------------------


def parse_tcp_probe(status: int | None, output: str) -> str:
    """Outcome of `hosts.shell.tcp_probe`: 'open', 'refused' (the peer answered), 'timeout', 'unreachable'.

    A refused connection still proves the peer's address is reachable: its kernel sent the reset.
    """
    if status == 0:
        return "open"
    low = output.lower()
    if "refused" in low:
        return "refused"
    if status == 124 or "timed out" in low:
        return "timeout"
    return "unreachable"
