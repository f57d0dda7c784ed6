"""Open files for a large fleet: a connection per node, each a socket (a descriptor).

Debian's default soft limit on open files is 1,024, too few for a console that
connects to 1,250 nodes (10,000 GPUs). The soft limit may be raised up to the hard
limit by the process itself, as servers do; beyond the hard limit only an admin can
raise it (LimitNOFILE, limits.conf), and the console says so once in its log.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger(__name__)

# Descriptors per node (its channel's socket, and a spare for a reconnect racing the
# old socket's close) and for everything else the console opens (Qt, files, pipes).
PER_NODE = 2
BESIDES_NODES = 256


def needed_for(nodes: int) -> int:
    return PER_NODE * nodes + BESIDES_NODES


def allow_open_files(nodes: int) -> int:
    """Raise the soft limit on open files to what `nodes` connections need, within the
    hard limit; returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed_for(nodes)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    limit = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if limit > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    if limit < want:
        log.warning(
            "open files are limited to %d (hard limit): %d nodes need about %d; raise "
            "LimitNOFILE or the nofile limit for this user to reach them all",
            limit, nodes, want,
        )  # fmt: skip
    return limit
