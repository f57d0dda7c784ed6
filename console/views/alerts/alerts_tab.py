"""AlertsTab: the alert table and the silences, side by side as two pages of one tab."""

from __future__ import annotations

from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from console.views.alerts.alert_panel import AlertPanel
from console.views.alerts.silence_panel import SilencePanel


class AlertsTab(QWidget):
    def __init__(
        self, alerts: AlertPanel, silences: SilencePanel, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("alertsTab")
        self.alerts, self.silences = alerts, silences
        self.pages = QTabWidget()
        self.pages.setObjectName("alertPages")
        self.pages.setDocumentMode(True)
        self.pages.addTab(alerts, "Alerts")
        self.pages.addTab(silences, "Silences")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.pages)
        silences.model.modelReset.connect(self._on_silences_model_reset)
        self._on_silences_model_reset()

    def show_alerts(self) -> None:
        self.pages.setCurrentWidget(self.alerts)

    def show_silences(self) -> None:
        self.pages.setCurrentWidget(self.silences)

    def _on_silences_model_reset(self) -> None:
        live = self.silences.model.live_count()
        self.pages.setTabText(1, f"Silences ({live})" if live else "Silences")
