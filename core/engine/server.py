"""The local engine's server: requests, scheduling cycles, and jobs' lives.

One process, one thread. It answers requests on a UNIX socket (`api`), runs scheduling
cycles (on submission, on a job's end, on changes that matter, and every
scheduler_iteration), starts jobs through the executor and notices their ends. Each hook
event fires through the kernel's `Runner`, where PBS fires it, and its outcome is carried out
as PBS's table says (pbs-behavior.md §1.3-1.4). Being single-threaded is what lets the runner
fork for hooks safely.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import errno
import functools
import grp
import logging
import os
import pwd
import signal
import socket
import time
import types
import typing
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, NoReturn

from .. import lifecycle, units, values
from ..events import Event, message_text
from ..lifecycle import DELETED_BY
from ..objects import (
    RESOURCE_ATTRIBUTES,
    Job,
    PbsObject,
    Queue,
    Server,
    Vnode,
    apply_to_attrs,
    attrs_after,
    is_route_queue,
)
from ..plugins import PluginSet, load_plugins
from ..runner import Outcome, Pending, Runner, client_message, consequence
from ..scheduler import Scheduler, Snapshot, build_schedulers
from ..scheduler.feed import Feed
from ..scheduler.instances import POLICY_KEYS, sched_instance
from ..scheduler.model import (
    UNUSABLE_STATES,
    CycleResult,
    format_exec_vnode,
    job_select,
    parse_node_sort_key,
    resource_amount,
    schedselect,
)
from ..scheduler.runlimits import LIMIT_ATTRS
from ..scheduling import SchedulerInstance
from ..siteconfig import load_site
from ..units import default_chunks, exec_vnode_names, parse_exec_vnode
from . import acl, admission, arrays, depend, executor, jobid, jobspec, limits, qmgr, routing
from . import interactive as interactive_jobs
from .accounting import Accounting
from .assigned import BUILTIN as ASSIGNED_BUILTIN
from .assigned import SERVER as ALL_QUEUES
from .assigned import Assigned
from .cpuslots import CpuSlots
from .errors import (
    CHANGED_MEANWHILE,
    PBSE_ATTRRO,
    PBSE_BADATVAL,
    PBSE_BADSTATE,
    PBSE_BADUSER,
    PBSE_EXCQRESC,
    PBSE_FINISHED_SUBJOB,
    PBSE_HISTJOBID,
    PBSE_HOOKERROR,
    PBSE_INVALJOBRESC,
    PBSE_IVALREQ,
    PBSE_NOSUP,
    PBSE_PERM,
    PBSE_SYSTEM,
    PBSE_UNKJOBID,
    PBSE_UNKNODE,
    PBSE_UNKQUE,
    STOPPING,
    PbsError,
    check_resources,
    each,
    refuse_if_stopped,
    stopped,
)
from .home import (
    LOG_ADMIN,
    LOG_DEBUG,
    LOG_ERROR,
    LOG_EVENTS_DEFAULT,
    LOG_JOB,
    LOG_JOB_USAGE,
    LOG_SCHED,
    LOG_SYSTEM,
    SERVER_UMASK,
    Home,
    HookLogHandler,
    ServerLog,
    log_events,
)
from .jobcontrol import JobControl, run_suspended
from .manager import Manager
from .periodic import Periodic, offline_comment
from .reservations import Reservations, resv_exclusive, resvs_on_vnodes, with_resv_assigned
from .routing import Router
from .schedprocs import NEEDS_ATTENTION, SchedulerProcesses, Work
from .store import ENV as store_env
from .store import Store, StoreWriteError
from .subjobs import Arrays, EnvBudget

#: Seconds between two looks at the site config's mtime (a change is picked up then).
SITE_CHECK_INTERVAL = 1.0
#: The most items (ids, names) one request may carry.
MAX_REQUEST_ITEMS = 10_000
#: PBS's hold types: user, other (operator), system, bad password.
HOLD_LETTERS = "uosp"
#: The job attributes qalter may change while the job runs, whoever asks (OpenPBS 23.06's
#: ATR_DFLAG_ALTRUN, checked: `Engine._check_alter_running`); a plugin's may be changed too.
#: A new Output_Path, Error_Path or Shell_Path_List is the job's next run's: this one
#: writes its files in place already.
ALTER_RUNNING = frozenset({
    "Job_Name", "Checkpoint", "Error_Path", "Output_Path", "Execution_Time", "Hold_Types",
    "Mail_Points", "Mail_Users", "Priority", "Rerunable", "Resource_List",
    "Shell_Path_List", "run_count", "comment", "release_nodes_on_stageout"})
#: The resources qalter may change while the job runs (the same flag of PBS's): the
#: limits the server and the job's walltime and cput checks read as they are now.
ALTER_RUNNING_RESOURCES = frozenset({"walltime", "cput", "soft_walltime", "min_walltime",
                                     "max_walltime"})
#: Resources no qsub may ask for, root's neither, and only operators and managers may set
#: with qalter: OpenPBS 23.06's 15003 for soft_walltime (checked as root and as a user).
ADMIN_RESOURCES = ("soft_walltime",)
#: PBS's comment of an array not begun whose max_run_subjobs lets none start (``-J 1-3%0``).
SUBJOB_LIMIT = "Not Running: Number of concurrent running subjobs limit reached"
#: OpenPBS 23.06's scheduler's comment of a job queued in an execution queue not started
#: (qstop; checked).
QUEUE_NOT_STARTED = "Not Running: Queue not started."
#: The comment of an array's finished subjob that a qrerun of the array queues again.
REQUEUED_WITH_ARRAY = "Job requeued with its array at request of an operator"
#: Seconds between SIGTERM and SIGKILL when a job is killed, when its queue sets no
#: kill_delay (PBS's default).
KILL_DELAY = 10
#: Seconds between two reads of the running jobs' use, which their shepherds sample
#: (`executor.sample_time`): a stat of one small file a job, no /proc scan in the server.
USAGE_READ_EVERY = 1.0
#: Seconds between two writes of the running jobs' new resources_used to the store, one
#: transaction for all of them (`save_usage`); qstat shows each sample as it is read.
USAGE_SAVE_EVERY = 10.0
#: TMPDIRs set aside at a job's end (`executor.sweep_leftovers`): removed this many seconds
#: a poll while some are left, looked for again every SWEEP_EVERY seconds (and at start).
SWEEP_SECONDS = 0.05
SWEEP_EVERY = 60.0
#: A start that failed for want of what every start borrows from the machine (a process,
#: descriptors, memory, room: `_short_start`) pauses the cycles' starts, START_PAUSE
#: seconds after the first, twice as long after each one that follows, START_PAUSE_MOST at
#: most; a start that works ends the doubling. The job's try counts all the same (21 hold
#: it, as PBS's), but the tries no longer follow one another within a second.
START_PAUSE = 1.0
START_PAUSE_MOST = 60.0
ROLE_USER, ROLE_OPERATOR, ROLE_MANAGER = "user", "operator", "manager"
_ACTIVE = ("Q", "H", "W", "R", "E", "S", "T")
#: What a job is counted by in the limits on queued jobs: a change to one is checked.
_COUNTED_BY_LIMITS = ("queue", "euser", "egroup", "project", "Resource_List", "job_state")
#: The states qhold and qrls act in: a running job is held too (should it be requeued).
_HOLDABLE = frozenset({"Q", "H", "W", "R", "S"})  # (S: suspended, as R)
#: A suspended job counts as running in qstat -Q's and -B's counts, as OpenPBS 23.06
#: counts it (checked: ``Running:1``, the Run column).
_COUNTED_AS = {"S": "R"}
#: PBS's comment of a held job: ``Job held by root on Sat Dec  5 02:16:59 2026``.
HELD_BY = "Job held by "
#: PBS's state_count names, in its order.
_STATE_NAMES = (("Transit", "T"), ("Queued", "Q"), ("Held", "H"), ("Waiting", "W"),
                ("Running", "R"), ("Exiting", "E"), ("Begun", "B"))
#: What state_count and total_jobs count: an array that has begun too (Begun, beside its
#: running subjobs), as OpenPBS 23.06 counts it (checked: ``Running:2 Exiting:0 Begun:1``).
_COUNTED_STATES = (*_ACTIVE, "B")
PBSE_RESCUNAV = 15044
PBSE_NORERUN = 15038
PBSE_NODESPLACE = 15110  # (Cannot be used with select or place: nodes)
PBSE_BADDEPEND = 15054
#: PBS's words when a ``before*`` names a job that was never given an ``on:`` count.
BEFORE_REFUSED = "Dependency request for job rejected by "
#: A vnode's states in the order PBS lists them (``offline,job-busy``,
#: ``job-busy,resv-exclusive``; OpenPBS 23.06's table); others after, as they came.
_STATE_ORDER = {name: rank for rank, name in enumerate((
    "state-unknown", "down", "Stale", "offline", "job-busy", "job-exclusive", "busy",
    "initializing", "provisioning", "wait-provisioning", "resv-exclusive", "unresolvable",
    "offline_by_mom", "maintenance", "sleep"))}
#: A job's attributes qstat shows to managers only.
_MANAGERS_READ = frozenset({"schedselect"})
#: The store's meta key telling that a home's server was given ``acl_roots`` (`_first_start`).
_ROOTS_GIVEN = "acl_roots_given"


class Caller:
    """Who sent a request (from SO_PEERCRED), and what they may do."""

    def __init__(self, uid: int, role: str):
        self.uid = uid
        self.role = role
        try:
            self.user = pwd.getpwuid(uid).pw_name
        except KeyError:
            self.user = str(uid)

    @property
    def privileged(self) -> bool:
        return self.role in (ROLE_MANAGER, ROLE_OPERATOR)

    @property
    def manager(self) -> bool:
        return self.role == ROLE_MANAGER


class _Chain:
    """A hook chain started while the server serves (`Engine.chains`): its event, its
    `Pending`, and what its job does with its outcome once it is over (`done`). An
    execjob_preterm chain's `waiters`: the qdel answers that wait for it (`LaterAnswer`,
    the results in each that name its job, and who asked and whether with -x: one waiter
    per request), and `array_qdel`, who asked first when one of them is an array's or a
    range's qdel, which recorded its own part before the chain started: a chain the
    server's stop gives up then leaves its subjob to be deleted at the next start
    (`Engine.stop_chains`)."""

    def __init__(self, event: str, pending: Pending, done: Callable[[Outcome], None]):
        self.event = event
        self.pending = pending
        self.done = done
        self.waiters: list[tuple[LaterAnswer, list[dict[str, Any]], Caller, bool]] = []
        self.array_qdel: Caller | None = None

    def answer(self, error: PbsError | None) -> None:
        """Each waiting qdel told what came of its job (`error`, or nothing)."""
        for later, results, _, _ in self.waiters:
            later.fill(results, error)
        self.waiters = []

    def purger(self) -> Caller | None:
        """The first waiting qdel that asked for -x (the job's history goes once it is
        over), if any: each waiter's own options count, not only the first's."""
        return next((caller for _, _, caller, purge in self.waiters if purge), None)


#: A `LaterAnswer` whose answer is its per-job `results` (a request whose whole answer is
#: None, a pbsnodes', answers None).
_NO_VALUE: Any = object()


class LaterAnswer:
    """A request's answer that waits for hook chains (a qdel whose jobs' execjob_preterm
    has a pbsuser hook, `Engine.defer_answers`): its per-job `results` (an id named again
    shares its first result), complete once `missing`, the chains it waits for, is 0. The
    server's loop answers it then (`api`)."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []
        self.missing = 0
        #: A request's whole answer, when it is not `results` (a qmgr's, a pbsnodes':
        #: `_Asking`), or the error it is answered with instead.
        self.value: Any = _NO_VALUE
        self.error: PbsError | None = None

    def result(self) -> Any:
        return self.results if self.value is _NO_VALUE else self.value

    def fill(self, results: list[dict[str, Any]], error: PbsError | None) -> None:
        """A chain this answer waits for is over: its `results` told its `error`, unless
        they have one (an array's: its subjobs' first error is its answer)."""
        if error is not None:
            for result in results:
                result.setdefault("error", error.to_dict())
        self.missing -= 1


class _Asking:
    """A request whose hooks run while the server serves (a qmgr command's, a pbsnodes',
    `Engine._drive`: a hook may ask the server for something meanwhile): `steps`, the
    request's generator, asks for one event's outcome at a time; `pending` is the chain of
    `event` it waits for, stepped by `Engine.poll_asking`, and `later` its answer."""

    def __init__(self, event: str, pending: Pending, steps: RequestSteps, later: LaterAnswer):
        self.event = event
        self.pending = pending
        self.steps = steps
        self.later = later


class _Notice:
    """A change the server made to vnode `name` itself, written, whose modifyvnode hooks are
    told of it (`Engine._set_node`): the row as it was (`old`) and as written (`new`), and
    its chain once started (`pending`, stepped by `Engine.poll_notices`)."""

    def __init__(self, name: str, old: dict[str, Any], new: dict[str, Any]):
        self.name = name
        self.old = old
        self.new = new
        self.pending: Pending | None = None


#: A request that asks for its hooks' outcomes as it goes (`Engine._drive`): it yields an
#: event's (type, caller, objects) and is sent its `Outcome`, or None when the server's stop
#: gave its hooks up; it returns the request's answer.
RequestSteps = typing.Generator[tuple[str, "Caller", dict[str, Any]], "Outcome | None", Any]


def _row_changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, Any]:
    """What makes stored row `before` into `after`, as `apply_to_attrs` applies it: each
    attribute changed (None: unset), a resource mapping's resources each."""
    changes: dict[str, Any] = {}
    for key in before.keys() | after.keys():
        was, now = before.get(key), after.get(key)
        if was == now:
            continue
        if key in RESOURCE_ATTRIBUTES and type(was) is dict and type(now) is dict:
            changes[key] = {r: now.get(r) for r in was.keys() | now.keys()
                            if was.get(r) != now.get(r)}
        else:
            changes[key] = now
    return changes


def _touched(changes: Mapping[str, Any]) -> set[str]:
    """The attributes `_row_changes` changes, a resource's by its full name
    (``resources_available.mem``)."""
    return {f"{key}.{r}" for key, value in changes.items() if key in RESOURCE_ATTRIBUTES
            and type(value) is dict for r in value} | {
        key for key, value in changes.items()
        if key not in RESOURCE_ATTRIBUTES or type(value) is not dict}


class _Waits(Exception):
    """A qdel of jobs whose execjob_preterm chains run (`chains`: one job's, or the
    subjobs' of an array named): answered when they are over. `error`: the first error of
    the array's other subjobs, its answer whatever its chains' outcomes."""

    def __init__(self, *chains: _Chain, error: PbsError | None = None):
        super().__init__("execjob_preterm")
        self.chains = chains
        self.error = error


class _StartStopped(PbsError):
    """A job's start given up for the server's stop: the runner gave up one of its runjob,
    begin, prologue or launch hooks (`HookRun.cancelled`) as the stop came in the middle of
    a poll. The stop's rule, never the hook's error: a job still queued stays queued, and
    one stored R with no launch is requeued when the server starts again (`_recover`), as
    a stopped prologue's (`stop_chains`)."""

    def __init__(self, job_id: str):
        super().__init__(PBSE_SYSTEM, STOPPING, obj=job_id)


class _Ending:
    """A job's end hooks as they go (`Engine._end_hooks_from`): the job's end (`ended`),
    what was measured of its run (`used`) and what its hooks were given (`given`), the
    next of `lifecycle.END_EVENTS` to fire (`index`), and the last ``job.rerun()`` or
    ``job.delete()`` a hook asked for (`action`) and its event (`asked_by`). `then`: what
    carries the job's end on (given the job's attributes and this) when its end hooks are
    over.
    `record`: what a restart needs to end the job again (kept in its runtime as
    ``ending`` while a chain runs: `Engine._end_again`), for a job that ends without its
    processes ending (a status file tells the rest)."""

    def __init__(self, ended: executor.JobExit | None, used: dict[str, Any],
                 given: dict[str, Any],
                 then: Callable[[dict[str, Any], _Ending], None],
                 record: dict[str, Any] | None = None):
        self.ended = ended
        self.used = used
        self.given = given
        self.then = then
        self.record = record
        self.index = 0
        self.action: str | None = None
        self.asked_by: str | None = None

    def kept(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """What was measured but what a hook set since."""
        after = attrs.get("resources_used") or self.given
        return {k: v for k, v in self.used.items() if after.get(k) == self.given[k]}


class _Unwritten:
    """A change to a job that could not be written (a full disk), kept by
    `Engine._written_or_kept` and tried again at later polls (`Engine._poll_unwritten`):
    `write` given a copy of the job's attributes as they were (`attrs`), while the job is
    stored in `state` still (else written after all: dropped). `what` names it in the log:
    ``job end`` (after its end hooks: `_carry_on`; the job stored E, or R when a start
    hook ended it) or ``job requeue`` (a failed start's: `_requeue_or_keep`)."""

    def __init__(self, attrs: dict[str, Any], write: Callable[[dict[str, Any]], None],
                 state: str, what: str):
        self.attrs = attrs
        self.write = write
        self.state = state
        self.what = what


class _NodeRead:
    """The stored vnodes read once for a job's start events (`Engine._start_vnodes`): each
    event's hooks get Vnode objects made from deep copies of the read rows, so what one
    event's hooks leave on theirs reaches no other's. Read again only when the store wrote
    a row since (`Store.changes`: an earlier event's hooks changed a vnode, the job was
    written): a start read every vnode for each of its hooked events, three times at most."""

    def __init__(self, store: Store):
        self.store = store
        self.changes = -1
        self.rows: dict[str, dict[str, Any]] = {}

    def vnodes(self, attrs: Mapping[str, Any]) -> dict[str, Vnode]:
        """The job's vnodes (``exec_vnode``), each made afresh."""
        if self.changes != self.store.changes:
            self.rows, self.changes = self.store.all("node"), self.store.changes
        return {name: Vnode(name, copy.deepcopy(self.rows[name])) for name, _ in
                parse_exec_vnode(attrs.get("exec_vnode", "")) if name in self.rows}


def _host_of(nodes: Mapping[str, Mapping[str, Any]], name: str) -> str:
    return str(nodes[name].get("resources_available", {}).get("host") or name)


def _vnode_load(nodes: Mapping[str, Mapping[str, Any]], running: Iterable[Mapping[str, Any]],
                types: Mapping[str, str], names: Iterable[str] | None = None
                ) -> tuple[dict[str, dict[str, int]], set[str]]:
    """What the `running` jobs take of each vnode (of `names` only, when given: then
    `running` holds at least every job on a vnode of their hosts), and which they hold
    exclusively: a job's exclhost holds every vnode of its host, as the scheduler books
    them."""
    assigned: dict[str, dict[str, int]] = {
        n: {} for n in (nodes if names is None else names) if n in nodes}
    exclusive: set[str] = set()
    whole: set[str] = set()  # hosts a job holds whole (exclhost on one of its vnodes)
    for attrs in running:
        place = units.parse_place(attrs.get("Resource_List", {}).get("place"))
        for name, res in parse_exec_vnode(attrs.get("exec_vnode", "")):
            if name not in nodes:
                continue
            level = units.exclusivity(place, nodes[name].get("sharing"))
            if level == units.EXCLHOST:
                whole.add(_host_of(nodes, name))
            if name not in assigned:
                continue
            if level != units.SHARED:
                exclusive.add(name)
            for k, v in res.items():
                amount = resource_amount(k, v, types)
                if amount is not None:
                    assigned[name][k] = assigned[name].get(k, 0) + amount
    if whole:
        exclusive.update(name for name in assigned if _host_of(nodes, name) in whole)
    return assigned, exclusive


def _vnode_state(attrs: Mapping[str, Any], name: str, in_resv: set[str], exclusive: set[str],
                 assigned: Mapping[str, Mapping[str, int]]) -> str:
    """A vnode's state as pbsnodes shows it: its stored states, and those its reservation
    and its jobs give it."""
    states = [s for s in str(attrs.get("state", "free")).split(",") if s != "free"]
    ncpus = attrs.get("resources_available", {}).get("ncpus", 0)
    if name in in_resv:
        states.append("resv-exclusive")
    if name in exclusive:
        states.append("job-exclusive")
    elif ncpus and assigned[name].get("ncpus", 0) >= ncpus:
        states.append("job-busy")
    states.sort(key=lambda s: _STATE_ORDER.get(s, len(_STATE_ORDER)))
    return ",".join(states) or "free"


class _StateInputs:
    """What the vnodes' states are derived from (`_vnode_state`), kept by
    `Engine._track_states` between its calls and brought up to date from the rows the
    store wrote since (`Store.take_written`): the vnodes, the reservations and the running
    jobs, those by vnode. `changed` says which vnodes' states may have moved: those whose
    row, or a running job's on their host, was written (a job started, ended, requeued,
    suspended); a reservation written, or more rows than `Store.MAX_WRITTEN`, and every
    vnode is derived again (`full`)."""

    def __init__(self, store: Store):
        self.store = store
        self.nodes = store.all("node")
        self.resvs = store.all("resv")
        self.running = store.jobs(("R", "E"), lean=True)
        self.on: dict[str, set[str]] = {}  # vnode -> the running jobs on it
        self.hosts: dict[str, set[str]] = {}  # host -> its vnodes
        for job_id, attrs in self.running.items():
            self._place(job_id, attrs)
        for name in self.nodes:
            self.hosts.setdefault(_host_of(self.nodes, name), set()).add(name)

    def _place(self, job_id: str, attrs: Mapping[str, Any]) -> set[str]:
        names = exec_vnode_names(str(attrs.get("exec_vnode") or ""))
        for name in names:
            self.on.setdefault(name, set()).add(job_id)
        return set(names)

    def _unplace(self, job_id: str) -> set[str]:
        attrs = self.running.pop(job_id, None)
        names = set(exec_vnode_names(str((attrs or {}).get("exec_vnode") or "")))
        for name in names:
            self.on.get(name, set()).discard(job_id)
        return names

    def changed(self, written: set[tuple[str, str]]) -> set[str]:
        """The vnodes whose inputs the `written` rows changed, with every vnode of their
        hosts (an exclhost job holds its host whole), all brought up to date."""
        touched: set[str] = set()
        jobs = [key for kind, key in written if kind == "job"]
        for key in jobs:
            touched |= self._unplace(key)
        # (only the running ones decoded: SQLite reads the state column of the others)
        for key, attrs in self.store.jobs_among(jobs, ("R", "E")).items():
            self.running[key] = attrs
            touched |= self._place(key, attrs)
        for kind, key in written:
            if kind == "node":
                old = self.nodes.pop(key, None)
                if old is not None:
                    self.hosts[_host_of({key: old}, key)].discard(key)
                row = self.store.get("node", key)
                if row is not None:
                    self.nodes[key] = row
                    self.hosts.setdefault(_host_of(self.nodes, key), set()).add(key)
                touched.add(key)
                if old is not None:  # (its old host's vnodes too)
                    touched |= self.hosts.get(_host_of({key: old}, key), set())
        out: set[str] = set()
        for name in touched:
            if name in self.nodes:
                out |= self.hosts[_host_of(self.nodes, name)]
        return out


class Engine:
    """The server's state and behaviour, independent of the socket that feeds it requests."""

    def __init__(self, home: Home, plugins: PluginSet | None = None,
                 clock: Callable[[], float] = time.time):
        self.home = home
        os.umask(SERVER_UMASK)  # the server's files are private (docs/engine.md)
        home.make()
        self.clock = clock
        self.host = socket.gethostname().split(".")[0]
        #: This host's names, short and full: what the ACLs' host parts are matched with,
        #: and a job id's server part.
        self.host_names = jobid.host_names()
        self.log = ServerLog(home, self.host)
        # What hooks log goes to server_logs, info and up (debug too for a debug hook).
        self.hook_log = HookLogHandler(self.log)
        self.accounting = Accounting(home, self.host, self.clock, self.log)
        #: The queues' and the server's resources_assigned, as shown since the start.
        self.assigned = Assigned()
        logging.getLogger("pbsplug.hook").addHandler(self.hook_log)
        logging.getLogger("pbsplug.hook").setLevel(logging.INFO)
        self.store = Store(home.db)
        # (before `_recover`, whose records name a job's reservation as any end's do)
        self.accounting.resv_of = functools.partial(Reservations.of_queue, self.store)
        if plugins is None:
            plugins = load_plugins(load_site(home.site, allow_missing=True))
        self.plugins = plugins
        self.stopping = False
        self._next_wait_check = 0.0
        #: The limits' count as last brought up to date (`_limits_tally`), with the store's
        #: generation it was made at; None before any.
        self._tally: tuple[int, limits.Tally | None] | None = None
        self.runner = self._make_runner(plugins)
        #: The site config as last looked at: (mtime_ns, size, inode), and when.
        self._site_seen = self._site_signature()
        self._site_checked = time.monotonic()
        self.owner_uid = os.getuid()
        self.want_cycle = True
        self.restart_cycle = False  # a hook's fail_action: drop the rest of this cycle's runs
        self._sweep_due = 0.0  # time.monotonic() of the next look for leftover TMPDIRs
        self._removal_left = executor.REMOVE_SECONDS  # this poll's, for the jobs' TMPDIRs
        #: When each scheduler's scheduler_iteration brings its next cycle.
        self.sched_next: dict[str, float] = {}
        self.launches: dict[str, executor.Launch] = {}
        self.kills: dict[str, float] = {}  # job id -> when to send SIGKILL
        #: Running jobs killed over their walltime or cput whose kill (its end reason and
        #: Exit_status) could not be written (a full disk): written at a later poll, or
        #: as the job's end is (`_write_limit_kill`); the limit is enforced all the same.
        self.limit_kills: dict[str, dict[str, Any]] = {}
        # Jobs killed before their shepherd recorded their group: their SIGTERM goes at the
        # first poll that finds the record (`_kill_overdue`).
        self.terms_due: set[str] = set()
        self.started: dict[str, float] = {}  # job id -> when it was launched (exact)
        #: The jobs whose execjob_prologue, execjob_epilogue or execjob_end chain has a
        #: `user = pbsuser` hook, which their owner may make slow: the chain runs while the
        #: server serves (`_poll_chains`), and its job goes on when it is over (`_Chain`).
        self.chains: dict[str, _Chain] = {}
        #: Jobs whose end after their end hooks (run as chains), or whose requeue after a
        #: failed start, could not be written yet (a full disk): tried again at each poll
        #: (`_written_or_kept`).
        self.unwritten: dict[str, _Unwritten] = {}
        #: Jobs a restart found E with their end hooks running as chains, ending without
        #: their processes ending: ended again at the first poll (`_end_again`).
        self.ends_again: dict[str, dict[str, Any]] = {}
        #: Subjobs a restart found running whose array's (or range's) qdel the server's
        #: stop left them to (`stop_chains`), or its kill during their execjob_preterm
        #: chains (marked by `Arrays.delete`), and the uid of who asked: deleted at the
        #: first poll (`_poll_deletes_again`).
        self.deletes_again: dict[str, int] = {}
        #: Those of `deletes_again` whose deletion a poll could not write (a full disk):
        #: its start and failure logged once, not at every poll; its write, once done.
        self.deletes_again_failed: set[str] = set()
        #: Jobs whose execjob_abort ran in this server for the run they are in (`_abort`):
        #: a refused or failed start whose requeue or end waits for room, a deleted
        #: prologue's job whose ``abort_pending`` mark could not be cleared (a full disk).
        #: The next qdel runs it not again (`_abort_ran`); gone with the run (`_forget_run`).
        self.aborts_run: set[str] = set()
        #: Jobs whose end hooks `_finish` ran but whose end is not written yet (a full
        #: disk): their attributes as the hooks left them, and what the hooks kept of the
        #: measured use (`_Ending.kept`). The next qdel or the kept end's retry ends the job
        #: from them, its execjob_abort and end hooks not run again (`_finish`); a server
        #: that stops first runs them again when the job ends after its next start.
        self.ends_run: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {}
        #: Whether a request may be answered later (`LaterAnswer`): the socket server's
        #: loop does that; a caller in this process (tests, adapters) gets its answer at once.
        self.defer_answers = False
        #: Requests waiting for a hook chain that runs while the server serves (`_drive`).
        self.asking: list[_Asking] = []
        #: The server's own vnode changes, written, whose modifyvnode hooks are still to be
        #: told of them, oldest first: the first's chain runs (`_set_node`, `_notify`).
        self.notices: collections.deque[_Notice] = collections.deque()
        #: Each vnode's notice not started yet (at most one: a later change merges in).
        self._waiting: dict[str, _Notice] = {}
        #: While the server starts (exechost_startup, its fail_action, the recovery), the
        #: changes' notices wait for the first poll: the server does not serve yet.
        self._starting = True
        #: Running jobs whose handling in the poll failed, and why (logged once a reason).
        self._poll_failed: dict[str, str] = {}
        #: The running jobs' use as their shepherds last sampled it (`_read_usage`).
        self.usage: dict[str, executor.Usage] = {}
        self._usage_due = 0.0  # time.monotonic() of the next read of the samples
        self._usage_unsaved: set[str] = set()  # jobs whose last sample is not stored yet
        self._usage_seen: dict[str, tuple[int, int]] = {}  # their sample files, as last read
        self._usage_ours: dict[str, dict[str, Any]] = {}  # what was saved of them (`hook_set`)
        self._usage_save_due = 0.0  # time.monotonic() of the next save of those
        #: Schedulers whose own cycle is due (a job of their partition queued or finished).
        self.sched_due: dict[str, float] = {}
        #: The pause of the cycles' starts after a start short of what it needs
        #: (`_short_start`): its length, and the clock() it ends at (0: none).
        self.start_pause = 0.0
        self.starts_paused_until = 0.0
        self.sched_procs = SchedulerProcesses(
            plugins.hook, lambda sched, msg: self.log(LOG_SCHED, "Sched", sched, msg))
        #: The scheduler instances, kept while their settings stay the same, and what feeds
        #: ``default`` (in this process): a cycle then costs what changed since the last.
        self._scheds: dict[str, Scheduler] = {}
        #: Each plugin's last answer to sched_instances (`_schedulers`).
        self._instances_named: dict[str, list[SchedulerInstance]] = {}
        #: Whether the last `_schedulers` heard every plugin name its schedulers (else some
        #: partitions' may be left out for now: no one may conclude a partition has none).
        self.schedulers_whole = True
        self._feed = Feed()
        self._first_start()
        self.server_name = self._server_row()["server_host"]
        self.log.events = log_events(self._server_row())
        self._log_failed(plugins)
        self._seen_states: dict[str, str] = {}  # vnode -> state last seen (for the times)
        self._state_inputs: _StateInputs | None = None  # what they derive from (the same)
        self.cpu_slots = CpuSlots()  # the running jobs' CPUs, as vnodes' ``jobs`` list them
        self.set_aside()
        self._recover()
        self._track_states()
        self.resvs = Reservations(self)
        self.resvs.set_aside()
        self.manager = Manager(self)
        self.periodic = Periodic(self)
        self.router = Router(self)
        self.control = JobControl(self)  # (qsig, qorder, qmsg, qselect, qterm...)
        self.control.signals_as_stored()  # (the jobs adopted: stopped if suspended)
        self._resume_kills()  # (after: a suspended one being killed is woken)
        self.arrays = Arrays(self)
        try:
            self._release_held_back()
        except Exception as exc:  # (the jobs stay as they are: the server starts all the same)
            self.log(LOG_ERROR, "Server", self.host, "releasing the jobs an older pbsplug held "
                     f"back failed: {type(exc).__name__}: {exc}")
        self.periodic.startup()
        self._starting = False

    # -- set-up -----------------------------------------------------------------------------------
    def _first_start(self) -> None:
        """A new home's server, queue workq and vnodes. Root's jobs are let in (``acl_roots =
        root``; PBS's own default refuses them), and given so once to a home made before
        pbsplug read acl_roots (its meta key `_ROOTS_GIVEN`), whose root submitted."""
        server = self.store.get("server", "server")
        if server is not None:
            if self.store.get_meta(_ROOTS_GIVEN) is None:
                with self.store.transaction() as st:
                    if "acl_roots" not in server:
                        st.put("server", "server", {**server, "acl_roots": ["root"]})
                    st.set_meta(_ROOTS_GIVEN, "1")
            return
        with self.store.transaction() as st:
            st.put("server", "server", {
                "server_host": self.host, "scheduling": True, "scheduler_iteration": 600,
                "default_queue": "workq", "job_history_enable": True,
                "query_other_jobs": True, "managers": [], "operators": [],
                "acl_roots": ["root"], "resources_default": {}, "server_state": "Active"})
            st.set_meta(_ROOTS_GIVEN, "1")
            st.put("queue", "workq", {"queue_type": "Execution", "enabled": True,
                                      "started": True})
            for name, attrs in default_vnodes(self.host).items():
                st.put("node", name, attrs)
        self.log(LOG_SYSTEM, "Server", self.host, "created a new server home: queue workq, "
                 f"vnodes {', '.join(self.store.all('node'))}")

    def _recover(self) -> None:
        """Running jobs after a restart: adopted if still running, finished if they ended
        while the server was down, requeued (rerunnable) or failed when nothing is left."""
        for job_id, attrs in self.store.jobs(("R", "E", "S")).items():  # (S: suspended)
            runtime = self.store.runtime(job_id)
            ending = (runtime or {}).get("ending") if isinstance(runtime, dict) else None
            if attrs.get("job_state") == "E" and isinstance(ending, dict):
                self.ends_again[job_id] = ending  # (at the first poll, the server made)
                continue
            try:
                launch = _stored_launch(runtime)
            except (TypeError, ValueError) as exc:  # not JSON, or not a launch: lost
                with self.store.transaction() as st:
                    st.set_runtime(job_id, None)
                self.log(LOG_JOB | LOG_ERROR, "Job", job_id,
                         f"its stored launch could not be read: {exc}")
                self._lost(job_id, attrs, "its stored launch could not be read")
                continue
            if launch is None:  # the server died while starting it: did the shepherd start?
                seq = job_id.split(".")[0]
                launch = executor.Launch.recorded(self.home.jobs / f"{seq}.status",
                                                  self.home.tmp / f"pbs.{job_id}")
            if launch is None and self._deleted_already(runtime or {}):
                self._deleted_unended(job_id, attrs, runtime or {})
                continue
            refused = (runtime or {}).get("refused")
            if launch is None and isinstance(refused, dict) and refused.get("delete"):
                # its begin hooks' job.delete(), its end unwritten: it ends so, an A
                self.log(LOG_JOB, "Job", job_id, "job deleted by its execjob_begin hooks "
                         "before a server restart, its end not written: it ends so")
                comment = refused.get("comment")
                self._finish(job_id, attrs, executor.JobExit(executor.EXEC_FAIL, 0, 0, 0),
                             comment=comment if isinstance(comment, str) else None,
                             unstarted=True)
                continue
            if launch is None:  # it never ran: queue it again, whatever its Rerunable
                began = lifecycle.began(runtime)
                if began or (runtime or {}).get("begin_stopped"):  # (a refused try counts)
                    attrs["run_count"] = max(0, int(attrs.get("run_count", 1)) - 1)
                self._requeue(job_id, attrs, "Job requeued after a server restart: it had "
                                             "not started", record=began)
                continue
            ended = executor.JobExit.read(launch.status_file)
            if ended is None and launch.alive():
                self.launches[job_id] = launch
                self.log(LOG_JOB, "Job", job_id, "job adopted again after a server restart")
                if (runtime or {}).get("end_reason") is not None:  # (its signals: `_resume_kills`)
                    self.kills[job_id] = self._kill_due(job_id, runtime or {})
                uid = (runtime or {}).get("delete_at_start")
                if isinstance(uid, int) and not self._deleted_already(runtime or {}):
                    self.deletes_again[job_id] = uid  # (at the first poll, the server made)
            elif ended is None:  # whatever is left of the job must not run on untracked
                killed = executor.kill_session(launch)
                if _never_started(runtime, launch):  # (as while the server serves)
                    self._failed_start(job_id, attrs, f"its shepherd (pid {launch.shepherd}) "
                                       "ended before it started the job, while the server "
                                       f"was down; {killed} process(es) left of it killed")
                    continue
                self._lost(job_id, attrs, "its shepherd is gone")
            else:
                self.launches[job_id] = launch  # _poll_jobs finishes it

    def _kill_due(self, job_id: str, runtime: Mapping[str, Any]) -> float:
        """When the SIGKILL of an adopted job whose kill was written (its end reason) is
        due: the job's kill_delay after the kill's write (``killed_at``, `_killed_runtime`),
        or after now for a kill written by an older pbsplug, which stored no time; never
        after now, so a clock set back since (or a time from the future) delays no SIGKILL."""
        now = self.clock()
        when = runtime.get("killed_at")
        if not isinstance(when, (int, float)) or isinstance(when, bool) or not when < now:
            when = now  # (not a number, NaN, or later than now)
        return float(when) + self._kill_delay(job_id, runtime)

    def _resume_kills(self) -> None:
        """The kills `_recover` found written for the jobs it adopted (in `kills`: a qdel's,
        a qrerun's, a limit's, ``qterm -t immediate``'s), resumed as PBS's MoM goes on
        killing a job whatever its server does: the server stopped (``qterm -t quick``, or
        killed) after the kill's write and before its SIGKILL forgot it once, and the job, its
        end reason set (`_being_ended`), ran on with no SIGKILL and no walltime kill. Each
        is sent its SIGTERM again, as the server may have been killed between the kill's
        write and its signal (`_kill` writes first), and a suspended one woken to take it;
        its SIGKILL goes when due (`_kill_due`: at the first poll when the kill_delay ran
        out while the server was down). Run before the server serves, each costs a read
        of /proc: a launch read back waits for no record of its group (`Launch.resolve`),
        its SIGTERM then sent once there is one (`terms_due`)."""
        for job_id, launch in [(j, self.launches.get(j)) for j in self.kills]:
            if launch is None:  # (dropped by `_kill_overdue`)
                continue
            runtime = self.store.runtime(job_id) or {}
            self.log(LOG_JOB, "Job", job_id, "its kill written before the server restart is "
                     f"resumed ({runtime.get('end_reason')}): SIGTERM, then SIGKILL after "
                     "its kill_delay")
            if (self.store.job(job_id, lean=True) or {}).get("job_state") == "S":
                self.control.continue_killed(job_id)
            self._terminate(job_id, launch, runtime)

    def _deleted_unended(self, job_id: str, attrs: dict[str, Any],
                         runtime: Mapping[str, Any]) -> None:
        """A job `_recover` finds R (or E) with no launch whose deletion was written (its
        D record, the mark of `_record_deletion`) but whose end was not (a qdel in its
        prologue, the disk full again after its D): finished as the qdel that comes next
        finishes it (`_delete_in_prologue`): deleted, its end hooks run, no second D
        record or log line, and execjob_abort only if it has not run (``abort_pending``:
        the server killed between the deletion's write and its execjob_abort). It was
        requeued as a job that had not started, and a job its user deleted ran again."""
        deleted = runtime.get("deleted")
        reason = runtime.get("end_reason")
        if isinstance(reason, str) and reason.startswith("Job deleted"):
            comment = reason
        else:  # (an older pbsplug's mark, True, named no one)
            comment = f"{DELETED_BY}{deleted if isinstance(deleted, str) else 'unknown'}"
        self.log(LOG_JOB, "Job", job_id, "job deleted before a server restart, its end "
                 "not written: it ends so")
        if runtime.get("abort_pending"):
            self._abort_deleted(job_id, attrs)
        self._finish(job_id, attrs, executor.JobExit(executor.EXEC_FAIL, 0, 0, 0),
                     comment=comment)

    def set_aside(self) -> int:
        """Jobs and vnodes with a stored value the server cannot use (written by an older
        version, a bug, or by hand) are set aside, so that the server starts and its cycles
        go on: the bad values leave the row (named in the comment and the log); a job not
        running gets a system hold (``s``), a vnode goes ``offline``. Returns how many."""
        custom = self.resource_types()
        count = 0
        jobs = self.store.jobs(_ACTIVE + ("U",))
        jobs.update(self.store.unreadable_jobs())  # finished ones too: none is left unread
        for job_id, attrs in jobs.items():
            unreadable = self.store.unreadable(attrs)
            if unreadable:  # not JSON: nothing of it can be kept but its state
                problems = {"attributes": "the job's stored attributes could not be read"}
                fixed = {"job_state": attrs["job_state"]}
            else:
                problems = values.job_problems(attrs, custom) if isinstance(attrs, dict) else {
                    "attributes": "the job's attributes are not a mapping"}
                if isinstance(attrs, dict) and self.store.unreadable(attrs.get(store_env)):
                    problems[store_env] = "the job's stored Variable_List could not be read"
                if not problems:
                    continue
                fixed = _without(attrs if isinstance(attrs, dict) else {}, problems)
                if store_env in problems:  # its own column: written empty, not kept
                    fixed[store_env] = {}
            why = "; ".join(problems.values())
            if unreadable and fixed["job_state"] == "F":  # history stays history
                fixed["comment"] = f"bad attribute value set aside: {why}"
            else:
                if unreadable or fixed.get("job_state") not in ("R", "E"):
                    fixed.setdefault("job_state", "Q")
                    self._add_system_hold(fixed)
                fixed["comment"] = f"job held, bad attribute value set aside: {why}"
            with self.store.transaction() as st:
                st.put_job(job_id, fixed)
            self.log(LOG_JOB | LOG_ERROR, "Job", job_id,
                     f"set aside: a stored value the server cannot use: {why}")
            count += 1
        for name, attrs in self.store.all("node").items():
            if self.store.unreadable(attrs):
                problems = {"attributes": "the vnode's stored attributes could not be read"}
                attrs = {}  # (nothing of it is kept)
            else:
                problems = values.vnode_problems(attrs, custom) if isinstance(attrs, dict) else {
                    "attributes": "the vnode's attributes are not a mapping"}
            if not problems:
                continue
            fixed = _without(attrs if isinstance(attrs, dict) else {}, problems)
            why = "; ".join(problems.values())
            states = {s for s in str(fixed.get("state", "free")).split(",") if s} - {"free"}
            fixed["state"] = ",".join(sorted(states | {"offline"}))
            fixed["comment"] = f"offlined, bad attribute value set aside: {why}"
            with self.store.transaction() as st:
                st.put("node", name, fixed)
            self.log(LOG_ADMIN | LOG_ERROR, "Node", name,
                     f"set aside: a stored value the server cannot use: {why}")
            count += 1
        count += self._set_aside_policies()
        if getattr(self, "resvs", None) is not None:  # not yet while the server starts
            count += self.resvs.set_aside()
        return count

    def _set_aside_policies(self) -> int:
        """A node_sort_key the server's or a scheduler's row holds that qmgr now refuses
        (stored by an older version: ``ncpus HIGH unused``) sorted no vnode, and nobody was
        told: it is unset (the default, ``sort_priority HIGH``, applies), and logged."""
        count = 0
        rows = [("server", name, attrs) for name, attrs in self.store.all("server").items()]
        rows += [("sched", name, attrs) for name, attrs in self.store.all("sched").items()]
        for kind, name, attrs in rows:
            key = attrs.get("node_sort_key") if isinstance(attrs, dict) else None
            if not key:
                continue
            try:
                parse_node_sort_key(key)
            except ValueError as exc:
                with self.store.transaction() as st:
                    st.put(kind, name, {k: v for k, v in attrs.items() if k != "node_sort_key"})
                self.log(LOG_ADMIN | LOG_ERROR, kind.capitalize(), name,
                         f"set aside: a stored value the server cannot use: {exc}")
                count += 1
        return count

    def _poll_deletes_again(self) -> None:
        """The subjobs `_recover` found left running by an array's qdel the server's stop
        (or its kill) cut short (`deletes_again`, `stop_chains`, `Arrays.delete`) deleted
        as that qdel deletes a running job (`_kill_deleted`: its D record, its kill),
        without its execjob_preterm hooks again: the qdel was answered that they would be
        deleted (or not at all), and a refusal now could be told to no one (the subjob
        would run on in a deleted array). One deleted or ended meanwhile is let be: one
        deletion, one D record. One whose run a qrerun since the start is ending is
        deleted as a qdel then deletes it: its D record written, the requeue standing
        (`_delete_requeued`); its kill overrode the qrerun, answered as done. One whose
        deletion cannot be written (a full disk) stays in `deletes_again`, logged once for
        each failure, and the next poll tries it again (a qdel before that deletes it as
        that array's qdel, `_delete`), as a refused qdel is tried again: dropped, the
        subjob ran on, a later qdel fired its preterm again, and its mark, left in the
        store, had it killed without its hooks a restart later. With a disk that stays
        full, the deletion and its failure are logged once (`deletes_again_failed`), not
        at every poll, and its write once done, as `_written_or_kept` logs."""
        self.deletes_again_failed &= self.deletes_again.keys()  # (a qdel deleted it)
        for job_id, uid in list(self.deletes_again.items()):
            attrs = self.store.job(job_id)
            if attrs is None or attrs.get("job_state") not in ("R", "S") or \
                    job_id not in self.launches or job_id in self.chains or \
                    self._ends_alone(job_id) or \
                    self._deleted_already(self.store.runtime(job_id) or {}):
                self.deletes_again.pop(job_id, None)
                self.deletes_again_failed.discard(job_id)
                continue
            failed_before = job_id in self.deletes_again_failed
            if not failed_before:
                self.log(LOG_JOB, "Job", job_id, "job deleted after a server restart: its "
                         "array's qdel stands")
            try:
                self.delete_marked(job_id, uid, attrs)
            except Exception as exc:  # one job's fault stops no other's (a full disk)
                if not failed_before:
                    self.log(LOG_ERROR, "Job", job_id, "deleting it after a server restart "
                             f"failed: {type(exc).__name__}: {exc}; tried again at each "
                             "poll (logged once it is written)")
                    self.deletes_again_failed.add(job_id)
                continue
            self.deletes_again.pop(job_id, None)
            if failed_before:
                self.deletes_again_failed.discard(job_id)
                self.log(LOG_JOB, "Job", job_id, "its deletion after a server restart "
                         "recorded")

    def delete_marked(self, job_id: str, uid: int, attrs: dict[str, Any]) -> None:
        """Running subjob `job_id`, marked to be deleted at the next start (`stop_chains`,
        `_keep_accepted`), deleted as a qdel by `uid` deletes a running job, at the first
        poll (`_poll_deletes_again`) or at a ``qterm -t immediate`` before it
        (`JobControl._end_running`), one rule for both: killed (`_kill_deleted`), not
        requeued (the stop's kill, as its array's qdel was answered); one whose run a
        qrerun answered since the start is ending is deleted as a qdel then deletes it,
        its D record written, the requeue standing (`_delete_requeued`): the kill overrode
        the answered qrerun."""
        caller = Caller(uid, ROLE_USER)
        if (self.store.runtime(job_id) or {}).get("end_reason") == "requeue":
            self._delete_requeued(caller, job_id, None)
        else:
            self._kill_deleted(caller, job_id, attrs, purge=False)

    def _poll_ends_again(self) -> None:
        """The jobs `_recover` found ending (`ends_again`) ended again (`_end_again`)."""
        while self.ends_again:
            job_id, ending = self.ends_again.popitem()
            attrs = self.store.job(job_id)
            if attrs is None or attrs.get("job_state") != "E":
                continue
            try:
                self._end_again(job_id, attrs, ending)
            except Exception as exc:  # one job's fault stops no other's (the next start)
                self.log(LOG_ERROR, "Job", job_id, "ending it again after a server restart "
                         f"failed: {type(exc).__name__}: {exc}")

    def _end_again(self, job_id: str, attrs: dict[str, Any], ending: dict[str, Any]) -> None:
        """A job whose end hooks ran as chains when the server stopped, ending without its
        processes ending (`_Ending.record`): ended again as then, its end hooks run again,
        as a job whose processes ended is (with its status file). A lost one's stored
        launch is swept again first (`executor.kill_session`), as `_recover` sweeps a job
        whose shepherd is gone: nothing left of it may run on untracked."""
        self.log(LOG_JOB, "Job", job_id, "job ended again after a server restart: its end "
                 "hooks were running")
        if "lost" in ending:
            try:
                launch = _stored_launch(self.store.runtime(job_id))
            except (TypeError, ValueError):  # (not a launch: so only by hand; it ends)
                launch = None
            if launch is not None:
                executor.kill_session(launch)
            self._lost_end(job_id, attrs, str(ending["lost"]))
            return
        try:
            status = int(ending.get("exit_status", executor.EXEC_LOST))
        except (TypeError, ValueError):  # (written by the server: only by hand)
            status = executor.EXEC_LOST
        comment = ending.get("comment")
        self._finish(job_id, attrs, executor.JobExit(status, 0, 0, 0, str(
            ending.get("start_error") or "")), comment=comment if isinstance(
                comment, str) else None, unstarted=ending.get("unstarted") is True)

    def _lost(self, job_id: str, attrs: dict[str, Any], why: str) -> None:
        """A job `_recover` finds lost: ended as its run was being ended (a qdel, a limit:
        that comment and Exit_status; a qrerun's requeue, whatever its Rerunable), as a
        lost job ends while the server serves (`_lost_over`); else requeued if it is
        rerunnable, else finished with Exit_status -4."""
        self._lost_ends(job_id, attrs, f"Job requeued after a server restart: {why}",
                        f"Job failed after a server restart: {why}", end_hooks=True,
                        note=f"job lost after a server restart ({why}) while it was being "
                             "ended: it ends so")

    def _lost_ends(self, job_id: str, attrs: dict[str, Any], requeued: str, failed: str,
                   end_hooks: bool, note: str | None = None) -> None:
        """A lost job's end, at a restart (`_lost`) as while the server serves
        (`_lost_over`): as its run was being ended (a qdel, a limit: that comment and its
        Exit_status, `note` logged; a qrerun's requeue, whatever its Rerunable); else
        requeued (comment `requeued`) if rerunnable, else finished with Exit_status -4
        (comment `failed`)."""
        runtime = self.store.runtime(job_id)
        runtime = runtime if isinstance(runtime, dict) else {}
        reason = runtime.get("end_reason")
        if isinstance(reason, str) and reason and reason != "requeue":
            try:
                status = int(runtime.get("exit_status", executor.EXEC_LOST))
            except (TypeError, ValueError):  # (written by the server: only by hand)
                status = executor.EXEC_LOST
            if note:
                self.log(LOG_JOB, "Job", job_id, note)
            self._finish(job_id, attrs, executor.JobExit(status, 0, 0, 0), comment=reason,
                         end_hooks=end_hooks)
        elif reason == "requeue" or units.parse_bool(attrs.get("Rerunable", True)):
            self._requeue(job_id, attrs, requeued)
        else:
            self._finish(job_id, attrs, executor.JobExit(executor.EXEC_LOST, 0, 0, 0),
                         comment=failed, end_hooks=end_hooks)

    # -- roles ------------------------------------------------------------------------------------
    def _server_row(self) -> dict[str, Any]:
        """The server's stored attributes (`_first_start` writes them: they are there)."""
        return self.store.get("server", "server") or {}

    def caller(self, uid: int, server: dict[str, Any] | None = None) -> Caller:
        """Who `uid` is to this server (its managers and operators in `server`, the
        server's attributes, read here when not given). The two lists name users as an
        ACL does (`acl.user_allowed`: ``user``, ``user@host``, ``user@*.domain``,
        ``user@*``; the host is this one)."""
        server = server if server is not None else self._server_row()
        probe = Caller(uid, ROLE_USER)
        if uid in (0, self.owner_uid) or acl.user_allowed(
                server.get("managers") or [], probe.user, self.host_names):
            probe.role = ROLE_MANAGER
        elif acl.user_allowed(server.get("operators") or [], probe.user, self.host_names):
            probe.role = ROLE_OPERATOR
        return probe

    # -- objects ----------------------------------------------------------------------------------
    def _job(self, job_id: str) -> dict[str, Any]:
        job_id = self._full_id(job_id)
        attrs = self.store.job(job_id)
        if attrs is None and (named := arrays.named(job_id)) is not None and named.single:
            # (a subjob not instantiated: made up from its array)
            assert named.first is not None
            attrs = self.arrays.subjob(job_id, arrays.array_id(
                named.number, job_id.split(".", 1)[-1]), named.first)
        if attrs is None:
            raise PbsError(PBSE_UNKJOBID, obj=job_id)
        return attrs

    def _full_id(self, job_id: str) -> str:
        """The id this server keeps for `job_id` in any of PBS's forms (``12``,
        ``12.server``, ``12@server``, ``12.server@server``: `jobid.full_id`); text of
        another form, or naming another server, as given, which names no job."""
        return jobid.full_id(job_id, self.server_name, self.host_names) or job_id

    def _own(self, caller: Caller, job_id: str, attrs: dict[str, Any]) -> None:
        if not caller.privileged and attrs.get("euser") != caller.user:
            raise PbsError(PBSE_PERM, obj=job_id)

    def _limits_tally(self) -> limits.Tally | None:
        """What the jobs count against PBS's limits on queued jobs (`limits.Tally`); None
        when no limit is set. Kept between requests: made with one grouped pass over the
        jobs, their environments apart, then brought up to date by the job writes since
        (`Store.counted_moves`), so a check costs the same with 100 jobs or 100,000.
        Made again when the server, a queue or a resource changes, a change that wrote
        rows is rolled back, or too many writes went by unread."""
        generation = self.store.generation
        moves = self.store.counted_moves()
        if self._tally is not None and self._tally[0] == generation:
            tally = self._tally[1]
            if tally is None:  # no limit set: nothing to count
                return None
            if moves is not None:
                for old, new in moves:
                    tally.move(old, new)
                return tally
        server = self.store.get("server", "server") or {}
        queues = self.store.all("queue")
        tally = None
        if limits.has_limits(server) or any(map(limits.has_limits, queues.values())):
            tally = limits.Tally(server, queues,
                                 {**values.RESOURCE_TYPES, **self.resource_types()},
                                 self.store.counted_groups(limits.DONE_STATES))
        else:
            self.store.counted_moves(stop=True)  # no count to bring up to date
        self._tally = (generation, tally)
        return tally

    def _check_limits(self, attrs: dict[str, Any], old: dict[str, Any] | None = None) -> None:
        """PBS's limits on queued jobs for a new job, or for a job stored as `old` about to
        be stored as `attrs` (`limits.Tally.check`)."""
        tally = self._limits_tally()
        if tally is not None:
            tally.check(attrs, old)

    # -- values (pbsplug.values: one set of rules for every entry) -------------------------
    def resource_types(self) -> dict[str, str]:
        """The custom resources (``qmgr create resource``): name -> type."""
        return {n: str(a.get("type", "string")) for n, a in self.store.all("resource").items()}

    def host_resources(self) -> frozenset[str]:
        """The custom resources a chunk holds on a host (``flag = h``)."""
        return frozenset(n for n, a in self.store.all("resource").items()
                         if "h" in str(a.get("flag") or ""))

    def _checked_request(self, caller: Caller, attrs: Any) -> dict[str, Any]:
        """A client's job attributes (qsub, qalter, a raw request) checked once, here:
        PBS's 15002, 15003, 15014, 15029 or 15035 with the attribute named."""
        registry = self.plugins.attribute_registry()
        try:
            return values.job_request(attrs, caller.role, self.resource_types(),
                                      extra=registry.for_type("job"))
        except values.BadValue as exc:
            raise PbsError(exc.code, exc.pbs_text) from None

    def _check_output_hosts(self, attrs: dict[str, Any]) -> None:
        """A job's files are written on this machine: an Output_Path or Error_Path whose
        host is not one of its names (`jobid.names_this_host`) is 15029, where PBS's MoM
        would copy them there (docs/engine.md, departures)."""
        for name in ("Output_Path", "Error_Path"):
            where = str(attrs.get(name) or "").partition(":")[0]
            if where and not jobid.names_this_host(where, self.host_names):
                raise PbsError(PBSE_NOSUP, f"No support for requested service {name}: "
                               f"{values.shown(where)} is not this host")

    def _check_hooked(self, event: str, outcome: Outcome, attrs: dict[str, Any],
                      before: dict[str, Any], kind: str = "job") -> None:
        """What hooks left in a job (or reservation) before it is stored: a value no setter
        checked (a list or mapping changed in place) that breaks the rules is the last
        hook's error, with PBS's text, and nothing is stored. Only what differs from
        `before` (a shallow copy made before the event) is checked, and every list or
        mapping, which may have changed in place."""
        if not outcome.runs:
            return
        custom = self.resource_types()
        try:
            for name, value in attrs.items():
                if value is None or (before.get(name) == value
                                     and not isinstance(value, (dict, list))):
                    continue
                if name == "Resource_List":
                    values.resources(value, name, custom)
                else:
                    values.object_value(kind, name, value)
        except values.BadValue as exc:
            self._hooks_error(event, outcome, str(exc))

    @staticmethod
    def _after_hooks(before: dict[str, Any], outcome: Outcome, kind: str) -> dict[str, Any]:
        """A request's object after its event's hooks: the attributes it was made of
        (`before`, the server's own) with the hooks' changes to it (``outcome.changes``:
        plain data, each hook's taken under its alarm) applied; never the event's object,
        where an in-process hook may have put an object of its own past the change record
        (whose ``__eq__`` would run here, with no alarm, and could hold the server)."""
        return attrs_after(before, outcome.changes.get(kind) or {})

    def _hooks_error(self, event: str, outcome: Outcome, why: str) -> NoReturn:
        """The last of `event`'s hooks that ran left what cannot be (`why`): logged, and
        the request refused with PBS's text for a hook's error."""
        hook = outcome.runs[-1].hook
        self.log(LOG_ERROR, "Hook", hook, f"{event} hook '{hook}' encountered an "
                 f"exception, request rejected: {why}")
        raise PbsError(PBSE_HOOKERROR, client_message(event, "error", hook, why))

    def _hooked_request(self, event: str, outcome: Outcome, before: dict[str, Any],
                        job_id: str, attrs: dict[str, Any],
                        **how: Any) -> dict[str, dict[str, Any]]:
        """`_completed` after `event`'s hooks: a Resource_List they changed that no select
        can hold (``accelerator_model=""``, a host-level resource made a chunk's) is the
        hooks' error, as a value of theirs the rules refuse is; unless the request was
        refused without their change too: then the request's own error is the answer."""
        try:
            return self._completed(job_id, attrs, **how)
        except PbsError as exc:
            if exc.code != PBSE_BADATVAL or not outcome.runs or \
                    attrs.get("Resource_List") == before.get("Resource_List"):
                raise
            asked = {**attrs, "Resource_List": copy.deepcopy(before.get("Resource_List"))}
            try:  # (no limit checked: the same refusal is the question)
                self._completed(job_id, asked, **{**how, "limited": False,
                                                  "written": copy.deepcopy(how["written"])})
            except PbsError as own:
                if own.code == PBSE_BADATVAL:
                    raise own from None
            self._hooks_error(event, outcome, exc.message)

    @typing.overload
    def _event(self, type: str, caller: Caller | None = None,
               hooks: tuple[str, ...] | None = None, *, start: typing.Literal[False] = False,
               **objects: Any) -> Outcome: ...

    @typing.overload
    def _event(self, type: str, caller: Caller | None = None,
               hooks: tuple[str, ...] | None = None, *, start: typing.Literal[True],
               **objects: Any) -> Pending | Outcome: ...

    def _event(self, type: str, caller: Caller | None = None,
               hooks: tuple[str, ...] | None = None, *, start: bool = False,
               **objects: Any) -> Pending | Outcome:
        """`type`'s hooks fired on `objects` (`Event`'s keywords), their outcome logged.
        With `start`, not waited for (`Runner.start`): the chain's outcome when it is over
        already (or failed to start), else its `Pending`, which `_poll_chains` steps."""
        who = caller.user if caller else "root"
        # A hook that sets an undefined resource fails in the hook (pbsplug.values).
        values.use_resources(self.resource_types())
        try:
            if self._hooks_share(type, hooks, start):
                for obj in objects.values():  # (made of the server's own data)
                    for one in obj.values() if isinstance(obj, dict) else (obj,):
                        if isinstance(one, PbsObject):
                            one.own_values()
            event = Event(type, requestor=who, requestor_host=self.host, **objects)
            if start:
                pending = self.runner.start(event, hooks=hooks)
                if pending.outcome is None:
                    return pending
                outcome = pending.outcome
            else:
                outcome = self.runner.fire(event, hooks=hooks)
        except Exception as exc:  # noqa: BLE001 - a hook's doing the runner did not foresee
            # is the hooks' error (PBS's table says what comes of it), never a request,
            # cycle or poll that fails half way (a job stored R with no process).
            return self._hooks_failed(type, exc)
        return self._logged(outcome)

    def _hooks_share(self, type: str, hooks: tuple[str, ...] | None, start: bool) -> bool:
        """Whether `_event` makes its objects' values their own (`own_values`, deep
        copies) before `type`'s hooks (of `hooks`, when given: the runner's chain) see
        them: when one of them runs in this process (``inprocess``), where its writes past
        the setters (``dict.__setitem__`` on a value it dug out) would land in the
        server's data. A chain of forked hooks only needs no copy (a periodic hook's
        thousands of jobs): each hook writes in its own process's memory, and what comes
        back is plain data replayed through the setters (`Event.apply_changes`), which
        put new values in, never into the old ones (a resource mapping is the object's
        own already); the runner's own look at the objects (a debug hook's ``.in``) only
        reads. No hook, no copy either (qhold's modifyjob, ``hooks=()``). A started
        chain (`start`) is copied whatever its hooks: a process it forks after its first
        (a pbsuser or debug hook's own) forks while the server serves, and sees the
        objects as they were given, whatever the server does meanwhile."""
        chain = self.runner.chain(type)
        if hooks is not None:
            chain = [e for e in chain if e.name in hooks]
        return bool(chain) and (start or any(e.mode != "process" for e in chain))

    def _hooks_failed(self, type: str, exc: Exception) -> Outcome:
        self.log(LOG_ERROR, "Hook", type, f"{type} hooks failed: {exc.__class__.__name__}: "
                 f"{message_text(exc)}")
        return Outcome(type, False, kind="error", code=PBSE_HOOKERROR,
                       message=f"request rejected as the {type} hooks failed",
                       consequence=consequence(type, "error", None))

    def _logged(self, outcome: Outcome) -> Outcome:
        """What the event's hooks did, in the server log."""
        type = outcome.event
        for run in outcome.runs:
            if run.cancelled and self.stopping:  # (the stop's: its caller says what follows)
                self.log(LOG_SYSTEM, "Hook", run.hook, f"{type} hook '{run.hook}' was "
                         "stopped: the server is stopping")
            elif run.outcome in ("error", "alarm"):
                what = ("encountered an exception" if run.outcome == "error"
                        else "got an alarm call")
                self.log(LOG_ERROR, "Hook", run.hook,
                         f"{type} hook '{run.hook}' {what}: {run.message}")
            elif run.outcome == "reject":
                self.log(LOG_DEBUG, "Hook", run.hook, f"{type} request rejected by "
                         f"'{run.hook}'" + (f": {run.message}" if run.message else ""))
        return outcome

    def _make_runner(self, plugins: PluginSet) -> Runner:
        # Every hook run goes to the trace `pbsplug hooks trace` reads. A stopping server
        # kills a hook's process rather than wait for the hook's alarm.
        return Runner(plugins, debug_dir=self.home.hooks_tmp,
                      trace_file=plugins.site.trace_file or self.home.trace,
                      cancel=lambda: self.stopping, reap_later=True)

    # -- the site config --------------------------------------------------------------------------
    def _site_signature(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.home.site)
        except OSError:
            return None
        return (st.st_mtime_ns, st.st_size, st.st_ino)

    def _log_failed(self, plugins: PluginSet) -> None:
        """Each enabled plugin that failed to load, in the server log: it runs no hook."""
        for record in plugins.failed:
            self.log(LOG_ERROR, "Server", self.host, _one_line(record.failure_text()))

    def reload_site(self, force: bool = False) -> bool:
        """Load the site config again if it changed since it was last looked at (always with
        `force`), with its plugins; True when the server now runs the new one. A site config
        that cannot be loaded, or with which a plugin the server runs fails to load (a bad
        value of its configuration or of a hook attribute: the site's policy would be
        silently off), is logged (one line: the file and what is wrong) and the server
        keeps the last good one."""
        signature = self._site_signature()
        self._site_checked = time.monotonic()
        if signature == self._site_seen and not force:
            return False
        self._site_seen = signature
        path = self.home.site
        try:
            plugins = load_plugins(load_site(path, allow_missing=True))
        except Exception as exc:  # noqa: BLE001 - whatever is wrong, the server goes on
            self.log(LOG_ERROR, "Server", self.host, f"site config {path} not loaded, the "
                     f"last good one stays in use: {_one_line(str(exc) or type(exc).__name__)}")
            return False
        failing = {r.name for r in self.plugins.failed}
        broken = [r for r in plugins.failed if r.name not in failing]
        if broken:
            self.log(LOG_ERROR, "Server", self.host, f"site config {path} not loaded, the "
                     f"last good one stays in use: {_one_line(broken[0].failure_text())}")
            return False
        self.plugins = plugins
        self.runner = self._make_runner(plugins)
        # Scheduler processes run the plugins' scheduler hooks: start them afresh.
        self.sched_procs.hooks = plugins.hook
        self.sched_procs.stop_all()
        self.want_cycle = True
        enabled = ", ".join(r.name for r in plugins.enabled) or "none"
        self.log(LOG_ADMIN, "Server", self.host, f"site config {path} loaded; enabled "
                 f"plugins: {enabled}")
        self._log_failed(plugins)
        return True

    # -- requests ---------------------------------------------------------------------------------
    def handle(self, op: str, args: dict[str, Any], uid: int) -> Any:
        server = self._server_row()  # (read once: roles and ACLs)
        caller = self.caller(uid, server)
        if not caller.manager and not acl.server_allows(server, caller.user, self.host_names):
            raise PbsError(PBSE_PERM)  # (the server's acl_users: every request)
        handler = getattr(self, f"req_{op}", None)
        if handler is None:
            raise PbsError(PBSE_IVALREQ, f"Unknown request {values.shown(op)}")
        _check_arguments(handler, args)
        return handler(caller, **args)

    def req_submit(self, caller: Caller, attrs: dict[str, Any], script: str | None = None,
                   argv: list[str] | None = None,
                   interactive: dict[str, Any] | None = None) -> str:
        """qsub. `interactive`: qsub -I's socket and token (`interactive.checked_spec`),
        kept in the job's runtime; the job is ``interactive`` and not rerunnable, as
        OpenPBS 23.06 makes it (checked)."""
        attrs = self._checked_request(caller, attrs)
        self._check_output_hosts(attrs)
        if interactive is not None:
            try:
                interactive = interactive_jobs.checked_spec(interactive)
            except ValueError as exc:
                raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value "
                               f"interactive: {exc}") from None
            attrs.update(interactive=True, Rerunable=False)
        if script is not None and not isinstance(script, str):
            raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value script")
        if argv is not None and (not isinstance(argv, list) or not argv or not all(
                isinstance(a, str) and "\0" not in a for a in argv)):
            raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value argv")
        _admin_resources(attrs)
        if set(str(attrs.get("Hold_Types") or "n")) - {"u", "n"}:
            try:
                self._may_change_holds(caller, "", str(attrs["Hold_Types"]), "")
            except PbsError:
                raise PbsError(PBSE_PERM, "Unauthorized Request Hold_Types") from None
        server = self._server_row()
        queue_name = str(attrs.get("queue") or server.get("default_queue") or "workq")
        if caller.uid == 0 and self.store.get("queue", queue_name) is not None:
            self.check_root(caller, PBSE_BADUSER)  # (an unknown queue: 15018 first)
        queue_name = self._submit_queue(caller, queue_name)
        res = {k: v for k, v in (attrs.get("Resource_List") or {}).items() if v is not None}
        check_resources(res)
        if res.get("nodes") is not None and (res.get("select") is not None or
                                             res.get("place") is not None):
            # (OpenPBS 23.06's qsub, checked; its qalter takes them, and stores the nodes)
            raise PbsError(PBSE_NODESPLACE, "Cannot be used with select or place: nodes")
        self._check_chunk_resources(res, res)
        now = int(self.clock())
        with self.store.transaction() as st:
            seq = st.next_seq()
        is_array = attrs.get("array_indices_submitted") is not None
        job_id = f"{seq}{'[]' if is_array else ''}.{self.server_name}"
        try:
            egroup = grp.getgrgid(pwd.getpwnam(caller.user).pw_gid).gr_name
        except KeyError:
            egroup = ""
        # None means "unset" (qalter's); a new job simply does not have the attribute. A
        # run_count given (qsub -W run_count=3) is kept, as OpenPBS 23.06 keeps it (checked).
        attrs = {**{k: v for k, v in attrs.items() if v is not None},
                 "queue": queue_name, "job_state": "Q", "Resource_List": res,
                 "Job_Owner": f"{caller.user}@{self.host}", "euser": caller.user,
                 "egroup": egroup, "server": self.server_name, "ctime": now, "qtime": now,
                 "mtime": now, "run_count": attrs.get("run_count") or 0, "substate": 10}
        attrs.setdefault("Job_Name", "STDIN")
        attrs["Variable_List"] = {**jobspec.server_variables(queue_name, self.host),
                                  **(attrs.get("Variable_List") or {}),
                                  "PBS_O_QUEUE": queue_name}
        attrs.setdefault("Rerunable", True)
        if units.parse_bool(attrs.get("Rerunable", True)) is not attrs["Rerunable"]:
            attrs["Rerunable"] = units.parse_bool(attrs["Rerunable"])
        if attrs.get("Hold_Types", "n") not in ("n", None):
            attrs["job_state"] = "H"
        before = dict(attrs)  # (the event's job owns its values: `_event`)
        outcome = self._event("queuejob", caller, job=Job(job_id, attrs))
        refuse_if_stopped(outcome, self.stopping)
        if not outcome.accepted:
            raise PbsError(PBSE_HOOKERROR, outcome.message)
        attrs = self._after_hooks(before, outcome, "job")
        attrs.pop("id", None)
        self._check_hooked("queuejob", outcome, attrs, before)
        # What a hook unset and the server needs comes back as PBS's default.
        attrs.setdefault("Job_Name", "STDIN")
        if str(attrs.setdefault("queue", queue_name)) != queue_name:  # a hook routed it
            queue_name = attrs["queue"] = self._submit_queue(caller, str(attrs["queue"]))
        attrs.setdefault("Rerunable", True)
        written = self._hooked_request("queuejob", outcome, before, job_id, attrs,
                                       enqueued=True, limited=True, written={})
        spec = self.arrays.check_submitted(attrs) if is_array else None
        unknown: list[str] = []  # (a job no server knows: PBS queues the job, then deletes it)
        waits_for = self._check_depend(caller, attrs, job_id, unknown)
        # The state follows the holds and Execution_Time the request, its dependencies and
        # the hooks left (a hook may set or remove a hold).
        attrs["job_state"] = lifecycle.queued_state(attrs, self.clock())
        workdir = (attrs.get("Variable_List") or {}).get("PBS_O_WORKDIR", "/")
        mark = f".{arrays.INDEX_MARK}" if spec is not None else ""  # (PBS's, checked)
        attrs.setdefault("Output_Path",
                         f"{self.host}:{workdir}/{attrs['Job_Name']}.o{seq}{mark}")
        attrs.setdefault("Error_Path",
                         f"{self.host}:{workdir}/{attrs['Job_Name']}.e{seq}{mark}")
        if spec is not None:
            self.arrays.submitted(attrs, spec)
        self._check_limits(attrs)  # on the queue, owner and state it is stored with
        with self.store.transaction() as st:
            st.add_job(seq, job_id, attrs, script)
            st.set_written(job_id, written)
            runtime: dict[str, Any] = {"argv": list(argv)} if argv else {}
            if interactive is not None:
                runtime["interactive"] = interactive
            if runtime:
                st.set_runtime(job_id, runtime)
        queue = self.store.get("queue", queue_name) or {}
        if is_route_queue(queue):  # routed before qsub hears back, as PBS's server does
            try:
                self.router.route(job_id, attrs, queue_name, queue, self.clock(),
                                  submitting=True)
            except PbsError:
                with self.store.transaction() as st:
                    st.delete_job(job_id)
                self.log(LOG_JOB, "Job", job_id, routing.REJECTED)
                raise
            attrs = self._job(job_id)
            queue_name = str(attrs["queue"])
        self.log(LOG_JOB, "Job", job_id, f"Job Queued at request of {caller.user}@{self.host},"
                 f" owner = {attrs['Job_Owner']}, job name = {attrs['Job_Name']}, queue = "
                 f"{queue_name}")
        self.accounting.queued(job_id, attrs)
        outcome = self._event("postqueuejob", caller, job=Job(job_id, attrs))
        # (already queued: PBS's table has it deleted; not when the server's stop gave its
        # hook up, the stop's doing: the job stays queued, as the stop found it)
        if outcome.consequence == "delete" and not stopped(outcome, self.stopping):
            self._drop(job_id, attrs, f"Job deleted by postqueuejob hook: {outcome.message}")
            return job_id
        refused = unknown[0] if unknown else self._link_befores(job_id, waits_for)
        if refused is not None:  # PBS queues the job, then deletes it (checked)
            self._drop(job_id, attrs, f"{BEFORE_REFUSED}{refused}")
            return job_id
        state, never = depend.check(attrs.get("depend"), self._lean_job)
        if state == depend.NEVER and never is not None:
            # PBS queues the job, then aborts it when the finished job it waits on did not
            # satisfy the dependency (req_register's PBSE_HISTDEPEND): qsub prints the id.
            self._drop(job_id, attrs, f"{never.split(':', 1)[1]} {depend.HISTDEPEND}")
            return job_id
        self._resolve_depend([job_id])
        self._trigger(queue_name, submitted=True)
        return job_id

    def check_root(self, caller: Caller, code: int) -> None:
        """Root's job or reservation (it would run as root) is refused with `code` unless
        the server's ``acl_roots`` lets root in (qsub's 15023, pbs_rsub's 15095)."""
        if caller.uid == 0 and not acl.user_allowed(self.server_attrs().get("acl_roots") or [],
                                                    caller.user, self.host_names):
            raise PbsError(code)

    def _submit_queue(self, caller: Caller, name: str, owner: str | None = None,
                      routed: bool = False) -> str:
        """`name`, when a job may be submitted to it (qsub -q, the default queue, or where a
        queuejob hook routed it), moved there (a job of `owner`) or `routed` there from a
        route queue: PBS's 15018 for an unknown queue, 15021 for a disabled one, 15022 for
        a ``from_route_only`` one (to qsub, root's too, as OpenPBS 23.06 answers; to qmove
        but a manager's), 15008 or 15007 when its ACLs refuse the job's owner (`acl`; a
        manager's qmove passes; a reservation's queue has them too), and no queue of a
        reservation that is over."""
        queue = admission.check_entry(
            self.store.get("queue", name), name, owner if owner is not None else caller.user,
            self.host_names, routed=routed, by_manager=owner is not None and caller.manager)
        if queue.get("reservation"):
            self.resvs.may_submit(name)
        return name

    def _lean_job(self, job_id: str) -> dict[str, Any] | None:
        """A job's attributes without its environment: what a dependency reads of the job
        it names (a list naming one job of 1 MiB 800 times read 800 MiB); a bare number
        is this server's job (a dependency stored so before its ids were made full)."""
        return self.store.job(self._full_id(job_id), lean=True)

    def _check_chunk_resources(self, res: dict[str, Any], asked: dict[str, Any],
                               derived: dict[str, Any] | None = None) -> None:
        """PBS's 15109 for a host-level resource `asked` for job-wide (a chunk holds it) in
        a Resource_List `res` with a select or a place: the chunks say what the job holds,
        and a job-wide value beside them would say otherwise. A select and place the
        server `derived` (PBS's conversion) do not count: they are derived again."""
        derived = derived or {}
        if all(res.get(key) is None or (key in derived and derived[key] == res[key])
               for key in ("select", "place")):
            return
        custom = None
        for name in asked:
            if name in ("select", "place") or asked[name] is None:
                continue
            if custom is None:
                custom = {n for n, a in self.store.all("resource").items()
                          if "h" in str(a.get("flag") or "")}
            if name in values.CHUNK_RESOURCES or name in custom:
                raise PbsError(PBSE_INVALJOBRESC, f'"-lresource=" cannot be used with '
                               f'"select" or "place", resource is: {name}')

    def _check_depend(self, caller: Caller, attrs: dict[str, Any], me: str | None = None,
                      unknown: list[str] | None = None) -> list[tuple[str, str]]:
        """A job's dependencies (job `me`'s): known jobs only (15001; with `unknown`, a
        list, the full ids of those no server knows go there instead), not itself;
        ``after*`` ones hold it (``s``). Returns the ``before*`` targets, which will wait
        on it."""
        befores = []
        named = []  # (kind, the jobs by their full ids): as qsub writes them, and stored so
        for kind, ids in depend.parse(attrs.get("depend")):
            if kind == depend.ON:  # how many jobs are to name this one with before*
                count = depend.count_value(ids[0]) if len(ids) == 1 else None
                if count is None or not 0 < count <= values.LONG_MAX:
                    raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value "
                                   f"depend: on:{':'.join(ids)} is not on:<count>")
                named.append((kind, [str(count)]))
                continue
            if kind not in depend.AFTER and kind not in depend.BEFORE:
                raise PbsError(PBSE_NOSUP, f"No support for requested service: depend "
                               f"type {kind}")
            named.append((kind, [self._full_id(job_id) for job_id in ids]))
            if me is not None and me in named[-1][1]:  # (PBS: parent and child the same)
                raise PbsError(PBSE_IVALREQ, obj=me)
            for job_id, full in zip(ids, named[-1][1], strict=True):
                other = self._lean_job(full)
                if other is None and unknown is not None:
                    unknown.append(full)
                    continue
                if other is None:  # (naming it: the request's own job is named after)
                    raise PbsError(PBSE_UNKJOBID, f"Unknown Job Id depend: {full}",
                                   obj=job_id)
                if kind in depend.BEFORE:
                    if other["job_state"] not in ("Q", "H", "W"):
                        raise PbsError(PBSE_BADSTATE, obj=job_id)
                    self._own(caller, full, other)
                    befores.append((kind, full))
        if named:
            attrs["depend"] = depend.format(named)
        if depend.check(attrs.get("depend"), self._lean_job)[0] != depend.MET:
            self._add_system_hold(attrs)
        return befores

    def _end_waits(self, now: float) -> None:
        """Waiting jobs whose Execution_Time has come are queued (checked once a second).
        No limit on queued jobs is checked: they counted the jobs from their submission
        (`limits.not_begun`), and entering Q adds nothing (a job whose stored request a
        limit cannot count, set after it, is not stuck W either)."""
        if now < self._next_wait_check:
            return
        self._next_wait_check = now + 1.0
        due = self.store.waiting_due(now)
        if not due:
            return
        queues: set[str] = set()
        with self.store.transaction() as st:  # one commit for the pass, however many jobs
            for job_id, attrs in due.items():
                st.put_job(job_id, {**attrs, "job_state": "Q"}, keep_env=True)
                queues.add(str(attrs.get("queue") or ""))
        for queue in sorted(queues):
            self._trigger(queue)

    def _release_held_back(self) -> None:
        """The jobs an older pbsplug held back from Q while a threshold was full (its
        thresholds counted jobs in Q only; they count every job not begun now,
        `limits.not_begun`, so nothing is held back any more), as its database has them: a
        waiting one loses the limit's comment (it goes to Q when its time comes, as any),
        one held ``s`` after its dependencies were met is released (`_resolve_depend`). As
        the server starts, before any request: no request meets such a job. A write (one
        transaction, which takes the database's write lock) only when there is one."""
        waiting = {job_id: attrs for job_id, attrs in self.store.jobs(("W",), lean=True).items()
                   if limits.held_back(attrs.get("comment"))}
        if waiting:
            with self.store.transaction() as st:
                for job_id, attrs in waiting.items():
                    st.put_job(job_id, _without_held_back(attrs), keep_env=True)
        self._resolve_depend([], every_held=True)

    def _link_befores(self, job_id: str, befores: list[tuple[str, str]]) -> str | None:
        """``before*`` dependencies, registered on each target as PBS's server does
        (`depend.registered`; each entry reads the target as the one before it left it, so
        two entries naming one target both count). Returns the first target that refuses,
        with none of them changed (PBS rejects the dependency request; the caller says
        what follows)."""
        texts: dict[str, str | None] = {}
        for kind, target in dict.fromkeys(befores):  # (one job named twice: once)
            text = texts[target] if target in texts else \
                (self.store.job(target) or {}).get("depend")
            new = depend.registered(text, kind, job_id)
            if new is None:
                return target
            texts[target] = new
        for target, text in texts.items():
            other = self.store.job(target)
            if other is not None and text != other.get("depend"):
                self._hold_for_depend(target, {**other, "depend": text})
        return None

    @staticmethod
    def _add_system_hold(attrs: dict[str, Any]) -> None:
        """The dependency's hold (PBS's ``s``, and its substate for it)."""
        holds = set(str(attrs.get("Hold_Types", "n")).replace("n", "")) | {"s"}
        attrs.update(Hold_Types="".join(sorted(holds)), job_state="H",
                     substate=lifecycle.DEPEND_HELD)

    def _hold_for_depend(self, job_id: str, attrs: dict[str, Any]) -> None:
        self._add_system_hold(attrs)
        with self.store.transaction() as st:
            st.put_job(job_id, attrs)

    def _resolve_depend(self, ended: list[str], every_held: bool = False) -> None:
        """Jobs waiting on `ended` (which started, ended or are new), or with `every_held`
        every job whose release an older pbsplug held back (its comment says so:
        `_release_held_back`): release the ones whose dependencies are all met, delete the
        ones that can never run. No limit on queued jobs is checked: the job was counted
        from its submission (`limits.not_begun`), and its release adds nothing."""
        for job_id, attrs in self.store.depend_held(None if every_held else ended).items():
            if every_held and not limits.held_back(attrs.get("comment")):
                continue  # (an operator's hold s on a job whose dependencies were met stays)
            if not every_held and not any(e in attrs["depend"] for e in ended):
                continue
            state, never = depend.check(attrs["depend"], self._lean_job)
            if state == depend.NEVER and never is not None:
                attrs = self.store.job(job_id) or attrs  # whole: its end's hooks see it
                # PBS's words (msg_registerdel), naming the job it depended on.
                self._drop(job_id, attrs, "Job deleted as result of dependency on job "
                                          f"{never.split(':', 1)[1]}")
            elif state == depend.MET:
                holds = str(attrs["Hold_Types"]).replace("s", "") or "n"
                new = {**attrs, "Hold_Types": holds, "mtime": int(self.clock())}
                new["job_state"] = lifecycle.queued_state(new, self.clock())
                with self.store.transaction() as st:
                    st.put_job(job_id, _without_held_back(new), keep_env=True)
                self.log(LOG_JOB, "Job", job_id, "dependencies met: system hold released")
                self.want_cycle = True

    def req_stat_jobs(self, caller: Caller, ids: list[str] | None = None,
                      history: bool = False, attrs: list[str] | None = None,
                      subjobs: bool = False) -> dict[str, dict[str, Any]]:
        """qstat: the jobs (all those the caller may see, or `ids`), with every attribute
        or only those named in `attrs` (PBS's attribute list of pbs_statjob: plain qstat
        asks for its columns, and a job's environment is then not even read). An array
        is shown with its subjobs after it when `subjobs` (qstat -t), as `Arrays.shown`
        makes them; a subjob is shown alone only when named."""
        server = self._server_row()
        others = caller.privileged or units.parse_bool(server.get("query_other_jobs", True))
        wanted = _attribute_list(attrs)
        budget = EnvBudget()  # (what the subjobs' environments may add to this answer)
        if ids:
            out = {}
            for job_id in ids:
                found = self.arrays.as_shown(self._job(job_id))
                job_id = self._full_id(job_id)
                if not others:
                    self._own(caller, job_id, found)
                # (a subjob of a live array is X once over, and qstat shows it: PBS's)
                if found["job_state"] in ("F", "X") and not history and not (
                        found.get("array_id") and found["job_state"] == "X"):
                    raise PbsError(PBSE_HISTJOBID, "Job has finished, use -x or -H to "
                                   "obtain historical job information", obj=job_id)
                if found.get("array"):
                    out.update(self.arrays.shown(job_id, found, subjobs, lean=False,
                                                 budget=budget))
                else:
                    out[job_id] = found
        else:
            jobs = self.store.jobs(None if history else (*_ACTIVE, "B"),
                                   lean=wanted is not None and store_env not in wanted)
            out = {}
            for j, a in jobs.items():
                if a.get("array_id") is not None or not (
                        others or a.get("euser") == caller.user):
                    continue  # (a subjob shows with its array)
                if a.get("array"):
                    out.update(self.arrays.shown(j, a, subjobs, lean=wanted is not None and
                                                 store_env not in wanted, budget=budget))
                else:
                    out[j] = a
        out = self._without(self._with_sessions(out), self.unreadable("job", caller))
        if wanted is None:
            return out
        return {j: {k: v for k, v in a.items() if k in wanted or k == "job_state"}
                for j, a in out.items()}

    def unreadable(self, obj_type: str, caller: Caller) -> frozenset[str]:
        """The attributes of `obj_type` the caller may not read, on every path that shows
        them (qstat, pbsnodes, qmgr list and print): those a plugin registered with a
        `read_by` above the caller's role, and a job's schedselect below managers (OpenPBS
        23.06 shows it to managers only, checked)."""
        hidden = {name for name, defn in
                  self.plugins.attribute_registry().for_type(obj_type).items()
                  if not qmgr.may_read(defn, caller.role)}
        if obj_type == "job" and not caller.manager:
            hidden |= _MANAGERS_READ
        return frozenset(hidden)

    @staticmethod
    def _without(objects: dict[str, dict[str, Any]],
                 hidden: frozenset[str]) -> dict[str, dict[str, Any]]:
        """`objects` (name -> attributes, read for this answer: ours to change) without
        the `hidden` attributes."""
        for attrs in objects.values():
            for key in hidden:
                attrs.pop(key, None)
        return objects

    def _with_sessions(self, jobs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """A running job's session_id: its process group, as its shepherd recorded it; and
        its resources_used as last sampled (stored every USAGE_SAVE_EVERY seconds), or
        before its first sample zeros and its walltime since it started (qstat's Elap
        ``00:00``)."""
        for job_id, attrs in jobs.items():
            launch = self.launches.get(job_id)
            if launch is not None and launch.resolve():
                attrs["session_id"] = launch.pgid
            used = self.usage.get(job_id)
            if launch is not None and attrs.get("job_state") == "R":
                stored = attrs.get("resources_used") or {}
                keep = hook_set(stored, self._usage_saved(job_id))
                if used is None:  # (before its first sample: PBS's MoM's first report,
                    # zeros and the walltime since the start: OpenPBS 23.06, checked)
                    used = executor.Usage(walltime=max(0.0, self.clock() - float(
                        attrs.get("stime") or self.clock())))
                fresh = used_attrs(used, attrs)
                attrs["resources_used"] = {**stored, **{
                    k: v for k, v in fresh.items() if k not in keep}}
        return jobs

    def _usage_saved(self, job_id: str) -> dict[str, Any]:
        """The resources_used values the server last saved for the running job (read from
        its runtime once, after a restart)."""
        if job_id not in self._usage_ours:
            runtime = self.store.runtime(job_id) or {}
            self._usage_ours[job_id] = dict(runtime.get("used") or {})
        return self._usage_ours[job_id]

    def req_stat_queues(self, caller: Caller, names: list[str] | None = None
                        ) -> dict[str, dict[str, Any]]:
        queues = self.store.all("queue")
        counts = self.queue_counts()
        assigned = self.queues_assigned()
        out = {}
        for name in names or queues:
            if name not in queues:
                raise PbsError(PBSE_UNKQUE, obj=name)
            mine = counts.get(name, {})
            out[name] = {**queues[name], "total_jobs": sum(mine.values()),
                         "state_count": state_count(mine),
                         **({"resources_assigned": assigned[name]} if assigned.get(name)
                            else {})}
        return self._without(out, self.unreadable("queue", caller))

    def _assigned_names(self) -> frozenset[str]:
        """The resources a running job's request counts in resources_assigned: the
        built-in ones (`assigned.BUILTIN`) and the custom ones whose flag has ``q``."""
        return ASSIGNED_BUILTIN | {n for n, a in self.store.all("resource").items()
                                   if "q" in str(a.get("flag") or "")}

    def queues_assigned(self) -> dict[str, dict[str, Any]]:
        """Each queue's ``resources_assigned``, and the server's under
        `assigned.SERVER`: its running jobs' requests (`Assigned`); a suspended job's
        are not counted, as PBS's server gives them back."""
        types = self.resource_types()
        custom = {n: types.get(n, "string") for n in self._assigned_names()
                  if n not in ASSIGNED_BUILTIN}
        return self.assigned.amounts(self.store.jobs(("R", "E"), lean=True).values(),
                                     custom)

    def server_attrs(self) -> dict[str, Any]:
        """The server's attributes: the stored ones (``log_events`` PBS's default until it
        is set, as qstat -Bf shows it), and the flags enabled plugins hold True
        (`PluginInfo.server_flags`, such as power_provisioning)."""
        flags = {flag: True for record in self.plugins.enabled if record.info is not None
                 for flag in record.info.server_flags}
        return {"log_events": LOG_EVENTS_DEFAULT, **self._server_row(), **flags}

    def req_stat_server(self, caller: Caller) -> dict[str, dict[str, Any]]:
        counts = self.job_counts()
        assigned = self.queues_assigned().get(ALL_QUEUES)
        return self._without({self.server_name: {**self.server_attrs(),
                                                 "total_jobs": sum(counts.values()),
                                                 "state_count": state_count(counts),
                                                 **({"resources_assigned": assigned}
                                                    if assigned else {})}},
                             self.unreadable("server", caller))

    def queue_counts(self, states: tuple[str, ...] = _COUNTED_STATES
                     ) -> dict[str, dict[str, int]]:
        """Per queue, how many of its jobs are in each of `states` (one query)."""
        out: dict[str, dict[str, int]] = {}
        for (queue, state), n in self.store.state_counts(states).items():
            if queue is not None:
                state = _COUNTED_AS.get(state, state)
                counted = out.setdefault(queue, {})
                counted[state] = counted.get(state, 0) + n
        return out

    def job_counts(self, states: tuple[str, ...] = _COUNTED_STATES) -> dict[str, int]:
        """How many jobs are in each of `states` (no row decoded: see `Store.state_counts`)."""
        counts: dict[str, int] = {}
        for (_, state), n in self.store.state_counts(states).items():
            state = _COUNTED_AS.get(state, state)
            counts[state] = counts.get(state, 0) + n
        return counts

    def req_stat_nodes(self, caller: Caller, names: list[str] | None = None
                       ) -> dict[str, dict[str, Any]]:
        nodes = self._vnodes()
        if names:
            missing = [n for n in names if n not in nodes]
            if missing:
                raise PbsError(PBSE_UNKNODE, obj=missing[0])
        rows = with_resv_assigned({n: nodes[n].to_dict() for n in names or nodes},
                                  self.store.all("resv"),
                                  self.store.jobs(("R", "E"), lean=True), self.resource_types())
        return self._without(rows, self.unreadable("node", caller))

    def req_delete(self, caller: Caller, ids: list[str], force: bool = False,
                   purge: bool = False) -> list[dict[str, Any]] | LaterAnswer:
        """qdel: each job's result, so one bad id does not stop the others. `purge` (qdel
        -x) takes the job's history too, as OpenPBS 23.06 does (checked): a finished job
        is purged at once, any other is deleted, then purged (a running one once it has
        ended). Who may delete a job may purge it. A running job named again is killed once
        (`_delete`'s `killed`). A `LaterAnswer` when a job's execjob_preterm chain runs
        while the server serves (`_delete`'s `_Waits`). Once the server's stop lands in
        a hook of it (one given up), the ids not taken yet are refused with `STOPPING`,
        untouched, as the request they belong to."""
        killed: dict[str, PbsError | None] = {}
        stopping_before = self.stopping  # (a request made in the server's process: tests)
        later = LaterAnswer()
        # A job named again while it waits, in any spelling (12, 12.server, 12@SERVER),
        # shares its result, and a chain waited for has one waiter for the request (a
        # request naming a job 2,000,000 times kept as many of each until the chain was
        # over; one spelling each, a result each).
        waiting: dict[str, dict[str, Any]] = {}
        waited: dict[_Chain, list[dict[str, Any]]] = {}
        for job_id in ids:
            full = self._full_id(job_id)
            if (result := waiting.get(full)) is not None:
                later.results.append(result)
                continue
            result = {"id": job_id}
            later.results.append(result)
            if self.stopping and not stopping_before:  # (the stop landed in a hook of it)
                result["error"] = PbsError(PBSE_SYSTEM, STOPPING, obj=job_id).to_dict()
                continue
            try:
                self._delete(caller, job_id, force, purge, killed)
            except PbsError as err:
                result["error"] = err.to_dict()
            except _Waits as waits:  # (answered when its execjob_preterm is over)
                waiting[full] = result
                if waits.error is not None:  # (a subjob's: the first error is the answer)
                    result["error"] = waits.error.to_dict()
                for chain in waits.chains:
                    if (results := waited.get(chain)) is None:
                        results = waited[chain] = []
                        chain.waiters.append((later, results, caller, purge))
                        later.missing += 1
                    results.append(result)
        return later if later.missing else later.results

    def _delete(self, caller: Caller, job_id: str, force: bool, purge: bool = False,
                killed: dict[str, PbsError | None] | None = None,
                preterm: Outcome | None = None) -> None:
        """qdel of one job. `killed`: the running jobs this request has killed already (or
        whose execjob_preterm refused), answered as the first time without a kill again:
        each runs execjob_preterm, writes an accounting record and signals every process of
        the job (its shepherd's tree walked thread by thread) in the server's loop, and one
        request naming a job 10,000 times (12, 12.server, 12@SERVER) cost the server 10,000
        of each, minutes for a job of a few thousand threads. With `defer_answers`, an
        execjob_preterm chain with a pbsuser hook, which the job's owner may make slow,
        runs while the server serves: `_Waits` is raised, and the qdel is answered when
        the chain is over (`_preterm_done`). `preterm`: the job's execjob_preterm outcome
        when its hooks were fired already (an array's qdel: `_array_preterms`)."""
        given, job_id = job_id, self._full_id(job_id)
        named = arrays.named(job_id)
        if named is not None and (not named.single or self.store.job(job_id) is None):
            self._delete_in_array(caller, job_id, named, force, purge, given=given,
                                  killed=killed)
            return
        attrs = self._job(job_id)
        self._own(caller, job_id, attrs)
        state = attrs["job_state"]
        if killed is not None and killed.get(job_id, 1) is None and (
                state in ("F", "X") or self._ends_alone(job_id)):
            return  # (its prologue stopped by this request, or forced: named again)
        chain = self.chains.get(job_id)
        if chain is not None and chain.event == "execjob_prologue" or chain is None and \
                state == "R" and job_id not in self.launches and not self._ends_alone(job_id):
            self._delete_in_prologue(caller, job_id, purge, killed)
            return
        if chain is not None and chain.event == "execjob_preterm":
            if not force:  # (a qdel of it waits already: answered as that one)
                self.log(LOG_JOB, "Job", job_id, f"delete at request of {caller.user}@"
                         f"{self.host} waits for its execjob_preterm hooks")
                raise _Waits(chain)
            self._stop_chain(job_id)  # (forced: no preterm, as for any running job)
        elif chain is not None or self._ends_alone(job_id):
            self._delete_exiting(caller, job_id, force, purge, killed)
            return
        if state in ("F", "X"):
            if isinstance(attrs.get("array_id"), str):
                self._finished_subjob(job_id, attrs["array_id"], purge)
            if not purge:
                raise PbsError(PBSE_HISTJOBID, obj=job_id)
            self._purge(caller, job_id)
            return
        if state in ("R", "E", "S") and job_id in self.launches:
            if killed is not None and job_id in killed:
                if (refused := killed[job_id]) is not None:
                    raise refused
                return
            runtime = self.store.runtime(job_id) or {}
            # (its array's qdel from before the restart stands, `deletes_again`: deleted
            # as that qdel, as the first poll would, `_poll_deletes_again`)
            uid = self.deletes_again.get(job_id)
            by = caller if uid is None else Caller(uid, ROLE_USER)
            if runtime.get("end_reason") == "requeue":
                self._delete_requeued(by, job_id, killed, purge)
                return
            if uid is not None:
                self.log(LOG_JOB, "Job", job_id, "its execjob_preterm hooks are not run "
                         "again: its array's qdel from before the server's restart stands")
                self._kill_deleted(by, job_id, attrs, purge, killed)
                return
            if not force:
                # The job's owner may make this chain slow: it runs while the server
                # serves, and the qdel is answered when it is over (`_preterm_done`).
                start = self.defer_answers and self._owner_runs("execjob_preterm")
                outcome = preterm if preterm is not None else \
                    self._job_event(job_id, "execjob_preterm", start, lambda _: None,
                                    caller, job=Job(job_id, attrs),
                                    vnode_list=self._job_vnodes(attrs))
                if isinstance(outcome, _Chain):
                    outcome.done = functools.partial(self._preterm_done, caller, job_id,
                                                     purge, outcome)
                    raise _Waits(outcome)
                if stopped(outcome, self.stopping):  # (the stop's: the job runs on)
                    self._log_preterm_stopped(job_id)
                    if killed is not None:  # (named again: the same answer, no preterm)
                        killed[job_id] = PbsError(PBSE_SYSTEM, STOPPING, obj=job_id)
                    refuse_if_stopped(outcome, self.stopping, job_id)
                if not outcome.accepted:
                    refused = PbsError(PBSE_HOOKERROR, outcome.message, obj=job_id)
                    if killed is not None:
                        killed[job_id] = refused
                    raise refused
            self._kill_deleted(caller, job_id, attrs, purge, killed)
            return
        self._drop(job_id, attrs, f"{DELETED_BY}{caller.user}@{self.host}",
                   purge_by=f"{caller.user}@{self.host}" if purge else None)

    def _log_preterm_stopped(self, job_id: str) -> None:
        self.log(LOG_JOB, "Job", job_id, "its execjob_preterm hooks were stopped: the "
                 "server is stopping; the qdel is refused, and the job runs on")

    def _preterm_here(self, job_id: str, attrs: Mapping[str, Any], force: bool) -> bool:
        """Whether a qdel of job `job_id` fires its execjob_preterm hooks in the server's
        thread (`_delete`): not forced, the job running (launched, no chain of it started,
        its end not going on by itself, its run not being ended for a requeue), and no
        pbsuser hook in the chain that makes it run while the server serves."""
        return self._preterm_fires(job_id, attrs, force) and \
            not (self.defer_answers and self._owner_runs("execjob_preterm"))

    def _preterm_chained(self, job_id: str, attrs: Mapping[str, Any], force: bool) -> bool:
        """Whether a qdel of job `job_id` waits for an execjob_preterm chain (`_delete`):
        one started already by another qdel, or one it starts (its hooks fire, a pbsuser
        hook among them: not `_preterm_here`)."""
        chain = self.chains.get(job_id)
        if chain is not None:
            return not force and chain.event == "execjob_preterm" and \
                attrs.get("job_state") in ("R", "E", "S") and job_id in self.launches
        return self._preterm_fires(job_id, attrs, force) and \
            self.defer_answers and self._owner_runs("execjob_preterm")

    def _preterm_fires(self, job_id: str, attrs: Mapping[str, Any], force: bool) -> bool:
        """Whether a qdel of job `job_id` fires its execjob_preterm hooks: not forced, the
        job running (launched, no chain of it started, its end not going on by itself,
        its run not being ended for a requeue), and not to be deleted at this start's first
        poll (`deletes_again`: an array's qdel from before the restart stands, its
        preterm run already; a qdel tried again as the server comes back is answered
        before that poll, and deletes it as that qdel, `_delete`)."""
        return not force and attrs.get("job_state") in ("R", "E", "S") and \
            job_id in self.launches and job_id not in self.chains and \
            not self._ends_alone(job_id) and job_id not in self.deletes_again and \
            (self.store.runtime(job_id) or {}).get("end_reason") != "requeue"

    def _array_preterms(self, caller: Caller, job_id: str, array_job: str,
                        indices: list[int] | None, force: bool,
                        killed: Mapping[str, PbsError | None] | None = None
                        ) -> tuple[dict[str, Outcome], dict[str, int]]:
        """The execjob_preterm outcomes of an array qdel's running subjobs (of `indices`,
        or all) whose hooks fire in the server's thread (`_preterm_here`), fired before
        anything of the deletion is recorded, in the order the subjobs are then deleted
        (`Arrays.delete`). One the server's stop gave up refuses the qdel (`job_id`) with
        `STOPPING`, nothing of it done: no D record, its queued indices kept, its subjobs
        running on, and no later subjob's hooks fired (the stop would give them up too);
        but the subjobs whose hooks accepted before it, marked to be deleted at the next
        start (`_keep_accepted`), are named in its answer (`_accepted_at_stop`): they were
        answered as not deleted, and were.
        (Fired as each subjob was deleted, the qdel was refused so with the array's D
        written and its queued indices gone: half done, answered as not done.) A subjob
        this request has taken already (`killed`) fires none again: `_delete` answers it
        as that first time. With them, the subjobs whose deletion waits for a chain
        (`_preterm_chained`), each with the caller's uid: the deletion's write marks them
        to be deleted at the next start (`Arrays.delete`)."""
        wanted = None if indices is None else set(indices)
        outcomes: dict[str, Outcome] = {}
        chained: dict[str, int] = {}
        for sub, lean in self.store.subjobs(array_job).items():
            if wanted is not None and lean.get("array_index") not in wanted or \
                    killed is not None and sub in killed:
                continue
            if self._preterm_chained(sub, lean, force):
                chained[sub] = caller.uid
            if not self._preterm_here(sub, lean, force):
                continue
            attrs = self._job(sub)
            outcome = self._event("execjob_preterm", caller, job=Job(sub, attrs),
                                  vnode_list=self._job_vnodes(attrs))
            if stopped(outcome, self.stopping):
                self._log_preterm_stopped(sub)
                if kept := self._keep_accepted(caller, outcomes):
                    raise PbsError(PBSE_SYSTEM, _accepted_at_stop(kept), obj=job_id)
                refuse_if_stopped(outcome, self.stopping, job_id)
            outcomes[sub] = outcome
        return outcomes, chained

    def _keep_accepted(self, caller: Caller, outcomes: Mapping[str, Outcome]) -> list[str]:
        """The subjobs whose execjob_preterm hooks accepted an array's qdel that the
        server's stop then refused (`_array_preterms`), marked in one write before the
        refusal to be deleted at the next start (``delete_at_start``, the caller's uid), as
        `stop_chains` marks those whose pbsuser chains it gave up: the next start deletes
        them at its first poll (`_poll_deletes_again`, ``qterm -t immediate`` at the
        stop), without their hooks again, their D record the caller's, as PBS's MoM kills
        a job whose preterm accepted whatever its server does meanwhile. Fired again at
        the qdel tried again, they ran twice for one deletion; kept as a mark that any
        later qdel of the run honoured, a qdel hours later killed the job without its
        hooks. One that cannot be written (a full disk) is logged: the subjobs run on, and
        a later qdel fires their hooks again. The subjobs marked ([] when none)."""
        accepted = [sub for sub, outcome in outcomes.items() if outcome.accepted]
        if not accepted:
            return []
        try:
            with self.store.transaction() as st:
                for sub in accepted:
                    st.merge_runtime(sub, delete_at_start=caller.uid)
        except Exception as exc:  # noqa: BLE001 - logged: the refusal goes on
            self.log(LOG_ERROR, "Job", accepted[0], "marking the subjobs whose "
                     f"execjob_preterm hooks accepted their deletion ({', '.join(accepted)}) "
                     f"to be deleted at the next start failed: {type(exc).__name__}: {exc}")
            return []
        for sub in accepted:
            self.log(LOG_JOB, "Job", sub, "its execjob_preterm hooks accepted its array's "
                     "qdel, which the server's stop refused: the job is deleted when the "
                     "server starts again")
        return accepted

    def _preterm_done(self, caller: Caller, job_id: str, purge: bool, chain: _Chain,
                      outcome: Outcome) -> None:
        """A qdel's started execjob_preterm chain is over (`_poll_chains`): the job is
        killed as any qdel kills it when the chain accepted, and the qdels that wait for
        it are answered (the chain's refusal, 15136, when it did not). A -x of any of
        them (one that joined the chain too) purges the job's history once it is over.
        A run a qrerun is ending meanwhile is not killed for the qdel: it is taken as a
        qdel that comes then (`_delete_requeued`), the requeue standing, as when the run
        ends before the chain (`_preterm_ended`)."""
        if not outcome.accepted:
            try:
                self._unmark_delete_at_start(job_id)
            finally:
                chain.answer(PbsError(PBSE_HOOKERROR, outcome.message, obj=job_id))
            return
        try:
            attrs = self.store.job(job_id)
            if attrs is not None and attrs.get("job_state") in ("R", "S") and \
                    job_id in self.launches:
                if (self.store.runtime(job_id) or {}).get("end_reason") == "requeue":
                    self._delete_requeued(caller, job_id, None, purge)
                else:
                    self._kill_deleted(caller, job_id, attrs, purge)
                if not purge and (purger := chain.purger()) is not None:
                    self._purge_at_end(purger, job_id)
        finally:
            chain.answer(None)

    def _kill_deleted(self, caller: Caller, job_id: str, attrs: dict[str, Any],
                      purge: bool, killed: dict[str, PbsError | None] | None = None
                      ) -> None:
        """A qdel's kill of a running job (its execjob_preterm accepted, or not run): the
        kill (its end reason, Exit_status) is written with the deletion (`_record_deletion`)
        before the log line, the D record and any signal: the log line and D were written
        before the kill's store write, so a qdel refused for a full disk (15010) logged
        and wrote them, and its retry again (two D records for one deletion), the job
        signalled by a refused qdel. Each qdel that is not refused writes its own, as
        PBS's server does (a qdel again, below kill_delay). A limit's kill kept in memory
        (`limit_kills`) is written with it, as if written first (its -29 or -28 kept)."""
        why = f"{DELETED_BY}{caller.user}@{self.host}"
        # (OpenPBS 23.06 gives an interactive job qdel ends Exit_status 0, checked)
        exit_status = 0 if attrs.get("interactive") else None
        self._record_deletion(caller, job_id, purge, killed, kill=lambda runtime: (
            _killed_runtime(self._with_limit_kill(job_id, runtime), why, self.clock(),
                            exit_status=exit_status)))
        self._kill(job_id, why, exit_status=exit_status, written=True)
        if attrs["job_state"] == "S":  # (woken, to take its SIGTERM)
            self.control.continue_killed(job_id)

    def _unmark_delete_at_start(self, job_id: str) -> None:
        """The mark of an array's qdel (`Arrays.delete`) on a running subjob whose
        execjob_preterm chain refused its deletion cleared: it runs on. One that cannot
        be cleared (a full disk) is logged: the subjob is deleted at the next start."""
        try:
            with self.store.transaction() as st:
                runtime = st.runtime(job_id)
                if isinstance(runtime, dict) and "delete_at_start" in runtime:
                    runtime.pop("delete_at_start")
                    st.set_runtime(job_id, runtime)
        except Exception as exc:  # noqa: BLE001 - logged: the mark stands
            self.log(LOG_ERROR, "Job", job_id, "clearing its mark to be deleted at the next "
                     f"start failed: {type(exc).__name__}: {exc}")

    def _purge_at_end(self, caller: Caller, job_id: str) -> None:
        """qdel -x of a job that is not over yet: its runtime keeps who asked, through a
        requeue too (`_submitted_runtime`), and the job's history goes once it is over
        (`_finish`, `_drop`), as OpenPBS 23.06.06's server keeps the -x with the job
        until it is (read in its source)."""
        self.store.merge_runtime(job_id, purge=f"{caller.user}@{self.host}")

    def _delete_requeued(self, caller: Caller, job_id: str,
                         killed: dict[str, PbsError | None] | None,
                         purge: bool = False) -> None:
        """qdel of a running job whose run a qrerun (or ``qterm -t immediate``) is ending:
        answered and written (its D record), and the job is requeued all the same, as
        OpenPBS 23.06.06 did (measured: a job deaf to SIGTERM, qdel 3 s after qrerun; its
        server logged ``deleting instead of rerunning``, sent no signal, and the job was
        requeued, R record, and run again). No execjob_preterm, no signal: PBS's server
        sent none to its MoM. A `purge` (qdel -x) is kept: the job's history goes once the
        job is over, after a later run or a later qdel (`_purge_at_end`). The run is
        marked ``deleted`` (`_record_deletion`), its ``end_reason`` left the requeue's: a
        forced qdel while its end hooks run writes no second D record (`_delete_exiting`)."""
        then = "; its history is purged once the job is over" if purge else ""
        self._record_deletion(caller, job_id, purge, killed, note="; its run is being ended "
                              f"for a requeue, which stands{then}")

    def _record_deletion(self, caller: Caller, job_id: str, purge: bool = False,
                         killed: dict[str, PbsError | None] | None = None, note: str = "",
                         end_reason: Literal["unless_set", "replaced"] | None = None,
                         kill: Callable[[dict[str, Any]], Any] | None = None,
                         abort: bool = False) -> None:
        """The bookkeeping of a qdel that deletes a job without killing it (a qrerun is
        ending its run, `_delete_requeued`; its prologue is stopped, `_delete_in_prologue`;
        its end hooks run, `_delete_exiting`; its run ended while its execjob_preterm
        hooks ran, `_preterm_ended`), the same in each: the job's runtime marked
        ``deleted`` (`_deleted_already`: a forced qdel while its end hooks run writes
        nothing again), then logged (``Job to be deleted at request of <user>@<host>``,
        then `note`: a qdel refused for a full disk logs nothing), its D record written,
        the job answered in this request's `killed` as the first time once the mark is
        written (one refused, a full disk, is taken again as the first time: ``qdel 7
        7.server`` after a refused 7 went to `_drop`), and a `purge` (qdel -x) kept until
        the job is over (as `_purge_at_end` keeps it, in the mark's own write: a second
        write that failed after the D record left a prologue's job marked deleted with no
        execjob_abort run, and the next qdel took it as run).
        `end_reason` ``"unless_set"`` makes the deletion the run's end reason unless it has
        one (a qrerun's requeue, a limit's kill stands), ``"replaced"`` whatever it had;
        None leaves it. `kill`, given the runtime, writes a qdel's kill of the running
        job in the same transaction (`_kill_deleted`). The mark names who deleted the job:
        a job marked but not ended (its end could not be written) ends deleted by them at
        the server's next start (`_recover`), never run again. `abort` marks its
        execjob_abort to come (``abort_pending``, in the mark's own write), cleared once
        it has run (`_abort_deleted`)."""
        who = f"{caller.user}@{self.host}"
        with self.store.transaction() as st:
            runtime = {**(st.runtime(job_id) or {}), "deleted": who}
            if end_reason == "replaced" or (end_reason == "unless_set"
                                           and runtime.get("end_reason") is None):
                runtime["end_reason"] = f"{DELETED_BY}{who}"
            if kill is not None:
                kill(runtime)
            if purge:  # (`_purge_at_end`'s, in the mark's write: nothing is written between
                # the mark and what the caller does next, execjob_abort in a prologue)
                runtime["purge"] = who
            if abort:
                runtime["abort_pending"] = True
            runtime.pop("delete_at_start", None)  # (an array's qdel's: it is done)
            st.set_runtime(job_id, runtime)
        self.log(LOG_JOB, "Job", job_id, f"Job to be deleted at request of {who}{note}")
        if killed is not None:  # (once written: a refused one is not answered again)
            killed[job_id] = None
        self.accounting.deleted(job_id, who)

    @staticmethod
    def _deleted_already(runtime: Mapping[str, Any]) -> bool:
        """Whether a job's run has been deleted already: `_record_deletion`'s mark, or a
        deletion's end reason (the qdel, ``Job deleted at request of``, or the reservation's
        end, ``Job deleted: reservation``, that is killing it)."""
        return bool(runtime.get("deleted")) or \
            str(runtime.get("end_reason")).startswith("Job deleted")

    def _finished_subjob(self, job_id: str, array_job: str, purge: bool) -> None:
        """qdel of a subjob that is over (`job_id`, a row of its own): refused with 15159
        `Request invalid for finished array subjob` while its array lives, a qdel -x too
        (its history stays), and for a qdel -x once the array is over, as OpenPBS
        23.06.06 answered (measured); a plain qdel once the array is over is let on to
        15139."""
        array = self.store.job(array_job, lean=True)
        if purge or array is None or array.get("job_state") not in ("F", "X"):
            raise PbsError(PBSE_FINISHED_SUBJOB, obj=job_id)

    def _delete_in_array(self, caller: Caller, job_id: str, named: arrays.Named,
                         force: bool, purge: bool, given: str | None = None,
                         killed: dict[str, PbsError | None] | None = None) -> None:
        """qdel of an array (``12[]``), or of subjobs of it (``12[3]``, ``12[2-5]``), as
        OpenPBS 23.06 takes them (checked): indices not instantiated are gone at once,
        instantiated subjobs are deleted as jobs; a range needs one index of the array
        (else 15004), and indices gone already are let be. A `purge` (qdel -x) goes to
        each subjob named: one over already is purged now, any other once it is over; and
        of ``12[]`` to the array too: its history and every subjob's go once it is over,
        as OpenPBS 23.06.06's server marks the array and its subjobs at the qdel (read in
        its source; a range's measured). Once the array is over, a range or a subjob is
        15139, named as `given` without its ``@server`` (the array is named by its full
        id), and with a `purge` 15159, as OpenPBS 23.06.06 answered (measured). As
        `_delete`'s, the running subjobs' pbsuser execjob_preterm chains run while the
        server serves (they ran one after another in its loop), and `_Waits` names them
        all once every subjob named is taken. A subjob's error (its preterm's refusal)
        stops no other: each is taken, and the answer is the first error, as PBS's server
        answers an array's qdel with the first of its subjobs' errors to come (a later one
        is not copied over it: read in its source, reply_send). The running subjobs'
        preterm hooks run in the server's thread fire before anything is recorded
        (`_array_preterms`), so one the server's stop gives up refuses the qdel whole.
        ``12[]``'s deletion (and its -x) is one write (`Arrays.delete`), then its log line
        and D record: a qdel of it whose deletion is written already (one refused after,
        the disk full as its subjobs were killed) writes neither again, and deletes the
        subjobs left (its retry wrote the array's D again). A subjob this request has
        taken already (`killed`: named alone, in a range, or in the whole array, before) is
        answered as that first time, its preterm not fired again nor its D written again
        (``qdel 12[2] 12[1-3]`` fired subjob 2's execjob_preterm twice and wrote its D
        twice)."""
        array_job = arrays.array_id(named.number, job_id.split(".", 1)[-1])
        attrs = self.store.job(array_job)
        if attrs is None or not attrs.get("array"):
            raise PbsError(PBSE_UNKJOBID, obj=job_id)
        self._own(caller, array_job, attrs)
        if attrs["job_state"] in ("F", "X"):
            if named.whole:
                if not purge:
                    raise PbsError(PBSE_HISTJOBID, obj=job_id)
                self._purge_array(caller, array_job)
                return
            if purge:
                raise PbsError(PBSE_FINISHED_SUBJOB, obj=job_id)
            raise PbsError(PBSE_HISTJOBID, obj=(given or job_id).split("@", 1)[0])
        indices = None
        if not named.whole:
            spec = arrays.parse_submitted(attrs["array_indices_submitted"])
            wanted = named.indices()  # (a range: tested, never walked; it may be huge)
            indices = [i for i in spec.indices if i in wanted]
            if not indices:
                raise PbsError(PBSE_IVALREQ, obj=job_id)
            if named.single and self._job(job_id)["job_state"] in ("F", "X"):
                raise PbsError(PBSE_FINISHED_SUBJOB, obj=job_id)  # (a range lets it be)
        preterms, chained = self._array_preterms(caller, job_id, array_job, indices, force,
                                                 killed)
        if purge:  # (its subjobs over already go now, as PBS's server purges them)
            purged = None if indices is None else set(indices)
            self._purge_rows(caller, {
                sub: sub_attrs for sub, sub_attrs in self.store.subjobs(array_job).items()
                if sub_attrs.get("job_state") in ("F", "X") and (
                    purged is None or sub_attrs.get("array_index") in purged)})
        chains: list[_Chain] = []
        error: PbsError | None = None
        who = f"{caller.user}@{self.host}"
        # (a deletion recorded already: a qdel refused after it, a full disk killing its
        # subjobs, is taken again for the subjobs left, with no second log line nor D)
        recorded = indices is None and bool((self.store.runtime(array_job) or {}).get(
            "deleted_by"))
        # (-x: gone with its subjobs once it is over, `Arrays.end_if_over`; in the
        # deletion's own write, so nothing is written between it and the D record)
        subs = self.arrays.delete(who, array_job, attrs, indices, purge=purge, marked=chained)
        if indices is None and not recorded:  # (logged and written once the array's
            # deletion is: a qdel refused for a full disk logged it and wrote its D)
            self.log(LOG_JOB, "Job", array_job, f"Job to be deleted at request of {who}")
            self.accounting.deleted(array_job, who)  # (PBS's D)
        for sub in subs:
            if not named.single and self._ends_alone(sub):
                continue  # (it ends by itself: PBS lets an exiting subjob be, but named)
            try:
                self._delete(caller, sub, force, purge, killed, preterm=preterms.get(sub))
            except _Waits as waits:  # (its part recorded already: `stop_chains`)
                for chain in waits.chains:
                    chain.array_qdel = chain.array_qdel or caller
                chains.extend(waits.chains)
            except PbsError as err:
                error = error or err
                if sub in chained:  # (not deleted: its preterm refused at once)
                    self._unmark_delete_at_start(sub)
        self.want_cycle = True
        self.arrays.end_if_over(array_job)
        if chains:
            raise _Waits(*chains, error=error)
        if error is not None:
            raise error

    def _purge(self, caller: Caller | str, job_id: str) -> None:
        """A finished job's history gone (qdel -x): no qstat -x shows it again; one gone
        already is let be (`_purge_rows`)."""
        attrs = self.store.job(job_id, lean=True)
        if attrs is not None:
            self._purge_rows(caller, {job_id: attrs})

    def _purge_rows(self, caller: Caller | str, rows: Mapping[str, Mapping[str, Any]]
                    ) -> None:
        """The finished jobs `rows` (id -> attributes) purged in one transaction. A subjob
        purged while its array stays counts no more at the array's end, which shows it as
        one that never began (`Arrays.made_up`: ``Subjob finished``, Expired), as OpenPBS
        23.06.06 did (measured: an array whose 2nd of 3 subjobs a qdel -x killed ended
        ``and finished``, ``Expired:1``)."""
        with self.store.transaction() as st:
            for job_id in rows:
                st.delete_job(job_id)
        who = caller if isinstance(caller, str) else f"{caller.user}@{self.host}"
        for job_id in rows:
            self.log(LOG_JOB, "Job", job_id, f"Job history purged at request of {who}")

    def _purge_array(self, caller: Caller | str, array_job: str) -> None:
        """A finished array's history gone (qdel -x), its subjobs' with it."""
        rows = self.store.subjobs(array_job)
        attrs = self.store.job(array_job, lean=True)
        if attrs is not None:
            rows[array_job] = attrs  # (last: its subjobs' lines come first in the log)
        self._purge_rows(caller, rows)

    def _drop(self, job_id: str, attrs: dict[str, Any], comment: str,
              requestor: str | None = None, purge_by: str | None = None) -> None:
        """A job that is not running leaves the queue for the history. Whatever files of
        an earlier run are still there (a requeue's that could not be removed then) go.
        Its accounting record is a D when someone deleted it (a qdel's comment, or a
        `requestor`: its reservation's end), else an A. Its history is purged at the end
        when `purge_by` (a qdel -x now) or its runtime (a qdel -x kept through a requeue:
        `_purge_at_end`) names who asked."""
        self._stop_chain(job_id)  # (a reservation's end drops a job not launched yet)
        purged_by = purge_by or (self.store.runtime(job_id) or {}).get("purge")
        now = int(self.clock())
        attrs.update(job_state="F", substate=91, comment=comment, mtime=now, obittime=now)
        with self.store.transaction() as st:
            st.put_job(job_id, attrs)
            st.set_runtime(job_id, None)
        self._forget_run(job_id)
        self.log(LOG_JOB, "Job", job_id, comment)
        if requestor is not None:
            self.accounting.deleted(job_id, requestor)
        elif comment.startswith(DELETED_BY):  # (qdel's D; the server's own deletions are A)
            self.accounting.deleted(job_id, comment.removeprefix(DELETED_BY))
        else:
            self.accounting.aborted(job_id, comment)
        self._remove_run_files(job_id)
        self.want_cycle = True
        self._resolve_depend([job_id])
        if attrs.get("array_id") is not None:
            self.arrays.subjob_over(job_id, attrs)
        if isinstance(purged_by, str):
            self._purge(purged_by, job_id)

    @staticmethod
    def _hold_types(job_id: str, types: Any) -> str:
        """qhold's and qrls's ``-h``: PBS's hold letters."""
        if not isinstance(types, str) or not types or set(types) - set(HOLD_LETTERS):
            raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value Hold_Types: "
                           f"{types!r} is not of {HOLD_LETTERS}", obj=job_id)
        return types

    @staticmethod
    def _may_change_holds(caller: Caller, job_id: str, added: Iterable[str],
                          removed: Iterable[str]) -> None:
        """Who may set or release which hold, as OpenPBS 23.06 answers: ``u`` the job's
        owner (and operators and managers); ``o`` operators and managers; ``s`` managers
        only; ``p`` (the password hold) is set by root alone (PBS's default admin) and
        released by the job's owner. A request with one letter refused is refused whole
        (PBS's 15007)."""
        added, removed = set(added), set(removed)
        if ("s" in added | removed and not caller.manager) or \
                ("p" in added and caller.uid != 0) or \
                ("o" in added | removed and not caller.privileged):
            raise PbsError(PBSE_PERM, obj=job_id)

    def req_hold(self, caller: Caller, ids: list[str], types: str = "u") -> list[dict[str, Any]]:
        """qhold: each job's result, so one refused id does not stop the others (PBS's
        qhold goes on to the next id)."""
        return each(ids, lambda job_id: self._holds(caller, job_id, types, add=True))

    def req_release(self, caller: Caller, ids: list[str], types: str = "u") -> list[dict[str, Any]]:
        """qrls: each job's result, as qhold's."""
        return each(ids, lambda job_id: self._holds(caller, job_id, types, add=False))

    def _holds(self, caller: Caller, job_id: str, types: Any, add: bool) -> None:
        """qhold (`add`) or qrls of `types` on one job, as OpenPBS 23.06 does (checked): a
        running job is held too, runs on, and is H should it be requeued; the comment says
        who held it and when. A qrls that leaves no hold clears the comment, whatever it
        says and whether or not the job was held. The state follows (`_modify`). A request
        that changes nothing (holds the job has, holds it has not and no comment to clear)
        succeeds and writes nothing, as PBS saves the job only when its holds change; the
        comment of a hold set again stays the first one's (PBS's names the latest request,
        in memory: the job is not saved for it). Each request is logged as PBS's server
        logs it, changed or not (checked): ``Holds uos set at request of root@host``,
        ``Holds u released at request of ...``, the letters as the request gave them."""
        attrs = self._job(job_id)
        job_id = self._full_id(job_id)
        self._own(caller, job_id, attrs)
        if attrs.get("array_id") is not None:  # (a subjob: OpenPBS 23.06's 15004, checked)
            raise PbsError(PBSE_IVALREQ, obj=job_id)
        types = self._hold_types(job_id, types)
        self._may_change_holds(caller, job_id, types if add else "", "" if add else types)
        if attrs["job_state"] in ("F", "X"):  # (PBS 23.06: 15139, checked)
            raise PbsError(PBSE_HISTJOBID, obj=job_id)
        if attrs["job_state"] not in _HOLDABLE and not (
                attrs.get("array") and attrs["job_state"] == "B"):  # (never queued again)
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        had = str(attrs.get("Hold_Types") or "n")
        changes: dict[str, Any] = {}
        if add:
            holds = "".join(sorted(set(had.replace("n", "") + types)))
            if set(holds) != set(had):
                changes = {"Hold_Types": holds, "comment": (
                    f"{HELD_BY}{caller.user} on {time.ctime(self.clock())}")}
        else:
            holds = "".join(h for h in had if h not in types) or "n"
            if set(holds) != set(had):
                changes["Hold_Types"] = holds
            if holds == "n" and "s" in had and "s" in types and attrs["job_state"] != "R":
                changes["run_count"] = 0  # (tried 20 times: as many again once released)
            if holds == "n" and "comment" in attrs:  # (any comment goes, "Job run at" too)
                changes["comment"] = None
        self._modify(caller, job_id, attrs, changes, write_unchanged=False, logged=False,
                     hooked=False)
        self.log(LOG_JOB, "Job", job_id, f"Holds {types} {'set' if add else 'released'} at "
                 f"request of {caller.user}@{self.host}")

    def req_alter(self, caller: Caller, id: str, attrs: dict[str, Any]) -> None:
        # As OpenPBS 23.06's server (checked): an unknown job, a finished one, then another
        # user's, come before what the request holds (`qalter -l nosuchres=1 99999` is
        # Unknown Job Id).
        current = self._job(id)
        job_id = self._full_id(id)
        if current.get("array_id") is not None:  # (a subjob: OpenPBS 23.06's 15004, checked)
            raise PbsError(PBSE_IVALREQ, obj=job_id)
        if current["job_state"] in ("F", "X"):
            raise PbsError(PBSE_HISTJOBID, obj=job_id)
        self._own(caller, job_id, current)
        attrs = self._checked_request(caller, attrs)
        self._check_output_hosts(attrs)
        if "queue" in attrs:  # PBS's qalter never moves a job: qmove does, with its checks
            raise PbsError(PBSE_ATTRRO, "Cannot set attribute, read only or insufficient "
                           "permission queue (use qmove)", obj=job_id)
        if not caller.privileged:
            _admin_resources(attrs, job_id)
        _soft_within_walltime(current, attrs, job_id)
        if "run_count" in attrs and not caller.privileged and \
                int(attrs["run_count"] or 0) < int(current.get("run_count") or 0):
            # As OpenPBS 23.06 (checked): a user may raise it, or set it as it is, but only
            # an operator or a manager lowers it: a user's job would dodge the hold after
            # too many failed starts (`lifecycle.MAX_RUN_COUNT`).
            raise PbsError(PBSE_PERM, obj=job_id)
        if current["job_state"] in ("R", "E", "S"):
            self._check_alter_running(caller, job_id, current, attrs)
        changes = dict(attrs)
        if "Resource_List" in changes:
            merged = {**current.get("Resource_List", {}), **(changes["Resource_List"] or {})}
            changes["Resource_List"] = {k: v for k, v in merged.items() if v is not None}
            self._check_chunk_resources(
                changes["Resource_List"], attrs["Resource_List"] or {},
                self._written(job_id, current)["derived"])
        if "Hold_Types" in changes:  # (a running job's too: held should it be requeued)
            holds = set(str(changes["Hold_Types"] or "n"))
            had = set(str(current.get("Hold_Types") or "n"))
            self._may_change_holds(caller, job_id, holds - had, had - holds)
        befores = []  # (the state follows holds and Execution_Time: `_modify`)
        if "depend" in changes:  # checked and enforced as at submission
            # The entries given are checked (known jobs, their owners, by full ids); those
            # of the other types are kept as they are (merged by type, as PBS's qalter
            # does: a kept before* target may have run since), and the whole decides the
            # dependency's hold.
            given = {**current, "depend": changes["depend"]}
            befores = self._checked_depend(caller, given, job_id)
            text = depend.merged(current.get("depend"), given.get("depend")) \
                if changes["depend"] else changes["depend"]
            changes["depend"] = text
            held = {**current, **changes}
            if text and depend.check(text, self._lean_job)[0] != depend.MET:
                self._add_system_hold(held)
                changes["substate"] = held["substate"]
            if held.get("Hold_Types") != current.get("Hold_Types"):
                changes["Hold_Types"] = held["Hold_Types"]
        # A user's change of resources is checked against the limits (an operator's or a
        # manager's is not), as PBS's qalter is.
        self._modify(caller, job_id, current, changes,
                     touched=(attrs.get("Resource_List") or {}).keys(),
                     limited="Resource_List" in attrs and not caller.privileged)
        if befores:
            self._link_befores(job_id, befores)
        if "depend" in changes:
            self._resolve_depend([job_id])

    @staticmethod
    def _check_alter_running(caller: Caller, job_id: str, current: dict[str, Any],
                             attrs: dict[str, Any]) -> None:
        """What may be altered while the job runs, as OpenPBS 23.06 answers it (checked as
        root, an operator and the job's owner): the attributes of `ALTER_RUNNING` (and a
        plugin's), and of the resources `ALTER_RUNNING_RESOURCES`, whoever asks; any other
        is 15015, naming the first in the request (``Cannot modify attribute while job
        running  Account_Name``, ``...  Resource_List.ncpus``; a depend too: it would hold
        a running job, whose cpus would look free). An operator or a manager may raise a
        limit; the job's owner may lower one, or set one the job had not, but raising or
        unsetting one is 15007, as PBS's owner may not raise the limits of a running job."""
        for name, value in attrs.items():
            if name == "Resource_List":
                named = next((f"Resource_List.{res}" for res in value or {}
                              if res not in ALTER_RUNNING_RESOURCES), None)
            else:
                named = name if name in values.JOB_ATTRIBUTES and \
                    name not in ALTER_RUNNING else None
            if named is not None:  # (PBS's text names it after a blank)
                raise PbsError(15015, f"Cannot modify attribute while job running  {named}",
                               obj=job_id)
        if caller.privileged:
            return
        had = current.get("Resource_List") or {}
        for res, value in (attrs.get("Resource_List") or {}).items():
            if had.get(res) is not None and (value is None or units.parse_duration(
                    value) > units.parse_duration(had[res])):
                raise PbsError(PBSE_PERM, obj=job_id)

    def _modify(self, caller: Caller, job_id: str, current: dict[str, Any], changes: dict[str, Any],
                touched: Iterable[str] = (), limited: bool = False,
                write_unchanged: bool = True, logged: bool = True,
                hooked: bool = True) -> None:
        """modifyjob fires first (unless not `hooked`: qhold and qrls fire no hook, as
        OpenPBS 23.06 fires modifyjob for qalter only, checked); a reject refuses the change.
        The state of a job not running follows its holds and Execution_Time, as the
        request and then the hooks left them; a hook's depend is checked and enforced as
        qalter's is. Without `write_unchanged` (qhold, qrls), a job the request and the
        hooks leave as it was is not written (no transaction or mtime): PBS saves a job
        there only when its holds change. qalter's job is written always, as PBS's is.
        A job written is logged ``Job modified at request of ...`` unless not `logged`
        (qhold and qrls log PBS's own line, `_holds`)."""
        before = {**current, **changes}
        queued = current["job_state"] in lifecycle.QUEUED_STATES
        if queued:
            before["job_state"] = lifecycle.queued_state(before, self.clock())
        outcome = self._event("modifyjob", caller, hooks=None if hooked else (),
                              job=Job(job_id, before),
                              job_o=Job(job_id, current))
        refuse_if_stopped(outcome, self.stopping, job_id)
        if not outcome.accepted:
            raise PbsError(PBSE_HOOKERROR, outcome.message, obj=job_id)
        attrs = {k: v for k, v in self._after_hooks(before, outcome, "job").items()
                 if v is not None}  # (None: unset)
        attrs.pop("id", None)
        self._check_hooked("modifyjob", outcome, attrs, before)
        befores = self._hooked_depend("modifyjob", caller, job_id, attrs, before)
        self._lift_depend_hold(current, attrs)
        written = None
        touched = {*touched, *_resources_set(outcome)}
        if touched or attrs.get("Resource_List") != current.get("Resource_List"):
            # (the names the request or a hook set count as asked for)
            written = self._hooked_request(
                "modifyjob", outcome, before, job_id, attrs, limited=limited,
                touched=touched, written=self._written(job_id, current))
        if queued:
            attrs["job_state"] = lifecycle.queued_state(attrs, self.clock())
        if current.get("array") and current["job_state"] in ("Q", "H", "W", "B"):
            # (an array begun is B again once released: PBS's, checked)
            state = lifecycle.queued_state(attrs, self.clock())
            begun = state == "Q" and attrs.get("stime") is not None
            attrs["job_state"] = "B" if begun else state
            attrs["substate"] = 70 if begun else attrs.get("substate")
        if any(attrs.get(key) != current.get(key) for key in _COUNTED_BY_LIMITS):
            self._check_limits(attrs, current)  # a release, a project, resources
        if not write_unchanged and written is None and attrs == current:
            return
        attrs["mtime"] = int(self.clock())
        with self.store.transaction() as st:
            st.put_job(job_id, attrs)
            if written is not None:
                st.set_written(job_id, written)
        if logged:
            self.log(LOG_JOB, "Job", job_id,
                     f"Job modified at request of {caller.user}@{self.host}")
            self.accounting.altered(job_id, current, attrs, changes.keys(), touched)
        self._depend_linked(job_id, attrs, before, befores)
        self.want_cycle = True

    def _completed(self, job_id: str, attrs: dict[str, Any], *, enqueued: bool = False,
                   limited: bool = False, touched: Iterable[str] = (),
                   written: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """The job's Resource_List as PBS's server completes it and its ``schedselect``
        (its chunks with the default_chunk tables', PBS's attribute), set in `attrs`, and
        what of the Resource_List the server wrote (`lifecycle.completed_request`, from what
        it had `written`: `_written`), returned; nothing is stored. PBS's 15036 past its
        queue's or the server's limits (`limited`), and 15014 for a value no select holds or
        more MPI ranks than a PBS_NODEFILE holds."""
        queue = self.store.get("queue", str(attrs.get("queue"))) or {}
        server = self.server_attrs()
        types = {**values.RESOURCE_TYPES, **self.resource_types()}
        host_level = values.CHUNK_RESOURCES | self.host_resources()
        hosts: set[str] = set()
        if (attrs.get("Resource_List") or {}).get("nodes") is not None:  # (its host names)
            for name, node in self.store.all("node").items():
                hosts |= {name, str((node.get("resources_available") or {}).get("host"))}
        try:
            res, written = lifecycle.completed_request(
                attrs.get("Resource_List") or {}, written, queue, server, types, host_level,
                enqueued=enqueued, limited=limited, touched=touched, hosts=hosts)
        except units.NodesError as exc:  # (an old nodes specification: PBS's answers)
            raise PbsError(exc.code, exc.message) from None
        except lifecycle.OutsideLimits as exc:
            self.log(LOG_JOB, "Job", job_id, f"{exc} of queue {attrs.get('queue')}")
            raise PbsError(PBSE_EXCQRESC) from None
        except ValueError as exc:  # (a value a converted select cannot hold)
            raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value "
                           f"Resource_List.select: {exc}") from None
        try:
            chunks = job_select(Job(job_id, {"Resource_List": res}),
                                default_chunks(queue, server), host_level)
        except ValueError as exc:  # (a converted value no select reads: `-l arch=`)
            raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value "
                           f"Resource_List.select: {exc}") from None
        # its PBS_NODEFILE: one line per MPI rank, one a chunk at least, as it starts
        ranks = _ranks(chunks)
        if ranks > MAX_RANKS:
            asked = "select" if "select" not in written["derived"] else "mpiprocs"
            raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value "
                           f"Resource_List.{asked}: {ranks} MPI ranks (mpiprocs) in all, "
                           f"more than {MAX_RANKS}")
        attrs["Resource_List"] = res
        attrs["schedselect"] = schedselect(chunks)
        return written

    def _written(self, job_id: str, stored: dict[str, Any]) -> dict[str, dict[str, Any]]:
        """What of a job's stored attributes' Resource_List the server wrote: as the store
        kept it, else inferred (`lifecycle.inferred_written`: a job stored without it)."""
        written = self.store.written(job_id)
        if written is not None:
            return written
        return lifecycle.inferred_written(
            stored.get("Resource_List") or {},
            self.store.get("queue", str(stored.get("queue"))) or {}, self.server_attrs(),
            {**values.RESOURCE_TYPES, **self.resource_types()},
            values.CHUNK_RESOURCES | self.host_resources())

    def _default_chunks(self, attrs: dict[str, Any]) -> tuple[Any, Any]:
        """The default_chunk tables a job of these attributes takes: its queue's, then the
        server's."""
        return default_chunks(self.store.get("queue", str(attrs.get("queue"))),
                              self.server_attrs())

    def _schedselect(self, job_id: str, attrs: dict[str, Any]) -> tuple[units.Chunk, ...]:
        """The job's chunks as its scheduler places them (PBS's schedselect): its select, or
        the conversion of its job-wide host-level resources (the custom ones with flag h
        too), each chunk given what it lacks of `_default_chunks`."""
        return job_select(Job(job_id, attrs), self._default_chunks(attrs),
                          self.host_resources())

    def _hooked_depend(self, event: str, caller: Caller, job_id: str, attrs: dict[str, Any],
                       before: dict[str, Any]) -> list[tuple[str, str]]:
        """A depend a hook set (modifyjob, movejob, or a refusing runjob), checked and
        enforced as qalter's: on a job still to run only (a running one's hold would make
        its cpus look free: 15015), by full ids, an ``after*`` not yet met holds the job
        (``s``), one that can never be met is refused; returns the ``before*`` targets
        (`_depend_linked` makes them wait). A modifyjob or movejob hook's bad depend
        refuses the request, as its other bad values do; a runjob hook's is dropped with a
        log line (no request to refuse: the job keeps the depend it had)."""
        if attrs.get("depend") == before.get("depend") or not attrs.get("depend"):
            return []
        probe = dict(attrs)  # (what the check writes is kept only when it passes)
        try:
            if attrs.get("job_state") not in lifecycle.QUEUED_STATES:
                raise PbsError(15015, "Cannot modify attribute while job running",
                               obj=job_id)
            befores = self._checked_depend(caller, probe, job_id)
        except PbsError as err:
            if event != "runjob":
                raise
            self.log(LOG_ERROR, "Job", job_id, f"{event} hook's depend dropped: {err.message}"
                     + (f" {err.obj}" if err.obj else ""))
            attrs["depend"] = before.get("depend")
            if attrs["depend"] is None:
                del attrs["depend"]
            return []
        attrs.update(probe)  # (by full ids, and the dependency's hold)
        return befores

    def _lift_depend_hold(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """A job held (``s``) for its dependencies, whose depend a request or a hook changed
        to one met already, or removed: the hold goes, as PBS's server lifts it (its job
        no longer waits on anything). An ``s`` hold whose depend was met already is not the
        dependency's (an operator's, too many failed starts'): it stays."""
        if new.get("depend") == old.get("depend") or "s" not in str(new.get("Hold_Types")):
            return
        if not old.get("depend") or depend.check(old["depend"], self._lean_job)[0] == \
                depend.MET:
            return  # (met already: not the dependency's)
        if new.get("depend") and depend.check(new["depend"], self._lean_job)[0] != depend.MET:
            return
        new["Hold_Types"] = str(new["Hold_Types"]).replace("s", "") or "n"

    def _checked_depend(self, caller: Caller, attrs: dict[str, Any], me: str
                        ) -> list[tuple[str, str]]:
        """`_check_depend` of job `me`, already queued (qalter, a hook's change): one on a
        job that finished without satisfying it can never be met, and is refused with PBS's
        words (at qsub PBS queues the job, then deletes it)."""
        befores = self._check_depend(caller, attrs, me)
        state, never = depend.check(attrs.get("depend"), self._lean_job)
        if state == depend.NEVER and never is not None:
            raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value depend: "
                           f"{never.split(':', 1)[1]} {depend.HISTDEPEND}")
        for kind, target in befores:  # (refused here: the job is not new, nothing to delete)
            if depend.registered((self._lean_job(target) or {}).get("depend"), kind,
                                 me) is None:
                raise PbsError(PBSE_BADDEPEND, f"{BEFORE_REFUSED}{target}", obj=me)
        return befores

    def _depend_linked(self, job_id: str, attrs: dict[str, Any], before: dict[str, Any],
                       befores: list[tuple[str, str]]) -> None:
        """After a changed depend is stored: the ``before*`` targets wait on the job, and
        the jobs waiting on it are looked at again."""
        if attrs.get("depend") == before.get("depend"):
            return
        self._link_befores(job_id, befores)
        if attrs.get("depend"):
            self._resolve_depend([job_id])

    def req_move(self, caller: Caller, destination: str, ids: list[str]) -> list[dict[str, Any]]:
        """qmove: each queued job to `destination`; movejob fires first and may refuse."""
        return each(ids, lambda job_id: self._move(caller, destination, job_id))

    def _move(self, caller: Caller, destination: str, job_id: str) -> None:
        attrs = stored = self._job(job_id)
        job_id = self._full_id(job_id)
        self._own(caller, job_id, attrs)
        if self.store.get("queue", destination) is None:
            raise PbsError(PBSE_UNKQUE, obj=destination)
        if attrs["job_state"] not in ("Q", "H", "W"):
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        self._submit_queue(caller, destination, str(attrs.get("euser") or ""))
        source = attrs["queue"]
        before = {**attrs, "queue": destination}
        outcome = self._event("movejob", caller, job=Job(job_id, before),
                              src_queue=Queue(source, self.store.get("queue", source) or {}))
        refuse_if_stopped(outcome, self.stopping, job_id)
        if not outcome.accepted:
            raise PbsError(PBSE_HOOKERROR, outcome.message, obj=job_id)
        attrs = self._after_hooks(before, outcome, "job")
        attrs.pop("id", None)
        self._check_hooked("movejob", outcome, attrs, before)
        befores = self._hooked_depend("movejob", caller, job_id, attrs, before)
        self._lift_depend_hold(stored, attrs)
        # (a manager may move a job past the new queue's limits, and past the limits on
        # queued jobs of the queue and the server, an array too; an operator may not:
        # OpenPBS 23.06, checked)
        self._into_queue(job_id, stored, attrs, destination,
                         limited=caller.role != ROLE_MANAGER, touched=_resources_set(outcome))
        self.log(LOG_JOB, "Job", job_id, f"Job moved to {destination} at request of "
                 f"{caller.user}@{self.host}")
        self._depend_linked(job_id, attrs, before, befores)
        self.want_cycle = True
        queue = self.store.get("queue", destination) or {}
        if is_route_queue(queue):  # (PBS routes it in the same request)
            self.router.forget(job_id)  # (a stay there before counts no more)
            self.router.route(job_id, attrs, destination, queue, self.clock())

    def _into_queue(self, job_id: str, stored: dict[str, Any], attrs: dict[str, Any],
                    destination: str, limited: bool, touched: Iterable[str] = ()) -> None:
        """Job `job_id` (stored as `stored`, to be `attrs`) into queue `destination`, as
        qmove and routing put it there: it entered now; its state follows its holds;
        the old queue's defaults go and the new queue's come, within its limits when
        `limited` (`_completed`), and then within the limits on queued jobs (`limited`
        is False for a manager's qmove alone, which PBS lets past both); then it is
        stored."""
        now = int(self.clock())
        attrs.update(queue=destination, mtime=now, qtime=now)
        attrs.pop("queue_rank", None)  # (a qorder's place was in the old queue)
        attrs["job_state"] = lifecycle.queued_state(attrs, self.clock())  # (a hook's holds)
        written = self._completed(
            job_id, attrs, enqueued=True, limited=limited, touched=touched,
            written=self._written(job_id, stored))
        if limited:  # (a manager's qmove takes an array past it: OpenPBS 23.06's, checked)
            self.arrays.check_size(attrs, destination, obj=job_id)
            self._check_limits(attrs, stored)
        with self.store.transaction() as st:
            st.put_job(job_id, attrs)
            st.set_written(job_id, written)
        self.accounting.queued(job_id, attrs)

    def route_to(self, job_id: str, stored: dict[str, Any], destination: str,
                 submitting: bool = False) -> None:
        """`routing.Router`'s move of job `job_id` (stored as `stored`, lean or whole) out
        of its route queue into `destination`, or the PbsError of the destination's refusal
        (`routing.FOR_NOW` tells which pass). As qmove's move without its request: no
        movejob hook (OpenPBS 23.06 fires none when it routes, checked), the destination's
        limits for everyone, its reservation's users checked against the job's owner.
        `submitting`: routed at qsub, whose cycle waits for job_accumulation_time."""
        source = stored.get("queue")
        try:
            owner = Caller(pwd.getpwnam(str(stored.get("euser") or "")).pw_uid, ROLE_USER)
        except KeyError:
            raise PbsError(PBSE_PERM, obj=destination) from None
        self._submit_queue(owner, destination, routed=True)
        stored = self._job(job_id)  # (whole: with its environment)
        self._into_queue(job_id, stored, dict(stored), destination, limited=True)
        self.log(LOG_JOB, "Job", job_id, f"Job routed from {source} to {destination}")
        self._trigger(destination, submitted=submitting)

    def req_attach(self, caller: Caller, id: str, pid: int) -> None:
        """pbs_attach: process `pid` of the job's owner joins the running job (it is killed
        with the job). execjob_attach fires first and may refuse."""
        attrs = self._job(id)
        job_id = self._full_id(id)
        self._own(caller, job_id, attrs)
        if attrs["job_state"] != "R" or job_id not in self.launches:
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        identity = executor.process_identity(int(pid))
        if identity is None:
            raise PbsError(PBSE_BADATVAL, f"no process {pid}", obj=job_id)
        owner, started = identity  # of one process (a pid reused in between cannot mix)
        if caller.role != ROLE_MANAGER and owner != caller.uid:
            raise PbsError(PBSE_PERM, obj=job_id)
        outcome = self._event("execjob_attach", caller, job=Job(job_id, attrs), pid=int(pid),
                              vnode_list=self._job_vnodes(attrs))
        refuse_if_stopped(outcome, self.stopping, job_id)
        if not outcome.accepted:
            raise PbsError(PBSE_HOOKERROR, outcome.message, obj=job_id)
        with self.store.transaction() as st:
            runtime = st.runtime(job_id) or {}
            # With its start time: the pid alone may name another process by the time the
            # job ends (pids are reused), which root must then not signal.
            attached = [a for a in runtime.get("attached", []) if isinstance(a, list)]
            runtime["attached"] = attached + [[int(pid), started]]
            st.set_runtime(job_id, runtime)
        self.log(LOG_JOB, "Job", job_id, f"process {pid} attached at request of "
                 f"{caller.user}@{self.host}")

    def req_rerun(self, caller: Caller, ids: list[str], force: bool = False) -> None:
        """qrerun, an operator's or a manager's: each running job is killed and requeued.
        As OpenPBS 23.06.06 (measured): a finished job is 15139; one that is not rerunnable
        (``qsub -r n``) 15038, queued, held, running or suspended, unless `force`
        (``qrerun -W force``) requeues it all the same; then one not running (queued, held)
        15016, forced or not, and so is a suspended one unless forced: a forced qrerun
        kills a suspended job (woken to take its SIGTERM) and requeues it. A subjob that is
        not running or suspended (E too: its end hooks running) is 15016 before its
        Rerunable is looked at (`_rerun_subjob_allowed`)."""
        if not caller.privileged:
            raise PbsError(PBSE_PERM)
        for job_id in ids:
            attrs = self._job(job_id)
            job_id = self._full_id(job_id)
            if attrs.get("array") and attrs["job_state"] not in ("F", "X"):
                if attrs["job_state"] != "B":  # (not begun: OpenPBS 23.06's 15016, checked)
                    raise PbsError(PBSE_BADSTATE, obj=job_id)
                self._rerun_array(job_id, force)
                continue
            if attrs.get("array_id") is not None:
                self._rerun_subjob_allowed(job_id, attrs, force)
            elif attrs["job_state"] in ("F", "X"):
                raise PbsError(PBSE_HISTJOBID, obj=job_id)
            else:
                self._rerun_allowed(job_id, attrs, force)
            self._kill(job_id, "requeue")
            if attrs["job_state"] == "S":  # (woken, to take its SIGTERM)
                self.control.continue_killed(job_id)

    def _rerun_subjob_allowed(self, job_id: str, attrs: dict[str, Any], force: bool) -> None:
        """`_rerun_allowed` for a subjob, its state looked at first: one that is not running
        or suspended (queued, begun before or not, finished, or E, its end hooks running)
        is 15016, forced or not, whatever its Rerunable, as OpenPBS 23.06.06 answered a
        queued one (measured). The same for a subjob alone and in its array's qrerun
        (`_rerun_array`)."""
        if attrs.get("job_state") not in ("R", "S"):
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        self._rerun_allowed(job_id, attrs, force)

    def _rerun_allowed(self, job_id: str, attrs: dict[str, Any], force: bool) -> None:
        """Whether a qrerun may kill the job and requeue it, as OpenPBS 23.06.06 answers
        (measured): not rerunnable, 15038 unless `force`; suspended, 15016 unless `force`;
        then `_rerun_launched`."""
        if not force and not units.parse_bool(attrs.get("Rerunable", True)):
            raise PbsError(PBSE_NORERUN, "job is not rerunnable", obj=job_id)
        if attrs.get("job_state") == "S" and not force:
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        self._rerun_launched(job_id, attrs)

    def _rerun_launched(self, job_id: str, attrs: dict[str, Any]) -> None:
        """A qrerun's kill needs the job's processes: refused (15016) unless the job is R,
        E or S (suspended: a forced qrerun's, `_rerun_allowed`) and launched. One started
        and not launched yet (its pbsuser prologue running, or a start whose write waits
        for room) has none, and neither has one whose pbsuser end hooks run, as PBS's MoM
        refuses the server's signal then. The same for a job and for each running subjob
        of an array's qrerun (`_rerun_array`)."""
        if attrs.get("job_state") not in ("R", "E", "S") or job_id not in self.launches:
            raise PbsError(PBSE_BADSTATE, obj=job_id)

    def _rerun_array(self, array_job: str, force: bool = False) -> None:
        """qrerun of a begun array, as OpenPBS 23.06's (checked): every subjob runs again.
        Its finished subjobs are queued again at once, each with an R record of its last
        run (its own Exit_status, ended now) and its run_count kept, no hook firing for
        them; its running ones are killed and requeued as a job's qrerun does; the indices
        deleted before they began are queued again too, and those not begun stay queued.
        The array stays begun (B), its comment as it was. A running or suspended subjob
        that is not rerunnable (its own Rerunable: a ``qalter -r n`` of the array after it
        started leaves it rerunnable) refuses the qrerun with 15038, a suspended one with
        15016 (the 15038 first), both naming the array, unless `force`: a forced qrerun
        kills the suspended ones too (woken to take their SIGTERM) and requeues them, as
        OpenPBS 23.06.06 did (measured; an array whose subjobs are all finished or queued
        is requeued whatever its Rerunable). PBS requeued the finished subjobs (and killed
        and requeued the running ones it could) before it answered 15038 or 15016;
        pbsplug's qrerun changes nothing then. All or nothing: the array, its
        finished subjobs' requeue and its running ones' kills are written in one
        transaction, and only then are the R records written, the lines logged and the
        running ones signalled (`_kill`'s ``written``): one that cannot be written (a full
        disk) refuses the qrerun with 15010 and changes nothing, the subjobs run on, as a
        job's qrerun refused. (The finished ones were requeued in a write of their own
        before each kill was written: a kill refused left a qrerun half done, and R
        records written for a write that could fail.) A running subjob is taken as a
        qrerun of it alone takes it (`_rerun_subjob_allowed`): one not launched (its
        pbsuser prologue running) refuses the whole qrerun with 15016, nothing of it done,
        and so does one in E (its pbsuser end hooks running), whatever its Rerunable: it is
        not running, so gives no 15038, and a 15038 of the array is answered first (PBS's
        array qrerun passes over a subjob not running or suspended, not measured for one
        in E; pbsplug's stays all or nothing). (Such a subjob was neither requeued nor
        refused: after the qrerun answered, it ran on, and a subjob in its prologue then
        ran with its run_count as before; one in E not rerunnable was the array's 15038.)
        Suspended subjobs were passed over once: neither refused nor killed, they stayed
        suspended while the rest was requeued; and a qrerun of an array whose running
        subjobs were not rerunnable requeued them all."""
        now = int(self.clock())
        finished = []
        running = []
        rows = self.store.subjobs(array_job)  # (lean: their environments stay as stored)
        for sub, attrs in rows.items():
            if attrs.get("job_state") in ("F", "X"):
                finished.append((sub, attrs))
            elif attrs.get("job_state") in ("R", "E", "S"):
                running.append((sub, attrs))
        for check in (PBSE_NORERUN, PBSE_BADSTATE):  # (every 15038 before any 15016)
            for sub, attrs in running:
                try:
                    self._rerun_subjob_allowed(sub, attrs, force)
                except PbsError as err:
                    if err.code != check:
                        continue
                    if err.code == PBSE_BADSTATE and attrs["job_state"] != "S":
                        raise  # (one not launched: named, as before)
                    raise PbsError(err.code, err.message, obj=array_job) from None
        array = self._job(array_job)
        spec = arrays.parse_submitted(array["array_indices_submitted"])
        made = {a.get("array_index") for a in rows.values()}
        array["array_indices_remaining"] = arrays.format_indices(
            [i for i in spec.indices if i not in made], spec.step)  # (deleted ones back)
        array["mtime"] = now
        reruns = []  # (the R records, written once all of it is)
        with self.store.transaction() as st:
            st.put_job(array_job, array)
            # (a finished job keeps no runtime: its qsub -- command comes from the array's)
            submitted = _submitted_runtime(st.runtime(array_job))
            for sub, attrs in finished:
                if lifecycle.began(runtime := st.runtime(sub)):  # (an R for a run that
                    reruns.append((sub, copy.deepcopy(attrs), runtime))  # began: its S)
                for key in ("Exit_status", "obittime"):  # (the last run's; not over now)
                    attrs.pop(key, None)
                lifecycle.requeued(attrs, REQUEUED_WITH_ARRAY, now)
                st.put_job(sub, attrs, keep_env=True)
                st.set_runtime(sub, submitted)
            for sub, _ in running:  # (their kills, as `_kill` writes each)
                st.set_runtime(sub, _killed_runtime(self._with_limit_kill(
                    sub, st.runtime(sub) or {}), "requeue", self.clock()))
        for sub, attrs, runtime in reruns:
            self.accounting.rerun(sub, attrs, runtime, REQUEUED_WITH_ARRAY)
        for sub, _ in finished:
            self.log(LOG_JOB, "Job", sub, REQUEUED_WITH_ARRAY)
        for sub, attrs in running:
            self._kill(sub, "requeue", written=True)
            if attrs["job_state"] == "S":  # (woken, to take its SIGTERM)
                self.control.continue_killed(sub)
        self.want_cycle = True

    def req_run(self, caller: Caller, id: str, vnodes: str | None = None) -> None:
        """qrun: run the job now (on `vnodes`, PBS's -H exec_vnode form, or where the
        scheduler would put it). As PBS's qrun, a held (H) or waiting (W) job runs too, and
        keeps its Hold_Types and Execution_Time: requeued, it is H or W again."""
        if not caller.privileged:
            raise PbsError(PBSE_PERM)
        attrs = self._job(id)
        job_id = self._full_id(id)
        if attrs["job_state"] in ("F", "X"):  # (PBS 23.06: 15139, checked)
            raise PbsError(PBSE_HISTJOBID, obj=job_id)
        if attrs.get("array"):  # (its subjobs run, not it: pbsplug's answer, unchecked)
            raise PbsError(PBSE_IVALREQ, obj=job_id)
        if attrs["job_state"] not in lifecycle.QUEUED_STATES:  # (R, E, T: PBS's refusals)
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        if is_route_queue(self.store.get("queue", str(attrs.get("queue"))) or {}):
            raise PbsError(PBSE_IVALREQ, obj=job_id)  # (PBS runs jobs of execution queues)
        if attrs.get("array_id") is not None and self.store.job(job_id) is None:
            # a subjob not begun: its row first (its array held or gone: 15016)
            made = self.arrays.instantiate(job_id, held_too=True)
            if made is None:
                raise PbsError(PBSE_BADSTATE, obj=job_id)
            attrs = made
        if vnodes is None:
            result = Scheduler(policy=self._policy_scheduler().policy).cycle(
                self._snapshot(only=job_id), self.clock())
            if not result.run:
                raise PbsError(PBSE_RESCUNAV, "Resources temporarily unavailable",
                               obj=job_id)
            vnodes = result.run[0].exec_vnode
        else:
            vnodes = self._given_vnodes(job_id, attrs, vnodes)
        if not self._start(job_id, attrs, vnodes):
            raise PbsError(PBSE_HOOKERROR, self._job(job_id).get("comment"), obj=job_id)

    def _given_vnodes(self, job_id: str, attrs: dict[str, Any], given: Any) -> str:
        """The exec_vnode of ``qrun -H given``, as PBS makes it. Vnodes without any
        resources (``n1+n2``, ``(n1)``, or exec_host's ``n1/0``) are given the job's chunks
        in turn, back to the first when they run out: ``select=2:ncpus=1`` on ``n1`` is
        ``(n1:ncpus=1)+(n1:ncpus=1)``, so its cpus are assigned. Chunks with resources are
        taken as written (in parentheses), checked as an exec_vnode is; no space inside
        (PBS's names have none, and ``ncpus=2 `` would not be counted). Every vnode must
        exist, and the text is bounded as an exec_vnode value is."""
        if given == "-":  # (PBS's `qrun -H -`: where the job ran before, if it did)
            given = attrs.get("exec_vnode")
        if not isinstance(given, str) or not given.strip():
            raise PbsError(PBSE_IVALREQ, obj=job_id)
        given = given.strip()
        if any(c.isspace() for c in given):
            raise PbsError(PBSE_BADATVAL, obj=job_id)
        nodes = self._vnodes()
        if ":" not in given:
            names = [part.strip("()").partition("/")[0] for part in given.split("+")]
            if not all(names):
                raise PbsError(PBSE_BADATVAL, obj=job_id)
            for name in names:
                if name not in nodes:
                    raise PbsError(PBSE_UNKNODE, obj=name)
            types = self.resource_types()  # (what each chunk takes, as exec_vnode lists it)
            select = [(chunk.count, {k: v for k, v in chunk.resources.items()
                                     if k not in ("host", "vnode")
                                     and resource_amount(k, v, types) is not None})
                      for chunk in self._schedselect(job_id, attrs)]
            # Its length before it is made: a 100,000-chunk select is not written out
            # past what an exec_vnode may hold.
            longest = max(map(len, names)) + 3
            if sum(count * (longest + len(format_exec_vnode([("", res)])))
                   for count, res in select) > values.MAX_LONG_STRING:
                raise PbsError(PBSE_BADATVAL, obj=job_id)
            chunks = [res for count, res in select for _ in range(count)]
            text = format_exec_vnode([(names[i % len(names)], res)
                                      for i, res in enumerate(chunks)])
        else:
            text = given if given.startswith("(") else "+".join(f"({p})"
                                                                for p in given.split("+"))
        try:
            values.job_value("exec_vnode", text)
        except values.BadValue:
            raise PbsError(PBSE_BADATVAL, obj=job_id) from None
        if ":" in given:  # (the vnodes named alone were looked up above)
            for name in exec_vnode_names(text):
                if name not in nodes:
                    raise PbsError(PBSE_UNKNODE, obj=name)
        return text

    def req_node_state(self, caller: Caller, names: list[str], offline: bool | None = None,
                       comment: str | None = None) -> Any:
        """pbsnodes -o / -r / -C; each vnode's modifyvnode hooks judge its change before it
        is written, while the server serves (`vnode_steps`, as a qmgr command's)."""
        if not caller.privileged:
            raise PbsError(PBSE_PERM)
        if comment is not None:
            try:
                comment = values.text(comment, "comment", prose=True)
            except values.BadValue as exc:
                raise PbsError(exc.code, exc.pbs_text) from None
        nodes = self.store.all("node")
        for name in names:
            if name not in nodes:
                raise PbsError(PBSE_UNKNODE, obj=name)
        named = ({"state"} if offline is not None else set()) | (
            {"comment"} if comment is not None else set())
        planned = {}
        for name in names:
            old = nodes[name]
            new = dict(old)
            states = set(str(old.get("state", "free")).split(","))
            if offline is True:
                states.add("offline")
            elif offline is False:
                states.discard("offline")
            states.discard("free")
            new["state"] = ",".join(sorted(states)) or "free"
            if comment:
                new["comment"] = comment
            elif comment is not None:  # (-C "": PBS unsets it, checked; no empty line)
                new.pop("comment", None)
            planned[name] = (old, new, named)
        return self._drive(self.vnode_steps(caller, planned,
                                            functools.partial(self.store.get, "node")),
                           defer=self.defer_answers)

    def _track_states(self) -> None:
        """last_state_change_time follows every state change, the ones the jobs cause
        (free to job-busy and back) as well as the stored ones. Only the vnodes whose
        inputs were written since the last call are derived again (`_StateInputs`): a
        job's start or end costs its hosts' vnodes, not the whole machine."""
        now = int(self.clock())
        changed = {}
        for name, state in self._derived_states().items():
            if self._seen_states.get(name, state) != state:
                changed[name] = now
            self._seen_states[name] = state
        if changed:
            with self.store.transaction() as st:
                for name, when in changed.items():
                    node = st.get("node", name)
                    if node is not None:
                        node["last_state_change_time"] = when
                        st.put("node", name, node)

    def _derived_states(self) -> dict[str, str]:
        """The states (`_vnode_state`) of the vnodes whose inputs changed since the last
        call, every vnode's at the first or when a reservation was written."""
        written = self.store.take_written()
        inputs = self._state_inputs
        if inputs is None or written is None or any(kind == "resv" for kind, _ in written):
            inputs = self._state_inputs = _StateInputs(self.store)
            names: Iterable[str] = inputs.nodes
        else:
            names = inputs.changed(written)
        if not names:
            return {}
        running = {job_id for name in names for job_id in inputs.on.get(name, ())}
        assigned, exclusive = _vnode_load(
            inputs.nodes, (inputs.running[j] for j in running), self.resource_types(), names)
        in_resv = resv_exclusive(inputs.resvs.values(), inputs.nodes)
        return {name: _vnode_state(inputs.nodes[name], name, in_resv, exclusive, assigned)
                for name in names}

    def _set_node(self, name: str, old: dict[str, Any], new: dict[str, Any],
                  made: bool = False) -> None:
        """The server's own change to vnode `name` (a host or periodic hook's, a
        fail_action's offline_vnodes, clear_vnodes_upon_recovery): `new` written at once,
        then its modifyvnode hooks told of it (`_notify`), event.vnode the row written and
        event.vnode_o `old`, event.requestor root. A client's change (pbsnodes, qmgr) takes
        another path: its hooks judge it before it is written (`vnode_steps`).

        A change that changes nothing (`new` the same row as `old`: a periodic hook that
        sets a comment to what it is every run) is neither written nor told; `made`: the
        vnode is new (a hook's exechost_startup adds it), written even when `new` is
        `old`, the row it starts from.

        The hooks are told, never asked: a reject is logged, nothing undone (modifyvnode's
        ``ignore``, as for a client's change); and they change nothing, the objects being
        read-only in modifyvnode (a write is the hook's error, logged), so nothing of theirs
        is written after the change (no second write that could undo a later one). With the
        socket server's loop (`defer_answers`) they run while the server serves, as a
        client's run in `_drive`: one change's chain at a time, oldest first (`notices`),
        so that a hook as slow as its alarm holds no request. A vnode's change made while
        an earlier one of it waits, not started yet, is merged into that one, in its place
        in the queue (`_queue_notice`): told once, from the earlier's `old` to the latest
        row; so the queue holds at most one change a vnode, and the one running. A change
        whose hooks have not run when the server stops is not told (`stop_chains`:
        logged); the change itself is stored. One of a vnode deleted before its hooks
        start is told all the same, from its own rows; a vnode made again of that name
        queues its changes apart (`vnode_deleted`). Without that loop (an engine in this
        process) they run at once, after the write. The server's start's changes (before
        it serves: exechost_startup's) are told at its first poll, or with its next own
        vnode change, whichever comes first."""
        strip = {k: v for k, v in old.items() if k != "name"}
        attrs = {k: v for k, v in new.items() if k != "name"}
        if attrs == strip and not made:
            return
        self._stamp_state_change(strip, attrs)
        with self.store.transaction() as st:
            st.put("node", name, attrs)
        self.vnode_written(name)
        if self.runner.chain("modifyvnode"):
            self._queue_notice(name, strip, attrs)
            if not self._starting:
                self._notify()

    def _queue_notice(self, name: str, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Vnode `name`'s change from `old` to `new` queued to be told (`notices`); merged
        into the vnode's change waiting, not started yet (`_waiting`): its `old` kept, its
        `new` the latest, its place in the queue kept (so each vnode's changes are still
        told in the order they were made: its change running, if any, is earlier), and
        dropped when the two leave the vnode as it was."""
        waiting = self._waiting.get(name)
        if waiting is None:
            notice = _Notice(name, copy.deepcopy(old), copy.deepcopy(new))
            self.notices.append(notice)
            self._waiting[name] = notice
            return
        waiting.new = copy.deepcopy(new)
        if waiting.new == waiting.old:
            del self._waiting[name]
            self.notices.remove(waiting)

    def _notify(self) -> None:
        """The oldest change's modifyvnode chain (`notices`) started when none runs; one
        over at once (no hook's process: in-process hooks) is done, and the next started.
        One that fails to start (the server's data unread) is logged and dropped."""
        while self.notices and self.notices[0].pending is None:
            notice = self.notices[0]
            if self._waiting.get(notice.name) is notice:  # (a later change queues anew)
                del self._waiting[notice.name]
            vnode, vnode_o = Vnode(notice.name, notice.new), Vnode(notice.name, notice.old)
            try:
                started: Pending | Outcome = (
                    self._event("modifyvnode", start=True, vnode=vnode, vnode_o=vnode_o)
                    if self.defer_answers else
                    self._event("modifyvnode", vnode=vnode, vnode_o=vnode_o))
            except Exception as exc:  # (the loop, and the change's writer, go on)
                self.notices.popleft()
                self._notice_failed(notice, exc)
                continue
            if isinstance(started, Outcome):
                self.notices.popleft()
                self._noticed(notice, started)
            else:
                notice.pending = started

    def poll_notices(self) -> None:
        """The running modifyvnode chain of the server's own change (`_notify`) taken a step
        on; once it is over, the next change's started (and the first of those the server's
        start made)."""
        self._notify()
        notice = self.notices[0] if self.notices else None
        if notice is None or notice.pending is None:
            return
        try:
            outcome = self._stepped("modifyvnode", notice.pending)
        except Exception as exc:  # (as in _notify: dropped)
            notice.pending.cancel()
            self.notices.popleft()
            self._notice_failed(notice, exc)
            self._notify()
            return
        if outcome is None:  # (it runs; or the stop gave it up: `stop_chains` drops it)
            return
        self.notices.popleft()
        self._noticed(notice, outcome)
        self._notify()

    def vnode_deleted(self, name: str) -> None:
        """Vnode `name` deleted (qmgr): its change waiting to be told (`_waiting`) is still
        told, from the rows recorded when it was queued (PBS runs the modifyvnode hooks as
        the vnode changes, while it exists, so every change made before a deletion is
        told); it only takes no later change any more: a vnode made again of the same
        name queues its own first change, from its own row, never merged into the deleted
        vnode's (`_queue_notice`: `vnode_o` would be the deleted vnode's row)."""
        self._waiting.pop(name, None)

    def _notice_failed(self, notice: _Notice, exc: Exception) -> None:
        self.log(LOG_ERROR, "Node", notice.name, "telling the modifyvnode hooks of the "
                 f"server's change failed, not told: {type(exc).__name__}: "
                 f"{_one_line(str(exc))}")

    def _noticed(self, notice: _Notice, outcome: Outcome) -> None:
        self._log_vnode_reject(notice.name, outcome)

    def _log_vnode_reject(self, name: str, outcome: Outcome) -> None:
        """A modifyvnode reject logged (not one the server's stop gave up)."""
        if not outcome.accepted and not stopped(outcome, self.stopping):
            self.log(LOG_ADMIN, "Node", name, f"modifyvnode hook rejected: {outcome.message}")

    def modifyvnode_objects(self, name: str, old: dict[str, Any], new: dict[str, Any]
                            ) -> dict[str, Any]:
        """modifyvnode's objects for vnode `name`'s change from `old` to `new` (its
        last_state_change_time set in `new` when its state changes)."""
        self._stamp_state_change(old, new)
        return {"vnode": Vnode(name, new), "vnode_o": Vnode(name, old)}

    def _stamp_state_change(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """`new`'s last_state_change_time the clock's when its state is not `old`'s."""
        if new.get("state") != old.get("state"):
            new["last_state_change_time"] = int(self.clock())

    def vnode_judged(self, name: str, new: dict[str, Any], outcome: Outcome,
                     caller: Caller) -> dict[str, Any]:
        """What is stored of vnode `name` after its modifyvnode `outcome` (`vnode_steps`)."""
        refuse_if_stopped(outcome, self.stopping, name)
        self._log_vnode_reject(name, outcome)
        attrs = self._after_hooks(new, outcome, "vnode")
        attrs.pop("name", None)
        return attrs

    def vnode_written(self, name: str) -> None:
        self._seen_states.pop(name, None)
        self.want_cycle = True

    def vnode_steps(self, caller: Caller,
                    planned: Mapping[str, tuple[dict[str, Any], dict[str, Any], set[str]]],
                    fresh: Callable[[str], dict[str, Any] | None]) -> RequestSteps:
        """A client's change to vnodes (pbsnodes', a qmgr command's), judged, then written.
        `planned`: each vnode's stored row as the request read it, the row the request
        makes of it, and the attributes the request names (``resources_available.mem``).
        Each vnode's modifyvnode hooks are asked for in turn (`_drive`: the server serves
        while they run); then, in one transaction, each vnode is read again (`fresh`: its
        stored row, or None; it may refuse the request itself) and what the request and its
        hooks changed is written on top of it. Another request's or the server's write
        meanwhile (a job's start: last_state_change_time) is kept; one that touched what
        this one changes (its named attributes, what it or a hook changed), or a vnode
        deleted or made meanwhile, refuses the request, nothing of it written (15010,
        `CHANGED_MEANWHILE`). The server's stop while a hook runs refuses it (`STOPPING`)."""
        judged = {}
        for name, (old, new, named) in planned.items():
            outcome = yield "modifyvnode", caller, self.modifyvnode_objects(
                name, copy.deepcopy(old), new)
            if outcome is None:  # (its chain given up for the server's stop)
                raise PbsError(PBSE_SYSTEM, STOPPING, obj=name)
            ours = _row_changes(old, self.vnode_judged(name, new, outcome, caller))
            # (last_state_change_time follows a state change: the change's own, not asked)
            judged[name] = (old, ours, _touched(ours) - {"last_state_change_time"} | named)
        with self.store.transaction() as st:
            for name, (old, ours, asked) in judged.items():
                now = fresh(name)
                theirs = _touched(_row_changes(old, now or {}))
                if (not now) != (not old) or any(a == t or t.startswith(f"{a}.") or
                                                 a.startswith(f"{t}.")
                                                 for a in asked for t in theirs):
                    raise PbsError(PBSE_SYSTEM, CHANGED_MEANWHILE.format(name), obj=name)
                st.put("node", name, attrs_after(now or {}, ours))
        for name in judged:
            self.vnode_written(name)

    def req_shutdown(self, caller: Caller) -> str:
        if caller.role != ROLE_MANAGER:
            raise PbsError(PBSE_PERM)
        self.stopping = True
        self.log(LOG_SYSTEM, "Server", self.host, f"Server shutdown at request of "
                 f"{caller.user}@{self.host}; jobs keep running")
        return "shutting down"

    def req_qmgr(self, caller: Caller, text: str, one: bool = False) -> dict[str, Any]:
        """qmgr text (`one`: a ``qmgr -c`` command): ``{"output", "errors", "code",
        "status"}`` (see `manager`). Its hooks run while the server serves (`_drive`)."""
        return self._drive(self.manager.steps(caller, text, one), defer=self.defer_answers)

    def _drive(self, steps: RequestSteps, later: LaterAnswer | None = None,
               sent: Outcome | None = None, defer: bool = True) -> Any:
        """A request whose hooks are asked for as it goes (`RequestSteps`), taken on from
        `sent`: each event's chain fired in turn, its outcome sent back, and the request's
        answer returned. With `defer` (the socket server's loop answers later) a chain
        that does not end at once leaves the request waiting (`asking`, its `LaterAnswer`
        returned), so that the server serves meanwhile: a hook that asks the server for
        something (a qstat, a qsub, a pbsnodes) is answered, where it waited for the hook's
        alarm, the server's one thread held by the hook. `poll_asking` takes it on."""
        while True:
            try:
                event, caller, objects = steps.send(sent)
            except StopIteration as done:
                if later is None:
                    return done.value
                later.value, later.missing = done.value, 0
                return later
            if not defer:
                sent = self._event(event, caller, **objects)
                continue
            started = self._event(event, caller, start=True, **objects)
            if isinstance(started, Outcome):
                sent = started
                continue
            later = later or LaterAnswer()
            later.missing = 1
            self.asking.append(_Asking(event, started, steps, later))
            return later

    def poll_asking(self) -> None:
        """Each request's chain (`asking`) taken a step on; one that is over takes its
        request on (`_drive`), which may wait for its next chain or be answered. The
        socket server's loop also calls it as soon as a chain's hook writes (`asking_fds`),
        not only at its polls: a command's chains follow each other without a poll's wait
        between them."""
        for asking in list(self.asking):
            outcome = self._stepped(asking.event, asking.pending)
            if outcome is None:
                continue
            self.asking.remove(asking)
            self._resume(asking, outcome)
        self.poll_notices()

    def asking_fds(self) -> list[int]:
        """The report pipes of the hooks that the requests waiting (`asking`) wait for, and
        the server's own vnode change's modifyvnode chain (`notices`)."""
        pendings = [a.pending for a in self.asking] + self._notice_pending()
        return [p.fd for p in pendings if p.fd >= 0]

    def _notice_pending(self) -> list[Pending]:
        """The running chain of the server's own vnode changes (`notices`), if any."""
        pending = self.notices[0].pending if self.notices else None
        return [pending] if pending is not None else []

    def _resume(self, asking: _Asking, outcome: Outcome | None) -> None:
        """`asking`'s request taken on with `outcome`; None: its chain was given up for the
        server's stop, and so is each chain it asks for after (`stop_chains`). A failure
        (a full disk) is its answer, as a request's in the loop is, and logged."""
        try:
            if outcome is not None:
                self._drive(asking.steps, asking.later, outcome)
                return
            while True:
                asking.steps.send(None)
        except StopIteration as done:
            asking.later.value, asking.later.missing = done.value, 0
        except PbsError as err:
            asking.later.error, asking.later.missing = err, 0
        except Exception as exc:  # noqa: BLE001 - answered as the loop answers a failure
            self.log(LOG_ERROR, "Server", self.host, f"a request waiting for its "
                     f"{asking.event} hooks failed: {type(exc).__name__}: {exc}")
            asking.later.error = PbsError(PBSE_SYSTEM, f"System error: {exc}")
            asking.later.missing = 0

    def req_resv_submit(self, caller: Caller, attrs: dict[str, Any]) -> dict[str, str]:
        return self.resvs.submit(caller, attrs)

    def req_stat_resvs(self, caller: Caller, ids: list[str] | None = None
                       ) -> dict[str, dict[str, Any]]:
        return self._without(self.resvs.stat(caller, ids), self.unreadable("resv", caller))

    def req_resv_delete(self, caller: Caller, ids: list[str]) -> list[dict[str, Any]]:
        return self.resvs.delete(caller, ids)

    def req_resv_alter(self, caller: Caller, id: str, attrs: dict[str, Any],
                       force: bool = False, interactive: int | None = None
                       ) -> dict[str, Any]:
        """pbs_ralter (`Reservations.alter`): the reservation's full id and what came of
        its new window."""
        return self.resvs.alter(caller, id, attrs, force, interactive)

    def req_status(self, caller: Caller) -> dict[str, Any]:
        counts = self.job_counts(("Q", "H", "R"))
        return {"pid": os.getpid(), "home": str(self.home.root), "server": self.server_name,
                "jobs": {s: counts.get(s, 0) for s in ("Q", "H", "R")},
                "plugins": sorted(r.name for r in self.plugins.enabled)}

    # -- qselect, qsig, qorder, qmsg, qstart/qstop/qenable/qdisable, qterm (`jobcontrol`) -------
    def req_select(self, caller: Caller, criteria: list[list[str]],
                   history: bool = False) -> list[str]:
        """qselect: the ids of the jobs meeting every ``[attribute, op, value]``, in queue
        order (`JobControl.select`)."""
        return self.control.select(caller, criteria, history)

    def req_signal(self, caller: Caller, ids: list[str], signal: str) -> list[dict[str, Any]]:
        """qsig -s `signal` (a name, a number, ``suspend`` or ``resume``): each job's
        result, so one refused id does not stop the others (`JobControl.signal`)."""
        return each(ids, lambda job_id: self.control.signal(caller, job_id, signal))

    def req_order(self, caller: Caller, ids: list[str]) -> None:
        """qorder: two jobs change places in the queue order (`JobControl.order`)."""
        if len(ids) != 2:
            raise PbsError(PBSE_IVALREQ, "Invalid request: qorder takes two job ids")
        self.control.order(caller, ids[0], ids[1])

    def req_message(self, caller: Caller, ids: list[str], text: str, output: bool = False,
                    error: bool = True) -> list[dict[str, Any]]:
        """qmsg: `text` appended to each running job's error and/or output file
        (`JobControl.message`). A job named again (in any of its forms) has the answer of
        its first time: each write costs the server a child process, and one request of
        10,000 copies of one id cost it 10,000."""
        answers: dict[str, PbsError | None] = {}

        def once(job_id: str) -> None:
            key = self._full_id(job_id) if isinstance(job_id, str) else None
            if key is None or key not in answers:
                try:
                    self.control.message(caller, job_id, text, output, error)
                except PbsError as err:
                    if key is not None:
                        answers[key] = err
                    raise
                if key is not None:
                    answers[key] = None
            elif (known := answers[key]) is not None:
                raise known
        return each(ids, once)

    def req_queue_state(self, caller: Caller, names: list[str], attribute: str,
                        on: bool) -> Any:
        """qstart/qstop (`attribute` started) and qenable/qdisable (enabled), each queue
        in turn (`JobControl.queue_state`); their management hooks run while the server
        serves (`_drive`), as a qmgr command's."""
        if not isinstance(names, list):
            raise PbsError(PBSE_IVALREQ, "Invalid request: names is a list of queue names")
        return self._drive(self.control.queue_state(caller, names, attribute, on),
                           defer=self.defer_answers)

    def req_terminate(self, caller: Caller, mode: str = "quick") -> str:
        """qterm -t `mode` (`JobControl.terminate`)."""
        return self.control.terminate(caller, mode)

    # -- the scheduler ----------------------------------------------------------------------------
    def _vnodes(self) -> dict[str, Vnode]:
        """Vnodes as the scheduler and pbsnodes see them: the stored attributes, with
        resources_assigned and the job states derived from the running jobs."""
        return {name: Vnode(name, attrs) for name, attrs in self._vnode_rows().items()}

    def _vnode_rows(self) -> dict[str, dict[str, Any]]:
        """`_vnodes` as attributes."""
        nodes = self.store.all("node")
        resvs = self.store.all("resv")
        in_resv = resv_exclusive(resvs.values(), nodes)
        resv_on = resvs_on_vnodes(resvs, nodes)
        types = self.resource_types()  # (a string resource's value is no amount: rack=1)
        sizes = {k for k, t in {**values.RESOURCE_TYPES, **types}.items() if t == "size"}
        running = self.store.jobs(("R", "E"), lean=True)
        assigned, exclusive = _vnode_load(nodes, running.values(), types)
        # Each job on each of its CPUs (`cpuslots`), the jobs in the order they started.
        jobs_on = self.cpu_slots.jobs_on(
            ((job_id, str(attrs.get("exec_vnode") or "")) for job_id, attrs in
             sorted(running.items(), key=lambda job: _epoch(job[1].get("stime")))),
            {name: _epoch(attrs.get("resources_available", {}).get("ncpus"))
             for name, attrs in nodes.items()})
        out = {}
        for name, attrs in nodes.items():
            ra = {k: (f"{units.kilobytes(v)}kb" if k in sizes else v)  # (PBS's: 1048576kb)
                  for k, v in assigned[name].items()}
            out[name] = {**{k: v for k, v in attrs.items() if k != "resv"},
                         "state": _vnode_state(attrs, name, in_resv, exclusive, assigned),
                         "resources_assigned": ra, "jobs": jobs_on.get(name, []),
                         **({"resv": resv_on[name]} if name in resv_on else {})}
        return out

    def _snapshot(self, only: str) -> Snapshot:
        """What a cycle for job `only` alone reads (qrun): the running jobs, and it as if
        queued and not held, with no run limit (PBS's qrun runs a job whatever they say)."""
        def unlimited(attrs: dict[str, Any]) -> dict[str, Any]:
            return {k: v for k, v in attrs.items() if k not in LIMIT_ATTRS}

        server = Server(self.server_name, unlimited(self.server_attrs()))
        queues = {n: Queue(n, unlimited(a)) for n, a in self.store.all("queue").items()}
        # (qrun's job as the scheduler would run it: queued, neither held nor waiting)
        jobs = [Job(j, {**{k: v for k, v in a.items() if k != "Execution_Time"},
                        "job_state": "Q", "Hold_Types": "n"} if j == only else a)
                for j, a in self.store.jobs(("Q", "H", "W", "R", "E"), lean=True).items()
                if j == only or a["job_state"] in ("R", "E")]
        # A job the scheduler must not start (held, or in a stopped queue) is filtered by it.
        return Snapshot(server, queues, self._vnodes(), jobs, self.resvs.objects(),
                        resource_types=self.resource_types(),
                        host_resources=self.host_resources())

    def _schedulers(self) -> dict[str, Scheduler]:
        server = Server(self.server_name, self.server_attrs())
        instances: list[SchedulerInstance] = []
        self.schedulers_whole = not self.plugins.failed  # (one that failed to load: unknown)
        for impl in reversed(self.plugins.hook.sched_instances.get_hookimpls()):  # pluggy order
            try:  # a plugin's bug must not stop the cycle, nor the server (issue 17)
                # (what the hookspec says it returns: pluggy's types say object; a wrong
                # item is refused by build_schedulers, a wrong answer fails here)
                answer = list(typing.cast("Iterable[SchedulerInstance]",
                                          impl.function(server=server)) or [])
            except (Exception, SystemExit) as exc:
                # Its last answer stands meanwhile (its partitions' jobs wait for their own
                # scheduler, not run under default's policy); before any, it has none.
                last = self._instances_named.get(impl.plugin_name)
                self.schedulers_whole = self.schedulers_whole and last is not None
                stands = "its last answer stands" if last is not None else \
                    "its schedulers are left out"
                self.log(LOG_ERROR, "Server", self.host, f"sched_instances of "
                         f"{impl.plugin_name} failed, {stands}: {type(exc).__name__}: {exc}")
                answer = last or []
            else:
                self._instances_named[impl.plugin_name] = answer
            instances += answer
        stored = self.store.all("sched")
        own = stored.pop("default", {})  # default's own policy, beside the server's
        if own:
            server = Server(self.server_name, {**self.server_attrs(), **{
                k: v for k, v in own.items() if k in POLICY_KEYS}})
        instances += [sched_instance(name, attrs) for name, attrs in stored.items()]
        try:
            scheds = build_schedulers(instances, server, self.plugins.hook)
        except Exception as exc:  # noqa: BLE001 - a plugin's bad instance (partitions=None)
            # Only default runs; it still leaves every named partition alone, so a refused
            # scheduler's jobs wait rather than run outside their partition.
            self.log(LOG_ERROR, "Server", self.host, f"scheduler instances refused: "
                     f"{type(exc).__name__}: {exc}")
            scheds = build_schedulers([], server, self.plugins.hook)
            scheds["default"].claimed = frozenset(
                str(p) for i in instances for p in _listed(getattr(i, "partitions", ())))
        # An instance with the same settings is the one made before, with what it keeps.
        for name, sched in scheds.items():
            kept = self._scheds.get(name)
            if kept is not None and kept.settings() == sched.settings():
                scheds[name] = kept
        self._scheds = scheds
        return scheds

    def _policy_scheduler(self) -> Scheduler:
        return self._schedulers()["default"]

    def _trigger(self, queue_name: str, submitted: bool = False) -> None:
        """A job was queued in, or finished from, `queue_name`: a cycle of the scheduler
        whose partition the queue is in (seed 001), after its ``job_accumulation_time``
        when a job was submitted (submissions within it share one cycle)."""
        queue = Queue(queue_name, self.store.get("queue", queue_name) or {})
        scheds = self._schedulers()
        part = queue.partition
        if submitted and part and not any(part in s.partitions for s in scheds.values()):
            # PBS's line; pbsplug's default scheduler takes such jobs (scheduler.md).
            self.log(LOG_SCHED, "Server", self.host,
                     f"No scheduler associated with the partition {part}")
        for name, sched in scheds.items():
            if sched.owns(queue):
                attrs = self.store.get("sched", name) or {}
                wait = float(attrs.get("job_accumulation_time") or 0) if submitted else 0.0
                due = self.clock() + wait
                self.sched_due[name] = min(self.sched_due.get(name, due), due)
                return
        self.want_cycle = True

    def cycle(self, only: set[str] | None = None) -> None:
        """One scheduling cycle of every instance with scheduling on (or of those in
        `only`): ``default`` here, in the server's thread; each other one in its own
        process (`schedprocs`), whose decisions are applied when they arrive. They never
        share a job or vnode. None once the server is stopping (qterm).

        A cycle that fails never stops the server: the failure is logged, jobs and vnodes
        with values it cannot read are set aside (`set_aside`), and the cycle runs once
        more without them."""
        if self.stopping:
            return
        for attempt in (1, 2):
            try:
                self._cycle(only)
                return
            except Exception as exc:  # noqa: BLE001 - one bad object must not stop the server
                self.log(LOG_ERROR, "Server", self.host, f"scheduling cycle failed: "
                         f"{type(exc).__name__}: {exc}")
                if attempt == 2 or not self.set_aside():
                    return

    def _cycle(self, only: set[str] | None) -> None:
        if only is None:
            self.want_cycle = False
            self.sched_due.clear()
        else:
            for name in only:
                self.sched_due.pop(name, None)
        scheds = self._schedulers()
        stored = self.store.all("sched")
        self.sched_procs.keep({name: stored.get(name, {}) for name, s in scheds.items()
                               if name != "default" and s.scheduling})
        active = [s for s in scheds.values() if s.scheduling]
        if not active:
            return
        # (the scheduler reads no environment; B: the arrays begun, fed as their subjobs)
        rows = self.arrays.feed(self.store.jobs(("Q", "B", "R", "E"), lean=True))
        feed = self._feed
        feed.set_server(self.server_name, self.server_attrs())
        feed.set_queues(self.store.all("queue"))
        feed.set_vnodes(self._vnode_rows())
        feed.set_jobs(rows)
        snap = feed.snapshot(self.resvs.objects(), self.resource_types(),
                             self.host_resources())
        now = self.clock()
        if only is not None:
            active = [s for s in active if s.name in only]
        for sched in active:  # each on its own scheduler_iteration
            self.sched_next[sched.name] = now + sched.iteration
        for name in set(self.sched_next) - {s.name for s in scheds.values() if s.scheduling}:
            del self.sched_next[name]
        for sched in active:
            if sched.name != "default":
                part = sched.slice(Snapshot(snap.server, snap.queues, snap.vnodes, [],
                                            snap.reservations,
                                            resource_types=snap.resource_types,
                                            host_resources=snap.host_resources))
                self.sched_procs.trigger(sched.name, Work(
                    sched.partitions, sched.policy, sched.claimed, sched.iteration, part,
                    {j: a for j, a in rows.items() if a.get("queue") in part.queues}, now))
        if scheds["default"].scheduling and (only is None or "default" in only):
            mark = feed.job_log.mark
            try:
                result = scheds["default"].cycle(snap, now)
            finally:
                feed.read(mark)
            self._apply_cycle(result)
        else:  # nothing reads the log now: default's next cycle reads every job
            feed.read(feed.job_log.mark)

    def _poll_schedulers(self) -> None:
        """Apply what scheduler processes decided; start again those that died (a
        scheduler dead three times within an hour is left down, NEEDS_ATTENTION)."""
        for _, result in self.sched_procs.poll():
            self._apply_cycle(result, checked=True)
        for name in self.sched_procs.due:  # triggered while busy: now, from today's state
            self.sched_due[name] = self.clock()
        self.sched_procs.due.clear()
        for name in self.sched_procs.dead():
            if self.stopping:
                continue
            self.set_aside()  # whatever it could not read is not sent to it again
            attrs = self.store.get("sched", name)
            if self.sched_procs.crashed(name, self.clock()) and attrs is not None:
                with self.store.transaction() as st:
                    st.put("sched", name, {**attrs, "comment": NEEDS_ATTENTION})
                self.log(LOG_ERROR, "Sched", name, f"scheduler {name} died "
                         f"{len(self.sched_procs.crashes[name])} times within an hour: left "
                         f"down ({NEEDS_ATTENTION}); set its scheduling again to restart it")
            else:
                self.log(LOG_ERROR, "Sched", name, f"scheduler {name} died: starting it "
                         "again")
            self.want_cycle = True

    def _apply_cycle(self, result: CycleResult, checked: bool = False) -> None:
        """A cycle's comments, estimates, reservation answers and job starts. A scheduler
        process's cycle (`checked`) planned on state that may have changed since: each
        start is checked against the vnodes as they are now, and one that no longer fits
        is dropped and its scheduler runs again."""
        queued = self.store.jobs(("Q",), lean=True)
        stopped = _stopped_queues(self.store.all("queue")) if queued else set()
        with self.store.transaction() as st:
            for job_id, attrs in queued.items():
                changed = False
                comment = result.comments.get(job_id)
                if comment is None and attrs.get("array") and _no_subjob_room(attrs):
                    comment = SUBJOB_LIMIT  # (the scheduler is shown none of its subjobs)
                if comment is None and attrs.get("queue") in stopped:
                    comment = QUEUE_NOT_STARTED  # (the scheduler passes its jobs by)
                if comment and attrs.get("comment") != comment:
                    attrs["comment"] = comment
                    changed = True
                est = result.estimates.get(job_id)
                if est is not None:
                    new = {"start_time": est.start_time, "exec_vnode": est.exec_vnode}
                    if attrs.get("estimated") != new:
                        attrs["estimated"] = new
                        changed = True
                if changed:
                    st.put_job(job_id, attrs, keep_env=True)
        stats = result.stats
        sched = stats.sched if stats else "default"
        if result.reservations:
            # Who may still answer a reservation in no partition: default, and the others
            # that have a partition and a live process.
            deciders = frozenset(
                s.name for s in self._schedulers().values() if s.scheduling and (
                    s.name == "default" or (s.partitions and
                                            self.sched_procs.state(s.name) != "down")))
            self.resvs.decide(result.reservations, sched, deciders)
        fits = _StillFits(self._vnodes(), self.store.all("queue")) if checked else None
        self.restart_cycle = False
        for done, decision in enumerate(result.run):
            if self.restart_cycle:  # a hook's fail_action: what is left was planned on stale state
                self.log(LOG_SCHED, "Server", self.host, "scheduling cycle restarted by a hook: "
                         f"{len(result.run) - done} run decisions dropped")
                break
            if self.stopping:  # (a SIGTERM landed in this poll: as PBS's server shutting
                # down, no new job is run; the jobs stay queued for the next start)
                self.log(LOG_SCHED, "Server", self.host, "the server is stopping: "
                         f"{len(result.run) - done} run decisions dropped")
                break
            if self._starts_paused(self.clock()):  # (`_short_start`: a cycle follows)
                self.log(LOG_SCHED, "Server", self.host, "job starts are paused: "
                         f"{len(result.run) - done} run decisions dropped")
                break
            # A subjob starts while its array's max_run_subjobs lets it (one requeued, with
            # a row of its own, as well), and gets its row as it starts (`instantiate`).
            subjob = arrays.named(decision.job_id) is not None
            if subjob and self.arrays.over_limit(decision.job_id):
                continue
            stored = self.store.job(decision.job_id)
            if stored is None and subjob:
                stored = self.arrays.instantiate(decision.job_id)
            if stored is None or stored["job_state"] != "Q":
                continue
            if fits is not None and (why := fits.check(stored, decision.chunks)):
                self.log(LOG_SCHED, "Job", decision.job_id, f"scheduler {sched}'s decision "
                         f"dropped: {why}; it runs again")
                self.sched_due[sched] = self.clock()
                continue
            try:
                self._start(decision.job_id, stored, decision.exec_vnode)
            except _StartStopped:
                continue  # (the loop's next turn drops the rest: `stopping`)

    # -- a job's life -----------------------------------------------------------------------------
    def _job_vnodes(self, attrs: dict[str, Any]) -> dict[str, Vnode]:
        nodes = self.store.all("node")
        return {name: Vnode(name, nodes[name]) for name, _ in
                parse_exec_vnode(attrs.get("exec_vnode", "")) if name in nodes}

    def _start_vnodes(self, event: str, attrs: dict[str, Any],
                      given: dict[str, Vnode] | None, read: _NodeRead) -> dict[str, Vnode]:
        """The job's vnodes for its start event `event` (begin, prologue, launch): made
        afresh from the stored data (`read`, one read for the start) for each event a hook
        runs for, never the objects an earlier event's hooks had: those keep what the hooks
        left on them that the server did not keep (a state it derives, ``job-busy``; an
        in-process hook's write past the setters, ``dict.__setitem__``; a value the rules
        refused to store, `_apply_vnode_changes`), with their guard, their change record
        and their copies on read. For an event no hook runs for, `given` (none reads
        them), if any."""
        if given is None or self.runner.chain(event):
            return read.vnodes(attrs)
        return given

    def _start(self, job_id: str, attrs: dict[str, Any], exec_vnode: str) -> bool:
        """runjob, then the execution host's begin, prologue and launch; True once the job
        runs. A refusal on the way is carried out as PBS's table says; a hook given up for
        the server's stop is `_StartStopped` (`_given_up`)."""
        job = Job(job_id, {**attrs, "exec_vnode": exec_vnode})
        outcome = self._event("runjob", job=job)
        self._given_up(job_id, outcome)
        if not outcome.accepted:
            before = dict(attrs)
            lifecycle.runjob_refused(attrs, outcome.message, outcome.changes.get("job"),
                                     self.clock())
            befores = self._hooked_depend("runjob", Caller(0, ROLE_MANAGER), job_id, attrs,
                                          before)
            with self.store.transaction() as st:
                st.put_job(job_id, attrs)
            self.log(LOG_JOB, "Job", job_id, f"runjob request rejected: {outcome.message}")
            self._depend_linked(job_id, attrs, before, befores)
            if attrs["job_state"] != "Q":
                # Held or waiting now: the cpus the cycle gave it go to the jobs behind it
                # at once, as PBS's cycle goes on to them (a job still Q is tried again at
                # the next event, not in a loop).
                self.want_cycle = True
            return False
        now = int(self.clock())
        hosts = units.format_exec_host(parse_exec_vnode(exec_vnode), lambda _: self.host)
        lifecycle.started(attrs, exec_vnode, hosts, now)
        self.assigned.note(str(attrs.get("queue") or ""), attrs.get("Resource_List") or {},
                           self._assigned_names())
        with self.store.transaction() as st:
            st.put_job(job_id, attrs)
            # (not begun till its S: ``began``, read by `lifecycle.began`)
            st.merge_runtime(job_id, began=False)
        self.log(LOG_JOB, "Job", job_id, f"Job Run at request of Scheduler@{self.host} on "
                 f"exec_vnode {exec_vnode}")
        vnodes: dict[str, Vnode] | None = None
        read = _NodeRead(self.store)
        for event in lifecycle.START_EVENTS:
            job = Job(job_id, attrs)
            vnodes = self._start_vnodes(event, attrs, vnodes, read)
            start = event == "execjob_prologue" and self._owner_runs(event)
            if start:
                # The job's owner may make this chain slow: it runs while the server
                # serves, the job R meanwhile, in PBS's substate 41 until it is launched
                # (stored with its begin hooks' changes, so that a restart finds it R with
                # no launch, and requeues it).
                attrs["substate"] = lifecycle.PRERUN
                with self.store.transaction() as st:
                    st.put_job(job_id, attrs)
            fired = self._job_event(job_id, event, start, functools.partial(
                self._prologue_done, job_id), job=job, vnode_list=dict(vnodes))
            if isinstance(fired, _Chain):
                return True
            self._given_up(job_id, fired)
            if event == "execjob_begin" and \
                    lifecycle.start_step(fired.consequence) == lifecycle.PROCEED:
                # (as PBS's server once the job's MoM took it; none for a start the MoM
                # refused: `_refused_start`)
                self._mark_began(job_id)
                self.accounting.started(job_id, attrs)
            if not self._start_event_over(job_id, attrs, vnodes, event, fired):
                return False
        return self._launch(job_id, attrs, vnodes, read)

    def _mark_began(self, job_id: str) -> None:
        """The run began (its S record is written next): ``began`` in its runtime, which
        `_recover`, `_finish` (an E or an A), `_rerun_array` and a subjob's end read, as
        the S itself is not read back. A mark that cannot be written (a full disk) is
        logged and the run goes on: it is then taken as not begun (its end an A)."""
        try:
            self.store.merge_runtime(job_id, began=True)
        except StoreWriteError as exc:
            self.log(LOG_ERROR, "Job", job_id, f"its begun run could not be marked: {exc}")

    def _given_up(self, job_id: str, outcome: Outcome) -> None:
        """`_StartStopped` when the runner gave one of a start event's hooks up for the
        server's stop (the SIGTERM landed in this poll, before or as the chain ran): the
        stop's rule, not the hook's error (a job held, requeued or its vnodes offlined
        because the server was stopping). Logged as `stop_chains` logs a chain it stops."""
        if not stopped(outcome, self.stopping):
            return
        then = ("the job stays queued" if outcome.event == "runjob" else
                "the job is requeued when it starts again")
        self.log(LOG_JOB, "Job", job_id, f"its {outcome.event} hooks were stopped: the "
                 f"server is stopping; {then}")
        if outcome.event == "execjob_begin":  # (its S unwritten: no R at that requeue)
            try:
                self.store.merge_runtime(job_id, begin_stopped=True)
            except StoreWriteError as exc:  # (the requeue writes an R: the stop goes on)
                self.log(LOG_ERROR, "Job", job_id, f"its stopped start could not be "
                         f"marked: {exc}")
        raise _StartStopped(job_id)

    def _job_event(self, job_id: str, event: str, start: bool,
                   done: Callable[[Outcome], None], caller: Caller | None = None,
                   **objects: Any) -> Outcome | _Chain:
        """`event`'s hooks for job `job_id` fired (`_event`), their outcome returned. With
        `start` (a chain with a pbsuser hook, which the job's owner may make slow), the
        chain runs while the server serves: unless it is over already, it is kept in
        `chains` and returned, and `_poll_chains` calls its `done` with its outcome."""
        if not start:
            return self._event(event, caller, **objects)
        started = self._event(event, caller, start=True, **objects)
        if isinstance(started, Outcome):
            return started
        chain = self.chains[job_id] = _Chain(event, started, done)
        return chain

    def _owner_runs(self, event: str) -> bool:
        """Whether `event`'s chain has a hook run as the job's owner (``user = pbsuser``)."""
        return any(e.attrs.user == "pbsuser" for e in self.runner.chain(event))

    def _start_event_over(self, job_id: str, attrs: dict[str, Any], vnodes: dict[str, Vnode],
                          event: str, outcome: Outcome) -> bool:
        """A start event's outcome carried out; True when the job goes on."""
        self._apply_host_changes(job_id, attrs, outcome)
        if "offline_vnodes" in outcome.fail_action:
            self._offline_for_hook(list(vnodes), outcome.hook)
        if "scheduler_restart_cycle" in outcome.fail_action:
            self.log(LOG_ADMIN, "Hook", outcome.hook or "", f"{event} hook failed: "
                     "restarting the scheduling cycle")
            self.restart_cycle = self.want_cycle = True
        if lifecycle.start_step(outcome.consequence) != lifecycle.PROCEED:
            self._refused_start(job_id, attrs, event, outcome)
            return False
        return True

    def _stepped(self, event: str, pending: Pending) -> Outcome | None:
        """`event`'s started chain taken a step on: its outcome, logged, once it is over;
        None while it runs, or when the runner gave its hook up for the server's stop (a
        SIGTERM lands anywhere in the loop): the stop's rule, `stop_chains` (a qdel waiting
        refused, the job runs on; a prologue's job requeued at the next start; a qmgr
        refused), never "the hook failed". A chain that was over just then goes on as any
        other."""
        if not pending.ready():
            return None
        values.use_resources(self.resource_types())
        try:
            outcome = pending.step()
        except Exception as exc:  # noqa: BLE001 - as in _event
            pending.cancel()
            return self._hooks_failed(event, exc)
        if outcome is None or stopped(outcome, self.stopping):
            return None
        return self._logged(outcome)

    def _poll_chains(self) -> None:
        """Each started chain (`chains`) taken a step on; the job of one that is over goes
        on (`_Chain.done`: `_prologue_done`, `_end_event_done`), its attributes read again
        there: requests may have changed them meanwhile."""
        for job_id, chain in list(self.chains.items()):
            outcome = self._stepped(chain.event, chain.pending)
            if outcome is None:
                continue
            del self.chains[job_id]
            try:
                chain.done(outcome)
            except _StartStopped:  # (its launch hooks given up for the stop: logged)
                pass
            except Exception as exc:  # one job's fault stops no other's (a full disk)
                # The job stays R with no launch, which the next start requeues; or E with
                # its status file, which the next start ends again.
                self.log(LOG_ERROR, "Job", job_id, f"handling its {chain.event}'s end "
                         f"failed: {type(exc).__name__}: {exc}")

    def _prologue_done(self, job_id: str, outcome: Outcome) -> None:
        attrs = self.store.job(job_id)
        if attrs is None or attrs.get("job_state") != "R":  # (not expected: logged)
            self.log(LOG_ERROR, "Job", job_id, "its execjob_prologue hooks ended with the "
                     "job no longer running; their outcome is not used")
            return
        read = _NodeRead(self.store)
        vnodes = read.vnodes(attrs)
        if self._start_event_over(job_id, attrs, vnodes, "execjob_prologue", outcome):
            attrs["substate"] = lifecycle.SUBSTATES["R"]
            self._launch(job_id, attrs, vnodes, read)

    def _stop_chain(self, job_id: str, ended: bool = False) -> None:
        """The job's started chain, if any, stopped (its hook's process group killed, its
        outcome unused): the job leaves the run by another way. The qdels waiting for a
        qdel's execjob_preterm are answered as deleted: a forced qdel goes on (a -x of
        theirs kept), or, when the run `ended` by itself, they are taken as a qdel that
        comes as a run ends is (`_preterm_ended`)."""
        chain = self.chains.pop(job_id, None)
        if chain is not None:
            chain.pending.cancel()
            self.log(LOG_JOB, "Job", job_id, f"its {chain.event} hooks were stopped")
            try:
                if chain.event == "execjob_preterm" and ended:
                    self._preterm_ended(job_id, chain)
                elif chain.event == "execjob_preterm" and \
                        (purger := chain.purger()) is not None:
                    self._purge_at_end(purger, job_id)
            finally:
                chain.answer(None)

    def _preterm_ended(self, job_id: str, chain: _Chain) -> None:
        """The job's run ended by itself (its processes, or its shepherd) while a qdel's
        execjob_preterm chain ran: the qdels that wait for it are taken as a qdel that
        comes as a run ends: logged and written once (a D record, the first one's, as
        PBS's server writes one when the job's MoM answers its delete, the job known or
        not: read in its source), and the job ends deleted (its comment, its own
        Exit_status); a qrerun that ends this run still requeues it (`_delete_requeued`),
        and one deleted already (its reservation's end) is not written again. A -x of any
        of them purges the job's history once it is over."""
        if not chain.waiters:
            return
        caller = chain.waiters[0][2]
        runtime = self.store.runtime(job_id) or {}
        if runtime.get("end_reason") == "requeue":
            self._delete_requeued(caller, job_id, None)
        elif not self._deleted_already(runtime):
            self._record_deletion(caller, job_id, note="; its run ended while its "
                                  "execjob_preterm hooks ran", end_reason="replaced")
        if (purger := chain.purger()) is not None:
            self._purge_at_end(purger, job_id)

    def _delete_in_prologue(self, caller: Caller, job_id: str, purge: bool,
                            killed: dict[str, PbsError | None] | None) -> None:
        """qdel of a job whose execjob_prologue chain runs (`chains`), or of a job R with no
        launch and no chain (a qdel in its prologue stopped the chain, then was refused:
        its deletion could not be written, a full disk; or its start's next step could not
        be written): the chain is stopped (its hook's process group killed, no outcome,
        even one it had reached), then the deletion recorded: a stop that fails leaves the
        job running its prologue with no D record. The job ends deleted as a prologue's
        job.delete() ends it (execjob_abort, then its end): its execjob_begin hooks ran,
        and what they made on the host is undone by its execjob_abort hooks, whichever qdel
        gets to write the deletion (`_drop` ran none). The run is marked ``deleted``
        (`_record_deletion`): a forced qdel while its end hooks run writes no second D
        record (`_delete_exiting`). A job so marked already (its deletion written, and
        its execjob_abort run after it, but its end not: the disk full again) is
        finished, its end hooks run, with no second record, log line or execjob_abort:
        one deletion, one D record, as PBS writes. The deletion is written with its
        execjob_abort to come (``abort_pending``), cleared once it has run: a server killed
        between the two (SIGKILL, a crash, a power cut) left a job marked deleted whose
        execjob_abort never ran, and the next qdel or start took it as run, what its begin
        hooks made left on the host; they run it now (`_abort_deleted`). A job whose end
        hooks ran in this server but whose end was not written (a full disk: `ends_run`,
        the end of a start a hook ended or that could never work, or of this qdel before)
        ends with neither run again; one whose execjob_abort ran in this server (a start
        a launch hook refused, or that failed, its requeue waiting for room: `aborts_run`)
        with no second execjob_abort (`_abort_ran`)."""
        self._stop_chain(job_id)
        runtime = self.store.runtime(job_id) or {}
        if self._deleted_already(runtime):
            if killed is not None:
                killed[job_id] = None
            if purge:  # (its -x counts all the same)
                self._purge_at_end(caller, job_id)
            attrs = self._job(job_id)
            if runtime.get("abort_pending") and not self._abort_ran(job_id):
                self._abort_deleted(job_id, attrs)
        else:
            aborted = self._abort_ran(job_id)
            self._record_deletion(caller, job_id, purge, killed, abort=not aborted)
            attrs = self._job(job_id)
            if not aborted:
                self._abort_deleted(job_id, attrs)
        self._finish(job_id, attrs, executor.JobExit(executor.EXEC_FAIL, 0, 0, 0),
                     comment=f"{DELETED_BY}{caller.user}@{self.host}")

    def _abort(self, job_id: str, attrs: dict[str, Any]) -> None:
        """The run's execjob_abort hooks, marked run for it in `aborts_run`."""
        self._event("execjob_abort", job=Job(job_id, attrs),
                    vnode_list=self._job_vnodes(attrs))
        self.aborts_run.add(job_id)

    def _abort_ran(self, job_id: str) -> bool:
        """Whether this run's execjob_abort ran in this server, its run not over (not
        written so yet: a full disk): run by a refused or failed start, or a qdel
        (`aborts_run`), or before end hooks that ran (`ends_run`; a start that could
        never work runs end hooks only, and takes no execjob_abort after them). One rule
        for each qdel that would run it: execjob_abort runs once a run in this server."""
        return job_id in self.aborts_run or job_id in self.ends_run

    def _abort_deleted(self, job_id: str, attrs: dict[str, Any]) -> None:
        """A deleted prologue's job's execjob_abort, then its ``abort_pending`` mark
        cleared (`_record_deletion`). Its run is marked in `aborts_run` till it is over:
        a clearing that cannot be written (a full disk) runs it not again at the next
        qdel of this server; a server that stops before
        the job's end is written runs execjob_abort again at its next start: abort hooks
        are cleanup, and must bear a second run."""
        self._abort(job_id, attrs)
        with self.store.transaction() as st:
            runtime = dict(st.runtime(job_id) or {})
            runtime.pop("abort_pending", None)
            st.set_runtime(job_id, runtime)

    def _launch(self, job_id: str, attrs: dict[str, Any], vnodes: dict[str, Vnode] | None,
                read: _NodeRead) -> bool:
        """The job's shepherd, execjob_launch, and the job's processes; True once it runs.
        `vnodes`: the job's, as its last start event had them, from `read` (`_start_vnodes`)."""
        user = attrs.get("euser") if os.geteuid() == 0 else None
        try:  # the shepherd first: execjob_launch's event.pid, the process a hook may confine
            argv, env = self._job_command(job_id, attrs)
            pending = executor.prepare(self.home.jobs / f"{job_id.split('.')[0]}.status",
                                       self.home.tmp / f"pbs.{job_id}", user)
        except executor.ShepherdError as exc:  # (no process or descriptor left: EAGAIN)
            self._short_start(job_id, attrs, str(exc))
            return False
        except executor.StartRequestError as exc:  # (out of memory: as a request unwritten)
            self._short_start(job_id, attrs, f"the job could not be sent to its shepherd: "
                                             f"{exc}")
            return False
        except OSError as exc:
            if exc.errno in executor.SHORT_OF and not isinstance(exc, executor.JobDirError):
                # (for now: the next try may have them; a TMPDIR's is PBS's end of the job)
                self._short_start(job_id, attrs, "its files could not be made: "
                                  f"{exc.strerror}" + (f" ({exc.filename})" if exc.filename
                                                       else ""))
            else:  # (a folder not the server's own, a link planted: as PBS's security bail)
                self._could_not_start(job_id, attrs, exc)
            return False
        except (KeyError, ValueError) as exc:
            self._could_not_start(job_id, attrs, exc)
            return False
        try:
            vnodes = self._start_vnodes("execjob_launch", attrs, vnodes, read)
            outcome = self._event("execjob_launch", job=Job(job_id, attrs),
                                  vnode_list=dict(vnodes), progname=argv[0], argv=argv,
                                  env=env, pid=pending.pid)
            self._given_up(job_id, outcome)  # (its shepherd ended below: nothing is left)
            self._apply_host_changes(job_id, attrs, outcome)
            if lifecycle.start_step(outcome.consequence) != lifecycle.PROCEED:
                pending.cancel()  # gone before execjob_abort, which may remove its cgroup
                self._refused_start(job_id, attrs, "execjob_launch", outcome)
                return False
            if "argv" in outcome.changes:
                argv, env = outcome.changes["argv"] or argv, outcome.changes["env"]
            home = _home_of(attrs)
            out, err = self._output_paths(job_id, attrs, home)
            seq = arrays.file_suffix(job_id)  # (a subjob's: 12.3)
            name = str(attrs.get("Job_Name") or "STDIN")
            try:  # in its owner's home, as PBS's MoM starts a job (not PBS_O_WORKDIR)
                launch = pending.start(argv, env, home, out, err,
                                       umask=self._umask(job_id, attrs),
                                       names=(f"{name}.o{seq}", f"{name}.e{seq}"),
                                       cpu_limit=_cpu_limit(attrs),
                                       interactive=self._interactive(job_id))
            except ValueError as exc:
                self._could_not_start(job_id, attrs, exc)
                return False
            except OSError as exc:  # the shepherd is gone (a launch hook killed it), or
                # its request file could not take the job (out of memory)
                if exc.errno == errno.EPIPE:
                    self._failed_start(job_id, attrs, f"its shepherd (pid {pending.pid}) "
                                       f"ended before it was sent the job: {exc}")
                else:
                    self._short_start(job_id, attrs, "the job could not be sent to its "
                                      f"shepherd (pid {pending.pid}): {exc}")
                return False
        finally:
            pending.cancel()  # a no-op once started or cancelled: none is left waiting
        # Tracked before it is written: its end is noticed even if the write fails.
        self.launches[job_id] = launch
        self.limit_kills.pop(job_id, None)  # (an earlier run's, never this one's)
        self.started[job_id] = self.clock()
        self.start_pause = 0.0  # (a start that works: the next shortage's pause is short)
        with self.store.transaction() as st:
            st.put_job(job_id, attrs)  # what its begin, prologue and launch hooks changed
            st.merge_runtime(job_id, launch=launch.to_dict(),
                             kill_delay=self._queue_kill_delay(attrs.get("queue")))
        self._track_states()
        # (`after` waits for the start only; on an array, for its first subjob's)
        self._resolve_depend([job_id, *([attrs["array_id"]] if attrs.get("array_id") else [])])
        return True

    def _could_not_start(self, job_id: str, attrs: dict[str, Any], exc: Exception) -> None:
        """A start that can never work (its TMPDIR not made, a link planted where its files
        go): the job ends, as a start a hook ends (`_refused_start`), its end kept when it
        cannot be written (`_finish`'s `kept_in`)."""
        self.log(LOG_ERROR, "Job", job_id, f"could not start: {exc}")
        self._finish(job_id, attrs, executor.JobExit(executor.EXEC_FAIL, 0, 0, 0),
                     comment=f"Job could not start: {exc}", kept_in="R")

    def _starts_paused(self, now: float) -> bool:
        """Whether the cycles' starts are paused at `now` (`_short_start`). A pause ends
        at its end, or when the clock was set back past its start: it never lasts longer
        than it was set for (a wall clock stepped back a day paused every start a day)."""
        left = self.starts_paused_until - now
        return 0 < left <= self.start_pause

    def _short_start(self, job_id: str, attrs: dict[str, Any], why: str) -> None:
        """A failed start (`_failed_start`) for want of what every start borrows from the
        machine (a process, descriptors, memory, room): the job is requeued, and the
        cycles' starts pause (START_PAUSE, doubled at each shortage that follows), then
        a cycle runs. Its next try no longer follows within a second, with every queued
        job's after it, each counted, until 21 held them all."""
        self.start_pause = (min(self.start_pause * 2, START_PAUSE_MOST) if self.start_pause
                            else START_PAUSE)
        self.starts_paused_until = self.clock() + self.start_pause
        try:
            self._failed_start(job_id, attrs, why)
        finally:  # (the pause is on, whatever its requeue did)
            self.log(LOG_ERROR, "Server", self.host, f"job starts paused for "
                     f"{self.start_pause:g} s: a start was short of what it needs ({why})")

    def _failed_start(self, job_id: str, attrs: dict[str, Any], why: str) -> None:
        """The job's shepherd ended before it started the job (a launch hook killed
        ``event.pid``), could not be made (its pipe or fork refused: no descriptor or
        process left), or the job's command could not be sent to it (its request file
        could not be made or written: out of memory): nothing of the job ran. As PBS takes a
        job whose starter failed before it reported to its MoM (JOB_EXEC_RETRY),
        execjob_abort fires and the job is requeued whatever its Rerunable; run_count counts
        the try, and too many hold the job (`lifecycle.requeued`). A requeue that cannot be
        written (the disk full) is tried again at later polls (`_requeue_or_keep`)."""
        self.log(LOG_ERROR, "Job", job_id, f"job failed to start: {why}")
        self._abort(job_id, attrs)
        self._requeue_or_keep(job_id, attrs, f"Job requeued: it failed to start ({why})")

    def _apply_host_changes(self, job_id: str, attrs: dict[str, Any], outcome: Outcome) -> None:
        """Execution-host hooks' job and vnode changes apply even on a reject (not on an
        error), as PBS does."""
        if outcome.kind in ("error", "alarm"):
            return
        apply_to_attrs(attrs, outcome.changes.get("job") or {})
        self._apply_vnode_changes(outcome)

    def _apply_vnode_changes(self, outcome: Outcome) -> None:
        """A host or periodic hook's vnode changes (not after an error or alarm). A vnode the
        hook added (exechost_startup) is created; the states and attributes the engine derives
        from the jobs (job-busy, ``jobs``...) are not stored (`lifecycle.hook_vnode_changes`)."""
        if outcome.kind in ("error", "alarm"):
            return
        world = None
        for name, changes in (outcome.changes.get("vnode_list") or {}).items():
            new_vnode = bool(changes.get("_new"))
            changes = lifecycle.hook_vnode_changes(changes)  # (the simulator's too)
            old = self.store.get("node", name)
            if old is None and new_vnode:
                problem = (None if outcome.event == "exechost_startup" else
                           f"only an exechost_startup hook adds vnodes, not {outcome.event}")
                try:
                    values.check_name("node", name)
                except values.BadValue as exc:
                    problem = problem or str(exc)
                if problem:
                    self.log(LOG_ERROR, "Hook", outcome.hook or outcome.event, "vnode "
                             f"{values.shown(name)} not created: {problem}")
                    continue
                fresh = _vnode_attrs(self.host, name, 0, 0)
                fresh["resources_available"].pop("mem")
                changes.pop("name", None)
                self._set_node(name, fresh, {**fresh, **changes}, made=True)
                self.log(LOG_ADMIN, "Node", name, "vnode created by a hook")
            elif old is not None:
                new = dict(old)
                apply_to_attrs(new, changes)  # (one resource set leaves the others)
                moved = {k for k in ("partition", "queue") if new.get(k) != old.get(k)}
                try:  # (as qmgr's: a busy vnode keeps its partition)
                    if moved:  # (what the check reads, read once for all the vnodes)
                        world = world or self.manager.partition_world()
                        self.manager.check_partitions("node", name, old, new, moved, world)
                except PbsError as err:
                    self.log(LOG_ERROR, "Hook", outcome.hook or outcome.event, f"vnode {name}'s "
                             f"change not kept: {err.message}")
                    continue
                self._set_node(name, old, new)

    def _offline_for_hook(self, names: list[str], hook: str | None) -> None:
        for name in names:
            old = self.store.get("node", name)
            if old is None:  # (deleted since: nothing to offline)
                continue
            states = set(str(old.get("state", "free")).split(",")) - {"free"} | {"offline"}
            self._set_node(name, old, {**old, "state": ",".join(sorted(states)),
                                       "comment": offline_comment(hook)})

    def _refused_start(self, job_id: str, attrs: dict[str, Any], event: str,
                       outcome: Outcome) -> None:
        self.log(LOG_JOB, "Job", job_id, f"{event} hook refused the job ({outcome.kind}): "
                 f"{outcome.message}")
        if lifecycle.abort_first(event, outcome.consequence):
            self._abort(job_id, attrs)
        comment = lifecycle.refused_comment(event, outcome.consequence, outcome.message)
        # A start its execjob_begin hooks refused never ran, as PBS's server takes a start
        # its MoM refused: no S was written (`_start`), so its requeue writes no R, and its
        # deletion an A, as for any job the server deletes before it ran (`_drop`).
        ran = event != "execjob_begin"
        ends = lifecycle.start_step(outcome.consequence) == lifecycle.FINISH
        if not ran:  # (what a restart ends or requeues it as, its end or requeue unwritten)
            try:
                self.store.merge_runtime(job_id, refused={"comment": comment, "delete": ends})
            except StoreWriteError as exc:  # (a restart requeues it, no R: `_recover`)
                self.log(LOG_ERROR, "Job", job_id, f"its refused start could not be "
                         f"marked: {exc}")
        if ends:
            self._finish(job_id, attrs, executor.JobExit(executor.EXEC_FAIL, 0, 0, 0),
                         comment=comment, kept_in="R", unstarted=not ran)
        else:
            self._requeue_or_keep(job_id, attrs, comment, record=ran)

    def _requeue_or_keep(self, job_id: str, attrs: dict[str, Any], comment: str,
                         record: bool = True) -> None:
        """A failed or refused start's requeue (`_requeue`, its hold too; its R record
        unless not `record`). The job is stored R with no launch: when its requeue cannot
        be written (the disk full), it is kept and tried again at later polls
        (`_written_or_kept`), its execjob_abort not run again, and the cycle goes on; the
        job stays R, its cpus held, till then."""
        self._written_or_kept(job_id, attrs, functools.partial(
            self._requeue, job_id, comment=comment, record=record), "R", "job requeue")

    def _forget_run(self, job_id: str) -> None:
        """What this server remembers in memory of the run that is over (`ends_run`,
        `aborts_run`): a later run of the same job, after a requeue (a qrerun of its array,
        a failed start), must run its own end and abort hooks."""
        self.ends_run.pop(job_id, None)
        self.aborts_run.discard(job_id)

    def _requeue(self, job_id: str, attrs: dict[str, Any], comment: str,
                 record: bool = True, run_status: int | None = None) -> None:
        """The run is over and the job goes back to its queue: its next run starts clean,
        as PBS's MoM purges a job at the end of each run. Of its runtime only what was
        submitted stays (`_submitted_runtime`): a qrerun's ``end_reason`` kept would requeue
        every later run again, and the processes ``attached`` to this run are not the
        next's. Its per-run files go too (`_remove_run_files`). Its R record unless not
        `record` (a run with no S: its begin hooks refused it, or were given up for the
        server's stop), with `run_status` as its Exit_status when given (an
        exechost_periodic hook's rerun at the job's own end: the run's, as in PBS), written
        once the requeue is: a requeue whose write fails (a full disk) is tried again, and a
        record written before it would be written twice. An exechost_periodic hook's
        request (`lifecycle.HOOK_ASKED`) is dropped with its Exit_status mark (-18, -19),
        whatever requeues the job (a lost job's, a failed start's): the R record then has
        the requeue's own status."""
        self._stop_chain(job_id)
        lifecycle.drop_hook_asked(attrs, self.store.runtime(job_id))
        ran = None  # (the run's, as it ended)
        if record:
            ran = copy.deepcopy(attrs)
            if run_status is not None:
                ran["Exit_status"] = run_status
        lifecycle.requeued(attrs, comment, int(self.clock()))
        with self.store.transaction() as st:
            runtime = st.runtime(job_id)
            st.put_job(job_id, attrs)
            st.set_runtime(job_id, _submitted_runtime(runtime))
        if ran is not None:
            self.accounting.rerun(job_id, ran, runtime, comment)
        self._forget_run(job_id)
        self.launches.pop(job_id, None)
        self.log(LOG_JOB, "Job", job_id, attrs["comment"])
        self._remove_run_files(job_id)
        self.want_cycle = True

    def _job_command(self, job_id: str, attrs: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
        runtime = self.store.runtime(job_id) or {}
        seq = job_id.split(".")[0]
        variables = dict(attrs.get("Variable_List") or {})
        if self.store.unreadable(variables):
            raise ValueError("its stored environment (Variable_List) could not be read")
        workdir = variables.get("PBS_O_WORKDIR") or "/"
        tmpdir = self.home.tmp / f"pbs.{job_id}"
        nodefile = self.home.jobs / f"{seq}.nodes"
        ncpus = next((int(res.get("ncpus", 1) or 1) for _name, res in parse_exec_vnode(
            attrs.get("exec_vnode", "")) if res), 0)  # (its first chunk's, not a host's rest)
        # MPI ranks: each chunk's mpiprocs, one at least, read from its schedselect (as
        # PBS's MoM does: exec_vnode lists what the chunks take, not their layout).
        ranks = _ranks(self._schedselect(job_id, attrs))
        if ranks > MAX_RANKS:  # (checked at qsub; mpiprocs=10**12 would have the root
            raise ValueError(f"mpiprocs: {ranks} MPI ranks in all, more than "  # server fill
                             f"{MAX_RANKS}")  # its memory with the nodefile)
        lines = [self.host] * ranks
        user = attrs.get("euser") or pwd.getpwuid(os.getuid()).pw_name
        # The nodefile and the script are the job's user's (0600 and 0700, as PBS keeps the
        # script) in jobs/, which others cannot list: the job reads them, nobody else.
        ids = executor.user_ids(user)
        executor.write_job_file(nodefile, "".join(f"{h}\n" for h in lines), ids)
        try:
            pw = pwd.getpwnam(user)
            home_dir, shell = pw.pw_dir, pw.pw_shell or "/bin/sh"
        except KeyError:
            home_dir, shell = "/", "/bin/sh"
        shell = _shell_path(attrs.get("Shell_Path_List"), self.host) or shell  # qsub -S
        env = {k: str(v) for k, v in variables.items()}
        env.update({
            "HOME": home_dir, "USER": user, "LOGNAME": user, "SHELL": shell,
            "PATH": variables.get("PBS_O_PATH") or "/usr/local/bin:/usr/bin:/bin",
            "PBS_JOBID": job_id, "PBS_JOBNAME": str(attrs.get("Job_Name", "")),
            "PBS_QUEUE": str(attrs.get("queue", "")), "PBS_NODEFILE": str(nodefile),
            "PBS_O_WORKDIR": workdir, "PBS_ENVIRONMENT": "PBS_INTERACTIVE" if attrs.get(
                "interactive") else "PBS_BATCH",
            "PBS_JOBDIR": home_dir, "PBS_TASKNUM": "1", "PBS_NODENUM": "0",
            "PBS_MOMPORT": "15003", "NCPUS": str(ncpus or 1),
            "OMP_NUM_THREADS": str(ncpus or 1), "TMPDIR": str(tmpdir),
            "ENVIRONMENT": "BATCH"})
        if attrs.get("array_id") is not None:  # a subjob (PBS's, checked)
            env.update(PBS_ARRAY_INDEX=str(attrs.get("array_index", "")),
                       PBS_ARRAY_ID=str(attrs["array_id"]))
        if "argv" in runtime:
            return list(runtime["argv"]), env
        script = self.home.jobs / f"{seq}.SC"
        executor.write_job_file(script, self.store.job_script(job_id) or "", ids, 0o700)
        return [shell, str(script)], env

    def _interactive(self, job_id: str) -> interactive_jobs.Spec | None:
        """An interactive job's socket and token, with ``login`` when it runs its owner's
        login shell (no ``--`` command); None for a batch job."""
        runtime = self.store.runtime(job_id) or {}
        spec = runtime.get("interactive")
        if not isinstance(spec, dict):
            return None
        # (stored as `interactive.checked_spec` made it, at qsub)
        return typing.cast(interactive_jobs.Spec, {**spec, "login": "argv" not in runtime})

    def _output_paths(self, job_id: str, attrs: dict[str, Any],
                      home: str) -> tuple[str, str | None]:
        """The job's output and error files (None: joined to the output). A stream kept on
        the execution host (``-k o``, ``-k e``, without ``d``) is ``<Job_Name>.o<seq>``
        (``.e<seq>``) in its owner's `home`, as PBS's MoM keeps it, not its path."""
        out = str(attrs["Output_Path"]).split(":", 1)[-1]
        err = str(attrs["Error_Path"]).split(":", 1)[-1]
        keep = str(attrs.get("Keep_Files") or "n")
        if "d" not in keep:
            kept = os.path.join(home, str(attrs.get("Job_Name") or "STDIN"))
            seq = arrays.file_suffix(job_id)
            out = f"{kept}.o{seq}" if "o" in keep else out
            err = f"{kept}.e{seq}" if "e" in keep else err
        join = str(attrs.get("Join_Path", "n"))
        if join == "oe":
            return out, None
        if join == "eo":
            return err, None
        return out, err

    def _umask(self, job_id: str, attrs: dict[str, Any]) -> int:
        """The job's umask: its ``umask`` attribute, else PBS's default 077."""
        if attrs.get("umask") in (None, ""):
            return executor.DEFAULT_UMASK
        try:
            return jobspec.parse_umask(attrs["umask"])
        except ValueError as exc:  # checked at submission: only an old record gets here
            self.log(LOG_ERROR, "Job", job_id, f"{exc}; the job runs with umask 077")
            return executor.DEFAULT_UMASK

    def _queue_kill_delay(self, queue: Any) -> int:
        """Queue `queue`'s kill_delay in seconds (qmgr checked it is a whole number; a
        negative one, which PBS's qmgr takes too, is no delay), else PBS's default,
        `KILL_DELAY`."""
        value: Any = (self.store.get("queue", str(queue)) or {}).get("kill_delay")
        try:
            return max(int(value), 0)
        except (TypeError, ValueError):
            return KILL_DELAY

    def _kill_delay(self, job_id: str, runtime: Any) -> int:
        """The kill_delay of a running job: its queue's when it started (PBS's server hands
        it to the MoM with the job, so a later change reaches the jobs started after it);
        a job started by an older pbsplug, without one, has its queue's now."""
        value = runtime.get("kill_delay") if isinstance(runtime, dict) else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        return self._queue_kill_delay((self.store.job(job_id, lean=True) or {}).get("queue"))

    def _kill(self, job_id: str, why: str, over: lifecycle.OverLimit | None = None,
              exit_status: int | None = None, written: bool = False) -> None:
        """SIGTERM now, SIGKILL after the job's kill_delay (`_kill_delay`), as PBS's MoM
        ends a job deleted or over a limit; `why` becomes the job's comment (``requeue``
        requeues it when it ends). A job `over` a limit gets PBS's note in its error file
        first, and PBS's Exit_status for it whatever its processes exit with. `exit_status`,
        when given, is the job's Exit_status whatever its processes exit with. A job already
        being killed keeps the Exit_status its first kill gave it (a limit's -29 or -28)
        unless it is now requeued: OpenPBS 23.06.06 ended a job qdel'ed while it was being
        killed for its walltime with Exit_status -29 and the deletion's comment, D record
        and substate (measured). The kill (`_killed_runtime`) is written before anything
        is sent: one that cannot be written (a full disk: `StoreWriteError`) sends nothing
        and changes nothing, so its caller may refuse its request (a qrerun). A limit's is
        the exception: as PBS's MoM enforces a limit on its host whatever its server can
        write, the job is killed all the same, its kill kept in memory (`limit_kills`) and
        written later (`_write_limit_kill`). Each signalled first, and a walltime kill
        refused left the job in `kills`, never tried again: it ended without its limit's
        reason. `written`: the caller wrote the kill already, in its own transaction (a
        qdel's, `_kill_deleted`), a limit's kept in memory with it (`_with_limit_kill`)."""
        launch = self.launches.get(job_id)
        if launch is None:
            return
        if written:
            runtime = self.store.runtime(job_id) or {}
            self.limit_kills.pop(job_id, None)
        else:
            try:
                with self.store.transaction() as st:
                    runtime = _killed_runtime(self._with_limit_kill(
                        job_id, st.runtime(job_id) or {}), why, self.clock(), over,
                        exit_status)
                    st.set_runtime(job_id, runtime)
            except StoreWriteError as exc:
                if over is None:
                    raise
                runtime = _killed_runtime(self.store.runtime(job_id) or {}, why, self.clock(),
                                          over)
                self.limit_kills[job_id] = {"end_reason": why, "exit_status": over.exit_status,
                                            "killed_at": runtime["killed_at"]}
                self._said_once(job_id, f"its {over.resource} kill is not written yet: "
                                f"{exc.message}; the job is killed all the same, the kill "
                                "written at a later poll")
            else:
                self.limit_kills.pop(job_id, None)
        if over is not None:
            executor.tell_job(launch, over.note)
        self._terminate(job_id, launch, runtime)
        # A job being killed already keeps its SIGKILL's time: a qdel every second would
        # otherwise put it off for ever (past the walltime of a job that ignores SIGTERM).
        deadline = self.clock() + self._kill_delay(job_id, runtime)
        self.kills[job_id] = min(self.kills.get(job_id, deadline), deadline)

    def _terminate(self, job_id: str, launch: executor.Launch,
                   runtime: dict[str, Any]) -> None:
        """A killed job's SIGTERM (`_kill`, `_resume_kills`)."""
        # Every process of the job gets its SIGTERM, once, as PBS's MoM sends it to the
        # job's session: one that made a group or a session of its own may end cleanly
        # too, before the SIGKILL after kill_delay (`executor.signal_whole`).
        if not executor.signal_whole(launch, signal.SIGTERM, wait=2.0) and not launch.pgid:
            self.terms_due.add(job_id)  # (no record yet: sent once there is one)
        self._signal_attached(runtime, signal.SIGTERM)

    def _signal_attached(self, runtime: dict[str, Any], sig: int) -> None:
        executor.signal_processes(list(runtime.get("attached", ())), sig)

    def _with_limit_kill(self, job_id: str, runtime: dict[str, Any]) -> dict[str, Any]:
        """`runtime` (changed, and returned) with the job's limit kill kept in memory
        (`limit_kills`), unless a kill written since ended the run: a later kill written
        (a qdel's, a qrerun's) then follows it, as when it was written (`_killed_runtime`:
        a qdel keeps its -29). The caller drops the mark once that is written."""
        if runtime.get("end_reason") is None:
            runtime.update(self.limit_kills.get(job_id, {}))
        return runtime

    def _write_limit_kill(self, job_id: str) -> None:
        """The job's limit kill kept in memory (`limit_kills`), if it has one, written, and
        the mark dropped; raises StoreWriteError while it cannot be (a full disk). Tried
        at each poll while the job runs, and before its end is (`_poll_job`,
        `_shepherd_gone`): that end, and its kept one (`_written_or_kept`), have its
        reason and Exit_status then."""
        if job_id not in self.limit_kills:
            return
        with self.store.transaction() as st:
            st.set_runtime(job_id, self._with_limit_kill(job_id, st.runtime(job_id) or {}))
        del self.limit_kills[job_id]
        self.log(LOG_JOB, "Job", job_id, "its kill is written")

    def poll(self) -> None:
        """Notice ended jobs, enforce walltime and kill_delay, and run a cycle when due."""
        # (the hooks' processes still waited for are not reaped here: their chains do)
        reaped = executor.reap(keep=self._hook_pids())  # (before the jobs: see kill_session)
        self._poll_ends_again()
        self._poll_deletes_again()
        self._poll_unwritten()
        self._poll_chains()
        self.poll_asking()
        if time.monotonic() - self._site_checked >= SITE_CHECK_INTERVAL:
            self.reload_site()
        now = self.clock()
        # What all the jobs ending in this poll may spend on their TMPDIRs together; the
        # rest is set aside and swept (one poll of many ends cost one's).
        self._removal_left = executor.REMOVE_SECONDS
        for job_id, launch in list(self.launches.items()):
            started = self.started.get(job_id)
            try:
                if not self._poll_job(job_id, launch, now, reaped=reaped):
                    break
            except Exception as exc:  # one job's fault stops no other's (tried next poll)
                self.launches.setdefault(job_id, launch)
                if started is not None:
                    self.started.setdefault(job_id, started)
                self._said_once(job_id, "handling the running job failed: "
                                f"{type(exc).__name__}: {exc}")
        if time.monotonic() >= self._usage_due:
            self._usage_due = time.monotonic() + USAGE_READ_EVERY
            self._read_usage()
        self._kill_overdue(now)
        try:
            self._end_waits(now)
        except Exception as exc:  # cycles, hooks and reservations below go on
            self.log(LOG_ERROR, "Server", self.host, "queueing the waiting jobs failed: "
                     f"{type(exc).__name__}: {exc}")
        try:
            self.router.poll(now)
        except Exception as exc:  # (as above)
            self.log(LOG_ERROR, "Server", self.host, "routing the route queues' jobs failed: "
                     f"{type(exc).__name__}: {exc}")
        if time.monotonic() >= self._sweep_due:
            more = executor.sweep_leftovers(self.home.tmp, SWEEP_SECONDS)
            self._sweep_due = time.monotonic() + (0.0 if more else SWEEP_EVERY)
        self.resvs.poll(now)
        self.control.poll()  # (suspended jobs waiting for their cpus to resume)
        self.periodic.poll(now)
        self._poll_schedulers()
        if self.starts_paused_until and not self._starts_paused(now):
            self.starts_paused_until = 0.0  # (the starts it dropped: every scheduler's)
            self.want_cycle = True
        if self.want_cycle:
            self.cycle()
        else:
            due = {n for n, t in self.sched_due.items() if t <= now} | {
                n for n, t in self.sched_next.items() if t <= now}
            if due:
                self.cycle(due)

    def _said_once(self, job_id: str, error: str) -> None:
        """`error` logged for running job `job_id` unless it was the last one logged for it:
        a poll tries again 20 times a second (until the job's end is seen)."""
        if self._poll_failed.get(job_id) != error:
            self._poll_failed[job_id] = error
            self.log(LOG_ERROR, "Job", job_id, error)

    def _kill_overdue(self, now: float) -> None:
        """SIGKILL to each killed job whose kill_delay is over at `now`; SIGTERM to one
        killed before its shepherd recorded its group, once it has (a job deleted as it
        started, on a loaded machine, was sent no SIGTERM and ran to its SIGKILL)."""
        for job_id in list(self.terms_due):
            launch = self.launches.get(job_id)
            if launch is None or job_id not in self.kills or not launch.alive():
                self.terms_due.discard(job_id)
            elif launch.resolve():
                self.terms_due.discard(job_id)
                executor.signal_whole(launch, signal.SIGTERM)
        for job_id, deadline in list(self.kills.items()):
            if job_id not in self.launches:
                del self.kills[job_id]
            elif now >= deadline:
                executor.signal_launch(self.launches[job_id], signal.SIGKILL)
                self._signal_attached(self.store.runtime(job_id) or {}, signal.SIGKILL)
                del self.kills[job_id]

    def _poll_job(self, job_id: str, launch: executor.Launch, now: float, *,
                  reaped: Collection[int] = frozenset()) -> bool:
        """One running job at a poll: its end noticed, or its limits enforced. False when
        its end cannot be written yet (a full disk): the poll stops there and the end is
        tried again at the next. `reaped`: the shepherds `executor.reap` collected just
        before (`_shepherd_gone`)."""
        ended = executor.JobExit.read(launch.status_file)
        if ended is None:
            if not launch.alive() and executor.JobExit.read(launch.status_file) is None:
                self._shepherd_gone(job_id, launch, reaped)
            else:
                with contextlib.suppress(StoreWriteError):  # (said at the kill)
                    self._write_limit_kill(job_id)
                self._check_walltime(job_id, now)
            return True
        started = self.started.get(job_id)
        try:
            self.store.probe_write()
            self._write_limit_kill(job_id)
            self._ended(job_id, ended)
        except StoreWriteError as exc:
            self.launches[job_id] = launch
            if started is not None:
                self.started[job_id] = started
            self.log(LOG_ERROR, "Job", job_id, f"job end not recorded yet: {exc.message}")
            return False
        self._poll_failed.pop(job_id, None)
        return True

    def _shepherd_gone(self, job_id: str, launch: executor.Launch,
                       reaped: Collection[int] = frozenset()) -> None:
        """The job's shepherd ended without a status (killed): the job is lost, as PBS's
        MoM loses a job. What is left of it is killed, so nothing runs untracked (all its
        session when the server has just reaped it, in `reaped`: `executor.kill_session`);
        the end hooks fire (to clean up after it: `_lost_end`); then it is requeued if
        rerunnable, else finished with Exit_status -4 (JOB_EXEC_INITABT). A shepherd that
        had not recorded the job (`executor.Launch.recorded`) never gave the job's process
        its word: nothing of the job ran, and the start failed (`_failed_start`), unless
        the run was being ended already (a qdel, a limit, a qrerun), which ends it as for
        a lost job."""
        killed = executor.kill_session(launch, reaped=reaped)
        self._write_limit_kill(job_id)  # (a full disk: all this again at the next poll)
        self._stop_chain(job_id, ended=True)  # (a qdel's execjob_preterm: the job is gone)
        attrs = self._running_job(job_id)
        runtime = self.store.runtime(job_id) or {}
        self._signal_attached(runtime, signal.SIGKILL)
        self.launches.pop(job_id, None)
        self.kills.pop(job_id, None)
        self.started.pop(job_id, None)
        if _never_started(runtime, launch):
            self._failed_start(job_id, attrs, f"its shepherd (pid {launch.shepherd}) ended "
                               f"before it started the job; {killed} process(es) left of it "
                               "killed")
            return
        why = (f"its shepherd (pid {launch.shepherd}) ended without the job's status; "
               f"{killed} process(es) left of it killed")
        self.log(LOG_ERROR, "Job", job_id, f"job lost: {why}")
        self._lost_end(job_id, attrs, why)

    def _lost_end(self, job_id: str, attrs: dict[str, Any], why: str) -> None:
        """A lost job's end hooks, then its end (`_lost_over`). A chain with a `user =
        pbsuser` hook runs while the server serves (`_end_hooks_from`), the job E/57."""
        ending = _Ending(None, {}, {}, then=functools.partial(self._lost_over, job_id, why),
                         record={"lost": why})
        if self._end_hooks_from(job_id, attrs, ending):
            self._lost_over(job_id, why, attrs, ending)

    def _lost_over(self, job_id: str, why: str, attrs: dict[str, Any], ending: _Ending) -> None:
        """A lost job, once its end hooks are over: ended when it was being ended (a qdel,
        a limit), else requeued if rerunnable, else finished."""
        self._lost_ends(job_id, attrs, f"Job requeued: it was lost ({why})",
                        f"Job lost and not rerunnable: {why}", end_hooks=False)

    def _running_job(self, job_id: str) -> dict[str, Any]:
        """A running job's stored attributes (one in `launches`: its row stays until its
        end is written; a qdel -x purges it after)."""
        attrs = self.store.job(job_id)
        if attrs is None:
            raise LookupError(f"running job {job_id} has no stored attributes")
        return attrs

    def _check_walltime(self, job_id: str, now: float) -> None:
        if job_id in self.kills:
            return
        attrs = self._running_job(job_id)
        if attrs.get("stime") is None or attrs.get("job_state") == "S":
            return  # (a suspended job's walltime stands still, as PBS's)
        elapsed = now - self.started.get(job_id, float(attrs["stime"])) - \
            self.control.suspended_seconds(job_id, now)
        over = lifecycle.over_limit("walltime", lifecycle.walltime_limit(attrs), elapsed)
        if over and not self._being_ended(job_id):
            self._kill_over(job_id, over)

    def _kill_over(self, job_id: str, over: lifecycle.OverLimit) -> None:
        """A job over its walltime or cput killed (`_kill`: on a full disk too), then
        logged."""
        self._kill(job_id, over.comment, over)
        self.log(LOG_JOB, "Job", job_id, over.comment)

    def _being_ended(self, job_id: str) -> bool:
        """Whether the job's run is being ended already (a qdel, a qrerun, a limit): a limit
        met then ends nothing more, and the first reason stands. `kills` says so only until
        the SIGKILL is sent; the runtime's end_reason until the end is seen (a limit met in
        between replaced a qdel's comment and Exit_status, and a qrerun's requeue)."""
        return job_id in self.kills or job_id in self.limit_kills or \
            (self.store.runtime(job_id) or {}).get("end_reason") is not None

    def _read_usage(self) -> None:
        """Read the running jobs' new samples (a stat of one small file each, read when
        its shepherd wrote a new one, `executor.sample_time`), kill a job whose processes
        together have used more CPU time than its cput, as PBS's MoM does at its samples,
        and save the samples every USAGE_SAVE_EVERY seconds."""
        for job_id in set(self._usage_seen) - set(self.launches):
            self.usage.pop(job_id, None)
            self._usage_ours.pop(job_id, None)
            del self._usage_seen[job_id]
        for job_id, launch in list(self.launches.items()):
            used, seen = executor.Usage.read(launch.status_file, self._usage_seen.get(job_id))
            if seen is not None:
                self._usage_seen[job_id] = seen
            if used is None or used == self.usage.get(job_id):
                continue
            self.usage[job_id] = used
            self._usage_unsaved.add(job_id)
            if job_id in self.kills:
                continue
            attrs = self.store.job(job_id, lean=True) or {}
            try:
                over = lifecycle.over_limit("cput", lifecycle.time_limit(attrs, "cput"),
                                            used.cput)
            except ValueError as exc:  # (checked at submission: only an old record)
                self.log(LOG_ERROR, "Job", job_id, f"its cput is not enforced: {exc}")
                continue
            if over and not self._being_ended(job_id):
                self._kill_over(job_id, over)
        if self._usage_unsaved and time.monotonic() >= self._usage_save_due:
            self._usage_save_due = time.monotonic() + USAGE_SAVE_EVERY
            unsaved = {j: self.usage[j] for j in self._usage_unsaved if j in self.usage}
            self._usage_unsaved.clear()
            try:
                self._usage_ours.update(save_usage(self.store, unsaved))
            except StoreWriteError as exc:  # (shown by qstat all the same; saved later)
                self._usage_unsaved.update(unsaved)
                self.log(LOG_ERROR, "Server", self.host, "the running jobs' resources_used "
                         f"are not saved yet: {exc.message}")

    def _ended(self, job_id: str, ended: executor.JobExit) -> None:
        self._stop_chain(job_id, ended=True)  # (a qdel's execjob_preterm: it ended meanwhile)
        attrs = self._running_job(job_id)
        runtime = self.store.runtime(job_id) or {}
        self._signal_attached(runtime, signal.SIGKILL)
        reason = runtime.get("end_reason")
        if "exit_status" in runtime:  # killed over a limit, or qdel's of an interactive job
            ended.exit_status = int(runtime["exit_status"])
            # (a note left as the job ended, after its shepherd's last look)
            (self.home.jobs / f"{job_id.split('.')[0]}.note").unlink(missing_ok=True)
        self.launches.pop(job_id, None)
        self.kills.pop(job_id, None)
        self.started.pop(job_id, None)
        # (an end hook run as the job's owner runs while the server serves: the end goes
        # on in `_ended_over` when the end hooks are over, here or at a later poll)
        ending = self._ending(job_id, attrs, ended,
                              then=functools.partial(self._ended_over, job_id, reason))
        if self._end_hooks_from(job_id, attrs, ending):
            self._ended_over(job_id, reason, attrs, ending)

    def _ended_over(self, job_id: str, reason: str | None, attrs: dict[str, Any],
                    ending: _Ending) -> None:
        """The end of a job whose processes ended, once its end hooks are over: requeued,
        or finished. Its ``end_reason`` is read again: a qdel -W force meanwhile
        (`_delete_exiting`) has set it. An exechost_periodic hook's request
        (`lifecycle.HOOK_ASKED`, `periodic.Periodic._job_actions`) is carried out at the
        job's own end only, and only when its end hooks asked for nothing."""
        assert ending.ended is not None
        runtime = self.store.runtime(job_id) or {}
        reason = runtime.get("end_reason") or reason
        asked = runtime.get(lifecycle.HOOK_ASKED)
        run_status = None  # (the R record's, for a periodic hook's rerun: the run's own)
        if ending.action is None and asked and not reason:
            # (an exechost_periodic hook's, kept till the job's own end: not one a qdel,
            # a qrerun or a limit's kill ended)
            ending.action, ending.asked_by = asked["action"], "exechost_periodic"
            if asked["action"] == "delete":
                ending.ended.exit_status = lifecycle.HOOK_ASKED_STATUS["delete"]
            else:
                run_status = ending.ended.exit_status
        if lifecycle.end_step(reason, ending.action) == lifecycle.REQUEUE:
            attrs.pop("Exit_status", None)  # (the run's; the job is not over)
            self._requeue(job_id, attrs, lifecycle.end_comment(reason, ending.asked_by),
                          run_status=run_status)
        else:
            self._finish_over(job_id, reason, attrs, ending)
            if ending.asked_by == "exechost_periodic":  # (once its end is written: a full
                # disk's retry at a later poll says it again else)
                self.log(LOG_ADMIN | LOG_JOB, "Job", job_id, lifecycle.HOOK_DELETED)

    def _ending(self, job_id: str, attrs: dict[str, Any], ended: executor.JobExit,
                then: Callable[[dict[str, Any], _Ending], None],
                record: dict[str, Any] | None = None) -> _Ending:
        """The end hooks of a job whose processes ended made ready: they see its
        Exit_status and resources_used as PBS's MoM sets them before its epilogue."""
        used = self._usage(job_id, attrs, ended)
        attrs["Exit_status"] = ended.exit_status
        given = {**(attrs.get("resources_used") or {}), **used}
        if attrs.get("stime") is not None:  # (it ran: as `lifecycle.finished` merges them)
            attrs["resources_used"] = dict(given)
        return _Ending(ended, used, given, then, record)

    def _usage(self, job_id: str, attrs: dict[str, Any], ended: executor.JobExit) -> dict[str, Any]:
        """What the host measured of the job's run, but what a hook set (`hook_set`)."""
        runtime = self.store.runtime(job_id) or {}
        keep = hook_set(attrs.get("resources_used") or {},  # (as PBS's MoM leaves them)
                        runtime.get("used") or {})
        return {k: v for k, v in {
            "walltime": units.format_duration(max(  # (its suspensions left out)
                0.0, ended.walltime - run_suspended(runtime, self.clock()))),
            "cput": units.format_duration(ended.cput),
            "mem": f"{ended.mem_kb}kb", "vmem": f"{ended.vmem_kb}kb",
            "ncpus": _ncpus(attrs.get("exec_vnode", ""))}.items() if k not in keep}

    def _end_hooks_from(self, job_id: str, attrs: dict[str, Any], ending: _Ending) -> bool:
        """execjob_epilogue, then execjob_end, from `ending.index` on. A reject or an error
        is only logged, but what a hook asked of the job still applies (pbs-behavior.md
        §1.4): `ending` keeps the last ``job.rerun()`` or ``job.delete()`` asked for, and
        the event that asked. A chain with a `user = pbsuser` hook
        (which the job's owner may make slow) runs while the server serves: the job is
        stored E in PBS's substate 57 (`lifecycle.RUNEPILOG`), the chain started, and
        False returned; `_poll_chains` goes on when it is over (`_end_event_done`). True
        once the end hooks are over."""
        while ending.index < len(lifecycle.END_EVENTS):
            event = lifecycle.END_EVENTS[ending.index]
            job, vnodes = Job(job_id, attrs), self._job_vnodes(attrs)
            start = self._owner_runs(event)
            if start:
                if (attrs.get("job_state"), attrs.get("substate")) != ("E", lifecycle.RUNEPILOG):
                    # (stored so, that a restart finds it E with its status file, or
                    # with what its `record` says, and ends it again, its end hooks run
                    # again: `_recover`)
                    attrs.update(job_state="E", substate=lifecycle.RUNEPILOG)
                    with self.store.transaction() as st:
                        st.put_job(job_id, attrs)
                        if ending.record is not None:
                            st.merge_runtime(job_id, ending=ending.record)
            outcome = self._job_event(job_id, event, start, functools.partial(
                self._end_event_done, job_id, ending), job=job, vnode_list=vnodes)
            if isinstance(outcome, _Chain):
                return False
            if stopped(outcome, self.stopping):
                self._end_stopped(job_id, attrs, ending, event)
                return False
            self._end_event_over(job_id, attrs, ending, outcome)
        return True

    def _end_stopped(self, job_id: str, attrs: dict[str, Any], ending: _Ending,
                     event: str) -> None:
        """A job's end hooks the runner gave up for the server's stop (the SIGTERM landed
        as they ran): not judged, and the job's end not carried on (no end, requeue or
        jobobit because the server was stopping). It is stored E in substate 57 with its
        `ending.record`, as a started end chain is (`_end_hooks_from`), which `stop_chains`
        stops: the next start ends it again, its end hooks run again (`_recover`), as
        PBS's MoM redoes a job's end after its restart."""
        attrs.update(job_state="E", substate=lifecycle.RUNEPILOG)
        with self.store.transaction() as st:
            st.put_job(job_id, attrs)
            if ending.record is not None:
                st.merge_runtime(job_id, ending=ending.record)
        self.log(LOG_JOB, "Job", job_id, f"its {event} hooks were stopped: the server is "
                 "stopping; the job ends, its end hooks run again, when it starts again")

    def _end_event_over(self, job_id: str, attrs: dict[str, Any], ending: _Ending,
                        outcome: Outcome) -> None:
        self._apply_host_changes(job_id, attrs, outcome)
        if outcome.job_action:
            ending.action, ending.asked_by = outcome.job_action, outcome.event
        ending.index += 1

    def _end_event_done(self, job_id: str, ending: _Ending, outcome: Outcome) -> None:
        """A started end chain is over (`_poll_chains`): its outcome carried out on the job
        as stored now, the rest of its end hooks fired, and its end carried on."""
        attrs = self.store.job(job_id)
        if attrs is None or attrs.get("job_state") != "E":  # (not expected: logged)
            self.log(LOG_ERROR, "Job", job_id, f"its {outcome.event} hooks ended with the "
                     "job no longer exiting; their outcome is not used")
            return
        self._end_event_over(job_id, attrs, ending, outcome)
        if self._end_hooks_from(job_id, attrs, ending):
            self._carry_on(job_id, attrs, ending)

    def _carry_on(self, job_id: str, attrs: dict[str, Any], ending: _Ending,
                  state: str = "E") -> bool:
        """The job's end carried on once its end hooks are over (`ending.then`): started
        ones (the job stored E), or those of a start a hook ended (`_finish`'s `kept_in`:
        the job stored R); one that cannot be written is tried again at later polls
        (`_written_or_kept`) while the job is stored in `state`, on the attributes as the
        hooks left them, the hooks not run again. False then."""
        return self._written_or_kept(job_id, attrs, lambda kept: ending.then(kept, ending),
                                     state, "job end")

    def _written_or_kept(self, job_id: str, attrs: dict[str, Any],
                         write: Callable[[dict[str, Any]], None], state: str,
                         what: str) -> bool:
        """`write` (the job's end, or its requeue) carried out on the job's attributes.
        When it cannot be written (a full disk), it is kept (`unwritten`, the job stored
        in `state` meanwhile) and tried again at a later poll (`_poll_unwritten`) on a copy
        of `attrs` as they are now; before trying, the server checks with a one-row write
        that the database takes changes. False then."""
        kept = copy.deepcopy(attrs)  # (`write` changes them before it writes)
        try:
            self.store.probe_write()
            write(attrs)
        except StoreWriteError as exc:
            if job_id not in self.unwritten:  # (said once)
                self.log(LOG_ERROR, "Job", job_id, f"{what} not recorded yet: "
                         f"{exc.message}; tried again at a later poll")
            self.unwritten[job_id] = _Unwritten(kept, write, state, what)
            return False
        if self.unwritten.pop(job_id, None) is not None:
            self.log(LOG_JOB, "Job", job_id, f"{what} recorded")
        return True

    def _poll_unwritten(self) -> None:
        """The changes kept by `_written_or_kept` tried again, in order, until one cannot
        be written yet."""
        for job_id, kept in list(self.unwritten.items()):
            if (self.store.job(job_id) or {}).get("job_state") != kept.state:
                del self.unwritten[job_id]  # (written after all, or the job gone on: qdel)
                continue
            try:
                if not self._written_or_kept(job_id, copy.deepcopy(kept.attrs), kept.write,
                                             kept.state, kept.what):
                    return
            except Exception as exc:  # one job's fault stops no other's: as `_poll_chains`
                del self.unwritten[job_id]
                self.log(LOG_ERROR, "Job", job_id, f"handling its {kept.what} failed: "
                         f"{type(exc).__name__}: {exc}")

    def _ends_alone(self, job_id: str) -> bool:
        """Whether the job's end hooks run while the server serves (`chains`), its end
        after them waits for room to be written (`unwritten`), or a restart ends it again
        (`ends_again`): its end goes on by itself, whatever a request asks meanwhile. (A
        failed start's requeue, or the end of a start a hook ended, that waits for room does
        not: the job is R with no launch, as a job its prologue left, for a qdel.)"""
        chain = self.chains.get(job_id)
        return chain is not None and chain.event in lifecycle.END_EVENTS or \
            job_id in self.unwritten and self.unwritten[job_id].state == "E" or \
            job_id in self.ends_again

    def _delete_exiting(self, caller: Caller, job_id: str, force: bool, purge: bool,
                        killed: dict[str, PbsError | None] | None) -> None:
        """qdel of a job whose end hooks run (`chains`): nothing is killed, as PBS's MoM
        running a job's epilogue refuses the server's signal but a SIGKILL. A plain qdel
        is refused (`Request invalid for state of job`, 15016); a forced one (``-W
        force``, whose SIGKILL that MoM takes) is answered, logged and written (its D
        record), and the job ends as its end hooks leave it, but deleted: a ``job.rerun()``
        they ask for does not requeue it, as for a running job's qdel (its runtime's
        ``end_reason``, read when they are over: `_ended_over`, `_lost_over`); a qrerun's
        requeue stands, as in `_delete_requeued`. A job deleted already (a forced qdel
        before, the qdel or the reservation's end that ended its run, a qdel while a
        qrerun ended it, or one that stopped its prologue) is answered, and nothing is
        logged or written again: one deletion, one D record."""
        if not force:
            self.log(LOG_JOB, "Job", job_id, f"delete at request of {caller.user}@"
                     f"{self.host} refused: its end hooks run")
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        if killed is not None and job_id in killed:
            return
        # (a forced qdel before; a qdel, or its reservation's end, that ended its run;
        # a qdel while a qrerun ended it: `_delete_requeued`)
        if self._deleted_already(self.store.runtime(job_id) or {}):
            if killed is not None:
                killed[job_id] = None
            if purge:  # (its -x counts all the same)
                self._purge_at_end(caller, job_id)
            return
        self._record_deletion(caller, job_id, purge, killed, note="; its end hooks run, "
                              "and it ends when they are over", end_reason="unless_set")

    def _finish(self, job_id: str, attrs: dict[str, Any], ended: executor.JobExit,
                comment: str | None = None, end_hooks: bool = True,
                used: dict[str, Any] | None = None, kept_in: str | None = None,
                unstarted: bool = False) -> None:
        """The job is over: epilogue and end hooks (unless run already: `used` is then what was
        measured but what they set, `_Ending.kept`), then its record (its E; an A with its comment
        when `unstarted`: its execjob_begin hooks deleted it, no S written), then jobobit; then a
        job a qdel -x ended is purged. An end chain with a `user = pbsuser` hook runs while the
        server serves (`_end_hooks_from`), the job E/57: the rest is done when it is over. With
        `kept_in` (a start a hook ended, or one that can never work, the job stored R with no
        launch: `_refused_start`, `_could_not_start`), an end that cannot be written after the end
        hooks (a full disk) is kept and written at a later poll while the job is stored so
        (`_carry_on`), and the cycle goes on; it failed the cycle, the job left R, its cpus held.
        End hooks that ran in this server, their end not written (`ends_run`), do not run again: the
        job ends as they left it. A run not begun (`lifecycle.began`: a qdel of a job its begin
        hooks refused, its requeue unwritten) ends `unstarted` too: with no record at all if
        its deletion (its D) was written (`_record_deletion`), as a queued job's qdel."""
        unstarted = unstarted or (bool(attrs.get("exec_vnode")) and
                                  not lifecycle.began(self.store.runtime(job_id)))
        if end_hooks and attrs.get("exec_vnode") and job_id in self.ends_run:
            attrs, used = copy.deepcopy(self.ends_run[job_id])  # (the next qdel's end)
        elif end_hooks and attrs.get("exec_vnode"):
            ending = self._ending(job_id, attrs, ended, then=functools.partial(
                self._finish_over, job_id, comment, unstarted=unstarted), record={
                    "exit_status": ended.exit_status, "start_error": ended.start_error,
                    "comment": comment, **({"unstarted": True} if unstarted else {})})
            if not self._end_hooks_from(job_id, attrs, ending):
                return
            used = ending.kept(attrs)
            self.ends_run[job_id] = (copy.deepcopy(attrs), used)  # (till their end is written)
            if kept_in is not None:
                self._carry_on(job_id, attrs, ending, kept_in)
                return
        runtime = self.store.runtime(job_id) or {}
        purged_by = runtime.get("purge")
        if not comment and ended.could_not_start and \
                interactive_jobs.QSUB_GONE in ended.start_error:
            # OpenPBS 23.06's comment (checked): `Job run at ... and failed`, Exit_status -1
            self.log(LOG_JOB | LOG_ERROR, "Job", job_id, f"could not start: {ended.start_error}")
        elif not comment and ended.could_not_start:  # the shepherd failed
            comment = f"Job could not start: {ended.start_error or 'unknown reason'}"
        elif not comment and ended.exit_status == executor.EXEC_LOST:
            comment = ("Job lost: its end was never seen"
                       + (f" ({ended.start_error})" if ended.start_error else ""))
        now = int(self.clock())
        lifecycle.finished(attrs, ended.exit_status, now,
                           self._usage(job_id, attrs, ended) if used is None else used, comment)
        with self.store.transaction() as st:
            st.put_job(job_id, attrs)
            # (a run not begun keeps that, for its array's qrerun: `_rerun_array`)
            st.set_runtime(job_id, {"began": False} if unstarted else None)
            for name, _ in parse_exec_vnode(attrs.get("exec_vnode", "")):
                node = st.get("node", name)
                if node is not None:
                    node["last_used_time"] = now
                    st.put("node", name, node)
        self._forget_run(job_id)
        self.log(LOG_JOB_USAGE, "Job", job_id, f"Exit_status={ended.exit_status} "
                 + " ".join(f"resources_used.{k}={v}"
                            for k, v in (attrs.get("resources_used") or {}).items()))
        if unstarted and not runtime.get("deleted"):  # (its D was its record)
            self.accounting.aborted(job_id, comment or "")
        elif not unstarted:
            self.accounting.ended(job_id, attrs, runtime)
        self._remove_run_files(job_id, tmpdir=False)
        self._track_states()
        self._event("jobobit", job=Job(job_id, attrs))
        if attrs.get("array_id") is not None:
            self.arrays.subjob_over(job_id, attrs)
        self._trigger(str(attrs.get("queue") or ""))
        self._resolve_depend([job_id])
        if isinstance(purged_by, str):  # (qdel -x: its history goes as soon as it is made)
            self._purge(purged_by, job_id)
        # Last: whatever the job left in its TMPDIR, the job's end is complete before.
        self._remove_tmpdir(job_id)

    def _finish_over(self, job_id: str, comment: str | None, attrs: dict[str, Any],
                     ending: _Ending, unstarted: bool = False) -> None:
        """`_finish`, once the job's end hooks are over."""
        assert ending.ended is not None
        self._finish(job_id, attrs, ending.ended, comment=comment, end_hooks=False,
                     used=ending.kept(attrs), unstarted=unstarted)

    def _remove_run_files(self, job_id: str, tmpdir: bool = True) -> None:
        """What the server made for one run of the job, gone when the run ends (a requeue
        as well as the job's end, as PBS's MoM removes a job's files at the end of each
        run; a job deleted while queued, once requeued, has none left): its script,
        nodefile, shepherd and status files in jobs/ (and the room a shepherd killed
        before it recorded its job had for that record: `executor._Reserved`), and with
        `tmpdir` its TMPDIR."""
        seq = job_id.split(".")[0]
        for leftover in (self.home.jobs / f"{seq}.status", self.home.jobs / f"{seq}.SC",
                         self.home.jobs / f"{seq}.nodes", self.home.jobs / f"{seq}.shepherd",
                         self.home.jobs / f"{seq}.shepherd.tmp"):
            try:
                leftover.unlink(missing_ok=True)  # jobs/ is the server's: no link can be there
            except OSError as exc:  # (the job's end or requeue is recorded all the same)
                self.log(LOG_ERROR, "Job", job_id, f"{leftover} is left: {exc}")
        if tmpdir:
            self._remove_tmpdir(job_id)

    def _remove_tmpdir(self, job_id: str) -> None:
        """The job's TMPDIR removed; what is not gone within this poll's share of
        REMOVE_SECONDS is set aside and swept a slice a poll."""
        started = time.monotonic()
        problem = executor.remove_job_dir(self.home.tmp / f"pbs.{job_id}",
                                          max(0.0, self._removal_left))
        self._removal_left -= time.monotonic() - started
        if problem:
            self.log(LOG_ERROR, "Job", job_id, f"its TMPDIR is left: {problem}")
        self._sweep_due = 0.0

    def _hook_pids(self) -> frozenset[int]:
        """The processes of the started hook chains (`chains`, `asking`) waited for now."""
        pendings = [c.pending for c in self.chains.values()] + [
            a.pending for a in self.asking] + self._notice_pending()
        return frozenset(p.pid for p in pendings if p.pid)

    def stop_chains(self) -> None:
        """The started chains stopped (their hooks' process groups killed), as the server
        stops: a job whose prologue ran stays R with no launch, which the next start
        requeues; one whose end hooks ran stays E with its status file, which the next
        start ends again, its end hooks run again (`_recover`); a qdel waiting for a
        job's execjob_preterm is refused, and the job runs on. A subjob's execjob_preterm
        chain that an array's or a range's qdel waits for (`_Chain.array_qdel`) is the
        exception: that qdel recorded its part before the chain started (the array's D,
        its queued indices gone), so the subjob is marked to be deleted at the next start
        (`_poll_deletes_again`), and the qdels waiting are told so; they were told "not
        deleted" while the array's deletion stood, and the subjob ran on to its end. The
        socket server calls this before it answers the requests still waiting (their
        answers are these), and `close` again (nothing left then). A request waiting for
        its hooks (`asking`: a qmgr's, a pbsnodes') is refused as its hooks' stop refuses
        it (`STOPPING`), nothing of it written; every later chain it asks for is given up
        so. The server's own vnode changes whose modifyvnode hooks are still to run
        (`notices`) are made already: their hooks are not told, and that is logged."""
        for pending in self._notice_pending():
            pending.cancel()
        if self.notices:
            names = sorted({n.name for n in self.notices})
            count, self.notices = len(self.notices), collections.deque()
            self._waiting = {}
            self.log(LOG_SYSTEM, "Server", self.host, f"the modifyvnode hooks of {count} "
                     f"vnode change(s) the server made were not run, the server stopping: "
                     f"{', '.join(names)}")
        for asking in self.asking:
            asking.pending.cancel()
        asking_list, self.asking = self.asking, []
        for asking in asking_list:
            self._resume(asking, None)
        for job_id in list(self.chains):
            chain = self.chains.pop(job_id)
            chain.pending.cancel()
            if chain.event == "execjob_preterm" and chain.array_qdel is not None and \
                    self._delete_at_start(job_id, chain, chain.array_qdel):
                continue
            chain.answer(PbsError(PBSE_SYSTEM, "System error: the server is stopping; the "
                                               "job was not deleted", obj=job_id))
            then = {"execjob_prologue": "the job is requeued when it starts again",
                    "execjob_preterm": "the qdel waiting for them is refused, and the job "
                                       "runs on"}.get(
                chain.event, "the job ends, its end hooks run again, when it starts again")
            self.log(LOG_JOB, "Job", job_id, f"its {chain.event} hooks were stopped: the "
                     f"server is stopping; {then}")

    def _delete_at_start(self, job_id: str, chain: _Chain, caller: Caller) -> bool:
        """A subjob's execjob_preterm chain, given up for the stop, that an array's qdel
        waits for (`stop_chains`): the subjob marked to be deleted at the next start (a
        -x of a waiting qdel kept: `_purge_at_end`), the qdels told so, and logged;
        False, nothing told, when the mark could not be written (a full disk): the qdel
        is refused as not done then, the subjob running on."""
        try:
            with self.store.transaction() as st:
                marks: dict[str, Any] = {"delete_at_start": caller.uid}
                if (purger := chain.purger()) is not None:
                    marks["purge"] = f"{purger.user}@{self.host}"
                st.merge_runtime(job_id, **marks)
        except Exception as exc:  # noqa: BLE001 - told as a refusal, and logged
            self.log(LOG_ERROR, "Job", job_id, "marking it to be deleted at the next start "
                     f"failed: {type(exc).__name__}: {exc}")
            return False
        chain.answer(PbsError(PBSE_SYSTEM, "System error: the server is stopping; the "
                              f"deletion is recorded, and its running subjob {job_id} is "
                              "deleted at the latest when the server starts again", obj=job_id))
        self.log(LOG_JOB, "Job", job_id, "its execjob_preterm hooks were stopped: the "
                 "server is stopping; its array's qdel stands, and the job is deleted "
                 "when the server starts again")
        return True

    def close(self) -> None:
        """Stop the started hook chains and the scheduler processes, and close the
        database and the log; each step runs even if one before it fails (a full disk),
        and the first failure is raised last."""
        failure: Exception | None = None
        for step in (self.stop_chains, self.sched_procs.stop_all,
                     lambda: logging.getLogger("pbsplug.hook").removeHandler(self.hook_log),
                     self.store.close, self.log.close, self.accounting.close):
            try:
                step()
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure


class _StillFits:
    """Whether decisions a scheduler process made on an older snapshot still fit the vnodes
    as they are (and as the decisions before them in the same batch took them)."""

    def __init__(self, vnodes: dict[str, Vnode], queues: dict[str, dict[str, Any]]):
        self.vnodes = vnodes
        self.queues = queues
        self.taken: dict[str, int] = {}

    def check(self, attrs: dict[str, Any],
              chunks: list[tuple[str, dict[str, int | str]]]) -> str | None:
        part = (self.queues.get(str(attrs.get("queue"))) or {}).get("partition")
        wanted: dict[str, int] = {}
        rest: set[str] = set()  # the rest of a host held whole (exclhost): nothing taken
        for name, res in chunks:
            if not res:
                rest.add(name)
                continue
            wanted[name] = wanted.get(name, 0) + int(resource_amount(
                "ncpus", res.get("ncpus", 0)) or 0)
        for name in [*wanted, *rest]:
            vnode = self.vnodes.get(name)
            if vnode is None:
                return f"vnode {name} is gone"
            if (vnode.partition or None) != (part or None):
                return f"vnode {name} is not in partition {part or '(none)'} any more"
        for name, ncpus in wanted.items():
            vnode = self.vnodes[name]
            if vnode.states & UNUSABLE_STATES:
                return f"vnode {name} is {vnode.state}"
            free = int(resource_amount("ncpus", vnode.resources_available["ncpus"]) or 0) - \
                int(resource_amount("ncpus", vnode.resources_assigned["ncpus"]) or 0) - \
                self.taken.get(name, 0)
            if free < ncpus:
                return f"vnode {name} has {free} CPUs free now, not {ncpus}"
        for name, ncpus in wanted.items():
            self.taken[name] = self.taken.get(name, 0) + ncpus
        return None


def _attribute_list(attrs: Any) -> frozenset[str] | None:
    """A request's list of attribute names (None: every attribute)."""
    if attrs is None:
        return None
    if not isinstance(attrs, list) or not all(isinstance(a, str) for a in attrs):
        raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value attrs: "
                       "expected a list of attribute names")
    return frozenset(attrs)


def _no_subjob_room(attrs: dict[str, Any]) -> bool:
    """Whether queued array `attrs` (none of its subjobs runs: it has not begun) may start
    none: its ``max_run_subjobs`` is 0."""
    try:
        return int(attrs["max_run_subjobs"]) <= 0
    except (KeyError, TypeError, ValueError):
        return False


def _without_held_back(attrs: dict[str, Any]) -> dict[str, Any]:
    """`attrs` without the comment an older pbsplug wrote when a threshold held the job
    back in W or in its dependency's hold (`limits.held_back`; `Engine._release_held_back`:
    its thresholds counted jobs in Q only, and the comment is wrong now)."""
    if limits.held_back(attrs.get("comment")):
        attrs.pop("comment")
    return attrs


def _stopped_queues(queues: dict[str, dict[str, Any]]) -> set[str]:
    """The execution queues not started (qstop, a reservation's before it begins), whose
    queued jobs PBS's scheduler comments `QUEUE_NOT_STARTED` (checked for both); not a route
    queue's, the server's to pass on."""
    return {name for name, queue in queues.items()
            if queue.get("started") is False and not is_route_queue(queue)}


def state_count(counts: dict[str, int]) -> str:
    """``Transit:0 Queued:1 Held:0 Waiting:0 Running:2 Exiting:0 Begun:0`` from the number
    of jobs in each state."""
    return " ".join(f"{name}:{counts.get(letter, 0)}" for name, letter in _STATE_NAMES)


def default_vnodes(host: str) -> dict[str, dict[str, Any]]:
    """One vnode per NUMA node, or one for the machine: CPUs and memory as Linux reports."""
    numa = sorted(Path("/sys/devices/system/node").glob("node[0-9]*"),
                  key=lambda p: int(p.name[4:]))
    allowed = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    nodes = {}
    for path in numa if len(numa) > 1 else []:
        cpus = _cpulist((path / "cpulist").read_text())
        if allowed is not None:
            cpus &= allowed
        mem_kb = 0
        for line in (path / "meminfo").read_text().splitlines():
            if "MemTotal:" in line:
                mem_kb = int(line.split()[-2])
        if cpus:
            name = f"{host}[{path.name[4:]}]"
            nodes[name] = _vnode_attrs(host, name, len(cpus), mem_kb * 1024)
    if not nodes:
        nodes[host] = _vnode_attrs(host, host, executor.cpu_count(), executor.memory_bytes())
    return nodes


def _vnode_attrs(host: str, name: str, ncpus: int, mem: int) -> dict[str, Any]:
    return {"state": "free", "Mom": host, "ntype": "PBS", "pcpus": ncpus,
            "resources_available": {"ncpus": ncpus, "mem": units.format_size(mem),
                                    "host": host, "vnode": name},
            "sharing": "default_shared", "resv_enable": True,
            # seed 004: both set when the vnode is created (PBS never shows the epoch)
            "last_state_change_time": int(time.time()), "last_used_time": int(time.time())}


def _cpulist(text: str) -> set[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            cpus.update(range(int(a), int(b) + 1))
        elif part:
            cpus.add(int(part))
    return cpus


@functools.cache
def _hints(handler: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(handler)
    except Exception:  # noqa: BLE001 - an annotation only a type checker resolves: no check
        return {}


def _one_line(text: str) -> str:
    """The first line of a message, for a log line of its own."""
    return (text.strip().splitlines() or [""])[0]


def _check_arguments(handler: Callable[..., Any], args: dict[str, Any]) -> None:
    """A request's arguments have the types its handler declares (a raw request may send
    anything): PBS's 15004 naming the argument otherwise, before the handler runs."""
    hints = _hints(getattr(handler, "__func__", handler))
    for name, value in args.items():
        if isinstance(value, (list, dict)) and len(value) > MAX_REQUEST_ITEMS:
            # A request is limited in work too, not only in bytes: 500,000 ids held the
            # server for seconds.
            raise PbsError(PBSE_IVALREQ, f"Invalid request: argument {values.shown(name)} "
                           f"has {len(value)} items, over the limit of {MAX_REQUEST_ITEMS}")
        hint = hints.get(name)
        if hint is not None and not _fits(value, hint):
            raise PbsError(PBSE_IVALREQ, f"Invalid request: argument {values.shown(name)} "
                           f"is not {hint}".replace("typing.", ""))


def _fits(value: Any, hint: Any) -> bool:
    origin, params = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, p) for p in params)
    if hint is type(None):
        return value is None
    if origin is list or hint is list:
        return isinstance(value, list) and (not params or all(_fits(v, params[0])
                                                              for v in value))
    if origin is dict or hint is dict:
        return isinstance(value, dict) and all(isinstance(k, str) for k in value)
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is str:
        if not isinstance(value, str):
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    return True


#: The most lines a job's PBS_NODEFILE has (one per MPI rank), on one machine.
MAX_RANKS = 1 << 20


def _admin_resources(attrs: dict[str, Any], job_id: str | None = None) -> None:
    """15003 for a request naming one of `ADMIN_RESOURCES`, in PBS's words (two blanks)."""
    for name in ADMIN_RESOURCES:
        if name in (attrs.get("Resource_List") or {}):
            raise PbsError(PBSE_ATTRRO, "Cannot set attribute, read only or insufficient "
                           f"permission  Resource_List.{name}", obj=job_id)


def _soft_within_walltime(current: dict[str, Any], attrs: dict[str, Any], job_id: str) -> None:
    """A soft_walltime over the job's walltime, as qalter would leave them: 15014, as
    OpenPBS 23.06 refuses it (checked: ``qalter: Illegal attribute or resource value
    <id>``; the engine names the resource)."""
    asked = attrs.get("Resource_List") or {}
    if not {"soft_walltime", "walltime"} & asked.keys():
        return
    after = {**(current.get("Resource_List") or {}), **asked}
    soft, hard = after.get("soft_walltime"), after.get("walltime")
    if soft is not None and hard is not None and \
            units.parse_duration(soft) > units.parse_duration(hard):
        raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value "
                       "Resource_List.soft_walltime", obj=job_id)


def _resources_set(outcome: Outcome) -> tuple[str, ...]:
    """The names of the Resource_List entries the event's hooks set on its job."""
    changed = (outcome.changes.get("job") or {}).get("Resource_List")
    return tuple(changed) if isinstance(changed, dict) else ()


def _listed(value: Any) -> tuple[Any, ...]:
    """A plugin's list of names as a tuple, none for what is not a list or tuple."""
    return tuple(value) if isinstance(value, (list, tuple, frozenset, set)) else ()


def _ranks(chunks: Iterable[units.Chunk]) -> int:
    """A job's MPI ranks: each chunk's mpiprocs, one at least (a value that is no number,
    which its check refuses, counts one)."""
    total = 0
    for chunk in chunks:
        try:
            total += chunk.count * max(1, int(chunk.resources.get("mpiprocs", 1) or 1))
        except (TypeError, ValueError):
            total += chunk.count
    return total


def _shell_path(spec: Any, host: str) -> str | None:
    """qsub -S ``path[@host][,path@host...]``: the entry for this host, else the one
    without a host (PBS's rule)."""
    default = None
    for item in str(spec or "").split(","):
        path, _, where = item.strip().partition("@")
        if where == host and path:
            return path
        if not where and path:
            default = path
    return default


def _killed_runtime(runtime: dict[str, Any], why: str, now: float,
                    over: lifecycle.OverLimit | None = None,
                    exit_status: int | None = None) -> dict[str, Any]:
    """`runtime` (changed, and returned) with a kill of its run (`Engine._kill`) at `now`:
    its end reason `why`, and its Exit_status: a limit's, `exit_status`, or the first
    kill's kept (a qdel during a walltime kill keeps -29) unless this one requeues the run.
    ``killed_at`` is the first kill's time, which its SIGKILL is due after, as `kills`
    keeps it: a server that starts again after a stop resumes the kill from it
    (`Engine._kill_due`)."""
    # (an end_reason: this run is being killed already)
    kept = runtime.get("end_reason") is not None and why != "requeue" and \
        "exit_status" in runtime
    if runtime.get("end_reason") is None or "killed_at" not in runtime:
        runtime["killed_at"] = now
    runtime["end_reason"] = why
    if over is not None:
        runtime["exit_status"] = over.exit_status
    elif exit_status is not None and not kept:
        runtime["exit_status"] = exit_status
    elif not kept:
        runtime.pop("exit_status", None)
    return runtime


def _submitted_runtime(runtime: Any) -> dict[str, Any] | None:
    """Of a job's runtime, what its next run starts with after a requeue: the command it
    was submitted with (``qsub -- cmd``'s argv) and a qdel -x's ``purge`` still to do
    (`Engine._purge_at_end`), nothing of the run that ended."""
    if not isinstance(runtime, dict):
        return None
    kept = {k: runtime[k] for k in ("argv", "interactive", "purge") if k in runtime}
    return kept if isinstance(kept.get("argv", []), list) and kept else None


def _never_started(runtime: Mapping[str, Any] | None, launch: executor.Launch) -> bool:
    """Whether a run whose shepherd is gone never started its job: the shepherd left no
    record of it (its process never got the word to go), and nothing was ending the run
    (a qdel, a limit, a qrerun): a failed start (`Engine._failed_start`)."""
    return (runtime or {}).get("end_reason") is None and \
        executor.Launch.recorded(launch.status_file, launch.tmpdir) is None


def _accepted_at_stop(subjobs: list[str]) -> str:
    """The answer of an array's qdel the server's stop refused (`STOPPING`, the deletion not
    recorded) whose running `subjobs`' execjob_preterm hooks had accepted it: they are
    deleted at the next start (`Engine._keep_accepted`), said as the answer of a qdel whose
    subjob's chain the stop gave up says it (`Engine._delete_at_start`)."""
    those, are = (f"subjobs {', '.join(subjobs)}", "are") if len(subjobs) > 1 else \
        (f"subjob {subjobs[0]}", "is")
    return (f"{STOPPING}; the deletion is not recorded, but its running {those}, whose "
            f"execjob_preterm hooks accepted it, {are} deleted at the latest when the "
            "server starts again")


def _stored_launch(runtime: Any) -> executor.Launch | None:
    """A running job's launch as stored in its runtime, None if it has none yet; raises
    TypeError or ValueError when the runtime is not JSON or its launch not a launch."""
    if runtime is None:
        return None
    if not isinstance(runtime, dict) or Store.unreadable(runtime):
        raise ValueError("the job's runtime is not a JSON object")
    if not runtime.get("launch"):
        return None
    if not isinstance(runtime["launch"], dict):
        raise TypeError("the launch is not a mapping")
    launch = executor.Launch(**runtime["launch"])
    kinds: dict[str, type | tuple[type, ...]] = {
        "shepherd": int, "started": (int, float), "pgid": int, "status_file": str,
        "tmpdir": str, "boot": str}
    for key, kind in kinds.items():
        value = getattr(launch, key)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise TypeError(f"the launch's {key} is {value!r}")
    return launch


def _epoch(value: Any) -> int:
    """A stored number (a start time, a vnode's ncpus) as an int; 0 for none or a bad one."""
    try:
        return int(float(value)) if value is not None else 0
    except (TypeError, ValueError, OverflowError):
        return 0


def _without(attrs: dict[str, Any], problems: dict[str, str]) -> dict[str, Any]:
    """A copy of `attrs` without the values `problems` names (``Resource_List.mem`` names
    one resource)."""
    fixed = dict(attrs)
    for key in problems:
        name, _, res = key.partition(".")
        if res and isinstance(fixed.get(name), dict):
            fixed[name] = {k: v for k, v in fixed[name].items() if k != res}
        else:
            fixed.pop(name, None)
    return fixed


def used_attrs(used: executor.Usage, attrs: dict[str, Any]) -> dict[str, Any]:
    """A running job's resources_used from its last sample, as PBS's MoM reports them."""
    return {"cput": units.format_duration(used.cput), "mem": f"{used.mem_kb}kb",
            "ncpus": _ncpus(attrs.get("exec_vnode", "")), "vmem": f"{used.vmem_kb}kb",
            "walltime": units.format_duration(used.walltime)}


def hook_set(stored: dict[str, Any], saved: dict[str, Any]) -> set[str]:
    """The job's resources_used a hook set: those not as the server last saved them
    (`saved`, kept in the job's runtime). PBS's MoM leaves such a value as the hook set it
    ("don't conflict with hook setting a value"), and so does the server."""
    return {name for name, value in stored.items() if saved.get(name) != value}


def save_usage(store: Store, used: dict[str, executor.Usage]) -> dict[str, dict[str, Any]]:
    """Write the running jobs' resources_used from their samples (`used`), but those a
    hook set (`hook_set`): one transaction for all of them, not one a job. Returns what
    was saved for each job, as its runtime keeps it."""
    saved = {}
    with store.transaction() as st:
        for job_id, usage in used.items():
            attrs = st.job(job_id, lean=True)
            if attrs is None or attrs.get("job_state") != "R" or st.unreadable(attrs):
                continue
            runtime = st.runtime(job_id) or {}
            stored = attrs.get("resources_used") or {}
            keep = hook_set(stored, runtime.get("used") or {})
            saved[job_id] = {k: v for k, v in used_attrs(usage, attrs).items()
                             if k not in keep}
            attrs["resources_used"] = {**stored, **saved[job_id]}
            runtime["used"] = saved[job_id]
            st.put_job(job_id, attrs, keep_env=True)
            st.set_runtime(job_id, runtime)
    return saved


def _home_of(attrs: dict[str, Any]) -> str:
    """The home folder of the job's owner (the server's user's, when the server is not
    root and the owner is unknown), where the job starts; "" for none, which fails it."""
    user = attrs.get("euser") or pwd.getpwuid(os.getuid()).pw_name
    try:
        return pwd.getpwnam(user).pw_dir
    except KeyError:
        return ""


def _cpu_limit(attrs: dict[str, Any]) -> int | None:
    """Each of the job's processes' RLIMIT_CPU: the smaller of its cput and pcput, as PBS's
    MoM sets it (none, or 0: no limit)."""
    given = [n for n in (lifecycle.time_limit(attrs, r) for r in ("cput", "pcput")) if n]
    return min(given) if given else None


def _ncpus(exec_vnode: str) -> int:
    return sum(int(res.get("ncpus", 0) or 0) for _, res in parse_exec_vnode(exec_vnode))
