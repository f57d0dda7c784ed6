"""Which self-healing events pop up, and in what words.

Self-healing that acted (done, refused or failed) pops up once per frame's
events, grouped by node: an on-call wants to know that something was drained,
capped, killed or reset without them, and when it tried and could not. Dry-run
"would" actions do not pop up: they are for judging a policy before turning it
on, and a popup per "would" teaches people to dismiss popups; they are in the
Events tab. A GPU entering needs reset/reboot/inspection pops up as the node's
own critical alert, so health-change events never pop up here (no second popup
for the same fault). Replayed events (a reconnect's catch-up) never pop up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from console.fleet.alerts import EventRow

HEALING_KIND = "healing_action"


@dataclass(frozen=True)
class HealingNotice:
    title: str  # "Self-healing on gpu-node-03"
    body: str  # the sentences, one a line
    # What it is about, (node, GPU) each (None: the node as a whole): kept in sight.
    places: tuple[tuple[str, int | None], ...] = ()


def healing_notices(
    events: Iterable[EventRow], name_of: Callable[[str], str]
) -> list[HealingNotice]:
    """One notice per node whose self-healing acted in these events."""
    by_node: dict[str, list[str]] = {}
    places: dict[str, list[tuple[str, int | None]]] = {}
    for event in events:
        healing = event.healing
        if event.kind != HEALING_KIND or event.replayed or healing is None or not healing.acted:
            continue
        by_node.setdefault(event.target, []).append(event.summary)
        place = (event.target, event.gpu_index)
        if place not in places.setdefault(event.target, []):
            places[event.target].append(place)
    return [
        HealingNotice(f"Self-healing on {name_of(target)}", "\n".join(sentences),
                      tuple(places[target]))
        for target, sentences in by_node.items()
    ]  # fmt: skip
