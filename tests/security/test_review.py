"""Issue 17's hostile review: the attacks and bad data a second reader found in the merged
engine, each failing before its fix. Made as the unprivileged `attacker` where it is an
attack. Each docstring says what the engine did before."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from pbsplug.testing import until

from .conftest import qsub, root_process_with_pid


def test_attached_pid_reused_by_root_is_not_killed_by_the_server(engine, attacker):
    """pbs_attach records a bare pid; at the job's end (or qdel, walltime) the root server
    SIGKILLs every recorded pid without checking it is still the attached process. The
    attacker attaches a process of its own, lets it exit, and whatever process later gets
    that pid (root's, another user's) is killed by root when the job ends."""
    job_id = qsub(attacker, engine, "--", "/bin/sleep", "300")
    until(lambda: engine.job(job_id)["job_state"] == "R", what="the job to run")
    code = ("import os, subprocess, sys, json\n"
            "from pbsplug.engine.client import Client\n"
            "from pbsplug.engine.home import Home\n"
            "from pathlib import Path\n"
            "p = subprocess.Popen(['sleep', '1000'], stdout=subprocess.DEVNULL,\n"
            "                     stderr=subprocess.DEVNULL)\n"
            "Client(Home(Path(os.environ['PBSPLUG_HOME'])))('attach', id=sys.argv[1], pid=p.pid)\n"
            "p.kill(); p.wait()\n"
            "print(p.pid)\n")
    done = attacker.python(code, job_id, home=engine)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split()[-1])
    victim = root_process_with_pid(pid)
    try:
        done = attacker.pbs(engine, "qdel", job_id)
        assert done.returncode == 0, done.stderr
        engine.wait(job_id)
        time.sleep(0.5)
        assert victim.poll() is None, "root's process that reused the attached pid was killed"
    finally:
        victim.kill()
        victim.wait()


def test_a_select_with_a_huge_chunk_count_is_refused(engine, attacker):
    """A select of 5*10**7 chunks was accepted (the bound was 2**31) and every scheduling
    cycle expanded it into a list of that many chunks, holding the one-threaded server. Now
    a select of more than `values.MAX_CHUNKS` chunks in all is refused at submission."""
    from pbsplug.values import MAX_CHUNKS

    for spec in ("select=50000000:ncpus=1", f"select={MAX_CHUNKS}:ncpus=1+1:ncpus=1"):
        done = attacker.pbs(engine, "qsub", "-l", spec, "--", "/bin/true", cwd=engine.work)
        assert done.returncode != 0
        assert "Illegal attribute or resource value Resource_List.select" in done.stderr
    assert engine.pbs("qstat").returncode == 0
    assert qsub(attacker, engine, "-l", f"select={MAX_CHUNKS}:ncpus=1", "--", "/bin/true")


def test_a_select_value_with_a_space_is_refused_not_run_with_no_cpus(engine, attacker):
    """``select=1:ncpus= 2`` passed the value check (which reads around spaces) and was kept
    as written; the scheduler could not read ' 2' as a count, so the job ran holding no
    cpus and a user could fill a vnode past its cpus. Refused now, as OpenPBS 23.06 refuses
    it (``qsub: Illegal attribute or resource value Resource_List.select``)."""
    for spec in ("1:ncpus= 2", "1:mem= 4gb", "2:ncpus=1:mem=\t1gb"):
        done = attacker.pbs(engine, "qsub", "-l", f"select={spec}", "--", "/bin/true",
                            cwd=engine.work)
        assert done.returncode != 0, spec
        raw = engine.as_user(attacker.user, "submit", attrs={  # past qsub's own reading
            "Resource_List": {"select": spec},
            "Variable_List": {"PBS_O_WORKDIR": str(engine.work)}}, argv=["/bin/true"])
        assert raw["error"]["code"] == 15014, raw
        assert "Resource_List.select" in raw["error"]["message"], raw
    assert not engine.client("stat_jobs")


@pytest.mark.parametrize("sql", [
    "UPDATE jobs SET attrs='{not json' WHERE seq=0",
    "UPDATE objects SET attrs='not json' WHERE type='node'",
    "UPDATE jobs SET state='R', attrs=json_set(attrs,'$.job_state','R'), "
    "runtime='{\"launch\": {\"x\": 1}}' WHERE seq=0",
    "UPDATE jobs SET state='R', attrs=json_set(attrs,'$.job_state','R'), runtime='zz' "
    "WHERE seq=0",
], ids=["job-attrs-not-json", "vnode-attrs-not-json", "runtime-bad-launch",
        "runtime-not-json"])
def test_the_server_starts_on_a_database_with_an_unreadable_row(engine, sql):
    """set_aside handles a row that is JSON of the wrong shape, but a row that is not JSON
    at all (Store.jobs/all json.loads), or a running job's runtime that is not a launch
    (Engine._recover: ``executor.Launch(**runtime["launch"])``), stops `server start`:
    "the server did not start: JSONDecodeError/TypeError", on every restart."""
    import sqlite3

    engine.submit("sleep 100\n", Hold_Types="u")
    other = engine.submit("sleep 100\n", Hold_Types="u")
    engine.stop()
    with sqlite3.connect(engine.home.db) as db:
        db.execute(sql)
    started = engine.pbs("server", "start")
    assert started.returncode == 0, started.stderr
    assert engine.pbs("qstat").returncode == 0
    assert engine.pbs("qstat", other).returncode == 0


ALTER = ("import json, os, sys\n"
         "from pathlib import Path\n"
         "from pbsplug.engine.client import Client\n"
         "from pbsplug.engine.home import Home\n"
         "try:\n"
         "    print(json.dumps(Client(Home(Path(os.environ['PBSPLUG_HOME'])))(\n"
         "        'alter', id=sys.argv[1], attrs=json.loads(sys.argv[2]))))\n"
         "except Exception as exc:\n"
         "    print('refused', type(exc).__name__, exc)\n")


def test_qalter_queue_cannot_enter_another_users_reservation(engine, attacker):
    """qmove checks a reservation queue's Authorized_Users (Reservations.may_submit), and
    qsub does; but `queue` is a user-settable job attribute (values.JOB_ATTRIBUTES) and
    req_alter stores it with no check at all: the attacker's job moves into root's
    running reservation's queue and runs on its vnodes."""
    resv = engine.client("resv_submit", attrs={"reserve_duration": 600,
                                               "Resource_List": {"select": "1:ncpus=1"}})
    resv_id = resv["id"]
    queue = until(lambda: engine.client("stat_resvs", ids=[resv_id])[resv_id].get("queue"),
                  what="the reservation's queue")
    assert attacker.pbs(engine, "qsub", "-q", queue, "--", "/bin/true",
                        cwd=engine.work).returncode != 0  # qsub refuses, as PBS does
    job_id = qsub(attacker, engine, "-h", "--", "/bin/sleep", "30")
    done = attacker.python(ALTER, job_id, json.dumps({"queue": queue}), home=engine)
    assert done.stdout.startswith("refused"), done.stdout + done.stderr
    assert engine.job(job_id)["queue"] == "workq"


def test_qalter_queue_cannot_name_a_queue_that_does_not_exist(engine, attacker):
    """The same unchecked `queue` in qalter: a queue that does not exist is stored (qmove
    says Unknown queue, 15018)."""
    job_id = qsub(attacker, engine, "-h", "--", "/bin/true")
    done = attacker.python(ALTER, job_id, json.dumps({"queue": "nosuchqueue"}), home=engine)
    assert done.stdout.startswith("refused"), done.stdout + done.stderr
    assert engine.job(job_id)["queue"] == "workq"
    assert engine.pbs("qstat").returncode == 0


@pytest.mark.parametrize("workdir", ["relative/dir", "/tmp/a\nb"], ids=["relative", "newline"])
def test_default_output_path_from_a_bad_workdir_is_never_stored(engine, workdir):
    """Output_Path/Error_Path must be host:/absolute/path without control characters
    (values._path), but req_submit makes the defaults from the request's
    Variable_List.PBS_O_WORKDIR after the checks (server.py, ``attrs.setdefault(
    "Output_Path", ...)``), and Variable_List values are not checked for either: a raw
    submit stores an Output_Path the rules refuse ("nothing invalid is ever stored"); a
    relative one is opened relative to whatever the server's cwd is."""
    from pbsplug.engine.errors import PbsError

    with pytest.raises(PbsError) as err:
        engine.client("submit", attrs={"Hold_Types": "u", "Variable_List": {
            "PBS_O_WORKDIR": workdir}}, script="true\n")
    assert err.value.code == 15014 and "Variable_List.PBS_O_WORKDIR" in err.value.message
    assert engine.client("stat_jobs", history=True) == {}


def test_a_select_of_2_billion_chunks_is_refused_and_scheduling_goes_on(engine, attacker):
    """`select=2147483648:ncpus=1` got the root server OOM-killed (each cycle built a list of
    2**31 chunks), and the stored job killed every restart. Refused now, from a raw request
    too; a bystander's job runs."""
    done = attacker.pbs(engine, "qsub", "-l", "select=2147483648:ncpus=1", "--", "/bin/true",
                        cwd=engine.work)
    assert done.returncode != 0 and "Resource_List.select" in done.stderr, done.stderr
    raw = engine.as_user(attacker.user, "submit", attrs={
        "Resource_List": {"select": "2147483648:ncpus=1"},
        "Variable_List": {"PBS_O_WORKDIR": str(engine.work)}}, argv=["/bin/true"])
    assert raw["error"]["code"] == 15014, raw
    other = engine.submit("true\n", Job_Name="bystander")
    assert engine.wait(other, timeout=20)["Exit_status"] == 0


FLOAT_DIGITS = """
import json, os, sys
from pathlib import Path
from pbsplug.engine.client import Client
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home
c = Client(Home(Path(os.environ['PBSPLUG_HOME'])))
digits = '1' * 100_000 + 'x'
codes = []
for op, args in (('submit', {'attrs': {'Resource_List': {'energy': digits},
                                       'Variable_List': {'PBS_O_WORKDIR': sys.argv[1]}},
                             'argv': ['/bin/true']}),
                 ('select', {'criteria': [['Resource_List.energy', 'eq', digits]]})):
    try:
        c(op, **args)
        codes.append(None)
    except PbsError as err:
        codes.append([err.code, err.message[:60]])
print(json.dumps(codes))
"""


def test_a_float_resource_of_many_digits_is_refused_at_once(engine, attacker):
    """A float resource's value (`energy`, or a site's float) was checked with a pattern
    that tried every split of a run of digits: 100,000 digits and a letter, in one raw qsub
    or qselect, held the one-threaded server for ten minutes (8 MiB of them, for good).
    Refused at once now; a bystander's job runs."""
    done = attacker.python(FLOAT_DIGITS, str(engine.work), home=engine, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    submitted, selected = json.loads(done.stdout)
    assert submitted[0] == selected[0] == 15014, (submitted, selected)
    assert "Resource_List.energy" in submitted[1]
    other = engine.submit("true\n", Job_Name="bystander")
    assert engine.wait(other, timeout=20)["Exit_status"] == 0


def test_qalter_depend_is_checked_and_honoured(engine, attacker):
    """`depend` is a user-settable attribute, checked and held for at qsub
    (Engine._check_depend) but stored as it comes by qalter (req_alter -> _modify): an
    afterok on a job still running is ignored (the job runs at once), and a dependency on
    a job that does not exist, or a before: on another user's job, is stored."""
    first = qsub(attacker, engine, "--", "/bin/sleep", "30")
    until(lambda: engine.job(first)["job_state"] == "R", what="the first job to run")
    second = qsub(attacker, engine, "-h", "--", "/bin/true")
    root_job = engine.submit("sleep 30\n", Hold_Types="u", depend="on:1")  # (a before: target)
    done = attacker.python(ALTER, second, json.dumps({"depend": "afterok:999999.nosuch"}),
                           home=engine)
    assert done.stdout.startswith("refused"), "a dependency on an unknown job was stored"
    done = attacker.python(ALTER, second, json.dumps({"depend": f"before:{root_job}"}),
                           home=engine)
    assert done.stdout.startswith("refused"), "before: on root's job was stored"
    done = attacker.python(ALTER, second, json.dumps({"depend": f"afterok:{first}"}),
                           home=engine)
    assert attacker.pbs(engine, "qrls", second).returncode == 0
    time.sleep(2)
    assert engine.job(second)["job_state"] in ("H", "Q"), "ran before its afterok was met"


def test_qalter_hold_types_cannot_release_system_or_operator_holds(engine, attacker):
    """qrls refuses a user's release of an `o` or `s` hold, but req_alter lets a user set
    Hold_Types to "n" (or "u") on its own held job, checking only what is added, not what
    is removed: the operator's hold and the dependency's system hold are gone and the job
    runs. PBS: only an operator/manager releases `o`, only a manager `s`."""
    running = qsub(attacker, engine, "--", "/bin/sleep", "30")
    until(lambda: engine.job(running)["job_state"] == "R", what="the first job to run")
    waits = qsub(attacker, engine, "-W", f"depend=afterok:{running}", "--", "/bin/true")
    assert engine.job(waits)["Hold_Types"] == "s"
    opheld = qsub(attacker, engine, "-h", "--", "/bin/true")
    engine.client("hold", ids=[opheld], types="o")
    assert attacker.pbs(engine, "qrls", "-h", "o", opheld).returncode != 0
    for job_id in (waits, opheld):
        done = attacker.python(ALTER, job_id, json.dumps({"Hold_Types": "n"}), home=engine)
        assert done.stdout.startswith("refused"), f"{job_id}: hold released by its owner"


STUCK = """
import signal
import time

import pbsplug.runner as runner
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("queuejob",), alarm=2)


@hookimpl
def queuejob(event):
    # What the hook leaves behind blocks its process after the hook's own report: here
    # made deterministic by wrapping the report function (a thread left holding the GIL
    # in C, or a lock the runner takes, does the same by chance).
    send = runner._send

    def stuck(fd, message):
        if message[0] == "end":
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGTERM})
            while True:
                time.sleep(1)
        return send(fd, message)

    runner._send = stuck
"""


def test_a_hook_process_stuck_after_its_report_does_not_hang_the_server(dists,
                                                                       local_engine):
    """Runner._collect only has a deadline between a hook's "start" and its "done"; after
    the last "done" it waits for "end" or the child's exit with no deadline at all
    (``deadline is None`` -> ``continue`` forever): a forked hook process that stays
    alive after reporting holds the one-threaded server for good (qstat, job ends, server
    stop)."""
    dists.add("stuck", STUCK)
    engine = local_engine("[plugins.stuck]\nenabled = true\n", env=dists.env())
    from pbsplug.engine.testing import PBSPLUG

    pid = engine.home.server_pid()
    job = subprocess.Popen([PBSPLUG, "qsub", "--", "/bin/true"], env=engine.env(),
                           cwd=engine.work, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        job.wait(timeout=15)
    except subprocess.TimeoutExpired:
        pass
    done = subprocess.run(["timeout", "20", PBSPLUG, "qstat"], env=engine.env(),
                          capture_output=True, text=True)
    job.kill()
    assert engine.home.server_pid() == pid
    assert done.returncode == 0, f"qstat: rc {done.returncode} (124: no answer in 20 s)"


def _processes(user: str, marker: str) -> list[str]:
    done = subprocess.run(["pgrep", "-u", user, "-f", marker], capture_output=True, text=True)
    return done.stdout.split()


def test_qrls_of_a_running_or_finished_job_does_not_run_it_again(engine, attacker):
    """req_release sets job_state "Q" whenever no hold is left, whatever the state: the
    owner's `qrls` of its running job queues it again and the scheduler starts a second
    copy while the first still runs (run_count 2; the first copy's launch is overwritten,
    so it is no longer tracked by qdel or walltime), and `qrls` of a finished job runs it
    again. Repeated, a user runs any number of copies past the scheduler's limits. PBS:
    qrls of a job without holds changes nothing (and a finished job is history)."""
    marker = "3141592"
    running = qsub(attacker, engine, "--", "/bin/sleep", marker)
    try:  # (whatever fails, the copies this test started are killed: a later run counts them)
        until(lambda: engine.job(running)["job_state"] == "R", what="the job to run")
        finished = qsub(attacker, engine, "--", "/bin/true")
        engine.wait(finished)
        # (qrls of a finished job is PBS's 15139 `Job has finished`, OpenPBS 23.06 checked)
        assert attacker.pbs(engine, "qrls", running).returncode == 0
        assert attacker.pbs(engine, "qrls", finished).returncode == 15139 % 256
        time.sleep(2)
        assert engine.job(finished)["run_count"] == 1, "the finished job ran again"
        assert engine.job(running)["run_count"] == 1, "the running job was started again"
        assert len(_processes(attacker.user, marker)) == 1
    finally:
        for pid in _processes(attacker.user, marker):  # the copies this test started
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_job_with_a_future_execution_time_is_waiting(engine):
    """PBS puts a job whose Execution_Time (qsub -a) is in the future in state W; the
    engine never sets W (it stays Q, and only the scheduler skips it)."""
    job_id = engine.submit("true\n", Execution_Time=int(time.time()) + 3600)
    time.sleep(0.5)
    assert engine.job(job_id)["job_state"] == "W"
    # (5 s ahead: 2 were 1 to 2 s after the submission, the clock read in whole seconds,
    # which a loaded machine may spend before the look)
    soon = engine.submit("true\n", Execution_Time=int(time.time()) + 5)
    assert engine.job(soon)["job_state"] == "W"
    assert engine.wait(soon, timeout=30)["Exit_status"] == 0  # queued, then run, on time
    engine.client("alter", id=job_id, attrs={"Execution_Time": int(time.time()) - 1})
    assert engine.wait(job_id, timeout=30)["Exit_status"] == 0


RAW = ("import json, os, sys\n"
       "from pathlib import Path\n"
       "from pbsplug.engine.client import Client\n"
       "from pbsplug.engine.home import Home\n"
       "try:\n"
       "    print(json.dumps(Client(Home(Path(os.environ['PBSPLUG_HOME'])))(\n"
       "        sys.argv[1], **json.loads(sys.argv[2]))))\n"
       "except Exception as exc:\n"
       "    print('refused', type(exc).__name__, exc)\n")


def test_a_raw_hold_with_bad_hold_types_is_refused(engine, attacker):
    """qhold's CLI checks -h (u, o, s), but req_hold/req_release take `types` as they come:
    a raw `hold` with types "xyz" stores Hold_Types "uxyz", a value the rules refuse
    (values._hold_types), so nothing invalid must be stored."""
    from pbsplug import values

    job_id = qsub(attacker, engine, "-h", "--", "/bin/true")
    done = attacker.python(RAW, "hold", json.dumps({"ids": [job_id], "types": "xyz"}),
                           home=engine)
    (answer,) = json.loads(done.stdout)  # (one result per id)
    assert answer["error"]["code"] == 15014, done.stdout + done.stderr
    values.job_request({"Hold_Types": engine.job(job_id)["Hold_Types"]}, "manager")


def test_one_qmgr_request_of_many_list_commands_does_not_hold_the_server(engine, attacker):
    """Requests are size-limited (8 MB) but not work-limited: a non-manager's raw `qmgr`
    with "list server" 300000 times (3.6 MB) is executed line by line in the one-threaded
    server and its answer is ~100 MB (600000 lines took 38 s here). Other raw requests
    with 500000 ids (delete, stat_nodes, stat_queues) hold it 1-5 s each. Root's qstat
    must still answer promptly."""
    body = json.dumps({"text": "list server\n" * 300000})
    flood = subprocess.run(
        ["runuser", "-u", attacker.user, "--", "curl", "-s", "--http1.0",
         "--unix-socket", str(engine.home.socket), "--data-binary", "@-",
         "http://localhost/v1/qmgr"], input=body.encode(), capture_output=True, timeout=120)
    answer = json.loads(flood.stdout)["result"]
    assert answer["code"] == 15004 and "commands in one request" in answer["errors"][0]
    assert engine.client("stat_server")


def test_a_raw_submit_with_a_null_job_name_stores_a_named_job(engine, attacker):
    """job_request keeps a None value (as qalter's "unset"), and req_submit's
    ``attrs.setdefault("Job_Name", "STDIN")`` does not replace a None: the job is stored
    with Job_Name null and its output goes to ``None.o<seq>``."""
    done = attacker.python(RAW, "submit", json.dumps({"attrs": {
        "Job_Name": None, "Hold_Types": "u",
        "Variable_List": {"PBS_O_WORKDIR": str(engine.work)}}, "script": "true\n"}),
        home=engine)
    job_id = json.loads(done.stdout)
    attrs = engine.job(job_id)
    assert attrs["Job_Name"] == "STDIN"
    assert attrs["Output_Path"].endswith(f"/STDIN.o{job_id.split('.')[0]}")


def test_a_request_carries_at_most_so_many_items(engine):
    """Raw requests with 500,000 ids held the server for seconds: each list argument carries
    at most `MAX_REQUEST_ITEMS` items, and a qmgr text at most `MAX_COMMANDS` commands."""
    from pbsplug.engine.errors import PbsError
    from pbsplug.engine.manager import MAX_COMMANDS
    from pbsplug.engine.server import MAX_REQUEST_ITEMS

    many = ["1"] * (MAX_REQUEST_ITEMS + 1)
    for op, arg in (("delete", "ids"), ("stat_jobs", "ids"), ("stat_nodes", "names"),
                    ("stat_queues", "names")):
        with pytest.raises(PbsError) as err:
            engine.client(op, **{arg: many})
        assert err.value.code == 15004 and "over the limit" in err.value.message, op
    out = engine.client("qmgr", text="list server\n" * (MAX_COMMANDS + 1))
    assert out["code"] == 15004 and "commands in one request" in out["errors"][0]
    assert engine.client("qmgr", text="list server\n" * 3)["code"] == 0


def test_a_chunk_that_asks_for_no_cpus_holds_one_and_does_not_overfill_a_vnode(engine,
                                                                               attacker):
    """``select=1:mem=1mb`` names no ncpus: the scheduler gave such a chunk none, so any
    user could run any number of jobs at once on a vnode that stayed free (and the cpuset
    plugin would run them in its parent cpuset). PBS gives a chunk what it lacks of
    default_chunk, ncpus=1 unless set otherwise (OpenPBS 23.06's schedselect:
    ``1:mem=1mb:ncpus=1``)."""
    cpus = sum(int(v["resources_available"]["ncpus"])
               for v in engine.client("stat_nodes").values())
    ids = [qsub(attacker, engine, "-l", "select=1:mem=1mb", "--", "/bin/sleep", "60")
           for _ in range(cpus + 1)]
    until(lambda: sum(engine.job(j)["job_state"] == "R" for j in ids) == cpus,
          what=f"{cpus} jobs running")
    engine.pbs("qrun", "--help")  # (any request: the server's loop turns once more)
    time.sleep(1)
    states = [engine.job(j)["job_state"] for j in ids]
    assert states.count("R") == cpus and states.count("Q") == 1, states
    running = [engine.job(j) for j in ids if engine.job(j)["job_state"] == "R"]
    assert all(":ncpus=1" in job["exec_vnode"] for job in running), running
    for job_id in ids:
        engine.pbs("qdel", job_id)


def test_a_dependency_on_a_bare_job_number_is_stored_as_the_full_id(engine, attacker):
    """``depend=afterok:0`` from a raw request passed the checks (which read the number
    as this server's job) but was stored as written, and the dependency check then found
    no job "0": the new job was finished at once ("did not satisfy dependency") although
    the job it waits on was queued. Stored with the server's name, as qsub writes it."""
    first = qsub(attacker, engine, "-h", "--", "/bin/true")
    number = first.split(".", 1)[0]
    raw = engine.as_user(attacker.user, "submit", attrs={
        "depend": f"afterok:{number}",
        "Variable_List": {"PBS_O_WORKDIR": str(engine.work)}}, argv=["/bin/true"])
    assert "error" not in raw, raw
    second = raw["result"] if isinstance(raw.get("result"), str) else raw["result"]["id"]
    job = engine.job(second)
    assert job["depend"] == f"afterok:{first}"
    assert job["job_state"] == "H", job
    # qalter to the same dependency by the bare number: still stored by the full id
    raw = engine.as_user(attacker.user, "alter", id=second,
                         attrs={"depend": f"afterok:{number}"})
    assert "error" not in raw, raw
    assert engine.job(second)["depend"] == f"afterok:{first}"
    assert engine.job(second)["job_state"] == "H"
    engine.pbs("qdel", first)


def test_a_user_sets_no_operators_hold_nor_the_password_hold_on_a_waiting_job(engine,
                                                                              attacker):
    """Audit: the check of a hold a user adds covered Q and H jobs only, so a W job (qsub
    -a) took an o hold its owner could then not release; and qhold -h p was a user's
    (PBS keeps p to root)."""
    later = time.strftime("%Y%m%d%H%M", time.localtime(time.time() + 3600))
    job_id = qsub(attacker, engine, "-a", later, "--", "/bin/true")
    assert engine.job(job_id)["job_state"] == "W"
    for attrs in ({"Hold_Types": "o"}, {"Hold_Types": "s"}, {"Hold_Types": "p"}):
        raw = engine.as_user(attacker.user, "alter", id=job_id, attrs=attrs)
        assert raw.get("error", {}).get("code") == 15007, (attrs, raw)
    raw = engine.as_user(attacker.user, "hold", ids=[job_id], types="p")
    assert raw["result"][0].get("error", {}).get("code") == 15007, raw
    assert engine.job(job_id)["job_state"] == "W"
    assert engine.job(job_id).get("Hold_Types", "n") == "n"
    engine.pbs("qdel", job_id)


def test_depend_is_not_altered_on_a_running_job(engine):
    """Audit: an operator's qalter -W depend on a running job held it (state H) while it
    ran, and its cpus looked free to the scheduler. PBS refuses it (15015)."""
    running = engine.submit("sleep 60\n")
    until(lambda: engine.job(running)["job_state"] == "R", what="the job to run")
    held = engine.submit("true\n", Hold_Types="u")
    from pbsplug.engine.errors import PbsError

    with pytest.raises(PbsError) as refused:  # (as root: privileged)
        engine.client("alter", id=running, attrs={"depend": f"afterok:{held}"})
    assert refused.value.code == 15015
    assert engine.job(running)["job_state"] == "R"
    engine.pbs("qdel", running, held)


def test_a_job_of_absurd_mpiprocs_or_walltime_harms_nobody_else(engine, attacker):
    """Audit: mpiprocs=10**12 had the root server build a nodefile of that many lines
    (MemoryError in the cycle; the job stayed R with no process); a walltime of 9*10**18 s
    gave the job behind it an estimated start qstat -f could not print, for everybody."""
    big = attacker.pbs(engine, "qsub", "-l", "select=1:ncpus=1:mpiprocs=1000000000000",
                       "--", "/bin/true")  # (refused at qsub now, not at its start)
    assert big.returncode != 0 and "1000000000000 MPI ranks (mpiprocs) in all, more than " \
        "1048576" in big.stderr, big
    assert engine.client("stat_jobs", history=True) == {}
    cpus = sum(int(v["resources_available"]["ncpus"])
               for v in engine.client("stat_nodes").values())
    forever = qsub(attacker, engine, "-l", f"select=1:ncpus={cpus}", "-l",
                   "walltime=9000000000000000000", "--", "/bin/sleep", "60")
    behind = qsub(attacker, engine, "-l", f"select=1:ncpus={cpus}", "--", "/bin/true")
    until(lambda: engine.job(forever)["job_state"] == "R", what="the long job to run")
    shown = engine.pbs("qstat", "-f", behind)
    assert shown.returncode == 0, shown.stderr
    assert engine.pbs("qstat", "-f", "-F", "json").returncode == 0
    for job_id in (forever, behind):
        engine.pbs("qdel", job_id)


SECRET_PLUGIN = '''
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0")


@hookimpl
def register_attributes(registry):
    for object_type in ("server", "queue", "node", "job", "resv"):
        registry.add(object_type, f"{object_type}_secret", "string", read_by="manager")
'''


def test_attributes_a_plugin_lets_managers_read_stay_hidden_from_users(local_engine, dists,
                                                                       attacker):
    """A plugin's attribute registered with ``read_by="manager"`` was hidden by ``qmgr list``
    only: any user read it with ``qmgr print``, ``qstat -f``/``-Bf``/``-Qf``, ``pbsnodes``
    and the raw stat requests. Every path now leaves it out below its role; root still
    sees it."""
    dists.add("secrets", SECRET_PLUGIN)
    engine = local_engine("[plugins.secrets]\nenabled = true\n", env=dists.env())
    node = next(iter(engine.nodes()))
    for obj, name in (("server", ""), ("queue", "workq"), ("node", node)):
        done = engine.pbs("qmgr", "-c", f"set {obj} {name} {obj}_secret = TOPSECRET_{obj}")
        assert done.returncode == 0, done.stderr
    job_id = qsub(attacker, engine, "-h", "--", "/bin/true")
    engine.client("alter", id=job_id, attrs={"job_secret": "TOPSECRET_job"})
    shown = {
        "qmgr print server": attacker.pbs(engine, "qmgr", "-c", "print server").stdout,
        "qmgr print queue": attacker.pbs(engine, "qmgr", "-c", "print queue workq").stdout,
        "qmgr print node": attacker.pbs(engine, "qmgr", "-c", f"print node {node}").stdout,
        "qstat -Bf": attacker.pbs(engine, "qstat", "-Bf").stdout,
        "qstat -Qf": attacker.pbs(engine, "qstat", "-Qf").stdout,
        "qstat -f": attacker.pbs(engine, "qstat", "-f", job_id).stdout,
        "pbsnodes -a": attacker.pbs(engine, "pbsnodes", "-a").stdout,
    }
    raw = attacker.python(
        "import json, os, sys\nfrom pathlib import Path\n"
        "from pbsplug.engine.client import Client\nfrom pbsplug.engine.home import Home\n"
        "c = Client(Home(Path(os.environ['PBSPLUG_HOME'])))\n"
        "print(json.dumps([c('stat_server'), c('stat_queues'), c('stat_nodes'),\n"
        "                  c('stat_jobs', ids=[sys.argv[1]])]))\n", job_id, home=engine)
    assert raw.returncode == 0, raw.stderr
    shown["raw stat requests"] = raw.stdout
    assert all(text for text in shown.values()), shown  # each path answered something
    leaked = {path: text for path, text in shown.items() if "TOPSECRET" in text}
    assert not leaked, leaked
    for obj in ("server", "queue", "node"):  # a manager still sees them
        assert f"TOPSECRET_{obj}" in engine.pbs("qmgr", "-c", f"print {obj} "
                                                f"{'workq' if obj == 'queue' else ''}"
                                                f"{node if obj == 'node' else ''}").stdout
    assert "TOPSECRET_job" in engine.pbs("qstat", "-f", job_id).stdout


def test_a_weekly_rule_is_bounded_and_its_errors_are_pbss(engine, attacker):
    """A standing reservation's WEEKLY rule was walked day by day up to the year 9999 with
    no bound (the DAILY and finer ones stop at `recurrence.MAX_STEPS`): one raw resv_submit
    of ``FREQ=WEEKLY;BYMONTH=2;UNTIL=99981231`` held the one-threaded server 4 s, and as
    long again each time the reservation's occurrences are counted (each start of the
    server, each occurrence's end). One whose weeks reached the year 9999's last raised
    OverflowError: a System error (15010) and a traceback in the log, not PBS's one line."""
    from pbsplug.engine.recurrence import MAX_STEPS

    code = ("import json, os, sys\n"
            "from pathlib import Path\n"
            "from pbsplug.engine.client import Client\n"
            "from pbsplug.engine.home import Home\n"
            "c = Client(Home(Path(os.environ['PBSPLUG_HOME'])))\n"
            "for rule, start in json.loads(sys.argv[1]):\n"
            "    try:\n"
            "        print(json.dumps(c('resv_submit', attrs={\n"
            "            'reserve_start': start, 'reserve_duration': 60, 'reserve_rrule': rule,\n"
            "            'Variable_List': {'PBS_TZID': 'UTC'},\n"
            "            'Resource_List': {'select': '1:ncpus=1'}})['id']))\n"
            "    except Exception as exc:\n"
            "        print(json.dumps([getattr(exc, 'code', None), str(exc)]))\n")
    soon = int(time.time()) + 3600
    last_weeks = 253401264000  # Monday 20 December 9999, 00:00 UTC: two Mondays are left
    rules = [("FREQ=WEEKLY;BYMONTH=2;UNTIL=99981231", soon),
             ("FREQ=WEEKLY;BYMONTH=2;COUNT=100000", soon),
             ("FREQ=WEEKLY;COUNT=3", last_weeks)]
    done = attacker.python(code, json.dumps(rules), home=engine)
    assert done.returncode == 0, done.stderr
    slow, overflowing, last = map(json.loads, done.stdout.splitlines())
    bound = ("Undefined iCalendar syntax: its occurrences take more than "
             f"{MAX_STEPS} days to find")
    assert slow == overflowing == [15133, bound]
    assert engine.client("stat_resvs", ids=[last])[last]["reserve_count"] == 2
    assert "request resv_submit failed" not in engine.log()


def test_a_monthly_or_yearly_rule_with_many_days_is_expanded_at_once(engine, attacker):
    """A MONTHLY (or YEARLY by month) rule's BYDAY was matched against each day of each
    month, once for each of its days, month after month until one comes after UNTIL: a rule
    of 247 ``6MO`` (a raw resv_submit's 1,024 characters; no month has a sixth Monday)
    walked every month to the year 9999 and held the one-threaded server 257 s (192 s by
    month of a YEARLY rule), every other user's request waiting. Each is answered as
    before (the reservation's only occurrence is its start), within the client's 60 s,
    which only guards against a hang."""
    code = ("import json, os, sys\n"
            "from pathlib import Path\n"
            "from pbsplug.engine.client import Client\n"
            "from pbsplug.engine.home import Home\n"
            "c = Client(Home(Path(os.environ['PBSPLUG_HOME'])), timeout=60)\n"
            "for rule in json.loads(sys.argv[1]):\n"
            "    print(json.dumps(c('resv_submit', attrs={\n"
            "        'reserve_start': int(sys.argv[2]), 'reserve_duration': 60,\n"
            "        'reserve_rrule': rule, 'Variable_List': {'PBS_TZID': 'UTC'},\n"
            "        'Resource_List': {'select': '1:ncpus=1'}})['id']))\n")
    rules = ["FREQ=MONTHLY;BYDAY=" + ",".join(["6MO"] * 247) + ";UNTIL=20361231",
             "FREQ=YEARLY;BYMONTH=1,2,3,4,5,6,7,8,9,10,11,12;BYDAY=" + ",".join(["6MO"] * 239)
             + ";UNTIL=20361231"]
    assert all(len(rule) <= 1024 for rule in rules)
    done = attacker.python(code, json.dumps(rules), str(int(time.time()) + 3600),
                           home=engine, timeout=200)
    assert done.returncode == 0, done.stderr
    made = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(made) == 2
    for resv in made:
        assert engine.client("stat_resvs", ids=[resv])[resv]["reserve_count"] == 1
    assert engine.client("stat_server")
