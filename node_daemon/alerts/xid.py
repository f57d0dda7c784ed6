"""What Xid codes mean, for alert summaries (from NVIDIA's Xid catalogue)."""

from __future__ import annotations

XID_MEANINGS: dict[int, str] = {
    13: "graphics engine exception",
    31: "GPU memory page fault",
    32: "invalid or corrupted push buffer stream",
    43: "GPU stopped processing",
    45: "preemptive cleanup, due to previous errors",
    48: "double-bit ECC error",
    61: "internal micro-controller breakpoint",
    62: "internal micro-controller halt",
    63: "ECC page retirement or row remapping recorded",
    64: "ECC page retirement or row remapping failure",
    68: "video processor exception",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    94: "contained ECC error",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}


def describe_xid(code: int) -> str:
    """`Xid 13: graphics engine exception`: the code and what it means."""
    meaning = XID_MEANINGS.get(code, "not in our list: see NVIDIA's Xid catalogue")
    return f"Xid {code}: {meaning}"
