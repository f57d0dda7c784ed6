"""What a client presents to a node: TLS (optionally mutual) and the bearer token.

Shared by every gpufleet client (the console's links, the terminal commands,
the daemon's own commands), so each reaches a node the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


class BearerToken:
    """A token shared by every link of a profile, swapped in place when refreshed.

    Read by each call as it starts, replaced by the refresher; a str swap is
    atomic, so no lock is needed.
    """

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        return self._value

    def replace(self, value: str) -> bool:
        """Take a new token; True when it differs from the one held."""
        changed, self._value = value != self._value, value
        return changed

    def __repr__(self) -> str:  # never the token
        return "BearerToken(set)"


@dataclass(frozen=True)
class LinkSecurity:
    """TLS when `root_ca` is set (mutual with a client key and chain), and the token."""

    token: str | None = None
    root_ca: bytes | None = None  # PEM; TLS when set
    client_key: bytes | None = None  # PEM; mutual TLS with client_chain
    client_chain: bytes | None = None
    # A token that changes (token_command): every call sends its current value.
    bearer: BearerToken | None = None
    # Fetches a fresh token (blocking: run off the event loop); None: it cannot be refreshed.
    refresh: Callable[[], str] | None = field(default=None, compare=False)

    @property
    def tls(self) -> bool:
        return self.root_ca is not None

    def current_token(self) -> str | None:
        return self.bearer.value if self.bearer is not None else self.token

    def __repr__(self) -> str:  # never the token, never the key
        token = "set" if self.token else "none"
        return (
            f"LinkSecurity(tls={self.tls}, mutual={self.client_chain is not None}, token={token})"
        )


def plain_security(token: str | None = None, ca: Path | None = None) -> LinkSecurity:
    """A token and, when `ca` is given, TLS verified against that CA file (no client certificate).

    Raises:
        OSError: the CA file cannot be read.
    """
    return LinkSecurity(token=token or None, root_ca=None if ca is None else ca.read_bytes())
