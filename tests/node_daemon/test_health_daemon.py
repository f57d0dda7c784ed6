"""GPU health in a real daemon over gRPC: GetHealth, DrainGpu, ClearGpuHealth, placement,
the journal's events, alerts, /metrics, a restart, a reload."""

from __future__ import annotations

import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from node_daemon.auth.settings import AuthSettings
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent
from node_daemon.health.settings import HealthSettings
from node_daemon.reload import plan_reload
from node_daemon.server import NodeDaemon
from tests.conftest import DaemonFactory, wait_for
from tests.fake_nvml.fixture import FakeNvmlState
from tests.node_daemon.test_nvml_daemon import NvmlDaemon
from tests.node_daemon.token_users import TokenUsers

# Placement is checked by assigning a workload, which runs as its owner's account.
pytestmark = pytest.mark.usefixtures("workload_accounts")

USERS = TokenUsers({"vera": Role.VIEWER, "otto": Role.OPERATOR, "ada": Role.ADMIN})
# GPU 0 throws a double-bit ECC Xid (it needs a reset); GPU 1 stays healthy.
XID_48 = Scenario((ScenarioEvent(0.3, 0, "xid", 48.0),))


class Node:
    def __init__(self, daemon: NodeDaemon) -> None:
        self.daemon = daemon
        self.channel = grpc.insecure_channel(str(daemon.address))
        self.stub = pb_grpc.NodeServiceStub(self.channel)

    def health(self, user: str = "vera") -> pb.NodeHealth:
        return self.stub.GetHealth(pb.GetHealthRequest(), timeout=5, metadata=USERS.bearer(user))

    def gpu(self, index: int) -> pb.GpuCondition:
        return next(g for g in self.health().gpus if g.gpu_index == index)

    def events(self, kind: int) -> list[pb.Event]:
        return [e for e in self.daemon.journal.events_after(0) if e.kind == kind]

    def scrape(self) -> str:
        assert self.daemon.metrics is not None
        url = f"http://127.0.0.1:{self.daemon.metrics.server.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())


def start(factory: DaemonFactory, state_dir: Path, scenario: Scenario = XID_48) -> Node:
    backend = SimulatedBackend(gpu_count=2, scenario=scenario, step_s=0.1)
    daemon = factory(backend=backend, state_dir=state_dir, auth=AuthSettings(USERS.users),
                     metrics_listen="127.0.0.1:0")  # fmt: skip
    node = Node(daemon)
    wait_for(lambda: len(node.health().gpus) == 2, what="both GPUs judged")
    return node


@pytest.fixture
def node(start_daemon: DaemonFactory, tmp_path: Path) -> Iterator[Node]:
    node = start(start_daemon, tmp_path / "state")
    yield node
    node.channel.close()


def needs_reset(node: Node) -> bool:
    return node.gpu(0).state == pb.GPU_HEALTH_STATE_NEEDS_RESET


def test_get_health_lists_each_gpu_and_the_healing_policy(node: Node) -> None:
    wait_for(lambda: needs_reset(node), what="GPU 0 to need a reset")
    health = node.health()
    assert health.healing.mode == "off"
    zero, one = sorted(health.gpus, key=lambda g: g.gpu_index)
    assert [r.code for r in zero.reasons] == ["xid_48"]
    assert zero.reasons[0].summary.startswith("Xid 48: ")
    assert one.state == pb.GPU_HEALTH_STATE_HEALTHY and not one.reasons
    # Each sample carries its tick's condition and the Xid counts.
    stream = node.stub.StreamSamples(
        pb.StreamSamplesRequest(), timeout=10, metadata=USERS.bearer("vera")
    )
    sample = next(stream).gpus[0]
    stream.cancel()
    assert sample.condition.state == pb.GPU_HEALTH_STATE_NEEDS_RESET
    assert dict(sample.xid_counts) == {48: 1}


def test_the_change_is_an_event_and_the_xid_pages_once(node: Node) -> None:
    wait_for(lambda: node.events(pb.EVENT_KIND_GPU_HEALTH_CHANGED), what="a health event")
    [event] = node.events(pb.EVENT_KIND_GPU_HEALTH_CHANGED)
    assert event.gpu_index == 0 and event.actor == ""
    assert event.summary.startswith("GPU 0 needs reset (was healthy): Xid 48: ")
    assert event.condition.state == pb.GPU_HEALTH_STATE_NEEDS_RESET
    alerts = node.stub.ListAlerts(pb.ListAlertsRequest(), timeout=5, metadata=USERS.bearer("vera"))
    rules = [a.rule for a in alerts.alerts if a.gpu_index == 0]
    assert rules.count("xid") == 1 and not [r for r in rules if r.startswith("xid_")]


def test_a_drained_gpu_gets_no_work_and_says_why(node: Node) -> None:
    drained = node.stub.DrainGpu(
        pb.DrainGpuRequest(gpu_index=1, drain=True, reason="fan noise"), timeout=5,
        metadata=USERS.bearer("otto"),
    )  # fmt: skip
    assert (drained.drained, drained.drained_by, drained.drain_reason) == (
        True,
        "otto",
        "fan noise",
    )
    queued = node.stub.SubmitWorkload(
        pb.SubmitWorkloadRequest(argv=["true"], owner="otto", gpu_count=1), timeout=5,
        metadata=USERS.bearer("otto"),
    )  # fmt: skip
    for gpu, why in ((1, "GPU 1 is drained by otto: fan noise"), (0, "GPU 0 needs reset: Xid 48")):
        if gpu == 0:
            wait_for(lambda: needs_reset(node), what="GPU 0 to need a reset")
        with pytest.raises(grpc.RpcError) as info:
            node.stub.AssignWorkload(
                pb.AssignWorkloadRequest(workload_id=queued.id, gpu_indices=[gpu]), timeout=5,
                metadata=USERS.bearer("otto"),
            )  # fmt: skip
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert str(info.value.details()).startswith(why)
    [event] = node.events(pb.EVENT_KIND_GPU_DRAINED)
    assert (event.actor, event.gpu_index, event.condition.drained) == ("otto", 1, True)
    node.stub.DrainGpu(pb.DrainGpuRequest(gpu_index=1, drain=False), timeout=5,
                       metadata=USERS.bearer("otto"))  # fmt: skip
    assert not node.gpu(1).drained
    assert [e.actor for e in node.events(pb.EVENT_KIND_GPU_UNDRAINED)] == ["otto"]
    records = node.stub.QueryAudit(pb.QueryAuditRequest(), timeout=5, metadata=USERS.bearer("ada"))
    drains = [r for r in records.records if r.method.endswith("/DrainGpu")]
    assert sorted((r.user, r.target, r.result) for r in drains) == [
        ("otto", "gpu_index=1", "OK"), ("otto", "gpu_index=1", "OK"),
        ("otto", "gpu_index=1", "attempt"), ("otto", "gpu_index=1", "attempt"),
    ]  # fmt: skip


def test_drain_errors_name_what_is_wrong(node: Node) -> None:
    cases = [
        (pb.DrainGpuRequest(gpu_index=7, drain=True, reason="x"), grpc.StatusCode.INVALID_ARGUMENT,
         "no GPU 7 on this node"),
        (pb.DrainGpuRequest(gpu_index=1, drain=True), grpc.StatusCode.INVALID_ARGUMENT,
         "a drain needs a reason (what is wrong with the GPU)"),
        (pb.DrainGpuRequest(gpu_index=1, drain=False), grpc.StatusCode.FAILED_PRECONDITION,
         "GPU 1 is not drained"),
    ]  # fmt: skip
    for request, code, message in cases:
        with pytest.raises(grpc.RpcError) as info:
            node.stub.DrainGpu(request, timeout=5, metadata=USERS.bearer("otto"))
        assert (info.value.code(), info.value.details()) == (code, message)
    with pytest.raises(grpc.RpcError) as info:
        node.stub.DrainGpu(pb.DrainGpuRequest(gpu_index=1, drain=True, reason="x"), timeout=5,
                           metadata=USERS.bearer("vera"))  # fmt: skip
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_clear_is_for_admins_and_the_sticky_state_survives_a_restart(
    start_daemon: DaemonFactory, tmp_path: Path
) -> None:
    node = start(start_daemon, tmp_path / "state")
    wait_for(lambda: needs_reset(node), what="GPU 0 to need a reset")
    node.channel.close()
    node.daemon.stop(grace_s=0.5)

    again = start(start_daemon, tmp_path / "state", Scenario(()))  # no Xid this time
    assert [r.code for r in again.gpu(0).reasons] == ["xid_48"]
    request = pb.ClearGpuHealthRequest(gpu_index=0, reason="GPU reset by hand")
    with pytest.raises(grpc.RpcError) as info:
        again.stub.ClearGpuHealth(request, timeout=5, metadata=USERS.bearer("otto"))
    assert info.value.code() == grpc.StatusCode.PERMISSION_DENIED
    cleared = again.stub.ClearGpuHealth(request, timeout=5, metadata=USERS.bearer("ada"))
    assert cleared.state == pb.GPU_HEALTH_STATE_HEALTHY and not cleared.reasons
    changed = again.events(pb.EVENT_KIND_GPU_HEALTH_CHANGED)[-1]
    assert (changed.actor, changed.summary) == ("ada", "GPU 0 is healthy (was needs reset), by ada")
    again.channel.close()


def test_metrics_show_state_drain_reasons_and_xids(node: Node) -> None:
    wait_for(lambda: needs_reset(node), what="GPU 0 to need a reset")
    node.stub.DrainGpu(pb.DrainGpuRequest(gpu_index=1, drain=True, reason="test"), timeout=5,
                       metadata=USERS.bearer("otto"))  # fmt: skip

    def series() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(node.scrape())
            for sample in family.samples
            if sample.name.startswith("gpufleet_gpu_")
        }

    def value(name: str, gpu: int, **labels: str) -> float | None:
        facts = node.daemon.sampler.status.facts
        assert facts is not None
        key = (name, tuple(sorted({"gpu": str(gpu), "UUID": facts.gpus[gpu].uuid,
                                   **labels}.items())))  # fmt: skip
        return series().get(key)

    wait_for(lambda: value("gpufleet_gpu_drained", 1) == 1.0, what="the drain on /metrics")
    assert value("gpufleet_gpu_health_state", 0, state="needs_reset") == 1.0
    assert value("gpufleet_gpu_health_state", 0, state="healthy") == 0.0
    assert value("gpufleet_gpu_health_state", 1, state="healthy") == 1.0
    states = {k[1] for k in series() if k[0] == "gpufleet_gpu_health_state"}
    assert len(states) == 2 * 6  # every state of each GPU, 1 for the current one
    assert value("gpufleet_gpu_health_reasons", 0, code="xid_48") == 1.0
    assert value("gpufleet_gpu_xid_errors_total", 0, xid="48") == 1.0
    assert value("gpufleet_gpu_drained", 0) == 0.0


def test_health_settings_reload_live(node: Node) -> None:
    new = replace(node.daemon.config, health=HealthSettings(ecc_storm_errors=5, hold_s=60))
    plan = plan_reload(node.daemon.config, new)
    assert "health settings changed: ecc_storm_errors, hold_s" in plan.changes
    assert not plan.needs_restart
    node.daemon.reconfigure(plan.config)
    assert node.daemon.health.settings.ecc_storm_errors == 5


def test_nvml_signals_through_the_real_ctypes_path(
    fake_nvml: FakeNvmlState, tmp_path: Path
) -> None:
    """`gpufleet daemon --backend nvml` against the fake libnvidia-ml: a failed remap, a
    pending one, a link down, the driver asking for a reboot, and Xid 79 pushed as an
    NVML event, each judged into its GPU's state."""
    fake_nvml.set(gpu_count=5)
    fake_nvml.set_gpu(0, remapped_rows_failure=1)
    fake_nvml.set_gpu(1, remapped_rows_pending=1)
    fake_nvml.set_nvlinks(2, 4, down=(2,))
    fake_nvml.set_gpu(3, recovery_action=2)
    daemon = NvmlDaemon(fake_nvml, tmp_path)
    try:
        stub = daemon.stub

        def states() -> dict[int, tuple[int, list[str]]]:
            health = stub.GetHealth(pb.GetHealthRequest(), timeout=5)
            return {g.gpu_index: (g.state, [r.code for r in g.reasons]) for g in health.gpus}

        wait_for(lambda: len(states()) == 5, 20, "every GPU judged")
        fake_nvml.push_xid(4, 79)
        wait_for(lambda: states()[4][0] == pb.GPU_HEALTH_STATE_NEEDS_REBOOT, 20, "Xid 79")
        assert states() == {
            0: (pb.GPU_HEALTH_STATE_NEEDS_INSPECTION, ["row_remap_failure"]),
            1: (pb.GPU_HEALTH_STATE_NEEDS_RESET, ["row_remap_pending"]),
            2: (pb.GPU_HEALTH_STATE_DEGRADED, ["nvlink_down"]),
            3: (pb.GPU_HEALTH_STATE_NEEDS_REBOOT, ["recovery_node_reboot"]),
            4: (pb.GPU_HEALTH_STATE_NEEDS_REBOOT, ["xid_79"]),
        }
        link = stub.GetHealth(pb.GetHealthRequest(), timeout=5).gpus[2].reasons[0]
        assert link.summary == "1 NVLink link down (2)"
    finally:
        output = daemon.stop()
    assert "Traceback" not in output, output
