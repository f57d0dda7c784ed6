"""Running one piece of work on each node at once, and what comes back: results and failures."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from console.connections.security import LinkSecurity
from console.terminal.link import CallFailed, NodeLink

T = TypeVar("T")

# Exit codes scripts can rely on.
EXIT_OK = 0
EXIT_FAILED = 1  # a node refused or failed the request (status: a critical alert fires)
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


@dataclass
class Outcome(Generic[T]):
    results: list[tuple[str, T]] = field(default_factory=list)  # (target, result), in order
    failures: list[CallFailed] = field(default_factory=list)

    def exit_code(self) -> int:
        if any(f.unreachable for f in self.failures):
            return EXIT_UNREACHABLE
        return EXIT_FAILED if self.failures else EXIT_OK


def on_each(
    targets: Sequence[str], security: LinkSecurity, work: Callable[[NodeLink], T]
) -> Outcome[T]:
    """`work` on every node in parallel (each call has its own deadline), in target order."""

    def one(target: str) -> T | CallFailed:
        link = NodeLink(target, security)
        try:
            return work(link)
        except CallFailed as exc:
            return exc
        finally:
            link.close()

    outcome: Outcome[T] = Outcome()
    with ThreadPoolExecutor(max(1, min(16, len(targets))), "gpufleet-terminal") as pool:
        for target, result in zip(targets, pool.map(one, targets), strict=True):
            if isinstance(result, CallFailed):
                outcome.failures.append(result)
            else:
                outcome.results.append((target, result))
    return outcome
