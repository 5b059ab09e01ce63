"""Fixtures the security tests share."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from pbsplug.testing import missing


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
    until the last process of the session the pid led has ended."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        proc = subprocess.Popen(argv or ["sleep", "300"], start_new_session=new_session,
                                stdout=subprocess.PIPE, text=True)
        if proc.pid == pid:
            return proc
        proc.kill()
        proc.wait()
        time.sleep(0.05)
    missing(f"could not get pid {pid} through /proc/sys/kernel/ns_last_pid")
