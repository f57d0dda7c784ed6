"""What a failed call says: the node's address, the call, the status code and the reason."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message

from gpufleet.client.calls import Call

Resp = TypeVar("Resp", bound=Message)

# A node that cannot be reached (down, wrong address, deadline): scripts tell it from a refusal.
UNREACHABLE_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
)  # fmt: skip


@dataclass(frozen=True)
class CallError(Exception):
    """A call to `address` failed: refused, failed, unreachable, or answered with garbage.

    `details` is the node's own reason (or gRPC's, where the node never answered).
    """

    address: str
    method: str
    code: grpc.StatusCode
    details: str

    @property
    def unreachable(self) -> bool:
        return self.code in UNREACHABLE_CODES

    @property
    def reason(self) -> str:
        """'CODE: details', as every gpufleet command and the console show a refusal."""
        return f"{self.code.name}: {self.details}"

    def __str__(self) -> str:
        return f"{self.address}: {self.method}: {self.reason}"


def call_error(address: str, rpc: Call[Any, Any], exc: grpc.RpcError) -> CallError:
    """`exc` (a grpc.RpcError, sync or aio) as a CallError naming `address` and the call."""
    code: grpc.StatusCode = exc.code()  # type: ignore[attr-defined]
    details: str = exc.details() or ""  # type: ignore[attr-defined]
    return CallError(address, rpc.method, code, details)


def decode_answer(address: str, rpc: Call[Any, Resp], data: bytes) -> Resp:
    """The answer's bytes as the call's message; garbage is a CallError, not a crash.

    Decoded here rather than by grpc's deserializer hook, which logs the failure and,
    on the async face, hands the caller no error at all.

    Raises:
        CallError: INTERNAL, naming the address, the call and the message expected.
    """
    try:
        answer: Resp = rpc.response.FromString(data)
    except DecodeError:
        # A peer that is not a gpufleet daemon (or speaks another contract) answered.
        details = (
            f"the answer to {rpc.method} is not a {rpc.response.DESCRIPTOR.full_name} "
            f"(is {address} a gpufleet node daemon?)"
        )
        raise CallError(address, rpc.method, grpc.StatusCode.INTERNAL, details) from None
    return answer
