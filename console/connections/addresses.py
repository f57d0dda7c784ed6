"""Whether a host is this machine: a token may travel over plain http only to it."""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str | None) -> bool:
    """localhost, 127.0.0.0/8 or ::1; a name other than localhost is not trusted to be."""
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
