"""Self-healing in a real daemon: the simulated backend's scripted faults (or the fake NVML
with a real process), real gRPC (StreamEvents, GetHealth, KillProcess), real commands.

Time moves by the daemon's own ticks (0.1 s); each test waits on the event it expects,
never sleeps.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import fields
from pathlib import Path

import grpc
import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from gpufleet.v1.gpu_metrics import POWER_LIMIT_W, TEMP_GPU_C
from node_daemon.alerts.rules import parse_alert_settings
from node_daemon.backends.simulated.backend import SimulatedBackend
from node_daemon.backends.simulated.scenario import ScenarioEvent, parse_scenario
from node_daemon.control.records import WorkloadRequest
from node_daemon.healing.settings import HealingSettings, parse_healing_settings
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.fake_nvml.fixture import FakeNvmlState
from tests.node_daemon.reload_harness import ReloadableDaemon

MIB = 1024**2


class Events:
    """Every event the daemon streams from the start, gathered on a thread of the test's."""

    def __init__(self, daemon: NodeDaemon) -> None:
        self._channel = grpc.insecure_channel(str(daemon.address))
        self.stub = pb_grpc.NodeServiceStub(self._channel)
        self._stream = self.stub.StreamEvents(pb.StreamEventsRequest(after_seq=0))
        self.seen: list[pb.Event] = []
        self._thread = threading.Thread(target=self._gather, name="test-events", daemon=True)
        self._thread.start()

    def _gather(self) -> None:
        try:
            for event in self._stream:
                self.seen.append(event)
        except grpc.RpcError:
            pass  # cancelled at close

    def healing(self, **fields: object) -> list[pb.HealingAction]:
        found = [e.healing for e in list(self.seen) if e.kind == pb.EVENT_KIND_HEALING_ACTION]
        return [h for h in found if all(getattr(h, k) == v for k, v in fields.items())]

    def wait_healing(self, timeout_s: float = 20, **fields: object) -> pb.HealingAction:
        wait_for(lambda: self.healing(**fields), timeout_s, f"a healing event {fields}")
        return self.healing(**fields)[0]

    def close(self) -> None:
        self._stream.cancel()
        self._thread.join(5)
        self._channel.close()


@pytest.fixture
def events() -> Iterator[Callable[[NodeDaemon], Events]]:
    opened: list[Events] = []

    def open_for(daemon: NodeDaemon) -> Events:
        opened.append(Events(daemon))
        return opened[-1]

    yield open_for
    for stream in opened:
        stream.close()


def stop_once_healed(
    events: Callable[[NodeDaemon], Events],
    daemon: NodeDaemon,
    timeout_s: float = 20,
    **fields: object,
) -> pb.HealingAction:
    """Self-healing's first action with `fields` on `daemon` (as Events.wait_healing waits for
    it); then the daemon stops (the test starts it again on the same state)."""
    stream = events(daemon)
    healed = stream.wait_healing(timeout_s, **fields)
    stream.close()
    daemon.stop(grace_s=0.5)
    return healed


def settings(text: str) -> HealingSettings:
    import tomllib

    return parse_healing_settings(tomllib.loads(text).get("healing", {}), "test")


def simulated(gpus: int, *events: dict[str, object], step_s: float = 0.1) -> SimulatedBackend:
    """A simulated node stepping `step_s` a tick, with scripted events (the scenario's keys)."""
    scenario = parse_scenario({"event": list(events)})
    return SimulatedBackend(gpus, seed=3, scenario=scenario, step_s=step_s)


def condition(stub: pb_grpc.NodeServiceStub, gpu: int) -> pb.GpuCondition:
    health = stub.GetHealth(pb.GetHealthRequest(), timeout=5)
    return next(c for c in health.gpus if c.gpu_index == gpu)


# -- drain --------------------------------------------------------------------


def test_dry_run_journals_would_do_and_changes_nothing(start_daemon: DaemonFactory, events) -> None:  # type: ignore[no-untyped-def]
    backend = simulated(2, {"at": 0.3, "gpu": 1, "kind": "recovery_action", "value": 1})
    daemon = start_daemon(backend, gpus=2, healing=settings('[healing]\nmode = "dry-run"'))
    stream = events(daemon)
    would = stream.wait_healing(action="drain")
    assert (would.gpu_index, would.dry_run, would.outcome) == (1, True, "would do")
    assert "needs reset" in would.reason
    gpu1 = condition(stream.stub, 1)
    assert gpu1.state == pb.GPU_HEALTH_STATE_NEEDS_RESET and not gpu1.drained
    audit = daemon.audit.query(user="self-healing")
    assert [(a.method, a.result) for a in audit] == [("healing.drain", "would do")]


def test_on_drains_after_a_fault_and_returns_it_after_the_clean_period(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events
) -> None:
    backend = simulated(2, {"at": 0.3, "gpu": 1, "kind": "recovery_action", "value": 1})
    policy = settings('[healing]\nmode = "on"\n[healing.drain]\nreturn_after_clean_s = 1\n')
    daemon = start_daemon(backend, gpus=2, healing=policy)
    stream = events(daemon)
    drained = stream.wait_healing(action="drain")
    assert (drained.gpu_index, drained.dry_run, drained.outcome) == (1, False, "done")
    gpu1 = condition(stream.stub, 1)
    assert gpu1.drained and gpu1.drained_by == "self-healing"
    backend.inject(ScenarioEvent(0, 1, "reset"))  # repaired: the driver asks for nothing more
    returned = stream.wait_healing(action="undrain")
    assert (returned.gpu_index, returned.outcome) == (1, "done")
    assert not condition(stream.stub, 1).drained
    assert "return_after_clean_s" in returned.reason


def test_a_restarted_daemon_still_returns_what_self_healing_drained(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events, tmp_path: Path
) -> None:
    policy = settings('[healing]\nmode = "on"\n[healing.drain]\nreturn_after_clean_s = 1\n')
    faulty = simulated(2, {"at": 0.3, "gpu": 1, "kind": "recovery_action", "value": 1})
    first = start_daemon(faulty, gpus=2, healing=policy, state_dir=tmp_path)
    stop_once_healed(events, first, action="drain")
    # The same node after a restart, the fault gone (the GPU was reset meanwhile).
    second = start_daemon(simulated(2), gpus=2, healing=policy, state_dir=tmp_path)
    stream = events(second)
    assert condition(stream.stub, 1).drained_by == "self-healing"  # kept across the restart
    returned = stream.wait_healing(action="undrain")
    assert (returned.gpu_index, returned.outcome) == (1, "done")
    assert len(stream.healing(action="drain")) == 1  # the one before the restart, not again
    assert not condition(stream.stub, 1).drained


# -- power cap ----------------------------------------------------------------


def test_power_cap_applied_when_hot_and_restored_once_cool(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events
) -> None:
    # 2 simulated seconds a tick: heating and cooling take seconds, not minutes.
    backend = simulated(
        1, {"at": 2, "kind": "load", "util": 100}, {"at": 4, "kind": "overheat"}, step_s=2.0
    )
    policy = settings(
        '[healing]\nmode = "on"\n[healing.power_cap]\nabove_c = 80\nabove_for_s = 1\n'
        "cool_c = 70\nrestore_after_cool_s = 1\n"
    )
    daemon = start_daemon(backend, gpus=1, healing=policy)
    stream = events(daemon)
    capped = stream.wait_healing(60, action="power_cap")
    assert capped.outcome == "done" and "above 80 °C" in capped.reason
    facts = daemon.sampler.status.facts
    assert facts is not None
    static = facts.gpus[0]
    assert static.power_limit_default_w is not None
    expected = max(static.power_limit_default_w * 0.8, static.power_limit_min_w or 0)
    assert condition(stream.stub, 0).power_capped_w == pytest.approx(expected, abs=0.1)

    def limit_now() -> float | None:
        latest = daemon.sampler.latest
        return latest.readings[0][POWER_LIMIT_W] if latest else None

    wait_for(lambda: limit_now() == pytest.approx(expected, abs=0.1), 10, "the lower limit")
    backend.inject(ScenarioEvent(0, 0, "cool"))
    restored = stream.wait_healing(60, action="power_restore")
    assert restored.outcome == "done"
    wait_for(lambda: limit_now() == static.power_limit_default_w, 10, "the default limit")
    assert not condition(stream.stub, 0).HasField("power_capped_w")
    latest = daemon.sampler.latest
    assert latest is not None and (latest.readings[0][TEMP_GPU_C] or 0) < 70


# -- reset --------------------------------------------------------------------


def test_reset_runs_only_once_the_gpu_is_idle(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events, tmp_path: Path
) -> None:
    backend = simulated(
        2,
        {"at": 0.1, "gpu": 1, "kind": "load", "util": 50},  # a process of its own on GPU 1
        {"at": 0.3, "gpu": 1, "kind": "recovery_action", "value": 1},
    )
    marker = tmp_path / "reset-gpu"
    policy = settings(
        f'[healing]\nmode = "on"\n[healing.reset]\nenabled = true\n'
        f'command = ["touch", "{marker}{{index}}"]\n'
    )
    daemon = start_daemon(backend, gpus=2, healing=policy)
    stream = events(daemon)
    stream.wait_healing(action="drain")
    wait_for(lambda: daemon.sampler.latest and daemon.sampler.latest.processes.get(1), 10,
             "GPU 1's simulated processes")  # fmt: skip
    assert not stream.healing(action="gpu_reset") and not Path(f"{marker}1").exists()
    for process in daemon.sampler.latest.processes[1]:  # type: ignore[union-attr]
        start = process.start_time_unix_ms or 0
        request = pb.KillProcessRequest(
            gpu_index=1, pid=process.pid, actor="erin", start_time_unix_ms=start
        )
        stream.stub.KillProcess(request, timeout=30)
    reset = stream.wait_healing(action="gpu_reset")
    assert (reset.gpu_index, reset.outcome) == (1, "done")
    assert Path(f"{marker}1").exists() and not Path(f"{marker}0").exists()


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def reasons(stub: pb_grpc.NodeServiceStub, gpu: int) -> set[str]:
    return {r.code for r in condition(stub, gpu).reasons}


def repair_policy(repair: str, verify_after_s: float, shell: str) -> HealingSettings:
    """Self-healing on, with `repair` (reset, reboot) run as `sh -c shell` and a 1 s cooldown."""
    return settings(
        f'[healing]\nmode = "on"\n[healing.{repair}]\nenabled = true\n'
        f'verify_after_s = {verify_after_s}\ncooldown_s = 1\ncommand = ["sh", "-c", "{shell}"]\n'
    )


def start_on_boot(
    start_daemon: DaemonFactory,
    fault: dict[str, object],
    policy: HealingSettings,
    state: Path,
    boot_id: str,
) -> NodeDaemon:
    """A daemon on two simulated GPUs with `fault`, its state kept in `state` across restarts,
    on the (emulated) boot `boot_id`."""
    return start_daemon(
        simulated(2, fault), gpus=2, healing=policy, state_dir=state, boot_id=boot_id
    )


def test_a_reset_is_not_run_again_after_a_restart_on_the_same_boot(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events, tmp_path: Path
) -> None:
    """The reset did not cure GPU 1 (the driver still asks for one); the daemon restarts on
    the same boot. The reset ran again once its cooldown had passed (#28): it escalates
    instead, and is never run again for that fault."""
    marker, state = tmp_path / "resets", tmp_path / "state"
    policy = repair_policy("reset", 1, f"echo {{index}} >> {marker}")
    fault = {"at": 0.05, "gpu": 1, "kind": "recovery_action", "value": 1}
    first = start_on_boot(start_daemon, fault, policy, state, "boot-1")
    reset = stop_once_healed(events, first, action="gpu_reset", outcome="done")
    assert (reset.gpu_index, lines(marker)) == (1, ["1"])
    second = start_on_boot(start_daemon, fault, policy, state, "boot-1")
    stream = events(second)
    wait_for(lambda: second.sampler.sweeps >= 30, 30, "30 sweeps after the restart")
    assert lines(marker) == ["1"], "the reset ran again"
    escalated = wait_escalation(stream, "gpu_reset")
    assert (escalated.gpu_index, escalated.outcome) == (1, "done")
    assert "needs reset" in escalated.reason and "after the gpu_reset of " in escalated.reason
    assert len(stream.healing(action="gpu_reset", outcome="done")) == 2  # the reset, the step
    gpu1 = condition(stream.stub, 1)
    assert gpu1.state == pb.GPU_HEALTH_STATE_NEEDS_INSPECTION and gpu1.drained
    assert "repair_failed" in reasons(stream.stub, 1)
    audit = second.audit.query(user="self-healing", method="healing.gpu_reset")
    assert ['"escalate"' in a.params for a in audit].count(True) == 1


def escalations(stream: Events, action: str) -> list[pb.HealingAction]:
    """Self-healing's escalations of `action` (a repair that did not cure) seen so far."""
    return [h for h in stream.healing(action=action) if "not repeated" in h.reason]


def wait_escalation(stream: Events, action: str) -> pb.HealingAction:
    wait_for(lambda: escalations(stream, action), 20, f"an escalation of {action}")
    return escalations(stream, action)[0]


def test_a_reboot_that_did_not_cure_escalates_and_is_not_repeated_over_three_boots(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events, tmp_path: Path
) -> None:
    """GPU 1 needs a reboot from its first reading on, boot after boot (emulated boot ids).
    The reboot ran again in each boot, once per cooldown (#28); it runs once, and the next
    boot escalates: drained and marked for inspection, which the boots after keep."""
    marker, state = tmp_path / "reboots", tmp_path / "state"
    policy = repair_policy("reboot", 0.5, f"echo rebooted >> {marker}")
    fault = {"at": 0.05, "gpu": 1, "kind": "recovery_action", "value": 2}
    first = start_on_boot(start_daemon, fault, policy, state, "boot-1")
    rebooted = stop_once_healed(events, first, action="node_reboot", outcome="done")
    assert "GPU 1 needs reboot" in rebooted.reason and lines(marker) == ["rebooted"]
    for boot in ("boot-2", "boot-3", "boot-4"):
        daemon = start_on_boot(start_daemon, fault, policy, state, boot)
        stream = events(daemon)
        wait_for(lambda d=daemon: d.sampler.sweeps >= 30, 30, f"30 sweeps in {boot}")  # type: ignore[misc]
        assert lines(marker) == ["rebooted"], f"rebooted again in {boot}"
        wait_escalation(stream, "node_reboot")
        gpu1 = condition(stream.stub, 1)
        assert gpu1.state == pb.GPU_HEALTH_STATE_NEEDS_INSPECTION and gpu1.drained, boot
        stream.close()
        daemon.stop(grace_s=0.5)
    escalated = escalations(stream, "node_reboot")
    assert len(escalated) == 1 and escalated[0].gpu_index == 1
    assert "needs reboot" in escalated[0].reason
    assert len(stream.healing(action="node_reboot", outcome="done")) == 2  # reboot, escalation


# -- memory leak --------------------------------------------------------------

LEAK_RULE = {"memory_leak": {"bucket_s": 0.1, "min_duration_s": 1, "history_s": 5}}


class LeakingProcess:
    """A real process listed on the fake NVML's GPU 0 with 1 GiB, grown 64 MiB a step."""

    def __init__(self, fake_nvml: FakeNvmlState, pid: int) -> None:
        self._fake_nvml, self.pid, self.memory = fake_nvml, pid, 1024 * MIB
        fake_nvml.add_process(0, pid, self.memory)

    def grow(self) -> None:
        self.memory += 64 * MIB  # the test's process "allocates", tick by tick
        self._fake_nvml.add_process(0, self.pid, self.memory)


def start_leak_watch(start_daemon: DaemonFactory, policy: HealingSettings) -> NodeDaemon:
    """A daemon on the fake NVML's one GPU whose memory leak rule judges within seconds."""
    from node_daemon.backends.nvml import NvmlBackend

    return start_daemon(NvmlBackend(), gpus=1, healing=policy,
                        alerts=parse_alert_settings(LEAK_RULE, "test"))  # fmt: skip


def test_a_leaking_process_is_warned_then_killed_after_the_grace(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events, fake_nvml: FakeNvmlState, sleeper: subprocess.Popen[bytes]
) -> None:
    fake_nvml.set(gpu_count=1)
    fake_nvml.set_gpu(0, util=50)
    leaker = LeakingProcess(fake_nvml, sleeper.pid)
    policy = settings(
        '[healing]\nmode = "on"\n[healing.memory_leak]\nenabled = true\ngrace_s = 1\n'
        "allow_foreign = true\nkill_grace_s = 2\n"
    )
    daemon = start_leak_watch(start_daemon, policy)
    stream = events(daemon)

    def leak_more() -> bool:
        leaker.grow()
        return bool(stream.healing(action="kill_leak", outcome="done"))

    wait_for(leak_more, 30, "the leaker killed")
    warned = stream.healing(action="kill_leak")[0]
    assert warned.pid == sleeper.pid and warned.outcome.startswith("warned: kill at ")
    assert "unless the leak stops" in warned.reason
    assert sleeper.wait(10) == -signal.SIGTERM
    kill = daemon.audit.query(user="self-healing", method="kill_leak")
    assert {a.result for a in kill} >= {"done"}


def test_a_foreign_leaker_is_refused_once(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events, fake_nvml: FakeNvmlState, sleeper: subprocess.Popen[bytes]
) -> None:
    fake_nvml.set(gpu_count=1)
    leaker = LeakingProcess(fake_nvml, sleeper.pid)
    policy = settings('[healing]\nmode = "on"\n[healing.memory_leak]\nenabled = true\n')
    stream = events(start_leak_watch(start_daemon, policy))

    def leak_more() -> bool:
        leaker.grow()
        return bool(stream.healing(action="kill_leak"))

    wait_for(leak_more, 30, "self-healing's answer to the leak")
    for _ in range(10):
        leak_more()
    refused = stream.healing(action="kill_leak")
    assert len(refused) == 1 and refused[0].outcome.startswith("refused: ")
    assert "allow_foreign" in refused[0].outcome
    assert sleeper.poll() is None  # nothing was signalled


def children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


@pytest.mark.usefixtures("workload_accounts")
def test_a_leaking_workload_is_requeued(  # type: ignore[no-untyped-def]
    start_daemon: DaemonFactory, events, fake_nvml: FakeNvmlState
) -> None:
    """A workload gpufleet launched (a real process, as its owner) leaks on a GPU."""
    from node_daemon.backends.nvml import NvmlBackend

    fake_nvml.set(gpu_count=1)
    policy = settings(
        '[healing]\nmode = "on"\n[healing.memory_leak]\nenabled = true\naction = "requeue"\n'
        "grace_s = 1\n"
    )
    daemon = start_daemon(NvmlBackend(), gpus=1, healing=policy,
                          alerts=parse_alert_settings(LEAK_RULE, "test"))  # fmt: skip
    stream = events(daemon)
    asked = pb.SubmitWorkloadRequest(
        argv=["sleep", "300"], owner="alice", gpu_count=1, actor="alice", name="train-7",
        env={"MODEL": "llama"}, min_free_memory_bytes=MIB, priority=7, time_limit_s=3600,
        idempotency_key="alice-train-7",
    )  # fmt: skip
    submitted = stream.stub.SubmitWorkload(asked, timeout=5)
    stream.stub.AssignWorkload(
        pb.AssignWorkloadRequest(workload_id=submitted.id, gpu_indices=[0]), timeout=5
    )
    running = daemon.workloads.get(submitted.id)
    assert running.pid is not None
    wait_for(lambda: children_of(running.pid or 0), 10, "the workload's own process")
    process = children_of(running.pid)[0]  # the runner's child: the workload itself
    grown = [1024 * MIB]

    def leak_more() -> bool:
        grown.append(grown[-1] + 64 * MIB)
        fake_nvml.add_process(0, process, grown[-1])
        return bool(stream.healing(action="requeue_leak", outcome="done"))

    wait_for(leak_more, 30, "the leaking workload requeued")
    fake_nvml.remove_process(0, process)
    warned = stream.healing(action="requeue_leak")[0]
    assert warned.pid == process and warned.outcome.startswith("warned: requeue at ")
    wait_for(lambda: daemon.workloads.get(submitted.id, True).state.value == "cancelled", 20,
             "the leaking run cancelled")  # fmt: skip
    queued = [w for w in daemon.workloads.workloads(False) if w.id != submitted.id]
    assert [(w.argv, w.owner, w.state.value) for w in queued] == [
        (("sleep", "300"), "alice", "queued")
    ]
    again, first = queued[0], daemon.workloads.get(submitted.id, True)
    assert (again.priority, again.time_limit_s) == (7, 3600)  # were 0 and none (#28)
    # The whole request, field by field; only the idempotency key is not carried over
    # (it would answer with the cancelled run instead of queueing a new one).
    request = [f.name for f in fields(WorkloadRequest) if f.name != "idempotency_key"]
    assert {n: getattr(again, n) for n in request} == {n: getattr(first, n) for n in request}
    assert (first.idempotency_key, again.idempotency_key) == ("alice-train-7", "")
    assert (again.name, dict(again.env), again.min_free_memory_bytes) == (
        "train-7", {"MODEL": "llama"}, MIB,
    )  # fmt: skip


# -- reload -------------------------------------------------------------------


def test_a_reload_changes_the_mode(tmp_path: Path) -> None:
    """A real daemon process with GPU 1 lost (it needs a reboot: a drain is called for)."""
    node = ReloadableDaemon(tmp_path, '[healing]\nmode = "off"\n').start()
    try:
        first = node.stub.StreamEvents(pb.StreamEventsRequest(after_seq=0), timeout=60)
        lost = next(e for e in first if e.kind == pb.EVENT_KIND_GPU_LOST)
        first.cancel()
        assert lost.gpu_index == 1
        node.config.write_text('[healing]\nmode = "dry-run"\n', encoding="utf-8")
        reloaded_ms = int(time.time() * 1000)
        os.kill(node.pid, signal.SIGHUP)
        stream = node.stub.StreamEvents(pb.StreamEventsRequest(after_seq=0), timeout=60)
        healing = next(e for e in stream if e.kind == pb.EVENT_KIND_HEALING_ACTION)
        stream.cancel()
        assert healing.time_unix_ms >= reloaded_ms  # nothing while "off", though GPU 1 was lost
        assert (healing.healing.action, healing.healing.gpu_index) == ("drain", 1)
        assert (healing.healing.dry_run, healing.healing.outcome) == (True, "would do")
        health = node.stub.GetHealth(pb.GetHealthRequest(), timeout=5)
        assert health.healing.mode == "dry-run"
    finally:
        node.stop()
