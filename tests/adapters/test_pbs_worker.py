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
    event.job.comment = f"seen {len(STATE)} in {event.job.id}"
    event.logjobmsg(event.job.id, "worker: begin")


@hookimpl
def execjob_launch(event):
    event.env["WORKER_ENV"] = "yes"
"""


@pytest.fixture
def worker(dists, tmp_path):
    dists.add("wtest", PLUGIN)
    run_dir = tmp_path / "run"
    config = {"plugin": "wtest", "entry_point": "pbsplug_wtest", "site_dirs": [str(dists.root)],
              "attributes": {"events": ["execjob_begin", "execjob_launch"], "alarm": 2,
                             "enabled": True},
              "config": {}, "objects": hook_objects()}
    config_file = tmp_path / "pbsplug_wtest.CF"
    config_file.write_text(json.dumps(config))
    path = run_dir / "pbs-test.sock"
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
