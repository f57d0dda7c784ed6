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

from gpufleet.v1.gpu_metrics import (
    DCGM_FB_FREE,
    DCGM_XID_ERRORS,
    GPU_METRICS,
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    Dcgm,
)
from node_daemon.backends.readings import AnyMetric, GpuHealth, GpuReading, GpuStatic, Value

# A family's value for one GPU: from its reading and its last Xid (None: no line).
ValueOf = Callable[[GpuReading, int | None], Value | None]


@dataclass(frozen=True)
class DcgmFamily:
    dcgm: Dcgm
    value: ValueOf


def _scaled(value: Value | None, scale: float) -> Value | None:
    # Unscaled counts stay ints: a float would round those above 2**53.
    return value if value is None or scale == 1.0 else value * scale


def _of_metric(metric: AnyMetric, dcgm: Dcgm) -> DcgmFamily:
    return DcgmFamily(dcgm, lambda r, _xid: _scaled(r[metric], dcgm.scale))


def _fb_free(r: GpuReading, _xid: int | None) -> Value | None:
    total, used = r[MEM_TOTAL_BYTES], r[MEM_USED_BYTES]
    return None if total is None or used is None else _scaled(total - used, DCGM_FB_FREE.scale)


# The catalogue's metrics that dcgm-exporter has, then the two it derives.
FAMILIES: tuple[DcgmFamily, ...] = (
    *(_of_metric(metric, metric.dcgm) for metric in GPU_METRICS if metric.dcgm is not None),
    DcgmFamily(DCGM_FB_FREE, _fb_free),
    DcgmFamily(DCGM_XID_ERRORS, lambda _r, xid: xid),
)


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
    for family in FAMILIES:
        values = [(text, family.value(r, last_xids.get(r.index))) for r, text in live]
        samples = [(text, v) for text, v in values if v is not None]
        if not samples:
            continue
        name = family.dcgm.name
        lines += [f"# HELP {name} {family.dcgm.help}", f"# TYPE {name} {family.dcgm.type}"]
        lines += [f"{name}{{{text}}} {_number(v)}" for text, v in samples]
    return "\n".join(lines) + "\n" if lines else ""
