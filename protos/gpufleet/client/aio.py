"""The async face (grpc.aio): the same call table as the blocking face, for an event loop.

The console's links run on its one network thread; each holds an
`AsyncNodeClient` for the life of a connection. Failures are `CallError`s,
as on the blocking face.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import TracebackType
from typing import Any, TypeVar

import grpc
import grpc.aio
from google.protobuf.message import Message

from gpufleet.client.calls import Stream, Unary
from gpufleet.client.channel import open_channel
from gpufleet.client.errors import call_error, decode_answer
from gpufleet.client.methods import ChannelMethods
from gpufleet.client.security import LinkSecurity
from gpufleet.v1 import node_pb2_grpc as pb_grpc

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


class AsyncNodeClient:
    """An asyncio channel to the node at `target`; open it inside the loop that uses it."""

    def __init__(self, target: str, security: LinkSecurity | None = None) -> None:
        self.target = target
        self._channel = open_channel(target, security or LinkSecurity())
        self._methods = ChannelMethods(self._channel)
        # The generated stub over the same channel, for callers that hand a stub around
        # (the console's action callables); it shares the channel's credentials and options.
        self.stub = pb_grpc.NodeServiceStub(self._channel)

    async def call(
        self,
        rpc: Unary[Req, Resp],
        request: Req | None = None,
        /,
        deadline_s: float | None = None,
        **fields: Any,
    ) -> Resp:
        """As NodeClient.call, awaited: raises CallError."""
        method, message, timeout = self._methods.unary(rpc, request, fields, deadline_s)
        try:
            data: bytes = await method(message, timeout=timeout)
        except grpc.RpcError as exc:
            raise call_error(self.target, rpc, exc) from None
        return decode_answer(self.target, rpc, data)

    async def stream(
        self,
        rpc: Stream[Req, Resp],
        request: Req | None = None,
        /,
        deadline_s: float | None = None,
        **fields: Any,
    ) -> AsyncIterator[Resp]:
        """A server stream; no deadline unless given (a link's streams live as long as it).

        Raises:
            CallError: as `call`, when the stream fails.
        """
        method, message = self._methods.stream(rpc, request, fields)
        answers = method(message, timeout=deadline_s)
        try:
            async for data in answers:
                yield decode_answer(self.target, rpc, data)
        except grpc.RpcError as exc:
            raise call_error(self.target, rpc, exc) from None
        finally:
            answers.cancel()

    async def close(self) -> None:
        await self._channel.close()

    async def __aenter__(self) -> AsyncNodeClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
