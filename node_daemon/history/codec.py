"""A point's values on disk: float32, deflated (most metrics hardly change from tick to tick:
clocks, totals, counters), about a third of the raw bytes for a busy simulated node."""

from __future__ import annotations

import array
import zlib
from collections.abc import Sequence

# zlib's fastest level: the writer thread compresses every tick; higher levels save
# a few percent more for several times the CPU (bench/history_disk.py).
LEVEL = 1


def encode(values: Sequence[float]) -> bytes:
    return zlib.compress(array.array("f", values).tobytes(), LEVEL)


def decode(blob: bytes) -> array.array[float]:
    values = array.array("f")
    values.frombytes(zlib.decompress(blob))
    return values
