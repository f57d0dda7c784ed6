"""SlurmLink: the console's one way to Slurm, on a thread of its own ("gpufleet-slurm").

slurmrestd's calls block (each bounded: slurm_timeout_s in all, an answer of at
most slurm_max_answer_mib), so none runs on the GUI thread: a read of the queue
and nodes runs on the link's worker and its SlurmView comes back as a
QueryResult through the inbox (the frame pump hands it to the GUI); an action
runs wherever its caller is (the manager's steps worker). The token is fetched
on first use, off the GUI thread, and fetched again once when Slurm refuses it
(a token command gives a fresh one).

Every read answers: a failed one, whatever failed, is a QueryResult with the
reason in its SlurmView's error (the Slurm panel shows it), logged once for as
long as it stays the same. Nothing said or logged holds the token.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from console.connections.bounded_http import HttpLimits
from console.connections.manager import UpdateInbox
from console.connections.slurm_rest import (
    ScontrolWithToken,
    SlurmAccess,
    SlurmError,
    SlurmRestClient,
)
from console.fleet.slurm_view import SlurmView
from console.fleet.updates import QueryResult
from console.settings import SlurmProfile

log = logging.getLogger(__name__)

SLURM_TARGET = "slurm"  # the QueryResult's target: the cluster, not one node
READ = "Slurm queue"
REFUSED_TOKEN = (401, 403)
T = TypeVar("T")
Slurm = tuple[SlurmRestClient, ScontrolWithToken]


class SlurmLink:
    """Reads and acts on the profile's Slurm with the operator's token.

    Args:
        slurm: the profile's Slurm keys.
        inbox: where reads' answers go.
        token_source: the token (console/slurm_token.py), called off the GUI thread; its
            exceptions' messages say where it looked, never a token.
    """

    def __init__(
        self, slurm: SlurmProfile, inbox: UpdateInbox, token_source: Callable[[], str]
    ) -> None:
        self.settings = slurm
        self._inbox = inbox
        self._token_source = token_source
        self._lock = threading.Lock()
        self._slurm: Slurm | None = None
        self._last_failure = ""  # logged once while it stays the same
        self._worker = concurrent.futures.ThreadPoolExecutor(1, "gpufleet-slurm")

    def read(self, query_id: int) -> concurrent.futures.Future[None]:
        """Read the queue and the nodes on the worker; a QueryResult(READ) lands in the inbox."""
        return self._worker.submit(self._read, query_id)

    def _read(self, query_id: int) -> None:
        try:
            jobs, nodes, held = self.run(
                lambda rest, _: (rest.jobs(), rest.nodes(), rest.reservations())
            )
        except SlurmError as exc:
            self._failed(query_id, str(exc))
            return
        except Exception as exc:  # a bug of ours: still said, never a silently stale table
            log.exception("reading Slurm failed")
            self._failed(query_id, f"reading Slurm failed: {type(exc).__name__}: {exc}"[:500])
            return
        self._last_failure = ""
        view = SlurmView(tuple(jobs), {n.name: n for n in nodes}, datetime.now(UTC),
                         reservations=tuple(held))  # fmt: skip
        self._inbox.put(QueryResult(SLURM_TARGET, READ, query_id, True, "done", view))

    def _failed(self, query_id: int, error: str) -> None:
        if error != self._last_failure:  # every 5 s while shown: once in the log is enough
            log.warning("%s: %s", READ, error)
            self._last_failure = error
        view = SlurmView(read_at=datetime.now(UTC), error=error)
        self._inbox.put(QueryResult(SLURM_TARGET, READ, query_id, False, error, view))

    def run(self, act: Callable[[SlurmRestClient, ScontrolWithToken], T]) -> T:
        """`act` with the client and scontrol; blocking (not on the GUI thread).

        Raises:
            SlurmError: Slurm's answer, or why no token could be had.
        """
        try:
            return act(*self._clients())
        except SlurmError as exc:
            if exc.status not in REFUSED_TOKEN:
                raise
            log.info("Slurm refused the token (%s): fetching a fresh one", exc.status)
            with self._lock:
                self._slurm = None
            return act(*self._clients())

    def _clients(self) -> Slurm:
        with self._lock:
            if self._slurm is None:
                try:
                    token = self._token_source()
                except Exception as exc:  # no token: said as Slurm's failure, not a crash
                    raise SlurmError(str(exc)) from None
                s = self.settings
                access = SlurmAccess(s.url, s.user, token, s.ca_file)
                limits = HttpLimits(s.max_answer_bytes, s.timeout_s)
                self._slurm = (SlurmRestClient(access, limits),
                               ScontrolWithToken(token, s.conf))  # fmt: skip
            return self._slurm

    def close(self) -> None:
        """Stop the worker (a read in flight finishes: at most its calls' slurm_timeout_s)."""
        self._worker.shutdown(wait=True, cancel_futures=True)
