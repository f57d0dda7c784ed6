"""The context menu of a GPU tile: release its reservation, cancel the workload on it,
drain it from placement (or return it), mark it repaired."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QMenu, QWidget

from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.health import GpuCondition, HealthState
from console.fleet.placement import clock_text, gpus_text
from console.qt import roles

# (target, GPU, drain: True to take it out of placement, False to return it)
DrainCallback = Callable[[str, int, bool], None]
ClearCallback = Callable[[str, int], None]


def tile_menu(
    parent: QWidget,
    gpu: QModelIndex,
    on_release: Callable[[ReservationRow, int], None],
    on_cancel: Callable[[WorkloadRow], None],
    on_drain: DrainCallback | None = None,
    on_clear: ClearCallback | None = None,
) -> QMenu:
    """A menu of what can be done to this tile (empty when nothing can)."""
    menu = QMenu(parent)
    menu.setObjectName("tileMenu")
    refusal: str | None = gpu.data(roles.OPERATOR_REFUSAL_ROLE)
    suffix = f" ({refusal})" if refusal else ""
    reservation: ReservationRow | None = gpu.data(roles.RESERVATION_ROLE)
    if reservation is not None:
        # This GPU only, after a question (ReleasePrompts): the rest of a multi-GPU
        # reservation stays; the Reservations panel releases it all.
        index: int = gpu.data(roles.GPU_INDEX_ROLE)
        until = clock_text(reservation.until_unix_ms, int(time.time() * 1000))
        gpus = reservation.gpu_indices
        of = f" (of {gpus_text(gpus)})" if len(gpus) > 1 else ""
        text = f"Release reservation of GPU {index}{of} for {reservation.holder} (until {until})…"
        action = menu.addAction(text + suffix)
        action.setEnabled(refusal is None)
        action.triggered.connect(lambda: on_release(reservation, index))
    workload: WorkloadRow | None = gpu.data(roles.WORKLOAD_ROLE)
    if workload is not None:
        action = menu.addAction(f"Cancel workload {workload.label}{suffix}")
        action.setEnabled(refusal is None)
        action.triggered.connect(lambda: on_cancel(workload))
    if on_drain is not None and on_clear is not None:
        _health_actions(menu, gpu, on_drain, on_clear)
    return menu


def _health_actions(
    menu: QMenu, gpu: QModelIndex, on_drain: DrainCallback, on_clear: ClearCallback
) -> None:
    """Drain or return (operator); mark repaired (admin) when the node judged something wrong.

    Only for a node that judges health: a daemon without it has no condition to show.
    """
    condition: GpuCondition | None = gpu.data(roles.CONDITION_ROLE)
    if condition is None:
        return
    target, index = gpu.data(roles.TARGET_ROLE), gpu.data(roles.GPU_INDEX_ROLE)
    if not menu.isEmpty():
        menu.addSeparator()
    operator: str | None = gpu.data(roles.OPERATOR_REFUSAL_ROLE)
    suffix = f" ({operator})" if operator else ""
    if condition.drained:
        action = menu.addAction(f"Return to placement{suffix}")
        action.triggered.connect(lambda: on_drain(target, index, False))
    else:
        action = menu.addAction(f"Drain from placement…{suffix}")
        action.triggered.connect(lambda: on_drain(target, index, True))
    action.setEnabled(operator is None)
    if condition.reasons or condition.state is not HealthState.HEALTHY:
        admin: str | None = gpu.data(roles.ADMIN_REFUSAL_ROLE)
        clear = menu.addAction("Mark repaired (clear health)…" + (f" ({admin})" if admin else ""))
        clear.setEnabled(admin is None)
        clear.triggered.connect(lambda: on_clear(target, index))
