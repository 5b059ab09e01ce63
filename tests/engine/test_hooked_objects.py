"""What a request stores after its hooks is made of the hooks' changes as plain data
(`Outcome.changes`, taken under each hook's alarm), never of the event's objects after the
hooks: an in-process hook (trusted, but never to hold the server) that writes an object of
its own past the change record leaves nothing of it in the server, whose code would run it
with no alarm (review, session 46: a queuejob hook's value whose ``__eq__`` never returns
held the server in `_check_hooked`)."""

from __future__ import annotations

import select
import threading

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.server import ROLE_MANAGER, ROLE_USER, Caller
from pbsplug.objects import Job, PbsObject
from pbsplug.runner import Outcome

ROOT = Caller(0, ROLE_MANAGER)
#: A hang guard only: past it the hook's object lets go and the test fails (a request
#: that waits on it is the failure, whatever the time).
DEADLINE = 30.0


class Loop:
    """A hook's value whose comparison never returns (until the test lets it go)."""

    released = threading.Event()
    compared = 0

    def __eq__(self, other):
        type(self).compared += 1
        type(self).released.wait()
        return False

    __hash__ = None


def past_the_record(obj, name: str) -> None:
    """`obj`'s attribute `name` set to a `Loop` by dict's own method: no setter, no record."""
    dict.__setitem__(object.__getattribute__(obj, "_attrs"), name, Loop())


class Writer:
    """Writes a `Loop` past the record into the event's object of each request event."""

    plugin_info = PluginInfo(events=("queuejob", "modifyjob", "movejob", "resvsub",
                                     "modifyvnode"))

    def __init__(self, event: str):
        self.event = event

    def _write(self, event, obj, name: str) -> None:
        if event.type == self.event:
            past_the_record(obj, name)
            if obj is event.job:  # (and a legitimate change, which must still be stored)
                obj.comment = "set by the hook"

    @hookimpl
    def queuejob(self, event):
        self._write(event, event.job, "Account_Name")

    @hookimpl
    def modifyjob(self, event):
        self._write(event, event.job, "Account_Name")

    @hookimpl
    def movejob(self, event):
        self._write(event, event.job, "Account_Name")

    @hookimpl
    def resvsub(self, event):
        self._write(event, event.resv, "Reserve_Name")

    @hookimpl
    def modifyvnode(self, event):
        self._write(event, event.vnode, "comment")


@pytest.fixture
def loop():
    """`Loop`'s count reset, and a watchdog that lets it go at `DEADLINE`."""
    Loop.compared = 0
    Loop.released = threading.Event()
    watchdog = threading.Timer(DEADLINE, Loop.released.set)
    watchdog.daemon = True
    watchdog.start()
    yield Loop
    watchdog.cancel()
    Loop.released.set()


@pytest.mark.parametrize("event", ["queuejob", "modifyjob", "movejob", "resvsub",
                                   "modifyvnode"])
def test_a_hooks_object_past_the_record_never_reaches_the_server(engine_here, register_plugin,
                                                                 loop, event):
    register_plugin(Writer(event), "writer", isolation="inprocess", alarm=2)
    eng = engine_here()
    eng.req_qmgr(ROOT, "create queue other queue_type = execution, enabled = true, "
                       "started = true")
    if event == "resvsub":
        made = eng.req_resv_submit(Caller(1001, ROLE_USER), {
            "reserve_duration": 600, "reserve_start": int(eng.clock()) + 7200})
        stored = eng.store.get("resv", made["id"])
        assert stored["Reserve_Name"] == "NULL"
    elif event == "modifyvnode":
        (name,) = eng.store.all("node")
        eng.req_node_state(ROOT, [name], offline=True)
        stored = eng.store.get("node", name)
        assert "offline" in stored["state"]
        assert stored.get("comment") is None
    else:
        job_id = eng.req_submit(ROOT, {}, script="true\n")
        if event == "modifyjob":
            eng.req_alter(ROOT, job_id, {"Job_Name": "altered"})
        elif event == "movejob":
            assert eng.req_move(ROOT, "other", [job_id]) == [{"id": job_id}]
        stored = eng.store.job(job_id)
        assert "Account_Name" not in stored
        assert stored["comment"] == "set by the hook"
        assert stored["queue"] == ("other" if event == "movejob" else "workq")
        assert stored["Job_Name"] == ("altered" if event == "modifyjob" else "STDIN")
    assert (loop.compared, loop.released.is_set()) == (0, False), \
        "the server read the hook's object after its hooks"


class Sneak:
    """A runjob hook (which rejects) or an execjob_begin hook (which accepts) that writes
    into the job's Variable_List dict itself, past the record and its copy on read."""

    plugin_info = PluginInfo(events=("runjob", "execjob_begin"))

    def __init__(self, event: str):
        self.event = event

    def _write(self, event) -> None:
        if event.type == self.event:
            attrs = object.__getattribute__(event.job, "_attrs")
            dict.__setitem__(attrs["Variable_List"], "SNEAK", "1")
            if event.type == "runjob":
                event.reject("not now")

    @hookimpl
    def runjob(self, event):
        self._write(event)

    @hookimpl
    def execjob_begin(self, event):
        self._write(event)


@pytest.mark.parametrize("event", ["runjob", "execjob_begin"])
def test_a_start_hooks_write_past_the_record_into_a_nested_value_stays_the_hooks(
        engine_here, register_plugin, event):
    """The job's stored attributes after a start event are the server's, with the hooks'
    recorded changes: the event's job shared its nested values (Variable_List) with them,
    so an in-process hook writing into one reached what the server stored."""
    register_plugin(Sneak(event), "sneak", isolation="inprocess", alarm=2)
    eng = engine_here()
    job_id = eng.req_submit(ROOT, {"Variable_List": {"MINE": "x"}}, script="true\n")
    for _ in range(40):
        eng.poll()
        stored = eng.store.job(job_id)
        if stored["job_state"] != "Q" or "comment" in stored:
            break
    assert stored["Variable_List"]["MINE"] == "x"
    assert "SNEAK" not in stored["Variable_List"], stored["Variable_List"]


class Alterer:
    """An in-process modifyjob hook that notes the Variable_List dict its job holds."""

    plugin_info = PluginInfo(events=("modifyjob",))

    def __init__(self):
        self.seen: list[dict] = []

    @hookimpl
    def modifyjob(self, event):
        self.seen.append(object.__getattribute__(event.job, "_attrs")["Variable_List"])


def test_the_objects_values_are_copied_only_for_an_event_a_hook_runs_for(
        engine_here, register_plugin, copies):
    """`_event` makes its objects' values their own (deep copies, `own_values`) only when a
    hook will see them: qhold and qrls fire modifyjob with no hook (``hooks=()``) and an
    event no plugin implements runs none, so their jobs keep the stored values as they are
    (a periodic run's whole job_list was copied so); a qalter's modifyjob hook still gets a
    job of its own, equal to the stored one."""
    hook = Alterer()
    register_plugin(hook, "alterer", isolation="inprocess", alarm=2)
    eng = engine_here()
    job_id = eng.req_submit(ROOT, {"Variable_List": {"MINE": "x"}}, script="true\n")
    copied = copies
    assert eng.req_hold(ROOT, [job_id]) == [{"id": job_id}]
    assert eng.req_release(ROOT, [job_id]) == [{"id": job_id}]
    assert copied == []
    stored = eng.store.job(job_id)
    job = Job(job_id, stored)
    assert eng._event("movejob", ROOT, job=job).accepted  # (no plugin implements it)
    assert object.__getattribute__(job, "_attrs")["Variable_List"] is stored["Variable_List"]
    assert copied == []

    eng.req_alter(ROOT, job_id, {"Job_Name": "altered"})
    assert copied == [job_id, job_id]  # (modifyjob's job and job_o)
    (given,) = hook.seen
    job = Job(job_id, stored)
    assert eng._event("modifyjob", ROOT, job=job).accepted
    assert hook.seen[-1] is object.__getattribute__(job, "_attrs")["Variable_List"]
    assert hook.seen[-1] is not stored["Variable_List"]
    assert hook.seen[-1] == stored["Variable_List"] == given


class Digger:
    """A modifyjob and periodic hook that writes into the Variable_List dict of each job
    it is given itself, past the setters and their copy on read, and sets the modifyjob
    job's comment (a change that must come back)."""

    plugin_info = PluginInfo(events=("modifyjob", "periodic"))

    @hookimpl
    def modifyjob(self, event):
        attrs = object.__getattribute__(event.job, "_attrs")
        dict.__setitem__(attrs["Variable_List"], "DUG", "1")
        event.job.comment = "dug"

    @hookimpl
    def periodic(self, event):
        for job in event.job_list.values():
            dict.__setitem__(object.__getattribute__(job, "_attrs")["Variable_List"],
                             "DUG", "1")


class Quiet:
    """A modifyjob hook that does nothing."""

    plugin_info = PluginInfo(events=("modifyjob",))

    @hookimpl
    def modifyjob(self, event):
        pass


@pytest.fixture
def copies(monkeypatch):
    """The names of the objects `own_values` is called on, in call order."""
    copied: list[str] = []
    own_values = PbsObject.own_values

    def spied(obj):
        copied.append(obj.name)
        own_values(obj)

    monkeypatch.setattr(PbsObject, "own_values", spied)
    return copied


def test_a_chain_of_forked_hooks_only_gets_the_objects_uncopied(engine_here, register_plugin,
                                                                 copies):
    """A forked hook writes in its own process's memory, and only its changes come back,
    as data replayed through the setters: `_event` copies nothing for a chain of such hooks
    (a debug one too, whose ``.in`` the runner makes here), and the server's own values it
    handed over, shared with the event's job, are as they were after a hook wrote into
    them past the setters. A periodic run's queued jobs were each copied so."""
    register_plugin(Digger(), "digger", isolation="process", alarm=10, freq=60)
    register_plugin(Quiet(), "quiet", isolation="process", alarm=10, order=2, debug=True)
    eng = engine_here()
    job_id = eng.req_submit(ROOT, {"Variable_List": {"MINE": "x"}}, script="true\n")
    eng.req_alter(ROOT, job_id, {"Job_Name": "altered"})
    assert copies == []
    stored = eng.store.job(job_id)
    assert stored["Variable_List"]["MINE"] == "x"
    assert "DUG" not in stored["Variable_List"]
    assert (stored["Job_Name"], stored["comment"]) == ("altered", "dug")
    wanted = dict(stored["Variable_List"])

    job = Job(job_id, stored)
    assert eng._event("modifyjob", ROOT, job=job).accepted
    assert copies == []
    assert object.__getattribute__(job, "_attrs")["Variable_List"] is stored["Variable_List"]
    assert stored["Variable_List"] == wanted
    assert job.comment == "dug"  # (replayed from the hook's process)

    eng.periodic.run("periodic", "digger")
    assert copies == []
    assert eng.runner.trace[-1].hook == "digger"
    assert eng.runner.trace[-1].outcome == "accept"
    assert eng.store.job(job_id)["Variable_List"] == wanted

    # A started chain (`Runner.start`: a pbsuser hook's) is copied, forked hooks only:
    # a process it forks after its first forks while the server serves.
    job = Job(job_id, stored)
    started = eng._event("modifyjob", ROOT, start=True, job=job)
    assert copies == [job_id]
    while not isinstance(started, Outcome):
        select.select([started.fd], [], [], DEADLINE)
        started = started.step() or started
    assert started.accepted
    assert stored["Variable_List"] == wanted


@pytest.mark.parametrize("trusted", ["digger", "quiet"])
def test_a_chain_with_an_in_process_hook_still_gets_copies(engine_here, register_plugin,
                                                          copies, trusted):
    """One in-process hook in the chain, before or after a forked one, and the objects are
    copied: it could write into the server's values past the setters."""
    register_plugin(Digger(), "digger", alarm=10,
                    isolation="inprocess" if trusted == "digger" else "process")
    register_plugin(Quiet(), "quiet", alarm=10, order=2,
                    isolation="inprocess" if trusted == "quiet" else "process")
    eng = engine_here()
    job_id = eng.req_submit(ROOT, {"Variable_List": {"MINE": "x"}}, script="true\n")
    eng.req_alter(ROOT, job_id, {"Job_Name": "altered"})
    assert copies == [job_id, job_id]  # (modifyjob's job and job_o)
    stored = eng.store.job(job_id)
    assert stored["Variable_List"]["MINE"] == "x"
    assert "DUG" not in stored["Variable_List"]
    assert stored["comment"] == "dug"

    copies.clear()
    job = Job(job_id, stored)
    outcome = eng._event("modifyjob", ROOT, hooks=("quiet",), job=job)
    assert outcome.accepted
    assert copies == ([job_id] if trusted == "quiet" else [])
