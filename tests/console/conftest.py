"""Fixtures of the console's tests: a keyring in memory, an isolated config directory.

No test ever touches the user's real keyring or ~/.config: `isolated_config`
points platformdirs at a temporary directory, and `memory_keyring` (or
`no_keyring`) replaces keyring's backend for the test.
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring
import keyring.backend
import keyring.backends.fail
import pytest


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A keyring backend that keeps passwords in a dict (priority > 0: "usable")."""

    priority = 1  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.passwords: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.passwords.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.passwords[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        self.passwords.pop((service, username), None)


@pytest.fixture(autouse=True)
def collect_garbage_between_tests() -> Iterator[None]:
    """Collect a test's garbage after it, with its daemons, links and widgets gone.

    These tests run daemons, gRPC channels and Qt widgets in one process. Twice
    in full-suite runs on a loaded machine the interpreter segfaulted in a
    cyclic collection that started inside a later test's Qt event loop, while
    that test's daemon threads were serving (cause not found yet). Collecting
    here, at a quiet point, leaves less for a collection inside the next test's
    event loop; a crash here would still fail the run loudly.
    """
    yield
    gc.collect()


@pytest.fixture(autouse=True)
def no_modifier_held_after(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a Qt test, Qt is told that Ctrl, Shift, Alt and Meta are up again.

    A mouse event carries its modifiers, and QTest's Ctrl+click sends no key release:
    Qt then believes Ctrl is held for the rest of the process, and a later test's
    QTableView.selectRow toggles a selected row off (a pytest-xdist worker ran such a
    file right before test_silent_node's, whose acknowledgement then found nothing
    selected: three full runs of four). One process runs many files in turn; none
    inherits another's keys.
    """
    yield
    if not {"qtbot", "qapp"} & set(request.fixturenames):
        return
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest
    from PySide6.QtWidgets import QApplication, QWidget

    if QApplication.keyboardModifiers() == Qt.KeyboardModifier.NoModifier:
        return
    scratch = QWidget()
    for key in (Qt.Key.Key_Control, Qt.Key.Key_Shift, Qt.Key.Key_Alt, Qt.Key.Key_Meta):
        QTest.keyRelease(scratch, key)
    scratch.deleteLater()
    assert QApplication.keyboardModifiers() == Qt.KeyboardModifier.NoModifier


@pytest.fixture(autouse=True)
def isolated_config(tmp_path_factory: pytest.TempPathFactory, monkeypatch) -> Path:
    """Every console test gets its own config directory and no $GPUFLEET_TOKEN."""
    config = tmp_path_factory.mktemp("xdg-config")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    monkeypatch.delenv("GPUFLEET_TOKEN", raising=False)
    return config / "gpufleet"


@pytest.fixture(autouse=True)
def no_keyring() -> Iterator[None]:
    """By default no keyring at all (as on a server without D-Bus), never the real one.

    keyring.get_keyring() is never called here: it would look for the user's
    real backend. After the test the backend is "none" again, not the real one.
    """
    keyring.set_keyring(keyring.backends.fail.Keyring())
    yield
    keyring.set_keyring(keyring.backends.fail.Keyring())


@pytest.fixture
def memory_keyring(no_keyring: None) -> MemoryKeyring:
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    return backend


# -- the console's window on a session of the test's ---------------------------------


@pytest.fixture
def start_window(qtbot):  # type: ignore[no-untyped-def]
    """Returns start(session, sinks=(), size=None, show=True) -> MainWindow: the window
    on `session` (notifying `sinks`), resized to `size` unless None, the session started
    and the window shown unless `show` is False. Every session started is stopped after
    the test."""
    from console.main_window import MainWindow

    windows: list[MainWindow] = []

    def start(session: Any, sinks: Any = (), size: tuple[int, int] | None = None,
              show: bool = True) -> MainWindow:  # fmt: skip
        window = MainWindow(session, sinks=sinks)
        qtbot.addWidget(window)
        windows.append(window)
        if size is not None:
            window.resize(*size)
        session.start()
        if show:
            window.show()
        return window

    yield start
    for window in windows:
        window.session.stop()


# -- a console window on a real daemon, for the looks tests -------------------------

# Set for a rerun of a test file in a real X server: the outer run holds the test
# accounts (its session's shared lock), so the rerun must not wait for the exclusive one.
ACCOUNTS_HELD = "GPUFLEET_TEST_ACCOUNTS_HELD"


def rerun_inside(test_file: str, env: dict[str, str], tmp_path: Path, timeout_s: float) -> str:
    """Runs `test_file` again in a child pytest with `env`; its output, after it passed.

    The child's temporary directory lies inside this session's (`tmp_path`), so the
    workloads its daemons leave running count as this session's own, and the
    session's account cleanup ends them (tests/own_processes.py).
    """
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
            f"--basetemp={tmp_path / 'inner'}", test_file]  # fmt: skip
    run = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout_s)
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    return run.stdout


def rerun_in_xvfb(test_file: str, tmp_path: Path, what: str) -> str:
    """`test_file` again in a fresh Xvfb through Qt's xcb platform (real X input focus),
    holding this run's accounts; its output. Skipped inside that rerun, and loudly where
    Xvfb is missing (`what`: what then goes untested)."""
    from tests.console.desktop_bus import NOT_TESTED
    from tests.console.xserver import xvfb

    if os.environ.get("QT_QPA_PLATFORM") == "xcb":
        pytest.skip("already running in an X server")  # the inner run itself
    if shutil.which("Xvfb") is None:
        not_tested = NOT_TESTED.format(what="Xvfb", fix="apt-get install xvfb")
        pytest.skip(not_tested.replace("desktop notifications", what))
    with xvfb() as display:
        env = {**os.environ, "DISPLAY": display, "QT_QPA_PLATFORM": "xcb", ACCOUNTS_HELD: "1"}
        return rerun_inside(test_file, env, tmp_path, timeout_s=300)


@pytest.fixture
def held_accounts(request: pytest.FixtureRequest) -> None:
    """tests/conftest.py's workload_accounts; in an X-server rerun, those the outer run holds."""
    from tests.accounts import TEST_ACCOUNTS, account_exists

    if os.environ.get(ACCOUNTS_HELD) == "1":
        missing = [name for name in TEST_ACCOUNTS if not account_exists(name)]
        assert not missing, f"the outer run was to hold the accounts {missing}"
        return
    request.getfixturevalue("workload_accounts")


@pytest.fixture
def open_console(qtbot, start_daemon, held_accounts, monkeypatch):  # type: ignore[no-untyped-def]
    """Opens a console window as `gpufleet console` builds it (theme, wall mode, View
    menu, remembered layout: console/app.py's build_window) on a real daemon "node-a"
    started with `start_daemon`'s keywords (4 GPUs, seed 1 unless told), sized 1400x900
    (`size=None`: as its profile's layout file remembers).

    Returns tests/console/test_control_e2e.py's Console; every request the console
    sends is recorded in its `sent`. The application's theme is dark again afterwards.
    """
    import grpc
    from PySide6.QtCore import Qt

    from console.app import build_window
    from console.fleet.updates import LinkState
    from console.views.common.theme import DARK
    from console.views.window.looks import apply_to_app
    from gpufleet.v1 import node_pb2_grpc as pb_grpc
    from node_daemon.control.settings import WorkloadSettings
    from tests.console.test_control_e2e import Console

    opened: list[tuple[Any, Any]] = []

    def open_(gpus: int = 4, size: tuple[int, int] | None = (1400, 900), **daemon: Any) -> Console:
        accounts = WorkloadSettings(accounts={"team:ml": "worker"})
        if "backend" not in daemon:
            daemon.update(gpus=gpus, seed=1)
        started = start_daemon(hostname="node-a", workloads=accounts, **daemon)
        target = str(started.address)
        window = build_window([target], people=["alice", "team:ml"], profile="looks",
                              theme="dark")  # fmt: skip
        qtbot.addWidget(window)
        if size is not None:  # None: as its layout file remembers, or a first start's
            window.setWindowState(Qt.WindowState.WindowNoState)  # not the first maximised
            window.resize(*size)
        channel = grpc.insecure_channel(target)
        console = Console(window, target, pb_grpc.NodeServiceStub(channel))
        opened.append((window, channel))
        send = window.session.connections.request

        def record(target: str, what: str, call: Any, subject: str = "") -> None:
            console.sent.append(what)
            send(target, what, call, subject)

        monkeypatch.setattr(window.session.connections, "request", record)
        window.show()
        node = window.session.fleet.node(target)
        qtbot.waitUntil(
            lambda: node.state is LinkState.CONNECTED and len(node.latest) == gpus,
            timeout=15_000,
        )
        return console

    yield open_
    for window, channel in opened:
        window.session.stop()
        channel.close()
    apply_to_app(DARK)
