"""RDMA port rates and counter changes between two sampler rounds (formats: docs/host-tools.md).

`port_xmit_data` and `port_rcv_data` count octets divided by 4 (bytes = value × 4). Every other
`hw_counters` file is shown as its change since the previous round when that change is not zero; the
error and retransmit counters raise an alert when they grow, congestion counters (CNPs, ECN marks) are
shown only. A counter that went backwards (a driver reload) is a new series: no rate, no change.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cockpit.telemetry.host_sample import PortCounters

ERRORS = ("out_of_sequence", "packet_seq_err", "local_ack_timeout_err", "rnr_nak_retry_err", "out_of_buffer",
          "implied_nak_seq_err", "duplicate_request", "req_cqe_error", "resp_cqe_error",
          "resp_local_length_error", "req_remote_invalid_request", "req_remote_access_errors",
          "resp_remote_access_errors")
RETRANSMITS = ("roce_adp_retrans", "roce_adp_retrans_to", "roce_slow_restart", "roce_slow_restart_trans")
CONGESTION = ("np_cnp_sent", "np_ecn_marked_roce_packets", "rp_cnp_handled", "rp_cnp_ignored",
              "roce_slow_restart_cnps")
TRAFFIC = ("rx_write_requests", "rx_read_requests", "rx_atomic_requests")   # requests served: not news
ALERTING = frozenset(ERRORS + RETRANSMITS)


@dataclass(frozen=True)
class PortStats:
    """One HCA port between two rounds: state, Gbit/s each way, and every counter that changed."""

    hca: str
    port: int
    state: str | None
    active: bool | None
    tx_gbps: float | None = None
    rx_gbps: float | None = None
    changes: dict[str, int] = field(default_factory=dict)   # counter -> increase since the last round

    @property
    def state_word(self) -> str:
        """`DOWN` of the kernel's `1: DOWN` (the state as read when it has no number; `unknown`: not read)."""
        return (self.state or "unknown").partition(": ")[2] or self.state or "unknown"

    @property
    def errors(self) -> dict[str, int]:
        """The error and retransmit counters that grew since the last round."""
        return {k: v for k, v in self.changes.items() if k in ALERTING}


def _gbps(prev: int | None, cur: int | None, dt: float) -> float | None:
    if prev is None or cur is None or dt <= 0 or cur < prev:
        return None
    return (cur - prev) * 4 * 8 / dt / 1e9


def port_stats(cur: PortCounters, prev: PortCounters | None, dt: float) -> PortStats:
    """`cur` against the same port's previous round `dt` seconds earlier (None: the first round)."""
    base = PortStats(cur.hca, cur.port, cur.state, cur.active)
    if prev is None:
        return base
    changes = {}
    for name, value in sorted(cur.hw.items()):
        before = prev.hw.get(name)
        if name in TRAFFIC or before is None or value <= before:
            continue
        changes[name] = value - before
    return PortStats(cur.hca, cur.port, cur.state, cur.active, _gbps(prev.xmit_words, cur.xmit_words, dt),
                     _gbps(prev.rcv_words, cur.rcv_words, dt), changes)
