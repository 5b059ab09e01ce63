"""The benchmark's AccaSim-rules plugin (benchmarks/accasim_rules.py) gives AccaSim 1.1.3's own
schedule of a small trace, job by job (AccaSim's starts were taken from its schedule file)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from pbsplug.sim.engine import Simulator, policy_settings
from pbsplug.sim.machine import uniform
from pbsplug.sim.traces import open_trace

_PATH = Path(__file__).resolve().parents[2] / "benchmarks" / "accasim_rules.py"


@pytest.fixture(scope="module")
def rules():
    spec = importlib.util.spec_from_file_location("accasim_rules", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Starts:
    def __init__(self):
        self.starts = {}

    def job(self, result):
        self.starts[result.job.job_id] = result.start

    def machine(self, states):
        pass

    def close(self, end):
        pass


def starts(tmp_path, rules, policy, plugins=None):
    trace = tmp_path / "tiny.swf"
    trace.write_text(rules.TINY_SWF)
    sink = Starts()
    sim = Simulator(uniform(4, 1, "tiny"), sink, plugins=plugins, policy=policy,
                    kill_at_walltime=False, workdir=tmp_path / "work")
    sim.run(iter(open_trace(trace)))
    return sink.starts


def test_the_plugin_gives_accasims_schedule(rules, register_plugin, pbsplug_plugins, tmp_path):
    register_plugin(rules.AccasimRules(), "accasim_rules", isolation="inprocess")
    got = starts(tmp_path, rules, policy_settings("easy", rules.POLICY), pbsplug_plugins)
    assert got == rules.ACCASIM_TINY_STARTS


def test_pbsplugs_easy_decides_otherwise_on_the_same_trace(rules, tmp_path):
    got = starts(tmp_path, rules, policy_settings("easy"))
    # By hand: job 3 is the top job and starts when the machine empties at 100 (job 4 then
    # waits for it, to 200); job 8 would end past job 7's planned start on its vnodes, so
    # it waits, and job 7 starts at 1100 (job 9 after it, at 1200).
    assert {j: got[j] for j in ("3", "4", "5", "7", "8", "9")} == {
        "3": 100, "4": 200, "5": 250, "7": 1100, "8": 1200, "9": 1200}


def test_without_the_hold_the_blocked_job_starts_as_soon_as_it_fits(rules, tmp_path):
    # Rule 1 alone (strict_ordering false, no plugin): job 8 still fills past job 7's plan,
    # but job 3 starts at 100, when it fits, not after its planned 200; and job 21's 0 s end
    # at 5200 frees its cpu for a second cycle at 5200, which starts job 22.
    got = starts(tmp_path, rules, policy_settings("easy", {"strict_ordering": False}))
    assert (got["3"], got["7"], got["8"], got["22"]) == (100, 1510, 1010, 5200)
