"""Whether a bind address keeps a server on this machine (the API and the cockpit's own servers bind
loopback by default; anything else gets a warning)."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """`localhost`, 127.0.0.0/8 or ::1 (also written `[::1]`)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
