"""Render docs/screenshots/health-tiles.png and health-detail.png: GPU health in the console.

    xvfb-run -a .venv/bin/python docs/screenshots/health_screenshots.py [OUT_DIR]

(Without a display it renders offscreen.) The real MainWindow over a
ConsoleSession whose frames are fed by hand: four nodes' samples and events
are built as gpufleet.v1 messages, decoded by the console's own decoder
(console.connections.decode) and handed to the views through the frame pump's
signals, exactly as the network thread's updates are. So every health state
shows at once, without waiting for scripted faults to ripen on live daemons:
healthy, degraded (an NVLink down), suspect (an ECC storm), needs reset (a row
remap pending, drained by self-healing), needs reboot (Xid 79) and needs
inspection (a remap failure), plus a GPU drained by a person.
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

from PySide6.QtGui import QColor, QPixmap
from shot_tools import feed_samples, offline_window, wait_until

from console.connections.decode import decode_event
from console.connections.decode_health import decode_node_health
from console.fleet.identity import Identity
from console.fleet.model import Change
from console.fleet.updates import (
    GpuInfo,
    IdentityUpdate,
    InventoryUpdate,
    LinkState,
    LinkUpdate,
    QueryResult,
)
from console.fleet.updates import NodeInfo as Node
from console.main_window import MainWindow
from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
TARGETS = [f"10.0.0.{n}:50051" for n in range(1, 5)]
NOW_MS = int(time.time() * 1000)
TICKS = 90
S = pb  # states and kinds below, short


def reason(code: str, state: int, summary: str, action: str, ago_s: int,
           lead_s: int | None = None) -> pb.HealthReason:  # fmt: skip
    message = pb.HealthReason(code=code, state=state, summary=summary, action=action,
                              since_unix_ms=NOW_MS - ago_s * 1000)  # fmt: skip
    if lead_s is not None:
        message.lead_time_s = lead_s
    return message


XID79 = reason("xid_79", S.GPU_HEALTH_STATE_NEEDS_REBOOT, "Xid 79: GPU has fallen off the bus",
               "reboot the node", 540)  # fmt: skip
REMAP = reason("row_remap_pending", S.GPU_HEALTH_STATE_NEEDS_RESET,
               "a row remap waits for a GPU reset", "reset the GPU when idle", 1500)  # fmt: skip
FAILED = reason("row_remap_failure", S.GPU_HEALTH_STATE_NEEDS_INSPECTION,
                "a row remap failed: no spare rows left", "inspect the GPU (likely an RMA)",
                7200)  # fmt: skip
STORM = reason("ecc_storm", S.GPU_HEALTH_STATE_SUSPECT, "correctable ECC errors at 42/min",
               "watch it; plan a reset", 900, lead_s=6 * 3600)  # fmt: skip
LINK = reason("nvlink_down", S.GPU_HEALTH_STATE_DEGRADED, "NVLink link 5 is down",
              "drain peer-to-peer work; reset the GPU when idle", 300)  # fmt: skip

# (node, GPU) -> (state, reasons, extra condition fields, extra sample fields)
SICK: dict[tuple[int, int], tuple[int, tuple[pb.HealthReason, ...], dict, dict]] = {
    (0, 2): (S.GPU_HEALTH_STATE_SUSPECT, (STORM,), {}, {"pcie_replay_total": 18}),
    (0, 5): (S.GPU_HEALTH_STATE_DEGRADED, (LINK,), {},
             {"nvlink_links_active": 17, "nvlink_links_down": 1, "nvlink_down_links": [5]}),
    (1, 3): (S.GPU_HEALTH_STATE_NEEDS_REBOOT, (XID79, STORM),
             {"drained": True, "drained_by": "self-healing", "drain_reason": "Xid 79",
              "power_capped_w": 450.0},
             {"xid_counts": {79: 1, 13: 3}, "recovery_action": 2, "pcie_replay_total": 4812,
              "remapped_rows_correctable": 2, "remapped_rows_uncorrectable": 0,
              "row_remap_pending": 0, "row_remap_failure": 0, "nvlink_links_active": 18,
              "nvlink_links_down": 0, "nvlink_crc_flit_errors_total": 0,
              "nvlink_crc_data_errors_total": 3, "nvlink_replay_errors_total": 41,
              "nvlink_recovery_errors_total": 0, "power_limit_w": 450.0}),
    (1, 6): (S.GPU_HEALTH_STATE_HEALTHY, (),
             {"drained": True, "drained_by": "alice", "drain_reason": "fan noise"}, {}),
    (2, 0): (S.GPU_HEALTH_STATE_NEEDS_RESET, (REMAP,),
             {"drained": True, "drained_by": "self-healing", "drain_reason": "row remap pending"},
             {"row_remap_pending": 1, "remapped_rows_uncorrectable": 1, "xid_counts": {63: 1}}),
    (3, 7): (S.GPU_HEALTH_STATE_NEEDS_INSPECTION, (FAILED, REMAP), {},
             {"row_remap_failure": 1, "row_remap_pending": 1, "xid_counts": {64: 1, 48: 2}}),
}  # fmt: skip


def inventory(n: int) -> Node:
    gpus = tuple(GpuInfo(i, f"GPU-{n}-{i}", "NVIDIA H100 80GB HBM3", None,
                         f"0000:{i + 0x18:02x}:00.0", 80 << 30, 700.0, power_limit_default_w=700.0)
                 for i in range(8))  # fmt: skip
    return Node(f"gpu-node-0{n + 1}", "550.90.07", "12.4", "0.1", "nvml", True, "", 1.0, gpus)


def sample(n: int, gpu: int, tick: int) -> pb.GpuSample:
    wave = math.sin((tick + 7 * gpu + 13 * n) / 9)
    state, reasons, cond_extra, sample_extra = SICK.get(
        (n, gpu), (S.GPU_HEALTH_STATE_HEALTHY, (), {}, {}))  # fmt: skip
    condition = pb.GpuCondition(gpu_index=gpu, state=state, reasons=reasons,
                                since_unix_ms=NOW_MS - 600_000, **cond_extra)  # fmt: skip
    busy = (n * 8 + gpu) % 3 != 0
    return pb.GpuSample(
        index=gpu, health=pb.GPU_HEALTH_OK, condition=condition,
        temp_gpu_c=(62 if busy else 38) + 6 * wave + gpu,
        util_gpu_pct=max(0.0, (85 if busy else 3) + 8 * wave),
        mem_used_bytes=(52 if busy else 1) << 30, mem_total_bytes=80 << 30,
        power_w=(520 if busy else 70) + 40 * wave, sm_clock_mhz=1980, mem_clock_mhz=2619,
        processes=[pb.GpuProcess(pid=41000 + 10 * n + gpu, user="bob", command="python train.py",
                                 gpu_memory_bytes=51 << 30, start_time_unix_ms=NOW_MS - 3_600_000,
                                 slurm_job_id=str(88000 + n))] if busy else [],
        **sample_extra,
    )  # fmt: skip


def events(target_index: int) -> list[pb.Event]:
    """What the Events tab shows for gpu-node-02: health changed, healing, drained."""
    rebooting = pb.GpuCondition(gpu_index=3, state=S.GPU_HEALTH_STATE_NEEDS_REBOOT,
                                reasons=[XID79, STORM], drained=True, drained_by="self-healing",
                                drain_reason="Xid 79", since_unix_ms=NOW_MS - 540_000,
                                power_capped_w=450.0)  # fmt: skip
    alice = pb.GpuCondition(gpu_index=6, state=S.GPU_HEALTH_STATE_HEALTHY, drained=True,
                            drained_by="alice", drain_reason="fan noise",
                            since_unix_ms=NOW_MS - 86_400_000)  # fmt: skip
    made = [
        (S.EVENT_KIND_GPU_HEALTH_CHANGED, 3, {"condition": rebooting}, "health"),
        (S.EVENT_KIND_HEALING_ACTION, 3, {"healing": pb.HealingAction(
            action="drain", gpu_index=3, reason="Xid 79: GPU has fallen off the bus",
            outcome="done")}, "self-healing"),
        (S.EVENT_KIND_GPU_DRAINED, 3, {"condition": rebooting}, "self-healing"),
        (S.EVENT_KIND_HEALING_ACTION, 3, {"healing": pb.HealingAction(
            action="node_reboot", gpu_index=3, dry_run=True,
            reason="Xid 79: GPU has fallen off the bus", outcome="would do")}, "self-healing"),
        (S.EVENT_KIND_GPU_DRAINED, 6, {"condition": alice}, "alice"),
    ]  # fmt: skip
    return [pb.Event(seq=100 + i, time_unix_ms=NOW_MS - (len(made) - i) * 40_000, kind=kind,
                     gpu_index=gpu, actor=actor, **fields)
            for i, (kind, gpu, fields, actor) in enumerate(made)]  # fmt: skip


def feed(window: MainWindow) -> None:
    """Frames as the pump makes them: apply the decoded updates, then tell the views."""
    session, fleet = window.session, window.session.fleet
    for n, target in enumerate(TARGETS):
        updates = [InventoryUpdate(target, inventory(n)), LinkUpdate(target, LinkState.CONNECTED),
                   IdentityUpdate(target, Identity("alice", Role.ADMIN))]  # fmt: skip
        session.pump.fleetChanged.emit(fleet.apply_all(updates))
    feed_samples(fleet, TARGETS, sample, TICKS, NOW_MS)
    for message in events(1):
        fleet.apply(decode_event(TARGETS[1], message))
    # GPU 3's fault record: its Xid 79 burst (open) and a row remap 12 days ago, reset then;
    # the score as the daemon works it out: 100 - 25 - 15 x 0.5^(12/30) = 63.6.
    burst = pb.FaultIncident(kind="xid", state=pb.GPU_HEALTH_STATE_NEEDS_REBOOT,
                             started_unix_ms=NOW_MS - 300_000, last_unix_ms=NOW_MS - 240_000,
                             count=2, xid_codes=[79])  # fmt: skip
    remap = pb.FaultIncident(kind="row_remap_pending", state=pb.GPU_HEALTH_STATE_NEEDS_RESET,
                             started_unix_ms=NOW_MS - 12 * 86_400_000,
                             last_unix_ms=NOW_MS - 12 * 86_400_000 + 1_800_000, count=1,
                             ended=True)  # fmt: skip
    record = pb.GpuFaultRecord(gpu_index=3, uuid="GPU-3", reliability_score=63.6,
                               incidents=[remap, burst])  # fmt: skip
    policy = pb.NodeHealth(healing=pb.HealingPolicy(mode="on", actions=["drain", "power_cap"],
                                                    max_actions_per_hour=6),
                           fault_records=[record])  # fmt: skip
    answer = decode_node_health(TARGETS[1], policy)  # as GetHealth's QueryResult carries it
    fleet.apply(QueryResult(TARGETS[1], "health", 1, True, "done", answer))
    session.pump.fleetChanged.emit(dict.fromkeys(TARGETS, Change.DATA))
    session.pump.eventsArrived.emit(fleet.take_new_events())


def main() -> int:
    with offline_window(TARGETS, (1600, 1000)) as (app, window):
        feed(window)
        window.grid.select(TARGETS[1], 3)
        window.tabs.setCurrentWidget(window.alerts.event_log)
        # The status bar's summary refreshes on its own timer: wait for it to count the nodes.
        wait_until(app, lambda: "4/4 nodes" in window.grid_part.summary.text(), 10)
        OUT.mkdir(parents=True, exist_ok=True)
        window.grab().save(str(OUT / "health-tiles.png"))
        window.detail.grab().save(str(OUT / "health-detail.png"))
        # The whole Health section, unscrolled: its label at the panel's width, full height.
        label = window.detail.health.label
        width = window.detail.health.viewport().width()
        label.resize(width, label.heightForWidth(width))
        shot = QPixmap(label.size())
        shot.fill(QColor("#1a1d23"))  # the panel's background (resources/styles/dark.qss)
        label.render(shot)
        shot.save(str(OUT / "health-section.png"))
        print(f"saved health-tiles.png, health-detail.png and health-section.png in {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
