"""DenialLimiter: denied calls are recorded at a bounded rate, whoever sends them.

Every denied call once added a full audit record (about 5 KB written with its
WAL frame), so one client without a token could fill the state disk at
megabytes a second. Now denials are grouped by kind: the peer's address
without its port, the user, the method, and the reason as the daemon names it
(`UNAUTHENTICATED: invalid JWT`), never text the caller chose: a kind keyed on
the refusal message, which quotes a token's kid or alg, let each forged token
be a new kind and a new record.

Within an interval (60 s) the first denial of a kind is written in full and
its repeats are counted; when the interval ends, one summary record per kind
says how many there were and between when. The total is bounded as well, per
budget: the unauthenticated callers, whatever their number of peers, share one
of MAX_RECORDS denials in full and MAX_RECORDS kind summaries per interval, and
every authenticated user has one of MAX_RECORDS_PER_USER each (a user has at
most methods x reasons kinds from each address, and is known: revoke them).
Past its budget, a denial is only counted, into one "(other peers)" summary per
interval (with counts by reason and method, and how many peers). So callers
without a credential write at most 2 * MAX_RECORDS + 1 denial records a minute,
each bounded in size, and their flood cannot crowd out the record of what a
known user was refused (the number of users is the configuration's or the
identity provider's, not the caller's choice).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field

INTERVAL_S = 60.0
# Kinds remembered at once (memory): past this, denials are counted as other peers'.
MAX_KINDS = 1000
# Denial records written in full, and kind summaries, per interval (each): for every
# unauthenticated caller together, and for each authenticated user.
MAX_RECORDS = 10
MAX_RECORDS_PER_USER = 64
UNAUTHENTICATED = "(unauthenticated)"  # the user of a denial to a caller with no identity
OTHER_PEERS = "(other peers)"
VARIOUS = "(various)"


@dataclass(frozen=True)
class DenialKind:
    host: str  # the peer without its port: a reconnecting client is the same kind
    user: str
    method: str
    reason: str  # "UNAUTHENTICATED: invalid JWT": the daemon's words, never the caller's

    @property
    def budget(self) -> str:
        """Whose share of the bound this denial takes: its user's, or every anonymous caller's."""
        return self.user  # UNAUTHENTICATED for every caller without an identity


@dataclass
class Spell:
    """Repeats of one kind of denial in the current interval."""

    first_record: int  # the seq of the record written in full, 0 if it could not be
    count: int = 0
    first_ms: int = 0
    last_ms: int = 0

    def count_one(self, now_ms: int) -> None:
        self.count += 1
        self.first_ms = self.first_ms or now_ms
        self.last_ms = now_ms


@dataclass
class Overflow:
    """Denials past the interval's bound, counted only."""

    spell: Spell = field(default_factory=lambda: Spell(0))
    hosts: set[str] = field(default_factory=set)  # at most MAX_KINDS: a count, not a list
    reasons: Counter[str] = field(default_factory=Counter)
    methods: Counter[str] = field(default_factory=Counter)

    def add(self, kind: DenialKind, count: int, first_ms: int, last_ms: int) -> None:
        spell = self.spell
        spell.count += count
        spell.first_ms = min(spell.first_ms or first_ms, first_ms)
        spell.last_ms = max(spell.last_ms, last_ms)
        if len(self.hosts) < MAX_KINDS:
            self.hosts.add(kind.host)
        self.reasons[kind.reason] += count
        self.methods[kind.method.rpartition("/")[2]] += count


@dataclass(frozen=True)
class Summary:
    """One summary record to write: its user, peer, method, params and result."""

    user: str
    peer: str
    method: str
    params: str
    result: str


def peer_host(peer: str) -> str:
    """`ipv4:10.0.0.5:51234` -> `ipv4:10.0.0.5`; `ipv6:[::1]:5000` -> `ipv6:[::1]`."""
    head, sep, port = peer.rpartition(":")
    return head if sep and port.isdigit() and ":" in head else peer


def _span(first_ms: int, last_ms: int) -> str:
    def utc(unix_ms: int) -> str:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(unix_ms / 1000))

    return f"{utc(first_ms)}..{utc(last_ms)} UTC"


def kind_summary(kind: DenialKind, spell: Spell) -> Summary:
    """`DENIED: UNAUTHENTICATED: invalid JWT [N more like record 1 from ipv4:…, …]`."""
    like = f" like record {spell.first_record}" if spell.first_record else ""
    result = f"DENIED: {kind.reason} [{spell.count} more{like} from {kind.host}, " + (
        f"{_span(spell.first_ms, spell.last_ms)}]"
    )
    params = json.dumps({"repeats": spell.count, "first_unix_ms": spell.first_ms,
                         "last_unix_ms": spell.last_ms,
                         "first_record": spell.first_record})  # fmt: skip
    return Summary(kind.user, kind.host, kind.method, params, result)


def overflow_summary(overflow: Overflow, max_records: int) -> Summary:
    """The denials past the bound: how many, from how many peers, for which reasons."""
    spell, peers = overflow.spell, len(overflow.hosts)
    at_least = "at least " if peers >= MAX_KINDS else ""
    span = _span(spell.first_ms, spell.last_ms)
    result = (f"DENIED: {spell.count} more denials from {at_least}{peers} peers, past the "
              f"{max_records} kinds recorded per interval [{span}]")  # fmt: skip
    params = json.dumps({"repeats": spell.count, "peers": peers,
                         "by_reason": dict(overflow.reasons.most_common()),
                         "by_method": dict(overflow.methods.most_common()),
                         "first_unix_ms": spell.first_ms,
                         "last_unix_ms": spell.last_ms})  # fmt: skip
    return Summary(VARIOUS, OTHER_PEERS, VARIOUS, params, result)


class DenialLimiter:
    """Decides which denials are written in full; keeps the count of the others.

    Not thread-safe by itself: the audit log calls it under its lock.

    Args:
        interval_s: the length of one interval.
        max_kinds: kinds remembered at once.
        max_records: denials to unauthenticated callers written in full per interval,
            and their kind summaries.
        max_records_per_user: the same for each authenticated user.
    """

    def __init__(self, interval_s: float = INTERVAL_S, max_kinds: int = MAX_KINDS,
                 max_records: int = MAX_RECORDS,
                 max_records_per_user: int = MAX_RECORDS_PER_USER) -> None:  # fmt: skip
        self._interval_ms = int(interval_s * 1000)
        self._max_kinds, self._max_records = max_kinds, max_records
        self._max_per_user = max_records_per_user
        self._spells: dict[DenialKind, Spell] = {}
        self._window_start_ms: int | None = None
        self._written: Counter[str] = Counter()  # by budget: denials in full this interval
        self._overflow = Overflow()

    def admit(self, kind: DenialKind, now_ms: int) -> bool:
        """True: write this denial in full (then `recorded`); False: it was counted."""
        spell = self._spells.get(kind)
        if spell is not None:
            spell.count_one(now_ms)
            return False
        if self._written[kind.budget] >= self._limit(kind) or len(self._spells) >= self._max_kinds:
            self._overflow.add(kind, 1, now_ms, now_ms)
            return False
        # Counted from now even if the write fails: a full disk must not turn every
        # denial into a write attempt and an ERROR line.
        self._spells[kind] = Spell(0)
        self._written[kind.budget] += 1
        return True

    def _limit(self, kind: DenialKind) -> int:
        return self._max_records if kind.budget == UNAUTHENTICATED else self._max_per_user

    def recorded(self, kind: DenialKind, seq: int) -> None:
        """The denial admitted for `kind` was written as record `seq`."""
        spell = self._spells.get(kind)
        if spell is not None:
            spell.first_record = seq

    def due(self, now_ms: int) -> list[Summary]:
        """The summaries of the interval, once it is over; [] before.

        A kind with repeats keeps being counted (the next interval); one without
        is forgotten, so its next denial is written in full again.
        """
        if self._window_start_ms is None:
            self._window_start_ms = now_ms
        if now_ms < self._window_start_ms + self._interval_ms:
            return []
        summaries = self._summaries()
        self._spells = {k: Spell(s.first_record) for k, s in self._spells.items() if s.count}
        self._window_start_ms, self._written, self._overflow = now_ms, Counter(), Overflow()
        return summaries

    def drain(self) -> list[Summary]:
        """Every summary not yet written (at stop)."""
        summaries = self._summaries()
        self._spells.clear()
        self._window_start_ms, self._written, self._overflow = None, Counter(), Overflow()
        return summaries

    def _summaries(self) -> list[Summary]:
        summaries: list[Summary] = []
        per_budget: Counter[str] = Counter()
        for kind, spell in self._spells.items():
            if not spell.count:
                continue
            if per_budget[kind.budget] < self._limit(kind):
                per_budget[kind.budget] += 1
                summaries.append(kind_summary(kind, spell))
            else:  # the bound holds for summaries too: the rest are merged
                self._overflow.add(kind, spell.count, spell.first_ms, spell.last_ms)
        if self._overflow.spell.count:
            summaries.append(overflow_summary(self._overflow, self._max_records))
        return summaries
