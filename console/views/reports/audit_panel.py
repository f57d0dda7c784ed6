"""AuditPanel: who did what, on which node, with what result; filters, refresh, CSV.

Admin only: the nodes answer QueryAudit to admins alone. Without the admin role
on any node the panel says so instead of showing an empty table.
"""

from __future__ import annotations

from PySide6.QtCore import QDateTime, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateTimeEdit,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QPushButton,
    QStackedWidget,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from console.fleet.audit import ACTIONS, AuditFilter
from console.qt.audit_model import AuditFilterProxy, AuditTableModel
from console.views.common.csv_export import CsvExportPanel
from gpufleet.policy import role_needed

ALL_NODES = "All nodes"
NEEDS_ADMIN = "The audit log needs the admin role on a node; this profile has none."


class AuditPanel(CsvExportPanel):
    """Views and asks: `refreshRequested` carries the filter; export reports via `message`."""

    export_title, export_stem, export_subject = "Export audit log", "audit", "the audit log"
    refreshRequested = Signal(object)  # AuditFilter

    def __init__(self, model: AuditTableModel, parent: QWidget | None = None) -> None:
        super().__init__("auditPanel", model, AuditFilterProxy(), parent)
        self.proxy: AuditFilterProxy
        self.model = model
        self.user = QLineEdit(placeholderText="user")
        self.action = QComboBox()
        self.node = QComboBox()
        self.since_on, self.since = QCheckBox("from"), QDateTimeEdit()
        self.until_on, self.until = QCheckBox("to"), QDateTimeEdit()
        self.refresh = QPushButton("Refresh")
        self.search = QLineEdit(placeholderText="Search the records shown…")
        self.status = QLabel("Press Refresh to read the audit log of every node.")
        self.locked = QLabel(NEEDS_ADMIN)
        self.table = QTableView()
        self.pages = QStackedWidget()
        self._build()
        self._wire()

    def _build(self) -> None:
        for name, widget in (("auditUser", self.user), ("auditAction", self.action),
                             ("auditNode", self.node), ("auditRefresh", self.refresh),
                             ("auditExport", self.export), ("auditStatus", self.status),
                             ("auditLocked", self.locked), ("auditTable", self.table)):  # fmt: skip
            widget.setObjectName(name)
        self.action.setEditable(True)
        self.action.addItems(["", *ACTIONS])
        editor = self.action.lineEdit()
        if editor is not None:
            editor.setPlaceholderText("any action")
        self.node.addItem(ALL_NODES)
        now = QDateTime.currentDateTime()
        for check, edit, start in ((self.since_on, self.since, now.addDays(-1)),
                                   (self.until_on, self.until, now)):  # fmt: skip
            edit.setDisplayFormat("yyyy-MM-dd HH:mm")
            edit.setDateTime(start)
            edit.setEnabled(False)
            check.toggled.connect(edit.setEnabled)
        self.export.setEnabled(False)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(0, Qt.SortOrder.DescendingOrder)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.locked.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.locked.setWordWrap(True)
        self.log_page = self._log_page()
        self.pages.addWidget(self.locked)
        self.pages.addWidget(self.log_page)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.pages)

    def _log_page(self) -> QWidget:
        page = QWidget()
        # Two short rows, not one long one: the bottom dock stays narrow enough for the
        # GPU detail beside it on a 1366x768 screen (console/views/window/first_layout.py).
        bar, when = QHBoxLayout(), QHBoxLayout()
        for asked in (self.user, self.action, self.node, self.refresh, self.export):
            bar.addWidget(asked)
        for bound in (self.since_on, self.since, self.until_on, self.until):
            when.addWidget(bound)
        when.addStretch(1)
        self.status.setWordWrap(True)
        under = QHBoxLayout()
        under.addWidget(self.search, 1)
        under.addWidget(self.status, 2)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addLayout(when)
        layout.addWidget(self.table)
        layout.addLayout(under)
        return page

    def _wire(self) -> None:
        self.refresh.clicked.connect(self._on_refresh_clicked)
        self.user.returnPressed.connect(self._on_refresh_clicked)
        self.search.textChanged.connect(self.proxy.setFilterFixedString)
        self.model.refreshed.connect(self._on_model_refreshed)

    # -- access ----------------------------------------------------------------

    @property
    def allowed(self) -> bool:
        """Some node takes us as admin: the log can be read."""
        return bool(self._admin_nodes())

    def _admin_nodes(self) -> list[tuple[str, str]]:
        fleet = self.model.fleet
        return [(t, fleet.node(t).name) for t in fleet.targets_with_role(role_needed("QueryAudit"))]

    def on_access_changed(self) -> None:
        """Show the log where we are admin somewhere, the reason otherwise; list the nodes."""
        nodes = self._admin_nodes()
        self.pages.setCurrentWidget(self.log_page if nodes else self.locked)
        chosen = self.node.currentData()
        self.node.clear()
        self.node.addItem(ALL_NODES, None)
        for target, name in nodes:
            self.node.addItem(name, target)
        found = self.node.findData(chosen)
        self.node.setCurrentIndex(max(0, found))

    # -- refresh and export ----------------------------------------------------

    def current_filter(self) -> AuditFilter:
        target = self.node.currentData()
        return AuditFilter(
            user=self.user.text(), action=self.action.currentText(),
            targets=(target,) if target else (),
            from_unix_ms=self._ms(self.since_on, self.since),
            to_unix_ms=self._ms(self.until_on, self.until),
        )  # fmt: skip

    @staticmethod
    def _ms(check: QCheckBox, edit: QDateTimeEdit) -> int:
        return edit.dateTime().toMSecsSinceEpoch() if check.isChecked() else 0

    def _on_refresh_clicked(self) -> None:
        self.status.setText("Reading the audit log…")
        self.refreshRequested.emit(self.current_filter())

    def _on_model_refreshed(self, text: str) -> None:
        self.status.setText(text)
        self.export.setEnabled(self.model.rowCount() > 0)
        self.table.resizeColumnsToContents()

    def csv_export(self) -> tuple[str, str]:
        """Every record read, not only those the search shows."""
        return self.model.csv_text(), f"{self.model.rowCount()} audit records"
