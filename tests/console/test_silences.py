"""Matcher silences in the console's model, without Qt; time is whatever the test says."""

from __future__ import annotations

import dataclasses

import pytest

from console.connections.decode import decode_event, decode_reply, decode_silence, decode_silences
from console.fleet.alert_rows import AlertRow
from console.fleet.alerts import EventRow
from console.fleet.durations import duration_ms_text
from console.fleet.model import FleetModel
from console.fleet.silence_draft import MAX_LENGTH_MS, SilenceDraft, matching_targets
from console.fleet.silences import (
    MINUTE_MS,
    SilenceBook,
    SilenceListing,
    SilenceMatcher,
    SilenceReminders,
    SilenceRow,
    alert_labels,
    end_countdown,
    group_silences,
    matchers_text,
    reminder_text,
    start_countdown,
)
from console.fleet.updates import CommandResult, EventUpdate, QueryResult
from gpufleet.states import SilenceState
from gpufleet.v1 import node_pb2 as pb
from gpufleet.v1.alert_severity import Severity
from gpufleet.v1.silence_globs import glob_matches
from tests.silence_glob_examples import GLOB_EXAMPLES

A, B = "10.0.0.1:50051", "10.0.0.2:50051"
T0 = 1_800_000_000_000  # the fake clock's "now", ms
NODE_GLOB = SilenceMatcher("node", "gpu-node-0*")
THROTTLE = SilenceMatcher("alertname", "throttle")


def silence(target: str = A, id_: str = "s-1", **changes: object) -> SilenceRow:
    row = SilenceRow(
        target, id_, (NODE_GLOB, THROTTLE), T0, T0 + 60 * MINUTE_MS, "erin", "rack 4 swap", T0
    )
    return dataclasses.replace(row, **changes)


def alert(target: str = A, silence_id: str = "", firing: bool = True) -> AlertRow:
    return AlertRow(
        target, "a-1", "throttle/gpu2", "throttle", Severity.WARNING, firing, 2, "GPU-c", None,
        None, "", "GPU 2 throttled", T0, T0, None, 1, "", None, None, "", "", None, silence_id,
    )  # fmt: skip


@pytest.mark.parametrize(("pattern", "value", "matches"), GLOB_EXAMPLES)
def test_globs_are_star_and_question_mark_only(pattern: str, value: str, matches: bool) -> None:
    assert glob_matches(pattern, value) is matches


def test_matchers_read_as_label_equals_pattern_and_need_the_label() -> None:
    assert matchers_text((NODE_GLOB, THROTTLE)) == "node=gpu-node-0* alertname=throttle"
    labels = alert_labels(alert(), "gpu-node-03")
    assert labels == {"node": "gpu-node-03", "alertname": "throttle", "severity": "warning",
                      "gpu": "2"}  # fmt: skip
    assert NODE_GLOB.matches(labels) and THROTTLE.matches(labels)
    assert not SilenceMatcher("pid", "*").matches(labels)  # no pid: never matches


def test_state_by_the_clock() -> None:
    window = silence(starts_unix_ms=T0 + 10 * MINUTE_MS)
    assert window.state(T0) is SilenceState.PENDING
    assert window.state(T0 + 10 * MINUTE_MS) is SilenceState.ACTIVE
    assert window.state(T0 + 60 * MINUTE_MS) is SilenceState.EXPIRED


def test_a_late_record_never_brings_an_expired_silence_back() -> None:
    book = SilenceBook()
    assert book.apply(silence())
    expired = silence(ends_unix_ms=T0 + 5 * MINUTE_MS, expired_by="frank")
    assert book.apply(expired)
    version = book.version
    assert not book.apply(silence())  # the creation event, replayed after the expiry
    assert book.silence(A, "s-1") == expired and book.version == version
    book.replace_node(A, [silence()])  # a listing older than the expiry
    assert book.silence(A, "s-1") == expired


def test_a_listing_replaces_the_nodes_silences_but_not_those_learned_since_it_was_asked() -> None:
    book = SilenceBook()
    book.apply(silence(id_="s-old"))
    book.apply(silence(B, "s-b"))
    book.listing_asked(A)
    book.apply(silence(id_="s-new"))  # created while the listing was on its way
    book.replace_node(A, [silence(id_="s-listed")])
    held = {row.uid for row in book.silences()}
    assert held == {(A, "s-listed"), (A, "s-new"), (B, "s-b")}
    book.listing_asked(A)
    book.replace_node(A, [])  # the node's next listing: s-new is gone there
    assert {row.uid for row in book.silences()} == {(B, "s-b")}


def test_copies_on_several_nodes_read_as_one_silence() -> None:
    copies = [silence(A, "s-4", created_unix_ms=T0 + 40), silence(B, "s-9")]
    other = silence(B, "s-10", comment="another reason")
    later = silence(A, "s-5", created_unix_ms=T0 + 2 * 60 * MINUTE_MS)
    groups = group_silences([*copies, other, later])
    assert [g.targets for g in groups] == [(A,), (B,), (B, A)]
    both = groups[2]
    # One copy expired early: the group is active while the other is.
    both = dataclasses.replace(
        both, rows=(both.rows[0], dataclasses.replace(both.rows[1], ends_unix_ms=T0 + MINUTE_MS))
    )
    assert both.state(T0 + 2 * MINUTE_MS) is SilenceState.ACTIVE
    assert [r.target for r in both.unexpired(T0 + 2 * MINUTE_MS)] == [B]
    assert both.ends_unix_ms == T0 + 60 * MINUTE_MS


def test_it_counts_the_firing_alerts_the_daemons_say_it_silences() -> None:
    (group,) = group_silences([silence(A, "s-1"), silence(B, "s-2")])
    alerts = [alert(A, "s-1"), alert(B, "s-2"), alert(B, "s-1"), alert(A, "s-1", firing=False)]
    assert group.silencing(alerts) == 2


def test_countdowns_and_durations_for_a_person() -> None:
    spans = (45_000, 12 * MINUTE_MS, 200 * MINUTE_MS, 50 * 60 * MINUTE_MS)
    assert [duration_ms_text(ms) for ms in spans] == ["45 s", "12 min", "3 h 20 min", "2 d 2 h"]
    (group,) = group_silences([silence(starts_unix_ms=T0 + 2 * 60 * MINUTE_MS,
                                       ends_unix_ms=T0 + 3 * 60 * MINUTE_MS)])  # fmt: skip
    assert (start_countdown(group, T0), end_countdown(group, T0)) == ("in 2 h", "lasts 1 h")
    assert start_countdown(group, T0 + 168 * MINUTE_MS) == ""
    assert end_countdown(group, T0 + 168 * MINUTE_MS) == "ends in 12 min"
    assert end_countdown(group, T0 + 185 * MINUTE_MS) == "ended 5 min ago"


def test_a_reminder_once_five_minutes_before_an_active_silence_ends() -> None:
    reminders = SilenceReminders()
    groups = group_silences([silence(), silence(B, "s-2", created_unix_ms=T0 + 1)])
    assert reminders.due(groups, T0 + 50 * MINUTE_MS) == []
    assert groups[0].ending_within(T0 + 51 * MINUTE_MS, 10 * MINUTE_MS)  # highlighted
    due = reminders.due(groups, T0 + 55 * MINUTE_MS)
    assert [g.targets for g in due] == [(A, B)]
    assert reminders.due(groups, T0 + 56 * MINUTE_MS) == []  # once
    names = {A: "gpu-node-01", B: "gpu-node-02"}
    assert reminder_text(due[0], T0 + 55 * MINUTE_MS, names) == (
        "Silence of gpu-node-0* throttle by erin ends in 5 min"
    )
    short = group_silences([silence(id_="s-3", ends_unix_ms=T0 + 3 * MINUTE_MS)])
    assert SilenceReminders().due(short, T0 + MINUTE_MS) == []  # meant to be short


def test_the_fleet_model_takes_listings_events_and_answers() -> None:
    fleet = FleetModel()
    fleet.add_node(A)
    listing = SilenceListing(A, (silence(id_="s-1"),))
    fleet.apply(QueryResult(A, "silences of A", 7, True, "done", listing))
    created = silence(id_="s-2")
    event = EventRow(A, 5, T0, "silence_created", None, "silence created", "erin", None, False,
                     silence=created)  # fmt: skip
    fleet.apply(EventUpdate(A, event, "journal-1"))
    expired = dataclasses.replace(created, ends_unix_ms=T0 + MINUTE_MS, expired_by="frank")
    fleet.apply(CommandResult(A, "expire silence", True, "done", payload=expired))
    assert {r.id: r for r in fleet.silences.silences()} == {"s-1": silence(), "s-2": expired}


def test_a_draft_from_an_alert_checks_what_it_would_send() -> None:
    draft = SilenceDraft.for_alert(alert(), "gpu-node-03")
    assert (draft.node, draft.rule, draft.gpu) == ("gpu-node-03", "throttle", "2")
    assert draft.problem(T0) == "say why these alerts may stay quiet (comment)"
    draft = dataclasses.replace(draft, comment="  fan swap  ", node="gpu-node-0*")
    assert draft.problem(T0) is None
    sent = draft.request(T0)
    assert [m.text for m in sent.matchers] == ["node=gpu-node-0*", "alertname=throttle", "gpu=2"]
    assert (sent.starts_unix_ms, sent.ends_unix_ms, sent.comment) == (0, T0 + 60 * MINUTE_MS,
                                                                     "fan swap")  # fmt: skip


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"node": "", "rule": "", "gpu": ""}, "name at least one of node, rule, GPU or severity"),
        ({"gpu": "two"}, "GPU 'two': a GPU index"),
        ({"severity": "urgent"}, "severity 'urgent' matches none of info, warning, critical"),
        ({"starts_unix_ms": T0 - 1}, "the start is in the past"),
        ({"duration_ms": None, "ends_unix_ms": T0 - 5}, "the end is not after the start"),
        ({"duration_ms": MAX_LENGTH_MS + MINUTE_MS}, "at most 7 days long (this is 7 d)"),
    ],
)
def test_a_draft_says_what_is_wrong(changes: dict[str, object], problem: str) -> None:
    draft = dataclasses.replace(SilenceDraft(node="gpu-node-01", comment="why"), **changes)
    found = draft.problem(T0)
    assert found is not None and found.startswith(problem)


def test_a_maintenance_window_starts_later_and_ends_at_a_time() -> None:
    draft = SilenceDraft(rule="gpu_*", severity="warn*", comment="firmware",
                         starts_unix_ms=T0 + 60 * MINUTE_MS, duration_ms=None,
                         ends_unix_ms=T0 + 3 * 60 * MINUTE_MS)  # fmt: skip
    assert draft.problem(T0) is None
    sent = draft.request(T0)
    assert (sent.starts_unix_ms, sent.ends_unix_ms) == (T0 + 60 * MINUTE_MS, T0 + 180 * MINUTE_MS)


def test_it_goes_to_the_nodes_whose_name_the_node_pattern_matches() -> None:
    nodes = [(A, "gpu-node-01"), (B, "gpu-node-12"), ("c:1", "login-1")]
    assert matching_targets("gpu-node-0*", nodes) == [A]
    assert matching_targets("gpu-node-*", nodes) == [A, B]
    assert matching_targets("", nodes) == [A, B, "c:1"]


def test_decoding_a_silence_its_listing_its_event_and_an_answer() -> None:
    message = pb.Silence(
        id="s-7", matchers=[pb.SilenceMatcher(label="node", pattern="gpu-node-0*"),
                            pb.SilenceMatcher(label="alertname", pattern="throttle")],
        starts_unix_ms=T0, ends_unix_ms=T0 + 60 * MINUTE_MS, created_by="erin",
        comment="rack 4 swap", created_unix_ms=T0, expired_by="",
    )  # fmt: skip
    row = decode_silence(A, message)
    assert row == silence(id_="s-7")
    listing = decode_silences(A, pb.ListSilencesResponse(silences=[message]))
    assert listing == SilenceListing(A, (row,))
    event = pb.Event(seq=3, kind=pb.EVENT_KIND_SILENCE_CREATED, silence=message, journal_id="j")
    decoded = decode_event(A, event).event
    assert decoded.kind == "silence_created" and decoded.silence == row
    assert decode_reply(A, message) == ("done", row)
    assert decode_event(A, pb.Event(seq=4)).event.silence is None
