"""The Slurm reservation a holder's drop asks for: its name, how long, Slurm's flags."""

from __future__ import annotations

import time
from datetime import timedelta

from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from console.fleet.slurm_model import ReservationAsk
from console.fleet.slurm_view import SlurmReserve, reservation_name


class SlurmReserveDialog(QDialog):
    def __init__(self, reserve: SlurmReserve, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("slurmReserveDialog")
        self._reserve = reserve
        whom = f"account {reserve.accounts[0]}" if reserve.accounts else reserve.holder
        self.setWindowTitle(f"Reserve in Slurm for {whom}")
        self.name = QLineEdit(reservation_name(reserve.holder, time.strftime("%m%d-%H%M")))
        self.name.setObjectName("slurmReservationName")
        self.minutes = QSpinBox()
        self.minutes.setObjectName("slurmReservationMinutes")
        self.minutes.setRange(1, 60 * 24 * 30)
        self.minutes.setValue(120)
        self.minutes.setSuffix(" min")
        self.flags = QLineEdit()
        self.flags.setObjectName("slurmReservationFlags")
        self.flags.setPlaceholderText("e.g. IGNORE_JOBS (comma-separated; Slurm's flags)")
        buttons = QDialogButtonBox(
            QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
        )
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Reserve")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow(QLabel(f"Nodes {', '.join(reserve.nodes)}, from now, for {whom}."))
        form.addRow("Name", self.name)
        form.addRow("Duration", self.minutes)
        form.addRow("Flags", self.flags)
        form.addRow(buttons)

    def ask(self) -> ReservationAsk:
        flags = tuple(f.strip().upper() for f in self.flags.text().split(",") if f.strip())
        r = self._reserve
        return ReservationAsk(self.name.text().strip(), r.nodes, r.users, r.accounts,
                              duration=timedelta(minutes=self.minutes.value()),
                              flags=flags)  # fmt: skip
