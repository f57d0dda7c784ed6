"""The wall clock in unix milliseconds, the console's time unit.

The default of every `clock` argument: tests pass their own to set the time.
"""

from __future__ import annotations

import time


def unix_now_ms() -> int:
    return int(time.time() * 1000)
