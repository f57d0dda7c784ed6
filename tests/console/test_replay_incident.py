"""Incident replay against a whole incident (#30): 20 moments, every GPU, three checks.

A small fleet plays an incident in compressed time, each node keeping its history on
disk: on gpu-cool GPU 1's cooling fails (a critical temperature alert; self-healing caps
its power; an operator acknowledges the alert and drains the GPU; it cools and the
alert clears), on gpu-xid GPU 0 throws an Xid storm while alice holds a reservation on
its GPU 1 (released later), and gpu-quiet, a daemon process of its own, stops
answering for a while (SIGSTOP) and comes back. Then the console's cursor visits 20
moments spread over the incident, and at each the replayed console shows, for every
GPU of every node:

- the readings the daemon recorded then: QueryHistory's raw point at or before the
  moment when one is near it (the tier's reach), else nothing (gpu-quiet's gap);
- the alerts firing then, as each node's event journal has them (folded event by event
  here, not through GetStateAt);
- the reservations and drains in force then, as the journal's events say.

The incident is compressed: the scenarios' simulated minutes pass in seconds (the
daemons stamp with the wall clock), so the 20 moments lie within about 15 s. A
two-hour incident seeded into the stores at past times is still to be made.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from PySide6.QtWidgets import QApplication

from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.qt import roles
from console.session import ConsoleSession
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.history.moment import MIN_NEAR_MS, NEAR_STEPS
from node_daemon.history.settings import HistorySettings
from tests.conftest import DaemonFactory, wait_for
from tests.console.test_replay import HEAT_AND_COOL, firing_ids
from tests.daemon_process import DaemonProcess
from tests.node_daemon.journal import events_after
from tests.node_daemon.test_healing_daemon import settings
from tests.node_daemon.test_state_at import (
    a_moment,
    critical_alert,
    firing_in,
    hot_alert,
    now_ms,
)

pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support grabbing the keyboard", extend=True
)

MOMENTS = 20
POWER_CAP = settings('[healing]\nmode = "on"\n[healing.power_cap]\nabove_c = 80\n'
                     "above_for_s = 1\ncool_c = 70\nrestore_after_cool_s = 1\n")  # fmt: skip
# GPU 0 of gpu-xid: graphics engine exceptions, one a sample for 12 samples.
XID_STORM = Scenario(tuple(ScenarioEvent(10.0 + 5 * i, 0, "xid", 13.0) for i in range(12)))
QUIET_FOR_S = 8.0  # gpu-quiet's silence: several times the raw tier's reach


@dataclass
class Node:
    target: str
    stub: pb_grpc.NodeServiceStub


@dataclass
class Incident:
    nodes: list[Node]
    start: int  # Unix ms
    end: int


def _cleared(stub: pb_grpc.NodeServiceStub) -> bool:
    alert = hot_alert(stub, include_cleared=True)
    return alert is not None and alert.HasField("cleared_unix_ms")


def _on_disk_past(stub: pb_grpc.NodeServiceStub, at_ms: int) -> bool:
    """The node's raw tier holds a point after `at_ms` (committed: QueryHistory reads it)."""
    answer = stub.QueryHistory(pb.QueryHistoryRequest(start_unix_ms=at_ms, metrics=["temp_gpu_c"]),
                               timeout=5)  # fmt: skip
    return bool(answer.timestamps_unix_ms)


@pytest.fixture
def incident(start_daemon: DaemonFactory, tmp_path: Path) -> Iterator[Incident]:
    history = HistorySettings(flush_interval_s=0.5)
    start = now_ms()
    cool = start_daemon(backend=SimulatedBackend(gpu_count=2, scenario=HEAT_AND_COOL, step_s=5.0),
                        hostname="gpu-cool", healing=POWER_CAP, history=history)  # fmt: skip
    xid = start_daemon(backend=SimulatedBackend(gpu_count=2, scenario=XID_STORM, step_s=5.0),
                       hostname="gpu-xid", history=history)  # fmt: skip
    (tmp_path / "quiet").mkdir()
    quiet = DaemonProcess(tmp_path / "quiet", "--backend", "simulated", "--gpus", "2",
                          "--interval", "0.5", "--hostname", "gpu-quiet").start()  # fmt: skip
    targets = [str(cool.address), str(xid.address), quiet.address]
    channels = [grpc.insecure_channel(t) for t in targets]
    try:
        nodes = [
            Node(t, pb_grpc.NodeServiceStub(c)) for t, c in zip(targets, channels, strict=True)
        ]
        on_cool, on_xid, on_quiet = (n.stub for n in nodes)
        made = on_xid.Reserve(pb.ReserveRequest(gpu_indices=[1], holder="alice",
                                                until_unix_ms=start + 3_600_000,
                                                reason="incident"), timeout=5)  # fmt: skip
        wait_for(lambda: _on_disk_past(on_quiet, start), 20, "gpu-quiet's first samples")
        # The moments begin once every node samples, so each lies in their raw tiers. (An
        # earlier one is answered from a 10 s step that begins before it: a loaded machine
        # starts gpu-quiet's process seconds late.)
        start = a_moment()
        assert quiet.proc is not None
        os.kill(quiet.proc.pid, signal.SIGSTOP)  # gpu-quiet stops answering
        stopped = a_moment()
        wait_for(lambda: critical_alert(on_cool) is not None, 40, "gpu-cool's critical alert")
        alert = critical_alert(on_cool)
        assert alert is not None
        on_cool.AcknowledgeAlert(pb.AcknowledgeAlertRequest(alert_id=alert.id, comment="fans"),
                                 timeout=5)  # fmt: skip
        on_cool.DrainGpu(pb.DrainGpuRequest(gpu_index=1, drain=True, reason="cooling"), timeout=5)
        wait_for(lambda: now_ms() > stopped + QUIET_FOR_S * 1000, 30, "gpu-quiet's silence")
        os.kill(quiet.proc.pid, signal.SIGCONT)
        on_xid.ReleaseReservation(pb.ReleaseReservationRequest(reservation_id=made.id),
                                  timeout=5)  # fmt: skip
        wait_for(lambda: _cleared(on_cool), 60, "gpu-cool's alert cleared as it cooled")
        end = a_moment()
        for node in nodes:  # the whole incident committed on every node
            wait_for(lambda n=node: _on_disk_past(n.stub, end), 20, f"{node.target} flushed")
        yield Incident(nodes, start, end)
    finally:
        for channel in channels:
            channel.close()
        if quiet.proc is not None and quiet.proc.poll() is None:
            os.kill(quiet.proc.pid, signal.SIGCONT)
        quiet.stop()


# -- what the nodes recorded, read here independently of GetStateAt -------------------


def recorded_temps(
    stub: pb_grpc.NodeServiceStub, at_ms: int, gpus: int, step_ms: int = 0
) -> list[float | None]:
    """Each GPU's raw point at or before the moment within the raw tier's reach (NEAR_STEPS
    of its `step_ms`, at least MIN_NEAR_MS), else None."""
    near_ms = max(NEAR_STEPS * step_ms, MIN_NEAR_MS)
    near = stub.QueryHistory(pb.QueryHistoryRequest(start_unix_ms=at_ms - near_ms,
                                                    end_unix_ms=at_ms, metrics=["temp_gpu_c"]),
                             timeout=5)  # fmt: skip
    # The reach the node's answer implies is the one asked over.
    assert near.tier == "raw" and max(NEAR_STEPS * near.step_ms, MIN_NEAR_MS) == near_ms, near
    temps: list[float | None] = []
    for gpu in range(gpus):
        series = next((s for s in near.series if s.gpu_index == gpu), None)
        points = [] if series is None else [v for v in series.values if v == v]  # NaN: none
        temps.append(points[-1] if points else None)
    return temps


@dataclass
class Journal:
    """One node's events, folded as of a moment."""

    events: list[pb.Event]

    def firing(self, at_ms: int) -> set[str]:
        return set(firing_in(self.events, at_ms))

    def reserved(self, at_ms: int) -> dict[int, str]:
        """GPU → the reservation holding it."""
        latest: dict[str, pb.Event] = {}
        for event in self.events:
            if event.HasField("reservation") and event.time_unix_ms <= at_ms:
                latest[event.reservation.id] = event
        return {gpu: e.reservation.id for e in latest.values()
                if e.kind == pb.EVENT_KIND_RESERVATION_MADE
                and e.reservation.until_unix_ms > at_ms
                for gpu in e.reservation.gpu_indices}  # fmt: skip

    def drained(self, at_ms: int) -> set[int]:
        state: dict[int, bool] = {}
        for event in self.events:
            if event.time_unix_ms > at_ms or not event.HasField("condition"):
                continue
            if event.kind in (pb.EVENT_KIND_GPU_DRAINED, pb.EVENT_KIND_GPU_UNDRAINED):
                state[event.condition.gpu_index] = event.kind == pb.EVENT_KIND_GPU_DRAINED
        return {gpu for gpu, drained in state.items() if drained}


def window_on(qtbot, start_window, nodes: list[Node], gpus: int) -> MainWindow:  # type: ignore[no-untyped-def]
    """A console on the nodes, once each is connected and has sent its `gpus` GPUs."""
    window: MainWindow = start_window(ConsoleSession([n.target for n in nodes]),
                                      size=(1400, 800))  # fmt: skip
    fleet = window.session.fleet
    qtbot.waitUntil(lambda: all(n.state is LinkState.CONNECTED and len(n.live_latest) == gpus
                                for n in fleet), timeout=20_000)  # fmt: skip
    window.activateWindow()
    qtbot.waitUntil(lambda: QApplication.activeWindow() is window, timeout=3000)
    return window


@pytest.fixture
def window(qtbot, start_window, incident: Incident) -> MainWindow:  # type: ignore[no-untyped-def]
    return window_on(qtbot, start_window, incident.nodes, 2)


def test_twenty_moments_of_an_incident_show_what_the_nodes_recorded(
    qtbot, window: MainWindow, incident: Incident
) -> None:  # type: ignore[no-untyped-def]
    span = incident.end - incident.start
    moments = [incident.start + 1000 + (span - 1000) * i // (MOMENTS - 1) for i in range(MOMENTS)]
    seen = check_moments(qtbot, window, incident.nodes, moments, gpus=2)
    # The moments did cross each part of the incident.
    assert all(seen.values()), seen


def check_moments(  # type: ignore[no-untyped-def]
    qtbot, window: MainWindow, nodes: list[Node], moments: list[int], gpus: int,
    step_ms: int = 0,
) -> dict[str, int]:  # fmt: skip
    """Show each moment in the console and check every GPU of every node against what
    the node recorded; how many alerts, gaps, reservations and drains were seen."""
    fleet, items = window.session.fleet, window.session.items
    journals = {n.target: Journal(events_after(n.stub)) for n in nodes}
    console_rules = {"node_not_responding"}  # the console's own, not a node's
    seen = {"alerts": 0, "gaps": 0, "reserved": 0, "drained": 0}
    for i, at in enumerate(moments):
        window.session.replay.show(at)
        qtbot.waitUntil(lambda at=at: all(n.moment is not None and n.moment.answered
                                          and n.moment.at_ms == at for n in fleet),
                        timeout=15_000)  # fmt: skip
        firing = firing_ids(window)
        expected_firing: set[str] = set()
        for node in nodes:
            journal = journals[node.target]
            expected_firing |= journal.firing(at)
            temps = recorded_temps(node.stub, at, gpus, step_ms)
            reserved, drained = journal.reserved(at), journal.drained(at)
            for gpu in range(gpus):
                tile = items.gpu_index(node.target, gpu)
                where = (i, at, fleet.name_of(node.target), gpu)
                shown = roles.value(tile, TEMP_GPU_C)
                if temps[gpu] is None:
                    assert shown is None, where
                    seen["gaps"] += 1
                else:
                    assert shown == pytest.approx(temps[gpu], rel=1e-6), where
                held = tile.data(roles.RESERVATION_ROLE)
                assert (held.id if held is not None else None) == reserved.get(gpu), where
                condition = tile.data(roles.CONDITION_ROLE)
                is_drained = condition is not None and condition.drained
                assert is_drained == (gpu in drained), where
                seen["reserved"] += gpu in reserved
                seen["drained"] += is_drained
        model = window.alerts.alert_model
        by_id = {model.alert(r).id: model.alert(r) for r in range(model.rowCount())}
        node_firing = {a for a in firing if by_id[a].rule not in console_rules}
        assert node_firing == expected_firing, (i, at)
        seen["alerts"] += len(expected_firing)
    return seen
