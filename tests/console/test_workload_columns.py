"""The Workloads table gives the reason a workload waits the room to be read (issue #33:
"Waiting because" was cut while Command was wide); what is still cut is whole in the
tooltip."""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import Qt

from console.qt.workload_model import COLUMNS, WorkloadTableModel
from console.views.control.workload_panel import COMMAND_COLUMN, WAIT_COLUMN, WorkloadPanel
from tests.console.test_control_model import A, fleet_with, workload

REASON = "behind w-3 (priority 10 over 0), then waiting for 2 GPUs with 40 GiB free each"
COMMAND = ("python", "-m", "trainer.main", "--config", "configs/very/long/path/run.yaml",
           "--epochs", "300", "--checkpoint-dir", "/scratch/alice/ckpt/run-0042")  # fmt: skip


def test_the_reason_gets_the_room_and_the_command_is_cut(qtbot) -> None:  # type: ignore[no-untyped-def]
    fleet = fleet_with(A)
    fleet.control.apply(dataclasses.replace(workload("w-4"), wait_reason=REASON, argv=COMMAND))
    panel = WorkloadPanel(WorkloadTableModel(fleet))
    qtbot.addWidget(panel)
    panel.resize(1366, 300)
    panel.show()
    qtbot.waitExposed(panel)
    table, header = panel.table, panel.table.horizontalHeader()
    metrics = table.fontMetrics()
    # The whole reason fits its column (a cell's margins included), and the command,
    # longer, is the one cut: the reason's column is the wider.
    assert header.sectionSize(WAIT_COLUMN) >= metrics.horizontalAdvance(REASON) + 8
    assert header.sectionSize(WAIT_COLUMN) > header.sectionSize(COMMAND_COLUMN)
    assert header.sectionSize(COMMAND_COLUMN) < metrics.horizontalAdvance(" ".join(COMMAND))
    # Every column in view: nothing pushed off to the right.
    assert header.length() <= table.viewport().width()
    # What a cut cell leaves out is in the row's tooltip, whole.
    reason_cell = table.model().index(0, COLUMNS.index("Waiting because"))
    tooltip = reason_cell.data(Qt.ItemDataRole.ToolTipRole)
    assert REASON in tooltip and " ".join(COMMAND) in tooltip
    assert reason_cell.data() == REASON
