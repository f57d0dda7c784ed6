"""GetStateAt's plain part: the node as it was at a moment (docs/daemon.md, "State at a
moment").

Readings come from the metric history (node_daemon.history.moment); everything else
from the event journal, whose events each carry their subject's whole state after them
(node_daemon.journal.subjects says which event counts at a moment, and why the later
record wins after a clock step). The work is bounded: a few points of one tier near the
moment, one index lookup per alert, reservation or workload that may have been live
then, and two per GPU; never a scan of the journal.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.gpu_metrics import BY_FIELD
from node_daemon.errors import Invalid
from node_daemon.history.moment import ReadingsAt, readings_at
from node_daemon.history.query import tier_messages
from node_daemon.history.store import HistoryStore
from node_daemon.journal.event_journal import EventJournal
from node_daemon.journal.subjects import (
    alert_subject,
    bus_subject,
    condition_subject,
    record_subject,
)

# A moment this far after the node's clock is still "now" (another machine's clock, a
# call in flight); beyond it, the moment is to come.
FUTURE_SLACK_MS = 10_000
HISTORY_OFF = "history is off on this node ([history] enabled = false): no readings"
_LIVE_WORKLOADS = (pb.WORKLOAD_STATE_QUEUED, pb.WORKLOAD_STATE_RUNNING)


class BadMoment(Invalid):
    """Not a moment at all (INVALID_ARGUMENT)."""


class MomentToCome(Exception):
    """A moment after the node's clock (OUT_OF_RANGE: it may be asked for later)."""


@dataclass(frozen=True)
class Sources:
    """What the answer is read from: the history (None where it is off) and the journal."""

    store: HistoryStore | None
    journal: EventJournal
    node_gpus: Collection[int]


def check_moment(at_ms: int, now_ms: int) -> None:
    if at_ms <= 0:
        raise BadMoment(
            f"at_unix_ms must be a Unix time in ms after 1970, got {at_ms}: "
            "e.g. 1767225600000 for 2026-01-01T00:00Z"
        )
    if at_ms > now_ms + FUTURE_SLACK_MS:
        ahead_s = (at_ms - now_ms) / 1000
        raise MomentToCome(
            f"at_unix_ms {at_ms} is {ahead_s:,.0f} s after this node's clock ({now_ms}): "
            "its state then is not known yet; ask for now or earlier"
        )


def state_at(sources: Sources, at_ms: int, now_ms: int | None = None) -> pb.NodeStateAt:
    """The node at `at_ms`.

    Raises:
        BadMoment, MomentToCome: as check_moment.
        HistoryDataLoss, HistoryStoreError: as readings_at.
    """
    now = int(time.time() * 1000) if now_ms is None else now_ms
    check_moment(at_ms, now)
    answer = pb.NodeStateAt(at_unix_ms=at_ms, node_now_unix_ms=now)
    readings = _readings(sources.store, at_ms, answer)
    gpus = sorted({*sources.node_gpus, *readings.layout_gpus, *readings.gpus})
    journal = sources.journal
    per_gpu = [s for g in gpus for s in (condition_subject(g), bus_subject(g))]
    alert_ids = journal.alert_ids_since(at_ms)
    records = [record_subject(kind, record_id) for kind in ("reservation", "workload")
               for record_id in journal.record_ids_since(kind, at_ms)]  # fmt: skip
    wanted = [*per_gpu, *(alert_subject(a) for a in alert_ids), *records]
    counting = journal.events_counting_at(wanted, at_ms)
    for gpu in gpus:
        answer.gpus.append(_gpu_state(gpu, readings, counting))
    answer.alerts.extend(_alerts_firing(alert_ids, counting, at_ms))
    for subject in records:
        event = counting.get(subject)
        if event is None:
            continue
        if event.HasField("reservation") and _in_force(event.reservation, at_ms):
            answer.reservations.append(event.reservation)
        elif event.HasField("workload") and event.workload.state in _LIVE_WORKLOADS:
            answer.workloads.append(event.workload)
    return answer


def _readings(store: HistoryStore | None, at_ms: int, answer: pb.NodeStateAt) -> ReadingsAt:
    if store is None:
        answer.note = HISTORY_OFF
        return ReadingsAt(None, {})
    readings = readings_at(store, at_ms)
    answer.tiers.extend(tier_messages(store.tiers, readings.oldest))
    notes = []
    if readings.tier is None:
        notes.append(_not_reached(readings, at_ms))
    else:
        answer.tier, answer.step_ms = readings.tier.name, readings.tier.step_ms
        answer.history_reaches = True
    if readings.corrupt:
        notes.append(
            f"{readings.corrupt} damaged history rows near this moment skipped ({readings.reason})"
        )
    answer.note = "; ".join(notes)
    return readings


def _not_reached(readings: ReadingsAt, at_ms: int) -> str:
    stored = [o for o in readings.oldest.values() if o is not None]
    if not stored:
        return "the metric history holds nothing yet: no readings"
    first = min(stored)
    return (
        f"the metric history reaches back to {first} ms, after this moment ({at_ms} ms): "
        "its readings are gone (older than retention) or were never taken"
    )


def _gpu_state(gpu: int, readings: ReadingsAt, counting: dict[str, pb.Event]) -> pb.GpuStateAt:
    state = pb.GpuStateAt(index=gpu)
    state.sample.index = gpu
    point = readings.gpus.get(gpu)
    if point is not None:
        state.sample_unix_ms = point.timestamp_ms
        state.sample.MergeFrom(pb.GpuSample(**_fields(point.means)))
        state.sample.health = pb.GPU_HEALTH_OK
        if readings.tier is not None and readings.tier.id:  # a downsampled tier: its peaks
            state.peak.CopyFrom(pb.GpuSample(index=gpu, **_fields(point.maxes)))
    bus = counting.get(bus_subject(gpu))
    if bus is not None and bus.kind == pb.EVENT_KIND_GPU_LOST:
        state.sample.health = pb.GPU_HEALTH_LOST
    condition = counting.get(condition_subject(gpu))
    if condition is not None:
        state.sample.condition.CopyFrom(condition.condition)
    elif point is not None:  # sampled, so judged: every change is journalled, none was yet
        state.sample.condition.gpu_index = gpu
        state.sample.condition.state = pb.GPU_HEALTH_STATE_HEALTHY
    return state


def _fields(values: Mapping[str, float]) -> dict[str, Any]:
    """Catalogue values as GpuSample keywords, each of its field's kind (float32 on disk:
    whole-number fields rounded)."""
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        metric = BY_FIELD.get(name)
        if metric is None:  # a field a newer catalogue wrote and this one lacks
            continue
        kwargs[name] = max(0, round(value)) if metric.kind is int else float(value)
    return kwargs


def _alerts_firing(
    alert_ids: list[str], counting: dict[str, pb.Event], at_ms: int
) -> list[pb.Alert]:
    firing = []
    for alert_id in alert_ids:
        event = counting.get(alert_subject(alert_id))
        if event is None or event.alert.state != pb.ALERT_STATE_FIRING:
            continue
        alert = pb.Alert()
        alert.CopyFrom(event.alert)
        if alert.HasField("silenced_until_unix_ms") and alert.silenced_until_unix_ms <= at_ms:
            # Its silence had ended by then; the event that says so may come a tick later.
            for name in ("silenced_until_unix_ms", "silenced_by", "silence_reason", "silence_id"):
                alert.ClearField(name)
        firing.append(alert)
    firing.sort(key=lambda a: (-a.severity, a.started_unix_ms, a.id))
    return firing


def _in_force(reservation: pb.Reservation, at_ms: int) -> bool:
    ended = reservation.HasField("ended_unix_ms") and reservation.ended_unix_ms <= at_ms
    return reservation.active and not ended and reservation.until_unix_ms > at_ms
