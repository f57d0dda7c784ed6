"""Flap tracking and the popup budget: the counting half of the notify policy. No Qt.

Both count in the console's clock (when the console learned of a raise), never the
daemon's: a node whose clock is off must not make its alerts pop sooner or later.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field

HOUR_S = 3600.0
AlertUid = tuple[str, str]  # (node target, alert id)
FlapKey = tuple[str, str]  # (node target, alert key): one condition, whatever its alert ids


@dataclass
class _Raises:
    times: deque[float] = field(default_factory=deque)
    latest: AlertUid = ("", "")
    flapping: bool = False


class FlapTracker:
    """Raises per condition within a sliding window; a condition raised `count` times flaps.

    It stays flapping until it has gone a whole window without being raised.
    """

    def __init__(self, count: int, window_s: float) -> None:
        self._count, self._window_s = count, window_s
        self._keys: dict[FlapKey, _Raises] = {}
        self._flapping: set[FlapKey] = set()
        self._pruned_s = 0.0

    def raised(self, key: FlapKey, uid: AlertUid, now_s: float) -> int | None:
        """Count a raise; the number of raises in the window if this one starts a flap."""
        raises = self._keys.setdefault(key, _Raises())
        raises.latest = uid
        raises.times.append(now_s)
        self._drop_old(raises, now_s)
        if self._count and not raises.flapping and len(raises.times) >= self._count:
            raises.flapping = True
            self._flapping.add(key)
            return len(raises.times)
        return None

    def flapping(self, key: FlapKey) -> bool:
        return key in self._flapping

    def count(self, key: FlapKey) -> int:
        """Raises of the condition within the window, as of its latest raise."""
        raises = self._keys.get(key)
        return len(raises.times) if raises is not None else 0

    def settled(self, now_s: float) -> list[tuple[FlapKey, AlertUid]]:
        """Flapping conditions not raised for a whole window: no longer flapping.

        Returns each with its newest alert, which may be firing still (steady now).
        """
        calm = [
            key for key in self._flapping if self._keys[key].times[-1] <= now_s - self._window_s
        ]
        for key in calm:
            self._flapping.discard(key)
            self._keys[key].flapping = False
        self._prune(now_s)
        return [(key, self._keys[key].latest) for key in calm]

    def _drop_old(self, raises: _Raises, now_s: float) -> None:
        while raises.times and raises.times[0] <= now_s - self._window_s:
            raises.times.popleft()

    def _prune(self, now_s: float) -> None:
        # Once a window: forget conditions not raised within it (bounded memory).
        if now_s - self._pruned_s < self._window_s:
            return
        self._pruned_s = now_s
        for key, raises in list(self._keys.items()):
            self._drop_old(raises, now_s)
            if not raises.times and not raises.flapping:
                del self._keys[key]


class PopupBudget:
    """At most `per_hour` non-critical notifications in any hour; counts what it held back."""

    def __init__(self, per_hour: int, summary_every_s: float) -> None:
        self._per_hour, self._summary_every_s = per_hour, summary_every_s
        self._sent: deque[float] = deque()
        self._held: deque[tuple[float, str]] = deque()  # (when, rule) per alert held back
        self._unreported = 0
        self._summary_s: float | None = None

    def take(self, now_s: float) -> bool:
        """Spend one popup now, if the last hour leaves one."""
        while self._sent and self._sent[0] <= now_s - HOUR_S:
            self._sent.popleft()
        if len(self._sent) >= self._per_hour:
            return False
        self._sent.append(now_s)
        return True

    def hold_back(self, now_s: float, rules: list[str]) -> None:
        self._held.extend((now_s, rule) for rule in rules)
        self._unreported += len(rules)

    def summary_due(self, now_s: float) -> Counter[str] | None:
        """What was held back in the last hour, by rule, when a summary is due."""
        if not self._unreported:
            return None
        if self._summary_s is not None and now_s - self._summary_s < self._summary_every_s:
            return None
        while self._held and self._held[0][0] <= now_s - HOUR_S:
            self._held.popleft()
        self._summary_s, self._unreported = now_s, 0
        return Counter(rule for _, rule in self._held)
