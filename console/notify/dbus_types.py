"""D-Bus integer types that PySide6 cannot spell from Python: byte (`y`) and uint32 (`u`).

In a message's arguments PySide6 turns every Python int into an int32 (`i`) or int64
(`x`), and ``QDBusArgument << int`` always resolves to the uint16 (`q`) overload: a
notification server that checks signatures (GNOME Shell, KDE, dunst, mako) refuses
``Notify`` with anything but ``u`` for replaces_id, and ignores an urgency that is
not a byte. So these helpers call the C++ ``QDBusArgument::operator<<(uint)`` and
``operator<<(uchar)`` of the QtDBus library PySide6 already loaded (public Qt API,
Itanium C++ ABI), and check the resulting D-Bus signature before handing the
argument out. A ``QDBusArgument`` given as a message argument, or as a value of a
hints dict, is marshalled as exactly the value it holds.
"""

from __future__ import annotations

import ctypes
import functools
import os
from collections.abc import Callable

import shiboken6
from PySide6.QtDBus import QDBusArgument

QTDBUS_SONAME = "libQt6DBus.so.6"
# QDBusArgument &QDBusArgument::operator<<(uint) and (uchar), mangled.
_APPEND_SYMBOLS = {"u": ("_ZN13QDBusArgumentlsEj", ctypes.c_uint32),
                   "y": ("_ZN13QDBusArgumentlsEh", ctypes.c_uint8)}  # fmt: skip
_RANGES = {"u": range(2**32), "y": range(2**8)}

_Append = Callable[[int, int], int]


class DBusTypeError(RuntimeError):
    """This Qt build cannot marshal the type (not Linux, or QtDBus not loaded)."""


def uint32(value: int) -> QDBusArgument:
    """`value` as a D-Bus UINT32 (`u`)."""
    return _typed("u", value)


def byte(value: int) -> QDBusArgument:
    """`value` as a D-Bus BYTE (`y`)."""
    return _typed("y", value)


def supported() -> bool:
    """Whether both types can be marshalled here."""
    try:
        uint32(0), byte(0)
    except DBusTypeError:
        return False
    return True


def _typed(signature: str, value: int) -> QDBusArgument:
    if value not in _RANGES[signature]:
        raise ValueError(f"{value} does not fit D-Bus type {signature!r}")
    argument = QDBusArgument()
    _append_function(signature)(shiboken6.getCppPointer(argument)[0], value)
    if argument.currentSignature() != signature:  # the ABI did not do what we asked
        raise DBusTypeError(f"marshalled as {argument.currentSignature()!r}, not {signature!r}")
    return argument


@functools.cache
def _append_function(signature: str) -> _Append:
    symbol, c_type = _APPEND_SYMBOLS[signature]
    try:
        # RTLD_NOLOAD: only the QtDBus that PySide6 loaded, never another copy on the system.
        library = ctypes.CDLL(QTDBUS_SONAME, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
        append = library[symbol]
    except (OSError, AttributeError) as exc:
        raise DBusTypeError(f"cannot reach {symbol} in {QTDBUS_SONAME}: {exc}") from exc
    append.argtypes = [ctypes.c_void_p, c_type]
    append.restype = ctypes.c_void_p
    return append  # type: ignore[no-any-return]
