"""NodeService's method table: every RPC of gpufleet.v1.NodeService, in one place.

Each servicer answers one part of the service (inventory and samples, alerts,
control, identity and audit, usage); this module alone says which method goes
where and how its messages are (de)serialized.
"""

from __future__ import annotations

from typing import Any

import grpc

from gpufleet.v1 import node_pb2 as pb
from node_daemon.rpc.alert_servicer import AlertServicer
from node_daemon.rpc.auth_servicer import AuthServicer
from node_daemon.rpc.control_servicer import ControlServicer
from node_daemon.rpc.health_servicer import HealthServicer
from node_daemon.rpc.history_servicer import HistoryServicer
from node_daemon.rpc.node_servicer import NodeServicer
from node_daemon.rpc.usage_servicer import UsageServicer

SERVICE_NAME = "gpufleet.v1.NodeService"


def _control_methods(control: ControlServicer) -> dict[str, grpc.RpcMethodHandler]:
    return {
        "KillProcess": _unary(control.KillProcess, pb.KillProcessRequest, pb.KillProcessResponse),
        "Reserve": _unary(control.Reserve, pb.ReserveRequest, pb.Reservation),
        "ReleaseReservation": _unary(
            control.ReleaseReservation, pb.ReleaseReservationRequest, pb.Reservation
        ),
        "ListReservations": _unary(
            control.ListReservations, pb.ListReservationsRequest, pb.ListReservationsResponse
        ),
        "SubmitWorkload": _unary(control.SubmitWorkload, pb.SubmitWorkloadRequest, pb.Workload),
        "AssignWorkload": _unary(control.AssignWorkload, pb.AssignWorkloadRequest, pb.Workload),
        "CancelWorkload": _unary(control.CancelWorkload, pb.CancelWorkloadRequest, pb.Workload),
        "ListWorkloads": _unary(
            control.ListWorkloads, pb.ListWorkloadsRequest, pb.ListWorkloadsResponse
        ),
        "GetWorkloadOutput": _unary(
            control.GetWorkloadOutput, pb.GetWorkloadOutputRequest, pb.WorkloadOutput
        ),
    }


def _unary(method: Any, request: Any, response: Any) -> grpc.RpcMethodHandler:
    return grpc.unary_unary_rpc_method_handler(
        method,
        request_deserializer=request.FromString,
        response_serializer=response.SerializeToString,
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
    methods = {
        **_control_methods(control),
        "QueryUsage": _unary(usage.QueryUsage, pb.QueryUsageRequest, pb.QueryUsageResponse),
        "GetHealth": _unary(health.GetHealth, pb.GetHealthRequest, pb.NodeHealth),
        "DrainGpu": _unary(health.DrainGpu, pb.DrainGpuRequest, pb.GpuCondition),
        "ClearGpuHealth": _unary(health.ClearGpuHealth, pb.ClearGpuHealthRequest, pb.GpuCondition),
        "QueryHistory": _unary(
            history.QueryHistory, pb.QueryHistoryRequest, pb.QueryHistoryResponse
        ),
        "GetStateAt": _unary(history.GetStateAt, pb.GetStateAtRequest, pb.NodeStateAt),
        "WhoAmI": _unary(auth.WhoAmI, pb.WhoAmIRequest, pb.Caller),
        "QueryAudit": _unary(auth.QueryAudit, pb.QueryAuditRequest, pb.QueryAuditResponse),
        "RecordExternalAction": _unary(
            auth.RecordExternalAction, pb.RecordExternalActionRequest, pb.AuditRecord
        ),
        "ListAlerts": _unary(alerts.ListAlerts, pb.ListAlertsRequest, pb.ListAlertsResponse),
        "AcknowledgeAlert": _unary(alerts.AcknowledgeAlert, pb.AcknowledgeAlertRequest, pb.Alert),
        "SilenceAlert": _unary(alerts.SilenceAlert, pb.SilenceAlertRequest, pb.Alert),
        "CreateSilence": _unary(alerts.CreateSilence, pb.CreateSilenceRequest, pb.Silence),
        "ListSilences": _unary(
            alerts.ListSilences, pb.ListSilencesRequest, pb.ListSilencesResponse
        ),
        "ExpireSilence": _unary(alerts.ExpireSilence, pb.ExpireSilenceRequest, pb.Silence),
        "StreamEvents": grpc.unary_stream_rpc_method_handler(
            alerts.StreamEvents,
            request_deserializer=pb.StreamEventsRequest.FromString,
            response_serializer=pb.Event.SerializeToString,
        ),
        "GetInventory": grpc.unary_unary_rpc_method_handler(
            servicer.GetInventory,
            request_deserializer=pb.GetInventoryRequest.FromString,
            response_serializer=pb.Inventory.SerializeToString,
        ),
        "StreamSamples": grpc.unary_stream_rpc_method_handler(
            servicer.StreamSamples,
            request_deserializer=pb.StreamSamplesRequest.FromString,
            response_serializer=_pre_serialized,
        ),
    }
    return grpc.method_handlers_generic_handler(SERVICE_NAME, methods)
