"""Who may do what: the server knows callers by their uid on its socket (SO_PEERCRED)."""

from __future__ import annotations

import pwd


def test_users_run_their_own_jobs_and_touch_only_those(engine, unix_user):
    work = str(engine.work)
    mine = engine.as_user(unix_user, "submit", attrs={
        "Variable_List": {"PBS_O_WORKDIR": work}}, argv=["/bin/sh", "-c", "id -un; sleep 30"])
    job_id = mine["result"]
    attrs = engine.wait(job_id, "R")
    assert attrs["euser"] == unix_user and attrs["Job_Owner"].startswith(f"{unix_user}@")

    roots = engine.submit("sleep 30\n")
    engine.wait(roots, "R")
    refused = engine.as_user(unix_user, "delete", ids=[roots])
    assert refused["result"][0]["error"]["code"] == 15007
    assert refused["result"][0]["error"]["message"] == "Unauthorized Request"
    for op, args in (("run", {"id": roots}), ("node_state", {"names": ["x"], "offline": True}),
                     ("rerun", {"ids": [roots]}), ("shutdown", {})):
        assert engine.as_user(unix_user, op, **args)["error"]["code"] == 15007, op

    assert engine.as_user(unix_user, "delete", ids=[job_id])["result"] == [{"id": job_id}]
    engine.wait(job_id)
    out = engine.work / f"STDIN.o{job_id.split('.')[0]}"
    assert out.read_text() == f"{unix_user}\n"  # the job ran as its owner
    assert out.stat().st_uid == pwd.getpwnam(unix_user).pw_uid
    engine.client("delete", ids=[roots])  # a manager deletes anybody's job


def test_managers_attribute_makes_a_user_a_manager(engine, unix_user):
    roots = engine.submit("sleep 30\n")
    engine.wait(roots, "R")
    assert engine.as_user(unix_user, "delete", ids=[roots])["result"][0]["error"][
        "code"] == 15007
    engine.pbs("qmgr", "-c", f"set server managers += {unix_user}@*", check=True)
    assert engine.as_user(unix_user, "delete", ids=[roots])["result"] == [{"id": roots}]


def test_a_user_may_list_with_qmgr_but_not_change(engine, unix_user):
    listed = engine.as_user(unix_user, "qmgr", text="list queue workq")["result"]
    assert listed["output"].startswith("Queue workq\n") and listed["code"] == 0
    refused = engine.as_user(unix_user, "qmgr", text="set queue workq enabled = False")
    assert refused["result"]["errors"] == ["qmgr obj=workq svr=default: Unauthorized Request",
                                           "qmgr: Error (15007) returned from server"]
    hooks = engine.as_user(unix_user, "qmgr", text="list hook")["result"]
    assert hooks["code"] == 15136
    assert engine.client("stat_queues")["workq"]["enabled"] is True
