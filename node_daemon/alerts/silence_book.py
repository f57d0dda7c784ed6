"""SilenceBook: the node's matcher silences in memory, and as the journal stores them.

Each silence is a journal record of kind "silence" (its gpufleet.v1.Silence),
written in the same transaction as the SILENCE_CREATED / SILENCE_EXPIRED event
that announces it. A record stays `active` until its expiry has been announced:
a silence whose end passed while the daemon was stopped (or the disk was full)
is announced at the next tick. Expired silences are kept for listing, the
newest MAX_EXPIRED (by id) on disk and here.

Not thread-safe: the AlertEngine calls it under its lock.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.states import SilenceState
from gpufleet.v1 import node_pb2 as pb
from node_daemon.alerts.silence_wire import silence_message, silence_record
from node_daemon.alerts.silences import Silence
from node_daemon.journal.event_journal import EventJournal, StoredRecord

KIND = "silence"
MAX_EXPIRED = 1000
# Pending and active silences at once: more is a script gone wrong, not a maintenance plan.
MAX_OPEN = 1000
# Label sets whose matching open silences are remembered (every tick asks for each firing
# alert's; matching is worked out again only when the silences change). Past this many,
# the memo starts afresh: alerts come and go.
MAX_MEMO = 4096
LabelKey = frozenset[tuple[str, str]]


def _number(silence_id: str) -> int:
    return int(silence_id.partition("-")[2] or 0)


class SilenceBook:
    def __init__(self, journal: EventJournal) -> None:
        journal.keep_inactive(KIND, MAX_EXPIRED)
        # Not yet announced as expired (pending, active, or just past their end) ...
        self._open: dict[str, Silence] = {}
        # ... and announced: kept for listing only, so each tick looks at the open ones.
        self._ended: dict[str, Silence] = {}
        open_ids = {_parse(body).id for body in journal.records(KIND, active_only=True)}
        for body in journal.records(KIND, active_only=False):
            silence = _parse(body)
            (self._open if silence.id in open_ids else self._ended)[silence.id] = silence
        self._next = journal.highest_record_number(KIND) + 1
        self._matching: dict[LabelKey, tuple[Silence, ...]] = {}

    @property
    def open_count(self) -> int:
        return len(self._open)

    def next_id(self) -> str:
        return f"s-{self._next}"

    def put(self, silence: Silence) -> None:
        """Add a new silence (with next_id()) or replace an open one by id."""
        self._open[silence.id] = silence
        self._next = max(self._next, _number(silence.id) + 1)
        self._matching.clear()

    def drop(self, silence_id: str) -> None:
        """Forget a new silence that could not be stored; its number is free again."""
        self._open.pop(silence_id, None)
        if _number(silence_id) == self._next - 1:
            self._next -= 1
        self._matching.clear()

    def get(self, silence_id: str) -> Silence | None:
        return self._open.get(silence_id) or self._ended.get(silence_id)

    def due(self, now_ms: int) -> list[Silence]:
        """Open silences past their end: their expiry is to be announced."""
        return [s for s in self._open.values() if s.state(now_ms) is SilenceState.EXPIRED]

    def announced(self, silence_id: str) -> None:
        """Its SILENCE_EXPIRED event is written (or held for the journal)."""
        silence = self._open.pop(silence_id, None)
        if silence is None:
            return
        self._matching.clear()
        self._ended[silence_id] = silence
        if len(self._ended) > MAX_EXPIRED:
            for old in sorted(self._ended, key=_number)[: len(self._ended) - MAX_EXPIRED]:
                del self._ended[old]

    def live(self, now_ms: int) -> list[Silence]:
        """Pending and active silences, the soonest to end first."""
        return sorted(
            (s for s in self._open.values() if s.state(now_ms) is not SilenceState.EXPIRED),
            key=lambda s: (s.ends_unix_ms, _number(s.id)),
        )

    def expired(self, now_ms: int, limit: int) -> list[Silence]:
        """Expired silences, the latest to end first, at most `limit`."""
        ended = [*self._ended.values(), *self.due(now_ms)]
        ended.sort(key=lambda s: (s.ends_unix_ms, _number(s.id)), reverse=True)
        return ended[:limit]

    def covering(self, labels: Mapping[str, str], now_ms: int) -> Silence | None:
        """The active silence matching `labels` that ends last, if any."""
        key = frozenset(labels.items())
        matching = self._matching.get(key)
        if matching is None:
            if len(self._matching) >= MAX_MEMO:
                self._matching.clear()
            matching = tuple(s for s in self._open.values() if s.matches(labels))
            self._matching[key] = matching
        return max(
            (s for s in matching if s.state(now_ms) is SilenceState.ACTIVE),
            key=lambda s: (s.ends_unix_ms, _number(s.id)),
            default=None,
        )

    @staticmethod
    def stored(silence: Silence, expiry_announced: bool) -> StoredRecord:
        return StoredRecord(
            KIND, silence.id, not expiry_announced, silence.ends_unix_ms,
            silence_message(silence).SerializeToString(),
        )  # fmt: skip


def _parse(body: bytes) -> Silence:
    return silence_record(pb.Silence.FromString(body))
