"""py-spy for bench/daemon_streams.py: thread names of the daemon, and a CPU profile summary.

py-spy is not a project dependency: it is found on PATH, in the project's venv or
in the benchmark venv (bench/nvml_sweep_venv.py), and installed there if missing
and asked for. Attaching to another process needs ptrace rights (root, or
CAP_SYS_PTRACE, or kernel.yama.ptrace_scope 0).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from nvml_sweep_venv import Venv, ensure_venv

PROJECT_MARKERS = ("node_daemon/", "gpufleet/", "grpc/", "google/protobuf/")
_LINE = re.compile(r":\d+\)$")
_THREAD = re.compile(r"^thread \((\d+)\)(?::\s*(.*))?$")
_SERIAL = re.compile(r"[_-]\d+$")


def find_py_spy(venv_dir: Path, install: bool) -> tuple[Path | None, str]:
    """py-spy's path (or None) and where it came from / why there is none."""
    here = Path(sys.executable).parent / "py-spy"
    for candidate in (shutil.which("py-spy"), here, venv_dir / "bin" / "py-spy"):
        if candidate and Path(candidate).exists():
            return Path(candidate), f"py-spy at {candidate}"
    if not install:
        return None, "py-spy not found (pip install py-spy into a venv of your own)"
    venv: Venv = ensure_venv(
        venv_dir, ["py-spy"], lambda python: (python.parent / "py-spy").exists()
    )
    if venv.bin_dir is None:
        return None, venv.note
    return venv.bin_dir / "py-spy", f"py-spy from {venv_dir} ({venv.note})"


def thread_names(py_spy: Path, pid: int) -> dict[int, str]:
    """OS thread id -> Python thread name (empty if py-spy cannot attach)."""
    done = subprocess.run(
        [str(py_spy), "dump", "--json", "--pid", str(pid)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {}
    try:
        threads = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {}
    return {int(t["os_thread_id"]): str(t["thread_name"]) for t in threads if t.get("os_thread_id")}


def record(py_spy: Path, pid: int, seconds: float, rate: int, out: Path) -> str | None:
    """Sample `pid` for `seconds` into a raw (collapsed stacks) file; an error text or None."""
    done = subprocess.run(
        [str(py_spy), "record", "--pid", str(pid), "--duration", str(round(seconds)),
         "--rate", str(rate), "--threads", "--gil", "--format", "raw", "--output", str(out)],
        capture_output=True, text=True, timeout=seconds + 60, check=False,
    )  # fmt: skip
    if done.returncode != 0 or not out.exists():
        return (done.stderr or done.stdout or f"exit status {done.returncode}").strip()[-500:]
    return None


def _stacks(raw: str) -> Iterable[tuple[list[str], int]]:
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            yield stack.split(";"), int(count)


def _function(frame: str) -> str:
    """'name (path/to/file.py:123)' -> 'name (file.py)' with the package part kept."""
    return _LINE.sub(")", frame)


def summarize(
    raw: str, seconds: float, rate: int, names: dict[int, str], top: int = 12
) -> dict[str, object]:
    """GIL-holding samples -> share of one core per thread, leaf function, project function.

    Sampled with ``--gil``: a sample counts only where a thread holds the GIL, i.e.
    runs Python code. (py-spy's idle detection alone counts threads waiting on a
    Condition as busy; C work without the GIL, such as gRPC's core, is not seen.)
    """
    possible = seconds * rate
    by_thread: Counter[str] = Counter()
    leaf: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    for frames, count in _stacks(raw):
        thread = _THREAD.match(frames[0]) if frames else None
        if thread:
            frames = frames[1:]
            name = thread.group(2) or names.get(int(thread.group(1)), f"tid {thread.group(1)}")
            by_thread[_SERIAL.sub("", name)] += count
        total += count
        if frames:
            leaf[_function(frames[-1])] += count
        for function in {_function(f) for f in frames if any(m in f for m in PROJECT_MARKERS)}:
            inclusive[function] += count

    def pct(counter: Counter[str]) -> list[tuple[str, float]]:
        return [(name, round(100 * n / possible, 3)) for name, n in counter.most_common(top)]

    return {
        "seconds": seconds,
        "rate": rate,
        "samples": total,
        "cpu_pct_of_one_core": round(100 * total / possible, 3),
        "by_thread": pct(by_thread),
        "self": pct(leaf),
        "inclusive_project": pct(inclusive),
    }
