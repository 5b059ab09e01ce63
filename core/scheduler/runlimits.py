"""PBS's run limits, as one scheduling cycle keeps them.

The server (the complex) and each queue may limit how many jobs run, and how much of a
resource they use, at once:

* new style, entity limits (`pbsplug.entlim`): ``max_run`` (jobs), ``max_run_res.<res>`` (the
  sum of the running jobs' ``Resource_List.<res>``; a job without it counts what its select
  asks for in all), for all jobs (``o:PBS_ALL``), each user, group or project;
* old style: ``max_running`` (all jobs), ``max_user_run`` (each user), ``max_group_run``
  (each group).

Jobs running or exiting count (suspended ones hold nothing). A queued job whose start would
put the jobs of its owner, group, project, queue or the complex over a limit does not start
in this cycle; its comment is PBS's, ``Not Running: User has reached server running job
limit.`` and the like. Such a job is not a top job and does not stop strict ordering: no
vnode it could be given changes that, and holding vnodes for it would only keep them idle.
The soft limits (``max_run_soft``, ``max_run_res_soft``) order preemption in PBS and limit
nothing here.

The counts are the jobs this scheduler sees: with partitions, each scheduler counts its own
queues' jobs, the server's limits too.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .. import entlim, values
from ..entlim import GENERIC, KINDS, Limit, Owner

#: The attributes of the server and of a queue that limit running jobs.
COUNT_ATTRS = ("max_run", "max_running", "max_user_run", "max_group_run")
RESOURCE_ATTR = "max_run_res"
#: Every attribute `RunLimits` reads.
LIMIT_ATTRS = frozenset((*COUNT_ATTRS, RESOURCE_ATTR))
#: An old-style limit: its attribute -> the entity item it is.
_OLD_STYLE = {"max_running": ("o", entlim.ALL), "max_user_run": ("u", GENERIC),
              "max_group_run": ("g", GENERIC)}
#: Jobs holding their resources (and counted by the limits).
COUNTED_STATES = frozenset({"R", "E"})


class RunLimits:
    """The run limits of one cycle and the jobs counted against them. `over` says why a
    job may not start (None: it may); `add` counts a job started."""

    def __init__(self, holders: list[tuple[str | None, dict[str | None, list[Limit]]]],
                 kinds: dict[str, str]):
        #: (queue or None for the complex, {resource or None for a count: its items}).
        self.holders = holders
        self.kinds = kinds  # each limited resource's type
        self.resources = sorted(kinds)
        self.counts: Counter = Counter()   # (queue, kind, name) -> jobs
        self.amounts: dict[tuple, float] = {}  # (queue, kind, name, res) -> amount
        self.defaults: dict[str | None, tuple] = {}  # queue -> where defaults come from

    @classmethod
    def build(cls, server: Any, queues: Mapping[str, Any], running: Iterable[Any],
              types: Mapping[str, str] | None = None) -> RunLimits | None:
        """The limits set on `server` and `queues` (objects with ``get``), with `running`
        jobs counted; `types` the custom resources' types. None when no limit is set (the
        cycle then pays nothing)."""
        holders = []
        kinds: dict[str, str] = {}
        types = types or {}
        for queue, obj in [(None, server), *sorted(queues.items())]:
            items = _items(obj, kinds, types)
            if items:
                by_resource: dict[str | None, list[Limit]] = {}
                for item, res in items:
                    by_resource.setdefault(res, []).append(item)
                holders.append((queue, by_resource))
        if not holders:
            return None
        limits = cls(holders, kinds)
        limits.defaults = {name: (queue, server) for name, queue in queues.items()}
        limits.defaults[None] = (server,)
        for job in running:
            if job.job_state in COUNTED_STATES:
                limits.add(job)
        return limits

    def _keys(self, job: Any) -> list[tuple[str | None, str, str]]:
        owner = Owner.of(job)
        return [(where, kind, owner.name(kind)) for where in (None, job.queue)
                for kind in "ougp"]

    def _asked(self, job: Any, res: str) -> int | float:
        """What `job` asks of `res`, as the cycle gives it (its queue's and the server's
        defaults)."""
        return entlim.job_amount(job.get("Resource_List"), res, self.kinds[res],
                                 self.defaults.get(job.queue) or self.defaults[None])

    def add(self, job: Any) -> None:
        asked = {res: self._asked(job, res) for res in self.resources}
        for key in self._keys(job):
            self.counts[key] += 1
            for res, amount in asked.items():
                if amount:
                    at = (*key, res)
                    self.amounts[at] = self.amounts.get(at, 0) + amount

    def over(self, job: Any) -> str | None:
        """PBS's reason (without ``Not Running: ``) when starting `job` now would put the
        jobs running over a limit; None when it may start."""
        owner = Owner.of(job)
        for where, by_resource in self.holders:
            if where is not None and where != job.queue:
                continue
            for res, items in by_resource.items():
                asked = 1 if res is None else self._asked(job, res)
                for item in entlim.applying(items, owner):
                    key = (where, item.kind, owner.name(item.kind))
                    used = self.counts[key] if res is None else self.amounts.get((*key, res), 0)
                    if used + asked > item.value:
                        return _count_text(where, item, owner) if res is None else \
                            _resource_text(where, item, owner, res)
        return None


def _items(obj: Any, kinds: dict[str, str], types: Mapping[str, str]
           ) -> list[tuple[Limit, str | None]]:
    """The run limits an object (server or queue) sets: (item, resource or None), each
    limited resource's type noted in `kinds`. A value that does not read (qmgr checks what
    it stores) limits nothing."""
    items: list[tuple[Limit, str | None]] = []
    text = obj.get("max_run")
    if text:
        items += [(item, None) for item in entlim.parse_stored(text)]
    for attr, (kind, name) in _OLD_STYLE.items():
        value = obj.get(attr)
        if value is not None and not isinstance(value, bool):
            try:
                items.append((Limit(kind, name, int(value)), None))
            except (TypeError, ValueError):
                pass
    table = obj.get(RESOURCE_ATTR)
    if isinstance(table, Mapping):
        for res, text in sorted(table.items()):
            rtype = kinds.get(res) or types.get(res) or values.RESOURCE_TYPES.get(res) or \
                _guess(text)
            if rtype is not None and rtype in entlim.SUMMABLE:
                kinds[res] = rtype
                items += [(item, res) for item in entlim.parse_stored(text, rtype)]
    return _one_per_entity(items)


def _one_per_entity(items: list[tuple[Limit, str | None]]) -> list[tuple[Limit, str | None]]:
    """An entity limited twice for the same thing (max_run's [o:PBS_ALL] and max_running)
    keeps the lower limit."""
    best: dict[tuple, tuple[Limit, str | None]] = {}
    for item, res in items:
        key = (item.kind, item.name, res)
        if key not in best or item.value < best[key][0].value:
            best[key] = (item, res)
    return list(best.values())


def _guess(text: Any) -> str | None:
    """The type of a custom resource, from its limit's values (qmgr checked them against
    the resource's type when they were set)."""
    for kind in entlim.SUMMABLE:
        try:
            entlim.parse(str(text), kind)
            return kind
        except ValueError:
            continue
    return None


def _count_text(queue: str | None, item: Limit, owner: Owner) -> str:
    """PBS's scheduler text for a count limit reached."""
    word = KINDS[item.kind]
    if queue is None:
        if item.kind == "o":
            return "Server job limit has been reached."
        if item.name == GENERIC:
            return f"{word.capitalize()} has reached server running " + (
                "job limit." if item.kind == "u" else "limit.")
        return f"Server job limit reached for {word} {owner.name(item.kind)}"
    if item.kind == "o":
        return f"Queue {queue} job limit has been reached."
    if item.name == GENERIC:
        if item.kind == "u":
            return f"User has reached queue {queue} running job limit."
        if item.kind == "g":
            return f"Group has reached queue {queue} running limit."
        return f"Project has reached queue {queue}'s running limit."
    return f"Queue {queue} job limit reached for {word} {owner.name(item.kind)}"


def _resource_text(queue: str | None, item: Limit, owner: Owner, res: str) -> str:
    """PBS's scheduler text for a resource limit reached."""
    where = "complex" if queue is None else f"queue {queue}"
    word = KINDS[item.kind]
    if item.kind == "o":
        return f"would exceed overall limit on resource {res} in {where}"
    if item.name == GENERIC:
        return (f"Server per-{word} limit reached on resource {res}" if queue is None else
                f"Queue {queue} per-{word} limit reached on resource {res}")
    return f"would exceed {word} {owner.name(item.kind)}'s limit on resource {res} in {where}"
