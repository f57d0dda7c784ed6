"""Which boot of the node this is: a kept NEEDS_REBOOT ends when the boot id changes."""

from __future__ import annotations

from pathlib import Path

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


def current_boot_id(path: Path = BOOT_ID) -> str:
    """The kernel's random id of this boot; "" where there is none (not Linux)."""
    try:
        return path.read_text(encoding="ascii").strip()
    except OSError:
        return ""
