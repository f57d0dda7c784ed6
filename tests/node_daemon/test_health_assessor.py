"""The health assessor judged on readings alone: each reason and state, the sticky ones
across a restart (a real journal in SQLite), drains, listeners, settings."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.findings import GpuTick
from node_daemon.alerts.health_detector import HealthDetector
from node_daemon.alerts.rules import GpuHealthAlertSettings
from node_daemon.backends.readings import GpuHealth, GpuReading, GpuStatic
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.errors import ConfigError, Invalid, Refused
from node_daemon.health.assessor import HealthAssessor
from node_daemon.health.events import health_events
from node_daemon.health.model import GpuCondition, HealthState
from node_daemon.health.settings import HealthSettings, parse_health_settings
from node_daemon.health.store import StoredHealth
from node_daemon.journal.event_journal import EventJournal
from node_daemon.journal.health_store import JournalHealthStore

BOOT = "boot-1"
S = 1000  # ms


def reading(index: int = 0, **metrics: Any) -> GpuReading:
    """A healthy GPU's reading with the core metrics, plus `metrics`."""
    base: dict[str, Any] = {"temp_gpu_c": 50.0, "power_w": 200.0, "mem_used_bytes": 1 << 30,
                            "util_gpu_pct": 40.0}  # fmt: skip
    return GpuReading(index, **{**base, **metrics})


class Clock:
    """Ticks of one second, each judged."""

    def __init__(self, assessor: HealthAssessor) -> None:
        self.assessor, self.now_ms = assessor, 0

    def tick(self, *readings: GpuReading, seconds: float = 1) -> Mapping[int, GpuCondition]:
        self.now_ms += int(seconds * S)
        return self.assessor.judge(readings or (reading(),), {}, self.now_ms)

    def state(self, *readings: GpuReading, seconds: float = 1) -> HealthState:
        return self.tick(*readings, seconds=seconds)[0].state

    def codes(self, *readings: GpuReading, seconds: float = 1) -> set[str]:
        return {r.code for r in self.tick(*readings, seconds=seconds)[0].reasons}


class MemoryStore:
    """A HealthStore in memory that counts its writes."""

    def __init__(self) -> None:
        self.records: dict[int, StoredHealth] = {}
        self.saves = 0

    def load(self) -> Mapping[int, StoredHealth]:
        return dict(self.records)

    def save(self, record: StoredHealth) -> None:
        self.records[record.gpu_index] = record
        self.saves += 1


def assessor(settings: HealthSettings | None = None, **kwargs: Any) -> HealthAssessor:
    return HealthAssessor(settings or HealthSettings(), boot_id=kwargs.pop("boot_id", BOOT),
                          **kwargs)  # fmt: skip


@pytest.fixture
def clock() -> Clock:
    return Clock(assessor())


# -- signals read off the reading -----------------------------------------------------


def test_a_healthy_gpu_is_healthy_and_placeable(clock: Clock) -> None:
    condition = clock.tick()[0]
    assert condition.state is HealthState.HEALTHY and condition.reasons == ()
    assert condition.placeable and condition.refusal() is None


@pytest.mark.parametrize(
    ("metrics", "code", "state"),
    [
        ({"row_remap_failure": 1}, "row_remap_failure", HealthState.NEEDS_INSPECTION),
        ({"row_remap_pending": 1}, "row_remap_pending", HealthState.NEEDS_RESET),
        ({"retired_pages_pending": 1}, "retired_pages_pending", HealthState.NEEDS_RESET),
        ({"recovery_action": 1}, "recovery_gpu_reset", HealthState.NEEDS_RESET),
        ({"recovery_action": 2}, "recovery_node_reboot", HealthState.NEEDS_REBOOT),
        ({"recovery_action": 3}, "recovery_drain_p2p", HealthState.DEGRADED),
        ({"recovery_action": 4}, "recovery_drain_and_reset", HealthState.NEEDS_RESET),
        ({"nvlink_links_down": 2}, "nvlink_down", HealthState.DEGRADED),
        ({"ecc_uncorrected_total": 3}, "ecc_uncorrectable", HealthState.SUSPECT),
    ],
)
def test_each_signal_gives_its_reason_and_state(
    clock: Clock, metrics: dict[str, int], code: str, state: HealthState
) -> None:
    clock.tick()
    condition = clock.tick(reading(**metrics))[0]
    assert [r.code for r in condition.reasons] == [code]
    assert condition.state is state
    assert condition.reasons[0].action  # every reason says what to do
    assert condition.placeable is state.takes_new_work


def test_a_gpu_that_needs_a_reset_is_refused_naming_the_reason(clock: Clock) -> None:
    condition = clock.tick(reading(row_remap_pending=1))[0]
    assert condition.refusal() == "GPU 0 needs reset: a memory row remap waits for a GPU reset"


def test_the_down_links_are_named(clock: Clock) -> None:
    condition = clock.tick(reading(nvlink_links_down=2, nvlink_down_links=(3, 7)))[0]
    assert condition.reasons[0].summary == "2 NVLink links down (3, 7)"


def test_a_lost_gpu_needs_a_reboot(clock: Clock) -> None:
    clock.tick()
    condition = clock.tick(GpuReading(0, GpuHealth.LOST, "GPU is lost"))[0]
    assert condition.state is HealthState.NEEDS_REBOOT
    assert condition.reasons[0].code == "gpu_lost"
    assert condition.refusal() == "GPU 0 needs reboot: GPU lost: GPU is lost"


def test_a_flag_that_cannot_be_read_keeps_its_last_value(clock: Clock) -> None:
    clock.tick(reading(row_remap_pending=1))
    assert clock.state(reading()) is HealthState.NEEDS_RESET  # None: no news
    assert clock.state(reading(row_remap_pending=0)) is HealthState.HEALTHY


def test_the_worst_reason_decides_and_comes_first(clock: Clock) -> None:
    condition = clock.tick(reading(nvlink_links_down=1, row_remap_failure=1, row_remap_pending=1))[
        0
    ]
    assert condition.state is HealthState.NEEDS_INSPECTION
    assert [r.code for r in condition.reasons] == [
        "row_remap_failure", "row_remap_pending", "nvlink_down",
    ]  # fmt: skip


def test_reasons_and_state_keep_their_first_time(clock: Clock) -> None:
    clock.tick(reading(row_remap_pending=1))
    first = clock.now_ms
    condition = clock.tick(reading(row_remap_pending=1, nvlink_links_down=1))[0]
    assert condition.since_ms == first
    assert {r.code: r.since_ms for r in condition.reasons} == {
        "row_remap_pending": first, "nvlink_down": clock.now_ms,
    }  # fmt: skip


# -- Xids -----------------------------------------------------------------------------


def test_xid_79_needs_a_reboot_and_stays_until_one(clock: Clock) -> None:
    condition = clock.tick(reading(xids=(79,)))[0]
    assert condition.state is HealthState.NEEDS_REBOOT
    assert condition.reasons[0].code == "xid_79"
    assert condition.reasons[0].summary.startswith("Xid 79: ")
    assert clock.state(reading()) is HealthState.NEEDS_REBOOT  # sticky


def test_an_application_xid_counts_but_leaves_the_gpu_healthy(clock: Clock) -> None:
    clock.tick(reading(xids=(13,)))
    condition = clock.tick(reading(xids=(13, 31)))[0]
    assert condition.state is HealthState.HEALTHY
    assert condition.xid_counts == {13: 2, 31: 1}


def test_a_reset_xid_lasts_until_a_reset_is_seen(clock: Clock) -> None:
    clock.tick(reading(ecc_corrected_total=40))
    assert clock.state(reading(xids=(48,), ecc_corrected_total=41)) is HealthState.NEEDS_RESET
    assert clock.state(reading(ecc_corrected_total=41)) is HealthState.NEEDS_RESET
    # A GPU reset starts the volatile ECC counters again from 0.
    assert clock.state(reading(ecc_corrected_total=0)) is HealthState.HEALTHY


def test_a_pending_remap_that_clears_is_a_reset(clock: Clock) -> None:
    clock.tick(reading(xids=(63,), row_remap_pending=1))
    assert clock.codes(reading(row_remap_pending=1)) == {"xid_63", "row_remap_pending"}
    assert clock.state(reading(row_remap_pending=0)) is HealthState.HEALTHY


# -- repeat offenders -----------------------------------------------------------------


def test_a_gpu_faulting_again_soon_after_a_repair_needs_inspection(clock: Clock) -> None:
    clock.tick(reading(xids=(48,)))
    clock.assessor.clear(0, "ada", "GPU reset", clock.now_ms)
    assert clock.state() is HealthState.HEALTHY
    condition = clock.tick(reading(xids=(48,)), seconds=3600)[0]
    assert condition.state is HealthState.NEEDS_INSPECTION
    assert {r.code for r in condition.reasons} == {"xid_48", "repeat_offender"}
    assert "faulted again 1.0 h after its last repair" in condition.reasons[0].summary


def test_a_fault_long_after_the_repair_is_no_repeat(clock: Clock) -> None:
    clock.tick(reading(xids=(48,)))
    clock.assessor.clear(0, "ada", "GPU reset", clock.now_ms)
    condition = clock.tick(reading(xids=(48,)), seconds=25 * 3600)[0]
    assert condition.state is HealthState.NEEDS_RESET


def test_a_flag_still_set_after_a_clear_is_no_new_fault(clock: Clock) -> None:
    clock.tick()
    clock.tick(reading(row_remap_pending=1))
    clock.assessor.clear(0, "ada", "reset it", clock.now_ms)
    assert clock.codes(reading(row_remap_pending=1)) == {"row_remap_pending"}


# -- predictions ----------------------------------------------------------------------


def _counter_storm(clock: Clock, field: str, per_tick: int, ticks: int) -> set[str]:
    codes: set[str] = set()
    for n in range(ticks):
        codes = clock.codes(reading(**{field: n * per_tick}))
    return codes


@pytest.mark.parametrize(
    ("field", "code", "lead_s"),
    [
        ("ecc_corrected_total", "ecc_storm", 3600),
        ("pcie_replay_total", "pcie_replay_storm", 3600),
        ("nvlink_crc_flit_errors_total", "nvlink_storm", 1800),
        ("nvlink_replay_errors_total", "nvlink_storm", 1800),
    ],
)
def test_a_storm_is_suspect_with_its_lead_time(
    clock: Clock, field: str, code: str, lead_s: int
) -> None:
    assert _counter_storm(clock, field, per_tick=5, ticks=20) == set()  # 95 within 10 min
    condition = clock.tick(reading(**{field: 100}))[0]
    assert condition.state is HealthState.SUSPECT and condition.placeable
    (reason,) = condition.reasons
    assert (reason.code, reason.lead_time_s) == (code, lead_s)


def test_a_slow_trickle_is_no_storm(clock: Clock) -> None:
    # 9 errors a minute: 540 an hour, but never 100 within 10 minutes.
    for n in range(60):
        codes = clock.codes(reading(ecc_corrected_total=n * 9))
        clock.now_ms += 59 * S
    assert codes == set()


def test_a_storm_reason_holds_for_hold_s_after_it_ends() -> None:
    clock = Clock(assessor(HealthSettings(ecc_storm_window_s=10, hold_s=30)))
    assert "ecc_storm" in _counter_storm(clock, "ecc_corrected_total", 50, 4)
    assert clock.codes(reading(ecc_corrected_total=150), seconds=20) == {"ecc_storm"}
    assert clock.codes(reading(ecc_corrected_total=150), seconds=11) == set()


def test_remapped_rows_growing_are_suspect() -> None:
    clock = Clock(assessor())
    clock.tick(reading(remapped_rows_correctable=4))
    assert clock.codes(reading(remapped_rows_correctable=5), seconds=3600) == set()
    condition = clock.tick(reading(remapped_rows_correctable=6), seconds=3600)[0]
    assert condition.reasons[0].code == "remap_growth"
    assert condition.reasons[0].lead_time_s == 86_400


def test_error_readings_are_telemetry_gaps(clock: Clock) -> None:
    clock.tick()
    for _ in range(2):
        assert clock.codes(GpuReading(0, GpuHealth.ERROR, "Unknown Error")) == set()
    assert clock.codes(GpuReading(0, GpuHealth.ERROR, "Unknown Error")) == {"telemetry_gap"}


def test_sweeps_without_the_gpu_are_telemetry_gaps(clock: Clock) -> None:
    clock.tick(reading(0), reading(1))
    for _ in range(3):
        conditions = clock.tick(reading(1))
    assert conditions[0].reasons[0].code == "telemetry_gap"
    assert conditions[0].reasons[0].lead_time_s == 300
    assert conditions[1].reasons == ()


def test_metrics_that_stop_reading_are_telemetry_gaps(clock: Clock) -> None:
    clock.tick()
    for _ in range(3):
        codes = clock.codes(reading(temp_gpu_c=None))
    assert codes == {"telemetry_gap"}


def test_gaps_spread_thinly_are_none(clock: Clock) -> None:
    for _ in range(6):
        clock.tick()
        codes = clock.codes(GpuReading(0, GpuHealth.ERROR, "Unknown Error"), seconds=200)
    assert codes == set()


def test_a_fan_at_95_with_the_gpu_still_warming_is_cooling_failing(clock: Clock) -> None:
    for second in range(121):
        codes = clock.codes(reading(fan_pct=96.0, temp_gpu_c=60.0 + second / 30))
    assert codes == {"cooling_failing"}


def test_a_warming_gpu_with_fan_to_spare_is_no_cooling_failure(clock: Clock) -> None:
    for second in range(121):
        codes = clock.codes(reading(fan_pct=70.0, temp_gpu_c=60.0 + second / 10))
    assert codes == set()


def test_a_fan_at_its_maximum_with_the_gpu_hot_is_cooling_failing(clock: Clock) -> None:
    assert clock.codes(reading(fan_pct=100.0, temp_gpu_c=74.0)) == set()
    condition = clock.tick(reading(fan_pct=100.0, temp_gpu_c=76.0))[0]
    assert condition.reasons[0].code == "cooling_failing"
    assert condition.reasons[0].summary == "cooling failing: fan at 100 % and the GPU at 76 °C"


def test_a_lasting_hardware_slowdown_is_degraded(clock: Clock) -> None:
    assert clock.codes(reading(throttle_reasons=0x40)) == set()
    assert clock.codes(reading(throttle_reasons=0x40 | 0x4), seconds=29) == set()
    condition = clock.tick(reading(throttle_reasons=0x40 | 0x4))[0]  # 30 s on
    assert condition.state is HealthState.DEGRADED
    assert condition.reasons[0].summary == (
        "clocks held down by the hardware: hardware thermal slowdown"
    )
    assert clock.codes(reading(throttle_reasons=0x4)) == set()  # the driver's own cap is fine


def test_disabled_health_judges_nothing_but_keeps_drains() -> None:
    clock = Clock(assessor(HealthSettings(enabled=False)))
    clock.tick()
    clock.assessor.drain(0, "ada", "bad fan", clock.now_ms)
    condition = clock.tick(reading(row_remap_failure=1, xids=(79,)))[0]
    assert condition.state is HealthState.HEALTHY and not condition.placeable


# -- people and self-healing ----------------------------------------------------------


def test_drain_and_undrain(clock: Clock) -> None:
    clock.tick()
    drained = clock.assessor.drain(0, "ada", "fan noise", clock.now_ms)
    assert drained.refusal() == "GPU 0 is drained by ada: fan noise"
    assert clock.tick()[0].drain == drained.drain
    assert clock.assessor.undrain(0, "ada", clock.now_ms).placeable
    with pytest.raises(Refused, match="GPU 0 is not drained"):
        clock.assessor.undrain(0, "ada", clock.now_ms)


def test_bad_drains_are_refused_with_what_is_wrong(clock: Clock) -> None:
    clock.tick()
    with pytest.raises(Invalid, match="no GPU 9 on this node"):
        clock.assessor.drain(9, "ada", "x", clock.now_ms)
    with pytest.raises(Invalid, match="a drain needs a reason"):
        clock.assessor.drain(0, "ada", "  ", clock.now_ms)
    with pytest.raises(Invalid, match="needs a reason"):
        clock.assessor.clear(0, "ada", "", clock.now_ms)


def test_a_power_cap_is_kept_on_the_condition(clock: Clock) -> None:
    clock.tick()
    clock.assessor.set_power_capped(0, 250.0)
    assert clock.tick()[0].power_capped_w == 250.0
    clock.assessor.set_power_capped(0, None)
    assert clock.assessor.condition(0).power_capped_w is None  # type: ignore[union-attr]


def test_listeners_hear_changes_only(clock: Clock) -> None:
    heard: list[tuple[HealthState | None, HealthState, str]] = []
    clock.assessor.add_listener(lambda old, new, actor: heard.append(
        (old.state if old else None, new.state, actor)))  # fmt: skip
    clock.tick()
    clock.tick()
    assert heard == []  # a healthy GPU seen for the first time is no news
    clock.tick(reading(row_remap_pending=1))
    clock.tick(reading(row_remap_pending=1))
    clock.tick(reading(row_remap_pending=1, nvlink_links_down=1))  # another reason
    clock.assessor.drain(0, "ada", "remap", clock.now_ms)
    clock.tick(reading(row_remap_pending=0, nvlink_links_down=0))
    assert heard == [
        (HealthState.HEALTHY, HealthState.NEEDS_RESET, ""),
        (HealthState.NEEDS_RESET, HealthState.NEEDS_RESET, ""),
        (HealthState.NEEDS_RESET, HealthState.NEEDS_RESET, "ada"),
        (HealthState.NEEDS_RESET, HealthState.HEALTHY, ""),
    ]


def test_the_events_of_a_change() -> None:
    healthy = GpuCondition(2)
    drained = GpuCondition(2, drain=assessor_drain())
    [event] = health_events(healthy, drained, "ada", 5)
    assert (event.kind, event.actor, event.gpu_index) == (pb.EVENT_KIND_GPU_DRAINED, "ada", 2)
    assert event.summary == "GPU 2 drained by ada: fan noise" and event.condition.drained
    [event] = health_events(drained, healthy, "ada", 6)
    assert event.kind == pb.EVENT_KIND_GPU_UNDRAINED
    clock = Clock(assessor())
    bad = clock.tick(reading(2, row_remap_pending=1))[2]
    [event] = health_events(healthy, bad, "", 7)
    assert event.kind == pb.EVENT_KIND_GPU_HEALTH_CHANGED
    assert event.summary == (
        "GPU 2 needs reset (was healthy): a memory row remap waits for a GPU reset"
    )
    assert event.condition.state == pb.GPU_HEALTH_STATE_NEEDS_RESET


def assessor_drain() -> Any:
    from node_daemon.health.model import Drain

    return Drain("ada", "fan noise", 1)


# -- what outlives the daemon ---------------------------------------------------------


def test_the_store_is_written_only_when_something_lasting_changes() -> None:
    store = MemoryStore()
    clock = Clock(assessor(store=store))
    clock.tick()
    for _ in range(50):
        clock.tick(reading(row_remap_pending=1, nvlink_links_down=1))
    assert store.saves == 1  # the fault's time, for the repeat-offender history
    clock.tick(reading(xids=(79,)))
    for _ in range(50):
        clock.tick()
    assert store.saves == 2


class FullDiskStore(MemoryStore):
    """Refuses every write until `room` is set, as a journal on a full disk does."""

    def __init__(self) -> None:
        super().__init__()
        self.room, self.tries = False, 0

    def save(self, record: StoredHealth) -> None:
        self.tries += 1
        if not self.room:
            raise OSError("state disk full")
        super().save(record)


def test_a_full_disk_is_tried_again_now_and_then_not_every_tick() -> None:
    store = FullDiskStore()
    clock = Clock(assessor(store=store))
    clock.tick()
    clock.tick(reading(xids=(79,)))
    for _ in range(20):
        clock.tick()
    assert store.tries == 1 and clock.state() is HealthState.NEEDS_REBOOT  # kept in memory
    store.room = True
    clock.tick(seconds=10)
    assert [r.code for r in store.records[0].sticky] == ["xid_79"]
    assert store.tries == 2


def test_sticky_state_and_drains_survive_a_restart(tmp_path: Path) -> None:
    journal = EventJournal(tmp_path / "journal.sqlite3")
    clock = Clock(assessor(store=JournalHealthStore(journal)))
    clock.tick(reading(0, xids=(48,)), reading(1, row_remap_failure=1), reading(2))
    clock.assessor.drain(2, "ada", "noisy fan", clock.now_ms)
    journal.close()

    journal = EventJournal(tmp_path / "journal.sqlite3")
    again = assessor(store=JournalHealthStore(journal))
    # Known at once, before the first sweep: placement refuses them from the start.
    assert again.condition(0).state is HealthState.NEEDS_RESET  # type: ignore[union-attr]
    assert again.condition(2).drain.reason == "noisy fan"  # type: ignore[union-attr]
    conditions = Clock(again).tick(reading(0), reading(1, row_remap_failure=0), reading(2))
    assert conditions[0].reasons[0].code == "xid_48"
    assert conditions[1].state is HealthState.NEEDS_INSPECTION
    assert not conditions[2].placeable
    journal.close()


def test_a_reboot_cures_what_needs_one_but_not_an_inspection(tmp_path: Path) -> None:
    store = MemoryStore()
    clock = Clock(assessor(store=store))
    clock.tick(reading(0, xids=(79,)), reading(1, row_remap_failure=1))
    rebooted = Clock(assessor(store=store, boot_id="boot-2"))
    conditions = rebooted.tick(reading(0), reading(1, row_remap_failure=0))
    assert conditions[0].state is HealthState.HEALTHY
    assert conditions[1].state is HealthState.NEEDS_INSPECTION


def test_a_gpu_swapped_in_starts_afresh_and_keeps_its_drain() -> None:
    store = MemoryStore()
    clock = Clock(assessor(store=store))
    clock.assessor.set_gpu_facts([GpuStatic(0, "GPU-old", "H100")])
    clock.tick(reading(row_remap_failure=1))
    clock.assessor.drain(0, "ada", "RMA", clock.now_ms)
    later = assessor(store=store)
    later.set_gpu_facts([GpuStatic(0, "GPU-new", "H100")])
    condition = Clock(later).tick()[0]
    assert condition.state is HealthState.HEALTHY and condition.drain is not None


def test_an_unreadable_record_is_skipped(tmp_path: Path) -> None:
    journal = EventJournal(tmp_path / "journal.sqlite3")
    from node_daemon.journal.event_journal import StoredRecord

    journal.record([], records=[StoredRecord("gpu_health", "gpu-0", True, 1, b"not json")])
    store = JournalHealthStore(journal)
    store.save(StoredHealth(1, drain=assessor_drain()))
    assert set(store.load()) == {1}
    journal.close()


# -- the simulator's scripted faults, judged -----------------------------------------


def judged_by_the_second(events: tuple[ScenarioEvent, ...], seconds: int, model: str | None = None
                         ) -> list[tuple[int, HealthState, tuple[str, ...]]]:  # fmt: skip
    """Each change of GPU 0's state or reasons: (second, state, codes)."""
    backend = SimulatedBackend(gpu_count=1, seed=1, model=model, scenario=Scenario(events))
    backend.open()
    judge = assessor()
    changes: list[tuple[int, HealthState, tuple[str, ...]]] = []
    try:
        for second in range(1, seconds + 1):
            condition = judge.judge(backend.advance(1.0), {}, second * S)[0]
            change = (condition.state, tuple(r.code for r in condition.reasons))
            if not changes or changes[-1][1:] != change:
                changes.append((second, *change))
    finally:
        backend.close()
    return changes


@pytest.mark.parametrize(
    ("events", "model", "state", "codes"),
    [
        ((ScenarioEvent(5, 0, "remap_failure"),), None, HealthState.NEEDS_INSPECTION,
         ("row_remap_failure",)),
        ((ScenarioEvent(5, 0, "ecc_storm", 20.0),), None, HealthState.SUSPECT, ("ecc_storm",)),
        ((ScenarioEvent(5, 0, "pcie_replay_storm", 100.0),), None, HealthState.SUSPECT,
         ("pcie_replay_storm",)),
        ((ScenarioEvent(5, 0, "nvlink_down", 2.0),), None, HealthState.DEGRADED, ("nvlink_down",)),
        ((ScenarioEvent(5, 0, "nvlink_errors", 50.0),), None, HealthState.SUSPECT,
         ("nvlink_storm",)),
        ((ScenarioEvent(5, 0, "recovery_action", 2.0),), None, HealthState.NEEDS_REBOOT,
         ("recovery_node_reboot",)),
        ((ScenarioEvent(5, 0, "fan_fail", 5.0), ScenarioEvent(5, 0, "load", 100.0)), "l40s",
         HealthState.SUSPECT, ("cooling_failing",)),
    ],
)  # fmt: skip
def test_each_simulated_fault_is_judged(
    events: tuple[ScenarioEvent, ...], model: str | None, state: HealthState,
    codes: tuple[str, ...],
) -> None:  # fmt: skip
    changes = judged_by_the_second(events, 600, model)
    assert changes[0] == (1, HealthState.HEALTHY, ())
    assert (state, codes) in [c[1:] for c in changes], changes


def test_a_simulated_remap_lasts_until_the_reset() -> None:
    events = (ScenarioEvent(5, 0, "remap_pending", 1.0), ScenarioEvent(60, 0, "reset"))
    assert judged_by_the_second(events, 90) == [
        (1, HealthState.HEALTHY, ()),
        (5, HealthState.NEEDS_RESET, ("row_remap_pending",)),
        (60, HealthState.HEALTHY, ()),
    ]


def test_a_stuttering_gpu_is_suspect_before_it_falls_off_the_bus() -> None:
    changes = judged_by_the_second((ScenarioEvent(5, 0, "stutter", 120.0),), 200)
    suspect = next(c[0] for c in changes if c[2] == ("telemetry_gap",))
    lost = next(c[0] for c in changes if c[1] is HealthState.NEEDS_REBOOT)
    assert suspect < lost - 60, changes  # a minute's warning at least


# -- alerts ---------------------------------------------------------------------------


def test_health_reasons_become_alerts_without_paging_twice(clock: Clock) -> None:
    condition = clock.tick(reading(row_remap_pending=1, nvlink_links_down=1, xids=(48,),
                                   ecc_uncorrected_total=2))[0]  # fmt: skip
    tick = GpuTick(0.0, reading(), None, (), None, condition)
    findings = {f.rule: f for f in HealthDetector(GpuHealthAlertSettings()).evaluate(tick)}
    # The Xid and the uncorrectable errors page through their own rules (xid, ecc).
    assert set(findings) == {"row_remap_pending", "nvlink_down"}
    assert findings["row_remap_pending"].severity is Severity.CRITICAL
    assert findings["nvlink_down"].severity is Severity.WARNING
    assert findings["row_remap_pending"].summary.startswith(
        "GPU 0: a memory row remap waits for a GPU reset — reset the GPU"
    )
    off = HealthDetector(GpuHealthAlertSettings(enabled=False))
    assert list(off.evaluate(tick)) == []


# -- settings -------------------------------------------------------------------------


def test_settings_default_and_override() -> None:
    assert parse_health_settings({}, "d.toml") == HealthSettings()
    parsed = parse_health_settings({"ecc_storm_errors": 50, "hold_s": 60}, "d.toml")
    assert (parsed.ecc_storm_errors, parsed.hold_s) == (50, 60.0)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"ecc_storm": 1}, "unknown key(s) ecc_storm in [health]"),
        ({"ecc_storm_errors": 1.5}, "[health] ecc_storm_errors must be a whole number from 1"),
        ({"hold_s": "5m"}, "[health] hold_s must be a number from 0 to 86400, got '5m'"),
        ({"cooling_fan_pct": 120}, "[health] cooling_fan_pct must be a number from 1 to 100"),
        ({"enabled": 1}, "[health] enabled must be true or false, got 1"),
        ({"repeat_window_h": True}, "[health] repeat_window_h must be a number"),
    ],
)
def test_bad_settings_name_the_key(table: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_health_settings(table, "d.toml")
    assert str(info.value).startswith("d.toml: ")
    assert message in str(info.value)
