"""`nvidia-smi` stand-in for one GB10 GPU (driver 580.95.05, CUDA 13.0).

Readings come from `<root>/run/gpu.json` (written by the engine): {"utilization": %, "power_w": W,
"sm_clock_mhz": MHz, "apps": [{"pid", "used_mib", "name"?}]} plus optional "temperature_c". Idle defaults:
0 %, ~4 W, P8, SM clock 208 MHz. The maximum SM clock reported is 3003 MHz (`clocks.max.sm`).
Faults: `no-gpu` (driver unreachable, exit 9), `slow-clocks` (SM clock latched at 900 MHz or
{"mhz": N}), `gpu-thermal` (clock event reasons SW + HW thermal slowdown active at 92 °C, or the reasons
named in {"reasons": [...]}). `clocks_event_reasons.active` (and the pre-535 `clocks_throttle_reasons.*`
names) print the NVML bit mask as the real tool does (`0x0000000000000001` idle, as an idle H200), the
single reasons `Active` / `Not Active`; `-q` has the `Clocks Event Reasons` section.
Memory fields are `Not Supported` / `[N/A]` as on real GB10 (unified memory).
`-l S` / `-lms MS` repeat the output every interval, re-reading gpu.json each round: CSV queries print
their header once and then one block of rows per round (`--query-compute-apps` with no process prints
nothing), flushed each round; SIGPIPE/SIGTERM end the loop silently.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from cockpit.sim.tools import _host

DRIVER = "580.95.05"
CUDA = "13.0"
NAME = "NVIDIA GB10"
BUS_ID = "0000000F:01:00.0"
MAX_SM_MHZ = 3003
IDLE = {"utilization": 0, "power_w": 4.1, "sm_clock_mhz": 208, "apps": []}
NO_DRIVER = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)
SLOW_CLOCK_MHZ = 900
RULE = "+-----------------------------------------+------------------------+----------------------+"
WIDE = "+-----------------------------------------------------------------------------------------+"

# field -> (header, unit shown in the header, value function key)
GPU_FIELDS = {
    "timestamp": ("timestamp", ""),
    "index": ("index", ""),
    "name": ("name", ""),
    "gpu_name": ("name", ""),
    "driver_version": ("driver_version", ""),
    "uuid": ("uuid", ""),
    "gpu_uuid": ("uuid", ""),
    "pci.bus_id": ("pci.bus_id", ""),
    "gpu_bus_id": ("pci.bus_id", ""),
    "utilization.gpu": ("utilization.gpu", "%"),
    "utilization.memory": ("utilization.memory", "%"),
    "temperature.gpu": ("temperature.gpu", ""),
    "power.draw": ("power.draw", "W"),
    "power.draw.instant": ("power.draw.instant", "W"),
    "power.limit": ("power.limit", "W"),
    "clocks.sm": ("clocks.current.sm", "MHz"),
    "clocks.current.sm": ("clocks.current.sm", "MHz"),
    "clocks.max.sm": ("clocks.max.sm", "MHz"),
    "clocks.max.graphics": ("clocks.max.graphics", "MHz"),
    "clocks.gr": ("clocks.current.graphics", "MHz"),
    "clocks.current.graphics": ("clocks.current.graphics", "MHz"),
    "pstate": ("pstate", ""),
    "persistence_mode": ("persistence_mode", ""),
    "memory.total": ("memory.total", "MiB"),
    "memory.used": ("memory.used", "MiB"),
    "memory.free": ("memory.free", "MiB"),
    "fan.speed": ("fan.speed", "%"),
    "compute_mode": ("compute_mode", ""),
    "count": ("count", ""),
}
# NVML's clocks event reasons: the nvidia-smi field suffix -> (bit, `-q` row, `-q` indent)
REASONS = {
    "gpu_idle": (0x1, "Idle", 8),
    "applications_clocks_setting": (0x2, "Applications Clocks Setting", 8),
    "sw_power_cap": (0x4, "SW Power Cap", 8),
    "hw_slowdown": (0x8, "HW Slowdown", 8),
    "hw_thermal_slowdown": (0x40, "HW Thermal Slowdown", 12),
    "hw_power_brake_slowdown": (0x80, "HW Power Brake Slowdown", 12),
    "sync_boost": (0x10, "Sync Boost", 8),
    "sw_thermal_slowdown": (0x20, "SW Thermal Slowdown", 8),
    "display_clock_setting": (0x100, "Display Clock Setting", 8),
}
THERMAL_DEFAULT = ("sw_thermal_slowdown", "hw_thermal_slowdown")
THERMAL_TEMP_C = 92
for _prefix in ("clocks_event_reasons", "clocks_throttle_reasons"):
    GPU_FIELDS[f"{_prefix}.active"] = (f"{_prefix}.active", "")
    GPU_FIELDS[f"{_prefix}.supported"] = (f"{_prefix}.supported", "")
    for _name in REASONS:
        GPU_FIELDS[f"{_prefix}.{_name}"] = (f"{_prefix}.{_name}", "")
APP_FIELDS = {
    "pid": ("pid", ""),
    "process_name": ("process_name", ""),
    "name": ("process_name", ""),
    "used_memory": ("used_gpu_memory", "MiB"),
    "used_gpu_memory": ("used_gpu_memory", "MiB"),
    "gpu_uuid": ("gpu_uuid", ""),
    "gpu_bus_id": ("gpu_bus_id", ""),
    "gpu_name": ("gpu_name", ""),
}


def readings() -> dict:
    """Current GPU readings (gpu.json merged over idle, faults applied)."""
    data = _host.read_json(os.path.join(_host.run_dir(), "gpu.json"), {})
    r: dict[str, Any] = dict(IDLE)  # JSON values (gpu.json is written by the sim engine)
    if isinstance(data, dict):
        r.update({k: v for k, v in data.items() if v is not None})
    util = max(0, min(100, int(r["utilization"])))
    r["utilization"] = util
    if _host.fault("slow-clocks"):
        r["sm_clock_mhz"] = int(_host.fault_params("slow-clocks").get("mhz", SLOW_CLOCK_MHZ))
    r.setdefault("temperature_c", 36 + util * 0.3 + float(r["power_w"]) * 0.05)
    r["pstate"] = "P0" if util > 0 or r["apps"] else "P8"
    mask = REASONS["gpu_idle"][0] if util == 0 else 0
    if _host.fault("gpu-thermal"):
        names = _host.fault_params("gpu-thermal").get("reasons", THERMAL_DEFAULT)
        for name in names if isinstance(names, list) else THERMAL_DEFAULT:
            mask |= REASONS.get(str(name), (0,))[0]
        r["temperature_c"] = THERMAL_TEMP_C
    r["event_reasons"] = mask
    r["timestamp"] = timestamp()
    return r


def timestamp(now: float | None = None) -> str:
    """Local time as the real tool prints it: 2026/12/01 18:20:01.123."""
    now = time.time() if now is None else now
    return time.strftime("%Y/%m/%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


def uuid() -> str:
    try:
        rank = int(_host.spec().get("rank", 0))
    except (OSError, ValueError):
        rank = 0
    return f"GPU-5c7a13e2-9d41-4b37-a8f0-{0xC0FFEE000000 + rank:012x}"


def gpu_value(field: str, r: dict, units: bool) -> str:
    def u(v: object, unit: str) -> str:
        return f"{v} {unit}" if units else str(v)

    prefix, _, reason = field.partition(".")
    if prefix in ("clocks_event_reasons", "clocks_throttle_reasons"):
        if reason == "active":
            return f"0x{r['event_reasons']:016x}"
        if reason == "supported":
            return f"0x{sum(bit for bit, _, _ in REASONS.values()):016x}"
        return "Active" if r["event_reasons"] & REASONS[reason][0] else "Not Active"

    return {
        "timestamp": str(r["timestamp"]),
        "index": "0",
        "name": NAME,
        "gpu_name": NAME,
        "driver_version": DRIVER,
        "uuid": uuid(),
        "gpu_uuid": uuid(),
        "pci.bus_id": BUS_ID,
        "gpu_bus_id": BUS_ID,
        "count": "1",
        "utilization.gpu": u(r["utilization"], "%"),
        "utilization.memory": "[N/A]",
        "temperature.gpu": str(round(r["temperature_c"])),
        "power.draw": u(f"{float(r['power_w']):.2f}", "W"),
        "power.draw.instant": u(f"{float(r['power_w']):.2f}", "W"),
        "power.limit": "[N/A]",
        "clocks.sm": u(int(r["sm_clock_mhz"]), "MHz"),
        "clocks.current.sm": u(int(r["sm_clock_mhz"]), "MHz"),
        "clocks.gr": u(int(r["sm_clock_mhz"]), "MHz"),
        "clocks.current.graphics": u(int(r["sm_clock_mhz"]), "MHz"),
        "clocks.max.sm": u(MAX_SM_MHZ, "MHz"),
        "clocks.max.graphics": u(MAX_SM_MHZ, "MHz"),
        "pstate": r["pstate"],
        "persistence_mode": "Enabled",
        "memory.total": "[N/A]",
        "memory.used": "[N/A]",
        "memory.free": "[N/A]",
        "fan.speed": "[N/A]",
        "compute_mode": "Default",
    }[field]


def app_value(field: str, app: dict, units: bool) -> str:
    mib = int(app.get("used_mib", 0))
    return {
        "pid": str(app.get("pid", 0)),
        "process_name": str(app.get("name", "python3")),
        "name": str(app.get("name", "python3")),
        "used_memory": f"{mib} MiB" if units else str(mib),
        "used_gpu_memory": f"{mib} MiB" if units else str(mib),
        "gpu_uuid": uuid(),
        "gpu_bus_id": BUS_ID,
        "gpu_name": NAME,
    }[field]


def csv(fields: list[str], table: dict, rows: list[list[str]], header: bool, units: bool) -> str:
    out = []
    if header:
        heads = []
        for f in fields:
            name, unit = table[f]
            heads.append(f"{name} [{unit}]" if unit else name)
        out.append(", ".join(heads))
    out.extend(", ".join(row) for row in rows)
    return "".join(line + "\n" for line in out)


def table() -> str:
    r = readings()
    now = time.strftime("%a %b %d %H:%M:%S %Y")
    temp = f"{round(r['temperature_c'])}C"
    pwr = f"{round(float(r['power_w']))}W"
    lines = [
        f"{now}       ",
        WIDE,
        f"| NVIDIA-SMI {DRIVER}              Driver Version: {DRIVER}      CUDA Version: {CUDA}     |",
        RULE,
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                        |               MIG M. |",
        RULE.replace("-", "="),
        f"|{0:>4}  {NAME:<31}{'On':>2}  |{BUS_ID:>19} {'Off':>3} |{'N/A':>21} |",
        f"| {'N/A':>3}   {temp:>3}    {r['pstate']:>2}{pwr:>16} / {'N/A':>4}  |"
        f" {'Not Supported':<22} |{str(r['utilization']) + '%':>8}{'Default':>13} |",
        f"|{'':41}|{'':24}|{'N/A':>21} |",
        RULE,
        "",
        WIDE,
        "| Processes:                                                                              |",
        "|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |",
        "|        ID   ID                                                               Usage      |",
        WIDE.replace("-", "=").replace("+", "|"),
    ]
    apps = r["apps"] or []
    if not apps:
        lines.append(f"|  {'No running processes found':<87}|")
    for app in apps:
        name = str(app.get("name", "python3"))[:37]
        mem = f"{int(app.get('used_mib', 0))}MiB"
        pid = int(app.get("pid", 0))
        lines.append(f"|{0:>5}   {'N/A':<3}  {'N/A':<3}{pid:>16}{'C':>7}   {name:<37}{mem:>9} |")
    lines.append(WIDE)
    return "\n".join(lines) + "\n"


VALUE_OPTS = ("--query-gpu", "--query-compute-apps", "--format", "-i", "--id")
LOOP_OPTS = ("-l", "--loop", "-lms", "--loop-ms")
USAGE_ERROR = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help."


def query_report() -> str:
    """`nvidia-smi -q`: the real layout (`Key : value` padded to column 43, sections indented by 4),
    abridged to what a GB10 shows and a support bundle reads (driver, CUDA, clocks, power, processes)."""
    r = readings()

    def row(indent: int, key: str, value: object) -> str:
        return f"{' ' * indent}{key:<{42 - indent}}: {value}\n"

    out = ["\n==============NVSMI LOG==============\n\n",
           row(0, "Timestamp", time.strftime("%a %b %d %H:%M:%S %Y")),
           row(0, "Driver Version", DRIVER), row(0, "CUDA Version", CUDA), "\n",
           row(0, "Attached GPUs", 1), f"GPU {BUS_ID}\n",
           row(4, "Product Name", NAME), row(4, "Product Brand", "NVIDIA"),
           row(4, "Product Architecture", "Blackwell"), row(4, "Persistence Mode", "Enabled"),
           row(4, "GPU UUID", uuid()), row(4, "Minor Number", 0), row(4, "VBIOS Version", "[N/A]"),
           row(4, "GPU Part Number", "[N/A]"), "    FB Memory Usage\n",
           row(8, "Total", "[N/A]"), row(8, "Used", "[N/A]"), row(8, "Free", "[N/A]"),
           row(4, "Compute Mode", "Default"), "    Utilization\n",
           row(8, "Gpu", f"{r['utilization']} %"), row(8, "Memory", "[N/A]"),
           "    Clocks Event Reasons\n",
           *(row(indent, label, "Active" if r["event_reasons"] & bit else "Not Active")
             for bit, label, indent in REASONS.values()),
           "    Temperature\n", row(8, "GPU Current Temp", f"{round(r['temperature_c'])} C"),
           "    GPU Power Readings\n", row(8, "Average Power Draw", f"{float(r['power_w']):.2f} W"),
           row(8, "Instantaneous Power Draw", f"{float(r['power_w']):.2f} W"),
           row(8, "Current Power Limit", "[N/A]"), "    Clocks\n",
           row(8, "Graphics", f"{int(r['sm_clock_mhz'])} MHz"), row(8, "SM", f"{int(r['sm_clock_mhz'])} MHz"),
           "    Max Clocks\n", row(8, "Graphics", f"{MAX_SM_MHZ} MHz"), row(8, "SM", f"{MAX_SM_MHZ} MHz"),
           row(4, "Performance State", r["pstate"]), "    Processes\n"]
    apps = r["apps"] or []
    if not apps:
        out.append("        None\n")
    for a in apps:
        out += [row(8, "GPU instance ID", "N/A"), row(8, "Compute instance ID", "N/A"),
                row(8, "Process ID", a.get("pid", "")), row(8, "Type", "C"),
                row(8, "Name", a.get("name", "")), row(8, "Used GPU Memory", f"{a.get('used_mib', 0)} MiB")]
    return "".join(out) + "\n"


def _parse(args: list[str]) -> dict:
    """The options the cockpit and the recipe use; anything else is a usage error like the real tool."""
    opts: dict = {"gpu": None, "apps": None, "format": "", "loop_s": None, "list": False}
    i = 0
    while i < len(args):
        key, eq, val = args[i].partition("=")
        if key in VALUE_OPTS and not eq:
            i += 1
            val = args[i]
        if key in LOOP_OPTS and not eq and i + 1 < len(args) and args[i + 1].isdigit():
            i += 1
            val = args[i]
        if key == "--query-gpu":
            opts["gpu"] = val
        elif key == "--query-compute-apps":
            opts["apps"] = val
        elif key == "--format":
            opts["format"] = val
        elif key in LOOP_OPTS:
            ms = key in ("-lms", "--loop-ms")
            n = int(val) if val else (5000 if ms else 5)
            opts["loop_s"] = n / 1000 if ms else float(n)
        elif key in ("-i", "--id"):
            if val not in ("0", BUS_ID, uuid()):
                raise LookupError("No devices were found")
        elif key in ("-L", "--list-gpus"):
            opts["list"] = True
        else:
            raise ValueError(USAGE_ERROR)
        i += 1
    return opts


def render(opts: dict, first: bool = True) -> str:
    """One round of output; in a loop (`first` False after the first round) the CSV header is not repeated."""
    fmt = {p.strip() for p in opts["format"].split(",")}
    header, units = "noheader" not in fmt and first, "nounits" not in fmt
    if opts["list"]:
        return f"GPU 0: {NAME} (UUID: {uuid()})\n"
    if opts["gpu"] is not None:
        fields = [f.strip() for f in opts["gpu"].split(",") if f.strip()]
        r = readings()
        return csv(fields, GPU_FIELDS, [[gpu_value(f, r, units) for f in fields]], header, units)
    if opts["apps"] is not None:
        fields = [f.strip() for f in opts["apps"].split(",") if f.strip()]
        apps = readings()["apps"] or []
        rows = [[app_value(f, a, units) for f in fields] for a in apps]
        return csv(fields, APP_FIELDS, rows, header, units)
    return table()


def main(argv: list[str] | None = None) -> int:
    _host.quiet_pipes()
    args = sys.argv[1:] if argv is None else argv
    if _host.fault("no-gpu"):
        sys.stdout.write(NO_DRIVER)
        return 9
    if args in (["-q"], ["--query"]):
        sys.stdout.write(query_report())
        return 0
    try:
        opts = _parse(args)
    except LookupError as e:
        sys.stdout.write(f"{e}\n")
        return 6
    except (ValueError, IndexError):
        sys.stdout.write(USAGE_ERROR + "\n")
        return 2
    for query, table_ in (("gpu", GPU_FIELDS), ("apps", APP_FIELDS)):
        if opts[query] is not None:
            for f in (x.strip() for x in opts[query].split(",")):
                if f not in table_:
                    sys.stdout.write(f'Field "{f}" is not a valid field to query.\n\n')
                    return 2
            if "csv" not in opts["format"]:
                sys.stdout.write("Missing --format=csv option.\n")
                return 2
    out = sys.stdout
    first = True
    due = time.monotonic()
    while True:
        out.write(render(opts, first))  # an empty round (no compute apps) prints nothing
        out.flush()
        if opts["loop_s"] is None:
            return 0
        first = False
        # Rounds keep to the interval's grid (no drift); a round that overran starts the next at once.
        due = max(due + opts["loop_s"], time.monotonic())
        time.sleep(max(0.0, due - time.monotonic()))


if __name__ == "__main__":
    sys.exit(main())
