"""NodeService's calls, one table for both faces: each call's method, messages and deadline.

The blocking face (`gpufleet.client.blocking`) and the async face
(`gpufleet.client.aio`) dial the same entries, so a call means the same on
the terminal, in the daemon's own commands and in the console.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from google.protobuf.message import Message

from gpufleet.client.channel import CALL_DEADLINE_S
from gpufleet.v1 import node_pb2 as pb

SERVICE = "gpufleet.v1.NodeService"
Req = TypeVar("Req", bound=Message)
Resp = TypeVar("Resp", bound=Message)


@dataclass(frozen=True)
class Call(Generic[Req, Resp]):
    """A NodeService method and its messages: a Unary or a Stream."""

    method: str
    request: type[Req]
    response: type[Resp]

    @property
    def path(self) -> str:
        return f"/{SERVICE}/{self.method}"


@dataclass(frozen=True)
class Unary(Call[Req, Resp]):
    """One request, one answer, within `deadline_s` unless the caller gives another."""

    deadline_s: float = CALL_DEADLINE_S


@dataclass(frozen=True)
class Stream(Call[Req, Resp]):
    """One request, a stream of answers; no deadline unless the caller gives one."""


GET_INVENTORY = Unary("GetInventory", pb.GetInventoryRequest, pb.Inventory)
STREAM_SAMPLES = Stream("StreamSamples", pb.StreamSamplesRequest, pb.SampleBatch)
LIST_ALERTS = Unary("ListAlerts", pb.ListAlertsRequest, pb.ListAlertsResponse)
STREAM_EVENTS = Stream("StreamEvents", pb.StreamEventsRequest, pb.Event)
LIST_EVENTS = Unary("ListEvents", pb.ListEventsRequest, pb.ListEventsResponse)
ACKNOWLEDGE_ALERT = Unary("AcknowledgeAlert", pb.AcknowledgeAlertRequest, pb.Alert)
SILENCE_ALERT = Unary("SilenceAlert", pb.SilenceAlertRequest, pb.Alert)
CREATE_SILENCE = Unary("CreateSilence", pb.CreateSilenceRequest, pb.Silence)
LIST_SILENCES = Unary("ListSilences", pb.ListSilencesRequest, pb.ListSilencesResponse)
EXPIRE_SILENCE = Unary("ExpireSilence", pb.ExpireSilenceRequest, pb.Silence)
KILL_PROCESS = Unary("KillProcess", pb.KillProcessRequest, pb.KillProcessResponse)
RESERVE = Unary("Reserve", pb.ReserveRequest, pb.Reservation)
RELEASE_RESERVATION = Unary("ReleaseReservation", pb.ReleaseReservationRequest, pb.Reservation)
LIST_RESERVATIONS = Unary(
    "ListReservations", pb.ListReservationsRequest, pb.ListReservationsResponse
)
SUBMIT_WORKLOAD = Unary("SubmitWorkload", pb.SubmitWorkloadRequest, pb.Workload)
ASSIGN_WORKLOAD = Unary("AssignWorkload", pb.AssignWorkloadRequest, pb.Workload)
CANCEL_WORKLOAD = Unary("CancelWorkload", pb.CancelWorkloadRequest, pb.Workload)
LIST_WORKLOADS = Unary("ListWorkloads", pb.ListWorkloadsRequest, pb.ListWorkloadsResponse)
GET_WORKLOAD_OUTPUT = Unary("GetWorkloadOutput", pb.GetWorkloadOutputRequest, pb.WorkloadOutput)
WHO_AM_I = Unary("WhoAmI", pb.WhoAmIRequest, pb.Caller)
QUERY_AUDIT = Unary("QueryAudit", pb.QueryAuditRequest, pb.QueryAuditResponse)
RECORD_EXTERNAL_ACTION = Unary(
    "RecordExternalAction", pb.RecordExternalActionRequest, pb.AuditRecord
)
QUERY_USAGE = Unary("QueryUsage", pb.QueryUsageRequest, pb.QueryUsageResponse)
GET_HEALTH = Unary("GetHealth", pb.GetHealthRequest, pb.NodeHealth)
DRAIN_GPU = Unary("DrainGpu", pb.DrainGpuRequest, pb.GpuCondition)
CLEAR_GPU_HEALTH = Unary("ClearGpuHealth", pb.ClearGpuHealthRequest, pb.GpuCondition)
QUERY_HISTORY = Unary("QueryHistory", pb.QueryHistoryRequest, pb.QueryHistoryResponse)
GET_STATE_AT = Unary("GetStateAt", pb.GetStateAtRequest, pb.NodeStateAt)

UNARY: dict[str, Unary[Message, Message]] = {
    c.method: c  # type: ignore[misc]
    for c in (
        GET_INVENTORY, LIST_ALERTS, LIST_EVENTS, ACKNOWLEDGE_ALERT, SILENCE_ALERT, CREATE_SILENCE,
        LIST_SILENCES, EXPIRE_SILENCE, KILL_PROCESS, RESERVE, RELEASE_RESERVATION,
        LIST_RESERVATIONS, SUBMIT_WORKLOAD, ASSIGN_WORKLOAD, CANCEL_WORKLOAD, LIST_WORKLOADS,
        GET_WORKLOAD_OUTPUT, WHO_AM_I, QUERY_AUDIT, RECORD_EXTERNAL_ACTION, QUERY_USAGE,
        GET_HEALTH, DRAIN_GPU, CLEAR_GPU_HEALTH, QUERY_HISTORY, GET_STATE_AT,
    )
}  # fmt: skip
STREAMS: dict[str, Stream[Message, Message]] = {
    c.method: c  # type: ignore[misc]
    for c in (STREAM_SAMPLES, STREAM_EVENTS)
}
