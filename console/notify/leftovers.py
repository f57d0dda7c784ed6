"""What this console has on the desktop, on disk, for a later start to withdraw.

The notification spec gives no way to list notifications, nor another process's:
a console that died without withdrawing its own (killed, crashed, the session
logged out) would leave its last critical on the desktop for good. So each
console keeps the ids of its notifications on show in a file of its own
(``<pid>.json`` in the state directory), with the bus's id and the unique name
of the server that gave them. A console starting on the same bus closes the ids
of consoles no longer running, but only where the same server is still running:
ids count from 1 again when a server restarts, and another program's
notification may hold that number now. A clean quit withdraws its own and
removes its file (DesktopNotifier.withdraw_all).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path

import platformdirs

log = logging.getLogger(__name__)


def default_directory() -> Path:
    return Path(platformdirs.user_state_dir("gpufleet")) / "notifications"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: running
        return True
    return True


class NotificationRecord:
    """One console's notifications on show: (server unique name, id), on the bus `bus`."""

    def __init__(self, directory: Path, pid: int | None = None) -> None:
        self._directory = directory
        self._pid = os.getpid() if pid is None else pid
        self.path = directory / f"{self._pid}.json"

    def write(self, bus: str, shown: list[tuple[str, int]]) -> None:
        """What is on show now (nothing: the file goes)."""
        if not shown:
            self.remove()
            return
        body = json.dumps({"pid": self._pid, "bus": bus, "notifications": shown})
        try:
            self._directory.mkdir(parents=True, exist_ok=True)
            part = self.path.with_suffix(".part")
            part.write_text(body, encoding="utf-8")
            part.replace(self.path)
        except OSError as error:  # a full or read-only disk costs only the record
            log.debug("cannot record notifications in %s: %s", self.path, error)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)

    def leftovers(self, bus: str, server: str) -> list[int]:
        """Ids that consoles no longer running left with `server` on `bus`; their files go."""
        found: list[int] = []
        try:
            files = sorted(self._directory.glob("*.json"))
        except OSError:
            return []
        for path in files:
            if path == self.path:
                continue
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
                pid, shown = int(record["pid"]), record["notifications"]
                same_bus = bool(bus) and record["bus"] == bus
            except (OSError, ValueError, KeyError, TypeError):
                with contextlib.suppress(OSError):
                    path.unlink()  # unreadable: nothing to go by
                continue
            if _running(pid):
                continue  # another console, still running: its notifications are its own
            if same_bus:
                found += [int(n) for owner, n in shown if owner == server]
            with contextlib.suppress(OSError):
                path.unlink()
        return found
