"""Silence globs by example (pattern, value, matches): one table for gpufleet.v1.silence_globs,
read by the daemon's silences (tests/node_daemon/test_silences.py) and the console's
(tests/console/test_silences.py) alike."""

from __future__ import annotations

GLOB_EXAMPLES = [
    ("gpu-node-0*", "gpu-node-01", True),
    ("gpu-node-0*", "gpu-node-07", True),
    ("gpu-node-0*", "gpu-node-1", False),
    ("gpu-node-0*", "gpu-node-10", False),
    ("gpu-node-0?", "gpu-node-01", True),
    ("gpu-node-0?", "gpu-node-07", True),
    ("gpu-node-0?", "gpu-node-012", False),
    ("gpu-node-0?", "gpu-node-071", False),
    ("throttle", "throttle", True),
    ("throttle", "throttle2", False),
    ("gpu_*", "gpu_temp", True),
    ("gpu_*", "GPU_temp", False),  # case-sensitive
    ("*", "", True),
    ("3", "3", True),
    ("3", "13", False),  # exact, not a substring
    ("a.b", "axb", False),  # a dot is a dot
    ("a.c", "abc", False),
    ("[ab]", "a", False),  # no character classes: brackets are themselves
    ("[ab]", "[ab]", True),
]
