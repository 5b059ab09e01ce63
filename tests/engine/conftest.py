"""A real local-engine server per test (`pbsplug.engine.testing.LocalEngine`), with the
plugin distributions a test installs (`dists`) on its path."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pbsplug.engine import executor
from pbsplug.engine.home import Home
from pbsplug.engine.server import Engine
from pbsplug.engine.store import Store
from pbsplug.engine.testing import PBSPLUG, LocalEngine, make_root, remove_root, until
from pbsplug.plugins import PluginSet
from pbsplug.siteconfig import SiteConfig

__all__ = ["PBSPLUG", "until"]


@pytest.fixture
def engine_root():
    root = make_root()
    yield root
    remove_root(root)


@pytest.fixture
def engine(engine_root, dists):
    """A started server with no plugin enabled."""
    eng = LocalEngine(engine_root, env=dists.env()).start()
    yield eng
    eng.stop()


@pytest.fixture
def make_engine(engine_root, dists):
    """``make_engine(site_toml)``: a server started with that site config (plugins added to
    `dists` first)."""
    made = []

    def make(site: str = "") -> LocalEngine:
        eng = LocalEngine(engine_root, site, env=dists.env()).start()
        made.append(eng)
        return eng

    yield make
    for eng in made:
        eng.stop()


@pytest.fixture
def inprocess_engine(engine_root) -> Engine:
    """An `Engine` in this process, with no plugin and no server loop: its requests are
    method calls (``eng.req_submit(caller, ...)``), its store open to look into."""
    return Engine(Home(engine_root), plugins=PluginSet(SiteConfig(path=None)))


@pytest.fixture
def engine_here(engine_root, pbsplug_plugins):
    """``engine_here(clock=time.time)``: an `Engine` in this process with the test's plugin
    set (`register_plugin` adds to it) and no server loop. At teardown it reaps the hook
    processes it forked (a process-mode hook's is left for the loop, `reap_later`: none
    may outlive the test) and closes."""
    made = []

    def make(clock=time.time) -> Engine:
        made.append(Engine(Home(engine_root), plugins=pbsplug_plugins, clock=clock))
        return made[-1]

    yield make
    for eng in made:
        eng.runner.reap()
        eng.close()


def poll_until(eng: Engine, done: Callable[[], Any], what: str) -> None:
    """`eng.poll()` until `done` (60 s at most: a hang guard), for an `engine_here`
    whose clock is the test's: the server sees time pass only when the test moves it."""
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, f"waited 60 s for {what}"
        eng.poll()
        time.sleep(0.05)


def accounting_records(engine: LocalEngine) -> str:
    """The server's accounting records, every day's file."""
    return "".join(p.read_text() for p in sorted(engine.home.accounting.iterdir()))


def deleted_once(engine: LocalEngine, job_id: str, times: int = 1) -> None:
    """One deletion, one D: the server logged root's qdel `times` and wrote `job_id`'s D
    record `times` (a qdel that comes again is answered and neither logged nor written)."""
    assert engine.log().count("Job to be deleted at request of root@") == times
    assert accounting_records(engine).count(f";D;{job_id};") == times


def shepherds_gone(engine: LocalEngine, job_ids: list[str]) -> None:
    """The running jobs' shepherds and processes killed while `engine`'s server is down
    (killed), as with the machine: the next start finds the jobs lost."""
    store = Store(engine.home.db)
    try:
        for job_id in job_ids:
            launch = executor.Launch(**store.runtime(job_id)["launch"])
            # (as its shepherd recorded it; resolve waits for no record of a launch read
            # back from the store, and a loaded machine can show R before the record)
            pgid = until(launch.resolve, 30, f"{job_id}'s shepherd to record its group")
            # The shepherd first: killed second, it could record the job's death as an exit.
            os.kill(launch.shepherd, signal.SIGKILL)
            os.killpg(pgid, signal.SIGKILL)
    finally:
        store.close()


def jobs_left_killed(eng) -> None:
    """The jobs still running when a test ends killed, shepherds first (a test that leaves
    one running on purpose must not leave its `sleep 300` behind)."""
    for launch in list(eng.launches.values()):
        pgid = launch.resolve(wait=5.0)
        for kill, target in ((os.kill, launch.shepherd), (os.killpg, pgid)):
            if target and target > 0:
                with contextlib.suppress(ProcessLookupError):
                    kill(target, signal.SIGKILL)


def ignored_signals(pid: int) -> int | None:
    """The signals `pid` ignores (its /proc status's SigIgn, a mask: signal n is bit n-1),
    None while it cannot be read."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigIgn:"):
                return int(line.split()[1], 16)
    except OSError:
        return None
    return None


@pytest.fixture
def sigterm_stops():
    """``sigterm_stops(eng)``: a SIGTERM to this process sets `eng`'s stopping, as the
    server's handler does (`api.serve`); the handler before is put back afterwards."""
    engines: list = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: [
        setattr(eng, "stopping", True) for eng in engines])
    yield engines.append
    signal.signal(signal.SIGTERM, previous)
