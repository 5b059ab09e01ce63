"""A stop (SIGTERM) that lands in a poll before or while jobs start: as PBS's server
shutting down, the server runs no new job, and a start hook the runner gives up for the
stop (`runner.CANCELLED`) is the stop's, never the hook's error (no fail_action, no
requeue counted, no vnode offlined). The job stays queued, or is requeued and runs when
the server starts again."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.server import ROLE_MANAGER, Caller
from pbsplug.runner import CANCELLED

from .test_accounting import of, records
from .test_poll import poll_until

ROOT = Caller(0, ROLE_MANAGER)
#: The start events whose hooks the runner gives up when the server stops as they run.
STARTS = ("runjob", "execjob_begin", "execjob_prologue", "execjob_launch")


def slow_start(event: str, root: Path) -> object:
    """A plugin with one process-mode hook on `event`: it writes the job's name to
    `root`/ran, then, when `root`/stop exists, sends its server (the test's process) the
    SIGTERM, and waits until `root`/go exists, far past the runner's look at its cancel."""
    def hook(self, event) -> None:
        with open(root / "ran", "a") as ran:
            ran.write(event.job.Job_Name + "\n")
        if (root / "stop").exists():
            os.kill(os.getppid(), signal.SIGTERM)  # (the hook's process is the server's child)
        while not (root / "go").exists():
            time.sleep(0.05)

    return type("SlowStart", (), {"plugin_info": PluginInfo(events=(event,)),
                                  event: hookimpl(hook)})()


def _engine(engine_here, register_plugin, event: str, root: Path):
    attrs = {"alarm": 60}
    if event in ("execjob_begin", "execjob_prologue"):  # (fail_actions PBS lets them have)
        attrs["fail_action"] = "offline_vnodes"
    register_plugin(slow_start(event, root), "slow", **attrs)
    return engine_here()


def _log(eng) -> str:
    return "".join(p.read_text() for p in sorted(eng.home.logs.iterdir()))


def _runs_after_restart(eng, engine_here, root: Path, job_id: str) -> dict:
    """The server stopped (its chains too) and started again: the job runs to its end."""
    eng.close()
    (root / "go").touch()
    again = engine_here()
    poll_until(again, lambda: again.store.job(job_id)["job_state"] == "F", "the job's end")
    return again.store.job(job_id)


@pytest.mark.parametrize("event", STARTS)
def test_a_start_hook_given_up_for_the_stop_is_the_stops_not_the_hooks(
        event, engine_here, register_plugin, sigterm_stops, engine_root):
    # The SIGTERM lands while the job's start hook runs (the hook sends it): the runner
    # gives the hook up at its next look (0.1 s), and that was taken for the hook's error:
    # the job requeued with its run counted, its vnode offlined (fail_action), or a
    # runjob's "Not Running: PBS Error" comment, because the server was stopping.
    root = engine_root
    (root / "stop").touch()
    eng = _engine(engine_here, register_plugin, event, root)
    sigterm_stops(eng)
    job_id = eng.req_submit(ROOT, {"Job_Name": "first", "Rerunable": False}, "true\n")
    eng.poll()
    assert eng.stopping and (root / "ran").read_text() == "first\n"
    attrs = eng.store.job(job_id)
    assert attrs["job_state"] == ("Q" if event == "runjob" else "R"), attrs
    assert "hook" not in str(attrs.get("comment")), attrs["comment"]
    assert attrs.get("Hold_Types", "n") == "n" and attrs.get("run_count", 0) <= 1, attrs
    assert job_id not in eng.launches
    assert all("offline" not in str(n.get("state")) for n in eng.store.all("node").values())
    log = _log(eng)
    then = "the job stays queued" if event == "runjob" else \
        "the job is requeued when it starts again"
    assert f"its {event} hooks were stopped: the server is stopping; {then}" in log, log
    assert "encountered an exception" not in log, log
    (root / "stop").unlink()
    ended = _runs_after_restart(eng, engine_here, root, job_id)
    # (the run the stop ended before it started is not counted, as after any restart)
    assert (ended["Exit_status"], ended["run_count"]) == (0, 1), ended.get("comment")


def test_a_stop_that_lands_before_the_cycles_starts_runs_no_new_job(
        engine_here, register_plugin, monkeypatch, engine_root):
    # The SIGTERM lands in the poll after the cycle began (here: as its decisions are
    # about to be applied). The cycle started the job all the same, and its begin hook,
    # slower than the runner's look at the stop, was given up and failed the job.
    root = engine_root
    eng = _engine(engine_here, register_plugin, "execjob_begin", root)
    real = eng._apply_cycle

    def stop_first(*args, **kwargs):
        eng.stopping = True  # (what the SIGTERM's handler does)
        return real(*args, **kwargs)

    monkeypatch.setattr(eng, "_apply_cycle", stop_first)
    job_id = eng.req_submit(ROOT, {"Job_Name": "first", "Rerunable": False}, "true\n")
    eng.poll()
    assert eng.stopping
    assert not (root / "ran").exists()  # no start hook ran
    attrs = eng.store.job(job_id)
    assert (attrs["job_state"], attrs.get("comment"), attrs.get("run_count", 0)) == (
        "Q", None, 0), attrs
    assert "the server is stopping: 1 run decisions dropped" in _log(eng)
    monkeypatch.undo()
    ended = _runs_after_restart(eng, engine_here, root, job_id)
    assert (ended["Exit_status"], ended["run_count"]) == (0, 1), ended.get("comment")


#: An exception whose text, "<type>: <message>", is the runner's CANCELLED.
Stopping = type("the server is stopping", (Exception,), {})


def cancelled_text(event: str, how: str) -> object:
    """A plugin with one hook on `event` that ends with `runner.CANCELLED`'s text as its
    own: a reject with it (`how` "reject"), or an exception that reads so ("raise")."""
    def hook(self, event) -> None:
        if how == "reject":
            event.reject(CANCELLED)
        raise Stopping("the hook's process was killed")

    return type("Texts", (), {"plugin_info": PluginInfo(events=(event,)),
                              event: hookimpl(hook)})()


@pytest.mark.parametrize("isolation", ["process", "inprocess"])
@pytest.mark.parametrize("how", ["reject", "raise"])
def test_a_prologue_hook_ending_with_the_stops_text_is_judged_as_its_own(
        how, isolation, engine_here, register_plugin):
    # The engine told a hook given up for the stop by its message: a prologue whose hook
    # rejected with runner.CANCELLED's text, or raised an exception that reads so, left
    # its job R with no launch (its cpus held until a restart) and its fail_action not
    # applied, the server not stopping.
    register_plugin(cancelled_text("execjob_prologue", how), "texts", isolation=isolation,
                    fail_action="offline_vnodes")
    eng = engine_here()
    job_id = eng.req_submit(ROOT, {"Job_Name": "p", "Rerunable": False}, "true\n")
    eng.poll()
    assert not eng.stopping
    attrs = eng.store.job(job_id)
    assert (attrs["job_state"], job_id in eng.launches) == ("Q", False), attrs  # requeued
    assert attrs["comment"].startswith("Job requeued by execjob_prologue hook: "), attrs
    assert attrs.get("run_count") == 1, attrs
    offline = ["offline" in str(n.get("state")) for n in eng.store.all("node").values()]
    log = _log(eng)
    assert "was stopped" not in log and "server is stopping;" not in log, log
    if how == "raise":  # an error: its fail_action
        assert all(offline) and offline, eng.store.all("node")
        assert "execjob_prologue hook 'texts' encountered an exception" in log, log
    else:  # a plain reject: none
        assert not any(offline), eng.store.all("node")
        assert "execjob_prologue request rejected by 'texts'" in log, log


def test_a_begin_hook_given_up_for_the_stop_leaves_no_s_record(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # The S record was written before the begin hooks: the job the stop left unstarted had
    # one, the restart's requeue an R after it, and its start a second S.
    root = engine_root
    (root / "stop").touch()
    eng = _engine(engine_here, register_plugin, "execjob_begin", root)
    sigterm_stops(eng)
    job_id = eng.req_submit(ROOT, {"Job_Name": "first", "Rerunable": False}, "true\n")
    eng.poll()
    assert eng.stopping and eng.store.job(job_id)["job_state"] == "R"
    assert [kind for kind, _ in of(records(eng.home), job_id)] == ["Q"]
    (root / "stop").unlink()
    _runs_after_restart(eng, engine_here, root, job_id)
    assert [kind for kind, _ in of(records(eng.home), job_id)] == ["Q", "S", "E"]
