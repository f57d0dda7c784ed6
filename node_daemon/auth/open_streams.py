"""The streams the auth interceptor admitted, so that a reload can end those it revokes.

A call is judged when it starts; a stream then runs until it ends, which for a
console is as long as it is open. Before, a user removed or revoked by a reload
(or whose token or key went) kept every stream they had opened. Each admitted
stream is kept here with what it presented (its bearer token, its client
certificate, as its context showed them); a reload judges each again by the new
settings, as a new call would be, and marks those refused now as ended. The
stream sees it through its context: `is_active()` turns false, which the stream
loops (StreamSamples, StreamEvents) check at least once a second; the
interceptor then ends the call with the code and message of the refusal. A
stream whose credential expires (a JWT's exp and the leeway, a static token's
token_expires) ends the same way at the first such check after it does: a new
call would be refused then, and a console's stream is open for days.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import grpc

from node_daemon.auth.auth_state import Denied


class CallSnapshot:
    """What identifying a call reads of its context (metadata, TLS peer, address), kept
    past the call's start so that a reload can identify the caller again."""

    def __init__(self, context: grpc.ServicerContext) -> None:
        self._metadata = tuple(context.invocation_metadata() or ())
        self._auth = dict(context.auth_context() or {})
        self._peer = context.peer()

    def invocation_metadata(self) -> tuple[Any, ...]:
        return self._metadata

    def auth_context(self) -> dict[str, Any]:
        return self._auth

    def peer(self) -> str:
        return self._peer


class OpenStream:
    """One admitted stream: who opened it, with what, and whether a reload ended it."""

    def __init__(self, context: grpc.ServicerContext, method: str, user: str,
                 expires_unix_s: float | None = None, expired_message: str = "",
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.call, self.method, self.user = CallSnapshot(context), method, user
        self.expires_unix_s = expires_unix_s  # when its credential stops working; None: never
        self._expired_message = expired_message  # what a new call is told then
        self._clock = clock
        self._lock = threading.Lock()
        self._ended: Denied | None = None

    def check_expiry(self) -> None:
        """End it once its credential has expired (the first reason stays)."""
        if self.expires_unix_s is None or self._clock() <= self.expires_unix_s:
            return
        # In the words a new call gets (a console shows them as the node's refusal).
        self.end(Denied(grpc.StatusCode.UNAUTHENTICATED,
                        f"{self._expired_message}; stream ended", "expired token"))  # fmt: skip

    @property
    def ended(self) -> Denied | None:
        """The refusal that ended it (code and message for the client), or None."""
        with self._lock:
            return self._ended

    def end(self, denied: Denied) -> None:
        """Mark it ended; the first reason stays (a second reload does not reword it)."""
        with self._lock:
            if self._ended is None:
                self._ended = denied


class OpenStreams:
    """The set of open streams; thread-safe (gRPC's workers add, a reload reads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: set[OpenStream] = set()

    def add(self, stream: OpenStream) -> None:
        with self._lock:
            self._streams.add(stream)

    def discard(self, stream: OpenStream) -> None:
        with self._lock:
            self._streams.discard(stream)

    def judge(self, admit: Callable[[OpenStream], object]) -> list[tuple[OpenStream, Denied]]:
        """Run `admit` on each open stream; end those it refuses (Denied). Returns them."""
        with self._lock:
            streams = list(self._streams)
        ended = []
        for stream in streams:
            try:
                admit(stream)
            except Denied as denied:
                reason = f"stream ended by a config reload: {denied}"
                stream.end(Denied(denied.code, reason, denied.reason))
                ended.append((stream, denied))
        return ended


class RevocableContext:
    """The servicer's view of a stream's context: inactive once a reload has ended it.

    Everything else is the real context's (abort, peer, add_callback...).
    """

    def __init__(self, context: grpc.ServicerContext, stream: OpenStream) -> None:
        self._context, self._stream = context, stream

    def is_active(self) -> bool:
        self._stream.check_expiry()
        return self._stream.ended is None and bool(self._context.is_active())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._context, name)
