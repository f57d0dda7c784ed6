"""Benchmark: "a 24 h plot range loads in < 1 s" — from choosing 24 h to the curves drawn.

    python bench/history_range_load.py                 # a day of an 8-GPU node, daemon + Prometheus
    python bench/history_range_load.py --no-prometheus
    python bench/history_range_load.py --smoke         # 6 h, 2 GPUs: does it run?

The daemon: a real `python -m node_daemon daemon` process whose on-disk history
holds a day, written beforehand through its own HistoryStore with injected time
(a tick every `--every-s`, 10 s by default: the 1 min tier that answers a 24 h
range is then exactly as full as at 1 s; the raw hour is sparser, and no 24 h
query reads it). Prometheus (Debian's, unpacked into .tools/ by dev-setup):
a second daemon without history, scraped each second, and a day of its GPUs'
dcgm-exporter series at 15 s backfilled with promtool.

The console is the real one, offscreen (ConsoleSession and MainWindow): for
each GPU in turn (never asked before, so nothing is cached) it selects it,
lets the default 15 min range settle, then times `choose_span(24 h)` to the
moment the answer is drawn and painted (PlotHistory.arrived, the plots'
setData, a synchronous repaint of the plots). The answer comes through the
frame pump (20 fps), as it does for a person. Then once more from the cache
(a GPU seen before). A 5 ms heartbeat on the GUI thread says the longest it
could not react during the loads: the fetch runs on the network thread.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "protos"), str(REPO_ROOT / "bench")]
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import grpc  # noqa: E402
import numpy as np  # noqa: E402
from gui_probes import Heartbeat, wait_until  # noqa: E402
from results import stats_ms  # noqa: E402
from rpc_transport_procs import TreeDaemon, trees  # noqa: E402

from console.app import qt_application  # noqa: E402
from console.connections.prometheus_range import PrometheusSource  # noqa: E402
from console.fleet.updates import LinkState  # noqa: E402
from console.main_window import MainWindow  # noqa: E402
from console.session import ConsoleSession  # noqa: E402
from gpufleet.v1 import node_pb2 as pb  # noqa: E402
from gpufleet.v1 import node_pb2_grpc as pb_grpc  # noqa: E402
from gpufleet.v1.gpu_metrics import MEM_USED_BYTES, POWER_W, TEMP_GPU_C, UTIL_GPU_PCT  # noqa: E402
from node_daemon.backends.simulated import SimulatedBackend  # noqa: E402
from node_daemon.history.settings import HistorySettings  # noqa: E402
from node_daemon.history.store import HISTORY_FILE, HistoryStore  # noqa: E402
from tests.prometheus import scraping_prometheus  # noqa: E402
from tests.tools import free_port  # noqa: E402

TOOLS = REPO_ROOT / ".tools" / "root" / "usr" / "bin"
DAY = 86400.0
SEED = 5


def write_day(state: Path, hours: float, every_s: float, gpus: int) -> None:
    backend = SimulatedBackend(gpu_count=gpus, seed=SEED, model="h100")
    backend.open()
    store = HistoryStore(state / HISTORY_FILE, HistorySettings(), raw_step_ms=1000)
    step_ms = int(every_s * 1000)
    end_ms = int((time.time() - 60) * 1000)
    ticks = int(hours * 3600 / every_s)
    for tick in range(ticks + 1):
        store.append(end_ms - (ticks - tick) * step_ms, backend.advance(every_s))
        if tick % 500 == 499:
            store.flush()
    store.close()


def open_console(
    target: str, prometheus: PrometheusSource | None
) -> tuple[ConsoleSession, MainWindow]:
    session = ConsoleSession([target], prometheus=prometheus)
    window = MainWindow(session)
    window.resize(1600, 900)
    window.show()
    session.start()
    node = session.fleet.node(target)
    ready = wait_until(lambda: node.state is LinkState.CONNECTED and node.ring is not None
                       and len(node.ring) > 0, 30)  # fmt: skip
    if not ready:
        raise SystemExit(f"the console did not connect to {target}")
    return session, window


def load_once(
    window: MainWindow, target: str, gpu: int, span_s: float, heartbeat: Heartbeat
) -> tuple[float, float, float]:
    """Seconds from choosing `span_s` on `gpu` to its history drawn and painted, the
    GUI thread's longest stall meanwhile, and its CPU seconds (with the 1 ms polling)."""
    plots, history = window.detail.plots, window.detail_part.plot_history
    window.grid.select(target, gpu)
    plots.choose_span(900.0)
    wait_until(lambda: history.loader.pending == 0, 30, poll_ms=5)  # the default range settled
    done: list[float] = []

    def on_arrived() -> None:
        plots.viewport().repaint()  # painted now, not at the next paint event
        done.append(time.perf_counter())

    history.arrived.connect(on_arrived)
    heartbeat.start()
    cpu = time.thread_time()
    started = time.perf_counter()
    plots.choose_span(span_s)
    if history.loader.pending == 0:  # answered from the cache, drawn in choose_span
        plots.viewport().repaint()
        done.append(time.perf_counter())
    wait_until(lambda: bool(done), 30, poll_ms=1)
    cpu = time.thread_time() - cpu
    heartbeat.stop()
    history.arrived.disconnect(on_arrived)
    if not done:
        raise SystemExit(f"GPU {gpu}: no answer for {span_s:.0f} s within 30 s")
    times, _ = plots.curves[TEMP_GPU_C].getOriginalDataset()
    if times is None or times[0] > time.time() - 0.9 * span_s:
        raise SystemExit(
            f"GPU {gpu}: the plot does not reach back {span_s:.0f} s ({plots.history_note})"
        )
    return done[0] - started, max(heartbeat.stalls_s(), default=0.0), cpu


def measure(window: MainWindow, target: str, gpus: int, span_s: float) -> dict[str, object]:
    heartbeat = Heartbeat()
    cold = [load_once(window, target, gpu, span_s, heartbeat) for gpu in range(gpus)]
    cached = load_once(window, target, gpus - 1, span_s, heartbeat)
    return {
        "note": window.detail.plots.history_note,
        "cold_ms": stats_ms([took for took, _, _ in cold]),
        "cached_ms": round(cached[0] * 1000, 2),
        # The longest the GUI thread could not react between choosing and drawn, and
        # what it spent: a stall longer than its CPU is the machine's, not the GUI's work.
        "gui_stall_max_ms": round(max(s for _, s, _ in [*cold, cached]) * 1000, 2),
        "gui_cpu_ms": stats_ms([c for _, _, c in cold]),
    }


def daemon_run(workdir: Path, args: argparse.Namespace, hours: float) -> dict[str, object]:
    started = time.perf_counter()
    write_day(workdir / "daemon" / "state", hours, args.every_s, args.gpus)
    written_s = time.perf_counter() - started
    with TreeDaemon(trees(None)[-1], workdir / "daemon", f"seed = {SEED}\n", args.gpus) as daemon:
        session, window = open_console(daemon.address, None)
        try:
            found = measure(window, daemon.address, args.gpus, hours * 3600)
        finally:
            session.stop()
    return {"history_written_s": round(written_s, 1), **found}


def openmetrics(uuids: dict[int, str], hours: float) -> str:
    now = time.time()
    stamps = np.arange(now - hours * 3600 - 300, now - 60, 15.0)
    rng = np.random.default_rng(SEED)
    lines = []
    for metric, base in ((TEMP_GPU_C, 55.0), (UTIL_GPU_PCT, 60.0), (POWER_W, 400.0),
                         (MEM_USED_BYTES, 30_000.0)):  # fmt: skip
        assert metric.dcgm is not None
        lines.append(f"# TYPE {metric.dcgm.name} gauge")
        for gpu, uuid in uuids.items():
            values = base + 10 * np.sin(stamps / 3600 + gpu) + rng.normal(0, 1, len(stamps))
            labels = f'gpu="{gpu}",UUID="{uuid}",Hostname="bench-node"'
            lines += [
                f"{metric.dcgm.name}{{{labels}}} {v:.2f} {t:.0f}"
                for t, v in zip(stamps, values, strict=True)
            ]
    return "\n".join([*lines, "# EOF", ""])


def prometheus_run(workdir: Path, args: argparse.Namespace, hours: float) -> dict[str, object]:
    metrics_port = free_port()
    config = (f'seed = {SEED}\nmetrics_listen = "127.0.0.1:{metrics_port}"\n'
              "[history]\nenabled = false\n")  # fmt: skip
    with TreeDaemon(trees(None)[-1], workdir / "prom-node", config, args.gpus) as daemon:
        stub = pb_grpc.NodeServiceStub(grpc.insecure_channel(daemon.address))
        inventory = stub.GetInventory(pb.GetInventoryRequest(), timeout=10)
        source = workdir / "backfill.om"
        source.write_text(openmetrics({g.index: g.uuid for g in inventory.gpus}, hours))
        tsdb = workdir / "tsdb"
        started = time.perf_counter()
        subprocess.run([str(TOOLS / "promtool"), "tsdb", "create-blocks-from", "openmetrics",
                        str(source), str(tsdb)], check=True, capture_output=True)  # fmt: skip
        backfill_s = time.perf_counter() - started
        scrape = f"127.0.0.1:{metrics_port}"
        with scraping_prometheus(str(TOOLS / "prometheus"), scrape, workdir, tsdb, 60) as url:
            # A store that has run for a while has its blocks open and paged in: read them once.
            warm = urllib.parse.urlencode({"query": "count_over_time(DCGM_FI_DEV_GPU_TEMP[1d])"})
            with urllib.request.urlopen(f"{url}/api/v1/query?{warm}", timeout=120) as response:
                response.read()
            session, window = open_console(daemon.address, PrometheusSource(url))
            try:
                found = measure(window, daemon.address, args.gpus, hours * 3600)
            finally:
                session.stop()
    return {"promtool_backfill_s": round(backfill_s, 1), **found}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=8)
    parser.add_argument("--every-s", type=float, default=10.0, help="seconds between written ticks")
    parser.add_argument("--no-prometheus", action="store_true")
    parser.add_argument("--smoke", action="store_true", help="6 h, 2 GPUs, every 60 s")
    parser.add_argument(
        "--out", type=Path, default=REPO_ROOT / "bench/results/history_range_load.json"
    )
    args = parser.parse_args()
    hours = 6.0 if args.smoke else 24.0
    if args.smoke:
        args.gpus, args.every_s = 2, 60.0
    qt_application(offscreen=os.environ["QT_QPA_PLATFORM"] == "offscreen")
    result: dict[str, object] = {"range_h": hours, "gpus": args.gpus, "every_s": args.every_s}
    result.update(cpus=os.cpu_count(), load_average_before=os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="gpufleet-history-load-") as tmp:
        result["daemon"] = daemon_run(Path(tmp), args, hours)
        print("daemon:", json.dumps(result["daemon"]))
        if not args.no_prometheus and (TOOLS / "prometheus").exists():
            result["prometheus"] = prometheus_run(Path(tmp), args, hours)
            print("prometheus:", json.dumps(result["prometheus"]))
    result["load_average_after"] = os.getloadavg()
    if not args.smoke or "--out" in sys.argv:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
        print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
