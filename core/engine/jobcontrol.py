"""The server's side of qselect, qsig, qorder, qmsg, qstart/qstop/qenable/qdisable and
qterm, each as OpenPBS 23.06 answers it (checked one by one on a running PBS:
tests/adapters/test_pbs_control_parity.py and docs/engine.md, "The commands").

`JobControl` holds what these requests keep between them: how long each suspended job has
been suspended, which the walltime clock leaves out, as PBS's MoM stops a suspended job's
walltime.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import units, values
from . import executor
from .errors import (
    PBSE_BADATVAL,
    PBSE_BADSTATE,
    PBSE_HISTJOBID,
    PBSE_IVALREQ,
    PBSE_PERM,
    PBSE_UNKJOBID,
    PBSE_UNKQUE,
    PBSE_UNKRESC,
    PbsError,
)
from .home import LOG_ADMIN, LOG_ERROR, LOG_JOB, LOG_SYSTEM
from .store import StoreWriteError

if TYPE_CHECKING:
    from .server import Caller, Engine, RequestSteps

#: A qselect criterion: a test of a job's attributes.
_Test = Callable[[dict[str, Any]], bool]
#: PBS's number and text for a signal name no one knows (PBSE_UNKSIG).
PBSE_UNKSIG = 15013
UNKSIG_TEXT = "Unknown/illegal signal name"
#: PBS's substate of a job suspended by qsig (JOB_SUBSTATE_SUSPEND).
SUBSTATE_SUSPENDED = 43
#: PBS's substate of a suspended job whose resume waits for its resources, and its comment.
SUBSTATE_RESUMING = 45
RESUME_WAIT = "Not Running: Not enough free nodes available"
#: qselect's comparisons (``ncpus.gt.1``, ``-p .ge.10``), as PBS's ``.op.`` names them.
OPS = ("eq", "ne", "ge", "gt", "le", "lt")
#: The job states qselect's ``-s`` takes (PBS's letters).
SELECT_STATES = frozenset("BEFHMQRSTUWX")
#: What qselect may compare, and how: (attribute, kind). A resource is ``Resource_List.<r>``.
SELECT_ATTRS = {
    "Account_Name": "string", "Checkpoint": "checkpoint", "Execution_Time": "time",
    "Hold_Types": "holds", "Job_Name": "name", "Priority": "priority",
    "Rerunable": "boolean", "job_state": "states", "queue": "queue", "project": "string",
    "Job_Owner": "users",
}
#: The most criteria one qselect may carry (a list of resources is a list).
MAX_CRITERIA = 256
#: Longest message qmsg appends (PBS's MoM takes a line; this bounds the write).
MAX_MESSAGE = 4096
#: qterm's modes.
TERM_MODES = ("quick", "immediate", "delay")


def signal_number(name: Any) -> int:
    """qsig's ``-s``: a number (any, as PBS's takes it: ``0``, ``99``), or a signal's name
    with or without ``SIG``, in capitals (``USR1``, ``SIGUSR1``; not ``usr1`` nor the
    real-time ones), as OpenPBS 23.06's MoM reads it (checked); else 15013. ``suspend``
    and ``resume`` are not signals."""
    if not isinstance(name, str) or not name or len(name) > 32:
        raise PbsError(PBSE_UNKSIG, UNKSIG_TEXT)
    if values.digits(name):
        return int(name) if len(name) < 10 else -1
    upper = name if name.startswith("SIG") else f"SIG{name}"
    found = getattr(signal.Signals, upper, None) if upper.isupper() else None
    if not isinstance(found, signal.Signals) or upper.startswith("SIGRT"):
        raise PbsError(PBSE_UNKSIG, UNKSIG_TEXT)
    return int(found)


def run_suspended(runtime: dict[str, Any], now: float) -> float:
    """How long the run whose runtime this is was suspended in all, read from the runtime
    alone: at its end the launch is gone, and at a start the server has no JobControl yet."""
    total = runtime.get("suspended_for")
    since = runtime.get("suspended_at")
    seconds = float(total) if isinstance(total, (int, float)) else 0.0
    if isinstance(since, (int, float)):
        seconds += max(0.0, now - since)
    return seconds


def rank_of(attrs: dict[str, Any], job_id: str) -> int:
    """The job's place in its queue, as PBS's ``queue_rank``: given by qorder, else the time
    it entered its queue and its number (earlier, then lower, first)."""
    given = attrs.get("queue_rank")
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    try:
        entered = int(float(attrs.get("qtime") or attrs.get("ctime") or 0))
    except (TypeError, ValueError):
        entered = 0
    head = str(job_id).split(".", 1)[0].split("[", 1)[0]
    return entered * 10_000_000 + (int(head) if head.isdigit() else 0)


class JobControl:
    def __init__(self, engine: Engine):
        self.engine = engine
        #: Seconds each running or suspended job's run spent suspended before its current
        #: suspension (its walltime leaves them out), and when that began (the clock's
        #: time), each with the run's shepherd pid: a later run (a requeue) starts at 0.
        #: Read from the jobs' runtimes, so a restart keeps them.
        self.suspended_for: dict[str, tuple[int, float]] = {}
        #: Suspended jobs resumed while their cpus were taken: resumed when free (`poll`),
        #: found again in the runtimes after a restart.
        self.resuming: set[str] = set()
        self._resuming_read = False
        #: The store's `changes` and the jobs waiting at `poll`'s last look: cpus are freed
        #: by writes alone (a job's end, suspend or requeue, a vnode changed), so a poll
        #: with neither moved looks at nothing.
        self._looked: tuple[int, frozenset[str]] | None = None
        self._suspended_at: dict[str, tuple[int, float]] = {}
        for job_id, launch in engine.launches.items():
            runtime = engine.store.runtime(job_id) or {}
            total, since = runtime.get("suspended_for"), runtime.get("suspended_at")
            if isinstance(total, (int, float)) and total > 0:
                self.suspended_for[job_id] = (launch.shepherd, float(total))
            if isinstance(since, (int, float)):
                self._suspended_at[job_id] = (launch.shepherd, float(since))

    # -- helpers ----------------------------------------------------------------------------------
    def _job(self, job_id: Any) -> tuple[str, dict[str, Any]]:
        if not isinstance(job_id, str):
            raise PbsError(PBSE_IVALREQ, "Invalid request: a job id is a string")
        eng = self.engine
        attrs = eng._job(job_id)
        return eng._full_id(job_id), attrs

    def _this_run(self, table: dict[str, tuple[int, float]], job_id: str) -> float | None:
        launch = self.engine.launches.get(job_id)
        entry = table.get(job_id)
        if entry is None or launch is None or entry[0] != launch.shepherd:
            table.pop(job_id, None)
            return None
        return entry[1]

    def suspended_seconds(self, job_id: str, now: float | None = None) -> float:
        """How long the job's current run has been suspended in all (now too)."""
        total = self._this_run(self.suspended_for, job_id) or 0.0
        since = self._this_run(self._suspended_at, job_id)
        if since is not None:
            total += max(0.0, (now if now is not None else self.engine.clock()) - since)
        return total

    # -- qselect ----------------------------------------------------------------------------------
    def select(self, caller: Caller, criteria: list[Any], history: bool = False
               ) -> list[str]:
        """The ids of the jobs that meet every criterion (``[attribute, op, value]``), in
        their queue order (`rank_of`), as PBS's qselect lists them. Finished jobs only with
        `history` (``-x``). A user sees others' jobs while ``query_other_jobs`` is true."""
        eng = self.engine
        if len(criteria) > MAX_CRITERIA:
            raise PbsError(PBSE_IVALREQ, f"Invalid request: more than {MAX_CRITERIA} criteria")
        custom = eng.resource_types()
        tests = [self._criterion(c, custom) for c in criteria]
        server = eng.store.get("server", "server") or {}
        others = caller.privileged or units.parse_bool(server.get("query_other_jobs", True))
        states = ("Q", "H", "W", "R", "E", "S", "T", "B") + (
            ("F", "X", "M") if history else ())
        jobs = eng.store.jobs(states, lean=True)
        found = []
        for job_id, attrs in jobs.items():
            if not others and attrs.get("euser") != caller.user:
                continue
            if attrs.get("array_id") is not None:  # (an array is listed, not its subjobs)
                continue
            if all(test(attrs) for test in tests):
                found.append(job_id)
        return sorted(found, key=lambda j: (rank_of(jobs[j], j), j))

    def _criterion(self, item: Any, custom: dict[str, str]) -> _Test:
        """One criterion checked, as a test of a job's attributes."""
        if not isinstance(item, list) or len(item) != 3 or not all(
                isinstance(part, str) for part in item):
            raise PbsError(PBSE_IVALREQ, "Invalid request: a criterion is [attribute, op, "
                                         "value]")
        name, op, given = item
        if op not in OPS:
            raise PbsError(PBSE_IVALREQ, f"Invalid request: op {values.shown(op)} is not one "
                                         f"of {', '.join(OPS)}")
        if name.startswith("Resource_List."):
            return self._resource_test(name.partition(".")[2], op, given, custom)
        kind = SELECT_ATTRS.get(name)
        if kind is None:
            raise PbsError(PBSE_IVALREQ, f"Invalid request: qselect cannot select by "
                                         f"{values.shown(name)}")
        if kind in ("string", "name"):
            if not given:  # (PBS: 15014 naming the attribute, e.g. `-N ''`)
                raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value {name}")
            values.text(given, name)
            return _compare(lambda a: str(a.get(name) or ""), op, given)
        if kind == "priority":
            try:
                wanted: Any = values.long(given, "Priority", -1024, 1023)
            except values.BadValue:  # (PBS's text names nothing here, checked)
                raise PbsError(PBSE_BADATVAL) from None
            return _compare(lambda a: int(a.get("Priority") or 0), op, wanted)
        if kind == "time":
            when = values.epoch(given, name) if values.digits(given) else None
            if when is None:
                raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value {name}")
            return _compare(lambda a: int(a.get(name) or 0), op, when)
        if kind == "boolean":
            flag = values.boolean(given, name)
            return _compare(lambda a: units.parse_bool(a.get(name, True)), op, flag)
        if kind == "checkpoint":
            if not values.check_checkpoint(given):
                raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value {name}")
            return _compare(lambda a: str(a.get(name) or "u"), op, given)
        if kind == "holds":
            if not given or set(given) - set("uosnp") or ("n" in given and len(given) > 1):
                raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value {name}")
            holds = frozenset(given)
            return lambda a: frozenset(str(a.get(name) or "n")) == holds
        if kind == "states":
            if not given or set(given) - SELECT_STATES:
                raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value {name}")
            return lambda a: str(a.get("job_state")) in given
        if kind == "queue":
            if given and self.engine.store.get("queue", given) is None:
                raise PbsError(PBSE_UNKQUE, "Unknown queue destination")
            return lambda a: not given or a.get("queue") == given
        users = [u for u in given.split(",")]  # kind "users": user[@host],...
        if not all(users) or len(users) > MAX_CRITERIA:
            raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value {name}")
        names = {n.lower() for n in self.engine.host_names}
        wanted_users = []
        for entry in users:
            user, _, host = entry.partition("@")
            values.check_name("user", user, "User_List")
            wanted_users.append((user, host.lower()))

        def owned(attrs: dict[str, Any]) -> bool:
            owner = str(attrs.get("euser") or str(attrs.get("Job_Owner") or "").split("@")[0])
            return any(owner == user and (not host or host in names)
                       for user, host in wanted_users)
        return owned

    def _resource_test(self, resource: str, op: str, given: str, custom: dict[str, str]
                       ) -> _Test:
        full = f"Resource_List.{resource}"
        kind = values.resource_type(resource, custom)
        if kind is None:
            raise PbsError(PBSE_UNKRESC, f"Unknown resource {full}")
        try:
            values.resource_value(resource, given, kind, custom=custom)
        except values.BadValue:
            raise PbsError(PBSE_BADATVAL, f"Illegal attribute or resource value {full}") \
                from None
        amount = _amount(kind)
        wanted = amount(given)

        def value(attrs: dict[str, Any]) -> Any:
            # (a job that does not ask for it compares as nothing: 0, or an empty string,
            # as OpenPBS 23.06's `mem.lt.1gb` took jobs without a mem, checked)
            have = (attrs.get("Resource_List") or {}).get(resource)
            try:
                return amount(have) if have is not None else amount(None)
            except (TypeError, ValueError, OverflowError):
                return amount(None)
        return _compare(value, op, wanted)

    # -- qsig -------------------------------------------------------------------------------------
    def signal(self, caller: Caller, job_id: Any, name: Any) -> None:
        """qsig -s `name` to one job, as OpenPBS 23.06 answers it (checked): an unknown
        job, then a finished one (15139), then another user's (15007); ``suspend`` and
        ``resume`` are operators' and managers' alone (15007 to the job's owner too);
        a signal goes to a running job only, suspend to a running one and resume to a
        suspended one (else 15016). A job whose shepherd has not recorded it yet (it waits
        for room on a full disk before it starts the job) is not running yet: any signal
        but SIGKILL (which ends the shepherd: `executor.signal_launch`), and suspend, are
        refused (15016), as PBS's MoM refuses them to a job not running yet; they were
        taken, and sent nowhere."""
        eng = self.engine
        job_id, attrs = self._job(job_id)
        state = attrs["job_state"]
        if state in ("F", "X", "M"):
            raise PbsError(PBSE_HISTJOBID, obj=job_id)
        eng._own(caller, job_id, attrs)
        if not isinstance(name, str):
            raise PbsError(PBSE_UNKSIG, UNKSIG_TEXT, obj=job_id)
        special = name.lower()
        if special in ("suspend", "resume"):
            if not caller.privileged:
                raise PbsError(PBSE_PERM, obj=job_id)
            launch = eng.launches.get(job_id)
            if launch is None or state != ("R" if special == "suspend" else "S") or (
                    special == "suspend" and not launch.resolve(wait=2.0)):
                raise PbsError(PBSE_BADSTATE, obj=job_id)
            if special == "suspend":
                self._suspend(caller, job_id, attrs, launch)
            else:
                self._resume(caller, job_id, attrs, launch)
            return
        try:
            number = signal_number(name)
        except PbsError as err:
            raise PbsError(err.code, err.message, obj=job_id) from None
        launch = eng.launches.get(job_id)
        if state != "R" or launch is None or (
                number != signal.SIGKILL and not launch.resolve(wait=2.0)):
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        # As qdel's signal: the job's process group and its top process, through the
        # executor's checked path (never a pid the job's owner could have swapped). A
        # number no signal has is taken and sends nothing, as PBS's MoM answers it.
        if number in {int(s) for s in signal.valid_signals()}:
            executor.signal_launch(launch, number)
            eng._signal_attached(eng.store.runtime(job_id) or {}, number)
        eng.log(LOG_JOB, "Job", job_id, f"Signal {name} sent at request of "
                f"{caller.user}@{eng.host}")

    def _suspend(self, caller: Caller, job_id: str, attrs: dict[str, Any],
                 launch: executor.Launch) -> None:
        """SIGSTOP to the job's processes; state S (substate 43). Its vnodes' resources
        are released (the scheduler may give them to other jobs), and its walltime stops."""
        eng = self.engine
        now = eng.clock()
        # Stored first, then stopped: a server killed in between finds the job S and
        # stops it when it adopts it (`signals_as_stored`), never a stopped job marked R.
        attrs.update(job_state="S", substate=SUBSTATE_SUSPENDED, mtime=int(now))
        with eng.store.transaction() as st:
            st.put_job(job_id, attrs)
            st.merge_runtime(job_id, suspended_at=now)
        executor.signal_whole(launch, signal.SIGSTOP, wait=2.0)  # (a job just started)
        eng._signal_attached(eng.store.runtime(job_id) or {}, signal.SIGSTOP)
        self._suspended_at[job_id] = (launch.shepherd, now)
        eng.log(LOG_JOB, "Job", job_id, f"Job suspended at request of {caller.user}@"
                f"{eng.host}")
        running = {**attrs, "job_state": "R"}  # (its use as last sampled, as a running job's)
        eng.accounting.suspended(job_id, eng._with_sessions({job_id: running})[job_id])
        eng.want_cycle = True  # (its cpus are free for others)

    def _resume(self, caller: Caller | None, job_id: str, attrs: dict[str, Any],
                launch: executor.Launch,
                vnodes: dict[str, dict[str, Any]] | None = None) -> bool:
        """SIGCONT, and state R again, once its cpus are free. While others hold them
        (the scheduler gave them away), it stays S with PBS's substate 45 and comment
        ``Not Running: Not enough free nodes available``, and resumes at the first poll
        that finds them free, as PBS's scheduler resumes it (OpenPBS 23.06, checked).
        `vnodes`: the vnodes as `Engine._vnode_rows` made them just now (else read here).
        True when it resumed."""
        eng = self.engine
        now = eng.clock()
        if not self._cpus_free(attrs, vnodes):
            if attrs.get("substate") != SUBSTATE_RESUMING:
                attrs.update(substate=SUBSTATE_RESUMING, comment=RESUME_WAIT, mtime=int(now))
                with eng.store.transaction() as st:
                    st.put_job(job_id, attrs)
                    st.merge_runtime(job_id, resume=True)
            self.resuming.add(job_id)
            return False
        self.resuming.discard(job_id)
        total = self.suspended_seconds(job_id, now)
        self._suspended_at.pop(job_id, None)
        self.suspended_for[job_id] = (launch.shepherd, total)
        attrs.update(job_state="R", substate=42, mtime=int(now))
        with eng.store.transaction() as st:
            runtime = st.runtime(job_id) or {}
            runtime.pop("suspended_at", None)
            runtime.pop("resume", None)
            runtime["suspended_for"] = total
            if attrs.get("comment") == RESUME_WAIT:
                attrs.pop("comment", None)
            st.put_job(job_id, attrs)
            st.set_runtime(job_id, runtime)
        executor.signal_whole(launch, signal.SIGCONT, wait=2.0)  # (a job just started)
        eng._signal_attached(eng.store.runtime(job_id) or {}, signal.SIGCONT)
        who = f"{caller.user}@{eng.host}" if caller is not None else f"Scheduler@{eng.host}"
        eng.log(LOG_JOB, "Job", job_id, f"Job resumed at request of {who}")
        eng.accounting.resumed(job_id)
        return True

    def _cpus_free(self, attrs: dict[str, Any],
                   vnodes: dict[str, dict[str, Any]] | None = None) -> bool:
        """Whether the cpus a suspended job held on each of its vnodes are free now
        (`vnodes`: as `Engine._vnode_rows` made them just now; else read here)."""
        try:
            chunks = units.parse_exec_vnode(str(attrs.get("exec_vnode") or ""))
        except ValueError:
            return True
        wanted: dict[str, float] = {}
        for name, res in chunks:
            wanted[name] = wanted.get(name, 0.0) + float(res.get("ncpus", 0) or 0)
        if vnodes is None:
            vnodes = self.engine._vnode_rows()
        for name, ncpus in wanted.items():
            row = vnodes.get(name)
            if row is None:
                return False
            have = float((row.get("resources_available") or {}).get("ncpus", 0) or 0)
            used = float((row.get("resources_assigned") or {}).get("ncpus", 0) or 0)
            if have - used < ncpus:
                return False
        return True

    def poll(self) -> None:
        """Suspended jobs whose resume waits for their cpus: resumed once they are free.
        The vnodes are read once for them all (again after each resume: it took its
        cpus), and only when a row was written since the last look or a job came to
        wait: every second, nothing else frees cpus."""
        eng = self.engine
        if not self._resuming_read:
            self._resuming_read = True
            for job_id in eng.store.jobs(("S",), lean=True):
                if (eng.store.runtime(job_id) or {}).get("resume"):
                    self.resuming.add(job_id)
        if not self.resuming or self._looked == (eng.store.changes,
                                                 frozenset(self.resuming)):
            return
        vnodes = None
        for job_id in sorted(self.resuming):
            attrs = eng.store.job(job_id)
            launch = eng.launches.get(job_id)
            if attrs is None or attrs.get("job_state") != "S" or launch is None:
                self.resuming.discard(job_id)
                continue
            if vnodes is None:
                vnodes = eng._vnode_rows()
            if self._resume(None, job_id, attrs, launch, vnodes):
                vnodes = None
        # (this look's own writes, a resume or a wait noted, free no cpus)
        self._looked = (eng.store.changes, frozenset(self.resuming))

    def signals_as_stored(self) -> None:
        """The jobs adopted after a restart are stopped or running as their stored states
        say: the server may have died between storing a suspend (or a resume) and its
        signal. A job never suspended is left alone (its owner may have stopped it)."""
        eng = self.engine
        for job_id, launch in eng.launches.items():
            attrs, runtime = eng.store.job(job_id), eng.store.runtime(job_id) or {}
            state = (attrs or {}).get("job_state")
            if state == "S" or (state == "R" and "suspended_for" in runtime):
                number = signal.SIGSTOP if state == "S" else signal.SIGCONT
                executor.signal_whole(launch, number)
                eng._signal_attached(runtime, number)

    def continue_killed(self, job_id: str) -> None:
        """A suspended job being killed (qdel) is woken, so that it takes its SIGTERM."""
        launch = self.engine.launches.get(job_id)
        if launch is not None:
            executor.signal_whole(launch, signal.SIGCONT)
            self.engine._signal_attached(self.engine.store.runtime(job_id) or {},
                                         signal.SIGCONT)

    # -- qorder -----------------------------------------------------------------------------------
    def order(self, caller: Caller, first: Any, second: Any) -> None:
        """qorder: the two jobs change places in the queue order, as OpenPBS 23.06 does
        (checked): each takes the other's ``queue_rank``; jobs of two queues change queues
        too (each moved as qmove moves it, or neither). Both must be queued,
        held or waiting (15016); the caller must own both, or be an operator or manager
        (15007). Errors name both jobs (``1.host or 2.host``)."""
        eng = self.engine
        both = f"{eng._full_id(str(first))} or {eng._full_id(str(second))}"
        try:
            (one, a), (two, b) = self._job(first), self._job(second)
        except PbsError as err:
            raise PbsError(err.code, err.message, obj=both) from None
        both = f"{one} or {two}"
        if a["job_state"] in ("F", "X", "M") or b["job_state"] in ("F", "X", "M"):
            raise PbsError(PBSE_HISTJOBID, obj=both)
        for job_id, attrs in ((one, a), (two, b)):
            try:
                eng._own(caller, job_id, attrs)
            except PbsError:
                raise PbsError(PBSE_PERM, obj=both) from None
        if {a["job_state"], b["job_state"]} - {"Q", "H", "W"}:
            raise PbsError(PBSE_BADSTATE, obj=both)
        if one == two:
            return
        rank_a, rank_b = rank_of(a, one), rank_of(b, two)
        if a.get("queue") != b.get("queue"):
            # Each moved as qmove moves it (the queues' ACLs, limits and movejob hooks);
            # when the second cannot move, the first goes back to where it was.
            queue_a, queue_b = str(a["queue"]), str(b["queue"])
            eng._move(caller, queue_b, one)
            try:
                eng._move(caller, queue_a, two)
            except PbsError:
                moved = eng._job(one)
                eng._into_queue(one, dict(moved), moved, queue_a, limited=False)
                raise
            a, b = eng._job(one), eng._job(two)
            rank_a, rank_b = rank_of(a, one), rank_of(b, two)
        a["queue_rank"], b["queue_rank"] = rank_b, rank_a
        with eng.store.transaction() as st:
            st.put_job(one, a)
            st.put_job(two, b)
        eng.log(LOG_JOB, "Job", one, f"Job reordered with {two} at request of "
                f"{caller.user}@{eng.host}")
        eng.want_cycle = True

    # -- qmsg -------------------------------------------------------------------------------------
    def message(self, caller: Caller, job_id: Any, text: Any, output: bool = False,
                error: bool = True) -> None:
        """qmsg: `text` and a newline appended to the running job's error file (`error`)
        and/or output file (`output`), as PBS's MoM appends it; written by a process that
        acts as the job's owner, never through a symbolic link (`executor.append_line`).
        An empty text is 15004, as PBS's server answers it; a job that is not running,
        15016."""
        eng = self.engine
        job_id, attrs = self._job(job_id)
        if not isinstance(text, str) or not text:
            raise PbsError(PBSE_IVALREQ, obj=job_id)
        try:
            text = values.text(text, "message", limit=MAX_MESSAGE, prose=True)
        except values.BadValue as exc:
            raise PbsError(PBSE_IVALREQ, f"Invalid request: {exc}", obj=job_id) from None
        if attrs["job_state"] in ("F", "X", "M"):
            raise PbsError(PBSE_HISTJOBID, obj=job_id)
        eng._own(caller, job_id, attrs)
        if attrs["job_state"] not in ("R", "S") or job_id not in eng.launches:
            raise PbsError(PBSE_BADSTATE, obj=job_id)
        from .server import _home_of

        out, err = eng._output_paths(job_id, attrs, _home_of(attrs))
        seq = job_id.split(".", 1)[0]
        name = str(attrs.get("Job_Name") or "STDIN")
        targets = []
        if error:
            targets.append((err, f"{name}.e{seq}") if err is not None else
                           (out, f"{name}.o{seq}"))
        if output and (out, f"{name}.o{seq}") not in targets:
            targets.append((out, f"{name}.o{seq}"))
        try:
            ids = executor.user_ids(attrs.get("euser"))
        except KeyError:  # (its owner is gone: nothing is written as root)
            raise PbsError(PBSE_BADSTATE, obj=job_id) from None
        for path, default in targets:
            why = executor.append_line(path, default, text, ids)
            if why is not None:
                raise PbsError(PBSE_BADSTATE, f"Request invalid for state of job: the "
                               f"message could not be written ({why})", obj=job_id)
        eng.log(LOG_JOB, "Job", job_id, f"Message appended at request of {caller.user}@"
                f"{eng.host}")

    # -- qstart, qstop, qenable, qdisable ----------------------------------------------------------
    def queue_state(self, caller: Caller, names: list[str], attribute: str, on: bool
                    ) -> RequestSteps:
        """qstart/qstop (`attribute` started) and qenable/qdisable (enabled) of each queue
        in turn: ``[{"id": name}]`` or ``[{"id": name, "error": {...}}]`` per queue, its
        management hooks asked of the request's driver (`Engine._drive`: the server serves
        while they run, as for qmgr)."""
        results: list[dict[str, Any]] = []
        for name in names:
            try:
                yield from self._queue_state(caller, name, attribute, on)
                results.append({"id": name})
            except PbsError as err:
                results.append({"id": name, "error": err.to_dict()})
        return results

    def _queue_state(self, caller: Caller, name: Any, attribute: str, on: bool
                     ) -> RequestSteps:
        """`attribute` (started or enabled) of queue `name` set to `on`, by an operator or
        a manager (anyone else: 15007, whatever the queue); an unknown queue is 15018. The
        change is qmgr's (``set queue NAME started = True``): its rules, hooks and log."""
        eng = self.engine
        if attribute not in ("started", "enabled") or not isinstance(on, bool):
            raise PbsError(PBSE_IVALREQ, "Invalid request: started or enabled, true or false")
        if not isinstance(name, str) or not name:
            raise PbsError(PBSE_IVALREQ, "Invalid request: a queue name is a string")
        if not caller.privileged:
            raise PbsError(PBSE_PERM, obj=name)
        if eng.store.get("queue", name) is None:
            raise PbsError(PBSE_UNKQUE, obj=name)
        answer = yield from eng.manager.steps(caller, f"set queue {name} {attribute} = {on}",
                                              one=True)
        if answer.get("errors"):
            line = answer["errors"][0]
            raise PbsError(int(answer.get("code") or PBSE_IVALREQ),
                           line.split(": ", 1)[-1], obj=name)
        eng.log(LOG_ADMIN, "Queue", name, f"{attribute} = {on} at request of "
                f"{caller.user}@{eng.host}")

    # -- qterm ------------------------------------------------------------------------------------
    def terminate(self, caller: Caller, mode: str = "quick") -> str:
        """qterm -t `mode`, an operator's or a manager's (OpenPBS 23.06 lets operators:
        checked). ``quick``: the server stops and the jobs run on under their shepherds, to
        be adopted at the next start. ``immediate``: every running or suspended job is
        killed first, a rerunnable one requeued and any other finished, as PBS's does;
        the server stops once their ends are recorded. ``delay``: as quick here (see
        docs/engine.md)."""
        eng = self.engine
        if not caller.privileged:
            raise PbsError(PBSE_PERM)
        if mode not in TERM_MODES:
            raise PbsError(PBSE_IVALREQ, f"Invalid request: mode {values.shown(mode)} is not "
                                         f"one of {', '.join(TERM_MODES)}")
        who = f"{caller.user}@{eng.host}"
        eng.log(LOG_SYSTEM, "Server", eng.host, f"Server shutdown ({mode}) at request of {who}")
        try:
            if mode == "immediate":
                self._end_running(who)
        finally:
            # (even when a kill fails, a full disk: its hook chains are stopped already,
            # and a server serving on without them kept their jobs R or E for ever; what
            # is left is found at the next start, as after any stop)
            eng.stopping = True
        return "shutting down"

    def _end_running(self, who: str) -> None:
        """qterm -t immediate: each running or suspended job killed (SIGKILL after its
        kill_delay, `Engine._kill`), requeued when rerunnable, and its end recorded before
        the server stops (within the longest kill_delay and a few seconds; what is left
        then is found at the next start by the recovery rule). A kill that cannot be
        written (a full disk) sends nothing (`Engine._kill` writes first): that job runs
        on, to be adopted at the next start, as after ``qterm -t quick``, logged in one
        line, and is not waited for; one being killed already (a qdel's kill, a qrerun's,
        a limit's) keeps that kill, its SIGKILL sent when due, and is waited for as the
        killed ones are. The others are tried all the same, and the first refusal is
        raised once the killed ones are over (`terminate` stops the server all the same).
        The wait polled every job still launched: a refused one, never signalled, kept it
        going to the longest kill_delay and 5 s (5 s when every kill was refused, with
        nothing to wait for)."""
        import time

        eng = self.engine
        eng.stop_chains()  # (found at the next start, as after any stop)
        refused: StoreWriteError | None = None
        waited = set(eng.launches)
        for job_id in list(eng.launches):
            try:
                self._end_one(job_id, who)
            except StoreWriteError as exc:
                refused = refused or exc
                if eng._being_ended(job_id):  # (nothing of this kill was done)
                    eng.log(LOG_JOB | LOG_ERROR, "Job", job_id, "its kill at server "
                            f"shutdown could not be written: {exc.message}; the kill it "
                            "had stands, its end recorded before the stop or at the next "
                            "start" + ("" if job_id not in eng.limit_kills else " (its "
                                       "limit's reason only if written by then)"))
                else:
                    waited.discard(job_id)
                    eng.log(LOG_JOB | LOG_ERROR, "Job", job_id, "its kill at server "
                            f"shutdown could not be written: {exc.message}; it runs on, "
                            "to be adopted at the next start")
        longest = max(eng.kills.values(), default=eng.clock()) - eng.clock()
        deadline = time.monotonic() + max(longest, 0) + 5
        while time.monotonic() < deadline:
            waited &= set(eng.launches)
            if not waited:
                break
            reaped = executor.reap()
            for job_id, launch in list(eng.launches.items()):
                if job_id in waited:
                    eng._poll_job(job_id, launch, eng.clock(), reaped=reaped)
            eng._kill_overdue(eng.clock())
            time.sleep(0.05)
        if refused is not None:
            raise refused

    def _end_one(self, job_id: str, who: str) -> None:
        """`_end_running`'s kill of one job: a subjob its array's qdel marked deleted
        (`Engine.delete_marked`, as the first poll deletes it: one a qrerun is ending is
        requeued all the same), else requeued when rerunnable, else finished."""
        eng = self.engine
        attrs = eng.store.job(job_id) or {}
        if attrs.get("job_state") not in ("R", "E", "S"):
            return
        runtime = eng.store.runtime(job_id) or {}
        uid = runtime.get("delete_at_start")  # (its array's qdel, cut short by this
        if isinstance(uid, int) and attrs.get("job_state") in ("R", "S") and \
                not eng._deleted_already(runtime):  # stop: deleted, not requeued)
            eng.delete_marked(job_id, uid, attrs)
            return
        rerun = units.parse_bool(attrs.get("Rerunable", True))
        eng._kill(job_id, "requeue" if rerun else
                  f"Job killed at server shutdown, at request of {who}")
        if attrs.get("job_state") == "S":
            self.continue_killed(job_id)


def _amount(kind: str) -> Callable[[Any], Any]:
    """How qselect compares a resource of `kind`: a function of its value (None: a job
    that does not ask for it)."""
    if kind == "size":
        return lambda v: 0 if v is None else units.parse_size(v)
    if kind == "duration":
        return lambda v: 0 if v is None else units.parse_duration(v)
    if kind in ("long", "float"):
        return lambda v: 0 if v is None else float(v)
    if kind == "boolean":
        return lambda v: False if v is None else units.parse_bool(v)
    return lambda v: "" if v is None else str(v)


def _compare(value: Callable[[dict[str, Any]], Any], op: str, wanted: Any) -> _Test:
    """A test of a job's attributes: ``value(attrs) <op> wanted``."""
    def test(attrs: dict[str, Any]) -> bool:
        have = value(attrs)
        try:
            if op == "eq":
                return bool(have == wanted)
            if op == "ne":
                return bool(have != wanted)
            if op == "ge":
                return bool(have >= wanted)
            if op == "gt":
                return bool(have > wanted)
            if op == "le":
                return bool(have <= wanted)
            return bool(have < wanted)
        except TypeError:
            return False
    return test


__all__ = ["JobControl", "rank_of", "signal_number", "PBSE_UNKJOBID"]
