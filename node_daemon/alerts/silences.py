"""Matcher silences: which alerts a silence covers, and when.

A silence is a set of matchers (all must match: AND) and a window from its start
to its end. A matcher names one of the alert's Alertmanager labels (as
node_daemon.alerts.alertmanager.alert_labels builds them: the node's labels,
`alertname` = the rule, `severity`, `gpu`, `UUID`, `pid`) and a pattern: exact,
or a glob where `*` is any run of characters and `?` one character; everything
else is literal and matching is case-sensitive. An alert without the label never
matches.

A silence whose patterns are all `*` on labels every alert has (`alertname=*`)
covers every alert of the node. That is allowed on purpose: a whole-node
maintenance window is a normal thing to want. It is said so wherever the silence
is shown (`covers_everything`).

The same silences are mirrored into Alertmanager (`to_alertmanager`): a glob
becomes an anchored RE2 regex, which Python's `re` reads the same way, so the
daemon and Alertmanager agree on what a silence covers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

from gpufleet.states import SilenceState, silence_state
from gpufleet.v1.silence_globs import glob_matches, glob_regex, is_glob
from node_daemon.alerts.alertmanager import rfc3339
from node_daemon.alerts.am_silences import AmMatcher, AmSilence
from node_daemon.errors import Invalid

MAX_MATCHERS = 16
MAX_LABEL = 64
MAX_PATTERN = 256
MAX_COMMENT = 1000
MAX_ACTOR = 128
# A console's clock may be a little behind the node's: a start up to this far in
# the past is taken as "now".
MAX_PAST_START_MS = 60_000
MAX_FUTURE_START_MS = 30 * 24 * 3600 * 1000
MAX_LENGTH_S = 7 * 24 * 3600
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
# Labels every alert carries: a silence matching `*` on these alone covers all.
LABELS_OF_EVERY_ALERT = frozenset({"node", "alertname", "severity"})


class BadSilence(Invalid):
    """The silence asked for is malformed: the message names the field and the rule."""


@dataclass(frozen=True)
class Matcher:
    """The alert's label `label` matches `pattern` (exact, or a glob with `*` and `?`)."""

    label: str
    pattern: str

    @property
    def is_glob(self) -> bool:
        return is_glob(self.pattern)

    @cached_property
    def regex(self) -> str:
        """The pattern as an anchored regex that RE2 and Python's re read alike."""
        return glob_regex(self.pattern)

    def matches(self, value: str) -> bool:
        return glob_matches(self.pattern, value)

    def __str__(self) -> str:
        return f"{self.label}={self.pattern}"


@dataclass(frozen=True)
class Silence:
    """One matcher silence, as stored; changed only by replacing it (expire)."""

    id: str
    matchers: tuple[Matcher, ...]
    starts_unix_ms: int
    ends_unix_ms: int
    created_by: str
    comment: str
    created_unix_ms: int
    expired_by: str = ""

    def state(self, now_unix_ms: int) -> SilenceState:
        return silence_state(self.starts_unix_ms, self.ends_unix_ms, now_unix_ms)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every matcher matches `labels` (an alert's Alertmanager labels)."""
        return all(m.label in labels and m.matches(labels[m.label]) for m in self.matchers)

    def covers(self, labels: Mapping[str, str], now_unix_ms: int) -> bool:
        """Active now and matching `labels`."""
        return self.state(now_unix_ms) is SilenceState.ACTIVE and self.matches(labels)

    @property
    def covers_everything(self) -> bool:
        """Matches every alert of the node (only `*` patterns on labels every alert has)."""
        return all(
            m.label in LABELS_OF_EVERY_ALERT and set(m.pattern) == {"*"} for m in self.matchers
        )

    def expired(self, now_unix_ms: int, actor: str) -> Silence:
        """Ended now by `actor`; a pending one never starts (its start moves to now too)."""
        return replace(
            self,
            starts_unix_ms=min(self.starts_unix_ms, now_unix_ms),
            ends_unix_ms=now_unix_ms,
            expired_by=actor,
        )

    def describe(self) -> str:
        """One line for an event: what it matches, when, by whom, why."""
        what = " ".join(str(m) for m in self.matchers)
        if self.covers_everything:
            what += " (every alert of this node)"
        window = f"{rfc3339(self.starts_unix_ms)} .. {rfc3339(self.ends_unix_ms)}"
        return f"silence {self.id} [{what}] {window} by {self.created_by}: {self.comment}"


@dataclass(frozen=True)
class AlertSilence:
    """One alert's own silence (SilenceAlert): until when, by whom, why, and since when."""

    until_unix_ms: int
    by: str
    reason: str
    since_unix_ms: int


@dataclass(frozen=True)
class Window:
    starts_unix_ms: int
    ends_unix_ms: int


def check_matchers(pairs: Sequence[tuple[str, str]]) -> tuple[Matcher, ...]:
    """Matchers from (label, pattern) pairs, or BadSilence naming the first bad one."""
    if not pairs:
        raise BadSilence(
            "a silence needs at least one matcher (label and pattern); to silence every "
            "alert of this node, match alertname=*"
        )
    if len(pairs) > MAX_MATCHERS:
        raise BadSilence(f"a silence has at most {MAX_MATCHERS} matchers, got {len(pairs)}")
    for position, (label, pattern) in enumerate(pairs, 1):
        _check_matcher(position, label, pattern)
    return tuple(Matcher(label, pattern) for label, pattern in pairs)


def _check_matcher(position: int, label: str, pattern: str) -> None:
    where = f"matcher {position}"
    if not label:
        raise BadSilence(f"{where}: label is empty (node, alertname, severity, gpu, UUID, pid…)")
    if len(label) > MAX_LABEL:
        raise BadSilence(f"{where}: label is longer than {MAX_LABEL} characters")
    if not _LABEL_NAME.fullmatch(label):
        raise BadSilence(f"{where}: label {label!r} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)")
    if label.startswith("__"):
        raise BadSilence(f"{where}: label {label!r}: names starting with __ are reserved")
    if not pattern:
        raise BadSilence(f"{where} ({label}): pattern is empty; use * for any value")
    if len(pattern) > MAX_PATTERN:
        raise BadSilence(f"{where} ({label}): pattern is longer than {MAX_PATTERN} characters")


def check_text(comment: str, actor: str) -> None:
    if not comment.strip():
        raise BadSilence("a silence needs a comment: say why these alerts may stay quiet")
    if len(comment) > MAX_COMMENT:
        raise BadSilence(f"comment is longer than {MAX_COMMENT} characters")
    if len(actor) > MAX_ACTOR:
        raise BadSilence(f"actor is longer than {MAX_ACTOR} characters")


def check_window(now_ms: int, starts_ms: int, ends_ms: int, duration_s: int) -> Window:
    """The silence's start and end from a request, or BadSilence saying what is wrong.

    Args:
        now_ms: the node's clock.
        starts_ms: 0 for now; else up to a minute in the past (taken as now) or up to
            30 days ahead.
        ends_ms: the end, or 0 when `duration_s` gives it.
        duration_s: seconds from the start, or 0 when `ends_ms` gives the end.
    """
    starts = now_ms if starts_ms == 0 else starts_ms
    if starts < now_ms - MAX_PAST_START_MS:
        raise BadSilence(
            f"starts_unix_ms {starts_ms} ({_when(starts_ms)}) is {(now_ms - starts) // 1000} s "
            f"in the past; a silence starts now (0) or later (at most 60 s ago is taken as now)"
        )
    if starts > now_ms + MAX_FUTURE_START_MS:
        raise BadSilence(
            f"starts_unix_ms {starts_ms} ({_when(starts_ms)}) is more than 30 days ahead"
        )
    starts = max(starts, now_ms)
    if ends_ms and duration_s:
        raise BadSilence("give the end as ends_unix_ms or as duration_s, not both")
    if not ends_ms and not duration_s:
        raise BadSilence("say when the silence ends: ends_unix_ms or duration_s")
    ends = ends_ms or starts + duration_s * 1000
    if ends <= starts:
        raise BadSilence(
            f"ends_unix_ms {ends_ms} ({_when(ends_ms)}) is not after the start "
            f"{starts} ({_when(starts)})"
        )
    if ends - starts > MAX_LENGTH_S * 1000:
        raise BadSilence(
            f"a silence lasts at most 7 days ({MAX_LENGTH_S} s); this one would last "
            f"{(ends - starts) // 1000} s"
        )
    return Window(starts, ends)


def _when(unix_ms: int) -> str:
    """`unix_ms` readable, or 'out of range' for values no clock will show."""
    if not -62_135_596_800_000 < unix_ms < 253_402_300_800_000:  # years 1 .. 9999
        return "out of range"
    return rfc3339(unix_ms)


# -- Alertmanager ---------------------------------------------------------------------


def to_alertmanager(silence: Silence, node_labels: Mapping[str, str]) -> AmSilence:
    """The silence as Alertmanager holds it: globs as regexes, exact values as they are.

    The node's own labels are added as exact matchers, so a silence made on one node
    never mutes another node's alerts in an Alertmanager that the fleet shares (all
    must match, as on the node, where every alert carries them: `node=gpu-0*` made on
    gpu-01 covers gpu-01's alerts, here and there).
    """
    matchers = [
        AmMatcher(m.label, m.regex, is_regex=True) if m.is_glob else AmMatcher(m.label, m.pattern)
        for m in silence.matchers
    ]
    matchers += [
        m for m in (AmMatcher(k, v) for k, v in sorted(node_labels.items())) if m not in matchers
    ]
    return AmSilence(
        key=silence.id, matchers=tuple(matchers), starts_unix_ms=silence.starts_unix_ms,
        ends_unix_ms=silence.ends_unix_ms, created_by=silence.created_by,
        comment=silence.comment,
    )  # fmt: skip


def alert_silence_to_alertmanager(
    alert_id: str, labels: Mapping[str, str], starts_ms: int, ends_ms: int, by: str, reason: str
) -> AmSilence:
    """A per-alert silence (SilenceAlert): exactly the alert's label set, key "alert:<id>"."""
    matchers = tuple(AmMatcher(k, v) for k, v in sorted(labels.items()))
    return AmSilence(
        key=f"alert:{alert_id}", matchers=matchers, starts_unix_ms=starts_ms,
        ends_unix_ms=ends_ms, created_by=by, comment=reason,
    )  # fmt: skip
