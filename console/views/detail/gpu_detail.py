"""GpuDetailPanel: one GPU's facts, current readings and reservation, live plots,
process table and kill zone.

The readings are the newest sample's, refreshed once per frame in which the
GPU's node changed (never per message).

A process is killed from the table's context menu ("Kill…") or by dragging its
row onto the kill zone; either way `killRequested` asks for a confirmation first.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QModelIndex, Signal
from PySide6.QtWidgets import (
    QLabel,
    QMenu,
    QVBoxLayout,
    QWidget,
)

from console.fleet.control_requests import KillTarget
from console.fleet.gpu_readings import gpu_readings
from console.fleet.health_report import health_report
from console.fleet.model import Change, FleetModel, GpuKey
from console.fleet.placement import can_kill
from console.fleet.reservations import holder_text
from console.fleet.wall_clock import unix_now_ms
from console.qt.process_model import ProcessTableModel
from console.views.common.keyboard_menus import offer_row_menus
from console.views.detail.health_section import HealthSection
from console.views.detail.kill_zone import KillZone
from console.views.detail.process_table import ProcessTable
from console.views.detail.readings_table import ReadingsTable
from console.views.plots.plot_panel import PlotPanel
from gpufleet.policy import role_needed


class GpuDetailPanel(QWidget):
    killRequested = Signal(object)  # KillTarget, to confirm and send
    # A refresh on screen: the plots redraw this frame (the grid leaves it to them).
    refreshed = Signal()

    def __init__(
        self,
        fleet: FleetModel,
        parent: QWidget | None = None,
        clock: Callable[[], int] = unix_now_ms,  # unix ms: "signed in as …, expires in 6 h"
    ) -> None:
        super().__init__(parent)
        self.setObjectName("gpuDetail")
        self._fleet, self._clock = fleet, clock
        self.key: GpuKey | None = None
        self.kill_refusal: str | None = None  # why our role may not kill on the node shown
        # More entries for a process's menu (menu, process): cancel its Slurm job.
        self.process_menu_extras: list[Callable[[QMenu, KillTarget], None]] = []
        self.title = QLabel("Click a GPU tile to see it here.")
        self.title.setObjectName("detailTitle")
        self.title.setWordWrap(True)  # wall mode's large type: a second line, never cut
        self.facts = QLabel("")
        self.facts.setObjectName("detailFacts")
        self.facts.setWordWrap(True)
        self.health = HealthSection()
        self.readings = ReadingsTable()
        # The plots under their time-range bar, scrolling rather than squeezed.
        self.plot_panel = PlotPanel()
        self.plots = self.plot_panel.plots
        self.processes = ProcessTableModel(lambda: self._clock() / 1000)
        self.process_table = ProcessTable(self.processes)
        self.kill_zone = KillZone(lambda victim: can_kill(victim, fleet))
        layout = QVBoxLayout(self)
        for widget in (self.title, self.facts, self.readings, self.health):
            layout.addWidget(widget)
        layout.addWidget(self.plot_panel, stretch=1)
        layout.addWidget(self.process_table)
        layout.addWidget(self.kill_zone)
        # Kill… from a row's menu: a right click, the Menu key or Shift+F10.
        offer_row_menus(self.process_table, self._process_menu_at)
        self.kill_zone.killRequested.connect(self.killRequested)

    def show_gpu(self, target: str, gpu: int) -> None:
        self.key = GpuKey(target, gpu)
        node = self._fleet.node(target)
        info = node.info.gpus[gpu] if node.info and gpu < len(node.info.gpus) else None
        self.title.setText(f"{node.name} · GPU {gpu}" + (f" · {info.name}" if info else ""))
        if info is not None:
            self.plots.set_limits(info)
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
        where = (node.target, node.name, self.key.index)
        self.processes.set_processes(snapshot.processes if snapshot else (), where)
        self.facts.setText(self._facts_text(self.key))
        now = self._clock()
        held = self._fleet.control.reservation_on(self.key.target, self.key.index, now)
        self.readings.show_readings(
            gpu_readings(node, self.key.index), holder_text(held, now) if held else ""
        )
        self._show_health(self.key)
        # A viewer sees no kill zone; the daemon would refuse the kill anyway.
        self.kill_refusal = self._fleet.role_refusal(self.key.target, role_needed("KillProcess"))
        self.kill_zone.setVisible(self.kill_refusal is None)
        if self.isVisible():
            self.refreshed.emit()

    def process_menu(self, row: int) -> QMenu:
        """The context menu of a process row: Kill… (confirmation first)."""
        menu = QMenu(self)
        menu.setObjectName("processMenu")
        victim = self.processes.kill_target(row)
        if victim is not None:
            # The same verdict as the kill zone's: role, ownership, the node's kill policy.
            verdict = can_kill(victim, self._fleet)
            # The menu says why in its first clause; the whole reason is its tooltip.
            refusal = "" if verdict.ok else f" ({verdict.reason.split(': ', 1)[0]})"
            action = menu.addAction(f"Kill pid {victim.pid}…{refusal}")
            action.setEnabled(verdict.ok)
            action.setToolTip(verdict.reason)
            menu.setToolTipsVisible(True)
            action.triggered.connect(lambda: self.killRequested.emit(victim))
            for extra in self.process_menu_extras:
                extra(menu, victim)
        return menu

    def _process_menu_at(self, row: QModelIndex) -> QMenu:
        return self.process_menu(self.process_table.source_row(row.row()))

    def _show_health(self, key: GpuKey) -> None:
        node = self._fleet.node(key.target)
        snap = node.latest.get(key.index)
        gpus = node.info.gpus if node.info else ()
        info = gpus[key.index] if key.index < len(gpus) else None
        if snap is None:
            self.health.show_report([], None)
            return
        parts = health_report(
            snap.condition, snap.signals, snap.mig_instances,
            info.mig_enabled if info else False,
            info.power_limit_default_w if info else None, self._clock(), node.healing,
        )  # fmt: skip
        self.health.show_report(parts, snap.condition.state if snap.condition else None)

    def _facts_text(self, key: GpuKey) -> str:
        node = self._fleet.node(key.target)
        info, snap = node.info, node.latest.get(key.index)
        parts = [f"{node.target} ({node.state.value})"]
        if node.identity is not None:
            parts.append(f"signed in as {node.identity.describe(self._clock())}")
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
