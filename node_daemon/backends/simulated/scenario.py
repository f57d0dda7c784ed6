"""Scripted events for the simulated backend, read from a TOML file.

A scenario file lists events, each at a time in seconds after the daemon
started::

    [[event]]
    at = 20          # seconds after start
    gpu = 2          # GPU index
    kind = "overheat"

Kinds, with their keys (defaults in brackets):

- Heat and load: ``overheat`` (cooling fails at once: the GPU heats past 85 °C),
  ``fan_fail`` (cooling fails slowly over ``minutes`` [20]: the fan rises to 100 %
  and the temperature keeps rising), ``cool`` (cooling restored), ``load``
  (``util`` = target utilisation in percent), ``overpower`` (draws above its power
  limit), ``idle`` (its processes stay but stop working).
- Memory: ``leak`` (a process whose memory only grows, ``rate_mib_per_min``
  [2880], on an idle GPU unless ``busy`` = true), ``weight_load`` (a process
  loads ``gib`` of weights in steps, then holds them, the GPU busy),
  ``alloc_free`` (a process allocates up to ``gib`` [8] over ``period_s`` [300]
  and frees it again, a sawtooth; idle unless ``busy``).
- Memory errors: ``ecc`` (``count`` uncorrectable ECC errors [1]),
  ``ecc_correctable`` (``count`` correctable ones [1]), ``ecc_storm`` (correctable
  errors at ``rate`` per minute [20]), ``remap_pending`` (``rows`` [1] rows
  remapped for an uncorrectable error, waiting for a GPU reset),
  ``remap_failure`` (a row could not be remapped: the GPU needs inspection).
- Links: ``pcie_replay_storm`` (PCIe replays at ``rate`` per minute [100]),
  ``nvlink_down`` (NVLink ``link`` goes down), ``nvlink_errors`` (NVLink CRC and
  replay errors at ``rate`` per minute [50]).
- The bus and the driver: ``xid`` (``xid`` = the Xid code; 79, "fallen off the
  bus", also loses the GPU), ``stutter`` (for ``seconds`` [300] about one reading
  in three fails, then the GPU falls off the bus with Xid 79), ``lost`` (the GPU
  falls off the bus), ``recover`` (it answers again), ``recovery_action`` (the
  driver asks for ``value``: 0 none, 1 GPU reset, 2 node reboot, 3 drain
  peer-to-peer, 4 drain and reset), ``reset`` (a GPU reset: pending remaps, the
  recovery action and the volatile ECC and PCIe replay counts clear; a failed
  remap stays).

A key an event's kind does not take is an error, as is a value out of range.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node_daemon.errors import read_toml


@dataclass(frozen=True)
class Option:
    """One key an event kind takes: a number (or a boolean flag) within bounds."""

    key: str
    low: float = 0.0
    high: float = 1e9
    default: float | None = None  # None: the key is required
    integer: bool = False
    positive: bool = False  # > low, not >= low
    flag: bool = False  # a TOML boolean, kept as 1.0 / 0.0

    def check(self, value: object, kind: str, where: str) -> float:
        """The value as a float, or a ScenarioError that says what is wrong."""
        if self.flag:
            if not isinstance(value, bool):
                raise ScenarioError(f"{where}: {self.key!r} of {kind!r} must be true or false")
            return 1.0 if value else 0.0
        number = isinstance(value, int | float) and not isinstance(value, bool)
        whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        if not number or (self.integer and not whole):
            what = "a whole number" if self.integer else "a number"
            raise ScenarioError(f"{where}: kind {kind!r} needs {what} {self.key!r}, got {value!r}")
        assert isinstance(value, int | float)
        too_low = value <= self.low if self.positive else value < self.low
        if too_low or value > self.high:
            bound = ">" if self.positive else ">="
            raise ScenarioError(
                f"{where}: {self.key!r} of {kind!r} must be {bound} {self.low:g} and "
                f"<= {self.high:g}, got {value!r}"
            )
        return float(value)


_BUSY = Option("busy", flag=True, default=0.0)
# Each kind's keys; the first is the event's `value`.
KIND_OPTIONS: dict[str, tuple[Option, ...]] = {
    "overheat": (),
    "fan_fail": (Option("minutes", high=24 * 60, default=20.0, positive=True),),
    "cool": (),
    "load": (Option("util", high=100.0),),
    "overpower": (),
    "idle": (),
    "leak": (Option("rate_mib_per_min", high=1e6, default=2880.0, positive=True), _BUSY),
    "weight_load": (Option("gib", high=1024.0, positive=True),),
    "alloc_free": (
        Option("gib", high=1024.0, default=8.0, positive=True),
        Option("period_s", low=10.0, high=86400.0, default=300.0),
        _BUSY,
    ),
    "ecc": (Option("count", low=1, high=1e6, default=1.0, integer=True),),
    "ecc_correctable": (Option("count", low=1, high=1e6, default=1.0, integer=True),),
    "ecc_storm": (Option("rate", high=1e5, default=20.0, positive=True),),
    "remap_pending": (Option("rows", low=1, high=512, default=1.0, integer=True),),
    "remap_failure": (),
    "pcie_replay_storm": (Option("rate", high=1e6, default=100.0, positive=True),),
    # NVML_NVLINK_MAX_LINKS is 18; a GPU with fewer links ignores the event, with a warning.
    "nvlink_down": (Option("link", high=17, integer=True),),
    "nvlink_errors": (Option("rate", high=1e6, default=50.0, positive=True),),
    "xid": (Option("xid", low=1, high=1e6, integer=True),),
    "stutter": (Option("seconds", low=1.0, high=86400.0, default=300.0),),
    "lost": (),
    "recover": (),
    "recovery_action": (Option("value", high=4, integer=True),),
    "reset": (),
}
EVENT_KINDS = frozenset(KIND_OPTIONS)
_EVENT_KEYS = frozenset({"at", "gpu", "kind"})


class ScenarioError(ValueError):
    """A scenario file that cannot be used; the message names the file and the problem."""


@dataclass(frozen=True)
class ScenarioEvent:
    """One scripted event. `value` is the kind's first key; `options` the others given."""

    at_s: float
    gpu: int
    kind: str
    value: float | None = None
    options: tuple[tuple[str, float], ...] = ()

    def get(self, key: str) -> float:
        """The event's `key`, or the kind's default for it."""
        specs = KIND_OPTIONS[self.kind]
        if specs and specs[0].key == key and self.value is not None:
            return self.value
        given = dict(self.options)
        if key in given:
            return given[key]
        default = next((o.default for o in specs if o.key == key), None)
        if default is None:
            raise ScenarioError(f"event {self.kind!r} at {self.at_s:g} s has no {key!r}")
        return default


def scenario_event(at_s: float, gpu: int, kind: str, **options: object) -> ScenarioEvent:
    """An event checked as a scenario file's would be (for code that scripts faults)."""
    where = f"event {kind!r} at {at_s!r} s"
    return _parse_event({"at": at_s, "gpu": gpu, "kind": kind, **options}, where)


@dataclass(frozen=True)
class Scenario:
    events: tuple[ScenarioEvent, ...] = ()

    def due(self, after_s: float, until_s: float) -> list[ScenarioEvent]:
        """Events with after_s < at <= until_s, in time order."""
        return [e for e in self.events if after_s < e.at_s <= until_s]


def _parse_event(raw: dict[str, Any], where: str) -> ScenarioEvent:
    kind = raw.get("kind")
    if kind not in EVENT_KINDS:
        raise ScenarioError(f"{where}: kind must be one of {sorted(EVENT_KINDS)}, got {kind!r}")
    at, gpu = raw.get("at"), raw.get("gpu", 0)
    if not isinstance(at, int | float) or isinstance(at, bool) or at < 0:
        raise ScenarioError(f"{where}: 'at' must be a number of seconds >= 0, got {at!r}")
    if not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0:
        raise ScenarioError(f"{where}: 'gpu' must be a GPU index >= 0, got {gpu!r}")
    specs = KIND_OPTIONS[kind]
    unknown = set(raw) - _EVENT_KEYS - {o.key for o in specs}
    if unknown:
        takes = ", ".join(repr(o.key) for o in specs) or "no other keys"
        raise ScenarioError(f"{where}: kind {kind!r} takes {takes}, not {sorted(unknown)}")
    given = {}
    for option in specs:
        if option.key in raw:
            given[option.key] = option.check(raw[option.key], kind, where)
        elif option.default is None:
            raise ScenarioError(f"{where}: kind {kind!r} needs a number {option.key!r}")
    value = given.pop(specs[0].key, None) if specs else None
    return ScenarioEvent(float(at), gpu, kind, value, tuple(given.items()))


def parse_scenario(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    raw_events = data.get("event", [])
    if not isinstance(raw_events, list):
        raise ScenarioError(f"{source}: 'event' must be an array of tables ([[event]])")
    events = [_parse_event(raw, f"{source}: event {i + 1}") for i, raw in enumerate(raw_events)]
    return Scenario(tuple(sorted(events, key=lambda e: e.at_s)))


def load_scenario(path: Path) -> Scenario:
    return parse_scenario(read_toml(path, "scenario", ScenarioError), str(path))
