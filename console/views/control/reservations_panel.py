"""ReservationsPanel: every reservation in force across the fleet; filter, sort, release.

A row's menu (right click, the Menu key or Shift+F10) releases the whole
reservation or one of its GPUs; Delete (or the Release… button) releases the
whole of the selected one. Each asks first (ReleasePrompts). After a release the
bar under the table offers Undo for a few seconds.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QModelIndex, QObject, Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QTableView,
    QWidget,
)

from console.fleet.control import ReservationRow
from console.fleet.placement import gpus_text
from console.fleet.reservations import Release
from console.qt.reservation_model import (
    UNTIL_COLUMN,
    ReservationFilterProxy,
    ReservationTableModel,
)
from console.views.common.keyboard_menus import offer_row_menus
from console.views.common.row_table_panel import RowPanel, bar_over_table, set_up_row_table


class ReservationsPanel(RowPanel):
    releaseRequested = Signal(object, object)  # ReservationRow, GPUs (empty: all of them)
    undoRequested = Signal()

    def __init__(self, model: ReservationTableModel, parent: QWidget | None = None) -> None:
        super().__init__("reservationsPanel", model, ReservationFilterProxy(), parent)
        self.proxy: ReservationFilterProxy
        self.model = model
        self.filter = QLineEdit(placeholderText="Filter: node, GPU, holder, reason, creator…")
        self.filter.setObjectName("reservationFilter")
        self.release = QPushButton("Release…")
        self.release.setObjectName("reservationRelease")
        self.table = QTableView()
        self.table.setObjectName("reservationTable")
        self.undo_text = QLabel()
        self.undo_text.setObjectName("undoText")
        self.undo = QPushButton("Undo")
        self.undo.setObjectName("undoRelease")
        self._kept: tuple[str, str] | None = None  # the selection across a model reset
        self._build()
        self._wire()
        self.show_undo(None)
        self._on_selection_changed()

    def _build(self) -> None:
        self.table.setModel(self.proxy)
        set_up_row_table(self.table)
        self.table.setSortingEnabled(True)
        self.table.setWordWrap(False)  # one line a reservation: "23:06 (1 h 29 min left)"
        self.table.sortByColumn(UNTIL_COLUMN, Qt.SortOrder.AscendingOrder)  # next to end first
        offer_row_menus(self.table, self._menu_at)
        layout = bar_over_table(self, [(self.filter, 1), self.release], self.table)
        self._undo_bar = QWidget()
        row = QHBoxLayout(self._undo_bar)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.undo_text, 1)
        row.addWidget(self.undo)
        layout.addWidget(self._undo_bar)

    def _wire(self) -> None:
        self.filter.textChanged.connect(self.proxy.set_text)
        self.release.clicked.connect(self._on_release_clicked)
        self.undo.clicked.connect(self.undoRequested)
        self.table.selectionModel().selectionChanged.connect(self._on_selection_changed)
        # The model resets when a reservation changes: keep the selected one selected.
        self.model.modelAboutToBeReset.connect(self._on_model_about_to_be_reset)
        self.model.modelReset.connect(self._on_model_reset)
        self.table.installEventFilter(self)

    # -- what the rows hold ----------------------------------------------------

    def selected(self) -> ReservationRow | None:
        index = self.table.currentIndex()
        rows = self.table.selectionModel().selectedRows()
        if not rows or not index.isValid():
            return None
        return self.model.line(self.proxy.mapToSource(rows[0]).row()).reservation

    def select(self, target: str, reservation_id: str) -> bool:
        row = self.model.row_of(target, reservation_id)
        if row is None:
            return False
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        self.table.setCurrentIndex(index)
        self.table.selectRow(index.row())
        return True

    def row_menu(self, reservation: ReservationRow) -> QMenu:
        """Release it all, or one GPU of it; each asks first."""
        menu = QMenu(self)
        menu.setObjectName("reservationMenu")
        gpus = reservation.gpu_indices
        suffix = f" ({self.action_refusal})" if self.action_refusal else ""
        whole = menu.addAction(f"&Release {gpus_text(gpus)} of {reservation.holder}…{suffix}")
        whole.triggered.connect(lambda: self.releaseRequested.emit(reservation, ()))
        actions = [whole]
        if len(gpus) > 1:
            for gpu in sorted(gpus):
                one = menu.addAction(f"Release only GPU {gpu}…{suffix}")
                one.triggered.connect(
                    lambda _=False, g=gpu: self.releaseRequested.emit(reservation, (g,))
                )
                actions.append(one)
        for action in actions:
            action.setEnabled(not self.action_refusal)
        return menu

    # -- state from outside ----------------------------------------------------

    def show_undo(self, release: Release | None) -> None:
        """The last confirmed release while it can be undone; None hides the bar."""
        self._undo_bar.setVisible(release is not None)
        if release is not None:
            self.undo_text.setText(f"Released {release.what}.")

    # -- events ----------------------------------------------------------------

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (watched is self.table and event.type() == QEvent.Type.KeyPress
                and isinstance(event, QKeyEvent) and event.key() == Qt.Key.Key_Delete):  # fmt: skip
            self._on_release_clicked()
            return True
        return super().eventFilter(watched, event)

    def _on_release_clicked(self) -> None:
        reservation = self.selected()
        if reservation is not None and not self.action_refusal:
            self.releaseRequested.emit(reservation, ())

    def _on_selection_changed(self, *_args: object) -> None:
        self.release.setEnabled(self.selected() is not None and not self.action_refusal)
        self.release.setToolTip(self.action_refusal)

    def _on_model_about_to_be_reset(self) -> None:
        selected = self.selected()
        self._kept = selected.uid if selected is not None else None

    def _on_model_reset(self) -> None:
        self.table.resizeColumnsToContents()  # a handful of rows: cheap, and nothing is cut
        if self._kept is not None:
            self.select(*self._kept)
        self._on_selection_changed()

    def _menu_at(self, index: QModelIndex) -> QMenu:
        self.table.setCurrentIndex(index)
        return self.row_menu(self.model.line(self.proxy.mapToSource(index).row()).reservation)
