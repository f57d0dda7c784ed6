"""What each scripted event (scenario.py lists the kinds) does to a simulated GPU."""

from __future__ import annotations

import logging
from collections.abc import Callable

from node_daemon.backends.simulated.gpu import SimulatedGpu
from node_daemon.backends.simulated.memory import MIB, Leak, Sawtooth, WeightLoad
from node_daemon.backends.simulated.scenario import ScenarioEvent
from node_daemon.backends.simulated.specs import GIB

log = logging.getLogger(__name__)

# Failed cooling multiplies the thermal resistance: full load then settles near 100 °C.
OVERHEAT_FACTOR = 1.75
# A failing fan, the controller running it at 100 %, leaves some cooling: an H100 at full
# load heads for 97 °C (and slows down at 87 °C); capped to 80 % power it stays near 83 °C.
FAN_FAIL_FACTOR = 1.6
# A misbehaving board (or a raised limit elsewhere): draws 8 % above its limit.
OVERPOWER_FACTOR = 1.08
BUSY_UTIL, IDLE_LEAK_UTIL, IDLE_SAWTOOTH_UTIL = 90.0, 3.0, 8.0
XID_FALLEN_OFF_BUS = 79


def apply_event(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    HANDLERS[event.kind](gpu, event)


def _overheat(gpu: SimulatedGpu, _event: ScenarioEvent) -> None:
    gpu.cooling.fail(gpu.now_s, OVERHEAT_FACTOR, ramp_s=0.0, fan_to_max=False)
    gpu.forced_util = 100.0


def _fan_fail(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    # Slowly: a clogged heatsink, a failing fan bearing. The fan controller runs the fan
    # to its maximum, and still the temperature keeps rising under the job's full load.
    ramp_s = event.get("minutes") * 60
    gpu.cooling.fail(gpu.now_s, FAN_FAIL_FACTOR, ramp_s=ramp_s, fan_to_max=True)
    gpu.forced_util = 100.0


def _cool(gpu: SimulatedGpu, _event: ScenarioEvent) -> None:
    gpu.cooling.restore()
    gpu.forced_util = None
    gpu.power_factor = 1.0


def _load(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.forced_util = max(0.0, min(100.0, event.value or 0.0))
    if gpu.forced_util > 0 and not gpu.processes:
        gpu.spawn()


def _overpower(gpu: SimulatedGpu, _event: ScenarioEvent) -> None:
    gpu.forced_util = 100.0
    gpu.power_factor = OVERPOWER_FACTOR


def _idle(gpu: SimulatedGpu, _event: ScenarioEvent) -> None:
    if not gpu.processes:
        gpu.spawn()
    gpu.forced_util = 0.0


def _busy_or(gpu: SimulatedGpu, event: ScenarioEvent, idle_util: float) -> None:
    gpu.forced_util = BUSY_UTIL if event.get("busy") else idle_util


def _leak(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    _busy_or(gpu, event, IDLE_LEAK_UTIL)
    rate = event.get("rate_mib_per_min") * MIB / 60
    gpu.spawn(Leak(1 * GIB, rate), command="python serve_embeddings.py --port 8100")


def _weight_load(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    # Loading is I/O-bound (the GPU idles while memory climbs), then it serves, busy.
    load = WeightLoad(event.get("gib") * GIB)
    gpu.spawn(load, command="python -m vllm.entrypoints.api_server --model llama-70b")
    gpu.forced_util = 0.0
    gpu.util_plan = [(gpu.now_s + load.shards * load.shard_s, BUSY_UTIL)]


def _alloc_free(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    _busy_or(gpu, event, IDLE_SAWTOOTH_UTIL)
    sawtooth = Sawtooth(1 * GIB, event.get("gib") * GIB, event.get("period_s"))
    gpu.spawn(sawtooth, command="python preprocess.py --cache-on-gpu")


def _ecc(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.ras.ecc_uncorrected += int(event.get("count"))


def _ecc_correctable(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.ras.ecc_corrected += int(event.get("count"))


def _ecc_storm(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.ras.start_storm("ecc", event.get("rate"))


def _remap_pending(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.ras.remapped_uncorrectable += int(event.get("rows"))
    gpu.ras.remap_pending = True


def _remap_failure(gpu: SimulatedGpu, _event: ScenarioEvent) -> None:
    gpu.ras.remap_failure = True


def _pcie_replay_storm(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.ras.start_storm("pcie", event.get("rate"))


def _nvlink_down(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    link = int(event.get("link"))
    if link >= gpu.ras.links:
        log.warning(
            "scenario: nvlink_down of link %d ignored: GPU %d (%s) has %d NVLink links",
            link, gpu.index, gpu.spec.name, gpu.ras.links,
        )  # fmt: skip
        return
    gpu.ras.links_down.add(link)


def _nvlink_errors(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.ras.start_storm("nvlink", event.get("rate"))


def _xid(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    code = int(event.get("xid"))
    gpu.pending_xids.append(code)
    if code == XID_FALLEN_OFF_BUS:
        gpu.falling = True  # this tick's reading carries the Xid; the next finds it lost


def _stutter(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.stutter_until_s = gpu.now_s + event.get("seconds")


def _lost(gpu: SimulatedGpu, _event: ScenarioEvent) -> None:
    gpu.fall_off_bus()


def _recover(gpu: SimulatedGpu, _event: ScenarioEvent) -> None:
    gpu.lost = False


def _recovery_action(gpu: SimulatedGpu, event: ScenarioEvent) -> None:
    gpu.ras.recovery_action = int(event.get("value"))


def _reset(gpu: SimulatedGpu, _event: ScenarioEvent) -> None:
    gpu.ras.reset()


HANDLERS: dict[str, Callable[[SimulatedGpu, ScenarioEvent], None]] = {
    "overheat": _overheat, "fan_fail": _fan_fail, "cool": _cool, "load": _load,
    "overpower": _overpower, "idle": _idle, "leak": _leak, "weight_load": _weight_load,
    "alloc_free": _alloc_free, "ecc": _ecc, "ecc_correctable": _ecc_correctable,
    "ecc_storm": _ecc_storm, "remap_pending": _remap_pending, "remap_failure": _remap_failure,
    "pcie_replay_storm": _pcie_replay_storm, "nvlink_down": _nvlink_down,
    "nvlink_errors": _nvlink_errors, "xid": _xid, "stutter": _stutter, "lost": _lost,
    "recover": _recover, "recovery_action": _recovery_action, "reset": _reset,
}  # fmt: skip
