"""The callables both faces make of a channel: one per call, made on first use, and what
a call hands them (its request and timeout)."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from gpufleet.client.calls import Call, Stream, Unary


def serialize(message: Message) -> bytes:
    return message.SerializeToString()


def request_of(rpc: Call[Any, Any], request: Message | None, fields: dict[str, Any]) -> Message:
    """`request`, or one made of `fields`."""
    return request if request is not None else rpc.request(**fields)


class ChannelMethods:
    """A channel's callable for each call path, made once and kept for the channel's life."""

    def __init__(self, channel: Any) -> None:
        self._channel = channel
        self._made: dict[str, Any] = {}

    def unary(
        self,
        rpc: Unary[Any, Any],
        request: Message | None,
        fields: dict[str, Any],
        deadline_s: float | None,
    ) -> tuple[Any, Message, float]:
        """A unary call's callable, its request (`request_of`) and its timeout: the
        caller's deadline, else the call table's."""
        timeout = rpc.deadline_s if deadline_s is None else deadline_s
        return self.get(rpc, self._channel.unary_unary), request_of(rpc, request, fields), timeout

    def stream(
        self, rpc: Stream[Any, Any], request: Message | None, fields: dict[str, Any]
    ) -> tuple[Any, Message]:
        """A server stream's callable and its request (`request_of`)."""
        return self.get(rpc, self._channel.unary_stream), request_of(rpc, request, fields)

    def get(self, rpc: Call[Any, Any], make: Any) -> Any:
        """`rpc`'s callable, made by `make` (the channel's unary_unary or unary_stream).

        It takes the request message and hands back the answer's bytes, undecoded.
        """
        method = self._made.get(rpc.path)
        if method is None:
            method = self._made[rpc.path] = make(
                rpc.path,
                request_serializer=serialize,
                response_deserializer=None,  # bytes: decode_answer parses them
            )
        return method
