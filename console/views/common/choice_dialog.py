"""ChoiceDialog: pick the other half of a drop from the keyboard — a GPU, a workload, a person.

Focus starts in a find line: typing narrows the list (every word must appear,
or a chooser's own `find` decides: a GPU's, console/fleet/place_words.py), the
arrow keys move in it without leaving the line, Enter takes the current
choice. Below the list stands the verdict a drop there would get (the same
words, from the same rules); OK is enabled only when it is accepted. With
`free_text`, a name the list does not hold may be typed (a holder not yet in the
console's people).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QEvent, QObject, Qt
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QApplication,
    QDialog,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QVBoxLayout,
    QWidget,
)

from console.fleet.placement import Verdict
from console.views.common.dialog_buttons import ok_cancel_buttons

# Keys the find line hands to the list: moving in it while typing.
LIST_KEYS = {Qt.Key.Key_Up, Qt.Key.Key_Down, Qt.Key.Key_PageUp, Qt.Key.Key_PageDown}
DATA_ROLE = Qt.ItemDataRole.UserRole
# (typed text, a choice's value): does the choice stay listed?
Find = Callable[[str, object], bool]


class ChoiceDialog(QDialog):
    def __init__(
        self,
        title: str,
        choices: Sequence[tuple[str, object]],
        judge: Callable[[object], Verdict],
        verb: str,
        current: object | None = None,
        free_text: bool = False,
        parent: QWidget | None = None,
        find: Find | None = None,
    ) -> None:
        """`choices`: (label, value); `judge(value)`: the drop's verdict; `verb`: "assign";
        `find`: which choices typed text keeps (by default those with every word in the label).
        """
        super().__init__(parent)
        self.setObjectName("choiceDialog")
        self.setWindowTitle(title)
        self._judge, self._verb, self._free_text, self._find = judge, verb, free_text, find
        self.search = QLineEdit(placeholderText="type to find" + (", or a new name" * free_text))
        self.search.setObjectName("choiceSearch")
        self.list = QListWidget()
        self.list.setObjectName("choiceList")
        self.list.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # the find line drives it
        for label, value in choices:
            item = QListWidgetItem(label)
            item.setData(DATA_ROLE, value)
            self.list.addItem(item)
            if value == current:
                self.list.setCurrentItem(item)
        if self.list.currentRow() < 0 and self.list.count():
            self.list.setCurrentRow(0)
        self.verdict_label = QLabel()
        self.verdict_label.setObjectName("choiceVerdict")
        self.verdict_label.setWordWrap(True)
        self.buttons, self.ok = ok_cancel_buttons(self, verb.capitalize())
        self.ok.setDefault(True)
        layout = QVBoxLayout(self)
        for widget in (self.search, self.list, self.verdict_label, self.buttons):
            layout.addWidget(widget)
        self.search.textChanged.connect(self._on_search_text_changed)
        self.list.currentItemChanged.connect(self._on_choice_changed)
        self.search.installEventFilter(self)
        self.verdict: Verdict | None = None
        self._on_choice_changed()
        self.search.setFocus()

    def chosen(self) -> object | None:
        """The current visible choice; with free text and none shown, the typed name."""
        item = self.list.currentItem()
        if item is not None and not item.isHidden():
            return item.data(DATA_ROLE)
        typed = self.search.text().strip()
        return typed if self._free_text and typed else None

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if (
            watched is self.search
            and isinstance(event, QKeyEvent)
            and event.type() == QEvent.Type.KeyPress
            and event.key() in LIST_KEYS
        ):
            forwarded = QKeyEvent(event.type(), event.key(), event.modifiers(), event.text())
            QApplication.sendEvent(self.list, forwarded)
            return True
        return super().eventFilter(watched, event)

    def _on_search_text_changed(self, text: str) -> None:
        for row in range(self.list.count()):
            item = self.list.item(row)
            item.setHidden(not self._fits(text, item))
        current = self.list.currentItem()
        if current is None or current.isHidden():
            shown = [self.list.item(r) for r in range(self.list.count())]
            first = next((i for i in shown if not i.isHidden()), None)
            # No row current: a free name is typed, or nothing matches.
            self.list.setCurrentRow(self.list.row(first) if first is not None else -1)
        self._on_choice_changed()

    def _fits(self, text: str, item: QListWidgetItem) -> bool:
        if self._find is not None:
            return self._find(text, item.data(DATA_ROLE))
        return all(word in item.text().lower() for word in text.lower().split())

    def _on_choice_changed(self, *_args: object) -> None:
        value = self.chosen()
        self.verdict = self._judge(value) if value is not None else None
        if self.verdict is None:
            self.verdict_label.setText(
                "Nothing matches." if self.list.count() else "None to choose."
            )
        elif self.verdict.ok:
            self.verdict_label.setText(self.verdict.reason)
        else:
            self.verdict_label.setText(f"Cannot {self._verb}: {self.verdict.reason}")
        self.verdict_label.setProperty("verdict", "accept" if self.ok_now else "refuse")
        self.ok.setEnabled(self.ok_now)

    @property
    def ok_now(self) -> bool:
        return self.verdict is not None and self.verdict.ok
