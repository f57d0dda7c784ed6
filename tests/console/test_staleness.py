"""A node gone quiet, without Qt: the data watchdog, the console's own alert, the fleet model.

The clocks are in the test's hand (FakeClock), so every deadline is crossed by
a step of the test, not by waiting.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from console.connections.heartbeat import BEAT_S, STALL_S, NetHeartbeat
from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.identity import Identity
from console.fleet.model import Change, FleetModel
from console.fleet.not_responding import RULE, NotRespondingAlarm, is_local
from console.fleet.staleness import LINK_GRACE_S, MIN_STALE_S, DataWatchdog
from console.fleet.updates import (
    AlertsUpdate,
    EventUpdate,
    IdentityUpdate,
    InventoryUpdate,
    LinkState,
    LinkUpdate,
)
from console.qt.event_model import COLUMNS, EventLogModel
from gpufleet.policy import LOCAL_USER, Role
from gpufleet.v1.alert_severity import Severity
from tests.console.test_fleet_model import TARGET, info, samples

OTHER = "127.0.0.1:2"


class FakeClock:
    """Monotonic and wall time at once, moved by the test."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


# -- the watchdog --------------------------------------------------------------


def watching(clock: FakeClock, interval_s: float = 1.0) -> DataWatchdog:
    dog = DataWatchdog(clock)
    dog.set_interval(TARGET, interval_s)
    dog.link(TARGET, LinkState.CONNECTED)
    dog.batch(TARGET, clock.now)
    return dog


def test_a_node_is_stale_after_three_intervals_without_a_batch(clock: FakeClock) -> None:
    dog = watching(clock, interval_s=1.0)
    clock.step(2.9)
    assert dog.quiet() == {}
    clock.step(0.2)
    quiet = dog.quiet()[TARGET]
    assert quiet.stale and quiet.not_responding
    assert quiet.silent_s == pytest.approx(3.1) and quiet.stale_after_s == 3.0
    dog.batch(TARGET, clock.now)
    assert dog.quiet() == {}  # data again: fresh at once


def test_the_deadline_follows_the_interval_with_a_floor(clock: FakeClock) -> None:
    assert watching(clock, interval_s=5.0).stale_after_s(TARGET) == 15.0
    assert watching(clock, interval_s=0.1).stale_after_s(TARGET) == MIN_STALE_S


def test_without_an_interval_the_batch_timestamps_give_it(clock: FakeClock) -> None:
    dog = DataWatchdog(clock)
    dog.set_interval(TARGET, 0.0)  # an inventory that does not say
    for _ in range(5):
        dog.batch(TARGET, clock.now)
        clock.step(2.0)
    assert dog.stale_after_s(TARGET) == 6.0


def test_replayed_older_batches_do_not_move_the_last_batch_time(clock: FakeClock) -> None:
    dog = watching(clock)
    newest = clock.now
    clock.step(0.5)
    dog.batch(TARGET, newest - 60)  # a replay of held history
    clock.step(MIN_STALE_S * 10)
    assert dog.quiet()[TARGET].last_batch_unix_s == newest


def test_a_link_down_for_the_grace_time_is_not_responding_before_the_data_deadline(
    clock: FakeClock,
) -> None:
    dog = watching(clock, interval_s=10.0)  # data deadline 30 s
    dog.link(TARGET, LinkState.RECONNECTING, "UNAVAILABLE: keepalive watchdog timeout")
    quiet = dog.quiet()[TARGET]
    assert not quiet.stale and not quiet.not_responding  # shown (link state), not alarmed
    clock.step(LINK_GRACE_S)
    quiet = dog.quiet()[TARGET]
    assert quiet.not_responding and not quiet.stale
    assert quiet.link is LinkState.RECONNECTING and "keepalive" in quiet.link_detail


def test_a_link_back_within_the_grace_time_raises_nothing(clock: FakeClock) -> None:
    dog = watching(clock, interval_s=10.0)
    dog.link(TARGET, LinkState.RECONNECTING)
    clock.step(LINK_GRACE_S / 2)
    dog.link(TARGET, LinkState.CONNECTED)
    clock.step(LINK_GRACE_S)
    assert dog.quiet() == {}


def listening(clock: FakeClock) -> tuple[DataWatchdog, NetHeartbeat]:
    """A watched node, and the console's network heartbeat beating on the same clock."""
    dog, heart = watching(clock, interval_s=1.0), NetHeartbeat(clock)
    dog.listen_from(heart.listening_since)
    heart.beat()
    return dog, heart


def beat_for(clock: FakeClock, heart: NetHeartbeat, seconds: float) -> None:
    for _ in range(round(seconds / BEAT_S)):
        clock.step(BEAT_S)
        heart.beat()


def test_the_consoles_own_stall_is_not_the_nodes_silence(clock: FakeClock) -> None:
    """The network thread could not run for 10 s: nothing is judged meanwhile, and the
    node's silence counts from the end of the stall, not from its last batch."""
    dog, heart = listening(clock)
    clock.step(10.0)  # no beat: the loop is stalled (suspended, starved)
    assert heart.listening_since() == clock.now
    assert dog.quiet() == {}  # 10 s without data, yet the console could not listen
    heart.beat()  # the loop runs again
    assert (heart.stalls, heart.longest_stall_s) == (1, pytest.approx(10.0))
    beat_for(clock, heart, 2.9)
    assert dog.quiet() == {}  # 2.9 s of listening: within the 3 s deadline
    beat_for(clock, heart, 0.2)
    quiet = dog.quiet()[TARGET]  # 3.1 s listened to, and nothing: the node's silence now
    assert quiet.stale and quiet.not_responding
    assert quiet.silent_s == pytest.approx(13.1)  # what the alert says: since its last batch


def test_a_late_beat_under_the_stall_threshold_changes_nothing(clock: FakeClock) -> None:
    dog, heart = listening(clock)
    for _ in range(8):
        clock.step(STALL_S - 0.05)  # a busy loop, never stalled
        heart.beat()
    assert heart.stalls == 0
    assert dog.quiet()[TARGET].stale  # 3.6 s silent, all of it listened to


def test_before_the_loops_first_beat_the_data_alone_is_judged(clock: FakeClock) -> None:
    dog, heart = watching(clock, interval_s=1.0), NetHeartbeat(clock)
    dog.listen_from(heart.listening_since)
    assert heart.listening_since() is None
    clock.step(3.1)
    assert dog.quiet()[TARGET].stale


def test_a_node_that_never_sent_data_is_not_judged(clock: FakeClock) -> None:
    dog = DataWatchdog(clock)
    dog.link(TARGET, LinkState.UNREACHABLE)
    clock.step(600)
    assert dog.quiet() == {}


# -- the alarm -----------------------------------------------------------------


def name_of(target: str) -> str:
    return {TARGET: "gpu-node-03", OTHER: "gpu-node-04"}[target]


def test_the_alarm_raises_once_per_outage_and_clears(clock: FakeClock) -> None:
    dog, alarm = watching(clock), NotRespondingAlarm(clock)
    clock.step(4.0)
    raised = alarm.update(dog.quiet(), name_of)
    assert [e.kind for e in raised] == ["alert_raised"]
    alert = raised[0].alert
    assert alert is not None and alert.firing and is_local(alert)
    assert (alert.rule, alert.severity, alert.gpu_index) == (RULE, Severity.CRITICAL, None)
    assert alert.summary.startswith("gpu-node-03 not responding: no data for 4 s (last batch ")
    clock.step(1.0)
    assert alarm.update(dog.quiet(), name_of) == []  # still quiet: nothing new
    dog.batch(TARGET, clock.now)
    cleared = alarm.update(dog.quiet(), name_of)
    assert [e.kind for e in cleared] == ["alert_cleared"]
    assert cleared[0].alert is not None and not cleared[0].alert.firing
    assert cleared[0].summary == "gpu-node-03 responding again after 5 s without data"
    clock.step(4.0)
    again = alarm.update(dog.quiet(), name_of)[0].alert
    assert again is not None and again.id != alert.id  # a new outage, announced anew


def test_the_alarms_events_count_down_from_minus_one(clock: FakeClock) -> None:
    dog, alarm = watching(clock), NotRespondingAlarm(clock)
    clock.step(4.0)
    events = alarm.update(dog.quiet(), name_of)
    dog.batch(TARGET, clock.now)
    events += alarm.update(dog.quiet(), name_of)
    assert [e.seq for e in events] == [-1, -2]


def test_the_summary_names_the_link_when_it_is_down(clock: FakeClock) -> None:
    dog, alarm = watching(clock), NotRespondingAlarm(clock)
    dog.link(TARGET, LinkState.RECONNECTING, "UNAVAILABLE: Connection reset by peer")
    clock.step(LINK_GRACE_S)
    alert = alarm.update(dog.quiet(), name_of)[0].alert
    assert alert is not None
    assert alert.summary.startswith(
        "gpu-node-03 not responding: link reconnecting (UNAVAILABLE: Connection reset by peer) "
        "for 2 s; last batch "
    )
    clock.step(2.0)  # and once the data is stale too, both
    refused = "UNAVAILABLE: failed to connect to all addresses; last error: UNKNOWN: ipv4:..."
    dog.link(TARGET, LinkState.UNREACHABLE, refused)
    alarm.update({}, name_of)  # (cleared, to raise anew with the new words)
    again = alarm.update(dog.quiet(), name_of)[0].alert
    assert again is not None
    assert again.summary.endswith(
        "; link unreachable (UNAVAILABLE: failed to connect to all addresses)"
    )  # gRPC's first clause only
    assert "no data for 4 s" in again.summary


# -- the fleet model -------------------------------------------------------------


def streaming_fleet(clock: FakeClock) -> FleetModel:
    fleet = FleetModel(ring_capacity=16, clock=clock, wall_clock=clock)
    for target in (TARGET, OTHER):
        fleet.add_node(target)
        fleet.apply(InventoryUpdate(target, replace(info(), hostname=name_of(target))))
        fleet.apply(LinkUpdate(target, LinkState.CONNECTED))
    feed(fleet, clock, TARGET)
    feed(fleet, clock, OTHER)
    return fleet


def feed(fleet: FleetModel, clock: FakeClock, target: str) -> None:
    fleet.apply(replace(samples(clock.now, 40.0), target=target))


def local_alert(fleet: FleetModel) -> AlertRow:
    """TARGET's not-responding alert (OTHER may have one too)."""
    found = [a for a in fleet.alerts.alerts() if is_local(a) and a.target == TARGET]
    assert len(found) == 1, found
    return found[0]


def daemon_alert(seq: int) -> AlertRow:
    return AlertRow(
        target=TARGET, id=f"a-{seq}", key="gpu_temp/0", rule="gpu_temp",
        severity=Severity.WARNING, firing=True, gpu_index=0, gpu_uuid="GPU-a0", pid=None,
        value=80.0, unit="°C", summary="GPU 0 temperature 80 °C", started_unix_ms=1,
        updated_unix_ms=1, cleared_unix_ms=None, occurrences=1, acknowledged_by="",
        acknowledged_unix_ms=None, silenced_until_unix_ms=None, silenced_by="",
        silence_reason="",
    )  # fmt: skip


def test_the_model_marks_the_silent_node_and_raises_its_alert(clock: FakeClock) -> None:
    fleet = streaming_fleet(clock)
    clock.step(2.0)
    feed(fleet, clock, OTHER)
    assert fleet.check_staleness() == {}
    clock.step(1.5)  # TARGET: 3.5 s without a batch; OTHER: 1.5 s
    feed(fleet, clock, OTHER)
    assert fleet.check_staleness() == {TARGET: Change.DATA}
    quiet = fleet.quiet(TARGET)
    assert quiet is not None and quiet.stale and fleet.quiet(OTHER) is None
    events = fleet.take_new_events()
    assert [(e.target, e.kind) for e in events] == [(TARGET, "alert_raised")]
    assert fleet.alert_severity(TARGET, None, int(clock.now * 1000)) is Severity.CRITICAL
    clock.step(0.3)
    assert fleet.check_staleness() == {}  # the same whole second of age: nothing to repaint
    clock.step(0.8)
    assert fleet.check_staleness() == {TARGET: Change.DATA}  # "no data 4 s" now
    feed(fleet, clock, TARGET)
    assert fleet.check_staleness() == {TARGET: Change.DATA}
    assert fleet.quiet(TARGET) is None and not local_alert(fleet).firing
    assert [e.kind for e in fleet.take_new_events()] == ["alert_cleared"]


def test_a_nodes_alert_listing_keeps_the_consoles_own_alert(clock: FakeClock) -> None:
    fleet = streaming_fleet(clock)
    clock.step(4.0)
    fleet.check_staleness()
    # The node reconnects: its listing replaces its alerts, and its journal goes on.
    fleet.apply(AlertsUpdate(TARGET, (daemon_alert(7),), "journal-1", last_seq=7))
    assert {a.id for a in fleet.alerts.alerts() if a.target == TARGET} == {
        "a-7", local_alert(fleet).id,
    }  # fmt: skip
    assert fleet.alerts.last_seq(TARGET, "journal-1") == 7  # the resume point is the node's
    event = EventRow(TARGET, 8, 1, "alert_raised", 0, "", "", daemon_alert(8), False)
    assert fleet.apply(EventUpdate(TARGET, event, "journal-1")) is Change.DATA
    assert fleet.alerts.last_seq(TARGET, "journal-1") == 8
    assert local_alert(fleet).firing


def test_acknowledging_the_consoles_alert_stays_in_the_console(clock: FakeClock) -> None:
    fleet = streaming_fleet(clock)
    clock.step(4.0)
    fleet.check_staleness()
    fleet.take_new_events()
    assert fleet.acknowledge_local(local_alert(fleet), "otto")
    alert = local_alert(fleet)
    assert alert.acknowledged and alert.acknowledged_by == "otto"
    assert [e.kind for e in fleet.take_new_events()] == ["alert_acknowledged"]
    assert not fleet.acknowledge_local(daemon_alert(3), "otto")  # the node's: send it there


def test_the_consoles_alert_names_us_as_the_node_does(clock: FakeClock) -> None:
    """Acknowledged and silenced by our name on the node (its WhoAmI: "local" without
    authentication), the name the node's own records give us, not the login name."""
    fleet = streaming_fleet(clock)
    fleet.apply(IdentityUpdate(TARGET, Identity(LOCAL_USER, Role.ADMIN, (), "none")))
    clock.step(4.0)
    fleet.check_staleness()
    assert fleet.acknowledge_local(local_alert(fleet), "otto")  # otto: the login name
    assert fleet.silence_local(local_alert(fleet), 600, "otto", "rebooting it")
    alert = local_alert(fleet)
    assert (alert.acknowledged_by, alert.silenced_by) == (LOCAL_USER, LOCAL_USER)
    ours = [e.actor for e in fleet.take_new_events() if e.kind != "alert_raised"]
    assert ours == [LOCAL_USER, LOCAL_USER]  # the acknowledgement's event, the silence's


def test_silencing_the_consoles_alert_stays_in_the_console(clock: FakeClock) -> None:
    fleet = streaming_fleet(clock)
    clock.step(4.0)
    fleet.check_staleness()
    assert fleet.silence_local(local_alert(fleet), 600, "otto", "rebooting it")
    alert = local_alert(fleet)
    assert alert.silenced(int(clock.now * 1000)) and alert.silence_reason == "rebooting it"
    assert fleet.alert_severity(TARGET, None, int(clock.now * 1000)) is None
    assert not fleet.silence_local(daemon_alert(3), 600, "otto", "")


def test_the_link_state_reaches_the_watchdog(clock: FakeClock) -> None:
    fleet = streaming_fleet(clock)
    fleet.apply(LinkUpdate(TARGET, LinkState.RECONNECTING, "UNAVAILABLE: Socket closed"))
    clock.step(LINK_GRACE_S)  # within the data deadline (3 s): the link's word raises it
    feed(fleet, clock, OTHER)
    fleet.check_staleness()
    quiet = fleet.quiet(TARGET)
    assert quiet is not None and not quiet.stale and quiet.not_responding
    assert local_alert(fleet).summary.startswith(
        "gpu-node-03 not responding: link reconnecting (UNAVAILABLE: Socket closed) for 2 s; "
        "last batch "
    )


def test_the_alerts_value_is_how_long_the_node_has_been_quiet(clock: FakeClock) -> None:
    fleet = streaming_fleet(clock)
    clock.step(3.5)
    fleet.check_staleness()
    assert local_alert(fleet).value == 3.0
    version = fleet.alerts.version
    clock.step(0.3)
    fleet.check_staleness()
    assert fleet.alerts.version == version  # the same whole second: no news for the table
    clock.step(2.5)
    fleet.check_staleness()
    assert (local_alert(fleet).value, local_alert(fleet).peak_value) == (6.0, 6.0)
    fleet.take_new_events()
    feed(fleet, clock, TARGET)
    fleet.check_staleness()
    cleared = local_alert(fleet)
    assert not cleared.firing and cleared.value == cleared.peak_value == pytest.approx(6.3)
    assert fleet.take_new_events()[0].kind == "alert_cleared"  # the refreshes were no events


def test_the_events_tab_names_the_consoles_own_events_as_such() -> None:
    model = EventLogModel()
    node_event = EventRow(TARGET, 12, 1_800_000_000_000, "alert_raised", None, "hot", "", None,
                          False)  # fmt: skip
    model.add_events([node_event, replace(node_event, seq=-1, summary="not responding")])
    seq = COLUMNS.index("Seq")
    assert [model.index(r, seq).data() for r in range(2)] == ["console", "12"]
