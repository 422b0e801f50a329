"""Progress of a setup step from the tool's own progress lines (tqdm style, as `hf download` prints them).

tqdm writes `DESC:  45%|████▌     | 2.25G/5.00G [00:20<00:24, 112MB/s]` (or `13/52 [00:01<00:03,
10.2it/s]` for counted items, or `1.2GB [00:10, 123MB/s]` when the total is unknown). `parse_tqdm` reads
one such line; `ProgressTracker` keeps the latest bar of each description on one host and sums them into
one `Progress` (bytes, files, rate, ETA).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass

_POW = {"": 0, "k": 1, "K": 1, "M": 2, "G": 3, "T": 4, "P": 5}
_QTY = r"[0-9.]+\s*[kKMGTP]?i?B?"
_BAR = re.compile(
    r"^(?P<desc>.*?):?\s*(?:(?P<pct>\d{1,3})%\|[^|]*\|)?\s*(?P<n>" + _QTY + r")(?:/(?P<total>" + _QTY + r"))?"
    r"\s*\[(?P<elapsed>[0-9:]+)(?:<(?P<left>[0-9:?]+))?,\s*(?P<rate>[0-9.?]+\s*[kKMGTP]?i?(?:B|it)/s|"
    r"\?(?:B|it)/s|[0-9.]+s/(?:B|it))?"
)


@dataclass(frozen=True)
class Bar:
    """One tqdm line: a description, done/total (bytes when `is_bytes`, else items), rate and time left."""

    desc: str
    done: float
    total: float | None
    is_bytes: bool
    rate: float | None      # per second, in the bar's unit
    left: float | None      # seconds, tqdm's own estimate


def _qty(text: str) -> tuple[float, bool]:
    text = text.replace(" ", "")
    is_bytes = text.endswith("B")
    text = text.removesuffix("B")
    binary = text.endswith("i")
    text = text.removesuffix("i")
    unit = text[-1] if text and text[-1] in _POW else ""
    number = float(text[: len(text) - len(unit)])
    return number * (1024 if binary else 1000) ** _POW[unit], is_bytes


def _seconds(text: str | None) -> float | None:
    if not text or "?" in text:
        return None
    total = 0.0
    for part in text.split(":"):
        if not part.isdigit():
            return None
        total = total * 60 + int(part)
    return total


def _rate(text: str | None) -> float | None:
    if not text or text.startswith("?"):
        return None
    t = text.replace(" ", "")
    if "s/" in t:   # slow bars print seconds per item
        secs = float(t.split("s/")[0])
        return 1 / secs if secs > 0 else None
    value, _ = _qty(t.split("/")[0].removesuffix("it"))
    return value


def parse_tqdm(line: str) -> Bar | None:
    """The bar in one progress line, or None if the line is not one."""
    line = line.strip()
    if "[" not in line or "]" not in line:
        return None
    m = _BAR.match(line)
    if not m or (m["pct"] is None and m["total"] is None and m["rate"] is None):
        return None
    try:
        done, is_bytes = _qty(m["n"])
        total = _qty(m["total"])[0] if m["total"] else None
        rate = _rate(m["rate"])
    except (ValueError, IndexError):
        return None
    unit = (m["rate"] or "").replace(" ", "")
    if "B/s" in unit or "s/B" in unit:     # tqdm prints the unit only in the rate: 2.25G/5.00G … 112MB/s
        is_bytes = True
    return Bar(m["desc"].strip().rstrip(":").strip(), done, total, is_bytes, rate, _seconds(m["left"]))


@dataclass(frozen=True)
class Progress:
    """What one host's step has done so far (None: not known)."""

    bytes_done: int | None = None
    bytes_total: int | None = None
    files_done: int | None = None
    files_total: int | None = None
    rate: float | None = None        # bytes per second
    eta: float | None = None         # seconds

    @property
    def fraction(self) -> float | None:
        if self.bytes_total:
            return min(1.0, (self.bytes_done or 0) / self.bytes_total)
        if self.files_total:
            return min(1.0, (self.files_done or 0) / self.files_total)
        return None


class ProgressTracker:
    """Latest bar per description on one host; `feed` returns the combined Progress when a line was a bar.

    Rate is measured from the summed byte counts over a sliding window (several file bars run at once);
    ETA is tqdm's own estimate of the outer "Fetching N files" bar, else from rate and known total.
    """

    WINDOW = 5.0

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self.clock = clock
        self.bars: dict[str, Bar] = {}
        self.samples: list[tuple[float, float]] = []

    def feed(self, line: str) -> Progress | None:
        bar = parse_tqdm(line)
        if bar is None:
            return None
        self.bars[bar.desc] = bar
        return self.progress()

    def progress(self) -> Progress:
        byte_bars = [b for b in self.bars.values() if b.is_bytes]
        item_bars = [b for b in self.bars.values() if not b.is_bytes and b.total]
        done = sum(b.done for b in byte_bars) if byte_bars else None
        total = (sum(b.total or 0 for b in byte_bars) if byte_bars and all(b.total for b in byte_bars)
                 else None)
        now = self.clock()
        rate = None
        if done is not None:
            self.samples.append((now, done))
            self.samples = [s for s in self.samples if now - s[0] <= self.WINDOW] or self.samples[-1:]
            t0, d0 = self.samples[0]
            if now > t0:
                rate = max(0.0, (done - d0) / (now - t0))
            elif len(byte_bars) == 1:
                rate = byte_bars[0].rate
        files = max(item_bars, key=lambda b: b.total or 0) if item_bars else None
        eta = files.left if files is not None and files.done < (files.total or 0) else None
        if eta is None and rate and total and done is not None:
            eta = max(0.0, (total - done) / rate)
        if files is not None and files.total and files.done >= files.total:
            eta = 0.0
        return Progress(int(done) if done is not None else None, int(total) if total else None,
                        int(files.done) if files else None, int(files.total or 0) if files else None,
                        rate, eta)


def human_rate(rate: float | None) -> str:
    if rate is None:
        return "—"
    for unit in ("B/s", "kB/s", "MB/s", "GB/s"):
        if rate < 1000 or unit == "GB/s":
            return f"{rate:.0f} {unit}" if unit == "B/s" else f"{rate:.1f} {unit}"
        rate /= 1000
    return f"{rate:.1f} GB/s"


def human_eta(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = round(seconds)
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"
