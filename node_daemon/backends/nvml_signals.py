"""The NVML backend's health signals (docs/health.md), read for `nvml.NvmlBackend`.

PCIe replays, remapped rows, retired pages, NVLink link states and error counters,
and the power limit's range and setting. Part of the NVML backend: every read goes
through the backend's query helper (`Query`, nvml._Query), so a signal a GPU lacks
(NOT_SUPPORTED: retired pages on Ampere and later, remapped rows before it, NVLink on
a PCIe card) is None, a lost GPU makes the reading LOST, an unexpected error ERROR.

Cost: the sweep runs every tick (1 s) for every GPU, and NVLink alone is up to 18
links x (1 state + 4 counters) calls per GPU. The signals that change slowly and
are judged over minutes (remapped rows, retired pages, NVLink link states and
counters) are read every `SLOW_INTERVAL_S` seconds and their last value is reported
on the ticks in between (`Every`); a link that goes down is seen within that
interval. The PCIe replay counter and the power limit (one call each) are read every
tick, and the driver's recovery action rides on the memory temperature's
field-value call (nvml.py).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

# Part of the NVML backend, split from nvml.py to keep modules small; nothing
# outside node_daemon/backends/nvml*.py imports pynvml.
import pynvml  # noqa: TID251

from gpufleet.v1.gpu_metrics import (
    NVLINK_CRC_DATA_ERRORS_TOTAL,
    NVLINK_CRC_FLIT_ERRORS_TOTAL,
    NVLINK_LINKS_ACTIVE,
    NVLINK_LINKS_DOWN,
    NVLINK_METRICS,
    NVLINK_RECOVERY_ERRORS_TOTAL,
    NVLINK_REPLAY_ERRORS_TOTAL,
    REMAPPED_ROWS_CORRECTABLE,
    REMAPPED_ROWS_UNCORRECTABLE,
    RETIRED_PAGES,
    RETIRED_PAGES_DBE,
    RETIRED_PAGES_PENDING,
    RETIRED_PAGES_SBE,
    ROW_REMAP_FAILURE,
    ROW_REMAP_PENDING,
)
from node_daemon.backends.base import PowerLimitRefused
from node_daemon.backends.readings import AnyMetric

log = logging.getLogger(__name__)

T = TypeVar("T")
Handle = Any  # pynvml.c_nvmlDevice_t
SlowValues = Mapping[AnyMetric, int | None]

SLOW_INTERVAL_S = 10.0  # remapped rows, retired pages, NVLink: seconds between reads

_NVLINK_COUNTERS = (
    (NVLINK_CRC_FLIT_ERRORS_TOTAL, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, "nvlink.crc_flit"),
    (NVLINK_CRC_DATA_ERRORS_TOTAL, pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA, "nvlink.crc_data"),
    (NVLINK_REPLAY_ERRORS_TOTAL, pynvml.NVML_NVLINK_ERROR_DL_REPLAY, "nvlink.replay"),
    (NVLINK_RECOVERY_ERRORS_TOTAL, pynvml.NVML_NVLINK_ERROR_DL_RECOVERY, "nvlink.recovery"),
)


class Query(Protocol):
    """The NVML backend's query helper (nvml._Query)."""

    errors: list[str]

    def __call__(self, what: str, call: Callable[..., T], *args: Any) -> T | None: ...

    def failed(self, what: str, exc: pynvml.NVMLError, function: str) -> None: ...


class Every(Generic[T]):
    """The last result of a slow read per GPU, read again once `interval_s` has passed."""

    def __init__(
        self, interval_s: float = SLOW_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._interval_s, self._clock = interval_s, clock
        self._kept: dict[int, tuple[float, T]] = {}

    def get(self, index: int, read: Callable[[], T]) -> T:
        """GPU `index`'s kept result, or `read()`'s when none is kept or it is due."""
        now = self._clock()
        kept = self._kept.get(index)
        if kept is not None and now - kept[0] < self._interval_s:
            return kept[1]
        result = read()  # raises (GPU lost): nothing is kept
        self._kept[index] = (now, result)
        return result

    def kept(self, index: int) -> T | None:
        """GPU `index`'s kept result, due or not; None when none is kept."""
        kept = self._kept.get(index)
        return None if kept is None else kept[1]

    def forget(self, index: int) -> None:
        """Read GPU `index` afresh next time (it was lost, or its layout changed)."""
        self._kept.pop(index, None)


# ---------------------------------------------------------------- every tick


def pcie_replay_total(q: Query, handle: Handle) -> int | None:
    """No --query-gpu field: nvidia-smi -q, PCI, "Replays Since Reset"."""
    count = q("pcie.replay_counter", pynvml.nvmlDeviceGetPcieReplayCounter, handle)
    return None if count is None else int(count)


def power_limit_w(q: Query, handle: Handle) -> float | None:
    """power.limit: the power management limit now (NVML answers mW)."""
    milliwatts = q("power.limit", pynvml.nvmlDeviceGetPowerManagementLimit, handle)
    return None if milliwatts is None else milliwatts / 1000.0


def power_limit_range_w(q: Query, handle: Handle) -> tuple[float | None, ...]:
    """power.default_limit, power.min_limit, power.max_limit (W)."""
    default = q("power.default_limit", pynvml.nvmlDeviceGetPowerManagementDefaultLimit, handle)
    bounds = q("power.min_limit", pynvml.nvmlDeviceGetPowerManagementLimitConstraints, handle)
    low, high = (None, None) if bounds is None else bounds
    return tuple(None if mw is None else mw / 1000.0 for mw in (default, low, high))


# ---------------------------------------------------------------- slowly changing


def remapped_rows(q: Query, handle: Handle) -> dict[AnyMetric, int | None]:
    """`nvidia-smi --query-remapped-rows=` remapped_rows.correctable, .uncorrectable,
    .pending, .failure (Ampere and later; NOT_SUPPORTED before)."""
    rows = q("remapped_rows", pynvml.nvmlDeviceGetRemappedRows, handle)
    correctable, uncorrectable, pending, failure = (None,) * 4 if rows is None else rows
    return {
        REMAPPED_ROWS_CORRECTABLE: None if correctable is None else int(correctable),
        REMAPPED_ROWS_UNCORRECTABLE: None if uncorrectable is None else int(uncorrectable),
        ROW_REMAP_PENDING: None if pending is None else int(bool(pending)),
        ROW_REMAP_FAILURE: None if failure is None else int(bool(failure)),
    }


def retired_pages(q: Query, handle: Handle) -> dict[AnyMetric, int | None]:
    """retired_pages.single_bit_ecc.count, retired_pages.double_bit.count, and
    retired_pages.pending (0/1): GPUs before Ampere; later ones remap rows instead."""
    pending = q("retired_pages.pending", pynvml.nvmlDeviceGetRetiredPagesPendingStatus, handle)
    if pending is None:  # not supported: spare the two page-list calls
        return dict.fromkeys(RETIRED_PAGES)
    causes = (
        (RETIRED_PAGES_SBE, pynvml.NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS),
        (RETIRED_PAGES_DBE, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR),
    )
    values: dict[AnyMetric, int | None] = {RETIRED_PAGES_PENDING: int(bool(pending))}
    for metric, cause in causes:
        pages = q(metric.field, pynvml.nvmlDeviceGetRetiredPages, handle, cause)
        values[metric] = None if pages is None else len(pages)
    return values


def nvlink_links(q: Query, handle: Handle) -> tuple[int, ...] | None:
    """The GPU's NVLink link numbers (nvidia-smi nvlink -s lists them), or None when
    the probe failed unexpectedly (probe again later).

    Probes links 0..NVML_NVLINK_MAX_LINKS-1 once per session: drivers answer
    INVALID_ARGUMENT past the GPU's last link, NOT_SUPPORTED for a link (or a GPU)
    without NVLink.
    """
    links: list[int] = []
    for link in range(pynvml.NVML_NVLINK_MAX_LINKS):
        try:
            pynvml.nvmlDeviceGetNvLinkState(handle, link)
        except pynvml.NVMLError as exc:
            if exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
                continue
            if exc.value == pynvml.NVML_ERROR_INVALID_ARGUMENT:
                break
            errors = len(q.errors)
            q.failed("nvlink.state", exc, "nvmlDeviceGetNvLinkState")
            return None if len(q.errors) > errors else tuple(links)
        links.append(link)
    return tuple(links)


@dataclass(frozen=True)
class NvLinkReading:
    values: SlowValues  # the NVLink metrics: totals over links, links up and down
    down: tuple[int, ...]  # the links that are down


def read_nvlink(q: Query, handle: Handle, links: tuple[int, ...]) -> NvLinkReading:
    """`nvidia-smi nvlink -s` (states) and `-e` (error counters), summed over links."""
    if not links:
        return NvLinkReading(dict.fromkeys(NVLINK_METRICS), ())
    up: list[int] = []
    down: list[int] = []
    for link in links:
        state = q("nvlink.state", pynvml.nvmlDeviceGetNvLinkState, handle, link)
        if state is not None:
            (up if state == pynvml.NVML_FEATURE_ENABLED else down).append(link)
    known = bool(up or down)
    values: dict[AnyMetric, int | None] = {
        NVLINK_LINKS_ACTIVE: len(up) if known else None,
        NVLINK_LINKS_DOWN: len(down) if known else None,
    }
    for metric, counter, what in _NVLINK_COUNTERS:
        counts = [q(what, pynvml.nvmlDeviceGetNvLinkErrorCounter, handle, link, counter)
                  for link in links]  # fmt: skip
        read = [int(count) for count in counts if count is not None]
        values[metric] = sum(read) if read else None
    return NvLinkReading(values, tuple(down))


# ---------------------------------------------------------------- setting the power limit


def set_power_limit(handle: Handle, index: int, watts: float) -> None:
    """nvmlDeviceSetPowerManagementLimit (mW); PowerLimitRefused says why it failed."""
    if not math.isfinite(watts) or watts <= 0:
        raise PowerLimitRefused(f"GPU {index}: {watts} W is not a power limit")
    try:
        pynvml.nvmlDeviceSetPowerManagementLimit(handle, round(watts * 1000))
    except pynvml.NVMLError as exc:
        raise PowerLimitRefused(_refusal(handle, index, watts, exc)) from exc
    log.info("GPU %d: power limit set to %g W", index, watts)


def _refusal(handle: Handle, index: int, watts: float, exc: pynvml.NVMLError) -> str:
    what = f"GPU {index}: setting the power limit to {watts:g} W"
    if exc.value == pynvml.NVML_ERROR_NO_PERMISSION:
        return f"{what} needs root or CAP_SYS_ADMIN (NVML: {exc})"
    if exc.value == pynvml.NVML_ERROR_INVALID_ARGUMENT:
        return f"{what} failed: {_allowed_range(handle)} (NVML: {exc})"
    if exc.value == pynvml.NVML_ERROR_NOT_SUPPORTED:
        return f"{what} failed: this GPU's power limit cannot be set (NVML: {exc})"
    if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
        return f"{what} failed: the GPU is lost (NVML: {exc})"
    return f"{what} failed (NVML: {exc})"


def _allowed_range(handle: Handle) -> str:
    try:
        low, high = pynvml.nvmlDeviceGetPowerManagementLimitConstraints(handle)
    except pynvml.NVMLError:
        return "outside the range this GPU allows"
    return f"the allowed range is {low / 1000:g}-{high / 1000:g} W"
