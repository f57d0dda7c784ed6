"""MainWindow: composes the views and wires their signals. No business logic, no RPC."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QCloseEvent
from PySide6.QtWidgets import QComboBox, QLabel, QMainWindow, QScrollArea, QSplitter, QToolBar

from console.session import ConsoleSession
from console.views.fleet_grid import FleetGrid
from console.views.fleet_summary import FleetSummary
from console.views.gpu_detail import GpuDetailPanel


class MainWindow(QMainWindow):
    def __init__(self, session: ConsoleSession) -> None:
        super().__init__()
        self.setObjectName("mainWindow")
        self.setWindowTitle("GPU Fleet Console")
        self.session = session
        self.grid = FleetGrid(session.items)
        self.detail = GpuDetailPanel(session.fleet)
        self.summary = FleetSummary(session.fleet)
        self.color_by = QComboBox()
        self.color_by.setObjectName("colorBy")
        self.color_by.addItems(["temperature", "utilisation"])
        self._compose()
        self._wire()

    def _compose(self) -> None:
        scroll = QScrollArea()
        scroll.setObjectName("fleetScroll")
        scroll.setWidgetResizable(True)
        scroll.setWidget(self.grid)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(scroll)
        splitter.addWidget(self.detail)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([960, 640])
        self.setCentralWidget(splitter)
        toolbar = QToolBar("View")
        toolbar.setObjectName("viewToolbar")
        toolbar.addWidget(QLabel(" Colour by "))
        toolbar.addWidget(self.color_by)
        self.addToolBar(toolbar)
        self.statusBar().addWidget(self.summary)

    def _wire(self) -> None:
        # Data flows one way: frame pump -> views. Selection flows grid -> detail.
        pump = self.session.pump
        pump.fleetChanged.connect(self.detail.on_fleet_changed)
        pump.fleetChanged.connect(self.summary.on_fleet_changed)
        self.grid.gpuSelected.connect(self.detail.show_gpu)
        self.color_by.currentTextChanged.connect(self.grid.set_color_by)

    def closeEvent(self, event: QCloseEvent) -> None:
        self.session.stop()
        super().closeEvent(event)
