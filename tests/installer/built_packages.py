"""This tree's packages, built once a test session for every packaging test.

As `installer/package.sh` (what `make package` runs) builds them, from a copy of
the checkout: the sdist and the wheel (`python -m build`), then the Debian
package from the wheel (`installer/deb/build-deb.sh`, gzip: the same package to
dpkg for 2 s of CPU instead of xz's 40). Built once: test_packages, the Ansible
role's test and the container test each built them again before (about 45 s).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tests.installer.tools import ROOT

SKIP_DIRS = shutil.ignore_patterns(".git", ".venv", ".tools", "build", "dist", "*.egg-info",
                                   "__pycache__", ".*_cache")  # fmt: skip
DEB_TOOLS = ("dpkg-deb", "unshare")


@dataclass(frozen=True)
class BuiltPackages:
    sdist: Path
    wheel: Path
    # None where dpkg-deb or unshare is missing: deb_missing says which.
    deb: Path | None
    deb_missing: str = ""


def clean_env() -> dict[str, str]:
    """This process's environment minus what would let the checkout or this venv leak in."""
    return {k: v for k, v in os.environ.items()
            if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}  # fmt: skip


def build(top: Path) -> BuiltPackages:
    """The packages of a copy of this tree, made in `top`."""
    source, dist = top / "src", top / "dist"
    shutil.copytree(ROOT, source, ignore=SKIP_DIRS)
    subprocess.run([sys.executable, "-m", "build", "--outdir", str(dist), str(source)],
                   check=True, capture_output=True, timeout=600, env=clean_env())  # fmt: skip
    (sdist,) = dist.glob("gpufleet-*.tar.gz")
    (wheel,) = dist.glob("gpufleet-*-py3-none-any.whl")
    missing = [tool for tool in DEB_TOOLS if shutil.which(tool) is None]
    if missing:
        return BuiltPackages(sdist, wheel, None, ", ".join(missing))
    subprocess.run([str(source / "installer/deb/build-deb.sh"), str(wheel), str(dist)],
                   check=True, capture_output=True, timeout=600,
                   env={**clean_env(), "DEB_COMPRESSION": "gzip"})  # fmt: skip
    (deb,) = dist.glob("gpufleet-daemon_*.deb")
    return BuiltPackages(sdist, wheel, deb)


def deb_field(deb: Path, field: str) -> str:
    return subprocess.run(["dpkg-deb", "-f", str(deb), field], capture_output=True, text=True,
                          check=True).stdout.strip()  # fmt: skip


def at_version(deb: Path, version: str, work: Path) -> Path:
    """The same package at another version: unpacked, its control Version changed, rebuilt.

    What an upgrade runs (prerm upgrade, unpack, postinst configure OLD) does not
    depend on the contents, and this is quicker than building the venv again
    (build-deb.sh --version), and the same to dpkg.
    """
    tree = work / "tree"
    work.mkdir()
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True, timeout=120)
    control = tree / "DEBIAN" / "control"
    control.write_text(re.sub(r"(?m)^Version: .*$", f"Version: {version}", control.read_text()))
    new = work / f"gpufleet-daemon_{version}_amd64.deb"
    subprocess.run(["dpkg-deb", "-Zgzip", "-z1", "--root-owner-group", "-b", str(tree), str(new)],
                   check=True, timeout=300, stdout=subprocess.DEVNULL)  # fmt: skip
    shutil.rmtree(tree)
    return new
