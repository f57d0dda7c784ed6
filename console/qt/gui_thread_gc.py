"""GuiThreadCollector: Python's cyclic garbage collector runs in the GUI thread only.

Left automatic, a collection runs in whichever thread happens to allocate past
the threshold: in the console that is often the network thread or a gRPC
worker. A Qt object whose wrapper Python owns (a model, a proxy, a timer) and
that sits in a reference cycle is then destroyed in that thread, while the GUI
thread may be delivering an event to it or deleting its neighbours: a queued
call lands on freed memory (a segmentation fault) or the two threads wait on
each other's locks (a hang). Both were seen in the Slurm console tests.

So automatic collection is switched off and the collector runs from a timer in
the GUI thread, by the same generation thresholds Python would use, between
two events rather than inside one. Reference counting still frees everything
that is not in a cycle at once; only cycles wait for the next tick.

A full collection walks every tracked object, and nearly all of a running
console's (some 140,000 at 1,000 GPUs: modules, classes, the window's widgets,
each node's state) are made in its first seconds and live as long as it does:
walking them took 110-160 ms of the GUI thread once a minute. So the console
freezes them (`freeze_long_lived`): once the fleet has settled, everything that
survives a full collection moves to Python's permanent generation, which no
collection walks. Full collections then walk only what came later (5-12 ms).
Frozen objects are still freed by reference counting; only a cycle among them
would wait, so every hour the heap is thawed, collected in full once and
frozen again.
"""

from __future__ import annotations

import gc
import time

from PySide6.QtCore import QCoreApplication, QObject, QThread

from console.qt.named_timer import named_timer

CHECK_INTERVAL_MS = 100
FIRST_FREEZE_MS = 60_000  # the fleet's first connections and inventories are in by then
REFREEZE_MS = 3_600_000  # a cycle among frozen objects waits at most this long
FULL_EVERY_S = 60.0  # the oldest generation is walked at most this often
# Young collections before the middle generation's (Python's default: 10). What survives
# a young collection is mostly each GPU's newest snapshot, alive until the next tick
# replaces it; a middle collection walks all of them (27-63 ms at 10,000 GPUs), however
# often it runs. Every 50th (about 5 s at 10,000 GPUs) instead of every 10th: a fifth of
# the pauses, and a cycle among them waits seconds longer.
MIDDLE_EVERY = 50


class GuiThreadCollector(QObject):
    """Owns the collection while installed; `uninstall` gives it back to Python."""

    def __init__(self, interval_ms: int = CHECK_INTERVAL_MS) -> None:
        app = QCoreApplication.instance()
        if app is None:
            raise RuntimeError("GuiThreadCollector needs the Qt application first")
        if QThread.currentThread() is not app.thread():
            raise RuntimeError("GuiThreadCollector must be made in the GUI thread")
        super().__init__(app)  # lives as long as the application, in its thread
        self.collections = 0
        self._was_enabled = gc.isenabled()
        self._was_threshold = gc.get_threshold()
        self._last_full = time.monotonic()
        self._timer = named_timer(self, "guiThreadCollector", self.collect_due)
        self._freeze_timer = named_timer(self, "guiThreadCollectorFreeze", self.freeze_now)
        self._refreeze_ms = REFREEZE_MS
        self.freezes = 0
        gc.disable()
        gc.set_threshold(self._was_threshold[0], MIDDLE_EVERY, self._was_threshold[2])
        self._timer.start(interval_ms)

    def freeze_long_lived(
        self, first_ms: int = FIRST_FREEZE_MS, every_ms: int = REFREEZE_MS
    ) -> None:
        """Freeze what survives a full collection `first_ms` from now, then every `every_ms`."""
        self._refreeze_ms = every_ms
        self._freeze_timer.start(first_ms)

    def freeze_now(self) -> None:
        """Thaw, collect everything (one long pause), freeze what is left."""
        gc.unfreeze()
        self._collect_all()
        gc.freeze()
        self.freezes += 1
        if self._freeze_timer.isActive():
            self._freeze_timer.setInterval(self._refreeze_ms)

    def collect_due(self) -> None:
        """Collect what Python itself would have collected by now: the youngest
        generations past their thresholds, and the whole heap at most once a
        FULL_EVERY_S (a full collection walks every object not frozen: it must stay rare
        in a busy console; CPython waits for a quarter more long-lived objects, which it
        counts and Python code cannot without gc.get_objects: that list holds a
        reference to a tuple another thread is still building, which then fails with
        "bad argument to internal function", seen at 10,000 GPUs)."""
        counts, thresholds = gc.get_count(), gc.get_threshold()
        if counts[0] <= thresholds[0]:
            return
        if counts[1] <= thresholds[1]:
            gc.collect(0)
        elif counts[2] <= thresholds[2] or time.monotonic() - self._last_full < FULL_EVERY_S:
            gc.collect(1)
        else:
            self._collect_all()
        self.collections += 1

    def _collect_all(self) -> None:
        gc.collect()
        self._last_full = time.monotonic()

    def uninstall(self) -> None:
        """Thaw, collect everything once more here, then let Python collect on its own again."""
        self._timer.stop()
        self._freeze_timer.stop()
        gc.unfreeze()
        self._collect_all()
        gc.set_threshold(*self._was_threshold)
        if self._was_enabled:
            gc.enable()
        self.setParent(None)
        self.deleteLater()


_installed: GuiThreadCollector | None = None


def collect_in_gui_thread() -> GuiThreadCollector:
    """Install the collector for the application (once; later calls return the same)."""
    global _installed
    if _installed is None or not _is_alive(_installed):
        _installed = GuiThreadCollector()
    return _installed


def stop_collecting_in_gui_thread() -> None:
    """Collect once more, in this (the GUI) thread, and give collection back to Python."""
    global _installed
    if _installed is not None and _is_alive(_installed):
        _installed.uninstall()
    _installed = None


def _is_alive(collector: GuiThreadCollector) -> bool:
    try:
        collector.objectName()
    except RuntimeError:  # its C++ object went with an earlier application
        return False
    return True
