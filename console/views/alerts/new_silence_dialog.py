"""NewSilenceDialog: which alerts stay quiet (matchers), from when, until when, and why.

Edits a SilenceDraft (console.fleet.silence_draft), which says what is wrong
until it may be sent. Focus starts in the comment, the one field a person
must always fill; Enter sends once the draft is valid.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtCore import QDateTime
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QDateTimeEdit,
    QDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QRadioButton,
    QWidget,
)

from console.fleet.silence_draft import HOUR_MS, SilenceDraft, matching_targets
from console.fleet.wall_clock import unix_now_ms
from console.views.common.dialog_buttons import ok_cancel_buttons

DURATIONS = (("15 minutes", HOUR_MS // 4), ("1 hour", HOUR_MS), ("2 hours", 2 * HOUR_MS),
             ("4 hours", 4 * HOUR_MS), ("8 hours", 8 * HOUR_MS), ("1 day", 24 * HOUR_MS),
             ("7 days", 7 * 24 * HOUR_MS))  # fmt: skip
RULES = ("gpu_temp", "memory_temp", "power", "throttle", "ecc_uncorrectable", "ecc_correctable",
         "xid", "gpu_lost", "memory_leak", "idle", "temp_trend", "backend_degraded")  # fmt: skip
SEVERITIES = ("", "info", "warning", "critical")
NODES_SHOWN = 4


class NewSilenceDialog(QDialog):
    def __init__(
        self,
        draft: SilenceDraft,
        nodes: Sequence[tuple[str, str]],
        parent: QWidget | None = None,
        clock: Callable[[], int] = unix_now_ms,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("newSilenceDialog")
        self.setWindowTitle("New silence")
        self._nodes, self._clock = list(nodes), clock
        self.node = QLineEdit(draft.node, placeholderText="any node; gpu-node-0* for a glob")
        self.rule = QComboBox(editable=True)
        self.rule.addItems(["", *RULES])
        self.rule.setCurrentText(draft.rule)
        self.gpu = QLineEdit(draft.gpu, placeholderText="any GPU; an index, e.g. 3")
        self.severity = QComboBox(editable=True)
        self.severity.addItems(list(SEVERITIES))
        self.severity.setCurrentText(draft.severity)
        self.start_now = QRadioButton("Now")
        self.start_at = QRadioButton("At")
        self.starts = QDateTimeEdit(calendarPopup=True)
        self.for_duration = QRadioButton("For")
        self.duration = QComboBox()
        self.until = QRadioButton("Until")
        self.ends = QDateTimeEdit(calendarPopup=True)
        self.comment = QLineEdit(draft.comment)
        self.comment.setObjectName("silenceComment")
        self.comment.setPlaceholderText("why these alerts may stay quiet, e.g. rack 4 fan swap")
        self.targets = QLabel()
        self.targets.setObjectName("silenceTargets")
        self.problem = QLabel()
        self.problem.setObjectName("silenceProblem")
        self.problem.setWordWrap(True)
        self.buttons, self.ok = ok_cancel_buttons(self, "Silence")
        self.ok.setDefault(True)
        self._build(draft)
        self._wire()
        self._on_input_changed()
        self.comment.setFocus()

    def _build(self, draft: SilenceDraft) -> None:
        now = QDateTime.fromMSecsSinceEpoch(self._clock())
        for label, ms in DURATIONS:
            self.duration.addItem(label, ms)
        self.duration.setCurrentIndex(1)
        self.starts.setDateTime(now.addSecs(3600))
        self.ends.setDateTime(now.addSecs(3 * 3600))
        for edit in (self.starts, self.ends):
            edit.setDisplayFormat("ddd d MMM yyyy HH:mm")
        for pair in ((self.start_now, self.start_at), (self.for_duration, self.until)):
            exclusive = QButtonGroup(self)
            for button in pair:
                exclusive.addButton(button)
        self.start_now.setChecked(not draft.starts_unix_ms)
        self.start_at.setChecked(bool(draft.starts_unix_ms))
        self.for_duration.setChecked(draft.duration_ms is not None)
        self.until.setChecked(draft.duration_ms is None)
        form = QFormLayout(self)
        form.addRow("Node", self.node)
        form.addRow("Rule", self.rule)
        form.addRow("GPU", self.gpu)
        form.addRow("Severity", self.severity)
        hint = QLabel("Exact, or a glob: * any run of characters, ? one. Empty: any.")
        hint.setObjectName("silenceHint")
        form.addRow("", hint)
        form.addRow("Starts", _row(self.start_now, self.start_at, self.starts))
        form.addRow("Ends", _row(self.for_duration, self.duration, self.until, self.ends))
        form.addRow("Comment", self.comment)
        form.addRow("Sent to", self.targets)
        form.addRow(self.problem)
        form.addRow(self.buttons)
        self.setMinimumWidth(560)

    def _wire(self) -> None:
        for line in (self.node, self.gpu, self.comment):
            line.textChanged.connect(self._on_input_changed)
        for combo in (self.rule, self.severity):
            combo.currentTextChanged.connect(self._on_input_changed)
        self.duration.currentIndexChanged.connect(self._on_input_changed)
        for edit in (self.starts, self.ends):
            edit.dateTimeChanged.connect(self._on_input_changed)
        for radio in (self.start_now, self.start_at, self.for_duration, self.until):
            radio.toggled.connect(self._on_input_changed)

    def draft(self) -> SilenceDraft:
        """What the fields say now."""
        timed = self.start_at.isChecked()
        return SilenceDraft(
            node=self.node.text(), rule=self.rule.currentText(), gpu=self.gpu.text(),
            severity=self.severity.currentText(),
            starts_unix_ms=self.starts.dateTime().toMSecsSinceEpoch() if timed else 0,
            duration_ms=int(self.duration.currentData()) if self.for_duration.isChecked() else None,
            ends_unix_ms=self.ends.dateTime().toMSecsSinceEpoch(), comment=self.comment.text(),
        )  # fmt: skip

    def chosen_targets(self) -> list[str]:
        """The connected nodes the node pattern names: where the silence is sent."""
        return matching_targets(self.node.text(), self._nodes)

    def _on_input_changed(self, *_args: object) -> None:
        self.starts.setEnabled(self.start_at.isChecked())
        self.duration.setEnabled(self.for_duration.isChecked())
        self.ends.setEnabled(self.until.isChecked())
        targets = self.chosen_targets()
        names = dict(self._nodes)
        shown = ", ".join(names[t] for t in targets[:NODES_SHOWN])
        more = f" +{len(targets) - NODES_SHOWN}" if len(targets) > NODES_SHOWN else ""
        self.targets.setText(f"{shown}{more}" if targets else "no connected node matches")
        problem = self.draft().problem(self._clock())
        if problem is None and not targets:
            problem = (
                "no connected node (where you may silence) has a name the node pattern matches"
            )
        self.problem.setText(problem or "")
        self.problem.setVisible(problem is not None)
        self.ok.setEnabled(problem is None)


def _row(*widgets: QWidget) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    for widget in widgets:
        layout.addWidget(widget)
    layout.addStretch(1)
    return row
