"""AlertmanagerLink: the node's Alertmanager pusher, if it has one, across reloads.

The alert engine's listeners are added once and never removed, so they point at
this link, which forwards to whichever pusher the config in force asks for: a
reload that adds the first URL makes one (it pushes every firing alert and
mirrors the silences at once), one that changes URLs, labels, TLS, credentials
or resend retargets it in place (node_daemon.alerts.alertmanager keeps its
firing alerts and undelivered resolutions), one that removes every URL stops it
as a clean stop would.
"""

from __future__ import annotations

import threading

from node_daemon.alerts.alertmanager import AlertmanagerPusher
from node_daemon.alerts.am_settings import AlertmanagerSettings
from node_daemon.alerts.engine import AlertEngine
from node_daemon.alerts.model import AlertRecord


class AlertmanagerLink:
    """Owns the pusher of `engine`'s alerts for node `node` (its `node` label)."""

    def __init__(self, engine: AlertEngine, node: str) -> None:
        self._engine, self._node = engine, node
        # Guards the pusher's replacement against the listeners' forwarding, so a new
        # pusher's first snapshot of the firing alerts is never overtaken by an older state.
        self._lock = threading.Lock()
        self._pusher: AlertmanagerPusher | None = None
        self._wired = self._started = False

    @property
    def pusher(self) -> AlertmanagerPusher | None:
        return self._pusher

    def configure(self, settings: AlertmanagerSettings) -> None:
        """Push by `settings` (at start and on each reload); ConfigError if its TLS files fail."""
        labels = settings.node_labels(self._node)
        with self._lock:
            pusher = self._pusher
            if pusher is not None and settings.urls:
                pusher.reconfigure(settings, labels)
                return
            if pusher is None and settings.urls:
                self._pusher = self._new_pusher(settings, labels)
                if self._started:
                    self._pusher.start()
                return
            self._pusher = None
        if pusher is not None:
            pusher.stop()  # outside the lock: it waits for the request in flight

    def _new_pusher(
        self, settings: AlertmanagerSettings, labels: dict[str, str]
    ) -> AlertmanagerPusher:
        pusher = AlertmanagerPusher(settings, labels)
        pusher.set_silence_source(self._engine.am_silences)  # the pager stops when silenced
        # Alerts reloaded from the journal (or firing before a reload) are not announced
        # again: push them from the start, so they neither lapse nor get swept as stale.
        pusher.publish(self._engine.firing())
        if not self._wired:  # once: the engine's listeners cannot be removed
            self._engine.add_listener(self._publish)
            self._engine.add_silence_listener(self._silences_changed)
            self._wired = True
        return pusher

    def _publish(self, alerts: list[AlertRecord]) -> None:
        with self._lock:
            if self._pusher is not None:
                self._pusher.publish(alerts)

    def _silences_changed(self) -> None:
        with self._lock:
            if self._pusher is not None:
                self._pusher.silences_changed()

    def start(self) -> None:
        with self._lock:
            self._started = True
            if self._pusher is not None:
                self._pusher.start()

    def stop(self) -> None:
        with self._lock:
            pusher, self._pusher = self._pusher, None
        if pusher is not None:
            pusher.stop()
