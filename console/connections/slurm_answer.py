"""slurmrestd's JSON read into slurm_model's records, or an AnswerError saying what is wrong.

A broken or hostile slurmrestd may answer anything: a list where the jobs should
be, a job id that is a string, 1e400, a name nested ten thousand lists deep. Each
reader here checks the shape, every value's type and its range (Slurm's numbers
fit 32 bits, its times a year Python can hold), so junk becomes one AnswerError
naming the field, which the client turns into the error the Slurm panel shows,
instead of an exception lost on the worker and a table silently left stale.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from console.fleet.slurm_model import (
    INFINITE,
    SlurmJob,
    SlurmNode,
    SlurmReservation,
    gpus_asked,
    minutes_or_unlimited,
    parse_gres,
)

Json = dict[str, Any]
T = TypeVar("T")
# The last second Python's datetime holds (9999-12-31): later is no time Slurm sends.
LAST_EPOCH: Final = 253_402_300_799
# Parsed JSON takes far more memory than its bytes where objects are tiny: 16 MiB of
# {"job_id": 1} is 1.2 million dicts, over 500 MiB. slurmrestd's records are big (a
# v0.0.38 job is about 3.3 KB holding 7 objects and lists, a node 1.4 KB holding 7.5),
# so an answer with more than one object or list every BYTES_PER_CONTAINER bytes is
# no Slurm answer, and is refused before it is parsed.
BYTES_PER_CONTAINER: Final = 64
FEW_CONTAINERS: Final = 1000  # a small answer is never refused for its density


class AnswerError(ValueError):
    """The answer is not what v0.0.38 sends; the message names where, never the whole value."""


def decoded(raw: bytes) -> object:
    """The JSON of an answer, whatever its shape.

    Raises:
        AnswerError: not JSON, a number too long to read, nested too deep to parse, or
            far more objects and lists than so many bytes of Slurm's answers hold.
    """
    containers = raw.count(b"{") + raw.count(b"[")  # within strings too: an upper bound
    if containers > max(FEW_CONTAINERS, len(raw) // BYTES_PER_CONTAINER):
        raise AnswerError(f"{containers} objects and lists in {len(raw)} bytes: far more than "
                          "Slurm's answers hold (not parsed)")  # fmt: skip
    try:
        return json.loads(raw)
    except RecursionError:
        raise AnswerError("JSON nested too deep to read") from None
    except ValueError as exc:  # JSONDecodeError, a number of more than 4300 digits, bad UTF-8
        raise AnswerError(f"not JSON ({str(exc)[:120]})") from None


def records(answer: object, key: str, read: Callable[[Mapping[str, Any]], T]) -> list[T]:
    """answer[key], a list of objects, each read by `read`; where one fails, which one."""
    if not isinstance(answer, dict):
        raise AnswerError(f"the answer is {shown(answer)}, not an object")
    if key not in answer:
        raise AnswerError(f'the answer has no "{key}"')
    items = answer[key]
    if not isinstance(items, list):
        raise AnswerError(f'"{key}" is {shown(items)}, not a list')
    found = []
    for at, item in enumerate(items):
        if not isinstance(item, dict):
            raise AnswerError(f"{key}[{at}] is {shown(item)}, not an object")
        try:
            found.append(read(item))
        except ValueError as exc:  # AnswerError, or slurm_model's out-of-range counts
            raise AnswerError(f"{key}[{at}]{_named(item)}: {exc}") from None
    return found


def release(answer: object) -> str:
    """The Slurm release of a /ping answer ("22.05.8"), "unknown" where it does not say."""
    meta = answer.get("meta") if isinstance(answer, dict) else None
    slurm = meta.get("Slurm") if isinstance(meta, dict) else None
    said = slurm.get("release") if isinstance(slurm, dict) else None
    return said if isinstance(said, str) else "unknown"


def job_from(j: Mapping[str, Any]) -> SlurmJob:
    """A job of v0.0.38's /jobs answer."""
    return SlurmJob(
        job_id=whole(j, "job_id", required=True),
        name=text(j, "name"),
        user=text(j, "user_name"),
        account=text(j, "account"),
        partition=text(j, "partition"),
        state=text(j, "job_state"),
        reason=text(j, "state_reason"),
        gpus=_gpus_of(j),
        time_limit=minutes_or_unlimited(whole(j, "time_limit", default=INFINITE)),
        priority=whole(j, "priority"),
        submit_time=epoch(j, "submit_time"),
        required_nodes=tuple(n for n in text(j, "required_nodes").split(",") if n),
        nodes=text(j, "nodes"),
    )


def _gpus_of(j: Mapping[str, Any]) -> int | None:
    tres_req, per_job, per_node = (text(j, k) for k in ("tres_req_str", "tres_per_job",
                                                        "tres_per_node"))  # fmt: skip
    return gpus_asked(tres_req, per_job, per_node, whole(j, "node_count"))


def node_from(n: Mapping[str, Any]) -> SlurmNode:
    """A node of v0.0.38's /nodes answer."""
    return SlurmNode(
        name=text(n, "name", required=True),
        state=text(n, "state"),
        flags=words(n, "state_flags"),
        reason=text(n, "reason"),
        gres=parse_gres(text(n, "gres")),
        gres_used=parse_gres(text(n, "gres_used")),
        partitions=words(n, "partitions"),
    )


def reservation_from(r: Mapping[str, Any]) -> SlurmReservation:
    """A reservation of v0.0.38's /reservations answer."""
    return SlurmReservation(
        name=text(r, "name", required=True),
        nodes=text(r, "node_list"),
        start=epoch(r, "start_time"),
        end=epoch(r, "end_time"),
        users=_names(text(r, "users")),
        accounts=_names(text(r, "accounts")),
        flags=words(r, "flags"),
    )


def text(record: Mapping[str, Any], key: str, required: bool = False) -> str:
    """A string field; absent or null is "" unless required."""
    value = _field(record, key, required)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise AnswerError(f'"{key}" is {shown(value)}, not a string')
    return value


def whole(record: Mapping[str, Any], key: str, required: bool = False, default: int = 0) -> int:
    """A whole number within Slurm's 32 bits; absent or null is `default` unless required."""
    value = _field(record, key, required)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnswerError(f'"{key}" is {shown(value)}, not a whole number')
    if not 0 <= value <= INFINITE:
        raise AnswerError(f'"{key}" is {shown(value)}, beyond Slurm\'s 32 bits')
    return value


def epoch(record: Mapping[str, Any], key: str) -> datetime:
    """A time in seconds since 1970 (UTC); absent or null is 1970 itself, as Slurm's 0 is."""
    value = _field(record, key, False)
    if value is None:
        value = 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise AnswerError(f'"{key}" is {shown(value)}, not a time in seconds')
    if not 0 <= value <= LAST_EPOCH:
        raise AnswerError(f'"{key}" is {shown(value)}, not a time before the year 10000')
    return datetime.fromtimestamp(value, UTC)


def words(record: Mapping[str, Any], key: str) -> tuple[str, ...]:
    """A list of strings (flags, partitions); absent or null is none."""
    value = _field(record, key, False)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(w, str) for w in value):
        raise AnswerError(f'"{key}" is {shown(value)}, not a list of strings')
    return tuple(value)


def shown(value: object) -> str:
    """A value in an error message: its kind, and a short scalar (never a nested repr)."""
    if isinstance(value, dict):
        return f"an object of {len(value)} keys"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, str):
        return f"the string {value[:40]!r}" + ("…" if len(value) > 40 else "")
    if isinstance(value, int) and not isinstance(value, bool):
        digits = str(value)  # json.loads reads at most 4300 digits: str() works
        return digits if len(digits) <= 20 else f"a number of {len(digits)} digits"
    return json.dumps(value)  # float (inf too), bool, null


def _field(record: Mapping[str, Any], key: str, required: bool) -> Any:
    if required and record.get(key) is None:
        raise AnswerError(f'no "{key}"')
    return record.get(key)


def _named(item: Mapping[str, Any]) -> str:
    """The record's id or name, where it has a plain one, to say which was wrong."""
    job_id, name = item.get("job_id"), item.get("name")
    if isinstance(job_id, int) and not isinstance(job_id, bool) and 0 <= job_id <= INFINITE:
        return f" (job {job_id})"
    return f" ({name[:40]!r})" if isinstance(name, str) and name else ""


def _names(words_text: str) -> tuple[str, ...]:
    return tuple(n for n in words_text.split(",") if n and n != "(null)")
