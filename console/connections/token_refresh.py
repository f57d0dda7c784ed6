"""TokenRefresher: a fresh token from the profile's token_command, before the old one expires.

Runs on the network thread. Asked when a node refuses the token
(UNAUTHENTICATED) and when the soonest expiry a node reported (WhoAmI) comes
near: 30 minutes before it, or half-way through a shorter-lived token's
remaining life as the console saw it. The command runs in the loop's executor
(it blocks, up to its timeout), at most once a minute whatever asks; a token
that changed is handed to every link (they re-ask WhoAmI, or reconnect now if
they were refused).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from console.connections.security import BearerToken

log = logging.getLogger(__name__)

MIN_INTERVAL_S = 60.0  # the command runs at most this often
REFRESH_LEAD_S = 30 * 60.0  # refresh this long before the soonest expiry...
REFRESH_SHARE = 0.5  # ...or this share of the life left when the token was taken, if shorter


def refresh_lead_s(lifetime_s: float) -> float:
    """How long before expiry to refresh a token that had `lifetime_s` left when taken."""
    return min(REFRESH_LEAD_S, max(0.0, lifetime_s) * REFRESH_SHARE)


class TokenRefresher:
    def __init__(
        self,
        bearer: BearerToken,
        fetch: Callable[[], str],
        on_changed: Callable[[], None],
        min_interval_s: float = MIN_INTERVAL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._bearer, self._fetch, self._on_changed = bearer, fetch, on_changed
        self._min_interval_s, self._clock = min_interval_s, clock
        self._last_try = -float("inf")
        self.taken_at = clock()  # when the token held was taken: its life seen from here
        self._running: asyncio.Task[bool] | None = None
        self.last_error = ""
        # One named thread for the blocking command, never the GUI's or the loop's.
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="gpufleet-token-command")

    def close(self) -> None:
        """Let the thread go; a command still running ends by its own timeout."""
        self._executor.shutdown(wait=False, cancel_futures=True)

    def due(self, soonest_expiry_s: float | None) -> bool:
        """Is the soonest expiry (unix s) near enough to refresh now?"""
        if soonest_expiry_s is None:
            return False
        lead = refresh_lead_s(soonest_expiry_s - self.taken_at)
        return self._clock() >= soonest_expiry_s - lead

    def request(self, why: str) -> asyncio.Task[bool] | None:
        """Refresh now unless one runs or ran less than a minute ago; the task, or None."""
        if self._running is not None and not self._running.done():
            return self._running
        if self._clock() - self._last_try < self._min_interval_s:
            return None
        self._last_try = self._clock()
        self._running = asyncio.get_running_loop().create_task(
            self._refresh(why), name="token refresh"
        )
        return self._running

    async def _refresh(self, why: str) -> bool:
        log.info("fetching a fresh token with token_command (%s)", why)
        try:
            token = await asyncio.get_running_loop().run_in_executor(self._executor, self._fetch)
        except Exception as exc:  # TokenCommandError names what failed; never the token
            self.last_error = str(exc)
            log.warning("%s; the token held stays in use", exc)
            return False
        self.last_error = ""
        self.taken_at = self._clock()
        if not self._bearer.replace(token):
            log.info("token_command gave the token already held")
            return False
        log.info("token_command gave a new token: the links use it from their next call")
        self._on_changed()
        return True
