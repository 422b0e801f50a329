"""How many hosts a simulated cluster may have (`sim up --hosts N`); imports nothing heavy, so the CLI
can register its options without loading the cluster code."""

from __future__ import annotations

MIN_HOSTS = 2        # a TP2 pair
MAX_HOSTS = 16
DEFAULT_HOSTS = 4    # the card's TP4 deployment


class BadHostCount(ValueError):
    """A host count outside MIN_HOSTS..MAX_HOSTS."""

    def __init__(self, n: object):
        super().__init__(f"--hosts {n}: a simulated cluster has {MIN_HOSTS} to {MAX_HOSTS} hosts")


def check_host_count(n: object) -> int:
    """`n` if it is a host count the simulated cluster takes, else BadHostCount."""
    if isinstance(n, bool) or not isinstance(n, int) or not MIN_HOSTS <= n <= MAX_HOSTS:
        raise BadHostCount(n)
    return n
