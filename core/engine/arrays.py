"""Job arrays (``qsub -J X-Y[:Z][%max]``), as OpenPBS 23.06 keeps them (checked).

An array is one job row, ``12[].server``, holding the array's attributes (``array``,
``array_indices_submitted``, ``array_indices_remaining``, ``array_state_count``,
``max_run_subjobs``). A subjob, ``12[3].server``, gets a row of its own only when it is
instantiated: when the scheduler starts it, or a command acts on it once it ran. Until then
it is an index in its array's ``array_indices_remaining``, and every reader (qstat -t, the
scheduler's feed) makes it up from the array's row: a 10,000-index array costs one row
until its subjobs run. Standard library only: the commands import it too."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import pairwise
from typing import Any, NamedTuple

from ..values import past as _past

#: The server's ``max_array_size`` when unset (PBS's default).
MAX_ARRAY_SIZE = 10_000
#: The attributes of an array that none of its subjobs has.
ARRAY_ATTRS = frozenset({"array", "array_indices_submitted", "array_indices_remaining",
                         "array_state_count", "max_run_subjobs"})
#: What a subjob row does not take from its array when it is instantiated.
NOT_INHERITED = ARRAY_ATTRS | {"comment", "estimated", "stime", "Exit_status", "obittime",
                               "Hold_Types", "substate"}
#: Subjob rows' seq (the jobs table's key) lie above this: ``BASE + (array seq << 24) +
#: the index's place in the array``, so that they never take a job number and follow one
#: another in their array's order.
SUBJOB_SEQ_BASE = 1 << 56
#: The most indices an array may hold (places 0 to 2**24 - 1 in its subjobs' seq): the
#: server's ``max_array_size`` is at most this (qmgr refuses more).
MAX_PLACES = 1 << 24
#: In an Output_Path or Error_Path, the subjob's index (PBS's word).
INDEX_MARK = "^array_index^"
#: A job identifier's number with its brackets (``12[]``, ``12[3]``, ``12[2-5]``,
#: ``12[1-9:2]``), and what follows them (``.server``, ``@server``): `id_parts`.
_ID = re.compile(r"^(\d+)\[(?:(\d+)(?:-(\d+)(?::(\d+))?)?)?\](.*)\Z", re.ASCII)
_RANGE = re.compile(r"^(\d+)-(\d+)(?::(\d+))?(?:%(\d*))?\Z", re.ASCII)
#: The largest index (and step) of an array: PBS's server refuses more (a C int's; checked,
#: ``-J 2147483647-2147483648`` is its 15014).
MAX_INDEX = (1 << 31) - 1
#: The largest number PBS's qsub reads in a ``-J`` range: a C long's largest less one
#: (checked: 9223372036854775806 passes it, 9223372036854775807 and more are its ``illegal
#: -J value``).
QSUB_MAX = (1 << 63) - 2
#: The largest ``%`` number the server takes: `values` bounds ``max_run_subjobs`` so.
MAX_RUN = 1 << 31


class Spec(NamedTuple):
    """A ``-J`` value: its first and last index, its step, and its ``%`` limit (None)."""

    start: int
    end: int
    step: int
    max_run: int | None

    @property
    def indices(self) -> range:
        return range(self.start, self.end + 1, self.step)

    @property
    def submitted(self) -> str:
        """``array_indices_submitted``: ``X-Y`` or ``X-Y:Z`` (PBS's, without the ``%``)."""
        return f"{self.start}-{self.end}" + (f":{self.step}" if self.step != 1 else "")


def parse_spec(text: str) -> Spec:
    """A ``-J`` value, as OpenPBS 23.06's qsub reads it (checked): ``X-Y[:Z][%N]`` in ASCII
    digits, X less than Y, Z at least 1 (``5``, ``3-1``, ``1-1``, ``1-10:0``, ``1-3,5``,
    ``١-٣`` are refused), no number past `QSUB_MAX`; ValueError otherwise. What PBS's qsub
    passes on and its server refuses (15014) is `ServerRefuses`: a ``%`` with no number
    (`PercentEmpty`), an index or step past `MAX_INDEX`, or a ``%`` past `MAX_RUN`
    (`OutOfRange`)."""
    m = _RANGE.match(text) if isinstance(text, str) else None
    if m is None and isinstance(text, str) and (
            bad := re.fullmatch(r"(\d+-\d+(?::\d+)?)%.*", text, re.ASCII)) is not None:
        try:  # (a good range, then a % its qsub passes on: its server's 15014)
            parse_spec(bad[1])
        except OutOfRange:
            raise
        except ValueError:
            pass
        else:
            raise PercentEmpty(text)
    if m is None or any(n is not None and _past(n, QSUB_MAX) for n in m.groups()[:3]):
        raise ValueError(f"illegal -J value {text!r}")
    start, end, step = int(m[1]), int(m[2]), int(m[3] or 1)
    if start >= end or step < 1:
        raise ValueError(f"illegal -J value {text!r}")
    if end > MAX_INDEX or step > MAX_INDEX:
        raise OutOfRange(f"-J {text!r}: an index or step past {MAX_INDEX}")
    if m[4] == "":
        raise PercentEmpty(text)
    if m[4] is not None and _past(m[4], MAX_RUN):
        raise OutOfRange(f"-J {text!r}: a % past {MAX_RUN}")
    return Spec(start, end, step, None if m[4] is None else int(m[4]))


class ServerRefuses(ValueError):
    """A ``-J`` value PBS's qsub passes on and its server refuses (15014)."""


class PercentEmpty(ServerRefuses):
    """``-J 1-3%`` or ``1-3%x``."""


class OutOfRange(ServerRefuses):
    """An index or step past `MAX_INDEX`, or a ``%`` past `MAX_RUN`."""


def parse_submitted(text: Any) -> Spec:
    """A stored ``array_indices_submitted`` (``X-Y[:Z]``)."""
    return parse_spec(str(text))


def format_indices(indices: Iterable[int], step: int) -> str:
    """``array_indices_remaining`` as PBS writes it (checked): runs of indices `step`
    apart as ``a-b`` (``a-b:step``), others alone, joined by commas; ``-`` for none
    (``0-6:2`` less 0 and 2 is ``4-6:2``; ``1-10`` less 1-7 and 9 is ``8,10``)."""
    parts: list[str] = []
    run: list[int] = []

    def flush() -> None:
        if len(run) > 1:
            parts.append(f"{run[0]}-{run[-1]}" + (f":{step}" if step != 1 else ""))
        elif run:
            parts.append(str(run[0]))

    for index in sorted(set(indices)):
        if run and index - run[-1] != step:
            flush()
            run = []
        run.append(index)
    flush()
    return ",".join(parts) or "-"


def parse_runs(text: Any) -> list[range]:
    """The runs of a stored ``array_indices_remaining``, in its order, as ranges, never
    expanded (``4-6:2,9`` is ``range(4, 7, 2)`` and ``range(9, 10)``; ``-``: none): a
    10,000-index run costs what one index does. ValueError when it is not a list of
    indices."""
    text = str(text or "-")
    if text == "-":
        return []
    out: list[range] = []
    for part in text.split(","):
        m = re.fullmatch(r"(\d+)(?:-(\d+)(?::(\d+))?)?", part)
        if m is None or m[3] is not None and int(m[3]) < 1:
            raise ValueError(f"array_indices_remaining: {text!r} is not a list of indices")
        first = int(m[1])
        out.append(range(first, first + 1) if m[2] is None else
                   range(first, int(m[2]) + 1, int(m[3] or 1)))
    return out


def parse_indices(text: Any) -> list[int]:
    """The indices of a stored ``array_indices_remaining`` (``4-6:2,9``; ``-``: none)."""
    return [index for run in parse_runs(text) for index in run]


def count_indices(text: Any) -> int:
    """How many indices a stored ``array_indices_remaining`` lists, worked out from its
    runs (`parse_runs`). ValueError when it is not a list of indices."""
    return sum(len(run) for run in parse_runs(text))


def first_indices(runs: list[range], count: int) -> list[int]:
    """The first `count` indices of `runs` (`parse_runs`), in their order, the runs not
    expanded past them."""
    out: list[int] = []
    for run in runs:
        if len(out) >= count:
            break
        out.extend(run[:count - len(out)])
    return out


def without_index(runs: list[range], index: int, step: int) -> str:
    """``array_indices_remaining`` of `runs` (`parse_runs`) less `index`, as
    `format_indices` writes it, worked out from the runs: the one holding `index` is cut
    in two, and runs `step` apart are joined. Runs out of order, overlapping or of
    another step (no text the server writes) are expanded and written afresh."""
    runs = [run for run in runs if run]
    if any(len(run) > 1 and run.step != step for run in runs) or any(
            later.start <= earlier[-1] for earlier, later in pairwise(runs)):
        return format_indices((i for run in runs for i in run if i != index), step)
    pieces: list[range] = []
    for run in runs:
        if index in run:
            at = run.index(index)
            pieces.extend(part for part in (run[:at], run[at + 1:]) if part)
        else:
            pieces.append(run)
    merged: list[list[int]] = []  # (each run written: its first and last index)
    for piece in pieces:
        if merged and piece.start - merged[-1][1] == step:
            merged[-1][1] = piece[-1]  # (`step` after the last: one run, as format_indices)
        else:
            merged.append([piece.start, piece[-1]])
    return ",".join(str(first) if first == last else
                    f"{first}-{last}" + (f":{step}" if step != 1 else "")
                    for first, last in merged) or "-"


class Named(NamedTuple):
    """What a job identifier names in an array: the array's number, and the subjobs' first
    and last index and step (all None: the array itself, ``12[]``)."""

    number: str
    first: int | None
    last: int | None
    step: int

    @property
    def whole(self) -> bool:
        return self.first is None

    @property
    def single(self) -> bool:
        return self.first is not None and self.last is None

    def indices(self) -> range:
        assert self.first is not None
        return range(self.first, (self.first if self.last is None else self.last) + 1,
                     self.step)


class IdParts(NamedTuple):
    """An array's job identifier as written: the array's number, the first and last index
    and the step between its brackets (their digits; None where not written), and what
    follows the brackets (``.server``, ``@server``, "")."""

    number: str
    first: str | None
    last: str | None
    step: str | None
    rest: str


def id_parts(job_id: str) -> IdParts | None:
    """`job_id`'s parts (``12[2-5].server``: 12, 2, 5, None, .server), or None for an id
    without brackets (or not of their form). The one reader of an array's id: `named` and
    `file_suffix` and qdel's merging of subjobs (`pbsplug.cli.pbs`) read it so."""
    m = _ID.match(job_id)
    return None if m is None else IdParts(m[1], m[2], m[3], m[4], m[5])


def named(job_id: str) -> Named | None:
    """What `job_id` (``12[].server``, ``12[3]``, ``12[2-5].server``) names, or None for
    an ordinary job's id."""
    parts = id_parts(str(job_id).split(".", 1)[0])
    if parts is None or parts.rest:
        return None
    first, last, step = (None if n is None else _index(n)
                         for n in (parts.first, parts.last, parts.step))
    if first is not None and last is not None and last < first or (
            step is not None and step < 1):
        return None  # (a range backwards, or of step 0, names no subjob)
    return Named(parts.number, first, last, step or 1)


def _index(digits: str) -> int:
    """`digits` as an index or step of an id, one past `MAX_INDEX` as ``MAX_INDEX + 1``:
    no array holds it, and int() of thousands of digits is refused (a ValueError the
    server answered as Python's text)."""
    return MAX_INDEX + 1 if _past(digits, MAX_INDEX) else int(digits)


def array_id(number: str, server: str) -> str:
    return f"{number}[].{server}"


def subjob_id(array: str, index: int) -> str:
    """``12[3].server`` of array ``12[].server``."""
    number, _, server = array.partition(".")
    return f"{number[:-2]}[{index}].{server}"


def subjob_seq(array_seq: int, place: int) -> int:
    return SUBJOB_SEQ_BASE + array_seq * MAX_PLACES + place


def file_suffix(job_id: str) -> str:
    """What follows ``.o`` in a job's default output file's name: ``12``, and ``12.3`` for
    subjob ``12[3]`` (PBS's, checked)."""
    number = str(job_id).split(".", 1)[0]
    parts = id_parts(number)
    if parts is None or parts.rest or parts.first is None:
        return number.replace("[]", "")
    return f"{parts.number}.{parts.first}"


def subjob_attrs(array: dict[str, Any], array_job: str, index: int,
                 state: str = "Q") -> dict[str, Any]:
    """A subjob of `array` (the array's attributes) as it is instantiated or shown: the
    array's attributes but its own (`NOT_INHERITED`), its paths with its index, and
    ``array_id`` and ``array_index``."""
    attrs = {k: v for k, v in array.items() if k not in NOT_INHERITED}
    for path in ("Output_Path", "Error_Path"):
        if isinstance(attrs.get(path), str):
            attrs[path] = attrs[path].replace(INDEX_MARK, str(index))
    attrs.update(job_state=state, array_id=array_job, array_index=index, run_count=0)
    if array.get("Hold_Types") is not None:
        attrs["Hold_Types"] = "n"
    return attrs


def state_count(queued: int, running: int, exiting: int, expired: int) -> str:
    """``array_state_count`` as PBS writes it."""
    return f"Queued:{queued} Running:{running} Exiting:{exiting} Expired:{expired}"


__all__ = ["ARRAY_ATTRS", "INDEX_MARK", "MAX_ARRAY_SIZE", "Named", "PercentEmpty", "Spec",
           "array_id", "count_indices", "file_suffix", "first_indices", "format_indices", "named",
           "parse_indices", "parse_runs", "parse_spec", "parse_submitted", "state_count",
           "subjob_attrs", "subjob_id", "subjob_seq", "without_index"]
