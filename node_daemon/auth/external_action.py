"""RecordExternalAction's request checked and written as one audit record.

A console that acted on this node through another system (Slurm: steer a job
here, drain the node, cancel a job) writes what it did here too, so the node's
audit log tells the whole story. The record is the caller's (its user is the
authenticated caller, never a field of the request) and its method names the
system and the action ("slurm/drain"), apart from the daemon's own RPCs. Each
field is bounded: the audit log must not be a way to fill the disk.
"""

from __future__ import annotations

import json
import re

from node_daemon.auth.audit import AuditEntry, AuditLog

NAME = re.compile(r"[a-z][a-z0-9_.-]{0,31}")
MAX_TARGET = 512
MAX_PARAMS = 4000
MAX_RESULT = 1000


class BadExternalAction(ValueError):
    """The request cannot be recorded as it is; the message says which field and why."""


def _check_name(field: str, value: str) -> None:
    if not NAME.fullmatch(value):
        raise BadExternalAction(
            f"{field} {value[:40]!r} must be 1-32 lowercase letters, digits, '_', '.' or '-', "
            "beginning with a letter (e.g. 'slurm', 'drain')"
        )


def _check_text(field: str, value: str, limit: int) -> None:
    if len(value) > limit:
        raise BadExternalAction(f"{field} is {len(value)} characters; at most {limit} are kept")
    if any(ord(c) < 32 and c not in "\t\n" for c in value):
        raise BadExternalAction(f"{field} holds control characters")


def _check_params(params: str) -> str:
    """The parameters as given, checked to be one JSON value; empty reads as {}."""
    if not params:
        return "{}"
    _check_text("params", params, MAX_PARAMS)
    try:
        json.loads(params)
    except ValueError as exc:
        raise BadExternalAction(f"params is no JSON ({exc})") from None
    return params


def record_external_action(audit: AuditLog, user: str, peer: str, system: str, action: str,
                           target: str, params: str, result: str) -> AuditEntry:  # fmt: skip
    """Check the request and append its record; BadExternalAction names what is wrong."""
    _check_name("system", system)
    _check_name("action", action)
    _check_text("target", target, MAX_TARGET)
    checked = _check_params(params)
    if not result:
        raise BadExternalAction(
            "result is empty: give the other system's answer ('OK' or its error)"
        )
    _check_text("result", result, MAX_RESULT)
    return audit.append(user, peer, f"{system}/{action}", target, checked, result)
