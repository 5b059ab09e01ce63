"""The vnode states the local engine derives from its running jobs (docs/engine.md,
"Vnodes"), as the scheduler books the same jobs."""

from __future__ import annotations

from pbsplug.engine.home import Home
from pbsplug.engine.server import Engine
from pbsplug.engine.testing import make_root, remove_root
from pbsplug.plugins import PluginSet
from pbsplug.siteconfig import SiteConfig


def test_every_vnode_of_a_host_a_job_holds_whole_shows_job_exclusive():
    """h0's n0 is force_exclhost: a job on n0 and n1 holds all of h0, as the scheduler
    books it (n2 too); h1's vnode and a shared job's vnode are not exclusive."""
    root = make_root()
    try:
        eng = Engine(Home(root), plugins=PluginSet(SiteConfig(path=None)))
        for name in list(eng.store.all("node")):
            eng.store.delete("node", name)
        for name, host, sharing in (("n0", "h0", "force_exclhost"), ("n1", "h0", None),
                                    ("n2", "h0", None), ("n3", "h1", None)):
            eng.store.put("node", name, {"state": "free", "resources_available": {
                "ncpus": 4, "host": host}, **({"sharing": sharing} if sharing else {})})
        queue = next(iter(eng.store.all("queue")))
        for seq, exec_vnode in ((1, "(n0:ncpus=1)+(n1:ncpus=1)"), (2, "(n3:ncpus=1)")):
            eng.store.add_job(seq, f"{seq}.{eng.server_name}", {
                "job_state": "R", "queue": queue, "qtime": seq, "stime": 1,
                "exec_vnode": exec_vnode, "Resource_List": {"select": "1:ncpus=1"}}, None)
        states = {name: row["state"] for name, row in eng._vnode_rows().items()}
        assert states == {"n0": "job-exclusive", "n1": "job-exclusive", "n2": "job-exclusive",
                          "n3": "free"}
    finally:
        remove_root(root)


def test_the_states_noted_at_a_start_and_an_end_are_every_vnode_whose_state_moved():
    """`_track_states` (each launch and end calls it) derives again only the vnodes whose
    inputs were written since its last call: what it notes (``last_state_change_time``,
    the states it has seen) is what deriving every vnode gives, for a start, an exclhost
    start that holds its host whole, and an end that comes after a requeue no call saw
    (its vnode's change is noted then, not lost)."""
    root = make_root()
    now = [1.0]
    try:
        eng = Engine(Home(root), plugins=PluginSet(SiteConfig(path=None)),
                     clock=lambda: now[0])
        for name in list(eng.store.all("node")):
            eng.store.delete("node", name)
        for name, host, sharing in (("n0", "h0", "force_exclhost"), ("n1", "h0", None),
                                    ("n2", "h0", None), ("n3", "h1", None), ("n4", "h2", None)):
            eng.store.put("node", name, {"state": "free", "resources_available": {
                "ncpus": 4, "host": host}, **({"sharing": sharing} if sharing else {})})
        queue = next(iter(eng.store.all("queue")))
        eng._track_states()

        def step(when: int, seq: int, state: str, exec_vnode: str | None, track: bool = True):
            job_id = f"{seq}.{eng.server_name}"
            attrs = {"job_state": state, "queue": queue, "qtime": seq, "stime": 1,
                     "Resource_List": {"select": "1:ncpus=4"},
                     **({"exec_vnode": exec_vnode} if exec_vnode else {})}
            with eng.store.transaction() as st:
                if st.job(job_id) is None:
                    st.add_job(seq, job_id, attrs, None)
                else:
                    st.put_job(job_id, attrs)
            now[0] = when
            if track:
                eng._track_states()

        def noted() -> dict[str, int]:
            derived = {name: row["state"] for name, row in eng._vnode_rows().items()}
            assert {name: eng._seen_states.get(name) for name in derived} == derived
            return {name: row.get("last_state_change_time", 0)
                    for name, row in eng.store.all("node").items()}

        step(2, 1, "R", "(n3:ncpus=4)")  # a start: n3 job-busy
        assert noted() == {"n0": 0, "n1": 0, "n2": 0, "n3": 2, "n4": 0}
        step(3, 2, "R", "(n0:ncpus=1)")  # exclhost on n0: all of h0 job-exclusive
        assert noted() == {"n0": 3, "n1": 3, "n2": 3, "n3": 2, "n4": 0}
        step(4, 1, "Q", None, track=False)  # n3's job requeued: no call then
        step(5, 2, "F", "(n0:ncpus=1)")  # an end: h0 free, and n3 (free since the requeue)
        assert noted() == {"n0": 5, "n1": 5, "n2": 5, "n3": 5, "n4": 0}
        step(6, 3, "R", "(n4:ncpus=4)")  # a start on h2: no other vnode moved
        assert noted() == {"n0": 5, "n1": 5, "n2": 5, "n3": 5, "n4": 6}
    finally:
        remove_root(root)


def test_queued_jobs_written_since_the_last_call_are_not_decoded(monkeypatch):
    """`_track_states` after many queued jobs' writes (a qalter of each, a cycle's notes)
    read back and decoded every written job row to learn it was not running: 9,000 took
    it about 250 ms. Their state column is enough: a running one is still placed."""
    from pbsplug.engine import store

    root = make_root()
    try:
        eng = Engine(Home(root), plugins=PluginSet(SiteConfig(path=None)))
        queue = next(iter(eng.store.all("queue")))
        vnode = next(iter(eng.store.all("node")))
        eng._track_states()
        with eng.store.transaction() as st:
            for seq in range(1, 4):
                st.add_job(seq, f"{seq}.{eng.server_name}", {
                    "job_state": "R" if seq == 3 else "Q", "queue": queue, "qtime": seq,
                    "Resource_List": {"select": "1:ncpus=1"},
                    **({"exec_vnode": f"({vnode}:ncpus=1)"} if seq == 3 else {})}, None)
        decoded = []
        real = store._job_attrs

        def noting(attrs, state, env):
            decoded.append(state)
            return real(attrs, state, env)

        monkeypatch.setattr(store, "_job_attrs", noting)
        eng._track_states()
        assert decoded == ["R"]
        assert eng._state_inputs is not None
        assert list(eng._state_inputs.running) == [f"3.{eng.server_name}"]  # (placed)
        eng.close()
    finally:
        remove_root(root)
