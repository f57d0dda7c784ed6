"""A server stream read by a test: the first few messages that count, then cancelled."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

M = TypeVar("M", covariant=True)
T = TypeVar("T")


class ServerStream(Protocol[M]):
    def __iter__(self) -> Iterator[M]: ...

    def cancel(self) -> bool: ...


def first_of(
    stream: ServerStream[M], count: int, pick: Callable[[M], T | None], what: str = "stream"
) -> list[T]:
    """The first `count` values `pick` makes of the stream's messages (a message it makes
    None of is passed over); then the stream is cancelled.

    Raises:
        AssertionError: the stream (`what`) ended before.
    """
    found: list[T] = []
    for message in stream:
        value = pick(message)
        if value is not None:
            found.append(value)
        if len(found) == count:
            stream.cancel()
            return found
    raise AssertionError(f"the {what} ended after {found}")
