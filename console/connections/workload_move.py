"""Moving a queued workload to another node, and finishing moves that were cut short.

The steps (console/fleet/fleet_queue.py says why there are two): read the
workload whole from its node, submit it on the target with the move's
idempotency key and `moved_from`, start it on the GPUs it was dropped on, then
cancel it where it was. Whatever step fails, the outcome says in words what
happened and where the workload is now; a failure after the copy was made is
undone (the copy cancelled) unless the copy is the one left.

Blocking calls through `Call`, so the terminal (blocking gRPC) and the console's
network thread (which runs this in a worker and hands each call to its event
loop) share one implementation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from console.fleet.control import WorkloadRow
from console.fleet.fleet_queue import Repair, move_key, qualified_id
from gpufleet.v1 import node_pb2 as pb


class StepFailed(Exception):
    """A node refused or failed one step; the message is the node's own ("CODE: details")."""


# (node target, NodeService method name, request) -> the reply; raises StepFailed.
Call = Callable[[str, str, Any], Any]


@dataclass(frozen=True)
class Move:
    workload: WorkloadRow  # where it is queued now (its target), as the console holds it
    source_host: str
    target: str
    target_host: str
    gpus: tuple[int, ...]  # start it on these GPUs of the target; () queue it there
    actor: str


@dataclass(frozen=True)
class MoveOutcome:
    ok: bool
    message: str
    new_id: str = ""  # the workload's id on the target, once moved


def move_workload(call: Call, move: Move) -> MoveOutcome:
    source, target = move.workload.target, move.target
    here = qualified_id(move.source_host, move.workload.id)
    stays = f"{here} stays on {move.source_host}"
    try:
        found = _live(call, source, move.workload.id)
    except StepFailed as exc:
        return MoveOutcome(False, f"{stays}: it could not be read there: {exc}")
    if found is None or found.state != pb.WORKLOAD_STATE_QUEUED:
        return MoveOutcome(False, f"{here} is no longer queued on {move.source_host}: not moved")
    if found.env_hidden:
        return MoveOutcome(
            False,
            f"{stays}: its environment is hidden from you (only its owner, operators of "
            "its team and admins see it), so it cannot be copied whole",
        )
    try:
        copy = call(target, "SubmitWorkload", _copy_request(found, move, here))
    except StepFailed as exc:
        return MoveOutcome(False, f"{stays}: {move.target_host} refused it: {exc}")
    there = qualified_id(move.target_host, copy.id)
    if move.gpus and copy.state == pb.WORKLOAD_STATE_QUEUED:
        assign = pb.AssignWorkloadRequest(
            workload_id=copy.id, gpu_indices=list(move.gpus), actor=move.actor
        )
        try:
            copy = call(target, "AssignWorkload", assign)
        except StepFailed as exc:
            gpus = ", ".join(map(str, move.gpus))
            refused = f"{move.target_host} would not start it on GPU {gpus}: {exc}"
            if not _still_queued(call, source, found.id):
                # Another console saw both copies and finished the move meanwhile (it
                # cancelled the original): undoing the copy now would lose the workload.
                return MoveOutcome(
                    True, f"moved {here} ({found.name}) of {found.owner} to {there}, queued "
                    f"there: {refused}", copy.id,
                )  # fmt: skip
            return MoveOutcome(False, f"{stays}: {refused}" + _undo(call, target, copy.id, there,
                                                                    move.actor))  # fmt: skip
    return _cancel_source(call, move, found, there, copy)


def _still_queued(call: Call, target: str, workload_id: str) -> bool:
    """Is the workload still queued on its node (True when that cannot be read: keep it)?"""
    try:
        now = _live(call, target, workload_id)
    except StepFailed:
        return True
    return now is not None and now.state == pb.WORKLOAD_STATE_QUEUED


def _live(call: Call, target: str, workload_id: str) -> pb.Workload | None:
    """The workload as its node lists it now, None once it ended; raises StepFailed."""
    listing = call(target, "ListWorkloads", pb.ListWorkloadsRequest(include_ended=False))
    return next((w for w in listing.workloads if w.id == workload_id), None)


def _copy_request(found: pb.Workload, move: Move, here: str) -> pb.SubmitWorkloadRequest:
    return pb.SubmitWorkloadRequest(
        name=found.name, argv=list(found.argv), env=dict(found.env), owner=found.owner,
        gpu_count=found.gpu_count, min_free_memory_bytes=found.min_free_memory_bytes,
        # Dropped on GPUs, it starts there (below); else it waits there as it waited here.
        auto_place=found.auto_place and not move.gpus, actor=move.actor,
        priority=found.priority, time_limit_s=found.time_limit_s,
        idempotency_key=move_key(move.source_host, move.workload), moved_from=here,
    )  # fmt: skip


def _cancel_source(
    call: Call, move: Move, found: pb.Workload, there: str, copy: pb.Workload
) -> MoveOutcome:
    source = move.workload.target
    here = qualified_id(move.source_host, found.id)
    gpus = ", ".join(map(str, copy.gpu_indices))
    started = f" and started on GPU {gpus}" if gpus else ""
    moved = f"moved {here} ({found.name}) of {found.owner} to {there}{started}"
    try:
        now = _live(call, source, found.id)
        if now is not None and now.state == pb.WORKLOAD_STATE_RUNNING:
            # It started where it was while we copied it: that one runs, the copy goes.
            why = f"{here} started on {move.source_host} meanwhile: not moved"
            return MoveOutcome(False, why + _undo(call, move.target, copy.id, there, move.actor))
        if now is not None:
            cancel = pb.CancelWorkloadRequest(workload_id=found.id, actor=move.actor)
            call(source, "CancelWorkload", cancel)
    except StepFailed as exc:
        # The copy stays: the next console to see both cancels this one (fleet_queue).
        return MoveOutcome(
            True,
            f"{moved}; the original could not be cancelled yet ({exc}): it will be once "
            f"{move.source_host} answers",
            copy.id,
        )
    return MoveOutcome(True, moved, copy.id)


def _undo(call: Call, target: str, copy_id: str, there: str, actor: str) -> str:
    """Cancel the copy a failed move made; "" when done, else what to do by hand."""
    try:
        call(target, "CancelWorkload", pb.CancelWorkloadRequest(workload_id=copy_id, actor=actor))
    except StepFailed as exc:
        return f"; its copy {there} could not be cancelled ({exc}): cancel it by hand"
    return ""


def repair_move(call: Call, repair: Repair, actor: str) -> tuple[bool, str] | None:
    """Cancel the extra copy of an interrupted move: done?, and the words for the message line;
    None when there is nothing left to do.

    The node records the cancel as the console's caller's, with the reason
    saying that a console did it on its own and whose move it finishes. The
    repair was judged from what the console last saw; the copy to cancel is read
    again first and cancelled only while it is still queued: the move that made
    it may have finished meanwhile (this console's own, run on the same worker
    just before, most often), and one that started since is running work, which
    a console never cancels on its own.
    """
    row = repair.cancel
    if not _still_queued(call, row.target, row.id):
        return None
    reason = f"done by a console on its own, {repair.why}"
    request = pb.CancelWorkloadRequest(workload_id=row.id, actor=actor, reason=reason)
    try:
        call(row.target, "CancelWorkload", request)
    except StepFailed as exc:
        return False, f"could not cancel {row.label} ({repair.why}): {exc}"
    return True, f"cancelled {row.label}: {repair.why}"
