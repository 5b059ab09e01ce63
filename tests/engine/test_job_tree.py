"""A job's processes, found as its shepherd's descendants (the shepherd is their subreaper)
and as its session's members: what `executor.job_processes` takes and leaves, and that a
subreaper keeps a daemon's orphan in its tree. The attacks themselves, as an unprivileged
user through a real server, are in tests/security/test_session_escape.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
import types

from pbsplug.engine import executor
from pbsplug.engine.executor import Proc


def proc(ppid: int, start: float, session: int = 7, state: str = "S") -> Proc:
    return Proc(state, ppid, session, start, 0, 0, 0)


def test_a_jobs_processes_are_the_shepherds_descendants_and_its_sessions_members():
    table = {
        10: proc(1, 100.0, session=10),          # the shepherd
        11: proc(10, 101.0),                     # its child (the job)
        12: proc(10, 102.0, session=12),         # an orphan come to it, in its own session
        13: proc(12, 103.0, session=12),         # that one's child
        14: proc(1, 104.0, session=10),          # left in the shepherd's session (no subreaper)
        20: proc(1, 50.0, session=20),           # someone else's
        21: proc(20, 105.0, session=20),
    }
    found = executor.job_processes({10: 100.0}, 100.0, (10,), table)
    assert sorted(found) == [11, 12, 13, 14]


def test_a_process_older_than_the_parent_it_names_is_not_taken():
    """Pid reuse while /proc is read: a process whose parent's pid was freed and given to
    one of the job's is older than that newcomer, and not the job's."""
    table = {
        10: proc(1, 100.0, session=10),
        30: proc(10, 200.0),                     # the job's, with a reused pid
        31: proc(30, 150.0, session=31),         # the old owner of pid 30's child: not ours
        32: proc(30, 201.0),                     # the newcomer's own child
    }
    assert sorted(executor.job_processes({10: 100.0}, 100.0, (10,), table)) == [30, 32]


def test_a_root_whose_pid_names_another_process_now_has_no_descendants():
    table = {10: proc(1, 300.0, session=10), 11: proc(10, 301.0)}
    assert executor.job_processes({10: 100.0}, 100.0, (), table) == {}


def test_a_session_member_started_before_the_shepherd_is_not_taken():
    table = {10: proc(1, 100.0, session=10), 11: proc(1, 90.0, session=10)}
    assert executor.job_processes({10: 100.0}, 100.0, (10,), table) == {}


def in_a_shepherd(check) -> None:
    """Run `check` in a forked child (a shepherd of a sort: it may make itself a subreaper
    without changing pytest's own process); what it raises fails the test."""
    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.close(read_end)
            check()
            code = 0
        except BaseException as exc:  # noqa: BLE001 - told to the test through the pipe
            os.write(write_end, repr(exc).encode()[:4000])
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        why = pipe.read().decode()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, why


def test_a_subreaper_keeps_a_daemons_orphan_in_its_tree_and_kills_it():
    """A double fork with a setsid between (a daemon's): the process left is the
    subreaper's child, found by both searches, and killed by the shepherd's kill."""

    def check() -> None:
        assert executor.become_subreaper()
        subprocess.run(["/bin/sh", "-c", "setsid sleep 300 & exit 0"], check=True)
        me, started = os.getpid(), executor.process_start(os.getpid()) or 0.0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            walked = executor._tree_walk(me, started) or {}
            # (the orphan come to its subreaper, and its setsid done: it may not be yet)
            if any(p.ppid == me and os.getsid(pid) == pid for pid, p in walked.items()):
                break
            time.sleep(0.01)
        found = executor.job_processes({me: started}, started)
        orphans = [pid for pid, p in found.items() if p.ppid == me and not p.gone]
        assert len(orphans) == 1 and set(walked) == set(found), (walked, found)
        assert os.getsid(orphans[0]) == orphans[0]
        assert executor._kill_job(me, started) == 1
        executor._reap_all(5.0)
        assert executor._proc(orphans[0]) is None

    in_a_shepherd(check)


def test_reaping_at_the_jobs_end_stops_at_its_deadline_while_zombies_keep_coming(
        monkeypatch):
    """`_reap_all` looked at its deadline only when no child had ended: a child ending at
    every wait kept it going for ever. Here each wait finds a new zombie and costs 1 ms of
    a fake clock; the loop stops at its 1 s, about 1,000 waits (the old one ran into the
    hang guard, 100,000)."""
    now = [1000.0]
    waits = [0]

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        waits[0] += 1
        if waits[0] >= 100_000:  # (a hang guard)
            raise ChildProcessError
        now[0] += 0.001
        return 10_000 + waits[0], 0

    monkeypatch.setattr(executor, "time", types.SimpleNamespace(
        monotonic=lambda: now[0], sleep=lambda seconds: None))
    monkeypatch.setattr(os, "waitpid", waitpid)
    executor._reap_all(1.0)
    monkeypatch.undo()
    assert 900 <= waits[0] <= 1100, waits[0]


#: A session's leader (a shepherd of a sort) that starts a member 0.1 s after itself (its
#: start time later, in clock ticks), prints its pid, and ends when its stdin closes.
LEADER = ("import subprocess, sys, time\n"
          "time.sleep(0.1)\n"
          "print(subprocess.Popen(['sleep', '300']).pid, flush=True)\n"
          "sys.stdin.read()\n")


def test_reap_hands_over_the_shepherds_it_collected_for_kill_session(tmp_path):
    """`reap` returns the pids it collected, and `kill_session` takes every member of the
    session of a shepherd in `reaped` (its pid was a zombie's until then: no other session
    could have the number), but by default only those started before the shepherd was
    last seen alive (`_last_seen`: here its start, as it wrote no file). The server kept
    the collected pids in a module global that `kill_session` read."""

    def check() -> None:
        leader = subprocess.Popen(["/usr/bin/python3", "-c", LEADER], start_new_session=True,
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert leader.stdout is not None and leader.stdin is not None
        member = int(leader.stdout.readline())
        launch = executor.Launch(leader.pid, executor.process_start(leader.pid) or 0.0,
                                 member, str(tmp_path / "1.status"), str(tmp_path),
                                 executor.boot_id())
        try:
            leader.stdin.close()
            reaped: frozenset[int] = frozenset()
            deadline = time.monotonic() + 30  # (a hang guard)
            while leader.pid not in reaped and time.monotonic() < deadline:
                reaped |= executor.reap()
                time.sleep(0.01)
            assert reaped == {leader.pid}
            leader.returncode = 0  # (reaped above)
            assert executor.kill_session(launch) == 0
            assert executor._proc(member) is not None
            assert executor.kill_session(launch, reaped=reaped) == 1
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(member, signal.SIGKILL)

    in_a_shepherd(check)


#: A process that forks, makes a session and exits in a loop, until the time in argv[1].
HOPPER = ("import os, sys, time\n"
          "end = float(sys.argv[1])\n"
          "while time.time() < end:\n"
          "    if os.fork():\n"
          "        os._exit(0)\n"
          "    os.setsid()\n")


def test_the_rounds_kill_a_process_that_forks_and_exits_in_a_loop():
    """A process that forks and exits over and over is never where a scan of /proc saw it;
    its subreaper's rounds (stop, kill, look again at its children) end it. Each hop
    leaves the subreaper a zombie (thousands a second, none reaped here before the kill):
    rounds that reaped only after a round that found something walked them all at every
    look, too slowly ever to see the live process, and killed nothing in their 5 s (1 run
    in 20 with 0.5 s of zombies, every run with 2 s)."""

    def check() -> None:
        assert executor.become_subreaper()
        # (for 60 s at most: one the kill missed must not hop on for ever)
        hopper = subprocess.Popen(["/usr/bin/python3", "-c", HOPPER, str(time.time() + 60)])
        time.sleep(2)
        me, started = os.getpid(), executor.process_start(os.getpid()) or 0.0
        assert executor._kill_job(me, started) >= 1
        assert executor._live_children(me) == []
        executor._reap_all(5.0)
        # (no child left at all: a live descendant would be one's, or one itself)
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            raise AssertionError("a process of the loop is left")
        except ChildProcessError:
            pass
        hopper.returncode = 0  # (reaped above)

    in_a_shepherd(check)


def test_the_shepherds_wait_leaves_no_wakeup_descriptor_or_handler_behind(tmp_path):
    """The shepherd's wait for its job (`executor._wait_for_job`, run here in the test's
    own main thread on a real child) undoes its signal set-up before it closes its pipe: a
    wakeup descriptor left pointing at the closed pipe made CPython 3.11 deadlock in its
    signal handler on a SIGCHLD of the end's kill rounds (the job then stayed R for ever),
    or write the signal's byte into whatever file reused the number."""
    child = os.fork()
    if child == 0:
        os._exit(3)
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGCHLD, executor.NOTE_SIGNAL)}
    try:
        status, _usage = executor._wait_for_job(child, tmp_path / "1.status", None,
                                                time.monotonic(), executor.Usage())
        assert os.waitstatus_to_exitcode(status) == 3
        assert signal.set_wakeup_fd(-1) == -1
        assert signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL
        assert signal.getsignal(executor.NOTE_SIGNAL) == signal.SIG_IGN
    finally:
        signal.set_wakeup_fd(-1)
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def test_a_full_wakeup_pipe_queues_nothing_from_the_signal_handler():
    """The shepherd's wakeup pipe full (SIGCHLDs by the tens of thousands between two of its
    reads: a job that stops and continues its top process in a loop, or kills of thousands
    of processes), CPython 3.11 reported each failed write of the signal's byte by queueing
    a call from the C signal handler, under a lock that the interpreter may hold at that
    moment: the same deadlock as with a closed pipe. A full pipe is no failure now (the
    shepherd looks at the job at its next wake anyway): nothing is queued, nothing said."""

    def check() -> None:
        import sys

        said: list = []
        sys.unraisablehook = said.append  # (where CPython reports the failed write)
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_r, False)
        os.set_blocking(wake_w, False)
        assert executor._wake_on_signals(wake_w)
        try:
            while True:
                os.write(wake_w, b"\0" * 4096)
        except BlockingIOError:
            pass
        os.kill(os.getpid(), signal.SIGCHLD)
        for _ in range(1000):  # (the queued call, if any, runs between two bytecodes)
            pass
        signal.set_wakeup_fd(-1)
        assert not said, [(u.exc_value, u.err_msg) for u in said]

    in_a_shepherd(check)
