"""PBS value formats: durations, sizes, and `select` / `place` specifications.

Plugins, the scheduler and the engine all read `Resource_List` values the way PBS writes them,
so the parsers live in the kernel. Each raises `ValueError` with a message that names the bad
value and what PBS accepts.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .values import LONG_MAX, SIZE_SHIFTS, digits, needs_quotes, past
from .values import quoted as _quoted

_SIZE_UNITS = {"": 1, "b": 1, "w": 8, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
               "p": 1 << 50}
_SIZE_RE = re.compile(r"^\s*([0-9]+)\s*([kmgtp]?)(b|w)?\s*$", re.IGNORECASE)


def parse_size(value: str | int) -> int:
    """Bytes in a PBS size: ``4gb``, ``512mb``, ``100kb``, ``2048`` (bytes), ``1kw`` (words).

    PBS sizes are binary: 1kb = 1024 bytes.
    """
    if isinstance(value, bool):
        raise ValueError(f"size {value!r} is not a PBS size (for example 4gb or 512mb)")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"size {value} is negative")
        return value
    m = _SIZE_RE.match(str(value))
    if not m:
        raise ValueError(f"size {value!r} is not a PBS size (for example 4gb or 512mb)")
    if past(m.group(1), LONG_MAX):  # (before int(), which refuses 4300 digits and more)
        raise ValueError(f"size {_quoted(value)} is out of range")
    number, scale, unit = int(m.group(1)), m.group(2).lower(), (m.group(3) or "b").lower()
    return number * _SIZE_UNITS[scale] * _SIZE_UNITS[unit]


def kilobytes(nbytes: int) -> int:
    """Whole kilobytes holding `nbytes`, rounded up: what PBS writes in exec_vnode and
    resources_assigned (``1500b`` is ``2kb``)."""
    return -(-nbytes // 1024)


def format_size(nbytes: int) -> str:
    """The shortest exact PBS size for a byte count: 4294967296 -> ``4gb``."""
    for suffix, scale in (("pb", 1 << 50), ("tb", 1 << 40), ("gb", 1 << 30), ("mb", 1 << 20),
                          ("kb", 1 << 10)):
        if nbytes and nbytes % scale == 0:
            return f"{nbytes // scale}{suffix}"
    return f"{nbytes}b"


#: PBS's spellings of a boolean attribute value (qmgr, hook attributes, sched objects).
TRUE_WORDS = frozenset({"true", "t", "y", "1"})
FALSE_WORDS = frozenset({"false", "f", "n", "0"})


def parse_bool(value: Any) -> bool:
    """A PBS boolean: ``True``/``False``, or one of true|t|y|1|false|f|n|0 in any case."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in TRUE_WORDS or text in FALSE_WORDS:
        return text in TRUE_WORDS
    raise ValueError(f"{value!r} is not a boolean (true|t|y|1|false|f|n|0)")


#: The longest duration a value may hold: a signed 64-bit count of seconds, PBS's long.
MAX_DURATION = LONG_MAX


def parse_duration(value: object) -> int:
    """Seconds in a PBS duration: ``HH:MM:SS``, ``MM:SS``, or plain seconds.

    ``01:30:00`` -> 5400. Fractions of a second are dropped, as PBS does. Digits are
    ASCII only (other scripts' digits, which float() reads, are not PBS's). Any other value
    (a hook's list, None) is refused with ValueError.
    """
    if isinstance(value, bool):
        raise ValueError(f"duration {value!r} is not [[HH:]MM:]SS")
    if isinstance(value, (int, float)):
        if value < 0:
            raise ValueError(f"duration {value} is negative")
        seconds = value
    else:
        text = str(value).strip()
        parts = text.split(":")
        if (not text or len(parts) > 3
                or not all(re.fullmatch(r"[0-9]+(\.[0-9]*)?", p) for p in parts)):
            raise ValueError(f"duration {value!r} is not [[HH:]MM:]SS")
        seconds = 0.0
        for part in parts:
            seconds = seconds * 60 + float(part)
    if not seconds <= MAX_DURATION:  # also NaN and inf
        raise ValueError(f"duration {str(value)[:40]!r} is over {MAX_DURATION} seconds")
    return int(seconds)


def parse_duration_cached(value: object) -> int:
    """`parse_duration` of a value read again and again (a queue's or a trace's few
    walltimes, at every job's start and every cycle): parsed once. Any other value (a
    hook's list) is parsed, and refused, as `parse_duration` does; an error is raised each
    time, never kept."""
    if isinstance(value, (str, int, float)):
        return _parse_duration_memo(value)
    return parse_duration(value)


@lru_cache(maxsize=1024, typed=True)  # (typed: True is refused even after 1 was parsed)
def _parse_duration_memo(value: str | int | float) -> int:
    return parse_duration(value)


def format_duration(seconds: int | float) -> str:
    """``HH:MM:SS`` for a number of seconds, as qstat prints walltime; a negative one as
    ``-HH:MM:SS`` (-2 is ``-00:00:02``, not ``-1:59:58``). A caller that shows a person a
    time that cannot be negative, such as an idle time, says what a negative one means."""
    seconds = int(seconds)
    sign, seconds = ("-", -seconds) if seconds < 0 else ("", seconds)
    return f"{sign}{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


def _exec_vnode_parts(text: str) -> Iterator[str]:
    """Each vnode's ``name:res=value...`` of an ``exec_vnode``, its parentheses and spaces
    around it taken off; empty ones left out."""
    return (part for part in (chunk.strip().strip("()") for chunk in str(text or "").split("+"))
            if part)


def parse_exec_vnode(text: str) -> list[tuple[str, dict[str, str]]]:
    """The chunks of an ``exec_vnode`` (or ``resv_nodes``): ``(n1:ncpus=2:mem=4gb)+(n2:ncpus=1)``
    -> [("n1", {"ncpus": "2", "mem": "4gb"}), ("n2", {"ncpus": "1"})]. Values stay strings."""
    out = []
    for part in _exec_vnode_parts(text):
        name, *res = part.split(":")
        out.append((name, dict(r.split("=", 1) for r in res if "=" in r)))
    return out


def exec_vnode_names(text: str) -> tuple[str, ...]:
    """The vnode of each chunk of an ``exec_vnode`` (or ``resv_nodes``), in order, as
    `parse_exec_vnode` names them without reading their resources (a power run reads a
    hundred estimates of hundreds of chunks): ``(n1:ncpus=2)+(n2)`` -> ("n1", "n2")."""
    return tuple(part.split(":", 1)[0] for part in _exec_vnode_parts(text))


#: The periodic event's vnode attribute naming the suspended jobs on a vnode (pbsplug's
#: addition: a suspended job's cpus are released, so, as in PBS, its vnodes' ``jobs`` and
#: ``resources_assigned`` no longer show it; hookspecs.periodic).
SUSPENDED_JOBS = "suspended_jobs"


def jobs_by_vnode(jobs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    """Each vnode's jobs, from (job id, exec_vnode) pairs, in their order, each job once
    per vnode: ``[("7.s", "(n1:ncpus=1)+(n1:ncpus=1)")]`` -> {"n1": ["7.s"]}."""
    out: dict[str, list[str]] = {}
    for job_id, exec_vnode in jobs:
        for name in dict.fromkeys(exec_vnode_names(exec_vnode)):
            out.setdefault(name, []).append(job_id)
    return out


def format_exec_host(chunks: Iterable[tuple[str, Mapping[str, Any]]],
                     host_of: Callable[[str], str]) -> str:
    """PBS's exec_host of a job's exec_vnode chunks: ``host/index`` per chunk, the index
    counting the job's chunks on that host from 0, and ``*ncpus`` unless the chunk has one
    cpu (``*0`` for the rest of a host held whole): ``vm/0*2+vm/1*0``."""
    counts: dict[str | None, int] = {}  # per host, its chunks before the current vnode's
    parts = []
    last_name = last_res = host = None
    ncpus = index = 0
    for name, res in chunks:
        # (a vnode's chunks come one after the other, alike ones sharing their mapping:
        # its host, its host's count and their ncpus are read once)
        if name is not last_name:
            counts[host] = index
            host, last_name = host_of(name), name
            index = counts.get(host, 0)
        if res is not last_res:
            ncpus, last_res = int(res.get("ncpus", 0) or 0), res
        parts.append(f"{host}/{index}" if ncpus == 1 else f"{host}/{index}*{ncpus}")
        index += 1
    return "+".join(parts)


@dataclass
class Chunk:
    """One chunk of a select: ``count`` copies of ``resources`` (``ncpus``, ``mem``, ...)."""

    count: int
    resources: dict[str, str | int] = field(default_factory=dict)

    def __str__(self) -> str:
        res = ":".join(f"{k}={select_value(v)}" for k, v in self.resources.items())
        return f"{self.count}:{res}" if res else str(self.count)


_RES_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*\Z")


def _split_unquoted(text: str, sep: str, spec: str) -> list[str]:
    """`text` split at each `sep` outside quotes (``"..."`` or ``'...'``); ValueError for a
    quote left open."""
    if '"' not in text and "'" not in text:
        return text.split(sep)
    parts, start, quote = [], 0, ""
    for at, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == sep:
            parts.append(text[start:at])
            start = at + 1
    if quote:
        raise ValueError(f"select {spec!r}: a quote ({quote}) is left open")
    parts.append(text[start:])
    return parts


def parse_select(spec: str) -> list[Chunk]:
    """Chunks of a select specification: ``2:ncpus=4:mem=8gb+1:ncpus=1``.

    Integer values become ints; sizes and strings stay as written. A value may be quoted
    (``arch="a:b"``, as PBS writes one that holds what a select separates): it is read
    without its quotes.
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"select {spec!r} is empty; expected N:res=value[:...][+...]")
    chunks = []
    for text in _split_unquoted(spec.strip(), "+", spec):
        pieces = _split_unquoted(text, ":", spec)
        count = 1
        if pieces and digits(pieces[0]):
            if past(pieces[0], LONG_MAX):  # (before int(): 4300 digits and more are refused)
                raise ValueError(f"select {_quoted(spec)}: chunk count {_quoted(pieces[0])} is "
                                 "out of range")
            count = int(pieces.pop(0))
            if count < 1:
                raise ValueError(f"select {spec!r}: a chunk count must be at least 1")
        if not pieces and digits(text.strip()):
            raise ValueError(f"select {spec!r}: chunk {text!r} names no resource")
        resources: dict[str, str | int] = {}
        for piece in pieces:
            name, sep, val = piece.partition("=")
            quoted = len(val) >= 2 and val[0] == val[-1] and val[0] in "\"'"
            if quoted:
                val = val[1:-1]
            elif '"' in val or "'" in val:
                raise ValueError(f"select {spec!r}: the value of {name} in {piece!r} is "
                                 "not quoted whole")
            if not sep or not _RES_NAME.match(name) or val == "":
                raise ValueError(
                    f"select {spec!r}: {piece!r} is not res=value (in chunk {text!r})")
            if not quoted and any(c.isspace() for c in val):  # (PBS: `ncpus= 2` refused)
                raise ValueError(f"select {spec!r}: the value of {name} in {piece!r} holds "
                                 "a space")
            # (a number past a long stays text, for its type's check to refuse)
            resources[name] = val if quoted or not digits(val) or past(val, LONG_MAX) \
                else int(val)
        chunks.append(Chunk(count, resources))
    return chunks


def chunk_defaults(defaults: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    """One table from ``default_chunk`` tables (a queue's, then the server's), the first
    naming a resource winning; ncpus 1 when none names it (PBS's server is made with
    ``default_chunk.ncpus = 1``). Each table's resources come by name, whatever their
    case, as OpenPBS 23.06 appends them to a chunk (checked: ``2:vmem=1gb`` under the
    queue's ``mem`` and the server's ``ncpus`` and ``arch`` is
    ``2:vmem=1gb:mem=7mb:arch=linux:ncpus=1``)."""
    merged: dict[str, Any] = {}
    for table in defaults:
        if isinstance(table, Mapping):
            for key in sorted(table, key=lambda k: str(k).lower()):
                if table[key] is not None:
                    merged.setdefault(key, table[key])
    merged.setdefault("ncpus", 1)
    return merged


def default_chunks(queue: Any, server: Any) -> tuple[Any, Any]:
    """The default_chunk tables a job of `queue` takes, the queue's then the server's
    (`with_chunk_defaults`'s `defaults`): from their objects or their stored attributes (anything
    with ``get``); `queue` may be None."""
    return (queue.get("default_chunk") if queue is not None else None,
            server.get("default_chunk"))


def with_chunk_defaults(chunks: tuple[Chunk, ...],
                        defaults: tuple[Mapping[str, Any] | None, ...] = ()
                        ) -> tuple[Chunk, ...]:
    """`chunks`, each given what it lacks of `chunk_defaults(defaults)` (after what it asks
    for, as PBS appends them: its ``schedselect``); chunks that lack nothing are returned
    as they are."""
    merged = chunk_defaults(defaults) if defaults else _NCPUS_ONE
    out = None
    for i, chunk in enumerate(chunks):
        missing = [key for key in merged if key not in chunk.resources]
        if missing:
            if out is None:
                out = list(chunks)
            out[i] = Chunk(chunk.count, {**chunk.resources,
                                         **{key: merged[key] for key in missing}})
    return chunks if out is None else tuple(out)


_NCPUS_ONE = {"ncpus": 1}
#: The resource types whose values a job's chunks add up to (`select_sums`).
SUMMED_TYPES = frozenset({"long", "size", "float"})


def select_sums(select: str, defaults: tuple[Mapping[str, Any] | None, ...],
                types: Mapping[str, str]) -> dict[str, Any]:
    """What PBS's server writes job-wide for a job with a select (OpenPBS 23.06, checked):
    ``nodect``, the number of chunks, and the sum over the chunks, default_chunk's values
    included, of each resource of a numeric type in `types` (long, size, float): ``ncpus``
    always, ``mem`` when a chunk names it (``2:ncpus=1:mem=10mb`` -> ``ncpus=2, mem=20mb,
    nodect=2``), ``mpiprocs`` likewise. Sizes are added up in PBS's units (`_size_sum`). A
    value that is not its type's is left out (the select's own check names it), and so
    is a sum past what a PBS value holds."""
    chunks = with_chunk_defaults(tuple(parse_select(select)), defaults)
    sums: dict[str, Any] = {}
    sizes: dict[str, list[_Size]] = {}  # name -> each chunk's, as PBS adds them up
    for chunk in chunks:
        for name, value in chunk.resources.items():
            kind = types.get(name)
            if kind not in SUMMED_TYPES:
                continue
            try:
                one = parse_size(value) if kind == "size" else \
                    float(value) if kind == "float" else int(value)
            except (TypeError, ValueError):
                continue
            sums[name] = sums.get(name, 0) + chunk.count * one
            if kind == "size":
                sizes.setdefault(name, []).append(_size_part(chunk.count, value))
    for name, total in list(sums.items()):
        if not -LONG_MAX <= total <= LONG_MAX or total != total:  # (no value PBS could hold)
            del sums[name]
        elif types[name] == "size":  # (rounded up chunk by chunk: may pass it now)
            text = _size_sum(sizes[name])
            if parse_size(text) > LONG_MAX:
                del sums[name]
            else:
                sums[name] = text
    sums["nodect"] = sum(chunk.count for chunk in chunks)
    return sums


#: A size as PBS adds sizes up: (number, shift: 0 for b or w, 10 for kb or kw, ...,
#: in words).
_Size = tuple[int, int, bool]
_SCALES = {shift: scale for scale, shift in SIZE_SHIFTS.items()}


def _size_part(count: int, value: str | int) -> _Size:
    """A chunk's size `value` taken `count` times, in its own unit (``2 x 1500b`` is
    ``3000b``); a bare number is bytes."""
    m = None if isinstance(value, int) else _SIZE_RE.match(str(value))
    if m is None:
        return count * int(value), 0, False
    return (count * int(m.group(1)), SIZE_SHIFTS[m.group(2).lower()],
            (m.group(3) or "b").lower() == "w")


def _in_shift(number: int, shift: int, to: int) -> int:
    """`number` at `shift` written at the shift `to`, rounded up."""
    return number << (shift - to) if shift >= to else -(-number >> (to - shift))


def _size_sum(parts: list[_Size]) -> str:
    """The chunks' sizes added up as OpenPBS 23.06 writes the sum (checked on 36 selects):
    the first chunk's as it is; then each next one added: to nothing (0 in any unit), it
    replaces it; else both in words when both are (a word counts 8 bytes otherwise), at the
    smaller of their two units but never below kilo, each rounded up to it (``1500b +
    1500b`` is ``4kb``, ``1w + 1w`` is ``2kw``, ``1kw + 1kb`` is ``9kb``)."""
    number, shift, words = parts[0]
    for other, other_shift, other_words in parts[1:]:
        if not number:
            number, shift, words = other, other_shift, other_words
            continue
        if words != other_words:  # (one in words: it is counted in bytes)
            if words:
                number, words = number * 8, False
            else:
                other *= 8
        to = min(shift, other_shift) or 10
        number = _in_shift(number, shift, to) + _in_shift(other, other_shift, to)
        shift = to
    return f"{number}{_SCALES[shift]}{'w' if words else 'b'}"


def request_sums(res: Mapping[str, Any], defaults: tuple[Mapping[str, Any] | None, ...],
                 types: Mapping[str, str]) -> dict[str, Any]:
    """What the server writes beside a job's request `res` (`with_sums`): a select's
    `select_sums` (none when it does not parse: its check says why), or for a job without
    one ``nodect`` 1 and its chunk's ``ncpus`` when it asks for none."""
    select = res.get("select")
    if select:
        try:
            return select_sums(str(select), defaults, types)
        except ValueError:
            return {}
    if res.get("ncpus") is None:
        return {"nodect": 1, "ncpus": chunk_defaults(defaults)["ncpus"]}
    return {"nodect": 1}


def with_sums(res: Mapping[str, Any], defaults: tuple[Mapping[str, Any] | None, ...],
              types: Mapping[str, str]) -> dict[str, Any]:
    """A job's Resource_List `res` with what the server writes beside its request, as
    PBS's: its select's `select_sums`; for a job without one, ``nodect`` 1 and the chunk's
    ``ncpus`` when it asks for none. A select that does not parse is left to its check."""
    return {**res, **request_sums(res, defaults, types)}


def converted_select(res: Mapping[str, Any], host_level: Iterable[str]) -> str:
    """PBS's select for a job that asks for none (OpenPBS 23.06, checked): one chunk of its
    job-wide host-level resources, by name whatever their case (``-l ncpus=2 -l mem=1gb -l
    walltime=1:00`` -> ``1:mem=1gb:ncpus=2``), a value quoted where it holds what a select
    separates (``arch=a:b`` -> ``arch="a:b"``, `select_value`); the job's ``place`` is then
    ``pack``."""
    names = set(host_level)
    return ":".join(["1", *(f"{name}={select_value(res[name])}"
                            for name in sorted(res, key=lambda n: (n.lower(), n))
                            if name in names and res[name] is not None)])


#: PBS's errors for an old ``nodes`` specification (OpenPBS 23.06, checked): 15089, and
#: 15035 for a word that names neither a host nor a boolean resource.
PBSE_BADNODESPEC, PBSE_UNKRESC = 15089, 15035


class NodesError(ValueError):
    """A ``nodes`` specification PBS refuses: its error number and its words."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def nodes_select(spec: str, *, hosts: Iterable[str] = (), types: Mapping[str, str],
                 ncpus: Any = None, mem: Any = None) -> tuple[str, str]:
    """PBS's select and place for an old ``-l nodes=`` specification, as OpenPBS 23.06's
    server converts one (checked one by one): ``N[:ppn=P][:ncpus=C][:host][:prop]`` parts
    joined by ``+``, then ``#excl`` or ``#shared``. A part is N chunks (1 for a part that
    starts with a name) of ``ncpus=P*C``, with ``mpiprocs=P`` when P > 1; a name of
    `hosts` is ``host=<name>``, a boolean resource of `types` ``<name>=True`` (``nodes=
    2:ppn=2+vm`` -> ``2:ncpus=2:mpiprocs=2+1:ncpus=1:host=vm``). The place is ``scatter``,
    ``scatter:excl`` with ``#excl``, ``free`` with ``#shared``. A job-wide `ncpus` asked
    for is shared out by process (it must be a multiple of the processes, the sum of N*P:
    each chunk gets P times its share), a job-wide `mem` by chunk, in KB, rounded down.
    Raises `NodesError`: 15089 ``node(s) specification error`` for what is no such
    specification (``0``, ``ppn=x``, ``mem=1gb`` inside it), 15035 ``Unknown resource:
    <name>`` for a name that is neither, 15014 for an ncpus that cannot be shared out."""
    bad = NodesError(PBSE_BADNODESPEC, "node(s) specification error")
    text, _, suffix = str(spec).partition("#")
    place = "scatter"
    for word in (suffix.split("#") if suffix else ()):
        if word == "excl":
            place = "scatter:excl"
        elif word == "shared":
            place = "free"
        else:
            raise NodesError(PBSE_UNKRESC, f"Unknown resource: {word}")
    known = set(hosts)
    parts = []  # (count, ppn, ncpus per process, properties, host)
    for part in text.split("+"):
        items = part.split(":")
        count = 1
        if items[0].isascii() and items[0].isdigit():
            if past(items[0], LONG_MAX):  # (before int(): 4300 digits and more are refused)
                raise bad
            count = int(items.pop(0))
            if count < 1:
                raise bad
        ppn, per, props, host = 1, 1, [], None
        for item in items:
            name, eq, value = item.partition("=")
            if eq:
                if name not in ("ppn", "ncpus") or not (
                        digits(value) and not past(value, LONG_MAX) and int(value) >= 1):
                    raise bad
                ppn, per = (int(value), per) if name == "ppn" else (ppn, int(value))
            elif not name or not name.isprintable() or " " in name:
                raise bad
            elif name in known:
                host = name
            elif types.get(name) == "boolean":
                props.append(name)
            else:
                raise NodesError(PBSE_UNKRESC, f"Unknown resource: {name}")
        parts.append((count, ppn, per, props, host))
    if ncpus is not None:
        processes = sum(count * ppn for count, ppn, _, _, _ in parts)
        if int(ncpus) % processes:
            raise NodesError(15014, "Illegal attribute or resource value Resource_List.ncpus")
        parts = [(count, ppn, int(ncpus) // processes, props, host)
                 for count, ppn, _, props, host in parts]
    share = None
    if mem is not None:
        share = parse_size(mem) // 1024 // sum(count for count, *_ in parts)
    chunks = []
    for count, ppn, per, props, host in parts:
        chunk = [str(count), f"ncpus={ppn * per}"]
        if share is not None:
            chunk.append(f"mem={share}KB")  # (PBS's capitals, here only: checked)
        chunk += [f"{prop}=True" for prop in props]
        if host is not None:
            chunk.append(f"host={host}")
        if ppn > 1:
            chunk.append(f"mpiprocs={ppn}")
        chunks.append(":".join(chunk))
    return "+".join(chunks), place


def select_value(value: Any) -> str:
    """A resource's value as a select writes it: quoted (``"a:b"``, or ``'a"b'``) when it
    holds a character a select separates or quotes with; ValueError for one holding both
    quotes, which no select can hold."""
    text = str(value)
    if not needs_quotes(text):
        return text
    if '"' not in text:
        return f'"{text}"'
    if "'" not in text:
        return f"'{text}'"
    raise ValueError(f"{text!r} holds both quotes, which no select can hold")


def _limit_value(kind: str | None, value: Any) -> Any:
    """`value` as a queue's or the server's resource limit compares it (PBS compares a
    string's text), or None for a type with no order (select, place; boolean and
    string_array: `_unlike`) or a value that is not its type's."""
    try:
        if kind == "long":
            return int(value)
        if kind == "float":
            number = float(value)
            return number if number == number else None  # (NaN has no order)
        if kind == "size":
            return parse_size(value)
        if kind == "duration":
            return parse_duration(value)
        if kind == "string":
            return str(value)
    except (TypeError, ValueError, OverflowError):
        pass
    return None


def _unlike(kind: str, asked: Any, bound: Any) -> bool:
    """Whether a boolean or string array `asked` is refused by the minimum `bound` (a value
    that does not read as its type is not compared)."""
    if kind == "boolean":
        try:
            return parse_bool(asked) is not parse_bool(bound)
        except ValueError:
            return False

    def items(value: Any) -> set[str]:
        parts = value if isinstance(value, (list, tuple)) else str(value).split(",")
        return {str(part).strip() for part in parts if str(part).strip()}
    return not items(asked) <= items(bound)


def outside_limits(res: Mapping[str, Any], maxima: Iterable[Mapping[str, Any] | None],
                   minima: Iterable[Mapping[str, Any] | None], types: Mapping[str, str]
                   ) -> str | None:
    """The first resource of a job's request `res` above its maximum or below its minimum,
    or None. `maxima` and `minima` are ``resources_max`` and ``resources_min`` tables in
    order (a queue's, then the server's): a resource's limit is the first table's that
    names it (OpenPBS 23.06: a queue's ``resources_max.walltime=2:00:00`` lets
    ``1:30:00`` pass under the server's ``1:00:00``). A resource the job does not ask for
    is not compared; numbers, sizes and durations by their amount, strings by their text
    (under ``resources_max.arch=linux``, ``arch=abc`` passes and ``arch=sun`` does not).
    A boolean or a string array is refused by a minimum only, as PBS has it (checked): a
    boolean other than the minimum's, a string array with a value the minimum's list does
    not hold (under ``resources_min.sa="a,b"``, ``"b"`` passes and ``"a,c"`` does not); a
    maximum never refuses one."""
    for tables, above in ((maxima, True), (minima, False)):
        seen: set[str] = set()
        for table in tables:
            for name, limit in (table or {}).items():
                if name in seen or limit is None:
                    continue
                seen.add(name)
                if res.get(name) is None:
                    continue
                kind = types.get(name)
                if kind in ("boolean", "string_array"):
                    if not above and _unlike(kind, res[name], limit):
                        return name
                    continue
                asked, bound = _limit_value(kind, res[name]), _limit_value(kind, limit)
                if asked is None or bound is None:
                    continue
                if asked > bound if above else asked < bound:
                    return name
    return None


PLACE_ARRANGEMENTS = ("free", "pack", "scatter", "vscatter")
PLACE_SHARING = ("excl", "shared", "exclhost")


@dataclass(frozen=True)
class Place:
    """A parsed ``place``: arrangement, sharing and an optional ``group=resource``."""

    arrangement: str = "free"
    sharing: str | None = None
    group: str | None = None


def parse_place(spec: str | None) -> Place:
    """``place=scatter:excl`` -> Place("scatter", "excl"). Empty means PBS's default, free."""
    if not spec:
        return Place()
    found: dict[str, str] = {}  # part -> its token; each part given once, as PBS wants
    for token in str(spec).split(":"):
        if token in PLACE_ARRANGEMENTS:
            part = "arrangement"
        elif token in PLACE_SHARING:
            part = "sharing"
        elif token.startswith("group=") and token[6:]:
            part = "group"
        else:
            raise ValueError(
                f"place {spec!r}: {token!r} is not one of "
                f"{', '.join(PLACE_ARRANGEMENTS + PLACE_SHARING)} or group=<resource>")
        if part in found:
            raise ValueError(f"place {spec!r}: {found[part]!r} and {token!r}: at most one "
                             f"{part}")
        found[part] = token
    group = found.get("group")
    return Place(found.get("arrangement", "free"), found.get("sharing"),
                 group[6:] if group else None)


SHARED, EXCL, EXCLHOST = "shared", "excl", "exclhost"
VNODE_SHARING = ("default_shared", "default_excl", "default_exclhost", "ignore_excl",
                 "force_excl", "force_exclhost")


def exclusivity(place: str | Place | None, sharing: str | None) -> str:
    """How exclusively a job holds a vnode: ``shared``, ``excl`` or ``exclhost``.

    PBS decides it from the vnode's ``sharing`` and the job's ``place``, first match winning:
    force_excl / force_exclhost; ignore_excl (shared); the place's excl / exclhost / shared;
    default_excl / default_exclhost; otherwise (default_shared, or unset) shared.
    """
    sharing = sharing or "default_shared"
    if sharing == "force_excl":
        return EXCL
    if sharing == "force_exclhost":
        return EXCLHOST
    if sharing == "ignore_excl":
        return SHARED
    tokens = place.sharing if isinstance(place, Place) else None
    if not isinstance(place, Place):
        for token in str(place or "").split(":"):
            if token.startswith("excl") or token.startswith("shared"):
                tokens = token
                break
    if tokens == EXCLHOST:
        return EXCLHOST
    if tokens and tokens.startswith("excl"):
        return EXCL
    if tokens and tokens.startswith("shared"):
        return SHARED
    if sharing == "default_excl":
        return EXCL
    if sharing == "default_exclhost":
        return EXCLHOST
    return SHARED
