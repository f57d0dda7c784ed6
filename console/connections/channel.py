"""gRPC channel settings shared by every node connection."""

from __future__ import annotations

import random

# Must agree with the daemon (node_daemon/server.py SERVER_OPTIONS): the daemon
# allows a ping every 1 s; we ping every 2 s and give up on a link that does not
# answer within 1.5 s, so a node that stopped answering (hung, SIGSTOPped, its
# link cut silently) is shown not connected within ~3.5 s. gRPC core (1.85)
# enforces the wait through ping_timeout_ms (default a minute: without it a
# stopped node went unnoticed ~70 s). A daemon that is only busy still answers:
# gRPC's core answers pings without the Python GIL.
CHANNEL_OPTIONS: list[tuple[str, int]] = [
    ("grpc.keepalive_time_ms", 2_000),
    ("grpc.keepalive_timeout_ms", 1_500),
    ("grpc.http2.ping_timeout_ms", 1_500),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.max_receive_message_length", 16 * 1024 * 1024),
    ("grpc.max_send_message_length", 4 * 1024 * 1024),
]
# Deadline of every unary call.
CALL_DEADLINE_S = 5.0
BACKOFF_FIRST_S = 0.25
BACKOFF_MAX_S = 2.0
# A node that refused our credentials will not change its mind in two seconds:
# retry, but slowly (so our token, once added to the node's config, is taken).
AUTH_BACKOFF_S = 30.0
# Consecutive failed attempts after which a node is shown unreachable.
UNREACHABLE_AFTER = 3


def backoff_s(attempt: int, rng: random.Random | None = None, cap_s: float | None = None) -> float:
    """Delay before reconnect attempt `attempt` (1-based): doubling, capped, ±20 % jitter."""
    base = min(cap_s or BACKOFF_MAX_S, BACKOFF_FIRST_S * 2 ** max(0, attempt - 1))
    return base * (rng or random).uniform(0.8, 1.2)
