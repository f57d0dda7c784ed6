"""RPCs about alerts and events: list, stream the journal, list its events in a time
range, acknowledge, silence, and matcher silences (create, list, expire).

Thin: validation of the request, then the AlertEngine or the EventJournal;
domain errors (UnknownAlert and UnknownSilence are NotFound, AlertNotFiring and
SilenceEnded Refused, BadAlertRequest and BadSilence Invalid) become status
codes with a message that says what to do, through node_daemon.rpc.errors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import grpc

from gpufleet.v1 import node_pb2 as pb
from node_daemon.alerts.engine import AlertEngine
from node_daemon.alerts.silence_wire import silence_message
from node_daemon.alerts.wire import alert_message
from node_daemon.auth.identity import acting_user
from node_daemon.journal.event_journal import EventJournal
from node_daemon.rpc.errors import abort, domain_errors

log = logging.getLogger(__name__)

DEFAULT_CLEARED_LIMIT = 200
DEFAULT_EXPIRED_LIMIT = 200
DEFAULT_EVENTS_LIMIT = 1000
MAX_LIMIT = 10_000
MAX_TEXT = 1000
_POLL_S = 1.0


def _check_text(
    context: grpc.ServicerContext, name: str, value: str, limit: int = MAX_TEXT
) -> None:
    if len(value) > limit:
        context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{name} is longer than {limit} characters")


def list_events_problem(request: pb.ListEventsRequest, until_ms: int) -> str | None:
    """What is wrong with a ListEvents request (its end `until_ms`), or None."""
    if request.since_unix_ms <= 0:
        return f"since_unix_ms must be a Unix time in ms after 1970, got {request.since_unix_ms}"
    if until_ms <= request.since_unix_ms:
        return (f"until_unix_ms {until_ms} is not after since_unix_ms {request.since_unix_ms}: "
                "the range must start before it ends")  # fmt: skip
    if request.limit > MAX_LIMIT:
        return f"limit {request.limit} is more than {MAX_LIMIT:,}: ask for a shorter range"
    known = set(pb.EventKind.values()) - {pb.EVENT_KIND_UNSPECIFIED}
    unknown = sorted(set(request.kinds) - known)
    if unknown:
        return (f"unknown event kind {unknown[0]}: kinds are EventKind's values "
                f"{min(known)} to {max(known)}")  # fmt: skip
    return None


class AlertServicer:
    def __init__(self, engine: AlertEngine, journal: EventJournal) -> None:
        self._engine, self._journal = engine, journal

    def ListAlerts(
        self, request: pb.ListAlertsRequest, context: grpc.ServicerContext
    ) -> pb.ListAlertsResponse:
        # The seq first: events after it may already be in the listing, and
        # applying them again is harmless; the other order could miss one.
        last_seq = self._journal.last_seq
        alerts = [alert_message(a) for a in self._engine.firing()]
        if request.include_cleared:
            limit = min(request.limit or DEFAULT_CLEARED_LIMIT, MAX_LIMIT)
            alerts += self._journal.alerts(firing=False, limit=limit)
        return pb.ListAlertsResponse(
            alerts=alerts, last_seq=last_seq, journal_id=self._journal.journal_id
        )

    def StreamEvents(
        self, request: pb.StreamEventsRequest, context: grpc.ServicerContext
    ) -> Iterator[pb.Event]:
        if request.after_seq >= 2**63:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "after_seq must be below 2**63")
        context.add_callback(self._journal.wake)  # a cancelled stream frees its worker at once
        after, head = request.after_seq, self._journal.last_seq
        log.info("event stream to %s from seq %d (head %d)", context.peer(), after, head)
        while context.is_active() and not self._journal.closed:
            for event in self._journal.wait_after(after, _POLL_S):
                event.replayed = event.seq <= head
                yield event
                after = event.seq

    def ListEvents(
        self, request: pb.ListEventsRequest, context: grpc.ServicerContext
    ) -> pb.ListEventsResponse:
        until = request.until_unix_ms or int(time.time() * 1000)
        problem = list_events_problem(request, until)
        if problem is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, problem)
        events, truncated = self._journal.events_between(
            request.since_unix_ms, until, sorted(set(request.kinds)),
            request.limit or DEFAULT_EVENTS_LIMIT,
        )  # fmt: skip
        for event in events:
            event.replayed = True  # from the journal, as StreamEvents marks its replay
        return pb.ListEventsResponse(
            events=events, truncated=truncated, journal_id=self._journal.journal_id
        )

    def AcknowledgeAlert(
        self, request: pb.AcknowledgeAlertRequest, context: grpc.ServicerContext
    ) -> pb.Alert:
        self._check_alert_request(context, request.alert_id, request.actor)
        _check_text(context, "comment", request.comment)
        with domain_errors(context):
            alert = self._engine.acknowledge(request.alert_id, acting_user(), request.comment)
        log.info("alert %s acknowledged by %s", request.alert_id, alert.acknowledged_by)
        return alert_message(alert)

    def SilenceAlert(
        self, request: pb.SilenceAlertRequest, context: grpc.ServicerContext
    ) -> pb.Alert:
        self._check_alert_request(context, request.alert_id, request.actor)
        _check_text(context, "reason", request.reason)
        actor = acting_user()
        with domain_errors(context):
            alert = self._engine.silence(
                request.alert_id, request.duration_s, request.reason, actor
            )
        log.info("alert %s silence set by %s for %d s", request.alert_id, actor, request.duration_s)
        return alert_message(alert)

    # -- matcher silences -----------------------------------------------------

    def CreateSilence(
        self, request: pb.CreateSilenceRequest, context: grpc.ServicerContext
    ) -> pb.Silence:
        _check_text(context, "actor", request.actor, 128)
        actor = acting_user()
        matchers = [(m.label, m.pattern) for m in request.matchers]
        with domain_errors(context):
            silence = self._engine.create_silence(
                matchers, request.starts_unix_ms, request.ends_unix_ms, request.duration_s,
                request.comment, actor,
            )  # fmt: skip
        log.info("%s created by %s", silence.id, actor)
        return silence_message(silence)

    def ListSilences(
        self, request: pb.ListSilencesRequest, context: grpc.ServicerContext
    ) -> pb.ListSilencesResponse:
        limit = min(request.limit or DEFAULT_EXPIRED_LIMIT, MAX_LIMIT)
        silences = self._engine.silences(request.include_expired, limit)
        return pb.ListSilencesResponse(silences=[silence_message(s) for s in silences])

    def ExpireSilence(
        self, request: pb.ExpireSilenceRequest, context: grpc.ServicerContext
    ) -> pb.Silence:
        if not request.silence_id:
            abort(context, grpc.StatusCode.INVALID_ARGUMENT,
                  "silence_id is required (see ListSilences)")  # fmt: skip
        _check_text(context, "silence_id", request.silence_id, 64)
        _check_text(context, "actor", request.actor, 128)
        actor = acting_user()
        with domain_errors(context):
            silence = self._engine.expire_silence(request.silence_id, actor)
        log.info("%s expired by %s", silence.id, actor)
        return silence_message(silence)

    @staticmethod
    def _check_alert_request(context: grpc.ServicerContext, alert_id: str, actor: str) -> None:
        if not alert_id:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "alert_id is required (see ListAlerts)")
        _check_text(context, "alert_id", alert_id, 64)
        _check_text(context, "actor", actor, 128)
