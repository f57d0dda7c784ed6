"""The one table of limits on what a control request may carry, and the checks against it.

Every free-text field of SubmitWorkload, Reserve and CancelWorkload is bounded
in characters here and may hold no control character (a newline or an escape
in a name would forge lines in logs, the audit and `gpufleet queue`). A
workload's command and environment are bounded as the kernel bounds them at
exec time, so what is queued can start: each string (an argument, or an
environment entry as execve sees it, ``NAME=VALUE`` and its NUL) at most
MAX_ARG_STRLEN, and all of them with their pointers within the node's
ARG_MAX, less what the daemon adds itself (see `command_budget`).

The bounds add up to the size limit of a listing: ListWorkloads must fit a
default gRPC client's 4 MiB. Queued and running workloads together may take
QUEUE_BYTES on the wire (a submit past it is refused); ended ones fill a
listing up to LIST_BYTES, newest first. docs/control.md ("Limits") has the
table and the arithmetic.
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import replace

from node_daemon.control.records import Workload, WorkloadRequest
from node_daemon.errors import Invalid

# Characters (not bytes: UTF-8 takes up to 4 per character) of each free-text field.
TEXT_LIMITS: Mapping[str, int] = {
    "name": 1000,
    "owner": 1000,
    "holder": 1000,
    "reason": 1000,
    # A name the caller claims; ignored (the actor is the caller: identity.acting_user), but
    # consoles still send it for older nodes, and bounded it is no way to fill a log.
    "actor": 128,
    # "move:NODE/ID@MS" and "NODE/ID" of the console's moves; a node name is at most 253.
    "idempotency_key": 512,
    "moved_from": 512,
}
MAX_ARGV = 256  # arguments
MAX_ARG_CHARS = 4096  # characters of one argument
# The kernel's limit on one string of argv or envp: 32 pages, the terminating NUL included.
MAX_ARG_STRLEN = 32 * 4096
# The daemon's own cap on a command and its environment, below any node's ARG_MAX.
MAX_COMMAND_BYTES = 256 * 1024
# What the daemon adds at start (login variables, CUDA_VISIBLE_DEVICES with a UUID per
# GPU, GPUFLEET_WORKLOAD_ID) and execve's own use of the space (the file name).
EXEC_MARGIN_BYTES = 16 * 1024
POINTER_BYTES = 8  # each argv and envp entry is also a pointer in the new stack
# Queued and running workloads of one node, as ListWorkloads sends them; each one's
# placement notes (wait reason, detail) are counted at RECORD_SLACK_BYTES.
QUEUE_BYTES = 3 * 1024 * 1024
RECORD_SLACK_BYTES = 1024
# A whole ListWorkloads answer: under a default client's 4 MiB, with room for framing.
LIST_BYTES = 3 * 1024 * 1024 + 512 * 1024


class OverLimit(Invalid):
    """A field of the request is longer than its limit, or holds what it may not."""


def check_text(field: str, value: str) -> None:
    """OverLimit naming `field` when `value` passes its limit or holds a control character."""
    limit = TEXT_LIMITS[field]
    if len(value) > limit:
        raise OverLimit(f"{field} is {len(value)} characters long; at most {limit} are allowed")
    bad = next((c for c in value if unicodedata.category(c) == "Cc"), None)
    if bad is not None:
        raise OverLimit(f"{field} may not contain control characters (found U+{ord(bad):04X})")


def check_texts(**fields: str) -> None:
    """`check_text` for each field given by name."""
    for field, value in fields.items():
        check_text(field, value)


def command_budget() -> int:
    """Bytes argv and the declared environment may take at exec, pointers included.

    The kernel allows strings and pointers up to a quarter of the stack limit
    (at least 128 KiB), which `sysconf(SC_ARG_MAX)` reports; the daemon keeps
    EXEC_MARGIN_BYTES of it for what it adds, and never allows more than
    MAX_COMMAND_BYTES (what a listing's arithmetic counts on).
    """
    try:
        arg_max = os.sysconf("SC_ARG_MAX")
    except (OSError, ValueError):
        arg_max = MAX_ARG_STRLEN  # POSIX's minimum is lower; Linux's floor is this
    if arg_max <= 0:
        arg_max = MAX_ARG_STRLEN
    return min(MAX_COMMAND_BYTES, arg_max - EXEC_MARGIN_BYTES)


def check_command(argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Refuse what execve would refuse (E2BIG, EINVAL), with a message saying what and why."""
    if len(argv) > MAX_ARGV:
        raise OverLimit(f"argv has {len(argv)} arguments; at most {MAX_ARGV} are allowed")
    if any("\0" in t for t in (*argv, *env.keys(), *env.values())):
        raise OverLimit("argv and env may not contain NUL characters")
    if any(not name or "=" in name for name in env):
        raise OverLimit("environment names must be non-empty and contain no '='")
    for position, arg in enumerate(argv):
        if len(arg) > MAX_ARG_CHARS:
            raise OverLimit(
                f"argv[{position}] is {len(arg)} characters long; at most {MAX_ARG_CHARS}"
            )
    for name, value in env.items():
        size = _env_string_bytes(name, value)
        if size > MAX_ARG_STRLEN:
            raise OverLimit(
                f"env entry {name[:64]!r}: {name}=VALUE is {size} bytes with its NUL; the "
                f"kernel passes at most {MAX_ARG_STRLEN} (MAX_ARG_STRLEN) to a program"
            )
    total = command_bytes(argv, env)
    budget = command_budget()
    if total > budget:
        raise OverLimit(
            f"argv and env take {total} bytes at exec (strings, NULs and pointers); this node "
            f"allows {budget} (ARG_MAX less {EXEC_MARGIN_BYTES} the daemon adds)"
        )


def command_bytes(argv: Sequence[str], env: Mapping[str, str]) -> int:
    """What argv and env take in a new program's stack: strings, NULs, pointers."""
    strings = sum(len(a.encode()) + 1 for a in argv) + sum(
        _env_string_bytes(n, v) for n, v in env.items()
    )
    return strings + POINTER_BYTES * (len(argv) + len(env) + 2)


def _env_string_bytes(name: str, value: str) -> int:
    return len(name.encode()) + 1 + len(value.encode()) + 1  # NAME=VALUE\0


def clipped(value: str, field: str) -> str:
    """A stored value cut to its field's limit, marked as cut (records from before limits)."""
    limit = TEXT_LIMITS[field]
    if len(value) <= limit:
        return value
    mark = f"… ({len(value)} characters, cut)"
    return value[: limit - len(mark)] + mark


def check_request(request: WorkloadRequest) -> None:
    """Every bound of a submitted workload: its free text, its command and environment."""
    check_texts(
        name=request.name,
        owner=request.owner,
        idempotency_key=request.idempotency_key,
        moved_from=request.moved_from,
    )
    check_command(request.argv, request.env)


def within_limits(stored: Workload) -> Workload:
    """A record read back from a journal written before these limits, brought within them.

    Its free text is cut (and says so); an over-long idempotency key is dropped, since
    no submit can carry it any more. Its command is kept: it ran, or fails as it is.
    """
    key = stored.idempotency_key
    if len(key) > TEXT_LIMITS["idempotency_key"]:
        key = ""
    bounded = replace(
        stored,
        name=clipped(stored.name, "name"),
        moved_from=clipped(stored.moved_from, "moved_from"),
        idempotency_key=key,
    )
    return stored if bounded == stored else bounded
