"""The simulator's engine: a trace replayed on a virtual clock through the site's own
scheduler, lifecycle rules and plugins.

One loop over *instants* (the times at which something happens), in time order. At each
instant, in this order (the tie rules; docs/simulator.md):

1. **Ends.** Jobs whose end time has come end, in the order they started (a job ends at
   ``start + min(run_time, walltime)``; one that needed more than its walltime is killed at
   the walltime, final state WALLTIME). Their end hooks fire (`pbsplug.lifecycle`).
2. **Hosts.** Power transitions that complete now (a boot or a shutdown) take effect.
3. **Submissions.** Trace jobs submitted now are queued, in trace order (queuejob hooks);
   a job in a route queue is routed (`_route`, by the engine's `routing.route_job`).
4. **Periodic hooks** due now run, in hook order.
5. **One scheduling cycle** of each scheduler instance, if anything changed since the last
   cycle and a job could start, a job submitted may never run, or a periodic hook reads
   its estimates (`Simulator._could_start`:
   a cycle that could not start anything is skipped; one asked whether a job can ever run
   rejects it at its submission, as PBS's scheduler says `Can Never Run` at the cycle
   each qsub starts). Its run decisions are applied in order: runjob, then the start
   events.

Instants are whole seconds: a trace's fractional times are rounded as jobs enter
(`whole_seconds`). So a job ending at T frees its cpus for a job submitted at T, and a job
submitted at T can start at T; a job a start hook requeued gets a second cycle at the same
instant. Jobs that ended are handed to the `ResultSink` as they end; a state record goes to
it at every instant where the machine's counts changed. Nothing depends on the wall clock,
hash order or the set of installed plugins beyond the site's enabled ones: the same inputs
give the same outputs.

Memory grows with the jobs in the system (queued and running), never with the trace: the
trace is read one job ahead.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import math
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import clock, lifecycle
from ..events import EVENTS, Event
from ..objects import Job, Queue, Server, Vnode, apply_to_attrs
from ..plugins import FAILED as PLUGIN_FAILED
from ..runner import Runner
from ..scheduler import (
    JobLog,
    Policy,
    SchedulerSetupError,
    Snapshot,
    VnodeLog,
    build_schedulers,
)
from ..scheduler.instances import POLICY_KEYS, sched_instance
from ..scheduler.model import (
    LAYOUT_RESOURCES,
    Chunk,
    job_select,
    node_sort_order,
    resource_amount,
    schedselect,
)
from ..scheduling import SchedulerInstance
from ..units import (
    default_chunks,
    format_duration,
    format_exec_host,
    parse_select,
    select_value,
)
from ..values import CHUNK_RESOURCES, RESOURCE_TYPES
from .carried import Carried
from .machine import DEFAULT_QUEUE, ENTRY_KEYS, Machine, PowerModel
from .records import (
    COMPLETED,
    FAILED,
    KILLED,
    MACHINE_STATES,
    REJECTED,
    WALLTIME,
    JobResult,
    MachineStates,
    ResultSink,
    TraceJob,
)

if TYPE_CHECKING:
    from ..engine import limits
    from ..engine.cpuslots import CpuSlots
    from ..engine.errors import PbsError
    from ..runner import Outcome
    from .machine import Host

#: The events the simulator fires, and where. The others never happen in a replay (no user
#: alters, moves or deletes a job of a trace; no reservation is submitted).
SIM_EVENTS = ("queuejob", "runjob", "execjob_begin", "execjob_prologue", "execjob_launch",
              "execjob_abort", "execjob_epilogue", "execjob_end", "jobobit", "periodic",
              "exechost_startup")
#: The scheduler's hooks (called by the scheduling library in the simulator's process).
SCHED_HOOKS = ("sched_instances", "sched_partition", "sched_cycle_begin", "sched_cycle_end",
               "sched_node_availability", "sched_job_order", "sched_node_placement")
#: Policy presets for ``--policy`` (the site's ``[sim.scheduler]`` table overrides them).
PRESETS: dict[str, dict[str, Any]] = {
    "pbs": {},
    "easy": {"strict_ordering": True, "backfill": True, "backfill_depth": 1},
    "fifo": {"strict_ordering": True, "backfill": False},
}
#: The simulated power driver's record of each host's power (see the power plugin's
#: ``simulated`` driver): ``{"host": {"power": "on"|"off", "since": t}}``.
POWER_FILE = "simulated_power.json"
#: Each host's boot and shutdown seconds by the platform, for that driver, which takes them
#: in place of its own: ``{"hosts": {"host": {"boot": s, "shutdown": s}}}``. The replay's
#: host is up when its platform boot ends; the driver finds it ready then, not before.
PLATFORM_FILE = "simulated_platform.json"
SLEEP = "sleep"
#: Simulated seconds with queued jobs and nothing else happening (nothing running, nothing
#: to submit, no periodic hook bringing the machine to a state the scheduler has not seen
#: since, `Simulator._new_state`, nor a host's power transition bringing one: `_fingerprint`
#: holds the hosts' power) after which the replay ends: what is left queued never starts.
STALL = 7 * 86400.0
#: The vnode attributes a scheduler reads besides resources_available: what makes a
#: machine's state another for the stall (`Simulator._fingerprint`); a comment does not.
_SCHEDULED = ("state", "sharing", "partition", "Priority", "resv_enable")
QUEUE = DEFAULT_QUEUE
#: How many sums of the hosts' states a replay keeps: a machine comes back to few, but
#: memory must not grow with the trace.
MEMO_SIZE = 4096
SERVER = "sim"
#: What the replay's clock reads at the trace's time 0: 1971-01-01 00:00:00 UTC. A job's
#: times (qtime, stime, ...) and `pbsplug.clock` are EPOCH + trace time, as a server's are
#: dates, never 0: an stime of 0 reads as no start time (a job started at the trace's
#: first second was seen by the scheduler as starting again at every cycle). What the
#: sink receives is trace time again.
EPOCH = 365 * 86400


def whole_seconds(job: TraceJob) -> TraceJob:
    """`job` at a replay's resolution of time, PBS's: the second. A fractional submit time
    or run time is rounded to the nearest second (a half up), a fractional requested time
    up (a job is never killed before the time it asked for); a job whose times are whole
    is returned as it is. A server's times are whole seconds (qtime, stime), and the
    scheduler plans a running job to ``stime + walltime``: a job started at 10.7 had an
    stime of 10 and was planned to end 0.7 s early. Whole seconds also keep the clock's
    sums exact (EPOCH + 10.7 - EPOCH is 10.699999998...), so that which of two instants
    comes first, or whether they are one, never depends on how a float rounds."""
    submit, run, wall = job.submit, job.run_time, job.walltime
    if submit % 1 or run % 1 or (wall is not None and wall % 1):
        return replace(job, submit=float(math.floor(submit + 0.5)),
                       run_time=float(math.floor(run + 0.5)),
                       walltime=None if wall is None else float(math.ceil(wall)))
    return job


class SimError(Exception):
    """What stops a simulation, in one line."""


class TraceOrderError(SimError):
    """Trace lines that cannot be replayed as given: ``LINE: job ID: why`` (the caller
    knows the file)."""


@dataclass
class HookUse:
    """Which plugin hooks ran in a simulation, and which were left out and why."""

    ran: Counter[tuple[str, str]] = field(default_factory=Counter)  # (plugin, event) -> runs
    failed: Counter[tuple[str, str]] = field(default_factory=Counter)  # ... ended in error/alarm
    first_failure: dict[tuple[str, str], str] = field(default_factory=dict)
    scheduler: set[tuple[str, str]] = field(default_factory=set)  # (plugin, sched hook)
    left_out: dict[tuple[str, str], str] = field(default_factory=dict)
    #: (plugin, key) -> the site's state folder, set aside for the replay's own.
    state_folders: dict[tuple[str, str], Any] = field(default_factory=dict)

    def count(self, run: Any, event: str) -> None:
        """One run of a hook (`pbsplug.HookRun`) for `event`."""
        key = (run.hook, event)
        self.ran[key] += 1
        if run.outcome in ("error", "alarm"):
            self.failed[key] += 1
            first = (str(run.message or "").strip().splitlines() or [""])[0][:200]
            self.first_failure.setdefault(key, f"{run.outcome}: {first}".rstrip(": "))

    def lines(self) -> list[str]:
        out = [f"ran: {plugin} {hook} ({count:,} time{'' if count == 1 else 's'}"
               + (f", {self.failed[plugin, hook]:,} failed, the first with "
                  f"{self.first_failure[plugin, hook]}" if self.failed[plugin, hook] else "")
               + ")" for (plugin, hook), count in sorted(self.ran.items())]
        out += [f"ran: {plugin} {hook} (in every scheduling cycle)"
                for plugin, hook in sorted(self.scheduler)]
        out += [f"left out: {plugin} {hook}: {why}"
                for (plugin, hook), why in sorted(self.left_out.items())]
        out += [f"state folder: {plugin} {key} {site} (the site's) left for the replay's own "
                "work folder" for (plugin, key), site in sorted(self.state_folders.items())]
        return out


@dataclass
class Summary:
    """What a run came to (the sink has the details)."""

    jobs: int = 0
    rejected: int = 0
    killed: int = 0
    start: float = 0.0
    end: float = 0.0
    cycles: int = 0
    cycles_skipped: int = 0
    energy: float = 0.0          # joules, whole machine
    wall: float = 0.0            # seconds the run took
    hooks: HookUse = field(default_factory=HookUse)


#: A request completed (`Simulator._complete`): its Resource_List and its schedselect (None:
#: a select that does not parse).
_Completed = tuple[dict[str, Any], str | None]
#: Hosts per (machine state, figure drawn) (`Simulator._state_sums`), and with it the hosts
#: per state and the watts they draw.
_StatesKey = tuple[tuple[str, str, int], ...]
_StateSums = tuple[_StatesKey, dict[str, int], float]


class _Run:
    """A job in the system."""

    __slots__ = ("tj", "attrs", "job", "seq", "start", "end", "vnodes", "hosts", "ncpus",
                 "killed", "needs", "energy", "run_count")

    def __init__(self, tj: TraceJob, attrs: dict[str, Any], seq: int):
        self.tj = tj
        self.attrs = attrs
        self.job = Job(tj.job_id, attrs)
        self.seq = seq
        self.start: float | None = None
        self.end = 0.0
        self.vnodes: dict[str, int] = {}   # vnode -> ncpus
        self.hosts: tuple[int, ...] = ()
        self.ncpus = 0
        self.killed = False
        self.needs = (0, 0)
        self.energy = 0.0
        self.run_count = 0


class _Host:
    __slots__ = ("spec", "busy", "state", "watts", "since", "power", "until", "asleep",
                 "woken", "energy", "base", "counted", "figures", "cpus", "has")

    def __init__(self, spec: Host, model: int):
        self.spec = spec
        #: Read at every change of its jobs: where its power model's counts start in
        #: `Simulator._counts` and the one it is counted in, its watts per figure and its
        #: cpus: the most its vnodes have had since it was last empty (at least 1), what a
        #: job's share of its busy watts is of (`Simulator._resize` tells why).
        self.base = model * len(_FIGURES)
        self.counted = self.base + _FIGURE_INDEX["idle"]
        self.figures = {f: getattr(spec.power, f) for f in _FIGURES}
        self.cpus = spec.ncpus * len(spec.vnodes)
        self.has = self.cpus       # its vnodes' ncpus now, as hooks left them
        self.busy = 0              # cpus in use
        self.state = "idle"        # one of records.MACHINE_STATES
        self.watts = "idle"        # which of the power model's figures it draws
        self.since = 0.0
        self.power = "on"          # the driver's view: on (up or booting) or off
        self.until = 0.0           # when a switching_on/off ends
        self.asleep = False        # its vnodes are in state sleep
        self.woken = False         # powered on again since it was off (up, still asleep)
        self.energy: dict[str, float] = {}

    def by_jobs(self, now: float) -> bool:
        """Whether it draws by its jobs alone now (busy or idle): up, awake, not switching."""
        return self.power == "on" and self.until <= now and not self.asleep

    def settle_cpus(self) -> None:
        """Its `cpus`, after its jobs or its vnodes' cpus changed (`Simulator._resize` tells
        why): those of its vnodes now when it is empty, else the most they have had since
        it was last empty. (`Simulator._occupy_alike` has the empty case inline.)"""
        self.cpus = max(self.has, 1) if self.busy <= 0 else max(self.cpus, self.has)


#: The final state of a job that ran its time, by its trace status (others: COMPLETED).
_STATUS_STATES: dict[int | None, str] = {0: FAILED, 5: KILLED}


#: A replayed job's Exit_status by its final state: 0 when it completed; PBS's
#: JOB_EXEC_KILL_WALLTIME when killed at its walltime, as on the engine; 1 otherwise.
_EXIT_STATUS = {COMPLETED: 0, WALLTIME: lifecycle.KILLED_OVER["walltime"]}


def _exit_status(state: str) -> int:
    return _EXIT_STATUS.get(state, 1)


#: The power model's figures a host may draw (`_Host.watts`), and the machine state of a
#: host that draws each (`Simulator._host_state`).
_FIGURE_STATES = {"busy": "computing", "idle": "idle", "asleep": "sleeping", "off": "sleeping",
                  "booting": "switching_on", "shutting_down": "switching_off"}
_FIGURES = tuple(_FIGURE_STATES)
#: The figures a host with jobs may draw besides busy: its power changed under them
#: (`Simulator._charge_odd`).
_ODD_FIGURES = frozenset({"booting", "shutting_down", "off"})
#: Vnode attributes a job's start or end sets (`Simulator._occupy`).
_USE_TIMES = ("last_used_time", "last_state_change_time")
_FIGURE_INDEX = {f: i for i, f in enumerate(_FIGURES)}


class _SafeHooks:
    """The plugin manager's hook relay, narrowed to the implementations the simulator may
    call (the scheduling library reads ``getattr(hooks, name).get_hookimpls()``)."""

    def __init__(self, relay: Any, allowed: dict[str, set[str]]):
        self._relay = relay
        self._allowed = allowed

    def __getattr__(self, name: str) -> Any:
        caller = getattr(self._relay, name)
        allowed = self._allowed.get(name, set())
        return _SafeCaller(caller, allowed)


class _SafeCaller:
    def __init__(self, caller: Any, allowed: set[str]):
        self._caller = caller
        self._allowed = allowed

    def get_hookimpls(self) -> list[Any]:
        return [i for i in self._caller.get_hookimpls() if i.plugin_name in self._allowed]

    def __call__(self, **kwargs: Any) -> list[Any]:
        return [i.function(**kwargs) for i in reversed(self.get_hookimpls())]


class Simulator:
    """One simulation: a machine, the site's plugins (a `PluginSet`, or None for none), a
    scheduling policy and a sink for what happens. Its work folder (`workdir`, else one of
    its own, made here and removed when `run` ends) is the pbsplug home while it sets up
    its hooks and while it runs. The plugins' state folders are the replay's, whatever the
    site set, from then until the end of `run` (`PluginSet.private_state_folders`; `close`,
    for a simulator not run): a simulator runs once, and a second `run` is a `SimError`.
    A plugin set loaded for it (`pbsplug sim`'s) is loaded inside `replay_home`, so its
    plugins are configured with the same home, once: not again as it runs nor after."""

    def __init__(self, machine: Machine, sink: ResultSink, *, plugins: Any = None,
                 policy: dict[str, Any] | None = None, server_attrs: dict[str, Any] | None = None,
                 workdir: str | os.PathLike[str] | None = None,
                 progress: Callable[[float, int, int], None] | None = None,
                 kill_at_walltime: bool = True,
                 scheds: dict[str, dict[str, Any]] | None = None):
        self.machine = machine
        #: The clock's reading at trace time 0 (`EPOCH`); `now` is in clock time.
        self.epoch = float(EPOCH)
        self.sink = sink
        self.plugins = plugins
        self.progress = progress
        #: False: a job runs its recorded time even past its walltime (as AccaSim replays
        #: a trace); the scheduler then sees it as about to end, as PBS sees an overrun.
        self.kill_at_walltime = kill_at_walltime
        self.now = 0.0
        self.summary = Summary()
        self.server = Server(SERVER, {**(server_attrs or {}), **(policy or {})})
        self.queues: dict[str, Queue] = {}
        self._queue_attrs = {name: attrs for name, attrs in machine.queues.items()}
        #: Whether the platform declares memory: a select's mem is requested only then.
        self._has_mem = any(host.mem is not None for host in machine.hosts)
        # Vnodes: the attributes (the simulator's store), and the objects the scheduler reads.
        self.vnode_attrs: dict[str, dict[str, Any]] = {}
        self.vnode_host: dict[str, int] = {}
        self.room: dict[str, int] = {}                 # free ncpus per vnode
        self.hosts: list[_Host] = []
        model_ids: dict[PowerModel, int] = {}  # equal models share one: counted together
        for host in machine.hosts:
            self.hosts.append(_Host(host, model_ids.setdefault(host.power, len(model_ids))))
            for name in host.vnodes:
                avail: dict[str, Any] = {"ncpus": host.ncpus, "host": host.name,
                                         "vnode": name}
                if host.mem is not None:
                    avail["mem"] = f"{host.mem // 1024}kb"
                attrs: dict[str, Any] = {"state": "free", "resources_available": avail,
                                         "sharing": "default_shared",
                                         "poweroff_eligible": host.poweroff_eligible,
                                         # (the replay's start: `_loop`)
                                         "last_used_time": 0, "last_state_change_time": 0}
                if host.partition:
                    attrs["partition"] = host.partition
                self.vnode_attrs[name] = attrs
                self.vnode_host[name] = host.index
                self.room[name] = host.ncpus
        self.vnodes = {n: Vnode(n, a) for n, a in self.vnode_attrs.items()}
        self._models = list(model_ids)  # the power models, by id
        #: Each vnode's host index and host, looked up at every start and end.
        self._vnode_slot = {n: (i, self.hosts[i]) for n, i in self.vnode_host.items()}
        self.queued: dict[str, _Run] = {}
        self.running: dict[str, _Run] = {}
        #: Route queues (the platform's ``queue_type = "Route"``) and the jobs in them,
        #: which no scheduler sees (`_route`); each one's request as it was before its
        #: queue's defaults (a destination applies its own); when jobs routed into another
        #: route queue are routed on: (when, seq, job id).
        self._routes = {name for name, attrs in machine.queues.items()
                        if attrs.get("queue_type") == "Route"}
        #: Each route queue's retry grid step (its route_retry_time, a router's pass at
        #: least: a replay's tries are at whole seconds) and its route_lifetime (0: none).
        self._route_times: dict[str, tuple[float, int]] = {}
        if self._routes:
            from ..engine import routing

            self._route_times = {
                name: (max(float(routing.retry_time(machine.queues[name])),
                           routing.PASS_EVERY), routing.lifetime(machine.queues[name]))
                for name in self._routes}
        self.routing: dict[str, _Run] = {}
        self._requested: dict[str, dict[str, Any]] = {}
        self._reroutes: list[tuple[float, int, str]] = []
        #: The jobs a destination refused for now (its limits on queued jobs), tried again
        #: at their retry time: (when, seq, job id); each one's due time (none, inf, while
        #: it is parked), the count version it was refused at (`_route_due`) and the errors
        #: of the destinations' limits that refused it (asked again while the counts are so,
        #: each refuses alike); the destinations that refused each job for good, not asked
        #: again while it stays.
        self._retries: list[tuple[float, int, str]] = []
        self._retry_at: dict[str, tuple[float, tuple[int, int], dict[str, Any]]] = {}
        self._refused: dict[str, set[str]] = {}
        #: Waiting jobs parked (`_retry`): no try can route them until a count they were
        #: refused on changes. Each one's next tick on its retry grid, the grid's step and
        #: the counts that refused it (keys of the tally's); the jobs parked on each count,
        #: woken when it falls (`_wake`). The router's last try: (instant, seq of
        #: the job tried; -inf before that instant's pass, inf after it).
        self._parked: dict[str, tuple[float, float, tuple[tuple[Any, ...], ...]]] = {}
        self._parked_on: dict[tuple[Any, ...], dict[str, None]] = {}
        self._tried: tuple[float, float] = (-math.inf, math.inf)
        #: Queues with rules on who and how many may enter (the platform's `ENTRY_KEYS`),
        #: checked by the engine's code (`admission`, `limits`) at qsub and when routed.
        self._ruled = {name for name, attrs in machine.queues.items()
                       if any(key in attrs for key in ENTRY_KEYS)}
        #: What the jobs count against the limits on queued jobs of the queues and of the
        #: complex (the server's, `[sim.server]`), the engine's `limits.Tally` with the
        #: same server and queue attributes (None: no limit is set); whether the complex
        #: has any (then every job is checked at qsub and when routed, whatever its queue);
        #: the object or attributes each job was last counted as (`_sync_counts`).
        self._tally: limits.Tally | None = None
        self._limit_error: tuple[type[limits.LimitError], ...] = ()  # (with a tally)
        self._complex_limited = False
        if self._ruled or server_attrs:
            from ..engine import limits as queued_limits

            self._limit_error = (queued_limits.LimitError,)
            self._complex_limited = queued_limits.has_limits(server_attrs or {})
            if self._complex_limited or any(map(queued_limits.has_limits,
                                                machine.queues.values())):
                self._tally = queued_limits.Tally(server_attrs or {}, self._queue_attrs,
                                                  RESOURCE_TYPES, ())
                if "walltime" in self._tally.kinds:  # (it reads a stand-in as none)
                    self._tally = _requested_tally(server_attrs or {}, self._queue_attrs)
        self._counted: dict[str, limits.JobAttrs] = {}
        self._counted_mark = -1  # the schedulers' log's mark when counted last
        #: How many times the route queues' jobs were counted anew (`_count`): with the
        #: log's mark, what the counts are a function of (`_count_version`).
        self._route_moves = 0
        #: What the schedulers were told of the jobs: each job's object in their view, and
        #: the log of objects added and taken away (a cycle reads only what changed).
        self._told: dict[str, Job] = {}
        self._log = JobLog()
        self._ends: list[tuple[float, int, str]] = []     # (end, seq, job id)
        self._wakes: list[tuple[float, int]] = []          # (when, host): a transition ends
        #: (Execution_Time, job id) of the jobs a hook made wait (W): queued (Q) then.
        self._due: list[tuple[float, str]] = []
        #: Queued jobs by what they need at least: (ncpus of the smallest chunk, ncpus).
        #: (Plain dicts here and for the other counts read at every start and end: a
        #: Counter's item access is three times a dict's.)
        self._needs: dict[tuple[int, int], int] = {}
        #: Something other than submissions changed since the last cycle (an end, a
        #: requeue, a vnode); else what the jobs submitted since need (`_needs`).
        self._touched = True
        self._last_change = 0.0
        #: What the periodic hooks change weighs on the stall only when nothing else
        #: happens (`_loop`, `_periodic`): the fingerprints of the states the scheduler
        #: has seen since the stall's last job change, as of `_seen_from` (that
        #: `_last_change`; another one says the set is stale).
        self._quiet = False
        self._seen: set[bytes] = set()
        self._seen_from = -math.inf
        self._new_needs: set[tuple[int, int]] = set()
        #: A job submitted since the last cycle may ask more than the machine could ever
        #: give (`_beyond_machine`): the next cycle runs, to reject it at once.
        self._doubt = False
        #: The most of each amount one vnode has, and the machine's ncpus, whatever the
        #: vnodes' states (None: to be summed again, after a hook changed a vnode).
        self._most: tuple[dict[str, int], int] | None = None
        #: (request, queue) -> the request completed, or why it is refused (`_complete`).
        self._requests: dict[tuple[tuple[tuple[str, Any], ...], str], _Completed | str] = {}
        self._seq = 0
        self._states_key: tuple[_StatesKey, int, int, int] | None = None
        #: `_counts` changed since `_record_states` last summed it (else its sums hold);
        #: the sums made, by `_counts`'s items.
        self._counts_changed = True
        self._sums: dict[tuple[tuple[int, int], ...], _StateSums] = {}
        self._counts_key: _StatesKey = ()
        self._state_counts: dict[str, int] = {}
        self._watts = 0.0
        self._sleepers: set[str] = set()  # vnodes in state sleep
        self._host_sleepers: Counter[int] = Counter()  # host index -> its vnodes asleep
        self._host_index = {host.name: host.index for host in machine.hosts}
        self._driver: dict[str, Any] = {}  # the simulated driver's record, as last read
        self._driver_text = ""
        #: The record's file as last read: (inode, size, mtime, ctime), None before.
        self._driver_file: tuple[int, int, int, int] | None = None
        #: The server's events' vnode objects as the last event carried them, each with the
        #: attributes it was made of, while their vnode is unchanged (`_event_vnodes`).
        self._event_vnode_cache: dict[str, Carried[Vnode]] = {}
        #: A periodic event's queued jobs' objects as the last run carried them, each with
        #: the schedulers' object of its job then (`_event_jobs`).
        self._event_job_cache: dict[str, tuple[Job, Carried[Job]]] = {}
        #: Which of its vnodes' cpus each running job holds, numbered as the engine numbers
        #: them (its `CpuSlots`): a periodic event's vnode lists them in its ``jobs``, as
        #: the engine's does. Kept only for a replay with periodic hooks (`_setup_hooks`):
        #: at every start and end it costs each job a step per vnode, and no other event
        #: carries ``jobs``.
        self._cpu_slots: CpuSlots | None = None
        #: The vnodes hooks changed, so that a scheduler reparses only those.
        self._vnode_log = VnodeLog()
        self._room_count: dict[int, int] = {}  # vnodes by free ncpus
        for free in self.room.values():
            self._room_count[free] = self._room_count.get(free, 0) + 1
        self._free_total = sum(self.room.values())
        self._simple_order = not (policy or {}).get("job_sort_formula") and len(
            {q.get("Priority", 0) for q in machine.queues.values()} | {0}) == 1
        self._busy = 0
        #: Hosts by (machine state, power model id, figure drawn), each numbered (a tuple
        #: key would be built and hashed at every change): the states' counts and watts.
        self._count_keys = [(_FIGURE_STATES[f], model, f) for model in range(len(self._models))
                            for f in _FIGURES]
        self._counts: dict[int, int] = {}
        for counted in (host.counted for host in self.hosts):
            self._counts[counted] = self._counts.get(counted, 0) + 1
        #: What lets a job be charged in one pass (`_occupy_alike`): the vnodes that have
        #: a host of their own, and each one's host; whether all hosts have one power
        #: model; the hosts whose power or sleep changed since they last drew by their
        #: jobs alone (`_plain`).
        self._alone = {n for host in machine.hosts if len(host.vnodes) == 1
                       for n in host.vnodes}
        self._host_of = {n: host for n, (_, host) in self._vnode_slot.items()}
        self._one_model = len(model_ids) == 1
        self._odd: set[int] = set()
        #: What `close` undoes: the plugins' private state folders, then the work folder
        #: of its own. `closed`: `run` would replay with the site's folders back.
        self._scope = contextlib.ExitStack()
        self.closed = False
        try:
            #: The plugins' home while the hooks are set up and while the replay runs.
            self.workdir = self._scope.enter_context(replay_home(workdir, home=False))
            with _home(self.workdir):  # (a plugin configured again for its private folder)
                self._setup_hooks(policy or {}, scheds or {})
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """Give the plugins their site's state folders back, and remove the work folder of
        its own (`run` does it as it ends). The simulator cannot run after it."""
        self.closed = True
        self._scope.close()

    # -- hooks --------------------------------------------------------------------------------
    def _setup_hooks(self, policy: dict[str, Any], scheds: dict[str, dict[str, Any]]) -> None:
        use = self.summary.hooks
        self._chains: dict[str, tuple[str, ...]] = {}
        allowed: dict[str, set[str]] = {}
        self.runner = None
        if self.plugins is not None:
            # Every plugin keeps its records in the replay's work folder (the pbsplug home
            # while it runs), never in a live site's: the simulator reads the simulated
            # driver's there, and writes the platform's.
            use.state_folders = self._scope.enter_context(
                self.plugins.private_state_folders())
            for name in sorted({plugin for plugin, _ in use.state_folders}):
                record = self.plugins.get(name)
                if record is not None and record.status == PLUGIN_FAILED:
                    raise SimError(f"plugin {name}: configured with the replay's state "
                                   f"folder: {record.error}".replace("\n", "; "))
        records = list(self.plugins.enabled) if self.plugins is not None else []
        for record in records:
            check = getattr(record.info, "sim_check", None)
            try:
                why = check(record.config) if check is not None else None
            except Exception as exc:  # (a plugin's bug: the replay cannot know it is safe)
                raise SimError(f"plugin {record.name}: its sim_check failed: "
                               f"{type(exc).__name__}: {exc}".replace("\n", "; ")) from None
            if why:  # (its hooks would touch a real host: not left out in silence either)
                raise SimError(f"plugin {record.name}: {why}".replace("\n", "; "))
            safe = set(getattr(record.info, "sim_safe", ()) or ())
            for hook in record.hooks:
                if hook in EVENTS:
                    if hook not in record.attributes.events:
                        continue
                    if hook not in SIM_EVENTS:
                        use.left_out[(record.name, hook)] = "no such event in a replayed trace"
                    elif hook not in safe:
                        use.left_out[(record.name, hook)] = "not declared sim_safe by the plugin"
                    else:
                        allowed.setdefault(hook, set()).add(record.name)
                elif hook in SCHED_HOOKS:
                    if hook not in safe:
                        use.left_out[(record.name, hook)] = "not declared sim_safe by the plugin"
                    else:
                        allowed.setdefault(hook, set()).add(record.name)
        if self.plugins is not None:
            self.runner = Runner(self.plugins, mode="inprocess")
            for event in SIM_EVENTS:
                names = allowed.get(event, set())
                chain = [e.name for e in self.runner.chain(event) if e.name in names]
                if chain:
                    self._chains[event] = tuple(chain)
            self._freq = {e.name: e.attrs.freq for e in self.runner.chain("periodic")
                          if e.name in allowed.get("periodic", set())}
            hooks = _SafeHooks(self.plugins.hook, allowed)
        else:
            self._freq = {}
            hooks = None
        self._sched_hooks = {h for h in SCHED_HOOKS if allowed.get(h)}
        #: Those that make every cycle run (`_could_start`).
        self._deciding_hooks = self._sched_hooks - {"sched_node_availability"}
        # A job's start and end events that have hooks to fire (`_fire` does nothing for
        # the others; at every start and end, that nothing was three calls).
        self._start_events = tuple(e for e in lifecycle.START_EVENTS + ("execjob_launch",)
                                   if e in self._chains)
        self._end_events = tuple(e for e in lifecycle.END_EVENTS if e in self._chains)
        for hook in self._sched_hooks:
            for name in allowed[hook]:
                use.scheduler.add((name, hook))
        instances = sched_objects(scheds, policy,
                                  {h.partition for h in self.machine.hosts if h.partition})
        if hooks is not None and "sched_instances" in self._sched_hooks:
            for impl in reversed(hooks.sched_instances.get_hookimpls()):
                instances += list(impl.function(server=self.server) or [])
        try:
            self.schedulers = [s for s in build_schedulers(instances, self.server, hooks).values()
                               if s.scheduling]
        except (SchedulerSetupError, ValueError) as exc:
            raise SimError(f"scheduler setup: {exc}".replace("\n", "; ")) from None
        # Estimates change no decision (non-top jobs' are soft bookings); they are worth
        # their cost only to a hook that reads them (a periodic hook's job_list).
        for sched in self.schedulers:
            sched.explain = False  # the simulator reads decisions, never comments
            if not self._chains.get("periodic") and "estimate_limit" not in policy:
                sched.policy.estimate_limit = 0
        self._estimate_limits = [s.policy.estimate_limit for s in self.schedulers]
        #: A scheduler orders vnodes by what a job's start or end writes on them: their
        #: objects are made again then, and logged (`_occupy`), as the engine's rows are.
        self._sort_by_use = any(node_sort_order(s.policy.node_sort_key)[0] in _USE_TIMES
                               for s in self.schedulers)
        #: A periodic hook reads the queued jobs' estimates: estimates are made only in the
        #: last cycle before a periodic run (`_estimates_read`), which always runs
        #: (`_could_start`); exact, since no later cycle comes first.
        self._periodic_reads = bool(self._chains.get("periodic"))
        if self._periodic_reads:
            from ..engine.cpuslots import CpuSlots

            self._cpu_slots = CpuSlots()
        self._estimated: set[str] = set()  # queued jobs holding the last estimates made
        self._next_submit = math.inf
        self._periodic_due = {name: float(freq) for name, freq in self._freq.items()}

    def _fire(self, event_type: str, **objects: Any) -> Outcome | None:
        """Fire `event_type` through its sim-safe hooks, None when it has none. Callable
        `objects` are made only when it has some."""
        names = self._chains.get(event_type)
        if not names:
            return None
        return self._fire_only(event_type, names, **{
            k: v() if callable(v) else v for k, v in objects.items()})

    def _fire_only(self, event_type: str, names: Iterable[str], **objects: Any) -> Outcome:
        assert self.runner is not None  # (a hook to fire: `_setup_hooks` made the runner)
        outcome = self.runner.fire(Event(event_type, requestor="root",
                                         requestor_host=SERVER, **objects), hooks=set(names))
        if outcome.kind in ("error", "alarm"):
            # A failed hook's writes are in its objects but not in the outcome: none of
            # the objects it was given is reused.
            for name in objects.get("vnode_list") or ():
                self._event_vnode_cache.pop(name, None)
            for name in objects.get("job_list") or ():
                self._event_job_cache.pop(name, None)
        for name in outcome.changes.get("vnode_list") or ():  # a hook wrote to its object
            self._event_vnode_cache.pop(name, None)
        for name in outcome.changes.get("job_list") or ():
            self._event_job_cache.pop(name, None)
        for run in outcome.runs:
            self.summary.hooks.count(run, event_type)
        return outcome

    # -- the loop -------------------------------------------------------------------------------
    def run(self, trace: Iterable[TraceJob],
            bad: Callable[[TraceJob, str], None] | None = None) -> Summary:
        """Replay `trace` (TraceJob records in submit order) to the end.

        A job submitted before the one before it, or with the id of a job still queued or
        running, is given to `bad` with the problem (a `Trace`'s ``bad_job`` raises it as a
        TraceError naming the file and line, or counts and skips it with ``skip_bad``); with
        no `bad`, it is a `TraceOrderError`."""
        if self.closed:  # (its plugins have the site's state folders back, its own
            # work folder is gone: a second replay would read and write the live site's)
            raise SimError("this Simulator has already run (or was closed): a simulator "
                           "replays once; make a new Simulator for another run")
        self._bad = bad
        t0 = time.perf_counter()
        workdir = self.workdir
        try:
            self._power_file = workdir / "hooks" / "tmp" / POWER_FILE
            if self.runner is not None:
                self._write_platform(self._power_file.parent / PLATFORM_FILE)
            with clock.use(lambda: self.now), _home(workdir):
                self._loop(map(whole_seconds, trace))
        finally:
            self.close()
        self._draw((host, host.watts) for host in self.hosts)  # (charged to the end)
        self.summary.wall = time.perf_counter() - t0
        self.summary.energy = sum(sum(h.energy.values()) for h in self.hosts)
        self.sink.close(self.now - self.epoch)
        return self.summary

    def _refuse(self, job: TraceJob, problem: str) -> None:
        problem = f"job {job.job_id}: {problem}"
        if self._bad is None:
            raise TraceOrderError(f"{job.line}: {problem}")
        self._bad(job, problem)

    def _loop(self, trace: Iterator[TraceJob]) -> None:
        pending = next(trace, None)
        if pending is None:
            return
        epoch = self.epoch
        self.summary.start = pending.submit
        self.now = self._last_change = pending.submit + epoch
        for host in self.hosts:
            host.since = self.now
        # The vnodes are made as the replay starts (the engine's, when it makes them: both
        # times from its clock), never at 0, a year or more before the replay's clock (`EPOCH`).
        start = int(self.now)
        for name, attrs in self.vnode_attrs.items():
            for attrs_of in (attrs, self.vnodes[name]._attrs):
                attrs_of["last_used_time"] = attrs_of["last_state_change_time"] = start
        for name in self._periodic_due:
            self._periodic_due[name] += self.now
        self._startup()
        last_submit = -math.inf
        progress_at = 0
        again = hooked = False
        while True:
            candidates = [self.now] if again else []
            if self._ends:
                candidates.append(self._ends[0][0])
            if self._wakes:
                candidates.append(self._wakes[0][0])
            if self._due:
                candidates.append(self._due[0][0])
            if self._reroutes:
                candidates.append(self._reroutes[0][0])
            if pending is not None:
                candidates.append(pending.submit + epoch)
            if self._retries and (candidates or self._retry_to_come()):
                candidates.append(self._retries[0][0])
            late = not candidates and bool(self._parked)  # (retries are not candidates)
            if self._periodic_due and (self.queued or self.running or pending is not None):
                if candidates or self.now - self._last_change <= STALL:
                    candidates.append(min(self._periodic_due.values()))
            if not candidates:
                break
            now = min(candidates)
            last, self.now = self.now, now
            if self._tried[0] < now:
                self._tried = (now, -math.inf)
            if late:  # (every parked job whose tick came after `last`, by now)
                self._wake(self._parked, (last, math.inf), now)
            # 1. ends
            while self._ends and self._ends[0][0] <= now:
                _, _, job_id = heapq.heappop(self._ends)
                run = self.running[job_id]
                self._end(run)
                self._tell(run)
            # 2. hosts whose transition completes (a cycle follows; with nothing else
            # happening it counts for the stall when it brings a state not seen: step 5)
            woke = False
            while self._wakes and self._wakes[0][0] <= now:
                _, index = heapq.heappop(self._wakes)
                self._host_state(self.hosts[index])
                woke = True
            while self._due and self._due[0][0] <= now:  # a waiting job's Execution_Time
                self._queue_waiting(heapq.heappop(self._due)[1])
            if self._reroutes or self._retries:  # the router's next pass
                self._route_due(now)
            self._tried = (now, math.inf)
            # 3. submissions
            while pending is not None and pending.submit + epoch <= now:
                if pending.submit < last_submit:
                    self._refuse(pending, f"submitted at {pending.submit}, before the job "
                                 "before it; a trace must be in submit order")
                elif pending.job_id in self.queued or pending.job_id in self.running or \
                        pending.job_id in self.routing:
                    self._refuse(pending, "a job with this id is still queued or running; "
                                 "job ids must be unique")
                else:
                    last_submit = pending.submit
                    self._submit(pending)
                pending = next(trace, None)
            # The next submission is sure to queue a job (so to run a cycle) when no hook
            # may refuse it and its request is the one the simulator writes.
            self._next_submit = pending.submit + epoch if pending is not None and \
                pending.select is None and not self._chains.get("queuejob") and \
                not self._routes and not self._ruled and self._tally is None else math.inf
            # 4. periodic hooks (with nothing else happening, what they change counts as
            # a change only when it is new to the scheduler: a hook that changes a vnode
            # at every run would keep a replay going for ever)
            if self._periodic_due:
                self._quiet = pending is None and not (
                    self.running or self._touched or self._new_needs)
                self._periodics(now)
                hooked = self._quiet and self._touched
            # 5. one cycle
            changed = self._touched or woke or bool(self._new_needs)
            only_new, self._touched = not (self._touched or woke), False
            if changed and self.queued:
                if self._could_start(only_new):
                    self._cycle()
                else:
                    self.summary.cycles_skipped += 1
                self._new_needs, self._doubt = set(), False
            if changed or self.running:
                # (A periodic change or a host's transition with nothing else happening
                # counts when it is new; a start, or a start hook's requeue that a second
                # pass follows, counts.)
                if self.running or self._touched or (
                        self._new_state() if hooked or (woke and self._quiet)
                        else not self._quiet):
                    self._last_change = now
            # What the cycle's starts changed (a job requeued by a start hook, a vnode a
            # hook changed) is seen by a second cycle at the same instant, as the engine
            # runs one at once after a requeue.
            again = self._touched
            self._record_states()
            if self.progress is not None and self.summary.jobs >= progress_at:
                progress_at = self.summary.jobs + 1000
                self.progress(now - epoch - self.summary.start, self.summary.jobs,
                              len(self.queued))
        # What is left queued can never run (nothing else will change).
        for run in list(self.queued.values()):
            self._reject(run, "never started: the machine could not run it")
        for run in list(self.routing.values()):
            self._reject(run, "never routed out of its route queue")
        self.summary.end = self.now - epoch

    # -- submission -----------------------------------------------------------------------------
    def _queue(self, name: str | None) -> str:
        name = name if name and name in self._queue_attrs else QUEUE
        if name not in self.queues:
            attrs = {"queue_type": "Execution", "enabled": True, "started": True,
                     **self._queue_attrs.get(name, {})}
            self.queues[name] = Queue(name, attrs)
        return name

    def _submit(self, tj: TraceJob) -> None:
        self._seq += 1
        res: dict[str, Any] = {}
        if tj.select:
            res["select"] = tj.select if self._has_mem else _without_mem(tj.select)
        else:
            res["select"] = f"{tj.ncpus}:ncpus=1"
            res["ncpus"] = tj.ncpus
        if tj.walltime is not None:
            res["walltime"] = format_duration(max(1, math.ceil(tj.walltime)))
        now = int(self.now)
        attrs: dict[str, Any] = {
            "job_state": "Q", "queue": self._queue(tj.queue), "Resource_List": res,
            "qtime": now, "ctime": now, "etime": now, "run_count": 0,
            "Job_Owner": f"{tj.user or 'user'}@{SERVER}", "euser": tj.user or "user",
            "egroup": tj.group or "group", "Hold_Types": "n", "Rerunable": True}
        hooked = bool(self._chains.get("queuejob"))
        requested = res
        refused = None if hooked else self._complete(attrs, tj.run_time)  # (before its Job)
        run = _Run(tj, attrs, self._seq)
        if attrs["queue"] in self._ruled:  # (qsub asks the queue first)
            err = self._entry_error(attrs, attrs["queue"])
            refused = refused if err is None else f"qsub: {err.message}"
        if refused is not None:
            self._reject(run, refused)
            return
        outcome = self._fire("queuejob", job=lambda: run.job)
        if outcome is not None:
            if not outcome.accepted:
                self._reject(run, f"queuejob: {outcome.message}")
                return
            if outcome.changes.get("job"):
                apply_to_attrs(attrs, outcome.changes["job"])
                attrs["job_state"] = lifecycle.queued_state(attrs, self.now)
                if not self._may_run(run):
                    self._reject(run, "held by a queuejob hook")
                    return
        if hooked:
            requested = attrs["Resource_List"]
            refused = self._complete(attrs, tj.run_time)
            if refused is not None:
                self._reject(run, refused)
                return
            run.job = Job(tj.job_id, attrs)
        if self._tally is not None and not self._within_limits(run):
            return
        if attrs["queue"] in self._routes:
            self.routing[tj.job_id] = run
            self._requested[tj.job_id] = requested
            self._route(run, submitting=True)
            return
        self._enqueue(run)

    def _enqueue(self, run: _Run) -> None:
        """The job is queued in an execution queue: the schedulers see it from now."""
        tj = run.tj
        try:
            chunks = job_select(run.job, default_chunks(self.queues.get(run.job.queue),
                                                        self.server))
        except ValueError as exc:
            self._reject(run, f"select: {exc}")
            return
        run.needs = (min((int(c.resources.get("ncpus", 0) or 0) for c in chunks), default=0),
                     sum(c.count * int(c.resources.get("ncpus", 0) or 0) for c in chunks))
        self.queued[tj.job_id] = run
        self._tell(run)
        self._needs[run.needs] = self._needs.get(run.needs, 0) + 1
        self._new_needs.add(run.needs)
        if not self._doubt and self._beyond_machine(chunks, run.needs[1]):
            self._doubt = True

    def _beyond_machine(self, chunks: Iterable[Chunk], ncpus: int) -> bool:
        """Whether the job may ask more than the machine could ever give, whatever its
        vnodes' states: more ncpus than all its vnodes, a chunk more of an amount than any
        one vnode has, or a resource no vnode has as an amount (a text one: the scheduler
        judges it). PBS's scheduler runs a cycle at every submission and says such a job
        `Can Never Run` at once; a replay's cycle runs only when a job could start, so the
        scheduler must be asked here, not at whatever cycle comes next (or none)."""
        if self._most is None:
            most: dict[str, int] = {}
            for attrs in self.vnode_attrs.values():
                for name, value in (attrs.get("resources_available") or {}).items():
                    amount = resource_amount(name, value)
                    if amount is not None and amount > most.get(name, -1):
                        most[name] = amount
            self._most = most, sum(_ncpus(a) for a in self.vnode_attrs.values())
        most, total = self._most
        if ncpus > total:
            return True
        for chunk in chunks:
            for name, value in chunk.resources.items():
                if name in LAYOUT_RESOURCES:
                    continue
                amount = resource_amount(name, value)
                if amount is None or amount > most.get(name, -1):
                    return True
        return False

    def _complete(self, attrs: dict[str, Any], run_time: float) -> str | None:
        """The job's request completed after queuejob as the engine's server completes it
        (`pbsplug.lifecycle.completed_request`: its queue's and the server's defaults and
        limits, a place, the chunks' sums), or why it is refused (PBS's qsub refuses a job
        past the limits). A job that still has no walltime (none in the trace, none by
        default) is planned with its run time, and so never killed (a `_RunTimeWalltime`:
        the limits on queued walltime count none for it). A trace repeats a few requests
        many times: each is completed once."""
        key = (tuple(attrs["Resource_List"].items()), attrs["queue"])
        done = self._requests.get(key)
        if done is None:
            if len(self._requests) > 4096:
                self._requests.clear()
            done = self._requests[key] = self._completed(attrs)
        if isinstance(done, str):
            return done
        res, chosen = done
        attrs["Resource_List"] = res
        if chosen is not None:
            attrs["schedselect"] = chosen
        if "walltime" not in res:
            attrs["Resource_List"] = {**res, "walltime": _RunTimeWalltime(format_duration(
                max(1, math.ceil(run_time))))}
        return None

    def _completed(self, attrs: dict[str, Any]) -> _Completed | str:
        """`_complete`'s answer for a request not seen before."""
        queue = self.queues.get(attrs["queue"])
        try:
            res = lifecycle.completed_request(
                attrs["Resource_List"], {}, queue or {}, self.server,
                RESOURCE_TYPES, CHUNK_RESOURCES, enqueued=True, limited=True)[0]
        except lifecycle.OutsideLimits as exc:
            return f"qsub: Job violates queue and/or server resource limits ({exc})"
        except ValueError as exc:
            return f"qsub: Illegal attribute or resource value Resource_List: {exc}"
        try:  # its schedselect, as the engine's server stores it
            return res, schedselect(job_select(Job("request", {"Resource_List": res}),
                                               default_chunks(queue, self.server)))
        except ValueError:  # (a select that does not parse: `_submit` says so)
            return res, None

    def _may_run(self, run: _Run) -> bool:
        """Whether a queued job may still run: not when held (nothing in a replay releases
        a hold); one waiting for its Execution_Time has a cycle due then."""
        state = run.attrs["job_state"]
        if state == "W":  # (from the second it names: instants are whole seconds)
            heapq.heappush(self._due, (float(math.ceil(float(run.attrs["Execution_Time"]))),
                                       run.tj.job_id))
        return state != "H"

    def _queue_waiting(self, job_id: str) -> None:
        """A waiting job's Execution_Time has come: it is queued (Q), as the engine's
        `_end_waits` queues it (one in a route queue that keeps waiting jobs is routed)."""
        run = self.queued.get(job_id)
        if run is None:
            run = self.routing.get(job_id)
            if run is not None and run.attrs["job_state"] == "W":
                run.attrs["job_state"] = lifecycle.queued_state(run.attrs, self.now)
                run.job = Job(job_id, run.attrs)  # (read by a periodic hook if it stays)
                if run.attrs["job_state"] == "W":
                    self._may_run(run)
                else:
                    self._route(run)
            return
        if run.attrs["job_state"] != "W":
            return
        run.attrs["job_state"] = lifecycle.queued_state(run.attrs, self.now)
        if run.attrs["job_state"] == "W":  # (a later Execution_Time: due then)
            self._may_run(run)
            return
        run.job = Job(job_id, run.attrs)
        self._tell(run)
        self._touched = True

    def _route(self, run: _Run, submitting: bool = False) -> None:
        """A job in a route queue is routed as the engine routes it (the same
        `routing.route_job`): to the first destination that takes it, as the engine's
        router puts it there (`admission.check_entry`: the destination's ACLs, its
        from_route_only passing; its limits, with its defaults and the server's applied to
        the job's own request; then its limits on queued jobs, `limits.Tally`); refused by
        all for good, it is rejected (at its submission, as qsub refuses it: 15039). A
        destination over a limit on queued jobs refuses for now: the job stays and is
        tried again at its queue's route_retry_time (`_route_due`), while anything else
        may still change in the replay (a try costs nothing until a count that refused it
        changed: `_retry`). One routed into another route queue is routed on at the
        router's next pass, a second later; one waiting (W) stays until its Execution_Time
        unless its queue routes waiting jobs (`_queue_waiting` routes it then)."""
        from ..engine import routing
        from ..engine.errors import PBSE_EXCQRESC, PbsError

        job_id = run.tj.job_id
        name = run.attrs["queue"]
        self._unpark(job_id)
        moved: dict[str, Any] = {}
        over: dict[str, Any] = {}  # this try's refusals by the destinations' limits
        last = self._retry_at.get(job_id)
        if last is not None and last[1] != self._count_version():
            last = None  # (what it is counted against changed since its last try)

        def move(dest: str) -> None:
            if last is not None and dest in last[2]:
                over[dest] = last[2][dest]
                raise over[dest]
            if dest in self._ruled or dest not in self._queue_attrs and dest != QUEUE:
                err = self._entry_error(run.attrs, dest, routed=True)  # (15018 for the
                if err is not None:                                     # latter: the
                    raise err                                           # platform checks)
            attrs = {k: v for k, v in run.attrs.items() if k != "schedselect"}
            attrs.update(queue=self._queue(dest), Resource_List=self._requested[job_id])
            refusal = self._complete(attrs, run.tj.run_time)
            if refusal is not None:
                raise PbsError(PBSE_EXCQRESC, refusal)
            now = int(self.now)
            attrs.update(qtime=now, mtime=now)
            attrs["job_state"] = lifecycle.queued_state(attrs, self.now)
            if self._tally is not None and (dest in self._ruled or self._complex_limited):
                self._sync_counts()
                try:
                    self._tally.check(attrs, self._counted.get(job_id))
                except PbsError as err:
                    over[dest] = err
                    raise
            moved.update(attrs)

        queue = {"started": True, **self._queue_attrs[name]}
        refused = self._refused.setdefault(job_id, set())
        result = routing.route_job(run.attrs, name, queue, self.now, refused, move,
                                   lambda dest: dest)
        if result.outcome != "retry":
            self._retry_at.pop(job_id, None)
        if result.outcome in ("routed", "finished") or not refused:
            # Left its queue (a stay in the queue it left counts no more), or none refused
            # it for good (stays untried, or waits on refusals for now only).
            del self._refused[job_id]
        if result.outcome == "routed":
            run.attrs.clear()
            run.attrs.update(moved)
            run.job = Job(job_id, run.attrs)
            if self._tally is not None:
                self._count(job_id, dict(run.attrs))
            if run.attrs["queue"] in self._routes:
                heapq.heappush(self._reroutes, (self.now + routing.PASS_EVERY, run.seq,
                                                job_id))
                return
            del self.routing[job_id], self._requested[job_id]
            self._enqueue(run)
            if self._tally is not None and job_id not in self.queued:  # (its select)
                self._count(job_id, None)
        elif result.outcome == "retry":  # (at the router's next pass at the earliest)
            when = max(float(math.ceil(result.when or self.now)),
                       self.now + routing.PASS_EVERY)
            self._retry(run, when, over)
        elif result.outcome == "finished":
            del self.routing[job_id], self._requested[job_id]
            if self._tally is not None:
                self._count(job_id, None)
            why = str(result.why)
            self._reject(run, f"qsub: {why}" if submitting and why == routing.REJECTED
                         else why)

    def _route_due(self, now: float) -> None:
        """The router's pass at `now`: the jobs routed into another route queue a second
        ago, and those whose retry time has come, are tried in submission order, as the
        engine's router tries the jobs due at a pass (a parked job a try frees, due now,
        among them: `_wake`)."""
        from ..engine import routing

        due = [(*entry[1:], False) for entry in self._popped(self._reroutes, now)]
        heapq.heapify(due)
        tried = set()
        while True:
            for when, seq, job_id in self._popped(self._retries, now):
                at = self._retry_at.get(job_id)
                if at is not None and at[0] == when:  # (else tried since: not due now)
                    heapq.heappush(due, (seq, job_id, True))
            if not due:
                return
            seq, job_id, retry = heapq.heappop(due)
            run = self.routing.get(job_id)
            if run is None or run.seq != seq or job_id in tried:
                continue
            tried.add(job_id)
            self._tried = (now, seq)
            if retry:
                _, version, over = self._retry_at[job_id]
                wait, lifetime = self._route_times[run.attrs["queue"]]
                if not routing.expired(run.attrs, lifetime, now) and (
                        version == self._count_version() or self._still_over(over)):
                    # Its lifetime has not run out, and nothing it is counted against
                    # changed since its last try, or each count that refused it is not
                    # below what it was then: this try would come to the same (each
                    # destination left refusing for now as it did), so it waits as long
                    # again: its queue's retry grid step (`_route_times`).
                    self._retry(run, now + wait, over)
                    continue
            self._route(run)

    def _still_over(self, over: dict[str, Any]) -> bool:
        """Whether each destination that refused a job for now (`over`: the errors of the
        limits on queued jobs) would refuse it again: the count that was over at each
        (`LimitError.key`) has not fallen below what it was then (its `count`; the job's
        own request and counts are as they were)."""
        if not over or self._tally is None:
            return False
        self._sync_counts()
        counts, limit_error = self._tally.counts, self._limit_error
        return all(isinstance(err, limit_error) and counts.get(err.key, 0) >= err.count
                   for err in over.values())

    @staticmethod
    def _popped(heap: list[tuple[float, int, str]], now: float) -> list[tuple[float, int, str]]:
        """The entries of `heap` due by `now`, taken from it."""
        out = []
        while heap and heap[0][0] <= now:
            out.append(heapq.heappop(heap))
        return out

    def _retry(self, run: _Run, when: float, over: dict[str, Any]) -> None:
        """The job waits in its route queue, refused for now; tried again at `when` and
        then once per route_retry_time (its retry grid), as the engine's router tries it.
        A try can route it only after the count that refused it at a destination for now
        fell (`over`: the limits on queued jobs of the destination or of the complex, which
        counts the jobs of every queue; each error names the count that was over, a key of
        the tally's: while it does not fall, that limit refuses the job again, whatever
        else changed; a replay's other refusals for now, a queue not enabled, never
        change): it is parked on those counts until then, with no entry in `_retries`, and
        woken then (`_wake`), due at its grid's first tick after that. With a
        route_lifetime, it is due at the tick its lifetime runs out, as a try there ends
        it."""
        from ..engine import routing

        job_id = run.tj.job_id
        self._unpark(job_id)
        wait, lifetime = self._route_times[run.attrs["queue"]]
        keys = tuple(dict.fromkeys(err.key for err in over.values()
                                   if isinstance(err, self._limit_error)))
        self._parked[job_id] = (when, wait, keys)
        for key in keys:
            self._parked_on.setdefault(key, {})[job_id] = None
        due = math.inf
        end = routing.lifetime_end(run.attrs, lifetime)
        if end is not None:
            # The first tick at which the router's rule (`routing.expired`, route_job's)
            # finds it past its lifetime: from the last tick by its lifetime's end (or
            # `when`), a step or two.
            due = when + max(0, math.floor((end - when) / wait)) * wait
            while not routing.expired(run.attrs, lifetime, due):
                if due + wait == due:  # past a float's steps (a lifetime of 1e18 s): never
                    due = math.inf
                    break
                due += wait
        self._retry_at[job_id] = (due, self._count_version(), over)
        if due < math.inf:
            heapq.heappush(self._retries, (due, run.seq, job_id))

    def _retry_to_come(self) -> bool:
        """Whether a retry is still to come when nothing else is left to happen: a job woken
        (`_wake`) since its last try, a count it was refused on having fallen (the try may
        route it), or one at the tick its route_lifetime runs out (the try ends it).
        Every entry of `_retries` not tried since is one of these (a job sure to end the
        same is parked, with no entry); those tried since are dropped here, so that the
        replay goes on to the first still due, not to a tick where nothing happens."""
        while self._retries:
            when, _, job_id = self._retries[0]
            due = self._retry_at.get(job_id)
            if due is not None and due[0] == when:
                return True
            heapq.heappop(self._retries)
        return False

    def _unpark(self, job_id: str) -> None:
        """The job is no longer parked (it is tried, or due)."""
        parked = self._parked.pop(job_id, None)
        for key in parked[2] if parked is not None else ():
            jobs = self._parked_on[key]
            del jobs[job_id]
            if not jobs:
                del self._parked_on[key]

    def _wake_fallen(self, old: Any, new: Any) -> None:
        """A job counted as `old` is now counted as `new` (None: gone): the jobs parked on
        a count this lowers are woken (`_wake`). A job leaving a queue lowers its counts
        there; one beginning, the thresholds' (`queued_jobs_threshold`); one entering a
        queue only adds: no refusal can turn to a yes by it, and none is woken. A job
        parked on several counts this lowers is woken once (waking it unparks it from
        all)."""
        assert self._tally is not None
        parked_on = self._parked_on
        for key in self._tally.lowered(old, new, parked_on):
            jobs = parked_on.get(key)
            if jobs:  # (none left when each was parked on an earlier key too: woken)
                self._wake(jobs, self._tried)

    def _wake(self, job_ids: Iterable[str], after: tuple[float, float],
              late: float | None = None) -> None:
        """Each parked job of `job_ids` is due at the first tick of its retry grid at which
        the engine's router tries it after `after` (an instant, and the seq of the last
        job its pass tried then: -inf before the pass, inf after it). A count the jobs
        were refused on fell (`_wake_fallen`): after the router's place now (`_tried`),
        so at this instant when a job's place in this instant's pass is still to come.
        Or, with `late`, the replay went from instant ``after[0]`` to `late` with only
        periodic hooks to run: the router's pass at `late` takes the jobs whose tick came
        by then, late, as it takes every retry due (retries make no instant then); the
        others stay parked."""
        at, last = after
        parked, runs = self._parked, self.routing
        for job_id in list(job_ids):
            tick, wait, _ = parked[job_id]
            seq = runs[job_id].seq
            if tick < at:
                tick += math.ceil((at - tick) / wait) * wait
            if tick == at and seq <= last:
                tick += wait
            if late is not None:
                if tick > late:
                    continue
                tick = late
            self._unpark(job_id)
            due, version, over = self._retry_at[job_id]
            if tick < due:  # (else its lifetime's tick comes first: it is due then)
                self._retry_at[job_id] = (tick, version, over)
                heapq.heappush(self._retries, (tick, seq, job_id))

    def _entry_error(self, attrs: dict[str, Any], name: str,
                     routed: bool = False) -> PbsError | None:
        """The PbsError of queue `name` refusing the job (`attrs`) as the engine's server
        refuses one (`admission.check_entry`; a replay's queues are enabled): 15018 for a
        queue the platform has not, 15022 by its from_route_only unless `routed`, 15007 by
        its ACLs, read on the job's euser and egroup (the trace's user and group, which
        the ACLs name), its host the server's; None when it takes it. Asked only of a
        queue with such rules or one the platform has not, never of the replay's
        `QUEUE` when the platform has none of that name (the replay makes it: `_queue`)."""
        from ..engine import admission
        from ..engine.errors import PbsError

        queue = self._queue_attrs.get(name)
        try:
            admission.check_entry(None if queue is None else {"enabled": True, **queue},
                                  name, str(attrs["euser"]), (SERVER,), routed=routed,
                                  groups=(str(attrs["egroup"]),))
        except PbsError as err:
            return err
        return None

    def _within_limits(self, run: _Run) -> bool:
        """qsub's check of the limits on queued jobs of the job's queue and of the complex
        (the engine's `limits.Tally.check`): over one, the job is rejected as qsub refuses
        it. A job entering a route queue is counted there from now (one in an execution
        queue is counted as the schedulers see it: `_sync_counts`). Asked only when some
        queue or the complex has such limits (a `_tally`)."""
        from ..engine.errors import PbsError

        assert self._tally is not None
        attrs = run.attrs
        if attrs["queue"] in self._ruled or self._complex_limited:
            self._sync_counts()
            try:
                self._tally.check(attrs)
            except PbsError as err:
                self._reject(run, f"qsub: {err.message}")
                return False
        if attrs["queue"] in self._routes:
            self._count(run.tj.job_id, dict(attrs))
        return True

    def _count(self, job_id: str, attrs: dict[str, Any] | None) -> None:
        """Job `job_id` of a route queue is counted as `attrs` (None: gone) from now."""
        assert self._tally is not None
        self._route_moves += 1
        was = self._counted.pop(job_id, None)
        self._tally.move(was, attrs)
        if attrs is not None:
            self._counted[job_id] = attrs
        if was is not None and self._parked_on:  # (one entering lowers no count)
            self._wake_fallen(was, attrs)

    def _count_version(self) -> tuple[int, int]:
        """What the counts against the limits follow: the log of the schedulers' view of
        the jobs (`_sync_counts`) and the route queues' own (`_count`). A job waits in its
        route queue mostly while neither changes: its tries then cost no count."""
        return self._log.mark, self._route_moves

    def _sync_counts(self) -> None:
        """Bring the tally up to date with the jobs of the execution queues, before it is
        read: each job object the schedulers were told of since it was last counted is
        counted instead of what it was (objects are values: a job that changed is a new
        object), and a job no longer in the system is taken away. Read from the
        schedulers' view, so that a replay's starts and ends pay nothing for limits; it
        costs a look at each job in the system when a limited queue is asked, and
        nothing when the log of the schedulers' view has not grown since."""
        if self._log.mark == self._counted_mark:
            return
        self._counted_mark = self._log.mark
        tally, counted, told = self._tally, self._counted, self._told
        assert tally is not None
        for job_id, job in told.items():
            was = counted.get(job_id)
            if was is not job:
                tally.move(was, job)
                counted[job_id] = job
        if len(counted) > len(told) + len(self.routing):
            for job_id in [j for j in counted if j not in told and j not in self.routing]:
                tally.move(counted.pop(job_id), None)

    def _reject(self, run: _Run, why: str) -> None:
        if self.queued.pop(run.tj.job_id, None) is not None:
            self._unneed(run)
            self._tell(run)
        self.summary.rejected += 1
        self.sink.job(JobResult(run.tj, REJECTED, None, self.now - self.epoch,
                                run_count=run.run_count,
                                reason=why))

    # -- the cycle ------------------------------------------------------------------------------
    def _could_start(self, only_new: bool) -> bool:
        """Whether a cycle must run. Yes when a periodic hook reads this cycle's estimates
        (`_estimates_read`: a vnode asleep is woken by them) or a scheduler hook other than
        sched_node_availability runs (its answers only say when vnodes that cannot take a
        job now can: they change plans, never what starts now). Else when it
        could start anything: a job can start only
        if its smallest chunk fits the largest free room of a vnode and the machine has
        as many cpus free as the job needs; and when only
        submissions happened since the last cycle (which left no queued job able to start,
        and nothing freed since), only a new job can, when new jobs sort after the old
        ones (no job_sort_formula, queues of one priority). Yes too when a job submitted
        since may never run (`_beyond_machine`): the scheduler says so now."""
        if self._doubt or self._deciding_hooks or (
                self._periodic_reads and self._estimates_read()):
            return True
        room = max((r for r, n in self._room_count.items() if n), default=0)
        free = self._free_total
        needs = self._new_needs if only_new and self._simple_order else self._needs
        return any(room >= smallest and free >= ncpus for smallest, ncpus in needs)

    def _unneed(self, run: _Run) -> None:
        self._needs[run.needs] -= 1
        if not self._needs[run.needs]:
            del self._needs[run.needs]

    def _tell(self, run: _Run) -> None:
        """Log the job's object as the schedulers must now see it: queued or running, the
        current one; else none."""
        job_id = run.tj.job_id
        current = run.job if job_id in self.queued or job_id in self.running else None
        told = self._told.get(job_id)
        if told is current:
            return
        if told is not None and self._parked_on:  # (it leaves, or changes: not when it enters)
            self._wake_fallen(told, current)
        if told is not None:
            self._log.remove(told)
        if current is None:
            del self._told[job_id]
        else:
            self._log.add(current)
            self._told[job_id] = current

    def _cycle(self) -> None:
        # Every job object the schedulers were told of; each reads only the log's entries
        # since its last cycle, and the log forgets what every scheduler has read.
        snap = Snapshot(self.server, self.queues, self.vnodes, self._told.values(),
                        vnodes_version=self._vnode_log.version, job_log=self._log,
                        vnode_log=self._vnode_log)
        read = self._log.mark
        try:
            self._cycles(snap)
        finally:
            self._log.forget(read)

    def _estimates_read(self) -> bool:
        """Whether a periodic hook may read this cycle's estimates (a job keeps only the
        estimates of the last cycle that made any): no event comes before its run. When an
        event comes first (an end, a host's transition, a submission sure to queue its job),
        the last such event before the run runs a cycle while jobs are queued (this answer
        makes `_could_start` run it), and that cycle's estimates replace these; with no job
        left queued there is nothing to estimate."""
        if not self._periodic_reads:
            return True
        due = min(self._periodic_due.values())
        first = min(self._ends[0][0] if self._ends else math.inf,
                    self._wakes[0][0] if self._wakes else math.inf,
                    self._due[0][0] if self._due else math.inf, self._next_submit)
        return first >= due

    def _cycles(self, snap: Snapshot) -> None:
        read = self._estimates_read()
        estimated: set[str] = set()
        for sched, limit in zip(self.schedulers, self._estimate_limits, strict=True):
            sched.policy.estimate_limit = limit if read else 0
            result = sched.cycle(snap, self.now)
            self.summary.cycles += 1
            for job_id, comment in result.comments.items():
                if comment.startswith("Can Never Run") and job_id in self.queued:
                    self._reject(self.queued[job_id], comment)
            for decision in result.run:
                run = self.queued.get(decision.job_id)
                if run is not None:
                    self._start(run, decision.exec_vnode, decision.chunks)
                    self._tell(run)
            for job_id, est in result.estimates.items():
                run = self.queued.get(job_id)
                if run is not None:
                    estimate = {"start_time": est.start_time, "exec_vnode": est.exec_vnode}
                    # The same estimate as the job's (most, from one estimating cycle to
                    # the next): its object stays, and no scheduler reads the job again.
                    if run.attrs.get("estimated") != estimate:
                        run.attrs["estimated"] = estimate
                        run.job = Job(job_id, run.attrs)
                        self._tell(run)
                    estimated.add(job_id)
        if read and self._periodic_reads:
            # The estimates a periodic hook reads are the last cycle's that made any: a
            # queued job it did not estimate (no longer among the first estimate_limit, or
            # no plan) has none. (Without a periodic hook, estimates stay as they were
            # made: a scheduler hook may read a job's estimate from an earlier cycle.)
            for job_id in self._estimated - estimated:
                run = self.queued.get(job_id)
                if run is not None and run.attrs.pop("estimated", None) is not None:
                    run.job = Job(job_id, run.attrs)
                    self._tell(run)
            self._estimated = estimated

    # -- a job's life (pbsplug.lifecycle) -------------------------------------------------------
    def _start(self, run: _Run, exec_vnode: str,
               chunks: list[tuple[str, dict[str, int | str]]]) -> None:
        job_id = run.tj.job_id
        now = int(self.now)
        outcome = self._fire("runjob", job=lambda: Job(job_id, {**run.attrs,
                                                                  "exec_vnode": exec_vnode}))
        if outcome is not None and not outcome.accepted:
            lifecycle.runjob_refused(run.attrs, outcome.message, outcome.changes.get("job"),
                                     self.now)
            run.job = Job(job_id, run.attrs)
            if not self._may_run(run):
                self._reject(run, run.attrs["comment"])
            return
        del self.queued[job_id]
        self._unneed(run)
        per_vnode: dict[str, int] = {}
        last_res, ncpus = None, 0
        for name, res in chunks:
            if res is not last_res:  # (alike chunks share their mapping: read once)
                ncpus, last_res = int(res.get("ncpus", 0) or 0), res
            per_vnode[name] = per_vnode.get(name, 0) + ncpus
        host_of = self._host_of  # (the platform's: a hook may have unset the resource)
        lifecycle.started(run.attrs, exec_vnode, format_exec_host(
            chunks, lambda n: host_of[n].spec.name), now)
        run.start = self.now
        run.run_count = int(run.attrs["run_count"])
        run.vnodes = per_vnode
        run.ncpus = sum(per_vnode.values())
        self.running[job_id] = run
        if self._cpu_slots is not None:  # (before `_occupy`, which forgets the event objects)
            self._cpu_slots.take(job_id, chunks, {
                name: _ncpus(self.vnode_attrs[name]) for name in per_vnode})
        times = self._use_times(per_vnode) if self._start_events else None
        run.hosts = tuple(sorted(self._occupy(run, +1)))
        for event in self._start_events:
            extra: dict[str, Any] = {"progname": "", "argv": [], "env": {}, "pid": None} \
                if event == "execjob_launch" else {}
            outcome = self._fire(event, job=lambda: Job(job_id, run.attrs), vnode_list=lambda:
                                 self._job_vnodes(per_vnode, times), **extra)
            if outcome is None:
                continue
            self._host_changes(run, outcome)
            step = lifecycle.start_step(outcome.consequence)
            if step != lifecycle.PROCEED:
                if lifecycle.abort_first(event, outcome.consequence):
                    self._fire("execjob_abort", job=lambda: Job(job_id, run.attrs),
                               vnode_list=lambda: self._job_vnodes(per_vnode, times))
                comment = lifecycle.refused_comment(event, outcome.consequence,
                                                    outcome.message)
                self._stop(run)
                if step == lifecycle.FINISH:
                    self._finish(run, FAILED, comment)
                else:
                    self._requeue(run, comment)
                return
        limit = lifecycle.walltime_limit(run.attrs)
        length = run.tj.run_time
        if self.kill_at_walltime and limit is not None and lifecycle.walltime_exceeded(
                limit, length):
            length, run.killed = float(limit), True
        run.end = self.now + length
        run.job = Job(job_id, run.attrs)
        heapq.heappush(self._ends, (run.end, run.seq, job_id))

    def _end(self, run: _Run) -> None:
        times = self._use_times(run.vnodes) if self._end_events else None
        self._stop(run)
        action = event = None
        state = WALLTIME if run.killed else _STATUS_STATES.get(run.tj.status, COMPLETED)
        used = given = None
        if self._end_events:  # they see Exit_status and resources_used, as on the engine
            used = self._used(run)
            run.attrs["Exit_status"] = _exit_status(state)
            given = {**(run.attrs.get("resources_used") or {}), **used}
            run.attrs["resources_used"] = dict(given)
        for name in self._end_events:
            outcome = self._fire(name, job=lambda: Job(run.tj.job_id, run.attrs),
                                 vnode_list=lambda: self._job_vnodes(run.vnodes, times))
            if outcome is None:
                continue
            self._host_changes(run, outcome)
            if outcome.job_action:
                action, event = outcome.job_action, name
        reason = None
        if run.killed:
            assert run.start is not None  # (a job that ends started)
            reason = lifecycle.walltime_exceeded(lifecycle.walltime_limit(run.attrs),
                                                 self.now - run.start + 1) or "walltime"
        if lifecycle.end_step(reason, action) == lifecycle.REQUEUE:
            run.attrs.pop("Exit_status", None)  # (the run's; the job is not over)
            self._requeue(run, lifecycle.end_comment(reason, event))
            return
        if used is not None and given is not None:  # a value a hook set stays, as on the engine
            after = run.attrs.get("resources_used") or given
            used = {k: v for k, v in used.items() if after.get(k) == given[k]}
        self._finish(run, state, reason, used)

    def _stop(self, run: _Run) -> None:
        """The job's cpus are free again (before its end hooks, as the engine's are once
        its processes are gone)."""
        self.running.pop(run.tj.job_id, None)
        if self._cpu_slots is not None:
            self._cpu_slots.free(run.tj.job_id)
        self._occupy(run, -1)  # which marks its vnodes last used now
        self._touched = True

    def _used(self, run: _Run) -> dict[str, Any]:
        """What the host measured of the job's run (its walltime and ncpus)."""
        assert run.start is not None  # (asked of a job that started)
        return {"walltime": format_duration(math.ceil(self.now - run.start)),
                "ncpus": run.ncpus}

    def _finish(self, run: _Run, state: str, comment: str | None,
                used: dict[str, Any] | None = None) -> None:
        assert run.start is not None  # (a job that never started is rejected: `_reject`)
        if self._chains.get("jobobit"):  # (the job's last attributes: only it reads them)
            if used is None:
                used = self._used(run)
            lifecycle.finished(run.attrs, _exit_status(state), int(self.now), used, comment)
            self._fire("jobobit", job=lambda: Job(run.tj.job_id, run.attrs))
        self.summary.jobs += 1
        self.summary.killed += state == WALLTIME
        self.sink.job(JobResult(run.tj, state, run.start - self.epoch, self.now - self.epoch,
                                run.hosts, run.energy, run.run_count))

    def _requeue(self, run: _Run, comment: str) -> None:
        lifecycle.requeued(run.attrs, comment, int(self.now))
        run.start = None
        run.vnodes, run.hosts, run.ncpus = {}, (), 0
        run.job = Job(run.tj.job_id, run.attrs)
        if not self._may_run(run):
            self._reject(run, run.attrs["comment"])
            return
        self.queued[run.tj.job_id] = run
        self._needs[run.needs] = self._needs.get(run.needs, 0) + 1
        self._touched = True

    def _host_changes(self, run: _Run, outcome: Outcome) -> None:
        """Execution-host hooks' job and vnode changes (not after an error or alarm)."""
        if outcome.kind in ("error", "alarm"):
            return
        apply_to_attrs(run.attrs, outcome.changes.get("job") or {})
        self._vnode_changes(outcome)

    # -- vnodes and hosts ---------------------------------------------------------------------
    def _occupy(self, run: _Run, sign: int) -> Iterable[int]:
        """Book (+1) or free (-1) the job's cpus; freeing charges the job's energy up to now
        and marks its vnodes last used now. Returns the indices of the job's hosts.

        A job whose vnodes each have a host of their own, on a machine of one power model,
        whose hosts draw by their jobs alone (`_plain`), is charged in one pass over its
        vnodes, alike vnodes and hosts counted together (`_occupy_alike`)."""
        used = sign * run.ncpus  # (the sum of its vnodes' ncpus)
        self._busy += used
        self._free_total -= used
        vnodes = run.vnodes
        if vnodes and self._one_model and not self._sort_by_use and \
                self._alone.issuperset(vnodes) and _FIGURE_INDEX["busy"] in self._counts:
            indices = run.hosts if sign < 0 else list(map(self.vnode_host.__getitem__, vnodes))
            odd = self._odd
            if not odd or odd.isdisjoint(indices) or self._plain(odd.intersection(indices)):
                self._occupy_alike(run, sign)
                return indices
        return self._occupy_each(run, sign)

    def _plain(self, indices: set[int]) -> bool:
        """Whether the hosts draw by their jobs alone now (up, awake, not switching), as
        `_occupy_each` tells it; those that do are no longer odd (`_odd`): they stay so
        until their power or sleep changes (`_sync_power`)."""
        hosts, now = self.hosts, self.now
        # (A boot that ends now, not yet drawn: its time is the jobs' to be charged for.)
        plain = {i for i in indices
                 if hosts[i].by_jobs(now) and hosts[i].watts not in _ODD_FIGURES}
        self._odd -= plain
        return len(plain) == len(indices)

    def _occupy_alike(self, run: _Run, sign: int) -> None:
        """`_occupy` for a job whose vnodes each have a host of their own, all drawing by
        their jobs alone, on a machine of one power model whose hosts have been counted
        busy and idle (so the counts' keys keep their order). The same changes and the
        same floats (the job's energy summed in its vnodes' order); the vnodes whose free
        room goes from the first one's to the same as its, and the hosts that go busy or
        idle, are counted once for all."""
        vnodes = run.vnodes
        room, store, host_of = self.room, self.vnode_attrs, self._host_of
        counts, host_counts = self._room_count, self._counts
        now = self.now
        stamp = int(now)  # (the vnodes' times: whole seconds)
        first = next(iter(vnodes))
        had = room[first]  # (the room the alike vnodes had, and have after)
        has = had - sign * vnodes[first]
        flip = (had <= 0) != (has <= 0)  # free <-> job-busy, as the engine tracks it
        alike = len(vnodes)
        ending = sign < 0
        charge = 0.0
        energy = run.energy
        if ending and run.start is not None:
            # The job's energy, vnode by vnode in its vnodes' order as `_occupy_each`
            # sums it (one model: one busy figure).
            charge = host_of[first].figures["busy"] * (now - run.start)
        busy_key, idle_key = _FIGURE_INDEX["busy"], _FIGURE_INDEX["idle"]  # (model 0's)
        busy_state, idle_state = _FIGURE_STATES["busy"], _FIGURE_STATES["idle"]
        to_busy = to_idle = 0
        for name, ncpus in vnodes.items():
            used = sign * ncpus
            before = room[name]
            after = room[name] = before - used
            attrs = store[name]
            if before != had or after != has:
                alike -= 1
                counts[before] -= 1
                counts[after] = counts.get(after, 0) + 1
                if (before <= 0) != (after <= 0):
                    attrs["last_state_change_time"] = stamp
            elif flip:
                attrs["last_state_change_time"] = stamp
            host = host_of[name]
            busy = host.busy = host.busy + used
            if ending:
                attrs["last_used_time"] = stamp
                if charge:
                    energy += charge * ncpus / host.cpus
                if busy <= 0 and host.cpus != host.has:  # (`_Host.settle_cpus`, inline:
                    host.cpus = max(host.has, 1)          # the fast path)
            watts = "busy" if busy > 0 else "idle"
            figure = host.watts
            if watts != figure:
                length = now - host.since
                if length > 0:
                    drawn = host.energy
                    drawn[figure] = drawn.get(figure, 0.0) + host.figures[figure] * length
                host.since = now
                host_counts[host.counted] -= 1
                host.watts = watts
                if busy > 0:
                    host.state, host.counted = busy_state, busy_key
                    to_busy += 1
                else:
                    host.state, host.counted = idle_state, idle_key
                    to_idle += 1
        run.energy = energy
        counts[had] -= alike
        counts[has] = counts.get(has, 0) + alike
        if to_busy or to_idle:
            host_counts[busy_key] += to_busy
            host_counts[idle_key] += to_idle
            self._counts_changed = True
        if self._event_vnode_cache:  # (a vnode object an event carried: made again)
            forget = self._event_vnode_cache.pop
            for name in vnodes:
                forget(name, None)

    def _occupy_each(self, run: _Run, sign: int) -> set[int]:
        """`_occupy` vnode by vnode and host by host."""
        if self._odd:  # (a host drawing an odd figure is odd: `_plain`)
            for host in dict.fromkeys(self._host_of[name] for name in run.vnodes):
                if host.watts in _ODD_FIGURES:  # (its jobs change: its figure's time so far)
                    self._charge_odd(host, run if sign < 0 else None)
        touched: set[int] = set()
        mark = touched.add
        counts, room, store, slots = (self._room_count, self.room, self.vnode_attrs,
                                      self._vnode_slot)
        # A vnode object an event carried shows the room it had then: made again next time.
        forget = self._event_vnode_cache.pop if self._event_vnode_cache else None
        stamp = int(self.now)  # (the vnodes' times: whole seconds)
        # The energy is summed vnode by vnode in the vnodes' order, as it always was: the
        # same additions give the same float.
        length = self.now - run.start if sign < 0 and run.start is not None else None
        energy = run.energy
        by_use = self._sort_by_use
        for name, ncpus in run.vnodes.items():
            before = room[name]
            after = room[name] = before - sign * ncpus
            counts[before] -= 1
            counts[after] = counts.get(after, 0) + 1
            if forget is not None:
                forget(name, None)
            attrs = store[name]
            flipped = (before <= 0) != (after <= 0)
            if flipped:  # free <-> job-busy, as the engine tracks it
                attrs["last_state_change_time"] = stamp
            index, host = slots[name]
            host.busy += sign * ncpus
            mark(index)
            if sign < 0:
                attrs["last_used_time"] = stamp
                if length is not None:
                    energy += host.figures["busy"] * length * ncpus / host.cpus
            if by_use and (flipped or sign < 0):
                self.vnodes[name] = Vnode(name, attrs)
                self._vnode_log.changed(name)
        run.energy = energy
        hosts, figure = self.hosts, self._figure
        drawn = []
        for index in touched:
            host = hosts[index]
            if sign < 0:
                host.settle_cpus()
            watts = figure(host)
            if watts != host.watts:
                drawn.append((host, watts))
        self._draw(drawn)
        return touched

    def _host_state(self, host: _Host) -> None:
        """The host's machine state and power figure from its jobs, its vnodes' sleep and
        the driver's power; the energy of the state it leaves is charged."""
        watts = self._figure(host)
        if watts != host.watts:  # (the figure drawn tells the state: `_FIGURE_STATES`)
            if host.busy > 0 and host.watts in _ODD_FIGURES:
                self._charge_odd(host)
            self._draw(((host, watts),))

    def _charge_odd(self, host: _Host, ending: _Run | None = None) -> None:
        """The jobs on `host`, which draws a figure other than busy with jobs on it (booting,
        shutting down or off: its power changed under them), are charged their share of
        that figure for the time since it began to draw it, in place of the busy watts
        their end charges them for that time (`_occupy_each`): a job is charged its share
        of what its hosts drew while it ran on them. `ending`: a job leaving the host now,
        no longer running. That time is then charged to the host (`_draw`), so that it is
        charged once: called before the host's jobs or figure change."""
        length = self.now - host.since
        if length > 0:
            index, vnode_host = host.spec.index, self.vnode_host
            per_cpu = (host.figures[host.watts] - host.figures["busy"]) * length / host.cpus
            # (a job starting now is running, its hosts not yet set: not charged)
            jobs = [run for run in self.running.values() if index in run.hosts]
            for run in jobs if ending is None else jobs + [ending]:
                run.energy += per_cpu * sum(ncpus for name, ncpus in run.vnodes.items()
                                            if vnode_host[name] == index)
        self._draw(((host, host.watts),))

    def _figure(self, host: _Host) -> str:
        """The power figure the host draws now (`_host_state`)."""
        now = self.now
        if host.by_jobs(now):  # (most hosts, most of the time)
            return "busy" if host.busy > 0 else "idle"
        if host.power == "off":
            return "shutting_down" if now < host.until else "off"
        if host.until > now:
            return "booting"
        if host.busy > 0:
            return "busy"
        if host.asleep and not host.woken:  # ramped down (its power never went off)
            return "asleep"
        return "idle"

    def _draw(self, changes: Iterable[tuple[_Host, str]]) -> None:
        """Each host draws its figure from now on, in its machine state: the energy of the
        figure it leaves is charged, and the hosts are counted again. (Drawing the figure
        it draws only charges it up to now.) Hosts in a list: every start and end draws
        on each of its hosts."""
        counts, now = self._counts, self.now
        for host, watts in changes:
            length = now - host.since
            if length > 0:
                figure = host.watts
                host.energy[figure] = host.energy.get(figure, 0.0) + \
                    host.figures[figure] * length
            host.since = now
            counts[host.counted] -= 1
            host.state, host.watts = _FIGURE_STATES[watts], watts
            counted = host.counted = host.base + _FIGURE_INDEX[watts]
            counts[counted] = counts.get(counted, 0) + 1
            self._counts_changed = True

    def _event_vnodes(self, names: Iterable[str]) -> dict[str, Vnode]:
        """The server's events' vnodes (periodic, exechost_startup) as the engine gives
        them (`Engine._vnode_rows`): their attributes, with the states and assignments the
        running jobs give them (job-busy), and in ``jobs`` the cpus each running job holds
        (`_cpu_slots`; [] when none). An object is carried again only while nothing
        changed it since an event last carried it (its vnode: a job's start or end, a
        hook's change; the object: a hook's write past the setters, which neither server
        keeps, such as ``dict.__setitem__`` on its resources; `Carried`, which runs none
        of a hook's code): a replay's periodic hook gets every vnode thousands of times,
        and the engine makes each event's afresh. A new object's values are its own, and
        copied only where they are the store's."""
        out = {}
        store, room, slots = self.vnode_attrs, self.room, self._cpu_slots
        cache = self._event_vnode_cache
        for name in names:
            known = cache.get(name)
            again = known.again() if known is not None else None
            if again is not None:
                out[name] = again
                continue
            attrs = store[name]
            ncpus = _ncpus(attrs)
            used = ncpus - room[name]
            vnode = out[name] = Vnode(name, attrs)
            vnode.own_values()  # (a stored dict or list value: shares nothing with it)
            view = vnode._attrs
            if ncpus and used >= ncpus:  # a stored state is "free" or states without it
                view["state"] = "job-busy" if attrs["state"] == "free" else \
                    f"{attrs['state']},job-busy"
            view["resources_assigned"] = vnode._wrap("resources_assigned", {"ncpus": used})
            # (no running job without periodic hooks: startup is before any; a new list)
            view["jobs"] = slots.listed(name) if slots is not None else []
            carried = Carried.of(vnode)
            if carried is not None:
                cache[name] = carried
            else:
                cache.pop(name, None)
        return out

    def _use_times(self, names: Iterable[str]) -> dict[str, tuple[Any, Any]]:
        """Each vnode's `_USE_TIMES` as they are now: a job's own events see them as
        they were before its start or end (`_job_vnodes`)."""
        store = self.vnode_attrs
        return {name: (store[name].get("last_used_time"),
                       store[name].get("last_state_change_time")) for name in names}

    def _job_vnodes(self, names: Iterable[str],
                    times: dict[str, tuple[Any, Any]] | None) -> dict[str, Vnode]:
        """A job's own events' vnodes (execjob_*) as the engine gives them
        (`Engine._job_vnodes`, `_NodeRead`): the stored attributes, made afresh for each
        event: their stored state (no job-busy), no ``resources_assigned`` nor ``jobs``,
        which the engine derives and never stores; and last_used_time and
        last_state_change_time as `times` has them (before the job's start or end, which
        the engine writes only after these events: `Engine._finish`, `_track_states`)."""
        store = self.vnode_attrs
        out = {}
        for name in names:
            vnode = out[name] = Vnode(name, store[name])
            vnode.own_values()
            if times is not None:
                attrs = vnode._attrs
                for key, value in zip(_USE_TIMES, times[name], strict=True):
                    if value is None:
                        attrs.pop(key, None)
                    else:
                        attrs[key] = value
        return out

    def _vnode_changes(self, outcome: Outcome) -> None:
        if outcome.kind in ("error", "alarm"):
            return
        states_changed = []
        for name, changes in (outcome.changes.get("vnode_list") or {}).items():
            attrs = self.vnode_attrs.get(name)
            if attrs is None:
                continue  # a replay's machine is the platform's: hooks add no vnodes
            changes = lifecycle.hook_vnode_changes(changes)  # (as the engine keeps them)
            if "state" in changes:
                if changes["state"] != attrs["state"]:
                    changes["last_state_change_time"] = int(self.now)
            after = attrs.copy()
            apply_to_attrs(after, changes)  # (one resource set leaves the others)
            if after == attrs:  # nothing left to apply (a derived attribute, a state it had)
                continue
            had = _ncpus(attrs)
            apply_to_attrs(attrs, changes)
            if _ncpus(attrs) != had:  # (what tells whether a cycle could start a job)
                self._resize(name, _ncpus(attrs) - had)
            self._event_vnode_cache.pop(name, None)
            self.vnodes[name] = Vnode(name, attrs)
            self._vnode_log.changed(name)
            self._touched = True
            self._most = None
            if "state" in changes:
                states_changed.append(name)
        if states_changed or self._power_file.exists():
            self._sync_power(states_changed)

    def _resize(self, name: str, more: int) -> None:
        """A hook gave vnode `name` `more` cpus (fewer when negative): its free room and the
        machine's, which decide whether a cycle could start a job, follow; and its host's
        cpus, which a job's share of the host's busy watts is of: those of its vnodes now
        when it is empty, else the most they have had since it was last empty. So a
        host's jobs are never charged more than it drew busy: a job starts only on free
        cpus, so the cpus in use never exceed that most, which holds until the host is
        empty again (its vnodes' cpus now alone would not hold: fewer than its jobs have
        charged each more than its part). A job's share of each interval is of the host's
        cpus then: when they change under jobs, their shares are settled (`_settle_cpus`)."""
        host = self.hosts[self.vnode_host[name]]
        host.has += more
        if host.busy > 0 and host.has > host.cpus:
            self._settle_cpus(host)
        host.settle_cpus()
        before = self.room[name]
        after = self.room[name] = before + more
        self._room_count[before] -= 1
        self._room_count[after] = self._room_count.get(after, 0) + 1
        self._free_total += more

    def _settle_cpus(self, host: _Host) -> None:
        """The jobs on `host`, whose cpus grow now (to its vnodes' `has`) under them, are
        charged with its cpus until now, and with its cpus from now on after this: each
        interval of a job's time on a host is charged its share of the cpus then. Its odd
        figure's time so far (`_charge_odd`) is charged now; its busy time so far, which
        the job's end charges by the cpus then (`_occupy_each`, `_occupy_alike`), is moved
        here from the cpus after to the cpus before (its share by those, less its share by
        these: the end's charge less this is the share by the cpus of each interval). A
        job's energy is then never below 0, and its hosts' figures times its share of
        each interval: the odd time's busy charge taken back at the cpus then was charged
        at the cpus at the end, and a host grown under a job made it negative."""
        if host.watts in _ODD_FIGURES:
            self._charge_odd(host)
        before, after = host.cpus, max(host.cpus, host.has)
        index, vnode_host, now = host.spec.index, self.vnode_host, self.now
        busy = host.figures["busy"]
        for run in self.running.values():
            if index not in run.hosts or run.start is None:
                continue
            ncpus = sum(n for name, n in run.vnodes.items() if vnode_host[name] == index)
            charge = busy * (now - run.start) * ncpus
            run.energy += charge / before - charge / after

    def _sync_power(self, states: Iterable[str] = ()) -> None:
        """Hosts' power from their vnodes' sleep state and the simulated driver's record:
        the hosts of the vnodes whose `states` changed, and those whose record changed."""
        hosts = set()
        for name in states:
            index = self.vnode_host[name]
            if (SLEEP in str(self.vnode_attrs[name]["state"]).split(",")) != (
                    name in self._sleepers):
                self._sleepers.symmetric_difference_update((name,))
                self._host_sleepers[index] += 1 if name in self._sleepers else -1
                hosts.add(index)
        try:  # (read again only when the file is another or was written since)
            st = self._power_file.stat()
            seen = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
            text = self._driver_text if seen == self._driver_file else \
                self._power_file.read_text()
        except OSError:
            seen, text = None, ""
        self._driver_file = seen
        if text != self._driver_text:
            self._driver_text = text
            try:
                driver = json.loads(text) if text else {}
            except ValueError:
                driver = {}
            driver = driver if isinstance(driver, dict) else {}
            old, self._driver = self._driver, driver
            hosts.update(self._host_index[h] for h in set(old) | set(driver)
                         if h in self._host_index and old.get(h) != driver.get(h))
        driver = self._driver
        self._odd.update(hosts)
        for index in sorted(hosts):
            host = self.hosts[index]
            asleep = self._host_sleepers[index] > 0
            record = driver.get(host.spec.name)
            power, since = host.power, None
            if isinstance(record, dict) and record.get("power") in ("on", "off"):
                power, since = record["power"], float(record.get("since") or 0)
            if power != host.power and since is not None:
                host.power = power
                host.woken = power == "on"
                delay = host.spec.power.shutdown if power == "off" else host.spec.power.boot
                host.until = float(math.ceil(since + delay))  # (whole seconds)
                if host.until > self.now:
                    heapq.heappush(self._wakes, (host.until, host.spec.index))
            if asleep != host.asleep:
                host.asleep = asleep
                if not asleep:
                    host.woken = False
            self._host_state(host)

    def _write_platform(self, path: Path) -> None:
        """`PLATFORM_FILE` in the plugins' state folder (made as the power plugin makes it:
        0755), before any hook runs."""
        path.parent.parent.parent.mkdir(mode=0o755, parents=True, exist_ok=True)  # the work
        for folder in (path.parent.parent, path.parent):  # (parents=True: the umask's mode)
            folder.mkdir(mode=0o755, exist_ok=True)
        path.write_text(json.dumps({"hosts": {
            host.name: {"boot": host.power.boot, "shutdown": host.power.shutdown}
            for host in self.machine.hosts}}, sort_keys=True))

    def _startup(self) -> None:
        outcome = self._fire("exechost_startup",
                             vnode_list=lambda: self._event_vnodes(self.vnode_attrs))
        if outcome is not None:
            self._vnode_changes(outcome)

    def _periodics(self, now: float) -> None:
        """The periodic hooks due by `now`, by due time then name."""
        for name, due in sorted(self._periodic_due.items(), key=lambda kv: (kv[1], kv[0])):
            if due <= now:
                self._periodic(name)
                self._periodic_due[name] = now + self._freq[name]

    def _periodic(self, name: str) -> None:
        """One run of periodic hook `name`. Its job list is the engine's (`store.jobs`
        in state Q): every job in state Q, those waiting in a route queue too, in
        submission order; not the waiting (W) ones."""
        runs = [run for run in self.queued.values() if run.attrs["job_state"] == "Q"]
        if self.routing:
            runs += [run for run in self.routing.values() if run.attrs["job_state"] == "Q"]
        runs.sort(key=lambda run: run.seq)  # (a requeued job comes last in `queued`)
        jobs = self._event_jobs(runs)
        outcome = self._fire_only("periodic", (name,),
                                  vnode_list=self._event_vnodes(self.vnode_attrs),
                                  resv_list={}, job_list=jobs)
        if self._quiet and self._seen_from != self._last_change and \
                outcome.kind not in ("error", "alarm") and outcome.changes.get("vnode_list"):
            # The first change of a stall: the state before it is one the scheduler saw.
            self._seen = {self._fingerprint()}
            self._seen_from = self._last_change
        self._vnode_changes(outcome)

    def _event_jobs(self, runs: list[_Run]) -> dict[str, Job]:
        """A periodic event's queued jobs (``job_list``) as the engine gives them: an
        object of the event's own for each, never the one the schedulers read
        (``run.job``), with values of its own, as the engine makes them afresh for each
        run. One is carried to the next run while its job's object is the same and
        nothing changed it (`Carried`), as a vnode's (`_event_vnodes`)."""
        jobs = {}
        last, cache = self._event_job_cache, {}
        for run in runs:
            job_id = run.tj.job_id
            known = last.get(job_id)
            if known is not None and known[0] is run.job:
                again = known[1].again()
                if again is not None:
                    jobs[job_id] = again
                    cache[job_id] = known
                    continue
            job = jobs[job_id] = Job(job_id, run.attrs)
            job.own_values()
            carried = Carried.of(job)
            if carried is not None:
                cache[job_id] = (run.job, carried)
        self._event_job_cache = cache  # (the jobs queued now only)
        return jobs

    def _new_state(self) -> bool:
        """Whether what the periodic hooks changed, with nothing else happening, brought
        the machine to a state the scheduler has not seen since the stall began (its last
        job change): only then does the stall's count start again. A hook that
        takes hosts away in stages for longer than STALL still has their jobs start when
        it brings them back (each stage, and the return, is new); one that writes a
        comment, or toggles a vnode or a host's power, ends the replay."""
        mark = self._fingerprint()
        if mark in self._seen:
            return False
        self._seen.add(mark)
        self._seen_from = self.now
        return True

    def _fingerprint(self) -> bytes:
        """A digest of what the schedulers read of the machine and a periodic hook can
        change: each vnode's resources_available and `_SCHEDULED` attributes. (A replay's
        periodic hooks change vnodes alone: no queue, no server.) 16 bytes a state, however
        many vnodes."""
        import hashlib  # (here: a replay without periodic hooks never pays its import)

        digest = hashlib.blake2b(digest_size=16)
        for name, attrs in self.vnode_attrs.items():
            avail = attrs.get("resources_available") or {}
            digest.update(repr((name, [attrs.get(k) for k in _SCHEDULED],
                                sorted(avail.items()))).encode())
        # (and each host's power: a boot that ends counts when it brings a state not seen,
        # the first after a long sleep, not a power toggled on and off for ever)
        digest.update(repr([(h.power, h.until > self.now) for h in self.hosts]).encode())
        return digest.digest()

    # -- machine states -----------------------------------------------------------------------
    def _record_states(self) -> None:
        if self._counts_changed:  # else the hosts' sums are those made last time
            self._counts_changed = False
            # The sums are a function of `_counts` (its order too: ties sort in it), and a
            # replay's machine comes back to the same counts again and again.
            hosts = tuple(self._counts.items())
            sums = self._sums.get(hosts)
            if sums is None:
                if len(self._sums) >= MEMO_SIZE:
                    self._sums.clear()
                sums = self._sums[hosts] = self._state_sums()
            self._counts_key, self._state_counts, self._watts = sums
        queued, running = len(self.queued), len(self.running)
        key = (self._counts_key, queued, running, self._busy)
        if key == self._states_key:
            return
        self._states_key = key
        self.sink.machine(MachineStates(self.now - self.epoch, dict(self._state_counts),
                                        self._watts, queued, running, self._busy))

    def _state_sums(self) -> _StateSums:
        """What `_counts` comes to: the key that tells a change of the machine's states
        (hosts per state and figure), the hosts per state, and the watts."""
        # Hosts counted nowhere add nothing (0 hosts, 0.0 watts): they are left out.
        keys = self._count_keys
        live = [(keys[i], n) for i, n in self._counts.items() if n]
        key = tuple(sorted([(k[0], k[2], n) for k, n in live]))
        counts = dict.fromkeys(MACHINE_STATES, 0)
        watts = 0.0
        models = self._models
        for (state, model, figure), n in sorted(
                live, key=lambda kv: (kv[0][0], models[kv[0][1]].name, kv[0][2])):
            counts[state] += n
            watts += n * getattr(models[model], figure)
        return key, counts, watts


#: Memory resources a select may ask for (PBS's names, in any case).
_MEMORY = frozenset({"mem", "vmem", "pmem", "pvmem"})


class _RunTimeWalltime(str):
    """The walltime a job that asked none, and got none by default, is given in a replay:
    its run time (`Simulator._complete`). The scheduler plans with it and the job is never
    killed; a limit on queued walltime counts what the job asked, nothing, as the
    engine's does (`_requested_tally`)."""

    __slots__ = ()


def _asked(request: Any) -> Any:
    """A job's Resource_List as it asked it: without its `_RunTimeWalltime` (None when it
    has none)."""
    if request is None or not isinstance(request.get("walltime"), _RunTimeWalltime):
        return None
    return {k: v for k, v in request.items() if k != "walltime"}


def _requested_tally(server: dict[str, Any], queues: dict[str, dict[str, Any]]) -> limits.Tally:
    """The engine's `limits.Tally` for a replay whose limits on queued jobs count walltime:
    a job's `_RunTimeWalltime` is counted as what it stands in for, no walltime asked."""
    from ..engine import limits as queued_limits

    class RequestedTally(queued_limits.Tally):
        def _amount(self, attrs: limits.JobAttrs, res: str, kind: str) -> float:
            asked = _asked(attrs.get("Resource_List")) if res == "walltime" else None
            if asked is not None:
                attrs = {"queue": attrs.get("queue"), "Resource_List": asked}
            return super()._amount(attrs, res, kind)

        def check(self, job: Any, old: limits.JobAttrs | None = None) -> None:
            asked = _asked(job.get("Resource_List"))
            super().check(job if asked is None else {**job, "Resource_List": asked}, old)

    return RequestedTally(server, queues, RESOURCE_TYPES, ())


def _ncpus(attrs: dict[str, Any]) -> int:
    """A vnode's resources_available.ncpus as a number (0 when unset or not one)."""
    value = (attrs.get("resources_available") or {}).get("ncpus")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _without_mem(select: str) -> str:
    """A select without its chunks' memory, for a machine that declares none (a trace's
    memory is not modelled there, and every job asking for some would be refused). A chunk
    that asked for memory only is one cpu, as PBS's default chunk gives it."""
    chunks = []
    for chunk in parse_select(select):
        res = ":".join(f"{k}={select_value(v)}" for k, v in chunk.resources.items()
                       if k.lower() not in _MEMORY) or "ncpus=1"
        chunks.append(f"{chunk.count}:{res}")
    return "+".join(chunks)


def scratch_root() -> str | None:
    """Where a replay makes its own work folder: in memory (``/dev/shm``) where the system
    has one, else tempfile's default (``TMPDIR`` when set, which is then obeyed). A plugin
    writes its state at each of its runs, tens of thousands of times in a replay; on a
    journalled disk, a file renamed over another costs a flush each time."""
    if os.environ.get("TMPDIR"):
        return None
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


@contextlib.contextmanager
def replay_home(workdir: str | os.PathLike[str] | None = None, *,
                home: bool = True) -> Iterator[Path]:
    """A replay's work folder, the pbsplug home for the block (`PBSPLUG_HOME`; with
    `home` false, the folder only): `workdir`, else a private one of its own (mode 0700,
    under `scratch_root`), removed when the block ends, however it ends. Load the
    replay's plugins inside it and give it to the `Simulator` (`workdir`): a plugin whose
    `configure` reads its empty state folder as ``default_home() / "hooks" / "tmp"`` then
    has the replay's folder, as its hooks do, never the live home's."""
    path = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="pbsplug-sim-",
                                                               dir=scratch_root()))
    try:
        with _home(path) if home else contextlib.nullcontext():
            yield path
    finally:
        if not workdir:
            shutil.rmtree(path, ignore_errors=True)


class _home:
    """PBSPLUG_HOME set to the simulation's work folder while it runs: a plugin's files (its
    state folder) go there, never to the real host's pbsplug home."""

    def __init__(self, path: Path):
        self.path = path

    def __enter__(self) -> None:
        self.saved = os.environ.get("PBSPLUG_HOME")
        os.environ["PBSPLUG_HOME"] = str(self.path)

    def __exit__(self, *exc: Any) -> None:
        if self.saved is None:
            os.environ.pop("PBSPLUG_HOME", None)
        else:
            os.environ["PBSPLUG_HOME"] = self.saved


#: What a ``[sim.sched.NAME]`` table may set besides the policy keys (docs/scheduler.md).
SCHED_KEYS = frozenset({"partition", "scheduling"})


def sched_objects(scheds: dict[str, Any], policy: dict[str, Any],
                  partitions: Iterable[str] | None = None) -> list[SchedulerInstance]:
    """The site's sched objects for a replay (``[sim.sched.NAME]``, what ``qmgr create
    sched`` makes on a server): each schedules (``scheduling`` true unless set), with the
    run's policy overlaid by its own keys. An unknown key or a bad value is a `SimError`
    naming it. Partitions are checked as qmgr checks ``set sched NAME partition = ...``
    (`_sched_partitions`), and with `partitions` (the platform's), each must be one of
    them; names are checked by `build_schedulers`, as qmgr checks them."""
    out = []
    if not isinstance(scheds, dict):
        raise SimError(f"[sim.sched]: {scheds!r}: expected a table of sched objects")
    known = None if partitions is None else set(partitions)
    owned: dict[str, list[str]] = {}  # the partitions of the sched objects before
    for name, attrs in scheds.items():
        where = f"[sim.sched.{name!r}]" if not str(name).isprintable() else \
            f"[sim.sched.{name}]"
        if not isinstance(attrs, dict):
            raise SimError(f"{where}: {attrs!r}: expected a table")
        unknown = sorted(set(attrs) - SCHED_KEYS - POLICY_KEYS)
        if unknown:
            raise SimError(f"{where}.{unknown[0]}: unknown key; expected partition, scheduling "
                           "or a policy key of docs/scheduler.md")
        parts = _sched_partitions(f"{where}.partition", str(name), attrs.get("partition"),
                                  owned, known)
        owned[str(name)] = parts
        if not isinstance(attrs.get("scheduling", True), bool):
            raise SimError(f"{where}.scheduling: {attrs['scheduling']!r}: expected true or "
                           "false")
        own = {k: v for k, v in attrs.items() if k in POLICY_KEYS}
        _check_policy({**policy, **own}, where)
        out.append(sched_instance(str(name), {**policy, **own, "partition": parts,
                                              "scheduling": attrs.get("scheduling", True)}))
    return out


def _sched_partitions(where: str, name: str, value: Any, owned: dict[str, list[str]],
                      known: set[str] | None) -> list[str]:
    """A sched object's ``partition`` (a name, PBS's comma-separated list, or a TOML list)
    as qmgr reads and checks it on a server: the same conversion (items stripped, empty
    ones dropped, no control characters) and the same rules (`partitions.check_sched`: not
    ``pbs-default``, not a partition another sched has, none on ``default``). With `known`
    (the platform's partitions), a partition no host has is an error too: its scheduler
    would schedule nothing, in silence. Each error is one line naming `where`, the value
    (the partition at fault, when one is) and what is wrong."""
    from ..engine.partitions import World, check_sched
    from ..engine.qmgr import AttrOp, QmgrError, convert, definitions

    expected = (f"{where}: {value!r}: expected a partition name or a list of them (a "
                "scheduler without one schedules nothing)")
    if isinstance(value, list) and all(isinstance(p, str) for p in value):
        text = ",".join(value)  # (as qmgr's text: a, b)
    elif isinstance(value, str):
        text = value
    else:
        raise SimError(expected)
    try:
        parts = convert("sched", AttrOp("partition", None, "=", text), definitions("sched"))
    except QmgrError as exc:
        raise SimError(f"{where}: {value!r}: {exc}") from None
    if not parts:
        raise SimError(expected)
    world = World(scheds={other: {"partition": p} for other, p in owned.items()},
                  queues={}, nodes={})
    for part in parts:
        try:
            check_sched(name, {"partition"}, {"partition": [part]}, world)
        except QmgrError as exc:
            holder = next((other for other, p in owned.items() if part in p), None)
            raise SimError(f"{where}: {part!r}: {exc}" + (
                f" ([sim.sched.{holder}] has it)" if holder else "")) from None
        if known is not None and part not in known:
            have = ", ".join(sorted(known)) or "none"
            raise SimError(f"{where}: {part!r}: no host of the platform is in this partition "
                           f"(the platform's partitions: {have})")
    return list(dict.fromkeys(parts))  # (one listed twice is one)


def policy_settings(preset: str, site_table: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scheduler policy for a run: a preset (pbs, easy, fifo), then the site's
    ``[sim.scheduler]`` keys. Checked as the scheduler checks a sched object's."""
    if preset not in PRESETS:
        raise SimError(f"--policy {preset!r}: expected one of {', '.join(PRESETS)}")
    if site_table is not None and not isinstance(site_table, dict):
        raise SimError(f"[sim.scheduler]: {site_table!r}: expected a table of policy "
                       "settings")
    settings = {**PRESETS[preset], **(site_table or {})}
    _check_policy(settings, "[sim.scheduler]")
    return settings


def _check_policy(settings: dict[str, Any], where: str) -> None:
    """A `SimError` naming `where` when `settings` are no policy a replay can run."""
    try:
        problem = Policy.from_attributes(settings, strict=True).problem()
    except ValueError as exc:
        problem = str(exc)
    if problem:
        raise SimError(f"{where}: {problem}")


__all__ = ["PRESETS", "SCHED_HOOKS", "SIM_EVENTS", "HookUse", "SimError", "Simulator",
           "Summary", "TraceOrderError", "policy_settings", "replay_home", "sched_objects",
           "whole_seconds"]
