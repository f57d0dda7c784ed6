"""How often self-healing may act: a node-wide budget an hour, and a cooldown per kind.

The budget counts what was done (or, in dry-run, would have been): a dry run
shows the limits biting where "on" would. Restorations (undrain, power
restore) give back what self-healing took and are never held back. The
cooldown is per action kind and GPU: GPU 3 drained again at most every
`cooldown_s`, while GPU 4 may be drained meanwhile.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from node_daemon.healing.model import RESTORATIONS, Action
from node_daemon.healing.settings import HealingSettings

HOUR_S = 3600.0
# Remembered (and kept across restarts) at most: far more than an hour's budget allows.
KEPT = 500


class RateLimits:
    """The actions taken, newest last: (cooldown key, when in Unix seconds)."""

    def __init__(self, history: Iterable[tuple[str, float]] = ()) -> None:
        self._taken: deque[tuple[str, float]] = deque(
            sorted(history, key=lambda item: item[1]), maxlen=KEPT
        )

    def why_not(self, action: Action, settings: HealingSettings, now_s: float) -> str | None:
        """None when `action` may go ahead now; else why not, in words."""
        if action.action in RESTORATIONS:
            return None
        in_hour = sum(1 for _, at_s in self._taken if now_s - at_s < HOUR_S)
        if in_hour >= settings.max_actions_per_hour:
            return f"{in_hour} actions in the last hour (max_actions_per_hour)"
        cooldown = getattr(settings, action.table).cooldown_s
        key = cooldown_key(action)
        last = max((at_s for k, at_s in self._taken if k == key), default=None)
        if last is not None and now_s - last < cooldown:
            ago = now_s - last
            return f"{action.action} of {action.target} {ago:.0f} s ago (cooldown_s {cooldown:g})"
        return None

    def take(self, action: Action, now_s: float) -> None:
        if action.action not in RESTORATIONS:
            self._taken.append((cooldown_key(action), now_s))

    def history(self) -> list[tuple[str, float]]:
        """What to keep across a restart."""
        return list(self._taken)


def cooldown_key(action: Action) -> str:
    # Per kind and GPU: a pid changes when a leaker is requeued, its GPU does not.
    return action.action if action.gpu is None else f"{action.action}/gpu{action.gpu}"
