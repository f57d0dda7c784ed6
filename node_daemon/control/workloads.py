"""WorkloadManager: the node's queue of commands waiting for GPUs, and their lives.

Queued → running (on the GPUs an admin assigned, or the placement policy
chose) → finished / failed / cancelled. Every change is journaled with an
event, and the in-memory state changes only once the journal has it: what a
client is told is what is stored. Running workloads survive a daemon restart:
the new daemon re-adopts them (their runner records the exit code), as slurmd
does with its jobs.

Starting is write-ahead: a launch intent is committed, then the runner is
started, then the running state is committed. A crash at any point is settled
on restart by looking for the workload's runner (an intent and no runner:
still queued, nothing ran; a runner: adopted, never started twice), and a
commit that fails kills what it started before the caller hears "failed".

A workload runs as its owner's local account (node_daemon.control.accounts),
with a clean login-like environment, in a working directory of its own. A
launcher chosen at start-up starts it (node_daemon.control.launcher_choice):
a transient systemd unit of its own, or the daemon's own child.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from gpufleet.states import WorkloadState
from gpufleet.v1 import node_pb2 as pb
from node_daemon.backends.procinfo import process_start_time_unix_ms
from node_daemon.backends.readings import GpuReading, GpuStatic, ProcessReading
from node_daemon.control.accounts import account_name, check_account, own_account
from node_daemon.control.launch_plan import CannotStart, launch_spec
from node_daemon.control.launcher import (
    KILL,
    TERM,
    DirectLauncher,
    Launched,
    Launcher,
    WorkloadFiles,
)
from node_daemon.control.launcher_choice import choose_launcher
from node_daemon.control.limits import check_request
from node_daemon.control.listing import check_queue_room
from node_daemon.control.placement import GpuFacts, refusal
from node_daemon.control.queue_policy import Waiting, plan_queue
from node_daemon.control.records import Workload, WorkloadRequest
from node_daemon.control.reservations import ReservationLedger
from node_daemon.control.settings import WorkloadSettings
from node_daemon.control.wire import workload_body, workload_from_body, workload_message
from node_daemon.errors import Invalid, NotFound, Refused
from node_daemon.health.model import GpuCondition
from node_daemon.journal.event_journal import EventJournal, JournalError, StoredRecord

log = logging.getLogger(__name__)

KIND = "workload"
# A committed intent to start a workload: its body is the workload as it will run.
LAUNCH_KIND = "workload-launch"
CANCEL_GRACE_S = 10.0
MAX_OUTPUT_BYTES = 1024 * 1024
DEFAULT_SIM_MEMORY = 8 * 1024**3


MAX_PRIORITY = 10_000


class WorkloadNotFound(NotFound):
    pass


class WorkloadConflict(Refused):
    """The request cannot be done in the workload's or GPUs' current state."""


class BadWorkload(Invalid):
    pass


class ProcessHooks(Protocol):
    """A backend that shows workloads as GPU processes itself (the simulator)."""

    def attach_process(
        self, gpu: int, pid: int, user: str, command: str, memory_bytes: int, started_ms: int
    ) -> None: ...

    def detach_process(self, pid: int) -> None: ...


@dataclass
class NodeView:
    readings: Sequence[GpuReading]
    gpus: Mapping[int, GpuStatic]
    conditions: Mapping[int, GpuCondition] = field(default_factory=dict)  # health, by GPU
    processes: Mapping[int, Sequence[ProcessReading]] = field(default_factory=dict)  # by GPU


class WorkloadManager:
    def __init__(
        self,
        journal: EventJournal,
        root: Path,
        ledger: ReservationLedger,
        node: Callable[[], NodeView],
        teams_of: Callable[[str], Sequence[str]] = lambda _owner: (),
        hooks: ProcessHooks | None = None,
        clock: Callable[[], float] = time.time,
        settings: WorkloadSettings | None = None,
        launcher: Launcher | None = None,
        demo: bool = False,
    ) -> None:
        """`demo`: a demo node's (`gpufleet daemon --demo`): every workload runs as the
        daemon's own account under its owner's name, and `end_all` ends them at stop."""
        self._demo = demo
        self._journal, self._root, self._ledger, self._node = journal, root, ledger, node
        self._teams_of, self._hooks, self._clock = teams_of, hooks, clock
        self._settings = settings or WorkloadSettings()
        # A demo node's workloads are its own children, whatever the host offers: they end
        # with it (end_all), and systemd would refuse its own account anyway.
        chosen = DirectLauncher() if demo else None
        self.launcher = (
            launcher or chosen or choose_launcher(self._settings.launcher, journal.journal_id)
        )
        _make_private(root)
        self._lock = threading.RLock()
        self._workloads: dict[str, Workload] = {}
        self._launched: dict[str, Launched] = {}
        self._attached: dict[str, int] = {}  # workload id -> pid shown on its GPUs
        self._cancelling: dict[str, float] = {}  # workload id -> when TERM was sent
        self._timing_out: dict[str, float] = {}  # workload id -> when its limit sent TERM
        for workload in self._stored(active_only=True):
            self._workloads[workload.id] = workload
        every = self._stored(active_only=False)
        self._next = 1 + max((int(w.id.removeprefix("w-")) for w in every), default=0)
        # Submit's idempotency keys, ended workloads' included: a retry finds its workload.
        self._by_key = {w.idempotency_key: w.id for w in every if w.idempotency_key}
        self._settle_launch_intents()
        self._readopt()

    def set_settings(self, settings: WorkloadSettings) -> None:
        """Accounts and work directory after a config reload (read at every submit and start).

        The launcher stays the one chosen at start: changing it needs a restart.
        """
        self._settings = replace(settings, launcher=self._settings.launcher)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _stored(self, active_only: bool) -> list[Workload]:
        return [workload_from_body(b) for b in self._journal.records(KIND, active_only)]

    # -- restart -----------------------------------------------------------------

    def _settle_launch_intents(self) -> None:
        """Settle starts a crash interrupted: adopt a runner that started, else stay queued."""
        for body in self._journal.records(LAUNCH_KIND, active_only=True):
            intended = workload_from_body(body)
            current = self._workloads.get(intended.id)
            retired = _intent_record(intended, active=False)
            if current is None or current.state is not WorkloadState.QUEUED:
                self._journal.record([], records=[retired])  # its start was committed
                continue
            files = WorkloadFiles(self._root, intended.id)
            found = self.launcher.find(files)
            if found is None:
                log.info("workload %s was starting when the daemon stopped: nothing ran, "
                         "it stays queued", intended.id)  # fmt: skip
                self._journal.record([], records=[retired])
                continue
            running = intended
            files.keep_identity(found.identity)
            if found.pid > 0:
                running = replace(intended, pid=found.pid,
                                  pid_start_unix_ms=found.start_time_unix_ms or 0)  # fmt: skip
            summary = "started (found running after a daemon restart)"
            self._write(pb.EVENT_KIND_WORKLOAD_STARTED, running, "", summary, extra=[retired])
            self._workloads[running.id] = running

    def _readopt(self) -> None:
        for workload in [w for w in self._workloads.values() if w.state is WorkloadState.RUNNING]:
            files = WorkloadFiles(self._root, workload.id)
            launched = self.launcher.adopt(
                files, workload.pid or 0, workload.pid_start_unix_ms or 0
            )
            if launched is not None and self.launcher.still_running(launched):
                self._launched[workload.id] = launched
                log.info("re-adopted running workload %s (pid %d)", workload.id, launched.pid)
            else:
                self._finish(workload, self.launcher.exit_code(files, launched),
                             "ended while the daemon was down")  # fmt: skip
                if launched is not None:
                    self.launcher.release(launched)

    # -- queries -----------------------------------------------------------------

    def workloads(self, include_ended: bool) -> list[Workload]:
        with self._lock:
            current = list(self._workloads.values())
        if not include_ended:
            return current
        return current + [w for w in self._stored(active_only=False) if w.state.ended]

    def busy_gpus(self) -> dict[int, str]:
        with self._lock:
            return {
                gpu: w.id
                for w in self._workloads.values()
                if w.state is WorkloadState.RUNNING
                for gpu in w.gpu_indices
            }

    def output(self, workload: Workload, tail_bytes: int) -> tuple[bytes, int]:
        """The last `tail_bytes` of a workload's output (one `get` found) and its size."""
        path = WorkloadFiles(self._root, workload.id).output
        try:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                f.seek(max(0, size - tail_bytes))
                return f.read(), size
        except FileNotFoundError:
            return b"", 0

    def get(self, workload_id: str, include_ended: bool = False) -> Workload:
        """A current (queued or running) workload, or an ended one; WorkloadNotFound otherwise."""
        return self._find(workload_id, include_ended)

    def _find(self, workload_id: str, include_ended: bool = False) -> Workload:
        with self._lock:
            found = self._workloads.get(workload_id)
        if found is None and include_ended:
            found = next((w for w in self.workloads(True) if w.id == workload_id), None)
        if found is None:
            raise WorkloadNotFound(f"no workload {workload_id} on this node")
        return found

    # -- changes -----------------------------------------------------------------

    def submit(
        self, request: WorkloadRequest, actor: str, submitter: str = "", submitted_by: str = ""
    ) -> Workload:
        """Queue a workload to run as its owner's account (checked now, and again at start).

        Args:
            request: what to run, for whom.
            actor: who to name in its event.
            submitter: whose account a team's workload runs as.
            submitted_by: the authenticated caller, kept with the workload: a
                console trusts a moved copy by it (console/fleet/move_proof.py),
                so only the RPC layer's verified identity may go here.
        """
        if not request.argv or not request.argv[0].strip():
            raise BadWorkload("a workload needs a command: argv[0] is empty")
        check_request(request)
        try:
            self.launcher.check_environment(request.env)
        except ValueError as exc:
            raise BadWorkload(str(exc)) from exc
        if not 1 <= request.gpu_count <= len(self._node().gpus or [0] * 64):
            raise BadWorkload(
                f"gpu_count must be 1..{len(self._node().gpus)}, got {request.gpu_count}"
            )
        owner = request.owner or actor
        time_limit_s = self._time_limit(request)
        with self._lock:
            again = self._same_key(request, owner)
            if again is not None:
                return again
        run_as, how = self._account_for(owner, submitter or actor)
        with self._lock:
            again = self._same_key(request, owner)  # a twin may have won the race
            if again is not None:
                return again
            workload = Workload(
                id=f"w-{self._next}", name=request.name or request.argv[0].split("/")[-1],
                argv=tuple(request.argv), env=dict(request.env), owner=owner, run_as=run_as,
                gpu_count=request.gpu_count, min_free_memory_bytes=request.min_free_memory_bytes,
                auto_place=request.auto_place, state=WorkloadState.QUEUED,
                queued_unix_ms=self._now_ms(), priority=request.priority,
                time_limit_s=time_limit_s, idempotency_key=request.idempotency_key,
                moved_from=request.moved_from, submitted_by=submitted_by,
            )  # fmt: skip
            check_queue_room(list(self._workloads.values()), workload)
            moved = f"; moved from {request.moved_from}" if request.moved_from else ""
            self._write(pb.EVENT_KIND_WORKLOAD_QUEUED, workload, actor, f"queued ({how}){moved}")
            self._next += 1
            self._workloads[workload.id] = workload
            if workload.idempotency_key:
                self._by_key[workload.idempotency_key] = workload.id
            return workload

    def _account_for(self, owner: str, submitter: str) -> tuple[str, str]:
        """The account a workload of `owner` runs as, and how its queued event says so."""
        if self._demo:
            run_as = own_account().name
            return run_as, f"demo node: runs as its own account {run_as} for {owner}"
        run_as = account_name(owner, submitter, self._settings.accounts)
        check_account(run_as, self.launcher.switches_users)
        return run_as, f"runs as {run_as}"

    def _time_limit(self, request: WorkloadRequest) -> int:
        if not -MAX_PRIORITY <= request.priority <= MAX_PRIORITY:
            raise BadWorkload(
                f"priority must be from {-MAX_PRIORITY} to {MAX_PRIORITY}, got {request.priority}"
            )
        limit = request.time_limit_s or self._settings.default_time_limit_s
        cap = self._settings.max_time_limit_s
        if cap and limit > cap:
            raise BadWorkload(
                f"time limit {limit} s exceeds this node's max_time_limit_s ({cap} s)"
            )
        return limit

    def _same_key(self, request: WorkloadRequest, owner: str) -> Workload | None:
        """The workload an earlier submit with this idempotency key made, if any."""
        if not request.idempotency_key:
            return None
        found = self._by_key.get(request.idempotency_key)
        if found is None:
            return None
        earlier = self._find(found, include_ended=True)
        if (earlier.argv, earlier.owner, earlier.gpu_count) != (
            tuple(request.argv),
            owner,
            request.gpu_count,
        ):
            raise WorkloadConflict(
                f"idempotency key {request.idempotency_key!r} was used for workload "
                f"{earlier.id} with a different command, owner or GPU count"
            )
        return earlier

    def assign(self, workload_id: str, gpus: Sequence[int], actor: str) -> Workload:
        with self._lock:
            workload = self._find(workload_id)
            if workload.state is not WorkloadState.QUEUED:
                state = workload.state.value
                raise WorkloadConflict(f"workload {workload_id} is {state}, not queued")
            if not gpus:
                raise BadWorkload(f"workload {workload_id} needs GPUs to be assigned to")
            if len(set(gpus)) != workload.gpu_count:
                wanted, given = workload.gpu_count, len(set(gpus))
                raise BadWorkload(f"workload {workload_id} needs {wanted} GPU(s), got {given}")
            facts = self._gpu_facts()
            for gpu in sorted(set(gpus)):
                if gpu not in facts:
                    raise BadWorkload(f"no GPU {gpu} on this node")
                # An operator's own choice may share a GPU with processes outside the
                # queue (they see them on the tile); only auto placement keeps off them.
                chosen = replace(facts[gpu], outside=())
                why = refusal(chosen, workload.owner, workload.min_free_memory_bytes,
                              self._teams_of(workload.owner))  # fmt: skip
                if why is not None:
                    raise WorkloadConflict(why)
            return self._start(workload, sorted(set(gpus)), actor)

    def cancel(self, workload_id: str, actor: str, reason: str = "") -> Workload:
        """Cancel a queued workload, or stop a running one; `reason` goes into its event."""
        why = f"cancelled by {actor}" + (f": {reason}" if reason else "")
        with self._lock:
            workload = self._find(workload_id)
            if workload.state is WorkloadState.QUEUED:
                cancelled = replace(
                    workload, state=WorkloadState.CANCELLED, ended_unix_ms=self._now_ms()
                )
                # Written first: a journal that refuses leaves it queued, as the caller is told.
                self._write(pb.EVENT_KIND_WORKLOAD_CANCELLED, cancelled, actor, why)
                del self._workloads[workload_id]
                return cancelled
            if workload_id not in self._cancelling:
                launched = self._launched.get(workload_id)
                if launched is None or not self.launcher.still_running(launched):
                    raise WorkloadConflict(f"workload {workload_id} has no running process to stop")
                try:
                    self.launcher.signal(launched, TERM)
                except OSError as exc:
                    why = f"workload {workload_id} could not be stopped: {exc}"
                    raise WorkloadConflict(why) from exc
                self._cancelling[workload_id] = self._clock()
                workload = replace(workload, detail=f"stopping ({why})")
                self._workloads[workload_id] = workload  # shown, not journaled: its end will be
            return workload

    def _start(self, workload: Workload, gpus: list[int], actor: str) -> Workload:
        """Intent, launch, commit. Any failure leaves nothing running and the workload queued."""
        try:
            spec = launch_spec(workload, gpus, self._node().gpus, self._settings,
                               self.launcher.switches_users, self._demo)  # fmt: skip
        except CannotStart as exc:
            raise WorkloadConflict(str(exc)) from exc
        intended = replace(
            workload, state=WorkloadState.RUNNING, started_unix_ms=self._now_ms(),
            gpu_indices=tuple(gpus), wait_reason="", held_gpu_indices=(),
        )  # fmt: skip
        self._journal.record([], records=[_intent_record(intended, active=True)])
        try:
            files = WorkloadFiles(self._root, workload.id)
            launched = self.launcher.launch(files, spec)
        except (OSError, ValueError) as exc:
            self._finish(workload, None, f"could not start: {exc}",
                         extra=[_intent_record(intended, active=False)])  # fmt: skip
            raise WorkloadConflict(f"workload {workload.id} could not start: {exc}") from exc
        files.keep_identity(launched.identity)  # before the record: a restart adopts by it
        running = replace(intended, pid=launched.pid,
                          pid_start_unix_ms=launched.start_time_unix_ms)  # fmt: skip
        summary = f"started on GPU {', '.join(map(str, gpus))} as {workload.run_as}" + (
            f" by {actor}" if actor else ""
        )
        try:
            self._write(pb.EVENT_KIND_WORKLOAD_STARTED, running, actor, summary,
                        extra=[_intent_record(intended, active=False)])  # fmt: skip
        except JournalError:
            self._stop_unrecorded(launched)  # the caller hears "not applied": nothing may run
            raise
        self._workloads[workload.id] = running
        self._launched[workload.id] = launched
        return running

    def end_all(self, grace_s: float = CANCEL_GRACE_S) -> None:
        """A demo node's stop: TERM every running workload, KILL what is left after
        `grace_s`, and record each as cancelled. A real node never calls it: its
        workloads outlive the daemon and are re-adopted at its next start."""
        with self._lock:
            running = list(self._launched.items())
            for workload_id, launched in running:
                self._cancelling[workload_id] = self._clock()
                _signal_quietly(self.launcher, launched, TERM)
            deadline = time.monotonic() + grace_s
            for workload_id, launched in running:
                if not _wait_ended(self.launcher, launched, deadline):
                    _signal_quietly(self.launcher, launched, KILL)
                    _wait_ended(self.launcher, launched, time.monotonic() + grace_s)
                files = WorkloadFiles(self._root, workload_id)
                self._finish(self._workloads[workload_id],
                             self.launcher.exit_code(files, launched),
                             "the demo node stopped")  # fmt: skip
                self.launcher.release(launched)

    # -- every tick ----------------------------------------------------------------

    def tick(self) -> None:
        """Notice ended workloads, escalate cancels, place auto workloads, show processes."""
        with self._lock:
            for workload_id, launched in list(self._launched.items()):
                workload = self._workloads[workload_id]
                if self.launcher.still_running(launched):
                    self._enforce_time_limit(workload, launched)
                    self._escalate_cancel(workload)
                    self._attach(workload, launched)
                else:
                    files = WorkloadFiles(self._root, workload_id)
                    self._finish(workload, self.launcher.exit_code(files, launched), "")
                    self.launcher.release(launched)  # its end is recorded: systemd may forget it
            self._auto_place()

    def _enforce_time_limit(self, workload: Workload, launched: Launched) -> None:
        """TERM at the limit (once), KILL when the grace has passed too."""
        ends = workload.ends_by_unix_ms
        if ends is None or self._now_ms() < ends or workload.id in self._cancelling:
            return
        sent = self._timing_out.get(workload.id)
        try:
            if sent is None:
                self.launcher.signal(launched, TERM)
                self._timing_out[workload.id] = self._clock()
                limit = _duration_words(workload.time_limit_s)
                log.info("workload %s reached its time limit (%s): TERM", workload.id, limit)
                self._workloads[workload.id] = replace(
                    workload, detail=f"stopping: time limit {limit} reached"
                )  # shown, not journaled: its end will be
            elif self._clock() - sent > self._settings.time_limit_grace_s:
                self.launcher.signal(launched, KILL)
        except OSError as exc:
            log.error("cannot stop workload %s at its time limit: %s", workload.id, exc)

    def _escalate_cancel(self, workload: Workload) -> None:
        asked = self._cancelling.get(workload.id)
        launched = self._launched.get(workload.id)
        if asked is not None and launched is not None and self._clock() - asked > CANCEL_GRACE_S:
            try:
                self.launcher.signal(launched, KILL)
            except OSError as exc:
                log.error("cannot kill workload %s after its grace: %s", workload.id, exc)

    def _attach(self, workload: Workload, launched: Launched) -> None:
        if self._hooks is None or workload.id in self._attached:
            return
        shown = self.launcher.workload_pid(launched)
        if shown is None:
            return
        memory = workload.min_free_memory_bytes or DEFAULT_SIM_MEMORY
        started = process_start_time_unix_ms(shown) or self._now_ms()
        command = " ".join(workload.argv)
        # A demo node's simulated GPUs show the owner it stands in for, not its own account.
        user = workload.owner if self._demo else workload.run_as or workload.owner
        for gpu in workload.gpu_indices:
            self._hooks.attach_process(gpu, shown, user, command, memory, started)
        self._attached[workload.id] = shown

    def _finish(
        self,
        workload: Workload,
        code: int | None,
        note: str,
        extra: Sequence[StoredRecord] = (),
    ) -> None:
        cancelled = workload.id in self._cancelling
        if cancelled:
            state, kind = WorkloadState.CANCELLED, pb.EVENT_KIND_WORKLOAD_CANCELLED
        elif workload.id in self._timing_out:
            state, kind = WorkloadState.TIMED_OUT, pb.EVENT_KIND_WORKLOAD_FAILED
            note = "; ".join(
                t
                for t in (note, f"time limit {_duration_words(workload.time_limit_s)} reached")
                if t
            )
        elif code == 0:
            state, kind = WorkloadState.FINISHED, pb.EVENT_KIND_WORKLOAD_FINISHED
        else:
            state, kind = WorkloadState.FAILED, pb.EVENT_KIND_WORKLOAD_FAILED
        exit_text = "exit code unknown" if code is None else f"exit code {code}"
        ended = replace(
            workload, state=state, ended_unix_ms=self._now_ms(),
            exit_code=workload.exit_code if code is None else code,
            detail="; ".join(t for t in (note, exit_text) if t),
        )  # fmt: skip
        # A journal that refuses keeps it as it was in memory too; the next tick tries again.
        self._write(kind, ended, "", ended.detail, extra)
        self._workloads.pop(workload.id, None)
        self._launched.pop(workload.id, None)
        self._cancelling.pop(workload.id, None)
        self._timing_out.pop(workload.id, None)
        shown = self._attached.pop(workload.id, None)
        if shown is not None and self._hooks is not None:
            self._hooks.detach_process(shown)

    def _auto_place(self) -> None:
        """Start what the fair queue says may start; note why the rest waits."""
        queued = [w for w in self._workloads.values() if w.state is WorkloadState.QUEUED]
        if not queued:
            return
        facts = self._gpu_facts()
        frees_by: dict[int, int | None] = {}
        for w in self._workloads.values():
            if w.state is WorkloadState.RUNNING:
                frees_by.update(dict.fromkeys(w.gpu_indices, w.ends_by_unix_ms))
        waiting = [
            Waiting(w.id, w.owner, tuple(self._teams_of(w.owner)), w.gpu_count,
                    w.min_free_memory_bytes, w.priority, w.queued_unix_ms, w.time_limit_s)
            for w in queued if w.auto_place
        ]  # fmt: skip
        plan = plan_queue(waiting, facts, frees_by, self._now_ms())
        for workload_id, gpus in plan.starts:
            try:
                self._start(self._workloads[workload_id], gpus, "")
            except (WorkloadConflict, JournalError) as exc:
                log.error("%s", exc)  # the others still get placed
        for w in queued:
            current = self._workloads.get(w.id)
            if current is None or current.state is not WorkloadState.QUEUED:
                continue
            reason = plan.reasons.get(w.id, "" if w.auto_place else MANUAL_WAIT)
            held = plan.held.get(w.id, ())
            if (current.wait_reason, current.held_gpu_indices) != (reason, held):
                # Shown in listings, not journaled: placement says it afresh each tick.
                self._workloads[w.id] = replace(current, wait_reason=reason, held_gpu_indices=held)

    def _stop_unrecorded(self, launched: Launched) -> None:
        """Kill a workload whose start could not be committed, and forget it."""
        try:
            self.launcher.signal(launched, KILL)
        except (OSError, ValueError) as exc:
            log.error("cannot kill workload process %d that was not recorded: %s",
                      launched.pid, exc)  # fmt: skip
            return
        self.launcher.release(launched)

    def _gpu_facts(self) -> dict[int, GpuFacts]:
        busy = self.busy_gpus()
        facts = {}
        node = self._node()
        for reading in node.readings:
            held = self._ledger.holder_of(reading.index)
            running = busy.get(reading.index)
            outside = () if running is not None else tuple(node.processes.get(reading.index, ()))
            facts[reading.index] = GpuFacts(
                reading, held.holder if held else None, held.until_unix_ms if held else None,
                held.reason if held else "", running, node.conditions.get(reading.index), outside,
            )  # fmt: skip
        return facts

    def _write(
        self,
        kind: int,
        workload: Workload,
        actor: str,
        summary: str,
        extra: Sequence[StoredRecord] = (),
    ) -> None:
        what = f"workload {workload.id} ({workload.name}) of {workload.owner}: {summary}"
        # Every viewer streams events: they carry the command, not the environment.
        event = pb.Event(time_unix_ms=self._now_ms(), kind=kind, actor=actor, summary=what,  # type: ignore[arg-type]
                         workload=workload_message(workload, with_env=False))  # fmt: skip
        record = StoredRecord(
            KIND, workload.id, not workload.state.ended, event.time_unix_ms, workload_body(workload)
        )
        self._journal.record([event], records=[record, *extra])


def _signal_quietly(launcher: Launcher, launched: Launched, signum: int) -> None:
    try:
        launcher.signal(launched, signum)
    except (OSError, ValueError) as exc:
        log.error("cannot signal workload process %d: %s", launched.pid, exc)


def _wait_ended(launcher: Launcher, launched: Launched, deadline: float) -> bool:
    """Whether the workload ended by `deadline` (time.monotonic)."""
    while launcher.still_running(launched):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        if launched.popen is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                launched.popen.wait(left)
        else:
            time.sleep(min(0.05, left))  # a re-adopted runner is no child: no wait to block on
    return True


MANUAL_WAIT = "waits for an operator to assign it GPUs (not auto-placed)"


def _duration_words(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


def _intent_record(workload: Workload, active: bool) -> StoredRecord:
    return StoredRecord(LAUNCH_KIND, workload.id, active, int(time.time() * 1000),
                        workload_body(workload))  # fmt: skip


def _make_private(root: Path) -> None:
    """Outputs and exit codes, and the state directory above them, are the daemon's alone.

    Only a mode that is not private yet is changed: a read-only state directory
    already 0700 (the daemon starts degraded there) is left as it is.
    """
    root.mkdir(parents=True, exist_ok=True)
    for directory in (root, root.parent):
        found = directory.stat()
        if found.st_uid == os.geteuid() and stat.S_IMODE(found.st_mode) != 0o700:
            os.chmod(directory, 0o700)
