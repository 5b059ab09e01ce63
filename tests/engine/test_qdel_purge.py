"""qdel -x: a job's history purged, as OpenPBS 23.06 does it (checked: a finished job at
once; a queued, held or running one deleted, then purged; its owner or a manager may,
another user gets Unauthorized Request)."""

from __future__ import annotations

import pytest

from pbsplug.engine import arrays

from .conftest import until
from .test_accounting import of, records


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


#: An array's script: subjob 1 exits 0 at once, the others sleep until they are killed.
_FIRST_ENDS = 'if [ "$PBS_ARRAY_INDEX" = 1 ]; then exit 0; fi\nsleep 60\n'


def _purged(engine, job_id: str) -> bool:
    return f"{job_id};Job history purged at request of root@" in engine.log()


def test_qdel_x_of_a_running_array_purges_it_and_its_subjobs_once_it_is_over(engine):
    """qdel -x 12[] of an array with a subjob over (12[1]), one running (12[2]) and one
    not begun (12[3]): the array and every subjob are gone from the history once the
    array is over, as OpenPBS 23.06.06's server marks the array and its subjobs (read in
    its source). pbsplug passed no -x to the subjobs and none to the array: all stayed."""
    job_id = engine.pbs("qsub", "-J", "1-3%1", input=_FIRST_ENDS, check=True).stdout.strip()
    subs = [arrays.subjob_id(job_id, i) for i in (1, 2, 3)]
    engine.wait(subs[1], "R")
    done = engine.pbs("qdel", "-x", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    until(lambda: _gone(engine, job_id), timeout=30, what=f"array {job_id} to be purged")
    assert [sub for sub in subs if not _gone(engine, sub)] == []
    assert [ran for ran in (job_id, *subs[:2]) if not _purged(engine, ran)] == []


def test_qdel_x_of_an_array_not_begun_purges_it_at_once(engine):
    job_id = engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true",
                        check=True).stdout.strip()
    done = engine.pbs("qdel", "-x", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert _gone(engine, job_id)
    assert _gone(engine, arrays.subjob_id(job_id, 2))


def test_qdel_x_of_subjobs_purges_each_once_it_is_over(engine):
    """qdel -x 12[1-2] of a running array: 12[1], over already, is purged at once, 12[2]
    once its run has ended, as OpenPBS 23.06.06's server does (read in its source); 12[3]
    and the array run on. pbsplug passed no -x to a range's subjobs."""
    job_id = engine.pbs("qsub", "-J", "1-3%1", input=_FIRST_ENDS, check=True).stdout.strip()
    number = job_id.split("[")[0]
    first, second, third = (arrays.subjob_id(job_id, i) for i in (1, 2, 3))
    engine.wait(second, "R")
    done = engine.pbs("qdel", "-x", f"{number}[1-2]")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert _purged(engine, first)
    until(lambda: _purged(engine, second), timeout=30, what=f"{second} to be purged")
    engine.wait(third, "R")
    array = engine.job(job_id)
    for sub in (first, second):  # (shown as an index gone, made from its array: PBS's X)
        attrs = engine.job(sub)
        assert (attrs["job_state"], attrs["comment"]) == ("X", "Subjob finished"), sub
        assert [attrs.get(k) for k in ("stime", "substate", "Exit_status")] == [
            array["stime"], 70, array["Exit_status"]], sub
    engine.pbs("qdel", job_id, check=True)
    array = engine.wait(job_id)
    assert array["comment"].endswith(" and terminated")
    assert not _purged(engine, job_id)
    attrs = engine.job(second)
    assert [attrs.get(k) for k in ("job_state", "stime", "substate", "Exit_status")] == [
        "F", array["stime"], 91, array["Exit_status"]]


@pytest.mark.parametrize(("indices", "status", "substate", "how"), [
    ("1-3%1", 0, 92, "finished"), ("1-2%1", 1, 91, "terminated")])
def test_a_subjob_purged_counts_no_more_at_its_arrays_end(engine, indices, status,
                                                          substate, how):
    """qdel -x 12[2] of a running subjob: its history goes when its run ends, and the
    array counts it as an index that never began (Expired), as OpenPBS 23.06.06 did
    (measured as a user, ``sh -c`` sleeping in index 2): 1-3 ends later with 12[3],
    ``and finished``, Exit_status 0; 1-2 ends with 12[2] itself, killed by the qdel,
    ``and terminated``, Exit_status 1 (PBS's ``Exiting:-1`` there is not kept). pbsplug
    counted the purged subjob as one that ran and failed: ``and failed``, Expired:0."""
    script = 'if [ "$PBS_ARRAY_INDEX" = 2 ]; then sleep 60; fi\n'
    job_id = engine.pbs("qsub", "-J", indices, input=script, check=True).stdout.strip()
    second = arrays.subjob_id(job_id, 2)
    engine.wait(second, "R")
    done = engine.pbs("qdel", "-x", second)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    attrs = engine.wait(job_id)
    until(lambda: _purged(engine, second), timeout=30, what=f"{second} to be purged")
    assert (attrs["Exit_status"], attrs["substate"], attrs["comment"].rsplit(" ", 1)[-1]) == (
        status, substate, how)
    assert engine.job(job_id)["array_state_count"] == (
        "Queued:0 Running:0 Exiting:0 Expired:1")
    assert engine.job(second)["comment"] == "Subjob finished"


def test_a_subjob_deleted_makes_its_array_end_terminated(engine):
    """qdel 12[2] (no -x) of a running subjob: the array, ending later with 12[3] exiting
    0, ends ``and terminated`` (substate 91) with Exit_status 0, as OpenPBS 23.06.06 did
    (measured as a user). pbsplug ended it ``and failed``."""
    script = 'if [ "$PBS_ARRAY_INDEX" = 2 ]; then sleep 60; fi\n'
    job_id = engine.pbs("qsub", "-J", "1-3%1", input=script, check=True).stdout.strip()
    engine.wait(arrays.subjob_id(job_id, 2), "R")
    engine.pbs("qdel", arrays.subjob_id(job_id, 2), check=True)
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["substate"], attrs["comment"].rsplit(" ", 1)[-1]) == (
        0, 91, "terminated")


def test_qdel_of_a_finished_arrays_subjobs_is_15139_and_with_x_15159(engine):
    """Once the array is over, qdel of a subjob or a range is 15139 (exit 35) and qdel -x
    of one is 15159 (exit 55), and no history goes, as OpenPBS 23.06.06 answered
    (measured as a user: ``qdel -x 1630[3]``, ``qdel -x 1630[2-3]``). pbsplug purged
    12[3] and answered 15139 for the range."""
    job_id = engine.pbs("qsub", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(job_id)
    third = arrays.subjob_id(job_id, 3)
    range_id = third.replace("[3]", "[2-3]")
    answers = [engine.pbs("qdel", *args) for args in (
        [third], ["-x", third], [range_id], ["-x", range_id])]
    assert [(done.returncode, done.stderr) for done in answers] == [
        (35, f"qdel: Job has finished {third}\n"),
        (55, f"qdel: Request invalid for finished array subjob {third}\n"),
        (35, f"qdel: Job has finished {range_id}\n"),
        (55, f"qdel: Request invalid for finished array subjob {range_id}\n")]
    shown = engine.client("stat_jobs", ids=[job_id], history=True, subjobs=True)
    assert {sub: attrs["job_state"] for sub, attrs in shown.items()} == {
        job_id: "F", **{arrays.subjob_id(job_id, i): "F" for i in (1, 2, 3)}}
    assert not _purged(engine, third)


def test_qdel_of_a_subjob_over_while_its_array_runs_is_15159_and_keeps_it(engine):
    """A subjob over (12[1]) while its array runs on: qdel and qdel -x of it are 15159
    (exit 55), and its history stays, as OpenPBS 23.06.06 answered (measured as a user:
    ``qdel 1632[1]``, ``qdel -x 1632[1]``, then ``qstat -xf 1632[1]`` as before). pbsplug
    answered 15139 and purged it at the -x."""
    job_id = engine.pbs("qsub", "-J", "1-3%1", input=_FIRST_ENDS, check=True).stdout.strip()
    first, second = (arrays.subjob_id(job_id, i) for i in (1, 2))
    engine.wait(second, "R")
    answers = [engine.pbs("qdel", *args) for args in ([first], ["-x", first])]
    assert [(done.returncode, done.stderr) for done in answers] == [
        (55, f"qdel: Request invalid for finished array subjob {first}\n")] * 2
    attrs = engine.job(first)
    assert (attrs["job_state"], attrs["Exit_status"], attrs.get("stime") is None) == (
        "X", 0, False)
    assert not _purged(engine, first)
    engine.pbs("qdel", job_id, check=True)
    engine.wait(job_id)


def test_qdel_names_a_job_over_as_openpbs_does(engine):
    """`Job has finished` names the job by its full id when the server holds it (a job,
    an array, a subjob that ran) and a range, or a subjob that never ran, as given
    without its ``@server``, as OpenPBS 23.06.06's qdel printed them (measured: ``qdel
    1620``: ``1620.vm``; ``qdel 1629[3]``: ``1629[3].vm``; ``qdel 1629[2-3]``: ``1629[2-3]``;
    ``qdel 1633[2-3]@vm``: ``1633[2-3]``; ``qdel 1633[2]`` of an array deleted before it
    ran: ``1633[2]``). pbsplug named each as given."""
    plain = engine.submit("true\n")
    ran = engine.pbs("qsub", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    held = engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    engine.pbs("qdel", held, check=True)
    for job_id in (plain, ran, held):
        engine.wait(job_id)
    number, server = plain.split(".", 1)
    array = ran.split("[")[0]
    never = held.split("[")[0]
    asked = {number: plain, f"{array}[]": ran, f"{array}[3]": f"{array}[3].{server}",
             f"{array}[3]@{server}": f"{array}[3].{server}",
             f"{array}[2-3]": f"{array}[2-3]", f"{array}[2-3].{server}": f"{array}[2-3].{server}",
             f"{never}[2-3]@{server}": f"{never}[2-3]", f"{never}[2]": f"{never}[2]"}
    for given, named in asked.items():
        done = engine.pbs("qdel", given)
        assert (done.returncode, done.stderr) == (35, f"qdel: Job has finished {named}\n"), given


def test_qdel_merges_the_subjobs_of_one_array_as_openpbs_does(engine):
    """OpenPBS 23.06.06's qdel (measured as a user) sends the jobs named first, then each
    array's ids in the order its first came, the subjobs of one array merged into one id:
    ``qdel 2504[1] 2504[2] 2504[3]`` printed ``qdel: Job has finished 2504[1-3]`` once,
    ``2504[3] 2504[1]`` ``2504[1,3]``, ``2504[1] 2506`` 2506's line first, ``2505[2]
    2504[1] 2505[1]`` ``2505[1-2]`` then ``2504[1].vm``, ``qdel -x 2504[1] 2504[2]``
    ``Request invalid for finished array subjob 2504[1-2].vm`` (exit 55). pbsplug printed
    one line per id, in the order given."""
    plain = engine.submit("true\n")
    first = engine.pbs("qsub", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    second = engine.pbs("qsub", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    for job_id in (plain, first, second):
        engine.wait(job_id)
    a, b = first.split("[")[0], second.split("[")[0]
    number, server = plain.split(".", 1)
    finished = "qdel: Job has finished "
    asked = {(f"{a}[1]", f"{a}[2]", f"{a}[3]"): (35, [f"{a}[1-3]"]),
             (f"{a}[3]", f"{a}[1]"): (35, [f"{a}[1,3]"]),
             (f"{a}[1-2]", f"{a}[3]"): (35, [f"{a}[1-3]"]),
             (f"{a}[1]", number): (35, [plain, f"{a}[1].{server}"]),
             (f"{b}[2]", f"{a}[1]", f"{b}[1]"): (35, [f"{b}[1-2]", f"{a}[1].{server}"])}
    for given, (code, named) in asked.items():
        done = engine.pbs("qdel", *given)
        assert (done.returncode, done.stdout, done.stderr) == (
            code, "", "".join(f"{finished}{n}\n" for n in named)), given
    done = engine.pbs("qdel", "-x", f"{a}[1]", f"{a}[2]")
    assert (done.returncode, done.stderr) == (
        55, f"qdel: Request invalid for finished array subjob {a}[1-2].{server}\n")
    assert not _purged(engine, arrays.subjob_id(first, 1))


def test_qdel_of_an_index_of_thousands_of_digits_beside_another_is_answered(engine):
    """An index too long for ``int`` (4,300 digits and more) beside another subjob of its
    array is not merged: the server answers each id, with no traceback (merging them
    raised ValueError in the command), and names no subjob (the server answered
    ``Invalid request:`` and Python's ValueError text for the whole request)."""
    job_id = engine.pbs("qsub", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(job_id)
    number = job_id.split("[")[0]
    huge = f"{number}[{'1' * 5000}]"
    done = engine.pbs("qdel", huge, f"{number}[1]")
    lines = done.stderr.splitlines()
    assert "Traceback" not in done.stderr and len(lines) == 2, done.stderr[-500:]
    assert lines[0].endswith(huge) and lines[1].startswith("qdel: Job has finished "), lines
    for command in ("qstat", "qhold"):  # (the server answered Python's ValueError text)
        done = engine.pbs(command, huge)
        assert (done.returncode, done.stderr) == (
            153, f"{command}: Unknown Job Id {huge}.{job_id.split('.', 1)[1]}\n")


def test_qdel_of_a_range_written_backwards_beside_a_subjob_says_its_error(engine):
    """``12[3-1]`` names no index (``Unknown Job Id 12[3-1]``, 153). Merged with ``12[2]``
    of the same array it was taken into 12[2]'s run and never sent: qdel printed 12[2]'s
    line alone, and the id given wrong went unsaid. It is sent as it is now."""
    job_id = engine.pbs("qsub", "-J", "1-3", "--", "/bin/true", check=True).stdout.strip()
    engine.wait(job_id)
    number, server = job_id.split("[")[0], job_id.split(".", 1)[1]
    for given in ((f"{number}[2]", f"{number}[3-1]"), (f"{number}[3-1]", f"{number}[2]")):
        done = engine.pbs("qdel", *given)
        assert (done.stdout, done.stderr) == ("", (
            f"qdel: Unknown Job Id {number}[3-1]\n"
            f"qdel: Job has finished {number}[2].{server}\n")), given
        assert done.returncode == 35, given


def test_qdel_of_subjobs_merged_names_an_index_the_array_has_not_next_to_one_it_has(
        engine):
    """``12[3] 12[4]`` of an array 12[1-3]: the two were merged into the range 12[3-4],
    which has an index of the array, so 12[4] went unsaid and qdel exited 0; ``12[2]
    12[5]``, merged but not touching, was sent as two ranges and named 12[5]. Each given
    range is sent alone now unless they overlap: the one with no index of the array is
    the merged id's error either way, as for a range (``Invalid request``, 156)."""
    job_id = engine.pbs("qsub", "-h", "-J", "1-3", "--", "/bin/true",
                        check=True).stdout.strip()
    number, server = job_id.split("[")[0], job_id.split(".", 1)[1]
    for given, named in (((f"{number}[3]", f"{number}[4]"), "3-4"),
                         ((f"{number}[2]", f"{number}[5]"), "2,5")):
        done = engine.pbs("qdel", *given)
        assert (done.returncode, done.stdout, done.stderr) == (
            156, "", f"qdel: Invalid request {number}[{named}].{server}\n"), given
    assert engine.job(job_id)["array_indices_remaining"] == "1"  # (2 and 3 deleted)
    engine.pbs("qdel", job_id, check=True)


def test_qdel_of_merged_subjobs_lets_one_over_be(engine):
    """``qdel 3004[1] 3004[2]``, 3004[1] over and 3004[2] running, their array running:
    one id to OpenPBS 23.06.06's qdel, taken as a range is: exit 0, nothing printed,
    3004[2] killed (measured as a user). pbsplug answered 15159 for 3004[1]."""
    job_id = engine.pbs("qsub", "-J", "1-3%1", input=_FIRST_ENDS, check=True).stdout.strip()
    first, second = (arrays.subjob_id(job_id, i) for i in (1, 2))
    engine.wait(second, "R")
    number = job_id.split("[")[0]
    done = engine.pbs("qdel", f"{number}[1]", f"{number}[2]")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert engine.wait(second, "X")["substate"] == 91
    assert engine.job(first)["substate"] == 92  # (let be, its history kept)
    engine.pbs("qdel", job_id, check=True)
    engine.wait(job_id)


def test_qrerun_of_an_array_while_its_qdel_x_kills_it(engine):
    """qdel -x 12[], then qrerun 12[] while the subjobs' kill is under way (they ignore
    SIGTERM): the qrerun stands, each subjob is requeued and runs again to its end, and
    then the array's history and its subjobs' go, as OpenPBS 23.06.06 did (measured as a
    user, 2510[]: ``Job Rerun`` for each, a second S and an E each, then ``Also deleted
    job history`` and ``qstat -xt 2510[]`` Unknown Job Id)."""
    script = ('trap "" TERM\n'
              'touch "$PBS_O_WORKDIR/trapped.$PBS_ARRAY_INDEX"\n'
              'while [ ! -e "$PBS_O_WORKDIR/go" ]; do sleep 0.1; done\n')
    job_id = engine.pbs("qsub", "-J", "1-2", input=script, check=True).stdout.strip()
    subs = [arrays.subjob_id(job_id, i) for i in (1, 2)]
    for sub in subs:
        engine.wait(sub, "R")
    for i in (1, 2):  # (the qdel's SIGTERM before the trap ended the subjob: nothing to rerun)
        until((engine.work / f"trapped.{i}").exists, what=f"subjob {i} to ignore SIGTERM")
    engine.pbs("qdel", "-x", job_id, check=True)
    engine.pbs("qrerun", job_id, check=True)
    (engine.work / "go").touch()
    until(lambda: _gone(engine, job_id), timeout=60, what=f"array {job_id} to be purged")
    assert [sub for sub in subs if not _gone(engine, sub)] == []
    recs = records(engine.home)
    for sub in subs:
        assert [kind for kind, _ in of(recs, sub)] == ["S", "D", "R", "S", "E"], sub
    assert [kind for kind, _ in of(recs, job_id)] == ["Q", "S", "D", "E"]
