"""The installer's shell scripts pass shellcheck and say how they are used."""

from __future__ import annotations

import subprocess

import pytest

from tests.installer.tools import INSTALLER, require_tool

SCRIPTS = ("install.sh", "uninstall.sh", "install-console.sh")


def test_scripts_are_shellcheck_clean() -> None:
    shellcheck = require_tool("shellcheck", "shellcheck", "shell style of the installer scripts")
    # The helper the install scripts source is checked with them (-x follows it).
    # So are the package builders and the Debian package's maintainer scripts.
    packaging = ("stage-checkout.sh", "service-setup.sh", "package.sh", "deb/build-deb.sh",
                 "deb/postinst", "deb/prerm", "deb/postrm")  # fmt: skip
    scripts = [str(INSTALLER / name) for name in (*SCRIPTS, *packaging)]
    result = subprocess.run([shellcheck, "-x", *scripts], capture_output=True, text=True,
                            timeout=60, check=False)  # fmt: skip
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_scripts_explain_themselves_and_refuse_unknown_flags(script: str) -> None:
    helped = subprocess.run([INSTALLER / script, "--help"], capture_output=True, text=True,
                            timeout=30, check=True)  # fmt: skip
    assert helped.stdout.startswith("usage:") and "--prefix DIR" in helped.stdout
    wrong = subprocess.run([INSTALLER / script, "--frobnicate"], capture_output=True, text=True,
                           timeout=30, check=False)  # fmt: skip
    assert wrong.returncode != 0 and "unknown argument: --frobnicate" in wrong.stderr
