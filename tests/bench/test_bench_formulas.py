"""The method's formulas on known timings: per-stream decode excludes TTFT, aggregate includes the batch
wall time, tokens from usage only, a failed request is never a success, the headline is the mean of eight."""

from __future__ import annotations

import pytest

from cockpit.api.stream import ChatResult, StreamError, StreamStats, Usage
from cockpit.bench.records import DecodeCell, RequestRecord, headline


def _rec(t_start: float, t_first: float, t_end: float, tokens: int | None, *, fail: bool = False,
         usage: bool = True) -> RequestRecord:
    rec = RequestRecord(1, "decode", "prose C2", "prose", 2, 400, 10, "x")
    stats = StreamStats(t_start, t_first, t_end, tokens, 10, 0.1, 0.05)
    counts = Usage(20, tokens or 0, 20 + (tokens or 0)) if usage else None
    result = ChatResult("text", "", (), "length", counts, stats)
    if fail:
        rec.take(None, None, StreamError("boom", "server_error", partial=result))
    else:
        rec.take(result, stats, None)
    return rec


def test_per_stream_excludes_ttft_and_aggregate_includes_wall_time() -> None:
    a = _rec(0.0, 1.0, 11.0, 401)      # 400 tokens after the first in 10 s: 40 tok/s
    b = _rec(0.5, 2.5, 7.5, 201)       # 200 in 5 s: 40 tok/s
    cell = DecodeCell.of("prose", 2, [a, b], headline=True)
    assert a.ttft_s == 1.0 and a.decode_tps == pytest.approx(40.0)
    assert cell.per_stream_tps == pytest.approx(40.0)
    assert cell.ttft_s == pytest.approx(1.5)
    assert cell.aggregate_tps == pytest.approx((401 + 201) / 11.0)   # first sent at 0, last ended at 11
    assert cell.completion_tokens == 602 and cell.failed == 0


def test_a_failed_request_is_never_a_success_and_voids_the_cell() -> None:
    bad = _rec(0.0, 1.0, 5.0, 100, fail=True)
    assert not bad.ok and bad.error == {"kind": "server_error", "message": "boom", "status": None}
    assert bad.decode_tps is None and bad.text == "text"      # what arrived is kept
    cell = DecodeCell.of("prose", 2, [_rec(0.0, 1.0, 11.0, 401), bad], headline=True)
    assert cell.failed == 1 and cell.per_stream_tps is None and cell.aggregate_tps is None


def test_no_usage_means_no_figure() -> None:
    rec = _rec(0.0, 1.0, 11.0, None, usage=False)
    assert rec.ok and rec.completion_tokens is None and rec.decode_tps is None
    assert "no_usage" in rec.extra
    cell = DecodeCell.of("prose", 1, [rec], headline=True)
    assert cell.per_stream_tps is None and cell.aggregate_tps is None


def test_cancelled_record() -> None:
    rec = _rec(0.0, 1.0, 2.0, 50)
    rec.cancelled()
    assert not rec.ok and rec.error is not None and rec.error["kind"] == "cancelled"


def _cell(cat: str, c: int, per: float | None, agg: float | None) -> DecodeCell:
    return DecodeCell(cat, c, c, 0, per, 0.1, agg, 100, True)


def test_headline_is_the_mean_of_every_headline_category() -> None:
    cats = ["a", "b"]
    rows = headline([_cell("a", 1, 40, 40), _cell("b", 1, 60, 60), _cell("a", 8, 20, 160),
                     _cell("ceiling", 1, 99, 99)], cats)
    assert rows[0] == {"concurrency": 1, "categories": 2, "of": 2, "complete": True,
                       "per_stream_tps": 50.0, "aggregate_tps": 50.0}
    assert rows[1]["complete"] is False and rows[1]["per_stream_tps"] == 20.0    # b missing at C8
    voided = headline([_cell("a", 1, None, None), _cell("b", 1, 60, 60)], cats)
    assert voided[0]["per_stream_tps"] is None and voided[0]["complete"] is False
