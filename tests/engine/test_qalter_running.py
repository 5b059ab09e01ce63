"""qalter of a running job, as OpenPBS 23.06 answers it (checked as root, as the job's owner
and as an operator): each attribute may be altered while the job runs or not, whoever asks
(PBS's ATR_DFLAG_ALTRUN), and of the resources only cput, walltime, min_walltime,
max_walltime and soft_walltime; an operator or a manager may raise them, the job's owner
only lower them (or set one the job had not). The walltime enforced is the new one."""

from __future__ import annotations

import pytest

from .conftest import until

PBSE_PERM, PBSE_MODATRRUN = 15007, 15015


def _running(engine, job_id: str) -> str:
    engine.wait(job_id, "R")
    return job_id


def _refused_running(job_id: str, attr: str) -> tuple[int, str, str]:
    return (PBSE_MODATRRUN % 256, "",
            f"qalter: Cannot modify attribute while job running  {attr} {job_id}\n")


def _unauthorized(job_id: str) -> tuple[int, str, str]:
    return PBSE_PERM % 256, "", f"qalter: Unauthorized Request  {job_id}\n"


@pytest.fixture
def owners_job(engine, attacker):
    """A job of the second user's, running (walltime 01:00:00, no cput)."""
    # (from the engine's work folder: the job's files are written there, not in /tmp)
    done = attacker.pbs(engine, "qsub", "-l", "walltime=01:00:00", "--", "/bin/sleep", "300",
                        cwd=engine.work)
    assert done.returncode == 0, done.stderr
    yield _running(engine, done.stdout.strip())
    engine.client("delete", ids=[done.stdout.strip()], force=True)


def test_the_owner_may_alter_what_pbs_lets_be_altered_while_the_job_runs(
        engine, attacker, owners_job):
    job_id = owners_job
    held = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()

    def qalter(*args: str) -> tuple[int, str, str]:
        done = attacker.pbs(engine, "qalter", *args, job_id)
        return done.returncode, done.stdout, done.stderr

    for args in (("-N", "renamed"), ("-o", "/tmp/h13.out"), ("-e", "/tmp/h13.err"),
                 ("-a", "203001011200"), ("-m", "abe"), ("-M", "a@b.c"), ("-p", "5"),
                 ("-r", "n"), ("-S", "/bin/sh"), ("-c", "n"), ("-h", "u")):
        assert qalter(*args) == (0, "", ""), args
    for args, attr in ((("-A", "acct"), "Account_Name"), (("-j", "oe"), "Join_Path"),
                       (("-k", "oe"), "Keep_Files"), (("-P", "proj"), "project"),
                       (("-R", "oe"), "Remove_Files"), (("-W", "umask=022"), "umask"),
                       (("-W", f"depend=afterok:{held}"), "depend"),
                       (("-l", "ncpus=1"), "Resource_List.ncpus"),
                       (("-l", "select=1:ncpus=1"), "Resource_List.select"),
                       (("-l", "walltime=00:40:00", "-l", "ncpus=1"), "Resource_List.ncpus")):
        assert qalter(*args) == _refused_running(job_id, attr), args
    attrs = engine.job(job_id)
    assert (attrs["Job_Name"], attrs["Priority"], attrs["Hold_Types"], attrs["job_state"]) == (
        "renamed", 5, "u", "R")  # (held, it runs on)
    assert "Account_Name" not in attrs and "depend" not in attrs
    # walltime and cput: lowered, or set when the job had none, never raised by its owner
    assert qalter("-l", "walltime=02:00:00") == _unauthorized(job_id)
    assert qalter("-l", "walltime=00:50:00") == (0, "", "")
    assert qalter("-l", "cput=00:10:00") == (0, "", "")
    assert qalter("-l", "cput=00:20:00") == _unauthorized(job_id)
    assert qalter("-l", "walltime=00:45:00,cput=00:30:00") == _unauthorized(job_id)
    assert qalter("-W", "run_count=0") == _unauthorized(job_id)
    resources = engine.job(job_id)["Resource_List"]
    assert (resources["walltime"], resources["cput"]) == ("00:50:00", "00:10:00")
    engine.client("delete", ids=[held])


def test_a_manager_and_an_operator_may_raise_a_running_jobs_walltime(
        engine, attacker, unix_user, owners_job):
    def qalter(*args: str, as_user: bool = False) -> tuple[int, str, str]:
        done = (attacker.pbs(engine, "qalter", *args) if as_user else
                engine.pbs("qalter", *args))
        return done.returncode, done.stdout, done.stderr

    assert qalter("-l", "walltime=03:00:00", "-N", "rootname", owners_job) == (0, "", "")
    assert qalter("-l", "cput=05:00:00", owners_job) == (0, "", "")
    assert qalter("-A", "acct", owners_job) == _refused_running(owners_job, "Account_Name")
    assert qalter("-l", "mem=1gb", owners_job) == _refused_running(
        owners_job, "Resource_List.mem")
    resources = engine.job(owners_job)["Resource_List"]
    assert (resources["walltime"], resources["cput"]) == ("03:00:00", "05:00:00")
    roots = _running(engine, engine.submit("sleep 300\n",
                                           Resource_List={"walltime": "01:00:00"}))
    engine.pbs("qmgr", "-c", f"set server operators = {unix_user}@*", check=True)
    assert qalter("-l", "walltime=05:00:00", "-N", "opname", roots, as_user=True) == (
        0, "", "")
    assert qalter("-A", "x", roots, as_user=True) == _refused_running(roots, "Account_Name")
    assert engine.job(roots)["Resource_List"]["walltime"] == "05:00:00"
    engine.client("delete", ids=[roots], force=True)


def test_a_walltime_lowered_while_the_job_runs_is_the_one_enforced(engine):
    """As OpenPBS 23.06 (checked: lowered to 5 s, the job was killed about 10 s after it
    started, Exit_status -29)."""
    job_id = _running(engine, engine.submit("sleep 300\n",
                                            Resource_List={"walltime": "01:00:00"}))
    done = engine.pbs("qalter", "-l", "walltime=00:00:01", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == -29
    assert "exceeded limit 00:00:01" in attrs["comment"]


def test_the_scheduler_books_a_running_job_until_its_new_walltime(engine):
    """The cycle after the change books the job's vnode until its stime plus the new
    walltime: a job waiting for that vnode is estimated to start then."""
    vnode = sorted(engine.client("stat_nodes"))[0]
    ncpus = engine.client("stat_nodes")[vnode]["resources_available"]["ncpus"]
    whole = ("-l", f"select=1:ncpus={ncpus}")
    running = engine.pbs("qsub", *whole, "-l", "walltime=01:00:00", "--", "/bin/sleep",
                         "300", check=True).stdout.strip()
    stime = int(engine.job(_running(engine, running))["stime"])
    waiting = engine.pbs("qsub", *whole, "-l", "walltime=00:10:00", "--", "/bin/true",
                         check=True).stdout.strip()

    def estimated() -> int | None:
        return (engine.job(waiting).get("estimated") or {}).get("start_time")

    until(lambda: estimated() == stime + 3600, 30, "the first estimate")
    assert engine.pbs("qalter", "-l", "walltime=02:00:00", running).returncode == 0
    until(lambda: estimated() == stime + 7200, 30, "the estimate after the walltime's change")
    engine.client("delete", ids=[running, waiting], force=True)


def test_soft_walltime_is_set_by_operators_and_managers_with_qalter_only(engine, attacker):
    """OpenPBS 23.06 (checked as root and as a user) refuses ``-l soft_walltime`` at qsub,
    root's too, and in a user's qalter of their own job (15003); a manager's qalter sets
    it."""
    text = "Cannot set attribute, read only or insufficient permission  " \
           "Resource_List.soft_walltime"
    for qsub in (engine.pbs, lambda *args: attacker.pbs(engine, *args)):
        done = qsub("qsub", "-h", "-l", "soft_walltime=00:10:00", "--", "/bin/true")
        assert (done.returncode, done.stdout, done.stderr) == (155, "", f"qsub: {text}\n")
    done = attacker.pbs(engine, "qsub", "-h", "--", "/bin/true")
    job_id = done.stdout.strip()
    done = attacker.pbs(engine, "qalter", "-l", "soft_walltime=00:05:00", job_id)
    assert (done.returncode, done.stderr) == (155, f"qalter: {text} {job_id}\n")
    assert "soft_walltime" not in engine.job(job_id)["Resource_List"]
    assert engine.pbs("qalter", "-l", "soft_walltime=00:05:00", job_id).returncode == 0
    assert engine.job(job_id)["Resource_List"]["soft_walltime"] == "00:05:00"
    # not over the walltime (OpenPBS 23.06's 15014, checked; a walltime lowered under it
    # too, pbsplug's reading)
    engine.pbs("qalter", "-l", "walltime=00:20:00", job_id, check=True)
    over = f"qalter: Illegal attribute or resource value Resource_List.soft_walltime {job_id}\n"
    for args in (("-l", "soft_walltime=00:30:00"), ("-l", "walltime=00:04:00")):
        done = engine.pbs("qalter", *args, job_id)
        assert (done.returncode, done.stderr) == (166, over), args
    assert engine.job(job_id)["Resource_List"]["walltime"] == "00:20:00"
