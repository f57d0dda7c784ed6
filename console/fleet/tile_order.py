"""The order of the fleet grid's tiles: the nodes' own, or hottest, busiest, idle or alerting first.

Plain Python over plain facts (no Qt): a view reads each GPU's facts and asks
for an order. Sorting is stable and by what a tile shows (whole degrees, whole
percent), so GPUs that look the same keep their node order and tiles do not
swap places over a tenth of a degree. Unknown values go last in every order.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


class TileOrder(enum.Enum):
    NODE = "node order"
    HOTTEST = "hottest first"
    BUSIEST = "busiest first"
    IDLE = "idle first"
    ALERTING = "alerting first"


@dataclass(frozen=True)
class TileFacts:
    """What an order looks at, as the tile shows it."""

    temperature_c: float | None
    utilisation_pct: float | None
    alert: int = 0  # 0 none, then higher for worse (info 1, warning 2, critical 3)


# A sort key per order: smaller first. Unknown is +inf: last, whatever the direction.
_KEYS: dict[TileOrder, Callable[[TileFacts], tuple[float, ...]]] = {
    TileOrder.HOTTEST: lambda f: (-_shown(f.temperature_c),),
    TileOrder.BUSIEST: lambda f: (-_shown(f.utilisation_pct),),
    TileOrder.IDLE: lambda f: (_shown(f.utilisation_pct, unknown=math.inf),),
    # Alerting first, worst first; among equals the hottest (what usually needs a look).
    TileOrder.ALERTING: lambda f: (-f.alert, -_shown(f.temperature_c)),
}


def _shown(number: float | None, unknown: float = -math.inf) -> float:
    """A value as the tile shows it (whole units); `unknown` for None or NaN."""
    if number is None or number != number:
        return unknown
    return float(round(number))


def order_key(order: TileOrder) -> Callable[[TileFacts], tuple[float, ...]] | None:
    """The sort key of an order; None for the node order (nothing to sort)."""
    return _KEYS.get(order)


def ordered(items: Sequence[T], facts: Callable[[T], TileFacts], order: TileOrder) -> list[T]:
    """`items` in `order`; stable, so equals keep the order they came in."""
    key = _KEYS.get(order)
    if key is None:
        return list(items)
    return sorted(items, key=lambda item: key(facts(item)))


def ordered_groups(
    groups: Sequence[Sequence[T]], facts: Callable[[T], TileFacts], order: TileOrder
) -> list[tuple[int, list[T]]]:
    """Each group's members in `order`, and the groups by their first member (the group
    with the hottest GPU first...); returns (original group position, members) pairs."""
    key = _KEYS.get(order)
    if key is None:
        return [(i, list(g)) for i, g in enumerate(groups)]
    keyed = [[(key(facts(item)), item) for item in g] for g in groups]  # each GPU read once
    inside = [(i, sorted(g, key=_first)) for i, g in enumerate(keyed)]
    inside.sort(key=lambda pair: pair[1][0][0] if pair[1] else (math.inf,))
    return [(i, [item for _, item in g]) for i, g in inside]


def _first(pair: tuple[tuple[float, ...], object]) -> tuple[float, ...]:
    return pair[0]
