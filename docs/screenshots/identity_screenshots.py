"""Render docs/screenshots/identity-expiry.png and identity-tooltip.png: who the console is
signed in as on each node, until when, and the node's kill policy.

    xvfb-run -a .venv/bin/python docs/screenshots/identity_screenshots.py [OUT_DIR]

Needs a display (Xvfb): the process menu and the tooltip are popups of their
own, so the screen is grabbed, not the window. Makes a key pair with
`gpufleet token keygen`, starts two simulated Slurm nodes that take JWTs signed
by it (gpu-node-03 refuses to kill job processes, gpu-node-04 allows it), and
opens the console on a profile whose token_command is `gpufleet token issue`:
a 90-second token for alice (admin; teams ml), announced as about to expire.
Every daemon is stopped at the end.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from PySide6.QtCore import QPoint
from PySide6.QtGui import QCursor, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication, QToolTip
from shot_tools import save_image, settle, wait_until

from console.app import build_window, has_display, qt_application
from console.credentials import find_token, link_security
from console.fleet.model import NodeRecord
from console.fleet.updates import LinkState
from console.settings import load_settings

OUT = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent
ISSUER = "https://sso.example.com"
GPUFLEET = [sys.executable, "-m", "node_daemon"]


def start_node(
    workdir: Path, name: str, seed: int, allow_jobs: bool
) -> tuple[subprocess.Popen[bytes], str]:
    config = workdir / f"{name}.toml"
    config.write_text(f"[daemon]\nallow_kill_job_processes = {str(allow_jobs).lower()}\n\n"
                      f'[auth]\njwks_file = "{workdir / "keys" / "jwks.json"}"\n'
                      f'issuer = "{ISSUER}"\n', encoding="utf-8")  # fmt: skip
    ready = workdir / f"{name}.ready"
    argv = [*GPUFLEET, "daemon", "--config", str(config), "--backend", "simulated", "--gpus", "8",
            "--seed", str(seed), "--listen", "127.0.0.1:0", "--hostname", name,
            "--ready-file", str(ready), "--state-dir", str(workdir / name)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not (ready.exists() and ready.read_text(encoding="utf-8").strip()):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{name} did not start")
        time.sleep(0.05)  # a child's file: no event to wait on
    return proc, ready.read_text(encoding="utf-8").strip()


def job_gpu(node: NodeRecord) -> tuple[int, int]:
    """(GPU, row) of the first process of a Slurm job on the node."""
    for gpu, snap in sorted(node.latest.items()):
        for row, process in enumerate(snap.processes):
            if process.slurm_job_id:
                return gpu, row
    raise RuntimeError(f"{node.name} shows no Slurm job process")


def screen() -> QImage:
    return QGuiApplication.primaryScreen().grabWindow(0).toImage()


def save(image: QImage, name: str) -> None:
    save_image(image, OUT / name)


def main() -> int:
    if not has_display():
        sys.exit("needs a display: run it under xvfb-run -a")
    app = qt_application()
    with tempfile.TemporaryDirectory(prefix="gpufleet-identity-") as tmp:
        workdir = Path(tmp)
        subprocess.run([*GPUFLEET, "token", "keygen", "--out", str(workdir / "keys")], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        key = next((workdir / "keys").glob("*.private.pem"))
        nodes = [start_node(workdir, "gpu-node-03", 4, False),
                 start_node(workdir, "gpu-node-04", 6, True)]  # fmt: skip
        command = shlex.join([*GPUFLEET, "token", "issue", "--key", str(key), "--user", "alice",
                              "--role", "admin", "--groups", "ml", "--expires", "90s",
                              "--issuer", ISSUER])  # fmt: skip
        settings = workdir / "console.toml"
        targets = ", ".join(f'"{t}"' for _, t in nodes)
        settings.write_text(f'[profiles.prod]\nnodes = [{targets}]\n'
                            f"token_command = {command!r}\n", encoding="utf-8")  # fmt: skip
        profile = load_settings(settings).profile("prod")
        security = link_security(profile, find_token(profile))
        window = build_window(list(profile.nodes), security=security, profile="prod")
        try:
            shoot(app, window, [t for _, t in nodes])
        finally:
            window.session.stop()
            window.close()
            for proc, _ in nodes:
                proc.terminate()
                proc.wait(10)
    return 0


def shoot(app: QApplication, window, targets: list[str]) -> None:  # type: ignore[no-untyped-def]
    window.resize(1500, 900)
    window.move(0, 0)
    window.show()
    fleet = window.session.fleet
    wait_until(app, lambda: all(n.state is LinkState.CONNECTED and n.identity is not None
                                and len(n.latest) == 8 for n in fleet))  # fmt: skip
    wait_until(app, lambda: window.alerts.toast.isVisible(), 10)  # "Token expires in 1 min"
    node = fleet.node(targets[0])
    gpu, row = job_gpu(node)
    window.open_gpu(node.target, gpu)
    window.detail.show_gpu(node.target, gpu)
    wait_until(app, lambda: window.detail.processes.rowCount() > row, 5)
    table = window.detail.process_table
    cell = table.visualRect(table.model().index(row, 0)).center()
    menu = window.detail.process_menu(row)
    at = table.viewport().mapToGlobal(cell)
    menu.popup(QPoint(min(at.x(), 1490 - menu.sizeHint().width()), at.y()))  # all of it on screen
    wait_until(app, menu.isVisible, 5)
    settle(app, 0.5)
    save(screen().copy(0, 0, 1500, 900), "identity-expiry.png")
    menu.close()
    tile = window.grid.tile_rect(targets[1], 0)
    assert tile is not None
    where = window.grid.mapToGlobal(tile.center())
    QCursor.setPos(where)  # a tooltip hides when the pointer is elsewhere
    settle(app, 0.3)
    text = window.grid.tooltip_at(tile.center())
    QToolTip.showText(where, text, window.grid, window.grid.rect(), 60_000)
    wait_until(app, QToolTip.isVisible, 5)
    settle(app, 0.5)
    corner = window.grid.mapToGlobal(QPoint(0, 0))
    save(screen().copy(corner.x(), corner.y(), 900, 420), "identity-tooltip.png")


if __name__ == "__main__":
    sys.exit(main())
