"""FleetSummary: the status bar's line about the whole fleet, each figure naming its GPU or node.

"3/4 nodes connected · 1 down: gpu-node-04 · 32 GPUs · hottest 71 °C on gpu-node-03:2 ·
1 lost: gpu-node-01:3 · 2 critical · 5 warning". A figure that points somewhere is a
button: the hottest or lost GPU opens it, the alert counts open the alerts filtered by
severity, the nodes down open the inventory (where each node's state and why).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QToolButton, QWidget

from console.fleet.columns import column
from console.fleet.model import Change, FleetModel, NodeRecord
from console.fleet.node_looks import NodeLooks
from console.fleet.updates import LinkState
from console.qt.named_timer import named_timer
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import TEMP_GPU_C

# Nodes named in "N down: a, b, …" before the rest is only counted.
NAMED_DOWN = 2


@dataclass(frozen=True)
class Figure:
    """One part of the line; `opens` says where a click goes (None: nowhere)."""

    name: str  # which part: "connected", "gpus", "hottest", "lost", "critical", "warning"
    text: str
    opens: tuple[str, int] | str | None = None  # a GPU (target, index), "alerts:…", "nodes"


def node_hottest(node: NodeRecord) -> tuple[float, int] | None:
    """The node's hottest GPU of its newest tick: (°C, index); None: none reported.

    The first of equals wins. Plain floats, not numpy: eight values a node, where each
    numpy call costs more than the comparison.
    """
    rows = node.newest()
    if rows is None:
        return None
    best: tuple[float, int] | None = None
    for index, value in enumerate(rows[:, column(TEMP_GPU_C)].tolist()):
        if value == value and (best is None or value > best[0]):  # NaN != NaN: none
            best = (value, index)
    return best


def node_lost(node: NodeRecord) -> tuple[int, ...]:
    return tuple(i for i, s in sorted(node.latest.items()) if s.health == "lost")


# A node's facts for the line: its hottest GPU (None: none reported) and its lost GPUs.
NodeFacts = tuple[tuple[float, int] | None, tuple[int, ...]]


def node_facts(node: NodeRecord) -> NodeFacts:
    return node_hottest(node), node_lost(node)


def _hottest(
    nodes: list[NodeRecord], facts: Mapping[str, NodeFacts]
) -> tuple[float, NodeRecord, int] | None:
    """The hottest GPU of the nodes' newest ticks: (°C, node, index); the first of equals."""
    best: tuple[float, NodeRecord, int] | None = None
    for node in nodes:
        fact = facts.get(node.target)
        found = fact[0] if fact is not None else None
        if found is not None and (best is None or found[0] > best[0]):
            best = (found[0], node, found[1])
    return best


def figures(fleet: FleetModel, facts: Mapping[str, NodeFacts] | None = None) -> list[Figure]:
    """The line's parts; `facts`: each node's as kept (NodeLooks), else each looked at."""
    nodes = fleet.nodes()
    if facts is None:
        facts = {node.target: node_facts(node) for node in nodes}
    down = [n for n in nodes if n.state is not LinkState.CONNECTED]
    connected = f"{len(nodes) - len(down)}/{len(nodes)} nodes connected"
    if down:
        names = ", ".join(n.name for n in down[:NAMED_DOWN])
        more = f" and {len(down) - NAMED_DOWN} more" if len(down) > NAMED_DOWN else ""
        found = [Figure("connected", f"{connected} · {len(down)} down: {names}{more}", "nodes")]
    else:
        found = [Figure("connected", connected)]
    found.append(Figure("gpus", f"{fleet.gpu_total()} GPUs"))
    hottest = _hottest(nodes, facts)
    if hottest is not None:
        temp, node, index = hottest
        found.append(Figure("hottest", f"hottest {temp:.0f} °C on {node.name}:{index}",
                            (node.target, index)))  # fmt: skip
    lost = [(n, i) for n in nodes for i in facts.get(n.target, (None, ()))[1]]
    if lost:
        first, index = lost[0]
        where = f"{first.name}:{index}" + (" …" if len(lost) > 1 else "")
        found.append(Figure("lost", f"{len(lost)} lost: {where}", (first.target, index)))
    active = list(fleet.alerts.active(int(time.time() * 1000)))
    for severity in (Severity.CRITICAL, Severity.WARNING):
        count = sum(a.severity is severity for a in active)
        if count:
            found.append(Figure(severity.label, f"{count} {severity.label}",
                                f"alerts:{severity.label}"))  # fmt: skip
    return found


def summary_text(fleet: FleetModel) -> str:
    return " · ".join(f.text for f in figures(fleet))


# The summary walks every GPU: twice a second is plenty for a status line.
REFRESH_MS = 500
PARTS = ("connected", "gpus", "hottest", "lost", "critical", "warning")


class FleetSummary(QWidget):
    gpuRequested = Signal(str, int)  # the hottest or a lost GPU: open it
    alertsRequested = Signal(str)  # a severity's label: the alerts, filtered by it
    nodesRequested = Signal()  # nodes down: where their states are

    def __init__(self, fleet: FleetModel, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("fleetSummary")
        self._fleet = fleet
        self._opens: dict[str, tuple[str, int] | str | None] = {}
        self._facts = NodeLooks(fleet, node_facts)  # each node's, as the node changes
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(10)
        self.parts: dict[str, QToolButton] = {}
        for name in PARTS:
            button = QToolButton()
            button.setObjectName(f"summary-{name}")
            button.setAutoRaise(True)  # reads as text; raised under the pointer: a link
            button.clicked.connect(lambda _=False, n=name: self._on_part_clicked(n))
            layout.addWidget(button)
            self.parts[name] = button
        self._timer = named_timer(
            self, "gpufleet-summary-timer", self._on_timer_timeout, single_shot=True
        )
        self._on_timer_timeout()

    def text(self) -> str:
        """The line as it reads (what `summary_text` said when last refreshed)."""
        return " · ".join(b.text() for b in self.parts.values() if not b.isHidden())

    def on_fleet_changed(self, changes: dict[str, Change]) -> None:
        self._facts.follow(changes)
        if not self._timer.isActive():
            self._timer.start(REFRESH_MS)

    def _on_timer_timeout(self) -> None:
        shown = {f.name: f for f in figures(self._fleet, self._facts.by_node)}
        self._opens = {name: f.opens for name, f in shown.items()}
        for name, button in self.parts.items():
            figure = shown.get(name)
            button.setHidden(figure is None)
            if figure is None:
                continue
            button.setText(figure.text)
            clickable = figure.opens is not None
            button.setProperty("link", clickable)
            button.setToolTip(_tooltip(figure) if clickable else "")

    def _on_part_clicked(self, name: str) -> None:
        opens = self._opens.get(name)
        if isinstance(opens, tuple):
            self.gpuRequested.emit(*opens)
        elif opens == "nodes":
            self.nodesRequested.emit()
        elif isinstance(opens, str) and opens.startswith("alerts:"):
            self.alertsRequested.emit(opens.removeprefix("alerts:"))


def _tooltip(figure: Figure) -> str:
    if isinstance(figure.opens, tuple):
        return "Click: open this GPU"
    if figure.opens == "nodes":
        return "Click: the nodes' states (Inventory)"
    return f"Click: the {figure.name} alerts"
