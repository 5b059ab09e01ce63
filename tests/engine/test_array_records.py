"""An array's own accounting records and what qstat shows of it and its subjobs, as OpenPBS
23.06 writes and shows them (each point checked on the real PBS; docs/engine.md, "Job
arrays" and "The accounting log")."""

from __future__ import annotations

import json

from pbsplug.engine import arrays

from .test_accounting import JOB_HEAD, of, records

#: Subjob 1 fails at once; the others end when their file is there (`_go`).
_FIRST_FAILS = ('if [ "$PBS_ARRAY_INDEX" = 1 ]; then exit 3; fi\n'
                'while [ ! -e "$PBS_O_WORKDIR/go" ]; do sleep 0.1; done\n')


def _keys(record: dict[str, str]) -> list[str]:
    """A record's keys in order, resources as ``Resource_List.*``."""
    return list(dict.fromkeys(k.split(".")[0] + ".*" if "." in k else k for k in record))


def test_an_array_has_its_own_s_record_at_its_first_subjob_and_e_at_its_end(engine):
    job_id = engine.pbs("qsub", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(job_id)
    recs = records(engine.home)
    mine = of(recs, job_id)
    assert [kind for kind, _ in mine] == ["Q", "S", "E"]
    (_, queued), (_, began), (_, ended) = mine
    assert _keys(queued) == [*JOB_HEAD, "array_indices", "Resource_List.*"]
    assert queued["array_indices"] == "1-3"
    assert _keys(began) == [*JOB_HEAD, "start", "array_indices", "Resource_List.*"]
    assert began["array_indices"] == "1-3"
    assert began["etime"] == queued["etime"] != "0"
    assert _keys(ended) == [*JOB_HEAD, "start", "Resource_List.*", "session", "end",
                            "Exit_status", "run_count"]
    assert (ended["session"], ended["Exit_status"], ended["run_count"]) == ("0", "0", "0")
    assert ended["start"] == began["start"]
    # Its S before its first subjob's, its E after its last subjob's.
    order = [(kind, i) for _, kind, i, _ in recs if kind in "SE"]
    first, last = arrays.subjob_id(job_id, 1), arrays.subjob_id(job_id, 3)
    assert order.index(("S", job_id)) < order.index(("S", first))
    assert order[-1] == ("E", job_id) and ("E", last) in order[:-1]


def test_a_deleted_array_has_its_d_and_its_e_once_it_began(engine):
    held = engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    engine.pbs("qdel", held, check=True)
    engine.wait(held)
    running = engine.pbs("qsub", "-J", "1-2", "--", "/bin/sleep", "60",
                         check=True).stdout.strip()
    engine.wait(arrays.subjob_id(running, 2), "R")
    engine.pbs("qdel", running, check=True)
    engine.wait(running)
    recs = records(engine.home)
    assert [kind for kind, _ in of(recs, held)] == ["Q", "D"]  # (never began: no S, no E)
    assert [kind for kind, _ in of(recs, running)] == ["Q", "S", "D", "E"]
    assert of(recs, running)[2][1] == {"requestor": f"root@{engine.job(running)['server']}"}
    order = [(kind, i) for _, kind, i, _ in recs]
    assert order.index(("D", running)) < order.index(("D", arrays.subjob_id(running, 1)))
    assert order[-1] == ("E", running)


def test_an_array_ends_with_its_last_ended_subjobs_exit_status(engine):
    """OpenPBS 23.06.06 (measured as a user): an array ends with the Exit_status of its
    subjob that ended last, 0 or 1, in qstat and in its E record: 0 when a subjob exited
    3 and the last one 0, 1 when the last one exited 3, and 1 when a qdel of the array
    killed its running subjobs (271 each); the comment says ``failed`` (substate 93) or
    ``terminated`` (91). pbsplug ended every array with 0."""
    ok_last = engine.pbs("qsub", "-J", "1-2%1", input=_FIRST_FAILS, check=True).stdout.strip()
    (engine.work / "go").touch()
    last_fails = 'if [ "$PBS_ARRAY_INDEX" = 2 ]; then exit 3; fi\n'
    failed_last = engine.pbs("qsub", "-J", "1-2%1", input=last_fails,
                             check=True).stdout.strip()
    killed = engine.pbs("qsub", "-J", "1-2", "--", "/bin/sleep", "60",
                        check=True).stdout.strip()
    engine.wait(arrays.subjob_id(killed, 2), "R")
    engine.pbs("qdel", killed, check=True)
    for job_id, status, substate, how in ((ok_last, 0, 93, "failed"),
                                          (failed_last, 1, 93, "failed"),
                                          (killed, 1, 91, "terminated")):
        attrs = engine.wait(job_id)
        assert (attrs["Exit_status"], attrs["substate"]) == (status, substate), job_id
        assert attrs["comment"].endswith(f" and {how}")
        ended = [p for kind, p in of(records(engine.home), job_id) if kind == "E"]
        assert [p["Exit_status"] for p in ended] == [str(status)], job_id
    assert engine.job(arrays.subjob_id(ok_last, 1))["Exit_status"] == 3
    assert engine.job(arrays.subjob_id(killed, 1))["Exit_status"] == 271


def _state(engine, *argv: str) -> str:
    """The S column of a one-job qstat table."""
    done = engine.pbs("qstat", *argv, check=True)
    return done.stdout.splitlines()[2].split()[4]


def test_a_finished_subjob_is_x_while_its_array_runs_on_then_f(engine):
    """OpenPBS 23.06 (checked): while its array runs on, a finished subjob is X to `qstat
    12[1]`, `-x`, `-f` and `-t`; once the array is over, F (`-x` and `-xf` only)."""
    job_id = engine.pbs("qsub", "-J", "1-3%1", input=_FIRST_FAILS,
                        check=True).stdout.strip()
    first = arrays.subjob_id(job_id, 1)
    engine.wait(arrays.subjob_id(job_id, 2), "R")
    assert _state(engine, first) == "X"
    assert _state(engine, "-x", first) == "X"
    shown = json.loads(engine.pbs("qstat", "-f", "-F", "json", first, check=True).stdout)
    assert shown["Jobs"][first]["job_state"] == "X"
    table = engine.pbs("qstat", "-t", job_id, check=True).stdout.splitlines()[2:]
    assert [line.split()[4] for line in table] == ["B", "X", "R", "Q"]
    (engine.work / "go").touch()
    engine.wait(job_id)
    assert _state(engine, "-x", first) == "F"
    shown = json.loads(engine.pbs("qstat", "-xf", "-F", "json", first, check=True).stdout)
    assert shown["Jobs"][first]["job_state"] == "F"
    assert engine.pbs("qstat", first).returncode == 35  # (Job has finished, use -x)


def test_a_subjob_not_begun_shows_its_arrays_comment(engine):
    """OpenPBS 23.06 (checked): `qstat -f 12[3]` and `qstat -t -f` show a subjob not begun
    with its array's comment (``Job Array Began at ...``)."""
    job_id = engine.pbs("qsub", "-J", "1-3%1", "--", "/bin/sleep", "60",
                        check=True).stdout.strip()
    engine.wait(arrays.subjob_id(job_id, 1), "R")
    began = engine.job(job_id)["comment"]
    assert began.startswith("Job Array Began at ")
    third = arrays.subjob_id(job_id, 3)
    alone = json.loads(engine.pbs("qstat", "-f", "-F", "json", third, check=True).stdout)
    assert (alone["Jobs"][third]["job_state"], alone["Jobs"][third]["comment"]) == ("Q", began)
    listed = json.loads(engine.pbs("qstat", "-t", "-f", "-F", "json", job_id,
                                   check=True).stdout)["Jobs"]
    assert [listed[arrays.subjob_id(job_id, i)].get("comment") for i in (2, 3)] == [began] * 2
    engine.pbs("qdel", job_id, check=True)


def test_a_running_array_shows_its_last_ended_subjobs_exit_status(engine):
    """OpenPBS 23.06 (checked): while an array runs on, its Exit_status is 1 after a
    subjob that did not exit 0 and 0 again after one that did, and its subjobs not begun
    show it; at its end, its last subjob's."""
    # (each subjob waits for its file: the first's `exit 3` came before the first read of
    # the array on a loaded machine)
    script = ('case "$PBS_ARRAY_INDEX" in 1) f=go;; 2) f=a;; *) f=b;; esac\n'
              'while [ ! -e "$PBS_O_WORKDIR/$f" ]; do sleep 0.1; done\n'
              '[ "$PBS_ARRAY_INDEX" != 1 ] || exit 3\n')
    job_id = engine.pbs("qsub", "-J", "1-3%1", input=script, check=True).stdout.strip()
    engine.wait(arrays.subjob_id(job_id, 1), "R")
    assert "Exit_status" not in engine.job(job_id)
    (engine.work / "go").touch()
    engine.wait(arrays.subjob_id(job_id, 2), "R")
    assert engine.job(job_id)["Exit_status"] == 1
    assert engine.job(arrays.subjob_id(job_id, 3))["Exit_status"] == 1
    (engine.work / "a").touch()
    engine.wait(arrays.subjob_id(job_id, 3), "R")
    assert engine.job(job_id)["Exit_status"] == 0
    (engine.work / "b").touch()
    assert engine.wait(job_id)["Exit_status"] == 0
