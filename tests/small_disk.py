"""A real, small tmpfs to fill up: how a nearly full state disk is tested (root only)."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SKIP_REASON = "SKIPPED LOUDLY: filling a disk needs root to mount a small tmpfs"


class SmallDisk:
    """A tmpfs of a few MiB at `path`; `fill()` takes every free byte, `free()` gives it back."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._filler = path / ".filler"

    def fill(self) -> None:
        fd = os.open(self._filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            with contextlib.suppress(OSError):  # ENOSPC: full, as wanted
                while True:
                    os.write(fd, b"\0" * 65536)
            with contextlib.suppress(OSError):
                while True:
                    os.write(fd, b"\0" * 512)
        finally:
            os.close(fd)

    def free(self) -> None:
        self._filler.unlink(missing_ok=True)


@contextlib.contextmanager
def small_disk(size: str = "8m") -> Iterator[SmallDisk]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip(SKIP_REASON)
    mountpoint = Path(tempfile.mkdtemp(prefix="gpufleet-small-disk-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs",
                    str(mountpoint)], check=True)  # fmt: skip
    try:
        yield SmallDisk(mountpoint)
    finally:
        subprocess.run(["umount", "--lazy", str(mountpoint)], check=False)
        mountpoint.rmdir()
