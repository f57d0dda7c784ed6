"""Benchmark: what one node's new inventory costs the console's GUI thread among 1,000 GPUs.

    python bench/inventory_churn.py [--nodes 125] [--changes 40] [--out FILE.json]
    python bench/inventory_churn.py --smoke     # 8 nodes, 6 changes (~10 s)

Every node's inventory comes again every 30 s, and the console replaces its
record of a node whenever anything in it differs. On daemons up for longer than
their history tiers hold (an hour for the raw tier, a day, 30 days), each tier's
oldest point moves, and the inventory says so: across 125 such nodes about one
node's inventory in two seconds differs only there. Rarer, a value the inventory
table shows changes (a driver upgrade, a node's first inventory).

The real MainWindow (dark theme, offscreen at 1920x1080), fed by hand as
bench/console_frames.py feeds it, with the Inventory tab in view or not. Each
change is one node's InventoryUpdate put in the inbox; its cost is the GUI
thread's CPU time (time.thread_time) from the pump that applies it until the
next pump is due, less the same frame without a change (measured alike, in
between). Compare two trees as a ratio in one sitting: run the script from each.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from console_frames import frame, hand_fed_args, hand_fed_window
from machine import code_version, describe_machine
from PySide6.QtWidgets import QApplication, QTabWidget
from results import stats_ms

from console.fleet.history_range import TierReach
from console.fleet.updates import InventoryUpdate, NodeInfo
from console.session import ConsoleSession

REPO_ROOT = Path(__file__).resolve().parents[1]
SMOKE = {"nodes": 8, "changes": 6}
CASES = ("tiers_only", "driver")


def changed_info(info: NodeInfo, case: str, round_: int) -> NodeInfo:
    """The node's inventory as it comes next: a tier's oldest point moved, or a new driver."""
    if case == "tiers_only":
        oldest = 1_764_000_000.0 + 600.0 * round_
        return dataclasses.replace(info, history_tiers=(TierReach("raw", 1.0, 3600.0, oldest),))
    return dataclasses.replace(info, driver_version=f"550.{round_}")


def settle(app: QApplication, session: ConsoleSession, frames: int) -> None:
    for _ in range(frames):
        frame(app, session)


def timed_frame(app: QApplication, session: ConsoleSession) -> float:
    began = time.thread_time()
    frame(app, session)
    return time.thread_time() - began


def run(nodes: int, changes: int) -> dict[str, object]:
    app, session, window, fed = hand_fed_window(nodes)
    settle(app, session, 40)  # every inventory applied, the window laid out
    tabs = window.reports.inventory_panel.parentWidget()
    while tabs is not None and not isinstance(tabs, QTabWidget):
        tabs = tabs.parentWidget()
    assert tabs is not None, "the inventory panel is not in a tab"
    hidden_tab = tabs.currentWidget()
    result: dict[str, object] = {"nodes": nodes, "gpus": nodes * 8, "changes": changes}
    costs: dict[str, object] = {}
    round_ = 0
    for shown in (False, True):
        tabs.setCurrentWidget(window.reports.inventory_panel if shown else hidden_tab)
        settle(app, session, 30)  # past the inventory table's column fit, if any
        for case in CASES:
            changed: list[float] = []
            quiet: list[float] = []
            for n in range(changes):
                round_ += 1
                node = session.fleet.node(fed.targets[(7 * n) % nodes])
                assert node.info is not None
                info = changed_info(node.info, case, round_)
                session.inbox.put(InventoryUpdate(node.target, info))
                changed.append(timed_frame(app, session))
                settle(app, session, 2)
                quiet.append(timed_frame(app, session))
            baseline = sorted(quiet)[len(quiet) // 2]
            key = f"{case}_{'tab_shown' if shown else 'tab_hidden'}"
            costs[key] = {
                "frame": stats_ms(changed),
                "frame_without_change": stats_ms(quiet),
                "extra_p50_ms": round((sorted(changed)[len(changed) // 2] - baseline) * 1000, 2),
            }
    session.stop()
    window.close()
    result["gui_cpu_ms"] = costs
    return result


def main(argv: Sequence[str] | None = None) -> int:
    args = hand_fed_args(argv, __doc__, "changes", 40, SMOKE)
    result = run(args.nodes, args.changes)
    result.update(machine=describe_machine(), code=code_version(REPO_ROOT))
    print(f"inventory_churn: {args.nodes} nodes x 8 GPUs, {args.changes} changes per case, "
          "GUI-thread CPU of the frame that applies one node's inventory (ms)")  # fmt: skip
    print(f"  {'':34} {'p50':>8} {'max':>8} {'quiet p50':>10}")
    costs = result["gui_cpu_ms"]
    assert isinstance(costs, dict)
    for key, figures in costs.items():
        s, q = figures["frame"], figures["frame_without_change"]
        print(f"  {key:34} {s['p50']:8.1f} {s['max']:8.1f} {q['p50']:10.1f}")
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
