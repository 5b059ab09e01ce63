"""Job dependencies (``qsub -W depend=...``), as PBS keeps them.

A job that waits on others carries a system hold (``s``) until every dependency is met; then
the hold is released and the job is queued. A dependency that can no longer be met deletes
the waiting job, as PBS does, in PBS's words:

* the job it waits on ends and cannot satisfy it (``afterok`` and a non-zero exit status, or
  it was deleted before it ran): ``Job deleted as result of dependency on job <id>``;
* the job it names had already finished, unsatisfying, when it was submitted: qsub still
  prints the new job's id (PBS registers dependencies after queueing), and the new job is
  deleted at once with ``<id> Finished job did not satisfy dependency`` (PBS's
  PBSE_HISTDEPEND). A finished job that satisfies it counts as met.

| type | the job runs once each listed job has ... |
|---|---|
| ``after`` | started (or ended) |
| ``afterok`` | ended with exit status 0 |
| ``afternotok`` | ended with a non-zero exit status |
| ``afterany`` | ended |

A dependency may name an array (``12[]``), never a subjob (``12[3]`` is qsub's ``illegal -W
value``): ``after`` is met once the array has begun, the others once it has finished, and
an array ends with the exit status of its subjob that ended last, 0 or 1 (OpenPBS
23.06.06's, measured).

``before``, ``beforeok``, ``beforenotok`` and ``beforeany`` turn around: each listed job
(which must still be queued or held) gets ``after...:<this job>`` and waits on this one.
As OpenPBS 23.06 does (checked), a job submitted with ``on:<count>`` is held (``s``) until
`count` jobs have named it, its ``on:`` counting down as each does (``on:2`` ->
``on:1,afterok:5.h`` -> ``afterok:5.h:6.h``; a job named there already counts once), and then
until what they added is met. A job whose count is spent, or that never had one, takes a
``before*`` only when it already has an entry of the matching ``after*`` type: the request is
accepted and changes nothing. Else the job naming it is deleted at once (``Dependency
request for job rejected by <id>``; qsub still prints its id). ``runone`` is not supported by
the local engine (refused with 15029).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

AFTER = ("after", "afterok", "afternotok", "afterany")
ON = "on"
BEFORE = {"before": "after", "beforeok": "afterok", "beforenotok": "afternotok",
          "beforeany": "afterany"}

WAIT, MET, NEVER = "wait", "met", "never"
#: PBS's text (msg_histdepend) for a dependency on a finished job that did not satisfy it.
HISTDEPEND = "Finished job did not satisfy dependency"


def parse(text: str | None) -> list[tuple[str, list[str]]]:
    """``afterok:1.h:2.h,before:3.h`` -> [("afterok", ["1.h", "2.h"]), ("before", ["3.h"])]."""
    out = []
    for item in str(text or "").split(","):
        kind, _, rest = item.partition(":")
        if kind:  # each job once (a list may repeat one)
            out.append((kind, list(dict.fromkeys(j for j in rest.split(":") if j))))
    return out


def merged(current: str | None, given: str | None) -> str:
    """qalter -W depend's `given` over a job's `current` depend, as OpenPBS 23.06 merges
    them (checked): the types `given` names replace those entries, which go after the
    others (``afterok:1`` altered with ``afterany:2`` is ``afterok:1,afterany:2``, and that
    with ``afterok:2`` is ``afterany:2,afterok:2``)."""
    new = parse(given)
    kinds = {kind for kind, _ in new}
    return format([item for item in parse(current) if item[0] not in kinds] + new)


def format(items: list[tuple[str, list[str]]]) -> str:
    return ",".join(f"{kind}:{':'.join(ids)}" for kind, ids in items if ids)


def count_value(text: str) -> int | None:
    """An ``on:`` count's text as a number (ASCII digits only: ``²`` is a digit to
    `str.isdigit` and no number to `int`), None when it is not one."""
    return int(text) if text.isascii() and text.isdecimal() else None


def on_count(text: str | None) -> int:
    """How many jobs have still to name this one (its ``on:<count>``; 0 without one)."""
    for kind, ids in parse(text):
        if kind == ON:
            return (count_value(ids[0]) or 0) if ids else 0
    return 0


def registered(text: str | None, kind: str, job_id: str) -> str | None:
    """The depend of a job once `job_id` names it with ``before*`` `kind`, as PBS's server
    registers it (None: refused). With an ``on:`` count left, the count one less (gone at
    0, as PBS writes it) and ``after*:<job_id>`` added to the entry of its type; `job_id`
    there already counts nothing more. Without one, the request is accepted unchanged when
    the job has an entry of that type, else refused."""
    count = on_count(text)
    after = BEFORE[kind]
    items = [(k, list(ids)) for k, ids in parse(text) if k != ON]
    entry = next((ids for k, ids in items if k == after), None)
    if not count:
        return None if entry is None else format(parse(text))
    if entry is not None and job_id in entry:
        return format(parse(text))
    if entry is None:
        items.append((after, [job_id]))
    else:
        entry.append(job_id)
    if count > 1:
        items.insert(0, (ON, [str(count - 1)]))
    return format(items)


def one(kind: str, parent: Mapping[str, Any] | None) -> str:
    """Whether one ``after*`` dependency on `parent` (its attributes, None when the server
    no longer knows it) is met, still waits, or never will be."""
    if parent is None:
        return NEVER
    state = parent.get("job_state")
    if state not in ("F", "X"):  # (an array has started once it has begun, B)
        return MET if kind == "after" and state in ("R", "E", "B") else WAIT
    # An array's Exit_status is its last ended subjob's, 0 or 1: on OpenPBS 23.06.06
    # afterok on an array whose last subjob exited 1 was deleted, afternotok ran (measured).
    status = parent.get("Exit_status")
    ran = parent.get("stime") is not None
    if kind in ("after", "afterany"):
        return MET
    if kind == "afterok":
        return MET if ran and status == 0 else NEVER
    return MET if not (ran and status == 0) else NEVER  # afternotok


def check(text: str | None, lookup: Callable[[str], Mapping[str, Any] | None]
          ) -> tuple[str, str | None]:
    """The job's ``after*`` dependencies together: (MET | WAIT | NEVER, the one that can never
    be met)."""
    result = MET
    for kind, ids in parse(text):
        if kind == ON and ids and (count_value(ids[0]) or 0) > 0:
            result = WAIT  # (jobs have still to name it)
        if kind not in AFTER:
            continue
        for job_id in ids:
            state = one(kind, lookup(job_id))
            if state == NEVER:
                return NEVER, f"{kind}:{job_id}"
            if state == WAIT:
                result = WAIT
    return result, None
