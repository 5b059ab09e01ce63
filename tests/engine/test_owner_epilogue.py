"""An execjob_epilogue (or execjob_end) with a ``user = pbsuser`` hook, which the job's owner
may make slow, runs while the server serves: the job whose processes ended is E in substate
57 meanwhile, and its end goes on (execjob_end, its record, F) when the chain is over. qdel
is refused meanwhile, nothing killed; a server stopped or killed meanwhile ends the job at
its next start, its end hooks run again."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from pbsplug.engine.client import Client
from pbsplug.engine.errors import PbsError

from .conftest import accounting_records, deleted_once, until
from .owner_hooks import SERVER_GOES, gone, holding_plugin, server_goes, started, takes_a_job
from .test_owner_prologue import waiting_prologue
from .test_server import plugin


def waiting_end(dists, root: Path, event: str = "execjob_epilogue") -> str:
    """A pbsuser hook on execjob_epilogue and execjob_end that, the first time `event`
    fires, writes its pid to `root`/started and waits until `root`/go exists; each of its
    events writes what it saw to `root`/seen."""
    return holding_plugin(dists, root, f"""
        def _record(event):
            with open({str(root / "seen")!r}, "a") as seen:
                seen.write(f"{{event.type}} {{event.job.Exit_status}}\\n")
            if event.type == {event!r}:
                hold_first()

        @hookimpl
        def execjob_epilogue(event):
            _record(event)

        @hookimpl
        def execjob_end(event):
            _record(event)
        """, ("execjob_epilogue", "execjob_end"))


def _started(root: Path) -> int:
    return started(root, "the end hook to start")


@pytest.mark.parametrize("event", ["execjob_epilogue", "execjob_end"])
def test_the_server_answers_while_a_pbsuser_end_hook_runs(event, dists, make_engine,
                                                          engine_root):
    engine = make_engine(waiting_end(dists, engine_root, event))
    job_id = engine.submit("echo ran\nexit 3\n", Job_Name="slow")
    _started(engine_root)
    client = Client(engine.home, timeout=20)  # (a hang guard: see takes_a_job)
    attrs = client("stat_jobs", ids=[job_id])[job_id]
    assert (attrs["job_state"], attrs["substate"], attrs["Exit_status"]) == ("E", 57, 3)
    takes_a_job(engine, client)
    assert not (engine_root / "go").exists()  # the hook was still waiting
    (engine_root / "go").touch()
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"], attrs["substate"]) == (3, 1, 93)
    assert attrs["comment"].endswith(" and failed")
    assert (engine_root / "seen").read_text() == "execjob_epilogue 3\nexecjob_end 3\n"
    assert (engine.work / f"slow.o{job_id.split('.')[0]}").read_text() == "ran\n"
    records = accounting_records(engine)
    assert f";E;{job_id};" in records and "Exit_status=3" in records


def test_qdel_of_a_job_whose_pbsuser_epilogue_runs_kills_nothing(dists, make_engine,
                                                                 engine_root):
    # As PBS's MoM, which refuses the server's signal while it runs a job's epilogue: a
    # plain qdel is 15016 (and so are qrerun and qsig), a forced one is taken; the
    # epilogue goes on either way, and the job ends as it leaves it.
    engine = make_engine(waiting_end(dists, engine_root))
    job_id = engine.submit("exit 4\n", Job_Name="slow")
    pid = _started(engine_root)
    client = Client(engine.home, timeout=20)
    answers = client("delete", ids=[job_id])
    assert answers[0]["error"]["code"] == 15016
    assert client("signal", ids=[job_id], signal="SIGTERM")[0]["error"]["code"] == 15016
    with pytest.raises(PbsError) as refused:
        client("rerun", ids=[job_id])
    assert refused.value.code == 15016
    assert client("stat_jobs", ids=[job_id])[job_id]["job_state"] == "E"
    answers = client("delete", ids=[job_id, job_id], force=True)
    assert [a.get("error") for a in answers] == [None, None]
    # (again: answered, but neither logged nor written again: one deletion, one D)
    assert [a.get("error") for a in client("delete", ids=[job_id], force=True)] == [None]
    assert client("stat_jobs", ids=[job_id])[job_id]["job_state"] == "E"
    assert not gone(pid)
    (engine_root / "go").touch()
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (4, 1)
    assert (engine_root / "seen").read_text() == "execjob_epilogue 4\nexecjob_end 4\n"
    log = engine.log()
    assert "delete at request of root@" in log and "refused: its end hooks run" in log
    deleted_once(engine, job_id)


def test_a_forced_qdel_in_the_end_hooks_of_a_run_deleted_during_its_qrerun_writes_no_d(
        dists, make_engine, engine_root):
    # A qdel while a qrerun ends the run is written (its D record) and the requeue stands
    # (`_delete_requeued`); a qdel -W force while that run's pbsuser epilogue runs is
    # answered, and nothing is logged or written again: one deletion, one D. It wrote a
    # second D: the run's end_reason, the requeue's, did not say it was deleted.
    engine = make_engine(waiting_end(dists, engine_root))
    assert engine.pbs("qmgr", "-c", "set queue workq kill_delay = 600").returncode == 0
    mark = engine_root / "ran"  # (its second run ends at once)
    job_id = engine.submit(f"[ -e {mark} ] && exit 0\ntrap '' TERM\ntouch {mark}\n"
                           "sleep 300\n", Job_Name="slow")
    until(mark.exists, what="the job to run")
    engine.pbs("qrerun", job_id, check=True)
    engine.pbs("qdel", job_id, check=True)
    engine.pbs("qsig", "-s", "KILL", job_id, check=True)  # (deaf to the SIGTERM)
    _started(engine_root)
    client = Client(engine.home, timeout=20)
    assert [a.get("error") for a in client("delete", ids=[job_id], force=True)] == [None]
    (engine_root / "go").touch()
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs["comment"]
    deleted_once(engine, job_id)


@pytest.mark.parametrize("how", SERVER_GOES)
def test_a_job_whose_pbsuser_epilogue_ran_when_the_server_died_ends_at_the_next_start(
        how, dists, make_engine, engine_root):
    # The job is E with its status file when the server goes; its next start ends it as a
    # job that ended while the server was down, its end hooks run again from the first.
    engine = make_engine(waiting_end(dists, engine_root))
    job_id = engine.submit("exit 6\n", Job_Name="slow", Rerunable=False)
    pid = _started(engine_root)
    attrs = Client(engine.home, timeout=20)("stat_jobs", ids=[job_id])[job_id]  # (a guard)
    assert (attrs["job_state"], attrs["substate"]) == ("E", 57)
    server_goes(engine, how, pid)
    assert not (engine_root / "go").exists()
    engine.start()
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (6, 1), attrs.get("comment")
    assert attrs["comment"].endswith(" and failed")
    assert (engine_root / "seen").read_text() == (
        "execjob_epilogue 6\nexecjob_epilogue 6\nexecjob_end 6\n")
    if how != "killed":
        assert "its execjob_epilogue hooks were stopped: the server is stopping; the job " \
               "ends, its end hooks run again, when it starts again" in engine.log()


def test_an_exiting_job_ends_as_its_end_hooks_leave_it_when_its_reservation_is_deleted(
        dists, make_engine, engine_root):
    # Its processes ended: nothing is left to kill, and the reservation stays listed as
    # being deleted (as while its running jobs are killed) until the job has ended.
    engine = make_engine(waiting_end(dists, engine_root))
    client = Client(engine.home, timeout=20)
    resv_id = client("resv_submit", attrs={
        "reserve_start": int(time.time()) + 3, "reserve_duration": 600,
        "Resource_List": {"select": "1:ncpus=1"}})["id"]
    until(lambda: client("stat_resvs", ids=[resv_id])[resv_id]["reserve_state"] ==
          "RESV_RUNNING", what="the reservation's start")
    queue = resv_id.split(".")[0]
    job_id = engine.submit("exit 5\n", queue=queue)
    _started(engine_root)
    engine.pbs("pbs_rdel", resv_id, check=True)
    assert client("stat_resvs", ids=[resv_id])[resv_id]["reserve_state"] == \
        "RESV_BEING_DELETED"
    assert client("stat_jobs", ids=[job_id])[job_id]["job_state"] == "E"
    (engine_root / "go").touch()
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 5 and attrs["comment"].endswith(" and failed")
    until(lambda: resv_id not in client("stat_resvs"), what="the reservation to go")
    assert queue not in client("stat_queues")


def test_a_qdel_of_an_array_lets_its_exiting_subjob_end(dists, make_engine, engine_root):
    # (as PBS lets an exiting subjob be at an array's or a range's qdel)
    engine = make_engine(waiting_end(dists, engine_root))
    array = engine.pbs("qsub", "-J", "1-2", input='[ "$PBS_ARRAY_INDEX" = 1 ] || sleep 60\n',
                       check=True).stdout.strip()
    first, second = (array.replace("[]", f"[{i}]") for i in (1, 2))
    _started(engine_root)
    client = Client(engine.home, timeout=20)
    assert client("stat_jobs", ids=[second])[second]["job_state"] == "R"
    assert [a.get("error") for a in client("delete", ids=[array])] == [None]
    assert engine.wait(second, "FX")["comment"].startswith("Job deleted at request of root@")
    assert client("stat_jobs", ids=[first])[first]["job_state"] == "E"
    (engine_root / "go").touch()
    attrs = engine.wait(first)
    assert (attrs["Exit_status"], attrs["substate"]) == (0, 92)
    engine.wait(array)


def _start_hooks(dists, root: Path) -> str:
    """A pbsuser execjob_prologue that holds a job named 'deleted' (writing `root`/prologue)
    until it is stopped; an admin execjob_begin that deletes a job named 'refused'."""
    return plugin(dists, "held", f"""
        import time

        @hookimpl
        def execjob_prologue(event):
            if event.job.Job_Name == "deleted":
                open({str(root / "prologue")!r}, "w").close()
                time.sleep(600)
        """, ("execjob_prologue",), user="pbsuser", alarm=600) + plugin(dists, "start", """
        @hookimpl
        def execjob_begin(event):
            if event.job.Job_Name == "refused":
                event.job.delete()
                event.reject("not on this host")
        """, ("execjob_begin",))


#: How a job ends without its processes ending: its name, its script, its Exit_status as
#: its end hooks see it and as it ends, and the start of its comment.
_ENDS = {
    "deleted at its start": ("deleted", "true\n", -1, -1, "Job deleted at request of root@"),
    "refused at its start": ("refused", "true\n", -1, -1,
                             "Job deleted by execjob_begin hook: not on this host"),
    "could not start": ("nostart", "true\n", -1, -1,
                        "Job could not start: [Errno 21] Is a directory: "),
    "lost": ("lost", "kill -9 $PPID; sleep 60\n", None, -4,
             "Job lost and not rerunnable: its shepherd (pid "),
}


def _end_without_processes(engine, client, root: Path, how: str) -> str:
    """A job that ends as `how` says, up to its pbsuser end hooks (`waiting_end`)."""
    name, script, *_ = _ENDS[how]
    job_id = engine.submit(script, Job_Name=name, Rerunable=False, Hold_Types="u")
    if how == "could not start":  # (the shepherd cannot be made: its note is a folder)
        (engine.home.jobs / f"{job_id.split('.')[0]}.note").mkdir()
    engine.pbs("qrls", job_id, check=True)
    if how == "deleted at its start":
        until((root / "prologue").exists, what="the prologue to start")
        assert [a.get("error") for a in client("delete", ids=[job_id])] == [None]
    _started(root)
    return job_id


@pytest.mark.parametrize("how", list(_ENDS))
def test_the_end_hooks_of_a_job_whose_processes_did_not_end_run_while_the_server_serves(
        how, dists, make_engine, engine_root):
    # Deleted or refused at its start, not started, lost: the job's pbsuser end hooks ran
    # in the server's loop, which answered no one (the qdel first) until they were over.
    engine = make_engine(waiting_end(dists, engine_root) + _start_hooks(dists, engine_root))
    client = Client(engine.home, timeout=20)  # (a hang guard: the hook's alarm is 600 s)
    job_id = _end_without_processes(engine, client, engine_root, how)
    attrs = client("stat_jobs", ids=[job_id])[job_id]
    assert (attrs["job_state"], attrs["substate"]) == ("E", 57)
    takes_a_job(engine, client)
    assert not (engine_root / "go").exists()  # the hook was still waiting
    (engine_root / "go").touch()
    _name, _script, seen, status, comment = _ENDS[how]
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == status and attrs["comment"].startswith(comment), attrs
    assert (engine_root / "seen").read_text() == f"execjob_epilogue {seen}\nexecjob_end {seen}\n"


@pytest.mark.parametrize("how", ["deleted at its start", "lost"])
def test_a_job_whose_processes_did_not_end_ends_again_after_a_restart_in_its_end_hooks(
        how, dists, make_engine, engine_root):
    # As a job whose processes ended (its status file): its end hooks run again from the
    # first, and it ends as it would have (not requeued as a job that never started).
    engine = make_engine(waiting_end(dists, engine_root) + _start_hooks(dists, engine_root))
    client = Client(engine.home, timeout=20)
    job_id = _end_without_processes(engine, client, engine_root, how)
    pid = int((engine_root / "started").read_text())
    assert client("stat_jobs", ids=[job_id])[job_id]["substate"] == 57  # (a guard)
    server_goes(engine, "stopped", pid)
    engine.start()
    (engine_root / "go").touch()
    _name, _script, seen, status, comment = _ENDS[how]
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == status and attrs["comment"].startswith(comment), attrs
    assert attrs["run_count"] == 1
    assert (engine_root / "seen").read_text() == (
        f"execjob_epilogue {seen}\nexecjob_epilogue {seen}\nexecjob_end {seen}\n")
    assert "job ended again after a server restart: its end hooks were running" in \
        engine.log()



@pytest.mark.parametrize("state", [("R", 41), ("E", 57)])
def test_a_job_whose_pbsuser_prologue_or_end_hooks_run_cannot_be_preempted(
        state, dists, make_engine, engine_root):
    # The engine's schedulers preempt nothing; what a preemption would do to a job (suspend
    # it, requeue it) is refused for a job with no processes to act on (15016), and the
    # job goes on as its hooks leave it.
    made = waiting_prologue if state == ("R", 41) else waiting_end
    engine = make_engine(made(dists, engine_root))
    job_id = engine.submit("echo ran\n", Job_Name="slow")
    started(engine_root)
    client = Client(engine.home, timeout=20)
    assert client("signal", ids=[job_id], signal="suspend")[0]["error"]["code"] == 15016
    with pytest.raises(PbsError) as refused:
        client("rerun", ids=[job_id], force=True)
    assert refused.value.code == 15016
    attrs = client("stat_jobs", ids=[job_id])[job_id]
    assert (attrs["job_state"], attrs["substate"]) == state
    (engine_root / "go").touch()
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 1)
    assert (engine.work / f"slow.o{job_id.split('.')[0]}").read_text() == "ran\n"


@pytest.mark.parametrize("how", ["ended", "lost"])
def test_a_forced_qdel_while_a_pbsuser_epilogue_runs_wins_over_a_requeue(
        how, dists, make_engine, engine_root):
    # A qdel -W force is answered and written (D) while the epilogue runs; neither a
    # job.rerun() the epilogue asks for after it nor the job's being lost (rerunnable)
    # requeues the job, as a qdel of a running job wins over both (`lifecycle.end_step`,
    # `_lost_over`): it ends, deleted, after one run.
    engine = make_engine(holding_plugin(dists, engine_root, """
        @hookimpl
        def execjob_epilogue(event):
            if hold_first():
                event.job.rerun()
        """, ("execjob_epilogue",)))
    mark = engine_root / "ran"  # (a second run, on the old code, ends at once)
    script = f"[ -e {mark} ] && exit 0\ntouch {mark}\n" + (
        "kill -9 $PPID; sleep 60\n" if how == "lost" else "exit 0\n")
    job_id = engine.submit(script, Job_Name="slow")
    started(engine_root)
    client = Client(engine.home, timeout=20)
    assert [a.get("error") for a in client("delete", ids=[job_id], force=True)] == [None]
    (engine_root / "go").touch()
    attrs = engine.wait(job_id)
    assert attrs["run_count"] == 1, attrs
    assert attrs["comment"].startswith("Job deleted at request of root@"), attrs
    records = accounting_records(engine)
    assert f";D;{job_id};" in records and f";R;{job_id};" not in records


def test_a_lost_job_ended_again_after_a_restart_is_swept_again(inprocess_engine, monkeypatch):
    # A lost job whose end hooks ran when the server stopped: the restart ended it again
    # without the sweep of what is left of it (`kill_session`) that a restart gives a job
    # whose shepherd is gone, so a process left of it ran on untracked.
    from pbsplug.engine import executor
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    eng = inprocess_engine
    job_id = eng.req_submit(Caller(0, ROLE_MANAGER), {"Rerunable": False}, "true\n")
    launch = {"shepherd": 1, "started": 0.0, "pgid": 1, "status_file": "/nonexistent",
              "tmpdir": "/nonexistent", "boot": "another boot"}
    with eng.store.transaction() as st:
        st.put_job(job_id, {**eng.store.job(job_id), "job_state": "E", "substate": 57})
        st.set_runtime(job_id, {"launch": launch, "ending": {"lost": "its shepherd ended"}})
    swept: list = []
    monkeypatch.setattr(executor, "kill_session", lambda launch, **kw: swept.append(launch)
                        or 0)
    eng._recover()
    eng._poll_ends_again()
    assert [(one.shepherd, one.boot) for one in swept] == [(1, "another boot")]
    attrs = eng.store.job(job_id)
    assert (attrs["job_state"], attrs["comment"]) == (
        "F", "Job lost and not rerunnable: its shepherd ended")
