"""tests/workers.py: which tests share a pytest-xdist worker."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest

from tests.workers import SHARED_RESOURCES, check_units, first_units_first, unit_of


@dataclass
class Collected:
    """What check_units reads of a collected test: its id and fixtures."""

    nodeid: str
    fixturenames: tuple[str, ...] = ()


def test_a_file_is_its_own_unit_and_a_resource_s_files_are_one() -> None:
    assert unit_of("tests/node_daemon/test_x.py::test_a") == "tests/node_daemon/test_x.py"
    assert unit_of("tests/node_daemon/test_x.py::Cls::test_b[1]") == unit_of(
        "tests/node_daemon/test_x.py::test_c"
    )
    for unit, paths in SHARED_RESOURCES.values():
        assert {unit_of(f"{path}::test_a") for path in paths} == {unit}


def test_a_test_on_a_shared_resource_outside_its_files_fails_collection_saying_where() -> None:
    listed = Collected("tests/slurm/test_slurm_rest.py::test_a", ("slurm",))
    stray = Collected("tests/console/test_new.py::test_b", ("qtbot", "slurm"))
    fine = Collected("tests/console/test_new.py::test_c", ("qtbot",))
    check_units([listed, fine])  # type: ignore[list-item]
    expected = "tests/console/test_new.py with it in tests/workers.py"
    with pytest.raises(pytest.UsageError, match=re.escape(expected)):
        check_units([listed, stray])  # type: ignore[list-item]


def test_the_longest_units_go_first_and_each_file_keeps_its_order() -> None:
    ids = ["tests/a.py::t1", "tests/installer/test_packages.py::t2", "tests/a.py::t3",
           "tests/slurm/test_slurm_rest.py::t4"]  # fmt: skip
    items = [Collected(nodeid) for nodeid in ids]
    first_units_first(items)  # type: ignore[arg-type]
    assert [i.nodeid.rsplit("::", 1)[1] for i in items] == ["t2", "t4", "t1", "t3"]
