"""Schedulers other than ``default``, each in its own long-lived process (seed 001,
Interface 7; PBS runs one pbs_sched per sched object).

The server starts one for every sched object whose ``scheduling`` is True, at startup and when
it is set, and stops it when scheduling goes off or the server stops. A trigger sends the
process the cycle's input (its slice of the snapshot, the time, its policy) over a pipe,
with only the jobs that changed since its last cycle (it keeps the others); it runs the
cycle with the plugins' scheduler hooks and sends the decisions back, which the server
applies when they arrive, without waiting. A scheduler busy in a cycle keeps the next
trigger until it is done. ``state`` is live: ``down`` (no process), ``idle`` (waiting for a
trigger), ``scheduling`` (in a cycle).

A process that dies is started again; one that dies three times within an hour is left down
with the comment ``NEEDS_ATTENTION`` (seed 001's example) until its scheduling is set again.
Each writes its pid to ``<sched_priv>/sched.lock`` (as pbs_sched does) and logs in PBS's
format to ``<sched_log>/YYYYMMDD``: the start and end of each cycle, and what the scheduling
library says.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import pickle
import select
import signal
import stat
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..scheduler import Scheduler
from ..scheduler.feed import Feed, row
from .partitions import open_sched_dir, sched_uid

NEEDS_ATTENTION = "NEEDS_ATTENTION"
#: Crashes within this many seconds that leave a scheduler down.
CRASH_WINDOW = 3600.0
MAX_CRASHES = 3
#: Seconds the server waits for its stopped scheduler processes to end after their SIGTERM,
#: before SIGKILL.
STOP_WAIT = 2.0
_HEADER = struct.Struct("!Q")


@dataclass
class Work:
    """One cycle's input for a scheduler process: its instance's settings, its slice of the
    state without the jobs (`snap.jobs` is empty), and its jobs' stored attributes by id.
    Only the jobs that changed since the process's last cycle are sent (a queue of 8,000
    jobs would otherwise be pickled and rebuilt every cycle)."""

    partitions: Any
    policy: Any
    claimed: Any
    iteration: int
    snap: Any
    jobs: dict[str, dict[str, Any]]
    now: float


@dataclass
class _Proc:
    name: str
    pid: int
    to_child: int
    from_child: int
    state: str = "idle"
    pending: bool = False                  # a trigger came while it was busy
    sent_at: float = 0.0                   # when its current cycle was sent
    attrs: dict[str, Any] = field(default_factory=dict)   # what it was started with
    sent: dict[str, dict[str, Any]] = field(default_factory=dict)  # the jobs it has
    buffer: bytearray = field(default_factory=bytearray)


class SchedulerProcesses:
    """The running scheduler processes of one server, by sched name."""

    def __init__(self, hooks: Any, log: Callable[[str, str], None]):
        self.hooks = hooks
        self.log = log                     # (sched, message) -> the server log
        self.procs: dict[str, _Proc] = {}
        self.crashes: dict[str, list[float]] = {}
        self.given_up: set[str] = set()
        #: Schedulers that were triggered while busy and have finished: due a new cycle.
        self.due: set[str] = set()

    # -- the server's side ------------------------------------------------------------------
    def state(self, name: str) -> str:
        proc = self.procs.get(name)
        return "down" if proc is None else proc.state

    def keep(self, wanted: dict[str, dict[str, Any]]) -> None:
        """Run exactly the schedulers in `wanted` (name -> its sched attributes): start the
        missing ones (unless given up), stop the others."""
        for name, proc in list(self.procs.items()):
            if name not in wanted or _started_with(wanted[name]) != _started_with(proc.attrs):
                self.stop(name)  # off, or its directories changed: it starts afresh
            else:
                proc.attrs = dict(wanted[name])  # sched_cycle_length and the like
        for name, attrs in wanted.items():
            if name not in self.procs and name not in self.given_up:
                self.start(name, attrs)

    def start(self, name: str, attrs: dict[str, Any]) -> None:
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the scheduler process
            code = 0
            try:
                os.close(down_w)
                os.close(up_r)
                _child(name, attrs, down_r, up_w, self.hooks)
            except BaseException:  # noqa: BLE001 - a child must never return into the server
                logging.getLogger("pbsplug.sched_process").exception(
                    "scheduler %s failed", name)
                code = 1
            finally:
                os._exit(code)
        os.close(down_r)
        os.close(up_w)
        os.set_blocking(up_r, False)
        self.procs[name] = _Proc(name, pid, down_w, up_r, attrs=dict(attrs))
        self.log(name, f"scheduler {name} started, pid {pid}")

    def stop(self, name: str) -> None:
        self._stop([name])

    def stop_all(self) -> None:
        self._stop(list(self.procs))

    def _stop(self, names: list[str]) -> None:
        """SIGTERM to each, then STOP_WAIT seconds for all of them together; one still
        there (a hook of its cycle that ignores SIGTERM, a wait in the kernel) is
        killed with SIGKILL and reaped, as the executor ends a child it waited for enough
        (`executor.append_line`): a stuck scheduler must not hang the server's shutdown."""
        procs = [p for p in (self.procs.pop(n, None) for n in names) if p is not None]
        for proc in procs:
            for fd in (proc.to_child, proc.from_child):
                try:
                    os.close(fd)
                except OSError:
                    pass
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGTERM)
        left = {proc.pid for proc in procs}
        deadline = time.monotonic() + STOP_WAIT
        while left:
            for pid in list(left):
                try:
                    if os.waitpid(pid, os.WNOHANG)[0] != 0:
                        left.discard(pid)
                except ChildProcessError:  # reaped already (a waitpid(-1) of the server's)
                    left.discard(pid)
            if not left or time.monotonic() >= deadline:
                break
            time.sleep(0.01)
        for proc in procs:
            if proc.pid in left:
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(proc.pid, 0)
                self.log(proc.name, f"scheduler {proc.name} did not stop within "
                                    f"{STOP_WAIT:g} s of its SIGTERM: killed")
            self.log(proc.name, f"scheduler {proc.name} stopped")

    def forgive(self, name: str) -> None:
        """Setting scheduling again gives a scheduler that was given up a new start."""
        self.given_up.discard(name)
        self.crashes.pop(name, None)

    def trigger(self, name: str, work: Work) -> None:
        """Send a cycle's input. A busy scheduler is marked: once its cycle is done,
        `poll` puts it in `due`, and the server builds its next input from the state as it
        is then (not from this one, which its running cycle is about to change)."""
        proc = self.procs.get(name)
        if proc is None:
            return
        if proc.state == "scheduling":
            proc.pending = True
            return
        self._send(proc, work)

    def _send(self, proc: _Proc, work: Work) -> None:
        """The work, with only the jobs that are new or changed since the last send (and the
        ids of those gone)."""
        sent = proc.sent
        changed = {j: a for j, a in work.jobs.items() if sent.get(j) != a}
        gone = [j for j in sent if j not in work.jobs]
        message = (work.partitions, work.policy, work.claimed, work.iteration, work.snap,
                   changed, gone, work.now)
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            _write_all(proc.to_child, _HEADER.pack(len(data)) + data)
        except OSError:
            return  # it died; poll() notices and starts it again
        proc.sent = work.jobs
        proc.state = "scheduling"
        proc.sent_at = time.monotonic()

    def poll(self) -> Iterator[tuple[str, Any]]:
        """(sched, cycle result) for each cycle that finished; processes that died are
        started again, or given up. `restart(name)` gives the attributes to start with."""
        for proc in list(self.procs.values()):
            result = self._read(proc)
            if result is _BROKEN:  # an answer that does not unpickle: treat it as a crash
                self._kill(proc, "sent an answer that could not be read")
                continue
            if result is not None:
                proc.state = "idle"
                if proc.pending:
                    proc.pending = False
                    self.due.add(proc.name)
                yield proc.name, result
            elif proc.state == "scheduling" and time.monotonic() - proc.sent_at > \
                    _cycle_limit(proc.attrs):
                self._kill(proc, f"ran past its sched_cycle_length "
                                 f"({int(_cycle_limit(proc.attrs))} s)")

    def _kill(self, proc: _Proc, why: str) -> None:
        """End a scheduler that is stuck or broken; `dead` then reports it (a crash)."""
        self.log(proc.name, f"scheduler {proc.name} {why}: killed")
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass

    def dead(self) -> list[str]:
        """The schedulers whose process has ended (reaped), forgotten here."""
        out = []
        for name, proc in list(self.procs.items()):
            try:
                pid, _ = os.waitpid(proc.pid, os.WNOHANG)
            except ChildProcessError:
                pid = proc.pid
            if pid == proc.pid:
                for fd in (proc.to_child, proc.from_child):
                    try:
                        os.close(fd)
                    except OSError:
                        pass
                del self.procs[name]
                out.append(name)
        return out

    def crashed(self, name: str, now: float) -> bool:
        """Count a crash; True when the scheduler is to be given up (too many)."""
        recent = [t for t in self.crashes.get(name, []) if now - t < CRASH_WINDOW] + [now]
        self.crashes[name] = recent
        if len(recent) >= MAX_CRASHES:
            self.given_up.add(name)
            return True
        return False

    def _read(self, proc: _Proc) -> Any:
        while True:
            try:
                chunk = os.read(proc.from_child, 1 << 20)
            except BlockingIOError:
                break
            except OSError:
                return None
            if not chunk:
                break
            proc.buffer += chunk
        if len(proc.buffer) < _HEADER.size:
            return None
        (size,) = _HEADER.unpack_from(proc.buffer)
        if len(proc.buffer) < _HEADER.size + size:
            return None
        data = bytes(proc.buffer[_HEADER.size:_HEADER.size + size])
        del proc.buffer[:_HEADER.size + size]
        try:
            return pickle.loads(data)
        except Exception:  # noqa: BLE001 - a broken answer is a failed cycle
            return _BROKEN


_BROKEN = object()


def _started_with(attrs: dict[str, Any]) -> tuple[Any, Any]:
    """What a running scheduler process took from its sched object when it started."""
    return (attrs.get("sched_priv"), attrs.get("sched_log"))


def _cycle_limit(attrs: dict[str, Any]) -> float:
    """PBS's sched_cycle_length (default 20 minutes): a cycle longer than this is
    stuck."""
    from ..units import parse_duration

    try:
        return float(parse_duration(attrs.get("sched_cycle_length") or 1200))
    except ValueError:
        return 1200.0


# -- the scheduler process ----------------------------------------------------------------------

def _child(name: str, attrs: dict[str, Any], down: int, up: int, hooks: Any) -> None:
    # What the server had open (its socket, its database, other schedulers' pipes) is not
    # this process's: holding it would keep a sibling from seeing its pipe close.
    for fd in range(3, _max_fd()):
        if fd not in (down, up):
            try:
                os.close(fd)
            except OSError:
                pass
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    owner = sched_uid(attrs)
    priv = attrs.get("sched_priv")
    if priv:
        try:
            fd = open_in_sched_dir(str(priv), "sched.lock", os.O_WRONLY, owner)
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            finally:
                os.close(fd)
        except OSError:
            pass
    log = _sched_log(str(attrs.get("sched_log") or ""), owner)
    # What the server sent so far, and the instance, kept between cycles: a cycle costs
    # what changed since the last one (`Feed`).
    feed = Feed()
    sched: Scheduler | None = None
    while True:
        ready, _, _ = select.select([down], [], [], 1.0)
        if not ready:
            if os.getppid() != parent:  # the server is gone
                return
            continue
        header = _read_exactly(down, _HEADER.size)
        if header is None:
            return  # the server closed the pipe: stop
        (size,) = _HEADER.unpack(header)
        data = _read_exactly(down, size)
        if data is None:
            return
        partitions, policy, claimed, iteration, snap, changed, gone, now = pickle.loads(data)
        feed.change_jobs(changed, gone)
        feed.set_server(snap.server.name, row(snap.server))
        feed.set_queues({n: row(q) for n, q in snap.queues.items()})
        feed.set_vnodes({n: row(v) for n, v in snap.vnodes.items()})
        fresh = Scheduler(name, partitions, policy, hooks, claimed=claimed,
                          iteration=iteration)
        if sched is None or sched.settings() != fresh.settings():
            sched = fresh
        log.info("Starting Scheduling Cycle")
        mark = feed.job_log.mark
        try:
            result = sched.cycle(feed.snapshot(snap.reservations, snap.resource_types,
                                               snap.host_resources), now)
        finally:
            feed.read(mark)
        stats = result.stats
        log.info("Leaving Scheduling Cycle: %d jobs considered, %d started",
                 stats.jobs_considered if stats else 0, stats.jobs_started if stats else 0)
        out = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        _write_all(up, _HEADER.pack(len(out)) + out)


def _sched_log(directory: str, owner: int) -> logging.Logger:
    """The scheduler's own log, in PBS's line format, under its sched_log directory; the
    scheduling library's messages go there too."""
    logger = logging.getLogger("pbsplug.sched_process")
    library = logging.getLogger("pbsplug.scheduler")
    for existing in (logger, library):
        existing.handlers.clear()
        existing.propagate = False
        existing.setLevel(logging.INFO)
    if directory:
        handler = _DailyFile(directory, owner)
        logger.addHandler(handler)
        library.addHandler(handler)
    return logger


class _DailyFile(logging.Handler):
    """``MM/DD/YYYY HH:MM:SS;0080;pbs_sched;Svr;pbs_sched;<message>`` lines in
    ``<dir>/YYYYMMDD``."""

    def emit(self, record: logging.LogRecord) -> None:
        now = time.localtime(record.created)
        level = "0001" if record.levelno >= logging.ERROR else (
            "0002" if record.levelno >= logging.WARNING else "0080")
        message = record.getMessage()
        if record.exc_info:
            import traceback

            message += ": " + " | ".join(
                traceback.format_exception(*record.exc_info)[-3:]).replace("\n", " ")
        line = (f"{time.strftime('%m/%d/%Y %H:%M:%S', now)};{level};pbs_sched;Svr;pbs_sched;"
                f"{message}\n")
        try:
            fd = open_in_sched_dir(self.directory, time.strftime("%Y%m%d", now),
                                   os.O_WRONLY | os.O_APPEND, self.owner)
            try:
                os.write(fd, line.encode())
            finally:
                os.close(fd)
        except OSError:
            pass

    def __init__(self, directory: str, owner: int):
        super().__init__()
        self.directory = directory
        self.owner = owner


def open_in_sched_dir(directory: str, name: str, flags: int, owner: int) -> int:
    """A file this scheduler process (root) writes in its sched_priv or sched_log, folders
    that sched_user (`owner`) owns: the folder reached through no link sched_user could
    have made (`open_sched_dir`), the file made if missing, never through a link, and
    refused unless it is a regular file with no other name. Opened by path, a link
    sched_user put there had root truncate or fill any file."""
    folder, _ = open_sched_dir(directory, owner)
    try:
        fd = os.open(name, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_NOCTTY | os.O_NONBLOCK
                     | os.O_CLOEXEC, 0o644, dir_fd=folder)
    finally:
        os.close(folder)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise OSError(errno.EPERM, "not a plain file of the scheduler's", name)
    return fd


def _max_fd() -> int:
    try:
        return max(int(n) for n in os.listdir("/proc/self/fd")) + 1
    except (OSError, ValueError):
        return 1024


def _read_exactly(fd: int, size: int) -> bytes | None:
    out = bytearray()
    while len(out) < size:
        chunk = os.read(fd, size - len(out))
        if not chunk:
            return None
        out += chunk
    return bytes(out)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]
