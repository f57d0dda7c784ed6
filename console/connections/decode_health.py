"""gpufleet.v1 health messages -> console.fleet.health records, cheap at 1,000 GPUs a second.

A GPU's condition and RAS counters change far less often than its temperature:
each tick's are nearly always the previous tick's. So each distinct wire form
is decoded once and the record reused (a bounded memo, keyed by the condition's
bytes and by the counters' values). Decoding runs on the one network thread.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from google.protobuf.message import Message

from console.fleet.health import (
    NO_SIGNALS,
    FaultIncidentRow,
    FaultRecordRow,
    GpuCondition,
    HealingPolicyRow,
    HealingRow,
    HealthReason,
    HealthSignals,
    HealthState,
)
from gpufleet.v1 import node_pb2 as pb

MEMO_LIMIT = 65_536  # distinct forms kept; past it the memo starts over

# The health counters, by GpuSample field: read only where the GPU reported one.
SIGNAL_FIELDS = (
    "pcie_replay_total", "remapped_rows_correctable", "remapped_rows_uncorrectable",
    "row_remap_pending", "row_remap_failure", "retired_pages_sbe", "retired_pages_dbe",
    "retired_pages_pending", "nvlink_crc_flit_errors_total", "nvlink_crc_data_errors_total",
    "nvlink_replay_errors_total", "nvlink_recovery_errors_total", "nvlink_links_active",
    "nvlink_links_down", "recovery_action", "power_limit_w",
)  # fmt: skip
_FLAGS = frozenset({"row_remap_pending", "row_remap_failure", "retired_pages_pending"})
_STATES = {int(s): s for s in HealthState}
_Record = TypeVar("_Record")


class Memo:
    def __init__(self) -> None:
        self._found: dict[Hashable, Any] = {}

    def get(self, key: Hashable, make: Callable[[], _Record]) -> _Record:
        found = self._found.get(key)
        if found is None:
            if len(self._found) >= MEMO_LIMIT:
                self._found.clear()
            found = self._found[key] = make()
        return found  # type: ignore[no-any-return]


_conditions = Memo()
_signal_records = Memo()
_getters: dict[tuple[str, ...], Callable[[Any], Any]] = {}


def state(value: int) -> HealthState:
    """A state this console does not know (a newer daemon's) reads as healthy."""
    return _STATES.get(value, HealthState.HEALTHY)


def _reason(r: pb.HealthReason) -> HealthReason:
    lead = r.lead_time_s if r.HasField("lead_time_s") else None
    return HealthReason(r.code, state(r.state), r.summary, r.action, r.since_unix_ms, lead)


def _condition(c: pb.GpuCondition) -> GpuCondition:
    return GpuCondition(
        gpu_index=c.gpu_index, state=state(c.state),
        reasons=tuple(_reason(r) for r in c.reasons), since_unix_ms=c.since_unix_ms,
        drained=c.drained, drained_by=c.drained_by, drain_reason=c.drain_reason,
        power_capped_w=c.power_capped_w if c.HasField("power_capped_w") else None,
    )  # fmt: skip


def decode_condition(c: pb.GpuCondition) -> GpuCondition:
    return _conditions.get(c.SerializeToString(deterministic=True), lambda: _condition(c))


def decode_signals(s: pb.GpuSample) -> HealthSignals:
    """The sample's RAS counters; one shared empty record for a GPU that reports none."""
    sample: Message = s  # HasField by a name from SIGNAL_FIELDS
    has = sample.HasField  # presence, not the value: a counter the GPU lacks is unset, never 0
    present = tuple(f for f in SIGNAL_FIELDS if has(f))
    xids, down = tuple(sorted(s.xid_counts.items())), tuple(s.nvlink_down_links)
    if not present and not xids and not down:
        return NO_SIGNALS
    getter = _getters.get(present)
    if getter is None:  # one C call for the values of the counters a GPU reports
        getter = _getters[present] = operator.attrgetter(*present) if present else _nothing
    found = getter(s)
    values = found if len(present) != 1 else (found,)  # attrgetter of one name: no tuple
    key = (present, values, xids, down)
    return _signal_records.get(key, lambda: _signals(present, values, xids, down))


def _nothing(_sample: object) -> tuple[()]:
    return ()


def _signals(
    present: tuple[str, ...],
    values: tuple[Any, ...],
    xids: tuple[tuple[int, int], ...],
    down: tuple[int, ...],
) -> HealthSignals:
    found = {f: bool(v) if f in _FLAGS else v for f, v in zip(present, values, strict=True)}
    return HealthSignals(**found, nvlink_down_links=down, xid_counts=xids)


def decode_healing(h: pb.HealingAction) -> HealingRow:
    return HealingRow(
        action=h.action, gpu_index=h.gpu_index if h.HasField("gpu_index") else None,
        dry_run=h.dry_run, reason=h.reason, outcome=h.outcome,
        pid=h.pid if h.HasField("pid") else None,
    )  # fmt: skip


def decode_node_health(target: str, reply: pb.NodeHealth) -> HealingPolicyRow:
    """GetHealth's answer, for its healing policy and the GPUs' fault records (the
    conditions come with every sample)."""
    policy = reply.healing
    records = tuple(
        FaultRecordRow(r.gpu_index, r.reliability_score, tuple(
            FaultIncidentRow(i.kind, _STATES.get(i.state, HealthState.HEALTHY),
                             i.started_unix_ms, i.last_unix_ms, i.count, tuple(i.xid_codes),
                             i.ended)
            for i in r.incidents
        ))
        for r in reply.fault_records
    )  # fmt: skip
    return HealingPolicyRow(target, policy.mode or "off", tuple(policy.actions),
                            policy.max_actions_per_hour, records)  # fmt: skip
