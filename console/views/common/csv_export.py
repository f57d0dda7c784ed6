"""CSV export for the table panels: where to save, and writing it."""

from __future__ import annotations

import datetime
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget


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
