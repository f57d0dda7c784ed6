"""The catalogue of GPU metrics: one entry per optional number of `gpufleet.v1.GpuSample`.

Hand-written, next to the generated modules, because both sides import it: the
daemon derives its reading type, wire conversion and dcgm-exporter family from
it; the console derives its ring columns, tiles and plots. A metric's field name
here is the proto field, the key of a daemon reading and the console's column.

Adding a metric end to end is: its `optional` field in node.proto, one entry
below, and the backend code that reads it (docs/development.md walks through
one). tests/test_gpu_metrics.py fails when this catalogue, the proto and the
daemon's reading type disagree.

Units: each metric travels in one base unit (`unit`): bytes, °C, W, MHz, J,
percent. Every other unit is a scale from it: dcgm-exporter's (MiB, mJ), the
console's (GiB), nvidia-smi's (MiB).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

MIB: Final = float(1024**2)
GIB: Final = float(1024**3)

Number = TypeVar("Number", int, float)


@dataclass(frozen=True)
class Dcgm:
    """How NVIDIA's dcgm-exporter names the metric: dashboards built for it read ours."""

    name: str
    type: str  # "gauge" or "counter" (dcgm-exporter's counters have no _total suffix)
    help: str
    scale: float = 1.0  # catalogue unit → dcgm-exporter's unit


@dataclass(frozen=True)
class Smi:
    """The metric in `nvidia-smi --query-gpu=NAME --format=csv,noheader,nounits`."""

    name: str
    scale: float = 1.0  # catalogue unit → nvidia-smi's (memory: MiB)


class ColourScale(enum.Enum):
    """Which of the console's tile colour scales a metric drives."""

    UTILISATION = "utilisation"
    TEMPERATURE = "temperature"


class Limit(enum.Enum):
    """A plot axis that ends at the GPU's own capacity, from its inventory."""

    MEMORY_TOTAL = "memory_total"
    POWER_LIMIT = "power_limit"


@dataclass(frozen=True)
class Shown:
    """How the console keeps and shows the metric: a column of its sample ring."""

    label: str
    unit: str  # the unit shown
    scale: float = 1.0  # catalogue unit → shown unit
    # Plotted in the GPU detail, in catalogue order, in this colour; None: not plotted.
    plot_colour: str | None = None
    # A fixed y range, or an axis that ends at the GPU's capacity; neither: autoscale.
    axis: tuple[float, float] | None = None
    axis_limit: Limit | None = None
    colour_scale: ColourScale | None = None


# eq=False: each metric is one constant below, compared and hashed by identity.
# Readings and rows are keyed by metric on every sweep; a dataclass's field-wise
# hash (down through Dcgm and Shown) made a simulated sweep 2.5 times slower.
@dataclass(frozen=True, eq=False)
class GpuMetric(Generic[Number]):
    """One number a GPU reports each tick; None (an unset field) means not available."""

    field: str  # the GpuSample field, the reading's key, the console's column name
    kind: type[Number]
    unit: str
    description: str
    smi: Smi | None = None
    dcgm: Dcgm | None = None
    shown: Shown | None = None


UTIL_GPU_PCT: Final = GpuMetric(
    "util_gpu_pct", float, "%", "Percent of time a kernel ran on the GPU.",
    smi=Smi("utilization.gpu"),
    dcgm=Dcgm("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    shown=Shown("Utilisation", "%", plot_colour="#63b3ed", axis=(0.0, 100.0),
                colour_scale=ColourScale.UTILISATION),
)  # fmt: skip
UTIL_MEM_PCT: Final = GpuMetric(
    "util_mem_pct", float, "%", "Percent of time device memory was read or written.",
    smi=Smi("utilization.memory"),
    dcgm=Dcgm("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    shown=Shown("Memory utilisation", "%"),
)  # fmt: skip
MEM_USED_BYTES: Final = GpuMetric(
    "mem_used_bytes", int, "B", "Device memory in use.",
    smi=Smi("memory.used", 1 / MIB),
    dcgm=Dcgm("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", 1 / MIB),
    shown=Shown("Memory used", "GiB", 1 / GIB, plot_colour="#b794f4",
                axis_limit=Limit.MEMORY_TOTAL),
)  # fmt: skip
MEM_TOTAL_BYTES: Final = GpuMetric(
    "mem_total_bytes", int, "B", "Device memory in all.",
    smi=Smi("memory.total", 1 / MIB),
    shown=Shown("Memory total", "GiB", 1 / GIB),
)  # fmt: skip
TEMP_GPU_C: Final = GpuMetric(
    "temp_gpu_c", float, "°C", "GPU core temperature.",
    smi=Smi("temperature.gpu"),
    dcgm=Dcgm("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    shown=Shown("Temperature", "°C", plot_colour="#f6ad55",
                colour_scale=ColourScale.TEMPERATURE),
)  # fmt: skip
TEMP_MEM_C: Final = GpuMetric(
    "temp_mem_c", float, "°C", "Device memory (HBM) temperature.",
    smi=Smi("temperature.memory"),
    dcgm=Dcgm("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    shown=Shown("Memory temperature", "°C"),
)  # fmt: skip
POWER_W: Final = GpuMetric(
    "power_w", float, "W", "Power draw.",
    smi=Smi("power.draw"),
    dcgm=Dcgm("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    shown=Shown("Power", "W", plot_colour="#68d391", axis_limit=Limit.POWER_LIMIT),
)  # fmt: skip
FAN_PCT: Final = GpuMetric(
    "fan_pct", float, "%", "Fan speed; unset on passively cooled GPUs.",
    smi=Smi("fan.speed"),
    dcgm=Dcgm("DCGM_FI_DEV_FAN_SPEED", "gauge", "Fan speed (in 0-100%)."),
    shown=Shown("Fan", "%"),
)  # fmt: skip
SM_CLOCK_MHZ: Final = GpuMetric(
    "sm_clock_mhz", int, "MHz", "SM clock.",
    smi=Smi("clocks.sm"),
    dcgm=Dcgm("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    shown=Shown("SM clock", "MHz"),
)  # fmt: skip
MEM_CLOCK_MHZ: Final = GpuMetric(
    "mem_clock_mhz", int, "MHz", "Memory clock.",
    smi=Smi("clocks.mem"),
    dcgm=Dcgm("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz)."),
    shown=Shown("Memory clock", "MHz"),
)  # fmt: skip
PCIE_TX_BYTES_PER_S: Final = GpuMetric(
    "pcie_tx_bytes_per_s", int, "B/s", "PCIe throughput sent by the GPU (NVML's 20 ms sample).",
    shown=Shown("PCIe TX", "MB/s", 1e-6),
)  # fmt: skip
PCIE_RX_BYTES_PER_S: Final = GpuMetric(
    "pcie_rx_bytes_per_s", int, "B/s", "PCIe throughput received by the GPU.",
    shown=Shown("PCIe RX", "MB/s", 1e-6),
)  # fmt: skip
PSTATE: Final = GpuMetric(
    "pstate", int, "", "Performance state, 0 (P0, fastest) to 15; nvidia-smi writes P0.",
    smi=Smi("pstate"),
    dcgm=Dcgm("DCGM_FI_DEV_PSTATE", "gauge", "Performance state (P-State) 0-15. 0=highest"),
    shown=Shown("P-state", ""),
)  # fmt: skip
THROTTLE_REASONS: Final = GpuMetric(
    "throttle_reasons", int, "", "Active clock event (throttle) reasons, NVML's bit mask.",
    smi=Smi("clocks_throttle_reasons.active"),
    dcgm=Dcgm("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "gauge", "Current clock throttle reasons."),
    shown=Shown("Throttle reasons", ""),
)  # fmt: skip
ECC_CORRECTED_TOTAL: Final = GpuMetric(
    "ecc_corrected_total", int, "", "Corrected (single-bit) ECC errors since the driver loaded.",
    smi=Smi("ecc.errors.corrected.volatile.total"),
    dcgm=Dcgm("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter",
              "Total number of single-bit volatile ECC errors."),
    shown=Shown("ECC corrected", ""),
)  # fmt: skip
ECC_UNCORRECTED_TOTAL: Final = GpuMetric(
    "ecc_uncorrected_total", int, "", "Uncorrected (double-bit) ECC errors since the driver "
    "loaded.",
    smi=Smi("ecc.errors.uncorrected.volatile.total"),
    dcgm=Dcgm("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter",
              "Total number of double-bit volatile ECC errors."),
    shown=Shown("ECC uncorrected", ""),
)  # fmt: skip
ENERGY_J: Final = GpuMetric(
    "energy_j", float, "J", "Energy used since the driver loaded.",
    dcgm=Dcgm("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter",
              "Total energy consumption since boot (in mJ).", 1000.0),
)  # fmt: skip

# ---- health signals (docs/health.md): read each tick, judged by node_daemon/health.
PCIE_REPLAY_TOTAL: Final = GpuMetric(
    "pcie_replay_total", int, "", "PCIe replays (link-level retransmissions) since the driver "
    "loaded; a rising rate foretells a failing link or riser.",
    dcgm=Dcgm("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries."),
)  # fmt: skip
REMAPPED_ROWS_CORRECTABLE: Final = GpuMetric(
    "remapped_rows_correctable", int, "", "Memory rows remapped for correctable errors.",
    dcgm=Dcgm("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter",
              "Number of remapped rows for correctable errors"),
)  # fmt: skip
REMAPPED_ROWS_UNCORRECTABLE: Final = GpuMetric(
    "remapped_rows_uncorrectable", int, "", "Memory rows remapped for uncorrectable errors.",
    dcgm=Dcgm("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter",
              "Number of remapped rows for uncorrectable errors"),
)  # fmt: skip
ROW_REMAP_PENDING: Final = GpuMetric(
    "row_remap_pending", int, "", "1 while a row remap waits for a GPU reset.",
    dcgm=Dcgm("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending"),
)  # fmt: skip
ROW_REMAP_FAILURE: Final = GpuMetric(
    "row_remap_failure", int, "", "1 once a row remap failed: the GPU needs inspection.",
    dcgm=Dcgm("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed"),
)  # fmt: skip
RETIRED_PAGES_SBE: Final = GpuMetric(
    "retired_pages_sbe", int, "", "Pages retired for repeated single-bit ECC errors.",
    smi=Smi("retired_pages.single_bit_ecc.count"),
    dcgm=Dcgm("DCGM_FI_DEV_RETIRED_SBE", "counter",
              "Total number of retired pages due to single-bit errors."),
)  # fmt: skip
RETIRED_PAGES_DBE: Final = GpuMetric(
    "retired_pages_dbe", int, "", "Pages retired for double-bit ECC errors.",
    smi=Smi("retired_pages.double_bit.count"),
    dcgm=Dcgm("DCGM_FI_DEV_RETIRED_DBE", "counter",
              "Total number of retired pages due to double-bit errors."),
)  # fmt: skip
RETIRED_PAGES_PENDING: Final = GpuMetric(
    "retired_pages_pending", int, "", "1 while a page retirement waits for a GPU reset.",
    dcgm=Dcgm("DCGM_FI_DEV_RETIRED_PENDING", "counter",
              "Total number of pages pending retirement."),
)  # fmt: skip
NVLINK_CRC_FLIT_ERRORS_TOTAL: Final = GpuMetric(
    "nvlink_crc_flit_errors_total", int, "", "NVLink flow-control CRC errors, all links.",
    dcgm=Dcgm("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter",
              "Total number of NVLink flow-control CRC errors."),
)  # fmt: skip
NVLINK_CRC_DATA_ERRORS_TOTAL: Final = GpuMetric(
    "nvlink_crc_data_errors_total", int, "", "NVLink data CRC errors, all links.",
    dcgm=Dcgm("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "counter",
              "Total number of NVLink data CRC errors."),
)  # fmt: skip
NVLINK_REPLAY_ERRORS_TOTAL: Final = GpuMetric(
    "nvlink_replay_errors_total", int, "", "NVLink replays (retries), all links.",
    dcgm=Dcgm("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "counter",
              "Total number of NVLink retries."),
)  # fmt: skip
NVLINK_RECOVERY_ERRORS_TOTAL: Final = GpuMetric(
    "nvlink_recovery_errors_total", int, "", "NVLink recovery errors, all links.",
    dcgm=Dcgm("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "counter",
              "Total number of NVLink recovery errors."),
)  # fmt: skip
NVLINK_LINKS_ACTIVE: Final = GpuMetric(
    "nvlink_links_active", int, "", "NVLink links up.",
)  # fmt: skip
NVLINK_LINKS_DOWN: Final = GpuMetric(
    "nvlink_links_down", int, "", "NVLink links the GPU has that are down.",
)  # fmt: skip
RECOVERY_ACTION: Final = GpuMetric(
    "recovery_action", int, "", "What the driver says the GPU needs: 0 none, 1 GPU reset, "
    "2 node reboot, 3 drain peer-to-peer, 4 drain and reset.",
)  # fmt: skip
POWER_LIMIT_W: Final = GpuMetric(
    "power_limit_w", float, "W", "Power limit now (self-healing may lower it).",
    smi=Smi("power.limit"),
    dcgm=Dcgm("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Current power limit for the device."),
    shown=Shown("Power limit", "W"),
)  # fmt: skip

# In node.proto's field order.
GPU_METRICS: Final[tuple[GpuMetric[int] | GpuMetric[float], ...]] = (
    UTIL_GPU_PCT, UTIL_MEM_PCT, MEM_USED_BYTES, MEM_TOTAL_BYTES, TEMP_GPU_C, TEMP_MEM_C,
    POWER_W, FAN_PCT, SM_CLOCK_MHZ, MEM_CLOCK_MHZ, PCIE_TX_BYTES_PER_S, PCIE_RX_BYTES_PER_S,
    PSTATE, THROTTLE_REASONS, ECC_CORRECTED_TOTAL, ECC_UNCORRECTED_TOTAL, ENERGY_J,
    PCIE_REPLAY_TOTAL, REMAPPED_ROWS_CORRECTABLE, REMAPPED_ROWS_UNCORRECTABLE, ROW_REMAP_PENDING,
    ROW_REMAP_FAILURE, RETIRED_PAGES_SBE, RETIRED_PAGES_DBE, RETIRED_PAGES_PENDING,
    NVLINK_CRC_FLIT_ERRORS_TOTAL, NVLINK_CRC_DATA_ERRORS_TOTAL, NVLINK_REPLAY_ERRORS_TOTAL,
    NVLINK_RECOVERY_ERRORS_TOTAL, NVLINK_LINKS_ACTIVE, NVLINK_LINKS_DOWN, RECOVERY_ACTION,
    POWER_LIMIT_W,
)  # fmt: skip
BY_FIELD: Final = {metric.field: metric for metric in GPU_METRICS}
# The slowly changing health signals, each group as one NVML read (or probe) gives them.
REMAPPED_ROWS: Final = (
    REMAPPED_ROWS_CORRECTABLE, REMAPPED_ROWS_UNCORRECTABLE, ROW_REMAP_PENDING, ROW_REMAP_FAILURE,
)  # fmt: skip
RETIRED_PAGES: Final = (RETIRED_PAGES_SBE, RETIRED_PAGES_DBE, RETIRED_PAGES_PENDING)
NVLINK_METRICS: Final = (
    NVLINK_CRC_FLIT_ERRORS_TOTAL, NVLINK_CRC_DATA_ERRORS_TOTAL, NVLINK_REPLAY_ERRORS_TOTAL,
    NVLINK_RECOVERY_ERRORS_TOTAL, NVLINK_LINKS_ACTIVE, NVLINK_LINKS_DOWN,
)  # fmt: skip

# dcgm-exporter's free-framebuffer gauge: total minus used, which NVML reports.
DCGM_FB_FREE: Final = Dcgm("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
                           1 / MIB)  # fmt: skip
# dcgm-exporter's last-Xid gauge: from the sample's repeated `xids`, not a number field.
DCGM_XID_ERRORS: Final = Dcgm("DCGM_FI_DEV_XID_ERRORS", "gauge",
                              "Value of the last XID error encountered.")  # fmt: skip


def shown_metrics() -> tuple[GpuMetric[int] | GpuMetric[float], ...]:
    """The console's ring columns, in column order."""
    return tuple(metric for metric in GPU_METRICS if metric.shown is not None)
