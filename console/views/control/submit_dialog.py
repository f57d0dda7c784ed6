"""SubmitDialog: a command for the queue of one node — GPUs, memory, owner, auto-place,
priority and time limit.

Focus starts in the command (the node is preselected, the owner is us); Enter
submits once the command parses.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from console.fleet.control_requests import WorkloadSpec
from console.views.common.dialog_buttons import ok_cancel_buttons

GIB = 1024**3
MAX_GPUS = 64
MAX_MEMORY_GIB = 1024
MAX_PRIORITY = 10_000  # the node's bound (node_daemon.control.workloads)
MAX_LIMIT_MIN = 366 * 24 * 60


def parse_command(text: str) -> tuple[str, ...]:
    """A command line as the shell splits it; () when it does not parse."""
    try:
        return tuple(shlex.split(text))
    except ValueError:  # an unclosed quote
        return ()


class SubmitDialog(QDialog):
    def __init__(
        self,
        nodes: Sequence[tuple[str, str]],
        owner: str,
        people: Sequence[str] = (),
        parent: QWidget | None = None,
    ) -> None:
        """`nodes`: (target, name) of each connected node; `people`: owners to offer."""
        super().__init__(parent)
        self.setObjectName("submitDialog")
        self.setWindowTitle("Submit workload")
        self.node = QComboBox()
        for target, name in nodes:
            self.node.addItem(f"{name} ({target})" if name != target else target, target)
        self.command = QLineEdit()
        self.command.setPlaceholderText("python train.py --epochs 10")
        self.name = QLineEdit()
        self.name.setPlaceholderText("optional; the program's name if empty")
        self.owner = QComboBox(editable=True)
        self.owner.addItems(list(dict.fromkeys([owner, *people])))
        self.gpus = QSpinBox(minimum=1, maximum=MAX_GPUS, value=1)
        self.memory = QSpinBox(minimum=0, maximum=MAX_MEMORY_GIB, suffix=" GiB")
        self.memory.setSpecialValueText("any")
        self.auto_place = QCheckBox("Start as soon as GPUs fit (the fair queue)")
        self.priority = QSpinBox(minimum=-MAX_PRIORITY, maximum=MAX_PRIORITY, value=0)
        self.priority.setToolTip("Higher runs first; equal priorities in the order queued")
        self.time_limit = QSpinBox(minimum=0, maximum=MAX_LIMIT_MIN, suffix=" min")
        self.time_limit.setSpecialValueText("the node's default")
        self.time_limit.setToolTip(
            "Walltime: at the limit TERM, then KILL after the node's grace; ends 'timed out'"
        )
        self.buttons, ok = ok_cancel_buttons(self, "Submit")
        ok.setDefault(True)
        form = QFormLayout(self)
        for label, widget in (("Node", self.node), ("Command", self.command), ("Name", self.name),
                              ("Owner", self.owner), ("GPUs", self.gpus),
                              ("Min free memory", self.memory), ("", self.auto_place),
                              ("Priority", self.priority),
                              ("Time limit", self.time_limit)):  # fmt: skip
            form.addRow(label, widget)
        form.addRow(self.buttons)
        self.command.textChanged.connect(self._on_input_changed)
        self.owner.editTextChanged.connect(self._on_input_changed)
        self._on_input_changed()
        self.command.setFocus()

    def _on_input_changed(self, *_args: object) -> None:
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setEnabled(
            bool(parse_command(self.command.text())) and bool(self.owner.currentText().strip())
        )

    @property
    def target(self) -> str:
        return str(self.node.currentData())

    def spec(self) -> WorkloadSpec:
        argv = parse_command(self.command.text())
        return WorkloadSpec(
            name=self.name.text().strip() or (argv[0].rsplit("/", 1)[-1] if argv else ""),
            argv=argv,
            owner=self.owner.currentText().strip(),
            gpu_count=int(self.gpus.value()),
            min_free_memory_bytes=int(self.memory.value()) * GIB,
            auto_place=self.auto_place.isChecked(),
            priority=int(self.priority.value()),
            time_limit_s=int(self.time_limit.value()) * 60,
        )
