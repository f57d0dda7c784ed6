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
        self._methods = ChannelMethods()
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
        """`rpc` with `request` (or one made of `fields`), within its deadline.

        Raises:
            CallError: the node refused, failed, could not be reached or answered garbage.
        """
        message = request if request is not None else rpc.request(**fields)
        method = self._methods.get(rpc, self._channel.unary_unary)
        try:
            data: bytes = await method(
                message, timeout=rpc.deadline_s if deadline_s is None else deadline_s
            )
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
        message = request if request is not None else rpc.request(**fields)
        answers = self._methods.get(rpc, self._channel.unary_stream)(message, timeout=deadline_s)
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
