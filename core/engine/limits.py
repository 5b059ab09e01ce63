"""PBS's limits on how many jobs, and how much of a resource, may wait in the complex and
in each queue: checked when a job enters a queue (qsub, qmove), so one user cannot fill the
server with jobs.

The attributes (server and queue, set with qmgr) and what they count:

* ``max_queued``: jobs in the complex or queue that have not finished (queued, held,
  waiting, running, exiting, suspended);
* ``queued_jobs_threshold``: jobs in state Q only;
* ``max_queued_res.<resource>``, ``queued_jobs_threshold_res.<resource>``: the sums of the
  jobs' ``Resource_List.<resource>`` (a job without one counts what its select asks for in
  all), the same jobs as above;
* ``max_queuable`` (queue only, PBS's older form): every job in the queue that has not
  finished, whoever owns it.

An entity limit is PBS's list of ``[kind:name=value]`` items: kind ``o`` (name
``PBS_ALL``: all jobs together), ``u`` (user), ``g`` (group) or ``p`` (project), where the
name ``PBS_GENERIC`` is the limit of each entity without a limit of its own. A job is
refused with PBS's code and text (15142 for a count, 15143 for a resource, 15046 for
``max_queuable``) when the jobs already there plus itself would be over any limit that
applies to it. Nobody is exempt, as in PBS: root's and managers' jobs count and are
counted. Limits are checked, never enforced on what is already queued: lowering one leaves
the jobs over it where they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import units
from .errors import PbsError

PBSE_MAXQUED = 15046
PBSE_ENTLIMCT = 15142
PBSE_ENTLIMRESC = 15143

#: The count limits, and the resource-keyed ones (attribute -> the states they count;
#: None: every state but finished and moved).
COUNT_LIMITS = {"max_queued": None, "queued_jobs_threshold": ("Q",)}
RESOURCE_LIMITS = {"max_queued_res": None, "queued_jobs_threshold_res": ("Q",)}
#: The states of a job that is over (history kept with job_history_enable).
DONE_STATES = ("F", "M", "X")
#: The resource types a limit may sum.
SUMMABLE = ("long", "float", "size", "duration")
GENERIC = "PBS_GENERIC"
ALL = "PBS_ALL"
DEFAULT_PROJECT = "_pbs_project_default"
_KINDS = {"o": "overall", "u": "user", "g": "group", "p": "project"}
_ITEM = re.compile(r"\s*\[\s*([ugpo])\s*:\s*([^\s=\]]+)\s*=\s*([^\s\]]+)\s*\]\s*,?")


@dataclass(frozen=True)
class Limit:
    kind: str      # o, u, g or p
    name: str      # PBS_ALL, PBS_GENERIC or an entity's name
    value: Any     # an int for a count; a number of the resource's unit for a resource


def parse(text: str, kind: str = "long") -> list[Limit]:
    """The items of an entity limit, values read as `kind` (``long`` for a count, else the
    resource's type). Raises ValueError naming the item that is wrong."""
    if not isinstance(text, str):
        raise ValueError(f"{text!r} is not an entity limit")
    items: list[Limit] = []
    pos = 0
    while pos < len(text):
        if not text[pos:].strip(" ,"):
            break
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
            raise ValueError(f"{item}: {_KINDS[who]} {name} is limited twice")
        items.append(Limit(who, name, value))
        pos = match.end()
    if not items:
        raise ValueError("expected [u|g|p|o:name=value],...")
    return items


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
    try:
        number = int(str(value).strip()) if kind == "long" else float(str(value).strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a {'whole ' if kind == 'long' else ''}"
                         f"number") from None
    if number < 0 or number != number or number in (float("inf"), float("-inf")):
        raise ValueError(f"{value!r} is not zero or more")
    return number


@dataclass(frozen=True)
class Owner:
    """What a job is counted under."""

    user: str
    group: str
    project: str

    @classmethod
    def of(cls, attrs: Mapping[str, Any]) -> Owner:
        return cls(str(attrs.get("euser") or ""), str(attrs.get("egroup") or ""),
                   str(attrs.get("project") or DEFAULT_PROJECT))

    def name(self, kind: str) -> str:
        return {"u": self.user, "g": self.group, "p": self.project, "o": ALL}[kind]


def job_amount(res: Mapping[str, Any] | None, name: str, kind: str) -> int | float:
    """What a job asks of resource `name` in all: its Resource_List value, else the sum over
    its select's chunks; 0 when it asks for none, or for something unreadable (a job is
    checked when it is submitted; an old one is not refused again here)."""
    res = res if isinstance(res, Mapping) else {}
    try:
        if res.get(name) is not None:
            return amount(res[name], kind)
        if res.get("select"):
            return sum(chunk.count * amount(chunk.resources[name], kind)
                       for chunk in units.parse_select(str(res["select"]))
                       if name in chunk.resources)
    except (ValueError, TypeError):
        pass
    return 0


@dataclass
class Holder:
    """A limit attribute's holder: the complex (server) or one queue."""

    attrs: Mapping[str, Any]
    queue: str | None  # None: the complex

    def where(self) -> str:
        return "complex" if self.queue is None else f"queue {self.queue}"


def check(holders: Iterable[Holder], job: Mapping[str, Any],
          others: Iterable[tuple[str, str, Owner, Mapping[str, Any] | None]],
          resource_types: Mapping[str, str], counts: bool = True) -> None:
    """Refuse `job` (its attributes as it would be queued) with PBS's error when it would
    be over a limit of one of `holders`. `others` are the other jobs not done, as (state,
    queue, owner, Resource_List); a holder's queue counts only its own. Without `counts`,
    only the resource limits (a queued job's resources altered)."""
    holders = [h for h in holders if _has_limits(h.attrs, counts)]
    if not holders:
        return
    others = list(others)
    owner = Owner.of(job)
    for holder in holders:
        mine = [o for o in others if holder.queue is None or o[1] == holder.queue]
        if counts and holder.queue is not None and \
                holder.attrs.get("max_queuable") is not None:
            if len(mine) + 1 > int(holder.attrs["max_queuable"]):
                raise PbsError(PBSE_MAXQUED, "Maximum number of jobs already in queue")
        for attr, states in COUNT_LIMITS.items() if counts else ():
            text = holder.attrs.get(attr)
            if not text:
                continue
            counted = [o for o in mine if states is None or o[0] in states]
            for limit in _applying(_parse_stored(text, "long"), owner):
                used = sum(1 for o in counted if _same(limit.kind, o[2], owner))
                if used + 1 > limit.value:
                    raise PbsError(PBSE_ENTLIMCT, _count_text(limit, owner, holder,
                                                              states is not None))
        for attr, states in RESOURCE_LIMITS.items():
            table = holder.attrs.get(attr)
            if not isinstance(table, Mapping):
                continue
            counted = [o for o in mine if states is None or o[0] in states]
            for resource, text in sorted(table.items()):
                kind = resource_types.get(resource)
                if kind not in SUMMABLE or not text:
                    continue
                asked = job_amount(job.get("Resource_List"), resource, kind)
                for limit in _applying(_parse_stored(text, kind), owner):
                    used = sum(job_amount(o[3], resource, kind) for o in counted
                               if _same(limit.kind, o[2], owner))
                    if used + asked > limit.value:
                        raise PbsError(PBSE_ENTLIMRESC, _resource_text(
                            limit, owner, holder, resource, states is not None))


def _has_limits(attrs: Mapping[str, Any], counts: bool = True) -> bool:
    if any(attrs.get(a) for a in RESOURCE_LIMITS):
        return True
    return counts and (any(attrs.get(a) for a in COUNT_LIMITS)
                       or attrs.get("max_queuable") is not None)


def _parse_stored(text: Any, kind: str) -> list[Limit]:
    """A stored limit (qmgr checked it when it was set); one that no longer reads (a
    resource's type changed since) limits nothing."""
    try:
        return parse(str(text), kind)
    except ValueError:
        return []


def _applying(limits: list[Limit], owner: Owner) -> list[Limit]:
    """The limits of `limits` that apply to a job of `owner`: the overall one, and per kind
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


def _same(kind: str, other: Owner, owner: Owner) -> bool:
    return kind == "o" or other.name(kind) == owner.name(kind)


def _count_text(limit: Limit, owner: Owner, holder: Holder, queued: bool) -> str:
    """PBS's text for a count limit reached."""
    state = " in 'Q' state" if queued else ""
    if limit.kind == "o":
        return f"Maximum number of jobs{state} already in {holder.where()}"
    word = _KINDS[limit.kind]
    if limit.name == GENERIC:
        whose = "complex's" if holder.queue is None else f"queue {holder.queue}'s"
        return f"would exceed {whose} per-{word} limit" + (" of jobs in 'Q' state"
                                                           if queued else "")
    return f"Maximum number of jobs{state} for {word} {owner.name(limit.kind)} already in " \
           f"{holder.where()}"


def _resource_text(limit: Limit, owner: Owner, holder: Holder, resource: str,
                   queued: bool) -> str:
    """PBS's text for a resource limit reached."""
    if limit.kind == "o":
        whose = "limit"
    elif limit.name == GENERIC:
        whose = f"per-{_KINDS[limit.kind]} limit"
    else:
        whose = f"{_KINDS[limit.kind]} {owner.name(limit.kind)}'s limit"
    return f"would exceed {whose} on resource {resource} in {holder.where()}" + (
        " for jobs in 'Q' state" if queued else "")


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
