"""ConnectionManager: one network thread running asyncio for every node's link.

One thread with grpc.aio serves hundreds of channels without a thread per node.
Updates land in a thread-safe inbox that the GUI drains once per frame.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading

from console.connections.node_link import ActionCall, NodeLink, QueryDecoder
from console.connections.security import LinkSecurity
from console.fleet.updates import CommandResult, QueryResult, Update

log = logging.getLogger(__name__)


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

    def __init__(self, inbox: UpdateInbox, security: LinkSecurity | None = None) -> None:
        self._inbox = inbox
        self._security = security or LinkSecurity()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._links: dict[str, NodeLink] = {}
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="gpufleet-net", daemon=True)

    def start(self) -> None:
        self._thread.start()
        self._ready.wait()

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
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
            link = NodeLink(target, self._inbox.put, security=self._security)
            self._links[target] = link
            self._tasks[target] = self._loop.create_task(link.run(), name=f"link {target}")  # type: ignore[union-attr]

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
    ) -> None:
        """Ask a node something off the GUI thread; its QueryResult lands in the inbox."""
        assert self._loop is not None, "start() first"
        coroutine = self._query(target, what, call, decode, query_id)
        asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    async def _query(
        self, target: str, what: str, call: ActionCall, decode: QueryDecoder, query_id: int
    ) -> None:
        link = self._links.get(target)
        if link is None:
            answer = QueryResult(target, what, query_id, False, f"{target} is not a watched node")
        else:
            answer = await link.query(what, call, decode, query_id)
        self._inbox.put(answer)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel every link, close channels, end the thread."""
        if self._loop is None or not self._thread.is_alive():
            return
        future = asyncio.run_coroutine_threadsafe(self._cancel_all(), self._loop)
        future.result(timeout_s)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout_s)

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
