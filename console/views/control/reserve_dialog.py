"""ReserveDialog: until when, and why, GPUs are reserved for a user or team.

Focus starts where a person types: in the reason when the holder came with the
gesture (a person dropped, or chosen from the People tab), in "For" when it did
not. A reason typed at once must never become the holder's name. Enter reserves
once the form is complete.
"""

from __future__ import annotations

from PySide6.QtCore import QDateTime, QTime
from PySide6.QtWidgets import (
    QComboBox,
    QDateTimeEdit,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QWidget,
)

from console.views.common.dialog_buttons import ok_cancel_buttons

# (label, seconds from now); None: until 18:00 today (or tomorrow, past 18:00).
PRESETS: tuple[tuple[str, int | None], ...] = (
    ("1 hour", 3600), ("4 hours", 4 * 3600), ("until 18:00", None), ("1 day", 86400),
    ("1 week", 7 * 86400),
)  # fmt: skip
DEFAULT_PRESET = 1
END_OF_DAY = QTime(18, 0)


class ReserveDialog(QDialog):
    def __init__(self, holder: str, what: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("reserveDialog")
        self.setWindowTitle("Reserve GPUs")
        self.holder = QLineEdit(holder)
        self.holder.setPlaceholderText('a user name, or a team as "team:NAME"')
        self.preset = QComboBox()
        for label, seconds in PRESETS:
            self.preset.addItem(label, seconds)
        self.until = QDateTimeEdit(calendarPopup=True, displayFormat="yyyy-MM-dd HH:mm")
        self.reason = QLineEdit()
        self.reason.setPlaceholderText("why, e.g. training run for the paper deadline")
        self.buttons, self.ok = ok_cancel_buttons(self, "Reserve")
        self.ok.setDefault(True)
        form = QFormLayout(self)
        form.addRow("GPUs", QLabel(what))
        form.addRow("For", self.holder)
        form.addRow("How long", self.preset)
        form.addRow("Until", self.until)
        form.addRow("Reason", self.reason)
        form.addRow(self.buttons)
        self.preset.currentIndexChanged.connect(self._on_preset_current_index_changed)
        for edit in (self.holder, self.reason):
            edit.textChanged.connect(self._on_input_changed)
        self.until.dateTimeChanged.connect(self._on_input_changed)
        self.preset.setCurrentIndex(DEFAULT_PRESET)
        self._on_preset_current_index_changed(DEFAULT_PRESET)
        (self.reason if holder.strip() else self.holder).setFocus()

    def _on_preset_current_index_changed(self, index: int) -> None:
        seconds = self.preset.itemData(index)
        now = QDateTime.currentDateTime()
        if seconds is not None:
            self.until.setDateTime(now.addSecs(int(seconds)))
            return
        evening = QDateTime(now.date(), END_OF_DAY)
        self.until.setDateTime(evening if evening > now else evening.addDays(1))

    def _on_input_changed(self, *_args: object) -> None:
        ok = self.buttons.button(QDialogButtonBox.StandardButton.Ok)
        ok.setEnabled(
            bool(self.holder.text().strip())
            and bool(self.reason.text().strip())
            and self.until.dateTime() > QDateTime.currentDateTime()
        )

    @property
    def until_unix_ms(self) -> int:
        return int(self.until.dateTime().toMSecsSinceEpoch())
