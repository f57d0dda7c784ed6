"""Fixtures of the console's tests: a keyring in memory, an isolated config directory.

No test ever touches the user's real keyring or ~/.config: `isolated_config`
points platformdirs at a temporary directory, and `memory_keyring` (or
`no_keyring`) replaces keyring's backend for the test.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

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
