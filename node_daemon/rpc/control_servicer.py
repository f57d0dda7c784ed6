"""RPCs that act: kill, reservations, workloads. Validate, delegate, map errors.

Requests become the control layer's records here and answers are built from
them (node_daemon.control.wire); a workload's environment is left out of an
answer for anyone `may_see_private` does not allow.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

import grpc

from gpufleet.policy import Role, may_kill
from gpufleet.v1 import node_pb2 as pb
from node_daemon.auth.identity import Caller, acting_user, current_caller
from node_daemon.backends.readings import ProcessReading
from node_daemon.control.kill import KillOutcome
from node_daemon.control.kill_service import ProcessKiller
from node_daemon.control.limits import LIST_BYTES, OverLimit, check_texts
from node_daemon.control.listing import within_budget
from node_daemon.control.records import Workload
from node_daemon.control.reservations import ReservationLedger
from node_daemon.control.wire import reservation_message, workload_message, workload_request
from node_daemon.control.workloads import MAX_OUTPUT_BYTES, WorkloadManager
from node_daemon.errors import Forbidden
from node_daemon.rpc.errors import abort_for, domain_errors

log = logging.getLogger(__name__)
TeamsOf = Callable[[str], Sequence[str]]
_OUTCOMES = {
    KillOutcome.TERMINATED: pb.KILL_OUTCOME_TERMINATED,
    KillOutcome.KILLED: pb.KILL_OUTCOME_KILLED,
    KillOutcome.ALREADY_GONE: pb.KILL_OUTCOME_ALREADY_GONE,
    KillOutcome.UNKILLABLE: pb.KILL_OUTCOME_UNKILLABLE,
}


def _require(allowed: bool, message: str) -> None:
    if not allowed:
        raise Forbidden(message)


def _may_kill(process: ProcessReading) -> None:
    """The caller may kill a process it owns, as listed now; an admin may kill any."""
    caller = current_caller()
    _require(
        may_kill(caller.role, caller.user, process.user),
        f"pid {process.pid} belongs to {process.user or 'an unknown user'}; "
        "only its owner or an admin may kill it",
    )


def _check_text(context: grpc.ServicerContext, **fields: str) -> None:
    """INVALID_ARGUMENT naming the first field past its limit (node_daemon.control.limits)."""
    try:
        check_texts(**fields)
    except OverLimit as exc:
        abort_for(context, exc)


def may_see_private(caller: Caller, workload: Workload, teams_of: TeamsOf) -> bool:
    """A workload's environment and output: its owner, operators of its team, admins."""
    if caller.role >= Role.ADMIN or caller.user in (workload.owner, workload.run_as):
        return True
    owner_teams = (
        [workload.owner] if workload.owner.startswith("team:") else list(teams_of(workload.owner))
    )
    return caller.role >= Role.OPERATOR and any(t in caller.holders for t in owner_teams)


class ControlServicer:
    def __init__(
        self,
        killer: ProcessKiller,
        ledger: ReservationLedger,
        workloads: WorkloadManager,
        teams_of: TeamsOf = lambda _user: (),
    ) -> None:
        self._killer, self._ledger, self._workloads = killer, ledger, workloads
        self._teams_of = teams_of

    def KillProcess(
        self, request: pb.KillProcessRequest, context: grpc.ServicerContext
    ) -> pb.KillProcessResponse:
        _check_text(context, actor=request.actor)
        if request.grace_s > 300:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "grace_s must be at most 300 seconds")
        with domain_errors(context):
            outcome, detail = self._killer.kill(
                request.gpu_index,
                request.pid,
                request.start_time_unix_ms,
                request.grace_s,
                acting_user(),
                authorise=_may_kill,
            )
        return pb.KillProcessResponse(outcome=_OUTCOMES[outcome], detail=detail)

    def Reserve(self, request: pb.ReserveRequest, context: grpc.ServicerContext) -> pb.Reservation:
        _check_text(context, holder=request.holder, reason=request.reason, actor=request.actor)
        with domain_errors(context):
            self._require_holder(request.holder.strip(), "reserve")
            reservation = self._ledger.reserve(
                list(request.gpu_indices),
                request.holder.strip(),
                request.until_unix_ms,
                request.reason,
                acting_user(),
            )
        return reservation_message(reservation)

    def ReleaseReservation(
        self, request: pb.ReleaseReservationRequest, context: grpc.ServicerContext
    ) -> pb.Reservation:
        _check_text(context, actor=request.actor)
        with domain_errors(context):
            self._require_holder(self._ledger.get(request.reservation_id).holder, "release")
            released = self._ledger.release(
                request.reservation_id, acting_user(), list(request.gpu_indices)
            )
        return reservation_message(released)

    @staticmethod
    def _require_holder(holder: str, what: str) -> None:
        caller = current_caller()
        _require(
            caller.may_act_for(holder),
            f"{caller.user} may {what} only for {' or '.join(caller.holders)}, not {holder} "
            "(an admin may act for anyone)",
        )

    def ListReservations(
        self, request: pb.ListReservationsRequest, context: grpc.ServicerContext
    ) -> pb.ListReservationsResponse:
        found = self._ledger.all() if request.include_ended else self._ledger.active()
        return pb.ListReservationsResponse(reservations=[reservation_message(r) for r in found])

    def SubmitWorkload(
        self, request: pb.SubmitWorkloadRequest, context: grpc.ServicerContext
    ) -> pb.Workload:
        # The request's own fields (name, owner, command...) are the control layer's to check.
        _check_text(context, actor=request.actor)
        with domain_errors(context):
            caller = current_caller()
            self._require_holder(request.owner or caller.user, "submit workloads")
            submitter = caller.user if caller.authenticated_by != "none" else ""
            queued = self._workloads.submit(
                workload_request(request), acting_user(), submitter, submitted_by=submitter
            )
        return workload_message(queued)

    def AssignWorkload(
        self, request: pb.AssignWorkloadRequest, context: grpc.ServicerContext
    ) -> pb.Workload:
        _check_text(context, actor=request.actor)
        gpus = list(request.gpu_indices)
        return self._act_on_owned(
            context, request.workload_id, "assign",
            lambda actor: self._workloads.assign(request.workload_id, gpus, actor),
        )  # fmt: skip

    def CancelWorkload(
        self, request: pb.CancelWorkloadRequest, context: grpc.ServicerContext
    ) -> pb.Workload:
        _check_text(context, reason=request.reason, actor=request.actor)
        reason = request.reason.strip()
        return self._act_on_owned(
            context, request.workload_id, "cancel",
            lambda actor: self._workloads.cancel(request.workload_id, actor, reason),
        )  # fmt: skip

    def _act_on_owned(
        self,
        context: grpc.ServicerContext,
        workload_id: str,
        what: str,
        act: Callable[[str], Workload],
    ) -> pb.Workload:
        """Act on a queued or running workload, as its owner (or for it); `act` is given
        the acting user."""
        with domain_errors(context):
            self._require_holder(self._workloads.get(workload_id).owner, what)
            changed = act(acting_user())
        return workload_message(changed)

    def ListWorkloads(
        self, request: pb.ListWorkloadsRequest, context: grpc.ServicerContext
    ) -> pb.ListWorkloadsResponse:
        caller = current_caller()
        listed = self._workloads.workloads(request.include_ended)
        shown = [
            workload_message(w, with_env=may_see_private(caller, w, self._teams_of)) for w in listed
        ]
        fitting, left_out = within_budget(shown, [w.state.ended for w in listed])
        if left_out:
            log.info("ListWorkloads: %d of %d workloads left out to stay within %d bytes",
                     left_out, len(shown), LIST_BYTES)  # fmt: skip
        return pb.ListWorkloadsResponse(workloads=fitting)

    def GetWorkloadOutput(
        self, request: pb.GetWorkloadOutputRequest, context: grpc.ServicerContext
    ) -> pb.WorkloadOutput:
        tail = min(request.tail_bytes or MAX_OUTPUT_BYTES, MAX_OUTPUT_BYTES)
        with domain_errors(context):
            workload = self._workloads.get(request.workload_id, include_ended=True)
            caller = current_caller()
            _require(
                may_see_private(caller, workload, self._teams_of),
                f"the output of workload {workload.id} is for its owner {workload.owner}, "
                f"operators of the owner's team and admins; {caller.user} is none of them",
            )
            output, total = self._workloads.output(workload, tail)
        return pb.WorkloadOutput(output=output, total_bytes=total)
