"""Sharing a moment (#30): the replay strip's Share and `gpufleet console --at --gpu`.

The first console, on test_replay.py's incident (a real daemon's GPU 1 heats to a critical
alert), shows GPU 1 at a moment of the alert and copies its Share command; that command,
run as a real process (offscreen, --screenshot), opens a second console at the same
moment with the same GPU's detail, as its log says.
"""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QGuiApplication
from PySide6.QtTest import QTest

from console.fleet.moment_link import Place, find_place, share_command, utc_text
from console.fleet.timeline import moment_text
from console.main_window import MainWindow
from tests.console.test_cli import NO_KEYRING, run
from tests.console.test_replay import (  # noqa: F401
    Incident,
    incident,
    shown_at,
    type_moment,
    window,
)

pytestmark = pytest.mark.qt_log_ignore(
    "This plugin does not support grabbing the keyboard", extend=True
)
PLACES = [Place("10.0.0.2:50051", "gpu-node-02", g) for g in range(8)] + [
    Place("10.0.0.20:50051", "gpu-node-020", g) for g in range(8)
]


def test_a_shared_moment_is_utc_to_the_millisecond_and_quoted_for_a_shell() -> None:
    at_ms = 1_796_613_120_042  # 2026-12-07T03:12:00.042Z
    assert utc_text(at_ms) == "2026-12-07T03:12:00.042+00:00"
    assert dt.datetime.fromisoformat(utc_text(at_ms)).timestamp() * 1000 == at_ms
    words = ["--profile", "night shift"]
    command = share_command(at_ms, words, PLACES[3])
    assert command == ("gpufleet console --profile 'night shift' --at "
                       "2026-12-07T03:12:00.042+00:00 --gpu gpu-node-02:3")  # fmt: skip
    assert shlex.split(command)[2:4] == words
    assert "--gpu" not in share_command(at_ms, [], None)


def test_gpu_words_find_one_gpu_or_say_why_not() -> None:
    assert find_place("gpu-node-02:3", PLACES) == PLACES[3]  # not gpu-node-020's GPU 3
    assert find_place("10.0.0.20:50051:5", PLACES) == PLACES[13]  # by the node's address
    assert find_place("node-020 7", PLACES) == PLACES[15]  # as the chooser reads it
    with pytest.raises(ValueError, match="no GPU of the fleet fits"):
        find_place("gpu-node-09:1", PLACES)
    with pytest.raises(ValueError, match="fits 2 GPUs"):
        find_place("node-02 4", PLACES)  # gpu-node-02 and gpu-node-020 both have a GPU 4


def test_share_copies_a_command_that_opens_the_same_moment_and_gpu(
    qtbot,  # type: ignore[no-untyped-def]
    window: MainWindow,  # noqa: F811
    incident: Incident,  # noqa: F811
    tmp_path: Path,
) -> None:
    window.open_gpu(incident.target, 1)
    qtbot.waitUntil(lambda: window.detail.key is not None, timeout=3000)
    type_moment(qtbot, window, incident.during)
    shown_at(qtbot, window, incident.target, incident.during)
    window.grid.setFocus()
    QTest.keyClick(window, Qt.Key.Key_L, Qt.KeyboardModifier.ControlModifier
                   | Qt.KeyboardModifier.ShiftModifier)  # fmt: skip
    qtbot.waitUntil(lambda: QGuiApplication.clipboard().text().startswith("gpufleet "),
                    timeout=3000)  # fmt: skip
    command = QGuiApplication.clipboard().text()
    assert command == (f"gpufleet console --node {incident.target} --at "
                       f"{utc_text(incident.during)} --gpu gpu-hot:1")  # fmt: skip
    said = window.statusBar().currentMessage()
    assert said.startswith(f"Copied the command that opens {moment_text(incident.during)}, "
                           "gpu-hot GPU 1")  # fmt: skip

    words = shlex.split(command)  # run as another operator would paste it
    assert words[:2] == ["gpufleet", "console"]
    shot = tmp_path / "shared.png"
    result = run(*words[1:], "--screenshot", str(shot), env=NO_KEYRING)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"showing {utc_text(incident.during)}, detail gpu-hot:1" in result.stderr
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("at", "words"),
    [("yesterday", "is not a moment"), ("2999-01-01T00:00", "is still to come")],
)
def test_a_bad_moment_is_refused_before_anything_opens(at: str, words: str) -> None:
    result = run("console", "--node", "127.0.0.1:9", "--at", at, "--screenshot", "x.png")
    assert result.returncode == 2 and "gpufleet console: --at: " in result.stderr
    assert words in result.stderr and "-2h" in result.stderr  # it names the forms


def test_a_gpu_that_fits_none_is_said_and_the_console_opens_all_the_same(
    tmp_path: Path,
    incident: Incident,  # noqa: F811
) -> None:
    shot = tmp_path / "x.png"
    result = run("console", "--node", incident.target, "--gpu", "gpu-cold:1",
                 "--screenshot", str(shot), env=NO_KEYRING)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "--gpu 'gpu-cold:1': no GPU of the fleet fits" in result.stderr
    assert "1/1 nodes connected" in result.stderr and "showing" not in result.stderr
