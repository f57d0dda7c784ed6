"""DenialLimiter: repeated denials from one peer are counted, not each written in full.

Every denied call once added a full audit record (about 5 KB written with its
WAL frame), so one client without a token could fill the state disk at
megabytes a second. Now the first denial of a kind (same peer address without
its port, user, method and reason) is recorded in full; repeats within the
interval are only counted, and one summary record per kind and interval says
how many there were and between when.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

INTERVAL_S = 60.0
# Kinds tracked at once. Past this (an attacker with many addresses), new
# peers share one "(other peers)" kind per user, method and reason.
MAX_KINDS = 1000
OTHER_PEERS = "(other peers)"


@dataclass(frozen=True)
class DenialKind:
    host: str  # the peer without its port: a reconnecting client is the same kind
    user: str
    method: str
    result: str


@dataclass
class Spell:
    """Repeats of one kind of denial since `window_start_ms`."""

    window_start_ms: int
    first_record: int  # the seq of the record written in full, 0 if it could not be
    count: int = 0
    first_ms: int = 0
    last_ms: int = 0


def peer_host(peer: str) -> str:
    """`ipv4:10.0.0.5:51234` -> `ipv4:10.0.0.5`; `ipv6:[::1]:5000` -> `ipv6:[::1]`."""
    head, sep, port = peer.rpartition(":")
    return head if sep and port.isdigit() and ":" in head else peer


class DenialLimiter:
    """Decides which denials are written in full; keeps the count of the others.

    Not thread-safe by itself: the audit log calls it under its lock.
    """

    def __init__(self, interval_s: float = INTERVAL_S, max_kinds: int = MAX_KINDS) -> None:
        self._interval_ms = int(interval_s * 1000)
        self._max_kinds = max_kinds
        # Oldest window first, so the ones that are due are at the front.
        self._spells: OrderedDict[DenialKind, Spell] = OrderedDict()

    def kind_of(self, kind: DenialKind) -> DenialKind:
        """The kind it is counted under: its own, or its peers' share once the table is full."""
        if kind in self._spells or len(self._spells) < self._max_kinds:
            return kind
        return DenialKind(OTHER_PEERS, kind.user, kind.method, kind.result)

    def is_repeat(self, kind: DenialKind, now_ms: int) -> bool:
        """True (and counted) when this kind was recorded within the interval."""
        spell = self._spells.get(kind)
        if spell is None:
            return False
        spell.count += 1
        spell.first_ms = spell.first_ms or now_ms
        spell.last_ms = now_ms
        return True

    def recorded(self, kind: DenialKind, seq: int, now_ms: int) -> None:
        """A denial of a new kind: written in full as record `seq` (0: it could not be)."""
        self._spells[kind] = Spell(now_ms, seq)

    def due(self, now_ms: int) -> list[tuple[DenialKind, Spell]]:
        """Spells whose interval is over and that have repeats to summarise.

        A kind with repeats keeps being counted (a new window); one without is
        forgotten, so its next denial is written in full again.
        """
        summaries = []
        while self._spells:
            kind, spell = next(iter(self._spells.items()))
            if spell.window_start_ms + self._interval_ms > now_ms:
                break
            del self._spells[kind]
            if spell.count:
                summaries.append((kind, spell))
                self._spells[kind] = Spell(now_ms, spell.first_record)
        return summaries

    def drain(self) -> list[tuple[DenialKind, Spell]]:
        """Every spell with repeats not yet summarised (at stop)."""
        pending = [(k, s) for k, s in self._spells.items() if s.count]
        self._spells.clear()
        return pending
