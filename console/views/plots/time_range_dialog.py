"""TimeRangeDialog: Custom… asks for a fixed range, from and to, in local time."""

from __future__ import annotations

from PySide6.QtCore import QDateTime
from PySide6.QtWidgets import (
    QDateTimeEdit,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QWidget,
)

from console.fleet.time_range import MIN_SPAN_S
from console.views.common.dialog_buttons import ok_cancel_buttons

FORMAT = "yyyy-MM-dd HH:mm:ss"


class TimeRangeDialog(QDialog):
    def __init__(self, start_s: float, end_s: float, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timeRangeDialog")
        self.setWindowTitle("Plot range")
        self.start = self._edit(start_s)
        self.end = self._edit(end_s)
        self.problem = QLabel("")
        self.problem.setObjectName("dialogProblem")
        self.buttons, _ = ok_cancel_buttons(self)
        form = QFormLayout(self)
        form.addRow("From", self.start)
        form.addRow("To", self.end)
        form.addRow(self.problem)
        form.addRow(self.buttons)
        self.start.dateTimeChanged.connect(self._check)
        self.end.dateTimeChanged.connect(self._check)
        self.start.setFocus()  # the field a person types in first
        self._check()

    def _edit(self, t: float) -> QDateTimeEdit:
        edit = QDateTimeEdit(QDateTime.fromSecsSinceEpoch(int(t)))
        edit.setDisplayFormat(FORMAT)
        edit.setCalendarPopup(True)
        return edit

    def chosen(self) -> tuple[float, float]:
        """(from, to) in epoch seconds."""
        return float(self.start.dateTime().toSecsSinceEpoch()), float(
            self.end.dateTime().toSecsSinceEpoch()
        )

    def _check(self) -> None:
        start, end = self.chosen()
        ok = end - start >= MIN_SPAN_S  # the plots' narrowest zoom
        self.problem.setText(
            "" if ok else f"“To” must be at least {MIN_SPAN_S:.0f} s after “From”."
        )
        self.buttons.button(QDialogButtonBox.StandardButton.Ok).setEnabled(ok)
