"""The OK and Cancel buttons every dialog of the console ends with."""

from __future__ import annotations

from PySide6.QtWidgets import QDialog, QDialogButtonBox, QPushButton


def ok_cancel_buttons(
    dialog: QDialog, ok_text: str | None = None
) -> tuple[QDialogButtonBox, QPushButton]:
    """OK, which accepts `dialog`, and Cancel, which rejects it; and the OK button.

    `ok_text` names OK for what it does ("Reserve", "Drain"); the dialog decides
    which button is the default and when OK is enabled.
    """
    buttons = QDialogButtonBox(
        QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel
    )
    ok = buttons.button(QDialogButtonBox.StandardButton.Ok)
    if ok_text is not None:
        ok.setText(ok_text)
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)
    return buttons, ok
