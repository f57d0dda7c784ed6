"""A point's values on disk: float32, deflated (most metrics hardly change from tick to tick:
clocks, totals, counters), about a third of the raw bytes for a busy simulated node."""

from __future__ import annotations

import array
import zlib
from collections.abc import Sequence

# zlib's fastest level: the writer thread compresses every tick; higher levels save
# a few percent more for several times the CPU (bench/history_disk.py).
LEVEL = 1


class CorruptBlob(ValueError):
    """A stored blob that does not decode to the values its layout says it holds."""


def encode(values: Sequence[float]) -> bytes:
    return zlib.compress(array.array("f", values).tobytes(), LEVEL)


def decode(blob: object, size: int | None = None) -> array.array[float]:
    """The values deflated in `blob`; CorruptBlob where it is not that (a damaged page,
    a row written by something else), or holds other than `size` values.

    Every failure is one exception, so a reader skips the row whatever broke in it:
    zlib.error (not deflate data), ValueError (a length not a float32 multiple),
    TypeError (a value that is no blob at all).
    """
    values = array.array("f")
    try:
        values.frombytes(zlib.decompress(blob))  # type: ignore[arg-type]
    except (zlib.error, ValueError, TypeError) as exc:
        raise CorruptBlob(f"not a deflated float32 array ({type(exc).__name__}: {exc})") from exc
    if size is not None and len(values) != size:
        raise CorruptBlob(f"{len(values)} values where its layout has {size}")
    return values
