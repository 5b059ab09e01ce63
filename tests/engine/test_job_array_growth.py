"""What a job array's life costs the server grows with what is asked, not with the array
(docs/engine.md, "Job arrays", "How it is kept"): the next subjobs are taken from the runs
of ``array_indices_remaining`` without expanding it, and a subjob's start counts its
array's running subjobs among the running jobs (SQLite's index of states), not among all
its subjobs. These tests hold the invariants, never a time."""

from __future__ import annotations

import random

import pytest

from pbsplug.engine import arrays
from pbsplug.engine.server import ROLE_MANAGER, Caller
from pbsplug.engine.store import Store


@pytest.mark.parametrize(("text", "step", "index", "written"), [
    ("0-9999", 1, 0, "1-9999"), ("0-9999", 1, 9999, "0-9998"), ("0-9999", 1, 5, "0-4,6-9999"),
    ("0-6:2", 2, 2, "0,4-6:2"), ("4-6:2", 2, 4, "6"), ("7", 1, 7, "-"), ("8,10", 1, 9, "8,10"),
    ("1-3,5", 1, 4, "1-3,5"), ("1,2", 1, 9, "1-2"), ("3,1-2", 1, 9, "1-3"),
    ("1-9:2", 1, 3, "1,5,7,9"), ("2-1,4", 1, 4, "-")])
def test_an_index_is_taken_from_the_runs_as_format_indices_writes_the_rest(text, step, index,
                                                                          written):
    """The last four are no text the server writes (two runs one step apart, out of order,
    of another step, a run backwards): written as `format_indices` writes them all the
    same."""
    runs = arrays.parse_runs(text)
    assert arrays.without_index(runs, index, step) == written == arrays.format_indices(
        [i for i in arrays.parse_indices(text) if i != index], step)


def test_the_runs_give_what_the_expanded_indices_give():
    rng = random.Random(37)
    for _ in range(2000):
        step = rng.choice((1, 1, 2, 3))
        every = range(rng.randint(0, 5), 100, step)
        text = arrays.format_indices(rng.sample(every, rng.randint(0, len(every))), step)
        runs, expanded = arrays.parse_runs(text), arrays.parse_indices(text)
        count = rng.randint(0, 40)
        assert arrays.first_indices(runs, count) == expanded[:count], text
        assert arrays.count_indices(text) == len(expanded)
        index = rng.choice(every)
        assert arrays.without_index(runs, index, step) == arrays.format_indices(
            [i for i in expanded if i != index], step), (text, index)
    with pytest.raises(ValueError):
        arrays.parse_runs("1-5:0")


def test_running_subjobs_are_counted_among_the_running_jobs_after_a_restart(tmp_path):
    """`Store.subjobs_in` reads through the index of job states (so a start costs what
    the running jobs are, not the array's size), and counts what the rows say: a store
    opened again (a restarted server) counts the same."""
    store = Store(tmp_path / "server.db")
    rows = {"1[].vm": "B", "1[1].vm": "F", "1[2].vm": "R", "1[3].vm": "E", "1[4].vm": "S",
            "1[5].vm": "R", "12[].vm": "B", "12[1].vm": "R", "2.vm": "R"}
    with store.transaction() as st:
        for seq, (job_id, state) in enumerate(rows.items()):
            st.add_job(seq, job_id, {"job_state": state}, None)
    plan = " ".join(str(row) for row in store.db.execute(
        "EXPLAIN QUERY PLAN SELECT count(*) FROM jobs INDEXED BY jobs_state "
        "WHERE state IN ('R', 'E') AND id > '1[' AND id < '1\\' AND id <> '1[].vm'"))
    assert "jobs_state" in plan, plan
    assert store.subjobs_in("1[].vm", ("R", "E")) == 3
    assert store.subjobs_in("12[].vm", ("R", "E")) == 1
    store.close()
    again = Store(tmp_path / "server.db")
    assert again.subjobs_in("1[].vm", ("R", "E")) == 3
    assert again.subjobs_in("1[].vm", ("R",)) == sum(
        state == "R" for _, state in again.subjob_states("1[].vm"))
    again.close()


def _start(eng, fed: dict) -> str | None:
    """The first subjob a cycle is fed, started as the server starts it (its row made, its
    array's ``max_run_subjobs`` first); None when its array lets none start now."""
    sub = next((j for j, a in fed.items() if a.get("array_id") and a["job_state"] == "Q"
                and eng.store.job(j) is None), None)
    if sub is None or eng.arrays.over_limit(sub):
        return None
    assert eng.arrays.instantiate(sub) is not None
    return sub


def _end(eng, sub: str) -> None:
    attrs = eng.store.job(sub)
    attrs.update(job_state="F", Exit_status=0)
    with eng.store.transaction() as st:
        st.put_job(sub, attrs)
    eng.arrays.subjob_over(sub, attrs)


def _fed(eng) -> dict:
    return eng.arrays.feed(eng.store.jobs(("Q", "B", "R", "E"), lean=True))


def test_a_10000_index_array_starts_every_subjob_in_index_order(inprocess_engine):
    """Fed and started one by one, as cycles start them (a middle range deleted first):
    each index once, in order, ``array_indices_remaining`` the runs left at every step,
    and the array finished once the last has ended."""
    eng = inprocess_engine
    eng.store.db.execute("PRAGMA synchronous=OFF")  # (20,000 commits: no disk's flush each)
    root = Caller(0, ROLE_MANAGER)
    array_job = eng.req_submit(root, {"array_indices_submitted": "0-9999"}, "true\n")
    number, server = array_job.split("[", 1)[0], array_job.split(".", 1)[1]
    eng.req_delete(root, [f"{number}[5000-5099].{server}"])
    expected = [i for i in range(10_000) if not 5000 <= i < 5100]
    started = []
    while (sub := _start(eng, _fed(eng))) is not None:
        started.append(eng.store.job(sub)["array_index"])
        left = expected[len(started):]
        if len(started) % 997 == 0 or len(left) < 3:
            assert eng.store.job(array_job)["array_indices_remaining"] == \
                arrays.format_indices(left, 1)
        _end(eng, sub)
    assert started == expected
    attrs = eng.store.job(array_job)
    assert (attrs["job_state"], attrs["array_indices_remaining"], attrs["Exit_status"]) == (
        "F", "-", 0)


def test_max_run_subjobs_counts_the_subjobs_running_now(inprocess_engine):
    """The array's max_run_subjobs, checked at each start against its subjobs running
    then (those of earlier cycles that ended no longer count), and the feed shows no more
    than it leaves room for."""
    eng = inprocess_engine
    root = Caller(0, ROLE_MANAGER)
    array_job = eng.req_submit(root, {"array_indices_submitted": "1-9:2",
                                      "max_run_subjobs": 2}, "true\n")
    running = []
    for _ in range(2):
        sub = _start(eng, _fed(eng))
        attrs = eng.store.job(sub)
        attrs["job_state"] = "R"
        with eng.store.transaction() as st:
            st.put_job(sub, attrs)
        running.append(sub)
    assert [j for j, a in _fed(eng).items() if a.get("array_id") and a["job_state"] == "Q"
            ] == []
    assert eng.arrays.over_limit(arrays.subjob_id(array_job, 5))
    _end(eng, running[0])
    assert not eng.arrays.over_limit(arrays.subjob_id(array_job, 5))
    assert [j for j, a in _fed(eng).items() if a.get("job_state") == "Q"] == [
        arrays.subjob_id(array_job, 5)]
    assert eng.store.job(array_job)["array_indices_remaining"] == "5-9:2"


def test_max_run_subjobs_holds_across_a_restart(engine):
    """The running subjobs are counted from the store: a server killed while one subjob of
    a ``%1`` array runs starts the next only once it has ended."""
    job_id = engine.pbs("qsub", "-J", "1-3%1", "--", "/bin/sleep", "1",
                        check=True).stdout.strip()
    engine.wait(arrays.subjob_id(job_id, 1), "R")
    engine.kill()
    engine.start()
    assert engine.wait(job_id, timeout=90)["Exit_status"] == 0
    subs = [engine.job(arrays.subjob_id(job_id, i)) for i in (1, 2, 3)]
    assert all(later["stime"] >= earlier["obittime"]
               for earlier, later in zip(subs, subs[1:], strict=False)), subs


def test_an_array_ends_with_its_last_subjob_whatever_the_order_they_end(inprocess_engine):
    """Every subjob's end asks whether one of its array's is left: the rows are looked at
    from the last place down (`Store.any_not_over`), and the array ends with the last
    subjob to end, whichever it is (here all begun, then ended out of order, the highest
    place first and the lowest last)."""
    eng = inprocess_engine
    root = Caller(0, ROLE_MANAGER)
    array_job = eng.req_submit(root, {"array_indices_submitted": "0-11"}, "true\n")
    subs = [_start(eng, _fed(eng)) for _ in range(12)]
    assert eng.store.job(array_job)["array_indices_remaining"] == "-"
    order = [11, 5, 6, 10, 1, 9, 2, 8, 3, 7, 4, 0]
    for count, place in enumerate(order, 1):
        _end(eng, subs[place])
        assert eng.store.job(array_job)["job_state"] == ("F" if count == 12 else "B"), place
