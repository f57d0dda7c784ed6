"""CSV export for the table panels: where to save, writing it, and the panels' export button."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QAbstractItemModel, QSortFilterProxyModel, Signal
from PySide6.QtWidgets import QFileDialog, QPushButton, QWidget

from console.views.common.row_table_panel import RowPanel


def ask_csv_path(parent: QWidget, title: str, stem: str) -> str:
    """A save dialog suggesting gpufleet-STEM-DATE.csv; '' when cancelled."""
    suggested = f"gpufleet-{stem}-{datetime.date.today().isoformat()}.csv"
    path, _filter = QFileDialog.getSaveFileName(parent, title, suggested, "CSV files (*.csv)")
    return path


def write_csv(path: Path, text: str) -> str | None:
    """Write the CSV text; None when written, else the error to show the user."""
    try:
        # newline="": the csv module writes its own line endings.
        path.write_text(text, encoding="utf-8", newline="")
    except OSError as error:
        return str(error)
    return None


class CsvExportPanel(RowPanel):
    """A row panel with an "Export CSV…" button: asks where, writes, says how it went.

    The panel lays the button out and enables it; the outcome goes to `message`
    (for the status bar), never to a dialog. A subclass names its export and gives
    `csv_export()`.
    """

    message = Signal(str)  # export done, or why it failed
    export_title = ""  # the save dialog's title
    export_stem = ""  # the suggested file name's: gpufleet-STEM-DATE.csv
    export_subject = ""  # what could not be exported, in the message: "the audit log"

    def __init__(self, name: str, model: QAbstractItemModel, proxy: QSortFilterProxyModel,
                 parent: QWidget | None) -> None:  # fmt: skip
        super().__init__(name, model, proxy, parent)
        self.export = QPushButton("Export CSV…")
        # Asks where to save ("" when cancelled); tests replace it so no dialog opens.
        self.choose_path: Callable[[], str] = self._ask_path
        self.export.clicked.connect(self._on_export_clicked)

    def csv_export(self) -> tuple[str, str]:
        """The CSV text, and what it holds for the message (e.g. "12 audit records")."""
        raise NotImplementedError

    def export_to(self, path: Path) -> bool:
        """Write `csv_export()` to `path`; say how it went."""
        text, held = self.csv_export()
        error = write_csv(path, text)
        if error is not None:
            self.message.emit(f"Could not export {self.export_subject}: {error}")
            return False
        self.message.emit(f"Exported {held} to {path}")
        return True

    def _on_export_clicked(self) -> None:
        path = self.choose_path()
        if path:
            self.export_to(Path(path))

    def _ask_path(self) -> str:
        return ask_csv_path(self, self.export_title, self.export_stem)
