"""The gpufleet.v1.NodeService servicer: thin, it reads the sampler and history."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from typing import Any

import grpc

from gpufleet.v1 import node_pb2 as pb
from node_daemon import __version__
from node_daemon.alert_servicer import AlertServicer
from node_daemon.auth.servicer import AuthServicer
from node_daemon.control_servicer import ControlServicer
from node_daemon.history import SampleHistory
from node_daemon.readings import BackendKind
from node_daemon.sampler import Sampler
from node_daemon.slurm import SlurmWatcher
from node_daemon.usage.servicer import UsageServicer, usage_methods
from node_daemon.wire import REPLAYED_SUFFIX, gpu_info_message

log = logging.getLogger(__name__)

SERVICE_NAME = "gpufleet.v1.NodeService"
_BACKENDS = {BackendKind.NVML: pb.BACKEND_NVML, BackendKind.SIMULATED: pb.BACKEND_SIMULATED}
# How often a waiting stream checks that its client is still there.
_STREAM_POLL_S = 1.0


class NodeServicer:
    """Answers inventory and sample-stream calls from the shared state."""

    def __init__(
        self,
        sampler: Sampler,
        history: SampleHistory,
        backend: BackendKind,
        started_unix_ms: int,
        hostname: str | None = None,
        slurm: SlurmWatcher | None = None,
    ) -> None:
        self._sampler, self._history, self._backend = sampler, history, backend
        self._slurm = slurm
        self._started_unix_ms = started_unix_ms
        self._hostname = hostname or socket.gethostname()

    def GetInventory(
        self, request: pb.GetInventoryRequest, context: grpc.ServicerContext
    ) -> pb.Inventory:
        status = self._sampler.status
        facts = status.facts
        inventory = pb.Inventory(
            hostname=self._hostname,
            daemon_version=__version__,
            backend=_BACKENDS[self._backend],
            backend_state=pb.BACKEND_STATE_OK if status.ok else pb.BACKEND_STATE_DEGRADED,
            backend_detail=status.detail,
            sample_interval_ms=round(self._sampler.interval_s * 1000),
            history_seconds=round(self._history.capacity * self._sampler.interval_s),
            daemon_started_unix_ms=self._started_unix_ms,
        )
        slurm = self._slurm.state if self._slurm else None
        if slurm is not None:
            inventory.slurm_state = slurm.state
            if slurm.reason:
                inventory.slurm_reason = slurm.reason
        if facts is not None:
            if facts.driver_version is not None:
                inventory.driver_version = facts.driver_version
            if facts.cuda_version is not None:
                inventory.cuda_version = facts.cuda_version
            inventory.gpus.extend(gpu_info_message(g) for g in facts.gpus)
        return inventory

    def StreamSamples(
        self, request: pb.StreamSamplesRequest, context: grpc.ServicerContext
    ) -> Iterator[bytes]:
        """Yield pre-serialized SampleBatch bytes: replayed history first, then live."""
        peer = context.peer()
        context.add_callback(self._history.wake)  # a cancelled stream frees its worker at once
        if request.HasField("since_unix_ms"):
            replay, last_tick = self._history.since(request.since_unix_ms)
            log.info("stream to %s: replaying %d batches", peer, len(replay))
            for entry in replay:
                yield entry.payload + REPLAYED_SUFFIX
        else:
            last_tick = self._history.latest_tick()
        while context.is_active() and not self._history.closed:
            for entry in self._history.wait_after(last_tick, _STREAM_POLL_S):
                yield entry.payload
                last_tick = entry.tick
        log.info("stream to %s ended", peer)


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
) -> grpc.GenericRpcHandler:
    """The service's method table. Sample streams send bytes the sampler serialized once."""
    methods = {
        **_control_methods(control),
        **usage_methods(usage),
        "WhoAmI": _unary(auth.WhoAmI, pb.WhoAmIRequest, pb.Caller),
        "QueryAudit": _unary(auth.QueryAudit, pb.QueryAuditRequest, pb.QueryAuditResponse),
        "ListAlerts": _unary(alerts.ListAlerts, pb.ListAlertsRequest, pb.ListAlertsResponse),
        "AcknowledgeAlert": _unary(alerts.AcknowledgeAlert, pb.AcknowledgeAlertRequest, pb.Alert),
        "SilenceAlert": _unary(alerts.SilenceAlert, pb.SilenceAlertRequest, pb.Alert),
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
