"""A real local-engine server for end-to-end tests: `LocalEngine` starts ``pbsplug server
start`` in a fresh home and drives it through the API client and the commands.

Plugin tests get it as the ``local_engine`` fixture of `pbsplug.testing`; pbsplug's own
engine tests use it directly (tests/engine/conftest.py).
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..testing import until
from .client import Client
from .home import Home

__all__ = ["PBSPLUG", "LocalEngine", "PtySession", "make_root", "remove_root", "until"]

#: The ``pbsplug`` console script of the running interpreter's environment.
PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))


def make_root() -> Path:
    """A fresh home folder under /tmp: a UNIX socket path must fit in 107 bytes, which
    pytest's tmp_path may not."""
    root = Path(tempfile.mkdtemp(prefix="pbe", dir="/tmp"))
    root.chmod(0o755)
    return root


def remove_root(root: Path) -> None:
    """Kill whatever still runs from the home (jobs, shepherds) and remove it. A killed
    job's shepherd (forked from the server, so not matched by its command line) writes the
    job's status file once the job is gone, which can land in ``jobs/`` after the removal
    listed it: the removal is tried again until the home is gone (a few seconds at most)."""
    subprocess.run(["pkill", "-KILL", "-f", f"{root}/"], check=False)
    deadline = time.monotonic() + 5
    while True:
        shutil.rmtree(root, ignore_errors=True)
        if not os.path.lexists(root) or time.monotonic() > deadline:
            return
        time.sleep(0.05)


class LocalEngine:
    """A server in `root` with `site` as its site.toml: `client(op, **args)` sends requests,
    `pbs(...)` runs ``pbsplug`` commands as processes, and `submit`, `job`, `wait`, `nodes`
    and `log` cover what most tests ask. `env` is the environment of the server and the
    commands (default: this process's, without PBSPLUG_* variables)."""

    def __init__(self, root: Path, site: str = "", env: Mapping[str, str] | None = None):
        self.root = Path(root)
        self.home = Home(self.root)
        # Jobs' submission folder (PBS_O_WORKDIR, where their output goes by default; they
        # start in their owner's home), writable by every user.
        self.work = self.root / "work"
        self.work.mkdir(mode=0o777, exist_ok=True)
        self.work.chmod(0o777)
        if site:
            (self.root / "site.toml").write_text(site)
        self.base_env = dict(env) if env is not None else {
            k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
        # (before `start`: a request is ServerUnavailable, naming the home, not a TypeError)
        self.client = Client(self.home)

    def env(self, **extra: str) -> dict[str, str]:
        return {**self.base_env, "PBSPLUG_HOME": str(self.root), **extra}

    def pbs(self, *args: str, input: str | None = None, cwd: Path | None = None,
            user: str | None = None, check: bool = False) -> subprocess.CompletedProcess[str]:
        """``pbsplug ARGS`` as a process (as `user` through runuser when given)."""
        cmd = [PBSPLUG, *args]
        if user is not None:
            cmd = ["runuser", "-u", user, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, input=input,
                              env=self.env(), cwd=cwd or self.work, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"{args} failed ({done.returncode}): {done.stderr}")
        return done

    def start(self) -> LocalEngine:
        self.pbs("server", "start", check=True)
        self.client = Client(self.home)
        return self

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        pid = self.home.server_pid()
        if pid:
            os.kill(pid, signal.SIGKILL)
            while self.home.server_pid() is not None:
                time.sleep(0.02)

    def stop(self) -> None:
        pid = self.home.server_pid()
        if pid:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while self.home.server_pid() is not None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.home.server_pid() is not None:
                os.kill(pid, signal.SIGKILL)

    def as_user(self, user: str, op: str, **args: Any) -> dict[str, Any]:
        """Send one API request as `user`, from a process of that user (``runuser``), over
        the server's socket; the whole JSON answer. curl speaks the API's HTTP on the UNIX
        socket, because the project's Python may live where another user cannot run it."""
        import json

        done = subprocess.run(
            ["runuser", "-u", user, "--", "curl", "--silent", "--http1.0", "--unix-socket",
             str(self.home.socket), "-H", "Content-Type: application/json",
             "--data-binary", json.dumps(args), f"http://localhost/v1/{op}"],
            capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise AssertionError(f"{op} as {user} failed ({done.returncode}): {done.stderr}")
        return json.loads(done.stdout)

    # -- what tests ask most --------------------------------------------------------------------
    def submit(self, script: str = "true\n", **attrs: Any) -> str:
        """Submit `script` with PBS attributes (``Job_Name="x"``, ``Resource_List={...}``);
        returns the job id."""
        attrs.setdefault("Variable_List", {"PBS_O_WORKDIR": str(self.work),
                                           "PBS_O_PATH": os.environ["PATH"]})
        return self.client("submit", attrs=attrs, script=script)

    def job(self, job_id: str) -> dict[str, Any]:
        return self.client("stat_jobs", ids=[job_id], history=True)[job_id]

    def wait(self, job_id: str, states: str = "F", timeout: float = 60.0) -> dict[str, Any]:
        """Wait until the job is in one of `states`; returns its attributes."""
        deadline = time.monotonic() + timeout
        while True:
            attrs = self.job(job_id)
            if attrs["job_state"] in states:
                return attrs
            if time.monotonic() > deadline:
                raise AssertionError(f"{job_id} still {attrs['job_state']} after {timeout} s: "
                                     f"{attrs.get('comment')}")
            time.sleep(0.05)

    def nodes(self) -> dict[str, dict[str, Any]]:
        return self.client("stat_nodes")

    def log(self) -> str:
        """The whole server log."""
        return "".join(p.read_text() for p in sorted(self.home.logs.glob("*")))


class PtySession:
    """A command (``pbsplug qsub -I ...``) on a pseudo-terminal of the test's, its standard
    input, output and error, in `engine`'s submission folder and environment."""

    def __init__(self, engine: LocalEngine, *args: str, env: Mapping[str, str] | None = None,
                 size: tuple[int, int] = (24, 80)):
        self.master, slave = os.openpty()
        self.resize(*size)
        self.proc = subprocess.Popen(list(args), stdin=slave, stdout=slave,
                                     stderr=slave, env=env or engine.env(), cwd=engine.work,
                                     start_new_session=True)
        os.close(slave)
        self.out = b""

    def read_until(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while text.encode() not in self.out:
            assert time.monotonic() < deadline, f"no {text!r} in {self.out!r}"
            if not self._read(0.1) and self.proc.poll() is not None and not self._read(0.1):
                raise AssertionError(f"qsub ended ({self.proc.returncode}) before {text!r}: "
                                     f"{self.out!r}")
        return self.text

    def _read(self, timeout: float) -> bool:
        if not select.select([self.master], [], [], timeout)[0]:
            return False
        try:
            data = os.read(self.master, 4096)
        except OSError:
            return False
        self.out += data
        return bool(data)

    def finish(self, timeout: float = 60.0) -> int:
        """Wait for the command's end, reading what it writes; its exit status."""
        if self.master < 0:
            return self.proc.wait()
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, f"qsub did not end: {self.out!r}"
            self._read(0.1)
        while self._read(0.1):
            pass
        os.close(self.master)
        self.master = -1
        return self.proc.returncode

    def write(self, text: str) -> None:
        os.write(self.master, text.encode())

    def resize(self, rows: int, columns: int) -> None:
        """Set the terminal's window size (the command is not told: send it SIGWINCH)."""
        import fcntl
        import struct
        import termios

        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("4H", rows, columns, 0, 0))

    @property
    def text(self) -> str:
        return self.out.decode(errors="replace").replace("\r\n", "\n")

    def job_id(self) -> str:
        """The job's id, from qsub -I's ``waiting for job`` line."""
        self.read_until(" to start")
        return self.text.split("qsub: waiting for job ", 1)[1].split()[0]

