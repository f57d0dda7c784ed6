"""GuidedTour: the window dimmed but for the part a step points at, a ring round that
part, and a callout beside it with the step's words and Back / Next / Skip tour.

Shown at a person's first start (console/app.py) and from Help ▸ Guided tour.
Keys: Right, Return or Space for the next step, Left or Backspace for the one
before, Escape to end the tour. Over the window it takes the input; the window
below keeps updating. A step points at the parts of its target that are shown
(a viewer has no kill zone); with none shown, at the window as a whole.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from PySide6.QtCore import QEvent, QObject, QPoint, QRect, Qt, Signal
from PySide6.QtGui import QColor, QKeyEvent, QPainter, QPainterPath, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from console.qt.named_timer import named_timer
from console.views.window.tour_steps import TourStep

DIM = QColor(0, 0, 0, 150)
FOLLOW_MS = 100  # the ring follows its part's later moves (a scroll bar that appears)
RING_PX = 3
MARGIN = 12  # between the ring and the callout, and the callout and the window's edge
CALLOUT_WIDTH = 380

# What a step points at: its widgets (the ring goes round those shown), and what to
# do first (open the bottom tab they sit in).
Target = tuple[Callable[[], Sequence[QWidget]], Callable[[], None]]


class GuidedTour(QWidget):
    finished = Signal(bool)  # True: seen to the end; False: skipped

    def __init__(
        self, window: QWidget, steps: Sequence[TourStep], targets: Mapping[str, Target]
    ) -> None:
        super().__init__(window)
        self.setObjectName("guidedTour")
        self._window, self.steps, self._targets = window, tuple(steps), targets
        self.index = 0
        self.hole = QRect()  # the part pointed at, in this widget's coordinates
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.callout = QFrame(self)
        self.callout.setObjectName("tourCallout")
        self.callout.setFrameShape(QFrame.Shape.Box)
        self.callout.setAutoFillBackground(True)
        self.callout.setFixedWidth(CALLOUT_WIDTH)
        self.title, self.text, self.count = QLabel(), QLabel(), QLabel()
        self.title.setObjectName("tourTitle")
        self.text.setWordWrap(True)
        self.back = QPushButton("Back")
        self.next = QPushButton("Next")
        self.skip = QPushButton("Skip tour")
        self._build()
        self.hide()
        window.installEventFilter(self)
        # A part moves after the step is shown too: a scroll bar appears as the detail
        # scrolls, a tab's layout settles. Checked while the tour shows, at 10 Hz.
        self._follow = named_timer(
            self, "gpufleet-tour-follow", self._follow_target, interval_ms=FOLLOW_MS
        )

    def _build(self) -> None:
        font = self.title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.2)
        self.title.setFont(font)
        buttons = QHBoxLayout()
        buttons.addWidget(self.count, 1)
        for button in (self.skip, self.back, self.next):
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the tour's keys, not a button's
            buttons.addWidget(button)
        layout = QVBoxLayout(self.callout)
        layout.addWidget(self.title)
        layout.addWidget(self.text)
        layout.addLayout(buttons)
        self.back.clicked.connect(self.go_back)
        self.next.clicked.connect(self.go_next)
        self.skip.clicked.connect(lambda: self.end(False))

    # -- driving -----------------------------------------------------------------

    def start(self) -> None:
        self.setGeometry(self._window.rect())
        self.show()
        self.raise_()
        self._show_step(0)
        self.setFocus(Qt.FocusReason.OtherFocusReason)
        self._follow.start()

    def go_next(self) -> None:
        if self.index + 1 >= len(self.steps):
            self.end(True)
        else:
            self._show_step(self.index + 1)

    def go_back(self) -> None:
        if self.index > 0:
            self._show_step(self.index - 1)

    def end(self, seen: bool) -> None:
        self._follow.stop()
        self.hide()
        self.finished.emit(seen)

    def _follow_target(self) -> None:
        if self.target() != self.hole:
            self._place()

    def target(self) -> QRect:
        """Where the current step's widgets are shown, in the window (null: none is)."""
        found = QRect()
        for widget in self._targets[self.steps[self.index].target][0]():
            seen = widget.visibleRegion().boundingRect()  # not what a scroll area hides
            if widget.isVisibleTo(self._window) and not seen.isEmpty():
                found |= seen.translated(widget.mapTo(self._window, QPoint(0, 0)))
        return found

    def _show_step(self, index: int) -> None:
        self.index = index
        step = self.steps[index]
        self._targets[step.target][1]()  # open its tab first
        self.title.setText(step.title)
        self.text.setText(step.text)
        self.count.setText(f"{index + 1} of {len(self.steps)}")
        self.back.setEnabled(index > 0)
        self.next.setText("Done" if index + 1 == len(self.steps) else "Next")
        self._place()

    def _place(self) -> None:
        """The hole over the target (the whole window where it is hidden) and the callout
        beside it: below, above, left or right, where it fits, else over the hole."""
        self.hole = self.target()
        self.callout.adjustSize()
        self.callout.move(_beside(self.hole, self.callout.size().toTuple(), self.rect()))
        self.update()

    # -- input and painting ---------------------------------------------------------

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Right, Qt.Key.Key_Return, Qt.Key.Key_Enter, Qt.Key.Key_Space):
            self.go_next()
        elif key in (Qt.Key.Key_Left, Qt.Key.Key_Backspace):
            self.go_back()
        elif key == Qt.Key.Key_Escape:
            self.end(False)
        else:
            event.accept()  # the window below takes no keys while the tour shows

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._window and event.type() == QEvent.Type.Resize and self.isVisible():
            self.setGeometry(self._window.rect())
            self._place()
        return False

    def paintEvent(self, _event: QPaintEvent) -> None:
        painter = QPainter(self)
        dimmed = QPainterPath()
        dimmed.addRect(self.rect())
        if not self.hole.isNull():
            hole = QPainterPath()
            hole.addRoundedRect(self.hole.adjusted(-4, -4, 4, 4), 6, 6)
            dimmed = dimmed.subtracted(hole)
        painter.fillPath(dimmed, DIM)
        if not self.hole.isNull():
            ring = self.palette().color(QPalette.ColorRole.Highlight)
            painter.setPen(QPen(ring, RING_PX))
            painter.drawRoundedRect(self.hole.adjusted(-4, -4, 4, 4), 6, 6)
        painter.end()


def _beside(hole: QRect, size: tuple[int, int], room: QRect) -> QPoint:
    """Where a callout of `size` goes next to `hole` inside `room` (not over the hole
    where there is space around it)."""
    width, height = size
    inner = room.adjusted(MARGIN, MARGIN, -MARGIN - width, -MARGIN - height)
    if hole.isNull() or inner.width() < 0 or inner.height() < 0:
        return room.center() - QPoint(width // 2, height // 2)
    left = min(max(hole.left(), inner.left()), inner.right())
    top = min(max(hole.top(), inner.top()), inner.bottom())
    gap = MARGIN + RING_PX + 4
    candidates = (
        QPoint(left, hole.bottom() + gap),  # below
        QPoint(left, hole.top() - gap - height),  # above
        QPoint(hole.right() + gap, top),  # right
        QPoint(hole.left() - gap - width, top),  # left
    )
    for point in candidates:
        if inner.contains(point):
            return point
    # The part fills the window (the grid on a small screen): inside it, at its bottom.
    return QPoint(min(max(hole.center().x() - width // 2, inner.left()), inner.right()),
                  inner.bottom())  # fmt: skip
