"""Healer: after each sweep, what self-healing does about what it sees, when allowed.

A step of the daemon's after-sweep work (node_daemon.server), on the sampler
thread, after the alert rules. Each policy (drain, power cap, leak, reset,
reboot) proposes actions from the tick's readings, processes, conditions and
firing alerts; the healer carries each out once:

- mode "off": nothing is decided. "dry-run": what would be done is reported
  (outcome "would do") and nothing else. "on": it is done, and the outcome
  reported.
- Reported = an EVENT_KIND_HEALING_ACTION event, an audit record (user
  "self-healing") and a line in the log. Consoles pop up each healing event
  that is no dry run (console/fleet/healing_notices.py), so no alert is raised
  for it besides: that would pop up twice. The fault that called for the
  action is an alert of its own already (gpu_health, gpu_temp, memory_leak).
- The same action is reported once while it stays proposed (a dry run's
  "would do", a refusal, "rate limited"): no event per tick. A refusal or a
  failure is tried again after the action's cooldown.
- Slow actions (a kill's grace, a command) run on one worker thread
  ("gpufleet-healing"), never on the sampler's; the power limit is set on the
  sampler thread, which owns the backend.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from node_daemon.auth.audit import AuditError, AuditLog
from node_daemon.healing.limits import RateLimits
from node_daemon.healing.memory import HealingMemory
from node_daemon.healing.model import (
    ACTOR,
    DONE,
    RATE_LIMITED,
    WOULD_DO,
    Action,
    HealingPolicy,
    Report,
    policy_of,
)
from node_daemon.healing.settings import HealingSettings
from node_daemon.healing.view import NodeNow
from node_daemon.healing.wire import action_event
from node_daemon.journal.event_journal import EventJournal

log = logging.getLogger(__name__)

# How long stop() waits for an action under way (a kill's grace, a command) to end.
STOP_WAIT_S = 15.0


class Policy(Protocol):
    table: str

    def decide(self, now: NodeNow, settings: HealingSettings, dry_run: bool) -> list[Action]: ...

    def refusal(self, action: Action, now: NodeNow, settings: HealingSettings) -> str | None: ...

    def slow(self, action: Action, settings: HealingSettings) -> bool: ...

    def execute(self, action: Action, now: NodeNow, settings: HealingSettings) -> str: ...

    def settled(self, report: Report, now: NodeNow, settings: HealingSettings) -> None: ...


@dataclass(frozen=True)
class _Seen:
    """The last report of a proposed action: what it said, in which mode, when."""

    outcome: str
    dry_run: bool
    at_s: float


class Healer:
    def __init__(
        self,
        settings: HealingSettings,
        policies: list[Policy],
        memory: HealingMemory,
        journal: EventJournal,
        audit: AuditLog | None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._settings, self._policies, self._memory = settings, policies, memory
        self._journal, self._audit, self._clock = journal, audit, clock
        # A dry run's limits apart: what it "would" have done must not hold back "on".
        self._limits = RateLimits(memory.state.taken)
        self._dry_limits = RateLimits()
        self._lock = threading.RLock()
        self._idle = threading.Condition(self._lock)  # notified when an action ends
        self._seen: dict[str, _Seen] = {}
        self._in_flight: set[str] = set()
        self._worker: ThreadPoolExecutor | None = None
        self._stopped = False

    # -- wiring and settings -----------------------------------------------------

    def reconfigure(self, settings: HealingSettings) -> None:
        """A reloaded [healing]: in force from the next tick. Warnings, the rate limit's
        history and actions under way are kept; a new mode reports afresh."""
        with self._lock:
            if settings.mode != self._settings.mode:
                self._seen.clear()
            self._settings = settings

    @property
    def settings(self) -> HealingSettings:
        return self._settings

    def policy(self) -> HealingPolicy:
        """For GetHealth (node_daemon.healing.wire.policy_message)."""
        return policy_of(self._settings)

    def stop(self, timeout_s: float = STOP_WAIT_S) -> None:
        """No new actions; one under way gets `timeout_s` to finish and be journaled."""
        with self._lock:
            self._stopped = True
            worker, self._worker = self._worker, None
        if worker is None:
            return
        worker.shutdown(wait=False, cancel_futures=True)
        with self._idle:
            if not self._idle.wait_for(lambda: not self._in_flight, timeout_s):
                log.warning("self-healing: stopping with %s still under way",
                            ", ".join(sorted(self._in_flight)))  # fmt: skip

    # -- each tick ---------------------------------------------------------------

    def tick(self, now: NodeNow) -> None:
        settings = self._settings
        if not settings.acting:
            return
        dry_run = settings.mode == "dry-run"
        proposed: set[str] = set()
        for policy in self._policies:
            if not getattr(settings, policy.table).enabled:
                continue
            try:
                actions = policy.decide(now, settings, dry_run)
            except Exception:
                log.exception("self-healing: the %s policy failed to decide", policy.table)
                continue
            for action in actions:
                proposed.add(action.key)
                try:
                    self._consider(policy, action, now, settings, dry_run)
                except Exception:  # a bug in one action must not keep the others from running
                    log.exception("self-healing: %s failed", action.key)
        with self._lock:
            # What is no longer called for is forgotten: called for again, it is new. (One
            # under way is kept from starting twice by _in_flight, not by this.)
            for key in [k for k in self._seen if k not in proposed]:
                del self._seen[key]

    def _consider(
        self,
        policy: Policy,
        action: Action,
        now: NodeNow,
        settings: HealingSettings,
        dry_run: bool,
    ) -> None:
        with self._lock:
            if action.key in self._in_flight or self._stopped:
                return
            seen = self._seen.get(action.key)
        if seen is not None and seen.dry_run == dry_run and not self._again(seen, action, now):
            return
        refusal = policy.refusal(action, now, settings)
        if refusal is not None:
            if seen is None or seen.outcome != refusal:
                self._report(policy, Report(action, refusal, dry_run), now, settings)
            return
        limits = self._dry_limits if dry_run else self._limits
        if not action.step:
            why = limits.why_not(action, settings, now.now_s)
            if why is not None:
                if seen is None or seen.outcome != RATE_LIMITED:
                    limited = Action(action.action, f"{action.reason}; {why}", action.gpu,
                                     action.pid, action.step)  # fmt: skip
                    self._report(policy, Report(limited, RATE_LIMITED, dry_run), now, settings,
                                 key=action.key)  # fmt: skip
                return
            limits.take(action, now.now_s)
        if dry_run:
            self._report(policy, Report(action, WOULD_DO, dry_run), now, settings)
        elif policy.slow(action, settings):
            self._in_background(policy, action, now, settings)
        else:
            outcome = self._execute(policy, action, now, settings)
            self._report(policy, Report(action, outcome, dry_run), now, settings)

    def _again(self, seen: _Seen, action: Action, now: NodeNow) -> bool:
        """Whether an action reported before is tried again now."""
        if seen.outcome == RATE_LIMITED:
            return True  # silently, until the limit lets it through
        if seen.outcome in (DONE, WOULD_DO):
            return False
        cooldown = getattr(self._settings, action.table).cooldown_s
        return now.now_s - seen.at_s >= cooldown  # a refusal or a failure

    def _execute(
        self, policy: Policy, action: Action, now: NodeNow, settings: HealingSettings
    ) -> str:
        try:
            return policy.execute(action, now, settings)
        except Exception as exc:
            log.exception("self-healing: %s failed", action.key)
            return f"failed: {exc}"

    def _in_background(
        self, policy: Policy, action: Action, now: NodeNow, settings: HealingSettings
    ) -> None:
        with self._lock:
            if self._worker is None:
                self._worker = ThreadPoolExecutor(1, thread_name_prefix="gpufleet-healing")
            self._in_flight.add(action.key)
            worker = self._worker
            # Kept before it runs: a reboot leaves no time to keep its place in the limits.
            self._memory.state.taken = self._limits.history()

        def run() -> None:
            outcome = self._execute(policy, action, now, settings)
            self._report(policy, Report(action, outcome, False), now, settings)
            with self._lock:
                self._in_flight.discard(action.key)
                self._idle.notify_all()

        worker.submit(run)

    # -- reporting ---------------------------------------------------------------

    def _report(
        self,
        policy: Policy,
        report: Report,
        now: NodeNow,
        settings: HealingSettings,
        key: str | None = None,
    ) -> None:
        """Journal (with the state to keep), audit, announce and log one report."""
        at_s = self._clock()
        with self._lock:
            self._seen[key or report.action.key] = _Seen(report.outcome, report.dry_run, at_s)
            if report.outcome != RATE_LIMITED:
                policy.settled(report, now, settings)
            self._memory.state.taken = self._limits.history()
            record = self._memory.record()
        event = action_event(report, int(at_s * 1000))
        # What was done is an observation: held in memory while the disk is full, and
        # written (before anything newer) once there is room, as the alert engine's are.
        self._journal.record_or_hold([event], [], [record])
        self._audit_record(report)
        log.info("%s", event.summary)

    def _audit_record(self, report: Report) -> None:
        if self._audit is None:
            return
        action = report.action
        params = json.dumps({"dry_run": report.dry_run, "reason": action.reason,
                             "step": action.step}, sort_keys=True)  # fmt: skip
        try:
            self._audit.append(ACTOR, "local", f"healing.{action.action}", action.target,
                               params, report.outcome[:1000])  # fmt: skip
        except AuditError as exc:
            log.error("self-healing: %s %s not audited: %s", action.action, action.target, exc)
