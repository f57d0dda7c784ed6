"""The dcgm-exporter metric family, rendered exactly as dcgm-exporter does.

Names, units, HELP texts, types and labels follow NVIDIA's dcgm-exporter, so
dashboards built for it (Grafana 12239) work unchanged. A value the GPU does
not report (NVML NOT_SUPPORTED, a lost GPU) is left out, never a sentinel.
dcgm-exporter exposes counters without a `_total` suffix; so do we (the text
format allows it), which is why this family is rendered here and not by
prometheus-client.

A MIG-enabled GPU's memory families (DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_FREE) are
per MIG instance, as dcgm-exporter reports memory per MIG device: one line per
instance with its GPU_I_PROFILE and GPU_I_ID labels, and none for the whole GPU, so
a sum over a node's lines counts no memory twice. Everything else (temperature,
power, clocks, health signals) is the whole GPU's, without those labels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from gpufleet.v1.gpu_metrics import (
    DCGM_FB_FREE,
    DCGM_XID_ERRORS,
    GPU_METRICS,
    MEM_TOTAL_BYTES,
    MEM_USED_BYTES,
    Dcgm,
)
from node_daemon.backends.readings import (
    AnyMetric,
    GpuHealth,
    GpuReading,
    GpuStatic,
    MigReading,
    Value,
)

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


def _mig_used(m: MigReading) -> Value | None:
    return _scaled(m.mem_used_bytes, DCGM_FB_FREE.scale)


def _mig_free(m: MigReading) -> Value | None:
    total, used = m.mem_total_bytes, m.mem_used_bytes
    return None if total is None or used is None else _scaled(total - used, DCGM_FB_FREE.scale)


# The families a MIG-enabled GPU has per instance, by name, and their instance's value.
PER_INSTANCE: dict[str, Callable[[MigReading], Value | None]] = {
    "DCGM_FI_DEV_FB_USED": _mig_used,
    DCGM_FB_FREE.name: _mig_free,
}


@dataclass(frozen=True)
class DcgmLabels:
    hostname: str
    hostname_label: str = "Hostname"  # dcgm-exporter's; newer setups use "hostname"
    driver_version: str | None = None


def escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _label_text(static: GpuStatic, labels: DcgmLabels, mig: MigReading | None = None) -> str:
    """dcgm-exporter's labels, in its order; a MIG instance's after modelName."""
    pairs = [
        ("gpu", str(static.index)),
        ("UUID", static.uuid),
        ("pci_bus_id", static.pci_bus_id or ""),
        ("device", f"nvidia{static.index}"),
        ("modelName", static.name),
    ]
    if mig is not None:
        pairs += [("GPU_I_PROFILE", mig.profile), ("GPU_I_ID", str(mig.gpu_instance_id))]
    pairs.append((labels.hostname_label, labels.hostname))
    if labels.driver_version:
        pairs.append(("DCGM_FI_DRIVER_VERSION", labels.driver_version))
    return ",".join(f'{key}="{escape(value)}"' for key, value in pairs)


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@dataclass(frozen=True)
class _LiveGpu:
    reading: GpuReading
    labels: str
    instances: tuple[tuple[MigReading, str], ...] = field(default=())  # with their labels


def _live(reading: GpuReading, static: GpuStatic, labels: DcgmLabels) -> _LiveGpu:
    instances = tuple((m, _label_text(static, labels, m)) for m in reading.mig)
    return _LiveGpu(reading, _label_text(static, labels), instances)


def _values(family: DcgmFamily, gpu: _LiveGpu, xid: int | None) -> list[tuple[str, Value | None]]:
    """A family's lines for one GPU: one, or one per MIG instance."""
    per_instance = PER_INSTANCE.get(family.dcgm.name)
    if per_instance is not None and gpu.instances:
        return [(text, per_instance(m)) for m, text in gpu.instances]
    return [(gpu.labels, family.value(gpu.reading, xid))]


def render(
    readings: Iterable[GpuReading],
    gpus: Mapping[int, GpuStatic],
    last_xids: Mapping[int, int],
    labels: DcgmLabels,
) -> str:
    """The dcgm-exporter text for the latest sweep; lost GPUs have no lines."""
    live = [
        _live(r, gpus[r.index], labels)
        for r in readings
        if r.health is GpuHealth.OK and r.index in gpus
    ]
    lines: list[str] = []
    for family in FAMILIES:
        values = [v for gpu in live for v in _values(family, gpu, last_xids.get(gpu.reading.index))]
        samples = [(text, v) for text, v in values if v is not None]
        if not samples:
            continue
        name = family.dcgm.name
        lines += [f"# HELP {name} {family.dcgm.help}", f"# TYPE {name} {family.dcgm.type}"]
        lines += [f"{name}{{{text}}} {_number(v)}" for text, v in samples]
    return "\n".join(lines) + "\n" if lines else ""
