"""/metrics: dcgm-exporter names for Grafana, gpufleet_* for promtool, real Prometheus."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.backends.readings import GpuHealth, GpuReading, GpuStatic
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.metrics.dcgm import DcgmLabels, render
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.prometheus import scraping_prometheus
from tests.small_disk import small_disk
from tests.tools import require_tool

H100 = GpuStatic(0, "GPU-aaa", "NVIDIA H100 80GB HBM3", pci_bus_id="00000000:18:00.0")
L40S = GpuStatic(1, "GPU-bbb", "NVIDIA L40S", pci_bus_id="00000000:28:00.0")


def test_dcgm_family_names_units_and_labels() -> None:
    readings = [
        GpuReading(0, temp_gpu_c=61.0, power_w=512.5, mem_used_bytes=2 * 1024**3,
                   mem_total_bytes=80 * 1024**3, energy_j=12.5, ecc_uncorrected_total=0),
        GpuReading(1, temp_gpu_c=40.0, fan_pct=35.0),
    ]  # fmt: skip
    text = render(readings, {0: H100, 1: L40S}, {1: 79}, DcgmLabels("node-1", "Hostname", "550.54"))
    labels = (
        'gpu="0",UUID="GPU-aaa",pci_bus_id="00000000:18:00.0",device="nvidia0",'
        'modelName="NVIDIA H100 80GB HBM3",Hostname="node-1",'
        'DCGM_FI_DRIVER_VERSION="550.54"'
    )
    assert f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 61" in text
    assert f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} 512.5" in text
    assert f"DCGM_FI_DEV_FB_USED{{{labels}}} 2048" in text  # MiB, as dcgm-exporter
    assert f"DCGM_FI_DEV_FB_FREE{{{labels}}} 79872" in text
    assert f"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} 12500" in text  # mJ
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter" in text
    assert 'DCGM_FI_DEV_XID_ERRORS{gpu="1"' in text and text.count("DCGM_FI_DEV_XID_ERRORS{") == 1
    # Unknown values are left out, never a sentinel: no fan on the H100.
    assert 'DCGM_FI_DEV_FAN_SPEED{gpu="0"' not in text and 'DCGM_FI_DEV_FAN_SPEED{gpu="1"' in text


def test_lost_gpu_has_no_dcgm_lines_and_newer_hostname_label() -> None:
    readings = [GpuReading(0, temp_gpu_c=50.0), GpuReading(1, health=GpuHealth.LOST)]
    text = render(readings, {0: H100, 1: L40S}, {}, DcgmLabels('we"ird', "hostname"))
    assert 'gpu="1"' not in text
    assert 'hostname="we\\"ird"' in text


@pytest.fixture
def metrics_daemon(start_daemon: DaemonFactory) -> NodeDaemon:
    scenario = Scenario((ScenarioEvent(0.2, 3, "lost"),))
    daemon = start_daemon(backend=SimulatedBackend(gpu_count=4, scenario=scenario, step_s=0.1),
                          metrics_listen="127.0.0.1:0", hostname="gpu-node-07")  # fmt: skip
    wait_for(lambda: daemon.sampler.latest is not None and daemon.sampler.sweeps > 3)
    return daemon


def scrape(daemon: NodeDaemon) -> str:
    assert daemon.metrics is not None
    url = f"http://127.0.0.1:{daemon.metrics.server.port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        return response.read().decode()


def native_part(text: str) -> str:
    return "".join(line + "\n" for line in text.splitlines() if "gpufleet_" in line)


def test_endpoint_serves_both_families(metrics_daemon: NodeDaemon) -> None:
    text = scrape(metrics_daemon)
    assert text.count("DCGM_FI_DEV_GPU_TEMP{") == 3  # GPU 3 is lost: no line
    assert 'Hostname="gpu-node-07"' in text
    assert 'gpufleet_gpu_lost{UUID="' in text and 'gpu="3"} 1.0' in text
    assert 'gpufleet_backend_up{backend="simulated"} 1.0' in text
    assert 'gpufleet_alerts_firing{severity="critical"} 1.0' in text  # the lost GPU
    assert "gpufleet_sweeps_total" in text and "gpufleet_build_info{" in text
    # The simulated backend cannot look between sweeps (adaptive sampling is NVML's).
    assert "gpufleet_sampler_looks_total 0.0" in text
    assert "gpufleet_sampler_early_sweeps_total 0.0" in text


def test_promtool_accepts_the_native_family(metrics_daemon: NodeDaemon) -> None:
    promtool = require_tool("promtool", "prometheus", "promtool check metrics")
    native = native_part(scrape(metrics_daemon))
    result = subprocess.run(
        [promtool, "check", "metrics"], input=native, capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


def writable(daemon: NodeDaemon) -> float:
    """gpufleet_journal_writable's value, scraped."""
    prefix = "gpufleet_journal_writable "
    return float(next(x for x in scrape(daemon).splitlines() if x.startswith(prefix)).split()[1])


def try_reserve(stub: pb_grpc.NodeServiceStub) -> grpc.StatusCode | None:
    """None when a reservation (a change: audit log and journal) was kept."""
    until = int((time.time() + 3600) * 1000)
    try:
        stub.Reserve(pb.ReserveRequest(gpu_indices=[0], holder="alice", until_unix_ms=until),
                     timeout=5)  # fmt: skip
    except grpc.RpcError as exc:
        return exc.code()
    return None


def test_journal_writable_follows_a_state_disk_filling_up_and_freed(
    start_daemon: DaemonFactory,
) -> None:
    """The disk fills while the daemon runs: the change refused sets 0 (it stayed 1,
    #28) and raises the state_disk alert (it stayed quiet: the audit log's write
    fails first, and the journal is never written), the first change kept once
    there is room sets 1 again."""
    with small_disk() as disk:
        daemon = start_daemon(state_dir=disk.path, metrics_listen="127.0.0.1:0")
        with grpc.insecure_channel(str(daemon.address)) as channel:
            stub = pb_grpc.NodeServiceStub(channel)
            assert writable(daemon) == 1.0
            disk.fill()
            assert try_reserve(stub) == grpc.StatusCode.UNAVAILABLE
            assert writable(daemon) == 0.0
            wait_for(lambda: state_disk_alert(stub) is not None, 15, "the state_disk alert")
            disk.free()
            wait_for(lambda: try_reserve(stub) is None, 15, "a change kept once there is room")
            assert writable(daemon) == 1.0
        daemon.stop(grace_s=0.5)


def state_disk_alert(stub: pb_grpc.NodeServiceStub) -> pb.Alert | None:
    listed = stub.ListAlerts(pb.ListAlertsRequest(), timeout=5).alerts
    return next((a for a in listed if a.rule == "state_disk"), None)


class Prometheus:
    def __init__(self, url: str) -> None:
        self.url = url

    def query(self, expr: str) -> list[dict]:
        url = f"{self.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]["result"]


@pytest.fixture
def prometheus(tmp_path: Path, metrics_daemon: NodeDaemon) -> Iterator[Prometheus]:
    binary = require_tool("prometheus", "prometheus", "scraping by a real Prometheus")
    assert metrics_daemon.metrics is not None
    target = f"127.0.0.1:{metrics_daemon.metrics.server.port}"
    with scraping_prometheus(binary, target, tmp_path) as url:
        yield Prometheus(url)


# The panels of NVIDIA's DCGM Exporter dashboard (Grafana 12239), as it queries them.
DASHBOARD = {
    "GPU Temperature": 'DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"}',
    "GPU Avg. Temp": 'avg(DCGM_FI_DEV_GPU_TEMP{instance=~"$instance", gpu=~"$gpu"})',
    "GPU Power Usage": 'DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"}',
    "GPU Power Total": 'sum(DCGM_FI_DEV_POWER_USAGE{instance=~"$instance", gpu=~"$gpu"})',
    "GPU SM Clocks": 'DCGM_FI_DEV_SM_CLOCK{instance=~"$instance", gpu=~"$gpu"} * 1000000',
    "GPU Utilization": 'DCGM_FI_DEV_GPU_UTIL{instance=~"$instance", gpu=~"$gpu"}',
    "GPU Framebuffer Mem Used": 'DCGM_FI_DEV_FB_USED{instance=~"$instance", gpu=~"$gpu"}',
}


@pytest.mark.slow
def test_real_prometheus_answers_the_dcgm_dashboard(prometheus: Prometheus, metrics_daemon) -> None:
    instance = f"127.0.0.1:{metrics_daemon.metrics.server.port}"
    wait_for(lambda: prometheus.query("DCGM_FI_DEV_GPU_TEMP"), 30, "the first scrape")
    for title, expr in DASHBOARD.items():
        expr = expr.replace("$instance", instance).replace("$gpu", ".*")
        result = prometheus.query(expr)
        assert result, f"panel {title!r} has no data"
        if not title.startswith(("GPU Avg", "GPU Power Total")):
            assert {r["metric"]["gpu"] for r in result} == {"0", "1", "2"}, title
        else:  # one series: the average, or the sum, over the 3 GPUs
            assert len(result) == 1 and float(result[0]["value"][1]) > 0, (title, result)
    # Energy is a counter: rate() over two scrapes gives the power in mJ/s.
    wait_for(lambda: prometheus.query("rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION[5s]) > 0"), 30)
    lost = prometheus.query("gpufleet_gpu_lost == 1")
    assert [r["metric"]["gpu"] for r in lost] == ["3"]


def test_the_fault_record_scores_a_lost_gpu_and_survives_a_restart(
    start_daemon: DaemonFactory, tmp_path: Path
) -> None:
    """GPU 3 falls off the bus: its record has the incident and its score on /metrics
    drops by the state it calls for (needs reboot: 25); a daemon started again on the
    same state directory (the GPU answering again) still scores it so."""
    state = tmp_path / "state"
    scenario = Scenario((ScenarioEvent(0.2, 3, "lost"),))
    first = start_daemon(backend=SimulatedBackend(gpu_count=4, scenario=scenario, step_s=0.1),
                         metrics_listen="127.0.0.1:0", state_dir=state)  # fmt: skip
    wait_for(lambda: bool((record := first.faults.of_gpu(3)) and record.incidents))
    text = scrape(first)
    uuid = first.faults.of_gpu(3).uuid  # type: ignore[union-attr]
    assert f'gpufleet_gpu_reliability_score{{UUID="{uuid}",gpu="3"}} 75.0' in text
    assert f'gpufleet_gpu_fault_incidents{{UUID="{uuid}",gpu="3",kind="gpu_lost"}} 1.0' in text
    scores = [line for line in text.splitlines()
              if line.startswith("gpufleet_gpu_reliability_score{")]  # fmt: skip
    assert len(scores) == 4 and sum(s.endswith(" 100.0") for s in scores) == 3  # none on record
    first.stop(grace_s=0.5)
    again = start_daemon(backend=SimulatedBackend(gpu_count=4, step_s=0.1),
                         metrics_listen="127.0.0.1:0", state_dir=state)  # fmt: skip
    wait_for(lambda: again.sampler.sweeps > 3)
    record = again.faults.of_gpu(3)
    assert record is not None and record.uuid == uuid
    assert [i.kind for i in record.incidents] == ["gpu_lost"]
    assert record.incidents[0].ended  # it answers again: the spell is over, on record
    assert f'gpufleet_gpu_reliability_score{{UUID="{uuid}",gpu="3"}} 75.0' in scrape(again)
