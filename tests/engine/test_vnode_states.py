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
