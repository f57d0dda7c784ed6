"""Running one piece of work on each node at once, and what comes back: results and failures."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from console.terminal.link import CallFailed, Node, NodeLink
from gpufleet.client import calls
from gpufleet.client import messages as pb
from gpufleet.client.security import LinkSecurity

T = TypeVar("T")

# Exit codes scripts can rely on.
EXIT_OK = 0
EXIT_FAILED = 1  # a node refused or failed the request (status: a critical alert fires)
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


@dataclass
class Outcome(Generic[T]):
    results: list[tuple[Node, T]] = field(default_factory=list)  # in the order asked
    failures: list[CallFailed] = field(default_factory=list)

    def exit_code(self) -> int:
        if any(f.unreachable for f in self.failures):
            return EXIT_UNREACHABLE
        return EXIT_FAILED if self.failures else EXIT_OK


def on_each(
    nodes: Sequence[Node], security: LinkSecurity, work: Callable[[NodeLink], T]
) -> Outcome[T]:
    """`work` on every node in parallel (each call has its own deadline), in the order given."""

    def one(node: Node) -> T | CallFailed:
        link = NodeLink(node, security)
        try:
            return work(link)
        except CallFailed as exc:
            return exc
        finally:
            link.close()

    outcome: Outcome[T] = Outcome()
    with ThreadPoolExecutor(max(1, min(16, len(nodes))), "gpufleet-terminal") as pool:
        for node, result in zip(nodes, pool.map(one, nodes), strict=True):
            if isinstance(result, CallFailed):
                outcome.failures.append(result)
            else:
                outcome.results.append((node, result))
    return outcome


def survey(addresses: Sequence[str], security: LinkSecurity) -> Outcome[pb.Inventory]:
    """Each node's inventory, asked once per run: the results' nodes carry their host names.

    Messages name a node by its host name, never by its address; where two
    nodes of the run report the same host name, the address is added to tell
    them apart.
    """
    asked = on_each(
        [Node.unnamed(a) for a in addresses], security,
        lambda link: link.call(calls.GET_INVENTORY),
    )  # fmt: skip
    shared = Counter(inventory.hostname for _, inventory in asked.results)
    named: Outcome[pb.Inventory] = Outcome(failures=asked.failures)
    for node, inventory in asked.results:
        host = inventory.hostname
        name = (
            node.address if not host else host if shared[host] == 1 else f"{host} ({node.address})"
        )
        named.results.append((Node(node.address, name, host), inventory))
    return named


def on_fleet(
    surveyed: Outcome[pb.Inventory],
    security: LinkSecurity,
    work: Callable[[NodeLink, pb.Inventory], T],
) -> Outcome[T]:
    """`work` on every node that answered the survey; the survey's failures first."""
    inventories = {node.address: inventory for node, inventory in surveyed.results}
    outcome = on_each([n for n, _ in surveyed.results], security,
                      lambda link: work(link, inventories[link.target]))  # fmt: skip
    outcome.failures[:0] = surveyed.failures
    return outcome
