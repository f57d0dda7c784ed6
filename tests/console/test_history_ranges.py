"""GPU plots over ranges older than the console's ring, from real sources.

A real daemon whose on-disk history holds a day (written beforehand through
its own HistoryStore, with the ticks' times injected), and a real Prometheus
(Debian's, from .tools/) that scrapes a real daemon's /metrics and holds six
hours more, backfilled with promtool from OpenMetrics text. The console is the
real one (ConsoleSession and MainWindow): its network thread asks, its frame
pump delivers, the plots draw.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import numpy as np
import pytest

from console.connections.prometheus_range import PrometheusSource
from console.fleet.history_loader import LOADING
from console.fleet.updates import AlertLine, LinkState
from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.plots.gpu_plots import GpuPlots
from console.views.plots.plot_thresholds import thresholds
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import POWER_W, TEMP_GPU_C, UTIL_GPU_PCT
from node_daemon.alerts.rules import AlertSettings, ThresholdSettings
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.history.settings import HistorySettings
from node_daemon.history.store import HISTORY_FILE, HistoryStore
from tests.conftest import DaemonFactory, wait_for
from tests.prometheus import scraping_prometheus
from tests.tools import require_tool

HOUR = 3600.0
DAY = 24 * HOUR
# The written history stops this long before now: the plots show a gap up to the ring.
HISTORY_ENDS_AGO_S = 1200.0
WAIT_MS = 20_000


def write_history(state_dir: Path, hours: float, every_s: float, gpus: int = 2) -> float:
    """A simulated node's ticks, one every `every_s`, ending HISTORY_ENDS_AGO_S ago,
    through the daemon's own store (injected times). Returns the last tick's time."""
    backend = SimulatedBackend(gpu_count=gpus, seed=5, model="h100")
    backend.open()
    store = HistoryStore(state_dir / HISTORY_FILE, HistorySettings(), raw_step_ms=1000)
    end_ms = int((time.time() - HISTORY_ENDS_AGO_S) * 1000)
    ticks = int(hours * HOUR / every_s)
    first_ms = end_ms - ticks * int(every_s * 1000)
    for tick in range(ticks + 1):
        store.append(first_ms + tick * int(every_s * 1000), backend.advance(every_s))
        if tick % 200 == 199:
            store.flush()
    store.close()
    return end_ms / 1000.0


@dataclass
class Console:
    session: ConsoleSession
    window: MainWindow
    target: str

    @property
    def plots(self) -> GpuPlots:
        return self.window.detail.plots

    def open_gpu(self, qtbot, gpu: int) -> None:
        fleet = self.session.fleet
        qtbot.waitUntil(
            lambda: (
                fleet.node(self.target).state is LinkState.CONNECTED
                and fleet.node(self.target).ring is not None
                and len(fleet.node(self.target).ring) > 0
            ),
            timeout=WAIT_MS,
        )
        self.window.grid.select(self.target, gpu)


@pytest.fixture
def open_console(qtbot) -> Iterator:
    opened: list[ConsoleSession] = []

    def open_(target: str, prometheus: PrometheusSource | None = None) -> Console:
        session = ConsoleSession([target], prometheus=prometheus)
        window = MainWindow(session)
        qtbot.addWidget(window)
        window.resize(1400, 900)
        window.show()
        session.start()
        opened.append(session)
        return Console(session, window, target)

    yield open_
    for session in opened:
        session.stop()


def drawn(plots: GpuPlots, metric=TEMP_GPU_C) -> tuple[np.ndarray, np.ndarray]:
    """The finite points a plot holds now: (times, values)."""
    times, values = plots.curves[metric].getOriginalDataset()
    if times is None or values is None:
        return np.empty(0), np.empty(0)
    times, values = np.asarray(times), np.asarray(values)
    keep = np.isfinite(values)
    return times[keep], values[keep]


def ring_first(console: Console) -> float:
    ring = console.session.fleet.node(console.target).ring
    assert ring is not None
    return float(ring.times()[0])


# -- the daemon's own history --------------------------------------------------------


@pytest.fixture
def day_daemon(start_daemon: DaemonFactory, tmp_path: Path) -> tuple[str, float]:
    state = tmp_path / "state"
    last_s = write_history(state, hours=25, every_s=20.0)  # 3 ticks a minute: a peak
    daemon = start_daemon(gpus=2, seed=5, state_dir=state, hostname="node-h")
    return str(daemon.address), last_s


@pytest.mark.slow
@pytest.mark.parametrize("span", [6 * HOUR, DAY])
def test_a_long_range_shows_the_daemons_history_before_the_ring(
    qtbot, open_console, day_daemon, span: float
) -> None:
    target, written_until = day_daemon
    console = open_console(target)
    console.open_gpu(qtbot, 0)
    plots = console.plots
    plots.choose_span(span)
    # The GUI thread did not wait: the range is chosen, the data is on its way.
    assert plots.history_note == LOADING
    assert console.window.detail_part.plot_history.loader.pending == 1
    start = time.time() - span

    def reaches_back() -> bool:
        times, _ = drawn(plots)
        return len(times) > 0 and times[0] < start + 0.1 * span

    qtbot.waitUntil(reaches_back, timeout=WAIT_MS)
    times, values = drawn(plots)
    older = times < ring_first(console)
    assert older.sum() > 100  # minutes of steps from the day written, not a point or two
    assert np.all((values[older] > 10) & (values[older] < 110))  # °C, as the simulator runs
    assert len(np.unique(times)) == len(times)  # no point twice
    assert plots.history_note == "1 min steps from node-h's history"
    assert plots.note.isVisible() and plots.note.textItem.toPlainText() == plots.history_note
    # The gap between the written history's end and the ring: no line across it (its
    # last 1 min step is stamped with the step's start, up to a minute before the end).
    raw_times, raw_values = plots.curves[TEMP_GPU_C].getOriginalDataset()
    between = (raw_times > written_until - 60) & (raw_times < ring_first(console))
    assert np.isnan(np.asarray(raw_values)[between]).any()
    # The peak line: the fetched part's maxima, at or above the means.
    peak_times, peaks = plots.peaks[TEMP_GPU_C].getOriginalDataset()
    assert peak_times is not None and len(peak_times) > 100
    assert np.nanmax(peaks) >= np.nanmax(values[older])


@pytest.mark.slow
def test_the_nodes_own_alert_lines_are_drawn(qtbot, open_console, start_daemon) -> None:
    moved = AlertSettings(gpu_temp=ThresholdSettings(warning=70.0, critical=92.0))
    daemon = start_daemon(gpus=2, seed=5, hostname="node-t", alerts=moved)
    console = open_console(str(daemon.address))
    console.open_gpu(qtbot, 0)
    plots = console.plots
    # The node's gpu_temp lines (its TOML's), not the default rule's 75 and 85.
    qtbot.waitUntil(
        lambda: sorted(line.value() for line in plots.threshold_lines[TEMP_GPU_C]) == [70, 92],
        timeout=WAIT_MS,
    )
    title = plots.plot_item(TEMP_GPU_C).titleLabel.item.toPlainText()
    assert "warning 70" in title and "critical 92" in title
    # Memory temperature is not plotted; power has no line (its limit is per GPU).
    assert set(plots.threshold_lines) == {TEMP_GPU_C}


def test_lines_fall_back_to_the_default_rule_only_for_a_node_that_sends_none() -> None:
    node = (AlertLine(TEMP_GPU_C.field, "gpu_temp", Severity.CRITICAL, 88.0),)
    assert [(t.name, t.value) for t in thresholds(TEMP_GPU_C)] == [
        ("warning", 75),
        ("critical", 85),
    ]
    assert [(t.name, t.value) for t in thresholds(TEMP_GPU_C, node)] == [("critical", 88.0)]
    assert thresholds(UTIL_GPU_PCT, node) == ()  # the node draws none there


# -- Prometheus ----------------------------------------------------------------------


@dataclass(frozen=True)
class Backfill:
    values: dict[int, float]  # temperature per GPU index in the backfilled hours
    start_s: float
    end_s: float


def openmetrics(uuids: dict[int, str], backfill: Backfill, every_s: float) -> str:
    """dcgm-exporter's series for the node's GPUs, as the daemon's /metrics names them."""
    families = {TEMP_GPU_C: None, UTIL_GPU_PCT: 50.0, POWER_W: 300.0}
    lines = []
    stamps = np.arange(backfill.start_s, backfill.end_s, every_s)
    for metric, fixed in families.items():
        assert metric.dcgm is not None
        lines.append(f"# TYPE {metric.dcgm.name} gauge")
        for gpu, uuid in uuids.items():
            value = backfill.values[gpu] if fixed is None else fixed
            labels = f'gpu="{gpu}",UUID="{uuid}",Hostname="node-p"'
            lines += [f"{metric.dcgm.name}{{{labels}}} {value} {t:.0f}" for t in stamps]
    return "\n".join([*lines, "# EOF", ""])


def _scraped(url: str) -> bool:
    # Five scrapes: the finest step asked below (2 s) has a point after the first of them.
    expr = 'count_over_time(DCGM_FI_DEV_GPU_TEMP{job="gpufleet",gpu="1"}[1m]) >= 5'
    query = urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=5) as response:
        return bool(json.loads(response.read())["data"]["result"])


@pytest.fixture
def prometheus_node(
    start_daemon: DaemonFactory, tmp_path: Path
) -> Iterator[tuple[str, str, Backfill]]:
    """A daemon without on-disk history, scraped each second by a real Prometheus that
    also holds six backfilled hours of its GPUs (GPU 0 at 41 °C, GPU 1 at 77 °C)."""
    binary = require_tool("prometheus", "prometheus", "plots from a real Prometheus")
    promtool = require_tool("promtool", "prometheus", "backfilling a real Prometheus")
    daemon = start_daemon(gpus=2, seed=5, hostname="node-p", metrics_listen="127.0.0.1:0",
                          history=HistorySettings(enabled=False))  # fmt: skip
    assert daemon.metrics is not None
    stub = pb_grpc.NodeServiceStub(grpc.insecure_channel(str(daemon.address)))
    inventory = stub.GetInventory(pb.GetInventoryRequest(), timeout=5)
    uuids = {g.index: g.uuid for g in inventory.gpus}
    now = time.time()
    backfill = Backfill({0: 41.0, 1: 77.0}, now - 6 * HOUR - 600, now - HISTORY_ENDS_AGO_S)
    source = tmp_path / "backfill.om"
    source.write_text(openmetrics(uuids, backfill, every_s=15.0))
    tsdb = tmp_path / "tsdb"
    subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(tsdb)],
                   check=True, capture_output=True)  # fmt: skip
    target = f"127.0.0.1:{daemon.metrics.server.port}"
    with scraping_prometheus(binary, target, tmp_path, tsdb) as url:
        wait_for(lambda: _scraped(url), 30, "Prometheus to scrape the daemon")
        yield str(daemon.address), url, backfill


@pytest.mark.slow
def test_prometheus_ranges_reach_the_plots_and_a_stale_answer_is_dropped(
    qtbot, open_console, prometheus_node
) -> None:
    target, url, backfill = prometheus_node
    console = open_console(target, PrometheusSource(url))
    console.open_gpu(qtbot, 0)
    plots, loader = console.plots, console.window.detail_part.plot_history.loader
    plots.choose_span(6 * HOUR)
    assert plots.history_note == LOADING  # asked, not waited for
    # Before the answer can be taken (only the frame pump hands answers over, on this
    # thread), another GPU: GPU 0's ask is cancelled, its answer must never be drawn.
    console.window.grid.select(target, 1)
    assert loader.pending == 1
    older_values: list[float] = []

    def gpu1_history_drawn() -> bool:
        times, values = drawn(plots)
        older = values[times < backfill.end_s]
        older_values.extend(older.tolist())
        return len(older) > 100

    qtbot.waitUntil(gpu1_history_drawn, timeout=WAIT_MS)
    assert set(older_values) == {77.0}  # GPU 1's backfill only: GPU 0's 41 never shown
    assert plots.history_note == "15 s steps from Prometheus"
    assert any(t.name.startswith("gpufleet-prometheus") for t in threading.enumerate())

    # A shorter range is asked again, finer; what Prometheus scraped from the daemon's
    # /metrics (since the fixture saw its first scrape) reaches the plot model too.
    plots.choose_span(HOUR)
    ring = console.session.fleet.node(target).ring
    assert ring is not None

    def scraped() -> bool:
        held, note = console.window.detail_part.plot_history.slice_for(
            ring, 1, time.time() - HOUR, time.time()
        )
        if held is None or note != "2 s steps from Prometheus":
            return False
        recent = held.times > backfill.end_s + 60
        return bool(np.isfinite(held.means[TEMP_GPU_C.field][recent]).any())

    qtbot.waitUntil(scraped, timeout=WAIT_MS)
