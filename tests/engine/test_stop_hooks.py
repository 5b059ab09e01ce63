"""A stop (SIGTERM) that lands while a hook of another synchronous event runs (a job's end,
a request, a reservation's confirmation, beginning or end): the runner gives the hook up
(`runner.CANCELLED`), and that is the stop's doing, never the hook's error. As at PBS's
shutdown: a job's end is not carried on but redone at the next start, its end hooks run
again; a request (a qdel's execjob_preterm too) is refused with a system error, ``the
server is stopping``, nothing of it done; a reservation is left as it was, its hooks run
again at the next start. (The start events: test_stop_starts.py.)"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from pbsplug import PluginInfo, hookimpl, lifecycle
from pbsplug.engine.errors import PBSE_HOOKERROR, PBSE_SYSTEM, PbsError
from pbsplug.engine.server import ROLE_MANAGER, Caller
from pbsplug.engine.store import StoreWriteError
from pbsplug.runner import CANCELLED

from .conftest import accounting_records, poll_until, until
from .owner_hooks import gone, started
from .test_accounting import of, records
from .test_owner_preterm import _qdel_behind
from .test_server import plugin
from .test_stop_starts import ROOT, _log, cancelled_text

#: A manager other than root (the server's user in these tests): whose qdel a D record is.
DAEMON = Caller(1, ROLE_MANAGER)

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


def _kinds(eng, obj_id: str) -> list[str]:
    return [kind for kind, _ in of(records(eng.home), obj_id)]


def _resv(eng, now: list[float], root: Path, confirmed: bool = True) -> str:
    """A reservation of one cpu, 60 s ahead on the test's clock `now`, confirmed unless
    not `confirmed` (its hook would stop the server)."""
    resv_id = eng.req_resv_submit(ROOT, {"Resource_List": {"select": "1:ncpus=1"},
                                         "reserve_start": int(now[0]) + 60,
                                         "reserve_end": int(now[0]) + 120})["id"]
    if confirmed:
        poll_until(eng, lambda: eng.store.get("resv", resv_id)["reserve_state"] ==
                   "RESV_CONFIRMED", "the reservation's confirmation")
    return resv_id


def test_a_resv_confirm_hook_given_up_for_the_stop_leaves_the_reservation_unconfirmed(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # It was the hook's reject: the reservation denied (deleted, its k record written)
    # because the server was stopping.
    root = engine_root
    register_plugin(slow_hook("resv_confirm", root), "slow", alarm=60)
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    eng.log.events = 2047  # (the reservations' class, 0200, too)
    sigterm_stops(eng)
    (root / "stop").touch()
    resv_id = _resv(eng, now, root, confirmed=False)
    poll_until(eng, lambda: eng.stopping, "the resv_confirm hook's SIGTERM")
    assert eng.store.get("resv", resv_id)["reserve_state"] == "RESV_UNCONFIRMED"
    log = _log(eng)
    assert "Reservation denied" not in log, log
    assert "its resv_confirm hooks were stopped: the server is stopping; the reservation " \
           "stays unconfirmed" in log, log
    assert _kinds(eng, resv_id) == ["U"]
    eng.close()
    (root / "stop").unlink()
    (root / "go").touch()
    again = engine_here(clock=lambda: now[0])
    poll_until(again, lambda: again.store.get("resv", resv_id)["reserve_state"] ==
               "RESV_CONFIRMED", "its confirmation at the next start")
    assert (root / "ran").read_text() == "resv_confirm\n" * 2
    assert _kinds(again, resv_id) == ["U", "Y"]


def test_a_resv_begin_hook_given_up_for_the_stop_leaves_the_reservation_to_begin(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # The reservation had begun (RUNNING, its B record) before its hook ran, and the hook
    # given up was logged as its reject; the restart never ran it again.
    root = engine_root
    register_plugin(slow_hook("resv_begin", root), "slow", alarm=60)
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    eng.log.events = 2047  # (the reservations' class, 0200, too)
    sigterm_stops(eng)
    resv_id = _resv(eng, now, root)
    (root / "stop").touch()
    now[0] += 61
    poll_until(eng, lambda: eng.stopping, "the resv_begin hook's SIGTERM")
    assert eng.store.get("resv", resv_id)["reserve_state"] == "RESV_CONFIRMED"
    log = _log(eng)
    assert "its resv_begin hooks were stopped: the server is stopping; the reservation " \
           "begins when the server starts again" in log, log
    assert "resv_begin request rejected" not in log, log
    assert _kinds(eng, resv_id) == ["U", "Y"]
    eng.close()
    (root / "stop").unlink()
    (root / "go").touch()
    again = engine_here(clock=lambda: now[0])
    poll_until(again, lambda: again.store.get("resv", resv_id)["reserve_state"] ==
               "RESV_RUNNING", "its beginning at the next start")
    assert (root / "ran").read_text() == "resv_begin\n" * 2
    assert _kinds(again, resv_id) == ["U", "Y", "B"]


@pytest.mark.parametrize("how", ["period", "pbs_rdel"])
def test_a_resv_end_hook_given_up_for_the_stop_leaves_the_reservation_to_end(
        how, engine_here, register_plugin, sigterm_stops, engine_root):
    # The reservation ended (its record written, deleted) and its hook given up was
    # logged as its reject, its hooks never run again; a pbs_rdel was answered as done.
    root = engine_root
    register_plugin(slow_hook("resv_end", root), "slow", alarm=60)
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    eng.log.events = 2047  # (the reservations' class, 0200, too)
    sigterm_stops(eng)
    resv_id = _resv(eng, now, root)
    now[0] += 61
    poll_until(eng, lambda: eng.store.get("resv", resv_id)["reserve_state"] ==
               "RESV_RUNNING", "the reservation's beginning")
    (root / "stop").touch()
    if how == "pbs_rdel":
        [answer] = eng.req_resv_delete(ROOT, [resv_id])
        assert eng.stopping
        assert (answer["error"]["code"], answer["error"]["message"]) == (
            PBSE_SYSTEM, STOPPED), answer
    else:
        now[0] += 60
        poll_until(eng, lambda: eng.stopping, "the resv_end hook's SIGTERM")
    assert eng.store.get("resv", resv_id)["reserve_state"] == "RESV_RUNNING"
    assert resv_id.split(".")[0] in eng.store.all("queue")
    log = _log(eng)
    assert ("its resv_end hooks were stopped: the server is stopping; the reservation ends "
            "when the server starts again" in log) is (how == "period"), log
    assert "resv_end request rejected" not in log, log
    assert _kinds(eng, resv_id) == ["U", "Y", "B"]
    eng.close()
    (root / "stop").unlink()
    (root / "go").touch()
    now[0] += 120  # (its window over: the next start ends it)
    again = engine_here(clock=lambda: now[0])
    poll_until(again, lambda: again.store.get("resv", resv_id) is None,
               "its end at the next start")
    assert (root / "ran").read_text() == "resv_end\n" * 2
    assert _kinds(again, resv_id) == ["U", "Y", "B", "k"]


def test_a_qdel_whose_preterm_hook_the_stop_gave_up_is_refused_and_the_job_runs_on(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # It was refused as the hook's error (15136, "encountered an exception"), because the
    # server was stopping.
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, "execjob_preterm", root)
    job_id = eng.req_submit(ROOT, {"Job_Name": "t"}, "sleep 600\n")
    poll_until(eng, lambda: job_id in eng.launches, "the job's run")
    (root / "stop").touch()
    [answer] = eng.req_delete(ROOT, [job_id, job_id.split(".")[0]])[:1]
    assert eng.stopping
    assert (answer["error"]["code"], answer["error"]["message"]) == (
        PBSE_SYSTEM, STOPPED), answer
    assert eng.store.job(job_id)["job_state"] == "R" and job_id in eng.launches
    log = _log(eng)
    assert "its execjob_preterm hooks were stopped: the server is stopping; the qdel is " \
           "refused, and the job runs on" in log, log
    assert "encountered an exception" not in log and "to be deleted" not in log, log
    assert "D" not in _kinds(eng, job_id)
    assert (root / "ran").read_text() == "execjob_preterm\n"  # (named twice: run once)
    eng.close()
    (root / "stop").unlink()
    (root / "go").touch()
    again = engine_here()
    assert job_id in again.launches  # adopted
    assert again.req_delete(ROOT, [job_id]) == [{"id": job_id}]
    poll_until(again, lambda: again.store.job(job_id)["job_state"] == "F", "the job's end")


def test_a_pbs_rsub_whose_resvsub_hook_the_stop_gave_up_is_refused(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # Nothing of it done: no reservation stored, no queue made, no record written.
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, "resvsub", root)
    (root / "stop").touch()
    with pytest.raises(PbsError) as refused:
        eng.req_resv_submit(ROOT, {"Resource_List": {"select": "1:ncpus=1"},
                                   "reserve_start": int(time.time()) + 600,
                                   "reserve_end": int(time.time()) + 1200})
    assert eng.stopping
    assert (refused.value.code, refused.value.message) == (PBSE_SYSTEM, STOPPED)
    assert eng.store.all("resv") == {}
    assert not any(name.startswith("R") for name in eng.store.all("queue"))
    assert not any(";U;" in p.read_text() for p in eng.home.accounting.iterdir())
    assert "encountered an exception" not in _log(eng)
    assert (root / "ran").read_text() == "resvsub\n"
    (root / "go").touch()


@pytest.mark.parametrize("how", ["pbsnodes", "qmgr set", "qmgr create"])
def test_a_vnode_change_whose_modifyvnode_hook_the_stop_gave_up_is_refused(
        how, engine_here, register_plugin, sigterm_stops, engine_root):
    # qmgr's change was made (the vnode made), its hook given up unjudged, and answered
    # as done.
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, "modifyvnode", root)
    [name] = list(eng.store.all("node"))[:1]
    before = eng.store.get("node", name)
    (root / "stop").touch()
    if how == "pbsnodes":
        with pytest.raises(PbsError) as refused:
            eng.req_node_state(ROOT, [name], offline=True, comment="down")
        code, message = refused.value.code, refused.value.message
    else:
        text = f"set node {name} comment = down" if how == "qmgr set" else \
            "create node made comment = made"
        answer = eng.req_qmgr(ROOT, text, one=True)
        code, message = answer["code"], "\n".join(answer["errors"])
    assert eng.stopping
    assert code == PBSE_SYSTEM and STOPPED in message, (code, message)
    assert eng.store.get("node", name) == before
    assert eng.store.get("node", "made") is None
    assert "encountered an exception" not in _log(eng)
    assert (root / "ran").read_text() == "modifyvnode\n"
    (root / "go").touch()


def test_a_pbs_attach_whose_attach_hook_the_stop_gave_up_is_refused(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # The process is not attached: the job's end would not kill it.
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, "execjob_attach", root)
    job_id = eng.req_submit(ROOT, {"Job_Name": "a"}, "sleep 600\n")
    poll_until(eng, lambda: job_id in eng.launches, "the job's run")
    (root / "stop").touch()
    with pytest.raises(PbsError) as refused:
        eng.req_attach(ROOT, job_id, os.getpid())
    assert eng.stopping
    assert (refused.value.code, refused.value.message) == (PBSE_SYSTEM, STOPPED)
    assert not (eng.store.runtime(job_id) or {}).get("attached")
    log = _log(eng)
    assert "attached at request" not in log and "encountered an exception" not in log, log
    assert (root / "ran").read_text() == "execjob_attach\n"
    (root / "go").touch()
    eng.stopping = False  # (the job's process ended with the test's engine: its own only)
    eng.req_delete(ROOT, [job_id])


def test_a_pbs_rdel_of_a_reservation_not_begun_whose_resv_end_hook_the_stop_gave_up(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # A pbs_rdel fires resv_end for a confirmed reservation that has not begun too: given
    # up for the stop, it is refused (15010) and the reservation stays confirmed, nothing
    # of its end done; the next start's pbs_rdel ends it, its hooks run again.
    root = engine_root
    register_plugin(slow_hook("resv_end", root), "slow", alarm=60)
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    sigterm_stops(eng)
    resv_id = _resv(eng, now, root)
    (root / "stop").touch()
    [answer] = eng.req_resv_delete(ROOT, [resv_id])
    assert eng.stopping
    assert (answer["error"]["code"], answer["error"]["message"]) == (
        PBSE_SYSTEM, STOPPED), answer
    assert eng.store.get("resv", resv_id)["reserve_state"] == "RESV_CONFIRMED"
    assert resv_id.split(".")[0] in eng.store.all("queue")
    assert _kinds(eng, resv_id) == ["U", "Y"]
    eng.close()
    (root / "stop").unlink()
    (root / "go").touch()
    again = engine_here(clock=lambda: now[0])
    assert again.req_resv_delete(ROOT, [resv_id]) == [{"id": resv_id}]
    assert again.store.get("resv", resv_id) is None
    assert (root / "ran").read_text() == "resv_end\n" * 2
    assert _kinds(again, resv_id) == ["U", "Y", "k"]


def test_an_arrays_qdel_whose_subjobs_preterm_the_stop_gave_up_is_refused_with_nothing_done(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # The array's D was written, its queued indices gone and its deleted_by stored before
    # the running subjob's preterm was given up, and the qdel was answered 15010 all the
    # same: half the request done, answered as not done. The running subjobs' preterm hooks
    # now run before anything of the deletion is recorded.
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, "execjob_preterm", root)
    ncpus = sum(int(v.resources_available.get("ncpus", 0)) for v in eng._vnodes().values())
    array = eng.req_submit(ROOT, {"Job_Name": "a", "array_indices_submitted":
                                  f"1-{ncpus + 1}"}, "sleep 600\n")
    subjobs = [array.replace("[]", f"[{i}]") for i in range(1, ncpus + 1)]
    poll_until(eng, lambda: all(s in eng.launches for s in subjobs), "the subjobs' runs")
    remaining = eng.store.job(array)["array_indices_remaining"]
    assert remaining == str(ncpus + 1), remaining  # (one index queued, not instantiated)
    (root / "stop").touch()
    answers = eng.req_delete(ROOT, [array, subjobs[0]])
    assert eng.stopping
    assert [(a["error"]["code"], a["error"]["message"]) for a in answers] == [
        (PBSE_SYSTEM, STOPPED)] * 2, answers
    attrs = eng.store.job(array)
    assert attrs["array_indices_remaining"] == remaining, attrs  # nothing of it done
    assert "deleted_by" not in (eng.store.runtime(array) or {})
    assert all(eng.store.job(s)["job_state"] == "R" and s in eng.launches for s in subjobs)
    assert "D" not in _kinds(eng, array) and not any("D" in _kinds(eng, s) for s in subjobs)
    log = _log(eng)
    assert "to be deleted" not in log and "encountered an exception" not in log, log
    assert "its execjob_preterm hooks were stopped: the server is stopping; the qdel is " \
           "refused, and the job runs on" in log, log
    assert (root / "ran").read_text() == "execjob_preterm\n"  # (the first given up: no more)
    eng.close()
    (root / "stop").unlink()
    (root / "go").touch()
    again = engine_here()
    assert all(s in again.launches for s in subjobs)  # adopted
    assert again.req_delete(ROOT, [array]) == [{"id": array}]
    poll_until(again, lambda: again.store.job(array)["job_state"] == "F", "the array's end")
    assert _kinds(again, array).count("D") == 1, _kinds(again, array)


def test_a_qdel_list_refuses_the_jobs_after_a_preterm_the_stop_gave_up_untouched(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # The held job named after the refused one was deleted by a server that had just
    # answered the request's first job 'the server is stopping'.
    root = engine_root
    eng = _engine(engine_here, register_plugin, sigterm_stops, "execjob_preterm", root)
    held = eng.req_submit(ROOT, {"Job_Name": "h", "Hold_Types": "u"}, "true\n")
    running = eng.req_submit(ROOT, {"Job_Name": "r"}, "sleep 600\n")
    poll_until(eng, lambda: running in eng.launches, "the job's run")
    (root / "stop").touch()
    answers = eng.req_delete(ROOT, [running, held])
    assert [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers] == [
        (running, PBSE_SYSTEM, STOPPED), (held, PBSE_SYSTEM, STOPPED)], answers
    assert eng.store.job(held)["job_state"] == "H"
    assert "D" not in _kinds(eng, held)
    (root / "go").touch()


def test_an_arrays_qdel_the_stop_refused_and_retried_at_the_next_start_runs_each_preterm_once(
        dists, make_engine, engine_root):
    # The qdel of a running array fires its subjobs' execjob_preterm hooks (in the server's
    # thread) before it records anything; the stop gives up the second subjob's, and the
    # qdel is refused, the first subjob's preterm having accepted. The qdel tried again
    # after the restart fired the first subjob's preterm again: two preterms for one
    # deletion. Now the first subjob is deleted at the next start's first poll, without its
    # hooks (as PBS's MoM kills a job whose preterm accepted), before any retry; the
    # second's, given up halfway, runs again at the retry, as a job's whose qdel the stop
    # refused does.
    ran, go = engine_root / "ran", engine_root / "go"
    engine = make_engine(plugin(dists, "pre", f"""
        import os
        import time

        @hookimpl
        def execjob_preterm(event):
            with open({str(ran)!r}, "a") as out:
                out.write(event.job.id + "\\n")
            if len(open({str(ran)!r}).read().splitlines()) == 2:
                with open({str(engine_root / "started")!r}, "w") as pid:
                    pid.write(str(os.getpid()))
                while not os.path.exists({str(go)!r}):
                    time.sleep(0.05)
        """, ("execjob_preterm",), alarm=300))
    array = engine.pbs("qsub", "-J", "1-2", "--", "/bin/sleep", "60",
                       check=True).stdout.strip()
    subjobs = [array.replace("[]", f"[{i}]") for i in (1, 2)]
    for sub in subjobs:
        engine.wait(sub, "R")
    thread, answers = _qdel_behind(engine, array)
    hook = started(engine_root, "the second subjob's preterm to start")
    engine.stop()
    thread.join(60)
    until(lambda: gone(hook), what="the given-up hook's process to go")
    first, second = ran.read_text().splitlines()
    assert [(a["error"]["code"], a["error"]["message"]) for a in answers[0]] == [
        (PBSE_SYSTEM, _accepted(first))], answers
    assert f"{first};its execjob_preterm hooks accepted its array's qdel, which the " \
           "server's stop refused: the job is deleted when the server starts again" \
        in engine.log()
    go.touch()
    engine.start()
    assert engine.wait(first, "XF")["job_state"] == "X"  # (no qdel: the first poll's)
    assert engine.job(second)["job_state"] == "R"
    assert f"{first};job deleted after a server restart: its array's qdel stands" \
        in engine.log()
    assert engine.client("delete", ids=[array]) == [{"id": array}]
    assert engine.wait(array)["job_state"] == "F"
    assert ran.read_text().splitlines() == [first, second, second]
    records = accounting_records(engine)
    assert [records.count(f";D;{job};") for job in (array, *subjobs)] == [1, 1, 1], records


def test_an_arrays_qdel_tried_again_before_the_restarts_first_poll_fires_no_preterm_again(
        engine_here, register_plugin, engine_root):
    # The stop gave up the subjobs' pbsuser preterm chains of an array's qdel: the
    # deletion stands, each subjob marked to be deleted at the next start, no preterm
    # again (`_poll_deletes_again`). A qdel tried again as the server comes back, answered
    # before that first poll (the loop answers what came in first), fired every subjob's
    # preterm again (chains started anew, the marks written again). Now it deletes them as
    # the first poll would, without their hooks, and as the first qdel: their D records
    # under its user (root), not the retrying one's (daemon, a manager), as the poll
    # writes them.
    root = engine_root

    class Held:
        plugin_info = PluginInfo(events=("execjob_preterm",))

        @hookimpl
        def execjob_preterm(self, event) -> None:
            with open(root / "ran", "a") as ran:
                ran.write(f"{event.job.id}\n")
            while not (root / "go").exists():
                time.sleep(0.05)

    register_plugin(Held(), "held", user="pbsuser", alarm=60)
    eng = engine_here()
    eng.defer_answers = True  # (as the socket server's loop: the chains run meanwhile)
    array = eng.req_submit(ROOT, {"Job_Name": "a", "array_indices_submitted": "1-2"},
                           "sleep 600\n")
    subjobs = [array.replace("[]", f"[{i}]") for i in (1, 2)]
    poll_until(eng, lambda: all(s in eng.launches for s in subjobs), "the subjobs' runs")
    assert not isinstance(eng.req_delete(ROOT, [array]), list)  # (it waits for the chains)
    until(lambda: (root / "ran").exists() and len((root / "ran").read_text().split()) == 2,
          what="both subjobs' preterm hooks to start")
    eng.stopping = True
    eng.close()  # (its chains stopped: each subjob marked to be deleted at the next start)
    (root / "go").touch()
    again = engine_here()
    again.defer_answers = True
    assert all(s in again.launches for s in subjobs)  # adopted, their deletion to come
    assert again.req_delete(DAEMON, [array]) == [{"id": array}]  # (before the first poll)
    poll_until(again, lambda: again.store.job(array)["job_state"] == "F", "the array's end")
    assert sorted((root / "ran").read_text().split()) == subjobs  # one preterm each
    assert all(f"{s};its execjob_preterm hooks are not run again: its array's qdel from "
               "before the server's restart stands" in _log(again) for s in subjobs)
    assert [_kinds(again, job).count("D") for job in (array, *subjobs)] == [1, 1, 1]
    assert [_deleters(again, sub) for sub in subjobs] == [[f"root@{again.host}"]] * 2


def _deleters(eng, job_id: str) -> list[str]:
    """The requestors of job `job_id`'s D records."""
    return [body["requestor"] for kind, body in of(records(eng.home), job_id) if kind == "D"]


def _accepted(*subjobs: str) -> str:
    """The answer of an array's qdel the stop refused whose `subjobs`' preterm accepted."""
    those, are = (f"subjobs {', '.join(subjobs)}", "are") if len(subjobs) > 1 else \
        (f"subjob {subjobs[0]}", "is")
    return (f"{STOPPED}; the deletion is not recorded, but its running {those}, whose "
            f"execjob_preterm hooks accepted it, {are} deleted at the latest when the "
            "server starts again")


def _in_thread_preterm(root: Path, stop_at: int = 2) -> object:
    """An in-thread execjob_preterm hook: appends the job's id to ``root/ran``; its
    `stop_at`-th run ever, while ``root/stop`` exists, sends the server (this process) the
    SIGTERM and waits for ``root/go`` (the stop gives it up)."""
    def hook(self, event) -> None:
        with open(root / "ran", "a") as ran:
            ran.write(f"{event.job.id}\n")
        if (root / "stop").exists() and len((root / "ran").read_text().split()) == stop_at:
            os.kill(os.getppid(), signal.SIGTERM)
            while not (root / "go").exists():
                time.sleep(0.05)

    return type("Pre", (), {"plugin_info": PluginInfo(events=("execjob_preterm",)),
                            "execjob_preterm": hookimpl(hook)})()


def _refused_at_stop(engine_here, register_plugin, sigterm_stops, root: Path,
                     script: str = "sleep 600\n") -> tuple[Any, str, str]:
    """A running array of two subjobs (running `script`) whose qdel (daemon's) the stop
    refused during the second subjob's in-thread preterm, the first's having accepted;
    the server started again (not polled yet): the new engine, the first subjob, the
    second."""
    again, answer, (first, second) = _stopped_array_qdel(engine_here, register_plugin,
                                                         sigterm_stops, root, 2, script)
    assert answer == _accepted(first)
    return again, first, second


def _stopped_array_qdel(engine_here, register_plugin, sigterm_stops, root: Path,
                        count: int, script: str = "sleep 600\n"
                        ) -> tuple[Any, str, list[str]]:
    """A running array of `count` subjobs (running `script`) whose qdel (daemon's) the
    stop refused during the last subjob's in-thread preterm, the others' having accepted;
    the server started again (not polled yet): the new engine, the qdel's answer, the
    subjobs in the order their preterm ran."""
    register_plugin(_in_thread_preterm(root, count), "pre", alarm=60)
    eng = engine_here()
    sigterm_stops(eng)
    name, vnode = next(iter(eng._vnodes().items()))  # (room for every subjob at once)
    if int(vnode.resources_available.get("ncpus", 0)) < count:
        eng.req_qmgr(ROOT, f"set node {name} resources_available.ncpus = {count}")
    array = eng.req_submit(ROOT, {"Job_Name": "a",
                                  "array_indices_submitted": f"1-{count}"}, script)
    subjobs = [array.replace("[]", f"[{i}]") for i in range(1, count + 1)]
    poll_until(eng, lambda: all(s in eng.launches for s in subjobs), "the subjobs' runs")
    (root / "stop").touch()
    answers = eng.req_delete(DAEMON, [array])
    ran = (root / "ran").read_text().split()
    assert sorted(ran) == sorted(subjobs) and len(answers) == 1, (ran, answers)
    for sub in ran[:-1]:
        assert (eng.store.runtime(sub) or {}).get("delete_at_start") == DAEMON.uid
    assert "delete_at_start" not in (eng.store.runtime(ran[-1]) or {})
    eng.close()
    (root / "stop").unlink()
    (root / "go").touch()
    again = engine_here()
    assert all(s in again.launches for s in subjobs)  # (adopted)
    return again, answers[0]["error"]["message"], ran


def test_the_refusal_names_every_subjob_whose_preterm_accepted(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # Two subjobs' preterm accept an array's qdel before the stop gives up the third's:
    # the refusal names both, in the plural, and both are deleted at the first poll; the
    # third runs on. (The text written out here, not by `_accepted`, which mirrors the
    # server's.)
    again, answer, (first, second, third) = _stopped_array_qdel(
        engine_here, register_plugin, sigterm_stops, engine_root, 3)
    assert answer == (f"{STOPPED}; the deletion is not recorded, but its running subjobs "
                      f"{first}, {second}, whose execjob_preterm hooks accepted it, are "
                      "deleted at the latest when the server starts again")
    again.poll()
    poll_until(again, lambda: all(again.store.job(s)["job_state"] == "F"
                                  for s in (first, second)), "their deletion")
    assert [_deleters(again, s) for s in (first, second)] == [[f"daemon@{again.host}"]] * 2
    assert again.store.job(third)["job_state"] == "R" and not _deleters(again, third)
    assert (engine_root / "ran").read_text().split() == [first, second, third]


@pytest.mark.parametrize("then", ["first poll", "qdel before it"])
def test_the_subjobs_whose_preterm_accepted_a_qdel_the_stop_refused_are_deleted_at_the_next_start(
        then, engine_here, register_plugin, sigterm_stops, engine_root):
    # An array's qdel (by daemon, a manager) fires its subjobs' in-thread preterm hooks
    # first; the stop gives up the second's, and the qdel is refused. The first's accepted:
    # it is deleted at the next start as the subjobs of an array's qdel whose chains the
    # stop gave up are (`deletes_again`): at the first poll, or by a qdel that comes
    # before it (root's), without its hooks again, its D record daemon's. Nothing else of
    # the refused qdel stands: the second subjob runs on, and a qdel of it long after
    # fires its hooks. (The old code kept the acceptance with the run, honoured by any
    # later qdel: one hours later killed the subjob without its hooks, and none came
    # without a qdel: the subjob ran on.)
    root = engine_root
    again, first, second = _refused_at_stop(engine_here, register_plugin, sigterm_stops, root)
    if then == "first poll":
        again.poll()
    else:
        assert again.req_delete(ROOT, [first]) == [{"id": first}]
    poll_until(again, lambda: again.store.job(first)["job_state"] == "F", "its deletion")
    assert _deleters(again, first) == [f"daemon@{again.host}"]
    assert (root / "ran").read_text().split() == [first, second]  # (not run again)
    for _ in range(5):
        again.poll()
    assert again.store.job(second)["job_state"] == "R" and not _deleters(again, second)
    assert again.req_delete(ROOT, [second]) == [{"id": second}]
    assert (root / "ran").read_text().split() == [first, second, second]
    assert _deleters(again, second) == [f"root@{again.host}"]


def test_a_qrerun_before_the_first_poll_of_a_subjob_to_be_deleted_keeps_its_requeue(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # The first subjob, whose preterm accepted an array's qdel the stop refused, is to be
    # deleted at the next start's first poll; a qrerun of it answered before that poll
    # ends its run for a requeue. The first poll deletes it as a qdel then does: its D
    # record (daemon's), the requeue standing (`_delete_requeued`); its kill overrode the
    # qrerun (the run ended deleted, never run again). The new run is a run of its own: a
    # qdel of it fires its preterm.
    again, first, second = _refused_at_stop(engine_here, register_plugin, sigterm_stops,
                                            engine_root)
    started_by = again.launches[first].shepherd
    again.req_rerun(ROOT, [first])
    poll_until(again, lambda: again.store.job(first)["job_state"] == "R" and
               first in again.launches and again.launches[first].shepherd != started_by
               and not (again.store.runtime(first) or {}).get("end_reason"),
               "the subjob's new run")
    assert _deleters(again, first) == [f"daemon@{again.host}"]
    assert "its run is being ended for a requeue, which stands" in _log(again)
    assert again.req_delete(ROOT, [first]) == [{"id": first}]
    assert (engine_root / "ran").read_text().split() == [first, second, first]
    assert _deleters(again, first) == [f"daemon@{again.host}", f"root@{again.host}"]


def test_a_qterm_immediate_after_a_qrerun_of_a_subjob_to_be_deleted_keeps_its_requeue(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # As at the first poll (above), a qterm -t immediate before it deletes the marked
    # subjob that a qrerun is ending as a qdel then does: its D record (daemon's), the
    # requeue standing; one rule for both (`Engine.delete_marked`). (The stop's kill took
    # no heed of the qrerun: the run ended deleted, answered as rerun.)
    again, first, _second = _refused_at_stop(engine_here, register_plugin, sigterm_stops,
                                             engine_root)
    again.req_rerun(ROOT, [first])
    assert (again.store.runtime(first) or {}).get("end_reason") == "requeue"
    assert again.req_terminate(ROOT, "immediate") == "shutting down"
    assert again.store.job(first)["job_state"] == "Q"
    assert _deleters(again, first) == [f"daemon@{again.host}"]
    assert "its run is being ended for a requeue, which stands" in _log(again)
    assert "delete_at_start" not in (again.store.runtime(first) or {})


def _group(pgid: int) -> list[tuple[int, str]]:
    """The processes of process group `pgid`, with their states (zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append((int(entry.name), fields[0]))
    return found


def test_a_qterm_immediate_after_a_qrerun_of_a_suspended_subjob_to_be_deleted(
        engine_here, register_plugin, sigterm_stops, engine_root):
    # The marked subjob suspended (qsig -s suspend), then a forced qrerun (a suspended
    # job's needs -f), then qterm -t immediate before the first poll: it ends requeued as
    # above (Q, its D record daemon's), and its processes are gone: woken to take the
    # qrerun's SIGTERM (its trap writes ``termed``), not left stopped (a SIGKILL after
    # kill_delay ended such a one, its trap never run).
    again, first, _second = _refused_at_stop(
        engine_here, register_plugin, sigterm_stops, engine_root,
        f"trap 'echo $PBS_JOBID >> {engine_root}/termed; exit 143' TERM\n"
        "sleep 600 &\nwait\n")
    assert again.req_signal(ROOT, [first], "suspend") == [{"id": first}]
    assert again.store.job(first)["job_state"] == "S"
    pgid = again.launches[first].pgid  # (the adopted run's, once read)
    assert pgid > 0
    until(lambda: _group(pgid) and all(state == "T" for _, state in _group(pgid)),
          what="the subjob's processes stopped")
    again.req_rerun(ROOT, [first], force=True)
    assert (again.store.runtime(first) or {}).get("end_reason") == "requeue"
    assert again.req_terminate(ROOT, "immediate") == "shutting down"
    assert again.store.job(first)["job_state"] == "Q"
    assert _deleters(again, first) == [f"daemon@{again.host}"]
    assert "its run is being ended for a requeue, which stands" in _log(again)
    assert "delete_at_start" not in (again.store.runtime(first) or {})
    assert first not in again.launches
    assert _group(pgid) == []
    assert first in (engine_root / "termed").read_text().split()  # (not SIGKILLed stopped)


def _deletions_unwritten(monkeypatch: pytest.MonkeyPatch, engine: Any,
                         times: int) -> list[str]:
    """`engine`'s next `times` deletion records refused as by a full disk; the ids of the
    jobs refused, as they come."""
    real, failed = engine._record_deletion, []

    def fails(*args: Any, **kwargs: Any) -> None:
        if len(failed) < times:
            failed.append(args[1])
            raise StoreWriteError("database or disk is full")
        real(*args, **kwargs)

    monkeypatch.setattr(engine, "_record_deletion", fails)
    return failed


@pytest.mark.parametrize("then", ["next poll", "qdel"])
def test_a_first_poll_deletion_that_cannot_be_written_is_tried_again(
        then, engine_here, register_plugin, sigterm_stops, engine_root, monkeypatch):
    # The first poll's deletion of the marked subjob fails to write (a full disk): it is
    # logged, and the subjob stays to be deleted (`deletes_again`): the next poll deletes
    # it, or a qdel before that deletes it as the refused qdel, without its hooks again.
    # (It was dropped: the subjob ran on, a later qdel fired its accepted preterm again,
    # and the mark left in the store killed it without hooks a restart later.)
    again, first, second = _refused_at_stop(engine_here, register_plugin, sigterm_stops,
                                            engine_root)
    failed = _deletions_unwritten(monkeypatch, again, 1)
    again.poll()
    assert failed == [first] and again.store.job(first)["job_state"] == "R"
    assert _log(again).count("deleting it after a server restart failed") == 1
    assert first in again.deletes_again
    if then == "next poll":
        again.poll()
    else:
        assert again.req_delete(ROOT, [first]) == [{"id": first}]
    poll_until(again, lambda: again.store.job(first)["job_state"] == "F", "its deletion")
    assert _deleters(again, first) == [f"daemon@{again.host}"]
    assert (engine_root / "ran").read_text().split() == [first, second]  # (not run again)
    assert _log(again).count("deleting it after a server restart failed") == 1
    assert first not in again.deletes_again


def test_a_first_poll_deletion_that_stays_unwritten_is_logged_once(
        engine_here, register_plugin, sigterm_stops, engine_root, monkeypatch):
    # A disk that stays full through several polls: the deletion and its failure are
    # logged once each (one line per event, not per poll), and once it is written, one
    # line says so. (Two lines at every poll before.)
    again, first, second = _refused_at_stop(engine_here, register_plugin, sigterm_stops,
                                            engine_root)
    failed = _deletions_unwritten(monkeypatch, again, 3)
    for _ in range(3):
        again.poll()
    assert failed == [first] * 3 and again.store.job(first)["job_state"] == "R"
    log = _log(again)
    assert log.count("job deleted after a server restart") == 1
    assert log.count("deleting it after a server restart failed") == 1
    assert "its deletion after a server restart recorded" not in log
    again.poll()
    poll_until(again, lambda: again.store.job(first)["job_state"] == "F", "its deletion")
    assert _deleters(again, first) == [f"daemon@{again.host}"]
    log = _log(again)
    assert log.count("job deleted after a server restart") == 1
    assert log.count("deleting it after a server restart failed") == 1
    assert log.count("its deletion after a server restart recorded") == 1
    assert first not in again.deletes_again
