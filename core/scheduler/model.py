"""What a scheduling cycle reads (`Snapshot`, `Policy`) and returns (`CycleResult`).

The scheduler reads the kernel's objects (Job, Vnode, Queue, Server, Reservation) as the
engine or the simulator keeps them, and answers with plain decisions. It does no I/O: the
caller applies the decisions, fires the hook events and stores the estimates.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..objects import Job, Queue, Reservation, Server, Vnode
from ..scheduling import CycleStats
from ..units import (
    Chunk,
    Place,
    parse_bool,
    parse_duration_cached,
    parse_place,
    parse_select,
    parse_size,
    with_chunk_defaults,
)
from ..values import CHUNK_RESOURCES, RESOURCE_TYPES

#: A job without a walltime (its own, its queue's or the server's default) is planned as
#: running this long, as PBS plans such jobs: it can start now beside the top jobs only on
#: vnodes they will never need, and its vnodes never free up in the calendar.
UNKNOWN_WALLTIME = 5 * 365 * 24 * 3600

#: Vnode states in which a vnode takes no new job now.
UNUSABLE_STATES = frozenset({"offline", "down", "sleep", "busy", "stale", "unknown",
                             "unresolvable", "provisioning", "maintenance", "wait-provisioning"})
#: States a vnode in sleep can be planned from (after a boot delay).
SLEEP = "sleep"


@dataclass
class Policy:
    """A scheduler's policy settings (PBS's names; defaults as PBS's default scheduler)."""

    strict_ordering: bool = False
    backfill: bool = True
    backfill_depth: int = 1
    #: How many queued jobs get estimated.start_time / estimated.exec_vnode each cycle.
    estimate_limit: int = 100
    #: PBS job_sort_formula: an arithmetic expression over job resources (ncpus, mem in
    #: bytes, walltime in seconds, ...), queue_priority and eligible_time; higher runs first.
    job_sort_formula: str | None = None
    #: Seconds a sleeping vnode needs to boot, when no sched_node_availability hook says
    #: when it will be up; the plan never starts a job on it sooner.
    boot_delay: float = 300.0
    #: Vnode order: ``key [HIGH|LOW]``, by this vnode attribute or resource (LOW, ascending,
    #: unless HIGH), then by name; ``last_used_time HIGH`` puts the most recently used first.
    #: ``sort_priority`` is the vnode's Priority (0 when unset); PBS's default sched_config
    #: sorts on it, highest first, as this default does.
    node_sort_key: str | None = "sort_priority HIGH"

    @classmethod
    def from_attributes(cls, attrs: dict[str, Any], strict: bool = False) -> Policy:
        """A policy from PBS-style attribute values (a server's or a sched object's).

        Other attributes are ignored, unless `strict` (a policy of its own, such as a
        `SchedulerInstance`'s), where they are an error. A value of the wrong type raises
        `ValueError` naming the setting."""
        policy = cls()
        for key, value in attrs.items():
            if key.startswith("_") or not hasattr(policy, key):
                if strict:
                    raise ValueError(f"unknown scheduler policy setting {key!r}")
                continue
            if value is None:
                continue
            default = getattr(cls, key, None)
            try:
                if isinstance(default, bool):
                    value = parse_bool(value)
                elif isinstance(default, int):
                    value = int(value)
                elif isinstance(default, float):
                    value = float(value)
            except ValueError:
                raise ValueError(f"scheduler policy setting {key}={value!r} is not a "
                                 f"{type(default).__name__}") from None
            setattr(policy, key, value)
        return policy

    def problem(self) -> str | None:
        """What is out of range in this policy, or None: a replay's site table is checked
        so (a server's sched objects are qmgr's to check, and keep working as they did)."""
        for key in ("backfill_depth", "estimate_limit"):
            value = getattr(self, key)
            if not 0 <= value <= 2**31 - 1:
                return f"{key}={value!r}: expected a whole number from 0 to 2147483647"
        if not 0 <= self.boot_delay <= 1e12:  # (NaN fails both)
            return f"boot_delay={self.boot_delay!r}: expected seconds from 0 to 10^12"
        if self.node_sort_key is not None:
            try:
                parse_node_sort_key(self.node_sort_key)
            except ValueError as exc:
                return str(exc)
        if self.job_sort_formula is not None:
            from .cycle import formula_problem  # (cycle reads this module)

            return formula_problem(str(self.job_sort_formula))
        return None


def parse_node_sort_key(text: Any) -> tuple[str, bool]:
    """``key [HIGH|LOW [total]]`` -> (key, whether highest first); ``total`` (PBS's default:
    the resources_available amount) may follow. ValueError naming what is wrong; PBS's
    ``unused`` and ``assigned`` (re-sorted after every job run) are not supported."""
    words = str(text).split(" ")
    key, direction = words[0], words[1].upper() if len(words) > 1 else ""
    qualifier = words[2].lower() if len(words) > 2 else "total"
    if qualifier in ("unused", "assigned"):
        raise ValueError(f"node_sort_key={text!r}: sorting on the {qualifier} amount is "
                         "not supported (only the total, resources_available)")
    if not key or direction not in ("", "HIGH", "LOW") or qualifier != "total" or (
            len(words) > 3) or (len(words) == 3 and not direction):
        raise ValueError(f"node_sort_key={text!r}: expected 'key', 'key HIGH' or 'key LOW'")
    return key, direction == "HIGH"


def node_sort_order(text: Any) -> tuple[str, bool]:
    """`parse_node_sort_key` of a policy's setting, ('', False) for none or one that
    cannot be read (qmgr and a replay's settings refuse those; one stored before is left
    unsorted)."""
    try:
        return parse_node_sort_key(text) if text else ("", False)
    except ValueError:
        return "", False


@dataclass
class Snapshot:
    """The state a cycle reads."""

    server: Server
    queues: dict[str, Queue]
    vnodes: dict[str, Vnode]
    jobs: Collection[Job]
    reservations: list[Reservation] = field(default_factory=list)
    #: A caller that keeps its `vnodes` dict between cycles, and changes this number
    #: whenever it changes a vnode, lets a scheduler keep what it parsed from them (the
    #: simulator does). None: the vnodes are read afresh every cycle.
    vnodes_version: int | None = None
    #: A caller that keeps its jobs between cycles and notes in one `JobLog` every job
    #: object it adds to `jobs` or takes away lets a scheduler read only what changed since
    #: its last cycle, not every job (the simulator does). None: `jobs` is compared whole.
    job_log: JobLog | None = None
    #: With `vnodes_version`: which vnodes each version changed (its `version` is
    #: `vnodes_version`). A scheduler then reparses only those, and keeps its calendar when
    #: only their states changed. None: any change reparses every vnode.
    vnode_log: VnodeLog | None = None
    #: The custom resources' types (``qmgr create resource``), name -> type: what the run
    #: limits sum a resource as. Empty: the built-in types, and a custom one guessed from
    #: its limit's values.
    resource_types: Mapping[str, str] = field(default_factory=dict)
    #: The custom resources a chunk holds (``flag = h``): a job without a select asks for
    #: them in its one chunk, as PBS's conversion puts them there.
    host_resources: frozenset[str] = frozenset()


class JobLog:
    """The job objects a caller added to its jobs and took away, in order. Objects are
    values: a job that changed is its old object taken away and its new one added.

    A scheduler remembers the `mark` it read up to; at its next cycle it reads the entries
    `since` that mark, or, when they are gone (`forget`) or the log is another, every job.
    The caller forgets the entries all its schedulers have read."""

    __slots__ = ("entries", "base")

    def __init__(self) -> None:
        self.entries: list[tuple[Job, bool]] = []
        self.base = 0  # entries forgotten so far

    @property
    def mark(self) -> int:
        return self.base + len(self.entries)

    def add(self, job: Job) -> None:
        self.entries.append((job, True))

    def remove(self, job: Job) -> None:
        self.entries.append((job, False))

    def since(self, mark: int) -> list[tuple[Job, bool]] | None:
        """The entries after `mark` as (job, added), or None when some are forgotten."""
        if mark < self.base or mark > self.mark:
            return None
        return self.entries[mark - self.base:]

    def forget(self, mark: int) -> None:
        """Drop the entries before `mark` (every reader has read them)."""
        drop = min(max(mark - self.base, 0), len(self.entries))
        del self.entries[:drop]
        self.base += drop


class VnodeLog:
    """The vnodes a caller changed, one entry per change: version N is the N-th change.
    It keeps the last `keep` entries; a scheduler further behind reparses every vnode."""

    __slots__ = ("names", "base", "keep")

    def __init__(self, keep: int = 4096) -> None:
        self.names: list[str] = []
        self.base = 0  # versions forgotten so far
        self.keep = keep

    @property
    def version(self) -> int:
        return self.base + len(self.names)

    def changed(self, name: str) -> None:
        self.names.append(name)
        if len(self.names) > 2 * self.keep:
            drop = len(self.names) - self.keep
            del self.names[:drop]
            self.base += drop

    def since(self, version: int) -> set[str] | None:
        """The vnodes changed after `version`, or None when some of those are forgotten."""
        if version < self.base or version > self.version:
            return None
        return set(self.names[version - self.base:])


@dataclass
class RunDecision:
    """Run `job_id` now on `exec_vnode` (PBS's format: ``(n1:ncpus=2)+(n2:ncpus=2)``)."""

    job_id: str
    exec_vnode: str
    chunks: list[tuple[str, dict[str, int | str]]]
    backfilled: bool = False

    @property
    def vnodes(self) -> list[str]:
        return list(dict.fromkeys(name for name, _ in self.chunks))


@dataclass
class Estimate:
    """When and where a queued job is expected to start (PBS's ``estimated`` resource)."""

    job_id: str
    start_time: int
    exec_vnode: str


@dataclass
class ResvDecision:
    """Confirm a reservation on `resv_nodes`, or deny it (`confirmed` False, with why)."""

    resv_id: str
    confirmed: bool
    resv_nodes: str = ""
    reason: str = ""
    #: The deciding scheduler's partition (``pbs-default`` for default): a reservation in
    #: no partition becomes that one's once confirmed.
    partition: str = ""


@dataclass
class CycleResult:
    run: list[RunDecision] = field(default_factory=list)
    reservations: list[ResvDecision] = field(default_factory=list)
    estimates: dict[str, Estimate] = field(default_factory=dict)
    top_jobs: list[str] = field(default_factory=list)
    #: Jobs that could not run now, with PBS-style comments (``Not Running: ...``).
    comments: dict[str, str] = field(default_factory=dict)
    stats: CycleStats | None = None


# -- parsing with caches (a cycle sees the same select strings over and over) ------------------

@lru_cache(maxsize=4096)
def select_chunks(spec: str) -> tuple[Chunk, ...]:
    """The chunks of a select string (cached; callers only read them)."""
    return tuple(parse_select(spec))


@lru_cache(maxsize=256)
def _place(spec: str) -> Place:
    return parse_place(spec)


CONSUMABLE_SIZES = frozenset({"mem", "vmem", "pmem"})


#: Resource types whose values are never amounts: matched as text.
_TEXT_TYPES = frozenset({"boolean", "string", "string_array"})
#: What a chunk asks of its job's layout, not of a vnode: MPI ranks and threads per chunk
#: (the job's nodefile), chunks in all. Neither an amount nor matched (PBS's scheduler
#: checks only the resources of its sched_config ``resources`` line, which has none).
LAYOUT_RESOURCES = frozenset({"mpiprocs", "ompthreads", "nchunk"})


def resource_type(name: str, types: Mapping[str, str] | None = None) -> str | None:
    """A resource's type: PBS's own resources' (`values.RESOURCE_TYPES`), else the one
    `types` (the custom resources', ``qmgr create resource``) gives, else None."""
    return RESOURCE_TYPES.get(name) or (types.get(name) if types else None)


def resource_amount(name: str, value: Any, types: Mapping[str, str] | None = None
                    ) -> int | None:
    """The integer amount of a consumable resource value, or None when it is not one
    (sizes become bytes; ``mem=4gb`` -> 4294967296). A resource whose type is known
    (PBS's own, or a custom one in `types`) is read by it: a boolean or string one is
    never an amount (``rack=1`` is a rack's name), a size one needs no unit letter
    (``scratch=10g``); one of no known type by the value's shape. `LAYOUT_RESOURCES` are
    never amounts."""
    if isinstance(value, bool) or name in LAYOUT_RESOURCES:
        return None
    kind = resource_type(name, types)
    if kind in _TEXT_TYPES:
        return None
    if kind == "size" and isinstance(value, str):
        try:
            return parse_size(value)
        except ValueError:
            return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        if name in CONSUMABLE_SIZES or value[-1:].lower() in ("b", "w"):
            try:
                return parse_size(value)
            except ValueError:
                return None
        if value.isdigit():
            return int(value)
    return None


def match_text(name: str, value: Any, types: Mapping[str, str] | None = None) -> str:
    """The text a value that is no amount is matched by: a boolean one's as PBS's
    scheduler writes it (``true``, ``t``, ``1`` -> ``True``), others as written."""
    if isinstance(value, bool) or resource_type(name, types) == "boolean":
        try:
            return "True" if parse_bool(value) else "False"
        except ValueError:
            pass
    return str(value)


def job_select(job: Job, defaults: tuple[Mapping[str, Any] | None, ...] = (),
               host_resources: Iterable[str] = ()) -> tuple[Chunk, ...]:
    """The job's chunks as the scheduler places them (PBS's ``schedselect``): the one the
    server stored with it when it completed its request (`schedselect`; a default_chunk
    changed later reaches it when a qalter of its resources or a qmove completes it
    again), else its select,
    else one chunk of its job-wide host-level resources (PBS's conversion), each chunk
    given what it does not ask for of the ``default_chunk`` tables in `defaults` (its
    queue's, then the server's) and ncpus=1 when none of them says: a chunk never holds no
    cpus unless it asks for ``ncpus=0``. `host_resources` are the custom resources with
    flag h, which the conversion takes too."""
    stored = job.get("schedselect")
    if stored:  # written by the server when the request was completed, as PBS keeps it
        return select_chunks(str(stored))
    res = job.Resource_List
    spec = res["select"]
    if spec:
        return with_chunk_defaults(select_chunks(str(spec)), defaults)
    # PBS's conversion of a job without one: one chunk of its job-wide host-level
    # resources (``-l ncpus=2,arch=linux`` -> ``1:arch=linux:ncpus=2``).
    chunk: dict[str, int | str] = {"ncpus": res["ncpus"] if res["ncpus"] is not None else 1}
    for key in ("mem", "vmem", "ngpus", *CONVERTED_RESOURCES, *host_resources):
        if res[key] is not None:
            chunk.setdefault(key, res[key])
    return with_chunk_defaults((Chunk(1, chunk),), defaults)


def schedselect(chunks: Iterable[Chunk]) -> str:
    """A job's `job_select` chunks as PBS writes its ``schedselect`` (``2:ncpus=1:mem=50mb``;
    a value holding what a select separates quoted)."""
    return "+".join(str(chunk) for chunk in chunks)


#: The host-level resources of PBS's conversion beyond ncpus, mem, vmem and ngpus (whose
#: order in the chunk stays the one pbsplug always wrote).
CONVERTED_RESOURCES = tuple(sorted(CHUNK_RESOURCES - {"ncpus", "mem", "vmem", "ngpus"}))


def job_place(job: Job) -> Place:
    spec = job.Resource_List["place"]
    return _place(str(spec)) if spec else Place()


def job_walltime(job: Job, queue: Queue | None, server: Server) -> int | None:
    """Seconds of the job's walltime: its own, else the queue's default, else the server's."""
    for source in (job.Resource_List, queue.resources_default if queue is not None else None,
                   server.resources_default):
        if source is not None and (value := source["walltime"]) is not None:
            return parse_duration_cached(value)
    return None


def format_exec_vnode(chunks: list[tuple[str, dict[str, Any]]]) -> str:
    """PBS's exec_vnode: ``(n1:ncpus=2:mem=4gb)+(n2:ncpus=2)``."""
    parts = []
    inners: dict[int, str] = {}  # chunks sharing one mapping (alike chunks): joined once
    last_name = last_res = None
    part = ""
    for name, res in chunks:
        # (a vnode's alike chunks come one after the other: their text is made once)
        if name is not last_name or res is not last_res:
            inner = inners.get(id(res))
            if inner is None:
                inner = inners[id(res)] = ":".join(f"{k}={v}" for k, v in res.items())
            part = f"({name}:{inner})" if inner else f"({name})"
            last_name, last_res = name, res
        parts.append(part)
    return "+".join(parts)
