"""kill_delay, a queue's attribute (PBS's default 10 s): the time between the SIGTERM and
the SIGKILL of a job ended by qdel, by its walltime or by ``qterm -t immediate``, taken
from its queue when it starts, as OpenPBS 23.06's server hands it to its MoM (qmgr's
answers checked: tests/adapters/test_pbs_parity.py). qdel's ``-W`` as PBS's qdel takes it
(checked: tests/adapters/test_pbs_job_parity.py). Each job here ignores SIGTERM, so only
the SIGKILL ends it. A delay is shown by an order, never by a clock (a shared machine may
stall a test for seconds): a job with a short kill_delay, killed after one with a long
kill_delay, ends while that one runs on (`_ends_first`), which one fixed delay for both
would not do."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple

import pytest

from pbsplug.engine import executor
from pbsplug.engine.server import ROLE_MANAGER, Caller
from pbsplug.engine.testing import PBSPLUG, until

from .conftest import poll_until
from .test_accounting import of, records
from .test_qdel_purge import _gone

#: The manager the in-process server's requests come from.
ROOT = Caller(0, ROLE_MANAGER)
#: Exit_status of a job ended by SIGKILL (256 + 9).
KILLED = 265
#: A kill_delay that no check of a test outlasts, however slow the machine, and that no
#: test waits for: `holding` ends its job at teardown.
LONG = 30


class Held(NamedTuple):
    """A running job that holds the write end of a FIFO (`holding`): its id and the read end."""
    id: str
    fifo: int


def _qmgr(engine, text: str):
    return engine.pbs("qmgr", "-c", text)


def _queue(engine, name: str, kill_delay: int | None) -> None:
    """A started execution queue `name` with `kill_delay` (none set, PBS's default, when
    None)."""
    delay = "" if kill_delay is None else f",kill_delay={kill_delay}"
    assert _qmgr(engine, f"create queue {name} queue_type=execution,enabled=true,"
                         f"started=true{delay}").returncode == 0


@pytest.fixture
def holding(engine) -> Iterator[Callable[[str], Held]]:
    """``holding(queue)``: a running job in `queue` (one a queue: its FIFO is named after
    it), deaf to SIGTERM, that holds the write end of a FIFO of its own (only its
    processes do: the test opens the read end alone, and not inheritably), which `_read`
    finds at EOF once the job's last process is gone. At teardown a job still running is
    SIGKILLed (qsig), so that no test waits for a long kill_delay and no job's sleep
    outlives its test."""
    readers: list[int] = []
    jobs: list[str] = []

    def hold(queue: str) -> Held:
        fifo = engine.work / f"{queue}.fifo"
        os.mkfifo(fifo, 0o666)
        fifo.chmod(0o666)
        # Opened first and nonblocking, so the job's open for writing does not block.
        readers.append(reader := os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        # The byte says the trap is set and the FIFO held (SIG_IGN is inherited by the sleep).
        script = f"trap '' TERM\nexec 3>{shlex.quote(str(fifo))}\nprintf x >&3\nsleep 300\n"
        jobs.append(job_id := engine.pbs("qsub", "-r", "n", "-q", queue, input=script,
                                         cwd=engine.work, check=True).stdout.strip())
        engine.wait(job_id, "R")
        until(lambda: _read(reader) == b"x", timeout=60, what=f"the job in {queue} to start")
        return Held(job_id, reader)

    yield hold
    for job_id in jobs:
        # (refused for a job that has ended, and by a server that a test left stopped)
        if engine.pbs("qsig", "-s", "KILL", job_id).returncode == 0:
            engine.wait(job_id, "F")
    for fd in readers:
        os.close(fd)


def _read(fd: int) -> bytes | None:
    """What a FIFO gives: its bytes, b"" when no writer holds it (yet, or any more), None
    while one does and has written nothing more."""
    try:
        return os.read(fd, 16)
    except BlockingIOError:
        return None


def _ends_first(first: Held, then: Held, not_yet: Callable[[], str] = lambda: "") -> None:
    """Wait for `first`'s job to end (60 s at most: a hang guard), and check that `then`'s
    still holds its FIFO: read after that end, held now, so held when it came. `not_yet`,
    looked at before each read of `first`'s FIFO (so what it saw came before that job was
    seen running on), says what must not happen while that job runs ("" while nothing
    has)."""
    def ended() -> bool:
        seen = not_yet()
        if _read(first.fifo) == b"":
            return True
        assert not seen, seen
        return False

    until(ended, timeout=60, what=f"job {first.id} to end")
    assert _read(then.fifo) is None, f"job {then.id} had ended too when job {first.id} ended"


def test_kill_delay_is_set_by_qmgr_and_shown_by_qstat_qf(engine):
    assert _qmgr(engine, "set queue workq kill_delay = 30").returncode == 0
    assert "    kill_delay = 30\n" in engine.pbs("qstat", "-Qf", "workq", check=True).stdout
    assert _qmgr(engine, "list queue workq kill_delay").stdout.endswith(
        "    kill_delay = 30\n\n")
    assert _qmgr(engine, "unset queue workq kill_delay").returncode == 0
    assert "kill_delay" not in engine.pbs("qstat", "-Qf", "workq", check=True).stdout


def test_qdel_kills_after_the_kill_delay_the_job_started_with(engine, holding):
    """A kill_delay of 1 s: the SIGKILL comes 1 s after the SIGTERM, not PBS's default
    10 s; a change made after the job started does not reach it. So the job ends while
    a job deleted before it, whose kill_delay is 30 s, runs on: one fixed delay for both
    would end that one first, and the queue's 600 s would not end this one within the
    test's minute."""
    assert _qmgr(engine, "set queue workq kill_delay = 1").returncode == 0
    _queue(engine, "longq", LONG)
    long = holding("longq")
    short = holding("workq")
    assert _qmgr(engine, "set queue workq kill_delay = 600").returncode == 0
    engine.pbs("qdel", long.id, check=True)
    engine.pbs("qdel", short.id, check=True)
    _ends_first(short, long)
    assert engine.wait(short.id, "F")["Exit_status"] == KILLED


def test_a_negative_kill_delay_which_pbs_takes_means_none(engine, holding):
    """A job of a queue whose kill_delay is -5 gets its SIGKILL with its SIGTERM, not after
    PBS's default 10 s: it ends while a job deleted before it, of a queue with the
    default, runs on."""
    assert _qmgr(engine, "set queue workq kill_delay = -5").returncode == 0
    _queue(engine, "defaultq", None)
    default = holding("defaultq")
    negative = holding("workq")
    engine.pbs("qdel", default.id, check=True)
    engine.pbs("qdel", negative.id, check=True)
    _ends_first(negative, default)
    assert engine.wait(negative.id, "F")["Exit_status"] == KILLED


def test_a_job_over_its_walltime_is_killed_after_its_kill_delay(engine, holding):
    """A job over its walltime, with a kill_delay of 1 s, ends while a job that went over
    its walltime before it, whose kill_delay is 30 s, runs on. Each gets its walltime of
    1 s once it runs (qalter), so its SIGTERM finds its trap set; the one started first
    is over it first."""
    assert _qmgr(engine, "set queue workq kill_delay = 1").returncode == 0
    _queue(engine, "longq", LONG)
    long = holding("longq")
    short = holding("workq")
    for held in (long, short):
        engine.pbs("qalter", "-l", "walltime=00:00:01", held.id, check=True)
    _ends_first(short, long)
    attrs = engine.wait(short.id, "F")
    assert attrs["Exit_status"] == -29 and "walltime" in attrs["comment"]


def test_qterm_immediate_kills_each_job_after_its_kill_delay(engine, holding):
    """Two jobs, in queues with kill_delays of 6 s and 1 s: the 1 s one ends first, and
    qterm returns once both have ended (it waits for the longest kill_delay: 6 s, not
    `LONG`, so that the test waits less). One fixed delay for both (the old 10 s) would
    end them together, the longer one first as it was killed first."""
    assert _qmgr(engine, "set queue workq kill_delay = 1").returncode == 0
    _queue(engine, "longq", 6)
    # The long one starts first, so one fixed delay would kill it first.
    long = holding("longq")
    short = holding("workq")
    qterm = subprocess.Popen([PBSPLUG, "qterm", "-t", "immediate"], env=engine.env(),
                             cwd=engine.work, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _ends_first(short, long, not_yet=lambda: "" if qterm.poll() is None else (
            f"qterm returned while the kill_delay-1 job ran on: {qterm.returncode}, "
            f"{qterm.communicate()}"))
        out, err = qterm.communicate(timeout=120)
    finally:
        if qterm.poll() is None:
            qterm.kill()
            qterm.wait()
    assert (qterm.returncode, out, err) == (0, "", "")
    assert _read(long.fifo) == b"", "qterm returned before the kill_delay-6 job ended"
    engine.start()
    assert engine.job(long.id)["job_state"] == engine.job(short.id)["job_state"] == "F"


def test_qdel_w_takes_what_openpbs_qdel_takes(engine):
    """OpenPBS 23.06's qdel (checked): ``-W`` force, suppress_email=N or digits (a delay
    it takes and ignores); anything else is ``illegal -W value`` with the usage, exit 2,
    and deletes nothing."""
    held = [engine.pbs("qsub", "-h", "--", "/bin/true", check=True).stdout.strip()
            for _ in range(3)]
    for value in ("abc", "", "foo=1", "-5", "1.5"):
        done = engine.pbs("qdel", "-W", value, held[0])
        assert (done.returncode, done.stderr) == (
            2, "qdel: illegal -W value\nusage:\n\tqdel [-W force|suppress_email=X] [-x] "
               "job_identifier...\n\tqdel --version\n"), value
    assert engine.job(held[0])["job_state"] == "H"
    for job_id, value in zip(held, ("30", "suppress_email=2", "force"), strict=True):
        done = engine.pbs("qdel", "-W", value, job_id)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), value
        assert engine.job(job_id)["job_state"] == "F"


def test_qdel_w_seconds_leaves_the_kill_delay_as_it_is(engine, holding):
    """OpenPBS 23.06's qdel takes ``-W 30`` (checked) and sends no delay: the job gets its
    queue's kill_delay, 1 s, so ``qdel -W 600`` ends it while a job deleted before it
    (plainly), whose kill_delay is 30 s, runs on."""
    assert _qmgr(engine, "set queue workq kill_delay = 1").returncode == 0
    _queue(engine, "longq", LONG)
    long = holding("longq")
    short = holding("workq")
    engine.pbs("qdel", long.id, check=True)
    engine.pbs("qdel", "-W", "600", short.id, check=True)
    _ends_first(short, long)
    assert engine.wait(short.id, "F")["Exit_status"] == KILLED


def test_a_qdel_again_does_not_put_the_sigkill_off(engine, holding):
    """qdel after qdel, more often than the kill_delay: the SIGKILL keeps the time the
    first one set (each qdel setting it again had a job that ignores SIGTERM, and its
    owner, keep its vnode for as long as they liked, past its walltime too). Without
    that, the job would never end while the qdels go on."""
    assert _qmgr(engine, "set queue workq kill_delay = 2").returncode == 0
    job = holding("workq")

    def ended() -> bool:
        engine.pbs("qdel", job.id)  # (refused once the job is over)
        return _read(job.fifo) == b""

    until(ended, timeout=60, what=f"job {job.id} to end while qdel is sent again and again")
    assert engine.wait(job.id, "F")["Exit_status"] == KILLED


def _walltime_kill(engine, held: Held) -> None:
    """Give `held`'s job a walltime of 1 s (qalter, once it runs: its SIGTERM then finds
    its trap set) and wait until the server has logged its walltime kill; the kill is
    made in the same poll, before any request is read after it."""
    engine.pbs("qalter", "-l", "walltime=00:00:01", held.id, check=True)
    until(lambda: f";{held.id};job killed: walltime " in engine.log(), timeout=60,
          what=f"the walltime kill of job {held.id}")


def test_a_qdel_during_a_walltime_kill_keeps_exit_status_minus_29(engine, holding):
    """OpenPBS 23.06.06 (measured: a user's job deaf to SIGTERM, kill_delay 30, qdel 2 s
    after its MoM logged the walltime kill): the job ended with Exit_status -29, the
    qdel's comment and substate 91, a D record and then an E record with
    Exit_status=-29. pbsplug's qdel took the -29 away (the job ended as killed by its
    SIGKILL, 265). The job's kill_delay is `LONG`: qsig -s KILL ends it after the qdel."""
    assert _qmgr(engine, f"set queue workq kill_delay = {LONG}").returncode == 0
    job = holding("workq")
    _walltime_kill(engine, job)
    engine.pbs("qdel", job.id, check=True)
    engine.pbs("qsig", "-s", "KILL", job.id, check=True)
    attrs = engine.wait(job.id, "F")
    assert (attrs["Exit_status"], attrs["substate"]) == (-29, 91)
    assert attrs["comment"].startswith("Job deleted at request of ")
    assert [(kind, rec.get("Exit_status")) for kind, rec in of(records(engine.home), job.id)
            if kind in "DE"] == [("D", None), ("E", "-29")]


def test_a_qdel_during_a_qrerun_kill_leaves_the_requeue(engine, holding):
    """OpenPBS 23.06.06 (measured: a user's job deaf to SIGTERM, kill_delay 30, qdel 3 s
    after qrerun): the qdel was answered (exit 0) and written (a D record), and the job
    was requeued all the same (an R record, Exit_status=-11) and ran again. pbsplug's
    qdel made it end as deleted. The job is not rerunnable (`holding`'s), hence
    ``qrerun -W force``; qsig -s KILL ends its run after the qdel."""
    assert _qmgr(engine, f"set queue workq kill_delay = {LONG}").returncode == 0
    job = holding("workq")
    engine.pbs("qrerun", "-W", "force", job.id, check=True)
    done = engine.pbs("qdel", job.id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    engine.pbs("qsig", "-s", "KILL", job.id, check=True)
    until(lambda: engine.job(job.id)["run_count"] == 2 or engine.job(job.id)["job_state"]
          == "F", timeout=60, what=f"job {job.id} to end or to run again")
    attrs = engine.job(job.id)
    assert (attrs["job_state"], attrs["run_count"]) != ("F", 1), attrs["comment"]
    assert [(kind, rec.get("Exit_status")) for kind, rec in of(records(engine.home), job.id)
            if kind in "DRE"] == [("D", None), ("R", "-11")]


@pytest.mark.parametrize("first, then", [("qrerun", "ends"), ("qrerun", "qdel"),
                                         ("qdel -x", "ends")])
def test_a_qdel_x_during_a_qrerun_kill_purges_the_job_once_it_is_over(engine, holding,
                                                                       first, then):
    """qdel -x and qrerun of one running job, one while the other ends its run: the
    requeue stands (as with a plain qdel, above), and the -x waits for the job to be over,
    at the end of its next run or at a later qdel, then purges it, as OpenPBS 23.06.06's
    server keeps the -x with the job until then (read in its source). pbsplug dropped
    the -x (qrerun first: at the qdel; qdel -x first: at the requeue), and the job
    stayed in qstat -x."""
    assert _qmgr(engine, f"set queue workq kill_delay = {LONG}").returncode == 0
    job = holding("workq")
    if then == "qdel":  # (held: once requeued, it does not run again)
        engine.pbs("qhold", job.id, check=True)
    asked = [["qrerun", "-W", "force", job.id], ["qdel", "-x", job.id]]
    for args in asked if first == "qrerun" else asked[::-1]:
        done = engine.pbs(*args)
        assert (done.returncode, done.stdout, done.stderr) == (0, "", ""), args
    engine.pbs("qsig", "-s", "KILL", job.id, check=True)
    if then == "qdel":
        engine.wait(job.id, "H")
        engine.pbs("qdel", job.id, check=True)
    else:  # its next run holds the FIFO again
        until(lambda: _read(job.fifo) == b"x", timeout=60, what=f"job {job.id} to run again")
        engine.pbs("qsig", "-s", "KILL", job.id, check=True)

    def over() -> bool:
        shown = engine.pbs("qstat", "-x", "-f", job.id)
        return shown.returncode != 0 or "job_state = F" in shown.stdout

    until(over, timeout=60, what=f"job {job.id} to be over")
    assert _gone(engine, job.id)
    assert f"{job.id};Job history purged at request of root@" in engine.log()
    assert [kind for kind, _ in of(records(engine.home), job.id) if kind in "DRE"] == (
        ["D", "R", "E"] if then == "ends" else ["D", "R", "D"])


def test_each_qdel_of_a_job_being_killed_signals_it_again(engine):
    """OpenPBS 23.06.06 (measured as a user: a job deaf to SIGTERM, qdel'ed twice 2 s
    apart): each qdel was answered, logged, written as a D record and sent on to the MoM,
    which sent the job's processes SIGTERM again; it does not merely acknowledge a qdel
    of a job it is killing already. The job writes ``t`` to its FIFO at each SIGTERM and
    ``u`` at each SIGURG. After each qdel the test sends SIGURG (qsig) and reads up to the
    ``u``: a SIGTERM sent before it is handled before it (the lower signal first, in the
    kernel and in the shell's traps), so each round's ``t`` comes before its ``u``."""
    assert _qmgr(engine, f"set queue workq kill_delay = {LONG}").returncode == 0
    fifo = engine.work / "terms.fifo"
    os.mkfifo(fifo, 0o666)
    fifo.chmod(0o666)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    script = (f"trap 'printf t >&3' TERM\ntrap 'printf u >&3' URG\n"
              f"exec 3>{shlex.quote(str(fifo))}\nprintf x >&3\nwhile :; do sleep 1; done\n")
    job_id = engine.pbs("qsub", "-r", "n", input=script, cwd=engine.work,
                        check=True).stdout.strip()
    rounds: list[bytes] = []
    try:
        engine.wait(job_id, "R")
        until(lambda: _read(reader) == b"x", timeout=60, what="the job to start")
        for _ in range(2):
            engine.pbs("qdel", job_id, check=True)
            engine.pbs("qsig", "-s", "URG", job_id, check=True)
            got = [b""]

            def marked(got: list[bytes] = got) -> bool:
                got[0] += _read(reader) or b""
                return got[0].endswith(b"u")

            until(marked, timeout=60, what="the job's SIGURG")
            rounds.append(got[0])
    finally:
        if engine.pbs("qsig", "-s", "KILL", job_id).returncode == 0:
            engine.wait(job_id, "F")
        os.close(reader)
    # (one SIGTERM a round: its group's alone, not its session's again: `signal_whole`)
    assert all(re.fullmatch(rb"tu", r) for r in rounds), rounds
    assert [kind for kind, _ in of(records(engine.home), job_id) if kind in "DE"] == [
        "D", "D", "E"]


#: A job's program (argv: a path prefix) that counts the signals it is sent: its top
#: process, and a child in a process group of its own (in the job's session), each
#: append the number of each SIGTERM and SIGURG it takes to ``<prefix>.<top|child>``, one
#: a line, as they come (`signal.set_wakeup_fd`: a byte a delivery, never merged as a
#: flag is), and write its pid to ``<prefix>.<top|child>.ready`` once it counts.
COUNTER = """
import os, signal, sys, time
prefix = sys.argv[1]
child = os.fork()
name = "child" if child == 0 else "top"
if child == 0:
    os.setpgid(0, 0)
r, w = os.pipe()
os.set_blocking(w, False)
signal.set_wakeup_fd(w)
for number in (signal.SIGTERM, signal.SIGURG):
    signal.signal(number, lambda *_: None)
with open(f"{prefix}.{name}", "w") as out:
    with open(f"{prefix}.{name}.part", "w") as ready:
        ready.write(str(os.getpid()))
    os.rename(f"{prefix}.{name}.part", f"{prefix}.{name}.ready")
    while True:
        for number in os.read(r, 16):
            out.write(f"{number}\\n")
            out.flush()
"""


def test_a_qdel_sends_each_process_of_the_job_one_sigterm(engine_here, tmp_path,
                                                          monkeypatch):
    """A qdel's SIGTERM went to the job's process group, then to every process of its
    session: each process in the group got it twice, and a program that takes a second
    SIGTERM for "abort now" had its clean shutdown cut short. Each gets it once now
    (`executor.signal_whole`): the job's top process (in the group) and its child in a
    group of its own (reached through the session alone). The session's send waits here
    until the top process has taken the group's SIGTERM (two sent a few microseconds
    apart were often merged into one by the kernel: the old code's second then went
    unseen). The SIGURG the test sends each process once the qdel is answered is sent
    after every SIGTERM that qdel sent: each one's count is whole once its SIGURG is in."""
    eng = engine_here()
    prefix = tmp_path / "count"
    script = f"exec /usr/bin/python3 -c {shlex.quote(COUNTER)} {shlex.quote(str(prefix))}\n"
    job_id = eng.req_submit(ROOT, {}, script)
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "R", "the job to run")
    ready = {name: tmp_path / f"count.{name}.ready" for name in ("top", "child")}
    for name, path in ready.items():
        poll_until(eng, path.exists, f"the job's {name} to count")
    term, urg = str(int(signal.SIGTERM)), str(int(signal.SIGURG))

    def got(name: str) -> list[str]:
        return (tmp_path / f"count.{name}").read_text().split()

    real = executor.signal_tree

    def paced(launch, sig, **kwargs):
        if sig == signal.SIGTERM:
            until(lambda: term in got("top"), timeout=60, what="the group's SIGTERM taken")
        return real(launch, sig, **kwargs)

    monkeypatch.setattr(executor, "signal_tree", paced)
    try:
        assert eng.req_delete(ROOT, [job_id]) == [{"id": job_id}]
        for name, path in ready.items():
            os.kill(int(path.read_text()), signal.SIGURG)
            until(lambda name=name: urg in got(name), timeout=60,
                  what=f"the job's {name} SIGURG")
        # (in either order: a handler's byte may follow the one of a signal that came
        # while it ran)
        assert {name: sorted(got(name)) for name in ready} == {"top": [term, urg],
                                                                "child": [term, urg]}
    finally:
        monkeypatch.undo()
        for path in ready.values():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(path.read_text()), signal.SIGKILL)
        poll_until(eng, lambda: job_id not in eng.launches, "the job's end")


@pytest.mark.parametrize("first", ["qdel", "qrerun"])
def test_a_limit_met_after_the_sigkill_leaves_the_first_reason(engine_here, first, tmp_path):
    """A limit (walltime, cput) is not looked at while a job is being killed, but that ended
    with its SIGKILL (`Engine.kills`), not with its end: a limit met after the SIGKILL and
    before the job's end was seen replaced the qdel's comment and Exit_status with the
    limit's, and a qrerun's requeue with the limit's end (the job F, not requeued). The
    first reason stands now. The server's clock is the test's, and the job's shepherd is
    stopped (SIGSTOP) until the end, so its end is not seen before the test allows it."""
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    trapped = tmp_path / "trapped"  # (made once the job ignores SIGTERM)
    job_id = eng.req_submit(ROOT, {"Resource_List": {"walltime": "00:10:00"}},
                            f"trap '' TERM\ntouch {shlex.quote(str(trapped))}\nsleep 300\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "R", "the job to run")
    if first == "qrerun":  # (held: once requeued, it does not run again)
        eng.req_hold(ROOT, [job_id])
    launch = eng.launches[job_id]
    assert launch.resolve(wait=60) > 0  # (the job's process started: the kill reaches it)
    # (its SIGTERM ignored: sent before the trap, it ended the job, Exit_status 271)
    poll_until(eng, trapped.exists, "the job to ignore SIGTERM")
    shepherd = launch.shepherd
    os.kill(shepherd, signal.SIGSTOP)
    try:
        if first == "qdel":
            assert eng.req_delete(ROOT, [job_id]) == [{"id": job_id}]
        else:
            eng.req_rerun(ROOT, [job_id])
        now[0] += 11  # past kill_delay (10 s): the SIGKILL at this poll
        eng.poll()
        assert job_id not in eng.kills and eng.store.job(job_id)["job_state"] == "R"
        now[0] += 600  # past its walltime, its end not seen yet
        eng.poll()
    finally:
        os.kill(shepherd, signal.SIGCONT)
    poll_until(eng, lambda: job_id not in eng.launches, "the job's end")
    attrs = eng.store.job(job_id)
    log = "".join(p.read_text() for p in eng.home.logs.iterdir())
    assert "walltime" not in attrs.get("comment", ""), attrs["comment"]
    assert f";{job_id};Job exceeded resource walltime" not in log
    if first == "qdel":
        assert attrs["job_state"] == "F" and attrs["Exit_status"] == KILLED, attrs
        assert attrs["comment"].startswith("Job deleted at request of "), attrs["comment"]
    else:
        assert (attrs["job_state"], attrs["comment"]) == (
            "H", "Job requeued at request of an operator (qrerun)"), attrs


def _deaf_job(eng, tmp_path, deaf: bool = True) -> str:
    """A job of in-process server `eng`, running and, when `deaf`, ignoring SIGTERM (its
    file ``ready`` made once it does)."""
    ready = tmp_path / "ready"
    trap = "trap '' TERM\n" if deaf else ""
    job_id = eng.req_submit(ROOT, {}, f"{trap}touch {shlex.quote(str(ready))}\nsleep 300\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "R", "the job to run")
    assert eng.launches[job_id].resolve(wait=60) > 0  # (its process started: reached)
    poll_until(eng, ready.exists, "the job to be ready")
    return job_id


@pytest.mark.parametrize("first", ["qdel", "qrerun"])
def test_a_kill_written_before_a_restart_is_resumed(engine_here, first, tmp_path):
    """A server stopped (killed, or ``qterm -t quick``) after a kill's write and SIGTERM,
    before the SIGKILL: the kill was kept in memory only (`Engine.kills`), so the next
    start adopted the job, deaf to SIGTERM, and never sent it its SIGKILL, nor a walltime
    kill (it counted as being ended); a qdel of a qrerun's job then sent nothing either.
    The kill is resumed at the start, its SIGKILL due the job's kill_delay (10 s) after the
    kill's write, as stored. The server's clock is the test's; the first engine, left as it
    is, is the stopped server."""
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    job_id = _deaf_job(eng, tmp_path)
    if first == "qdel":
        assert eng.req_delete(ROOT, [job_id]) == [{"id": job_id}]
    else:  # (held: once requeued, it does not run again)
        eng.req_hold(ROOT, [job_id])
        eng.req_rerun(ROOT, [job_id])
    written = now[0]
    now[0] += 5
    again = engine_here(clock=lambda: now[0])
    assert again.kills.get(job_id) == written + 10  # (from the kill's write, not the start)
    now[0] += 5
    poll_until(again, lambda: job_id not in again.launches, "the job's end")
    attrs = again.store.job(job_id)
    kinds = [kind for kind, _ in of(records(again.home), job_id)]
    if first == "qdel":
        assert (attrs["job_state"], attrs["Exit_status"]) == ("F", KILLED), attrs
        assert attrs["comment"].startswith("Job deleted at request of "), attrs["comment"]
        assert [k for k in kinds if k in "DE"] == ["D", "E"], kinds
    else:
        assert (attrs["job_state"], attrs["comment"]) == (
            "H", "Job requeued at request of an operator (qrerun)"), attrs
        assert "E" not in kinds, kinds


def test_a_kill_resumed_after_the_clock_was_set_back_is_due_from_the_start(engine_here,
                                                                          tmp_path):
    """The kill's stored time is the server's clock then: a clock set back before the next
    start (or a time from the future) put the SIGKILL off by as much; it is due the job's
    kill_delay after the start, at the latest."""
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    job_id = _deaf_job(eng, tmp_path)
    assert eng.req_delete(ROOT, [job_id]) == [{"id": job_id}]
    now[0] -= 3600
    again = engine_here(clock=lambda: now[0])
    assert again.kills.get(job_id) == now[0] + 10
    now[0] += 10
    poll_until(again, lambda: job_id not in again.launches, "the job's end")
    assert again.store.job(job_id)["Exit_status"] == KILLED


def test_a_kill_written_but_never_signalled_is_signalled_at_the_restart(
        engine_here, tmp_path, monkeypatch):
    """A server killed between a qdel's write of the kill and its SIGTERM (`Engine._kill`
    writes first; here its signals are lost): the next start sends the SIGTERM, which
    ends the job (Exit_status 271) before its SIGKILL is due (the clock stands still)."""
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    job_id = _deaf_job(eng, tmp_path, deaf=False)
    with monkeypatch.context() as patched:
        patched.setattr(executor, "signal_whole", lambda *_, **__: True)
        assert eng.req_delete(ROOT, [job_id]) == [{"id": job_id}]
    again = engine_here(clock=lambda: now[0])
    poll_until(again, lambda: job_id not in again.launches, "the job's end")
    attrs = again.store.job(job_id)
    assert (attrs["job_state"], attrs["Exit_status"]) == ("F", 256 + signal.SIGTERM), attrs
    assert attrs["comment"].startswith("Job deleted at request of "), attrs["comment"]
    assert [k for k, _ in of(records(again.home), job_id) if k in "DE"] == ["D", "E"]


@pytest.mark.parametrize("stop", ["kill", "qterm"])
def test_a_job_deleted_before_a_server_stop_is_killed_after_the_restart(engine, holding,
                                                                        stop):
    """A real server SIGKILLed, or stopped by ``qterm -t quick``, just after a qdel of a job
    deaf to SIGTERM (kill_delay 3 s): the next start adopts the job and sends its SIGKILL
    (it ran on before). A server stalled for 3 s before its stop would have sent it
    itself: the test then shows less, never fails."""
    _queue(engine, "short", 3)
    held = holding("short")
    engine.pbs("qdel", held.id, check=True)
    if stop == "kill":
        engine.kill()
    else:
        engine.pbs("qterm", "-t", "quick", check=True)
        until(lambda: engine.home.server_pid() is None, timeout=60, what="the server's stop")
    engine.start()
    until(lambda: _read(held.fifo) == b"", timeout=60, what=f"job {held.id} to end")
    attrs = engine.wait(held.id, "F")
    assert attrs["Exit_status"] == KILLED, attrs
    assert attrs["comment"].startswith("Job deleted at request of "), attrs["comment"]
    assert [k for k, _ in of(records(engine.home), held.id) if k in "DE"] == ["D", "E"]


def test_a_suspended_job_deleted_before_a_server_kill_is_woken_and_killed_after_the_restart(
        engine_here, tmp_path):
    """A suspended job (qsig -s suspend) qdel'ed, the server killed before the SIGKILL (the
    first engine, left as it is): the next start stops it again (its stored state is S:
    `JobControl.signals_as_stored`), then resumes its kill (`Engine._resume_kills`): it is
    woken (SIGCONT) and sent its SIGTERM again, which its trap takes (``t`` written to its
    file, a second one), and its SIGKILL ends it once its kill_delay (10 s) is over, as
    PBS's: F, Exit_status 265, the qdel's comment, its D and E records. A job left stopped
    would have taken no SIGTERM: its trap runs only once woken. The server's clock is the
    test's."""
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    terms = tmp_path / "terms"
    ready = tmp_path / "ready"
    job_id = eng.req_submit(ROOT, {}, f"trap 'printf t >> {shlex.quote(str(terms))}' TERM\n"
                                      f"touch {shlex.quote(str(ready))}\n"
                                      "while :; do sleep 1; done\n")
    poll_until(eng, lambda: eng.store.job(job_id)["job_state"] == "R", "the job to run")
    pgid = eng.launches[job_id].resolve(wait=60)
    assert pgid > 0
    poll_until(eng, ready.exists, "the job to trap SIGTERM")
    assert eng.req_signal(ROOT, [job_id], "suspend") == [{"id": job_id}]
    assert eng.store.job(job_id)["job_state"] == "S"
    assert eng.req_delete(ROOT, [job_id]) == [{"id": job_id}]
    # (woken by the qdel: its trap ran once)
    until(lambda: terms.exists() and terms.read_text() == "t", timeout=60,
          what="the qdel's SIGTERM taken")
    now[0] += 5
    again = engine_here(clock=lambda: now[0])
    assert again.kills.get(job_id) is not None
    poll_until(again, lambda: terms.read_text() == "tt", "the resumed SIGTERM taken")
    now[0] += 5  # (the kill_delay after the qdel: its SIGKILL at the next poll)
    poll_until(again, lambda: job_id not in again.launches, "the job's end")
    attrs = again.store.job(job_id)
    assert (attrs["job_state"], attrs["Exit_status"]) == ("F", KILLED), attrs
    assert attrs["comment"].startswith("Job deleted at request of "), attrs["comment"]
    assert [k for k, _ in of(records(again.home), job_id) if k in "DE"] == ["D", "E"]


def test_a_resumed_kill_waits_for_no_group_not_recorded(engine_here, tmp_path, monkeypatch):
    """A kill resumed at a restart (`Engine._resume_kills`, in the engine's set-up, before
    the server serves) of a job whose group its launch does not name: a launch read back
    from the store waits for no record (`Launch.resolve`: its ``sent_at`` is 0), so it
    holds the start one read of the record, not the 2 s a job just started may wait; its
    SIGTERM is sent once the record is read (`terms_due`), its SIGKILL when due. Shown by
    the reads of the record each resolve makes (one), not by a clock."""
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    job_id = _deaf_job(eng, tmp_path)
    assert eng.req_delete(ROOT, [job_id]) == [{"id": job_id}]
    with eng.store.transaction() as st:  # (as if the shepherd had not recorded it yet)
        runtime = st.runtime(job_id)
        runtime["launch"]["pgid"] = 0
        st.set_runtime(job_id, runtime)
    reads: list[int] = []
    real_resolve = executor.Launch.resolve

    def resolve(launch, wait=0.0):
        reads.append(0)
        return real_resolve(launch, wait)

    def recorded(*_):
        reads[-1] += 1
        return None

    with monkeypatch.context() as patched:
        patched.setattr(executor.Launch, "resolve", resolve)
        patched.setattr(executor.Launch, "recorded", classmethod(recorded))
        again = engine_here(clock=lambda: now[0])
    assert reads and set(reads) == {1}, reads
    assert job_id in again.terms_due and job_id in again.kills
    poll_until(again, lambda: job_id not in again.terms_due, "its SIGTERM, once recorded")
    now[0] += 10
    poll_until(again, lambda: job_id not in again.launches, "the job's end")
    assert again.store.job(job_id)["Exit_status"] == KILLED
