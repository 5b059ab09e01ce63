"""The execution-host worker (`pbsplug.adapters.worker`) as a real process on a real UNIX
socket, asked as the hook script asks it; no PBS needed."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pbsplug.adapters.pbs_bridge import hook_objects

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
    proc = subprocess.Popen([sys.executable, "-m", "pbsplug.adapters.worker", str(path),
                             str(config_file)], env={**os.environ, "PYTHONPATH": str(dists.root)})
    deadline = time.monotonic() + 30
    while not path.exists():
        assert proc.poll() is None, "the worker ended at start"
        assert time.monotonic() < deadline, "the worker never listened"
        time.sleep(0.05)
    yield path
    proc.kill()
    proc.wait()


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


def test_a_bad_request_is_that_events_error(worker):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(str(worker))
        conn.sendall(b"not json")
        conn.shutdown(socket.SHUT_WR)
        answer = json.loads(conn.recv(65536))
    assert answer["kind"] == "error" and answer["detail"].startswith("pbsplug worker:")
    assert ask(worker, "execjob_begin", begin("ok"))["kind"] == "accept"


ADAPTERS = str(Path(__file__).parents[2] / "core" / "adapters")


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
    sys.path.insert(0, ADAPTERS)
    try:
        import worker_client
    finally:
        sys.path.remove(ADAPTERS)
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
