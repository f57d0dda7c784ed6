"""The teams of JWT users, as their latest verified token named them.

A JWT user is in no [[auth.users]] and no [teams] table: their teams come with
each token. Placement and usage ask for a user's teams without a call in hand
(a queued workload of alice's may start on a GPU reserved for team:ml), so the
daemon remembers what the newest token of each user said. In memory only:
after a restart a user's teams are known again from their next call.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

MAX_USERS = 10_000


class SeenTeams:
    def __init__(self, max_users: int = MAX_USERS) -> None:
        self._teams: OrderedDict[str, tuple[str, ...]] = OrderedDict()
        self._max = max_users
        self._lock = threading.Lock()

    def saw(self, user: str, teams: tuple[str, ...]) -> None:
        with self._lock:
            self._teams[user] = teams
            self._teams.move_to_end(user)
            while len(self._teams) > self._max:
                self._teams.popitem(last=False)

    def holders_of(self, user: str) -> tuple[str, ...]:
        """team:NAME for each team the user's latest JWT named."""
        with self._lock:
            return tuple(f"team:{team}" for team in self._teams.get(user, ()))
