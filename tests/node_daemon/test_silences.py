"""Matcher silences, the domain: matchers, globs, windows, states, the Alertmanager form."""

from __future__ import annotations

import re
from functools import cache

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpufleet.states import SilenceState
from gpufleet.v1.alert_severity import Severity
from node_daemon.alerts.alertmanager import alert_labels
from node_daemon.alerts.am_silences import AmMatcher
from node_daemon.alerts.model import AlertRecord
from node_daemon.alerts.silences import (
    MAX_MATCHERS,
    BadSilence,
    Matcher,
    Silence,
    alert_silence_to_alertmanager,
    check_matchers,
    check_text,
    check_window,
    glob_regex,
    to_alertmanager,
)
from tests.silence_glob_examples import GLOB_EXAMPLES

NOW = 1_800_000_000_000
DAY_MS = 86_400_000
NODE = {"node": "gpu-node-01", "cluster": "a"}


def alert(rule: str = "gpu_temp", gpu: int | None = 3, severity: Severity = Severity.CRITICAL,
          pid: int | None = None) -> AlertRecord:  # fmt: skip
    return AlertRecord(
        id="a-1", key=f"{rule}/gpu{gpu}", rule=rule, severity=severity, firing=True,
        gpu_index=gpu, gpu_uuid="GPU-abc" if gpu is not None else "", pid=pid, value=90.0,
        unit="°C", summary="hot", started_unix_ms=NOW, updated_unix_ms=NOW,
    )  # fmt: skip


def silence(*pairs: tuple[str, str], starts: int = NOW, ends: int = NOW + 3_600_000) -> Silence:
    return Silence("s-1", check_matchers(pairs), starts, ends, "erin", "maintenance", NOW)


# -- globs ------------------------------------------------------------------------------


@cache
def glob_reference(pattern: str, value: str) -> bool:
    """The glob's meaning, written the slow, obvious way."""
    if not pattern:
        return not value
    head, rest = pattern[0], pattern[1:]
    if head == "*":
        return any(glob_reference(rest, value[i:]) for i in range(len(value) + 1))
    if not value:
        return False
    return (head == "?" or head == value[0]) and glob_reference(rest, value[1:])


GLOB_CHARS = st.sampled_from(list("ab*?.+()[]{}^$|\\\n-é"))


@given(pattern=st.text(GLOB_CHARS, min_size=1, max_size=8), value=st.text(GLOB_CHARS, max_size=8))
def test_a_glob_matches_exactly_what_it_means(pattern: str, value: str) -> None:
    assert Matcher("node", pattern).matches(value) == glob_reference(pattern, value)


@pytest.mark.parametrize(("pattern", "value", "matches"), GLOB_EXAMPLES)
def test_glob_examples(pattern: str, value: str, matches: bool) -> None:
    assert Matcher("node", pattern).matches(value) is matches


def test_the_regex_for_alertmanager_is_anchored_and_escapes_what_re2_reads() -> None:
    regex = glob_regex("gpu-node-0*.x?(y)")
    assert regex == r"^(?s:gpu-node-0.*\.x.\(y\))$"
    assert re.fullmatch(regex, "gpu-node-07.xZ(y)") and not re.search(regex, "a gpu-node-0.xZ(y)")


# -- matching an alert's labels ---------------------------------------------------------


def test_all_matchers_must_match_the_alerts_alertmanager_labels() -> None:
    labels = alert_labels(alert(), NODE)
    assert silence(("node", "gpu-node-0*"), ("alertname", "gpu_temp")).matches(labels)
    assert silence(("gpu", "3"), ("severity", "critical"), ("cluster", "a")).matches(labels)
    assert not silence(("node", "gpu-node-0*"), ("alertname", "xid")).matches(labels)
    assert silence(("UUID", "GPU-*")).matches(labels)


def test_an_alert_without_the_label_never_matches_even_a_star() -> None:
    node_alert = alert_labels(alert("state_disk", gpu=None), NODE)
    assert not silence(("gpu", "*")).matches(node_alert)
    assert not silence(("pid", "*")).matches(node_alert)
    assert silence(("alertname", "*")).matches(node_alert)


def test_a_silence_of_every_alert_is_allowed_and_says_so() -> None:
    everything = silence(("alertname", "*"))
    assert everything.covers_everything and "every alert of this node" in everything.describe()
    assert not silence(("gpu", "*")).covers_everything  # node-level alerts have no gpu
    assert not silence(("alertname", "gpu_*")).covers_everything


# -- validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pairs", "words"),
    [
        ((), "at least one matcher"),
        ((("", "x"),), "matcher 1: label is empty"),
        ((("node", "a"), ("1gpu", "x")), "matcher 2: label '1gpu' is not a label name"),
        ((("gpu-index", "x"),), "not a label name"),
        ((("__name__", "x"),), "reserved"),
        ((("node", ""),), "matcher 1 (node): pattern is empty"),
        ((("node", "x" * 257),), "pattern is longer than 256"),
        ((("n" * 65, "x"),), "label is longer than 64"),
        (tuple(("node", "x") for _ in range(MAX_MATCHERS + 1)), "at most 16 matchers, got 17"),
    ],
)  # fmt: skip
def test_bad_matchers_are_named(pairs: tuple[tuple[str, str], ...], words: str) -> None:
    with pytest.raises(BadSilence, match=re.escape(words)):
        check_matchers(pairs)


def test_sixteen_matchers_are_fine() -> None:
    assert len(check_matchers([("node", "x")] * MAX_MATCHERS)) == MAX_MATCHERS


def test_a_comment_is_required() -> None:
    with pytest.raises(BadSilence, match="needs a comment"):
        check_text("  ", "erin")
    with pytest.raises(BadSilence, match="comment is longer than 1000"):
        check_text("x" * 1001, "erin")


def test_windows() -> None:
    assert check_window(NOW, 0, 0, 60) == (w := check_window(NOW, NOW, NOW + 60_000, 0))
    assert (w.starts_unix_ms, w.ends_unix_ms) == (NOW, NOW + 60_000)
    late = check_window(NOW, NOW - 30_000, 0, 60)  # a console clock a little behind
    assert late.starts_unix_ms == NOW
    window = check_window(NOW, NOW + 2 * DAY_MS, 0, 7 * 86_400)  # a maintenance window
    assert window.ends_unix_ms - window.starts_unix_ms == 7 * DAY_MS


@pytest.mark.parametrize(
    ("starts", "ends", "duration", "words"),
    [
        (NOW - 61_000, 0, 60, "61 s in the past"),
        (NOW + 31 * DAY_MS, 0, 60, "more than 30 days ahead"),
        (0, NOW + 60_000, 60, "not both"),
        (0, 0, 0, "say when the silence ends"),
        (0, NOW, 0, "is not after the start"),
        (0, -5, 0, "is not after the start"),
        (0, 2**63 - 1, 0, "at most 7 days"),
        (0, 0, 7 * 86_400 + 1, "this one would last 604801 s"),
        (-(2**63), 0, 60, "(out of range)"),
    ],
)  # fmt: skip
def test_bad_windows_say_what_is_wrong(starts: int, ends: int, duration: int, words: str) -> None:
    with pytest.raises(BadSilence, match=re.escape(words)):
        check_window(NOW, starts, ends, duration)


@given(
    starts=st.one_of(st.just(0), st.integers(-(2**63), 2**63 - 1)),
    ends=st.one_of(st.just(0), st.integers(-(2**63), 2**63 - 1)),
    duration=st.integers(0, 2**32 - 1),
)
def test_any_window_accepted_fits_the_limits(starts: int, ends: int, duration: int) -> None:
    try:
        window = check_window(NOW, starts, ends, duration)
    except BadSilence as exc:
        assert str(exc)
        return
    assert NOW <= window.starts_unix_ms <= NOW + 30 * DAY_MS
    assert 0 < window.ends_unix_ms - window.starts_unix_ms <= 7 * DAY_MS


# -- state over time --------------------------------------------------------------------


def test_pending_active_expired_and_ending_early() -> None:
    window = silence(("node", "*"), starts=NOW + 60_000, ends=NOW + 120_000)
    assert window.state(NOW) is SilenceState.PENDING
    assert window.state(NOW + 60_000) is SilenceState.ACTIVE
    assert window.state(NOW + 120_000) is SilenceState.EXPIRED
    labels = alert_labels(alert(), NODE)
    assert not window.covers(labels, NOW) and window.covers(labels, NOW + 90_000)
    ended = window.expired(NOW + 10_000, "bob")  # before it began: it never starts
    assert ended.expired_by == "bob" and ended.state(NOW + 90_000) is SilenceState.EXPIRED
    assert ended.starts_unix_ms == ended.ends_unix_ms == NOW + 10_000


# -- Alertmanager -----------------------------------------------------------------------


def test_to_alertmanager_turns_globs_into_regexes_and_scopes_to_the_node() -> None:
    am = to_alertmanager(silence(("alertname", "gpu_*"), ("gpu", "3"), ("node", "gpu-node-0?")),
                         NODE)  # fmt: skip
    assert am.key == "s-1" and am.created_by == "erin" and am.comment == "maintenance"
    assert am.matchers == (
        AmMatcher("alertname", "^(?s:gpu_.*)$", is_regex=True),
        AmMatcher("gpu", "3"),
        AmMatcher("node", "^(?s:gpu-node-0.)$", is_regex=True),
        AmMatcher("cluster", "a"),
        AmMatcher("node", "gpu-node-01"),
    )
    assert (am.starts_unix_ms, am.ends_unix_ms) == (NOW, NOW + 3_600_000)


def test_a_per_alert_silence_in_alertmanager_is_the_alerts_exact_label_set() -> None:
    labels = alert_labels(alert(pid=77), NODE)
    am = alert_silence_to_alertmanager("a-1", labels, NOW, NOW + 60_000, "erin", "card swap")
    assert am.key == "alert:a-1" and not any(m.is_regex for m in am.matchers)
    assert {m.name: m.value for m in am.matchers} == labels
