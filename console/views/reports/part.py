"""ReportsPart: the inventory, usage and audit tabs.

The panels ask; the models query the nodes off the GUI thread and take the answers
from the frame pump. The audit tab shows only once a node takes us as admin.
"""

from __future__ import annotations

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from console.qt.audit_model import AuditTableModel
from console.qt.inventory_model import InventoryTableModel
from console.qt.usage_model import UsageTableModel
from console.views.common.frame import WindowFrame
from console.views.reports.audit_panel import AuditPanel
from console.views.reports.inventory_panel import InventoryPanel
from console.views.reports.usage_panel import UsagePanel


class ReportsPart(QObject):
    def __init__(self, frame: WindowFrame) -> None:
        super().__init__()
        self._frame = frame
        session = frame.session
        self.inventory_model = InventoryTableModel(session.fleet)
        self.inventory_panel = InventoryPanel(self.inventory_model)
        self.usage_model = UsageTableModel(session.fleet, session.queries)
        self.usage_panel = UsagePanel(self.usage_model)
        self.audit_model = AuditTableModel(session.fleet, session.queries)
        self.audit_panel = AuditPanel(self.audit_model)
        pump = session.pump
        pump.fleetChanged.connect(self.inventory_model.on_fleet_changed)
        pump.queryFinished.connect(self.usage_model.on_query_finished)
        pump.queryFinished.connect(self.audit_model.on_query_finished)
        self.usage_panel.refreshRequested.connect(self.usage_model.refresh)
        self.audit_panel.refreshRequested.connect(self.audit_model.refresh)
        for panel in (self.inventory_panel, self.usage_panel, self.audit_panel):
            panel.message.connect(frame.show_message)
        frame.access.changed.connect(self.audit_panel.on_access_changed)
        frame.access.adminChanged.connect(self._on_admin_changed)

    def tabs(self) -> list[tuple[QWidget, str]]:
        return [(self.inventory_panel, "Inventory"), (self.usage_panel, "Usage"),
                (self.audit_panel, "Audit")]  # fmt: skip

    def _on_admin_changed(self, admin: bool) -> None:
        tabs = self._frame.tabs
        tabs.setTabVisible(tabs.indexOf(self.audit_panel), admin)
