"""What each NVIDIA Xid means, what likely caused it and what to do: the Xid catalogue.

Hand-written, next to the generated modules, because both sides read it: the
daemon words its Xid alerts, Alertmanager annotations and health reasons with
it; the console explains an Xid to the person looking at it. Plain Python; it
imports nothing of protobuf.

The codes, meanings and resolution buckets follow NVIDIA's public Xid catalogue
(https://docs.nvidia.com/deploy/xid-errors/), which lists for each code an
immediate action (restart the application, reset the GPU, restart the bare
metal node, contact support, ignore). The words here are ours and say it for an
operator at 3 a.m.; where NVIDIA marks a code "unused" on current GPUs but
older drivers still report it, the older meaning is kept. Each entry also says
which health state the Xid implies for its GPU (`gpufleet.v1.health_states.HealthState`,
the daemon's and the console's own); escalating a repeated fault
(the same Xid again after a reset) is the health assessor's job, not the
catalogue's.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Final

from gpufleet.v1.health_states import HealthState

CATALOGUE_URL: Final = "https://docs.nvidia.com/deploy/xid-errors/"


class Cause(enum.Enum):
    """Where an Xid likely comes from; an entry lists the likely ones, most likely first."""

    APPLICATION = "the application"
    DRIVER = "the driver"
    HARDWARE = "the GPU hardware"
    THERMAL = "overheating"
    POWER = "power delivery"
    MEMORY = "GPU memory (HBM, ECC)"
    NVLINK = "NVLink"
    BUS = "the PCIe bus"
    SYSTEM = "the host system"

    @property
    def words(self) -> str:
        return self.value


class Action(enum.IntEnum):
    """What to do about an Xid, ordered by escalation: a higher action includes the lower."""

    NONE = 0
    RESTART_APPLICATION = 1
    RESET_GPU = 2
    REBOOT_NODE = 3
    INSPECT_HARDWARE = 4

    @property
    def words(self) -> str:
        """As a person reads it: "reset the GPU (nvidia-smi -r)"."""
        return _ACTION_WORDS[self]


_ACTION_WORDS: Final = {
    Action.NONE: "no action needed",
    Action.RESTART_APPLICATION: "restart the application",
    Action.RESET_GPU: "reset the GPU (nvidia-smi -r)",
    Action.REBOOT_NODE: "reboot the node",
    Action.INSPECT_HARDWARE: "inspect the hardware (likely RMA)",
}


# What an action leaves the GPU in, unless an entry says otherwise.
_HEALTH_OF: Final = {
    Action.NONE: HealthState.HEALTHY,
    Action.RESTART_APPLICATION: HealthState.HEALTHY,
    Action.RESET_GPU: HealthState.NEEDS_RESET,
    Action.REBOOT_NODE: HealthState.NEEDS_REBOOT,
    Action.INSPECT_HARDWARE: HealthState.NEEDS_INSPECTION,
}


@dataclass(frozen=True)
class XidEntry:
    """One Xid code: what it means, where it likely comes from, what to do."""

    code: int
    meaning: str  # a short phrase: "GPU has fallen off the bus"
    causes: tuple[Cause, ...]  # likely causes, most likely first
    action: Action
    health: HealthState
    note: str = ""  # a sentence more, where the action alone would mislead

    @property
    def cause_words(self) -> str:
        """ "the application, the driver or the GPU hardware"."""
        return _joined([cause.words for cause in self.causes])

    @property
    def advice(self) -> str:
        """Cause and action as sentences, the note after them."""
        text = f"Likely cause: {self.cause_words}. What to do: {self.action.words}."
        return f"{text} {self.note}" if self.note else text


def _joined(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _entry(
    code: int,
    meaning: str,
    causes: tuple[Cause, ...],
    action: Action,
    health: HealthState | None = None,
    note: str = "",
) -> XidEntry:
    return XidEntry(code, meaning, causes, action, health or _HEALTH_OF[action], note)


_H = HealthState
_APP, _DRV, _HW, _THERMAL, _POWER = (
    Cause.APPLICATION, Cause.DRIVER, Cause.HARDWARE, Cause.THERMAL, Cause.POWER,
)  # fmt: skip
_MEM, _NVLINK, _BUS, _SYS = Cause.MEMORY, Cause.NVLINK, Cause.BUS, Cause.SYSTEM
_NONE, _RESTART, _RESET, _REBOOT, _INSPECT = (
    Action.NONE, Action.RESTART_APPLICATION, Action.RESET_GPU, Action.REBOOT_NODE,
    Action.INSPECT_HARDWARE,
)  # fmt: skip

_PUSH_BUFFER = (_DRV, _SYS, _BUS)
_ENGINE = (_APP, _DRV, _HW)  # a copy, video or JPEG engine's exception
_ENGINE_NOTE = "Recurring on this GPU with different applications, suspect the GPU."
_DISPLAY_NOTE = "It concerns display output only; compute work is unaffected."
_NVLINK5_NOTE = (
    "NVLink 5 (Blackwell): NVIDIA's decode of the error status tells a fatal error, "
    "which needs the reset, from a corrected one, which needs nothing; recurring on "
    "the same link, inspect the link."
)

_ENTRIES: Final = (
    _entry(1, "invalid or corrupted push buffer stream", _PUSH_BUFFER, _RESTART),
    _entry(2, "invalid or corrupted push buffer stream", _PUSH_BUFFER, _RESTART),
    _entry(3, "invalid or corrupted push buffer stream", _PUSH_BUFFER, _RESTART),
    _entry(4, "invalid or corrupted push buffer stream", _PUSH_BUFFER, _RESTART),
    _entry(6, "invalid or corrupted push buffer stream", _PUSH_BUFFER, _RESTART),
    _entry(7, "invalid or corrupted push buffer address", (_DRV, _BUS), _RESTART),
    _entry(8, "GPU stopped processing (channel timeout)", (_APP, _DRV, _BUS, _THERMAL), _RESTART,
           _H.SUSPECT, "Recurring, check the GPU's temperature and PCIe replay counter."),
    _entry(9, "driver error programming the GPU", (_DRV,), _REBOOT),
    _entry(11, "invalid or corrupted push buffer stream", (_APP, _DRV), _RESTART),
    _entry(12, "driver error handling a GPU exception", (_DRV,), _REBOOT),
    _entry(13, "graphics engine exception", (_APP, _DRV, _HW), _RESTART,
           note="Usually the application's own fault (an out-of-range access or an illegal "
                "instruction: compute-sanitizer finds it). " + _ENGINE_NOTE),
    _entry(16, "display engine hung", (_DRV,), _REBOOT),
    _entry(18, "bus mastering disabled in PCI config space", (_DRV, _BUS), _REBOOT),
    _entry(19, "display engine error", (_DRV,), _REBOOT),
    _entry(20, "invalid or corrupted MPEG push buffer", _PUSH_BUFFER, _RESTART),
    _entry(21, "invalid or corrupted motion estimation push buffer", _PUSH_BUFFER, _RESTART),
    _entry(22, "invalid or corrupted video processor push buffer", _PUSH_BUFFER, _RESTART),
    _entry(24, "GPU semaphore timeout", (_APP, _DRV, _BUS, _THERMAL), _RESTART),
    _entry(25, "invalid or illegal push buffer stream", (_APP, _DRV), _RESTART),
    _entry(26, "framebuffer timeout", (_DRV,), _REBOOT),
    _entry(27, "video processor exception", (_DRV,), _REBOOT),
    _entry(28, "video processor exception", (_DRV,), _REBOOT),
    _entry(29, "video processor exception", (_DRV,), _REBOOT),
    _entry(30, "GPU semaphore access error", (_DRV,), _REBOOT),
    _entry(31, "GPU memory page fault", (_APP, _DRV, _HW), _RESTART,
           note="Usually an illegal memory access by the application (compute-sanitizer "
                "finds it). " + _ENGINE_NOTE),
    _entry(32, "invalid or corrupted push buffer stream", (_BUS, _DRV, _SYS, _THERMAL), _RESTART,
           _H.SUSPECT, "Often PCIe trouble: watch the GPU's PCIe replay counter."),
    _entry(33, "internal micro-controller error", (_DRV,), _REBOOT),
    _entry(34, "video processor exception", (_DRV,), _REBOOT),
    _entry(35, "video processor exception", (_DRV,), _REBOOT),
    _entry(36, "video processor exception", (_DRV,), _REBOOT),
    _entry(37, "driver firmware error (unimplemented method)", (_DRV, _APP), _NONE),
    _entry(38, "driver firmware error (watchdog timeout)", (_DRV, _HW), _NONE, _H.SUSPECT,
           "Recurring, report it to NVIDIA with an nvidia-bug-report."),
    _entry(39, "copy engine exception (CE0)", _ENGINE, _RESTART),
    _entry(40, "copy engine exception (CE1)", _ENGINE, _RESTART),
    _entry(41, "copy engine exception (CE2)", _ENGINE, _RESTART),
    _entry(42, "video image compositor exception", (_DRV,), _RESTART),
    _entry(43, "GPU stopped processing (a channel was reset after an application fault)",
           (_APP, _DRV), _NONE, note="The faulting application was stopped; the Xid "
                                     "reported just before this one says why."),
    _entry(44, "graphics engine fault during a context switch", (_DRV, _HW), _NONE, _H.SUSPECT,
           "Recurring, reset the GPU and report it to NVIDIA."),
    _entry(45, "preemptive cleanup after earlier errors", (_APP, _DRV), _NONE,
           note="It follows another Xid (often 48 or 79): act on that one."),
    _entry(46, "GPU stopped processing (GPU timeout)", (_DRV, _HW), _RESET),
    _entry(47, "video encoder exception (NVENC0)", _ENGINE, _RESTART),
    _entry(48, "double-bit ECC error", (_MEM, _HW), _RESET,
           note="A row remap or page retirement (Xid 63) follows and takes effect at the "
                "reset; recurring, inspect the GPU."),
    _entry(54, "auxiliary power is not connected to the GPU board", (_POWER, _HW), _INSPECT,
           note="Check the board's power cables."),
    _entry(56, "display engine error", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(57, "error programming the video memory interface", (_HW, _MEM, _DRV), _RESET,
           _H.SUSPECT),
    _entry(58, "unstable video memory interface detected", (_HW, _MEM), _INSPECT),
    _entry(59, "internal micro-controller error (older drivers)", (_DRV,), _REBOOT),
    _entry(60, "video processor exception (SEC2)", (_DRV,), _RESTART),
    _entry(61, "internal micro-controller breakpoint or warning", (_DRV, _HW), _RESET),
    _entry(62, "internal micro-controller halt", (_DRV, _HW, _THERMAL), _RESET),
    _entry(63, "ECC page retirement or row remapping recorded", (_MEM,), _RESET, _H.DEGRADED,
           "The GPU works on; the remap takes effect at the next GPU reset: reset it when "
           "it is idle."),
    _entry(64, "ECC page retirement or row remapping failed", (_MEM, _HW), _INSPECT,
           note="The memory has no spare rows left for the failing one."),
    _entry(65, "video encoder exception (NVENC1)", _ENGINE, _RESTART),
    _entry(66, "illegal register access by the driver", (_DRV,), _NONE),
    _entry(67, "illegal access by the driver (verification)", (_DRV,), _NONE),
    _entry(68, "video decoder exception (NVDEC0)", _ENGINE, _RESTART),
    _entry(69, "graphics engine class error", _ENGINE, _RESTART),
    _entry(70, "copy engine error (CE3)", _ENGINE, _RESTART),
    _entry(71, "copy engine error (CE4)", _ENGINE, _RESTART),
    _entry(72, "copy engine error (CE5)", _ENGINE, _RESTART),
    _entry(73, "video encoder error (NVENC2)", _ENGINE, _RESTART),
    _entry(74, "NVLink error", (_NVLINK, _HW), _RESET,
           note="Recurring on the same link, inspect the link, its bridge or cabling."),
    _entry(75, "copy engine error (CE6)", _ENGINE, _RESTART),
    _entry(76, "copy engine error (CE7)", _ENGINE, _RESTART),
    _entry(77, "copy engine error (CE8)", _ENGINE, _RESTART),
    _entry(78, "vGPU start error", (_DRV, _SYS), _NONE, _H.SUSPECT,
           "Check that the vGPU manager and guest drivers match."),
    _entry(79, "GPU has fallen off the bus", (_BUS, _HW, _POWER, _THERMAL), _REBOOT,
           note="Recurring, inspect the GPU, its riser and its power."),
    _entry(80, "corrupted data sent to the GPU", (_BUS, _SYS, _DRV, _HW), _RESTART, _H.SUSPECT,
           "Watch the PCIe replay counter; recurring, inspect the slot."),
    _entry(81, "VGA subsystem error", (_HW,), _INSPECT),
    _entry(82, "JPEG decoder error (NVJPG0)", _ENGINE, _RESTART),
    _entry(83, "video decoder error (NVDEC1)", _ENGINE, _RESTART),
    _entry(84, "video decoder error (NVDEC2)", _ENGINE, _RESTART),
    _entry(85, "copy engine error (CE9)", _ENGINE, _RESTART),
    _entry(86, "optical flow accelerator exception (OFA0)", _ENGINE, _RESTART),
    _entry(88, "video decoder error (NVDEC3)", _ENGINE, _RESTART),
    _entry(89, "video decoder error (NVDEC4)", _ENGINE, _RESTART),
    _entry(92, "high single-bit ECC error rate", (_MEM, _HW), _NONE, _H.SUSPECT,
           "The errors are corrected so far: watch the correctable ECC count and the "
           "remapped rows."),
    _entry(93, "InfoROM wear limit exceeded (non-fatal)", (_HW, _DRV), _NONE, _H.SUSPECT,
           "Report it to NVIDIA if it recurs."),
    _entry(94, "contained ECC error", (_MEM,), _RESTART, _H.DEGRADED,
           "Only the applications that touched the bad memory were stopped; a GPU reset "
           "when it is idle activates the row remap."),
    _entry(95, "uncontained ECC error", (_MEM, _HW), _RESET,
           note="Every application on the GPU may have read corrupt data."),
    _entry(96, "video decoder error (NVDEC5)", _ENGINE, _RESTART),
    _entry(97, "video decoder error (NVDEC6)", _ENGINE, _RESTART),
    _entry(98, "video decoder error (NVDEC7)", _ENGINE, _RESTART),
    _entry(99, "JPEG decoder error (NVJPG1)", _ENGINE, _RESTART),
    _entry(100, "JPEG decoder error (NVJPG2)", _ENGINE, _RESTART),
    _entry(101, "JPEG decoder error (NVJPG3)", _ENGINE, _RESTART),
    _entry(102, "JPEG decoder error (NVJPG4)", _ENGINE, _RESTART),
    _entry(103, "JPEG decoder error (NVJPG5)", _ENGINE, _RESTART),
    _entry(104, "JPEG decoder error (NVJPG6)", _ENGINE, _RESTART),
    _entry(105, "JPEG decoder error (NVJPG7)", _ENGINE, _RESTART),
    _entry(106, "SMBPBI test message (out-of-band management)", (_SYS,), _NONE),
    _entry(107, "SMBPBI test message, silent (out-of-band management)", (_SYS,), _NONE),
    _entry(109, "context switch timeout", (_APP, _DRV, _HW, _BUS, _THERMAL), _RESET),
    _entry(110, "security fault", (_HW, _DRV), _RESET),
    _entry(111, "display bundle error", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(112, "display supervisor error", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(113, "DisplayPort link training error", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(114, "display pipeline underflow", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(115, "display core channel error", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(116, "display window channel error", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(117, "display cursor channel error", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(118, "display pixel pipeline error", (_DRV, _HW), _NONE, note=_DISPLAY_NOTE),
    _entry(119, "GSP RPC timeout", (_DRV, _HW), _RESET,
           note="Recurring, update the driver; report it to NVIDIA if it persists."),
    _entry(120, "GSP error", (_DRV, _HW), _RESET,
           note="Recurring, update the driver; report it to NVIDIA if it persists."),
    _entry(121, "C2C (chip-to-chip) link error", (_BUS, _HW), _NONE, _H.SUSPECT,
           "The link corrected it; recurring, inspect the module."),
    _entry(122, "SPI PMU RPC read failure", (_HW, _DRV), _NONE, _H.SUSPECT),
    _entry(123, "SPI PMU RPC write failure", (_HW, _DRV), _INSPECT),
    _entry(124, "SPI PMU RPC erase failure", (_HW, _DRV), _NONE, _H.SUSPECT),
    _entry(125, "InfoROM file system failure", (_HW, _DRV), _NONE, _H.SUSPECT),
    *(_entry(code, f"copy engine error (CE{code - 116})", _ENGINE, _RESTART)
      for code in range(126, 136)),
    _entry(136, "NVLink link training failed", (_NVLINK, _HW), _RESET,
           note="Recurring, inspect the link's signal path and cabling."),
    _entry(137, "NVLink FLA privilege error", (_APP,), _NONE,
           note="An application reached for memory it may not touch over NVLink."),
    _entry(139, "optical flow accelerator error (OFA1)", _ENGINE, _RESTART),
    _entry(140, "unrecovered ECC error", (_MEM, _HW), _RESET),
    _entry(141, "CUDA fast-path error", (_DRV, _APP), _NONE),
    _entry(142, "video encoder error (NVENC3)", _ENGINE, _RESTART),
    _entry(143, "GPU initialization failure", (_HW, _DRV), _RESET,
           note="Failing again after the reset, inspect the GPU."),
    _entry(144, "NVLink SAW error", (_NVLINK, _HW), _RESET, note=_NVLINK5_NOTE),
    _entry(145, "NVLink RLW error", (_NVLINK, _HW), _RESET, note=_NVLINK5_NOTE),
    _entry(146, "NVLink TLW error", (_NVLINK, _HW), _RESET, note=_NVLINK5_NOTE),
    _entry(147, "NVLink TREX error", (_NVLINK, _DRV), _RESET, note=_NVLINK5_NOTE),
    _entry(148, "NVLink NVLPW control error", (_NVLINK, _DRV), _RESET, note=_NVLINK5_NOTE),
    _entry(149, "NVLink NETIR error", (_NVLINK, _HW), _RESET, note=_NVLINK5_NOTE),
    _entry(150, "NVLink MSE error", (_NVLINK, _HW), _RESET, note=_NVLINK5_NOTE),
    _entry(151, "key rotation error (confidential computing)", (_DRV, _SYS), _REBOOT),
    _entry(152, "DLA SMMU error", (_DRV, _HW), _NONE),
    _entry(153, "DLA timeout", (_DRV, _HW), _NONE),
    _entry(154, "GPU recovery action changed", (_DRV,), _NONE,
           note="It follows another Xid: the GPU's recovery action (nvidia-smi -q) says "
                "whether it now needs a reset or a node reboot."),
    _entry(155, "NVLink software-defined error", (_NVLINK, _DRV, _APP), _RESET),
    _entry(156, "resource retirement event", (_MEM, _HW), _RESET, _H.DEGRADED,
           "The GPU works on; the retirement takes effect at the next GPU reset."),
    _entry(157, "resource retirement failure", (_MEM, _HW), _INSPECT),
    _entry(158, "GPU fatal timeout", (_HW, _DRV), _RESET),
    _entry(159, "CHI non-data error", (_SYS, _BUS, _DRV), _RESTART,
           note="Check the unified memory driver (nvidia-uvm)."),
    _entry(160, "channel retirement event", (_DRV, _APP), _NONE),
    _entry(161, "channel retirement failure", (_DRV,), _NONE, _H.SUSPECT),
    _entry(162, "power smoothing circuitry re-engaged", (_POWER,), _NONE),
    _entry(163, "power smoothing circuitry disengaged", (_POWER,), _NONE),
    _entry(164, "power smoothing circuitry near the end of its lifetime", (_POWER, _HW), _NONE,
           _H.SUSPECT, "Plan the board's replacement."),
    _entry(165, "power smoothing circuitry lifetime exhausted", (_POWER, _HW), _INSPECT,
           _H.DEGRADED, "The GPU works on without power smoothing."),
    _entry(166, "NVLink traffic before the link was set up for encryption", (_NVLINK, _DRV),
           _NONE, _H.SUSPECT),
    _entry(167, "PCIe fatal timeout", (_BUS, _HW), _REBOOT),
    _entry(168, "reduced GPU memory capacity (errors in the write-protected region)",
           (_MEM, _HW), _INSPECT),
    _entry(169, "internal micro-controller halt (SEC2)", (_DRV, _HW), _RESET),
    _entry(170, "unexpected NVLink interrupt in confidential-computing mode", (_NVLINK, _DRV),
           _NONE, _H.SUSPECT),
    _entry(171, "uncorrectable DRAM error (details of an Xid 48)", (_MEM, _HW), _RESET),
    _entry(172, "uncorrectable SRAM error (details of an Xid 48)", (_HW,), _RESET,
           note="Recurring, inspect the GPU."),
)  # fmt: skip

XID_CATALOGUE: Final[Mapping[int, XidEntry]] = MappingProxyType(
    {entry.code: entry for entry in _ENTRIES}
)


def xid_entry(code: int) -> XidEntry | None:
    """The catalogue's entry for `code`; None for a code it does not know."""
    return XID_CATALOGUE.get(code)


def describe_xid(code: int) -> str:
    """ "Xid 79: GPU has fallen off the bus": the code and what it means."""
    entry = XID_CATALOGUE.get(code)
    meaning = entry.meaning if entry else "not in the catalogue; see NVIDIA's Xid catalogue"
    return f"Xid {code}: {meaning}"


def xid_advice(code: int) -> str:
    """Likely cause and what to do, as sentences; for an unknown code, where to look it up."""
    entry = XID_CATALOGUE.get(code)
    if entry is None:
        return f"Xid {code} is not in our catalogue: look it up in NVIDIA's, {CATALOGUE_URL}"
    return entry.advice


def xid_action(code: int) -> Action:
    """What `code` calls for; NONE for an unknown code (look it up, as xid_advice says)."""
    entry = XID_CATALOGUE.get(code)
    return entry.action if entry else Action.NONE
