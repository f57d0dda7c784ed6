"""gpufleet.v1 messages → fleet updates and records. Runs on the network thread.

The only console module that reads protobuf messages (console.fleet imports
none: an import-linter contract); plain wire values (enum words, times) are
the shared client's decoder's (gpufleet.client.words). Each sample batch is
read once, here: one pass over each GpuSample gives its ring row (the
catalogue's shown metrics, scaled) and its snapshot (health, error, processes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import partial
from typing import Any, Literal

import numpy as np
from google.protobuf.message import Message

from console.connections.decode_health import (
    Memo,
    decode_condition,
    decode_healing,
    decode_signals,
)
from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.audit import METHOD_PREFIX, AuditRow
from console.fleet.columns import COLUMN_COUNT, FIELD_SCALES
from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.health import MigInstanceRow
from console.fleet.health_words import event_sentence
from console.fleet.history_range import TierReach
from console.fleet.identity import Identity
from console.fleet.process_row import ProcessRow
from console.fleet.silences import SilenceListing, SilenceMatcher, SilenceRow
from console.fleet.updates import (
    AlertLine,
    AlertsUpdate,
    ControlUpdate,
    EventUpdate,
    GpuInfo,
    GpuSnapshot,
    IdentityUpdate,
    InventoryUpdate,
    KillReport,
    NodeInfo,
    Payload,
    SamplesUpdate,
    WorkloadOutputText,
)
from console.fleet.usage import NodeKpis, NodeUsage, UsageRow
from gpufleet.client.words import (
    event_kind_word,
    kill_outcome_word,
    known_word,
    optional,
    seconds,
)
from gpufleet.policy import Role
from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity


def optionals(message: Message, *fields: str) -> dict[str, Any]:
    """proto3 `optional` fields by name, each its value or None where unset: for a record
    whose fields are named as the message's."""
    return {field: optional(message, field) for field in fields}


def _process(p: pb.GpuProcess) -> ProcessRow:
    return ProcessRow(
        pid=p.pid,
        **optionals(p, "user", "command", "gpu_memory_bytes", "start_time_unix_ms",
                    "container_id", "slurm_job_id", "sm_util_pct", "cpu_pct",
                    "host_memory_bytes"),
    )  # fmt: skip


_idle = Memo()  # idle GPUs' snapshots, by what they say


def decode_batch(target: str, batch: pb.SampleBatch, gpu_count: int) -> SamplesUpdate:
    """A tick: (gpu_count, COLUMN_COUNT) ring rows, NaN where not reported, and snapshots."""
    rows = np.full((gpu_count, COLUMN_COUNT), math.nan, dtype=np.float32)
    snapshots = []
    for s in batch.gpus:
        index = s.index
        if index < gpu_count:
            sample: Message = s  # HasField by a name the catalogue gives
            rows[index] = [getattr(s, f) * scale if sample.HasField(f) else math.nan
                           for f, scale in FIELD_SCALES]  # fmt: skip
        health = known_word(pb.GpuHealth, s.health)
        condition = decode_condition(s.condition) if s.HasField("condition") else None
        signals = decode_signals(s)
        if not s.processes and not s.mig_instances:
            # An idle GPU's snapshot is the same record tick after tick: shared, not made
            # anew (each new one is walked by the collector: 10,000 a second at 10,000 GPUs).
            error = s.error
            snapshots.append(_idle.get(
                (index, health, error, condition, signals),
                partial(GpuSnapshot, index, health, error, (), condition, signals),
            ))  # fmt: skip
            continue
        processes = tuple(_process(p) for p in s.processes)
        snapshots.append(
            GpuSnapshot(index, health, s.error, processes, condition, signals,
                        tuple(_mig_instance(m) for m in s.mig_instances))
        )  # fmt: skip
    return SamplesUpdate(
        target, seconds(batch.timestamp_unix_ms), rows, tuple(snapshots), batch.replayed
    )


def _mig_instance(m: pb.MigInstance) -> MigInstanceRow:
    return MigInstanceRow(
        gpu_instance_id=m.gpu_instance_id, compute_instance_id=m.compute_instance_id,
        profile=m.profile, uuid=m.uuid,
        **optionals(m, "mem_used_bytes", "mem_total_bytes"),
        processes=tuple(_process(p) for p in m.processes),
    )  # fmt: skip


def _gpu_info(g: pb.GpuInfo) -> GpuInfo:
    return GpuInfo(
        index=g.index,
        uuid=g.uuid,
        name=g.name,
        mig_enabled=g.mig_enabled,
        **optionals(g, "serial", "pci_bus_id", "memory_total_bytes", "power_limit_w",
                    "vbios_version", "power_limit_default_w"),
    )  # fmt: skip


def decode_inventory(target: str, inventory: pb.Inventory) -> InventoryUpdate:
    info = NodeInfo(
        hostname=inventory.hostname,
        **optionals(inventory, "driver_version", "cuda_version", "slurm_state", "slurm_reason"),
        daemon_version=inventory.daemon_version,
        backend=known_word(pb.Backend, inventory.backend),
        backend_ok=inventory.backend_state == pb.BACKEND_STATE_OK,
        backend_detail=inventory.backend_detail,
        sample_interval_s=(inventory.sample_interval_ms or 1000) / 1000.0,
        gpus=tuple(_gpu_info(g) for g in inventory.gpus),
        alert_thresholds=tuple(_alert_line(t) for t in inventory.alert_thresholds),
        history_tiers=decode_tiers(inventory.history_tiers, INVENTORY_TIER_ROUNDING_S),
    )
    return InventoryUpdate(target, info)


def _alert_line(threshold: pb.AlertThreshold) -> AlertLine:
    severity = Severity(threshold.severity) if threshold.severity in set(Severity) else None
    return AlertLine(
        threshold.metric, threshold.rule, severity or Severity.WARNING, threshold.value
    )


def decode_tiers(tiers: Iterable[pb.HistoryTier], round_to_s: int = 1) -> tuple[TierReach, ...]:
    """HistoryTier messages as the model's, each oldest point rounded down to `round_to_s`."""
    return tuple(_tier(t, round_to_s) for t in tiers)


# The inventory's tiers: their oldest points move with every tick; to 10 minutes, a
# node's 30 s inventory poll leaves NodeInfo unchanged (views compare it by identity).
# Choosing a source by them is off by at most that; an answer's own tiers are exact.
INVENTORY_TIER_ROUNDING_S = 600


def _tier(tier: pb.HistoryTier, round_to_s: int) -> TierReach:
    oldest = None
    if tier.HasField("oldest_unix_ms"):
        oldest = float(tier.oldest_unix_ms // (round_to_s * 1000) * round_to_s)
    return TierReach(tier.name, tier.step_ms / 1000.0, float(tier.retention_s), oldest)


def decode_caller(target: str, caller: pb.Caller) -> IdentityUpdate:
    """WhoAmI's answer: who, how signed in, until when, and the node's kill policy.

    A role the console does not know reads as the least (viewer).
    """
    role = Role(caller.role) if caller.role in {r.value for r in Role} else Role.VIEWER
    expires = optional(caller, "credential_expires_unix_ms")
    identity = Identity(
        caller.user,
        role,
        tuple(caller.teams),
        caller.authenticated_by,
        expires_unix_ms=expires,
        allow_kill_job_processes=caller.allow_kill_job_processes,
        token_issuer=caller.token_issuer,
        token_id=caller.token_id,
    )
    return IdentityUpdate(target, identity)


def decode_alert(target: str, a: pb.Alert) -> AlertRow:
    opt = partial(optional, a)

    return AlertRow(
        target=target, id=a.id, key=a.key, rule=a.rule, severity=Severity(max(1, a.severity)),
        firing=a.state == pb.ALERT_STATE_FIRING, gpu_index=opt("gpu_index"), gpu_uuid=a.gpu_uuid,
        pid=opt("pid"), value=opt("value"), unit=a.unit, summary=a.summary,
        started_unix_ms=a.started_unix_ms, updated_unix_ms=a.updated_unix_ms,
        cleared_unix_ms=opt("cleared_unix_ms"), occurrences=a.occurrences,
        acknowledged_by=a.acknowledged_by, acknowledged_unix_ms=opt("acknowledged_unix_ms"),
        silenced_until_unix_ms=opt("silenced_until_unix_ms"), silenced_by=a.silenced_by,
        silence_reason=a.silence_reason, peak_value=opt("peak_value"), silence_id=a.silence_id,
    )  # fmt: skip


def decode_alerts(target: str, reply: pb.ListAlertsResponse) -> AlertsUpdate:
    alerts = tuple(decode_alert(target, a) for a in reply.alerts)
    return AlertsUpdate(target, alerts, reply.journal_id, reply.last_seq)


def decode_event(target: str, e: pb.Event) -> EventUpdate:
    kind = event_kind_word(e.kind)
    condition = decode_condition(e.condition) if e.HasField("condition") else None
    healing = decode_healing(e.healing) if e.HasField("healing") else None
    # Health, drain and healing events read as sentences built from their records
    # (a health change: the daemon's, with what to do); other kinds: the daemon's summary.
    summary = event_sentence(kind, condition, healing, e.actor, e.summary) or e.summary
    row = EventRow(
        target=target, seq=e.seq, time_unix_ms=e.time_unix_ms, kind=kind,
        gpu_index=optional(e, "gpu_index"), summary=summary,
        actor=e.actor, alert=decode_alert(target, e.alert) if e.HasField("alert") else None,
        replayed=e.replayed,
        reservation=(decode_reservation(target, e.reservation)
                     if e.HasField("reservation") else None),
        workload=decode_workload(target, e.workload) if e.HasField("workload") else None,
        silence=decode_silence(target, e.silence) if e.HasField("silence") else None,
        condition=condition, healing=healing,
    )  # fmt: skip
    return EventUpdate(target, row, e.journal_id)


def decode_silence(target: str, s: pb.Silence) -> SilenceRow:
    return SilenceRow(
        target=target, id=s.id, matchers=tuple(SilenceMatcher(m.label, m.pattern)
                                               for m in s.matchers),
        starts_unix_ms=s.starts_unix_ms, ends_unix_ms=s.ends_unix_ms, created_by=s.created_by,
        comment=s.comment, created_unix_ms=s.created_unix_ms, expired_by=s.expired_by,
    )  # fmt: skip


def decode_silences(target: str, reply: pb.ListSilencesResponse) -> SilenceListing:
    return SilenceListing(target, tuple(decode_silence(target, s) for s in reply.silences))


def decode_reservation(target: str, r: pb.Reservation) -> ReservationRow:
    return ReservationRow(
        target=target, id=r.id, gpu_indices=tuple(r.gpu_indices), holder=r.holder,
        until_unix_ms=r.until_unix_ms, reason=r.reason, created_by=r.created_by,
        created_unix_ms=r.created_unix_ms,
        ended_unix_ms=optional(r, "ended_unix_ms"), active=r.active,
    )  # fmt: skip


_WORKLOAD_STATES = {
    pb.WORKLOAD_STATE_QUEUED: WorkloadState.QUEUED,
    pb.WORKLOAD_STATE_RUNNING: WorkloadState.RUNNING,
    pb.WORKLOAD_STATE_FINISHED: WorkloadState.FINISHED,
    pb.WORKLOAD_STATE_FAILED: WorkloadState.FAILED,
    pb.WORKLOAD_STATE_CANCELLED: WorkloadState.CANCELLED,
    pb.WORKLOAD_STATE_TIMED_OUT: WorkloadState.TIMED_OUT,
}


def decode_workload(target: str, w: pb.Workload) -> WorkloadRow:
    opt = partial(optional, w)

    return WorkloadRow(
        target=target, id=w.id, name=w.name, argv=tuple(w.argv), owner=w.owner,
        gpu_count=w.gpu_count, min_free_memory_bytes=w.min_free_memory_bytes,
        auto_place=w.auto_place, state=_WORKLOAD_STATES.get(w.state, WorkloadState.QUEUED),
        gpu_indices=tuple(w.gpu_indices), pid=opt("pid"),
        pid_start_unix_ms=opt("pid_start_unix_ms"),
        queued_unix_ms=w.queued_unix_ms, started_unix_ms=opt("started_unix_ms"),
        ended_unix_ms=opt("ended_unix_ms"), exit_code=opt("exit_code"), detail=w.detail,
        priority=w.priority, time_limit_s=w.time_limit_s, wait_reason=w.wait_reason,
        held_gpu_indices=tuple(w.held_gpu_indices), idempotency_key=w.idempotency_key,
        moved_from=w.moved_from, submitted_by=w.submitted_by,
    )  # fmt: skip


def decode_control(
    target: str, reservations: pb.ListReservationsResponse, workloads: pb.ListWorkloadsResponse
) -> ControlUpdate:
    return ControlUpdate(
        target,
        tuple(decode_reservation(target, r) for r in reservations.reservations),
        tuple(decode_workload(target, w) for w in workloads.workloads),
    )


def decode_audit(target: str, reply: pb.QueryAuditResponse) -> tuple[AuditRow, ...]:
    return tuple(
        AuditRow(
            target, r.seq, r.time_unix_ms, r.user, r.peer, r.method.removeprefix(METHOD_PREFIX),
            r.target, r.params, r.result, r.hash,
        )
        for r in reply.records
    )  # fmt: skip


def decode_usage(target: str, reply: pb.QueryUsageResponse) -> NodeUsage:
    def cost(r: pb.UsageRow, field: Literal["cost", "gpu_cost", "energy_cost"]) -> float | None:
        return getattr(r, field) if r.HasField(field) else None

    rows = tuple(
        UsageRow(
            r.key, r.gpu_seconds, r.busy_gpu_seconds, r.memory_gib_seconds, r.energy_joules,
            r.reserved_seconds, r.reserved_idle_seconds, r.workloads,
            cost(r, "cost"), cost(r, "gpu_cost"), cost(r, "energy_cost"),
            reply.currency if r.HasField("cost") else "", tuple(r.accounts),
        )
        for r in reply.rows
    )  # fmt: skip
    k = reply.kpis
    kpis = NodeKpis(target, reply.node or target, k.gpu_seconds_total, k.mean_utilisation_pct,
                    k.idle_allocated_share, k.wait_p50_s, k.wait_p90_s)  # fmt: skip
    return NodeUsage(target, rows, kpis)


def decode_reply(target: str, reply: Any, workload_id: str = "") -> tuple[str, Payload]:
    """An action's reply → (what it did, in words; the decoded record)."""
    if isinstance(reply, pb.Alert):
        return "done", decode_alert(target, reply)
    if isinstance(reply, pb.Reservation):
        return "done", decode_reservation(target, reply)
    if isinstance(reply, pb.Silence):
        return "done", decode_silence(target, reply)
    if isinstance(reply, pb.Workload):
        row = decode_workload(target, reply)
        return row.state.value, row
    if isinstance(reply, pb.KillProcessResponse):
        outcome = kill_outcome_word(reply.outcome)
        report = KillReport(outcome, reply.detail)
        # The request already names the process; say more only when it did not die.
        words = outcome.replace("_", " ")
        return (words if report.ended or not reply.detail else f"{words}: {reply.detail}"), report
    if isinstance(reply, pb.GpuCondition):
        condition = decode_condition(reply)
        placement = "drained" if condition.drained else "in placement"
        return f"GPU {condition.gpu_index} {condition.state.words}, {placement}", condition
    if isinstance(reply, pb.WorkloadOutput):
        text = reply.output.decode("utf-8", errors="replace")
        return f"{reply.total_bytes} bytes", WorkloadOutputText(
            target, workload_id, text, reply.total_bytes
        )
    return "done", None
