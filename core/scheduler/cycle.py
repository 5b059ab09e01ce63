"""One scheduling cycle: PBS's default policy with backfill, estimates and reservations.

The cycle, in order:

1. **Slice.** The instance sees the queues and vnodes of its partitions (the ``default``
   instance: those in no partition, or in one no other instance owns), the jobs of those
   queues, and the server's settings. A partition comes from the `sched_partition` hook,
   else the object's ``partition`` attribute.
2. **Calendar.** Running jobs book their vnodes until ``stime + walltime``; confirmed and
   running reservations book theirs for their window; a vnode that cannot take a job now is
   booked until it can: one that the `sched_node_availability` hook says will be free at T
   until T (the latest answer when several plugins answer); else a sleeping vnode until
   ``now + boot_delay``, and any other (offline, down, busy) for ever.
3. **Reservations.** Each unconfirmed reservation, in submission order, is confirmed on the
   first vnodes free for its whole window, or denied.
4. **Order.** Queued jobs (state Q, not held, Execution_Time passed, queue started) sort by
   queue Priority (higher first), then job_sort_formula (higher first) or submit time; then
   the `sched_job_order` hooks may reorder them and name starving jobs.
5. **Run, protect, estimate.** Each job in order starts now when its chunks fit now without
   touching a hard booking. A job that does not fit becomes a *top job* while there are
   fewer than ``backfill_depth`` of them (under strict_ordering, or when it is starving): it
   gets the earliest start at which it fits (its shadow), booked hard, so that later jobs
   start now only if they end before it or use other vnodes (backfill). Under
   strict_ordering without backfill nothing after the first blocked job starts. The first
   ``estimate_limit`` jobs that do not start get ``estimated.start_time`` and
   ``estimated.exec_vnode``; the estimates of non-top jobs are soft bookings.

Placement: chunks go on vnodes in the policy's vnode order, first fit; ``place`` free lets
chunks share vnodes, pack puts them all on one host, scatter each on its own host, vscatter
each on its own vnode; exclusivity per vnode follows `pbsplug.exclusivity`. When the default
placement finds room, now or at a planned start, the `sched_node_placement` hook may choose
other vnodes among the candidates (`Placement.fit` runs this first fit over a subset), or
hold the job (``[]``; a plan then tries the next start).
"""

from __future__ import annotations

import ast
import bisect
import heapq
import itertools
import logging
import math
import operator
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from ..objects import Job, Queue, Reservation, Server, Vnode, is_route_queue
from ..scheduling import CycleStats, JobOrder, Placement
from ..units import (
    EXCL,
    EXCLHOST,
    SHARED,
    Chunk,
    Place,
    chunk_defaults,
    default_chunks,
    exclusivity,
    format_size,
    kilobytes,
    parse_bool,
    parse_duration,
    parse_exec_vnode,
)
from ..values import RESOURCE_TYPES
from .calendar import INFINITY, Booking, Calendar
from .model import (
    CONSUMABLE_SIZES,
    CONVERTED_RESOURCES,
    LAYOUT_RESOURCES,
    SLEEP,
    UNKNOWN_WALLTIME,
    UNUSABLE_STATES,
    CycleResult,
    Estimate,
    JobLog,
    Policy,
    ResvDecision,
    RunDecision,
    Snapshot,
    format_exec_vnode,
    job_place,
    job_select,
    job_walltime,
    match_text,
    node_sort_order,
    resource_amount,
    resource_type,
)
from .runlimits import RunLimits

log = logging.getLogger("pbsplug.scheduler")
_T = TypeVar("_T")

DEFAULT_PARTITION = "pbs-default"
#: The Resource_List entries a job's placement depends on (besides its walltime).
_SHAPE_RESOURCES = ("select", "place", "ncpus", "mem", "vmem", "ngpus")
#: The first item of a shape read from a job's stored schedselect (`_job_info`): never a
#: request's select (which starts with a count).
_STORED = "#schedselect"
_RUNNING_STATES = frozenset({"R", "E", "S", "U"})
_RESV_UNCONFIRMED = frozenset({"UNCONFIRMED", "RESV_UNCONFIRMED", "1"})
_RESV_HOLDING = frozenset({"CONFIRMED", "RESV_CONFIRMED", "2", "RUNNING", "RESV_RUNNING", "5",
                           "DEGRADED", "RESV_DEGRADED", "10", "BEING_ALTERED"})


@dataclass
class _VnodeInfo:
    name: str
    host: str
    capacity: dict[str, int]
    match: dict[str, str]
    sharing: str
    usable_now: bool
    plan_from: float          # earliest time a job may start on it (INFINITY: never)
    obj: Vnode
    sort: tuple = ()          # its place under node_sort_key, as last read (`_sort_value`)


@dataclass
class _JobInfo:
    job: Job
    chunks: list[tuple[dict[str, int], dict[str, str], dict[str, Any]]]  # per chunk instance
    place: Place
    walltime: int | None
    shape: tuple
    smallest: int             # ncpus of the job's smallest chunk
    ncpus: int = 0            # ncpus of all its chunks
    alike: bool = False       # all its chunks the same, matching nothing (`_assign_alike`)
    key: tuple = field(default_factory=tuple)
    #: For an alike job, its chunk and place: jobs of one kin differ only in how many
    #: chunks they ask for and for how long (`_run_jobs` rules out some without placing).
    kin: tuple | None = None
    #: Alike chunks of one ncpus each and nothing else, placed anywhere (``free``): most of
    #: a trace, placed now from counts (`_fill`, `_held_through`).
    one_cpu: bool = False
    #: How long it is planned for: its walltime, else UNKNOWN_WALLTIME. (A field, not a
    #: property: the run loop reads it for every job it looks at.)
    duration: int = UNKNOWN_WALLTIME
    #: Its chunk instances are one object (a select of one chunk, ``N:ncpus=1``): they
    #: show alike in exec_vnode (`_shown_chunks`).
    one_chunk: bool = False

    def end(self, start: float) -> float:
        """When the job started at `start` frees its vnodes (never, without a walltime)."""
        return start + self.walltime if self.walltime is not None else INFINITY


@dataclass
class _ResvWorld:
    """A running reservation as its jobs see it in one cycle (`Scheduler._resv_world`)."""

    allocation: dict[str, dict[str, int]]  # its vnodes, with its amounts of each
    outside: set[str]  # the other vnodes of its hosts
    #: Its running jobs: (id, place, chunks on its vnodes).
    mine: list[tuple[str, Place, list]] = field(default_factory=list)
    #: Other reservations' running jobs' chunks on its vnodes.
    neighbours: list[list] = field(default_factory=list)
    #: Jobs of no reservation running on its vnodes: (id, place, all their chunks).
    loose: list[tuple[str, Place, list]] = field(default_factory=list)


def _whole(share: dict[str, int], capacity: dict[str, int]) -> bool:
    """Whether a reservation's `share` of a vnode is all of it (nothing, for the rest of a
    host it holds exclhost)."""
    return not share or share.get("ncpus", 0) >= capacity.get("ncpus", 0)


class _TopPlan(NamedTuple):
    """The first top job's plan, left booked from one cycle to the next (`_Kept.top`)."""

    job_id: str
    shape: tuple
    start: float
    chunks: list[tuple[str, dict[str, int]]]
    made: list[tuple[str, Booking]]            # its bookings
    changes: int                               # `_Kept.changes` when it was made
    #: Its vnodes -> (start, True), as a cycle notes them in `_future_hard` (made once).
    future: dict[str, tuple[float, bool]]
    last_rank: int                             # the last of its vnodes' ranks


class _Kept:
    """What a scheduler keeps from one cycle to the next, so that a cycle costs what changed
    since the last one rather than the whole machine and queue: the vnodes' parsed
    attributes (while the caller says they are the same, `Snapshot.vnodes_version`), a
    calendar holding the running jobs' bookings (a job's are added when it starts and taken
    back when it ends), and each queued job's parsed request (while the job object is the
    same). What one cycle books (starts, top jobs, estimates) is taken back at its end."""

    def __init__(self, source: dict[str, Vnode], version: int | None,
                 infos: dict[str, _VnodeInfo], calendar: Calendar, server: Server,
                 queues: dict[str, Queue]):
        self.source = source
        #: The server and every queue object: their defaults shape every job's request and
        #: a queue's partition says whose its jobs are, so another object (even with the
        #: same attributes) makes the next cycle start afresh.
        self.server = server
        self.all_queues = dict(queues)
        #: Those of them this instance owns (`Scheduler.owns`).
        self.owned: dict[str, Queue] = {}
        #: The last cycle's time: a clock gone back (bookings counted as started may not
        #: have) makes the next cycle start afresh.
        self.now = -INFINITY
        self.version = version
        self.infos = infos
        self.order = list(infos.values())
        self.usable = [v for v in self.order if v.usable_now]
        #: The usable vnodes that had room now for a job at the last cycle's end, in order,
        #: or None (every usable vnode); the vnodes the calendar opened since
        #: (`Calendar.opened`) join them when a cycle first needs them.
        self.open: list[_VnodeInfo] | None = None
        #: `Calendar.closed` when `open` was last narrowed to the vnodes with room.
        self.closed_mark = -1
        self.unusable = [v for v in self.order if not v.usable_now]
        self.hosts: dict[str, list[_VnodeInfo]] = {}
        for info in self.order:
            self.hosts.setdefault(info.host, []).append(info)
        self.rank = {v.name: n for n, v in enumerate(self.order)}
        self.sharings = {v.sharing for v in self.order}
        #: place -> whether no vnode's sharing makes a job of it exclusive (`_all_shared`).
        self.shared_places: dict[Place, bool] = {}
        self.calendar = calendar
        #: The queues owned when the server and they were found to set no run limit
        #: (`RunLimits.build`), else None.
        self.unlimited: set[str] | None = None
        #: job id -> (job object, key, bookings) of the running jobs booked.
        self.running: dict[str, tuple[Job, tuple, list[tuple[str, Booking]]]] = {}
        #: job id -> job object of every running job of the instance's queues, booked here
        #: or not (on another partition's vnodes): what its run limits count.
        self.counted: dict[str, Job] = {}
        #: vnode -> its unavailability booking.
        self.unavail: dict[str, Booking] = {}
        #: A job shape -> whether it fits the vnodes with nothing on them
        #: (`Scheduler._can_ever_run`), and `Scheduler._holding_set`'s answer.
        self.ever_memo: dict[tuple, bool] = {}
        self.set_memo: dict[tuple, tuple[bool, str | None]] = {}
        #: queue name -> its jobs' default_chunk tables (`Scheduler._chunk_defaults`): the
        #: server and queue objects are these for as long as this state lives.
        self.defaults_seen: dict[str | None, tuple[tuple[Any, ...], tuple]] = {}
        #: What `_fill` found of each vnode's least room from now on (`Scheduler._lows`),
        #: and the usable vnodes' losses summed (`Scheduler._held_through`): true while
        #: the vnodes' bookings stay as they were (`Calendar.touched` says which changed);
        #: the sums also while no vnode became usable or stopped being so.
        self.lows: dict[str, tuple[int, list[int]]] = {}
        self.drops: _Drops | None = None
        #: job id -> (start, end, bookings, exec_vnode) of the jobs the last cycle started.
        self.adopt: dict[str, tuple[float, float, list[tuple[str, Booking]], str]] = {}
        #: Changes to the kept bookings other than adopting started jobs, so far.
        self.changes = 0
        #: The first top job's plan, left booked. While nothing else changed and it still
        #: heads the queue, its plan is the same (jobs started since kept out of its way).
        self.top: _TopPlan | None = None
        #: The latest end of the running jobs' bookings taken back since that plan was
        #: made, when that is all that changed, and the first of their vnodes in vnode
        #: order: the plan still holds if the job still cannot start sooner, and the room
        #: they leave at its start is on vnodes its first fit never reached (`_sticky_top`).
        self.released = -INFINITY
        self.released_rank = len(self.order)
        #: The ncpus its job lacked, at every instant before its start, when the plan was
        #: last checked against jobs ended (a count of one-cpu chunks: `_released_harmless`),
        #: and the ncpus of the bookings taken back as ends since: while these are fewer,
        #: the check holds again without sweeping.
        self.slack = 0
        self.released_cpus = 0
        self.empty: Calendar | None = None
        #: id(job) -> (job object, queue object, queue name, info or None when not
        #: eligible), for the jobs not running.
        self.queued: dict[int, tuple[Job, Queue | None, str, _JobInfo | None]] = {}
        #: id(job) -> (job object, running or not; None: another instance's queue).
        self.known: dict[int, tuple[Job, bool | None]] = {}
        #: The caller's `JobLog` and the mark read up to: while both hold (and no
        #: job_sort_formula makes keys change with time), a cycle reads only the log's
        #: entries since, not every job.
        self.log: JobLog | None = None
        self.log_mark = 0
        #: The eligible queued jobs in order, as (key, arrival, info), kept sorted; the
        #: arrival number breaks ties as a stable sort of the caller's jobs would.
        self.ranked: list[tuple[tuple, int, _JobInfo]] = []
        self.rank_entry: dict[int, tuple[tuple, int, _JobInfo]] = {}  # id(job) -> entry
        self.arrivals = 0
        #: The same entries by the job's shape (request and walltime), each list sorted
        #: (`_walk`): a queue of thousands holds a few dozen shapes.
        self.by_shape: dict[tuple, list[tuple[tuple, int, _JobInfo]]] = {}
        #: The infos put in order since the last cycle (`_run_jobs` tells at once which
        #: can never run).
        self.fresh: list[_JobInfo] = []
        #: id(job) -> job, for queued jobs with an Execution_Time: eligible from then on.
        self.waiting: dict[int, Job] = {}
        #: Running jobs without a start time (stime), or past their walltime: each cycle
        #: books them from its now.
        self.floating: set[str] = set()
        #: (end, job id) of the running jobs' bookings: an end passed (a job running past
        #: its walltime) is booked again.
        self.expiry: list[tuple[float, str]] = []


class _Ranked(Sequence):
    """The infos of the kept ranking's entries, read in place (a cycle does not copy a
    queue of thousands to look at a few of its jobs)."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[tuple[tuple, int, _JobInfo]]):
        self.entries = entries

    def __len__(self) -> int:
        return len(self.entries)

    def __getitem__(self, at):  # an index only (a cycle never slices it)
        return self.entries[at][2]

    def __iter__(self) -> Iterator[_JobInfo]:
        return (entry[2] for entry in self.entries)


def resv_state(resv: Reservation) -> str:
    return str(resv.reserve_state or "UNCONFIRMED").upper()


class Scheduler:
    """A scheduler instance: a name, the partitions it owns, its policy, and the plugins'
    scheduler hooks (``PluginSet.hook``, or None)."""

    def __init__(self, name: str = "default", partitions: Iterable[str] = (),
                 policy: Policy | None = None, hooks: Any = None,
                 claimed: Iterable[str] = (), scheduling: bool = True, iteration: int = 600):
        self.name = name
        self.partitions = frozenset(partitions)
        self.policy = policy or Policy()
        self.hooks = hooks
        #: PBS's ``scheduling`` and ``scheduler_iteration``: whether the engine runs this
        #: instance's cycles, and how many seconds apart at most (the library ignores both).
        self.scheduling = scheduling
        self.iteration = iteration
        #: Partitions other instances own (the default instance leaves them alone).
        self.claimed = frozenset(claimed)
        self._formula = _compile_formula(self.policy.job_sort_formula)
        self._impl_cache: dict[str, list] = {}
        self._has_partition_hook = bool(self._impls("sched_partition"))
        #: Per running reservation, the jobs started in it this cycle: (place, chunks).
        self._resv_started: dict[str, dict[str, tuple[Place, list]]] = {}
        #: Per running reservation, its vnodes and the jobs on them (`_resv_world`).
        self._resv_worlds: dict[str, _ResvWorld] = {}
        self._kept: _Kept | None = None
        self._undo: list[tuple[str, Booking]] | None = None
        #: During the run loop (`_counting`), the ncpus free now on the usable vnodes (a
        #: job needing more is passed over at once).
        self._free_now = 0
        self._counting = False
        #: After `_fit` of alike chunks found no room over the whole of its vnodes: the most
        #: chunks of that kin they hold over the window (first fit of alike chunks takes
        #: all it can from each vnode in turn). None when it did not get that far.
        self._most: int | None = None
        #: False for a caller that reads only the decisions (the simulator): without
        #: estimates, a cycle stops walking the queue once no cpu is left free, and the
        #: jobs after that get no comment (nor a `Can Never Run` one until a later cycle
        #: reaches them).
        self.explain = True
        self._shapes: dict[tuple, tuple] = {}
        #: resv_nodes text -> what it holds per vnode (`_held_per_vnode`).
        self._resv_held: dict[str, list[tuple[str, dict[str, int]]]] = {}
        #: The custom resources' types the kept state was read with (`Snapshot`), and the
        #: boolean resources (a vnode without one has it False).
        self._types: dict[str, str] = {}
        self._booleans = _booleans({})
        #: The custom resources with flag h, in order (`Snapshot.host_resources`).
        self._host: tuple[str, ...] = ()
        #: The last cycle that made estimates: job id -> (its planned chunks, its request's
        #: chunks, the exec_vnode text made of them, whether no host could be the job's
        #: whole then) (`_estimate`); this cycle's so far.
        self._texts: dict[str, tuple] = {}
        self._texts_made: dict[str, tuple] = {}

    def settings(self) -> tuple:
        """What the instance was made with: a caller keeps an instance (and so what it keeps
        between cycles) while a new one would have the same settings."""
        return (self.name, self.partitions, self.policy, self.hooks, self.claimed,
                self.scheduling, self.iteration, self.explain)

    # -- hooks ------------------------------------------------------------------------------------
    def _impls(self, name: str) -> list:
        """The plugins' implementations of scheduler hook `name`, in plugin-name order."""
        if self.hooks is None:
            return []  # (no plugins: asked several times a cycle, tens of thousands of cycles)
        impls = self._impl_cache.get(name)
        if impls is None:
            impls = sorted(getattr(self.hooks, name).get_hookimpls(),
                           key=lambda i: i.plugin_name)
            self._impl_cache[name] = impls
        return impls

    def _answers(self, name: str, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        """(plugin, answer) of each plugin in turn. A plugin whose hook raises is logged and
        skipped: one broken plugin never stops scheduling."""
        for impl in self._impls(name):
            try:
                answer = impl.function(**kwargs)
            except (Exception, SystemExit):  # sys.exit() in a hook must not end the server
                log.exception("%s of %s failed; its answer is ignored", name, impl.plugin_name)
                continue
            yield impl.plugin_name, answer

    def _first(self, name: str, **kwargs: Any) -> Any:
        """The first answer that is not None (a firstresult hook)."""
        return next((a for _, a in self._answers(name, **kwargs) if a is not None), None)

    def partition_of(self, obj: Queue | Vnode) -> str | None:
        if self._has_partition_hook:
            answer = self._first("sched_partition", obj=obj)
            if answer is not None:
                return answer
        part = obj.partition
        return None if part in (None, "", DEFAULT_PARTITION) else str(part)

    def owns(self, obj: Queue | Vnode) -> bool:
        return self.owns_partition(self.partition_of(obj))

    def owns_partition(self, part: str | None) -> bool:
        """Whether objects in partition `part` (None or ``pbs-default``: none) are this
        instance's."""
        if part in ("", DEFAULT_PARTITION):
            part = None
        if self.name == "default":
            return part is None or part not in self.claimed
        return part is not None and part in self.partitions

    def slice(self, snap: Snapshot) -> Snapshot:
        """The part of `snap` this instance decides about: its queues, their jobs, its
        vnodes, and the reservations (a cycle of the slice decides as one of the whole).
        What a scheduler in another process needs to be sent."""
        self._impl_cache = {}
        self._has_partition_hook = bool(self._impls("sched_partition"))
        queues = {n: q for n, q in snap.queues.items() if self.owns(q)}
        return Snapshot(snap.server, queues,
                        {n: v for n, v in snap.vnodes.items() if self.owns(v)},
                        [j for j in snap.jobs if j.queue in queues], snap.reservations,
                        resource_types=snap.resource_types,
                        host_resources=snap.host_resources)

    # -- the cycle ------------------------------------------------------------------------------
    def cycle(self, snap: Snapshot, now: float | None = None) -> CycleResult:
        now = time.time() if now is None else now
        t0 = time.perf_counter()
        self._impl_cache = {}
        self._set_sizes: dict[str, dict[str | None, int]] = {}  # see _placement_sets
        #: Inside a reservation, its vnodes and what it holds of each (`_a_set_holds`).
        self._set_world: dict[str, dict[str, int]] | None = None
        if snap.resource_types != self._types or \
                tuple(sorted(snap.host_resources)) != self._host:
            # Values are read by their resources' types: what was read by others is not
            # kept (a custom resource made, deleted or of another type or flag; rare).
            self._types = dict(snap.resource_types)
            self._host = tuple(sorted(snap.host_resources))
            self._booleans = _booleans(self._types)
            self._shapes.clear()
            self._resv_held.clear()
            self._kept = None
        self._has_partition_hook = bool(self._impls("sched_partition"))
        self._resv_started = {}
        self._resv_worlds = {}
        stats = CycleStats(self.name, now)
        if self._impls("sched_cycle_begin"):
            for _ in self._answers("sched_cycle_begin", sched=self.name, now=now):
                pass
        result = CycleResult()
        if self.name != "default" and not self.partitions:
            log.warning("Scheduler does not contain a partition")
            stats.duration = time.perf_counter() - t0
            result.stats = stats
            self._cycle_end(stats)
            return result

        kept = self._kept
        same_queues = kept is not None and len(kept.all_queues) == len(snap.queues) and \
            not any(kept.all_queues.get(n) is not q for n, q in snap.queues.items())
        # The same queue objects are owned as they were (no partition hook: `kept` is
        # started afresh with one).
        queues = kept.owned if kept is not None and same_queues and \
            not self._has_partition_hook else {
            n: q for n, q in snap.queues.items() if self.owns(q)}
        if (kept is None or snap.vnodes_version is None or kept.source is not snap.vnodes
                or kept.server is not snap.server or self._has_partition_hook
                or now < kept.now or not same_queues
                or (kept.version != snap.vnodes_version
                    and not self._refresh_states(kept, snap, now))):
            vnodes = self._vnode_infos([v for v in snap.vnodes.values() if self.owns(v)],
                                       now, snap.server)
            kept = self._kept = _Kept(snap.vnodes, snap.vnodes_version, vnodes,
                                      Calendar({n: v.capacity for n, v in vnodes.items()}, now),
                                      snap.server, snap.queues)
            kept.owned = queues
        else:
            vnodes = kept.infos
            self._plan_unusable(kept.unusable, vnodes, now)
        if len(self._shapes) > 4096:  # distinct requests seen over months of cycles
            self._shapes.clear()
        kept.now = now
        self.vnodes = vnodes
        self.order = kept.order
        self.hosts = kept.hosts
        self.calendar = kept.calendar
        self.calendar.now = now
        self._rank = kept.rank
        self._room = self.calendar.room_now[0]  # ncpus free on each vnode now
        self._open: list[_VnodeInfo] | None = None  # see _now_candidates
        self._open_mark = -1  # `calendar.changes` when `_open` was last looked at
        # `calendar.closed` when `_open` was last narrowed: the last cycle's, for the list it
        # left (while no vnode closed since, its vnodes and those opened since all have room).
        self._closed_mark = kept.closed_mark
        #: What `_fill` found of each vnode's least room from now on, for the jobs placed
        #: now: where its instants after now begin among its instants (the first: it is
        #: read only while no change is due by now), and the least room up to each; a
        #: vnode's is forgotten when it is booked or taken back (`_forget_touched`: its
        #: room and instants change only then), the others' stay true, cycle to cycle.
        self._lows = kept.lows
        #: Placement shape -> (window length, earliest start) of each estimate made this
        #: cycle (`_earliest`): room only shrinks during a cycle, so a job of the same shape
        #: needing as long or longer starts no sooner.
        self._floors: dict[tuple, list[tuple[float, float]]] = {}
        #: smallest chunk -> (`calendar.changes` then, `_open` narrowed to room for it)
        self._open_by: dict[int, tuple[int, list[_VnodeInfo]]] = {}
        self._open_room: dict[int, int] = {}  # smallest chunk -> ncpus free on those vnodes
        self.now = now
        self._ever_memo, self._set_memo = kept.ever_memo, kept.set_memo
        self._defaults_seen = kept.defaults_seen
        self._now_cache: dict[str, tuple[dict[str, int], bool] | None] = {}
        #: Vnodes with a hard booking still to come: (the earliest such start, whether all
        #: of them start then).
        self._future_hard: dict[str, tuple[float, bool]] = {}
        #: What a vnode has free from now through its one start to come (`_free`).
        self._cross_cache: dict[str, tuple[dict[str, int], bool] | None] = {}
        self._undo = []
        self._started: dict[str, tuple[float, float, list[tuple[str, Booking]], str]] = {}
        #: Jobs a `sched_node_placement` answer of [] kept from starting now: by which plugin.
        self._placement_held: dict[str, str] = {}
        self._texts_made = {}
        try:
            entries = self._log_entries(kept, snap)
            if entries is None:  # every job read
                running, queued = self._split_jobs(kept, snap, queues)
                self._book_kept(kept, running, snap, now)
            else:  # only what changed since the last cycle
                running, gone, queued, gone_queued = self._split_log(kept, entries, queues)
                self._book_kept(kept, running, snap, now, gone)
            resv_queues = self._book_reservations_held(snap.reservations, now)
            result.reservations = self._confirm_reservations(snap, now)
            if entries is None:
                self._rank_all(kept, self._queued_infos(kept, queued, snap, queues, now))
            else:
                self._queued_changes(kept, queued, gone_queued, snap, queues, now)
            kept.log = snap.job_log
            kept.log_mark = snap.job_log.mark if snap.job_log is not None else 0
            order, starving = self._order(kept.ranked, now)
            self._ranked_order = not self._impls("sched_job_order")
            # (The server and queue objects are the kept state's own: while none of those
            # this instance owns sets a limit, no cycle of it needs to look again.)
            self._limits = None if kept.unlimited == queues.keys() else RunLimits.build(
                snap.server, queues, kept.counted.values(), snap.resource_types)
            kept.unlimited = set(queues) if self._limits is None else None
            # The first top job's plan is kept for the next cycle, and used, only when
            # nothing one cycle alone weighs on: no job a hook names starving (it goes
            # first, or is top only while named); no reservation (booked for this cycle
            # only); no run limit (the top job may be held by one next time); no placement
            # hook (it may answer otherwise next time); and not when a
            # plan is made only if a later job needs it (estimate_limit 0) while comments
            # are read (they would tell when).
            self._may_keep_top = not starving and not snap.reservations and \
                self._limits is None and not self._impls("sched_node_placement") and \
                (self.policy.estimate_limit > 0 or not self.explain)
            self._sticky = self._sticky_top(kept, order, snap, now)
            self._sticky_used = False
            self._fresh_top: tuple[str, tuple, float, list[tuple[str, dict[str, int]]],
                                   list[tuple[str, Booking]]] | None = None
            stats.jobs_considered = len(order)
            self._run_loop(order, starving, resv_queues, snap, now, result, stats)
        except BaseException:
            # What a cycle that failed half way kept is half brought up to date (a caller
            # sets the bad job aside and runs again): the next cycle starts afresh.
            self._kept = None
            raise
        finally:
            self._floors = {}  # (valid only while this cycle's bookings stand)
            if self._texts_made:  # (a cycle without estimates leaves the last ones')
                self._texts, self._texts_made = self._texts_made, {}
            # A job started now is running at the next cycle, on the same vnodes until the
            # same end: its bookings stay, for that cycle to adopt.
            fresh = getattr(self, "_fresh_top", None)
            kept_count = sum(len(started[2]) for started in self._started.values()) + (
                len(fresh[4]) if fresh is not None else 0)
            if len(self._undo) > kept_count:  # (else all it booked stays: most cycles)
                keep = {id(b) for started in self._started.values() for _, b in started[2]}
                if fresh is not None:
                    keep.update(id(b) for _, b in fresh[4])
                self.calendar.unbook_all(entry for entry in reversed(self._undo)
                                         if id(entry[1]) not in keep)
            kept.adopt = self._started
            if self._open is not None:
                kept.open = self._open  # (a list no one changes: narrowed into new ones)
                kept.closed_mark = self._closed_mark
            kept.fresh = []
            self._undo = None
            if kept.top is not None and not getattr(self, "_sticky_used", False):
                self.calendar.unbook_all(kept.top.made)
                kept.top = None
            if fresh is not None:
                job_id, shape, start, chunks, made = fresh
                kept.top = _TopPlan(
                    job_id, shape, start, chunks, made, kept.changes,
                    dict.fromkeys(map(_FIRST, made), (start, True)),
                    max(map(kept.rank.__getitem__, map(_FIRST, made)), default=-1))
                kept.released, kept.released_rank = -INFINITY, len(kept.order)
                kept.slack = kept.released_cpus = 0
        stats.duration = time.perf_counter() - t0
        result.stats = stats
        self._cycle_end(stats)
        return result

    def _split_jobs(self, kept: _Kept, snap: Snapshot, queues: dict[str, Queue]
                    ) -> tuple[list[Job], list[Job]]:
        """The running and the other jobs of this instance's queues. A job object seen in
        the last cycle is where it was (objects are values: a changed job is a new one),
        which a simulator's thousands of unchanged jobs per cycle are spared reading."""
        known = kept.known
        fresh: dict[int, tuple[Job, bool | None]] = {}
        running: list[Job] = []
        queued: list[Job] = []
        for job in snap.jobs:
            key = id(job)
            entry = known.get(key)
            if entry is None or entry[0] is not job:
                mine = job.queue in queues
                entry = (job, (job.job_state in _RUNNING_STATES) if mine else None)
            fresh[key] = entry
            if entry[1] is True:
                running.append(job)
            elif entry[1] is False:
                queued.append(job)
        kept.known = fresh
        return running, queued

    def _log_entries(self, kept: _Kept, snap: Snapshot) -> list[tuple[Job, bool]] | None:
        """The job log's entries since this scheduler's last cycle, when a cycle may read
        only those: the same log, nothing forgotten, and keys that do not change with time
        (no job_sort_formula). None: read every job. (Another queue object starts the kept
        state afresh, with no log read yet.)"""
        log = snap.job_log
        if log is None or kept.log is not log or self._formula is not None:
            return None
        return log.since(kept.log_mark)

    def _split_log(self, kept: _Kept, entries: list[tuple[Job, bool]],
                   queues: dict[str, Queue]
                   ) -> tuple[list[Job], dict[str, Job], list[Job], list[Job]]:
        """The log's entries as the running jobs added, the running ones taken away (job
        id -> object), and the same for the other jobs of this instance's queues. An object
        added and taken away again since the last cycle is neither."""
        added: dict[int, Job] = {}
        removed: dict[int, Job] = {}
        for job, add in entries:
            key = id(job)  # alive: the log holds it
            if add:
                if removed.pop(key, None) is None:
                    added[key] = job
            elif added.pop(key, None) is None:
                removed[key] = job
        running: list[Job] = []
        queued: list[Job] = []
        for job in added.values():  # (`get`: no attribute lookup that fails first)
            if job.get("queue") in queues:
                (running if job.get("job_state") in _RUNNING_STATES else queued).append(job)
        gone: dict[str, Job] = {}
        gone_queued: list[Job] = []
        for key, job in removed.items():
            if key in kept.queued or key in kept.waiting:
                gone_queued.append(job)
            elif job.id in kept.running or job.id in kept.counted:
                gone[job.id] = job
        return running, gone, queued, gone_queued

    def _book_kept(self, kept: _Kept, jobs: list[Job], snap: Snapshot, now: float,
                   gone: dict[str, Job] | None = None) -> None:
        """The kept calendar brought up to date: vnodes not up yet booked until they are,
        running jobs booked until their walltime ends, and what is gone taken back.

        `jobs` are all the running jobs, or, with `gone` (the job objects taken away since
        the last cycle, by id), those added since."""
        calendar = kept.calendar
        before = calendar.changes
        if gone is None:
            kept.counted = {job.id: job for job in jobs}
        else:
            for job_id, job in gone.items():
                if kept.counted.get(job_id) is job:
                    del kept.counted[job_id]
            kept.counted.update((job.id, job) for job in jobs)
        self._undo, undo = None, self._undo  # these bookings stay
        expiry = kept.expiry
        floating = kept.floating
        # A job at most a second from its walltime's end is booked until now + 1 (it is about
        # to be killed): its end moves on with now.
        while expiry and expiry[0][0] <= now + 1:
            _, job_id = heapq.heappop(expiry)
            entry = kept.running.get(job_id)
            if gone is not None and entry is not None and entry[1][2] <= now + 1 and \
                    gone.get(job_id) is not entry[0] and job_id not in floating:
                jobs.append(entry[0])
        if gone is not None and floating:  # booked from each cycle's now: again
            listed = {job.id for job in jobs}
            jobs.extend(entry[0] for job_id in floating
                        if job_id not in listed and (entry := kept.running.get(job_id))
                        is not None and gone.get(job_id) is not entry[0])
        # Bookings of jobs gone taken back: how many, their last end, their first vnode,
        # the ncpus they held.
        released, freed, lowest, cpus = 0, -INFINITY, len(kept.order), 0
        try:
            if kept.unavail:
                calendar.unbook_all([(n, kept.unavail.pop(n))
                                     for n, b in list(kept.unavail.items())
                                     if not (kept.infos[n].plan_from > now
                                             and kept.infos[n].plan_from == b.end)])
            if kept.unusable:  # (every vnode up: nothing to book, most cycles)
                unavail = [(info.name, Booking(-INFINITY, info.plan_from, {}, True, True,
                                               "#unavail"))
                           for info in kept.unusable
                           if info.plan_from > now and info.name not in kept.unavail]
                self._book_all(unavail)
                kept.unavail.update(unavail)
            seen: set[str] = set()
            running = kept.running
            for job in jobs:
                seen.add(job.id)
                previous = running.get(job.id)
                if previous is not None and previous[0] is job and previous[1][2] > now + 1 \
                        and job.id not in floating:
                    continue  # the same object: the same request, vnodes and start
                key = self._running_key(job, snap, now)
                was_floating = job.id in floating
                # Booked from now: without a start time, or past its walltime.
                (floating.discard if job.stime and key[2] > now + 1 else floating.add)(job.id)
                if previous is not None and previous[1] == key:
                    running[job.id] = (job, key, previous[2])
                    if was_floating and job.id not in floating:
                        # Its start time is now the cycle's that booked it: from here on it
                        # ends where it is booked, and its expiry was never noted.
                        _expire_at(expiry, key[2], job.id)
                    continue
                started = kept.adopt.pop(job.id, None)
                if started is not None and previous is None and started[:2] == key[1:3] \
                        and started[3] == key[0]:
                    # Started by the last cycle, as it chose (its exec_vnode as it wrote it).
                    running[job.id] = (job, key, started[2])
                    if job.id not in floating:
                        _expire_at(expiry, key[2], job.id)
                    continue
                if started is not None:
                    calendar.unbook_all(started[2])
                if previous is not None:
                    calendar.unbook_all(previous[2])
                    del running[job.id]
                chunks = self._running_chunks(job)
                if chunks:
                    place = parse_place_safe(job.Resource_List["place"])  # running anyway
                    made = self._book_chunks(job.id, chunks, place, key[1], key[2],
                                             hard=True)
                    running[job.id] = (job, key, made)
                    if job.id not in floating:  # (those are booked again every cycle)
                        _expire_at(expiry, key[2], job.id)
            if gone is None:
                stale = [j for j in running if j not in seen]
            else:
                stale = [j for j, job in gone.items() if running.get(j, (None,))[0] is job]
            for job_id in stale:
                floating.discard(job_id)
            # Taken back as jobs that ended: those gone, and those the last cycle started
            # that are not running now (a short job ended already, or runjob refused it).
            # Either frees room as an end does: the kept top plan holds while
            # `_released_harmless` says it does (a plan made after such a start, when a
            # deferred top job was planned, may start sooner without it).
            rank = kept.rank.__getitem__
            for made in [*(running.pop(job_id)[2] for job_id in stale),
                         *(started[2] for started in kept.adopt.values())]:
                if not made:
                    continue
                calendar.unbook_all(made)
                # (summed by builtins: a job's vnodes are many, its bookings alike)
                released += len(made)
                freed = max(freed, max(map(_END, map(_SECOND, made))))
                lowest = min(lowest, min(map(rank, map(_FIRST, made))))
                cpus += sum(applied[0] for applied in map(_APPLIED, map(_SECOND, made))
                            if applied is not None)
            kept.adopt = {}
        finally:
            self._undo = undo
            if calendar.changes == before + released:  # jobs ended, nothing else
                kept.released = max(kept.released, freed)
                kept.released_rank = min(kept.released_rank, lowest)
                kept.released_cpus += cpus
            elif calendar.changes != before:
                kept.changes += 1

    def _sticky_top(self, kept: _Kept, order: Sequence[_JobInfo], snap: Snapshot,
                    now: float) -> _TopPlan | None:
        """The kept top job plan, when it still holds: nothing but adopted starts (and jobs
        ending, see `_released_harmless`) changed the kept bookings since it was made, its
        job still heads the queue with the same request, no reservation books anything,
        and its start is still to come. Else it is taken back, and planned again if need
        be."""
        top = kept.top
        if top is None:
            return None
        if (top.changes == kept.changes and order and order[0].job.id == top.job_id
                and order[0].shape == top.shape and top.start > now and self._may_keep_top
                and self._released_harmless(kept, top, order[0], now)):
            # As `_book_all` notes a hard booking to come: all of a plan's start at its
            # start, on vnodes nothing else noted yet (most cycles) at once.
            if self._future_hard or self._now_cache or self._cross_cache:
                for vnode, _ in top.made:
                    self._note_future(vnode, top.start)
            else:
                self._future_hard.update(top.future)
            return top
        self.calendar.unbook_all(top.made)
        kept.top = None
        return None

    def _released_harmless(self, kept: _Kept, top: _TopPlan, info: _JobInfo,
                           now: float) -> bool:
        """Whether the jobs that ended since the kept plan of `info` was made leave it as
        it was. They change nothing at its start if they were to end by then, or held only
        vnodes after all of its own (its first fit never got that far; a pack tries whole
        hosts); and the plan holds unless the room they left lets the job start sooner."""
        if kept.released == -INFINITY:
            return True
        if kept.released > top.start and (info.place.arrangement == "pack"
                                          or info.place.group is not None
                                          or kept.released_rank <= top.last_rank
                                          or any(exclusivity(info.place, sharing) == EXCLHOST
                                                 for sharing in kept.sharings)):
            return False  # (a whole host for the job: a vnode freed anywhere may matter)
        if info.smallest == 1 and kept.released_cpus < kept.slack:
            # One-cpu chunks: the room those ends left adds at most their ncpus to the
            # count at any instant, short of what it lacked when last swept.
            return True
        start, peak = self._no_start_before(info, now)
        if start < top.start:
            return False
        kept.slack, kept.released_cpus = info.ncpus - peak, 0
        return True

    def _queued_infos(self, kept: _Kept, jobs: list[Job], snap: Snapshot,
                      queues: dict[str, Queue], now: float) -> list[_JobInfo]:
        """The eligible queued jobs' infos; a job object seen last cycle keeps its info (a
        job_sort_formula or an Execution_Time depends on the time: those are redone; a
        queue object changed is read again)."""
        previous = kept.queued
        current: dict[int, tuple[Job, Queue | None, str, _JobInfo | None]] = {}
        infos: list[_JobInfo] = []
        waiting: dict[int, Job] = {}
        timeless = self._formula is None
        for job in jobs:
            key = id(job)
            seen = previous.get(key)
            if seen is not None and seen[0] is job and timeless and \
                    queues.get(seen[2]) is seen[1]:
                current[key] = seen
                if seen[3] is not None:
                    infos.append(seen[3])
                continue
            queue = queues.get(job.queue)
            info = None
            if self._eligible(job, queues, now):
                info = self._job_info(job, queue, snap.server, now, queues)
                infos.append(info)
            if not job.Execution_Time:
                current[key] = (job, queue, job.queue, info)
            else:
                waiting[key] = job
        kept.queued = current
        kept.waiting = waiting
        return infos

    def _queued_changes(self, kept: _Kept, added: list[Job], gone: list[Job],
                        snap: Snapshot, queues: dict[str, Queue], now: float) -> None:
        """`_queued_infos` for the jobs added and taken away since the last cycle: their
        infos put in order or taken out; a job waiting for its Execution_Time is looked at
        each cycle until it is eligible."""
        for job in gone:
            key = id(job)
            kept.queued.pop(key, None)
            kept.waiting.pop(key, None)
            self._dequeue(kept, key)
        for job in added:
            key = id(job)
            if job.get("Execution_Time"):
                kept.waiting[key] = job
                continue
            queue = queues.get(job.get("queue"))
            info = None
            if self._eligible(job, queues, now):
                info = self._job_info(job, queue, snap.server, now, queues)
                self._enqueue(kept, info)
            kept.queued[key] = (job, queue, job.queue, info)
        for key, job in kept.waiting.items():
            if key not in kept.rank_entry and self._eligible(job, queues, now):
                self._enqueue(kept, self._job_info(job, queues.get(job.queue), snap.server,
                                                now, queues))

    @staticmethod
    def _rank_all(kept: _Kept, infos: list[_JobInfo]) -> None:
        """The eligible jobs put in order afresh (ties in the caller's order)."""
        kept.ranked = sorted((info.key, n, info) for n, info in enumerate(infos))
        kept.rank_entry = {id(entry[2].job): entry for entry in kept.ranked}
        kept.arrivals = len(infos)
        kept.by_shape = {}
        for entry in kept.ranked:
            kept.by_shape.setdefault(entry[2].shape, []).append(entry)
        kept.fresh = list(infos)

    @staticmethod
    def _enqueue(kept: _Kept, info: _JobInfo) -> None:
        entry = (info.key, kept.arrivals, info)
        kept.arrivals += 1
        bisect.insort(kept.ranked, entry)
        kept.rank_entry[id(info.job)] = entry
        bisect.insort(kept.by_shape.setdefault(info.shape, []), entry)
        kept.fresh.append(info)

    @staticmethod
    def _dequeue(kept: _Kept, key: int) -> None:
        entry = kept.rank_entry.pop(key, None)
        if entry is None:
            return
        bucket = kept.by_shape[entry[2].shape]
        for entries in (kept.ranked, bucket):
            at = bisect.bisect_left(entries, entry)
            if at < len(entries) and entries[at] is entry:
                del entries[at]
        if not bucket:
            del kept.by_shape[entry[2].shape]

    def _cycle_end(self, stats: CycleStats) -> None:
        if self._impls("sched_cycle_end"):
            for _ in self._answers("sched_cycle_end", stats=stats):
                pass

    # -- vnodes ---------------------------------------------------------------------------------
    def _vnode_info(self, v: Vnode, now: float) -> _VnodeInfo:
        avail = v.resources_available
        capacity: dict[str, int] = {}
        match: dict[str, str] = {}
        types = self._types
        for key, value in avail.items():
            if key in LAYOUT_RESOURCES:
                continue
            amount = resource_amount(key, value, types)
            if amount is not None and key != "host":
                capacity[key] = amount
            else:
                match[key] = match_text(key, value, types)
        for key in self._booleans:  # (an unset boolean is False, as PBS reads it)
            match.setdefault(key, "False")
        host = str(avail["host"] or v.name)
        match["host"] = host
        match.setdefault("vnode", v.name)
        states = v.states
        usable = not (states & UNUSABLE_STATES)
        plan_from = now if usable else INFINITY
        if SLEEP in states and not (states - {SLEEP, "free"}) & UNUSABLE_STATES:
            plan_from = now + self.policy.boot_delay
        return _VnodeInfo(v.name, host, capacity, match, str(v.sharing or "default_shared"),
                          usable, plan_from, v)

    def _refresh_states(self, kept: _Kept, snap: Snapshot, now: float) -> bool:
        """Bring the kept vnodes up to the caller's version in place when the vnodes changed
        since (`Snapshot.vnode_log`) kept their resources, sharing and host: only their
        states (the power plugin's sleep and wake) and other attributes placement does not
        read. Their bookings stay. The kept top job's plan is dropped when a vnode became
        usable now or stopped being so; not for what every job start and end changes in an
        engine's rows (job-busy, resources_assigned, jobs), nor for an unusable vnode's
        other states (the time it can be planned from is booked afresh every cycle, which
        a kept plan notes). False when it cannot (a vnode added, gone or otherwise changed,
        a vnode's place under node_sort_key moved, changes forgotten): the caller then
        reparses every vnode."""
        names = snap.vnode_log.since(kept.version) if snap.vnode_log is not None and \
            kept.version is not None and \
            snap.vnode_log.version == snap.vnodes_version else None
        if names is None:
            return False
        key, high = self._node_sort()
        fresh = []
        for name in names:
            vnode, info = snap.vnodes.get(name), kept.infos.get(name)
            if info is None and (vnode is None or not self.owns(vnode)):
                continue  # another scheduler's vnode, before and after
            if vnode is None or info is None or not self.owns(vnode):
                return False  # a vnode gone, or one that joined or left this slice
            new = self._vnode_info(vnode, now)
            if (new.capacity, new.match, new.sharing, new.host) != (
                    info.capacity, info.match, info.sharing, info.host) or (
                    key and _sort_value(vnode, key, high) != info.sort):
                return False
            fresh.append((info, new))
        flipped = any(info.usable_now != new.usable_now for info, new in fresh)
        for info, new in fresh:  # the objects the kept lists hold are updated in place
            info.obj, info.usable_now, info.plan_from = new.obj, new.usable_now, new.plan_from
        kept.version = snap.vnodes_version
        if not flipped:
            return True
        kept.usable = [v for v in kept.order if v.usable_now]
        kept.open = None
        kept.drops = None  # (they sum the usable vnodes' losses)
        kept.unusable = [v for v in kept.order if not v.usable_now]
        kept.ever_memo.clear()
        kept.set_memo.clear()
        if kept.top is not None:
            kept.calendar.unbook_all(kept.top.made)
            kept.top = None
        kept.changes += 1
        return True

    def _vnode_infos(self, vnodes: list[Vnode], now: float, server: Server
                     ) -> dict[str, _VnodeInfo]:
        infos: dict[str, _VnodeInfo] = {}
        for v in vnodes:
            infos[v.name] = self._vnode_info(v, now)
        self._ask_availability([i for i in infos.values() if not i.usable_now], infos, now)
        key, high = self._node_sort()
        for info in infos.values():
            info.sort = _sort_value(info.obj, key, high)
        ordered = sorted(infos.values(), key=lambda i: i.sort + (i.name,))
        return {i.name: i for i in ordered}

    def _node_sort(self) -> tuple[str, bool]:
        """node_sort_key's key and whether highest comes first (`node_sort_order`)."""
        return node_sort_order(self.policy.node_sort_key)

    def _plan_unusable(self, unusable: list[_VnodeInfo], infos: dict[str, _VnodeInfo],
                       now: float) -> None:
        """Kept vnodes that cannot take a job now: when they can, seen from `now`."""
        for info in unusable:
            states = info.obj.states
            info.plan_from = INFINITY
            if SLEEP in states and not (states - {SLEEP, "free"}) & UNUSABLE_STATES:
                info.plan_from = now + self.policy.boot_delay
        self._ask_availability(unusable, infos, now)

    def _ask_availability(self, unusable: list[_VnodeInfo], infos: dict[str, _VnodeInfo],
                          now: float) -> None:
        """The sched_node_availability hooks' answers for vnodes that cannot take a job
        now."""
        unavailable = [i.obj for i in unusable]
        answered: set[str] = set()
        if unavailable and self._impls("sched_node_availability"):
            for plugin, answer in self._answers("sched_node_availability", sched=self.name,
                                                now=now, vnodes=unavailable):
                if answer is not None and not isinstance(answer, dict):
                    log.warning("sched_node_availability of %s answered %r, not a dict; "
                                "ignored", plugin, answer)
                    continue
                for name, when in (answer or {}).items():
                    if not isinstance(when, (int, float)) or isinstance(when, bool):
                        log.warning("sched_node_availability of %s gave %r for %s, not a "
                                    "time; ignored", plugin, when, name)
                        continue
                    if name in infos and not infos[name].usable_now:
                        # A plugin's answer replaces the policy's guess (boot_delay for a
                        # sleeping vnode, never for another); several answers: the latest.
                        current = infos[name].plan_from
                        infos[name].plan_from = (max(float(when), now) if name not in answered
                                                 else max(current, float(when)))
                        answered.add(name)

    # -- bookings -------------------------------------------------------------------------------
    def _book_all(self, made: list[tuple[str, Booking]]) -> None:
        """Book each (vnode, booking), noted for this cycle to take back (`_undo`)."""
        self.calendar.book_all(made)
        self._forget_touched()
        if self._undo is not None:
            self._undo.extend(made)
        now, counting = self.now, self._counting
        now_cache, cross_cache = self._now_cache, self._cross_cache
        for vnode, booking in made:
            if booking.hard:
                if counting and booking.applied is not None and booking.applied[1]:
                    self._free_now -= booking.applied[0]
                if booking.start > now:
                    self._note_future(vnode, booking.start)
                    continue  # (it forgets what was cached of the vnode)
            now_cache.pop(vnode, None)
            cross_cache.pop(vnode, None)

    def _forget_touched(self) -> None:
        """What was kept of the vnodes the kept calendar booked or took back since last
        asked (`Calendar.touched`) made again when next needed: their least room to come
        (`_lows`), their losses in the sums (`_Drops`)."""
        kept = self._kept
        assert kept is not None  # (set by `cycle` before anything reads it)
        touched = kept.calendar.touched
        if touched:
            lows = kept.lows
            for name in touched:
                lows.pop(name, None)
            if kept.drops is not None:
                kept.drops.dirty |= touched
            touched.clear()

    def _all_shared(self, place: Place) -> bool:
        """Whether no vnode's sharing makes a job of `place` hold it exclusively (most of a
        trace), so that placing and booking need not ask vnode by vnode."""
        kept = self._kept
        assert kept is not None  # (set by `cycle` before anything reads it)
        known = kept.shared_places
        answer = known.get(place)
        if answer is None:
            answer = known[place] = all(exclusivity(place, sharing) == SHARED
                                        for sharing in kept.sharings)
        return answer

    def _note_future(self, vnode: str, start: float) -> None:
        """A hard booking on `vnode` starting after now (`_free` reads these)."""
        current = self._future_hard.get(vnode)
        if current is None:
            self._future_hard[vnode] = (start, True)
        elif current[0] != start:
            self._future_hard[vnode] = (min(current[0], start), False)
        self._now_cache.pop(vnode, None)
        self._cross_cache.pop(vnode, None)

    def _book_chunks(self, owner: str, chunks: list[tuple[str, dict[str, int]]], place: Place,
                     start: float, end: float, hard: bool) -> list[tuple[str, Booking]]:
        made = self._bookings(owner, chunks, place, start, end, hard)
        self._book_all(made)
        return made

    def _bookings(self, owner: str, chunks: list[tuple[str, dict[str, int]]], place: Place,
                  start: float, end: float, hard: bool, whole: Iterable[str] = ()
                  ) -> list[tuple[str, Booking]]:
        """What a job placed on `chunks` holds: per vnode, its resources, exclusively where
        its place and the vnode's sharing say so; the hosts in `whole` are its alone too."""
        per_vnode: dict[str, dict[str, int]] = {}
        if len(chunks) > 1 and len(set(map(id, map(_SECOND, chunks)))) == 1:
            # Alike chunks (one resources dict, as placed from counts): counted, not summed.
            res = chunks[0][1]
            for name, n in Counter(map(_FIRST, chunks)).items():  # (bookings only read it)
                per_vnode[name] = res if n == 1 else {k: v * n for k, v in res.items()}
        else:
            for name, res in chunks:
                acc = per_vnode.setdefault(name, {})
                for k, v in res.items():
                    acc[k] = acc.get(k, 0) + v
        if not whole and self._all_shared(place):
            # (most of a trace: no vnode held exclusively, no host whole)
            return [(name, Booking(start, end, res, False, hard, owner))
                    for name, res in per_vnode.items()]
        levels: dict[str, str] = {}
        placed = []  # (vnode, resources, its info, the job's exclusivity there)
        for name, res in per_vnode.items():
            info = self.vnodes[name]
            level = levels.get(info.sharing)
            if level is None:
                level = levels[info.sharing] = exclusivity(place, info.sharing)
            placed.append((name, res, info, level))
        # A host one of its vnodes gives the job whole (exclhost) is the job's alone: its
        # other vnodes, shared ones the job uses too, hold nothing else meanwhile.
        hosts_excl = dict.fromkeys([*(info.host for _, _, info, level in placed
                                      if level == EXCLHOST), *whole])  # resv_nodes' order
        made: list[tuple[str, Booking]] = []
        for name, res, info, level in placed:
            exclusive = level != SHARED or info.host in hosts_excl
            made.append((name, Booking(start, end, res, exclusive, hard, owner)))
        for host in hosts_excl:
            for info in self.hosts[host]:
                if info.name not in per_vnode:
                    made.append((info.name, Booking(start, end, {}, True, hard, owner)))
        return made

    def _with_rest(self, chunks: list[tuple[str, dict[str, Any]]], place: Place
                   ) -> list[tuple[str, dict[str, Any]]]:
        """The chunks as PBS writes them in exec_vnode (and resv_nodes): a host that one of
        them gives the job whole (exclhost) has its other vnodes listed too, with no
        resources, after the host's last chunk, in the hosts' vnode order
        (``(n0:ncpus=2)+(n1)``); the job holds them (`_bookings`)."""
        if self._all_shared(place):
            return chunks
        vnodes = self.vnodes
        last: dict[str, int] = {}  # host -> index of its last chunk
        whole: set[str] = set()
        for i, (name, _) in enumerate(chunks):
            info = vnodes[name]
            last[info.host] = i
            if exclusivity(place, info.sharing) == EXCLHOST:
                whole.add(info.host)
        if not whole:
            return chunks
        used = {name for name, _ in chunks}
        out = []
        for i, chunk in enumerate(chunks):
            out.append(chunk)
            host = vnodes[chunk[0]].host
            if host in whole and last[host] == i:
                out.extend((info.name, {}) for info in self.hosts[host] if info.name not in used)
        return out

    def _running_key(self, job: Job, snap: Snapshot, now: float) -> tuple:
        """A running job's (exec_vnode, start, end, place): it holds its vnodes until its
        walltime ends."""
        walltime = job_walltime(job, snap.queues.get(job.queue), snap.server)
        start = float(job.stime or now)
        end = start + walltime if walltime is not None else INFINITY
        # A job past its walltime is about to be killed: it frees its vnodes now.
        end = max(end, now + 1)
        return (str(job.exec_vnode or ""), start, end, job.Resource_List["place"])

    def _running_chunks(self, job: Job) -> list[tuple[str, dict[str, int]]]:
        """A running job's chunks on this slice's vnodes."""
        chunks = []
        for name, res in parse_exec_vnode(str(job.exec_vnode or "")):
            if name in self.vnodes:
                chunks.append((name, {k: a for k, v in res.items()
                                      if (a := resource_amount(k, v, self._types))
                                      is not None}))
        return chunks

    def _book_reservations_held(self, reservations: list[Reservation], now: float
                                ) -> dict[str, Reservation]:
        """Confirmed and running reservations hold their vnodes; returns the running ones'
        queues (jobs there run inside the reservation)."""
        running_queues = {}
        self._resv_seen: dict[str, list[tuple[str, dict[str, int]]]] = {}
        for resv in reservations:
            state = resv_state(resv)
            if state not in _RESV_HOLDING or not resv.resv_nodes:
                continue
            end = float(resv.reserve_end or INFINITY)
            if end <= now:
                continue
            chunks = [(n, r) for n, r in self._held_per_vnode(str(resv.resv_nodes))
                      if n in self.vnodes]
            place = parse_place_safe(resv.Resource_List["place"])
            # A vnode it holds nothing of is the rest of a host it was given whole: that
            # host stays its own, whatever the vnodes' sharing says now.
            self._book_all(self._bookings(
                f"resv:{resv.name}", chunks, place, float(resv.reserve_start or now), end,
                hard=True, whole=[self.vnodes[name].host for name, res in chunks if not res]))
            if state in ("RUNNING", "RESV_RUNNING", "5") and resv.queue:
                running_queues[str(resv.queue)] = resv
        self._resv_held = self._resv_seen  # (only the texts still held are kept)
        return running_queues

    def _held_per_vnode(self, resv_nodes: str) -> list[tuple[str, dict[str, int]]]:
        """What a reservation's resv_nodes holds, summed per vnode in their order (a rest
        of a host: nothing), read once per text: a reservation of 100,000 chunks was read
        again, chunk by chunk, at every cycle. Callers only read it."""
        held = self._resv_seen.get(resv_nodes) or self._resv_held.get(resv_nodes)
        if held is None:
            per_vnode: dict[str, dict[str, int]] = {}
            for name, res in parse_exec_vnode(resv_nodes):
                acc = per_vnode.setdefault(name, {})
                for k, v in res.items():
                    if (a := resource_amount(k, v, self._types)) is not None:
                        acc[k] = acc.get(k, 0) + a
            held = list(per_vnode.items())
        self._resv_seen[resv_nodes] = held
        return held

    def _confirm_reservations(self, snap: Snapshot, now: float) -> list[ResvDecision]:
        decisions: list[ResvDecision] = []
        if not snap.reservations:
            return decisions
        # One in no partition is offered to every scheduler (the first to confirm it makes
        # it its own); one in a partition only to that partition's (default's is
        # pbs-default), and waits while none has it.
        pending = [r for r in snap.reservations if resv_state(r) in _RESV_UNCONFIRMED
                   and (not r.partition or r.partition in self.partitions or (
                       self.name == "default" and r.partition == DEFAULT_PARTITION))]
        mine = next(iter(sorted(self.partitions)), DEFAULT_PARTITION)
        pending.sort(key=lambda r: (float(r.ctime or 0), r.name))
        for resv in pending:
            start = float(resv.reserve_start or now)
            end = float(resv.reserve_end or 0) or (
                start + parse_duration(resv.reserve_duration or 0))
            if end <= start or end <= now:
                decisions.append(ResvDecision(resv.name, False, reason="Reservation window "
                                              "is empty or in the past", partition=mine))
                continue
            pseudo = Job(f"resv:{resv.name}", {"Resource_List": dict(resv.Resource_List)})
            info = self._job_info(pseudo, None, snap.server, now, {})
            # (not on a vnode whose resv_enable is false, as PBS's scheduler places them)
            begin = max(start, now)
            chunks = self._fit(info, begin, end, soft=False, now_mode=False,
                               plan_from_ok=lambda v, begin=begin: v.plan_from <= begin and
                               _resv_enabled(v.obj))
            if chunks is None:
                decisions.append(ResvDecision(resv.name, False,
                                              reason="Reservation denied: no vnodes free for "
                                                     "its whole window", partition=mine))
                continue
            self._book_chunks(f"resv:{resv.name}", chunks, info.place, start, end, hard=True)
            # (sizes in kb, as PBS's resv_nodes: ``mem=10240kb`` for a ``mem=10mb`` asked)
            shown = [(n, {k: f"{-(-v // 1024)}kb" if k in CONSUMABLE_SIZES else v
                          for k, v in res.items()}) for n, res in chunks]
            decisions.append(ResvDecision(
                resv.name, True, format_exec_vnode(self._with_rest(shown, info.place)),
                partition=mine))
        return decisions

    # -- jobs -----------------------------------------------------------------------------------
    def _eligible(self, job: Job, queues: dict[str, Queue], now: float) -> bool:
        get = job.get  # (read at every submission: no attribute lookup that fails first)
        if get("job_state") not in (None, "Q"):
            return False
        hold = get("Hold_Types")
        if hold and str(hold) != "n":
            return False
        if (when := get("Execution_Time")) and float(when) > now:
            return False
        queue = queues.get(get("queue"))
        # (a route queue's jobs are the server's to pass on: they never run from it)
        return queue is None or (queue.get("started") is not False
                                 and not is_route_queue(queue))

    def _job_info(self, job: Job, queue: Queue | None, server: Server, now: float,
                  queues: dict[str, Queue]) -> _JobInfo:
        res = job.Resource_List
        # What placement depends on; a queue repeats a few shapes many times, parsed once.
        tables, told = self._chunk_defaults(queue, server)
        stored = job.get("schedselect")
        if stored:  # (the chunks the server stored are the job's, whatever the defaults now)
            shape: tuple = (_STORED, str(stored), res["place"])
        else:
            # (`get`: what indexing a Resources gives, None when unset, without a Python
            # call per key)
            shape = tuple(map(res.get, _SHAPE_RESOURCES))
            if shape[0] is None:  # (converted: its other host-level resources are its chunk's)
                shape += tuple(map(res.get, CONVERTED_RESOURCES))
                if self._host:
                    shape += tuple(map(res.get, self._host))
            if told:  # (the defaults a chunk takes are part of what it asks for)
                shape += (told,)
        parsed = self._shapes.get(shape)
        if parsed is None:
            chunks, smallest = _expand(job_select(job, tables, self._host), self._types)
            alike = bool(chunks) and not chunks[0][1] and chunks.count(chunks[0]) == len(chunks)
            place = job_place(job)
            parsed = self._shapes[shape] = (
                chunks, smallest, place, sum(c[0].get("ncpus", 0) for c in chunks), alike,
                (tuple(sorted(chunks[0][0].items())), place) if alike else None,
                alike and chunks[0][0] == {"ncpus": 1} and place.arrangement == "free",
                len(set(map(id, chunks))) == 1)
        chunks, smallest, place, ncpus, alike, kin, one_cpu, one_chunk = parsed
        walltime = job_walltime(job, queue, server)
        info = _JobInfo(job, chunks, place, walltime, (shape, walltime), smallest, ncpus, alike,
                        kin=kin, one_cpu=one_cpu,
                        duration=walltime if walltime is not None else UNKNOWN_WALLTIME,
                        one_chunk=one_chunk)
        prio = float((queue.Priority if queue is not None else None) or 0)
        formula = -self._formula(job, prio, now, lambda: job_select(job, tables, self._host)) \
            if self._formula else 0.0
        info.key = (-prio, formula, _queue_rank(job), _array_index(job.id), job.id)
        return info

    def _chunk_defaults(self, queue: Queue | None, server: Server
                        ) -> tuple[tuple[Any, ...], tuple]:
        """The default_chunk tables a job of `queue` takes (the queue's, then the server's)
        and what they give beyond ncpus=1, as a key (empty: nothing); once per queue while
        the kept state lives (its server and queue objects)."""
        name = queue.name if queue is not None else None
        known = self._defaults_seen.get(name)
        if known is None:
            tables = default_chunks(queue, server)
            given = chunk_defaults(tables)
            told = tuple(sorted((k, str(v)) for k, v in given.items()
                                if (k, str(v)) != ("ncpus", "1")))
            known = self._defaults_seen[name] = (tables if told else (), told)
        return known

    def _order(self, ranked: list[tuple[tuple, int, _JobInfo]], now: float
               ) -> tuple[Sequence[_JobInfo], set[str]]:
        """The jobs in the order they are looked at (the kept ranking's, unless the
        sched_job_order hooks reorder them), and the starving ones the hooks named."""
        infos: Sequence[_JobInfo] = _Ranked(ranked)
        starving: set[str] = set()
        if ranked and self._impls("sched_job_order"):
            infos = list(infos)
            order = JobOrder(self.name, now, [i.job for i in infos])
            for _ in self._answers("sched_job_order", order=order):
                pass
            by_id = {i.job.id: i for i in infos}
            reordered = [by_id[j.id] for j in order.jobs if j.id in by_id]
            seen = {i.job.id for i in reordered}
            infos = reordered + [i for i in infos if i.job.id not in seen]
            starving = set(order.starving)
            if starving:  # the most starving job first among the starving ones
                first = [i for i in infos if i.job.id in starving]
                rank = {jid: n for n, jid in enumerate(order.starving)}
                first.sort(key=lambda i: rank.get(i.job.id, len(rank)))
                infos = first + [i for i in infos if i.job.id not in starving]
        return infos, starving

    def _run_loop(self, order: Sequence[_JobInfo], starving: set[str],
                  resv_queues: dict[str, Reservation], snap: Snapshot, now: float,
                  result: CycleResult, stats: CycleStats) -> None:
        room, kept = self._room, self._kept
        assert kept is not None  # (set by `cycle` before anything reads it)
        self._forget_touched()  # (what this cycle's bookings and takings back changed)
        # The usable vnodes' free ncpus: every vnode's less what the unusable ones have.
        self._free_now = self.calendar.free_total(0) - sum(
            n for n in (room[v.name] for v in kept.unusable) if n > 0)
        self._counting = True
        try:
            self._run_jobs(order, starving, resv_queues, snap, now, result, stats)
        finally:
            self._counting = False

    def _run_jobs(self, order: Sequence[_JobInfo], starving: set[str],
                  resv_queues: dict[str, Reservation], snap: Snapshot, now: float,
                  result: CycleResult, stats: CycleStats) -> None:
        policy = self.policy
        depth = policy.backfill_depth if policy.backfill else 0
        if starving:
            depth = max(depth, 1)
        top_jobs: list[str] = []
        blocked = False            # strict ordering without backfill: nothing else starts
        # Placement shape -> the shortest walltime that did not fit now: a job of the same
        # shape needing as long or longer does not fit either (room only shrinks during a
        # cycle, and a longer window has no more of it).
        failed: dict[tuple, float] = {}
        # The same for jobs of one kin (alike chunks, one place): (chunks, walltime) of
        # those that did not fit now, the chunks one more than the vnodes held (`_most`)
        # where known; as many chunks or more for as long or longer do not fit either
        # (first fit of alike chunks holds fewer the longer the window).
        failed_kin: dict[tuple, list[tuple[int, int]]] = {}
        estimates_left = policy.estimate_limit
        has_placement_hook = self._impls("sched_node_placement")
        # Without estimates (estimate_limit 0), a top job's plan is made only when a later
        # job could start now and must be kept out of its way: on a full machine, most
        # cycles never need it. The decisions are the same; the top job then has no
        # estimate, and its comment no time.
        lazy = policy.estimate_limit <= 0
        deferred: list[_JobInfo] = []
        # No deferred top job can start before this (a count of cpus, not a placement): a
        # job that fits now and ends by then is out of their way without planning them.
        deferred_bound = INFINITY

        def plan_top(top: _JobInfo) -> bool:
            """Plan a top job (hard); True when it will ever fit."""
            sticky = self._sticky
            if sticky is not None and sticky.job_id == top.job.id:
                self._sticky_used = True
                start, planned = sticky.start, sticky.chunks
            else:
                start, planned = self._earliest(top, now, soft=False)
                if planned is not None:
                    made = self._book_chunks(top.job.id, planned, top.place, start,
                                             top.end(start), hard=True)
                    if top is order[0] and not self._started and self._may_keep_top:
                        self._fresh_top = (top.job.id, top.shape, start, planned, made)
            if lazy and not self.explain:
                return planned is not None  # no estimate, no comment: nobody reads them
            if planned is not None:
                result.estimates[top.job.id] = self._estimate(top, start, planned)
            result.comments[top.job.id] = (
                f"Not Running: Job is a top job and will run at {int(start)}"
                if planned is not None else
                "Not Running: Job is a top job but no vnodes will ever fit it")
            return planned is not None

        quiet = lazy and not self.explain and not resv_queues
        walk: Iterable[_JobInfo] = order
        if quiet and self._ranked_order:
            kept = self._kept
            assert kept is not None  # (set by `cycle` before anything reads it)
            for info in kept.fresh:  # a job that can never run is said so at once
                if not self._can_ever_run(info):
                    result.comments[info.job.id] = \
                        f"Can Never Run: {self._never_why(info, now)}"
            walk = self._walk(order, lambda: blocked or not policy.strict_ordering
                              or 0 < depth <= len(top_jobs), failed, failed_kin)
        limits = self._limits
        for info in walk:
            if quiet and (self._free_now <= 0 or blocked):
                break  # nothing else can start now, and nobody reads why
            job = info.job
            if limits is not None and (why := limits.over(job)) is not None:
                result.comments[job.id] = f"Not Running: {why}"  # neither top nor blocking
                continue
            if resv_queues and job.queue in resv_queues:
                started = len(result.run)
                self._run_in_reservation(info, resv_queues[job.queue], snap, now, result, stats)
                if limits is not None and len(result.run) > started:
                    limits.add(job)
                continue
            chunks = None
            if not blocked and info.duration < failed.get(info.shape[0], INFINITY) and \
                    not _ruled_out(failed_kin, info):
                chunks = self._fit(info, now, now + info.duration, soft=False, now_mode=True)
                if chunks is not None and deferred and now + info.duration > deferred_bound:
                    for top in deferred:
                        plan_top(top)
                    deferred.clear()
                    chunks = self._fit(info, now, now + info.duration, soft=False,
                                       now_mode=True)
                if chunks is None:
                    failed[info.shape[0]] = info.duration
                    if info.kin is not None:
                        # Any more chunks than its vnodes held for it do not fit either.
                        most = self._most
                        failed_kin.setdefault(info.kin, []).append((
                            len(info.chunks) if most is None else most + 1, info.duration))
                elif has_placement_hook:
                    chunks = self._placement_hook(info, chunks, now)
            if not chunks and not self._can_ever_run(info):
                result.comments[job.id] = f"Can Never Run: {self._never_why(info, now)}"
                continue
            if chunks:
                made = self._book_chunks(job.id, chunks, info.place, now, info.end(now),
                                         hard=True)
                shown = self._with_rest(_shown_chunks(info, chunks), info.place)
                exec_vnode = format_exec_vnode(shown)
                self._started[job.id] = (now, info.end(now), made, exec_vnode)
                result.run.append(RunDecision(job.id, exec_vnode, shown,
                                              backfilled=bool(top_jobs)))
                if limits is not None:
                    limits.add(job)
                stats.jobs_started += 1
                stats.jobs_backfilled += bool(top_jobs)
                continue
            is_top = len(top_jobs) < depth and (policy.strict_ordering or job.id in starving)
            if policy.strict_ordering and depth == 0:
                blocked = True
            if not is_top and estimates_left <= 0:
                if not quiet:
                    result.comments[job.id] = self._waiting(blocked, info, top_jobs)
                continue
            if is_top and lazy:
                top_jobs.append(job.id)
                if self._sticky is not None and self._sticky.job_id == job.id:
                    plan_top(info)  # already planned: nothing to do but say when
                else:
                    deferred.append(info)
                    deferred_bound = min(deferred_bound, self._no_start_before(info, now)[0])
                    result.comments[job.id] = "Not Running: Job is a top job"
                continue
            if is_top:
                top_jobs.append(job.id)
                if plan_top(info):
                    estimates_left -= 1
                continue
            start, planned = self._earliest(info, now, soft=True)  # an estimate only
            if planned is not None:
                self._book_chunks(job.id, planned, info.place, start, info.end(start),
                                  hard=False)
                result.estimates[job.id] = self._estimate(info, start, planned)
                estimates_left -= 1
            result.comments[job.id] = self._waiting(blocked, info, top_jobs)
        result.top_jobs = top_jobs

    def _estimate(self, info: _JobInfo, start: float,
                  planned: list[tuple[str, dict[str, int]]]) -> Estimate:
        """The job's estimate. Its exec_vnode text is the last estimate's when the job was
        planned on the same vnodes for the same request object (most are, from one
        estimate cycle to the next): a text hundreds of chunks long is not made again, and
        a hook that keeps what it parsed of a text (the power hook) finds it at once, in
        the very string it read last time."""
        job_id = info.job.id
        last = self._texts.get(job_id)
        # Only a text made where no vnode's sharing could give the place a host whole is
        # kept: the rest of a host (`_with_rest`) follows the hosts' vnodes and sharing,
        # which may have changed since.
        plain = self._all_shared(info.place)
        if last is not None and last[1] is info.chunks and last[0] == planned and \
                last[3] and plain:
            entry = last
        else:
            entry = (planned[:], info.chunks,  # (a copy: no caller's list to change it)
                     format_exec_vnode(self._with_rest(_shown_chunks(info, planned),
                                                       info.place)), plain)
        self._texts_made[job_id] = entry
        return Estimate(job_id, int(math.ceil(start)), entry[2])

    def _walk(self, order: Sequence[_JobInfo], settled: Callable[[], bool],
              failed: dict[tuple, float], failed_kin: dict[tuple, list[tuple[int, int]]]
              ) -> Iterator[_JobInfo]:
        """The jobs of `order` (the kept ranking's) for a quiet run loop: in order, until
        `settled` says the top jobs are set; from then on a job can only start now, so
        only those needing no more cpus than are free now, of a shape that has not failed
        to fit (`failed`), are looked at: still in order, from the kept lists by shape, so
        a cycle costs the shapes queued and the jobs started, not the whole queue."""
        at = 0
        while at < len(order) and not settled():
            yield order[at]
            at += 1
        if at == len(order):
            return
        kept = self._kept
        assert kept is not None  # (set by `cycle` before anything reads it)
        first = kept.ranked[at]
        heap = []
        for shape, bucket in kept.by_shape.items():
            if bucket[0][2].ncpus <= self._free_now:
                i = bisect.bisect_left(bucket, first)
                if i < len(bucket):
                    heap.append((bucket[i], shape, i))
        heapq.heapify(heap)
        while heap:
            entry, shape, i = heap[0]
            info = entry[2]
            if info.ncpus > self._free_now or info.duration >= failed.get(
                    shape[0], INFINITY) or _ruled_out(failed_kin, info):
                heapq.heappop(heap)  # no job of this shape can start now
                continue
            yield info
            bucket = kept.by_shape[shape]
            if i + 1 < len(bucket):
                heapq.heapreplace(heap, (bucket[i + 1], shape, i + 1))
            else:
                heapq.heappop(heap)

    def _resv_world(self, resv: Reservation, snap: Snapshot) -> _ResvWorld:
        """A running reservation's vnodes and the running jobs on them, read once a cycle."""
        world = self._resv_worlds.get(resv.name)
        if world is not None:
            return world
        allocation: dict[str, dict[str, int]] = {}
        for name, res in parse_exec_vnode(resv.resv_nodes):
            acc = allocation.setdefault(name, {})
            for k, v in res.items():
                if (a := resource_amount(k, v, self._types)) is not None:
                    acc[k] = acc.get(k, 0) + a
        # The other vnodes of a host the reservation holds part of are held from outside
        # it: an exclhost job does not have that host whole there (PBS gives a reservation
        # on such a host all of it).
        outside = {other.name for name in allocation if name in self.vnodes
                   for other in self.hosts[self.vnodes[name].host]
                   if other.name not in allocation}
        resv_queues = {str(r.queue) for r in snap.reservations if r.queue}
        world = self._resv_worlds[resv.name] = _ResvWorld(allocation, outside)
        for job in snap.jobs:
            if job.job_state not in _RUNNING_STATES:
                continue
            chunks = self._running_chunks(job)
            if not any(n in allocation or n in outside for n, _ in chunks):
                continue  # (an exclhost job on the rest of its host holds its part too)
            held = (job.id, parse_place_safe(job.Resource_List["place"]),
                    [(n, r) for n, r in chunks if n in allocation])
            if job.queue not in resv_queues:
                world.loose.append((job.id, held[1], chunks))
            elif job.queue == resv.queue:
                world.mine.append(held)
            else:
                world.neighbours.append(held[2])
        return world

    def _run_in_reservation(self, info: _JobInfo, resv: Reservation, snap: Snapshot,
                            now: float, result: CycleResult, stats: CycleStats) -> None:
        """A job in a running reservation's queue runs inside the reservation's vnodes."""
        world = self._resv_world(resv, snap)
        allocation, outside = world.allocation, world.outside
        inside = Calendar({**allocation, **dict.fromkeys(outside, {})})
        inside.book_all([(name, Booking(-INFINITY, INFINITY, {}, True, True, "#outside"))
                         for name in outside])
        # Its running jobs and those started in it this cycle, held as outside it (an
        # exclusive one alone on its vnodes, an exclhost one with its host).
        started = self._resv_started.setdefault(resv.name, {})
        for owner, place, chunks in world.mine + [(j, *h) for j, h in started.items()]:
            if chunks:
                inside.book_all(self._bookings(owner, chunks, place, -INFINITY, INFINITY,
                                               hard=True))
        # Jobs from outside any reservation still running on its vnodes (past their
        # walltime, or run there by hand): what they hold exclusively (their host, if
        # exclhost) is not free, nor empty a vnode the reservation holds whole. Within a
        # vnode held in part, exclusivity is the reservation's own, as PBS's reservation
        # vnodes are: a job outside on the rest of it is no neighbour.
        used: dict[str, dict[str, int]] = {}
        for owner, place, chunks in world.loose:
            inside.book_all([(name, Booking(-INFINITY, INFINITY, {}, b.exclusive, True,
                                            "#outside"))
                             for name, b in self._bookings(owner, chunks, place, -INFINITY,
                                                           INFINITY, hard=True)
                             if name in allocation and (b.exclusive or _whole(
                                 allocation[name], self.vnodes[name].capacity))])
        # What jobs outside it use on its vnodes (other reservations' included, those
        # started this cycle too) beyond the part outside this reservation is not its own.
        held_elsewhere = [chunks for _, _, chunks in world.loose] + world.neighbours + [
            [(n, r) for n, r in chunks if n in allocation]
            for name, jobs in self._resv_started.items() if name != resv.name
            for _, chunks in jobs.values()]
        for chunks in held_elsewhere:
            for name, res in chunks:
                if name in allocation:
                    acc = used.setdefault(name, {})
                    for k, v in res.items():
                        acc[k] = acc.get(k, 0) + v
        for name, res in used.items():
            share, cap = allocation[name], self.vnodes[name].capacity
            over = {k: v - cap.get(k, 0) + share[k] for k, v in res.items() if k in share}
            over = {k: v for k, v in over.items() if v > 0}
            if over:
                inside.book(name, Booking(-INFINITY, INFINITY, over, False, True, "#outside"))
        saved = self.calendar
        self.calendar, self._set_world = inside, allocation
        try:
            placed = self._fit(info, now, float(resv.reserve_end or INFINITY), soft=False,
                               now_mode=False, plan_from_ok=lambda v: v.name in allocation)
        finally:
            self.calendar, self._set_world = saved, None
        if placed is None:
            result.comments[info.job.id] = ("Not Running: Insufficient amount of resource "
                                            "in the reservation")
            return
        shown = self._with_rest(_shown_chunks(info, placed), info.place)
        result.run.append(RunDecision(info.job.id, format_exec_vnode(shown), shown))
        started[info.job.id] = (info.place, placed)
        stats.jobs_started += 1

    # -- placement -------------------------------------------------------------------------------
    def _can_ever_run(self, info: _JobInfo) -> bool:
        """Whether the job fits the slice's vnodes with nothing on them, whatever their state.
        A job that never can neither blocks strict ordering nor becomes a top job."""
        memo = self._ever_memo
        shape = info.shape[0]  # the resources and place; the walltime does not matter here
        if shape not in memo:
            memo[shape] = self._on_empty(lambda: self._fit(
                info, self.now, self.now + 1, soft=False, now_mode=False,
                plan_from_ok=lambda v: True) is not None)
        return memo[shape]

    def _on_empty(self, call: Callable[[], _T],
                  capacity: dict[str, dict[str, int]] | None = None) -> _T:
        """`call()` with the slice's vnodes seen empty (a calendar of nothing booked), or
        only those of `capacity`, with that much of each."""
        saved, saved_cache, saved_future = self.calendar, self._now_cache, self._future_hard
        kept = self._kept
        assert kept is not None  # (set by `cycle` before anything reads it)
        if capacity is not None:
            self.calendar = Calendar(capacity)
        else:
            if kept.empty is None:
                kept.empty = Calendar({n: v.capacity for n, v in self.vnodes.items()})
            self.calendar = kept.empty
        self._now_cache, self._future_hard = {}, {}
        saved_undo, self._undo = self._undo, None
        try:
            return call()
        finally:
            self.calendar, self._now_cache, self._future_hard = (saved, saved_cache,
                                                                 saved_future)
            self._undo = saved_undo

    def _never_why(self, info: _JobInfo, now: float) -> str:
        """Which resource a job that can never run lacks, in PBS's words: ``Insufficient
        amount of resource: ncpus (R: 4 A: 2 T: 2)`` (requested, available now, total).
        First the job's total against the slice's; else its largest chunk against the
        largest vnode. Without one resource to blame (place, a host or vnode to match),
        the complex as a whole."""
        requested: dict[str, int] = {}
        for consumable, _match, _shown in info.chunks:
            for res, amount in consumable.items():
                requested[res] = requested.get(res, 0) + amount
        total: dict[str, int] = {}
        free: dict[str, int] = {}
        most: dict[str, int] = {}
        most_free: dict[str, int] = {}
        for name, vnode in self.vnodes.items():
            now_free = self.calendar.free(name, now, now + 1, soft=False)
            left = now_free[0] if now_free is not None and vnode.usable_now else {}
            for res, cap in vnode.capacity.items():
                total[res] = total.get(res, 0) + cap
                most[res] = max(most.get(res, 0), cap)
                free[res] = free.get(res, 0) + max(left.get(res, 0), 0)
                most_free[res] = max(most_free.get(res, 0), left.get(res, 0))
        order = sorted(requested, key=lambda r: (r != "ncpus", r))
        for res in order:
            if requested[res] > total.get(res, 0):
                return _insufficient(res, requested[res], free.get(res, 0), total.get(res, 0))
        for consumable, _match, _shown in info.chunks:
            for res in sorted(consumable, key=lambda r: (r != "ncpus", r)):
                if consumable[res] > most.get(res, 0):
                    return _insufficient(res, consumable[res], most_free.get(res, 0),
                                         most.get(res, 0))
        return "Insufficient amount of resource in the complex for this select and place"

    def _free(self, name: str, start: float, end: float, soft: bool, now_mode: bool):
        if not now_mode:
            return self.calendar.free(name, start, end, soft)
        future = self._future_hard.get(name)
        if future is None or end <= future[0] or future[1]:
            # Before a hard booking still to come, only bookings begun by now weigh, and
            # they weigh most now: an instant (one second: epoch times have no finer float
            # resolution) is enough.
            cached: Any = self._now_cache.get(name, False)
            if cached is False:
                cached = self.calendar.free(name, start, start + 1.0, soft=False)
                self._now_cache[name] = cached
            if future is None or end <= future[0]:
                return cached
            # Through the one instant hard bookings are still to start at, use peaks now
            # or then (bookings only end in between): the lesser of what is free at each.
            cross = self._cross_cache.get(name, False)
            if cross is False:
                then = self.calendar.free(name, future[0], future[0] + 1.0, soft=False)
                cross = None if cached is None or then is None else (
                    {k: min(v, then[0].get(k, v)) for k, v in cached[0].items()},
                    cached[1] and then[1])
                self._cross_cache[name] = cross
            return cross
        return self.calendar.free(name, start, end, soft)

    def _fit(self, info: _JobInfo, start: float, end: float, soft: bool, now_mode: bool,
             plan_from_ok=None, candidates: list[_VnodeInfo] | None = None
             ) -> list[tuple[str, dict[str, int]]] | None:
        """First-fit placement of the job's chunks over [start, end), or None. `candidates`
        (in vnode order) narrows the vnodes tried. On None, `_most` tells how many of the
        chunks would have fitted, where an alike job's placement got that far."""
        self._most = None
        if candidates is not None:
            pass
        elif now_mode:
            if self._counting and self._free_now < info.ncpus:
                return None  # fewer cpus free now than it needs
            candidates = self._now_candidates(info)
            if info.smallest > 1:  # (else the vnodes with any room, counted above)
                held = self._open_room.get(info.smallest)
                if held is None:
                    held = self._open_room[info.smallest] = sum(
                        map(self._room.__getitem__, map(_NAME, candidates)))
                if held < info.ncpus:
                    return None  # fewer cpus free now than it needs
            elif candidates and info.one_cpu and self._all_shared(info.place):
                held = self._held_through(end)
                if held is not None and held < info.ncpus:
                    self._most = held  # (what `_fill` would have counted, vnode by vnode)
                    return None
        else:
            ok = plan_from_ok or (lambda v: v.plan_from <= start)
            candidates = [v for v in self.order if ok(v)]
        if not candidates:
            return None
        if info.place.group is not None and self._a_set_holds(info):
            # place=group=res: every chunk on vnodes of one value of res (PBS's placement
            # set), the smallest set that fits first; a job no set could ever hold spans
            # them (PBS's default, do_not_span_psets false).
            for _, members in self._placement_sets(info.place.group, candidates):
                chunks = self._arranged(info, members, start, end, soft, now_mode)
                if chunks is not None:
                    return chunks
            self._most = None  # (one set's, not all of them)
            return None
        return self._arranged(info, candidates, start, end, soft, now_mode)

    def _arranged(self, info: _JobInfo, candidates: list[_VnodeInfo], start: float,
                  end: float, soft: bool, now_mode: bool
                  ) -> list[tuple[str, dict[str, int]]] | None:
        """`_assign` over `candidates` as the job's arrangement wants: pack, on one host."""
        if info.place.arrangement == "pack":
            for host_vnodes in _group_by_host(candidates):
                chunks = self._assign(info, host_vnodes, start, end, soft, now_mode)
                if chunks is not None:
                    return chunks
            self._most = None  # (one host's, not all of them)
            return None
        return self._assign(info, candidates, start, end, soft, now_mode)

    def _a_set_holds(self, info: _JobInfo) -> bool:
        """Whether one of the job's placement sets (`_placement_sets`) holds it with
        nothing on the vnodes, whatever their state: the slice's vnodes, or inside a
        reservation (`_set_world`) the reservation's, as much of each as it holds."""
        return self._holding_set(info)[0]

    def _holding_set(self, info: _JobInfo) -> tuple[bool, str | None]:
        """(`_a_set_holds`, and the resource's value of the first set that holds the job:
        None for the set of vnodes without it)."""
        world = self._set_world
        memo, key = self._set_memo, info.shape[0]
        if world is None and key in memo:
            return memo[key]
        group = info.place.group
        assert group is not None  # (asked only for a job with a group)
        vnodes = list(self.vnodes.values()) if world is None else [
            v for v in self.order if v.name in world]

        def first() -> tuple[bool, str | None]:
            for value, members in self._placement_sets(group, vnodes):
                if self._arranged(info, members, self.now, self.now + 1, False,
                                  False) is not None:
                    return True, value
            return False, None
        answer = self._on_empty(first, world)
        if world is None:
            memo[key] = answer
        return answer

    def _waiting(self, blocked: bool, info: _JobInfo, top_jobs: list[str]) -> str:
        """Why a job that fits nowhere now waits (`_comment`), naming for a group job the
        placement set that holds it, as PBS's scheduler does; or the plugin whose
        `sched_node_placement` refused the vnodes it fits on now."""
        plugin = self._placement_held.get(info.job.id)
        if plugin is not None and not blocked and not top_jobs:
            return f"Not Running: held by plugin {plugin} (sched_node_placement)"
        if not blocked and not top_jobs and info.place.group is not None:
            holds, value = self._holding_set(info)
            if holds and value is not None:
                return (f"Not Running: Placement set {info.place.group}={value} has too "
                        "few free resources")
        return _comment(blocked, info, top_jobs)

    def _placement_sets(self, key: str, candidates: list[_VnodeInfo]
                        ) -> list[tuple[str | None, list[_VnodeInfo]]]:
        """`candidates` grouped by their value of resource `key` (each of a string_array's
        values: a vnode may be in several sets; those without it make a set of their own,
        value None, as PBS's do), in vnode order within a set: (value, vnodes) per set, in
        order of their size (all their vnodes' ncpus, however busy), then of their first
        vnode."""
        sizes: dict[str | None, int] | None = self._set_sizes.get(key)
        if sizes is None:
            sizes = self._set_sizes[key] = {}
            for v in self.vnodes.values():
                for value in self._set_values(v, key):
                    sizes[value] = sizes.get(value, 0) + v.capacity.get("ncpus", 0)
        sets: dict[str | None, list[_VnodeInfo]] = {}
        for v in candidates:
            for value in self._set_values(v, key):
                sets.setdefault(value, []).append(v)
        return [(value, sets[value]) for value in sorted(sets, key=sizes.__getitem__)]

    def _set_values(self, v: _VnodeInfo, key: str) -> list[str | None]:
        value = v.match.get(key)
        if value is None:
            amount = v.capacity.get(key)
            return [None if amount is None else str(amount)]
        if resource_type(key, self._types) == "string_array":
            return [part.strip() for part in value.split(",") if part.strip()] or [None]
        return [value]

    def _assign(self, info: _JobInfo, candidates: list[_VnodeInfo], start: float, end: float,
                soft: bool, now_mode: bool) -> list[tuple[str, dict[str, int]]] | None:
        if info.alike:
            times, deltas, _ = self.calendar.timeline(0)
            if now_mode and info.place.arrangement == "free" and \
                    set(info.chunks[0][0]) <= {"ncpus"} and (not times or times[0] > start):
                # Most of a trace: the least ncpus each vnode has free over the window,
                # from its room now and its own hard changes to come. (Not when a change
                # is due by now: a booking made before its start, in an earlier cycle, that
                # the room now does not hold yet. `_free` reads the bookings themselves.)
                chunks = self._fill(info, candidates, self._room, (
                    self.calendar.instants(0), deltas, self.calendar.rising(0), start, end),
                    self._lows)
                if chunks is not _UNSURE:
                    return chunks
            return self._assign_alike(info, candidates, start, end, soft, now_mode)
        arrangement = info.place.arrangement
        given: dict[str, dict[str, int]] = {}
        used_hosts: set[str] = set()
        free_cache: dict[str, tuple[dict[str, int], bool] | None] = {}
        free: Any  # (`free_cache` itself: not read yet)
        host_empty: dict[str, bool] = {}
        out: list[tuple[str, dict[str, int]]] = []
        # A chunk like the one before it starts looking where that one was placed: what
        # ruled out an earlier vnode for it (room, a match, exclusivity, a used host) still
        # does, as room only shrinks while chunks are placed. A select of 1,000 one-cpu
        # chunks is then one pass over the vnodes, not 1,000.
        previous: tuple | None = None
        resume = 0
        place = info.place
        vscatter, scatter = arrangement == "vscatter", arrangement == "scatter"
        spread = vscatter or scatter
        levels: dict[str, str] = {}
        for chunk in info.chunks:
            consumable, match, _shown = chunk
            placed = False
            if chunk is not previous and chunk != previous:
                resume = 0
            previous = chunk
            for at in range(resume, len(candidates)):
                v = candidates[at]
                name = v.name
                if spread:
                    if name in given and (vscatter or scatter):
                        continue
                    if scatter and v.host in used_hosts:
                        continue
                if match and any(v.match.get(k) != val for k, val in match.items()):
                    continue
                free = free_cache.get(name, free_cache)
                if free is free_cache:
                    free = free_cache[name] = self._free(name, start, end, soft, now_mode)
                if free is None:
                    continue
                level = levels.get(v.sharing)
                if level is None:
                    level = levels[v.sharing] = exclusivity(place, v.sharing)
                if level != SHARED and name not in given:
                    if not free[1]:
                        continue
                    if level == EXCLHOST:
                        ok = host_empty.get(v.host)
                        if ok is None:
                            ok = all((self._free(o.name, start, end, soft, now_mode) or
                                      ({}, False))[1] for o in self.hosts[v.host])
                            host_empty[v.host] = ok
                        if not ok:
                            continue
                avail = free[0]
                taken = given.get(name)
                if taken is None:
                    if any(avail.get(k, 0) < amount for k, amount in consumable.items()):
                        continue
                elif any(avail.get(k, 0) - taken.get(k, 0) < amount
                         for k, amount in consumable.items()):
                    continue
                acc = given.setdefault(v.name, {})
                for k, amount in consumable.items():
                    acc[k] = acc.get(k, 0) + amount
                used_hosts.add(v.host)
                out.append((v.name, consumable))
                placed = True
                resume = at
                break
            if not placed:
                return None
        return out

    def _assign_alike(self, info: _JobInfo, candidates: list[_VnodeInfo], start: float,
                      end: float, soft: bool, now_mode: bool
                      ) -> list[tuple[str, dict[str, int]]] | None:
        """`_assign` for a job whose chunks are all alike and match nothing (``select=N:
        ncpus=1``, most of a trace): first fit chunk by chunk fills each vnode in turn with
        as many as it takes, so it is done vnode by vnode; the same choice, far fewer steps."""
        consumable = info.chunks[0][0]
        left = len(info.chunks)
        arrangement = info.place.arrangement
        spread = arrangement in ("vscatter", "scatter")
        scatter = arrangement == "scatter"
        place = info.place
        used_hosts: set[str] = set()
        host_empty: dict[str, bool] = {}
        levels: dict[str, str] = {}
        out: list[tuple[str, dict[str, int]]] = []
        for v in candidates:
            if scatter and v.host in used_hosts:
                continue
            free = self._free(v.name, start, end, soft, now_mode)
            if free is None:
                continue
            level = levels.get(v.sharing)
            if level is None:
                level = levels[v.sharing] = exclusivity(place, v.sharing)
            if level != SHARED:
                if not free[1]:
                    continue
                if level == EXCLHOST:
                    ok = host_empty.get(v.host)
                    if ok is None:
                        ok = host_empty[v.host] = all(
                            (self._free(o.name, start, end, soft, now_mode) or ({}, False))[1]
                            for o in self.hosts[v.host])
                    if not ok:
                        continue
            avail = free[0]
            take = left
            for k, amount in consumable.items():
                has = avail.get(k, 0)
                fits = has // amount if amount > 0 else (take if has >= amount else 0)
                if fits < take:
                    take = fits
            if take <= 0:
                continue
            if spread:
                take = 1
            used_hosts.add(v.host)
            out.extend([(v.name, consumable)] * take)
            left -= take
            if not left:
                return out
        self._most = len(info.chunks) - left
        return None

    def _fill(self, info: _JobInfo, candidates: list[_VnodeInfo], room: dict[str, int],
              window: _Window | None = None,
              lows: dict[str, tuple[int, list[int]]] | None = None):
        """First fit of a job of alike ncpus-only chunks on shared vnodes, from the ncpus
        each has free: `room`, for the whole window, or, with `window`, at its start and
        lowered by each vnode's own changes within it. The chunks, None when they do not
        fit, or `_UNSURE` when a vnode would hold the job exclusively (`_fit` decides).
        `lows` keeps, per vnode, where its instants after the window's start begin among
        its instants, and the least room it has up to each, for windows of that start and
        that room (`Scheduler._lows`)."""
        consumable = info.chunks[0][0]
        need = consumable.get("ncpus", 0)
        if need <= 0:
            return _UNSURE
        left = len(info.chunks)
        out: list[tuple[str, dict[str, int]]] = []
        place = info.place
        # Per vnode, its sharing is looked at only where some vnode's could make it
        # exclusive for this place.
        levels: dict[str, str] | None = None if self._all_shared(place) else {}
        instants, deltas, rising, start, end = window if window is not None else (
            {}, {}, {}, 0.0, 0.0)
        for v in candidates:
            if levels is not None:
                level = levels.get(v.sharing)
                if level is None:
                    level = levels[v.sharing] = exclusivity(place, v.sharing)
                if level != SHARED:
                    return _UNSURE
            name = v.name
            free = room[name]
            # The least it has over the window (never more), lowered only by bookings
            # still to start there: until the first, its room only grows.
            later = rising.get(name)
            mine = instants.get(name) if later and later[0] < end and free >= need else None
            if mine:
                memo = lows.get(name) if lows is not None else None
                if memo is None:
                    # (kept, they are followed to the last; else to the window's end)
                    memo = _low_track(mine, deltas, name, free, start,
                                      INFINITY if lows is not None else end)
                    if lows is not None:
                        lows[name] = memo
                first, track = memo  # the least room up to each of mine[first:]
                before_end = bisect.bisect_left(mine, end, first, first + len(track)) - first
                free = track[before_end - 1] if before_end else room[name]
            if free >= need:
                take = free // need
                if take >= left:
                    out.extend([(name, consumable)] * left)
                    return out
                out.extend([(name, consumable)] * take)
                left -= take
        self._most = len(info.chunks) - left
        return None

    def _held_through(self, end: float) -> int | None:
        """How many one-cpu chunks the usable vnodes hold from now until `end`, as `_fill`
        counts them placing a job now when there are too few (its `_most`): the ncpus free
        now, less what each vnode loses of its room by then to bookings still to start
        (`_Drops`, kept from cycle to cycle: a vnode is looked at again only when booked or
        taken back since). None when `_fill` would not count them so (a change due by now;
        another calendar)."""
        calendar, free, kept = self.calendar, self._free_now, self._kept
        if not self._counting or kept is None or calendar is not kept.calendar:
            return None
        times, deltas, _ = calendar.timeline(0)
        if times and times[0] <= self.now:
            return None
        rising = calendar.rising(0)
        if not rising:
            return free
        self._forget_touched()
        drops = kept.drops
        if drops is None:
            drops = kept.drops = _Drops()
            drops.dirty.update(rising)
        if drops.dirty:
            self._redo_drops(drops, rising, calendar.instants(0), deltas)
        if drops.times is None:
            drops.times = sorted(drops.steps)
            drops.totals = list(itertools.accumulate(map(drops.steps.__getitem__,
                                                         drops.times)))
        at = bisect.bisect_left(drops.times, end)  # (the changes before `end` only)
        return free - drops.totals[at - 1] if at else free

    def _redo_drops(self, drops: _Drops, rising: dict[str, list[float]],
                    instants: dict[str, list[float]], deltas: dict[float, dict[str, int]]
                    ) -> None:
        """The steps of `drops`' dirty vnodes made again from their least room to come."""
        room, infos, lows, now = self._room, self.vnodes, self._lows, self.now
        steps, per_vnode = drops.steps, drops.per_vnode
        for name in drops.dirty:
            for when, lost in per_vnode.pop(name, ()):
                left = steps[when] - lost
                if left:
                    steps[when] = left
                else:
                    del steps[when]
                drops.times = None
            free = room.get(name, 0)
            if free <= 0 or name not in rising:  # (first: most of a full machine's)
                continue  # (holds nothing now, or only gains room)
            info, mine = infos.get(name), instants.get(name)
            if info is None or not info.usable_now or not mine:
                continue
            memo = lows.get(name)
            if memo is None:
                memo = lows[name] = _low_track(mine, deltas, name, free, now, INFINITY)
            first, track = memo
            made, before = [], 0
            for k, low in enumerate(track):
                lost = free - low if low > 0 else free
                if lost != before:
                    when = mine[first + k]
                    made.append((when, lost - before))
                    steps[when] = steps.get(when, 0) + lost - before
                    before = lost
            if made:
                per_vnode[name] = made
                drops.times = None
        drops.dirty.clear()

    def _now_candidates(self, info: _JobInfo) -> list[_VnodeInfo]:
        """The usable vnodes, in order, with room now for the job's smallest chunk.

        Room now only shrinks during a cycle, so the vnodes with none left are dropped from
        `_open` for good: a busy cluster is not scanned whole for every job."""
        room = self._room
        smallest = info.smallest
        if smallest <= 0:
            return [v for v in self.order if v.usable_now]
        open_ = self._open
        if open_ is None:
            open_ = self._open = self._open_vnodes()
        calendar = self.calendar
        changes = calendar.changes
        if self._open_mark != changes:  # else no room changed since
            if self._closed_mark != calendar.closed:  # else each of them still has some
                self._open = open_ = [v for v in open_ if room[v.name] > 0]
                self._closed_mark = calendar.closed
            self._open_mark = changes
            self._open_room.clear()
        if smallest == 1:
            return open_
        # (narrowed from the last list for the same chunk: those left out have no more now)
        roomy = self._open_by.get(smallest)
        if roomy is None or roomy[0] != changes:
            roomy = self._open_by[smallest] = (changes, [
                v for v in (open_ if roomy is None else roomy[1]) if room[v.name] >= smallest])
        return roomy[1]

    def _open_vnodes(self) -> list[_VnodeInfo]:
        """The usable vnodes that may have room now, in order: those that had at the last
        cycle's end and those given some back since, not every usable vnode again (the
        caller drops those with none)."""
        kept, calendar = self._kept, self.calendar
        assert kept is not None  # (set by `cycle` before anything reads it)
        opened, calendar.opened = calendar.opened, set()
        if kept.open is None:
            self._closed_mark = -1  # (some of them may have no room)
            return list(kept.usable)
        infos = kept.infos
        fresh = [info for info in map(infos.__getitem__, opened) if info.usable_now]
        if not fresh:
            return kept.open
        ranks = kept.rank.__getitem__
        merged = dict(zip(map(ranks, map(_NAME, kept.open)), kept.open, strict=True))
        merged.update(zip(map(ranks, map(_NAME, fresh)), fresh, strict=True))
        return list(map(merged.__getitem__, sorted(merged)))

    def _placement_hook(self, info: _JobInfo, chunks, start: float, soft: bool = False,
                        roomy: list[_VnodeInfo] | None = None):
        """The `sched_node_placement` answer for a job the scheduler's first fit `chunks`
        places at `start` (now, or later when planning; `roomy` are then the vnodes with
        room for its smallest chunk at that time): the chunks to use, or None when the hook
        holds the job."""
        now_mode = start == self.now and roomy is None
        end = start + info.duration
        pool = self._now_candidates(info) if now_mode else roomy or []
        candidates = [v for v in pool if (now_mode or v.plan_from <= start)
                      and self._free(v.name, start, end, soft, now_mode) is not None]
        allowed = {v.name for v in candidates}

        def fit(vnodes) -> list[str] | None:
            chosen = [self.vnodes[v.name] for v in vnodes if v.name in allowed]
            found = self._fit(info, start, end, soft, now_mode, candidates=chosen) \
                if chosen else None
            return None if found is None else [name for name, _ in found]

        placement = Placement(self.name, self.now, info.job, [v.obj for v in candidates],
                              None if now_mode else start, fit)
        plugin, answer = next(((p, a) for p, a in self._answers(
            "sched_node_placement", placement=placement) if a is not None), (None, None))
        if answer is None:
            return chunks
        if answer == []:
            if now_mode and plugin is not None:
                self._placement_held[info.job.id] = plugin
            return None
        if len(answer) != len(info.chunks):
            log.warning("sched_node_placement gave %d vnodes for %d chunks of %s; ignored",
                        len(answer), len(info.chunks), info.job.id)
            return chunks
        check = self._check_choice(info, list(answer), start, end, soft, now_mode)
        if check is None:
            log.warning("sched_node_placement's choice %s does not fit %s; ignored",
                        answer, info.job.id)
            return chunks
        return check

    def _check_choice(self, info: _JobInfo, names: list[str], start: float, end: float,
                      soft: bool = False, now_mode: bool = True):
        """The chunks of a plugin's choice, or None when it breaks the job's place or does
        not fit over [start, end)."""
        arrangement = info.place.arrangement
        hosts = [self.vnodes[n].host for n in names if n in self.vnodes]
        if len(hosts) != len(names) or (
                arrangement == "vscatter" and len(set(names)) != len(names)) or (
                arrangement == "scatter" and len(set(hosts)) != len(hosts)) or (
                arrangement == "pack" and len(set(hosts)) > 1):
            return None
        if info.place.group is not None and self._a_set_holds(info):
            sets = [set(self._set_values(self.vnodes[n], info.place.group)) for n in names]
            if not set.intersection(*sets):
                return None  # (the chunks must share a placement set)
        given: dict[str, dict[str, int]] = {}
        out = []
        for name, (consumable, match, _shown) in zip(names, info.chunks, strict=True):
            v = self.vnodes.get(name)
            if v is None or not (v.usable_now if now_mode else v.plan_from <= start):
                return None
            if any(v.match.get(k) != val for k, val in match.items()):
                return None
            free = self._free(name, start, end, soft, now_mode)
            if free is None:
                return None
            level = exclusivity(info.place, v.sharing)
            if level != SHARED and name not in given and not free[1]:
                return None
            if level == EXCLHOST and name not in given and not all(
                    (self._free(o.name, start, end, soft, now_mode) or ({}, False))[1]
                    for o in self.hosts[v.host]):
                return None
            acc = given.setdefault(name, {})
            if any(free[0].get(k, 0) - acc.get(k, 0) < a for k, a in consumable.items()):
                return None
            for k, a in consumable.items():
                acc[k] = acc.get(k, 0) + a
            out.append((name, consumable))
        return out

    def _no_start_before(self, info: _JobInfo, now: float) -> tuple[float, int]:
        """A time before which the job cannot start, from the hard bookings' cpu counts
        alone: the first instant the vnodes with room for its smallest chunk have as many
        cpus free as it needs (its real start, placed, is never earlier); and the most such
        cpus at any instant from now until then."""
        calendar = self.calendar
        smallest, need = info.smallest, info.ncpus
        # The sweep's room: what it changed, over the room now (it changes few of a
        # thousand vnodes: no copy of them all).
        base, room = calendar.room_now[0], {}  # type: dict[str, int], dict[str, int]
        avail = calendar.free_total(0) if smallest == 1 else sum(
            free for free in base.values() if free >= smallest)
        times, deltas, _ = calendar.timeline(0)
        at = 0
        while at < len(times) and times[at] <= now:  # changes due by now
            avail = _apply_over(deltas[times[at]], room, base, smallest, avail)
            at += 1
        peak = avail
        if avail >= need:
            return now, 0
        for when in times[at:]:
            avail = _apply_over(deltas[when], room, base, smallest, avail)
            if avail >= need:
                return when, peak
            if avail > peak:
                peak = avail
        return INFINITY, peak

    def _earliest(self, info: _JobInfo, now: float, soft: bool):
        """The earliest time the job fits, and where: (start, chunks) or (inf, None).

        Candidate starts are now and every booking's end (a vnode that is not up yet is booked
        until it is). A sweep over the bookings in time order keeps the set of vnodes with
        room for the job's smallest chunk at each instant; only those are tried at each
        candidate start.
        """
        kind = 1 if soft else 0
        has_placement_hook = bool(self._impls("sched_node_placement"))
        calendar = self.calendar
        smallest, rank, order = info.smallest, self._rank, self.order
        room = dict(calendar.room_now[kind])
        roomy = {name for name, free in room.items() if free >= smallest}
        # The ncpus on vnodes with room for a chunk: a start where they are fewer than the
        # job needs is passed over without trying to place it there.
        need = info.ncpus
        avail = calendar.free_total(kind) if smallest == 1 else sum(map(room.__getitem__, roomy))
        times, deltas, ending = calendar.timeline(kind)
        # A job whose chunks are alike and ask only ncpus is placed from the sweep's counts:
        # with no booking to start later, its room from t on is the room at t; else the
        # least room over its window, from the changes within it (`_fill`).
        counted = info.alike and info.place.arrangement == "free" and \
            info.place.group is None and \
            set(info.chunks[0][0]) <= {"ncpus"}
        later = counted and bool(calendar.later(kind))
        # An estimate starts no sooner than one of the same shape made before it this
        # cycle for no longer a window (`_floors`); the starts before are not tried.
        floors: list[tuple[float, float]] | None = None
        floor = -INFINITY
        if soft and not has_placement_hook and self._kept is not None and \
                calendar is self._kept.calendar:
            length = info.walltime if info.walltime is not None else INFINITY
            floors = self._floors.setdefault(info.shape[0], [])
            floor = max((start for shorter, start in floors if shorter <= length),
                        default=-INFINITY)
            if floor == INFINITY:
                return INFINITY, None
        # A second sweep runs ahead to the end of the window from t, for the last instant
        # before it with too little room anywhere: no start at or before that instant fits
        # (the job needs, for its whole window, chunks whose count or ncpus the room at
        # that instant cannot hold), so no placement is tried at those starts. Counted
        # jobs count whole chunks; the others, ncpus on vnodes with room for a chunk.
        # It starts where the first placement tried failed.
        unit = info.chunks[0][0].get("ncpus", 0) if counted else 0
        wanted = len(info.chunks) if unit > 0 else need
        ahead: dict[str, int] | None = None
        held, j, short = 0, 0, -INFINITY  # the sweep ahead's count, next instant, last short
        i = 0
        for t in (now, *(when for when in times if when > now and when in ending)):
            while i < len(times) and times[i] <= t:
                avail = _apply(deltas[times[i]], room, smallest, avail, roomy)
                i += 1
            if not roomy or avail < need or t < floor:
                continue
            end = info.end(t)
            while ahead is not None and j < len(times) and times[j] < end:
                changes = deltas[times[j]]
                held = (_count(changes, ahead, unit, held) if unit > 0 else
                        _apply(changes, ahead, smallest, held, None))
                if held < wanted:
                    short = times[j]
                j += 1
            if short >= t:
                continue
            if len(roomy) * 8 > len(order):  # most have room: in order, not sorted again
                candidates = [v for v in order if room[v.name] >= smallest and v.plan_from <= t]
            else:
                vnodes = self.vnodes
                candidates = [v for v in (vnodes[n] for n in sorted(roomy, key=rank.__getitem__))
                              if v.plan_from <= t]
            chunks = _UNSURE
            if counted:  # what is free over the window, from what the sweep counted at t
                chunks = self._fill(info, candidates, room, (
                    calendar.instants(kind), deltas, calendar.rising(kind), t, end)
                    if later else None)
            if chunks is _UNSURE:
                chunks = self._fit(info, t, end, soft=soft, now_mode=False,
                                   candidates=candidates)
            if chunks is not None and has_placement_hook:
                chunks = self._placement_hook(info, chunks, t, soft, candidates)
            if chunks is not None:
                if floors is not None:
                    floors.append((length, t))
                return t, chunks
            if ahead is None:
                ahead, j = dict(room), i
                # (a counted job's chunks are its smallest: only vnodes in `roomy` hold any)
                held = (sum(map(unit.__rfloordiv__, map(room.__getitem__, roomy)))
                        if unit > 0 else avail)
        if floors is not None:
            floors.append((length, INFINITY))
        return INFINITY, None


# -- helpers ------------------------------------------------------------------------------------

_UNSURE = object()  # `_fill` cannot tell: the general placement decides
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_END, _APPLIED = operator.attrgetter("end"), operator.attrgetter("applied")
_NAME = operator.attrgetter("name")

#: (each vnode's instants in the timeline, the changes at each, the starts of the bookings
#: still to start on each (`Calendar.rising`), start, end): what `_fill` reads to know the
#: least ncpus a vnode has free over [start, end).
_Window = tuple[dict[str, list[float]], dict[float, dict[str, int]], dict[str, list[float]],
                float, float]


def _low_track(mine: list[float], deltas: dict[float, dict[str, int]], name: str, free: int,
               start: float, stop: float) -> tuple[int, list[int]]:
    """A vnode's least room from `start` on (`_fill`'s and `_held_through`'s): where its
    instants after `start` begin among `mine` (its instants), and the least room it has
    up to each of them before `stop`, from `free` (its room at `start`) lowered and raised
    by its changes at each."""
    first = bisect.bisect_right(mine, start)
    track: list[int] = []
    low = free
    for k in range(first, len(mine)):
        when = mine[k]
        if when >= stop:
            break
        free -= deltas[when][name]
        if free < low:
            low = free
        track.append(low)
    return first, track


class _Drops:
    """Per usable vnode with room now and bookings still to start: how much of its room now
    it has lost by each of its instants (steps: (instant, ncpus more than by the one
    before)); and the steps of all of them summed per instant, with their running totals
    in instant order (`Scheduler._held_through`). True but for the vnodes in `dirty`
    (booked or taken back since)."""

    __slots__ = ("per_vnode", "steps", "dirty", "times", "totals")

    def __init__(self) -> None:
        self.per_vnode: dict[str, list[tuple[float, int]]] = {}
        self.steps: dict[float, int] = {}
        self.dirty: set[str] = set()
        self.times: list[float] | None = None  # (made again after a step changed)
        self.totals: list[int] = []


def _ruled_out(failed_kin: dict[tuple, list[tuple[int, int]]], info: _JobInfo) -> bool:
    """Whether a job of the info's kin that did not fit now rules it out: it asks for at
    least one chunk more than that one's vnodes held (or as many as it asked, where that
    is not known) and no shorter walltime (`_run_jobs`)."""
    kin = info.kin
    if kin is None or not failed_kin:  # (no job failed yet: most cycles' first ones)
        return False
    failed = failed_kin.get(kin)
    if failed:  # (a loop, not any() over a generator: it runs for most jobs tried)
        count, duration = len(info.chunks), info.duration
        for fewer, shorter in failed:
            if count >= fewer and duration >= shorter:
                return True
    return False


def _expire_at(expiry: list[tuple[float, str]], end: float, job_id: str) -> None:
    """Note when a running job's booking ends (`_Kept.expiry`); one without a walltime
    never does."""
    if end < INFINITY:
        heapq.heappush(expiry, (end, job_id))


def _count(changes: dict[str, int], room: dict[str, int], unit: int, held: int) -> int:
    """One instant's ncpus changes applied to `room`: the chunks of `unit` ncpus the
    vnodes hold after (`held` before)."""
    for name, used in changes.items():
        before = room[name]
        after = room[name] = before - used
        if before > 0:
            held -= before // unit
        if after > 0:
            held += after // unit
    return held


def _apply(changes: dict[str, int], room: dict[str, int], smallest: int, avail: int,
           roomy: set[str] | None) -> int:
    """One instant's ncpus changes applied to `room` (and the set `roomy` of vnodes with
    room for a chunk of `smallest` ncpus, when given): the ncpus on such vnodes after."""
    for name, used in changes.items():
        before = room[name]
        after = room[name] = before - used
        if before >= smallest:
            avail -= before
        if after >= smallest:
            avail += after
            if roomy is not None:
                roomy.add(name)
        elif roomy is not None:
            roomy.discard(name)
    return avail


def _apply_over(changes: dict[str, int], room: dict[str, int], base: dict[str, int],
                smallest: int, avail: int) -> int:
    """`_apply` to `room` over `base`: a vnode `room` does not hold yet starts from its
    value in `base` (left as it is), taken in one comprehension, not a call per vnode
    (a dict subclass's __missing__ was)."""
    missing = [name for name in changes if name not in room]
    if missing:
        room.update({name: base[name] for name in missing})
    return _apply(changes, room, smallest, avail, None)


def parse_place_safe(spec: Any) -> Place:
    from ..units import parse_place

    try:
        return parse_place(spec)
    except ValueError:
        return Place()


def _group_by_host(vnodes: list[_VnodeInfo]) -> list[list[_VnodeInfo]]:
    groups: dict[str, list[_VnodeInfo]] = {}
    for v in vnodes:
        groups.setdefault(v.host, []).append(v)
    return list(groups.values())


def _expand(select: Iterable[Chunk], types: Mapping[str, str] | None = None
            ) -> tuple[list[tuple[dict[str, int], dict[str, str], dict[str, Any]]], int]:
    """A select's chunk instances as (consumable amounts, values to match, as exec_vnode
    shows them), and the ncpus of its smallest chunk; values read by their resources'
    `types` (`resource_amount`, `match_text`). exec_vnode shows a value as written, but a
    size in kilobytes, rounded up (``mem=1gb`` as ``mem=1048576kb``, ``1500b`` as
    ``2kb``), as OpenPBS 23.06 writes exec_vnode and resv_nodes (checked), and that is
    what the chunk takes of its vnode (PBS's scheduler counts in kilobytes): two jobs of
    ``1500b`` do not share a vnode of ``3000b`` in one cycle and then hold ``4kb`` of it.
    Callers only read the result (it is shared by every job of the same shape)."""
    chunks = []
    for chunk in select:
        consumable: dict[str, int] = {}
        match: dict[str, str] = {}
        shown = dict(chunk.resources)
        for key, value in chunk.resources.items():
            if key in LAYOUT_RESOURCES:  # (the nodefile reads them from the select)
                continue
            amount = resource_amount(key, value, types)
            if amount is not None and key not in ("host", "vnode"):
                if resource_type(key, types) == "size":
                    kb = kilobytes(amount)
                    shown[key], amount = f"{kb}kb", kb * 1024
                consumable[key] = amount
            else:
                match[key] = match_text(key, value, types)
        chunks.extend([(consumable, match, shown)] * chunk.count)
    return chunks, min((c[0].get("ncpus", 0) for c in chunks), default=0)


def _shown_chunks(info: _JobInfo, chunks: list[tuple[str, dict[str, int]]]):
    """exec_vnode chunks: what each takes of its vnode, in the job's own spelling of each
    value (``mem=4gb``). As OpenPBS 23.06 writes it (checked): a value only matched
    (``arch=linux``, ``host=``) or the chunks' layout (``mpiprocs``, ``ompthreads``) is not
    listed: ``select=1:ncpus=1:mpiprocs=2`` runs on ``(vm:ncpus=1)``."""
    if info.one_chunk and len(chunks) == len(info.chunks):
        # One request for all (most of a trace): filtered once, each chunk's vnode put
        # beside it without a loop of Python statements per chunk (a job of a thousand).
        consumable, _match, shown = info.chunks[0]
        asked = {k: v for k, v in shown.items() if k in consumable}
        return [(name, asked) for name, _ in chunks]
    out = []
    kept: dict[int, dict[str, Any]] = {}  # alike chunks share their request: filtered once
    for (name, _), (consumable, _match, shown) in zip(chunks, info.chunks, strict=True):
        mine = kept.get(id(shown))
        if mine is None:
            mine = kept[id(shown)] = {k: v for k, v in shown.items() if k in consumable}
        out.append((name, mine))
    return out


def _insufficient(res: str, requested: int, available: int, total: int) -> str:
    """PBS's ``Insufficient amount of resource: mem (R: 8gb A: 2gb T: 4gb)``."""
    def shown(amount: int) -> str:
        return format_size(amount) if res in CONSUMABLE_SIZES else str(amount)

    return (f"Insufficient amount of resource: {res} (R: {shown(requested)} "
            f"A: {shown(available)} T: {shown(total)})")


def _comment(blocked: bool, info: _JobInfo, top_jobs: list[str]) -> str:
    if blocked:
        return "Not Running: Job would break strict_ordering"
    if top_jobs:
        return "Not Running: Job would conflict with reservation or top job"
    return "Not Running: Insufficient amount of resource"


def _queue_rank(job: Job) -> int:
    """The job's place in its queue: its ``queue_rank`` (qorder's), else when it entered
    the queue, then its number (as `pbsplug.engine.jobcontrol.rank_of` reads it)."""
    given = job.queue_rank
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    return int(float(job.qtime or job.ctime or 0)) * 10_000_000 + _seq(job.id)


def _array_index(job_id: str) -> int:
    """A subjob's index (``12[3]``: 3), so that an array's subjobs run in index order, not
    in their ids' (``12[10]`` before ``12[2]``); -1 for any other job."""
    head = str(job_id).split(".", 1)[0]
    index = head.partition("[")[2].rstrip("]")
    return int(index) if index.isdigit() else -1


def _seq(job_id: str) -> int:
    head = str(job_id).split(".", 1)[0].split("[", 1)[0]
    return int(head) if head.isdigit() else 0


#: node_sort_key's one key that names no resource: the vnode's ``Priority`` attribute (from
#: -1024 to 1023; a vnode without one counts as 0, as PBS's scheduler counts it).
SORT_PRIORITY = "sort_priority"


def _sort_value(vnode: Vnode, key: str, high: bool = False) -> tuple:
    """The vnode's place under node_sort_key ``key [HIGH|LOW]``: by the value, highest
    first with HIGH; vnodes without the key come last either way (``sort_priority``: their
    Priority, 0 when unset)."""
    if not key:
        return ()
    if key == SORT_PRIORITY:
        value = vnode.get("Priority")
        number = float(value) if _is_number(value) else 0
        return (0, -number if high else number)
    value = vnode.resources_available[key] if key in vnode.resources_available else vnode.get(
        key)
    if value is None:
        return (1, 0)
    amount = resource_amount(key, value)
    number = amount if amount is not None else float(value) if _is_number(value) else 0
    return (0, -number if high else number)


def _is_number(value: Any) -> bool:
    try:
        float(value)
        return True
    except (TypeError, ValueError):
        return False


# -- job_sort_formula ----------------------------------------------------------------------------

_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.Pow: operator.pow, ast.Mod: operator.mod}


def formula_problem(text: str) -> str | None:
    """Why `text` is no job_sort_formula the scheduler can use, or None (qmgr's check)."""
    try:
        _compile_formula(text)
    except ValueError as exc:
        return str(exc)
    return None


def _booleans(types: Mapping[str, str]) -> list[str]:
    """The boolean resources: PBS's own and the custom ones of `types`."""
    return [n for n, t in {**types, **RESOURCE_TYPES}.items() if t == "boolean"]


def _resv_enabled(vnode: Vnode) -> bool:
    """Whether the vnode may hold a reservation (its resv_enable, true when unset or not a
    boolean PBS reads)."""
    try:
        return parse_bool(vnode.get("resv_enable", True))
    except ValueError:
        return True


def _formula_amount(name: str, value: Any) -> int:
    """A resource value as job_sort_formula counts it: its amount (`resource_amount`; a
    layout resource's, mpiprocs=4, too), else 0."""
    if name in LAYOUT_RESOURCES:  # (no amount a vnode holds, but a count: mpiprocs=4)
        return int(value) if str(value).isdigit() else 0
    return resource_amount(name, value) or 0


def _compile_formula(text: str | None):
    """job_sort_formula as a function of (job, queue_priority, now). Arithmetic (+ - * / % **,
    parentheses, numbers) over resource names from Resource_List (sizes in bytes, durations
    in seconds), queue_priority and eligible_time. `ValueError` names what is not allowed."""
    if not text:
        return None
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"job_sort_formula {text!r} is not an expression: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Constant, ast.Name,
                                 ast.Load, ast.USub, ast.UAdd, *_BINOPS)):
            raise ValueError(f"job_sort_formula {text!r}: {type(node).__name__} is not allowed")

    def evaluate(node, env):
        if isinstance(node, ast.Expression):
            return evaluate(node.body, env)
        if isinstance(node, ast.Constant):
            return float(node.value)
        if isinstance(node, ast.Name):
            return env(node.id)
        if isinstance(node, ast.UnaryOp):
            value = evaluate(node.operand, env)
            return -value if isinstance(node.op, ast.USub) else value
        left, right = evaluate(node.left, env), evaluate(node.right, env)
        try:
            return _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            return 0.0

    def run(job: Job, queue_priority: float, now: float,
            chunks: Callable[[], tuple[Chunk, ...]] | None = None) -> float:
        """The job's value; `chunks` gives those it is placed by (`job_select` with its
        defaults), asked for only when the formula names a resource."""
        read: list[tuple[Chunk, ...]] = []

        def env(name: str) -> float:
            if name == "queue_priority":
                return queue_priority
            if name == "eligible_time":
                return max(0.0, now - float(job.qtime or job.ctime or now))
            if name not in ("walltime", "cput"):
                if not read:
                    read.append(chunks() if chunks is not None else job_select(job))
                named = [c for c in read[0] if name in c.resources]
                if named:
                    # What the chunks ask for in all, as PBS's server sets the job-wide
                    # value from the select (a job-wide value written beside it does not
                    # count); a chunk that does not name it asks for none.
                    return float(sum(c.count * _formula_amount(name, c.resources[name])
                                     for c in named))
            value = job.Resource_List[name]
            if value is None:
                return 0.0
            if name in ("walltime", "cput"):
                return float(parse_duration(value))
            return float(_formula_amount(name, value))

        return float(evaluate(tree, env))

    return run


__all__ = ["DEFAULT_PARTITION", "EXCL", "Scheduler", "parse_exec_vnode"]
