"""A process-mode hook run as root holds nothing of the server's: its process keeps only
stdin (/dev/null), the server's stdout and stderr, and its report pipe, before any hook code
runs (pbsplug.runner, `_keep_only_stdio`). Real server, real sockets, real SQLite.

Each case has a hook do what a careless plugin does with descriptors it did not open: list
them, leave a helper process running with them, write junk to and close every one above 2.
On queuejob (a client's connection is open), execjob_launch (the job's shepherd waits on a
pipe) and periodic (fired from the server's own loop).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import time

import pytest

from pbsplug.testing import until

EXC = "request rejected as filter hook 'files' encountered an exception. Please inform Admin"
EVENTS = ("queuejob", "execjob_launch", "periodic")

FILES = """
import json
import os
import time
from pathlib import Path

from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("queuejob", "execjob_launch", "periodic"), alarm=10, freq=1)
CONTROL = Path(CONTROL_DIR)
JUNK = b"\\xff" * 64


def held():
    # {fd: what it is} of this process, as /proc says
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass  # listdir's own, closed already
    return out


def put(path, text):
    # written whole or not at all: the test reads the file as soon as it is there
    part = path.with_name(path.name + ".part")
    part.write_text(text)
    os.replace(part, path)


def act(event):
    # What to do on this event: the test writes it into CONTROL/<event>, once.
    try:
        what = (CONTROL / event.type).read_text().strip()
        (CONTROL / event.type).unlink()
    except FileNotFoundError:
        return
    if what == "list":
        put(CONTROL / f"{event.type}.held", json.dumps(held()))
    elif what == "helper":  # a daemonised helper that outlives the hook and its process
        pid = os.fork()
        if pid == 0:
            try:
                os.setsid()
                if os.fork() == 0:
                    put(CONTROL / "helper.pid", str(os.getpid()))
                    time.sleep(120)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    elif what == "clobber":  # every descriptor above 2 taken for the hook's own
        found = held()
        put(CONTROL / f"{event.type}.clobbered", json.dumps(found))
        for fd in found:
            if fd > 2:
                for step in (lambda: os.write(fd, JUNK), lambda: os.close(fd)):
                    try:
                        step()
                    except OSError:
                        pass


@hookimpl
def queuejob(event):
    act(event)


@hookimpl
def execjob_launch(event):
    act(event)


@hookimpl
def periodic(event):
    act(event)
"""


@pytest.fixture
def files_engine(dists, local_engine, control):
    dists.add("files", FILES.replace("CONTROL_DIR", repr(str(control))))
    return local_engine("[plugins.files]\nenabled = true\n", env=dists.env())


def fds_of(pid: int | str) -> dict[int, str]:
    out = {}
    for name in os.listdir(f"/proc/{pid}/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/{pid}/fd/{name}")
        except OSError:
            pass
    return out


def submit_raw(engine, timeout: float = 15.0) -> bytes:
    """A qsub over a connection of the test's own, read to its end (EOF): what an HTTP/1.0
    client that reads until the server closes sees."""
    body = json.dumps({"attrs": {"Variable_List": {"PBS_O_WORKDIR": str(engine.work)}},
                       "script": "true\n"}).encode()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(engine.home.socket))
        sock.sendall(b"POST /v1/submit HTTP/1.0\r\nContent-Type: application/json\r\n"
                     b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        data = b""
        while chunk := sock.recv(1 << 16):  # TimeoutError: the connection never ends
            data += chunk
    return data


def order(control, event: str, what: str) -> None:
    """What the hook is to do on `event`, written whole (the periodic hook reads and
    removes it at any moment: a file read before its text was in did nothing)."""
    part = control / f"{event}.part"
    part.write_text(what)
    os.replace(part, control / event)


def essentials(attrs: dict) -> tuple:
    return tuple(attrs.get(k) for k in ("job_state", "Hold_Types", "Job_Owner", "queue",
                                        "Resource_List", "Job_Name"))


def test_a_root_hooks_process_holds_only_stdio_and_its_report_pipe(files_engine, control):
    engine = files_engine
    for event in EVENTS:
        order(control, event, "list")
    job_id = engine.submit("sleep 1000\n")
    for event in EVENTS:
        until((control / f"{event}.held").exists, timeout=60, what=f"the {event} hook")
    server = fds_of(engine.home.server_pid())
    # (what the server holds, and a hook must not: its socket, its database)
    assert any(what.startswith("socket:") for what in server.values()), server
    assert str(engine.home.root / "server.db") in server.values(), server
    for event in EVENTS:
        held = {int(fd): what for fd, what in
                json.loads((control / f"{event}.held").read_text()).items()}
        assert held[0] == "/dev/null", (event, held)
        assert (held[1], held[2]) == (server[1], server[2]), (event, held)  # server.out
        above = [what for fd, what in held.items() if fd > 2]
        assert len(above) == 1 and above[0].startswith("pipe:"), (event, held)
    assert engine.job(job_id)["job_state"] == "R"


def test_a_helper_a_hook_leaves_running_holds_nothing_of_the_servers(files_engine, control):
    engine = files_engine
    order(control, "queuejob", "helper")
    helper = None
    try:
        # the client whose qsub ran the hook: its connection ends with the answer
        answer = submit_raw(engine)
        assert answer.startswith(b"HTTP/1.0 200 "), answer
        helper = int(until(lambda: (control / "helper.pid").exists()
                           and (control / "helper.pid").read_text(), what="the helper"))
        held = fds_of(helper)  # stdio, and the write end of its hook's report pipe
        assert held[0] == "/dev/null", held
        assert [what for fd, what in held.items() if fd > 2
                and not what.startswith("pipe:")] == [], held

        # the server crashes while the helper lives: a client is told at once that no
        # server runs (not left in the helper's copy of the listening socket's queue)
        engine.kill()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(10)
            with pytest.raises(ConnectionRefusedError):
                sock.connect(str(engine.home.socket))
        # and it starts again on its socket, and serves
        engine.start()
        assert engine.pbs("qstat").returncode == 0
        assert submit_raw(engine).startswith(b"HTTP/1.0 200 ")
        os.kill(helper, 0)  # (it still runs: the checks above were made with it alive)
    finally:
        if helper is not None:
            try:
                os.kill(helper, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.parametrize("event", EVENTS)
def test_a_hook_that_writes_to_and_closes_every_descriptor_harms_nothing(event, files_engine,
                                                                        control):
    engine = files_engine
    pid = engine.home.server_pid()
    others = engine.submit("sleep 1000\n", Job_Name="others", Hold_Types="u")
    before = essentials(engine.job(others))

    order(control, event, "clobber")
    if event == "queuejob":  # the client gets PBS's answer, not the hook's junk
        done = engine.pbs("qsub", "--", "/bin/true", cwd=engine.work)
        assert (done.returncode, done.stderr) == (15136 % 256, f"qsub: {EXC}\n")
    elif event == "execjob_launch":  # the job's shepherd got none of it either
        job_id = engine.submit("true\n")
        comment = f"Job deleted by execjob_launch hook: {EXC}"
        until(lambda: engine.job(job_id).get("comment") == comment, timeout=60,
              what="the execjob_launch failure")
    until((control / f"{event}.clobbered").exists, timeout=60, what=f"the {event} hook")
    until(lambda: f"{event} hook 'files' encountered an exception" in engine.log(),
          timeout=60, what="the hook's error in the log")
    clobbered = json.loads((control / f"{event}.clobbered").read_text())
    assert [what for fd, what in clobbered.items() if int(fd) > 2
            and not what.startswith("pipe:")] == [], clobbered  # (its report pipe alone)

    # the same server serves; its database is whole, and another user's job intact
    assert engine.home.server_pid() == pid
    time.sleep(1.5)  # (a poll or two of the server's, on what the hook did)
    assert engine.pbs("qstat").returncode == 0
    assert essentials(engine.job(others)) == before
    job_id = engine.submit("true\n")
    assert engine.wait(job_id)["Exit_status"] == 0
    db = sqlite3.connect(f"file:{engine.home.root / 'server.db'}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    finally:
        db.close()
    assert engine.home.server_pid() == pid


AS_OWNER = """
import subprocess

from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("execjob_prologue",), user="pbsuser", alarm=20)


@hookimpl
def execjob_prologue(event):
    # What a pbsuser hook is for: the job owner's own prologue, run as the owner.
    program = (event.job.Variable_List or {}).get("USER_PROLOGUE")
    if program:
        subprocess.run([program], timeout=15, check=False)
"""

OWNERS_PROLOGUE = """#!/bin/sh
for fd in 1 2; do
    echo "forged by the job's owner" >&$fd
    held=$(readlink /proc/$$/fd/$fd)
    echo "$held" >> "$(dirname "$0")/held"
done
"""


def test_a_pbsuser_hook_hands_the_owner_none_of_the_servers_files(dists, local_engine,
                                                                  attacker):
    # The hook's process kept the caller's stdout and stderr, and a root server's are its
    # own log (server.out, root's, 0600): a program the hook ran as the job's owner (the
    # owner's prologue) got them, and wrote into root's file (or truncated it) at will.
    dists.add("asowner", AS_OWNER)
    engine = local_engine("[plugins.asowner]\nenabled = true\n", env=dists.env())
    log = engine.home.root / "server.out"
    prologue = engine.work / "prologue"
    done = attacker.python("import sys\nfrom pathlib import Path\n"
                           "p = Path(sys.argv[1])\np.write_text(sys.argv[2])\n"
                           "p.chmod(0o755)\n", str(prologue), OWNERS_PROLOGUE)
    assert done.returncode == 0, done.stderr
    job_id = attacker.pbs(engine, "qsub", "-v", f"USER_PROLOGUE={prologue}", "--",
                          "/bin/true", cwd=engine.work).stdout.strip()
    attrs = engine.wait(job_id)
    assert attrs["Exit_status"] == 0, attrs.get("comment")
    assert "forged" not in log.read_text()
    assert (engine.work / "held").read_text().split() == ["/dev/null"] * 2
    assert (log.stat().st_uid, log.stat().st_mode & 0o777) == (0, 0o600)
