"""The journal's events for a change of a GPU's condition (the assessor's listener's)."""

from __future__ import annotations

from gpufleet.v1 import node_pb2 as pb
from node_daemon.health.model import GpuCondition
from node_daemon.health.wire import condition_message


def health_events(
    old: GpuCondition | None, new: GpuCondition, actor: str, now_ms: int
) -> list[pb.Event]:
    """GPU_DRAINED / GPU_UNDRAINED for a drain's change, GPU_HEALTH_CHANGED for the state's
    or the reasons'; each carries the condition after the change."""
    events = []
    was_drained = old is not None and old.drain is not None
    if new.drain is not None and (old is None or old.drain != new.drain):
        summary = f"GPU {new.gpu_index} drained by {new.drain.by}: {new.drain.reason}"
        events.append(_event(pb.EVENT_KIND_GPU_DRAINED, new, summary, actor, now_ms))
    elif new.drain is None and was_drained:
        summary = f"GPU {new.gpu_index} returned to placement" + (f" by {actor}" if actor else "")
        events.append(_event(pb.EVENT_KIND_GPU_UNDRAINED, new, summary, actor, now_ms))
    if old is None or old.state is not new.state or _codes(old) != _codes(new):
        events.append(
            _event(pb.EVENT_KIND_GPU_HEALTH_CHANGED, new, describe(old, new, actor), actor, now_ms)
        )
    return events


def describe(old: GpuCondition | None, new: GpuCondition, actor: str = "") -> str:
    """ "GPU 3 needs reset (was healthy): a memory row remap waits for a GPU reset"."""
    was = f" (was {old.state.words})" if old is not None and old.state is not new.state else ""
    by = f", by {actor}" if actor else ""
    worst = new.reasons[0].summary if new.reasons else ""
    more = f" and {len(new.reasons) - 1} more" if len(new.reasons) > 1 else ""
    why = f": {worst}{more}" if worst else ""
    return f"GPU {new.gpu_index} {_state_words(new)}{was}{by}{why}"


def _state_words(condition: GpuCondition) -> str:
    words = condition.state.words
    return f"is {words}" if not words.startswith("needs") else words


def _codes(condition: GpuCondition) -> set[str]:
    return {r.code for r in condition.reasons}


def _event(
    kind: pb.EventKind.ValueType, condition: GpuCondition, summary: str, actor: str, now_ms: int
) -> pb.Event:
    return pb.Event(
        time_unix_ms=now_ms, kind=kind, summary=summary, actor=actor,
        gpu_index=condition.gpu_index, condition=condition_message(condition),
    )  # fmt: skip
