"""StreamAdmission: how many streams the daemon holds open, in all and per client.

A stream holds one of the server's worker threads for as long as it is open
(the health Watch holds none, but still counts against gRPC's limit of
concurrent RPCs). Without a limit of their own, streams took every worker and
every unary call, ack and kill included, was refused. Admission counts the
open streams; one beyond `max_streams`, or beyond `max_streams_per_client`
from one client (its address, without the port), is refused with a message
that says which limit and how many are open. Unary calls never pass through
here: the server keeps workers for them beyond `max_streams`.
"""

from __future__ import annotations

import threading
from collections import Counter
from urllib.parse import unquote

__all__ = ["StreamAdmission", "StreamRefused", "StreamSlot", "client_of"]


class StreamRefused(Exception):
    """A stream that would exceed a limit; the message says which, for the client."""


def client_of(peer: str) -> str:
    """The client a gRPC peer string names: its address without the port.

    'ipv4:10.0.0.7:51234' -> '10.0.0.7', 'ipv6:[::1]:51234' (gRPC writes the
    brackets URL-encoded) -> '::1'; a Unix socket's peers are one client.
    """
    kind, _, rest = unquote(peer).partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0] or rest
    if kind == "ipv6":
        host = rest.rpartition(":")[0] if rest.startswith("[") else rest
        return host.removeprefix("[").removesuffix("]")
    return kind or peer


class StreamSlot:
    """One admitted stream; `release()` (idempotent) gives its place back."""

    def __init__(self, admission: StreamAdmission, client: str) -> None:
        self._admission, self.client = admission, client
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._admission._leave(self.client)


class StreamAdmission:
    """Counts open streams; `enter` admits one or raises StreamRefused. Thread-safe."""

    def __init__(self, max_streams: int, max_per_client: int) -> None:
        self.max_streams, self.max_per_client = max_streams, max_per_client
        self._lock = threading.Lock()
        self._open: Counter[str] = Counter()
        self._total = 0

    @property
    def open(self) -> int:
        """Streams open now, of every client."""
        with self._lock:
            return self._total

    def open_by_client(self) -> dict[str, int]:
        with self._lock:
            return {client: n for client, n in self._open.items() if n}

    def enter(self, peer: str) -> StreamSlot:
        """Admit a stream from `peer` (context.peer()), or raise StreamRefused."""
        client = client_of(peer)
        with self._lock:
            held = self._open[client]
            if self._total >= self.max_streams:
                raise StreamRefused(
                    f"stream refused: {self._total} streams are open, the most this daemon "
                    f"serves (max_streams = {self.max_streams}); retry later, or raise "
                    "max_streams in the daemon's config"
                )
            if held >= self.max_per_client:
                raise StreamRefused(
                    f"stream refused: {client} already holds {held} streams, the most one "
                    f"client may (max_streams_per_client = {self.max_per_client}); close "
                    "another console or stream, or raise max_streams_per_client"
                )
            self._open[client] = held + 1
            self._total += 1
        return StreamSlot(self, client)

    def _leave(self, client: str) -> None:
        with self._lock:
            self._total -= 1
            self._open[client] -= 1
            if not self._open[client]:
                del self._open[client]
