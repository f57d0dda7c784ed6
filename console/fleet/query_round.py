"""QueryRound: one refresh of a fleet-wide view, a query per node, answered one by one.

A newer round replaces an older one; answers to the older round are dropped,
so a slow node cannot overwrite a newer refresh with old data.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from console.fleet.updates import QueryResult

_ids = itertools.count(1)


def next_query_id() -> int:
    """A query id unique in this process (answers are matched to questions by it)."""
    return next(_ids)


@dataclass
class QueryRound:
    # query id -> (node target, what the query is for, e.g. a grouping)
    pending: dict[int, tuple[str, str]] = field(default_factory=dict)
    answers: list[tuple[str, str, object]] = field(default_factory=list)  # target, key, payload
    errors: dict[str, str] = field(default_factory=dict)  # target -> why it gave no answer
    skipped: dict[str, str] = field(default_factory=dict)  # target -> why it was not asked

    def expect(self, target: str, key: str = "") -> int:
        query_id = next_query_id()
        self.pending[query_id] = (target, key)
        return query_id

    def take(self, result: QueryResult) -> bool:
        """Keep an answer of this round; False for answers to other rounds or askers."""
        asked = self.pending.pop(result.query_id, None)
        if asked is None:
            return False
        target, key = asked
        if result.ok:
            self.answers.append((target, key, result.payload))
        else:
            self.errors[target] = result.message
        return True

    @property
    def done(self) -> bool:
        return not self.pending

    def payloads(self, key: str = "") -> list[tuple[str, object]]:
        return [(target, payload) for target, k, payload in self.answers if k == key]

    def problems(self, name: Callable[[str], str] = str) -> str:
        """Nodes that did not answer or were not asked, and why, in one line."""
        parts = [f"{name(t)}: {why}" for t, why in {**self.skipped, **self.errors}.items()]
        return "; ".join(parts)
