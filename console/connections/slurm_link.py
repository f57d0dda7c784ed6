"""SlurmLink: the console's one way to Slurm, on a thread of its own ("gpufleet-slurm").

slurmrestd's calls block (urllib, up to 10 s), so none runs on the GUI thread:
a read of the queue and nodes runs on the link's worker and its SlurmView comes
back as a QueryResult through the inbox (the frame pump hands it to the GUI);
an action runs wherever its caller is (the manager's steps worker). The token
is fetched on first use, off the GUI thread, and fetched again once when Slurm
refuses it (a token command gives a fresh one).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

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
            view = SlurmView(read_at=datetime.now(UTC), error=str(exc))
            self._inbox.put(QueryResult(SLURM_TARGET, READ, query_id, False, str(exc), view))
            return
        view = SlurmView(tuple(jobs), {n.name: n for n in nodes}, datetime.now(UTC),
                         reservations=tuple(held))  # fmt: skip
        self._inbox.put(QueryResult(SLURM_TARGET, READ, query_id, True, "done", view))

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
                self._slurm = (SlurmRestClient(access), ScontrolWithToken(token, s.conf))
            return self._slurm

    def close(self) -> None:
        """Stop the worker (a read in flight finishes: at most its timeout)."""
        self._worker.shutdown(wait=True, cancel_futures=True)
