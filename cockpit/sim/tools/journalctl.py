"""`journalctl` stand-in: the host's kernel messages (`-k`) in systemd 255's `short-iso` format.

The kernel log is `<root>/run/kernel.log`, one `EPOCH<TAB>MESSAGE` line per kernel message (the `xid` fault
appends NVRM Xid lines in the driver's format); the host's boot line (`Linux version …`, stamped when the
host was provisioned) always comes first. Output: `2026-12-04T03:12:44+00:00 HOSTNAME kernel: MESSAGE`.
Options the cockpit uses: `-k`/`--dmesg`, `-b`, `-f`/`--follow` (new lines as they are appended), `-n N`,
`--since=-Ns|-Nmin|-Nh|YYYY-MM-DD HH:MM:SS`, `-o short-iso`, `--no-pager`, `-q`. Without `-f` and with
nothing to show it prints `-- No entries --`.
Fault `klog-denied`: the login may not read the system journal: journalctl prints its real hint on stderr
(and, without `-f`, `-- No entries --`), shows no kernel line, and with `-f` waits for lines that never come.
"""

from __future__ import annotations

import os
import re
import sys
import time

from cockpit.sim.tools import _host

BOOT_LINE = ("Linux version 6.11.0-1016-nvidia (buildd@bos03-arm64-012) (aarch64-linux-gnu-gcc-13 (Ubuntu "
             "13.3.0-6ubuntu2~24.04) 13.3.0, GNU ld (GNU Binutils for Ubuntu) 2.42) #16-Ubuntu SMP "
             "PREEMPT_DYNAMIC Wed Oct  1 13:51:59 UTC 2025 (Ubuntu 6.11.0-1016.16-nvidia 6.11.11)")
HINT = ("Hint: You are currently not seeing messages from other users and the system.\n"
        "      Users in groups 'adm', 'systemd-journal' can see all messages.\n"
        "      Pass -q to turn off this notice.\n")
NO_ENTRIES = "-- No entries --\n"
_REL = re.compile(r"-([0-9]{1,9})(s|sec|min|m|h)?")
UNITS = {None: 1, "s": 1, "sec": 1, "min": 60, "m": 60, "h": 3600}


def log_path() -> str:
    return os.path.join(_host.run_dir(), "kernel.log")


def boot_time() -> float:
    try:
        return os.path.getmtime(os.path.join(_host.root(), "sim.json"))
    except OSError:
        return time.time()


def read_lines(offset: int = 0) -> tuple[list[tuple[float, str]], int]:
    """Kernel messages from byte `offset` of the log (whole lines only) and the offset after them."""
    try:
        with open(log_path(), "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    out = []
    for raw in data[:end].decode("utf-8", "replace").splitlines():
        stamp, _, msg = raw.partition("\t")
        try:
            out.append((float(stamp), msg))
        except ValueError:
            continue
    return out, offset + end


def short_iso(at: float, host: str, msg: str) -> str:
    local = time.localtime(at)
    zone = time.strftime("%z", local)
    return f"{time.strftime('%Y-%m-%dT%H:%M:%S', local)}{zone[:3]}:{zone[3:]} {host} kernel: {msg}\n"


def parse_since(text: str, now: float) -> float:
    m = _REL.fullmatch(text.strip())
    if m:
        return now - int(m.group(1)) * UNITS[m.group(2)]
    try:
        return time.mktime(time.strptime(text.strip(), "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        raise ValueError(f"Failed to parse timestamp: {text}") from None


def main(argv: list[str] | None = None) -> int:
    _host.quiet_pipes()
    args = sys.argv[1:] if argv is None else argv
    follow, lines, since, quiet = False, None, None, False
    i = 0
    try:
        while i < len(args):
            key, eq, val = args[i].partition("=")
            if key in ("-n", "--lines", "--since", "-S", "-o", "--output") and not eq:
                i += 1
                val = args[i]
            if key in ("-f", "--follow"):
                follow = True
            elif key in ("-n", "--lines"):
                lines = None if val == "all" else int(val)
            elif key in ("--since", "-S"):
                since = parse_since(val, time.time())
            elif key in ("-q", "--quiet"):
                quiet = True
            elif key in ("-k", "--dmesg", "-b", "--boot", "--no-pager", "-o", "--output"):
                pass
            else:
                _host.err(f"journalctl: unrecognized option '{args[i]}'")
                return 1
            i += 1
    except (IndexError, ValueError) as e:
        _host.err(str(e) if isinstance(e, ValueError) and "timestamp" in str(e) else "journalctl: bad option")
        return 1
    out = sys.stdout
    if _host.fault("klog-denied"):
        if not quiet:
            sys.stderr.write(HINT)
            sys.stderr.flush()
        if not follow:
            out.write(NO_ENTRIES)
            return 0
        while True:
            time.sleep(3600)
    host = str(_host.spec().get("hostname", "localhost"))
    entries, offset = read_lines()
    entries = [(boot_time(), BOOT_LINE), *entries]
    if since is not None:
        entries = [e for e in entries if e[0] >= since]
    if lines is not None:
        entries = entries[-lines:] if lines > 0 else []
    for at, msg in entries:
        out.write(short_iso(at, host, msg))
    if not entries and not follow and not quiet:
        out.write(NO_ENTRIES)
    out.flush()
    while follow:
        time.sleep(0.25)
        new, offset = read_lines(offset)
        for at, msg in new:
            out.write(short_iso(at, host, msg))
        if new:
            out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
