"""A qdel whose job's execjob_preterm has a ``user = pbsuser`` hook, which the job's owner
may make slow: the chain runs while the server serves, and the qdel is answered when it is
over (the job killed when it accepted; its refusal, 15136, when it did not). The job is R
meanwhile, as PBS's MoM runs the preterm hook before it kills the job."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from pbsplug.engine.client import Client, ServerUnavailable
from pbsplug.engine.errors import PbsError

from .conftest import accounting_records, deleted_once, until
from .owner_hooks import gone, holding_plugin, server_goes, started, takes_a_job
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


def _qdel_behind(engine, *ids: str, **options: bool) -> tuple[threading.Thread, list]:
    """A qdel of `ids` (with `options`: ``purge=True``) in a thread of its own; its answer
    (or its error) lands in the list."""
    answers: list = []

    def qdel() -> None:
        try:
            answers.append(Client(engine.home, timeout=60)("delete", ids=list(ids),
                                                           **options))
        except (PbsError, ServerUnavailable) as refused:  # (the server killed: no answer)
            answers.append(refused)

    thread = threading.Thread(target=qdel)
    thread.start()
    return thread, answers


def _qdel_waiting(dists, make_engine, engine_root):
    """An engine whose execjob_preterm (pbsuser) waits, a job running there (``sleep 60``),
    and a qdel of it behind, its preterm started: the engine, the job, the qdel's thread
    and answers."""
    engine = make_engine(waiting_preterm(dists, engine_root))
    job_id = engine.submit("sleep 60\n")
    engine.wait(job_id, "R")
    thread, answers = _qdel_behind(engine, job_id)
    started(engine_root, "the preterm hook to start")
    return engine, job_id, thread, answers


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


@pytest.mark.parametrize("how", ["ended", "lost", "qrerun"])
def test_a_qdel_whose_job_ends_during_its_pbsuser_preterm_is_taken(how, dists, make_engine,
                                                                  engine_root):
    # The run ends meanwhile (its processes, its shepherd, or a qrerun's kill): the chain is
    # stopped and the waiting qdel taken as one that comes as the run ends: answered,
    # logged and written once (D), the job ended deleted (its own Exit_status), not
    # requeued as a lost job; a qrerun's requeue stands, as PBS's server deletes "instead
    # of rerunning" and the job is requeued all the same (`_delete_requeued`).
    engine = make_engine(waiting_preterm(dists, engine_root))
    gate, mark = engine_root / "gate", engine_root / "ran"
    script = {"ended": f"until [ -e {gate} ]; do sleep 0.05; done; exit 7\n",
              "lost": f"[ -e {mark} ] && exit 0\ntouch {mark}\n"  # (a second run ends)
                      f"until [ -e {gate} ]; do sleep 0.05; done; kill -9 $PPID; sleep 60\n",
              "qrerun": "sleep 60\n"}[how]
    job_id = engine.submit(script)
    engine.wait(job_id, "R")
    thread, answers = _qdel_behind(engine, job_id)
    pid = started(engine_root, "the preterm hook to start")
    if how == "qrerun":
        engine.pbs("qrerun", job_id, check=True)
    else:
        gate.touch()
    thread.join(60)
    assert [a.get("error") for a in answers[0]] == [None]
    assert "its execjob_preterm hooks were stopped" in engine.log()
    until(lambda: gone(pid), what="the hook's process to be killed")
    if how == "qrerun":
        attrs = engine.wait(job_id, "R")  # (requeued, and run again)
        assert "its run is being ended for a requeue, which stands" in engine.log()
        engine.client("delete", ids=[job_id], force=True)
        engine.wait(job_id)
    else:
        attrs = engine.wait(job_id)
        assert attrs["comment"].startswith("Job deleted at request of root@"), attrs
        assert (attrs["Exit_status"], attrs["run_count"]) == \
            ({"ended": 7, "lost": -4}[how], 1)
    deleted_once(engine, job_id, 2 if how == "qrerun" else 1)  # (the cleanup's forced qdel too)


def test_a_pbsuser_preterm_that_accepts_while_a_qrerun_ends_the_run_leaves_the_requeue(
        dists, make_engine, engine_root):
    # The qrerun comes while the qdel's preterm runs, and the chain accepts before the run
    # ends (a job deaf to SIGTERM): the qdel is taken as one that comes while a qrerun
    # ends the run (`_delete_requeued`: D, the requeue stands), as when the run ends
    # first. Its kill replaced the requeue: the job ended deleted, not run again.
    engine = make_engine(waiting_preterm(dists, engine_root))
    assert engine.pbs("qmgr", "-c", "set queue workq kill_delay = 600").returncode == 0
    mark = engine_root / "ran"  # (its second run ends at once)
    job_id = engine.submit(f"[ -e {mark} ] && exit 0\ntrap '' TERM\ntouch {mark}\n"
                           "sleep 300\n")
    until(mark.exists, what="the job to run")
    thread, answers = _qdel_behind(engine, job_id)
    started(engine_root, "the preterm hook to start")
    engine.pbs("qrerun", job_id, check=True)
    (engine_root / "go").touch()
    thread.join(60)
    assert [a.get("error") for a in answers[0]] == [None]
    engine.pbs("qsig", "-s", "KILL", job_id, check=True)  # (deaf to the SIGTERM)
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs["comment"]
    assert "its run is being ended for a requeue, which stands" in engine.log()
    deleted_once(engine, job_id)


def test_a_qdel_that_joins_a_pbsuser_preterm_keeps_its_own_x(dists, make_engine,
                                                            engine_root):
    # The first qdel has no -x; the second, waiting for the same chain, has: the job's
    # history goes once it is over (its -x was dropped: the job stayed F).
    engine, job_id, thread, answers = _qdel_waiting(dists, make_engine, engine_root)
    second, more = _qdel_behind(engine, job_id, purge=True)
    until(lambda: "waits for its execjob_preterm hooks" in engine.log(),
          what="the second qdel to join the chain")
    (engine_root / "go").touch()
    thread.join(60)
    second.join(60)
    assert [a.get("error") for a in answers[0] + more[0]] == [None, None]

    def state() -> str | None:
        try:
            return engine.job(job_id)["job_state"]
        except PbsError as unknown:
            assert unknown.code == 15001
            return None

    until(lambda: state() in ("F", None), what="the job's end")
    assert state() is None  # (its end and its purge are one step of the server's)
    assert f"{job_id};Job history purged at request of root@" in engine.log()


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
    # (its mark to be deleted at the next start, written with the array's deletion, is
    # cleared by the refusal: a server killed now, subjob 1 runs on after the restart)
    engine.kill()
    engine.start()
    engine.wait(engine.submit(), "F")  # (the restart's first poll is over)
    assert engine.job(first)["job_state"] == "R"
    assert f"{first};job deleted after a server restart" not in engine.log()
    engine.client("delete", ids=[array], force=True)
    engine.wait(array)


def test_a_subjob_whose_pbsuser_preterm_refused_its_arrays_qdel_runs_on_after_a_restart(
        dists, make_engine, engine_root):
    # An array's qdel marks its running subjobs whose chains are to come to be deleted at
    # the next start, in its own write (a server killed during the chains); a chain that
    # refuses clears its subjob's mark: the subjob runs on, a restart too.
    engine = make_engine(waiting_preterm(dists, engine_root))
    array = engine.pbs("qsub", "-N", "refused", "-J", "1-2", "--", "/bin/sleep", "60",
                       check=True).stdout.strip()
    first, second = (array.replace("[]", f"[{i}]") for i in (1, 2))
    engine.wait(first, "R")
    engine.wait(second, "R")
    thread, answers = _qdel_behind(engine, array)
    started(engine_root, "a subjob's preterm to start")  # (the other's accepts at once)
    until(lambda: any(engine.job(j)["job_state"] in "FX" for j in (first, second)),
          what="the subjob whose preterm accepted to be deleted")
    held = first if engine.job(first)["job_state"] == "R" else second
    (engine_root / "go").touch()
    thread.join(60)
    assert [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers[0]] == \
        [(array, 15136, "not now")], answers
    engine.kill()
    engine.start()
    engine.wait(engine.submit(), "F")  # (the restart's first poll is over)
    assert engine.job(held)["job_state"] == "R"
    engine.client("delete", ids=[array], force=True)
    engine.wait(array)


def test_a_server_stopped_during_a_qdels_pbsuser_preterm_refuses_the_qdel(dists, make_engine,
                                                                         engine_root):
    engine, job_id, thread, answers = _qdel_waiting(dists, make_engine, engine_root)
    engine.stop()
    thread.join(60)
    # (its own answer, given before the socket closes: it was the bare refusal of the
    # whole request that the loop gives a request still waiting)
    assert [(a["error"]["code"], a["error"]["message"]) for a in answers[0]] == [
        (15010, "System error: the server is stopping; the job was not deleted")], answers
    assert "its execjob_preterm hooks were stopped: the server is stopping; the qdel " \
           "waiting for them is refused, and the job runs on" in engine.log()
    engine.start()
    assert engine.job(job_id)["job_state"] == "R"  # adopted again: it runs on
    engine.client("delete", ids=[job_id], force=True)
    engine.wait(job_id)


@pytest.mark.parametrize("how, named", [("stopped", "[]"), ("qterm -t immediate", "[]"),
                                         ("killed", "[]"), ("killed", "[1-3]")])
def test_a_stop_during_an_arrays_pbsuser_preterm_answers_so_and_the_restart_deletes_it(
        how, named, dists, make_engine, engine_root):
    # The array's D was written and its queued index gone before a subjob's pbsuser
    # preterm chain started; the stop gave it up and the qdel was answered "the server is
    # stopping" (the job not deleted) while the array's deletion stood, and the subjob ran
    # on in a deleted array to its own end (qterm -t immediate: requeued, and run again).
    # Now the answer says so, and the restart (qterm -t immediate: the stop) deletes it.
    # A server killed (SIGKILL) meanwhile answers nothing, and left the subjob running on
    # for ever: the deletion's own write marks it (a range's too), and the restart deletes it.
    engine = make_engine(waiting_preterm(dists, engine_root))
    array = engine.pbs("qsub", "-J", "1-3%2", "--", "/bin/sleep", "60",
                       check=True).stdout.strip()
    first, second, third = (array.replace("[]", f"[{i}]") for i in (1, 2, 3))
    engine.wait(first, "R")
    engine.wait(second, "R")
    thread, answers = _qdel_behind(engine, array.replace("[]", named))
    started(engine_root, "a subjob's preterm to start")  # (the other's goes on)
    until(lambda: any(engine.job(j)["job_state"] in "FX" for j in (first, second)),
          what="the subjob whose preterm goes on to be deleted")
    held, other = (first, second) if engine.job(first)["job_state"] == "R" else \
        (second, first)
    assert engine.job(other)["comment"].startswith("Job deleted at request of root@")
    server_goes(engine, how, started(engine_root))
    thread.join(60)
    if how == "killed":
        assert [type(a) for a in answers] == [ServerUnavailable], answers
    else:
        assert [(a["id"], a["error"]["code"], a["error"]["message"]) for a in answers[0]] == [
            (array, 15010, "System error: the server is stopping; the deletion is recorded, "
                           f"and its running subjob {held} is deleted at the latest when the "
                           "server starts again")], answers
    engine.start()
    assert engine.wait(held, "FX")["comment"].startswith("Job deleted at request of root@")
    assert engine.wait(array)["job_state"] == "F"
    records = accounting_records(engine)  # (index 3 gone at the qdel, never run: no D)
    assert [records.count(f";D;{job};") for job in (array, held, other, third)] == \
        [int(named == "[]"), 1, 1, 0], records
    if how != "qterm -t immediate":
        assert f"{held};job deleted after a server restart: its array's qdel " \
               "stands" in engine.log()


@pytest.mark.parametrize("event", ["execjob_preterm", "execjob_prologue"])
@pytest.mark.parametrize("cancelled", [True, False], ids=["hook given up", "chain over"])
def test_a_stop_that_comes_as_a_chain_steps_is_the_stops_not_the_hooks(event, cancelled,
                                                                       inprocess_engine):
    # The server's SIGTERM may land while a chain steps (its handler runs between any two
    # lines of the loop): the runner then gives the hook up, "the server is stopping: the
    # hook's process was killed", and that was taken for the hook's error: the waiting qdel
    # refused as "filter hook 'slow' encountered an exception", a prologue's job handled as
    # its hook failed. The stop's rule stands (`stop_chains`). A chain whose hooks were
    # over just then goes on as any other. (The stop-during-preterm test met it once
    # under load; here the SIGTERM is made to land in the step.)
    from pbsplug.engine.server import ROLE_MANAGER, Caller, LaterAnswer, _Chain
    from pbsplug.runner import CANCELLED, ERROR, HookRun, Outcome

    eng = inprocess_engine
    done: list[Outcome] = []
    run = HookRun("slow", event, 1, "process", 0.5, ERROR, CANCELLED if cancelled else
                  "ValueError: its own", 0.0, cancelled=cancelled)

    class Stopped:  # a chain's Pending whose step the stop interrupts
        def ready(self) -> bool:
            return True

        def step(self) -> Outcome:
            eng.stopping = True  # (what the SIGTERM's handler does)
            return Outcome(event, False, kind="error", hook="slow", code=15136,
                           message="request rejected as filter hook 'slow' encountered "
                                   "an exception", runs=[run])

        def cancel(self) -> None:
            pass

    chain = _Chain(event, Stopped(), done.append)
    later, results = LaterAnswer(), [{"id": "12.x"}]
    later.missing = 1
    chain.waiters.append((later, results, Caller(0, ROLE_MANAGER), False))
    eng.chains["12.x"] = chain
    eng._poll_chains()
    if not cancelled:
        assert [o.runs for o in done] == [[run]] and eng.chains == {}
        return
    assert (done, eng.chains) == ([], {"12.x": chain})
    eng.stop_chains()
    assert results[0]["error"]["message"].startswith("System error: the server is stopping")


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


def test_a_qdel_naming_a_waiting_job_in_its_spellings_keeps_one_entry(inprocess_engine,
                                                                       monkeypatch):
    # 12, 12.server, 12@server, 12.server@server (and the host's other names) are one job:
    # each spelling was asked again and kept a result of its own while the chain ran.
    from pbsplug.engine.server import ROLE_MANAGER, Caller, _Chain, _Waits

    eng = inprocess_engine
    chain = _Chain("execjob_preterm", None, lambda outcome: None)
    full = eng._full_id("12")
    asked: list[str] = []

    def delete(caller, job_id, *args, **kw):
        asked.append(job_id)
        if eng._full_id(job_id) == full:
            raise _Waits(chain)
        raise PbsError(15001, "Unknown Job Id", obj=job_id)

    monkeypatch.setattr(eng, "_delete", delete)
    server = full.split(".", 1)[1]
    spellings = ["12", full, f"12@{server}", f"{full}@{server}"]
    later = eng.req_delete(Caller(0, ROLE_MANAGER), spellings * 3)
    assert asked == ["12"]
    assert (later.missing, len(chain.waiters), len(later.results)) == (1, 1, 12)
    assert len({id(result) for result in later.results}) == 1
