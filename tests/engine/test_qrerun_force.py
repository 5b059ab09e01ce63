"""qrerun -W force: a job that is not rerunnable requeued all the same, as OpenPBS 23.06
does (checked); qrerun's other answers as PBS's."""

from __future__ import annotations

from .conftest import until


def test_qrerun_W_force_requeues_a_job_that_is_not_rerunnable(engine):
    job_id = engine.pbs("qsub", "-r", "n", input="sleep 60\n", check=True).stdout.strip()
    engine.wait(job_id, "R")
    refused = engine.pbs("qrerun", job_id)
    assert (refused.returncode, refused.stderr) == (
        190, f"qrerun: job is not rerunnable {job_id}\n")
    bad = engine.pbs("qrerun", "-W", "forced", job_id)
    assert (bad.returncode, bad.stdout) == (2, "")
    assert bad.stderr.splitlines()[-1] == "usage: qrerun [-W force] job_identifier..."
    assert engine.job(job_id)["run_count"] == 1
    done = engine.pbs("qrerun", "-W", "force", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    until(lambda: engine.job(job_id)["run_count"] == 2, timeout=30,
          what="the job requeued and run again")
    attrs = engine.wait(job_id, "R")
    assert attrs["Rerunable"] is False
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_qrerun_of_a_finished_job_and_of_a_held_one(engine):
    done_id = engine.submit("true\n")
    engine.wait(done_id)
    done = engine.pbs("qrerun", "-W", "force", done_id)
    assert (done.returncode, done.stderr) == (35, f"qrerun: Job has finished {done_id}\n")
    held = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    done = engine.pbs("qrerun", "-W", "force", held)
    assert (done.returncode, done.stderr) == (
        168, f"qrerun: Request invalid for state of job {held}\n")


def test_qrerun_W_force_is_an_operators_or_a_managers(engine, unix_user):
    job_id = engine.pbs("qsub", "-r", "n", input="sleep 60\n", check=True).stdout.strip()
    engine.wait(job_id, "R")
    refused = engine.as_user(unix_user, "rerun", ids=[job_id], force=True)
    assert refused["error"]["code"] == 15007
    assert engine.job(job_id)["run_count"] == 1
    engine.pbs("qdel", "-W", "force", job_id, check=True)
