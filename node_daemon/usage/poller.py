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
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable

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


class SacctPoller:
    """Where sacct answers, the node's jobs by account; elsewhere (no sacct, no slurmdbd)
    it says why once, and again only when the reason changes."""

    def __init__(
        self,
        store: UsageStore,
        interval_s: float,
        host_name: str | None = None,
        command: str = "sacct",
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store, self._interval_s, self._command, self._clock = (
            store, interval_s, command, clock,
        )  # fmt: skip
        self.node_name = (host_name or socket.gethostname()).split(".")[0]
        self._problem: str | None = None
        # A node whose sacct never answered (no slurm.conf, accounting_storage/none) is not
        # degraded, it has no accounting: said at info. Failing after answering is a warning.
        self._answered = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpufleet-sacct", daemon=True)

    def start(self) -> None:
        if self._interval_s <= 0:
            return
        if shutil.which(self._command) is None:
            log.info("no sacct on PATH: Slurm's accounting not read (usage by account off)")
            return
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(SACCT_TIMEOUT_S + 1)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll()
            self._stop.wait(self._interval_s)

    def window(self, now: float) -> tuple[float, float]:
        """[from, to) of the next poll, in Unix seconds."""
        mark = self._store.meta(POLLED_UNTIL)
        since = float(mark) - self._interval_s if mark else now - FIRST_LOOKBACK_S
        return since, min(now, since + MAX_WINDOW_S)

    def command(self, since: float, until: float) -> list[str]:
        return [
            self._command, "--parsable2", "--allusers", "--allocations",
            f"--nodelist={self.node_name}", f"--starttime={_local(since)}",
            f"--endtime={_local(until)}", f"--format={SACCT_FORMAT}",
        ]  # fmt: skip

    def poll(self) -> tuple[int, int] | None:
        """One poll: (jobs new, jobs updated), or None when it failed (said in the log)."""
        now = self._clock()
        try:
            since, until = self.window(now)
            text = self._sacct(self.command(since, until))
            jobs, _ = parse_sacct_jobs(text)
            counts = self._store.put_jobs(
                [from_sacct(job, until, SOURCE, per_node=True) for job in jobs]
            )
            self._store.set_meta(POLLED_UNTIL, repr(until))
        except (_SacctFailed, SacctError, UsageStoreError) as exc:
            self._say(str(exc))
            return None
        if self._problem is not None:
            log.info("sacct answers again: usage by account is current")
            self._problem = None
        self._answered = True
        log.debug("sacct poll %s..%s: %d new, %d updated", since, until, *counts)
        return counts

    def _sacct(self, command: list[str]) -> str:
        try:
            result = subprocess.run(command, capture_output=True, text=True,
                                    timeout=SACCT_TIMEOUT_S, check=False)  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise _SacctFailed(f"sacct failed: {exc}") from exc
        if result.returncode != 0:
            raise _SacctFailed(f"sacct exited {result.returncode}: {result.stderr.strip()[:200]}")
        return result.stdout

    def _say(self, problem: str) -> None:
        if problem != self._problem:
            level = logging.WARNING if self._answered else logging.INFO
            log.log(level, "%s; usage by Slurm account not updated, retrying every %.0f s",
                    problem, self._interval_s)  # fmt: skip
            self._problem = problem


class _SacctFailed(Exception):
    pass
