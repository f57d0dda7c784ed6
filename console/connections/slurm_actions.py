"""SlurmActions: steer, drain, resume and cancel through Slurm, each also in the node's audit.

Every action runs on the connection manager's steps worker (never the GUI
thread): first Slurm is asked (with the operator's token, so Slurm's own
permissions decide), then the node the action concerns gets one audit record
of it through RecordExternalAction (system "slurm", Slurm's answer as the
result), whether Slurm said OK or refused. The CommandResult says both.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from console.connections.manager import ConnectionManager
from console.connections.slurm_link import SlurmLink
from console.connections.slurm_rest import ScontrolWithToken, SlurmError, SlurmRestClient
from console.connections.workload_move import Call, StepFailed
from console.fleet.slurm_model import ReservationAsk
from console.fleet.slurm_view import SlurmReserve
from console.fleet.updates import CommandResult
from gpufleet.v1 import node_pb2 as pb

SYSTEM = "slurm"
Act = Callable[[SlurmRestClient, ScontrolWithToken], object]


class SlurmActions:
    def __init__(self, connections: ConnectionManager, link: SlurmLink) -> None:
        self._connections = connections
        self._link = link

    def steer(self, target: str, node: str, job_id: int, words: str) -> None:
        """Make the pending job run on `node` (its ReqNodeList): what a drop on a tile does."""
        self._act(target, f"steer {words} to {node}", "steer_job", f"job={job_id}",
                  {"job_id": job_id, "nodelist": node},
                  lambda rest, _: rest.steer_job(job_id, [node]))  # fmt: skip

    def drain(self, target: str, node: str, reason: str) -> None:
        self._act(target, f"drain {node} in Slurm", "drain", f"node={node}",
                  {"node": node, "reason": reason},
                  lambda _, scontrol: scontrol.drain(node, reason))  # fmt: skip

    def resume(self, target: str, node: str) -> None:
        self._act(target, f"resume {node} in Slurm", "resume", f"node={node}", {"node": node},
                  lambda _, scontrol: scontrol.resume(node))  # fmt: skip

    def cancel(self, target: str, job_id: int, words: str) -> None:
        self._act(target, f"cancel {words}", "cancel_job", f"job={job_id}", {"job_id": job_id},
                  lambda rest, _: rest.cancel_job(job_id))  # fmt: skip

    def reserve(self, reserve: SlurmReserve, ask: ReservationAsk) -> None:
        """Create the reservation; each node it holds gets the record in its audit log."""
        minutes = ask.duration.total_seconds() / 60 if ask.duration else None
        params = {"name": ask.name, "nodes": list(ask.nodes), "users": list(ask.users),
                  "accounts": list(ask.accounts), "flags": list(ask.flags),
                  "minutes": minutes}  # fmt: skip
        self._act(reserve.targets, f"reserve {', '.join(ask.nodes)} in Slurm as {ask.name}",
                  "reserve", f"reservation={ask.name}", params,
                  lambda _, scontrol: scontrol.create_reservation(ask))  # fmt: skip

    def release(self, targets: Sequence[str], name: str) -> None:
        self._act(tuple(targets), f"release Slurm reservation {name}", "release",
                  f"reservation={name}", {"name": name},
                  lambda _, scontrol: scontrol.delete_reservation(name))  # fmt: skip

    def _act(self, target: str | tuple[str, ...], what: str, action: str, aim: str,
             params: dict[str, Any], act: Act) -> None:  # fmt: skip
        """Ask Slurm, then record it on each node concerned (one for most actions)."""
        targets = (target,) if isinstance(target, str) else target

        def steps(call: Call) -> CommandResult:
            try:
                self._link.run(act)
                ok, answer = True, "OK"
            except SlurmError as exc:
                ok, answer = False, str(exc)
            missed = [m for t in targets if (m := _record(call, t, action, aim, params, answer))]
            said = " ".join(["done" if ok else answer, *missed])
            return CommandResult(targets[0], what, ok, said)

        self._connections.request_steps(targets[0], what, steps)


def _record(call: Call, target: str, action: str, aim: str, params: dict[str, Any],
            answer: str) -> str | None:  # fmt: skip
    """One record in the node's audit; None when written, else what to add to the message."""
    request = pb.RecordExternalActionRequest(
        system=SYSTEM, action=action, target=aim, params=json.dumps(params), result=answer[:1000]
    )
    try:
        call(target, "RecordExternalAction", request)
    except StepFailed as exc:
        return f"(not written to {target}'s audit log: {exc})"
    return None
