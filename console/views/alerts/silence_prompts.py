"""SilencePrompts: the dialogs between a person's gesture and a silence request.

"New silence…" (empty, or prefilled from an alert) opens NewSilenceDialog; on
OK the silence goes to every connected node whose name the node pattern
matches and where our role allows it. "Expire…" asks first, naming the
silence and its nodes. Dialogs open window-modal with `open()`, never
`exec()` (no nested event loop while the network answers); `dialog` is the
one open now (tests fill and accept it).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QMessageBox, QWidget

from console.connections.actions import SilenceActions
from console.fleet.alert_rows import AlertRow
from console.fleet.model import FleetModel
from console.fleet.silence_draft import SilenceDraft
from console.fleet.silences import SilenceGroup, matchers_text
from console.fleet.updates import LinkState
from console.fleet.wall_clock import unix_now_ms
from console.views.alerts.new_silence_dialog import NewSilenceDialog
from console.views.common.prompt_host import PromptHost
from gpufleet.policy import role_needed


class SilencePrompts(PromptHost):
    message = Signal(str)  # for the status bar: where it went, or why nothing was sent

    def __init__(
        self,
        fleet: FleetModel,
        actions: SilenceActions,
        window: QWidget,
        clock: Callable[[], int] = unix_now_ms,
    ) -> None:
        super().__init__(window)
        self.setObjectName("silencePrompts")
        self._fleet, self._actions, self._window, self._clock = fleet, actions, window, clock

    def _nodes(self) -> list[tuple[str, str]]:
        """Connected nodes where our role may create silences, as (target, name)."""
        return [
            (n.target, n.name) for n in self._fleet
            if n.state is LinkState.CONNECTED
            and self._fleet.role_refusal(n.target, role_needed("CreateSilence")) is None
        ]  # fmt: skip

    def ask_new(self, alert: AlertRow | None = None) -> None:
        """The New-silence dialog, prefilled from the alert (its node, rule and GPU) if any."""
        name = self._fleet.name_of(alert.target) if alert is not None else ""
        draft = SilenceDraft.for_alert(alert, name) if alert is not None else SilenceDraft()
        dialog = NewSilenceDialog(draft, self._nodes(), self._window, self._clock)

        def send() -> None:
            wanted = dialog.draft().request(self._clock())
            targets = dialog.chosen_targets()
            for target in targets:
                self._actions.create(target, wanted)
            names = ", ".join(self._fleet.name_of(t) for t in targets)
            self.message.emit(f"silence {matchers_text(wanted.matchers)} sent to {names}")

        self._open(dialog, send)

    def ask_expire(self, group: SilenceGroup) -> None:
        rows = group.unexpired(self._clock())
        if not rows:
            return
        names = ", ".join(self._fleet.name_of(r.target) for r in rows)
        box = QMessageBox(
            QMessageBox.Icon.Question, "Expire silence",
            f"End the silence {matchers_text(group.first.matchers)} by "
            f"{group.first.created_by} now, on {names}?\n\n"
            "Its alerts notify again at once.",
            QMessageBox.StandardButton.Ok | QMessageBox.StandardButton.Cancel, self._window,
        )  # fmt: skip
        box.button(QMessageBox.StandardButton.Ok).setText("Expire")

        def expire() -> None:
            for row in rows:
                self._actions.expire(row)

        self._open(box, expire)
