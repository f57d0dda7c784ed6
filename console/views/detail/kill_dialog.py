"""KillDialog: names what dies — pid, user, command, GPU, node — before a kill is sent.

From the keyboard: focus starts in the grace period (the one field to type in);
Enter is Cancel, never the kill; Tab to the Kill button and Space sends it.
"""

from __future__ import annotations

import time

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QSpinBox,
    QWidget,
)

from console.connections.control_actions import DEFAULT_GRACE_S
from console.fleet.control_requests import KillTarget
from console.fleet.placement import gib_text
from console.fleet.process_cells import one_line
from console.views.common.dialog_buttons import ok_cancel_buttons

MAX_GRACE_S = 300


class KillDialog(QDialog):
    def __init__(self, victim: KillTarget, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("killDialog")
        self.setWindowTitle("Kill process")
        self.victim = victim
        p = victim.process
        self.question = QLabel(f"Kill pid {p.pid} on {victim.node_name} GPU {victim.gpu}?")
        self.question.setObjectName("killQuestion")
        how = QLabel("The node sends TERM, waits the grace period, then KILL.")
        self.grace = QSpinBox(minimum=1, maximum=MAX_GRACE_S, value=DEFAULT_GRACE_S, suffix=" s")
        self.buttons, kill = ok_cancel_buttons(self, f"Kill pid {p.pid}")
        kill.setObjectName("killButton")
        # Enter must not kill: Cancel is the default button.
        kill.setAutoDefault(False)
        self.buttons.button(QDialogButtonBox.StandardButton.Cancel).setDefault(True)
        form = QFormLayout(self)
        form.addRow(self.question)
        form.addRow(how)
        for label, value in self._facts():
            form.addRow(label, QLabel(value))
        form.addRow("Grace before KILL", self.grace)
        form.addRow(self.buttons)
        self.grace.setFocus()

    def _facts(self) -> list[tuple[str, str]]:
        v, p = self.victim, self.victim.process
        started = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(p.start_time_unix_ms / 1000))
            if p.start_time_unix_ms is not None
            else "unknown"
        )
        facts = [
            ("Node", f"{v.node_name} ({v.target})"), ("GPU", str(v.gpu)), ("PID", str(p.pid)),
            ("User", p.user or "unknown"), ("Command", one_line(p.command) or "unknown"),
            ("Started", started),
            ("GPU memory", gib_text(p.gpu_memory_bytes) if p.gpu_memory_bytes else "n/a"),
        ]  # fmt: skip
        if p.container_id:
            facts.append(("Container", p.container_id[:12]))
        if p.slurm_job_id:
            facts.append(("Slurm job", p.slurm_job_id))
        return facts

    @property
    def grace_s(self) -> int:
        return int(self.grace.value())
