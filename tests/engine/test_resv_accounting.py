"""The accounting records of jobs in a reservation's queue, as OpenPBS 23.06 writes them
(checked on a running PBS: tests/adapters/test_pbs_accounting_parity.py compares them)."""

from __future__ import annotations

import time

from .conftest import shepherds_gone, until
from .test_accounting import JOB_HEAD, RUN, _keys, of, records

#: A job's head in a reservation's queue: the reservation's name and id after its queue.
RESV_HEAD = [*JOB_HEAD[:JOB_HEAD.index("queue") + 1], "resvname", "resvID",
             *JOB_HEAD[JOB_HEAD.index("queue") + 1:]]


def _when(seconds: int) -> str:
    return time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + seconds))


def _confirmed(engine, resv_id: str) -> str:
    until(lambda: engine.client("stat_resvs", ids=[resv_id])[resv_id]["reserve_state"]
          != "RESV_UNCONFIRMED", what=f"{resv_id} confirmed")
    return resv_id.split(".")[0]


def test_a_job_in_a_reservations_queue_names_it_in_its_records(engine):
    named = engine.pbs("pbs_rsub", "-N", "night", "-R", _when(1), "-E", _when(600),
                       check=True).stdout.split()[0]
    unnamed = engine.pbs("pbs_rsub", "-R", _when(900), "-E", _when(1000),
                         check=True).stdout.split()[0]
    in_named = engine.pbs("qsub", "-q", _confirmed(engine, named), "--", "/bin/true",
                          check=True).stdout.strip()
    in_unnamed = engine.pbs("qsub", "-h", "-q", _confirmed(engine, unnamed), "--",
                            "/bin/true", check=True).stdout.strip()
    plain = engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(in_named)
    engine.pbs("qdel", in_unnamed, plain, check=True)
    engine.wait(in_unnamed)

    recs = records(engine.home)
    kinds = [k for k, _ in of(recs, in_named)]
    assert kinds == ["Q", "S", "E"], kinds
    for kind, attrs in of(recs, in_named):
        assert _keys(attrs)[:len(RESV_HEAD) + (len(RUN) if kind != "Q" else 0)] == [
            *RESV_HEAD, *(RUN if kind != "Q" else [])], kind
        assert attrs["resvname"] == "night" and attrs["resvID"] == named, kind
    (_, queued), _ = of(recs, in_unnamed)
    assert (queued["resvname"], queued["resvID"]) == ("NULL", unnamed)  # (no -N: PBS's)
    (_, outside), _ = of(recs, plain)
    assert "resvname" not in outside and "resvID" not in outside
    assert _keys(outside)[:len(JOB_HEAD)] == JOB_HEAD


def test_a_job_ended_at_a_restart_names_its_reservation_in_its_e_record(engine):
    """A job of a reservation's queue that the server's start finds lost (its shepherd
    gone; not rerunnable: it ends) is ended before the server has read its reservations:
    its E record had no resvname nor resvID, which a normal end's has. It has them now,
    the same keys as a normal end's."""
    resv_id = engine.pbs("pbs_rsub", "-N", "night", "-R", _when(1), "-E", _when(600),
                         check=True).stdout.split()[0]
    job_id = engine.pbs("qsub", "-r", "n", "-q", _confirmed(engine, resv_id), "--",
                        "/bin/sleep", "300", check=True).stdout.strip()
    engine.wait(job_id, "R")
    engine.kill()
    shepherds_gone(engine, [job_id])
    engine.start()
    attrs = engine.wait(job_id)
    assert attrs["comment"].startswith("Job failed after a server restart"), attrs
    ended = [pairs for kind, pairs in of(records(engine.home), job_id) if kind == "E"]
    assert len(ended) == 1, ended
    assert _keys(ended[0])[:len(RESV_HEAD) + len(RUN)] == [*RESV_HEAD, *RUN], ended
    assert (ended[0]["resvname"], ended[0]["resvID"]) == ("night", resv_id), ended


def test_the_jobs_of_a_reservation_that_ends_get_d_records_of_the_servers_user(engine,
                                                                               attacker):
    """OpenPBS 23.06 (checked): at the end of its period, the reservation's record first (a
    k when its owner is the server's user, root, else a K), then a D for each of its jobs,
    requestor the server's user, and a running job's E at its end; a pbs_rdel's D name
    who deleted it."""
    # (Ending 12 s ahead, not 5: the submissions below, four commands, two of them through
    # runuser, come before the job runs, which must be before the end: 2 s of the 5 at a
    # load of 5.)
    mine = engine.pbs("pbs_rsub", "-R", _when(2), "-E", _when(12), check=True).stdout.split()[0]
    theirs = attacker.pbs(engine, "pbs_rsub", "-R", _when(2), "-E", _when(12)).stdout.split()[0]
    later = attacker.pbs(engine, "pbs_rsub", "-R", _when(900), "-E", _when(990)
                         ).stdout.split()[0]
    running = engine.pbs("qsub", "-q", _confirmed(engine, mine), "--", "/bin/sleep", "60",
                         check=True).stdout.strip()
    held = engine.pbs("qsub", "-h", "-q", mine.split(".")[0], "--", "/bin/true",
                      check=True).stdout.strip()
    theirs_job = attacker.pbs(engine, "qsub", "-h", "-q", _confirmed(engine, theirs), "--",
                              "/bin/true").stdout.strip()
    later_job = attacker.pbs(engine, "qsub", "-h", "-q", _confirmed(engine, later), "--",
                             "/bin/true").stdout.strip()
    attacker.pbs(engine, "pbs_rdel", later)
    engine.wait(running, "R")
    for job in (running, held, theirs_job, later_job):
        engine.wait(job, timeout=60)
    host = running.split(".", 1)[1]
    root, user = f"root@{host}", f"{attacker.user}@{host}"

    recs = records(engine.home)
    assert [k for k, _ in of(recs, running)] == ["Q", "S", "D", "E"]
    assert of(recs, running)[2][1] == {"requestor": root}
    assert of(recs, held) == [of(recs, held)[0], ("D", {"requestor": root})]
    assert of(recs, theirs_job)[1:] == [("D", {"requestor": root})]
    assert of(recs, later_job)[1:] == [("D", {"requestor": user})]  # (its pbs_rdel's)
    assert of(recs, mine)[-1] == ("k", {"requestor": root})
    assert of(recs, theirs)[-1] == ("K", {"requestor": root})
    assert of(recs, later)[-1] == ("k", {"requestor": user})
    order = [(k, i) for _, k, i, _ in recs if i in (mine, running, held) and k in "kDE"]
    assert order[0] == ("k", mine), order  # (the reservation's record before its jobs')
