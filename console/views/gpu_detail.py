"""GpuDetailPanel: one GPU's facts, live plots and process table."""

from __future__ import annotations

from PySide6.QtWidgets import QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from console.fleet.model import Change, FleetModel, GpuKey
from console.qt.process_model import ProcessTableModel
from console.views.gpu_plots import GpuPlots

GIB = 1024**3


class GpuDetailPanel(QWidget):
    def __init__(self, fleet: FleetModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("gpuDetail")
        self._fleet = fleet
        self.key: GpuKey | None = None
        self.title = QLabel("Click a GPU tile to see it here.")
        self.title.setObjectName("detailTitle")
        self.facts = QLabel("")
        self.facts.setObjectName("detailFacts")
        self.facts.setWordWrap(True)
        self.plots = GpuPlots()
        self.processes = ProcessTableModel()
        self.process_table = QTableView()
        self.process_table.setModel(self.processes)
        self.process_table.horizontalHeader().setSectionResizeMode(
            QHeaderView.ResizeMode.Interactive
        )
        self.process_table.horizontalHeader().setStretchLastSection(True)
        self.process_table.verticalHeader().hide()
        self.process_table.setMaximumHeight(160)
        layout = QVBoxLayout(self)
        for widget in (self.title, self.facts):
            layout.addWidget(widget)
        layout.addWidget(self.plots, stretch=1)
        layout.addWidget(self.process_table)

    def show_gpu(self, target: str, gpu: int) -> None:
        self.key = GpuKey(target, gpu)
        node = self._fleet.node(target)
        info = node.info.gpus[gpu] if node.info and gpu < len(node.info.gpus) else None
        self.title.setText(f"{node.name} · GPU {gpu}" + (f" · {info.name}" if info else ""))
        if info is not None:
            total = info.memory_total_bytes / GIB if info.memory_total_bytes else None
            self.plots.set_limits(total, info.power_limit_w)
        self.refresh()

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        if self.key is not None and self.key.target in changes:
            self.refresh()

    def refresh(self) -> None:
        if self.key is None:
            return
        node = self._fleet.node(self.key.target)
        self.plots.show_series(node.ring, self.key.index)
        snapshot = node.latest.get(self.key.index)
        self.processes.set_processes(snapshot.processes if snapshot else ())
        self.facts.setText(self._facts_text(self.key))

    def _facts_text(self, key: GpuKey) -> str:
        node = self._fleet.node(key.target)
        info, snap = node.info, node.latest.get(key.index)
        parts = [f"{node.target} ({node.state.value})"]
        if info is not None:
            gpu = info.gpus[key.index] if key.index < len(info.gpus) else None
            parts.append(
                f"driver {info.driver_version or 'n/a'} · CUDA {info.cuda_version or 'n/a'}"
            )
            if gpu is not None:
                parts.append(f"{gpu.uuid} · bus {gpu.pci_bus_id or 'n/a'}")
        if snap is not None and snap.health != "ok":
            parts.append(f"<b>{snap.health.upper()}</b> {snap.error}")
        return "<br>".join(parts)
