"""One plugin, one small workload, on the local engine (a real server, real job processes)
and in the simulator: the same outcome for every job. Both apply a hook's answer through
`pbsplug.lifecycle`; this checks that they also reach it the same way (the events fired, the
attributes a hook reads, what happens to the job next)."""

from __future__ import annotations

import importlib
import sys

import pytest

from pbsplug.engine.errors import PbsError
from pbsplug.engine.testing import LocalEngine, make_root, remove_root
from pbsplug.sim.engine import Simulator, policy_settings
from pbsplug.sim.machine import uniform
from pbsplug.sim.records import COMPLETED, FAILED, REJECTED, TraceJob
from pbsplug.units import format_duration

from .helpers import Sink

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
