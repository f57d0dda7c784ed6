"""Self-healing's decisions, without a daemon: the real Healer and policies, a real health
assessor, the real simulated backend (its power limit), a real journal and audit log.

Time is the tick's `now_s`, given by each test: a clean period of an hour passes in one
step, with no sleeping. tests/node_daemon/test_healing_daemon.py runs it in a daemon.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.gpu_metrics import POWER_LIMIT_W as POWER_LIMIT
from node_daemon.alerts.model import AlertRecord
from node_daemon.auth.audit import AuditLog
from node_daemon.backends.readings import GpuReading, GpuStatic, ProcessReading
from node_daemon.backends.simulated.backend import SimulatedBackend
from node_daemon.config import load_config_file
from node_daemon.control.kill_service import ProcessKiller
from node_daemon.errors import ConfigError
from node_daemon.healing.drain import DrainPolicy
from node_daemon.healing.healer import Healer, Policy
from node_daemon.healing.leak_policy import LeakPolicy
from node_daemon.healing.memory import HealingMemory
from node_daemon.healing.model import HealingPolicy, policy_of
from node_daemon.healing.power_cap import NO_BACKEND, PowerCapPolicy
from node_daemon.healing.repair import RepairPolicy
from node_daemon.healing.settings import HealingSettings, parse_healing_settings
from node_daemon.healing.slurm_drain import SlurmDrain
from node_daemon.healing.view import NodeNow
from node_daemon.healing.wire import policy_message
from node_daemon.health.assessor import HealthAssessor
from node_daemon.health.model import HealthState
from node_daemon.health.settings import HealthSettings
from node_daemon.journal.event_journal import EventJournal
from node_daemon.sampling.sample_ring import SampleRing
from node_daemon.sampling.sampler import Sampler
from tests.conftest import wait_for

T0 = 1_800_000_000.0  # the first tick's Unix time


class Node:
    """A healer over two GPUs, with what it acts on: the assessor, a backend, the journal."""

    def __init__(
        self,
        tmp: Path,
        settings: HealingSettings,
        backend: object = None,
        slurm_reason: Callable[[], str | None] | None = None,
    ) -> None:
        self.tmp = tmp
        self.slurm = SlurmDrain("node-1", slurm_reason) if slurm_reason is not None else None
        self.journal = EventJournal(tmp / "journal.sqlite3")
        self.audit = AuditLog(tmp / "audit.sqlite3", anchor=self.journal)
        self.assessor = HealthAssessor(HealthSettings(), boot_id="boot-1")
        self.backend = backend if backend is not None else SimulatedBackend(2, seed=1)
        facts = SimulatedBackend(2, seed=1).open()
        self.gpus: dict[int, GpuStatic] = {g.index: g for g in facts.gpus}
        self.assessor.set_gpu_facts(facts.gpus)
        self.processes: dict[int, list[ProcessReading]] = {0: [], 1: []}
        # A killer over a sampler that never runs: a dry run's leak never reaches it.
        sampler = Sampler(SimulatedBackend(2, seed=1), SampleRing(10))
        self.killer = ProcessKiller(sampler, self.journal, lambda _g, _p, _s: None)
        self.healer = self._healer(settings)

    def _healer(self, settings: HealingSettings) -> Healer:
        memory = HealingMemory(self.journal)
        fresh = lambda: self.processes  # noqa: E731 - the list the test keeps is the fresh one
        policies: list[Policy] = [
            DrainPolicy(self.assessor, memory, self.slurm),
            PowerCapPolicy(self.backend, self.assessor),
            LeakPolicy(memory, self.killer, None),
            RepairPolicy("reset", memory, fresh, "node-1", control=self.assessor, boot_id="boot-1"),
            RepairPolicy(
                "reboot", memory, fresh, "node-1", control=self.assessor, boot_id="boot-1"
            ),
        ]
        return Healer(settings, policies, memory, self.journal, self.audit, lambda: T0)

    def restart(self, settings: HealingSettings) -> None:
        """A new healer on the same journal, as after a daemon restart."""
        self.healer.stop()
        self.healer = self._healer(settings)

    def tick(
        self,
        at_s: float,
        readings: Sequence[GpuReading] | None = None,
        alerts: Sequence[AlertRecord] = (),
    ) -> None:
        readings = list(readings or [GpuReading(0, temp_gpu_c=50), GpuReading(1, temp_gpu_c=50)])
        conditions = self.assessor.judge(readings, self.processes, int((T0 + at_s) * 1000))
        now = NodeNow(T0 + at_s, readings, self.processes, conditions, alerts, self.gpus)
        self.healer.tick(now)

    def healing_events(self) -> list[pb.HealingAction]:
        events = self.journal.events_after(0)
        return [e.healing for e in events if e.kind == pb.EVENT_KIND_HEALING_ACTION]

    def close(self) -> None:
        self.healer.stop()
        self.audit.close()
        self.journal.close()


def healing(tmp: Path, text: str) -> HealingSettings:
    """[healing] from daemon.toml text, through the real config loader."""
    path = tmp / "daemon.toml"
    path.write_text(text, encoding="utf-8")
    return load_config_file(path).healing


NEEDS_RESET = GpuReading(1, temp_gpu_c=50, recovery_action=1)  # the driver asks for a reset
CLEAN = GpuReading(1, temp_gpu_c=50, recovery_action=0)


MakeNode = Callable[..., Node]


@pytest.fixture
def node_factory(tmp_path: Path) -> Iterator[MakeNode]:
    """make(settings, backend=None): a Node in this test's directory, closed after it."""
    nodes: list[Node] = []

    def make(settings: HealingSettings, backend: object = None, **kwargs: object) -> Node:
        nodes.append(Node(tmp_path, settings, backend, **kwargs))  # type: ignore[arg-type]
        return nodes[-1]

    yield make
    for node in nodes:
        node.close()


# -- settings -----------------------------------------------------------------


def test_defaults_are_off_with_the_gentle_actions_enabled(tmp_path: Path) -> None:
    settings = healing(tmp_path, "")
    assert settings.mode == "off" and settings.max_actions_per_hour == 6
    assert settings.drain.on_states == (
        HealthState.NEEDS_RESET, HealthState.NEEDS_REBOOT, HealthState.NEEDS_INSPECTION,
    )  # fmt: skip
    assert settings.drain.return_after_clean_s == 3600 and not settings.drain.slurm
    assert settings.power_cap.cap_ratio == 0.8
    assert not settings.memory_leak.enabled and settings.memory_leak.grace_s == 600
    assert settings.reset.command == ("nvidia-smi", "-r", "-i", "{index}")
    assert not settings.reboot.enabled and settings.reboot.command == ("systemctl", "reboot")
    assert policy_of(settings) == HealingPolicy("off", ("drain", "undrain", "power_cap",
                                                        "power_restore"), 6)  # fmt: skip


def test_a_full_table_is_read(tmp_path: Path) -> None:
    settings = healing(
        tmp_path,
        """
[healing]
mode = "dry-run"
max_actions_per_hour = 2
[healing.drain]
on_states = ["needs_inspection"]
return_after_clean_s = 60
slurm = true
[healing.power_cap]
warnings = 2
cap_ratio = 0.7
[healing.memory_leak]
enabled = true
action = "requeue"
grace_s = 30
[healing.reset]
enabled = true
command = ["/usr/local/bin/reset-gpu", "{uuid}", "{pci_bus_id}"]
""",
    )
    assert settings.mode == "dry-run" and settings.max_actions_per_hour == 2
    assert settings.drain.on_states == (HealthState.NEEDS_INSPECTION,) and settings.drain.slurm
    assert settings.power_cap.warnings == 2 and settings.power_cap.cap_ratio == 0.7
    assert settings.memory_leak.action == "requeue" and settings.memory_leak.grace_s == 30
    assert settings.reset.command[1:] == ("{uuid}", "{pci_bus_id}")
    message = policy_message(policy_of(settings))
    assert message.mode == "dry-run" and message.max_actions_per_hour == 2
    assert list(message.actions) == ["drain", "undrain", "power_cap", "power_restore",
                                     "requeue_leak", "gpu_reset"]  # fmt: skip


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ({"mode": "yes"}, "healing.mode: must be one of 'off', 'dry-run', 'on', got 'yes'"),
        ({"max_actions_per_hour": -1}, "healing.max_actions_per_hour: must be a whole number"),
        ({"max_actions_per_hour": 1.5}, "healing.max_actions_per_hour: must be a whole number"),
        ({"modes": "on"}, "healing: unknown key 'modes'"),
        ({"drain": {"on_states": ["broken"]}}, "healing.drain.on_states: must be a list of"),
        ({"drain": {"slurm": "yes"}}, "healing.drain.slurm: must be true or false"),
        ({"drain": 1}, "healing.drain: must be a table"),
        ({"power_cap": {"cap_ratio": 2}}, "healing.power_cap.cap_ratio: must be a number from"),
        ({"memory_leak": {"action": "nuke"}}, "healing.memory_leak.action: must be one of"),
        ({"memory_leak": {"enable": True}}, "healing.memory_leak: unknown key 'enable'"),
        ({"reset": {"command": "nvidia-smi -r"}}, "healing.reset.command: must be a non-empty"),
        ({"reset": {"command": ["x", "{gpu}"]}}, "healing.reset.command: unknown placeholder"),
        ({"reboot": {"command": [""]}}, "healing.reboot.command: the program"),
    ],
)
def test_bad_values_name_their_key(table: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_healing_settings(table, "daemon.toml")
    assert named in str(raised.value)
    assert str(raised.value).startswith("daemon.toml: ")


# -- drain --------------------------------------------------------------------


def test_dry_run_says_what_it_would_do_once_and_changes_nothing(node_factory: MakeNode) -> None:
    node = node_factory(replace(HealingSettings(), mode="dry-run"))
    for at_s in (1, 2, 3):
        node.tick(at_s, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    events = node.healing_events()
    assert [(e.action, e.gpu_index, e.dry_run, e.outcome) for e in events] == [
        ("drain", 1, True, "would do")
    ]
    assert "needs reset" in events[0].reason
    condition = node.assessor.condition(1)
    assert condition is not None and condition.drain is None  # nothing was drained
    audit = node.audit.query(user="self-healing")
    assert [(a.method, a.target, a.result) for a in audit] == [
        ("healing.drain", "gpu 1", "would do")
    ]


def test_off_decides_nothing(node_factory: MakeNode) -> None:
    node = node_factory(HealingSettings())
    node.tick(1, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    assert node.healing_events() == []


def test_on_drains_and_returns_after_the_clean_period(
    node_factory: MakeNode, tmp_path: Path
) -> None:
    node = node_factory(healing(tmp_path, '[healing]\nmode = "on"\n'))
    node.tick(1, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    condition = node.assessor.condition(1)
    assert condition is not None and condition.drain is not None
    assert condition.drain.by == "self-healing" and "needs reset" in condition.drain.reason
    node.tick(2, [GpuReading(0, temp_gpu_c=50), CLEAN])  # clean from here
    node.tick(2 + 3599, [GpuReading(0, temp_gpu_c=50), CLEAN])
    assert node.assessor.condition(1).drain is not None  # type: ignore[union-attr]
    node.tick(2 + 3600, [GpuReading(0, temp_gpu_c=50), CLEAN])
    assert node.assessor.condition(1).drain is None  # type: ignore[union-attr]
    assert [(e.action, e.outcome, e.dry_run) for e in node.healing_events()] == [
        ("drain", "done", False), ("undrain", "done", False),
    ]  # fmt: skip


def test_a_persons_drain_is_never_returned(node_factory: MakeNode) -> None:
    node = node_factory(replace(HealingSettings(), mode="on"))
    node.tick(1)
    node.assessor.drain(1, "alice", "fan noise", int(T0 * 1000))
    node.tick(2)
    node.tick(2 + 7200)
    drain = node.assessor.condition(1).drain  # type: ignore[union-attr]
    assert drain is not None and drain.by == "alice"
    assert node.healing_events() == []


def test_beyond_the_hourly_limit_an_action_is_rate_limited_once(node_factory: MakeNode) -> None:
    settings = replace(HealingSettings(), mode="on", max_actions_per_hour=1)
    node = node_factory(settings)
    both = [GpuReading(0, temp_gpu_c=50, recovery_action=1), NEEDS_RESET]
    for at_s in (1, 2, 3, 4):
        node.tick(at_s, both)
    assert [(e.action, e.gpu_index, e.outcome) for e in node.healing_events()] == [
        ("drain", 0, "done"), ("drain", 1, "rate limited"),
    ]  # fmt: skip
    assert "max_actions_per_hour" in node.healing_events()[1].reason
    node.tick(3700, both)  # an hour on: the budget lets it through
    assert node.healing_events()[-1].outcome == "done"
    assert node.assessor.condition(1).drain is not None  # type: ignore[union-attr]


def stub_scontrol(directory: Path) -> Path:
    """Slurm is not installed here: a stub scontrol on PATH that logs its arguments."""
    script = directory / "scontrol"
    script.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s|" "$a"; done >> {directory}/args\n'
                      f"echo >> {directory}/args\n")  # fmt: skip
    script.chmod(0o755)
    return directory / "args"


def test_slurm_drain_and_resume_only_while_the_reason_is_ours(
    node_factory: MakeNode, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    args = stub_scontrol(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    slurm_reason: list[str | None] = [None]
    settings = healing(tmp_path, '[healing]\nmode = "on"\n[healing.drain]\nslurm = true\n'
                                 "return_after_clean_s = 10\n")  # fmt: skip
    node = node_factory(settings, slurm_reason=lambda: slurm_reason[0])
    node.tick(1, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    wait_for_events(node, 1)
    drain = args.read_text().splitlines()
    assert drain[0].startswith("update|NodeName=node-1|State=DRAIN|Reason=gpufleet: GPU 1: ")
    assert node.healing_events()[0].outcome == "done"
    slurm_reason[0] = "gpufleet: GPU 1: GPU 1 needs reset"
    node.tick(2, [GpuReading(0, temp_gpu_c=50), CLEAN])
    node.tick(12, [GpuReading(0, temp_gpu_c=50), CLEAN])
    wait_for_events(node, 2)
    assert args.read_text().splitlines()[1] == "update|NodeName=node-1|State=RESUME|"
    # Drained again; an operator re-words Slurm's reason meanwhile: theirs to resume now.
    node.tick(30 + 600, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    wait_for_events(node, 3)
    slurm_reason[0] = "card swap Tuesday"
    node.tick(31 + 600, [GpuReading(0, temp_gpu_c=50), CLEAN])
    node.tick(41 + 600, [GpuReading(0, temp_gpu_c=50), CLEAN])
    wait_for_events(node, 4)
    assert len(args.read_text().splitlines()) == 3  # no second RESUME
    undrain = node.healing_events()[3]
    assert undrain.action == "undrain" and "no longer gpufleet's" in undrain.outcome
    assert node.assessor.condition(1).drain is None  # type: ignore[union-attr]


# -- power cap ----------------------------------------------------------------


def hot(temp: float) -> list[GpuReading]:
    return [GpuReading(0, temp_gpu_c=temp), GpuReading(1, temp_gpu_c=50)]


def test_power_cap_after_overheating_and_restore_once_cool(node_factory: MakeNode) -> None:
    settings = replace(HealingSettings(), mode="on")
    cap = replace(settings.power_cap, above_c=85, above_for_s=300, restore_after_cool_s=600)
    settings = replace(settings, power_cap=cap)
    node = node_factory(settings)
    backend = node.backend
    assert isinstance(backend, SimulatedBackend)
    default = node.gpus[0].power_limit_default_w
    assert default is not None
    node.tick(0, hot(90))
    node.tick(299, hot(90))
    assert node.healing_events() == []
    node.tick(300, hot(90))
    expected = max(default * 0.8, node.gpus[0].power_limit_min_w or 0)
    assert backend.advance(1)[0][POWER_LIMIT] == pytest.approx(expected, abs=0.1)
    assert node.assessor.condition(0).power_capped_w == pytest.approx(expected, abs=0.1)  # type: ignore[union-attr]
    node.tick(301, hot(90))  # still hot, already capped: nothing more
    node.tick(400, hot(60))
    node.tick(999, hot(60))
    assert len(node.healing_events()) == 1
    node.tick(1000, hot(60))
    assert backend.advance(1)[0][POWER_LIMIT] == default
    assert node.assessor.condition(0).power_capped_w is None  # type: ignore[union-attr]
    assert [(e.action, e.outcome) for e in node.healing_events()] == [
        ("power_cap", "done"), ("power_restore", "done"),
    ]  # fmt: skip


def temp_alert(number: int, at_s: float) -> AlertRecord:
    return AlertRecord(f"a-{number}", "gpu_temp/gpu0", "gpu_temp", Severity.WARNING, True, 0,
                       "", None, 80.0, "C", "hot", int((T0 + at_s) * 1000),
                       int((T0 + at_s) * 1000))  # fmt: skip


def test_power_cap_after_repeated_temperature_warnings(node_factory: MakeNode) -> None:
    node = node_factory(replace(HealingSettings(), mode="dry-run"))
    node.tick(10, hot(78), [temp_alert(1, 10)])
    node.tick(20, hot(70))
    node.tick(30, hot(78), [temp_alert(2, 30)])
    assert node.healing_events() == []
    node.tick(40, hot(78), [temp_alert(3, 40)])
    events = node.healing_events()
    assert [(e.action, e.outcome, e.dry_run) for e in events] == [("power_cap", "would do", True)]
    assert "raised 3 times" in events[0].reason
    assert node.backend.advance(1)[0][POWER_LIMIT] == node.gpus[0].power_limit_w  # type: ignore[attr-defined]


def test_a_backend_that_cannot_set_limits_is_refused(node_factory: MakeNode) -> None:
    node = node_factory(replace(HealingSettings(), mode="on"), backend=object())
    for at_s in (0, 300, 301):
        node.tick(at_s, hot(90))
    assert [(e.action, e.outcome) for e in node.healing_events()] == [("power_cap", NO_BACKEND)]


# -- memory leak ----------------------------------------------------------------


def leak_alert(pid: int) -> AlertRecord:
    return AlertRecord("a-9", f"memory_leak/gpu0/pid{pid}", "memory_leak", Severity.WARNING,
                       True, 0, "", pid, 900.0, "MiB", f"GPU 0: process {pid} grows",
                       int(T0 * 1000), int(T0 * 1000))  # fmt: skip


def leak_settings(mode: str, **table: object) -> HealingSettings:
    settings = replace(HealingSettings(), mode=mode)
    leak = replace(settings.memory_leak, enabled=True, grace_s=600, **table)
    return replace(settings, memory_leak=leak)


def test_dry_run_of_a_leak_warns_and_would_kill_once(node_factory: MakeNode) -> None:
    node = node_factory(leak_settings("dry-run", allow_foreign=True))
    node.processes[0] = [ProcessReading(pid=4242, start_time_unix_ms=7, user="bob")]
    for at_s in (1, 2, 600, 601, 1300, 1400):
        node.tick(at_s, alerts=[leak_alert(4242)])
    events = [(e.action, e.pid, e.outcome, e.dry_run) for e in node.healing_events()]
    assert events == [("kill_leak", 4242, "would do", True)] * 2
    assert "kill at " in node.healing_events()[0].reason
    assert "still leaking after 600 s" in node.healing_events()[1].reason
    node.tick(1500)  # the leak stopped
    last = node.healing_events()[-1]
    assert (last.outcome, last.reason) == (
        "would do",
        "GPU 0: process 4242's leak stopped, or it ended",
    )


def test_a_leak_that_stops_within_the_grace_stands_the_warning_down(
    node_factory: MakeNode,
) -> None:
    node = node_factory(leak_settings("on", allow_foreign=True))
    node.processes[0] = [ProcessReading(pid=4242, start_time_unix_ms=7)]
    node.tick(1, alerts=[leak_alert(4242)])
    assert node.healing_events()[0].outcome.startswith("warned: kill at ")
    node.tick(300)  # no leak alert any more
    node.tick(700)
    assert [e.outcome for e in node.healing_events()][1:] == ["stood down: the leak stopped"]


def test_a_leaker_gpufleet_did_not_launch_is_refused_once(node_factory: MakeNode) -> None:
    node = node_factory(leak_settings("on", action="requeue"))
    node.processes[0] = [ProcessReading(pid=4242, start_time_unix_ms=7)]
    for at_s in (1, 2, 3):
        node.tick(at_s, alerts=[leak_alert(4242)])
    assert [(e.action, e.outcome) for e in node.healing_events()] == [
        ("requeue_leak", "refused: pid 4242 is no process of a workload gpufleet launched")
    ]


# -- reset --------------------------------------------------------------------


def reset_settings(marker: Path) -> HealingSettings:
    settings = replace(HealingSettings(), mode="on")
    command = ("touch", f"{marker}-{{index}}")
    return replace(settings, reset=replace(settings.reset, enabled=True, command=command))


def test_reset_only_when_the_gpu_is_idle_and_once_per_fault(
    node_factory: MakeNode, tmp_path: Path
) -> None:
    marker = tmp_path / "reset"
    node = node_factory(reset_settings(marker))
    node.processes[1] = [ProcessReading(pid=4242, start_time_unix_ms=1)]
    node.tick(1, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    assert [e.action for e in node.healing_events()] == ["drain"]
    node.processes[1] = []
    node.tick(2, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    wait_for_events(node, 2)
    assert Path(f"{marker}-1").exists()
    assert [(e.action, e.gpu_index, e.outcome) for e in node.healing_events()][-1] == (
        "gpu_reset",
        1,
        "done",
    )
    node.restart(reset_settings(marker))  # the fault it was run for is kept
    Path(f"{marker}-1").unlink()
    node.tick(3, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    node.healer.stop()
    assert not Path(f"{marker}-1").exists()
    assert len(node.healing_events()) == 2


def reset_once(node_factory: MakeNode, tmp_path: Path) -> tuple[Node, Path]:
    """A node whose GPU 1 asked for a reset at its first tick: drained, then reset."""
    marker = tmp_path / "reset"
    node = node_factory(reset_settings(marker))
    node.tick(1, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    wait_for_events(node, 2)  # the drain, the reset
    return node, marker


def test_a_reset_that_did_not_cure_escalates_and_a_clear_lets_a_new_fault_be_reset(
    node_factory: MakeNode, tmp_path: Path
) -> None:
    node, marker = reset_once(node_factory, tmp_path)
    node.tick(30, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])  # within verify_after_s
    assert [e.action for e in node.healing_events()] == ["drain", "gpu_reset"]
    node.tick(62, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])  # still: not cured
    escalation = node.healing_events()[-1]
    assert (escalation.action, escalation.gpu_index, escalation.outcome) == ("gpu_reset", 1, "done")
    assert "still needs reset" in escalation.reason and "not repeated" in escalation.reason
    condition = node.assessor.condition(1)
    assert condition is not None and condition.state is HealthState.NEEDS_INSPECTION
    assert "repair_failed" in {r.code for r in condition.reasons} and condition.drain is not None
    for at_s in (100, 200, 5000):
        node.tick(at_s, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    assert len(node.healing_events()) == 3  # nothing more, however long it waits
    node.assessor.clear(1, "erin", "reseated the GPU", int((T0 + 5001) * 1000))
    Path(f"{marker}-1").unlink()
    node.tick(5002, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])  # forgotten: a new fault
    node.tick(5003, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    wait_for_events(node, 4)
    assert node.healing_events()[-1].action == "gpu_reset" and Path(f"{marker}-1").exists()


def test_a_reset_that_cured_is_forgotten_after_the_cooldown(
    node_factory: MakeNode, tmp_path: Path
) -> None:
    node, marker = reset_once(node_factory, tmp_path)
    node.tick(100, [GpuReading(0, temp_gpu_c=50), CLEAN])  # cured: clean from here
    assert node.healer._memory.repair("gpu_reset", 1).clean_since_s == T0 + 100  # type: ignore[union-attr]
    node.tick(100 + 3600, [GpuReading(0, temp_gpu_c=50), CLEAN])  # the reset's cooldown_s
    assert node.healer._memory.repair("gpu_reset", 1) is None
    Path(f"{marker}-1").unlink()
    node.tick(4000, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])  # a new fault: reset again
    wait_for(lambda: Path(f"{marker}-1").exists(), 10, "the second reset")


def test_a_failing_command_says_why(node_factory: MakeNode) -> None:
    settings = replace(HealingSettings(), mode="on", drain=replace(HealingSettings().drain,
                                                                      enabled=False))  # fmt: skip
    settings = replace(settings, reset=replace(settings.reset, enabled=True,
                                               command=("false",)))  # fmt: skip
    node = node_factory(settings)
    node.tick(1, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    wait_for_events(node, 1)
    assert node.healing_events()[0].outcome == "failed: false exited 1: no output"


def test_reboot_only_when_every_gpu_is_idle_and_not_again_after_a_restart(
    node_factory: MakeNode, tmp_path: Path
) -> None:
    marker = tmp_path / "rebooted"
    settings = replace(HealingSettings(), mode="on")
    reboot = replace(settings.reboot, enabled=True, command=("touch", str(marker)))
    settings = replace(settings, reboot=reboot)
    node = node_factory(settings)
    wants_reboot = [GpuReading(0, temp_gpu_c=50), GpuReading(1, temp_gpu_c=50, recovery_action=2)]
    node.processes[0] = [ProcessReading(pid=4242, start_time_unix_ms=7)]  # GPU 0 is busy
    node.tick(1, wants_reboot)
    assert [e.action for e in node.healing_events()] == ["drain"] and not marker.exists()
    node.processes[0] = []
    node.tick(2, wants_reboot)
    wait_for_events(node, 2)
    assert node.healing_events()[-1].action == "node_reboot" and marker.exists()
    assert "every GPU idle" in node.healing_events()[-1].reason
    marker.unlink()
    node.restart(settings)  # as after the reboot, had it not cured the GPU
    node.tick(3, wants_reboot)
    node.healer.stop()
    assert not marker.exists() and len(node.healing_events()) == 2


# -- restarts -----------------------------------------------------------------


def test_the_rate_limit_outlives_a_restart(node_factory: MakeNode) -> None:
    settings = replace(HealingSettings(), mode="on", max_actions_per_hour=1)
    node = node_factory(settings)
    node.tick(1, [GpuReading(0, temp_gpu_c=50, recovery_action=1), CLEAN])
    node.restart(settings)
    node.tick(2, [GpuReading(0, temp_gpu_c=50, recovery_action=1), NEEDS_RESET])
    assert [(e.gpu_index, e.outcome) for e in node.healing_events()] == [
        (0, "done"), (1, "rate limited"),
    ]  # fmt: skip


def test_reloaded_mode_acts_from_the_next_tick(node_factory: MakeNode) -> None:
    node = node_factory(replace(HealingSettings(), mode="dry-run"))
    node.tick(1, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    node.healer.reconfigure(replace(HealingSettings(), mode="on"))
    assert node.healer.policy().mode == "on"
    node.tick(2, [GpuReading(0, temp_gpu_c=50), NEEDS_RESET])
    assert [(e.outcome, e.dry_run) for e in node.healing_events()] == [
        ("would do", True), ("done", False),
    ]  # fmt: skip
    assert node.assessor.condition(1).drain is not None  # type: ignore[union-attr]


# -- helpers ------------------------------------------------------------------


def wait_for_events(node: Node, count: int) -> None:
    """A command runs on the healer's worker thread: wait for its report."""
    wait_for(lambda: len(node.healing_events()) >= count, 10, f"{count} healing events")
