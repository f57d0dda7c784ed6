"""Build the fake libnvidia-ml.so.1 and drive it from tests.

`fake_nvml_lib` compiles `fake_nvml.c` once per session; `fake_nvml` gives each test
a fresh state file (see the comment at the top of `fake_nvml.c` for its format) and
loads the library into this process before nvidia-ml-py does, so pynvml's
``CDLL("libnvidia-ml.so.1")`` finds it by its soname and the real ctypes path runs.
A subprocess (a daemon under test) finds it with ``LD_LIBRARY_PATH=state.lib_dir``.

`unloadable_nvml_dir` is the other side: a directory whose libnvidia-ml.so.1 the
dynamic loader finds but cannot load, so ``CDLL("libnvidia-ml.so.1")`` fails as on
a server without the NVIDIA driver, even on a host that has one installed.

`sleeper` is a real process for the fake to list as a GPU's process.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

SOURCE = Path(__file__).with_name("fake_nvml.c")
SONAME = "libnvidia-ml.so.1"
ABSENT_SONAME = "libgpufleet_absent.so"


def _gcc() -> str:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip(
            "!!! gcc NOT FOUND: the fake libnvidia-ml.so.1 cannot be built, so the NVML "
            "backend is NOT TESTED. Install gcc (the project's test command does). !!!"
        )
    return gcc


def _compile(out_dir: Path, soname: str, source: str | Path, *extra: str) -> Path:
    """Build a shared library named `soname` in `out_dir` from a file or C text."""
    out_dir.mkdir(parents=True, exist_ok=True)
    library = out_dir / soname
    command = [_gcc(), "-shared", "-fPIC", "-O2", "-Wall", "-pthread", f"-Wl,-soname,{soname}"]
    command += ["-o", str(library)]
    text = source if isinstance(source, str) else None
    command += ["-x", "c", "-"] if text is not None else [str(source)]
    result = subprocess.run(
        [*command, *extra], input=text, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise RuntimeError(f"building {soname} failed:\n{result.stderr}")
    return library


def build_fake_nvml(out_dir: Path) -> Path:
    """Compile the fake NVML into `out_dir`; return the library's path."""
    return _compile(out_dir, SONAME, SOURCE)


def build_unloadable_nvml(out_dir: Path) -> Path:
    """A libnvidia-ml.so.1 in `out_dir` that needs a library which does not exist.

    The dynamic loader finds it first on ``LD_LIBRARY_PATH`` and then fails on the
    missing dependency; it does not go on to look for another libnvidia-ml.so.1, so
    loading NVML fails even where a real driver is installed. Returns `out_dir`.
    """
    _compile(out_dir, ABSENT_SONAME, "int gpufleet_absent;\n")
    needs_it = "extern int gpufleet_absent;\nint nvmlStub(void) { return gpufleet_absent; }\n"
    link = ["-Wl,--no-as-needed", f"-L{out_dir}", f"-l:{ABSENT_SONAME}"]
    _compile(out_dir, SONAME, needs_it, *link)
    (out_dir / ABSENT_SONAME).unlink()
    return out_dir


class FakeNvmlState:
    """The fake NVML's state file. Every change rewrites it atomically.

    Keys and values are those documented in `fake_nvml.c`; a value of None removes
    the key, so the fake serves its default again.
    """

    def __init__(self, path: Path, lib_dir: Path, lib: ctypes.CDLL | None = None) -> None:
        self.path = path
        self.lib_dir = lib_dir
        self._lib = lib
        self._values: dict[str, str] = {}
        self._xids: dict[int, list[int]] = {}
        self._mtime_ns = 0
        self.write()

    def set(self, **values: object) -> FakeNvmlState:
        """Node keys: ``set(driver_version="550.54.15", gpu_count=2)``."""
        return self._update(dict(values))

    def set_gpu(self, index: int, **fields: object) -> FakeNvmlState:
        """GPU keys: ``set_gpu(0, temp=45, power=120000)``."""
        return self._update({f"gpu.{index}.{key}": value for key, value in fields.items()})

    def unsupported(self, index: int, *fields: str) -> FakeNvmlState:
        """Make the calls that serve these fields of GPU `index` answer NOT_SUPPORTED."""
        return self.set_gpu(index, **dict.fromkeys(fields, "unsupported"))

    def fail(self, index: int, field: str, code: int) -> FakeNvmlState:
        """Make the call that serves `field` of GPU `index` answer nvmlReturn_t `code`."""
        return self.set_gpu(index, **{field: f"error:{code}"})

    def lose_gpu(self, index: int) -> FakeNvmlState:
        return self.set_gpu(index, lost=1)

    def recover_gpu(self, index: int) -> FakeNvmlState:
        return self.set_gpu(index, lost=None)

    def add_process(
        self, index: int, pid: int, memory: int | None, kind: str = "compute"
    ) -> FakeNvmlState:
        """List `pid` on GPU `index` (`memory` None: NVML_VALUE_NOT_AVAILABLE)."""
        label = f"{pid}" if kind == "compute" else f"{pid}.{kind}"
        entry = f"{pid} {'na' if memory is None else memory} {kind}"
        return self.set_gpu(index, **{f"process.{label}": entry})

    def add_process_util(
        self, index: int, pid: int, sm_pct: int, timestamp_us: int | None = None
    ) -> FakeNvmlState:
        """A nvmlDeviceGetProcessUtilization sample of `pid` on GPU `index` (timestamp
        None: the time of each call, so every call returns it)."""
        entry = f"{pid} {sm_pct}" + ("" if timestamp_us is None else f" {timestamp_us}")
        return self.set_gpu(index, **{f"process_util.{pid}": entry})

    def remove_process(self, index: int, pid: int) -> FakeNvmlState:
        keys = [k for k in self._values if k.startswith(f"gpu.{index}.process.{pid}")]
        return self._update(dict.fromkeys(keys))

    def set_link(self, index: int, link: int, **fields: object) -> FakeNvmlState:
        """NVLink link keys: ``set_link(0, 3, state="down", crc_flit=12)``."""
        return self.set_gpu(index, **{f"nvlink.{link}.{key}": v for key, v in fields.items()})

    def set_nvlinks(self, index: int, links: int, down: tuple[int, ...] = ()) -> FakeNvmlState:
        """GPU `index` has `links` NVLink links, those in `down` down, the others up."""
        self.set_gpu(index, nvlink_links=links)
        states = {f"nvlink.{link}.state": "down" if link in down else None for link in range(links)}
        return self.set_gpu(index, **states)

    def add_mig(self, index: int, slot: int, profile: str, **fields: object) -> FakeNvmlState:
        """Turn MIG on for GPU `index` with a MIG device at index `slot`:
        ``add_mig(0, 0, "1g.10gb", gi=9, memory_used=GIB)``."""
        keys = {f"mig.{slot}.{key}": value for key, value in fields.items()}
        return self.set_gpu(index, mig=1, **{f"mig.{slot}.profile": profile}, **keys)

    def add_mig_process(
        self, index: int, slot: int, pid: int, memory: int | None, kind: str = "compute"
    ) -> FakeNvmlState:
        """List `pid` on MIG device `slot` of GPU `index` (and so on the GPU too)."""
        entry = f"{pid} {'na' if memory is None else memory} {kind}"
        return self.set_gpu(index, **{f"mig.{slot}.process.{pid}": entry})

    def push_xid(self, index: int, xid: int) -> FakeNvmlState:
        """One more Xid event on GPU `index`, delivered once to open event sets."""
        self._xids.setdefault(index, []).append(xid)
        return self.set_gpu(index, xids=" ".join(map(str, self._xids[index])))

    def init_count(self) -> int:
        """nvmlInit calls the fake has seen that no nvmlShutdown has matched yet."""
        assert self._lib is not None, "no library loaded"
        return int(self._lib.fakeNvmlInitCount())

    def _update(self, values: dict[str, object]) -> FakeNvmlState:
        for key, value in values.items():
            if value is None:
                self._values.pop(key, None)
            else:
                self._values[key] = str(value)
        self.write()
        return self

    def write(self) -> None:
        """Write temp + rename, with an mtime that always moves forward.

        The fake notices a change by inode, size and mtime; forcing a fresh mtime
        means two quick writes of the same size can never look alike.
        """
        text = "".join(f"{key} = {value}\n" for key, value in self._values.items())
        temp = self.path.with_name(self.path.name + ".tmp")
        temp.write_text("# fake NVML state, written by tests/fake_nvml/fixture.py\n" + text)
        self._mtime_ns = max(time.time_ns(), self._mtime_ns + 1_000_000)
        os.utime(temp, ns=(self._mtime_ns, self._mtime_ns))
        os.replace(temp, self.path)


@pytest.fixture(scope="session")
def fake_nvml_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fake libnvidia-ml.so.1, compiled once per test session."""
    return build_fake_nvml(tmp_path_factory.mktemp("fake_nvml"))


@pytest.fixture(scope="session")
def unloadable_nvml_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory for ``LD_LIBRARY_PATH`` in which NVML is found but cannot load."""
    return build_unloadable_nvml(tmp_path_factory.mktemp("unloadable_nvml"))


@pytest.fixture
def fake_nvml(
    fake_nvml_lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[FakeNvmlState]:
    """A fresh fake NVML state, with the fake library loaded ahead of pynvml."""
    state_path = tmp_path / "fake_nvml_state.txt"
    monkeypatch.setenv("FAKE_NVML_STATE", str(state_path))
    lib = ctypes.CDLL(str(fake_nvml_lib), mode=ctypes.RTLD_GLOBAL)
    _check_pynvml_uses(lib)
    lib.fakeNvmlReset()
    yield FakeNvmlState(state_path, fake_nvml_lib.parent, lib)
    lib.fakeNvmlReset()


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    """A live process (`sleep 300`) to list as a GPU's process: the daemon reads its
    details from /proc, so the pid must be real. Killed after the test."""
    proc = subprocess.Popen(["sleep", "300"])
    yield proc
    proc.kill()
    proc.wait()


def _check_pynvml_uses(lib: ctypes.CDLL) -> None:
    """pynvml keeps the first library it loaded: make sure that is the fake."""
    import pynvml

    loaded = pynvml.nvmlLib
    if loaded is not None and loaded._handle != lib._handle:
        raise RuntimeError(
            "pynvml already loaded another libnvidia-ml.so.1 in this process; "
            "the fake must be loaded first (use the fake_nvml fixture before any NVML call)"
        )
