"""A job's Variable_List lives in a column of its own (`store.ENV`): the reads that do not
need it (the scheduler's, the counts, plain qstat) never load it, which a user's megabyte
environments times many jobs made slow for everyone; a database of the first schema reads
the same and moves it on its next write."""

from __future__ import annotations

import json
import sqlite3

import pytest

from pbsplug.engine import store as store_mod
from pbsplug.engine.errors import PbsError
from pbsplug.engine.store import Store

ENVIRONMENT = {"PBS_O_WORKDIR": "/tmp", "BIG": "x" * 1000}


def test_the_environment_is_a_column_of_its_own_and_a_lean_read_leaves_it(tmp_path):
    st = Store(tmp_path / "server.db")
    with st.transaction():
        st.add_job(1, "1.s", {"job_state": "Q", "queue": "workq", "Variable_List": ENVIRONMENT},
                   "true\n")
    text, env = st.db.execute("SELECT attrs, env FROM jobs").fetchone()
    assert "Variable_List" not in json.loads(text) and json.loads(env) == ENVIRONMENT
    assert st.job("1.s")["Variable_List"] == ENVIRONMENT
    lean = st.jobs(("Q",), lean=True)["1.s"]
    assert "Variable_List" not in lean and lean["queue"] == "workq"
    lean["comment"] = "Not Running: x"
    with st.transaction():
        st.put_job("1.s", lean, keep_env=True)  # the stored environment stays
    assert st.job("1.s") == {"job_state": "Q", "queue": "workq", "comment": "Not Running: x",
                             "substate": 10,  # (PBS's for its state, at every write)
                             "Variable_List": ENVIRONMENT}
    with st.transaction():  # a whole job without one (a hook unset it): none is kept
        st.put_job("1.s", {**lean, "Variable_List": None})
    assert "Variable_List" not in st.job("1.s")
    assert st.db.execute("SELECT env FROM jobs").fetchone() == (None,)
    assert st.state_counts(("Q", "H")) == {("workq", "Q"): 1}


def test_a_first_schema_database_is_migrated_and_its_rows_read_the_same(tmp_path):
    path = tmp_path / "server.db"
    db = sqlite3.connect(path)
    db.executescript(store_mod._MIGRATIONS[1] +
                     ";INSERT INTO meta VALUES ('schema_version', '1');")
    old = {"job_state": "H", "queue": "workq", "Variable_List": ENVIRONMENT}
    db.execute("INSERT INTO jobs (seq, id, state, attrs) VALUES (1, '1.s', 'H', ?)",
               (json.dumps(old),))
    db.commit()
    db.close()
    st = Store(path)
    assert st.version() == store_mod.SCHEMA_VERSION == 3
    assert st.job("1.s") == old
    assert st.jobs(lean=True)["1.s"] == old  # still in attrs: read with them
    with st.transaction():
        st.put_job("1.s", st.job("1.s"))
    text, env = st.db.execute("SELECT attrs, env FROM jobs").fetchone()
    assert "Variable_List" not in json.loads(text) and json.loads(env) == ENVIRONMENT


def test_an_unreadable_environment_sets_the_job_aside_keeping_the_rest(engine):
    job_id = engine.submit("true\n", Hold_Types="u", Job_Name="keepme")
    engine.stop()
    with sqlite3.connect(engine.home.db) as db:
        db.execute("UPDATE jobs SET env='{not json' WHERE id=?", (job_id,))
    engine.start()
    held = engine.job(job_id)
    assert held["job_state"] == "H" and "s" in held["Hold_Types"]
    assert "Variable_List" in held["comment"] and held["Job_Name"] == "keepme"
    assert held["Variable_List"] == {}
    engine.stop()
    engine.start()  # set aside once: nothing left to set aside
    assert engine.job(job_id)["comment"] == held["comment"]


def test_plain_qstat_asks_for_its_columns_only(engine):
    job_id = engine.submit("true\n", Hold_Types="u", Job_Name="small",
                           Variable_List={"PBS_O_WORKDIR": str(engine.work), "BIG": "y" * 100})
    listed = engine.client("stat_jobs", attrs=["Job_Name"])
    assert listed == {job_id: {"Job_Name": "small", "job_state": "H"}}
    assert "BIG" in str(engine.client("stat_jobs"))
    done = engine.pbs("qstat")
    assert job_id.split(".")[0] in done.stdout and "small" in done.stdout
    with pytest.raises(PbsError) as bad:
        engine.client("stat_jobs", attrs="Job_Name")
    assert bad.value.code in (15004, 15014) and "attrs" in bad.value.message


def test_a_job_whose_environment_went_bad_while_queued_does_not_start(engine):
    """Review of the first version: the scheduler (which reads no environment) started
    such a job, its start failed on the text, and the job stayed R for good with no
    process, holding its vnode."""
    job_id = engine.submit("true\n", Hold_Types="u")
    with sqlite3.connect(engine.home.db) as db:
        db.execute("UPDATE jobs SET env='{not json' WHERE id=?", (job_id,))
    engine.pbs("qrls", job_id, check=True)
    ended = engine.wait(job_id, "F")
    assert ended["Exit_status"] == -1
    assert "environment (Variable_List) could not be read" in ended["comment"]


def test_only_the_jobs_held_on_dependencies_are_read_at_each_job_event(tmp_path):
    """A job's start, end or submission looks for the jobs waiting on it: SQLite picks the
    held ones with a system hold and a depend attribute (every held job was read, with
    10,000 held jobs about 80 ms a qsub)."""
    st = Store(tmp_path / "server.db")
    rows = {
        "1.s": {"job_state": "H", "Hold_Types": "s", "depend": "afterok:9.s"},
        "2.s": {"job_state": "H", "Hold_Types": "su", "depend": "afterany:9.s"},
        "3.s": {"job_state": "H", "Hold_Types": "u", "depend": "afterok:9.s"},  # a user's
        "4.s": {"job_state": "H", "Hold_Types": "s"},  # an operator's, no dependency
        "5.s": {"job_state": "Q", "Hold_Types": "n", "depend": "afterok:9.s"},
    }
    with st.transaction():
        for seq, (job_id, attrs) in enumerate(rows.items()):
            st.add_job(seq, job_id, {**attrs, "Variable_List": ENVIRONMENT}, None)
    held = st.depend_held()
    assert list(held) == ["1.s", "2.s"]
    assert held["2.s"]["depend"] == "afterany:9.s" and "Variable_List" not in held["2.s"]


def test_a_dependency_reads_the_jobs_it_names_once_and_without_their_environment(tmp_path):
    """Review: a depend list naming one job of 1 MiB 800 times read 800 MiB (a 47 s stall
    of the server for one qsub)."""
    from pbsplug.engine import depend

    assert depend.parse("afterok:1.s:1.s:2.s:1.s,after:1.s") == [
        ("afterok", ["1.s", "2.s"]), ("after", ["1.s"])]
    st = Store(tmp_path / "server.db")
    st.add_job(1, "1.s", {"job_state": "F", "Exit_status": 0, "Variable_List": ENVIRONMENT},
               None)
    assert "Variable_List" not in st.job("1.s", lean=True)
    assert st.job("1.s")["Variable_List"] == ENVIRONMENT


def test_a_row_the_server_wrote_reads_back_past_jsontexts_depth(tmp_path):
    """The store reads its own rows with json.loads: a value near `pbsplug.jsontext`'s
    depth limit (100), stored inside a job's Resource_List, is past it; read with
    jsontext's limits, the row was UNREADABLE and the job set aside."""
    deep: object = 1
    for _ in range(99):
        deep = [deep]
    st = Store(tmp_path / "server.db")
    attrs = {"job_state": "Q", "queue": "workq", "Resource_List": {"x": deep},
             "Variable_List": {"V": [deep]}}
    with st.transaction():
        st.add_job(1, "1.s", attrs, "true\n")
        st.put("queue", "workq", {"Resource_Default": {"x": deep}})
    assert st.job("1.s") == {**attrs, "substate": 10}
    assert st.get("queue", "workq") == {"Resource_Default": {"x": deep}}


def test_merge_runtime_sets_its_keys_and_keeps_the_others(tmp_path):
    """`Store.merge_runtime`: the job's other runtime keys kept, in the caller's
    transaction (a failed one writes none of it)."""
    st = Store(tmp_path / "server.db")
    with st.transaction():
        st.add_job(1, "1.s", {"job_state": "Q", "queue": "workq"}, "true\n")
        st.merge_runtime("1.s", began=False)  # (none stored yet)
    assert st.runtime("1.s") == {"began": False}
    st.merge_runtime("1.s", began=True, launch={"pid": 7})
    assert st.runtime("1.s") == {"began": True, "launch": {"pid": 7}}
    with pytest.raises(RuntimeError), st.transaction():
        st.merge_runtime("1.s", suspended_at=5.0)
        raise RuntimeError("the caller's transaction fails")
    assert st.runtime("1.s") == {"began": True, "launch": {"pid": 7}}
    st.merge_runtime("1.s", job_id="a key of that name")  # (job_id is positional only)
    assert st.runtime("1.s")["job_id"] == "a key of that name"
