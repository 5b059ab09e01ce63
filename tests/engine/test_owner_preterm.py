"""A qdel whose job's execjob_preterm has a ``user = pbsuser`` hook, which the job's owner
may make slow: the chain runs while the server serves, and the qdel is answered when it is
over (the job killed when it accepted; its refusal, 15136, when it did not). The job is R
meanwhile, as PBS's MoM runs the preterm hook before it kills the job."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pbsplug.engine.client import Client
from pbsplug.engine.errors import PbsError

from .conftest import until
from .owner_hooks import gone, holding_plugin, started, takes_a_job
from .test_server import plugin


def waiting_preterm(dists, root: Path) -> str:
    """A pbsuser preterm that, the first time it runs, writes its pid to `root`/started,
    waits until `root`/go exists, and then refuses a job named ``refused``."""
    return holding_plugin(dists, root, """
        @hookimpl
        def execjob_preterm(event):
            if hold_first() and event.job.Job_Name == "refused":
                event.reject("not now")
        """, ("execjob_preterm",))


def _qdel_behind(engine, *ids: str) -> tuple[threading.Thread, list]:
    """A qdel of `ids` in a thread of its own; its answer (or its error) lands in the
    list."""
    answers: list = []

    def qdel() -> None:
        try:
            answers.append(Client(engine.home, timeout=60)("delete", ids=list(ids)))
        except PbsError as refused:
            answers.append(refused)

    thread = threading.Thread(target=qdel)
    thread.start()
    return thread, answers


@pytest.mark.parametrize("name", ["accepted", "refused"])
def test_the_server_answers_while_a_qdels_pbsuser_preterm_runs(name, dists, make_engine,
                                                               engine_root):
    engine = make_engine(waiting_preterm(dists, engine_root))
    job_id = engine.submit("sleep 60\n", Job_Name=name)
    engine.wait(job_id, "R")
    thread, answers = _qdel_behind(engine, job_id, job_id)
    started(engine_root, "the preterm hook to start")
    client = Client(engine.home, timeout=20)  # (a hang guard: see takes_a_job)
    assert client("stat_jobs", ids=[job_id])[job_id]["job_state"] == "R"
    takes_a_job(engine, client)
    # Another qdel of the job meanwhile waits for the same chain.
    second, more = _qdel_behind(engine, job_id)
    assert not answers and thread.is_alive()  # the qdel waits for its preterm
    (engine_root / "go").touch()
    thread.join(60)
    second.join(60)
    errors = [a.get("error") for a in answers[0] + more[0]]
    if name == "accepted":
        assert errors == [None, None, None]
        attrs = engine.wait(job_id)
        assert attrs["comment"].startswith("Job deleted at request of root@")
        assert engine.log().count("Job to be deleted at request of root@") == 1
    else:
        assert [(e["code"], e["message"]) for e in errors] == [(15136, "not now")] * 3
        assert engine.job(job_id)["job_state"] == "R"
        engine.client("delete", ids=[job_id], force=True)
        engine.wait(job_id)


def test_a_qdel_whose_job_ends_during_its_pbsuser_preterm_is_answered(dists, make_engine,
                                                                     engine_root):
    engine = make_engine(waiting_preterm(dists, engine_root))
    gate = engine_root / "gate"
    job_id = engine.submit(f"until [ -e {gate} ]; do sleep 0.05; done; exit 7\n")
    engine.wait(job_id, "R")
    thread, answers = _qdel_behind(engine, job_id)
    pid = started(engine_root, "the preterm hook to start")
    gate.touch()
    attrs = engine.wait(job_id)  # (its end goes on: the chain is stopped)
    assert attrs["Exit_status"] == 7
    thread.join(60)
    assert [a.get("error") for a in answers[0]] == [None]
    assert "its execjob_preterm hooks were stopped" in engine.log()
    until(lambda: gone(pid), what="the hook's process to be killed")


def test_an_arrays_qdel_takes_every_subjob_and_answers_the_first_error(
        dists, make_engine, engine_root):
    # Subjob 1's preterm refuses at once (an admin hook run in the server, before the
    # pbsuser one); subjob 2's pbsuser chain runs. Every subjob is taken (the first error
    # stopped the rest: subjob 2 was never deleted, or its wait was dropped and the qdel
    # answered at once), and the array's answer is that error, as PBS's server answers
    # with its subjobs' first error.
    gate = plugin(dists, "gate", """
        @hookimpl
        def execjob_preterm(event):
            if "[1]" in event.job.id:
                event.reject("not the first")
        """, ("execjob_preterm",)) + 'isolation = "inprocess"\n'
    engine = make_engine(gate + holding_plugin(dists, engine_root, """
        @hookimpl
        def execjob_preterm(event):
            hold_first()
        """, ("execjob_preterm",), order=2))
    array = engine.pbs("qsub", "-J", "1-2", "--", "/bin/sleep", "60",
                       check=True).stdout.strip()
    first, second = (array.replace("[]", f"[{i}]") for i in (1, 2))
    engine.wait(first, "R")
    engine.wait(second, "R")
    thread, answers = _qdel_behind(engine, array)
    started(engine_root, "the second subjob's preterm to start")
    assert thread.is_alive()  # (waits for subjob 2's chain)
    (engine_root / "go").touch()
    thread.join(60)
    assert [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers[0]] == \
        [(array, 15136, "not the first")]
    assert engine.wait(second, "FX")["comment"].startswith("Job deleted at request of root@")
    assert engine.job(first)["job_state"] == "R"
    engine.client("delete", ids=[array], force=True)
    engine.wait(array)


def test_a_server_stopped_during_a_qdels_pbsuser_preterm_refuses_the_qdel(dists, make_engine,
                                                                         engine_root):
    engine = make_engine(waiting_preterm(dists, engine_root))
    job_id = engine.submit("sleep 60\n")
    engine.wait(job_id, "R")
    thread, answers = _qdel_behind(engine, job_id)
    started(engine_root, "the preterm hook to start")
    engine.stop()
    thread.join(60)
    assert str(answers[0]) == "System error: the server is stopping"
    assert "its execjob_preterm hooks were stopped: the server is stopping; the qdel " \
           "waiting for them is refused, and the job runs on" in engine.log()
    engine.start()
    assert engine.job(job_id)["job_state"] == "R"  # adopted again: it runs on
    engine.client("delete", ids=[job_id], force=True)
    engine.wait(job_id)


def test_a_forced_qdel_during_a_pbsuser_preterm_kills_the_job_and_answers_the_other(
        dists, make_engine, engine_root):
    engine = make_engine(waiting_preterm(dists, engine_root))
    job_id = engine.submit("sleep 60\n", Job_Name="refused")
    engine.wait(job_id, "R")
    thread, answers = _qdel_behind(engine, job_id)
    pid = started(engine_root, "the preterm hook to start")
    forced = Client(engine.home, timeout=20)("delete", ids=[job_id], force=True)
    assert [a.get("error") for a in forced] == [None]
    thread.join(60)
    assert [a.get("error") for a in answers[0]] == [None]  # (the job was deleted)
    assert engine.wait(job_id)["comment"].startswith("Job deleted at request of root@")
    assert not (engine_root / "go").exists()
    until(lambda: gone(pid), what="the hook's process to be killed")


def test_a_qdel_naming_a_waiting_job_again_and_again_keeps_one_waiter_and_one_result(
        inprocess_engine, monkeypatch):
    # A qdel naming the job whose preterm chain runs 200,000 times (an 8 MB body takes
    # 2,000,000) kept a result and a waiter for each until the chain was over, in the
    # root server, 32 such requests a user. Now the repeats share the first's result and
    # the chain has one waiter for the request.
    from pbsplug.engine.server import ROLE_MANAGER, Caller, _Chain, _Waits

    eng = inprocess_engine
    chain = _Chain("execjob_preterm", None, lambda outcome: None)
    asked: list[str] = []

    def delete(caller, job_id, *args, **kw):  # (12 waits for the chain; 13 is unknown)
        asked.append(job_id)
        if job_id == "12":
            raise _Waits(chain)
        raise PbsError(15001, "Unknown Job Id", obj=job_id)

    monkeypatch.setattr(eng, "_delete", delete)
    later = eng.req_delete(Caller(0, ROLE_MANAGER), ["12"] * 200_000 + ["13"])
    assert asked == ["12", "13"]
    assert (later.missing, len(chain.waiters), len(later.results)) == (1, 1, 200_001)
    assert len({id(result) for result in later.results}) == 2
    chain.answer(PbsError(15136, "not now", obj="12"))
    assert later.missing == 0
    assert later.results[0]["error"]["message"] == later.results[-2]["error"]["message"] \
        == "not now"
    assert later.results[-1]["error"]["code"] == 15001
