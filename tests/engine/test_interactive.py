"""qsub -I: an interactive job's shell on a pseudo-terminal relayed by the waiting qsub, as
OpenPBS 23.06's qsub -I behaves (checked: its messages, its exit status, PBS_ENVIRONMENT,
the job's attributes, qdel while it waits, the refusal without a terminal)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from pbsplug.engine.testing import PBSPLUG, PtySession, until
from pbsplug.testing import missing


@pytest.fixture(autouse=True)
def _pseudo_terminals() -> None:
    """Every test here drives qsub -I on a pseudo-terminal: without them, `missing` (a
    failure under CI, a skip elsewhere)."""
    if not hasattr(os, "openpty"):
        missing("needs pseudo-terminals (os.openpty)")


def qsub(engine, *args: str, **kw) -> PtySession:
    return PtySession(engine, PBSPLUG, "qsub", *args, **kw)


@pytest.fixture
def engine(local_engine):
    return local_engine()


def test_a_command_on_the_terminal(engine):
    """PBS_ENVIRONMENT is PBS_INTERACTIVE, the job's standard streams are a terminal, and
    qsub says what PBS's says and exits 0 whatever the job's exit status (OpenPBS 23.06's
    qsub -I exited 0 after jobs that exited 3 and 5)."""
    session = qsub(engine, "-I", "--", "/bin/sh", "-c",
                   'echo "env=$PBS_ENVIRONMENT id=$PBS_JOBID"; tty; exit 3')
    job_id = session.job_id()
    assert session.finish() == 0, session.text
    text = session.text
    assert f"qsub: waiting for job {job_id} to start\nqsub: job {job_id} ready\n\n" in text
    assert f"env=PBS_INTERACTIVE id={job_id}\n/dev/pts/" in text
    assert text.endswith(f"\n\nqsub: job {job_id} completed\n")
    attrs = engine.wait(job_id)
    assert (attrs["interactive"], attrs["Rerunable"], attrs["Exit_status"]) == (True, False, 3)
    assert os.listdir(engine.work) == []  # no output files: the output went to the terminal


def test_the_login_shell_reads_the_terminal(engine):
    """The owner's login shell reads what is typed; the job's terminal has qsub's window
    size, and its new size after a SIGWINCH."""
    session = qsub(engine, "-I", size=(33, 77))
    job_id = session.job_id()
    session.read_until("ready")
    session.write("echo got $PBS_ENVIRONMENT; stty size\n")
    session.read_until("33 77")
    session.resize(40, 100)
    session.proc.send_signal(signal.SIGWINCH)
    session.write("stty size; exit 5\n")
    session.read_until("40 100")
    assert session.finish() == 0, session.text
    assert "got PBS_INTERACTIVE" in session.text
    assert engine.wait(job_id)["Exit_status"] == 5


def test_not_on_a_terminal(engine):
    done = subprocess.run([PBSPLUG, "qsub", "-I", "--", "/bin/true"], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=engine.env(), cwd=engine.work)
    assert (done.returncode, done.stdout, done.stderr) == (
        1, "", "qsub:\tstandard input and output must be a terminal for\n"
               "\tinteractive job submission\n")
    assert engine.client("stat_jobs", history=True) == {}


def test_qdel_while_waiting(engine):
    session = qsub(engine, "-I", "-h", "--", "/bin/true")
    job_id = session.job_id()
    done = engine.pbs("qdel", job_id)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert session.finish() == 1
    assert session.text.endswith(f"qsub: job {job_id} apparently deleted\n")


def test_a_server_restart_while_waiting(engine):
    """qsub waits through a server's stop and start (the job is in its database and may
    still start): it asked the stopped server for the job's state and ended, the job left
    with no one at its terminal."""
    session = qsub(engine, "-I", "-h", "--", "/bin/sh", "-c", "echo back here")
    job_id = session.job_id()
    engine.stop()
    time.sleep(1.5)  # (qsub asks the server for the job's state every half second)
    assert session.proc.poll() is None, session.text
    engine.start()
    assert engine.pbs("qrls", job_id).returncode == 0
    assert session.finish() == 0, session.text
    assert "back here" in session.text


def test_qdel_of_the_running_job(engine):
    session = qsub(engine, "-I", "--", "/bin/sleep", "300")
    job_id = session.job_id()
    session.read_until("ready")
    assert engine.pbs("qdel", job_id).returncode == 0
    assert session.finish() == 0
    assert session.text.endswith(f"qsub: job {job_id} completed\n")
    assert engine.wait(job_id)["Exit_status"] == 0  # (OpenPBS 23.06's, checked)


def test_walltime(engine):
    session = qsub(engine, "-I", "-l", "walltime=1", "--", "/bin/sleep", "300")
    job_id = session.job_id()
    assert session.finish() == 0
    assert "=>> PBS: job killed: walltime" in session.text
    assert engine.wait(job_id)["Exit_status"] == -29


def test_qsub_killed_ends_the_job(engine):
    """A qsub that goes away ends its job, even one that ignores the terminal's hangup,
    and nothing of it is left."""
    session = qsub(engine, "-I", "--", "/bin/sh", "-c",
                   "trap '' HUP; echo $$ > \"$PBS_O_WORKDIR/pid\"; echo ar''med; "
                   "exec sleep 300")
    job_id = session.job_id()
    session.read_until("armed")
    session.proc.kill()
    session.finish()
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 256 + signal.SIGKILL
    pid = int((engine.work / "pid").read_text())  # (not in its home: root's is every test's)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in open(f"/proc/{pid}/stat").read()


def test_hooks_fire_as_for_any_job(engine):
    session = qsub(engine, "-I", "--", "/bin/true")
    job_id = session.job_id()
    assert session.finish() == 0
    log = engine.log()
    assert f"Job;{job_id};Job Run at request" in log


def test_an_interactive_array_is_refused(engine):
    session = qsub(engine, "-I", "-J", "1-2", "--", "/bin/true")
    assert session.finish() == 2
    assert session.text.startswith(
        "qsub: interactive and array job submission cannot be used together\nusage: qsub")
    assert engine.client("stat_jobs", history=True) == {}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_qsub_interrupted_while_waiting_deletes_the_job(engine, sig):
    session = qsub(engine, "-I", "-h", "--", "/bin/true")
    job_id = session.job_id()
    session.proc.send_signal(sig)
    assert session.finish() == 1
    assert engine.wait(job_id)["job_state"] == "F"


def test_a_lost_shepherd_hangs_up_the_terminal(engine):
    """The job's shepherd killed: qsub lets the terminal go, so the job, which nothing
    tracks any more, gets its hangup and ends; the server finishes it as a lost job."""
    session = qsub(engine, "-I", "--", "/bin/sh", "-c",
                   "echo $$ > \"$PBS_O_WORKDIR/pid\"; echo ar''med; exec sleep 300")
    job_id = session.job_id()
    session.read_until("armed")
    record = json.loads((engine.home.jobs / f"{job_id.split('.')[0]}.shepherd").read_text())
    os.kill(record["shepherd"], signal.SIGKILL)
    assert session.finish() == 0
    assert session.text.endswith(f"qsub: job {job_id} completed\n")
    assert engine.wait(job_id)["Exit_status"] == -4
    pid = int((engine.work / "pid").read_text())  # (not in its home: root's is every test's)
    until(lambda: not os.path.exists(f"/proc/{pid}") or " Z " in open(f"/proc/{pid}/stat").read(),
          what="the job's sleep to end")


def _session_members(session: int) -> list[int]:
    """The live processes (not zombies) whose session is `session`."""
    members = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != b"Z" and int(fields[3]) == session:
            members.append(int(name))
    return members


def test_a_job_that_ignores_the_hangup_is_killed_when_its_shepherd_is_lost(engine):
    """The job's shepherd killed before its first sample of the job's use (the one that
    records the job's processes): the job, which ignores the hangup, runs in a session of
    its own, out of the shepherd's, and was left running untracked. The server kills it
    through the shepherd's record (the job's process, the session's leader). The sample
    is removed with the shepherd stopped: the state it leaves when killed in its first
    second."""
    session = qsub(engine, "-I", "--", "/bin/sh", "-c", "trap '' HUP; echo ar''med; "
                   "sleep 300; :")
    job_id = session.job_id()
    session.read_until("armed")
    seq = job_id.split(".")[0]
    record = json.loads((engine.home.jobs / f"{seq}.shepherd").read_text())
    try:
        assert _session_members(record["pgid"]), "the job is not running"
        os.kill(record["shepherd"], signal.SIGSTOP)
        (engine.home.jobs / f"{seq}.usage").unlink(missing_ok=True)
        os.kill(record["shepherd"], signal.SIGKILL)
        assert session.finish() == 0
        assert engine.wait(job_id)["Exit_status"] == -4
        until(lambda: not _session_members(record["pgid"]), timeout=30,
              what="the job's processes to end")
    finally:
        for pid in _session_members(record["pgid"]):  # (its number is theirs while they live)
            os.kill(pid, signal.SIGKILL)


def test_a_long_tmpdir(engine, tmp_path):
    """qsub's socket must fit a sockaddr_un (107 bytes): under a longer $TMPDIR it goes
    in /tmp instead."""
    tmpdir = tmp_path / ("t" * 120)
    tmpdir.mkdir()
    session = qsub(engine, "-I", "--", "/bin/true", env=engine.env(TMPDIR=str(tmpdir)))
    job_id = session.job_id()
    assert session.finish() == 0, session.text
    assert engine.wait(job_id)["Exit_status"] == 0


def test_a_script_gives_its_directives_and_the_login_shell_runs(engine):
    """As OpenPBS 23.06 (checked): `qsub -I script` takes the script's directives, and the
    job runs the owner's login shell, not the script."""
    (engine.work / "s.sh").write_text("#!/bin/sh\n#PBS -N fromscript\necho script-ran\n")
    session = qsub(engine, "-I", "s.sh")
    job_id = session.job_id()
    session.read_until("ready")
    session.write("echo name=$PBS_JOBNAME; exit 7\n")
    assert session.finish() == 0, session.text
    assert "name=fromscript" in session.text and "script-ran" not in session.text
    attrs = engine.wait(job_id)
    assert (attrs["Job_Name"], attrs["Exit_status"]) == ("fromscript", 7)


@pytest.mark.parametrize("hello", [b"[" * 4000, b"\xff"])
def test_a_hello_that_is_not_one_is_dropped_and_qsub_waits_on(hello, open_fds):
    """What connects to qsub -I's socket is dropped unless it sends the token: a hello
    nested 4000 deep was json.loads' RecursionError, which ended the waiting qsub; the
    descriptor sent with a hello that was not JSON stayed open in it."""
    import socket

    from pbsplug.engine.interactive import Listener

    listener = Listener()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
            peer.connect(listener.path)
            socket.send_fds(peer, [hello], [0])
            before = open_fds()
            assert listener.accept(10) is None
            assert open_fds() == before
    finally:
        listener.close()


@pytest.mark.parametrize("extra", [', "token": "TOKEN"', ', "n": NaN', ', "n": ' + "9" * 2000,
                                   ', "n": ' + "[" * 600 + "]" * 600],
                         ids=["the token twice", "NaN", "2000 digits", "600 deep"])
def test_a_hello_with_the_token_that_json_loads_took_wrongly_is_dropped(extra, open_fds):
    """The hello is read with `pbsplug.jsontext`: json.loads took the token twice (the
    last one), NaN, a 2,000-digit integer and nesting 600 deep, and let the terminal in."""
    import socket

    from pbsplug.engine.interactive import Listener

    listener = Listener()
    try:
        hello = ('{"token": "TOKEN"' + extra + "}").replace("TOKEN", listener.token).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as peer:
            peer.connect(listener.path)
            socket.send_fds(peer, [hello], [0])
            before = open_fds()
            got = listener.accept(10)
            if got is not None:  # (the old code's: let in; its descriptors closed here)
                os.close(got[0])
                got[1].close()
            assert got is None
            assert open_fds() == before
    finally:
        listener.close()
