"""A console for 1,250 nodes needs more than Debian's 1,024 open files: it raises its
own soft limit within the hard limit, and says so when the hard limit is too low.

Each case runs in a child process: the limits it sets are its own, not the test run's.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_child(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], cwd=REPO, capture_output=True,
        text=True, timeout=60, check=False,
    )  # fmt: skip


def test_the_soft_limit_rises_to_what_the_nodes_need() -> None:
    child = run_child("""
        import resource
        from console.connections.open_files import allow_open_files, needed_for
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        assert hard == resource.RLIM_INFINITY or hard >= needed_for(1250), hard
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))
        limit = allow_open_files(1250)
        print(limit, resource.getrlimit(resource.RLIMIT_NOFILE)[0], needed_for(1250))
    """)
    assert child.returncode == 0, child.stderr
    limit, soft, needed = map(int, child.stdout.split())
    assert limit == soft == needed == 2756  # 2 a node and 256 besides


def test_a_limit_high_enough_is_left_alone() -> None:
    child = run_child("""
        import resource
        from console.connections.open_files import allow_open_files
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (5000, hard))
        print(allow_open_files(100), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    """)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["5000", "5000"]  # never lowered


def test_a_hard_limit_too_low_is_used_and_said() -> None:
    child = run_child("""
        import logging, resource
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
        from console.connections.open_files import allow_open_files
        resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 2000))
        print(allow_open_files(1250), resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    """)
    assert child.returncode == 0, child.stderr
    assert child.stdout.split() == ["2000", "2000"]
    assert "open files are limited to 2000 (hard limit): 1250 nodes need about 2756" in (
        child.stderr
    )
    assert "LimitNOFILE" in child.stderr  # what the admin raises
