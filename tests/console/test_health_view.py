"""GPU health in the console without a daemon: decoded from constructed messages, then
shown on tiles, in the tooltip, the tile menu, the detail's Health section, the Events
tab, the drop verdicts and the healing notices (#15)."""

from __future__ import annotations

import dataclasses
import time

import pytest
from PySide6.QtCore import QPoint
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QDialogButtonBox

from console.connections.decode import decode_batch, decode_event, decode_reply
from console.connections.decode_health import decode_condition, decode_node_health, decode_signals
from console.connections.health_actions import HealthActions
from console.connections.manager import ConnectionManager, UpdateInbox
from console.fleet.healing_notices import healing_notices
from console.fleet.health import NO_SIGNALS, HealthState
from console.fleet.health_report import healing_text
from console.fleet.identity import Identity
from console.fleet.model import Change, FleetModel
from console.fleet.placement import can_assign
from console.fleet.updates import CommandResult, EventUpdate, IdentityUpdate, QueryResult
from console.fleet.xid_words import XID_TABLE_URL, xid_text
from console.qt import roles
from console.qt.event_model import EventLogModel
from console.qt.fleet_item_model import FleetItemModel
from console.views.control.health_prompts import HealthPrompts
from console.views.detail.gpu_detail import GpuDetailPanel
from console.views.grid.tile_painter import HEALTH_SERIOUS, HEALTH_WATCH
from gpufleet.policy import Role
from gpufleet.v1 import node_pb2 as pb
from tests.console.test_control_model import NOW, A, fleet_with, workload
from tests.console.test_control_views import grid_of

XID79 = pb.HealthReason(
    code="xid_79", state=pb.GPU_HEALTH_STATE_NEEDS_REBOOT,
    summary="Xid 79: GPU has fallen off the bus", action="reboot the node",
    since_unix_ms=NOW - 60_000,
)  # fmt: skip
STORM = pb.HealthReason(
    code="ecc_storm", state=pb.GPU_HEALTH_STATE_SUSPECT,
    summary="correctable ECC errors at 40/min", action="watch it; plan a reset",
    since_unix_ms=NOW - 120_000, lead_time_s=7200,
)  # fmt: skip
REMAP = pb.HealthReason(
    code="row_remap_pending", state=pb.GPU_HEALTH_STATE_NEEDS_RESET,
    summary="a row remap waits for a GPU reset", action="reset the GPU",
    since_unix_ms=NOW - 30_000,
)  # fmt: skip


def condition(
    gpu: int,
    state: int = pb.GPU_HEALTH_STATE_HEALTHY,
    reasons: tuple[pb.HealthReason, ...] = (),
    **fields: object,
) -> pb.GpuCondition:
    return pb.GpuCondition(
        gpu_index=gpu, state=state, reasons=reasons, since_unix_ms=NOW - 30_000, **fields
    )


def sick_fleet(gpus: int = 4) -> FleetModel:
    """node-1: GPU 0 healthy, 1 suspect (ECC storm), 2 needs reset and drained, 3 needs a reboot.

    Decoded from GpuSamples as the network thread decodes them.
    """
    fleet = fleet_with(A, gpus=gpus)
    conditions = {
        0: condition(0),
        1: condition(1, pb.GPU_HEALTH_STATE_SUSPECT, (STORM,)),
        2: condition(2, pb.GPU_HEALTH_STATE_NEEDS_RESET, (REMAP,), drained=True,
                     drained_by="self-healing", drain_reason="row remap pending"),
        3: condition(3, pb.GPU_HEALTH_STATE_NEEDS_REBOOT, (XID79, STORM), power_capped_w=250.0),
    }  # fmt: skip
    tick(fleet, conditions)
    return fleet


def tick(fleet: FleetModel, conditions: dict[int, pb.GpuCondition], **extra: object) -> None:
    node = fleet.node(A)
    assert node.ring is not None
    samples = [
        pb.GpuSample(index=i, health=pb.GPU_HEALTH_OK, temp_gpu_c=55.0, util_gpu_pct=20.0,
                     mem_used_bytes=10 << 30, mem_total_bytes=80 << 30,
                     condition=conditions.get(i), **(extra if i == 3 else {}))
        for i in range(node.gpu_count)
    ]  # fmt: skip
    stamp = int((node.ring.last_time + 1.0) * 1000)
    batch = pb.SampleBatch(timestamp_unix_ms=stamp, gpus=samples)
    assert fleet.apply(decode_batch(A, batch, node.gpu_count)) is Change.DATA


def _near(found: QColor, wanted: QColor) -> bool:
    """Within antialiasing's blur of a colour."""
    return (abs(found.red() - wanted.red()) + abs(found.green() - wanted.green())
            + abs(found.blue() - wanted.blue())) < 30  # fmt: skip


def as_role(fleet: FleetModel, role: Role) -> None:
    fleet.apply(IdentityUpdate(A, Identity("alice", role)))


# -- decoding ---------------------------------------------------------------------


def test_condition_and_signals_decode_into_the_snapshot() -> None:
    fleet = fleet_with(A)
    signals = dict(
        pcie_replay_total=12, remapped_rows_correctable=3, remapped_rows_uncorrectable=1,
        row_remap_pending=1, row_remap_failure=0, nvlink_links_active=16, nvlink_links_down=2,
        nvlink_down_links=[4, 9], nvlink_replay_errors_total=7, recovery_action=1,
        power_limit_w=300.0, xid_counts={79: 1, 13: 4},
    )  # fmt: skip
    tick(fleet, {3: condition(3, pb.GPU_HEALTH_STATE_NEEDS_REBOOT, (XID79,))}, **signals)
    snap = fleet.node(A).latest[3]
    assert snap.condition is not None and snap.condition.state is HealthState.NEEDS_REBOOT
    assert snap.condition.reasons[0].summary == "Xid 79: GPU has fallen off the bus"
    assert snap.condition.placement_refusal() == (
        "GPU 3 needs reboot: Xid 79: GPU has fallen off the bus"
    )
    s = snap.signals
    assert (s.pcie_replay_total, s.row_remap_pending, s.row_remap_failure) == (12, True, False)
    assert s.nvlink_down_links == (4, 9) and s.xid_counts == ((13, 4), (79, 1))
    assert s.retired_pages_sbe is None  # not reported: not 0
    # A GPU without health fields, from a daemon that judges none: nothing invented.
    other = fleet.node(A).latest[0]
    assert other.condition is None and other.signals is NO_SIGNALS


def test_a_state_this_console_does_not_know_reads_as_healthy() -> None:
    fleet = fleet_with(A)
    tick(fleet, {0: condition(0, state=17)})
    judged = fleet.node(A).latest[0].condition
    assert judged is not None and judged.state is HealthState.HEALTHY


def test_drain_reply_is_shown_before_the_next_sample() -> None:
    fleet = sick_fleet()
    reply = condition(1, pb.GPU_HEALTH_STATE_SUSPECT, (STORM,), drained=True,
                      drained_by="alice", drain_reason="fan noise")  # fmt: skip
    message, payload = decode_reply(A, reply)
    assert message == "GPU 1 suspect, drained"
    assert fleet.apply(CommandResult(A, "drain GPU 1", True, message, None, payload)) is Change.DATA
    judged = fleet.node(A).latest[1].condition
    assert judged is not None and judged.drained and judged.drained_by == "alice"


# -- events as sentences ------------------------------------------------------------


def event(kind: int, **fields: object) -> pb.Event:
    fields.setdefault("summary", "daemon words")
    return pb.Event(seq=7, time_unix_ms=NOW, kind=kind, gpu_index=3, actor="self-healing",
                    **fields)  # fmt: skip


@pytest.mark.parametrize(
    ("message", "sentence"),
    [
        (event(pb.EVENT_KIND_GPU_HEALTH_CHANGED,
               condition=condition(3, pb.GPU_HEALTH_STATE_NEEDS_REBOOT, (XID79, STORM)),
               summary="GPU 3 needs reboot (was suspect): Xid 79: GPU has fallen off the bus "
               "and 1 more"),
         "GPU 3 needs reboot (was suspect): Xid 79: GPU has fallen off the bus and 1 more "
         "(reboot the node)"),  # the node's words, which alone know the state before
        (event(pb.EVENT_KIND_GPU_HEALTH_CHANGED,
               condition=condition(3, pb.GPU_HEALTH_STATE_NEEDS_REBOOT, (XID79, STORM)),
               summary=""),
         "GPU 3 needs the node rebooted: Xid 79: GPU has fallen off the bus (reboot the node); "
         "and 1 more"),
        (event(pb.EVENT_KIND_HEALING_ACTION, healing=pb.HealingAction(
            action="drain", gpu_index=3, dry_run=True, reason="Xid 79", outcome="would do")),
         "Self-healing would drain GPU 3 from placement (dry run): Xid 79"),
        (event(pb.EVENT_KIND_HEALING_ACTION, healing=pb.HealingAction(
            action="power_cap", gpu_index=3, reason="hot for 10 min", outcome="done")),
         "Self-healing lowered GPU 3's power limit: hot for 10 min"),
        (event(pb.EVENT_KIND_HEALING_ACTION, healing=pb.HealingAction(
            action="gpu_reset", gpu_index=3, reason="remap pending", outcome="refused: GPU busy")),
         "Self-healing did not reset GPU 3 (refused: GPU busy): remap pending"),
        (event(pb.EVENT_KIND_GPU_DRAINED, condition=condition(
            3, drained=True, drained_by="alice", drain_reason="fan noise")),
         "GPU 3 drained from placement by alice: fan noise (no new work)"),
        (event(pb.EVENT_KIND_GPU_UNDRAINED, condition=condition(3)),
         "GPU 3 returned to placement by self-healing: it takes new work again"),
        (event(pb.EVENT_KIND_GPU_LOST), "daemon words"),  # other kinds keep the daemon's
    ],
)  # fmt: skip
def test_health_events_read_as_sentences(message: pb.Event, sentence: str) -> None:
    decoded = decode_event(A, message).event
    model = EventLogModel()
    model.add_events([decoded])
    assert model.data(model.index(0, 4)) == sentence
    assert model.data(model.index(0, 3)) == decoded.kind.replace("_", " ")


def test_only_healing_that_acted_pops_up() -> None:
    def healing_event(seq: int, dry_run: bool, replayed: bool = False) -> pb.Event:
        action = pb.HealingAction(action="drain", gpu_index=3, dry_run=dry_run, reason="Xid 79",
                                  outcome="would do" if dry_run else "done")  # fmt: skip
        return pb.Event(seq=seq, time_unix_ms=NOW, kind=pb.EVENT_KIND_HEALING_ACTION,
                        gpu_index=3, healing=action, replayed=replayed)  # fmt: skip

    rebooting = condition(3, pb.GPU_HEALTH_STATE_NEEDS_REBOOT, (XID79,))
    changed = pb.Event(seq=9, kind=pb.EVENT_KIND_GPU_HEALTH_CHANGED, gpu_index=3,
                       condition=rebooting)  # fmt: skip
    messages = [healing_event(1, True), healing_event(2, False), healing_event(3, False, True),
                changed]  # fmt: skip
    rows = [decode_event(A, m).event for m in messages]
    notices = healing_notices(rows, lambda target: "node-1")
    assert [(n.title, n.body, n.places) for n in notices] == [
        ("Self-healing on node-1", "Self-healing drained GPU 3 from placement: Xid 79",
         ((A, 3),))
    ]  # fmt: skip


# -- placement ------------------------------------------------------------------------


def test_drops_refuse_drained_and_broken_gpus_naming_why() -> None:
    fleet = sick_fleet()
    as_role(fleet, Role.OPERATOR)
    queued = workload("w-1", owner="alice")
    fleet.control.apply(queued)
    drained = can_assign(queued, fleet, A, 2, NOW)
    assert not drained.ok
    assert drained.reason == "GPU 2 is drained by self-healing: row remap pending"
    reboot = can_assign(queued, fleet, A, 3, NOW)
    assert not reboot.ok and reboot.reason == (
        "GPU 3 needs reboot: Xid 79: GPU has fallen off the bus"
    )
    assert can_assign(queued, fleet, A, 1, NOW).ok  # suspect: watch it, work still goes there
    pair = workload("w-2", owner="alice", gpus=2)
    fleet.control.apply(pair)
    verdict = can_assign(pair, fleet, A, 1, NOW)  # GPU 2 and 3 are skipped: 1 and 0
    assert verdict.ok and verdict.places == ((A, 1), (A, 0))


# -- tiles ------------------------------------------------------------------------------


def test_tiles_tag_unhealthy_gpus_and_hatch_drained_ones(qtbot) -> None:
    fleet = sick_fleet()
    grid = grid_of(qtbot, fleet)
    image = grid.grab().toImage()
    ratio = image.devicePixelRatio()

    def chip_pixels(gpu: int, color: QColor) -> int:
        """How many pixels of the tile's middle rows are (near) the tag's colour."""
        tile = grid.tile_rect(A, gpu)
        assert tile is not None
        return sum(_near(image.pixelColor(QPoint(x, y) * ratio), color)
                   for x in range(tile.left(), tile.right())
                   for y in range(tile.center().y() - 7, tile.center().y() + 8))  # fmt: skip

    for gpu in (2, 3):  # needs reset, needs reboot: a magenta chip
        assert chip_pixels(gpu, HEALTH_SERIOUS) > 200, gpu
    assert chip_pixels(1, HEALTH_WATCH) > 20  # suspect: an amber outline and word
    for gpu in (0, 1):
        assert chip_pixels(gpu, HEALTH_SERIOUS) == 0, gpu
    assert chip_pixels(0, HEALTH_WATCH) == 0  # healthy: no tag

    def busy(gpu: int) -> int:
        """How many pixels of the tile's bottom-left corner differ from its fill."""
        tile = grid.tile_rect(A, gpu)
        assert tile is not None
        fill = image.pixelColor(QPoint(tile.x() + 30, tile.bottom() - 18) * ratio)
        return sum(image.pixelColor(QPoint(x, y) * ratio) != fill
                   for x in range(tile.x() + 20, tile.x() + 40)
                   for y in range(tile.bottom() - 24, tile.bottom() - 14))  # fmt: skip

    assert busy(2) > 20 and busy(0) == 0  # the drained tile is hatched, the healthy one flat


def test_tooltip_names_the_state_and_top_reasons(qtbot) -> None:
    grid = grid_of(qtbot, sick_fleet())
    tile = grid.tile_rect(A, 3)
    assert tile is not None
    text = grid.tooltip_at(tile.center()) or ""
    assert "health: needs reboot since" in text
    assert "Xid 79: GPU has fallen off the bus (reboot the node)" in text
    assert "correctable ECC errors at 40/min (watch it; plan a reset)" in text
    assert "power capped by self-healing to 250 W" in text
    drained = grid.tile_rect(A, 2)
    assert drained is not None
    assert "drained from placement by self-healing: row remap pending" in (
        grid.tooltip_at(drained.center()) or ""
    )
    healthy = grid.tile_rect(A, 0)
    assert healthy is not None and "health" not in (grid.tooltip_at(healthy.center()) or "")


def menu_texts(grid, gpu: int) -> list[tuple[str, bool]]:  # type: ignore[no-untyped-def]
    return [(a.text(), a.isEnabled()) for a in grid.context_menu(A, gpu).actions()
            if not a.isSeparator()]  # fmt: skip


def test_tile_menu_offers_health_actions_by_role(qtbot) -> None:
    fleet = sick_fleet()
    grid = grid_of(qtbot, fleet)
    as_role(fleet, Role.VIEWER)
    viewer = menu_texts(grid, 3)
    assert viewer[0][0].startswith("Drain from placement… (needs the operator role")
    assert not viewer[0][1]
    as_role(fleet, Role.OPERATOR)
    assert menu_texts(grid, 3)[0] == ("Drain from placement…", True)
    clear_text, clear_ok = menu_texts(grid, 3)[1]
    assert clear_text.startswith("Mark repaired (clear health)… (needs the admin role")
    assert not clear_ok
    assert menu_texts(grid, 2)[0] == ("Return to placement", True)
    assert menu_texts(grid, 0) == [("Drain from placement…", True)]  # nothing to clear
    as_role(fleet, Role.ADMIN)
    assert menu_texts(grid, 3)[1] == ("Mark repaired (clear health)…", True)
    menu = grid.context_menu(A, 2)
    with qtbot.waitSignal(grid.drainRequested) as asked:
        menu.actions()[0].trigger()
    assert asked.args == [A, 2, False]
    menu = grid.context_menu(A, 3)
    with qtbot.waitSignal(grid.clearHealthRequested) as cleared:
        menu.actions()[1].trigger()
    assert cleared.args == [A, 3]


def test_no_health_entries_from_a_daemon_that_judges_none(qtbot) -> None:
    grid = grid_of(qtbot, fleet_with(A))
    assert grid.context_menu(A, 0).actions() == []


# -- the prompts, through a real connection manager ---------------------------------


@pytest.fixture
def connections():  # type: ignore[no-untyped-def]
    inbox = UpdateInbox()
    manager = ConnectionManager(inbox)
    manager.start()
    yield manager, inbox
    manager.stop()


def wait_result(qtbot, inbox: UpdateInbox) -> CommandResult:  # type: ignore[no-untyped-def]
    found: list[CommandResult] = []

    def arrived() -> bool:
        found.extend(u for u in inbox.drain() if isinstance(u, CommandResult))
        return bool(found)

    qtbot.waitUntil(arrived, timeout=5000)
    return found[0]


def operator_prompts(qtbot, manager: ConnectionManager) -> HealthPrompts:  # type: ignore[no-untyped-def]
    """The health prompts over a sick fleet, for an operator, sending through `manager`."""
    fleet = sick_fleet()
    as_role(fleet, Role.OPERATOR)
    window = GpuDetailPanel(fleet)
    qtbot.addWidget(window)
    return HealthPrompts(fleet, HealthActions(manager), window)


def test_drain_asks_for_a_reason_then_sends(qtbot, connections) -> None:  # type: ignore[no-untyped-def]
    manager, inbox = connections
    prompts = operator_prompts(qtbot, manager)
    prompts.ask_drain(A, 1)
    dialog = prompts.dialog
    assert dialog is not None and not dialog.ok.isEnabled()  # no reason, no drain
    dialog.reason.setText("fan noise")
    assert dialog.ok.isEnabled()
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    result = wait_result(qtbot, inbox)
    # The console watches no link here: the manager answers for the node, as it would.
    assert (result.what, result.ok) == (f"drain GPU 1 of {A}", False)
    assert prompts.dialog is None


def test_clear_needs_admin_and_says_so(qtbot, connections) -> None:  # type: ignore[no-untyped-def]
    manager, _inbox = connections
    prompts = operator_prompts(qtbot, manager)
    with qtbot.waitSignal(prompts.message) as said:
        prompts.ask_clear(A, 3)
    assert said.args[0].startswith("Cannot clear health: needs the admin role")
    assert prompts.dialog is None


# -- the detail's Health section --------------------------------------------------------


def test_detail_health_section_says_everything_the_node_does(qtbot) -> None:
    fleet = fleet_with(A)
    tick(fleet, {3: condition(3, pb.GPU_HEALTH_STATE_NEEDS_REBOOT, (XID79, STORM),
                              power_capped_w=250.0, drained=True, drained_by="self-healing",
                              drain_reason="Xid 79")},
         pcie_replay_total=1234, remapped_rows_correctable=3, remapped_rows_uncorrectable=1,
         row_remap_pending=1, row_remap_failure=0, retired_pages_sbe=2, retired_pages_dbe=0,
         retired_pages_pending=0, nvlink_links_active=16, nvlink_links_down=2,
         nvlink_down_links=[4, 9], nvlink_crc_flit_errors_total=5,
         nvlink_crc_data_errors_total=6, nvlink_replay_errors_total=7,
         nvlink_recovery_errors_total=8, recovery_action=2, power_limit_w=250.0,
         xid_counts={79: 1, 13: 4})  # fmt: skip
    panel = GpuDetailPanel(fleet, clock=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show_gpu(A, 3)
    text = panel.health.plain_text()
    since = time.strftime("%H:%M", time.localtime((NOW - 30_000) / 1000))
    for expected in (
        f"needs reboot since {since}",
        "drained from placement by self-healing: Xid 79 (no new work)",
        "the node places no new work on it",
        "needs reboot: Xid 79: GPU has fallen off the bus (reboot the node) · since",
        "suspect: correctable ECC errors at 40/min (watch it; plan a reset)",
        "usually 2 h ahead of the failure",
        "Xid 13, 4 times: ",
        "Xid 79, once: GPU has fallen off the bus",
        "What to do: reboot the node",
        "PCIe replays: 1,234",
        "remapped rows: 3 correctable, 1 uncorrectable; pending yes, waiting for a GPU reset; "
        "failure no",
        "retired pages: 2 single-bit, 0 double-bit; pending no",
        "NVLink: 16 links up, 2 down (link 4, 9)",
        "NVLink errors: CRC flit 5, CRC data 6, replay 7, recovery 8",
        "driver's recovery action: reboot the node",
        "power limit: 250 W",
        "capped by self-healing to 250 W",
    ):
        assert expected in text, expected
    assert "MIG" not in text  # not a MIG-enabled GPU
    assert panel.health.isVisibleTo(panel)


def test_detail_lists_mig_instances_of_a_mig_gpu(qtbot) -> None:
    fleet = fleet_with(A)
    node = fleet.node(A)
    assert node.info is not None
    gpus = list(node.info.gpus)
    gpus[3] = dataclasses.replace(gpus[3], mig_enabled=True)
    node.info = dataclasses.replace(node.info, gpus=tuple(gpus))
    mig = [
        pb.MigInstance(gpu_instance_id=1, compute_instance_id=0, profile="3g.40gb",
                       uuid="MIG-aaaa", mem_used_bytes=10 << 30, mem_total_bytes=40 << 30,
                       processes=[pb.GpuProcess(pid=4242, user="bob", command="python x.py")]),
        pb.MigInstance(gpu_instance_id=2, compute_instance_id=0, profile="1g.10gb",
                       uuid="MIG-bbbb", mem_used_bytes=0, mem_total_bytes=10 << 30),
    ]  # fmt: skip
    tick(fleet, {3: condition(3)}, mig_instances=mig)
    panel = GpuDetailPanel(fleet, clock=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show_gpu(A, 3)
    text = panel.health.plain_text()
    assert "GI 1 / CI 0 3g.40gb: 10 GiB of 40 GiB · 4242 bob: python x.py" in text
    assert "GI 2 / CI 0 1g.10gb: 0 MiB of 10 GiB · no processes" in text
    assert text.startswith("Health\nhealthy since")


def test_xid_meaning_and_advice_come_from_the_catalogue() -> None:
    known = xid_text(79)
    assert (known.meaning, known.known) == ("GPU has fallen off the bus", True)
    assert "What to do: reboot the node" in known.advice
    unknown = xid_text(4_000_000)  # a code of a driver newer than the catalogue
    assert not unknown.known and XID_TABLE_URL in unknown.advice


def test_a_health_event_updates_the_tile_at_once() -> None:
    fleet = sick_fleet()
    drained = event(pb.EVENT_KIND_GPU_DRAINED, condition=condition(
        0, drained=True, drained_by="alice", drain_reason="fan noise"))  # fmt: skip
    drained.gpu_index = 0
    update = decode_event(A, drained)
    assert isinstance(update, EventUpdate)
    assert fleet.apply(update) is Change.DATA
    judged = fleet.node(A).latest[0].condition
    assert judged is not None and judged.drained
    items = FleetItemModel(fleet)
    assert items.gpu_index(A, 0).data(roles.CONDITION_ROLE) == judged


def test_reused_records_still_tell_unset_from_zero() -> None:
    """The decoder reuses a GPU's records while its health stays the same; a counter the GPU
    stops reporting still reads as not available, not as the 0 it last said."""
    reported = pb.GpuSample(index=0, pcie_replay_total=0, power_limit_w=300.0)
    silent = pb.GpuSample(index=0, power_limit_w=300.0)
    same = pb.GpuSample(index=0, pcie_replay_total=0, power_limit_w=300.0)
    first, again = decode_signals(reported), decode_signals(same)
    assert first is again and first.pcie_replay_total == 0
    assert decode_signals(silent).pcie_replay_total is None
    drained = condition(1, drained=True, drained_by="alice")
    copy = pb.GpuCondition.FromString(drained.SerializeToString())
    assert decode_condition(drained) is decode_condition(copy)
    assert not decode_condition(condition(1)).drained


def test_a_healthy_gpus_quiet_signals_share_one_line(qtbot) -> None:
    fleet = fleet_with(A)
    zeros = dict(
        pcie_replay_total=0, remapped_rows_correctable=0, remapped_rows_uncorrectable=0,
        row_remap_pending=0, row_remap_failure=0, nvlink_links_active=12, nvlink_links_down=0,
        nvlink_crc_flit_errors_total=0, nvlink_crc_data_errors_total=0,
        nvlink_replay_errors_total=0, nvlink_recovery_errors_total=0, recovery_action=0,
    )  # fmt: skip
    tick(fleet, {3: condition(3)}, **zeros)
    panel = GpuDetailPanel(fleet, clock=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show_gpu(A, 3)
    assert panel.health.plain_text().splitlines()[2:] == [
        "Signals",
        "PCIe replays: 0 · no remapped rows · NVLink: 12 links up, 0 down · no NVLink errors · "
        "driver's recovery action: none",
    ]


def test_the_nodes_healing_policy_in_words() -> None:
    on = decode_node_health(A, pb.NodeHealth(healing=pb.HealingPolicy(
        mode="on", actions=["drain", "power_cap"], max_actions_per_hour=6)))  # fmt: skip
    assert healing_text(on) == (
        "self-healing on this node: on: drain, power_cap; at most 6 actions an hour"
    )
    assert healing_text(decode_node_health(A, pb.NodeHealth())) == "self-healing on this node: off"
    fleet = fleet_with(A)
    assert fleet.apply(QueryResult(A, "health", 1, True, "done", on)) is Change.DATA
    assert fleet.node(A).healing == on


def test_the_health_section_is_as_tall_as_its_wrapped_lines(qtbot) -> None:
    """Counted by paragraphs, a line that wrapped in a narrow detail (1366x768) was cut in
    half at the section's foot; now it is as tall as its text at its width."""
    from console.fleet.health_report import Part
    from console.views.detail.health_section import MAX_HEIGHT, HealthSection

    section = HealthSection()
    qtbot.addWidget(section)
    section.resize(300, 100)
    section.show()
    long = "PCIe replays: 0 · no remapped rows · NVLink: 18 links up, 0 down · no NVLink errors"
    section.show_report([Part("Signals", (long, "power limit: 700 W"))], None)
    assert section.minimumHeight() < MAX_HEIGHT
    section.resize(300, section.minimumHeight())  # as a layout gives it its least height
    qtbot.waitUntil(lambda: section.height() == section.minimumHeight(), timeout=3000)
    assert section.verticalScrollBar().maximum() == 0  # every wrapped line in view
    wide = section.minimumHeight()
    section.resize(900, section.height())  # wider: fewer lines wrap, less height
    qtbot.waitUntil(lambda: section.minimumHeight() < wide, timeout=3000)


def test_the_detail_shows_the_gpus_fault_record_from_get_health(qtbot) -> None:
    """GetHealth's fault records (asked when a GPU is selected) decode with the healing
    policy; the detail's Reliability part gives the score and the newest incidents."""
    burst = pb.FaultIncident(kind="xid", state=pb.GPU_HEALTH_STATE_NEEDS_INSPECTION,
                             started_unix_ms=NOW - 7_200_000, last_unix_ms=NOW - 7_080_000,
                             count=50, xid_codes=[48, 64, 79], ended=True)  # fmt: skip
    lost = pb.FaultIncident(kind="gpu_lost", state=pb.GPU_HEALTH_STATE_NEEDS_REBOOT,
                            started_unix_ms=NOW - 60_000, last_unix_ms=NOW - 60_000,
                            count=1)  # fmt: skip
    answer = pb.NodeHealth(fault_records=[
        pb.GpuFaultRecord(gpu_index=3, uuid="GPU-3", reliability_score=35.0,
                          incidents=[burst, lost]),
        pb.GpuFaultRecord(gpu_index=0, uuid="GPU-0", reliability_score=100.0),
    ])  # fmt: skip
    decoded = decode_node_health(A, answer)
    record = decoded.fault_record(3)
    assert record is not None and record.reliability_score == 35.0
    assert [i.kind for i in record.incidents] == ["xid", "gpu_lost"]
    assert record.incidents[0].state is HealthState.NEEDS_INSPECTION
    assert record.incidents[0].xid_codes == (48, 64, 79) and decoded.fault_record(1) is None
    fleet = sick_fleet()
    fleet.apply(QueryResult(A, "health", 1, True, "done", decoded))
    panel = GpuDetailPanel(fleet, clock=lambda: NOW)
    qtbot.addWidget(panel)
    panel.show_gpu(A, 3)
    text = panel.health.plain_text().splitlines()
    at = text.index("Reliability")
    assert text[at + 1] == "score 35 of 100: 2 incidents on record"
    assert text[at + 2].startswith("gpu lost · needs reboot · since ")  # newest first
    assert text[at + 3].startswith("Xid burst: 50 Xids (48, 64, 79) · needs inspection · ")
    panel.show_gpu(A, 0)
    text = panel.health.plain_text().splitlines()
    assert text[text.index("Reliability") + 1] == "score 100 of 100: no fault on record"
    panel.show_gpu(A, 1)  # the node sent no record for it: nothing said
    assert "Reliability" not in panel.health.plain_text().splitlines()
