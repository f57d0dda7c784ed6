"""The node inventory: drift against the majority (no Qt), then its table, panel and export."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

import pytest
from PySide6.QtCore import QModelIndex, Qt

from console.fleet.history_range import TierReach
from console.fleet.inventory import (
    COLUMNS,
    DRIFT_HEADER,
    InventoryRow,
    drift_count,
    drift_summary,
    find_drift,
    inventory_csv,
    inventory_rows,
)
from console.fleet.model import Change, FleetModel
from console.fleet.updates import GpuInfo, InventoryUpdate, LinkState, NodeInfo
from console.qt.inventory_model import DRIFT_ROLE, InventoryTableModel
from console.session import ConsoleSession
from console.views.reports.inventory_panel import InventoryPanel

MAJORITY_DRIVER = "550.54.15"
H100 = "NVIDIA H100 80GB HBM3"
L40S = "NVIDIA L40S"


def gpu(index: int, host: str, model: str = H100, vbios: str | None = "96.00.74.00.01") -> GpuInfo:
    return GpuInfo(
        index=index, uuid=f"GPU-{host}-{index}", name=model, serial=f"165{index}{host[-1]}",
        pci_bus_id=f"00000000:{index + 1:02X}:00.0", memory_total_bytes=80 << 30,
        power_limit_w=700.0, vbios_version=vbios,
    )  # fmt: skip


def node_info(host: str, gpus: int = 2, driver: str | None = MAJORITY_DRIVER,
              cuda: str | None = "12.4", **gpu_kw: str | None) -> NodeInfo:  # fmt: skip
    return NodeInfo(
        hostname=host, driver_version=driver, cuda_version=cuda, daemon_version="0.1.0",
        backend="simulated", backend_ok=True, backend_detail="", sample_interval_s=1.0,
        gpus=tuple(gpu(i, host, **gpu_kw) for i in range(gpus)),  # type: ignore[arg-type]
    )  # fmt: skip


def fleet_of(*infos: NodeInfo) -> FleetModel:
    fleet = FleetModel(ring_capacity=4)
    for number, info in enumerate(infos, start=1):
        target = f"10.0.0.{number}:50051"
        fleet.add_node(target)
        fleet.apply(InventoryUpdate(target, info))
    return fleet


def flagged(rows: list[InventoryRow], key: str) -> set[str]:
    """The nodes (host:GPU) whose `key` cell is flagged."""
    return {f"{rows[n].node}:{rows[n].gpu_index}" for n, k in find_drift(rows) if k == key}


# --- The domain, without Qt ------------------------------------------------------------


def test_one_row_per_gpu_of_nodes_with_inventory() -> None:
    fleet = fleet_of(node_info("node-a", gpus=3), node_info("node-b", gpus=1))
    fleet.add_node("10.0.0.9:50051")  # connecting: no inventory yet
    rows = inventory_rows(fleet)
    assert [(r.node, r.gpu_index) for r in rows] == [
        ("node-a", 0), ("node-a", 1), ("node-a", 2), ("node-b", 0),
    ]  # fmt: skip
    assert rows[3].target == "10.0.0.2:50051" and rows[3].vbios_version == "96.00.74.00.01"
    assert rows[0].pci_bus_id == "00000000:01:00.0" and rows[0].driver_version == MAJORITY_DRIVER


def test_node_versions_vote_once_per_node_not_per_gpu() -> None:
    # Eight GPUs on the odd node must not outvote two nodes of two.
    rows = inventory_rows(fleet_of(
        node_info("node-a"), node_info("node-b"), node_info("node-c", gpus=8, driver="535.161.08"),
    ))  # fmt: skip
    assert flagged(rows, "driver_version") == {f"node-c:{i}" for i in range(8)}
    drift = find_drift(rows)
    reason = drift[(4, "driver_version")]
    assert reason.describe() == "differs from the fleet's majority: 550.54.15 on 2 of 3 nodes"
    assert drift_count(rows, drift) == 1  # one node's driver, however many GPUs


def test_a_node_left_behind_by_a_rollout_shows_its_daemon_version_as_drift() -> None:
    # A rolling upgrade stopped half way: the node still on the old daemon is marked.
    newer = [dataclasses.replace(node_info(f"node-{n}"), daemon_version="0.2.0") for n in "abc"]
    rows = inventory_rows(fleet_of(*newer, node_info("node-d")))
    assert [row.daemon_version for row in rows if row.node == "node-d"] == ["0.1.0", "0.1.0"]
    assert flagged(rows, "daemon_version") == {"node-d:0", "node-d:1"}
    assert find_drift(rows)[(6, "daemon_version")].describe() == (
        "differs from the fleet's majority: 0.2.0 on 3 of 4 nodes"
    )


def test_vbios_is_compared_within_a_gpu_model() -> None:
    rows = inventory_rows(fleet_of(
        node_info("node-a", gpus=3),
        node_info("node-b", gpus=2, model=L40S, vbios="95.02.5D.00.01"),  # its own model: fine
        node_info("node-c", gpus=1, vbios="96.00.30.00.01"),  # an H100 on an old VBIOS
    ))  # fmt: skip
    assert flagged(rows, "vbios_version") == {"node-c:0"}
    assert find_drift(rows)[(5, "vbios_version")].describe() == (
        f"differs from the majority of {H100} GPUs: 96.00.74.00.01 on 3 of 4 GPUs"
    )
    assert drift_count(rows, find_drift(rows)) == 1


def test_a_tie_has_no_majority() -> None:
    rows = inventory_rows(fleet_of(
        node_info("node-a", driver="550.54.15", cuda="12.4"),
        node_info("node-b", driver="535.161.08", cuda="12.4"),
    ))  # fmt: skip
    assert find_drift(rows) == {}
    assert drift_summary(0) == "no drift"


def test_unknown_values_are_never_drift_and_do_not_vote() -> None:
    rows = inventory_rows(fleet_of(
        node_info("node-a", driver=None, vbios=None),
        node_info("node-b", driver=None, vbios=None),
        node_info("node-c", driver="535.161.08"),
    ))  # fmt: skip
    # Two unknowns do not make a majority that node-c's known driver differs from.
    assert find_drift(rows) == {}


def test_one_node_and_an_empty_fleet_have_no_drift() -> None:
    assert find_drift(inventory_rows(fleet_of(node_info("node-a")))) == {}
    assert find_drift([]) == {}


def test_csv_has_header_plain_values_and_drift_column() -> None:
    rows = inventory_rows(fleet_of(
        node_info("node-a", gpus=1), node_info("node-b", gpus=1),
        node_info("node-c", gpus=1, driver="535.161.08", cuda="12.2", vbios=None),
    ))  # fmt: skip
    lines = list(csv.reader(io.StringIO(inventory_csv(rows))))
    assert lines[0] == [c.header for c in COLUMNS] + [DRIFT_HEADER]
    assert lines[0][:4] == ["Node", "Target", "GPU", "Model"]
    assert len(lines) == 4
    node_c = dict(zip(lines[0], lines[3], strict=True))
    assert node_c["Node"] == "node-c" and node_c["GPU"] == "0" and node_c["VBIOS"] == ""
    assert node_c["Driver"] == "535.161.08" and node_c[DRIFT_HEADER] == "Driver; CUDA"
    assert lines[1][-1] == ""


def test_drift_summary_wording() -> None:
    assert drift_summary(1) == "1 value differs from the fleet's majority"
    assert drift_summary(2) == "2 values differ from the fleet's majority"


# --- The table model and the panel -------------------------------------------------------


def column(header: str) -> int:
    return [c.header for c in COLUMNS].index(header)


@pytest.fixture
def thirteen_nodes() -> FleetModel:
    infos = [node_info(f"node-{n:02d}") for n in range(1, 13)]
    infos.insert(6, node_info("node-odd", driver="535.161.08"))
    return fleet_of(*infos)


def test_model_marks_the_drifting_cell(qtbot, thirteen_nodes: FleetModel) -> None:
    model = InventoryTableModel(thirteen_nodes)
    assert model.rowCount() == 26 and model.columnCount() == len(COLUMNS)
    driver = column("Driver")
    for row in range(model.rowCount()):
        for col in range(model.columnCount()):
            index = model.index(row, col)
            odd = model.index(row, 0).data() == "node-odd" and col == driver
            assert index.data(DRIFT_ROLE) is odd, (row, col)
            assert (index.data(Qt.ItemDataRole.BackgroundRole) is not None) is odd
    odd_cell = model.index(12, driver)
    assert odd_cell.data() == "535.161.08"
    assert odd_cell.data(Qt.ItemDataRole.ToolTipRole) == (
        "differs from the fleet's majority: 550.54.15 on 12 of 13 nodes"
    )
    assert model.drift_count() == 1


class Announcements:
    """What a model told its views: resets, changed rows, inserted and removed rows."""

    def __init__(self, model: InventoryTableModel) -> None:
        self.resets = 0
        self.changed: set[int] = set()
        self.inserted: list[tuple[int, int]] = []
        self.removed: list[tuple[int, int]] = []
        model.modelReset.connect(self._on_reset)
        model.dataChanged.connect(lambda a, b, *_: self.changed.update(range(a.row(), b.row() + 1)))
        model.rowsInserted.connect(lambda _p, a, b: self.inserted.append((a, b)))
        model.rowsRemoved.connect(lambda _p, a, b: self.removed.append((a, b)))

    def _on_reset(self) -> None:
        self.resets += 1

    @property
    def nothing(self) -> bool:
        return not (self.resets or self.changed or self.inserted or self.removed)


def refreshed(fleet: FleetModel, model: InventoryTableModel, *updates: InventoryUpdate) -> None:
    model.on_fleet_changed(fleet.apply_all(list(updates)))


def test_an_equal_or_unshown_change_tells_the_views_nothing(
    qtbot, thirteen_nodes: FleetModel
) -> None:
    model = InventoryTableModel(thirteen_nodes)
    told = Announcements(model)
    target = thirteen_nodes.nodes()[6].target
    info = thirteen_nodes.node(target).info
    assert info is not None
    refreshed(thirteen_nodes, model, InventoryUpdate(target, dataclasses.replace(info)))
    # A daemon up for weeks: its history tiers' oldest points move; the table shows none.
    tiers = (TierReach("raw", 1.0, 3600.0, 1_764_000_000.0),)
    aged = dataclasses.replace(info, history_tiers=tiers)
    refreshed(thirteen_nodes, model, InventoryUpdate(target, aged))
    assert thirteen_nodes.node(target).info is aged  # the fleet took it (the plots read it)
    assert told.nothing


def test_a_changed_value_repaints_that_node_s_rows_only(qtbot, thirteen_nodes: FleetModel) -> None:
    model = InventoryTableModel(thirteen_nodes)
    told = Announcements(model)
    odd = thirteen_nodes.nodes()[6].target  # rows 12 and 13
    refreshed(thirteen_nodes, model, InventoryUpdate(odd, node_info("node-odd")))  # upgraded
    assert (told.resets, told.inserted, told.removed) == (0, [], [])
    assert told.changed == {12, 13}
    assert model.index(12, column("Driver")).data() == MAJORITY_DRIVER
    assert model.drift_count() == 0 and not model.index(12, column("Driver")).data(DRIFT_ROLE)


def test_a_frame_of_samples_only_looks_at_no_node(qtbot, thirteen_nodes: FleetModel) -> None:
    """Most frames bring samples only; the table then looks at nothing (a look at each
    node's objects every frame cost 2.7 ms at 1,250 nodes)."""
    model = InventoryTableModel(thirteen_nodes)
    looks: list[int] = []
    look = model.refresh
    model.refresh = lambda: (looks.append(1), look())[1]  # type: ignore[method-assign]
    odd = thirteen_nodes.nodes()[6].target
    model.on_fleet_changed({odd: Change.DATA})  # its inventory and identity unchanged
    assert looks == []
    refreshed(thirteen_nodes, model, InventoryUpdate(odd, node_info("node-odd")))
    assert looks == [1] and model.index(12, column("Driver")).data() == MAJORITY_DRIVER


def test_rows_move_in_and_out_where_their_node_is(qtbot, thirteen_nodes: FleetModel) -> None:
    model = InventoryTableModel(thirteen_nodes)
    told = Announcements(model)
    late = "10.0.0.99:50051"
    thirteen_nodes.add_node(late)
    refreshed(thirteen_nodes, model, InventoryUpdate(late, node_info("node-late", gpus=3)))
    assert told.inserted == [(26, 28)] and told.resets == 0
    third = thirteen_nodes.nodes()[2].target  # rows 4 and 5 become four rows
    refreshed(thirteen_nodes, model, InventoryUpdate(third, node_info("node-03", gpus=4)))
    assert (told.removed, told.inserted[1:]) == ([(4, 5)], [(4, 7)])
    assert told.resets == 0 and model.rowCount() == 31
    assert [model.index(r, 0).data() for r in (3, 4, 7, 8)] == [
        "node-02", "node-03", "node-03", "node-04",
    ]  # fmt: skip
    assert model.rows() == inventory_rows(thirteen_nodes)


def test_a_new_majority_repaints_the_rows_that_now_drift(qtbot) -> None:
    fleet = fleet_of(node_info("a"), node_info("b"), node_info("c", driver="535.161.08"))
    model = InventoryTableModel(fleet)
    told = Announcements(model)
    driver = column("Driver")
    assert [model.index(r, driver).data(DRIFT_ROLE) for r in range(6)] == [False] * 4 + [True] * 2
    # b follows c: now a (rows 0, 1) is the odd one out, and c (4, 5) is not any more.
    refreshed(fleet, model, InventoryUpdate(fleet.nodes()[1].target,
                                            node_info("b", driver="535.161.08")))  # fmt: skip
    assert [model.index(r, driver).data(DRIFT_ROLE) for r in range(6)] == [True] * 2 + [False] * 4
    assert told.changed == {0, 1, 2, 3, 4, 5} and told.resets == 0


def shown_panel(qtbot, model: InventoryTableModel) -> InventoryPanel:
    """The panel on screen (close it before the test ends: see its callers)."""
    panel = InventoryPanel(model)
    qtbot.addWidget(panel)
    panel.resize(1400, 500)
    panel.show()
    qtbot.waitExposed(panel)
    return panel


class CountingModel(InventoryTableModel):
    """Counts the cells views read (a subclass: no cycle through the wrapper)."""

    reads = 0

    def data(self, index: QModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        self.reads += 1
        return super().data(index, role)


def test_one_node_s_change_reads_few_cells_of_a_thousand_gpus(qtbot) -> None:
    """A node's new driver among 1,000 GPUs shown, sorted and fitted: before, the table was
    reset, re-sorted and its columns fitted over every GPU (125,000 reads, a second's freeze)."""
    fleet = fleet_of(*[node_info(f"node-{n:03d}", gpus=8) for n in range(125)])
    model = CountingModel(fleet)
    panel = shown_panel(qtbot, model)
    panel.table.sortByColumn(column("Driver"), Qt.SortOrder.AscendingOrder)
    panel.table.selectRow(40)
    chosen = panel.proxy.index(40, column("UUID")).data()
    model.reads = 0
    target = fleet.nodes()[60].target
    refreshed(fleet, model, InventoryUpdate(target, node_info("node-060", gpus=8, driver="999.1")))
    assert model.reads < 2_000, model.reads
    assert panel.summary.text() == "1 value differs from the fleet's majority"
    rows = panel.table.selectionModel().selectedRows(column("UUID"))
    assert [r.data() for r in rows] == [chosen]  # the selection stayed on its GPU
    driven = [panel.proxy.index(r, column("Driver")).data() for r in range(panel.proxy.rowCount())]
    assert driven == sorted(driven) and driven.count("999.1") == 8
    panel.close()  # before the locals go: a shown parentless panel must not be collected


def table_text(panel: InventoryPanel) -> list[list[str]]:
    proxy = panel.proxy
    return [
        [proxy.index(r, c).data() for c in range(proxy.columnCount())]
        for r in range(proxy.rowCount())
    ]


def test_panel_sorts_filters_summarises_and_exports(
    qtbot, thirteen_nodes: FleetModel, tmp_path: Path
) -> None:
    model = InventoryTableModel(thirteen_nodes)
    panel = InventoryPanel(model)
    qtbot.addWidget(panel)
    assert panel.summary.text() == "1 value differs from the fleet's majority"

    panel.table.sortByColumn(column("Driver"), Qt.SortOrder.AscendingOrder)
    assert [row[0] for row in table_text(panel)[:2]] == ["node-odd", "node-odd"]
    panel.table.sortByColumn(column("Node"), Qt.SortOrder.DescendingOrder)
    names = [row[0] for row in table_text(panel)]
    assert names[0] == "node-odd" and names[2:4] == ["node-12", "node-12"]
    assert names == sorted(names, reverse=True)

    panel.filter.setText("NODE-ODD")
    assert panel.proxy.rowCount() == 2
    assert panel.proxy.index(0, column("Driver")).data(DRIFT_ROLE) is True
    panel.filter.clear()

    target = tmp_path / "inventory.csv"
    panel.choose_path = lambda: str(target)
    with qtbot.waitSignal(panel.message, timeout=1000) as message:
        qtbot.mouseClick(panel.export, Qt.MouseButton.LeftButton)
    assert message.args == [f"Exported the inventory of 26 GPUs to {target}"]
    lines = list(csv.reader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert lines[0] == [c.header for c in COLUMNS] + [DRIFT_HEADER]
    source_rows = [
        [model.index(r, c).data() for c in range(model.columnCount())]
        for r in range(model.rowCount())
    ]
    assert [line[:-1] for line in lines[1:]] == source_rows
    assert [line[-1] for line in lines[1:]].count("Driver") == 2


def test_panel_reports_a_failed_export_and_a_cancelled_one(
    qtbot, thirteen_nodes: FleetModel, tmp_path: Path
) -> None:
    panel = InventoryPanel(InventoryTableModel(thirteen_nodes))
    qtbot.addWidget(panel)
    panel.choose_path = lambda: str(tmp_path / "missing-dir" / "inventory.csv")
    with qtbot.waitSignal(panel.message, timeout=1000) as message:
        panel.export.click()
    assert message.args[0].startswith("Could not export the inventory: [Errno 2]")
    panel.choose_path = lambda: ""
    with qtbot.assertNotEmitted(panel.message):
        panel.export.click()


def test_columns_fit_new_rows_where_the_table_shows(qtbot) -> None:
    fleet = fleet_of(node_info("a"))
    model = InventoryTableModel(fleet)
    panel = shown_panel(qtbot, model)
    header = panel.table.horizontalHeader()
    narrow = header.sectionSize(column("Node"))
    long_name = "gpu-node-with-a-long-name-in-rack-17"
    fleet.add_node("10.0.0.50:50051")
    refreshed(fleet, model, InventoryUpdate("10.0.0.50:50051", node_info(long_name)))
    width = panel.table.fontMetrics().horizontalAdvance(long_name)
    # Fitted once the burst of arrivals is over, not with each one.
    assert header.sectionSize(column("Node")) == narrow
    qtbot.waitUntil(lambda: header.sectionSize(column("Node")) >= width, timeout=3000)
    # Hidden, the table is fitted when it shows again.
    panel.hide()
    longer = long_name + "-and-then-some-more"
    fleet.add_node("10.0.0.51:50051")
    refreshed(fleet, model, InventoryUpdate("10.0.0.51:50051", node_info(longer)))
    panel.show()
    assert header.sectionSize(column("Node")) >= panel.table.fontMetrics().horizontalAdvance(longer)
    panel.close()


def test_empty_fleet_shows_no_drift_and_cannot_export(qtbot) -> None:
    panel = InventoryPanel(InventoryTableModel(FleetModel()))
    qtbot.addWidget(panel)
    assert panel.summary.text() == "no drift" and not panel.export.isEnabled()
    assert panel.model.rowCount(QModelIndex()) == 0


# --- Against real daemons ----------------------------------------------------------------


def test_inventory_fills_from_real_daemons(qtbot, start_daemon) -> None:
    # Seed 3 plays a node left behind on an older driver and CUDA.
    daemons = [start_daemon(seed=s, hostname=f"node-{s}") for s in (0, 1, 3)]
    targets = [str(d.address) for d in daemons]
    session = ConsoleSession(targets)
    model = InventoryTableModel(session.fleet)
    session.pump.fleetChanged.connect(model.on_fleet_changed)
    panel = InventoryPanel(model)
    qtbot.addWidget(panel)
    try:
        session.start()
        qtbot.waitUntil(
            lambda: (
                all(session.fleet.node(t).state is LinkState.CONNECTED for t in targets)
                and model.rowCount() == 8 * len(targets)
            ),
            timeout=15_000,
        )
        drifting = {
            model.index(r, 0).data()
            for r in range(model.rowCount())
            if model.index(r, column("Driver")).data(DRIFT_ROLE)
        }
        assert drifting == {"node-3"}
        assert panel.summary.text() == "2 values differ from the fleet's majority"
    finally:
        session.stop()
