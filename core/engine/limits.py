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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..entlim import (
    GENERIC,
    KINDS,
    SUMMABLE,
    Limit,
    Owner,
    applying,
    job_amount,
    parse_stored,
    same,
)
from .errors import PBSE_BADATVAL, PbsError

PBSE_MAXQUED = 15046
PBSE_ENTLIMCT = 15142
PBSE_ENTLIMRESC = 15143

#: The count limits, and the resource-keyed ones (attribute -> the states they count;
#: None: every state but finished and moved).
COUNT_LIMITS = {"max_queued": None, "queued_jobs_threshold": ("Q",)}
RESOURCE_LIMITS = {"max_queued_res": None, "queued_jobs_threshold_res": ("Q",)}
#: The states of a job that is over (history kept with job_history_enable).
DONE_STATES = ("F", "M", "X")


@dataclass
class Holder:
    """A limit attribute's holder: the complex (server) or one queue."""

    attrs: Mapping[str, Any]
    queue: str | None  # None: the complex

    def where(self) -> str:
        return "complex" if self.queue is None else f"queue {self.queue}"

    def holds(self, attrs: Mapping[str, Any] | None) -> bool:
        """Whether a job (its attributes; None: no job) is among those it limits."""
        return attrs is not None and (self.queue is None or attrs.get("queue") == self.queue)


@dataclass(frozen=True)
class Other:
    """Another job not done, as the counts read it."""

    state: str
    queue: str | None
    owner: Owner
    resources: Mapping[str, Any] | None


def check(holders: Iterable[Holder], job: Mapping[str, Any], others: Iterable[Other],
          resource_types: Mapping[str, str], queues: Mapping[str, Mapping[str, Any]],
          server: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> None:
    """Refuse `job` (its attributes as it would be stored) with PBS's error when it would
    be over a limit of one of `holders`. `others` are the other jobs not done; a holder's
    queue counts only its own. `old` is the job as it was stored, for a job that changes
    (moved, altered, released): a limit refuses it only where the change adds to what it
    counts against that limit (another queue, owner, project, state or more of a
    resource), so a limit lowered below what is queued refuses no change that takes
    nothing more. Resources are counted as the scheduler will give them (`job_amount`,
    with each job's queue's and the server's defaults); a value of the job that is not an
    amount is refused (15014) rather than counted as nothing."""
    holders = [h for h in holders if _has_limits(h.attrs)]
    if not holders:
        return
    others = list(others)
    owner = Owner.of(job)
    state = str(job.get("job_state") or "Q")
    before = Owner.of(old) if old is not None else None

    def defaults(queue: Any) -> tuple:
        return (queues.get(str(queue)) or {}, server)

    def amount_of(attrs: Mapping[str, Any], resource: str, kind: str) -> int | float:
        try:
            return job_amount(attrs.get("Resource_List"), resource, kind,
                              defaults(attrs.get("queue")), strict=True)
        except ValueError as exc:
            raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value {exc}"
                           ) from None

    def counted_before(was_inside: bool, states: tuple | None, kind: str) -> bool:
        """Whether the job as it was counted against an item of `kind` in a holder."""
        return was_inside and old is not None and before is not None and (
            states is None or old.get("job_state") in states) and same(kind, before, owner)

    for holder in holders:
        if not holder.holds(job):
            continue
        mine = [o for o in others if holder.queue is None or o.queue == holder.queue]
        was_inside = holder.holds(old)
        if holder.queue is not None and holder.attrs.get("max_queuable") is not None \
                and not was_inside and len(mine) + 1 > int(holder.attrs["max_queuable"]):
            raise PbsError(PBSE_MAXQUED, "Maximum number of jobs already in queue")

        for attr, states in COUNT_LIMITS.items():
            text = holder.attrs.get(attr)
            if not text or (states is not None and state not in states):
                continue
            counted = [o for o in mine if states is None or o.state in states]
            for limit in applying(parse_stored(text, "long"), owner):
                if counted_before(was_inside, states, limit.kind):
                    continue  # it was counted there already: nothing added
                used = sum(1 for o in counted if same(limit.kind, o.owner, owner))
                if used + 1 > limit.value:
                    raise PbsError(PBSE_ENTLIMCT, _count_text(limit, owner, holder,
                                                              states is not None))
        for attr, states in RESOURCE_LIMITS.items():
            table = holder.attrs.get(attr)
            if not isinstance(table, Mapping) or (states is not None and state not in states):
                continue
            counted = [o for o in mine if states is None or o.state in states]
            for resource, text in sorted(table.items()):
                kind = resource_types.get(resource)
                if kind not in SUMMABLE or not text:
                    continue
                asked = amount_of(job, resource, kind)
                for limit in applying(parse_stored(text, kind), owner):
                    if old is not None and counted_before(was_inside, states, limit.kind) and \
                            asked <= job_amount(old.get("Resource_List"), resource, kind,
                                                defaults(old.get("queue"))):
                        continue  # no more than it counted for already
                    used = sum(job_amount(o.resources, resource, kind, defaults(o.queue))
                               for o in counted if same(limit.kind, o.owner, owner))
                    if used + asked > limit.value:
                        raise PbsError(PBSE_ENTLIMRESC, _resource_text(
                            limit, owner, holder, resource, states is not None))


def _has_limits(attrs: Mapping[str, Any]) -> bool:
    return any(attrs.get(a) for a in (*COUNT_LIMITS, *RESOURCE_LIMITS)) or \
        attrs.get("max_queuable") is not None


def _count_text(limit: Limit, owner: Owner, holder: Holder, queued: bool) -> str:
    """PBS's text for a count limit reached."""
    state = " in 'Q' state" if queued else ""
    if limit.kind == "o":
        return f"Maximum number of jobs{state} already in {holder.where()}"
    word = KINDS[limit.kind]
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
        whose = f"per-{KINDS[limit.kind]} limit"
    else:
        whose = f"{KINDS[limit.kind]} {owner.name(limit.kind)}'s limit"
    return f"would exceed {whose} on resource {resource} in {holder.where()}" + (
        " for jobs in 'Q' state" if queued else "")

