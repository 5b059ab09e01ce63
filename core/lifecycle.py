"""One job lifecycle: what each event's outcome does to a job, written once.

The local engine and the simulator both carry a job through the same steps, in the same
order, and ask this module what each hook outcome means for it (pbs-behavior.md §1.3-1.4):

0. After ``queuejob`` (and after qalter's or qmove's change), `completed_request`: the
   server's defaults, limits, conversion and sums of the job's Resource_List.
1. ``runjob`` on the server: a refusal keeps the job queued with PBS's comment
   (`runjob_refused`); its changes still apply.
2. `started`: the job is running (state R, run_count + 1, stime).
3. `START_EVENTS` on the execution host, in order: `start_step` says whether the job goes on,
   is requeued, or is deleted; `abort_first` whether execjob_abort fires before that.
4. The job runs until it ends or its walltime is exceeded (`walltime_exceeded`: strictly
   more than the limit, as PBS's MoM checks).
5. `END_EVENTS` (epilogue, end): a reject or an error is only logged, but a ``job.rerun()``
   asked by one of them requeues the job unless it was being deleted (`end_step`).
6. `requeued` or `finished` set the job's attributes. A job requeued more than
   `MAX_RUN_COUNT` times is held (PBS: run_count > 20, hold s).

Nothing here does I/O or reads a clock: callers pass ``now``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from . import units
from .events import DELETE
from .objects import PbsObject, apply_to_attrs
from .units import format_duration, parse_duration_cached

#: PBS holds a job that failed to start this many times (run_count > 20).
MAX_RUN_COUNT = 20
#: The comment of a job qdel ended (PBS's words); the end hooks' job.rerun() yields to it.
DELETED_BY = "Job deleted at request of "
#: The execution host's events before a job's processes start, in order (execjob_launch
#: follows them where there is a process to launch).
START_EVENTS = ("execjob_begin", "execjob_prologue")
#: The execution host's events after a job's processes end, in order.
END_EVENTS = ("execjob_epilogue", "execjob_end")
#: What `start_step` and `end_step` answer.
PROCEED, REQUEUE, FINISH = "proceed", "requeue", "finish"


#: The states of a job not yet running: which of them follows from its holds and
#: Execution_Time (`queued_state`).
QUEUED_STATES = frozenset({"Q", "H", "W"})
#: PBS's substate of a job in each state that has one substate here: queued, held, waiting,
#: running, exiting. A finished job's (F) says how it finished, set where it does
#: (`finished_substate`; 91 for one deleted before it ran).
SUBSTATES = {"Q": 10, "H": 20, "W": 30, "R": 42, "E": 50}
#: PBS's substate of a running job not launched yet (PBS's PRERUN: sent to its MoM, which
#: has not said it runs); here, while a prologue that runs as the job's owner runs.
PRERUN = 41
#: PBS's substate of an exiting job whose epilogue runs (PBS's MoM's RUNEPILOG); here, while
#: an execjob_epilogue or execjob_end that runs as the job's owner runs.
RUNEPILOG = 57
#: PBS's substate of a job its dependencies hold (a system hold, ``s``), whatever other
#: holds it has too (OpenPBS 23.06, checked).
DEPEND_HELD = 22


def set_substate(attrs: dict[str, Any]) -> None:
    """`attrs`' substate made PBS's for its job_state (`SUBSTATES`); a job held for its
    dependencies (`DEPEND_HELD`, set where the hold is) stays so while its ``s`` hold
    does, a running job not launched yet (`PRERUN`) until it is, and an exiting job whose
    end hooks run (`RUNEPILOG`) until they end; a state without one here keeps the
    substate it has."""
    state = str(attrs.get("job_state"))
    substate = SUBSTATES.get(state)
    if substate is None or (state, attrs.get("substate")) in (("R", PRERUN), ("E", RUNEPILOG)):
        return
    if state == "H" and attrs.get("substate") == DEPEND_HELD and \
            "s" in str(attrs.get("Hold_Types") or ""):
        return
    attrs["substate"] = substate


class OutsideLimits(ValueError):
    """A job's request is past a queue's or the server's resource limits (PBS's 15036,
    ``Job violates queue and/or server resource limits``); `resource` names the first."""

    def __init__(self, resource: str):
        super().__init__(f"Resource_List.{resource} is outside the queue's or the server's "
                         "resource limits")
        self.resource = resource


#: Not in a table (`completed_request`): None may be a value there.
_UNSET = object()


def completed_request(res: Mapping[str, Any], written: Mapping[str, Mapping[str, Any]],
                      queue: Mapping[str, Any] | PbsObject,
                      server: Mapping[str, Any] | PbsObject,
                      types: Mapping[str, str], host_level: frozenset[str], *,
                      enqueued: bool, limited: bool, touched: Iterable[str] = (),
                      hosts: Iterable[str] = ()
                      ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """A job's Resource_List `res` as PBS's server completes it (OpenPBS 23.06, checked),
    and what of it the server wrote (``{"defaults": ..., "derived": ...}``), given what it
    had written before (`written`, the same form; empty for a new job; `inferred_written`
    for a job stored without it), the names a request or hook just set (`touched`: asked
    for, whatever their value), the job's `queue` and the `server` attributes (stored, or
    their objects: the simulator's):

    * the resources it does not ask for from its queue's ``resources_default``, then the
      server's; ncpus, when a job without a select still lacks it, from the default_chunk
      (PBS's server is made with ``resources_default.ncpus = 1``). `enqueued` (qsub,
      qmove): the defaults of a queue it left go first; else (qalter) those it has stay,
      and a resource it had unset takes its default again;
    * `limited` (qsub; a qalter not by an operator or manager; a qmove not by a manager):
      `OutsideLimits` when it asks for more than ``resources_max`` or less than
      ``resources_min`` (`units.outside_limits`: the queue's limit on a resource, else the
      server's; chunks summed);
    * what it still lacks from its queue's ``resources_max``, then the server's (PBS's
      last defaults);
    * without a select, PBS's conversion: of an old ``nodes`` specification, its select
      and place (`units.nodes_select`: `hosts` are the names a host may have there; a
      job-wide ncpus or mem it asks for is shared out among the chunks), else a select of
      its host-level resources (`host_level`) and ``place=pack``
      (`units.converted_select`), derived again after a change to one
      (qalter ``-l ncpus=3``); a select it is given replaces it (qalter ``-l select=...``
      keeps the derived place, as PBS's does); a select without a place gets
      ``place=free``;
    * the chunks' sums (`units.with_sums`), with the queue's then the server's
      default_chunk.

    A value the server wrote that a request or a hook then set counts as asked for."""
    touched = frozenset(touched)
    before_defaults, before_derived = written.get("defaults", {}), written.get("derived", {})
    kept = {k: v for k, v in before_defaults.items() if k not in touched and res.get(k) == v}
    asked = {k: v for k, v in res.items() if v is not None and (k in touched or (
        before_derived.get(k, _UNSET) != v and kept.get(k, _UNSET) != v))}
    defaults = {} if enqueued else kept
    chunk_tables = units.default_chunks(queue, server)
    _fill(defaults, asked, (queue.get("resources_default"), server.get("resources_default")))
    if not asked.get("select") and not defaults.get("select") and "ncpus" not in asked \
            and "ncpus" not in defaults:
        defaults["ncpus"] = units.chunk_defaults(chunk_tables)["ncpus"]
    full = {**defaults, **asked}
    maxima = (queue.get("resources_max"), server.get("resources_max"))
    if limited and (any(maxima) or queue.get("resources_min")):
        over = units.outside_limits(_converted(full, chunk_tables, types, host_level,
                                               asked, hosts)[0],
                                    maxima, (queue.get("resources_min"),), types)
        if over is not None:
            raise OutsideLimits(over)
    _fill(defaults, full, maxima, skip=("select", "place"))
    full.update(defaults)
    place = before_derived.get("place")
    if place is not None and res.get("place") == place and full.get("select") and \
            "place" not in full and "place" not in touched:
        full["place"] = place
    completed, derived = _converted(full, chunk_tables, types, host_level, asked, hosts)
    return completed, {"defaults": {k: v for k, v in defaults.items()
                                    if completed.get(k) == v},
                       "derived": derived}


def inferred_written(res: Mapping[str, Any], queue: Mapping[str, Any],
                     server: Mapping[str, Any], types: Mapping[str, str],
                     host_level: frozenset[str]) -> dict[str, dict[str, Any]]:
    """What the server most likely wrote of a job stored without that record (by an older
    pbsplug, or a record that does not read): the values its select's sums give, and a
    select and ``place=pack`` that are its conversion. The rest counts as asked for."""
    chunk_tables = units.default_chunks(queue, server)
    derived = {k: v for k, v in units.request_sums(res, chunk_tables, types).items()
               if res.get(k) == v}
    select = res.get("select")
    if select is not None and res.get("place") == "pack":
        rest = {k: v for k, v in res.items() if k not in ("select", "place")}
        try:
            converted = units.converted_select(rest, host_level) == select
        except ValueError:
            converted = False
        if converted:  # (its chunk's sums are the job-wide values it asked for)
            derived = {"select": select, "place": "pack",
                       **({"nodect": 1} if res.get("nodect") == 1 else {})}
    return {"defaults": {}, "derived": derived}


def _fill(defaults: dict[str, Any], have: Mapping[str, Any],
          tables: Iterable[Mapping[str, Any] | None], skip: tuple[str, ...] = ()) -> None:
    """`defaults` given, from the first of `tables` naming it, each resource neither
    `have` nor `defaults` hold, but those in `skip`."""
    for table in tables:
        for name, value in (table or {}).items():
            if value is not None and name not in have and name not in defaults and \
                    name not in skip:
                defaults[name] = value


def _converted(res: dict[str, Any], chunk_tables: tuple[Any, Any], types: Mapping[str, str],
               host_level: frozenset[str], asked: Mapping[str, Any] | None = None,
               hosts: Iterable[str] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    """`res` converted (a select and place when it has none: of its ``nodes``, sharing out
    what it `asked` for of ncpus and mem, or of its host-level resources; place=free beside
    a select) and summed, and what of it that wrote."""
    full = dict(res)
    if not full.get("select") and full.get("nodes") is not None:  # (`units.NodesError`)
        asked = res if asked is None else asked
        full["select"], place = units.nodes_select(
            full["nodes"], hosts=hosts, types=types, ncpus=asked.get("ncpus"),
            mem=asked.get("mem"))
        full.setdefault("place", place)
    elif not full.get("select"):
        full.setdefault("ncpus", units.chunk_defaults(chunk_tables)["ncpus"])
        full["select"] = units.converted_select(full, host_level)
        full.setdefault("place", "pack")
    full.setdefault("place", "free")
    completed = units.with_sums(full, chunk_tables, types)
    return completed, {k: v for k, v in completed.items() if k not in res or res[k] != v}


def queued_state(attrs: Mapping[str, Any], now: float) -> str:
    """The state of a job that is not running, as PBS works it out from the job after any
    change (a request, a hook's, a release): held (H) while it has a hold, else waiting (W)
    until its Execution_Time, else queued (Q)."""
    if str(attrs.get("Hold_Types") or "n") != "n":
        return "H"
    when = attrs.get("Execution_Time")
    if isinstance(when, (int, float)) and not isinstance(when, bool) and when > now:
        return "W"
    return "Q"


def runjob_refused(attrs: dict[str, Any], message: str | None,
                   changes: Mapping[str, Any] | None, now: float) -> None:
    """A runjob hook refused the job: it stays queued, with PBS's comment, and what the
    hook changed (Hold_Types, Execution_Time, ...) applies: a hold it set holds the job, an
    Execution_Time to come makes it wait."""
    attrs["comment"] = f"Not Running: PBS Error: {message}"
    apply_to_attrs(attrs, changes or {})
    attrs["job_state"] = queued_state(attrs, now)
    set_substate(attrs)


def started(attrs: dict[str, Any], exec_vnode: str, exec_host: str, now: int) -> None:
    """The job runs from `now` on `exec_vnode` (runjob accepted)."""
    attrs.update(job_state="R", substate=42, exec_vnode=exec_vnode, exec_host=exec_host,
                 stime=now, mtime=now, run_count=int(attrs.get("run_count", 0)) + 1,
                 comment=f"Job run at {when(now)} on {exec_vnode}")
    attrs.pop("estimated", None)
    attrs.pop("resources_used", None)  # this run's, from its hooks and its end


def start_step(consequence: str) -> str:
    """What an execution host's start event (begin, prologue, launch) outcome does:
    PROCEED, REQUEUE, or FINISH (the job is deleted)."""
    if consequence in ("proceed", "ignore"):
        return PROCEED
    return FINISH if consequence == DELETE else REQUEUE


def abort_first(event: str, consequence: str) -> bool:
    """Whether execjob_abort fires for a job refused at `event`: after a refused launch
    (its host was prepared), or when the job is deleted."""
    return event == "execjob_launch" or consequence == DELETE


def refused_comment(event: str, consequence: str, message: str | None) -> str:
    if consequence == DELETE:
        return f"Job deleted by {event} hook: {message}"
    return f"Job requeued by {event} hook: {message}"


def requeued(attrs: dict[str, Any], comment: str, now: int) -> None:
    """The job goes back to its queue (held if a hook held it, or after too many tries)."""
    if int(attrs.get("run_count", 0)) > MAX_RUN_COUNT:
        attrs["Hold_Types"] = "s"
        comment = "job held, too many failed attempts to run"
    for key in ("exec_vnode", "exec_host", "session_id", "stime"):
        attrs.pop(key, None)
    # (a hook's hold, PBS's cgroups' s, stays; so does an Execution_Time to come)
    attrs.update(job_state=queued_state(attrs, now), Hold_Types=attrs.get("Hold_Types") or "n",
                 comment=comment, mtime=now)
    set_substate(attrs)


def walltime_limit(attrs: Mapping[str, Any]) -> int | None:
    """The job's walltime in seconds, or None without one."""
    return time_limit(attrs, "walltime")


def time_limit(attrs: Mapping[str, Any], resource: str) -> int | None:
    """The job's `resource` (walltime, cput) in seconds, or None without one."""
    limit = (attrs.get("Resource_List") or {}).get(resource)
    return None if limit is None else parse_duration_cached(limit)


#: PBS's Exit_status of a job its MoM killed for using more than it asked for
#: (JOB_EXEC_KILL_CPUT, JOB_EXEC_KILL_WALLTIME), whatever its processes then exited with.
KILLED_OVER = {"cput": -28, "walltime": -29}


@dataclass(frozen=True)
class OverLimit:
    """A job past its `resource` limit: `used` and `limit` in whole seconds."""

    resource: str
    used: int
    limit: int

    @property
    def comment(self) -> str:
        """The job's comment (pbsplug's; PBS's is ``Job run at ... and exceeded resource
        walltime``)."""
        return (f"job killed: {self.resource} {format_duration(self.used)} exceeded limit "
                f"{format_duration(self.limit)}")

    @property
    def note(self) -> str:
        """What PBS's MoM writes to the job's error file, seconds as plain numbers."""
        return f"=>> PBS: job killed: {self.resource} {self.used} exceeded limit {self.limit}\n"

    @property
    def exit_status(self) -> int:
        return KILLED_OVER[self.resource]


def over_limit(resource: str, limit: int | None, used: float) -> OverLimit | None:
    """The job is past its `resource` limit when it has used strictly more (as PBS's MoM
    checks); `used` is shown rounded up."""
    if limit is None or used <= limit:
        return None
    return OverLimit(resource, math.ceil(used), limit)


def walltime_exceeded(limit: int | None, elapsed: float) -> str | None:
    """The kill comment when a job that has run `elapsed` seconds is past its walltime
    (strictly more than the limit), else None."""
    over = over_limit("walltime", limit, elapsed)
    return over.comment if over else None


#: The job's Exit_status once an exechost_periodic hook asked for its ``job.rerun()``
#: (JOB_EXEC_HOOK_RERUN) or ``job.delete()`` (JOB_EXEC_HOOK_DELETE), while it runs on:
#: PBS's server sets it on its MoM's request and acts at the job's own end.
HOOK_ASKED_STATUS = {"rerun": -18, "delete": -19}
#: The job's runtime key for that request: ``{"action": ..., "hook": ...}``.
HOOK_ASKED = "hook_asked"
#: PBS's log line as a job that an exechost_periodic hook asked to delete ends.
HOOK_DELETED = "a hook requested for job to be deleted"


def drop_hook_asked(attrs: dict[str, Any], runtime: Any) -> None:
    """The Exit_status an exechost_periodic hook's request set (`HOOK_ASKED_STATUS`, the
    request in `runtime`) removed from a job being requeued: the mark is the run's, not
    its next's (any other Exit_status is left)."""
    asked = runtime.get(HOOK_ASKED) if isinstance(runtime, dict) else None
    if isinstance(asked, dict) and "Exit_status" in attrs and \
            attrs["Exit_status"] == HOOK_ASKED_STATUS.get(str(asked.get("action"))):
        del attrs["Exit_status"]


def end_step(reason: str | None, hook_action: str | None) -> str:
    """After the end events: REQUEUE (an operator's qrerun, or a hook's job.rerun() unless
    the job was being deleted) or FINISH."""
    if reason == "requeue":
        return REQUEUE
    if hook_action == "rerun" and not (reason or "").startswith(DELETED_BY):  # qdel wins
        return REQUEUE
    return FINISH


def end_comment(reason: str | None, event: str | None) -> str:
    """The comment of a job `end_step` requeued."""
    if reason == "requeue":
        return "Job requeued at request of an operator (qrerun)"
    return f"Job requeued by {event} hook"


def finished(attrs: dict[str, Any], exit_status: int, now: int,
             used: Mapping[str, Any] | None = None, comment: str | None = None) -> None:
    """The job is over (state F): its exit status, obittime, resources_used and comment
    (`comment`, else where and when it ran, and PBS's ``finished`` for an Exit_status of 0,
    ``failed`` for any other), and PBS's substate for how it ended
    (`finished_substate`)."""
    attrs.update(job_state="F", substate=finished_substate(exit_status, comment),
                 Exit_status=exit_status, obittime=now, mtime=now)
    if used is not None and attrs.get("stime") is not None:
        # What the host measured, over what its hooks reported (an epilogue's vmem, a
        # site's own counters), as PBS's MoM merges them.
        attrs["resources_used"] = {**(attrs.get("resources_used") or {}), **used}
    if comment:
        attrs["comment"] = comment
    elif attrs.get("stime") is not None:
        attrs["comment"] = (f"Job run at {when(attrs['stime'])} on {attrs.get('exec_vnode')} "
                            + ("and finished" if exit_status == 0 else "and failed"))


def finished_substate(exit_status: int, comment: str | None = None) -> int:
    """PBS's substate of a job that ran and is over (OpenPBS 23.06, checked): 91 when it
    was deleted (qdel: `comment` says so), 93 when it failed (an exit status other than
    0), else 92."""
    if (comment or "").startswith(DELETED_BY):
        return 91
    return 93 if exit_status != 0 else 92


# -- a hook's vnode changes ------------------------------------------------------------------
#: A vnode's states the server works out from its jobs and reservations; a hook's are dropped.
DERIVED_VNODE_STATES = frozenset({"job-busy", "job-exclusive", "resv-exclusive"})
#: A vnode's attributes the server works out from its jobs and reservations (the periodic
#: event's `units.SUSPENDED_JOBS` from the suspended ones), and its name: never stored.
DERIVED_VNODE_ATTRS = frozenset({"resources_assigned", "jobs", "resv", "name",
                                 units.SUSPENDED_JOBS})


def hook_vnode_changes(changes: Mapping[str, Any]) -> dict[str, Any]:
    """What is kept of a hook's `changes` to one vnode (its ``Outcome.changes`` entry):
    neither the attributes nor the states the server derives (`DERIVED_VNODE_ATTRS`,
    `DERIVED_VNODE_STATES`), nor the runner's own marks (``_new``). A hook may write them,
    no error, as it may any attribute; they are worked out again for the next event. The
    ``state`` left is sorted, ``free`` when nothing else is set. The engine and the
    simulator both apply what this gives."""
    kept = {k: v for k, v in changes.items()
            if not k.startswith("_") and k not in DERIVED_VNODE_ATTRS}
    if "state" in kept:
        states = set(str(kept["state"]).split(",")) - DERIVED_VNODE_STATES - {"", "free"}
        kept["state"] = ",".join(sorted(states)) or "free"
    return kept


def when(epoch: float) -> str:
    """PBS's comment time: ``Mon Nov 23 at 01:53``."""
    return _minute(int(epoch) // 60, time.tzname, time.timezone)


@lru_cache(maxsize=1024)
def _minute(minute: int, *zone: object) -> str:
    """`when` of every second of one minute in the zone `time.tzset` last set (a replay
    starts thousands of jobs a minute; a zone's offsets and their changes are whole
    minutes)."""
    return time.strftime("%a %b %d at %H:%M", time.localtime(minute * 60))


def began(runtime: Any) -> bool:
    """Whether a job's run began, its S record written (``began`` in its runtime, false from
    its start's write, true once its S is: the engine's `_mark_began`); a runtime with no
    mark (none stored, or an older pbsplug's) is taken as begun."""
    return not isinstance(runtime, dict) or runtime.get("began") is not False
