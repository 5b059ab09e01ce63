"""The local engine keeps its scheduler instances, and what they keep, between cycles: a
cycle reads only the jobs and vnodes whose stored rows changed (`pbsplug.scheduler.feed`),
and a changed setting gives a new instance or a fresh start."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from pbsplug.engine.server import Engine


@pytest.fixture
def offline(inprocess_engine) -> tuple[Engine, str, Callable[[int], str]]:
    """An engine in this process whose vnodes are all offline (nothing may start a
    process), its queue, and ``submit(seq)``, which stores a queued job."""
    eng = inprocess_engine
    for name, attrs in eng.store.all("node").items():
        eng.store.put("node", name, {**attrs, "state": "offline"})
    queue = next(iter(eng.store.all("queue")))

    def submit(seq: int) -> str:
        job_id = f"{seq}.{eng.server_name}"
        eng.store.add_job(seq, job_id, {
            "job_state": "Q", "queue": queue, "qtime": seq, "Hold_Types": "n",
            "Resource_List": {"select": "1:ncpus=1", "walltime": "00:10:00"}}, None)
        return job_id

    return eng, queue, submit


def test_the_default_scheduler_and_its_kept_state_last_while_nothing_else_changes(offline):
    eng, queue, submit = offline
    first = submit(1)
    eng.cycle()
    sched = eng._schedulers()["default"]
    kept = sched._kept
    assert kept is not None
    assert eng.store.job(first)["comment"].startswith("Not Running")

    second = submit(2)  # a job more: the same instance reads only it
    eng.cycle()
    assert eng._schedulers()["default"] is sched and sched._kept is kept
    assert eng.store.job(second)["comment"].startswith("Not Running")
    assert eng._feed.job_log.entries == []  # read and forgotten

    # A cycle of other schedulers only: nothing reads default's log, which is emptied;
    # default's next cycle reads every job.
    third = submit(3)
    eng.cycle(only={"elsewhere"})
    assert eng._feed.job_log.entries == [] and "comment" not in eng.store.job(third)
    eng.cycle()
    assert eng.store.job(third)["comment"].startswith("Not Running")
    kept = sched._kept

    # A queue's settings: the same instance, afresh.
    eng.store.put("queue", queue, {**eng.store.get("queue", queue), "Priority": 5})
    eng.cycle()
    assert eng._schedulers()["default"] is sched and sched._kept is not kept
    kept = sched._kept

    # A server default that shapes every job's request: the same instance, afresh.
    server = eng.store.get("server", "server")
    eng.store.put("server", "server", {**server,
                                       "resources_default": {"walltime": "01:00:00"}})
    eng.cycle()
    assert eng._schedulers()["default"] is sched and sched._kept is not kept

    # A policy setting: a new instance.
    eng.store.put("server", "server", {**eng.store.get("server", "server"),
                                       "backfill_depth": 3})
    assert eng._schedulers()["default"] is not sched


def test_a_failure_queueing_waiting_jobs_does_not_skip_the_rest_of_the_poll(offline,
                                                                          monkeypatch):
    """`_end_waits` ran unguarded in the poll: an exception there skipped the cycle, the
    periodic hooks and the reservations of every poll for as long as it lasted."""
    eng, _, submit = offline
    job_id = submit(1)

    def broken(now):
        raise RuntimeError("a waiting job the server cannot read")

    monkeypatch.setattr(eng.store, "waiting_due", broken)
    eng.want_cycle = True
    eng.poll()
    assert str(eng.store.job(job_id).get("comment", "")).startswith("Not Running")
