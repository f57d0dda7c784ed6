"""GPU facts that could not be read, and when to read them again.

A GPU that is lost when the backend opens has no facts: `open()` reports it as
``GpuStatic(index, uuid="", name="")``. An empty UUID is how every caller tells
("facts missing"): inventory shows it, and nothing may launch work on such a GPU,
since `CUDA_VISIBLE_DEVICES` needs the UUID. Once the GPU answers again the
sampler re-reads the facts (the backend's idempotent `open()`), at once; while
they stay unreadable it tries again every `RETRY_S`, not on every sweep.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from node_daemon.backends.readings import GpuHealth, GpuReading, GpuStatic, NodeFacts

# Between re-reads of facts that stayed unreadable although the GPU answers.
RETRY_S = 30.0


def facts_missing(gpu: GpuStatic) -> bool:
    """True while the GPU's facts could not be read: it has no UUID."""
    return not gpu.uuid


class MissingFacts:
    """Decides, after each sweep, whether GPUs without facts should be read again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tried_at: dict[int, float] = {}  # GPU index → last re-read while answering

    def due(self, facts: NodeFacts, readings: Sequence[GpuReading]) -> list[int]:
        """GPUs without facts that answer and are due a re-read; marks them tried."""
        missing = {gpu.index for gpu in facts.gpus if facts_missing(gpu)}
        if not missing:
            self._tried_at.clear()
            return []
        now = self._clock()
        due = []
        for reading in readings:
            if reading.index not in missing:
                continue
            if reading.health is GpuHealth.LOST:
                # Read at once when it answers again, however recent the last try.
                self._tried_at.pop(reading.index, None)
            elif now - self._tried_at.get(reading.index, now - RETRY_S) >= RETRY_S:
                self._tried_at[reading.index] = now
                due.append(reading.index)
        return due
