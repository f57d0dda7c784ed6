"""What reaches the toast and the sinks: the notify policy's notices, in the right channel.

The policy's own rules (hold, flap, group, budget) are tests/console/test_notify_policy.py's;
these check that AlertNotifier carries its decisions out: which channel gets what,
sound, withdrawal, clicks, and that a held popup is released by the frame's tick alone.
"""

from __future__ import annotations

from dataclasses import replace

from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.model import FleetModel
from console.fleet.notify_policy import Notice, NoticeKind
from console.fleet.notify_settings import NotifySettings
from console.qt.alert_model import value_text
from console.qt.alert_notifier import AlertNotifier
from gpufleet.v1.alert_severity import Severity
from tests.fake_clock import ManualClock

TARGET = "n:1"
T0 = 1_800_000_000.0
HOLD_S = NotifySettings().hold_s


class Sink:
    """A channel that shows alerts only (as the tray does)."""

    available = True

    def __init__(self) -> None:
        self.shown: list[AlertRow] = []

    def show(self, alert: AlertRow, node_name: str) -> None:
        self.shown.append(alert)


class DesktopLike(Sink):
    """A channel that shows notices and withdraws, and plays its own sound (as desktop does)."""

    muted = False

    def __init__(self) -> None:
        super().__init__()
        self.notices: list[Notice] = []
        self.withdrawn: list[tuple[str, str]] = []
        self.updated: list[Notice] = []

    def show_notice(self, notice: Notice) -> None:
        self.notices.append(notice)

    def withdraw(self, alert: AlertRow) -> None:
        self.withdrawn.append(alert.uid)

    def update_notice(self, notice: Notice) -> None:
        self.updated.append(notice)

    def withdraw_notice(self, notice: Notice) -> None:
        self.withdrawn.append(notice.uid)


def alert(severity: Severity, gpu: int = 0, **changes: object) -> AlertRow:
    ms = int(T0 * 1000)
    row = AlertRow(
        TARGET, f"a-{gpu}", f"gpu_temp/gpu{gpu}", "gpu_temp", severity, True, gpu, "GPU-x", None,
        86.0, "°C", "hot", ms, ms, None, 1, "", None, None, "", "",
    )  # fmt: skip
    return replace(row, **changes)


class Harness:
    def __init__(self, sink: Sink | None = None) -> None:
        self.fleet = FleetModel()
        self.fleet.add_node(TARGET)
        self.clock = ManualClock(T0)
        self.sink = sink or Sink()
        self.toasts: list[tuple[AlertRow, str]] = []
        self.beeps = 0
        self.notifier = AlertNotifier(
            self.fleet, lambda a, title: self.toasts.append((a, title)), [self.sink],
            self._beep, clock=self.clock,
        )  # fmt: skip
        self.seq = 0

    def _beep(self) -> None:
        self.beeps += 1

    def send(self, kind: str, row: AlertRow) -> None:
        """One event, applied to the book first (as the frame pump does), then to the notifier."""
        self.seq += 1
        event = EventRow(TARGET, self.seq, row.updated_unix_ms, kind, row.gpu_index, row.summary,
                         "", row, False)  # fmt: skip
        self.fleet.alerts.add_event(event, "journal")
        self.notifier.on_events_arrived([event])

    def after(self, seconds: float) -> None:
        self.clock.now += seconds
        self.notifier.tick()


def test_critical_pops_at_once_with_a_beep_and_a_downgrade_is_no_news() -> None:
    h = Harness()
    critical = alert(Severity.CRITICAL)
    h.send("alert_raised", critical)
    h.send("alert_changed", replace(critical, severity=Severity.WARNING))
    h.after(HOLD_S * 2)
    assert [a.severity for a in h.sink.shown] == [Severity.CRITICAL]
    assert [title for _, title in h.toasts] == ["CRITICAL · n:1 GPU 0"]
    assert h.beeps == 1  # the sink plays no sound of its own


def test_a_warning_waits_for_its_hold_then_the_tick_alone_releases_it() -> None:
    h = Harness()
    h.send("alert_raised", alert(Severity.WARNING))
    h.after(HOLD_S - 1)
    assert h.sink.shown == [] and h.toasts == []
    h.after(1 + NotifySettings().group_s)  # no event: the frame's tick releases it
    assert [a.severity for a in h.sink.shown] == [Severity.WARNING]
    assert h.beeps == 0


def test_escalation_pops_up_again_at_once() -> None:
    h = Harness()
    warning = alert(Severity.WARNING)
    h.send("alert_raised", warning)
    h.after(HOLD_S + NotifySettings().group_s)
    h.send("alert_changed", replace(warning, severity=Severity.CRITICAL))
    assert [a.severity for a in h.sink.shown] == [Severity.WARNING, Severity.CRITICAL]


def test_a_warning_that_clears_within_its_hold_reaches_no_channel() -> None:
    h = Harness()
    warning = alert(Severity.WARNING)
    h.send("alert_raised", warning)
    h.after(2)
    h.send("alert_cleared", replace(warning, firing=False))
    h.after(HOLD_S * 3)
    assert h.sink.shown == [] and h.toasts == []


def test_acknowledged_or_silenced_alerts_stay_quiet() -> None:
    h = Harness()
    h.send("alert_raised", alert(Severity.CRITICAL, acknowledged_by="erin", acknowledged_unix_ms=1))
    until = int((T0 + 60) * 1000)
    h.send("alert_raised", alert(Severity.CRITICAL, gpu=1, silenced_until_unix_ms=until))
    assert h.sink.shown == [] and h.toasts == [] and h.beeps == 0


def test_a_group_goes_to_show_notice_and_is_withdrawn_when_its_last_alert_clears() -> None:
    h = Harness(DesktopLike())
    sink = h.sink
    assert isinstance(sink, DesktopLike)
    warnings = [alert(Severity.WARNING, gpu=g) for g in (5, 1, 3)]
    for row in warnings:
        h.send("alert_raised", row)
    h.after(HOLD_S + NotifySettings().group_s)
    assert sink.shown == []  # not three alerts: one notice
    [notice] = sink.notices
    assert notice.kind is NoticeKind.GROUP
    assert notice.headline == "WARNING · n:1: 3 GPUs hot"
    assert notice.body.startswith("n:1: GPUs 1, 3, 5\nsince ")
    assert h.toasts[0][1] == notice.headline and h.toasts[0][0].summary == notice.body
    for row in warnings[:2]:
        h.send("alert_cleared", replace(row, firing=False))
    assert sink.withdrawn == []
    h.send("alert_cleared", replace(warnings[2], firing=False))
    assert sink.withdrawn == [notice.uid]


def test_a_click_on_a_group_opens_its_first_gpu() -> None:
    h = Harness(DesktopLike())
    for gpu in (6, 2, 4):
        h.send("alert_raised", alert(Severity.CRITICAL, gpu=gpu))  # one frame each, one notice
    sink = h.sink
    assert isinstance(sink, DesktopLike)
    # Three frames, three critical notices: criticals never wait to be grouped.
    assert len(sink.shown) == 3 and h.beeps == 0  # the desktop plays its own sound
    opened: list[tuple[str, str]] = []
    h.notifier.activated.connect(lambda target, alert_id: opened.append((target, alert_id)))
    batch = [alert(Severity.CRITICAL, gpu=g, id=f"b-{g}", key=f"gpu_temp/b{g}") for g in (7, 0)]
    events = []
    for row in batch:
        h.seq += 1
        events.append(EventRow(TARGET, h.seq, 0, "alert_raised", row.gpu_index, "", "", row, False))
        h.fleet.alerts.add_event(events[-1], "journal")
    h.notifier.on_events_arrived(events)  # two criticals in one frame: one notice
    [group] = sink.notices
    assert group.headline == "CRITICAL · n:1: 2 GPUs hot"
    h.notifier.on_sink_activated(*group.uid)
    h.notifier.on_sink_activated(TARGET, "a-6")  # an alert's own notification: itself
    assert opened == [(TARGET, "b-0"), (TARGET, "a-6")]


def test_a_channel_without_show_notice_gets_the_first_alert_in_the_notices_words() -> None:
    h = Harness()
    for gpu in (1, 2):
        h.send("alert_raised", alert(Severity.WARNING, gpu=gpu))
    h.after(HOLD_S + NotifySettings().group_s)
    [shown] = h.sink.shown
    assert shown.uid == (TARGET, "a-1")
    assert shown.summary.startswith("WARNING · n:1: 2 GPUs hot\nn:1: GPUs 1, 2")


def test_the_alert_table_names_an_xid_by_its_code() -> None:
    xid = alert(Severity.WARNING, rule="xid", value=13.0, unit="xid")
    assert value_text(xid) == "Xid 13"
    assert value_text(replace(xid, occurrences=3)) == "Xid 13 x3"
    assert value_text(alert(Severity.CRITICAL)) == "86 °C"


def test_a_reminder_reaches_the_desktop_without_sound_and_not_the_tray() -> None:
    """A silence about to end is said on the desktop too, not only in the window."""
    desktop = Harness(DesktopLike())
    desktop.notifier.remind("Silence ending", "Silence of gpu-node-0* by erin ends in 5 min")
    assert isinstance(desktop.sink, DesktopLike)
    [notice] = desktop.sink.notices
    assert notice.kind is NoticeKind.REMINDER and notice.alerts == ()
    assert (notice.headline, notice.body) == (
        "Silence ending", "Silence of gpu-node-0* by erin ends in 5 min",
    )  # fmt: skip
    assert desktop.beeps == 0 and desktop.toasts == []  # the window shows its own toast
    tray = Harness()
    tray.notifier.remind("Silence ending", "…")
    assert tray.sink.shown == [] and tray.beeps == 0


def test_a_flapping_critical_is_one_popup_then_updates_in_place_without_sound() -> None:
    h = Harness(DesktopLike())
    sink = h.sink
    assert isinstance(sink, DesktopLike)
    updated: list[Notice] = []
    withdrawn: list[Notice] = []
    h.notifier.noticeUpdated.connect(updated.append)
    h.notifier.noticeWithdrawn.connect(withdrawn.append)
    for number in range(1, 5):  # lost 15 s, back 15 s, four times
        lost = alert(Severity.CRITICAL, gpu=1, id=f"lost-{number}", key="gpu_lost/gpu1",
                     rule="gpu_lost", summary="GPU 1 is lost")  # fmt: skip
        h.send("alert_raised", lost)
        h.after(15)
        h.send("alert_cleared", replace(lost, firing=False))
        h.after(15)
    assert [a.uid for a in sink.shown] == [(TARGET, "lost-1")]  # the first outage
    [flapping] = sink.notices  # the second: one notice, said at once
    assert flapping.kind is NoticeKind.FLAPPING and flapping.severity is Severity.CRITICAL
    assert [n.uid for n in sink.updated] == [flapping.uid] * 2  # the third and fourth
    assert sink.updated[-1].headline.endswith("GPU lost flapping, 4 times in 10 min")
    assert updated == sink.updated
    assert [title for _, title in h.toasts] == [
        "CRITICAL · n:1 GPU 1", flapping.headline,
    ]  # fmt: skip
    assert [n.uid for n in withdrawn] == [(TARGET, "lost-1")]  # the first, when it cleared
    assert h.beeps == 0  # the desktop plays the sound (twice), the notifier none
