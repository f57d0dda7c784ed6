"""Listen addresses: parsing HOST:PORT and telling loopback from the rest."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass


class ListenAddressError(ValueError):
    pass


@dataclass(frozen=True)
class ListenAddress:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def is_loopback(self) -> bool:
        if self.host == "localhost":
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return False  # a host name: it may resolve to anything


def parse_listen_address(text: str) -> ListenAddress:
    """Parse "HOST:PORT" or "[V6]:PORT"; port 0 picks a free port."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host:
        raise ListenAddressError(f"listen address {text!r} must be HOST:PORT, e.g. 127.0.0.1:50051")
    host = host.removeprefix("[").removesuffix("]")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ListenAddressError(f"listen address {text!r}: port must be a number 0..65535")
    return ListenAddress(host, int(port_text))
