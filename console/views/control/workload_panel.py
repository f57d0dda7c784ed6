"""WorkloadPanel: every node's queue; drag a queued workload onto a GPU tile to start it.

Or from the keyboard: a row's context menu (the Menu key, Shift+F10 or a right
click) cancels it, assigns it to a GPU chosen in a list, or shows its output.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHeaderView,
    QLabel,
    QMenu,
    QPushButton,
    QWidget,
)

from console.fleet.control import WorkloadRow
from console.qt.workload_model import (
    COLUMNS,
    WORKLOAD_ROLE,
    WorkloadFilterProxy,
    WorkloadTableModel,
)
from console.views.common.drag_image import CompactDragTable
from console.views.common.keyboard_menus import offer_row_menus
from console.views.common.row_table_panel import RowPanel, bar_over_table
from gpufleet.states import WorkloadState

HINT = (
    "Drag a queued workload onto a GPU tile to start it there, on any node: dropped on "
    "another node's GPU it moves there (or: Menu key, Assign to GPU…)."
)
# The reason a workload waits is the sentence to read: it takes the room the short
# columns leave. The command is cut to this width (whole in the row's tooltip).
WAIT_COLUMN = COLUMNS.index("Waiting because")
COMMAND_COLUMN = COLUMNS.index("Command")
COMMAND_WIDTH = 180  # px


class WorkloadPanel(RowPanel):
    """Views and asks; submitting, cancelling and reading output go out through signals."""

    submitRequested = Signal()
    cancelRequested = Signal(object)  # WorkloadRow
    outputRequested = Signal(object)  # WorkloadRow
    assignRequested = Signal(object)  # WorkloadRow: choose its GPU (the keyboard's drop)

    def __init__(self, model: WorkloadTableModel, parent: QWidget | None = None) -> None:
        super().__init__("workloadPanel", model, WorkloadFilterProxy(), parent)
        self.proxy: WorkloadFilterProxy
        self.model = model
        self.table = CompactDragTable()  # a small drag label: the tiles stay in sight
        self.filter, self.show_ended = self._filtered_rows(
            self.table, "workloadTable", "Filter: node, name, owner, state…", "Show ended"
        )
        self.show_ended.setChecked(True)
        self.submit = QPushButton("Submit…")
        self.cancel = QPushButton("Cancel workload")
        self.output = QPushButton("Output…")
        self._kept: tuple[str, str] | None = None  # selection across a model reset
        self._build()
        self._wire()
        self._fit_columns()
        self._on_selection_changed()

    def _build(self) -> None:
        self.table.setSortingEnabled(False)  # the model's order is the queue's order
        header = self.table.horizontalHeader()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(WAIT_COLUMN, QHeaderView.ResizeMode.Stretch)
        header.resizeSection(COMMAND_COLUMN, COMMAND_WIDTH)
        self.table.setWordWrap(False)  # one line a workload; a cut cell ends in "…"
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setDragEnabled(True)
        self.table.setDragDropMode(QAbstractItemView.DragDropMode.DragOnly)
        offer_row_menus(self.table, self._menu_at)
        hint = QLabel(HINT)
        hint.setObjectName("dragHint")
        hint.setWordWrap(True)  # a narrow bottom dock (1366x768) wraps it, never widens
        bar = (self.filter, self.show_ended, self.submit, self.cancel, self.output)
        bar_over_table(self, bar, self.table).addWidget(hint)

    def _wire(self) -> None:
        # The model resets when any workload changes: keep the selected one selected.
        self.model.modelAboutToBeReset.connect(self._on_model_about_to_be_reset)
        self.model.modelReset.connect(self._on_model_reset)
        self.submit.clicked.connect(self.submitRequested)
        self.cancel.clicked.connect(self._on_cancel_clicked)
        self.output.clicked.connect(self._on_output_clicked)
        self.table.doubleClicked.connect(self._on_table_double_clicked)

    def selected_workload(self) -> WorkloadRow | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].data(WORKLOAD_ROLE) if rows else None

    def select(self, target: str, workload_id: str) -> bool:
        """Select a workload's row (tests and links from elsewhere); False if not shown."""
        row = self.model.row_of(target, workload_id)
        if row is None:
            return False
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        if not index.isValid():
            return False
        self.table.selectRow(index.row())
        return True

    def _on_model_about_to_be_reset(self) -> None:
        workload = self.selected_workload()
        self._kept = workload.uid if workload is not None else None

    def _on_model_reset(self) -> None:
        if self._kept is not None:
            self.select(*self._kept)
        self._fit_columns()
        self._on_selection_changed()

    def _fit_columns(self) -> None:
        """The short columns as wide as their cells, so the reason keeps the rest."""
        for column in range(len(COLUMNS)):
            if column not in (WAIT_COLUMN, COMMAND_COLUMN):
                self.table.resizeColumnToContents(column)

    def _show_refusal(self, refusal: str) -> None:
        self.submit.setToolTip(f"Submit: {refusal}" if refusal else "")
        self.cancel.setToolTip(f"Cancel: {refusal}" if refusal else "")

    def _on_selection_changed(self, *_args: object) -> None:
        workload = self.selected_workload()
        allowed = not self.action_refusal
        self.submit.setEnabled(allowed)
        self.cancel.setEnabled(allowed and workload is not None and not workload.state.ended)
        self.output.setEnabled(workload is not None and workload.state is not WorkloadState.QUEUED)

    def _on_cancel_clicked(self) -> None:
        workload = self.selected_workload()
        if workload is not None:
            self.cancelRequested.emit(workload)

    def _on_output_clicked(self) -> None:
        workload = self.selected_workload()
        if workload is not None:
            self.outputRequested.emit(workload)

    def row_menu(self, workload: WorkloadRow) -> QMenu:
        """A workload row's menu: cancel it, assign it to a GPU (queued), show its output."""
        menu = QMenu(self)
        menu.setObjectName("workloadMenu")
        refusal = f" ({self.action_refusal})" if self.action_refusal else ""
        queued = workload.state is WorkloadState.QUEUED
        entries = (
            (f"&Cancel workload {workload.label}…", self.cancelRequested, not workload.state.ended),
            ("&Assign to GPU…", self.assignRequested, queued),
        )
        for text, signal, applies in entries:
            if applies:
                action = menu.addAction(text + refusal)
                action.setEnabled(not self.action_refusal)
                action.triggered.connect(lambda _=False, s=signal: s.emit(workload))
        if not queued:
            output = menu.addAction("Show &output…")
            output.triggered.connect(lambda: self.outputRequested.emit(workload))
        return menu

    def _menu_at(self, index: QModelIndex) -> QMenu:
        self.table.selectRow(index.row())
        return self.row_menu(index.data(WORKLOAD_ROLE))

    def _on_table_double_clicked(self, index: QModelIndex) -> None:
        workload: WorkloadRow = index.data(WORKLOAD_ROLE)
        if workload.state is not WorkloadState.QUEUED:
            self.outputRequested.emit(workload)

    def row_index(self, target: str, workload_id: str) -> QModelIndex:
        """The proxy index of a workload's first cell (a drag source in tests)."""
        row = self.model.row_of(target, workload_id)
        if row is None:
            return QModelIndex()
        return self.proxy.mapFromSource(self.model.index(row, 0, QModelIndex()))
