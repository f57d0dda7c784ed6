"""The Slurm queue in the Workloads tab: the cluster's pending and running jobs, filterable.

Read live (SlurmWatch: every 5 s while this panel is on screen). A pending job
drags onto a node's tile: Slurm is asked to run it there. Below, Slurm's
reservations (released here) and the drain zone (a node dragged onto it by its
block's title line is drained in Slurm, after a reason).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QHideEvent, QShowEvent
from PySide6.QtWidgets import (
    QAbstractItemView,
    QLabel,
    QLineEdit,
    QPushButton,
    QTableView,
    QWidget,
)

from console.fleet.slurm_view import SlurmView
from console.qt.row_table import SortKeyProxy
from console.qt.slurm_job_model import SlurmJobTableModel
from console.qt.slurm_reservation_model import RESERVATION_ROLE, SlurmReservationTableModel
from console.qt.slurm_watch import SlurmWatch
from console.views.common.row_table_panel import bar_over_table, set_up_row_table
from console.views.slurm.drain_zone import DrainJudge, DrainZone


class SlurmJobsPanel(QWidget):
    releaseRequested = Signal(object)  # SlurmReservation, to confirm and release

    def __init__(
        self, watch: SlurmWatch, drain_judge: DrainJudge, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("slurmJobsPanel")
        self._watch = watch
        self.model = SlurmJobTableModel()
        self.proxy = SortKeyProxy()
        self.proxy.setSourceModel(self.model)
        self.filter = QLineEdit()
        self.filter.setObjectName("slurmJobFilter")
        self.filter.setPlaceholderText("Filter Slurm jobs (user, account, partition, state…)")
        self.filter.setClearButtonEnabled(True)
        self.filter.textChanged.connect(self.proxy.setFilterFixedString)
        self.status = QLabel("Slurm: reading…")
        self.status.setObjectName("slurmStatus")
        self.table = QTableView()
        self.table.setObjectName("slurmJobTable")
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        set_up_row_table(self.table)
        self.table.setDragEnabled(True)
        self.table.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        layout = bar_over_table(self, [(self.filter, 1), self.status], self.table)
        # Slurm's reservations (a holder dropped on Slurm nodes makes one), released here.
        self.reservations = SlurmReservationTableModel()
        self.reservation_table = QTableView()
        self.reservation_table.setObjectName("slurmReservationTable")
        self.reservation_table.setModel(self.reservations)
        set_up_row_table(self.reservation_table)
        self.release = QPushButton("Release reservation…")
        self.release.setObjectName("slurmRelease")
        self.release.clicked.connect(self._on_release_clicked)
        # The queue gets most of the height; a few reservations fit below it.
        layout.setStretchFactor(self.table, 3)
        layout.addWidget(self.reservation_table, 1)
        layout.addWidget(self.release)
        self.drain_zone = DrainZone(drain_judge)
        layout.addWidget(self.drain_zone)
        watch.changed.connect(self.on_view_changed)

    def _on_release_clicked(self) -> None:
        index = self.reservation_table.currentIndex()
        if index.isValid():
            self.releaseRequested.emit(index.data(RESERVATION_ROLE))

    def on_view_changed(self, view: SlurmView) -> None:
        self.model.on_view_changed(view)
        self.reservations.on_view_changed(view)
        queue = view.queue()
        pending = sum(1 for j in queue if j.pending)
        when = view.read_at.astimezone().strftime("%H:%M:%S") if view.read_at else "never"
        text = f"Slurm: {pending} pending, {len(queue) - pending} running · read {when}"
        self.status.setText(f"{text} · last read failed: {view.error}" if view.error else text)
        self.status.setToolTip(view.error)

    def showEvent(self, event: QShowEvent) -> None:
        super().showEvent(event)
        self._watch.set_shown(True)

    def hideEvent(self, event: QHideEvent) -> None:
        super().hideEvent(event)
        self._watch.set_shown(False)
