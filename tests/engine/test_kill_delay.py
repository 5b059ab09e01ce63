"""kill_delay, a queue's attribute (PBS's default 10 s): the time between the SIGTERM and
the SIGKILL of a job ended by qdel, by its walltime or by ``qterm -t immediate``, taken
from its queue when it starts, as OpenPBS 23.06's server hands it to its MoM (qmgr's
answers checked: tests/adapters/test_pbs_parity.py). qdel's ``-W`` as PBS's qdel takes it
(checked: tests/adapters/test_pbs_job_parity.py). Each job here ignores SIGTERM, so only
the SIGKILL ends it."""

from __future__ import annotations

import os
import shlex
import subprocess

from pbsplug.engine.testing import PBSPLUG, until

#: A job that only SIGKILL ends (SIG_IGN is inherited by the sleep).
DEAF = "trap '' TERM\nsleep 300\n"
#: Exit_status of a job ended by SIGKILL (256 + 9).
KILLED = 265


def _qmgr(engine, text: str):
    return engine.pbs("qmgr", "-c", text)


def _running(engine, *args: str) -> str:
    job_id = engine.pbs("qsub", *args, input=DEAF, cwd=engine.work, check=True).stdout.strip()
    engine.wait(job_id, "R")
    return job_id


def test_kill_delay_is_set_by_qmgr_and_shown_by_qstat_qf(engine):
    assert _qmgr(engine, "set queue workq kill_delay = 30").returncode == 0
    assert "    kill_delay = 30\n" in engine.pbs("qstat", "-Qf", "workq", check=True).stdout
    assert _qmgr(engine, "list queue workq kill_delay").stdout.endswith(
        "    kill_delay = 30\n\n")
    assert _qmgr(engine, "unset queue workq kill_delay").returncode == 0
    assert "kill_delay" not in engine.pbs("qstat", "-Qf", "workq", check=True).stdout


def test_qdel_kills_after_the_kill_delay_the_job_started_with(engine):
    """A kill_delay of 1 s: the SIGKILL comes 1 s after the SIGTERM, not PBS's default
    10 s; a change made after the job started does not reach it."""
    assert _qmgr(engine, "set queue workq kill_delay = 1").returncode == 0
    job_id = _running(engine)
    assert _qmgr(engine, "set queue workq kill_delay = 600").returncode == 0
    engine.pbs("qdel", job_id, check=True)
    assert engine.wait(job_id, "F", timeout=8)["Exit_status"] == KILLED


def test_a_negative_kill_delay_which_pbs_takes_means_none(engine):
    assert _qmgr(engine, "set queue workq kill_delay = -5").returncode == 0
    job_id = _running(engine)
    engine.pbs("qdel", job_id, check=True)
    assert engine.wait(job_id, "F", timeout=8)["Exit_status"] == KILLED


def test_a_job_over_its_walltime_is_killed_after_its_kill_delay(engine):
    assert _qmgr(engine, "set queue workq kill_delay = 1").returncode == 0
    job_id = _running(engine, "-l", "walltime=00:00:01")
    attrs = engine.wait(job_id, "F", timeout=8)
    assert attrs["Exit_status"] == -29 and "walltime" in attrs["comment"]


def test_qterm_immediate_kills_each_job_after_its_kill_delay(engine):
    """Two jobs, in queues with kill_delays of 6 s and 1 s: the 1 s one ends first, and
    qterm returns once both have ended (it waits for the longest kill_delay). Each job
    holds the write end of a FIFO of its own, so the test sees each end as its last
    process goes, with no clock: one fixed delay for both (the old 10 s) would end them
    together, the longer one first as it was killed first."""
    assert _qmgr(engine, "set queue workq kill_delay = 1").returncode == 0
    assert _qmgr(engine, "create queue longq queue_type=execution,enabled=true,"
                         "started=true,kill_delay=6").returncode == 0
    readers: list[int] = []
    try:
        # The long one starts first, so one fixed delay would kill it first.
        long_id, long_fifo = _holding(engine, readers, "longq")
        short_id, short_fifo = _holding(engine, readers, "workq")
        qterm = subprocess.Popen([PBSPLUG, "qterm", "-t", "immediate"], env=engine.env(),
                                 cwd=engine.work, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            def short_ended() -> bool:
                returned = qterm.poll() is not None  # (looked at first: see below)
                if _read(short_fifo) == b"":
                    return True
                assert not returned, ("qterm returned while the kill_delay-1 job ran on",
                                     qterm.returncode, qterm.communicate())
                return False

            until(short_ended, timeout=60, what="the kill_delay-1 job to end")
            # Read after the short one's end: held now, so held when that one ended.
            assert _read(long_fifo) is None, "the kill_delay-6 job ended with the other"
            out, err = qterm.communicate(timeout=120)
        finally:
            if qterm.poll() is None:
                qterm.kill()
                qterm.wait()
        assert (qterm.returncode, out, err) == (0, "", "")
        assert _read(long_fifo) == b"", "qterm returned before the kill_delay-6 job ended"
    finally:
        for fd in readers:
            os.close(fd)
    engine.start()
    assert engine.job(long_id)["job_state"] == engine.job(short_id)["job_state"] == "F"


def _holding(engine, readers: list[int], queue: str) -> tuple[str, int]:
    """A running job in `queue`, deaf to SIGTERM, that holds the write end of a FIFO of
    its own (only its processes do: the test opens the read end alone, and not
    inheritably); its id and the read end, which `_read` finds at EOF once the job's
    last process is gone."""
    fifo = engine.work / f"{queue}.fifo"
    os.mkfifo(fifo, 0o666)
    fifo.chmod(0o666)
    # Opened first and nonblocking, so the job's open for writing does not block.
    readers.append(reader := os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    # The byte says the trap is set and the FIFO held (SIG_IGN is inherited by the sleep).
    script = f"trap '' TERM\nexec 3>{shlex.quote(str(fifo))}\nprintf x >&3\nsleep 300\n"
    job_id = engine.pbs("qsub", "-r", "n", "-q", queue, input=script, cwd=engine.work,
                        check=True).stdout.strip()
    engine.wait(job_id, "R")
    until(lambda: _read(reader) == b"x", timeout=60, what=f"the job in {queue} to start")
    return job_id, reader


def _read(fd: int) -> bytes | None:
    """What a FIFO gives: its bytes, b"" when no writer holds it (yet, or any more), None
    while one does and has written nothing more."""
    try:
        return os.read(fd, 16)
    except BlockingIOError:
        return None


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


def test_qdel_w_seconds_leaves_the_kill_delay_as_it_is(engine):
    """OpenPBS 23.06's qdel takes ``-W 30`` (checked) and sends no delay: the job gets its
    queue's kill_delay."""
    assert _qmgr(engine, "set queue workq kill_delay = 1").returncode == 0
    job_id = _running(engine)
    engine.pbs("qdel", "-W", "600", job_id, check=True)
    assert engine.wait(job_id, "F", timeout=8)["Exit_status"] == KILLED
