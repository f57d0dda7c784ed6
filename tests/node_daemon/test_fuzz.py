"""Hostile input to every RPC: a clear status code, a daemon that keeps serving, and a
rejected call that changes nothing but the audit log.

Hypothesis builds each request message of gpufleet.v1.NodeService with hostile values
(empty, very long, unicode and NUL strings; zero, huge and wrapped-around integers; GPUs
that do not exist; pid 0, 1 and 2**31; reservations ending in the past or in 292 million
years; empty and huge argv and env) and sends it through the generated stub; garbage
bytes go through a bare channel, as the serialized request. One daemon serves the whole
module (simulated backend, 2 GPUs, tokens for an admin, an operator and a viewer).

`bench/fuzz_rpcs.py` drives these same generators and checks for 10,000+ requests; the
count is in docs/security.md. Daemon bugs the fuzzing found are fixed, and no outcome is
tolerated as a known bug: the tests at the end keep each fix, and the rules above would
fail the fuzzing if one came back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2, health_pb2_grpc
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpufleet.policy import METHOD_ROLES, MUTATING, Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.audit import AuditEntry, verify
from node_daemon.auth.denials import DenialLimiter
from node_daemon.auth.identity import User
from node_daemon.auth.settings import AuthSettings, TlsSettings
from node_daemon.auth.tokens import new_token, token_hash
from node_daemon.commands.backend_choice import simulated_backend
from node_daemon.listen import parse_listen_address
from node_daemon.rpc.service import SERVICE_NAME
from node_daemon.server import SERVER_OPTIONS, NodeDaemon
from tests.certs import Authority, write
from tests.conftest import FAST_CONFIG, DaemonFactory, wait_for

# Workloads run as their owners' local accounts: the tests create them.
pytestmark = pytest.mark.usefixtures("workload_accounts")

Code = grpc.StatusCode

# -- the service, its users ------------------------------------------------------------

SERVICE = pb.DESCRIPTOR.services_by_name["NodeService"]
METHODS: tuple[str, ...] = tuple(m.name for m in SERVICE.methods)
STREAMS = frozenset(m.name for m in SERVICE.methods if m.server_streaming)
REQUEST_TYPES: dict[str, type[Message]] = {
    m.name: getattr(pb, m.input_type.name) for m in SERVICE.methods
}
MAX_RECEIVE = dict(SERVER_OPTIONS)["grpc.max_receive_message_length"]

GPUS = 2
TOKENS = {name: new_token() for name in ("ada", "otto", "vera")}
USERS = (
    User("ada", Role.ADMIN, (), token_hash(TOKENS["ada"])),
    User("otto", Role.OPERATOR, ("ml",), token_hash(TOKENS["otto"])),
    User("vera", Role.VIEWER, (), token_hash(TOKENS["vera"])),
)
ROLES = {u.name: u.role for u in USERS}

# What the daemon may answer to anything. UNKNOWN is an exception that escaped a
# servicer; INTERNAL never comes (RpcGuard answers undecodable bytes); RESOURCE_EXHAUSTED
# only from gRPC itself (refused_by_grpc) or the daemon's stream admission (STREAM_REFUSED).
ALLOWED = frozenset({
    Code.OK, Code.INVALID_ARGUMENT, Code.NOT_FOUND, Code.FAILED_PRECONDITION,
    Code.PERMISSION_DENIED, Code.UNAUTHENTICATED,
})  # fmt: skip
# Beyond those, by method: a moment after the node's clock is OUT_OF_RANGE (asked again
# later, it may be answered).
ALLOWED_ALSO = {"GetStateAt": frozenset({Code.OUT_OF_RANGE})}
DECODE_FAILED = "the request is not a valid "  # how RpcGuard's answer to undecodable bytes starts
STREAM_REFUSED = "stream refused: "  # how the daemon's answer beyond max_streams starts
# A stream is read until its first message; one with nothing to send yet (events after
# the newest seq) is still waiting when this runs out: DEADLINE_EXCEEDED, and fine.
STREAM_WAIT_S = 0.2
CALL_TIMEOUT_S = 30.0

# -- hostile values ----------------------------------------------------------------------

NUL = "\x00"
U32_MAX, U64_MAX = 2**32 - 1, 2**64 - 1
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
DAY_MS = 86_400_000
# A command that cannot exist: argv[0] of every fuzzed workload is this prefix + the
# hostile text, or true/false, so no fuzzed workload runs a real program by chance.
NOWHERE = "/nonexistent/gpufleet-fuzz/"
SAFE_COMMANDS = frozenset({"true", "/bin/true", "false", "/bin/false"})

HOSTILE_TEXT = (
    "",
    " ",
    "\t\r\n",
    NUL,
    f"a{NUL}b",
    "\u202egnp.exe",
    "\ufeff",
    "é",
    "\U0001f525" * 3,
    "%s%n%x{0}{}",
    "'; DROP TABLE audit; --",
    "../../../../etc/passwd",
    "/dev/zero",
    "\r\nx-injected: 1",
    "team:",
    "team:ml",
    "ada",
    "otto",
    "vera",
    "-1",
    "9" * 40,
    "null",
    "x" * (1 << 20),
)
LONG_LENGTHS = (63, 64, 65, 127, 128, 129, 999, 1000, 1001, 4096, 4097, 70_000)
ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=24)
LONG_TEXT = st.builds(
    lambda n, c: c * n,
    st.sampled_from(LONG_LENGTHS),
    st.sampled_from(("x", "é", "\U0001f525", NUL)),
)
STRINGS = st.one_of(st.sampled_from(HOSTILE_TEXT), ANY_TEXT, LONG_TEXT)


def ints(low: int, high: int, *edges: int) -> st.SearchStrategy[int]:
    """Any integer of the range, with its edges (and the given ones) drawn often."""
    chosen = sorted({low, high, *(e for e in edges if low <= e <= high)})
    return st.one_of(st.sampled_from(chosen), st.integers(low, high))


def now_ms() -> int:
    return int(time.time() * 1000)


UINT32 = ints(0, U32_MAX, 1, 2, 255, 256, 65_535, 65_536, 2**31 - 1, 2**31, U32_MAX - 1)
UINT64 = ints(0, U64_MAX, 1, 2**32, 2**53 + 1, 2**63 - 1, 2**63)
INT64 = ints(I64_MIN, I64_MAX, I64_MIN + 1, -1, 0, 1, 2**31, 2**53 + 1)
GPU_INDEX = ints(0, U32_MAX, 1, GPUS - 1, GPUS, 7, 8, 64, 2**31)
GPU_LISTS = st.one_of(
    st.lists(GPU_INDEX, max_size=12),
    st.sampled_from(
        (
            [],
            [0],
            [1],
            [0, 0, 0],
            list(range(GPUS)),
            [GPUS],
            [U32_MAX],
            [0] * 10_000,
            list(range(20_000)),
        )
    ),
)
# The simulated GPUs list processes with pids 100000 + 1000 * gpu + (0 .. 999).
PIDS = st.one_of(
    ints(0, U32_MAX, 1, 2, os.getpid(), 32_768, 4_194_304, 2**31 - 1, 2**31),
    st.integers(100_000, 100_000 + 1000 * GPUS),
)
SILENCE_S = ints(0, U32_MAX, 1, 60, 604_799, 604_800, 604_801, 2**31)  # U32_MAX: -1 wrapped
GRACE_S = ints(0, U32_MAX, 1, 10, 299, 300, 301)
RELATIVE_MS = (-DAY_MS, -1_000, 60_000, 3_600_000, 90 * DAY_MS - 60_000, 90 * DAY_MS + 60_000)
UNTIL_MS = st.one_of(INT64, st.sampled_from(RELATIVE_MS).map(lambda d: now_ms() + d))
BOOLS = st.booleans()
HOLDERS = st.one_of(
    STRINGS, st.sampled_from(("ada", "otto", "vera", "team:ml", "team:ops", " otto ", "OTTO"))
)
DAYS = st.one_of(
    STRINGS,
    st.sampled_from(
        (
            "2024-02-29",
            "2023-02-29",
            "2024-13-01",
            "0001-01-01",
            "9999-12-31",
            "2024-1-1",
            "2024-01-01T00:00",
            "20240101",
            "\uff12\uff10\uff12\uff14-01-01",
            "-2024-01-01",
        )
    ),
)
ENUMS = ints(-(2**31), 2**31 - 1, -1, 1, 2, 3, 4, 5)


def ids(prefix: str) -> st.SearchStrategy[str]:
    """Ids of the kind the daemon hands out (some exist by now), and hostile text."""
    odd = (f"{prefix}-0", f"{prefix}--1", f"{prefix}-{U64_MAX}", f"{prefix}-1{NUL}", f" {prefix}-1")
    return st.one_of(
        STRINGS, st.integers(0, 40).map(lambda i: f"{prefix}-{i}"), st.sampled_from(odd)
    )


def defang_argv(argv: list[str]) -> list[str]:
    """Never run a real program by chance: argv[0] stays true/false or names no file."""
    if not argv:
        return argv
    head = argv[0]
    if head in SAFE_COMMANDS or not head.strip() or NUL in head or head.startswith(NOWHERE):
        return argv
    return [NOWHERE + head.replace("/", "_"), *argv[1:]]


ARG0 = st.one_of(
    st.sampled_from(("true", "/bin/true", "false", "", " ", NUL, f"true{NUL}", NOWHERE)), STRINGS
)
ARGV = st.one_of(
    st.builds(lambda head, rest: [head, *rest], ARG0, st.lists(STRINGS, max_size=4)),
    st.sampled_from(
        (
            [],
            [""],
            ["true"] * 256,
            ["true"] * 257,
            ["true", "x" * 4096],
            ["true", "x" * 4097],
            ["true", *(["x" * 4096] * 255)],
        )
    ),
).map(defang_argv)
ENV_NAMES = st.one_of(
    st.sampled_from(("A", "PATH", "LD_PRELOAD", "CUDA_VISIBLE_DEVICES", "", "A=B", NUL)), ANY_TEXT
)
ENV = st.one_of(
    st.dictionaries(ENV_NAMES, STRINGS, max_size=4),
    st.sampled_from(
        (
            {},
            {"A": "x" * 200_000},
            {f"K{i}": "v" for i in range(2_000)},
            {"LD_PRELOAD": NOWHERE + "lib.so"},
            {"PATH": ""},
            {"CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
        )
    ),
)
# Linux refuses one argv/env string longer than 128 KiB with its NUL (MAX_ARG_STRLEN), and
# all of them together beyond a quarter of the stack limit; half a MiB is a safe bound here.
EXEC_STRING_MAX = 128 * 1024
EXEC_TOTAL_MAX = 512 * 1024


def cannot_exec(argv: Sequence[str], env: dict[str, str]) -> str | None:
    """Why the kernel or Popen would refuse to start this command, if it would."""
    strings = [*argv, *env, *env.values()]
    if any(NUL in s for s in strings):
        return "NUL byte in argv or env"
    if any(not name or "=" in name for name in env):
        return "empty env name, or '=' in one"
    sizes = [len(s.encode()) + 1 for s in argv] + [
        len(k.encode()) + len(v.encode()) + 2 for k, v in env.items()
    ]
    if any(size > EXEC_STRING_MAX for size in sizes) or sum(sizes) > EXEC_TOTAL_MAX:
        return "argv and env too big for execve (E2BIG)"
    return None


REQUESTS: dict[str, st.SearchStrategy[Message]] = {
    "GetInventory": st.just(pb.GetInventoryRequest()),
    "StreamSamples": st.one_of(
        st.just(pb.StreamSamplesRequest()), st.builds(pb.StreamSamplesRequest, since_unix_ms=INT64)
    ),
    "ListAlerts": st.builds(pb.ListAlertsRequest, include_cleared=BOOLS, limit=UINT32),
    "StreamEvents": st.builds(pb.StreamEventsRequest, after_seq=UINT64),
    "ListEvents": st.builds(
        pb.ListEventsRequest,
        since_unix_ms=INT64,
        until_unix_ms=INT64,
        kinds=st.lists(ENUMS, max_size=4),
        limit=UINT32,
    ),
    "AcknowledgeAlert": st.builds(
        pb.AcknowledgeAlertRequest, alert_id=ids("a"), comment=STRINGS, actor=STRINGS
    ),
    "SilenceAlert": st.builds(
        pb.SilenceAlertRequest,
        alert_id=ids("a"),
        duration_s=SILENCE_S,
        reason=STRINGS,
        actor=STRINGS,
    ),
    "CreateSilence": st.builds(
        pb.CreateSilenceRequest,
        matchers=st.lists(
            st.builds(
                pb.SilenceMatcher,
                label=st.one_of(st.sampled_from(["node", "alertname", "gpu", "severity"]), STRINGS),
                pattern=st.one_of(st.sampled_from(["*", "gpu_*", "?", "3", "**"]), STRINGS),
            ),
            max_size=4,
        ),
        starts_unix_ms=st.one_of(st.just(0), INT64),
        ends_unix_ms=st.one_of(st.just(0), INT64),
        duration_s=SILENCE_S,
        comment=STRINGS,
        actor=STRINGS,
    ),
    "ListSilences": st.builds(pb.ListSilencesRequest, include_expired=BOOLS, limit=UINT32),
    "ExpireSilence": st.builds(pb.ExpireSilenceRequest, silence_id=ids("s"), actor=STRINGS),
    "KillProcess": st.builds(
        pb.KillProcessRequest,
        gpu_index=GPU_INDEX,
        pid=PIDS,
        start_time_unix_ms=INT64,
        grace_s=GRACE_S,
        actor=STRINGS,
    ),
    "Reserve": st.builds(
        pb.ReserveRequest,
        gpu_indices=GPU_LISTS,
        holder=HOLDERS,
        until_unix_ms=UNTIL_MS,
        reason=STRINGS,
        actor=STRINGS,
    ),
    "ReleaseReservation": st.builds(
        pb.ReleaseReservationRequest, reservation_id=ids("r"), actor=STRINGS
    ),
    "ListReservations": st.builds(pb.ListReservationsRequest, include_ended=BOOLS),
    "SubmitWorkload": st.builds(
        pb.SubmitWorkloadRequest,
        name=STRINGS,
        argv=ARGV,
        env=ENV,
        owner=HOLDERS,
        gpu_count=ints(0, U32_MAX, 1, GPUS, GPUS + 1),
        min_free_memory_bytes=UINT64,
        auto_place=BOOLS,
        actor=STRINGS,
    ),
    "AssignWorkload": st.builds(
        pb.AssignWorkloadRequest, workload_id=ids("w"), gpu_indices=GPU_LISTS, actor=STRINGS
    ),
    "CancelWorkload": st.builds(pb.CancelWorkloadRequest, workload_id=ids("w"), actor=STRINGS),
    "ListWorkloads": st.builds(pb.ListWorkloadsRequest, include_ended=BOOLS),
    "GetWorkloadOutput": st.builds(
        pb.GetWorkloadOutputRequest, workload_id=ids("w"), tail_bytes=UINT32
    ),
    "WhoAmI": st.just(pb.WhoAmIRequest()),
    "QueryAudit": st.builds(
        pb.QueryAuditRequest,
        from_unix_ms=INT64,
        to_unix_ms=INT64,
        user=STRINGS,
        method=STRINGS,
        limit=UINT32,
    ),
    "QueryUsage": st.builds(pb.QueryUsageRequest, from_day=DAYS, to_day=DAYS, group_by=ENUMS),
    "GetHealth": st.just(pb.GetHealthRequest()),
    "DrainGpu": st.builds(pb.DrainGpuRequest, gpu_index=GPU_INDEX, drain=BOOLS, reason=STRINGS),
    "ClearGpuHealth": st.builds(pb.ClearGpuHealthRequest, gpu_index=GPU_INDEX, reason=STRINGS),
    "QueryHistory": st.builds(
        pb.QueryHistoryRequest,
        start_unix_ms=INT64,
        end_unix_ms=INT64,
        metrics=st.lists(
            st.one_of(st.sampled_from(["temp_gpu_c", "power_w"]), STRINGS), max_size=4
        ),
        gpu_indices=st.lists(GPU_INDEX, max_size=4),
        max_points=UINT32,
    ),
    "GetStateAt": st.builds(pb.GetStateAtRequest, at_unix_ms=INT64),
    "RecordExternalAction": st.builds(
        pb.RecordExternalActionRequest,
        system=st.one_of(st.just("slurm"), STRINGS),
        action=st.one_of(st.just("drain"), STRINGS),
        target=STRINGS,
        params=st.one_of(st.just("{}"), STRINGS),
        result=STRINGS,
    ),
}

# Bytes that are not a request, or not quite: protobuf's own ways to be malformed.
GARBAGE = (
    b"\xff" * 16,  # field 31, wire type 7: no such wire type
    b"\x00",  # field number 0
    b"\x08",  # a tag and no value
    b"\x08" + b"\xff" * 10 + b"\x01",  # varint longer than 10 bytes
    b"\x0a\x05abc",  # length 5, 3 bytes follow
    b"\x0a\xff\xff\xff\xff\x0f",  # length 4 GiB
    b"\x0a\x02\xc3\x28",  # field 1 as a string: invalid UTF-8
    b"\x12\x03\xed\xa0\x80",  # field 2: an encoded surrogate (invalid UTF-8)
    b"\x0c",  # end-group with no group
    b"\x0b" * 200 + b"\x0c" * 200,  # groups nested 200 deep
    b"\x0b" * 5000,  # groups opened, never closed
    b"\x0d\x01\x02",  # fixed32 cut short
)


def mutated(payload: bytes, where: int, junk: bytes, how: int) -> bytes:
    """A valid request cut short, with bytes inserted, or with junk after it."""
    cut = where % (len(payload) + 1)
    if how == 0:
        return payload[:cut]
    if how == 1:
        return payload[:cut] + junk + payload[cut:]
    return payload + junk


def raw_payloads(method: str) -> st.SearchStrategy[bytes]:
    serialized = REQUESTS[method].map(lambda m: m.SerializeToString())
    return st.one_of(
        st.binary(max_size=64),
        st.sampled_from(GARBAGE),
        st.builds(
            mutated,
            serialized,
            st.integers(0, 1 << 16),
            st.binary(min_size=1, max_size=8),
            st.integers(0, 2),
        ),
    )


def parse(method: str, payload: bytes) -> Message | None:
    """The request the daemon will see, or None where it cannot decode the bytes."""
    try:
        return REQUEST_TYPES[method].FromString(payload)
    except Exception:  # DecodeError, mostly; whatever it is, gRPC's parse fails alike
        return None


def safe_to_send(method: str, request: Message | None) -> bool:
    """Raw bytes decode to anything: keep them from starting a real program."""
    if method != "SubmitWorkload" or request is None:
        return True
    assert isinstance(request, pb.SubmitWorkloadRequest)
    return list(request.argv) == defang_argv(list(request.argv))


BEARERS = st.one_of(
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=80),
    st.sampled_from(
        (
            "Bearer",
            "Bearer ",
            "Bearer  ",
            "bearer",
            "Basic YWRhOmFkYQ==",
            "Token x",
            "Bearer gft_",
            "Bearer " + "A" * 8000,
            "Bearer null",
        )
    ),
    st.text(
        st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
        min_size=43,
        max_size=43,
    ).map(lambda t: f"Bearer gft_{t}"),  # forged tokens
)


# -- calling, and judging what came back ---------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    code: grpc.StatusCode
    details: str


@dataclass(frozen=True)
class Snapshot:
    journal_seq: int
    audit_seq: int
    reservations: frozenset[str]
    workloads: frozenset[str]


def refused_by_grpc(outcome: Outcome) -> bool:
    """Refused by gRPC itself, before any code of the daemon ran: a message over the
    size limit, or request metadata over the server's 8 KiB soft limit (an 8 KB bearer
    token). Not "Concurrent RPC limit exceeded!": one fuzzer sends one call at a time
    and a cancelled stream ends at once, so every worker busy would be a daemon bug."""
    details = outcome.details
    return outcome.code == Code.RESOURCE_EXHAUSTED and (
        "larger than max" in details or details.startswith("received metadata size exceeds")
    )


class ErrorLog(logging.Handler):
    """ERROR records of the daemon's loggers (a failing sweep, an unwritable log)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def bearer(user: str) -> tuple[tuple[str, str], ...]:
    return (("authorization", f"Bearer {TOKENS[user]}"),)


def _same(payload: bytes) -> bytes:
    return payload


class FuzzTarget:
    """A daemon under fuzzing and one client of it: sends, then checks every rule."""

    def __init__(self, daemon: NodeDaemon) -> None:
        self.daemon = daemon
        self.channel = grpc.insecure_channel(
            str(daemon.address), options=[("grpc.max_receive_message_length", -1)]
        )
        self.stub = pb_grpc.NodeServiceStub(self.channel)
        self._raw: dict[str, Callable[..., Any]] = {}
        self.biggest_audit_record = 0
        self.denied_kinds: set[tuple[str, str, str]] = set()
        self.errors = ErrorLog()
        logging.getLogger("node_daemon").addHandler(self.errors)

    def close(self) -> None:
        logging.getLogger("node_daemon").removeHandler(self.errors)
        self.channel.close()

    # -- sending -------------------------------------------------------------------

    def call(self, method: str, request: Message, metadata: Sequence[tuple[str, str]],
             stream_wait_s: float = STREAM_WAIT_S) -> Outcome:  # fmt: skip
        return self._invoke(method, getattr(self.stub, method), request, metadata, stream_wait_s)

    def call_raw(self, method: str, payload: bytes, metadata: Sequence[tuple[str, str]],
                 stream_wait_s: float = STREAM_WAIT_S) -> Outcome:  # fmt: skip
        if method not in self._raw:
            path = f"/{SERVICE_NAME}/{method}"
            kind = self.channel.unary_stream if method in STREAMS else self.channel.unary_unary
            self._raw[method] = kind(path, request_serializer=_same, response_deserializer=_same)
        return self._invoke(method, self._raw[method], payload, metadata, stream_wait_s)

    @staticmethod
    def _invoke(method: str, stub: Callable[..., Any], request: Any,
                metadata: Sequence[tuple[str, str]], stream_wait_s: float) -> Outcome:  # fmt: skip
        try:
            if method in STREAMS:
                stream = stub(request, timeout=stream_wait_s, metadata=metadata)
                for _ in stream:
                    stream.cancel()  # one message shows the stream works
                    break
            else:
                stub(request, timeout=CALL_TIMEOUT_S, metadata=metadata)
        except grpc.RpcError as exc:
            if exc.code() != Code.CANCELLED:
                return Outcome(exc.code(), exc.details() or "")
        return Outcome(Code.OK, "")

    # -- judging -------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        latest = self.daemon.audit.query(limit=1)
        return Snapshot(
            self.daemon.journal.last_seq,
            latest[0].seq if latest else 0,
            frozenset(r.id for r in self.daemon.reservations.active()),
            frozenset(w.id for w in self.daemon.workloads.workloads(include_ended=False)),
        )

    def check(self, method: str, request: Message | None, outcome: Outcome, before: Snapshot,
              user: str | None) -> None:  # fmt: skip
        """Raise AssertionError where the outcome breaks a rule.

        request None: the bytes sent do not decode. user None: no valid credentials.
        """
        code, details = outcome.code, outcome.details
        refused = refused_by_grpc(outcome)
        if request is None:
            undecodable = code == Code.INVALID_ARGUMENT and details.startswith(DECODE_FAILED)
            assert undecodable or refused, outcome
        elif not refused:
            allowed = ALLOWED | ({Code.DEADLINE_EXCEEDED} if method in STREAMS else set())
            allowed |= ALLOWED_ALSO.get(method, frozenset())
            admission = method in STREAMS and details.startswith(STREAM_REFUSED)
            assert code in allowed or (code == Code.RESOURCE_EXHAUSTED and admission), (
                f"{method} answered {code.name}: {details}"
            )
        if code != Code.OK:
            assert details.strip(), f"{method}: {code.name} without details"
            self._assert_nothing_changed(method, before)
        elif method == "SubmitWorkload":
            assert isinstance(request, pb.SubmitWorkloadRequest)
            why = cannot_exec(request.argv, dict(request.env))
            assert why is None, f"SubmitWorkload accepted a command the kernel refuses: {why}"
        self._assert_audited(method, request, outcome, before, user, refused)

    def _assert_nothing_changed(self, method: str, before: Snapshot) -> None:
        # The daemon's own events (alerts, a workload ending) carry no actor; any event
        # with one since `before` was made by this call.
        made = [e for e in self.daemon.journal.events_after(before.journal_seq) if e.actor]
        assert not made, f"rejected {method} journaled {made[0].summary!r}"
        now = self.snapshot()
        assert now.reservations <= before.reservations, f"rejected {method} reserved GPUs"
        assert now.workloads <= before.workloads, f"rejected {method} queued a workload"

    def _assert_audited(self, method: str, request: Message | None, outcome: Outcome,
                        before: Snapshot, user: str | None, framework: bool) -> None:  # fmt: skip
        records = self._audit_after(before.audit_seq)
        self.biggest_audit_record = max(
            [self.biggest_audit_record, *(len(r.target) + len(r.params) for r in records)]
        )
        results = [r.result for r in records]
        code = outcome.code
        if request is None or framework:  # refused by gRPC before any of our code ran
            assert results == [], results
        elif user is None:
            assert code == Code.UNAUTHENTICATED, outcome
            self._assert_denial_audited(method, outcome, records, "(unauthenticated)")
        elif ROLES[user] < METHOD_ROLES[method]:
            assert code == Code.PERMISSION_DENIED, outcome
            self._assert_denial_audited(method, outcome, records, user)
        elif method in MUTATING:
            expected = "OK" if code == Code.OK else f"{code.name}: "
            assert len(results) == 2 and results[0] == "attempt", results
            assert results[1].startswith(expected), (outcome, results)
            assert {r.user for r in records} == {user}
        elif method == "RecordExternalAction":
            # Its one record is the action taken elsewhere, by the caller; a refused
            # request writes none.
            if code == Code.OK:
                assert isinstance(request, pb.RecordExternalActionRequest)
                assert results == [request.result], results
                assert [r.user for r in records] == [user]
            else:
                assert results == [], (outcome, results)
        else:
            assert results == [], f"a read ({method}) was audited: {results}"

    def _assert_denial_audited(
        self, method: str, outcome: Outcome, records: list[AuditEntry], user: str
    ) -> None:
        """The first denial of a kind (peer, user, method, reason) is one DENIED record;
        a repeat is counted into a summary instead (one may be full again once the
        kind's interval has passed without repeats, so a repeat allows 0 or 1)."""
        result = f"DENIED: {outcome.code.name}: {outcome.details}"
        kind = (user, f"/{SERVICE_NAME}/{method}", result)
        full = [r for r in records if r.result == result]
        assert len(full) == len(records), [r.result for r in records]
        assert len(full) <= 1 if kind in self.denied_kinds else len(full) == 1, (kind, records)
        assert all(r.user == user for r in full), full
        self.denied_kinds.add(kind)

    def _audit_after(self, seq: int) -> list[AuditEntry]:
        # Summaries of repeated denials are written when their interval ends, whichever
        # call comes then: they belong to no call in particular.
        return sorted((e for e in self.daemon.audit.query(limit=50)
                       if e.seq > seq and not e.params.startswith('{"repeats"')),
                      key=lambda e: e.seq)  # fmt: skip

    # -- one request, start to finish --------------------------------------------------

    def typed(self, method: str, request: Message, user: str) -> Outcome:
        before = self.snapshot()
        outcome = self.call(method, request, bearer(user))
        self.check(method, request, outcome, before, user)
        return outcome

    def raw(self, method: str, payload: bytes, user: str,
            stream_wait_s: float = STREAM_WAIT_S) -> Outcome:  # fmt: skip
        before = self.snapshot()
        outcome = self.call_raw(method, payload, bearer(user), stream_wait_s)
        self.check(method, parse(method, payload), outcome, before, user)
        return outcome

    def credentials(self, method: str, request: Message, authorization: str) -> Outcome:
        before = self.snapshot()
        # Refused before any message: streams too end at once, so a short deadline
        # would only measure how busy the machine is.
        metadata = (("authorization", authorization),)
        outcome = self.call(method, request, metadata, stream_wait_s=CALL_TIMEOUT_S)
        assert outcome.code == Code.UNAUTHENTICATED or refused_by_grpc(outcome), (
            authorization[:60],
            outcome,
        )
        self.check(method, request, outcome, before, None)
        return outcome

    # -- after a run ---------------------------------------------------------------

    def assert_serving(self) -> None:
        """Inventory, health SERVING, the sampler still sweeping, no errors logged, and
        an intact audit chain."""
        inventory = self.stub.GetInventory(
            pb.GetInventoryRequest(), timeout=5, metadata=bearer("vera")
        )
        assert len(inventory.gpus) == GPUS
        health = health_pb2_grpc.HealthStub(self.channel)
        for name in ("", SERVICE_NAME):
            reply = health.Check(health_pb2.HealthCheckRequest(service=name), timeout=5)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING
        tick = self.daemon.history.latest_tick()
        wait_for(lambda: self.daemon.history.latest_tick() > tick + 1, what="two more sweeps")
        assert not self.errors.records, [r.getMessage() for r in self.errors.records]
        assert verify(self.daemon.audit.path) == []


def start_fuzz_daemon(state_dir: Path, **overrides: Any) -> NodeDaemon:
    config = replace(FAST_CONFIG, gpus=GPUS, state_dir=state_dir, auth=AuthSettings(USERS),
                     **overrides)  # fmt: skip
    # Every first denial of a kind must be written in full here: the module sends more
    # kinds of unauthenticated call in one interval than the daemon's bound on them
    # writes (that bound has tests of its own: test_auth_hostile.py). The bound each
    # authenticated user has is the daemon's own.
    denials = DenialLimiter(max_records=1000)
    address = parse_listen_address(config.listen)
    daemon = NodeDaemon(config, simulated_backend(config), address, denials=denials)
    daemon.start()
    wait_for(lambda: daemon.sampler.latest is not None, what="the first sweep")
    return daemon


# -- fixtures: one daemon for the module --------------------------------------------------

FUZZ = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
        HealthCheck.filter_too_much,
    ],
)


@pytest.fixture(scope="module")
def fuzz(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FuzzTarget]:
    daemon = start_fuzz_daemon(tmp_path_factory.mktemp("fuzz-state"))
    target = FuzzTarget(daemon)
    yield target
    target.close()
    daemon.stop(grace_s=0.5)
    # The module's daemon lives across tests; its threads must still end with it.
    wait_for(lambda: not [t for t in _threads() if t.startswith("gpufleet-")],
             what="the fuzzed daemon's threads to end")  # fmt: skip


def _threads() -> list[str]:
    return [t.name for t in threading.enumerate()]


@pytest.fixture
def target(fuzz: FuzzTarget) -> FuzzTarget:
    """The module's daemon; errors logged before this test (another daemon's) forgotten."""
    fuzz.errors.records.clear()
    return fuzz


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Replaces tests/conftest.py's per-test check: the module's daemon keeps its RPC
    threads from test to test; `fuzz` checks that they end with it."""
    yield


# -- the tests ------------------------------------------------------------------------------


def test_every_rpc_is_fuzzed() -> None:
    assert set(REQUESTS) == set(METHODS) == set(METHOD_ROLES)


@pytest.mark.parametrize("method", METHODS)
def test_hostile_requests_as_admin(target: FuzzTarget, method: str) -> None:
    """Past every role check: each request reaches the servicer's validation."""

    @FUZZ
    @given(request=REQUESTS[method])
    def run(request: Message) -> None:
        target.typed(method, request, "ada")

    run()
    target.assert_serving()


@pytest.mark.parametrize("user", ["otto", "vera"])
@pytest.mark.parametrize("method", METHODS)
def test_hostile_requests_as_operator_and_viewer(
    target: FuzzTarget, method: str, user: str
) -> None:
    """Ownership checks (operator) and role checks (viewer) come before anything else."""

    @settings(FUZZ, max_examples=8)
    @given(request=REQUESTS[method])
    def run(request: Message) -> None:
        target.typed(method, request, user)

    run()
    target.assert_serving()


@pytest.mark.parametrize("method", METHODS)
def test_raw_bytes(target: FuzzTarget, method: str) -> None:
    """Garbage as the serialized request: the daemon's RpcGuard says INVALID_ARGUMENT before
    any other code of ours runs; bytes that happen to decode are a request like any other."""

    @settings(FUZZ, max_examples=15)
    @given(payload=raw_payloads(method))
    def run(payload: bytes) -> None:
        assume(safe_to_send(method, parse(method, payload)))
        target.raw(method, payload, "ada")

    run()
    target.assert_serving()


@pytest.mark.parametrize("method", METHODS)
def test_oversized_messages_are_refused_before_they_reach_the_daemon(
    target: FuzzTarget, method: str
) -> None:
    # One unknown length-delimited field (number 1000): ignored, were it smaller.
    def payload(size: int) -> bytes:
        body = size - 2 - len(_varint(size))
        return b"\xc2\x3e" + _varint(body) + b"x" * body

    # Four MiB take longer to send than a fuzzed stream is given.
    outcome = target.raw(method, payload(MAX_RECEIVE + 64), "ada", stream_wait_s=CALL_TIMEOUT_S)
    assert outcome.code == Code.RESOURCE_EXHAUSTED, outcome
    assert "larger than max" in outcome.details
    if method in ("GetInventory", "WhoAmI", "ListWorkloads", "ListReservations"):
        outcome = target.raw(method, payload(MAX_RECEIVE - 64), "ada")
        assert outcome.code == Code.OK, outcome  # the limit is the limit, not less
    target.assert_serving()


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def test_an_oversized_typed_request(target: FuzzTarget) -> None:
    huge = pb.SubmitWorkloadRequest(argv=["true", "x" * MAX_RECEIVE], gpu_count=1)
    outcome = target.typed("SubmitWorkload", huge, "ada")
    assert outcome.code == Code.RESOURCE_EXHAUSTED


def test_hostile_credentials(target: FuzzTarget) -> None:
    """Whatever the authorization metadata says, without a known token: UNAUTHENTICATED,
    one audit line, nothing else."""

    @settings(FUZZ, max_examples=40)
    @given(method=st.sampled_from(METHODS), authorization=BEARERS, data=st.data())
    def run(method: str, authorization: str, data: st.DataObject) -> None:
        request = data.draw(REQUESTS[method])
        target.credentials(method, request, authorization)

    run()
    target.assert_serving()


def test_client_certificates_identify_only_under_mutual_tls(
    start_daemon: DaemonFactory, tmp_path: Path
) -> None:
    """require_client_cert = false: a certificate (even one for an admin's name, from
    another CA) is not asked for and identifies nobody. true: the CN must be a user."""
    ca, stranger = Authority(), Authority("someone else's CA")
    cert, key = write(tmp_path, "server", ca.issue("localhost", server=True))
    (tmp_path / "ca.crt").write_bytes(ca.pem)

    def who(require: bool, client: Any) -> Outcome:
        tls = TlsSettings(cert, key, tmp_path / "ca.crt", require_client_cert=require)
        daemon = start_daemon(gpus=1, auth=AuthSettings(USERS, tls))
        creds = grpc.ssl_channel_credentials(ca.pem, client.key, client.cert)
        with grpc.secure_channel(f"localhost:{daemon.port}", creds) as channel:
            try:
                reply = pb_grpc.NodeServiceStub(channel).WhoAmI(pb.WhoAmIRequest(), timeout=5)
            except grpc.RpcError as exc:
                return Outcome(exc.code(), exc.details() or "")
        return Outcome(Code.OK, f"{reply.user} {reply.authenticated_by}")

    assert who(False, stranger.issue("ada")).code == Code.UNAUTHENTICATED
    assert who(False, ca.issue("ada")).code == Code.UNAUTHENTICATED
    assert who(True, ca.issue("ada")) == Outcome(Code.OK, "ada client-certificate")
    refused = who(True, ca.issue("mallory"))
    assert refused.code == Code.PERMISSION_DENIED and "mallory" in refused.details


# -- daemon bugs the fuzzing found, fixed: these keep them fixed ------------------------

UNSTARTABLE = {
    "nul-in-argv": (
        pb.SubmitWorkloadRequest(argv=["true", f"a{NUL}b"], gpu_count=1),
        "argv and env may not contain NUL characters",
    ),
    "bad-env-name": (
        pb.SubmitWorkloadRequest(argv=["true"], env={"A=B": "1"}, gpu_count=1),
        "environment names must be non-empty and contain no '='",
    ),
    "env-too-big": (
        pb.SubmitWorkloadRequest(argv=["true"], env={"A": "x" * 200_000}, gpu_count=1),
        "env entry 'A': A=VALUE is 200003 bytes with its NUL; the kernel passes at most "
        "131072 (MAX_ARG_STRLEN) to a program",
    ),
    "auto-placed": (
        pb.SubmitWorkloadRequest(argv=["true", NUL], gpu_count=1, auto_place=True),
        "argv and env may not contain NUL characters",
    ),
}


@pytest.mark.parametrize("case", sorted(UNSTARTABLE))
def test_a_command_the_kernel_would_refuse_is_refused_at_submit(
    start_daemon: DaemonFactory, case: str
) -> None:
    daemon = start_fuzz_daemon_via(start_daemon)
    target = FuzzTarget(daemon)
    request, reason = UNSTARTABLE[case]
    try:
        submitted = target.typed("SubmitWorkload", request, "ada")
        assert submitted == Outcome(Code.INVALID_ARGUMENT, reason)
    finally:
        target.close()


def test_a_workload_whose_command_is_missing_fails_and_the_rules_keep_running(
    start_daemon: DaemonFactory,
) -> None:
    """No check at submit can know the command is missing: the launch fails, the
    workload is FAILED with the shell's 127, and every after-sweep step goes on."""
    daemon = start_fuzz_daemon_via(start_daemon)
    target = FuzzTarget(daemon)
    try:
        missing = pb.SubmitWorkloadRequest(argv=[NOWHERE + "missing"], gpu_count=1,
                                           auto_place=True)  # fmt: skip
        assert target.typed("SubmitWorkload", missing, "ada") == Outcome(Code.OK, "")
        listing = pb.ListWorkloadsRequest(include_ended=True)

        def listed() -> list[pb.Workload]:
            reply = target.stub.ListWorkloads(listing, timeout=5, metadata=bearer("ada"))
            return list(reply.workloads)

        # Placed on the next sweep, and maybe failed before this looks: ended ones too.
        (queued,) = listed()
        running = (pb.WORKLOAD_STATE_QUEUED, pb.WORKLOAD_STATE_RUNNING)
        wait_for(lambda: listed()[0].state not in running, what=f"{queued.id} to end")
        (failed,) = listed()
        assert (failed.id, failed.state, failed.exit_code) == (
            queued.id, pb.WORKLOAD_STATE_FAILED, 127
        ), failed  # fmt: skip
        output = target.stub.GetWorkloadOutput(
            pb.GetWorkloadOutputRequest(workload_id=failed.id), timeout=5, metadata=bearer("ada")
        ).output.decode()
        assert output == f"gpufleet: cannot start {NOWHERE}missing: No such file or directory\n"
        evaluated: list[int] = []
        evaluate = daemon.alerts.evaluate

        def counted(*args: Any) -> Any:
            evaluated.append(1)
            return evaluate(*args)

        daemon.alerts.evaluate = counted  # type: ignore[method-assign,assignment]
        tick = daemon.history.latest_tick()
        wait_for(lambda: daemon.history.latest_tick() > tick + 3, what="three sweeps")
        # Sweeps tick+1 .. tick+3 ran all their after-sweep steps before tick+4 was kept.
        assert len(evaluated) >= 3, f"the alert rules ran {len(evaluated)} times in 3 sweeps"
        assert not target.errors.records, target.errors.records[0].getMessage()
    finally:
        target.close()


@pytest.mark.parametrize("after_seq", [2**63, U64_MAX])
def test_stream_events_after_a_seq_beyond_sqlite(
    start_daemon: DaemonFactory, after_seq: int
) -> None:
    daemon = start_fuzz_daemon_via(start_daemon)
    with grpc.insecure_channel(str(daemon.address)) as channel:
        stream = pb_grpc.NodeServiceStub(channel).StreamEvents(
            pb.StreamEventsRequest(after_seq=after_seq), timeout=10, metadata=bearer("vera")
        )
        with pytest.raises(grpc.RpcError) as info:
            next(stream)
    assert info.value.code() == Code.INVALID_ARGUMENT, info.value.details()
    assert info.value.details() == "after_seq must be below 2**63"


def test_a_refused_call_writes_a_small_audit_record(start_daemon: DaemonFactory) -> None:
    daemon = start_fuzz_daemon_via(start_daemon)
    target = FuzzTarget(daemon)
    try:
        request = pb.ReserveRequest(gpu_indices=list(range(50_000)), holder="x" * 3_000_000)
        target.credentials("Reserve", request, "Bearer gft_forged")
        assert target.biggest_audit_record <= 8192, target.biggest_audit_record
    finally:
        target.close()


LONG_ID = "\u00e9" * 4096  # 8 KiB of UTF-8: 24 KiB once percent-encoded in grpc-message
WIDE_ID = "\U0001f525" * 4096  # 4 bytes a character: 12 bytes once percent-encoded
# Each RPC that quotes a request field in its error: the request, its code, how it starts.
ECHOES: dict[str, tuple[Callable[[str], Message], grpc.StatusCode, str]] = {
    "ReleaseReservation": (lambda i: pb.ReleaseReservationRequest(reservation_id=i),
                           Code.NOT_FOUND, "no active reservation "),
    "CancelWorkload": (lambda i: pb.CancelWorkloadRequest(workload_id=i), Code.NOT_FOUND,
                       "no workload "),
    "AssignWorkload": (lambda i: pb.AssignWorkloadRequest(workload_id=i, gpu_indices=[0]),
                       Code.NOT_FOUND, "no workload "),
    "GetWorkloadOutput": (lambda i: pb.GetWorkloadOutputRequest(workload_id=i),
                          Code.NOT_FOUND, "no workload "),
    "QueryUsage": (lambda i: pb.QueryUsageRequest(from_day=i), Code.INVALID_ARGUMENT,
                   "from_day must be a day like 2024-05-31 (UTC), got '"),
}  # fmt: skip
# The client's soft limit on the metadata of an answer, less its other headers.
CLIENT_METADATA_SOFT_LIMIT = 8192
OTHER_HEADERS = 200


def echo_error(daemon: NodeDaemon, method: str, text: str, **options: int) -> grpc.RpcError:
    make, _, _ = ECHOES[method]
    with (
        grpc.insecure_channel(str(daemon.address), options=list(options.items())) as channel,
        pytest.raises(grpc.RpcError) as info,
    ):
        getattr(pb_grpc.NodeServiceStub(channel), method)(
            make(text), timeout=5, metadata=bearer("ada")
        )
    return info.value


def percent_encoded_size(message: str) -> int:
    """Bytes of grpc-message on the wire: printable ASCII but % as is, the rest as %XX."""
    return sum(1 if 0x20 <= b <= 0x7E and b != 0x25 else 3 for b in message.encode())


@pytest.mark.parametrize("method", sorted(ECHOES))
def test_error_details_stay_short(start_daemon: DaemonFactory, method: str) -> None:
    error = echo_error(start_fuzz_daemon_via(start_daemon), method, LONG_ID)
    # The daemon's own answer, cut short: not the client's RESOURCE_EXHAUSTED for a
    # grpc-message over its metadata limit.
    _, code, start = ECHOES[method]
    details = error.details()
    assert (error.code(), details[: len(start) + 3]) == (code, start + LONG_ID[:3]), details
    assert len(details) <= 1024


@pytest.mark.parametrize("method", sorted(ECHOES))
def test_error_details_fit_the_clients_metadata_limit(
    start_daemon: DaemonFactory, method: str
) -> None:
    # A client that takes any size, so that the daemon's message is always seen whole.
    error = echo_error(start_fuzz_daemon_via(start_daemon), method, WIDE_ID,
                       **{"grpc.max_metadata_size": 1 << 20,
                          "grpc.absolute_max_metadata_size": 1 << 20})  # fmt: skip
    _, code, start = ECHOES[method]
    details = error.details()
    assert (error.code(), details[: len(start)]) == (code, start), details[:200]
    size = percent_encoded_size(details)
    assert size <= CLIENT_METADATA_SOFT_LIMIT - OTHER_HEADERS, f"{size} bytes of grpc-message"


def start_fuzz_daemon_via(start_daemon: DaemonFactory) -> NodeDaemon:
    daemon = start_daemon(gpus=GPUS, auth=AuthSettings(USERS))
    wait_for(lambda: daemon.sampler.latest is not None, what="the first sweep")
    return daemon
