"""The NVML backend: real NVIDIA GPUs through nvidia-ml-py (``pynvml``).

The only module of the project that imports ``pynvml``. NVML is initialised once, in
`NvmlBackend.open()`, and shut down once, in `close()`; nothing here inits per poll.

Every NVML call goes through one query helper (`_Query`) that sorts errors by scope,
as nvitop does: "not supported" leaves the field None; a function the driver lacks
(FUNCTION_NOT_FOUND) or refuses (NO_PERMISSION) leaves it None too, and is logged once
per NVML session with what to do; "GPU is lost" makes that GPU's reading LOST while the
others keep reporting; "driver gone" makes the whole backend unavailable
(`BackendUnavailable`, with a hint for the operator); anything else marks the GPU's
reading ERROR with the message.

Each metric has a small function below whose docstring names the matching
``nvidia-smi --query-gpu=`` field (or, where there is none, where nvidia-smi shows it).
The health signals live in nvml_signals.py and MIG in nvml_mig.py; the slowly
changing ones (remapped rows, retired pages, NVLink, the MIG layout) are read every
`nvml_signals.SLOW_INTERVAL_S` seconds, not every tick (nvml_signals explains why).
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pynvml

from gpufleet.v1 import gpu_metrics as m
from node_daemon.backends import nvml_mig, nvml_signals, procinfo
from node_daemon.backends.base import BackendUnavailable, PowerLimitRefused
from node_daemon.backends.nvml_mig import MigDevice
from node_daemon.backends.nvml_process_util import SmUtilization, sm_util_of
from node_daemon.backends.nvml_signals import SLOW_INTERVAL_S, Every
from node_daemon.backends.process_watch import ProcessWatch
from node_daemon.backends.readings import (
    AnyMetric,
    BackendKind,
    GpuHealth,
    GpuReading,
    GpuStatic,
    MigReading,
    NodeFacts,
    ProcessReading,
    Value,
    lost_reading,
)

log = logging.getLogger(__name__)

T = TypeVar("T")
Handle = Any  # pynvml.c_nvmlDevice_t: an opaque pointer

# NVML's "this value is not available here": the field is simply None. NOT_SUPPORTED
# is what a GPU without the sensor answers, so it is normal; the others say something
# the operator can change, so each function that answers them is logged once.
_ABSENT = frozenset(
    {
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_NO_PERMISSION,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,  # a driver older than the bindings
    }
)
_ABSENT_HINTS: dict[int, str] = {
    pynvml.NVML_ERROR_FUNCTION_NOT_FOUND: (
        "is not in this driver (FUNCTION_NOT_FOUND): %s stays unset; a newer driver has it"
    ),
    pynvml.NVML_ERROR_NO_PERMISSION: (
        "was refused (NO_PERMISSION): %s stays unset; run the daemon with access to "
        "/dev/nvidiactl and /dev/nvidia* (some values need root)"
    ),
}
# NVML itself is unusable: the backend as a whole is unavailable until open() again.
_DRIVER_GONE = frozenset(
    {
        pynvml.NVML_ERROR_UNINITIALIZED,
        pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
        pynvml.NVML_ERROR_LIBRARY_NOT_FOUND,
        pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
    }
)
_CHECK_SMI = "check `nvidia-smi` and the kernel log (`dmesg`)"
_OPERATOR_HINTS: dict[int, tuple[str, str]] = {
    pynvml.NVML_ERROR_LIBRARY_NOT_FOUND: (
        "NVIDIA driver library libnvidia-ml.so.1 not found",
        "is the NVIDIA driver installed? check `nvidia-smi` and `ldconfig -p | grep nvidia-ml`",
    ),
    pynvml.NVML_ERROR_DRIVER_NOT_LOADED: (
        "NVIDIA driver not loaded",
        "is the nvidia kernel module loaded? check `nvidia-smi` and `lsmod | grep nvidia`",
    ),
    pynvml.NVML_ERROR_NO_PERMISSION: (
        "no permission to use the NVIDIA devices",
        "may the daemon's user open /dev/nvidiactl and /dev/nvidia*? check their permissions",
    ),
    pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH: (
        "NVIDIA driver library and kernel module versions differ",
        "the driver was upgraded without a reboot: reboot, or reload the nvidia modules",
    ),
}
_PSTATE_UNKNOWN = 32  # NVML_PSTATE_UNKNOWN
_NOT_AVAILABLE_U64 = 2**64 - 1  # NVML_VALUE_NOT_AVAILABLE as an unsigned long long
_MAX_EVENTS_PER_READ = 1024  # an Xid storm must not stall the sampler


def unavailable_message(call: str, exc: pynvml.NVMLError) -> str:
    """What is wrong and what to do, for an NVML error that makes NVML unusable."""
    what, hint = _OPERATOR_HINTS.get(exc.value, ("NVML is not usable", _CHECK_SMI))
    return f"{what} ({call}: {exc}); {hint}"


class _GpuLost(Exception):
    """An NVML call answered NVML_ERROR_GPU_IS_LOST: the GPU fell off the bus."""


def _raise_if_fatal(what: str, exc: pynvml.NVMLError) -> None:
    """Raise for the errors that are beyond one field: GPU lost, driver gone."""
    if exc.value == pynvml.NVML_ERROR_GPU_IS_LOST:
        raise _GpuLost(str(exc)) from exc
    if exc.value in _DRIVER_GONE:
        raise BackendUnavailable(unavailable_message(what, exc)) from exc


class _Unavailable:
    """The NVML functions already logged as missing or refused, so each is logged once."""

    def __init__(self) -> None:
        self._logged: set[tuple[str, int]] = set()

    def note(self, function: str, what: str, code: int) -> None:
        hint = _ABSENT_HINTS.get(code)
        if hint is not None and (function, code) not in self._logged:
            self._logged.add((function, code))
            log.warning("NVML %s " + hint, function, what)


class _Query:
    """Runs the NVML calls for one GPU (or the system), sorting errors by scope."""

    def __init__(self, unavailable: _Unavailable) -> None:
        self.errors: list[str] = []  # unexpected errors, for the reading's `error`
        self._unavailable = unavailable

    def __call__(self, what: str, call: Callable[..., T], *args: Any) -> T | None:
        """`call(*args)`, or None where its value is not available."""
        try:
            return call(*args)
        except pynvml.NVMLError as exc:
            self.failed(what, exc, call.__name__)
            return None

    def first(self, what: str, calls: Sequence[Callable[..., T]], *args: Any) -> T | None:
        """The first of `calls` that the installed driver has (newer names first)."""
        for call in calls:
            try:
                return call(*args)
            except pynvml.NVMLError_FunctionNotFound:
                continue
            except pynvml.NVMLError as exc:
                self.failed(what, exc, call.__name__)
                return None
        if calls:
            names = "/".join(call.__name__ for call in calls)
            self._unavailable.note(names, what, pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)
        return None

    def failed(self, what: str, exc: pynvml.NVMLError, function: str) -> None:
        """Sort one error: absent → None (logged once if the operator can act); lost and
        driver gone → raise; anything else is kept for the reading's `error`."""
        if exc.value in _ABSENT:
            self._unavailable.note(function, what, exc.value)
            return
        _raise_if_fatal(what, exc)
        self.errors.append(f"{what}: {exc}")

    @property
    def health(self) -> GpuHealth:
        return GpuHealth.ERROR if self.errors else GpuHealth.OK

    @property
    def error(self) -> str:
        return "; ".join(self.errors)


# ---------------------------------------------------------------- node and GPU facts


def _text(value: str | bytes | None) -> str | None:
    """NVML strings come back as bytes from older bindings, as str from newer ones."""
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    return value or None


def _driver_version(q: _Query) -> str | None:
    """driver_version, e.g. "550.54.15"."""
    return _text(q("driver_version", pynvml.nvmlSystemGetDriverVersion))


def _cuda_version(q: _Query) -> str | None:
    """The "CUDA Version" of nvidia-smi's header, e.g. 12040 → "12.4"."""
    version = q("cuda_version", pynvml.nvmlSystemGetCudaDriverVersion)
    return None if version is None else f"{version // 1000}.{version % 1000 // 10}"


def _pci_bus_id(q: _Query, handle: Handle) -> str | None:
    """pci.bus_id, e.g. "00000000:17:00.0"."""
    info = q("pci.bus_id", pynvml.nvmlDeviceGetPciInfo, handle)
    return None if info is None else _text(info.busId)


def _memory_total_bytes(q: _Query, handle: Handle) -> int | None:
    """memory.total (nvidia-smi shows MiB; this is bytes)."""
    memory = q("memory.total", pynvml.nvmlDeviceGetMemoryInfo, handle)
    return None if memory is None else int(memory.total)


def _power_limit_w(q: _Query, handle: Handle) -> float | None:
    """enforced.power.limit (NVML answers mW)."""
    milliwatts = q("enforced.power.limit", pynvml.nvmlDeviceGetEnforcedPowerLimit, handle)
    return None if milliwatts is None else milliwatts / 1000.0


def _temp_threshold_c(q: _Query, handle: Handle, threshold: int, what: str) -> float | None:
    """nvidia-smi -q -d TEMPERATURE: "GPU Slowdown Temp" / "GPU Shutdown Temp"."""
    celsius = q(what, pynvml.nvmlDeviceGetTemperatureThreshold, handle, threshold)
    return None if celsius is None else float(celsius)


def _gpu_static(index: int, handle: Handle, q: _Query) -> GpuStatic:
    """index, uuid, name, serial, pci.bus_id, memory.total, enforced.power.limit, ..."""
    default_w, min_w, max_w = nvml_signals.power_limit_range_w(q, handle)
    return GpuStatic(
        index=index,
        uuid=_text(q("uuid", pynvml.nvmlDeviceGetUUID, handle)) or "",
        name=_text(q("name", pynvml.nvmlDeviceGetName, handle)) or "",
        serial=_text(q("serial", pynvml.nvmlDeviceGetSerial, handle)),
        pci_bus_id=_pci_bus_id(q, handle),
        memory_total_bytes=_memory_total_bytes(q, handle),
        power_limit_w=_power_limit_w(q, handle),
        temp_slowdown_c=_temp_threshold_c(
            q, handle, pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN, "temperature.slowdown"
        ),
        temp_shutdown_c=_temp_threshold_c(
            q, handle, pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN, "temperature.shutdown"
        ),
        vbios_version=_text(q("vbios_version", pynvml.nvmlDeviceGetVbiosVersion, handle)),
        mig_enabled=nvml_mig.mig_enabled(q, handle),
        power_limit_default_w=default_w,
        power_limit_min_w=min_w,
        power_limit_max_w=max_w,
    )


# ---------------------------------------------------------------- per-tick metrics


def _utilization_pct(q: _Query, handle: Handle) -> tuple[float | None, float | None]:
    """utilization.gpu, utilization.memory (percent of the last sample period)."""
    util = q("utilization", pynvml.nvmlDeviceGetUtilizationRates, handle)
    return (None, None) if util is None else (float(util.gpu), float(util.memory))


def _memory_bytes(q: _Query, handle: Handle) -> tuple[int | None, int | None]:
    """memory.used, memory.total (bytes)."""
    memory = q("memory", pynvml.nvmlDeviceGetMemoryInfo, handle)
    return (None, None) if memory is None else (int(memory.used), int(memory.total))


def _temperature_gpu_c(q: _Query, handle: Handle) -> float | None:
    """temperature.gpu."""
    celsius = q(
        "temperature.gpu", pynvml.nvmlDeviceGetTemperature, handle, pynvml.NVML_TEMPERATURE_GPU
    )
    return None if celsius is None else float(celsius)


# One nvmlDeviceGetFieldValues call per tick serves both.
_FIELDS = (
    (pynvml.NVML_FI_DEV_MEMORY_TEMP, "temperature.memory", "NVML_FI_DEV_MEMORY_TEMP"),
    (pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, "recovery_action",
     "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"),
)  # fmt: skip
# A driver older than a field (recovery action: 550) may call its id invalid.
_FIELD_ABSENT = frozenset({pynvml.NVML_ERROR_NOT_SUPPORTED, pynvml.NVML_ERROR_INVALID_ARGUMENT})


def _field_values(q: _Query, handle: Handle) -> tuple[float | None, float | None]:
    """temperature.memory (HBM, NVML_FI_DEV_MEMORY_TEMP) and the recovery action the
    driver asks for (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; nvidia-smi -q: "GPU Recovery
    Action"), each None where its own return code says it is not available."""
    ids = [field_id for field_id, _what, _name in _FIELDS]
    values = q("temperature.memory", pynvml.nvmlDeviceGetFieldValues, handle, ids)
    if values is None:
        return None, None
    temperature, action = (
        _field_result(q, value, spec) for value, spec in zip(values, _FIELDS, strict=True)
    )
    return temperature, action


def _field_result(q: _Query, value: Any, spec: tuple[int, str, str]) -> float | None:
    field_id, what, name = spec
    if value.nvmlReturn == pynvml.NVML_SUCCESS:
        return _field_number(value)
    if field_id != pynvml.NVML_FI_DEV_MEMORY_TEMP and value.nvmlReturn in _FIELD_ABSENT:
        return None
    q.failed(what, pynvml.NVMLError(value.nvmlReturn), f"nvmlDeviceGetFieldValues({name})")
    return None


_VALUE_MEMBERS = {
    pynvml.NVML_VALUE_TYPE_DOUBLE: "dVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
    pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
    pynvml.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
}


def _field_number(value: Any) -> float | None:
    """The number in an nvmlFieldValue_t, by its value type."""
    member = _VALUE_MEMBERS.get(value.valueType)
    return None if member is None else float(getattr(value.value, member))


def _power_draw_w(q: _Query, handle: Handle) -> float | None:
    """power.draw (NVML answers mW)."""
    milliwatts = q("power.draw", pynvml.nvmlDeviceGetPowerUsage, handle)
    return None if milliwatts is None else milliwatts / 1000.0


def _fan_speed_pct(q: _Query, handle: Handle) -> float | None:
    """fan.speed (percent of the maximum; None on passively cooled GPUs)."""
    percent = q("fan.speed", pynvml.nvmlDeviceGetFanSpeed, handle)
    return None if percent is None else float(percent)


def _clock_mhz(q: _Query, handle: Handle, clock: int, what: str) -> int | None:
    """clocks.sm / clocks.mem (MHz)."""
    mhz = q(what, pynvml.nvmlDeviceGetClockInfo, handle, clock)
    return None if mhz is None else int(mhz)


def _pcie_bytes_per_s(q: _Query, handle: Handle, counter: int, what: str) -> int | None:
    """No --query-gpu field: `nvidia-smi dmon -s t` columns txpci / rxpci (NVML: KB/s)."""
    kilobytes = q(what, pynvml.nvmlDeviceGetPcieThroughput, handle, counter)
    return None if kilobytes is None else int(kilobytes) * 1024


def _pstate(q: _Query, handle: Handle) -> int | None:
    """pstate (0 = P0, fastest; NVML's "unknown" reads None)."""
    state = q("pstate", pynvml.nvmlDeviceGetPerformanceState, handle)
    return None if state is None or state == _PSTATE_UNKNOWN else int(state)


_CLOCK_REASON_CALLS = [
    getattr(pynvml, name)
    for name in (
        "nvmlDeviceGetCurrentClocksEventReasons",  # bindings and drivers >= 535
        "nvmlDeviceGetCurrentClocksThrottleReasons",
    )
    if hasattr(pynvml, name)
]


def _throttle_reasons(q: _Query, handle: Handle) -> int | None:
    """clocks_event_reasons.active (formerly clocks_throttle_reasons.active): a bit mask."""
    return q.first("clocks_event_reasons.active", _CLOCK_REASON_CALLS, handle)


def _ecc_volatile_total(q: _Query, handle: Handle, error_type: int, what: str) -> int | None:
    """ecc.errors.corrected.volatile.total / ecc.errors.uncorrected.volatile.total."""
    return q(what, pynvml.nvmlDeviceGetTotalEccErrors, handle, error_type, pynvml.NVML_VOLATILE_ECC)


def _energy_j(q: _Query, handle: Handle) -> float | None:
    """No --query-gpu field (dcgm-exporter: DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION); NVML: mJ."""
    millijoules = q("energy", pynvml.nvmlDeviceGetTotalEnergyConsumption, handle)
    return None if millijoules is None else millijoules / 1000.0


def _recovery_action(action: float | None) -> int | None:
    """The driver's recovery action (NVML_GPU_RECOVERY_ACTION_*: 0 none ... 4 drain and reset)."""
    return None if action is None else int(action)


def _read_metrics(handle: Handle, q: _Query) -> dict[AnyMetric, Value | None]:
    """One GPU's per-tick metrics; an unexpected error is kept in `q` for the reading."""
    util_gpu, util_mem = _utilization_pct(q, handle)
    mem_used, mem_total = _memory_bytes(q, handle)
    temp_mem, recovery_action = _field_values(q, handle)
    return {
        m.UTIL_GPU_PCT: util_gpu,
        m.UTIL_MEM_PCT: util_mem,
        m.MEM_USED_BYTES: mem_used,
        m.MEM_TOTAL_BYTES: mem_total,
        m.TEMP_GPU_C: _temperature_gpu_c(q, handle),
        m.TEMP_MEM_C: temp_mem,
        m.POWER_W: _power_draw_w(q, handle),
        m.FAN_PCT: _fan_speed_pct(q, handle),
        m.SM_CLOCK_MHZ: _clock_mhz(q, handle, pynvml.NVML_CLOCK_SM, "clocks.sm"),
        m.MEM_CLOCK_MHZ: _clock_mhz(q, handle, pynvml.NVML_CLOCK_MEM, "clocks.mem"),
        m.PCIE_TX_BYTES_PER_S: _pcie_bytes_per_s(
            q, handle, pynvml.NVML_PCIE_UTIL_TX_BYTES, "txpci"
        ),
        m.PCIE_RX_BYTES_PER_S: _pcie_bytes_per_s(
            q, handle, pynvml.NVML_PCIE_UTIL_RX_BYTES, "rxpci"
        ),
        m.PSTATE: _pstate(q, handle),
        m.THROTTLE_REASONS: _throttle_reasons(q, handle),
        m.ECC_CORRECTED_TOTAL: _ecc_volatile_total(
            q, handle, pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, "ecc.errors.corrected"
        ),
        m.ECC_UNCORRECTED_TOTAL: _ecc_volatile_total(
            q, handle, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, "ecc.errors.uncorrected"
        ),
        m.ENERGY_J: _energy_j(q, handle),
        m.PCIE_REPLAY_TOTAL: nvml_signals.pcie_replay_total(q, handle),
        m.RECOVERY_ACTION: _recovery_action(recovery_action),
        m.POWER_LIMIT_W: nvml_signals.power_limit_w(q, handle),
    }


# ---------------------------------------------------------------- processes


def _gpu_processes(q: _Query, handle: Handle) -> dict[int, int | None]:
    """pid → used GPU memory (bytes), compute and graphics (`--query-compute-apps`)."""
    found: dict[int, int | None] = {}
    for what, call in (
        ("compute-apps", pynvml.nvmlDeviceGetComputeRunningProcesses),
        ("graphics-apps", pynvml.nvmlDeviceGetGraphicsRunningProcesses),
    ):
        for proc in q(what, call, handle) or ():
            memory = _used_memory(proc.usedGpuMemory)
            if found.get(int(proc.pid)) is None:  # a pid listed twice keeps a known size
                found[int(proc.pid)] = memory
    return found


def _used_memory(value: int | None) -> int | None:
    """used_memory; None where NVML cannot tell (NVML_VALUE_NOT_AVAILABLE)."""
    return None if value is None or value == _NOT_AVAILABLE_U64 else int(value)


# ---------------------------------------------------------------- one NVML session


def _address(handle: Handle) -> int | None:
    """A device handle's pointer value: events name their GPU by it."""
    return ctypes.cast(handle, ctypes.c_void_p).value


def _create_event_set() -> Any:
    """An NVML event set for Xid events, or None where events are not supported."""
    try:
        return pynvml.nvmlEventSetCreate()
    except pynvml.NVMLError as exc:
        if exc.value in _DRIVER_GONE:
            raise BackendUnavailable(unavailable_message("nvmlEventSetCreate", exc)) from exc
        log.warning("NVML events unavailable (%s): Xid errors will not be reported", exc)
        return None


def _shutdown_quietly(event_set: Any = None) -> None:
    """Free the event set and shut NVML down, ignoring errors (the driver may be gone)."""
    if event_set is not None:
        _quietly(pynvml.nvmlEventSetFree, event_set)
    _quietly(pynvml.nvmlShutdown)


def _quietly(call: Callable[..., Any], *args: Any) -> None:
    try:
        call(*args)
    except pynvml.NVMLError as exc:
        log.debug("%s failed while closing NVML: %s", call.__name__, exc)


@dataclass(frozen=True)
class _SlowReading:
    """A GPU's slowly changing signals, as last read (nvml_signals.Every keeps it)."""

    values: Mapping[AnyMetric, int | None]
    nvlink_down_links: tuple[int, ...]
    mig: tuple[MigDevice, ...]
    errors: tuple[str, ...]  # unexpected errors of that read: reported until the next


@dataclass
class _Session:
    """The state of one nvmlInit … nvmlShutdown: handles, the Xid event set."""

    gpu_count: int
    event_set: Any = None
    handles: dict[int, Handle] = field(default_factory=dict)  # absent while lost
    by_address: dict[int, int] = field(default_factory=dict)  # handle pointer → index
    lost: set[int] = field(default_factory=set)
    unavailable: _Unavailable = field(default_factory=_Unavailable)  # what was logged
    slow: Every[_SlowReading] = field(default_factory=Every)
    nvlinks: dict[int, tuple[int, ...]] = field(default_factory=dict)  # probed once
    # MIG device UUID → its processes, by GPU, from the last read_processes.
    mig_processes: dict[int, dict[str, tuple[ProcessReading, ...]]] = field(default_factory=dict)
    sm_util: SmUtilization = field(default_factory=SmUtilization)

    def handle(self, index: int, q: _Query) -> Handle | None:
        """The GPU's handle, fetched (and registered for Xids) when not yet known."""
        handle = self.handles.get(index)
        if handle is None:
            handle = q("handle", pynvml.nvmlDeviceGetHandleByIndex, index)
            if handle is not None:
                self._register_xids(index, handle)
                self.handles[index] = handle
        return handle

    def _register_xids(self, index: int, handle: Handle) -> None:
        address = _address(handle)
        if address is not None:
            self.by_address[address] = index
        if self.event_set is None:
            return
        xid = pynvml.nvmlEventTypeXidCriticalError
        try:
            pynvml.nvmlDeviceRegisterEvents(handle, xid, self.event_set)
        except pynvml.NVMLError as exc:
            _raise_if_fatal("nvmlDeviceRegisterEvents", exc)
            log.info("GPU %d: Xid events unavailable (%s)", index, exc)

    def mark_lost(self, index: int) -> GpuReading:
        """Forget the handle (fetched again next time) and say the GPU is lost."""
        self.handles.pop(index, None)
        self.slow.forget(index)
        self.nvlinks.pop(index, None)
        self.mig_processes.pop(index, None)
        if index not in self.lost:
            log.warning("GPU %d is lost (NVML_ERROR_GPU_IS_LOST)", index)
            self.lost.add(index)
        return lost_reading(index)

    def mark_answering(self, index: int) -> None:
        if index in self.lost:
            log.info("GPU %d answers again", index)
            self.lost.discard(index)

    def drain_xids(self) -> dict[int, list[int]]:
        """Xids since the last call, by GPU index (nvmlEventSetWait with timeout 0)."""
        xids: dict[int, list[int]] = {}
        for _ in range(_MAX_EVENTS_PER_READ if self.event_set is not None else 0):
            data = self._next_event()
            if data is None:
                break
            index = self.by_address.get(_address(data.device) or 0)
            if index is not None and data.eventType == pynvml.nvmlEventTypeXidCriticalError:
                xids.setdefault(index, []).append(int(data.eventData))
        return xids

    def _next_event(self) -> Any:
        try:
            return pynvml.nvmlEventSetWait(self.event_set, 0)
        except pynvml.NVMLError as exc:
            if exc.value in _DRIVER_GONE:
                raise BackendUnavailable(unavailable_message("nvmlEventSetWait", exc)) from exc
            if exc.value != pynvml.NVML_ERROR_TIMEOUT:
                log.debug("nvmlEventSetWait: %s", exc)
            return None

    def facts(self) -> NodeFacts:
        q = _Query(self.unavailable)
        facts = NodeFacts(
            driver_version=_driver_version(q),
            cuda_version=_cuda_version(q),
            gpus=tuple(self.gpu_static(index) for index in range(self.gpu_count)),
        )
        if q.errors:
            log.warning("NVML: some node facts unreadable: %s", q.error)
        return facts

    def gpu_static(self, index: int) -> GpuStatic:
        q = _Query(self.unavailable)
        try:
            handle = self.handle(index, q)
            static = GpuStatic(index, "", "") if handle is None else _gpu_static(index, handle, q)
        except _GpuLost:
            self.mark_lost(index)
            return GpuStatic(index=index, uuid="", name="")
        if q.errors:
            log.warning("GPU %d: some facts unreadable: %s", index, q.error)
        return static

    def read_gpus(self) -> list[GpuReading]:
        xids = self.drain_xids()
        return [self.read_gpu(i, tuple(xids.get(i, ()))) for i in range(self.gpu_count)]

    def peek_temperatures(
        self, indexes: Sequence[int]
    ) -> dict[int, tuple[float | None, float | None]]:
        """The GPUs' temperatures alone (TemperaturePeek), by the handles known already."""
        peeked = {}
        for index in indexes:
            handle = self.handles.get(index)
            if handle is None or index in self.lost:
                continue
            q = _Query(self.unavailable)
            try:
                memory_c, _action = _field_values(q, handle)
                peeked[index] = (_temperature_gpu_c(q, handle), memory_c)
            except _GpuLost:
                continue  # the next sweep reads it lost and says so
        return peeked

    def read_gpu(self, index: int, xids: tuple[int, ...]) -> GpuReading:
        q = _Query(self.unavailable)
        try:
            handle = self.handle(index, q)
            if handle is None:
                return GpuReading(index=index, health=GpuHealth.ERROR, error=q.error, xids=xids)
            values = _read_metrics(handle, q)
            slow = self.slow.get(index, lambda: self._read_slow(index, handle))
            mig = self._mig_readings(index, slow.mig, q)
        except _GpuLost:
            return self.mark_lost(index).replace(xids=xids)
        self.mark_answering(index)
        q.errors.extend(slow.errors)
        reading = GpuReading.of(index, {**values, **slow.values}, xids=xids,
                                nvlink_down_links=slow.nvlink_down_links, mig=mig)  # fmt: skip
        return reading.replace(health=q.health, error=q.error)

    def _read_slow(self, index: int, handle: Handle) -> _SlowReading:
        """Remapped rows, retired pages, NVLink and the MIG layout: every few seconds."""
        q = _Query(self.unavailable)
        links = self.nvlinks.get(index)
        if links is None:
            links = nvml_signals.nvlink_links(q, handle)
            if links is not None:
                self.nvlinks[index] = links
        nvlink = nvml_signals.read_nvlink(q, handle, links or ())
        values = {
            **nvml_signals.remapped_rows(q, handle),
            **nvml_signals.retired_pages(q, handle),
            **nvlink.values,
        }
        mig = nvml_mig.read_layout(q, handle)
        return _SlowReading(values, nvlink.down, mig, tuple(q.errors))

    def _mig_readings(
        self, index: int, devices: tuple[MigDevice, ...], q: _Query
    ) -> tuple[MigReading, ...]:
        """Each MIG device's memory now and its processes as last listed."""
        processes = self.mig_processes.get(index, {})
        readings = []
        for device in devices:
            memory = nvml_mig.memory_bytes(q, device)
            if memory is None:  # destroyed since the layout was read: read it again
                self.slow.forget(index)
                continue
            readings.append(MigReading(
                gpu_instance_id=device.gpu_instance_id,
                compute_instance_id=device.compute_instance_id,
                profile=device.profile, uuid=device.uuid,
                mem_used_bytes=memory[0], mem_total_bytes=memory[1],
                processes=processes.get(device.uuid, ()),
            ))  # fmt: skip
        return tuple(readings)

    def read_processes(self, watch: ProcessWatch) -> dict[int, list[ProcessReading]]:
        processes = {index: self.processes_on(index, watch) for index in range(self.gpu_count)}
        watch.end_round()
        return processes

    def processes_on(self, index: int, watch: ProcessWatch) -> list[ProcessReading]:
        q = _Query(self.unavailable)
        try:
            handle = self.handle(index, q)
            found = {} if handle is None else _gpu_processes(q, handle)
            sm = None if not found else self.sm_util.read(q, index, handle)
            described = {
                pid: dataclasses.replace(
                    watch.describe(pid, memory), sm_util_pct=sm_util_of(pid, sm)
                )
                for pid, memory in found.items()
            }
            self.mig_processes[index] = self._mig_processes(index, q, described, watch)
        except _GpuLost:
            self.mark_lost(index)
            self.sm_util.forget(index)
            return []
        if q.errors:
            log.warning("GPU %d: listing processes failed: %s", index, q.error)
        return list(described.values())

    def _mig_processes(
        self, index: int, q: _Query, described: dict[int, ProcessReading], watch: ProcessWatch
    ) -> dict[str, tuple[ProcessReading, ...]]:
        """The processes of each MIG device (the GPU's own list has them too: reused)."""
        slow = self.slow.kept(index)
        by_device: dict[str, tuple[ProcessReading, ...]] = {}
        for device in () if slow is None else slow.mig:
            found = _gpu_processes(q, device.handle)
            by_device[device.uuid] = tuple(
                dataclasses.replace(described[pid], gpu_memory_bytes=memory)
                if pid in described
                else watch.describe(pid, memory)
                for pid, memory in found.items()
            )
        return by_device

    def set_power_limit_w(self, index: int, watts: float) -> None:
        if not 0 <= index < self.gpu_count:
            raise PowerLimitRefused(f"no GPU {index} on this node ({self.gpu_count} GPUs)")
        handle = self.handles.get(index)
        if handle is None:
            raise PowerLimitRefused(f"GPU {index}: setting the power limit failed: GPU is lost")
        nvml_signals.set_power_limit(handle, index, watts)


def _start_session(slow: Every[_SlowReading]) -> _Session:
    """nvmlInit, count the GPUs, fetch their handles and register them for Xid events."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise BackendUnavailable(unavailable_message("nvmlInit", exc)) from exc
    try:
        session = _Session(pynvml.nvmlDeviceGetCount(), _create_event_set(), slow=slow)
    except pynvml.NVMLError as exc:
        _shutdown_quietly()
        raise BackendUnavailable(unavailable_message("nvmlDeviceGetCount", exc)) from exc
    except BackendUnavailable:
        _shutdown_quietly()
        raise
    log.info("NVML initialised: %d GPU(s)", session.gpu_count)
    return session


class NvmlBackend:
    """Reads the node's NVIDIA GPUs through NVML.

    `proc_root` is where per-process details are read (``/proc``; a daemon in a
    container may be given the host's). `slow_interval_s` is how often the slowly
    changing health signals are read (remapped rows, retired pages, NVLink, the
    MIG layout; `clock` measures it); between reads their last values are reported.
    """

    kind = BackendKind.NVML

    def __init__(
        self,
        proc_root: Path = procinfo.PROC,
        slow_interval_s: float = SLOW_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._watch = ProcessWatch(proc_root)
        self._slow_interval_s, self._clock = slow_interval_s, clock
        self._lock = threading.Lock()
        self._session: _Session | None = None

    def open(self) -> NodeFacts:
        """Initialise NVML if not yet done (idempotent) and read the node's facts."""
        with self._lock:
            if self._session is None:
                self._session = _start_session(Every(self._slow_interval_s, self._clock))
            return self._guarded(self._session.facts)

    def set_power_limit_w(self, index: int, watts: float) -> None:
        """nvidia-smi -i INDEX -pl WATTS: set GPU `index`'s power management limit.

        Raises PowerLimitRefused with the reason (no root or CAP_SYS_ADMIN, outside
        the GPU's allowed range, lost GPU, NVML not initialised).
        """
        with self._lock:
            if self._session is None:
                raise PowerLimitRefused("NVML is not initialised; the daemon retries open()")
            self._session.set_power_limit_w(index, watts)

    def read_gpus(self) -> list[GpuReading]:
        with self._lock:
            return self._guarded(self._open_session().read_gpus)

    def peek_temperatures(
        self, indexes: Sequence[int]
    ) -> dict[int, tuple[float | None, float | None]]:
        with self._lock:
            session = self._session
            if session is None:
                return {}
            return self._guarded(lambda: session.peek_temperatures(indexes))

    def read_processes(self) -> dict[int, list[ProcessReading]]:
        with self._lock:
            session = self._open_session()
            return self._guarded(lambda: session.read_processes(self._watch))

    def close(self) -> None:
        """Shut NVML down (once; later calls do nothing)."""
        with self._lock:
            self._end_session()

    def _open_session(self) -> _Session:
        if self._session is None:
            raise BackendUnavailable("NVML is not initialised; the daemon retries open()")
        return self._session

    def _guarded(self, read: Callable[[], T]) -> T:
        """`read()`; if NVML turns out unusable, end the session so open() starts anew."""
        try:
            return read()
        except BackendUnavailable:
            self._end_session()
            raise

    def _end_session(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            _shutdown_quietly(session.event_set)
            log.info("NVML shut down")
