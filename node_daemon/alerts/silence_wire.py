"""Silence <-> gpufleet.v1.Silence (as sent, and as stored in the journal's records)."""

from __future__ import annotations

from gpufleet.v1 import node_pb2 as pb
from node_daemon.alerts.silences import Matcher, Silence


def silence_message(silence: Silence) -> pb.Silence:
    return pb.Silence(
        id=silence.id,
        matchers=[pb.SilenceMatcher(label=m.label, pattern=m.pattern) for m in silence.matchers],
        starts_unix_ms=silence.starts_unix_ms,
        ends_unix_ms=silence.ends_unix_ms,
        created_by=silence.created_by,
        comment=silence.comment,
        created_unix_ms=silence.created_unix_ms,
        expired_by=silence.expired_by,
    )


def silence_record(message: pb.Silence) -> Silence:
    return Silence(
        id=message.id,
        matchers=tuple(Matcher(m.label, m.pattern) for m in message.matchers),
        starts_unix_ms=message.starts_unix_ms,
        ends_unix_ms=message.ends_unix_ms,
        created_by=message.created_by,
        comment=message.comment,
        created_unix_ms=message.created_unix_ms,
        expired_by=message.expired_by,
    )
