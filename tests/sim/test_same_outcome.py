"""One plugin, one small workload, on the local engine (a real server, real job processes)
and in the simulator: the same outcome for every job. Both apply a hook's answer through
`pbsplug.lifecycle`; this checks that they also reach it the same way (the events fired, the
attributes a hook reads, what happens to the job next)."""

from __future__ import annotations

import importlib
import json
import sys

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home
from pbsplug.engine.server import Engine
from pbsplug.engine.testing import LocalEngine, make_root, remove_root
from pbsplug.objects import Job, Resources, Vnode
from pbsplug.sim.carried import Carried
from pbsplug.sim.engine import EPOCH, Simulator, policy_settings
from pbsplug.sim.machine import uniform
from pbsplug.sim.records import COMPLETED, FAILED, REJECTED, TraceJob
from pbsplug.units import format_duration

from .helpers import Sink, guard_periodic_runs

#: Each job is told by its walltime: 111 s is refused at submission, 333 s refused by its
#: first execjob_begin (requeued, run again), 444 s deleted by execjob_begin, 555 s asks
#: a rerun at its first execjob_end; 666 s asks one too, only if its end hooks see its
#: Exit_status and resources_used, as PBS's MoM sets them before them; 222 s is left alone.
SOURCE = '''
from pbsplug import PluginInfo, hookimpl
from pbsplug.units import parse_duration

EVENTS = ("queuejob", "execjob_begin", "execjob_end")
plugin_info = PluginInfo(api="1.5", events=EVENTS, sim_safe=EVENTS)


def _wall(job):
    return parse_duration(str(job.Resource_List["walltime"]))


@hookimpl
def queuejob(event):
    if _wall(event.job) == 111:
        event.reject("no jobs of 111 s")


@hookimpl
def execjob_begin(event):
    wall = _wall(event.job)
    if wall == 333 and event.job.run_count == 1:
        event.reject("not on the first try")
    elif wall == 444:
        event.job.delete()
        event.reject("never here")


@hookimpl
def execjob_end(event):
    if _wall(event.job) == 555 and event.job.run_count == 1:
        event.job.rerun()
    if _wall(event.job) == 666 and event.job.run_count == 1 and \
            event.job.Exit_status == 0 and event.job.resources_used["walltime"] is not None:
        event.job.rerun()
'''

WALLTIMES = (111, 222, 333, 444, 555, 666)
EXPECTED = {111: ("refused", "no jobs of 111 s"), 222: ("ran", 1), 333: ("ran", 2),
            444: ("deleted", 1), 555: ("ran", 2), 666: ("ran", 2)}


@pytest.fixture
def same_plugin(dists, monkeypatch):
    """The plugin as a distribution: the engine's server finds it on its PYTHONPATH, the
    simulator imports the same module."""
    module = dists.add("same", SOURCE)
    monkeypatch.syspath_prepend(str(dists.root))
    yield importlib.import_module(module)
    sys.modules.pop(module, None)


def engine_outcomes(dists) -> dict[int, tuple]:
    root = make_root()
    engine = LocalEngine(root, "[plugins.same]\nenabled = true\n", env=dists.env()).start()
    try:
        out: dict[int, tuple] = {}
        ids = {}
        for wall in WALLTIMES:
            try:
                ids[wall] = engine.submit("true\n", Resource_List={
                    "select": "1:ncpus=1", "walltime": format_duration(wall)})
            except PbsError as exc:
                out[wall] = ("refused", exc.message)
        for wall, job_id in ids.items():
            attrs = engine.wait(job_id)
            deleted = str(attrs.get("comment", "")).startswith(
                "Job deleted by execjob_begin hook")
            out[wall] = ("deleted" if deleted else "ran", int(attrs["run_count"]))
        return out
    finally:
        engine.stop()
        remove_root(root)


def sim_outcomes(plugins, tmp_path) -> dict[int, tuple]:
    sink = Sink()
    jobs = [TraceJob(str(i), i + 1, float(10 * i), 5.0, 1, float(wall))
            for i, wall in enumerate(WALLTIMES)]
    Simulator(uniform(2, 1, "test"), sink, plugins=plugins, policy=policy_settings("pbs"),
              workdir=tmp_path / "work").run(jobs)
    out = {}
    for result in sink.jobs:
        wall = int(result.job.walltime)
        if result.final_state == REJECTED:
            out[wall] = ("refused", (result.reason or "").removeprefix("queuejob: "))
        else:
            assert result.final_state in (COMPLETED, FAILED)
            out[wall] = ("deleted" if result.final_state == FAILED else "ran",
                         result.run_count)
    return out


def test_one_plugin_has_the_same_outcome_on_the_engine_and_in_the_simulator(
        same_plugin, dists, register_plugin, pbsplug_plugins, tmp_path):
    register_plugin(same_plugin, "same", isolation="inprocess")
    assert sim_outcomes(pbsplug_plugins, tmp_path) == EXPECTED
    assert engine_outcomes(dists) == EXPECTED


#: What a vnode carries that the engine works out from the jobs and reservations: a hook
#: may write them (no error), but neither the engine nor a replay keeps the write.
DERIVED = ("jobs", "resv", "suspended_jobs")


def _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, *, runs: int, hosts: int,
                    jobs: int) -> Simulator:
    """A replay, with the registered plugins, of `jobs` one-cpu jobs of a million seconds
    (ids 1, 2...) all submitted at 0 on `hosts` one-cpu hosts, stopped at its periodic run
    after the `runs`-th (`guard_periodic_runs`)."""
    guard_periodic_runs(monkeypatch, most=runs)
    sim = Simulator(uniform(hosts, 1, "test"), Sink(), plugins=pbsplug_plugins,
                    policy=policy_settings("pbs"), workdir=tmp_path / "work")
    with pytest.raises(RuntimeError, match="the replay goes on"):
        sim.run([TraceJob(str(i), i, 0.0, 1e6, 1, 1e6) for i in range(1, jobs + 1)])
    return sim


class DerivedWriter:
    """A periodic hook that notes what the first vnode (by name) reads for each of
    `DERIVED`, then writes each of them."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.seen: list[dict[str, object]] = []

    @hookimpl
    def periodic(self, event):
        vnode = event.vnode_list[min(event.vnode_list)]
        self.seen.append({attr: vnode.get(attr) for attr in DERIVED})
        vnode.jobs = ["9.elsewhere/0"]
        vnode.resv = "R9.elsewhere"
        vnode.suspended_jobs = ["9.elsewhere"]
        vnode.comment = "written"  # (a change of its own, kept: the hook's writes count)


def test_a_hooks_write_to_a_vnodes_derived_attributes_is_dropped_on_the_engine_and_in_a_replay(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """A periodic hook writes a vnode's jobs, resv and suspended_jobs, which the engine
    derives and never stores (`lifecycle.hook_vnode_changes`): the write is no error, and
    the hook's next run reads them as derived again, on the engine and in a replay alike.
    The replay kept resv and suspended_jobs, which its vnodes then carried for good."""
    hook = DerivedWriter()
    register_plugin(hook, "derived", isolation="inprocess", freq=3600)

    eng = Engine(Home(tmp_path / "home"), plugins=pbsplug_plugins)
    try:
        eng.periodic.run("periodic", "derived")
        eng.periodic.run("periodic", "derived")
        assert [run.outcome for run in list(eng.runner.trace)[-2:]] == ["accept", "accept"]
        stored = eng.store.all("node")
        name = min(stored)
    finally:
        eng.runner.reap()
        eng.close()
    assert len(hook.seen) == 2 and hook.seen[1] == hook.seen[0]
    assert hook.seen[0] == {"jobs": [], "resv": None, "suspended_jobs": None}
    assert stored[name]["comment"] == "written"
    assert not set(DERIVED) & set(stored[name])

    hook.seen.clear()
    sim = _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=3, hosts=2, jobs=1)
    assert len(hook.seen) >= 2 and all(seen == hook.seen[0] for seen in hook.seen)
    # (n0 holds job 1 on its cpu: the engine's would list it so)
    assert hook.seen[0] == {"jobs": ["1/0"], "resv": None, "suspended_jobs": None}
    assert sim.vnode_attrs["n0"]["comment"] == "written"
    assert not set(DERIVED) & set(sim.vnode_attrs["n0"])


class JobsReader:
    """A periodic hook that notes the first vnode's (by name) ``jobs`` at each run."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.seen: list[object] = []

    @hookimpl
    def periodic(self, event):
        self.seen.append(event.vnode_list[min(event.vnode_list)].jobs)


#: On a vnode of 2 cpus: jobs 1 and 2 run (one cpu each), 1 ends and 3 takes its cpu, then
#: all end. What a periodic hook reads of the vnode's ``jobs`` at each step, on the engine
#: (its `CpuSlots`) and in a replay alike: each job on each cpu it holds, numbered as PBS
#: numbers them (3 takes cpu 0, which 1 freed), and [] on the idle vnode.
JOBS_SEEN = [[], ["1/0", "2/1"], ["2/1"], ["3/0", "2/1"], []]


def test_a_vnodes_jobs_in_a_periodic_event_are_the_engines_in_a_replay(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """A replay's vnode listed in its ``jobs`` only the jobs holding no cpus there, and
    gave None where the engine gives []: a busy vnode read as idle."""
    hook = JobsReader()
    register_plugin(hook, "jobs", isolation="inprocess", freq=60)

    eng = Engine(Home(tmp_path / "home"), plugins=pbsplug_plugins)
    try:
        name = min(eng.store.all("node"))
        node = eng.store.get("node", name)
        node["resources_available"]["ncpus"] = 2
        running: dict[str, dict] = {}
        steps = [(), ("1", "2"), ("2",), ("2", "3"), ()]
        for stime, step in enumerate(steps):
            with eng.store.transaction() as st:
                st.put("node", name, node)
                for job_id in [j for j in running if j not in step]:
                    st.delete_job(job_id)
                    del running[job_id]
                for job_id in [j for j in step if j not in running]:
                    running[job_id] = {"job_state": "R", "queue": "workq", "stime": stime + 1,
                                       "exec_vnode": f"({name}:ncpus=1)",
                                       "Resource_List": {"select": "1:ncpus=1"}}
                    st.add_job(int(job_id), job_id, running[job_id], None)
            eng.periodic.run("periodic", "jobs")
    finally:
        eng.runner.reap()
        eng.close()
    assert hook.seen == JOBS_SEEN

    hook.seen.clear()
    # 1 runs 0-100, 2 runs 10-1000, 3 comes at 150 (1's cpu), 4 runs 1100-1101: the runs
    # every 60 s see 1 and 2 (60), 2 (120), 2 and 3 (180 to 960), none (1020, 1080).
    jobs = [TraceJob("1", 1, 0.0, 100.0, 1, 100.0), TraceJob("2", 2, 10.0, 990.0, 1, 990.0),
            TraceJob("3", 3, 150.0, 850.0, 1, 850.0), TraceJob("4", 4, 1100.0, 1.0, 1, 1.0)]
    guard_periodic_runs(monkeypatch, most=20)
    sim = Simulator(uniform(1, 2, "test"), Sink(), plugins=pbsplug_plugins,
                    policy=policy_settings("pbs"), workdir=tmp_path / "work")
    sim.run(jobs)
    assert hook.seen == JOBS_SEEN[1:3] + [JOBS_SEEN[3]] * 14 + [[]] * 2


class JobEventJobsReader:
    """An execjob_begin and execjob_end hook that notes each vnode's ``jobs``."""

    plugin_info = PluginInfo(events=("execjob_begin", "execjob_end"),
                             sim_safe=("execjob_begin", "execjob_end"))

    def __init__(self):
        self.seen: list[tuple[str, dict[str, object]]] = []

    @hookimpl
    def execjob_begin(self, event):
        self.seen.append(("begin", {n: v.jobs for n, v in event.vnode_list.items()}))

    @hookimpl
    def execjob_end(self, event):
        self.seen.append(("end", {n: v.jobs for n, v in event.vnode_list.items()}))


def test_a_jobs_own_events_carry_no_vnode_jobs_on_the_engine_nor_in_a_replay(
        register_plugin, pbsplug_plugins, tmp_path):
    """A job's own events carry its vnodes as the engine stores them, which never hold the
    ``jobs`` it derives: None there, in a replay too. A replay's execjob_begin listed a
    chunk of no cpus (``1/0``)."""
    eng = Engine(Home(tmp_path / "home"), plugins=pbsplug_plugins)
    try:
        name = min(eng.store.all("node"))
        vnodes = eng._job_vnodes({"exec_vnode": f"({name}:ncpus=0)"})
    finally:
        eng.close()
    assert {n: v.jobs for n, v in vnodes.items()} == {name: None}

    hook = JobEventJobsReader()
    register_plugin(hook, "jobevents", isolation="inprocess")
    Simulator(uniform(2, 1, "test"), Sink(), plugins=pbsplug_plugins,
              policy=policy_settings("pbs"), workdir=tmp_path / "work").run(
        [TraceJob("1", 1, 0.0, 10.0, 1, 10.0, select="1:ncpus=0"),
         TraceJob("2", 2, 0.0, 10.0, 1, 10.0)])
    assert sorted(hook.seen, key=str) == [("begin", {"n0": None}), ("begin", {"n0": None}),
                                          ("end", {"n0": None}), ("end", {"n0": None})]


#: A plugin that notes, for each of a job's own events, what each of its vnodes carries
#: that the server could derive from the running jobs: its state, resources_assigned and
#: jobs (one JSON line per vnode, in the file SEEN, which the test puts in).
VNODES_SOURCE = '''
import json

from pbsplug import PluginInfo, hookimpl

EVENTS = ("execjob_begin", "execjob_prologue", "execjob_launch", "execjob_epilogue",
          "execjob_end")
plugin_info = PluginInfo(api="1.5", events=EVENTS, sim_safe=EVENTS)


def note(event):
    with open(SEEN, "a") as out:
        for vnode in event.vnode_list.values():
            assigned = vnode.get("resources_assigned")
            out.write(json.dumps([event.type, vnode.get("state"),
                                  dict(assigned) if assigned else None,
                                  vnode.get("jobs")]) + "\\n")


@hookimpl
def execjob_begin(event):
    note(event)


@hookimpl
def execjob_prologue(event):
    note(event)


@hookimpl
def execjob_launch(event):
    note(event)


@hookimpl
def execjob_epilogue(event):
    note(event)


@hookimpl
def execjob_end(event):
    note(event)
'''

#: What each event's vnode carries, on the engine and in a replay alike: its stored state
#: (the engine's start and end events read the stored rows: no job-busy), and neither
#: resources_assigned nor jobs, which the server derives and never stores.
VNODES_SEEN = [[event, "free", None, None] for event in (
    "execjob_begin", "execjob_prologue", "execjob_launch", "execjob_epilogue", "execjob_end")]


@pytest.fixture
def vnodes_plugin(dists, monkeypatch, tmp_path):
    module = dists.add("vnodes", f"SEEN = {str(tmp_path / 'seen')!r}\n" + VNODES_SOURCE)
    monkeypatch.syspath_prepend(str(dists.root))
    yield importlib.import_module(module)
    sys.modules.pop(module, None)


def test_a_jobs_own_events_carry_its_vnodes_as_stored_on_the_engine_and_in_a_replay(
        vnodes_plugin, dists, register_plugin, pbsplug_plugins, tmp_path):
    """The engine gives a job's own events (execjob_*) its vnodes as it stores them. A
    replay gave them the view of the server's events: job-busy on a vnode the job filled,
    and resources_assigned."""
    seen = tmp_path / "seen"
    root = make_root()
    engine = LocalEngine(root, "[plugins.vnodes]\nenabled = true\n", env=dists.env()).start()
    try:
        engine.wait(engine.submit("true\n", Resource_List={"select": "1:ncpus=1",
                                                           "walltime": "00:05:00"}))
    finally:
        engine.stop()
        remove_root(root)
    assert [json.loads(line) for line in seen.read_text().splitlines()] == VNODES_SEEN

    seen.unlink()
    register_plugin(vnodes_plugin, "vnodes", isolation="inprocess")
    # (each host has one cpu: the job fills its vnode)
    Simulator(uniform(2, 1, "test"), Sink(), plugins=pbsplug_plugins,
              policy=policy_settings("pbs"), workdir=tmp_path / "work").run(
        [TraceJob("1", 1, 0.0, 10.0, 1, 300.0)])
    assert [json.loads(line) for line in seen.read_text().splitlines()] == VNODES_SEEN


class PastTheSetters:
    """A server event's hook (exechost_startup, periodic) that notes the first vnode's (by
    name) ncpus, then writes 99 there past the setters (``dict.__setitem__``): a write that
    no server sees nor keeps. It keeps the last vnode's object of each event (`others`)."""

    plugin_info = PluginInfo(events=("exechost_startup", "periodic"),
                             sim_safe=("exechost_startup", "periodic"))

    def __init__(self):
        self.seen: list[object] = []
        self.others: list[object] = []

    def _note(self, event):
        self.others.append(event.vnode_list[max(event.vnode_list)])
        vnode = event.vnode_list[min(event.vnode_list)]
        self.seen.append(vnode.resources_available["ncpus"])
        dict.__setitem__(vnode.resources_available, "ncpus", 99)

    @hookimpl
    def exechost_startup(self, event):
        self._note(event)

    @hookimpl
    def periodic(self, event):
        self._note(event)


def test_a_hooks_write_past_the_setters_reaches_no_later_event_on_the_engine_nor_in_a_replay(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """Each event's vnode objects are its own: the engine makes them afresh for each, so
    what a hook left on them that was never applied is gone at the next event. A replay
    carried an unchanged vnode's object again, with the hook's leftover on it."""
    hook = PastTheSetters()
    register_plugin(hook, "setters", isolation="inprocess", freq=3600)

    eng = Engine(Home(tmp_path / "home"), plugins=pbsplug_plugins)
    try:
        name = min(eng.store.all("node"))
        ncpus = eng.store.get("node", name)["resources_available"]["ncpus"]
        eng.periodic.run("periodic", "setters")
        eng.periodic.run("periodic", "setters")
    finally:
        eng.runner.reap()
        eng.close()
    assert hook.seen == [ncpus] * 3

    hook.seen.clear()
    hook.others.clear()
    _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=3, hosts=2, jobs=1)
    assert len(hook.seen) >= 3 and hook.seen == [1] * len(hook.seen)
    # (an object nothing changed is carried again: the power plugin keeps what it read of
    # each, docs/plugin-authors.md)
    assert all(other is hook.others[0] for other in hook.others)


class Nasty(int):
    """A hook's own int: comparing it runs the hook's code, which the caller never does."""

    compared = 0

    def __eq__(self, other):
        Nasty.compared += 1
        raise RuntimeError("a hook's __eq__ ran in the simulator")

    __hash__ = int.__hash__


class PastTheSettersTyped:
    """A periodic hook that notes the first vnode's ncpus (its value and exact type) and
    the first queued job's Resource_List.ncpus, then writes over both past the setters
    (``dict.__setitem__``): in turn True, 1.0 and a `Nasty` 1 on the vnode (each equal
    to its 1), 99 on the job."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.seen: list[object] = []
        self.jobs: list[object] = []
        self.writes = [True, 1.0, Nasty(1)]

    @hookimpl
    def periodic(self, event):
        vnode = event.vnode_list[min(event.vnode_list)]
        ncpus = vnode.resources_available["ncpus"]
        self.seen.append((type(ncpus).__name__, ncpus))
        dict.__setitem__(vnode.resources_available, "ncpus",
                         self.writes[(len(self.seen) - 1) % 3])
        for job in event.job_list.values():
            self.jobs.append(job.Resource_List["ncpus"])
            dict.__setitem__(job.Resource_List, "ncpus", 99)


def test_a_hooks_write_past_the_setters_of_another_type_reaches_no_later_run(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """Each periodic run's vnodes and queued jobs are its own, as on the engine: what a
    hook wrote past the setters is gone at the next run, even a value equal to the one it
    replaced (True, 1.0 for 1), and the simulator never compares a hook's object (its
    ``__eq__`` raised inside the replay). A queued job's object was the one the
    schedulers read, carried to every run."""
    hook = PastTheSettersTyped()
    register_plugin(hook, "typed", isolation="inprocess", freq=3600)
    Nasty.compared = 0
    # (two one-cpu hosts: the third job stays queued behind the first two)
    _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=6, hosts=2, jobs=3)
    assert len(hook.seen) >= 4 and hook.seen == [("int", 1)] * len(hook.seen)
    assert hook.jobs == [1] * len(hook.seen)
    assert Nasty.compared == 0


class ReadsOnly:
    """A periodic hook that reads each vnode's unset resources_used and its jobs (a read
    that gives it a copy of its own), and keeps the objects it got."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.got: list[dict[str, object]] = []

    @hookimpl
    def periodic(self, event):
        for vnode in event.vnode_list.values():
            assert not vnode.resources_used
            assert type(vnode.jobs) is list
        self.got.append(dict(event.vnode_list))


def test_a_vnode_a_hook_only_read_is_carried_to_the_next_run(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """Reading an unset resource attribute adds an empty mapping to the object, and
    reading a list attribute gives the hook a copy: neither is a change, and the object
    is carried again (a replay made every such vnode again at every run, and the power
    plugin, which keeps what it read of each object, read them all again)."""
    hook = ReadsOnly()
    register_plugin(hook, "reads", isolation="inprocess", freq=3600)
    _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=3, hosts=2, jobs=1)
    assert len(hook.got) == 3
    for later in hook.got[1:]:
        assert all(later[name] is hook.got[0][name] for name in later)


def test_a_vnode_object_has_no_attribute_of_its_own():
    """A vnode holds everything in its slots: an attribute of the Python object's own,
    which a replay's comparison of the object would not see, cannot be set."""
    vnode = Vnode("n0", {"state": "free"})
    with pytest.raises(AttributeError):
        vnode._x = 1


class UseTimes:
    """Notes, at each of a job's execjob_begin and execjob_end, its vnode's
    last_used_time and last_state_change_time."""

    plugin_info = PluginInfo(events=("execjob_begin", "execjob_end"),
                             sim_safe=("execjob_begin", "execjob_end"))

    def __init__(self):
        self.seen: list[tuple[str, str, object, object]] = []

    def _note(self, event):
        for vnode in event.vnode_list.values():
            self.seen.append((event.job.id, event.type, vnode.last_used_time,
                              vnode.last_state_change_time))

    @hookimpl
    def execjob_begin(self, event):
        self._note(event)

    @hookimpl
    def execjob_end(self, event):
        self._note(event)


def test_a_jobs_own_events_see_its_vnodes_use_times_as_before_its_start_or_end(
        register_plugin, pbsplug_plugins, tmp_path):
    """The engine writes a vnode's last_used_time when a job's end hooks are done
    (`Engine._finish`) and its last_state_change_time (free to job-busy and back) when
    the start or end hooks are done (`_track_states`): these events see the times before
    the job's start or end. A replay wrote both before them (at execjob_end,
    last_used_time was the job's own end)."""
    hook = UseTimes()
    register_plugin(hook, "times", isolation="inprocess")
    # (one one-cpu host: job 1 runs from 5 to 15, job 2 from 20 to 30)
    Simulator(uniform(1, 1, "test"), Sink(), plugins=pbsplug_plugins,
              policy=policy_settings("pbs"), workdir=tmp_path / "work").run(
        [TraceJob("1", 1, 5.0, 10.0, 1, 100.0), TraceJob("2", 2, 20.0, 10.0, 1, 100.0)])
    # (the replay starts at the first submit, EPOCH + 5: its vnodes are made then, as the
    # engine makes its own with both times from its clock; they were made at 0)
    assert hook.seen == [("1", "execjob_begin", EPOCH + 5, EPOCH + 5),
                         ("1", "execjob_end", EPOCH + 5, EPOCH + 5),
                         ("2", "execjob_begin", EPOCH + 15, EPOCH + 15),
                         ("2", "execjob_end", EPOCH + 15, EPOCH + 20)]


class KeptFromAnEarlierRun:
    """A periodic hook that gives the first vnode (by name) a list attribute of the
    plugin's own (``tags``) at its first run; at its second, reads it (a copy of its own)
    and keeps that list; at its third, appends to the list it kept, an object of an
    earlier run, which no server reads again, and touches nothing of this run's; from its
    fourth, notes the vnode's tags."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.runs = 0
        self.kept: list[str] = []
        self.seen: list[list[str]] = []

    @hookimpl
    def periodic(self, event):
        self.runs += 1
        vnode = event.vnode_list[min(event.vnode_list)]
        if self.runs == 1:
            vnode.tags = ["a"]
        elif self.runs == 2:
            self.kept = vnode.tags
        elif self.runs == 3:
            self.kept.append("b")
        else:
            self.seen.append(list(vnode.tags))


def test_what_a_hook_does_to_an_earlier_runs_object_is_no_change_of_a_later_run(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """Each periodic run's vnodes are its own, as the engine makes them afresh: a list
    the hook read at one run and changes at the next is no change of either run. A
    replay carried the vnode's object to the next run with its note of what the hook had
    read (`PbsObject._read`), and took the change to the kept list for a write of the
    later run, which it applied."""
    hook = KeptFromAnEarlierRun()
    register_plugin(hook, "kept", isolation="inprocess", freq=3600)
    _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=5, hosts=2, jobs=1)
    assert hook.runs == 5
    assert hook.seen == [["a"], ["a"]]


class HidesItsChange:
    """A periodic hook that, at its first run, sets the first vnode's comment and unsets
    it again (the object then holds what it held: a change recorded all the same), and
    takes that vnode out of the event's vnode_list, where no change of it is taken; it
    does nothing at later runs."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.runs = 0

    @hookimpl
    def periodic(self, event):
        self.runs += 1
        if self.runs == 1:
            name = min(event.vnode_list)
            vnode = event.vnode_list[name]
            vnode.comment = "hidden"
            vnode.comment = None
            del event.vnode_list[name]


def test_a_change_recorded_at_one_run_is_reported_at_no_later_run(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """A run's vnodes start with no change recorded, as the engine's new objects do: a
    later run whose hook changes nothing reports no change. A replay carried the vnode's
    object, unchanged, with the record of the first run (`PbsObject._changes`), and the
    second run reported that change as its own."""
    hook = HidesItsChange()
    register_plugin(hook, "hides", isolation="inprocess", freq=3600)
    guard_periodic_runs(monkeypatch, most=3)
    reported = []
    apply = Simulator._vnode_changes

    def noted(self, outcome):
        reported.append(outcome.changes.get("vnode_list"))
        apply(self, outcome)

    monkeypatch.setattr(Simulator, "_vnode_changes", noted)
    sim = Simulator(uniform(2, 1, "test"), Sink(), plugins=pbsplug_plugins,
                    policy=policy_settings("pbs"), workdir=tmp_path / "work")
    with pytest.raises(RuntimeError, match="the replay goes on"):
        sim.run([TraceJob("1", 1, 0.0, 1e6, 1, 1e6)])
    assert hook.runs == 3
    assert reported == [None] * 3


def test_a_carried_object_starts_the_next_event_as_a_new_one():
    """`Carried.again`: an unchanged object comes with no change recorded, no read noted
    and a job's own slots as new; one a hook renamed past the setters is not carried."""
    vnode = Vnode("n0", {"state": "free", "jobs": []})
    carried = Carried.of(vnode)
    assert carried is not None
    vnode._changes["comment"] = None
    vnode._read = {"jobs": []}
    assert carried.again() is vnode
    assert vnode._changes == {} and vnode._read is None
    job = Job("1.s", {"job_state": "Q"})
    carried_job = Carried.of(job)
    assert carried_job is not None
    job._action_allowed = False
    assert carried_job.again() is job and job._action_allowed is True
    vnode._name = "n9"
    assert carried.again() is None


def test_an_item_moved_from_one_list_to_the_next_is_a_change():
    """Past the setters (``list.pop``, ``list.insert`` on an object's own lists), the last
    item of one list moved to the front of the next leaves every value in its place in
    the object's values taken end to end: each list is compared on its own."""
    vnode = Vnode("n0", {"state": "free", "tags": ["x", "y"], "jobs": ["z"]})
    carried = Carried.of(vnode)
    assert carried is not None
    tags, jobs = vnode._attrs["tags"], vnode._attrs["jobs"]
    jobs.insert(0, tags.pop())
    assert carried.again() is None


#: Each slot of a vnode's, and of a queued job's, object (`PbsObject`, `Job`).
_VNODE_SLOTS = ("_name", "_attrs", "_changes", "_guard", "_read")
_JOB_SLOTS = (*_VNODE_SLOTS, "_action", "_action_allowed")


class DeletesASlot:
    """A periodic hook that, at its first run, deletes one slot of the first vnode's
    object, or of each queued job's (``object.__delattr__``, past the setters), and
    notes at each later run what the first vnode and the queued jobs read as."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self, target, slot):
        self.target, self.slot = target, slot
        self.runs = 0
        self.seen = []

    @hookimpl
    def periodic(self, event):
        self.runs += 1
        name = min(event.vnode_list)
        if self.runs == 1:
            victims = [event.vnode_list[name]] if self.target == "vnode" else \
                list(event.job_list.values())
            for obj in victims:
                object.__delattr__(obj, self.slot)
            return
        vnode = event.vnode_list[name]
        self.seen.append((vnode.name, vnode.state,
                          sorted((j, job.name, job.job_state)
                                 for j, job in event.job_list.items())))


@pytest.mark.parametrize(("target", "slot"), [
    *(("vnode", slot) for slot in _VNODE_SLOTS), *(("job", slot) for slot in _JOB_SLOTS)])
def test_a_slot_a_hook_deleted_stops_no_replay(target, slot, register_plugin,
                                               pbsplug_plugins, tmp_path, monkeypatch):
    """One bad hook never stops the server: a slot a periodic hook deleted from a vnode
    or a queued job is no error of the server's, and the next run gets that vnode or job
    as a new one. A replay read the slot of the object it would carry, and its
    AttributeError ended the replay."""
    hook = DeletesASlot(target, slot)
    register_plugin(hook, "deletes", isolation="inprocess", freq=3600)
    _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=3, hosts=1, jobs=2)
    assert hook.runs == 3
    assert hook.seen == [("n0", "job-busy", [("2", "2", "Q")])] * 2


class ChangesAListItKept(KeptFromAnEarlierRun):
    """`KeptFromAnEarlierRun`, whose third run, after appending to the list it kept,
    notes the vnode's tags and assigns them again (``vnode.tags = vnode.tags``); from its
    fourth, it notes the vnode's tags."""

    @hookimpl
    def periodic(self, event):
        if self.runs != 2:
            super().periodic(event)
            return
        self.runs += 1
        vnode = event.vnode_list[min(event.vnode_list)]
        self.kept.append("b")
        self.seen.append(list(vnode.tags))
        vnode.tags = vnode.tags


def test_a_list_a_hook_kept_from_an_earlier_run_is_no_later_runs(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """A list a hook read at one run (its copy of its own) is no part of a later run's
    vnode, as the engine makes that afresh: what the hook does to it then is neither read
    nor written back. A replay carried the vnode with the hook's copy in it, where the
    hook's change to the list it kept was the vnode's tags at the next run, and its
    assignment of them stored ["a", "b"]."""
    hook = ChangesAListItKept()
    register_plugin(hook, "kept", isolation="inprocess", freq=3600)
    sim = _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=4, hosts=2, jobs=1)
    assert hook.runs == 4
    assert hook.seen == [["a"], ["a"]]
    assert sim.vnode_attrs["n0"]["tags"] == ["a"]


class RepointsAMapping:
    """A periodic hook that, at its first run, points the first vnode's
    resources_available at the second vnode past the setters (its slot ``_owner``), and at
    its second sets ncpus there."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.runs = 0

    @hookimpl
    def periodic(self, event):
        self.runs += 1
        first, second = sorted(event.vnode_list)[:2]
        mapping = event.vnode_list[first].resources_available
        if self.runs == 1:
            object.__setattr__(mapping, "_owner", event.vnode_list[second])
        else:
            mapping["ncpus"] = 7


def test_a_write_to_a_vnodes_mapping_lands_on_that_vnode(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """A resource mapping a hook pointed at another object at one run is no part of a
    later run's vnode, made afresh as the engine makes it: a write there at a later run
    is that vnode's. A replay carried the vnode, its mapping still pointed at the other
    one, and gave the other the write."""
    hook = RepointsAMapping()
    register_plugin(hook, "repoints", isolation="inprocess", freq=3600)
    sim = _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=2, hosts=2, jobs=1)
    assert hook.runs == 2
    assert sim.vnode_attrs["n0"]["resources_available"]["ncpus"] == 7
    assert sim.vnode_attrs["n1"]["resources_available"]["ncpus"] == 1


class _OtherMapping(Resources):
    __slots__ = ()


def _repoint(vnode):
    object.__setattr__(vnode._attrs["resources_available"], "_owner", Vnode("n1", {}))


def _reattribute(vnode):
    object.__setattr__(vnode._attrs["resources_available"], "_attr", "resources_assigned")


def _retype(vnode):
    vnode._attrs["resources_available"].__class__ = _OtherMapping


class _LikeAMapping(dict):
    __slots__ = ("_owner", "_attr")


def _retype_past_the_slots(vnode):
    vnode._attrs["resources_available"].__class__ = _LikeAMapping


def _unown(vnode):
    object.__delattr__(vnode._attrs["resources_available"], "_owner")


def _add_anothers(vnode):
    vnode._attrs["resources_assigned"] = Resources(Vnode("n1", {}), "resources_assigned")


def _add_another_attributes(vnode):
    vnode._attrs["resources_assigned"] = Resources(vnode, "resources_used")


@pytest.mark.parametrize("mischief", [_repoint, _reattribute, _retype, _retype_past_the_slots,
                                      _unown, _add_anothers, _add_another_attributes])
def test_a_mapping_of_another_object_or_attribute_is_a_change(mischief):
    """`Carried`: a resource mapping whose owner or attribute a hook changed past the
    setters (its slots), or whose type it changed (``__class__``, to one its slots'
    descriptors may not even apply to), is a change, as is a
    mapping of another object's, or of another attribute's, added where none was set:
    nothing of the kind is carried (a write there would land on the other)."""
    vnode = Vnode("n0", {"state": "free", "resources_available": {"ncpus": 1}})
    carried = Carried.of(vnode)
    assert carried is not None
    mischief(vnode)
    assert carried.again() is None


def test_an_unset_mapping_read_is_no_change():
    """`Carried`: an unset resource attribute a hook read is an empty mapping of its own
    added, which leaves the object as it was (taken out again: the engine's next object
    has none)."""
    vnode = Vnode("n0", {"state": "free", "resources_available": {"ncpus": 1}})
    carried = Carried.of(vnode)
    assert carried is not None
    assert vnode.resources_assigned == {}
    assert carried.again() is vnode
    assert "resources_assigned" not in vnode


class QueuedRerun:
    """A periodic hook that asks a rerun, or a delete, of the first queued job, and notes
    what the call did (the hook fails with what it raised)."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self, call: str):
        self.call = call
        self.raised: list[str] = []

    @hookimpl
    def periodic(self, event):
        job = event.job_list[min(event.job_list)]
        try:
            getattr(job, self.call)()
        except Exception as exc:
            self.raised.append(f"{type(exc).__name__}: {exc}")
            raise


@pytest.mark.parametrize("call", ["rerun", "delete"])
def test_a_periodic_hooks_rerun_of_a_queued_job_fails_it_on_the_engine_and_in_a_replay(
        call, register_plugin, pbsplug_plugins, tmp_path, monkeypatch, caplog):
    """PBS gives job.rerun() and job.delete() only in MoM hooks: a server periodic's call
    on a job of its job_list (pbsplug's queued jobs) raises, the hook fails as for any
    exception, and the job stays queued; on the engine and in a replay alike. Both took
    the call, then dropped it: the hook was told nothing and the job was left as it was."""
    hook = QueuedRerun(call)
    register_plugin(hook, "asks", isolation="inprocess", freq=3600)
    refused = f"AttributeReadOnly: job.{call}() is allowed only in execution-host events"
    line = f"periodic hook 'asks' encountered an exception, request rejected: {refused}"

    eng = Engine(Home(tmp_path / "home"), plugins=pbsplug_plugins)
    try:
        with eng.store.transaction() as st:
            st.add_job(1, "1", {"job_state": "Q", "queue": "workq",
                                "Resource_List": {"select": "1:ncpus=1"}}, None)
        eng.periodic.run("periodic", "asks")
        run = list(eng.runner.trace)[-1]
        assert (run.outcome, run.message) == ("error", refused)
        assert eng.store.job("1")["job_state"] == "Q"
        logged = [r.getMessage() for r in caplog.records if r.name == "pbsplug.runner"]
        assert logged[-1] == line
    finally:
        eng.runner.reap()
        eng.close()
    assert hook.raised == [refused]

    hook.raised.clear()
    # (two one-cpu hosts: the third job stays queued behind the first two)
    sim = _stopped_replay(pbsplug_plugins, tmp_path, monkeypatch, runs=2, hosts=2, jobs=3)
    assert hook.raised == [refused] * 2
    assert sim.summary.hooks.failed[("asks", "periodic")] == 2
    assert sim.queued["3"].attrs["job_state"] == "Q"
    logged = [r.getMessage() for r in caplog.records if r.name == "pbsplug.runner"]
    assert logged[-2:] == [line] * 2
