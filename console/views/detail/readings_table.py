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

from PySide6.QtCore import QEvent, QSize, Qt
from PySide6.QtGui import QFontMetrics, QPainter, QPaintEvent, QPalette, QStaticText
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
        # The labels never change with a sample: laid out once (per font), drawn static.
        self._labels: dict[str, tuple[QStaticText, int]] = {}
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)

    def sizeHint(self) -> QSize:
        metrics = QFontMetrics(self.font())
        label = max((metrics.horizontalAdvance(r.label) for r in self.readings), default=80)
        value = metrics.horizontalAdvance(WIDE_VALUE)
        width = PAIRS_PER_LINE * (label + GAP + value) + PAIR_GAP
        return QSize(width, LINES * metrics.lineSpacing() + 2)

    def minimumSizeHint(self) -> QSize:
        return QSize(0, self.sizeHint().height())

    def changeEvent(self, event: QEvent) -> None:
        if event.type() == QEvent.Type.FontChange:
            self._labels.clear()
        super().changeEvent(event)

    def _label(self, text: str, metrics: QFontMetrics) -> tuple[QStaticText, int]:
        found = self._labels.get(text)
        if found is None:
            static = QStaticText(text)
            static.setTextFormat(Qt.TextFormat.PlainText)
            static.prepare(font=self.font())
            found = self._labels[text] = (static, metrics.horizontalAdvance(text))
        return found

    def paintEvent(self, _event: QPaintEvent) -> None:
        # Painted once a second for the GPU shown, in the frame that also redraws its
        # plots: static labels and baseline text, eliding only what does not fit.
        painter = QPainter(self)
        metrics = self.fontMetrics()
        step = metrics.lineSpacing()
        label_top = (step - metrics.height()) // 2
        baseline = label_top + metrics.ascent()
        text = self.palette().color(QPalette.ColorRole.WindowText)
        dim = self.palette().color(QPalette.ColorGroup.Disabled, QPalette.ColorRole.WindowText)
        x = 0
        for pair in range(PAIRS_PER_LINE):
            column = self.readings[pair::PAIRS_PER_LINE]
            labels = [self._label(r.label, metrics) for r in column]
            label_w = max((w for _, w in labels), default=0)
            # The widest value so far: the next pair does not jump as values change.
            seen = [metrics.horizontalAdvance(r.text) for r in column]
            self._value_w[pair] = max(self._value_w[pair], *seen, 0)
            last = pair == PAIRS_PER_LINE - 1
            # (+2: an exact fit can still elide its last letter.)
            room = max(0, self.width() - x - label_w - GAP) if last else self._value_w[pair] + 2
            painter.setPen(dim)
            for line, (static, _) in enumerate(labels):
                painter.drawStaticText(x, line * step + label_top, static)
            painter.setPen(text)
            value_x = x + label_w + GAP
            for line, (reading, width) in enumerate(zip(column, seen, strict=True)):
                shown = reading.text
                if width > room:
                    shown = metrics.elidedText(shown, Qt.TextElideMode.ElideRight, room)
                painter.drawText(value_x, line * step + baseline, shown)
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
