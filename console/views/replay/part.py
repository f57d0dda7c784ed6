"""ReplayPart: incident replay's time cursor, the strip under the grid and its banner.

It wires the strip to the session's ReplaySource (which feeds the fleet model from a
past moment) and its player (Play, player.py), keeps the timeline's window, its alert
marks and its outage and action marks current, and binds the keys: Ctrl+T goes to the
timeline, Esc or L back to live while the past is shown. Nothing
that changes the fleet is offered then: the fleet model refuses every change with
"showing the past" (FleetModel.role_refusal), so each panel greys or hides its actions
as it does for a role that may not act, and drops are refused (TileDropRules).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt
from PySide6.QtGui import QGuiApplication, QKeySequence, QShortcut

from console.fleet.model import GpuKey
from console.fleet.moment_link import Place, share_command
from console.fleet.query_round import QueryRound
from console.fleet.timeline import (
    WINDOWS,
    EventMark,
    Mark,
    PastEvents,
    PastGaps,
    alert_marks,
    event_marks,
    gap_marks,
    merged_events,
    moment_text,
    next_mark,
    parse_moment,
    previous_mark,
)
from console.fleet.updates import QueryResult
from console.qt.named_timer import named_timer
from console.views.common.frame import WindowFrame
from console.views.replay.banner import ReplayBanner
from console.views.replay.player import ReplayPlayer
from console.views.replay.strip import SHARE_KEY, ReplayStrip

FOCUS_KEY = "Ctrl+T"
LIVE_KEYS = ("Esc", "L")
CLOCK_MS = 1000


def _now_ms() -> int:
    return int(time.time() * 1000)


class ReplayPart(QObject):
    def __init__(self, frame: WindowFrame, shown_gpu: Callable[[], GpuKey | None]) -> None:
        """`shown_gpu`: the GPU the detail shows, for Share."""
        super().__init__()
        self._shown_gpu = shown_gpu
        session = frame.session
        self._frame, self._fleet, self.source = frame, session.fleet, session.replay
        self.strip = ReplayStrip()
        self.banner = ReplayBanner(session.fleet)
        self.player = ReplayPlayer(session.fleet, self.source, lambda: self.strip.bar.start_ms)
        window = frame.window()
        self.focus_key = QShortcut(QKeySequence(FOCUS_KEY), window, self.strip.bar.setFocus)
        self.share_key = QShortcut(QKeySequence(SHARE_KEY), window, self.share)
        # How this console was opened, for the shared command (`gpufleet console` sets
        # the words it was given: --profile, --node): by default its profile's name.
        self.opened_with: list[str] = (
            ["--profile", session.profile] if session.profile
            else [word for node in session.fleet for word in ("--node", node.target)]
        )  # fmt: skip
        # Each node's events of the window from before the console connected (ListEvents),
        # asked on entering the past and on a new window: the marks of a night gone.
        self.past: dict[str, PastEvents] = {}
        self.gaps: dict[str, PastGaps] = {}  # and where their histories have none
        self._past_marks_made: tuple[list[Mark], list[EventMark]] | None = None
        self._past_round = QueryRound()
        self._past_since_ms: int | None = None  # the window start they were asked from
        self.live_keys = [QShortcut(QKeySequence(k), window, self.source.go_live)
                          for k in LIVE_KEYS]  # fmt: skip
        for key in self.live_keys:
            key.setContext(Qt.ShortcutContext.WindowShortcut)
            key.setEnabled(False)  # only while the past is shown: Esc has other jobs
        # The window ends now while live; it holds still while a moment is shown.
        self._clock = named_timer(
            self.strip, "gpufleet-replay-clock", self._on_clock_timeout, interval_ms=CLOCK_MS
        )  # dies with the strip, never firing into a wrapper gone
        self._past_refresh = named_timer(
            self.strip, "gpufleet-replay-past-marks", self._refresh, single_shot=True
        )
        # The answers a pump applies (Play asks several nodes a frame) refresh the strip and
        # the banner once, after it: the marks are sorted sets of the window's thousands.
        self._refresh_soon = named_timer(
            self.strip, "gpufleet-replay-refresh", self._refresh, single_shot=True
        )
        self._anchor(_now_ms())
        self._wire()
        self._clock.start()

    def _wire(self) -> None:
        strip, source = self.strip, self.source
        strip.momentWanted.connect(source.show)
        strip.liveWanted.connect(source.go_live)
        strip.alertStep.connect(self.step_alert)
        strip.typed.connect(self.show_typed)
        strip.windowChanged.connect(self._on_strip_window_changed)
        strip.shareWanted.connect(self.share)
        strip.playToggled.connect(self.player.toggle)
        strip.speedChanged.connect(self.player.set_speed)
        self.player.playingChanged.connect(strip.show_playing)
        self.player.noteChanged.connect(self.banner.set_note)
        self.player.reachedPresent.connect(self._frame.show_message)
        source.momentChanged.connect(self._on_source_moment_changed)
        source.answered.connect(self._on_source_answered)
        self._frame.session.pump.fleetChanged.connect(self._on_pump_fleet_changed)
        self._frame.session.pump.eventsArrived.connect(self._on_pump_events_arrived)
        self._frame.session.pump.queryFinished.connect(self._on_pump_query_finished)

    @property
    def marks(self) -> list[Mark]:
        """The alerts raised in the window: those the console holds, and the moment's."""
        alerts = self._fleet.live_alerts.alerts()
        if self._fleet.moment is not None:
            alerts += self._fleet.moment.alerts.alerts()
        held = alert_marks(alerts, self.strip.bar.start_ms, self.strip.bar.end_ms)
        return sorted({*held, *self._past_marks()[0]})

    @property
    def event_marks(self) -> list[EventMark]:
        """The node outages and the actions in the window, from the events the console
        holds and the nodes' journals before it connected."""
        bar, fleet = self.strip.bar, self._fleet
        held = event_marks(fleet.live_alerts.events(), fleet.name_of, bar.start_ms, bar.end_ms)
        return sorted({*held, *self._past_marks()[1]})

    def _past_marks(self) -> tuple[list[Mark], list[EventMark]]:
        """The marks of the nodes' journals before connect, made again only when an answer
        or the window changes (a month of a large fleet's: many thousand events, and the
        strip asks every frame while Play runs)."""
        if self._past_marks_made is None:
            bar = self.strip.bar
            events = merged_events(*(past.events for past in self.past.values()))
            raised = [e.alert for e in events if e.alert is not None]
            name_of, start, end = self._fleet.name_of, bar.start_ms, bar.end_ms
            gaps = [mark for target, found in self.gaps.items()
                    for mark in gap_marks(found, name_of(target), start, end)]  # fmt: skip
            self._past_marks_made = (
                alert_marks(raised, bar.start_ms, bar.end_ms),
                event_marks(events, name_of, bar.start_ms, bar.end_ms) + gaps,
            )
        return self._past_marks_made

    def _ask_past(self) -> None:
        """Each node's marked events of the window (once per window start)."""
        since = self.strip.bar.start_ms
        if since == self._past_since_ms:
            return
        self._past_since_ms, self._past_round = since, QueryRound()
        queries, until = self._frame.session.queries, _now_ms()
        for node in self._fleet:
            round_ = self._past_round
            queries.past_events(node.target, since, until, round_.expect(node.target, "events"))
            if node.info is not None and node.info.gpus:  # its history's gaps: one GPU's
                gpu = node.info.gpus[0].index
                queries.past_gaps(node.target, gpu, since, until, round_.expect(node.target))

    def _on_pump_query_finished(self, result: QueryResult) -> None:
        if not self._past_round.take(result):
            return
        # A node that cannot say (an older daemon: UNIMPLEMENTED; unreachable; history
        # off) keeps only the marks of what the console received from it.
        payload = result.payload if result.ok else None
        if isinstance(payload, PastGaps):
            self.gaps[result.target] = payload
        elif isinstance(payload, PastEvents):
            self.past[result.target] = payload
            if payload.truncated:
                self._frame.show_message(
                    f"Replay: {self._fleet.name_of(result.target)} holds more marked events "
                    f"in the window than {len(payload.events):,}: the oldest are not "
                    "marked; a shorter window shows them"
                )  # fmt: skip
        else:
            return
        self._past_marks_made = None
        if not self._past_refresh.isActive():  # once for the frame's answers
            self._past_refresh.start(0)

    def step_alert(self, direction: int) -> None:
        """To the previous (-1) or next (+1) alert's raise in the window."""
        marks = self.marks
        at = self.source.at_ms
        if direction < 0:
            found = previous_mark(marks, self.strip.bar.end_ms if at is None else at)
        else:
            found = None if at is None else next_mark(marks, at)
        if found is None:
            self._frame.show_message("Replay: no earlier alert in the window" if direction < 0
                                     else "Replay: no later alert in the window")  # fmt: skip
            return
        self.source.show(found)

    def show_typed(self, text: str) -> None:
        try:
            at_ms = parse_moment(text, _now_ms())
        except ValueError as exc:
            self._frame.show_message(f"Replay: {exc}")
            return
        if at_ms < self.strip.bar.start_ms:
            self._frame.show_message("Replay: before the timeline's window; shown all the same")
        self.source.show(at_ms)

    def show_at(self, at_ms: int) -> None:
        """Show `at_ms`, the timeline's window the shortest that reaches back to it."""
        back = _now_ms() - at_ms
        fits = [label for label, span in WINDOWS.items() if span >= back]
        self.strip.window_box.setCurrentText(fits[0] if fits else list(WINDOWS)[-1])
        self.source.show(at_ms)

    def share(self) -> str:
        """Copy the command that opens this moment (now, while live) and the GPU shown in
        the detail; the status bar says it. Returns it."""
        at_ms = self.source.at_ms if self.source.at_ms is not None else _now_ms()
        shown = self._shown_gpu()
        place = (
            None
            if shown is None
            else Place(shown.target, self._fleet.name_of(shown.target), shown.index)
        )
        command = share_command(at_ms, self.opened_with, place)
        QGuiApplication.clipboard().setText(command)
        what = moment_text(at_ms) + ("" if place is None else f", {place.node_name} GPU "
                                     f"{place.gpu}")  # fmt: skip
        self._frame.show_message(f"Copied the command that opens {what}: paste it in a "
                                 "terminal, or send it")  # fmt: skip
        return command

    def _anchor(self, now_ms: int) -> None:
        self.strip.bar.set_span(now_ms - self.strip.window_ms, now_ms)
        self._past_marks_made = None  # the window moved
        self._refresh()

    def _on_strip_window_changed(self, _window_ms: int) -> None:
        self._anchor(_now_ms())
        if self.source.at_ms is not None:
            self._ask_past()

    def _on_clock_timeout(self) -> None:
        if self.source.at_ms is None:
            self._anchor(_now_ms())

    def _on_source_moment_changed(self, at_ms: int | None) -> None:
        for key in self.live_keys:
            key.setEnabled(at_ms is not None)
        if at_ms is None:
            # Live: the marks of what the console receives; entering the past asks afresh.
            self.past, self.gaps, self._past_since_ms = {}, {}, None
            self._anchor(_now_ms())
        else:
            self._ask_past()
        self.strip.show_moment(at_ms)
        self._refresh()

    def _on_pump_fleet_changed(self, _changes: object) -> None:
        if self._fleet.moment is not None:
            self.banner.refresh()

    def _on_pump_events_arrived(self, _events: object) -> None:
        if self.source.at_ms is None:  # live: the window ends now, the news within it
            self._anchor(_now_ms())
        elif not self._refresh_soon.isActive():
            self._refresh_soon.start(0)

    def _on_source_answered(self) -> None:
        moment = self._fleet.moment
        if moment is not None and moment.step_ms:  # a step of the cursor: one such sample
            self.strip.bar.sample_step_ms = moment.step_ms
        if not self._refresh_soon.isActive():
            self._refresh_soon.start(0)

    def _refresh(self) -> None:
        self.strip.show_marks(self.marks, self.event_marks, self.source.at_ms)
        self.banner.refresh()
