"""Fixtures shared by every test: in-process daemons on loopback, thread-leak guard."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

# Before anything imports Qt: tests render offscreen, never on a real display.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from node_daemon.backends.base import GpuBackend
from node_daemon.commands.backend_choice import simulated_backend
from node_daemon.config import DaemonConfig
from node_daemon.listen import parse_listen_address
from node_daemon.server import NodeDaemon
from tests.accounts import (
    LEFT_IN_PLACE,
    SKIP_REASON,
    TEST_ACCOUNTS,
    account_exists,
    can_create_accounts,
    local_accounts,
)
from tests.workers import check_units, first_units_first, is_worker, make_scheduler

FAST_CONFIG = DaemonConfig(listen="127.0.0.1:0", backend="simulated", sample_interval_s=0.1,
                           process_interval_s=0.2, max_streams=16)  # fmt: skip
# Threads the project names; any still alive after a test is a leak.
OUR_THREAD_PREFIXES = ("gpufleet-",)

DaemonFactory = Callable[..., NodeDaemon]
LEFT_IN_PLACE_FILE = "left-in-place.txt"


@pytest.fixture
def start_daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonFactory]:
    """Start real daemons (gRPC on loopback, port 0 unless given); all stop after the test.

    Each gets its own state directory unless `state_dir` is given; `sweep_clock` stamps
    its sweeps (a test's wall clock, to step it).
    """
    daemons: list[NodeDaemon] = []

    def start(
        backend: GpuBackend | None = None,
        sweep_clock: Callable[[], float] = time.time,
        **overrides: object,
    ) -> NodeDaemon:
        overrides.setdefault("state_dir", tmp_path_factory.mktemp("state"))
        boot_id = overrides.pop("boot_id", None)  # a boot of the test's: emulated reboots
        config = replace(FAST_CONFIG, **overrides)  # type: ignore[arg-type]
        daemon = NodeDaemon(
            config, backend or simulated_backend(config), parse_listen_address(config.listen),
            sweep_clock, boot_id=None if boot_id is None else str(boot_id),
        )  # fmt: skip
        daemon.start()
        daemons.append(daemon)
        return daemon

    yield start
    for daemon in daemons:
        daemon.stop(grace_s=0.5)


@pytest.fixture(scope="session")
def workload_accounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Local accounts for the owners tests launch workloads for (see tests/accounts.py)."""
    if not can_create_accounts():
        if all(account_exists(name) for name in TEST_ACCOUNTS):
            yield
            return
        pytest.skip(SKIP_REASON)
    # The session's daemons keep their workloads under its temporary directory.
    with local_accounts(TEST_ACCOUNTS, [tmp_path_factory.getbasetemp()]):
        yield


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    check_units(items)  # which tests share a pytest-xdist worker: tests/workers.py
    first_units_first(items)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, where it is installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    return make_scheduler(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.hookimpl(trylast=True)  # after the session fixtures' teardown, the accounts' cleanup
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A worker hands what its cleanup left in place to the controller's summary."""
    if is_worker() and LEFT_IN_PLACE:
        basetemp = session.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        (basetemp / LEFT_IN_PLACE_FILE).write_text("".join(f"{line}\n" for line in LEFT_IN_PLACE))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Say what the accounts' cleanup left in place, and why, where no capture hides it
    (under pytest-xdist: what each worker's cleanup left, from the file it wrote)."""
    lines = list(LEFT_IN_PLACE)
    if not is_worker():
        basetemp = terminalreporter.config._tmp_path_factory.getbasetemp()  # type: ignore[attr-defined]
        for said in sorted(basetemp.glob(f"popen-gw*/{LEFT_IN_PLACE_FILE}")):
            lines += said.read_text().splitlines()
    for line in lines:
        terminalreporter.write_line(f"LEFT IN PLACE: {line}", red=True, bold=True)


def _our_threads() -> set[str]:
    return {t.name for t in threading.enumerate() if t.name.startswith(OUR_THREAD_PREFIXES)}


@pytest.fixture(autouse=True)
def no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a sampler, network or RPC thread of ours running."""
    before = _our_threads()
    yield
    deadline = time.monotonic() + 5.0
    while (leaked := _our_threads() - before) and time.monotonic() < deadline:
        time.sleep(0.05)  # threads end asynchronously after stop(); nothing to wait on
    assert not leaked, f"test left threads running: {sorted(leaked)}"


@pytest.fixture(autouse=True)
def qt_garbage_in_the_gui_thread(request: pytest.FixtureRequest) -> Iterator[None]:
    """A Qt test's cycles are collected in the GUI thread, as `gpufleet console` does it.

    Otherwise a daemon's or the console's network thread may collect the last test's
    window and models mid-way through this one and destroy Qt objects the GUI thread
    is using (seen as segfaults and hangs: console/qt/gui_thread_gc.py). What the test
    left is collected at its end, here, before the next test starts its threads.
    """
    if not {"qtbot", "qapp"} & set(request.fixturenames):
        yield
        return
    from console.qt.gui_thread_gc import collect_in_gui_thread, stop_collecting_in_gui_thread

    request.getfixturevalue("qapp")
    collect_in_gui_thread()
    yield
    # What the test closed is destroyed before the next starts (test_qt_leftovers.py):
    # pytest-qt closes its widgets and asks Qt to delete them later, and no event loop
    # runs after. A worker kept every earlier Qt test's windows (some 775 widgets a
    # console window) alive to its end, and every application-wide restyle polished
    # them all: where two fresh-root runs' workers died of a segmentation fault.
    carry_out_deferred_deletions()
    stop_collecting_in_gui_thread()  # collects once more, in this (the GUI) thread
    carry_out_deferred_deletions()  # what the wrappers freed by it had asked


def carry_out_deferred_deletions() -> None:
    from PySide6.QtCore import QCoreApplication, QEvent

    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete.value)


def wait_for(predicate: Callable[[], object], timeout_s: float = 10.0, what: str = "") -> None:
    """Wait for a condition that has no event to wait on (another process, a socket)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what or predicate}")
        time.sleep(0.02)
