"""The callables both faces make of a channel: one per call, made on first use."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from gpufleet.client.calls import Call


def serialize(message: Message) -> bytes:
    return message.SerializeToString()


class ChannelMethods:
    """A channel's callable for each call path, made once and kept for the channel's life."""

    def __init__(self) -> None:
        self._made: dict[str, Any] = {}

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
