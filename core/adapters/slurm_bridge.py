"""Slurm's scripts as pbsplug events, and each outcome carried out with PBS's meaning.

`slurm_program` (the program Slurm runs) sends ``{"script", "env"}`` to the host's worker
(`worker`, with `load` and `dispatch` below) or, where there is none, calls `dispatch` itself.
`dispatch` builds pbsplug's events from Slurm's environment and ``scontrol`` (`slurm_read`),
fires them through pbsplug's runner (the plugins' chain, order, alarm and fail_action), and
maps the outcome onto Slurm:

===================  ==============================================  =========================
script               events                                          outcome in Slurm
===================  ==============================================  =========================
PrologSlurmctld      runjob                                          reject, error, alarm: exit
                                                                     1 (Slurm requeues a batch
                                                                     job, never drains)
Prolog               execjob_begin, execjob_prologue                 reject: ``scontrol
                                                                     requeue`` (``scancel`` for
                                                                     delete() or launch), exit
                                                                     0 (no drain); error or
                                                                     alarm: the same, and with
                                                                     fail_action offline_vnodes
                                                                     the node drained with the
                                                                     hook's name
TaskProlog (as the   execjob_launch, per task, event.pid the task    ``export`` / ``unset``;
job's user, through                                                  reject: ``scancel``
the root worker)
Epilog               execjob_epilogue, execjob_end                   always exit 0 (PBS ignores
                                                                     their rejects)
EpilogSlurmctld      jobobit                                         always exit 0
HealthCheckProgram   exechost_startup (first run after slurmd        vnode changes (offline:
                     starts), then exechost_periodic                 drain), exit 0
SuspendProgram,      periodic (`slurm_power`)                        the plugins' drivers; see
ResumeProgram,                                                       `slurm_power`
``pbsplug slurm
periodic``
===================  ==============================================  =========================

A Slurm action that fails (scontrol cannot requeue) ends the script with exit 1, so that
Slurm's own rule (drain and requeue) stops the job rather than letting it run.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import safedirs
from ..events import Event
from ..objects import Job, PbsObject, Vnode
from ..runner import ACCEPT, ALARM, ERROR, Outcome, Runner
from .pbs_wire import one_line
from .slurm_program import is_stepd
from .slurm_read import (
    NODE_NAME,
    JobTextError,
    Slurm,
    SlurmError,
    UnnamedJobError,
    checked_job_id,
    passwd_entry,
)

if TYPE_CHECKING:
    import pwd

log = logging.getLogger("pbsplug.slurm")

#: squeue's states of a job that still has something on its nodes: configuring, running,
#: completing, resizing, suspended, signaling, staging out, stopped.
NODE_JOB_STATES = "CF,R,CG,RS,S,SI,SO,ST"

#: The events each script fires, in order.
SCRIPT_EVENTS = {
    "prolog_slurmctld": ("runjob",),
    "prolog": ("execjob_begin", "execjob_prologue"),
    "task_prolog": ("execjob_launch",),
    "epilog": ("execjob_epilogue", "execjob_end"),
    "epilog_slurmctld": ("jobobit",),
    "health_check": ("exechost_startup", "exechost_periodic"),
}
#: What a refusal of the state folder (or a folder in it) calls it.
STATE_FOLDER = "the state folder (--state-dir)"
#: What a refusal of the log file's folder calls it.
LOG_FOLDER = "the log file's folder (--log-file)"
#: PBS's comment on a vnode a hook's error took offline (pbs-behavior.md).
OFFLINE_REASON = "offlined by hook '{hook}' due to hook error"


class Context:
    """What a worker keeps between events: the runner over the site's plugins, Slurm's
    commands and the installed config."""

    def __init__(self, config: Mapping[str, Any], runner: Runner, slurm: Slurm):
        self.config = config
        self.runner = runner
        self.slurm = slurm
        #: (pid, uid, gid) of the process that sent the request (the worker's ``_peer``).
        self.peer: Any = None

    @property
    def state_dir(self) -> Path:
        return Path(self.config["state_dir"])

    @property
    def power_dir(self) -> Path:
        """The power programs' records and lock: ``<state-dir>/power`` (SlurmUser's); an
        install by an earlier pbsplug kept them in the state folder itself."""
        return Path(self.config.get("power_dir") or self.config["state_dir"])


def slurm_user_uid(config: Mapping[str, Any]) -> int | None:
    """The uid of the SlurmUser the install recorded (one that is not root), or None."""
    pw = slurm_user_entry(config)
    return pw.pw_uid if pw is not None else None


def slurm_user_entry(config: Mapping[str, Any], *, refuse_missing: bool = False
                     ) -> pwd.struct_passwd | None:
    """The passwd entry of the SlurmUser the install recorded (one that is not root), or
    None: looked up by its name (its ``pw_name`` is that name), or by its uid where
    slurm.conf gave SlurmUser as a number. A recorded user this host does not have is None
    too (a program asks whether it runs as SlurmUser), or with `refuse_missing` an
    `OSError` in one line: a root 'pbsplug slurm periodic', which would become that user,
    would otherwise run SlurmUser's event as root."""
    su = config.get("slurm_user")
    if not isinstance(su, Mapping) or not su.get("name"):
        return None
    name = str(su["name"])
    pw = passwd_entry(name)
    if pw is None:
        if refuse_missing:
            raise OSError(f"SlurmUser {name[:80]!r}, as 'pbsplug slurm install' recorded "
                          "it, is no user on this host: run install again")
        return None
    return pw if pw.pw_uid else None  # (another name of root's is root)


def become_slurm_user(pw: pwd.struct_passwd) -> None:
    """This process (root's) switched for good to SlurmUser, as `slurm_user_entry` found it:
    its groups, gid and uid, real, effective and saved (`OSError` when the system refuses
    one)."""
    os.initgroups(pw.pw_name, pw.pw_gid)
    os.setresgid(pw.pw_gid, pw.pw_gid, pw.pw_gid)
    os.setresuid(pw.pw_uid, pw.pw_uid, pw.pw_uid)


def load(config: Mapping[str, Any], mode: str | None = "inprocess",
         as_slurm_user: bool | None = None) -> Context:
    """The plugins the install named, loaded once (in the worker, or in the program).

    In the worker every hook runs in the child the worker forked for the script, under
    SIGALRM's alarm (``inprocess``: no second fork per event); the worker kills a child
    still running past its deadline. Without a worker (`run_here`) each hook gets the
    runner's own isolation (a forked child, killed past its alarm).

    ``PBSPLUG_HOME`` is set for the plugins (their default folders are under it): the
    install's, or for the events run as SlurmUser (`as_slurm_user`; by default: when this
    process is SlurmUser), the home install made SlurmUser's. The log file is SlurmUser's
    own when this process is SlurmUser (root's is root's alone)."""
    from .bridge import plugin_set

    su = config.get("slurm_user") if isinstance(config.get("slurm_user"), Mapping) else None
    is_slurm_user = su is not None and os.geteuid() == slurm_user_uid(config)
    if as_slurm_user is None:
        as_slurm_user = is_slurm_user
    home = su.get("home") if su is not None and as_slurm_user else config.get("home")
    if home:
        os.environ["PBSPLUG_HOME"] = str(home)
    _log_to(str((su.get("log_file") if su is not None and is_slurm_user
                 else config.get("log_file")) or ""))
    plugins = plugin_set(config.get("plugins") or {}, config.get("config_file")
                         or "<pbsplug-slurm.json>")
    runner = Runner(plugins, mode=mode, trace_file=config.get("trace_file") or None)
    slurm = Slurm(config.get("bin_dir") or "/usr/bin", config.get("slurm_conf") or "")
    return Context(config, runner, slurm)


def open_log(path: str) -> None:
    """The log file `path` appended to from now on (`_log_to`); a later `load` keeps it:
    a root 'pbsplug slurm periodic' opens root's, then runs as SlurmUser."""
    _log_to(path)


def _log_to(path: str) -> None:
    """The log file, appended to. Its folder follows pbsplug.safedirs' rule (`_log_folder`)
    and the file is opened without following a link (in a folder another user could write,
    a link there had root append to any file). The events run without the log file when it
    is refused or cannot be opened, and why goes where an admin sees it (`_no_log_file`)."""
    root = logging.getLogger()
    if path and not any(getattr(h, "_pbsplug_slurm", False) for h in root.handlers):
        try:
            _log_folder(Path(os.path.abspath(path)).parent)
            fd = safedirs.open_file(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if os.fstat(fd).st_nlink != 1:  # (another name of a file of root's)
                    raise safedirs.UnsafeFolder(f"refusing {path}: it has other names "
                                                "(hard links); remove it")
                handler = logging.StreamHandler(os.fdopen(fd, "a", encoding="utf-8",
                                                          errors="backslashreplace"))
            except BaseException:
                os.close(fd)
                raise
        except safedirs.UnsafeFolder as exc:
            _no_log_file(str(exc))
            return
        except OSError as exc:
            _no_log_file(f"cannot open {exc.filename or path}: {exc.strerror or exc}")
            return
        handler._pbsplug_slurm = True  # type: ignore[attr-defined]
        handler.setFormatter(OneLineFormatter(
            "%(asctime)s %(process)d %(name)s %(levelname)s: %(message)s"))
        root.addHandler(handler)
        root.setLevel(logging.INFO)


class OneLineFormatter(logging.Formatter):
    """Each record's message on one line: a line break or other control character in it
    shown escaped (``\\n``). What the bridge logs names what users choose (a task's
    environment, the path of the program that asked the task worker): a line break there
    wrote a line of theirs in root's log, a forged record with its own time and level. A
    traceback after the message keeps its lines. (PBS's side keeps its texts to one line by
    the same rule: `pbs_wire.one_line`, stdlib only, serves both.)"""

    def formatMessage(self, record: logging.LogRecord) -> str:
        return one_line(super().formatMessage(record))


#: How the bridge names itself in syslog.
SYSLOG_IDENT = "pbsplug-slurm"


def _no_log_file(why: str) -> None:
    """Why the events run without the log file, in one line: on stderr (Slurm's log, where a
    program runs the events itself) and to syslog (``daemon.err``, through the standard
    library's `syslog`): the workers' stderr is /dev/null, so a refusal seen only there was
    seen by no one. Without a syslog daemon the line is lost, as it was before."""
    line = f"pbsplug: no log file: {why}"
    print(line, file=sys.stderr)
    try:
        import syslog

        syslog.openlog(SYSLOG_IDENT, syslog.LOG_PID, syslog.LOG_DAEMON)
        syslog.syslog(syslog.LOG_ERR, line)
    except (ImportError, OSError, ValueError):
        pass


def _log_folder(folder: Path) -> None:
    """The log file's folder, made when missing, by pbsplug.safedirs' rule but for one
    thing: the folder itself may be writable by its group when it is root's (or this
    user's), as Ubuntu's /var/log is (root:syslog, 0775; logrotate runs there with ``su``).
    Every level above it still follows the rule and the folder is a real one, so the
    path leads there; what is appended to is the file opened there, never through a link,
    a plain file of root's with no other name that no one else may write: the group can
    make no such file, only move one of root's it could already move or remove. Otherwise
    `UnsafeFolder`, the rule's own refusal."""
    try:
        safedirs.ensure_folder(folder, LOG_FOLDER)
    except safedirs.UnsafeFolder:
        try:
            info: os.stat_result | None = os.lstat(folder)
        except OSError:
            info = None
        if info is None or not stat.S_ISDIR(info.st_mode) or info.st_mode & stat.S_IWOTH \
                or info.st_uid not in (0, os.geteuid()) \
                or safedirs.folder_problem(folder.parent):
            raise


def dispatch(ctx: Context, request: Mapping[str, Any]) -> dict[str, Any]:
    """One Slurm script's run: ``{"exit": status, "stdout": text}``. Whatever goes wrong in
    pbsplug itself is one log line and the script's failure, never a traceback in Slurm."""
    script = str(request.get("script") or "")
    env = request.get("env")
    if not isinstance(env, Mapping):
        return _answer(1, f"pbsplug: the request carries no environment for {script!r}")
    env = {str(k): str(v) for k, v in env.items()}
    ctx.peer = request.get("_peer")
    if ctx.config.get("public") and script != "task_prolog":
        # The task worker's socket is every local user's: a request there for any other
        # script would run it as root with the sender's environment (an Epilog for another
        # user's job, a SuspendProgram for any node).
        peer = ctx.peer if isinstance(ctx.peer, list) and len(ctx.peer) == 3 else [-1] * 3
        log.warning("request for %r from uid %s refused: the task worker serves TaskProlog "
                    "alone", script[:40], peer[1])
        return _answer(1, "pbsplug: the task worker serves TaskProlog alone")
    handler = HANDLERS.get(script)
    if handler is None:
        return _answer(1, f"pbsplug: no Slurm script {script!r}; scripts are: "
                          + ", ".join(HANDLERS))
    # (a public socket's request is any local user's: their word on a site program is
    # no one's; TaskProlog runs the site's own itself, and sends none)
    site = 0 if ctx.config.get("public") else _site_failed(script, env, request)
    if site and script not in RUN_AFTER_SITE_FAILED:
        return _answer(site)
    try:
        answer = handler(ctx, env, list(request.get("argv") or []))
        return {**answer, "exit": site} if site else answer
    except (SlurmError, ValueError, OSError) as exc:
        log.error("%s job %s: %s", script, env.get("SLURM_JOB_ID", "-"), exc)
        return _answer(1, f"pbsplug {script}: {exc}")
    except Exception as exc:  # a shape of Slurm's answers not foreseen: still one line
        log.exception("%s job %s: %s: %s", script, env.get("SLURM_JOB_ID", "-"),
                      type(exc).__name__, exc)
        return _answer(1, f"pbsplug {script}: {type(exc).__name__}: {exc}")


#: The scripts whose events run when the site's program they chain failed: an Epilog's
#: cleanup must happen (the script still exits with the site's status).
RUN_AFTER_SITE_FAILED = ("epilog", "epilog_slurmctld")


def _site_failed(script: str, env: Mapping[str, str], request: Mapping[str, Any]) -> int:
    """The exit status of the site's own program that the program ran first
    (``slurm_program.run_site``: the slurm.conf line pbsplug replaced), when it failed,
    with one line in the log saying so; 0 when it did not fail (or there is none)."""
    status = request.get("site_status")
    if not isinstance(status, int) or isinstance(status, bool) or not status:
        return 0
    status = status & 0xFF or 1
    then = ("pbsplug's events run all the same" if script in RUN_AFTER_SITE_FAILED
            else "pbsplug's events do not run")
    log.warning("%s job %s: the site's program %s exited %d: %s; the script exits %d",
                script, env.get("SLURM_JOB_ID", "-"), str(request.get("site_program"))[:200],
                status, then, status)
    return status


def _answer(status: int, error: str = "", stdout: str = "") -> dict[str, Any]:
    return {"exit": status, "stdout": stdout, "error": error}


def this_node(env: Mapping[str, str]) -> str:
    """``SLURMD_NODENAME`` (slurmd's), else this host's short name; checked, since it goes
    into scontrol's input and the state folder's paths."""
    name = env.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0]
    if not NODE_NAME.fullmatch(name):
        raise SlurmError(f"SLURMD_NODENAME={name[:80]!r}: expected a node name")
    return name


def _fire(ctx: Context, name: str, data: Mapping[str, Any]) -> Outcome:
    return ctx.runner.fire(Event.from_dict(name, data))


def _fire_built(ctx: Context, name: str, objects: Mapping[str, Any]) -> Outcome:
    """`_fire` for objects `_deferred_data` built (or plain data, once read)."""
    if isinstance(objects.get("job"), Job):
        return ctx.runner.fire(Event(name, **objects))
    return _fire(ctx, name, objects)


def _stopped(out: Outcome, job_id: str, script: str) -> None:
    (log.warning if out.kind == "reject" else log.error)(
        "%s job %s: %s %s by '%s': %s (consequence: %s%s)", script, job_id, out.event,
        "rejected" if out.kind == "reject" else f"{out.kind}", out.hook, out.detail,
        out.consequence, f", fail_action {','.join(out.fail_action)}" if out.fail_action
        else "")


# -- Slurm's reading, taken when a hook first needs it ------------------------------------

class Reading:
    """One ``scontrol`` reading of a job and this node (`Slurm.job_and_nodes`), taken the
    first time a hook of the script needs an attribute that Slurm's environment does not
    give, and shared by the script's events. A Prolog or Epilog whose hooks need nothing
    more costs no Slurm command at all (Slurm's docs ask scripts not to call them).

    A failed reading is kept in `error`: the hook that asked gets the `SlurmError` (or the
    `OSError` of a command that could not run), and the script then fails as it did when
    the reading came first (exit 1, Slurm's own rule), whatever the hook made of it."""

    def __init__(self, slurm: Slurm, job_id: str, node: str,
                 extra: Mapping[str, Any] | None = None):
        self.slurm = slurm
        self.job_id = job_id
        self.node = node
        self.extra = dict(extra or {})
        self.job: dict[str, Any] | None = None
        self.vnodes: dict[str, dict[str, Any]] = {}
        self.error: SlurmError | OSError | None = None

    def get(self) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        if self.job is None:
            if self.error is not None:
                raise self.error
            try:
                job, vnodes = self.slurm.job_and_nodes(self.job_id, [self.node])
            except (SlurmError, OSError) as exc:
                self.error = exc
                raise
            self.job, self.vnodes = {**job, **self.extra}, vnodes
        return self.job, self.vnodes

    def check(self) -> None:
        """The script's failure when the reading failed (`dispatch` answers exit 1)."""
        if self.error is not None:
            raise self.error


class _Deferred(PbsObject):
    """What `SlurmJob` and `SlurmVnode` share: the attributes named in ``_known`` answer at
    once; reading any other, or the whole object, first completes it from the `Reading`.
    A hook's own writes (``_changes``) are kept over what the reading brings. Placed before
    `Job` or `Vnode` in a subclass's bases: `super()` here is theirs."""

    __slots__ = ()
    # (each subclass's slots; set in its __init__)
    _reading: Reading | None
    _known: frozenset[str]
    #: The plain class a pickled copy is rebuilt as.
    _plain: type[PbsObject]

    def _from(self, reading: Reading) -> dict[str, Any]:
        """This object's attributes, as the reading gives them."""
        raise NotImplementedError

    def _complete(self) -> None:
        reading = self._reading
        if reading is None:
            return
        attrs = self._from(reading)
        object.__setattr__(self, "_reading", None)
        for key, value in attrs.items():
            if key not in self._changes and key not in ("id", "name"):
                self._attrs[key] = self._wrap(key, value)

    def __getattr__(self, key: str) -> Any:
        if not key.startswith("_") and key not in self._known:
            self._complete()
        return super().__getattr__(key)

    def get(self, key: str, default: Any = None) -> Any:
        if key not in self._known:
            self._complete()
        return super().get(key, default)

    def __contains__(self, key: str) -> bool:
        if key not in self._known:
            self._complete()
        return super().__contains__(key)

    def __iter__(self) -> Iterator[str]:
        self._complete()
        return super().__iter__()

    def to_dict(self) -> dict[str, Any]:
        self._complete()
        return super().to_dict()

    def apply_changes(self, changes: Mapping[str, Any]) -> None:
        self._complete()  # a resource change merges into the read mapping, never replaces it
        super().apply_changes(changes)

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        self._complete()
        rebuild, (_, name, attrs) = super().__reduce__()
        return rebuild, (self._plain, name, attrs)


class SlurmJob(_Deferred, Job):
    """`Job` built from Slurm's environment, completed from the `Reading` when needed."""

    __slots__ = ("_reading", "_known")
    _plain = Job

    def __init__(self, job_id: str, known: Mapping[str, Any], reading: Reading):
        object.__setattr__(self, "_reading", reading)
        object.__setattr__(self, "_known", frozenset(known) | {"id"})
        super().__init__(job_id, known)

    def _from(self, reading: Reading) -> dict[str, Any]:
        return reading.get()[0]


class SlurmVnode(_Deferred, Vnode):
    """This node's `Vnode`, completed from the `Reading` when needed."""

    __slots__ = ("_reading", "_known")
    _plain = Vnode

    def __init__(self, name: str, reading: Reading):
        object.__setattr__(self, "_reading", reading)
        object.__setattr__(self, "_known", frozenset())
        super().__init__(name)

    def _from(self, reading: Reading) -> dict[str, Any]:
        return reading.get()[1].get(self._name) or {}


#: A user or partition name as Slurm's environment may give it; another value is left to
#: the reading.
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]*")


def known_job(env: Mapping[str, str], job_id: str) -> dict[str, Any]:
    """What slurmd's environment for the Prolog and Epilog says of the job, as
    `slurm_read.job_attributes` names it: the owner (``SLURM_JOB_USER``) and the partition
    (``SLURM_JOB_PARTITION``). Only slurmd (root) sets these; a value that does not look like
    a name is not taken, and the reading answers for it."""
    out: dict[str, Any] = {"id": job_id}
    user = env.get("SLURM_JOB_USER") or ""
    if _NAME.fullmatch(user):
        out["Job_Owner"] = out["euser"] = user
    partition = env.get("SLURM_JOB_PARTITION") or ""
    if _NAME.fullmatch(partition):
        out["queue"] = partition
    return out


def _deferred_data(ctx: Context, env: Mapping[str, str], job_id: str, node: str,
                   extra: Mapping[str, Any] | None = None
                   ) -> tuple[Reading, Callable[[], dict[str, Any]]]:
    """(reading, build): `build()` gives one event's job and vnode_list, fresh for each
    event (as `Event.from_dict` of the same data would), over one shared reading."""
    known = {**known_job(env, job_id), **(extra or {})}
    # What slurmd says (the owner, the partition) stays over the reading too: scontrol's
    # text is the job owner's to shape (`slurm_read._unambiguous`), slurmd's is not.
    reading = Reading(ctx.slurm, job_id, node, known)

    def build() -> dict[str, Any]:
        if reading.job is not None:  # read already: plain objects from the reading
            return {"job": reading.job, "vnode_list": reading.vnodes}
        return {"job": SlurmJob(job_id, known, reading),
                "vnode_list": {node: SlurmVnode(node, reading)}}

    return reading, build


# -- vnode and job changes ----------------------------------------------------------------

def apply_vnode_changes(ctx: Context, changes: Mapping[str, Any], hook: str | None) -> None:
    """A hook's vnode changes as Slurm has them: a state with ``offline`` drains the node
    (reason: the comment the hook set, else that the hook did it); one without, for a node a
    hook had drained, resumes it. Other attributes have no Slurm counterpart and are
    logged."""
    for name, attrs in (changes or {}).items():
        attrs = dict(attrs)
        state = attrs.pop("state", None)
        comment = attrs.pop("comment", None)
        attrs.pop("_new", None)
        if state is not None:
            states = set(str(state).split(","))
            if "offline" in states:
                reason = comment or f"offlined by pbsplug hook '{hook}'"
                ctx.slurm.update(f"nodename={name}", "state=drain", f"reason={reason}")
                log.info("node %s drained: %s", name, reason)
            else:
                ctx.slurm.update(f"nodename={name}", "state=resume")
                log.info("node %s resumed by hook '%s'", name, hook)
        if attrs:
            log.info("hook '%s' changed %s of node %s: no Slurm counterpart, not applied",
                     hook, ", ".join(sorted(attrs)), name)


def apply_job_changes(ctx: Context, job_id: str, changes: Mapping[str, Any],
                      hook: str | None) -> None:
    """A hook's job changes: the comment becomes the job's Slurm comment; the rest is
    logged (no Slurm counterpart a node script may set)."""
    changes = {k: v for k, v in (changes or {}).items() if k != "_action"}
    comment = changes.pop("comment", None)
    if comment is not None:
        ctx.slurm.update(f"jobid={job_id}", f"comment={comment}")
    if changes:
        log.info("hook '%s' changed %s of job %s: not applied in Slurm", hook,
                 ", ".join(sorted(changes)), job_id)


def _host_failure(ctx: Context, out: Outcome, job_id: str, node: str, script: str
                  ) -> dict[str, Any]:
    """A Prolog event that did not accept: the node drained only for an error or alarm with
    offline_vnodes; the job requeued or cancelled through the controller, as PBS would."""
    _stopped(out, job_id, script)
    if out.kind in (ERROR, ALARM) and "offline_vnodes" in out.fail_action:
        reason = OFFLINE_REASON.format(hook=out.hook)
        ctx.slurm.update(f"nodename={node}", "state=drain", f"reason={reason}")
        log.warning("node %s drained: %s", node, reason)
    if out.kind == "reject":
        apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
    message = out.message or f"{out.event} {out.kind}"
    try:
        ctx.slurm.update(f"jobid={job_id}", f"comment=pbsplug {out.event}: {message}"[:250])
    except SlurmError as exc:
        log.warning("job %s: its comment could not be set: %s", job_id, exc)
    try:
        _stop(ctx, job_id, out.consequence == "delete", ctx.slurm.requeue, out.event)
    except SlurmError as exc:
        return _answer(1, f"pbsplug {script}: job {job_id} could not be stopped: {exc}")
    return _answer(0)


#: ``JobState``s of a job that is not running (22.05): pending (requeued or not started),
#: ending or ended; ``GONE``: Slurm no longer knows its id (`Slurm.job_state`).
STOPPED_STATES = frozenset({
    "PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "SPECIAL_EXIT", "COMPLETING",
    "COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL",
    "DEADLINE", "OUT_OF_MEMORY", "GONE"})


def _stop(ctx: Context, job_id: str, delete: bool, requeue: Callable[[str], None],
          why: str) -> None:
    """Job `job_id` cancelled (`delete`) or requeued by `requeue` (cancelled when Slurm
    will not requeue it: PBS deletes a job it cannot rerun). A requeue or cancel Slurm
    answers with an error is read back (`_stopped_already`): a job found pending or ended
    is stopped, not a failure (22.05: ``requeue <het job>`` with one part
    ``--no-requeue`` fails yet requeues the other parts; a second part's Prolog finds the
    job requeued by the first's, ``Job is pending execution``; and Slurm cancels no
    pending part alone). `SlurmError` when the job still runs and could not be stopped."""
    if delete:
        if _cancelled(ctx, job_id):
            log.info("job %s cancelled (%s)", job_id, why)
        return
    try:
        requeue(job_id)
        log.info("job %s requeued (%s)", job_id, why)
        return
    except SlurmError as exc:  # not requeueable (--no-requeue): PBS would delete
        if isinstance(exc, UnnamedJobError):
            raise
        if _stopped_already(ctx, job_id, exc):
            return
        refused = exc
    if _cancelled(ctx, job_id):
        log.warning("job %s cannot be requeued (%s): cancelled", job_id, refused)


def _cancelled(ctx: Context, job_id: str) -> bool:
    """Job `job_id` cancelled: True; False when Slurm refused and the job is found stopped
    all the same (`_stopped_already`). `SlurmError` when it still runs."""
    try:
        ctx.slurm.cancel(job_id)
    except SlurmError as exc:
        if isinstance(exc, UnnamedJobError) or not _stopped_already(ctx, job_id, exc):
            raise
        return False
    return True


def _stopped_already(ctx: Context, job_id: str, exc: SlurmError) -> bool:
    """Whether job `job_id`, whose stop Slurm answered with `exc`, is stopped all the same
    (`STOPPED_STATES`), read back from Slurm; logged either way."""
    try:
        state = ctx.slurm.job_state(job_id)
    except SlurmError as err:
        log.warning("job %s: not stopped (%s), and its state not read: %s", job_id, exc, err)
        return False
    if state in STOPPED_STATES:
        log.warning("job %s is %s: not stopped again (Slurm answered: %s)", job_id, state,
                    exc)
        return True
    log.warning("job %s is %s: not stopped (%s)", job_id, state, exc)
    return False


# -- the scripts ----------------------------------------------------------------------------

def prolog_slurmctld(ctx: Context, env: Mapping[str, str], argv: list[str]
                     ) -> dict[str, Any]:
    job_id = checked_job_id(env.get("SLURM_JOB_ID"))
    try:
        job = ctx.slurm.job(job_id)
    except JobTextError as exc:  # exit 1 requeued it, to fail again, for ever
        return _held_for_its_text(ctx, job_id, exc, "PrologSlurmctld")
    out = _fire(ctx, "runjob", {"job": {**job, **known_job(env, job_id)}})
    if out.accepted:
        return _answer(0)
    _stopped(out, job_id, "PrologSlurmctld")
    try:
        ctx.slurm.update(f"jobid={job_id}",
                         f"comment=Not Running: pbsplug runjob: {out.message}"[:250])
    except SlurmError as exc:
        log.warning("job %s: its comment could not be set: %s", job_id, exc)
    return _answer(1, f"pbsplug runjob: {out.message}")


def prolog(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    job_id = checked_job_id(env.get("SLURM_JOB_ID"))
    node = this_node(env)
    reading, build = _deferred_data(ctx, env, job_id, node)
    for name in ("execjob_begin", "execjob_prologue"):
        out = _fire_built(ctx, name, build())
        try:
            reading.check()
        except JobTextError as exc:
            return _held_for_its_text(ctx, job_id, exc, "Prolog")
        if not out.accepted:
            return _host_failure(ctx, out, job_id, node, "Prolog")
        apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
        apply_job_changes(ctx, job_id, out.changes.get("job") or {}, out.hook)
    return _answer(0)


def _held_for_its_text(ctx: Context, job_id: str, exc: JobTextError, script: str
                       ) -> dict[str, Any]:
    """A Prolog (or PrologSlurmctld) whose job could not be read for its owner's text
    (`JobTextError`): the job requeued held (cancelled when it cannot be requeued), as
    Slurm holds a job whose Prolog failed, but the node left in service. Exit 1 drained
    it: any user could drain the nodes their jobs were sent to, with a comment or a name
    (and PrologSlurmctld's exit 1 requeued the job to fail again, for ever)."""
    log.error("%s job %s: %s: the job is requeued held; the node stays in service",
              script, job_id, exc)
    try:
        ctx.slurm.update(f"jobid={job_id}", f"comment=pbsplug {script}: {exc}"[:250])
    except SlurmError as err:
        log.warning("job %s: its comment could not be set: %s", job_id, err)
    try:
        _stop(ctx, job_id, False, ctx.slurm.requeue_hold, f"{script}: its text")
    except SlurmError as err:
        return _answer(1, f"pbsplug {script}: job {job_id} could not be stopped: {err}")
    return _answer(0)


def _proc_parent(pid: int) -> int:
    return _proc_stat(pid)[0]


def _proc_stat(pid: int) -> tuple[int, int]:
    """(parent pid, start time in clock ticks since boot) of the process `pid`: the start
    time tells it from a later process given the same pid."""
    text = Path(f"/proc/{pid}/stat").read_text()
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19])


def _proc_environ(pid: int) -> dict[str, str]:
    out = {}
    for item in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


#: The title slurmstepd gives itself: ``slurmstepd: [<job id>.<step>]`` (22.05:
#: ``[12.0]``, ``[12.batch]``; the task processes it forks keep it until they exec).
_STEPD_TITLE = re.compile(rb"slurmstepd: \[([0-9]{1,10})\.")


def _step_of(task: int, stepd: str) -> tuple[str, str | None]:
    """(job id, node) of the step the task process `task` belongs to, from its parent,
    the step's slurmstepd (root's: nothing in it is the task owner's): the job id from
    the title slurmstepd gives itself, the node from the socket it listens on in
    SlurmdSpoolDir (``<node>_<job id>.<step id>``), or None when no such socket is found.
    `ValueError` naming what is wrong when the parent is not a slurmstepd of root's with
    that title."""
    step = _proc_parent(task)
    exe = os.readlink(f"/proc/{step}/exe")
    owner = os.stat(f"/proc/{step}").st_uid
    if not is_stepd(exe, stepd) or owner != 0:
        raise ValueError(f"the task's parent {step} is not Slurm's slurmstepd ({exe}, uid "
                         f"{owner})")
    title = _STEPD_TITLE.match(Path(f"/proc/{step}/cmdline").read_bytes())
    if title is None:
        raise ValueError(f"the task's slurmstepd {step} does not name its step")
    job_id = title.group(1).decode()
    sockets = set()
    for fd in os.listdir(f"/proc/{step}/fd"):
        try:
            link = os.readlink(f"/proc/{step}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1].isdigit():
            sockets.add(int(link[8:-1]))
    # The names its sockets are bound to, as the kernel says them: /proc/net/unix prints a
    # path as it is, so any user's socket bound to a name holding a line break added a line
    # of their own there, giving this step's socket's inode and another node's name.
    suffix = re.compile(rf"_{job_id}\.[0-9]+")
    nodes = set()
    for name in socket_names(sockets).values():
        base = os.path.basename(name)
        found = suffix.search(base)
        if found and found.end() == len(base) and NODE_NAME.fullmatch(base[:found.start()]):
            nodes.add(base[:found.start()])
    if len(nodes) > 1:
        raise ValueError(f"the task's slurmstepd {step} listens for several nodes: "
                         + ", ".join(sorted(nodes)))
    return job_id, (nodes.pop() if nodes else None)


#: sock_diag (linux/sock_diag.h, linux/unix_diag.h): the netlink protocol, the request's
#: type, and what a UNIX socket's request asks for (its name).
_NETLINK_SOCK_DIAG, _SOCK_DIAG_BY_FAMILY, _UDIAG_SHOW_NAME, _UNIX_DIAG_NAME = 4, 20, 1, 0
_NLMSG_ERROR = 2


def socket_names(inodes: set[int]) -> dict[int, str]:
    """The path each UNIX socket of `inodes` (in this network namespace) is bound to (for a
    connection accepted on a listening socket, the listener's), as the kernel's sock_diag
    gives it, one socket at a time; sockets of other kinds, unbound or abstract ones, and
    all of them where this kernel cannot say (no unix_diag) are left out."""
    import struct

    names: dict[int, str] = {}
    try:
        diag = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC,
                             _NETLINK_SOCK_DIAG)
    except OSError:
        return names
    with diag:
        diag.settimeout(5)
        for seq, ino in enumerate(sorted(inodes), 1):
            if not 0 < ino < 2**32:
                continue
            # unix_diag_req: family, protocol, pad, states (all), inode, show, cookie (none)
            request = struct.pack("=BBHIIIII", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, ino,
                                  _UDIAG_SHOW_NAME, 0xFFFFFFFF, 0xFFFFFFFF)
            try:
                diag.send(struct.pack("=IHHII", 16 + len(request), _SOCK_DIAG_BY_FAMILY, 1,
                                      seq, 0) + request)
                while True:
                    answer = diag.recv(65536)
                    if len(answer) >= 16 and struct.unpack_from("=I", answer, 8)[0] == seq:
                        break
            except OSError:
                return names
            length, kind = struct.unpack_from("=IH", answer)
            if kind == _NLMSG_ERROR or length > len(answer) or length < 32:
                continue
            # unix_diag_msg (16 bytes: family, type, state, pad, inode, cookie), then
            # attributes: length, type, the value padded to 4 bytes
            if struct.unpack_from("=I", answer, 20)[0] != ino:
                continue
            at = 32
            while at + 4 <= length:
                size, attr = struct.unpack_from("=HH", answer, at)
                if size < 4 or at + size > length:
                    break
                value = answer[at + 4:at + size]
                if attr == _UNIX_DIAG_NAME and value[:1] not in (b"", b"\0"):
                    names[ino] = value.rstrip(b"\0").decode(errors="replace")
                at += (size + 3) & ~3
    return names


def task_prolog(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    """execjob_launch for one task, asked by TaskProlog (run by Slurm as the job's user) on
    the node's public task socket. Who asks is the kernel's word (``_peer``), never the
    request's: the asker's parent must be a task process (a fork of slurmd's slurmstepd,
    not yet the user's program) of that user, the job and node are its step's (`_step_of`),
    and the job must be that user's. The task process is ``event.pid``: what a hook puts it
    in (a cpuset), the task and everything it starts are in. The environment is the task's
    own (the asker's, as slurmstepd gave it)."""
    peer = ctx.peer
    if not peer or len(peer) != 3:
        return _answer(1, "pbsplug TaskProlog: the request did not come through the socket")
    asker, uid, _ = (int(v) for v in peer)
    try:
        task = _proc_parent(asker)
        task_stat = _proc_stat(task)
        exe = os.readlink(f"/proc/{task}/exe")
        task_uid = os.stat(f"/proc/{task}").st_uid
        task_env = _proc_environ(asker)
    except (OSError, ValueError, IndexError) as exc:
        return _answer(1, f"pbsplug TaskProlog: cannot read the asking process: {exc}")
    stepd = ctx.config.get("slurmstepd") or ""
    if not is_stepd(exe, stepd) or task_uid != uid:
        log.warning("TaskProlog request from pid %d (uid %d) refused: its parent %d is not a "
                    "Slurm task of that user (%s, uid %d)", asker, uid, task, exe, task_uid)
        return _answer(1, "pbsplug TaskProlog: not asked by a Slurm task")
    # The job and the node are the step's, from its slurmstepd (root's), never from the
    # task's environment, which its owner shapes (LD_PRELOAD runs their code in
    # TaskProlog): SLURM_JOB_ID and SLURMD_NODENAME of another of their jobs had the hook
    # act for that job, on its node (a task put in its cpuset, that node drained).
    try:
        job_id, step_node = _step_of(task, stepd)
    except (OSError, ValueError) as exc:
        log.warning("TaskProlog request from pid %d (uid %d) refused: %s", asker, uid, exc)
        return _answer(1, "pbsplug TaskProlog: not asked by a Slurm task")
    # (the node from the environment, checked, only where the step's socket was not found)
    node = step_node or this_node(task_env)
    said = (task_env.get("SLURM_JOB_ID"), task_env.get("SLURMD_NODENAME"))
    if said != (job_id, node):
        log.warning("TaskProlog request from pid %d (uid %d): its environment names job %s "
                    "on %s, its step's slurmstepd job %s on %s: Slurm's taken", asker, uid,
                    str(said[0])[:40], str(said[1])[:80], job_id, node)
    job, vnodes = ctx.slurm.job_and_nodes(job_id, [node])
    if uid != 0 and _uid_of(job) != uid:
        log.warning("TaskProlog request for job %s from uid %d refused: not the job's owner",
                    job_id, uid)
        return _answer(1, f"pbsplug TaskProlog: job {job_id} is not yours")
    if node not in _allocated(job):
        # The environment is the task owner's to shape (LD_PRELOAD runs their code in
        # TaskProlog): a node out of the job's allocation would have the hook act on
        # another user's node (drained by fail_action offline_vnodes, say).
        log.warning("TaskProlog request for job %s from uid %d refused: SLURMD_NODENAME=%s "
                    "is not one of the job's nodes", job_id, uid, node)
        return _answer(1, f"pbsplug TaskProlog: node {node} is not one of job {job_id}'s")
    # The hook gets the task's pid (a cpuset takes it, and the Epilog kills what is in the
    # cpuset): its owner may kill the task after the checks, while Slurm is asked, and its
    # pid may then be another process's, any user's. It must still be the task checked.
    try:
        same = _proc_stat(task) == task_stat
    except (OSError, ValueError, IndexError):
        same = False
    if not same:
        log.warning("TaskProlog request for job %s from pid %d (uid %d) refused: its task %d "
                    "ended while it was asked for", job_id, asker, uid, task)
        return _answer(1, "pbsplug TaskProlog: the task ended while it was asked for")
    out = _fire(ctx, "execjob_launch", {"job": job, "vnode_list": vnodes, "env": task_env,
                                        "argv": [], "progname": "", "pid": task})
    if not out.accepted:
        _host_failure(ctx, out, job_id, node, "TaskProlog")
        return _answer(1, f"pbsplug execjob_launch: {out.message}")
    apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
    return _answer(0, stdout=export_lines(job_id, task_env, out.changes.get("env")))


def export_lines(job_id: str, before: Mapping[str, str],
                 after: Mapping[str, str] | None) -> str:
    """execjob_launch's changes to the environment as TaskProlog's ``export``/``unset``
    lines (Slurm takes the rest of an export line as the value: one line, no quoting)."""
    if after is None:
        return ""
    lines = []
    for key, value in sorted(after.items()):
        if before.get(key) == value:
            continue
        if "\n" in value or "\0" in value or not _ENV_NAME.fullmatch(key):
            log.warning("job %s: launch variable %r cannot travel through TaskProlog "
                        "(a name of ASCII letters, digits and _; one line)", job_id, key[:80])
            continue
        lines.append(f"export {key}={value}")
    for key in sorted(set(before) - set(after)):
        # (the names come from the task's environment, its owner's: a line break in one
        # would make a line of its own that slurmstepd reads)
        if not _ENV_NAME.fullmatch(key):
            log.warning("job %s: launch variable %r cannot be unset through TaskProlog "
                        "(a name of ASCII letters, digits and _)", job_id, key[:80])
            continue
        lines.append(f"unset {key}")
    return "".join(line + "\n" for line in lines)


#: A variable's name as TaskProlog's ``export`` and ``unset`` lines carry it.
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _allocated(job: Mapping[str, Any]) -> set[str]:
    """The nodes of the job's allocation (its exec_vnode, from ``scontrol -d``)."""
    return {chunk.strip("()").split(":", 1)[0]
            for chunk in str(job.get("exec_vnode") or "").split("+") if chunk}


def _uid_of(job: Mapping[str, Any]) -> int | None:
    import pwd

    try:
        return pwd.getpwnam(str(job.get("euser") or "")).pw_uid
    except KeyError:
        return None


def epilog(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    job_id = checked_job_id(env.get("SLURM_JOB_ID"))
    node = this_node(env)
    extra = {}
    status = env.get("SLURM_JOB_EXIT_CODE") or ""
    if re.fullmatch(r"-?[0-9]{1,10}", status):  # (a wait status; garbage is left out)
        code = int(status)
        extra["Exit_status"] = (code >> 8) if code & 0x7F == 0 else 256 + (code & 0x7F)
    reading, build = _deferred_data(ctx, env, job_id, node, extra)
    told = False
    for name in ("execjob_epilogue", "execjob_end"):
        out = _fire_built(ctx, name, build())
        try:
            reading.check()
        except JobTextError as exc:  # the job's owner's text: the node stays in service
            if not told:
                log.error("Epilog job %s: %s: the node stays in service", job_id, exc)
            told = True
        if not out.accepted:
            _stopped(out, job_id, "Epilog")  # PBS ignores them: logged, nothing else
        if out.kind in (ACCEPT, "reject"):
            apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
    return _answer(0)


def epilog_slurmctld(ctx: Context, env: Mapping[str, str], argv: list[str]
                     ) -> dict[str, Any]:
    job_id = checked_job_id(env.get("SLURM_JOB_ID"))
    out = _fire(ctx, "jobobit", {"job": {**ctx.slurm.job(job_id), **known_job(env, job_id)}})
    if not out.accepted:
        _stopped(out, job_id, "EpilogSlurmctld")
    return _answer(0)


def health_check(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    """exechost_startup on the first run after this node's slurmd started (slurmd runs the
    HealthCheckProgram before it registers), exechost_periodic on every later one."""
    node = this_node(env)
    vnodes = ctx.slurm.nodes([node])
    started = str((vnodes.get(node) or {}).get("slurmd_start_time") or "")
    # In the state folder, which follows pbsplug.safedirs' rule (another user could plant a
    # link for root to write through, or say slurmd's start was seen): UnsafeFolder, one
    # line naming it, its owner and mode, and the program exits 1 with it.
    marker = safedirs.ensure_folder(ctx.state_dir / "started", STATE_FOLDER) / node
    try:
        seen = safedirs.read_text(marker).strip()
    except safedirs.UnsafeFolder:
        raise
    except OSError:
        seen = None
    if seen != started or not started:
        out = _fire(ctx, "exechost_startup", {"vnode_list": vnodes})
        safedirs.write_text(marker, started)
    else:
        # Every job the node still has: a suspended or stopped one keeps its processes and
        # cpuset. %A: the id each array task and heterogeneous part has of its own (the
        # SLURM_JOB_ID its Prolog named its cpuset and folders after; %i writes 1234_5).
        # A failed squeue is no list at all: the run waits for the next time, since an
        # empty list would tell the plugins every job on the node is gone (cpuset reaps
        # orphans, mjf sweeps their folders).
        try:
            jobs = ctx.slurm.run("squeue", "-h", "-a", "-w", node, "-t", NODE_JOB_STATES,
                                 "-o", "%A").split()
        except SlurmError as exc:
            log.warning("HealthCheckProgram: exechost_periodic left out this time: %s", exc)
            return _answer(0)
        out = _fire(ctx, "exechost_periodic", {
            "vnode_list": vnodes, "job_list": {j: {"id": j} for j in jobs}})
    if not out.accepted:
        _stopped(out, "-", "HealthCheckProgram")
    if out.kind in (ACCEPT, "reject"):
        apply_vnode_changes(ctx, out.changes.get("vnode_list") or {}, out.hook)
    return _answer(0)


def _power(name: str) -> Callable[[Context, Mapping[str, str], list[str]], dict[str, Any]]:
    def handler(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
        from . import slurm_power

        return getattr(slurm_power, name)(ctx, env, argv)

    return handler


HANDLERS = {"prolog_slurmctld": prolog_slurmctld, "prolog": prolog, "epilog": epilog,
            "task_prolog": task_prolog,
            "epilog_slurmctld": epilog_slurmctld, "health_check": health_check,
            "periodic": _power("periodic"), "suspend": _power("suspend"),
            "resume": _power("resume"), "resume_fail": _power("resume_fail")}


def run_here(config_file: str, request: Mapping[str, Any], no_worker: str = ""
             ) -> dict[str, Any]:
    """The program's path without a worker: load and dispatch in this process; `no_worker`,
    why none could be started (`slurm_program.main`), is one line in the log first."""
    config = json.loads(Path(config_file).read_text())
    ctx = load(config, mode=None)
    if no_worker:
        env = request.get("env")
        job = env.get("SLURM_JOB_ID", "-") if isinstance(env, Mapping) else "-"
        log.warning("%s job %s: %s; the events run in this process",
                    str(request.get("script") or "")[:40], job, no_worker)
    return dispatch(ctx, request)
