"""Whether a workload that carries a move's idempotency key really is that move's copy.

A console that sees a copy on node B whose source on node A is still queued
cancels the source by itself, so a move cut between its two steps ends with
one copy (console/fleet/fleet_queue.py). The key alone proves nothing: it is
visible to every viewer, and anyone who may submit on B can put it on a
workload of their own. So a console finishes a move only when the copy shows
that someone who could have made the move made it:

- the same owner, and the same request (command, GPUs, memory, priority, time
  limit, placement), so what runs on B is what waited on A;
- a submitter that B authenticated (`submitted_by`, filled by the daemon from
  the caller's verified identity, never from the request). B let that user
  submit for the owner under the rule A applies to a cancel: the caller may act
  for the owner (admin, the owner, or a member of the owning team). So the
  cancel is one the submitter could have made by hand. A node without
  authentication records no submitter; its copies prove a move only when A has
  none either (there, anyone who reaches A may cancel anyway).

The rule is the console's, not shared code with the daemon's: console.fleet
imports neither protobuf nor the daemon, and the daemon's own check is one line
(`Caller.may_act_for`, node_daemon/auth/identity.py), mirrored by
`Identity.may_act_for` here. It assumes a user has the same role on every node
(one key set or token file for the fleet, DESIGN.md "Identity").
"""

from __future__ import annotations

from console.fleet.control import WorkloadRow


def move_refusal(source: WorkloadRow, copy: WorkloadRow, source_open: bool) -> str | None:
    """Why `copy` does not prove to be the move of `source`; None when it does.

    Args:
        source: the workload the copy's key names, where it was queued.
        copy: the workload that carries the key.
        source_open: the source's node takes calls without authentication.
    """
    if copy.owner != source.owner:
        return f"its owner {copy.owner} is not {source.owner}"
    differs = request_differences(source, copy)
    if differs:
        return f"its {', '.join(differs)} differ from the original's"
    if not copy.submitted_by and not source_open:
        return "its node recorded no authenticated submitter"
    return None


def request_differences(source: WorkloadRow, copy: WorkloadRow) -> list[str]:
    """What a person asked for that the copy does not repeat, in words ([] when all does)."""
    pairs = {
        "name": (source.name, copy.name),
        "command": (source.argv, copy.argv),
        "GPU count": (source.gpu_count, copy.gpu_count),
        "minimum free memory": (source.min_free_memory_bytes, copy.min_free_memory_bytes),
        "priority": (source.priority, copy.priority),
    }
    found = [what for what, (here, there) in pairs.items() if here != there]
    # No limit on A leaves the copy to B's default; any limit A had, the copy keeps.
    if source.time_limit_s and copy.time_limit_s != source.time_limit_s:
        found.append("time limit")
    # A move dropped on GPUs stops auto placement; it never starts it.
    if copy.auto_place and not source.auto_place:
        found.append("placement")
    return found


def submitter_words(copy: WorkloadRow) -> str:
    """Who made the copy, for the record of a cancel that finishes its move."""
    if copy.submitted_by:
        return f"submitted there by {copy.submitted_by}"
    return "submitted there without authentication"
