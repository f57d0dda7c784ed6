"""Running a repair command: no shell, a timeout, its output in the log."""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Mapping, Sequence

from node_daemon.healing.model import DONE

log = logging.getLogger(__name__)

MAX_LOGGED = 2000  # characters of a command's output in the log


def expand(command: Sequence[str], values: Mapping[str, object]) -> list[str]:
    """The command with {index}, {uuid}, {pci_bus_id}, {host} filled in (settings checked
    that it names no others)."""
    return [part.format_map({k: "" if v is None else v for k, v in values.items()})
            for part in command]  # fmt: skip


def run_command(argv: Sequence[str], timeout_s: float, what: str) -> str:
    """Run `argv`; "done" when it exits 0, else "failed: why"."""
    log.info("self-healing: %s: running %s", what, argv)
    try:
        result = subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except FileNotFoundError:
        return f"failed: {argv[0]} not found"
    except PermissionError:
        return f"failed: {argv[0]} may not be run by the daemon's account"
    except OSError as exc:
        return f"failed: {argv[0]}: {exc.strerror or exc}"
    except subprocess.TimeoutExpired:
        return f"failed: {argv[0]} did not finish within {timeout_s:g} s (killed)"
    output = (result.stdout + result.stderr).strip()
    log.info("self-healing: %s: %s exited %d%s", what, argv[0], result.returncode,
             f": {output[:MAX_LOGGED]}" if output else "")  # fmt: skip
    if result.returncode != 0:
        last = output.splitlines()[-1][:200] if output else "no output"
        return f"failed: {argv[0]} exited {result.returncode}: {last}"
    return DONE
