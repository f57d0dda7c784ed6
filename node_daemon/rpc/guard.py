"""RpcGuard: the first interceptor. Undecodable requests and excess streams end here.

Request bytes that do not parse must never reach gRPC's own failure path: its
deserializer failure leaked about 16 KB of the daemon's memory per request
and logged a traceback each time, so anyone who could reach the port could
grow the daemon without a token. The guard gives every handler (health and
reflection included) a deserializer that never raises: it returns an
`Undecodable` marker, and the guarded behaviour answers INVALID_ARGUMENT
before any other code (authentication included) sees it. Such failures are
logged at most once a minute, with a count.

Every streaming RPC passes StreamAdmission (node_daemon/rpc/stream_admission.py)
first: refused with RESOURCE_EXHAUSTED and a message naming the limit.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from node_daemon.rpc.stream_admission import StreamAdmission, StreamRefused, StreamSlot

__all__ = ["RateLimitedLog", "RpcGuard", "Undecodable", "tolerant"]

log = logging.getLogger(__name__)

Deserializer = Callable[[bytes], Any]
Behavior = Callable[..., Any]
# One log line per this many seconds at most for each kind of rejection: a
# flood of garbage must not become a flood of log lines (disk, journald).
LOG_INTERVAL_S = 60.0
_MAX_ERROR = 200


@dataclass(frozen=True)
class Undecodable:
    """What a tolerant deserializer returns for bytes that do not parse."""

    type_name: str  # the message the bytes should have been
    error: str  # the parser's complaint, bounded
    size: int


def tolerant(deserializer: Deserializer | None) -> Deserializer | None:
    """`deserializer`, made to return Undecodable instead of raising."""
    if deserializer is None:
        return None  # raw bytes: nothing to parse, nothing to fail
    message_type = getattr(deserializer, "__self__", None)
    descriptor = getattr(message_type, "DESCRIPTOR", None)
    type_name = getattr(descriptor, "full_name", None) or "request message"

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # any parser failure is the client's bad bytes
            error = f"{type(exc).__name__}: {exc}"[:_MAX_ERROR]
            return Undecodable(type_name, error, len(data))

    return decode


class RateLimitedLog:
    """A warning at most once per `interval_s`; the lines between are counted."""

    def __init__(
        self, what: str, interval_s: float = LOG_INTERVAL_S, logger: logging.Logger = log
    ) -> None:
        self._what, self._interval_s, self._log = what, interval_s, logger
        self._lock = threading.Lock()
        self._next_at = 0.0
        self._suppressed = 0
        self.total = 0

    def warn(self, detail: str) -> None:
        now = time.monotonic()
        with self._lock:
            self.total += 1
            if now < self._next_at:
                self._suppressed += 1
                return
            suppressed, self._suppressed = self._suppressed, 0
            self._next_at = now + self._interval_s
        more = f" (and {suppressed} more since the last report)" if suppressed else ""
        self._log.warning("%s: %s%s", self._what, detail, more)


class RpcGuard(grpc.ServerInterceptor):
    """Answers undecodable requests with INVALID_ARGUMENT; admits streams. Goes first."""

    def __init__(self, admission: StreamAdmission) -> None:
        self.admission = admission
        self.undecodable = RateLimitedLog("undecodable request answered INVALID_ARGUMENT")
        self.refused = RateLimitedLog("stream refused with RESOURCE_EXHAUSTED")
        # Wrapped handlers per method, built once (grpc's constructors import lazily);
        # unknown methods are not kept, so a client cannot grow this.
        self._wrapped: dict[str, Any] = {}

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        wrapped = self._wrapped.get(details.method)
        if wrapped is None:
            wrapped = self._wrap(continuation(details), details)
            if wrapped is not None:
                self._wrapped[details.method] = wrapped
        return wrapped

    def _wrap(self, handler: Any, details: Any) -> Any:
        if handler is None:
            return None
        method = str(details.method)
        deserializer = tolerant(handler.request_deserializer)
        serializer = handler.response_serializer
        if handler.unary_unary is not None:
            behavior = self._checked_unary(method, handler.unary_unary)
            return grpc.unary_unary_rpc_method_handler(behavior, deserializer, serializer)
        if handler.unary_stream is not None:
            behavior = self._admitted_unary_stream(method, handler.unary_stream)
            return grpc.unary_stream_rpc_method_handler(behavior, deserializer, serializer)
        if handler.stream_unary is not None:
            behavior = self._admitted_request_stream(method, handler.stream_unary, False)
            return grpc.stream_unary_rpc_method_handler(behavior, deserializer, serializer)
        behavior = self._admitted_request_stream(method, handler.stream_stream, True)
        return grpc.stream_stream_rpc_method_handler(behavior, deserializer, serializer)

    # -- undecodable requests -------------------------------------------------------

    def _reject_undecodable(self, method: str, request: Any, context: grpc.ServicerContext) -> None:
        if not isinstance(request, Undecodable):
            return
        self.undecodable.warn(
            f"{request.size} bytes to {method} from {context.peer()} are not a "
            f"{request.type_name} ({request.error})"
        )
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT,
            f"the request is not a valid {request.type_name}: {request.error}; send it "
            "serialized with the gpufleet.v1 protobuf definitions",
        )

    def _checked_unary(self, method: str, behavior: Behavior) -> Behavior:
        def checked(request: Any, context: grpc.ServicerContext) -> Any:
            self._reject_undecodable(method, request, context)
            return behavior(request, context)

        return checked

    def _checked_requests(
        self, method: str, requests: Iterator[Any], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        for request in requests:
            self._reject_undecodable(method, request, context)
            yield request

    # -- stream admission -------------------------------------------------------------

    def _enter(self, method: str, context: grpc.ServicerContext) -> StreamSlot:
        try:
            return self.admission.enter(context.peer())
        except StreamRefused as refused:
            self.refused.warn(f"{method} from {context.peer()}: {refused}")
            context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, str(refused))
            raise  # abort raises; this keeps type checkers (and a mock context) honest

    def _held(
        self, method: str, open_stream: Callable[[], Iterator[Any]], context: grpc.ServicerContext
    ) -> Iterator[Any]:
        """The stream's responses, holding a slot from the first `next` to the end.

        Admission happens inside the generator: grpc may drop a response iterator
        unstarted (a client gone at once), and an unstarted generator's `finally`
        never runs, so a slot taken outside it could never be given back.
        """
        slot = self._enter(method, context)
        try:
            yield from open_stream()
        finally:
            slot.release()

    def _admitted_unary_stream(self, method: str, behavior: Behavior) -> Behavior:
        if getattr(behavior, "experimental_non_blocking", False):
            return self._admitted_non_blocking(method, behavior)

        def admitted(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            self._reject_undecodable(method, request, context)
            return self._held(method, lambda: behavior(request, context), context)

        return admitted

    def _admitted_non_blocking(self, method: str, behavior: Behavior) -> Behavior:
        """The health Watch: it returns at once and answers from callbacks, holding no
        worker; its slot is given back when the RPC ends."""

        def admitted(request: Any, context: grpc.ServicerContext, send: Any = None) -> Any:
            self._reject_undecodable(method, request, context)
            slot = self._enter(method, context)
            if not context.add_callback(slot.release):
                slot.release()  # already over
            return behavior(request, context, send)

        admitted.experimental_non_blocking = True  # type: ignore[attr-defined]
        pool = getattr(behavior, "experimental_thread_pool", None)
        admitted.experimental_thread_pool = pool  # type: ignore[attr-defined]
        return admitted

    def _admitted_request_stream(self, method: str, behavior: Behavior, streams: bool) -> Behavior:
        """Client streams (server reflection): they hold a worker while the client sends."""

        def admitted(requests: Iterator[Any], context: grpc.ServicerContext) -> Any:
            checked = self._checked_requests(method, requests, context)
            if streams:
                return self._held(method, lambda: behavior(checked, context), context)
            slot = self._enter(method, context)
            try:
                return behavior(checked, context)
            finally:
                slot.release()

        return admitted
