"""Talking to the profile's nodes from a terminal: targets, credentials, one call each.

Nodes come from `--node HOST:PORT` flags, else from the console settings
profile, which also names the CA, the client certificate and where the token
is (console/credentials.py). Every call has a deadline, so a node that does not
answer is reported as unreachable, never waited on.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from console.connections.security import LinkSecurity
from console.credentials import CredentialError, find_token, link_security
from console.settings import SettingsError, load_settings
from gpufleet.v1 import node_pb2_grpc as pb_grpc

CALL_DEADLINE_S = 5.0
# A node that cannot be reached (down, wrong address, deadline): scripts tell it from a refusal.
UNREACHABLE_CODES = frozenset(
    {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}
)  # fmt: skip

T = TypeVar("T")


class UsageProblem(Exception):
    """The command line or the settings are wrong: exit 2."""


@dataclass(frozen=True)
class CallFailed(Exception):
    """A node did not do what was asked; `unreachable` when it could not be reached at all.

    `node` names it as messages do (its host name once known); `address` is its HOST:PORT.
    """

    node: str
    reason: str
    unreachable: bool
    address: str = ""

    def __str__(self) -> str:
        return f"{self.node}: {self.reason}"


@dataclass(frozen=True)
class Node:
    """A node of this run: its HOST:PORT, and the name messages call it by.

    `name` is the inventory's host name (with the address where two nodes of the
    run share one), or the address until the node has answered.
    """

    address: str
    name: str
    host: str = ""  # the inventory's host name, as silences match it; "" until known

    @classmethod
    def unnamed(cls, address: str) -> Node:
        return cls(address, address)


def add_node_arguments(parser: argparse.ArgumentParser, node_flag: str | None = "--node") -> None:
    """--config, --profile, --json, and `node_flag` for the nodes (None: one NODE argument)."""
    arg = parser.add_argument
    if node_flag is not None:
        arg(node_flag, dest="node", action="append", default=[], metavar="NODE",
            help="a node: HOST:PORT, or the host name of one of the profile's nodes; repeat "
            "for more (default: the profile's nodes)")  # fmt: skip
    else:
        parser.set_defaults(node=[])
    arg("--config", type=Path, metavar="FILE", help="console settings TOML")
    arg("--profile", metavar="NAME", help="the fleet profile (default: the settings' default)")
    arg("--json", action="store_true", help="print JSON for scripts instead of a table")


def profile_nodes(args: argparse.Namespace) -> tuple[list[str], LinkSecurity]:
    """The profile's nodes (maybe none) and how to reach them.

    Raises:
        UsageProblem: bad settings or unreadable certificates.
    """
    try:
        profile = load_settings(args.config).profile(args.profile)
        security = link_security(profile, find_token(profile))
    except (SettingsError, CredentialError) as exc:
        raise UsageProblem(str(exc)) from exc
    return list(profile.nodes), security


class NodeLink:
    """A blocking channel to one node; `call` runs one RPC with the deadline and token."""

    def __init__(self, node: Node, security: LinkSecurity) -> None:
        self.node = node
        self.target = target = node.address
        self._metadata: tuple[tuple[str, str], ...] = ()
        token = security.current_token()
        if security.tls:
            credentials = grpc.ssl_channel_credentials(
                security.root_ca, security.client_key, security.client_chain
            )
            if token:  # call credentials: gRPC sends them over TLS only
                credentials = grpc.composite_channel_credentials(
                    credentials, grpc.access_token_call_credentials(token)
                )
            self._channel = grpc.secure_channel(target, credentials)
        else:
            self._channel = grpc.insecure_channel(target)
            if token:
                self._metadata = (("authorization", f"Bearer {token}"),)
        self.stub = pb_grpc.NodeServiceStub(self._channel)

    def call(
        self, method: Callable[..., T], request: object, deadline_s: float = CALL_DEADLINE_S
    ) -> T:
        """`method(request)`, e.g. `link.call(link.stub.ListAlerts, ...)`.

        Raises:
            CallFailed: the node refused, failed or could not be reached.
        """
        try:
            return method(request, timeout=deadline_s, metadata=self._metadata)
        except grpc.RpcError as exc:
            raise failure(self.node, exc) from None

    def stream(
        self,
        method: Callable[..., Iterator[T]],
        request: object,
        deadline_s: float = CALL_DEADLINE_S,
    ) -> Iterator[T]:
        """A server stream, cancelled at the deadline or when left; errors as `CallFailed`."""
        responses: Any = method(request, timeout=deadline_s, metadata=self._metadata)
        try:
            yield from responses
        except grpc.RpcError as exc:
            raise failure(self.node, exc) from None
        finally:
            responses.cancel()

    def close(self) -> None:
        self._channel.close()

    def failed(self, reason: str, unreachable: bool = False) -> CallFailed:
        """A failure of this node that is not a gRPC error (an answer without what was asked)."""
        return CallFailed(self.node.name, reason, unreachable, self.node.address)


def failure(node: Node, exc: grpc.RpcError) -> CallFailed:
    code: grpc.StatusCode = exc.code()  # type: ignore[attr-defined]
    details: str = exc.details() or ""  # type: ignore[attr-defined]
    if code in UNREACHABLE_CODES:
        return CallFailed(node.name, f"unreachable ({code.name}: {details})", True, node.address)
    return CallFailed(node.name, f"{code.name}: {details}", False, node.address)
