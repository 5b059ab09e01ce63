"""The execution-host worker (`pbsplug.adapters.worker`) as a real process on a real UNIX
socket, asked as the hook script asks it; no PBS needed."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pbsplug.adapters.pbs_bridge import hook_objects
from pbsplug.testing import until

from .conftest import ADAPTERS
from .conftest import worker_client as worker_client_module

PLUGIN = """
import time
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0", events=("execjob_begin", "execjob_launch"), alarm=2)
STATE = []


@hookimpl
def execjob_begin(event):
    STATE.append(event.job.id)  # a fork per event: never seen by the next one
    if event.job.Job_Name == "reject":
        event.reject("worker: rejected")
    if event.job.Job_Name == "raise":
        raise RuntimeError("worker: boom")
    if event.job.Job_Name == "hang":
        while True:
            time.sleep(0.2)
    if event.job.Job_Name == "process":  # what the worker's process was left with
        import os, resource
        mask = os.umask(0)
        event.job.comment = f"umask {mask:o} fsize {resource.getrlimit(resource.RLIMIT_FSIZE)}"\
            f" nice {os.getpriority(os.PRIO_PROCESS, 0)} cwd {os.getcwd()}"
        return
    if event.job.Job_Name in ("helper", "helper, then die"):
        # A helper left running, as a daemonising library does: a fork of this process,
        # in a session of its own, holding what it holds (the client's connection).
        import os
        if os.fork() == 0:
            os.setsid()
            helper = os.fork()
            if helper == 0:
                time.sleep(60)
                os._exit(0)
            # (its pid written before the wait below ends: the test counts the helpers
            # once the answer is in)
            with open(os.environ["WTEST_HELPERS"], "a") as fh:
                fh.write(f"{helper}\\n")
            os._exit(0)
        os.wait()
        if event.job.Job_Name == "helper, then die":  # no answer: the child just ends
            os._exit(3)
        event.job.comment = "helper left"
        return
    if event.job.Job_Name == "slow":  # runs until the test lets it end (or its alarm)
        import os
        marks = os.path.dirname(os.environ["WTEST_HELPERS"])
        open(os.path.join(marks, "slow-started"), "w").close()
        while not os.path.exists(os.path.join(marks, "slow-release")):
            time.sleep(0.02)
    if event.job.Job_Name == "fds":  # the sockets this event's process holds
        import os, stat
        fds = [int(fd) for fd in os.listdir("/proc/self/fd")]
        event.job.comment = " ".join(
            str(fd) for fd in sorted(fds)
            if os.path.exists(f"/proc/self/fd/{fd}")
            and stat.S_ISSOCK(os.stat(f"/proc/self/fd/{fd}").st_mode))
        return
    event.job.comment = f"seen {len(STATE)} in {event.job.id}"
    event.logjobmsg(event.job.id, "worker: begin")


@hookimpl
def execjob_launch(event):
    event.env["WORKER_ENV"] = "yes"
"""


def write_config(dists, tmp_path) -> Path:
    dists.add("wtest", PLUGIN)
    config = {"plugin": "wtest", "entry_point": "pbsplug_wtest", "site_dirs": [str(dists.root)],
              "attributes": {"events": ["execjob_begin", "execjob_launch"], "alarm": 2,
                             "enabled": True},
              "config": {}, "objects": hook_objects()}
    config_file = tmp_path / "pbsplug_wtest.CF"
    config_file.write_text(json.dumps(config))
    return config_file


@pytest.fixture
def worker(dists, tmp_path):
    config_file = write_config(dists, tmp_path)
    path = tmp_path / "run" / "pbs-test.sock"
    helpers = tmp_path / "helpers"  # the pids of the helpers hooks left running
    proc = subprocess.Popen([sys.executable, "-m", "pbsplug.adapters.worker", str(path),
                             str(config_file)], env={**os.environ, "PYTHONPATH": str(dists.root),
                                                     "WTEST_HELPERS": str(helpers)})
    until(lambda: path.exists() or proc.poll() is not None, 30, "the worker to listen")
    assert proc.poll() is None, "the worker ended at start"
    yield path
    proc.kill()
    proc.wait()
    for pid in helpers.read_text().split() if helpers.exists() else ():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass


def ask(path: Path, event: str, data: dict, timeout: float = 20) -> dict | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(path))
        conn.sendall(json.dumps({"event": event, "data": data}).encode())
        conn.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return json.loads(answer) if answer else None


def begin(name: str, job_id: str = "1.vm") -> dict:
    return {"job": {"id": job_id, "Job_Name": name}, "vnode_list": {"vm": {"state": "free"}}}


def test_the_socket_is_root_only(worker):
    assert stat.S_IMODE(worker.stat().st_mode) == 0o600
    assert stat.S_IMODE(worker.parent.stat().st_mode) == 0o700


def test_each_event_runs_in_a_fresh_fork_with_pbs_outcomes(worker):
    first = ask(worker, "execjob_begin", begin("ok", "1.vm"))
    second = ask(worker, "execjob_begin", begin("ok", "2.vm"))
    assert first["kind"] == "accept" and first["changes"]["job"]["comment"] == "seen 1 in 1.vm"
    assert second["changes"]["job"]["comment"] == "seen 1 in 2.vm"  # nothing carried over
    assert ["pbsplug.hook.wtest", 20, "worker: begin", ["Job", "1.vm"]] in first["logs"]
    rejected = ask(worker, "execjob_begin", begin("reject"))
    assert (rejected["kind"], rejected["detail"]) == ("reject", "worker: rejected")
    failed = ask(worker, "execjob_begin", begin("raise"))
    assert failed["kind"] == "error" and "RuntimeError: worker: boom" in failed["detail"]
    launch = ask(worker, "execjob_launch", {**begin("ok"), "env": {"A": "1"}, "argv": ["sh"],
                                            "progname": "sh", "pid": os.getpid()})
    assert launch["changes"]["env"] == {"A": "1", "WORKER_ENV": "yes"}


def test_a_hanging_hook_is_killed_past_its_alarm_and_the_worker_goes_on(worker):
    assert ask(worker, "execjob_begin", begin("hang")) is None  # alarm 2 s, then killed
    assert ask(worker, "execjob_begin", begin("ok"))["kind"] == "accept"


_BEGIN = b'{"event": "execjob_begin", "data": {"job": {"id": "1.vm", "Job_Name": '


@pytest.mark.parametrize("request_bytes, detail", [
    (b"not json", "pbsplug worker: JsonError: the request: not JSON: Expecting value: line 1 "
                  "column 1 (char 0)"),
    # json.loads' RecursionError, in Python's words
    (b"[" * 100_000, "pbsplug worker: JsonError: the request: arrays or objects nested too "
                     "deeply"),
    (b"[1]", "pbsplug worker: JsonError: the request: a JSON array, not an object"),
    # taken: the hook saw a job named NaN, or the last of two names
    (_BEGIN + b'NaN}}}', "pbsplug worker: JsonError: the request: NaN is not a JSON number"),
    (_BEGIN + b'"a", "Job_Name": "b"}}}', 'pbsplug worker: JsonError: the request: the key '
                                          '"Job_Name" twice in one object'),
    (_BEGIN + b'"\xff"}}}', "pbsplug worker: JsonError: the request: not UTF-8 text (byte "
                             "0xff at offset 71)"),
])
def test_a_bad_request_is_that_events_error(worker, request_bytes, detail):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(worker))
        conn.sendall(request_bytes)
        conn.shutdown(socket.SHUT_WR)
        answer = json.loads(conn.recv(65536))
    assert (answer["kind"], answer["detail"]) == ("error", detail)
    assert ask(worker, "execjob_begin", begin("ok"))["kind"] == "accept"


def test_a_helper_a_hook_leaves_running_keeps_no_script_waiting(worker):
    """A hook that leaves a process running (os.fork, a daemonising library) gave it a copy
    of the client's connection: the hook script, reading to the end, waited for that
    helper (60 s here) until PBS's alarm killed it, and the event failed for nothing. Now
    the worker shuts the connection down after its answer, and the client stops at the end
    of a whole answer: both a current client and an older one (reading to the end) get
    theirs at once."""
    worker_client = worker_client_module()
    request = json.dumps({"event": "execjob_begin", "data": begin("helper")}).encode()
    conn = worker_client.connect(str(worker))
    conn.settimeout(10)  # (a client that waits for the helper, 60 s, fails here: timeout)
    answer = json.loads(worker_client.exchange(conn, request))
    assert answer["kind"] == "accept" and answer["changes"]["job"]["comment"] == "helper left"
    older = ask(worker, "execjob_begin", begin("helper"), timeout=10)  # reads to the end
    assert older["changes"]["job"]["comment"] == "helper left"
    assert _helpers_alive(worker) == 2  # the answers came while both helpers ran


def test_a_child_that_ends_without_an_answer_keeps_no_script_waiting_for_its_helper(worker):
    """The event's process ended without an answer (os._exit in a hook; likewise killed at
    its deadline, or crashed) while a helper it left holds the connection: the worker shuts
    it down once the child is reaped, and the script sees no answer then."""
    # (a client that waits for the helper, 60 s, fails with a timeout at 10 s)
    assert ask(worker, "execjob_begin", begin("helper, then die"), timeout=10) is None
    assert _helpers_alive(worker) == 1  # no answer, while the helper still runs
    assert ask(worker, "execjob_begin", begin("ok"))["kind"] == "accept"


def _helpers_alive(worker: Path) -> int:
    """How many of the helpers the tests' hooks left running still run."""
    alive = 0
    for pid in (worker.parent.parent / "helpers").read_text().split():
        try:
            os.kill(int(pid), 0)
            alive += 1
        except ProcessLookupError:
            pass
    return alive


def test_an_events_process_holds_no_socket_of_the_worker_but_its_own_connection(worker):
    """Not the listening socket, and not the connection of another client (one served by
    another child meanwhile, which the worker keeps until that child is reaped): a helper
    a hook leaves running would hold them too."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as slow:
        slow.connect(str(worker))
        slow.sendall(json.dumps({"event": "execjob_begin", "data": begin("slow")}).encode())
        slow.shutdown(socket.SHUT_WR)
        marks = worker.parent.parent
        until((marks / "slow-started").exists, 30, "the slow event's hook to run")
        answer = ask(worker, "execjob_begin", begin("fds"))  # (served while that one runs)
        (marks / "slow-release").touch()
        assert answer["kind"] == "accept"
        assert len(answer["changes"]["job"]["comment"].split()) == 1  # its own connection
        slow.settimeout(10)
        assert json.loads(b"".join(iter(lambda: slow.recv(65536), b"")))["kind"] == "accept"


@pytest.mark.parametrize("encoding", ["json", "marshal"])
def test_a_client_stops_at_the_end_of_a_whole_answer_from_an_older_worker(tmp_path,
                                                                          encoding):
    """A worker from before the shutdown rule (an old worker still serving after an
    upgrade) closed without shutting down, so a helper a hook left kept the connection
    open: the client stops at the end of one whole JSON object or marshal dict. An answer
    sent in pieces is read whole, and one that is not a whole dict (the native answer) is
    read to the connection's end, as before."""
    import marshal
    import threading

    worker_client = worker_client_module()
    dumps = marshal.dumps if encoding == "marshal" else (lambda v: json.dumps(v).encode())
    answer = {"exit": 0, "stdout": "}0 {\"", "error": "", "logs": [[1, "}0"]] * 5000}
    data = dumps(answer)
    cut = max(data.index(b"}", 20), data.index(b"0", 20)) + 1  # as a whole one would end
    native = b"PBSPLUG-ANSWER 1 0 1 0\n}"
    path = str(tmp_path / "old.sock")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen()
    held = []

    def old_worker():
        for pieces, end in (([data], False), ([data[:cut], data[cut:]], True),
                            ([native], True)):
            conn, _ = listener.accept()
            conn.recv(65536)
            for piece in pieces:
                conn.sendall(piece)
                time.sleep(0.3)
            if end:
                conn.close()
            else:
                held.append(conn)  # as a helper's copy: never closed, never shut down

    thread = threading.Thread(target=old_worker, daemon=True)
    thread.start()
    try:
        for expected in (data, data, native):
            conn = worker_client.connect(path)
            conn.settimeout(10)
            assert worker_client.exchange(conn, b"{}") == expected
    finally:
        thread.join(10)
        for conn in held:
            conn.close()
        listener.close()


def test_a_worker_sheds_the_umask_limits_and_nice_of_the_process_that_starts_it(dists,
                                                                              tmp_path):
    """It serves every job on the host: started from a job's process (PBS runs a launch hook
    after the owner's umask and limits are set), it kept them, and another user's begin
    made folders 0777 and could not write past 4 KiB."""
    config_file = write_config(dists, tmp_path)
    path = tmp_path / "run" / "pbs-clean.sock"
    starter = f"""
import os, resource, sys
sys.path.insert(0, {ADAPTERS!r})
import worker_client
os.umask(0)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.RLIM_INFINITY))
os.nice(5)
conn = worker_client.start({sys.executable!r}, {str(config_file)!r}, {str(path)!r})
sys.exit(0 if conn is not None else 1)
"""
    assert subprocess.run([sys.executable, "-c", starter], cwd=tmp_path, timeout=60).returncode == 0
    try:
        answer = ask(path, "execjob_begin", begin("process"))
        assert answer["kind"] == "accept", answer
        nice = 0 if os.geteuid() == 0 else 5  # only root may lower it again
        assert answer["changes"]["job"]["comment"] == f"umask 22 fsize (-1, -1) nice {nice} cwd /"
    finally:
        subprocess.run(["pkill", "-f", f"pbsplug.adapters.worker {path}"])


def test_a_launch_hook_asks_a_running_worker_but_never_starts_one(tmp_path):
    worker_client = worker_client_module()
    path = str(tmp_path / "run" / "pbs-none.sock")
    assert worker_client.ask(sys.executable, str(tmp_path / "x.CF"), path, b"{}",
                             may_start=False) is None
    assert not (tmp_path / "run").exists()  # nothing was started (no folder, no lock)
    hook = (Path(ADAPTERS) / "pbs_hook.py").read_text()
    assert 'may_start=name not in ("execjob_launch", "execjob_attach")' in hook


def test_a_hook_connecting_as_the_worker_leaves_is_still_answered(dists, tmp_path):
    """The worker used to decide to leave, close its socket and only then unlink it: a hook
    that connected in between (in the listen backlog) got a connection reset, the plugin's
    error. Now the name goes first, and what is in the backlog is served."""
    config_file = write_config(dists, tmp_path)
    path = tmp_path / "run" / "pbs-idle.sock"
    script = f"""
import json, select as real_select, socket, sys, types
from pathlib import Path
sys.path.insert(0, {ADAPTERS!r})
import worker_client
from pbsplug.adapters import worker

worker.IDLE_EXIT = 0.3
path = Path({str(path)!r})
state = {{"client": None}}

def select(r, w, x, timeout):  # a hook connects just after the worker's last look
    out = real_select.select(r, w, x, timeout)
    if state["client"] is None and not out[0]:  # idle past IDLE_EXIT: about to leave
        conn = worker_client.connect(str(path))
        conn.sendall(json.dumps({{"event": "execjob_begin", "data": {{
            "job": {{"id": "7.s", "Job_Name": "ok"}}, "vnode_list": {{}}}}}}).encode())
        conn.shutdown(socket.SHUT_WR)
        state["client"] = conn
        return [], [], []
    return out

worker.select = types.SimpleNamespace(select=select)
worker.serve(path, Path({str(config_file)!r}))
answer = b"".join(iter(lambda: state["client"].recv(65536), b""))
print(json.loads(answer)["kind"], path.exists())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(dists.root)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["accept", "False"]


def test_a_request_the_worker_cannot_fork_for_is_refused_and_the_worker_goes_on(dists,
                                                                                 tmp_path):
    """A fork that failed (out of memory, of processes: EAGAIN) ended the worker with a
    traceback, and with it every later request until a new one was started (for Slurm's
    task worker, the next job's Prolog on the node: its supervisor replaces only a serving
    process killed by a signal). That request is refused in one line now, and the next one
    is served."""
    config_file = write_config(dists, tmp_path)
    path = tmp_path / "run" / "pbs-fork.sock"
    script = f"""
import errno, json, os, socket, sys, threading
from pathlib import Path
from pbsplug.adapters import worker
from pbsplug.testing import until

worker.IDLE_EXIT = 3600  # (it leaves when the client removes its socket, below)
path = Path({str(path)!r})
real_fork, forks = os.fork, []

def fork():  # the first request's fork fails, as with no memory or process left
    forks.append(1)
    if len(forks) == 1:
        raise OSError(errno.EAGAIN, os.strerror(errno.EAGAIN))
    return real_fork()

os.fork = fork
answers = []

def ask():
    until(path.exists, 30, "the worker's socket")
    try:
        for name in ("first", "second"):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.connect(str(path))
                try:  # (a refusal may come first, as a worker_client sees it)
                    conn.sendall(json.dumps({{"event": "execjob_begin", "data": {{
                        "job": {{"id": "7.s", "Job_Name": name}},
                        "vnode_list": {{}}}}}}).encode())
                    conn.shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                chunks = []
                try:
                    while chunk := conn.recv(65536):
                        chunks.append(chunk)
                except ConnectionResetError:
                    pass  # (a refusal closes with the request unread: read, then reset)
                answers.append(json.loads(b"".join(chunks)))
    finally:  # its socket removed, the worker leaves (an idle limit raced a slow client)
        path.unlink()

client = threading.Thread(target=ask, daemon=True)
client.start()
worker.serve(path, Path({str(config_file)!r}))
client.join(30)
print(json.dumps([(a["kind"], a["detail"]) for a in answers]))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(dists.root)})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [
        ["error", "pbsplug worker: refused: cannot fork for it: Resource temporarily "
                  "unavailable"],
        ["accept", None]]
    assert done.stderr.splitlines() == [
        "pbsplug worker: request from uid 0 refused: cannot fork for it: Resource "
        "temporarily unavailable (logged once a minute per uid)"], done.stderr
