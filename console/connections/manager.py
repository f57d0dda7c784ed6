"""ConnectionManager: one network thread running asyncio for every node's link.

One thread with grpc.aio serves hundreds of channels without a thread per node.
Updates land in a thread-safe inbox that the GUI drains once per frame.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import grpc.aio

from console.connections.channel import CALL_DEADLINE_S
from console.connections.heartbeat import NetHeartbeat
from console.connections.node_link import ActionCall, NodeLink, QueryDecoder
from console.connections.security import LinkSecurity
from console.connections.token_refresh import MIN_INTERVAL_S, TokenRefresher
from console.connections.workload_move import Call, StepFailed
from console.fleet.updates import (
    CommandResult,
    IdentityUpdate,
    LinkState,
    LinkUpdate,
    QueryResult,
    Update,
)

log = logging.getLogger(__name__)

EXPIRY_CHECK_S = 5.0  # how often the soonest expiry is compared with the refresh lead


class FetchError(Exception):
    """A fetch (ConnectionManager.fetch) failed in a way its message says to the user."""


class UpdateInbox:
    """Thread-safe hand-over of updates from the network thread to the GUI thread."""

    def __init__(self) -> None:
        self._queue: collections.deque[Update] = collections.deque()

    def put(self, update: Update) -> None:
        self._queue.append(update)  # deque.append is atomic

    def drain(self, limit: int | None = None) -> list[Update]:
        """Take up to `limit` updates (all if None), oldest first."""
        count = len(self._queue) if limit is None else min(limit, len(self._queue))
        return [self._queue.popleft() for _ in range(count)]

    def __len__(self) -> int:
        return len(self._queue)


class ConnectionManager:
    """Owns the 'gpufleet-net' thread and a NodeLink per target."""

    def __init__(
        self,
        inbox: UpdateInbox,
        security: LinkSecurity | None = None,
        refresh_interval_s: float = MIN_INTERVAL_S,
    ) -> None:
        self._inbox = inbox
        self._security = security or LinkSecurity()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._links: dict[str, NodeLink] = {}
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpufleet-net", daemon=True)
        # Whether this thread could listen: a stall of ours is not the nodes' silence.
        self.heartbeat = NetHeartbeat()
        # Actions of several blocking steps (a workload move between nodes) wait here,
        # each of their calls handed to the network thread.
        self._steps = concurrent.futures.ThreadPoolExecutor(1, "gpufleet-steps")
        # token_command profiles: a fresh token before expiry and after a refusal.
        self._expiries: dict[str, int] = {}  # target -> its credential's expiry (unix ms)
        self.refresher: TokenRefresher | None = None
        if self._security.bearer is not None and self._security.refresh is not None:
            self.refresher = TokenRefresher(
                self._security.bearer,
                self._security.refresh,
                self._on_token_changed,
                refresh_interval_s,
            )

    @property
    def refreshes_token(self) -> bool:
        """Does the console fetch fresh tokens itself (token_command)?"""
        return self.refresher is not None

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._loop.create_task(self.heartbeat.run(), name="network heartbeat")
        if self.refresher is not None:
            self._loop.create_task(self._watch_expiry(), name="token expiry watch")
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def connect(self, target: str) -> None:
        """Start watching `target` (HOST:PORT). Safe to call from any thread."""
        assert self._loop is not None, "start() first"
        self._loop.call_soon_threadsafe(self._start_link, target)

    def _start_link(self, target: str) -> None:
        if target not in self._tasks:
            link = NodeLink(target, self._put, security=self._security)
            self._links[target] = link
            self._tasks[target] = self._loop.create_task(link.run(), name=f"link {target}")  # type: ignore[union-attr]

    # -- token refresh (network thread) ---------------------------------------

    def _put(self, update: Update) -> None:
        """Every link's updates, on their way to the GUI: note expiries and refusals."""
        if self.refresher is not None:
            if isinstance(update, IdentityUpdate):
                expires = update.identity.expires_unix_ms if update.identity else None
                if expires is None:
                    self._expiries.pop(update.target, None)
                else:
                    self._expiries[update.target] = expires
            elif isinstance(update, LinkUpdate) and update.state is LinkState.DENIED:
                self._expiries.pop(update.target, None)
                if update.detail.startswith("UNAUTHENTICATED"):
                    self._refresh(f"{update.target} refused the token")
        self._inbox.put(update)

    def refresh_token(self, why: str) -> None:
        """Ask token_command for a fresh token now (at most once a minute). Any thread."""
        assert self._loop is not None, "start() first"
        if self.refresher is not None:
            self._loop.call_soon_threadsafe(self._refresh, why)

    def _refresh(self, why: str) -> None:
        assert self.refresher is not None
        task = self.refresher.request(why)
        if task is not None:
            task.add_done_callback(self._on_refresh_done)

    def _on_refresh_done(self, task: asyncio.Task[bool]) -> None:
        assert self.refresher is not None
        if not task.cancelled() and self.refresher.last_error:
            # The message line says it ("fresh token: failed: …"); announcements, the expiry.
            self._inbox.put(CommandResult("", "fresh token", False, self.refresher.last_error))

    def _on_token_changed(self) -> None:
        self._expiries.clear()  # the links report the new token's expiry
        for link in self._links.values():
            self._loop.create_task(link.credentials_changed(), name=f"relink {link.target}")  # type: ignore[union-attr]

    async def _watch_expiry(self) -> None:
        assert self.refresher is not None
        while True:
            await asyncio.sleep(EXPIRY_CHECK_S)
            soonest = min(self._expiries.values(), default=None)
            if soonest is not None and self.refresher.due(soonest / 1000):
                self._refresh("the token expires soon")

    def request(self, target: str, what: str, call: ActionCall, subject: str = "") -> None:
        """Run an action on a node off the GUI thread; its CommandResult lands in the inbox."""
        assert self._loop is not None, "start() first"
        asyncio.run_coroutine_threadsafe(self._request(target, what, call, subject), self._loop)

    async def _request(self, target: str, what: str, call: ActionCall, subject: str) -> None:
        link = self._links.get(target)
        if link is None:
            result = CommandResult(target, what, False, f"{target} is not a watched node")
        else:
            result = await link.command(what, call, subject)
        self._inbox.put(result)

    def query(
        self, target: str, what: str, call: ActionCall, decode: QueryDecoder, query_id: int
    ) -> concurrent.futures.Future[None]:
        """Ask a node something off the GUI thread; its QueryResult lands in the inbox.

        Cancelling the returned future drops the call (and its answer).
        """
        assert self._loop is not None, "start() first"
        coroutine = self._query(target, what, call, decode, query_id)
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def fetch(
        self, target: str, what: str, fetch: Callable[[], Awaitable[object]], query_id: int
    ) -> concurrent.futures.Future[None]:
        """Run a fetch that is no node's RPC (a Prometheus range) on the network thread;
        its QueryResult, about `target`, lands in the inbox. Cancel it as a query."""
        assert self._loop is not None, "start() first"
        return asyncio.run_coroutine_threadsafe(
            self._fetch(target, what, fetch, query_id), self._loop
        )

    async def _fetch(
        self, target: str, what: str, fetch: Callable[[], Awaitable[object]], query_id: int
    ) -> None:
        try:
            payload = await fetch()
        except FetchError as exc:
            self._inbox.put(QueryResult(target, what, query_id, False, str(exc)))
            return
        except Exception as exc:  # a bug: logged, and said to the asker, who would wait for ever
            self._inbox.put(_internal_error(target, what, query_id, exc))
            return
        self._inbox.put(QueryResult(target, what, query_id, True, "done", payload))

    async def _query(
        self, target: str, what: str, call: ActionCall, decode: QueryDecoder, query_id: int
    ) -> None:
        link = self._links.get(target)
        if link is None:
            answer = QueryResult(target, what, query_id, False, f"{target} is not a watched node")
        else:
            try:
                answer = await link.query(what, call, decode, query_id)
            except Exception as exc:
                # A reply that cannot be decoded, or a channel closed under the call (a
                # reconnect): said to the asker, who would wait for ever (a replay moment's
                # node "waiting", and Play that never starts).
                answer = _internal_error(target, what, query_id, exc)
        self._inbox.put(answer)

    def request_steps(
        self, target: str, what: str, steps: Callable[[Call], CommandResult | None]
    ) -> None:
        """Run an action of several calls, maybe on several nodes, on the steps worker;
        `steps` gets a blocking `call(node, method, request)` and returns the result,
        which lands in the inbox (None: nothing to say, as for a repair found done)."""
        assert self._loop is not None, "start() first"
        self._steps.submit(self._run_steps, target, what, steps)

    def _run_steps(
        self, target: str, what: str, steps: Callable[[Call], CommandResult | None]
    ) -> None:
        result: CommandResult | None
        try:
            result = steps(self._step_call)
        except Exception as exc:  # a bug: logged and said, or the asker waits for ever
            log.exception("%s: %s failed", target, what)
            result = CommandResult(target, what, False, f"internal error: {exc}")
        if result is not None:
            self._inbox.put(result)

    def _step_call(self, node: str, method: str, request: Any) -> Any:
        link, loop = self._links.get(node), self._loop
        stub = link.stub if link is not None else None
        if stub is None or loop is None:
            raise StepFailed(f"{node} is not connected")

        async def one() -> Any:
            return await getattr(stub, method)(request, timeout=CALL_DEADLINE_S)

        try:
            return asyncio.run_coroutine_threadsafe(one(), loop).result(CALL_DEADLINE_S + 1)
        except grpc.aio.AioRpcError as exc:
            raise StepFailed(f"{exc.code().name}: {exc.details()}") from None
        except (TimeoutError, concurrent.futures.CancelledError):
            raise StepFailed(f"{node} did not answer in time") from None

    def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel every link, close channels, end the thread."""
        self._steps.shutdown(wait=True, cancel_futures=True)
        if self._loop is None or not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop)
        future.result(timeout_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)
        if self.refresher is not None:
            self.refresher.close()

    async def _cancel_all(self) -> None:
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        self._tasks.clear()
        # grpc.aio leaves helper tasks behind closed calls; end them too, so the
        # loop closes without "Task was destroyed but it is pending".
        leftovers = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in leftovers:
            task.cancel()
        await asyncio.gather(*leftovers, return_exceptions=True)


def _internal_error(target: str, what: str, query_id: int, exc: Exception) -> QueryResult:
    """A query or fetch that failed by a bug: logged, and its asker told (never left
    waiting)."""
    log.exception("%s: %s failed", target, what)
    return QueryResult(target, what, query_id, False, f"internal error: {exc}")
