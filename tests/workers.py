"""How `make test` shares the suite between pytest-xdist workers (`-n 2 --dist loadfile`).

Each test file is one unit of work: its tests run on one worker, in order, so a module's
fixtures (a real Slurm accounting database, a daemon fleet, a fuzz target) are built
once. The files on one session-wide resource form one unit together, so that resource
is built once for the run rather than once a worker:

- the real Slurm cluster of tests/slurm/conftest.py (munged, slurmctld, two slurmd,
  slurmrestd: seconds to start, and two at once would compete for the same cgroups);
- the sdist, wheel and Debian package tests/installer builds (and the systemd
  containers its tests boot, which are best not booted two sets at a time).

A file that starts using such a resource without being listed here fails collection,
saying so, rather than quietly building a second one.

xdist's own `loadgroup` would do this with markers, but with pytest 9.2 it ignores
them (it rewrites `item._nodeid`, which pytest no longer reads), so the grouping is
this scheduler's: LoadScopeScheduling with a scope of our own.

Everything else that touches the whole host already tolerates a second test session
beside it (the shared test accounts, free ports, a fresh X display each, `ns_last_pid`
retries), so it needs no unit of its own.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

# A session fixture → the unit of the files that use it, and those files.
SHARED_RESOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "slurm": (
        "the Slurm cluster",
        ("tests/slurm/test_slurm_console.py", "tests/slurm/test_slurm_rest.py"),
    ),
    "built_packages": (
        "the built packages",
        (
            "tests/installer/test_ansible_role.py",
            "tests/installer/test_in_container.py",
            "tests/installer/test_packages.py",
        ),
    ),
}
# Units sent out first, as they run longest (the containers' several minutes would
# otherwise end the run alone on one worker).
FIRST = ("the built packages", "the Slurm cluster")
_UNIT_OF_FILE = {path: unit for unit, paths in SHARED_RESOURCES.values() for path in paths}


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its resource's, else its file's path."""
    path = nodeid.split("::", 1)[0]
    return _UNIT_OF_FILE.get(path, path)


def check_units(items: list[pytest.Item]) -> None:
    """Fail collection where a test uses a shared resource from a file not listed for it."""
    for item in items:
        names = getattr(item, "fixturenames", ())
        for fixture, (unit, paths) in SHARED_RESOURCES.items():
            path = item.nodeid.split("::", 1)[0]
            if fixture in names and path not in paths:
                raise pytest.UsageError(
                    f"{item.nodeid} uses the fixture {fixture!r} ({unit}): list {path} "
                    "with it in tests/workers.py SHARED_RESOURCES, so that the workers "
                    "build one, not one each"
                )


def first_units_first(items: list[pytest.Item]) -> None:
    """Put the longest units at the front of the collection (every worker alike)."""
    rank = {unit: i for i, unit in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(unit_of(item.nodeid), len(FIRST)))  # stable


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """xdist's file scope, with the shared resources' files as one unit; in
    collection order (first_units_first), not by number of tests."""
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return UnitScheduling(config, log)


def is_worker() -> bool:
    """This process is a pytest-xdist worker (the controller runs no test)."""
    return "PYTEST_XDIST_WORKER" in os.environ
