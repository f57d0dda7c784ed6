"""The incident report as one self-contained HTML page: styles inline, drawings as SVG,
screenshots as data: URLs; nothing fetched, no script.

Every text that came from a node (host names, summaries, users, targets, comments) is
escaped here or in report_svg: a hostile node must not add markup to the page.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Sequence

from console.fleet.incident import AlertLife, Incident, NodeStory, marks
from console.terminal.report_svg import chart, esc, timeline
from console.terminal.table import local_time

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #1a202c; }
h1 { font-size: 22px; } h2 { font-size: 18px; margin-top: 28px; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 8px 0; } td, th { border: 1px solid #ddd;
  padding: 3px 6px; text-align: left; vertical-align: top; } th { background: #f7fafc; }
.note { color: #744210; background: #fefcbf; padding: 4px 8px; }
.failed { color: #742a2a; background: #fed7d7; padding: 4px 8px; }
.critical { color: #c53030; font-weight: bold; } .warning { color: #b7791f; }
svg text { font: 11px sans-serif; fill: #2d3748; } svg .title { font-weight: bold; }
.charts { display: flex; flex-wrap: wrap; gap: 8px; } figure { margin: 8px 0; }
img.shot { max-width: 100%; border: 1px solid #ccc; }
"""


def when(at_ms: int | None) -> str:
    """A time as people read it, with the exact moment in the markup (data-ms)."""
    if at_ms is None:
        return "-"
    iso = dt.datetime.fromtimestamp(at_ms / 1000, dt.UTC).isoformat(timespec="milliseconds")
    return f'<time datetime="{iso}" data-ms="{at_ms}">{esc(local_time(at_ms))}</time>'


def render(incident: Incident) -> str:
    window = incident.window
    title = f"Incident report {local_time(window.start_ms)} to {local_time(window.end_ms)}"
    body = [
        f"<h1>{esc(title)}</h1>",
        f"<p>From {when(window.start_ms)} to {when(window.end_ms)}, made {when(incident.made_ms)}"
        f" by <code>gpufleet report</code> from {len(incident.nodes)} node(s).</p>",
        _unanswered(incident),
        "<h2>Timeline</h2>", timeline(window, marks(incident), _spans(incident)),
        "<h2>Alerts</h2>", _alerts(incident.nodes),
        "<h2>Who did what (audit)</h2>", _audit(incident.nodes),
        "<h2>Self-healing</h2>", _healing(incident.nodes),
        "<h2>Node outages</h2>", _outages(incident.nodes),
        "<h2>GPUs involved</h2>", _plots(incident),
        "<h2>The grid at key moments</h2>", _screenshots(incident),
    ]  # fmt: skip
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head><body>\n"
        + "\n".join(part for part in body if part)
        + "\n</body></html>\n"
    )


def _spans(incident: Incident) -> list[tuple[int, int | None, str]]:
    return [(a.raised_ms, a.cleared_ms, a.severity) for s in incident.nodes for a in s.alerts]


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], empty: str) -> str:
    """Cells are markup already (escaped by their makers)."""
    if not rows:
        return f"<p>{esc(empty)}</p>"
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    lines = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{lines}</table>"


def _unanswered(incident: Incident) -> str:
    return "".join(
        f'<p class="failed">{esc(u.node)} ({esc(u.address)}) '
        f"{'could not be reached' if u.unreachable else 'did not answer'}: {esc(u.reason)}. "
        "Its part is missing from this report.</p>"
        for u in incident.unanswered
    )


def _gpu(gpu: int | None) -> str:
    return "node" if gpu is None else str(gpu)


def _alerts(nodes: Sequence[NodeStory]) -> str:
    rows = [
        [esc(a.node), esc(a.alert_id), _severity(a),
         esc(a.rule), _gpu(a.gpu), esc(a.summary), when(a.raised_ms),
         "-" if a.acked_ms is None else f"{when(a.acked_ms)} by {esc(a.acked_by)}"
         + (f": {esc(a.ack_comment)}" if a.ack_comment else ""),
         when(a.cleared_ms) if a.cleared_ms is not None else "still firing",
         "-" if a.peak is None else esc(f"{a.peak:g} {a.unit}".rstrip())]
        for story in nodes for a in story.alerts
    ]  # fmt: skip
    headers = ("Node", "Alert", "Severity", "Rule", "GPU", "Summary", "Raised", "Acknowledged",
               "Cleared", "Peak")  # fmt: skip
    return _table(headers, rows, "No alert fired in the window.")


def _severity(alert: AlertLife) -> str:
    """The highest severity it fired at, and since when where it rose to critical later."""
    shown = f'<span class="{esc(alert.severity)}">{esc(alert.severity)}</span>'
    if alert.critical_ms is not None and alert.critical_ms != alert.raised_ms:
        shown += f" from {when(alert.critical_ms)}"
    return shown


def _audit(nodes: Sequence[NodeStory]) -> str:
    notes = "".join(f'<p class="note">{esc(s.node)}: {esc(s.audit_note)}</p>'
                    for s in nodes if s.audit_note)  # fmt: skip
    rows = [[when(a.time_ms), esc(a.node), esc(a.user), esc(a.method), esc(a.target),
             f"<code>{esc(a.params)}</code>", esc(a.result)]
            for story in nodes for a in story.audit]  # fmt: skip
    headers = ("Time", "Node", "Who", "What", "Target", "Parameters", "Result")
    return notes + _table(headers, rows, "No change or refusal was audited in the window.")


def _healing(nodes: Sequence[NodeStory]) -> str:
    rows = [[when(h.time_ms), esc(h.node), _gpu(h.gpu), esc(h.action),
             "dry run" if h.dry_run else "acted", esc(h.reason), esc(h.outcome)]
            for story in nodes for h in story.healing]  # fmt: skip
    headers = ("Time", "Node", "GPU", "Action", "Mode", "Why", "Outcome")
    return _table(headers, rows, "Self-healing did nothing in the window.")


def _outages(nodes: Sequence[NodeStory]) -> str:
    rows = [[when(o.time_ms), esc(o.node), _gpu(o.gpu), esc(o.what), when(o.since_ms)]
            for story in nodes for o in story.outages]  # fmt: skip
    headers = ("Time", "Node", "GPU", "What", "Last heard before")
    return _table(headers, rows, "The journals show no restart and no GPU off the bus in the "
                  "window, and the histories no gap in sampling.")  # fmt: skip


def _plots(incident: Incident) -> str:
    figures = []
    for story in incident.nodes:
        for plot in story.plots:
            caption = (f"{story.node} GPU {plot.gpu}: from the {plot.tier or 'no'} history tier"
                       f" ({plot.step_ms / 1000:g} s a point), the window and "
                       f"{incident.window.margin_ms // 1000} s either side (shaded)")  # fmt: skip
            charts = "".join(chart(plot, s, incident.window) for s in plot.series)
            figures.append(f'<figure class="gpu" data-node="{esc(story.node)}" '
                           f'data-gpu="{plot.gpu}" data-start-ms="{plot.start_ms}" '
                           f'data-end-ms="{plot.end_ms}" data-tier="{esc(plot.tier)}">'
                           f"<figcaption>{esc(caption)}</figcaption>"
                           f'<div class="charts">{charts}</div></figure>')  # fmt: skip
    notes = [f'<p class="note">{esc(s.node)}: {esc(n)}</p>'
             for s in incident.nodes for n in s.notes]  # fmt: skip
    if not figures:
        return "".join(notes) + "<p>No GPU had an alert or a self-healing action in the window.</p>"
    return "".join(notes + figures)


def _screenshots(incident: Incident) -> str:
    shots = incident.screenshots
    parts = [f'<p class="note">{esc(shots.note)}</p>'] if shots.note else []
    for shot in shots.shots:
        data = base64.b64encode(shot.png).decode("ascii")
        parts.append(f'<figure><img class="shot" alt="{esc(shot.why)}" '
                     f'src="data:image/png;base64,{data}"><figcaption>{when(shot.at_ms)}: '
                     f"{esc(shot.why)}</figcaption></figure>")  # fmt: skip
    return "".join(parts) or "<p>No screenshot.</p>"
