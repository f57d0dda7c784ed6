"""WhoAmI and QueryAudit."""

from __future__ import annotations

from collections.abc import Callable

import grpc

from gpufleet.v1 import node_pb2 as pb
from node_daemon.auth.audit import AuditEntry, AuditError, AuditLog
from node_daemon.auth.external_action import BadExternalAction, record_external_action
from node_daemon.auth.identity import current_caller

MAX_AUDIT_ROWS = 10_000


class AuthServicer:
    def __init__(self, audit: AuditLog, kill_job_processes: Callable[[], bool] = bool) -> None:
        """`kill_job_processes` reads the node's live allow_kill_job_processes."""
        self._audit = audit
        self._kill_job_processes = kill_job_processes

    def WhoAmI(self, request: pb.WhoAmIRequest, context: grpc.ServicerContext) -> pb.Caller:
        """Who the caller is here, until when, and the node's kill policy."""
        caller = current_caller()
        expires = caller.expires_unix_s
        return pb.Caller(
            user=caller.user, role=int(caller.role), teams=caller.teams,  # type: ignore[arg-type]
            authenticated_by=caller.authenticated_by,
            credential_expires_unix_ms=None if expires is None else int(expires * 1000),
            allow_kill_job_processes=self._kill_job_processes(),
            token_issuer=caller.token_issuer, token_id=caller.token_id,
        )  # fmt: skip

    def QueryAudit(
        self, request: pb.QueryAuditRequest, context: grpc.ServicerContext
    ) -> pb.QueryAuditResponse:
        limit = min(request.limit or 1000, MAX_AUDIT_ROWS)
        entries = self._audit.query(request.from_unix_ms, request.to_unix_ms, request.user,
                                    request.method, limit)  # fmt: skip
        return pb.QueryAuditResponse(records=[_record(e) for e in entries])

    def RecordExternalAction(
        self, request: pb.RecordExternalActionRequest, context: grpc.ServicerContext
    ) -> pb.AuditRecord:
        """One audit record for an action taken elsewhere (Slurm) about this node."""
        caller = current_caller()
        try:
            entry = record_external_action(self._audit, caller.user, context.peer(),
                                           request.system, request.action, request.target,
                                           request.params, request.result)  # fmt: skip
        except BadExternalAction as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"RecordExternalAction: {exc}")
        except AuditError as exc:
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{exc}; the action was not recorded")
        return _record(entry)


def _record(e: AuditEntry) -> pb.AuditRecord:
    return pb.AuditRecord(
        seq=e.seq, time_unix_ms=e.time_ms, user=e.user, peer=e.peer, method=e.method,
        target=e.target, params=e.params, result=e.result, prev_hash=e.prev_hash, hash=e.hash,
    )  # fmt: skip
