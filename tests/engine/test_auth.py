"""Who may do what: the server knows callers by their uid on its socket (SO_PEERCRED)."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess

import pytest

USER = "pbsplugtu"


@pytest.fixture(scope="module")
def other_user() -> str:
    """A second Unix user, created for these tests (they need root to create it and to run
    the server's jobs as their owners)."""
    if os.geteuid() != 0:
        pytest.skip("needs root: creates a Unix user and runs jobs as their owners")
    for tool, package in (("useradd", "passwd"), ("runuser", "util-linux"), ("curl", "curl")):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (Debian package {package}) to act as a second user")
    try:
        pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", USER],
                       check=True)
    return USER


def as_user(engine, user: str, op: str, **args) -> dict:
    """Send one request as `user`, from a process of that user, over the server's socket.

    curl speaks the API's HTTP on the UNIX socket: the project's Python lives under /root
    here, which another user cannot execute."""
    done = subprocess.run(
        ["runuser", "-u", user, "--", "curl", "--silent", "--http1.0", "--unix-socket",
         str(engine.home.socket), "-H", "Content-Type: application/json",
         "--data-binary", json.dumps(args), f"http://localhost/v1/{op}"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_users_run_their_own_jobs_and_touch_only_those(engine, other_user):
    work = str(engine.work)
    mine = as_user(engine, other_user, "submit", attrs={
        "Variable_List": {"PBS_O_WORKDIR": work}}, argv=["/bin/sh", "-c", "id -un; sleep 30"])
    job_id = mine["result"]
    attrs = engine.wait(job_id, "R")
    assert attrs["euser"] == other_user and attrs["Job_Owner"].startswith(f"{other_user}@")

    roots = engine.submit("sleep 30\n")
    engine.wait(roots, "R")
    refused = as_user(engine, other_user, "delete", ids=[roots])
    assert refused["result"][0]["error"]["code"] == 15007
    assert refused["result"][0]["error"]["message"] == "Unauthorized Request"
    for op, args in (("run", {"id": roots}), ("node_state", {"names": ["x"], "offline": True}),
                     ("rerun", {"ids": [roots]}), ("shutdown", {})):
        assert as_user(engine, other_user, op, **args)["error"]["code"] == 15007, op

    assert as_user(engine, other_user, "delete", ids=[job_id])["result"] == [{"id": job_id}]
    engine.wait(job_id)
    out = engine.work / f"STDIN.o{job_id.split('.')[0]}"
    assert out.read_text() == f"{other_user}\n"  # the job ran as its owner
    assert out.stat().st_uid == pwd.getpwnam(other_user).pw_uid
    engine.client("delete", ids=[roots])  # a manager deletes anybody's job


def test_managers_attribute_makes_a_user_a_manager(engine, other_user):
    roots = engine.submit("sleep 30\n")
    engine.wait(roots, "R")
    assert as_user(engine, other_user, "delete", ids=[roots])["result"][0]["error"][
        "code"] == 15007
    engine.pbs("qmgr", "-c", f"set server managers += {other_user}@*", check=True)
    assert as_user(engine, other_user, "delete", ids=[roots])["result"] == [{"id": roots}]


def test_a_user_may_list_with_qmgr_but_not_change(engine, other_user):
    listed = as_user(engine, other_user, "qmgr", text="list queue workq")["result"]
    assert listed["output"].startswith("Queue workq\n") and listed["code"] == 0
    refused = as_user(engine, other_user, "qmgr", text="set queue workq enabled = False")
    assert refused["result"]["errors"] == ["qmgr obj=workq svr=default: Unauthorized Request",
                                           "qmgr: Error (15007) returned from server"]
    hooks = as_user(engine, other_user, "qmgr", text="list hook")["result"]
    assert hooks["code"] == 15136
    assert engine.client("stat_queues")["workq"]["enabled"] is True
