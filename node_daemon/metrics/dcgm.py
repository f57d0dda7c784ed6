"""The dcgm-exporter metric family, rendered exactly as dcgm-exporter does.

Names, units, HELP texts, types and labels follow NVIDIA's dcgm-exporter, so
dashboards built for it (Grafana 12239) work unchanged. A value the GPU does
not report (NVML NOT_SUPPORTED, a lost GPU) is left out, never a sentinel.
dcgm-exporter exposes counters without a `_total` suffix; so do we (the text
format allows it), which is why this family is rendered here and not by
prometheus-client.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from node_daemon.backends.readings import GpuHealth, GpuReading, GpuStatic

MIB = 1024**2


@dataclass(frozen=True)
class DcgmField:
    name: str
    help: str
    type: str
    value: Callable[[GpuReading, int | None], float | None]


def _fb_free(r: GpuReading, _xid: int | None) -> float | None:
    if r.mem_total_bytes is None or r.mem_used_bytes is None:
        return None
    return (r.mem_total_bytes - r.mem_used_bytes) / MIB


def _mib(value: int | None) -> float | None:
    return None if value is None else value / MIB


def _mj(joules: float | None) -> float | None:
    return None if joules is None else joules * 1000


FIELDS: tuple[DcgmField, ...] = (
    DcgmField("DCGM_FI_DEV_SM_CLOCK", "SM clock frequency (in MHz).", "gauge",
              lambda r, _: r.sm_clock_mhz),
    DcgmField("DCGM_FI_DEV_MEM_CLOCK", "Memory clock frequency (in MHz).", "gauge",
              lambda r, _: r.mem_clock_mhz),
    DcgmField("DCGM_FI_DEV_MEMORY_TEMP", "Memory temperature (in C).", "gauge",
              lambda r, _: r.temp_mem_c),
    DcgmField("DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).", "gauge",
              lambda r, _: r.temp_gpu_c),
    DcgmField("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", "gauge",
              lambda r, _: r.power_w),
    DcgmField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
              "Total energy consumption since boot (in mJ).", "counter",
              lambda r, _: _mj(r.energy_j)),
    DcgmField("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", "gauge",
              lambda r, _: r.util_gpu_pct),
    DcgmField("DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).", "gauge",
              lambda r, _: r.util_mem_pct),
    DcgmField("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", "gauge", _fb_free),
    DcgmField("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", "gauge",
              lambda r, _: _mib(r.mem_used_bytes)),
    DcgmField("DCGM_FI_DEV_FAN_SPEED", "Fan speed (in 0-100%).", "gauge",
              lambda r, _: r.fan_pct),
    DcgmField("DCGM_FI_DEV_PSTATE", "Performance state (P-State) 0-15. 0=highest", "gauge",
              lambda r, _: r.pstate),
    DcgmField("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "Current clock throttle reasons.", "gauge",
              lambda r, _: r.throttle_reasons),
    DcgmField("DCGM_FI_DEV_XID_ERRORS", "Value of the last XID error encountered.", "gauge",
              lambda _, xid: xid),
    DcgmField("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
              "Total number of single-bit volatile ECC errors.", "counter",
              lambda r, _: r.ecc_corrected_total),
    DcgmField("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
              "Total number of double-bit volatile ECC errors.", "counter",
              lambda r, _: r.ecc_uncorrected_total),
)  # fmt: skip


@dataclass(frozen=True)
class DcgmLabels:
    hostname: str
    hostname_label: str = "Hostname"  # dcgm-exporter's; newer setups use "hostname"
    driver_version: str | None = None


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(static: GpuStatic, labels: DcgmLabels) -> str:
    pairs = [
        ("gpu", str(static.index)),
        ("UUID", static.uuid),
        ("pci_bus_id", static.pci_bus_id or ""),
        ("device", f"nvidia{static.index}"),
        ("modelName", static.name),
        (labels.hostname_label, labels.hostname),
    ]
    if labels.driver_version:
        pairs.append(("DCGM_FI_DRIVER_VERSION", labels.driver_version))
    return ",".join(f'{key}="{escape(value)}"' for key, value in pairs)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def render(
    readings: Iterable[GpuReading],
    gpus: Mapping[int, GpuStatic],
    last_xids: Mapping[int, int],
    labels: DcgmLabels,
) -> str:
    """The dcgm-exporter text for the latest sweep; lost GPUs have no lines."""
    live = [
        (r, _label_text(gpus[r.index], labels))
        for r in readings
        if r.health is GpuHealth.OK and r.index in gpus
    ]
    lines: list[str] = []
    for field in FIELDS:
        values = [(text, field.value(r, last_xids.get(r.index))) for r, text in live]
        samples = [(text, v) for text, v in values if v is not None]
        if not samples:
            continue
        lines += [f"# HELP {field.name} {field.help}", f"# TYPE {field.name} {field.type}"]
        lines += [f"{field.name}{{{text}}} {_number(v)}" for text, v in samples]
    return "\n".join(lines) + "\n" if lines else ""
