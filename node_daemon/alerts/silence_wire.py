"""Silence <-> gpufleet.v1.Silence (as sent, and as stored in the journal's records)."""

from __future__ import annotations

import dataclasses
from typing import Any

from gpufleet.v1 import node_pb2 as pb
from node_daemon.alerts.silences import Matcher, Silence

# The fields a Silence and its message share by name and plain value: all but
# the matchers, which are messages of their own. Derived, so that a field added
# to both travels without a change here.
_PLAIN_FIELDS = tuple(f.name for f in dataclasses.fields(Silence) if f.name != "matchers")


def _plain(source: Silence | pb.Silence) -> dict[str, Any]:
    return {name: getattr(source, name) for name in _PLAIN_FIELDS}


def silence_message(silence: Silence) -> pb.Silence:
    matchers = [pb.SilenceMatcher(label=m.label, pattern=m.pattern) for m in silence.matchers]
    return pb.Silence(matchers=matchers, **_plain(silence))


def silence_record(message: pb.Silence) -> Silence:
    matchers = tuple(Matcher(m.label, m.pattern) for m in message.matchers)
    return Silence(matchers=matchers, **_plain(message))
