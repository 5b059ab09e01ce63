"""What a queue shows of its jobs, as OpenPBS 23.06's (checked on a running PBS): the
comment of a job queued in a stopped queue, a reservation's not begun too."""

from __future__ import annotations

import time

from .conftest import until


def test_a_job_in_a_stopped_queue_is_commented_queue_not_started(engine):
    engine.pbs("qstop", "workq", check=True)
    job = engine.pbs("qsub", "--", "/bin/true", check=True).stdout.strip()
    held = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    engine.pbs("qmgr", "-c", "create queue other queue_type=execution,enabled=true,"
               "started=true", check=True)
    other = engine.pbs("qsub", "-q", "other", "-h", "--", "/bin/sleep", "30",
                       check=True).stdout.strip()
    engine.pbs("qrls", other, check=True)  # (a cycle runs it: the stopped queue's seen)
    engine.wait(other, "R")
    until(lambda: engine.job(job).get("comment") == "Not Running: Queue not started.",
          what="the queued job's comment")
    assert engine.job(job)["job_state"] == "Q"
    assert "comment" not in engine.job(held)  # (held: the scheduler looks at it no more)
    engine.pbs("qstart", "workq", check=True)
    assert engine.wait(job)["comment"].startswith("Job run at ")
    engine.pbs("qdel", held, other, check=True)


def test_a_job_in_a_reservations_queue_before_it_begins_is_commented_so_too(engine):
    when = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 600))
    end = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 700))
    resv = engine.pbs("pbs_rsub", "-R", when, "-E", end, check=True).stdout.split()[0]
    until(lambda: engine.client("stat_resvs", ids=[resv])[resv]["reserve_state"]
          != "RESV_UNCONFIRMED", what=f"{resv} confirmed")
    job = engine.pbs("qsub", "-q", resv.split(".")[0], "--", "/bin/true",
                     check=True).stdout.strip()
    until(lambda: engine.job(job).get("comment") == "Not Running: Queue not started.",
          what="the comment of the job waiting for its reservation")
    engine.pbs("pbs_rdel", resv, check=True)
