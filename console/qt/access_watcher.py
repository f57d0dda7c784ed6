"""AccessWatcher: says when what the console may do changed (a node connected, WhoAmI, denied).

Views that offer actions by role listen to `changed` rather than to every frame.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from console.fleet.identity import Identity
from console.fleet.model import Change, FleetModel
from console.fleet.updates import LinkState
from gpufleet.policy import Role

Signature = tuple[bool, tuple[tuple[str, LinkState, Identity | None], ...]]


class AccessWatcher(QObject):
    changed = Signal()
    # Why no connected node lets us act (acknowledge, submit, kill...); "" when some does.
    operatorRefusalChanged = Signal(str)
    # Whether some node takes us as admin (the audit log).
    adminChanged = Signal(bool)

    def __init__(self, fleet: FleetModel) -> None:
        super().__init__()
        self.setObjectName("accessWatcher")
        self._fleet = fleet
        self._signature: Signature = (False, ())
        self._held: dict[str, tuple[LinkState, Identity | None]] = {}  # as last signed

    def _facts(self, target: str) -> tuple[LinkState, Identity | None]:
        node = self._fleet.node(target)
        return node.state, node.identity

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        # Most frames change no node's link or identity: then nothing is looked at again
        # (the whole fleet's, every frame, at 1,250 nodes cost 0.8 ms).
        held = self._held
        if (
            self._signature[0] == self._fleet.replaying
            and not any(c is Change.STRUCTURE for c in changes.values())
            and all(held.get(t) == self._facts(t) for t in changes)
        ):
            return
        # While the past is shown nothing may change the fleet (FleetModel.role_refusal).
        nodes = tuple((n.target, n.state, n.identity) for n in self._fleet)
        self._held = {target: (state, identity) for target, state, identity in nodes}
        signature = (self._fleet.replaying, nodes)
        if signature != self._signature:
            self._signature = signature
            self.changed.emit()
            self.operatorRefusalChanged.emit(self._fleet.fleet_role_refusal(Role.OPERATOR) or "")
            self.adminChanged.emit(bool(self._fleet.targets_with_role(Role.ADMIN)))
