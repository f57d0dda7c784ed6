"""The notify policy with a fake clock: hold, flap, group, budget, levels; criticals always."""

from __future__ import annotations

import itertools
from dataclasses import replace

import pytest

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import AlertBook, EventRow
from console.fleet.notify_policy import Decisions, NoticeKind, NotifyPolicy
from console.fleet.notify_settings import (
    NotifySettings,
    NotifySettingsError,
    parse_notify_settings,
)
from console.settings import SettingsError, load_settings
from gpufleet.v1.alert_severity import Severity

T0 = 1_800_000_000.0
NAMES = {"10.0.0.3:50051": "gpu-node-03", "10.0.0.4:50051": "gpu-node-04",
         "10.0.0.5:50051": "gpu-node-05"}  # fmt: skip
NODE3, NODE4, NODE5 = NAMES
HW = "hardware slowdown"
SW = "software power cap"


def throttle(target: str, gpu: int, reason: str = HW, number: int = 1) -> AlertRow:
    ms = int(T0 * 1000)
    return AlertRow(
        target, f"a-{gpu}-{number}", f"throttle/gpu{gpu}", "throttle", Severity.WARNING, True,
        gpu, f"GPU-{gpu}", None, None, "", f"GPU {gpu} throttled: {reason}", ms, ms, None, 1,
        "", None, None, "", "",
    )  # fmt: skip


class Fleet:
    """A real AlertBook and a policy over it; events go to the book first, as in the console."""

    def __init__(self, settings: NotifySettings | None = None) -> None:
        self.book = AlertBook()
        self.now = T0
        self.policy = NotifyPolicy(
            settings or NotifySettings(), lambda uid: self.book.alert(*uid), NAMES.__getitem__
        )
        self._seq = itertools.count(1)
        self.shown: list = []
        self.withdrawn: list = []

    def send(self, kind: str, *rows: AlertRow) -> Decisions:
        events = [EventRow(r.target, next(self._seq), int(self.now * 1000), kind, r.gpu_index,
                           r.summary, "", r, False) for r in rows]  # fmt: skip
        for event in events:
            self.book.add_event(event, "journal")
        return self._keep(self.policy.feed(events, self.now))

    def raise_(self, *rows: AlertRow) -> Decisions:
        return self.send("alert_raised", *rows)

    def clear(self, *rows: AlertRow) -> Decisions:
        return self.send("alert_cleared", *(replace(r, firing=False) for r in rows))

    def firing_for(self, seconds: float, *rows: AlertRow) -> Decisions:
        """Raise `rows`, let `seconds` of frames pass, clear them: the raise's decisions."""
        raised = self.raise_(*rows)
        self.run(seconds)
        self.clear(*rows)
        return raised

    def run(self, seconds: float, step_s: float = 0.05) -> None:
        """Frames of `step_s` for `seconds`: the frame pump's ticks."""
        end = self.now + seconds
        while self.now < end:
            self.now = min(end, self.now + step_s)
            self._keep(self.policy.tick(self.now))

    def _keep(self, decisions: Decisions) -> Decisions:
        self.shown += decisions.show
        self.withdrawn += decisions.withdraw
        return decisions


# -- levels ---------------------------------------------------------------------


def test_power_cap_throttling_is_shown_on_tiles_but_never_pops_by_default() -> None:
    fleet = Fleet()
    fleet.raise_(throttle(NODE3, 0, SW))
    fleet.run(60)
    assert fleet.shown == []
    assert fleet.book.alert(NODE3, "a-0-1") is not None  # the table still has it


def test_a_setting_makes_power_cap_throttling_pop() -> None:
    fleet = Fleet(parse_notify_settings({"popup": {"throttle_software": "warning"}}, "t"))
    fleet.raise_(throttle(NODE3, 0, SW))
    fleet.run(20)
    assert [n.kind for n in fleet.shown] == [NoticeKind.ALERT]


def test_a_hardware_reason_beside_the_power_cap_pops() -> None:
    fleet = Fleet()
    fleet.raise_(throttle(NODE3, 0, f"{SW}, {HW}"))
    fleet.run(20)
    assert len(fleet.shown) == 1


def test_info_alerts_do_not_pop_by_default() -> None:
    fleet = Fleet()
    fleet.raise_(replace(throttle(NODE3, 0), severity=Severity.INFO))
    fleet.run(60)
    assert fleet.shown == []


# -- hold -------------------------------------------------------------------------


def test_a_warning_that_clears_within_the_hold_does_not_pop() -> None:
    fleet = Fleet()
    alert = throttle(NODE3, 2)
    fleet.firing_for(9, alert)
    fleet.run(60)
    assert fleet.shown == []


def test_a_warning_that_holds_pops_after_the_hold_and_group_window() -> None:
    fleet = Fleet()
    fleet.raise_(throttle(NODE3, 2))
    fleet.run(12.9)
    assert fleet.shown == []
    fleet.run(0.2)  # 10 s hold + 3 s group window
    [notice] = fleet.shown
    assert notice.kind is NoticeKind.ALERT and notice.uid == (NODE3, "a-2-1")


def test_a_warning_shown_then_cleared_is_withdrawn() -> None:
    fleet = Fleet()
    alert = throttle(NODE3, 2)
    fleet.firing_for(20, alert)
    assert [n.uid for n in fleet.withdrawn] == [alert.uid]


# -- criticals ---------------------------------------------------------------------


def test_criticals_pop_at_once_whatever_the_budget() -> None:
    fleet = Fleet(replace(NotifySettings(), budget_per_hour=0))
    for gpu in range(5):  # five conditions, each critical once: each pops in its own frame
        critical = replace(throttle(NODE3, gpu), severity=Severity.CRITICAL)
        decisions = fleet.raise_(critical)
        assert [(n.kind, n.severity) for n in decisions.show] == [
            (NoticeKind.ALERT, Severity.CRITICAL)
        ]
        fleet.run(2)
    assert len(fleet.shown) == 5


def gpu_lost(target: str, gpu: int, number: int) -> AlertRow:
    return replace(throttle(target, gpu, number=number), rule="gpu_lost", key=f"gpu_lost/gpu{gpu}",
                   severity=Severity.CRITICAL, summary=f"GPU {gpu} lost")  # fmt: skip


def lose_and_find(fleet: Fleet, target: str, gpu: int, times: int, period_s: float = 30,
                  first: int = 1) -> list[Decisions]:  # fmt: skip
    """The GPU lost, back half a period later, lost again a period after: `times` outages."""
    raised = []
    for number in range(first, first + times):
        alert = gpu_lost(target, gpu, number)
        raised.append(fleet.firing_for(period_s / 2, alert))
        fleet.run(period_s / 2)
    return raised


def test_a_critical_flapping_every_30_s_for_10_minutes_pops_twice() -> None:
    """Issue #33: a GPU lost and back every 30 s gave a critical popup (with sound) each time."""
    fleet = Fleet()
    raised = lose_and_find(fleet, NODE3, 1, times=20)  # 10 minutes
    first, flapping = fleet.shown
    assert (first.kind, first.severity, first.uid) == (
        NoticeKind.ALERT, Severity.CRITICAL, (NODE3, "a-1-1"),
    )  # fmt: skip
    # The second outage, at once: one "flapping" notice in place of a second popup.
    assert raised[1].show == [flapping]
    assert (flapping.kind, flapping.severity) == (NoticeKind.FLAPPING, Severity.CRITICAL)
    assert flapping.headline == "CRITICAL · gpu-node-03 GPU 1: GPU lost flapping, 2 times in 10 min"
    # Every later outage only counts, in the same notice (same uid: replaced in place).
    updates = [n for d in raised[2:] for n in d.update]
    assert [n.uid for n in updates] == [flapping.uid] * 18
    assert updates[-1].headline == (
        "CRITICAL · gpu-node-03 GPU 1: GPU lost flapping, 20 times in 10 min"
    )
    assert all(d.show == [] for d in raised[2:])
    assert fleet.withdrawn == [first]  # the first outage's popup went when it cleared
    # Calm for a whole window (the GPU stays back): the flapping notice goes, nothing pops.
    fleet.run(10 * 60)
    assert fleet.withdrawn == [first, updates[-1]] and len(fleet.shown) == 2


def test_a_flapping_critical_that_stays_critical_pops_once_it_settles() -> None:
    fleet = Fleet()
    lose_and_find(fleet, NODE3, 1, times=3)
    lost = gpu_lost(NODE3, 1, 4)
    assert fleet.raise_(lost).show == []  # flapping still: counted, no popup
    fleet.run(9 * 60)
    assert [n.kind for n in fleet.shown] == [NoticeKind.ALERT, NoticeKind.FLAPPING]
    fleet.run(61)  # ten minutes without another outage: lost for good, and said so once
    assert [n.kind for n in fleet.shown] == [NoticeKind.ALERT, NoticeKind.FLAPPING,
                                             NoticeKind.ALERT]  # fmt: skip
    assert fleet.shown[-1].uid == lost.uid and fleet.shown[-1].severity is Severity.CRITICAL
    assert fleet.withdrawn[-1].kind is NoticeKind.FLAPPING
    fleet.clear(lost)
    assert fleet.withdrawn[-1].uid == lost.uid


def test_a_new_condition_beside_a_flapping_critical_pops_at_once() -> None:
    fleet = Fleet()
    lose_and_find(fleet, NODE3, 1, times=4)
    shown = len(fleet.shown)
    other_gpu = fleet.raise_(gpu_lost(NODE3, 2, 1))  # another GPU: another condition
    assert [(n.kind, n.severity) for n in other_gpu.show] == [(NoticeKind.ALERT, Severity.CRITICAL)]
    rma = replace(gpu_lost(NODE3, 1, 9), rule="gpu_health", key="gpu_health/gpu1",
                  summary="GPU 1 needs inspection (RMA)")  # fmt: skip
    tagged = fleet.raise_(rma)  # the node tags the flapping GPU for RMA: news, it pops
    assert [n.uid for n in tagged.show] == [rma.uid]
    assert len(fleet.shown) == shown + 2


def test_a_flapping_warning_that_turns_critical_pops_at_once() -> None:
    fleet = Fleet()
    flap(fleet, NODE3, 2, times=4, up_s=2, down_s=30)  # a flapping warning: one notice
    assert [n.kind for n in fleet.shown] == [NoticeKind.FLAPPING]
    hot = replace(throttle(NODE3, 2, number=5), severity=Severity.CRITICAL)
    assert [n.severity for n in fleet.raise_(hot).show] == [Severity.CRITICAL]  # higher: news


def test_critical_flap_damping_is_off_with_flap_damping() -> None:
    fleet = Fleet(parse_notify_settings({"flap_count": 0}, "t"))
    lose_and_find(fleet, NODE3, 1, times=4)
    assert [n.kind for n in fleet.shown] == [NoticeKind.ALERT] * 4


def test_gpus_that_start_flapping_in_one_frame_share_one_critical_flap_notice() -> None:
    fleet = Fleet()
    for number in (1, 2, 3):
        lost = [gpu_lost(NODE3, gpu, number) for gpu in (3, 0)]
        fleet.firing_for(15, *lost)
        fleet.run(15)
    first, flapping = fleet.shown
    assert first.headline == "CRITICAL · gpu-node-03: 2 GPUs lost"
    assert flapping.headline == (
        "CRITICAL · gpu-node-03: GPU lost flapping on 2 GPUs, 2 times each in 10 min"
    )
    assert flapping.anchor is not None and flapping.anchor.gpu_index == 0


def test_a_held_warning_that_escalates_pops_at_once_as_critical() -> None:
    fleet = Fleet()
    alert = throttle(NODE3, 1)
    fleet.raise_(alert)
    fleet.run(2)
    decisions = fleet.send("alert_changed", replace(alert, severity=Severity.CRITICAL))
    assert [n.severity for n in decisions.show] == [Severity.CRITICAL]
    fleet.run(30)
    assert len(fleet.shown) == 1  # the warning it was is not shown afterwards


def test_node_not_responding_pops_immediately() -> None:
    fleet = Fleet()
    alert = replace(
        throttle(NODE4, 0), rule="node_not_responding", key="node_not_responding",
        severity=Severity.CRITICAL, gpu_index=None, summary="not responding",
    )  # fmt: skip
    decisions = fleet.raise_(alert)
    assert [(n.kind, n.severity) for n in decisions.show] == [(NoticeKind.ALERT, Severity.CRITICAL)]


def test_criticals_of_one_rule_in_one_frame_are_one_notice() -> None:
    fleet = Fleet()
    lost = [replace(throttle(t, 0), rule="gpu_lost", key="gpu_lost/gpu0", gpu_index=0,
                    severity=Severity.CRITICAL) for t in (NODE3, NODE4, NODE5)]  # fmt: skip
    [notice] = fleet.raise_(*lost).show
    assert notice.headline == "CRITICAL · 3 nodes: 3 GPUs lost"
    assert notice.body.splitlines()[:3] == [
        "gpu-node-03: GPU 0",
        "gpu-node-04: GPU 0",
        "gpu-node-05: GPU 0",
    ]


# -- flap ---------------------------------------------------------------------------


def flap(fleet: Fleet, target: str, gpu: int, times: int, up_s: float, down_s: float) -> None:
    for number in range(1, times + 1):
        alert = throttle(target, gpu, number=number)
        fleet.firing_for(up_s, alert)
        fleet.run(down_s)


def test_a_flapping_condition_is_reported_once_then_held_quiet() -> None:
    fleet = Fleet()
    flap(fleet, NODE3, 2, times=8, up_s=20, down_s=40)  # each raise outlasts the hold
    flapping = [n for n in fleet.shown if n.kind is NoticeKind.FLAPPING]
    [report] = flapping
    assert report.headline == "WARNING · gpu-node-03 GPU 2: throttle flapping, 3 times in 10 min"
    assert len(fleet.shown) == 3  # raises 1 and 2 popped (each held 20 s), then the report


def test_a_flapping_condition_pops_again_only_after_a_calm_window() -> None:
    fleet = Fleet()
    flap(fleet, NODE3, 2, times=4, up_s=2, down_s=30)
    [report] = fleet.shown
    fleet.run(9 * 60)  # not yet ten minutes since the last raise
    assert fleet.withdrawn == []
    fleet.run(60)
    assert fleet.withdrawn == [report]  # it stopped flapping
    steady = throttle(NODE3, 2, number=9)
    fleet.raise_(steady)
    fleet.run(14)
    assert [n.kind for n in fleet.shown] == [NoticeKind.FLAPPING, NoticeKind.ALERT]


def test_a_flapping_alert_that_then_fires_steadily_pops_once_it_settles() -> None:
    fleet = Fleet()
    flap(fleet, NODE3, 2, times=2, up_s=2, down_s=30)
    steady = throttle(NODE3, 2, number=3)
    fleet.raise_(steady)  # the third raise: flapping; then it stays up
    fleet.run(9 * 60)
    assert [n.kind for n in fleet.shown] == [NoticeKind.FLAPPING]
    fleet.run(65)
    assert [n.kind for n in fleet.shown] == [NoticeKind.FLAPPING, NoticeKind.ALERT]
    assert fleet.shown[1].uid == steady.uid


def test_eight_gpus_flapping_are_one_flapping_notice() -> None:
    fleet = Fleet()
    for number in range(1, 11):
        alerts = [throttle(NODE3, gpu, number=number) for gpu in range(8)]
        fleet.firing_for(2, *alerts)
        fleet.run(28)
    [report] = fleet.shown
    assert report.headline == (
        "WARNING · gpu-node-03: throttle flapping on 8 GPUs, 3 times each in 10 min"
    )
    assert report.body.startswith("gpu-node-03: GPUs 0, 1, 2, 3, 4, 5, 6, 7\n")


def test_flap_damping_off() -> None:
    fleet = Fleet(parse_notify_settings({"flap_count": 0}, "t"))
    flap(fleet, NODE3, 2, times=4, up_s=20, down_s=40)
    assert [n.kind for n in fleet.shown] == [NoticeKind.ALERT] * 4


# -- group ---------------------------------------------------------------------------


def test_a_burst_on_one_node_is_one_notice_listing_its_gpus() -> None:
    fleet = Fleet()
    for gpu in (7, 0, 3, 1, 5, 2):
        fleet.raise_(throttle(NODE3, gpu))
        fleet.run(0.4)
    fleet.run(15)
    [notice] = fleet.shown
    assert notice.kind is NoticeKind.GROUP
    assert notice.headline == "WARNING · gpu-node-03: 6 GPUs throttled (HW slowdown)"
    assert notice.body.startswith("gpu-node-03: GPUs 0, 1, 2, 3, 5, 7\nsince ")
    assert notice.anchor is not None and notice.anchor.gpu_index == 0  # a click opens GPU 0


def test_a_burst_of_one_rule_across_nodes_is_one_notice() -> None:
    fleet = Fleet()
    fleet.raise_(throttle(NODE3, 0), throttle(NODE3, 4))
    fleet.run(1)
    fleet.raise_(throttle(NODE4, 1))
    fleet.run(1)
    fleet.raise_(throttle(NODE5, 6))
    fleet.run(15)
    [notice] = fleet.shown
    assert notice.headline == "WARNING · 3 nodes: 4 GPUs throttled (HW slowdown)"
    assert notice.body.splitlines()[:3] == [
        "gpu-node-03: GPUs 0, 4",
        "gpu-node-04: GPU 1",
        "gpu-node-05: GPU 6",
    ]


def test_a_group_is_withdrawn_when_all_its_alerts_are_cleared_or_acknowledged() -> None:
    fleet = Fleet()
    alerts = [throttle(NODE3, gpu) for gpu in range(3)]
    fleet.raise_(*alerts)
    fleet.run(15)
    [notice] = fleet.shown
    fleet.clear(alerts[0])
    fleet.send("alert_acknowledged", replace(alerts[1], acknowledged_by="erin",
                                             acknowledged_unix_ms=1))  # fmt: skip
    assert fleet.withdrawn == []
    fleet.clear(alerts[2])
    assert fleet.withdrawn == [notice]


def test_members_that_cleared_before_the_window_closed_are_left_out() -> None:
    fleet = Fleet()
    first, second = throttle(NODE3, 0), throttle(NODE3, 1)
    fleet.raise_(first)
    fleet.run(2)
    fleet.raise_(second)
    fleet.run(10.5)  # first due at 10 s (window open until 13 s), second due at 12 s
    fleet.clear(first)
    fleet.run(5)
    [notice] = fleet.shown
    assert notice.kind is NoticeKind.ALERT and notice.uid == second.uid


# -- budget --------------------------------------------------------------------------


def test_beyond_the_budget_warnings_are_summed_up_and_criticals_still_pop() -> None:
    fleet = Fleet(parse_notify_settings({"budget_per_hour": 2}, "t"))
    for gpu in range(5):  # five separate warnings, far enough apart not to group
        fleet.raise_(throttle(NODE3, gpu))
        fleet.run(20)
    kinds = [n.kind for n in fleet.shown]
    assert kinds == [NoticeKind.ALERT, NoticeKind.ALERT, NoticeKind.SUMMARY]
    assert fleet.shown[2].headline == "1 more warning in the last hour, see the alert table"
    critical = replace(throttle(NODE4, 0), severity=Severity.CRITICAL)
    assert [n.severity for n in fleet.raise_(critical).show] == [Severity.CRITICAL]
    fleet.run(15 * 60)  # the next summary is due a quarter of an hour after the first
    assert fleet.shown[-1].headline == "3 more warnings in the last hour, see the alert table"
    assert "Held back: throttling 3" in fleet.shown[-1].body


def test_the_budget_frees_up_an_hour_later() -> None:
    fleet = Fleet(parse_notify_settings({"budget_per_hour": 1}, "t"))
    fleet.raise_(throttle(NODE3, 0))
    fleet.run(3600)
    fleet.raise_(throttle(NODE3, 1))
    fleet.run(20)
    assert [n.kind for n in fleet.shown] == [NoticeKind.ALERT, NoticeKind.ALERT]


# -- settings ------------------------------------------------------------------------


def test_defaults_read_from_an_empty_table() -> None:
    settings = parse_notify_settings({}, "t")
    assert settings == NotifySettings()
    assert settings.pops_from("throttle_software") is Severity.CRITICAL
    assert settings.pops_from("idle") is Severity.CRITICAL
    assert settings.pops_from("gpu_temp") is Severity.WARNING


def test_settings_over_the_defaults() -> None:
    settings = parse_notify_settings(
        {"popup": {"xid": "critical", "idle": "warning"}, "hold_s": 5, "flap_window_min": 30,
         "group_s": 1.5, "budget_per_hour": 20, "flap_count": 4}, "t",
    )  # fmt: skip
    assert settings.pops_from("xid") is Severity.CRITICAL
    assert settings.pops_from("idle") is Severity.WARNING
    assert settings.pops_from("throttle_software") is Severity.CRITICAL  # default kept
    assert (settings.hold_s, settings.flap_window_s, settings.group_s) == (5, 1800, 1.5)
    assert (settings.budget_per_hour, settings.flap_count) == (20, 4)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"popup": {"throttle": "never"}}, "notify.popup.throttle = 'never': give the lowest"),
        ({"popup": {"throtle": "critical"}}, "unknown rule 'throtle' (rules: "),
        ({"popup": "critical"}, "notify.popup must be a table"),
        ({"hold_s": -1}, "notify.hold_s must be a number from 0 to 300, got -1"),
        ({"hold_s": "10s"}, "notify.hold_s must be a number from 0 to 300, got '10s'"),
        ({"budget_per_hour": 2.5}, "notify.budget_per_hour must be a whole number"),
        ({"flap_count": True}, "notify.flap_count must be a whole number"),
        ({"quiet": 1}, "unknown key(s) in [notify]: quiet (known: popup, hold_s"),
    ],
)
def test_bad_values_are_refused_with_what_is_wrong(table: dict, message: str) -> None:
    with pytest.raises(NotifySettingsError) as refused:
        parse_notify_settings(table, "console.toml")
    assert str(refused.value).startswith("console.toml: ")
    assert message in str(refused.value)


def test_the_settings_file_carries_notify_to_every_profile(tmp_path) -> None:
    path = tmp_path / "console.toml"
    path.write_text('profile = "prod"\n[profiles.prod]\nnodes = ["a:1"]\n'
                    '[notify]\npopup = { xid = "critical" }\nbudget_per_hour = 4\n')  # fmt: skip
    settings = load_settings(path)
    for profile in (settings.profile(), settings.profile("default")):
        assert profile.notify.pops_from("xid") is Severity.CRITICAL
        assert profile.notify.budget_per_hour == 4


def test_a_bad_notify_value_names_the_file(tmp_path) -> None:
    path = tmp_path / "console.toml"
    path.write_text('[notify]\npopup = { gpu_temp = "loud" }\n')
    with pytest.raises(SettingsError, match=rf"^{path}: notify.popup.gpu_temp = 'loud'"):
        load_settings(path)


def test_a_critical_raised_and_cleared_in_one_frame_is_never_reported_as_flapping() -> None:
    fleet = Fleet()
    for number in range(1, 6):
        critical = replace(throttle(NODE3, 1, number=number), severity=Severity.CRITICAL)
        rows = [("alert_raised", critical), ("alert_cleared", replace(critical, firing=False))]
        events = [EventRow(NODE3, 100 * number + i, 0, kind, 1, "", "", row, False)
                  for i, (kind, row) in enumerate(rows)]  # fmt: skip
        for event in events:
            fleet.book.add_event(event, "journal")
        fleet._keep(fleet.policy.feed(events, fleet.now))  # both in one frame
        fleet.run(20)
    assert fleet.shown == []  # cleared before it was judged; a critical's flapping is no news
