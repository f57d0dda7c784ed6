"""A slurmrestd stand-in for tests: a real HTTP server on 127.0.0.1:0, threaded, scripted.

Each path answers what the test sets in `answers` (a good empty job, node and
reservation list by default): JSON or any bytes with a status, a body streamed
in chunks (100 MB without holding it), a drip of one byte at a time, a redirect,
or bytes that are not HTTP at all. Every request's Slurm token header is kept in
`tokens_seen` (an Authorization header in `authorizations_seen`), so a second
stand-in as a redirect's target tells whether the token reached it. POSTs are
answered as GETs (the Prometheus client's query_range is one). `close()` stops
the drips and joins every handler thread.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from console.connections.slurm_rest import API_VERSION

PREFIX = f"/slurm/{API_VERSION}"
GOOD: dict[str, Any] = {
    "/jobs": {"jobs": []},
    "/nodes": {"nodes": []},
    "/reservations": {"reservations": []},
}
Answer = Callable[["_Handler", "Standin"], None]


def as_json(value: Any, status: int = 200) -> Answer:
    return raw(json.dumps(value).encode(), status)


def raw(body: bytes, status: int = 200) -> Answer:
    def answer(handler: _Handler, _: Standin) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def streamed(total: int) -> Answer:
    """A job list of about `total` bytes (one job's huge name), sent in chunks, no length."""
    chunk = b"x" * 65536

    def answer(handler: _Handler, _: Standin) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.end_headers()
        try:
            sent = handler.wfile.write(b'{"jobs": [{"job_id": 1, "name": "')
            while sent < total:
                sent += handler.wfile.write(chunk)
            handler.wfile.write(b'"}]}')
        except OSError:
            return  # the client stopped reading: what it should do

    return answer


def drip(every_s: float, in_headers: bool = False) -> Answer:
    """One byte every `every_s` until the client hangs up or the stand-in closes."""

    def answer(handler: _Handler, standin: Standin) -> None:
        if not in_headers:
            handler.send_response(200)
            handler.end_headers()
        handler.wfile.flush()
        byte = b"H" if in_headers else b"{"
        try:
            while not standin.stopping.wait(every_s):
                handler.wfile.write(byte)
                handler.wfile.flush()
        except OSError:
            return

    return answer


def redirect(location: str, status: int = 302) -> Answer:
    def answer(handler: _Handler, _: Standin) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


def not_http(text: bytes) -> Answer:
    def answer(handler: _Handler, _: Standin) -> None:
        handler.wfile.write(text)

    return answer


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        standin = self.server.standin
        with standin.lock:
            standin.tokens_seen.append(self.headers.get("X-SLURM-USER-TOKEN"))
            standin.authorizations_seen.append(self.headers.get("Authorization"))
            standin.paths_seen.append(self.path)
        path = self.path.removeprefix(PREFIX)
        answer = standin.answers.get(path) or as_json(GOOD.get(path, {}), 200)
        answer(self, standin)

    def do_POST(self) -> None:
        """As GET, once the request's body is read (Prometheus's query_range is a POST)."""
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.do_GET()

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: the test says what matters


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # close() joins every handler thread
    block_on_close = True
    standin: Standin


@dataclass
class Standin:
    answers: dict[str, Answer] = field(default_factory=dict)
    tokens_seen: list[str | None] = field(default_factory=list)
    authorizations_seen: list[str | None] = field(default_factory=list)  # a bearer's header
    paths_seen: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.standin = self
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,),
                                        name="slurmrestd-standin", daemon=True)  # fmt: skip
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def close(self) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


@contextlib.contextmanager
def redirected_elsewhere(
    standin: Standin, path: str, target_path: str, status: int
) -> Iterator[tuple[Standin, str]]:
    """`path` of the stand-in answers a redirect to `target_path` of a second stand-in,
    named localhost (another origin); yields that one and the target, closes it after."""
    elsewhere = Standin()
    try:
        target = f"{elsewhere.url.replace('127.0.0.1', 'localhost')}{target_path}"
        standin.answers[path] = redirect(target, status)
        yield elsewhere, target
    finally:
        elsewhere.close()
