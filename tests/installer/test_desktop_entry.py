"""The console's launcher: a valid desktop entry whose name the notifications use."""

from __future__ import annotations

import configparser
import subprocess
from xml.etree import ElementTree

from console.notify.desktop import DESKTOP_ENTRY as NOTIFICATION_DESKTOP_ENTRY
from tests.installer.tools import DESKTOP_ENTRY, INSTALLER, require_tool


def entry() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None, delimiters=("=",))
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(DESKTOP_ENTRY, encoding="utf-8")
    return parser["Desktop Entry"]


def test_desktop_file_validates() -> None:
    validate = require_tool("desktop-file-validate", "desktop-file-utils", "the .desktop entry")
    result = subprocess.run([validate, str(DESKTOP_ENTRY)], capture_output=True, text=True,
                            timeout=30, check=False)  # fmt: skip
    assert (result.returncode, result.stdout + result.stderr) == (0, "")


def test_notifications_name_this_entry_and_its_icon_is_shipped() -> None:
    # The desktop-entry hint of a notification must name an installed .desktop file.
    assert DESKTOP_ENTRY.stem == NOTIFICATION_DESKTOP_ENTRY
    assert entry()["Icon"] == DESKTOP_ENTRY.stem
    icon = INSTALLER / "desktop" / f"{entry()['Icon']}.svg"
    assert ElementTree.parse(icon).getroot().tag == "{http://www.w3.org/2000/svg}svg"


def test_launcher_starts_the_console() -> None:
    assert entry()["Exec"] == "gpufleet console"
    assert entry()["Categories"].split(";")[:2] == ["System", "Monitor"]
