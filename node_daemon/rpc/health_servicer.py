"""GPU health RPCs: GetHealth (viewer), DrainGpu (operator), ClearGpuHealth (admin).

Roles are the interceptor's (node_daemon.auth.policy); DrainGpu and ClearGpuHealth
are audited there too, as every change is. The assessor journals the change's event.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import grpc

from gpufleet.v1 import node_pb2 as pb
from node_daemon.auth.identity import acting_user
from node_daemon.health.assessor import HealthAssessor
from node_daemon.health.fault_record import GpuFaults
from node_daemon.health.model import GpuCondition
from node_daemon.health.wire import condition_message, fault_record_message
from node_daemon.rpc.errors import domain_errors

MAX_REASON = 1000
HealingPolicyOf = Callable[[], pb.HealingPolicy]
FaultRecordOf = Callable[[int], GpuFaults | None]


def healing_off() -> pb.HealingPolicy:
    """The policy of a node without self-healing."""
    return pb.HealingPolicy(mode="off")


class HealthServicer:
    def __init__(
        self,
        assessor: HealthAssessor,
        healing_policy: HealingPolicyOf = healing_off,
        clock: Callable[[], float] = time.time,
        fault_record: FaultRecordOf = lambda _gpu: None,
    ) -> None:
        self._assessor, self._healing_policy, self._clock = assessor, healing_policy, clock
        self._fault_record = fault_record

    def GetHealth(
        self, request: pb.GetHealthRequest, context: grpc.ServicerContext
    ) -> pb.NodeHealth:
        conditions = self._assessor.conditions()
        gpus = [condition_message(conditions[i]) for i in sorted(conditions)]
        now_ms = int(self._clock() * 1000)
        records = [fault_record_message(r, now_ms) for i in sorted(conditions)
                   if (r := self._fault_record(i)) is not None]  # fmt: skip
        return pb.NodeHealth(gpus=gpus, healing=self._healing_policy(), fault_records=records)

    def DrainGpu(
        self, request: pb.DrainGpuRequest, context: grpc.ServicerContext
    ) -> pb.GpuCondition:
        gpu, reason, assessor = request.gpu_index, request.reason, self._assessor
        if request.drain:
            return self._change(
                context, reason, lambda by, now_ms: assessor.drain(gpu, by, reason, now_ms)
            )
        return self._change(context, reason, lambda by, now_ms: assessor.undrain(gpu, by, now_ms))

    def ClearGpuHealth(
        self, request: pb.ClearGpuHealthRequest, context: grpc.ServicerContext
    ) -> pb.GpuCondition:
        gpu, reason, assessor = request.gpu_index, request.reason, self._assessor
        return self._change(
            context, reason, lambda by, now_ms: assessor.clear(gpu, by, reason, now_ms)
        )

    def _change(
        self,
        context: grpc.ServicerContext,
        reason: str,
        change: Callable[[str, int], GpuCondition],
    ) -> pb.GpuCondition:
        """Check the request's reason, then change a GPU's condition as the acting user,
        now: `change(actor, now_ms)`."""
        _check_reason(context, reason)
        actor, now_ms = acting_user(), int(self._clock() * 1000)
        with domain_errors(context):
            condition = change(actor, now_ms)
        return condition_message(condition)


def _check_reason(context: grpc.ServicerContext, reason: str) -> None:
    if len(reason) > MAX_REASON:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"reason is longer than {MAX_REASON} characters"
        )
