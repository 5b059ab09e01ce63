"""The server's poll: a running job whose handling fails stops no other job's."""

from __future__ import annotations

import time

from pbsplug.engine.server import ROLE_MANAGER, Caller

ROOT = Caller(0, ROLE_MANAGER)


def poll_until(eng, done, what: str, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        assert time.monotonic() < deadline, f"waited {seconds} s for {what}"
        eng.poll()
        time.sleep(0.05)


def test_one_running_job_whose_poll_fails_stops_no_other(engine_here, monkeypatch):
    eng = engine_here()
    bad = eng.req_submit(ROOT, {"Resource_List": {"walltime": "00:10:00"}}, "sleep 30\n")
    good = eng.req_submit(ROOT, {"Resource_List": {"walltime": "00:10:00"}}, "sleep 1\n")
    poll_until(eng, lambda: {eng.store.job(j)["job_state"] for j in (bad, good)} == {"R"},
               "the two jobs to run")
    real = eng._check_walltime

    def broken(job_id, now):
        if job_id == bad:
            raise TypeError("a value nothing foresaw")
        return real(job_id, now)

    monkeypatch.setattr(eng, "_check_walltime", broken)
    poll_until(eng, lambda: eng.store.job(good)["job_state"] == "F", "the other job's end")
    assert eng.store.job(good)["Exit_status"] == 0
    assert eng.store.job(bad)["job_state"] == "R" and bad in eng.launches  # tried again
    log = "".join(p.read_text() for p in eng.home.logs.iterdir())
    assert log.count(f";{bad};handling the running job failed: TypeError: a value nothing "
                     "foresaw") == 1  # once, not at every poll
    monkeypatch.undo()
    eng.req_delete(ROOT, [bad], force=True)
    poll_until(eng, lambda: eng.store.job(bad)["job_state"] == "F", "the first job's end")
