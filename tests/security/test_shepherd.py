"""Attacks on a running job's shepherd and on the server's watch over running jobs, made as
the unprivileged `attacker`: the shepherd runs as root beside the owner's job, samples its
/proc, writes PBS's notes into its error file and reports its end; nothing the job does may
make it, or the server, stop, block or act for the job's owner beyond the job. Each
docstring says what the engine did before its fix."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

import pytest

from pbsplug.testing import until

from .conftest import qsub, root_process_with_pid


def script(engine, text: str) -> str:
    """A job script in the submission folder, which the attacker's qsub reads."""
    path = engine.work / f"job{len(list(engine.work.glob('job*')))}.sh"
    path.write_text(text)
    path.chmod(0o644)
    return str(path)


def processes_of(uid: int, comm: bytes) -> list[int]:
    """The live processes of `uid` named `comm` (the bytes of /proc/<pid>/comm), zombies
    (killed, not reaped yet) aside."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            if (os.stat(f"/proc/{name}").st_uid == uid and state != b"Z"
                    and Path(f"/proc/{name}/comm").read_bytes() == comm + b"\n"):
                found.append(int(name))
        except (OSError, IndexError):
            continue
    return found


def test_a_process_named_in_bytes_that_are_not_utf8_neither_escapes_nor_stops_the_server(
        engine, attacker):
    """A job left a process whose name (its /proc/<pid>/stat's comm, which a process sets to
    any bytes) was not UTF-8. The shepherd read /proc as text to kill the job's leftovers:
    UnicodeDecodeError, the shepherd died without the job's status and the process ran on;
    the server, finding the job lost, read /proc the same way and its poll failed every
    time from then on: no job's end, walltime or kill_delay was seen again, no cycle ran."""
    name = b"\xff\xfe"
    job_id = qsub(attacker, engine, "-r", "n", script(
        engine, "sh -c \"printf '\\377\\376' > /proc/self/comm; sleep 300\" &\n"
        "sleep 1\nexit 3\n"))
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == 3, attrs.get("comment")
    until(lambda: processes_of(attacker.uid, name) == [], what="the leftover to be killed")
    assert "poll failed" not in engine.log()
    after = engine.submit("exit 0\n", Job_Name="after")  # the server goes on for everyone
    assert engine.wait(after, timeout=60)["Exit_status"] == 0


def test_a_pid_file_naming_a_process_with_such_a_name_reads(tmp_path, attacker):
    """`server_pid` (every command, `server start`) read the process its pid file names as
    text: a user process that took a dead server's pid, named in bytes that are not UTF-8,
    made it raise UnicodeDecodeError."""
    import signal
    from subprocess import Popen

    from pbsplug.engine.home import Home

    holder = Popen(["runuser", "-u", attacker.user, "--", "/bin/sh", "-c",
                    "printf '\\377' > /proc/self/comm; sleep 60"], start_new_session=True)
    try:
        (pid,) = until(lambda: processes_of(attacker.uid, b"\xff"),
                       what="the process to be named")
        home = Home(tmp_path)
        home.pidfile.write_text(f"{pid}\n")
        assert home.server_pid() == pid
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()


@pytest.fixture
def terminal(attacker):
    """A terminal of the attacker's (a pseudo-terminal whose other end this test holds, as
    their login session would): its path, and the descriptor of its other end."""
    master, slave = os.openpty()
    path = os.ttyname(slave)
    os.chown(path, attacker.uid, -1)
    yield path, slave
    os.close(slave)
    os.close(master)


def test_a_job_that_stops_its_terminal_does_not_hold_its_shepherd(engine, attacker, terminal):
    """`-e` the owner's terminal, which the job stops (tcflow TCOOFF, as ^S): past its
    walltime, the shepherd (root) wrote PBS's note into it and blocked for good. The job was
    killed, but its end was never reported: it stayed R, holding its CPUs, for ever."""
    path, _ = terminal
    job_id = qsub(attacker, engine, "-r", "n", "-e", path, "-l", "walltime=00:00:01", script(
        engine, "/usr/bin/python3 -c 'import termios, time; "
        "termios.tcflow(2, termios.TCOOFF); time.sleep(300)'\n"))
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == -29, attrs.get("comment")
    assert "job lost" not in engine.log()


def test_a_walltime_note_for_a_job_not_started_yet_does_not_kill_its_shepherd(
        engine, attacker, terminal):
    """The job's process, as its owner, blocked before its exec writing its start failure
    into the owner's stopped terminal; past its walltime, the server's SIGUSR1 (the note's
    wake-up) reached its shepherd while it still waited for the exec, before it caught the
    signal: the shepherd died of it, and the job was lost, its end and use never reported
    (as an older shepherd, still running after an upgrade, would be killed by it)."""
    import termios

    path, slave = terminal
    termios.tcflow(slave, termios.TCOOFF)
    job_id = qsub(attacker, engine, "-r", "n", "-e", path, "-l", "walltime=00:00:01", "--",
                  "/no/such/program")
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == -29, attrs.get("comment")
    assert "job lost" not in engine.log()


def test_the_walltime_note_is_written_as_the_jobs_owner(engine, attacker):
    """PBS's note went into the job's error file from the shepherd, root, through the
    descriptor the job's process handed over: the right file, but written with root's
    powers. A write by anyone but root clears a set-user-id bit (the kernel's rule): the
    job sets it on its own error file, and the note's write must clear it."""
    job_id = qsub(attacker, engine, "-N", "suid", "-l", "walltime=00:00:01", "--", "/bin/sh",
                  "-c", 'chmod 4700 "$PBS_O_WORKDIR/suid.e${PBS_JOBID%%.*}"; exec sleep 300')
    attrs = engine.wait(job_id, timeout=60)
    assert attrs["Exit_status"] == -29, attrs.get("comment")
    err = engine.work / f"suid.e{job_id.split('.')[0]}"
    assert re.fullmatch(r"=>> PBS: job killed: walltime \d+ exceeded limit 1\n",
                        err.read_text())
    assert err.stat().st_mode & 0o7777 == 0o700


def test_work_left_running_between_two_samples_is_counted_at_the_end(engine, attacker):
    """The job's use is sampled 1, 2, 4 and 8 s after its start, then every 10 s; what its
    processes left running (killed at its end) used since the last sample was lost: a job
    whose top process waited while a background loop worked from 8.5 s to 16 s, and ended
    before the 18 s sample, reported the loop's CPU time as none. (A process that made a
    session of its own is not counted at all: that needs a cgroup per job.)"""
    job_id = qsub(attacker, engine, script(
        engine, "sleep 8.5\n(while :; do :; done) &\nsleep 7.5\n"))
    attrs = engine.wait(job_id, timeout=120)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    hours, minutes, seconds = map(int, attrs["resources_used"]["cput"].split(":"))
    assert hours * 3600 + minutes * 60 + seconds >= 2, attrs["resources_used"]


def test_a_shepherd_that_does_not_catch_the_note_signal_is_never_sent_it(tmp_path):
    """A shepherd started by pbsplug before its notes (still running after an upgrade), or
    one still starting its job, has SIGUSR1's default action: the server's wake-up ended it,
    and its job was lost. The signal goes only to a shepherd that catches it; the note waits
    in its file."""
    import signal
    from subprocess import Popen

    from pbsplug.engine import executor

    old = Popen(["sleep", "60"])
    try:
        launch = executor.Launch(old.pid, executor.process_start(old.pid), 0,
                                 str(tmp_path / "1.status"), str(tmp_path / "pbs.1"))
        executor.tell_job(launch, "=>> PBS: job killed: walltime 3 exceeded limit 2\n")
        assert (tmp_path / "1.note").exists()
        # A SIGUSR1 sent would be pending now, and delivered before this SIGTERM.
        old.send_signal(signal.SIGTERM)
        assert old.wait() == -signal.SIGTERM
    finally:
        old.kill()
        old.wait()


def test_a_job_that_leaves_its_process_group_is_still_killed_for_its_walltime(
        engine, attacker):
    """The server signalled a job's process group only (its top process's, recorded as
    its session_id): a job whose processes all moved to another group of the session
    (setpgid, as any process may) was never reached, past its walltime or cput, nor by
    qdel: it ran for ever, its note written again every 10 s."""
    path = engine.work / "hop.py"
    path.write_text("import os, time\n"
                    "child = os.fork()\n"
                    "if child == 0:\n"
                    "    os.setpgid(0, 0)\n"
                    "    time.sleep(1000)\n"
                    "while os.getpgid(child) != child:\n"
                    "    time.sleep(0.01)\n"
                    "os.setpgid(0, child)\n"
                    "time.sleep(1000)\n")
    path.chmod(0o644)
    job_id = qsub(attacker, engine, "-l", "walltime=00:00:01", "--", "/usr/bin/python3",
                  str(path))
    attrs = engine.wait(job_id, timeout=90)
    assert attrs["Exit_status"] == -29, attrs.get("comment")


def _state(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return b""


def test_a_job_that_ended_while_the_server_was_down_has_no_group_signalled_for_it(
        engine, attacker):
    """The server signalled a job's recorded process group (its top process's pid) with
    killpg, as root, whether or not that group was still the job's: a suspended job whose
    owner ended it while the server was down (its processes are the owner's to continue
    and kill) was stopped again at the server's start (`signals_as_stored`), by its old
    number, which by then could name anyone's process group (here root's): root's
    process was stopped. qdel, qsig and the kill after kill_delay took the same path
    between a job's end and the poll that noticed it."""
    from pbsplug.engine.executor import Launch

    job_id = qsub(attacker, engine, "--", "/bin/sleep", "300")
    engine.wait(job_id, "R")
    status = engine.home.jobs / f"{job_id.split('.')[0]}.status"
    launch = until(lambda: Launch.recorded(status, "/nonexistent"),
                   what="the shepherd's record")
    engine.pbs("qsig", "-s", "suspend", job_id, check=True)
    engine.kill()
    ended = attacker.python("import os, sys\nos.kill(int(sys.argv[1]), 9)\n", str(launch.pgid))
    assert ended.returncode == 0, ended.stderr
    until(status.exists, timeout=30, what="the job's end, with no server")
    victim = root_process_with_pid(launch.pgid, new_session=True)
    try:
        engine.start()
        engine.wait(job_id, timeout=60)
        assert _state(victim.pid) not in (b"T", b""), "root's process group was signalled"
    finally:
        victim.kill()
        victim.wait()


def test_a_lost_jobs_session_number_given_again_is_not_killed_at_the_servers_start(
        engine, attacker):
    """A job whose shepherd died without its status (root killed it, or the OOM killer)
    while the server was down: at its start the server killed every member of the
    shepherd's session started since the shepherd, as long as no process had the
    shepherd's pid. The job's processes had all ended or left that session meanwhile, so
    its number was given again, here to root's daemon whose session leader had exited
    (a double fork): it lives on with no process of that pid, and the server killed it."""
    import signal

    from pbsplug.engine.executor import Launch

    path = engine.work / "outlive.py"
    path.write_text("import os, time\n"
                    "session = os.getsid(0)\n"  # (its shepherd's pid)
                    "def alive(pid):\n"
                    "    try:\n"
                    "        with open(f'/proc/{pid}/stat', 'rb') as f:\n"
                    "            return f.read().rsplit(b')', 1)[1].split()[0] != b'Z'\n"
                    "    except OSError:\n"
                    "        return False\n"
                    "while alive(session):\n"
                    "    time.sleep(0.05)\n")
    path.chmod(0o644)
    job_id = qsub(attacker, engine, "-r", "n", "--", "/usr/bin/python3", str(path))
    engine.wait(job_id, "R")
    status = engine.home.jobs / f"{job_id.split('.')[0]}.status"
    launch = until(lambda: Launch.recorded(status, "/nonexistent"),
                   what="the shepherd's record")
    until(lambda: status.with_suffix(".usage").exists(), what="the shepherd's first sample")
    engine.kill()
    os.kill(launch.shepherd, signal.SIGKILL)  # (root's doing, or the OOM killer's)
    until(lambda: not Path(f"/proc/{launch.shepherd}").exists(), timeout=30,
          what="the shepherd to be reaped and its job's process to end")
    # (the daemon forked by a child of the leader's: the leader's next pid was the job's)
    leader = root_process_with_pid(launch.shepherd, [
        "/bin/sh", "-c", "(sleep 300 >/dev/null & echo $!)"], new_session=True)
    daemon = int(leader.communicate()[0])
    try:
        assert os.getsid(daemon) == launch.shepherd
        engine.start()
        engine.wait(job_id, timeout=60)
        assert _state(daemon) not in (b"", b"Z"), "root's daemon was killed"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(daemon, signal.SIGKILL)
