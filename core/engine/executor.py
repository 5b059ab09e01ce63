"""Running jobs as real processes on this machine.

Each job gets a *shepherd*: a process forked from the server that starts its own session, so
that it outlives the server (a server killed with SIGKILL leaves its jobs running). A launch
has two steps, so that execjob_launch hooks can act on the process that will run the job
(move it into a cgroup, set its limits: the job and everything it starts inherit them):

1. `prepare` forks the shepherd, which waits on a pipe; its pid is execjob_launch's
   ``event.pid``.
2. `PendingLaunch.start` sends it the job's command (the hooks' argv and env) and returns at
   once: the server never waits for the job to start. `PendingLaunch.cancel` (the hooks
   refused) makes it exit; so does the server's death before `start`. Either way it leaves
   no file behind.

Once started, the shepherd starts the job (as its owner when the server runs as root),
records itself and the job's process group in ``jobs/<seq>.shepherd``, waits for the job, and
writes the job's exit status and resource use to ``jobs/<seq>.status`` in the engine's home.
Both files are written aside and renamed, so each is whole or absent. The server polls for
the status file; a restarted server finds its jobs again from the two files
(`Launch.alive`, `Launch.recorded`).

The job runs in its own process group (its ``session_id``), which is what qdel and the
walltime limit signal.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import resource
import select
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

#: Exit status PBS gives a job that the server could not start (JOB_EXEC_FAIL1).
EXEC_FAIL = -1
#: A job whose exit was never seen (its shepherd died with the machine): PBS's JOB_EXEC_INITABT.
EXEC_LOST = -2


@dataclass
class Launch:
    """What the server keeps about a started job (the ``runtime`` column)."""

    shepherd: int          # the shepherd's pid
    started: float         # its start time (seconds since boot, from /proc) to tell pid reuse
    pgid: int              # the job's process group (its session_id)
    status_file: str
    tmpdir: str

    def alive(self) -> bool:
        """Whether our shepherd is still running (the same process, not a reused pid)."""
        return _proc_start(self.shepherd) == self.started

    @property
    def record_file(self) -> Path:
        return Path(self.status_file).with_suffix(".shepherd")

    def resolve(self, wait: float = 0.0) -> int:
        """The job's process group, once the shepherd has recorded it (0 until then); waits
        up to `wait` seconds for it."""
        deadline = time.monotonic() + wait
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
        try:
            data = json.loads(Path(status_file).with_suffix(".shepherd").read_text())
        except (OSError, ValueError):
            return None
        return cls(data["shepherd"], data["started"], data["pgid"], str(status_file),
                   str(tmpdir))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class JobExit:
    """What the shepherd reports when the job ends."""

    exit_status: int        # PBS's convention: the code, or 256 + signal when killed
    walltime: float
    cput: float
    mem_kb: int

    @classmethod
    def read(cls, path: str | Path) -> JobExit | None:
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return cls(EXEC_LOST, 0.0, 0.0, 0)
        return cls(**data)


def _proc_start(pid: int) -> float | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":  # a zombie: it has ended (reaped by whoever is its parent)
        return None
    return float(fields[19])


class PendingLaunch:
    """A shepherd forked by `prepare`, waiting for the job's command: `start` it, or
    `cancel` it. `pid` is the shepherd, the process that will run the job."""

    def __init__(self, pid: int, fd: int, status_file: Path, tmpdir: Path):
        self.pid = pid
        self.started = _proc_start(pid) or 0.0
        self.status_file = status_file
        self.tmpdir = tmpdir
        self._fd: int | None = fd  # the pipe's write end; None once started or cancelled

    def start(self, argv: list[str], env: dict[str, str], cwd: str, stdout: str,
              stderr: str | None) -> Launch:
        """Have the shepherd run the job; returns at once. `stderr` None joins it to stdout.
        An OSError means the shepherd is gone (a hook killed it); it has been reaped."""
        if self._fd is None:
            raise RuntimeError("this launch was already started or cancelled")
        fd, self._fd = self._fd, None
        request = json.dumps({"argv": argv, "env": env, "cwd": cwd, "stdout": stdout,
                              "stderr": stderr}).encode() + b"\n"
        try:
            view = memoryview(request)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            _reap(self.pid, kill=True)
            raise
        finally:
            os.close(fd)
        return Launch(self.pid, self.started, 0, str(self.status_file), str(self.tmpdir))

    def cancel(self) -> None:
        """The job will not run: end the shepherd and reap it. Nothing of it is left, no
        status file and no process. Does nothing once started or cancelled."""
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        # Closing the pipe alone would do, unless a process forked from the server while
        # it was open (a hook's child, what it started) still holds it; the shepherd has
        # done nothing yet, so killing it loses nothing and the wait below is bounded.
        _reap(self.pid, kill=True)


def prepare(status_file: Path, tmpdir: Path, user: str | None) -> PendingLaunch:
    """Fork the job's shepherd, which waits for `PendingLaunch.start`; makes the job's
    `tmpdir` (owned by `user`). `user` None runs the job as the server's user."""
    status_file.parent.mkdir(parents=True, exist_ok=True)
    status_file.unlink(missing_ok=True)
    status_file.with_suffix(".shepherd").unlink(missing_ok=True)
    ids = None
    if user is not None and os.geteuid() == 0:
        pw = pwd.getpwnam(user)
        ids = (pw.pw_uid, pw.pw_gid, pw.pw_name)
    tmpdir.mkdir(parents=True, exist_ok=True)
    if ids:
        os.chown(tmpdir, ids[0], ids[1])
    tmpdir.chmod(0o700)
    server = os.getpid()
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the shepherd
        try:
            os.close(write_fd)
            _shepherd(read_fd, server, ids, status_file)
        finally:
            os._exit(0)
    os.close(read_fd)
    return PendingLaunch(pid, write_fd, status_file, tmpdir)


def _reap(pid: int, kill: bool = False) -> None:
    try:
        if kill:
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


def _write_aside(path: Path, data: dict, wait_for_space: bool = False) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    while True:
        try:
            tmp.write_text(json.dumps(data))
            break
        except OSError as exc:  # a full disk: the job's end is kept until there is room
            if not wait_for_space or exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            time.sleep(1.0)
    os.replace(tmp, path)


def _shepherd(fd: int, server: int, ids, status_file: Path) -> None:
    os.setsid()
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the job's group gets the signals
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.closerange(3, fd)  # what the server had open (its socket, its database), not the pipe
    os.closerange(fd + 1, 65536)
    request = _wait_for_start(fd, server)
    os.close(fd)
    if request is not None:
        _run_job(**request, ids=ids, status_file=status_file)


def _wait_for_start(fd: int, server: int) -> dict | None:
    """The job's command from `PendingLaunch.start`, or None: cancelled (EOF) or the server
    died. A process forked from the server (a hook's child) may still hold the pipe after
    the server died, so the shepherd also watches its parent."""
    data = b""
    poller = select.poll()  # not select(): the pipe's number may be past FD_SETSIZE
    poller.register(fd, select.POLLIN)
    while not data.endswith(b"\n"):
        if not poller.poll(1000):
            if os.getppid() != server:
                return None
            continue
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return None
        data += chunk
    return json.loads(data)


def _run_job(argv: list[str], env: dict[str, str], cwd: str, stdout: str,
             stderr: str | None, ids, status_file: Path) -> None:
    t0 = time.monotonic()
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the job
        try:
            os.close(err_r)
            os.setpgid(0, 0)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            if ids:
                os.initgroups(ids[2], ids[1])
                os.setgid(ids[1])
                os.setuid(ids[0])
            os.chdir(cwd)
            out = os.open(stdout, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(out, 1)
            if stderr is None:
                os.dup2(out, 2)
            else:
                os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), 2)
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.set_inheritable(err_w, False)
            os.execvpe(argv[0], argv, env)
        except BaseException as exc:  # tell the shepherd why the job could not start
            try:
                os.write(err_w, f"{type(exc).__name__}: {exc}".encode())
            finally:
                os._exit(127)
    os.close(err_w)
    try:
        os.setpgid(pid, pid)
    except OSError:
        pass  # the job already did it (or already exec'd)
    me = os.getpid()
    _write_aside(status_file.with_suffix(".shepherd"),
                 {"shepherd": me, "started": _proc_start(me) or 0.0, "pgid": pid})
    with os.fdopen(err_r, "rb") as errs:
        start_error = errs.read().decode(errors="replace")
    _, status, usage = os.wait4(pid, 0)
    if start_error:
        code = EXEC_FAIL
    elif os.WIFSIGNALED(status):
        code = 256 + os.WTERMSIG(status)
    else:
        code = os.WEXITSTATUS(status)
    report = {"exit_status": code, "walltime": time.monotonic() - t0,
              "cput": usage.ru_utime + usage.ru_stime, "mem_kb": usage.ru_maxrss}
    if start_error:
        try:
            with open(stderr or stdout, "a") as f:
                f.write(f"pbsplug: the job could not start: {start_error}\n")
        except OSError:
            pass
    _write_aside(status_file, report, wait_for_space=True)


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


def reap() -> None:
    """Collect the shepherds that have ended (they are the server's children)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def cpu_count() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
        os.cpu_count() or 1)


def memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        return resource.getrlimit(resource.RLIMIT_AS)[0]
