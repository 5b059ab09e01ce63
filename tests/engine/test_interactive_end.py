"""How an interactive job ends when its qsub was killed (SIGKILL) before it started, and
when qdel ends it, as OpenPBS 23.06 ends them (checked); what the job's process removes of
a killed qsub's folder, as the owner, and what it leaves (`interactive.remove_left`)."""

from __future__ import annotations

import glob
import os
import re
import signal
import socket

import pytest

from pbsplug.engine import interactive
from pbsplug.engine.testing import PBSPLUG, PtySession, until
from pbsplug.testing import missing


@pytest.fixture(autouse=True)
def _pseudo_terminals() -> None:
    """qsub -I runs on a pseudo-terminal: without them, `missing` (a failure under CI, a
    skip elsewhere), as in test_interactive."""
    if not hasattr(os, "openpty"):
        missing("needs pseudo-terminals (os.openpty)")


def qsub(engine, *args: str, **kw) -> PtySession:
    return PtySession(engine, PBSPLUG, "qsub", *args, **kw)


@pytest.fixture
def engine(local_engine):
    return local_engine()


def _waiting(engine, *argv: str) -> tuple[PtySession, str, str]:
    """qsub -I of a held job, waiting; its id and its folder, made in the server's home
    ($TMPDIR): in /tmp, the folder that came was another test's qsub's as often as not."""
    session = qsub(engine, "-I", "-h", *argv, env=engine.env(TMPDIR=str(engine.root)))
    job_id = session.job_id()
    folder = until(lambda: next(iter(glob.glob(f"{engine.root}/{interactive.FOLDER_PREFIX}*")),
                                None), what="the waiting qsub's folder")
    return session, job_id, folder


def _left_by_a_killed_qsub(parent) -> str:
    """A folder as a qsub killed with SIGKILL leaves it: its socket, bound, listened on by
    no one any more. The socket's path."""
    folder = parent / f"{interactive.FOLDER_PREFIX}x1"
    folder.mkdir(mode=0o700)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(folder / "s"))
    sock.close()
    return str(folder / "s")


def test_the_folder_of_a_killed_qsub_is_removed(tmp_path):
    path = _left_by_a_killed_qsub(tmp_path)
    interactive.remove_left(path)
    assert not os.path.lexists(os.path.dirname(path))


def test_what_is_not_a_killed_qsubs_folder_is_left(tmp_path):
    # another name
    other = tmp_path / "other"
    other.mkdir()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(other / "s"))
    sock.close()
    interactive.remove_left(str(other / "s"))
    assert (other / "s").exists()
    # a folder holding more than its socket
    path = _left_by_a_killed_qsub(tmp_path)
    (tmp_path / f"{interactive.FOLDER_PREFIX}x1" / "keep").write_text("mine")
    interactive.remove_left(path)
    assert os.path.lexists(path)
    # a socket that is a file
    plain = tmp_path / f"{interactive.FOLDER_PREFIX}x2"
    plain.mkdir()
    (plain / "s").write_text("not a socket")
    interactive.remove_left(str(plain / "s"))
    assert (plain / "s").read_text() == "not a socket"
    # a path through a link, to the folder or above it
    real = tmp_path / "real"
    real.mkdir()
    target = _left_by_a_killed_qsub(real)
    (tmp_path / "via").symlink_to(real)
    interactive.remove_left(str(tmp_path / "via" / os.path.relpath(target, real)))
    link = tmp_path / f"{interactive.FOLDER_PREFIX}x3"
    link.symlink_to(os.path.dirname(target))
    interactive.remove_left(str(link / "s"))
    assert os.path.lexists(target) and link.is_symlink()
    # a path that is not written plainly
    interactive.remove_left(target.replace("/real/", "/real/./"))
    interactive.remove_left(target.replace("/real/", "/via/../real/"))
    assert os.path.lexists(target)


def test_a_qsub_killed_while_it_waits(engine):
    """Its folder stays until the job would start: the job's process, as its owner,
    finds no listener and removes the folder, and the job ends as OpenPBS 23.06's does
    (checked: Exit_status -1, `Job run at <time> on <exec_vnode> and failed`, not
    requeued); the server log says why."""
    session, job_id, folder = _waiting(engine, "--", "/bin/true")
    session.proc.send_signal(signal.SIGKILL)
    session.finish()
    assert os.listdir(folder) == ["s"]
    assert engine.pbs("qrls", job_id).returncode == 0
    attrs = engine.wait(job_id)
    assert not os.path.lexists(folder)
    assert (attrs["Exit_status"], attrs["run_count"]) == (-1, 1)
    assert re.fullmatch(r"Job run at .+ on \(.+\) and failed", attrs["comment"]), attrs
    assert f";Job;{job_id};could not start: cannot reach its interactive qsub: " \
           f"ConnectionRefusedError: [Errno 111] {interactive.QSUB_GONE}\n" in engine.log()


@pytest.mark.parametrize("argv", [["--", "/bin/sleep", "300"],
                                  ["--", "/bin/sh", "-c", "trap '' TERM; echo ar''med; "
                                   "sleep 300"]])
def test_qdel_of_the_running_job_gives_exit_status_0(engine, argv):
    """As OpenPBS 23.06's (checked), whatever ends its processes (here SIGKILL, after the
    kill_delay, for the one that ignores SIGTERM)."""
    session = qsub(engine, "-I", *argv)
    job_id = session.job_id()
    session.read_until("armed" if "trap" in argv[-1] else "ready")
    assert engine.pbs("qdel", job_id).returncode == 0
    assert session.finish() == 0
    assert session.text.endswith(f"qsub: job {job_id} completed\n")
    assert engine.wait(job_id)["Exit_status"] == 0


def test_another_users_job_cannot_remove_a_killed_qsubs_folder(engine, attacker):
    """The removal is the job's owner's: the attacker's interactive job, sent with the
    socket of root's killed qsub, cannot reach it (its folder is 0700), so removes
    nothing."""
    session, job_id, folder = _waiting(engine, "--", "/bin/true")
    session.proc.send_signal(signal.SIGKILL)
    session.finish()
    answer = engine.as_user(attacker.user, "submit", attrs={}, argv=["/bin/true"],
                            interactive={"socket": os.path.join(folder, "s"),
                                         "token": "0" * 32, "term": ""})
    attrs = engine.wait(answer["result"])
    assert attrs["Exit_status"] == -1
    assert "PermissionError" in attrs["comment"]
    assert os.listdir(folder) == ["s"]
    engine.pbs("qdel", job_id, check=True)  # (qsub's own job: deleted before it started)
    interactive.remove_left(os.path.join(folder, "s"))  # (root's, as root: the test's)
    assert not os.path.lexists(folder)


def test_what_the_job_wrote_last_reaches_qsub_when_its_shepherd_goes_at_once():
    """The job's last output and the shepherd's connection closing come to qsub together
    (the shepherd closes its end as soon as the job's top process ends): qsub copies
    what the job's terminal still holds before it stops, not only what one read found.
    Real pseudo-terminals: the job's, and one for qsub's own terminal."""
    master, slave = os.openpty()
    term_master, term_slave = os.openpty()
    out_r, out_w = os.pipe()
    conn, shepherd = socket.socketpair()
    try:
        os.write(slave, b"owner=root\n")  # (the terminal adds the CR)
        os.close(slave)
        shepherd.close()  # (both ready before relay's first select)
        interactive.relay(master, conn, stdin=term_slave, stdout=out_w)
        os.close(out_w)
        with os.fdopen(out_r, "rb") as copied:
            assert copied.read() == b"owner=root\r\n"
    finally:
        for fd in (master, term_master, term_slave):
            os.close(fd)
        conn.close()
