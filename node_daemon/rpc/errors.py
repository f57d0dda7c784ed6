"""Turning domain errors into gRPC status codes with the domain's own message."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NoReturn

import grpc

from node_daemon.journal.event_journal import JournalError

ErrorCodes = Sequence[tuple[type[BaseException], grpc.StatusCode]]
# Every service shares these: a journal that cannot be written means nothing was done.
COMMON: ErrorCodes = ((JournalError, grpc.StatusCode.UNAVAILABLE),)


MAX_MESSAGE = 1000


def bounded(message: str) -> str:
    """Messages may quote the request; a huge quote would exceed gRPC's metadata limit."""
    return (
        message if len(message) <= MAX_MESSAGE else message[: MAX_MESSAGE - 20] + " … (truncated)"
    )


def abort_for(context: grpc.ServicerContext, exc: BaseException, codes: ErrorCodes) -> NoReturn:
    """Abort the call with the code mapped for the error's type; re-raise unknown errors."""
    for kind, code in (*codes, *COMMON):
        if isinstance(exc, kind):
            message = str(exc.args[0]) if exc.args else str(exc)
            if isinstance(exc, JournalError):
                message += "; the action was not applied, try again once the disk has room"
            context.abort(code, bounded(message))
    raise exc
