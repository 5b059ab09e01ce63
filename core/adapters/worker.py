"""pbsplug's worker on an execution host: the plugins loaded once, each event in a fork.

PBS starts a fresh ``pbs_python`` for every execution-host event, and Slurm a fresh process
for every Prolog and Epilog, so a script that imported pbsplug and the plugins itself would
pay those imports on every job (benchmarks/bench_pbs.py, bench_slurm.py). Instead the script
(PBS: `pbs_hook`; Slurm: `slurm_program`) turns the event into plain data with the standard
library alone and sends it to this worker over a UNIX socket; the worker, started by the first
event that finds none, has imported pbsplug and loaded the plugins once, forks a child per
event (so that each event starts from the same state, as a fresh interpreter does, and a crash
ends only that child), and answers with the outcome for the script to carry out.

What the worker loads and how a child answers are the adapter's, named in the config:
``loader`` (``module:function``, called with the config, returns what the dispatcher takes)
and ``dispatcher`` (called with that and the request, returns the answer as plain data).
Without them, the PBS bridge's (`pbs_bridge.load`, and `pbs_bridge.dispatch` of the request's
``event`` and ``data``). Requests and answers are JSON, or with ``"encoding": "marshal"``
Python's marshal format; a JSON request with ``"answer": "marshal"`` gets its answer in
marshal's format (Slurm's TaskProlog, which then imports no ``json``; marshal is never read
from a client), and a marshal request with ``"answer": "native"`` gets what Slurm's native
launcher writes out (`slurm_program.native_answer`: status and output bytes, length-prefixed).

An answer is one document (a JSON object, a marshal dict, or the native answer), sent whole,
and then the connection is shut down (``shutdown(SHUT_RDWR)``, not only closed): that ends it
for every process holding a copy, so a hook that left a helper running (os.fork, a
daemonising library) does not keep the script waiting for the end until PBS's alarm or
Slurm's timeout kills it. A client reading to the end (an older `worker_client`, the native
launcher) sees it at once; the current one stops at the end of one whole JSON object or
marshal dict anyway, so it also does not wait on a worker from before this rule. A child
that ends without answering (killed at its deadline, crashed) has its connection shut down
by the worker once it is reaped: the script sees no answer then, not a helper's lifetime
later. Before any hook runs, a child closes the worker's listening socket and the
connections of the other clients (waiting, or served by other children); it keeps the
descriptors the loaded plugins and the log handlers opened at load (a log file, a
database), which its hooks, run in process, use.

- One worker per hook config: the hook names its socket after the config's SHA-256,
  ``/run/pbsplug/pbs-<digest>.sock`` (folder 0700, socket 0600: root only), so a new install
  starts a new worker and the old one leaves when idle. That folder and every one above it
  must be root's and writable by no one else (or sticky, as /tmp is): a worker refuses
  another (`worker_client.folder_problem`), the scripts then start none there and run the
  event in their own process, and they tell a socket that is not root's nothing. A config
  with ``"public": true``
  gets a socket any local user may reach (folder 0755, socket 0666), and every request
  carries its sender's ``(pid, uid, gid)`` from the kernel (``_peer``) for the dispatcher
  to check.
- A child still running at the config's ``deadline`` (seconds; default the hook's ``alarm``
  plus one second) is killed; the script, already ended by PBS's own alarm, sees no answer.
- The worker leaves after `IDLE_EXIT` seconds without an event; a public one with a
  ``"slurmstepd"`` in its config (Slurm's task worker) not while a slurmstepd runs on the
  host and its config file is unchanged: a job's Prolog starts it once, and a later
  step's TaskProlog, run as the job's user, cannot start one. For the same reason it
  serves from a fork of itself, and forks another when that one is killed (`_supervise`):
  at most `RESTART_BURST` times in `RESTART_INTERVAL` seconds, as systemd's
  StartLimitBurst and StartLimitIntervalSec bound a service's restarts; killed once more
  within them, it is not replaced, one line says so and the worker leaves (its socket
  removed: the next job's Prolog starts a worker). Run as root, its first process is kept
  from the OOM killer (``oom_score_adj`` -1000; where it may not be, one line says why,
  `_keep_from_oom_killer`) and each serving process gets the value back that the worker
  started with, which its hooks inherit. Should the first process be killed all the same,
  its serving process takes its place once nothing is in flight, and forks another
  serving process in turn; take-overs and replacements share the one budget
  (`_RestartLimit`), so past it the serving process leaves too.
- Limits, for a public socket above all (every local user can reach it, and each request
  costs a root fork): at most `MAX_RUNNING_PER_UID` requests of one uid are served at once
  and `MAX_RUNNING` of all unprivileged uids together; more wait their turn in the worker
  (at most `MAX_WAITING_PER_UID` per uid, `MAX_WAITING` in all, each for `WAIT_DEADLINE`
  seconds), and past that a connection is refused at once. A request must be sent whole
  within `SEND_DEADLINE` seconds and be at most `MAX_PUBLIC_REQUEST` bytes on a public
  socket (`MAX_REQUEST` on a root-only one). A refused request is answered with one line
  (``{"exit": 1, "error": ...}``, and the PBS hook's ``kind``/``detail``) and logged once per
  uid and reason a minute; root's requests (the batch system's own scripts) are never held
  back, and the worker goes on serving everyone else. A request the worker cannot fork for
  (no memory or process left for one now) is refused so too; the worker goes on.

    python -m pbsplug.adapters.worker SOCKET CONFIG
"""

from __future__ import annotations

import collections
import errno
import gc
import json
import logging
import marshal
import os
import select
import signal
import site
import socket
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import jsontext, safedirs
from .slurm_program import is_stepd, native_answer

#: Seconds without an event after which the worker leaves.
IDLE_EXIT = 600.0
#: Largest request the worker reads (an event's plain data).
MAX_REQUEST = 64 << 20
#: Largest request on a public socket (TaskProlog's is a few bytes: who asks is the kernel's).
MAX_PUBLIC_REQUEST = 64 << 10
#: Seconds a client has to send its whole request.
SEND_DEADLINE = 10.0
#: Requests served at once (forked children) per unprivileged uid, and for all of them.
MAX_RUNNING_PER_UID = 8
MAX_RUNNING = 64
#: Connections waiting for a free slot, per unprivileged uid and in all, and for how long.
MAX_WAITING_PER_UID = 32
MAX_WAITING = 256
WAIT_DEADLINE = 30.0
#: A refusal is logged once per uid and reason in this many seconds.
LOG_EVERY = 60.0
#: Seconds at least between the starts of Slurm's task worker's serving processes
#: (`_supervise`): one killed again at once is not replaced in a loop.
RESTART_EVERY = 1.0
#: Serving processes killed and replaced, and first processes killed and their places taken,
#: at most this many times in all in `RESTART_INTERVAL` seconds; once more within them, the
#: task worker leaves (systemd's StartLimitBurst and StartLimitIntervalSec, for a cause
#: that goes on killing it).
RESTART_BURST = 5
RESTART_INTERVAL = 600.0
#: The task worker's first process's ``oom_score_adj`` when run as root: never the OOM
#: killer's choice (its serving processes, and their hooks, keep the worker's own). Where
#: it may not (no CAP_SYS_RESOURCE), 0 if the worker started above that, and one line.
SUPERVISOR_OOM_SCORE_ADJ = -1000

log = logging.getLogger("pbsplug.worker")

#: An adapter's dispatcher (the config's ``dispatcher``): what its loader gave (opaque here)
#: and the request as decoded (JSON's or marshal's plain data), to the answer.
Dispatcher = Callable[[object, Any], Any]


class Refused(ValueError):
    """A request the worker will not serve; the message says why, in one line."""


def refusal(message: str) -> dict[str, Any]:
    """The one-line answer to a refused request, for both hook scripts' readers."""
    return {"exit": 1, "stdout": "", "error": message, "kind": "error", "detail": message,
            "changes": {}, "logs": [], "hook": None, "event": None}


def _read_all(conn: socket.socket, limit: int, deadline: float | None = None) -> bytes:
    """The whole request (to the client's end of writing), at most `limit` bytes, by the
    monotonic `deadline`."""
    chunks: list[bytes] = []
    size = 0
    while True:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Refused(f"request not sent within {SEND_DEADLINE:g} s")
            conn.settimeout(left)
        try:
            chunk = conn.recv(1 << 16)
        except TimeoutError:
            raise Refused(f"request not sent within {SEND_DEADLINE:g} s") from None
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise Refused(f"request over {limit} bytes")
        chunks.append(chunk)


def _function(name: str) -> Callable[..., Any]:
    """``module:function``, imported."""
    import importlib

    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _pbs_dispatch(runner: object, request: Any) -> dict[str, Any]:
    from .pbs_bridge import dispatch

    return dispatch(runner, request["event"], request["data"])


def _codec(encoding: str) -> tuple[Callable[[bytes], Any], Callable[[Any], bytes]]:
    # marshal (the Slurm programs'): decoded by the interpreter's core, so the program that
    # sends it imports neither json nor socket; only root can reach the socket.
    # JSON: any local user's, for a public worker (Slurm's task worker); read with the
    # kernel's limits (nesting, NaN, a key twice...), each refusal named (the event's error).
    return ((marshal.loads, marshal.dumps) if encoding == "marshal"
            else (lambda data: jsontext.loads(data, "the request", expect=dict),
                  lambda v: json.dumps(v, default=str).encode()))


def _child(conn: socket.socket, runner: object, dispatch: Dispatcher, encoding: str = "json",
           limit: int = MAX_REQUEST, deadline: float | None = None) -> None:
    loads, dumps = _codec(encoding)
    try:
        try:
            request = loads(_read_all(conn, limit, deadline))
        except Refused as exc:
            uid = _peer(conn)[1]
            log.warning("pbsplug worker: request from uid %d refused: %s", uid, exc)
            conn.sendall(dumps(refusal(f"pbsplug worker: refused: {exc}")))
            _end(conn)
            return
        if isinstance(request, dict):  # who is asking, as the kernel says: (pid, uid, gid)
            request["_peer"] = list(_peer(conn))
            if request.get("answer") == "marshal":  # a client that reads no JSON
                dumps = marshal.dumps
            elif request.get("answer") == "native" and encoding == "marshal":
                # Slurm's native launcher (root only: marshal's socket): the answer as it
                # writes it out, computed here (slurm_program.native_answer)
                script = str(request.get("script"))

                def native(outcome: Any, script: str = script) -> bytes:
                    return native_answer(script, outcome)

                dumps = native
        outcome = dispatch(runner, request)
    except KeyboardInterrupt:
        outcome = None
    except Exception as exc:  # the event could not be built or run: the hook's error
        outcome = {"kind": "error", "detail": f"pbsplug worker: {type(exc).__name__}: {exc}",
                   "changes": {}, "logs": [], "hook": None, "event": None}
    if outcome is not None:
        try:
            data = dumps(outcome)
        except ValueError:  # a value marshal refuses (JSON's answer makes it a string)
            data = _codec("json")[1](outcome)
        conn.sendall(data)
    _end(conn)


def _end(conn: socket.socket) -> None:
    """The connection ended for its client now, whoever else holds a copy of it (a helper a
    hook left running: close alone waits for every copy), then closed."""
    try:
        conn.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass  # the client has gone already
    conn.close()


def _peer(conn: socket.socket) -> tuple[int, int, int]:
    """(pid, uid, gid) of the connection's other end, as the kernel says."""
    return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                               struct.calcsize("3i")))


class _Gate:
    """Who is served now, who waits, who is refused (the module's Limits)."""

    def __init__(self, encoding: str):
        self.dumps = _codec(encoding)[1]
        self.privileged = {0, os.getuid()}
        self.running: collections.Counter[int] = collections.Counter()  # unprivileged
        self.waiting: collections.deque[tuple[socket.socket, int, float]] = collections.deque()
        self.queued: collections.Counter[int] = collections.Counter()
        self.logged: dict[tuple[int, str], float] = {}

    def may_run(self, uid: int) -> bool:
        return uid in self.privileged or (self.running[uid] < MAX_RUNNING_PER_UID
                                          and sum(self.running.values()) < MAX_RUNNING)

    def admit(self, conn: socket.socket, uid: int, now: float) -> bool:
        """True: serve `conn` now. Else it waits, or is refused."""
        if self.may_run(uid):
            return True
        if self.queued[uid] >= MAX_WAITING_PER_UID or len(self.waiting) >= MAX_WAITING:
            self.refuse(conn, uid, f"busy: {MAX_RUNNING_PER_UID} requests of this user (or "
                        f"{MAX_RUNNING} in all) served and {MAX_WAITING_PER_UID} waiting")
        else:
            self.waiting.append((conn, uid, now + WAIT_DEADLINE))
            self.queued[uid] += 1
        return False

    def next_ready(self, now: float) -> list[tuple[socket.socket, int]]:
        """Waiting connections whose turn has come (counted as started); those that waited
        too long refused."""
        out: list[tuple[socket.socket, int]] = []
        keep: collections.deque[tuple[socket.socket, int, float]] = collections.deque()
        while self.waiting:
            conn, uid, until = self.waiting.popleft()
            if self.may_run(uid):
                self.queued[uid] -= 1
                self.started(uid)  # counted now: the next in line sees it
                out.append((conn, uid))
            elif now > until:
                self.queued[uid] -= 1
                self.refuse(conn, uid, f"busy: no turn within {WAIT_DEADLINE:g} s")
            else:
                keep.append((conn, uid, until))
        self.waiting = keep
        return out

    def started(self, uid: int) -> None:
        if uid not in self.privileged:
            self.running[uid] += 1

    def ended(self, uid: int) -> None:
        if uid not in self.privileged and self.running[uid] > 0:
            self.running[uid] -= 1

    def refuse(self, conn: socket.socket, uid: int, why: str) -> None:
        try:
            conn.setblocking(False)
            conn.send(self.dumps(refusal(f"pbsplug worker: refused: {why}")))
        except OSError:
            pass
        _end(conn)
        now = time.monotonic()
        key = (uid, why.split(":")[0])
        if now - self.logged.get(key, -LOG_EVERY) >= LOG_EVERY:
            self.logged[key] = now
            log.warning("pbsplug worker: request from uid %d refused: %s (logged once a "
                        "minute per uid)", uid, why)


def clean_process() -> None:
    """Shed what the starting process gave the worker: it serves every job on the host for
    as long as it lives, and may have been started from inside one (PBS runs a launch hook
    in the job's own child of the MoM, after the job owner's umask, rlimits and nice were
    applied). Blocked signals too: Slurm's daemons block SIGALRM and SIGTERM, which the
    hooks' alarms need; and an ignored SIGCHLD (an ignored signal survives exec), with
    which the kernel reaps the worker's forks itself and its waits for them fail
    (`_supervise`'s among them). Run as root (with CAP_SYS_RESOURCE), the limits go back to none;
    otherwise each soft limit goes up to its hard one."""
    import resource

    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.umask(0o022)
    os.chdir("/")
    root = os.geteuid() == 0
    for name in ("RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_AS", "RLIMIT_RSS", "RLIMIT_DATA",
                 "RLIMIT_CORE", "RLIMIT_NPROC", "RLIMIT_MEMLOCK"):
        which = getattr(resource, name, None)
        if which is None:
            continue
        _, hard = resource.getrlimit(which)
        for limits in ((resource.RLIM_INFINITY,) * 2, (hard, hard)) if root else ((hard, hard),):
            try:
                resource.setrlimit(which, limits)
                break
            except (ValueError, OSError):
                continue  # not allowed to raise the hard limit: the soft one up to it
    if root:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, 0)
            os.sched_setaffinity(0, range(os.cpu_count() or 1))
        except OSError:
            pass  # a cpuset the starting process was in bounds the affinity


def serve(path: Path, config_file: Path) -> int:
    """Serve the socket `path` with the plugins `config_file` names until the worker leaves
    (module docstring); the process's exit status."""
    try:  # where a user could plant a socket, or a link for the lock or the socket
        safedirs.ensure_folder(path.parent, "the worker's folder")
    except safedirs.UnsafeFolder as exc:
        raise Refused(f"{exc}: no worker there") from None
    loaded = config_file.read_bytes()
    config = json.loads(loaded)
    for directory in config.get("site_dirs") or ():
        site.addsitedir(directory)
    load = _function(config.get("loader") or "pbsplug.adapters.pbs_bridge:load")
    dispatch = (_function(config["dispatcher"]) if config.get("dispatcher")
                else _pbs_dispatch)
    encoding = config.get("encoding") or "json"
    runner = load(config)
    # What is loaded now is every child's, unchanged: kept out of the collector's walks, so
    # that a child's collection does not touch (and copy) the pages it shares with this
    # process; a child lives for one event and does not collect at all.
    gc.collect()
    gc.freeze()
    alarm = float(config.get("deadline")
                  or float((config.get("attributes") or {}).get("alarm") or 30) + 1.0)
    # "public": a socket every local user may reach (Slurm's TaskProlog runs as the job's
    # user); the dispatcher then sees who is asking (the request's "_peer") and decides.
    public = bool(config.get("public"))
    # Slurm's task worker: the Prolog starts it, once per job on this node; a step started
    # after IDLE_EXIT (srun b after a long srun a) found none, and TaskProlog, run as the
    # job's user, cannot start one: its tasks failed. It stays while a step runs here.
    stepd = str(config.get("slurmstepd") or "") if public and "slurmstepd" in config else None
    os.chmod(path.parent, 0o755 if public else 0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    old = os.umask(0o077)
    try:
        listener.bind(str(tmp))
    finally:
        os.umask(old)
    os.chmod(tmp, 0o666 if public else 0o600)
    listener.listen(socket.SOMAXCONN)
    os.replace(tmp, path)  # whole or absent: a hook never connects to a half-made worker
    inode = os.stat(path).st_ino
    supervisor = None  # (the task worker's serving process: the pid of its first process)
    restarts = _RestartLimit()  # (the task worker's; each fork takes its count along)
    if stepd is not None:  # Slurm's task worker: its serving process replaced when killed
        status, supervisor = _supervised(config_file, loaded, restarts)
        if status is not None:  # (this process, once no serving process is left)
            listener.close()
            _unlink_if_ours(path, inode)
            return status
    limit = MAX_PUBLIC_REQUEST if public else MAX_REQUEST
    gate = _Gate(encoding)
    # Each child's deadline, uid and connection: the connection is kept here until the child
    # is reaped, then shut down (`_end`), in case the child ended without answering.
    children: dict[int, tuple[float, int, socket.socket]] = {}
    last = time.monotonic()
    leaving = False
    listener.setblocking(False)

    def start(conn: socket.socket, uid: int, now: float) -> None:
        try:
            pid = os.fork()
        except OSError as exc:  # (no memory or process for one now: this request alone)
            gate.ended(uid)
            gate.refuse(conn, uid, f"cannot fork for it: {exc.strerror or exc}")
            return
        if pid == 0:
            gc.disable()
            # Nothing of the worker's own sockets for the hooks (nor for a helper one leaves
            # running): not the listening socket, not another client's connection.
            listener.close()
            for other in [c for _, _, c in children.values()] + [c for c, _, _ in gate.waiting]:
                other.close()
            code = 0
            try:
                _child(conn, runner, dispatch, encoding, limit, now + SEND_DEADLINE)
            except BaseException:  # noqa: BLE001 - the child ends here, whatever
                code = 1
            os._exit(code)
        children[pid] = (now + alarm, uid, conn)

    try:
        while True:
            ready, _, _ = select.select([listener], [], [], 0.1 if gate.waiting else 0.5)
            now = time.monotonic()
            for pid, (deadline, uid, conn) in list(children.items()):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    del children[pid]
                    _end(conn)
                    gate.ended(uid)
                elif now > deadline:
                    os.kill(pid, signal.SIGKILL)
            if supervisor is not None and os.getppid() != supervisor and not leaving:
                # The first process was killed (it replaced this one when killed): this
                # one takes its place once no request is in flight, and forks a serving
                # process in turn (a connection made meanwhile waits in the backlog).
                if not _unchanged(config_file, loaded):
                    supervisor = None  # (an install's new worker serves: none needed)
                elif not children and not gate.waiting:
                    said = (f"pbsplug worker: the worker's first process {supervisor} has "
                            f"ended: its serving process {os.getpid()}")
                    if not restarts.allow(time.monotonic()):
                        # (a cause that kills each new first process: no endless series)
                        log.warning("%s does not take its place, %s", said, restarts.spent())
                        supervisor = None
                        _unlink_if_ours(path, inode)  # (the backlog is served first)
                        leaving = True
                        continue
                    log.warning("%s takes its place", said)
                    status, supervisor = _supervised(config_file, loaded, restarts)
                    if status is not None:
                        return status
                    last = time.monotonic()
                    continue
            for conn, uid in gate.next_ready(now):
                start(conn, uid, now)
            for _ in range(64 if ready else 0):  # a burst of connections: several a turn
                try:
                    conn, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    break
                last = now
                try:  # a client that only checked the worker is there (the Prolog, for
                    # the task worker) and closed: nothing to fork for
                    if conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                        conn.close()
                        continue
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    conn.close()
                    continue
                conn.setblocking(True)
                try:
                    uid = _peer(conn)[1]
                except OSError:
                    conn.close()
                    continue
                if gate.admit(conn, uid, now):
                    gate.started(uid)
                    start(conn, uid, now)
            if leaving:
                if not ready and not children and not gate.waiting:
                    return 0
            elif not ready and not children and not gate.waiting and now - last > IDLE_EXIT:
                if stepd is not None and _unchanged(config_file, loaded) \
                        and _steps_running(stepd):
                    last = now  # (looked at again IDLE_EXIT seconds from now)
                    continue
                # The socket's name goes first: a hook that connects from now on starts a
                # new worker, and those already in the listen backlog are served before
                # this one leaves (closing with them there reset their connections).
                _unlink_if_ours(path, inode)
                leaving = True
            elif _inode(path) != inode:
                leaving = True  # replaced or removed: another worker serves this config now
    finally:
        listener.close()
        _unlink_if_ours(path, inode)


class _RestartLimit:
    """At most `RESTART_BURST` restarts in any `RESTART_INTERVAL` seconds: a serving
    process replaced (`_supervise`) or a first process's place taken (`serve`). One budget
    for both, not one each: either is the worker going on after losing one of its two
    processes, and a cause that kills either (a root script, a memory limit) is one cause;
    with one each, a killer alternating between the two would get twice the restarts. One
    count across processes, too: the serving process is forked after each restart the
    first process counts, and the first process a take-over makes forks after counting it,
    so the one that counts next has every earlier restart in its copy."""

    def __init__(self) -> None:
        self.times: collections.deque[float] = collections.deque()

    def allow(self, now: float) -> bool:
        """Whether a restart at monotonic time `now` is within the limit (then counted)."""
        while self.times and self.times[0] <= now - RESTART_INTERVAL:
            self.times.popleft()
        if len(self.times) >= RESTART_BURST:
            return False
        self.times.append(now)
        return True

    def spent(self) -> str:
        """What the log line of a restart refused says of the count."""
        return (f"the worker's processes killed {RESTART_BURST + 1} times in "
                f"{RESTART_INTERVAL:g} s (the worker leaves; the next job's Prolog starts one)")


def _oom_score_adj(value: str | None = None) -> str | None:
    """This process's ``oom_score_adj`` (None where /proc has none), after setting it to
    `value` if given and allowed (`_set_oom_score_adj`; a failure leaves it as it was)."""
    if value is not None:
        _set_oom_score_adj(value)
    try:
        with open("/proc/self/oom_score_adj") as fh:
            return fh.read().strip()
    except OSError:
        return None


def _set_oom_score_adj(value: str) -> OSError | None:
    """Set this process's ``oom_score_adj``; the error if not set. Below the least a
    process with CAP_SYS_RESOURCE last set (0 unless one set it), it takes that capability
    (EACCES without), which a container may drop."""
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(value)
    except OSError as exc:
        return exc
    return None


def _keep_from_oom_killer(inherited: str) -> None:
    """The task worker's first process, run as root and started with `inherited`: its
    ``oom_score_adj`` set to `SUPERVISOR_OOM_SCORE_ADJ`, or where it may not, to 0 if it
    started above that, with one line naming the value it has and why."""
    error = _set_oom_score_adj(str(SUPERVISOR_OOM_SCORE_ADJ))
    if error is None:
        return
    if int(inherited) > 0:  # (allowed unless a process with the capability set it above 0)
        _set_oom_score_adj("0")
    why = error.strerror or str(error)
    if error.errno == errno.EACCES:
        why += ": that takes CAP_SYS_RESOURCE"
    log.warning("pbsplug worker: the worker's first process %d may not lower its "
                "oom_score_adj to %d (%s) and has %s: the OOM killer may pick it (its serving "
                "process then takes its place)", os.getpid(), SUPERVISOR_OOM_SCORE_ADJ, why,
                _oom_score_adj())


def _supervised(config_file: Path, loaded: bytes,
                restarts: _RestartLimit) -> tuple[int | None, int | None]:
    """`_supervise`, called here: (its exit status, None) in this process; in the serving
    process it forked, (None, this process's pid: the one to watch); (None, None) here if
    it could not fork (this process serves, with no one to replace it)."""
    first = os.getpid()
    status = _supervise(config_file, loaded, restarts)
    return status, (first if os.getpid() != first else None)


def _supervise(config_file: Path, loaded: bytes, restarts: _RestartLimit) -> int | None:
    """Slurm's task worker: its serving loop runs in a fork of this process, which keeps
    the listening socket (a connection made meanwhile waits in its backlog) and the loaded
    plugins. A serving process killed by a signal (out of memory, by hand) is replaced at
    once by another fork, with one line in the log: TaskProlog, run as the job's user,
    cannot start a worker, and only the next job's Prolog on the node did, so every task
    there failed until then. Not once an install has changed the config (the new one's
    worker serves), and not past `RESTART_BURST` restarts in `RESTART_INTERVAL` seconds
    (`restarts`, which take-overs count too): a cause that goes on killing it (one line a
    second, without end, before) ends the worker with one line, and the next job's Prolog
    starts one. Run as root, this process is kept from the OOM killer, and each serving
    process gets the worker's own ``oom_score_adj`` back (its hooks are not kept from it).
    None in a serving process, which goes on to serve (this process too when it cannot
    fork); in this process, once no serving process is left, the exit status: the last
    one's own (0 at its idle exit), or 1 for one killed and not replaced."""
    inherited = _oom_score_adj()
    if inherited is not None and os.geteuid() == 0 \
            and int(inherited) > SUPERVISOR_OOM_SCORE_ADJ:
        _keep_from_oom_killer(inherited)
    started = None
    while True:
        if started is not None:  # (one killed again at once: no fork loop)
            time.sleep(max(0.0, started + RESTART_EVERY - time.monotonic()))
        started = time.monotonic()
        try:
            pid = os.fork()
        except OSError as exc:
            log.warning("pbsplug worker: cannot fork a serving process (%s): this one "
                        "serves, and none replaces it", exc.strerror or exc)
            if inherited is not None:
                _oom_score_adj(inherited)  # (it runs the hooks' forks now)
            return None
        if pid == 0:
            if inherited is not None:
                _oom_score_adj(inherited)
            return None
        _, status = os.waitpid(pid, 0)
        if not os.WIFSIGNALED(status):
            return os.waitstatus_to_exitcode(status)
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = "?"
        said = (f"pbsplug worker: the worker's serving process {pid} was killed by signal "
                f"{number} ({name})")
        if not _unchanged(config_file, loaded):
            log.warning("%s: not replaced, an install has changed its config since", said)
            return 1
        if not restarts.allow(time.monotonic()):
            log.warning("%s: not replaced, %s", said, restarts.spent())
            return 1
        log.warning("%s: another serves its socket", said)


def _unchanged(config_file: Path, loaded: bytes) -> bool:
    """Whether the config is still what this worker loaded: after an install that changed
    it, a new worker serves the new socket, and this one need not stay for the steps."""
    try:
        return config_file.read_bytes() == loaded
    except OSError:
        return False


def _steps_running(stepd: str) -> bool:
    """Whether a process of this host runs slurmstepd (`slurm_program.is_stepd`: the path
    `stepd` install found, or without one any executable of that name; either one that a
    package upgrade replaced while it runs)."""
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            exe = os.readlink(f"/proc/{entry.name}/exe")
        except OSError:
            continue  # gone, a kernel thread, or not ours to read
        if is_stepd(exe, stepd):
            return True
    return False


def _unlink_if_ours(path: Path, inode: int) -> None:
    """Remove the socket's name, unless another worker has put its own there since."""
    if _inode(path) == inode:
        path.unlink(missing_ok=True)


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m pbsplug.adapters.worker SOCKET CONFIG", file=sys.stderr)
        return 2
    clean_process()
    try:
        return serve(Path(args[0]), Path(args[1]))
    except Refused as exc:
        print(f"pbsplug worker: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
