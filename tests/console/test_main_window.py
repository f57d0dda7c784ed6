"""The console's window against a real daemon, offscreen, through pytest-qt."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from PySide6.QtCore import QPoint, Qt, QTimer

from console.fleet.columns import column
from console.fleet.updates import LinkState
from console.main_window import MainWindow
from console.qt import roles
from console.session import ConsoleSession
from console.views.grid.tile_colors import TEMPERATURE_STOPS, UTILISATION_STOPS, scale_color
from gpufleet.v1.gpu_metrics import TEMP_GPU_C, UTIL_GPU_PCT
from node_daemon.backends.simulated import SimulatedBackend
from node_daemon.backends.simulated.scenario import Scenario, ScenarioEvent


@pytest.fixture
def open_window(start_window) -> Callable[..., MainWindow]:  # type: ignore[no-untyped-def]
    def open_(*targets: str) -> MainWindow:
        return start_window(ConsoleSession(targets), size=(1400, 800))

    return open_


def wait_connected(qtbot, window: MainWindow, target: str, samples: int = 3) -> None:
    node = window.session.fleet.node(target)
    qtbot.waitUntil(
        lambda: node.state is LinkState.CONNECTED and node.samples_received >= samples,
        timeout=15_000,
    )


def test_tiles_for_every_gpu_and_click_shows_live_plots(qtbot, open_window, start_daemon) -> None:
    daemon = start_daemon(gpus=4, hostname="node-a")
    target = str(daemon.address)
    window = open_window(target)
    wait_connected(qtbot, window, target)
    assert window.session.items.rowCount(window.session.items.node_index(target)) == 4
    tile = window.grid.tile_rect(target, 2)
    assert tile is not None and window.grid.tile_rect(target, 4) is None
    with qtbot.waitSignal(window.grid.gpuSelected, timeout=2000) as selected:
        qtbot.mouseClick(window.grid, Qt.MouseButton.LeftButton, pos=tile.center())
    assert selected.args == [target, 2]
    assert "node-a · GPU 2" in window.detail.title.text()
    curve = window.detail.plots.curves[TEMP_GPU_C]
    ring = window.session.fleet.node(target).ring

    def plotted() -> int:
        x, _ = curve.getOriginalDataset()
        return 0 if x is None else len(x)

    qtbot.waitUntil(lambda: plotted() >= 5, timeout=10_000)
    window.session.pump.stop()  # freeze the frame so plot and model can be compared
    window.detail.refresh()
    x, y = curve.getOriginalDataset()
    times, temps = ring.series(2, column(TEMP_GPU_C))
    np.testing.assert_array_equal(x, times)
    np.testing.assert_array_equal(y, temps)


@pytest.mark.parametrize(
    ("mode", "metric", "stops"),
    [
        ("temperature", TEMP_GPU_C, TEMPERATURE_STOPS),
        ("utilisation", UTIL_GPU_PCT, UTILISATION_STOPS),
    ],
)
def test_tile_colour_follows_the_chosen_metric(
    qtbot, open_window, start_daemon, mode, metric, stops
) -> None:
    daemon = start_daemon(gpus=2)
    target = str(daemon.address)
    window = open_window(target)
    window.grid_part.color_by.setCurrentText(mode)
    wait_connected(qtbot, window, target)
    window.session.pump.stop()
    image = window.grid.grab().toImage()
    for gpu in range(2):
        shown = roles.value(window.session.items.gpu_index(target, gpu), metric)
        center = window.grid.tile_rect(target, gpu).center()
        painted = image.pixelColor(center * image.devicePixelRatio())
        expected = scale_color(shown, stops)
        assert abs(painted.red() - expected.red()) <= 2, (shown, painted.name(), expected.name())
        assert abs(painted.blue() - expected.blue()) <= 2


def test_lost_gpu_is_marked_and_counted(qtbot, open_window, start_daemon) -> None:
    lost_at_start = Scenario((ScenarioEvent(0.05, 1, "lost"),))
    daemon = start_daemon(backend=SimulatedBackend(gpu_count=2, scenario=lost_at_start, step_s=0.1))
    target = str(daemon.address)
    window = open_window(target)
    wait_connected(qtbot, window, target)
    gpu = window.session.items.gpu_index(target, 1)
    qtbot.waitUntil(lambda: gpu.data(roles.HEALTH_ROLE) == "lost", timeout=5000)
    qtbot.waitUntil(lambda: "1 lost" in window.grid_part.summary.text(), timeout=5000)
    assert roles.value(gpu, TEMP_GPU_C) is None  # unknown, not 0


def test_unreachable_node_shows_its_state(qtbot, open_window) -> None:
    window = open_window("127.0.0.1:1")
    node = window.session.items.node_index("127.0.0.1:1")
    qtbot.waitUntil(
        lambda: node.data(roles.LINK_STATE_ROLE) is LinkState.UNREACHABLE, timeout=10_000
    )
    assert "0/1 nodes connected" in window.grid_part.summary.text()
    assert "UNAVAILABLE" in node.data(Qt.ItemDataRole.ToolTipRole)


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A TCP port that accepts connections and never answers: a hung daemon."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_gui_thread_never_waits_on_the_network(qtbot, open_window, black_hole) -> None:
    window = open_window(black_hole, "127.0.0.1:1")
    beats: list[float] = []
    heartbeat = QTimer()
    heartbeat.setObjectName("test-heartbeat")
    heartbeat.timeout.connect(lambda: beats.append(time.monotonic()))
    heartbeat.start(10)
    # A hung daemon holds its call until the 5 s deadline; the GUI must not.
    qtbot.waitUntil(lambda: len(beats) >= 150, timeout=10_000)
    heartbeat.stop()
    worst_gap = max(np.diff(beats))
    assert worst_gap < 0.5, f"GUI thread stalled {worst_gap:.2f} s"
    assert window.session.fleet.node(black_hole).state is not LinkState.CONNECTED


def test_window_click_outside_tiles_selects_nothing(qtbot, open_window, start_daemon) -> None:
    daemon = start_daemon(gpus=1)
    window = open_window(str(daemon.address))
    wait_connected(qtbot, window, str(daemon.address))
    qtbot.mouseClick(window.grid, Qt.MouseButton.LeftButton, pos=QPoint(2, 2))
    assert window.grid.selected is None and window.detail.key is None


def test_group_by_slurm_job_and_container(qtbot, open_window, start_daemon) -> None:
    slurm_node = start_daemon(gpus=8, seed=0)  # even seeds play Slurm nodes
    docker_node = start_daemon(gpus=8, seed=1)  # odd seeds run containers
    targets = (str(slurm_node.address), str(docker_node.address))
    window = open_window(*targets)
    for target in targets:
        wait_connected(qtbot, window, target)
    window.grid_part.group_by.setCurrentText("Slurm job")
    titles = {b.group.title: b for b in window.grid.blocks}
    jobs = [t for t in titles if t.startswith("Slurm job ")]
    assert jobs and set(jobs) <= {"Slurm job 41000", "Slurm job 41001"}
    slurm_row = window.session.items.node_row(targets[0])
    for title in jobs:  # job 41000 holds GPUs 0-3 of the Slurm node, 41001 GPUs 4-7
        first = 0 if title.endswith("41000") else 4
        assert {m for m in titles[title].group.members} <= {
            (slurm_row, g) for g in range(first, first + 4)
        }
    outside = titles["GPUs in no Slurm job"].group.members
    assert {(window.session.items.node_row(targets[1]), g) for g in range(8)} <= set(outside)
    # A click in the grouped view still opens the right GPU.
    member = titles[jobs[0]].group.members[0]
    tile = titles[jobs[0]].tiles[0]
    qtbot.mouseClick(window.grid, Qt.MouseButton.LeftButton, pos=tile.center())
    assert window.grid.selected == (targets[0], member[1])
    window.grid_part.group_by.setCurrentText("container")
    containers = [b for b in window.grid.blocks if b.group.title.startswith("container ")]
    assert containers and all(r == window.session.items.node_row(targets[1])
                              for b in containers for r, _ in b.group.members)  # fmt: skip
