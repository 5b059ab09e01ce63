"""A real local-engine server per test: `pbsplug server start` in a fresh, short home."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pbsplug.engine.client import Client
from pbsplug.engine.home import Home

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))



class Engine:
    """A running server: `client` for requests, `pbs(...)` for the commands as processes."""

    def __init__(self, root: Path, dists, site: str = ""):
        self.root = root
        self.home = Home(root)
        self.dists = dists
        self.work = root / "work"
        self.work.mkdir(mode=0o777)
        self.work.chmod(0o777)
        if site:
            (root / "site.toml").write_text(site)
        self.client: Client | None = None

    def env(self, **extra: str) -> dict[str, str]:
        return self.dists.env(PBSPLUG_HOME=str(self.root), **extra)

    def pbs(self, *args: str, input: str | None = None, cwd: Path | None = None,
            user: str | None = None, check: bool = False) -> subprocess.CompletedProcess:
        cmd = [PBSPLUG, *args]
        if user is not None:  # run as another Unix user (the test runs as root)
            cmd = ["runuser", "-u", user, "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, input=input,
                              env=self.env(), cwd=cwd or self.work, timeout=120)
        if check and done.returncode != 0:
            raise AssertionError(f"{args} failed ({done.returncode}): {done.stderr}")
        return done

    def start(self) -> None:
        self.pbs("server", "start", check=True)
        self.client = Client(self.home)

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        pid = self.home.server_pid()
        if pid:
            os.kill(pid, signal.SIGKILL)
            while self.home.server_pid() is not None:
                time.sleep(0.02)

    def submit(self, script: str = "true\n", **attrs) -> str:
        attrs.setdefault("Variable_List", {"PBS_O_WORKDIR": str(self.work),
                                           "PBS_O_PATH": os.environ["PATH"]})
        return self.client("submit", attrs=attrs, script=script)

    def job(self, job_id: str) -> dict:
        return self.client("stat_jobs", ids=[job_id], history=True)[job_id]

    def wait(self, job_id: str, states: str = "F", timeout: float = 60.0) -> dict:
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

    def log(self) -> str:
        return "".join(p.read_text() for p in sorted(self.home.logs.glob("*")))

    def stop(self) -> None:
        pid = self.home.server_pid()
        if pid:
            os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 10
            while self.home.server_pid() is not None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.home.server_pid() is not None:
                os.kill(pid, signal.SIGKILL)


def until(check, timeout: float = 20.0, what: str = ""):
    """Poll `check` until it returns something true (returned); fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def engine_root():
    # UNIX socket paths are limited to 107 bytes: pytest's tmp_path can be longer.
    root = Path(tempfile.mkdtemp(prefix="pbe", dir="/tmp"))
    root.chmod(0o755)
    yield root
    subprocess.run(["pkill", "-KILL", "-f", f"{root}/"], check=False)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def engine(engine_root, dists):
    """A started server with no plugin enabled; `engine.dists` installs plugins before
    `engine.restart_with(site)`."""
    eng = Engine(engine_root, dists)
    eng.start()
    yield eng
    eng.stop()


@pytest.fixture
def make_engine(engine_root, dists):
    """``make_engine(site_toml)``: a server started with that site config (plugins added to
    `dists` first)."""
    made = []

    def make(site: str = "") -> Engine:
        eng = Engine(engine_root, dists, site)
        eng.start()
        made.append(eng)
        return eng

    yield make
    for eng in made:
        eng.stop()
