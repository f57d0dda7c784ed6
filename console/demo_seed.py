"""What the demo's nodes hold from the start: workloads of demo users, and reservations.

Made through each node's own API (SubmitWorkload, AssignWorkload, Reserve), as
an admin would, so the journal, the events and the audit log tell it as they
tell any change. The demo's nodes run `gpufleet daemon --demo`: every workload
runs as the demo's own account under its owner's name, so alice, bob and root
need no account on this machine.

The incident is the scenario's (resources/scenarios/demo.toml, on gpu-node-02):
its GPUs are left free of demo workloads, so what happens there is the
scenario's alone.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpufleet.client import calls
from gpufleet.client.blocking import NodeClient
from gpufleet.client.errors import CallError
from gpufleet.client.security import LinkSecurity

GIB = 1024**3
HOUR_MS = 3_600_000
SEED_DEADLINE_S = 20.0
# The demo's people, for the console's reserve prompts and the profile.
DEMO_PEOPLE = ("alice", "bob", "carol", "team:ml")
# A training job in miniature: a line of progress every few seconds, until stopped. A
# script file, so its command reads as one line in the tables and the kill dialog.
TRAINING = Path(__file__).resolve().parents[1] / "resources" / "demo" / "training.py"


@dataclass(frozen=True)
class DemoWorkload:
    """A workload of the demo: on `node`, started on `gpus` (empty: left queued)."""

    node: int
    name: str
    owner: str
    gpus: tuple[int, ...]
    gpu_count: int
    memory_gib: int


@dataclass(frozen=True)
class DemoReservation:
    node: int
    holder: str
    gpus: tuple[int, ...]
    hours: int
    reason: str


# gpu-node-02 (node 1) is the incident's: its GPUs 1, 2, 3, 5 and 7 are the scenario's.
WORKLOADS = (
    DemoWorkload(0, "llama-pretrain", "alice", (0, 1, 2, 3), 4, 24),
    DemoWorkload(0, "eval-sweep", "bob", (4,), 1, 12),
    DemoWorkload(0, "finetune-70b", "carol", (), 4, 30),
    DemoWorkload(1, "render-batch", "alice", (0,), 1, 16),
    DemoWorkload(2, "nightly-benchmark", "root", (0,), 1, 8),
    DemoWorkload(2, "ml-team-sweep", "team:ml", (1, 2), 2, 20),
    DemoWorkload(2, "notebook", "bob", (), 1, 10),
    DemoWorkload(3, "inference-server", "nobody", (5,), 1, 12),
)
RESERVATIONS = (
    DemoReservation(1, "bob", (6,), 4, "debugging NCCL timeouts"),
    DemoReservation(0, "team:ml", (6, 7), 8, "ML sprint: held for the team"),
    DemoReservation(3, "carol", (0, 1), 2, "profiling run after lunch"),
)


def seed_nodes(targets: Sequence[str], token: str, gpus: int) -> list[str]:
    """Workloads and reservations on the demo's nodes (those that fit its size).

    Returns what a node refused, a line each (a simulated GPU that happens to be
    too full): the demo goes on without it.
    """
    security = LinkSecurity(token=token)
    refused = []
    for index, target in enumerate(targets):
        with NodeClient(target, security) as client:
            _wait_for_a_sweep(client)
            for what, action in _actions(index, gpus):
                try:
                    action(client)
                except CallError as exc:
                    refused.append(f"{target}: {what}: {exc.reason}")
    return refused


def _actions(node: int, gpus: int) -> list[tuple[str, Callable[[NodeClient], None]]]:
    """The node's reservations, then its workloads, each with what it is in words."""
    actions: list[tuple[str, Callable[[NodeClient], None]]] = [
        (f"reserve GPUs {r.gpus} for {r.holder}", functools.partial(_reserve, reservation=r))
        for r in RESERVATIONS if r.node == node and max(r.gpus) < gpus
    ]  # fmt: skip
    fits = [w for w in WORKLOADS if w.node == node and w.gpu_count <= gpus]
    actions += [(f"workload {w.name} of {w.owner}", functools.partial(_submit, workload=w))
                for w in fits if not w.gpus or max(w.gpus) < gpus]  # fmt: skip
    return actions


def _wait_for_a_sweep(client: NodeClient) -> None:
    """Until the node has read its GPUs once: a workload starts only on GPUs it knows."""
    for _batch in client.stream(calls.STREAM_SAMPLES, deadline_s=SEED_DEADLINE_S):
        return


def _reserve(client: NodeClient, reservation: DemoReservation) -> None:
    until = int(time.time() * 1000) + reservation.hours * HOUR_MS
    client.call(calls.RESERVE, deadline_s=SEED_DEADLINE_S, gpu_indices=list(reservation.gpus),
                holder=reservation.holder, until_unix_ms=until,
                reason=reservation.reason)  # fmt: skip


def _submit(client: NodeClient, workload: DemoWorkload) -> None:
    queued = client.call(
        calls.SUBMIT_WORKLOAD, deadline_s=SEED_DEADLINE_S, name=workload.name,
        argv=[sys.executable, str(TRAINING), workload.name], owner=workload.owner,
        gpu_count=workload.gpu_count, min_free_memory_bytes=workload.memory_gib * GIB,
    )  # fmt: skip
    if workload.gpus:
        client.call(calls.ASSIGN_WORKLOAD, deadline_s=SEED_DEADLINE_S, workload_id=queued.id,
                    gpu_indices=list(workload.gpus))  # fmt: skip
