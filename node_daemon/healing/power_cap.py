"""Lower the power limit of a GPU that keeps overheating; restore it once it is cool.

Overheating is the gpu_temp alert raised `warnings` times within `window_s`
(each raise is a new alert), or the temperature above `above_c` for
`above_for_s`. The cap is `cap_ratio` of the GPU's default limit, never below
its minimum; the restore sets the default limit again. The backend sets it
(NVML: nvmlDeviceSetPowerManagementLimit, root or CAP_SYS_ADMIN), on the
sampler thread that owns it. The assessor keeps the cap (GpuCondition's
power_capped_w), so a restarted daemon still restores it.
"""

from __future__ import annotations

from collections import defaultdict

from gpufleet.v1.gpu_metrics import TEMP_GPU_C
from node_daemon.backends.base import PowerLimitRefused
from node_daemon.backends.readings import GpuStatic
from node_daemon.healing.model import DONE, POWER_CAP, POWER_RESTORE, Action, HeldSince, Report
from node_daemon.healing.settings import HealingSettings, PowerCapSettings
from node_daemon.healing.view import HealthControl, NodeNow

NO_BACKEND = "refused: backend cannot set power limits"


class PowerCapPolicy:
    table = "power_cap"

    def __init__(self, backend: object, control: HealthControl | None) -> None:
        self._backend, self._control = backend, control
        self._raises: dict[int, dict[str, float]] = defaultdict(dict)  # GPU -> alert id -> at s
        self._hot, self._cool = HeldSince(), HeldSince()
        self._capped: dict[int, float] = {}  # without an assessor: what this daemon capped

    def decide(self, now: NodeNow, settings: HealingSettings, dry_run: bool) -> list[Action]:
        s = settings.power_cap
        self._count_raises(now, s)
        actions = []
        for reading in now.readings:
            gpu, temp = reading.index, reading[TEMP_GPU_C]
            condition = now.conditions.get(gpu)
            capped = condition.power_capped_w if condition else self._capped.get(gpu)
            if capped is None:
                self._cool.forget(gpu)
                why = self._overheating(gpu, temp, s, now.now_s)
                if why is not None:
                    actions.append(Action(POWER_CAP, why + _cap_words(now.gpus.get(gpu), s), gpu))
            else:
                self._hot.forget(gpu)
                why = self._cooled(gpu, temp, capped, s, now.now_s)
                if why is not None:
                    actions.append(Action(POWER_RESTORE, why, gpu))
        return actions

    def _count_raises(self, now: NodeNow, s: PowerCapSettings) -> None:
        for alert in now.alerts:
            if alert.rule == "gpu_temp" and alert.gpu_index is not None:
                self._raises[alert.gpu_index].setdefault(alert.id, alert.started_unix_ms / 1000)
        for raises in self._raises.values():
            for alert_id in [a for a, at_s in raises.items() if now.now_s - at_s > s.window_s]:
                del raises[alert_id]

    def _overheating(
        self, gpu: int, temp: float | None, s: PowerCapSettings, now_s: float
    ) -> str | None:
        count = len(self._raises.get(gpu, {}))
        if count >= s.warnings:
            return f"GPU {gpu}: gpu_temp alert raised {count} times within {s.window_s:g} s"
        held = self._hot.held_for(gpu, temp is not None and temp > s.above_c, now_s)
        if held is None or held < s.above_for_s:
            return None
        return f"GPU {gpu} above {s.above_c:g} °C for {held:.0f} s ({temp:.0f} °C now)"

    def _cooled(
        self, gpu: int, temp: float | None, capped: float, s: PowerCapSettings, now_s: float
    ) -> str | None:
        held = self._cool.held_for(gpu, temp is not None and temp < s.cool_c, now_s)
        if held is None or held < s.restore_after_cool_s:
            return None
        return f"GPU {gpu} below {s.cool_c:g} °C for {held:.0f} s (capped at {capped:.0f} W)"

    def refusal(self, action: Action, now: NodeNow, settings: HealingSettings) -> str | None:
        if not callable(getattr(self._backend, "set_power_limit_w", None)):
            return NO_BACKEND
        static = now.gpus.get(action.gpu) if action.gpu is not None else None
        if static is None or _default_w(static) is None:
            return f"refused: GPU {action.gpu}'s default power limit is not known"
        return None

    def slow(self, action: Action, settings: HealingSettings) -> bool:
        return False  # the backend is the sampler thread's: set it there, now

    def execute(self, action: Action, now: NodeNow, settings: HealingSettings) -> str:
        assert action.gpu is not None
        static = now.gpus[action.gpu]
        default = _default_w(static)
        assert default is not None  # refusal() said so
        watts = default if action.action == POWER_RESTORE else cap_w(static, settings.power_cap)
        try:
            self._backend.set_power_limit_w(action.gpu, watts)  # type: ignore[attr-defined]
        except PowerLimitRefused as exc:
            return f"refused: {exc}"
        capped = None if action.action == POWER_RESTORE else watts
        if capped is None:
            self._capped.pop(action.gpu, None)
            self._raises.pop(action.gpu, None)  # a fresh count after the restore
        else:
            self._capped[action.gpu] = capped
        if self._control is not None:
            self._control.set_power_capped(action.gpu, capped)
        return DONE

    def settled(self, report: Report, now: NodeNow, settings: HealingSettings) -> None:
        """The cap is kept by the assessor."""


def _default_w(static: GpuStatic) -> float | None:
    return static.power_limit_default_w or static.power_limit_w


def _cap_words(static: GpuStatic | None, s: PowerCapSettings) -> str:
    default = _default_w(static) if static is not None else None
    if static is None or default is None:
        return ""
    return f"; cap at {cap_w(static, s):g} W ({s.cap_ratio:g} of {default:g} W)"


def cap_w(static: GpuStatic, s: PowerCapSettings) -> float:
    """cap_ratio of the default limit, never below the GPU's minimum."""
    default = _default_w(static) or 0.0
    return round(max(default * s.cap_ratio, static.power_limit_min_w or 0.0), 1)
