"""Control of a node from the console: reserve, release, submit, assign, cancel, kill.

Like AlertActions: each call returns at once, sends one request off the GUI
thread, and its CommandResult (the daemon's answer, or its own error message)
arrives through the inbox.
"""

from __future__ import annotations

from collections.abc import Sequence

from console.connections.actions import NodeActions
from console.connections.workload_move import Call, Move, move_workload, repair_move
from console.fleet.control import ReservationRow, WorkloadRow
from console.fleet.control_requests import KillTarget, WorkloadSpec
from console.fleet.fleet_queue import Repair, qualified_id
from console.fleet.updates import CommandResult
from gpufleet.v1 import node_pb2 as pb

DEFAULT_GRACE_S = 10
# The daemon answers a kill after TERM, the grace period and KILL: wait that long, and some.
KILL_DEADLINE_MARGIN_S = 10.0
OUTPUT_TAIL_BYTES = 256 * 1024


def _gpus(indices: Sequence[int]) -> str:
    return ", ".join(str(i) for i in indices)


class ControlActions(NodeActions):
    def reserve(
        self, target: str, gpus: Sequence[int], holder: str, until_unix_ms: int, reason: str
    ) -> None:
        request = pb.ReserveRequest(
            gpu_indices=list(gpus), holder=holder, until_unix_ms=until_unix_ms, reason=reason,
            actor=self.actor,
        )  # fmt: skip
        what = f"reserve GPU {_gpus(gpus)} of {target} for {holder}"
        self._send(target, what, "Reserve", request)

    def release(self, reservation: ReservationRow, gpus: Sequence[int] = ()) -> None:
        """Release the reservation, or only `gpus` of it (the rest stay reserved)."""
        request = pb.ReleaseReservationRequest(
            reservation_id=reservation.id, actor=self.actor, gpu_indices=list(gpus)
        )
        what = (f"release GPU {_gpus(gpus or reservation.gpu_indices)} of {reservation.target} "
                f"({reservation.holder})")  # fmt: skip
        self._send(reservation.target, what, "ReleaseReservation", request)

    def submit(self, target: str, spec: WorkloadSpec) -> None:
        request = pb.SubmitWorkloadRequest(
            name=spec.name, argv=list(spec.argv), env=dict(spec.env), owner=spec.owner,
            gpu_count=spec.gpu_count, min_free_memory_bytes=spec.min_free_memory_bytes,
            auto_place=spec.auto_place, actor=self.actor, priority=spec.priority,
            time_limit_s=spec.time_limit_s,
        )  # fmt: skip
        self._send(target, f"submit {spec.name or spec.argv[0]} to {target}", "SubmitWorkload",
                   request)  # fmt: skip

    def assign(self, workload: WorkloadRow, gpus: Sequence[int]) -> None:
        request = pb.AssignWorkloadRequest(
            workload_id=workload.id, gpu_indices=list(gpus), actor=self.actor
        )
        what = f"assign {workload.label} to GPU {_gpus(gpus)} of {workload.target}"
        self._send(workload.target, what, "AssignWorkload", request)

    def move(
        self,
        workload: WorkloadRow,
        source_host: str,
        target: str,
        target_host: str,
        gpus: Sequence[int] = (),
    ) -> None:
        """Move a queued workload to another node (console/connections/workload_move.py)."""
        move = Move(workload, source_host, target, target_host, tuple(gpus), self.actor)
        what = f"move {qualified_id(source_host, workload.id)} to {target_host}"

        def steps(call: Call) -> CommandResult:
            outcome = move_workload(call, move)
            return CommandResult(target, what, outcome.ok, outcome.message)

        self._connections.request_steps(target, what, steps)

    def finish_move(self, repair: Repair, node_name: str) -> None:
        """Cancel the extra copy an interrupted move left (console/fleet/fleet_queue.py)."""
        what = f"finish a move on {node_name}"

        def steps(call: Call) -> CommandResult | None:
            repaired = repair_move(call, repair, self.actor)
            if repaired is None:
                return None  # finished meanwhile: nothing to say
            ok, message = repaired
            return CommandResult(repair.cancel.target, what, ok, f"{node_name}: {message}")

        self._connections.request_steps(repair.cancel.target, what, steps)

    def cancel(self, workload: WorkloadRow) -> None:
        request = pb.CancelWorkloadRequest(workload_id=workload.id, actor=self.actor)
        what = f"cancel {workload.label} on {workload.target}"
        self._send(workload.target, what, "CancelWorkload", request)

    def output(self, workload: WorkloadRow, tail_bytes: int = OUTPUT_TAIL_BYTES) -> None:
        request = pb.GetWorkloadOutputRequest(workload_id=workload.id, tail_bytes=tail_bytes)
        what = f"output of {workload.label} on {workload.target}"
        self._send(workload.target, what, "GetWorkloadOutput", request, subject=workload.id)

    def kill(self, victim: KillTarget, grace_s: int = DEFAULT_GRACE_S) -> None:
        """Kill one process; refuses (with no request) one without a start time."""
        start = victim.process.start_time_unix_ms
        if start is None:
            raise ValueError(f"pid {victim.pid} has no start time: it cannot be named safely")
        request = pb.KillProcessRequest(
            gpu_index=victim.gpu, pid=victim.pid, start_time_unix_ms=start, grace_s=grace_s,
            actor=self.actor,
        )  # fmt: skip
        what = f"kill pid {victim.pid} on {victim.node_name} GPU {victim.gpu}"
        deadline = grace_s + KILL_DEADLINE_MARGIN_S
        self._send(victim.target, what, "KillProcess", request, timeout_s=deadline)
