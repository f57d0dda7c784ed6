"""The GPU detail's current readings, its reservation line and the process table's columns.

Model tests build ring rows as the decoder does; the window tests run against a
real simulated daemon over loopback.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator

import grpc
import pytest

from console.fleet.gpu_readings import MISSING, Reading, gpu_readings, throttle_text
from console.fleet.model import FleetModel
from console.fleet.process_cells import HEADERS, elapsed_text
from console.fleet.process_row import ProcessRow
from console.fleet.updates import (
    LinkState,
)
from console.main_window import MainWindow
from console.qt.process_model import ProcessTableModel
from console.session import ConsoleSession
from console.views.detail.readings_table import ReadingsTable
from gpufleet.policy import LOCAL_USER
from gpufleet.v1 import gpu_metrics as m
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.conftest import DaemonFactory
from tests.console.hand_fed import gpus_of, node_up, samples, simulated_node

A = "10.0.0.1:50051"
GIB = 1024**3
NOW_S = 1_800_000_000.0

READING = {
    m.SM_CLOCK_MHZ: 1410,
    m.MEM_CLOCK_MHZ: 1215,
    m.FAN_PCT: 41,
    m.POWER_W: 212.4,
    m.POWER_LIMIT_W: 400,
    m.PSTATE: 2,
    m.TEMP_GPU_C: 64,
    m.TEMP_MEM_C: 71,
    m.UTIL_GPU_PCT: 87,
    m.UTIL_MEM_PCT: 35,
    m.MEM_USED_BYTES: 17.25,
    m.MEM_TOTAL_BYTES: 40,
    m.ECC_CORRECTED_TOTAL: 3,
    m.ECC_UNCORRECTED_TOTAL: 0,
    m.PCIE_RX_BYTES_PER_S: 1234.4,
    m.PCIE_TX_BYTES_PER_S: 56,
    m.THROTTLE_REASONS: 0x4 | 0x40,
}  # fmt: skip  (shown units: GiB, MB/s)


def fleet_of_one(power_limit_w: float | None = 350.0) -> FleetModel:
    fleet = FleetModel(ring_capacity=8)
    fleet.add_node(A)
    gpus = gpus_of(1, model="A100", memory_total_bytes=40 * GIB, power_limit_w=power_limit_w)
    fleet.apply_all(node_up(A, simulated_node("node-a", gpus)))
    return fleet


def sample(fleet: FleetModel, values: dict, tick: float) -> None:  # type: ignore[type-arg]
    fleet.apply(samples(A, tick, 1, values))


def test_every_reading_in_the_catalogues_units() -> None:
    fleet = fleet_of_one()
    sample(fleet, READING, NOW_S)
    shown = {r.label: r.text for r in gpu_readings(fleet.node(A), 0)}
    assert shown == {
        "Clocks": "SM 1,410 · memory 1,215 MHz",
        "Power": "212 W of 400 W limit",  # the sample's limit (self-healing may lower it)
        "Fan": "41 %",
        "P-state": "P2",
        "Temperature": "GPU 64 · memory 71 °C",
        "Utilisation": "SM 87 · memory 35 %",
        "Memory": "17.2 of 40.0 GiB",
        "ECC errors": "3 corrected · 0 uncorrected",
        "PCIe": "RX 1,234 · TX 56 MB/s",
        "Throttling": "software power cap, hardware thermal slowdown",
    }


def test_what_a_gpu_does_not_report_reads_as_a_dash_never_zero() -> None:
    fleet = fleet_of_one()
    sample(fleet, {m.TEMP_GPU_C: 50, m.POWER_W: 100}, NOW_S)  # a passively cooled GPU, no ECC
    shown = {r.label: r.text for r in gpu_readings(fleet.node(A), 0)}
    assert shown["Fan"] == MISSING
    assert shown["ECC errors"] == f"{MISSING} corrected · {MISSING} uncorrected"
    assert shown["Power"] == "100 W of 350 W limit"  # the inventory's limit until a sample says
    assert shown["Throttling"] == MISSING
    assert throttle_text(0) == "none" and throttle_text(0x1000) == "0x1000"


def test_the_readings_are_the_newest_sample_of_the_frame() -> None:
    """Three samples applied in one frame: the table shows the last, not the first."""
    fleet = fleet_of_one()
    for n, temp in enumerate((60, 61, 66)):
        sample(fleet, {**READING, m.TEMP_GPU_C: temp}, NOW_S + n)
    shown = {r.label: r.text for r in gpu_readings(fleet.node(A), 0)}
    assert shown["Temperature"] == "GPU 66 · memory 71 °C"


def test_process_table_has_nvitops_columns_and_dashes_for_the_unknown() -> None:
    assert HEADERS == ("PID", "User", "GPU memory", "SM %", "CPU %", "Host memory", "Elapsed",
                       "Container / job", "Command")  # fmt: skip
    full = ProcessRow(pid=4242, user="alice", command="python train.py",
                      gpu_memory_bytes=8 * GIB, start_time_unix_ms=int((NOW_S - 3723) * 1000),
                      container_id="3f2a9c1b0d4e5f60", slurm_job_id="812", sm_util_pct=73.4,
                      cpu_pct=104.0, host_memory_bytes=3 * GIB)  # fmt: skip
    bare = ProcessRow(pid=7, user=None, command=None, gpu_memory_bytes=None,
                      start_time_unix_ms=None, container_id=None, slurm_job_id=None)  # fmt: skip
    clock = [NOW_S]
    model = ProcessTableModel(lambda: clock[0])
    model.set_processes((full, bare), (A, "node-a", 0))

    def row(r: int) -> list[str]:
        return [model.index(r, c).data() for c in range(model.columnCount())]

    assert row(0) == ["4242", "alice", "8,192 MiB", "73 %", "104 %", "3,072 MiB", "1:02:03",
                      "3f2a9c1b0d4e · job 812", "python train.py"]  # fmt: skip
    assert row(1) == ["7", MISSING, MISSING, MISSING, MISSING, MISSING, MISSING, "", MISSING]
    # The same processes a second later: the elapsed time moves without a reset.
    clock[0] += 1
    model.set_processes((full, bare), (A, "node-a", 0))
    assert model.index(0, HEADERS.index("Elapsed")).data() == "1:02:04"
    assert elapsed_text(2 * 86400 + 5) == "2-00:00:05" and elapsed_text(65) == "01:05"


# -- against a real daemon ----------------------------------------------------------


@pytest.fixture
def window(qtbot, start_daemon: DaemonFactory) -> Iterator[tuple[MainWindow, str]]:
    daemon = start_daemon(gpus=2, hostname="node-a", seed=1)
    target = str(daemon.address)
    session = ConsoleSession([target])
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    session.start()
    window.show()
    node = session.fleet.node(target)
    qtbot.waitUntil(lambda: node.state is LinkState.CONNECTED and len(node.latest) == 2,
                    timeout=15_000)  # fmt: skip
    yield window, target
    session.stop()


def test_the_detail_shows_a_simulated_gpus_readings_and_its_holder(qtbot, window) -> None:
    window, target = window
    window.grid.select(target, 1)
    readings = window.detail.readings
    qtbot.waitUntil(lambda: "MHz" in readings.texts().get("Clocks", ""), timeout=10_000)
    shown = readings.texts()
    assert shown["Reservation"] == "Not reserved"
    assert shown["Power"].endswith(" W limit") and MISSING not in shown["Power"]
    assert shown["Temperature"].startswith("GPU ") and shown["Temperature"].endswith(" °C")
    assert readings.isVisible()
    # Reserved through another connection: the detail says for whom, why, until when, by
    # whom (without authentication every caller is the one local admin; a claimed actor
    # is not recorded).
    until = int((time.time() + 2 * 3600 + 60) * 1000)
    with grpc.insecure_channel(target) as channel:
        pb_grpc.NodeServiceStub(channel).Reserve(
            pb.ReserveRequest(gpu_indices=[1], holder="team:ml", until_unix_ms=until,
                              reason="training run", actor="alice"), timeout=5)  # fmt: skip
    qtbot.waitUntil(lambda: readings.texts()["Reservation"] != "Not reserved", timeout=10_000)
    text = readings.texts()["Reservation"]
    assert text.startswith("Reserved for team:ml · training run · until ")
    assert re.search(r"\((2 h|2 h 1 min) left\)", text), text
    assert text.endswith(f" · by {LOCAL_USER}")


def test_every_label_and_value_is_painted_on_its_line_and_a_long_one_is_cut(qtbot) -> None:
    """The pairs are painted, not labels: every line shows a label and a value, and a
    value too long for the panel stops at its edge (whole in the tooltip)."""
    table = ReadingsTable()
    qtbot.addWidget(table)
    readings = [Reading(f"Label {n}", f"value {n}") for n in range(9)]
    long_text = "software power cap, hardware slowdown, " * 4
    readings.append(Reading("Throttling", long_text))
    table.show_readings(readings, "")
    table.resize(560, table.sizeHint().height())
    table.show()
    qtbot.waitExposed(table)
    pairs = table.pairs
    image = pairs.grab().toImage()
    background = image.pixelColor(image.width() - 1, image.height() - 1)
    step = pairs.fontMetrics().lineSpacing()

    def inked(x0: int, x1: int, line: int) -> int:
        return sum(
            image.pixelColor(x, y) != background
            for x in range(max(0, x0), min(image.width(), x1))
            for y in range(line * step, min(image.height(), (line + 1) * step))
        )

    label_w = pairs.fontMetrics().horizontalAdvance("Label 0")
    for line in range(5):
        assert inked(0, label_w, line) > 0, f"line {line}: no label"
        assert inked(label_w + 10, label_w + 60, line) > 0, f"line {line}: no value"
    # The last line's second pair is the long one: painted up to the edge, not past it.
    assert inked(image.width() - 40, image.width() - 2, 4) > 0
    assert long_text.strip() in pairs.toolTip()


def test_an_inline_script_reads_as_one_line_in_tables_and_dialogs() -> None:
    """The demo's workloads were `python -c '<five lines>'`: every row of the Workloads and
    process tables wrapped and the kill dialog showed the whole script."""
    from console.fleet.process_cells import one_line

    script = "import sys, time\nfor step in range(9):\n    print(step)\n"
    assert one_line(f"python3 -c {script} run-1") == (
        "python3 -c import sys, time ⏎ for step in range(9): ⏎ print(step) ⏎ run-1"
    )
    assert one_line("sleep 600") == "sleep 600"
    assert one_line(None) == "" and one_line("\n\n") == ""
