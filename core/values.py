"""One set of rules for every attribute value, wherever it comes from.

A value reaches the server from qsub and ``#PBS`` directives, qalter, qmgr, pbs_rsub, a raw
API request, a hook's change, the site config or an older database. Each of those entries
checks it here, once, and stores what these rules return, so the scheduler and the commands
read only values they can use. The rules are PBS's types and ranges:

* resources are typed by name (`RESOURCE_TYPES`, plus the custom resources a site creates
  with ``qmgr create resource``); an undefined one is refused with PBS's 15035
  ``Unknown resource``; counts (long) are whole numbers from 0 to 2**63-1, sizes at most
  2**63-1 bytes, durations whole seconds up to the same bound, floats finite;
* job attributes follow `JOB_ATTRIBUTES`: their type, who may set them (a read-only one is
  15003), and an unknown name is 15002;
* names (jobs, queues, vnodes, reservations, users) have PBS's lengths and no control or
  non-UTF-8 characters (`check_name`);
* times are whole epoch seconds within years 1970-9999.

Every refusal is a `BadValue`: a `ValueError` that carries PBS's error number and the
attribute's name, and whose text says what was wrong in one line. A hook that sets a bad
value on a kernel object gets that exception, which makes the hook fail as PBS's pbs.v1
types do.
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

# -- PBS's error numbers (pbs_error.h) that value checks answer with ------------------------
PBSE_NOATTR = 15002
PBSE_ATTRRO = 15003
PBSE_BADATVAL = 15014
PBSE_UNKQUE = 15018
PBSE_NOSUP = 15029
PBSE_UNKRESC = 15035
PBSE_DUPLIST = 15055

#: PBS's texts for those numbers (pbs_messages.c, without trailing blanks).
MESSAGES = {
    PBSE_NOATTR: "Undefined attribute",
    PBSE_ATTRRO: "Cannot set attribute, read only or insufficient permission",
    PBSE_BADATVAL: "Illegal attribute or resource value",
    PBSE_UNKQUE: "Unknown queue",
    PBSE_NOSUP: "No support for requested service",
    PBSE_UNKRESC: "Unknown resource",
    PBSE_DUPLIST: "Duplicate entry in list ",
}

# -- limits ---------------------------------------------------------------------------------
#: PBS's name lengths (pbs_ifl.h): PBS_MAXJOBNAME, PBS_MAXQUEUENAME, PBS_MAXHOSTNAME,
#: PBS_MAXUSER. A reservation's name follows the job-name rule.
MAX_NAME = {"job": 236, "resv": 236, "queue": 15, "node": 255, "host": 255, "user": 256,
            "resource": 256, "sched": 15}
#: A PBS long is 64 bits; counts, sizes in bytes and durations in seconds stay within it.
LONG_MAX = 2**63 - 1
#: The last second of year 9999: later times cannot be shown as dates.
TIME_MAX = 253402300799
#: Longest string value (a path is at most PATH_MAX, 4096, on Linux).
MAX_STRING = 4096
#: Submit_arguments holds a whole command line, Variable_List a whole environment.
MAX_LONG_STRING = 1 << 20

#: Types of the resources PBS defines. A custom resource has the type its ``qmgr create
#: resource`` gave it. Types: long, float, size, duration, boolean, string, string_array,
#: select, place.
RESOURCE_TYPES: dict[str, str] = {
    "select": "select", "place": "place",
    "walltime": "duration", "cput": "duration", "pcput": "duration",
    "soft_walltime": "duration", "min_walltime": "duration", "max_walltime": "duration",
    "mem": "size", "vmem": "size", "pmem": "size", "pvmem": "size", "file": "size",
    "accelerator_memory": "size", "hpmem": "size", "mppmem": "size",
    "ncpus": "long", "nodect": "long", "mpiprocs": "long", "ompthreads": "long",
    "ngpus": "long", "naccelerators": "long", "nchunk": "long", "nice": "long",
    "cpupercent": "long", "mppwidth": "long", "mppdepth": "long", "mppnppn": "long",
    "netwins": "long", "PBScrayorder": "long",
    "energy": "float",
    "accelerator": "boolean",
    "host": "string", "vnode": "string", "arch": "string", "software": "string",
    "preempt_targets": "string", "aoe": "string", "eoe": "string", "site": "string",
    "accelerator_model": "string", "mpparch": "string", "mpphost": "string",
    "mpplabels": "string", "mppnodes": "string", "PBScraynid": "string",
    "PBScrayhost": "string", "PBScraylabel": "string", "PBScrayseg": "string",
    "vntype": "string_array",
    "nodes": "string",  # (PBS's old request: converted to a select, `units.nodes_select`)
}
#: PBS's own resources a select's chunks hold on a host (flag h): asked for job-wide beside
#: a select or a place, they are refused (as OpenPBS 23.06 refuses them; pmem, pvmem,
#: file, cput and software are job-wide there). A custom one is host-level by its flag.
CHUNK_RESOURCES = frozenset({
    "ncpus", "mem", "vmem", "ngpus", "mpiprocs", "ompthreads", "naccelerators",
    "accelerator", "accelerator_memory", "accelerator_model", "aoe", "hbmem", "vntype",
    "arch", "host", "vnode"})
#: Resources whose value may be negative (PBS's nice: -20..19).
_SIGNED = {"nice": (-20, 19)}

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Free text (a comment) may hold tabs and line breaks, never other control characters.
_CONTROL_IN_PROSE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_RES_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
#: An attribute's name, PBS's own or a plugin's: a letter, then letters, digits and
#: underscores (a dot would read as ``attribute.resource``; no space, line break or ``=``).
_ATTR_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*", re.ASCII)
#: The longest attribute name (PBS's longest are under 40 characters).
MAX_ATTR_NAME = 256
#: Names: a job's and a reservation's (qsub -N), a queue's, a vnode's.
_NAME_RULES = {
    "job": re.compile(r"^[A-Za-z0-9_.+-]+$"),
    "resv": re.compile(r"^[A-Za-z0-9_.+-]+$"),
    "queue": re.compile(r"^[A-Za-z][A-Za-z0-9_-]*$"),
    "sched": re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$"),
    "node": re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\[\]-]*$"),
    "host": re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"),
    "resource": _RES_NAME,
    "user": re.compile(r"^[^\s@:,/]+$"),
}


class BadValue(ValueError):
    """A value these rules refuse: PBS's `code`, the attribute (``Resource_List.walltime``)
    and why. ``str()`` is the one line a hook's error or a log shows; `pbs_text` is PBS's
    reply to a client."""

    def __init__(self, code: int, attr: str, why: str):
        self.code = code
        self.attr = attr
        self.why = why
        super().__init__(f"{attr}: {why}" if attr else why)

    @property
    def pbs_text(self) -> str:
        text = MESSAGES.get(self.code, "Error")
        return f"{text} {self.attr}" if self.attr else text


#: The most characters of a value an error message quotes (`quoted`, `cut`).
QUOTE_MAX = 200


def cut(text: str, limit: int = QUOTE_MAX) -> str:
    """`text` as an error quotes it: at most `limit` characters, the last three ``...``
    when it was longer (a 400-digit number, a megabyte of text). Every error that quotes
    a value someone else wrote cuts it here."""
    return text if len(text) <= limit else text[:max(limit - 3, 0)] + "..."


def quoted(value: Any, limit: int = QUOTE_MAX) -> str:
    """A value as an error quotes it, in one line: its repr (a line break shows as ``\\n``),
    `cut` to `limit` characters."""
    if isinstance(value, str) and len(value) > limit:
        # (its repr is longer than `limit`, so cut: the repr of a megabyte is not made)
        return cut(repr(value[:limit]), limit)
    try:
        return cut(repr(value), limit)
    except Exception:  # noqa: BLE001 - an int past Python's 4300 digits, a repr that raises
        return f"<{type(value).__name__}>"


def shown(name: Any) -> str:
    """A name from a request as an error may show it: itself when it is a plain name,
    else its repr, cut short (a newline or a megabyte must not reach a one-line error)."""
    if isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_.\[\]@-]{1,64}", name):
        return name
    return quoted(name, 66)


def _repr(value: Any) -> str:
    """A value in an error: its repr, cut short."""
    return quoted(value, 66)


def _bad(attr: str, why: str) -> BadValue:
    return BadValue(PBSE_BADATVAL, attr, why)


_T = TypeVar("_T")


def _parsed(parse: Callable[[str], _T], spec: str, attr: str) -> _T:
    """What `parse` makes of `spec`; its ValueError as the attribute's bad value."""
    try:
        return parse(spec)
    except ValueError as exc:
        raise _bad(attr, str(exc)) from None


# -- plain checks -------------------------------------------------------------------------------
def text(value: Any, attr: str, *, limit: int = MAX_STRING, allow_empty: bool = True,
         convert: bool = False, prose: bool = False) -> str:
    """A string value: valid UTF-8 (no lone surrogates from a raw request), no control
    characters (`prose` allows tabs and line breaks), at most `limit` characters.
    `convert` accepts a number as its text."""
    if convert and isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        raise _bad(attr, f"{_repr(value)} is not a string")
    if len(value) > limit:
        raise _bad(attr, f"longer than {limit} characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(attr, "not valid UTF-8") from None
    if (_CONTROL_IN_PROSE if prose else _CONTROL).search(value):
        raise _bad(attr, f"{_repr(value)} holds a control character")
    if not allow_empty and not value:
        raise _bad(attr, "is empty")
    return value


def check_name(kind: str, name: Any, attr: str | None = None) -> str:
    """A job, resv, queue, sched, node, host, resource or user name: PBS's length for it
    (`MAX_NAME`) and its characters."""
    attr = attr or f"{kind} name"
    name = text(name, attr, limit=MAX_NAME[kind], allow_empty=False)
    if not _NAME_RULES[kind].fullmatch(name):
        raise _bad(attr, f"{name!r} is not a valid {kind} name")
    return name


def digits(text: str) -> bool:
    """Whether `text` is ASCII digits, one or more: a number as PBS reads one.
    (`str.isdigit` also takes ``²``, which int() refuses, and ``٣``, which it reads as 3.)"""
    return text.isascii() and text.isdigit()


#: The most digits int() reads (Python's default limit; leading zeros count).
INT_DIGITS = 4300


def _int_digits() -> int:
    """The most digits int() reads here: `INT_DIGITS`, or fewer where the interpreter was
    told so (PYTHONINTMAXSTRDIGITS, ``-X int_max_str_digits``: 640 at least; 0 is none)."""
    most = getattr(sys, "get_int_max_str_digits", lambda: INT_DIGITS)()
    return min(INT_DIGITS, most) if most else INT_DIGITS


def past(digits: str, most: int) -> bool:
    """Whether the ASCII digits `digits` are a number more than `most`, their length read
    first: int() of thousands of digits is slow, and refused past 4300 of them (a
    ValueError in Python's words). More digits than int() reads are past any bound, leading
    zeros and all: int() counts them (5000 zeros and a 7, read as 7 here, were then its
    ValueError in every caller's int())."""
    if len(digits) > _int_digits():
        return True
    digits = digits.lstrip("0")
    return len(digits) > len(str(most)) or int(digits or "0") > most


def whole(text: str, most: int) -> int | None:
    """The ASCII digits `text` as a number up to `most`; None for anything else (more
    digits than int() reads among them: `past`)."""
    if not digits(text) or past(text, most):
        return None
    return int(text)


#: A number as PBS reads one: ASCII digits, a sign, a point, an exponent (float() also
#: takes ``1_0``, ``٣`` and ``inf``). The digits after the point only after a point:
#: ``[0-9]+\.?[0-9]*`` tried every split of a run of digits, and 100,000 digits and a
#: letter held the server for minutes.
_NUMBER = re.compile(r"\s*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?\s*", re.ASCII)


def long(value: Any, attr: str, low: int = 0, high: int = LONG_MAX) -> int:
    """A whole number in [low, high]; digits in a string are accepted, a bool is not."""
    if isinstance(value, bool):
        raise _bad(attr, f"{_repr(value)} is not an integer")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?[0-9]{1,20}\s*", value):
        value = int(value)
    if not isinstance(value, int):
        raise _bad(attr, f"{_repr(value)} is not an integer")
    if not low <= value <= high:
        raise _bad(attr, f"{_repr(value)} is outside [{low}, {high}]")
    return value


def number(value: Any, attr: str) -> float:
    """A finite float."""
    if isinstance(value, bool):
        raise _bad(attr, f"{_repr(value)} is not a number")
    try:
        out = float(value) if isinstance(value, (int, float)) or (
            isinstance(value, str) and _NUMBER.fullmatch(value)) else math.nan
    except (ValueError, OverflowError):
        out = math.nan
    if not math.isfinite(out):
        raise _bad(attr, f"{_repr(value)} is not a finite number")
    return out


def boolean(value: Any, attr: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, (str, int)):
        low = str(value).strip().lower()
        if low in ("true", "t", "y", "1"):
            return True
        if low in ("false", "f", "n", "0"):
            return False
    raise _bad(attr, f"{_repr(value)} is not a boolean (true|t|y|1|false|f|n|0)")


def seconds(value: Any, attr: str) -> int:
    """A PBS duration in whole seconds: ``[[HH:]MM:]SS[.frac]`` or a number."""
    if isinstance(value, bool):
        raise _bad(attr, f"{_repr(value)} is not a duration")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or not 0 <= value <= LONG_MAX:
            raise _bad(attr, f"duration {_repr(value)} is out of range")
        return int(value)
    if not isinstance(value, str):
        raise _bad(attr, f"{_repr(value)} is not a duration")
    parts = value.strip().split(":")
    if (not value.strip() or len(parts) > 3 or len(value) > 40
            or not all(re.fullmatch(r"[0-9]+(\.[0-9]*)?", p) for p in parts)):
        raise _bad(attr, f"{_repr(value)} is not a duration ([[HH:]MM:]SS)")
    total = 0
    for part in parts:
        whole = part.split(".")[0]
        total = total * 60 + int(whole)
    if total > LONG_MAX:
        raise _bad(attr, f"duration {_repr(value)} is out of range")
    return total


def format_duration(total: int) -> str:
    return f"{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}"


_SIZE_RE = re.compile(r"^\s*([0-9]{1,20})\s*([kmgtp]?)([bw]?)\s*$", re.IGNORECASE)
#: A size's scale letter -> its power of two (``k``: 10, a kilobyte is 1 << 10).
SIZE_SHIFTS = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40, "p": 50}


def size(value: Any, attr: str) -> str:
    """A PBS size as stored: ``4gb``, ``512mb``, ``100b`` (lower case, with its unit)."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not (m := _SIZE_RE.fullmatch(value)):
        raise _bad(attr, f"{_repr(value)} is not a size (for example 4gb or 512mb)")
    count, scale, unit = int(m.group(1)), m.group(2).lower(), (m.group(3) or "b").lower()
    nbytes = count << SIZE_SHIFTS[scale]
    if unit == "w":
        nbytes *= 8
    if nbytes > LONG_MAX:
        raise _bad(attr, f"size {_repr(value)} is out of range")
    return f"{count}{scale}{unit}"


def epoch(value: Any, attr: str) -> int:
    """A time: whole epoch seconds from 1970 to the end of year 9999 (a clock's float is
    cut to its second)."""
    if isinstance(value, float) and math.isfinite(value) and 0 <= value <= TIME_MAX:
        value = int(value)
    return long(value, attr, 0, TIME_MAX)


# -- resources -----------------------------------------------------------------------------------
#: The custom resources of the server this process serves (`use_resources`); None means
#: nothing is known beyond PBS's own, and any well-formed name is accepted as a string.
_custom: dict[str, str] | None = None


def use_resources(custom: Mapping[str, str] | None) -> None:
    """Tell the rules which custom resources exist (name -> type); the engine calls it at
    start and before each hook event, so a hook setting an undefined resource fails."""
    global _custom
    _custom = dict(custom) if custom is not None else None


def resource_type(name: str, custom: Mapping[str, str] | None = None) -> str | None:
    """A resource's type, or None when it is not defined."""
    if name in RESOURCE_TYPES:
        return RESOURCE_TYPES[name]
    table = custom if custom is not None else _custom
    if table is None:
        return "string" if _RES_NAME.fullmatch(name) else None
    return table.get(name)


def resource_name(name: Any, attr: str = "Resource_List") -> str:
    """A resource's name: a letter, then letters, digits, ``_``, ``.`` or ``-``, at most
    256 long; else `BadValue` 15035 naming it (in one line)."""
    if not isinstance(name, str) or len(name) > MAX_NAME["resource"] or \
            not _RES_NAME.fullmatch(name):
        raise BadValue(PBSE_UNKRESC, f"{attr}.{shown(name)}",
                       f"{shown(name)} is not a resource name")
    return name


def resource_value(name: str, value: Any, kind: str | None = None, *,
                   attr: str = "Resource_List",
                   custom: Mapping[str, str] | None = None) -> Any:
    """A resource value as the server stores it: long -> int, float -> float, boolean ->
    bool, duration -> ``HH:MM:SS``, size -> ``4gb``, select and place checked and kept as
    written, string -> str. Raises `BadValue` (15035 for an undefined resource)."""
    resource_name(name, attr)
    full = f"{attr}.{name}"
    kind = kind or resource_type(name, custom)
    if kind is None:
        raise BadValue(PBSE_UNKRESC, full, f"resource {name!r} is not defined")
    if kind == "long":
        low, high = _SIGNED.get(name, (0, LONG_MAX))
        return long(value, full, low, high)
    if kind == "float":
        return number(value, full)
    if kind == "boolean":
        return boolean(value, full)
    if kind == "duration":
        return format_duration(seconds(value, full))
    if kind == "size":
        return size(value, full)
    if kind == "select":
        return select(value, full, custom)
    if kind == "place":
        return place(value, full)
    return text(value, full, convert=True)


#: What a select's value may hold only quoted (`units.select_value`).
SELECT_SPECIAL = frozenset('"\'+:=()')


def needs_quotes(text: str) -> bool:
    """Whether a value in a select must be quoted: it holds what a select separates or
    quotes with, or a space."""
    return bool(SELECT_SPECIAL.intersection(text)) or any(c.isspace() for c in text)


def _parsed_select(value: Any, attr: str) -> str:
    """A select the scheduler can read (a job's stored ``schedselect``: its resources were
    checked in the request it was made from)."""
    from .units import parse_select

    spec = _long_string(value, attr)
    _parsed(parse_select, spec, attr)
    return spec


def select(value: Any, attr: str = "Resource_List.select",
           custom: Mapping[str, str] | None = None) -> str:
    """A select: ``N:res=value[:...][+...]``, each chunk's resources defined and typed."""
    from .units import parse_select

    spec = text(value, attr, allow_empty=False)
    chunks = _parsed(parse_select, spec, attr)
    total = sum(chunk.count for chunk in chunks)
    if total > MAX_CHUNKS:
        raise _bad(attr, f"{total} chunks are over pbsplug's limit of {MAX_CHUNKS} per job")
    for chunk in chunks:
        for res, val in chunk.resources.items():
            kind = resource_type(res, custom)
            if kind is None:
                raise BadValue(PBSE_UNKRESC, attr, f"resource {res!r} is not defined")
            if kind in ("select", "place"):
                raise _bad(attr, f"{res} cannot be in a chunk")
            if kind not in ("string", "string_array") and isinstance(val, str) and \
                    needs_quotes(val):
                # (only a string needs quoting; a quoted amount reads as one unquoted)
                raise _bad(attr, f"the {kind} value of {res} in a chunk is {val!r}")
            resource_value(res, val, kind, attr=attr, custom=custom)
    return spec


def place(value: Any, attr: str = "Resource_List.place") -> str:
    from .units import parse_place

    spec = text(value, attr, allow_empty=False)
    _parsed(parse_place, spec, attr)
    return spec


def resources(value: Any, attr: str = "Resource_List",
              custom: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A whole resource mapping, each value checked (`resource_value`); None (unset, in a
    qalter or a hook) stays None."""
    if not isinstance(value, Mapping):
        raise _bad(attr, f"{shown(value)} is not a mapping of resources")
    out: dict[str, Any] = {}
    for name, v in value.items():
        if v is None:
            resource_value(name, 0, "long", attr=attr)  # the name is still checked
            out[name] = None
        else:
            out[name] = resource_value(name, v, attr=attr, custom=custom)
    return out


# -- job attributes ------------------------------------------------------------------------------
DEPEND_TYPES = frozenset({
    "after", "afterok", "afternotok", "afterany", "before", "beforeok", "beforenotok",
    "beforeany", "on", "runone",
})
#: A job a dependency names: a job or an array (``12[]``), never a subjob or a range of
#: them (``12[3]``: OpenPBS 23.06's qsub says ``illegal -W value``, checked).
_JOB_ID = re.compile(r"^[0-9]+(\[\])?(\.[^\s:,]+)?$")
_PROJECT_FORBIDDEN = set('/[]";:|<>+,?*')


def check_keep(value: str) -> bool:
    """``-k``: o, e, oe, d with o or e, or n."""
    if not value or set(value) - set("oedn"):
        return False
    keep = bool(set(value) & set("oe"))
    dont = "n" in value
    return not ((keep and dont) or ("d" in value and not (keep or dont)))


def check_mail_points(value: str) -> bool:
    if not value or value == "j":
        return False
    return value == "n" or not set(value) - set("abej")


def check_checkpoint(value: str) -> bool:
    if len(value) == 1:
        return value in "nscwu"
    return bool(re.fullmatch(r"[cw]=[0-9]+", value))


def check_at_list(value: str, *, one_without_host: bool) -> bool:
    """``name[@host][,name@host...]``: at most one name without a host, one per host."""
    if not value:
        return False
    hosts: set[str | None] = set()
    for item in value.split(","):
        name, at, host = item.strip().partition("@")
        if not name or (at and not host) or any(ch.isspace() for ch in item.strip()):
            return False
        key = host if at else None
        if one_without_host:
            if key in hosts:
                return False
            hosts.add(key)
    return True


def depend_items(value: str) -> list[tuple[str, list[str]]] | None:
    """A dependency list, ``type:arg[:arg...][,type:...]``, as (type, args) pairs: ``on``
    takes one count, the other types job ids (bare or with a server). None when it is not
    one (qsub's check and the stored value's are this one)."""
    items = []
    for item in value.split(","):
        kind, sep, rest = item.partition(":")
        if kind not in DEPEND_TYPES or not sep or not rest:
            return None
        args = rest.split(":")
        if kind == "on":  # (ASCII digits: `isdigit` takes ``²``, which no int() reads)
            if len(args) != 1 or not digits(args[0]):
                return None
        elif not all(_JOB_ID.fullmatch(job) for job in args):
            return None
        items.append((kind, args))
    return items


def check_depend(value: str) -> bool:
    return depend_items(value) is not None


def _job_name(value: Any, attr: str) -> str:
    return check_name("job", value, attr)


def _string(value: Any, attr: str) -> str:
    return text(value, attr)


def _prose(value: Any, attr: str) -> str:
    return text(value, attr, prose=True)


def _long_string(value: Any, attr: str) -> str:
    return text(value, attr, limit=MAX_LONG_STRING)


def _path(value: Any, attr: str) -> str:
    path = text(value, attr, allow_empty=False)
    where, colon, rest = path.partition(":")
    if not colon or not rest.startswith("/"):
        raise _bad(attr, f"{path!r} is not host:/absolute/path")
    return path


def _choice(*allowed: str) -> Callable[[Any, str], str]:
    def check(value: Any, attr: str) -> str:
        if value not in allowed:
            raise _bad(attr, f"{_repr(value)} is not one of {', '.join(allowed)}")
        return value
    return check


def _rule(test: Callable[[str], bool]) -> Callable[[Any, str], str]:
    def check(value: Any, attr: str) -> str:
        value = text(value, attr, allow_empty=False)
        if not test(value):
            raise _bad(attr, f"{_repr(value)} is not a valid {attr}")
        return value
    return check


#: The most chunks a select may ask for in all (pbsplug's limit; PBS sets none): a scheduling
#: cycle works through each chunk of a job, so a count of billions held or killed the server.
MAX_CHUNKS = 100_000


def _priority(value: Any, attr: str) -> int:
    return long(value, attr, -1024, 1023)


def _count(value: Any, attr: str) -> int:
    return long(value, attr, 0, 1 << 31)


def _hold_types(value: Any, attr: str) -> str:
    value = text(value, attr, allow_empty=False)
    if set(value) - set("uosnp") or ("n" in value and value != "n"):
        raise _bad(attr, f"{_repr(value)} is not n or a set of u, o, s, p")
    return value


def _variables(value: Any, attr: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _bad(attr, f"{_repr(value)} is not a mapping of variables")
    out = {}
    total = 0
    for name, val in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise _bad(attr, f"{name!r} is not a variable name")
        if not isinstance(val, str):
            raise _bad(f"{attr}.{name}", f"{val!r} is not a string")
        if "\0" in val or "\0" in name:
            raise _bad(f"{attr}.{name}", "holds a NUL character")
        try:
            name.encode("utf-8"), val.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad(f"{attr}.{name}", "not valid UTF-8") from None
        if name == "PBS_O_WORKDIR":  # where its output goes by default
            text(val, f"{attr}.{name}", allow_empty=False)
            if not val.startswith("/"):
                raise _bad(f"{attr}.{name}", f"{val!r} is not an absolute path")
        total += len(name) + len(val)
        out[name] = val
    if total > MAX_LONG_STRING:
        raise _bad(attr, f"larger than {MAX_LONG_STRING} characters")
    return out


def _resources_rule(value: Any, attr: str) -> dict[str, Any]:
    return resources(value, attr)


def _queue(value: Any, attr: str) -> str:
    """A destination queue: a name that cannot be a queue is PBS's ``Unknown queue``."""
    try:
        return check_name("queue", value, attr)
    except BadValue as exc:
        raise BadValue(PBSE_UNKQUE, "", exc.why) from None


def _project(value: Any, attr: str) -> str:
    value = text(value, attr, allow_empty=False)
    if set(value) & _PROJECT_FORBIDDEN:
        raise _bad(attr, f"{_repr(value)} holds one of {''.join(sorted(_PROJECT_FORBIDDEN))}")
    return value


def _user_list(value: Any, attr: str) -> str:
    value = text(value, attr, allow_empty=False)
    if not check_at_list(value, one_without_host=False):
        raise _bad(attr, f"{_repr(value)} is not user[@host][,user@host...]")
    return value


def _umask(value: Any, attr: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    value = text(value, attr, allow_empty=False)
    if not re.fullmatch(r"[0-7]{1,4}", value):
        raise _bad(attr, f"{_repr(value)} is not an octal umask")
    return value


def _bool(value: Any, attr: str) -> bool:
    return boolean(value, attr)


def _time(value: Any, attr: str) -> int:
    return epoch(value, attr)


def _long_any(value: Any, attr: str) -> int:
    return long(value, attr, -LONG_MAX, LONG_MAX)


#: One vnode of an exec_vnode chunk, ``n1:ncpus=2:mem=4gb``; a chunk is ``(...)`` of one or
#: more of them joined by ``+`` (a chunk spread over a host's vnodes), and chunks are joined
#: by ``+``. Names and values are checked one by one after this shape.
_EV_VNODE = r"[^:()+=]+(?::[^:()+=]+=[^:()+]*)*"
_EV_CHUNK = rf"\({_EV_VNODE}(?:\+{_EV_VNODE})*\)"
_EXEC_VNODE = re.compile(rf"(?:{_EV_CHUNK}(?:\+{_EV_CHUNK})*)?")


def _exec_vnode(value: Any, attr: str) -> str:
    from .units import parse_exec_vnode

    value = text(value, attr, limit=MAX_LONG_STRING)
    if not _EXEC_VNODE.fullmatch(value):
        raise _bad(attr, f"{_repr(value)} is not (vnode:res=value...)[+(...)...]")
    for name, res in parse_exec_vnode(value):
        check_name("node", name, attr)
        for key, val in res.items():
            resource_value(key, val, attr=attr)
    return value


def _stage(value: Any, attr: str) -> str:
    value = text(value, attr, allow_empty=False)
    if not all(re.fullmatch(r"[^@,]+@[^:,]+:.+", f) for f in value.split(",")):
        raise _bad(attr, f"{_repr(value)} is not local_file@host:remote_file[,...]")
    return value


def _sandbox(value: Any, attr: str) -> str:
    value = text(value, attr, allow_empty=False)
    if value.upper() not in ("HOME", "O_WORKDIR", "PRIVATE"):
        raise _bad(attr, f"{_repr(value)} is not HOME, O_WORKDIR or PRIVATE")
    return value


def _any_mapping(value: Any, attr: str) -> Any:
    if not isinstance(value, Mapping):
        raise _bad(attr, f"{_repr(value)} is not a mapping")
    return dict(value)


def _array_range(value: Any, attr: str) -> str:
    """qsub -J's ``X-Y[:Z]``: X less than Y, Z at least 1 (OpenPBS 23.06's rule)."""
    value = text(value, attr, allow_empty=False)
    m = re.fullmatch(r"(\d{1,18})-(\d{1,18})(?::(\d{1,18}))?", value)
    if m is None or int(m[1]) >= int(m[2]) or (m[3] is not None and int(m[3]) < 1):
        raise _bad(attr, f"{_repr(value)} is not X-Y[:Z] with X < Y and Z >= 1")
    return value


def _job_state(value: Any, attr: str) -> str:
    return _choice(*JOB_STATES)(value, attr)


#: PBS's job states (job_state's one-letter codes).
JOB_STATES = ("T", "Q", "H", "W", "R", "E", "S", "U", "X", "F", "B", "M")

USER, OPERATOR, MANAGER, SERVER = "user", "operator", "manager", "server"
_RANK = {USER: 0, OPERATOR: 1, MANAGER: 2, SERVER: 3}


@dataclass(frozen=True)
class Rule:
    """How one attribute is checked (`check(value, attr)` returns the value to store) and
    the least privileged class that may set it: user, operator, manager, or server
    (read-only: only the server and hooks set it)."""

    check: Callable[[Any, str], Any]
    set_by: str = USER


#: A job's attributes, PBS's names. qsub's own come from the user; the rest are the server's.
JOB_ATTRIBUTES: dict[str, Rule] = {
    "Job_Name": Rule(_job_name),
    "Account_Name": Rule(_string),
    "Checkpoint": Rule(_rule(check_checkpoint)),
    "depend": Rule(_rule(check_depend)),
    "Error_Path": Rule(_path), "Output_Path": Rule(_path),
    "Execution_Time": Rule(_time),
    "Hold_Types": Rule(_hold_types),
    "Join_Path": Rule(_choice("oe", "eo", "n")),
    "Keep_Files": Rule(_rule(check_keep)),
    "Mail_Points": Rule(_rule(check_mail_points)),
    "Mail_Users": Rule(_user_list),
    "Priority": Rule(_priority),
    "project": Rule(_project),
    "queue": Rule(_queue),
    "Remove_Files": Rule(_rule(lambda v: not set(v) - set("oe"))),
    "Rerunable": Rule(_bool),
    "Resource_List": Rule(_resources_rule),
    "Shell_Path_List": Rule(_rule(lambda v: check_at_list(v, one_without_host=True))),
    "Variable_List": Rule(_variables),
    "Submit_arguments": Rule(_long_string),
    "sandbox": Rule(_sandbox),
    "umask": Rule(_umask),
    "stagein": Rule(_stage), "stageout": Rule(_stage),
    "release_nodes_on_stageout": Rule(_bool),
    "run_count": Rule(_count),
    "comment": Rule(_prose, OPERATOR),
    "array_indices_submitted": Rule(_array_range),
    "max_run_subjobs": Rule(_count),
    # The server's own: read-only to every client.
    "job_state": Rule(_job_state, SERVER),
    "substate": Rule(_long_any, SERVER),
    "Job_Owner": Rule(_string, SERVER),
    "euser": Rule(lambda v, a: check_name("user", v, a), SERVER),
    "egroup": Rule(_string, SERVER),
    "server": Rule(_string, SERVER),
    "exec_vnode": Rule(_exec_vnode, SERVER),
    "exec_host": Rule(_long_string, SERVER),
    "schedselect": Rule(_parsed_select, SERVER),
    "ctime": Rule(_time, SERVER), "qtime": Rule(_time, SERVER),
    "queue_rank": Rule(_long_any, SERVER),  # (set by qorder: the job's place in its queue)
    "mtime": Rule(_time, SERVER), "stime": Rule(_time, SERVER),
    "etime": Rule(_time, SERVER), "obittime": Rule(_time, SERVER),
    "session_id": Rule(_long_any, SERVER),
    "Exit_status": Rule(_long_any, SERVER),
    "resources_used": Rule(lambda v, a: resources(v, a), SERVER),
    "estimated": Rule(_any_mapping, SERVER),
    "eligible_time": Rule(_long_any, SERVER),
    "accounting_id": Rule(_string, SERVER),
    "interactive": Rule(_bool, SERVER),
    "array": Rule(_bool, SERVER),
    "array_indices_remaining": Rule(_long_string, SERVER),
    "array_state_count": Rule(_string, SERVER),
    "array_id": Rule(_string, SERVER),
    "array_index": Rule(_long_any, SERVER),
}
#: qsub's attributes the local engine cannot honour: refused with 15029, never ignored.
UNSUPPORTED_JOB_ATTRIBUTES = {
    "User_List": "qsub -u (the job always runs as its submitter)",
    "group_list": "-W group_list (the job runs with its owner's primary group)",
    "stagein": "-W stagein (no file staging on one machine)",
    "stageout": "-W stageout (no file staging on one machine)",
}
#: What qsub sends that the server sets itself: ignored in a request, as PBS's server does.
SERVER_OVERRIDES = frozenset({"Job_Owner"})


def may_set(rule: Rule, role: str) -> bool:
    return rule.set_by != SERVER and _RANK[role] >= _RANK[rule.set_by]


def _value(rules: Mapping[str, Rule], resource_attr: str, name: str, value: Any,
           custom: Mapping[str, str] | None) -> Any:
    """One attribute's value as stored; unknown names pass unchanged (a plugin's own)."""
    rule = rules.get(name)
    if rule is None:
        return value
    if name == resource_attr:
        return resources(value, name, custom)
    return rule.check(value, name)


def job_value(name: str, value: Any, custom: Mapping[str, str] | None = None) -> Any:
    """One job attribute's value as stored; unknown names pass unchanged (a plugin's own)."""
    return _value(JOB_ATTRIBUTES, "Resource_List", name, value, custom)


def plugin_value(kind: str, attr: str, value: Any) -> Any:
    """A client's value of a plugin-registered attribute of type `kind` (`attributes`),
    by the rules a built-in one of that type meets, before the plugin's own check: text
    without control characters and at most `MAX_STRING` long, a size that reads (stored as
    PBS writes it, ``4gb``), a duration in whole seconds, a finite float, a long in range:
    what qmgr stores for the same attribute from its text. `BadValue` names what is
    wrong."""
    if kind == "string":
        return text(value, attr)
    if kind == "string_array":
        if not isinstance(value, list):
            raise _bad(attr, f"{_repr(value)} is not a list of strings")
        items = [text(item, attr) for item in value]
        if sum(map(len, items)) > MAX_LONG_STRING:
            raise _bad(attr, f"longer than {MAX_LONG_STRING} characters")
        return items
    if kind in ("long", "time"):
        return long(value, attr, -LONG_MAX - 1, LONG_MAX)
    if kind == "float":
        return number(value, attr)
    if kind == "boolean":
        return boolean(value, attr)
    if kind == "size":
        return size(value, attr)
    if kind == "duration":
        return seconds(value, attr)
    return value


def job_request(attrs: Any, role: str, custom: Mapping[str, str] | None = None, *,
                extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Attributes a client sent (qsub or qalter) as they will be stored: each known, settable
    by `role`, and valid. `extra` maps a plugin's registered job attributes to their
    `AttributeDef`. Raises `BadValue` with 15002, 15003, 15014, 15029 or 15035."""
    if not isinstance(attrs, Mapping):
        raise _bad("attrs", "the request's attributes are not a mapping")
    extra = extra or {}
    out: dict[str, Any] = {}
    for name, value in attrs.items():
        if not isinstance(name, str):
            raise BadValue(PBSE_NOATTR, shown(name), "not an attribute name")
        if name in SERVER_OVERRIDES:
            continue
        if name in UNSUPPORTED_JOB_ATTRIBUTES and value not in (None, False, ""):
            raise BadValue(PBSE_NOSUP, name, f"{UNSUPPORTED_JOB_ATTRIBUTES[name]} is not "
                           "supported by the local engine")
        if name in UNSUPPORTED_JOB_ATTRIBUTES:
            continue
        if name == "sandbox" and isinstance(value, str) and value.strip().upper() == "PRIVATE":
            raise BadValue(PBSE_NOSUP, name, "-W sandbox=PRIVATE (a job runs in its "
                           "owner's home) is not supported by the local engine")
        rule = JOB_ATTRIBUTES.get(name)
        if rule is None:
            plugin_def = extra.get(name)
            if plugin_def is None:
                raise BadValue(PBSE_NOATTR, shown(name), f"{shown(name)} is not a job "
                               "attribute")
            if _RANK[role] < _RANK.get(plugin_def.set_by, 3) or plugin_def.set_by == SERVER:
                raise BadValue(PBSE_ATTRRO, name, "read-only or not settable by "
                               f"a{'n' if role[0] in 'aeiou' else ''} {role}")
            if value is not None:
                value = plugin_value(plugin_def.type, name, value)
                if problem := plugin_def.check(value):
                    raise _bad(name, problem)
            out[name] = value
            continue
        if not may_set(rule, role):
            raise BadValue(PBSE_ATTRRO, name, "read-only or not settable by "
                           f"a{'n' if role[0] in 'aeiou' else ''} {role}")
        if value is None:
            out[name] = None
            continue
        out[name] = job_value(name, value, custom)
    return out


#: What the server and the scheduler compute with: a stored job or vnode with a bad value
#: here is set aside (free text, however odd, is only shown).
STORED_JOB_CHECKS = frozenset({
    "Resource_List", "Execution_Time", "job_state", "Hold_Types", "Priority", "run_count",
    "Rerunable", "exec_vnode", "ctime", "qtime", "mtime", "stime",
    "Exit_status", "Variable_List", "schedselect",
})
STORED_VNODE_CHECKS = frozenset({
    "resources_available", "state", "sharing", "Priority", "last_state_change_time",
    "last_used_time", "resv_enable", "no_multinode_jobs",
})


def _stored_problems(attrs: Mapping[str, Any], rules: Mapping[str, Rule],
                     checked: Collection[str], resource_attr: str,
                     custom: Mapping[str, str] | None) -> dict[str, str]:
    """What is wrong with a stored object's `checked` attributes (attribute, or
    ``<resource_attr>.<resource>``, -> why). A resource nobody defines is no problem here (it
    may have been deleted since): only values the server cannot read."""
    problems: dict[str, str] = {}
    for name, value in attrs.items():
        rule = rules.get(name)
        if rule is None or value is None or name not in checked:
            continue
        if name == resource_attr and isinstance(value, Mapping):
            for res, val in value.items():
                try:
                    resource_value(res, val, attr=name, custom={**(custom or {}), res: (
                        resource_type(res, custom) or "string")})
                except BadValue as exc:
                    problems[f"{name}.{res}"] = str(exc)
            continue
        try:
            rule.check(value, name)
        except BadValue as exc:
            problems[name] = str(exc)
    return problems


def job_problems(attrs: Mapping[str, Any], custom: Mapping[str, str] | None = None
                 ) -> dict[str, str]:
    """What is wrong with a stored job (attribute -> why), for one the server must set
    aside rather than schedule."""
    return _stored_problems(attrs, JOB_ATTRIBUTES, STORED_JOB_CHECKS, "Resource_List", custom)


# -- vnodes --------------------------------------------------------------------------------------
#: Vnode states: what an admin or a hook may set, and what the server derives.
NODE_STATES = frozenset({
    "free", "offline", "down", "sleep", "job-busy", "job-exclusive", "resv-exclusive",
    "busy", "stale", "state-unknown", "provisioning", "wait-provisioning", "unresolvable",
    "maintenance", "initializing",
})


def _node_state(value: Any, attr: str) -> str:
    value = text(value, attr)
    states = [s for s in value.split(",") if s]
    bad = [s for s in states if s not in NODE_STATES]
    if bad:
        raise _bad(attr, f"{bad[0]!r} is not a vnode state")
    return value


_SHARING = ("default_shared", "default_excl", "default_exclhost", "ignore_excl", "force_excl",
            "force_exclhost")

VNODE_ATTRIBUTES: dict[str, Rule] = {
    "state": Rule(_node_state, OPERATOR),
    "comment": Rule(_prose, OPERATOR),
    "resources_available": Rule(lambda v, a: resources(v, a), OPERATOR),
    "sharing": Rule(_choice(*_SHARING), MANAGER),
    "Priority": Rule(_priority, OPERATOR),
    "partition": Rule(lambda v, a: text(v, a), MANAGER),
    "queue": Rule(_queue, MANAGER),
    "Mom": Rule(lambda v, a: check_name("host", v, a), MANAGER),
    "Port": Rule(lambda v, a: long(v, a, 1, 65535), MANAGER),
    "resv_enable": Rule(_bool, MANAGER),
    "no_multinode_jobs": Rule(_bool, MANAGER),
    "provision_enable": Rule(_bool, MANAGER),
    "power_provisioning": Rule(_bool, MANAGER),
    "poweroff_eligible": Rule(_bool, MANAGER),
    "current_aoe": Rule(_string, MANAGER), "current_eoe": Rule(_string, MANAGER),
    "last_state_change_time": Rule(_time, SERVER), "last_used_time": Rule(_time, SERVER),
    "pcpus": Rule(_count, SERVER),
    "ntype": Rule(_string, SERVER),
}


def vnode_value(name: str, value: Any, custom: Mapping[str, str] | None = None) -> Any:
    """One vnode attribute's value as stored; unknown names pass unchanged."""
    return _value(VNODE_ATTRIBUTES, "resources_available", name, value, custom)


def vnode_problems(attrs: Mapping[str, Any], custom: Mapping[str, str] | None = None
                   ) -> dict[str, str]:
    """What is wrong with a stored vnode: attribute (or ``resources_available.<r>``) -> why."""
    return _stored_problems(attrs, VNODE_ATTRIBUTES, STORED_VNODE_CHECKS,
                            "resources_available", custom)


# -- reservations --------------------------------------------------------------------------------
#: The most entries an access list holds (pbsplug's limit; PBS sets none): ordering one as
#: PBS does is quadratic (`engine.acl`), and a reservation's lists come from any user.
#: 1,000 of the longest host names PBS allows are ordered in half a second.
ACL_MAX_ENTRIES = 1000
#: Why a list past it is refused.
ACL_TOO_MANY = f"more than {ACL_MAX_ENTRIES:,} entries"


def acl_unsigned(entry: str) -> str:
    """An access list entry without its sign: one ``+`` or ``-``, as PBS reads it
    (``--bob`` names a user ``-bob``)."""
    return entry[1:] if entry[:1] in ("+", "-") else entry


#: What each kind of list names (`acl_sign_alone`'s words).
ACL_NAMES = {"user": "user name", "group": "group name", "host": "host name"}


def acl_sign_alone(entry: str, kind: str = "user") -> str | None:
    """Why `entry` may not go in a list of `kind` (``user``, ``group``, ``host``) when it
    is a sign and nothing else (``+``, ``-``), else None. OpenPBS 23.06 stores one and
    reads it as its answer for everyone the list does not name (``acl_users = +`` lets
    every user in; checked), which no one reading the list would guess."""
    if entry.strip() not in ("+", "-"):
        return None
    return f"{_repr(entry.strip())} is a sign without a {ACL_NAMES.get(kind, 'name')}"


def acl_entry(entry: Any, attr: str) -> str:
    """One entry of an access list (``[+|-]name[@host]``): a name no longer than PBS's for
    a user and a host, without spaces (pbs_rsub refuses ``-G "a b"``) or control
    characters, not a sign alone (`acl_sign_alone`)."""
    entry = text(entry, attr, allow_empty=False)
    kind = {"Authorized_Groups": "group", "Authorized_Hosts": "host"}.get(attr, "user")
    if (why := acl_sign_alone(entry, kind)) is not None:
        raise _bad(attr, why)
    user, _, host = acl_unsigned(entry).partition("@")
    if not user or any(c.isspace() for c in entry):
        raise _bad(attr, f"{_repr(entry)} is not [+|-]name[@host]")
    if len(user) > MAX_NAME["user"] or len(host) > MAX_NAME["host"]:
        raise _bad(attr, f"{_repr(entry)} is longer than PBS's user@host")
    return entry


def acl_entries(value: Any, attr: str) -> list[str]:
    """A reservation's access list: entries (`acl_entry`), at least one, none twice (PBS's
    15055), at most `ACL_MAX_ENTRIES`."""
    items = _as_list(value, attr)
    if len(items) > ACL_MAX_ENTRIES:
        raise _bad(attr, ACL_TOO_MANY)
    entries = [acl_entry(e, attr) for e in items]
    if not entries:
        raise _bad(attr, "is empty")
    if len(set(entries)) != len(entries):
        raise BadValue(PBSE_DUPLIST, attr, "an entry is there twice")
    return entries


RESV_ATTRIBUTES: dict[str, Rule] = {
    "Reserve_Name": Rule(lambda v, a: v if v == "NULL" else check_name("resv", v, a)),
    "reserve_start": Rule(_time), "reserve_end": Rule(_time),
    "reserve_duration": Rule(lambda v, a: seconds(v, a)),
    "Resource_List": Rule(_resources_rule),
    "Variable_List": Rule(_variables),
    "partition": Rule(lambda v, a: text(v, a, allow_empty=False)),
    "Authorized_Users": Rule(acl_entries),
    "Authorized_Groups": Rule(acl_entries),
    "Authorized_Hosts": Rule(acl_entries),
    "comment": Rule(_prose, OPERATOR),
}


RESV_ATTRIBUTES["resv_nodes"] = Rule(_exec_vnode, SERVER)
STORED_RESV_CHECKS = frozenset({"reserve_start", "reserve_end", "reserve_duration",
                                "Resource_List", "resv_nodes"})


def resv_problems(attrs: Mapping[str, Any], custom: Mapping[str, str] | None = None
                  ) -> dict[str, str]:
    """What is wrong with a stored reservation: attribute -> why."""
    problems: dict[str, str] = {}
    for name in ("reserve_start", "reserve_end"):  # (every reservation has them)
        if attrs.get(name) is None:
            problems[name] = f"{name}: missing"
    for name in STORED_RESV_CHECKS:
        value = attrs.get(name)
        if value is None:
            continue
        try:
            if name == "Resource_List":
                if not isinstance(value, Mapping):
                    raise _bad(name, f"{_repr(value)} is not a mapping of resources")
                for res, val in value.items():
                    resource_value(res, val, attr=name, custom={**(custom or {}), res: (
                        resource_type(res, custom) or "string")})
            else:
                RESV_ATTRIBUTES[name].check(value, name)
        except BadValue as exc:
            problems[name] = str(exc)
    return problems


def _as_list(value: Any, attr: str) -> list[Any]:
    if not isinstance(value, list):
        raise _bad(attr, f"{_repr(value)} is not a list")
    return value


def resv_value(name: str, value: Any, custom: Mapping[str, str] | None = None) -> Any:
    rule = RESV_ATTRIBUTES.get(name)
    if rule is None:
        return value
    if name == "Resource_List":
        return resources(value, name, custom)
    return rule.check(value, name)


#: Per object kind, the rule table hooks' changes are checked against.
TABLES = {"job": JOB_ATTRIBUTES, "vnode": VNODE_ATTRIBUTES, "resv": RESV_ATTRIBUTES}


def attribute_name(name: Any, kind: str = "job") -> str:
    """An attribute name a hook (or another entry) uses: a letter, then letters, digits
    and underscores, at most `MAX_ATTR_NAME` long; else `BadValue` 15002 naming it."""
    if not isinstance(name, str) or len(name) > MAX_ATTR_NAME or \
            not _ATTR_NAME.fullmatch(name):
        raise BadValue(PBSE_NOATTR, shown(name), f"not a {kind} attribute name (a letter, "
                       "then letters, digits or _)")
    return name


def object_value(kind: str, name: str, value: Any) -> Any:
    """A value a hook sets on a kernel object of `kind`, checked (`BadValue` if bad); the
    attribute's name too, a plugin's own included (`attribute_name`)."""
    attribute_name(name, kind)
    if value is None:
        return None
    if kind == "job":
        return job_value(name, value)
    if kind == "vnode":
        return vnode_value(name, value)
    if kind == "resv":
        return resv_value(name, value)
    return value
