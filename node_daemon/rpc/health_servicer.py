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
from node_daemon.health.wire import condition_message
from node_daemon.rpc.errors import abort_for

MAX_REASON = 1000
HealingPolicyOf = Callable[[], pb.HealingPolicy]


def healing_off() -> pb.HealingPolicy:
    """The policy of a node without self-healing."""
    return pb.HealingPolicy(mode="off")


class HealthServicer:
    def __init__(
        self,
        assessor: HealthAssessor,
        healing_policy: HealingPolicyOf = healing_off,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._assessor, self._healing_policy, self._clock = assessor, healing_policy, clock

    def GetHealth(
        self, request: pb.GetHealthRequest, context: grpc.ServicerContext
    ) -> pb.NodeHealth:
        conditions = self._assessor.conditions()
        gpus = [condition_message(conditions[i]) for i in sorted(conditions)]
        return pb.NodeHealth(gpus=gpus, healing=self._healing_policy())

    def DrainGpu(
        self, request: pb.DrainGpuRequest, context: grpc.ServicerContext
    ) -> pb.GpuCondition:
        _check_reason(context, request.reason)
        actor, now_ms = acting_user(), int(self._clock() * 1000)
        try:
            if request.drain:
                condition = self._assessor.drain(request.gpu_index, actor, request.reason, now_ms)
            else:
                condition = self._assessor.undrain(request.gpu_index, actor, now_ms)
        except Exception as exc:
            abort_for(context, exc)
        return condition_message(condition)

    def ClearGpuHealth(
        self, request: pb.ClearGpuHealthRequest, context: grpc.ServicerContext
    ) -> pb.GpuCondition:
        _check_reason(context, request.reason)
        actor, now_ms = acting_user(), int(self._clock() * 1000)
        try:
            condition = self._assessor.clear(request.gpu_index, actor, request.reason, now_ms)
        except Exception as exc:
            abort_for(context, exc)
        return condition_message(condition)


def _check_reason(context: grpc.ServicerContext, reason: str) -> None:
    if len(reason) > MAX_REASON:
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"reason is longer than {MAX_REASON} characters"
        )
