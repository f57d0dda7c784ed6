"""Each process's share of a GPU's SM time (nvitop's GPU-SM column), for `nvml.NvmlBackend`.

nvmlDeviceGetProcessUtilization answers the samples the driver took (about six a
second) newer than a timestamp the caller passes: the backend passes the newest
one it saw on the GPU before, so each listing covers the interval since the
last. Like nvitop, a process's value is its latest sample's; a process on the
GPU with no sample in a non-empty answer used no SM time (0). NOT_FOUND (no
sample at all since then), NOT_SUPPORTED (a GPU or vGPU without per-process
accounting) and the other "absent" answers leave every process's value unset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Part of the NVML backend, split from nvml.py to keep modules small; nothing
# outside node_daemon/backends/nvml*.py imports pynvml.
import pynvml  # noqa: TID251

from node_daemon.backends.nvml_signals import Query

# No sample newer than the timestamp. nvidia-ml-py raises NVMLError(SUCCESS) when
# the first, sizing call succeeds with no samples instead of asking for a buffer.
_NO_SAMPLES = frozenset({pynvml.NVML_ERROR_NOT_FOUND, pynvml.NVML_SUCCESS})
_FUNCTION = "nvmlDeviceGetProcessUtilization"


@dataclass
class SmUtilization:
    """The newest sample timestamp seen per GPU (µs, the driver's clock)."""

    seen_us: dict[int, int] = field(default_factory=dict)

    def read(self, q: Query, index: int, handle: Any) -> Mapping[int, float | None] | None:
        """pid → SM %, each from its latest sample since the last read (None: a sample
        out of range); None: NVML cannot tell for this GPU."""
        since = self.seen_us.get(index, 0)
        try:
            samples = pynvml.nvmlDeviceGetProcessUtilization(handle, since)
        except pynvml.NVMLError as exc:
            if exc.value not in _NO_SAMPLES:
                q.failed("process-utilization", exc, _FUNCTION)
            return None
        latest: dict[int, tuple[int, float | None]] = {}
        for sample in samples:
            stamp, pid, sm = int(sample.timeStamp), int(sample.pid), int(sample.smUtil)
            if stamp >= latest.get(pid, (-1, None))[0]:
                latest[pid] = (stamp, float(sm) if 0 <= sm <= 100 else None)
        self.seen_us[index] = max([since, *(int(s.timeStamp) for s in samples)])
        return {pid: pct for pid, (_, pct) in latest.items()}

    def forget(self, index: int) -> None:
        """A lost GPU: its driver clock and samples start over when it returns."""
        self.seen_us.pop(index, None)


def sm_util_of(pid: int, utilization: Mapping[int, float | None] | None) -> float | None:
    """The pid's SM % in a read's answer: 0 when the answer has no sample of it."""
    return None if utilization is None else utilization.get(pid, 0.0)
