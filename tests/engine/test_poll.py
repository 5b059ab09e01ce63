"""The server's poll: a running job whose handling fails stops no other job's; a lost job's
shepherd it reaped is handed to `kill_session`."""

from __future__ import annotations

import os
import signal
import time

import pytest

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


def test_a_running_jobs_walltime_is_reported_before_its_first_sample(engine_here,
                                                                     monkeypatch):
    """OpenPBS 23.06's MoM reports a job's use as soon as the job runs (checked: zeros and
    walltime 00:00:00, so qstat's Elap Time is 00:00); the engine reported no
    resources_used until the job's first sample (1 s after its start), so qstat showed
    ``--``. Until then it is zeros and the time since the job's start."""
    frozen: list[float] = []
    eng = engine_here(clock=lambda: frozen[0] if frozen else time.time())
    monkeypatch.setattr(eng, "_read_usage", lambda: None)  # (no sample ever arrives)
    job_id = eng.req_submit(ROOT, {"Resource_List": {"walltime": "00:10:00"}}, "sleep 30\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "R", "the job to run")
    frozen.append(eng.store.job(job_id)["stime"] + 65)
    used = eng.req_stat_jobs(ROOT, [job_id])[job_id]["resources_used"]
    assert used == {"cput": "00:00:00", "mem": "0kb", "ncpus": 1, "vmem": "0kb",
                    "walltime": "00:01:05"}
    eng.req_delete(ROOT, [job_id], force=True)
    frozen[0] += 100  # (the kill's delay is over)
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")


def test_the_poll_hands_the_shepherds_it_reaped_to_kill_session(engine_here, monkeypatch):
    """A shepherd killed while the server runs is reaped at the start of the next poll, and
    that poll's `kill_session` for its lost job is told so (then the shepherd's whole
    session is the job's). The server kept what it reaped in a module global of the
    executor's, which `kill_session` read."""
    from pbsplug.engine import executor

    eng = engine_here()
    job_id = eng.req_submit(ROOT, {"Resource_List": {"walltime": "00:10:00"},
                                   "Rerunable": False}, "sleep 300\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "R", "the job to run")
    shepherd = eng.launches[job_id].shepherd
    real = executor.kill_session
    told: list[tuple[int, frozenset[int]]] = []

    def kill_session(launch, **kwargs):
        told.append((launch.shepherd, frozenset(kwargs.get("reaped", ()))))
        return real(launch, **kwargs)

    monkeypatch.setattr(executor, "kill_session", kill_session)
    os.kill(shepherd, signal.SIGKILL)
    deadline = time.monotonic() + 30  # (a hang guard: a zombie when the poll reaps it)
    while executor.process_start(shepherd) is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the lost job's end")
    assert [(pid, shepherd in reaped) for pid, reaped in told] == [(shepherd, True)]
    assert eng.store.job(job_id)["Exit_status"] == -4


def test_a_job_its_shepherd_could_not_be_sent_is_a_failed_start_that_says_why(
        engine_here, monkeypatch):
    """The job's command goes to its shepherd in a file of no name (memfd): writing it may
    fail (out of memory) with the shepherd alive. That is a failed start, requeued, as a
    shepherd gone is, but its comment said the shepherd had ended."""
    import errno

    from pbsplug.engine import executor

    eng = engine_here()
    real, failed = executor._write_at_start, []

    def short(fd: int, data: bytes) -> None:
        if not failed:
            failed.append(fd)
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
        real(fd, data)

    monkeypatch.setattr(executor, "_write_at_start", short)
    job_id = eng.req_submit(ROOT, {"Rerunable": False}, "echo ran\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
    attrs = eng.store.job(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs.get("comment")
    log = "".join(p.read_text() for p in eng.home.logs.iterdir())
    assert "job failed to start: the job could not be sent to its shepherd (pid " in log, log
    assert "ended before it was sent the job" not in log


def test_a_start_request_that_cannot_be_made_is_a_failed_start_that_says_why(
        engine_here, monkeypatch):
    """The file of no name for the job's command (memfd) refused for want of memory: a
    failed start, requeued, as a request that cannot be written is. It was taken for a
    kernel with no memfd, and a file made in jobs/ instead."""
    import errno

    eng = engine_here()
    real, failed = os.memfd_create, []

    def short(name: str, flags: int = 0) -> int:
        if not failed:
            failed.append(name)
            raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
        return real(name, flags)

    monkeypatch.setattr(os, "memfd_create", short)
    job_id = eng.req_submit(ROOT, {"Rerunable": False}, "echo ran\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
    attrs = eng.store.job(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs.get("comment")
    log = "".join(p.read_text() for p in eng.home.logs.iterdir())
    assert (f";{job_id};job failed to start: the job could not be sent to its shepherd: its "
            "start request could not be made (memfd_create): Cannot allocate memory") in log, log


@pytest.mark.parametrize("call", ["fork", "pipe"])
def test_a_shepherd_that_cannot_be_made_is_a_failed_start_that_says_why(
        engine_here, monkeypatch, call):
    """The job's shepherd's pipe or fork refused (EAGAIN: no process left for the server's
    user, for a moment): a failed start, requeued whatever the job's Rerunable, as a start
    request that cannot be made is. The job ended F (Exit_status -1, 'Job could not
    start'), as a job whose start can never work (its user unknown) does."""
    import errno

    from pbsplug.engine import executor

    eng = engine_here()
    real_request, real_call = executor._request_file, getattr(os, call)
    armed, failed = [], []

    def request_file(folder):  # (prepare's pipe and fork come next: only those fail)
        armed.append(1)
        return real_request(folder)

    def refused(*args):
        if armed and not failed:
            failed.append(call)
            raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        return real_call(*args)

    monkeypatch.setattr(executor, "_request_file", request_file)
    monkeypatch.setattr(os, call, refused)
    job_id = eng.req_submit(ROOT, {"Rerunable": False}, "echo ran\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
    attrs = eng.store.job(job_id)
    assert failed == [call]
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 2), attrs.get("comment")
    log = "".join(p.read_text() for p in eng.home.logs.iterdir())
    assert (f";{job_id};job failed to start: its shepherd could not be made ({call}): "
            f"{os.strerror(errno.EAGAIN)}") in log, log
    assert f";{job_id};Job requeued: it failed to start (its shepherd could not be made" \
        in log, log


def test_starts_short_of_a_process_pause_and_the_pause_doubles(engine_here, monkeypatch):
    """A shepherd's fork refused (EAGAIN) requeued the job, and the requeue's cycle tried it
    again at once: within a second, 21 tries held it (`job held, too many failed attempts
    to run`), and every queued job after it. Now the cycles' starts pause, 1 s after the
    first shortage, 2 s after the next, 4 s after the third, on the server's clock; the
    job runs once a fork works, each try counted."""
    import errno

    from pbsplug.engine import executor

    now = [1000.0]
    eng = engine_here(clock=lambda: now[0])
    real_request, real_fork = executor._request_file, os.fork
    armed, tries = [], []

    def request_file(folder):  # (prepare's fork comes next: only the shepherd's fails)
        armed.append(1)
        return real_request(folder)

    def fork():
        if armed:
            armed.clear()
            tries.append(now[0])
            if len(tries) <= 3:
                raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
        return real_fork()

    monkeypatch.setattr(executor, "_request_file", request_file)
    monkeypatch.setattr(os, "fork", fork)
    job_id = eng.req_submit(ROOT, {}, "true\n")
    poll_until(eng, lambda: tries, "the first try")
    for pause in (1.0, 2.0, 4.0):
        made = len(tries)
        now[0] += pause - 0.01  # (the pause's end not reached: no try)
        for _ in range(5):
            eng.poll()
        assert len(tries) == made, tries
        assert eng.store.job(job_id)["job_state"] == "Q"
        now[0] += 0.01
        poll_until(eng, lambda made=made: len(tries) > made, f"the try after a {pause:g} s pause")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
    attrs = eng.store.job(job_id)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 4), attrs.get("comment")
    assert tries == [1000.0, 1001.0, 1003.0, 1007.0]
    log = "".join(p.read_text() for p in eng.home.logs.iterdir())
    for pause in ("1", "2", "4"):
        assert f"job starts paused for {pause} s: a start was short of what it needs " \
               "(its shepherd could not be made (fork)" in log, log
    # A start that worked made the next pause 1 s again; a pause never outlasts its
    # length: the clock set back an hour in one ended it, where it paused every start
    # for the hour.
    tries.clear()
    other = eng.req_submit(ROOT, {}, "true\n")
    poll_until(eng, lambda: len(tries) == 1, "the other job's first try")
    tries.extend([0.0] * 3)  # (its next forks work)
    assert eng.starts_paused_until == now[0] + 1
    now[0] -= 3600
    poll_until(eng, lambda: eng.store.job(other)["job_state"] == "F", "the other job's end")


def test_a_qterm_immediate_whose_kill_fails_still_stops_the_server(engine_here,
                                                                   monkeypatch):
    """qterm -t immediate stops the hook chains, then kills each job: a kill that failed
    (its store write on a full disk) failed the request and left the server serving on,
    its chains gone (a prologue's job R with no launch, an end's E, until a restart)."""
    eng = engine_here()
    job_id = eng.req_submit(ROOT, {"Resource_List": {"walltime": "00:10:00"}}, "sleep 300\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "R", "the job to run")

    def full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(eng, "_kill", full)
    try:
        eng.control.terminate(ROOT, "immediate")
    except OSError:
        pass
    assert eng.stopping
    monkeypatch.undo()
    eng.req_delete(ROOT, [job_id], force=True)
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "F", "the job's end")
