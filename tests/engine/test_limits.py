"""PBS's limits on queued jobs (`pbsplug.engine.limits`): max_queued, queued_jobs_threshold,
their _res forms and a queue's max_queuable, set with qmgr and checked at qsub and qmove
against a real server, with PBS's codes and texts."""

from __future__ import annotations

import time

import pytest

from pbsplug import entlim, values
from pbsplug.engine import limits
from pbsplug.engine.errors import PbsError
from pbsplug.engine.server import ROLE_MANAGER, Caller, Engine
from pbsplug.engine.store import Store

from .conftest import until
from .test_qmgr_server import qmgr


def qsub(engine, *args: str):
    return engine.pbs("qsub", *args, "--", "/bin/true", cwd=engine.work)


def set_ok(engine, text: str) -> None:
    done = qmgr(engine, text)
    assert (done.returncode, done.stderr) == (0, ""), text


def test_max_queued_per_user_refuses_the_job_over_it_and_frees_with_a_job_gone(engine):
    set_ok(engine, "set server max_queued = [u:PBS_GENERIC=2]")
    first = qsub(engine, "-h")
    assert first.returncode == 0, first.stderr
    assert qsub(engine, "-h").returncode == 0
    over = qsub(engine, "-h")
    assert (over.returncode, over.stderr) == (
        limits.PBSE_ENTLIMCT % 256, "qsub: would exceed complex's per-user limit\n")
    assert len(engine.client("stat_jobs")) == 2  # nothing stored of the refused one
    engine.pbs("qdel", first.stdout.strip(), check=True)
    assert qsub(engine, "-h").returncode == 0
    # A user's own limit is used instead of the generic one.
    set_ok(engine, "set server max_queued += [u:root=3]")
    assert qmgr(engine, "list server max_queued").stdout.split(" = ", 1)[1].strip() == \
        "[u:PBS_GENERIC=2],[u:root=3]"
    assert qsub(engine, "-h").returncode == 0
    over = qsub(engine, "-h")
    assert over.stderr == "qsub: Maximum number of jobs for user root already in complex\n"
    set_ok(engine, "set server max_queued -= [u:root=0]")  # -= takes the entity out
    set_ok(engine, "set server max_queued = [o:PBS_ALL=3]")
    over = qsub(engine, "-h")
    assert over.stderr == "qsub: Maximum number of jobs already in complex\n"
    set_ok(engine, "unset server max_queued")
    assert qsub(engine, "-h").returncode == 0


def test_queued_jobs_threshold_counts_the_jobs_not_begun_of_its_queue_only(engine):
    """OpenPBS 23.06 (checked): a held job fills the threshold, so a second `qsub -h` is
    refused; a job running does not count."""
    set_ok(engine, "set server scheduling = False")  # jobs stay queued
    set_ok(engine, "set queue workq queued_jobs_threshold = [u:PBS_GENERIC=1]")
    held = qsub(engine, "-h").stdout.strip()
    assert held
    over = qsub(engine, "-h")
    assert (over.returncode, over.stderr) == (
        limits.PBSE_ENTLIMCT % 256,
        "qsub: would exceed queue generic's per-user limit of jobs in 'Q' state\n")
    assert qsub(engine).returncode == limits.PBSE_ENTLIMCT % 256
    set_ok(engine, "create queue other queue_type = Execution, enabled = True")
    assert qsub(engine, "-q", "other").returncode == 0  # another queue's jobs
    engine.pbs("qrls", held, check=True)  # (counted already: adds nothing)
    assert engine.pbs("qrun", held).returncode == 0
    engine.wait(held, "RF")
    assert qsub(engine, "-h").returncode == 0  # begun: counted no more


def test_the_thresholds_count_no_job_running_or_suspended(engine):
    """OpenPBS 23.06 (checked): beside a job running, and beside it suspended, a `qsub -h`
    is taken under `[u:PBS_GENERIC=1]`."""
    set_ok(engine, "set server queued_jobs_threshold = [u:PBS_GENERIC=1]")
    running = engine.submit("sleep 300\n")
    engine.wait(running, "R")
    engine.pbs("qsig", "-s", "suspend", running, check=True)
    assert engine.job(running)["job_state"] == "S"
    held = qsub(engine, "-h")
    assert (held.returncode, held.stderr) == (0, "")
    engine.pbs("qdel", held.stdout.strip(), check=True)
    engine.pbs("qsig", "-s", "resume", running, check=True)
    engine.wait(running, "R")
    assert qsub(engine, "-h").returncode == 0
    engine.pbs("qdel", "-W", "force", running, check=True)


def test_max_queued_res_sums_what_the_jobs_ask_for(engine):
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server max_queued_res.ncpus = [u:PBS_GENERIC=4]")
    assert qsub(engine, "-l", "select=1:ncpus=3").returncode == 0
    over = qsub(engine, "-l", "select=2:ncpus=1")  # 3 + 2 > 4
    assert (over.returncode, over.stderr) == (
        limits.PBSE_ENTLIMRESC % 256,
        "qsub: would exceed per-user limit on resource ncpus in complex\n")
    assert qsub(engine, "-l", "select=1:ncpus=1").returncode == 0  # 4 is not over
    set_ok(engine, "set queue workq max_queued_res.mem = [o:PBS_ALL=1gb]")
    over = qsub(engine, "-l", "select=1:ncpus=0:mem=2gb")
    assert over.stderr == "qsub: would exceed limit on resource mem in queue workq\n"
    printed = qmgr(engine, "print server").stdout
    assert "set server max_queued_res.ncpus = [u:PBS_GENERIC=4]\n" in printed
    assert "set queue workq max_queued_res.mem = [o:PBS_ALL=1gb]\n" in printed


def test_qmove_checks_the_destination_queue_but_for_a_managers(engine, attacker):
    """An operator's qmove is checked against the destination's limits; a manager's is
    let past them, as OpenPBS 23.06 lets it (checked)."""
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, f"set server operators = {attacker.user}@*")
    # (in this order: PBS refuses a max_queued once a max_queuable, old style, is set)
    set_ok(engine, "set server max_queued = [u:PBS_GENERIC=3]")
    set_ok(engine, "create queue small queue_type = Execution, enabled = True, "
                   "max_queuable = 1")
    jobs = [qsub(engine).stdout.strip() for _ in range(3)]
    # counted once, not twice
    assert attacker.pbs(engine, "qmove", "small", jobs[0]).returncode == 0
    over = attacker.pbs(engine, "qmove", "small", jobs[1])
    assert (over.returncode, over.stderr.splitlines()[0]) == (
        limits.PBSE_MAXQUED % 256, f"qmove: Maximum number of jobs already in queue "
        f"{jobs[1]}")
    assert engine.job(jobs[1])["queue"] == "workq"
    assert engine.pbs("qmove", "small", jobs[1]).returncode == 0  # root: a manager
    assert engine.job(jobs[1])["queue"] == "small"
    engine.pbs("qdel", jobs[2], check=True)  # (room under the server's max_queued)
    assert qsub(engine, "-q", "small").returncode == limits.PBSE_MAXQUED % 256  # counted


@pytest.mark.parametrize(("command", "why"), [
    ("set server max_queued = [u:PBS_GENERIC=x]", "not a whole number"),
    # int() reads other scripts' digits and Python's separators: they were stored as 3, 10
    ("set server max_queued = [u:PBS_GENERIC=\u0663]", "not a whole number"),
    ("set server max_queued_res.ncpus = [u:bob=1_0]", "not a whole number"),
    ("set server max_queued = [u:PBS_GENERIC=-1]", "is not zero or more"),
    ("set server max_queued = [o:bob=1]", "PBS_ALL goes with o:"),
    ("set server max_queued = [u:PBS_ALL=1]", "PBS_ALL goes with o:"),
    ('set server max_queued = "[u:a=1],[u:a=2]"', "limited twice"),
    ("set server max_queued = [x:a=1]", "expected"),
    ("set queue workq max_queued_res.ncpus = [u:PBS_GENERIC=1.5]", "not a whole number"),
    ("set queue workq max_queued_res.mem = [u:PBS_GENERIC=lots]", "not a PBS size"),
    ("set server max_queued_res.host = [o:PBS_ALL=a]", "cannot be limited"),
    ("set server max_running = -1", ""),
    ("set queue workq max_queuable = -1", ""),
])
def test_a_bad_limit_is_refused_by_qmgr_naming_what_is_wrong(engine, command, why):
    done = qmgr(engine, command)
    assert done.returncode == 15014 % 256, done.stderr
    assert "Illegal attribute or resource value max_" in done.stderr
    assert why in done.stderr
    stored = str(engine.client("stat_server")) + str(engine.client("stat_queues"))
    assert "max_queued" not in stored and "-1" not in stored


def test_limit_texts_parse_and_combine():
    items = entlim.parse("[u:PBS_GENERIC=10], [o:PBS_ALL=20],[g:staff=5]")
    assert [(i.kind, i.name, i.value) for i in items] == [
        ("u", "PBS_GENERIC", 10), ("o", "PBS_ALL", 20), ("g", "staff", 5)]
    assert entlim.parse("[u:bob=2gb]", "size")[0].value == 2 << 30
    assert entlim.combine("[u:a=1],[u:b=2]", "[u:a=5],[g:c=1]", 1) == \
        "[u:a=5],[u:b=2],[g:c=1]"
    assert entlim.combine("[u:a=1],[u:b=2]", "[u:a=0]", -1) == "[u:b=2]"
    with pytest.raises(ValueError, match="'x': expected"):
        entlim.parse("[u:a=1] x")


def test_qalter_of_a_queued_jobs_resources_meets_the_resource_limits(engine):
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server max_queued = [u:PBS_GENERIC=2]")
    set_ok(engine, "set server max_queued_res.ncpus = [u:PBS_GENERIC=4]")
    first = qsub(engine, "-l", "select=1:ncpus=2").stdout.strip()
    assert qsub(engine, "-l", "select=1:ncpus=1").returncode == 0
    # Its own ncpus are not counted twice, and the count limit (reached) is not checked.
    done = engine.pbs("qalter", "-l", "select=1:ncpus=3", first)
    assert (done.returncode, done.stderr) == (0, "")
    done = engine.pbs("qalter", "-l", "select=1:ncpus=4", first)
    assert done.returncode == limits.PBSE_ENTLIMRESC % 256
    assert "would exceed per-user limit on resource ncpus in complex" in done.stderr
    assert engine.job(first)["Resource_List"]["select"] == "1:ncpus=3"


def test_max_run_holds_a_users_second_job_until_the_first_ends_and_qrun_overrides(engine):
    set_ok(engine, "set server max_run = [u:PBS_GENERIC=1]")
    first = engine.submit("sleep 60\n")
    engine.wait(first, "R")
    second = engine.submit("true\n")
    until(lambda: engine.job(second).get("comment") ==
          "Not Running: User has reached server running job limit.",
          what="the limit's comment")
    assert engine.job(second)["job_state"] == "Q"
    assert engine.pbs("qrun", second).returncode == 0  # PBS's qrun runs it anyway
    engine.wait(second, "F")
    third = engine.submit("true\n")
    engine.pbs("qdel", first, check=True)
    engine.wait(third, "F")  # started once the first is gone


def test_the_thresholds_count_held_and_waiting_jobs_from_their_submission(engine):
    """OpenPBS 23.06 (checked): under `[u:PBS_GENERIC=1]` a second `qsub -h` is refused,
    and so is a `qsub -a` for later; a job released, or whose Execution_Time comes, was
    counted already, so nothing refuses it then. The `_res` form counts the same jobs."""
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server queued_jobs_threshold = [u:PBS_GENERIC=1]")
    later = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600))
    waiting = qsub(engine, "-a", later).stdout.strip()
    assert engine.job(waiting)["job_state"] == "W"
    for args in (("-h",), ("-a", later), ()):
        done = qsub(engine, *args)
        assert (done.returncode, done.stderr) == (
            limits.PBSE_ENTLIMCT % 256,
            "qsub: would exceed complex's per-user limit of jobs in 'Q' state\n"), args
    engine.pbs("qalter", "-a", time.strftime("%Y%m%d%H%M.%S", time.localtime()), waiting,
               check=True)
    until(lambda: engine.job(waiting)["job_state"] == "Q", what="the job queued")
    assert "comment" not in engine.job(waiting)
    set_ok(engine, "unset server queued_jobs_threshold")
    set_ok(engine, "set server queued_jobs_threshold_res.ncpus = [u:PBS_GENERIC=2]")
    assert qsub(engine, "-h").returncode == 0  # 2 cpus
    done = qsub(engine, "-a", later)
    assert (done.returncode, done.stderr) == (
        limits.PBSE_ENTLIMRESC % 256,
        "qsub: would exceed per-user limit on resource ncpus in complex for jobs in 'Q' "
        "state\n")


def test_resources_count_as_the_scheduler_gives_them(engine):
    """Review of the first version: Resource_List.ncpus was counted before the select the
    scheduler uses, a job with no request counted 0 (it runs on 1 cpu), defaults were not
    counted, and a negative chunk value made a job count nothing."""
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server max_queued_res.ncpus = [u:PBS_GENERIC=4]")
    over = qsub(engine, "-l", "select=1:ncpus=100")
    assert over.returncode == limits.PBSE_ENTLIMRESC % 256, over.stderr
    for _ in range(3):  # one cpu each by default
        assert qsub(engine).returncode == 0
    set_ok(engine, "set queue workq default_chunk.ncpus = 2")
    assert qsub(engine, "-l", "select=1:mem=1mb").returncode == limits.PBSE_ENTLIMRESC % 256
    set_ok(engine, "unset queue workq default_chunk.ncpus")
    assert qsub(engine, "-l", "select=1:mem=1mb").returncode == 0  # 1 more: 4
    set_ok(engine, "create resource fl type = float")
    set_ok(engine, "set server max_queued_res.fl = [u:PBS_GENERIC=4]")
    done = qsub(engine, "-l", "select=1:fl=100+1:fl=-99")
    assert done.returncode == 15014 % 256 and "is not zero or more" in done.stderr


def test_changes_that_add_to_a_count_are_checked_and_others_are_not(engine):
    """Review of the first version: qalter of a job's project (or a hook's change of its
    queue or project) was never checked."""
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server max_queued = [p:big=1]")
    assert qsub(engine, "-P", "big").returncode == 0
    small = qsub(engine, "-P", "small").stdout.strip()
    with pytest.raises(PbsError) as refused:  # (this qalter has no -P: the API has)
        engine.client("alter", id=small, attrs={"project": "big"})
    assert (refused.value.code, refused.value.message) == (
        limits.PBSE_ENTLIMCT, "Maximum number of jobs for project big already in complex")
    assert engine.job(small)["project"] == "small"
    # A limit lowered below what is queued refuses no change that adds nothing.
    set_ok(engine, "set server max_queued = [o:PBS_ALL=1]")
    assert engine.pbs("qalter", "-l", "walltime=00:10:00", small).returncode == 0


def test_a_res_limit_stored_as_one_text_by_an_older_version_can_be_set_again(engine):
    engine.stop()
    import json
    import sqlite3
    with sqlite3.connect(engine.home.db) as db:
        attrs = json.loads(db.execute("SELECT attrs FROM objects WHERE type='server'"
                                      ).fetchone()[0])
        attrs["max_queued_res"] = "[u:PBS_GENERIC=4]"
        db.execute("UPDATE objects SET attrs=? WHERE type='server'", (json.dumps(attrs),))
    engine.start()
    set_ok(engine, "set server max_queued_res.ncpus = [u:PBS_GENERIC=4]")
    assert "set server max_queued_res.ncpus = [u:PBS_GENERIC=4]\n" in qmgr(
        engine, "print server").stdout


def test_a_resource_a_limit_names_cannot_be_deleted(engine):
    set_ok(engine, "create resource foo type = long")
    set_ok(engine, "set server max_queued_res.foo = [u:PBS_GENERIC=4]")
    done = qmgr(engine, "delete resource foo")
    assert (done.returncode, done.stderr.splitlines()[0]) == (
        15174 % 256, "qmgr obj=foo svr=default: Resource busy")
    set_ok(engine, "unset server max_queued_res.foo")
    set_ok(engine, "delete resource foo")


def test_a_job_held_by_its_dependency_counts_and_its_release_adds_nothing(engine):
    """A job held (``s``) until its dependency is met is not begun, so it counts against
    the thresholds from its submission (OpenPBS 23.06 counts every job not begun), and
    its release into Q is never refused."""
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server queued_jobs_threshold = [u:PBS_GENERIC=2]")
    parent = qsub(engine, "-h").stdout.strip()
    child = qsub(engine, "-W", f"depend=afterany:{parent}").stdout.strip()
    assert engine.job(child)["job_state"] == "H"
    assert qsub(engine).returncode == limits.PBSE_ENTLIMCT % 256
    engine.pbs("qdel", parent, check=True)
    until(lambda: engine.job(child)["job_state"] == "Q", what="the release")
    assert "comment" not in engine.job(child)


def test_a_request_a_limit_set_later_cannot_count_keeps_no_job_from_q(inprocess_engine):
    """Audit: the server checked the limits again when a waiting job's time came and when
    a dependency was met; that could refuse only a job whose stored request a limit set
    after it cannot count (15014: a negative float), which then stayed W, or held ``s``,
    for good. Entering Q adds nothing to what the job counts, so nothing is checked."""
    eng = inprocess_engine
    admin = Caller(0, ROLE_MANAGER)
    eng.req_qmgr(admin, "set server scheduling = False")
    eng.req_qmgr(admin, "create resource fl type = float")
    asks = {"Resource_List": {"fl": "-1.5"}}
    waiting = eng.req_submit(admin, {"Execution_Time": int(time.time()) + 3600, **asks},
                             script="true\n")
    parent = eng.req_submit(admin, {"Hold_Types": "u"}, script="true\n")
    child = eng.req_submit(admin, {"depend": f"afterany:{parent}", **asks}, script="true\n")
    assert [eng.store.job(j)["job_state"] for j in (waiting, child)] == ["W", "H"]
    eng.req_qmgr(admin, "set server queued_jobs_threshold_res.fl = [u:PBS_GENERIC=10]")
    eng.req_delete(admin, [parent])  # (the dependency met)
    eng._end_waits(time.time() + 3600)  # (the waiting job's time come)
    for job_id in (waiting, child):
        stored = eng.store.job(job_id)
        assert (stored["job_state"], stored.get("comment")) == ("Q", None), job_id

def test_job_wide_resources_of_a_job_with_a_select_are_counted(engine):
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server max_queued_res.walltime = [u:PBS_GENERIC=02:00:00]")
    args = ("-l", "select=1:ncpus=1", "-l", "walltime=01:00:00")
    assert qsub(engine, *args).returncode == 0
    assert qsub(engine, *args).returncode == 0
    over = qsub(engine, *args)
    assert over.stderr == "qsub: would exceed per-user limit on resource walltime in complex\n"


def test_a_restart_releases_only_the_holds_a_limit_made(engine):
    """A start looks for the dependency releases an older pbsplug's limit held back; an
    operator's hold s on a job whose dependencies were met long ago is not one."""
    first = engine.submit("true\n")
    engine.wait(first, "F")
    later = engine.submit("true\n", Hold_Types="u", depend=f"afterok:{first}")
    engine.pbs("qhold", "-h", "s", later, check=True)
    engine.stop()
    engine.start()
    set_ok(engine, "set server comment = restarted")  # (answered: the start's pass is done)
    assert "s" in engine.job(later)["Hold_Types"] and engine.job(later)["job_state"] == "H"


def test_the_jobs_an_older_pbsplug_held_back_are_released_as_the_server_starts(engine_here):
    """An older pbsplug's thresholds counted jobs in Q only: a waiting job whose time came,
    or one whose dependencies were met, stayed W, or held ``s``, with the limit's text as
    its comment. Its database read as the server starts, before any request, the comment
    goes and the dependency's hold is released (an operator's stays: the tests above)."""
    admin = Caller(0, ROLE_MANAGER)
    old = engine_here()
    parent = old.req_submit(admin, {"Hold_Types": "u"}, script="true\n")
    child = old.req_submit(admin, {"depend": f"afterany:{parent}"}, script="true\n")
    waiting = old.req_submit(admin, {"Execution_Time": int(time.time()) + 3600},
                             script="true\n")
    text = "Not Running: would exceed complex's per-user limit of jobs in 'Q' state"
    with old.store.transaction() as st:  # (as that pbsplug left them)
        st.put_job(parent, {**old.store.job(parent), "job_state": "F", "stime": 1,
                            "Exit_status": 0})
        for job_id in (child, waiting):
            st.put_job(job_id, {**old.store.job(job_id), "comment": text})
    assert old.store.job(child)["Hold_Types"] == "s"
    new = engine_here()  # (a restart)
    released, kept = new.store.job(child), new.store.job(waiting)
    assert (released["job_state"], released["Hold_Types"], released.get("comment")) == (
        "Q", "n", None)
    assert (kept["job_state"], kept.get("comment")) == ("W", None)  # (its time to come)


def test_a_start_with_no_job_held_back_writes_nothing_for_them(engine_here, monkeypatch):
    """The release of the jobs an older pbsplug held back opened a transaction (BEGIN
    IMMEDIATE, the database's write lock) at every start, with nothing to write; it
    writes only when it finds one now (the test above)."""
    admin = Caller(0, ROLE_MANAGER)
    eng = engine_here()
    eng.req_submit(admin, {"Execution_Time": int(time.time()) + 3600}, script="true\n")
    opened = []
    real = eng.store.transaction

    def transaction():
        opened.append(1)
        return real()

    monkeypatch.setattr(eng.store, "transaction", transaction)
    eng._release_held_back()
    assert opened == []


def test_a_failed_release_of_held_back_jobs_keeps_no_server_from_starting(engine_here,
                                                                          monkeypatch):
    """That release runs as the server starts (in its first poll before, whose failures
    are logged): a failure of it is logged, and the server starts."""
    def fails(self, ended, every_held=False):
        raise RuntimeError("a bad row")

    monkeypatch.setattr(Engine, "_resolve_depend", fails)
    eng = engine_here()
    logged = "".join(p.read_text() for p in eng.home.logs.glob("*"))
    assert "releasing the jobs an older pbsplug held back failed: RuntimeError: a bad row" \
        in logged


def test_the_schedulers_limit_comment_does_not_mark_a_hold_as_a_limits(engine):
    """Review: a comment of the scheduler's run limits (``Not Running: would exceed
    overall limit on resource ncpus in complex``) passed for the server's held-back one,
    and a restart released an operator's hold s."""
    first = engine.submit("true\n")
    engine.wait(first, "F")
    later = engine.submit("true\n", Hold_Types="u", depend=f"afterok:{first}")
    engine.client("alter", id=later, attrs={
        "comment": "Not Running: would exceed overall limit on resource ncpus in complex"})
    engine.pbs("qhold", "-h", "s", later, check=True)
    engine.stop()
    engine.start()
    set_ok(engine, "set server comment = restarted")  # (answered: the start's pass is done)
    assert "s" in engine.job(later)["Hold_Types"]


def _fresh(store, server, queues):
    return limits.Tally(server, queues, values.RESOURCE_TYPES,
                        store.counted_groups(limits.DONE_STATES)).counts


def test_a_tally_kept_by_the_writes_since_counts_as_one_made_again(tmp_path):
    """The server keeps one count of the jobs between requests, brought up to date by the
    store's job writes since (`Store.counted_moves`); after every kind of write it counts
    what a count made from the rows counts, and a rolled-back change makes it count
    again."""
    store = Store(tmp_path / "db")
    server = {"max_queued": "[u:PBS_GENERIC=100]",
              "max_queued_res": {"ncpus": "[o:PBS_ALL=100]", "walltime": "[u:bob=100:00:00]"}}
    queues = {"workq": {"queued_jobs_threshold": "[o:PBS_ALL=9]"}, "other": {}}

    def job(user: str, state: str = "Q", queue: str = "workq", ncpus: int = 1, **more):
        return {"job_state": state, "queue": queue, "euser": user, "egroup": "staff",
                "Resource_List": {"select": f"1:ncpus={ncpus}", "walltime": "01:00:00"},
                "Variable_List": {"HOME": "/"}, **more}

    for seq, user in enumerate(("bob", "bob", "amy")):
        store.add_job(seq, f"{seq}.s", job(user), None)
    kept = limits.Tally(server, queues, values.RESOURCE_TYPES,
                        store.counted_groups(limits.DONE_STATES))

    def brought_up_to_date() -> None:
        moves = store.counted_moves()
        assert moves is not None
        for old, new in moves:
            kept.move(old, new)
        assert kept.counts == _fresh(store, server, queues)

    store.add_job(3, "3.s", job("amy", ncpus=4), None)
    store.put_job("0.s", job("bob", state="H"))                    # Q -> H
    store.put_job("1.s", job("bob", queue="other", ncpus=2))       # queue and request
    store.put_job("2.s", job("amy", comment="only a comment"))      # counts nothing more
    store.put_job("3.s", job("amy", state="F", ncpus=4), keep_env=True)  # done
    store.delete_job("0.s")
    brought_up_to_date()
    assert kept.counts[(None, False, "u", "amy", None)] == 1  # job 3 is done, 2 is left
    with store.transaction():  # committed: noted
        store.add_job(4, "4.s", job("cat", ncpus=2), None)
    brought_up_to_date()
    assert store.counted_moves() == []  # each write is read once
    with pytest.raises(RuntimeError), store.transaction():
        store.put_job("4.s", job("cat", ncpus=8))
        raise RuntimeError("a change given up")
    assert store.counted_moves() is None  # rolled back: count again
    assert _fresh(store, server, queues)[(None, False, "o", entlim.ALL, "ncpus")] == 1 + 2 + 2


def test_a_limit_check_counts_the_jobs_once_not_at_every_request(inprocess_engine):
    """With a limit set, a submission costs the limits that apply to it, not a pass over
    every job (it was one grouped SQLite pass a request: about 260 ms with 10,000 jobs
    asking different walltimes); the count is made again when the limits change."""
    eng = inprocess_engine
    admin = Caller(0, ROLE_MANAGER)
    assert eng.req_qmgr(admin, "set server max_queued = [u:PBS_GENERIC=5]")["code"] == 0
    passes = []
    eng.store.db.set_trace_callback(
        lambda sql: passes.append(sql) if "GROUP BY state, picked" in sql else None)

    def qsub(walltime: int) -> str:
        return eng.req_submit(admin, {"Hold_Types": "u", "Resource_List": {
            "walltime": str(walltime)}}, "true\n")

    jobs = [qsub(60 + n) for n in range(5)]
    with pytest.raises(PbsError, match="would exceed complex's per-user limit"):
        qsub(1)
    assert len(passes) == 1
    eng.req_delete(admin, jobs[:2])
    eng.req_alter(admin, jobs[2], {"Resource_List": {"walltime": "7"}})
    jobs += [qsub(2), qsub(3)]  # the two deleted made room for two
    with pytest.raises(PbsError, match="per-user limit"):
        qsub(4)
    assert len(passes) == 1
    assert eng.req_qmgr(admin, "set server max_queued = [u:PBS_GENERIC=6]")["code"] == 0
    jobs.append(qsub(5))
    assert len(passes) == 2  # the limits changed: counted again
    with pytest.raises(PbsError, match="per-user limit"):
        qsub(6)
    # No limit left: nothing counted, every submission goes (review: with writes noted
    # and no count, every other qsub was a System error).
    assert eng.req_qmgr(admin, "unset server max_queued")["code"] == 0
    jobs += [qsub(7), qsub(8), qsub(9)]
    assert len(passes) == 2 and eng.store.counted_moves() is None


# -- job arrays: an array counts as its subjobs, as OpenPBS 23.06 counts it (checked) ------

def test_an_array_counts_as_its_subjobs_and_is_refused_whole(engine):
    """Security review: an array counted as one job, so three 100-index arrays passed a
    limit of three jobs."""
    set_ok(engine, "set server max_queued = [u:PBS_GENERIC=10]")
    over = qsub(engine, "-h", "-J", "0-99")
    assert (over.returncode, over.stderr) == (
        limits.PBSE_ENTLIMCT % 256, "qsub: would exceed complex's per-user limit\n")
    assert engine.client("stat_jobs") == {}  # refused whole: nothing stored
    assert qsub(engine, "-h", "-J", "1-6").returncode == 0
    assert qsub(engine, "-h", "-J", "1-5").returncode == limits.PBSE_ENTLIMCT % 256  # 11
    assert qsub(engine, "-h", "-J", "1-4").returncode == 0  # 10
    assert qsub(engine, "-h").returncode == limits.PBSE_ENTLIMCT % 256
    set_ok(engine, "unset server max_queued")
    set_ok(engine, "set server max_queued_res.ncpus = [u:PBS_GENERIC=12]")
    over = qsub(engine, "-h", "-J", "1-3")  # each subjob asks one cpu: 10 + 3
    assert (over.returncode, over.stderr) == (
        limits.PBSE_ENTLIMRESC % 256,
        "qsub: would exceed per-user limit on resource ncpus in complex\n")
    assert qsub(engine, "-h", "-J", "1-2").returncode == 0


def test_an_arrays_queued_subjobs_count_against_the_q_state_threshold(engine):
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server queued_jobs_threshold = [u:PBS_GENERIC=5]")
    assert qsub(engine, "-J", "1-6").returncode == limits.PBSE_ENTLIMCT % 256
    array = qsub(engine, "-J", "1-4").stdout.strip()
    assert array
    assert qsub(engine, "-J", "1-2").returncode == limits.PBSE_ENTLIMCT % 256
    assert qsub(engine).returncode == 0  # 5
    assert qsub(engine).returncode == limits.PBSE_ENTLIMCT % 256
    assert qsub(engine, "-h", "-J", "1-2").returncode == limits.PBSE_ENTLIMCT % 256  # held
    # Begun (B), the array's indices not begun are jobs in Q still.
    sub = array.replace("[]", "[1]")
    assert engine.pbs("qrun", sub).returncode == 0
    until(lambda: engine.job(array)["job_state"] == "B", what="the array begun")
    assert qsub(engine).returncode == 0  # 3 not begun, 1 job and this one (1[1] is not Q)
    assert qsub(engine).returncode == limits.PBSE_ENTLIMCT % 256


def test_an_array_whose_subjobs_ran_counts_those_queued_or_running(engine):
    set_ok(engine, "set server scheduling = False")
    set_ok(engine, "set server max_queued = [u:PBS_GENERIC=8]")
    array = engine.pbs("qsub", "-J", "1-5", "--", "/bin/sh", "-c",
                       '[ "$PBS_ARRAY_INDEX" -le 2 ] || sleep 60', check=True).stdout.strip()
    subs = [array.replace("[]", f"[{i}]") for i in (1, 2, 3)]
    for sub in subs[:2]:
        engine.pbs("qrun", sub, check=True)
    until(lambda: all(engine.job(s)["job_state"] in ("X", "F") for s in subs[:2]),
          what="two subjobs ended")
    engine.pbs("qrun", subs[2], check=True)
    engine.wait(subs[2], "R")
    # Two ended, one running, two queued: the array counts three, so five more fit.
    added = 0
    while qsub(engine, "-h").returncode == 0:
        added += 1
        assert added <= 8, "the limit refused nothing"
    assert added == 5


def test_max_queuable_counts_an_array_as_one_job(engine):
    set_ok(engine, "set queue workq max_queuable = 3")
    assert qsub(engine, "-h", "-J", "1-4").returncode == 0
    assert qsub(engine, "-h", "-J", "1-3").returncode == 0
    assert qsub(engine, "-h").returncode == 0
    over = qsub(engine, "-h")
    assert (over.returncode, over.stderr) == (
        limits.PBSE_MAXQUED % 256, "qsub: Maximum number of jobs already in queue\n")


def test_qmove_of_an_array_counts_its_subjobs_in_the_destination(engine, attacker):
    """An operator's qmove of an array is checked as its subjobs; a manager's passes the
    destination's limits (OpenPBS 23.06, checked), which count what it moved."""
    set_ok(engine, f"set server operators = {attacker.user}@*")
    set_ok(engine, "create queue small queue_type = Execution, enabled = True")
    set_ok(engine, "set queue small max_queued = [u:PBS_GENERIC=3]")
    four = qsub(engine, "-h", "-J", "1-4").stdout.strip()
    over = attacker.pbs(engine, "qmove", "small", four)
    assert (over.returncode, over.stderr) == (
        limits.PBSE_ENTLIMCT % 256, f"qmove: would exceed queue generic's per-user limit "
                                    f"{four}\n")  # (PBS's words: "generic", not the queue)
    assert engine.job(four)["queue"] == "workq"
    three = qsub(engine, "-h", "-J", "1-3").stdout.strip()
    assert attacker.pbs(engine, "qmove", "small", three).returncode == 0
    one = qsub(engine, "-h").stdout.strip()
    assert attacker.pbs(engine, "qmove", "small", one).returncode == \
        limits.PBSE_ENTLIMCT % 256
    set_ok(engine, "set queue small queued_jobs_threshold = [o:PBS_ALL=3]")
    for job in (four, one):  # root, a manager: past them all
        done = engine.pbs("qmove", "small", job)
        assert (done.returncode, done.stderr) == (0, "")
        assert engine.job(job)["queue"] == "small"
    assert qsub(engine, "-h", "-q", "small").returncode == limits.PBSE_ENTLIMCT % 256


def test_each_running_subjob_counts_against_the_run_limits(engine):
    ncpus = int(next(iter(engine.client("stat_nodes").values()))[
        "resources_available"]["ncpus"])
    assert ncpus >= 2  # (else one subjob at a time whatever the limit)
    set_ok(engine, "set server max_run = [u:PBS_GENERIC=1]")
    array = engine.pbs("qsub", "-J", "1-3", "--", "/bin/sleep", "60",
                       check=True).stdout.strip()
    first = array.replace("[]", "[1]")
    engine.wait(first, "R")
    single = qsub(engine).stdout.strip()  # (a cycle after the subjob started)
    until(lambda: engine.job(single).get("comment") ==
          "Not Running: User has reached server running job limit.",
          what="the limit's comment")
    shown = engine.job(array)
    assert shown["array_state_count"] == "Queued:2 Running:1 Exiting:0 Expired:0"
    assert shown["comment"].startswith("Job Array Began at")  # (PBS's, checked)
    engine.pbs("qdel", first, check=True)
    until(lambda: engine.job(array.replace("[]", "[2]"))["job_state"] == "R",
          what="the next subjob started once the first is gone")


def test_a_tally_counts_an_array_as_its_indices_not_begun_and_its_subjob_rows(tmp_path):
    """A 10,000-index array is one row whose `array_indices_remaining` is counted from its
    runs; each subjob begun is a row of its own; the tally kept by the writes since counts
    what a count made again counts."""
    store = Store(tmp_path / "db")
    server = {"max_queued": "[u:PBS_GENERIC=100]",
              "max_queued_res": {"ncpus": "[o:PBS_ALL=100]"}}
    queues = {"workq": {"queued_jobs_threshold": "[o:PBS_ALL=9]"}}
    array = {"job_state": "Q", "queue": "workq", "euser": "bob", "egroup": "staff",
             "array": True, "array_indices_submitted": "0-9999",
             "array_indices_remaining": "0-9999", "Resource_List": {"select": "1:ncpus=2"}}
    store.add_job(1, "1[].s", array, None)
    kept = limits.Tally(server, queues, values.RESOURCE_TYPES,
                        store.counted_groups(limits.DONE_STATES))
    user, cpus, in_q = ((None, False, "u", "bob", None),
                        (None, False, "o", entlim.ALL, "ncpus"),
                        ("workq", True, "o", entlim.ALL, None))
    assert (kept.counts[user], kept.counts[cpus], kept.counts[in_q]) == (10_000, 20_000,
                                                                         10_000)

    def brought_up_to_date() -> dict:
        moves = store.counted_moves()
        assert moves is not None
        for old, new in moves:
            kept.move(old, new)
        assert kept.counts == _fresh(store, server, queues)
        return kept.counts

    with store.transaction():  # (as `Arrays.instantiate` begins index 0)
        store.put_job("1[].s", {**array, "job_state": "B", "array_indices_remaining":
                                "1-9999"})
        store.add_job(2, "1[0].s", {**array, "job_state": "R", "array_id": "1[].s",
                                    "array_index": 0, "array": None,
                                    "array_indices_remaining": None}, None)
    counts = brought_up_to_date()
    assert (counts[user], counts[cpus], counts[in_q]) == (10_000, 20_000, 9_999)
    store.put_job("1[0].s", {**array, "job_state": "X", "array_indices_remaining": None})
    store.put_job("1[].s", {**array, "job_state": "B",
                            "array_indices_remaining": "5-9,20-9999"})  # (a qdel of some)
    counts = brought_up_to_date()
    assert (counts[user], counts[in_q]) == (5 + 9_980, 5 + 9_980)
    store.put_job("1[].s", {**array, "array_indices_remaining": "not indices"})
    assert brought_up_to_date()[user] == 1  # (a damaged list: one job, as any row)
    with pytest.raises(PbsError) as refused:  # a second such array passes the limit
        kept.check({**array, "array_indices_remaining": "0-99"})
    assert refused.value.code == limits.PBSE_ENTLIMCT
