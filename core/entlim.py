"""PBS's entity limits: the ``[kind:name=value]`` lists of ``max_queued``, ``max_run`` and
their kin, whom each item limits, and what a job counts against a resource limit. The
engine checks the queued-job limits with it (`pbsplug.engine.limits`), the scheduling
library the run limits (`pbsplug.scheduler.runlimits`).

An item's kind is ``o`` (name ``PBS_ALL``: all jobs together), ``u`` (user), ``g`` (group)
or ``p`` (project); the name ``PBS_GENERIC`` is the limit of each entity of that kind that
has no item of its own. Values are counts (whole numbers) or amounts of a resource of a
summable type (long, float, size in bytes, duration in seconds).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import units, values
from .objects import PbsObject

GENERIC = "PBS_GENERIC"
ALL = "PBS_ALL"
#: A job's project when it names none (PBS's default project).
DEFAULT_PROJECT = "_pbs_project_default"
#: The resource types a limit may sum.
SUMMABLE = ("long", "float", "size", "duration")
KINDS = {"o": "overall", "u": "user", "g": "group", "p": "project"}
_FIELDS = {"u": "user", "g": "group", "p": "project"}
_ITEM = re.compile(r"\s*\[\s*([ugpo])\s*:\s*([^\s=\]]+)\s*=\s*([^\s\]]+)\s*\]\s*,?")


@dataclass(frozen=True)
class Limit:
    kind: str      # o, u, g or p
    name: str      # PBS_ALL, PBS_GENERIC or an entity's name
    value: Any     # a count, or an amount of the resource (`amount`)


def parse(text: str, kind: str = "long") -> list[Limit]:
    """The items of an entity limit, values read as `kind` (``long`` for a count, else the
    resource's type). Raises ValueError naming the item that is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not an entity limit")
    items: list[Limit] = []
    pos = 0
    while text[pos:].strip(" ,"):
        match = _ITEM.match(text, pos)
        if match is None:
            raise ValueError(f"{text[pos:].strip()!r}: expected [u|g|p|o:name=value]")
        who, name, raw = match.groups()
        item = match.group(0).strip(" ,")
        if (who == "o") != (name == ALL):
            raise ValueError(f"{item}: PBS_ALL goes with o:, and o: only with PBS_ALL")
        try:
            value = amount(raw, kind)
        except ValueError as exc:
            raise ValueError(f"{item}: {exc}") from None
        if any(i.kind == who and i.name == name for i in items):
            raise ValueError(f"{item}: {KINDS[who]} {name} is limited twice")
        items.append(Limit(who, name, value))
        pos = match.end()
    if not items:
        raise ValueError("expected [u|g|p|o:name=value],...")
    return items


def parse_stored(text: Any, kind: str = "long") -> list[Limit]:
    """A stored limit (qmgr checked it when it was set); one that no longer reads (a
    resource's type changed since) limits nothing."""
    try:
        return parse(str(text), kind)
    except ValueError:
        return []


def amount(value: Any, kind: str) -> int | float:
    """A value of a summable resource as a number: bytes for a size, seconds for a
    duration. Raises ValueError."""
    if kind not in SUMMABLE:
        raise ValueError(f"a resource of type {kind} cannot be limited (only "
                         f"{', '.join(SUMMABLE)})")
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a number")
    if kind == "size":
        return units.parse_size(value)
    if kind == "duration":
        return units.parse_duration(value)
    text = str(value).strip()
    try:  # (the values' own rules: ASCII digits; int() and float() also read ``٣``, ``1_0``)
        number: int | float = values.long(text, "limit", -values.LONG_MAX) \
            if kind == "long" else values.number(text, "limit")
    except ValueError:
        raise ValueError(f"{value!r} is not a {'whole ' if kind == 'long' else ''}"
                         f"number") from None
    if number < 0 or not math.isfinite(number):
        raise ValueError(f"{value!r} is not zero or more")
    return number


def combine(old: str, new: str, sign: int) -> str:
    """qmgr's ``+=`` (sign 1: `new`'s items set, each entity's replacing its old one) and
    ``-=`` (sign -1: the entities of `new` taken out, whatever their value) on an entity
    limit's text. Items keep their order; the result is ``[..],[..]``, or "" when none is
    left."""
    items = {(m.group(1), m.group(2)): m.group(0).strip(" ,") for m in _ITEM.finditer(old)}
    for m in _ITEM.finditer(new):
        key = (m.group(1), m.group(2))
        if sign > 0:
            items[key] = m.group(0).strip(" ,")
        else:
            items.pop(key, None)
    return ",".join(items.values())


@dataclass(frozen=True)
class Owner:
    """What a job is counted under."""

    user: str
    group: str
    project: str

    @classmethod
    def of(cls, attrs: Mapping[str, Any] | PbsObject) -> Owner:
        """From a job's attributes (a mapping or a `Job`'s `get`)."""
        return cls(str(attrs.get("euser") or ""), str(attrs.get("egroup") or ""),
                   str(attrs.get("project") or DEFAULT_PROJECT))

    def name(self, kind: str) -> str:
        """The name it counts under for an item of `kind` (``PBS_ALL`` for ``o``)."""
        return ALL if kind == "o" else getattr(self, _FIELDS[kind])


def applying(limits: list[Limit], owner: Owner) -> list[Limit]:
    """The items of `limits` that apply to a job of `owner`: the overall one, and per kind
    the owner's own, else the generic one."""
    named = {(i.kind, i.name): i for i in limits}
    out = []
    for kind in "ougp":
        if kind == "o":
            item = named.get(("o", ALL))
        else:
            item = named.get((kind, owner.name(kind))) or named.get((kind, GENERIC))
        if item is not None:
            out.append(item)
    return out


def same(kind: str, other: Owner, owner: Owner) -> bool:
    """Whether a job of `other` counts against an item of `kind` that limits `owner`."""
    return kind == "o" or other.name(kind) == owner.name(kind)


#: Resources a select's chunks ask for (host-level): with a select, a job asks the sum over
#: its chunks; the others (walltime, cput, a server-wide licence) are asked for job-wide,
#: in Resource_List. A custom resource counts as host-level where a chunk or a
#: default_chunk names it.
HOST_LEVEL = frozenset({"ncpus", "mem", "vmem", "pmem", "pvmem", "ngpus", "mpiprocs",
                        "ompthreads", "naccelerators", "accelerator_memory"})


def job_amount(res: Mapping[str, Any] | None, name: str, kind: str,
               defaults: Sequence[Mapping[str, Any]] = (), strict: bool = False
               ) -> int | float:
    """What a job asks of resource `name` in all, as the scheduler will give it: for a
    host-level resource of a job with a select (`HOST_LEVEL`), the sum over its chunks (a
    chunk without it takes the first `default_chunk` of `defaults`, the attributes of its
    queue then the server; ncpus is 1 when none says); else its Resource_List value, else
    the first ``resources_default``, else 1 for ncpus and 0 for the rest. With `strict`, a
    value that is not an amount raises ValueError naming it (a job being submitted); else
    it counts 0 (a stored job is not refused again), a chunk at a time."""
    res = res if isinstance(res, Mapping) else {}

    def tables(attr: str) -> tuple[Any, ...]:
        return tuple(source.get(attr) if hasattr(source, "get") else None
                     for source in defaults)

    def read(value: Any, where: str) -> int | float:
        try:
            return amount(value, kind)
        except ValueError as exc:
            if strict:
                raise ValueError(f"{where}: {exc}") from None
            return 0

    select = res.get("select")
    if select:
        try:
            asked = units.parse_select(str(select))
        except ValueError as exc:
            if strict:
                raise ValueError(f"Resource_List.select: {exc}") from None
            return 0
        # (each chunk given what it lacks of default_chunk, as the scheduler places it)
        chunks = units.with_chunk_defaults(tuple(asked), tables("default_chunk"))
        if name in HOST_LEVEL or any(name in chunk.resources for chunk in chunks):
            return sum(chunk.count * read(chunk.resources.get(name, 0),
                                          f"Resource_List.select {name}") for chunk in chunks)
    value = res.get(name)  # a job-wide resource (walltime, a licence): not in chunks
    if value is None:
        value = next((table[name] for table in tables("resources_default")
                      if isinstance(table, Mapping) and table.get(name) is not None),
                     1 if name == "ncpus" else 0)
    return read(value, f"Resource_List.{name}")
