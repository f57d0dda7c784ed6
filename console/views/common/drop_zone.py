"""DropZone: a labelled area that takes one kind of drag and says what its drop would do.

While a drag of its MIME type hovers, the zone shows the verdict ("Release to
…", or its refusal prefix and why not) and takes the drop only when the verdict
allows it. The kill zone (processes) and the Slurm drain zone (nodes) are two.
The theme styles a zone by verdict: QLabel#NAME[verdict="accept"|"refuse"].
"""

from __future__ import annotations

from PySide6.QtCore import QMimeData, Qt
from PySide6.QtGui import QDragEnterEvent, QDragLeaveEvent, QDragMoveEvent, QDropEvent
from PySide6.QtWidgets import QLabel, QWidget

from console.fleet.placement import Verdict


def answer_drag(event: QDragMoveEvent, ok: bool) -> None:
    """Take the drag where its verdict is `ok` (the cursor says it may drop), else refuse it."""
    if ok:
        event.acceptProposedAction()
    else:
        event.ignore()


class DropZone(QLabel):
    def __init__(
        self, idle_text: str, mime_type: str, refusal: str, parent: QWidget | None = None
    ) -> None:
        """`refusal`: what a refused verdict's reason follows ("Cannot kill: ")."""
        super().__init__(idle_text, parent)
        self._idle_text, self._mime_type, self._refusal = idle_text, mime_type, refusal
        self.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.setWordWrap(True)
        self.setAcceptDrops(True)
        self.setMinimumHeight(34)
        self.verdict: Verdict | None = None  # while a drag hovers

    def judge_drop(self, data: QMimeData) -> tuple[object | None, Verdict]:
        """What a drop of `data` would act on (None: nothing), and the verdict."""
        raise NotImplementedError

    def dropped(self, what: object) -> None:
        """The drop was taken: say so (a signal)."""
        raise NotImplementedError

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if not event.mimeData().hasFormat(self._mime_type):
            event.ignore()
            return
        event.acceptProposedAction()  # follow the drag, even to say why not
        self._show(self.judge_drop(event.mimeData())[1])

    def dragMoveEvent(self, event: QDragMoveEvent) -> None:
        verdict = self.judge_drop(event.mimeData())[1]
        self._show(verdict)
        answer_drag(event, verdict.ok)

    def dragLeaveEvent(self, event: QDragLeaveEvent) -> None:
        self._show(None)

    def dropEvent(self, event: QDropEvent) -> None:
        what, verdict = self.judge_drop(event.mimeData())
        self._show(None)
        if what is None or not verdict.ok:
            event.ignore()
            return
        event.acceptProposedAction()
        self.dropped(what)

    def _show(self, verdict: Verdict | None) -> None:
        self.verdict = verdict
        if verdict is None:
            self.setText(self._idle_text)
        else:
            self.setText(("Release to " if verdict.ok else self._refusal) + verdict.reason)
        self.setProperty("verdict", "" if verdict is None else "accept" if verdict.ok else "refuse")
        self.style().unpolish(self)
        self.style().polish(self)
