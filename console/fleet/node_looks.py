"""NodeLooks: one fact of each node, looked at again only for the nodes a frame changed.

A view that needs something of every node (the status line's hottest GPU, the people
list's process users) keeps it here instead of walking the whole fleet each time: at
10,000 GPUs such walks took 15-26 ms of a frame.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Generic, TypeVar

from console.fleet.model import Change, FleetModel, NodeRecord

Fact = TypeVar("Fact")


class NodeLooks(Generic[Fact]):
    def __init__(self, fleet: FleetModel, look: Callable[[NodeRecord], Fact]) -> None:
        self._fleet, self._look = fleet, look
        self._by_node = {node.target: look(node) for node in fleet}

    @property
    def by_node(self) -> Mapping[str, Fact]:
        return self._by_node

    def follow(self, changes: Mapping[str, Change]) -> None:
        """Look again at the nodes changed; at every node when one's GPUs changed."""
        if any(c is Change.STRUCTURE for c in changes.values()):
            self._by_node = {node.target: self._look(node) for node in self._fleet}
            return
        for target in changes:
            self._by_node[target] = self._look(self._fleet.node(target))
