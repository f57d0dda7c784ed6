"""FleetItemModel: the fleet as a Qt tree, nodes at the top and their GPUs below."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt, Signal

from console.fleet.model import Change, FleetModel, NodeRecord
from console.fleet.staleness import Quiet
from console.fleet.updates import GpuSnapshot
from console.fleet.wall_clock import unix_now_ms
from console.qt import roles
from gpufleet.policy import Role
from gpufleet.v1.alert_severity import Severity

Index = QModelIndex | QPersistentModelIndex


def node_tooltip(node: NodeRecord, quiet: Quiet | None = None, now_ms: int | None = None) -> str:
    """The node, its link and who we are on it, until when.

    "signed in as alice (operator; teams ml) by jwt from https://sso…, expires in 6 h".
    """
    state = f"{node.state.value}: {node.state_detail}" if node.state_detail else node.state.value
    lines = [f"{node.name} ({node.target}): {state}"]
    if quiet is not None and quiet.stale:
        lines.append(f"no data for {quiet.silent_s:.0f} s (stale after {quiet.stale_after_s:g} s)")
    if node.identity is not None:
        when = unix_now_ms() if now_ms is None else now_ms
        lines.append(f"signed in as {node.identity.describe(when)}")
        lines.append(node.identity.kill_policy())
    return "\n".join(lines)


_NODE_ID = 0  # internalId of node rows; a GPU row stores its node's row + 1


class FleetItemModel(QAbstractItemModel):
    """Read-only adapter: views read it, the FramePump tells it what changed.

    A frame's changes are said once: `nodesChanged` with the rows of the nodes changed
    (whose GPU rows changed with them), and one dataChanged over the span of those node
    rows for Qt's views. A dataChanged per node and per node's GPUs cost 11 ms a frame at
    10,000 GPUs (1,250 nodes a second).
    """

    nodesChanged = Signal(object)  # sorted node rows (list[int]) changed this frame

    def __init__(self, fleet: FleetModel) -> None:
        super().__init__()
        self._fleet = fleet
        self._targets = [n.target for n in fleet]
        self._row_of = {t: row for row, t in enumerate(self._targets)}  # rows never move

    # -- structure -----------------------------------------------------------

    def index(self, row: int, column: int = 0, parent: Index = QModelIndex()) -> QModelIndex:  # noqa: B008
        if not self.hasIndex(row, column, parent):
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, column, _NODE_ID)
        return self.createIndex(row, column, parent.row() + 1)

    def parent(self, index: Index = QModelIndex()) -> QModelIndex:  # type: ignore[override]  # noqa: B008
        if not index.isValid() or index.internalId() == _NODE_ID:
            return QModelIndex()
        return self.createIndex(index.internalId() - 1, 0, _NODE_ID)

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        if not parent.isValid():
            return len(self._targets)
        if parent.internalId() == _NODE_ID:
            return self._node(parent.row()).gpu_count
        return 0

    def columnCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 1

    def _node(self, row: int) -> NodeRecord:
        return self._fleet.node(self._targets[row])

    def node_row(self, target: str) -> int | None:
        return self._row_of.get(target)

    def node_index(self, target: str) -> QModelIndex:
        return self.index(self._row_of[target], 0)

    def gpu_index(self, target: str, gpu: int) -> QModelIndex:
        return self.index(gpu, 0, self.node_index(target))

    # -- data ----------------------------------------------------------------

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid():
            return None
        if index.internalId() == _NODE_ID:
            return self._node_data(self._node(index.row()), role)
        return self._gpu_data(self._node(index.internalId() - 1), index.row(), role)

    def _node_data(self, node: NodeRecord, role: int) -> Any:
        if role == roles.ALERT_ROLE:
            return self._node_alert(node)
        if role == roles.OPERATOR_REFUSAL_ROLE:
            return self._fleet.role_refusal(node.target, Role.OPERATOR)
        if role == roles.QUIET_ROLE:
            return self._fleet.quiet(node.target)
        # One role at a time: the painter asks for several per node block and frame, and
        # a dict of every value built the tooltip's text (identity, expiry) for each ask.
        if role == Qt.ItemDataRole.DisplayRole:
            return node.name
        if role == roles.KIND_ROLE:
            return "node"
        if role == roles.TARGET_ROLE:
            return node.target
        if role == roles.LINK_STATE_ROLE:
            return node.state
        info = node.info
        if role == roles.MODEL_NAME_ROLE:
            return info.gpus[0].name if info and info.gpus else None
        if role == roles.SLURM_ROLE:
            return (info.slurm_state, info.slurm_reason) if info and info.slurm_state else None
        if role == Qt.ItemDataRole.ToolTipRole:
            return node_tooltip(node, self._fleet.quiet(node.target))
        return None

    def _gpu_data(self, node: NodeRecord, gpu: int, role: int) -> Any:
        snap = node.latest.get(gpu)
        if role == roles.TILE_ROLE:
            return self._tile(node, gpu, snap)
        if role == Qt.ItemDataRole.DisplayRole:
            return f"GPU {gpu}"
        if role == roles.KIND_ROLE:
            return "gpu"
        if role == roles.TARGET_ROLE:
            return node.target
        if role == roles.GPU_INDEX_ROLE:
            return gpu
        if role == roles.LINK_STATE_ROLE:
            return node.state
        if role == roles.QUIET_ROLE:
            return self._fleet.quiet(node.target)
        if role == roles.MODEL_NAME_ROLE:
            return node.info.gpus[gpu].name if node.info else None
        if role == roles.ALERT_ROLE:
            return self._fleet.alert_severity(node.target, gpu, unix_now_ms())
        if role == roles.OPERATOR_REFUSAL_ROLE:
            return self._fleet.role_refusal(node.target, Role.OPERATOR)
        if role == roles.ADMIN_REFUSAL_ROLE:
            return self._fleet.role_refusal(node.target, Role.ADMIN)
        if role == roles.RESERVATION_ROLE:
            return self._fleet.control.reservation_on(node.target, gpu, unix_now_ms())
        if role == roles.WORKLOAD_ROLE:
            return self._fleet.control.running_on(node.target, gpu)
        if snap is None:
            return None
        if role == roles.METRIC_ROLE:
            return node.row(gpu)
        if role == roles.HEALTH_ROLE:
            return snap.health
        if role == roles.CONDITION_ROLE:
            return snap.condition
        if role == roles.PLACEMENT_ROLE:
            jobs = tuple(dict.fromkeys(p.slurm_job_id for p in snap.processes if p.slurm_job_id))
            boxes = tuple(dict.fromkeys(p.container_id for p in snap.processes if p.container_id))
            return jobs, boxes
        return None

    def _tile(self, node: NodeRecord, gpu: int, snap: GpuSnapshot | None) -> roles.TileData:
        now_ms, target, control = unix_now_ms(), node.target, self._fleet.control
        return roles.TileData(
            None if snap is None else snap.health,
            None if snap is None else node.row(gpu),
            None if snap is None else snap.condition,
            control.reservation_on(target, gpu, now_ms),
            control.running_on(target, gpu),
            self._fleet.alert_severity(target, gpu, now_ms),
        )

    def _node_alert(self, node: NodeRecord) -> Severity | None:
        now_ms = unix_now_ms()
        found = [self._fleet.alert_severity(node.target, g, now_ms) for g in range(node.gpu_count)]
        found.append(self._fleet.alert_severity(node.target, None, now_ms))
        return max((s for s in found if s is not None), default=None)

    # -- change notification -------------------------------------------------

    def add_node(self, target: str) -> None:
        self.add_nodes([target])

    def add_nodes(self, targets: Iterable[str]) -> None:
        """Nodes not watched yet, in one insertion: the views follow once, not per node
        (1,250 nodes, one at a time, cost a starting console 1.2 s)."""
        new = [t for t in dict.fromkeys(targets) if t not in self._row_of]
        if not new:
            return
        for target in new:
            self._fleet.add_node(target)
        row = len(self._targets)
        self.beginInsertRows(QModelIndex(), row, row + len(new) - 1)
        self._targets.extend(new)
        self._row_of.update((t, r) for r, t in enumerate(new, start=row))
        self.endInsertRows()

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        if any(c is Change.STRUCTURE for c in changes.values()):
            self.beginResetModel()
            self.endResetModel()
            return
        rows = sorted(self._row_of[t] for t in changes if t in self._row_of)
        if not rows:
            return
        self.nodesChanged.emit(rows)
        self.dataChanged.emit(self.index(rows[0], 0), self.index(rows[-1], 0))
