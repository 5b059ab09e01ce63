"""One plugin, one small workload, on the local engine (a real server, real job processes)
and in the simulator: the same outcome for every job. Both apply a hook's answer through
`pbsplug.lifecycle`; this checks that they also reach it the same way (the events fired, the
attributes a hook reads, what happens to the job next)."""

from __future__ import annotations

import importlib
import sys

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home
from pbsplug.engine.server import Engine
from pbsplug.engine.testing import LocalEngine, make_root, remove_root
from pbsplug.sim.engine import Simulator, policy_settings
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
    guard_periodic_runs(monkeypatch, most=3)
    sim = Simulator(uniform(2, 1, "test"), Sink(), plugins=pbsplug_plugins,
                    policy=policy_settings("pbs"), workdir=tmp_path / "work")
    with pytest.raises(RuntimeError, match="the replay goes on"):
        sim.run([TraceJob("1", 1, 0.0, 1e6, 1, 1e6)])
    assert len(hook.seen) >= 2 and all(seen == hook.seen[0] for seen in hook.seen)
    # (a replay's jobs lists only the jobs of no cpus there: docs/simulator.md)
    assert hook.seen[0] == {"jobs": None, "resv": None, "suspended_jobs": None}
    assert sim.vnode_attrs["n0"]["comment"] == "written"
    assert not set(DERIVED) & set(sim.vnode_attrs["n0"])
