"""The ``[healing]`` table of daemon.toml: whether self-healing acts, and what it may do.

    [healing]
    mode = "dry-run"              # "off" (the default), "dry-run" or "on"
    max_actions_per_hour = 6      # node-wide, restorations not counted

    [healing.drain]
    enabled = true
    on_states = ["needs_reset", "needs_reboot", "needs_inspection"]
    return_after_clean_s = 3600
    slurm = false                 # also drain the node in Slurm (scontrol)

Every key has a default; a bad value is a ConfigError naming the key and what
is expected. docs/health.md ("Self-healing") describes each action.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from typing import Any

from node_daemon.errors import ConfigError
from node_daemon.health.model import HealthState

MODES = ("off", "dry-run", "on")
LEAK_ACTIONS = ("kill", "requeue")
# What a command may name: the GPU (reset) and the node.
PLACEHOLDERS = frozenset({"index", "uuid", "pci_bus_id", "host"})
_STATE_NAMES = {s.name.lower(): s for s in HealthState}


@dataclass(frozen=True)
class DrainSettings:
    """Take a GPU out of placement in a bad state; return it after a clean period."""

    enabled: bool = True
    on_states: tuple[HealthState, ...] = (
        HealthState.NEEDS_RESET, HealthState.NEEDS_REBOOT, HealthState.NEEDS_INSPECTION,
    )  # fmt: skip
    return_after_clean_s: float = 3600.0
    slurm: bool = False
    cooldown_s: float = 600.0


@dataclass(frozen=True)
class PowerCapSettings:
    """Lower the power limit of a GPU that keeps overheating; restore it once cool."""

    enabled: bool = True
    # Trigger: the gpu_temp alert raised this many times within the window...
    warnings: int = 3
    window_s: float = 3600.0
    # ...or the temperature above above_c for above_for_s.
    above_c: float = 85.0
    above_for_s: float = 300.0
    cap_ratio: float = 0.8  # of the GPU's default power limit, never below its minimum
    cool_c: float = 70.0  # cool: below this...
    restore_after_cool_s: float = 1800.0  # ...for this long
    cooldown_s: float = 1800.0


@dataclass(frozen=True)
class LeakSettings:
    """Kill or requeue a process whose memory_leak alert holds past a warning's grace."""

    enabled: bool = False
    action: str = "kill"
    grace_s: float = 600.0
    allow_foreign: bool = False  # also processes gpufleet did not launch
    kill_grace_s: float = 10.0  # TERM, then KILL after this
    cooldown_s: float = 300.0


@dataclass(frozen=True)
class CommandSettings:
    """A command self-healing runs (no shell): a GPU reset, a node reboot."""

    enabled: bool = False
    command: tuple[str, ...] = ()
    # Also how long a fault it was run for must stay away to count as cured: back
    # sooner, it is the same fault, and self-healing escalates instead of repeating.
    cooldown_s: float = 3600.0
    # How long after a reset ends, or after the daemon's start in the boot that follows
    # a reboot, the GPU is judged: still in need of the same action, it was not cured.
    verify_after_s: float = 60.0


def _reset() -> CommandSettings:
    return CommandSettings(command=("nvidia-smi", "-r", "-i", "{index}"), cooldown_s=3600.0)


def _reboot() -> CommandSettings:
    return CommandSettings(command=("systemctl", "reboot"), cooldown_s=86400.0)


@dataclass(frozen=True)
class HealingSettings:
    mode: str = "off"
    max_actions_per_hour: int = 6
    command_timeout_s: float = 120.0
    drain: DrainSettings = field(default_factory=DrainSettings)
    power_cap: PowerCapSettings = field(default_factory=PowerCapSettings)
    memory_leak: LeakSettings = field(default_factory=LeakSettings)
    reset: CommandSettings = field(default_factory=_reset)
    reboot: CommandSettings = field(default_factory=_reboot)

    @property
    def acting(self) -> bool:
        """Whether anything is decided at all (dry-run decides, and only says so)."""
        return self.mode != "off"


# Each number key: (lowest, highest) allowed.
_RANGES: dict[str, tuple[float, float]] = {
    "max_actions_per_hour": (0, 3600), "command_timeout_s": (1, 3600),
    "return_after_clean_s": (0, 30 * 86400), "cooldown_s": (0, 30 * 86400),
    "warnings": (1, 1000), "window_s": (1, 30 * 86400), "above_c": (0, 150),
    "above_for_s": (0, 86400), "cap_ratio": (0.1, 1.0), "cool_c": (0, 150),
    "restore_after_cool_s": (0, 30 * 86400), "grace_s": (0, 86400), "kill_grace_s": (1, 300),
    "verify_after_s": (0, 86400),
}  # fmt: skip
_TABLES = ("drain", "power_cap", "memory_leak", "reset", "reboot")


def parse_healing_settings(table: Any, source: str) -> HealingSettings:
    """The [healing] table over the defaults, or ConfigError naming the key."""
    where = f"{source}: healing"
    if not isinstance(table, dict):
        raise ConfigError(f"{source}: [healing] must be a table")
    base = HealingSettings()
    values: dict[str, Any] = {}
    for key, value in table.items():
        if key in _TABLES:
            values[key] = _table(getattr(base, key), value, f"{where}.{key}")
        else:
            values[key] = _value(base, key, value, where)
    return replace(base, **values)


def _table(base: Any, table: Any, where: str) -> Any:
    if not isinstance(table, dict):
        raise ConfigError(f"{where}: must be a table ([{where.split(': ')[-1]}])")
    return replace(base, **{key: _value(base, key, value, where) for key, value in table.items()})


def _value(base: Any, key: str, value: Any, where: str) -> Any:
    known = [f.name for f in fields(base) if f.name not in _TABLES]
    if key not in known:
        raise ConfigError(f"{where}: unknown key {key!r} (known: {', '.join(sorted(known))})")
    name = f"{where}.{key}"
    special: dict[str, Callable[[Any, str], Any]] = {
        "mode": _mode, "on_states": _states, "action": _leak_action, "command": _command,
    }  # fmt: skip
    if key in special:
        return special[key](value, name)
    current = getattr(base, key)
    if isinstance(current, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: must be true or false, got {value!r}")
        return value
    return _number(value, name, key, isinstance(current, int))


def _number(value: Any, name: str, key: str, integer: bool) -> float | int:
    low, high = _RANGES[key]
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    number = value if isinstance(value, kinds) and not isinstance(value, bool) else None
    if not isinstance(number, int | float) or not low <= number <= high:
        what = "a whole number" if integer else "a number"
        raise ConfigError(f"{name}: must be {what} from {low:g} to {high:g}, got {value!r}")
    return number if integer else float(number)


def _mode(value: Any, name: str) -> str:
    if value not in MODES:
        raise ConfigError(f"{name}: must be one of {', '.join(map(repr, MODES))}, got {value!r}")
    return str(value)


def _leak_action(value: Any, name: str) -> str:
    if value not in LEAK_ACTIONS:
        choices = ", ".join(map(repr, LEAK_ACTIONS))
        raise ConfigError(f"{name}: must be one of {choices}, got {value!r}")
    return str(value)


def _states(value: Any, name: str) -> tuple[HealthState, ...]:
    if not isinstance(value, list) or not all(v in _STATE_NAMES for v in value):
        raise ConfigError(
            f"{name}: must be a list of health states ({', '.join(_STATE_NAMES)}), got {value!r}"
        )
    return tuple(_STATE_NAMES[v] for v in value)


def _command(value: Any, name: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ConfigError(
            f'{name}: must be a non-empty list of strings (run without a shell), e.g. ["true"]'
        )
    if not value[0].strip():
        raise ConfigError(f"{name}: the program (its first string) is empty")
    for part in value:
        try:
            named = {f for _, f, _, _ in string.Formatter().parse(part) if f is not None}
        except ValueError as exc:
            raise ConfigError(f"{name}: {part!r} is not a valid template: {exc}") from None
        unknown = sorted(named - PLACEHOLDERS)
        if unknown:
            raise ConfigError(
                f"{name}: unknown placeholder(s) {', '.join('{' + u + '}' for u in unknown)} "
                f"(known: {', '.join('{' + p + '}' for p in sorted(PLACEHOLDERS))})"
            )
    return tuple(value)
