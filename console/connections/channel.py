"""Reconnect timing of the console's node links; channel settings are the shared client's."""

from __future__ import annotations

import random

from gpufleet.client.channel import CALL_DEADLINE_S as CALL_DEADLINE_S
from gpufleet.client.channel import CHANNEL_OPTIONS as CHANNEL_OPTIONS

# The channel options (keepalive that notices a silent node in ~3.5 s, message
# limits) and the unary deadline are the shared client's: gpufleet/client/channel.py.
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
