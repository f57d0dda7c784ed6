"""Adaptive sampling (#31): a GPU near a temperature line is looked at between sweeps,
and a look across a line sweeps at once, so the rule judges the crossing then rather
than at the next tick; far from every line nothing is looked at.

The choice of GPUs (Pace) without a backend; the sampler and the daemon over the real
nvidia-ml-py ctypes path against the fake libnvidia-ml.so.1, its temperatures changed
through its state file as a GPU's would change. The sweeps' interval is long (30 s), so
a sweep before it can only be one a look asked for.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from node_daemon.backends.nvml import NvmlBackend
from node_daemon.backends.readings import GpuReading
from node_daemon.config import DaemonConfig, load_config_file
from node_daemon.errors import ConfigError
from node_daemon.sampling.pace import Pace, PaceSettings, Watched
from node_daemon.sampling.sample_ring import SampleRing
from node_daemon.sampling.sampler import Sampler
from tests.conftest import wait_for
from tests.fake_nvml.fixture import FakeNvmlState
from tests.tools import free_port

LINES = ((75.0, 85.0), (85.0, 95.0))  # the default gpu_temp and memory_temp lines


def reading(index: int, gpu_c: float | None, memory_c: float | None = None) -> GpuReading:
    return GpuReading(index=index, temp_gpu_c=gpu_c, temp_mem_c=memory_c)


def pace(**settings: float) -> Pace:
    return Pace(PaceSettings(**settings), lambda _index: LINES)


# Which GPUs are watched --------------------------------------------------------------


def test_gpus_near_a_line_or_heading_to_one_are_watched_and_the_others_not() -> None:
    now = [
        reading(0, 40.0, 50.0),  # far from every line
        reading(1, 81.0),  # within 5 °C of 85
        reading(2, 64.0),  # heading up at 4 °C/s: past 75 within 3 s
        reading(3, 60.0, 91.0),  # its memory within 5 °C of 95
        reading(4, None, None),  # nothing read
        reading(5, 66.0),  # cooling, away from the lines
    ]
    before = {0: reading(0, 40.0), 2: reading(2, 60.0), 5: reading(5, 69.0)}
    watched = pace().watch(now, before, elapsed_s=1.0)
    assert [w.index for w in watched] == [1, 2, 3]
    assert watched[0] == Watched(1, LINES[0], LINES[1], 81.0, None)


def test_nothing_is_watched_when_it_is_off_or_no_line_is_on() -> None:
    near = [reading(0, 84.0)]
    assert pace(fast_interval_s=0).watch(near, {}, 1.0) == []
    off = Pace(PaceSettings(), lambda _index: ((), ()))
    assert off.watch(near, {}, 1.0) == []


def test_a_look_across_a_line_either_way_is_a_crossing_and_one_short_of_it_is_not() -> None:
    watched = Watched(0, LINES[0], LINES[1], 83.0, 90.0)
    assert watched.crossed((85.0, 90.0))  # up to the critical line
    assert watched.crossed((83.0, 95.5))  # the memory past its critical line
    assert not watched.crossed((84.9, 94.9))
    assert not watched.crossed((None, None))  # unread: no judgement
    cooling = Watched(0, LINES[0], LINES[1], 86.0, None)
    assert cooling.crossed((84.0, None))  # back under the line: the rule may clear


# The sampler over NVML -----------------------------------------------------------------


def temperatures(sampler: Sampler) -> list[float | None]:
    latest = sampler.latest
    assert latest is not None
    return [r[TEMP_GPU_C] for r in latest.readings]


@contextmanager
def sampling(nvml: FakeNvmlState, temps: tuple[int, int], interval_s: float) -> Iterator[Sampler]:
    """A sampler over NVML (two GPUs at `temps`) that looks every 20 ms, started."""
    nvml.set(gpu_count=2).set_gpu(0, temp=temps[0]).set_gpu(1, temp=temps[1])
    sampler = Sampler(NvmlBackend(), SampleRing(64), interval_s, process_interval_s=interval_s)
    sampler.set_pace(pace(fast_interval_s=0.02))
    try:
        sampler.start()
        yield sampler
    finally:
        sampler.stop()


def test_looks_find_the_crossing_and_the_sweep_follows_at_once(fake_nvml: FakeNvmlState) -> None:
    with sampling(fake_nvml, (82, 40), interval_s=30.0) as sampler:
        wait_for(lambda: sampler.sweeps >= 1, 10, "the first sweep")
        assert temperatures(sampler) == [82.0, 40.0]
        wait_for(lambda: sampler.looks >= 3, 10, "looks at GPU 0, 3 °C under the line")
        assert sampler.sweeps == 1  # looking is not sweeping
        fake_nvml.push_xid(0, 79)
        fake_nvml.set_gpu(0, temp=86)
        wait_for(lambda: sampler.sweeps == 2, 10, "the sweep the crossing asked for")
        assert sampler.early_sweeps == 1 and temperatures(sampler) == [86.0, 40.0]
        latest = sampler.latest
        assert latest is not None and latest.readings[0].xids == (79,)  # no look took it
        # Now over the line and still near it: watched, and back under it sweeps again.
        fake_nvml.set_gpu(0, temp=80)
        wait_for(lambda: sampler.sweeps == 3, 10, "the sweep of the way back")
        assert sampler.early_sweeps == 2 and temperatures(sampler) == [80.0, 40.0]


def test_far_from_every_line_nothing_is_looked_at(fake_nvml: FakeNvmlState) -> None:
    with sampling(fake_nvml, (40, 45), interval_s=0.1) as sampler:
        wait_for(lambda: sampler.sweeps >= 10, 20, "ten sweeps")
        assert sampler.looks == 0 and sampler.early_sweeps == 0


# The daemon ---------------------------------------------------------------------------


def test_fast_sample_keys_are_checked(tmp_path: Path) -> None:
    config = tmp_path / "daemon.toml"
    config.write_text("[daemon]\nfast_sample_interval_s = 0.05\nfast_sample_margin_c = 2\n")
    loaded = load_config_file(config, DaemonConfig())
    assert loaded.pace == PaceSettings(0.05, 2.0, 3.0)
    for bad, says in (
        ("fast_sample_interval_s = 0.001", "fast_sample_interval_s"),
        ("fast_sample_interval_s = 5.0", "sample_interval_s"),  # over the tick
        ("fast_sample_margin_c = -1", "fast_sample_margin_c"),
        ("fast_sample_lookahead_s = 600", "fast_sample_lookahead_s"),
        ('fast_sample_interval_s = "fast"', "must be"),
    ):
        config.write_text(f"[daemon]\n{bad}\n")
        with pytest.raises(ConfigError, match=says):
            from node_daemon.config import validate

            validate(load_config_file(config, DaemonConfig()))


def test_the_daemon_raises_a_crossing_before_its_next_tick(
    fake_nvml: FakeNvmlState, tmp_path: Path
) -> None:
    """The daemon sweeps every 30 s; a GPU at 83 °C goes to 88 °C: the critical alert
    is raised by the sweep the look asked for, long before the next tick."""
    fake_nvml.set(gpu_count=1).set_gpu(0, temp=83)
    config = tmp_path / "daemon.toml"
    metrics_port = free_port()
    config.write_text("[daemon]\nsample_interval_s = 30\nprocess_interval_s = 30\n"
                      "fast_sample_interval_s = 0.05\n"
                      f'metrics_listen = "127.0.0.1:{metrics_port}"\n')  # fmt: skip
    ready = tmp_path / "ready"
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake_nvml.lib_dir),
           "FAKE_NVML_STATE": str(fake_nvml.path)}  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "node_daemon", "daemon", "--backend", "nvml",
         "--config", str(config), "--listen", "127.0.0.1:0", "--ready-file", str(ready),
         "--state-dir", str(tmp_path / "state")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for(ready.exists, 30, "the daemon's ready file")
        with grpc.insecure_channel(ready.read_text().strip()) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            stream = stub.StreamSamples(pb.StreamSamplesRequest(since_unix_ms=0), timeout=25)
            first = next(stream)
            assert first.gpus[0].index == 0
            fake_nvml.set_gpu(0, temp=88)
            crossing = next(stream)  # the next sweep: asked for by a look, not the tick
            assert crossing.timestamp_unix_ms - first.timestamp_unix_ms < 20_000
            alerts = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).alerts
            assert any(a.rule == "gpu_temp" and a.severity == pb.SEVERITY_CRITICAL
                       for a in alerts), alerts  # fmt: skip
            stream.cancel()
        url = f"http://127.0.0.1:{metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as reply:
            metrics = reply.read().decode()
        assert "gpufleet_sampler_early_sweeps_total 1.0" in metrics
        looks = next(line for line in metrics.splitlines()
                     if line.startswith("gpufleet_sampler_looks_total "))  # fmt: skip
        assert float(looks.split()[1]) >= 1
    finally:
        os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.communicate(timeout=15)
        finally:
            proc.kill()
