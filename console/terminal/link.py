"""Talking to the profile's nodes from a terminal: targets, credentials, one call each.

Nodes come from `--node HOST:PORT` flags, else from the console settings
profile, which also names the CA, the client certificate and where the token
is (console/credentials.py). Calls go through the shared client's blocking face
(gpufleet.client): every call has a deadline, so a node that does not answer
is reported as unreachable, never waited on.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from google.protobuf.message import Message

from console.credentials import CredentialError, find_token, link_security
from console.settings import SettingsError, load_settings
from gpufleet.client.blocking import NodeClient
from gpufleet.client.calls import Stream, Unary
from gpufleet.client.channel import CALL_DEADLINE_S
from gpufleet.client.errors import CallError
from gpufleet.client.security import LinkSecurity

Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


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
    """One node of this run over the shared client's blocking face (gpufleet.client).

    `call` runs one RPC of the call table with its deadline and the token; every
    failure is a `CallFailed` that names the node as messages do.
    """

    def __init__(self, node: Node, security: LinkSecurity) -> None:
        self.node = node
        self.target = node.address
        self._client = NodeClient(node.address, security)

    def call(
        self,
        rpc: Unary[Req, Resp],
        request: Req | None = None,
        /,
        deadline_s: float = CALL_DEADLINE_S,
        **fields: Any,
    ) -> Resp:
        """`rpc` with `request` (or one made of `fields`), e.g. `link.call(LIST_ALERTS)`.

        Raises:
            CallFailed: the node refused, failed or could not be reached.
        """
        try:
            return self._client.call(rpc, request, deadline_s=deadline_s, **fields)
        except CallError as exc:
            raise failure(self.node, exc) from None

    def stream(
        self,
        rpc: Stream[Req, Resp],
        request: Req | None = None,
        /,
        deadline_s: float = CALL_DEADLINE_S,
        **fields: Any,
    ) -> Iterator[Resp]:
        """A server stream, cancelled at the deadline or when left; errors as `CallFailed`."""
        try:
            yield from self._client.stream(rpc, request, deadline_s=deadline_s, **fields)
        except CallError as exc:
            raise failure(self.node, exc) from None

    def close(self) -> None:
        self._client.close()

    def failed(self, reason: str, unreachable: bool = False) -> CallFailed:
        """A failure of this node that is not a gRPC error (an answer without what was asked)."""
        return CallFailed(self.node.name, reason, unreachable, self.node.address)


def failure(node: Node, exc: CallError) -> CallFailed:
    if exc.unreachable:
        return CallFailed(node.name, f"unreachable ({exc.reason})", True, node.address)
    return CallFailed(node.name, exc.reason, False, node.address)
