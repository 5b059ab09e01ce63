"""What a hook's reject, exception or alarm does to the request, event by event, on a real
server (pbs-behavior.md §1.4): refuse, requeue, delete, or ignore; job.rerun() and
job.delete(); fail_action scheduler_restart_cycle."""

from __future__ import annotations

import time

import pytest

from pbsplug.engine.errors import PbsError

from .conftest import until
from .test_server import plugin

ALARM = "request rejected as filter hook 'slow' got an alarm call. Please inform Admin"


def slow_plugin(dists, events: tuple[str, ...], record) -> str:
    """A hook on every event in `events` that outruns its 1 s alarm when the job (or the
    reservation) is named after the event; execjob_abort writes to `record`."""
    impls = "".join(f"""
        @hookimpl
        def {name}(event):
            _slow(event, event.{'resv.Reserve_Name' if name == 'resvsub' else 'job.Job_Name'})
        """ for name in events)
    return plugin(dists, "slow", f"""
        import time

        def _slow(event, name):
            if name == event.type:
                time.sleep(10)  # the alarm stops this after 1 s

        @hookimpl
        def execjob_abort(event):
            open({str(record)!r}, "a").write(event.job.Job_Name + "\\n")
        {impls}""", events + ("execjob_abort",), alarm=1)


def test_an_alarm_in_a_server_event_refuses_deletes_or_is_ignored(dists, make_engine,
                                                                  engine_root):
    events = ("queuejob", "postqueuejob", "modifyjob", "movejob", "runjob", "jobobit",
              "resvsub")
    engine = make_engine(slow_plugin(dists, events, engine_root / "aborted"))
    engine.pbs("qmgr", "-c", "create queue other queue_type = Execution, enabled = True",
               check=True)

    # queuejob: the submission is refused, and nothing is queued
    with pytest.raises(PbsError) as err:
        engine.submit(Job_Name="queuejob")
    assert (err.value.code, err.value.message) == (15136, ALARM)
    assert engine.client("stat_jobs", history=True) == {}

    # postqueuejob: the job was queued already, so it is deleted
    job_id = engine.submit(Job_Name="postqueuejob")
    attrs = engine.wait(job_id)
    assert attrs["comment"] == f"Job deleted by postqueuejob hook: {ALARM}"
    assert "stime" not in attrs

    # modifyjob and movejob: the change is refused, the job is as it was
    for event, op, args in (("modifyjob", "alter", {"attrs": {"comment": "changed"}}),
                            ("movejob", "move", {"destination": "other"})):
        job_id = engine.submit(Job_Name=event, Hold_Types="u")
        if op == "alter":
            with pytest.raises(PbsError) as err:
                engine.client(op, id=job_id, **args)
            assert (err.value.code, err.value.message) == (15136, ALARM)
        else:
            assert engine.client(op, ids=[job_id], **args)[0]["error"]["message"] == ALARM
        attrs = engine.job(job_id)
        assert (attrs["queue"], attrs.get("comment")) == ("workq", None)
        engine.client("delete", ids=[job_id])

    # runjob: the job stays queued with PBS's comment
    job_id = engine.submit(Job_Name="runjob")
    until(lambda: engine.job(job_id).get("comment") == f"Not Running: PBS Error: {ALARM}",
          what="the runjob alarm")
    assert engine.job(job_id)["job_state"] == "Q"
    engine.client("delete", ids=[job_id])

    # jobobit: ignored, the job's record stands
    job_id = engine.submit("exit 3\n", Job_Name="jobobit")
    assert engine.wait(job_id)["Exit_status"] == 3
    until(lambda: "jobobit hook 'slow' got an alarm call" in engine.log(),
          what="the jobobit alarm in the log")

    # resvsub: pbs_rsub is refused
    now = int(time.time())
    with pytest.raises(PbsError) as err:
        engine.client("resv_submit", attrs={"reserve_start": now + 60, "reserve_end": now + 120,
                                            "Reserve_Name": "resvsub"})
    assert (err.value.code, err.value.message) == (15136, ALARM)
    assert engine.client("stat_resvs") == {}
    assert not (engine_root / "aborted").exists()


def test_an_alarm_in_a_host_event_requeues_deletes_refuses_or_is_ignored(dists, make_engine,
                                                                         engine_root):
    events = ("execjob_begin", "execjob_prologue", "execjob_launch", "execjob_preterm",
              "execjob_epilogue", "execjob_end")
    aborted = engine_root / "aborted"
    engine = make_engine(slow_plugin(dists, events, aborted))

    # execjob_begin and execjob_prologue: requeued, to be tried again. (A second try is
    # what shows it: the job is queued only between two tries, too briefly to be sure of
    # seeing it on a loaded machine; a deleted job is never tried again.)
    for event in ("execjob_begin", "execjob_prologue"):
        job_id = engine.submit(Job_Name=event)
        until(lambda job_id=job_id: engine.job(job_id)["run_count"] >= 2,
              what=f"the {event} requeue and a second try")
        assert f"{event} hook refused the job (alarm): {ALARM}" in engine.log()
        engine.client("delete", ids=[job_id])

    # execjob_launch: deleted, and execjob_abort runs
    job_id = engine.submit(Job_Name="execjob_launch")
    attrs = engine.wait(job_id)
    assert attrs["comment"] == f"Job deleted by execjob_launch hook: {ALARM}"
    assert aborted.read_text() == "execjob_launch\n"

    # execjob_preterm: the qdel is refused and the job keeps running
    job_id = engine.submit("sleep 30\n", Job_Name="execjob_preterm")
    engine.wait(job_id, "R")
    assert engine.client("delete", ids=[job_id])[0]["error"]["message"] == ALARM
    assert engine.job(job_id)["job_state"] == "R"
    engine.client("delete", ids=[job_id], force=True)
    engine.wait(job_id)

    # execjob_epilogue and execjob_end: ignored, the job ends as it would have
    for event in ("execjob_epilogue", "execjob_end"):
        job_id = engine.submit("exit 5\n", Job_Name=event)
        attrs = engine.wait(job_id)
        assert (attrs["Exit_status"], attrs["run_count"]) == (5, 1)
        assert attrs["comment"].endswith(" and failed")  # (PBS's, for an exit status not 0)
        assert f"{event} hook 'slow' got an alarm call" in engine.log()
    assert aborted.read_text() == "execjob_launch\n"  # no other start was aborted


@pytest.mark.parametrize("user", ["pbsadmin", "pbsuser"])
def test_prologue_reject_alarm_rerun_or_delete(user, dists, make_engine, engine_root):
    # (a pbsuser prologue runs while the server serves, the job R in substate 41: its
    # outcome does what an admin one's does)
    aborted = engine_root / "aborted"
    engine = make_engine(plugin(dists, "slow", f"""
        import time

        @hookimpl
        def execjob_prologue(event):
            name = event.job.Job_Name
            if name == "delete":
                event.job.delete()
            elif name == "rerun" and event.job.run_count == 1:
                event.job.rerun()
            elif name == "alarm" and event.job.run_count == 1:
                time.sleep(10)  # the alarm stops this after 1 s
            elif name == "raise" and event.job.run_count == 1:
                raise RuntimeError("broken")
            else:
                return
            event.reject("not on this host")

        @hookimpl
        def execjob_abort(event):
            open({str(aborted)!r}, "a").write(event.job.Job_Name + "\\n")
        """, ("execjob_prologue", "execjob_abort"), user=user, alarm=1))
    deleted = engine.submit(Job_Name="delete")
    attrs = engine.wait(deleted)
    assert attrs["comment"] == "Job deleted by execjob_prologue hook: not on this host"
    assert aborted.read_text() == "delete\n"  # a start that is deleted is aborted
    for name in ("rerun", "alarm", "raise"):  # requeued, even if not rerunnable, run again
        job_id = engine.submit("echo ran\n", Job_Name=name, Rerunable=False)
        attrs = engine.wait(job_id)
        assert (attrs["run_count"], attrs["Exit_status"]) == (2, 0)
    assert "Job requeued by execjob_prologue hook: not on this host" in engine.log()
    assert f"execjob_prologue hook refused the job (alarm): {ALARM}" in engine.log()
    assert "execjob_prologue hook refused the job (error): request rejected as filter hook " \
           "'slow' encountered an exception" in engine.log()
    assert aborted.read_text() == "delete\n"


def test_postqueuejob_reject_deletes_and_modifyjob_reject_refuses(dists, make_engine):
    engine = make_engine(plugin(dists, "gate", """
        @hookimpl
        def postqueuejob(event):
            if event.job.Job_Name == "late":
                event.reject("queued, but not wanted")

        @hookimpl
        def modifyjob(event):
            if event.job.Job_Name != event.job_o.Job_Name:
                event.reject("names are final")
        """, ("postqueuejob", "modifyjob")))
    late = engine.submit(Job_Name="late")  # qsub succeeds: the job was queued
    attrs = engine.wait(late)
    assert attrs["comment"] == "Job deleted by postqueuejob hook: queued, but not wanted"
    assert "exec_vnode" not in attrs
    kept = engine.submit(Job_Name="kept", Hold_Types="u")
    done = engine.pbs("qalter", "-N", "renamed", kept)
    assert (done.returncode, done.stderr) == (15136 % 256, f"qalter: names are final {kept}\n")
    assert engine.job(kept)["Job_Name"] == "kept"
    assert engine.pbs("qalter", "-l", "walltime=00:01:00", kept).returncode == 0
    assert engine.job(kept)["Resource_List"]["walltime"] == "00:01:00"


def test_modifyjob_fires_for_qalter_only(dists, make_engine):
    """OpenPBS 23.06 (checked with a modifyjob hook that logs each run) fires modifyjob for
    qalter, and for neither qhold nor qrls: a hook that refuses every change refuses
    qalter -h, and qhold and qrls pass it by."""  # (before: qhold refused with 15136)
    engine = make_engine(plugin(dists, "frozen", """
        @hookimpl
        def modifyjob(event):
            event.reject("no changes")
        """, ("modifyjob",)))
    job = engine.submit(Job_Name="frozen", Hold_Types="u")
    for command, holds in (("qhold", "ou"), ("qrls", "u")):
        done = engine.pbs(command, "-h", "o", job)
        assert (done.returncode, done.stderr) == (0, ""), command
        assert engine.job(job)["Hold_Types"] == holds
    done = engine.pbs("qalter", "-h", "n", job)
    assert (done.returncode, done.stderr) == (15136 % 256, f"qalter: no changes {job}\n")
    assert "modifyjob request rejected by 'frozen'" in engine.log()


@pytest.mark.parametrize("user", ["pbsadmin", "pbsuser"])
def test_epilogue_and_end_rejects_are_ignored_but_rerun_applies(user, dists, make_engine,
                                                                engine_root):
    # (pbsuser end hooks run while the server serves, the job E in substate 57: their
    # outcome does what admin ones' does)
    seen = engine_root / "seen"
    first = plugin(dists, "first", """
        import time

        @hookimpl
        def execjob_epilogue(event):
            name = event.job.Job_Name
            if name == "again" and event.job.run_count == 1:
                event.job.rerun()
            elif name == "alarm":
                time.sleep(10)  # the alarm stops this after 1 s
            elif name == "raise":
                raise RuntimeError("broken")
            event.reject("epilogue says no")
        """, ("execjob_epilogue",), order=1, user=user, alarm=1)
    second = plugin(dists, "second", f"""
        @hookimpl
        def execjob_epilogue(event):
            open({str(seen)!r}, "a").write("second epilogue\\n")

        @hookimpl
        def execjob_end(event):
            open({str(seen)!r}, "a").write(f"end {{event.job.Job_Name}}\\n")
            event.reject("end says no")
        """, ("execjob_epilogue", "execjob_end"), order=2, user=user)
    engine = make_engine(first + second)
    job_id = engine.submit("exit 2\n", Job_Name="once")
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (2, 1)  # the rejects changed nothing
    assert seen.read_text() == "end once\n"  # the reject skipped the later epilogue hook
    again = engine.submit("exit 0\n", Job_Name="again")
    attrs = engine.wait(again)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2)
    assert "Job requeued by execjob_epilogue hook" in engine.log()
    for name, said in (("alarm", "got an alarm call"), ("raise", "encountered an exception")):
        job_id = engine.submit("exit 3\n", Job_Name=name)
        attrs = engine.wait(job_id)  # ignored, the job ends as it would have
        assert (attrs["Exit_status"], attrs["run_count"]) == (3, 1)
        assert f"execjob_epilogue hook 'first' {said}" in engine.log()
    assert seen.read_text() == "end once\nend again\nend again\nend alarm\nend raise\n"


@pytest.mark.parametrize("restart", [True, False])
def test_scheduler_restart_cycle_drops_the_rest_of_the_cycle(dists, make_engine, engine_root,
                                                             restart):
    """A and B are both planned on n1 in one cycle; A's begin hook fails once and offlines
    n1. With scheduler_restart_cycle, B's stale decision is dropped and B runs on n2;
    without it the cycle goes on as planned, as PBS's scheduler does."""
    failed = engine_root / "failed"
    actions = ["offline_vnodes"] + (["scheduler_restart_cycle"] if restart else [])
    engine = make_engine(plugin(dists, "flaky", f"""
        import os

        @hookimpl
        def execjob_begin(event):
            if event.job.Job_Name == "A" and not os.path.exists({str(failed)!r}):
                open({str(failed)!r}, "w").close()
                raise RuntimeError("lost the fabric")
        """, ("execjob_begin",), fail_action=",".join(actions)))
    for name in engine.client("stat_nodes"):
        engine.client("node_state", names=[name], offline=True)
    engine.pbs("qmgr", "-c", "create node n1 resources_available.ncpus = 2", check=True)
    engine.pbs("qmgr", "-c", "create node n2 resources_available.ncpus = 2", check=True)
    a = engine.submit("sleep 1\n", Job_Name="A", Hold_Types="u")
    b = engine.submit("sleep 1\n", Job_Name="B", Hold_Types="u")
    engine.client("release", ids=[a, b])  # one request: one cycle plans both
    b_vnode = engine.wait(b)["exec_vnode"]
    assert engine.client("stat_nodes", names=["n1"])["n1"]["comment"] == (
        "offlined by hook 'flaky' due to hook error")
    assert engine.wait(a)["exec_vnode"] == "(n2:ncpus=1)"
    assert b_vnode == ("(n2:ncpus=1)" if restart else "(n1:ncpus=1)")
    assert ("scheduling cycle restarted by a hook: 1 run decisions dropped"
            in engine.log()) is restart


def test_an_end_hooks_rerun_yields_to_qdel(dists, make_engine):
    engine = make_engine(plugin(dists, "again", """
        @hookimpl
        def execjob_epilogue(event):
            event.job.rerun()
        """, ("execjob_epilogue",)))
    job_id = engine.submit("sleep 30\n")
    engine.wait(job_id, "R")
    engine.client("delete", ids=[job_id])
    attrs = engine.wait(job_id)
    assert attrs["run_count"] == 1 and attrs["comment"].startswith("Job deleted at request of")
