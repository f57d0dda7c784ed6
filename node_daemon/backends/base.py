"""The interface every GPU backend implements."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from node_daemon.backends.readings import BackendKind, GpuReading, NodeFacts, ProcessReading


class BackendUnavailable(Exception):
    """The backend cannot be used right now (no driver, init failed).

    The message is meant for the operator: what is wrong and what to do.
    """


class GpuBackend(Protocol):
    """Reads the GPUs of this node.

    Implementations are used from the sampler thread only; they need not be
    thread-safe. Every method may raise `BackendUnavailable`, after which the
    daemon reports itself degraded and calls `open()` again later.
    """

    kind: BackendKind

    def open(self) -> NodeFacts:
        """Initialise (idempotent) and return the node's fixed facts."""
        ...

    def read_gpus(self) -> Sequence[GpuReading]:
        """One reading per GPU, in index order. A lost GPU is a reading too."""
        ...

    def read_processes(self) -> Mapping[int, Sequence[ProcessReading]]:
        """Processes per GPU index. Expensive: called less often than read_gpus."""
        ...

    def close(self) -> None:
        """Release the backend (NVML shutdown). Idempotent."""
        ...


class PowerLimitRefused(Exception):
    """Setting a power limit failed; the message says why (no permission, out of range)."""


class PowerLimitControl(Protocol):
    """A backend that can set a GPU's power limit (NVML: nvmlDeviceSetPowerManagementLimit).

    Called on the sampler thread only, like every backend method: self-healing runs
    there, after the sweep. Needs root (or CAP_SYS_ADMIN) on a real GPU.
    """

    def set_power_limit_w(self, index: int, watts: float) -> None:
        """Set GPU `index`'s power limit; raise PowerLimitRefused with the reason."""
        ...


@runtime_checkable
class TemperaturePeek(Protocol):
    """A backend that can read a few GPUs' temperatures alone, cheaply, taking nothing a
    sweep takes (no Xid event is read): adaptive sampling's look between sweeps
    (node_daemon/sampling/pace.py). Called on the sampler thread only."""

    def peek_temperatures(
        self, indexes: Sequence[int]
    ) -> Mapping[int, tuple[float | None, float | None]]:
        """(GPU temperature, memory temperature) by index, None where unread; a GPU that
        cannot be read now (lost, not yet opened) is left out."""
        ...
