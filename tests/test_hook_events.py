"""One test per hook spec, named ``test_hook_<name>`` (tests/test_hookspecs.py checks that).

Each registers a real plugin that implements the hook, drives it the way pbsplug does (the
runner for events, with its default isolation: execution-host hooks in a forked child; the
CLI as a real process; the scheduler's cycle) and asserts what the hook's semantics in
docs/hooks.md say must happen.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from pbsplug import (
    PBSE_HOOKERROR,
    Event,
    Job,
    PluginInfo,
    Queue,
    SchedulerInstance,
    Server,
    Setting,
    Vnode,
    hookimpl,
)
from pbsplug.scheduler import Scheduler, SchedulerSetupError, Snapshot, build_schedulers

JOB = {"id": "7.srv", "Job_Owner": "ann@login1", "euser": "ann", "queue": "workq",
       "Resource_List": {"select": "1:ncpus=4", "walltime": "01:00:00"}}
HOST = {"job": {**JOB, "job_state": "R", "exec_vnode": "(n1:ncpus=4)"},
        "vnode_list": {"n1": {"state": "job-busy"}}}
NOW = 1_800_000_000.0


def on(event_name: str, body) -> SimpleNamespace:
    """A plugin whose one hook, `event_name`, runs ``plugin.body(event)``; a test may swap
    `body` between events (a forked hook sees the body of the moment it is fired)."""
    plugin = SimpleNamespace(body=body)

    def hook(event):
        plugin.body(event)

    hook.__name__ = event_name
    setattr(plugin, event_name, hookimpl(hook))
    return plugin


def reject(msg: str | None = None):
    def body(event):
        event.reject(msg)

    return body


def fail(event):
    raise RuntimeError("broken")


def assert_rejected(outcome, message: str, consequence: str = "refuse") -> None:
    """A plain reject: PBS's code, the requester's message, and the event's consequence."""
    got = (outcome.accepted, outcome.kind, outcome.message, outcome.code, outcome.consequence)
    assert got == (False, "reject", message, PBSE_HOOKERROR, consequence)


# =============================================================================================
# Server: job submission and change
# =============================================================================================

def test_hook_queuejob(register_plugin, fire_event):
    def policy(event):
        res = event.job.Resource_List
        if res["ncpus"] and res["ncpus"] > 64:
            event.reject("at most 64 cpus per job")
        if res["walltime"] is None:
            res["walltime"] = "00:30:00"

    register_plugin(on("queuejob", policy), "limits")
    out = fire_event("queuejob", {"job": {"id": "1.s", "Resource_List": {"ncpus": 4}}})
    assert out.accepted and out.consequence == "proceed"
    assert out.changes == {"job": {"Resource_List": {"walltime": "00:30:00"}}}
    out = fire_event("queuejob", {"job": {"id": "2.s", "Resource_List": {"ncpus": 128}}})
    assert_rejected(out, "at most 64 cpus per job")
    assert out.changes == {}


def test_hook_queuejob_server_owned_attributes_are_an_error(register_plugin, fire_event):
    def run_now(event):
        event.job.Job_Name = "renamed"
        event.job.job_state = "R"

    register_plugin(on("queuejob", run_now), "eager")
    out = fire_event("queuejob", {"job": {"id": "1.s"}})
    assert out.kind == "error" and "'job_state' is read-only" in out.detail
    assert out.message == ("request rejected as filter hook 'eager' encountered an exception."
                           " Please inform Admin")
    assert out.consequence == "refuse" and out.changes == {}  # the rename is dropped too


def test_hook_postqueuejob(register_plugin, fire_event):
    def retire(event):
        if event.job.queue == "oldq":
            event.reject("queue oldq is retired")
        event.job.comment = f"queued in {event.job.queue}"

    register_plugin(on("postqueuejob", retire), "retire")
    out = fire_event("postqueuejob", {"job": {"id": "1.s", "queue": "workq"}})
    assert out.accepted and out.changes == {"job": {"comment": "queued in workq"}}
    out = fire_event("postqueuejob", {"job": {"id": "2.s", "queue": "oldq"}})
    assert_rejected(out, "queue oldq is retired", "delete")  # already queued: deleted


def test_hook_modifyjob(register_plugin, fire_event):
    def no_longer(event):
        new, old = event.job.Resource_List, event.job_o.Resource_List
        if new.seconds("walltime") > old.seconds("walltime"):
            event.reject(f"walltime may only shrink (now {old['walltime']})")

    register_plugin(on("modifyjob", no_longer), "shrink")
    shorter = {"job": {"id": "1.s", "Resource_List": {"walltime": "00:10:00"}},
               "job_o": {"id": "1.s", "Resource_List": {"walltime": "01:00:00"}}}
    assert fire_event("modifyjob", shorter).accepted
    longer = {"job": {"id": "1.s", "Resource_List": {"walltime": "02:00:00"}},
              "job_o": {"id": "1.s", "Resource_List": {"walltime": "01:00:00"}}}
    assert_rejected(fire_event("modifyjob", longer), "walltime may only shrink (now 01:00:00)")


def test_hook_modifyjob_the_old_job_is_read_only(register_plugin, fire_event):
    register_plugin(on("modifyjob", lambda e: setattr(e.job_o, "comment", "x")), "meddle")
    out = fire_event("modifyjob", {"job": {"id": "1.s"}, "job_o": {"id": "1.s"}})
    assert out.kind == "error" and "read-only" in out.detail and out.consequence == "refuse"


def test_hook_movejob(register_plugin, fire_event):
    def keep_long_jobs(event):
        if event.src_queue.name == "long" and event.job.queue != "long_overflow":
            event.reject(f"jobs leave {event.src_queue.name} only for long_overflow")
        event.src_queue.enabled = False  # the source queue is read-only

    register_plugin(on("movejob", keep_long_jobs), "route")
    out = fire_event("movejob", {"job": {"id": "1.s", "queue": "short"},
                                 "src_queue": {"name": "long"}})
    assert_rejected(out, "jobs leave long only for long_overflow")
    out = fire_event("movejob", {"job": {"id": "1.s", "queue": "long_overflow"},
                                 "src_queue": {"name": "long"}})
    assert out.kind == "error" and "queue 'long' is read-only" in out.detail


def test_hook_runjob(register_plugin, fire_event):
    def licences(event):
        if "n13" in event.job.exec_vnode:
            event.job.Hold_Types = "s"  # allowed, because this hook rejects
            event.reject("n13 has no licence for this code")

    register_plugin(on("runjob", licences), "licence")
    out = fire_event("runjob", {"job": {**JOB, "exec_vnode": "(n12:ncpus=4)"}})
    assert out.accepted and out.changes == {}
    out = fire_event("runjob", {"job": {**JOB, "exec_vnode": "(n13:ncpus=4)"}})
    assert_rejected(out, "n13 has no licence for this code", "keep_queued")
    assert out.changes == {"job": {"Hold_Types": "s"}}


def test_hook_jobobit(register_plugin, fire_event):
    def report(event):
        if event.job.Exit_status != 0:
            event.reject(f"job {event.job.id} failed with {event.job.Exit_status}")

    register_plugin(on("jobobit", report), "report")
    assert fire_event("jobobit", {"job": {"id": "1.s", "Exit_status": 0}}).accepted
    out = fire_event("jobobit", {"job": {"id": "1.s", "Exit_status": 3}})
    assert_rejected(out, "job 1.s failed with 3", "ignore")  # logged; the end is recorded


def test_hook_jobobit_the_job_is_read_only(register_plugin, fire_event):
    register_plugin(on("jobobit", lambda e: setattr(e.job, "comment", "done")), "late")
    out = fire_event("jobobit", {"job": {"id": "1.s", "Exit_status": 0}})
    assert out.kind == "error" and "'comment' is read-only" in out.detail
    assert out.consequence == "ignore"


# =============================================================================================
# Server: reservations
# =============================================================================================

def test_hook_resvsub(register_plugin, fire_event):
    def name_and_cap(event):
        resv = event.resv
        if resv.reserve_duration > 86400:
            event.reject("reservations last at most a day")
        resv.Reserve_Name = resv.Reserve_Name or f"resv-{resv.resvid}"

    register_plugin(on("resvsub", name_and_cap), "resvpolicy")
    out = fire_event("resvsub", {"resv": {"resvid": "R1.s", "reserve_duration": 3600}})
    assert out.accepted and out.changes == {"resv": {"Reserve_Name": "resv-R1.s"}}
    out = fire_event("resvsub", {"resv": {"resvid": "R2.s", "reserve_duration": 90000}})
    assert_rejected(out, "reservations last at most a day")


def test_hook_resv_confirm(register_plugin, fire_event):
    def avoid_maintenance(event):
        if "n3" in event.resv.resv_nodes:
            event.reject("n3 is under maintenance")

    register_plugin(on("resv_confirm", avoid_maintenance), "maint")
    ok = {"resv": {"resvid": "R1.s", "resv_nodes": "(n1:ncpus=4)"}}
    assert fire_event("resv_confirm", ok).accepted
    bad = {"resv": {"resvid": "R1.s", "resv_nodes": "(n3:ncpus=4)"}}
    assert_rejected(fire_event("resv_confirm", bad), "n3 is under maintenance")


def test_hook_resv_confirm_the_reservation_is_read_only(register_plugin, fire_event):
    register_plugin(on("resv_confirm", lambda e: setattr(e.resv, "Reserve_Name", "x")), "w")
    out = fire_event("resv_confirm", {"resv": {"resvid": "R1.s"}})
    assert out.kind == "error" and "read-only" in out.detail and out.consequence == "refuse"


def test_hook_resv_begin(register_plugin, fire_event):
    seen = []

    def begin(event):
        seen.append((event.resv.resvid, event.resv.queue))
        event.reject("prologue service unreachable")

    register_plugin(on("resv_begin", begin), "resvlog")
    out = fire_event("resv_begin", {"resv": {"resvid": "R1.s", "queue": "R1"}},
                     mode="inprocess")  # `seen` is this process's
    assert seen == [("R1.s", "R1")]
    assert_rejected(out, "prologue service unreachable", "ignore")


def test_hook_resv_end(register_plugin, fire_event):
    plugin = register_plugin(on("resv_end", reject()), "archive").plugin
    out = fire_event("resv_end", {"resv": {"resvid": "R1.s"}})
    assert_rejected(out, "resv_end request rejected by 'archive'", "ignore")  # it ends anyway
    plugin.body = lambda e: setattr(e.resv, "comment", "ended")
    out = fire_event("resv_end", {"resv": {"resvid": "R1.s"}})
    assert out.kind == "error" and "read-only" in out.detail and out.consequence == "ignore"


# =============================================================================================
# Server: vnodes, periodic work, provisioning, management
# =============================================================================================

def test_hook_modifyvnode(register_plugin, fire_event):
    def need_a_reason(event):
        if "offline" in event.vnode.states and "offline" not in event.vnode_o.states:
            if not event.vnode.comment:
                event.reject(f"{event.vnode.name} went offline without a comment")

    register_plugin(on("modifyvnode", need_a_reason), "audit")
    with_reason = {"vnode": {"name": "n1", "state": "offline", "comment": "bad disk"},
                   "vnode_o": {"name": "n1", "state": "free"}}
    assert fire_event("modifyvnode", with_reason).accepted
    silent = {"vnode": {"name": "n1", "state": "offline"}, "vnode_o": {"name": "n1"}}
    out = fire_event("modifyvnode", silent)
    assert_rejected(out, "n1 went offline without a comment", "ignore")


def test_hook_modifyvnode_the_vnodes_are_read_only(register_plugin, fire_event):
    register_plugin(on("modifyvnode", lambda e: setattr(e.vnode, "comment", "x")), "w")
    out = fire_event("modifyvnode", {"vnode": {"name": "n1"}, "vnode_o": {"name": "n1"}})
    assert out.kind == "error" and "vnode 'n1' is read-only" in out.detail


def test_hook_periodic(register_plugin, fire_event):
    def sweep(event):
        assert event.resv_list == {}  # carried, and empty when there is none
        for vnode in event.vnode_list.values():
            if vnode.state == "free" and vnode.last_used_time < NOW - 3600:
                vnode.state = "sleep"
        event.reject()  # the changes still apply

    register_plugin(on("periodic", sweep), "idle", freq=300)
    out = fire_event("periodic", {"vnode_list": {
        "n1": {"state": "free", "last_used_time": NOW - 7200},
        "n2": {"state": "free", "last_used_time": NOW - 60}}})
    assert_rejected(out, "periodic request rejected by 'idle'", "ignore")
    assert out.changes == {"vnode_list": {"n1": {"state": "sleep"}}}


def test_hook_periodic_reservations_are_read_only(register_plugin, fire_event):
    def touch(event):
        event.resv_list["R1.s"].comment = "seen"

    register_plugin(on("periodic", touch), "touch")
    out = fire_event("periodic", {"vnode_list": {}, "resv_list": {"R1.s": {}}})
    assert out.kind == "error" and "read-only" in out.detail


def test_hook_periodic_queued_jobs_are_read_only_with_their_estimates(register_plugin,
                                                                       fire_event):
    seen = {}

    def look(event):
        seen.update({j.id: j.estimated["start_time"] for j in event.job_list.values()})
        event.job_list["3.s"].comment = "seen"

    register_plugin(on("periodic", look), "look")
    out = fire_event("periodic", {"vnode_list": {}, "job_list": [
        {"id": "3.s", "job_state": "Q", "estimated": {"start_time": NOW + 60,
                                                      "exec_vnode": "(n1:ncpus=1)"}}]},
                     mode="inprocess")  # `seen` is this process's
    assert seen == {"3.s": NOW + 60}
    assert out.kind == "error" and "read-only" in out.detail
    assert Event("periodic").job_list == {}  # carried, and empty when there is none


def test_hook_provision(register_plugin, fire_event):
    def provision(event):
        if event.aoe not in ("rhel9", "sles15"):
            event.reject(f"no image for {event.aoe} on {event.vnode.name}")

    register_plugin(on("provision", provision), "imager")
    assert fire_event("provision", {"vnode": {"name": "n1"}, "aoe": "rhel9"}).accepted
    out = fire_event("provision", {"vnode": {"name": "n1"}, "aoe": "win95"})
    assert_rejected(out, "no image for win95 on n1")


def test_hook_provision_belongs_to_one_plugin_alone(register_plugin):
    register_plugin(on("provision", lambda e: None), "imager")
    second = register_plugin(on("provision", lambda e: None), "other", check=False)
    assert second.status == "failed"
    assert "Another hook 'imager' already has event 'provision'" in second.error
    both = SimpleNamespace(provision=on("provision", lambda e: None).provision,
                           queuejob=on("queuejob", lambda e: None).queuejob)
    mixed = register_plugin(both, "mixed", check=False)
    assert mixed.status == "failed"
    assert "'provision' event cannot be combined with any other event" in mixed.error


def test_hook_management(register_plugin, fire_event):
    def protect(event):
        cmd = event.management
        if cmd["cmd"] == "delete" and cmd["objtype"] == "node":
            event.reject(f"delete node {cmd['objname']}: drain it first")

    register_plugin(on("management", protect), "guard")
    setting = {"cmd": "set", "objtype": "node", "objname": "n1",
               "attribs": [{"name": "comment", "op": "=", "value": "ok"}]}
    assert fire_event("management", {"management": setting}).accepted
    out = fire_event("management", {"management": {"cmd": "delete", "objtype": "node",
                                                   "objname": "n1", "attribs": []}})
    assert_rejected(out, "delete node n1: drain it first")


# =============================================================================================
# Execution host: a job's life on the host (hooks run in a forked child by default)
# =============================================================================================

def test_hook_execjob_begin(register_plugin, fire_event):
    def health(event):
        for vnode in event.vnode_list.values():
            vnode.state = "offline"
            vnode.comment = "GPU health check failed"
        event.job.comment = "requeued: GPU health"
        event.reject("GPU health check failed")

    register_plugin(on("execjob_begin", health), "gpucheck")
    out = fire_event("execjob_begin", HOST)
    assert [r.mode for r in out.runs] == ["process"]
    assert_rejected(out, "GPU health check failed", "requeue")
    assert out.fail_action == ()  # never on a plain reject
    assert out.changes == {
        "job": {"comment": "requeued: GPU health"},
        "vnode_list": {"n1": {"state": "offline", "comment": "GPU health check failed"}}}


def test_hook_execjob_begin_errors_and_delete(register_plugin, fire_event):
    def delete(event):
        event.job.delete()
        event.reject("bad job")

    plugin = register_plugin(on("execjob_begin", fail), "broken",
                             fail_action=["offline_vnodes", "scheduler_restart_cycle"]).plugin
    out = fire_event("execjob_begin", HOST)
    assert out.kind == "error" and out.consequence == "requeue" and out.changes == {}
    assert out.fail_action == ("offline_vnodes", "scheduler_restart_cycle")
    plugin.body = delete
    out = fire_event("execjob_begin", HOST)
    assert (out.consequence, out.job_action) == ("delete", "delete")


def test_hook_execjob_prologue(register_plugin, fire_event):
    def failed_vnodes(event):
        event.job.Variable_List = {"PROLOGUE": "ran"}
        if event.vnode_list_fail:
            event.reject(f"set-up failed on {', '.join(sorted(event.vnode_list_fail))}")

    plugin = register_plugin(on("execjob_prologue", failed_vnodes), "prologue",
                             fail_action="offline_vnodes").plugin
    out = fire_event("execjob_prologue", HOST)
    assert out.accepted and out.changes == {"job": {"Variable_List": {"PROLOGUE": "ran"}}}
    out = fire_event("execjob_prologue", {**HOST, "vnode_list_fail": {"n2": {}}})
    assert_rejected(out, "set-up failed on n2", "requeue")
    assert out.fail_action == ()
    plugin.body = fail
    out = fire_event("execjob_prologue", HOST)
    assert (out.kind, out.consequence, out.fail_action) == (
        "error", "requeue", ("offline_vnodes",))


def test_hook_execjob_launch(register_plugin, fire_event):
    def wrap(event):
        if event.progname == "/bin/false":
            event.reject("refusing to launch /bin/false")
        event.env["OMP_NUM_THREADS"] = "4"
        event.env["LAUNCHED_BY"] = str(event.pid)  # the process that will run the job
        event.argv = ["numactl", "--interleave=all", *event.argv]
        event.progname = "/usr/bin/numactl"

    register_plugin(on("execjob_launch", wrap), "numa")
    launch = {**HOST, "progname": "/bin/sh", "argv": ["sh", "job.sh"], "env": {"HOME": "/h"}}
    # In a forked child (the default for host events): the pid crosses over.
    out = fire_event("execjob_launch", {**launch, "pid": os.getpid()})
    assert out.accepted
    assert out.changes == {"progname": "/usr/bin/numactl",
                           "argv": ["numactl", "--interleave=all", "sh", "job.sh"],
                           "env": {"HOME": "/h", "OMP_NUM_THREADS": "4",
                                   "LAUNCHED_BY": str(os.getpid())}}
    out = fire_event("execjob_launch", launch)  # no process: None
    assert out.changes["env"]["LAUNCHED_BY"] == "None"
    out = fire_event("execjob_launch", {**launch, "progname": "/bin/false"})
    assert_rejected(out, "refusing to launch /bin/false", "delete")


def test_hook_execjob_launch_rerun_and_errors(register_plugin, fire_event):
    def rerun(event):
        event.job.rerun()
        event.reject("node busy, try another")

    launch = {**HOST, "progname": "/bin/sh", "argv": ["sh"], "env": {}}
    plugin = register_plugin(on("execjob_launch", rerun), "retry").plugin
    out = fire_event("execjob_launch", launch)
    assert (out.consequence, out.job_action) == ("requeue", "rerun")
    plugin.body = fail
    out = fire_event("execjob_launch", launch)
    assert (out.kind, out.consequence, out.job_action) == ("error", "delete", None)


def test_hook_execjob_attach(register_plugin, fire_event):
    def only_known(event):
        assert event.vnode_list is None  # attach carries no vnodes
        if event.pid == 1:
            event.reject("will not attach pid 1")

    register_plugin(on("execjob_attach", only_known), "attach")
    assert fire_event("execjob_attach", {"job": HOST["job"], "pid": 4242}).accepted
    out = fire_event("execjob_attach", {"job": HOST["job"], "pid": 1})
    assert_rejected(out, "will not attach pid 1")


def test_hook_execjob_preterm(register_plugin, fire_event):
    def checkpoint_first(event):
        if event.job.Variable_List and event.job.Variable_List.get("CHECKPOINTING"):
            event.job.comment = "qdel refused while checkpointing"
            event.reject("checkpoint in progress, try again in a minute")

    register_plugin(on("execjob_preterm", checkpoint_first), "ckpt")
    assert fire_event("execjob_preterm", HOST).accepted
    busy = {**HOST, "job": {**HOST["job"], "Variable_List": {"CHECKPOINTING": "1"}}}
    out = fire_event("execjob_preterm", busy)
    assert_rejected(out, "checkpoint in progress, try again in a minute")  # job keeps running
    assert out.changes == {"job": {"comment": "qdel refused while checkpointing"}}


def test_hook_execjob_epilogue(register_plugin, fire_event):
    def account(event):
        event.job.resources_used["energy"] = 12.5  # kWh, a float in PBS
        if event.job.Exit_status == 271:  # killed by a node failure
            event.job.rerun()
            event.reject("node failure: rerun")

    register_plugin(on("execjob_epilogue", account), "acct")
    ended = {**HOST, "job": {**HOST["job"], "Exit_status": 271}}
    out = fire_event("execjob_epilogue", ended)
    assert_rejected(out, "node failure: rerun", "ignore")
    assert out.job_action == "rerun"  # still applies, as do the changes
    assert out.changes == {"job": {"resources_used": {"energy": 12.5}, "_action": "rerun"}}


def test_hook_execjob_end(register_plugin, fire_event):
    def cleanup(event):
        event.job.comment = "scratch kept"
        event.reject("scratch cleanup failed")

    register_plugin(on("execjob_end", cleanup), "scratch", order=1)
    register_plugin(on("execjob_end", lambda e: setattr(e.job, "comment", "later")), "later",
                    order=2)
    out = fire_event("execjob_end", HOST)
    assert_rejected(out, "scratch cleanup failed", "ignore")
    assert [r.hook for r in out.runs] == ["scratch"]  # later hooks are skipped
    assert out.changes == {"job": {"comment": "scratch kept"}}


def test_hook_execjob_abort(register_plugin, fire_event):
    def release(event):
        event.job.Resource_List["ncpus"] = 0  # not writable on the execution host

    plugin = register_plugin(on("execjob_abort", release), "release").plugin
    out = fire_event("execjob_abort", HOST)
    assert out.kind == "error" and "'Resource_List' is read-only" in out.detail
    assert out.consequence == "ignore" and out.fail_action == ()
    plugin.body = reject("could not release licences")
    out = fire_event("execjob_abort", HOST)
    assert_rejected(out, "could not release licences", "ignore")


def test_hook_execjob_postsuspend(register_plugin, fire_event):
    def lend(event):
        for vnode in event.vnode_list.values():
            vnode.comment = f"suspended {event.job.id}"
        event.reject("could not lend the cores")

    register_plugin(on("execjob_postsuspend", lend), "lend")
    out = fire_event("execjob_postsuspend", HOST)
    assert_rejected(out, "could not lend the cores", "ignore")
    assert out.changes == {"vnode_list": {"n1": {"comment": "suspended 7.srv"}}}


def test_hook_execjob_preresume(register_plugin, fire_event):
    def wait_for_memory(event):
        if any(v.state != "free" for v in event.vnode_list.values()):
            event.reject("memory still in use, staying suspended")

    register_plugin(on("execjob_preresume", wait_for_memory), "mem")
    assert fire_event("execjob_preresume", {**HOST, "vnode_list": {"n1": {"state": "free"}}}
                      ).accepted
    out = fire_event("execjob_preresume", HOST)
    assert_rejected(out, "memory still in use, staying suspended")


def test_hook_execjob_resize(register_plugin, fire_event):
    def keep_first(event):
        if "n1" not in event.job.exec_vnode:
            event.reject("the first vnode holds the job's top process")

    register_plugin(on("execjob_resize", keep_first), "resize")
    both = {**HOST, "job": {**HOST["job"], "exec_vnode": "(n1:ncpus=4)+(n2:ncpus=4)"}}
    assert fire_event("execjob_resize", both).accepted
    out = fire_event("execjob_resize", {**HOST, "job": {**HOST["job"],
                                                        "exec_vnode": "(n2:ncpus=4)"}})
    assert_rejected(out, "the first vnode holds the job's top process")


# =============================================================================================
# Execution host: the host itself
# =============================================================================================

def test_hook_exechost_startup(register_plugin, fire_event):
    def numa(event):
        for i in range(2):
            event.vnode_list[f"h1[{i}]"] = Vnode(f"h1[{i}]", {
                "resources_available": {"ncpus": 8, "host": "h1"}})
        event.vnode_list["h1"].resources_available["ncpus"] = 0

    register_plugin(on("exechost_startup", numa), "numa")
    out = fire_event("exechost_startup", {"vnode_list": {"h1": {
        "resources_available": {"ncpus": 16}}}})
    assert out.accepted
    new = {"name": "h1[0]", "resources_available": {"ncpus": 8, "host": "h1"}, "_new": True}
    assert out.changes["vnode_list"]["h1[0]"] == new
    assert out.changes["vnode_list"]["h1[1]"]["_new"] is True
    assert out.changes["vnode_list"]["h1"] == {"resources_available": {"ncpus": 0}}


def test_hook_exechost_startup_failure_actions(register_plugin, fire_event):
    register_plugin(on("exechost_startup", fail), "numa",
                    fail_action=["offline_vnodes", "clear_vnodes_upon_recovery"])
    out = fire_event("exechost_startup", {"vnode_list": {"h1": {}}})
    assert (out.kind, out.consequence) == ("error", "ignore")
    assert out.fail_action == ("offline_vnodes", "clear_vnodes_upon_recovery")


def test_hook_exechost_periodic(register_plugin, fire_event):
    def scratch(event):
        assert event.job_list == {}  # carried, and empty when nothing runs here
        event.vnode_list["n1"].state = "offline"
        event.vnode_list["n1"].comment = "/scratch full"
        event.reject("/scratch full")

    register_plugin(on("exechost_periodic", scratch), "disk")
    out = fire_event("exechost_periodic", {"vnode_list": {"n1": {"state": "free"}}})
    assert_rejected(out, "/scratch full", "ignore")
    assert out.changes == {"vnode_list": {"n1": {"state": "offline", "comment": "/scratch full"}}}


def test_hook_exechost_periodic_jobs_are_read_only(register_plugin, fire_event):
    register_plugin(on("exechost_periodic",
                       lambda e: setattr(e.job_list["7.srv"], "comment", "x")), "w")
    out = fire_event("exechost_periodic", {"vnode_list": {}, "job_list": [HOST["job"]]})
    assert out.kind == "error" and "read-only" in out.detail and out.changes == {}


# =============================================================================================
# Extension points: the plugin's configuration, the CLI and the server's objects
# =============================================================================================

def test_hook_configure(register_plugin):
    class Keeper:
        plugin_info = PluginInfo(config={"boot_delay": Setting(int, 300, gt=0),
                                         "driver": Setting(str, "capmc")})
        seen: list = []

        @hookimpl
        def configure(self, config):
            self.seen.append(config)

    keeper = Keeper()
    record = register_plugin(keeper, "keeper", config={"boot_delay": 60})
    assert keeper.seen == [{"boot_delay": 60, "driver": "capmc"}] and record.status == "enabled"

    class Broken:
        @hookimpl
        def configure(self, config):
            raise OSError("no state folder")

    record = register_plugin(Broken(), "broken", check=False)
    assert record.status == "failed"
    assert record.error == "configure failed: OSError: no state folder"

def test_hook_register_commands(dists, cli):
    dists.add("ops", '''
        import typer
        from pbsplug import hookimpl

        @hookimpl
        def register_commands(cli):
            @cli.command()
            def drain(node: str, reason: str = typer.Option("maintenance", "--reason")):
                """Drain a node."""
                typer.echo(f"{cli.info.name}: drain {node} ({reason})")
        ''')
    result = cli("ops", "drain", "n1", "--reason", "disk")  # the site enables nothing
    assert result.returncode == 0, result.stderr
    assert result.stdout == "ops: drain n1 (disk)\n"
    assert "Drain a node." in cli("ops", "--help").stdout
    result = cli("ops", "undrain", "n1")
    assert result.returncode != 0 and "undrain" in result.stderr


def test_hook_register_attributes(register_plugin, pbsplug_plugins, fire_event):
    class Power:
        @hookimpl
        def register_attributes(self, registry):
            registry.add_object_type("pdu", doc="a power distribution unit")
            registry.add("pdu", "outlets", "long", 8,
                         validator=lambda v: None if v > 0 else "outlets must be > 0")
            registry.add("node", "poweroff_eligible", "boolean", False, set_by="manager")

        @hookimpl
        def periodic(self, event):
            for vnode in event.vnode_list.values():
                if vnode.poweroff_eligible and vnode.state == "free":
                    vnode.state = "sleep"

    register_plugin(Power(), "power")
    registry = pbsplug_plugins.attribute_registry()
    eligible = registry.attributes[("node", "poweroff_eligible")]
    assert (eligible.type, eligible.default, eligible.set_by, eligible.plugin) == (
        "boolean", False, "manager", "power")
    assert eligible.check("yes") == "illegal value for poweroff_eligible: expected a boolean"
    assert registry.object_types["pdu"].plugin == "power"
    outlets = registry.for_type("pdu")["outlets"]
    assert (outlets.check(0), outlets.check(4)) == ("outlets must be > 0", None)
    out = fire_event("periodic", {"vnode_list": {
        "n1": {"state": "free", "poweroff_eligible": True}, "n2": {"state": "free"}}})
    assert out.changes == {"vnode_list": {"n1": {"state": "sleep"}}}


# =============================================================================================
# Extension points: the scheduler
# =============================================================================================

def vnode(name: str, ncpus: int = 4, **attrs) -> Vnode:
    return Vnode(name, {"state": "free", "resources_available": {"ncpus": ncpus}, **attrs})


def job(job_id: str, select: str = "1:ncpus=4", walltime: str = "01:00:00",
        queue: str = "workq", **attrs) -> Job:
    qtime = NOW - 1000 + int(job_id.split(".")[0])
    return Job(job_id, {"queue": queue, "job_state": "Q", "qtime": qtime,
                        "Resource_List": {"select": select, "walltime": walltime}, **attrs})


def snap(vnodes, jobs, queues=("workq",)) -> Snapshot:
    qs = {q.name: q for q in (q if isinstance(q, Queue) else Queue(q, {}) for q in queues)}
    return Snapshot(Server("srv"), qs, {v.name: v for v in vnodes}, list(jobs), [])


def started(result) -> dict[str, str]:
    return {r.job_id: r.exec_vnode for r in result.run}


def test_hook_sched_instances(register_plugin, pbsplug_plugins):
    class Gpu:
        @hookimpl
        def sched_instances(self, server):
            return [SchedulerInstance("gpu", ("P_gpu",), True, 30, {"backfill_depth": 3})]

    class Nothing:
        @hookimpl
        def sched_instances(self, server):
            return []

    register_plugin(Gpu(), "gpu")
    register_plugin(Nothing(), "nothing")
    answers = pbsplug_plugins.hook.sched_instances(server=Server("srv"))
    instances = [i for answer in answers for i in answer]  # one list per plugin, joined
    scheds = build_schedulers(instances, Server("srv"), pbsplug_plugins.hook)
    assert sorted(scheds) == ["default", "gpu"]
    assert (scheds["gpu"].partitions, scheds["gpu"].policy.backfill_depth) == (
        frozenset({"P_gpu"}), 3)
    queues = [Queue("workq", {}), Queue("gpuq", {"partition": "P_gpu"})]
    view = snap([vnode("n1"), vnode("g1", partition="P_gpu")],
                [job("1.s"), job("2.s", queue="gpuq"), job("3.s", queue="gpuq")], queues)
    # Each sees only its slice: the gpu instance never runs workq's job or uses n1.
    assert started(scheds["gpu"].cycle(view, NOW)) == {"2.s": "(g1:ncpus=4)"}
    assert started(scheds["default"].cycle(view, NOW)) == {"1.s": "(n1:ncpus=4)"}
    answers.append([SchedulerInstance("default", ("P_x",))])
    with pytest.raises(SchedulerSetupError, match="not permitted on default scheduler"):
        build_schedulers([i for answer in answers for i in answer], Server("srv"))


def test_hook_sched_partition(register_plugin, pbsplug_plugins):
    class Abstain:
        @hookimpl
        def sched_partition(self, obj):
            return None

    class Split:
        @hookimpl
        def sched_partition(self, obj):
            return "P2" if obj.name == "n2" else None

    queues = [Queue("q1", {"partition": "P1"})]
    vnodes = [vnode("n1", partition="P1"), vnode("n2", partition="P1")]
    jobs = [job("1.s", queue="q1"), job("2.s", queue="q1")]
    plain = Scheduler("sc1", ("P1",)).cycle(snap(vnodes, jobs, queues), NOW)
    assert set(started(plain)) == {"1.s", "2.s"}
    register_plugin(Split(), "split")
    register_plugin(Abstain(), "abstain")  # None is no answer: the next plugin's counts
    result = Scheduler("sc1", ("P1",), hooks=pbsplug_plugins.hook).cycle(
        snap(vnodes, jobs, queues), NOW)
    # n2 left P1 by the hook's answer; n1 kept its attribute's partition.
    assert started(result) == {"1.s": "(n1:ncpus=4)"}


def test_hook_sched_job_order(register_plugin, pbsplug_plugins):
    class ShortestFirst:
        @hookimpl
        def sched_job_order(self, order):
            order.jobs.sort(key=lambda j: j.Resource_List.seconds("walltime"))
            order.starving.extend(["4.s", "3.s"])

    hog = job("9.s", job_state="R", exec_vnode="(n2:ncpus=4)", stime=NOW)
    jobs = [hog, job("1.s", walltime="02:00:00"), job("2.s", walltime="00:30:00"),
            job("3.s", "2:ncpus=4"), job("4.s", "2:ncpus=4")]
    vnodes = [vnode("n1"), vnode("n2")]
    plain = Scheduler().cycle(snap(vnodes, jobs), NOW)
    assert (started(plain), plain.top_jobs) == ({"1.s": "(n1:ncpus=4)"}, [])  # first come
    register_plugin(ShortestFirst(), "sjf")
    result = Scheduler(hooks=pbsplug_plugins.hook).cycle(snap(vnodes, jobs), NOW)
    # The first of order.starving is the most starving: the top job, drained for at the
    # hog's end; only the short job ends before that and backfills.
    assert result.top_jobs == ["4.s"]
    assert started(result) == {"2.s": "(n1:ncpus=4)"}


def test_hook_sched_node_placement(register_plugin, pbsplug_plugins):
    class Pack:
        @hookimpl
        def sched_node_placement(self, placement):
            if placement.job.id == "2.s":
                return ["n1"]  # one name for two chunks: ignored
            return [placement.candidates[-1].name] * 2

    vnodes = [vnode("n1"), vnode("n2"), vnode("n3")]
    plain = Scheduler()
    packed, ignored = [job("1.s", "2:ncpus=1")], [job("2.s", "2:ncpus=1")]
    assert started(plain.cycle(snap(vnodes, packed), NOW)) != {
        "1.s": "(n3:ncpus=1)+(n3:ncpus=1)"}
    register_plugin(Pack(), "pack")
    hooked = Scheduler(hooks=pbsplug_plugins.hook)
    assert started(hooked.cycle(snap(vnodes, packed), NOW)) == {
        "1.s": "(n3:ncpus=1)+(n3:ncpus=1)"}
    # A wrong answer is ignored: the job starts where the scheduler alone puts it.
    assert started(hooked.cycle(snap(vnodes, ignored), NOW)) == started(
        plain.cycle(snap(vnodes, ignored), NOW))


def test_hook_sched_node_availability(register_plugin, pbsplug_plugins):
    asked = []

    class Recovering:
        @hookimpl
        def sched_node_availability(self, sched, now, vnodes):
            asked.append((sched, now, [v.name for v in vnodes]))
            return {"n1": now + 600, "n2": now + 5}

    jobs = [job("1.s"), job("2.s"), job("3.s")]
    vnodes = [vnode("n1", state="down"), vnode("n2")]
    plain = Scheduler().cycle(snap(vnodes, jobs), NOW)
    assert plain.estimates["2.s"].exec_vnode == "(n2:ncpus=4)"  # n1 is never planned
    register_plugin(Recovering(), "recovering")
    result = Scheduler(hooks=pbsplug_plugins.hook).cycle(snap(vnodes, jobs), NOW)
    assert asked == [("default", NOW, ["n1"])]  # only the vnodes not free now
    assert started(result) == {"1.s": "(n2:ncpus=4)"}  # n2's answer ignored: it is free
    assert result.estimates["2.s"].start_time == NOW + 600
    assert result.estimates["2.s"].exec_vnode == "(n1:ncpus=4)"


def test_hook_sched_node_availability_replaces_the_boot_delay_of_a_sleeping_vnode(
        register_plugin, pbsplug_plugins):
    """The policy's boot_delay is a guess for sleeping vnodes; a plugin that knows (the power
    plugin's driver) replaces it, sooner or later; two plugins: the later time."""
    vnodes = [vnode("fast", state="sleep"), vnode("slow", state="sleep")]
    jobs = [job("1.s"), job("2.s")]

    def estimates(hooks=None):
        result = Scheduler(hooks=hooks).cycle(snap(vnodes, jobs), NOW)
        return {e.exec_vnode: e.start_time for e in result.estimates.values()}

    assert estimates() == {"(fast:ncpus=4)": NOW + 300, "(slow:ncpus=4)": NOW + 300}

    class Driver:
        @hookimpl
        def sched_node_availability(self, sched, now, vnodes):
            return {"fast": now + 30, "slow": now + 900}

    class Cautious:
        @hookimpl
        def sched_node_availability(self, sched, now, vnodes):
            return {"fast": now + 60}

    register_plugin(Driver(), "driver")
    assert estimates(pbsplug_plugins.hook) == {"(fast:ncpus=4)": NOW + 30,
                                               "(slow:ncpus=4)": NOW + 900}
    register_plugin(Cautious(), "cautious")
    assert estimates(pbsplug_plugins.hook) == {"(fast:ncpus=4)": NOW + 60,
                                               "(slow:ncpus=4)": NOW + 900}


def test_hook_sched_cycle_begin(register_plugin, pbsplug_plugins):
    seen = []

    class Watch:
        @hookimpl
        def sched_cycle_begin(self, sched, now):
            seen.append(("begin", sched, now))

        @hookimpl
        def sched_partition(self, obj):
            seen.append(("partition", obj.name))

    register_plugin(Watch(), "watch")
    Scheduler("sc1", ("P1",), hooks=pbsplug_plugins.hook).cycle(
        snap([vnode("n1")], [job("1.s")]), NOW)
    assert seen[0] == ("begin", "sc1", NOW)
    assert ("partition", "n1") in seen[1:]  # the cycle looks at its objects after


@pytest.mark.parametrize("partitions", [("P1",), ()])
def test_hook_sched_cycle_end(register_plugin, pbsplug_plugins, partitions):
    seen = []

    class Watch:
        @hookimpl
        def sched_cycle_end(self, stats):
            seen.append(stats)

    register_plugin(Watch(), "watch")
    vnodes = [vnode("n1", partition="P1")]
    queues = [Queue("workq", {"partition": "P1"})]
    Scheduler("sc1", partitions, hooks=pbsplug_plugins.hook).cycle(
        snap(vnodes, [job("1.s"), job("2.s")], queues), NOW)
    assert [(s.sched, s.started) for s in seen] == [("sc1", NOW)]
    figures = (seen[0].jobs_considered, seen[0].jobs_started, seen[0].jobs_backfilled)
    # An instance that owns no partition still ends its (empty) cycle.
    assert figures == ((2, 1, 0) if partitions else (0, 0, 0))


class InPlace:
    """PBS's idiom: change a job's environment in place, not by assigning it."""

    @hookimpl
    def queuejob(self, event):
        event.job.Variable_List["SITE"] = "yes"

    @hookimpl
    def jobobit(self, event):
        event.job.Variable_List["AFTER"] = "the end"  # a finished job is read-only

    @hookimpl
    def modifyjob(self, event):
        event.job_o.Variable_List["OLD"] = "changed"  # the job as it was: read-only


@pytest.mark.parametrize("mode", ["process", "inprocess"])
def test_a_change_in_place_is_a_write_kept_or_refused_as_an_assignment(register_plugin,
                                                                       fire_event, mode):
    """In the default process mode an in-place change was lost; in process it was kept
    even where the event lets no hook write, and changed the caller's own data."""
    register_plugin(InPlace(), "inplace")
    env = {"HOME": "/home/bob"}
    queued = Event("queuejob", job=Job("1.s", {"Variable_List": env}))
    out = fire_event(queued, mode=mode)
    assert out.accepted and out.changes["job"] == {
        "Variable_List": {"HOME": "/home/bob", "SITE": "yes"}}
    assert env == {"HOME": "/home/bob"}  # the caller's mapping is not the hook's
    for event in (Event("jobobit", job=Job("1.s", {"Variable_List": env})),
                  Event("modifyjob", job=Job("1.s", {}),
                        job_o=Job("1.s", {"Variable_List": env}))):
        out = fire_event(event, mode=mode)
        assert (out.accepted, out.kind) == (False, "error")
        assert "is read-only" in out.detail and not out.changes
        assert env == {"HOME": "/home/bob"}
