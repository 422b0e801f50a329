"""RDMA port rates (bytes = counter × 4) and counter changes between rounds."""

from __future__ import annotations

import pytest

from cockpit.telemetry.host_sample import PortCounters
from cockpit.telemetry.rdma import port_stats


def _port(xmit: int | None, rcv: int | None, state: str = "4: ACTIVE", **hw: int) -> PortCounters:
    return PortCounters("rocep1s0f0", 1, state, xmit, rcv, dict(hw))


def test_rates_count_four_bytes_per_word() -> None:
    # 25e9 bits = 3.125e9 bytes = 781_250_000 words in one second: 25 Gbit/s
    s = port_stats(_port(781_250_000, 390_625_000), _port(0, 0), 1.0)
    assert s.tx_gbps == pytest.approx(25.0) and s.rx_gbps == pytest.approx(12.5)
    assert s.active is True and s.changes == {}


def test_first_round_and_counter_reset_have_no_rate() -> None:
    first = port_stats(_port(100, 100), None, 0.0)
    assert first.tx_gbps is None and first.rx_gbps is None
    back = port_stats(_port(10, 500), _port(1000, 100), 1.0)
    assert back.tx_gbps is None and back.rx_gbps == pytest.approx(400 * 32 / 1e9)


def test_only_counters_that_grew_are_listed_and_errors_are_told_apart() -> None:
    prev = _port(0, 0, local_ack_timeout_err=3, np_cnp_sent=10, rx_write_requests=5, out_of_sequence=2)
    cur = _port(0, 0, local_ack_timeout_err=4, np_cnp_sent=15, rx_write_requests=900, out_of_sequence=1,
                roce_adp_retrans=6)
    s = port_stats(cur, prev, 1.0)
    # request counters are traffic; a counter seen for the first time or going back is no change
    assert s.changes == {"local_ack_timeout_err": 1, "np_cnp_sent": 5}
    assert s.errors == {"local_ack_timeout_err": 1}          # congestion (CNPs) is shown, not an error


def test_a_down_port_is_not_active() -> None:
    assert port_stats(_port(0, 0, "1: DOWN"), None, 0).active is False
    assert port_stats(_port(0, 0, None), None, 0).active is None   # state not read: unknown, not down
