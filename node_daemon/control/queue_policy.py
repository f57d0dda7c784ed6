"""The queue's order and who gets which GPUs: fair, so a large workload is never starved.

Each tick the auto-placed queued workloads are taken in order: priority
(higher first), then the time they were queued. A workload that fits starts on
the coolest GPUs that take it. The first one that does not fit becomes the head
of the queue: every free GPU it could use is held for it, so GPUs come to it as
they free, and workloads behind it get only GPUs the head could not use. One
behind it may also use held GPUs when it is sure to be done first: its time
limit ends before the earliest time the head could start, which the running
workloads' own time limits tell (EASY backfill, as Slurm's backfill scheduler
does). A head that could never run here (too few GPUs could ever take it:
reserved for others, too small, drained) holds nothing and blocks nobody.

Pure: no clock, no journal, no processes. The workload manager feeds it the
node's GPUs (node_daemon.control.placement.GpuFacts) and carries out the plan.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from node_daemon.control.placement import GpuFacts, coolest_first, refusal, standing_refusal


@dataclass(frozen=True)
class Waiting:
    """A queued workload placement may start."""

    id: str
    owner: str
    teams: tuple[str, ...]
    gpu_count: int
    min_free_bytes: int
    priority: int
    queued_unix_ms: int
    time_limit_s: int  # 0: none, so never backfilled onto held GPUs


@dataclass(frozen=True)
class QueuePlan:
    """What to start now, what to hold for the head, and why each other one waits."""

    starts: list[tuple[str, list[int]]] = field(default_factory=list)
    held: dict[str, tuple[int, ...]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)


def queue_order(waiting: Sequence[Waiting]) -> list[Waiting]:
    """Priority first (higher runs first), then first queued, then the lower id."""
    return sorted(waiting, key=lambda w: (-w.priority, w.queued_unix_ms, _id_number(w.id)))


def _id_number(workload_id: str) -> int:
    tail = workload_id.rpartition("-")[2]
    return int(tail) if tail.isdigit() else 0


@dataclass
class _Head:
    workload: Waiting
    holds: list[int]
    starts_by_ms: int | None  # the earliest it could start; None: not known


def plan_queue(
    waiting: Sequence[Waiting],
    gpus: Mapping[int, GpuFacts],
    frees_by_ms: Mapping[int, int | None],
    now_ms: int,
) -> QueuePlan:
    """One round of placement.

    `frees_by_ms`: for each GPU a queued workload runs on, when its time limit
    stops it (None: no limit, so not known).
    """
    plan = QueuePlan()
    taken: set[int] = set()
    head: _Head | None = None
    for w in queue_order(waiting):
        free = [
            g for i, g in gpus.items()
            if i not in taken and refusal(g, w.owner, w.min_free_bytes, w.teams) is None
        ]  # fmt: skip
        usable = [g for g in free if head is None or g.reading.index not in head.holds]
        if len(usable) >= w.gpu_count:
            chosen = [g.reading.index for g in coolest_first(usable)[: w.gpu_count]]
        elif head is not None and _backfills(w, head, now_ms) and len(free) >= w.gpu_count:
            # Done before the head could start: it may borrow what is held for the head.
            chosen = [g.reading.index for g in coolest_first(free)[: w.gpu_count]]
        else:
            chosen = []
        if chosen:
            plan.starts.append((w.id, chosen))
            taken.update(chosen)
            if head is not None:  # a backfill borrowed them: they are no longer held
                head.holds = [i for i in head.holds if i not in chosen]
                plan.held[head.workload.id] = tuple(sorted(head.holds))
            continue
        if head is None:
            head = _make_head(w, gpus, [g.reading.index for g in free], frees_by_ms)
            if head is None:
                plan.reasons[w.id] = _cannot_run_here(w, gpus)
                continue
            plan.held[w.id] = tuple(sorted(head.holds))
        else:
            plan.reasons[w.id] = _behind_reason(w, head.workload)
    if head is not None:  # said last: a backfill may have borrowed some of its holds
        plan.reasons[head.workload.id] = _head_reason(head.workload, head)
    return plan


def _make_head(
    w: Waiting, gpus: Mapping[int, GpuFacts], free: list[int], frees_by_ms: Mapping[int, int | None]
) -> _Head | None:
    """The head's holds and earliest start; None when it could never run here now."""
    could = [
        i
        for i, g in gpus.items()
        if standing_refusal(g, w.owner, w.min_free_bytes, w.teams) is None
    ]
    if len(could) < w.gpu_count:
        return None
    holds = free[: w.gpu_count]
    missing = w.gpu_count - len(holds)
    # The GPUs that will free on their own, soonest first; others (outside processes,
    # workloads without a limit) free at a time nobody knows.
    ends = sorted(end for i in could if i not in holds and (end := frees_by_ms.get(i)) is not None)
    starts_by = ends[missing - 1] if 0 < missing <= len(ends) else None
    return _Head(w, holds, starts_by)


def _backfills(w: Waiting, head: _Head, now_ms: int) -> bool:
    return (
        w.time_limit_s > 0
        and head.starts_by_ms is not None
        and now_ms + w.time_limit_s * 1000 <= head.starts_by_ms
    )


def _gpu_list(indices: Sequence[int]) -> str:
    return ", ".join(str(i) for i in sorted(indices))


def _head_reason(w: Waiting, head: _Head) -> str:
    missing = w.gpu_count - len(head.holds)
    held = f"GPU {_gpu_list(head.holds)} held for it, " if head.holds else ""
    when = (
        f" (the next frees by {_clock_words(head.starts_by_ms)}, a time limit)"
        if head.starts_by_ms is not None
        else " (when is not known: what runs there has no time limit)"
    )
    return f"next in line: {held}waiting for {missing} more GPU{'s' if missing > 1 else ''}{when}"


def _behind_reason(w: Waiting, head: Waiting) -> str:
    if head.priority > w.priority:
        why = f"priority {head.priority} over {w.priority}"
    else:
        why = "queued earlier" if head.priority == w.priority else "its turn came first"
    return f"behind {head.id} ({why}), which holds the GPUs it could use"


def _cannot_run_here(w: Waiting, gpus: Mapping[int, GpuFacts]) -> str:
    reasons = [
        why for g in gpus.values()
        if (why := standing_refusal(g, w.owner, w.min_free_bytes, w.teams)) is not None
    ]  # fmt: skip
    able = len(gpus) - len(reasons)
    shown = "; ".join(reasons[:3]) + ("; …" if len(reasons) > 3 else "")
    return f"cannot run here now: needs {w.gpu_count} GPUs, {able} could take it ({shown})"


def _clock_words(unix_ms: int) -> str:
    return time.strftime("%H:%M", time.localtime(unix_ms / 1000))
