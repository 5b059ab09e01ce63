"""Job arrays where the local engine once departed from OpenPBS 23.06, each point checked on
the real PBS first (docs/engine.md, "Job arrays"): a qrerun of the whole array, a
dependency on an array, a queue's max_array_size, Begun in state_count and the comment of
an array whose max_run_subjobs is 0."""

from __future__ import annotations

import json
import time

from pbsplug.engine import arrays

from .test_accounting import of, records

#: Subjobs 1 and 2 end at once (exit 0 and 1), 3 and 4 run on.
_MIXED = ("if [ $PBS_ARRAY_INDEX -le 2 ]; then exit $((PBS_ARRAY_INDEX - 1)); fi\n"
          "sleep 60\n")


def _wait_subjobs(engine, job_id: str, states: dict[int, str], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        seen = {i: engine.job(arrays.subjob_id(job_id, i))["job_state"] for i in states}
        if all(seen[i] in want for i, want in states.items()):
            return
        assert time.monotonic() < deadline, f"subjobs of {job_id}: {seen}, not {states}"
        time.sleep(0.1)


def test_qrerun_of_an_array_runs_every_subjob_again_finished_ones_too(engine):
    job_id = engine.pbs("qsub", "-J", "1-4", input=_MIXED, check=True).stdout.strip()
    _wait_subjobs(engine, job_id, {1: "XF", 2: "XF", 3: "R", 4: "R"})
    began = engine.job(job_id)["comment"]
    assert engine.pbs("qrerun", job_id).returncode == 0
    # Subjobs 1 and 2 are queued again at once; 3 and 4 when their kill is seen. Each has
    # run twice once all four are back (two CPUs: 1 and 2 end, then 3 and 4 run again).
    deadline = time.monotonic() + 60
    while True:
        subs = {i: engine.job(arrays.subjob_id(job_id, i)) for i in (1, 2, 3, 4)}
        if all(a["run_count"] == 2 for a in subs.values()) and \
                "".join(subs[i]["job_state"] for i in (1, 2, 3, 4)) in ("XXRR", "FFRR"):
            break
        assert time.monotonic() < deadline, {i: (a["job_state"], a["run_count"])
                                             for i, a in subs.items()}
        time.sleep(0.1)
    assert (subs[1]["Exit_status"], subs[2]["Exit_status"]) == (0, 1)
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["comment"]) == ("B", began)
    assert attrs["array_state_count"] == "Queued:0 Running:2 Exiting:0 Expired:2"
    # R records, as OpenPBS 23.06 writes them: a finished subjob's with its own
    # Exit_status and run_count 1, a running one's with -11 (JOB_EXEC_RERUN).
    recs = records(engine.home)
    reruns = {i: [p for kind, p in of(recs, arrays.subjob_id(job_id, i)) if kind == "R"]
              for i in (1, 2, 3, 4)}
    assert [(len(r), r[0]["Exit_status"], r[0]["run_count"]) for r in reruns.values()] == [
        (1, "0", "1"), (1, "1", "1"), (1, "-11", "1"), (1, "-11", "1")]
    assert "R" not in [kind for kind, _ in of(recs, job_id)]  # (none for the array)
    assert engine.pbs("qdel", job_id).returncode == 0
    engine.wait(job_id)


def test_qrerun_of_an_array_not_begun_or_over_is_refused_as_openpbs(engine):
    held = engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true",
                      check=True).stdout.strip()
    refused = engine.pbs("qrerun", held)
    assert (refused.returncode, refused.stderr) == (
        168, f"qrerun: Request invalid for state of job {held}\n")
    assert engine.job(held)["job_state"] == "H"
    done = engine.pbs("qsub", "-J", "1-2", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(done)
    refused = engine.pbs("qrerun", done)
    # (PBS's qrerun names no job here; pbsplug's errors name what was wrong)
    assert (refused.returncode, refused.stderr) == (35, f"qrerun: Job has finished {done}\n")


def test_qrerun_of_an_array_queues_its_deleted_subjobs_again(engine):
    # OpenPBS 23.06 (checked): one deleted while it ran and one deleted before it began
    # are queued again with the rest; a held array, begun or not, is 15016.
    job_id = engine.pbs("qsub", "-J", "1-4%1", "--", "/bin/sleep", "60",
                        check=True).stdout.strip()
    _wait_subjobs(engine, job_id, {1: "R"})
    assert engine.pbs("qdel", arrays.subjob_id(job_id, 4)).returncode == 0
    assert engine.pbs("qalter", "-W", "max_run_subjobs=0", job_id).returncode == 0
    assert engine.pbs("qdel", arrays.subjob_id(job_id, 1)).returncode == 0
    _wait_subjobs(engine, job_id, {1: "XF"})
    before = engine.job(job_id)
    assert (before["array_state_count"], before["array_indices_remaining"]) == (
        "Queued:2 Running:0 Exiting:0 Expired:2", "2-3")
    assert engine.pbs("qrerun", job_id).returncode == 0
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["array_state_count"], attrs["array_indices_remaining"]
            ) == ("B", "Queued:4 Running:0 Exiting:0 Expired:0", "1-4")
    assert [engine.job(arrays.subjob_id(job_id, i))["job_state"] for i in (1, 2, 3, 4)] == [
        "Q"] * 4
    assert engine.pbs("qhold", job_id).returncode == 0
    refused = engine.pbs("qrerun", job_id)
    assert (refused.returncode, refused.stderr) == (
        168, f"qrerun: Request invalid for state of job {job_id}\n")
    assert engine.pbs("qdel", job_id).returncode == 0
    engine.wait(job_id)


def _qsub(engine, *args: str) -> str:
    return engine.pbs("qsub", *args, "--", "/bin/true", check=True).stdout.strip()


def test_a_dependency_on_an_array_as_openpbs(engine):
    # OpenPBS 23.06 (checked): an array is named as 12[] or 12[].server, a subjob or a
    # range not at all; after runs once the array has begun, afterok and afterany once
    # it has finished with its last subjob's exit 0, its 2nd's 1 or not, and afternotok
    # is deleted.
    array = engine.pbs("qsub", "-h", "-J", "1-3%1", input="exit $((PBS_ARRAY_INDEX == 2))\n",
                       check=True).stdout.strip()
    number, server = array.split("[")[0], array.split(".", 1)[1]
    for named in (f"{number}[1]", f"{number}[1].{server}", f"{number}[1-2]"):
        refused = engine.pbs("qsub", "-W", f"depend=afterok:{named}", "--", "/bin/true")
        assert (refused.returncode, refused.stderr.splitlines()[0]) == (
            2, "qsub: illegal -W value"), named
    waiting = {"afterok": _qsub(engine, "-W", f"depend=afterok:{array}"),
               "short": _qsub(engine, "-W", f"depend=afterok:{number}[]"),
               "afternotok": _qsub(engine, "-W", f"depend=afternotok:{array}"),
               "afterany": _qsub(engine, "-W", f"depend=afterany:{array}"),
               "after": _qsub(engine, "-W", f"depend=after:{array}")}
    for job_id in waiting.values():
        attrs = engine.job(job_id)
        assert (attrs["job_state"], attrs["Hold_Types"]) == ("H", "s"), job_id
    assert engine.job(waiting["short"])["depend"] == f"afterok:{array}"
    assert engine.pbs("qrls", array).returncode == 0
    assert engine.wait(array)["comment"].endswith(" and failed")
    for name in ("afterok", "short", "afterany", "after"):
        attrs = engine.wait(waiting[name])
        assert (attrs["Exit_status"], attrs["run_count"]) == (0, 1), name
    gone = engine.wait(waiting["afternotok"])
    assert (gone.get("stime"), gone["comment"]) == (
        None, f"Job deleted as result of dependency on job {array}")
    # On the finished array: afterok runs; afternotok is deleted at once, qsub printing
    # its id as PBS's does.
    assert engine.wait(_qsub(engine, "-W", f"depend=afterok:{array}"))["Exit_status"] == 0
    late = _qsub(engine, "-W", f"depend=afternotok:{array}")
    attrs = engine.wait(late)
    assert (attrs.get("stime"), attrs["comment"]) == (
        None, f"{array} Finished job did not satisfy dependency")



def test_a_dependency_on_an_array_whose_last_subjob_failed(engine):
    """OpenPBS 23.06.06 (measured as a user, ``qsub -J 1-2`` whose 2nd subjob exited 1
    last): the array ends with Exit_status 1, afterok on it is deleted and afternotok
    runs. pbsplug ended the array with 0: afterok ran, afternotok was deleted."""
    array = engine.pbs("qsub", "-h", "-J", "1-2%1", input="exit $((PBS_ARRAY_INDEX == 2))\n",
                       check=True).stdout.strip()
    ok = _qsub(engine, "-W", f"depend=afterok:{array}")
    notok = _qsub(engine, "-W", f"depend=afternotok:{array}")
    assert engine.pbs("qrls", array).returncode == 0
    assert engine.wait(array)["Exit_status"] == 1
    assert (engine.wait(notok)["Exit_status"], engine.wait(notok)["run_count"]) == (0, 1)
    gone = engine.wait(ok)
    assert (gone.get("stime"), gone["comment"]) == (
        None, f"Job deleted as result of dependency on job {array}")


_TOO_BIG = (3, "qsub: Array job exceeds server or queue size limit\n")


def _qsub_array(engine, spec: str, *options: str):
    done = engine.pbs("qsub", "-h", *options, "-J", spec, "--", "/bin/true")
    return done.returncode, done.stderr


def test_a_queues_max_array_size_limits_its_arrays_as_openpbs(engine):
    # OpenPBS 23.06 (checked): the server's and the queue's limits both hold (the smaller
    # refuses, with one message); any long is taken, 0 or less refusing every array; a
    # route queue's holds at qsub; a manager's qmove takes an array past it.
    def qmgr(text: str) -> None:
        engine.pbs("qmgr", "-c", text, check=True)

    qmgr("set server max_array_size = 10")
    qmgr("set queue workq max_array_size = 3")
    assert [_qsub_array(engine, spec)[0] for spec in ("1-3", "1-4", "1-20")] == [0, 3, 3]
    assert _qsub_array(engine, "1-4") == _TOO_BIG
    qmgr("set server max_array_size = 3")
    qmgr("set queue workq max_array_size = 10")
    assert _qsub_array(engine, "1-5") == _TOO_BIG
    qmgr("unset server max_array_size")
    for value, status in (("0", 3), ("-1", 3), ("1", 3), ("16777217", 0)):
        qmgr(f"set queue workq max_array_size = {value}")
        assert _qsub_array(engine, "1-2")[0] == status, value
    assert engine.pbs("qmgr", "-c", "set queue workq max_array_size = abc").returncode == 166
    qmgr("unset queue workq max_array_size")
    qmgr("create queue arrq2 queue_type=execution,enabled=true,started=true,"
         "max_array_size=2")
    assert "set queue arrq2 max_array_size = 2\n" in engine.pbs(
        "qmgr", "-c", "print queue arrq2", check=True).stdout
    assert _qsub_array(engine, "1-5", "-q", "arrq2") == _TOO_BIG
    big = engine.pbs("qsub", "-h", "-J", "1-5", "--", "/bin/true", check=True).stdout.strip()
    assert engine.pbs("qmove", "arrq2", big).returncode == 0
    assert engine.job(big)["queue"] == "arrq2"
    qmgr("create queue arrr queue_type=route")
    qmgr("set queue arrr max_array_size = 2")
    qmgr("set queue arrr route_destinations = workq,enabled=true,started=true")
    assert _qsub_array(engine, "1-5", "-q", "arrr") == _TOO_BIG


def test_a_users_qmove_of_an_array_too_big_for_the_queue_is_refused(engine, attacker):
    # (pbsplug's reading: the queue's limit holds whoever else moves or routes a job there,
    # as its other limits do; a manager's qmove alone is let past, checked on PBS)
    engine.pbs("qmgr", "-c", "create queue arrq2 queue_type=execution,enabled=true,"
               "started=true,max_array_size=2", check=True)
    big = attacker.pbs(engine, "qsub", "-h", "-J", "1-5", "--", "/bin/true").stdout.strip()
    assert big.endswith("]." + engine.client("status")["server"]), big
    refused = attacker.pbs(engine, "qmove", "arrq2", big)
    assert (refused.returncode, refused.stderr) == (
        3, f"qmove: Array job exceeds server or queue size limit {big}\n")
    assert engine.job(big)["queue"] == "workq"


def test_a_begun_array_is_counted_as_begun_as_openpbs(engine):
    # OpenPBS 23.06 (checked): an array with two running subjobs counts Running:2 and
    # Begun:1 in the server's and its queue's state_count, and once in total_jobs.
    job_id = engine.pbs("qsub", "-J", "1-4%2", "--", "/bin/sleep", "60",
                        check=True).stdout.strip()
    _wait_subjobs(engine, job_id, {1: "R", 2: "R"})
    server = json.loads(engine.pbs("qstat", "-Bf", "-F", "json", check=True).stdout)
    queue = json.loads(engine.pbs("qstat", "-Qf", "-F", "json", "workq", check=True).stdout)
    for attrs in (*server["Server"].values(), queue["Queue"]["workq"]):
        assert attrs["state_count"].split() == [
            "Transit:0", "Queued:0", "Held:0", "Waiting:0", "Running:2", "Exiting:0",
            "Begun:1"]
        assert attrs["total_jobs"] == 3
    assert engine.pbs("qdel", job_id).returncode == 0
    engine.wait(job_id)


def test_an_array_of_no_running_subjobs_says_why_as_openpbs(engine):
    # OpenPBS 23.06 (checked): `-J 1-3%0` stays Q with this comment; one let run begins.
    job_id = engine.pbs("qsub", "-J", "1-3%0", "--", "/bin/true", check=True).stdout.strip()
    deadline = time.monotonic() + 30
    while engine.job(job_id).get("comment") is None:
        assert time.monotonic() < deadline, "no comment on the array"
        time.sleep(0.1)
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["comment"]) == (
        "Q", "Not Running: Number of concurrent running subjobs limit reached")
    assert engine.pbs("qalter", "-W", "max_run_subjobs=3", job_id).returncode == 0
    assert engine.wait(job_id)["comment"].endswith(" and finished")
