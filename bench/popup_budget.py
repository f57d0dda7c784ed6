"""Benchmark: desktop popups per hour before and after noise control, and every critical popped.

    .venv/bin/python bench/popup_budget.py               # one simulated hour (~1-2 min of CPU)
    .venv/bin/python bench/popup_budget.py --minutes 180 # three
    .venv/bin/python bench/popup_budget.py --smoke       # 5 simulated minutes, nothing written

One hour of the demo's scripted fleet (4 nodes x 8 GPUs, the demo scenario on
gpu-node-02) is replayed in simulated time (bench/popup_budget_replay.py: the
daemon's simulated backend and alert engine with an injected clock and real
journals; running the demo's daemons with --sim-speed would not do, their
rules time durations by the wall clock). Node sweeps are spread over each
second as independent servers' are; the console's frames come at 20 Hz.
Each frame's events go into one real FleetModel and then to two notifiers:

  before: AlertNotifier as it was before noise control, loaded from git
          (--before-rev, default: the parent of the commit that added the policy);
  after:  today's AlertNotifier with the default notify policy and the same clock;
  after, power cap pops: the same with `popup = { throttle_software = "warning" }`,
          to show what the hold, flap damping, grouping and budget do on their own
          (by default power-cap throttling, most of the noise, does not pop at all).

Counted for each: popups (toast shown = notification sent; a notice standing
for several alerts is one), by rule and severity and by kind, and the critical
alerts popped against those raised (raised or escalated to critical, never
acknowledged or silenced in the demo). Writes bench/results/popup_budget.json
and .md (``--out``, ``--md``).
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from machine import code_version, run_header
from popup_budget_replay import GPUS, ReplayNode
from results import parse_with_outputs, write_outputs

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.model import FleetModel
from console.fleet.notify_policy import Notice
from console.fleet.notify_settings import NotifySettings, parse_notify_settings
from console.qt.alert_notifier import AlertNotifier
from gpufleet.v1.alert_severity import Severity

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
NOTIFIER_PATH = "console/qt/alert_notifier.py"
POLICY_PATH = "console/fleet/notify_policy.py"
FRAME_S = 0.05  # the FramePump's 20 Hz
START_S = 1_800_000_000.0
POWER_CAP_POPS = parse_notify_settings({"popup": {"throttle_software": "warning"}}, "bench")
# label -> notify settings (None: the notifier from before noise control)
VARIANTS: dict[str, NotifySettings | None] = {
    "before": None,
    "after": NotifySettings(),
    "after, power cap pops": POWER_CAP_POPS,
}


class Clock:
    def __init__(self) -> None:
        self.now = START_S

    def __call__(self) -> float:
        return self.now


class Tally:
    """A sink that is always there and counts what it was asked to show."""

    available = True
    muted = False  # plays its own sound: no beep

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self.popups: list[dict[str, Any]] = []
        self.criticals: dict[tuple[str, str], float] = {}  # alert uid -> when it popped

    def show(self, alert: AlertRow, node_name: str) -> None:
        self._count("alert", alert.severity, alert.rule, [alert])

    def show_notice(self, notice: Notice) -> None:
        rule = notice.anchor.rule if notice.anchor is not None else "(budget summary)"
        self._count(notice.kind.value, notice.severity, rule, list(notice.alerts))

    def withdraw(self, alert: AlertRow) -> None:
        pass

    def withdraw_notice(self, notice: Notice) -> None:
        pass

    def _count(self, kind: str, severity: Severity, rule: str, alerts: list[AlertRow]) -> None:
        at = self._clock.now - START_S
        self.popups.append({"at_s": round(at, 2), "kind": kind, "severity": severity.label,
                            "rule": rule, "alerts": len(alerts)})  # fmt: skip
        if severity is Severity.CRITICAL:
            for alert in alerts:
                self.criticals.setdefault(alert.uid, at)


def notifier_before(rev: str) -> type:
    """AlertNotifier as it was at `rev`, loaded from git into a module of its own."""
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:{NOTIFIER_PATH}"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    if "notify_policy" in source:
        raise SystemExit(f"{rev}: its {NOTIFIER_PATH} already has noise control")
    spec = importlib.util.spec_from_loader("alert_notifier_before", loader=None)
    assert spec is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{rev}:{NOTIFIER_PATH}", "exec"), module.__dict__)
    return module.AlertNotifier  # type: ignore[no-any-return]


def default_before_rev() -> str:
    """The parent of the commit that added the notify policy."""
    added = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--diff-filter=A", "--format=%H", "--", POLICY_PATH],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    if not added:
        raise SystemExit(f"no commit adds {POLICY_PATH}: pass --before-rev")
    return f"{added[-1][:12]}^"


def critical_uids(events: Sequence[EventRow]) -> dict[tuple[str, str], float]:
    """Alerts raised or escalated to critical, with when the daemon did so (simulated s)."""
    found: dict[tuple[str, str], float] = {}
    for event in events:
        alert = event.alert
        popup_kind = event.kind in ("alert_raised", "alert_changed")
        if popup_kind and alert is not None and alert.severity is Severity.CRITICAL:
            found.setdefault(alert.uid, alert.updated_unix_ms / 1000 - START_S)
    return found


def replay(minutes: float, nodes: int, before_rev: str, workdir: Path) -> dict[str, Any]:
    clock, fleet = Clock(), FleetModel()
    replayed = [ReplayNode(i, workdir, clock) for i in range(nodes)]
    for node in replayed:
        fleet.add_node(node.target)
    tallies = {label: Tally(clock) for label in VARIANTS}
    old = notifier_before(before_rev)(fleet, lambda _a, _t: None, [tallies["before"]], lambda: None)
    new = [
        AlertNotifier(fleet, lambda _a, _t: None, [tallies[label]], lambda: None, settings, clock)
        for label, settings in VARIANTS.items()
        if settings is not None
    ]
    frames, sweep_s = round(minutes * 60 / FRAME_S), 0.0
    started = time.process_time()
    for frame in range(1, frames + 1):
        clock.now = START_S + frame * FRAME_S
        for node_index, node in enumerate(replayed):
            # Node i sweeps at i/N into each second (independent servers' ticks).
            phase = round((1.0 / FRAME_S) * node_index / nodes)
            if frame % round(1.0 / FRAME_S) == phase:
                t0 = time.process_time()
                fleet.apply_all(node.sweep())
                sweep_s += time.process_time() - t0
        events = fleet.take_new_events()
        if events:
            old.on_events_arrived(events)
        for notifier in new:
            if events:
                notifier.on_events_arrived(events)
            notifier.tick()
    for node in replayed:
        node.close()
    cpu_s = time.process_time() - started
    return summarise(minutes, nodes, fleet, tallies, before_rev, cpu_s, sweep_s)


def summarise(
    minutes: float, nodes: int, fleet: FleetModel, tallies: dict[str, Tally], before_rev: str,
    cpu_s: float, sweep_s: float,
) -> dict[str, Any]:  # fmt: skip
    events = fleet.alerts.events()
    raised = critical_uids(events)
    per_hour = 60 / minutes
    runs = {}
    for label, tally in tallies.items():
        kinds = Counter(f"{p['rule']}/{p['severity']}" for p in tally.popups)
        missed = sorted(set(raised) - set(tally.criticals))
        delays = [tally.criticals[uid] - raised[uid] for uid in raised if uid in tally.criticals]
        runs[label] = {
            "popups": len(tally.popups),
            "popups_per_hour": round(len(tally.popups) * per_hour, 1),
            "non_critical_per_hour": round(
                sum(p["severity"] != "critical" for p in tally.popups) * per_hour, 1
            ),
            "by_rule_and_severity": dict(sorted(kinds.items())),
            "by_kind": dict(Counter(p["kind"] for p in tally.popups)),
            "criticals_popped": len(set(raised) & set(tally.criticals)),
            "criticals_missed": [f"{t} {a}" for t, a in missed],
            "critical_delay_max_s": round(max(delays), 2) if delays else None,
            "popup_log": tally.popups,
        }
    alert_raises = Counter(
        f"{e.alert.rule}/{e.alert.severity.label}" for e in events
        if e.kind == "alert_raised" and e.alert is not None
    )  # fmt: skip
    return {
        "simulated_minutes": minutes,
        "nodes": nodes,
        "gpus": nodes * GPUS,
        "before_rev": before_rev,
        "settings": {label: repr(s) for label, s in VARIANTS.items() if s is not None},
        "alerts_raised": dict(sorted(alert_raises.items())),
        "criticals_raised": len(raised),
        "cpu_s": round(cpu_s, 1),
        "daemon_sweeps_cpu_s": round(sweep_s, 1),
        "runs": runs,
    }


def markdown(result: dict[str, Any]) -> str:
    runs = result["runs"]
    after = runs["after"]
    lines = [
        "# Desktop popups per hour, before and after noise control",
        "",
        f"{result['when']}; `{' '.join(['bench/popup_budget.py', *result['argv']])}`; "
        f"{result['machine']['nproc']} x {result['machine']['cpu_model']}; "
        f"commit {result['code']['commit'][:7]}"
        f"{' (modified)' if result['code']['changed'] else ''}.",
        "",
        f"{result['simulated_minutes']:.0f} simulated minutes of the demo's scripted fleet "
        f"({result['nodes']} nodes x {GPUS} GPUs, the demo scenario on gpu-node-02), replayed "
        f"with the daemon's alert engine and an injected clock; before = AlertNotifier at "
        f"`{result['before_rev']}`, after = today's with the default notify policy.",
        "",
        "| | popups | per hour | non-critical per hour | criticals popped / raised |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for label, run in runs.items():
        lines.append(
            f"| {label} | {run['popups']} | {run['popups_per_hour']} | "
            f"{run['non_critical_per_hour']} | {run['criticals_popped']} / "
            f"{result['criticals_raised']} |"
        )
    lines += ["", "Popups by rule/severity:", "", f"| rule/severity | {' | '.join(runs)} |",
              f"| --- |{' ---: |' * len(runs)}"]  # fmt: skip
    rules = sorted({rule for run in runs.values() for rule in run["by_rule_and_severity"]})
    for rule in rules:
        counts = " | ".join(str(run["by_rule_and_severity"].get(rule, 0)) for run in runs.values())
        lines.append(f"| {rule} | {counts} |")
    kinds = "; ".join(
        f"{label}: {run['by_kind']}" for label, run in runs.items() if label != "before"
    )
    lines += [
        "",
        f"By kind: {kinds}.",
        "",
        f"Alerts raised: {result['alerts_raised']}.",
        "",
        f"Longest time from a critical's raise to its popup after: "
        f"{after['critical_delay_max_s']} s simulated (one frame is {FRAME_S} s).",
        "",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    arg = parser.add_argument
    arg("--minutes", type=float, default=60.0, help="simulated minutes (default 60)")
    arg("--nodes", type=int, default=4, help="the demo's nodes (default 4, as `demo` starts)")
    arg("--before-rev", metavar="REV", help="git revision of the 'before' notifier")
    args = parse_with_outputs(parser, argv, "popup_budget", "5 simulated minutes, nothing written")
    if args.smoke:
        args.minutes = 5.0
    if not 1 <= args.minutes <= 24 * 60 or not 1 <= args.nodes <= 125:
        parser.error("--minutes from 1 to 1440, --nodes from 1 to 125")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    before_rev = args.before_rev or default_before_rev()
    with tempfile.TemporaryDirectory(prefix="gpufleet-popups-") as workdir:
        measured = replay(args.minutes, args.nodes, before_rev, Path(workdir))
    result = {**run_header(args.argv), "code": code_version(ROOT), **measured}
    text = markdown(result)
    print(text)
    write_outputs("popup_budget", result, args.out, args.md, text)
    missed = [run["criticals_missed"] for label, run in result["runs"].items() if label != "before"]
    return 0 if not any(missed) else 1


if __name__ == "__main__":
    sys.exit(main())
