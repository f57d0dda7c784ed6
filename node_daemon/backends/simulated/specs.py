"""GPU models the simulator can play, with the numbers that shape their behaviour.

All three are Ampere or later: they remap rows instead of retiring pages, so their
retired-page counters are None (NVML: NOT_SUPPORTED), as on real ones.
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class GpuSpec:
    name: str
    memory_total_bytes: int
    power_limit_w: float
    idle_power_w: float
    # Steady temperature at full load with healthy cooling, °C.
    full_load_temp_c: float
    temp_slowdown_c: float
    temp_shutdown_c: float
    max_sm_clock_mhz: int
    mem_clock_mhz: int
    # HBM parts report a memory temperature; GDDR parts do not (NVML: N/A).
    has_memory_temp: bool
    # Data-centre SXM parts are passively cooled: NVML reports no fan speed.
    has_fan: bool
    vbios_version: str
    # The range nvidia-smi -pl accepts (nvmlDeviceGetPowerManagementLimitConstraints).
    power_limit_min_w: float
    # NVLink links the board has (SXM parts); 0 for a PCIe card without NVLink, whose
    # NVLink fields NVML then reports as not supported (None).
    nvlink_links: int


H100_80GB = GpuSpec(
    name="NVIDIA H100 80GB HBM3",
    memory_total_bytes=80 * GIB,
    power_limit_w=700.0,
    idle_power_w=70.0,
    full_load_temp_c=71.0,
    temp_slowdown_c=87.0,
    temp_shutdown_c=92.0,
    max_sm_clock_mhz=1980,
    mem_clock_mhz=2619,
    has_memory_temp=True,
    has_fan=False,
    vbios_version="96.00.74.00.01",
    power_limit_min_w=200.0,
    nvlink_links=18,
)
A100_40GB = GpuSpec(
    name="NVIDIA A100-SXM4-40GB",
    memory_total_bytes=40 * GIB,
    power_limit_w=400.0,
    idle_power_w=55.0,
    full_load_temp_c=68.0,
    temp_slowdown_c=89.0,
    temp_shutdown_c=92.0,
    max_sm_clock_mhz=1410,
    mem_clock_mhz=1215,
    has_memory_temp=True,
    has_fan=False,
    vbios_version="92.00.36.00.02",
    power_limit_min_w=100.0,
    nvlink_links=12,
)
L40S = GpuSpec(
    name="NVIDIA L40S",
    memory_total_bytes=48 * GIB,
    power_limit_w=350.0,
    idle_power_w=35.0,
    full_load_temp_c=73.0,
    temp_slowdown_c=88.0,
    temp_shutdown_c=93.0,
    max_sm_clock_mhz=2520,
    mem_clock_mhz=9001,
    has_memory_temp=False,
    has_fan=True,
    vbios_version="95.02.5D.00.01",
    power_limit_min_w=100.0,
    nvlink_links=0,
)

SPECS_BY_KEY: dict[str, GpuSpec] = {"h100": H100_80GB, "a100": A100_40GB, "l40s": L40S}
# The model a node plays when none is named: varied by seed so a demo fleet is mixed.
DEFAULT_ROTATION: tuple[GpuSpec, ...] = (H100_80GB, A100_40GB, L40S, H100_80GB)


def spec_for(model: str | None, seed: int) -> GpuSpec:
    """The spec named by `model` (h100, a100, l40s), or one chosen by seed."""
    if model is None:
        return DEFAULT_ROTATION[seed % len(DEFAULT_ROTATION)]
    try:
        return SPECS_BY_KEY[model.lower()]
    except KeyError:
        known = ", ".join(sorted(SPECS_BY_KEY))
        raise ValueError(f"unknown simulated GPU model {model!r}; choose one of {known}") from None
