"""Advance reservations on a real server: pbs_rsub, pbs_rstat, pbs_rdel and the resv hooks."""

from __future__ import annotations

import grp
import json
import os
import pwd
import re
import socket
import time

import pytest

from pbsplug.engine.errors import PbsError
from pbsplug.engine.server import ROLE_MANAGER, ROLE_USER, Caller

from .conftest import poll_until, until
from .test_server import plugin

#: These tests read the reservations' lines of the server log (class 0200), which PBS's
#: default log_events (511) leaves out: every class is logged here.
EVERY_CLASS = "set server log_events = 2047"
ROOT = Caller(0, ROLE_MANAGER)


@pytest.fixture
def engine(engine):
    engine.pbs("qmgr", "-c", EVERY_CLASS, check=True)
    return engine


@pytest.fixture
def make_engine(make_engine):
    def make(site: str = ""):
        made = make_engine(site)
        made.pbs("qmgr", "-c", EVERY_CLASS, check=True)
        return made

    return make


@pytest.fixture
def inprocess_engine(inprocess_engine):
    inprocess_engine.log.events = 2047
    return inprocess_engine


def _state(engine, resv_id: str) -> str | None:
    return engine.client("stat_resvs").get(resv_id, {}).get("reserve_state")


def test_a_reservation_lives_from_submission_to_its_end(dists, make_engine, engine_root):
    seen = engine_root / "seen"
    engine = make_engine(plugin(dists, "resvwatch", f"""
        @hookimpl
        def resvsub(event):
            event.resv.Reserve_Name = "renamed"

        @hookimpl
        def resv_confirm(event):
            open({str(seen)!r}, "a").write(f"confirm {{event.resv.resv_nodes}}\\n")

        @hookimpl
        def resv_begin(event):
            open({str(seen)!r}, "a").write(f"begin {{event.resv.name}}\\n")

        @hookimpl
        def resv_end(event):
            open({str(seen)!r}, "a").write(f"end {{event.resv.name}}\\n")
        """, ("resvsub", "resv_confirm", "resv_begin", "resv_end")))
    # (10 s ahead: its confirmation and the job's submission come before its start, on a
    # loaded machine too, which took 1.6 s of 3 for them)
    now = int(time.time())
    answer = engine.client("resv_submit", attrs={
        "reserve_start": now + 10, "reserve_end": now + 14, "Reserve_Name": "mine",
        "Resource_List": {"select": "1:ncpus=1"}})
    resv_id = answer["id"]
    assert answer["state"] == "UNCONFIRMED" and resv_id.startswith("R")
    until(lambda: _state(engine, resv_id) == "RESV_CONFIRMED", what="confirmation")
    resv = engine.client("stat_resvs", ids=[resv_id])[resv_id]
    queue = resv_id.split(".")[0]
    assert resv["queue"] == queue and resv["Reserve_Name"] == "renamed"
    assert resv["reserve_duration"] == 4 and resv["Resource_List"]["walltime"] == "00:00:04"
    vnode = resv["resv_nodes"].strip("()").split(":")[0]

    # A job in the reservation's queue waits for the window, then runs inside it.
    job_id = engine.submit("sleep 60\n", queue=queue)
    # (the server's comment on the jobs of a queue not started yet, after a cycle that had
    # the job: a check made after a sleep instead could come before any cycle)
    until(lambda: engine.job(job_id).get("comment") == "Not Running: Queue not started.",
          what="a cycle with the job")
    assert engine.job(job_id)["job_state"] == "Q"
    until(lambda: engine.job(job_id)["job_state"] == "R", timeout=60, what="the job to run")
    assert _state(engine, resv_id) == "RESV_RUNNING"
    assert engine.job(job_id)["exec_vnode"].startswith(f"({vnode}:")
    # (a reservation that asks for no exclusive use leaves its vnode as its jobs make it)
    assert "resv-exclusive" not in engine.client("stat_nodes", names=[vnode])[vnode]["state"]

    # At its end the job is killed, the queue and the reservation go.
    attrs = engine.wait(job_id, timeout=30)
    assert attrs["comment"] == (f"Job deleted: reservation {resv_id} reservation period "
                                "ended")
    until(lambda: resv_id not in engine.client("stat_resvs"), what="the end")
    # PBS's words for it (its mail's; OpenPBS 23.06's server log has no line of its own)
    assert f";{resv_id};Reservation period ended\n" in engine.log()
    until(lambda: queue not in engine.client("stat_queues"), what="the queue to go")
    node = engine.client("stat_nodes", names=[vnode])[vnode]
    assert node["last_used_time"] >= now + 14 and "resv-exclusive" not in node["state"]
    assert seen.read_text() == (f"confirm {resv['resv_nodes']}\nbegin {resv_id}\n"
                                f"end {resv_id}\n")


def test_a_reservation_that_cannot_fit_is_denied(engine):
    now = int(time.time())
    resv_id = engine.client("resv_submit", attrs={
        "reserve_start": now + 60, "reserve_duration": "00:10:00",
        "Resource_List": {"select": "1:ncpus=100000"}})["id"]
    until(lambda: resv_id not in engine.client("stat_resvs"), what="the denial")
    assert f"{resv_id};Reservation denied" in engine.log()


def test_hooks_may_refuse_a_reservation(dists, make_engine):
    engine = make_engine(plugin(dists, "noresv", """
        @hookimpl
        def resvsub(event):
            if event.resv.Reserve_Name == "big":
                event.reject("no reservations on Fridays")

        @hookimpl
        def resv_confirm(event):
            if event.resv.Reserve_Name == "late":
                event.reject("changed my mind")
        """, ("resvsub", "resv_confirm")))
    now = int(time.time())
    with pytest.raises(PbsError) as refused:
        engine.client("resv_submit", attrs={"Reserve_Name": "big", "reserve_start": now + 60,
                                            "reserve_duration": 60})
    assert (refused.value.code, refused.value.message) == (15136, "no reservations on Fridays")
    assert engine.client("stat_resvs") == {}
    late = engine.client("resv_submit", attrs={"Reserve_Name": "late",
                                               "reserve_start": now + 60,
                                               "reserve_duration": 60})["id"]
    until(lambda: late not in engine.client("stat_resvs"), what="the denial")
    assert "Reservation denied: changed my mind" in engine.log()


def test_pbs_rdel_deletes_a_reservation_and_its_queued_jobs(engine):
    now = int(time.time())
    resv_id = engine.client("resv_submit", attrs={"reserve_start": now + 600,
                                                  "reserve_duration": 600})["id"]
    until(lambda: _state(engine, resv_id) == "RESV_CONFIRMED", what="confirmation")
    job_id = engine.submit("true\n", queue=resv_id.split(".")[0])
    done = engine.pbs("pbs_rdel", resv_id.split(".")[0])
    assert done.returncode == 0, done.stderr
    assert engine.client("stat_resvs") == {}
    assert engine.job(job_id)["job_state"] == "F"
    assert engine.job(job_id)["comment"].startswith(f"Job deleted: reservation {resv_id}")
    until(lambda: resv_id.split(".")[0] not in engine.client("stat_queues"),
           what="the queue to go")


def test_reservation_commands_and_bad_input(engine):
    start = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600))
    done = engine.pbs("pbs_rsub", "-R", start, "-D", "00:30:00", "-N", "night",
                      "-l", "select=1:ncpus=1")
    assert done.returncode == 0, done.stderr
    resv_id, state = done.stdout.split()
    assert state == "UNCONFIRMED"
    until(lambda: _state(engine, resv_id) == "RESV_CONFIRMED", what="confirmation")
    table = engine.pbs("pbs_rstat", check=True).stdout.splitlines()
    assert table[0].split()[:4] == ["Resv", "ID", "Queue", "User"]
    owner = f"root@{socket.gethostname().split('.')[0]}"[:8]  # PBS cuts it to 8 columns
    assert table[2].split()[:4] == [resv_id[:10], resv_id.split(".")[0], owner, "CO"]
    full = engine.pbs("pbs_rstat", "-f", resv_id, check=True).stdout
    assert f"Resv ID: {resv_id}\n" in full and "Reserve_Name = night\n" in full
    assert "reserve_state = RESV_CONFIRMED\n" in full and "reserve_duration = 1800\n" in full

    unknown = engine.pbs("pbs_rstat", "R999")
    assert (unknown.returncode, unknown.stderr) == (15084 % 256,
                                                    "pbs_rstat: Unknown Reservation Id R999\n")
    unknown = engine.pbs("pbs_rdel", "R999")
    assert unknown.stderr == "pbs_rdel: Unknown Reservation Id R999\n"
    past = engine.pbs("pbs_rsub", "-R", "197001010000", "-D", "60")
    assert (past.returncode, past.stderr) == (15086 % 256,
                                              "pbs_rsub: Bad time specification(s)\n")
    garbage = engine.pbs("pbs_rsub", "-R", "tomorrow")
    assert garbage.stderr == "pbs_rsub: Bad time specification(s)\n"
    no_end = engine.pbs("pbs_rsub", "-R", start)
    assert no_end.stderr == "pbs_rsub: Bad time specification(s)\n"
    bad_select = engine.pbs("pbs_rsub", "-R", start, "-D", "60", "-l", "select=x:y")
    assert bad_select.stderr == ("pbs_rsub: Illegal attribute or resource value "
                                 "Resource_List.select\n")
    assert set(engine.client("stat_resvs")) == {resv_id}  # nothing else was made


def _resv_queue_r7(eng, users: list[str]) -> None:
    """A running reservation of alice's, R7, and its queue with the ACLs confirmation gives."""
    from pbsplug.engine.reservations import queue_acls

    resv = {"queue": "R7", "Authorized_Users": users, "reserve_state": "RESV_RUNNING",
            "reserve_start": 1, "reserve_end": 2}
    with eng.store.transaction() as st:
        st.put("resv", "R7.srv", resv)
        st.put("queue", "R7", {"queue_type": "Execution", "enabled": True, "started": True,
                               "reservation": "R7.srv", **queue_acls(resv)})


def test_a_job_moved_into_a_reservation_is_checked_against_its_owner(inprocess_engine):
    """Audit: an operator could move any user's job into another user's reservation queue
    (the check read who asked, not whose job). As PBS checks the queue's users against the
    job's owner: only a manager moves another's job there."""
    from pbsplug.engine.server import ROLE_MANAGER, ROLE_OPERATOR, Caller

    eng = inprocess_engine
    _resv_queue_r7(eng, ["alice@*"])
    operator, manager = Caller(0, ROLE_OPERATOR), Caller(0, ROLE_MANAGER)
    with pytest.raises(PbsError) as refused:
        eng._submit_queue(operator, "R7", owner="bob")
    assert refused.value.code == 15007
    assert eng._submit_queue(operator, "R7", owner="alice") == "R7"
    assert eng._submit_queue(manager, "R7", owner="bob") == "R7"


def test_a_manager_not_authorized_submits_nothing_to_a_users_reservation(inprocess_engine):
    """OpenPBS 23.06, checked: root's qsub -q R<n> into a user's reservation is refused
    (15007, 'Unauthorized Request'). pbsplug let managers and operators submit there. An
    entry with ``-`` refuses its user (pbsplug read the names alone, signs and hosts
    left out)."""
    from pbsplug.engine.server import ROLE_MANAGER, ROLE_OPERATOR, ROLE_USER, Caller

    eng = inprocess_engine
    _resv_queue_r7(eng, ["alice@*", "-carol"])
    for role in (ROLE_MANAGER, ROLE_OPERATOR):
        with pytest.raises(PbsError) as refused:
            eng._submit_queue(Caller(0, role), "R7")  # root, not among its users
        assert refused.value.code == 15007, role
    alice, carol = Caller(0, ROLE_USER), Caller(0, ROLE_USER)
    alice.user, carol.user = "alice", "carol"
    assert eng._submit_queue(alice, "R7") == "R7"
    with pytest.raises(PbsError) as refused:
        eng._submit_queue(carol, "R7")
    assert refused.value.code == 15007


def test_pbs_rsub_access_lists_become_the_queues_acls(engine, unix_user):
    """pbs_rsub -U/-G/-H, as OpenPBS 23.06 keeps them (checked): the owner is put into
    Authorized_Users where the list's order puts it; at confirmation the queue gets each
    list as an ACL, switched on, in PBS's order; from then on the queue's ACLs decide (a
    manager's qmgr changes them)."""
    import grp
    import pwd

    from pbsplug.engine import acl

    host = socket.gethostname().split(".")[0]
    group = grp.getgrgid(pwd.getpwnam(unix_user).pw_gid).gr_name
    start = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600))
    done = engine.pbs("pbs_rsub", "-R", start, "-D", "600", "-U", f"zed@*,{unix_user},-nobody",
                      "-G", f"root,{group}", "-H", f"*.example.org,{host}")
    assert done.returncode == 0, done.stderr
    resv_id = done.stdout.split()[0]
    until(lambda: _state(engine, resv_id) == "RESV_CONFIRMED", what="confirmation")
    resv = engine.client("stat_resvs", ids=[resv_id])[resv_id]
    owner = resv["Reserve_Owner"]  # (root@<host>: it precedes the first entry, zed@*)
    assert resv["Authorized_Users"] == [owner, "zed@*", unix_user, "-nobody"]
    assert resv["Authorized_Groups"] == ["root", group]
    queue_name = resv["queue"]
    queue = engine.client("stat_queues")[queue_name]
    assert queue["acl_users"] == sorted(["-nobody", unix_user, owner, "zed@*"],
                                        key=lambda e: e.lstrip("-").split("@")[0])
    assert queue["acl_groups"] == sorted({"root", group})
    assert queue["acl_hosts"] == acl.ordered("host", ["*.example.org", host])
    assert queue["acl_user_enable"] is queue["acl_group_enable"] is \
        queue["acl_host_enable"] is True
    full = engine.pbs("pbs_rstat", "-f", resv_id, check=True).stdout
    assert f"Authorized_Hosts = *.example.org,{host}\n" in full, full

    def submit_as(user: str) -> dict:
        return engine.as_user(user, "submit", attrs={
            "queue": queue_name, "Variable_List": {"PBS_O_WORKDIR": "/tmp"}},
            argv=["/bin/true"])

    assert engine.job(submit_as(unix_user)["result"])["queue"] == queue_name
    assert submit_as("nobody")["error"]["code"] == 15007  # (-nobody)
    engine.pbs("qmgr", "-c", f"set queue {queue_name} acl_users -= {unix_user}", check=True)
    assert submit_as(unix_user)["error"]["code"] == 15007


def test_pbs_rsub_access_lists_bad_input(engine):
    start = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600))
    twice = engine.pbs("pbs_rsub", "-R", start, "-D", "600", "-U", "amy,amy")
    assert (twice.returncode, twice.stderr) == (
        15055 % 256, "pbs_rsub: Duplicate entry in list  Authorized_Users\n")
    for opt, value in (("-G", "bad group"), ("-U", ""), ("-H", "a,,b"), ("-U", ",bob")):
        done = engine.pbs("pbs_rsub", "-R", start, "-D", "600", opt, value)
        assert (done.returncode, done.stderr.splitlines()[0]) == (
            2, f"pbs_rsub: illegal {opt} value"), (opt, value)
    # A sign alone, which OpenPBS takes as the list's answer for everyone it does not
    # name (-U + let every user in), is refused, saying which entry.
    for opt, value, noun in (("-U", "+", "user"), ("-U", "amy,-", "user"),
                             ("-G", "-", "group"), ("-H", "+,h", "host")):
        done = engine.pbs("pbs_rsub", "-R", start, "-D", "600", opt, value)
        sign = "-" if value.endswith("-") or value == "-" else "+"
        assert (done.returncode, done.stderr) == (
            2, f"pbs_rsub: illegal {opt} value: '{sign}' is a sign without a {noun} name\n")
    with pytest.raises(PbsError) as raw:
        engine.client("resv_submit", attrs={"reserve_duration": 60,
                                            "Authorized_Users": ["+"]})
    assert (raw.value.code, raw.value.message) == (
        15014, "Illegal attribute or resource value Authorized_Users")
    with pytest.raises(PbsError) as raw:  # (the server checks what a client could skip)
        engine.client("resv_submit", attrs={"reserve_duration": 60,
                                            "Authorized_Groups": ["a b"]})
    assert raw.value.code == 15014 and "Authorized_Groups" in raw.value.message
    # At most 1,000 entries (ordering a list as PBS does is quadratic: a user's 20,000
    # names held the server 23 s at confirmation).
    with pytest.raises(PbsError) as raw:
        engine.client("resv_submit", attrs={
            "reserve_duration": 60, "Authorized_Users": [f"u{i}" for i in range(1001)]})
    assert (raw.value.code, raw.value.message) == (
        15014, "Illegal attribute or resource value Authorized_Users")
    assert engine.client("stat_resvs") == {}


def test_pbs_rsub_keeps_each_entrys_one_sign(engine):
    """One character is the sign, as OpenPBS 23.06's pbs_rsub and server read it (checked):
    ``--`` refuses a user named ``-``, ``+-`` lets one in; every sign given is kept."""
    for hours, (opt, value, attr, kept) in enumerate((
            ("-U", "+amy,-bob", "Authorized_Users", ["+amy", "-bob"]),
            ("-U", "--", "Authorized_Users", ["--"]), ("-U", "+-", "Authorized_Users", ["+-"]),
            ("-U", "-+,++bob", "Authorized_Users", ["++bob", "-+"]),
            ("-G", "--,+root", "Authorized_Groups", ["--", "+root"]),
            ("-H", "+-,-other", "Authorized_Hosts", ["+-", "-other"])), start=1):
        start = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600 * hours))
        done = engine.pbs("pbs_rsub", "-R", start, "-D", "600", opt, value)
        assert done.returncode == 0, (opt, value, done.stderr)
        resv = next(iter(engine.client("stat_resvs", ids=[done.stdout.split()[0]]).values()))
        owner = resv["Reserve_Owner"]
        got = [e for e in resv[attr] if e != owner]
        assert sorted(got) == sorted(kept), (opt, value, resv[attr])


def test_the_owner_and_older_reservations_pass_the_lists_limit(engine_here):
    """1,000 names and the owner make 1,001: the owner is let in (the limit is on what a
    user gives); a reservation stored before the limit, with more, is still confirmed
    (it raised at every confirmation, and cut off the others' decisions)."""
    from pbsplug.scheduler.model import ResvDecision

    eng = engine_here()
    user = Caller(1001, ROLE_USER)
    made = eng.req_resv_submit(user, {"reserve_duration": 600,
                                      "reserve_start": int(eng.clock()) + 7200,
                                      "Authorized_Users": [f"u{i}" for i in range(1000)]})
    resv_id = made["id"]
    stored = eng.store.get("resv", resv_id)
    assert len(stored["Authorized_Users"]) == 1001
    assert f"{user.user}@{eng.host}" in stored["Authorized_Users"]
    with eng.store.transaction() as st:  # (as a pbsplug before the limit stored it,
        st.put("resv", resv_id, {**stored, "Authorized_Users": [  # with no queue yet)
            *stored["Authorized_Users"], "v1", "v2"]})
        st.delete("queue", stored["queue"])
    eng.resvs.decide([ResvDecision(resv_id, True, f"({eng.host}:ncpus=1)",
                                   partition="pbs-default")])
    resv = eng.store.get("resv", resv_id)
    assert resv["reserve_state"] == "RESV_CONFIRMED"
    assert len(eng.store.get("queue", resv["queue"])["acl_users"]) == 1003


def test_a_reservation_queue_from_before_acls_is_given_them(engine_here):
    """A reservation queue stored by a pbsplug that checked its users itself (no ACLs on
    it) is given them when the server starts, so its users keep it to themselves."""
    first = engine_here()
    with first.store.transaction() as st:
        st.put("resv", "R7.srv", {"queue": "R7", "Authorized_Users": ["alice@*"],
                                  "reserve_state": "RESV_CONFIRMED", "reserve_start": 1,
                                  "reserve_end": 2})
        st.put("queue", "R7", {"queue_type": "Execution", "enabled": True,
                               "started": False, "reservation": "R7.srv"})
        st.db.execute("DELETE FROM meta WHERE key = 'resv_queue_acls_given'")  # (as before)
    first.close()
    second = engine_here()
    queue = second.store.get("queue", "R7")
    assert queue["acl_users"] == ["alice@*"] and queue["acl_user_enable"] is True
    # Once only: a manager who unsets the switch and changes the list keeps it so.
    for text in ("unset queue R7 acl_user_enable", "set queue R7 acl_users += bob"):
        assert second.req_qmgr(Caller(0, ROLE_MANAGER), text)["code"] == 0, text
    second.close()
    queue = engine_here().store.get("queue", "R7")
    assert "acl_user_enable" not in queue and queue["acl_users"] == ["alice@*", "bob"]


def test_a_reservation_does_not_take_a_queue_of_its_name(engine):
    """Audit: a reservation confirmed over a manager's queue named as it (R<n>) took it,
    and its end deleted that queue's jobs and the queue. It is denied now."""
    first = engine.submit("true\n", Hold_Types="u")
    # (jobs and reservations share the numbers: `kept` takes the next, the reservation
    # the one after)
    name = f"R{int(first.split('.')[0]) + 2}"
    engine.client("qmgr", text=f"create queue {name} queue_type = execution, enabled = true,"
                               " started = true")
    kept = engine.submit("true\n", queue=name, Hold_Types="u")
    start = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600))
    done = engine.pbs("pbs_rsub", "-R", start, "-D", "00:10:00", "-l", "select=1:ncpus=1")
    assert done.returncode == 0, done.stderr
    resv_id = done.stdout.split()[0]
    assert resv_id.split(".")[0] == name, (resv_id, name)
    until(lambda: resv_id not in engine.client("stat_resvs"), what="the denial")
    assert f"Reservation denied: queue {name} already exists" in engine.log()
    assert engine.job(kept)["queue"] == name and engine.job(kept)["job_state"] == "H"
    assert name in engine.client("stat_queues")


def test_a_job_left_queued_in_an_ended_reservations_queue_is_deleted_with_it(
        inprocess_engine):
    """Audit: a job requeued while it was being killed at the reservation's end (a hook's
    rerun, a qrerun) was left Q in the queue the server then removed, for ever."""
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    eng = inprocess_engine
    job_id = eng.req_submit(Caller(0, ROLE_MANAGER), {"Hold_Types": "u"}, "true\n")
    with eng.store.transaction() as st:
        st.put("queue", "R9", {"queue_type": "Execution", "enabled": True, "started": True,
                               "reservation": "R9.srv"})
    attrs = eng.store.job(job_id)
    attrs["queue"] = "R9"
    with eng.store.transaction() as st:
        st.put_job(job_id, attrs)
    eng.resvs.leftover_queues.add("R9")
    eng.resvs._drop_empty_queues()
    assert eng.store.job(job_id)["job_state"] == "F"
    assert eng.store.get("queue", "R9") is None


def test_a_reservation_whose_vnodes_text_would_pass_1_mib_is_denied(engine):
    """Audit: select=100000:ncpus=0 was confirmed with a resv_nodes of 1.3 MB, which the
    next start set aside as a bad row (and every cycle read all of it again)."""
    start = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600))
    done = engine.pbs("pbs_rsub", "-R", start, "-D", "00:10:00",
                      "-l", "select=100000:ncpus=0")
    assert done.returncode == 0, done.stderr
    resv_id = done.stdout.split()[0]
    until(lambda: resv_id not in engine.client("stat_resvs"), what="the denial")
    assert "resv_nodes) is longer than 1048576 characters" in engine.log()


def test_resv_enable_false_refuses_reservations_and_keeps_them_off_a_vnode(engine):
    """Audit: both were ignored. OpenPBS 23.06: with the server's false, pbs_rsub prints
    'pbs_rsub: reservations disallowed on vm' (15094, status 246); with a vnode's false,
    no reservation is placed there (here, the only vnode: denied)."""
    start = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600))
    rsub = ("pbs_rsub", "-R", start, "-D", "00:10:00", "-l", "select=1:ncpus=1")
    engine.client("qmgr", text="set server resv_enable = False")
    done = engine.pbs(*rsub)
    assert done.returncode == 15094 % 256, done.stderr
    assert done.stderr.startswith("pbs_rsub: reservations disallowed on "), done.stderr
    assert engine.client("stat_resvs") == {}
    engine.client("qmgr", text="set server resv_enable = True")
    for vnode in engine.client("stat_nodes"):
        engine.client("qmgr", text=f"set node {vnode} resv_enable = False")
    done = engine.pbs(*rsub)
    assert done.returncode == 0, done.stderr
    resv_id = done.stdout.split()[0]
    until(lambda: resv_id not in engine.client("stat_resvs"), what="the denial")


def test_one_reservation_that_cannot_be_decided_does_not_stop_the_others(engine_here,
                                                                         monkeypatch):
    """A reservation whose confirmation raised (a list past the limit did) cut off the
    decisions after it in the batch, and the cycle's job starts with them, every cycle. It
    is logged and tried again next cycle; the others are decided."""
    from pbsplug.engine import reservations
    from pbsplug.scheduler.model import ResvDecision

    eng = engine_here()
    user = Caller(1001, ROLE_USER)
    start = int(eng.clock()) + 7200
    bad, good = (eng.req_resv_submit(user, {"reserve_duration": 600, "reserve_start": start,
                                            "Reserve_Name": name})["id"]
                 for name in ("bad", "good"))
    real = reservations.Reservation

    def breaks_on_bad(name, attrs):
        if attrs.get("Reserve_Name") == "bad":
            raise RuntimeError("boom")
        return real(name, attrs)

    monkeypatch.setattr(reservations, "Reservation", breaks_on_bad)
    eng.resvs.decide([ResvDecision(resv_id, True, f"({eng.host}:ncpus=1)",
                                   partition="pbs-default") for resv_id in (bad, good)])
    assert eng.store.get("resv", good)["reserve_state"] == "RESV_CONFIRMED"
    assert eng.store.get("resv", bad)["reserve_state"] == "RESV_UNCONFIRMED"
    assert eng.store.get("queue", bad.split(".")[0])["enabled"] is False  # (as submitted)
    log = "".join(p.read_text() for p in eng.home.logs.iterdir())
    assert f"{bad};deciding it failed, tried again next cycle: RuntimeError: boom" in log



def test_a_reservation_time_in_other_scripts_digits_is_a_bad_time(inprocess_engine):
    """int() read a reserve_start of Arabic-Indic digits as the epoch they spell, and the
    reservation was made; pbs_rsub's times are ASCII digits."""
    user = Caller(65534, ROLE_USER)
    start = int(time.time()) + 3600
    other = str(start).translate({ord(d): 0x0660 + int(d) for d in "0123456789"})
    for attrs in ({"reserve_start": other, "reserve_end": start + 60},
                  {"reserve_start": start, "reserve_end": f"{start + 6}_0"}):
        with pytest.raises(PbsError) as bad:
            inprocess_engine.req_resv_submit(user, attrs)
        assert bad.value.code == 15086  # PBS's Bad time specification(s)
    made = inprocess_engine.req_resv_submit(user, {"reserve_start": str(start),
                                                   "reserve_end": start + 60})
    assert made["state"] == "UNCONFIRMED"


def _vnodes_of_three(engine) -> None:
    """The auto vnodes offline; r1 and r2 of 2 cpus (default sharing), r3 of 2 cpus whose
    sharing is force_excl."""
    for name in engine.client("stat_nodes"):
        engine.client("node_state", names=[name], offline=True)
    for name in ("r1", "r2", "r3"):
        engine.pbs("qmgr", "-c", f"create node {name} resources_available.ncpus = 2",
                   check=True)
    engine.pbs("qmgr", "-c", "set node r3 sharing = force_excl", check=True)


def _running_resv(engine, select: str, place: str | None = None) -> tuple[str, str]:
    """A reservation of `select` (and `place`) that begins at once: its id and queue."""
    now = int(time.time())
    res = {"select": select, **({"place": place} if place else {})}
    resv_id = engine.client("resv_submit", attrs={
        "reserve_start": now + 1, "reserve_end": now + 600, "Resource_List": res})["id"]
    until(lambda: _state(engine, resv_id) == "RESV_RUNNING", what=f"{resv_id} to begin")
    return resv_id, resv_id.split(".")[0]


def test_a_running_reservations_vnodes_are_resv_exclusive_only_where_pbs_makes_them(engine):
    """As OpenPBS 23.06 (checked): a plain reservation's vnode stays free, and job-busy
    once its jobs take every cpu; one asking for place=excl makes its vnode resv-exclusive,
    as does a vnode whose sharing forces it; the states are listed in PBS's order."""
    _vnodes_of_three(engine)
    _, plain = _running_resv(engine, "1:ncpus=2:vnode=r1")
    _running_resv(engine, "1:ncpus=1:vnode=r2", place="excl")
    _, forced = _running_resv(engine, "1:ncpus=1:vnode=r3")

    def states() -> dict[str, str]:
        nodes = engine.client("stat_nodes", names=["r1", "r2", "r3"])
        return {name: row["state"] for name, row in nodes.items()}

    assert states() == {"r1": "free", "r2": "resv-exclusive", "r3": "resv-exclusive"}
    jobs = [engine.submit("sleep 300\n", queue=plain, Resource_List={"select": "1:ncpus=2"}),
            engine.submit("sleep 300\n", queue=forced, Resource_List={"select": "1:ncpus=1"})]
    for job_id in jobs:
        engine.wait(job_id, "R")
    assert states() == {"r1": "job-busy", "r2": "resv-exclusive",
                        "r3": "job-exclusive,resv-exclusive"}
    engine.client("delete", ids=jobs)
    engine.pbs("pbs_rdel", *engine.client("stat_resvs"), check=True)


def test_pbsnodes_and_qmgr_list_a_vnodes_confirmed_and_running_reservations(engine):
    """As OpenPBS 23.06 (checked): ``resv = R3.s, R2.s`` from a reservation's confirmation
    to its end, the latest first; none while it is unconfirmed; one string in JSON."""
    _vnodes_of_three(engine)
    engine.pbs("qmgr", "-c", "set server scheduling = False", check=True)
    now = int(time.time())
    later = engine.client("resv_submit", attrs={
        "reserve_start": now + 3600, "reserve_end": now + 7200,
        "Resource_List": {"select": "1:ncpus=1:vnode=r1"}})["id"]
    assert "resv" not in engine.client("stat_nodes", names=["r1"])["r1"]
    assert "resv =" not in engine.pbs("pbsnodes", "-v", "r1", check=True).stdout
    engine.pbs("qmgr", "-c", "set server scheduling = True", check=True)
    until(lambda: _state(engine, later) == "RESV_CONFIRMED", what="confirmation")
    running, _ = _running_resv(engine, "1:ncpus=1:vnode=r1")
    both = f"{running}, {later}"
    assert f"     resv = {both}\n" in engine.pbs("pbsnodes", "-v", "r1", check=True).stdout
    assert f"    resv = {both}\n" in engine.pbs("qmgr", "-c", "list node r1",
                                               check=True).stdout
    doc = json.loads(engine.pbs("pbsnodes", "-av", "-F", "json", check=True).stdout)
    assert doc["nodes"]["r1"]["resv"] == both and "resv" not in doc["nodes"]["r2"]
    engine.pbs("pbs_rdel", running, check=True)
    assert engine.client("stat_nodes", names=["r1"])["r1"]["resv"] == [later]
    engine.pbs("pbs_rdel", later, check=True)
    assert "resv" not in engine.client("stat_nodes", names=["r1"])["r1"]


def test_pbs_rstat_lists_a_reservation_as_openpbs(engine):
    """pbs_rstat -B and -f print what OpenPBS 23.06's print for `pbs_rsub -l
    select=1:ncpus=2` (checked attribute by attribute): the select's sums and place=free
    beside it (place after select), schedselect, PBS_O_HOST from pbs_rsub, egroup and
    reserve_count; the queue's name while unconfirmed, and no reserve_type."""
    engine.pbs("qmgr", "-c", "set server scheduling = False", check=True)
    start = time.strftime("%H%M", time.localtime(time.time() + 7200))
    done = engine.pbs("pbs_rsub", "-R", start, "-D", "600", "-l", "select=1:ncpus=2",
                      check=True)
    resv_id = done.stdout.split()[0]
    queue, host = resv_id.split(".")[0], socket.gethostname().split(".")[0]
    group, server = grp.getgrgid(os.getgid()).gr_name, engine.client("status")["server"]
    user = pwd.getpwuid(os.getuid()).pw_name
    env = engine.env()  # (what pbs_rsub sends: PBS_O_HOST, and these only when set)
    variables = ",".join(f"{name}={value}" for name, value in (
        ("PBS_O_LOGNAME", env.get("LOGNAME")), ("PBS_O_HOST", host),
        ("PBS_O_MAIL", env.get("MAIL")), ("PBS_TZID", env.get("PBS_TZID")))
        if value is not None)
    assert engine.pbs("pbs_rstat", "-B", check=True).stdout == f"Resv ID: {resv_id}\n"

    def full(state: str, substate: int, more: str = "", after: str = "") -> str:
        resv = engine.client("stat_resvs", ids=[resv_id])[resv_id]
        when = {k: time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(resv[k]))
                for k in ("reserve_start", "reserve_end", "ctime", "mtime")}
        return (f"Resv ID: {resv_id}\nReserve_Name = NULL\nReserve_Owner = {user}@{host}\n"
                f"reserve_state = {state}\nreserve_substate = {substate}\n"
                f"reserve_start = {when['reserve_start']}\n"
                f"reserve_end = {when['reserve_end']}\nreserve_duration = 600\n"
                f"queue = {queue}\nResource_List.ncpus = 2\nResource_List.nodect = 1\n"
                "Resource_List.select = 1:ncpus=2\nResource_List.place = free\n"
                "Resource_List.walltime = 00:10:00\nschedselect = 1:ncpus=2\n"
                f"{more}Authorized_Users = {user}@{host}\nserver = {server}\n"
                f"ctime = {when['ctime']}\nmtime = {when['mtime']}\n"
                f"Variable_List = {variables}\neuser = {user}\negroup = {group}\n"
                f"reserve_count = 1\n{after}\n")

    assert engine.pbs("pbs_rstat", "-f", check=True).stdout == full("RESV_UNCONFIRMED", 1)
    engine.pbs("qmgr", "-c", "set server scheduling = True", check=True)
    until(lambda: _state(engine, resv_id) == "RESV_CONFIRMED", what="confirmation")
    nodes = engine.client("stat_resvs")[resv_id]["resv_nodes"]
    assert engine.pbs("pbs_rstat", "-f", resv_id, check=True).stdout == full(
        "RESV_CONFIRMED", 2, f"resv_nodes = {nodes}\n", "partition = pbs-default\n")


def _when(seconds: float) -> str:
    return time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + seconds))


def test_a_reservations_queue_is_made_at_submission_disabled(engine):
    """OpenPBS 23.06, checked: pbs_rsub makes the queue R<n> at once, disabled and stopped,
    with the ACLs and a resources_available and resources_max of each amount asked for;
    confirmation enables it; the reservation's events are logged in their own class
    (0200), in PBS's words. pbsplug made the queue at confirmation."""
    engine.client("qmgr", text="set server scheduling = False")
    done = engine.pbs("pbs_rsub", "-R", _when(3600), "-D", "600", "-l",
                      "select=2:ncpus=1:mem=10mb")
    resv_id = done.stdout.split()[0]
    queue = resv_id.split(".")[0]
    made = engine.client("stat_queues")[queue]
    assert (made["enabled"], made["started"], made["acl_user_enable"]) == (False, False, True)
    assert made["resources_max"] == made["resources_available"] == {"ncpus": 2, "mem": "20mb"}
    job = engine.pbs("qsub", "-q", queue, "--", "/bin/true")
    assert job.returncode != 0 and "Queue is not enabled" in job.stderr, job.stderr
    assert re.search(rf";0200;Server@[^;]+;Resv;{re.escape(resv_id)};New reservation "
                     r"submitted start=\w{3} \w{3} \d\d \d\d:\d\d:\d\d \d{4} end=",
                     engine.log()), engine.log()
    engine.client("qmgr", text="set server scheduling = True")
    until(lambda: _state(engine, resv_id) == "RESV_CONFIRMED", what="confirmation")
    assert engine.client("stat_queues")[queue]["enabled"] is True
    assert f";0200;Server@{engine.client('status')['server'].split('.')[0]};Resv;" \
           f"{resv_id};Reservation confirmed\n" in engine.log()
    engine.pbs("pbs_rdel", resv_id, check=True)
    until(lambda: queue not in engine.client("stat_queues"), what="the queue to go")


def test_a_denied_reservations_queue_goes_with_it(engine):
    resv_id = engine.client("resv_submit", attrs={
        "reserve_start": int(time.time()) + 60, "reserve_duration": 600,
        "Resource_List": {"select": "1:ncpus=100000"}})["id"]
    until(lambda: resv_id not in engine.client("stat_resvs"), what="the denial")
    assert resv_id.split(".")[0] not in engine.client("stat_queues")


def test_the_servers_resources_default_complete_a_reservations_request(engine):
    """OpenPBS 23.06, checked: resources_default.mem = 10mb gives a reservation asking no
    mem Resource_List.mem = 10mb; the select's sums (ncpus) and the window's walltime
    come first. resources_max refuses nothing at pbs_rsub (checked)."""
    engine.client("qmgr", text="set server resources_default.mem = 10mb")
    engine.client("qmgr", text="set server resources_default.ncpus = 3")
    engine.client("qmgr", text="set server resources_default.walltime = 01:00:00")
    engine.client("qmgr", text="set server resources_max.ncpus = 1")
    try:
        done = engine.pbs("pbs_rsub", "-R", _when(3600), "-D", "600", "-l", "select=2:ncpus=1")
        assert done.returncode == 0, done.stderr
        resv_id = done.stdout.split()[0]
        res = engine.client("stat_resvs", ids=[resv_id])[resv_id]["Resource_List"]
        assert (res["mem"], res["ncpus"], res["walltime"]) == ("10mb", 2, "00:10:00")
        queue = engine.client("stat_queues")[resv_id.split(".")[0]]
        assert queue["resources_max"]["mem"] == "10mb"
    finally:
        for name in ("resources_default", "resources_max"):
            engine.client("qmgr", text=f"unset server {name}")


def test_a_running_reservation_counts_in_its_vnodes_resources_assigned(engine):
    """OpenPBS 23.06, checked: a confirmed reservation adds nothing to its vnode's
    resources_assigned; from its start it adds what resv_nodes holds, and a job running
    inside it adds nothing more. pbsplug counted jobs only."""
    now = int(time.time())  # (10 s ahead: confirmed and looked at before its start)
    resv_id = engine.client("resv_submit", attrs={
        "reserve_start": now + 10, "reserve_duration": 600,
        "Resource_List": {"select": "1:ncpus=1"}})["id"]
    until(lambda: _state(engine, resv_id) == "RESV_CONFIRMED", what="confirmation")
    vnode = engine.client("stat_resvs", ids=[resv_id])[resv_id]["resv_nodes"].strip(
        "()").split(":")[0]

    def ncpus() -> int:
        row = engine.client("stat_nodes", names=[vnode])[vnode]
        return int((row.get("resources_assigned") or {}).get("ncpus", 0))

    assert ncpus() == 0
    until(lambda: _state(engine, resv_id) == "RESV_RUNNING", timeout=60, what="the start")
    assert ncpus() == 1
    job_id = engine.submit("sleep 60\n", queue=resv_id.split(".")[0])
    until(lambda: engine.job(job_id)["job_state"] == "R", what="the job to run")
    assert ncpus() == 1
    engine.pbs("pbs_rdel", resv_id, check=True)
    until(lambda: resv_id not in engine.client("stat_resvs"), what="the end")
    assert ncpus() == 0


def test_an_ended_reservation_is_listed_being_deleted_while_its_jobs_go(engine):
    """OpenPBS 23.06, checked: at its end a reservation whose jobs are being killed is
    listed as RESV_BEING_DELETED (pbs_rstat's BD), its queue disabled and stopped, and goes
    once they are gone (PBS looks again every 30 s); one with no job goes at once."""
    # (the job outlives its SIGTERM: it is killed kill_delay, 10 s, later)
    now = int(time.time())
    resv_id = engine.client("resv_submit", attrs={
        "reserve_start": now + 3, "reserve_duration": 600,
        "Resource_List": {"select": "1:ncpus=1"}})["id"]
    queue = resv_id.split(".")[0]
    until(lambda: _state(engine, resv_id) == "RESV_RUNNING", what="the start")
    ready = engine.root / "trapped"
    job_id = engine.submit(f"trap '' TERM; touch {ready}; sleep 60 & wait; sleep 60\n",
                           queue=queue)
    until(ready.exists, what="the job to trap SIGTERM")
    engine.pbs("pbs_rdel", resv_id, check=True)
    assert _state(engine, resv_id) == "RESV_BEING_DELETED"
    row = engine.pbs("pbs_rstat", check=True).stdout.splitlines()[2].split()
    assert row[:4] == [resv_id[:10], queue, row[2], "BD"]
    kept = engine.client("stat_queues")[queue]
    assert (kept["enabled"], kept["started"]) == (False, False)
    again = engine.pbs("pbs_rdel", resv_id)
    assert again.returncode == 0, again.stderr
    # (PBS's pbs_ralter -N of one being deleted: taken, checked; a new window: pbsplug's
    # refusal)
    engine.pbs("pbs_ralter", "-N", "late", resv_id, check=True)
    late = engine.pbs("pbs_ralter", "-D", "60", resv_id)
    assert (late.returncode, late.stderr) == (168, "pbs_ralter: Request invalid for state "
                                                   "of job\n")
    refused = engine.pbs("qsub", "-q", queue, "--", "/bin/true")
    assert (refused.returncode, refused.stderr) == (173, "qsub: Queue is not enabled\n")
    engine.pbs("qdel", "-W", "force", job_id)
    until(lambda: resv_id not in engine.client("stat_resvs"), what="the reservation")
    assert queue not in engine.client("stat_queues")


def test_pbs_ralter_as_openpbs(engine):
    """OpenPBS 23.06's pbs_ralter, checked: each change prints `pbs_ralter: <id> ALTER
    REQUESTED`; a new start keeps the end, a duration moves it; the access lists replace
    the old ones (the queue's ACLs with them); its usage errors and refusals."""
    engine.client("qmgr", text="set server scheduling = False")
    start = time.time() + 3600
    resv_id = engine.pbs("pbs_rsub", "-R", _when(3600), "-D", "600", "-l",
                         "select=1:ncpus=1", check=True).stdout.split()[0]
    queue = resv_id.split(".")[0]

    def resv() -> dict:
        return engine.client("stat_resvs", ids=[resv_id])[resv_id]

    done = engine.pbs("pbs_ralter", "-D", "00:20:00", resv_id)
    assert (done.returncode, done.stdout) == (0, f"pbs_ralter: {resv_id} ALTER REQUESTED\n")
    assert resv()["reserve_end"] - resv()["reserve_start"] == 1200 == resv()["reserve_duration"]
    assert resv()["Resource_List"]["walltime"] == "00:20:00"
    assert f";Resv;{resv_id};Attempting to modify reservation end=" in engine.log()
    for argv, status, err in (
            ((resv_id,), 0, ""),  # (nothing to change: taken, as PBS's, checked)
            (("-D", "60", "R999999"), 236, "pbs_ralter: Unknown Reservation Id\n"),
            (("-R", _when(-600), resv_id), 238, "pbs_ralter: Bad time specification(s)\n"),
            (("-R", _when(4000), "-E", _when(3900), resv_id), 238,
             "pbs_ralter: Bad time specification(s)\n"),
            (("-l", "ncpus=1", resv_id), 2, "pbs_ralter -l only allows for select\n"),
            (("-W", "nosuch", resv_id), 2, "pbs_ralter: illegal -W value\n"),
            (("-l", "select=1:ncpus=2", resv_id), 79, "pbs_ralter: New select must be made "
             "up of a subset of the original chunks\n")):
        done = engine.pbs("pbs_ralter", *argv)
        assert (done.returncode, done.stderr.split("usage:")[0]) == (status, err), argv
    engine.client("qmgr", text="set server scheduling = True")
    until(lambda: resv()["reserve_state"] == "RESV_CONFIRMED", what="confirmation")
    for argv in (("-N", "renamed"), ("-m", "abe", "-M", "root@localhost"),
                 ("-U", "+root,+nobody"), ("-G", "+root")):
        engine.pbs("pbs_ralter", *argv, resv_id, check=True)
    got = resv()
    assert (got["Reserve_Name"], got["Mail_Points"], got["Mail_Users"]) == (
        "renamed", "abe", "root@localhost")
    assert (got["Authorized_Users"], got["Authorized_Groups"]) == (["+nobody", "+root"],
                                                                   ["+root"])
    acls = engine.client("stat_queues")[queue]
    assert (acls["acl_users"], acls["acl_groups"], acls["acl_group_enable"]) == (
        ["+nobody", "+root"], ["+root"], True)
    end = got["reserve_end"]
    engine.pbs("pbs_ralter", "-R", time.strftime("%Y%m%d%H%M.%S", time.localtime(
        start + 60)), resv_id, check=True)
    assert (resv()["reserve_start"], resv()["reserve_end"]) == (int(start) + 60, end)
    assert (resv()["reserve_state"], resv()["schedselect_orig"]) == ("RESV_CONFIRMED",
                                                                     "1:ncpus=1")
    done = engine.pbs("pbs_ralter", "-I", "5", "-D", "00:30:00", resv_id, check=True)
    assert done.stdout == f"pbs_ralter: {resv_id} CONFIRMED\n"  # (-I: PBS's, checked)
    assert (resv()["reserve_duration"], resv()["interactive"]) == (1800, 5)
    assert f";Resv;{resv_id};Reservation alter confirmed\n" in engine.log()


def test_pbs_ralter_of_a_confirmed_reservation_is_confirmed_again_or_put_back(
        inprocess_engine):
    """OpenPBS 23.06, checked: a new window its vnodes cannot hold (another reservation
    has them then) is denied, the old one kept (`Reservation alter denied`); with -W force
    it is taken all the same. Only its owner, an operator or a manager may alter it."""
    eng = inprocess_engine
    root, user = Caller(0, ROLE_MANAGER), Caller(1001, ROLE_USER)
    vnode = next(iter(eng.store.all("node")))
    ncpus = eng.store.get("node", vnode)["resources_available"]["ncpus"]
    now = int(eng.clock())
    rows = {}
    for name, start, cpus in (("mine", now + 3600, 1), ("full", now + 7200, ncpus)):
        made = eng.req_resv_submit(root, {"reserve_start": start, "reserve_duration": 600,
                                          "Reserve_Name": name,
                                          "Resource_List": {"select": f"1:ncpus={cpus}"}})
        rows[name] = made["id"]
        attrs = eng.store.get("resv", made["id"])
        attrs.update(reserve_state="RESV_CONFIRMED", reserve_substate=2,
                     resv_nodes=f"({vnode}:ncpus={cpus})")
        with eng.store.transaction() as st:
            st.put("resv", made["id"], attrs)
    mine = rows["mine"]
    with pytest.raises(PbsError) as refused:
        eng.req_resv_alter(user, mine, {"Reserve_Name": "x"})
    assert (refused.value.code, refused.value.message) == (15007, "Unauthorized Request")
    assert eng.req_resv_alter(root, mine, {"reserve_start": now + 7000,
                                           "reserve_end": now + 7500}) == {
        "id": mine, "state": "DENIED"}
    kept = eng.store.get("resv", mine)
    assert (kept["reserve_start"], kept["reserve_end"]) == (now + 3600, now + 4200)
    log = "".join(p.read_text() for p in eng.home.logs.iterdir())
    assert f";Resv;{mine};Reservation alter denied\n" in log
    eng.req_resv_alter(root, mine, {"reserve_start": now + 7000, "reserve_end": now + 7500},
                       force=True)
    moved = eng.store.get("resv", mine)
    assert (moved["reserve_start"], moved["reserve_end"]) == (now + 7000, now + 7500)


def test_pbs_ralter_of_a_running_reservation(engine):
    """OpenPBS 23.06, checked: the start of a running reservation with a job in its queue
    does not move (`Reservation not empty`, 15178, exit 74); its end does."""
    resv_id = engine.client("resv_submit", attrs={
        "reserve_start": int(time.time()) + 3, "reserve_duration": 600,
        "Resource_List": {"select": "1:ncpus=1"}})["id"]
    until(lambda: _state(engine, resv_id) == "RESV_RUNNING", what="the start")
    engine.submit("sleep 60\n", queue=resv_id.split(".")[0])
    done = engine.pbs("pbs_ralter", "-R", _when(60), resv_id)
    assert (done.returncode, done.stderr) == (74, "pbs_ralter: Reservation not empty\n")
    end = int(time.time()) + 300  # (the clock read once: -E names this very second)
    engine.pbs("pbs_ralter", "-E", time.strftime("%Y%m%d%H%M.%S", time.localtime(end)),
               resv_id, check=True)
    got = engine.client("stat_resvs", ids=[resv_id])[resv_id]
    assert (got["reserve_state"], got["reserve_end"]) == ("RESV_RUNNING", end)


def test_pbs_ralter_select_keeps_a_subset_of_the_chunks(inprocess_engine):
    """OpenPBS 23.06's rule (checked: a larger chunk is 15183): a new select is made of the
    old one's chunks, fewer of some; a confirmed reservation keeps the vnodes of the
    chunks it keeps, and its sums follow."""
    eng = inprocess_engine
    root = Caller(0, ROLE_MANAGER)
    vnode = next(iter(eng.store.all("node")))
    made = eng.req_resv_submit(root, {"reserve_start": int(eng.clock()) + 3600,
                                      "reserve_duration": 600, "Resource_List": {
                                          "select": "2:ncpus=1+1:ncpus=1:mem=1mb"}})["id"]
    attrs = eng.store.get("resv", made)
    attrs.update(reserve_state="RESV_CONFIRMED", reserve_substate=2,
                 resv_nodes=f"({vnode}:ncpus=1)+({vnode}:ncpus=1)+({vnode}:ncpus=1:mem=1024kb)")
    with eng.store.transaction() as st:
        st.put("resv", made, attrs)
    with pytest.raises(PbsError) as refused:
        eng.req_resv_alter(root, made, {"select": "3:ncpus=1"})
    assert refused.value.code == 15183
    eng.req_resv_alter(root, made, {"select": "1:ncpus=1:mem=1mb"})
    got = eng.store.get("resv", made)
    assert got["Resource_List"]["select"] == "1:ncpus=1:mem=1mb"
    assert (got["Resource_List"]["ncpus"], got["Resource_List"]["nodect"]) == (1, 1)
    assert got["resv_nodes"] == f"({vnode}:ncpus=1:mem=1024kb)"


def _rsub_tz(engine, *args: str, tz: str | None = "UTC"):
    """pbs_rsub ARGS with PBS_TZID set to `tz` (unset with None)."""
    import subprocess

    from pbsplug.engine.testing import PBSPLUG

    env = {k: v for k, v in engine.env().items() if k != "PBS_TZID"}
    if tz is not None:
        env["PBS_TZID"] = tz
    return subprocess.run([PBSPLUG, "pbs_rsub", *args], capture_output=True, text=True,
                          env=env, cwd=engine.work, timeout=120)


def test_standing_reservations_are_submitted_as_openpbs(engine):
    """OpenPBS 23.06, checked: pbs_rsub -r takes an iCalendar rule (its parts, its errors,
    PBS_TZID required); the reservation is S<n> (R<n> for one occurrence), with
    reserve_rrule and reserve_count, and reserve_index once confirmed."""
    start = _when(3600)
    for rule, duration, status, err in (
            ("FREQ=DAILY", "30", 30, "Undefined iCalendar syntax. A valid COUNT or UNTIL "
                                     "is required"),
            ("FREQ=MONTHLY;BYMONTHDAY=1;COUNT=2", "30", 29, "Undefined iCalendar syntax"),
            ("FREQ=WEEKLY;BYDAY=-1FR;COUNT=2", "30", 29, "Undefined iCalendar syntax"),
            ("FREQ=DAILY;COUNT=2;UNTIL=20301231", "30", 29, "Undefined iCalendar syntax"),
            ("RRULE:FREQ=DAILY;COUNT=2", "30", 29, "Undefined iCalendar syntax"),
            ("FREQ=DAILY;COUNT=0", "30", 29, "Undefined iCalendar syntax"),
            ("FREQ=SECONDLY;COUNT=2", "30", 28, "SECONDLY recurrence duration cannot exceed "
                                                "1 second"),
            ("FREQ=DAILY;COUNT=2", "25:00:00", 25, "DAILY recurrence duration cannot exceed "
                                                   "24 hours")):
        done = _rsub_tz(engine, "-r", rule, "-R", start, "-D", duration)
        assert (done.returncode, done.stderr) == (status, f"pbs_rsub: {err}\n"), rule
    done = _rsub_tz(engine, "-r", "FREQ=DAILY;COUNT=2", "-R", start, "-D", "30", tz=None)
    assert (done.returncode, done.stderr) == (2, "pbs_rsub error: a valid PBS_TZID timezone "
                                                 "environment variable is required.\n")
    done = _rsub_tz(engine, "-r", "FREQ=DAILY;COUNT=2", "-R", start, "-D", "30",
                    tz="Nowhere/Nothing")
    assert (done.returncode, done.stderr) == (
        31, "pbs_rsub: Unrecognized PBS_TZID environment variable\n")
    assert engine.client("stat_resvs") == {}

    one = _rsub_tz(engine, "-r", "FREQ=DAILY;COUNT=1", "-R", start, "-D", "30")
    assert one.stdout.startswith("R"), one.stdout + one.stderr
    done = _rsub_tz(engine, "-r", "freq=daily;until=20301231", "-R",
                    time.strftime("%Y%m%d0041.29", time.localtime(time.time() + 86400)),
                    "-D", "30", "-N", "daily")
    resv_id, state = done.stdout.split()
    assert resv_id.startswith("S") and state == "UNCONFIRMED", done.stderr
    full = engine.pbs("pbs_rstat", "-f", resv_id, check=True).stdout
    assert "reserve_rrule = freq=daily;until=20301231\n" in full
    assert "PBS_TZID=UTC" in full and "reserve_timezone" not in full
    count = int(re.search(r"reserve_count = (\d+)", full).group(1))
    first = time.localtime(time.time() + 86400)
    days = (time.mktime((2030, 12, 31, 0, 0, 0, 0, 0, -1)) - time.mktime(
        (first.tm_year, first.tm_mon, first.tm_mday, 0, 41, 29, 0, 0, -1))) // 86400 + 1
    assert count == int(days)
    until(lambda: _state(engine, resv_id) == "RESV_CONFIRMED", what="confirmation")
    full = engine.pbs("pbs_rstat", "-f", resv_id, check=True).stdout
    assert re.search(r"reserve_rrule = .*\nreserve_index = 1\nreserve_count = ", full), full
    assert f"Resv;{resv_id};New reservation submitted start=" in engine.log()
    assert "recurrence_rrule=freq=daily;until=20301231 timezone=UTC\n" in engine.log()


def test_a_standing_reservation_goes_from_one_occurrence_to_the_next(engine_here):
    """OpenPBS 23.06, checked: at an occurrence's end its queue stops, the jobs queued or
    held in it stay, and it is confirmed for the next (reserve_index, reserve_start and
    reserve_end move on); at the last one's end it ends as any reservation, its jobs
    deleted. Its later occurrences are booked (the scheduler sees them)."""
    from pbsplug.scheduler.model import ResvDecision

    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    root = Caller(0, ROLE_MANAGER)
    vnode = next(iter(eng.store.all("node")))
    start = int(now[0]) + 60
    made = eng.req_resv_submit(root, {
        "reserve_start": start, "reserve_duration": 20, "reserve_rrule": "FREQ=HOURLY;COUNT=3",
        "Variable_List": {"PBS_TZID": "UTC"}, "Resource_List": {"select": "1:ncpus=1"}})
    resv_id = made["id"]
    assert resv_id.startswith("S")
    eng.resvs.decide([ResvDecision(resv_id, True, f"({vnode}:ncpus=1)",
                                   partition="pbs-default")])
    later = [(r.name, r.reserve_start) for r in eng.resvs.objects() if r.name != resv_id]
    assert later == [(f"{resv_id}#2", start + 3600), (f"{resv_id}#3", start + 7200)]
    queue = resv_id.split(".")[0]
    held = eng.req_submit(root, {"queue": queue, "Hold_Types": "u"}, "true\n")
    now[0] = start + 1
    eng.resvs.poll(now[0])
    assert eng.store.get("resv", resv_id)["reserve_state"] == "RESV_RUNNING"
    now[0] = start + 21
    eng.resvs.poll(now[0])
    got = eng.store.get("resv", resv_id)
    assert (got["reserve_state"], got["reserve_index"], got["reserve_start"],
            got["reserve_end"]) == ("RESV_CONFIRMED", 2, start + 3600, start + 3620)
    assert eng.store.get("queue", queue)["started"] is False
    assert eng.store.job(held)["job_state"] == "H"
    now[0] = start + 7221  # (past the third's end too: the server was down, say)
    eng.resvs.poll(now[0])
    assert eng.store.get("resv", resv_id) is None
    assert eng.store.job(held)["job_state"] == "F"


def test_a_standing_reservations_running_jobs_end_with_its_occurrence(engine_here):
    """OpenPBS 23.06, checked: a job still running at an occurrence's end is killed; one
    queued there stays for the next occurrence. The server's clock is the test's: the
    occurrence begins and ends when the test says (on the wall clock, one set 3 s ahead
    could begin, and end, before a loaded machine had confirmed it and run the job)."""
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    root = Caller(0, ROLE_MANAGER)
    start = int(now[0]) + 60
    resv_id = eng.req_resv_submit(root, {
        "reserve_start": start, "reserve_duration": 6, "reserve_rrule": "FREQ=MINUTELY;COUNT=2",
        "Variable_List": {"PBS_TZID": "UTC"}, "Resource_List": {"select": "1:ncpus=1"}})["id"]
    queue = resv_id.split(".")[0]
    poll_until(eng, lambda: eng.store.get("resv", resv_id)["reserve_state"] ==
               "RESV_CONFIRMED", "confirmation")
    running = eng.req_submit(root, {"queue": queue}, "sleep 60\n")
    kept = eng.req_submit(root, {"queue": queue, "Hold_Types": "u"}, "sleep 60\n")
    now[0] = start + 1
    poll_until(eng, lambda: eng.store.job(running)["job_state"] == "R", "the job to run")
    now[0] = start + 7  # the first occurrence is over
    poll_until(eng, lambda: eng.store.job(running)["job_state"] == "F", "the job's end")
    attrs = eng.store.job(running)
    assert attrs["comment"] == f"Job deleted: reservation {resv_id} occurrence 1 ended"
    got = eng.store.get("resv", resv_id)
    assert (got["reserve_index"], got["reserve_start"]) == (2, start + 60)
    assert eng.store.job(kept)["job_state"] == "H"


@pytest.mark.parametrize("attrs", [
    {"reserve_start": None}, {"reserve_start": [1]}, {"reserve_duration": {"a": 1}},
    {"reserve_end": "soon"}, {"Reserve_Name": 5}, {"Mail_Points": "xyz"},
    {"Authorized_Users": "root"}, {"Authorized_Users": ["a", "a"]}, {"select": 3},
    {"select": "x:y"}, {"nosuch": 1}, {"queue": "workq"}, ["Reserve_Name"],
    {"reserve_duration": -5}, {"reserve_end": 2 ** 70}])
def test_a_bad_raw_pbs_ralter_request_is_one_refusal(inprocess_engine, attrs):
    """Every value from a client is checked: a bad one is a PbsError naming what was wrong
    (never a traceback), and the reservation is as it was."""
    eng = inprocess_engine
    root = Caller(0, ROLE_MANAGER)
    resv_id = eng.req_resv_submit(root, {"reserve_start": int(eng.clock()) + 3600,
                                         "reserve_duration": 600})["id"]
    before = eng.store.get("resv", resv_id)
    with pytest.raises(PbsError) as refused:
        eng.req_resv_alter(root, resv_id, attrs)
    assert "\n" not in refused.value.message and refused.value.code in (
        15002, 15014, 15055, 15086, 15183), (refused.value.code, refused.value.message)
    assert eng.store.get("resv", resv_id) == before


def test_a_rule_whose_occurrences_take_too_long_to_find_is_refused():
    """Audit-style bound: FREQ=SECONDLY;BYMONTH=<another month> scanned millions of seconds
    in the server; more than 100,000 occurrences would be kept. Each is one refusal, 15133
    saying why (pbsplug's bounds; OpenPBS 23.06 would iterate them all)."""
    from pbsplug.engine import recurrence

    start = int(time.mktime((2026, 12, 6, 0, 0, 0, 0, 0, -1)))
    for rule, why in (("FREQ=SECONDLY;BYMONTH=2;COUNT=2", "more than 1000000 seconds"),
                      ("FREQ=MINUTELY;UNTIL=20301231", "more than 100000 occurrences")):
        with pytest.raises(recurrence.RuleError) as refused:
            recurrence.checked(rule, start, 1, "UTC")
        assert refused.value.code == 15133 and why in refused.value.message, rule


@pytest.mark.parametrize("rule, dates", [
    # (Sunday 6 December 2026, 00:41:29 UTC is the first occurrence of each)
    ("FREQ=WEEKLY;BYDAY=MO,WE;COUNT=4", ["12-06 00:41", "12-07 00:41", "12-09 00:41",
                                         "12-14 00:41"]),
    ("FREQ=MONTHLY;BYDAY=1MO;COUNT=3", ["12-06 00:41", "12-07 00:41", "01-04 00:41"]),
    ("FREQ=DAILY;BYHOUR=10,12;COUNT=4", ["12-06 00:41", "12-06 10:41", "12-06 12:41",
                                         "12-07 10:41"]),
    ("FREQ=YEARLY;BYMONTH=2;COUNT=2", ["12-06 00:41", "02-06 00:41"]),
    ("FREQ=DAILY;INTERVAL=2;COUNT=3", ["12-06 00:41", "12-08 00:41", "12-10 00:41"]),
    ("FREQ=WEEKLY;INTERVAL=2;BYDAY=SU;WKST=MO;COUNT=3", ["12-06 00:41", "12-20 00:41",
                                                        "01-03 00:41"]),
    ("FREQ=HOURLY;BYHOUR=3,5;COUNT=3", ["12-06 00:41", "12-06 03:41", "12-06 05:41"]),
])
def test_standing_reservation_rules_make_rfc5545s_occurrences(rule, dates):
    from pbsplug.engine import recurrence

    start = int(calendar_timegm((2026, 12, 6, 0, 41, 29)))
    starts = recurrence.occurrences(recurrence.parse(rule), start, recurrence.zone("UTC"))
    assert [time.strftime("%m-%d %H:%M", time.gmtime(s)) for s in starts] == dates


def calendar_timegm(fields: tuple[int, ...]) -> int:
    import calendar

    return calendar.timegm((*fields, 0, 0, 0))


def test_standing_reservation_occurrences_keep_pbs_tzids_wall_clock_time():
    """A DAILY rule keeps the local time across a clock change (RFC 5545): in Paris, the
    day the clocks go forward is 23 hours long."""
    from pbsplug.engine import recurrence

    start = calendar_timegm((2027, 3, 27, 9, 0, 0))  # (10:00 in Paris, UTC+1)
    starts = recurrence.occurrences(recurrence.parse("FREQ=DAILY;COUNT=3"), start,
                                    recurrence.zone("Europe/Paris"))
    assert [b - a for a, b in zip(starts, starts[1:], strict=False)] == [82800, 86400]


def _ends_seen(seen):
    """A plugin whose resv_end hook writes the reservation's id and state to `seen`."""
    from pbsplug import PluginInfo, hookimpl

    def resv_end(self, event) -> None:
        with open(seen, "a") as out:
            out.write(f"{event.resv.name} {event.resv.reserve_state}\n")

    return type("Ends", (), {"plugin_info": PluginInfo(events=("resv_end",)),
                             "resv_end": hookimpl(resv_end)})()


@pytest.mark.parametrize("confirmed", [True, False])
def test_a_pbs_rdel_fires_resv_end_for_a_reservation_not_begun_but_unconfirmed(
        confirmed, engine_here, register_plugin, engine_root):
    # As PBS's server (req_delete.c, read in its source): a pbs_rdel fires the resv_end
    # hooks of any reservation but an unconfirmed one, begun or not; they fired only for
    # a reservation that had begun, so a confirmed one deleted ahead of its window never
    # had them (its vnodes held for it, its queue made).
    seen = engine_root / "seen"
    register_plugin(_ends_seen(seen), "ends")
    now = [time.time()]
    eng = engine_here(clock=lambda: now[0])
    resv_id = eng.req_resv_submit(ROOT, {"Resource_List": {"select": "1:ncpus=1"},
                                         "reserve_start": int(now[0]) + 600,
                                         "reserve_end": int(now[0]) + 1200})["id"]
    if confirmed:
        poll_until(eng, lambda: eng.store.get("resv", resv_id)["reserve_state"] ==
                   "RESV_CONFIRMED", "the reservation's confirmation")
    else:
        assert eng.store.get("resv", resv_id)["reserve_state"] == "RESV_UNCONFIRMED"
    assert eng.req_resv_delete(ROOT, [resv_id]) == [{"id": resv_id}]
    poll_until(eng, lambda: eng.store.get("resv", resv_id) is None, "the deletion")
    assert (seen.read_text() if seen.exists() else "") == (
        f"{resv_id} RESV_FINISHED\n" if confirmed else "")
