"""Reasons read straight off one reading: what the driver and the RAS counters say now.

A flag that cannot be read this tick (None) keeps its last known value: a pending
remap does not end because one read failed. `LiveSignals` remembers those values
for one GPU; everything else here is a pure function of the reading.
"""

from __future__ import annotations

from collections.abc import Iterator

from gpufleet.v1.gpu_metrics import (
    ECC_UNCORRECTED_TOTAL,
    NVLINK_LINKS_DOWN,
    RECOVERY_ACTION,
    RETIRED_PAGES_PENDING,
    ROW_REMAP_FAILURE,
    ROW_REMAP_PENDING,
    THROTTLE_REASONS,
    GpuMetric,
)
from gpufleet.v1.throttle_reasons import HARDWARE, reason_words
from node_daemon.backends.readings import GpuHealth, GpuReading
from node_daemon.health.model import HealthState

# (code, state, summary, action) of a reason, before it is dated.
Signal = tuple[str, HealthState, str, str]

RESET_ACTION = "reset the GPU when it is idle (nvidia-smi -r, or the healing policy's gpu_reset)"
REBOOT_ACTION = "reboot the node"
INSPECT_ACTION = "drain the GPU and have its hardware inspected (likely an RMA)"

# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION's values.
_RECOVERY: dict[int, Signal] = {
    1: (
        "recovery_gpu_reset",
        HealthState.NEEDS_RESET,
        "the driver asks for a GPU reset",
        RESET_ACTION,
    ),
    2: (
        "recovery_node_reboot",
        HealthState.NEEDS_REBOOT,
        "the driver asks for a node reboot",
        REBOOT_ACTION,
    ),
    3: (
        "recovery_drain_p2p",
        HealthState.DEGRADED,
        "the driver asks to drain peer-to-peer traffic",
        "move peer-to-peer work off this GPU",
    ),
    4: (
        "recovery_drain_and_reset",
        HealthState.NEEDS_RESET,
        "the driver asks to drain the GPU and reset it",
        "drain the GPU, then reset it",
    ),
}
_FLAGS: tuple[GpuMetric[int], ...] = (
    ROW_REMAP_FAILURE,
    ROW_REMAP_PENDING,
    RETIRED_PAGES_PENDING,
    RECOVERY_ACTION,
    NVLINK_LINKS_DOWN,
    ECC_UNCORRECTED_TOTAL,
)


class LiveSignals:
    """One GPU's flags as last read, so that a tick that cannot read one changes nothing."""

    def __init__(self) -> None:
        self._known: dict[str, int] = {}
        self.down_links: tuple[int, ...] = ()
        self.current: tuple[Signal, ...] = ()  # what signals() gives, as of the last update

    def update(self, reading: GpuReading) -> None:
        if reading.health is not GpuHealth.OK:
            return  # a lost or failing GPU tells nothing new about its flags
        for metric in _FLAGS:
            value = reading[metric]
            if value is not None:
                self._known[metric.field] = value
        self.down_links = reading.nvlink_down_links
        self.current = tuple(self.signals())

    def value(self, metric: GpuMetric[int]) -> int:
        return self._known.get(metric.field, 0)

    def signals(self) -> Iterator[Signal]:
        """The reasons the flags give now."""
        if self.value(ROW_REMAP_FAILURE):
            yield (
                "row_remap_failure",
                HealthState.NEEDS_INSPECTION,
                "a memory row remap failed: no spare rows left",
                INSPECT_ACTION,
            )
        if self.value(ROW_REMAP_PENDING):
            yield (
                "row_remap_pending",
                HealthState.NEEDS_RESET,
                "a memory row remap waits for a GPU reset",
                RESET_ACTION,
            )
        if self.value(RETIRED_PAGES_PENDING):
            yield (
                "retired_pages_pending",
                HealthState.NEEDS_RESET,
                "a memory page retirement waits for a GPU reset",
                RESET_ACTION,
            )
        recovery = _RECOVERY.get(self.value(RECOVERY_ACTION))
        if recovery is not None:
            yield recovery
        down = self.down_links or ()
        if down or self.value(NVLINK_LINKS_DOWN):
            links = f" ({', '.join(map(str, down))})" if down else ""
            count = len(down) or self.value(NVLINK_LINKS_DOWN)
            yield (
                "nvlink_down",
                HealthState.DEGRADED,
                f"{count} NVLink link{'' if count == 1 else 's'} down{links}",
                "check the NVLink bridge or baseboard; reset the GPU to retrain the links",
            )
        uncorrected = self.value(ECC_UNCORRECTED_TOTAL)
        if uncorrected:
            yield (
                "ecc_uncorrectable",
                HealthState.SUSPECT,
                f"{uncorrected} uncorrectable ECC error{'' if uncorrected == 1 else 's'} "
                "since the driver loaded",
                "watch it: a pending remap or retirement will ask for a reset",
            )


class SlowdownWatch:
    """Since when the hardware has been slowing the GPU down, and why."""

    def __init__(self) -> None:
        self._since_ms: int | None = None
        self._names: tuple[str, ...] = ()

    def update(self, reading: GpuReading, now_ms: int) -> None:
        bits = reading[THROTTLE_REASONS]
        if bits is None or reading.health is not GpuHealth.OK:
            return  # no news
        self._names = tuple(reason_words(bits, HARDWARE))
        if not self._names:
            self._since_ms = None
        elif self._since_ms is None:
            self._since_ms = now_ms

    def signal(self, now_ms: int, for_s: float) -> Signal | None:
        """DEGRADED once the slowdown has lasted `for_s`: the GPU works, slower than it should."""
        if self._since_ms is None or now_ms - self._since_ms < for_s * 1000:
            return None
        return ("hw_slowdown", HealthState.DEGRADED,
                f"clocks held down by the hardware: {', '.join(self._names)}",
                "check the cooling and the power supply; reset the GPU if it persists "
                "while cool")  # fmt: skip


def lost_signal(reading: GpuReading) -> Signal | None:
    """A GPU that fell off the bus (NVML GPU_IS_LOST, Xid 79) needs the node rebooted."""
    if reading.health is not GpuHealth.LOST:
        return None
    detail = reading.error or "it fell off the bus"
    return ("gpu_lost", HealthState.NEEDS_REBOOT, f"GPU lost: {detail}", REBOOT_ACTION)
