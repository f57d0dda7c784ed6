"""The Python packages `make package` writes (installer/package.sh), installed with no checkout.

`python -m build` makes the sdist and, from it, the wheel; the wheel goes into
fresh venvs: the daemon alone (`pip install gpufleet`: no Qt) serves a real
gRPC health call with the simulated backend, and with the console extra the
console finds its stylesheets and icon. pip fetches the dependencies (PyPI, or
its cache and PIP_* options): tens of seconds, hence `slow`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import node_daemon
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1 import node_pb2_grpc as pb_grpc
from tests.daemon_process import DaemonProcess
from tests.installer.built_packages import BuiltPackages, clean_env
from tests.installer.tools import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
# Modules generated from node.proto (protos/generate.sh) and files read at run time.
IN_WHEEL = (
    "gpufleet/v1/node_pb2.py", "gpufleet/v1/node_pb2_grpc.py", "gpufleet/v1/node_pb2.pyi",
    "node_daemon/__init__.py", "console/__init__.py", "resources/styles/dark.qss",
    "resources/styles/light.qss", "resources/icons/gpufleet.svg", "resources/scenarios/demo.toml",
)  # fmt: skip


@pytest.fixture
def packages(built_packages: BuiltPackages) -> tuple[Path, Path]:
    """The sdist and the wheel, as installer/package.sh builds them (conftest, once)."""
    return built_packages.sdist, built_packages.wheel


def fresh_venv(where: Path, requirement: str) -> Path:
    """A venv at WHERE with REQUIREMENT pip-installed, run from WHERE (no checkout on the path)."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True, timeout=120)
    pip = [str(where / "bin" / "python"), "-m", "pip", "install", "-q",
           "--disable-pip-version-check", requirement]  # fmt: skip
    result = subprocess.run(pip, cwd=where, env=clean_env(), capture_output=True, text=True,
                            timeout=600, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return where / "bin"


def in_venv(bin_dir: Path, code: str) -> str:
    """Run CODE with the venv's Python away from the checkout; its output."""
    result = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=bin_dir.parent,
                            env=clean_env(), capture_output=True, text=True, timeout=120,
                            check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip()


def test_version_has_one_source() -> None:
    assert node_daemon.__version__ == VERSION


def test_sdist_and_wheel_hold_the_generated_modules_and_resources(
    packages: tuple[Path, Path],
) -> None:
    sdist, wheel = packages
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        info = f"gpufleet-{VERSION}.dist-info"
        metadata = archive.read(f"{info}/METADATA").decode()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert not [name for name in IN_WHEEL if name not in names]
    assert not [name for name in names if name.startswith("tests/")]
    assert f"Version: {VERSION}\n" in metadata
    assert "gpufleet = node_daemon.commands.main:main" in entry_points
    with tarfile.open(sdist) as archive:
        members = set(archive.getnames())
    assert f"gpufleet-{VERSION}/protos/gpufleet/v1/node_pb2_grpc.py" in members
    assert f"gpufleet-{VERSION}/resources/styles/dark.qss" in members


def test_wheel_daemon_serves_grpc_health_from_a_fresh_venv(
    packages: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir = fresh_venv(tmp_path / "venv", str(packages[1]))
    where = in_venv(bin_dir, "import node_daemon, gpufleet.v1.node_pb2 as m; print(m.__file__)")
    assert where.startswith(str(tmp_path / "venv")), where
    # `pip install gpufleet` is the daemon only: a GPU server gets no Qt.
    assert in_venv(bin_dir, "import importlib.util as u; print(u.find_spec('PySide6'))") == "None"
    (tmp_path / "run").mkdir()
    daemon = DaemonProcess(tmp_path / "run", "--backend", "simulated",
                           program=(str(bin_dir / "gpufleet"),))  # fmt: skip
    daemon.start()
    try:
        with grpc.insecure_channel(daemon.address) as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
            inventory = pb_grpc.NodeServiceStub(channel).GetInventory(
                pb.GetInventoryRequest(), timeout=10
            )
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        assert len(inventory.gpus) > 0
    finally:
        daemon.stop()


def test_wheel_console_extra_finds_its_resources_in_a_fresh_venv(
    packages: tuple[Path, Path], tmp_path: Path
) -> None:
    bin_dir = fresh_venv(tmp_path / "venv", f"gpufleet[console] @ {packages[1].as_uri()}")
    # The stylesheets and the tray icon are read from beside the installed packages.
    code = (
        "from console.views.common import theme; from console.notify import tray\n"
        "print(len(theme.resolve('dark', None).stylesheet()), tray.ICON_PATH.is_file())"
    )
    found = in_venv(bin_dir, code)
    size, icon = found.split()
    assert int(size) > 1000 and icon == "True", found
    helped = subprocess.run([str(bin_dir / "gpufleet"), "console", "--help"], cwd=tmp_path,
                            env={**clean_env(), "QT_QPA_PLATFORM": "offscreen"},
                            capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert helped.returncode == 0 and "usage:" in helped.stdout, helped.stdout + helped.stderr


def test_debian_package_holds_a_venv_made_for_its_final_path(
    built_packages: BuiltPackages, tmp_path: Path
) -> None:
    """Where no container boots (tests/installer/test_in_container.py installs it), this at
    least shows what the .deb carries: a venv whose scripts name /opt/gpufleet/venv, the
    installer's own unit, rule and config, byte for byte, and the Python it needs."""
    deb = built_packages.deb
    if deb is None:
        pytest.skip(f"!!! {built_packages.deb_missing} NOT INSTALLED: the Debian package is "
                    "NOT BUILT !!!")  # fmt: skip
    assert deb.name == f"gpufleet-daemon_{VERSION}_{deb.name.rsplit('_', 1)[1]}"
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path / "root")], check=True, timeout=300)
    root = tmp_path / "root"
    script = (root / "opt/gpufleet/venv/bin/gpufleet").read_text()
    assert script.startswith("#!/opt/gpufleet/venv/bin/python"), script
    debian_python = os.path.realpath("/usr/bin/python3")  # python3.X, never python3
    venv_pythons = [os.readlink(p) for p in root.glob("opt/gpufleet/venv/bin/python*")]
    assert debian_python in venv_pythons, venv_pythons
    installer = ROOT / "installer"
    same = {
        "lib/systemd/system/gpufleet-daemon.service": installer / "systemd/gpufleet-daemon.service",
        "usr/share/polkit-1/rules.d/50-gpufleet-workloads.rules":
            installer / "polkit/50-gpufleet-workloads.rules",
        "opt/gpufleet/share/daemon.toml": installer / "config/daemon.toml",
        "opt/gpufleet/share/service-setup.sh": installer / "service-setup.sh",
    }  # fmt: skip
    assert not [path for path, source in same.items()
                if (root / path).read_bytes() != source.read_bytes()]  # fmt: skip
    assert not list(root.glob("opt/gpufleet/venv/lib/python3*/site-packages/PySide6"))
    depends = subprocess.run(["dpkg-deb", "-f", str(deb), "Depends"], capture_output=True,
                             text=True, check=True, timeout=60).stdout  # fmt: skip
    assert f"{Path(debian_python).name}," in depends, depends
