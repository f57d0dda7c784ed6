from __future__ import annotations

import threading

from node_daemon.sampling.sample_ring import RingEntry, SampleRing


def entry(tick: int) -> RingEntry:
    return RingEntry(timestamp_unix_ms=1000 * tick, tick=tick, payload=bytes([tick]))


def test_bounded_oldest_dropped() -> None:
    history = SampleRing(3)
    for tick in range(1, 6):
        history.append(entry(tick))
    replay, latest = history.since(0)
    assert [e.tick for e in replay] == [3, 4, 5]
    assert latest == 5


def test_since_returns_only_newer() -> None:
    history = SampleRing(10)
    for tick in range(1, 6):
        history.append(entry(tick))
    replay, _ = history.since(3000)
    assert [e.tick for e in replay] == [4, 5]


def test_wait_after_wakes_on_append() -> None:
    history = SampleRing(10)
    history.append(entry(1))
    appender = threading.Timer(0.05, history.append, args=(entry(2),))
    appender.start()
    got = history.wait_after(1, timeout_s=10)
    appender.join()
    assert [e.tick for e in got] == [2]


def test_close_wakes_waiters_with_nothing() -> None:
    history = SampleRing(10)
    closer = threading.Timer(0.05, history.close)
    closer.start()
    assert history.wait_after(0, timeout_s=10) == []
    closer.join()
    assert history.closed


def test_wait_after_returns_everything_missed_in_order() -> None:
    history = SampleRing(100)
    for tick in range(1, 51):
        history.append(entry(tick))
    assert [e.tick for e in history.wait_after(47, timeout_s=0)] == [48, 49, 50]
    assert history.wait_after(50, timeout_s=0) == []
