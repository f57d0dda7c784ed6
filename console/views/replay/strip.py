"""ReplayStrip: the compact line under the grid that moves the whole console in time.

A window (1 h to 30 d, ending now), the timeline with the alerts raised in it and the
outages and actions, the previous/next alert buttons, Play with its speed, a field to
type a moment, Share (the command that opens this moment elsewhere) and the way back
to live. It says what the person asked for
(`momentWanted`, `liveWanted`, `playToggled`, `speedChanged`); the part shows it.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLineEdit, QPushButton, QWidget

from console.fleet.playback import DEFAULT_SPEED, SPEEDS
from console.fleet.timeline import WINDOWS, EventMark, Mark, moment_text
from console.views.replay.timeline_bar import TimelineBar

DEFAULT_WINDOW = "24 h"
PLAY_TEXT, PAUSE_TEXT = "▶ Play", "❚❚ Pause"
SHARE_KEY = "Ctrl+Shift+L"


class ReplayStrip(QWidget):
    momentWanted = Signal(object)  # Unix ms (past a C int)
    liveWanted = Signal()
    alertStep = Signal(int)  # -1 previous, +1 next
    typed = Signal(str)  # a moment typed in the field (Enter)
    windowChanged = Signal(object)  # the window's length (ms; 30 d is past a C int)
    playToggled = Signal()  # Play or Pause (the button, Space on the timeline)
    speedChanged = Signal(str)  # a SPEEDS label
    shareWanted = Signal()  # the command that opens this moment, for another operator

    def __init__(self) -> None:
        super().__init__()
        self.setObjectName("replayStrip")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 2, 4, 2)
        layout.setSpacing(4)
        self.live = QPushButton("● Live")
        self.live.setObjectName("replayLive")
        self.live.setToolTip("Back to the fleet as it is now (Esc or L while replaying)")
        self.window_box = QComboBox()
        self.window_box.setObjectName("replayWindow")
        self.window_box.setAccessibleName("Replay window")
        self.window_box.addItems(list(WINDOWS))
        self.window_box.setCurrentText(DEFAULT_WINDOW)
        self.window_box.setToolTip("How far back the timeline reaches")
        self.previous = QPushButton("◀ Alert")
        self.previous.setObjectName("replayPreviousAlert")
        self.previous.setToolTip("The previous alert's raise (Page Up on the timeline)")
        self.next = QPushButton("Alert ▶")
        self.next.setObjectName("replayNextAlert")
        self.next.setToolTip("The next alert's raise (Page Down on the timeline)")
        self.bar = TimelineBar()
        self.field = QLineEdit()
        self.field.setObjectName("replayTime")
        self.field.setAccessibleName("Replay moment")
        self.field.setPlaceholderText("time: 03:12, -2h")
        self.field.setToolTip("A moment to show: 03:12 or 2026-12-07 03:12:00 (local time), "
                              "or -90s, -30m, -2h, -1d; Enter shows it")  # fmt: skip
        digits = self.field.fontMetrics().horizontalAdvance("2026-12-07 03:12:00.000")
        self.field.setFixedWidth(digits + 16)  # a moment, whole, with its milliseconds
        for widget in (self.live, self.window_box, self.previous):
            layout.addWidget(widget)
        layout.addWidget(self.bar, 1)
        self.play, self.speed = _play_button(), _speed_box()
        self.share = QPushButton("Share")
        self.share.setObjectName("replayShare")
        self.share.setToolTip(f"Copy the command that opens this moment and GPU in another "
                              f"operator's console ({SHARE_KEY})")  # fmt: skip
        for after in (self.next, self.play, self.speed, self.field, self.share):
            layout.addWidget(after)
        self._wire()

    def _wire(self) -> None:
        self.bar.moved.connect(self.momentWanted)
        self.bar.liveRequested.connect(self.liveWanted)
        self.bar.alertStep.connect(self.alertStep)
        self.bar.playToggled.connect(self.playToggled)
        self.play.clicked.connect(self.playToggled)
        self.speed.currentTextChanged.connect(self.speedChanged)
        self.live.clicked.connect(self.liveWanted)
        self.share.clicked.connect(self.shareWanted)
        self.previous.clicked.connect(lambda: self.alertStep.emit(-1))
        self.next.clicked.connect(lambda: self.alertStep.emit(1))
        self.field.returnPressed.connect(lambda: self.typed.emit(self.field.text()))
        self.window_box.currentTextChanged.connect(
            lambda text: self.windowChanged.emit(WINDOWS[text])
        )

    @property
    def window_ms(self) -> int:
        return WINDOWS[self.window_box.currentText()]

    def show_moment(self, at_ms: int | None) -> None:
        """The cursor and the field at the moment shown (None: live)."""
        self.bar.set_cursor(at_ms)
        self.live.setEnabled(at_ms is not None)
        if not self.field.hasFocus():
            self.field.setText("" if at_ms is None else moment_text(at_ms))

    def show_playing(self, playing: bool) -> None:
        self.play.setText(PAUSE_TEXT if playing else PLAY_TEXT)

    def show_marks(self, marks: list[Mark], events: list[EventMark], at_ms: int | None) -> None:
        self.bar.set_marks(marks, events)
        at = self.bar.end_ms if at_ms is None else at_ms
        self.previous.setEnabled(any(t < at for t, _ in marks))
        self.next.setEnabled(at_ms is not None and any(t > at for t, _ in marks))


def _play_button() -> QPushButton:
    button = QPushButton(PLAY_TEXT)
    button.setObjectName("replayPlay")
    button.setToolTip("Play the past from the cursor (from the window's start while live), "
                      "pausing on a new critical alert (Space on the timeline)")  # fmt: skip
    return button


def _speed_box() -> QComboBox:
    box = QComboBox()
    box.setObjectName("replaySpeed")
    box.setAccessibleName("Replay speed")
    box.addItems(list(SPEEDS))
    box.setCurrentText(DEFAULT_SPEED)
    box.setToolTip("How fast Play moves: 1x real time to 600x (an hour in 6 s)")
    return box
