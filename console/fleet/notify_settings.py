"""What pops up, and how often: the console's ``[notify]`` settings. Plain data, no Qt.

    [notify]
    # The lowest severity of a rule that pops up. Criticals always pop, with sound.
    popup = { throttle_software = "critical", idle = "critical", xid = "critical" }
    hold_s = 10            # a warning that clears within this after raising does not pop
    flap_count = 3         # raised this many times ...
    flap_window_min = 10   # ... within this many minutes: one "flapping" popup, then quiet
                           # (a critical: critical twice within it; 0 flap_count: no damping)
    group_s = 3            # popups of one rule due within this become one
    budget_per_hour = 10   # non-critical popups an hour; beyond, one summary

Every alert is shown on its tile and in the alert table whatever these say.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from console.fleet.alert_rows import AlertRow
from gpufleet.v1.alert_severity import Severity

# The daemon's rules (node_daemon/alerts), the console's own, and one refinement:
# `throttle_software` is the throttle rule when every reason is a software one.
KNOWN_RULES = (
    "gpu_temp", "memory_temp", "power", "throttle", "throttle_software", "ecc_uncorrectable",
    "ecc_correctable", "xid", "gpu_lost", "memory_leak", "idle", "temp_trend",
    "backend_degraded", "state_disk", "unkillable", "node_not_responding",
)  # fmt: skip
# Informational: shown on tiles and in the table, not worth interrupting anyone for.
# Power-cap throttling is a GPU doing what its limit says; an idle GPU is waste, not trouble.
DEFAULT_POPUP: tuple[tuple[str, Severity], ...] = (
    ("throttle_software", Severity.CRITICAL),
    ("idle", Severity.CRITICAL),
)
# Throttle reasons (the daemon's summary names them) that are policy, not trouble.
SOFTWARE_THROTTLE = frozenset({"software power cap", "software thermal slowdown"})
_THROTTLED = "throttled: "
_LEVELS = {s.label: s for s in Severity}
# Whole-number keys and the range each may take (0 turns a mechanism off).
_LIMITS = {
    "hold_s": (0, 300),
    "flap_count": (0, 100),
    "flap_window_min": (1, 1440),
    "group_s": (0, 60),
    "budget_per_hour": (0, 10_000),
}


class NotifySettingsError(ValueError):
    """A [notify] value that cannot be used; the message names the key and what is allowed."""


@dataclass(frozen=True)
class NotifySettings:
    """Defaults chosen for an on-call laptop (docs/alerts.md, "Noise control", says why)."""

    # Per rule (or `throttle_software`), the lowest severity that pops; absent: warning.
    # Pairs, not a dict: settings are hashable values, as the profile holding them is.
    popup: tuple[tuple[str, Severity], ...] = DEFAULT_POPUP
    hold_s: float = 10.0
    flap_count: int = 3  # 0: no flap damping
    flap_window_s: float = 600.0
    group_s: float = 3.0
    budget_per_hour: int = 10
    # While the budget is spent, a summary pops at most this often.
    summary_every_s: float = 900.0

    def describe(self) -> str:
        """One line for the log: what this console will pop up, and how often."""
        quiet = ", ".join(f"{rule} (pops at {level.label})" for rule, level in self.popup)
        flap = (f"flapping after {self.flap_count} raises in {self.flap_window_s / 60:g} min"
                if self.flap_count else "no flap damping")  # fmt: skip
        crit = (f" (critical again within {self.flap_window_s / 60:g} min: one flapping notice)"
                if self.flap_count else "")  # fmt: skip
        return (
            f"criticals at once{crit}; warnings after {self.hold_s:g} s, grouped over "
            f"{self.group_s:g} s, {flap}, at most {self.budget_per_hour} an hour; "
            f"quieter: {quiet or 'none'}"
        )

    def pops_from(self, popup_rule: str) -> Severity:
        return next((level for rule, level in self.popup if rule == popup_rule), Severity.WARNING)


def popup_rule(alert: AlertRow) -> str:
    """The rule name the popup setting is looked up by: a software-only throttle is its own."""
    if alert.rule == "throttle" and set(throttle_reasons(alert.summary)) <= SOFTWARE_THROTTLE:
        return "throttle_software"
    return alert.rule


def throttle_reasons(summary: str) -> list[str]:
    """'GPU 3 throttled: software power cap, hardware slowdown' -> the two reasons."""
    _, found, reasons = summary.partition(_THROTTLED)
    return [r.strip() for r in reasons.split(",") if r.strip()] if found else ["unknown"]


def parse_notify_settings(table: Any, where: str) -> NotifySettings:
    """The [notify] table over the defaults.

    Raises:
        NotifySettingsError: an unknown key, rule or severity, or a number out of range.
    """
    if not isinstance(table, dict):
        raise NotifySettingsError(f"{where}: [notify] must be a table")
    unknown = sorted(set(table) - {"popup", *_LIMITS})
    if unknown:
        known = ", ".join(["popup", *_LIMITS])
        raise NotifySettingsError(f"{where}: unknown key(s) in [notify]: {', '.join(unknown)} "
                                  f"(known: {known})")  # fmt: skip
    numbers = {key: _number(table, key, where) for key in _LIMITS if key in table}
    defaults = NotifySettings()
    return NotifySettings(
        popup=tuple({**dict(DEFAULT_POPUP), **_popup(table.get("popup", {}), where)}.items()),
        hold_s=numbers.get("hold_s", defaults.hold_s),
        flap_count=int(numbers.get("flap_count", defaults.flap_count)),
        flap_window_s=numbers.get("flap_window_min", defaults.flap_window_s / 60) * 60,
        group_s=numbers.get("group_s", defaults.group_s),
        budget_per_hour=int(numbers.get("budget_per_hour", defaults.budget_per_hour)),
    )


def _popup(table: Any, where: str) -> dict[str, Severity]:
    if not isinstance(table, dict):
        raise NotifySettingsError(f'{where}: notify.popup must be a table, e.g. '
                                  f'popup = {{ throttle_software = "critical" }}')  # fmt: skip
    levels = {}
    for rule, level in table.items():
        if rule not in KNOWN_RULES:
            raise NotifySettingsError(f"{where}: notify.popup: unknown rule {rule!r} "
                                      f"(rules: {', '.join(sorted(KNOWN_RULES))})")  # fmt: skip
        if level not in _LEVELS:
            raise NotifySettingsError(
                f"{where}: notify.popup.{rule} = {level!r}: give the lowest severity that pops "
                f'up, "info", "warning" or "critical" (criticals always pop, so "critical" '
                f"is the quietest)"
            )
        levels[rule] = _LEVELS[level]
    return levels


def _number(table: Mapping[str, Any], key: str, where: str) -> float:
    value = table[key]
    low, high = _LIMITS[key]
    whole = key in {"flap_count", "budget_per_hour"}
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        kind = "a whole number" if whole else "a number"
        raise NotifySettingsError(f"{where}: notify.{key} must be {kind} from {low} to {high}, "
                                  f"got {value!r}")  # fmt: skip
    return float(value)
