"""How a silence matcher's pattern matches a label value: the contract's globs.

`SilenceMatcher.pattern` (node.proto) is an exact value or a glob: `*` any run
of characters (none too), `?` exactly one, everything else literal and
case-sensitive. The daemon judges its alerts with this, mirrors the pattern
into Alertmanager as the regex `glob_regex` gives, and the console previews
what a silence covers with it: one definition, so the three never disagree.
Plain Python; imports nothing of protobuf.
"""

from __future__ import annotations

import functools
import re

# Characters RE2 (Alertmanager) and Python's re both read specially outside a class.
_REGEX_SPECIAL = frozenset("\\.+*?()|[]{}^$")


def is_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


def glob_regex(pattern: str) -> str:
    """`*` -> `.*`, `?` -> `.`, the rest literal; anchored, `.` matching newlines too.

    The result reads alike in RE2 (Alertmanager's matchers) and Python's re.
    """
    parts = []
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        elif char in _REGEX_SPECIAL:
            parts.append("\\" + char)
        else:
            parts.append(char)
    return "^(?s:" + "".join(parts) + ")$"


@functools.lru_cache(maxsize=4096)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(glob_regex(pattern))


def glob_matches(pattern: str, value: str) -> bool:
    """`value` equals `pattern`, or matches it as a glob."""
    if not is_glob(pattern):
        return value == pattern
    return _compiled(pattern).fullmatch(value) is not None
