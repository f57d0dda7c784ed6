"""NodeService's method table: every RPC of gpufleet.v1.NodeService, in one place.

Each servicer answers one part of the service (inventory and samples, alerts,
control, identity and audit, usage); this module alone says which method goes
where and how its messages are (de)serialized.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.message import Message

from gpufleet.client.calls import SERVICE, STREAM_EVENTS, STREAM_SAMPLES, UNARY, Unary
from node_daemon.rpc.alert_servicer import AlertServicer
from node_daemon.rpc.auth_servicer import AuthServicer
from node_daemon.rpc.control_servicer import ControlServicer
from node_daemon.rpc.health_servicer import HealthServicer
from node_daemon.rpc.history_servicer import HistoryServicer
from node_daemon.rpc.node_servicer import NodeServicer
from node_daemon.rpc.usage_servicer import UsageServicer

SERVICE_NAME = SERVICE


def _unary(method: Any, call: Unary[Message, Message]) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        method,
        request_deserializer=call.request.FromString,
        response_serializer=call.response.SerializeToString,
    )


def _pre_serialized(payload: bytes) -> bytes:
    return payload


def node_service_handler(
    servicer: NodeServicer,
    alerts: AlertServicer,
    control: ControlServicer,
    auth: AuthServicer,
    usage: UsageServicer,
    health: HealthServicer,
    history: HistoryServicer,
) -> grpc.GenericRpcHandler:
    """The service's method table. Sample streams send bytes the sampler serialized once."""
    # Which servicer answers each unary call; its messages are the shared client's table's.
    answered_by: tuple[tuple[object, tuple[str, ...]], ...] = (
        (servicer, ("GetInventory",)),
        (alerts, ("ListAlerts", "ListEvents", "AcknowledgeAlert", "SilenceAlert", "CreateSilence",
                  "ListSilences", "ExpireSilence")),
        (control, ("KillProcess", "Reserve", "ReleaseReservation", "ListReservations",
                   "SubmitWorkload", "AssignWorkload", "CancelWorkload", "ListWorkloads",
                   "GetWorkloadOutput")),
        (auth, ("WhoAmI", "QueryAudit", "RecordExternalAction")),
        (usage, ("QueryUsage",)),
        (health, ("GetHealth", "DrainGpu", "ClearGpuHealth")),
        (history, ("QueryHistory", "GetStateAt")),
    )  # fmt: skip
    methods = {
        name: _unary(getattr(answerer, name), UNARY[name])
        for answerer, names in answered_by
        for name in names
    }
    methods["StreamEvents"] = grpc.unary_stream_rpc_method_handler(
        alerts.StreamEvents,
        request_deserializer=STREAM_EVENTS.request.FromString,
        response_serializer=STREAM_EVENTS.response.SerializeToString,
    )
    methods["StreamSamples"] = grpc.unary_stream_rpc_method_handler(
        servicer.StreamSamples,
        request_deserializer=STREAM_SAMPLES.request.FromString,
        response_serializer=_pre_serialized,
    )
    return grpc.method_handlers_generic_handler(SERVICE_NAME, methods)
