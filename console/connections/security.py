"""How a node link authenticates: TLS (optionally mutual) and the bearer token.

With TLS, the token travels as gRPC call credentials, which gRPC sends only
over a secure channel. Over plaintext (a loopback daemon) an interceptor adds
the same `authorization: Bearer <token>` metadata to every call and stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio

from console.connections.channel import CHANNEL_OPTIONS


class BearerToken:
    """A token shared by every link of a profile, swapped in place when refreshed.

    Read by each call as it starts (the network thread), replaced by the
    refresher there too; a str swap is atomic, so no lock is needed.
    """

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        return self._value

    def replace(self, value: str) -> bool:
        """Take a new token; True when it differs from the one held."""
        changed, self._value = value != self._value, value
        return changed

    def __repr__(self) -> str:  # never the token
        return "BearerToken(set)"


@dataclass(frozen=True)
class LinkSecurity:
    token: str | None = None
    root_ca: bytes | None = None  # PEM; TLS when set
    client_key: bytes | None = None  # PEM; mutual TLS with client_chain
    client_chain: bytes | None = None
    # A token that changes (token_command): every call sends its current value.
    bearer: BearerToken | None = None
    # Fetches a fresh token (blocking: run off the event loop); None: it cannot be refreshed.
    refresh: Callable[[], str] | None = field(default=None, compare=False)

    @property
    def tls(self) -> bool:
        return self.root_ca is not None

    def current_token(self) -> str | None:
        return self.bearer.value if self.bearer is not None else self.token

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
        if security.bearer is not None:
            # Asked for at each call, so a refreshed token needs no new channel.
            call = grpc.metadata_call_credentials(_BearerPlugin(security.bearer), "gpufleet")
            credentials = grpc.composite_channel_credentials(credentials, call)
        elif security.token:
            credentials = grpc.composite_channel_credentials(
                credentials, grpc.access_token_call_credentials(security.token)
            )
        return grpc.aio.secure_channel(target, credentials, options=CHANNEL_OPTIONS)
    token = security.current_token
    interceptors: list[grpc.aio.ClientInterceptor] | None = (
        [BearerUnary(token), BearerStream(token)] if token() else None
    )
    return grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS, interceptors=interceptors)


class _BearerPlugin(grpc.AuthMetadataPlugin):
    """`authorization: Bearer <the current token>` for a TLS channel's every call."""

    def __init__(self, bearer: BearerToken) -> None:
        self._bearer = bearer

    def __call__(
        self, context: grpc.AuthMetadataContext, callback: grpc.AuthMetadataPluginCallback
    ) -> None:
        callback((("authorization", f"Bearer {self._bearer.value}"),), None)


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

    def __init__(self, token: Callable[[], str | None]) -> None:
        self._token = token  # read at each call: a refreshed token takes effect at once

    async def intercept_unary_unary(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_token(details, self._token() or ""), request)


class BearerStream(grpc.aio.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer <token>` to every server stream."""

    def __init__(self, token: Callable[[], str | None]) -> None:
        self._token = token

    async def intercept_unary_stream(
        self, continuation: Callable[..., Any], details: grpc.aio.ClientCallDetails, request: Any
    ) -> Any:
        return await continuation(_with_token(details, self._token() or ""), request)
