"""AlertEngine.reconfigure: the rules change from the next tick, the detectors' state stays."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import ECC_CORRECTED_TOTAL, TEMP_GPU_C, GpuMetric
from node_daemon.alerts.engine import AlertEngine
from node_daemon.alerts.rules import AlertSettings, EccSettings
from node_daemon.backends.readings import GpuReading
from node_daemon.journal.event_journal import EventJournal

Values = Mapping[GpuMetric[Any], float | None]


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_000.0

    def __call__(self) -> float:
        return self.now_s


def engine(tmp_path: Path, settings: AlertSettings) -> tuple[AlertEngine, EventJournal, Clock]:
    clock, journal = Clock(), EventJournal(tmp_path / "journal.sqlite3")
    return AlertEngine(journal, settings, clock=clock), journal, clock


def run(alerts: AlertEngine, clock: Clock, seconds: int, values: Values) -> None:
    """One tick a second for `seconds`, GPU 0 reading `values` each time."""
    for _ in range(seconds):
        clock.now_s += 1
        alerts.evaluate([GpuReading.of(0, values)], {})


def kinds(journal: EventJournal, rule: str) -> list[int]:
    return [e.kind for e in journal.events_after(0) if e.alert.rule == rule]


def test_a_raised_critical_line_lowers_the_severity_of_the_same_alert(tmp_path: Path) -> None:
    alerts, journal, clock = engine(tmp_path, AlertSettings())
    run(alerts, clock, 3, {TEMP_GPU_C: 88.0})
    (hot,) = alerts.firing()
    assert hot.severity is Severity.CRITICAL

    gpu_temp = replace(AlertSettings().gpu_temp, critical=95.0)
    alerts.reconfigure(replace(AlertSettings(), gpu_temp=gpu_temp))
    run(alerts, clock, 1, {TEMP_GPU_C: 88.0})

    (now,) = alerts.firing()
    # The warning's duration had held all along: a warning at once, the same alert.
    assert (now.id, now.severity) == (hot.id, Severity.WARNING)
    changed, raised = pb.EVENT_KIND_ALERT_CHANGED, pb.EVENT_KIND_ALERT_RAISED
    assert kinds(journal, "gpu_temp") == [raised, changed]


def test_a_lowered_line_waits_its_duration_from_the_reload_on(tmp_path: Path) -> None:
    alerts, _journal, clock = engine(tmp_path, AlertSettings())
    run(alerts, clock, 30, {TEMP_GPU_C: 70.0})
    assert alerts.firing() == []

    gpu_temp = replace(AlertSettings().gpu_temp, warning=65.0, warning_for_s=10.0)
    alerts.reconfigure(replace(AlertSettings(), gpu_temp=gpu_temp))
    run(alerts, clock, 10, {TEMP_GPU_C: 70.0})
    assert alerts.firing() == []  # 70 °C was under the old line: its 10 s start now
    run(alerts, clock, 1, {TEMP_GPU_C: 70.0})
    assert [a.rule for a in alerts.firing()] == ["gpu_temp"]


def test_a_window_keeps_what_it_counted_over_a_reload(tmp_path: Path) -> None:
    """Correctable ECC errors counted before the reload still count after it."""
    alerts, _journal, clock = engine(tmp_path, AlertSettings())
    for total in range(0, 8):
        run(alerts, clock, 1, {ECC_CORRECTED_TOTAL: total})
    assert alerts.firing() == []  # 7 in the window, under the default 10

    ecc = replace(EccSettings(), correctable_threshold=5)
    alerts.reconfigure(replace(AlertSettings(), ecc=ecc))
    run(alerts, clock, 1, {ECC_CORRECTED_TOTAL: 7})
    assert [a.rule for a in alerts.firing()] == ["ecc_correctable"]
