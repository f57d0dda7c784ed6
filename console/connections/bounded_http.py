"""One HTTP exchange with bounds a hostile server cannot stretch: size, time, redirects.

urllib's `urlopen(...).read()` trusts the server three ways: it buffers a body of
any size, its timeout is per socket operation (a server that drips one byte
every few seconds holds a read for as long as it likes), and it follows a
redirect with the request's headers, a token among them, to wherever the
`Location` points. Here:

- the body is read in chunks and the read stops past `max_bytes` (a declared
  `Content-Length` over it is refused before a byte of the body is read);
- `deadline_s` bounds the whole exchange: connecting, the TLS handshake, sending
  and every read from the socket share one deadline;
- nothing is followed: a redirect comes back as the answer it is (status and
  `Location`) for the caller to say so.

Every failure is an `HttpFailure` whose message names what went wrong, never a
header (the caller's token travels in one).
"""

from __future__ import annotations

import http.client
import io
import socket
import ssl
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

MIB: Final = 1 << 20
CHUNK: Final = 64 * 1024


@dataclass(frozen=True)
class HttpLimits:
    """How much one answer may be and how long the whole exchange may take."""

    max_bytes: int
    deadline_s: float


@dataclass(frozen=True)
class HttpAnswer:
    """What the server said: the status, its body (within the limit) and where it redirects."""

    status: int
    reason: str
    body: bytes
    location: str = ""  # the Location header of a redirect, "" without one


class HttpFailure(Exception):
    """No whole answer within the limits; the message says why and holds no header."""


def exchange(url: str, method: str, headers: Mapping[str, str], body: bytes | None,
             limits: HttpLimits, tls: ssl.SSLContext | None) -> HttpAnswer:  # fmt: skip
    """One request to `url` and its answer, never longer than the limits allow.

    Raises:
        HttpFailure: no connection, no HTTP, too big, or too slow.
    """
    deadline = time.monotonic() + limits.deadline_s
    parts = urllib.parse.urlsplit(url)
    try:
        sock = _connect(parts, tls, deadline)
    except TimeoutError:
        raise HttpFailure(f"no answer within {limits.deadline_s:g} s") from None
    except OSError as exc:
        raise HttpFailure(str(exc) or type(exc).__name__) from None
    try:
        return _ask(sock, parts, method, headers, body, limits, deadline)
    finally:
        sock.close()


def _ask(sock: socket.socket, parts: urllib.parse.SplitResult, method: str,
         headers: Mapping[str, str], body: bytes | None, limits: HttpLimits,
         deadline: float) -> HttpAnswer:  # fmt: skip
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port)
    conn.sock = sock  # connected (and TLS) here, within the deadline: never by http.client
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    try:
        sock.settimeout(_left(deadline))  # sendall's timeout is for all of it
        conn.request(method, target, body=body, headers={"Host": _host(parts), **headers})
        reply = http.client.HTTPResponse(sock, method=method)
        reply.fp.close()  # its own reader would wait per read; this one stops at the deadline
        reply.fp = io.BufferedReader(_DeadlineReader(sock, deadline), CHUNK)
        reply.begin()
        return HttpAnswer(reply.status, reply.reason, _body(reply, limits.max_bytes),
                          reply.getheader("Location") or "")  # fmt: skip
    except TimeoutError:
        raise HttpFailure(f"no whole answer within {limits.deadline_s:g} s") from None
    except (OSError, http.client.HTTPException) as exc:
        raise HttpFailure(f"not an HTTP answer: {_said(exc)}") from None
    finally:
        conn.sock = None  # closed by exchange(), once


def _connect(parts: urllib.parse.SplitResult, tls: ssl.SSLContext | None,
             deadline: float) -> socket.socket:  # fmt: skip
    port = parts.port or (443 if parts.scheme == "https" else 80)
    sock = socket.create_connection((parts.hostname or "", port), timeout=_left(deadline))
    if tls is None:
        return sock
    try:
        # The handshake's timeout is one deadline for all its reads (CPython's _ssl).
        sock.settimeout(_left(deadline))
        return tls.wrap_socket(sock, server_hostname=parts.hostname)
    except BaseException:
        sock.close()
        raise


def _body(reply: http.client.HTTPResponse, max_bytes: int) -> bytes:
    """The body in chunks, given up past max_bytes (the rest is never read)."""
    declared = reply.getheader("Content-Length")
    if declared is not None and declared.strip().isdigit() and int(declared) > max_bytes:
        raise HttpFailure(f"the answer would be {int(declared)} bytes, over the "
                          f"{_size(max_bytes)} an answer may be")  # fmt: skip
    body = bytearray()
    while piece := reply.read(CHUNK):
        body += piece
        if len(body) > max_bytes:
            raise HttpFailure(f"the answer is over the {_size(max_bytes)} an answer may be "
                              "(not read further)")  # fmt: skip
    return bytes(body)


class _DeadlineReader(io.RawIOBase):
    """The socket's bytes, each read given only the time left before the deadline."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._sock.settimeout(_left(self._deadline))
        return self._sock.recv_into(buffer)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError("deadline passed")
    return left


def _host(parts: urllib.parse.SplitResult) -> str:
    """The Host header: the URL's host and port, never its user:password@."""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    return f"{host}:{parts.port}" if parts.port else host


def _said(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__)[:200]


def _size(count: int) -> str:
    return f"{count / MIB:g} MiB" if count >= MIB else f"{count} bytes"
