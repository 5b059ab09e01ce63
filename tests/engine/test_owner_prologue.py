"""An execjob_prologue with a ``user = pbsuser`` hook, which the job's owner may make slow,
runs while the server serves: the job is R in substate 41 meanwhile, and it is launched
(or requeued, or deleted) when the chain is over, with the consequences a prologue has
anywhere else (test_hook_consequences.py). qdel stops it; a server stopped or killed
meanwhile requeues the job."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.client import Client

from .conftest import deleted_once, until
from .owner_hooks import SERVER_GOES, gone, holding_plugin, server_goes, started, takes_a_job


def waiting_prologue(dists, root: Path, **attrs) -> str:
    """A pbsuser prologue that, the first time it runs, writes its pid to `root`/started and
    waits until `root`/go exists; execjob_abort writes the job's name to `root`/aborted."""
    return holding_plugin(dists, root, f"""
        @hookimpl
        def execjob_prologue(event):
            hold_first()

        @hookimpl
        def execjob_abort(event):
            open({str(root / "aborted")!r}, "a").write(event.job.Job_Name + "\\n")
        """, ("execjob_prologue", "execjob_abort"), **attrs)


def test_the_server_answers_while_a_pbsuser_prologue_runs(dists, make_engine, engine_root):
    engine = make_engine(waiting_prologue(dists, engine_root))
    job_id = engine.submit("echo ran\n", Job_Name="slow")
    started(engine_root, "the prologue to start")
    client = Client(engine.home, timeout=20)  # (a hang guard: see takes_a_job)
    attrs = client("stat_jobs", ids=[job_id])[job_id]
    assert (attrs["job_state"], attrs["substate"]) == ("R", 41)
    takes_a_job(engine, client)
    assert not (engine_root / "go").exists()  # the hook was still waiting
    (engine_root / "go").touch()
    attrs = engine.wait(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 1)
    seq = job_id.split(".")[0]
    assert (engine.work / f"slow.o{seq}").read_text() == "ran\n"
    assert not (engine_root / "aborted").exists()


def test_qdel_stops_a_pbsuser_prologue(dists, make_engine, engine_root):
    engine = make_engine(waiting_prologue(dists, engine_root))
    job_id = engine.submit(Job_Name="slow")
    pid = started(engine_root, "the prologue to start")
    # Named twice: the second is answered as the first (as for a running job it kills).
    answers = Client(engine.home, timeout=20)("delete", ids=[job_id, job_id])
    assert [a.get("error") for a in answers] == [None, None]
    attrs = engine.job(job_id)
    assert attrs["job_state"] == "F"
    assert attrs["comment"].startswith("Job deleted at request of root@")
    until(lambda: gone(pid), what="the hook's process to be killed")
    assert (engine_root / "aborted").read_text() == "slow\n"
    assert "its execjob_prologue hooks were stopped" in engine.log()
    assert not (engine_root / "go").exists()


def test_a_forced_qdel_in_the_end_hooks_of_a_job_deleted_in_its_prologue_writes_no_d(
        dists, make_engine, engine_root):
    # A qdel stops the prologue and ends the job deleted (D written); its pbsuser epilogue
    # then runs while the server serves (E/57), and a qdel -W force meanwhile is answered
    # with nothing logged or written again: one deletion, one D. The run was not marked
    # deleted, and the forced qdel logged and wrote a second D.
    epilogue, go = engine_root / "epilogue", engine_root / "go-epilogue"
    engine = make_engine(holding_plugin(dists, engine_root, f"""
        @hookimpl
        def execjob_prologue(event):
            hold_first()

        @hookimpl
        def execjob_epilogue(event):
            open({str(epilogue)!r}, "w").close()
            while not os.path.exists({str(go)!r}):
                time.sleep(0.05)
        """, ("execjob_prologue", "execjob_epilogue")))
    job_id = engine.submit(Job_Name="slow")
    started(engine_root, "the prologue to start")
    client = Client(engine.home, timeout=20)
    assert [a.get("error") for a in client("delete", ids=[job_id])] == [None]
    until(epilogue.exists, what="the epilogue to start")
    assert client("stat_jobs", ids=[job_id])[job_id]["job_state"] == "E"
    assert [a.get("error") for a in client("delete", ids=[job_id], force=True)] == [None]
    go.touch()
    attrs = engine.wait(job_id)
    assert attrs["comment"].startswith("Job deleted at request of root@"), attrs["comment"]
    deleted_once(engine, job_id)


@pytest.mark.parametrize("how", SERVER_GOES)
def test_a_job_whose_pbsuser_prologue_ran_when_the_server_died_is_requeued(
        how, dists, make_engine, engine_root):
    # As PBS requeues a job whose MoM restarted while its prologue ran. The job is R with
    # no launch when the server goes; its next start queues it again and it runs.
    engine = make_engine(waiting_prologue(dists, engine_root))
    job_id = engine.submit("echo ran\n", Job_Name="slow", Rerunable=False)
    pid = started(engine_root, "the prologue to start")
    attrs = Client(engine.home, timeout=20)("stat_jobs", ids=[job_id])[job_id]  # (a guard)
    assert (attrs["job_state"], attrs["substate"]) == ("R", 41)
    server_goes(engine, how, pid)
    assert not (engine_root / "go").exists()
    engine.start()
    attrs = engine.wait(job_id)
    # (run_count: the run that never started is not counted, as after any such restart)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 1), attrs.get("comment")
    assert "Job requeued after a server restart: it had not started" in engine.log()
    assert not (engine_root / "aborted").exists()
    assert os.path.exists(engine.work / f"slow.o{job_id.split('.')[0]}")


class HeldPrologue:
    """A pbsuser prologue that waits until the file `go` exists."""

    plugin_info = PluginInfo(events=("execjob_prologue",))

    def __init__(self, go: Path):
        self.go = go

    @hookimpl
    def execjob_prologue(self, event):
        while not self.go.exists():
            time.sleep(0.05)


def test_a_qdel_in_the_prologue_records_the_deletion_once_the_chain_is_stopped(
        engine_here, register_plugin, monkeypatch, engine_root):
    # The qdel wrote its D record (and marked the run deleted) before it stopped the
    # prologue chain: a stop that failed left a job running its prologue with a D record
    # written. The chain is stopped first, then the deletion recorded (`_record_deletion`).
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    from .test_poll import poll_until

    root = Caller(0, ROLE_MANAGER)
    register_plugin(HeldPrologue(engine_root / "go"), "slow", user="pbsuser", alarm=600)
    eng = engine_here()
    job_id = eng.req_submit(root, {"Job_Name": "slow"}, "true\n")
    poll_until(eng, lambda: job_id in eng.chains, "the prologue chain to start")
    real = eng._stop_chain
    recorded: list[bool] = []  # (whether the chain was stopped when the D was written)
    written = eng.accounting.deleted
    monkeypatch.setattr(eng.accounting, "deleted", lambda *args: (
        recorded.append(job_id not in eng.chains), written(*args))[-1])

    def fails(job_id: str, ended: bool = False) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(eng, "_stop_chain", fails)
    with pytest.raises(OSError):
        eng.req_delete(root, [job_id])
    assert recorded == [] and job_id in eng.chains
    assert not (eng.store.runtime(job_id) or {}).get("deleted")
    assert eng.store.job(job_id)["job_state"] == "R"
    monkeypatch.setattr(eng, "_stop_chain", real)
    assert [a.get("error") for a in eng.req_delete(root, [job_id])] == [None]
    assert recorded == [True]
    attrs = eng.store.job(job_id)
    assert attrs["job_state"] == "F"
    assert attrs["comment"].startswith("Job deleted at request of root@"), attrs["comment"]
    log = "".join(p.read_text() for p in sorted(eng.home.logs.iterdir()))
    assert log.count("Job to be deleted at request of root@") == 1
    assert log.index("its execjob_prologue hooks were stopped") < log.index(
        "Job to be deleted at request of root@")


class HeldFirstSubjob:
    """A pbsuser prologue that holds the subjob of index 1 until the file `go` exists."""

    plugin_info = PluginInfo(events=("execjob_prologue",))

    def __init__(self, go: Path):
        self.go = go

    @hookimpl
    def execjob_prologue(self, event):
        while "[1]" in event.job.id and not self.go.exists():
            time.sleep(0.05)


def test_a_qrerun_of_an_array_is_refused_while_a_subjob_runs_its_prologue(
        engine_here, register_plugin, engine_root):
    # A qrerun of a job in its pbsuser prologue is 15016 (it has no processes yet). The
    # array's qrerun counted a subjob as running only once launched: one in its prologue
    # was neither requeued nor refused, R all through, then launched with run_count 1, its
    # run as if no qrerun had come. It is taken as its own qrerun takes it now: 15016, and
    # nothing of the array's qrerun is done (the other subjob, finished, stays so); once
    # it is launched, the array's qrerun requeues both.
    from pbsplug.engine.errors import PbsError
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    from .test_poll import poll_until

    root = Caller(0, ROLE_MANAGER)
    go = engine_root / "go"
    register_plugin(HeldFirstSubjob(go), "slow", user="pbsuser", alarm=600)
    eng = engine_here()
    array = eng.req_submit(root, {"array_indices_submitted": "1-2"},
                           '[ "$PBS_ARRAY_INDEX" = 1 ] && exec sleep 300\ntrue\n')
    held, done = array.replace("[]", "[1]"), array.replace("[]", "[2]")
    poll_until(eng, lambda: held in eng.chains and
               (eng.store.job(done) or {}).get("job_state") == "F",
               "the first subjob's prologue to start and the second subjob to end")
    for ids in ([held], [array]):
        with pytest.raises(PbsError) as refused:
            eng.req_rerun(root, ids)
        assert (refused.value.code, refused.value.obj) == (15016, held), refused.value
    assert eng.store.job(done)["job_state"] == "F"
    assert (eng.store.job(held)["job_state"], eng.store.job(held)["substate"]) == ("R", 41)
    assert held in eng.chains and held not in eng.launches
    go.touch()
    poll_until(eng, lambda: held in eng.launches, "the first subjob to be launched")
    eng.req_rerun(root, [array])
    assert eng.store.job(done)["job_state"] == "Q"
    assert eng.store.runtime(held)["end_reason"] == "requeue"
    assert held in eng.kills
