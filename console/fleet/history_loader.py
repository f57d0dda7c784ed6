"""HistoryLoader: what the plots need from before the ring, fetched once, answered when ready.

The plots ask each frame (`slice_for`); the loader answers from its cache or
sends one ask (off the GUI thread, through the `HistoryAsker`) and says
"loading". An answer is kept only if it is the one awaited: a newer range or
another GPU cancels the older ask, and its answer, should it still come, is
dropped. No Qt: the view wires `take` to the frame pump's query answers.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

from console.fleet.history_range import (
    DAEMON,
    PROMETHEUS,
    HistorySlice,
    TierReach,
    choose_source,
    prometheus_step_s,
    source_note,
)
from console.fleet.query_round import next_query_id
from console.fleet.updates import QueryResult

# Slices kept (~100 KiB each at 2,000 points): a few ranges of each GPU a person flips between.
CACHE_SLICES: Final = 32
# A source that failed is not asked again for this long (the other one is, if there is one).
RETRY_AFTER_S: Final = 30.0
LOADING: Final = "loading history…"

Cancel = Callable[[], None]


@dataclass(frozen=True)
class HistoryAsk:
    """One fetch: a GPU's plotted metrics over [start, end] from one source."""

    target: str
    gpu: int
    uuid: str  # the GPU's UUID: Prometheus's dcgm-exporter label
    source: str  # DAEMON or PROMETHEUS
    start_s: float
    end_s: float
    step_s: float  # Prometheus's step; the daemon picks its tier by MAX_POINTS


class HistoryAsker(Protocol):
    def ask(self, ask: HistoryAsk, query_id: int) -> Cancel:
        """Send the ask off the GUI thread; a QueryResult with `query_id` comes back."""
        ...


@dataclass(frozen=True)
class Wanted:
    """What the plots show now, and what the ring already holds."""

    target: str
    gpu: int
    uuid: str
    node: str  # the node's name, for the note
    tiers: tuple[TierReach, ...]
    start_s: float
    end_s: float
    ring_first_s: float  # the ring's oldest sample (inf: none yet)


def _key(ask: HistoryAsk) -> tuple[str, int, str, float]:
    """Asks alike but for where they start: one in flight is left to land (a pan sends one
    ask per round trip, not one per mouse move); its answer then shows what is still missing."""
    return ask.target, ask.gpu, ask.source, ask.step_s


class HistoryLoader:
    def __init__(
        self,
        asker: HistoryAsker,
        prometheus: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._asker, self.prometheus, self._clock = asker, prometheus, clock
        self._cache: collections.OrderedDict[tuple[str, int], list[HistorySlice]] = (
            collections.OrderedDict()
        )
        self._pending: dict[int, tuple[HistoryAsk, Cancel]] = {}
        self._failed: dict[tuple[str, str], tuple[float, str]] = {}  # (target, source) -> until
        self._cancelled: collections.deque[int] = collections.deque(maxlen=64)
        self.dropped = 0  # answers that came for an ask no longer wanted

    def slice_for(self, wanted: Wanted) -> tuple[HistorySlice | None, str | None]:
        """The slice to draw before the ring (None: the ring alone) and the note to show.

        No note where no source holds history: the plots say what the ring holds.
        """
        end = min(wanted.end_s, wanted.ring_first_s)
        if end <= wanted.start_s + 1.0:
            self._cancel_all()
            return None, None  # the ring holds the whole range
        source, why_not = self._source(wanted)
        if source is None:
            self._cancel_all()
            return None, why_not
        span = wanted.end_s - wanted.start_s
        found = self._cached(wanted, source, end, span)
        if found is not None:
            return found, source_note(found, wanted.start_s, wanted.node)
        self._ask(wanted, source, span)
        return self._any_cached(wanted), LOADING

    def take(self, result: QueryResult) -> bool:
        """Keep an awaited answer; True when the plots should redraw."""
        awaited = self._pending.pop(result.query_id, None)
        if awaited is None:
            if result.query_id in self._cancelled:
                self.dropped += 1  # a range or GPU no longer shown
            return False
        ask, _ = awaited
        if not result.ok or not isinstance(result.payload, HistorySlice):
            self._failed[(ask.target, ask.source)] = (self._clock() + RETRY_AFTER_S, result.message)
            return True
        self._failed.pop((ask.target, ask.source), None)
        slices = self._cache.setdefault((ask.target, ask.gpu), [])
        slices.insert(0, result.payload)
        self._cache.move_to_end((ask.target, ask.gpu))
        self._trim()
        return True

    @property
    def pending(self) -> int:
        return len(self._pending)

    def _source(self, wanted: Wanted) -> tuple[str | None, str | None]:
        """The source to ask, skipping one that failed lately (and why, if none is left)."""
        prometheus = self.prometheus and self._usable(wanted.target, PROMETHEUS)
        tiers = wanted.tiers if self._usable(wanted.target, DAEMON) else ()
        source = choose_source(wanted.start_s, tiers, prometheus)
        if source is not None:
            return source, None
        names = {DAEMON: wanted.node, PROMETHEUS: "Prometheus"}
        failures = [
            f"{names[s]}: {self._failed[(wanted.target, s)][1]}"
            for s in (DAEMON, PROMETHEUS)
            if (wanted.target, s) in self._failed
        ]
        return None, ("history failed: " + "; ".join(failures)) if failures else None

    def _usable(self, target: str, source: str) -> bool:
        failed = self._failed.get((target, source))
        return failed is None or failed[0] <= self._clock()

    def _cached(
        self, wanted: Wanted, source: str, end_s: float, span_s: float
    ) -> HistorySlice | None:
        for found in self._cache.get((wanted.target, wanted.gpu), ()):
            # Asked for about this span (not a far coarser one) and reaching the ring.
            fine_enough = found.end_s - found.start_s <= 2 * span_s
            if found.source == source and fine_enough and found.covers(wanted.start_s, end_s):
                return found
        return None

    def _any_cached(self, wanted: Wanted) -> HistorySlice | None:
        """While a fetch runs: the best slice held for this GPU, so the plot is not empty."""
        slices = self._cache.get((wanted.target, wanted.gpu), [])
        return slices[0] if slices else None

    def _ask(self, wanted: Wanted, source: str, span_s: float) -> None:
        step = prometheus_step_s(span_s)
        # Aligned to the step: a live range that moves by a second asks the same again.
        start = math.floor(wanted.start_s / step) * step
        end = wanted.end_s
        if end < wanted.ring_first_s:
            # Wholly before the ring (a past moment's range, incident replay): half a span
            # more, up to the ring, so a range that moves on (Play) stays covered a while.
            end = min(end + span_s / 2, wanted.ring_first_s)
        ask = HistoryAsk(wanted.target, wanted.gpu, wanted.uuid, source, start, end, step)
        if any(_key(pending) == _key(ask) for pending, _ in self._pending.values()):
            return
        self._cancel_all()
        query_id = next_query_id()
        self._pending[query_id] = (ask, self._asker.ask(ask, query_id))

    def _cancel_all(self) -> None:
        for query_id, (_, cancel) in self._pending.items():
            cancel()
            self._cancelled.append(query_id)
        self._pending.clear()

    def _trim(self) -> None:
        while sum(len(s) for s in self._cache.values()) > CACHE_SLICES:
            oldest = next(iter(self._cache))
            self._cache[oldest].pop()
            if not self._cache[oldest]:
                del self._cache[oldest]
