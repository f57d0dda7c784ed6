"""MoveRepairer: finishes workload moves that were cut between their two steps.

A console that crashed (or lost a node) after submitting a moved workload on
its new node, before cancelling it on the old one, leaves two copies. Any open
console that may act on the node of the extra copy cancels it as soon as it
sees both (console/fleet/fleet_queue.py decides which), once per copy, so the
fleet queue holds the workload exactly once, but only when the copy proves to
be that move (console/fleet/move_proof.py); a workload that merely carries the
key is logged once and left alone. Looked at when the queues change, not every
frame.
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from console.connections.control_actions import ControlActions
from console.fleet.fleet_queue import interrupted_moves, qualified_id, unproven_moves
from console.fleet.model import Change, FleetModel
from console.fleet.updates import LinkState
from gpufleet.policy import Role

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
        self._doubted: set[tuple[str, str]] = set()  # copies that prove no move, logged once

    def on_fleet_changed(self, _changes: dict[str, Change]) -> None:
        control = self._fleet.live_control  # the fleet now, whatever moment is shown
        if control.version == self._version:
            return
        self._version = control.version
        host_of = {node.target: node.name for node in self._fleet}
        open_nodes = {
            node.target
            for node in self._fleet
            if node.identity is not None and node.identity.authenticated_by == "none"
        }
        repairs, conflicts = interrupted_moves(control.workloads(), host_of, open_nodes)
        self._log_unproven(host_of, open_nodes)
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

    def _log_unproven(self, host_of: dict[str, str], open_nodes: set[str]) -> None:
        for doubt in unproven_moves(self._fleet.live_control.workloads(), host_of, open_nodes):
            if doubt.copy.uid in self._doubted:
                continue
            self._doubted.add(doubt.copy.uid)
            copy = qualified_id(host_of.get(doubt.copy.target, doubt.copy.target), doubt.copy.id)
            source = qualified_id(
                host_of.get(doubt.source.target, doubt.source.target), doubt.source.id
            )
            log.warning("%s carries the move key of %s but is not its move (%s): left alone",
                        copy, source, doubt.why)  # fmt: skip

    def _may_act(self, target: str) -> bool:
        node = self._fleet.node(target)
        return (
            node.state is LinkState.CONNECTED
            and self._fleet.role_refusal(target, Role.OPERATOR, live=True) is None
        )
