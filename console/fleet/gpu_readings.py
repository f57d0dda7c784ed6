"""A GPU's current readings, as the GPU detail's table shows them: plain text, no Qt.

Every number is the newest ring row's value (the last sample the frame applied),
in the unit and under the label the catalogue gives it (`gpufleet.v1.gpu_metrics`
Shown). A value the GPU did not report reads as an en dash, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from console.fleet.columns import shown
from console.fleet.model import NodeRecord
from gpufleet.v1.gpu_metrics import (
    ECC_CORRECTED_TOTAL,
    ECC_UNCORRECTED_TOTAL,
    FAN_PCT,
    MEM_CLOCK_MHZ,
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    PCIE_RX_BYTES_PER_S,
    PCIE_TX_BYTES_PER_S,
    POWER_LIMIT_W,
    POWER_W,
    PSTATE,
    SM_CLOCK_MHZ,
    TEMP_GPU_C,
    TEMP_MEM_C,
    THROTTLE_REASONS,
    UTIL_GPU_PCT,
    UTIL_MEM_PCT,
    GpuMetric,
)
from gpufleet.v1.throttle_reasons import REASON_WORDS, reason_words

MISSING: Final = "\N{EN DASH}"
# Digits after the point by shown unit: memory in GiB needs one, the rest none.
_DECIMALS: Final = {"GiB": 1}


@dataclass(frozen=True)
class Reading:
    label: str
    text: str


def throttle_text(mask: float | None) -> str:
    """NVML's reason bits in words: 'none', 'software power cap, hardware slowdown'."""
    if mask is None:
        return MISSING
    bits = int(mask)
    words = reason_words(bits)
    unknown = bits & ~sum(REASON_WORDS)
    if unknown:
        words.append(f"0x{unknown:x}")
    return ", ".join(words) or "none"


def gpu_readings(node: NodeRecord, gpu: int) -> tuple[Reading, ...]:
    """The GPU's readings, one line per thing a person looks for, in the table's order."""

    def num(metric: GpuMetric[Any]) -> str:
        return _number(node.value(gpu, metric), metric)

    limit = node.value(gpu, POWER_LIMIT_W)
    if limit is None and node.info is not None and gpu < len(node.info.gpus):
        limit = node.info.gpus[gpu].power_limit_w  # the inventory's, before a sample says
    pstate = node.value(gpu, PSTATE)

    def two(first: str, a: GpuMetric[Any], second: str, b: GpuMetric[Any]) -> str:
        """Two readings of one unit, the unit once: "SM 1,410 · memory 1,215 MHz"."""
        unit = f" {shown(a).unit}" if shown(a).unit else ""
        bare = (_bare(node.value(gpu, a), a), _bare(node.value(gpu, b), b))
        return f"{first} {bare[0]} · {second} {bare[1]}{unit}"

    return (
        Reading("Clocks", two("SM", SM_CLOCK_MHZ, "memory", MEM_CLOCK_MHZ)),
        Reading("Power", f"{num(POWER_W)} of {_number(limit, POWER_LIMIT_W)} limit"),
        Reading("Fan", num(FAN_PCT)),
        Reading(shown(PSTATE).label, MISSING if pstate is None else f"P{int(pstate)}"),
        Reading("Temperature", two("GPU", TEMP_GPU_C, "memory", TEMP_MEM_C)),
        Reading("Utilisation", two("SM", UTIL_GPU_PCT, "memory", UTIL_MEM_PCT)),
        Reading(
            "Memory",
            f"{_bare(node.value(gpu, MEM_USED_BYTES), MEM_USED_BYTES)} of {num(MEM_TOTAL_BYTES)}",
        ),
        Reading(
            "ECC errors",
            f"{num(ECC_CORRECTED_TOTAL)} corrected · {num(ECC_UNCORRECTED_TOTAL)} uncorrected",
        ),
        Reading("PCIe", two("RX", PCIE_RX_BYTES_PER_S, "TX", PCIE_TX_BYTES_PER_S)),
        Reading("Throttling", throttle_text(node.value(gpu, THROTTLE_REASONS))),
    )


def _bare(value: float | None, metric: GpuMetric[Any]) -> str:
    """The number without its unit ("17.2" of "40.0 GiB")."""
    if value is None:
        return MISSING
    return f"{value:,.{_DECIMALS.get(shown(metric).unit, 0)}f}"


def _number(value: float | None, metric: GpuMetric[Any]) -> str:
    unit = shown(metric).unit
    bare = _bare(value, metric)
    if value is None or not unit:
        return bare
    return f"{bare} {unit}"
