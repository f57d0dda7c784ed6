"""AuthInterceptor: every RPC is identified, checked against its role, and audited.

Health checks and reflection stay open. A denied call gets UNAUTHENTICATED (who
are you?) or PERMISSION_DENIED (not allowed), with what is missing, and an
audit record, at a bounded rate (repeats of a kind of denial from one peer are
counted into one summary record per minute, and the records per minute are
bounded whatever the number of peers: node_daemon/auth/denials.py). A call that changes
something is audited before it runs: if the audit log cannot be written, the
call is refused (reads keep working). A reload judges the open streams again
and ends those whose caller it refuses now (node_daemon/auth/open_streams.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import grpc
from google.protobuf import json_format
from google.protobuf.message import Message

from gpufleet.policy import METHOD_ROLES, MUTATING, Role
from node_daemon.auth.audit import AuditError, AuditLog
from node_daemon.auth.auth_state import AuthState, Denied
from node_daemon.auth.certificate import BadCertificateName, certificate_user_name, check_name
from node_daemon.auth.denials import UNAUTHENTICATED
from node_daemon.auth.identity import LOCAL_ADMIN, Caller, reset_current_caller, set_current_caller
from node_daemon.auth.open_streams import OpenStream, OpenStreams, RevocableContext
from node_daemon.auth.policy import is_open, method_name
from node_daemon.auth.seen_teams import SeenTeams
from node_daemon.auth.settings import AuthSettings

log = logging.getLogger(__name__)

TARGET_FIELDS = (
    "gpu_index",
    "gpu_indices",
    "pid",
    "workload_id",
    "reservation_id",
    "alert_id",
    "silence_id",
    "holder",
)
Behavior = Callable[[Any, grpc.ServicerContext], Any]


MAX_TARGET_VALUE = 64
MAX_TARGET = 512


def describe_target(request: Message) -> str:
    """What the call aims at, bounded: the audit log must not be a way to fill the disk."""
    parts = []
    for field in TARGET_FIELDS:
        if field in request.DESCRIPTOR.fields_by_name:
            value = getattr(request, field)
            if value or (value == 0 and field == "gpu_index"):
                text = str(list(value)[:16]) if field == "gpu_indices" else str(value)
                parts.append(f"{field}={text[:MAX_TARGET_VALUE]}")
    return " ".join(parts)[:MAX_TARGET]


def describe_params(request: Message) -> str:
    """The request as JSON for the audit record, with environment values and `actor` left out."""
    fields = request.DESCRIPTOR.fields_by_name
    hide_env = "env" in fields and bool(getattr(request, "env", None))
    # `actor` is a name the caller claims and the daemon ignores (identity.acting_user):
    # the record's user says who acted, and a second, chosen name must not sit beside it.
    drop_actor = "actor" in fields and bool(getattr(request, "actor", ""))
    if hide_env or drop_actor:
        shown = type(request)()
        shown.CopyFrom(request)
        if drop_actor:
            shown.ClearField("actor")
        # A workload's environment may hold secrets; the audit log names the variables only.
        for name in list(shown.env) if hide_env else ():  # type: ignore[attr-defined]
            shown.env[name] = "(hidden)"  # type: ignore[attr-defined]
        request = shown
    return json_format.MessageToJson(request, indent=None, preserving_proto_field_name=True)[:2000]


class AuthInterceptor(grpc.ServerInterceptor):
    def __init__(self, settings: AuthSettings, audit: AuditLog) -> None:
        self._seen = SeenTeams()  # outlives reloads: who the users are does not change
        self._state = AuthState(settings, seen=self._seen)
        self._reconfiguring = threading.Lock()
        self._audit = audit
        if settings.enabled:
            log.info("auth: %s", _describe(settings))
        # Guarded handlers per method, built once: grpc's handler constructors import
        # lazily, and an import on every call (Qt's import hook in the console tests,
        # where daemon and console share a process) is cost and risk for nothing.
        self._guarded: dict[str, Any] = {}
        self._streams = OpenStreams()

    @property
    def settings(self) -> AuthSettings:
        return self._state.settings

    def jwt_teams_of(self, user: str) -> tuple[str, ...]:
        """team:NAME for the teams (groups) of the user's latest verified JWT, if any."""
        return self._seen.holders_of(user)

    def reconfigure(self, settings: AuthSettings) -> None:
        """Judge every call from now on by `settings` (users, JWKS, issuer, revocations).

        Thread-safe: the state is replaced whole in one assignment, so a call sees the
        old state or the new, never a mix. Open streams are judged again, by what they
        presented, as a new call would be: those refused now end within a second or so
        with the refusal's code and reason; the others go on. The TLS settings are not
        applied (they belong to the listening port).
        """
        state = AuthState(settings, seen=self._seen)  # built first: a call never waits for it
        with self._reconfiguring:
            self._state = state
        log.info("auth reconfigured: %s", _describe(settings))
        # After the swap: _identify reads the new state. Reloads run one at a time.
        for stream, denied in self._streams.judge(self._readmit):
            log.warning("auth: %s stream of %s from %s ended by the reload: %s",
                        stream.method, stream.user, stream.call.peer(), denied)  # fmt: skip

    def _readmit(self, stream: OpenStream) -> None:
        """Denied if a new call of the stream's method, with what it presented, would be."""
        caller = self._identify(cast(grpc.ServicerContext, stream.call))
        needed = METHOD_ROLES.get(stream.method, Role.ADMIN)
        if caller.role < needed:  # no stream needs more than viewer today; one may
            raise Denied(grpc.StatusCode.PERMISSION_DENIED,
                         f"{stream.method} needs the {needed.name.lower()} role; {caller.user} "
                         f"is {caller.role.name.lower()}", "role too low")  # fmt: skip

    def intercept_service(self, continuation: Callable[..., Any], details: Any) -> Any:
        guarded = self._guarded.get(details.method)
        if guarded is None:
            guarded = self._guard(continuation(details), details)
            if guarded is not None:  # only real methods: an attacker's names are not kept
                self._guarded[details.method] = guarded
        return guarded

    def _guard(self, handler: Any, details: Any) -> Any:
        name = method_name(details.method)
        if handler is None or is_open(details.method) or name is None:
            return handler
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._guard_unary(name, details.method, handler.unary_unary),
                handler.request_deserializer, handler.response_serializer,
            )  # fmt: skip
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._guard_stream(name, details.method, handler.unary_stream),
                handler.request_deserializer, handler.response_serializer,
            )  # fmt: skip
        return handler

    # -- guards ------------------------------------------------------------------

    def _guard_unary(self, name: str, method: str, behavior: Behavior) -> Behavior:
        def guarded(request: Any, context: grpc.ServicerContext) -> Any:
            caller = self._admit(name, method, request, context)
            token = set_current_caller(caller)
            try:
                return self._run_audited(name, method, caller, request, context, behavior)
            finally:
                reset_current_caller(token)

        return guarded

    def _guard_stream(self, name: str, method: str, behavior: Behavior) -> Behavior:
        def guarded(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            caller = self._admit(name, method, request, context)
            stream = OpenStream(context, name, caller.user, *self._expiry(caller))
            self._streams.add(stream)
            token = set_current_caller(caller)
            items: Iterator[Any] = iter(())
            try:
                # The servicer's loops see is_active() turn false once a reload ends it.
                items = behavior(
                    request, cast(grpc.ServicerContext, RevocableContext(context, stream))
                )
                for item in items:
                    if stream.ended is not None:
                        break
                    yield item
                ended = stream.ended
                if ended is not None:
                    result = f"ENDED: {ended.code.name}: {ended}"
                    self._record_denial(caller.user, context, method, request, result, ended.kind)
                    context.abort(ended.code, str(ended))
            finally:
                self._streams.discard(stream)
                getattr(items, "close", lambda: None)()  # a generator's finally runs now
                reset_current_caller(token)

        return guarded

    def _expiry(self, caller: Caller) -> tuple[float | None, str]:
        """When a new call with the caller's credential would be refused as expired, and
        the refusal's words then (those of jwt.py and AuthState)."""
        expires = caller.expires_unix_s
        if expires is None:
            return None, ""
        if caller.authenticated_by == "jwt":
            at = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(expires))
            return expires + self._state.settings.leeway_s, f"JWT expired at {at}"
        day = time.strftime("%Y-%m-%d", time.gmtime(expires))
        return expires, f"the token of {caller.user} expired on {day}"

    def _admit(self, name: str, method: str, request: Any, context: grpc.ServicerContext) -> Caller:
        caller: Caller | None = None
        try:
            caller = self._identify(context)
            needed = METHOD_ROLES.get(name, Role.ADMIN)
            if caller.role < needed:
                raise Denied(grpc.StatusCode.PERMISSION_DENIED,
                             f"{name} needs the {needed.name.lower()} role; {caller.user} is "
                             f"{caller.role.name.lower()}", "role too low")  # fmt: skip
            return caller
        except Denied as denied:
            # Identified once: a refused JWT costs one signature check, not two.
            user = caller.user if caller is not None else UNAUTHENTICATED
            result = f"DENIED: {denied.code.name}: {denied}"
            self._record_denial(user, context, method, request, result, denied.kind)
            context.abort(denied.code, str(denied))
            raise  # abort raises; this line is for the type checker

    def _record_denial(self, user: str, context: grpc.ServicerContext, method: str,
                       request: Any, result: str, kind: str) -> None:  # fmt: skip
        try:
            self._audit.record_denial(user, context.peer(), method, describe_target(request),
                                      describe_params(request), result, kind)  # fmt: skip
        except AuditError as exc:
            log.error("%s (denial of %s to %s not recorded: %s)", exc, method, user, result)

    def _run_audited(self, name: str, method: str, caller: Caller, request: Any,
                     context: grpc.ServicerContext, behavior: Behavior) -> Any:  # fmt: skip
        if name not in MUTATING:
            return behavior(request, context)
        try:
            self._audit.append(caller.user, context.peer(), method, describe_target(request),
                               describe_params(request), "attempt")  # fmt: skip
        except AuditError as exc:
            log.error("%s; refusing %s", exc, name)
            context.abort(grpc.StatusCode.UNAVAILABLE,
                          f"{exc}; {name} refused: every change must be audited")  # fmt: skip
        try:
            response = behavior(request, context)
        except BaseException:
            self._write(
                caller.user, context.peer(), method, request, self._outcome(context, "error")
            )
            raise
        self._write(caller.user, context.peer(), method, request, "OK")
        return response

    @staticmethod
    def _outcome(context: grpc.ServicerContext, fallback: str) -> str:
        code = context.code() if hasattr(context, "code") else None
        details = context.details() if hasattr(context, "details") else None
        if isinstance(details, bytes):
            details = details.decode(errors="replace")
        return f"{code.name}: {details}"[:1000] if code is not None else fallback

    def _write(self, user: str, peer: str, method: str, request: Any, result: str) -> None:
        try:
            self._audit.append(user, peer, method, describe_target(request),
                               describe_params(request), result)  # fmt: skip
        except AuditError as exc:
            log.error("%s (result of %s by %s not recorded: %s)", exc, method, user, result)

    # -- identity ----------------------------------------------------------------

    def _identify(self, context: grpc.ServicerContext) -> Caller:
        state = self._state  # one state for the whole of this call's identification
        if not state.enabled:
            return Caller(LOCAL_ADMIN.user, LOCAL_ADMIN.role, (), "none", context.peer())
        token = self._bearer(context)
        if token is not None:
            return state.caller_for_token(token, context.peer())
        certificate_user = self._certificate_user(state, context)
        if certificate_user is not None:
            return certificate_user
        raise Denied(grpc.StatusCode.UNAUTHENTICATED,
                     "no credentials: send gRPC metadata 'authorization: Bearer <token>' "
                     "(gpufleet token new, or a JWT), or a client certificate",
                     "no credentials")  # fmt: skip

    @staticmethod
    def _bearer(context: grpc.ServicerContext) -> str | None:
        for key, value in context.invocation_metadata() or ():
            if key.lower() == "authorization":
                scheme, _, token = str(value).partition(" ")
                if scheme.lower() != "bearer" or not token.strip():
                    raise Denied(grpc.StatusCode.UNAUTHENTICATED,
                                 "authorization metadata must be 'Bearer <token>'",
                                 "bad authorization metadata")  # fmt: skip
                return token.strip()
        return None

    @staticmethod
    def _certificate_user(state: AuthState, context: grpc.ServicerContext) -> Caller | None:
        auth = context.auth_context() or {}
        names = auth.get("x509_common_name") or []
        if not names:
            return None
        name = _text(names[0])
        try:
            # gRPC's CN stops at a NUL: "ada\0mallory" would pass as "ada". Read the
            # certificate itself, and refuse names no user could have typed.
            pems = auth.get("x509_pem_cert") or []
            actual = certificate_user_name(_raw(pems[0])) if pems else check_name(name)
        except BadCertificateName as exc:
            raise Denied(
                grpc.StatusCode.UNAUTHENTICATED, str(exc), "bad client certificate"
            ) from None
        if actual != name:
            raise Denied(grpc.StatusCode.UNAUTHENTICATED,
                         f"client certificate name {actual!r} does not match what the TLS "
                         f"layer reported ({name!r}): refused",
                         "bad client certificate")  # fmt: skip
        user = state.by_name.get(name)
        if user is None:
            message = f"client certificate for {name!r}, who is not a user of this node"
            raise Denied(grpc.StatusCode.PERMISSION_DENIED, message, "not a user")
        state.check_revoked(user.name)
        return Caller(user.name, user.role, user.teams, "client-certificate", context.peer())


def _describe(settings: AuthSettings) -> str:
    """Users, keys (and the kids skipped, with why) and revocations, for the log."""
    parts = [f"{len(settings.users)} static users"]
    if settings.jwks is not None:
        kids = ", ".join(k.kid or "(no kid)" for k in settings.jwks.keys)
        parts.append(f"JWKS {settings.jwks_file or settings.jwks.source} (keys {kids})")
        parts += [f"skipped key {kid or '(no kid)'}: {why}" for kid, why in settings.jwks.skipped]
    parts.append(
        f"{len(settings.revoked_jti)} revoked ids, {len(settings.revoked_users)} revoked users"
    )
    return "; ".join(parts)


def _raw(value: bytes | str) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _text(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
