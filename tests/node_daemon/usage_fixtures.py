"""The usage store the usage-accounting and sacct tests write to and read back.

Imported by its function's name, used by the fixture's: a test asks for `store`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from node_daemon.usage.store import USAGE_FILE, UsageStore


@pytest.fixture(name="store")
def empty_usage_store(tmp_path: Path) -> Iterator[UsageStore]:
    """An empty usage store in the test's own directory, closed after the test."""
    usage = UsageStore(tmp_path / USAGE_FILE)
    yield usage
    usage.close()
