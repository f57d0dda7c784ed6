"""A fixed-size ring of timestamped sample rows for one node's GPUs."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class SampleRing:
    """Times (s since epoch) and values shaped (capacity, gpus, columns), oldest overwritten.

    A time gap longer than `gap_factor` sampling intervals gets a NaN row, so a
    plot shows a break where the daemon was away instead of a straight line.
    """

    def __init__(self, capacity: int, gpu_count: int, column_count: int) -> None:
        self.capacity = capacity
        # Unfilled: only written rows are read (_order, newest), and the pages of rows not
        # yet written stay unmapped (np.full touched 0.6 MB a node as each one connected).
        self._times = np.empty(capacity)
        self._values = np.empty((capacity, gpu_count, column_count), dtype=np.float32)
        self._next = 0
        self._size = 0
        self.last_time = float("-inf")

    def __len__(self) -> int:
        return self._size

    @property
    def first_time(self) -> float:
        """The oldest tick's time (inf while empty)."""
        if not self._size:
            return float("inf")
        return float(self._times[(self._next - self._size) % self.capacity])

    @property
    def gpu_count(self) -> int:
        return int(self._values.shape[1])

    def append(self, time_s: float, rows: npt.NDArray[np.float32], interval_s: float) -> bool:
        """Add one tick; returns False (and drops it) if it is not newer than the last."""
        if time_s <= self.last_time:
            return False
        if self._size and time_s - self.last_time > 2.5 * interval_s:
            self._write(self.last_time + interval_s, np.nan)
        self._write(time_s, rows)
        self.last_time = time_s
        return True

    def _write(self, time_s: float, rows: npt.NDArray[np.float32] | float) -> None:
        self._times[self._next] = time_s
        self._values[self._next] = rows
        self._next = (self._next + 1) % self.capacity
        self._size = min(self._size + 1, self.capacity)

    def _order(self) -> npt.NDArray[np.intp]:
        start = (self._next - self._size) % self.capacity
        return (start + np.arange(self._size)) % self.capacity

    def series(self, gpu: int, column: int) -> tuple[FloatArray, FloatArray]:
        """(times, values) of one GPU's column, oldest first."""
        order = self._order()
        return self._times[order], self._values[order, gpu, column].astype(np.float64)

    def times(self) -> FloatArray:
        return self._times[self._order()]

    def newest(self) -> npt.NDArray[np.float32] | None:
        """The last tick's rows, shaped (gpus, columns), or None before the first.

        A view into the ring, for reading now: a later append overwrites it.
        """
        if not self._size:
            return None
        return self._values[(self._next - 1) % self.capacity]
