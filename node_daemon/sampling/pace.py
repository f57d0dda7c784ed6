"""Adaptive sampling: which GPUs to look at between sweeps, and when a look calls for a
sweep at once.

A GPU whose temperature (the GPU's or its memory's) is within `margin_c` of an alert
line, or heading to cross one within `lookahead_s` at the rate of its last two sweeps, is
looked at every `fast_interval_s`: its two temperatures alone (`TemperaturePeek`), which
takes nothing a sweep takes (no Xid event is read). A look that finds a temperature on
the other side of a line than the last sweep did asks for a sweep now, so the rules
judge the crossing then instead of at the next tick. Far from every line nothing is
looked at: the daemon's cost at rest does not change.

The lines come from whoever builds the pace (the daemon: the `gpu_temp` and
`memory_temp` rules' warning and critical lines for the GPU's model, as the alert
settings in force say, so a reload changes them at the next sweep).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from gpufleet.v1.gpu_metrics import TEMP_GPU_C, TEMP_MEM_C
from node_daemon.backends.readings import GpuReading

Lines = tuple[float, ...]
# A look's answer for one GPU: (GPU temperature, memory temperature), None where unread.
Peeked = tuple[float | None, float | None]


@dataclass(frozen=True)
class PaceSettings:
    """`[daemon]` fast_sample_interval_s (0: off), fast_sample_margin_c,
    fast_sample_lookahead_s."""

    fast_interval_s: float = 0.1
    margin_c: float = 5.0
    lookahead_s: float = 3.0

    @property
    def enabled(self) -> bool:
        return self.fast_interval_s > 0


@dataclass(frozen=True)
class Watched:
    """A GPU looked at between sweeps, and its temperatures at the last sweep."""

    index: int
    gpu_lines: Lines
    memory_lines: Lines
    gpu_c: float | None
    memory_c: float | None

    def crossed(self, peeked: Peeked) -> bool:
        """Whether a look found either temperature across one of its lines from where the
        last sweep saw it (up or down)."""
        gpu_c, memory_c = peeked
        return _across(self.gpu_lines, self.gpu_c, gpu_c) or _across(
            self.memory_lines, self.memory_c, memory_c
        )


def _across(lines: Lines, before: float | None, now: float | None) -> bool:
    if before is None or now is None:
        return False
    return any((before >= line) != (now >= line) for line in lines)


class Pace:
    """Chooses the GPUs to look at after each sweep (`watch`)."""

    def __init__(
        self, settings: PaceSettings, lines_of: Callable[[int], tuple[Lines, Lines]]
    ) -> None:
        """`lines_of(index)`: the GPU's (GPU temperature lines, memory temperature lines)."""
        self.settings = settings
        self._lines_of = lines_of

    def watch(
        self,
        readings: Sequence[GpuReading],
        previous: Mapping[int, GpuReading],
        elapsed_s: float,
    ) -> list[Watched]:
        """The GPUs near a line or heading to one, from this sweep's `readings`, the last
        sweep's (`previous`, by index) and the seconds between the two."""
        if not self.settings.enabled:
            return []
        watched = []
        for reading in readings:
            gpu_lines, memory_lines = self._lines_of(reading.index)
            before = previous.get(reading.index)
            gpu_c, memory_c = reading[TEMP_GPU_C], reading[TEMP_MEM_C]
            gpu_before = before[TEMP_GPU_C] if before is not None else None
            memory_before = before[TEMP_MEM_C] if before is not None else None
            near = self._near(gpu_lines, gpu_c, gpu_before, elapsed_s) or self._near(
                memory_lines, memory_c, memory_before, elapsed_s
            )
            if near:
                watched.append(Watched(reading.index, gpu_lines, memory_lines, gpu_c, memory_c))
        return watched

    def _near(self, lines: Lines, now: float | None, before: float | None, dt_s: float) -> bool:
        if now is None:
            return False
        if any(abs(now - line) <= self.settings.margin_c for line in lines):
            return True
        if before is None or dt_s <= 0:
            return False
        ahead = now + (now - before) / dt_s * self.settings.lookahead_s
        return _across(lines, now, ahead)
