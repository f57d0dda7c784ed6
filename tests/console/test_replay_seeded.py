"""Incident replay and the incident report over a two-hour incident at its real past times
(#30's acceptance).

node_daemon/seeded_incident.py writes the last two hours of four simulated nodes into
their state directories with the daemon's own classes: a cooling failure on gpu-cool
(a critical alert, self-healing's power cap, carol's acknowledgement and drain, the
return to placement), an Xid storm on gpu-xid while alice and bob hold reservations
there, gpu-quiet hung for a quarter of an hour, gpu-calm at work throughout. Real
daemons then serve those directories, and the console's cursor visits 20 moments of
the two hours: at each, every GPU of every node shows the temperature QueryHistory's
raw tier holds within the step, the alerts the journal says were firing, and the
reservations and drains then (tests/console/test_replay_incident.py's checks, which
the compressed live incident also runs). And `gpufleet report` over the same two hours
tells the whole story: the alerts with their acknowledgement, who did what, what
self-healing did, and gpu-quiet's silence, which its journal cannot tell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest

from console.fleet.timeline import BACK, OUTAGE, RAISE_SLACK_MS
from console.main_window import MainWindow
from console.views.plots.gpu_plots import GpuPlots
from console.views.plots.plot_readout import value_at
from console.views.replay import player as replay_player
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.seeded_incident import (
    GPUS,
    HISTORY,
    NODES,
    STEP_S,
    SeededFleet,
    node_healing,
    seed_fleet,
)
from tests.conftest import DaemonFactory
from tests.console.test_incident_report import local_iso, report, row_of
from tests.console.test_replay_incident import (
    MOMENTS,
    Node,
    check_moments,
    recorded_temps,
    window_on,
)
from tests.console.test_terminal import gpufleet, home  # noqa: F401
from tests.node_daemon.journal import events_after
from tests.node_daemon.test_state_at import now_ms

MARK_WORDS = {
    pb.EVENT_KIND_ALERT_ACKNOWLEDGED: "acknowledged",
    pb.EVENT_KIND_GPU_DRAINED: "drained",
    pb.EVENT_KIND_GPU_UNDRAINED: "returned to placement",
    pb.EVENT_KIND_HEALING_ACTION: "self-healing",
}

pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support grabbing the keyboard", extend=True
)

ENDED_AGO_MS = 60_000  # the incident ended a minute before the test


@dataclass
class Seeded:
    fleet: SeededFleet
    nodes: list[Node]


@pytest.fixture(scope="module")
def seeded_fleet(tmp_path_factory: pytest.TempPathFactory) -> SeededFleet:
    """The incident in its state directories, written once for the module (it takes
    seconds); each test's daemons serve it (a daemon's start adds only the present)."""
    return seed_fleet(tmp_path_factory.mktemp("seeded"), now_ms() - ENDED_AGO_MS)


@pytest.fixture
def seeded(start_daemon: DaemonFactory, seeded_fleet: SeededFleet) -> Iterator[Seeded]:
    channels, nodes = [], []
    try:
        for node in NODES:
            daemon = start_daemon(
                backend=SimulatedBackend(GPUS, seed=node.seed, step_s=STEP_S),
                hostname=node.name, state_dir=seeded_fleet.state_dirs[node.name],
                history=HISTORY, healing=node_healing(node.name),
                sample_interval_s=float(STEP_S), process_interval_s=float(STEP_S),
            )  # fmt: skip
            channels.append(grpc.insecure_channel(str(daemon.address)))
            nodes.append(Node(str(daemon.address), pb_grpc.NodeServiceStub(channels[-1])))
        yield Seeded(seeded_fleet, nodes)
    finally:
        for channel in channels:
            channel.close()


@pytest.fixture
def window(qtbot, start_window, seeded: Seeded) -> MainWindow:  # type: ignore[no-untyped-def]
    return window_on(qtbot, start_window, seeded.nodes, GPUS)


def test_twenty_moments_of_a_two_hour_incident_show_what_the_nodes_recorded(
    qtbot, window: MainWindow, seeded: Seeded, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    step_ms = STEP_S * 1000
    start, span = seeded.fleet.start_ms + step_ms, seeded.fleet.end_ms - seeded.fleet.start_ms
    # Spread over the two hours, off the ticks' stamps by a part of a step.
    moments = [start + (span - step_ms) * i // (MOMENTS - 1) + 1234 for i in range(MOMENTS)]
    seen = check_moments(qtbot, window, seeded.nodes, moments, gpus=GPUS, step_ms=step_ms)
    # The moments crossed each part of the incident: gpu-cool's critical alert and drain,
    # the reservations on gpu-xid, gpu-quiet's silence.
    assert seen["alerts"] and seen["drained"] and seen["reserved"] and seen["gaps"], seen

    # The timeline marks the night's actions and raises, though every one of them came
    # before the console connected: each node's journal, asked for the window.
    wanted = {"acknowledged", "drained", "returned to placement", "self-healing"}
    journal = {(e.time_unix_ms, MARK_WORDS[e.kind])
               for n in seeded.nodes for e in events_after(n.stub)
               if e.kind in MARK_WORDS}  # fmt: skip
    assert {w for _, w in journal} == wanted
    qtbot.waitUntil(lambda: journal <= {(m.at_ms, m.what) for m in window.replay.event_marks},
                    timeout=10_000)  # fmt: skip
    # gpu-quiet hung from minute 60 to 75: its journal has nothing of it, its history a
    # gap, marked as the console's own outages are (from the first sample it missed).
    # (Every node's history has another gap: from the incident's end to its daemon's start.)
    hung, back = (seeded.fleet.start_ms + m * 60_000 for m in (60, 75))

    def outages() -> set[tuple[int, str, str]]:
        return {(m.at_ms, m.what, m.text.split(":")[0]) for m in window.replay.event_marks
                if m.what in (OUTAGE, BACK) and m.at_ms <= seeded.fleet.end_ms}  # fmt: skip

    wanted_outage = {(hung, OUTAGE, "gpu-quiet"), (back, BACK, "gpu-quiet")}
    qtbot.waitUntil(lambda: outages() == wanted_outage, timeout=10_000)
    raises = {a.started_unix_ms + RAISE_SLACK_MS for n in seeded.nodes
              for a in n.stub.ListAlerts(pb.ListAlertsRequest(include_cleared=True)).alerts
              if a.started_unix_ms >= seeded.fleet.start_ms}  # fmt: skip
    assert raises <= {at for at, _ in window.replay.marks}

    # The detail's plots follow the cursor: gpu-cool's GPU 1 at a moment of its critical
    # alert, from the node's history (an hour and more before the console's own samples).
    cool = seeded.nodes[0]
    at = seeded.fleet.start_ms + 30 * 60_000 + 1234
    window.session.replay.show(at)
    window.detail.show_gpu(cool.target, 1)
    plots = window.findChild(GpuPlots, "gpuPlots")
    assert plots is not None
    recorded = recorded_temps(cool.stub, at, GPUS, step_ms)[1]
    assert recorded is not None and recorded >= 80
    curve = plots.curves[TEMP_GPU_C]

    def plotted_at_moment() -> float | None:
        times, values = curve.getOriginalDataset()
        return None if times is None or values is None else value_at(times, values, at / 1000)

    qtbot.waitUntil(lambda: plotted_at_moment() is not None, timeout=15_000)
    assert plotted_at_moment() == pytest.approx(recorded)
    start, end = plots.visible_range()
    assert start < at / 1000 < end and plots.moment_lines[0].value() == at / 1000

    # Play under a budget of one ask a frame: the nodes move in turn, none left behind,
    # and pausing asks the ones behind for the moment it stopped at.
    monkeypatch.setattr(replay_player, "PLAY_ASKS_PER_FRAME", 1)
    source, player, fleet = window.session.replay, window.replay.player, window.session.fleet
    played_from = seeded.fleet.start_ms + 40 * 60_000
    source.show(played_from)
    qtbot.waitUntil(lambda: fleet.moment is not None and fleet.moment.settled, timeout=15_000)
    moves: list[int | None] = []
    source.momentChanged.connect(moves.append)
    asks = source.asks
    player.set_speed("60x")
    player.play()
    qtbot.waitUntil(lambda: all(n.moment is not None and n.moment.at_ms > played_from
                                for n in fleet), timeout=15_000)  # fmt: skip
    assert source.asks_per_move == 1 and source.asks - asks <= len(moves) + 1
    player.pause("paused")
    assert source.asks_per_move is None
    qtbot.waitUntil(lambda: fleet.moment is not None and fleet.moment.settled, timeout=15_000)


def test_the_report_of_the_two_hours_tells_the_alerts_the_people_the_healing_and_the_silence(
    home: Path,  # noqa: F811
    seeded: Seeded,
) -> None:
    fleet = seeded.fleet
    nodes = [word for node in seeded.nodes for word in ("--node", node.target)]
    window = ("--from", local_iso(fleet.start_ms), "--to", local_iso(fleet.end_ms))
    code, out, err, page = report(home, *nodes, *window, "--no-screenshots", "--json")
    assert (code, err) == (0, "")
    said = json.loads(out)
    assert said["nodes"] == [n.name for n in NODES] and said["errors"] == []
    cool = seeded.nodes[0].stub
    alert = next(a for a in cool.ListAlerts(pb.ListAlertsRequest(include_cleared=True)).alerts
                 if a.rule == "gpu_temp")  # fmt: skip
    row = row_of(page, alert.id)
    assert "gpu-cool" in row and "critical" in row and "by carol" in row
    assert f'data-ms="{alert.cleared_unix_ms}"' in row
    audit = page.split("<h2>Who did what (audit)</h2>")[1].split("<h2>")[0]
    for who, method in (("carol", "AcknowledgeAlert"), ("carol", "DrainGpu"),
                        ("alice", "Reserve"), ("bob", "Reserve"),
                        ("alice", "ReleaseReservation")):  # fmt: skip
        assert re.search(rf"<td>{who}</td><td>{method}</td>", audit), (who, method)
    healing = page.split("<h2>Self-healing</h2>")[1].split("<h2>")[0]
    assert "power_cap" in healing and "power_restore" in healing
    # gpu-quiet hung from minute 60 to 75: its journal is silent, its history has the gap.
    outages = page.split("<h2>Node outages</h2>")[1].split("<h2>")[0]
    assert outages.count("<tr><td>") == 1, outages
    assert "gpu-quiet" in outages and "no samples for 15 min" in outages
