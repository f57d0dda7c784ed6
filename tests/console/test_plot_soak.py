"""Keeps the PySide6 choice honest: many curves repainting must not crash Python."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("soak_plots.py")


@pytest.mark.slow
def test_64_curves_repaint_without_crashing() -> None:
    # In a child: the known failure is an interpreter abort, not an exception.
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "64", "600", "40"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "soak ok: 64 curves x 600 points x 40 frames" in result.stdout
