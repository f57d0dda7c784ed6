"""TimeRangeBar: above the GPU plots, "Last 5 min … 7 d", "Custom…" and Live/Paused.

It only asks (signals); the plots own the TimeWindow and call `show_window`
whenever it changes, so a zoom that pauses the plots flips the button here too,
and a line under the buttons says that the zoom (or pan) paused them and how
to follow again.
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QButtonGroup, QHBoxLayout, QLabel, QToolButton, QVBoxLayout, QWidget

from console.fleet.time_range import PRESETS, TimeWindow

PAUSED_BY_ZOOM = "❚❚ Paused by your zoom or pan: double-click a plot or press Live to follow again"
MOVED_IN_CUSTOM = "Zoomed or panned in the Custom… range: double-click a plot to go back to it"


class TimeRangeBar(QWidget):
    spanChosen = Signal(float)  # seconds: a preset, live
    customRequested = Signal()  # Custom…: ask for a from/to
    liveToggled = Signal(bool)  # True: follow now; False: freeze what is shown

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("timeRangeBar")
        lines = QVBoxLayout(self)
        lines.setContentsMargins(0, 0, 0, 0)
        lines.setSpacing(2)
        layout = QHBoxLayout()
        layout.setSpacing(2)
        lines.addLayout(layout)
        layout.addWidget(QLabel("Last"))
        self.group = QButtonGroup(self)
        self.presets: dict[float, QToolButton] = {}
        for preset in PRESETS:
            button = self._button(preset.label, checkable=True)
            button.setToolTip(f"Show the last {preset.label}, following new samples")
            button.clicked.connect(lambda _=False, s=preset.span_s: self.spanChosen.emit(s))
            self.group.addButton(button)
            self.presets[preset.span_s] = button
            layout.addWidget(button)
        self.custom = self._button("Custom…", checkable=True)
        self.custom.setToolTip("Show a fixed range: from … to …")
        self.custom.clicked.connect(self._on_custom_clicked)
        self.group.addButton(self.custom)
        layout.addWidget(self.custom)
        layout.addStretch(1)
        self.live = self._button("Live", checkable=True)
        self.live.setObjectName("liveButton")
        self.live.clicked.connect(self.liveToggled)
        layout.addWidget(self.live)
        # Shown only while a zoom or a pan holds the view: a pause nobody asked for by name.
        self.paused_note = QLabel()
        self.paused_note.setObjectName("pausedByZoom")
        self.paused_note.setWordWrap(True)
        bold = self.paused_note.font()
        bold.setBold(True)
        self.paused_note.setFont(bold)
        self.paused_note.setVisible(False)
        lines.addWidget(self.paused_note)

    def _button(self, text: str, checkable: bool) -> QToolButton:
        button = QToolButton()
        button.setText(text)
        button.setCheckable(checkable)
        button.setAutoRaise(True)
        return button

    def _on_custom_clicked(self) -> None:
        self.customRequested.emit()

    def show_window(self, window: TimeWindow) -> None:
        """Check the range shown and say Live or Paused."""
        if window.custom is not None:
            self.custom.setChecked(True)
        elif window.span_s in self.presets:
            self.presets[window.span_s].setChecked(True)
        self.live.setChecked(window.live)
        self.live.setText("● Live" if window.live else "❚❚ Paused")
        self.live.setToolTip(
            "Following new samples; click to freeze the view"
            if window.live
            else "Frozen while samples keep arriving; click to jump back to now"
        )
        by_hand = window.by_hand and not window.live
        if by_hand:
            self.paused_note.setText(MOVED_IN_CUSTOM if window.custom else PAUSED_BY_ZOOM)
        self.paused_note.setVisible(by_hand)
