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

from gpufleet.v1 import node_pb2 as pb
from node_daemon.alerts.silence_wire import silence_message, silence_record
from node_daemon.alerts.silences import Silence, SilenceState
from node_daemon.journal.event_journal import EventJournal, StoredRecord

KIND = "silence"
MAX_EXPIRED = 1000


def _number(silence_id: str) -> int:
    return int(silence_id.partition("-")[2] or 0)


class SilenceBook:
    def __init__(self, journal: EventJournal) -> None:
        journal.keep_inactive(KIND, MAX_EXPIRED)
        self._silences: dict[str, Silence] = {}
        self._announced: set[str] = set()  # ids whose expiry the journal has
        for body in journal.records(KIND, active_only=False):
            silence = silence_record(pb.Silence.FromString(body))
            self._silences[silence.id] = silence
        active = {silence_record(pb.Silence.FromString(b)).id for b in journal.records(KIND, True)}
        self._announced = set(self._silences) - active
        self._next = journal.highest_record_number(KIND) + 1

    def next_id(self) -> str:
        return f"s-{self._next}"

    def put(self, silence: Silence) -> None:
        """Add a new silence (with next_id()) or replace one by id."""
        self._silences[silence.id] = silence
        self._next = max(self._next, _number(silence.id) + 1)

    def drop(self, silence_id: str) -> None:
        """Forget a new silence that could not be stored; its number is free again."""
        self._silences.pop(silence_id, None)
        if _number(silence_id) == self._next - 1:
            self._next -= 1

    def get(self, silence_id: str) -> Silence | None:
        return self._silences.get(silence_id)

    def due(self, now_ms: int) -> list[Silence]:
        """Silences past their end whose expiry is not announced yet."""
        return [
            s for s in self._silences.values()
            if s.id not in self._announced and s.state(now_ms) is SilenceState.EXPIRED
        ]  # fmt: skip

    def announced(self, silence_id: str) -> None:
        """Its SILENCE_EXPIRED event is written (or held for the journal)."""
        self._announced.add(silence_id)
        expired = sorted(self._announced, key=_number)
        for old in expired[: max(0, len(expired) - MAX_EXPIRED)]:
            self._announced.discard(old)
            self._silences.pop(old, None)

    def live(self, now_ms: int) -> list[Silence]:
        """Pending and active silences, the soonest to end first."""
        return sorted(
            (s for s in self._silences.values() if s.state(now_ms) is not SilenceState.EXPIRED),
            key=lambda s: (s.ends_unix_ms, _number(s.id)),
        )

    def expired(self, now_ms: int, limit: int) -> list[Silence]:
        """Expired silences, the latest to end first, at most `limit`."""
        ended = [s for s in self._silences.values() if s.state(now_ms) is SilenceState.EXPIRED]
        ended.sort(key=lambda s: (s.ends_unix_ms, _number(s.id)), reverse=True)
        return ended[:limit]

    def covering(self, labels: dict[str, str], now_ms: int) -> Silence | None:
        """The active silence matching `labels` that ends last, if any."""
        return max(
            (s for s in self._silences.values() if s.covers(labels, now_ms)),
            key=lambda s: (s.ends_unix_ms, _number(s.id)),
            default=None,
        )

    @staticmethod
    def stored(silence: Silence, expiry_announced: bool) -> StoredRecord:
        return StoredRecord(
            KIND, silence.id, not expiry_announced, silence.ends_unix_ms,
            silence_message(silence).SerializeToString(),
        )  # fmt: skip
