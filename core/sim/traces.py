"""Workload trace readers: SWF (and .swf.gz), PBS accounting logs, Slurm `sacct --parsable2`.

`open_trace(path)` picks the reader from the file's suffix and content and returns a `Trace`:
its `.info` (what the header says) is read at once; iterating it yields `TraceJob` records in
submit order. A malformed line raises `TraceError` (a ValueError naming the file, the line,
the field and what was wrong); with `skip_bad=True` the line is counted in `trace.skipped`
and the first reasons are kept in `trace.skip_reasons`. Well-formed records that cannot be a
job for the simulator (no processor count, unknown run time, never started, a partial
execution record) are not errors: they are counted by reason in `trace.dropped`.

Memory: SWF is streamed (one line at a time, constant memory; the header is re-read when the
trace is iterated again). PBS accounting logs and sacct output are not in submit order (PBS
writes a job when it ends; sacct sorts by job id), so those two are read whole, sorted by
submit time, and then yielded: memory grows with their job count (a `TraceJob` is about
300 bytes). Convert very large ones to SWF to stream them.
"""

from __future__ import annotations

import calendar
import gzip
import math
import os
import re
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import IO

from pbsplug import values
from pbsplug.units import parse_duration, parse_select, parse_size

from .records import TraceInfo, TraceJob

FORMATS = ("swf", "pbs", "sacct")

#: How many skip reasons a trace keeps (the count itself is exact).
MAX_REASONS = 5
#: Largest time accepted, in seconds (about 31,700 years): beyond it a value is a typo.
MAX_SECONDS = 1e12
#: Largest processor or node count accepted.
MAX_COUNT = 1 << 31
#: The longest line read, in characters, its end of line included: no SWF, PBS or sacct
#: line comes near it. A longer one (a gzip bomb, /dev/zero) is a bad line and is never
#: built whole: memory must not grow with a line's length either.
MAX_LINE = 1 << 20
#: How much of an over-long line is read at a time while reading past it.
_PAST_CHUNK = 1 << 16
#: UTF-8's byte-order mark as the UTF-8 and the Latin-1 (SWF) readers decode it.
_BOMS = ("\ufeff", "\xef\xbb\xbf")
LONG_LINE = (f"longer than {MAX_LINE:,} characters; no SWF, PBS or sacct line comes near "
             "it (not read)")


class TraceError(ValueError):
    """A line of a trace that cannot be read: names the file, the line and the field."""

    def __init__(self, path: str, line: int, field: str, problem: str) -> None:
        self.path, self.line, self.field, self.problem = path, line, field, problem
        where = f"{path}:{line}" if line else path
        super().__init__(f"{where}: {field}: {problem}" if field else f"{where}: {problem}")


class _Bad(Exception):
    """Raised inside a line parser; the reader adds the file and the line."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem


class Trace:
    """A trace opened by `open_trace`: `.info` now, `TraceJob`s in submit order when iterated.

    After (or during) iteration: `skipped` bad lines (only with `skip_bad`), the first
    `skip_reasons`, and `dropped`, well-formed records that make no job, counted by reason.
    """

    def __init__(self, info: TraceInfo, jobs: Callable[[Trace], Iterator[TraceJob]],
                 skip_bad: bool) -> None:
        self.info = info
        self.skip_bad = skip_bad
        self.skipped = 0
        self.skip_reasons: list[str] = []
        self.dropped: dict[str, int] = {}
        self.jobs = 0
        self._jobs = jobs

    def __iter__(self) -> Iterator[TraceJob]:
        self.skipped, self.skip_reasons, self.dropped, self.jobs = 0, [], {}, 0
        for job in self._jobs(self):
            self.jobs += 1
            yield job

    def bad(self, path: str, line: int, field: str, problem: str) -> None:
        """Raise the error, or count it when skipping bad lines."""
        err = TraceError(path, line, field, problem)
        if not self.skip_bad:
            raise err
        self.skipped += 1
        if len(self.skip_reasons) < MAX_REASONS:
            self.skip_reasons.append(str(err))

    def bad_job(self, job: TraceJob, problem: str) -> None:
        """`bad` for a job the replay cannot take (a duplicate id, out of submit order)."""
        self.bad(job.path or str(self.info.path), job.line, "", problem)
        self.jobs -= 1  # skipped: a bad line, not a job read

    def drop(self, reason: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1

    def summary(self) -> str:
        """One line for people: jobs read, records dropped and lines skipped."""
        parts = [f"{self.jobs} jobs read from {self.info.path} ({self.info.format})"]
        if self.dropped:
            parts.append("dropped " + ", ".join(
                f"{n} {reason}" for reason, n in sorted(self.dropped.items())))
        if self.skipped:
            parts.append(f"skipped {self.skipped} bad lines, first: "
                         + "; ".join(self.skip_reasons))
        return "; ".join(parts)


def open_trace(path: str | os.PathLike[str], fmt: str | None = None,
               skip_bad: bool = False) -> Trace:
    """Open a trace; `fmt` is "swf", "pbs" or "sacct", or None to detect it.

    Detection: a directory is PBS accounting logs; `.swf` / `.swf.gz` is SWF; otherwise the
    first non-blank line decides (`;` or 18 numbers: SWF; `JobID|...`: sacct; `date;E;...`
    style records: PBS). Raises `TraceError` when the path cannot be read or recognised.
    """
    p = Path(path)
    name = str(p)
    if fmt is not None and fmt not in FORMATS:
        raise TraceError(name, 0, "", f"unknown trace format {fmt!r}; expected one of "
                         + ", ".join(FORMATS))
    if not p.exists():
        raise TraceError(name, 0, "", "no such file or directory")
    if fmt is None:
        fmt = _detect(p)
    if fmt == "swf":
        if p.is_dir():
            raise TraceError(name, 0, "", "is a directory; an SWF trace is one file")
        return Trace(_swf_header(name), lambda t: _swf_jobs(t, name), skip_bad)
    files = _pbs_files(p) if fmt == "pbs" else [p]
    info = TraceInfo(path=name, format=fmt)
    reader = _pbs_records if fmt == "pbs" else _sacct_records
    return Trace(info, lambda t: _sorted_jobs(t, files, reader), skip_bad)


# --- files ----------------------------------------------------------------------------------

def _open_text(path: str, encoding: str) -> IO[str]:
    """A text stream over a plain or gzip file (by its magic bytes, not its name).

    Undecodable bytes are replaced (U+FFFD), so bad text fails on the field it is in, never
    as a UnicodeDecodeError; SWF, all numbers, is read as Latin-1, which decodes any byte.
    """
    try:
        with open(path, "rb") as f:
            magic = f.read(2)
        if magic == b"\x1f\x8b":
            return gzip.open(path, "rt", encoding=encoding, errors="replace")
        return open(path, encoding=encoding, errors="replace")
    except OSError as exc:
        raise TraceError(path, 0, "", f"cannot read: {exc.strerror or exc}") from None


def _lines(trace_path: str, encoding: str) -> Iterator[tuple[int, str | None]]:
    """(line number, line) pairs; a truncated or corrupted gzip or a read error is a
    `TraceError` naming the last line read.

    A line longer than `MAX_LINE` comes as None (the caller reports it) and is not built:
    what was read of it is dropped and, when the caller goes on, the rest is read past in
    pieces of `_PAST_CHUNK`. A byte-order mark opening the file (Windows tools write one
    before UTF-8 text) is taken off the first line."""
    n = 0
    f = _open_text(trace_path, encoding)
    try:
        with f:
            readline = f.readline
            while line := readline(MAX_LINE + 1):
                n += 1
                if len(line) <= MAX_LINE:  # (measured with its mark: the line as read)
                    if n == 1 and line.startswith(_BOMS):
                        line = line.removeprefix(_BOMS[0]).removeprefix(_BOMS[1])
                    yield n, line
                    continue
                yield n, None
                if line[-1] != "\n":
                    while (rest := readline(_PAST_CHUNK)) and rest[-1] != "\n":
                        pass
    except (OSError, EOFError, zlib.error) as exc:  # (gzip.BadGzipFile is an OSError)
        raise TraceError(trace_path, n, "", f"cannot read past this line: {exc}" if n
                         else f"cannot read its first line: {exc}") from None


def _detect(p: Path) -> str:
    name = str(p)
    if p.is_dir():
        return "pbs"
    lower = p.name.lower()
    if lower.endswith((".swf", ".swf.gz")):
        return "swf"
    for n, line in _lines(name, "utf-8"):
        if line is None:
            raise TraceError(name, n, "line", f"{LONG_LINE}: not a trace this reader knows")
        text = line.strip()
        if not text:
            continue
        words = text.split(maxsplit=18)
        if text.startswith(";") or (len(words) == 18 and _numeric(words[0])):
            return "swf"
        if "|" in text and text.partition("|")[0].strip() == "JobID":
            return "sacct"
        if _PBS_RECORD.match(text):
            return "pbs"
        break
    raise TraceError(name, 0, "", "not a trace this reader knows (SWF, PBS accounting log, "
                     "sacct --parsable2 with a header); give the format with --format")


def _numeric(text: str) -> bool:
    if not _plain(text):
        return False
    try:
        float(text)
    except ValueError:
        return False
    return True


# --- numbers --------------------------------------------------------------------------------

def _plain(text: str) -> bool:
    """Whether `text` may be read by int() or float(): ASCII without `_`. Python also
    reads `1_00` as 100 and other scripts' digits (`٣`) as numbers; no trace writes them,
    so they are typos or garbage, not numbers."""
    return text.isascii() and "_" not in text


def _real(text: str, name: str) -> float:
    """A finite number; -1 passes through (SWF's unknown)."""
    if not _plain(text):
        raise _Bad(name, f"{text[:40]!r} is not a number")
    try:
        v = float(text)
    except ValueError:
        raise _Bad(name, f"{text[:40]!r} is not a number") from None
    if not math.isfinite(v):
        raise _Bad(name, f"{text[:40]!r} is not a finite number")
    if v > MAX_SECONDS or v < -MAX_SECONDS:
        raise _Bad(name, f"{text[:40]} is out of range (at most {MAX_SECONDS:.0e})")
    return v


def _count(text: str, name: str) -> int:
    """A whole number (written as one, or as N.0); -1 passes through."""
    if not _plain(text):
        raise _Bad(name, f"{text[:40]!r} is not a whole number")
    try:
        return _bounded_count(int(text), text, name)
    except ValueError:
        pass
    v = _real(text, name)
    if not v.is_integer():
        raise _Bad(name, f"{text[:40]!r} is not a whole number")
    return _bounded_count(int(v), text, name)


def _bounded_count(v: int, text: str, name: str) -> int:
    if v >= MAX_COUNT or v < -1:
        raise _Bad(name, f"{text[:40]} is out of range (-1 for unknown, else 0 to 2^31)")
    return v


# --- SWF ------------------------------------------------------------------------------------

#: The 18 SWF fields, as error messages name them.
SWF_FIELDS = ("job number", "submit time", "wait time", "run time", "allocated processors",
              "average CPU time", "used memory", "requested processors", "requested time",
              "requested memory", "status", "user id", "group id", "executable number",
              "queue number", "partition number", "preceding job number", "think time")

_HEADER_INTS = {"maxnodes": "max_nodes", "maxprocs": "max_procs",
                "unixstarttime": "unix_start_time"}


def _swf_header(path: str) -> TraceInfo:
    """The `;` lines before the first job: MaxNodes, MaxProcs, UnixStartTime, TimeZoneString,
    Queue/Partition descriptions; every other header line is kept in `notes`."""
    info = TraceInfo(path=path, format="swf")
    for n, line in _lines(path, "latin-1"):
        if line is None:
            break  # (not a header line: the job lines' reader reports it)
        text = line.strip()
        if not text:
            continue
        if not text.startswith(";"):
            break
        body = text[1:].strip()
        key, sep, value = body.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or " " in key:
            if body:
                info.notes.append(body)
            continue
        lower = key.lower()
        if lower in _HEADER_INTS:
            try:
                if not _plain(value):
                    raise ValueError(value)
                number = int(value)
            except ValueError:
                raise TraceError(path, n, f"header {key}",
                                 f"{value[:40]!r} is not a whole number") from None
            low = 0 if lower == "unixstarttime" else 1
            if (number < low and number != -1) or number >= 1 << 62:
                raise TraceError(path, n, f"header {key}", f"{number} is out of range "
                                 f"(-1 for unknown, else {low} or more)")
            setattr(info, _HEADER_INTS[lower], None if number == -1 else number)
        elif lower == "timezonestring":
            info.time_zone = value or None
        elif lower in ("queue", "partition"):
            # "; Queue: 2 batch jobs": the number, then what the log says of it.
            label, _, desc = value.partition(" ")
            table = info.queues if lower == "queue" else info.partitions
            if label:
                table[label] = desc.strip()
        else:
            info.notes.append(f"{key}: {value}")
    return info


#: SWF statuses 2-4 are the lines of a checkpointed or swapped job's partial executions;
#: the job itself is its summary line (status 0, 1 or 5).
_PARTIAL = "partial execution records (status 2-4)"


def _swf_jobs(trace: Trace, path: str) -> Iterator[TraceJob]:
    """Stream the job lines. Lines must be in submit order: a line that goes back in time is
    bad (an error, or skipped with skip_bad), so memory stays constant."""
    last_submit = 0.0
    for n, line in _lines(path, "latin-1"):
        if line is None:
            trace.bad(path, n, "line", LONG_LINE)
            continue
        text = line.lstrip()
        if not text or text[0] == ";":
            continue
        try:
            job = _swf_job(line, n)
        except _Bad as bad:
            trace.bad(path, n, bad.field, bad.problem)
            continue
        if job is None:
            continue
        if isinstance(job, str):
            trace.drop(job)
            continue
        if job.submit < last_submit:
            trace.bad(path, n, "submit time", f"{job.submit:g} goes back in time (the line "
                      f"before was submitted at {last_submit:g}); SWF lines are in submit "
                      "order: sort the file by field 2")
            continue
        last_submit = job.submit
        yield job


_SwfValues = tuple[int, float, float, float, int, int, float, float, int, str, str, str, int]


def _swf_fast(f: list[str]) -> _SwfValues | None:
    """The fields of a plain, valid line at full speed; None sends the line to
    `_swf_checked`, which finds and names what is wrong (or reads what is unusual)."""
    try:
        job_number, alloc, req_procs, status = int(f[0]), int(f[4]), int(f[7]), int(f[10])
        user, group, queue, partition = int(f[11]), int(f[12]), int(f[14]), int(f[15])
        submit, wait, run = float(f[1]), float(f[2]), float(f[3])
        req_time, req_mem = float(f[8]), float(f[9])
    except ValueError:
        return None
    m, c = MAX_SECONDS, MAX_COUNT
    if not (0 <= job_number < c and 0 <= submit <= m and -1 <= status <= 5
            and -1 <= alloc < c and -1 <= req_procs < c and -1 <= user < c
            and -1 <= group < c and -1 <= queue < c and -1 <= partition < c
            and (0 <= wait <= m or wait == -1) and (0 <= run <= m or run == -1)
            and (0 <= req_time <= m or req_time == -1)
            and (0 <= req_mem <= m or req_mem == -1)):
        return None
    return (job_number, submit, wait, run, alloc, req_procs, req_time, req_mem, status,
            str(user), str(group), str(queue), partition)


def _field(i: int) -> str:
    """How errors name SWF field `i` (0-based): ``run time (field 4)``."""
    return f"{SWF_FIELDS[i]} (field {i + 1})"


def _swf_checked(f: list[str]) -> _SwfValues:
    """The fields of a line, each checked, raising `_Bad` for the first wrong one."""
    job_number, alloc, req_procs, status, user, group, partition = (
        _count(f[i], _field(i)) for i in (0, 4, 7, 10, 11, 12, 15))
    submit, wait, run, req_time, req_mem = (_real(f[i], _field(i)) for i in (1, 2, 3, 8, 9))
    if job_number < 0:
        raise _Bad(_field(0), f"{f[0]} is negative")
    if submit < 0:
        raise _Bad(_field(1), f"{f[1]} is negative")
    for i, value in ((2, wait), (3, run), (8, req_time), (9, req_mem)):
        if value < 0 and value != -1:
            raise _Bad(_field(i), f"{f[i]} is negative (only -1, unknown, is allowed)")
    if status not in (-1, 0, 1, 2, 3, 4, 5):
        raise _Bad(_field(10), f"{status} is not an SWF status (-1, 0 to 5)")
    if _numeric(f[14]):
        queue = str(_count(f[14], _field(14)))
    else:
        queue = f[14]  # extended SWF (MetaCentrum) writes the queue's name
    return (job_number, submit, wait, run, alloc, req_procs, req_time, req_mem, status,
            str(user), str(group), queue, partition)


def _swf_job(line: str, n: int) -> TraceJob | str | None:
    """One SWF line as a job, or the reason it makes none (a string)."""
    f = line.split()
    if len(f) < 18:
        raise _Bad("fields", f"{len(f)} fields, SWF has 18")
    # (a line with a `_` goes to the checks: int() and float() read `1_00` as 100)
    values = (_swf_fast(f) if "_" not in line else None) or _swf_checked(f)
    job_number, submit, wait, run, alloc, req_procs, req_time, req_mem, status = values[:9]
    user, group, queue, partition = values[9:]
    if 2 <= status <= 4:
        return _PARTIAL
    ncpus = req_procs if req_procs > 0 else alloc
    if ncpus <= 0:
        return "no processor count (fields 5 and 8 unknown)"
    if run < 0:
        return "run time unknown (field 4)"
    queue_name = queue if queue != "-1" else str(partition) if partition >= 0 else None
    select = None
    mem = int(req_mem * 1024 * ncpus) if req_mem > 0 else None  # (per processor of field 8)
    for word in f[18:]:
        if "=" in word:  # extended SWF: a PBS-style request such as nodes=2:ppn=4
            select = _extended_select(word)
            # What the job runs with is the select: its cpus are the job's, whatever
            # fields 5 and 8 say, so that metrics and metadata count what ran.
            ncpus = _select_ncpus(select, _EXTENDED_FIELD)
            break
    return TraceJob(
        job_id=str(job_number), line=n, submit=submit, run_time=run, ncpus=ncpus,
        walltime=req_time if req_time > 0 else None, mem=mem,
        user=user if user != "-1" else "", group=group if group != "-1" else "",
        queue=queue_name, select=select, status=status,
        recorded_wait=wait if wait >= 0 else None)


_EXTENDED_FIELD = "select (the request after field 18)"


def _select_ncpus(select: str, field: str) -> int:
    """The cpus a select asks for in all: count × ncpus over its chunks (1 for a chunk that
    names none, as PBS's default chunk gives it), from 1 to 2^31."""
    try:  # (its counts and values are ASCII digits: `٣` is no number)
        chunks = parse_select(select)
    except ValueError as exc:
        raise _Bad(field, str(exc)) from None
    total = 0
    for chunk in chunks:
        ncpus = chunk.resources.get("ncpus", 1)
        if not isinstance(ncpus, int):
            raise _Bad(field, f"ncpus={str(ncpus)[:40]} is not a whole number")
        total += chunk.count * ncpus
    if not 1 <= total < MAX_COUNT:
        raise _Bad(field, f"{select[:40]} asks {total} cpus in all (expected 1 to 2^31)")
    return total


def _extended_select(word: str) -> str:
    """An extended SWF line's request as a select: Torque's (and old PBS's) ``nodes=``
    spec as PBS converts it (`_nodes_spec`); a select is checked as qsub checks one."""
    field = _EXTENDED_FIELD
    if word.startswith("nodes="):
        word = _nodes_spec(word[len("nodes="):], field)
    try:
        return values.select(word, "select")
    except ValueError as exc:
        raise _Bad(field, str(exc)) from None


def _nodes_spec(spec: str, field: str) -> str:
    """``2:ppn=4:prop+1:ppn=2`` as ``2:ncpus=4+1:ncpus=2``: each ``+`` part is a count (or
    one named node) with ``ppn`` cpus on each (1 when not given). Node properties, named
    nodes and gpus are not modelled and are left out (PBS also sets ``mpiprocs``, which
    does not matter here)."""
    chunks = []
    for part in spec.split("+"):
        first, *options = part.split(":")
        if not first:
            raise _Bad(field, f"nodes={spec[:40]}: a part names no nodes")
        # (ASCII digits, and their length first: int() refuses ``²``, and 4300 digits)
        count = (2**31 if values.past(first, 2**31) else int(first)) \
            if values.digits(first) else 1
        ppn = 1
        for option in options:
            key, _, value = option.partition("=")
            if key == "ppn":
                if not (values.digits(value) and not values.past(value, 2**31)
                        and 0 < int(value) < 2**31):
                    raise _Bad(field, f"nodes={spec[:40]}: ppn={value[:20]} is not a "
                               "number of cpus")
                ppn = int(value)
        if not 0 < count < 2**31:
            raise _Bad(field, f"nodes={spec[:40]}: {first[:20]} is not a number of nodes")
        chunks.append(f"{count}:ncpus={ppn}")
    return "+".join(chunks)


# --- the two formats read whole ------------------------------------------------------------

#: A parsed record before the time origin is known: (submit epoch, file index, line, job).
_Record = tuple[float, int, int, TraceJob]


def _sorted_jobs(trace: Trace, files: list[Path],
                 reader: Callable[[Trace, str, int], Iterator[_Record | str]]
                 ) -> Iterator[TraceJob]:
    """Read every file, sort by submit time (then file and line), shift to the first submit."""
    records: list[_Record] = []
    for index, path in enumerate(files):
        for rec in reader(trace, str(path), index):
            if isinstance(rec, str):
                trace.drop(rec)
            else:
                records.append(rec)
    records.sort(key=lambda r: (r[0], r[1], r[2]))
    if not records:
        return
    origin = records[0][0]
    if trace.info.unix_start_time is None:
        trace.info.unix_start_time = int(origin)
    for submit, index, _, job in records:
        job.submit = submit - origin
        if len(files) > 1:
            job.path = str(files[index])
        yield job


# --- PBS accounting logs --------------------------------------------------------------------

#: An array's own id (``12[].server``): its E spans its subjobs' runs, which have theirs.
_PBS_ARRAY = re.compile(r"^\d+\[\]")
_PBS_RECORD = re.compile(r"^\d\d/\d\d/\d{4} \d\d:\d\d:\d\d;[A-Za-z];")
#: key=value; a value in double quotes may hold blanks, and `\"` and `\\` inside it (what the
#: local engine writes for a quote or a backslash; a lone backslash is itself).
_PBS_PAIR = re.compile(r'([^\s=]+)=("(?:[^"\\]|\\["\\]|\\(?!["\\]))*"|\S*)')
_PBS_ESCAPE = re.compile(r'\\(["\\])')


def _pbs_files(p: Path) -> list[Path]:
    if not p.is_dir():
        return [p]
    files = sorted(f for f in p.iterdir() if f.is_file() and not f.name.startswith("."))
    if not files:
        raise TraceError(str(p), 0, "", "the directory holds no accounting files")
    return files


def _pbs_records(trace: Trace, path: str, index: int) -> Iterator[_Record | str]:
    """E records (job ended) only: `MM/DD/YYYY HH:MM:SS;E;jobid;key=value ...`."""
    for n, line in _lines(path, "utf-8"):
        if line is None:
            trace.bad(path, n, "line", LONG_LINE)
            continue
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        parts = text.split(";", 3)
        if len(parts) < 4 or not _PBS_RECORD.match(text):
            trace.bad(path, n, "record", "not `MM/DD/YYYY HH:MM:SS;TYPE;ID;key=value ...`")
            continue
        if parts[1] != "E":
            continue
        try:
            rec = _pbs_job(parts[2], parts[3], n, index)
        except _Bad as bad:
            trace.bad(path, n, bad.field, bad.problem)
            continue
        yield rec


def _pbs_epoch(attrs: dict[str, str], key: str) -> float | None:
    text = attrs.get(key)
    if text is None or text == "":
        return None
    v = _real(text, key)
    if v < 0:
        raise _Bad(key, f"{text} is negative")
    return v


def _pbs_job(job_id: str, body: str, n: int, index: int) -> _Record | str:
    if not job_id.strip():
        raise _Bad("job id", "is empty")
    if _PBS_ARRAY.match(job_id):  # (PBS's E of an array itself: no cpus of its own)
        return "an array's own record (its subjobs' are replayed)"
    attrs = {k: _PBS_ESCAPE.sub(r"\1", v[1:-1]) if v.startswith('"') else v
             for k, v in _PBS_PAIR.findall(body)}
    qtime = _pbs_epoch(attrs, "qtime")
    if qtime is None:
        qtime = _pbs_epoch(attrs, "ctime")
    if qtime is None:
        raise _Bad("qtime", "missing (and no ctime)")
    start, end = _pbs_epoch(attrs, "start"), _pbs_epoch(attrs, "end")
    if not start:
        return "never started (E record without start)"
    if end is None:
        raise _Bad("end", "missing")
    if end < start:
        raise _Bad("end", f"{end:g} is before start {start:g}")
    if start < qtime:
        raise _Bad("start", f"{start:g} is before qtime {qtime:g}")
    ncpus = _pbs_int(attrs, "Resource_List.ncpus")
    select = attrs.get("Resource_List.select") or None
    if select is not None:
        # The job runs with its select: its cpus are the select's sum (PBS sets
        # Resource_List.ncpus to it; a record where the two differ is replayed as it ran).
        ncpus = _select_ncpus(select, "Resource_List.select")
    if ncpus is None:
        ncpus = _pbs_int(attrs, "resources_used.ncpus") or 1
    if not 1 <= ncpus < MAX_COUNT:
        raise _Bad("Resource_List.ncpus", f"{ncpus} is out of range (1 to 2^31)")
    walltime = None
    if attrs.get("Resource_List.walltime"):
        try:
            walltime = float(parse_duration(attrs["Resource_List.walltime"]))
        except (ValueError, OverflowError) as exc:
            raise _Bad("Resource_List.walltime", str(exc)) from None
        if walltime > MAX_SECONDS:
            raise _Bad("Resource_List.walltime", f"{attrs['Resource_List.walltime'][:40]} is "
                       f"out of range (at most {MAX_SECONDS:.0e} s)")
    mem = None
    if attrs.get("Resource_List.mem"):
        try:
            mem = parse_size(attrs["Resource_List.mem"])
        except ValueError as exc:
            raise _Bad("Resource_List.mem", str(exc)) from None
    exit_status = attrs.get("Exit_status")
    status = -1
    if exit_status:
        try:
            if not _plain(exit_status):
                raise ValueError(exit_status)
            status = 1 if int(exit_status) == 0 else 0
        except ValueError:
            raise _Bad("Exit_status", f"{exit_status[:40]!r} is not a whole number") from None
    if start - qtime > MAX_SECONDS or end - start > MAX_SECONDS:
        raise _Bad("end", "the job's times are out of range")
    job = TraceJob(
        job_id=job_id, line=n, submit=qtime, run_time=end - start, ncpus=ncpus,
        walltime=walltime, nodes=_pbs_int(attrs, "Resource_List.nodect"), mem=mem,
        user=attrs.get("user", ""), group=attrs.get("group", ""),
        queue=attrs.get("queue") or None, select=select, status=status,
        recorded_wait=start - qtime)
    return (qtime, index, n, job)


def _pbs_int(attrs: dict[str, str], key: str) -> int | None:
    text = attrs.get(key)
    if not text:
        return None
    v = _count(text, key)
    if v < 0:
        raise _Bad(key, f"{text} is negative")
    return v


# --- Slurm sacct --parsable2 ----------------------------------------------------------------

_SACCT_STATUS = {"COMPLETED": 1, "CANCELLED": 5, "FAILED": 0, "TIMEOUT": 0, "NODE_FAIL": 0,
                 "OUT_OF_MEMORY": 0, "PREEMPTED": 0, "BOOT_FAIL": 0, "DEADLINE": 0}
_SLURM_TIME = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?\Z", re.ASCII)
_SLURM_MEM = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)([nc]?)\Z", re.IGNORECASE | re.ASCII)
_MEM_UNITS = {"": 1 << 20, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40,
              "P": 1 << 50}
_NEVER = ("", "Unknown", "None")


def _slurm_duration(text: str, name: str) -> float | None:
    """Slurm's `[D-]HH:MM:SS`, `MM:SS`, `MM` (minutes) or `D-HH[:MM]`; None when unlimited."""
    if text in ("UNLIMITED", "Partition_Limit", "INVALID", ""):
        return None
    m = _SLURM_TIME.match(text)
    if not m or any(g is not None and len(g) > 12 for g in m.groups()):
        raise _Bad(name, f"{text[:40]!r} is not a Slurm time ([D-]HH:MM:SS, MM:SS, MM)")
    days, a, b, c = m.groups()
    if days is not None:
        h, mi, s = int(a), int(b or 0), int(c or 0)
    elif c is not None:
        h, mi, s = int(a), int(b), int(c)
    elif b is not None:
        h, mi, s = 0, int(a), int(b)
    else:
        h, mi, s = 0, int(a), 0
    total = ((int(days or 0) * 24 + h) * 60 + mi) * 60 + s
    if total > MAX_SECONDS:
        raise _Bad(name, f"{text[:40]} is out of range")
    return float(total)


#: The last second a real sacct prints as a date: Slurm's times are seconds since 1970
#: (a job's are its clock's readings), and 2^32 - 2 and 2^32 - 1 are its markers of no
#: time (NO_VAL and INFINITE), which sacct prints as None and Unknown.
_SLURM_LAST = 2**32 - 3


def _slurm_date(text: str, name: str) -> float | None:
    """An sacct date (`2024-01-31T10:00:00`, local time without a zone) as seconds.

    Naive dates are taken as UTC: only differences matter, and they are exact except across
    a daylight-saving change in the site's zone (an hour off). Epoch seconds are accepted too.
    A date before 1970 or after 2106-02-07T06:28:13 (`_SLURM_LAST`) is an error: no sacct
    prints one (Python reads years 1 to 9999).
    """
    if text in _NEVER:
        return None
    if text.isascii() and text.isdigit():
        v = _real(text, name)
    else:
        try:
            dt = datetime.fromisoformat(text)
            v = dt.timestamp() if dt.tzinfo is not None else \
                float(calendar.timegm(dt.timetuple()))
        except (ValueError, OverflowError, OSError):
            raise _Bad(name, f"{text[:40]!r} is not a date (YYYY-MM-DDTHH:MM:SS)") from None
    if not 0 <= v <= _SLURM_LAST:
        raise _Bad(name, f"{text[:40]!r} is out of range: sacct prints dates from 1970 to "
                   "2106-02-07T06:28:13 UTC")
    return v


def _sacct_records(trace: Trace, path: str, index: int) -> Iterator[_Record | str]:
    header: list[str] | None = None
    need = ("JobID", "Submit", "Start", "End")
    for n, line in _lines(path, "utf-8"):
        if line is None:
            if header is None:
                raise TraceError(path, n, "header", LONG_LINE)
            trace.bad(path, n, "line", LONG_LINE)
            continue
        text = line.rstrip("\r\n")
        if not text.strip():
            continue
        cols = text.split("|")
        if header is None:
            header = [c.strip() for c in cols]
            twice = sorted({c for c in header if c and header.count(c) > 1})
            if twice:
                raise TraceError(path, n, "header", f"the field {twice[0]} is named twice; "
                                 "which one to read is not known")
            missing = [c for c in need if c not in header]
            if missing:
                raise TraceError(path, n, "header", "sacct output needs the fields "
                                 + ", ".join(missing) + " (run sacct --parsable2 with -o "
                                 "JobID,Submit,Start,End,Timelimit,NCPUS,...)")
            continue
        if cols and cols[-1] == "" and len(cols) == len(header) + 1:
            cols.pop()  # --parsable (not 2) ends every line with a |
        if len(cols) != len(header):
            trace.bad(path, n, "fields", f"{len(cols)} fields, the header has {len(header)}")
            continue
        row = dict(zip(header, cols, strict=True))
        job_id = row["JobID"].strip()
        if "." in job_id:
            continue  # a job step (123.batch, 123.0, 123.extern)
        try:
            rec = _sacct_job(row, job_id, n, index)
        except _Bad as bad:
            trace.bad(path, n, bad.field, bad.problem)
            continue
        yield rec


def _sacct_int(row: dict[str, str], *keys: str) -> int | None:
    """The first of `keys` that gives a count; 0 gives none (sacct writes ReqCPUS=0 or
    ReqNodes=0 when the request named none), so the next key is read, as for an empty one."""
    for key in keys:
        text = row.get(key, "").strip()
        if text:
            v = _count(text, key)
            if v < 0:
                raise _Bad(key, f"{text} is negative")
            if v > 0:
                return v
    return None


def _sacct_job(row: dict[str, str], job_id: str, n: int, index: int) -> _Record | str:
    if not job_id:
        raise _Bad("JobID", "is empty")
    submit = _slurm_date(row["Submit"].strip(), "Submit")
    if submit is None:
        raise _Bad("Submit", "missing")
    start = _slurm_date(row["Start"].strip(), "Start")
    end = _slurm_date(row["End"].strip(), "End")
    if start is None:
        return "never started (no Start)"
    if end is None:
        return "not finished (no End)"
    if end < start:
        raise _Bad("End", f"{row['End']} is before Start {row['Start']}")
    if start < submit:
        raise _Bad("Start", f"{row['Start']} is before Submit {row['Submit']}")
    ncpus = _sacct_int(row, "ReqCPUS", "NCPUS", "AllocCPUS") or 1
    nodes = _sacct_int(row, "ReqNodes", "NNodes", "AllocNodes")
    walltime = _slurm_duration(row.get("Timelimit", "").strip(), "Timelimit")
    mem = None
    req_mem = row.get("ReqMem", "").strip()
    if req_mem and req_mem != "0":
        m = _SLURM_MEM.match(req_mem)
        if not m:
            raise _Bad("ReqMem", f"{req_mem[:40]!r} is not a Slurm memory size (4000M, 4Gn)")
        size = float(m.group(1)) * _MEM_UNITS[m.group(2).upper()]
        per = m.group(3).lower()
        size *= ncpus if per == "c" else (nodes or 1) if per == "n" else 1
        if not size < 2**63:  # (inf and NaN too)
            raise _Bad("ReqMem", f"{req_mem[:40]!r} is out of range")
        mem = int(size)
    state = row.get("State", "").strip().split(" ")[0]
    return (submit, index, n, TraceJob(
        job_id=job_id, line=n, submit=submit, run_time=end - start, ncpus=ncpus,
        walltime=walltime, nodes=nodes, mem=mem, user=row.get("User", "").strip(),
        group=row.get("Group", "").strip(), queue=row.get("Partition", "").strip() or None,
        status=_SACCT_STATUS.get(state, -1), recorded_wait=start - submit))
