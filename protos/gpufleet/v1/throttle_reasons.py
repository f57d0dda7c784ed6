"""NVML's clock event (throttle) reason bits, in the words nvidia-smi -q uses: one table.

The daemon's throttle rule names the reasons it alerts on, its health signals the
ones the hardware imposes, and the console's readings all of them; each takes
them from here. No protobuf: the console's fleet model imports it too.
"""

from __future__ import annotations

from typing import Final

# clocks_event_reasons bit -> words, in bit order (nvmlClocksEventReason*).
REASON_WORDS: Final = {
    0x1: "GPU idle",
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
# The reasons the throttle rule raises for: the GPU runs slower than it could.
SLOWING: Final = (0x4, 0x8, 0x20, 0x40, 0x80)
# The ones the hardware imposes (not the driver's own caps): a health signal.
HARDWARE: Final = (0x8, 0x40, 0x80)


def reason_words(mask: int, bits: tuple[int, ...] | None = None) -> list[str]:
    """The words of the reasons set in `mask`, in bit order; only `bits` when given."""
    return [
        words for bit, words in REASON_WORDS.items() if mask & bit and (bits is None or bit in bits)
    ]
