"""A row of server.db that is not JSON (issue 17): the server still starts, sets the job
aside (held, or kept as history) or the vnode (offline), rewrites the row as JSON, and a
running job whose stored launch cannot be read is lost by the usual rule."""

from __future__ import annotations

import sqlite3


def test_unreadable_rows_are_set_aside_and_rewritten(engine):
    engine.pbs("qmgr", "-c", "create node spare resources_available.ncpus = 1", check=True)
    finished = engine.submit("true\n")
    engine.wait(finished)
    bad = engine.submit("sleep 100\n", Hold_Types="u")
    rerun = engine.submit("sleep 100\n", Hold_Types="u")
    norerun = engine.submit("sleep 100\n", Hold_Types="u", Rerunable="n")
    engine.stop()
    running = "state='R', attrs=json_set(attrs,'$.job_state','R')"
    with sqlite3.connect(engine.home.db) as db:
        db.execute("UPDATE jobs SET attrs='{not json' WHERE id=?", (bad,))
        db.execute("UPDATE jobs SET attrs='[[[' WHERE id=?", (finished,))
        db.execute("UPDATE objects SET attrs='not json' WHERE type='node' AND name='spare'")
        db.execute(f"UPDATE jobs SET {running}, runtime='zz' WHERE id=?", (rerun,))
        db.execute(f"UPDATE jobs SET {running}, runtime='{{\"launch\": {{\"x\": 1}}}}' "
                   "WHERE id=?", (norerun,))
    engine.start()

    held = engine.job(bad)
    assert (held["job_state"], held["Hold_Types"]) == ("H", "s")
    assert "stored attributes could not be read" in held["comment"]
    history = engine.job(finished)
    assert history["job_state"] == "F"
    assert "stored attributes could not be read" in history["comment"]
    spare = engine.nodes()["spare"]
    assert "offline" in spare["state"] and "could not be read" in spare["comment"]
    requeued = engine.job(rerun)
    assert requeued["job_state"] == "H" and "launch could not be read" in requeued["comment"]
    failed = engine.wait(norerun)
    assert failed["Exit_status"] == -4  # PBS's JOB_EXEC_INITABT: lost
    assert "launch could not be read" in engine.log()
    assert engine.pbs("qstat").returncode == 0

    engine.stop()  # every row is JSON again: the next start is clean
    with sqlite3.connect(engine.home.db) as db:
        assert db.execute("SELECT count(*) FROM jobs WHERE NOT json_valid(attrs) OR "
                          "runtime IS NOT NULL AND NOT json_valid(runtime)").fetchone() == (0,)
        assert db.execute("SELECT count(*) FROM objects WHERE NOT json_valid(attrs)"
                          ).fetchone() == (0,)
    engine.start()
    assert engine.job(bad)["job_state"] == "H"


def test_a_stored_node_sort_key_qmgr_now_refuses_is_set_aside_at_start(engine):
    """A node_sort_key stored before qmgr refused `unused` (``ncpus HIGH unused``) sorted
    no vnode, and nobody was told: the server unsets it at its start and says so; the
    default (``sort_priority HIGH``) applies."""
    engine.pbs("qmgr", "-c", "create sched other", check=True)
    engine.stop()
    with sqlite3.connect(engine.home.db) as db:
        for kind, name in (("server", "server"), ("sched", "other")):
            db.execute("UPDATE objects SET attrs=json_set(attrs, '$.node_sort_key', "
                       "'ncpus HIGH unused') WHERE type=? AND name=?", (kind, name))
    engine.start()
    assert "node_sort_key" not in engine.client("stat_server")
    assert "ncpus HIGH unused" not in engine.pbs("qmgr", "-c", "list sched other").stdout
    log = engine.log()
    assert log.count("set aside: a stored value the server cannot use: node_sort_key="
                     "'ncpus HIGH unused'") == 2, log[-2000:]
