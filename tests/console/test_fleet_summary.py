"""The status line's figures from the facts it keeps per node, looked at again only for
the nodes a frame changed (console/views/grid/fleet_summary.py, with NodeLooks)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from console.fleet.columns import COLUMN_COUNT, column
from console.fleet.model import Change, FleetModel
from console.fleet.node_looks import NodeLooks
from console.fleet.updates import GpuSnapshot, SamplesUpdate
from console.views.grid.fleet_summary import FleetSummary, NodeFacts, figures, node_facts
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from tests.console.hand_fed import gpus_of, node_up, simulated_node

A, B = "10.0.0.1:50051", "10.0.0.2:50051"
T0 = 1_800_000_000.0


def tick(fleet: FleetModel, target: str, second: int, temps: list[float],
         lost: tuple[int, ...] = ()) -> None:  # fmt: skip
    rows = np.full((len(temps), COLUMN_COUNT), np.nan, np.float32)
    rows[:, column(TEMP_GPU_C)] = temps
    snaps = tuple(GpuSnapshot(i, "lost" if i in lost else "ok", "", ()) for i in range(len(temps)))
    fleet.apply(SamplesUpdate(target, T0 + second, rows, snaps, False))


def two_nodes() -> FleetModel:
    fleet = FleetModel()
    for n, target in enumerate((A, B)):
        fleet.add_node(target)
        fleet.apply_all(node_up(target, simulated_node(f"node-{n}", gpus_of(2, f"GPU-{n}-"))))
    tick(fleet, A, 0, [50.0, 61.0])
    tick(fleet, B, 0, [55.0, 58.0])
    return fleet


def texts(fleet: FleetModel, facts: Mapping[str, NodeFacts] | None = None) -> list[str]:
    return [f.text for f in figures(fleet, facts)]


def test_kept_facts_say_what_a_look_at_every_gpu_says() -> None:
    fleet = two_nodes()
    facts = NodeLooks(fleet, node_facts)
    assert texts(fleet, facts.by_node) == texts(fleet)
    assert "hottest 61 °C on node-0:1" in texts(fleet)


def test_the_summary_looks_again_at_the_changed_nodes_only(qtbot) -> None:
    fleet = two_nodes()
    summary = FleetSummary(fleet)
    qtbot.addWidget(summary)
    tick(fleet, B, 1, [70.0, 58.0], lost=(1,))
    tick(fleet, A, 1, [90.0, 40.0])  # hotter still, but A is not said changed
    summary.on_fleet_changed({B: Change.DATA})
    qtbot.waitUntil(lambda: "lost" in summary.text(), timeout=5_000)
    assert "hottest 70 °C on node-1:0" in summary.text()
    assert "1 lost: node-1:1" in summary.text()
    summary.on_fleet_changed({A: Change.DATA})
    qtbot.waitUntil(lambda: "hottest 90 °C on node-0:0" in summary.text(), timeout=5_000)
