"""PBS's hook events: what each one carries, what a hook may change, what a reject does.

`EVENTS` is the table the whole system reads: the runner (which objects a hook may write), the
engine (what a reject, an exception or an alarm does to the request), the CLI (which JSON keys
an event's input file takes) and the docs. The facts come from PBS (shared/reference/
pbs-behavior.md §1.2-1.4); where pbsplug decides something PBS leaves open, the table says so
in `note`.

`Event` is the object a hook receives, as a PBS hook reads ``pbs.event()``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .objects import (
    AttributeReadOnly,
    Job,
    PbsObject,
    Queue,
    Reservation,
    Vnode,
    object_from_dict,
    plain,
)

#: PBS's error code for every hook failure seen by a client (PBSE_HOOKERROR).
PBSE_HOOKERROR = 15136
#: The log record attribute naming the object a hook's line is about, ``(type, name)``
#: (`Event.logjobmsg`); an engine writes the line under that object instead of the hook's.
PBS_OBJECT = "pbs_object"
#: The slot holding an object's guard (`PbsObject._guard`), set directly on each vnode.
_GUARD_SLOT = PbsObject._guard  # type: ignore[attr-defined]
_ACTION_SLOT = Job._action_allowed  # type: ignore[attr-defined]

# What happens to the request when a hook rejects it, or fails (exception or alarm).
REFUSE = "refuse"      # the request is refused; nothing changes (qsub, qalter, qdel, ...)
REQUEUE = "requeue"    # the job goes back to the queue (run_count counts the attempt)
DELETE = "delete"      # the job is deleted
IGNORE = "ignore"      # logged; the event's work goes on (later hooks are skipped)
KEEP_QUEUED = "keep_queued"  # runjob: the job stays queued, comment `Not Running: PBS Error: <msg>`

# Job attributes no hook may write (the server or the execution host owns them).
_JOB_SYSTEM = frozenset({
    "id", "job_state", "substate", "ctime", "mtime", "qtime", "etime", "stime", "obittime",
    "exec_vnode", "exec_host", "run_count", "Job_Owner", "euser", "egroup", "resources_used",
    "Exit_status", "estimated", "session_id", "server", "schedselect",
})
#: Job attributes an execution-host hook may write (PBS's MoM hooks).
HOST_JOB_WRITABLE = frozenset({
    "Execution_Time", "Hold_Types", "resources_used", "Variable_List", "comment",
})
#: Job attributes a rejecting runjob hook may still change (PBS: a, h, project, depend).
RUNJOB_JOB_WRITABLE = frozenset({"Execution_Time", "Hold_Types", "project", "depend"})


class HookAlarm(KeyboardInterrupt):
    """Raised inside a hook when its alarm expires (PBS raises KeyboardInterrupt).
    (`pbsplug.HookAlarm`; here, not in the runner, so that `message_text` lets it by.)"""


def message_text(value: Any) -> str | None:
    """A hook's message as text of the exact type str (None stays None): `str(value)`, or a
    stand-in naming its type when that fails, whatever it raises (an exception whose
    ``__str__`` raises SystemExit, or returns no str). No method of the hook's object runs
    but its ``__str__``: a str subclass it returns is copied, never formatted."""
    if value is None or type(value) is str:
        return value
    if issubclass(type(value), str):  # (its own __str__, __format__... are the hook's; and
        return str.__str__(value)     # isinstance would read its __class__)
    try:
        text = str(value)
    except HookAlarm:  # (the hook's alarm, come while its object was shown: the hook is
        raise          # over, not given a stand-in to run on past it)
    except BaseException:  # noqa: BLE001 - the hook's object, not ours: its error, any
        return f"<{type_name(value)} that cannot be shown>"
    return str.__str__(text)


#: The name of a type as the type holds it (`type_name`).
_TYPE_NAME = vars(type)["__name__"]


def type_name(value: Any) -> str:
    """The name of `value`'s type, as exact text: read from the type itself, never through
    a metaclass's ``__name__`` (the hook's code)."""
    return str.__str__(_TYPE_NAME.__get__(type(value)))


def launch_problem(progname: Any, argv: Any, env: Any,
                   before: tuple[Any, Any, Any] | None = None) -> str | None:
    """What is wrong with an execjob_launch hook's ``progname``, ``argv`` and ``env`` as a
    process is started from them (text without NUL; env names without ``=``), or None.
    With `before` (the progname, argv and env the hook was given), what it left as it was
    given is not its problem: a task's environment is its owner's to shape (an entry
    ``=x`` makes a variable of no name), and a hook that sets one variable must not fail
    for it (its fail_action would take the node)."""
    def bad_text(value: Any) -> bool:  # (str's own methods: not a subclass's)
        return not isinstance(value, str) or str.__contains__(value, "\0")

    def same(value: Any, old: Any) -> bool:  # (exact strs only: no method of the hook's)
        return type(value) is str and type(old) is str and str.__eq__(value, old)

    def quoted(value: Any) -> str:  # (as text of our own, whatever the hook's type does)
        text = message_text(value)
        return repr("None" if text is None else text[:80])

    old_prog, old_argv, old_env = before if before is not None else (None, (), {})
    if not same(progname, old_prog) and bad_text(progname):
        return "event.progname: not a string without NUL"
    if not isinstance(argv, list):
        return "event.argv: not a list of strings"
    given = {a for a in old_argv if type(a) is str}
    for a in list.__iter__(argv):
        if bad_text(a) and not (type(a) is str and a in given):
            return f"event.argv: {quoted(a)} is not a string without NUL"
    if not isinstance(env, dict):
        return "event.env: not a mapping of names to strings"
    for k, v in dict.items(env):
        if type(k) is str and same(v, old_env.get(k)):
            continue  # as it was given
        if bad_text(k) or not k or str.__contains__(k, "="):
            return f"event.env: {quoted(k)} is not a variable name (text, no '=', no NUL)"
        if bad_text(v):
            return f"event.env[{quoted(k)}]: not a string without NUL"
    return None


@dataclass(frozen=True)
class EventSpec:
    """One PBS hook event."""

    name: str
    side: str                               # "server" or "host" (PBS's MoM)
    objects: tuple[str, ...]                # attributes of `Event` this event fills in
    on_reject: str                          # REFUSE, REQUEUE, DELETE, IGNORE or KEEP_QUEUED
    on_error: str                           # the same, for an exception or an alarm
    job_writable: frozenset[str] | None = None   # None: every job attribute not in _JOB_SYSTEM
    vnodes_writable: bool = False
    resv_writable: bool = False
    note: str = ""

    @property
    def host(self) -> bool:
        return self.side == "host"

    @property
    def periodic(self) -> bool:
        return self.name in ("periodic", "exechost_periodic")

    def may_write_job(self, attr: str) -> bool:
        if attr in _JOB_SYSTEM:
            return attr == "resources_used" and self.host
        if attr == "queue":  # a queuejob hook routes a new job (checked as qsub -q is);
            # later only qmove moves it, with its checks (movejob's job carries the
            # destination, which the server keeps whatever the hook writes there)
            return self.name in ("queuejob", "movejob")
        if self.job_writable is None:
            return True
        return attr in self.job_writable


_NONE: frozenset[str] = frozenset()
_HOST_JOB = ("job", "vnode_list")

EVENTS: dict[str, EventSpec] = {e.name: e for e in (
    # -- server side --------------------------------------------------------------------------
    EventSpec("queuejob", "server", ("job",), REFUSE, REFUSE),
    EventSpec("postqueuejob", "server", ("job",), DELETE, DELETE,
              note="pbsplug: the job is already queued, so a reject deletes it"),
    EventSpec("modifyjob", "server", ("job", "job_o"), REFUSE, REFUSE),
    EventSpec("movejob", "server", ("job", "src_queue"), REFUSE, REFUSE),
    EventSpec("runjob", "server", ("job",), KEEP_QUEUED, KEEP_QUEUED,
              job_writable=RUNJOB_JOB_WRITABLE),
    EventSpec("jobobit", "server", ("job",), IGNORE, IGNORE, job_writable=_NONE),
    EventSpec("resvsub", "server", ("resv",), REFUSE, REFUSE, resv_writable=True),
    EventSpec("resv_confirm", "server", ("resv",), REFUSE, REFUSE,
              note="a refused confirmation leaves the reservation unconfirmed"),
    EventSpec("resv_begin", "server", ("resv",), IGNORE, IGNORE),
    EventSpec("resv_end", "server", ("resv",), IGNORE, IGNORE),
    EventSpec("modifyvnode", "server", ("vnode", "vnode_o"), IGNORE, IGNORE,
              note="pbsplug: a reject is logged; the vnode change is made"),
    EventSpec("periodic", "server", ("vnode_list", "resv_list", "job_list"), IGNORE, IGNORE,
              vnodes_writable=True,
              note="pbsplug: job_list carries the queued jobs with the scheduler's estimates"),
    EventSpec("provision", "server", ("vnode", "aoe"), REFUSE, REFUSE),
    EventSpec("management", "server", ("management",), REFUSE, REFUSE),
    # -- execution host (PBS's MoM) -------------------------------------------------------------
    EventSpec("execjob_begin", "host", _HOST_JOB, REQUEUE, REQUEUE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True),
    EventSpec("execjob_prologue", "host", _HOST_JOB + ("vnode_list_fail",), REQUEUE, REQUEUE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True),
    EventSpec("execjob_launch", "host",
              _HOST_JOB + ("vnode_list_fail", "progname", "argv", "env", "pid"), DELETE, DELETE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True,
              note="an exception or alarm also runs execjob_abort; pbsplug: pid is the "
                   "process that will run the job"),
    EventSpec("execjob_attach", "host", ("job", "pid"), REFUSE, REFUSE,
              job_writable=HOST_JOB_WRITABLE),
    EventSpec("execjob_preterm", "host", _HOST_JOB, REFUSE, REFUSE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True,
              note="a reject refuses the qdel; the job keeps running"),
    EventSpec("execjob_epilogue", "host", _HOST_JOB, IGNORE, IGNORE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True),
    EventSpec("execjob_end", "host", _HOST_JOB, IGNORE, IGNORE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True),
    EventSpec("execjob_abort", "host", _HOST_JOB, IGNORE, IGNORE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True),
    EventSpec("execjob_postsuspend", "host", _HOST_JOB, IGNORE, IGNORE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True),
    EventSpec("execjob_preresume", "host", _HOST_JOB, REFUSE, REFUSE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True,
              note="a reject keeps the job suspended"),
    EventSpec("execjob_resize", "host", _HOST_JOB, REFUSE, REFUSE,
              job_writable=HOST_JOB_WRITABLE, vnodes_writable=True),
    EventSpec("exechost_startup", "host", ("vnode_list",), IGNORE, IGNORE,
              vnodes_writable=True),
    EventSpec("exechost_periodic", "host", ("vnode_list", "job_list"), IGNORE, IGNORE,
              vnodes_writable=True),
)}

SERVER_EVENTS = tuple(n for n, e in EVENTS.items() if e.side == "server")
HOST_EVENTS = tuple(n for n, e in EVENTS.items() if e.side == "host")


class HookExit(SystemExit):
    """Raised by `Event.accept` and `Event.reject` to end the hook at once, as in PBS.

    It is a SystemExit, so a hook's ``except Exception`` does not swallow it.
    """


class VnodeList(dict[str, Vnode]):
    """``event.vnode_list``: vnode name -> `Vnode`. A hook may add vnodes (exechost_startup)."""

    __slots__ = ("added", "_writable")

    def __init__(self, vnodes: Mapping[str, Vnode] | None = None, writable: bool = False):
        super().__init__(vnodes or {})
        self.added: set[str] = set()
        self._writable = writable

    def __setitem__(self, name: str, vnode: Vnode) -> None:
        if not self._writable:
            raise AttributeReadOnly("this event's vnode_list is read-only")
        if not isinstance(name, str):
            raise TypeError(f"a vnode's name must be a string, not {type(name).__name__}")
        if not isinstance(vnode, Vnode):
            raise TypeError(f"vnode_list[{name!r}] must be a pbsplug.Vnode")
        # A vnode the hook made (or made again) is checked as its writes would be: a bad
        # value raises here, in the hook, and none is stored (Vnode(...) checks nothing).
        vnode.check_values()
        name = plain(name)
        super().__setitem__(name, vnode)
        self.added.add(name)


class Event:
    """What a hook receives: ``event.type``, the objects PBS gives that event (``job``,
    ``vnode_list``, ...), the site's configuration for the running hook (``hook_config``), and
    `accept` / `reject`.

    Objects an event does not carry read as None. ``env``, ``argv`` and ``progname`` are
    writable in execjob_launch only; ``pid`` is read-only.
    """

    def __init__(self, type: str, *, requestor: str = "root", requestor_host: str = "",
                 job: Job | None = None, job_o: Job | None = None,
                 src_queue: Queue | None = None, resv: Reservation | None = None,
                 resv_list: Mapping[str, Reservation] | None = None,
                 vnode: Vnode | None = None, vnode_o: Vnode | None = None,
                 vnode_list: Mapping[str, Vnode] | None = None,
                 vnode_list_fail: Mapping[str, Vnode] | None = None,
                 job_list: Mapping[str, Job] | None = None,
                 progname: str | None = None, argv: list[str] | None = None,
                 env: Mapping[str, str] | None = None, pid: int | None = None,
                 aoe: str | None = None, management: Mapping[str, Any] | None = None):
        if type not in EVENTS:
            raise ValueError(f"unknown event {type!r}; events are: {', '.join(EVENTS)}")
        spec = EVENTS[type]
        self.spec = spec
        self.type = type
        self.requestor = requestor
        self.requestor_host = requestor_host
        self.job = job
        self.job_o = job_o
        self.src_queue = src_queue
        self.resv = resv
        # An object map the event carries is empty, never None, when nothing is in it.
        self.resv_list = dict(resv_list) if resv_list is not None else (
            {} if "resv_list" in spec.objects else None)
        self.vnode = vnode
        self.vnode_o = vnode_o
        self.vnode_list = (VnodeList(vnode_list, spec.vnodes_writable)
                           if vnode_list is not None or "vnode_list" in spec.objects else None)
        self.vnode_list_fail = dict(vnode_list_fail) if vnode_list_fail is not None else (
            {} if "vnode_list_fail" in spec.objects else None)
        self.job_list = dict(job_list) if job_list is not None else (
            {} if "job_list" in spec.objects else None)
        launch = type == "execjob_launch"
        self.progname = progname if progname is not None else ("" if launch else None)
        self.argv = list(argv) if argv is not None else ([] if launch else None)
        self.env = dict(env) if env is not None else ({} if launch else None)
        self._pid = pid
        self.aoe = aoe
        self.management = dict(management) if management is not None else None
        #: The running hook's name and its validated configuration (set by the runner).
        self.hook_name: str | None = None
        self.hook_config: Mapping[str, Any] = {}
        self.logger = logging.getLogger("pbsplug.hook")
        self._decision: tuple[str, str | None] | None = None
        self._launch_seen = self._launch_state()
        self._install_guards()

    @property
    def pid(self) -> int | None:
        """execjob_attach: the process being attached. execjob_launch (pbsplug's addition):
        the process that will run the job once the hooks end; the job and everything it
        starts inherit its cgroup and limits. None where there is no process (an event
        built from data without one)."""
        return self._pid

    @pid.setter
    def pid(self, value: int | None) -> None:
        raise AttributeReadOnly(f"{self.type}: event.pid is read-only")

    # -- decisions ------------------------------------------------------------------------------
    def accept(self, msg: str | None = None) -> None:
        """Accept the event and end the hook now."""
        self._decision = ("accept", message_text(msg))
        raise HookExit(0)

    def reject(self, msg: str | None = None) -> None:
        """Reject the event and end the hook now; the chain stops here. Without a message the
        requester sees PBS's ``<event> request rejected by '<hook>'``. A message that is not
        text is shown as text (``reject(2)``: ``2``)."""
        self._decision = ("reject", message_text(msg))
        raise HookExit(0)

    def logjobmsg(self, job_id: str, message: str) -> None:
        """Log `message` against the job `job_id`, as PBS's ``pbs.logjobmsg``: the server log
        line reads ``...;0008;Server@host;Job;<job_id>;<message>`` (event class job, info),
        not ``Hook;<hook>``. PBS's own hooks name an action this way (PBS_power logs
        ``Job;node_power_off;launch: ...``)."""
        self.logger.info("%s", message, extra={PBS_OBJECT: ("Job", str(job_id))})

    # -- guards ---------------------------------------------------------------------------------
    def settle(self) -> None:
        """What the hook changed in place in its objects' dict and list attributes, recorded
        as writes (`PbsObject.settle`); raises as a refused or bad assignment would."""
        objects = [self.job, self.job_o, self.vnode_o, self.src_queue, self.resv,
                   *self.iter_vnodes(), *(self.job_list or {}).values(),
                   *(self.resv_list or {}).values()]
        for obj in objects:
            if obj is not None and obj._read:
                obj.settle()

    def _install_guards(self) -> None:
        spec = self.spec

        def job_guard(obj: PbsObject, attr: str) -> None:
            if not spec.may_write_job(attr):
                raise AttributeReadOnly(f"{spec.name}: job attribute '{attr}' is read-only here")

        def readonly(obj: PbsObject, attr: str) -> None:
            raise AttributeReadOnly(f"{spec.name}: {obj.kind} '{obj.name}' is read-only here")

        def vnode_guard(obj: PbsObject, attr: str) -> None:
            if not spec.vnodes_writable:
                readonly(obj, attr)

        def resv_guard(obj: PbsObject, attr: str) -> None:
            if not spec.resv_writable:
                readonly(obj, attr)

        if self.job is not None:
            self.job._guard = job_guard
            self.job._action_allowed = spec.host
        for obj in (self.job_o, self.vnode_o, self.src_queue):
            if obj is not None:
                obj._guard = readonly
        # (Through the slot, not `PbsObject.__setattr__`: a replay's periodic event carries
        # a thousand vnodes and thousands of queued jobs.)
        set_guard, set_allowed = _GUARD_SLOT.__set__, _ACTION_SLOT.__set__
        for vn in self.iter_vnodes():
            set_guard(vn, vnode_guard)
        for job in (self.job_list or {}).values():
            set_guard(job, readonly)
            # (job.rerun() and job.delete() as on the event's own job: PBS gives them only
            # in execution-host hooks; a server periodic's call raises, never dropped)
            set_allowed(job, spec.host)
        if self.resv is not None:
            self.resv._guard = resv_guard
        for resv in (self.resv_list or {}).values():
            resv._guard = readonly

    def iter_vnodes(self) -> Iterator[Vnode]:
        """Every writable-by-rule vnode the event carries (vnode, vnode_list, vnode_list_fail)."""
        if self.vnode is not None:
            yield self.vnode
        for vn in (self.vnode_list or {}).values():
            yield vn
        for vn in (self.vnode_list_fail or {}).values():
            yield vn

    # -- plain data -----------------------------------------------------------------------------
    def _launch_state(self) -> tuple[Any, ...]:
        if self.type != "execjob_launch":
            return ()
        argv, env = _launch_part(self.argv, "argv"), _launch_part(self.env, "env")
        return (self.progname, tuple(argv), tuple(sorted(env.items())))

    def take_changes(self) -> dict[str, Any]:
        """What hooks changed since the last call, as plain data:
        ``{"job": {attr: value}, "vnode_list": {name: {attr: value}}, "vnode": {...},
        "resv": {...}, "job_list": {id: {"_action": ...}}, "progname": ..., "argv": [...],
        "env": {...}}``. Only keys with changes appear; ``job["_action"]`` is ``rerun`` or
        ``delete`` after job.rerun()/job.delete(), and so is each ``job_list`` entry's (an
        exechost_periodic hook's call on a job of its list)."""
        out: dict[str, Any] = {}
        for key in ("job", "vnode", "resv"):
            obj = getattr(self, key)
            if obj is not None and obj._changes:
                out[key] = obj.take_changes()
        for key in ("vnode_list", "vnode_list_fail"):
            vnodes = getattr(self, key)
            if not vnodes:
                continue
            changed = {}
            added: set[str] = getattr(vnodes, "added", set())
            for name, vn in vnodes.items():
                if name in added:
                    changed[name] = {**vn.to_dict(), "_new": True}
                    vn.take_changes()
                elif vn._changes:
                    changed[name] = vn.take_changes()
            if isinstance(vnodes, VnodeList):
                vnodes.added.clear()
            if changed:
                out[key] = changed
        asked = {}
        for name, job in (self.job_list or {}).items():
            # (a job_list job is read-only: its one change is a job.rerun() or job.delete()
            # in an execution-host event, exechost_periodic's)
            action = job._changes.pop("_action", None)
            if action is not None:
                asked[name] = {"_action": action}
        if asked:
            out["job_list"] = asked
        state = self._launch_state()
        if state != self._launch_seen:
            out["progname"], out["argv"], out["env"] = (
                self.progname, list(_launch_part(self.argv, "argv")),
                dict(_launch_part(self.env, "env")))
            self._launch_seen = state
        return out

    def apply_changes(self, changes: Mapping[str, Any]) -> None:
        """Replay `take_changes` output from a copy of this event (another process), through
        the same guards and value rules as the hooks' own writes: what the other process
        reports is not trusted (`AttributeReadOnly`, `BadValue`, `TypeError`)."""
        for key in ("job", "vnode", "resv"):
            if key in changes and getattr(self, key) is not None:
                getattr(self, key).apply_changes(changes[key])
        for key in ("vnode_list", "vnode_list_fail"):
            for name, attrs in changes.get(key, {}).items():
                vnodes = getattr(self, key)
                attrs = dict(attrs)
                if attrs.pop("_new", False) or name not in vnodes:
                    attrs.pop("name", None)
                    vn = Vnode(name, attrs)
                    if not isinstance(vnodes, VnodeList):
                        raise AttributeReadOnly(f"{self.type}: {key} takes no new vnode")
                    vnodes[name] = vn  # (checked there)
                    vn._changes.update(vn.to_dict())
                else:
                    vnodes[name].apply_changes(attrs)
        for name, asked in changes.get("job_list", {}).items():
            if self.job_list is None or name not in self.job_list:
                raise AttributeReadOnly(f"{self.type}: job_list has no job '{name}'")
            self.job_list[name].apply_changes(asked)
        if "env" in changes:
            if self.type != "execjob_launch":
                raise AttributeReadOnly(f"{self.type}: only execjob_launch changes the launch")
            problem = launch_problem(changes["progname"], changes["argv"], changes["env"],
                                     (self.progname, self.argv, self.env))
            if problem:
                raise ValueError(problem)
            self.progname = changes["progname"]
            self.argv = list(changes["argv"])
            self.env = dict(changes["env"])

    def to_dict(self) -> dict[str, Any]:
        """The event's objects as plain data, keyed by PBS's names (the `event` CLI's input)."""
        out: dict[str, Any] = {"requestor": self.requestor}
        for key in self.spec.objects:
            value = getattr(self, key)
            if value is None:
                continue
            if isinstance(value, PbsObject):
                out[key] = value.to_dict()
            elif isinstance(value, dict) and key in _OBJECT_MAPS:
                out[key] = {k: v.to_dict() for k, v in value.items()}
            else:
                out[key] = value
        return out

    @classmethod
    def from_dict(cls, type: str, data: Mapping[str, Any]) -> Event:
        """Build an event from plain data keyed by PBS's names. Errors name the bad key."""
        if type not in EVENTS:
            raise ValueError(f"unknown event {type!r}; events are: {', '.join(EVENTS)}")
        spec = EVENTS[type]
        if not isinstance(data, Mapping):
            raise ValueError("the event input must be a JSON object keyed by job, vnode_list, ...")
        allowed = set(spec.objects) | {"requestor", "requestor_host"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"{type} does not carry {', '.join(map(repr, unknown))}; "
                             f"it takes: {', '.join(sorted(allowed))}")
        kwargs: dict[str, Any] = {}
        for key, value in data.items():
            try:
                kwargs[key] = _build(key, value)
            except (TypeError, ValueError, AttributeError) as exc:
                raise ValueError(f"'{key}': {exc}") from None
        return cls(type, **kwargs)


_T = TypeVar("_T")


def _launch_part(value: _T | None, name: str) -> _T:
    """An execjob_launch event's argv or env, never None there unless a hook set it so (the
    runner then keeps no change of that hook's: `_check_changes`, `Runner._outcome`)."""
    if value is None:
        raise TypeError(f"execjob_launch: event.{name} is None")
    return value


_OBJECT_KEYS = {"job": Job, "job_o": Job, "src_queue": Queue, "resv": Reservation,
                "vnode": Vnode, "vnode_o": Vnode}
_OBJECT_MAPS = {"vnode_list": Vnode, "vnode_list_fail": Vnode, "job_list": Job,
                "resv_list": Reservation}


def _build(key: str, value: Any) -> Any:
    if key in _OBJECT_KEYS:
        if not isinstance(value, Mapping):
            raise ValueError("expected a JSON object of attributes")
        return object_from_dict(_OBJECT_KEYS[key], value)
    if key in _OBJECT_MAPS:
        cls = _OBJECT_MAPS[key]
        if isinstance(value, list):  # a list of objects, each naming itself
            objs = [object_from_dict(cls, v) for v in value]
            return {o.name: o for o in objs}
        if not isinstance(value, Mapping):
            raise ValueError("expected a JSON object of name -> attributes")
        return {name: object_from_dict(cls, attrs, name) for name, attrs in value.items()}
    if key == "argv":
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise ValueError("expected a list of strings")
        return value
    if key == "env":
        if not isinstance(value, Mapping) or not all(
                isinstance(v, str) for v in value.values()):
            raise ValueError("expected an object of string values")
        return value
    if key == "pid" and not isinstance(value, int):
        raise ValueError("expected an integer")
    return value

