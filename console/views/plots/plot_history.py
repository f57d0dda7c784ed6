"""PlotHistory: the GPU plots' way to data older than the ring, and to the node's alert lines.

The plots hold a ring and a GPU index; this finds the node that ring belongs
to (its address, name, GPU UUID, history tiers, alert lines) and asks the
HistoryLoader for the slice before the ring. Answers arrive with the frame
pump's `queryFinished` (wired by the main window); an awaited one emits
`arrived`, and the plots redraw. No network here: the loader's asker sends.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from console.fleet.history_loader import HistoryAsker, HistoryLoader, Wanted
from console.fleet.history_range import HistorySlice
from console.fleet.model import FleetModel, NodeRecord
from console.fleet.ring import SampleRing
from console.fleet.updates import QueryResult


class PlotHistory(QObject):
    arrived = Signal()  # an awaited slice (or its failure) came: redraw

    def __init__(
        self,
        fleet: FleetModel,
        asker: HistoryAsker,
        prometheus: bool = False,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("plotHistory")
        self._fleet = fleet
        self.loader = HistoryLoader(asker, prometheus)

    def node_of(self, ring: SampleRing | None) -> NodeRecord | None:
        """The node whose ring this is (a node's ring is replaced when its GPUs change)."""
        if ring is None:
            return None
        return next((node for node in self._fleet.nodes() if node.ring is ring), None)

    def slice_for(
        self, ring: SampleRing, gpu: int, start_s: float, end_s: float
    ) -> tuple[HistorySlice | None, str | None]:
        """The fetched part of [start, end] before the ring, and what to say about it."""
        node = self.node_of(ring)
        if node is None or node.info is None or gpu >= len(node.info.gpus):
            return None, None
        times = ring.times()
        wanted = Wanted(
            node.target, gpu, node.info.gpus[gpu].uuid, node.name, node.info.history_tiers,
            start_s, end_s, float(times[0]) if len(times) else float("inf"),
        )  # fmt: skip
        return self.loader.slice_for(wanted)

    def on_query_finished(self, answer: QueryResult) -> None:
        if self.loader.take(answer):
            self.arrived.emit()
