"""The role each RPC needs, and which calls change things (and so are audited)."""

from __future__ import annotations

from node_daemon.auth.identity import Role

SERVICE = "/gpufleet.v1.NodeService/"
# Health checks and server reflection stay open: load balancers and tools need them.
OPEN_PREFIXES = ("/grpc.health.v1.", "/grpc.reflection.")

METHOD_ROLES: dict[str, Role] = {
    "GetInventory": Role.VIEWER,
    "StreamSamples": Role.VIEWER,
    "ListAlerts": Role.VIEWER,
    "StreamEvents": Role.VIEWER,
    "ListReservations": Role.VIEWER,
    "ListWorkloads": Role.VIEWER,
    "GetWorkloadOutput": Role.VIEWER,
    "WhoAmI": Role.VIEWER,
    "QueryUsage": Role.VIEWER,
    "ListSilences": Role.VIEWER,
    "GetHealth": Role.VIEWER,
    "QueryHistory": Role.VIEWER,
    "AcknowledgeAlert": Role.OPERATOR,
    "SilenceAlert": Role.OPERATOR,
    "CreateSilence": Role.OPERATOR,
    "ExpireSilence": Role.OPERATOR,
    "SubmitWorkload": Role.OPERATOR,
    "AssignWorkload": Role.OPERATOR,
    "CancelWorkload": Role.OPERATOR,
    "Reserve": Role.OPERATOR,
    "ReleaseReservation": Role.OPERATOR,
    "KillProcess": Role.OPERATOR,
    "DrainGpu": Role.OPERATOR,
    # Writes its one audit record itself (the action was taken elsewhere): not in MUTATING.
    "RecordExternalAction": Role.OPERATOR,
    "QueryAudit": Role.ADMIN,
    # After a repair (a reset, an RMA): forgets what the daemon cannot see was fixed.
    "ClearGpuHealth": Role.ADMIN,
}
MUTATING = frozenset({
    "AcknowledgeAlert", "SilenceAlert", "CreateSilence", "ExpireSilence", "SubmitWorkload",
    "AssignWorkload", "CancelWorkload", "Reserve", "ReleaseReservation", "KillProcess",
    "DrainGpu", "ClearGpuHealth",
})  # fmt: skip


def method_name(full_method: str) -> str | None:
    """'/gpufleet.v1.NodeService/KillProcess' -> 'KillProcess'; None for other services."""
    return full_method.removeprefix(SERVICE) if full_method.startswith(SERVICE) else None


def is_open(full_method: str) -> bool:
    return full_method.startswith(OPEN_PREFIXES)
