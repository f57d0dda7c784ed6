"""One tool's side of bench/nvml_sweep.py: sweeps the fake NVML's GPUs when told to.

Started by the benchmark, with the fake library first on ``LD_LIBRARY_PATH``:

    python bench/nvml_sweep_worker.py gpufleet|nvitop|gpustat

It speaks JSON lines. Once set up it prints ``{"ready": true, "ops": [...], ...}``
(or ``{"ready": false, "error": ...}``); then it answers each command read from
stdin with one line:

    {"cmd": "time", "op": OP, "sweeps": N, "warmup": W}
        -> {"wall": [seconds, ...], "cpu": [seconds, ...]}   one entry per sweep
    {"cmd": "count", "op": OP}
        -> {"calls": {function: n}, "missing": {function: n}}  NVML calls of one sweep

Closing stdin ends it. Everything a tool prints goes to stderr, so stdout carries
only the protocol.

The ops, per tool (one sweep = every GPU once):

- gpufleet: ``metrics`` = NvmlBackend.read_gpus(), ``processes`` = read_processes(),
  ``sweep`` = both (what the daemon does on a process tick), ``processes_cached`` =
  read_processes() with the /proc details of a process cached by (pid, start
  ticks): a prototype of the fix the benchmark suggests, the daemon's code unchanged;
- nvitop: ``metrics`` = ``Device.as_snapshot()`` of each of ``Device.all()`` (taken
  once, as nvitop's monitor does), ``processes`` = ``device.processes()`` of each
  and ``GpuProcess.take_snapshots``, ``sweep`` = both;
- gpustat: ``sweep`` = ``gpustat.new_query()`` (GPUs and processes in one call; its
  ``time.sleep(0.1)`` per GPU, which waits for a CPU-percent reading, is removed:
  it costs wall time, not work, and would make every sweep 0.8 s long).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import Any, TextIO

Sweep = Callable[[], object]
LOOKUP = "_nvmlGetFunctionPointer"


def gpufleet_ops() -> dict[str, Sweep]:
    from node_daemon.backends.nvml import NvmlBackend

    backend = NvmlBackend()
    backend.open()

    def sweep() -> None:
        backend.read_gpus()
        backend.read_processes()

    return {
        "metrics": backend.read_gpus,
        "processes": backend.read_processes,
        "sweep": sweep,
        "processes_cached": with_cached_process_details(backend.read_processes),
    }


def with_cached_process_details(read: Sweep) -> Sweep:
    """`read` with procinfo.describe_process cached by (pid, start ticks), while it runs.

    A prototype of a fix suggested by this benchmark, measured beside the real
    code; the daemon's code is not changed.
    """
    from node_daemon.backends import procinfo

    original = procinfo.describe_process
    cache: dict[tuple[int, int | None], procinfo.ProcessDetails] = {}

    def describe(pid: int, proc_root: Any = procinfo.PROC) -> procinfo.ProcessDetails:
        key = (pid, procinfo.process_start_ticks(pid, proc_root))
        details = cache.get(key)
        if details is None:
            details = cache[key] = original(pid, proc_root)
        return details

    def cached_read() -> object:
        procinfo.describe_process = describe
        try:
            return read()
        finally:
            procinfo.describe_process = original

    return cached_read


def nvitop_ops() -> dict[str, Sweep]:
    from nvitop import Device, GpuProcess

    devices = Device.all()

    def metrics() -> object:
        return [device.as_snapshot() for device in devices]

    def processes() -> object:
        found = [proc for device in devices for proc in device.processes().values()]
        return GpuProcess.take_snapshots(found, failsafe=True)

    def sweep() -> None:
        metrics()
        processes()

    return {"metrics": metrics, "processes": processes, "sweep": sweep}


class _TimeWithoutSleep:
    """The `time` module as gpustat.core sees it, with sleep() a no-op."""

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    @staticmethod
    def sleep(_seconds: float) -> None:
        return None


def gpustat_ops() -> dict[str, Sweep]:
    import gpustat.core

    gpustat.core.time = _TimeWithoutSleep()  # type: ignore[assignment]
    return {"sweep": gpustat.core.GPUStatCollection.new_query}


TOOLS: dict[str, Callable[[], dict[str, Sweep]]] = {
    "gpufleet": gpufleet_ops,
    "nvitop": nvitop_ops,
    "gpustat": gpustat_ops,
}
DISTRIBUTIONS = {"gpufleet": "gpufleet", "nvitop": "nvitop", "gpustat": "gpustat"}


def versions(tool: str) -> dict[str, str | None]:
    def of(name: str) -> str | None:
        try:
            return version(name)
        except PackageNotFoundError:
            return None

    return {
        tool: of(DISTRIBUTIONS[tool]),
        "nvidia-ml-py": of("nvidia-ml-py"),
        "python": sys.version.split()[0],
    }


# ---------------------------------------------------------------- timing


def time_sweeps(sweep: Sweep, sweeps: int, warmup: int) -> dict[str, list[float]]:
    """Wall and on-CPU (this thread) seconds of each of `sweeps` sweeps after `warmup`."""
    for _ in range(warmup):
        sweep()
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(sweeps):
        cpu_start, wall_start = time.thread_time(), time.perf_counter()
        sweep()
        wall_end, cpu_end = time.perf_counter(), time.thread_time()
        wall.append(wall_end - wall_start)
        cpu.append(cpu_end - cpu_start)
    return {"wall": wall, "cpu": cpu}


# ---------------------------------------------------------------- counting NVML calls


class _Counted:
    """A ctypes function pointer that counts its calls; attributes go to the pointer."""

    __slots__ = ("_calls", "_fn", "_name")

    def __init__(self, name: str, fn: Any, calls: Counter[str]) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_fn", fn)
        object.__setattr__(self, "_calls", calls)

    def __call__(self, *args: Any) -> Any:
        self._calls[self._name] += 1
        return self._fn(*args)

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._fn, attr)

    def __setattr__(self, attr: str, value: Any) -> None:
        setattr(self._fn, attr, value)  # pynvml sets restype on some pointers


def _counting(lookup: Callable[[str], Any], calls: Counter[str], missing: Counter[str]) -> Any:
    def counted_lookup(name: str) -> Any:
        try:
            fn = lookup(name)
        except Exception:  # pynvml.NVMLError_FunctionNotFound: the library lacks it
            missing[name] += 1
            raise
        return _Counted(name, fn, calls)

    return counted_lookup


@contextmanager
def counting_nvml_calls() -> Iterator[tuple[Counter[str], Counter[str]]]:
    """Count every NVML function call made through pynvml while inside the block.

    pynvml looks each function up by name (`_nvmlGetFunctionPointer`) at every call;
    nvitop holds its own reference to that lookup, gpustat replaces pynvml's with a
    wrapper. Wrapping whatever each module holds counts each call exactly once.
    """
    calls: Counter[str] = Counter()
    missing: Counter[str] = Counter()
    patched: list[tuple[ModuleType, Any]] = []
    for module in list(sys.modules.values()):
        lookup = vars(module).get(LOOKUP) if isinstance(module, ModuleType) else None
        if callable(lookup):
            patched.append((module, lookup))
            setattr(module, LOOKUP, _counting(lookup, calls, missing))
    try:
        yield calls, missing
    finally:
        for module, lookup in patched:
            setattr(module, LOOKUP, lookup)


def count_sweep(sweep: Sweep) -> dict[str, dict[str, int]]:
    sweep()  # warm: first-time lookups and caches are not what a tick costs
    with counting_nvml_calls() as (calls, missing):
        sweep()
    return {"calls": dict(calls), "missing": dict(missing)}


# ---------------------------------------------------------------- protocol


def handle(command: dict[str, Any], ops: dict[str, Sweep]) -> dict[str, Any]:
    sweep = ops[command["op"]]
    if command["cmd"] == "time":
        return time_sweeps(sweep, int(command["sweeps"]), int(command["warmup"]))
    if command["cmd"] == "count":
        return count_sweep(sweep)
    raise ValueError(f"unknown command {command['cmd']!r}")


def protocol_stream() -> TextIO:
    """A private copy of stdout for the protocol; fd 1 then points at stderr."""
    stream = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return stream


def reply(stream: TextIO, message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def main(argv: list[str]) -> int:
    out = protocol_stream()
    logging.disable(logging.CRITICAL)  # nvitop logs each function the fake lacks
    tool = argv[1] if len(argv) > 1 else ""
    if tool not in TOOLS:
        reply(out, {"ready": False, "error": f"unknown tool {tool!r}"})
        return 2
    try:
        ops = TOOLS[tool]()
    except Exception as exc:  # not installed, NVML not loadable: say so, do not crash
        reply(out, {"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        return 1
    reply(out, {"ready": True, "ops": list(ops), "versions": versions(tool), "pid": os.getpid()})
    for line in sys.stdin:
        if line.strip():
            reply(out, handle(json.loads(line), ops))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
