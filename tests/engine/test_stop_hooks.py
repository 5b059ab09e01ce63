"""A stop (SIGTERM) that lands while a hook of another synchronous event runs (a job's end,
a request): the runner gives the hook up (`runner.CANCELLED`), and that is the stop's
doing, never the hook's error. As at PBS's shutdown: a job's end is not carried on but
redone at the next start, its end hooks run again; a request is refused with a system
error, ``the server is stopping``, nothing of it done. (The start events:
test_stop_starts.py.)"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from pbsplug import PluginInfo, hookimpl, lifecycle
from pbsplug.engine.errors import PBSE_HOOKERROR, PBSE_SYSTEM, PbsError
from pbsplug.runner import CANCELLED

from .conftest import poll_until
from .test_stop_starts import ROOT, _log, cancelled_text

STOPPED = "System error: the server is stopping"


def slow_hook(event: str, root: Path) -> object:
    """A plugin with one process-mode hook on `event`: it writes a line to `root`/ran,
    then, when `root`/stop exists, sends its server (the test's process) the SIGTERM, and
    waits until `root`/go exists, far past the runner's look at its cancel."""
    def hook(self, event) -> None:
        with open(root / "ran", "a") as ran:
            ran.write(f"{event.type}\n")
        if (root / "stop").exists():
            os.kill(os.getppid(), signal.SIGTERM)  # (the hook's process is the server's child)
        while not (root / "go").exists():
            time.sleep(0.05)

    return type("Slow", (), {"plugin_info": PluginInfo(events=(event,)),
                             event: hookimpl(hook)})()


def _engine(engine_here, register_plugin, sigterm_stops, event: str, root: Path):
    register_plugin(slow_hook(event, root), "slow", alarm=60)
    eng = engine_here()
    sigterm_stops(eng)
    return eng


@pytest.mark.parametrize("event", ["execjob_epilogue", "execjob_end"])
def test_an_end_hook_given_up_for_the_stop_leaves_the_end_to_the_next_start(
        event, engine_here, register_plugin, sigterm_stops, engine_root):
    # The end hook given up was only the hook's error: the job was finished (F, its end
    # hooks over in the server's eyes) because the server was stopping.
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, event, root)
    job_id = eng.req_submit(ROOT, {"Job_Name": "e"}, "exit 3\n")
    (root / "stop").touch()
    poll_until(eng, lambda: eng.stopping, "the end hook's SIGTERM")
    attrs = eng.store.job(job_id)
    assert (attrs["job_state"], attrs.get("substate")) == ("E", lifecycle.RUNEPILOG), attrs
    log = _log(eng)
    assert f"its {event} hooks were stopped: the server is stopping; the job ends, its end " \
           "hooks run again, when it starts again" in log, log
    assert f"{event} hook 'slow' was stopped: the server is stopping" in log, log
    assert "encountered an exception" not in log, log
    eng.close()
    (root / "stop").unlink()
    (root / "go").touch()
    again = engine_here()
    poll_until(again, lambda: again.store.job(job_id)["job_state"] == "F", "the job's end")
    ended = again.store.job(job_id)
    assert ended["Exit_status"] == 3, ended
    assert (root / "ran").read_text() == f"{event}\n" * 2  # run again at the next start


@pytest.mark.parametrize("event", ["queuejob", "modifyjob", "movejob"])
def test_a_request_whose_hook_the_stop_gave_up_is_refused_as_the_server_stops(
        event, engine_here, register_plugin, sigterm_stops, engine_root):
    # It was refused as the hook's error: 15136 "request rejected as filter hook 'slow'
    # encountered an exception. Please inform Admin".
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, event, root)
    job_id = None
    if event != "queuejob":
        job_id = eng.req_submit(ROOT, {"Job_Name": "m", "Hold_Types": "u"}, "true\n")
    (root / "stop").touch()
    with pytest.raises(PbsError) as refused:
        if event == "queuejob":
            eng.req_submit(ROOT, {"Job_Name": "q"}, "true\n")
        elif event == "modifyjob":
            eng.req_alter(ROOT, job_id, {"comment": "changed"})
        else:  # (qmove answers per job)
            [answer] = eng.req_move(ROOT, "workq", [job_id])
            raise PbsError(answer["error"]["code"], answer["error"]["message"])
    assert eng.stopping
    assert (refused.value.code, refused.value.message) == (PBSE_SYSTEM, STOPPED)
    jobs = eng.store.jobs(("Q", "H"))
    assert list(jobs) == ([] if job_id is None else [job_id]), jobs
    assert job_id is None or "comment" not in jobs[job_id]
    assert "encountered an exception" not in _log(eng)
    (root / "go").touch()


def test_a_postqueuejob_hook_given_up_for_the_stop_leaves_the_job_queued(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # A postqueuejob error's consequence is the job's deletion: the job, queued already,
    # was deleted because the server was stopping.
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, "postqueuejob", root)
    (root / "stop").touch()
    job_id = eng.req_submit(ROOT, {"Job_Name": "p", "Hold_Types": "u"}, "true\n")
    assert eng.stopping
    assert eng.store.job(job_id)["job_state"] == "H"
    assert "deleted" not in _log(eng)
    (root / "go").touch()


def test_a_qmgr_request_whose_management_hook_the_stop_gave_up_is_refused(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # It was refused as the management hook's error (15136, "encountered an exception").
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, "management", root)
    (root / "stop").touch()
    answer = eng.req_qmgr(ROOT, "set server comment = changed", one=True)
    assert eng.stopping
    assert answer["code"] == PBSE_SYSTEM, answer
    assert any(STOPPED in line for line in answer["errors"]), answer
    assert "comment" not in eng.server_attrs()
    (root / "go").touch()


@pytest.mark.parametrize("isolation", ["process", "inprocess"])
@pytest.mark.parametrize("how", ["reject", "raise"])
@pytest.mark.parametrize("event", ["execjob_epilogue", "execjob_end"])
def test_an_end_hook_ending_with_the_stops_text_is_judged_as_its_own(
        event, how, isolation, engine_here, register_plugin):
    # The engine told a hook given up for the stop by its message: an end hook that
    # rejected with runner.CANCELLED's text, or raised an exception that reads so, left
    # its job E in substate 57, its end redone (and the hook run again) at every start,
    # the server not stopping.
    register_plugin(cancelled_text(event, how), "texts", isolation=isolation)
    eng = engine_here()
    job_id = eng.req_submit(ROOT, {"Job_Name": "e"}, "exit 3\n")
    poll_until(eng, lambda: (eng.store.job(job_id)["job_state"] == "F"
                             or eng.store.job(job_id).get("substate") == lifecycle.RUNEPILOG),
               "the job's end (F), or its end left to the next start (E 57)")
    assert not eng.stopping
    attrs = eng.store.job(job_id)
    assert (attrs["job_state"], attrs["Exit_status"]) == ("F", 3), attrs
    records = "".join(p.read_text() for p in sorted(eng.home.accounting.iterdir()))
    assert f";E;{job_id};" in records, records
    log = _log(eng)
    assert "was stopped" not in log and "server is stopping;" not in log, log


@pytest.mark.parametrize("isolation", ["process", "inprocess"])
@pytest.mark.parametrize("how", ["reject", "raise"])
def test_a_request_hook_ending_with_the_stops_text_is_its_refusal(
        how, isolation, engine_here, register_plugin):
    # It was refused as the server stopping (15010), the server not stopping.
    register_plugin(cancelled_text("queuejob", how), "texts", isolation=isolation)
    eng = engine_here()
    with pytest.raises(PbsError) as refused:
        eng.req_submit(ROOT, {"Job_Name": "q"}, "true\n")
    assert refused.value.code == PBSE_HOOKERROR
    assert STOPPED not in refused.value.message
    assert refused.value.message == (CANCELLED if how == "reject" else
                                     "request rejected as filter hook 'texts' encountered "
                                     "an exception. Please inform Admin"), refused.value
