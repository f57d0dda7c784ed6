"""Self-healing's values as gpufleet.v1 messages."""

from __future__ import annotations

from gpufleet.v1 import node_pb2 as pb
from node_daemon.healing.model import HealingPolicy, Report


def policy_message(policy: HealingPolicy) -> pb.HealingPolicy:
    """GetHealth's `healing`: NodeHealth(gpus=..., healing=policy_message(healer.policy()))."""
    return pb.HealingPolicy(
        mode=policy.mode, actions=policy.actions, max_actions_per_hour=policy.max_actions_per_hour
    )


def action_message(report: Report) -> pb.HealingAction:
    message = pb.HealingAction(
        action=report.action.action, dry_run=report.dry_run,
        reason=report.action.reason, outcome=report.outcome,
    )  # fmt: skip
    if report.action.gpu is not None:
        message.gpu_index = report.action.gpu
    if report.action.pid is not None:
        message.pid = report.action.pid
    return message


def action_event(report: Report, now_ms: int) -> pb.Event:
    """The EVENT_KIND_HEALING_ACTION event: what was done, or would have been."""
    prefix = "self-healing (dry run)" if report.dry_run else "self-healing"
    summary = f"{prefix}: {report.action.label} {report.action.target}: {report.outcome}"
    event = pb.Event(
        time_unix_ms=now_ms, kind=pb.EVENT_KIND_HEALING_ACTION, actor="self-healing",
        summary=f"{summary} ({report.action.reason})"[:1000],
        healing=action_message(report),
    )  # fmt: skip
    if report.action.gpu is not None:
        event.gpu_index = report.action.gpu
    return event
