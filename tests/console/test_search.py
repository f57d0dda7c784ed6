"""Finding things: the search (console.fleet.search) on a fleet model, the search box (Ctrl+F)
and the status bar's figures on the real window over real daemons, and node names, never
addresses, in the messages people read.
"""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication

from console.fleet.model import GpuKey
from console.fleet.node_names import name_nodes, spoken_name
from console.fleet.process_row import ProcessRow
from console.fleet.search import find
from console.main_window import MainWindow
from tests.console.test_control_model import GIB, NOW, A, B, fleet_with, report, reservation
from tests.console.test_main_window import black_hole, open_window, wait_connected

__all__ = ["black_hole", "open_window"]  # fixtures, used by name
CONTAINER = "3f2a9c0d1e2b4a5f6789abcdef0123456789abcdef0123456789abcdef012345"


def searchable_fleet():  # type: ignore[no-untyped-def]
    """node-1 (A) and node-2 (B), 4 GPUs each; carol runs Slurm job 4242 in a container on
    node-2's GPU 2; GPU 1 of node-1 is reserved for dmitri."""
    fleet = fleet_with(A, B, gpus=4)
    carol = ProcessRow(7, "carol", "python train.py", GIB, NOW, CONTAINER, "4242")
    report(fleet, B, 2, processes=(carol,))
    fleet.control.apply(reservation((1,), "dmitri", target=A))
    return fleet


def places(matches) -> list[tuple[str, int | None]]:  # type: ignore[no-untyped-def]
    return [(m.target, m.gpu) for m in matches]


def test_finds_a_gpu_by_node_and_index_and_by_index_alone() -> None:
    fleet = searchable_fleet()
    assert places(find(fleet, "node-2:3", NOW)) == [(B, 3)]
    assert places(find(fleet, f"{A}:1", NOW)) == [(A, 1)]  # the address works too
    assert places(find(fleet, "3", NOW))[:2] == [(A, 3), (B, 3)]  # GPU 3 of every node first
    assert find(fleet, "node-2:9", NOW) == []  # no GPU 9 there
    assert find(fleet, "  NODE-2:3 ", NOW)[0].why == "node-2:3"  # case and spaces do not matter


def test_finds_a_node_exact_first_then_by_start() -> None:
    fleet = searchable_fleet()
    assert places(find(fleet, "node-2", NOW)) == [(B, None)]
    assert places(find(fleet, "node", NOW)) == [(A, None), (B, None)]
    assert find(fleet, "node-1", NOW)[0].why == "node node-1"


def test_finds_users_jobs_containers_and_uuids() -> None:
    fleet = searchable_fleet()
    assert places(find(fleet, "carol", NOW)) == [(B, 2)]  # her process
    assert places(find(fleet, "dmitri", NOW)) == [(A, 1)]  # his reservation
    assert places(find(fleet, "4242", NOW)) == [(B, 2)]
    assert find(fleet, "4242", NOW)[0].kind == "Slurm job"
    assert places(find(fleet, "3f2a9c", NOW)) == [(B, 2)]  # a container by its start
    assert find(fleet, "3f2a9c", NOW)[0].why.startswith("container 3f2a9c")
    assert places(find(fleet, "GPU-2-1", NOW)) == [(B, 1)]  # a UUID, whole
    assert places(find(fleet, "2-3", NOW)) == [(B, 3)]  # or its start without "GPU-"
    assert find(fleet, "nobody-here", NOW) == []
    assert find(fleet, "   ", NOW) == []


def test_messages_name_nodes_and_say_when_a_node_never_answered() -> None:
    fleet = searchable_fleet()
    fleet.add_node("10.9.9.9:50051")  # watched, never answered
    text = f"reserve GPU 1 of {A} for bob: failed: {B} is not connected"
    assert (
        name_nodes(fleet, text)
        == "reserve GPU 1 of node-1 for bob: failed: node-2 is not connected"
    )
    assert name_nodes(fleet, f"node-1 ({A}) refused the token") == "node-1 refused the token"
    assert name_nodes(fleet, "silences of 10.9.9.9:50051: failed") == (
        "silences of 10.9.9.9:50051 (no answer yet): failed"
    )
    named = name_nodes(fleet, "silences of 10.9.9.9:50051: failed")
    assert name_nodes(fleet, named) == named  # named twice (a notice shown again): said once
    assert spoken_name(fleet, A) == "node-1"
    assert spoken_name(fleet, "10.9.9.9:50051") == "10.9.9.9:50051 (no answer yet)"
    assert spoken_name(fleet, "10.1.1.1:1") == "10.1.1.1:1"  # not watched: the address it is


# -- the window ----------------------------------------------------------------------------


def two_nodes(qtbot, open_window, start_daemon) -> tuple[MainWindow, str, str]:  # type: ignore[no-untyped-def]
    slurm = start_daemon(gpus=8, seed=0, hostname="gpu-node-01")  # even seeds: Slurm jobs
    docker = start_daemon(gpus=8, seed=1, hostname="gpu-node-02")  # odd: containers
    a, b = str(slurm.address), str(docker.address)
    window = open_window(a, b)
    for target in (a, b):
        wait_connected(qtbot, window, target)
    window.activateWindow()
    return window, a, b


def search_for(qtbot, window: MainWindow, text: str) -> None:  # type: ignore[no-untyped-def]
    """Ctrl+F, then type `text`, as a person's keyboard does."""
    QTest.keyClick(window, Qt.Key.Key_F, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(
        lambda: QApplication.focusWidget() is window.grid_part.search.line, timeout=5_000
    )
    QTest.keyClicks(window.grid_part.search.line, text)


def shows(window: MainWindow, target: str, gpu: int) -> bool:
    """The GPU is selected, has the grid's focus ring, and the detail shows it."""
    return (
        window.grid.selected == (target, gpu)
        and window.grid.focus_tile == (target, gpu)
        and window.detail.key == GpuKey(target, gpu)
    )


def test_search_box_finds_each_kind_and_selects_it(qtbot, open_window, start_daemon) -> None:
    window, a, b = two_nodes(qtbot, open_window, start_daemon)
    search_for(qtbot, window, "gpu-node-02:5")
    assert shows(window, b, 5)
    assert window.grid_part.search.result.text() == "1 of 1: gpu-node-02:5"
    # A node: its first GPU.
    window.grid_part.search.line.clear()
    search_for(qtbot, window, "gpu-node-01")
    assert shows(window, a, 0)
    # A Slurm job of the Slurm node, a container and a user of the other, a UUID.
    fleet = window.session.fleet
    job = next(p.slurm_job_id for s in fleet.node(a).latest.values() for p in s.processes
               if p.slurm_job_id)  # fmt: skip
    box, _ = next((p.container_id, s.index) for s in fleet.node(b).latest.values()
                        for p in s.processes if p.container_id)  # fmt: skip
    user, _ = next((p.user, s.index) for s in fleet.node(b).latest.values()
                          for p in s.processes if p.user)  # fmt: skip
    info = fleet.node(b).info
    assert info is not None and job is not None and box is not None and user is not None
    for text, kind in ((job, "Slurm job"), (box[:8], "container"), (user, "user"),
                       (info.gpus[6].uuid[:14], "UUID")):  # fmt: skip
        window.grid_part.search.line.clear()
        search_for(qtbot, window, text)
        current = window.grid_part.search.current
        assert current is not None and current.kind == kind, (text, current)
        assert current.gpu is not None and shows(window, current.target, current.gpu)
        if kind == "container":
            assert current.target == b
    assert window.grid_part.search.current is not None and window.grid_part.search.current.gpu == 6


def test_enter_goes_to_the_next_match_and_round_again(qtbot, open_window, start_daemon) -> None:
    window, a, b = two_nodes(qtbot, open_window, start_daemon)
    search_for(qtbot, window, "4")  # GPU 4 of each node (then any id starting with 4)
    assert shows(window, a, 4) and window.grid_part.search.result.text().startswith("1 of ")
    QTest.keyClick(window.grid_part.search.line, Qt.Key.Key_Return)
    assert shows(window, b, 4) and window.grid_part.search.result.text().startswith("2 of ")
    count = len(window.grid_part.search.matches)
    for _ in range(count - 1):
        QTest.keyClick(window.grid_part.search.line, Qt.Key.Key_Return)
    assert window.grid_part.search.result.text().startswith(
        f"1 of {len(window.grid_part.search.matches)}"
    )
    # Esc: back in the grid, on the match, where the arrows go on from.
    QTest.keyClick(window.grid_part.search.line, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: QApplication.focusWidget() is window.grid, timeout=5_000)
    assert window.grid.focus_tile == window.grid.selected


def test_no_match_says_so_and_selects_nothing_new(qtbot, open_window, start_daemon) -> None:
    window, a, _b = two_nodes(qtbot, open_window, start_daemon)
    window.grid.select(a, 2)
    search_for(qtbot, window, "zqx")  # not even its first letter matches anything
    assert window.grid_part.search.result.text() == "nothing matches “zqx”"
    assert window.grid_part.search.line.property("noMatch") is True
    assert window.grid.selected == (a, 2)


def test_status_bar_hottest_names_the_gpu_and_a_click_selects_it(
    qtbot, open_window, start_daemon
) -> None:
    window, a, b = two_nodes(qtbot, open_window, start_daemon)
    hottest = window.grid_part.summary.parts["hottest"]
    qtbot.waitUntil(lambda: hottest.isVisible() and " on " in hottest.text(), timeout=5_000)
    found = re.fullmatch(r"hottest \d+ °C on (gpu-node-0[12]):(\d)", hottest.text())
    assert found is not None, hottest.text()
    target = a if found.group(1) == "gpu-node-01" else b
    qtbot.mouseClick(hottest, Qt.MouseButton.LeftButton)
    assert shows(window, target, int(found.group(2)))


def test_status_bar_names_nodes_down_and_opens_the_inventory(
    qtbot, open_window, start_daemon, black_hole
) -> None:
    daemon = start_daemon(gpus=2, hostname="gpu-node-01")
    window = open_window(str(daemon.address), black_hole)
    wait_connected(qtbot, window, str(daemon.address))
    connected = window.grid_part.summary.parts["connected"]
    qtbot.waitUntil(lambda: "1 down: " in connected.text(), timeout=5_000)
    assert connected.text() == f"1/2 nodes connected · 1 down: {black_hole}"
    qtbot.mouseClick(connected, Qt.MouseButton.LeftButton)
    assert window.tabs.currentWidget() is window.reports.inventory_panel


def test_messages_in_the_window_name_the_node(qtbot, open_window, start_daemon, black_hole) -> None:
    daemon = start_daemon(gpus=2, hostname="gpu-node-01")
    target = str(daemon.address)
    window = open_window(target, black_hole)
    wait_connected(qtbot, window, target)
    # Real actions: on the answering node, the answer names it; on the node that never
    # answered, its address stays, and the message says it never answered.
    bar = window.statusBar()
    until = NOW + 3_600_000
    window.session.control.reserve(target, [0], "bob", until, "density test")
    qtbot.waitUntil(lambda: bar.currentMessage().startswith("reserve GPU 0 of "), timeout=10_000)
    assert bar.currentMessage().startswith("reserve GPU 0 of gpu-node-01 for bob: ")
    assert target not in bar.currentMessage()
    window.session.control.reserve(black_hole, [0], "bob", until, "density test")
    qtbot.waitUntil(lambda: black_hole in bar.currentMessage(), timeout=10_000)
    message = bar.currentMessage()
    assert message.startswith(f"reserve GPU 0 of {black_hole} (no answer yet) for bob: ")
    assert message.count("no answer yet") == 1, message
