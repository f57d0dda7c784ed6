"""Turning probe readings into the benchmark's result: statistics, goals, a table."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

MIB = 1024**2
RESULTS = Path(__file__).resolve().parent / "results"


def stats_ms(seconds: Sequence[float]) -> dict[str, float | int | None]:
    """count, p50, p99 and max of durations given in seconds, in milliseconds."""
    if not seconds:
        return {"count": 0, "p50": None, "p99": None, "max": None}
    values = np.asarray(seconds, dtype=np.float64) * 1000
    return {
        "count": int(values.size),
        "p50": round(float(np.percentile(values, 50)), 3),
        "p99": round(float(np.percentile(values, 99)), 3),
        "max": round(float(values.max()), 3),
    }


def percent(part: float, whole: float) -> float:
    return round(100 * part / whole, 2) if whole > 0 else 0.0


@dataclass(frozen=True)
class Goal:
    """A target from the project's design, checked against one number of the result."""

    name: str
    path: tuple[str, ...]
    limit: float
    unit: str

    def check(self, result: dict[str, object]) -> dict[str, object]:
        value = lookup(result, self.path)
        met = value is not None and float(value) < self.limit  # type: ignore[arg-type]
        return {
            "name": self.name,
            "goal": f"< {self.limit:g} {self.unit}",
            "value": value,
            "met": met,
        }


GOALS = (
    Goal("frame time p99", ("frame_ms", "frame", "p99"), 25, "ms"),
    Goal("GUI thread busy", ("gui", "busy_pct"), 30, "%"),
    Goal("console RSS", ("memory_mib", "console_rss"), 1024, "MiB"),
    Goal("sample-to-pixel latency p99", ("latency_ms", "sample_to_pixel", "p99"), 250, "ms"),
)
# A large site (issue #31: 10,000 GPUs, 1,250 nodes, in one console on a 2-core machine).
LARGE_FLEET_GPUS = 5000
GOALS_LARGE = (
    Goal("frame time p99", ("frame_ms", "frame", "p99"), 33, "ms"),
    Goal("sample-to-pixel latency p99", ("latency_ms", "sample_to_pixel", "p99"), 1000, "ms"),
    Goal("console CPU", ("cpu_pct", "console"), 60, "% of a core"),
    Goal("console RSS", ("memory_mib", "console_rss"), 2048, "MiB"),
    Goal("every node streaming after start", ("connect", "all_streaming_s"), 30, "s"),
    Goal("longest GUI stall while connecting", ("connect", "max_stall_ms"), 100, "ms"),
)


def lookup(result: dict[str, object], path: Sequence[str]) -> object:
    value: object = result
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def check_goals(result: dict[str, object]) -> list[dict[str, object]]:
    gpus = lookup(result, ("config", "gpu_total"))
    large = isinstance(gpus, int) and gpus >= LARGE_FLEET_GPUS
    return [goal.check(result) for goal in (GOALS_LARGE if large else GOALS)]


def md_row(*cells: object) -> str:
    """One row of a markdown table: `| a | b |`."""
    return "| " + " | ".join(map(str, cells)) + " |"


# -- the table ------------------------------------------------------------------


def _fmt(value: object, unit: str = "") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.1f}{unit}"
    return f"{value}{unit}"


def _stat_row(label: str, stats: object) -> str:
    s = stats if isinstance(stats, dict) else {}
    cells = (_fmt(s.get("p50")), _fmt(s.get("p99")), _fmt(s.get("max")), _fmt(s.get("count")))
    return f"  {label:<34}{cells[0]:>10}{cells[1]:>10}{cells[2]:>10}{cells[3]:>9}"


def format_table(result: dict[str, object]) -> str:
    """A human-readable summary of a console_fleet result."""
    lines = [_title(result), "", f"  {'':<34}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}{'n':>9}"]
    for label, path in (
        ("frame (GUI work, pump to pump)", ("frame_ms", "frame")),
        ("  of which off-CPU", ("frame_ms", "off_cpu")),
        ("  pump (apply + slots)", ("frame_ms", "pump")),
        ("  repaint (window UpdateRequest)", ("frame_ms", "repaint")),
        ("  fleet grid paintEvent", ("frame_ms", "grid_paint")),
        ("  GPU plots paintEvent", ("frame_ms", "plots_paint")),
        ("frames that refreshed the plots", ("frame_ms", "plot_frame")),
        ("frames that did not", ("frame_ms", "other_frame")),
        ("sample-to-pixel latency", ("latency_ms", "sample_to_pixel")),
        ("  daemon sweep -> inbox", ("latency_ms", "network")),
        ("  inbox -> applied", ("latency_ms", "inbox")),
        ("  applied -> repainted", ("latency_ms", "to_screen")),
        ("GUI heartbeat lateness (5 ms)", ("gui", "stall_ms")),
    ):
        lines.append(_stat_row(label, lookup(result, path)))
    lines += ["", *_usage_lines(result), "", *_goal_lines(result)]
    return "\n".join(lines)


def _title(result: dict[str, object]) -> str:
    config = lookup(result, ("config",))
    machine = lookup(result, ("machine",))
    c = config if isinstance(config, dict) else {}
    m = machine if isinstance(machine, dict) else {}
    return (
        f"console_fleet: {c.get('nodes')} nodes x {c.get('gpus')} GPUs = {c.get('gpu_total')} GPUs"
        f" at {c.get('interval_s')} s, measured {c.get('seconds')} s"
        f" on {m.get('nproc')} x {m.get('cpu_model')}"
    )


def _usage_lines(result: dict[str, object]) -> list[str]:
    def get(*path: str) -> object:
        return lookup(result, path)

    return [
        f"  GUI thread busy            {_fmt(get('gui', 'busy_pct'), ' %')}"
        f"  (without the heartbeat probe {_fmt(get('gui', 'busy_excl_probe_pct'), ' %')};"
        f" on CPU {_fmt(get('gui', 'busy_on_cpu_pct'), ' %')})",
        f"  max GUI stall              {_fmt(get('gui', 'max_stall_ms'), ' ms')}",
        f"  console CPU (one core=100) {_fmt(get('cpu_pct', 'console'), ' %')}"
        f"  (GUI {_fmt(get('cpu_pct', 'console_gui_thread'), ' %')},"
        f" network {_fmt(get('cpu_pct', 'console_net_thread'), ' %')},"
        f" other {_fmt(get('cpu_pct', 'console_other_threads'), ' %')})",
        f"  fleet CPU ({get('config', 'fleet_processes') or 1} process(es), nice"
        f" {get('config', 'fleet_nice') or 0}) {_fmt(get('cpu_pct', 'fleet'), ' %')}"
        f"  (other processes on the machine {_fmt(get('cpu_pct', 'other_processes'), ' %')},"
        f" of which hypervisor steal {_fmt(get('cpu_pct', 'steal'), ' %')})",
        f"  console RSS                {_fmt(get('memory_mib', 'console_rss'), ' MiB')}"
        f"  (peak {_fmt(get('memory_mib', 'console_peak'), ' MiB')};"
        f" fleet {_fmt(get('memory_mib', 'fleet_rss'), ' MiB')})",
        f"  batches shown / expected   {get('batches', 'shown')} / {get('batches', 'expected')}",
        f"  alerts held / firing       {get('alerts', 'alerts')} / {get('alerts', 'firing')}"
        f"  ({get('alerts', 'changes_per_s')} changes/s)",
        f"  network thread stalls      {get('net_stalls', 'stalls')} since the start"
        f" (longest {_fmt(get('net_stalls', 'longest_s'), ' s')})",
        f"  connecting ({get('config', 'fleet') or 'daemons'})"
        f"      every node streaming after {_fmt(get('connect', 'all_streaming_s'), ' s')},"
        f" longest GUI stall {_fmt(get('connect', 'max_stall_ms'), ' ms')}"
        f" (window built in {_fmt(get('connect', 'window_built_s'), ' s')} before)",
    ]


def _goal_lines(result: dict[str, object]) -> list[str]:
    goals = lookup(result, ("goals",))
    lines = ["  goals:"]
    for goal in goals if isinstance(goals, list) else []:
        mark = "met" if goal["met"] else "NOT MET"
        lines.append(f"    {goal['name']:<30}{goal['goal']:>12}  {_fmt(goal['value']):>10}  {mark}")
    return lines


def write_outputs(
    name: str, result: dict[str, Any], json_path: Path | None, md_path: Path | None, md_text: str
) -> None:
    """Write a benchmark's JSON (if asked) and its markdown report (if any)."""
    if json_path is not None:
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if md_path is not None:
        md_path.parent.mkdir(parents=True, exist_ok=True)
        md_path.write_text(md_text, encoding="utf-8")
        print(f"{name}: wrote {md_path}", file=sys.stderr)


def parse_with_outputs(
    parser: argparse.ArgumentParser, argv: Sequence[str] | None, name: str, smoke_help: str
) -> argparse.Namespace:
    """Parse a measuring script's command line, its own options and these three after them.

    --smoke (a short run that writes nothing unless asked: `smoke_help` says how short),
    --out FILE.json and --md FILE.md; without any of them the result goes to
    bench/results/NAME.json and NAME.md. `argv` is kept as `args.argv` for run_header.
    """
    arg = parser.add_argument
    arg("--smoke", action="store_true", help=smoke_help)
    arg("--out", type=Path, metavar="FILE.json")
    arg("--md", type=Path, metavar="FILE.md")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if not args.smoke and args.out is None and args.md is None:
        args.out, args.md = RESULTS / f"{name}.json", RESULTS / f"{name}.md"
    return args


def print_report(report: dict[str, Any], out: Path | None) -> None:
    """Print a benchmark's JSON report, and write it to `out` too when given."""
    text = json.dumps(report, indent=2)
    print(text)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")


class Report(Protocol):
    """A measuring script's report module: its printed summary and its markdown."""

    def format_summary(self, result: dict[str, Any]) -> str: ...

    def markdown(self, result: dict[str, Any]) -> str: ...


def measure_and_write(
    name: str,
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace, Path], dict[str, Any]],
    cannot_measure: tuple[type[Exception], ...],
    report: Report,
) -> int:
    """A measuring script's main: `run` in a scratch directory, its summary, its outputs.

    The summary is printed; the markdown is written to --md, else (unless --smoke) to
    bench/results/NAME.md. A failure in `cannot_measure` (the set-up could not be
    measured) is printed as 'NAME: why' and exits 1.
    """
    try:
        with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
            result = run(args, Path(tmp))
    except cannot_measure as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    print(report.format_summary(result))
    md_path = args.md or (None if args.smoke else RESULTS / f"{name}.md")
    write_outputs(name, result, args.out, md_path, report.markdown(result) if md_path else "")
    return 0


def run_and_write(
    name: str,
    args: argparse.Namespace,
    run: Callable[[argparse.Namespace, Path], dict[str, Any]],
    markdown: Callable[[dict[str, Any]], str],
) -> int:
    """A measuring script's main whose report is its markdown: `run` in a scratch
    directory, the markdown printed, and written with the JSON (--out / --md)."""
    with tempfile.TemporaryDirectory(prefix=f"{name}-") as tmp:
        result = run(args, Path(tmp))
    text = markdown(result)
    print(text)
    write_outputs(name, result, args.out, args.md, text)
    return 0


def run_line(result: dict[str, Any], script: str) -> str:
    """A report's line saying when, where and how it ran: "2026-12-07 23:33 UTC, 2 x AMD
    EPYC, commit 4e39e61f1a; `alert_crossing.py --smoke`"."""
    m = result.get("machine", {})
    argv = " ".join([script, *result.get("argv", [])])
    return (f"{result['when']}, {m.get('nproc', '?')} x {m.get('cpu_model', '?')}, commit "
            f"{str(result['code']['commit'])[:10]}; `{argv}`")  # fmt: skip


def goal_list(goals: list[dict[str, Any]]) -> list[str]:
    """A report's goals as markdown list items: "- name < 33 ms: 31.6 — met"."""
    return [f"- {g['name']} {g['goal']}: {g['value']} — {'met' if g['met'] else 'NOT MET'}"
            for g in goals]  # fmt: skip
