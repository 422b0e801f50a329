"""The bounded, time-ordered store of container log lines: `LogStore` keeps a ring buffer per rank
(oldest lines dropped, counted) and a merged view of all ranks ordered by timestamp, kept by merging
each batch into the tail (no re-sort). Both are compact (timestamps in arrays, the merged view as an
array of keys); `LogLine`s are made on access.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from operator import le
from typing import overload

from cockpit.telemetry.logline import LogLine

DEFAULT_CAPACITY = 200_000


# ---- the store -----------------------------------------------------------------------------------
#
# Compact storage (8 + 8 bytes per line besides its text, instead of a tuple and an int object): a rank's
# buffer keeps its lines in chunks of an `array('q')` of timestamps and a list of texts, addressed by the
# line's sequence number in that rank; a full chunk's texts are packed into one UTF-8 blob with an offset
# array (no str objects: smaller, and the garbage collector has nothing to walk through - a full
# collection walking 800 000 list items took about 100 ms, a stall of the UI); the merged view is an
# `array('q')` of keys `seq << 8 | slot`.
# `LogLine`s are made on access, so views compare lines by value, not identity. Lines the ring has
# dropped stay readable while the merged view still refers to them (the store pins them), so the
# merged view can drop them lazily, as before.

SLOT_BITS = 8
SLOT_MASK = (1 << SLOT_BITS) - 1
SEQ_BITS = 48  # a rank's sequence numbers in the merge's sort keys
SEQ_MASK = (1 << SEQ_BITS) - 1
CHUNK = 4096


class PackedTexts:
    """A full chunk's texts as one UTF-8 blob and the end offset of each text (read-only)."""

    __slots__ = ("blob", "ends")

    def __init__(self, texts: list[str]):
        joined = "\n".join(texts)  # neutralised texts hold no newline
        self.blob = joined.encode("utf-8", "surrogatepass")
        if len(self.blob) == len(joined):  # ASCII: byte offsets are character offsets
            lengths: Iterable[int] = map(len, texts)
        else:
            lengths = (len(t.encode("utf-8", "surrogatepass")) for t in texts)
        self.ends = array("I", accumulate(n + 1 for n in lengths))  # each end is after its newline

    def __len__(self) -> int:
        return len(self.ends)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.ends)))]
        ends = self.ends
        if index < 0:
            index += len(ends)
        start = ends[index - 1] if index > 0 else 0
        return self.blob[start:ends[index] - 1].decode("utf-8", "surrogatepass")


class RankBuffer:
    """A rank's ring buffer: the newest `capacity` lines in arrival order, with a dropped count."""

    __slots__ = ("_base", "_chunks", "_pin", "_stored", "capacity", "last_ts", "rank", "skipped")

    def __init__(self, rank: int, capacity: int = DEFAULT_CAPACITY):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.rank = rank
        self.capacity = capacity
        self._chunks: deque[tuple[array[int], list[str] | PackedTexts]] = deque()
        self._base = 0        # sequence number of the first line of the first chunk
        self._stored = 0      # lines ever stored: the next line's sequence number
        self._pin: int | None = None  # lines from this seq on stay readable even once dropped
        self.skipped = 0      # lines lost before reaching the buffer (a reader queue overflowed)
        self.last_ts = 0

    @property
    def received(self) -> int:
        return self._stored + self.skipped

    @property
    def dropped(self) -> int:
        return self.received - len(self)

    @property
    def first_seq(self) -> int:
        """Sequence number of the oldest line still held."""
        return max(0, self._stored - self.capacity)

    def __len__(self) -> int:
        return min(self._stored, self.capacity)

    @property
    def lines(self) -> RankLines:
        """The held lines, oldest first, as a sequence of `LogLine`s."""
        return RankLines(self)

    def at_seq(self, seq: int) -> LogLine:
        """The line with this sequence number (held, or dropped but still pinned)."""
        i = seq - self._base
        if i < 0 or seq >= self._stored:
            raise IndexError(seq)
        stamps, texts = self._chunks[i // CHUNK]
        return LogLine(stamps[i % CHUNK], self.rank, texts[i % CHUNK])

    def line(self, j: int) -> LogLine:
        """The j-th held line (0 = oldest)."""
        return self.at_seq(self.first_seq + j)

    def add(self, lines: Iterable[LogLine]) -> list[LogLine]:
        """Append; a timestamp that goes back (a clock step) is clamped so the buffer stays ordered."""
        out = lines if isinstance(lines, list) else list(lines)
        if not out:
            return out
        stamps = [line.ts for line in out]
        texts = [line.text for line in out]
        kept = self.add_columns(stamps, texts)
        if kept is stamps:
            return out
        return [LogLine(ts, line.rank, line.text) for ts, line in zip(kept, out, strict=True)]

    def add_columns(self, stamps: list[int], texts: list[str]) -> list[int]:
        """Append lines given as timestamps and texts (no `LogLine` objects); returns the timestamps as
        stored (clamped if the clock went back: then a new list)."""
        if not texts:
            return stamps
        if stamps[0] < self.last_ts or not all(map(le, stamps, stamps[1:])):
            stamps = list(accumulate(stamps, max, initial=self.last_ts))[1:]
        self.last_ts = stamps[-1]
        chunks, pos = self._chunks, 0
        while pos < len(texts):
            if not chunks or len(chunks[-1][1]) == CHUNK:
                chunks.append((array("q"), []))
            last_ts, last_texts = chunks[-1]
            assert isinstance(last_texts, list)   # only a full chunk is packed: the open one is a list
            take = CHUNK - len(last_texts)
            last_ts.extend(stamps[pos:pos + take])
            last_texts.extend(texts[pos:pos + take])
            if len(last_texts) == CHUNK:
                chunks[-1] = (last_ts, PackedTexts(last_texts))
            pos += take
        self._stored += len(texts)
        self._release()
        return stamps

    def newest(self, count: int) -> list[LogLine]:
        """The newest `count` held lines (fewer if fewer are held)."""
        return [self.at_seq(q) for q in range(max(self.first_seq, self._stored - count), self._stored)]

    def pin(self, seq: int | None) -> None:
        """Keep lines from `seq` on readable (None: only the held ones); frees whole chunks below."""
        self._pin = seq
        self._release()

    def _release(self) -> None:
        keep = self.first_seq if self._pin is None else min(self._pin, self.first_seq)
        while self._chunks and self._base + CHUNK <= keep:
            self._chunks.popleft()
            self._base += CHUNK

    def holds(self, line: LogLine) -> bool:
        """Whether `line` (once added here) is still in the buffer, i.e. not dropped as oldest."""
        return self._stored > 0 and line >= self.line(0)

    def note_skipped(self, count: int) -> None:
        """Count lines that never reached the buffer (they show as dropped)."""
        self.skipped += count

    def frozen(self) -> RankBuffer:
        """A copy that later additions do not change (for a search or a save in a thread): full chunks
        never change, so only the last one is copied."""
        copy = RankBuffer(self.rank, self.capacity)
        copy._chunks = deque(self._chunks)
        if copy._chunks:
            stamps, texts = copy._chunks[-1]
            if isinstance(texts, list):   # the open chunk: still growing in the original
                copy._chunks[-1] = (array("q", stamps), list(texts))
        copy._base, copy._stored, copy._pin = self._base, self._stored, self._pin
        copy.skipped, copy.last_ts = self.skipped, self.last_ts
        return copy


class RankLines(Sequence[LogLine]):
    """A rank buffer's held lines as a read-only sequence."""

    __slots__ = ("buf",)

    def __init__(self, buf: RankBuffer):
        self.buf = buf

    def __len__(self) -> int:
        return len(self.buf)

    def __getitem__(self, index: int) -> LogLine:  # type: ignore[override]
        n = len(self.buf)
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(index)
        return self.buf.line(index)

    def __iter__(self) -> Iterator[LogLine]:
        buf = self.buf
        skip, rank = buf.first_seq - buf._base, buf.rank
        for stamps, texts in list(buf._chunks):
            if skip >= len(texts):
                skip -= len(texts)
                continue
            for ts, text in zip(stamps[skip:], texts[skip:], strict=True):
                yield LogLine(ts, rank, text)
            skip = 0

    def snapshot(self) -> RankLines:
        return RankLines(self.buf.frozen())


class MergedLines(Sequence[LogLine]):
    """The merged view (keys into the rank buffers) as a read-only sequence of `LogLine`s."""

    __slots__ = ("head", "keys", "slots")

    def __init__(self, slots: list[RankBuffer]):
        self.slots = slots
        self.keys = array("q")
        self.head = 0  # entries before it were removed from the front

    def __len__(self) -> int:
        return len(self.keys) - self.head

    def line_of(self, key: int) -> LogLine:
        return self.slots[key & SLOT_MASK].at_seq(key >> SLOT_BITS)

    def order_of(self, key: int) -> tuple[int, int, int]:
        """The merged order of an entry: (timestamp, rank, key); the key orders a rank's own lines."""
        buf = self.slots[key & SLOT_MASK]
        i = (key >> SLOT_BITS) - buf._base
        return buf._chunks[i // CHUNK][0][i % CHUNK], buf.rank, key

    def __getitem__(self, index: int) -> LogLine:  # type: ignore[override]
        n = len(self.keys) - self.head
        if index < 0:
            index += n
        if not 0 <= index < n:
            raise IndexError(index)
        return self.line_of(self.keys[self.head + index])

    def __iter__(self) -> Iterator[LogLine]:
        slots, chunk = self.slots, CHUNK
        for key in self.keys[self.head:]:
            buf = slots[key & SLOT_MASK]
            i = (key >> SLOT_BITS) - buf._base
            stamps, texts = buf._chunks[i // chunk]
            yield LogLine(stamps[i % chunk], buf.rank, texts[i % chunk])

    def snapshot(self) -> MergedLines:
        copy = MergedLines([buf.frozen() for buf in self.slots])
        copy.keys = self.keys[self.head:]
        return copy


class LogStore:
    """Per-rank ring buffers and the merged view ordered by (timestamp, rank, arrival)."""

    def __init__(self, ranks: Iterable[int], capacity: int = DEFAULT_CAPACITY):
        self.capacity = capacity
        self.ranks: dict[int, RankBuffer] = {}
        self._slot: dict[int, int] = {}
        self._ref_first: list[int] = []  # per slot: the lowest sequence number the merged view holds
        self.merged = MergedLines([])
        self.late_lines = 0  # lines that arrived after newer lines of other ranks (merged into the tail)
        for r in ranks:
            self.rank(r)

    def rank(self, rank: int) -> RankBuffer:
        buf = self.ranks.get(rank)
        if buf is None:
            if len(self.merged.slots) > SLOT_MASK:
                raise ValueError(f"at most {SLOT_MASK + 1} ranks")
            buf = self.ranks[rank] = RankBuffer(rank, self.capacity)
            buf.pin(0)
            self._slot[rank] = len(self.merged.slots)
            self.merged.slots.append(buf)
            self._ref_first.append(0)
        return buf

    @property
    def received(self) -> int:
        return sum(b.received for b in self.ranks.values())

    @property
    def dropped(self) -> int:
        return sum(b.dropped for b in self.ranks.values())

    @property
    def live(self) -> int:
        return sum(len(b) for b in self.ranks.values())

    def add(self, batches: Mapping[int, Iterable[LogLine]], anchor: int | None = None) -> AddResult:
        """Add each rank's new lines (in that rank's order); merge them into the merged view.

        `anchor` is an index into the merged view (e.g. the top line of a paused screen); the result
        says how far that line moved, so a paused view can stay on the same lines.
        """
        columns = {}
        for r, lines in batches.items():
            lines = lines if isinstance(lines, list) else list(lines)
            columns[r] = ([line.ts for line in lines], [line.text for line in lines])
        return self.add_columns(columns, anchor, with_lines=True)

    def add_columns(self, columns: Mapping[int, tuple[list[int], list[str]]], anchor: int | None = None,
                    *, with_lines: bool = False) -> AddResult:
        """`add` for lines given per rank as (timestamps, texts): no `LogLine` per line is made, unless
        `with_lines` asks for the new lines in the result."""
        runs: list[tuple[int, list[int], range]] = []
        for r, (stamps, texts) in columns.items():
            if not texts:
                continue
            buf = self.rank(r)
            stamps = buf.add_columns(stamps, texts)
            slot, first_seq = self._slot[r], buf._stored - len(texts)
            runs.append((r, stamps, range((first_seq << SLOT_BITS) | slot, (buf._stored << SLOT_BITS) | slot,
                                          1 << SLOT_BITS)))
        if not runs:
            return AddResult(0, 0, 0, [])
        if len(runs) == 1:
            rank, stamps, key_range = runs[0]
            keys = array("q", key_range)
            first = (stamps[0], rank, key_range[0])
        elif all(0 <= rank <= SLOT_MASK for rank, _, _ in runs):
            # timsort on the ranks' runs (a merge), on one int per line: timestamp, rank, sequence
            slot_of = self._slot
            sort_keys = sorted(chain.from_iterable(
                [(((ts << SLOT_BITS) | rank) << SEQ_BITS) | (k >> SLOT_BITS)
                 for ts, k in zip(stamps, key_range, strict=True)] for rank, stamps, key_range in runs))
            keys = array("q", [((sk & SEQ_MASK) << SLOT_BITS) | slot_of[(sk >> SEQ_BITS) & SLOT_MASK]
                               for sk in sort_keys])
            first = (sort_keys[0] >> (SEQ_BITS + SLOT_BITS), (sort_keys[0] >> SEQ_BITS) & SLOT_MASK, keys[0])
        else:
            ordered = sorted(chain.from_iterable(
                zip(stamps, repeat(rank), key_range) for rank, stamps, key_range in runs))
            keys = array("q", [o[2] for o in ordered])
            first = ordered[0]
        merged = self.merged
        mkeys = merged.keys
        start = len(merged)
        tail_keys: list[int] = []
        while len(mkeys) > merged.head and merged.order_of(mkeys[-1]) > first:
            tail_keys.append(mkeys.pop())
        shift = 0
        if tail_keys:
            order = [merged.order_of(k) for k in keys]
            tail_keys.reverse()
            tail = [merged.order_of(k) for k in tail_keys]
            self.late_lines += sum(1 for o in order if o < tail[-1])
            start = len(merged)
            if anchor is not None and anchor >= start and anchor - start < len(tail):
                shift += bisect_left(order, tail[anchor - start])
            mkeys.extend(array("q", [o[2] for o in sorted(tail + order)]))
        else:
            mkeys.extend(keys)
        lines = [merged.line_of(k) for k in keys] if with_lines else []
        removed, removed_before = self._trim(anchor + shift if anchor is not None else None)
        return AddResult(len(keys), shift - removed_before, removed, lines,
                         moved_from=start if tail_keys else None)

    def _trim(self, anchor: int | None) -> tuple[int, int]:
        """Drop merged entries whose line was dropped from its rank's buffer. (removed, before anchor)

        Entries at the front go at once; others (a quiet rank's older lines hold the front) once they
        are more than an eighth of the view, in one pass. Each rank's entries are in sequence order, so
        the merged view refers to exactly its rank's lines from `_ref_first[slot]` on."""
        merged = self.merged
        keys, slots, ref = merged.keys, merged.slots, self._ref_first
        firsts = [buf.first_seq for buf in slots]
        head, n = merged.head, len(keys)
        while head < n:
            key = keys[head]
            seq, slot = key >> SLOT_BITS, key & SLOT_MASK
            if seq >= firsts[slot]:
                break
            ref[slot] = seq + 1
            head += 1
        removed = head - merged.head
        before = min(removed, anchor) if anchor is not None else 0
        merged.head = head
        live = sum(len(buf) for buf in slots)
        if len(merged) - live > max(1024, live >> 3):
            rest = anchor - before if anchor is not None else -1
            kept = array("q")
            for i, key in enumerate(keys[head:]):
                if (key >> SLOT_BITS) >= firsts[key & SLOT_MASK]:
                    kept.append(key)
                else:
                    removed += 1
                    if i < rest:
                        before += 1
            merged.keys, merged.head = kept, 0
            ref[:] = firsts
        elif head > 65_536 and head > (n >> 1):
            merged.keys, merged.head = keys[head:], 0
        for slot, buf in enumerate(slots):
            buf.pin(ref[slot])
        return removed, before


@dataclass(frozen=True, slots=True)
class AddResult:
    added: int
    anchor_shift: int      # how far the anchor line moved (+ lines inserted above, - lines removed above)
    removed: int           # merged entries removed (their lines were dropped from the rank buffers)
    lines: list[LogLine]   # the new lines, in merged order (`add`; `add_columns` only if asked)
    moved_from: int | None = None  # a late line was merged in: entries from this index on moved
