"""Fixtures the security tests share."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from pbsplug.testing import _machine_lock, missing

#: The last pid the kernel gave in this pid namespace: the next fork gets the first free
#: pid after it.
NS_LAST_PID = Path("/proc/sys/kernel/ns_last_pid")
#: How far past the last pid given `root_process_with_pid` sets it back: more than the
#: other tests fork in the moment it holds the count back.
PIDS_SKIPPED = 1000


@pytest.fixture
def control(tmp_path) -> Path:
    """A folder through which a test tells a test plugin's hooks what to do."""
    path = tmp_path / "control"
    path.mkdir()
    return path


@pytest.fixture
def engine(local_engine):
    """A started server (pbsplug.testing's `local_engine`), no plugin enabled."""
    return local_engine()


def qsub(attacker, engine, *args: str) -> str:
    """The attacker's ``qsub`` from the submission folder; the job's id."""
    done = attacker.pbs(engine, "qsub", *args, cwd=engine.work)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def root_process_with_pid(pid: int, argv: list[str] | None = None,
                          new_session: bool = False) -> subprocess.Popen:
    """A root process (`argv`, default a ``sleep``) that gets `pid` (a pid an attacker's
    process or job had): what pid reuse does on its own (an attacker speeds it up by
    forking), made at once through ns_last_pid; with `new_session`, it leads a session and
    process group of its own, as a daemon's or a login's process does. Its standard output
    is a pipe. Fails under CI (skips elsewhere) when the pid cannot be had in 30 s: the
    kernel gives no pid still in use as a session's or a process group's number, as it is
    until the last process of the session the pid led has ended.

    ns_last_pid is the whole machine's (every pytest of `make test` forks from it): it is
    set back past where it was once the pid is had (`PIDS_SKIPPED` more, for what the
    others forked meanwhile), else the processes forked next, by any test, got the pids
    ended since `pid`, which a test may still hold and kill at its clean-up; and it is
    written under a lock, so that two tests' writes do not undo each other."""
    with _machine_lock("ns_last_pid"):
        before = int(NS_LAST_PID.read_text())
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                NS_LAST_PID.write_text(str(pid - 1))
                proc = subprocess.Popen(argv or ["sleep", "300"],
                                        start_new_session=new_session,
                                        stdout=subprocess.PIPE, text=True)
                if proc.pid == pid:
                    return proc
                proc.kill()
                proc.wait()
                time.sleep(0.05)
        finally:
            pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
            last = max(before, int(NS_LAST_PID.read_text())) + PIDS_SKIPPED
            NS_LAST_PID.write_text(str(min(last, pid_max - 1)))
    missing(f"could not get pid {pid} through {NS_LAST_PID}")
