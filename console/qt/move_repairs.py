"""MoveRepairer: finishes workload moves that were cut between their two steps.

A console that crashed (or lost a node) after submitting a moved workload on
its new node, before cancelling it on the old one, leaves two copies. Any open
console that may act on the node of the extra copy cancels it as soon as it
sees both (console/fleet/fleet_queue.py decides which), once per copy, so the
fleet queue holds the workload exactly once. Looked at when the queues change,
not every frame.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from console.connections.control_actions import ControlActions
from console.fleet.fleet_queue import interrupted_moves, qualified_id
from console.fleet.identity import Role
from console.fleet.model import Change, FleetModel
from console.fleet.updates import LinkState

log = logging.getLogger(__name__)


class MoveRepairer(QObject):
    # A move cut short after both copies started: a person must choose (words to show).
    conflict = Signal(str)

    def __init__(self, fleet: FleetModel, actions: ControlActions) -> None:
        super().__init__()
        self.setObjectName("moveRepairer")
        self._fleet, self._actions = fleet, actions
        self._version = -1
        self._asked: set[tuple[str, str]] = set()  # copies whose cancel we asked for
        self._told: set[tuple[str, str]] = set()  # conflicts said once

    def on_fleet_changed(self, _changes: dict[str, Change]) -> None:
        control = self._fleet.control
        if control.version == self._version:
            return
        self._version = control.version
        host_of = {node.target: node.name for node in self._fleet}
        repairs, conflicts = interrupted_moves(control.workloads(), host_of)
        for repair in repairs:
            row = repair.cancel
            if row.uid in self._asked or not self._may_act(row.target):
                continue
            self._asked.add(row.uid)
            name = host_of.get(row.target, row.target)
            log.info("finishing an interrupted move: cancel %s (%s)", qualified_id(name, row.id),
                     repair.why)  # fmt: skip
            self._actions.finish_move(repair, name)
        for both in conflicts:
            if both.copy.uid in self._told:
                continue
            self._told.add(both.copy.uid)
            source = qualified_id(
                host_of.get(both.source.target, both.source.target), both.source.id
            )
            copy = qualified_id(host_of.get(both.copy.target, both.copy.target), both.copy.id)
            self.conflict.emit(
                f"{source} and its moved copy {copy} both run: a move was cut short; "
                "cancel one of them"
            )

    def _may_act(self, target: str) -> bool:
        node = self._fleet.node(target)
        return (
            node.state is LinkState.CONNECTED
            and self._fleet.role_refusal(target, Role.OPERATOR) is None
        )
