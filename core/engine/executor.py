"""Running jobs as real processes on this machine.

Each job gets a *shepherd*: a process forked from the server that starts its own session, so
that it outlives the server (a server killed with SIGKILL leaves its jobs running). A launch
has two steps, so that execjob_launch hooks can act on the process that will run the job
(move it into a cgroup, set its limits: the job and everything it starts inherit them):

1. `prepare` forks the shepherd, which waits on a pipe; its pid is execjob_launch's
   ``event.pid``.
2. `PendingLaunch.start` sends it the job's command (the hooks' argv and env) and returns at
   once: the server never waits for the job to start, nor for the shepherd to read (the
   command goes into an anonymous file the shepherd shares, its word down the pipe).
   `PendingLaunch.cancel` (the hooks refused) makes it exit; so does the server's death
   before `start`. Either way it leaves no file behind.

Once started, the shepherd starts the job (as its owner when the server runs as root),
records itself and the job's process group in ``jobs/<seq>.shepherd``, waits for the job
(writing the notes the server leaves for the job's error file, `tell_job`), and writes the
job's exit status and resource use to ``jobs/<seq>.status`` in the engine's home.
Both files are written aside and renamed, so each is whole or absent. The server polls for
the status file; a restarted server finds its jobs again from the two files
(`Launch.alive`, `Launch.recorded`).

The job runs in its own process group (its ``session_id``), which is what qdel and the
walltime limit signal. The job's processes are the shepherd's descendants: the shepherd is
their child subreaper (`become_subreaper`), so a process that makes a session of its own
(``setsid``, a daemon's double fork) stays in its tree when its parent ends, and
`job_processes` finds it there (and in the shepherd's session, as before). Those are what
the shepherd samples (`sample`) and kills at the job's end (`_kill_job`), what a kill's
SIGTERM (each process once, but for a few: see there), suspend and resume (every process)
reach (`signal_whole`), and, with what the
shepherd recorded (the job's process as it started it, the job's processes at its last
sample), what is killed of a job whose shepherd is gone (`kill_session`). A kill or a
stop goes in rounds until a round finds no process it has not signalled
(`_signal_rounds`): a process forked meanwhile is caught in the next.

Everything done on the job's behalf on the file system is done as its owner: the job's child
drops to the owner's uid, gid and groups *before* it opens the output and error files,
changes to the owner's home (where PBS starts a job) or writes a start-failure note, so a
path the user names can never make root create or append to a file. The shepherd writes
into the job's error file only through the descriptor the job's process opened and handed
over. What the server makes for the job as root (the TMPDIR, the script and nodefile) is
made in folders only the server can write, with O_EXCL and O_NOFOLLOW, and handed over
with fchown/fchmod on the open descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import random
import resource
import secrets
import select
import signal
import socket
import stat
import tempfile
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypedDict, TypeVar

from . import interactive as _interactive

#: Exit status PBS gives a job that the server could not start (JOB_EXEC_FAIL1).
EXEC_FAIL = -1
#: A job whose exit was never seen (its shepherd died with the machine): PBS's
#: JOB_EXEC_INITABT, a job its MoM aborted when it started again.
EXEC_LOST = -4
#: Exit status PBS gives a job whose start failed after its files were set up
#: (JOB_EXEC_FAIL2): here, one that cannot start in its owner's home (`NO_HOME`).
EXEC_FAIL2 = -2
#: How the reason of a job that could not change to its owner's home begins.
NO_HOME = "cannot start in its owner's home"
#: What PBS's MoM writes to the job's error file then (OpenPBS 23.06, checked).
NO_HOME_NOTE = "Could not chdir to home directory\n"
#: PBS's default umask for a job: its output and error files are 0600.
DEFAULT_UMASK = 0o077
#: A user's uid, gid and name, to run something as that user.
Ids = tuple[int, int, str]
_T = TypeVar("_T")


#: Seconds in all, from a job's start, that signals to it wait for its shepherd's record of
#: its process group (`Launch.resolve`): the shepherd writes it as it starts the job, at
#: once; one that has not by then waits for room on a full disk, for as long as that lasts.
RECORD_WAIT = 2.0


@dataclass
class Launch:
    """What the server keeps about a started job (the ``runtime`` column)."""

    shepherd: int          # the shepherd's pid
    started: float         # its start time (seconds since boot, from /proc) to tell pid reuse
    pgid: int              # the job's process group (its session_id)
    status_file: str
    tmpdir: str
    boot: str = ""         # the boot it ran in (/proc's boot_id): pids mean nothing after it
    #: When `PendingLaunch.start` made it (time.monotonic); not kept in the runtime: a
    #: launch read back (by a restarted server) has 0, and waits for no record.
    sent_at = 0.0

    def alive(self) -> bool:
        """Whether our shepherd is still running (the same process, not a reused pid): its
        start time unchanged, in the boot it was recorded in. After a reboot its pid names
        another process, whose start (clock ticks since that boot) may well be the same.
        A launch with no boot (recorded by a pbsplug before boots were recorded, or where
        boot_id cannot be read) is judged by its start time alone."""
        if self.boot and self.boot != boot_id():
            return False
        return process_start(self.shepherd) == self.started

    def resolve(self, wait: float = 0.0) -> int:
        """The job's process group, once the shepherd has recorded it (0 until then); waits
        up to `wait` seconds for it, and never past `RECORD_WAIT` seconds after the job's
        start: a shepherd that has not recorded it by then waits for room (a full disk),
        and each signal to the job held the server's loop `wait` seconds again (a qsig or
        a qdel its owner sent again and again)."""
        deadline = min(time.monotonic() + wait, self.sent_at + RECORD_WAIT) \
            if self.sent_at else 0.0
        while not self.pgid:
            recorded = Launch.recorded(self.status_file, self.tmpdir)
            if recorded is not None:
                self.pgid = recorded.pgid
            elif time.monotonic() >= deadline or not self.alive():
                break
            else:
                time.sleep(0.005)
        return self.pgid

    @classmethod
    def recorded(cls, status_file: str | Path, tmpdir: str | Path) -> Launch | None:
        """The launch a shepherd recorded for `status_file`, or None (it never started)."""
        data = _shepherd_record(status_file)
        if data is None:
            return None
        return cls(data["shepherd"], data["started"], data["pgid"], str(status_file),
                   str(tmpdir), str(data.get("boot", "")))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _shepherd_record(status_file: str | Path) -> Any:
    """The JSON a job's shepherd recorded as it started the job (``<seq>.shepherd``:
    `_run_job`), or None when it wrote none that reads."""
    try:
        return json.loads(Path(status_file).with_suffix(".shepherd").read_text())
    except (OSError, ValueError):
        return None


@dataclass
class JobExit:
    """What the shepherd reports when the job ends."""

    exit_status: int        # PBS's convention: the code, or 256 + signal when killed
    walltime: float
    cput: float
    mem_kb: int
    start_error: str = ""   # why the job could not start (exit_status EXEC_FAIL, EXEC_FAIL2)
    vmem_kb: int = 0

    @property
    def could_not_start(self) -> bool:
        """The job's process never ran the job (EXEC_FAIL, EXEC_FAIL2)."""
        return self.exit_status in (EXEC_FAIL, EXEC_FAIL2)

    @classmethod
    def read(cls, path: str | Path) -> JobExit | None:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return cls(EXEC_LOST, 0.0, 0.0, 0, "its status file cannot be read")
        try:
            return cls(**data)
        except TypeError:
            return cls(EXEC_LOST, 0.0, 0.0, 0, "its status file cannot be read")


@dataclass
class Usage:
    """What a running job has used so far, as its shepherd last sampled it (`sample`):
    seconds since its start, CPU seconds of its processes (theirs and their reaped
    children's), and the largest sum of their resident (mem) and virtual (vmem) sizes
    seen at a sample, in kb (mem at least the top process's own peak, `peak_kb`)."""

    walltime: float = 0.0
    cput: float = 0.0
    mem_kb: int = 0
    vmem_kb: int = 0

    @classmethod
    def read(cls, status_file: str | Path, seen: tuple[int, int] | None = None
             ) -> tuple[Usage | None, tuple[int, int] | None]:
        """The last sample the shepherd of the job with `status_file` wrote, and its file's
        (inode, mtime); None for the sample when there is none yet, when it does not read
        as one, or when the file is still the one `seen` (a stat, not a read: a new
        sample is a new file)."""
        path = Path(status_file).with_suffix(".usage")
        try:
            st = path.stat()
        except OSError:
            return None, None
        stamp = (st.st_ino, st.st_mtime_ns)
        if stamp == seen:
            return None, seen
        try:
            data = json.loads(path.read_text())
            return cls(float(data["walltime"]), float(data["cput"]), int(data["mem_kb"]),
                       int(data["vmem_kb"])), stamp
        except (OSError, ValueError, TypeError, KeyError):
            return None, stamp


#: When a shepherd samples its job's use (`Usage`), in seconds after the start: often at
#: first (a short job gets a figure; a cput limit is met soon), then every SAMPLE_EVERY
#: seconds, as PBS's MoM samples every 10 s (its $min_check_poll) at first.
FIRST_SAMPLES = (1.0, 2.0, 4.0, 8.0)
SAMPLE_EVERY = 10.0
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_PAGE_KB = (os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096) // 1024


class Proc(NamedTuple):
    """What one read of a process's /proc/<pid>/stat says of it."""

    state: str     # R, S, D, T, t, Z, X, ...
    ppid: int
    session: int
    start: float   # clock ticks since boot
    ticks: int     # CPU: its own and its reaped children's (utime stime cutime cstime)
    vsize: int     # bytes
    rss: int       # pages
    threads: int = 1  # its threads not reaped, its main thread among them
    group: int = 0    # its process group

    @property
    def gone(self) -> bool:
        """Ended (a zombie waiting for its parent, or dead): nothing to signal or stop. A
        process whose main thread exited alone (SYS_exit, pthread_exit) reads as a zombie
        (state Z) while its other threads run on: that one is not gone (`_has_ended`)."""
        return _has_ended(self.state, self.threads)


def processes() -> dict[int, Proc]:
    """Every process of the machine, as one read of its /proc/<pid>/stat each. Not one
    instant: a process may start, end or change parents while the others are read."""
    table = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            proc = _proc(name)
            if proc is not None:
                table[int(name)] = proc
    return table


def _proc(pid: int | str) -> Proc | None:
    stat = proc_stat(pid)
    if stat is None:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    try:
        return Proc(fields[0], int(fields[1]), int(fields[3]), float(fields[19]),
                    sum(int(v) for v in fields[11:15]), int(fields[20]), int(fields[21]),
                    int(fields[17]), int(fields[2]))
    except (IndexError, ValueError):
        return None


def job_processes(roots: Mapping[int, float], since: float, sessions: Collection[int] = (),
                  table: Mapping[int, Proc] | None = None,
                  sessions_until: float | None = None) -> dict[int, Proc]:
    """A job's processes in `table` (default: /proc, read now), the `roots` aside: the
    descendants of each root (`roots` maps a pid to its start time: a pid that names
    another process now is no root), the members of `sessions` and their descendants,
    all started since `since`. A job's shepherd is its subreaper (`become_subreaper`), so
    whatever the job starts stays its descendant, even when a process between them ends
    and whatever session it makes. Pid reuse: a child is taken only if it started no
    earlier than the parent it names (a pid freed and given again while the table is read
    names a newer process than its old children), and a session's member only while its
    leader, whose number it is, lives (the caller's check), or, given `sessions_until`,
    only one started no later than that (a leader gone, see `kill_session`)."""
    table = processes() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, proc in table.items():
        children.setdefault(proc.ppid, []).append(pid)
    found: dict[int, Proc] = {}
    stack = [pid for pid, start in roots.items() if pid in table and table[pid].start == start]
    if sessions:
        for pid, proc in table.items():
            if proc.session in sessions and pid not in roots and proc.start >= since and (
                    sessions_until is None or proc.start <= sessions_until):
                found[pid] = proc
                stack.append(pid)
    while stack:
        parent = stack.pop()
        born = max(since, table[parent].start)
        for pid in children.get(parent, ()):
            proc = table[pid]
            if pid not in found and pid not in roots and proc.start >= born:
                found[pid] = proc
                stack.append(pid)
    return found


def _tree_walk(root: int, started: float) -> dict[int, Proc] | None:
    """The descendants of `root` (started at `started`), read through the kernel's lists of
    each task's children (/proc/<pid>/task/<tid>/children): only the job's processes are
    read, so a round takes microseconds where a whole /proc takes milliseconds, fast enough
    to catch a process that forks and exits in a loop (its child comes to the subreaper).
    A child is taken when its stat names that parent, and started no earlier. None where
    the kernel keeps no such lists (CONFIG_PROC_CHILDREN)."""
    found: dict[int, Proc] = {}
    stack = [(root, started)]
    while stack:
        parent, born = stack.pop()
        try:
            tids = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue  # gone meanwhile
        for tid in tids:
            try:
                with open(f"/proc/{parent}/task/{tid}/children", "rb") as f:
                    listed = f.read().split()
            except FileNotFoundError:
                if parent == root and tid == str(root):
                    return None  # no such lists here
                continue
            except OSError:
                continue
            for name in reversed(listed):  # (the newest last: an orphan comes at the end)
                pid = int(name)
                proc = None if pid in found else _proc(pid)
                if proc is not None and proc.ppid == parent and proc.start >= born:
                    found[pid] = proc
                    if not proc.gone:  # (a zombie's children have come to the subreaper)
                        stack.append((pid, proc.start))
    return found


def sample(shepherd: int, since: float, job_session: int = 0
           ) -> tuple[float, int, int, list[tuple[int, float]]]:
    """The CPU seconds, resident kb and virtual kb of the job of `shepherd` (started at
    `since`; called by the shepherd itself), and its processes (pid, start): its
    processes as `job_processes` finds them (the shepherd's descendants, the members of
    its session and of `job_session`, an interactive job's own, while its leader is
    unreaped), each one's own CPU time and its reaped children's, as PBS's MoM sums a
    job's processes; and the CPU time of what the shepherd reaped (the job's orphans come
    to it, its subreaper: a process that ended between two samples is counted)."""
    found = job_processes({shepherd: since}, since, (shepherd, job_session or shepherd))
    ticks = sum(p.ticks for p in found.values())
    rss = sum(p.rss for p in found.values() if not p.gone)
    vsize = sum(p.vsize for p in found.values() if not p.gone)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (ticks / _TICKS + reaped.ru_utime + reaped.ru_stime, rss * _PAGE_KB,
            vsize // 1024, [(pid, p.start) for pid, p in found.items() if not p.gone])


def peak_kb(pid: int) -> int:
    """A live process's own peak resident size since its exec (VmHWM, kb); 0 once gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def boot_id() -> str:
    """This boot's id: a pid recorded in another boot names some other process."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> float | None:
    stat = proc_stat(pid)
    return None if stat is None else _start_of(stat)


def proc_stat(pid: int | str) -> str | None:
    """The text of /proc/<pid>/stat, or None when there is no such process. Read as bytes:
    the command name in it is whatever bytes its process chose (prctl, /proc/self/comm),
    so decoding it strictly raised for a name that is not UTF-8; its bytes that are not
    become U+FFFD, and the fields after its last ``)`` are the kernel's digits."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None


def _start_of(stat: str) -> float | None:
    """The start time (clock ticks since boot) in a /proc/<pid>/stat text; None for a
    zombie (it has ended, reaped by whoever is its parent: `_ended`) or a text of another
    shape."""
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 20 or _ended(fields):
        return None
    try:
        return float(fields[19])
    except ValueError:
        return None


def _has_ended(state: str, threads: int) -> bool:
    """Whether a process in `state` with `threads` not reaped has ended: a zombie (Z, or X
    while it goes) with no thread left but its main one. A process whose main thread
    exited alone reads Z while its other threads run on (the kill rounds took one for
    ended and never signalled it: it ran on past its job's end, qdel and suspend)."""
    return state in ("Z", "X", "x") and threads <= 1


def _ended(fields: list[str]) -> bool:
    """`_has_ended` for the fields after the command name of a /proc/<pid>/stat text (one
    whose thread count cannot be read counts one)."""
    try:
        threads = int(fields[17])
    except (IndexError, ValueError):
        threads = 1
    return _has_ended(fields[0], threads)


def process_identity(pid: int) -> tuple[int, float] | None:
    """A live process's owner (its real uid, from ``status``: the folder's owner is root
    for a process that is not dumpable) and start time, both read through one descriptor
    of its /proc folder, which stays bound to that process: if it ends and its pid is
    reused in between, the reads fail instead of describing the newcomer. None when there
    is no such process."""
    try:
        fd = os.open(f"/proc/{int(pid)}", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except (OSError, ValueError):
        return None
    try:
        status, stat = (_read_in(fd, name) for name in ("status", "stat"))
    except OSError:
        return None
    finally:
        os.close(fd)
    uid = next((line.split()[1] for line in status.splitlines()
                if line.startswith("Uid:") and len(line.split()) > 1), None)
    started = _start_of(stat)
    if started is None or uid is None or not uid.isdigit():
        return None
    return int(uid), started


def _read_in(folder: int, name: str) -> str:
    """A small file of a /proc folder open as `folder`."""
    fd = os.open(name, os.O_RDONLY, dir_fd=folder)
    try:
        return os.read(fd, 8192).decode("utf-8", "replace")
    finally:
        os.close(fd)


class _Start(TypedDict):
    """What `PendingLaunch.start` sends the shepherd (JSON, in its request file): `_run_job`'s
    arguments, but what the shepherd has already."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    stdout: str
    stderr: str | None
    umask: int
    names: list[str]
    cpu_limit: int | None


class _StartRequest(_Start, total=False):
    interactive: _interactive.Spec  # (an interactive job's alone)


class PendingLaunch:
    """A shepherd forked by `prepare`, waiting for the job's command: `start` it, or
    `cancel` it. `pid` is the shepherd, the process that will run the job."""

    def __init__(self, pid: int, fd: int, request_fd: int, status_file: Path, tmpdir: Path):
        self.pid = pid
        self.started = process_start(pid) or 0.0
        self.status_file = status_file
        self.tmpdir = tmpdir
        self._fd: int | None = fd  # the pipe's write end; None once started or cancelled
        self._request_fd = request_fd  # the request file (`_request_file`), shared with it

    def start(self, argv: list[str], env: dict[str, str], cwd: str, stdout: str,
              stderr: str | None, umask: int = DEFAULT_UMASK,
              names: tuple[str, str] = ("", ""), cpu_limit: int | None = None,
              interactive: _interactive.Spec | None = None) -> Launch:
        """Have the shepherd run the job; returns at once. `stderr` None joins it to stdout.
        `names` are the output and error files' names in a folder that `stdout` or `stderr`
        names (``-o DIR/``: ``DIR/<Job_Name>.o<seq>``). `cpu_limit`: each of the job's
        processes' RLIMIT_CPU, in seconds. `interactive`: qsub -I's socket and token
        (`interactive.attach`), with ``login`` to run a login shell. An OSError means
        the shepherd is gone (a hook killed it); it has been reaped."""
        if self._fd is None:
            raise RuntimeError("this launch was already started or cancelled")
        fd, self._fd = self._fd, None
        start: _StartRequest = {"argv": argv, "env": env, "cwd": cwd, "stdout": stdout,
                                "stderr": stderr, "umask": umask, "names": list(names),
                                "cpu_limit": cpu_limit}
        if interactive:
            start["interactive"] = interactive
        # The request goes into the file, which takes it whole at once, and its word (one
        # byte, into the empty pipe) never waits either: written down the pipe itself, a
        # request over the pipe's 64 KiB (a large environment) to a shepherd a launch hook
        # had stopped held the server's loop until the shepherd went on.
        try:
            _write_at_start(self._request_fd, json.dumps(start).encode())
            os.set_blocking(fd, False)
            os.write(fd, b"\n")
        except OSError:
            _reap(self.pid, kill=True)
            raise
        finally:
            os.close(fd)
            os.close(self._request_fd)
        launch = Launch(self.pid, self.started, 0, str(self.status_file), str(self.tmpdir),
                        boot_id())
        launch.sent_at = time.monotonic()
        return launch

    def cancel(self) -> None:
        """The job will not run: end the shepherd and reap it. Nothing of it is left, no
        status file and no process. Does nothing once started or cancelled."""
        if self._fd is None:
            return
        os.close(self._fd)
        os.close(self._request_fd)
        self._fd = None
        # Closing the pipe alone would do, unless a process forked from the server while
        # it was open (an in-process hook's child, what it started: a process-mode hook's
        # child closes it) still holds it; the shepherd has
        # done nothing yet, so killing it loses nothing and the wait below is bounded.
        _reap(self.pid, kill=True)


def user_ids(user: str | None) -> Ids | None:
    """The ids to run `user`'s job as, or None to run it as the server's own user (the
    server is not root, or no user is named). KeyError: no such user."""
    if user is None or os.geteuid() != 0:
        return None
    pw = pwd.getpwnam(user)
    return pw.pw_uid, pw.pw_gid, pw.pw_name


def prepare(status_file: Path, tmpdir: Path, user: str | None) -> PendingLaunch:
    """Fork the job's shepherd, which waits for `PendingLaunch.start`; makes the job's
    `tmpdir` (owned by `user`, see `make_job_dir`). `user` None runs the job as the
    server's user. `StartRequestError` (`ShepherdError` for the pipe or the fork) when
    the machine is short of what the start needs: the start's failure, tried again."""
    status_file.parent.mkdir(parents=True, exist_ok=True)
    for suffix in (".status", ".shepherd", ".note", ".usage"):  # an earlier run's
        status_file.with_suffix(suffix).unlink(missing_ok=True)
    ids = user_ids(user)
    try:
        make_job_dir(tmpdir, ids)
    except OSError as exc:
        raise JobDirError(exc.errno, exc.strerror, exc.filename) from exc
    server = os.getpid()
    request_fd = _request_file(status_file.parent)
    opened = [request_fd]
    call = "pipe"
    try:
        read_fd, write_fd = os.pipe()
        opened += (read_fd, write_fd)
        call = "fork"
        pid = os.fork()
    except OSError as exc:  # (no descriptor or process left: none of these kept open)
        for fd in opened:
            os.close(fd)
        raise ShepherdError(exc.errno, f"its shepherd could not be made ({call}): "
                            f"{exc.strerror}") from exc
    if pid == 0:  # the shepherd
        try:
            os.close(write_fd)
            _shepherd(read_fd, request_fd, server, ids, status_file)
        finally:
            os._exit(0)
    os.close(read_fd)
    return PendingLaunch(pid, write_fd, request_fd, status_file, tmpdir)


#: Errors that say the machine is short, for now, of what a job's start makes: room or
#: inodes (ENOSPC, EDQUOT), descriptors (EMFILE, ENFILE), memory (ENOMEM). A start that
#: meets one making the job's files (its script, its nodefile, its request file's fallback
#: in jobs/) fails, and the job is requeued (`Engine._failed_start`), as for a shepherd
#: that cannot be made (`ShepherdError`); any other error (a folder not the server's own,
#: a link where a folder should be) ends the job: its start can never work. Its TMPDIR is
#: PBS's rule: any error making it ends the job (`JobDirError`).
SHORT_OF = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.ENFILE, errno.ENOMEM})

#: os.memfd_create's errors that say the kernel offers no memfd here: none before Linux 3.17
#: (ENOSYS), a flag it does not know (EINVAL), a seccomp filter that refuses the call
#: (EPERM, as container runtimes' do). Any other (ENOMEM, EMFILE, ENFILE) is the start's
#: failure (`StartRequestError`): a file made instead would run short of the same.
NO_MEMFD = frozenset({errno.ENOSYS, errno.EINVAL, errno.EPERM})


class StartRequestError(OSError):
    """The file of no name for a job's command could not be made (`_request_file`): the
    job does not start, and is requeued (`Engine._failed_start`). Its text is the reason
    alone (no ``[Errno N]``), said in the job's log line."""

    def __str__(self) -> str:
        return str(self.strerror)


class JobDirError(OSError):
    """The job's TMPDIR could not be made (`prepare`), for whatever reason, a full disk
    too: the job cannot start and ends (`Engine._could_not_start`), as PBS's MoM aborts a
    job whose TMPDIR it cannot make (JOB_EXEC_FAIL1), never taken for a shortage of the
    moment (`SHORT_OF`)."""


class ShepherdError(StartRequestError):
    """The job's shepherd could not be made (`prepare`): its pipe or its fork refused, for
    want of a descriptor, memory or a process for the server's user (EAGAIN), which the
    machine may have again at the next try: a failed start, requeued as
    `StartRequestError` is."""


def _request_file(folder: Path) -> int:
    """A file of no name for the job's command, which the shepherd inherits: in memory
    (memfd), or, where the kernel has no memfd (`NO_MEMFD`, or a Python without
    os.memfd_create), one made in `folder` (the server's) and unlinked at once. Read and
    written at its start (pread, pwrite): its offset is shared. `StartRequestError` when
    the memfd is refused for another reason."""
    try:
        return os.memfd_create("pbsplug-start")
    except AttributeError:  # (a Python built without it)
        pass
    except OSError as exc:
        if exc.errno not in NO_MEMFD:
            raise StartRequestError(exc.errno, "its start request could not be made "
                                    f"(memfd_create): {exc.strerror}") from exc
    fd, path = tempfile.mkstemp(dir=folder)
    try:
        os.unlink(path)
    except OSError:
        os.close(fd)
        raise
    return fd


def _write_at_start(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.pwrite(fd, view, len(data) - len(view)):]


def _read_from_start(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


# -- files made for a job -------------------------------------------------------------------------

def _open_private_dir(path: Path) -> int:
    """An O_DIRECTORY|O_NOFOLLOW descriptor of `path`, a folder of the server's that nobody
    else may write (else a user could swap what the server makes in it): OSError if not."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise PermissionError(errno.EPERM, "not the server's own private folder (owner "
                              f"{st.st_uid}, mode {stat.S_IMODE(st.st_mode):o})", str(path))
    return fd


#: How the server opens a folder of a job's to remove it: never through a link (O_NOFOLLOW),
#: never a FIFO, device or terminal (O_DIRECTORY refuses them before they are opened), never
#: as its controlling terminal (O_NOCTTY). os.fwalk opened each folder it had listed without
#: O_NOFOLLOW: a user who swapped one for a link in between had root open any path, a
#: terminal included (which a server leading its session took as its own, and could be
#: killed through).
_DIR_OPEN = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NOCTTY | os.O_CLOEXEC
#: Folders held open at once while removing a tree; a folder deeper than that is moved up
#: to the top folder, under a name nobody can guess, and removed from there (os.fwalk
#: recursed, and a job's TMPDIR nested 1,000 deep raised RecursionError).
REMOVE_DEPTH = 64
#: Times a folder is listed again when something appeared in it while it was emptied.
REMOVE_RETRIES = 3
#: Seconds a job's end spends removing its TMPDIR in the server's loop; what is not gone
#: by then is set aside as a leftover (`LEFTOVER` in the same folder) and removed by
#: `sweep_leftovers` a slice at a time: a process the job left (one that made a session of
#: its own) can grow a tree faster than it is removed, and stalled the server for minutes.
REMOVE_SECONDS = 0.5
LEFTOVER = ".leftover-"


class _OutOfTime(Exception):
    """A removal's seconds are spent; what is left stays."""


@dataclass
class _Folder:
    """A folder being emptied by `_remove_entry`: its parent's descriptor and its name
    there (to remove it once empty), its own descriptor, the names of its folders still to
    empty, and how many times it was listed again (it grew)."""

    parent: int
    name: str
    fd: int
    pending: list[str]
    retries: int = 0


def _remove_entry(dir_fd: int, name: str, deadline: float | None = None) -> None:
    """Remove `name` in `dir_fd`, whatever it is, following no link (a planted symlink goes,
    its target stays); a folder goes with everything in it, however deep, without
    recursion. A folder moved elsewhere while it is emptied is emptied where it went: only
    what was under `name` is ever removed. `_OutOfTime` at `deadline` (time.monotonic)."""
    top = _open_folder(dir_fd, name)
    if top is None:
        return
    stack = [_Folder(dir_fd, name, top, [])]
    try:
        stack[0].pending = _empty_but_folders(top, deadline)
        while stack:
            if deadline is not None and time.monotonic() > deadline:
                raise _OutOfTime
            frame = stack[-1]
            if frame.pending:
                child = frame.pending.pop()
                if len(stack) >= REMOVE_DEPTH:  # no deeper: it moves up to the top folder
                    new = f".pbsplug-removing-{secrets.token_hex(8)}"
                    os.rename(child, new, src_dir_fd=frame.fd, dst_dir_fd=top)
                    stack[0].pending.append(new)
                    continue
                sub = _open_folder(frame.fd, child)
                if sub is not None:
                    stack.append(_Folder(frame.fd, child, sub, []))
                    stack[-1].pending = _empty_but_folders(sub, deadline)
                continue
            try:
                os.rmdir(frame.name, dir_fd=frame.parent)
            except OSError as exc:
                if exc.errno != errno.ENOTEMPTY or frame.retries >= REMOVE_RETRIES:
                    raise
                frame.pending = _empty_but_folders(frame.fd, deadline)  # it grew
                frame.retries += 1
                continue
            os.close(frame.fd)
            stack.pop()
    finally:
        for frame in stack:
            os.close(frame.fd)


def _open_folder(dir_fd: int, name: str) -> int | None:
    """A descriptor of the folder `name` in `dir_fd`; None when it is gone, or was not a
    folder (a file, a link, a FIFO, perhaps swapped in after it was listed): then its name
    is removed, and what it named is never opened."""
    try:
        return os.open(name, _DIR_OPEN, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    return None


def _empty_but_folders(fd: int, deadline: float | None = None) -> list[str]:
    """Remove everything in the folder `fd` but its folders that are not empty (links and
    files: the names go, nothing is followed; an empty folder goes at once); those
    folders' names. Everything listed before the deadline is done, so a slice always
    makes progress (a listing cut short and thrown away made none: a folder of 250,000
    empty folders was listed again and again, forever)."""
    folders = []
    with os.scandir(fd) as entries:
        for n, entry in enumerate(entries):
            if deadline is not None and n % 256 == 255 and time.monotonic() > deadline:
                raise _OutOfTime
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    os.rmdir(name, dir_fd=fd)
                else:
                    os.unlink(name, dir_fd=fd)
            except FileNotFoundError:
                pass
            except IsADirectoryError:  # a file turned folder since it was listed
                folders.append(name)
            except OSError as exc:
                if exc.errno not in (errno.ENOTEMPTY, errno.ENOTDIR):
                    raise
                folders.append(name)  # not empty (or turned file): opened or unlinked next
    return folders


def _set_aside(parent: int, name: str) -> None:
    """What is left of `name` becomes a leftover for `sweep_leftovers`."""
    os.rename(name, f"{LEFTOVER}{secrets.token_hex(8)}", src_dir_fd=parent, dst_dir_fd=parent)


def _remove_or_set_aside(parent: int, name: str, seconds: float) -> str | None:
    """Remove `name` for up to `seconds`; what is left then, or after an error (a process
    still writing there, an entry root may not remove), is set aside for
    `sweep_leftovers`: the name is free at once. The error, if one set it aside."""
    try:
        _remove_entry(parent, name, time.monotonic() + seconds)
    except _OutOfTime:
        _set_aside(parent, name)
    except OSError as exc:
        _set_aside(parent, name)
        return f"{type(exc).__name__}: {exc}; set aside for later"
    return None


def make_job_dir(path: Path, ids: Ids | None, mode: int = 0o700) -> None:
    """Make the job's folder `path` (its TMPDIR) afresh, owned by the job's user: in the
    server's private parent, with mkdir (what was there, a stale folder or a planted link,
    is removed first, without following links), then fchown/fchmod through an
    O_NOFOLLOW descriptor that is checked to be the folder just made."""
    parent = _open_private_dir(path.parent)
    try:
        try:
            os.mkdir(path.name, 0o700, dir_fd=parent)
        except FileExistsError:  # an earlier run's (a requeue), or a planted name: it goes
            _set_aside(parent, path.name)  # to the sweep, and this start waits for nothing
            os.mkdir(path.name, 0o700, dir_fd=parent)
        fd = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                     dir_fd=parent)
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid():  # not ours: someone swapped it (cannot happen)
                raise PermissionError(errno.EPERM, "not the folder the server made", str(path))
            if ids:
                os.fchown(fd, ids[0], ids[1])
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def remove_job_dir(path: Path, seconds: float = REMOVE_SECONDS) -> str | None:
    """Remove a job's folder and what its job left in it, following no link, for up to
    `seconds`; what is left then is set aside for `sweep_leftovers`. Why it could not be
    removed nor set aside, or None."""
    try:
        parent = _open_private_dir(path.parent)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror or exc}"
    try:
        problem = _remove_or_set_aside(parent, path.name, seconds)
    except Exception as exc:  # noqa: BLE001 - whatever a job left, the server goes on
        return f"{path}: {type(exc).__name__}: {exc}"
    finally:
        os.close(parent)
    return f"{path}: {problem}" if problem else None


def sweep_leftovers(folder: Path, seconds: float) -> bool:
    """Go on removing the leftovers set aside in `folder` for up to `seconds`; whether the
    time ran out first (more to do at once). One that cannot be removed at all (a file
    made immutable) stays, and is tried again at the next sweep."""
    try:
        parent = _open_private_dir(folder)
    except OSError:
        return False
    deadline = time.monotonic() + seconds
    try:
        names = [n for n in os.listdir(parent) if n.startswith(LEFTOVER)]
        random.shuffle(names)  # one that takes long does not keep the others waiting
        for name in names:
            try:
                _remove_entry(parent, name, deadline)
            except _OutOfTime:
                return True
            except OSError:
                continue  # tried again at the next sweep
        return False
    finally:
        os.close(parent)


def write_job_file(path: Path, data: str, ids: Ids | None, mode: int = 0o600) -> None:
    """Write a file the job reads (its script, its nodefile) as a new file in the server's
    private folder, handed to the job's user through the open descriptor."""
    parent = _open_private_dir(path.parent)
    try:
        _remove_entry(parent, path.name)
        fd = os.open(path.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                     | os.O_CLOEXEC, 0o600, dir_fd=parent)
    finally:
        os.close(parent)
    with os.fdopen(fd, "w") as f:
        if ids:
            os.fchown(fd, ids[0], ids[1])
        os.fchmod(fd, mode)
        f.write(data)


def _reap(pid: int, kill: bool = False) -> None:
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _until_room(attempt: Callable[[bool], _T], wait: bool = True) -> _T:
    """`attempt(waited)`, tried again each second while it fails for want of room (ENOSPC,
    EDQUOT: a full disk) and `wait`; `waited`: whether it has waited already."""
    waited = False
    while True:
        try:
            return attempt(waited)
        except OSError as exc:
            if not wait or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
        waited = True
        time.sleep(1.0)


def _write_aside(path: Path, data: Mapping[str, object], wait_for_space: bool = False
                 ) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    # (a full disk: the job's end is kept until there is room)
    _until_room(lambda waited: tmp.write_text(json.dumps(data)), wait_for_space)
    os.replace(tmp, path)


class _Abandoned(Exception):
    """A shepherd's server is gone before its job started: it ends, starting nothing."""


class _Reserved:
    """A small file written aside (as `_write_aside`) into room had beforehand: its
    ``.tmp``, made ROOM bytes long at once, waiting for room on a full disk; `write`
    then writes over those bytes, which needs no more room (on a file system that writes
    in place, as tmpfs and ext4 do), and puts the file in place.

    `server`: the shepherd's server. A shepherd that had to wait gives up (`_Abandoned`)
    once its server is gone: a server started again finds no record of the job and
    queues it again, or finds its shepherd gone; a shepherd that went on to start the job
    once there was room ran it untracked, beside the job's next run."""

    ROOM = 512

    def __init__(self, path: Path, server: int | None = None):
        self.path = path
        self.tmp = path.with_suffix(path.suffix + ".tmp")

        def abandoned(waited: bool) -> bool:
            return waited and server is not None and os.getppid() != server

        def reserve(waited: bool) -> int:
            # (whether the server is gone: looked at before and after each try, once it
            # waits)
            if abandoned(waited):
                raise _Abandoned
            # (the open too: no inode left is ENOSPC as well)
            fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
            try:
                if os.write(fd, b" " * self.ROOM) != self.ROOM:
                    raise OSError(errno.ENOSPC, "no room for the whole record", str(self.tmp))
                if abandoned(waited):
                    raise _Abandoned
            except BaseException:
                os.close(fd)
                raise
            return fd

        self.fd = _until_room(reserve)

    def write(self, data: Mapping[str, object]) -> None:
        # (JSON allows the spaces; a record is about 170 bytes, well inside ROOM)
        try:
            os.pwrite(self.fd, json.dumps(data).encode().ljust(self.ROOM), 0)
        finally:
            os.close(self.fd)
        os.replace(self.tmp, self.path)


#: prctl's option that makes a process the parent of its orphaned descendants (Linux 3.4).
PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Make this process a child subreaper: a descendant whose parent ends comes to it,
    not to init, so that whatever its job starts stays in its tree, whatever session it
    makes (`job_processes`). Not inherited by its children. Whether it is one."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(ctypes.c_int(PR_SET_CHILD_SUBREAPER), ctypes.c_ulong(1),
                          ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError, ImportError):  # no libc prctl here (not Linux)
        return False


def _reap_orphans(keep: int) -> None:
    """Reap the shepherd's children that ended, but `keep` (the job's top process, whose
    status and use it waits for): the job's orphans, come to their subreaper, and the
    note writers it stopped waiting for. What they used counts in its RUSAGE_CHILDREN."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == keep:
            return  # (the top process first in line: reaped by its own wait, next)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, os.WNOHANG)


def _reap_all(seconds: float) -> None:
    """Reap every child of the shepherd's, waiting up to `seconds` for those just killed.
    The deadline holds however many keep ending: it was looked at only when none had ended,
    so a stream of new zombies (processes that fork and exit as fast as they are reaped)
    kept the shepherd here for ever. What is left then goes to the shepherd's reaper when
    it exits (its CPU time not counted in the job's)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            done, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if time.monotonic() >= deadline:
            return
        if done == 0:
            time.sleep(0.002)


def _shepherd(fd: int, request_fd: int, server: int, ids: Ids | None,
              status_file: Path) -> None:
    os.setsid()
    become_subreaper()  # (failing, an old kernel: its session still finds the job's)
    # Every signal as a fresh process has it, none blocked: whatever the server's process
    # was left with (a plugin that ignored SIGCHLD had the shepherd's wait fail, and the
    # job ran again and again) is not the job's, and an ignored signal survives exec.
    signal.pthread_sigmask(signal.SIG_SETMASK, ())
    for sig in signal.valid_signals():
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            try:
                signal.signal(sig, signal.SIG_DFL)
            except (OSError, ValueError):
                pass
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the job's group gets the signals
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # What the server had open (its socket, its database), but the pipe and request file.
    low, high = sorted((fd, request_fd))
    os.closerange(3, low)
    os.closerange(low + 1, high)
    os.closerange(high + 1, 65536)
    request = _wait_for_start(fd, request_fd, server)
    os.close(fd)
    os.close(request_fd)
    if request is not None:
        try:
            _run_job(**request, ids=ids, status_file=status_file, server=server)
        except _Abandoned:
            pass  # (nothing of the job was started)
        except BaseException:
            # A shepherd that fails loses its job (the server finds no status); nothing
            # of the job may run on untracked.
            me = os.getpid()
            _kill_job(me, process_start(me) or 0.0)
            raise


def _wait_for_start(fd: int, request_fd: int, server: int) -> _StartRequest | None:
    """The job's command from `PendingLaunch.start` (in the request file, once its word
    comes down the pipe `fd`), or None: cancelled (EOF) or the server died. A process
    forked from the server (by an in-process hook; a process-mode hook's child closes it)
    may still hold the pipe after the server died, so the shepherd also watches its
    parent."""
    poller = select.poll()  # not select(): the pipe's number may be past FD_SETSIZE
    poller.register(fd, select.POLLIN)
    while not poller.poll(1000):
        if os.getppid() != server:
            return None
    if not os.read(fd, 1):
        return None
    return json.loads(_read_from_start(request_fd))  # (the server's own: `start`)


def become(ids: Ids) -> None:
    """Drop this process to the user `ids` for good: groups, gid, then uid."""
    os.initgroups(ids[2], ids[1])
    os.setgid(ids[1])
    os.setuid(ids[0])


def act_as(ids: Ids) -> None:
    """Open files as the user `ids` from here on (effective uid and gid, and the user's
    groups), the real and saved uid staying root's: the user cannot signal the process
    (kill(2) compares the sender's uid with the target's real and saved ones), so cannot
    stop one the server waits for in its loop. Only for the server's own code, which runs
    no program of the user's (the process could become root again)."""
    os.initgroups(ids[2], ids[1])
    os.setegid(ids[1])
    os.seteuid(ids[0])


def limit_cpu(seconds: int) -> None:
    """Each process of the job may use `seconds` of CPU (RLIMIT_CPU, soft and hard, as
    PBS's MoM sets it from cput and pcput): past it, the kernel kills it with SIGKILL. A
    lower limit the process has already stays."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    if hard != resource.RLIM_INFINITY:
        seconds = min(seconds, hard)
    resource.setrlimit(resource.RLIMIT_CPU, (seconds, seconds))


def open_in_folder(path: str, name: str, flags: int, mode: int = 0o666) -> tuple[int, str]:
    """``os.open`` of a job's output or error file `path`, and the path opened, where a
    folder means `name` in it, as PBS does: ``DIR/``, or `path` itself a folder, never a
    link to one (a link planted at a job's default output name, to a folder only root may
    write, had root's job write its file there: ``os.path.isdir`` follows links, and
    O_NOFOLLOW guards only the last name). The folder is opened once (O_PATH, O_NOFOLLOW)
    and the file in it through that descriptor, so it cannot be swapped for a link in
    between. An error names the whole path."""
    if name and path.endswith("/"):
        path = os.path.join(path, name)
    elif name:
        try:
            folder = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:  # no folder (a link is refused by the file's own O_NOFOLLOW)
            return os.open(path, flags, mode), path
        path = os.path.join(path, name)
        try:
            return os.open(name, flags, mode, dir_fd=folder), path
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, path) from None
        finally:
            os.close(folder)
    return os.open(path, flags, mode), path


def check_output_file(fd: int, path: str) -> None:
    """Refuse (OSError, naming `path`) what an open job's output or error file must not be:
    anything but a regular file or a device (a FIFO, a socket...), or a regular file of
    another user's than the process's (effective) one, or one with another name (a hard
    link). A file an attacker made where another user's job writes (its default
    ``<name>.o<seq>`` in a folder both may write) took that job's output, root's too, for
    the attacker to read: opening an existing file with O_CREAT takes it whoever owns it.
    A hard link there to a file of root's (any user may make one where
    fs.protected_hardlinks is 0) had root's job truncate that file."""
    st = os.fstat(fd)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
        raise OSError(errno.EINVAL, "is not a regular file", path)
    if stat.S_ISREG(st.st_mode) and st.st_uid != os.geteuid():
        raise OSError(errno.EPERM, f"is another user's file (uid {st.st_uid}), which a "
                      "job's output never writes", path)
    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        raise OSError(errno.EPERM, f"has {st.st_nlink} names (a hard link), which a job's "
                      "output never writes", path)


def _slash_advice(path: object) -> str:
    """For a refused link at a job's output path: how to name the folder it leads to, when
    the link is the process's (the job's owner's) own and leads to a folder (``-o logs/``
    reaches it); nothing for another user's link (one planted at a job's default output
    name must not be taken for the job's owner's)."""
    if not isinstance(path, str):
        return ""
    try:
        if os.lstat(path).st_uid != os.geteuid() or not os.path.isdir(path):
            return ""
    except OSError:
        return ""
    return f"; a link to a folder is named with a trailing / ({path.rstrip('/')}/)"


def open_output(path: str, name: str) -> int:
    """Open the job's output or error file as the job's user (called after `become`):
    created with the job's umask, truncated, never through a symbolic link; a folder
    (``DIR/``, or an existing one) means `name` in it, as PBS does (`open_in_folder`).
    Truncated only once `check_output_file` has passed it: another user's is left whole.
    A file this open made (O_EXCL) is not checked: it is the job's whoever a file system
    that maps owners (NFS's root_squash, a CIFS mount's uid=) shows as its owner."""
    # (O_NONBLOCK: a FIFO with no reader fails instead of hanging the start)
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        try:
            fd, path = open_in_folder(path, name, flags | os.O_EXCL)
            made = True
        except FileExistsError:  # (a link there too: the open below says ELOOP)
            fd, path = open_in_folder(path, name, flags)
            made = False
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OSError(errno.ELOOP, "is a symbolic link, which a job's output never "
                          f"follows{_slash_advice(exc.filename)}", exc.filename) from None
        raise
    try:
        if not made:
            check_output_file(fd, path)
            if stat.S_ISREG(os.fstat(fd).st_mode):
                os.ftruncate(fd, 0)
    except BaseException:
        os.close(fd)
        raise
    os.set_blocking(fd, True)
    return fd


#: The signals the job's process takes as the job does, which the shepherd ignores.
_TAKEN = {signal.SIGTERM, signal.SIGINT}


def _wait_for_word(recorded: int, mask: set[int | signal.Signals] | None = None) -> None:
    """In the job's process: take SIGTERM and SIGINT as the job does (the shepherd ignores
    them; `_run_job` forks with them blocked, and `mask` is the signal mask to restore),
    then wait for the shepherd's word that the job is recorded, and end (127) when the
    shepherd is gone instead. A qdel's SIGTERM may come as soon as the server reads the
    record, before this process has read the word, or even taken the signals: ignored then
    (the shepherd's SIG_IGN), it was lost, and the job ran on to its SIGKILL after
    kill_delay (Exit_status 265, not 271, or R for ever under a long kill_delay, seen under
    load). Blocked, it waits, and ends this process once taken."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    if os.read(recorded, 1) != b"\0":  # the shepherd is gone: no job
        os._exit(127)
    os.close(recorded)


def _run_job(argv: list[str], env: dict[str, str], cwd: str, stdout: str,
             stderr: str | None, ids: Ids | None, status_file: Path,
             umask: int = DEFAULT_UMASK, names: list[str] | None = None,
             cpu_limit: int | None = None, interactive: _interactive.Spec | None = None,
             server: int | None = None) -> None:
    t0 = time.monotonic()
    out_name, err_name = names or ("", "")
    # The room for the shepherd's record is had before the job starts: on a full disk the
    # job starts once there is room, never runs with no record (the server signals its
    # group through it), and never is lost for it.
    record = _Reserved(status_file.with_suffix(".shepherd"), server)
    # The job's process tells the shepherd why it could not start, and hands it the
    # descriptor of its error file (PBS's notes are written through it: the file the
    # job's owner opened, never one the shepherd would open); its exec closes it.
    report, job_end = socket.socketpair()
    # The job's process waits for the shepherd's word that the job is recorded: a shepherd
    # killed before (a qdel's SIGKILL to a job whose record waited for room) leaves no job
    # to run untracked: one that made a session of its own (interactive) was out of reach.
    recorded, go = os.pipe()
    # SIGTERM and SIGINT blocked over the fork: the job's process has them from its first
    # instruction, waiting until it takes them (`_wait_for_word`), never ignored (the
    # shepherd's SIG_IGN) in between, when a qdel's SIGTERM was lost under load.
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, _TAKEN)
    try:
        pid = os.fork()
    except BaseException:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        raise
    if pid != 0:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)  # (the shepherd's, as it was)
    if pid == 0:  # the job
        stage = "cannot run as the job's owner"
        try:
            report.close()
            os.close(record.fd)  # (root's file, for the server: none of the owner's process)
            os.close(go)
            _wait_for_word(recorded, mask)
            if interactive:  # a session of its own, whose controlling terminal qsub holds
                os.setsid()
            else:
                os.setpgid(0, 0)
            # As the user from here on: nothing below is ever done as root.
            if ids:
                become(ids)
            if cpu_limit is not None:
                limit_cpu(cpu_limit)
            os.umask(umask & 0o777)
            if interactive:  # (as the owner: its socket is the owner's qsub's)
                stage = "cannot reach its interactive qsub"
                terminal, conn = _interactive.attach(interactive, env.get("PBS_JOBID", ""))
                socket.send_fds(job_end, [b"\0"], [terminal, conn.fileno()])
                conn.close()
                for std in (0, 1, 2):
                    os.dup2(terminal, std)
                if interactive.get("term"):
                    env = {**env, "TERM": interactive["term"]}
                if interactive.get("login"):  # the owner's login shell: argv[0] "-bash"
                    argv = [argv[0], "-" + os.path.basename(argv[0])]
            else:
                stage = "cannot open its output"
                out = open_output(stdout, out_name)
                err = out if stderr is None else open_output(stderr, err_name)
                socket.send_fds(job_end, [b"\0"], [err])
                os.dup2(out, 1)
                os.dup2(err, 2)
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
            stage = NO_HOME  # (as the owner: a link there gives them nothing more)
            os.chdir(cwd)
            stage = ""  # from here, the note goes to the job's own error file as well
            if interactive and interactive.get("login"):
                os.execve(argv[0], argv[1:], env)
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:  # tell the shepherd why the job could not start
            why = f"{stage + ': ' if stage else ''}{type(exc).__name__}: {exc}"
            try:  # the user's own file, written by the user's process
                if stage == NO_HOME:
                    os.write(2, NO_HOME_NOTE.encode())
                elif not stage:
                    os.write(2, f"pbsplug: the job could not start: {why}\n".encode())
            except OSError:
                pass
            try:
                job_end.sendall(why.encode())
            finally:
                os._exit(127)
    job_end.close()
    try:
        if not interactive:  # (an interactive job's setsid would fail in a group's leader)
            os.setpgid(pid, pid)
    except OSError:
        pass  # the job's process is gone (it waits for the shepherd's word before its own)
    me = os.getpid()
    me_started = process_start(me) or 0.0
    # (with the job's process's start: an interactive job's session, out of the shepherd's,
    # is found through it if the shepherd is lost before its first sample, `kill_session`)
    record.write({"shepherd": me, "started": me_started, "pgid": pid,
                  "job_started": process_start(pid) or 0.0, "boot": boot_id()})
    os.write(go, b"\0")  # (the shepherd's own read end still open: a job's process
    os.close(go)         # killed before it read is no SIGPIPE, the shepherd's default)
    os.close(recorded)
    start_error, err_fd, qsub_fd = _start_report(report)
    used = Usage()
    try:
        status, usage = _wait_for_job(pid, status_file, err_fd, t0, used, ids,
                                      qsub_fd=qsub_fd)
    finally:
        for fd in (err_fd, qsub_fd):
            if fd is not None:
                os.close(fd)
    # The job is over when its top process is: what it left running in its session (a
    # command put in the background, a daemon that did not setsid) is killed, as PBS's MoM
    # does; it would run on untracked, past the job's walltime and on a vnode given away.
    # What it used since the last sample is counted first, with the top process's (its
    # leftovers are not its reaped children): a job whose work ran in the background
    # between two samples, up to 10 s of it a process, reported none of it.
    # (the top process reaped: its use and its reaped children's are the shepherd's
    # RUSAGE_CHILDREN now, which `sample` counts)
    try:
        cput, mem_kb, vmem_kb, _ = sample(me, me_started)
        used.cput = max(used.cput, usage.ru_utime + usage.ru_stime, cput)
        used.mem_kb, used.vmem_kb = max(used.mem_kb, mem_kb), max(used.vmem_kb, vmem_kb)
    except Exception:  # noqa: BLE001 - an odd /proc: the samples' figures stand
        pass
    _kill_job(me, me_started)
    _reap_all(1.0)  # (those killed come to the shepherd: what they used since is counted)
    reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
    used.cput = max(used.cput, reaped.ru_utime + reaped.ru_stime)
    if start_error:
        code = EXEC_FAIL2 if start_error.startswith(NO_HOME) else EXEC_FAIL
    elif os.WIFSIGNALED(status):
        code = 256 + os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status)
    # CPU time: the top process's and its reaped children's (wait4), or the samples' sum
    # when more (processes that ended orphaned, reaped by someone else, counted while they
    # ran). Memory: the samples' alone, as PBS's MoM reports it. wait4's ru_maxrss is no
    # measure of the job: it holds the shepherd's own image, copied into the job's process
    # before its exec (37 MB for /bin/true). Its end removes the sample the server reads.
    status_file.with_suffix(".usage").unlink(missing_ok=True)
    _write_aside(status_file, {
        "exit_status": code, "walltime": time.monotonic() - t0,
        "cput": max(usage.ru_utime + usage.ru_stime, used.cput),
        "mem_kb": used.mem_kb, "vmem_kb": used.vmem_kb,
        "start_error": start_error[:1000]}, wait_for_space=True)


def _start_report(report: socket.socket) -> tuple[str, int | None, int | None]:
    """What the job's process said before its exec closed the socket: why it could not
    start (nothing when it did), the descriptor of its error file (None if it never
    opened one; an interactive job's terminal), and an interactive job's connection to
    its qsub."""
    text, fds = b"", []
    with report:
        while True:
            data, got, _flags, _addr = socket.recv_fds(report, 4096, 4)
            fds.extend(got)
            if not data:
                break
            text = (text + data)[-8192:]
    for extra in fds[2:]:
        os.close(extra)
    return (text.replace(b"\0", b"").decode(errors="replace"), (fds[0] if fds else None),
            (fds[1] if len(fds) > 1 else None))


#: The signal the server sends a job's shepherd when it has left a note for the job's
#: error file (`tell_job`).
NOTE_SIGNAL = signal.SIGUSR1


#: Seconds a shepherd waits for a note to be written into the job's error file before it
#: goes on without it (`_write_note`): a terminal its owner stopped (^S, tcflow) blocks a
#: write for as long as they like.
NOTE_WAIT = 1.0


def tell_job(launch: Launch, note: str) -> bool:
    """Have `note` written to the job's error file, as PBS's MoM writes there why it
    killed the job: left beside the job's status file for its shepherd, woken to write it
    at once through the error file's descriptor (the file the job's owner opened). Woken
    only once it catches the signal: a shepherd still starting the job (or one started
    by an older pbsplug, which never would) would be killed by it; it finds the note at
    its next look. False when the note cannot be left (a full disk): the job is killed
    all the same, without it."""
    try:
        _write_aside(Path(launch.status_file).with_suffix(".note"), {"note": note})
    except OSError:
        return False
    signal_if_same(launch.shepherd, launch.started, NOTE_SIGNAL, caught_only=True)
    return True


def _write_note(path: Path, err_fd: int | None, ids: Ids | None = None) -> None:
    """Write a note the server left (`tell_job`) to the job's error file, once: by a child
    that has become the job's owner (`ids`), as everything done in the owner's files is,
    waited for NOTE_WAIT seconds at most, so that a write that blocks (a stopped terminal,
    the full buffer of one) never holds the shepherd, which must go on to report the job's
    end. A child still blocked then is killed with what is left of the job."""
    try:
        note = json.loads(path.read_text()).get("note", "")
    except FileNotFoundError:
        return
    except (OSError, ValueError, AttributeError):
        note = ""
    path.unlink(missing_ok=True)
    if err_fd is None or not isinstance(note, str) or not note:
        return
    data = note[:4096].encode(errors="replace")
    try:
        writer = os.fork()
    except OSError:
        return
    if writer == 0:
        try:
            with contextlib.suppress(ValueError):  # the owner may signal it: not the shepherd
                signal.set_wakeup_fd(-1)
            if ids:
                become(ids)
            view = memoryview(data)
            while view:
                view = view[os.write(err_fd, view):]
        finally:  # (a full disk, a device that refuses it: the job ends all the same)
            os._exit(0)
    deadline = time.monotonic() + NOTE_WAIT
    while os.waitpid(writer, os.WNOHANG)[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.005)


def append_line(path: str, name: str, text: str, ids: Ids | None) -> str | None:
    """Append `text` and a newline to a running job's output or error file, as PBS's MoM
    appends qmsg's message: by a child of the server that acts as the job's owner (`ids`,
    `act_as`: the owner cannot stop it with SIGSTOP and hold the server NOTE_WAIT seconds
    for each job a qmsg names; None: the server's own user) before it opens anything,
    with O_APPEND and O_NOFOLLOW and without O_CREAT (a link planted there, or a file
    gone, is refused, never followed or made), into a regular file or a device only; a
    folder means `name` in it, as at the job's start (`open_output`). The write never
    waits (a stopped terminal is EAGAIN); the child is waited for NOTE_WAIT seconds at
    most all the same, then killed. None when written, else why not, in one line."""
    data = (text + "\n").encode(errors="replace")
    read_end, write_end = os.pipe()
    try:
        child = os.fork()
    except OSError as exc:
        os.close(read_end)
        os.close(write_end)
        return f"cannot fork: {exc.strerror}"
    if child == 0:
        code = 1
        try:
            os.close(read_end)
            with contextlib.suppress(ValueError):
                signal.set_wakeup_fd(-1)
            # Nothing of the server's (its database, its clients' sockets) stays open in a
            # process that becomes the job's owner: only the pipe for its answer.
            os.closerange(3, write_end)
            os.closerange(write_end + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
            if ids:
                act_as(ids)
            fd, target = open_in_folder(path, name, os.O_WRONLY | os.O_APPEND
                                        | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY
                                        | os.O_CLOEXEC)
            check_output_file(fd, target)
            # Left non-blocking: a terminal whose owner stopped it (^S, tcflow) or a full
            # pseudo-terminal is EAGAIN at once, never NOTE_WAIT of the server's loop
            # for each job a qmsg names.
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            code = 0
        except BaseException as exc:  # (why, for the server's answer; one line)
            why = (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)
            if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
                why = "a symbolic link, which is never followed"
            with contextlib.suppress(OSError):
                os.write(write_end, " ".join(str(why).split())[:200].encode())
        finally:
            os._exit(code)
    os.close(write_end)
    deadline = time.monotonic() + NOTE_WAIT
    status = None
    while time.monotonic() < deadline:
        done, status = os.waitpid(child, os.WNOHANG)
        if done:
            break
        status = None
        # (the pipe reads once the child has written why or exited: no sleep past that)
        select.select([read_end], [], [], min(0.005, max(0.0, deadline - time.monotonic())))
    if status is None:
        with contextlib.suppress(OSError):
            os.kill(child, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child, 0)
        os.close(read_end)
        return f"the write did not end within {NOTE_WAIT:g} s"
    with os.fdopen(read_end, "rb") as pipe:
        why = pipe.read(256).decode(errors="replace")
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    return why or "the write failed"


def _wait_for_job(pid: int, status_file: Path, err_fd: int | None, t0: float, used: Usage,
                  ids: Ids | None = None, qsub_fd: int | None = None
                  ) -> tuple[int, resource.struct_rusage]:
    """Wait for the job's top process, writing the server's notes as they come and
    sampling the job's use into `used` (and ``<seq>.usage``, for the server) on the
    `sample_time` schedule: woken by SIGCHLD and `NOTE_SIGNAL` through a wakeup
    descriptor (a poll every WAKE_EVERY seconds where that cannot be had).

    An interactive job (`qsub_fd`, the connection to its qsub) runs in a session of its
    own: it is sampled too, it is killed when its qsub goes away, and what it left in
    it is killed as its top process ends, before that process is reaped (its pid, the
    session's number, cannot be anyone else's until then)."""
    note, usage_file = status_file.with_suffix(".note"), status_file.with_suffix(".usage")
    me, samples = os.getpid(), 0
    me_started = process_start(me) or 0.0
    job_session = pid if qsub_fd is not None else 0
    job_started = process_start(pid) or 0.0
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    # (not the main thread: no handlers here, a poll instead)
    timeout = None if _wake_on_signals(wake_w) else WAKE_EVERY
    poller = select.poll()
    poller.register(wake_r, select.POLLIN)
    if qsub_fd is not None:
        os.set_blocking(qsub_fd, False)
        poller.register(qsub_fd, select.POLLIN)
    try:
        while True:
            _write_note(note, err_fd, ids)
            if qsub_fd is not None and os.waitid(
                    os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                # (its leader is a zombie: still its pid)
                _kill_job(me, me_started, job_session)
            done, status, usage = os.wait4(pid, os.WNOHANG)
            if done == pid:
                break
            _reap_orphans(pid)
            now = time.monotonic()
            if now - t0 >= sample_time(samples):
                try:  # (a sample that fails is skipped: the job's end must be reported)
                    cput, mem_kb, vmem_kb, found = sample(me, me_started, job_session)
                    used.walltime, used.cput = now - t0, max(used.cput, cput)
                    used.mem_kb = max(used.mem_kb, mem_kb, peak_kb(pid))
                    used.vmem_kb = max(used.vmem_kb, vmem_kb)
                    # (with the job's processes: what is killed if the shepherd is lost)
                    _write_aside(usage_file, {**asdict(used),
                                              "processes": found[:RECORDED_PROCESSES]})
                except Exception:  # noqa: BLE001 - a full disk, an odd /proc
                    pass
                while now - t0 >= sample_time(samples):
                    samples += 1
            wait = max(0.0, t0 + sample_time(samples) - time.monotonic())
            events = poller.poll(int(min(wait, timeout or wait) * 1000) + 1)
            if qsub_fd is not None and any(fd == qsub_fd for fd, _ in events) and \
                    _interactive.qsub_gone(qsub_fd):
                # qsub went away: the job ends, as a terminal's hangup would end it, but
                # whatever it ignores
                poller.unregister(qsub_fd)
                _kill_job(me, me_started, job_session)
                signal_if_same(pid, job_started, signal.SIGKILL)
            try:
                while os.read(wake_r, 512):
                    pass
            except BlockingIOError:
                pass
    finally:
        # The handlers and the wakeup descriptor go before the pipe does. A wakeup write
        # to a closed descriptor fails, and CPython 3.11 reports that failure from the C
        # signal handler by queueing a call, under a lock that the main loop may hold
        # at that moment: the shepherd then waited on itself for ever, with the SIGCHLDs
        # of the processes it kills at the job's end (and a descriptor reused meanwhile
        # would have had the signal's byte written into it).
        # NOTE_SIGNAL is ignored from here: `tell_job` checks that it is caught before it
        # sends it, and the shepherd writes a note left now at the end anyway.
        if timeout is None:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(NOTE_SIGNAL, signal.SIG_IGN)
        for fd in (wake_r, wake_w):
            os.close(fd)
    _write_note(note, err_fd, ids)  # one left as the job ended
    return status, usage


def _wake_on_signals(wake_w: int) -> bool:
    """Have SIGCHLD and `NOTE_SIGNAL` write a byte into `wake_w` (non-blocking), the write
    end of the shepherd's wakeup pipe; False where that cannot be had (not the main
    thread). A full pipe is no failure (the shepherd looks at its job at its next wake
    anyway): CPython 3.11 reports a failed write by queueing a call from the C signal
    handler, under a lock the interpreter may hold at that moment (the shepherd then
    waited on itself for ever), and a job fills the 64 KiB pipe with 65,536 SIGCHLDs
    between two of the shepherd's reads of it (its top process stopped and continued in
    a loop while the shepherd reads a large /proc, or tens of thousands of its processes
    killed: not seen here, but no more than a matter of scale)."""
    try:
        for sig in (signal.SIGCHLD, NOTE_SIGNAL):
            signal.signal(sig, lambda *_: None)
        signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    except ValueError:
        return False
    return True


#: Seconds between two looks at the job where its shepherd cannot be woken by signals.
WAKE_EVERY = 0.5
#: How many of the job's processes a sample records for `kill_session` (the oldest first
#: would be better; these are /proc's order).
RECORDED_PROCESSES = 4096


def sample_time(n: int) -> float:
    """When the `n`-th sample (from 0) of a job's use is due, in seconds after its start."""
    if n < len(FIRST_SAMPLES):
        return FIRST_SAMPLES[n]
    return FIRST_SAMPLES[-1] + SAMPLE_EVERY * (n - len(FIRST_SAMPLES) + 1)


def kill_session(launch: Launch, *, reaped: Collection[int] = frozenset()) -> int:
    """SIGKILL every process left of a job whose shepherd is gone (`signal_tree`): those in
    the shepherd's session started since the shepherd, in the same boot, those the
    shepherd recorded at its last sample of the job's use (``<seq>.usage``: a
    process that left the session, an orphan of init's once its subreaper is gone), and
    the job's process it recorded as it started the job, each only while it is the same
    process (its start time), with their descendants; and the session that process leads
    (an interactive job's, `_job_session`). `reaped`: the pids the caller's last `reap`
    collected (none by default, the safe side: see below). Returns how many."""
    if not launch.boot or launch.boot != boot_id():
        return 0
    now = process_start(launch.shepherd)
    job = _job_session(launch)
    if now is not None and now != launch.started:
        # The shepherd's pid names another process now, which Linux allows only once no
        # process is left in the old session; the new process's own session must not be
        # touched, but what the shepherd recorded is checked process by process.
        return signal_tree(launch, signal.SIGKILL, lives=False, sessions=False, job=job)
    # Its session's members are the job's while that number cannot have been given again:
    # Linux reuses no pid while a session of that number has members, but once the job's
    # have all ended or left it (setsid), and the shepherd was reaped, the number may be a
    # new session's, whose leader may have ended too (a daemon's double fork), so no
    # process has the pid. A shepherd the server reaped just now (in `reaped`, from
    # `reap`) held it as a zombie until then; for any other (one adopted after a restart,
    # which init reaped: root killed it, or the OOM killer, while the server was down),
    # only the members started before it was last seen alive are taken (`_last_seen`).
    until = None if now == launch.started or launch.shepherd in reaped else \
        _last_seen(launch)
    return signal_tree(launch, signal.SIGKILL, lives=now == launch.started,
                       sessions_until=until, job=job)


def _job_session(launch: Launch) -> tuple[int, float, float] | None:
    """The job's process its shepherd recorded as it started the job (``<seq>.shepherd``),
    its start, and when the shepherd was last seen (`_last_seen`). The members of the
    session of that number are the job's: all of them while that process lives, else
    those started no later than the shepherd was last seen (`signal_tree`). A session of
    that number is the job's process's (an interactive job's, `_run_job`) until the
    number is given again, which Linux does only once no process has it as its pid, group
    or session: once that process has been reaped and every member of its session has
    ended. While the shepherd lived, that process was its child, unreaped (the shepherd
    kills the session before it reaps it). None when the record names no start (one
    written by an older pbsplug)."""
    data = _shepherd_record(launch.status_file)
    try:
        pid, started = int(data["pgid"]), float(data["job_started"])
    except (ValueError, TypeError, KeyError):  # (TypeError: no record, or not an object)
        return None
    if pid <= 0 or not started:
        return None
    return pid, started, _last_seen(launch)


def _last_seen(launch: Launch) -> float:
    """When the shepherd of `launch` was last known alive, in clock ticks since boot (as
    /proc's start times): when it wrote its last sample (``<seq>.usage``), else its record
    (``<seq>.shepherd``, as it started the job); its start when it wrote neither. From the
    files' times, on the wall clock: a step of that clock since moves it as much."""
    stamps = []
    for suffix in (".usage", ".shepherd"):
        with contextlib.suppress(OSError):
            stamps.append(Path(launch.status_file).with_suffix(suffix).stat().st_mtime)
    if not stamps:
        return launch.started
    booted = time.time() - time.clock_gettime(time.CLOCK_BOOTTIME)
    return max(launch.started, (max(stamps) - booted) * _TICKS)


def signal_session(launch: Launch, sig: int,
                   skip: Callable[[int, Proc], bool] | None = None) -> int:
    """Send `sig` to every process of the job but its shepherd and those `skip` names
    (`signal_tree`): a kill's SIGTERM, qsig -s suspend and resume, and their replay for
    an adopted job (`jobcontrol`), reach a process that moved to another group of the
    session, or made a session of its own (`signal_whole`). Nothing while the shepherd
    is gone or its pid another's. Returns how many."""
    if not launch.boot or launch.boot != boot_id() or \
            process_start(launch.shepherd) != launch.started:
        return 0  # (the shepherd gone, or its pid another's: see kill_session)
    return signal_tree(launch, sig, lives=True, skip=skip)


def signal_whole(launch: Launch, sig: int, wait: float = 0.0) -> bool:
    """Send `sig` to the job's group and its top process (`signal_launch`, `wait` as
    there), then to every process of the job (`signal_session`). A SIGTERM (a qdel's, a
    limit's) reaches each process once: a process found in the job's group after the group
    was sent it is not sent it again, nor the top process once sent it (a program that
    takes a second SIGTERM for "abort now" had its clean shutdown cut short by the
    session's, one qdel's two). The group's number is the job's while its top process is
    unreaped, which the send checked (`signal_launch`): no other group has it. Two
    exceptions: a process that joined the group after its send, or was forked in it since
    (a trap's cleanup), gets none (then the SIGKILL after kill_delay); one that left the
    group after the send, or any process sent it before the job's group was recorded
    (the SIGTERM sent again once it is: `Engine.terms_due`), may get two. Any other signal
    (suspend's SIGSTOP, resume's SIGCONT, their replays at a start, a killed job's wake)
    goes to every process of the job, in the group or not, as a second of those changes
    nothing: a process that joined the group just after its send (once its top process
    showed stopped) was otherwise never stopped. Whether the group or the top process was
    sent `sig` (`signal_launch`'s answer)."""
    group, top = _signal_launch(launch, sig, wait)
    pgid = launch.pgid if sig == signal.SIGTERM and (group or top) else 0

    def skip(pid: int, proc: Proc) -> bool:
        return (group and proc.group == pgid) or (top and pid == pgid)

    signal_session(launch, sig, skip if pgid > 0 else None)
    return group or top


def signal_tree(launch: Launch, sig: int, *, lives: bool, sessions: bool = True,
                sessions_until: float | None = None,
                job: tuple[int, float, float] | None = None,
                skip: Callable[[int, Proc], bool] | None = None) -> int:
    """Send `sig` to the job's processes, as its shepherd finds them (`job_processes`):
    its descendants while it lives, the members of its session (with `sessions`; with
    `sessions_until`, those started no later than that), and
    once it is gone what it recorded at its last sample with their descendants, and `job`
    (`_job_session`) with its descendants and its session's members (all of them while
    it lives, in this read of /proc, else those started no later than `job[2]`). A
    SIGSTOP or SIGKILL is sent in rounds (`_signal_rounds`), so that a process forked
    while the others are signalled gets it too. `lives`: whether the shepherd is alive
    (the same process), as the caller has just read it. `skip(pid, proc)`: a process
    found that is not to be sent it (`signal_whole`). Returns how many were sent it."""
    roots = {launch.shepherd: launch.started}
    fast: Callable[[], dict[int, Proc]] | None = None
    if not lives:
        roots = _recorded_processes(launch)
        if job is not None:
            roots[job[0]] = job[1]
    else:
        def fast() -> dict[int, Proc]:
            return _skipped(_tree_walk(launch.shepherd, launch.started) or {})
    exclude = launch.shepherd

    def _skipped(found: dict[int, Proc]) -> dict[int, Proc]:
        return found if skip is None else \
            {pid: p for pid, p in found.items() if not skip(pid, p)}

    def find() -> dict[int, Proc]:
        table = processes()
        found = job_processes(roots, launch.started,
                              (launch.shepherd,) if sessions else (), table, sessions_until)
        if job is not None:
            leads = job[0] in table and table[job[0]].start == job[1]
            found.update(job_processes({}, launch.started, (job[0],), table,
                                       None if leads else job[2]))
        found.update((pid, table[pid]) for pid, start in roots.items()
                     if pid != exclude and pid in table and table[pid].start == start)
        return _skipped(found)

    return _signal_rounds(find, sig, KILL_SECONDS_SERVER, fast)


def _recorded_processes(launch: Launch) -> dict[int, float]:
    """The job's processes (pid: start) its shepherd recorded at its last sample."""
    try:
        data = json.loads(Path(launch.status_file).with_suffix(".usage").read_text())
        return {int(pid): float(start) for pid, start in data.get("processes", ())}
    except (OSError, ValueError, TypeError, AttributeError):
        return {}


#: Seconds a server's kill or stop of a job's processes goes on in rounds while new ones
#: appear (`_signal_rounds`), and a shepherd's at its job's end. The server's is short: it
#: runs in the server's loop.
KILL_SECONDS_SERVER = 0.2
KILL_SECONDS = 5.0


def _signal_rounds(find: Callable[[], dict[int, Proc]], sig: int, seconds: float,
                   fast: Callable[[], dict[int, Proc]] | None = None,
                   between: Callable[[], None] | None = None,
                   done: Callable[[], bool] | None = None) -> int:
    """Send `sig` to what `find()` lists, through `signal_if_same` (the same process, by
    its start time). SIGSTOP and SIGKILL go in rounds until a round finds nothing that was
    not sent it (a stopped process forks no more; a process forked while the others were
    being stopped is found in the next round), for `seconds` at most; a SIGKILL's round
    stops each process first, then kills it. `fast()`, when given, is a quicker search
    (`_tree_walk`) that each round tries first: the rounds end only when neither finds a
    process not sent `sig` (a process that forks and exits in a loop is never where the
    slow one saw it). `between()` runs before each look (the shepherd reaps what ended,
    what it killed too: a look that found nothing new reaped nothing, and a process that
    forks and exits in a loop left its subreaper a zombie a hop, thousands a second, which
    each walk then read, too slow ever to see the live one: nothing was killed in 5 s);
    `done()`, when given, must say so too before the rounds end (the shepherd's tree is
    empty: a process both searches missed is still in it). Returns how many were sent
    `sig`."""
    sent: set[tuple[int, float]] = set()
    count = 0
    deadline = time.monotonic() + seconds

    def unsent(found: dict[int, Proc]) -> list[tuple[int, float]]:
        return [(pid, p.start) for pid, p in found.items()
                if not p.gone and (pid, p.start) not in sent]

    while True:
        if between is not None:
            between()
        new = unsent(fast()) if fast is not None else []
        if not new:
            new = unsent(find())
        if not new:
            if done is None or done() or time.monotonic() >= deadline:
                return count
            time.sleep(0.001)  # (one killed and still dying, or missed: looked for again)
            continue
        if sig == signal.SIGKILL:
            for pid, start in new:
                signal_if_same(pid, start, signal.SIGSTOP)
        for pid, start in new:
            count += signal_if_same(pid, start, sig)
        sent.update(new)
        if sig not in (signal.SIGSTOP, signal.SIGKILL) or time.monotonic() >= deadline:
            return count


def _kill_job(me: int, started: float, job_session: int = 0) -> int:
    """The shepherd's own kill of what is left of its job (`_signal_rounds`): its
    descendants, its session's members and `job_session`'s (an interactive job's, while its
    leader is unreaped: that one is never reaped here). Returns how many."""
    sessions = (me, job_session or me)
    return _signal_rounds(lambda: job_processes({me: started}, started, sessions),
                          signal.SIGKILL, KILL_SECONDS,
                          fast=lambda: _tree_walk(me, started) or {},
                          between=lambda: _reap_orphans(job_session),
                          done=lambda: not _live_children(me, job_session))


def _live_children(me: int, keep: int = 0) -> list[int]:
    """This process's children still alive, but `keep`. The shepherd is its job's
    subreaper: while its job has a live process, it has a live child (that process, or
    the first of its ancestors below the shepherd). A child listed alive that has exited
    by the time it is looked at had its own children handed to the shepherd as it
    exited, possibly after the list was read: the list is read again until it names no
    child it did not name before (a process that forks and exits in a loop was otherwise
    taken for none left, while its last fork ran on)."""
    seen: set[int] = set()
    for _ in range(1000):
        try:
            tids = os.listdir(f"/proc/{me}/task")
        except OSError:
            return []
        listed: list[int] = []
        for tid in tids:
            try:
                with open(f"/proc/{me}/task/{tid}/children", "rb") as f:
                    listed.extend(int(pid) for pid in f.read().split())
            except OSError:
                continue  # (no such lists here: the searches' word stands)
        new = [pid for pid in listed if pid != keep and pid not in seen]
        live = [pid for pid in new if (proc := _proc(pid)) is not None and not proc.gone]
        if live or not new:
            return live
        seen.update(new)
    return [next(iter(seen))]  # (children without end: not done yet)


def signal_if_same(pid: int, started: float, sig: int, caught_only: bool = False) -> bool:
    """Send `sig` to process `pid` only if it is still the one that started at `started`
    (and, with `caught_only`, only if it catches `sig`, whose default would end it); True
    when sent. Through a pidfd, opened before the start time is checked: it stays bound to
    the process it was opened on, so the process signalled is the one checked (a kill by
    pid after the check could reach a newcomer given the pid in between)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return False  # gone
    except (AttributeError, OSError):  # no pidfd here (an old kernel, a seccomp filter)
        return _kill_if_same(pid, started, sig, caught_only)
    try:
        if process_start(pid) != started or (caught_only and not catches(pid, sig)):
            return False
        signal.pidfd_send_signal(pidfd, sig)
        return True
    except ProcessLookupError:
        return False
    except OSError as exc:
        return exc.errno in (errno.ENOSYS, errno.EPERM) and _kill_if_same(
            pid, started, sig, caught_only)
    finally:
        os.close(pidfd)


def catches(pid: int, sig: int) -> bool:
    """Whether process `pid` has a handler for `sig` (its SigCgt in /proc/<pid>/status)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigCgt:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except (OSError, ValueError, IndexError):
        pass
    return False


def _kill_if_same(pid: int, started: float, sig: int, caught_only: bool = False) -> bool:
    """`signal_if_same` where pidfds cannot be had: the start time checked, then a kill by
    pid (the small window between the two is what a pidfd closes)."""
    if process_start(pid) != started or (caught_only and not catches(pid, sig)):
        return False
    try:
        os.kill(pid, sig)
        return True
    except OSError:
        return False


def signal_processes(processes: Iterable[object], sig: int) -> None:
    """Send `sig` to each ``[pid, start]`` still the same process (its start time, from
    /proc, unchanged): a pid that has ended may have been given to someone else's process.
    A bare pid (recorded before pids carried their start time) is not signalled."""
    for entry in processes:
        if not isinstance(entry, (list, tuple)):
            continue
        try:
            pid, started = int(entry[0]), float(entry[1])
        except (TypeError, ValueError, IndexError):
            continue
        signal_if_same(pid, started, sig)


def signal_job(pgid: int, sig: int) -> bool:
    """Send `sig` to the job's process group; False when it is gone (or not known yet:
    a pgid of 0 would mean the caller's own group)."""
    if pgid <= 0:
        return False
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False


#: The signals a process may be sent twice to no effect: the top process gets them apart
#: from its group's whatever group it seems to be in (`signal_launch`).
_REPEATABLE = frozenset({signal.SIGKILL, signal.SIGSTOP, signal.SIGCONT})

#: pidfd_send_signal's flag (Linux 6.9) that sends to the process group whose number is the
#: pid the descriptor was opened on, as that pid was then: a group that has since ended and
#: whose number was given again is never reached (killpg's number may name it).
PIDFD_SIGNAL_PROCESS_GROUP = 4


def signal_launch(launch: Launch, sig: int, wait: float = 0.0) -> bool:
    """Send `sig` to the job: its process group (`wait` as `Launch.resolve`) and its top
    process, wherever that moved: a process may join another group of its session
    (setpgid), out of reach of the first. Its end ends the job, and its shepherd then kills
    what is left of the job (`_kill_job`). No /proc scan. Both only while the top process
    (the pid that is the group's number) is still the live shepherd's child, alive or not
    reaped yet, checked through a pidfd, so that the process checked is the one signalled:
    once the shepherd has reaped it (the job is over, its shepherd killing what is left) or
    is gone, the number may name anyone's process, and anyone's group (a job that ended
    while the server was down, whose suspend `jobcontrol` replays at its start; a qdel
    between a job's end and the poll that notices it). The group is signalled through
    that pidfd (`PIDFD_SIGNAL_PROCESS_GROUP`), else by its number (killpg) just after the
    check. The top process is signalled apart when it is not in the group as read after
    the group's send (a read before it took a top process that left the group in between
    for signalled with it, and sent it nothing); a SIGKILL, SIGSTOP or SIGCONT, a second
    of which changes nothing, always (a top process that left the group before the send
    and came back before the read gets it). (`signal_whole` sends it to every other
    process of the job as well.)

    A job whose group its shepherd has not recorded yet (it waits for room on a full disk
    before it starts the job, or has just forked it) gets no signal but SIGKILL, as PBS's
    MoM refuses every signal but SIGKILL to a job not running yet. That SIGKILL ends the
    shepherd itself (the same process, checked through a pidfd and its start time, in the
    launch's boot): the job never starts, and the process of a job it had just forked
    ends unstarted (it waits for the shepherd's word that the job is recorded).
    Whether either was sent."""
    group, top = _signal_launch(launch, sig, wait)
    return group or top


def _signal_launch(launch: Launch, sig: int, wait: float) -> tuple[bool, bool]:
    """`signal_launch`'s sends: whether the job's group was sent `sig`, and whether its
    top process was (in the group, or apart); for a job whose group is not recorded yet,
    the second says whether its shepherd was sent a SIGKILL (`signal_whole` then skips
    nothing: there is no group)."""
    pgid = launch.resolve(wait=wait)
    if pgid <= 0:  # (a pgid of 0 would mean the caller's own group)
        return False, sig == signal.SIGKILL and bool(launch.boot) and \
            launch.boot == boot_id() and signal_if_same(launch.shepherd, launch.started, sig)
    if not launch.alive():
        return False, False
    try:
        pidfd: int | None = os.pidfd_open(pgid)
    except ProcessLookupError:
        return False, False  # reaped: its number is no longer the job's
    except (AttributeError, OSError):  # no pidfd here: the check, then the number
        pidfd = None
    try:
        stat = proc_stat(pgid)
        fields = stat.rsplit(")", 1)[1].split() if stat is not None else []
        if len(fields) < 3 or fields[1] != str(launch.shepherd):
            return False, False  # not the shepherd's child: the number is another's now
        sent = _signal_group(pidfd, pgid, sig)
        ended = _ended(fields)
        if not ended:  # its group read again after the send (`signal_launch`)
            after = proc_stat(pgid)
            fields = after.rsplit(")", 1)[1].split() if after is not None else []
            ended = len(fields) < 3 or _ended(fields)
        inside = sent and len(fields) > 2 and fields[2] == str(pgid)
        if pidfd is None or ended or (inside and sig not in _REPEATABLE):
            return sent, inside  # (in the group: it has it, once)
        try:
            signal.pidfd_send_signal(pidfd, sig)
        except OSError:
            return sent, inside
        return sent, True
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _signal_group(pidfd: int | None, pgid: int, sig: int) -> bool:
    """Send `sig` to process group `pgid`, through `pidfd` (open on the process whose pid
    is its number) where the kernel can (Linux 6.9), else by its number; False when no
    process is in it."""
    if pidfd is not None:
        try:
            signal.pidfd_send_signal(pidfd, sig, None, PIDFD_SIGNAL_PROCESS_GROUP)
            return True
        except ProcessLookupError:
            return False
        except OSError as exc:
            if exc.errno != errno.EINVAL:  # (EINVAL: a kernel without the flag)
                return False
    return signal_job(pgid, sig)


def reap(keep: Collection[int] = ()) -> frozenset[int]:
    """Collect the shepherds that have ended (they are the server's children); their pids.
    Each was a zombie until now, whose pid (its session's number) no other process could
    have: the caller hands them to `kill_session` for the jobs it looks at next. A child in
    `keep` (a hook's process its chain still waits for, and reaps) is left, and what ended
    after it is collected at a later call."""
    reaped = set()
    while True:
        try:
            if keep:  # (looked at first, then that one reaped: never one kept)
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
                if info is None or info.si_pid in keep:
                    break
                pid, _ = os.waitpid(info.si_pid, os.WNOHANG)
            else:
                pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        reaped.add(pid)
    return frozenset(reaped)


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return resource.getrlimit(resource.RLIMIT_AS)[0]
