"""Channels to a node: the options, TLS and the token, one way for both faces.

With TLS, the token travels as gRPC call credentials, which gRPC sends only
over a secure channel, read at each call (a refreshed token needs no new
channel). Over plaintext (a loopback daemon) the same `authorization: Bearer
<token>` metadata is added to every call and stream: by an interceptor on the
async face, per call on the blocking face.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio

from gpufleet.client.security import BearerToken, LinkSecurity

# Must agree with the daemon (node_daemon/server.py SERVER_OPTIONS): the daemon
# allows a ping every 1 s; we ping every 2 s and give up on a link that does not
# answer within 1.5 s, so a node that stopped answering (hung, SIGSTOPped, its
# link cut silently) is shown not connected within ~3.5 s. gRPC core (1.85)
# enforces the wait through ping_timeout_ms (default a minute: without it a
# stopped node went unnoticed ~70 s). A daemon that is only busy still answers:
# gRPC's core answers pings without the Python GIL.
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.keepalive_time_ms", 2_000),
    ("grpc.keepalive_timeout_ms", 1_500),
    ("grpc.http2.ping_timeout_ms", 1_500),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 4 * 1024 * 1024),
]
# Deadline of every unary call unless the call table or the caller says otherwise.
CALL_DEADLINE_S = 5.0
Metadata = tuple[tuple[str, str], ...]


def bearer_metadata(token: str | None) -> Metadata:
    """Per-call metadata: the bearer token, when there is one."""
    return (("authorization", f"Bearer {token}"),) if token else ()


def _tls_credentials(security: LinkSecurity) -> grpc.ChannelCredentials:
    credentials = grpc.ssl_channel_credentials(
        security.root_ca, security.client_key, security.client_chain
    )
    if security.bearer is not None:
        # Asked for at each call, so a refreshed token needs no new channel.
        call = grpc.metadata_call_credentials(_BearerPlugin(security.bearer), "gpufleet")
        return grpc.composite_channel_credentials(credentials, call)
    if security.token:
        return grpc.composite_channel_credentials(
            credentials, grpc.access_token_call_credentials(security.token)
        )
    return credentials


def open_blocking_channel(target: str, security: LinkSecurity) -> grpc.Channel:
    """A blocking channel to `target`; over plaintext the caller adds `plaintext_metadata`."""
    if security.tls:
        return grpc.secure_channel(target, _tls_credentials(security), options=CHANNEL_OPTIONS)
    return grpc.insecure_channel(target, options=CHANNEL_OPTIONS)


def plaintext_metadata(security: LinkSecurity) -> Metadata:
    """What a plaintext call carries itself (TLS calls carry the token as credentials)."""
    return () if security.tls else bearer_metadata(security.current_token())


def open_channel(target: str, security: LinkSecurity) -> grpc.aio.Channel:
    """An asyncio channel to `target` with the security asked for."""
    if security.tls:
        return grpc.aio.secure_channel(target, _tls_credentials(security), options=CHANNEL_OPTIONS)
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
