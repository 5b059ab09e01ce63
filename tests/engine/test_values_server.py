"""One set of rules for every value, on a real server (issue 17): raw requests, qsub, qalter,
qmgr and hooks' changes meet the same checks, with PBS's codes; a bad row already in the
database is set aside and the server comes up; a dependency that can never be met deletes
the job as PBS does."""

from __future__ import annotations

import json
import sqlite3
import time

import pytest

from pbsplug.engine.errors import PbsError

from .test_server import plugin


def refused(engine, op: str = "submit", **args) -> PbsError:
    with pytest.raises(PbsError) as err:
        engine.client(op, **args)
    return err.value


def submit_raw(engine, **attrs) -> PbsError:
    attrs.setdefault("Variable_List", {"PBS_O_WORKDIR": str(engine.work)})
    return refused(engine, attrs=attrs, script="true\n")


def test_the_defects_of_the_trial_are_refused_at_the_door(engine):
    """The issue's raw submit with Execution_Time "abc" is refused (it was stored, and the
    next cycle killed the server); so are bad walltimes, undefined resources, negative
    counts, read-only and unknown attributes, and names PBS would not take."""
    cases = {
        "Execution_Time": ("abc", 15014, "Illegal attribute or resource value Execution_Time"),
        "Resource_List": ({"walltime": "not-a-walltime"}, 15014,
                          "Illegal attribute or resource value Resource_List.walltime"),
    }
    for name, (value, code, text) in cases.items():
        err = submit_raw(engine, **{name: value})
        assert (err.code, err.message) == (code, text)
    err = submit_raw(engine, Resource_List={"nosuchres": 3})
    assert (err.code, err.message) == (15035, "Unknown resource Resource_List.nosuchres")
    err = submit_raw(engine, Resource_List={"select": "1:ncpus=1:nosuch=2"})
    assert err.code == 15035
    assert submit_raw(engine, Resource_List={"ncpus": -4}).code == 15014
    assert submit_raw(engine, Resource_List={"mem": "99999999999pb"}).code == 15014
    for name, value in (("job_state", "R"), ("euser", "root"), ("exec_vnode", "(x:ncpus=1)"),
                        ("Exit_status", 0), ("resources_used", {})):
        err = submit_raw(engine, **{name: value})
        assert (err.code, err.message) == (
            15003, f"Cannot set attribute, read only or insufficient permission {name}")
    assert submit_raw(engine, no_such_attribute=1).code == 15002
    assert submit_raw(engine, Job_Name="x" * 237).code == 15014
    assert submit_raw(engine, Job_Name="bad\x07name").code == 15014
    assert submit_raw(engine, Job_Name="\udc80").code == 15014
    assert submit_raw(engine, User_List="root").code == 15029
    assert submit_raw(engine, group_list="root").code == 15029
    err = refused(engine, attrs={}, script=5)  # a request's arguments have their types
    assert (err.code, err.message) == (15004, "Invalid request: argument script is not "
                                              "str | None")
    assert refused(engine, attrs=["Job_Name"]).code == 15004
    assert refused(engine, "delete", ids="0").code == 15004
    assert refused(engine, attrs={}, argv=["a\0b"]).code == 15014
    assert engine.client("stat_jobs", history=True) == {}

    # Job_Owner is the server's to set: what a client sends is ignored, as PBS does.
    job_id = engine.submit(Job_Owner="root@elsewhere")
    assert engine.job(job_id)["Job_Owner"] != "root@elsewhere"
    assert engine.wait(job_id)["Exit_status"] == 0


def test_qsub_refuses_an_undefined_resource_and_takes_a_custom_one(engine):
    done = engine.pbs("qsub", "-l", "nosuchres=3", "--", "/bin/true")
    assert done.stderr.strip() == "qsub: Unknown resource Resource_List.nosuchres"
    assert done.returncode == 15035 % 256
    engine.pbs("qmgr", "-c", "create resource nosuchres type = long", check=True)
    job_id = engine.pbs("qsub", "-l", "nosuchres=3", "--", "/bin/true",
                        check=True).stdout.strip()
    assert engine.job(job_id)["Resource_List"]["nosuchres"] == 3
    bad = engine.pbs("qsub", "-l", "nosuchres=three", "--", "/bin/true")
    assert bad.stderr.strip() == "qsub: Illegal attribute or resource value " \
                                 "Resource_List.nosuchres"


def test_qalter_meets_the_same_rules(engine):
    job_id = engine.submit(Hold_Types="u")
    assert refused(engine, "alter", id=job_id, attrs={"euser": "root"}).code == 15003
    assert refused(engine, "alter", id=job_id, attrs={"Execution_Time": "abc"}).code == 15014
    assert refused(engine, "alter", id=job_id,
                   attrs={"Resource_List": {"walltime": "soon"}}).code == 15014
    engine.client("alter", id=job_id, attrs={"Resource_List": {"walltime": 90}})
    assert engine.job(job_id)["Resource_List"]["walltime"] == "00:01:30"


#: What a user may not alter of their own job, one row per kind of refusal, as OpenPBS
#: 23.06 answers a user's qalter (checked): (attributes, the stored value they would
#: change, PBS's code).
USERS_REFUSED = [
    pytest.param({"run_count": 0}, ("run_count", 3), 15007, id="lowering run_count"),
    pytest.param({"run_count": None}, ("run_count", 3), 15007, id="unsetting run_count"),
    pytest.param({"comment": "mine"}, ("comment", None), 15003, id="operators-comment"),
    pytest.param({"job_state": "Q"}, ("job_state", "H"), 15003, id="the-servers-own"),
    pytest.param({"Hold_Types": "us"}, ("Hold_Types", "u"), 15007, id="a-managers-hold"),
]


@pytest.mark.parametrize(("attrs", "kept", "code"), USERS_REFUSED)
def test_a_user_may_not_alter_what_pbs_keeps_from_users(engine_here, attrs, kept, code):
    """A raw alter of {"run_count": 0} let a user's job dodge the hold after 20 failed
    starts: a user may raise run_count (or set it as it is), never lower it; an operator
    may. Each other kind of attribute a user may not set is refused as PBS refuses it,
    and nothing of the job changes."""
    from pbsplug.engine.server import ROLE_OPERATOR, ROLE_USER, Caller

    eng = engine_here()
    owner = Caller(1001, ROLE_USER)
    job_id = eng.req_submit(owner, {"Hold_Types": "u"}, "true\n")
    with eng.store.transaction() as st:  # (as after three starts)
        st.put_job(job_id, {**eng.store.job(job_id), "run_count": 3})
    before = eng.store.job(job_id)
    assert before.get(kept[0]) == kept[1]
    with pytest.raises(PbsError) as refused:
        eng.req_alter(owner, job_id, attrs)
    assert refused.value.code == code
    assert eng.store.job(job_id) == before
    if "run_count" in attrs:
        eng.req_alter(owner, job_id, {"run_count": 3})  # as it is
        eng.req_alter(owner, job_id, {"run_count": 5})  # raised
        eng.req_alter(Caller(1001, ROLE_OPERATOR), job_id, attrs)  # an operator lowers it
        assert eng.store.job(job_id).get("run_count", 0) == 0


def test_a_hook_setting_a_bad_value_is_that_hooks_exception(dists, make_engine):
    """The issue's queuejob hook that sets walltime = "not-a-walltime": the assignment raises
    in the hook, the submission is refused with PBS's text, nothing is stored, and the
    server goes on. A mapping changed in place (no setter) is a write too, checked when the
    hook ends: a bad value there is the hook's exception as well."""
    engine = make_engine(plugin(dists, "badvalue", """
        @hookimpl
        def queuejob(event):
            job = event.job
            if job.Job_Name == "walltime":
                job.Resource_List["walltime"] = "not-a-walltime"
            elif job.Job_Name == "attr":
                job.Execution_Time = "abc"
            elif job.Job_Name == "inplace":
                job.Variable_List["BAD"] = 5
            elif job.Job_Name == "good":
                job.Resource_List["walltime"] = 120
        """, ("queuejob",)))
    for name in ("walltime", "attr", "inplace"):
        with pytest.raises(PbsError) as err:
            engine.submit(Job_Name=name)
        assert (err.value.code, err.value.message) == (
            15136, "request rejected as filter hook 'badvalue' encountered an exception. "
                   "Please inform Admin")
    assert engine.client("stat_jobs", history=True) == {}
    good = engine.submit(Job_Name="good")
    assert engine.job(good)["Resource_List"]["walltime"] == "00:02:00"
    assert engine.wait(good)["Exit_status"] == 0
    assert "queuejob hook 'badvalue' encountered an exception" in engine.log()


def test_a_hooks_attribute_name_pbs_would_not_take_is_its_error(dists, make_engine):
    """A queuejob hook's ``setattr(job, "a b\\nc", 1)`` was stored with the job (an
    unknown name passed as a plugin's own): now the hook's exception, the submission
    refused, nothing stored. A plugin's own well-formed name is still kept; a client's
    unknown name or resource is refused at the door as before."""
    engine = make_engine(plugin(dists, "badname", """
        @hookimpl
        def queuejob(event):
            if event.job.Job_Name == "bad":
                setattr(event.job, "a b\\nc", 1)
            else:
                event.job.site_tag = "kept"
        """, ("queuejob",)))
    with pytest.raises(PbsError) as err:
        engine.submit(Job_Name="bad")
    assert (err.value.code, err.value.message) == (
        15136, "request rejected as filter hook 'badname' encountered an exception. "
               "Please inform Admin")
    assert engine.client("stat_jobs", history=True) == {}
    assert "'a b\\nc': not a job attribute name" in engine.log()
    good = engine.submit(Job_Name="good")
    assert engine.job(good)["site_tag"] == "kept"
    assert submit_raw(engine, **{"a b\nc": 1}).code == 15002
    err = submit_raw(engine, Resource_List={"a b\nc": 1})
    assert (err.code, err.message) == (15035, "Unknown resource Resource_List.'a b\\nc'")


def write_row(engine, table: str, key: str, name: str, change) -> None:
    db = sqlite3.connect(engine.home.db)
    try:
        column = "id" if table == "jobs" else "name"
        where = f"{column}=?" + ("" if table == "jobs" else " AND type='node'")
        attrs = json.loads(db.execute(f"SELECT attrs FROM {table} WHERE {where}",
                                      (name,)).fetchone()[0])
        change(attrs)
        db.execute(f"UPDATE {table} SET attrs=? WHERE {where}", (json.dumps(attrs), name))
        if table == "jobs":  # the column the scheduler's query reads
            db.execute("UPDATE jobs SET state=? WHERE id=?", (attrs["job_state"], name))
        db.commit()
    finally:
        db.close()


def test_a_bad_row_in_the_database_is_set_aside_and_the_server_comes_up(engine):
    """What an older version or a bug left in server.db: a queued job whose Execution_Time
    is "abc" and a vnode whose ncpus is "lots". The server starts, holds the job with a
    comment, offlines the vnode with a comment, logs both, and schedules the rest."""
    engine.pbs("qmgr", "-c", "create node spare resources_available.ncpus = 1", check=True)
    bad = engine.submit(Hold_Types="u")
    good = engine.submit(Hold_Types="u")
    engine.stop()
    write_row(engine, "jobs", "id", bad, lambda a: a.update(Execution_Time="abc",
                                                            Hold_Types="n", job_state="Q"))
    write_row(engine, "objects", "name", "spare",
              lambda a: a["resources_available"].update(ncpus="lots"))
    engine.start()
    held = engine.job(bad)
    assert (held["job_state"], held["Hold_Types"]) == ("H", "s")
    assert "Execution_Time" not in held
    assert held["comment"].startswith("job held, bad attribute value set aside: "
                                      "Execution_Time: 'abc'")
    spare = engine.nodes()["spare"]
    assert "offline" in spare["state"]
    assert "resources_available.ncpus" in spare["comment"]
    assert "ncpus" not in spare["resources_available"]
    assert "set aside: a stored value the server cannot use" in engine.log()
    engine.client("release", ids=[good])
    assert engine.wait(good)["Exit_status"] == 0
    assert engine.client("status")["server"]


def test_afterok_on_a_job_that_failed(engine):
    """PBS's rule: a dependency on a finished job that did not satisfy it deletes the new job
    at once (qsub prints its id, as PBS registers after queueing); one that fails later
    deletes the waiting job with PBS's message."""
    failed = engine.submit("exit 1\n")
    engine.wait(failed)
    job_id = engine.submit(depend=f"afterok:{failed}")
    gone = engine.wait(job_id)
    assert gone["comment"] == f"{failed} Finished job did not satisfy dependency"
    assert "Exit_status" not in gone

    ok = engine.submit("true\n")
    engine.wait(ok)
    after_ok = engine.submit(depend=f"afterok:{ok}")  # satisfied: it runs
    assert engine.wait(after_ok)["Exit_status"] == 0

    later = engine.submit("sleep 1; exit 2\n")
    waiting = engine.submit(depend=f"afterok:{later}")
    assert engine.job(waiting)["job_state"] == "H"
    assert engine.wait(waiting)["comment"] == f"Job deleted as result of dependency on job " \
                                              f"{later}"


def qmgr(engine, command: str):
    return engine.pbs("qmgr", "-c", command)


def test_qmgr_applies_a_command_whole_or_not_at_all(engine):
    """One command over several objects: a refusal for the last leaves the first as they
    were (it used to create n1 and then report n2's error)."""
    assert qmgr(engine, "create node n2").returncode == 0
    done = qmgr(engine, "create node n1,n2 resources_available.ncpus = 2")
    assert "Error (15066)" in done.stderr
    assert "n1" not in engine.nodes()
    done = qmgr(engine, "set server default_queue = nosuch")
    assert "Error (15018)" in done.stderr
    assert "Unknown queue" in done.stderr
    assert engine.client("stat_server")[engine.client("status")["server"]][
        "default_queue"] == "workq"
    assert qmgr(engine, "create queue q2 queue_type = Execution").returncode == 0
    assert qmgr(engine, "set server default_queue = q2").returncode == 0


def test_qmgr_names_have_pbs_lengths_and_characters(engine):
    done = qmgr(engine, "create queue q234567890123456 queue_type = Execution")
    assert "Error (15028)" in done.stderr and "Queue name too long" in done.stderr
    assert qmgr(engine, "create queue q23456789012345 queue_type = Execution").returncode == 0
    done = qmgr(engine, "create node " + "n" * 256)
    assert "Error (15065)" in done.stderr
    done = qmgr(engine, "create queue q.x queue_type = Execution")
    assert "Invalid object name" in done.stderr and "Error (15014)" in done.stderr
    assert "q.x" not in engine.client("stat_queues")
    done = qmgr(engine, "set node " + next(iter(engine.nodes())) +
                " resources_available.ncpus = -2")
    assert "Error (15014)" in done.stderr


def test_pbs_rsub_meets_the_same_rules(engine):
    now = int(time.time())
    base = {"reserve_start": now + 3600, "reserve_end": now + 7200}
    err = refused(engine, "resv_submit", attrs={**base, "Resource_List": {"nosuch": 1}})
    assert (err.code, err.message) == (15035, "Unknown resource Resource_List.nosuch")
    err = refused(engine, "resv_submit", attrs={**base, "Reserve_Name": "a\nb"})
    assert err.code == 15014
    err = refused(engine, "resv_submit", attrs={**base, "reserve_end": 10**20})
    assert (err.code, err.message) == (15086, "Bad time specification(s)")
    assert engine.client("stat_resvs") == {}
    ok = engine.client("resv_submit", attrs={**base, "Reserve_Name": "fine"})
    assert ok["state"] == "UNCONFIRMED"


def test_qsub_S_chooses_the_shell_that_runs_the_script(engine):
    """-S is honoured, not ignored: the script runs under the shell it names."""
    script = engine.work / "which.py"
    script.write_text("import sys\nprint('run by python', sys.version_info[0])\n")
    job_id = engine.pbs("qsub", "-S", "/usr/bin/python3,/bin/false@elsewhere", "-N", "shell",
                        str(script), check=True).stdout.strip()
    engine.wait(job_id)
    out = (engine.work / f"shell.o{job_id.split('.')[0]}").read_text().strip()
    assert out == "run by python 3"


def test_a_cycle_that_meets_a_bad_row_sets_it_aside_and_goes_on(engine):
    """The same bad job written while the server runs: the next cycle fails on it, logs
    that, sets it aside and runs again; the server answers and other jobs run."""
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    bad = engine.submit(Hold_Types="u")
    good = engine.submit()
    write_row(engine, "jobs", "id", bad, lambda a: a.update(
        Execution_Time="abc", Hold_Types="n", job_state="Q"))
    engine.pbs("qmgr", "-c", "set server scheduling = true", check=True)
    assert engine.wait(good)["Exit_status"] == 0
    held = engine.job(bad)
    assert (held["job_state"], held["Hold_Types"]) == ("H", "s")
    assert "Execution_Time" not in held
    log = engine.log()
    assert "scheduling cycle failed: ValueError" in log
    assert "set aside: a stored value the server cannot use" in log
    assert engine.client("status")["server"]


def test_pbs_rsub_and_pbsnodes_refuse_what_they_do_not_know(engine):
    now = int(time.time())
    err = refused(engine, "resv_submit", attrs={"reserve_start": now + 60,
                                                "reserve_end": now + 120, "resv_nodes": "x"})
    assert (err.code, err.message) == (15002, "Undefined attribute resv_nodes")
    node = next(iter(engine.nodes()))
    err = refused(engine, "node_state", names=[node], comment={"not": "text"})
    assert err.code == 15004
    err = refused(engine, "node_state", names=[node], comment="bell\x07")
    assert err.code == 15014
    engine.client("node_state", names=[node], comment="checked\tby hand")
    assert engine.nodes()[node]["comment"] == "checked\tby hand"


def test_a_reservation_the_server_cannot_read_ends_and_the_server_comes_up(engine):
    now = int(time.time())
    resv = engine.client("resv_submit", attrs={"reserve_start": now + 3600,
                                               "reserve_end": now + 7200})["id"]
    keep = engine.client("resv_submit", attrs={"reserve_start": now + 3600,
                                               "reserve_end": now + 7200})["id"]
    engine.stop()
    db = sqlite3.connect(engine.home.db)
    try:
        attrs = json.loads(db.execute("SELECT attrs FROM objects WHERE type='resv' AND "
                                      "name=?", (resv,)).fetchone()[0])
        attrs["reserve_start"] = "abc"
        db.execute("UPDATE objects SET attrs=? WHERE type='resv' AND name=?",
                   (json.dumps(attrs), resv))
        db.commit()
    finally:
        db.close()
    engine.start()
    assert set(engine.client("stat_resvs")) == {keep}
    log = engine.log()
    assert f"{resv}" in log and "set aside: a stored value the server cannot use: " \
                                "reserve_start" in log
