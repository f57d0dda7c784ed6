"""The blocking face: one node, one channel, calls from the call table (gpufleet.client.calls).

For the terminal commands and the daemon's own commands. Every unary call has
a deadline (the table's, or the caller's), so a node that does not answer is
reported, never waited on; every failure is a `CallError` naming the node.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import TracebackType
from typing import Any, TypeVar

import grpc
from google.protobuf.message import Message

from gpufleet.client.calls import Stream, Unary
from gpufleet.client.channel import open_blocking_channel, plaintext_metadata
from gpufleet.client.errors import call_error, decode_answer
from gpufleet.client.methods import ChannelMethods
from gpufleet.client.security import LinkSecurity

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


class NodeClient:
    """A blocking channel to the node at `target` (HOST:PORT) with the security given."""

    def __init__(self, target: str, security: LinkSecurity | None = None) -> None:
        self.target = target
        self._security = security or LinkSecurity()
        self._channel = open_blocking_channel(target, self._security)
        self._methods = ChannelMethods(self._channel)

    def call(
        self,
        rpc: Unary[Req, Resp],
        request: Req | None = None,
        /,
        deadline_s: float | None = None,
        **fields: Any,
    ) -> Resp:
        """`rpc` with `request` (or one made of `fields`), within its deadline.

        Raises:
            CallError: the node refused, failed, could not be reached or answered garbage.
        """
        method, message, timeout = self._methods.unary(rpc, request, fields, deadline_s)
        try:
            data: bytes = method(
                message, timeout=timeout, metadata=plaintext_metadata(self._security)
            )
        except grpc.RpcError as exc:
            raise call_error(self.target, rpc, exc) from None
        return decode_answer(self.target, rpc, data)

    def stream(
        self,
        rpc: Stream[Req, Resp],
        request: Req | None = None,
        /,
        deadline_s: float | None = None,
        **fields: Any,
    ) -> Iterator[Resp]:
        """A server stream, cancelled at the deadline (if any) or when left.

        Raises:
            CallError: as `call`, when the stream fails.
        """
        method, message = self._methods.stream(rpc, request, fields)
        answers = method(message, timeout=deadline_s, metadata=plaintext_metadata(self._security))
        try:
            for data in answers:
                yield decode_answer(self.target, rpc, data)
        except grpc.RpcError as exc:
            raise call_error(self.target, rpc, exc) from None
        finally:
            answers.cancel()

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> NodeClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
