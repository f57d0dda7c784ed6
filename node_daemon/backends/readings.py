"""What a GPU backend reports, as plain immutable values.

`None` means "not available" (NVML NOT_SUPPORTED, a lost GPU, a field the
backend cannot read). It travels as itself to the wire, where the matching
proto3 `optional` field is left unset: never -1 or 0 for unknown.

A GPU's metrics are those of the catalogue, `gpufleet.v1.gpu_metrics`: a
`GpuReading` holds a value for each and is read by metric, so a new metric
needs no change here.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Final, TypeAlias, overload

from gpufleet.v1.gpu_metrics import BY_FIELD, GPU_METRICS, GpuMetric


class BackendKind(enum.Enum):
    NVML = "nvml"
    SIMULATED = "simulated"


class GpuHealth(enum.Enum):
    OK = "ok"
    LOST = "lost"
    ERROR = "error"


@dataclass(frozen=True)
class GpuStatic:
    """Facts about one GPU that do not change while the daemon runs."""

    index: int
    uuid: str
    name: str
    serial: str | None = None
    pci_bus_id: str | None = None
    memory_total_bytes: int | None = None
    power_limit_w: float | None = None
    temp_slowdown_c: float | None = None
    temp_shutdown_c: float | None = None
    vbios_version: str | None = None
    mig_enabled: bool = False
    # The range within which the power limit may be set (self-healing's power cap).
    power_limit_default_w: float | None = None
    power_limit_min_w: float | None = None
    power_limit_max_w: float | None = None


@dataclass(frozen=True)
class NodeFacts:
    """Facts about the node and its driver."""

    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuStatic, ...]


@dataclass(frozen=True)
class ProcessReading:
    """One process holding a context on a GPU."""

    pid: int
    gpu_memory_bytes: int | None = None
    start_time_unix_ms: int | None = None
    user: str | None = None
    command: str | None = None
    container_id: str | None = None
    slurm_job_id: str | None = None
    # nvitop's columns: share of the GPU's SM time (nvmlDeviceGetProcessUtilization),
    # CPU use over the last listing interval (100 = one core), resident host memory.
    sm_util_pct: float | None = None
    cpu_pct: float | None = None
    host_memory_bytes: int | None = None


@dataclass(frozen=True)
class MigReading:
    """One MIG instance of a MIG-enabled GPU (dcgm-exporter's GPU_I_ID, GPU_I_PROFILE)."""

    gpu_instance_id: int
    compute_instance_id: int
    profile: str  # "1g.10gb"
    uuid: str  # "MIG-..."
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    processes: tuple[ProcessReading, ...] = ()


AnyMetric: TypeAlias = "GpuMetric[int] | GpuMetric[float]"
Value: TypeAlias = int | float  # a metric's value, of its `kind` (an int is a float's too)

# By the metric itself (hashed by identity): on every sweep.
_POSITION_OF: Final[dict[AnyMetric, int]] = {
    metric: position for position, metric in enumerate(GPU_METRICS)
}
_FIELDS: Final = tuple(metric.field for metric in GPU_METRICS)
_UNSET: Final[tuple[Value | None, ...]] = (None,) * len(GPU_METRICS)


def _checked(metric: AnyMetric, value: object) -> Value | None:
    """`value` if it is a value of the metric's kind, or None; anything else is a bug."""
    exact = type(value)  # the common cases first: this runs for every value of every sweep
    if exact is int or value is None:
        return value  # type: ignore[return-value]
    if exact is float and metric.kind is float:
        return value  # type: ignore[return-value]
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and metric.kind is float:
        return value
    raise TypeError(
        f"{metric.field} is {metric.kind.__name__} ({metric.unit or 'a number'}), "
        f"got {type(value).__name__} {value!r}"
    )


def _in_catalogue_order(
    values: Iterable[tuple[AnyMetric, object]],
) -> tuple[Value | None, ...]:
    """Values by metric, checked, in a tuple in catalogue order (None where not given)."""
    ordered = list(_UNSET)
    for metric, value in values:
        position = _POSITION_OF.get(metric)
        if position is None:
            raise TypeError(f"GpuReading got {metric!r}, not a catalogue metric")
        ordered[position] = _checked(metric, value)
    return tuple(ordered)


def _named(name: str) -> AnyMetric:
    """The catalogue metric a keyword names; another name is a TypeError, as for any call."""
    metric = BY_FIELD.get(name)
    if metric is None:
        raise TypeError(f"GpuReading() got an unexpected keyword argument {name!r}")
    return metric


@dataclass(frozen=True, init=False, repr=False)  # value equality and hash, immutable
class GpuReading:
    """One GPU at one tick: its health and a value, or None, for each catalogue metric.

    Values are read by metric, typed by its kind: ``reading[TEMP_GPU_C]`` is a
    ``float | None``. Built from keywords named by the metrics' fields
    (``GpuReading(index=0, temp_gpu_c=61.0)``) or from metrics (`GpuReading.of`);
    a metric not given is None. A field that is not in the catalogue, or a value
    that is not a number of the metric's kind, raises TypeError: a backend bug.
    """

    __slots__ = ("_values", "error", "health", "index", "mig", "nvlink_down_links", "xids")
    index: int
    health: GpuHealth
    error: str
    xids: tuple[int, ...]  # Xid errors since the previous tick, in order
    nvlink_down_links: tuple[int, ...]  # link numbers of the GPU's links that are down
    mig: tuple[MigReading, ...]  # the instances of a MIG-enabled GPU
    _values: tuple[Value | None, ...]  # in catalogue order

    def __init__(
        self,
        index: int,
        health: GpuHealth = GpuHealth.OK,
        error: str = "",
        *,
        xids: tuple[int, ...] = (),
        nvlink_down_links: tuple[int, ...] = (),
        mig: tuple[MigReading, ...] = (),
        **metrics: float | None,
    ) -> None:
        named = ((_named(name), value) for name, value in metrics.items())
        self._set(index, health, error, (xids, nvlink_down_links, mig), _in_catalogue_order(named))

    @classmethod
    def of(
        cls,
        index: int,
        values: Mapping[AnyMetric, float | None],
        *,
        xids: tuple[int, ...] = (),
        nvlink_down_links: tuple[int, ...] = (),
        mig: tuple[MigReading, ...] = (),
    ) -> GpuReading:
        """A healthy reading from values by metric: how the backends build theirs."""
        extras = (xids, nvlink_down_links, mig)
        return cls._made(index, GpuHealth.OK, "", extras, _in_catalogue_order(values.items()))

    @classmethod
    def _made(
        cls,
        index: int,
        health: GpuHealth,
        error: str,
        extras: tuple[tuple[int, ...], tuple[int, ...], tuple[MigReading, ...]],
        values: tuple[Value | None, ...],
    ) -> GpuReading:
        reading = object.__new__(cls)
        reading._set(index, health, error, extras, values)
        return reading

    def _set(
        self,
        index: int,
        health: GpuHealth,
        error: str,
        extras: tuple[tuple[int, ...], tuple[int, ...], tuple[MigReading, ...]],
        values: tuple[Value | None, ...],
    ) -> None:
        # Frozen: only the constructors set fields, past the dataclass's __setattr__.
        xids, down, mig = extras
        for name, value in (("index", index), ("health", health), ("error", error),
                            ("xids", xids), ("nvlink_down_links", down), ("mig", mig),
                            ("_values", values)):  # fmt: skip
            object.__setattr__(self, name, value)

    # Overloads, not a TypeVar: a metric taken from GPU_METRICS (a union) must type-check too.
    @overload
    def __getitem__(self, metric: GpuMetric[int]) -> int | None: ...
    @overload
    def __getitem__(self, metric: GpuMetric[float]) -> float | None: ...
    def __getitem__(self, metric: AnyMetric) -> Value | None:
        """The metric's value; None where the GPU did not report it."""
        return self._values[_POSITION_OF[metric]]

    def by_field(self) -> dict[str, Value]:
        """The values it has, by GpuSample field name: for the wire, once per sweep."""
        return {name: v for name, v in zip(_FIELDS, self._values, strict=True) if v is not None}

    def available(self) -> Iterator[tuple[AnyMetric, Value]]:
        """The metrics this reading has a value for, with it, in catalogue order."""
        return ((m, v) for m, v in zip(GPU_METRICS, self._values, strict=True) if v is not None)

    def replace(
        self,
        *,
        health: GpuHealth | None = None,
        error: str | None = None,
        xids: tuple[int, ...] | None = None,
    ) -> GpuReading:
        """This reading with another health, error or Xids; its metrics unchanged."""
        return self._made(
            self.index,
            self.health if health is None else health,
            self.error if error is None else error,
            (self.xids if xids is None else xids, self.nvlink_down_links, self.mig),
            self._values,
        )

    def __repr__(self) -> str:
        """Like the constructor call that builds it, leaving out what is left unset."""
        parts = [f"index={self.index!r}"]
        if self.health is not GpuHealth.OK:
            parts.append(f"health=GpuHealth.{self.health.name}")
        parts += [f"error={self.error!r}"] if self.error else []
        parts += [f"xids={self.xids!r}"] if self.xids else []
        parts += [f"nvlink_down_links={self.nvlink_down_links!r}"] if self.nvlink_down_links else []
        parts += [f"mig={self.mig!r}"] if self.mig else []
        parts += [f"{metric.field}={value!r}" for metric, value in self.available()]
        return f"GpuReading({', '.join(parts)})"


def lost_reading(index: int, detail: str = "GPU is lost (fell off the bus)") -> GpuReading:
    """The reading of a GPU that NVML reports as lost: health only, no metrics."""
    return GpuReading(index=index, health=GpuHealth.LOST, error=detail)
