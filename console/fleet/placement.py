"""Would a drop be accepted, and why not: the verdicts drop targets show while hovering.

Pure functions over the fleet model (no Qt), so every reason a tile gives can be
tested without a window. They predict what the daemon will say; the daemon
still decides, and its answer (or refusal) is shown when it comes.

Teams: a GPU reserved for "team:NAME" takes a workload of a team member, but
only the daemon knows the teams (its [teams] table). The console accepts such a
drop and says so; the daemon refuses it if the owner is not in the team.

Multi-GPU workloads: dropped on a tile that is part of the grid's selection,
when the selection holds exactly as many GPUs of that node as the workload
needs, it goes to the selected GPUs; otherwise to the hovered GPU plus the next
GPUs of the same node (in index order, wrapping around) that can take it.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace

from console.fleet.columns import shown
from console.fleet.control import WorkloadRow
from console.fleet.control_requests import KillTarget
from console.fleet.identity import job_kill_refusal
from console.fleet.model import FleetModel, NodeRecord
from console.fleet.updates import LinkState
from gpufleet import policy
from gpufleet.policy import is_team, role_needed
from gpufleet.states import WorkloadState
from gpufleet.v1.gpu_metrics import MEM_TOTAL_BYTES, MEM_USED_BYTES

GIB = 1024**3
Place = tuple[str, int]  # (node target, GPU index)


@dataclass(frozen=True)
class Verdict:
    """Whether a drop is accepted; `reason` says why not, or what it will do."""

    ok: bool
    reason: str
    # The GPUs the drop would act on (outlined while hovering), by node.
    places: tuple[Place, ...] = ()

    def gpus_by_node(self) -> dict[str, tuple[int, ...]]:
        found: dict[str, list[int]] = {}
        for target, gpu in self.places:
            found.setdefault(target, []).append(gpu)
        return {target: tuple(gpus) for target, gpus in found.items()}


def clock_text(unix_ms: int, now_unix_ms: int) -> str:
    """A time as a person reads it: "18:00" today, "Nov 30 18:00" another day."""
    when, now = time.localtime(unix_ms / 1000), time.localtime(now_unix_ms / 1000)
    same_day = (when.tm_year, when.tm_yday) == (now.tm_year, now.tm_yday)
    return time.strftime("%H:%M" if same_day else "%b %d %H:%M", when)


def gib_text(value: int) -> str:
    return f"{value / GIB:.0f} GiB" if value >= GIB else f"{value / 1024**2:.0f} MiB"


def gpus_text(gpus: Iterable[int]) -> str:
    listed = sorted(gpus)
    return ("GPU " if len(listed) == 1 else "GPUs ") + ", ".join(str(g) for g in listed)


# -- the node as a whole --------------------------------------------------------


def _node_refusal(fleet: FleetModel, target: str, gpu: int, method: str) -> str | None:
    """Why `target` cannot take the call `method` on GPU `gpu` now (gone, no such GPU, or the
    caller's role is below what the call needs: gpufleet.policy); None when it can."""
    try:
        node = fleet.node(target)
    except KeyError:
        return f"{target} is not a watched node"
    if node.state is not LinkState.CONNECTED:
        return f"{node.name} is {node.state.value}"
    if gpu >= node.gpu_count:
        return f"{node.name} has no GPU {gpu}"
    return fleet.role_refusal(target, role_needed(method))


def _ownership_refusal(
    fleet: FleetModel, target: str, owner: str | None, what: str, *, a_process: bool = False
) -> str | None:
    """An operator acts only for itself and its teams, and kills only its own processes;
    for anyone else it needs an admin (gpufleet.policy, as the node enforces it)."""
    identity = fleet.node(target).identity
    if identity is None:
        return None  # not known yet: the node decides
    if a_process:
        allowed = policy.may_kill(identity.role, identity.user, owner)
    else:
        allowed = identity.may_act_for(owner)
    if allowed:
        return None
    for_whom = " or ".join(identity.holders)
    return f"needs the admin role for {what} ({identity.user} may act only for {for_whom})"


def _gpu_health_refusal(node: NodeRecord, gpu: int) -> str | None:
    snap = node.latest.get(gpu)
    if snap is None:
        return f"GPU {gpu} has not reported yet"
    if snap.health == "lost":
        return f"GPU {gpu} is lost"
    if snap.health != "ok":
        return f"GPU {gpu} cannot be read" + (f": {snap.error}" if snap.error else "")
    # Drained, or needs a reset, a reboot or inspection: the node places nothing new there.
    return snap.condition.placement_refusal() if snap.condition is not None else None


def _reserved_text(fleet: FleetModel, target: str, gpu: int, now_ms: int) -> tuple[str, str]:
    """(holder, "reserved for HOLDER until 18:00 (why)") or ("", "") when not reserved."""
    held = fleet.control.reservation_on(target, gpu, now_ms)
    if held is None:
        return "", ""
    why = f" ({held.reason})" if held.reason else ""
    until = clock_text(held.until_unix_ms, now_ms)
    return held.holder, f"reserved for {held.holder} until {until}{why}"


# -- a queued workload onto GPUs -------------------------------------------------


def gpu_refusal(workload: WorkloadRow, fleet: FleetModel, gpu: int, now_ms: int) -> str | None:
    """Why one GPU of the workload's node cannot take it, or None when it can."""
    node = fleet.node(workload.target)
    refusal = _gpu_health_refusal(node, gpu)
    if refusal is not None:
        return refusal
    holder, reserved = _reserved_text(fleet, workload.target, gpu, now_ms)
    if reserved and holder != workload.owner and not is_team(holder):
        return f"GPU {gpu} is {reserved}"
    busy = fleet.control.running_on(workload.target, gpu)
    if busy is not None and busy.id != workload.id:
        return f"GPU {gpu} is busy with workload {busy.label}"
    used, total = node.value(gpu, MEM_USED_BYTES), node.value(gpu, MEM_TOTAL_BYTES)
    if used is not None and total:
        # From the ring's float32 GiB (steps of 8 KiB at 80 GiB): near enough for
        # a verdict while hovering; the daemon checks the free memory exactly on assigning.
        free = max(0, round((total - used) / shown(MEM_TOTAL_BYTES).scale))
        if free < workload.min_free_memory_bytes:
            needed = gib_text(workload.min_free_memory_bytes)
            return f"GPU {gpu}: not enough free memory: {gib_text(free)} free, {needed} needed"
    return None


def can_assign(
    workload: WorkloadRow,
    fleet: FleetModel,
    target: str,
    gpu: int,
    now_ms: int,
    selection: Collection[Place] = (),
) -> Verdict:
    """May this workload be dropped on GPU `gpu` of `target`? On which GPUs would it run?"""
    if workload.state is not WorkloadState.QUEUED:
        return Verdict(False, f"{workload.label} is {workload.state.value}, not queued")
    moving = target != workload.target
    # Onto its own node an assign; onto another, a submit there (and a cancel here).
    refusal = _node_refusal(fleet, target, gpu, "SubmitWorkload" if moving else "AssignWorkload")
    if refusal is not None:
        return Verdict(False, refusal, ((target, gpu),))
    whose = f"{workload.label} of {workload.owner or 'nobody'}"
    # A move submits on the target and cancels where it was: both nodes must allow it.
    for node_target in (target, workload.target) if moving else (target,):
        refusal = _ownership_refusal(fleet, node_target, workload.owner, whose)
        if refusal is not None:
            return Verdict(False, refusal, ((target, gpu),))
    if moving:
        # Its own node is read and told to cancel it: it must answer, and let us.
        refusal = _node_refusal(fleet, workload.target, 0, "CancelWorkload")
        if refusal is not None:
            return Verdict(False, f"{workload.label} cannot move: {refusal}", ((target, gpu),))
    placed = replace(workload, target=target) if moving else workload
    gpus, refusal = _pick_gpus(placed, fleet, gpu, now_ms, selection)
    places = tuple((target, g) for g in gpus)
    if refusal is not None:
        return Verdict(False, refusal, places)
    node = fleet.node(target).name
    if moving:
        home = fleet.node(workload.target).name
        what = f"move {workload.label} from {home} to {gpus_text(gpus)} of {node}"
    else:
        what = f"assign {workload.label} to {gpus_text(gpus)} of {node}"
    return Verdict(True, what + _team_caveat(placed, fleet, gpus, now_ms), places)


def _team_caveat(workload: WorkloadRow, fleet: FleetModel, gpus: Iterable[int], now: int) -> str:
    """A word on team reservations the console cannot judge (the node knows the teams)."""
    teams = {
        holder
        for gpu in gpus
        if (holder := _reserved_text(fleet, workload.target, gpu, now)[0])
        and is_team(holder)
        and holder != workload.owner
    }
    if not teams:
        return ""
    named = ", ".join(sorted(teams))
    return f" (reserved for {named}: the node accepts it if {workload.owner} is a member)"


def _targets(fleet: FleetModel) -> set[str]:
    return {n.target for n in fleet}


def _pick_gpus(
    workload: WorkloadRow,
    fleet: FleetModel,
    gpu: int,
    now_ms: int,
    selection: Collection[Place],
) -> tuple[tuple[int, ...], str | None]:
    needed = max(1, workload.gpu_count)
    refusal = gpu_refusal(workload, fleet, gpu, now_ms)
    if needed == 1 or refusal is not None:
        return (gpu,), refusal
    chosen = sorted(g for t, g in selection if t == workload.target)
    if gpu in chosen and len(chosen) == needed:
        for other in chosen:
            refusal = gpu_refusal(workload, fleet, other, now_ms)
            if refusal is not None:
                return tuple(chosen), f"selected {refusal}"
        return tuple(chosen), None
    count = fleet.node(workload.target).gpu_count
    others = [(gpu + step) % count for step in range(1, count)]
    refused = [(g, gpu_refusal(workload, fleet, g, now_ms)) for g in others]
    free = [gpu] + [g for g, why in refused if why is None]
    if len(free) >= needed:
        return tuple(free[:needed]), None
    first_why = next((why for _, why in refused if why is not None), "")
    return tuple(free), (
        f"{workload.label} needs {needed} GPUs; only {len(free)} can take it ({first_why})"
    )


# -- a user or team onto GPUs ----------------------------------------------------


def can_reserve(
    holder: str,
    fleet: FleetModel,
    target: str,
    gpu: int,
    now_ms: int,
    selection: Collection[Place] = (),
) -> Verdict:
    """May `holder` be dropped on this tile? Reserves the selection when the tile is in it."""
    if not holder.strip():
        return Verdict(False, "no user or team named", ((target, gpu),))
    places = tuple(sorted(selection)) if (target, gpu) in selection else ((target, gpu),)
    for place in places:
        refusal = _node_refusal(fleet, *place, "Reserve")
        if refusal is not None:
            return Verdict(False, refusal, places)
        refusal = _ownership_refusal(fleet, place[0], holder, f"a reservation for {holder}")
        if refusal is not None:
            return Verdict(False, refusal, places)
        held_by, reserved = _reserved_text(fleet, *place, now_ms)
        if reserved and held_by != holder:  # the node lets a holder add to its own
            node = fleet.node(place[0]).name
            return Verdict(False, f"GPU {place[1]} of {node} is already {reserved}", places)
    what = "; ".join(
        f"{gpus_text(gpus)} of {fleet.node(t).name}"
        for t, gpus in Verdict(True, "", places).gpus_by_node().items()
    )
    return Verdict(True, f"reserve {what} for {holder}", places)


# -- a process onto the kill zone ------------------------------------------------


def can_kill(victim: KillTarget, fleet: FleetModel) -> Verdict:
    """May this process be killed from here? Only one the node still lists on that GPU.

    A Slurm job's process only where the node's kill policy allows it
    (allow_kill_job_processes, as WhoAmI reports it).
    """
    place = ((victim.target, victim.gpu),)
    refusal = _node_refusal(fleet, victim.target, victim.gpu, "KillProcess")
    if refusal is not None:
        return Verdict(False, refusal, place)
    if victim.process.start_time_unix_ms is None:
        return Verdict(
            False,
            f"pid {victim.pid} has no start time: it cannot be told apart from a reused pid",
            place,
        )
    snap = fleet.node(victim.target).latest.get(victim.gpu)
    if snap is None or all(p.pid != victim.pid for p in snap.processes):
        return Verdict(False, f"pid {victim.pid} is no longer on GPU {victim.gpu}", place)
    owner = victim.process.user
    refusal = _ownership_refusal(
        fleet,
        victim.target,
        owner,
        f"pid {victim.pid} of {owner or 'an unknown user'}",
        a_process=True,
    )
    if refusal is not None:
        return Verdict(False, refusal, place)
    # As the node judges: who asks first, then its kill policy (WhoAmI), not a guess.
    node = fleet.node(victim.target)
    job = victim.process.slurm_job_id or ""
    refusal = job_kill_refusal(node.identity, node.name, job)
    if refusal is not None:
        why = f"{refusal}: pid {victim.pid} belongs to Slurm job {job}; cancel it with scancel"
        return Verdict(False, why, place)
    if job:
        return Verdict(True, f"kill {describe_process(victim)} of Slurm job {job}", place)
    return Verdict(True, f"kill {describe_process(victim)}", place)


def describe_process(victim: KillTarget) -> str:
    """ "pid 1234 (alice: python train.py) on node-1 GPU 2"."""
    p = victim.process
    who = f"{p.user or 'unknown user'}: {p.command or 'unknown command'}"
    return f"pid {p.pid} ({who}) on {victim.node_name} GPU {victim.gpu}"
