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


def _assigned(text: str) -> dict[str, str]:
    return dict(line.strip().removeprefix("resources_assigned.").split(" = ", 1)
                for line in text.splitlines() if "resources_assigned." in line)


def test_a_queues_resources_assigned_follow_its_jobs_as_pbs_keeps_them(engine):
    """OpenPBS 23.06's (checked): listed once assigned, at 0 when nothing runs; sizes in
    the smallest unit assigned so far; a suspended job's given back; the server's too."""
    engine.pbs("qmgr", "-c", "create queue idle queue_type=execution,enabled=true,"
               "started=true", check=True)

    def shown(queue: str = "workq") -> dict[str, str]:
        return _assigned(engine.pbs("qstat", "-Qf", queue, check=True).stdout)

    def server() -> dict[str, str]:
        return _assigned(engine.pbs("qstat", "-Bf", check=True).stdout)

    assert shown() == {} and server() == {}
    small = engine.pbs("qsub", "-l", "select=1:ncpus=1:mem=10mb", "--",
                       "/bin/sleep", "60", check=True).stdout.strip()
    large = engine.pbs("qsub", "-l", "select=1:ncpus=1:mem=1gb", "--", "/bin/sleep", "60",
                       check=True).stdout.strip()
    engine.wait(small, "R")
    engine.wait(large, "R")
    both = {"mem": "1034mb", "ncpus": "2", "nodect": "2"}
    assert shown() == both and server() == both
    assert shown("idle") == {}
    engine.pbs("qsig", "-s", "suspend", small, check=True)
    engine.wait(small, "S")
    alone = {"mem": "1024mb", "ncpus": "1", "nodect": "1"}
    assert shown() == alone and server() == alone
    engine.pbs("qsig", "-s", "resume", small, check=True)
    engine.wait(small, "R")
    assert shown() == both
    listed = engine.pbs("qmgr", "-c", "list queue workq", check=True).stdout
    assert "    resources_assigned.mem = 1034mb\n" in listed
    printed = engine.pbs("qmgr", "-c", "print queue workq", check=True).stdout
    assert "resources_assigned" not in printed  # (read-only: not a command to replay)
    engine.pbs("qmgr", "-c", "set queue workq max_running = 5", check=True)
    engine.pbs("qmgr", "-c", "unset queue workq max_running", check=True)
    engine.pbs("qdel", small, large, check=True)
    engine.wait(small)
    engine.wait(large)
    none = {"mem": "0mb", "ncpus": "0", "nodect": "0"}
    assert shown() == none and server() == none
    text = engine.pbs("qstat", "-Qf", "workq", check=True).stdout
    assert text.index("state_count") < text.index("resources_assigned.mem") < \
        text.index("enabled")  # (PBS's order)
