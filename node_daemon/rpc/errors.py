"""Turning domain errors into gRPC status codes with the domain's own message.

Every service shares one table for the domain's kinds of error
(node_daemon.errors): NotFound, Invalid, Refused, Forbidden, and a journal
that cannot be written. A servicer may add errors of its own. Anything else is
a bug: it is re-raised, so that gRPC logs its traceback and answers UNKNOWN;
it never borrows a code that looks like a valid answer (a stray KeyError is
not NOT_FOUND, an OSError's PermissionError is not PERMISSION_DENIED).
"""

from __future__ import annotations

from collections.abc import Sequence
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


def bounded(message: str) -> str:
    """Messages may quote the request; a huge quote would exceed gRPC's metadata limit."""
    return (
        message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 20] + " … (truncated)"
    )


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
