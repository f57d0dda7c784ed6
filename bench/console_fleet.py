"""Benchmark: the console's frame time, GUI load and CPU with a simulated fleet at 1 Hz.

    python bench/console_fleet.py [--nodes 125] [--gpus 8] [--seconds 60] [--out FILE.json]
    python bench/console_fleet.py --smoke     # 2 nodes, 3 s: does it still run? (~10 s)

A child process (bench/fleet_host.py) hosts the simulated node daemons; this
process is the console: the real MainWindow over a ConsoleSession, offscreen at
1920x1080, with one GPU selected so its plots update. Once every node streams,
it measures for --seconds, prints a table and writes JSON (--out; by default
bench/results/console_fleet.json, nothing with --smoke unless --out is given).
See bench/README.md for what each number means.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import resource
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from fleet_process import FLEET_HOST, LIGHT_FLEET, FleetProcess
from frame_probe import FrameProbe
from gc_probe import GcProbe
from gui_probes import Heartbeat, TimedApplication, run_for, wait_until
from machine import (
    code_version,
    cpu_seconds,
    describe_machine,
    peak_rss_bytes,
    rss_bytes,
    system_busy_seconds,
    system_steal_seconds,
)
from PySide6.QtWidgets import QWidget
from results import MIB, check_goals, format_table, percent, stats_ms

from console.app import qt_application
from console.fleet.model import FleetModel
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.qt.frame_pump import DEFAULT_FPS
from console.qt.gui_thread_gc import collect_in_gui_thread, stop_collecting_in_gui_thread
from console.session import ConsoleSession
from console.views.window.window_looks import WindowLooks

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "bench" / "results" / "console_fleet.json"
SMOKE = {"nodes": 2, "gpus": 8, "seconds": 3.0, "warmup": 1.0}
WINDOW_SIZE = (1920, 1080)
THEME = "dark"
NET_THREAD = "gpufleet-net"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--nodes", type=int, default=125, help="simulated nodes (default 125)")
    arg("--gpus", type=int, default=8, help="GPUs per node (default 8)")
    arg("--seconds", type=float, default=60.0, help="measured seconds (default 60)")
    arg("--warmup", type=float, default=3.0, help="seconds run before measuring (default 3)")
    arg("--interval", type=float, default=1.0, help="daemons' sampling tick (default 1 s)")
    arg("--out", type=Path, metavar="FILE.json", help=f"result as JSON ({DEFAULT_OUT.name})")
    arg("--check", action="store_true", help="exit 1 if a goal is not met")
    arg("--python-gc", action="store_true",
        help="let Python collect garbage in any thread (the console collects on the GUI "
             "thread only): for comparison")  # fmt: skip
    arg("--no-gc-freeze", dest="gc_freeze", action="store_false",
        help="do not freeze the start-up heap (the console does, 60 s after it starts): "
             "for comparison")  # fmt: skip
    arg("--fleet-processes", type=int, default=1, metavar="K",
        help="host the simulated daemons in K processes (default 1)")  # fmt: skip
    arg("--fleet-nice", type=int, default=0, metavar="N",
        help="run the simulated daemons at nice N (default 0)")  # fmt: skip
    arg("--light", action="store_true",
        help="light nodes (bench/light_fleet.py: the daemon's wire without its sampler, "
             "history or journal), for 10,000 GPUs on a small machine")  # fmt: skip
    arg("--smoke", action="store_true", help="tiny and fast (CI): 2 nodes, 3 s")
    args = parser.parse_args(argv)
    args.gc_freeze = args.gc_freeze and not args.python_gc  # --python-gc: no collector to freeze
    if args.smoke:
        vars(args).update(SMOKE)
    elif args.out is None:
        args.out = DEFAULT_OUT
    if args.nodes < 1 or not 1 <= args.gpus <= 64:
        parser.error("--nodes must be at least 1 and --gpus from 1 to 64")
    if not 1 <= args.fleet_processes <= args.nodes or not 0 <= args.fleet_nice <= 19:
        parser.error("--fleet-processes must be from 1 to --nodes, --fleet-nice from 0 to 19")
    if args.seconds <= 0 or args.warmup < 0 or not 0.1 <= args.interval <= 60:
        parser.error("--seconds must be > 0, --warmup >= 0, --interval from 0.1 to 60")
    return args


def quiet_offscreen_warning(record: logging.LogRecord) -> bool:
    """Drop the offscreen platform's note that it cannot resize windows to hints."""
    return "propagateSizeHints" not in record.getMessage()


def offscreen_and_quiet() -> None:
    """A console benchmark's start: warnings only (the offscreen size-hint note dropped),
    Qt offscreen unless told otherwise."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("qt").addFilter(quiet_offscreen_warning)
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


# -- counters read before and after the measured window -------------------------


@dataclass(frozen=True)
class Counters:
    wall: float
    console_cpu: float
    gui_cpu: float
    net_cpu: float
    fleet_cpu: float
    machine_cpu: float
    steal: float

    @classmethod
    def take(cls, fleet: FleetProcess) -> Counters:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return cls(
            wall=time.perf_counter(),
            console_cpu=usage.ru_utime + usage.ru_stime,
            gui_cpu=time.thread_time(),  # called on the GUI thread
            net_cpu=_thread_cpu_seconds(NET_THREAD),
            fleet_cpu=fleet.cpu_seconds(),
            machine_cpu=system_busy_seconds(),
            steal=system_steal_seconds(),
        )


def _thread_cpu_seconds(name: str) -> float:
    for thread in threading.enumerate():
        if thread.name == name and thread.native_id is not None:
            return cpu_seconds("self", thread.native_id)
    return 0.0


# -- the console ------------------------------------------------------------------


def build_console(
    app: TimedApplication, targets: Sequence[str]
) -> tuple[ConsoleSession, MainWindow, FrameProbe]:
    """ConsoleSession + MainWindow + WindowLooks as console.app.build_window makes them
    (without the desktop notification sinks), probed."""
    session = ConsoleSession(targets)
    window = MainWindow(session)
    # As `gpufleet console` builds it: theme, View menu, wall mode (off), layout (none
    # saved: XDG_CONFIG_HOME is the run's temporary directory).
    WindowLooks(window, theme=THEME)
    probe = FrameProbe(session, window, app.work)  # wraps the inbox before the links exist
    session.start()
    probe.take_over_pump()
    window.resize(*WINDOW_SIZE)
    window.show()
    return session, window, probe


def all_streaming(fleet: FleetModel) -> bool:
    return all(
        n.state is LinkState.CONNECTED and n.ring is not None and len(n.ring) > 0 for n in fleet
    )


def wait_streaming(session: ConsoleSession, timeout_s: float) -> None:
    if not wait_until(lambda: all_streaming(session.fleet), timeout_s):
        waiting = [n.target for n in session.fleet if n.state is not LinkState.CONNECTED]
        raise TimeoutError(f"{len(waiting)} node(s) not streaming after {timeout_s:.0f} s")


def measure(
    app: TimedApplication, probe: FrameProbe, fleet: FleetProcess, seconds: float, gcs: GcProbe
) -> tuple[Counters, Counters, Heartbeat]:
    heartbeat = Heartbeat()
    app.probe = heartbeat.timer
    app.reset()
    before = Counters.take(fleet)
    app.measuring = True
    probe.start_measuring()
    gcs.start_measuring()
    heartbeat.start()
    run_for(seconds)
    heartbeat.stop()
    gcs.stop_measuring()
    probe.stop_measuring()
    app.measuring = False
    return before, Counters.take(fleet), heartbeat


# -- the result ---------------------------------------------------------------------


def frame_stats(probe: FrameProbe) -> dict[str, object]:
    frames = probe.frames
    return {
        "frame": stats_ms([f.work_s for f in frames]),
        "pump": stats_ms([f.pump_s for f in frames]),
        "repaint": stats_ms([f.repaint_s for f in frames]),
        "grid_paint": stats_ms([f.grid_paint_s for f in frames]),
        "plots_paint": stats_ms([f.plots_paint_s for f in frames]),
        "plot_frame": stats_ms([f.work_s for f in frames if f.plots_refreshed]),
        "other_frame": stats_ms([f.work_s for f in frames if not f.plots_refreshed]),
        "off_cpu": stats_ms([f.off_cpu_s for f in frames]),
    }


def frame_counts(probe: FrameProbe) -> dict[str, object]:
    return {
        "with_changes": len(probe.frames),
        "without": probe.empty_frames,
        "plots_refreshed": sum(f.plots_refreshed for f in probe.frames),
        "repaint_not_after_a_change_ms": round(probe.unattributed_repaint_s * 1000, 2),
        "paint_outside_repaints_ms": round(probe.paint_outside_repaints_s * 1000, 2),
    }


def latency_stats(probe: FrameProbe) -> dict[str, object]:
    batches = [b for f in probe.frames for b in f.batches]
    return {
        "sample_to_pixel": stats_ms([b.latency_s for b in batches]),
        "network": stats_ms([b.arrived - b.sampled for b in batches]),
        "inbox": stats_ms([b.applied - b.arrived for b in batches]),
        "to_screen": stats_ms([b.shown - b.applied for b in batches]),
    }


def gui_stats(app: TimedApplication, heartbeat: Heartbeat, wall_s: float) -> dict[str, object]:
    stalls = heartbeat.stalls_s()
    return {
        "busy_pct": percent(app.busy_s, wall_s),
        "busy_excl_probe_pct": percent(app.busy_s - app.probe_s, wall_s),
        "busy_on_cpu_pct": percent(app.busy_cpu_s, wall_s),
        "events": app.events,
        "max_stall_ms": round(max(stalls, default=0.0) * 1000, 2),
        "stall_ms": stats_ms(stalls),
        "stalls_over_50ms": sum(s > 0.05 for s in stalls),
        "longest_events": [
            {"ms": round(s * 1000, 2), "event": what}
            for s, what in sorted(app.longest, reverse=True)
        ],
        "paint_by_widget": app.paint_table(wall_s),
    }


def cpu_stats(before: Counters, after: Counters) -> dict[str, float]:
    wall = after.wall - before.wall
    console = after.console_cpu - before.console_cpu
    gui, net = after.gui_cpu - before.gui_cpu, after.net_cpu - before.net_cpu
    return {
        "console": percent(console, wall),
        "console_gui_thread": percent(gui, wall),
        "console_net_thread": percent(net, wall),
        "console_other_threads": percent(console - gui - net, wall),
        "fleet": percent(after.fleet_cpu - before.fleet_cpu, wall),
        # Everything else the machine ran meanwhile: other work competing for the cores.
        "other_processes": percent(
            (after.machine_cpu - before.machine_cpu)
            - console
            - (after.fleet_cpu - before.fleet_cpu),
            wall,
        ),
        # Of that, what the hypervisor gave other VMs (a shared host's noise).
        "steal": percent(after.steal - before.steal, wall),
    }


def memory_stats(fleet: FleetProcess) -> dict[str, float]:
    return {
        "console_rss": round(rss_bytes() / MIB, 1),
        "console_peak": round(peak_rss_bytes() / MIB, 1),
        "fleet_rss": round(fleet.rss_bytes() / MIB, 1),
    }


def alert_stats(fleet: FleetModel, version_before: int, wall_s: float) -> dict[str, object]:
    """Alerts the console held, and how often the alert book changed (each change
    refreshes the alert views)."""
    rows = fleet.alerts.alerts()
    by_rule = Counter(a.rule for a in rows)
    return {
        "alerts": len(rows),
        "firing": sum(a.firing for a in rows),
        "changes_per_s": round((fleet.alerts.version - version_before) / wall_s, 2),
        # What the book holds, most first: which rules grow it over a run.
        "by_rule": dict(by_rule.most_common(10)),
        "events_held": len(fleet.alerts.events()),
    }


def shown_widgets(window: MainWindow) -> list[str]:
    """The named widgets on screen at the end of the run: what the frames included."""
    names = {w.objectName() for w in window.findChildren(QWidget) if w.isVisible()}
    return sorted(n for n in names if n and not n.startswith("qt_"))


def paint_lines(result: dict[str, object]) -> list[str]:
    gui = result.get("gui")
    rows = gui.get("paint_by_widget", []) if isinstance(gui, dict) else []
    lines = ["", f"  {'paint time by widget':<48}{'paints/s':>10}{'ms/s':>8}{'CPU ms/s':>10}"]
    for row in rows:
        lines.append(
            f"    {row['widget'][:46]:<46}{row['paints_per_s']:>10}{row['ms_per_s']:>8}"
            f"{row['cpu_ms_per_s']:>10}"
        )
    return lines


def gc_lines(result: dict[str, object]) -> list[str]:
    rows = result.get("gc")
    title = f"garbage collection ({result.get('python_gc')})"
    lines = ["", f"  {title:<48}{'runs':>10}{'ms/min':>8}{'max ms':>10}"]
    lines.append("    start-up heap frozen" if result.get("gc_freeze") else "    nothing frozen")
    for row in rows if isinstance(rows, list) else []:
        label = f"{row['thread']} gen{row['generation']}"
        lines.append(
            f"    {label[:46]:<46}{row['collections']:>10}{row['ms_per_min']:>8}{row['max_ms']:>10}"
        )
    return lines


def config_of(args: argparse.Namespace) -> dict[str, object]:
    return {
        "nodes": args.nodes,
        "gpus": args.gpus,
        "gpu_total": args.nodes * args.gpus,
        "interval_s": args.interval,
        "seconds": args.seconds,
        "warmup_s": args.warmup,
        "fps": DEFAULT_FPS,
        "smoke": args.smoke,
        "window": list(WINDOW_SIZE),
        "theme": THEME,
        "fleet_processes": args.fleet_processes,
        "fleet_nice": args.fleet_nice,
        "fleet": "light" if args.light else "daemons",
    }


# -- running it -----------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    before: Counters
    after: Counters
    heartbeat: Heartbeat
    alerts_before: int
    gcs: GcProbe

    @property
    def wall_s(self) -> float:
        return self.after.wall - self.before.wall


def connect_stats(connect_s: float, heartbeat: Heartbeat) -> dict[str, object]:
    """From the session's start to every node streaming: how long, and the GUI's stalls
    (the heartbeat's, from the window shown)."""
    stalls = heartbeat.stalls_s()
    return {
        "all_streaming_s": round(connect_s, 2),
        "max_stall_ms": round(max(stalls, default=0.0) * 1000, 2),
        "stalls_over_100ms": sum(s > 0.1 for s in stalls),
    }


def run(args: argparse.Namespace, app: TimedApplication, fleet: FleetProcess) -> dict[str, object]:
    started = datetime.now(UTC).isoformat(timespec="seconds")
    code = code_version(REPO_ROOT)  # the tree as imported, before anything ran
    targets = fleet.start(timeout_s=30 + 0.2 * args.nodes)
    connect_started = time.perf_counter()
    session, window, probe = build_console(app, targets)
    built_s = time.perf_counter() - connect_started
    # The GUI's stalls from the window shown until every node streams (a start's worst);
    # building the window before it shows is its own figure.
    connecting = Heartbeat()
    connecting.start()
    try:
        wait_streaming(session, timeout_s=30 + 0.2 * args.nodes)
        connect = connect_stats(time.perf_counter() - connect_started, connecting)
        connect["window_built_s"] = round(built_s, 2)
        connecting.stop()
        window.grid.select(targets[0], 0)
        if args.gc_freeze:
            collect_in_gui_thread().freeze_long_lived()  # as console.app.run_console does
        run_for(args.warmup)
        if args.gc_freeze and collect_in_gui_thread().freezes == 0:
            collect_in_gui_thread().freeze_now()  # a short warm-up: outside the measured time
        alerts_before = session.fleet.alerts.version
        gcs = GcProbe()
        measured = Measured(*measure(app, probe, fleet, args.seconds, gcs), alerts_before, gcs)
        gcs.close()
        result: dict[str, object] = {
            "benchmark": "console_fleet",
            "started_utc": started,
            "code": code,
        }
        result |= collect(args, app, session, window, probe, fleet, measured)
        result["connect"] = connect
    finally:
        probe.stop()
        window.close()
        session.stop()
    result["goals"] = check_goals(result)
    return result


def collect(
    args: argparse.Namespace,
    app: TimedApplication,
    session: ConsoleSession,
    window: MainWindow,
    probe: FrameProbe,
    fleet: FleetProcess,
    measured: Measured,
) -> dict[str, object]:
    """Every section of the result but the goals."""
    wall = measured.wall_s
    return {
        "config": config_of(args),
        "machine": describe_machine(),
        "frames": frame_counts(probe),
        "frame_ms": frame_stats(probe),
        "latency_ms": latency_stats(probe),
        "batches": _batch_counts(probe, args, wall),
        "gui": gui_stats(app, measured.heartbeat, wall),
        "cpu_pct": cpu_stats(measured.before, measured.after),
        "memory_mib": memory_stats(fleet),
        "alerts": alert_stats(session.fleet, measured.alerts_before, wall),
        # Since the start: stalls of the console's own network thread (connections/heartbeat.py).
        "net_stalls": {
            "stalls": session.connections.heartbeat.stalls,
            "longest_s": round(session.connections.heartbeat.longest_stall_s, 2),
        },
        "shown_widgets": shown_widgets(window),
        "python_gc": "any thread" if args.python_gc else "GUI thread only",
        "gc_freeze": args.gc_freeze,
        "gc": measured.gcs.stats(wall),
    }


def _batch_counts(probe: FrameProbe, args: argparse.Namespace, wall_s: float) -> dict[str, int]:
    shown = sum(len(f.batches) for f in probe.frames)
    return {"shown": shown, "expected": round(args.nodes * wall_s / args.interval)}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    offscreen_and_quiet()
    app = TimedApplication(sys.argv[:1])
    qt_application()  # the console's own set-up: style sheet, Qt log routing, collector
    if args.python_gc:
        stop_collecting_in_gui_thread()
    with (
        tempfile.TemporaryDirectory(prefix="gpufleet-bench-") as tmp,
        FleetProcess(
            args.nodes,
            args.gpus,
            Path(tmp),
            args.interval,
            args.fleet_processes,
            args.fleet_nice,
            host=LIGHT_FLEET if args.light else FLEET_HOST,
        ) as fleet,
    ):
        # No saved window layout is read, and the one saved at close goes with the run.
        os.environ["XDG_CONFIG_HOME"] = str(Path(tmp) / "config")
        result = run(args, app, fleet)
    print(format_table(result))
    print("\n".join(paint_lines(result)))
    print("\n".join(gc_lines(result)))
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    missed = [g for g in result["goals"] if not g["met"]]  # type: ignore[attr-defined]
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
