"""nvitop's process columns: SM share (NVML), CPU % and resident memory (/proc), real processes.

The NVML backend runs through nvidia-ml-py's real ctypes path against the fake
libnvidia-ml.so.1 (its nvmlDeviceGetProcessUtilization serves `process_util.*`
samples); CPU and memory come from the /proc of real child processes: a busy loop
and one that holds memory it has written to.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from gpufleet.v1.gpu_metrics import UTIL_GPU_PCT
from node_daemon.backends.nvml import NvmlBackend
from node_daemon.backends.process_watch import ProcessWatch
from node_daemon.backends.readings import ProcessReading
from node_daemon.backends.simulated.backend import SimulatedBackend
from node_daemon.sampling.wire import process_message
from tests.conftest import DaemonFactory
from tests.fake_nvml.fixture import FakeNvmlState

MIB = 1024**2
HELD_BYTES = 64 * MIB
SPIN = "while True: pass"
# Writes every byte (b"x" * n), so the pages are resident; then waits for stdin to close.
HOLD = f"import sys; held = b'x' * {HELD_BYTES}; print('ready', flush=True); sys.stdin.read()"


def _python(code: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )


def _end(child: subprocess.Popen[str]) -> None:
    child.kill()
    child.communicate()  # reaps it and closes its pipes


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[str]]:
    child = _python(SPIN)
    yield child
    _end(child)


@pytest.fixture
def holder() -> Iterator[subprocess.Popen[str]]:
    child = _python(HOLD)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    yield child
    _end(child)


@pytest.fixture
def backend(fake_nvml: FakeNvmlState) -> Iterator[NvmlBackend]:
    nvml = NvmlBackend()
    nvml.open()
    yield nvml
    nvml.close()


def _measured(
    read: Callable[[], dict[int, ProcessReading]], pid: int, timeout_s: float = 20.0
) -> dict[int, ProcessReading]:
    """Read until `pid` has a CPU % (it needs a second listing, `MIN_INTERVAL_S` on)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = read()
        if pid in found and found[pid].cpu_pct is not None:
            return found
        time.sleep(0.5)  # the interval measured: listings, not a wait for an event
    raise AssertionError(f"pid {pid} got no CPU % in {timeout_s} s")


def _nvml_processes(backend: NvmlBackend, gpu: int = 0) -> dict[int, ProcessReading]:
    return {p.pid: p for p in backend.read_processes()[gpu]}


def test_nvml_process_columns_of_a_spinner_and_a_memory_holder(
    fake_nvml: FakeNvmlState,
    backend: NvmlBackend,
    spinner: subprocess.Popen[str],
    holder: subprocess.Popen[str],
) -> None:
    fake_nvml.add_process(0, spinner.pid, 2 * MIB).add_process(0, holder.pid, 3 * MIB)
    fake_nvml.add_process_util(0, spinner.pid, 87)

    found = _measured(lambda: _nvml_processes(backend), spinner.pid)

    spin, hold = found[spinner.pid], found[holder.pid]
    # One thread busy in a loop: about 100 on an idle machine; at most one core's worth,
    # and well above idle even when the tests share the machine's cores with others.
    assert spin.cpu_pct is not None and 10 < spin.cpu_pct <= 110
    assert hold.cpu_pct is not None and hold.cpu_pct < 5  # blocked on stdin
    assert hold.host_memory_bytes is not None and hold.host_memory_bytes >= HELD_BYTES
    assert spin.host_memory_bytes is not None and spin.host_memory_bytes < HELD_BYTES
    # The spinner's sample; the holder has none in a non-empty answer: no SM time.
    assert (spin.sm_util_pct, hold.sm_util_pct) == (87.0, 0.0)
    assert spin.command is not None and SPIN in spin.command


def test_sm_util_counts_only_samples_since_the_last_read(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, holder: subprocess.Popen[str]
) -> None:
    fake_nvml.add_process(0, holder.pid, MIB).add_process_util(0, holder.pid, 40, 1_000)
    assert _nvml_processes(backend)[holder.pid].sm_util_pct == 40.0

    # Nothing newer than timestamp 1000: NVML answers NOT_FOUND, and the share is unknown.
    assert _nvml_processes(backend)[holder.pid].sm_util_pct is None

    fake_nvml.add_process_util(0, holder.pid, 65, 2_000)
    assert _nvml_processes(backend)[holder.pid].sm_util_pct == 65.0


def test_an_out_of_range_sample_is_unknown_not_zero(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, holder: subprocess.Popen[str]
) -> None:
    fake_nvml.add_process(0, holder.pid, MIB).add_process_util(0, holder.pid, 250)

    assert _nvml_processes(backend)[holder.pid].sm_util_pct is None


@pytest.mark.parametrize("answer", ["unsupported", "error:4"])  # NOT_SUPPORTED, NO_PERMISSION
def test_sm_util_absent_when_nvml_cannot_tell(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, holder: subprocess.Popen[str], answer: str
) -> None:
    fake_nvml.add_process(0, holder.pid, MIB).add_process_util(0, holder.pid, 40)
    fake_nvml.set_gpu(0, process_util=answer)

    (process,) = backend.read_processes()[0]

    assert process.sm_util_pct is None and process.host_memory_bytes is not None
    (gpu,) = backend.read_gpus()
    assert gpu.error == ""  # an absent value, not a failing GPU


def test_simulated_processes_have_plausible_columns() -> None:
    def node() -> SimulatedBackend:
        return SimulatedBackend(gpu_count=4, seed=1, start_unix_ms=0)

    backend = node()
    readings = {r.index: r for r in backend.read_gpus()}

    processes = backend.read_processes()

    listed = [p for found in processes.values() for p in found]
    assert listed, "seed 1 starts some GPUs busy"
    for index, found in processes.items():
        shares = [p.sm_util_pct for p in found]
        assert all(s is not None and 0 <= s <= 100 for s in shares)
        util = readings[index][UTIL_GPU_PCT]
        if found and util is not None:
            assert sum(s or 0.0 for s in shares) == pytest.approx(util, abs=0.1 * len(found))
    assert all(p.cpu_pct is not None and 0 < p.cpu_pct <= 400 for p in listed)
    assert all(p.host_memory_bytes is not None and p.host_memory_bytes >= 2**30 for p in listed)
    again = node()
    again.read_gpus()
    assert processes == again.read_processes()  # deterministic


def test_simulated_workload_is_measured_from_proc(spinner: subprocess.Popen[str]) -> None:
    backend = SimulatedBackend(gpu_count=1, seed=2)
    backend.attach_process(0, spinner.pid, "alice", "python -c spin", 4 * MIB, 0)
    backend.read_gpus()  # applies the attach

    def read() -> dict[int, ProcessReading]:
        return {p.pid: p for p in backend.read_processes()[0]}

    spin = _measured(read, spinner.pid)[spinner.pid]

    assert spin.cpu_pct is not None and 10 < spin.cpu_pct <= 110
    assert spin.host_memory_bytes is not None and spin.host_memory_bytes > 0


def _write_stat(root: Path, pid: int, start_ticks: int, cpu_ticks: int) -> None:
    fields = ["S", *["0"] * 10, str(cpu_ticks), "0", *["0"] * 6, str(start_ticks), "0"]
    (root / str(pid)).mkdir(parents=True, exist_ok=True)
    (root / str(pid) / "stat").write_text(f"{pid} (a) b) {' '.join(fields)}\n")
    (root / str(pid) / "statm").write_text("1000 250 10 1 0 200 0\n")
    (root / str(pid) / "cmdline").write_bytes(f"job-{start_ticks}\0".encode())


def test_a_reused_pid_is_a_new_process(tmp_path: Path) -> None:
    """Keyed by (pid, start time): a new process on an old pid starts its own interval."""
    now = [100.0]
    watch = ProcessWatch(tmp_path, clock=lambda: now[0])
    _write_stat(tmp_path, 7, start_ticks=500, cpu_ticks=1_000)
    first = watch.describe(7, None)
    assert first.cpu_pct is None and first.command == "job-500"

    now[0] += 2.0
    _write_stat(tmp_path, 7, start_ticks=500, cpu_ticks=1_100)  # 1 s of CPU in 2 s
    assert watch.describe(7, None).cpu_pct == pytest.approx(50.0)

    now[0] += 2.0
    _write_stat(tmp_path, 7, start_ticks=900, cpu_ticks=5)
    reused = watch.describe(7, None)
    assert reused.cpu_pct is None and reused.command == "job-900"
    assert reused.host_memory_bytes is not None and reused.host_memory_bytes > 0


def test_a_process_that_left_the_gpus_is_forgotten(tmp_path: Path) -> None:
    now = [0.0]
    watch = ProcessWatch(tmp_path, clock=lambda: now[0])
    _write_stat(tmp_path, 7, start_ticks=500, cpu_ticks=0)
    watch.describe(7, None)
    watch.end_round()
    now[0] += 1.0
    watch.end_round()  # a round without pid 7

    assert watch.describe(7, None).cpu_pct is None  # no interval from before it left


def test_columns_travel_as_optional_fields() -> None:
    message = process_message(
        ProcessReading(pid=7, sm_util_pct=0.0, cpu_pct=150.0, host_memory_bytes=5 * MIB)
    )
    assert (message.sm_util_pct, message.cpu_pct, message.host_memory_bytes) == (0, 150, 5 * MIB)
    assert message.HasField("sm_util_pct")
    assert not process_message(ProcessReading(pid=8)).HasField("cpu_pct")


def test_a_subscriber_gets_the_columns_over_grpc(start_daemon: DaemonFactory) -> None:
    daemon = start_daemon(gpus=4, seed=1)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stream = pb_grpc.NodeServiceStub(channel).StreamSamples(
            pb.StreamSamplesRequest(), timeout=10
        )
        batch = next(b for b in stream if any(s.processes for s in b.gpus))
        stream.cancel()
    process = next(p for s in batch.gpus for p in s.processes)
    assert all(process.HasField(f) for f in ("sm_util_pct", "cpu_pct", "host_memory_bytes"))
    assert 0 <= process.sm_util_pct <= 100 and process.host_memory_bytes > 0
