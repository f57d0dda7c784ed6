"""UsagePanel: GPU-hours, energy, reservations and cost of the fleet, by user, team, node,
day or Slurm account.

A report, not a live view: pick the grouping and the days, press Refresh. The
table sums every node's rows; the line under it gives the fleet-wide KPIs (its
tooltip says how they were combined); the charts show teams, top users and
reserved time left idle. Where the nodes have [usage.prices] the table also shows
each row's cost in their currency. Export writes the table as CSV in raw units,
with the costs.
"""

from __future__ import annotations

from PySide6.QtCore import QDate, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDateEdit,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSplitter,
    QTableView,
    QVBoxLayout,
    QWidget,
)

from console.fleet.usage import GROUPINGS, UsageQuery
from console.qt.usage_model import UsageSortProxy, UsageTableModel
from console.views.common.csv_export import CsvExportPanel
from console.views.reports.usage_charts import UsageCharts

DEFAULT_DAYS = 30


class UsagePanel(CsvExportPanel):
    export_title, export_stem, export_subject = "Export usage", "usage", "the usage report"
    refreshRequested = Signal(object)  # UsageQuery

    def __init__(self, model: UsageTableModel, parent: QWidget | None = None) -> None:
        super().__init__("usagePanel", model, UsageSortProxy(), parent)
        self.proxy: UsageSortProxy
        self.model = model
        self.grouping = QComboBox()
        self.since_on, self.since = QCheckBox("from"), QDateEdit()
        self.until_on, self.until = QCheckBox("to"), QDateEdit()
        self.refresh = QPushButton("Refresh")
        self.kpis = QLabel("Press Refresh for the usage of every node (days are UTC).")
        self.table = QTableView()
        self.charts = UsageCharts()
        self._build()
        self._wire()

    def _build(self) -> None:
        for name, widget in (("usageGrouping", self.grouping), ("usageRefresh", self.refresh),
                             ("usageExport", self.export), ("usageKpis", self.kpis),
                             ("usageTable", self.table)):  # fmt: skip
            widget.setObjectName(name)
        self.grouping.addItems(list(GROUPINGS))
        today = QDate.currentDate()
        for check, edit, day in ((self.since_on, self.since, today.addDays(-DEFAULT_DAYS)),
                                 (self.until_on, self.until, today)):  # fmt: skip
            edit.setDisplayFormat("yyyy-MM-dd")
            edit.setCalendarPopup(True)
            edit.setDate(day)
            edit.setEnabled(False)
            check.toggled.connect(edit.setEnabled)
        self.export.setEnabled(False)
        self.kpis.setWordWrap(True)
        self.table.setModel(self.proxy)
        self.table.setSortingEnabled(True)
        self.table.sortByColumn(1, Qt.SortOrder.DescendingOrder)  # heaviest GPU-hours first
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().hide()
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("by"))
        controls: tuple[QWidget, ...] = (self.grouping, self.since_on, self.since, self.until_on,
                                         self.until, self.refresh, self.export)  # fmt: skip
        for control in controls:
            bar.addWidget(control)
        bar.addStretch(1)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.table)
        split.addWidget(self.charts)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([1, 1])  # scaled to the width it gets: half table, half charts
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addLayout(bar)
        layout.addWidget(split, 1)
        layout.addWidget(self.kpis)

    def _wire(self) -> None:
        self.refresh.clicked.connect(self._on_refresh_clicked)
        self.model.refreshed.connect(self._on_model_refreshed)

    def current_query(self) -> UsageQuery:
        return UsageQuery(
            from_day=self._day(self.since_on, self.since),
            to_day=self._day(self.until_on, self.until),
            grouping=self.grouping.currentText(),
        )

    @staticmethod
    def _day(check: QCheckBox, edit: QDateEdit) -> str:
        return edit.date().toString("yyyy-MM-dd") if check.isChecked() else ""

    def _on_refresh_clicked(self) -> None:
        self.kpis.setText("Reading usage…")
        self.refreshRequested.emit(self.current_query())

    def _on_model_refreshed(self, text: str) -> None:
        self.kpis.setText(text)
        kpis = self.model.kpis
        self.kpis.setToolTip(kpis.explanation() if kpis else "")
        self.export.setEnabled(self.model.rowCount() > 0)
        self.table.resizeColumnsToContents()
        by = self.model.by_grouping
        self.charts.show_report(by.get("team", []), by.get("user", []))

    def csv_export(self) -> tuple[str, str]:
        """The table, by the grouping shown, in raw units."""
        rows = self.model.rowCount()
        return self.model.csv_text(), f"{rows} usage rows by {self.model.query.grouping}"
