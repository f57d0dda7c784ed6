"""`gpufleet report --from TIME --to TIME --out FILE.html [--pdf]`: an incident report.

Each node tells its part of the window (console/terminal/incident_calls.py): the alerts
with their raise, acknowledgement and clear, who did what, what self-healing did, its
outages, and its involved GPUs' history; report_html.py makes one self-contained page
of it, report_shots.py adds the grid at the key moments, report_pdf.py a PDF.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from console.fleet.incident import Incident, Unanswered, Window, key_moments
from console.terminal.common import command, now_ms, print_json, report
from console.terminal.fleet_calls import EXIT_FAILED, EXIT_OK, on_fleet
from console.terminal.incident_calls import story_of
from console.terminal.link import UsageProblem
from console.terminal.moment import FORMS, FUTURE_SLACK_MS, NEGATIVE, moment_at
from console.terminal.nodes import choose_nodes
from console.terminal.report_html import render
from console.terminal.report_pdf import NONE_INSTALLED, Converter, convert, find_converter
from console.terminal.report_shots import grid_screenshots
from console.terminal.table import local_time

DONE = "the report was written and every node told its part"
FAILED = ("a node refused or failed part of it, or the PDF converter failed (the report "
          "is written still, the missing part named in it)")  # fmt: skip


def add_command(subparsers: argparse._SubParsersAction) -> None:
    parser = command(
        subparsers, "report", "an incident report of a window: HTML, PDF where a converter is",
        run_report, done=DONE, failed=FAILED,
        description="An incident report of a window of time, as one self-contained HTML "
        "file: a timeline, the alerts with their raise, acknowledgement and clear times, who "
        "did what (the audit log: admin role), what self-healing did, node outages, plots of "
        "the GPUs involved and the grid at key moments.",
    )  # fmt: skip
    arg = parser.add_argument
    arg("--from", dest="from_ms", type=moment_at, required=True, metavar="TIME",
        help=f"the window's start: {FORMS}")  # fmt: skip
    arg("--to", dest="to_ms", type=moment_at, required=True, metavar="TIME",
        help="the window's end, as --from")  # fmt: skip
    arg("--out", type=Path, required=True, metavar="FILE.html", help="where to write the report")
    arg("--pdf", action="store_true",
        help="also FILE.pdf beside it, through weasyprint, wkhtmltopdf or a headless "
        "chromium/google-chrome on PATH (none there: exit 2 before any node is asked, "
        "nothing written)")  # fmt: skip
    arg("--no-screenshots", action="store_true",
        help="leave out the grid's screenshots (a `gpufleet console --at` run each)")  # fmt: skip
    parser._negative_number_matcher = NEGATIVE  # type: ignore[attr-defined]  # --from -2h


def run_report(args: argparse.Namespace) -> int:
    window = _window(args)
    converter = _converter(args.pdf)
    out = _out(args.out)
    chosen = choose_nodes(args)
    told = on_fleet(chosen.surveyed, chosen.security, lambda link, _: story_of(link, window))
    report(told, "report")
    unanswered = tuple(Unanswered(f.node, f.address, f.reason, f.unreachable)
                       for f in told.failures)  # fmt: skip
    stories = sorted((story for _, story in told.results),
                     key=lambda s: chosen.order.index(s.address))  # fmt: skip
    incident = Incident(window, now_ms(), tuple(stories), unanswered)
    addresses = [story.address for story in stories]
    shots = grid_screenshots(args, addresses, key_moments(incident))
    incident = dataclasses.replace(incident, screenshots=shots)
    out.write_text(render(incident), encoding="utf-8")
    code = told.exit_code()
    pdf, problem = (None, "") if converter is None else convert(converter, out)
    if problem:
        print(f"gpufleet report: the PDF was not made: {problem}", flush=True)
        code = code if code != EXIT_OK else EXIT_FAILED
    _say(args, incident, out, None if problem else pdf)
    return code


def _window(args: argparse.Namespace) -> Window:
    if args.from_ms >= args.to_ms:
        raise UsageProblem(f"--from {local_time(args.from_ms)} is not before --to "
                           f"{local_time(args.to_ms)}")  # fmt: skip
    if args.to_ms > now_ms() + FUTURE_SLACK_MS:
        raise UsageProblem(f"--to {local_time(args.to_ms)} is in the future: end the window "
                           "now or earlier")  # fmt: skip
    return Window(args.from_ms, args.to_ms)


def _converter(wanted: bool) -> Converter | None:
    if not wanted:
        return None
    found = find_converter()
    if found is None:
        raise UsageProblem(NONE_INSTALLED)
    return found


def _out(path: Path) -> Path:
    if path.is_dir() or not path.parent.is_dir():
        raise UsageProblem(f"--out {path}: not a file in an existing folder")
    return path


def _say(args: argparse.Namespace, incident: Incident, out: Path, pdf: Path | None) -> None:
    if args.json:
        print_json({
            "html": str(out), "pdf": None if pdf is None else str(pdf),
            "from_unix_ms": incident.window.start_ms, "to_unix_ms": incident.window.end_ms,
            "nodes": [s.node for s in incident.nodes],
            "alerts": sum(len(s.alerts) for s in incident.nodes),
            "gpus_plotted": sum(len(s.plots) for s in incident.nodes),
            "screenshots": len(incident.screenshots.shots),
            "errors": [{"node": u.node, "address": u.address, "reason": u.reason,
                        "unreachable": u.unreachable} for u in incident.unanswered],
        })  # fmt: skip
        return
    print(f"Wrote {out}" + ("" if pdf is None else f" and {pdf}"))
