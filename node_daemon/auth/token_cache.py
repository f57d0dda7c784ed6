"""Verified JWTs by their exact text: a repeat call skips the signature check.

Bounded (least recently used goes first), and an entry is never used past its
token's exp: after that the token is verified again, and refused. The cache
belongs to one auth state: a reload starts an empty one, so a key removed from
the JWKS stops working at once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from node_daemon.auth.jwt import VerifiedToken

MAX_ENTRIES = 1024


class TokenCache:
    def __init__(self, max_entries: int = MAX_ENTRIES) -> None:
        self._entries: OrderedDict[str, VerifiedToken] = OrderedDict()
        self._max = max_entries
        self._lock = threading.Lock()

    def get(self, token: str, now: float) -> VerifiedToken | None:
        with self._lock:
            found = self._entries.get(token)
            if found is None:
                return None
            if now >= found.expires_unix_s:
                del self._entries[token]
                return None
            self._entries.move_to_end(token)
            return found

    def put(self, token: str, verified: VerifiedToken) -> None:
        with self._lock:
            self._entries[token] = verified
            self._entries.move_to_end(token)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)
