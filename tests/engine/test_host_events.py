"""The host's events on a real server: exechost_startup, periodic and exechost_periodic, and
the vnode times the engine keeps."""

from __future__ import annotations

import json
import time

from .conftest import until
from .test_server import plugin


def test_periodic_hooks_run_at_their_freq_without_overlap(dists, make_engine, engine_root):
    runs = engine_root / "runs"
    engine = make_engine(plugin(dists, "tick", f"""
        import json, time

        @hookimpl
        def periodic(event):
            start = time.time()
            time.sleep(0.6)
            names = sorted(event.vnode_list)
            for vn in event.vnode_list.values():
                vn.comment = "seen by tick"
            open({str(runs)!r}, "a").write(json.dumps([start, time.time(), names]) + "\\n")
            event.reject("nothing to do")
        """, ("periodic",), freq=1))
    lines = until(lambda: len(runs.read_text().splitlines()) >= 3 and runs.read_text()
                   .splitlines() if runs.exists() else None, what="three periodic runs")
    spans = [json.loads(line) for line in lines[:3]]
    nodes = engine.client("stat_nodes")
    assert spans[0][2] == sorted(nodes)
    for (_, end, _), (start, _, _) in zip(spans, spans[1:], strict=False):
        assert start - end >= 0.95  # the next run starts freq after the last one ended
    # A reject does not undo vnode changes, and is logged with PBS's words.
    assert {n["comment"] for n in nodes.values()} == {"seen by tick"}
    assert "periodic request rejected by 'tick'" in engine.log()


def test_a_failing_periodic_hook_changes_nothing(dists, make_engine, engine_root):
    runs = engine_root / "runs"
    engine = make_engine(plugin(dists, "crash", f"""
        @hookimpl
        def periodic(event):
            for vn in event.vnode_list.values():
                vn.comment = "half done"
            open({str(runs)!r}, "a").write("ran\\n")
            raise RuntimeError("broken")
        """, ("periodic",), freq=1))
    until(lambda: runs.exists() and len(runs.read_text().splitlines()) >= 2,
           what="two failed runs")
    assert all("comment" not in n for n in engine.client("stat_nodes").values())
    assert "periodic hook 'crash' encountered an exception" in engine.log()


def test_exechost_periodic_sees_the_running_jobs(dists, make_engine, engine_root):
    seen = engine_root / "seen"
    engine = make_engine(plugin(dists, "watch", f"""
        @hookimpl
        def exechost_periodic(event):
            for vn in event.vnode_list.values():
                vn.resources_available["energy_probe"] = len(event.job_list)
            open({str(seen)!r}, "a").write(" ".join(sorted(event.job_list)) + "\\n")
        """, ("exechost_periodic",), freq=1))
    # (the hook fails until the resource exists: nothing changes before it)
    before = next(iter(engine.client("stat_nodes").values()))["resources_available"]
    # A hook may set only a defined resource (pbsplug.values), as in PBS.
    engine.pbs("qmgr", "-c", "create resource energy_probe type = long", check=True)
    job_id = engine.submit("sleep 30\n")
    engine.wait(job_id, "R")
    until(lambda: seen.exists() and job_id in seen.read_text(), what="the job in job_list")
    node = next(iter(engine.client("stat_nodes").values()))
    assert node["resources_available"]["energy_probe"] >= 1
    # One resource set by a hook leaves the vnode's others as they were.
    assert {k: v for k, v in node["resources_available"].items() if k != "energy_probe"} \
        == {k: v for k, v in before.items() if k != "energy_probe"} != {}
    engine.client("delete", ids=[job_id], force=True)
    engine.wait(job_id)


def test_exechost_periodic_rerun_and_delete_act_at_the_jobs_own_end(
        dists, make_engine, engine_root):
    """PBS's MoM passes exechost_periodic's job.rerun() / job.delete() on a job of its
    job_list to its server, which kills nothing: the job runs (or stays suspended) on, its
    Exit_status -18 (rerun) or -19 (delete), and its own end requeues it (`-r n` all the
    same) or ends it, failed, with Exit_status -19 (OpenPBS 23.06, measured). A delete()
    and a rerun() on one job: the delete. The engine requeued or qdel'd the jobs at once.
    The hook asks once for each job (a flag file per job, its calls in order)."""
    flags, stop = engine_root / "flags", engine_root / "stop"
    flags.mkdir()
    # (the hook rejects: a reject keeps its calls, as it keeps its vnode changes)
    engine = make_engine(_reaper(dists, flags, reject=True))
    host = next(iter(engine.client("stat_nodes")))
    engine.pbs("qmgr", "-c", f"set node {host} resources_available.ncpus = 4")
    script = f"while [ ! -e {stop} ]; do sleep 0.1; done\n"
    again = engine.submit(script, Rerunable=False)
    gone = engine.submit(script)
    both = engine.submit(script)
    held = engine.submit(script)
    for job_id in (again, gone, both, held):
        engine.wait(job_id, "R")
    engine.client("signal", ids=[held], signal="suspend")
    engine.wait(held, "S")
    asked = {again: "rerun", gone: "delete", both: "delete rerun", held: "delete"}
    for job_id, calls in asked.items():
        (flags / job_id).write_text(calls)
    until(lambda: not list(flags.iterdir()) and all(
        f"hook request {c.split()[0]} {j}" in engine.log() for j, c in asked.items()),
        what="the hook's requests")
    for job_id, state, status in ((again, "R", -18), (gone, "R", -19), (both, "R", -19),
                                  (held, "S", -19)):
        attrs = engine.job(job_id)
        assert (attrs["job_state"], attrs["Exit_status"], attrs["run_count"]) == (
            state, status, 1), job_id
    stop.write_text("")
    engine.client("signal", ids=[held], signal="resume")
    for job_id in (gone, both, held):
        ended = engine.wait(job_id)
        assert ended["Exit_status"] == -19, job_id
        assert ended["comment"].endswith("and failed"), job_id
    attrs = until(lambda: (a := engine.job(again))["run_count"] == 2 and a["job_state"] in
                  ("R", "F") and a, what="the job requeued and run again")
    assert attrs["Rerunable"] is False
    # its R record has its run's own Exit_status, as PBS's (not -16, a hook's requeue's)
    from .conftest import accounting_records
    assert "Exit_status=0 " in next(line for line in accounting_records(engine).splitlines()
                                    if f";R;{again};" in line)
    log = engine.log()
    for job_id in (gone, both, held):
        assert f"Job;{job_id};a hook requested for job to be deleted" in log
    assert f"hook request rerun {both}" not in log
    engine.wait(again)  # (its next end is its own: the request was for one end)
    assert engine.job(again)["Exit_status"] == 0


def test_exechost_startup_adds_vnodes_and_recovers_offlined_ones(dists, make_engine,
                                                                 engine_root):
    flag = engine_root / "fail"
    flag.write_text("yes")
    site = plugin(dists, "boot", f"""
        import os
        from pbsplug import Vnode

        @hookimpl
        def exechost_startup(event):
            if os.path.exists({str(flag)!r}):
                raise RuntimeError("hardware check failed")
            event.vnode_list["gpu0"] = Vnode("gpu0", {{
                "resources_available": {{"ncpus": 1, "ngpus": 1}}}})
        """, ("exechost_startup",), fail_action="offline_vnodes,clear_vnodes_upon_recovery")
    engine = make_engine(site)
    nodes = engine.client("stat_nodes")
    assert "gpu0" not in nodes
    assert {n["state"] for n in nodes.values()} == {"offline"}
    assert {n["comment"] for n in nodes.values()} == {
        "offlined by hook 'boot' due to hook error"}

    engine.stop()
    flag.unlink()
    engine.start()
    nodes = engine.client("stat_nodes")
    assert nodes["gpu0"]["resources_available"]["ngpus"] == 1
    assert {n["state"] for n in nodes.values()} == {"free"}
    assert all("comment" not in n for n in nodes.values())


def test_vnode_times_follow_jobs(engine):
    """Seed 004, Interfaces 4 and 5: last_used_time is set when a vnode is created (the first
    start's vnodes and qmgr's) and when a job on it ends; last_state_change_time moves with
    every state change."""
    started = time.time()
    name, before = next(iter(engine.client("stat_nodes").items()))
    assert before["last_used_time"] <= started
    assert engine.pbs("qmgr", "-c", "create node fresh").returncode == 0
    fresh = engine.client("stat_nodes", names=["fresh"])["fresh"]
    assert started - 1 <= fresh["last_used_time"] <= time.time()
    ncpus = before["resources_available"]["ncpus"]
    time.sleep(1.1)  # the times are whole seconds
    job_id = engine.submit("sleep 1.5\n", Resource_List={"select": f"1:ncpus={ncpus}"})
    engine.wait(job_id, "R")
    busy = engine.client("stat_nodes", names=[name])[name]
    assert busy["state"] == "job-busy"
    assert busy["last_state_change_time"] > before["last_state_change_time"]
    engine.wait(job_id)
    after = engine.client("stat_nodes", names=[name])[name]
    assert after["state"] == "free"
    assert after["last_used_time"] >= busy["last_state_change_time"]
    assert after["last_state_change_time"] >= busy["last_state_change_time"]


def test_client_sees_hook_runs_in_the_trace(dists, make_engine):
    engine = make_engine(plugin(dists, "tick", """
        @hookimpl
        def periodic(event):
            pass
        """, ("periodic",), freq=1))
    trace = engine.home.trace
    until(lambda: trace.exists() and '"periodic"' in trace.read_text(), what="a trace line")
    run = json.loads(trace.read_text().splitlines()[0])
    assert (run["hook"], run["event"], run["outcome"]) == ("tick", "periodic", "accept")


def test_a_periodic_hook_moves_no_busy_vnode_to_another_partition(dists, make_engine,
                                                                   engine_root):
    """Audit: qmgr refuses to change a busy vnode's partition (PBS's 'Node is busy'), but a
    periodic hook's change was stored: the running job's vnode left its scheduler."""
    flag = engine_root / "move"
    engine = make_engine(plugin(dists, "mover", f"""
        import os

        @hookimpl
        def periodic(event):
            if os.path.exists({str(flag)!r}):
                for vn in event.vnode_list.values():
                    vn.partition = "P9"
        """, ("periodic",), freq=1))
    engine.pbs("qmgr", "-c", "create sched s9 partition = P9", check=True)
    job_id = engine.submit("sleep 300\n")
    vnode = engine.wait(job_id, "R")["exec_vnode"].split(":")[0].strip("(")
    flag.write_text("")
    until(lambda: f"vnode {vnode}'s change not kept: Node is busy" in engine.log(),
          what="the hook's change refused")
    assert engine.client("stat_nodes")[vnode].get("partition") in (None, "")
    engine.client("delete", ids=[job_id])
    engine.wait(job_id)
    until(lambda: engine.client("stat_nodes")[vnode].get("partition") == "P9",
          what="the idle vnode moved")


def _reaper(dists, flags, reject=False):
    """An exechost_periodic plugin that calls, on each job of its job_list with a flag file
    in `flags`, the calls the file names (once: the file goes); then rejects if `reject`."""
    return plugin(dists, "reaper", f"""
        import os

        @hookimpl
        def exechost_periodic(event):
            for job_id, job in event.job_list.items():
                flag = os.path.join({str(flags)!r}, job_id)
                if os.path.exists(flag):
                    calls = open(flag).read().split()
                    os.unlink(flag)
                    for call in calls:
                        getattr(job, call)()
            if {reject!r}:
                event.reject("asked")
        """, ("exechost_periodic",), freq=1)


def test_a_lost_job_requeued_drops_the_hooks_request_and_its_exit_status(
        dists, make_engine, engine_root):
    """A job an exechost_periodic hook asked to rerun (Exit_status -18), its shepherd lost
    at a restart, is requeued as any lost job: without the hook's mark (the job queued
    showed Exit_status -18), its R record with PBS's -11 (it had -18), and its next run
    ends as its own (its request was for the lost run's end)."""
    from .conftest import accounting_records, shepherds_gone

    flags = engine_root / "flags"
    flags.mkdir()
    engine = make_engine(_reaper(dists, flags))
    job_id = engine.submit("sleep 300\n")
    engine.wait(job_id, "R")
    (flags / job_id).write_text("rerun")
    until(lambda: engine.job(job_id).get("Exit_status") == -18, what="the hook's request")
    engine.kill()
    shepherds_gone(engine, [job_id])
    engine.start()
    attrs = until(lambda: (a := engine.job(job_id))["run_count"] == 2 and a,
                  what="the lost job requeued and run again")
    assert "Exit_status" not in attrs
    assert "Exit_status=-11" in next(line for line in accounting_records(engine).splitlines()
                                     if f";R;{job_id};" in line)
    engine.client("delete", ids=[job_id], force=True)
    engine.wait(job_id)


def _held_marked_running(eng) -> str:
    """A job submitted held to the in-process `eng`, stored R (it runs nowhere)."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    job_id = eng.req_submit(Caller(0, ROLE_MANAGER), {"Hold_Types": "u"}, "true\n")
    with eng.store.transaction() as st:
        st.put_job(job_id, {**st.job(job_id), "job_state": "R"})
    return job_id


def test_a_periodic_hooks_request_that_cannot_be_written_is_logged_and_the_rest_go_on(
        inprocess_engine, monkeypatch):
    """A job.rerun() whose request cannot be written (a full disk) is logged, and the next
    job's request is written: the StoreWriteError escaped the poll, losing the rest."""
    from pbsplug.engine.store import StoreWriteError

    eng = inprocess_engine
    ids = [_held_marked_running(eng) for _ in range(2)]
    real, calls = eng.store.transaction, []

    def transaction(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise StoreWriteError("database or disk is full")
        return real(*args, **kwargs)

    said: list[str] = []
    monkeypatch.setattr(eng.store, "transaction", transaction)
    monkeypatch.setattr(eng, "log", lambda *args: said.append(args[-1]))
    eng.periodic._job_actions("reaper", {j: {"_action": "rerun"} for j in ids}, set(ids))
    assert eng.store.job(ids[1])["Exit_status"] == -18
    assert "Exit_status" not in eng.store.job(ids[0])
    assert said == [f"exechost_periodic hook 'reaper': job.rerun() of {ids[0]}: request "
                    "not recorded: System error: database or disk is full",
                    f"hook request rerun {ids[1]}"]


def test_a_hook_asked_delete_is_logged_once_when_its_end_is_written_later(
        inprocess_engine, monkeypatch):
    """'a hook requested for job to be deleted' is said once the job's end is written: a
    full disk at its write, tried again at the next poll, said it twice."""
    from pbsplug import lifecycle
    from pbsplug.engine import executor
    from pbsplug.engine.server import _Ending
    from pbsplug.engine.store import StoreWriteError

    eng = inprocess_engine
    job_id = _held_marked_running(eng)
    with eng.store.transaction() as st:
        st.set_runtime(job_id, {lifecycle.HOOK_ASKED: {"action": "delete", "hook": "h"}})
    said, tries = [], []
    monkeypatch.setattr(eng, "log", lambda *args: said.append(args[-1]))

    def finish_over(*args, **kwargs):
        tries.append(1)
        if len(tries) == 1:
            raise StoreWriteError("database or disk is full")

    monkeypatch.setattr(eng, "_finish_over", finish_over)
    for _ in range(2):
        ending = _Ending(executor.JobExit(0, 0, 0, 0), {}, {}, lambda *a: None)
        try:
            eng._ended_over(job_id, None, {"job_state": "R"}, ending)
        except StoreWriteError:
            pass
        assert ending.ended is not None and ending.ended.exit_status == -19
    assert said.count(lifecycle.HOOK_DELETED) == 1
