"""Frames the plots and the grid share: the GPU plots' refresh takes its frame, the
fleet grid's changed blocks repaint with the next frame's.

The real window, fed through the session's inbox as the network thread feeds it and
pumped by hand, frame by frame. Paints are counted with event filters. The grid's
fallback repaint (a frame later when no news comes) is set beyond the test, so what
repaints the grid here is the next frame's news and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from PySide6.QtCore import QEvent, QObject, QRect
from PySide6.QtGui import QPaintEvent, QRegion

from console.main_window import MainWindow
from console.session import ConsoleSession
from console.views.grid import fleet_grid
from gpufleet.v1.gpu_metrics import POWER_W, TEMP_GPU_C, UTIL_GPU_PCT
from tests.console.hand_fed import gpus_of, node_up, samples, simulated_node

A, B = "10.0.0.1:50051", "10.0.0.2:50051"  # nothing listens: the inbox is fed by hand
GPUS = 2
T0 = 1_800_000_000.0


class Paints(QObject):
    """Paint events that reached a widget, and the region they painted."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.region = QRegion()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if isinstance(event, QPaintEvent):
            self.count += 1
            self.region = self.region.united(event.region())
        return False


def send(session: ConsoleSession, target: str, second: int) -> None:
    readings = {TEMP_GPU_C: 50 + second % 7, UTIL_GPU_PCT: 10 * (second % 9),
                POWER_W: 300 + second % 11}  # fmt: skip
    session.inbox.put(samples(target, T0 + second, GPUS, readings))


def shown_window(qtbot, session: ConsoleSession) -> MainWindow:  # type: ignore[no-untyped-def]
    """The window over a session fed by hand, shown at 1366x768; its connections run for
    the queries a selection sends, no node connected to."""
    session.connections.start()
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.resize(1366, 768)
    window.show()
    qtbot.waitExposed(window)
    return window


@pytest.fixture
def window(qtbot, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[MainWindow, ConsoleSession]]:
    monkeypatch.setattr(fleet_grid, "FRAME_MS", 600_000)
    session = ConsoleSession([A, B])
    window = shown_window(qtbot, session)
    for n, target in enumerate((A, B)):
        gpus = gpus_of(GPUS, f"GPU-{n}-", model="NVIDIA H100")
        for update in node_up(target, simulated_node(f"node-{n}", gpus)):
            session.inbox.put(update)
        send(session, target, 0)
    session.pump.pump()
    window.grid.select(A, 0)
    qtbot.waitUntil(lambda: len(window.grid.blocks) == 2 and window.detail.plots.isVisible(),
                    timeout=5000)  # fmt: skip
    qtbot.waitUntil(lambda: window.grid.blocks_waiting == 0, timeout=5000)
    yield window, session
    session.stop()


def watch(window: MainWindow) -> tuple[Paints, Paints]:
    grid, plots = Paints(), Paints()
    window.grid.installEventFilter(grid)
    window.detail.plots.viewport().installEventFilter(plots)
    return grid, plots


def block_rect(window: MainWindow, target: str) -> QRect:
    tile = window.grid.tile_rect(target, 0)
    assert tile is not None
    return next(b.rect for b in window.grid.blocks if b.rect.contains(tile))


def test_the_plots_refresh_takes_its_frame_and_the_grid_repaints_with_the_next(
    qtbot, window
) -> None:
    window, session = window
    grid, plots = watch(window)
    send(session, A, 1)  # the GPU shown: its plots redraw this frame
    send(session, B, 1)
    session.pump.pump()
    qtbot.waitUntil(lambda: plots.count > 0, timeout=5000)
    assert grid.count == 0
    assert window.grid.blocks_waiting == 2  # both nodes' blocks wait for the next frame
    send(session, B, 2)  # the next frame's news (not the GPU shown)
    session.pump.pump()
    qtbot.waitUntil(lambda: grid.count > 0, timeout=5000)
    assert window.grid.blocks_waiting == 0
    for target in (A, B):  # the waiting block went with the next frame's
        assert grid.region.contains(block_rect(window, target))


def test_a_frame_without_the_gpu_shown_repaints_the_grid_at_once(qtbot, window) -> None:
    window, session = window
    grid, plots = watch(window)
    send(session, B, 1)
    session.pump.pump()
    qtbot.waitUntil(lambda: grid.count > 0, timeout=5000)
    assert window.grid.blocks_waiting == 0
    assert grid.region.contains(block_rect(window, B))
    assert not grid.region.contains(block_rect(window, A))
    assert plots.count == 0 and window.detail.key is not None and window.detail.key.target == A


def test_the_grid_leaves_no_second_frame_in_a_row_to_the_plots(qtbot, window) -> None:
    """The GPU shown changing every frame (Play moves the cursor each frame) refreshes the
    plots every frame: the grid's waiting blocks repaint with the second, not never."""
    window, session = window
    grid, plots = watch(window)
    send(session, A, 1)
    session.pump.pump()
    qtbot.waitUntil(lambda: plots.count > 0, timeout=5000)
    assert grid.count == 0 and window.grid.blocks_waiting == 1
    send(session, A, 2)  # the GPU shown again: its plots refresh again
    session.pump.pump()
    qtbot.waitUntil(lambda: grid.count > 0, timeout=5000)
    assert window.grid.blocks_waiting == 0
    assert grid.region.contains(block_rect(window, A))
