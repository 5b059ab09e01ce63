"""Routing queues: a queue of ``queue_type = Route`` runs no job; the server passes each job
put in it on to the first of its ``route_destinations`` that accepts it, as PBS's server
does. What follows was checked on OpenPBS 23.06 (docs/engine.md, *Routing queues*):

* A job is routed when it enters the queue (qsub, qmove), when it is released, and, after a
  destination could not take it for now, every ``route_retry_time`` seconds (30 by
  default). A route queue that is not started keeps its jobs; held jobs stay unless
  ``route_held_jobs`` is true, and jobs waiting for their Execution_Time unless
  ``route_waiting_jobs`` is.
* A destination takes a job as qmove's would, the resource limits of the destination (and
  the server) included, and applies its defaults (the route queue's go). A destination that
  is not enabled refuses for now: the job waits and is tried again; a missing destination,
  or one whose limits the job breaks, refuses it for good, and is not asked again while
  the job stays. The movejob hooks do not fire.
* When every destination refuses for good, the job is rejected: at qsub, qsub's request is
  refused with 15039 (`Job rejected by all possible destinations`; OpenPBS 23.06's qsub
  prints the new id all the same, and the job is gone); later, the job is finished.
* With ``route_lifetime`` set (seconds), a job in the queue longer than that is finished at
  its next try, before anything else is looked at, held or not (`Route queue lifetime
  exceeded`).
* A job routed into another route queue is routed on from there at the server's next pass
  (a second later), not in the same request: a loop of route queues (PBS bounces such a
  job between them many times a second) costs one move a second, each one logged.

From reading OpenPBS's source, not checked on a running PBS: the lifetime is looked at
before the holds; the server's own failure to write (15010) and limits on queued jobs are
refusals for now; ``q@server`` naming this server is its queue ``q``. pbsplug's own
reading: a destination on another server, or the route queue itself, is passed over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import units
from ..objects import is_route_queue
from .errors import PBSE_NOCONNECTS, PBSE_QUNOENB, PBSE_SYSTEM, PbsError
from .home import LOG_ERROR
from .limits import PBSE_ENTLIMCT, PBSE_ENTLIMRESC, PBSE_MAXQUED

if TYPE_CHECKING:
    from .server import Engine

PBSE_ROUTEREJ = 15039
REJECTED = "Job rejected by all possible destinations"
EXPIRED = "Route queue lifetime exceeded"
#: PBS's default ``route_retry_time`` (seconds).
RETRY_TIME = 30
#: Seconds between two passes over the jobs in route queues.
PASS_EVERY = 1.0
#: A destination's refusals that pass with time: the job waits and is tried again, as PBS
#: retries them (a disabled queue, checked; a limit on queued jobs, which frees as jobs
#: leave; the server's own failure to write, a full disk: read in OpenPBS's source).
FOR_NOW = frozenset({PBSE_QUNOENB, PBSE_MAXQUED, PBSE_ENTLIMCT, PBSE_ENTLIMRESC,
                     PBSE_SYSTEM, PBSE_NOCONNECTS})


def _seconds(value: Any, default: int) -> int:
    """A stored route_retry_time or route_lifetime (qmgr checked it: a long) in seconds."""
    try:
        return max(0, int(value))
    except (TypeError, ValueError):
        return default


def retry_time(queue: dict[str, Any]) -> int:
    """How long a job a destination refused for now waits in route queue `queue` (its
    attributes) before it is tried again: its route_retry_time, in seconds."""
    return _seconds(queue.get("route_retry_time"), RETRY_TIME)


def lifetime(queue: dict[str, Any]) -> int:
    """How long a job may stay in route queue `queue` (its attributes): its
    route_lifetime, in seconds; 0 for ever."""
    return _seconds(queue.get("route_lifetime"), 0)


def lifetime_end(attrs: dict[str, Any], most: int) -> float | None:
    """When a job (whose attributes are `attrs`) in a route queue whose route_lifetime is
    `most` seconds (0: none) reaches that lifetime: its qtime, when it entered the queue,
    plus `most`; None when it never does. `expired` says when it is past it."""
    entered = attrs.get("qtime")
    return entered + most if most and isinstance(entered, (int, float)) else None


def expired(attrs: dict[str, Any], most: int, now: float) -> bool:
    """Whether a job (whose attributes are `attrs`) in a route queue whose route_lifetime
    is `most` seconds (0: none) is past it at `now`: in the queue longer than that (at
    exactly its lifetime, not yet). The one rule of the engine's router and of the
    simulator, which also finds by it the retry at which a waiting job's lifetime runs
    out."""
    entered = attrs.get("qtime")
    return bool(most) and isinstance(entered, (int, float)) and now - entered > most


@dataclass(frozen=True)
class Routed:
    """What one try at routing a job came to (`route_job`)."""

    outcome: str                     # "routed", "stays", "retry" or "finished"
    destination: str | None = None   # routed: the queue that took it
    when: float | None = None        # retry: when it is tried again
    why: str | None = None           # finished: EXPIRED, or REJECTED (no destination took it)


STAYS = Routed("stays")


def route_job(attrs: dict[str, Any], name: str, queue: dict[str, Any], now: float,
              refused: set[str], move: Callable[[str], None],
              local: Callable[[str], str | None]) -> Routed:
    """One try at passing a job (whose attributes are `attrs`) out of route queue `name`
    (whose attributes are `queue`) at `now`, by PBS's rules (the module's docstring): the
    rules the local engine and the simulator both route by. It stays untried (the queue is
    stopped, or the job is held or waiting and the queue keeps such jobs); or is finished
    (past the queue's route_lifetime, looked at first; or every destination refused it
    for good: `REJECTED`); or goes to the first destination `move` puts it in; or, when a
    destination refused it for now, is tried again at its retry time.

    `local(dest)` is a destination's queue on this server, None for another server's;
    `move(queue)` puts the job in that queue or raises the `PbsError` of its refusal
    (`FOR_NOW` codes pass with time; any other is for good). `refused` holds the
    destinations that refused the job for good, not asked again; the refusals of this try
    are added to it."""
    if not units.parse_bool(queue.get("started", False)):
        return STAYS
    if expired(attrs, lifetime(queue), now):
        return Routed("finished", why=EXPIRED)  # (before all else, as PBS does)
    if str(attrs.get("Hold_Types") or "n") != "n" and \
            not units.parse_bool(queue.get("route_held_jobs", False)):
        return STAYS
    if attrs.get("job_state") == "W" and \
            not units.parse_bool(queue.get("route_waiting_jobs", False)):
        return STAYS
    for_now = False
    for dest in queue.get("route_destinations") or ():
        dest = str(dest)
        if dest in refused:
            continue
        target = local(dest)
        if target is None or target == name:  # (another server; itself: a loop)
            refused.add(dest)
            continue
        try:
            move(target)
        except PbsError as err:
            if err.code in FOR_NOW:
                for_now = True
            else:
                refused.add(dest)
            continue
        return Routed("routed", destination=target)
    if for_now:
        return Routed("retry", when=now + retry_time(queue))
    return Routed("finished", why=REJECTED)


class Router:
    """The engine's routing of jobs out of its route queues (`route` and `poll`)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        #: Job id -> when a job a destination refused for now is tried again.
        self.retry_at: dict[str, float] = {}
        #: Job id -> the destinations that refused it for good, not asked again while it
        #: stays in its route queue (as PBS keeps its bad destinations per job).
        self.refused: dict[str, set[str]] = {}
        self._next_pass = 0.0

    def _local(self, dest: str) -> str | None:
        """A destination's queue on this server (``q``, or ``q@`` this server's name or
        host), None for another server's (pbsplug's server routes to none)."""
        queue, at, server = dest.partition("@")
        eng = self.engine
        return queue if not at or server in (eng.server_name, eng.host) else None

    def route(self, job_id: str, attrs: dict[str, Any], name: str, queue: dict[str, Any],
              now: float, submitting: bool = False) -> None:
        """Try to pass job `job_id` (stored as `attrs`) out of route queue `name` (whose
        attributes are `queue`), by `route_job`: it goes to a destination; or waits, tried
        again at its retry time (a destination refused for now); or stays untried; or is
        finished (past the queue's route_lifetime, or refused for good by every
        destination). With `submitting` (qsub), a refusal for good raises PBS's 15039
        instead, and the caller forgets the job."""
        eng = self.engine
        refused = self.refused.setdefault(job_id, set())
        result = route_job(attrs, name, queue, now, refused,
                           lambda dest: eng.route_to(job_id, attrs, dest,
                                                     submitting=submitting),
                           self._local)
        if result.outcome == "stays":
            if not refused:  # (nothing was tried)
                self.refused.pop(job_id, None)
        elif result.outcome == "routed":
            self.forget(job_id)
        elif result.outcome == "retry":
            self.retry_at[job_id] = result.when if result.when is not None else now
        elif submitting and result.why == REJECTED:
            self.forget(job_id)
            raise PbsError(PBSE_ROUTEREJ, REJECTED, obj=job_id)
        else:
            self._finish(job_id, str(result.why))

    def _finish(self, job_id: str, why: str) -> None:
        self.forget(job_id)
        eng = self.engine
        eng._drop(job_id, eng._job(job_id), why)  # (logged; whole: with its environment)

    def forget(self, job_id: str) -> None:
        """What was noted of a job's tries (it left its route queue, or enters one anew)."""
        self.retry_at.pop(job_id, None)
        self.refused.pop(job_id, None)

    def poll(self, now: float) -> None:
        """Once a second: every job in a route queue that is due (never tried, or its retry
        time has come) is tried, in submission order. One that fails for a reason that is
        no refusal (a bug, a value nothing foresaw) is logged and tried again at its retry
        time; the others go on."""
        if now < self._next_pass:
            return
        self._next_pass = now + PASS_EVERY
        eng = self.engine
        routes = {name: q for name, q in eng.store.all("queue").items()
                  if is_route_queue(q)}
        if not routes:
            self.retry_at.clear()
            self.refused.clear()
            return
        jobs = eng.store.jobs_in_queues(sorted(routes), ("Q", "H", "W"))
        for job_id in (set(self.retry_at) | set(self.refused)) - set(jobs):
            self.forget(job_id)  # (gone, moved or deleted meanwhile)
        for job_id, attrs in jobs.items():
            if self.retry_at.get(job_id, 0.0) > now:
                continue
            name = str(attrs.get("queue"))
            try:
                self.route(job_id, attrs, name, routes[name], now)
            except Exception as exc:  # noqa: BLE001 - one job must not stop the others
                self.retry_at[job_id] = now + retry_time(routes[name])
                eng.log(LOG_ERROR, "Job", job_id, f"routing from {name} failed: "
                        f"{type(exc).__name__}: {exc}")
