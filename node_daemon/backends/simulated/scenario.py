"""Scripted events for the simulated backend, read from a TOML file.

A scenario file lists events, each at a time in seconds after the daemon
started::

    [[event]]
    at = 20          # seconds after start
    gpu = 2          # GPU index
    kind = "overheat"

Kinds: ``overheat`` (cooling fails: the GPU heats past 85 °C), ``cool``
(cooling restored), ``load`` (``util`` = target utilisation in percent),
``leak`` (a process whose memory only grows while the GPU idles), ``ecc``
(``count`` uncorrectable ECC errors, default 1), ``ecc_correctable``
(``count`` correctable ones), ``xid`` (``xid`` = the Xid code), ``lost`` (the
GPU falls off the bus), ``recover`` (it answers again), ``overpower`` (draws
above its power limit), ``idle`` (its processes stay but stop working).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVENT_KINDS = frozenset(
    {"overheat", "cool", "load", "leak", "ecc", "ecc_correctable", "xid", "lost", "recover",
     "overpower", "idle"}
)  # fmt: skip


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class ScenarioEvent:
    at_s: float
    gpu: int
    kind: str
    value: float | None = None


@dataclass(frozen=True)
class Scenario:
    events: tuple[ScenarioEvent, ...] = ()

    def due(self, after_s: float, until_s: float) -> list[ScenarioEvent]:
        """Events with after_s < at <= until_s, in time order."""
        return [e for e in self.events if after_s < e.at_s <= until_s]


_VALUE_KEYS = {"load": "util", "ecc": "count", "ecc_correctable": "count", "xid": "xid"}


def _parse_event(raw: dict[str, Any], where: str) -> ScenarioEvent:
    kind = raw.get("kind")
    if kind not in EVENT_KINDS:
        raise ScenarioError(f"{where}: kind must be one of {sorted(EVENT_KINDS)}, got {kind!r}")
    at, gpu = raw.get("at"), raw.get("gpu", 0)
    if not isinstance(at, int | float) or at < 0:
        raise ScenarioError(f"{where}: 'at' must be a number of seconds >= 0, got {at!r}")
    if not isinstance(gpu, int) or gpu < 0:
        raise ScenarioError(f"{where}: 'gpu' must be a GPU index >= 0, got {gpu!r}")
    value_key = _VALUE_KEYS.get(kind)
    value = raw.get(value_key) if value_key else None
    if value_key in ("util", "xid") and not isinstance(value, int | float):
        raise ScenarioError(f"{where}: kind {kind!r} needs a number {value_key!r}")
    return ScenarioEvent(float(at), gpu, kind, None if value is None else float(value))


def parse_scenario(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    raw_events = data.get("event", [])
    if not isinstance(raw_events, list):
        raise ScenarioError(f"{source}: 'event' must be an array of tables ([[event]])")
    events = [_parse_event(raw, f"{source}: event {i + 1}") for i, raw in enumerate(raw_events)]
    return Scenario(tuple(sorted(events, key=lambda e: e.at_s)))


def load_scenario(path: Path) -> Scenario:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError(f"scenario {path} is not valid TOML: {exc}") from exc
    return parse_scenario(data, str(path))
