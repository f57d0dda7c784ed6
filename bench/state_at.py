"""Benchmark: GetStateAt's answer for a moment a day back, on a seeded node (issue #30).

    python bench/state_at.py            # 30 h of an 8-GPU node, a busy month's journal
    python bench/state_at.py --smoke    # small: does it run?

Seeds, through the real stores with injected time: the metric history (simulated 8
H100s, a tick every 5 s for 30 h, so the raw tier holds the last hour and the 10 s tier
the day) and an event journal of a busy month (an Xid storm's alert changing every few
seconds, hundreds of alerts raised and cleared, reservations, workloads, drains). Then
builds the answer (node_daemon.history.state_at, without the network) for moments an
hour, 5 hours, a day, 29 hours and 29 days back (the last beyond the seeded history:
the journal's part only) and reports its CPU time (time.thread_time), and the one-time
indexing of a journal from before the subject index (the first start after the upgrade).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO_ROOT), str(REPO_ROOT / "protos")]

from gpufleet.v1 import node_pb2 as pb  # noqa: E402
from node_daemon.backends.simulated import SimulatedBackend  # noqa: E402
from node_daemon.history.settings import HistorySettings  # noqa: E402
from node_daemon.history.state_at import Sources, state_at  # noqa: E402
from node_daemon.history.store import HistoryStore  # noqa: E402
from node_daemon.journal import subjects  # noqa: E402
from node_daemon.journal.event_journal import EventJournal, StoredRecord  # noqa: E402

HOUR_MS, DAY_MS = 3_600_000, 86_400_000
NOW_MS = 1_800_000_000_000


def seed_history(path: Path, hours: float, gpus: int, tick_s: int) -> HistoryStore:
    backend = SimulatedBackend(gpu_count=gpus, seed=3, model="h100")
    backend.open()
    store = HistoryStore(path, HistorySettings(), raw_step_ms=tick_s * 1000,
                         boot_clock=lambda: 0.0)  # fmt: skip
    start = NOW_MS - int(hours * HOUR_MS)
    for n, at_ms in enumerate(range(start, NOW_MS, tick_s * 1000)):
        store.append(at_ms, backend.advance(tick_s))
        if n % 50 == 49:
            store.flush()
    store.flush()
    return store


def alert(number: int, at_ms: int, kind: int, rule: str = "gpu_temp") -> pb.Event:
    cleared = kind == pb.EVENT_KIND_ALERT_CLEARED
    message = pb.Alert(
        id=f"a-{number}", rule=rule, gpu_index=number % 8, severity=pb.SEVERITY_WARNING,
        state=pb.ALERT_STATE_CLEARED if cleared else pb.ALERT_STATE_FIRING,
        started_unix_ms=at_ms, updated_unix_ms=at_ms,
    )  # fmt: skip
    return pb.Event(time_unix_ms=at_ms, kind=kind, alert=message)  # type: ignore[arg-type]


def daily(at_ms: int) -> tuple[list[pb.Event], list[StoredRecord]]:
    """A day's reservation (4 h) and workload (6 h): made, then ended, with their records."""
    day = at_ms // DAY_MS
    made = pb.Reservation(id=f"r-{day}", gpu_indices=[day % 8], holder="alice",
                          until_unix_ms=at_ms + 4 * HOUR_MS, active=True)  # fmt: skip
    expired = pb.Reservation(id=made.id, gpu_indices=made.gpu_indices, holder="alice",
                             until_unix_ms=made.until_unix_ms, active=False,
                             ended_unix_ms=made.until_unix_ms)  # fmt: skip
    running = pb.Workload(id=f"w-{day}", state=pb.WORKLOAD_STATE_RUNNING, gpu_indices=[day % 8])
    done = pb.Workload(id=running.id, state=pb.WORKLOAD_STATE_FINISHED, gpu_indices=[day % 8])
    ends = at_ms + 6 * HOUR_MS
    events = [
        pb.Event(time_unix_ms=at_ms, kind=pb.EVENT_KIND_RESERVATION_MADE, reservation=made),
        pb.Event(time_unix_ms=at_ms, kind=pb.EVENT_KIND_WORKLOAD_STARTED, workload=running),
        pb.Event(time_unix_ms=made.until_unix_ms, kind=pb.EVENT_KIND_RESERVATION_EXPIRED,
                 reservation=expired),
        pb.Event(time_unix_ms=ends, kind=pb.EVENT_KIND_WORKLOAD_FINISHED, workload=done),
    ]  # fmt: skip
    ended = min(ends, NOW_MS - 1)  # a record's update is its last event's time
    records = [
        StoredRecord("reservation", made.id, False, made.until_unix_ms,
                     expired.SerializeToString()),
        StoredRecord("workload", done.id, ends > NOW_MS, ended, done.SerializeToString()),
    ]  # fmt: skip
    return events, records


def seed_journal(path: Path, days: int, storm_every_s: int) -> int:
    """A month: a storm alert (a-0) changing every `storm_every_s`, an alert raised and
    cleared every 90 min, a reservation and a workload a day, a drain a week."""
    journal = EventJournal(path)
    start = NOW_MS - days * DAY_MS
    batch: list[pb.Event] = [alert(0, start, pb.EVENT_KIND_ALERT_RAISED, "xid")]
    alerts = [batch[0].alert]
    count, number = 0, 1
    records: list[StoredRecord] = []
    for at_ms in range(start, NOW_MS, storm_every_s * 1000):
        batch.append(alert(0, at_ms, pb.EVENT_KIND_ALERT_CHANGED, "xid"))
        if at_ms % (90 * 60_000) < storm_every_s * 1000:
            raised = alert(number, at_ms, pb.EVENT_KIND_ALERT_RAISED)
            cleared = alert(number, at_ms + 600_000, pb.EVENT_KIND_ALERT_CLEARED)
            batch += [raised, cleared]
            alerts.append(cleared.alert)
            number += 1
        if at_ms % DAY_MS < storm_every_s * 1000:
            day_events, day_records = daily(at_ms)
            batch += day_events
            records += day_records
        if at_ms % (7 * DAY_MS) < storm_every_s * 1000:
            drained = pb.GpuCondition(gpu_index=2, drained=True)
            batch.append(pb.Event(time_unix_ms=at_ms, kind=pb.EVENT_KIND_GPU_DRAINED,
                                  condition=drained))  # fmt: skip
        if len(batch) >= 5000:
            count += len(batch)
            journal.record(batch, alerts, records)
            batch, alerts, records = [], [], []
    count += len(batch)
    journal.record(batch, alerts, records)
    journal.close()
    return count


def timed(sources: Sources, at_ms: int, runs: int) -> tuple[float, pb.NodeStateAt]:
    times, answer = [], pb.NodeStateAt()
    for _ in range(runs):
        started = time.thread_time()
        answer = state_at(sources, at_ms, NOW_MS)
        times.append((time.thread_time() - started) * 1000)
    return statistics.median(times), answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    hours, days, storm = (2.0, 3, 60) if args.smoke else (30.0, 30, 5)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.thread_time()
        store = seed_history(Path(tmp) / "history.sqlite3", hours, 8, 5)
        print(f"history: {hours:g} h of 8 GPUs at 5 s seeded in "
              f"{time.thread_time() - started:.1f} s")  # fmt: skip
        started = time.thread_time()
        events = seed_journal(Path(tmp) / "journal.sqlite3", days, storm)
        print(f"journal: {events:,} events over {days} days seeded in "
              f"{time.thread_time() - started:.1f} s")  # fmt: skip
        with sqlite3.connect(Path(tmp) / "journal.sqlite3") as db:  # as before the index
            db.execute("DELETE FROM event_subjects")
            db.execute("DELETE FROM meta WHERE key = ?", (subjects.THROUGH_KEY,))
        started = time.thread_time()
        journal = EventJournal(Path(tmp) / "journal.sqlite3")
        print(f"first open after the upgrade (indexing {events:,} events by subject): "
              f"{time.thread_time() - started:.2f} s CPU")  # fmt: skip
        sources = Sources(store, journal, range(8))
        moments = (("1 h", HOUR_MS - 60_000), ("5 h", 5 * HOUR_MS), ("1 day", DAY_MS),
                   ("1 day 5 h", 29 * HOUR_MS), ("29 days", 29 * DAY_MS))  # fmt: skip
        for label, back_ms in moments:
            median_ms, answer = timed(sources, NOW_MS - back_ms, 3 if args.smoke else 20)
            print(f"state {label} back: {median_ms:.1f} ms CPU (median), tier {answer.tier or '-'}"
                  f" step {answer.step_ms} ms, {len(answer.gpus)} GPUs, "
                  f"{len(answer.alerts)} alerts, {len(answer.reservations)} reservations, "
                  f"{len(answer.workloads)} workloads")  # fmt: skip
        journal.close()
        store.close()


if __name__ == "__main__":
    main()
