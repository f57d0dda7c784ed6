"""SacctPoller: keeps the usage store's Slurm jobs current from this node's sacct.

Every `interval_s` on thread 'gpufleet-sacct' it asks sacct for the jobs that ran on
this node since the previous poll (and one interval before it: a job's record can
land in slurmdbd late, and a job seen twice is replaced, not added), stores them per
(cluster, job id, step) and remembers how far it got in the store, so a restarted
daemon carries on where it stopped. A running job is billed up to the poll that saw
it; its later polls, then its end, replace it.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable

from node_daemon.tool_poller import ToolFailed, ToolPoller
from node_daemon.usage.accounted import from_sacct
from node_daemon.usage.sacct import SACCT_FORMAT, SacctError, parse_sacct_jobs
from node_daemon.usage.store import UsageStore, UsageStoreError

log = logging.getLogger(__name__)

SACCT_TIMEOUT_S = 60.0
# How far back the first poll of a new store reaches.
FIRST_LOOKBACK_S = 86400.0
# At most this much time in one poll (a daemon off for months catches up step by step).
MAX_WINDOW_S = 7 * 86400.0
POLLED_UNTIL = "sacct_polled_until"
SOURCE = "sacct poll"


def _local(unix_s: float) -> str:
    # sacct reads --starttime/--endtime as local time without a zone.
    return dt.datetime.fromtimestamp(unix_s).strftime("%Y-%m-%dT%H:%M:%S")


class SacctPoller(ToolPoller):
    """Where sacct answers, the node's jobs by account; elsewhere (no sacct, no slurmdbd)
    it says why once, and again only when the reason changes."""

    tool = "sacct"
    absent = "no sacct on PATH: Slurm's accounting not read (usage by account off)"
    answers_again = "sacct answers again: usage by account is current"
    # A node whose sacct never answered (no slurm.conf, accounting_storage/none) is not
    # degraded, it has no accounting: said at info. Failing after answering is a warning.
    failing_unanswered = failing_answered = (
        "{problem}; usage by Slurm account not updated, retrying every {interval_s:.0f} s"
    )

    def __init__(
        self,
        store: UsageStore,
        interval_s: float,
        host_name: str | None = None,
        command: str = "sacct",
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("gpufleet-sacct", interval_s, SACCT_TIMEOUT_S, host_name, command)
        self._store, self._clock = store, clock

    def start(self) -> None:
        if self._interval_s > 0:
            super().start()

    def window(self, now: float) -> tuple[float, float]:
        """[from, to) of the next poll, in Unix seconds."""
        mark = self._store.meta(POLLED_UNTIL)
        since = float(mark) - self._interval_s if mark else now - FIRST_LOOKBACK_S
        return since, min(now, since + MAX_WINDOW_S)

    def command(self, since: float, until: float) -> list[str]:
        return [
            self._program, "--parsable2", "--allusers", "--allocations",
            f"--nodelist={self.node_name}", f"--starttime={_local(since)}",
            f"--endtime={_local(until)}", f"--format={SACCT_FORMAT}",
        ]  # fmt: skip

    def poll(self) -> tuple[int, int] | None:
        """One poll: (jobs new, jobs updated), or None when it failed (said in the log)."""
        now = self._clock()
        try:
            since, until = self.window(now)
            text = self._ask(self.command(since, until))
            jobs, _ = parse_sacct_jobs(text)
            counts = self._store.put_jobs(
                [from_sacct(job, until, SOURCE, per_node=True) for job in jobs]
            )
            self._store.set_meta(POLLED_UNTIL, repr(until))
        except (ToolFailed, SacctError, UsageStoreError) as exc:
            self._say(str(exc))
            return None
        self._answered_now()
        log.debug("sacct poll %s..%s: %d new, %d updated", since, until, *counts)
        return counts
