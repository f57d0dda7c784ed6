"""ReadingsTable: a GPU's current readings (clocks, power, fan, ECC…) and its reservation.

Label/value pairs, two to a line, filled from console.fleet.gpu_readings each
frame the GPU's node changed. The pairs are painted, not QLabels: a sample
changes most values every second, and a QLabel's setText relayouts the whole
detail panel (~2 ms a sample, measured with thread CPU time offscreen), while a
repaint of these lines is a fraction of that. The size asked for is fixed by
the font, so new values never move the plots below.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QPoint, QRect, QSize, Qt
from PySide6.QtGui import QFontMetrics, QPainter, QPaintEvent, QPalette
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from console.fleet.gpu_readings import Reading

PAIRS_PER_LINE = 2
LINES = 5  # the ten readings of gpu_readings
GAP = 10  # between a label and its value
PAIR_GAP = 16  # between the pairs of a line
# The widest value a column is sized for before one is seen ("SM 1,980 MHz · memory 2,619 MHz").
WIDE_VALUE = "SM 0,000 MHz · memory 0,000 MHz"


class _Pairs(QWidget):
    """The painted pairs; texts change with a repaint only."""

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("readingPairs")
        self.readings: tuple[Reading, ...] = ()
        self._value_w = [0] * PAIRS_PER_LINE
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        metrics = QFontMetrics(self.font())
        label = max((metrics.horizontalAdvance(r.label) for r in self.readings), default=80)
        value = metrics.horizontalAdvance(WIDE_VALUE)
        width = PAIRS_PER_LINE * (label + GAP + value) + PAIR_GAP
        return QSize(width, LINES * metrics.lineSpacing() + 2)

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self.sizeHint().height())

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        metrics = QFontMetrics(self.font())
        step = metrics.lineSpacing()
        text = self.palette().color(QPalette.ColorRole.WindowText)
        dim = self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText)
        x = 0
        for pair in range(PAIRS_PER_LINE):
            column = self.readings[pair::PAIRS_PER_LINE]
            label_w = max((metrics.horizontalAdvance(r.label) for r in column), default=0)
            # The widest value so far: the next pair does not jump as values change.
            seen = [metrics.horizontalAdvance(r.text) for r in column]
            self._value_w[pair] = max(self._value_w[pair], *seen, 0)
            last = pair == PAIRS_PER_LINE - 1
            # (+2: an exact fit can still elide its last letter.)
            room = max(0, self.width() - x - label_w - GAP) if last else self._value_w[pair] + 2
            for line, reading in enumerate(column):
                y = line * step
                painter.setPen(dim)
                painter.drawText(QRect(QPoint(x, y), QSize(label_w, step)),
                                 Qt.AlignmentFlag.AlignVCenter, reading.label)  # fmt: skip
                shown = metrics.elidedText(reading.text, Qt.TextElideMode.ElideRight, room)
                painter.setPen(text)
                painter.drawText(QRect(QPoint(x + label_w + GAP, y), QSize(room, step)),
                                 Qt.AlignmentFlag.AlignVCenter, shown)  # fmt: skip
            x += label_w + GAP + room + PAIR_GAP
        painter.end()


class ReadingsTable(QWidget):
    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("detailReadings")
        self.reservation = QLabel("")
        self.reservation.setObjectName("detailReservation")
        self.reservation.setWordWrap(True)
        self.reservation.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.pairs = _Pairs()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 2, 0, 2)
        layout.setSpacing(2)
        # Who holds the GPU first: the question asked most.
        layout.addWidget(self.reservation)
        layout.addWidget(self.pairs)

    def texts(self) -> dict[str, str]:
        """What the table shows, label to value (tests and screenshots read it)."""
        shown = {r.label: r.text for r in self.pairs.readings}
        shown["Reservation"] = self.reservation.text()
        return shown

    def show_readings(self, readings: Sequence[Reading], reservation: str) -> None:
        readings = tuple(readings)
        if readings != self.pairs.readings:
            if [r.label for r in readings] != [r.label for r in self.pairs.readings]:
                self.pairs.readings = readings
                self.pairs.updateGeometry()  # new labels: the only change of size
            self.pairs.readings = readings
            self.pairs.update()
            # A value cut short on a narrow panel shows whole in the tooltip.
            self.pairs.setToolTip("\n".join(f"{r.label}: {r.text}" for r in readings))
        text = f"Reserved for {reservation}" if reservation else "Not reserved"
        if self.reservation.text() != text:
            self.reservation.setText(text)
