"""Scoring a run: per fault kind, detection, lead time, precision and recall, and healing's effect.

Definitions (the report repeats them):

- onset: when the fault's first observable precursor is injected (the fan failing,
  the first correctable error of a storm, the first stuttering reading, the first
  remapped row, the leak starting); for a fault with none (a sudden Xid 79) the
  failure itself.
- failure: what the precursor foretells: the slowdown temperature reached, the
  uncorrectable ECC error, the failed remap, the bus drop, the link down, the GPU's
  memory full. Scripted, or measured in the readings.
- caught: the first of the kind's signals (an alert rule or a health reason, see
  fault_replay_plan.KINDS) raised on the fault's GPU from the onset until the
  fault has played out (for a load that must not be flagged: flagged).
- predicted: caught at or before the failure. Recall = predicted / faults (for a
  kind whose failure may not come, such as a leak killed first, a fault caught
  before it ends counts).
- lead time = failure - caught (how long before the failure someone was told);
  detection delay = caught - onset.
- a false positive: an episode (raises within an hour of each other) of a kind's
  signals on a GPU that has no fault at that time (a healthy GPU, one whose fault
  has not begun, or one playing a load that must not be flagged); a signal on a
  GPU after its fault's onset is part of that fault's story, whichever kind it
  belongs to (a PCIe link's bus drop raises the sudden drop's alerts too).
  Precision = predicted / (predicted + false positives). The leak kinds share one
  signal (alert:memory_leak), so they share their false positives.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from fault_replay_plan import BY_NAME, KINDS, FaultKind
from fault_replay_run import FaultSeen, RunLog

EPISODE_S = 3600.0  # raises of one signal family on one GPU this close are one episode
EXPLAINS_BEFORE_S = 60.0  # a raise this long before a fault's onset is still its


def score(log: RunLog) -> dict[str, Any]:
    explained = _explained(log)
    kinds = {kind.name: _kind(kind, log, explained) for kind in KINDS}
    return {
        "mode": log.mode,
        "kinds": kinds,
        "fleet": _fleet(log),
        "other_raises": _other_raises(log),
    }


def _explained(log: RunLog) -> set[int]:
    """Positions in log.raises on a GPU playing a fault (not one that must not be flagged)."""
    onsets: dict[tuple[int, int], float] = {}
    for seen in log.faults:
        if not seen.fault.kind.negative:
            key = (seen.fault.node, seen.fault.gpu)
            onsets[key] = min(onsets.get(key, float("inf")), seen.fault.script.onset_s)
    return {
        i for i, (t, node, gpu, _signal) in enumerate(log.raises)
        if t >= onsets.get((node, gpu), float("inf")) - EXPLAINS_BEFORE_S
    }  # fmt: skip


def _caught(seen: FaultSeen, log: RunLog) -> tuple[float, str] | None:
    """The first of the kind's signals on the fault's GPU while the fault plays, and when."""
    fault = seen.fault
    start, until = fault.script.onset_s - EXPLAINS_BEFORE_S, fault.script.fine_until_s
    found = [(t, signal) for t, node, gpu, signal in log.raises
             if (node, gpu) == (fault.node, fault.gpu) and signal in fault.kind.signals
             and start <= t <= until]  # fmt: skip
    return min(found) if found else None


def _kind(kind: FaultKind, log: RunLog, explained: set[int]) -> dict[str, Any]:
    seens = [s for s in log.faults if s.fault.kind is kind]
    rows = [_fault_row(s, log) for s in seens]
    if kind.negative:
        flagged = [r for r in rows if r["caught_s"] is not None]
        rate = _ratio(len(flagged), len(rows))
        killed = sum(_killed(s, log) for s in seens)
        return {"faults": len(rows), "negative": True, "flagged": len(flagged),
                "false_positive_rate": rate, "killed_by_healing": killed,
                "faults_seen": rows}  # fmt: skip
    predicted = [r for r in rows if r["predicted"]]
    false_positives = _false_positives(kind, log, explained)
    leads = [r["lead_s"] for r in rows if r["lead_s"] is not None]
    delays = [r["delay_s"] for r in rows if r["delay_s"] is not None]
    drains = [r["to_drain_s"] for r in rows if r["to_drain_s"] is not None]
    would = [r["to_would_drain_s"] for r in rows if r["to_would_drain_s"] is not None]
    first_by: dict[str, int] = defaultdict(int)
    for row in rows:
        if row["caught_by"]:
            first_by[row["caught_by"]] += 1
    return {
        "faults": len(rows),
        "caught_first_by": dict(sorted(first_by.items())),
        "failed": sum(r["failure_s"] is not None for r in rows),
        "caught": sum(r["caught_s"] is not None for r in rows),
        "predicted": len(predicted),
        "recall": _ratio(len(predicted), len(rows)),
        "false_positives": false_positives,
        "precision": _ratio(len(predicted), len(predicted) + false_positives),
        "lead_s": _spread(leads),
        "delay_s": _spread(delays),
        "to_drain_s": _spread(drains),
        "to_would_drain_s": _spread(would),
        "jobs_lost": sum(r["jobs_lost"] for r in rows),
        "slowdown_gpu_min": round(sum(r["slowdown_s"] for r in rows) / 60, 1),
        "faults_seen": rows,
    }


def _fault_row(seen: FaultSeen, log: RunLog) -> dict[str, Any]:
    script = seen.fault.script
    failure = seen.failure_s  # as it happened in this run (a healed one may never fail)
    first = _caught(seen, log)
    caught, by = (None, None) if first is None else first
    predicted = caught is not None and (failure is None or caught <= failure)
    return {
        "fault": seen.fault.label,
        "onset_s": script.onset_s,
        "failure_s": failure,
        "caught_s": caught,
        "caught_by": by,
        "predicted": predicted,
        "lead_s": None if failure is None or not predicted else round(failure - caught, 1),  # type: ignore[operator]
        "delay_s": None if caught is None else round(caught - script.onset_s, 1),
        "to_drain_s": _since(seen.drained_s, script.onset_s),
        "to_would_drain_s": _since(seen.would_drain_s, script.onset_s),
        "jobs_lost": seen.jobs_lost,
        "slowdown_s": seen.slowdown_s,
    }


def _killed(seen: FaultSeen, log: RunLog) -> bool:
    """Whether self-healing killed a process on the fault's GPU while it played."""
    fault = seen.fault
    until = fault.script.ends_s or fault.script.fine_until_s
    return any(
        action == "kill_leak" and outcome == "done" and (node, gpu) == (fault.node, fault.gpu)
        and fault.script.onset_s <= t <= until
        for t, node, action, gpu, outcome in log.reports
    )  # fmt: skip


def _false_positives(kind: FaultKind, log: RunLog, explained: set[int]) -> int:
    """Episodes of the kind's signals on GPUs with no fault to account for them."""
    last: dict[tuple[int, int], float] = {}
    episodes = 0
    for i, (t, node, gpu, signal) in enumerate(log.raises):
        if signal not in kind.signals or i in explained:
            continue
        before = last.get((node, gpu))
        if before is None or t - before > EPISODE_S:
            episodes += 1
        last[(node, gpu)] = t
    return episodes


def _fleet(log: RunLog) -> dict[str, Any]:
    actions: dict[str, int] = defaultdict(int)
    for _t, _node, action, _gpu, outcome in log.reports:
        actions[f"{action}: {outcome.split(':')[0]}"] += 1
    return {
        "slowdown_gpu_min": round(log.slowdown_s / 60, 1),
        "jobs_started": log.jobs_started,
        "jobs_lost": log.jobs_lost,
        "healing_reports": dict(sorted(actions.items())),
        "healing_log": [
            {"at_s": t, "node": node, "action": action, "gpu": gpu, "outcome": outcome}
            for t, node, action, gpu, outcome in log.reports
        ],
        "gpu_ticks": log.gpu_ticks,
        "wall_s": round(log.wall_s, 1),
        "us_per_gpu_tick": round(1e6 * log.wall_s / log.gpu_ticks, 1) if log.gpu_ticks else None,
    }


def _other_raises(log: RunLog) -> dict[str, int]:
    """Raises of signals no kind counts (throttling, idle GPUs...), for the record."""
    counted = {s for kind in KINDS for s in kind.signals}
    others: dict[str, int] = defaultdict(int)
    for _t, _node, _gpu, signal in log.raises:
        if signal not in counted:
            others[signal] += 1
    return dict(sorted(others.items()))


def _since(at: float | None, onset: float) -> float | None:
    return None if at is None else round(at - onset, 1)


def _ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 3) if whole else None


def _spread(values: Iterable[float]) -> dict[str, float | int | None]:
    values = sorted(values)
    if not values:
        return {"n": 0, "median": None, "min": None, "max": None}
    return {"n": len(values), "median": round(statistics.median(values), 1),
            "min": round(values[0], 1), "max": round(values[-1], 1)}  # fmt: skip


def kind_words(name: str) -> str:
    return BY_NAME[name].words
