"""The alert engine over a real journal, driven by the simulated backend."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.engine import AlertEngine, AlertNotFiring, BadAlertRequest, UnknownAlert
from node_daemon.alerts.rules import AlertSettings, IdleSettings, LeakSettings
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.journal.event_journal import EventJournal
from tests.fake_clock import ManualClock


class Node:
    """A simulated node, an engine and a journal, stepped by hand."""

    def __init__(
        self,
        path: Path,
        *events: tuple[float, int, str, float | None],
        settings: AlertSettings | None = None,
    ) -> None:
        self.clock = ManualClock()
        self.journal = EventJournal(path)
        self.engine = AlertEngine(self.journal, settings, clock=self.clock)
        scenario = Scenario(tuple(ScenarioEvent(*e) for e in events))
        self.backend = SimulatedBackend(gpu_count=4, seed=5, model="h100", scenario=scenario)
        self.engine.set_gpu_facts(self.backend.open().gpus)
        self.pushed: list[str] = []
        self.engine.add_listener(lambda alerts: self.pushed.extend(a.id for a in alerts))

    def run(self, seconds: int) -> None:
        for _ in range(seconds):
            self.clock.now += 1.0
            self.engine.evaluate(self.backend.read_gpus(), self.backend.read_processes())

    def kinds(self) -> list[tuple[int, str]]:
        return [(e.kind, e.alert.rule) for e in self.journal.events_after(0)]


def test_overheat_raises_warning_then_critical_then_clears(tmp_path: Path) -> None:
    node = Node(tmp_path / "j.sqlite3", (1, 2, "overheat", None), (80, 2, "cool", None))
    node.run(79)
    firing = {a.rule: a for a in node.engine.firing()}
    assert firing["gpu_temp"].severity == 3 and firing["gpu_temp"].gpu_index == 2
    assert firing["gpu_temp"].gpu_uuid.startswith("GPU-")
    node.run(300)
    assert "gpu_temp" not in {a.rule for a in node.engine.firing()}
    temp = [e for e in node.journal.events_after(0) if e.alert.rule == "gpu_temp"]
    # It heats faster than the warning's 10 s: critical at once, then down to
    # warning (hysteresis), then cleared. (The other changes are new peaks.)
    transitions = [(temp[0].kind, temp[0].alert.severity)] + [
        (e.kind, e.alert.severity)
        for before, e in itertools.pairwise(temp)
        if e.alert.severity != before.alert.severity or e.kind != pb.EVENT_KIND_ALERT_CHANGED
    ]
    assert transitions == [
        (pb.EVENT_KIND_ALERT_RAISED, pb.SEVERITY_CRITICAL),
        (pb.EVENT_KIND_ALERT_CHANGED, pb.SEVERITY_WARNING),
        (pb.EVENT_KIND_ALERT_CLEARED, pb.SEVERITY_WARNING),
    ]
    assert node.pushed  # listeners (Alertmanager) heard of it


def test_every_scenario_fault_raises_its_rule(tmp_path: Path) -> None:
    # A leak must last min_duration_s (10 min by default): a minute keeps this test short.
    quick_leak = AlertSettings(memory_leak=LeakSettings(min_duration_s=60, bucket_s=5))
    node = Node(
        tmp_path / "j.sqlite3",
        (1, 0, "overheat", None), (1, 1, "leak", None), (1, 2, "ecc", 1.0),
        (1, 3, "lost", None), (2, 2, "xid", 48.0), (2, 1, "ecc_correctable", 20.0),
        settings=quick_leak,
    )  # fmt: skip
    node.run(140)
    raised = node.journal.events_after(0)
    rules = {e.alert.rule for e in raised if e.kind == pb.EVENT_KIND_ALERT_RAISED}
    expected = {"gpu_temp", "temp_trend", "memory_leak", "ecc_uncorrectable", "gpu_lost", "xid",
                "ecc_correctable", "throttle"}  # fmt: skip
    assert expected <= rules, expected - rules
    kinds = [e.kind for e in node.journal.events_after(0)]
    assert pb.EVENT_KIND_GPU_LOST in kinds


def test_power_and_idle_rules_from_scenarios(tmp_path: Path) -> None:
    quick_idle = AlertSettings(idle=IdleSettings(after_s=20))
    node = Node(tmp_path / "j.sqlite3", (1, 0, "overpower", None), (1, 1, "idle", None),
                settings=quick_idle)  # fmt: skip
    node.run(60)
    rules = {(a.rule, a.gpu_index) for a in node.engine.firing()}
    assert ("power", 0) in rules and ("idle", 1) in rules


def test_restart_keeps_firing_alerts_without_reraising(tmp_path: Path) -> None:
    node = Node(tmp_path / "j.sqlite3", (1, 3, "lost", None))
    node.run(3)
    before = {a.key: a.id for a in node.engine.firing()}
    node.journal.close()
    restarted = Node(tmp_path / "j.sqlite3", (1, 3, "lost", None))
    restarted.run(3)
    after = {a.key: a.id for a in restarted.engine.firing()}
    assert after["gpu_lost/gpu3"] == before["gpu_lost/gpu3"]  # the same alert, not a new one
    raised = [e for e in restarted.journal.events_after(0) if e.kind == pb.EVENT_KIND_ALERT_RAISED]
    assert [e.alert.key for e in raised].count("gpu_lost/gpu3") == 1


def test_acknowledge_and_silence(tmp_path: Path) -> None:
    node = Node(tmp_path / "j.sqlite3", (1, 3, "lost", None))
    node.run(2)
    alert = next(a for a in node.engine.firing() if a.rule == "gpu_lost")
    acked = node.engine.acknowledge(alert.id, "erin", "swapping the card")
    assert acked.acknowledged_by == "erin" and acked.acknowledge_comment == "swapping the card"
    silenced = node.engine.silence(alert.id, 60, "maintenance window", "erin")
    assert silenced.silenced_until_unix_ms == int(node.clock.now * 1000) + 60_000
    node.clock.now += 61
    node.run(1)
    kinds = [e.kind for e in node.journal.events_after(0) if e.alert.id == alert.id]
    assert kinds[-3:] == [
        pb.EVENT_KIND_ALERT_ACKNOWLEDGED,
        pb.EVENT_KIND_ALERT_SILENCED,
        pb.EVENT_KIND_ALERT_UNSILENCED,
    ]
    with pytest.raises(UnknownAlert):
        node.engine.acknowledge("a-999", "erin", "")
    with pytest.raises(BadAlertRequest, match="reason"):
        node.engine.silence(alert.id, 60, "  ", "erin")
    with pytest.raises(BadAlertRequest, match="7 days"):
        node.engine.silence(alert.id, 8 * 24 * 3600, "long", "erin")


def test_cleared_alert_cannot_be_acknowledged(tmp_path: Path) -> None:
    node = Node(tmp_path / "j.sqlite3", (1, 3, "lost", None), (3, 3, "recover", None))
    node.run(5)
    cleared = node.journal.alerts(firing=False)[0]
    with pytest.raises(AlertNotFiring, match="already cleared"):
        node.engine.acknowledge(cleared.id, "erin", "")


def test_full_disk_holds_events_and_writes_them_later(tmp_path: Path) -> None:
    node = Node(tmp_path / "j.sqlite3", (3, 1, "lost", None), (5, 1, "recover", None))
    node.run(1)
    pages = node.journal._db.execute("PRAGMA page_count").fetchone()[0]
    node.journal._db.execute(f"PRAGMA max_page_count = {pages}")
    node.run(6)  # lost and recovered while the disk is full
    node.journal._db.execute("PRAGMA max_page_count = 1000000")
    node.run(1)
    kinds = [e.kind for e in node.journal.events_after(0)]
    assert pb.EVENT_KIND_GPU_LOST in kinds and pb.EVENT_KIND_GPU_RECOVERED in kinds
    seqs = [e.seq for e in node.journal.events_after(0)]
    assert seqs == list(range(1, len(seqs) + 1))


def test_a_reserved_gpu_left_idle_raises_idle(tmp_path: Path) -> None:
    settings = AlertSettings(idle=IdleSettings(after_s=10.0))
    node = Node(tmp_path / "j.sqlite3", settings=settings)
    # GPUs 0 and 1 of this seed are idle with no process; only GPU 1 is reserved.
    node.engine.set_reservation_lookup(lambda gpu: "team:ml" if gpu == 1 else None)
    node.run(15)
    idle = [a for a in node.engine.firing() if a.rule == "idle"]
    assert [(a.gpu_index, "reserved for team:ml" in a.summary) for a in idle] == [(1, True)]


def test_an_unkillable_process_raises_a_critical_alert_until_it_is_gone(tmp_path: Path) -> None:
    node = Node(tmp_path / "j.sqlite3")
    node.run(2)
    (stuck,) = node.backend.read_processes()[2]
    node.engine.report_unkillable(2, stuck.pid, f"pid {stuck.pid} on GPU 2: unkillable")
    node.run(1)
    (alert,) = [a for a in node.engine.firing() if a.rule == "unkillable"]
    assert (alert.gpu_index, alert.severity, alert.pid) == (2, Severity.CRITICAL, stuck.pid)
    assert node.backend.remove_simulated_process(2, stuck.pid)
    node.run(1)
    assert [a for a in node.engine.firing() if a.rule == "unkillable"] == []


def test_an_alert_carries_its_peak_and_announces_new_peaks_sparingly(tmp_path: Path) -> None:
    """The row showed 85 °C (the value at raise) while the tile showed 98 °C."""
    node = Node(tmp_path / "j.sqlite3", (1, 2, "overheat", None), (80, 2, "cool", None))
    node.run(79)
    alert = next(a for a in node.engine.firing() if a.rule == "gpu_temp")
    temp = [e for e in node.journal.events_after(0) if e.alert.rule == "gpu_temp"]
    raised_at = temp[0].alert.value
    assert alert.peak_value is not None and alert.value is not None
    assert alert.peak_value >= alert.value and alert.peak_value > raised_at + 1
    # Each announcement is a higher peak, and they come at most every 5 s.
    peaks = [e.alert.peak_value for e in temp]
    assert peaks == sorted(peaks)
    assert 0 <= alert.peak_value - temp[-1].alert.peak_value < max(1.0, 0.02 * alert.peak_value)
    times = [e.time_unix_ms for e in temp[1:]]
    assert all(b - a >= 5000 for a, b in itertools.pairwise(times))
    assert len(temp) < 79 // 5 + 2
    node.run(300)  # cooling: the peak stays, the value falls
    cleared = [e for e in node.journal.events_after(0) if e.alert.rule == "gpu_temp"][-1]
    assert cleared.kind == pb.EVENT_KIND_ALERT_CLEARED
    assert cleared.alert.peak_value == alert.peak_value > cleared.alert.value
