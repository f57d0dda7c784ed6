"""DataWatchdog: which nodes have gone quiet, judged by when their sample batches arrived.

The link state alone cannot tell: a hung daemon, or a link that drops packets
without a reset, keeps the TCP connection open and the link "connected" until
keepalive gives up, and the tiles' numbers freeze meanwhile. So the watchdog
times the data itself: a node is *stale* when no batch arrived within
STALE_INTERVALS of its sampling interval; it is *not responding* when it is
stale, or when its link has been down for LINK_GRACE_S (the keepalive's word,
which is the quicker of the two where a node samples slowly).

Silence is counted only while the console itself could listen: where it is told
(`listen_from`, the network thread's heartbeat), a node's silence starts no
earlier than the end of the console's latest stall, and nothing is judged stale
while a stall lasts. A suspended laptop or a starved CPU is not every node going
quiet at once.

Plain Python, no Qt: the fleet model feeds it arrivals and link states, the
frame pump asks for the verdicts once per frame. The clock (monotonic seconds)
is injected, so tests drive it by hand.
"""

from __future__ import annotations

import itertools
import statistics
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from console.fleet.updates import LinkState

# A node is stale after this many sampling intervals without a batch.
STALE_INTERVALS = 3
# ...but never sooner: at a 100 ms tick three intervals are a garbage collection away.
MIN_STALE_S = 1.0
# A link down this long means not responding, however slowly the node samples.
LINK_GRACE_S = 2.0
# Until the inventory or the batches say otherwise (the daemon's default tick).
DEFAULT_INTERVAL_S = 1.0
# Batch timestamps kept to estimate the interval where the inventory does not give it.
_STAMPS = 6

Clock = Callable[[], float]
# Since when the console has been able to listen (its clock); None: it cannot say.
ListeningSince = Callable[[], float | None]


@dataclass(frozen=True)
class Quiet:
    """A node that has gone quiet: how long, since which batch, and what its link says."""

    target: str
    silent_s: float  # since the newest batch arrived (console clock)
    stale_after_s: float  # the node's deadline: STALE_INTERVALS x its interval
    last_batch_unix_s: float  # the newest batch's own time (the node's clock)
    link: LinkState
    link_detail: str
    link_down_s: float | None  # how long the link has not been connected; None: it is
    stale: bool  # no batch within the deadline: its numbers are old
    not_responding: bool  # stale, or its link down for LINK_GRACE_S


@dataclass
class _Watch:
    arrived_s: float | None = None  # None: no batch yet, nothing to judge
    last_batch_unix_s: float = 0.0
    interval_s: float = 0.0  # from the inventory; 0: not given
    stamps: deque[float] = field(default_factory=lambda: deque(maxlen=_STAMPS))
    link: LinkState = LinkState.CONNECTING
    link_detail: str = ""
    down_since_s: float | None = None
    deadline_s: float = max(MIN_STALE_S, STALE_INTERVALS * DEFAULT_INTERVAL_S)


class DataWatchdog:
    """Per node: when its last batch arrived, its sampling interval, its link state."""

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._watches: dict[str, _Watch] = {}
        self._listening_since: ListeningSince = lambda: None

    def listen_from(self, listening_since: ListeningSince) -> None:
        """Where to learn since when the console could listen (on the same clock)."""
        self._listening_since = listening_since

    # -- what happened ---------------------------------------------------------

    def set_interval(self, target: str, interval_s: float) -> None:
        """The node's sampling interval, as its inventory states it (0: unknown)."""
        watch = self._watch(target)
        watch.interval_s = interval_s
        watch.deadline_s = _deadline_s(watch)

    def batch(self, target: str, batch_unix_s: float) -> None:
        """A batch of the node arrived now; `batch_unix_s` is its own timestamp."""
        watch = self._watch(target)
        watch.arrived_s = self._clock()
        if batch_unix_s > watch.last_batch_unix_s:
            watch.last_batch_unix_s = batch_unix_s
            watch.stamps.append(batch_unix_s)
            if watch.interval_s <= 0:
                watch.deadline_s = _deadline_s(watch)

    def link(self, target: str, state: LinkState, detail: str = "") -> None:
        watch = self._watch(target)
        if state is LinkState.CONNECTED:
            watch.down_since_s = None
        elif watch.down_since_s is None:
            watch.down_since_s = self._clock()
        watch.link, watch.link_detail = state, detail

    def forget(self, target: str) -> None:
        self._watches.pop(target, None)

    # -- verdicts --------------------------------------------------------------

    def stale_after_s(self, target: str) -> float:
        """How long the node may send nothing before it is stale."""
        return self._watch(target).deadline_s

    def quiet(self) -> dict[str, Quiet]:
        """Every node that is stale or whose link is down, now; fresh nodes are absent.

        A node that never sent a batch is not judged: its link state says what is
        wrong (connecting, unreachable, denied).
        """
        now = self._clock()
        listening = self._listening_since()
        found: dict[str, Quiet] = {}
        for target, watch in self._watches.items():
            if watch.arrived_s is None:
                continue
            if watch.link is LinkState.CONNECTED and now - watch.arrived_s <= watch.deadline_s:
                continue  # the common case, every frame for every node: kept cheap
            verdict = self._judge(target, watch, now, listening)
            if verdict.stale or verdict.link is not LinkState.CONNECTED:
                found[target] = verdict
        return found

    def _judge(self, target: str, watch: _Watch, now: float, listening: float | None) -> Quiet:
        assert watch.arrived_s is not None
        silent_s = now - watch.arrived_s
        deadline = watch.deadline_s
        # Heard from last, as far as the node's fault goes: silence while the console
        # could not listen does not count.
        heard_s = watch.arrived_s if listening is None else max(watch.arrived_s, listening)
        stale = now - heard_s > deadline
        down_s = None if watch.down_since_s is None else now - watch.down_since_s
        down = down_s is not None and down_s >= LINK_GRACE_S
        return Quiet(
            target, silent_s, deadline, watch.last_batch_unix_s, watch.link, watch.link_detail,
            down_s, stale, stale or down,
        )  # fmt: skip

    def _watch(self, target: str) -> _Watch:
        return self._watches.setdefault(target, _Watch())


def _deadline_s(watch: _Watch) -> float:
    return max(MIN_STALE_S, STALE_INTERVALS * _interval_s(watch))


def _interval_s(watch: _Watch) -> float:
    """The inventory's interval, else the median step of the newest batch timestamps."""
    if watch.interval_s > 0:
        return watch.interval_s
    steps = [b - a for a, b in itertools.pairwise(watch.stamps)]
    return statistics.median(steps) if steps else DEFAULT_INTERVAL_S
