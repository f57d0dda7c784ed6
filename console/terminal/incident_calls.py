"""One node's part of an incident report, asked over the shared client's blocking face.

The journal (StreamEvents from the start, read up to the newest seq ListAlerts reports)
gives each alert's raise, acknowledgement and clear, self-healing's actions and the
daemon's restarts and lost GPUs; QueryAudit who did what (a caller without the role is
told so in the report, not failed); QueryHistory the involved GPUs' plots, and the gaps
in the node's sampling (a hung daemon journals nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from console.fleet.incident import (
    AlertLife,
    AuditLine,
    GpuPlot,
    HealingStep,
    NodeStory,
    Outage,
    Series,
    Window,
    history_gaps,
    involved_gpus,
)
from console.terminal.common import now_ms
from console.terminal.link import CallFailed, NodeLink
from gpufleet.client import calls
from gpufleet.client import messages as pb
from gpufleet.client.words import event_kind_word, optional, severity_name
from gpufleet.policy import role_needed
from gpufleet.v1.gpu_metrics import POWER_W, TEMP_GPU_C, UTIL_GPU_PCT

PLOTTED = (TEMP_GPU_C, POWER_W, UTIL_GPU_PCT)
# A long journal is replayed whole (StreamEvents has no start time): give it time.
JOURNAL_DEADLINE_S = 60.0
MAX_AUDIT_ROWS = 10_000
MAX_POINTS = 800  # per series: finer than the plot's width, a coarser tier beyond
# The gaps are looked for in finer steps: a gap of a few minutes in a day's window.
MAX_GAP_POINTS = 10_000
OUTAGE_KINDS = {
    "daemon_started": "the daemon started again (after a stop, a crash or a reboot)",
    "gpu_lost": "fell off the bus",
    "gpu_recovered": "back on the bus",
}


@dataclass
class Journal:
    """What the journal says, folded: each alert's latest state, the healing, the outages."""

    alerts: dict[str, pb.Alert] = field(default_factory=dict)
    worst: dict[str, int] = field(default_factory=dict)  # each alert's highest severity
    critical_ms: dict[str, int] = field(default_factory=dict)  # when it first fired critical
    healing: list[HealingStep] = field(default_factory=list)
    outages: list[Outage] = field(default_factory=list)

    def fold(self, alert: pb.Alert, at_ms: int) -> None:
        """The alert after one of its events, stamped `at_ms`."""
        self.alerts[alert.id] = alert
        self.worst[alert.id] = max(self.worst.get(alert.id, 0), alert.severity)
        if severity_name(alert.severity) == "critical":
            self.critical_ms.setdefault(alert.id, at_ms)

    def lives(self, node: str) -> list[AlertLife]:
        return [self._life(node, alert) for alert in self.alerts.values()]

    def _life(self, node: str, a: pb.Alert) -> AlertLife:
        return AlertLife(
            node, a.id, a.rule, severity_name(self.worst[a.id]), optional(a, "gpu_index"),
            a.summary, a.started_unix_ms, optional(a, "acknowledged_unix_ms"),
            a.acknowledged_by, a.acknowledge_comment, optional(a, "cleared_unix_ms"),
            optional(a, "peak_value"), a.unit, self.critical_ms.get(a.id),
        )  # fmt: skip


def story_of(link: NodeLink, window: Window) -> NodeStory:
    """The node's part of the report for `window`.

    Raises:
        CallFailed: the node could not be reached, or refused its journal or history.
    """
    name = link.node.name
    journal = read_journal(link, window)
    alerts = tuple(life for life in journal.lives(name) if life.overlaps(window))
    audit, audit_note = _audit(link, window)
    gpus = involved_gpus(alerts, journal.healing, window)
    outages = sorted([*journal.outages, *_history_gaps(link, window)], key=lambda o: o.time_ms)
    return NodeStory(
        name, link.target, tuple(sorted(alerts, key=lambda a: a.raised_ms)), audit, audit_note,
        tuple(journal.healing), tuple(outages), _plots(link, window, gpus),
    )  # fmt: skip


def read_journal(link: NodeLink, window: Window) -> Journal:
    """The journal up to its newest event now: alerts folded, healing and outages in the window."""
    newest = link.call(calls.LIST_ALERTS).last_seq
    journal = Journal()
    if newest == 0:
        return journal
    before: int | None = None  # the previous event's time
    for event in link.stream(calls.STREAM_EVENTS, deadline_s=JOURNAL_DEADLINE_S, after_seq=0):
        kind, at_ms = event_kind_word(event.kind), event.time_unix_ms
        if event.HasField("alert") and event.alert.id:
            journal.fold(event.alert, at_ms)
        elif kind == "healing_action" and window.holds(at_ms):
            h = event.healing
            journal.healing.append(HealingStep(link.node.name, at_ms, optional(h, "gpu_index"),
                                               h.action, h.dry_run, h.reason,
                                               h.outcome))  # fmt: skip
        elif kind in OUTAGE_KINDS and window.holds(at_ms) and before is not None:
            gpu = optional(event, "gpu_index")  # (the journal's first start: no outage)
            since = before if kind == "daemon_started" else None
            journal.outages.append(Outage(link.node.name, at_ms, gpu, OUTAGE_KINDS[kind], since))
        before = at_ms
        if event.seq >= newest:
            break
    return journal


def _audit(link: NodeLink, window: Window) -> tuple[tuple[AuditLine, ...], str]:
    """The audit's outcomes in the window (oldest first), or why the node would not tell."""
    try:
        answer = link.call(calls.QUERY_AUDIT, from_unix_ms=window.start_ms,
                           to_unix_ms=window.end_ms, limit=MAX_AUDIT_ROWS)  # fmt: skip
    except CallFailed as refused:
        if refused.unreachable:
            raise
        role = role_needed(calls.QUERY_AUDIT.method).name.lower()
        return (), f"no audit log: the node refused it ({refused.reason}); it takes the {role} role"
    lines = [
        AuditLine(link.node.name, r.time_unix_ms, r.user, r.method.rsplit("/", 1)[-1],
                  r.target, r.params, r.result)
        for r in answer.records
        if r.result != "attempt"  # each change is recorded before (attempt) and after
    ]  # fmt: skip
    full = len(answer.records) >= MAX_AUDIT_ROWS
    note = f"only the newest {MAX_AUDIT_ROWS} records of the window" if full else ""
    return tuple(sorted(lines, key=lambda a: a.time_ms)), note


def _history_gaps(link: NodeLink, window: Window) -> list[Outage]:
    """Where the node's history has no samples for a while in the window (a hung daemon
    journals nothing: its silence shows only there)."""
    answer = link.call(calls.QUERY_HISTORY, start_unix_ms=window.start_ms,
                       end_unix_ms=min(window.end_ms, now_ms()), metrics=[TEMP_GPU_C.field],
                       max_points=MAX_GAP_POINTS)  # fmt: skip
    return history_gaps(link.node.name, answer.timestamps_unix_ms, answer.step_ms, window)


def _plots(link: NodeLink, window: Window, gpus: list[int]) -> tuple[GpuPlot, ...]:
    if not gpus:
        return ()
    start = window.start_ms - window.margin_ms
    end = min(window.end_ms + window.margin_ms, now_ms())
    answer = link.call(calls.QUERY_HISTORY, start_unix_ms=start, end_unix_ms=end,
                       metrics=[m.field for m in PLOTTED], gpu_indices=gpus,
                       max_points=MAX_POINTS)  # fmt: skip
    times = tuple(answer.timestamps_unix_ms)
    by_gpu: dict[int, list[Series]] = {gpu: [] for gpu in gpus}
    for metric in PLOTTED:
        shown = metric.shown
        assert shown is not None  # the plotted metrics are all shown ones
        for s in answer.series:
            if s.metric == metric.field and s.gpu_index in by_gpu:
                by_gpu[s.gpu_index].append(Series(
                    metric.field, shown.label, shown.unit, times, tuple(s.values),
                    tuple(s.max_values)))  # fmt: skip
    return tuple(
        GpuPlot(link.node.name, gpu, start, end, answer.tier, answer.step_ms, tuple(series))
        for gpu, series in by_gpu.items()
    )
