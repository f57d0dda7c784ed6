"""Turning domain errors into gRPC status codes with the domain's own message.

Every service shares one table for the domain's kinds of error
(node_daemon.errors): NotFound, Invalid, Refused, Forbidden, and a journal
that cannot be written. A servicer may add errors of its own. Anything else is
a bug: it is re-raised, so that gRPC logs its traceback and answers UNKNOWN;
it never borrows a code that looks like a valid answer (a stray KeyError is
not NOT_FOUND, an OSError's PermissionError is not PERMISSION_DENIED).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import NoReturn

import grpc

from node_daemon.errors import Forbidden, Invalid, NotFound, Refused
from node_daemon.journal.event_journal import JournalError

ErrorCodes = Sequence[tuple[type[BaseException], grpc.StatusCode]]
COMMON: ErrorCodes = (
    (NotFound, grpc.StatusCode.NOT_FOUND),
    (Invalid, grpc.StatusCode.INVALID_ARGUMENT),
    (Refused, grpc.StatusCode.FAILED_PRECONDITION),
    (Forbidden, grpc.StatusCode.PERMISSION_DENIED),
    # A journal that cannot be written means nothing was done.
    (JournalError, grpc.StatusCode.UNAVAILABLE),
)


MAX_MESSAGE = 1000
# The client's limit is on the percent-encoded grpc-message header (8 KiB soft by
# default, past which gRPC drops a growing share of answers): a character outside
# printable ASCII costs 3 bytes per UTF-8 byte, so 1,000 four-byte characters are
# 12 KB. Messages stay well inside it, whatever they quote.
MAX_ENCODED = 4000
_TRUNCATED = " … (truncated)"


def _encoded_size(char: str) -> int:
    """Bytes of one character in grpc-message: printable ASCII but % as is, else %XX."""
    code = ord(char)
    if 0x20 <= code <= 0x7E and code != 0x25:
        return 1
    return 3 * len(char.encode("utf-8", errors="surrogatepass"))


def bounded(message: str) -> str:
    """Messages may quote the request; a huge quote would exceed gRPC's metadata limit.

    Cut at MAX_MESSAGE characters and at MAX_ENCODED bytes on the wire, whichever
    comes first.
    """
    if len(message) <= MAX_MESSAGE and (
        message.isascii() or sum(map(_encoded_size, message)) <= MAX_ENCODED
    ):
        return message  # ASCII: at most 3,000 bytes encoded
    budget = MAX_ENCODED - sum(_encoded_size(c) for c in _TRUNCATED)
    size = 0
    for position, char in enumerate(message):
        size += _encoded_size(char)
        if position >= MAX_MESSAGE - len(_TRUNCATED) or size > budget:
            return message[:position] + _TRUNCATED
    return message


def abort(context: grpc.ServicerContext, code: grpc.StatusCode, message: str) -> NoReturn:
    """End the call with `code`; context.abort raises, which the type checker cannot see."""
    context.abort(code, bounded(message))
    raise AssertionError("grpc.ServicerContext.abort returned")


def abort_for(
    context: grpc.ServicerContext, exc: BaseException, codes: ErrorCodes = ()
) -> NoReturn:
    """Abort the call with the code mapped for the error's type; re-raise unknown errors."""
    for kind, code in (*codes, *COMMON):
        if isinstance(exc, kind):
            message = str(exc.args[0]) if exc.args else str(exc)
            if isinstance(exc, JournalError):
                message += "; the action was not applied, try again once the disk has room"
            context.abort(code, bounded(message))
    raise exc


@contextmanager
def domain_errors(context: grpc.ServicerContext, codes: ErrorCodes = ()) -> Iterator[None]:
    """Run the block and abort the call as abort_for does for any error it raises."""
    try:
        yield
    except Exception as exc:
        abort_for(context, exc, codes)
