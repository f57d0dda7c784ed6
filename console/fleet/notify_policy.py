"""NotifyPolicy: which alerts interrupt a person, when, and as how many notifications.

Model code: no Qt, and the clock comes in as `now_s` on every call. The notifier
feeds it each frame's new events (`feed`) and calls `tick` every frame; both
answer with the notices to show and those to withdraw. Every alert stays on its
tile and in the alert table whatever this decides; it decides only popups.

- Level: per rule, the lowest severity that pops (NotifySettings.popup).
- Hold: a warning pops once it has fired `hold_s`; one that clears sooner never does.
- Flap: a condition (node + alert key) raised `flap_count` times within the flap
  window pops once, as flapping, then stays quiet until it has gone a whole
  window without a raise (and pops then if it is firing steadily).
- Group: popups of one rule due within `group_s` become one notification, for one
  node ("gpu-node-03: 6 GPUs throttled (SW power cap)") or several ("3 nodes: ...").
- Budget: at most `budget_per_hour` non-critical notifications in any hour; what
  is held back beyond that is summed up in one summary, at most every 15 min.

Criticals skip the hold, the group window and the budget: the first of a condition
pops in the call that brought it, with sound (criticals of one rule arriving in one
frame are one notification). Criticals are damped too, sooner: a condition that
turns critical again within the flap window (a GPU lost, back, lost again) pops one
critical "flapping" notice at once, in place of a second popup; later repeats only
update that notice's count, in place and silently (`Decisions.update`). Once the
condition has gone a whole window without turning critical, the notice is withdrawn,
and an alert of it still firing pops once as the critical it is. A new condition
(another rule, GPU or node) or a higher severity is news and pops at once.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from console.fleet import notice_words as words
from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.notify_damping import AlertUid, FlapKey, FlapTracker, PopupBudget
from console.fleet.notify_settings import NotifySettings, popup_rule
from gpufleet.v1.alert_severity import Severity

POPUP_KINDS = frozenset({"alert_raised", "alert_changed"})
WITHDRAW_KINDS = frozenset({"alert_cleared", "alert_acknowledged", "alert_silenced"})
SUMMARY_UID: AlertUid = ("", "notice-summary")
MAX_ANCHORS = 1000  # notices remembered for a late click on them
CRITICAL_FLAP_COUNT = 2  # a condition critical twice within the flap window flaps


class NoticeKind(enum.Enum):
    ALERT = "alert"  # one alert, in its own words (console/notify/text.py)
    GROUP = "group"  # several alerts of one rule
    FLAPPING = "flapping"  # conditions raised and cleared again and again
    SUMMARY = "summary"  # what the popup budget held back
    REMINDER = "reminder"  # not an alert: e.g. a silence about to end


@dataclass(frozen=True)
class Notice:
    """One notification: what it says and which alerts it stands for (first GPU first)."""

    uid: AlertUid  # the alert's own for one alert; else (node, "notice-N")
    kind: NoticeKind
    severity: Severity
    headline: str
    body: str
    alerts: tuple[AlertRow, ...]

    @property
    def anchor(self) -> AlertRow | None:
        """The alert a click opens: the first GPU's."""
        return self.alerts[0] if self.alerts else None


@dataclass
class Decisions:
    show: list[Notice] = field(default_factory=list)
    withdraw: list[Notice] = field(default_factory=list)
    # Shown already, in new words (a flapping critical's count): replace in place, no sound.
    update: list[Notice] = field(default_factory=list)

    def __iadd__(self, other: Decisions) -> Decisions:
        self.show += other.show
        self.withdraw += other.withdraw
        self.update += other.update
        return self


@dataclass
class _CriticalFlap:
    """A flapping critical's notice: per condition, its first alert and its raises in the window."""

    notice: Notice
    flaps: dict[FlapKey, tuple[AlertRow, int]]


@dataclass
class _Bucket:
    """Popups of one kind and rule waiting for the group window to close."""

    flush_s: float
    alerts: dict[AlertUid, int] = field(default_factory=dict)  # uid -> raises (flaps)


class NotifyPolicy:
    def __init__(
        self,
        settings: NotifySettings,
        current: Callable[[AlertUid], AlertRow | None],
        name_of: Callable[[str], str],
    ) -> None:
        self._settings, self._current, self._name_of = settings, current, name_of
        self._shown: dict[AlertUid, Severity] = {}  # highest severity popped per alert
        self._held: dict[AlertUid, float] = {}  # warnings in their hold -> when due
        self._buckets: dict[tuple[NoticeKind, str], _Bucket] = {}
        self._flaps = FlapTracker(settings.flap_count, settings.flap_window_s)
        # Criticals: the second time a condition turns critical within the window it flaps.
        critical_count = CRITICAL_FLAP_COUNT if settings.flap_count else 0
        self._critical_flaps = FlapTracker(critical_count, settings.flap_window_s)
        self._critical_flap_of: dict[FlapKey, AlertUid] = {}  # condition -> its flap notice
        self._critical_flap_notices: dict[AlertUid, _CriticalFlap] = {}
        self._budget = PopupBudget(settings.budget_per_hour, settings.summary_every_s)
        # Shown and not withdrawn: notices of alerts, indexed by alert; flapping ones apart.
        self._open: dict[AlertUid, Notice] = {}
        self._notices_of: dict[AlertUid, set[AlertUid]] = {}
        self._flap_notices: dict[AlertUid, Notice] = {}
        self._anchors: dict[AlertUid, AlertUid] = {}  # notice -> the alert a click opens
        self._numbers = itertools.count(1)

    # -- in -------------------------------------------------------------------

    def feed(self, events: Iterable[EventRow], now_s: float) -> Decisions:
        """One frame's new events; then whatever is due now."""
        decisions, criticals = Decisions(), dict[AlertUid, AlertRow]()
        for event in events:
            if event.alert is None:
                continue
            # Judge by the alert as it is now: a replayed raise of an alert that
            # has cleared since must not pop up.
            alert = self._current(event.alert.uid) or event.alert
            if event.kind in POPUP_KINDS:
                self._on_alert_news(event.kind, alert, now_s, criticals)
            elif event.kind in WITHDRAW_KINDS:
                self._held.pop(alert.uid, None)
                if event.kind == "alert_cleared":
                    self._shown.pop(alert.uid, None)  # a cleared alert never fires again
                decisions.withdraw += self._withdrawable(alert.uid, now_s)
        decisions += self._critical_notices(list(criticals.values()), now_s)
        decisions += self.tick(now_s)
        return decisions

    def tick(self, now_s: float) -> Decisions:
        """Release what the hold, the flap window, the group window and the budget let through."""
        decisions = Decisions()
        self._release_held(now_s)
        decisions.withdraw += self._release_settled(now_s)
        decisions += self._release_settled_criticals(now_s)
        for key, bucket in list(self._buckets.items()):
            if bucket.flush_s <= now_s:
                del self._buckets[key]
                decisions.show += self._flush(key[0], bucket, now_s)
        summary = self._summary(now_s)
        if summary is not None:
            decisions.show.append(summary)
        return decisions

    def anchor(self, notice_uid: AlertUid) -> AlertUid | None:
        """The alert a click on this notice opens, if it is one of ours."""
        return self._anchors.get(notice_uid)

    # -- deciding -------------------------------------------------------------

    def _on_alert_news(
        self, kind: str, alert: AlertRow, now_s: float, criticals: dict[AlertUid, AlertRow]
    ) -> None:
        key: FlapKey = (alert.target, alert.key)
        flaps = self._flaps.raised(key, alert.uid, now_s) if kind == "alert_raised" else None
        if not self._eligible(alert, now_s):
            # A flap is news even when its latest raise has cleared by the time we hear of it
            # (not a critical's: one that cleared before it was judged never popped, and is
            # counted by the criticals' own flap tracker only when it did).
            critical = alert.severity is Severity.CRITICAL
            if flaps is not None and not critical and self._may_pop(alert, now_s):
                self._bucket(NoticeKind.FLAPPING, alert, now_s).alerts[alert.uid] = flaps
        elif alert.severity is Severity.CRITICAL:
            self._held.pop(alert.uid, None)
            criticals[alert.uid] = alert  # once a frame: a raise and a change are one onset
        elif flaps is not None:
            self._bucket(NoticeKind.FLAPPING, alert, now_s).alerts[alert.uid] = flaps
        elif not self._flaps.flapping(key):
            self._held.setdefault(alert.uid, now_s + self._settings.hold_s)

    def _eligible(self, alert: AlertRow, now_s: float) -> bool:
        """Firing, wanted, and news: the highest severity shown of it so far is lower."""
        return (
            alert.firing
            and self._may_pop(alert, now_s)
            and alert.severity > self._shown.get(alert.uid, 0)
        )

    def _may_pop(self, alert: AlertRow, now_s: float) -> bool:
        """Not acknowledged, not silenced, and at a severity its rule pops from."""
        level = self._settings.pops_from(popup_rule(alert))
        return (
            not alert.acknowledged
            and not alert.silenced(int(now_s * 1000))
            and (alert.severity is Severity.CRITICAL or alert.severity >= level)
        )

    def _release_held(self, now_s: float) -> None:
        for uid, due_s in list(self._held.items()):
            if due_s > now_s:
                continue
            del self._held[uid]
            alert = self._current(uid)
            if alert is None or self._flaps.flapping((alert.target, alert.key)):
                continue
            if self._eligible(alert, now_s):  # else it cleared within its hold: damped
                self._bucket(NoticeKind.ALERT, alert, due_s).alerts[uid] = 1

    def _release_settled(self, now_s: float) -> list[Notice]:
        """Conditions that stopped flapping: a steady one pops now; their flap notice goes."""
        settled = self._flaps.settled(now_s)
        for _key, uid in settled:
            alert = self._current(uid)
            if alert is not None and self._eligible(alert, now_s):
                self._bucket(NoticeKind.ALERT, alert, now_s).alerts[uid] = 1
        if not settled:
            return []  # a flap notice can only calm down when one of its conditions settles
        calm = [
            notice
            for notice in self._flap_notices.values()
            if not any(self._flaps.flapping((a.target, a.key)) for a in notice.alerts)
        ]
        for notice in calm:
            del self._flap_notices[notice.uid]
        return calm

    def _bucket(self, kind: NoticeKind, alert: AlertRow, due_s: float) -> _Bucket:
        key = (kind, popup_rule(alert))
        if key not in self._buckets:
            self._buckets[key] = _Bucket(due_s + self._settings.group_s)
        return self._buckets[key]

    def _flush(self, kind: NoticeKind, bucket: _Bucket, now_s: float) -> list[Notice]:
        alerts = [a for uid in bucket.alerts if (a := self._current(uid)) is not None]
        wanted = self._may_pop if kind is NoticeKind.FLAPPING else self._eligible
        alerts = [a for a in alerts if wanted(a, now_s)]
        if not alerts:
            return []
        alerts = self._in_order(alerts)
        if kind is NoticeKind.FLAPPING:
            # Not marked shown: one that goes on firing steadily pops once it settles.
            notice = self._flap_notice([(a, bucket.alerts[a.uid]) for a in alerts])
        else:
            notice = self._alert_notice(alerts)
            self._mark_shown(alerts)
        if not self._budget.take(now_s):
            self._budget.hold_back(now_s, [a.rule for a in alerts])
            return []
        return [self._opened(notice)]

    def _critical_notices(self, criticals: list[AlertRow], now_s: float) -> Decisions:
        """Each condition's first critical pops; one critical again within the window flaps."""
        decisions, by_rule = Decisions(), dict[str, list[AlertRow]]()
        started: list[tuple[AlertRow, int]] = []  # conditions flapping from this frame on
        for alert in criticals:
            key: FlapKey = (alert.target, alert.key)
            count = self._critical_flaps.raised(key, alert.uid, now_s)
            if count is not None:
                started.append((alert, count))
            elif key in self._critical_flap_of:
                decisions.update += self._count_critical_flap(key)
            else:
                by_rule.setdefault(popup_rule(alert), []).append(alert)
        notices = [self._alert_notice(self._in_order(alerts)) for alerts in by_rule.values()]
        self._mark_shown(criticals)  # a flapping one too: its changes are no news
        decisions.show += [self._opened(notice) for notice in notices]
        by_flap_rule: dict[str, list[tuple[AlertRow, int]]] = {}
        for alert, count in started:
            by_flap_rule.setdefault(popup_rule(alert), []).append((alert, count))
        for flaps in by_flap_rule.values():
            decisions.show.append(self._open_critical_flap(flaps))
        return decisions

    def _open_critical_flap(self, flaps: list[tuple[AlertRow, int]]) -> Notice:
        order = {a.uid: i for i, a in enumerate(self._in_order(a for a, _ in flaps))}
        flaps.sort(key=lambda flap: order[flap[0].uid])
        notice = self._flap_notice(flaps)
        self._critical_flap_notices[notice.uid] = _CriticalFlap(
            notice, {(a.target, a.key): (a, count) for a, count in flaps}
        )
        for alert, _ in flaps:
            self._critical_flap_of[(alert.target, alert.key)] = notice.uid
        return self._opened(notice)

    def _count_critical_flap(self, key: FlapKey) -> list[Notice]:
        """One more time critical: the flap notice says so, in place (no new popup)."""
        flap = self._critical_flap_notices[self._critical_flap_of[key]]
        first, _ = flap.flaps[key]
        flap.flaps[key] = (first, self._critical_flaps.count(key))
        notice = self._flap_notice(list(flap.flaps.values()), flap.notice.uid)
        flap.notice = notice
        return [notice]

    def _release_settled_criticals(self, now_s: float) -> Decisions:
        """Flapping criticals calm for a whole window: the notice goes; one still firing pops."""
        decisions, steady = Decisions(), list[AlertRow]()
        for key, uid in self._critical_flaps.settled(now_s):
            notice_uid = self._critical_flap_of.pop(key, None)
            flap = self._critical_flap_notices.get(notice_uid) if notice_uid else None
            if flap is None:
                continue
            del flap.flaps[key]
            if not flap.flaps:
                del self._critical_flap_notices[flap.notice.uid]
                decisions.withdraw.append(flap.notice)
            alert = self._current(uid)
            critical = alert is not None and alert.severity is Severity.CRITICAL
            if critical and alert is not None and alert.firing and self._may_pop(alert, now_s):
                steady.append(alert)
        by_rule: dict[str, list[AlertRow]] = {}
        for alert in steady:
            by_rule.setdefault(popup_rule(alert), []).append(alert)
        notices = [self._alert_notice(self._in_order(alerts)) for alerts in by_rule.values()]
        decisions.show += [self._opened(notice) for notice in notices]
        return decisions

    def _summary(self, now_s: float) -> Notice | None:
        held_back = self._budget.summary_due(now_s)
        if held_back is None:
            return None
        count = sum(held_back.values())
        return self._opened(Notice(
            SUMMARY_UID, NoticeKind.SUMMARY, Severity.WARNING, words.summary_headline(count),
            words.summary_body(held_back, self._settings.budget_per_hour), (),
        ))  # fmt: skip

    def _withdrawable(self, uid: AlertUid, now_s: float) -> list[Notice]:
        """Notices of this alert whose every alert is cleared, acknowledged or silenced."""
        notices = (self._open[n] for n in self._notices_of.get(uid, ()))
        gone = [n for n in notices if all(self._quiet(a.uid, now_s) for a in n.alerts)]
        for notice in gone:
            del self._open[notice.uid]
            for alert in notice.alerts:
                self._notices_of[alert.uid].discard(notice.uid)
                if not self._notices_of[alert.uid]:
                    del self._notices_of[alert.uid]
        return gone

    def _quiet(self, uid: AlertUid, now_s: float) -> bool:
        alert = self._current(uid)
        return (
            alert is None
            or not alert.firing
            or alert.acknowledged
            or alert.silenced(int(now_s * 1000))
        )

    # -- notices ----------------------------------------------------------------

    def _alert_notice(self, alerts: Sequence[AlertRow]) -> Notice:
        severity = max(a.severity for a in alerts)
        if len(alerts) == 1:
            alert = alerts[0]
            return Notice(alert.uid, NoticeKind.ALERT, severity, "", alert.summary, (alert,))
        return Notice(
            self._new_uid(alerts[0]), NoticeKind.GROUP, severity,
            words.group_headline(severity, alerts, self._name_of),
            words.group_body(alerts, self._name_of), tuple(alerts),
        )  # fmt: skip

    def _flap_notice(
        self, flaps: list[tuple[AlertRow, int]], uid: AlertUid | None = None
    ) -> Notice:
        severity = max(a.severity for a, _ in flaps)
        window_s = self._settings.flap_window_s
        return Notice(
            uid or self._new_uid(flaps[0][0]), NoticeKind.FLAPPING, severity,
            words.flap_headline(severity, flaps, window_s, self._name_of),
            words.flap_body(flaps, window_s, self._name_of), tuple(a for a, _ in flaps),
        )  # fmt: skip

    def _new_uid(self, first: AlertRow) -> AlertUid:
        return first.target, f"notice-{next(self._numbers)}"

    def _in_order(self, alerts: Iterable[AlertRow]) -> list[AlertRow]:
        def order(a: AlertRow) -> tuple[str, int]:
            return self._name_of(a.target), -1 if a.gpu_index is None else a.gpu_index

        return sorted(alerts, key=order)

    def _mark_shown(self, alerts: Iterable[AlertRow]) -> None:
        for alert in alerts:
            self._shown[alert.uid] = max(alert.severity, self._shown.get(alert.uid, alert.severity))

    def _opened(self, notice: Notice) -> Notice:
        if notice.kind is NoticeKind.FLAPPING:
            if notice.severity is not Severity.CRITICAL:  # criticals' are kept apart
                self._flap_notices[notice.uid] = notice
        elif notice.kind is not NoticeKind.SUMMARY:  # the summary is never withdrawn
            self._open[notice.uid] = notice
            for alert in notice.alerts:
                self._notices_of.setdefault(alert.uid, set()).add(notice.uid)
        if notice.anchor is not None:
            self._anchors[notice.uid] = notice.anchor.uid
            while len(self._anchors) > MAX_ANCHORS:
                del self._anchors[next(iter(self._anchors))]
        return notice
