"""Silences as Alertmanager (API v2) holds them: what the daemon mirrors there.

The daemon's own silences (matcher silences and per-alert silences) are turned
into `AmSilence`s by node_daemon.alerts.silences; the Alertmanager pusher keeps
each Alertmanager's silences in step with them, so the pager stops when the
console says silenced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


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


# --- keeping an Alertmanager's silences in step (used by the pusher's thread) -----------------
#
# createdBy is the person who silenced, so it cannot tell the daemon's silences from
# anyone else's: each mirrored silence ends its comment with a tag naming the node and
# the silence's key, and only silences with this node's tag are ever changed or expired.

_TAG = re.compile(r"(?:\A| )\[gpufleet node=(?P<node>.*) id=(?P<key>\S+)\]\Z")
# Silence states that still mute (or will): an expired one is history, left alone.
_LIVE_STATES = ("active", "pending")
# A start this close to now is "now" (Alertmanager moves a past start to the present).
_START_SLACK_MS = 1000


def silence_tag(node: str, key: str) -> str:
    return f" [gpufleet node={node} id={key}]"


def tagged_key(comment: str, node: str) -> str | None:
    """The key of the daemon silence that `comment` is tagged with on `node`, else None."""
    found = _TAG.search(comment)
    return found["key"] if found is not None and found["node"] == node else None


def silence_body(silence: AmSilence, node: str, now_ms: int) -> dict[str, object]:
    """The JSON body POSTed to /api/v2/silences, scoped to `node` and tagged."""
    matchers = list(silence.matchers)
    if not any(m.name == "node" for m in matchers):
        # A daemon's silence is about its own alerts, never the whole fleet's.
        matchers.append(AmMatcher("node", node))
    return {
        "matchers": [
            {"name": m.name, "value": m.value, "isRegex": m.is_regex, "isEqual": True}
            for m in matchers
        ],
        "startsAt": rfc3339_ms(max(silence.starts_unix_ms, now_ms)),
        "endsAt": rfc3339_ms(silence.ends_unix_ms),
        "createdBy": silence.created_by or f"gpufleet@{node}",
        "comment": f"{silence.comment}{silence_tag(node, silence.key)}".strip(),
    }


@dataclass(frozen=True)
class SilencePlan:
    """What to do in one Alertmanager: bodies to create, ids of its silences to expire."""

    create: tuple[dict[str, object], ...]
    expire: tuple[str, ...]

    @property
    def empty(self) -> bool:
        return not self.create and not self.expire


def plan_silences(
    desired: Sequence[AmSilence], existing: Sequence[Mapping[str, Any]], node: str, now_ms: int
) -> SilencePlan:
    """Create what is desired and missing or different; expire this node's others.

    Alertmanager's own silences and other nodes' are never touched. Of several
    live copies of one key (a crash between create and expire), one that fits is
    kept and the rest expire.
    """
    ours: dict[str, list[Mapping[str, Any]]] = {}
    for found in existing:
        key = tagged_key(str(found.get("comment", "")), node)
        if key is not None and found.get("status", {}).get("state") in _LIVE_STATES:
            ours.setdefault(key, []).append(found)
    create, expire = [], []
    for silence in desired:
        if silence.ends_unix_ms <= now_ms:
            continue  # over: Alertmanager refuses an end in the past; its copy expires below
        body = silence_body(silence, node, now_ms)
        copies = ours.pop(silence.key, [])
        keep = next((c for c in copies if _same(c, body, now_ms)), None)
        if keep is None:
            create.append(body)
        expire += [str(c["id"]) for c in copies if c is not keep]
    expire += [str(c["id"]) for copies in ours.values() for c in copies]
    return SilencePlan(tuple(create), tuple(expire))


def _same(found: Mapping[str, Any], body: Mapping[str, Any], now_ms: int) -> bool:
    """Whether Alertmanager's silence `found` already is `body` (matchers, end, future start)."""

    def matchers(silence: Mapping[str, Any]) -> set[tuple[str, str, bool, bool]]:
        return {
            (m["name"], m["value"], bool(m.get("isRegex")), bool(m.get("isEqual", True)))
            for m in silence.get("matchers", ())
        }

    try:
        ends_same = parse_rfc3339_ms(found["endsAt"]) == parse_rfc3339_ms(str(body["endsAt"]))
        wanted_start = parse_rfc3339_ms(str(body["startsAt"]))
        start_same = wanted_start <= now_ms + _START_SLACK_MS or (
            parse_rfc3339_ms(found["startsAt"]) == wanted_start
        )
    except (KeyError, TypeError, ValueError):
        return False  # not something we made in a form we understand: replace it
    return ends_same and start_same and matchers(found) == matchers(body)


def rfc3339_ms(unix_ms: float) -> str:
    """`unix_ms` as RFC 3339 in UTC with milliseconds, e.g. 2024-05-01T12:00:00.000Z."""
    moment = datetime.fromtimestamp(unix_ms / 1000, tz=UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


_RFC3339 = re.compile(
    r"(?P<base>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(?P<frac>\d+))?(?P<zone>Z|[+-]\d\d:\d\d)\Z"
)


def parse_rfc3339_ms(text: str) -> int:
    """Unix milliseconds of an RFC 3339 time as Alertmanager writes it (up to nanoseconds)."""
    found = _RFC3339.fullmatch(text)
    if found is None:
        raise ValueError(f"not an RFC 3339 time: {text!r}")
    zone = "+00:00" if found["zone"] == "Z" else found["zone"]
    moment = datetime.fromisoformat(f"{found['base']}{zone}")
    millis = int((found["frac"] or "0")[:3].ljust(3, "0"))
    return int(moment.timestamp()) * 1000 + millis
