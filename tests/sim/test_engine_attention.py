"""The simulated engine's attention term: decode slows with context past the free window, the card's
short-prompt figures stay as calibrated, and the schedule publishes both (GET /sim/schedule)."""

from __future__ import annotations

import pytest

from cockpit.sim.engine.schedule import Schedule


def test_short_contexts_keep_the_cards_calibration() -> None:
    s = Schedule()
    assert s.step_time(1, (2048,)) == s.step_time(1) == pytest.approx(2.2 / 50.50)
    assert s.single_stream_at(0) == pytest.approx(50.50) and s.aggregate(8) == pytest.approx(229.28)


def test_decode_slows_with_context() -> None:
    s = Schedule()
    assert s.step_time(1, (2048 + 1024,)) == pytest.approx(s.step_time(1) + 0.001)
    assert s.step_time(2, (10_240, 2048 + 2048)) == pytest.approx(s.step_time(2) + 0.008 + 0.002)
    rates = [s.single_stream_at(d) for d in (0, 8192, 16384, 32768)]
    assert rates == sorted(rates, reverse=True)
    assert [round(r, 1) for r in rates] == [50.5, 44.4, 38.2, 29.9]
    info = s.info()
    assert info["depth_tok_s"] == {"0": 50.5, "8192": 44.39, "16384": 38.22, "32768": 29.91}
    model = info["model"]
    assert isinstance(model, dict) and model["attn_s_per_ktok"] == 0.001 and model["attn_free_tokens"] == 2048
