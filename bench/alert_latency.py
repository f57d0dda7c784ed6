"""Benchmark: time from a GPU's temperature crossing 85 °C to the console's popup.

    python bench/alert_latency.py [--trials 40] [--interval 1.0] [--nodes 1 [8 ...]]
                                  [--gpus 8] [--sim-speed 3] [--out FILE.json] [--check]
    python bench/alert_latency.py --smoke          # 1 node x 4 GPUs, 2 trials, < 30 s

Real `gpufleet daemon` processes (simulated backend, bench/alert_latency_daemons.py)
make their GPUs overheat and cool again and again, staggered so the crossings of
85 °C fall at every phase of the sampling tick. This process is the console: the
real ConsoleSession + MainWindow, offscreen, with a recording notification sink.
Every popup of a new critical gpu_temp alert is a trial. For each:

  (a) observed -> popup: from the timestamp of the daemon's first sample batch
      with temp_gpu_c >= 85 (its sweep time, read from the console's fleet
      model ring) to the AlertNotifier's `notified` signal (time.time() on the
      GUI thread);
  (b) crossing -> popup: from the moment the temperature crossed 85 °C,
      interpolated linearly (in wall time) between the last sample below and
      the first at or above, to the same signal. (b) includes the sampling
      delay (up to one tick) and is the number for the goal p99 < 1.5 s.

Daemons and console run on this machine, so their wall clocks are the same clock.
With several --nodes values, each fleet size runs in turn, in one process.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from alert_latency_daemons import CRITICAL_C, DaemonFleet, ThermalPlan
from alert_latency_ecosystem import ecosystem_summary
from console_fleet import offscreen_and_quiet
from gui_probes import run_for, wait_until
from machine import describe_machine
from PySide6.QtCore import QEvent, QObject
from results import stats_ms

from console.app import qt_application
from console.fleet.alert_rows import AlertRow
from console.fleet.columns import column
from console.fleet.model import FleetModel
from console.fleet.updates import EventUpdate, LinkState, Update
from console.main_window import MainWindow
from console.session import ConsoleSession
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import TEMP_GPU_C

TARGET_P99_S = 1.5
# A popup is matched to its samples this long after it showed: the triggering
# batch was in the daemon's history before the alert was judged, so by then
# the sample stream has long delivered it.
RESOLVE_AFTER_S = 2.0
WINDOW_SIZE = (1600, 900)
POPUP_KINDS = frozenset({"alert_raised", "alert_changed"})
SMOKE = {"nodes": [1], "gpus": 4, "trials": 2, "sim_speed": 6.0, "lead_s": 4.0, "max_s": 45.0}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    arg = parser.add_argument
    arg("--trials", type=int, default=40, help="popups to time per fleet size (default 40)")
    arg("--interval", type=float, default=1.0, help="daemons' sampling tick (default 1 s)")
    arg("--nodes", type=int, nargs="+", default=[1], help="fleet sizes to run, in turn")
    arg("--gpus", type=int, default=8, help="GPUs per node (default 8)")
    arg("--sim-speed", type=float, default=3.0, help="simulated s per wall s (default 3)")
    arg("--lead", type=float, default=10.0, help="wall s before the first overheat")
    arg("--max-seconds", type=float, help="give up on a fleet size after this (default: sized)")
    arg("--out", type=Path, metavar="FILE.json", help="write the result as JSON")
    arg("--check", action="store_true", help="exit 1 if p99 crossing -> popup >= 1.5 s")
    arg("--smoke", action="store_true", help="tiny and fast (CI): 1 node x 4 GPUs, 2 trials")
    args = parser.parse_args(argv)
    if args.smoke:
        args.nodes, args.gpus, args.trials = SMOKE["nodes"], SMOKE["gpus"], SMOKE["trials"]
        args.sim_speed, args.lead, args.max_seconds = SMOKE["sim_speed"], SMOKE["lead_s"], 45.0
    if min(args.nodes) < 1 or not 1 <= args.gpus <= 64 or args.trials < 1:
        parser.error("--nodes must be >= 1, --gpus from 1 to 64, --trials >= 1")
    if not 0.1 <= args.interval <= 5 or not 0.5 <= args.sim_speed <= 8:
        parser.error("--interval from 0.1 to 5 s, --sim-speed from 0.5 to 8")
    return args


# -- probes on the console ------------------------------------------------------------


class RecordingSink:
    """Stands in for the desktop notification server: counts what it was asked to show."""

    available = True

    def __init__(self) -> None:
        self.shown = 0
        self.withdrawn = 0

    def show(self, alert: AlertRow, node_name: str) -> None:
        self.shown += 1

    def withdraw(self, alert: AlertRow) -> None:
        self.withdrawn += 1


@dataclass
class Popup:
    """One `notified` signal: what popped up, and when each step happened (epoch s)."""

    target: str
    gpu: int | None
    alert_id: str
    rule: str
    severity: Severity
    escalation: bool  # a warning alert that became critical (else raised as critical)
    judged_s: float  # the daemon's rules raised / escalated it (alert.updated_unix_ms)
    inbox_s: float | None  # its event decoded and handed to the GUI by the network thread
    popup_s: float  # `notified`: toast shown and sinks called
    painted_s: float | None = None  # the toast's next paint event
    lower_than_shown: bool = False  # a higher severity of this alert popped up before


@dataclass(frozen=True)
class Trial:
    target: str
    gpu: int
    alert_id: str
    escalation: bool
    below_s: float  # last sample below 85 °C (daemon sweep time)
    below_c: float
    sample_s: float  # first sample at or above 85 °C
    sample_c: float
    crossing_s: float  # interpolated
    judged_s: float
    inbox_s: float | None
    popup_s: float
    painted_s: float | None


class PopupProbe(QObject):
    """Times each popup: the inbox hand-over, `notified`, and the toast's next paint."""

    def __init__(self, session: ConsoleSession, window: MainWindow) -> None:
        super().__init__()
        self.setObjectName("bench-popup-probe")
        self._arrived: dict[tuple[str, str, Severity], float] = {}
        self._shown_max: dict[tuple[str, str], Severity] = {}
        self.popups: list[Popup] = []
        self._pending: list[Popup] = []
        self.trials: list[Trial] = []
        self.unresolved: list[Popup] = []
        self.start_s = math.inf  # trials count from here (set when measuring starts)
        put = session.inbox.put  # wrapped on the instance, before any link exists

        def timed_put(update: Update) -> None:
            if isinstance(update, EventUpdate):
                self._on_event_arrived(update)
            put(update)

        session.inbox.put = timed_put
        window.alerts.notifier.notified.connect(self._on_notified)
        window.alerts.toast.installEventFilter(self)

    def _on_event_arrived(self, update: EventUpdate) -> None:
        alert = update.event.alert
        if alert is not None and update.event.kind in POPUP_KINDS:
            self._arrived.setdefault((update.target, alert.id, alert.severity), time.time())

    def _on_notified(self, alert: AlertRow) -> None:
        now = time.time()
        shown_max = self._shown_max.get(alert.uid)
        popup = Popup(
            alert.target, alert.gpu_index, alert.id, alert.rule, alert.severity,
            escalation=alert.updated_unix_ms != alert.started_unix_ms,
            judged_s=alert.updated_unix_ms / 1000,
            inbox_s=self._arrived.get((alert.target, alert.id, alert.severity)),
            popup_s=now,
            lower_than_shown=shown_max is not None and shown_max > alert.severity,
        )  # fmt: skip
        self._shown_max[alert.uid] = max(shown_max or alert.severity, alert.severity)
        self.popups.append(popup)
        if alert.rule == "gpu_temp" and alert.severity is Severity.CRITICAL:
            self._pending.append(popup)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint:
            now = time.time()
            for popup in reversed(self.popups):
                if popup.painted_s is not None:
                    break
                popup.painted_s = now
        return False

    def resolve(self, fleet: FleetModel, interval_s: float, everything: bool = False) -> int:
        """Match popups old enough to their samples; returns the trials since `start_s`."""
        cutoff = math.inf if everything else time.time() - RESOLVE_AFTER_S
        due = [p for p in self._pending if p.popup_s <= cutoff]
        self._pending = [p for p in self._pending if p.popup_s > cutoff]
        for popup in due:
            trial = trial_of(popup, fleet, interval_s)
            if trial is None:
                self.unresolved.append(popup)
            else:
                self.trials.append(trial)
        return sum(t.sample_s >= self.start_s for t in self.trials)


def trial_of(popup: Popup, fleet: FleetModel, interval_s: float) -> Trial | None:
    """The upward crossing of 85 °C that raised this popup, from the node's sample ring."""
    ring = fleet.node(popup.target).ring
    if ring is None or popup.gpu is None:
        return None
    times, temps = ring.series(popup.gpu, column(TEMP_GPU_C))
    # The last batch at or above the line, right after one below it, that the
    # daemon had swept before its rules judged (sweep and rule times are whole ms).
    up = (temps[1:] >= CRITICAL_C) & (temps[:-1] < CRITICAL_C)
    up &= times[1:] <= popup.judged_s + 0.002
    hits = np.flatnonzero(up)
    if not hits.size:
        return None
    i = int(hits[-1]) + 1
    t0, t1, c0, c1 = float(times[i - 1]), float(times[i]), float(temps[i - 1]), float(temps[i])
    if popup.judged_s - t1 > interval_s or t1 - t0 > 2.5 * interval_s:
        return None  # not the batch that raised it, or a gap in the samples
    crossing = t0 + (CRITICAL_C - c0) / (c1 - c0) * (t1 - t0)
    return Trial(
        popup.target, popup.gpu, popup.alert_id, popup.escalation, t0, c0, t1, c1, crossing,
        popup.judged_s, popup.inbox_s, popup.popup_s, popup.painted_s,
    )  # fmt: skip


def missed_crossings(
    fleet: FleetModel, trials: Sequence[Trial], start_s: float, end_s: float
) -> list[dict[str, object]]:
    """Upward crossings of 85 °C in the measured window that no popup was matched to."""
    matched = {(t.target, t.gpu, round(t.sample_s, 3)) for t in trials}
    missed: list[dict[str, object]] = []
    for node in fleet:
        if node.ring is None:
            continue
        for gpu in range(node.ring.gpu_count):
            times, temps = node.ring.series(gpu, column(TEMP_GPU_C))
            up = (temps[1:] >= CRITICAL_C) & (temps[:-1] < CRITICAL_C)
            up &= (times[1:] >= start_s) & (times[1:] <= end_s - RESOLVE_AFTER_S)
            for i in np.flatnonzero(up) + 1:
                if (node.target, gpu, round(float(times[i]), 3)) not in matched:
                    missed.append({"node": node.name, "gpu": gpu, "sample_s": float(times[i])})
    return missed


# -- statistics -----------------------------------------------------------------------


def stats(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """count, min, mean, p50, p90, p99, max in milliseconds."""
    base = stats_ms(seconds)
    if not seconds:
        return {**base, "min": None, "mean": None, "p90": None}
    values = np.asarray(seconds, dtype=np.float64) * 1000
    return {
        **base,
        "min": round(float(values.min()), 3),
        "mean": round(float(values.mean()), 3),
        "p90": round(float(np.percentile(values, 90)), 3),
    }


def uniform_phase(observed_s: Sequence[float], interval_s: float, steps: int = 100) -> list[float]:
    """Each measured observed -> popup, plus a tick wait at `steps` evenly spread phases.

    A real GPU crosses 85 °C at any moment of the tick with equal likelihood;
    this gives the crossing -> popup distribution for exactly that, from the
    measured part alone (the simulated crossings' phases are close to, not
    exactly, uniform).
    """
    waits = [(k + 0.5) / steps * interval_s for k in range(steps)]
    return [o + w for o in observed_s for w in waits]


def latency_stats(
    trials: Sequence[Trial], interval_s: float
) -> dict[str, dict[str, float | int | None]]:
    observed = [t.popup_s - t.sample_s for t in trials]
    uniform = stats(uniform_phase(observed, interval_s))
    with_inbox = [t for t in trials if t.inbox_s is not None]
    painted = [t for t in trials if t.painted_s is not None]
    return {
        "crossing_to_popup": stats([t.popup_s - t.crossing_s for t in trials]),
        "crossing_to_popup_uniform_phase": {**uniform, "count": len(trials)},
        "observed_to_popup": stats(observed),
        "crossing_to_sample": stats([t.sample_s - t.crossing_s for t in trials]),
        "sample_to_judged": stats([t.judged_s - t.sample_s for t in trials]),
        "judged_to_inbox": stats([t.inbox_s - t.judged_s for t in with_inbox]),  # type: ignore[operator]
        "inbox_to_popup": stats([t.popup_s - t.inbox_s for t in with_inbox]),  # type: ignore[operator]
        "popup_to_painted": stats([t.painted_s - t.popup_s for t in painted]),  # type: ignore[operator]
    }


def phase_quarters(trials: Sequence[Trial], interval_s: float) -> list[int]:
    """How many crossings fell in each quarter of the tick before their sample."""
    quarters = [0, 0, 0, 0]
    for t in trials:
        fraction = (t.sample_s - t.crossing_s) / interval_s
        quarters[min(3, max(0, int(fraction * 4)))] += 1
    return quarters


def popup_counts(popups: Sequence[Popup]) -> dict[str, object]:
    kinds = Counter(f"{p.rule}/{p.severity.label}" for p in popups)
    lower = [p for p in popups if p.lower_than_shown]
    return {
        "total": len(popups),
        "by_rule_and_severity": dict(sorted(kinds.items())),
        "after_a_higher_severity_of_the_same_alert": len(lower),
        "examples_after_higher": [f"{p.rule}/{p.severity.label} {p.alert_id}" for p in lower[:5]],
    }


# -- one fleet size -------------------------------------------------------------------


def build_console(
    targets: Sequence[str],
) -> tuple[ConsoleSession, MainWindow, PopupProbe, RecordingSink]:
    """ConsoleSession + MainWindow as console.app.build_window makes them, with a test sink."""
    session = ConsoleSession(targets)
    sink = RecordingSink()
    window = MainWindow(session, sinks=[sink])
    probe = PopupProbe(session, window)
    window.resize(*WINDOW_SIZE)
    session.start()
    window.show()
    return session, window, probe, sink


def all_streaming(fleet: FleetModel) -> bool:
    return all(
        n.state is LinkState.CONNECTED and n.ring is not None and len(n.ring) > 0 for n in fleet
    )


def sized_max_seconds(args: argparse.Namespace, nodes: int, plan: ThermalPlan) -> float:
    """Long enough for --trials crossings at the fleet's rate, with room for a slow machine."""
    trials: int = args.trials
    lead_s: float = args.lead
    gpus: int = args.gpus
    cycles = math.ceil(trials / (nodes * gpus)) + 1
    return lead_s + cycles * plan.cycle_wall_s * 1.5 + 30


def console_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def run_fleet(args: argparse.Namespace, nodes: int, workdir: Path) -> dict[str, object]:
    plan = ThermalPlan(sim_speed=args.sim_speed, lead_wall_s=args.lead)
    max_s = args.max_seconds or sized_max_seconds(args, nodes, plan)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    with DaemonFleet(workdir, nodes, args.gpus, args.interval, plan) as daemons:
        targets = daemons.start(run_wall_s=max_s + 120, timeout_s=30 + 2 * nodes)
        session, window, probe, sink = build_console(targets)
        try:
            if not wait_until(lambda: all_streaming(session.fleet), 30 + nodes):
                raise TimeoutError(f"not every node streams after {30 + nodes} s")
            start_s, load_before = time.time(), os.getloadavg()
            probe.start_s = start_s
            cpu_before = (console_cpu_s(), daemons.cpu_seconds())
            wait_until(lambda: probe.resolve(session.fleet, args.interval) >= args.trials, max_s)
            end_s, load_after = time.time(), os.getloadavg()
            cpu_after = (console_cpu_s(), daemons.cpu_seconds())
            run_for(RESOLVE_AFTER_S)  # let the popups of crossings just before the end land
            probe.resolve(session.fleet, args.interval, everything=True)
            missed = missed_crossings(session.fleet, probe.trials, start_s, end_s)
        finally:
            window.close()
            session.stop()
    trials = [t for t in probe.trials if t.sample_s >= start_s]
    wall = end_s - start_s
    latency = latency_stats(trials, args.interval)
    return {
        "started_utc": started,
        "nodes": nodes,
        "gpus": nodes * args.gpus,
        "measured_s": round(wall, 1),
        "load_avg_before": [round(x, 2) for x in load_before],
        "load_avg_after": [round(x, 2) for x in load_after],
        "cpu_pct": {
            "console": round(100 * (cpu_after[0] - cpu_before[0]) / wall, 1),
            "daemons": round(100 * (cpu_after[1] - cpu_before[1]) / wall, 1),
        },
        "trials": len(trials),
        "trials_before_window": len(probe.trials) - len(trials),
        "unresolved_popups": len(probe.unresolved),
        "missed_crossings": missed,
        "latency_ms": latency,
        "escalations": sum(t.escalation for t in trials),
        "crossing_phase_quarters": phase_quarters(trials, args.interval),
        "popups": popup_counts(probe.popups),
        "sink_shown": sink.shown,
        "goal": goal(latency),
        "raw": [{k: _round(v) for k, v in asdict(t).items()} for t in trials],
    }


def goal(latency: dict[str, dict[str, float | int | None]]) -> dict[str, object]:
    p99 = latency["crossing_to_popup"]["p99"]
    return {
        "name": "crossing -> popup p99",
        "goal": f"< {TARGET_P99_S * 1000:.0f} ms",
        "value": p99,
        "met": p99 is not None and p99 < TARGET_P99_S * 1000,
    }


def _round(value: object) -> object:
    return round(value, 4) if isinstance(value, float) else value


# -- output ---------------------------------------------------------------------------

ROWS = (
    ("(b) crossing -> popup", "crossing_to_popup"),
    ("(b) same, crossing phase uniform", "crossing_to_popup_uniform_phase"),
    ("(a) observed -> popup", "observed_to_popup"),
    ("  crossing -> sample (tick wait)", "crossing_to_sample"),
    ("  sample -> judged (daemon rules)", "sample_to_judged"),
    ("  judged -> console inbox", "judged_to_inbox"),
    ("  inbox -> popup (frame, notifier)", "inbox_to_popup"),
    ("popup -> toast painted", "popup_to_painted"),
)


def _cell(value: object) -> str:
    return "n/a" if value is None else f"{value:.0f}" if isinstance(value, float) else str(value)


def format_run(run: dict[str, object], config: dict[str, object]) -> str:
    latency = run["latency_ms"]
    assert isinstance(latency, dict)
    head = f"  {'':<36}" + "".join(f"{h:>9}" for h in ("p50 ms", "p90", "p99", "max", "n"))
    lines = [
        f"alert_latency: {run['nodes']} node(s) x {config['gpus_per_node']} GPUs = {run['gpus']}"
        f" GPUs, tick {config['interval_s']} s, sim-speed {config['sim_speed']},"
        f" {run['trials']} trials in {run['measured_s']} s",
        f"  load average {run['load_avg_before']} -> {run['load_avg_after']};"
        f" CPU % of a core: {run['cpu_pct']}",
        "",
        head,
    ]
    for label, key in ROWS:
        s = latency[key]
        cells = (s["p50"], s["p90"], s["p99"], s["max"], s["count"])
        lines.append(f"  {label:<36}" + "".join(f"{_cell(c):>9}" for c in cells))
    g = run["goal"]
    assert isinstance(g, dict)
    lines += [
        "",
        f"  goal {g['name']} {g['goal']}: {_cell(g['value'])} ms,"
        f" {'met' if g['met'] else 'NOT MET'}",
        f"  crossing phase by quarter tick {run['crossing_phase_quarters']};"
        f" escalations {run['escalations']}; missed crossings {len(run['missed_crossings'])};"  # type: ignore[arg-type]
        f" unresolved popups {run['unresolved_popups']}",
        f"  popups {run['popups']}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    offscreen_and_quiet()
    qt_application()  # the console's own set-up: style sheet, Qt log routing
    config = {
        "trials": args.trials,
        "interval_s": args.interval,
        "gpus_per_node": args.gpus,
        "sim_speed": args.sim_speed,
        "cycle_wall_s": round(ThermalPlan(sim_speed=args.sim_speed).cycle_wall_s, 1),
        "nodes": args.nodes,
        "smoke": args.smoke,
    }
    result: dict[str, object] = {
        "benchmark": "alert_latency",
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": config,
        "machine": describe_machine(),
        "clocks": "daemons and console on this machine: one wall clock (time.time)",
        "runs": [],
        "ecosystem": ecosystem_summary(),
    }
    runs: list[dict[str, object]] = []
    for nodes in args.nodes:
        with tempfile.TemporaryDirectory(prefix="gpufleet-alert-bench-") as tmp:
            runs.append(run_fleet(args, nodes, Path(tmp)))
        print(format_run(runs[-1], config), flush=True)
        print(flush=True)
    result["runs"] = runs
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    short = any(int(r["trials"]) < args.trials for r in runs)  # type: ignore[call-overload]
    goal_missed = any(not r["goal"]["met"] for r in runs)  # type: ignore[index]
    if short:
        print("alert_latency: fewer trials than asked for", file=sys.stderr)
    return 1 if short or (args.check and goal_missed) else 0


if __name__ == "__main__":
    sys.exit(main())
