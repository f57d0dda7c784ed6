"""An incident report's record: what the nodes said about a window of time, as plain values.

`gpufleet report` (console/terminal/report.py) asks each node for its journal, audit
and history over the window and builds these; console/terminal/report_html.py renders
them. Times are Unix ms; a value a node did not give is None, never 0. No Qt, no protobuf.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from console.fleet.durations import duration_ms_text

# Plots reach this far either side of the window (a tenth of it, at least a minute):
# what led up to the incident and how it ended.
MIN_MARGIN_MS: Final = 60_000
# Grid screenshots per report, at most: the first critical raise, outages, the end.
MAX_KEY_MOMENTS: Final = 4
# Samples this many of the history's steps apart (and at least GAP_MIN_MS) leave a gap
# between them: the node was not sampling then (down, its daemon hung or stopped).
GAP_STEPS: Final = 3
GAP_MIN_MS: Final = 30_000


@dataclass(frozen=True)
class Window:
    start_ms: int
    end_ms: int

    @property
    def margin_ms(self) -> int:
        return max(MIN_MARGIN_MS, (self.end_ms - self.start_ms) // 10)

    def holds(self, at_ms: int) -> bool:
        return self.start_ms <= at_ms <= self.end_ms


@dataclass(frozen=True)
class AlertLife:
    """One alert from raise to clear, as the node's journal last had it."""

    node: str
    alert_id: str
    rule: str
    severity: str  # the highest it fired at: info, warning, critical
    gpu: int | None  # None: a node-level alert
    summary: str
    raised_ms: int
    acked_ms: int | None = None
    acked_by: str = ""
    ack_comment: str = ""
    cleared_ms: int | None = None
    peak: float | None = None
    unit: str = ""
    critical_ms: int | None = None  # when it first fired critical (raised so, or escalated)

    def overlaps(self, window: Window) -> bool:
        """Firing at some moment of the window."""
        cleared = self.cleared_ms if self.cleared_ms is not None else math.inf
        return self.raised_ms <= window.end_ms and cleared >= window.start_ms


@dataclass(frozen=True)
class AuditLine:
    """Who did what: one audit record (the outcome of a change, or a refusal)."""

    node: str
    time_ms: int
    user: str
    method: str  # /gpufleet.v1.NodeService/KillProcess → "KillProcess"; healing.drain
    target: str
    params: str
    result: str


@dataclass(frozen=True)
class HealingStep:
    """What self-healing did (or, in dry-run, would have done)."""

    node: str
    time_ms: int
    gpu: int | None
    action: str
    dry_run: bool
    reason: str
    outcome: str


@dataclass(frozen=True)
class Outage:
    """A gap the journal shows (the daemon started again, a GPU fell off the bus or
    returned) or the history does (no samples for a while: `history_gaps`)."""

    node: str
    time_ms: int
    gpu: int | None
    what: str
    # A restart: the journal's event before it (down since, at most); a history gap: its
    # last sample before.
    since_ms: int | None = None
    until_ms: int | None = None  # a history gap: its first sample after

    @property
    def shown_ms(self) -> int:
        """The moment that shows it: a gap's middle (at its start, the last sample is
        still within the step the grid shows)."""
        return self.time_ms if self.until_ms is None else (self.time_ms + self.until_ms) // 2


def history_gaps(node: str, times_ms: Iterable[int], step_ms: int, window: Window) -> list[Outage]:
    """The gaps in a node's history (its samples' times, oldest first, `step_ms` apart
    where it sampled) that reach into the window: each an outage from the step after the
    last sample before it. Before the first sample and after the last are not gaps."""
    longest = max(GAP_STEPS * step_ms, GAP_MIN_MS)
    gaps = []
    for before, after in itertools.pairwise(times_ms):
        silent = before + step_ms
        if after - before > longest and silent <= window.end_ms and after >= window.start_ms:
            what = (f"no samples for {duration_ms_text(after - silent)}: the node was down, "
                    "or its daemon hung or stopped")  # fmt: skip
            gaps.append(Outage(node, silent, None, what, since_ms=before, until_ms=after))
    return gaps


@dataclass(frozen=True)
class Series:
    """One metric of one GPU over the plotted range; NaN where the GPU did not report it."""

    metric: str  # the catalogue's field
    label: str
    unit: str
    times_ms: tuple[int, ...]
    values: tuple[float, ...]
    peaks: tuple[float, ...]  # the largest value within each point's step

    @property
    def peak(self) -> float | None:
        known = [v for v in self.peaks if not math.isnan(v)]
        return max(known) if known else None

    @property
    def points(self) -> int:
        return sum(1 for v in self.values if not math.isnan(v))


@dataclass(frozen=True)
class GpuPlot:
    """A GPU involved in the incident, over the window and its margin."""

    node: str
    gpu: int
    start_ms: int
    end_ms: int
    tier: str  # the history tier that answered, and its step
    step_ms: int
    series: tuple[Series, ...]


@dataclass(frozen=True)
class NodeStory:
    """One node's part: its alerts, audit, self-healing, outages and plots."""

    node: str
    address: str
    alerts: tuple[AlertLife, ...] = ()
    audit: tuple[AuditLine, ...] = ()
    audit_note: str = ""  # why the audit is missing (a role the caller lacks), else ""
    healing: tuple[HealingStep, ...] = ()
    outages: tuple[Outage, ...] = ()
    plots: tuple[GpuPlot, ...] = ()
    notes: tuple[str, ...] = ()  # what a person should know about a part left out


@dataclass(frozen=True)
class Screenshot:
    at_ms: int
    why: str
    png: bytes


@dataclass(frozen=True)
class Screenshots:
    shots: tuple[Screenshot, ...] = ()
    note: str = ""  # why there are none, or fewer than asked


@dataclass(frozen=True)
class Unanswered:
    """A node that could not tell its part."""

    node: str
    address: str
    reason: str
    unreachable: bool


@dataclass(frozen=True)
class Incident:
    window: Window
    made_ms: int
    nodes: tuple[NodeStory, ...]
    unanswered: tuple[Unanswered, ...] = ()
    screenshots: Screenshots = field(default_factory=Screenshots)


@dataclass(frozen=True)
class Mark:
    """A mark on the timeline: when, which lane, what it says on hover."""

    time_ms: int
    lane: str
    label: str
    tone: str = ""  # critical, warning, info, clear: how it is coloured


LANES: Final = ("alerts", "acknowledged", "audit", "self-healing", "outages")


def involved_gpus(
    alerts: Iterable[AlertLife], healing: Iterable[HealingStep], window: Window
) -> list[int]:
    """The GPUs with an alert firing in the window or a self-healing action in it."""
    gpus = {a.gpu for a in alerts if a.gpu is not None and a.overlaps(window)}
    gpus |= {h.gpu for h in healing if h.gpu is not None and window.holds(h.time_ms)}
    return sorted(gpus)


def marks(incident: Incident) -> list[Mark]:
    """Everything the timeline shows, within the window, oldest first."""
    found: list[Mark] = []
    for story in incident.nodes:
        found += _alert_marks(story)
        found += [Mark(a.time_ms, "audit", f"{story.node}: {a.user} {a.method} {a.target}: "
                       f"{a.result}") for a in story.audit]  # fmt: skip
        found += [Mark(h.time_ms, "self-healing", f"{story.node}: {_gpu(h.gpu)}{h.action} "
                       f"({h.outcome})") for h in story.healing]  # fmt: skip
        found += [Mark(o.time_ms, "outages", f"{story.node}: {_gpu(o.gpu)}{o.what}", "critical")
                  for o in story.outages]  # fmt: skip
    return sorted((m for m in found if incident.window.holds(m.time_ms)), key=lambda m: m.time_ms)


def _alert_marks(story: NodeStory) -> list[Mark]:
    found: list[Mark] = []
    for a in story.alerts:
        what = f"{story.node}: {_gpu(a.gpu)}{a.rule} {a.alert_id}"
        escalated = a.critical_ms is not None and a.critical_ms != a.raised_ms
        raised_as = "warning" if escalated else a.severity  # lower, at least, before critical
        found.append(Mark(a.raised_ms, "alerts", f"{what} raised", raised_as))
        if escalated and a.critical_ms is not None:
            found.append(Mark(a.critical_ms, "alerts", f"{what} critical", "critical"))
        if a.cleared_ms is not None:
            found.append(Mark(a.cleared_ms, "alerts", f"{what} cleared", "clear"))
        if a.acked_ms is not None:
            found.append(Mark(a.acked_ms, "acknowledged", f"{what} acknowledged by {a.acked_by}"))
    return found


def key_moments(incident: Incident) -> list[tuple[int, str]]:
    """When the grid is worth a picture: the first critical raise, each outage, the end."""
    window = incident.window
    critical = sorted(
        (a.critical_ms, f"{a.node}: {_gpu(a.gpu)}{a.rule} {a.alert_id} fired critical")
        for story in incident.nodes
        for a in story.alerts
        if a.critical_ms is not None and window.holds(a.critical_ms)
    )
    outages = sorted(
        (o.shown_ms, f"{o.node}: {_gpu(o.gpu)}{o.what}")
        for story in incident.nodes
        for o in story.outages
        if window.holds(o.time_ms)
    )
    moments = critical[:1] + outages
    return [*moments[: MAX_KEY_MOMENTS - 1], (window.end_ms, "the end of the window")]


def _gpu(gpu: int | None) -> str:
    return "" if gpu is None else f"GPU {gpu} "
