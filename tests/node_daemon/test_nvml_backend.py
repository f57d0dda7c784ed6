"""NvmlBackend through the real nvidia-ml-py ctypes path, against the fake libnvidia-ml.so.1."""

from __future__ import annotations

import logging
import os
import pwd
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pynvml
import pytest

from gpufleet.v1 import gpu_metrics as m
from node_daemon.backends import facts as facts_module
from node_daemon.backends.base import BackendUnavailable
from node_daemon.backends.nvml import NvmlBackend, unavailable_message
from node_daemon.backends.readings import (
    AnyMetric,
    BackendKind,
    GpuHealth,
    GpuReading,
    GpuStatic,
    NodeFacts,
    ProcessReading,
)
from node_daemon.commands.backend_choice import build_backend
from node_daemon.config import DaemonConfig
from node_daemon.sampling.sample_ring import SampleRing
from node_daemon.sampling.sampler import BackendStatus, Sampler
from tests.conftest import wait_for
from tests.fake_nvml.fixture import FakeNvmlState

GIB = 1024**3
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def two_gpus(fake_nvml: FakeNvmlState) -> FakeNvmlState:
    return fake_nvml.set(gpu_count=2)


@pytest.fixture
def backend(fake_nvml: FakeNvmlState) -> Iterator[NvmlBackend]:
    nvml = NvmlBackend()
    yield nvml
    nvml.close()


def reading(backend: NvmlBackend, index: int) -> GpuReading:
    readings = backend.read_gpus()
    assert [r.index for r in readings] == list(range(len(readings)))
    return readings[index]


# ---------------------------------------------------------------- open, facts, close


def test_facts_are_what_the_fake_serves(two_gpus: FakeNvmlState, backend: NvmlBackend) -> None:
    two_gpus.set(driver_version="550.54.15", cuda_version=12040)
    two_gpus.set_gpu(
        0,
        name="NVIDIA H100 80GB HBM3",
        uuid="GPU-aaaaaaaa-1111-2222-3333-444444444444",
        serial="1654922001234",
        pci_bus_id="00000000:17:00.0",
        vbios="96.00.74.00.01",
        memory_total=85520809984,
        power_limit=700000,
        temp_slowdown=87,
        temp_shutdown=92,
    )
    two_gpus.set_gpu(1, name="NVIDIA A100-SXM4-40GB", memory_total=40 * GIB, power_limit=400000)

    facts = backend.open()

    assert (facts.driver_version, facts.cuda_version) == ("550.54.15", "12.4")
    assert facts.gpus[0] == GpuStatic(
        index=0,
        uuid="GPU-aaaaaaaa-1111-2222-3333-444444444444",
        name="NVIDIA H100 80GB HBM3",
        serial="1654922001234",
        pci_bus_id="00000000:17:00.0",
        memory_total_bytes=85520809984,
        power_limit_w=700.0,
        temp_slowdown_c=87.0,
        temp_shutdown_c=92.0,
        vbios_version="96.00.74.00.01",
        mig_enabled=False,
        power_limit_default_w=700.0,  # the fake's defaults: an H100 SXM's range
        power_limit_min_w=200.0,
        power_limit_max_w=700.0,
    )
    assert (facts.gpus[1].index, facts.gpus[1].name) == (1, "NVIDIA A100-SXM4-40GB")
    assert (facts.gpus[1].memory_total_bytes, facts.gpus[1].power_limit_w) == (40 * GIB, 400.0)
    assert facts.gpus[1].uuid.startswith("GPU-") and facts.gpus[1].uuid != facts.gpus[0].uuid


def test_unsupported_facts_read_none(fake_nvml: FakeNvmlState, backend: NvmlBackend) -> None:
    fake_nvml.unsupported(0, "serial", "vbios", "power_limit", "temp_slowdown", "pci_bus_id")
    fake_nvml.set(cuda_version="unsupported")

    facts = backend.open()

    gpu = facts.gpus[0]
    assert (gpu.serial, gpu.vbios_version, gpu.power_limit_w) == (None, None, None)
    assert (gpu.temp_slowdown_c, gpu.pci_bus_id, facts.cuda_version) == (None, None, None)
    assert gpu.temp_shutdown_c == 95.0 and gpu.name == "NVIDIA H100 80GB HBM3"


def test_open_inits_once_and_close_shuts_down_once(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    backend.open()
    backend.open()
    backend.read_gpus()
    assert fake_nvml.init_count() == 1

    backend.close()
    backend.close()

    assert fake_nvml.init_count() == 0
    with pytest.raises(BackendUnavailable, match="not initialised"):
        backend.read_gpus()


# ---------------------------------------------------------------- readings


def test_readings_are_what_the_fake_serves(two_gpus: FakeNvmlState, backend: NvmlBackend) -> None:
    two_gpus.set_gpu(
        1,
        util_gpu=87,
        util_mem=41,
        memory_total=80 * GIB,
        memory_used=12 * GIB,
        temp=71,
        memory_temp=78,
        power=312_500,
        fan=55,
        sm_clock=1755,
        mem_clock=2619,
        pcie_tx=1000,
        pcie_rx=250,
        pstate=2,
        throttle_reasons=0x4,
        ecc_corrected=7,
        ecc_uncorrected=1,
        energy=123_456_789,
    )
    backend.open()

    assert reading(backend, 1) == GpuReading(
        index=1,
        health=GpuHealth.OK,
        util_gpu_pct=87.0,
        util_mem_pct=41.0,
        mem_used_bytes=12 * GIB,
        mem_total_bytes=80 * GIB,
        temp_gpu_c=71.0,
        temp_mem_c=78.0,
        power_w=312.5,
        fan_pct=55.0,
        sm_clock_mhz=1755,
        mem_clock_mhz=2619,
        pcie_tx_bytes_per_s=1000 * 1024,
        pcie_rx_bytes_per_s=250 * 1024,
        pstate=2,
        throttle_reasons=0x4,
        ecc_corrected_total=7,
        ecc_uncorrected_total=1,
        xids=(),
        energy_j=123_456.789,
        # The health signals of the fake's default H100 (tests/node_daemon/test_nvml_signals.py).
        pcie_replay_total=0,
        remapped_rows_correctable=0,
        remapped_rows_uncorrectable=0,
        row_remap_pending=0,
        row_remap_failure=0,
        recovery_action=0,
        power_limit_w=700.0,
    )


@pytest.mark.parametrize(
    ("fake_field", "metrics"),
    [
        ("fan", [m.FAN_PCT]),
        ("memory_temp", [m.TEMP_MEM_C]),
        ("temp", [m.TEMP_GPU_C]),
        ("power", [m.POWER_W]),
        ("energy", [m.ENERGY_J]),
        ("util_gpu", [m.UTIL_GPU_PCT, m.UTIL_MEM_PCT]),
        ("memory_used", [m.MEM_USED_BYTES, m.MEM_TOTAL_BYTES]),
        ("sm_clock", [m.SM_CLOCK_MHZ]),
        ("pcie_rx", [m.PCIE_RX_BYTES_PER_S]),
        ("pstate", [m.PSTATE]),
        ("throttle_reasons", [m.THROTTLE_REASONS]),
        ("ecc_uncorrected", [m.ECC_UNCORRECTED_TOTAL]),
    ],
)
def test_unsupported_field_reads_none(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, fake_field: str, metrics: list[AnyMetric]
) -> None:
    backend.open()
    assert all(reading(backend, 0)[metric] is not None for metric in metrics)

    fake_nvml.unsupported(0, fake_field)
    gpu = reading(backend, 0)

    assert [gpu[metric] for metric in metrics] == [None] * len(metrics)
    assert gpu.health is GpuHealth.OK and gpu.error == ""
    assert gpu[m.MEM_CLOCK_MHZ] == 2619  # the other fields still read


def test_values_changed_while_open_are_seen(fake_nvml: FakeNvmlState, backend: NvmlBackend) -> None:
    fake_nvml.set_gpu(0, temp=40, power=100_000)
    backend.open()
    assert (reading(backend, 0)[m.TEMP_GPU_C], reading(backend, 0)[m.POWER_W]) == (40.0, 100.0)

    fake_nvml.set_gpu(0, temp=83, power=650_000)

    assert (reading(backend, 0)[m.TEMP_GPU_C], reading(backend, 0)[m.POWER_W]) == (83.0, 650.0)


def test_unexpected_error_marks_only_that_gpu_error(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    backend.open()
    two_gpus.fail(0, "temp", pynvml.NVML_ERROR_UNKNOWN)

    gpu0, gpu1 = backend.read_gpus()

    assert gpu0.health is GpuHealth.ERROR
    assert "temperature.gpu" in gpu0.error and "Unknown Error" in gpu0.error
    assert gpu0[m.TEMP_GPU_C] is None and gpu0[m.POWER_W] == 70.0  # what did read is kept
    assert gpu1.health is GpuHealth.OK and gpu1[m.TEMP_GPU_C] == 40.0


# ---------------------------------------------------------------- what the driver lacks or refuses

NOT_FOUND, NO_PERMISSION = pynvml.NVML_ERROR_FUNCTION_NOT_FOUND, pynvml.NVML_ERROR_NO_PERMISSION
NEWER_DRIVER = "is not in this driver (FUNCTION_NOT_FOUND)", "a newer driver has it"
DEVICE_ACCESS = "was refused (NO_PERMISSION)", "/dev/nvidia*"


def nvml_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "node_daemon.backends.nvml" and record.levelno >= logging.WARNING
    ]


@pytest.mark.parametrize(
    ("fake_field", "code", "function", "metrics", "words"),
    [
        ("energy", NOT_FOUND, "nvmlDeviceGetTotalEnergyConsumption", [m.ENERGY_J], NEWER_DRIVER),
        ("fan", NO_PERMISSION, "nvmlDeviceGetFanSpeed", [m.FAN_PCT], DEVICE_ACCESS),
        ("util_gpu", NO_PERMISSION, "nvmlDeviceGetUtilizationRates",
         [m.UTIL_GPU_PCT, m.UTIL_MEM_PCT], DEVICE_ACCESS),
        # Neither the new name nor the old one: one line for the pair.
        ("throttle_reasons", NOT_FOUND,
         "nvmlDeviceGetCurrentClocksEventReasons/nvmlDeviceGetCurrentClocksThrottleReasons",
         [m.THROTTLE_REASONS], NEWER_DRIVER),
        # A field value's own return code, inside a call that succeeded.
        ("memory_temp", NO_PERMISSION, "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP)",
         [m.TEMP_MEM_C], DEVICE_ACCESS),
    ],
)  # fmt: skip
def test_a_function_lacking_or_refused_is_logged_once_and_its_field_stays_unset(
    two_gpus: FakeNvmlState,
    backend: NvmlBackend,
    caplog: pytest.LogCaptureFixture,
    fake_field: str,
    code: int,
    function: str,
    metrics: list[AnyMetric],
    words: tuple[str, str],
) -> None:
    two_gpus.fail(0, fake_field, code).fail(1, fake_field, code)
    backend.open()
    caplog.set_level(logging.WARNING, logger="node_daemon.backends.nvml")

    sweeps = [backend.read_gpus(), backend.read_gpus()]

    for gpu in (gpu for sweep in sweeps for gpu in sweep):
        assert [gpu[metric] for metric in metrics] == [None] * len(metrics)
        assert (gpu.health, gpu.error, gpu[m.TEMP_GPU_C]) == (GpuHealth.OK, "", 40.0)
    (line,) = nvml_warnings(caplog)  # two sweeps of two GPUs: one line
    assert f"NVML {function} {words[0]}" in line and words[1] in line


def test_each_function_lacking_or_refused_has_its_own_line(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, caplog: pytest.LogCaptureFixture
) -> None:
    fake_nvml.fail(0, "energy", NOT_FOUND).fail(0, "power", NO_PERMISSION)
    backend.open()
    caplog.set_level(logging.WARNING, logger="node_daemon.backends.nvml")

    gpu = reading(backend, 0)
    reading(backend, 0)

    assert (gpu[m.ENERGY_J], gpu[m.POWER_W], gpu[m.TEMP_GPU_C]) == (None, None, 40.0)
    lines = nvml_warnings(caplog)
    assert len(lines) == 2
    assert sum("nvmlDeviceGetTotalEnergyConsumption" in line for line in lines) == 1
    assert sum("nvmlDeviceGetPowerUsage" in line for line in lines) == 1


def test_not_supported_is_normal_and_not_logged(
    fake_nvml: FakeNvmlState, backend: NvmlBackend, caplog: pytest.LogCaptureFixture
) -> None:
    fake_nvml.unsupported(0, "fan", "memory_temp", "energy", "throttle_reasons")
    backend.open()
    caplog.set_level(logging.DEBUG, logger="node_daemon.backends.nvml")

    gpu = reading(backend, 0)

    assert (gpu[m.FAN_PCT], gpu[m.TEMP_MEM_C], gpu[m.ENERGY_J], gpu[m.THROTTLE_REASONS]) == (
        None,
    ) * 4
    assert nvml_warnings(caplog) == []


# ---------------------------------------------------------------- lost GPUs


def test_lost_gpu_reads_lost_while_the_other_reports(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    backend.open()
    two_gpus.set_gpu(0, temp=50).set_gpu(1, temp=60)
    two_gpus.lose_gpu(0)

    lost, other = backend.read_gpus()

    assert lost.health is GpuHealth.LOST and lost[m.TEMP_GPU_C] is None
    assert other.health is GpuHealth.OK and other[m.TEMP_GPU_C] == 60.0

    two_gpus.recover_gpu(0)
    back, other = backend.read_gpus()

    assert back.health is GpuHealth.OK and back[m.TEMP_GPU_C] == 50.0
    assert other[m.TEMP_GPU_C] == 60.0


def test_gpu_lost_at_open_is_reported_and_recovers(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    two_gpus.lose_gpu(1)

    facts = backend.open()

    assert [gpu.index for gpu in facts.gpus] == [0, 1]
    assert facts.gpus[1].uuid == "" and facts.gpus[0].uuid.startswith("GPU-")
    assert [r.health for r in backend.read_gpus()] == [GpuHealth.OK, GpuHealth.LOST]

    two_gpus.recover_gpu(1)

    assert reading(backend, 1).health is GpuHealth.OK
    assert backend.open().gpus[1].uuid.startswith("GPU-")


# ---------------------------------------------------------------- Xid events


def test_xids_are_reported_exactly_once(two_gpus: FakeNvmlState, backend: NvmlBackend) -> None:
    backend.open()

    two_gpus.push_xid(1, 79)
    first = backend.read_gpus()
    second = backend.read_gpus()
    two_gpus.push_xid(1, 48).push_xid(1, 63)
    third = backend.read_gpus()

    assert [r.xids for r in first] == [(), (79,)]
    assert [r.xids for r in second] == [(), ()]
    assert [r.xids for r in third] == [(), (48, 63)]


def test_xid_on_a_lost_gpu_comes_with_the_lost_reading(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    backend.open()
    two_gpus.push_xid(0, 79).lose_gpu(0)

    gpu0 = reading(backend, 0)

    assert (gpu0.health, gpu0.xids) == (GpuHealth.LOST, (79,))


def test_unsupported_events_report_no_xids(fake_nvml: FakeNvmlState, backend: NvmlBackend) -> None:
    fake_nvml.set_gpu(0, events="unsupported")
    backend.open()
    fake_nvml.push_xid(0, 79)

    gpu = reading(backend, 0)

    assert (gpu.health, gpu.xids, gpu[m.TEMP_GPU_C]) == (GpuHealth.OK, (), 40.0)


# ---------------------------------------------------------------- processes


def test_processes_come_with_memory_and_proc_details(
    two_gpus: FakeNvmlState, backend: NvmlBackend
) -> None:
    child = subprocess.Popen(["sleep", "60"])
    try:
        before_ms = time.time() * 1000
        two_gpus.add_process(0, child.pid, 3 * GIB)
        two_gpus.add_process(0, child.pid, None, kind="graphics")  # listed twice
        two_gpus.add_process(1, os.getpid(), None)
        backend.open()

        processes = backend.read_processes()

        (sleeper,) = processes[0]
        assert (sleeper.pid, sleeper.gpu_memory_bytes) == (child.pid, 3 * GIB)
        assert sleeper.user == pwd.getpwuid(os.getuid()).pw_name
        assert sleeper.command == "sleep 60"
        assert sleeper.start_time_unix_ms is not None
        assert before_ms - 60_000 <= sleeper.start_time_unix_ms <= time.time() * 1000 + 1000
        (me,) = processes[1]
        assert (me.pid, me.gpu_memory_bytes) == (os.getpid(), None)
        assert me.command is not None and "python" in me.command
    finally:
        child.kill()
        child.wait()


def test_process_gone_from_proc_still_listed(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    fake_nvml.add_process(0, gone.pid, GIB)
    backend.open()

    (proc,) = backend.read_processes()[0]

    assert (proc.pid, proc.gpu_memory_bytes, proc.user, proc.command) == (gone.pid, GIB, None, None)


def test_lost_gpu_has_no_processes(two_gpus: FakeNvmlState, backend: NvmlBackend) -> None:
    two_gpus.add_process(0, os.getpid(), GIB).add_process(1, os.getpid(), 2 * GIB)
    backend.open()
    two_gpus.lose_gpu(0)

    processes = backend.read_processes()

    assert processes[0] == []
    assert [p.gpu_memory_bytes for p in processes[1]] == [2 * GIB]


def test_unsupported_process_listing_reads_empty(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    fake_nvml.add_process(0, os.getpid(), GIB)
    backend.open()
    assert len(backend.read_processes()[0]) == 1

    fake_nvml.unsupported(0, "processes")

    assert backend.read_processes() == {0: []}


# ---------------------------------------------------------------- driver trouble


def test_failing_init_raises_and_a_later_open_succeeds(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    fake_nvml.set(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    with pytest.raises(BackendUnavailable) as raised:
        backend.open()

    assert "Driver Not Loaded" in str(raised.value) and "nvidia-smi" in str(raised.value)
    assert fake_nvml.init_count() == 0

    fake_nvml.set(init_error=None)

    assert backend.open().gpus[0].name == "NVIDIA H100 80GB HBM3"
    assert fake_nvml.init_count() == 1


def test_driver_gone_while_reading_raises_then_reopens(
    fake_nvml: FakeNvmlState, backend: NvmlBackend
) -> None:
    backend.open()
    fake_nvml.set(query_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    with pytest.raises(BackendUnavailable, match="Driver Not Loaded"):
        backend.read_gpus()
    assert fake_nvml.init_count() == 0  # the session was shut down, for open() to retry

    fake_nvml.set(query_error=None)
    backend.open()

    assert reading(backend, 0).health is GpuHealth.OK


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "libnvidia-ml.so.1 not found"),
        (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "lsmod"),
        (pynvml.NVML_ERROR_NO_PERMISSION, "/dev/nvidia"),
        (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "reboot"),
        (pynvml.NVML_ERROR_UNKNOWN, "dmesg"),
    ],
)
def test_operator_messages_say_what_to_do(code: int, words: str) -> None:
    message = unavailable_message("nvmlInit", pynvml.NVMLError(code))

    assert words in message and "nvmlInit: " in message


def test_fake_serves_a_subprocess_through_ld_library_path(fake_nvml: FakeNvmlState) -> None:
    fake_nvml.set_gpu(0, name="NVIDIA Fake For Subprocess")
    env = dict(os.environ, LD_LIBRARY_PATH=str(fake_nvml.lib_dir), PYTHONPATH=str(REPO))
    script = "from node_daemon.backends.nvml import NvmlBackend; print(NvmlBackend().open())"

    result = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )

    assert result.returncode == 0, result.stderr
    assert "NVIDIA Fake For Subprocess" in result.stdout


def test_backend_auto_is_nvml_and_never_the_simulator(fake_nvml: FakeNvmlState) -> None:
    fake_nvml.set(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)

    backend = build_backend(DaemonConfig())  # the default backend, auto
    try:
        assert backend.kind is BackendKind.NVML
        assert fake_nvml.init_count() == 0  # opened by the sampler, which retries
        with pytest.raises(BackendUnavailable, match="Driver Not Loaded"):
            backend.open()
    finally:
        backend.close()


# ---------------------------------------------------------------- the sampler re-reads facts

UUID_1 = "GPU-00000000-0000-4000-8000-000000000001"


class CountingOpens:
    """An NvmlBackend that counts open() calls: each one re-reads every GPU's facts."""

    kind = BackendKind.NVML

    def __init__(self, backend: NvmlBackend) -> None:
        self.backend = backend
        self.opens = 0

    def open(self) -> NodeFacts:
        self.opens += 1
        return self.backend.open()

    def read_gpus(self) -> list[GpuReading]:
        return self.backend.read_gpus()

    def read_processes(self) -> dict[int, list[ProcessReading]]:
        return self.backend.read_processes()

    def close(self) -> None:
        self.backend.close()


@pytest.fixture
def sampling(backend: NvmlBackend) -> Iterator[tuple[Sampler, CountingOpens, list[BackendStatus]]]:
    """A running sampler over the fake NVML, and the statuses it published."""
    counting = CountingOpens(backend)
    sampler = Sampler(counting, SampleRing(100), interval_s=0.1, process_interval_s=0.1)
    published: list[BackendStatus] = []
    sampler.add_status_listener(published.append)
    yield sampler, counting, published
    sampler.stop()


def gpu_facts(sampler: Sampler, index: int) -> GpuStatic:
    facts = sampler.status.facts
    assert facts is not None
    return facts.gpus[index]


def sweeps_later(sampler: Sampler, count: int) -> None:
    done = sampler.sweeps + count
    wait_for(lambda: sampler.sweeps >= done, 10, f"{count} more sweeps")


def test_sampler_publishes_the_facts_of_a_gpu_lost_at_start_once_it_answers(
    two_gpus: FakeNvmlState, sampling: tuple[Sampler, CountingOpens, list[BackendStatus]]
) -> None:
    sampler, counting, published = sampling
    two_gpus.lose_gpu(1)
    sampler.start()
    wait_for(lambda: sampler.status.ok, 10, "the sampler to open NVML")
    assert gpu_facts(sampler, 1) == GpuStatic(index=1, uuid="", name="")
    sweeps_later(sampler, 3)
    assert counting.opens == 1  # no re-read while the GPU stays lost

    two_gpus.recover_gpu(1)
    wait_for(lambda: gpu_facts(sampler, 1).uuid == UUID_1, 10, "GPU 1's facts")

    assert gpu_facts(sampler, 1).name == "NVIDIA H100 80GB HBM3"
    assert gpu_facts(sampler, 1).temp_slowdown_c == 90.0
    # Listeners (the alert engine's thresholds) hear of the new facts too.
    last = published[-1]
    assert last.ok and last.facts is not None and last.facts.gpus[1].uuid == UUID_1
    sweeps_later(sampler, 3)
    assert counting.opens == 2  # read once on recovery, not on every sweep


def test_facts_still_unreadable_on_recovery_are_retried_later_not_every_sweep(
    two_gpus: FakeNvmlState,
    sampling: tuple[Sampler, CountingOpens, list[BackendStatus]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sampler, counting, _ = sampling
    two_gpus.lose_gpu(1)
    sampler.start()
    wait_for(lambda: sampler.status.ok, 10, "the sampler to open NVML")

    two_gpus.fail(1, "uuid", pynvml.NVML_ERROR_UNKNOWN)
    two_gpus.recover_gpu(1)
    wait_for(lambda: counting.opens == 2, 10, "the re-read when GPU 1 answers")
    sweeps_later(sampler, 5)

    assert counting.opens == 2
    assert gpu_facts(sampler, 1).uuid == ""  # still missing: callers can tell

    two_gpus.set_gpu(1, uuid=None)  # the UUID reads again
    monkeypatch.setattr(facts_module, "RETRY_S", 0.0)  # and the retry is due
    wait_for(lambda: gpu_facts(sampler, 1).uuid == UUID_1, 10, "GPU 1's facts on a retry")
