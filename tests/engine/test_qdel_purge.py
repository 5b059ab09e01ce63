"""qdel -x: a job's history purged, as OpenPBS 23.06 does it (checked: a finished job at
once; a queued, held or running one deleted, then purged; its owner or a manager may,
another user gets Unauthorized Request)."""

from __future__ import annotations

from .conftest import until


def _gone(engine, job_id: str) -> bool:
    done = engine.pbs("qstat", "-x", job_id)
    return (done.returncode, done.stderr) == (153, f"qstat: Unknown Job Id {job_id}\n")


def test_qdel_x_purges_a_finished_jobs_history(engine):
    job_id = engine.submit("true\n")
    engine.wait(job_id)
    refused = engine.pbs("qdel", job_id)
    assert (refused.returncode, refused.stderr) == (35, f"qdel: Job has finished {job_id}\n")
    done = engine.pbs("qdel", "-x", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert _gone(engine, job_id)
    again = engine.pbs("qdel", "-x", job_id)
    assert (again.returncode, again.stderr) == (153, f"qdel: Unknown Job Id {job_id}\n")
    assert f"{job_id};Job history purged at request of " in engine.log()


def test_qdel_x_of_a_held_job_deletes_and_purges_it(engine):
    job_id = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    done = engine.pbs("qdel", "-x", "-W", "force", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert _gone(engine, job_id)


def test_qdel_x_of_a_running_job_purges_it_once_it_has_ended(engine):
    job_id = engine.submit("sleep 60\n")
    engine.wait(job_id, "R")
    done = engine.pbs("qdel", "-x", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    until(lambda: _gone(engine, job_id), timeout=30)
    assert f"{job_id};Job to be deleted at request of " in engine.log()


def test_qdel_x_is_the_owners_or_a_managers(engine, unix_user):
    roots = engine.submit("true\n")
    mine = engine.as_user(unix_user, "submit", attrs={
        "Variable_List": {"PBS_O_WORKDIR": str(engine.work)}}, argv=["/bin/true"])["result"]
    engine.wait(roots)
    engine.wait(mine)
    refused = engine.as_user(unix_user, "delete", ids=[roots], purge=True)["result"][0]
    assert refused["error"]["code"] == 15007
    assert engine.job(roots)["job_state"] == "F"
    assert engine.as_user(unix_user, "delete", ids=[mine], purge=True)["result"] == [
        {"id": mine}]
    assert _gone(engine, mine)
