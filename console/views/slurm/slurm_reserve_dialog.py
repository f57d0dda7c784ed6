"""The Slurm reservation a holder's drop asks for: its name, when, how long, Slurm's flags.

It starts now unless a later start is chosen (a maintenance window, tomorrow's
course); its end follows the duration and the duration follows an end typed in.
Times are the desktop's local time; Slurm is sent them as UTC epochs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from PySide6.QtCore import QDateTime
from PySide6.QtWidgets import (
    QDateTimeEdit,
    QDialog,
    QFormLayout,
    QLabel,
    QLineEdit,
    QSpinBox,
    QWidget,
)

from console.fleet.slurm_model import ReservationAsk
from console.fleet.slurm_view import SlurmReserve, reservation_name
from console.views.common.dialog_buttons import ok_cancel_buttons

# A start within this of the dialog's opening is "now" (Slurm's starttime=now): the
# minute the person took to fill the dialog in must not make it a future start.
NOW_SLACK_S = 120
TIME_FORMAT = "yyyy-MM-dd HH:mm"


def _time_edit(name: str) -> QDateTimeEdit:
    edit = QDateTimeEdit()
    edit.setObjectName(name)
    edit.setDisplayFormat(TIME_FORMAT)
    edit.setCalendarPopup(True)
    return edit


class SlurmReserveDialog(QDialog):
    def __init__(
        self,
        reserve: SlurmReserve,
        parent: QWidget | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("slurmReserveDialog")
        self.setMinimumWidth(460)  # the name and the flags' hint whole, not cut
        self._reserve, self._clock = reserve, clock
        self._opened = clock()
        whom = f"account {reserve.accounts[0]}" if reserve.accounts else reserve.holder
        self.setWindowTitle(f"Reserve in Slurm for {whom}")
        self.name = QLineEdit(reservation_name(reserve.holder, time.strftime("%m%d-%H%M")))
        self.name.setObjectName("slurmReservationName")
        self.minutes = QSpinBox()
        self.minutes.setObjectName("slurmReservationMinutes")
        self.minutes.setRange(1, 60 * 24 * 30)
        self.minutes.setValue(120)
        self.minutes.setSuffix(" min")
        opened = QDateTime.fromSecsSinceEpoch(int(self._opened))
        self.start = _time_edit("slurmReservationStart")
        self.start.setMinimumDateTime(opened.addSecs(-60))
        self.start.setDateTime(opened)
        self.start.setToolTip("Now, or a later start (local time)")
        self.end = _time_edit("slurmReservationEnd")
        self.end.setToolTip("Follows the duration; an end typed in sets the duration")
        self._follow_duration()
        self.start.dateTimeChanged.connect(self._follow_duration)
        self.minutes.valueChanged.connect(self._follow_duration)
        self.end.dateTimeChanged.connect(self._on_end_changed)
        self.flags = QLineEdit()
        self.flags.setObjectName("slurmReservationFlags")
        self.flags.setPlaceholderText("e.g. IGNORE_JOBS (comma-separated; Slurm's flags)")
        buttons, _ = ok_cancel_buttons(self, "Reserve")
        form = QFormLayout(self)
        form.addRow(QLabel(f"Nodes {', '.join(reserve.nodes)}, for {whom}."))
        form.addRow("Name", self.name)
        form.addRow("Starts", self.start)
        form.addRow("Duration", self.minutes)
        form.addRow("Ends", self.end)
        form.addRow("Flags", self.flags)
        form.addRow(buttons)

    def _follow_duration(self) -> None:
        ends = self.start.dateTime().addSecs(60 * self.minutes.value())
        if self.end.dateTime() != ends:
            self.end.blockSignals(True)  # not taken for an end typed in
            self.end.setDateTime(ends)
            self.end.blockSignals(False)

    def _on_end_changed(self, end: QDateTime) -> None:
        minutes = self.start.dateTime().secsTo(end) // 60
        if minutes >= self.minutes.minimum():
            self.minutes.setValue(min(minutes, self.minutes.maximum()))
        self._follow_duration()  # an end before the start snaps back to start + duration

    def starts_now(self) -> bool:
        return self.start.dateTime().toSecsSinceEpoch() <= self._opened + NOW_SLACK_S

    def ask(self) -> ReservationAsk:
        flags = tuple(f.strip().upper() for f in self.flags.text().split(",") if f.strip())
        r = self._reserve
        start = None
        if not self.starts_now():
            start = datetime.fromtimestamp(self.start.dateTime().toSecsSinceEpoch(), UTC)
        return ReservationAsk(self.name.text().strip(), r.nodes, r.users, r.accounts,
                              start=start, duration=timedelta(minutes=self.minutes.value()),
                              flags=flags)  # fmt: skip
