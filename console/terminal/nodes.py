"""NODE on a command line: a HOST:PORT, or a host name looked up among the profile's nodes.

A host name is matched against what each node's inventory reports (exact,
case-insensitive), then against its short form (before the first dot) and
the host part of the profile's addresses. A name no node carries, or several
carry, is a usage error that lists the nodes; a name that may belong to a node
that did not answer is that node's failure (unreachable: exit 3).
"""

from __future__ import annotations

import argparse
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from console.terminal.fleet_calls import Outcome, survey
from console.terminal.link import CallFailed, Node, UsageProblem, profile_nodes
from gpufleet.client import messages as pb
from gpufleet.client.security import LinkSecurity


def is_address(wanted: str) -> bool:
    """HOST:PORT (or [v6]:PORT): host names never hold a colon."""
    return ":" in wanted


def pick_node(wanted: str, profile: Sequence[str], security: LinkSecurity) -> Node:
    """The node `wanted` names, with its host name (the profile's nodes are asked for theirs).

    Raises:
        UsageProblem: no node of the profile is called that, or several are.
        CallFailed: the node (or every node it might be) did not answer.
    """
    return pick_from(wanted, survey(lookup_among(wanted, profile), security))


def lookup_among(wanted: str, profile: Sequence[str]) -> list[str]:
    """The addresses to survey to find `wanted`: itself, or the profile's nodes.

    Raises:
        UsageProblem: a host name, and the profile lists no nodes.
    """
    if is_address(wanted):
        return [wanted]
    if not profile:
        raise UsageProblem(
            f"NODE {wanted!r} is not HOST:PORT, and the profile lists no nodes to find a host "
            'name among (nodes = ["host:50051"] in the console settings)'
        )
    return list(profile)


def pick_from(wanted: str, surveyed: Outcome[pb.Inventory]) -> Node:
    """The node `wanted` names among those surveyed (an address must be one of them).

    Raises:
        UsageProblem: no node is called that, or several are.
        CallFailed: the node (or every node it might be) did not answer.
    """
    answered = [node for node, _ in surveyed.results]
    if is_address(wanted):
        for node in answered:
            if node.address == wanted:
                return node
        raise next(f for f in surveyed.failures if f.address == wanted)
    matches = _matches(wanted, answered, surveyed.failures)
    if len(matches) == 1:
        if isinstance(matches[0], CallFailed):
            raise matches[0]
        return matches[0]
    known = _listing(answered, surveyed.failures)
    if matches:
        raise UsageProblem(f"NODE {wanted!r} names {len(matches)} nodes; name one by HOST:PORT "
                           f"(nodes: {known})")  # fmt: skip
    if surveyed.failures:
        raise CallFailed(
            wanted, f"no node that answered is named {wanted!r}; it may be one that did not "
            f"(nodes: {known})", any(f.unreachable for f in surveyed.failures),
        )  # fmt: skip
    raise UsageProblem(f"no node is named {wanted!r} (nodes: {known})")


@dataclass(frozen=True)
class Chosen:
    """The nodes a command runs on, surveyed, and their order on the command line."""

    surveyed: Outcome[pb.Inventory]
    order: list[str]  # addresses (a failed name: "") in the order named
    security: LinkSecurity


def choose_nodes(args: argparse.Namespace) -> Chosen:
    """The nodes the --node flags name (HOST:PORT or host names), else the profile's.

    Each is asked for its inventory once; a node named twice is asked once.

    Raises:
        UsageProblem: bad settings, no nodes at all, or a name no node (or several) carries.
    """
    profile, security = profile_nodes(args)
    wanted = list(dict.fromkeys(args.node))
    if not wanted and not profile:
        raise UsageProblem(
            "no nodes; pass --node HOST:PORT (or a host name of the profile's nodes) or list "
            'them in the console settings (nodes = ["host:50051"])'
        )
    if not wanted:
        surveyed = survey(profile, security)
        return Chosen(surveyed, list(profile), security)
    asked = [w for w in wanted if is_address(w)]
    for name in (w for w in wanted if not is_address(w)):
        asked += lookup_among(name, profile)
    surveyed = survey(list(dict.fromkeys(asked)), security)
    inventories = {node.address: inventory for node, inventory in surveyed.results}
    chosen: Outcome[pb.Inventory] = Outcome()
    order: list[str] = []
    for name in wanted:
        try:
            node = pick_from(name, surveyed)
        except CallFailed as failed:
            if failed not in chosen.failures:
                chosen.failures.append(failed)
                order.append(failed.address)
            continue
        if node.address not in order:
            chosen.results.append((node, inventories[node.address]))
            order.append(node.address)
    return Chosen(chosen, order, security)


def _matches(
    wanted: str, answered: Sequence[Node], failed: Sequence[CallFailed]
) -> list[Node | CallFailed]:
    name = wanted.casefold()
    exact: list[Node | CallFailed] = [n for n in answered if n.host.casefold() == name]
    if exact:
        return exact
    loose: list[Node | CallFailed] = [
        n for n in answered if name in (_short(n.host), _address_host(n.address))
    ]
    return loose + [f for f in failed if _address_host(f.address) == name]


def _short(host: str) -> str:
    """gpu-node-03.example.com → gpu-node-03; an IP address stays whole."""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return host.split(".")[0].casefold()
    return host.casefold()


def _address_host(address: str) -> str:
    return address.rsplit(":", 1)[0].strip("[]").casefold()


def _listing(answered: Sequence[Node], failed: Sequence[CallFailed]) -> str:
    names = [f"{n.host or '?'} ({n.address})" for n in answered]
    names += [f"{f.address} ({'unreachable' if f.unreachable else 'refused'})" for f in failed]
    return ", ".join(names) or "none"
