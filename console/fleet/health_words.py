"""A GPU's health in words: tile tags, tooltips, and the Events tab's sentences.

"GPU 3 needs the node rebooted: Xid 79: GPU has fallen off the bus (reboot the node)";
"Self-healing would drain GPU 3 from placement (dry run): Xid 79 …".
"""

from __future__ import annotations

from console.fleet.durations import duration_text
from console.fleet.health import GpuCondition, HealingRow, HealthReason, HealthState
from console.fleet.placement import clock_text

# What a tile shows, short enough for a 104-pixel tile at the small font.
TILE_TAGS = {
    HealthState.DEGRADED: "DEGRADED",
    HealthState.SUSPECT: "SUSPECT",
    HealthState.NEEDS_RESET: "NEEDS RESET",
    HealthState.NEEDS_REBOOT: "NEEDS REBOOT",
    HealthState.NEEDS_INSPECTION: "INSPECT/RMA",
}
DRAINED_TAG = "DRAINED"

# After "GPU 3 ...": the state as a sentence's predicate.
_PREDICATES = {
    HealthState.HEALTHY: "is healthy",
    HealthState.DEGRADED: "is degraded",
    HealthState.SUSPECT: "is suspect",
    HealthState.NEEDS_RESET: "needs a GPU reset",
    HealthState.NEEDS_REBOOT: "needs the node rebooted",
    HealthState.NEEDS_INSPECTION: "needs hardware inspection (likely an RMA)",
}

# NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, as GpuSample.recovery_action carries it.
RECOVERY_ACTIONS = {
    0: "none",
    1: "reset the GPU",
    2: "reboot the node",
    3: "drain peer-to-peer traffic",
    4: "drain, then reset the GPU",
}

# HealingAction.action: (what it would do, what it did), after "Self-healing would/…".
_HEALING_VERBS = {
    "drain": ("drain {gpu} from placement", "drained {gpu} from placement"),
    "undrain": ("return {gpu} to placement", "returned {gpu} to placement"),
    "power_cap": ("lower {gpu}'s power limit", "lowered {gpu}'s power limit"),
    "power_restore": ("restore {gpu}'s power limit", "restored {gpu}'s power limit"),
    "kill_leak": ("kill the leaking {pid} on {gpu}", "killed the leaking {pid} on {gpu}"),
    "requeue_leak": ("requeue the leaking {pid} on {gpu}", "requeued the leaking {pid} on {gpu}"),
    "gpu_reset": ("reset {gpu}", "reset {gpu}"),
    "node_reboot": ("reboot the node", "rebooted the node"),
}


def recovery_words(code: int) -> str:
    return RECOVERY_ACTIONS.get(code, f"code {code} (unknown to this console)")


def tile_tag(condition: GpuCondition | None) -> str | None:
    """The word on a tile: the state unless healthy, else DRAINED when drained; None: nothing."""
    if condition is None or condition.healthy:
        return None
    return TILE_TAGS.get(condition.state, DRAINED_TAG)


def predicate(state: HealthState) -> str:
    return _PREDICATES[state]


def reason_text(reason: HealthReason) -> str:
    """ "Xid 79: GPU has fallen off the bus (reboot the node)"."""
    return f"{reason.summary} ({reason.action})" if reason.action else reason.summary


def condition_tooltip(condition: GpuCondition, now_ms: int, top: int = 3) -> list[str]:
    """The tile tooltip's health lines: the state, since when, its top reasons, the drain."""
    if condition.healthy and condition.power_capped_w is None:
        return []
    since = (
        f" since {clock_text(condition.since_unix_ms, now_ms)}" if condition.since_unix_ms else ""
    )
    lines = [f"health: {condition.state.words}{since}"]
    lines += [f"  • {reason_text(r)}" for r in condition.reasons[:top]]
    if len(condition.reasons) > top:
        lines.append(f"  • and {len(condition.reasons) - top} more (see the GPU's detail)")
    if condition.drained:
        lines.append(drain_text(condition))
    if condition.power_capped_w is not None:
        lines.append(f"power capped by self-healing to {condition.power_capped_w:.0f} W")
    return lines


def drain_text(condition: GpuCondition) -> str:
    """ "drained from placement by alice: fan noise" (no new work goes there)."""
    why = f": {condition.drain_reason}" if condition.drain_reason else ""
    return f"drained from placement by {condition.drained_by or 'someone'}{why} (no new work)"


def lead_text(lead_time_s: int | None) -> str:
    """ "usually 2 h ahead of the failure"; "" for a fault that is no prediction."""
    return (
        "" if lead_time_s is None else f"usually {duration_text(lead_time_s)} ahead of the failure"
    )


# -- the Events tab ---------------------------------------------------------------


def health_changed_sentence(condition: GpuCondition, actor: str = "") -> str:
    """ "GPU 3 needs a GPU reset: Xid 48: double-bit ECC error (reset the GPU)"."""
    worst = condition.worst_reason()
    sentence = f"GPU {condition.gpu_index} {predicate(condition.state)}"
    if worst is not None and condition.state is not HealthState.HEALTHY:
        sentence += f": {reason_text(worst)}"
        if len(condition.reasons) > 1:
            sentence += f"; and {len(condition.reasons) - 1} more"
    elif condition.state is HealthState.HEALTHY and actor:
        sentence += f" again (cleared by {actor})"
    return sentence


def drain_sentence(condition: GpuCondition, drained: bool, actor: str = "") -> str:
    if drained:
        return f"GPU {condition.gpu_index} {drain_text(condition)}"
    by = f" by {actor}" if actor else ""
    return f"GPU {condition.gpu_index} returned to placement{by}: it takes new work again"


def healing_sentence(healing: HealingRow) -> str:
    """ "Self-healing would drain GPU 3 from placement (dry run): Xid 79: …"."""
    gpu = "the GPU" if healing.gpu_index is None else f"GPU {healing.gpu_index}"
    pid = "process" if healing.pid is None else f"pid {healing.pid}"
    would, did = _HEALING_VERBS.get(healing.action, ("do " + healing.action, healing.action))
    why = f": {healing.reason}" if healing.reason else ""
    if healing.dry_run:
        return f"Self-healing would {would.format(gpu=gpu, pid=pid)} (dry run){why}"
    if healing.outcome in ("", "done"):
        return f"Self-healing {did.format(gpu=gpu, pid=pid)}{why}"
    return f"Self-healing did not {would.format(gpu=gpu, pid=pid)} ({healing.outcome}){why}"


def event_sentence(
    kind: str,
    condition: GpuCondition | None,
    healing: HealingRow | None,
    actor: str,
    summary: str = "",
) -> str | None:
    """The sentence for a health, drain or healing event; None for other kinds.

    A health change keeps the node's own summary, which alone knows the state before
    ("GPU 3 needs reset (was healthy): …"), and gains what to do about it.
    """
    if kind == "healing_action" and healing is not None:
        return healing_sentence(healing)
    if condition is None:
        return None
    if kind == "gpu_health_changed":
        worst = condition.worst_reason()
        if not summary:
            return health_changed_sentence(condition, actor)
        if worst is None or not worst.action or worst.action in summary:
            return summary
        return f"{summary} ({worst.action})"
    if kind in ("gpu_drained", "gpu_undrained"):
        return drain_sentence(condition, kind == "gpu_drained", actor)
    return None
