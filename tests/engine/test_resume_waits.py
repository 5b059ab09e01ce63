"""Suspended jobs whose resume waits for their cpus (qsig -s resume while others hold them):
the server looks at the vnodes for them once a poll, and only after a write that may have
freed cpus (docs/engine.md, "The commands", qsig)."""

from __future__ import annotations

from pbsplug.engine.jobcontrol import RESUME_WAIT

from .conftest import until


def _waiting(eng, count: int) -> list[str]:
    """One vnode of 1 cpu held by a running job, and `count` suspended jobs waiting for it
    (no process: nothing is resumed here)."""
    queue = next(iter(eng.store.all("queue")))
    ids = [f"{seq}.{eng.server_name}" for seq in range(1, count + 2)]
    with eng.store.transaction() as st:
        for name in list(st.all("node")):
            st.delete("node", name)
        st.put("node", "vn0", {"state": "free", "resources_available": {"ncpus": 1}})
        for seq, job_id in enumerate(ids, 1):
            st.add_job(seq, job_id, {
                "job_state": "R" if seq == 1 else "S", "queue": queue, "qtime": seq,
                "stime": 1, "exec_vnode": "(vn0:ncpus=1)",
                "Resource_List": {"select": "1:ncpus=1", "ncpus": 1}}, None)
            if seq > 1:
                st.set_runtime(job_id, {"resume": True})
                eng.launches[job_id] = object()
    return ids[1:]


def test_the_vnodes_are_read_once_a_poll_and_only_after_a_write(inprocess_engine,
                                                                 monkeypatch):
    eng = inprocess_engine
    waiting = _waiting(eng, 3)
    reads = []
    vnode_rows = eng._vnode_rows
    monkeypatch.setattr(eng, "_vnode_rows", lambda: reads.append(1) or vnode_rows())
    try:
        eng.control.poll()
        assert len(reads) == 1  # (one look for the three)
        assert eng.control.resuming == set(waiting)
        for job_id in waiting:
            attrs = eng.store.job(job_id)
            assert (attrs["job_state"], attrs["substate"], attrs["comment"]) == (
                "S", 45, RESUME_WAIT)
        for _ in range(3):
            eng.control.poll()
        assert len(reads) == 1  # (nothing written but the look's own waits: nothing read)
        with eng.store.transaction() as st:  # (a vnode changed: it may have more cpus)
            st.put("node", "vn0", {"state": "free", "resources_available": {"ncpus": 1}})
        eng.control.poll()
        eng.control.poll()
        assert len(reads) == 2
        eng.launches.pop(waiting[0])  # (its shepherd gone: it waits no more)
        with eng.store.transaction() as st:
            st.put_job(waiting[0], {**eng.store.job(waiting[0]), "job_state": "F"})
        eng.control.poll()
        assert eng.control.resuming == set(waiting[1:])
    finally:
        eng.launches.clear()


def test_a_resume_waiting_for_cpus_follows_when_its_vnode_gets_more(engine):
    first_vnode = next(iter(engine.nodes()))
    engine.pbs("qmgr", "-c", f"set node {first_vnode} resources_available.ncpus = 1",
               check=True)
    for name in list(engine.nodes())[1:]:
        engine.pbs("qmgr", "-c", f"delete node {name}", check=True)
    suspended = engine.pbs("qsub", "--", "/bin/sleep", "300", check=True).stdout.strip()
    engine.wait(suspended, "R")
    engine.pbs("qsig", "-s", "suspend", suspended, check=True)
    other = engine.pbs("qsub", "--", "/bin/sleep", "300", check=True).stdout.strip()
    engine.wait(other, "R")  # (on the cpu the suspended job let go)
    assert engine.pbs("qsig", "-s", "resume", suspended).returncode == 0
    assert engine.job(suspended)["substate"] == 45
    engine.pbs("qmgr", "-c", f"set node {first_vnode} resources_available.ncpus = 2",
               check=True)
    until(lambda: engine.job(suspended)["job_state"] == "R", timeout=30,
          what="the resume once the vnode has a cpu free")
    assert (engine.job(suspended)["substate"], engine.job(other)["job_state"]) == (42, "R")
    engine.pbs("qdel", "-W", "force", suspended, other, check=True)
