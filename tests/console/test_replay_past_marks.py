"""The replay timeline's marks of what a node's journal holds from before the console
connected (ListEvents): the newest of a crowded window, and the console says the rest
were left out; an event stamped outside the window is not marked.

The journal is written before the daemon starts, with more acknowledgements in the last
hour than one answer carries (console.connections.queries.PAST_EVENTS_LIMIT).
"""

from __future__ import annotations

import time
from pathlib import Path

from console.connections.queries import PAST_EVENTS_LIMIT
from console.main_window import MainWindow
from console.session import ConsoleSession
from gpufleet.v1 import node_pb2 as pb
from node_daemon.journal.event_journal import EventJournal
from node_daemon.server import JOURNAL_FILE
from tests.conftest import DaemonFactory

HOUR_MS = 3_600_000


def test_a_crowded_window_marks_the_newest_and_says_the_rest_were_left_out(
    qtbot, start_window, start_daemon: DaemonFactory, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    now = int(time.time() * 1000)
    acks = PAST_EVENTS_LIMIT + 5
    first = now - HOUR_MS + 60_000
    stamps = [first + i * 1000 for i in range(acks)]  # a second apart, the last hour
    journal = EventJournal(tmp_path / JOURNAL_FILE)
    long_ago = pb.Event(time_unix_ms=now - 3 * HOUR_MS, kind=pb.EVENT_KIND_GPU_DRAINED,
                        gpu_index=0, summary="long ago", actor="carol")  # fmt: skip
    acked = [pb.Event(time_unix_ms=t, kind=pb.EVENT_KIND_ALERT_ACKNOWLEDGED, gpu_index=0,
                      summary=f"ack {i}", actor="carol") for i, t in enumerate(stamps)]  # fmt: skip
    journal.record([long_ago, *acked])
    journal.close()
    daemon = start_daemon(gpus=1, hostname="gpu-busy", state_dir=tmp_path)
    window: MainWindow = start_window(ConsoleSession([str(daemon.address)]), size=(1400, 800))
    fleet = window.session.fleet
    qtbot.waitUntil(lambda: all(len(n.live_latest) == 1 for n in fleet), timeout=15_000)
    part = window.replay
    part.strip.window_box.setCurrentText("1 h")
    window.session.replay.show(now - 30 * 60_000)
    qtbot.waitUntil(lambda: str(daemon.address) in part.past, timeout=10_000)
    past = part.past[str(daemon.address)]
    assert past.truncated and len(past.events) == PAST_EVENTS_LIMIT
    said = window.statusBar().currentMessage()
    assert "gpu-busy holds more marked events in the window than 2,000" in said, said
    # The newest: the daemon's own start (a marked kind) and the acknowledgements before it.
    assert past.events[-1].kind == "daemon_started"
    marks = [m for m in part.event_marks if m.what == "acknowledged"]
    assert [m.at_ms for m in marks] == stamps[-(PAST_EVENTS_LIMIT - 1) :]
    assert marks[-1].text == f"gpu-busy GPU 0: acknowledged by carol — ack {acks - 1}"
    assert not [m for m in part.event_marks if m.what == "drained"]  # before the window
