"""The NVML backend's MIG instances (`nvidia-smi -L`, `nvidia-smi mig -lgi`), for nvml.py.

A MIG-enabled GPU (A100, H100, H200) is cut into MIG devices, each a GPU instance
(dcgm-exporter's GPU_I_ID) with a compute instance and a profile ("1g.10gb",
GPU_I_PROFILE), its own memory and processes. Their layout changes only when an
admin creates or destroys instances, so it is read on the backend's slow cadence
(nvml_signals.Every) and the handles kept; each tick reads only their memory, and a
handle whose MIG device is gone makes the layout be read again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Part of the NVML backend, split from nvml.py to keep modules small.
import pynvml  # noqa: TID251

from node_daemon.backends.nvml_signals import Query

Handle = Any  # pynvml.c_nvmlDevice_t
_GONE = frozenset({pynvml.NVML_ERROR_INVALID_ARGUMENT, pynvml.NVML_ERROR_NOT_FOUND})


@dataclass(frozen=True)
class MigDevice:
    """One MIG device of a GPU, as its layout was read."""

    handle: Handle
    gpu_instance_id: int
    compute_instance_id: int
    profile: str  # "1g.10gb"
    uuid: str  # "MIG-..."


def mig_enabled(q: Query, handle: Handle) -> bool:
    """mig.mode.current == Enabled (False where the GPU has no MIG)."""
    modes = q("mig.mode.current", pynvml.nvmlDeviceGetMigMode, handle)
    return modes is not None and modes[0] == pynvml.NVML_DEVICE_MIG_ENABLE


def read_layout(q: Query, handle: Handle) -> tuple[MigDevice, ...]:
    """The GPU's MIG devices, in MIG device index order (none when MIG is off)."""
    if not mig_enabled(q, handle):
        return ()
    count = q("mig.max_count", pynvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
    handles = (_mig_handle(q, handle, index) for index in range(count))
    return tuple(_device(q, mig) for mig in handles if mig is not None)


def _mig_handle(q: Query, handle: Handle, index: int) -> Handle | None:
    """MIG device `index`, or None: no MIG device there (NOT_FOUND) or unreadable."""
    try:
        return pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, index)
    except pynvml.NVMLError as exc:
        if exc.value != pynvml.NVML_ERROR_NOT_FOUND:
            q.failed("mig.handle", exc, "nvmlDeviceGetMigDeviceHandleByIndex")
        return None


def _device(q: Query, mig: Handle) -> MigDevice:
    gpu_instance = q("mig.gi", pynvml.nvmlDeviceGetGpuInstanceId, mig)
    compute_instance = q("mig.ci", pynvml.nvmlDeviceGetComputeInstanceId, mig)
    return MigDevice(
        handle=mig,
        gpu_instance_id=-1 if gpu_instance is None else int(gpu_instance),
        compute_instance_id=-1 if compute_instance is None else int(compute_instance),
        profile=profile_of(_text(q("mig.name", pynvml.nvmlDeviceGetName, mig))),
        uuid=_text(q("mig.uuid", pynvml.nvmlDeviceGetUUID, mig)),
    )


def _text(value: str | bytes | None) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value or ""


def profile_of(name: str) -> str:
    """The profile in a MIG device's name: "NVIDIA H100 80GB HBM3 MIG 1g.10gb" → "1g.10gb"."""
    _gpu, mig, profile = name.rpartition(" MIG ")
    return profile if mig else name


def memory_bytes(q: Query, device: MigDevice) -> tuple[int | None, int | None] | None:
    """memory.used, memory.total of a MIG device; None once it is gone (destroyed)."""
    try:
        memory = pynvml.nvmlDeviceGetMemoryInfo(device.handle)
    except pynvml.NVMLError as exc:
        if exc.value in _GONE:
            return None
        q.failed("mig.memory", exc, "nvmlDeviceGetMemoryInfo")
        return (None, None)
    return int(memory.used), int(memory.total)
