"""What the usual ecosystem chain would take for the same page, computed (not measured).

    GPU -> DCGM field watch (dcgm-exporter --collect-interval) -> Prometheus scrape
        -> rule evaluation (+ the rule's `for:`) -> Alertmanager group_wait -> receiver

Each periodic stage adds a wait uniform between 0 and its period (the phases
of independent clocks are unrelated): best 0, typical (mean) half the period,
worst the whole period. `for:` adds exactly its duration rounded up to whole
evaluation intervals; a new Alertmanager group waits exactly `group_wait`.
The receiver's own delivery (pager, chat) is left out, as the console's
in-window popup has none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# Defaults, by name:
DCGM_COLLECT_INTERVAL_S = 30.0  # dcgm-exporter --collect-interval (-c) 30000 ms
PROMETHEUS_SCRAPE_INTERVAL_S = 60.0  # Prometheus global scrape_interval, default 1m
PROMETHEUS_EVALUATION_INTERVAL_S = 60.0  # Prometheus global evaluation_interval, default 1m
ALERTMANAGER_GROUP_WAIT_S = 30.0  # Alertmanager route group_wait, default 30s
ALERTMANAGER_GROUP_INTERVAL_S = 300.0  # route group_interval, default 5m (group already open)


@dataclass(frozen=True)
class Stage:
    name: str
    setting: str
    best_s: float
    typical_s: float
    worst_s: float


def periodic(name: str, setting: str, period_s: float) -> Stage:
    return Stage(name, setting, 0.0, period_s / 2, period_s)


def fixed(name: str, setting: str, delay_s: float) -> Stage:
    return Stage(name, setting, delay_s, delay_s, delay_s)


@dataclass(frozen=True)
class Chain:
    label: str
    stages: tuple[Stage, ...]

    def total(self) -> tuple[float, float, float]:
        return (
            sum(s.best_s for s in self.stages),
            sum(s.typical_s for s in self.stages),
            sum(s.worst_s for s in self.stages),
        )

    def as_dict(self) -> dict[str, object]:
        best, typical, worst = self.total()
        return {
            "label": self.label,
            "stages": [s.__dict__ for s in self.stages],
            "best_s": best,
            "typical_s": typical,
            "worst_s": worst,
        }


def chain(label: str, scrape_s: float, evaluation_s: float, for_s: float) -> Chain:
    """dcgm-exporter at its default, Prometheus at the given intervals, Alertmanager default."""
    pending = math.ceil(for_s / evaluation_s) * evaluation_s if for_s > 0 else 0.0
    return Chain(
        label,
        (
            periodic(
                "DCGM samples the temperature",
                f"dcgm-exporter --collect-interval {DCGM_COLLECT_INTERVAL_S * 1000:.0f} ms",
                DCGM_COLLECT_INTERVAL_S,
            ),
            periodic("Prometheus scrapes /metrics", f"scrape_interval {scrape_s:g} s", scrape_s),
            periodic(
                "the rule is evaluated", f"evaluation_interval {evaluation_s:g} s", evaluation_s
            ),
            fixed("pending -> firing", f"rule `for: {for_s:g}s`", pending),
            fixed(
                "Alertmanager opens a new group",
                f"group_wait {ALERTMANAGER_GROUP_WAIT_S:g} s",
                ALERTMANAGER_GROUP_WAIT_S,
            ),
        ),
    )


def ecosystem_chains() -> list[Chain]:
    """Every default; then the intervals people commonly set; each with `for: 1m` and `for: 0`."""
    default = (PROMETHEUS_SCRAPE_INTERVAL_S, PROMETHEUS_EVALUATION_INTERVAL_S)
    return [
        chain("all defaults, rule `for: 1m`", *default, 60.0),
        chain("all defaults, rule `for: 0s`", *default, 0.0),
        chain("scrape/evaluate every 30 s, `for: 1m`", 30.0, 30.0, 60.0),
        chain("scrape/evaluate every 15 s, `for: 1m`", 15.0, 15.0, 60.0),
        chain("scrape/evaluate every 15 s, `for: 0s`", 15.0, 15.0, 0.0),
    ]


def ecosystem_summary() -> dict[str, object]:
    return {
        "method": "computed from the defaults, not measured",
        "chains": [c.as_dict() for c in ecosystem_chains()],
        "group_already_open_extra_worst_s": ALERTMANAGER_GROUP_INTERVAL_S,
    }
