"""The fake NVML the NVML benchmarks read: the library, its state file, processes it lists.

The library is the project's own test fake (tests/fake_nvml/fake_nvml.c), compiled
with the same flags as the tests do; a process finds it by its soname through
``LD_LIBRARY_PATH``, so every tool's ``pynvml`` loads it exactly as it would load
the real ``libnvidia-ml.so.1``. Optionally the library gets stubs for NVML
functions the fake lacks (they answer NOT_SUPPORTED after the fake's usual
checks), so a tool that asks for them pays a C call, as on a real driver,
instead of a Python ``FunctionNotFound`` exception.

The GPUs list real processes (``sleep`` children we start), so the tools' /proc
reads find live processes, as on a busy server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.fake_nvml.fixture import (  # noqa: E402  (the project root is on sys.path now)
    SONAME,
    SOURCE,
    FakeNvmlState,
    build_fake_nvml,
)

GIB = 1024**3
COMPILE_FLAGS = ["-shared", "-fPIC", "-O2", "-Wall", "-pthread", f"-Wl,-soname,{SONAME}"]


class FakeNvmlError(RuntimeError):
    pass


@dataclass(frozen=True)
class FakeNvml:
    """A built fake library and the state file it serves."""

    lib_dir: Path
    state_path: Path
    pids: tuple[int, ...] = ()  # the processes its GPUs list

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """`base` (default: this process's environment) with the fake first on the path."""
        env = dict(os.environ if base is None else base)
        paths = [str(self.lib_dir), *filter(None, env.get("LD_LIBRARY_PATH", "").split(":"))]
        env["LD_LIBRARY_PATH"] = ":".join(paths)
        env["FAKE_NVML_STATE"] = str(self.state_path)
        return env


def require_gcc() -> None:
    if shutil.which("gcc") is None:
        raise FakeNvmlError("gcc not found: the fake libnvidia-ml.so.1 cannot be built")


def build_library(out_dir: Path, stubs: Sequence[str] = ()) -> Path:
    """The fake library in `out_dir`; with `stubs`, plus NOT_SUPPORTED stubs of those names."""
    require_gcc()
    if not stubs:
        return build_fake_nvml(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    source = out_dir / "fake_nvml_with_stubs.c"
    source.write_text(stub_source(stubs), encoding="utf-8")
    library = out_dir / SONAME
    command = ["gcc", *COMPILE_FLAGS, "-o", str(library), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise FakeNvmlError(f"building the fake NVML with stubs failed:\n{done.stderr}")
    return library


def stub_source(names: Sequence[str]) -> str:
    """C source: the fake, then one stub per missing function name."""
    lines = [f'#include "{SOURCE}"', ""]
    for name in sorted(set(names)):
        if name.startswith("nvmlDevice"):
            body = "DEVICE_CALL(device, (void)gpu; ret = NVML_ERROR_NOT_SUPPORTED;);"
            lines.append(f"nvmlReturn_t {name}(nvmlDevice_t device) {{ {body} }}")
        else:
            body = "LOCKED(check_system() ? check_system() : NVML_ERROR_NOT_SUPPORTED);"
            lines.append(f"nvmlReturn_t {name}(void) {{ {body} }}")
    return "\n".join(lines) + "\n"


def write_state(
    path: Path, lib_dir: Path, gpus: int, pids_per_gpu: Sequence[Sequence[int]]
) -> None:
    """gpu_count GPUs with some load, each listing its processes (compute, a few GiB each)."""
    state = FakeNvmlState(path, lib_dir)
    state.set(gpu_count=gpus)
    for index in range(gpus):
        state.set_gpu(index, util_gpu=60 + index, util_mem=30, temp=55 + index, power=350_000)
        for slot, pid in enumerate(pids_per_gpu[index] if index < len(pids_per_gpu) else ()):
            state.add_process(index, pid, (slot + 1) * 4 * GIB)


@contextmanager
def sleepers(count: int) -> Iterator[list[int]]:
    """`count` idle child processes (``sleep``), killed on leaving the block."""
    procs: list[subprocess.Popen[bytes]] = []
    try:
        for _ in range(count):
            procs.append(subprocess.Popen(["sleep", "86400"], stdin=subprocess.DEVNULL))
        yield [proc.pid for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


@contextmanager
def fake_node(workdir: Path, gpus: int, processes_per_gpu: int) -> Iterator[FakeNvml]:
    """Build the fake into `workdir`, start the processes it lists, write its state."""
    library = build_library(workdir / "lib")
    with sleepers(gpus * processes_per_gpu) as pids:
        per_gpu = [pids[i * processes_per_gpu : (i + 1) * processes_per_gpu] for i in range(gpus)]
        state_path = workdir / "fake_nvml_state.txt"
        write_state(state_path, library.parent, gpus, per_gpu)
        yield FakeNvml(library.parent, state_path, tuple(pids))


def with_stubs(fake: FakeNvml, out_dir: Path, stubs: Sequence[str]) -> FakeNvml:
    """The same node (state file) served by a library with stubs for `stubs`."""
    return FakeNvml(build_library(out_dir, stubs).parent, fake.state_path, fake.pids)
