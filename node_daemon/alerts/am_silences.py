"""Silences as Alertmanager (API v2) holds them: what the daemon mirrors there.

The daemon's own silences (matcher silences and per-alert silences) are turned
into `AmSilence`s by node_daemon.alerts.silences; the Alertmanager pusher keeps
each Alertmanager's silences in step with them, so the pager stops when the
console says silenced.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class AmMatcher:
    """One matcher of an Alertmanager silence: label `name` equals (or fully matches) `value`."""

    name: str
    value: str
    is_regex: bool = False


@dataclass(frozen=True)
class AmSilence:
    """A silence the daemon wants in every Alertmanager it pushes to.

    `key` identifies it among this node's silences across restarts: "s-7" for a
    matcher silence, "alert:a-42" for a per-alert one.
    """

    key: str
    matchers: tuple[AmMatcher, ...]
    starts_unix_ms: int
    ends_unix_ms: int
    created_by: str
    comment: str
