"""PBS's limits on how many jobs, and how much of a resource, may wait in the complex and
in each queue: checked when a job enters a queue (qsub, qmove), so one user cannot fill the
server with jobs.

The attributes (server and queue, set with qmgr) and what they count:

* ``max_queued``: jobs in the complex or queue that have not finished (queued, held,
  waiting, running, exiting, suspended);
* ``queued_jobs_threshold``: jobs not begun: queued, held, waiting (and in transit), as
  OpenPBS 23.06 counts them (checked: a held or a waiting job fills it); never a job
  running, exiting or suspended;
* ``max_queued_res.<resource>``, ``queued_jobs_threshold_res.<resource>``: the sums of the
  jobs' ``Resource_List.<resource>`` (a job without one counts what its select asks for in
  all), the same jobs as above;
* ``max_queuable`` (queue only, PBS's older form): every job in the queue that has not
  finished, whoever owns it (an array as one job, and each subjob begun as one).

A job array counts as its subjobs, as OpenPBS 23.06 counts it (checked): the array's row as
the indices it has not begun (``array_indices_remaining``, counted from its runs, never
expanded), each of them asking what the array asks, and a subjob begun as the job its own
row is; so an array of 100 queued subjobs is 100 jobs, and one whose subjobs ended counts
only those queued or running. Against the thresholds an array counts its indices not
begun, in any state but finished (begun, ``B``, as well). The whole array is refused when
its subjobs would pass a limit. Only ``max_queuable`` counts rows: an array is one job
there, as in PBS.

An entity limit is PBS's list of ``[kind:name=value]`` items: kind ``o`` (name
``PBS_ALL``: all jobs together), ``u`` (user), ``g`` (group) or ``p`` (project), where the
name ``PBS_GENERIC`` is the limit of each entity without a limit of its own. A job is
refused with PBS's code and text (15142 for a count, 15143 for a resource, 15046 for
``max_queuable``) when the jobs already there plus itself would be over any limit that
applies to it. Nobody is exempt, as in PBS: root's and managers' jobs count and are
counted; but a manager's qmove is not checked (the server does not call `Tally.check`),
as OpenPBS 23.06 lets it past them all. Limits are checked, never enforced on what is
already queued: lowering one leaves the jobs over it where they are.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..entlim import (
    ALL,
    GENERIC,
    KINDS,
    SUMMABLE,
    Limit,
    Owner,
    applying,
    job_amount,
    parse_stored,
)
from ..objects import PbsObject
from .arrays import count_indices
from .errors import PBSE_BADATVAL, PbsError

PBSE_MAXQUED = 15046
PBSE_ENTLIMCT = 15142
PBSE_ENTLIMRESC = 15143

#: A job's attributes as counted: stored ones, or a `Job` (read with ``get``: the simulator
#: counts the objects its schedulers see).
JobAttrs = Mapping[str, Any] | PbsObject

#: The count limits, and the resource-keyed ones (attribute -> what they count: None,
#: every job not done; "not begun", the jobs `not_begun`).
COUNT_LIMITS = {"max_queued": None, "queued_jobs_threshold": "not begun"}
RESOURCE_LIMITS = {"max_queued_res": None, "queued_jobs_threshold_res": "not begun"}
#: The states of a job that is over (history kept with job_history_enable).
DONE_STATES = ("F", "M", "X")
#: The most distinct requests whose amounts a tally remembers.
MAX_ASKED = 4096
#: The states of a job that has begun (running, exiting, suspended; U: suspended as its
#: workstation is busy): what the thresholds (`not_begun`) never count.
BEGUN_STATES = ("R", "E", "S", "U")
_BEGUN_OR_DONE = frozenset((*BEGUN_STATES, *DONE_STATES))
#: A queue's key for its rows (`max_queuable`: an array is one), after the queue's name.
ROWS = (None, "rows", ALL, None)


def not_begun(attrs: JobAttrs) -> bool:
    """Whether a job counts against the thresholds (``queued_jobs_threshold`` and its
    ``_res``): one not done and not begun, so queued, held, waiting or in transit, as
    OpenPBS 23.06 counts it (checked); an array in any such state, or begun (B), as its
    indices not begun (`jobs_in`). A job requeued is not begun again and counts again;
    OpenPBS 23.06 counts a job that ran no more until its server restarts (checked: the
    departures in docs/engine.md)."""
    return attrs.get("job_state") not in _BEGUN_OR_DONE


def jobs_in(attrs: JobAttrs) -> int:
    """How many jobs a stored job counts as: an array (it has ``array_indices_remaining``)
    as its indices not begun, each begun subjob having a row of its own; any other job as
    one. A remaining list that does not read counts as one job."""
    remaining = attrs.get("array_indices_remaining")
    if remaining is None:
        return 1
    try:
        return count_indices(remaining)
    except ValueError:
        return 1


class LimitError(PbsError):
    """A limit on queued jobs refused a job (`Tally.check`): PBS's error, the key in
    `Tally.counts` of the count that was over and that count then: it must fall below that
    before the job can be taken (the simulator wakes a job waiting in a route queue by
    it)."""

    def __init__(self, code: int, message: str, key: tuple[Any, ...], count: float):
        super().__init__(code, message)
        self.key = key
        self.count = count


@dataclass
class Holder:
    """A limit attribute's holder: the complex (server) or one queue."""

    attrs: Mapping[str, Any]
    queue: str | None  # None: the complex

    def where(self) -> str:
        return "complex" if self.queue is None else f"queue {self.queue}"

    def holds(self, attrs: JobAttrs | None) -> bool:
        """Whether a job (its attributes; None: no job) is among those it limits."""
        return attrs is not None and (self.queue is None or attrs.get("queue") == self.queue)


#: How the comment began of a job an older pbsplug held back from Q (PBS's text followed).
HELD_BACK = "Not Running: "


def held_back(comment: Any) -> bool:
    """Whether a job's comment is the one an older pbsplug wrote when a threshold held the
    job back from Q (its thresholds counted jobs in Q only, so a waiting job whose time
    came, or a dependency's release, could be over one): `HELD_BACK` and a text of this
    module for a Q-state limit (the scheduler never writes those). Nothing writes it now
    (the thresholds count every job `not_begun`, so entering Q adds nothing); the server
    looks for it in the database as it starts (`Engine._release_held_back`)."""
    text = str(comment or "")
    return text.startswith(HELD_BACK) and "'Q' state" in text


def has_limits(attrs: Mapping[str, Any]) -> bool:
    """Whether a server's or queue's attributes set a limit on queued jobs."""
    return any(attrs.get(a) for a in (*COUNT_LIMITS, *RESOURCE_LIMITS)) or \
        attrs.get("max_queuable") is not None


class Tally:
    """What the jobs not done count against the limits of the complex and each queue, made
    once (one pass over the jobs, grouped by SQLite: jobs alike in queue, owner, state and
    request are one group) and kept up to date by `move`: a check then costs the limits
    that apply to one job, however many jobs there are."""

    def __init__(self, server: Mapping[str, Any], queues: Mapping[str, Mapping[str, Any]],
                 resource_types: Mapping[str, str],
                 groups: Iterable[tuple[Mapping[str, Any], int]]):
        self.server = server
        self.queues = queues
        self._asked: dict[tuple[Any, ...], float] = {}  # (request, resource, queue) -> amount
        #: Every limited resource, with its type.
        self.kinds: dict[str, str] = {}
        for attrs in (server, *queues.values()):
            for attr in RESOURCE_LIMITS:
                table = attrs.get(attr)
                for res in table if isinstance(table, Mapping) else ():
                    if resource_types.get(res) in SUMMABLE:
                        self.kinds[res] = resource_types[res]
        self.counts: dict[tuple[Any, ...], float] = {}
        for attrs, weight in groups:
            self._add(attrs, weight)

    def _defaults(self, queue: Any) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
        return (self.queues.get(str(queue)) or {}, self.server)

    def _amount(self, attrs: JobAttrs, res: str, kind: str) -> float:
        """`job_amount`, once per distinct request."""
        request = attrs.get("Resource_List")
        request = request if isinstance(request, Mapping) else {}
        key = (request.get("select"), request.get(res), res, attrs.get("queue"))
        try:
            return self._asked[key]
        except KeyError:
            pass
        except TypeError:  # an unhashable value (a damaged row): not kept
            return job_amount(request, res, kind, self._defaults(attrs.get("queue")))
        if len(self._asked) >= MAX_ASKED:  # a tally kept for long sees many requests
            self._asked.clear()
        amount = self._asked[key] = job_amount(request, res, kind,
                                               self._defaults(attrs.get("queue")))
        return amount

    def _entries(self, attrs: JobAttrs | None
                 ) -> Iterable[tuple[tuple[Any, ...], float]]:
        """What a job adds: (key, amount), a key (holder queue or None, Q-only or not,
        entity kind, entity name, resource or None for the count), the amount that of
        all the jobs it counts as (`jobs_in`); and one row to its queue's `ROWS` key.
        Nothing for a job done (or none)."""
        if attrs is None or attrs.get("job_state") in DONE_STATES:
            return
        yield (attrs.get("queue"), *ROWS), 1
        jobs = jobs_in(attrs)
        if not jobs:
            return
        owner = Owner.of(attrs)
        names = [(kind, owner.name(kind)) for kind in "ougp"]
        asked = [(res, jobs * self._amount(attrs, res, kind))
                 for res, kind in self.kinds.items()]
        q_only = (False, True) if not_begun(attrs) else (False,)
        for where in (None, attrs.get("queue")):
            for queued in q_only:
                for kind, name in names:
                    yield (where, queued, kind, name, None), jobs
                    for res, amount in asked:
                        if amount:
                            yield (where, queued, kind, name, res), amount

    def _add(self, attrs: JobAttrs | None, weight: float) -> None:
        counts = self.counts
        for key, amount in self._entries(attrs):
            total = counts.get(key, 0) + weight * amount
            if total:
                counts[key] = total
            else:  # (an entity with no job left is forgotten)
                counts.pop(key, None)

    def move(self, old: JobAttrs | None, new: JobAttrs | None) -> None:
        """A job stored as `old` (None: a new one) is now `new` (None: gone)."""
        self._add(old, -1)
        self._add(new, 1)

    def lowered(self, old: JobAttrs | None, new: JobAttrs | None,
                watched: Container[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """The keys of `watched` (keys of `counts`) whose counts `move(old, new)` lowers."""
        out, after = [], None
        for key, amount in self._entries(old):
            if key in watched:
                if after is None:
                    after = dict(self._entries(new))
                if after.get(key, 0) < amount:
                    out.append(key)
        return out

    def check(self, job: Mapping[str, Any], old: JobAttrs | None = None) -> None:
        """Refuse `job` (its attributes as they would be stored) with PBS's error when it
        would be over a limit of the complex or its queue. `old` is the job as it is
        stored (moved, altered, released; counted in the tally): a limit refuses it only
        where the change adds to what it counts against that limit (another queue,
        owner, project, state or more of a resource), so a limit lowered below what is
        queued refuses no change that takes nothing more. A value of the job that is not
        an amount is refused (15014) rather than counted as nothing."""
        queue = job.get("queue")
        holders = [Holder(self.server, None),
                   Holder(self.queues.get(str(queue)) or {}, str(queue))]
        holders = [h for h in holders if has_limits(h.attrs)]
        if not holders:
            return
        owner = Owner.of(job)
        queued = not_begun(job)
        jobs = jobs_in(job)  # (an array: its subjobs, all refused together)
        mine = dict(self._entries(old)) if old is not None else {}
        for holder in holders:
            limit_q = holder.attrs.get("max_queuable")
            if holder.queue is not None and limit_q is not None and not holder.holds(old):
                if self.counts.get((holder.queue, *ROWS), 0) + 1 > int(limit_q):
                    rows = (holder.queue, *ROWS)
                    raise LimitError(PBSE_MAXQUED, "Maximum number of jobs already in queue",
                                     rows, self.counts.get(rows, 0))
            for attr, states in COUNT_LIMITS.items():
                text = holder.attrs.get(attr)
                if not text or (states is not None and not queued):
                    continue
                for limit in applying(parse_stored(text, "long"), owner):
                    key = (holder.queue, states is not None, limit.kind,
                           owner.name(limit.kind), None)
                    added = jobs - mine.get(key, 0)
                    if added <= 0:
                        continue  # it was counted there already: nothing added
                    if self.counts.get(key, 0) + added > limit.value:
                        raise LimitError(PBSE_ENTLIMCT, _count_text(limit, owner, holder,
                                                                    states is not None),
                                         key, self.counts.get(key, 0))
            for attr, states in RESOURCE_LIMITS.items():
                table = holder.attrs.get(attr)
                if not isinstance(table, Mapping) or (states is not None and not queued):
                    continue
                for resource, text in sorted(table.items()):
                    kind = self.kinds.get(resource)
                    if kind is None or not text:
                        continue
                    try:
                        asked = jobs * job_amount(job.get("Resource_List"), resource, kind,
                                                  self._defaults(queue), strict=True)
                    except ValueError as exc:
                        raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource "
                                       f"value {exc}") from None
                    for limit in applying(parse_stored(text, kind), owner):
                        key = (holder.queue, states is not None, limit.kind,
                               owner.name(limit.kind), resource)
                        before = mine.get(key, 0)
                        if asked <= before:
                            continue  # no more than it counted for already
                        if self.counts.get(key, 0) - before + asked > limit.value:
                            raise LimitError(PBSE_ENTLIMRESC, _resource_text(
                                limit, owner, holder, resource, states is not None),
                                key, self.counts.get(key, 0))


def _count_text(limit: Limit, owner: Owner, holder: Holder, queued: bool) -> str:
    """PBS's text for a count limit reached."""
    state = " in 'Q' state" if queued else ""
    if limit.kind == "o":
        return f"Maximum number of jobs{state} already in {holder.where()}"
    word = KINDS[limit.kind]
    if limit.name == GENERIC:
        # (a queue's per-user text names no queue but "generic": OpenPBS 23.06's, checked;
        # its per-group and per-project texts name the queue)
        whose = "complex's" if holder.queue is None else \
            f"queue {'generic' if limit.kind == 'u' else holder.queue}'s"
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

