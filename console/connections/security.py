"""How a node link authenticates: TLS (optionally mutual) and the bearer token.

With TLS, the token travels as gRPC call credentials, which gRPC sends only
over a secure channel. Over plaintext (a loopback daemon) an interceptor adds
the same `authorization: Bearer <token>` metadata to every call and stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio

from console.connections.channel import CHANNEL_OPTIONS


@dataclass(frozen=True)
class LinkSecurity:
    token: str | None = None
    root_ca: bytes | None = None  # PEM; TLS when set
    client_key: bytes | None = None  # PEM; mutual TLS with client_chain
    client_chain: bytes | None = None

    @property
    def tls(self) -> bool:
        return self.root_ca is not None

    def __repr__(self) -> str:  # never the token, never the key
        token = "set" if self.token else "none"
        return (
            f"LinkSecurity(tls={self.tls}, mutual={self.client_chain is not None}, token={token})"
        )


def open_channel(target: str, security: LinkSecurity) -> grpc.aio.Channel:
    """A channel to `target` with the security asked for."""
    if security.tls:
        credentials = grpc.ssl_channel_credentials(
            security.root_ca, security.client_key, security.client_chain
        )
        if security.token:
            credentials = grpc.composite_channel_credentials(
                credentials, grpc.access_token_call_credentials(security.token)
            )
        return grpc.aio.secure_channel(target, credentials, options=CHANNEL_OPTIONS)
    token = security.token
    interceptors: list[grpc.aio.ClientInterceptor] | None = (
        [BearerUnary(token), BearerStream(token)] if token else None
    )
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=interceptors)


def _with_token(details: grpc.aio.ClientCallDetails, token: str) -> grpc.aio.ClientCallDetails:
    metadata = grpc.aio.Metadata(
        *tuple(details.metadata or ()), ("authorization", f"Bearer {token}")
    )
    return grpc.aio.ClientCallDetails(
        details.method, details.timeout, metadata, details.credentials, details.wait_for_ready
    )


# Two classes, not one with both bases: grpc.aio files an interceptor under the
# first kind it is an instance of, so one object would never see the streams.
class BearerUnary(grpc.aio.UnaryUnaryClientInterceptor):
    """Adds `authorization: Bearer <token>` to every unary call."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_token(details, self._token), request)


class BearerStream(grpc.aio.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every server stream."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_token(details, self._token), request)
