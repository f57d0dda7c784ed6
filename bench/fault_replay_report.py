"""The replay's Markdown: method, machine, the judgement table and healing's effect."""

from __future__ import annotations

from typing import Any

from fault_replay_plan import KINDS

MODES = ("off", "dry-run", "on", "on-drain-suspect")
ACTING = ("on", "on-drain-suspect")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if abs(seconds) < 120:
        return f"{seconds:.0f} s"
    if abs(seconds) < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _spread(stat: dict[str, Any]) -> str:
    if not stat or not stat.get("n"):
        return "-"
    if stat["n"] == 1:
        return duration(stat["median"])
    return f"{duration(stat['median'])} ({duration(stat['min'])}-{duration(stat['max'])})"


def _pct(ratio: float | None) -> str:
    return "-" if ratio is None else f"{100 * ratio:.0f} %"


def judgement_table(run: dict[str, Any]) -> list[str]:
    lines = [
        "| fault kind | what happens | faults | caught | predicted (recall) | precision "
        "(false positives) | lead time before the failure, median (range) | detection delay "
        "after onset | caught first by |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for kind in KINDS:
        k = run["kinds"][kind.name]
        if k.get("negative"):
            lines.append(
                f"| {kind.name} (must not be flagged) | {kind.words} | {k['faults']} | "
                f"flagged {k['flagged']} | - | - | - | - | - |"
            )
            continue
        lines.append(
            f"| {kind.name} | {kind.words} | {k['faults']} | {k['caught']} | "
            f"{k['predicted']} ({_pct(k['recall'])}) | {_pct(k['precision'])} "
            f"({k['false_positives']}) | {_spread(k['lead_s'])} | {_spread(k['delay_s'])} | "
            f"{_firsts(k['caught_first_by'])} |"
        )
    return lines


def _firsts(counts: dict[str, int]) -> str:
    return ", ".join(f"{signal} x{n}" for signal, n in counts.items()) or "-"


def healing_table(runs: dict[str, dict[str, Any]]) -> list[str]:
    present = [m for m in MODES if m in runs]
    lines = [f"| | {' | '.join(f'healing {m}' for m in present)} |",
             f"| --- |{' ---: |' * len(present)}"]  # fmt: skip

    def row(label: str, cell: Any) -> None:
        lines.append(f"| {label} | {' | '.join(str(cell(runs[m])) for m in present)} |")

    row("GPU-minutes at or above the slowdown temperature (fleet)",
        lambda r: r["fleet"]["slowdown_gpu_min"])  # fmt: skip
    row("  of which on the cooling-failure GPUs",
        lambda r: r["kinds"]["cooling_failure"]["slowdown_gpu_min"])  # fmt: skip
    row("workloads lost (jobs running on a GPU when it failed)",
        lambda r: r["fleet"]["jobs_lost"])  # fmt: skip
    row("jobs started", lambda r: r["fleet"]["jobs_started"])
    for name in ("cooling_failure", "leak_fast", "leak_slow", "leak_busy"):
        row(f"{name}: faults that reached their failure", lambda r, n=name: _failed_of(r, n))
    row("time from fault onset to drain, median (range)", _drain_cell)
    row("must-not-flag loads whose process self-healing killed", _wrongly_killed)
    row("replay wall time (s), per GPU-tick (us)",
        lambda r: f"{r['fleet']['wall_s']:.0f}, {r['fleet']['us_per_gpu_tick']}")  # fmt: skip
    return lines


def _wrongly_killed(run: dict[str, Any]) -> int:
    return sum(run["kinds"][k.name]["killed_by_healing"] for k in KINDS if k.negative)


def _failed_of(run: dict[str, Any], name: str) -> str:
    kind = run["kinds"][name]
    return f"{kind['failed']} of {kind['faults']}"


def _drain_cell(run: dict[str, Any]) -> str:
    values = [row["to_drain_s"] if run["mode"] in ACTING else row["to_would_drain_s"]
              for kind in KINDS if not kind.negative
              for row in run["kinds"][kind.name]["faults_seen"]]  # fmt: skip
    values = sorted(v for v in values if v is not None)
    if not values:
        return "-"
    median = values[len(values) // 2]
    words = "" if run["mode"] in ACTING else " (would)"
    return (
        f"{duration(median)} ({duration(values[0])}-{duration(values[-1])}), n={len(values)}{words}"
    )


def per_kind_healing(runs: dict[str, dict[str, Any]]) -> list[str]:
    present = [m for m in MODES if m in runs]
    draining = [m for m in present if m != "off"]
    heads = [f"lost ({m})" for m in present]
    heads += [f"to drain ({m}{', would' if m == 'dry-run' else ''})" for m in draining]
    lines = [f"| fault kind | {' | '.join(heads)} |", f"| --- |{' ---: |' * len(heads)}"]
    for kind in KINDS:
        if kind.negative:
            continue
        cells = [str(runs[m]["kinds"][kind.name]["jobs_lost"]) for m in present]
        for mode in draining:
            key = "to_would_drain_s" if mode == "dry-run" else "to_drain_s"
            cells.append(_spread(runs[mode]["kinds"][kind.name][key]))
        lines.append(f"| {kind.name} | {' | '.join(cells)} |")
    return lines


def actions_lines(runs: dict[str, dict[str, Any]]) -> list[str]:
    lines = []
    for mode in MODES:
        if mode in runs and mode != "off":
            reports = runs[mode]["fleet"]["healing_reports"]
            said = "; ".join(f"{k} x{v}" for k, v in reports.items()) or "none"
            lines.append(f"- healing {mode}: {said}")
    return lines


def markdown(result: dict[str, Any]) -> str:
    c, runs = result["config"], result["runs"]
    first = runs[next(m for m in MODES if m in runs)]
    machine = result["machine"]
    lines = [
        "# Fault replay: a simulated week of faults through the daemon's judgement and healing",
        "",
        f"{result['when']}; `{' '.join(['bench/fault_replay.py', *result['argv']])}`; "
        f"{machine['nproc']} x {machine['cpu_model']}; commit {str(result['code']['commit'])[:7]}"
        f"{' (modified)' if result['code']['changed'] else ''}; {result['wall_s']:.0f} s wall "
        f"for {len(runs)} runs.",
        "",
        f"{c['nodes']} simulated nodes x {c['gpus']} GPUs, {c['seconds'] / 86400:g} simulated "
        f"days, {c['faults']} scripted faults ({c['per_kind']} of each kind, seed {c['seed']}) on "
        f"GPUs of their own; the other {c['nodes'] * c['gpus'] - c['faults']} GPUs are healthy. "
        f"Tick: {c['fine_ticks']} while a node plays a fault (from 10 min before its onset), "
        f"{c['coarse_s']:g} s otherwise; every GPU is judged at every tick of its node "
        f"({first['fleet']['gpu_ticks']:,} GPU-ticks a run). Judged by the daemon's "
        f"HealthAssessor, AlertEngine (default rules) and Healer ({', '.join(c['modes'])}).",
        "",
        "## Detection (healing off)",
        "",
        *judgement_table(first),
        "",
        "## Healing",
        "",
        *healing_table(runs),
        "",
        *per_kind_healing(runs),
        "",
        "Healing reports (action: outcome xcount):",
        "",
        *actions_lines(runs),
        "",
    ]
    if result.get("todo"):
        lines += [f"TODO: {result['todo']}", ""]
    lines += ["Definitions:", "", *[f"- {d}" for d in result["definitions"]], ""]
    others = first["other_raises"]
    if others:
        said = ", ".join(f"{k} x{v}" for k, v in others.items())
        lines += [f"Other signals raised (healing off; no kind counts them): {said}.", ""]
    return "\n".join(lines)
