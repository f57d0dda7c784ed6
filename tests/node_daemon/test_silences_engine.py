"""Matcher silences in the alert engine over a real journal: windows, events, restarts."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.v1 import node_pb2 as pb
from node_daemon.alerts import engine, silence_book
from node_daemon.alerts.engine import SilenceEnded, TooManySilences, UnknownSilence
from node_daemon.alerts.model import AlertRecord
from node_daemon.alerts.silences import BadSilence
from node_daemon.journal.event_journal import JournalError
from tests.node_daemon.test_alert_engine import Node
from tests.small_disk import small_disk

LOST = (1, 3, "lost", None)  # GPU 3 falls off the bus 1 s in
NODE_LABELS = {"node": "gpu-node-01", "cluster": "a"}


def node(path: Path) -> Node:
    made = Node(path / "j.sqlite3", LOST)
    made.engine.set_node_labels(NODE_LABELS)
    return made


def restarted(before: Node, path: Path) -> Node:
    """A new engine on the same journal, its clock where the old one stopped."""
    made = Node(path / "j.sqlite3", LOST)
    made.clock.now = before.clock.now
    made.engine.set_node_labels(NODE_LABELS)
    return made


def lost(node: Node) -> AlertRecord:
    return next(a for a in node.engine.firing() if a.rule == "gpu_lost")


def now_ms(node: Node) -> int:
    return int(node.clock.now * 1000)


def events(node: Node, after: int = 0) -> list[pb.Event]:
    return node.journal.events_after(after, 100_000)


def silence_kinds(node: Node, after: int = 0) -> list[tuple[str, str, str]]:
    """(kind, alert rule or silence id, actor) of the silence and (un)silence events."""
    wanted = {pb.EVENT_KIND_ALERT_SILENCED, pb.EVENT_KIND_ALERT_UNSILENCED,
              pb.EVENT_KIND_SILENCE_CREATED, pb.EVENT_KIND_SILENCE_EXPIRED}  # fmt: skip
    return [
        (pb.EventKind.Name(e.kind).removeprefix("EVENT_KIND_"), e.alert.rule or e.silence.id,
         e.actor)
        for e in events(node, after) if e.kind in wanted
    ]  # fmt: skip


def create(node: Node, *pairs: tuple[str, str], starts: int = 0, duration_s: int = 600,
           actor: str = "erin") -> str:  # fmt: skip
    made = node.engine.create_silence(pairs, starts, 0, duration_s, "rack 4 maintenance", actor)
    return made.id


def test_a_maintenance_window_silences_at_its_start_and_lets_go_at_its_end(tmp_path: Path) -> None:
    n = node(tmp_path)
    n.run(3)
    start = now_ms(n) + 60_000
    silence_id = create(n, ("node", "gpu-node-0*"), ("gpu", "3"), starts=start, duration_s=120)
    assert silence_id == "s-1"
    n.run(30)
    assert not lost(n).silenced(now_ms(n)) and lost(n).silence_id == ""
    n.run(31)  # past the start
    silenced = lost(n)
    assert silenced.silence_id == "s-1" and silenced.silenced_until_unix_ms == start + 120_000
    assert (silenced.silenced_by, silenced.silence_reason) == ("erin", "rack 4 maintenance")
    n.run(121)  # past the end
    assert lost(n).silence_id == "" and lost(n).silenced_until_unix_ms is None
    assert silence_kinds(n) == [
        ("SILENCE_CREATED", "s-1", "erin"),
        ("ALERT_SILENCED", "gpu_lost", ""),  # at the start: the daemon's doing, no actor
        ("SILENCE_EXPIRED", "s-1", ""),
        ("ALERT_UNSILENCED", "gpu_lost", ""),
    ]
    expired = next(e for e in events(n) if e.kind == pb.EVENT_KIND_SILENCE_EXPIRED)
    assert expired.silence.expired_by == "" and expired.silence.ends_unix_ms == start + 120_000
    unsilenced = next(e for e in events(n) if e.kind == pb.EVENT_KIND_ALERT_UNSILENCED)
    assert unsilenced.summary == "silence s-1 ended"
    assert [s.id for s in n.engine.silences(include_expired=False, limit=10)] == []
    assert [s.id for s in n.engine.silences(include_expired=True, limit=10)] == ["s-1"]


def test_creating_a_silence_silences_what_fires_at_once_and_only_that(tmp_path: Path) -> None:
    n = Node(tmp_path / "j.sqlite3", LOST, (1, 1, "lost", None))
    n.engine.set_node_labels(NODE_LABELS)
    n.run(3)
    create(n, ("alertname", "gpu_lost"), ("gpu", "3"), ("cluster", "a"))
    firing = {a.gpu_index: a for a in n.engine.firing()}
    assert firing[3].silence_id == "s-1"
    assert firing[1].silence_id == "" and not firing[1].silenced(now_ms(n))
    assert silence_kinds(n) == [("SILENCE_CREATED", "s-1", "erin"),
                                ("ALERT_SILENCED", "gpu_lost", "erin")]  # fmt: skip
    created = next(e for e in events(n) if e.kind == pb.EVENT_KIND_SILENCE_CREATED)
    assert created.silence.created_by == "erin" and created.silence.comment == "rack 4 maintenance"
    assert [(m.label, m.pattern) for m in created.silence.matchers] == [
        ("alertname", "gpu_lost"), ("gpu", "3"), ("cluster", "a"),
    ]  # fmt: skip


def test_an_alert_raised_inside_a_window_is_raised_silenced(tmp_path: Path) -> None:
    n = Node(tmp_path / "j.sqlite3", (5, 3, "lost", None))
    n.engine.set_node_labels(NODE_LABELS)
    create(n, ("alertname", "*"))  # the whole node
    n.run(8)
    raised = next(e for e in events(n) if e.kind == pb.EVENT_KIND_ALERT_RAISED)
    assert raised.alert.rule == "gpu_lost" and raised.alert.silence_id == "s-1"
    assert raised.alert.silenced_until_unix_ms > now_ms(n)
    assert [k for k, _, _ in silence_kinds(n)] == ["SILENCE_CREATED"]  # no separate SILENCED


def test_expiring_early_lets_go_and_a_second_expiry_says_when(tmp_path: Path) -> None:
    n = node(tmp_path)
    n.run(3)
    create(n, ("gpu", "3"))
    n.run(5)
    ended = n.engine.expire_silence("s-1", "bob")
    assert ended.expired_by == "bob" and ended.ends_unix_ms == now_ms(n)
    assert lost(n).silence_id == "" and lost(n).silenced_until_unix_ms is None
    assert silence_kinds(n)[-2:] == [("SILENCE_EXPIRED", "s-1", "bob"),
                                     ("ALERT_UNSILENCED", "gpu_lost", "bob")]  # fmt: skip
    assert events(n)[-1].summary == "silence s-1 ended by bob"
    n.run(2)
    with pytest.raises(
        SilenceEnded, match=r"silence s-1 already expired at 2027-.*Z \(ended by bob\)"
    ):
        n.engine.expire_silence("s-1", "bob")
    with pytest.raises(UnknownSilence, match="no silence s-9 on this node"):
        n.engine.expire_silence("s-9", "bob")
    assert [k for k, _, _ in silence_kinds(n)].count("SILENCE_EXPIRED") == 1  # not at its end


def test_of_several_silences_the_latest_ending_one_shows(tmp_path: Path) -> None:
    n = node(tmp_path)
    n.run(3)
    create(n, ("gpu", "3"), duration_s=600)
    create(n, ("alertname", "gpu_*"), duration_s=1200)
    create(n, ("node", "other-node"), duration_s=3600)  # matches nothing here
    assert lost(n).silence_id == "s-2"
    n.engine.expire_silence("s-2", "bob")
    assert lost(n).silence_id == "s-1"  # still silenced, by the other one
    assert silence_kinds(n)[-1] == ("ALERT_SILENCED", "gpu_lost", "bob")
    listed = [s.id for s in n.engine.silences(include_expired=True, limit=10)]
    assert listed == ["s-1", "s-3", "s-2"]  # live by end, then expired


def test_a_per_alert_silence_wins_when_it_ends_later_and_outlives_the_matcher_one(
    tmp_path: Path,
) -> None:
    n = node(tmp_path)
    n.run(3)
    alert_id = lost(n).id
    create(n, ("gpu", "3"), duration_s=600)
    own = n.engine.silence(alert_id, 3600, "card swap", "carol")
    assert own.silence_id == "" and own.silenced_by == "carol"
    assert own.silenced_until_unix_ms == now_ms(n) + 3_600_000
    n.engine.silence(alert_id, 0, "", "carol")  # lifted: the matcher silence still holds
    assert lost(n).silence_id == "s-1" and lost(n).silenced(now_ms(n))
    n.engine.silence(alert_id, 60, "short", "carol")  # ends first: the matcher one shows
    assert lost(n).silence_id == "s-1"
    n.engine.expire_silence("s-1", "bob")  # the alert's own silence is left
    assert lost(n).silence_id == "" and lost(n).silence_reason == "short"
    n.run(61)
    assert lost(n).silenced_until_unix_ms is None
    assert events(n)[-1].kind == pb.EVENT_KIND_ALERT_UNSILENCED


def test_a_restart_keeps_silences_and_their_effect(tmp_path: Path) -> None:
    n = node(tmp_path)
    n.run(3)
    create(n, ("gpu", "3"), duration_s=600)
    create(n, ("gpu", "1"), duration_s=60)
    n.engine.expire_silence("s-2", "bob")
    before = n.engine.silences(include_expired=True, limit=10)
    head = n.journal.last_seq
    n.journal.close()
    again = restarted(n, tmp_path)
    assert again.engine.silences(include_expired=True, limit=10) == before
    assert lost(again).silence_id == "s-1"  # as the journal kept it
    again.run(3)
    assert lost(again).silence_id == "s-1" and silence_kinds(again, head) == []
    assert create(again, ("gpu", "0")) == "s-3"  # numbers are never reused


def test_a_silence_that_ended_while_the_daemon_was_stopped_is_announced(tmp_path: Path) -> None:
    n = node(tmp_path)
    n.run(3)
    create(n, ("gpu", "3"), duration_s=60)
    n.journal.close()
    again = restarted(n, tmp_path)
    again.clock.now += 120
    head = again.journal.last_seq
    again.run(1)
    assert silence_kinds(again, head) == [("SILENCE_EXPIRED", "s-1", ""),
                                          ("ALERT_UNSILENCED", "gpu_lost", "")]  # fmt: skip


def test_a_create_refused_by_a_full_disk_stores_nothing() -> None:
    with small_disk() as disk:
        n = node(disk.path)
        n.run(3)
        head = n.journal.last_seq
        disk.fill()
        with pytest.raises(JournalError, match="state disk full"):
            create(n, ("gpu", "3"))
        assert n.engine.silences(include_expired=True, limit=10) == []
        assert lost(n).silence_id == ""  # not half-applied
        disk.free()
        assert create(n, ("gpu", "3")) == "s-1"  # the refused one used no number
        assert [e.kind for e in events(n, head) if e.actor] == [
            pb.EVENT_KIND_SILENCE_CREATED, pb.EVENT_KIND_ALERT_SILENCED,
        ]  # fmt: skip
        n.journal.close()


def test_an_end_during_a_full_disk_spell_is_written_once_there_is_room(tmp_path: Path) -> None:
    n = node(tmp_path)
    n.run(3)
    create(n, ("gpu", "3"), duration_s=5)
    pages = n.journal._db.execute("PRAGMA page_count").fetchone()[0]
    n.journal._db.execute(f"PRAGMA max_page_count = {pages}")
    n.run(8)  # it ends while nothing can be written
    assert lost(n).silence_id == ""  # the effect does not wait for the disk
    n.journal._db.execute("PRAGMA max_page_count = 1000000")
    n.run(1)
    assert silence_kinds(n)[-2:] == [("SILENCE_EXPIRED", "s-1", ""),
                                     ("ALERT_UNSILENCED", "gpu_lost", "")]  # fmt: skip
    n.journal.close()
    assert restarted(n, tmp_path).engine.silences(include_expired=False, limit=10) == []


def test_expired_silences_are_kept_up_to_a_bound(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(silence_book, "MAX_EXPIRED", 3)
    n = node(tmp_path)
    for _ in range(6):
        n.engine.expire_silence(create(n, ("gpu", "3")), "bob")
    live = create(n, ("gpu", "2"))
    listed = [s.id for s in n.engine.silences(include_expired=True, limit=100)]
    assert listed == [live, "s-6", "s-5", "s-4"]
    n.journal.close()
    again = restarted(n, tmp_path)
    assert [s.id for s in again.engine.silences(include_expired=True, limit=100)] == listed
    # The limit is on the expired ones; the live ones are all listed.
    assert [s.id for s in again.engine.silences(include_expired=True, limit=2)] == listed[:3]


def test_open_silences_are_bounded(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(engine, "MAX_OPEN", 2)
    n = node(tmp_path)
    first = create(n, ("gpu", "1"))
    create(n, ("gpu", "2"), starts=now_ms(n) + 60_000)  # pending ones count too
    with pytest.raises(TooManySilences, match="2 pending or active silences already"):
        create(n, ("gpu", "3"))
    n.engine.expire_silence(first, "bob")
    assert create(n, ("gpu", "3")) == "s-3"


def test_bad_silences_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    n = node(tmp_path)
    head = n.journal.last_seq
    with pytest.raises(BadSilence, match="needs a comment"):
        n.engine.create_silence([("gpu", "3")], 0, 0, 60, "", "erin")
    with pytest.raises(BadSilence, match="at least one matcher"):
        n.engine.create_silence([], 0, 0, 60, "why", "erin")
    with pytest.raises(BadSilence, match="at most 7 days"):
        n.engine.create_silence([("gpu", "3")], 0, 0, 8 * 86_400, "why", "erin")
    assert n.journal.last_seq == head


def test_alertmanager_sees_live_silences_and_per_alert_ones_and_hears_of_changes(
    tmp_path: Path,
) -> None:
    n = node(tmp_path)
    heard: list[int] = []
    n.engine.add_silence_listener(lambda: heard.append(1))
    n.run(3)
    create(n, ("gpu", "3"), starts=now_ms(n) + 60_000)  # pending counts: Alertmanager waits too
    n.engine.silence(lost(n).id, 600, "card swap", "carol")
    keys = [s.key for s in n.engine.am_silences()]
    assert keys == ["s-1", f"alert:{lost(n).id}"]
    per_alert = n.engine.am_silences()[1]
    assert {m.name for m in per_alert.matchers} == {"node", "cluster", "alertname", "severity",
                                                    "gpu", "UUID"}  # fmt: skip
    assert len(heard) == 2
    n.run(2)
    assert len(heard) == 2  # nothing changed: not told again
    n.engine.expire_silence("s-1", "bob")
    assert [s.key for s in n.engine.am_silences()] == [f"alert:{lost(n).id}"] and len(heard) == 3
