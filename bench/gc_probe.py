"""GcProbe: which threads ran Python's cyclic garbage collection, how often and how long.

A collection holds the GIL, so one on the network thread stalls the GUI thread
as surely as one on the GUI thread does; the console collects on the GUI thread
only (console/qt/gui_thread_gc.py) and `console_fleet.py --python-gc` measures
the old way beside it.
"""

from __future__ import annotations

import gc
import threading
import time
from collections import defaultdict


class GcProbe:
    def __init__(self) -> None:
        self._started: dict[int, float] = {}
        self._runs: dict[tuple[str, int], list[float]] = defaultdict(list)
        self._measuring = False
        gc.callbacks.append(self._on_gc)

    def start_measuring(self) -> None:
        self._runs.clear()
        self._measuring = True

    def stop_measuring(self) -> None:
        self._measuring = False

    def close(self) -> None:
        gc.callbacks.remove(self._on_gc)

    def _on_gc(self, phase: str, info: dict[str, int]) -> None:
        ident = threading.get_ident()
        if phase == "start":
            self._started[ident] = time.perf_counter()
            return
        began = self._started.pop(ident, None)
        if began is not None and self._measuring:
            key = (threading.current_thread().name, info["generation"])
            self._runs[key].append(time.perf_counter() - began)

    def stats(self, wall_s: float) -> list[dict[str, object]]:
        """Per thread and generation: collections, total ms per minute, longest ms."""
        return [
            {
                "thread": thread,
                "generation": generation,
                "collections": len(runs),
                "ms_per_min": round(sum(runs) * 1000 * 60 / wall_s, 1),
                "max_ms": round(max(runs) * 1000, 1),
            }
            for (thread, generation), runs in sorted(self._runs.items())
        ]
