"""qsub -I as the attacker would try it: the waiting qsub's socket is reachable by its
user alone, and a job of the attacker's aimed at another user's qsub cannot start there,
let alone take the terminal (docs/engine.md, "Interactive jobs")."""

from __future__ import annotations

import glob
import os
import shutil

import pytest

from pbsplug.engine.testing import PBSPLUG, PtySession, until


@pytest.fixture
def waiting(engine):
    """Root's qsub -I of a held job, waiting for it; its socket's path, in the server's
    home ($TMPDIR: in /tmp, another test's qsub's socket could come first)."""
    session = PtySession(engine, PBSPLUG, "qsub", "-I", "-h", "--", "/bin/sh", "-c",
                         "echo owner=$(id -un)", env=engine.env(TMPDIR=str(engine.root)))
    job_id = session.job_id()
    path = until(lambda: next(iter(glob.glob(f"{engine.root}/pbsplug-qsub-*/s")), None),
                 what="the waiting qsub's socket")
    yield session, job_id, path
    if session.proc.poll() is None:
        session.proc.terminate()  # (it deletes its job and removes its folder)
    session.finish()
    assert not os.path.exists(os.path.dirname(path))


def test_another_user_cannot_connect(engine, attacker, waiting):
    _session, _job_id, path = waiting
    assert os.stat(os.path.dirname(path)).st_mode & 0o777 == 0o700
    done = attacker.python(
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect(sys.argv[1])\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
        "else:\n"
        "    print('connected')\n", path)
    assert done.stdout.strip() == "PermissionError", done.stderr


def test_a_job_aimed_at_another_users_qsub(engine, attacker, waiting):
    """The attacker's own interactive job, sent with the victim's socket and any token,
    runs as the attacker: it cannot reach the socket, so it cannot start; the victim's
    qsub keeps waiting and gets its own job, which runs as its owner."""
    session, job_id, path = waiting
    answer = engine.as_user(attacker.user, "submit", attrs={}, argv=["/bin/sleep", "60"],
                            interactive={"socket": path, "token": "0" * 32, "term": ""})
    stolen = answer["result"]
    attrs = engine.wait(stolen)
    assert attrs["Exit_status"] == -1
    assert "cannot reach its interactive qsub" in attrs["comment"]
    assert "ready" not in session.text
    assert engine.pbs("qrls", job_id).returncode == 0
    session.read_until("owner=root")
    assert session.finish() == 0
    assert engine.wait(job_id)["Exit_status"] == 0


def test_a_raw_request_cannot_set_interactive(engine, attacker):
    answer = engine.as_user(attacker.user, "submit", attrs={"interactive": True},
                            argv=["/bin/true"])
    assert "error" in answer and answer["error"]["code"] == 15003, answer
    answer = engine.as_user(attacker.user, "submit", attrs={}, argv=["/bin/true"],
                            interactive={"socket": "rel", "token": "0" * 32})
    assert answer["error"]["code"] == 15014, answer


def _attackers_qsub(engine, attacker, *argv: str) -> PtySession:
    """The attacker's ``qsub -I -- argv`` on a terminal of the test's."""
    env = {"PATH": f"{attacker.venv}/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": "/tmp",
           "USER": attacker.user, "LOGNAME": attacker.user, "TERM": "xterm",
           "PBSPLUG_HOME": str(engine.root)}
    return PtySession(engine, shutil.which("runuser") or "runuser", "-u", attacker.user, "--",
                      f"{attacker.venv}/bin/pbsplug", "qsub", "-I", "--", *argv, env=env)


def test_a_users_job_and_terminal_are_the_users(engine, attacker):
    """An unprivileged user's qsub -I: the job runs as them, on a terminal that is theirs
    (opened by their own process), and their qsub's folder is theirs and private."""
    session = _attackers_qsub(engine, attacker, "/bin/sh", "-c",
                              'echo "user=$(id -un) tty=$(stat -c %U $(tty)) term=$TERM"')
    job_id = session.job_id()
    assert session.finish() == 0, session.text
    assert f"user={attacker.user} tty={attacker.user} term=xterm" in session.text
    assert engine.wait(job_id)["euser"] == attacker.user


def test_a_lost_jobs_own_session_number_given_again_is_not_killed(engine, attacker):
    """An interactive job runs in a session of its own, whose number is its process's; the
    server kills that session when the job's shepherd is lost (`executor.kill_session`),
    but only what it can tell is the job's. Here the shepherd was killed while the server
    was down (root's doing, or the OOM killer's), the job ended on the hangup, and its
    number was given to root's process leading a session of its own: the server's start
    leaves it (it started after the shepherd was last seen)."""
    import json
    import signal

    from .conftest import root_process_with_pid

    session = _attackers_qsub(engine, attacker, "/bin/sh", "-c", "echo ar''med; sleep 300")
    job_id = session.job_id()
    session.read_until("armed")
    record = json.loads((engine.home.jobs / f"{job_id.split('.')[0]}.shepherd").read_text())
    engine.kill()
    os.kill(record["shepherd"], signal.SIGKILL)
    session.finish()
    victim = root_process_with_pid(record["pgid"], new_session=True)
    try:
        engine.start()
        assert engine.wait(job_id)["Exit_status"] == -4
        assert victim.poll() is None, "root's session of the job's number was killed"
    finally:
        victim.kill()
        victim.wait()
