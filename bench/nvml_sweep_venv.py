"""A separate virtual environment for tools the benchmarks compare against or profile with.

nvitop, gpustat and py-spy are not the project's dependencies: they go into a venv
of their own (default under the system's temp directory), never into the
project's. It is created on first use and reused while it has what is asked for.
When it cannot be made (no network, no index), the caller is told why and carries
on without it.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

DEFAULT_VENV = Path(tempfile.gettempdir()) / "gpufleet-bench-venv"


@dataclass(frozen=True)
class Venv:
    """The venv's interpreter, or None and why not."""

    python: Path | None
    note: str

    @property
    def bin_dir(self) -> Path | None:
        return None if self.python is None else self.python.parent


def venv_python(path: Path) -> Path:
    return path / "bin" / "python"


def imports_ok(python: Path, modules: Sequence[str]) -> bool:
    """Can `python` import every one of `modules`?"""
    if not python.exists():
        return False
    code = "import " + ", ".join(modules)
    done = subprocess.run([str(python), "-c", code], capture_output=True, timeout=120, check=False)
    return done.returncode == 0


def ensure_venv(
    path: Path,
    packages: Sequence[str],
    ready: Callable[[Path], bool],
    timeout_s: float = 600.0,
) -> Venv:
    """A venv at `path` where `ready(python)` holds, pip-installing `packages` if needed."""
    python = venv_python(path)
    if ready(python):
        return Venv(python, f"reused {path}")
    try:
        if not python.exists():
            base = getattr(sys, "_base_executable", sys.executable)
            _run([base, "-m", "venv", str(path)], timeout_s)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        _run([*pip, "--timeout", "15", "--retries", "1", *packages], timeout_s)
    except (OSError, subprocess.SubprocessError) as exc:
        return Venv(None, f"could not install {' '.join(packages)} into {path}: {_why(exc)}")
    if not ready(python):
        return Venv(None, f"{path} was set up but still lacks {' '.join(packages)}")
    return Venv(python, f"created {path} with {' '.join(packages)}")


def _run(command: Sequence[str], timeout_s: float) -> None:
    subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=True)


def _why(exc: BaseException) -> str:
    if isinstance(exc, subprocess.CalledProcessError):
        lines = [line for line in (exc.stderr or "").splitlines() if line.strip()]
        relevant = [line for line in lines if "ERROR" in line] or lines
        return relevant[-1].strip() if relevant else f"exit status {exc.returncode}"
    if isinstance(exc, subprocess.TimeoutExpired):
        return f"timed out after {exc.timeout:.0f} s"
    return str(exc)
