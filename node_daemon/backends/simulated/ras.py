"""A simulated GPU's reliability counters: ECC, remapped rows, PCIe and NVLink errors.

Counters only grow, as NVML's do (since the driver loaded); storms add errors
at a steady rate per minute, the fraction carried over so any step size gives
the same totals. The ECC counts are NVML's volatile ones (since the last reset).
A GPU reset clears pending remaps, the driver's recovery action and the volatile
counters; a failed remap stays (the board needs inspection).
"""

from __future__ import annotations

import random

from gpufleet.v1.gpu_metrics import (
    ECC_CORRECTED_TOTAL,
    ECC_UNCORRECTED_TOTAL,
    NVLINK_CRC_DATA_ERRORS_TOTAL,
    NVLINK_CRC_FLIT_ERRORS_TOTAL,
    NVLINK_LINKS_ACTIVE,
    NVLINK_LINKS_DOWN,
    NVLINK_RECOVERY_ERRORS_TOTAL,
    NVLINK_REPLAY_ERRORS_TOTAL,
    PCIE_REPLAY_TOTAL,
    RECOVERY_ACTION,
    REMAPPED_ROWS_CORRECTABLE,
    REMAPPED_ROWS_UNCORRECTABLE,
    RETIRED_PAGES,
    ROW_REMAP_FAILURE,
    ROW_REMAP_PENDING,
)
from node_daemon.backends.readings import AnyMetric

# A healthy board sees a stray correctable ECC error now and then (cosmic rays).
BACKGROUND_ECC_PER_S = 0.002
# An NVLink error storm's other counters, as fractions of its CRC flit errors.
NVLINK_SHARES = {"replay": 0.2, "crc_data": 0.1, "recovery": 0.01}


class RasCounters:
    """The reliability state of one GPU with `links` NVLink links (0: none)."""

    def __init__(self, links: int) -> None:
        self.links = links
        self.ecc_corrected = 0
        self.ecc_uncorrected = 0
        self.remapped_correctable = 0
        self.remapped_uncorrectable = 0
        self.remap_pending = False
        self.remap_failure = False
        self.pcie_replays = 0
        self.nvlink = {"crc_flit": 0, "crc_data": 0, "replay": 0, "recovery": 0}
        self.links_down: set[int] = set()
        self.recovery_action = 0
        self.storms: dict[str, float] = {}  # "ecc" | "pcie" | "nvlink" -> errors per second
        self._carry: dict[str, float] = {}

    def start_storm(self, kind: str, per_minute: float) -> None:
        self.storms[kind] = per_minute / 60.0

    def step(self, dt_s: float, rng: random.Random) -> None:
        if rng.random() < BACKGROUND_ECC_PER_S * dt_s:
            self.ecc_corrected += 1
        self.ecc_corrected += self._arrivals("ecc", self.storms.get("ecc", 0.0), dt_s)
        self.pcie_replays += self._arrivals("pcie", self.storms.get("pcie", 0.0), dt_s)
        nvlink_per_s = self.storms.get("nvlink", 0.0)
        if nvlink_per_s:
            self.nvlink["crc_flit"] += self._arrivals("crc_flit", nvlink_per_s, dt_s)
            for counter, share in NVLINK_SHARES.items():
                self.nvlink[counter] += self._arrivals(counter, nvlink_per_s * share, dt_s)

    def _arrivals(self, counter: str, per_s: float, dt_s: float) -> int:
        """Whole errors due in dt_s at per_s, the fraction carried to the next step."""
        if per_s <= 0:
            return 0
        due = self._carry.get(counter, 0.0) + per_s * dt_s
        whole = int(due)
        self._carry[counter] = due - whole
        return whole

    def reset(self) -> None:
        """A GPU reset: pending remaps take effect, the driver's request is met, and the
        volatile counters (ECC since the last reset, PCIe replays) start again from 0."""
        self.remap_pending = False
        self.recovery_action = 0
        self.ecc_corrected = self.ecc_uncorrected = self.pcie_replays = 0

    def values(self) -> dict[AnyMetric, float | None]:
        has_nvlink = self.links > 0
        down = len(self.links_down) if has_nvlink else None
        return {
            ECC_CORRECTED_TOTAL: self.ecc_corrected,
            ECC_UNCORRECTED_TOTAL: self.ecc_uncorrected,
            PCIE_REPLAY_TOTAL: self.pcie_replays,
            REMAPPED_ROWS_CORRECTABLE: self.remapped_correctable,
            REMAPPED_ROWS_UNCORRECTABLE: self.remapped_uncorrectable,
            ROW_REMAP_PENDING: int(self.remap_pending),
            ROW_REMAP_FAILURE: int(self.remap_failure),
            # Ampere and later remap rows instead of retiring pages: NOT_SUPPORTED.
            **dict.fromkeys(RETIRED_PAGES),
            NVLINK_CRC_FLIT_ERRORS_TOTAL: self.nvlink["crc_flit"] if has_nvlink else None,
            NVLINK_CRC_DATA_ERRORS_TOTAL: self.nvlink["crc_data"] if has_nvlink else None,
            NVLINK_REPLAY_ERRORS_TOTAL: self.nvlink["replay"] if has_nvlink else None,
            NVLINK_RECOVERY_ERRORS_TOTAL: self.nvlink["recovery"] if has_nvlink else None,
            NVLINK_LINKS_ACTIVE: self.links - len(self.links_down) if has_nvlink else None,
            NVLINK_LINKS_DOWN: down,
            RECOVERY_ACTION: self.recovery_action,
        }

    def down_links(self) -> tuple[int, ...]:
        return tuple(sorted(self.links_down))
