"""The grid's repaint budget: when every node changes at once (the replay cursor moved, a
reconnect), a frame repaints as many changed blocks as the paint time measured lately
fits in the budget, and never fewer than REPAINT_BUDGET.

The real window over a session fed by hand as the network thread feeds it, pumped by
hand. The grid's follow-up frame is set beyond the test, so what is left waiting after
the first frame stays waiting and can be counted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.grid import fleet_grid
from gpufleet.v1.gpu_metrics import TEMP_GPU_C, UTIL_GPU_PCT
from tests.console.hand_fed import gpus_of, node_up, samples, simulated_node
from tests.console.test_frame_sharing import shown_window

NODES = 40
TARGETS = [f"10.0.1.{n}:50051" for n in range(NODES)]  # nothing listens: fed by hand
GPUS = 2
T0 = 1_800_000_000.0


def send_all(session: ConsoleSession, second: int) -> None:
    for target in TARGETS:
        readings = {TEMP_GPU_C: 40 + second % 30, UTIL_GPU_PCT: 10 * (second % 9)}
        session.inbox.put(samples(target, T0 + second, GPUS, readings))


@pytest.fixture
def fleet(qtbot, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MainWindow, ConsoleSession]]:
    monkeypatch.setattr(fleet_grid, "FRAME_MS", 600_000)
    session = ConsoleSession(TARGETS)
    window = shown_window(qtbot, session)
    for n, target in enumerate(TARGETS):
        for update in node_up(target, simulated_node(f"node-{n:02}", gpus_of(GPUS, f"G{n}-"))):
            session.inbox.put(update)
    send_all(session, 0)
    session.pump.pump()
    qtbot.waitUntil(lambda: len(window.grid.blocks) == NODES, timeout=5000)
    # The first frames repaint 16 blocks each; their follow-ups are beyond the test.
    window.grid._on_repaint_timeout()
    qtbot.waitUntil(lambda: window.grid.blocks_waiting == 0, timeout=5000)
    yield window, session
    session.stop()


def first_frame_leaves(qtbot, window: MainWindow, session: ConsoleSession, second: int) -> int:
    """Change every node in one pump; the blocks left waiting after that frame."""
    send_all(session, second)
    session.pump.pump()
    assert window.grid.blocks_waiting == NODES
    qtbot.waitUntil(lambda: window.grid.blocks_waiting < NODES, timeout=5000)
    return window.grid.blocks_waiting


def test_cheap_paints_let_one_frame_repaint_every_changed_block(
    qtbot, fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, session = fleet
    # A budget that any measured block paint under 250 ms fits 40 times.
    monkeypatch.setattr(fleet_grid, "PAINT_BUDGET_S", 10.0)
    assert window.grid.repaint_budget >= NODES
    assert first_frame_leaves(qtbot, window, session, 1) == 0


def test_no_budget_still_repaints_the_floor_each_frame(
    qtbot, fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    window, session = fleet
    monkeypatch.setattr(fleet_grid, "PAINT_BUDGET_S", 0.0)
    assert window.grid.repaint_budget == fleet_grid.REPAINT_BUDGET
    assert first_frame_leaves(qtbot, window, session, 1) == NODES - fleet_grid.REPAINT_BUDGET


def test_slow_paints_shrink_the_budget_back_to_the_floor(
    qtbot, fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks measured at 50 ms each (a loaded machine): the next frames repaint the floor,
    not a frame of all of them."""
    window, session = fleet
    monkeypatch.setattr(fleet_grid, "PAINT_BUDGET_S", 10.0)
    assert window.grid.repaint_budget >= NODES
    clock = [0.0]
    paint_block = window.grid._paint_block

    def slow_paint_block(painter, block) -> None:  # type: ignore[no-untyped-def]
        paint_block(painter, block)
        clock[0] += 50.0  # the grid's clock: each block "took" 50 s

    monkeypatch.setattr(fleet_grid.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(window.grid, "_paint_block", slow_paint_block)
    window.grid.update()
    qtbot.waitUntil(lambda: window.grid.repaint_budget == fleet_grid.REPAINT_BUDGET, timeout=5000)
    assert first_frame_leaves(qtbot, window, session, 1) == NODES - fleet_grid.REPAINT_BUDGET
