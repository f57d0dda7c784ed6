"""ReadingsTable: a GPU's current readings (clocks, power, fan, ECC…) and its reservation.

Two columns of label/value pairs, filled from console.fleet.gpu_readings each
frame the GPU's node changed. A text is set only when it differs: a QLabel's
setText relayouts even for the same text.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QGridLayout, QLabel, QWidget

from console.fleet.gpu_readings import Reading

PAIRS_PER_LINE = 2


class ReadingsTable(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("detailReadings")
        self._grid = QGridLayout(self)
        self._grid.setContentsMargins(0, 2, 0, 2)
        self._grid.setHorizontalSpacing(10)
        self._grid.setVerticalSpacing(1)
        self._labels: list[QLabel] = []
        self._values: list[QLabel] = []
        self.reservation = QLabel("")
        self.reservation.setObjectName("detailReservation")
        self.reservation.setWordWrap(True)
        self.reservation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        # The pairs keep together at the left, however wide the panel (a 4K screen).
        self._grid.setColumnStretch(2 * PAIRS_PER_LINE, 1)
        # Who holds the GPU first, over the table's width: the question asked most.
        self._grid.addWidget(self.reservation, 0, 0, 1, 2 * PAIRS_PER_LINE)

    def texts(self) -> dict[str, str]:
        """What the table shows, label to value (tests and screenshots read it)."""
        shown = {k.text(): v.text() for k, v in zip(self._labels, self._values, strict=True)}
        shown["Reservation"] = self.reservation.text()
        return shown

    def show_readings(self, readings: Sequence[Reading], reservation: str) -> None:
        while len(self._labels) < len(readings):
            self._add_pair()
        for label, value, reading in zip(self._labels, self._values, readings, strict=False):
            _set(label, reading.label)
            _set(value, reading.text)
        _set(self.reservation, f"Reserved for {reservation}" if reservation else "Not reserved")

    def _add_pair(self) -> None:
        n = len(self._labels)
        line, pair = divmod(n, PAIRS_PER_LINE)
        label, value = QLabel(), QLabel()
        label.setObjectName("readingLabel")
        value.setObjectName("readingValue")
        value.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self._grid.addWidget(label, line + 1, 2 * pair)
        self._grid.addWidget(value, line + 1, 2 * pair + 1)
        if pair:
            label.setContentsMargins(16, 0, 0, 0)  # a gap between the pairs of a line
        self._labels.append(label)
        self._values.append(value)


def _set(label: QLabel, text: str) -> None:
    if label.text() != text:
        label.setText(text)
