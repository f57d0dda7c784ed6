"""HealthAssessor: each GPU's condition, judged every tick, changed by people and healing.

`judge` is the sampler's HealthJudge: it runs on the sampler thread before each batch
is built, so it does no I/O except when something that must outlive the daemon
changed (a sticky reason, a drain, the repeat-offender history); then the store is
written. Drains, clears and power caps come from RPC threads and self-healing. One
lock guards the trackers; listeners are called outside it, in the order the changes
were made, with (old condition or None, new condition, actor: "" for the daemon's own).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from node_daemon.backends.readings import GpuReading, GpuStatic, ProcessReading
from node_daemon.errors import Invalid, Refused
from node_daemon.health.boot import current_boot_id
from node_daemon.health.model import Drain, GpuCondition, HealthReason, HealthState
from node_daemon.health.settings import HealthSettings
from node_daemon.health.signals import INSPECT_ACTION
from node_daemon.health.store import HealthStore, StoredHealth
from node_daemon.health.tracker import GpuTracker

log = logging.getLogger(__name__)

# A store that failed (a full disk) is tried again this often, not every tick.
SAVE_RETRY_MS = 30_000
# The reason self-healing gives a GPU its reset or reboot did not cure.
REPAIR_FAILED = "repair_failed"
HealthListener = Callable[[GpuCondition | None, GpuCondition, str], None]
_Change = tuple[GpuCondition | None, GpuCondition, str]


class HealthAssessor:
    """The node's GPUs' health. Thread-safe."""

    def __init__(
        self,
        settings: HealthSettings,
        store: HealthStore | None = None,
        *,
        boot_id: str | None = None,
    ) -> None:
        self._settings = settings
        self._store = store
        self._boot_id = boot_id if boot_id is not None else current_boot_id()
        self._lock = threading.Lock()
        self._listeners: list[HealthListener] = []
        self._trackers: dict[int, GpuTracker] = {}
        self._saved: dict[int, StoredHealth] = {}
        self._saved_version: dict[int, int] = {}  # each tracker's version as last saved
        self._retry_at_ms: dict[int, int] = {}  # GPUs whose save failed: when to try again
        self._uuids: dict[int, str] = {}
        self._conditions: Mapping[int, GpuCondition] = {}
        self._last_ms = 0  # the latest judged tick's time
        self._load()

    def _load(self) -> None:
        kept = self._store.load() if self._store is not None else {}
        for index, record in kept.items():
            tracker = GpuTracker(index, record)
            if record.boot_id is not None and record.boot_id != self._boot_id:
                tracker.reboot_seen()  # what a reboot cures went with it
                log.info("GPU %d: the node rebooted since its health was kept", index)
            self._trackers[index] = tracker
            self._saved[index] = record
        self._conditions = {i: t.judged(0, self._settings) for i, t in self._trackers.items()}

    # -- wiring ----------------------------------------------------------------

    def add_listener(self, listener: HealthListener) -> None:
        self._listeners.append(listener)

    def reconfigure(self, settings: HealthSettings) -> None:
        """Judge by `settings` from the next tick; every window gathered is kept."""
        with self._lock:
            self._settings = settings

    @property
    def settings(self) -> HealthSettings:
        return self._settings

    def set_gpu_facts(self, gpus: Sequence[GpuStatic]) -> None:
        """The GPUs' UUIDs: a GPU kept under another UUID was swapped, and starts afresh."""
        with self._lock:
            self._uuids = {g.index: g.uuid for g in gpus if g.uuid}
            self._saved_version.clear()  # the UUIDs go into each record at its next save
            for index, uuid in self._uuids.items():
                tracker = self._trackers.get(index)
                before = tracker.kept.uuid if tracker else None
                if tracker is not None and before is not None and before != uuid:
                    log.warning(
                        "GPU %d is another GPU now (%s, was %s): its kept health is "
                        "forgotten, its drain kept",
                        index,
                        uuid,
                        before,
                    )
                    fresh = GpuTracker(index, StoredHealth(index, drain=tracker.kept.drain))
                    self._trackers[index] = fresh

    # -- the sampler's judge ---------------------------------------------------

    def judge(
        self,
        readings: Sequence[GpuReading],
        processes: Mapping[int, Sequence[ProcessReading]],
        now_ms: int,
    ) -> Mapping[int, GpuCondition]:
        """Each GPU's condition at this sweep (the sampler's HealthJudge)."""
        with self._lock:
            settings = self._settings
            present = set()
            for reading in readings:
                present.add(reading.index)
                self._tracker(reading.index).observe(reading, now_ms, settings)
            for index, tracker in self._trackers.items():
                if index not in present:
                    tracker.missed(now_ms, settings)
            self._last_ms = now_ms
            changes = self._rejudge(now_ms, "")
            conditions = self._conditions
        self._announce(changes)
        return conditions

    # -- reads -----------------------------------------------------------------

    def conditions(self) -> Mapping[int, GpuCondition]:
        """The latest condition of each GPU (replaced whole, never mutated)."""
        return self._conditions

    def condition(self, gpu: int) -> GpuCondition | None:
        return self._conditions.get(gpu)

    # -- what people and self-healing do ---------------------------------------

    def drain(self, gpu: int, by: str, reason: str, now_ms: int) -> GpuCondition:
        """Take `gpu` out of placement (again: the newest drain's who and why are kept)."""
        if not reason.strip():
            raise Invalid("a drain needs a reason (what is wrong with the GPU)")
        return self._change(gpu, by, now_ms, lambda t: t.set_drain(Drain(by, reason, now_ms)))

    def undrain(self, gpu: int, by: str, now_ms: int) -> GpuCondition:
        """Return `gpu` to placement; Refused when it is not drained."""

        def undrain(tracker: GpuTracker) -> None:
            if tracker.kept.drain is None:
                raise Refused(f"GPU {gpu} is not drained")
            tracker.set_drain(None)

        return self._change(gpu, by, now_ms, undrain)

    def clear(self, gpu: int, by: str, reason: str, now_ms: int) -> GpuCondition:
        """Forget `gpu`'s sticky reasons after a repair (a reset, a replacement). What the
        hardware still says (a pending remap) comes back at the next tick; a fault within
        repeat_window_h of this makes it a repeat offender."""
        if not reason.strip():
            raise Invalid("clearing a GPU's health needs a reason (what was repaired)")
        log.info("GPU %d: health cleared by %s: %s", gpu, by, reason)
        return self._change(gpu, by, now_ms, lambda t: t.clear(now_ms))

    def needs_inspection(self, gpu: int, summary: str, now_ms: int) -> GpuCondition:
        """Self-healing's reset or reboot did not cure `gpu`: a person must look. The
        reason (`repair_failed`) lasts, across restarts and reboots, until a clear."""
        reason = HealthReason(REPAIR_FAILED, HealthState.NEEDS_INSPECTION, summary,
                              INSPECT_ACTION, now_ms)  # fmt: skip
        return self._change(gpu, "self-healing", now_ms, lambda t: t.needs_inspection(reason))

    def reset_done(self, gpu: int, now_ms: int) -> GpuCondition:
        """Self-healing reset `gpu` (its command succeeded): what a reset cures goes."""
        return self._change(gpu, "self-healing", now_ms, lambda t: t.reset_done(now_ms))

    def set_power_capped(self, gpu: int, watts: float | None) -> None:
        """Self-healing lowered `gpu`'s power limit to `watts` (None: restored)."""
        with self._lock:
            tracker = self._tracker(gpu)
            tracker.set_power_capped(watts)
            changes = self._rejudge(self._last_ms, "self-healing", only=gpu)
        self._announce(changes)

    # -- inside ----------------------------------------------------------------

    def _change(
        self, gpu: int, by: str, now_ms: int, change: Callable[[GpuTracker], None]
    ) -> GpuCondition:
        with self._lock:
            if gpu not in self._trackers and gpu not in self._uuids:
                raise Invalid(f"no GPU {gpu} on this node")
            change(self._tracker(gpu))
            changes = self._rejudge(now_ms, by, only=gpu)
            condition = self._conditions[gpu]
        self._announce(changes)
        return condition

    def _tracker(self, index: int) -> GpuTracker:
        tracker = self._trackers.get(index)
        if tracker is None:
            tracker = self._trackers[index] = GpuTracker(index)
        return tracker

    def _rejudge(self, now_ms: int, actor: str, only: int | None = None) -> list[_Change]:
        """New conditions (of `only`, or all); saves what must last; the changes to tell."""
        changes: list[_Change] = []
        conditions = dict(self._conditions)
        for index, tracker in self._trackers.items():
            if only is not None and index != only:
                continue
            old = conditions.get(index)
            new = tracker.judged(now_ms, self._settings)
            conditions[index] = new
            self._save(index, tracker, now_ms)
            first_news = old is None and (not new.placeable or bool(new.reasons))
            if first_news or (old is not None and _differs(old, new)):
                changes.append((old, new, actor))
        self._conditions = conditions
        return changes

    def _save(self, index: int, tracker: GpuTracker, now_ms: int) -> None:
        if self._saved_version.get(index) == tracker.version:
            return  # nothing lasting changed since the last save (most ticks)
        if now_ms < self._retry_at_ms.get(index, 0):
            return  # the store failed a moment ago (a full disk): not every tick
        kept = tracker.stored()
        record = replace(kept, uuid=self._uuids.get(index, kept.uuid), boot_id=self._boot_id)
        saved = self._saved.get(index)
        if self._store is None or record == saved or (saved is None and record.empty):
            self._saved_version[index] = tracker.version
            return
        try:
            self._store.save(record)
        except Exception as exc:  # kept in memory meanwhile
            if index not in self._retry_at_ms:
                log.error("GPU %d: health state not kept on disk (tried again every %.0f s): "
                          "%s", index, SAVE_RETRY_MS / 1000, exc)  # fmt: skip
            self._retry_at_ms[index] = now_ms + SAVE_RETRY_MS
            return
        if self._retry_at_ms.pop(index, None) is not None:
            log.warning("GPU %d: health state kept on disk again", index)
        self._saved[index] = record
        self._saved_version[index] = tracker.version

    def _announce(self, changes: list[_Change]) -> None:
        for old, new, actor in changes:
            for listener in self._listeners:
                try:
                    listener(old, new, actor)
                except Exception:
                    log.exception("health listener failed")


def _differs(old: GpuCondition, new: GpuCondition) -> bool:
    """A change worth telling: the state, the reasons' codes or the drain."""
    return (
        old.state is not new.state
        or {r.code for r in old.reasons} != {r.code for r in new.reasons}
        or old.drain != new.drain
        or old.power_capped_w != new.power_capped_w
    )
