"""What one bad plugin could do to the whole server, found by a hostile review of the runner
and the loader, each now confined to that plugin: a change of the process's signal handlers
at import or configure, a SystemExit from configure, a hook that signals its own process
group, a reject with a message that is not text, a plugin_info or site value out of range,
and a hook whose failure escaped the runner while a job was starting."""

from __future__ import annotations

import signal
import time

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.errors import PbsError
from pbsplug.engine.server import ROLE_MANAGER, ROLE_USER, Caller
from pbsplug.hookattrs import MAX_SECONDS, HookAttributeError, HookAttributes, check_attributes
from pbsplug.plugins import FAILED

from .conftest import until
from .test_server import plugin


class IgnoresChildren:
    plugin_info = PluginInfo(events=("queuejob",))

    @hookimpl
    def configure(self, config):
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)

    @hookimpl
    def queuejob(self, event):
        pass


class Exits:
    plugin_info = PluginInfo(events=("queuejob",))

    @hookimpl
    def configure(self, config):
        raise SystemExit(3)

    @hookimpl
    def queuejob(self, event):
        pass


class BadInfo:
    plugin_info = PluginInfo(events=("queuejob",), alarm="60")

    @hookimpl
    def queuejob(self, event):
        pass


def test_a_plugin_that_changes_the_process_or_exits_while_loading_fails_alone(
        register_plugin):
    before = signal.getsignal(signal.SIGCHLD)
    record = register_plugin(IgnoresChildren(), "ignorer", check=False)
    assert record.status == FAILED
    assert "configure changed the process's SIGCHLD handler (undone)" in record.error
    assert signal.getsignal(signal.SIGCHLD) is before
    record = register_plugin(Exits(), "exits", check=False)  # no SystemExit reaches here
    assert (record.status, record.error) == (
        FAILED, "configure failed: SystemExit: 3")
    record = register_plugin(BadInfo(), "badinfo", check=False)
    assert record.status == FAILED and record.error.startswith("bad plugin_info: TypeError")


class EmptiesAResource:
    """Sets a host-level string resource to "" for jobs named `empty`, and a walltime (a
    change of no harm) for jobs named `timed`."""

    plugin_info = PluginInfo(events=("queuejob", "modifyjob"))

    @hookimpl
    def queuejob(self, event):
        if event.job.Job_Name == "empty":
            event.job.Resource_List["accelerator_model"] = ""
        elif event.job.Job_Name == "timed":
            event.job.Resource_List["walltime"] = 3600

    @hookimpl
    def modifyjob(self, event):
        self.queuejob(event)


def test_a_hooks_resource_that_no_select_holds_is_the_hooks_error(engine_here,
                                                                   register_plugin):
    """Found by the hook-change fuzzer (tests/security/test_values.py): ``""`` is a valid
    string, but the select it makes (``1:accelerator_model=:ncpus=1``) is not, and the
    refusal named the select, as if the user had written it. It is the hook's error now,
    at qsub and at qalter, logged with the hook's name; nothing is stored or changed."""
    register_plugin(EmptiesAResource(), "emptier")
    eng = engine_here()
    root = Caller(0, ROLE_MANAGER)
    kept = eng.req_submit(root, {"Job_Name": "kept", "Hold_Types": "u"}, "true\n")
    for call in (lambda: eng.req_submit(root, {"Job_Name": "empty"}, "true\n"),
                 lambda: eng.req_alter(root, kept, {"Job_Name": "empty"})):
        with pytest.raises(PbsError) as refused:
            call()
        assert refused.value.code == 15136, refused.value.message
        assert "hook 'emptier' encountered an exception" in refused.value.message
    assert {a["Job_Name"] for a in eng.store.jobs().values()} == {"kept"}
    # A request refused without the hook's change too is the user's error, named so (it
    # was blamed on any hook that changed the Resource_List).
    bad = {"Job_Name": "timed", "Resource_List": {"arch": ""}}
    for call in (lambda: eng.req_submit(root, bad, "true\n"),
                 lambda: eng.req_alter(root, kept, bad)):
        with pytest.raises(PbsError) as refused:
            call()
        assert refused.value.code == 15014, refused.value.message
        assert refused.value.message.startswith(
            "Illegal attribute or resource value Resource_List.select: "), refused.value.message
        assert "arch=" in refused.value.message
    assert {a["Job_Name"] for a in eng.store.jobs().values()} == {"kept"}


@pytest.mark.parametrize(("attr", "value"), [("alarm", MAX_SECONDS + 1), ("alarm", 10 ** 400),
                                             ("freq", 10 ** 12)])
def test_an_alarm_or_freq_past_what_a_timer_holds_is_refused(attr, value):
    events = ("periodic",) if attr == "freq" else ("queuejob",)
    with pytest.raises(HookAttributeError, match=f"{attr} value .* must be at most"):
        check_attributes("x", HookAttributes(events=events, **{attr: value}), {attr})


SIGNALLER = """
    import os
    import signal

    @hookimpl
    def queuejob(event):
        if event.job.Job_Name == "group":
            os.killpg(0, signal.SIGKILL)    # "stop everything I started"
        if event.job.Job_Name == "number":
            event.reject(2)
        signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # in the server, with inprocess
    """


@pytest.mark.parametrize("isolation", ["process", "inprocess"])
def test_a_hook_cannot_stop_the_server_or_its_jobs_through_process_wide_state(
        dists, make_engine, isolation):
    """A process-mode hook killed its process group, the server's; a non-text reject made
    the runner raise; an in-process hook that ignored SIGCHLD made every job's shepherd
    lose its job (run 21 times, then held)."""
    site = plugin(dists, "sig", SIGNALLER, ("queuejob",)) + f'isolation = "{isolation}"\n'
    engine = make_engine(site)
    pid = engine.home.server_pid()
    if isolation == "process":
        with pytest.raises(PbsError):
            engine.submit(Job_Name="group")
    with pytest.raises(PbsError) as refused:
        engine.submit(Job_Name="number")
    assert refused.value.message == "2"
    job = engine.submit('cd "$PBS_O_WORKDIR"; echo ran >> runs\n', Job_Name="plain")
    attrs = engine.wait(job)
    assert (attrs["Exit_status"], attrs["run_count"]) == (0, 1)
    assert (engine.work / "runs").read_text() == "ran\n"
    assert engine.home.server_pid() == pid


ROUTER = """
    from pbsplug import Vnode

    @hookimpl
    def queuejob(event):
        if event.job.Job_Name == "route":
            event.job.queue = "wrokq"

    @hookimpl
    def exechost_startup(event):
        for name in ("gpu:0", "good1"):
            event.vnode_list[name] = Vnode(name, {"resources_available": {"ncpus": 64}})

    @hookimpl
    def execjob_begin(event):
        event.vnode_list["ghost"] = Vnode("ghost", {"resources_available": {"ncpus": 1000}})
        event.job.resources_used["vmem"] = "1gb"   # a site's own measure
    """


def test_what_a_hook_routes_adds_or_reports_is_checked_as_a_request_would_be(dists,
                                                                            make_engine):
    """Review: a queuejob hook routed jobs to a queue that does not exist (queued for
    ever, seen nowhere); a vnode named ``gpu:0`` read back from exec_vnode as ``gpu`` (its
    64 cpus given three times over), and execjob_begin made vnodes too; resources_used a
    host hook set was replaced at the job's end."""
    engine = make_engine(plugin(dists, "router", ROUTER,
                                ("queuejob", "exechost_startup", "execjob_begin")))
    with pytest.raises(PbsError) as refused:
        engine.submit(Job_Name="route")
    assert refused.value.code == 15018  # PBS's Unknown queue
    nodes = engine.client("stat_nodes")
    assert "good1" in nodes and "gpu:0" not in nodes
    assert "vnode 'gpu:0' not created: " in engine.log()
    job = engine.submit(Job_Name="plain")
    attrs = engine.wait(job)
    assert "ghost" not in engine.client("stat_nodes")
    assert "only an exechost_startup hook adds vnodes, not execjob_begin" in engine.log()
    assert attrs["resources_used"]["vmem"] == "1gb" and "walltime" in attrs["resources_used"]


def test_what_a_user_sends_cannot_forge_rows_flood_the_log_or_fail_a_request(
        inprocess_engine):
    """Review of the engine as a local user: a newline in a Variable_List value started a
    row of its own in ``qstat -f`` (a forged ``Job Id:`` block), C1 controls reached the
    terminal; each bad request that differed in the text it sent had its own log line
    (10,000 a second); ``reserve_start: Infinity`` was a System error with a traceback;
    the queue of a reservation that ended took anyone's jobs; a user's ``list pbshook``
    imported every installed plugin into the server before being refused."""
    from pbsplug.engine import api
    from pbsplug.engine.display import show_nonprint

    assert show_nonprint("a\nJob Id: 9.x\tb\x7f\x9bc é") == "a^JJob Id: 9.x\tb^?\\x9bc é"

    logged: list[str] = []
    server = object.__new__(api._Listener)
    server.drops, server.log = {}, lambda level, text: logged.append(text)
    for n in range(100):
        server.log_drop(1000, f"method {'X' * n!r}: requests are POST /v1/<request>")
    server.log_drop(1000, "malformed header line")
    assert len(logged) == 2 and "malformed header line" in logged[1]

    eng = inprocess_engine
    user = Caller(65534, ROLE_USER)
    with pytest.raises(PbsError) as bad:
        eng.req_resv_submit(user, {"reserve_start": float("inf"), "reserve_end": 10})
    assert bad.value.code == 15086  # PBS's Bad time specification(s)
    with pytest.raises(PbsError) as gone:
        eng.resvs.may_submit("R404")  # no reservation owns it (any more)
    assert gone.value.code == 15007
    done = eng.req_qmgr(user, "list pbshook PBS_nosuch")
    assert done["code"] != 0 and "nauthorized" in str(done), done


TAMPERER = """
    @hookimpl
    def resvsub(event):
        name = event.resv.Reserve_Name
        if name == "unset":
            event.resv.reserve_end = None
        elif name == "state":
            event.resv.reserve_state = "RESV_RUNNING"
        elif name == "queue":
            event.resv.queue = "workq"
        elif name == "longer":
            event.resv.reserve_duration = 7200
        elif name == "laterend":
            event.resv.reserve_end = event.resv.reserve_end + 600
        elif name == "clash":
            event.resv.reserve_end = event.resv.reserve_end + 600
            event.resv.reserve_duration = 60
        elif name == "past":
            event.resv.reserve_start = 1000

    @hookimpl
    def modifyjob(event):
        if event.job.Job_Name == "moved":
            event.job.queue = "nosuch"
    """


@pytest.mark.parametrize("name, why", [
    ("unset", "'reserve_end' cannot be unset"),
    ("state", "'reserve_state' is read-only"),
    ("queue", "'queue' is read-only"),
])
def test_a_resvsub_hook_cannot_unset_the_times_or_write_what_the_server_owns(
        dists, make_engine, name, why):
    """Audit: a resvsub hook that unset reserve_end stopped every poll of the server (and
    every restart); one that set reserve_state or queue ran a reservation nobody confirmed,
    whose end killed workq's jobs and deleted workq."""
    engine = make_engine(plugin(dists, "tamperer", TAMPERER, ("resvsub", "modifyjob")))
    start = time.strftime("%Y%m%d%H%M.%S", time.localtime(time.time() + 3600))
    done = engine.pbs("pbs_rsub", "-R", start, "-D", "00:10:00", "-N", name,
                      "-l", "select=1:ncpus=1")
    assert done.returncode != 0 and "encountered an exception" in done.stderr, done.stderr
    until(lambda: why in engine.log(), what="the hook's error in the server log")
    assert engine.client("stat_resvs") == {}
    assert "workq" in engine.client("stat_queues")
    assert engine.wait(engine.submit("true\n"))["Exit_status"] == 0  # the server goes on


def test_a_modifyjob_hook_cannot_move_a_job(dists, make_engine):
    """Audit: a modifyjob hook's job.queue was stored unchecked (a user's job ran inside
    another user's reservation; or sat in a queue that does not exist). PBS's hooks may
    not set queue there; a queuejob hook still routes a new job."""
    engine = make_engine(plugin(dists, "tamperer", TAMPERER, ("resvsub", "modifyjob")))
    job_id = engine.submit("true\n", Hold_Types="u")
    done = engine.pbs("qalter", "-N", "moved", job_id)
    assert done.returncode != 0 and "encountered an exception" in done.stderr, done.stderr
    until(lambda: "'queue' is read-only" in engine.log(), what="the hook's error logged")
    assert engine.job(job_id)["queue"] == "workq"


def test_the_state_follows_the_holds_a_queuejob_hook_leaves(dists, make_engine):
    """Audit: a queuejob hook that added a hold left the job Q (with a hold); one that
    removed the submitter's hold left it H with no hold, never to run."""
    engine = make_engine(plugin(dists, "holder", """
        @hookimpl
        def queuejob(event):
            if event.job.Job_Name == "hold":
                event.job.Hold_Types = "u"
            elif event.job.Job_Name == "free":
                event.job.Hold_Types = "n"
        """, ("queuejob",)))
    held = engine.submit("true\n", Job_Name="hold")
    assert engine.job(held)["job_state"] == "H"
    freed = engine.submit("true\n", Job_Name="free", Hold_Types="u")
    assert engine.wait(freed)["Exit_status"] == 0
    engine.client("delete", ids=[held])


STATE_SETTER = """
    from pbsplug import clock

    @hookimpl
    def runjob(event):
        name = event.job.Job_Name
        if name == "hold":
            event.job.Hold_Types = "u"
        elif name == "later":
            event.job.Execution_Time = int(clock.now()) + 3600
        elif name.startswith("after"):
            event.job.depend = "afterok:" + name[len("after"):]
        else:
            return
        event.reject("not now")

    @hookimpl
    def modifyjob(event):
        name = event.job.Job_Name
        if name == "free":
            event.job.Hold_Types = "n"
        elif name.startswith("after"):
            event.job.depend = "afterok:" + name[len("after"):]
"""


def test_a_refusing_runjob_hooks_hold_time_and_depend_set_the_state(dists, make_engine):
    """Audit: a runjob hook that refused a job and held it, gave it an Execution_Time to
    come or a depend left it Q: tried again at every cycle, its hook firing each time, and
    the depend never enforced. PBS's state follows them (H, W, H with s)."""
    engine = make_engine(plugin(dists, "states", STATE_SETTER, ("runjob", "modifyjob")))
    parent = engine.submit("true\n", Hold_Types="u")
    held = engine.submit("true\n", Job_Name="hold")
    later = engine.submit("true\n", Job_Name="later")
    waits = engine.submit("true\n", Job_Name=f"after{parent.split('.')[0]}")
    for job_id, state in ((held, "H"), (later, "W"), (waits, "H")):
        until(lambda job_id=job_id: engine.job(job_id).get("comment")
              == "Not Running: PBS Error: not now", what=f"{job_id} refused")
        assert engine.job(job_id)["job_state"] == state, engine.job(job_id)
    assert engine.job(held)["Hold_Types"] == "u"
    assert engine.job(waits)["Hold_Types"] == "s"
    assert engine.job(waits)["depend"] == f"afterok:{parent}"  # by its full id


def test_a_runjob_hooks_bad_depend_is_dropped_and_logged(dists, make_engine):
    engine = make_engine(plugin(dists, "states", STATE_SETTER, ("runjob",)))
    job_id = engine.submit("true\n", Job_Name="after424242")
    until(lambda: "runjob hook's depend dropped" in engine.log(), what="the drop logged")
    assert "depend" not in engine.job(job_id)
    assert engine.job(job_id)["job_state"] == "Q"


def test_a_modifyjob_hooks_hold_and_depend_set_the_state(dists, make_engine):
    """Audit: a modifyjob hook that removed a job's hold left it H with none, never to
    run; one that wrote a depend stored it unchecked and did not hold the job."""
    engine = make_engine(plugin(dists, "states", STATE_SETTER, ("modifyjob",)))
    freed = engine.submit("true\n", Hold_Types="u")
    engine.pbs("qalter", "-N", "free", freed, check=True)
    assert engine.wait(freed)["Exit_status"] == 0
    parent = engine.submit("true\n", Hold_Types="u")
    child = engine.submit("true\n", Hold_Types="u")
    engine.pbs("qalter", "-N", f"after{parent.split('.')[0]}", child, check=True)
    stored = engine.job(child)
    assert (stored["job_state"], stored["depend"]) == ("H", f"afterok:{parent}"), stored
    assert set(stored["Hold_Types"]) == {"s", "u"}
    engine.pbs("qrls", child, check=True)  # the user's hold goes; the dependency's stays
    assert (engine.job(child)["job_state"], engine.job(child)["Hold_Types"]) == ("H", "s")
    engine.pbs("qrls", parent, check=True)
    assert engine.wait(child)["Exit_status"] == 0
    bad = engine.pbs("qalter", "-N", "after424242", engine.submit("true\n", Hold_Types="u"))
    assert bad.returncode != 0 and "Unknown Job Id" in bad.stderr, bad.stderr


@pytest.mark.parametrize("name, duration, walltime", [("longer", 7200, "02:00:00"),
                                                      ("laterend", 1200, "00:20:00")])
def test_a_resvsub_hooks_window_is_made_whole(dists, make_engine, name, duration, walltime):
    """Audit: a resvsub hook that changed reserve_duration left reserve_end (and the
    walltime) as they were: a window with two lengths. The end follows a new duration, the
    duration a new end."""
    engine = make_engine(plugin(dists, "tamperer", TAMPERER, ("resvsub",)))
    start = int(time.time()) + 3600
    resv_id = engine.client("resv_submit", attrs={"Reserve_Name": name, "reserve_start": start,
                                                  "reserve_duration": 600})["id"]
    attrs = engine.client("stat_resvs")[resv_id]
    assert (attrs["reserve_start"], attrs["reserve_end"], attrs["reserve_duration"]) == (
        start, start + duration, duration), attrs
    assert attrs["Resource_List"]["walltime"] == walltime


@pytest.mark.parametrize("name", ["clash", "past"])
def test_a_resvsub_hooks_window_that_cannot_be_is_refused(dists, make_engine, name):
    engine = make_engine(plugin(dists, "tamperer", TAMPERER, ("resvsub",)))
    with pytest.raises(PbsError) as refused:
        engine.client("resv_submit", attrs={"Reserve_Name": name,
                                            "reserve_start": int(time.time()) + 3600,
                                            "reserve_duration": 600})
    assert (refused.value.code, refused.value.message) == (15086, "Bad time specification(s)")
    assert "resvsub hook 'tamperer' left a window that cannot be" in engine.log()
    assert engine.client("stat_resvs") == {}
