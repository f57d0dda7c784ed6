"""Errors shared across the daemon's modules.

The domain raises these, worded for the person who asked; the RPC layer
(node_daemon.rpc.errors) maps each kind to one status code. Only these, and
the few errors a servicer maps itself, become an answer: anything else is a
bug, answered UNKNOWN and logged with its traceback. A builtin KeyError in
particular is never "not found": a lookup that went wrong inside the daemon
must not look like a valid answer.
"""

from __future__ import annotations

import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A configuration problem, worded for the operator: file, key, what is expected."""


def config_table(table: Any, name: str, source: str, known: Sequence[str]) -> dict[str, Any]:
    """`table` if it is a TOML table holding only `known` keys, else ConfigError saying so:
    "[name] must be a table", "unknown key(s) a, b in [name] (known: ...)" in `known`'s order.
    """
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [{name}] must be a table")
    unknown = sorted(set(table) - set(known))
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {', '.join(unknown)} in [{name}] (known: {', '.join(known)})"
        )
    return table


def read_toml(path: Path, what: str, error: type[ValueError] = ConfigError) -> dict[str, Any]:
    """The TOML file at `path` (`what` it is: "config", "scenario"), or `error` saying
    "cannot read WHAT PATH: why" or "WHAT PATH is not valid TOML: where and why".
    """
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise error(f"{what} {path} is not valid TOML: {exc}") from exc


class DomainError(Exception):
    """A refusal the caller can act on; the message says what is wrong and what to do."""


class NotFound(DomainError):
    """The thing asked for (a reservation, workload or alert id) is not on this node."""


class Invalid(DomainError, ValueError):
    """The request itself is wrong whatever the node's state (a GPU it lacks, an empty command)."""


class Forbidden(DomainError, PermissionError):
    """Not for this caller (its role, or whose the thing is), or not for the daemon to do
    (another user's process without CAP_KILL): PERMISSION_DENIED. An OSError's own
    PermissionError (a file the daemon cannot read) is not one: that is the daemon's problem."""


class Refused(DomainError):
    """A well-formed request the node's current state does not allow (a GPU held by someone
    else, a workload that is not queued, a process that changed): FAILED_PRECONDITION."""
