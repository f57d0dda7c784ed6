"""Toast: an in-window popup: an alert (click: open the GPU) or a notice.

It sits in a corner of its anchor (the window sets the fleet grid's scroll area):
over tiles, never over a table's rows. At the window's bottom right it covered
the last rows of the alert and process tables, where people look. Of the
anchor's corners it takes the first (top right, bottom right, top left, bottom
left) that leaves the tiles it is about in sight: a critical toast on gpu-node-02
covered the very GPUs it was about. The window says where those tiles are
(`set_anchor`'s `covers`), and has the toast placed again when they move
(`place`: a scroll, a resize, a new layout).

It follows the notice it shows: the AlertNotifier's `noticeUpdated` rewords it,
`noticeWithdrawn` (every alert of it cleared, acknowledged or silenced: the node
answers again) hides it, as the desktop's notification is withdrawn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QPoint, QRect, Signal
from PySide6.QtGui import QMouseEvent
from PySide6.QtWidgets import QFrame, QLabel, QVBoxLayout, QWidget

from console.fleet.alert_rows import AlertRow
from console.fleet.notify_policy import Notice
from console.qt.named_timer import named_timer
from gpufleet.v1.alert_severity import Severity

SHOW_MS = 8000
MARGIN = 16
# Where the tiles of an alert are, in the toast's parent's coordinates.
# Where a popup is about: a node and one of its GPUs (None: the node as a whole).
Place = tuple[str, int | None]
Covers = Callable[[Place], Sequence[QRect]]


class Toast(QFrame):
    """One toast at a time: a newer alert replaces the text. Critical ones stay until clicked."""

    clicked = Signal(str, str)  # target, alert id
    noticeClicked = Signal(str)  # the notice's topic, e.g. "silences"

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self.setObjectName("toast")
        self.title = QLabel()
        self.title.setObjectName("toastTitle")
        self.body = QLabel()
        self.body.setObjectName("toastBody")
        self.body.setWordWrap(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addWidget(self.body)
        self.setFixedWidth(380)
        self._timer = named_timer(self, "gpufleet-toast-timer", self.hide, single_shot=True)
        self.alert: AlertRow | None = None
        self.topic = ""  # what a shown notice is about, "" for an alert
        self.notice_uid: tuple[str, str] | None = None  # the policy's notice shown, if known
        self._about: tuple[Place, ...] = ()  # the GPUs (or nodes) whose tiles stay in sight
        self._anchor: QWidget | None = None
        self._covers: Covers = lambda _place: ()
        self.hide()

    def set_anchor(self, anchor: QWidget, covers: Covers | None = None) -> None:
        """Sit in a corner of `anchor` (a widget inside the parent, with no table), off the
        rectangles `covers` gives for what the popup is about (its tiles, in the parent's
        coordinates)."""
        self._anchor = anchor
        if covers is not None:
            self._covers = covers
        self.place()

    def show_alert(self, alert: AlertRow, title: str) -> None:
        self.alert, self.topic = alert, ""
        self.notice_uid, self._about = None, ((alert.target, alert.gpu_index),)
        self._pop(title, alert.summary, alert.severity.label)
        if alert.severity is Severity.CRITICAL:
            self._timer.stop()
        else:
            self._timer.start(SHOW_MS)

    def show_notice(self, title: str, body: str, topic: str, about: Sequence[Place] = ()) -> None:
        """A notice that is no alert (a silence about to end, what self-healing did), off the
        tiles it is `about`; it goes by itself."""
        if self.isVisible() and self.alert is not None and self.alert.severity is Severity.CRITICAL:
            return  # a critical alert stays in view until clicked
        self.alert, self.topic = None, topic
        self.notice_uid, self._about = None, tuple(about)
        self._pop(title, body, "info")
        self._timer.start(SHOW_MS)

    # -- following the notice shown (AlertNotifier's signals) --------------------

    def on_notice_shown(self, notice: Notice) -> None:
        """The notice just shown here: keep its id, and every one of its GPUs in sight."""
        anchor = notice.anchor
        if self.alert is None or anchor is None or self.alert.uid != anchor.uid:
            return
        self.notice_uid = notice.uid
        self._about = tuple((alert.target, alert.gpu_index) for alert in notice.alerts)
        self.place()

    def on_notice_updated(self, notice: Notice) -> None:
        """New words for the notice shown (a flapping critical's count): no new popup."""
        if self.isVisible() and notice.uid == self.notice_uid:
            self.title.setText(notice.headline)
            self.body.setText(notice.body)
            self.adjustSize()
            self.place()

    def on_notice_withdrawn(self, notice: Notice) -> None:
        """Its condition is over (cleared, acknowledged, silenced): the toast goes too."""
        if notice.uid == self.notice_uid:
            self._timer.stop()
            self.hide()
            self.notice_uid, self._about = None, ()

    # -- showing and placing --------------------------------------------------------

    def _pop(self, title: str, body: str, severity: str) -> None:
        self.title.setText(title)
        self.body.setText(body)
        self.setProperty("severity", severity)
        self.style().unpolish(self)
        self.style().polish(self)
        self.adjustSize()
        self.place()
        self.show()
        self.raise_()

    def place(self) -> None:
        """In the first corner of the anchor that covers none of the shown alerts' tiles;
        where every corner covers some, the one that covers least."""
        parent = self.parentWidget()
        if parent is None:
            return
        spots = self._spots(parent)
        avoid = [rect for place in self._about for rect in self._covers(place)]
        size = self.size()

        def covered(spot: QPoint) -> int:
            toast = QRect(spot, size)
            return sum(_area(toast.intersected(rect)) for rect in avoid)

        self.move(min(spots, key=covered))  # min keeps the first of equals: top right first

    def _spots(self, parent: QWidget) -> list[QPoint]:
        """Top right, bottom right, top left, bottom left of the anchor (or the parent)."""
        anchor = self._anchor if self._anchor is not None and self._anchor.isVisible() else None
        if anchor is None:  # no anchor: the parent's top right
            return [QPoint(parent.width() - self.width() - MARGIN, MARGIN)]
        area = QRect(anchor.mapTo(parent, QPoint(0, 0)), anchor.size())
        left = area.left() + MARGIN
        right = max(left, area.right() + 1 - self.width() - MARGIN)
        top = area.top() + MARGIN
        bottom = max(top, area.bottom() + 1 - self.height() - MARGIN)
        return [QPoint(right, top), QPoint(right, bottom), QPoint(left, top), QPoint(left, bottom)]

    def mousePressEvent(self, event: QMouseEvent) -> None:
        if self.alert is not None:
            self.clicked.emit(self.alert.target, self.alert.id)
        elif self.topic:
            self.noticeClicked.emit(self.topic)
        self.hide()


def _area(rect: QRect) -> int:
    return rect.width() * rect.height() if rect.isValid() else 0
