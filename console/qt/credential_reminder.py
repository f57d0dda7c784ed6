"""CredentialReminder: checks each second whether a credential's expiry should be announced."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from console.fleet.credential_expiry import ExpiryAnnouncer, ExpiryNotice
from console.fleet.model import FleetModel
from console.fleet.wall_clock import unix_now_ms
from console.qt.named_timer import named_timer

TICK_MS = 1000


class CredentialReminder(QObject):
    """Emits `noticeDue` once per threshold per credential (console.fleet.credential_expiry)."""

    noticeDue = Signal(object)  # ExpiryNotice

    def __init__(
        self,
        fleet: FleetModel,
        announcer: ExpiryAnnouncer,
        clock: Callable[[], int] = unix_now_ms,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)  # owned by the window: its timer dies with it
        self.setObjectName("gpufleet-credential-reminder")
        self._fleet, self._announcer, self._clock = fleet, announcer, clock
        self._timer = named_timer(
            self, "gpufleet-credential-reminder-timer", self.check, interval_ms=TICK_MS
        )
        self._timer.start()

    def check(self) -> list[ExpiryNotice]:
        nodes = ((n.name, n.identity) for n in self._fleet)
        notices = self._announcer.due(nodes, self._clock())
        for notice in notices:
            self.noticeDue.emit(notice)
        return notices
