"""The context menu of a GPU tile: release its reservation, cancel the workload on it."""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QModelIndex
from PySide6.QtWidgets import QMenu, QWidget

from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.placement import clock_text, gpus_text
from console.qt import roles


def tile_menu(
    parent: QWidget,
    gpu: QModelIndex,
    on_release: Callable[[ReservationRow], None],
    on_cancel: Callable[[WorkloadRow], None],
) -> QMenu:
    """A menu of what can be done to this tile (empty when nothing can)."""
    menu = QMenu(parent)
    menu.setObjectName("tileMenu")
    refusal: str | None = gpu.data(roles.OPERATOR_REFUSAL_ROLE)
    suffix = f" ({refusal})" if refusal else ""
    reservation: ReservationRow | None = gpu.data(roles.RESERVATION_ROLE)
    if reservation is not None:
        until = clock_text(reservation.until_unix_ms, int(time.time() * 1000))
        text = (f"Release reservation of {gpus_text(reservation.gpu_indices)} "
                f"for {reservation.holder} (until {until})")  # fmt: skip
        action = menu.addAction(text + suffix)
        action.setEnabled(refusal is None)
        action.triggered.connect(lambda: on_release(reservation))
    workload: WorkloadRow | None = gpu.data(roles.WORKLOAD_ROLE)
    if workload is not None:
        action = menu.addAction(f"Cancel workload {workload.label}{suffix}")
        action.setEnabled(refusal is None)
        action.triggered.connect(lambda: on_cancel(workload))
    return menu
