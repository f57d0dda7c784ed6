"""OutputDialog: the tail of a workload's output, refreshed on request."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtGui import QFontDatabase, QTextCursor
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from console.fleet.control import WorkloadRow
from console.fleet.updates import WorkloadOutputText


class OutputDialog(QDialog):
    """Not modal: several can stay open beside the console."""

    refreshRequested = Signal(object)  # WorkloadRow

    def __init__(
        self, workload: WorkloadRow, node_name: str, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.setObjectName("outputDialog")
        self.setWindowTitle(f"Output of {workload.label} on {node_name}")
        self.workload = workload
        self.size_label = QLabel("Reading…")
        self.text = QPlainTextEdit(readOnly=True)
        self.text.setObjectName("workloadOutput")
        self.text.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.text.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.refresh = QPushButton("Refresh")
        buttons.addButton(self.refresh, QDialogButtonBox.ButtonRole.ActionRole)
        layout = QVBoxLayout(self)
        layout.addWidget(self.size_label)
        layout.addWidget(self.text)
        layout.addWidget(buttons)
        buttons.rejected.connect(self.close)
        self.refresh.clicked.connect(self._on_refresh_clicked)
        self.resize(760, 480)

    def show_output(self, output: WorkloadOutputText) -> None:
        shown = len(output.text.encode("utf-8", errors="replace"))
        tail = "" if shown >= output.total_bytes else f" (the last {shown:,})"
        self.size_label.setText(f"{output.total_bytes:,} bytes of output{tail}")
        self.text.setPlainText(output.text)
        self.text.moveCursor(QTextCursor.MoveOperation.End)

    def _on_refresh_clicked(self) -> None:
        self.refreshRequested.emit(self.workload)
