"""qrerun of an array whose subjobs are not rerunnable or suspended, and of a suspended job,
as OpenPBS 23.06.06 answered them (measured on it: exit statuses, messages, what was
requeued); pbsplug's array qrerun stays all or nothing where PBS's requeued part of it."""

from __future__ import annotations

import pytest

from pbsplug.engine import arrays
from pbsplug.engine.client import Client
from pbsplug.engine.errors import PbsError

from .conftest import until
from .owner_hooks import started
from .test_owner_epilogue import waiting_end

#: Index 1 ends at once (exit 3), the others run until killed.
SCRIPT = '[ "$PBS_ARRAY_INDEX" = 1 ] && exit 3\nsleep 60\n'


def _array_begun(engine, not_rerunnable: bool = False) -> tuple[str, list[str]]:
    """An array of three (scheduling off, each subjob run with qrun, as measured): [1]
    finished (X), [2] and [3] running; `not_rerunnable`: ``qalter -r n`` of it first (qsub
    refuses ``-r n`` with ``-J``), which its subjobs then take."""
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    job_id = engine.pbs("qsub", "-J", "1-3", input=SCRIPT, check=True).stdout.strip()
    if not_rerunnable:
        assert engine.pbs("qalter", "-r", "n", job_id).returncode == 0
    subs = [arrays.subjob_id(job_id, i) for i in (1, 2, 3)]
    engine.pbs("qrun", subs[0], check=True)
    engine.wait(subs[0], "X")
    for sub in subs[1:]:
        engine.pbs("qrun", sub, check=True)
        engine.wait(sub, "R")
    return job_id, subs


def _states(engine, subs: list[str]) -> list[tuple[str, int]]:
    return [(engine.job(s)["job_state"], engine.job(s)["run_count"]) for s in subs]


def test_qrerun_of_an_array_with_subjobs_not_rerunnable_is_15038_unless_forced(engine):
    job_id, subs = _array_begun(engine, not_rerunnable=True)
    assert engine.job(job_id)["Rerunable"] is False
    assert engine.job(subs[2])["Rerunable"] is False
    before = _states(engine, subs)
    refused = engine.pbs("qrerun", job_id)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        190, "", f"qrerun: job is not rerunnable {job_id}\n")
    assert _states(engine, subs) == before  # (PBS requeued [1] all the same)
    one = engine.pbs("qrerun", subs[1])
    assert (one.returncode, one.stderr) == (190, f"qrerun: job is not rerunnable {subs[1]}\n")
    done = engine.pbs("qrerun", "-W", "force", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    for sub in subs:
        until(lambda s=sub: engine.job(s)["job_state"] == "Q", timeout=30,
              what=f"{sub} requeued")
    assert engine.job(job_id)["job_state"] == "B"
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_a_subjob_started_before_qalter_r_n_is_requeued_by_the_arrays_qrerun(engine):
    job_id, subs = _array_begun(engine)
    assert engine.pbs("qalter", "-r", "n", job_id).returncode == 0
    assert engine.job(subs[1])["Rerunable"] is True  # (PBS's too)
    done = engine.pbs("qrerun", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    for sub in subs:
        until(lambda s=sub: engine.job(s)["job_state"] == "Q", timeout=30,
              what=f"{sub} requeued")
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_an_array_not_rerunnable_with_no_subjob_running_is_requeued(engine):
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    job_id = engine.pbs("qsub", "-J", "1-3", input=SCRIPT, check=True).stdout.strip()
    assert engine.pbs("qalter", "-r", "n", job_id).returncode == 0
    first = arrays.subjob_id(job_id, 1)
    engine.pbs("qrun", first, check=True)
    engine.wait(first, "X")
    done = engine.pbs("qrerun", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    assert engine.job(first)["job_state"] == "Q"
    engine.pbs("qdel", job_id, check=True)


def test_qrerun_of_an_array_with_a_suspended_subjob_is_15016_unless_forced(engine):
    job_id, subs = _array_begun(engine)
    assert engine.pbs("qsig", "-s", "suspend", subs[1]).returncode == 0
    engine.wait(subs[1], "S")
    before = _states(engine, subs)
    refused = engine.pbs("qrerun", job_id)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        168, "", f"qrerun: Request invalid for state of job {job_id}\n")
    # (PBS requeued [1] and killed and requeued [3]; the suspended one stayed S)
    assert _states(engine, subs) == before
    one = engine.pbs("qrerun", subs[1])
    assert (one.returncode, one.stderr) == (
        168, f"qrerun: Request invalid for state of job {subs[1]}\n")
    done = engine.pbs("qrerun", "-W", "force", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    for sub in subs:  # (the suspended one woken, killed and requeued too)
        until(lambda s=sub: engine.job(s)["job_state"] == "Q", timeout=30,
              what=f"{sub} requeued")
    engine.pbs("qrun", subs[1], check=True)
    attrs = engine.wait(subs[1], "R")
    assert attrs["run_count"] == 2
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_not_rerunnable_is_answered_before_suspended(engine):
    job_id, subs = _array_begun(engine, not_rerunnable=True)
    assert engine.pbs("qsig", "-s", "suspend", subs[1]).returncode == 0
    engine.wait(subs[1], "S")
    refused = engine.pbs("qrerun", job_id)
    assert (refused.returncode, refused.stderr) == (
        190, f"qrerun: job is not rerunnable {job_id}\n")
    one = engine.pbs("qrerun", subs[1])
    assert (one.returncode, one.stderr) == (190, f"qrerun: job is not rerunnable {subs[1]}\n")
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_qrerun_of_a_suspended_job(engine):
    jobs = [engine.pbs("qsub", *opt, "--", "/bin/sleep", "60", check=True).stdout.strip()
            for opt in ((), ("-r", "n"))]
    for job_id in jobs:
        engine.wait(job_id, "R")
        assert engine.pbs("qsig", "-s", "suspend", job_id).returncode == 0
        engine.wait(job_id, "S")
    rerunnable, not_rerunnable = jobs
    refused = engine.pbs("qrerun", rerunnable)
    assert (refused.returncode, refused.stderr) == (
        168, f"qrerun: Request invalid for state of job {rerunnable}\n")
    refused = engine.pbs("qrerun", not_rerunnable)
    assert (refused.returncode, refused.stderr) == (
        190, f"qrerun: job is not rerunnable {not_rerunnable}\n")
    for job_id in jobs:
        assert engine.job(job_id)["job_state"] == "S"
        done = engine.pbs("qrerun", "-W", "force", job_id)
        assert (done.returncode, done.stderr) == (0, "")
        until(lambda j=job_id: engine.job(j)["run_count"] == 2, timeout=30,
              what=f"{job_id} requeued and run again")
        engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_qrerun_of_a_queued_job_not_rerunnable_is_15038(engine):
    held = engine.pbs("qsub", "-h", "-r", "n", "--", "/bin/true", check=True).stdout.strip()
    refused = engine.pbs("qrerun", held)
    assert (refused.returncode, refused.stderr) == (
        190, f"qrerun: job is not rerunnable {held}\n")
    forced = engine.pbs("qrerun", "-W", "force", held)
    assert (forced.returncode, forced.stderr) == (
        168, f"qrerun: Request invalid for state of job {held}\n")


def test_qrerun_of_a_queued_subjob_is_15016_whatever_its_rerunable(engine):
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    job_id = engine.pbs("qsub", "-J", "1-3", input=SCRIPT, check=True).stdout.strip()
    assert engine.pbs("qalter", "-r", "n", job_id).returncode == 0
    second, third = (arrays.subjob_id(job_id, i) for i in (2, 3))
    engine.pbs("qrun", second, check=True)
    engine.wait(second, "R")
    assert engine.job(job_id)["job_state"] == "B"
    for opts in ((), ("-W", "force")):
        refused = engine.pbs("qrerun", *opts, third)
        assert (refused.returncode, refused.stderr) == (
            168, f"qrerun: Request invalid for state of job {third}\n")
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_an_array_is_begun_as_its_first_subjob_runs(engine):
    """As OpenPBS 23.06.06 showed it right after ``qrun 12[1]`` (measured): ``qstat -t``
    and ``qstat -f 12[]`` both B, substate 70, its comment ``Job Array Began at``."""
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    job_id = engine.pbs("qsub", "-J", "1-3", input=SCRIPT, check=True).stdout.strip()
    assert engine.job(job_id)["job_state"] == "Q"
    second = arrays.subjob_id(job_id, 2)
    engine.pbs("qrun", second, check=True)
    shown = engine.pbs("qstat", "-t", job_id, check=True).stdout.splitlines()[2:]
    assert [(line.split()[0], line.split()[4]) for line in shown] == [
        (job_id, "B"), (arrays.subjob_id(job_id, 1), "Q"), (second, "R"),
        (arrays.subjob_id(job_id, 3), "Q")]
    attrs = engine.job(job_id)
    assert (attrs["job_state"], attrs["substate"]) == ("B", 70)
    assert attrs["comment"].startswith("Job Array Began at ")
    assert attrs["array_state_count"] == "Queued:2 Running:1 Exiting:0 Expired:0"
    engine.pbs("qdel", "-W", "force", job_id, check=True)


def test_a_subjob_in_its_end_hooks_is_15016_whatever_its_rerunable(dists, make_engine,
                                                                   engine_root):
    # A subjob in E (its pbsuser epilogue held) is not running: its qrerun is 15016, forced
    # or not, its Rerunable (False) not looked at; it answered 15038. The array's qrerun
    # gives no 15038 for it either (it answered 15038 naming the array): a running subjob
    # not rerunnable is the array's 15038 first, then the one in E refuses the qrerun with
    # 15016 naming it (pbsplug's all or nothing, as for one in its prologue), forced too.
    # (Its third subjob stays queued: the array is not finished when the first two are.)
    engine = make_engine(waiting_end(dists, engine_root))
    engine.pbs("qmgr", "-c", "set server scheduling = false", check=True)
    job_id = engine.pbs("qsub", "-J", "1-3", input=SCRIPT, check=True).stdout.strip()
    assert engine.pbs("qalter", "-r", "n", job_id).returncode == 0
    exiting, running, queued = (arrays.subjob_id(job_id, i) for i in (1, 2, 3))
    engine.pbs("qrun", exiting, check=True)  # (exits 3: its epilogue holds it in E)
    started(engine_root, "the first subjob's epilogue to start")
    engine.pbs("qrun", running, check=True)
    engine.wait(running, "R")
    attrs = engine.job(exiting)
    assert (attrs["job_state"], attrs["substate"], attrs["Rerunable"]) == ("E", 57, False)
    assert engine.job(running)["Rerunable"] is False
    for opts in ((), ("-W", "force")):
        refused = engine.pbs("qrerun", *opts, exiting)
        assert (refused.returncode, refused.stderr) == (
            168, f"qrerun: Request invalid for state of job {exiting}\n")
    refused = engine.pbs("qrerun", job_id)
    assert (refused.returncode, refused.stderr) == (
        190, f"qrerun: job is not rerunnable {job_id}\n")
    refused = engine.pbs("qrerun", "-W", "force", job_id)
    assert (refused.returncode, refused.stderr) == (
        168, f"qrerun: Request invalid for state of job {job_id}\n")
    assert engine.job(running)["job_state"] == "R"
    engine.pbs("qdel", "-W", "force", running, check=True)
    engine.wait(running, "FX")
    refused = engine.pbs("qrerun", job_id)
    assert (refused.returncode, refused.stderr) == (
        168, f"qrerun: Request invalid for state of job {job_id}\n")
    with pytest.raises(PbsError) as named:  # (the request's error names the subjob)
        Client(engine.home, timeout=20)("rerun", ids=[job_id])
    assert (named.value.code, named.value.obj) == (15016, exiting)
    assert engine.job(running)["job_state"] in ("F", "X")
    (engine_root / "go").touch()
    engine.wait(exiting, "FX")
    done = engine.pbs("qrerun", job_id)
    assert (done.returncode, done.stderr) == (0, "")
    assert _states(engine, [exiting, running, queued]) == [("Q", 1), ("Q", 1), ("Q", 0)]
    engine.pbs("qdel", job_id, check=True)
