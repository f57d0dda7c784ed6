"""The NVML backend's health signals, MIG and power limit, through the real nvidia-ml-py
ctypes path against the fake libnvidia-ml.so.1 (tests/fake_nvml)."""

from __future__ import annotations

import ctypes
import logging
import math
import os
import re
import subprocess
import threading
from collections.abc import Iterator

import pynvml
import pytest

from gpufleet.v1.gpu_metrics import (
    NVLINK_LINKS_ACTIVE,
    NVLINK_LINKS_DOWN,
    NVLINK_METRICS,
    PCIE_REPLAY_TOTAL,
    POWER_LIMIT_W,
    RECOVERY_ACTION,
    REMAPPED_ROWS,
    REMAPPED_ROWS_CORRECTABLE,
    RETIRED_PAGES,
    TEMP_GPU_C,
    TEMP_MEM_C,
)
from node_daemon.backends.base import PowerLimitControl, PowerLimitRefused
from node_daemon.backends.nvml import NvmlBackend
from node_daemon.backends.readings import AnyMetric, GpuHealth, GpuReading
from node_daemon.metrics.dcgm import DcgmLabels, render
from tests.fake_clock import ManualClock
from tests.fake_nvml.fixture import FakeNvmlState

GIB = 1024**3


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1000.0)


@pytest.fixture
def backend(fake_nvml: FakeNvmlState, clock: ManualClock) -> Iterator[NvmlBackend]:
    nvml = NvmlBackend(clock=clock)
    yield nvml
    nvml.close()


@pytest.fixture
def two_gpus(fake_nvml: FakeNvmlState) -> FakeNvmlState:
    return fake_nvml.set(gpu_count=2)


def values(reading: GpuReading, metrics: list[AnyMetric]) -> list[float | None]:
    return [reading[metric] for metric in metrics]


def nvml_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    backends = (r for r in caplog.records if r.name.startswith("node_daemon.backends"))
    return [r.getMessage() for r in backends if r.levelno >= logging.WARNING]


# ---------------------------------------------------------------- the default H100


def test_default_h100_reads_cleanly(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    (gpu,) = backend.open().gpus
    (reading,) = backend.read_gpus()

    assert (reading.health, reading.error) == (GpuHealth.OK, "")
    assert reading[PCIE_REPLAY_TOTAL] == 0 and values(reading, REMAPPED_ROWS) == [0, 0, 0, 0]
    assert (reading[RECOVERY_ACTION], reading[POWER_LIMIT_W]) == (0, 700.0)
    # An H100 remaps rows instead of retiring pages; the default fake has no NVLink.
    assert values(reading, RETIRED_PAGES) == [None] * 3
    assert values(reading, NVLINK_METRICS) == [None] * 6
    assert (reading.nvlink_down_links, reading.mig) == ((), ())
    assert (gpu.mig_enabled, gpu.power_limit_default_w) == (False, 700.0)
    assert (gpu.power_limit_min_w, gpu.power_limit_max_w) == (200.0, 700.0)
    assert nvml_warnings(caplog) == []


# ---------------------------------------------------------------- the signals


def test_health_signals_are_what_the_fake_serves(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    two_gpus.set_gpu(1, pcie_replay=17, remapped_rows_correctable=3,
                     remapped_rows_uncorrectable=1, remapped_rows_pending=1,
                     remapped_rows_failure=1, recovery_action=1, power_limit=650_000)  # fmt: skip
    backend.open()

    gpu0, gpu1 = backend.read_gpus()

    assert gpu1[PCIE_REPLAY_TOTAL] == 17 and values(gpu1, REMAPPED_ROWS) == [3, 1, 1, 1]
    assert (gpu1[RECOVERY_ACTION], gpu1[POWER_LIMIT_W], gpu1.health) == (1, 650.0, GpuHealth.OK)
    assert values(gpu0, REMAPPED_ROWS) == [0, 0, 0, 0] and gpu0[PCIE_REPLAY_TOTAL] == 0


def test_a_gpu_that_retires_pages_and_has_no_row_remapper(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    fake_nvml.set_gpu(0, name="Tesla V100-SXM2-32GB", remapped_rows="unsupported")
    fake_nvml.set_gpu(0, retired_pages="ok", retired_pages_sbe=3, retired_pages_dbe=1)
    fake_nvml.set_gpu(0, retired_pages_pending=1)
    backend.open()

    (reading,) = backend.read_gpus()

    assert values(reading, RETIRED_PAGES) == [3, 1, 1]
    assert values(reading, REMAPPED_ROWS) == [None] * 4 and reading.health is GpuHealth.OK


def test_many_retired_pages_go_through_the_size_protocol(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    fake_nvml.set_gpu(0, retired_pages="ok", retired_pages_sbe=200, retired_pages_dbe=0)
    backend.open()

    assert values(backend.read_gpus()[0], RETIRED_PAGES) == [200, 0, 0]
    # The first call asks for the size; the second fills pynvml's buffer.
    pages = pynvml.nvmlDeviceGetRetiredPages_v2(pynvml.nvmlDeviceGetHandleByIndex(0), 0)
    assert len(pages) == 200 and len({page["address"] for page in pages}) == 200


def test_retired_pages_buffer_too_small_answers_insufficient_size_and_the_count(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    fake_nvml.set_gpu(0, retired_pages="ok", retired_pages_dbe=3)
    backend.open()
    function = pynvml._nvmlGetFunctionPointer("nvmlDeviceGetRetiredPages")
    count, addresses = ctypes.c_uint(2), (ctypes.c_ulonglong * 2)()

    code = function(pynvml.nvmlDeviceGetHandleByIndex(0), 1, ctypes.byref(count), addresses)

    assert (code, count.value) == (pynvml.NVML_ERROR_INSUFFICIENT_SIZE, 3)


@pytest.mark.parametrize(
    ("fake_field", "metrics"),
    [
        ("pcie_replay", [PCIE_REPLAY_TOTAL]),
        ("remapped_rows", REMAPPED_ROWS),
        ("retired_pages", RETIRED_PAGES),
        ("recovery_action", [RECOVERY_ACTION]),
        ("power_limit", [POWER_LIMIT_W]),
    ],
)
def test_not_supported_signal_reads_none_and_is_not_logged(
    fake_nvml: FakeNvmlState,
    backend: NvmlBackend,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
    fake_field: str,
    metrics: list[AnyMetric],
) -> None:
    fake_nvml.set_gpu(0, retired_pages="ok")
    backend.open()
    assert all(value is not None for value in values(backend.read_gpus()[0], metrics))
    caplog.set_level(logging.DEBUG)
    fake_nvml.unsupported(0, fake_field)

    clock.now += 10  # the slow signals are due again
    (reading,) = backend.read_gpus()

    assert values(reading, metrics) == [None] * len(metrics)
    assert (reading.health, reading.error, reading[TEMP_GPU_C]) == (GpuHealth.OK, "", 40.0)
    assert nvml_warnings(caplog) == []


def test_a_driver_without_the_recovery_action_field_reads_none(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    # Drivers older than the field may call its id invalid, inside a call that worked.
    fake_nvml.fail(0, "recovery_action", pynvml.NVML_ERROR_INVALID_ARGUMENT)
    backend.open()

    (reading,) = backend.read_gpus()

    assert (reading[RECOVERY_ACTION], reading[TEMP_MEM_C], reading.health) == (
        None, 45.0, GpuHealth.OK)  # fmt: skip


# ---------------------------------------------------------------- NVLink


def test_nvlink_totals_over_links_and_the_links_down(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    two_gpus.set_nvlinks(0, 18, down=(3, 7))
    two_gpus.set_link(0, 0, crc_flit=5, replay=2).set_link(0, 3, crc_flit=1, crc_data=4)
    two_gpus.set_link(0, 17, recovery=1, ecc_data=9)
    backend.open()

    gpu0, gpu1 = backend.read_gpus()

    assert values(gpu0, NVLINK_METRICS) == [6, 4, 2, 1, 16, 2]
    assert gpu0.nvlink_down_links == (3, 7) and gpu0.health is GpuHealth.OK
    assert values(gpu1, NVLINK_METRICS) == [None] * 6 and gpu1.nvlink_down_links == ()  # no NVLink


def test_links_beyond_the_gpus_answer_as_a_real_driver(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    two_gpus.set_nvlinks(0, 18)
    backend.open()
    with_links, without = (pynvml.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))

    assert pynvml.nvmlDeviceGetNvLinkState(with_links, 17) == pynvml.NVML_FEATURE_ENABLED
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetNvLinkState(with_links, 18)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        pynvml.nvmlDeviceGetNvLinkErrorCounter(with_links, pynvml.NVML_NVLINK_MAX_LINKS, 0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetNvLinkState(without, 0)


def test_slow_signals_are_read_every_interval_and_kept_in_between(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, clock: ManualClock
) -> None:
    fake_nvml.set_nvlinks(0, 4)
    backend.open()
    assert backend.read_gpus()[0][NVLINK_LINKS_DOWN] == 0

    fake_nvml.set_nvlinks(0, 4, down=(2,)).set_gpu(0, remapped_rows_correctable=5, pcie_replay=9)
    clock.now += 9.9
    kept = backend.read_gpus()[0]
    clock.now += 0.1
    fresh = backend.read_gpus()[0]

    # The PCIe replay counter is read every tick; the slow signals every 10 s.
    assert (kept[PCIE_REPLAY_TOTAL], kept[REMAPPED_ROWS_CORRECTABLE], kept.nvlink_down_links) == (
        9, 0, ())  # fmt: skip
    assert (fresh[REMAPPED_ROWS_CORRECTABLE], fresh[NVLINK_LINKS_DOWN]) == (5, 1)
    assert fresh.nvlink_down_links == (2,)


def test_an_error_in_a_slow_read_marks_the_reading_until_the_next_read(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, clock: ManualClock
) -> None:
    fake_nvml.fail(0, "remapped_rows", pynvml.NVML_ERROR_UNKNOWN)
    backend.open()

    first, kept = backend.read_gpus()[0], backend.read_gpus()[0]
    fake_nvml.set_gpu(0, remapped_rows=None)
    clock.now += 10
    fixed = backend.read_gpus()[0]

    for reading in (first, kept):
        assert reading.health is GpuHealth.ERROR and "remapped_rows" in reading.error
        assert reading[REMAPPED_ROWS_CORRECTABLE] is None and reading[TEMP_GPU_C] == 40.0
    assert (fixed.health, fixed[REMAPPED_ROWS_CORRECTABLE]) == (GpuHealth.OK, 0)


def test_a_gpu_lost_and_back_is_probed_afresh(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    fake_nvml.set_nvlinks(0, 2)
    backend.open()
    assert backend.read_gpus()[0][NVLINK_LINKS_ACTIVE] == 2

    fake_nvml.lose_gpu(0)
    assert backend.read_gpus()[0].health is GpuHealth.LOST
    fake_nvml.set_nvlinks(0, 6, down=(5,)).recover_gpu(0)
    back = backend.read_gpus()[0]

    assert (back.health, back[NVLINK_LINKS_ACTIVE], back.nvlink_down_links) == (
        GpuHealth.OK, 5, (5,))  # fmt: skip


# ---------------------------------------------------------------- MIG


@pytest.fixture
def mig_gpu(two_gpus: FakeNvmlState, sleeper: subprocess.Popen[bytes]) -> FakeNvmlState:
    """GPU 0 with two MIG devices (at MIG index 0 and 2), each with a process."""
    two_gpus.add_mig(0, 0, "3g.40gb", gi=2, ci=0, memory_used=5 * GIB)
    two_gpus.add_mig(0, 2, "1g.10gb", gi=9, ci=0, memory_used=GIB)
    two_gpus.add_mig_process(0, 0, sleeper.pid, 4 * GIB)
    return two_gpus.add_mig_process(0, 2, os.getpid(), GIB // 2)


def test_mig_instances_with_their_memory_and_processes(
    mig_gpu: FakeNvmlState, backend: NvmlBackend, sleeper: subprocess.Popen[bytes]
) -> None:
    facts = backend.open()
    before_processes = backend.read_gpus()[0]
    gpu_processes = backend.read_processes()
    gpu0, gpu1 = backend.read_gpus()

    assert (facts.gpus[0].mig_enabled, facts.gpus[1].mig_enabled) == (True, False)
    big, small = gpu0.mig
    assert (big.gpu_instance_id, big.compute_instance_id, big.profile) == (2, 0, "3g.40gb")
    assert (big.mem_used_bytes, big.mem_total_bytes) == (5 * GIB, 40 * GIB)
    assert (small.gpu_instance_id, small.profile, small.mem_total_bytes) == (9, "1g.10gb", 10 * GIB)
    assert big.uuid.startswith("MIG-") and big.uuid != small.uuid
    assert all(m.processes == () for m in before_processes.mig)  # not listed yet
    ((process,),) = (big.processes,)
    assert (process.pid, process.gpu_memory_bytes, process.command) == (
        sleeper.pid, 4 * GIB, "sleep 300")  # fmt: skip
    assert [p.pid for p in small.processes] == [os.getpid()]
    # The GPU's own list has the MIG devices' processes too, as a real driver's.
    assert {p.pid for p in gpu_processes[0]} == {sleeper.pid, os.getpid()}
    assert gpu1.mig == () and gpu0.health is GpuHealth.OK


def test_a_mig_handle_is_told_apart_from_a_gpu_handle(
    mig_gpu: FakeNvmlState, backend: NvmlBackend
) -> None:
    backend.open()
    gpu = pynvml.nvmlDeviceGetHandleByIndex(0)
    mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)

    assert (bool(pynvml.nvmlDeviceIsMigDeviceHandle(mig).value),
            bool(pynvml.nvmlDeviceIsMigDeviceHandle(gpu).value)) == (True, False)  # fmt: skip
    parent = pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(mig)
    assert ctypes.cast(parent, ctypes.c_void_p).value == ctypes.cast(gpu, ctypes.c_void_p).value
    assert pynvml.nvmlDeviceGetName(mig) == "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
    assert pynvml.nvmlDeviceGetMaxMigDeviceCount(gpu) == 7
    with pytest.raises(pynvml.NVMLError_NotFound):
        pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 1)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # a whole-GPU call
        pynvml.nvmlDeviceGetTemperature(mig, pynvml.NVML_TEMPERATURE_GPU)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        pynvml.nvmlDeviceGetGpuInstanceId(gpu)


def test_a_destroyed_mig_instance_leaves_the_reading(
    mig_gpu: FakeNvmlState, backend: NvmlBackend
) -> None:
    backend.open()
    assert [m.profile for m in backend.read_gpus()[0].mig] == ["3g.40gb", "1g.10gb"]

    mig_gpu.set_gpu(0, **{"mig.2.profile": None})
    gone = backend.read_gpus()[0]
    again = backend.read_gpus()[0]

    assert [m.profile for m in gone.mig] == ["3g.40gb"] == [m.profile for m in again.mig]
    assert (gone.health, again.health) == (GpuHealth.OK, GpuHealth.OK)


# ---------------------------------------------------------------- the power limit


def test_set_power_limit_changes_the_limit_read(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    control: PowerLimitControl = backend
    backend.open()

    control.set_power_limit_w(0, 450.0)

    assert backend.read_gpus()[0][POWER_LIMIT_W] == 450.0
    assert pynvml.nvmlDeviceGetEnforcedPowerLimit(pynvml.nvmlDeviceGetHandleByIndex(0)) == 450_000


@pytest.mark.parametrize(
    ("setup", "index", "watts", "words"),
    [
        ({"set_power_limit": "no_permission"}, 0, 450.0, "needs root or CAP_SYS_ADMIN"),
        ({}, 0, 900.0, "900 W failed: the allowed range is 200-700 W"),
        ({}, 0, 150.0, "the allowed range is 200-700 W"),
        ({"power_limit_min": "unsupported"}, 0, 450.0, "cannot be set"),
        ({}, 3, 450.0, "no GPU 3 on this node (1 GPUs)"),
        ({}, 0, math.nan, "nan W is not a power limit"),
    ],
)
def test_set_power_limit_refused_says_why(
    fake_nvml: FakeNvmlState,
    backend: NvmlBackend,
    setup: dict[str, object],
    index: int,
    watts: float,
    words: str,
) -> None:
    fake_nvml.set_gpu(0, **setup)
    backend.open()

    with pytest.raises(PowerLimitRefused, match=re.escape(words)):
        backend.set_power_limit_w(index, watts)

    assert backend.read_gpus()[0][POWER_LIMIT_W] == 700.0  # unchanged


def test_set_power_limit_before_open_is_refused(backend: NvmlBackend) -> None:
    with pytest.raises(PowerLimitRefused, match="not initialised"):
        backend.set_power_limit_w(0, 450.0)


def test_set_power_limit_while_another_thread_sweeps(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    backend.open()
    limits = [300.0 + i for i in range(200)]
    seen: list[GpuReading] = []
    done = threading.Event()

    def sweep() -> None:
        while not done.is_set():
            seen.extend(backend.read_gpus())

    sweeper = threading.Thread(target=sweep, name="test-sweeper")
    sweeper.start()
    try:
        for watts in limits:
            backend.set_power_limit_w(1, watts)
    finally:
        done.set()
        sweeper.join(timeout=10)

    assert not sweeper.is_alive() and seen
    assert all(r.health is GpuHealth.OK for r in seen)
    assert {r[POWER_LIMIT_W] for r in seen if r.index == 1} <= {700.0, *limits}
    assert backend.read_gpus()[1][POWER_LIMIT_W] == limits[-1]


# ---------------------------------------------------------------- /metrics


def test_dcgm_text_has_the_health_families_and_mig_instances(
    mig_gpu: FakeNvmlState, backend: NvmlBackend
) -> None:
    mig_gpu.set_gpu(1, pcie_replay=17, remapped_rows_correctable=3)
    mig_gpu.set_nvlinks(1, 18, down=(4,)).set_link(1, 2, crc_flit=7)
    facts = backend.open()
    readings = backend.read_gpus()

    text = render(readings, {g.index: g for g in facts.gpus}, {}, DcgmLabels("node-1"))

    gpu0 = 'gpu="0",UUID="GPU-00000000-0000-4000-8000-000000000000",pci_bus_id="00000000:10:00.0"'
    gpu0 += ',device="nvidia0",modelName="NVIDIA H100 80GB HBM3"'
    gpu1 = 'gpu="1",UUID="GPU-00000000-0000-4000-8000-000000000001",pci_bus_id="00000000:11:00.0"'
    gpu1 += ',device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-1"'
    big = f'{gpu0},GPU_I_PROFILE="3g.40gb",GPU_I_ID="2",Hostname="node-1"'
    small = f'{gpu0},GPU_I_PROFILE="1g.10gb",GPU_I_ID="9",Hostname="node-1"'
    assert f"DCGM_FI_DEV_FB_USED{{{big}}} 5120" in text  # MiB
    assert f"DCGM_FI_DEV_FB_FREE{{{big}}} 35840" in text
    assert f"DCGM_FI_DEV_FB_USED{{{small}}} 1024" in text
    assert f'DCGM_FI_DEV_FB_USED{{{gpu0},Hostname="node-1"}}' not in text  # no double count
    assert f"DCGM_FI_DEV_FB_USED{{{gpu1}}} 512" in text
    assert f'DCGM_FI_DEV_GPU_TEMP{{{gpu0},Hostname="node-1"}} 40' in text  # whole-GPU families
    assert "# TYPE DCGM_FI_DEV_PCIE_REPLAY_COUNTER counter" in text
    assert f"DCGM_FI_DEV_PCIE_REPLAY_COUNTER{{{gpu1}}} 17" in text
    assert f"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS{{{gpu1}}} 3" in text
    assert f"DCGM_FI_DEV_ROW_REMAP_PENDING{{{gpu1}}} 0" in text
    assert f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{gpu1}}} 7" in text
    assert f"DCGM_FI_DEV_POWER_MGMT_LIMIT{{{gpu1}}} 700" in text
    assert "DCGM_FI_DEV_RETIRED_SBE" not in text  # not supported on an H100: no line
    assert 'DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{gpu="0"' not in text
