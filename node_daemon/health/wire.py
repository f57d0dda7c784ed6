"""GPU health values as gpufleet.v1 messages."""

from __future__ import annotations

from gpufleet.v1 import node_pb2 as pb
from node_daemon.health.fault_record import GpuFaults
from node_daemon.health.model import GpuCondition, HealthReason, HealthState

_STATES = {
    HealthState.HEALTHY: pb.GPU_HEALTH_STATE_HEALTHY,
    HealthState.DEGRADED: pb.GPU_HEALTH_STATE_DEGRADED,
    HealthState.SUSPECT: pb.GPU_HEALTH_STATE_SUSPECT,
    HealthState.NEEDS_RESET: pb.GPU_HEALTH_STATE_NEEDS_RESET,
    HealthState.NEEDS_REBOOT: pb.GPU_HEALTH_STATE_NEEDS_REBOOT,
    HealthState.NEEDS_INSPECTION: pb.GPU_HEALTH_STATE_NEEDS_INSPECTION,
}


def state_message(state: HealthState) -> pb.GpuHealthState.ValueType:
    return _STATES[state]


def reason_message(reason: HealthReason) -> pb.HealthReason:
    message = pb.HealthReason(
        code=reason.code, state=_STATES[reason.state], summary=reason.summary,
        action=reason.action, since_unix_ms=reason.since_ms,
    )  # fmt: skip
    if reason.lead_time_s is not None:
        message.lead_time_s = reason.lead_time_s
    return message


def condition_message(condition: GpuCondition) -> pb.GpuCondition:
    message = pb.GpuCondition(
        gpu_index=condition.gpu_index,
        state=_STATES[condition.state],
        reasons=[reason_message(r) for r in condition.reasons],
        since_unix_ms=condition.since_ms,
        drained=condition.drain is not None,
        drained_by=condition.drain.by if condition.drain else "",
        drain_reason=condition.drain.reason if condition.drain else "",
    )
    if condition.power_capped_w is not None:
        message.power_capped_w = condition.power_capped_w
    return message


def fault_record_message(record: GpuFaults, now_ms: int) -> pb.GpuFaultRecord:
    return pb.GpuFaultRecord(
        gpu_index=record.gpu_index, uuid=record.uuid, reliability_score=record.score(now_ms),
        incidents=[
            pb.FaultIncident(
                kind=i.kind, state=_STATES[i.state], started_unix_ms=i.started_ms,
                last_unix_ms=i.last_ms, count=i.count, xid_codes=i.codes, ended=i.ended,
            )
            for i in record.incidents
        ],
    )  # fmt: skip
