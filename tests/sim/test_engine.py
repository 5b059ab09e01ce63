"""The simulator on small crafted traces: schedules, walltime, determinism, hooks and power,
each checked against values worked out here, independently of the simulator."""

from __future__ import annotations

import copy
import math
import os
import random
import tempfile
from pathlib import Path

import pytest

from pbsplug import PluginInfo, Setting, clock, default_home, hookimpl
from pbsplug.lifecycle import when
from pbsplug.objects import Job, Queue, Server, Vnode
from pbsplug.scheduler import Policy, Scheduler, Snapshot
from pbsplug.sim.engine import (
    EPOCH,
    PRESETS,
    STALL,
    HookUse,
    SimError,
    Simulator,
    policy_settings,
    scratch_root,
)
from pbsplug.sim.machine import Host, Machine, PowerModel, default_power, uniform
from pbsplug.sim.output import ResultWriter
from pbsplug.sim.records import COMPLETED, REJECTED, WALLTIME, TraceJob
from pbsplug.testing import require_module

from .helpers import Sink, guard_periodic_runs


def tj(job_id, submit, run, ncpus, walltime=None, **kw):
    return TraceJob(str(job_id), 1, float(submit), float(run), ncpus,
                    None if walltime is None else float(walltime), **kw)


def simulate(jobs, nodes=4, cpus=1, policy="easy", plugins=None, power=None, tmp_path=None,
             policy_overrides=None, **kw):
    sink = Sink()
    machine = uniform(nodes, cpus, "test", power)
    sim = Simulator(machine, sink, plugins=plugins,
                    policy=policy_settings(policy, policy_overrides), workdir=tmp_path, **kw)
    sim.run(jobs)
    return sink, sim


# -- schedules worked out by hand -----------------------------------------------------------------

EASY_TRACE = [
    tj(1, 0, 100, 2, 100),    # runs at 0 on n0,n1 until 100
    tj(2, 0, 100, 3, 200),    # 3 cpus: waits for j1; top job, planned at 100 on n0,n1,n2
    tj(3, 10, 50, 2, 80),     # ends by 90 <= 100: backfilled at 10 on n2,n3
    tj(4, 20, 50, 1, 100),    # nothing free at 20; at 60 (j3 ends) n3 is free until 100
                              # and not in j2's plan: backfilled at 60 although it ends at 160
    tj(5, 30, 10, 1, 10),     # at 60 only n2 is left, planned for j2 from 100: 60+10 <= 100
]


def test_easy_backfills_around_the_top_job():
    sink, _ = simulate(EASY_TRACE, policy="easy")
    # Worked by hand (comments above); j5 comes after j4 in order and takes n2 until 70.
    assert sink.starts() == {"1": 0, "2": 100, "3": 10, "4": 60, "5": 60}
    ends = {r.job.job_id: r.end for r in sink.jobs}
    assert ends == {"1": 100, "2": 200, "3": 60, "4": 110, "5": 70}
    assert {r.final_state for r in sink.jobs} == {COMPLETED}


@pytest.mark.parametrize("shift", [0, 1000])
def test_the_top_jobs_reservation_holds_whenever_the_trace_starts(shift):
    """EASY_TRACE and j7 (1 cpu for 60 s, submitted at 40). At 70 (j5 ends) j2's
    reservation is 100 on n0, n1 and j5's host (j4 holds the fourth until 160): j7 would end
    at 130 there, so it waits; j2 starts at 100, j7 at 110 when j4 ends (killed at 170).
    Audit: a job started at trace time 0 had stime 0, which reads as no start time, so
    the scheduler saw j1 ending 100 s after every cycle: j7 started at 70 and j2 waited
    to 110. A trace shifted by 1000 s gave the right schedule."""
    jobs = [tj(j.job_id, j.submit + shift, j.run_time, j.ncpus, j.walltime)
            for j in EASY_TRACE + [tj(7, 40, 500, 1, 60)]]
    sink, _ = simulate(jobs, policy="easy")
    assert sink.starts() == {k: v + shift for k, v in {
        "1": 0, "2": 100, "3": 10, "4": 60, "5": 60, "7": 110}.items()}
    ends = {r.job.job_id: r.end - shift for r in sink.jobs}
    assert ends == {"1": 100, "2": 200, "3": 60, "4": 110, "5": 70, "7": 170}


def test_fifo_starts_nothing_past_a_blocked_job():
    sink, _ = simulate(EASY_TRACE, policy="fifo")
    # j2 waits for j1 (100); nothing after it starts before it; then in order, as room frees:
    # j2 100-200 on 3 cpus, j3 (2 cpus) needs j2's end: 200; j4 (1 cpu) at 100 beside j2?
    # No: strict order, j3 is blocked at 100, so j4 and j5 wait behind it: j3 200-250 with
    # j4 200-250 (2+1 = 3 of 4 cpus) and j5 200-210 (the 4th cpu).
    assert sink.starts() == {"1": 0, "2": 100, "3": 200, "4": 200, "5": 200}


def test_a_job_needing_more_than_its_walltime_is_killed_at_the_walltime():
    sink, sim = simulate([tj(1, 0, 500, 1, 120), tj(2, 5, 60, 4, 60)], policy="easy")
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert (by_id["1"].start, by_id["1"].end, by_id["1"].final_state) == (0, 120, WALLTIME)
    # j2 needs all four cpus: it starts when j1 is killed, not when j1 would have ended.
    assert (by_id["2"].start, by_id["2"].end, by_id["2"].final_state) == (120, 180, COMPLETED)
    assert sim.summary.killed == 1


def test_without_the_kill_a_job_runs_its_recorded_time_and_is_planned_as_ending_soon():
    """kill_at_walltime=False (AccaSim's rule): j1 asks 120 s and runs its recorded 500 s.
    From 120 on the scheduler sees it as about to end (PBS's view of an overrun), so j2 (all
    four cpus) stays queued and starts when j1 really ends; j3 (1 cpu, 30 s) backfills at 10
    beside j1 (it ends at 40, before j2's planned start of 120), and so does nothing else."""
    sink, sim = simulate([tj(1, 0, 500, 1, 120), tj(2, 5, 60, 4, 60), tj(3, 10, 30, 1, 30)],
                         policy="easy", kill_at_walltime=False)
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert (by_id["1"].start, by_id["1"].end, by_id["1"].final_state) == (0, 500, COMPLETED)
    assert (by_id["2"].start, by_id["2"].end) == (500, 560)
    assert (by_id["3"].start, by_id["3"].end) == (10, 40)
    assert sim.summary.killed == 0


def test_a_job_bigger_than_the_machine_is_rejected():
    sink, sim = simulate([tj(1, 0, 10, 8, 10), tj(2, 0, 10, 1, 10)], policy="easy")
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert by_id["1"].final_state == REJECTED and by_id["1"].start is None
    assert by_id["2"].start == 0
    assert sim.summary.rejected == 1


@pytest.mark.parametrize("policy", ["easy", "fifo", "pbs"])
def test_a_job_the_machine_can_never_hold_is_rejected_when_submitted(policy):
    # j2 (8 cpus on a machine of 4), j3 (one chunk of 5 cpus, on 1-cpu vnodes) and j4 (a
    # resource no vnode has) come while j1 holds the whole machine: nothing could start,
    # so no cycle would run for them before j1 ends (and none at all after the last job
    # of a trace). PBS's scheduler says Can Never Run at the cycle each qsub starts.
    jobs = [tj(1, 0, 100, 4, 100), tj(2, 10, 10, 8, 10),
            tj(3, 20, 10, 1, 10, select="1:ncpus=5"), tj(4, 30, 10, 1, 10, select="1:foo=1")]
    sink, sim = simulate(jobs, nodes=4, policy=policy)
    by_id = {r.job.job_id: r for r in sink.jobs}
    never = "Can Never Run: Insufficient amount of resource: "
    for job_id, submit, what in (("2", 10, "ncpus"), ("3", 20, "ncpus"), ("4", 30, "foo")):
        assert by_id[job_id].final_state == REJECTED and by_id[job_id].start is None
        assert by_id[job_id].end == submit, job_id
        assert by_id[job_id].reason.startswith(f"{never}{what} "), by_id[job_id].reason
    assert (by_id["1"].start, by_id["1"].end) == (0, 100)
    assert sim.summary.rejected == 3


def test_a_job_without_a_requested_time_is_planned_with_its_run_time_and_never_killed():
    sink, _ = simulate([tj(1, 0, 100, 3), tj(2, 0, 100, 4), tj(3, 1, 50, 1)], policy="easy")
    # j2 (top) is planned at 100 (j1's run time as its walltime); j3 ends at 51 <= 100: it
    # backfills on the free cpu at 1.
    assert sink.starts() == {"1": 0, "2": 100, "3": 1}
    assert all(r.final_state == COMPLETED for r in sink.jobs)


def test_ties_ends_before_submissions_before_the_cycle():
    # j1 ends at 100 exactly when j2 is submitted: j2 starts at 100 on the freed cpus.
    sink, _ = simulate([tj(1, 0, 100, 4, 100), tj(2, 100, 10, 4, 10)], policy="easy")
    assert sink.starts() == {"1": 0, "2": 100}


#: One host of 2 cpus. j1 (1 cpu) runs 0.1 to 10.4; j2 (2 cpus, submitted at 1) waits for
#: it; j3 (1 cpu) is submitted at 10.4, the instant j1 ends. In floats, the trace's 0.1 +
#: 10.3 ends after its 10.4, once the clock's origin is added.
FRACTIONAL_SWF = """\
; MaxNodes: 1
; MaxProcs: 2
1 0.1 -1 10.3 1 -1 -1 1 100 -1 1 1 1 -1 -1 -1 -1 -1
2 1 -1 5 2 -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1
3 10.4 -1 5 1 -1 -1 1 100.5 -1 1 1 1 -1 -1 -1 -1 -1
"""


def test_fractional_trace_times_are_whole_seconds_and_their_ties_hold(tmp_path):
    from pbsplug.sim.traces import open_trace

    path = tmp_path / "frac.swf"
    path.write_text(FRACTIONAL_SWF)
    # Without backfill or strict ordering, a job starts as soon as it fits. Whole seconds:
    # j1 runs 0 to 10 (0.1 and 10.3 rounded), j3 is submitted at 10 (10.4), so j1's end
    # and j3's submission are one instant: j1's cpu is free before the cycle, which takes
    # j2 first (it came first) on both cpus; j3 waits for j2. Had j3 come before j1's
    # end, it would have taken the free cpu and j2 would have waited for it.
    sink = Sink()
    Simulator(uniform(1, 2, "test"), sink,
              policy=policy_settings("pbs", {"backfill": False})).run(open_trace(path))
    assert sink.starts() == {"1": 0, "2": 10, "3": 15}
    assert {r.job.job_id: (r.job.submit, r.end) for r in sink.jobs} == {
        "1": (0, 10), "2": (1, 15), "3": (10, 20)}
    assert [r.job.walltime for r in sink.jobs] == [100, 100, 101]  # (100.5: up)
    # The files say the same, in whole seconds.
    out = tmp_path / "out"
    Simulator(uniform(1, 2, "test"), ResultWriter(out, cpus=2, hosts=1, plots=False),
              policy=policy_settings("pbs", {"backfill": False})).run(open_trace(path))
    rows = [line.split(",") for line in (out / "out_jobs.csv").read_text().splitlines()]
    times = {row[0]: (row[3], row[5], row[8], row[10]) for row in rows[1:]}
    assert times == {"1": ("0", "100", "0", "10"), "2": ("1", "100", "10", "15"),
                     "3": ("10", "101", "15", "20")}


def test_whole_seconds_rounds_to_the_nearest_a_half_up_and_leaves_whole_jobs_alone():
    from pbsplug.sim.engine import whole_seconds

    whole = tj(1, 7, 3, 1, 60)
    assert whole_seconds(whole) is whole
    assert whole_seconds(tj(1, 7, 3, 1)) == tj(1, 7, 3, 1)
    for submit, run, wall, expected in [(0.5, 2.5, 59.01, (1, 3, 60)),
                                        (0.49, 2.49, 0.2, (0, 2, 1)),
                                        (10.7, 0.3, None, (11, 0, None)),
                                        (1e9 + 0.5, 1, 60, (1e9 + 1, 1, 60))]:
        job = whole_seconds(tj(1, submit, run, 1, wall))
        assert (job.submit, job.run_time, job.walltime) == expected


def test_zero_length_jobs_and_a_burst_at_one_instant():
    jobs = [tj(i, 0, 0 if i % 2 else 5, 1, 10) for i in range(10)]
    sink, _ = simulate(jobs, nodes=2, policy="easy")
    assert len(sink.jobs) == 10
    # Busy cpus never exceed the machine, whatever happens at one instant.
    assert max(s.busy_cpus for s in sink.states) <= 2
    for r in sink.jobs:
        assert r.start >= r.job.submit and r.end == r.start + r.job.run_time


def test_submissions_out_of_order_are_an_error():
    with pytest.raises(SimError, match="submit order"):
        simulate([tj(1, 10, 1, 1, 1), tj(2, 5, 1, 1, 1)])


def test_policy_presets_and_bad_settings():
    assert policy_settings("easy") == PRESETS["easy"]
    assert policy_settings("easy", {"backfill_depth": 3})["backfill_depth"] == 3
    with pytest.raises(SimError, match="--policy"):
        policy_settings("lottery")
    with pytest.raises(SimError, match="backfill_dept"):
        policy_settings("pbs", {"backfill_dept": 1})


# -- the same decisions as a scheduler built afresh every cycle (as the engine builds it) -----

def reference_run(jobs, nodes, cpus, settings):
    """An independent replay: a new Scheduler and Snapshot at every instant, nothing kept
    between cycles (the engine's way), ends before submissions before the cycle. Its
    clock reads dates (base + trace time), as a server's does: never an stime of 0."""
    base = 10**9
    vnodes = {f"n{i}": Vnode(f"n{i}", {"state": "free", "resources_available": {
        "ncpus": cpus, "host": f"n{i}"}}) for i in range(nodes)}
    queues = {"workq": Queue("workq", {"queue_type": "Execution", "started": True})}
    server = Server("sim", dict(settings))
    pending = sorted(jobs, key=lambda j: j.submit)
    queued, running, starts = {}, {}, {}
    now = 0.0
    seq = 0
    while pending or queued or running:
        times = [j.submit for j in pending[:1]] + [end for end, _ in running.values()]
        now = min(times)
        for job_id in [j for j, (end, _) in running.items() if end <= now]:
            del running[job_id]
        while pending and pending[0].submit <= now:
            t = pending.pop(0)
            seq += 1
            queued[t.job_id] = (t, Job(t.job_id, {
                "job_state": "Q", "queue": "workq", "qtime": int(base + now), "Hold_Types": "n",
                "Resource_List": {"select": f"{t.ncpus}:ncpus=1", "ncpus": t.ncpus,
                                  "walltime": int(t.walltime)}}))
        snap_jobs = [job for _, job in running.values()] + [job for _, job in queued.values()]
        sched = Scheduler(policy=Policy.from_attributes(dict(settings)))
        result = sched.cycle(Snapshot(server, queues, vnodes, snap_jobs), base + now)
        for decision in result.run:
            t, job = queued.pop(decision.job_id)
            starts[t.job_id] = now
            run_job = Job(t.job_id, {**job.to_dict(), "job_state": "R", "stime": int(base + now),
                                     "exec_vnode": decision.exec_vnode})
            running[t.job_id] = (now + min(t.run_time, t.walltime), run_job)
    return starts


@pytest.mark.parametrize("policy", ["easy", "pbs", "fifo"])
def test_the_same_schedule_as_a_scheduler_built_afresh_every_cycle(policy):
    rng = random.Random(7)
    jobs, t = [], 0
    for i in range(150):
        t += rng.choice([0, 0, 1, 5, 20, 60])
        run = rng.choice([0, 10, 30, 100, 400])
        wall = max(1, run + rng.choice([0, 0, 50, -5]))
        jobs.append(tj(i, t, run, rng.choice([1, 1, 2, 3, 5, 8]), wall))
    sink, _ = simulate(jobs, nodes=8, cpus=1, policy=policy)
    assert sink.starts() == reference_run(jobs, 8, 1, PRESETS[policy])


# -- streaming ------------------------------------------------------------------------------------

def _collection_sizes(obj, prefix="", depth=0, out=None):
    """The length of every dict, list and set `obj` holds, and those of the pbsplug objects
    it holds, two levels down (the schedulers' kept state, their calendars)."""
    out = {} if out is None else out
    names = vars(obj) if hasattr(obj, "__dict__") else {
        k: getattr(obj, k, None) for c in type(obj).__mro__ for k in getattr(c, "__slots__", ())}
    for name, value in names.items():
        if isinstance(value, (dict, list, set)):
            out[prefix + name] = len(value)
        elif depth < 2 and type(value).__module__.startswith("pbsplug") \
                and not isinstance(value, type):
            _collection_sizes(value, f"{prefix}{name}.", depth + 1, out)
    return out


def test_memory_grows_with_the_jobs_in_the_system_not_with_the_trace():
    """Streaming: the trace is read one job ahead, and nothing the simulator or its
    schedulers keep grows with the jobs replayed. 4,000 jobs on 16 vnodes, a few dozen in
    the system at once: at every result, no collection holds more than 64 entries."""
    rng = random.Random(5)
    read = [0]

    def trace():
        t = 0
        for i in range(4000):
            t += rng.choice([5, 10, 20])
            run = rng.choice([10, 50, 100])
            read[0] += 1
            yield tj(i, t, run, rng.choice([1, 2, 4]), run * 2, queue=str(i % 3),
                     user=f"u{i % 50}")

    class Watch(Sink):
        def job(self, result):
            super().job(result)
            in_system = len(sim.queued) + len(sim.running)
            assert read[0] <= len(self.jobs) + in_system + 1
            sizes = _collection_sizes(sim)
            for sched in sim.schedulers:
                _collection_sizes(sched, f"{sched.name}.", out=sizes)
            self.largest = max(getattr(self, "largest", (0, "")), max(
                (n, name) for name, n in sizes.items()))

    sink = Watch()
    sim = Simulator(uniform(16, 1, "test"), sink, policy=policy_settings("easy"))
    sim.run(trace())
    assert len(sink.jobs) == 4000 and read[0] == 4000
    assert sink.largest[0] <= 64, sink.largest


# -- determinism ----------------------------------------------------------------------------------

def test_two_runs_write_identical_files(tmp_path):
    rng = random.Random(3)
    jobs, t = [], 0
    for i in range(300):
        t += rng.choice([0, 3, 30, 200])
        jobs.append(tj(i, t, rng.choice([5, 60, 600, 3000]), rng.choice([1, 2, 4, 6]),
                       rng.choice([60, 600, 4000]), queue=rng.choice(["a", "b"])))
    outputs = []
    for n in (1, 2):
        out = tmp_path / f"run{n}"
        sink = ResultWriter(out, cpus=8, hosts=4, plots=False)
        Simulator(uniform(4, 2, "test"), sink, policy=policy_settings("easy"),
                  workdir=tmp_path / f"work{n}").run(jobs)
        outputs.append({p.name: p.read_bytes() for p in sorted(out.iterdir())})
    assert outputs[0].keys() == outputs[1].keys() and len(outputs[0]) >= 3
    assert outputs[0] == outputs[1]


# -- hooks: the engine's consequences (pbsplug.lifecycle) ------------------------------------------

class Refuser:
    """runjob refuses job 1 once (it stays queued); execjob_begin rejects job 2 once (it is
    requeued, run_count counts it); execjob_end asks job 3 to rerun once."""

    plugin_info = PluginInfo(events=("runjob", "execjob_begin", "execjob_end"),
                             sim_safe=("runjob", "execjob_begin", "execjob_end"))

    def __init__(self):
        self.seen = set()

    @hookimpl
    def runjob(self, event):
        if event.job.id == "1" and "r1" not in self.seen:
            self.seen.add("r1")
            event.reject("not yet")

    @hookimpl
    def execjob_begin(self, event):
        if event.job.id == "2" and "b2" not in self.seen:
            self.seen.add("b2")
            event.reject("host not ready")

    @hookimpl
    def execjob_end(self, event):
        if event.job.id == "3" and "e3" not in self.seen:
            self.seen.add("e3")
            event.job.rerun()


def test_hook_rejects_have_the_engines_consequences(register_plugin, pbsplug_plugins, tmp_path):
    register_plugin(Refuser(), "refuser", isolation="inprocess")
    jobs = [tj(1, 0, 10, 1, 10), tj(2, 0, 10, 1, 10), tj(3, 0, 10, 1, 10)]
    sink, sim = simulate(jobs, nodes=4, policy="easy", plugins=pbsplug_plugins,
                         tmp_path=tmp_path)
    by_id = {r.job.job_id: r for r in sink.jobs}
    # At 0: runjob refuses j1 (it stays queued, never ran: run_count 0); execjob_begin
    # rejects j2 (requeued, run_count 1), which asks a second cycle at once, as the
    # engine's requeue does: in it j1 and j2 run, at 0 (j1's runjob accepts this time). At
    # 10 j3's execjob_end asks a rerun (requeued, run_count 1): it runs again at 10.
    assert (by_id["1"].start, by_id["1"].run_count) == (0, 1)
    assert (by_id["2"].start, by_id["2"].run_count) == (0, 2)
    assert (by_id["3"].start, by_id["3"].end, by_id["3"].run_count) == (10, 20, 2)
    assert sim.summary.hooks.ran[("refuser", "runjob")] >= 3


class BrokenCheck:
    """A plugin whose sim_check raises: the replay cannot know its hooks are safe."""

    plugin_info = PluginInfo(api="1.5", events=("runjob",), sim_safe=("runjob",),
                             sim_check=lambda config: config["no such key"])

    @hookimpl
    def runjob(self, event):
        pass


def test_a_sim_check_that_fails_is_a_one_line_error(register_plugin, pbsplug_plugins,
                                                    tmp_path):
    register_plugin(BrokenCheck(), "broken", isolation="inprocess")
    with pytest.raises(SimError) as err:
        simulate([tj(1, 0, 10, 1, 10)], plugins=pbsplug_plugins, tmp_path=tmp_path)
    assert str(err.value) == "plugin broken: its sim_check failed: KeyError: 'no such key'"


class Deferrer:
    """runjob refuses job 1 and gives it an Execution_Time 500 s on; refuses job 2 and
    holds it; queuejob holds job 3."""

    plugin_info = PluginInfo(events=("queuejob", "runjob"), sim_safe=("queuejob", "runjob"))

    @hookimpl
    def queuejob(self, event):
        if event.job.Job_Owner.startswith("held@"):
            event.job.Hold_Types = "u"

    @hookimpl
    def runjob(self, event):
        if event.job.id == "1" and not event.job.Execution_Time:
            event.job.Execution_Time = int(clock.now()) + 500
            event.reject("later")
        elif event.job.id == "2":
            event.job.Hold_Types = "o"
            event.reject("held")


def test_a_hooks_hold_or_execution_time_sets_the_state_as_in_the_engine(register_plugin,
                                                                          pbsplug_plugins,
                                                                          tmp_path):
    """Audit: a runjob hook's Execution_Time or hold left the job Q, tried at every
    cycle. j1 waits (W) to 0 + 500 and runs then, though nothing else happens at 500 (j4
    ended at 10); j2 and j3 are held, which nothing in a replay releases: REJECTED."""
    register_plugin(Deferrer(), "deferrer", isolation="inprocess")
    jobs = [tj(1, 0, 10, 1, 10), tj(2, 0, 10, 1, 10), tj(3, 0, 10, 1, 10, user="held"),
            tj(4, 0, 10, 1, 10)]
    sink, sim = simulate(jobs, nodes=4, plugins=pbsplug_plugins, tmp_path=tmp_path)
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert (by_id["1"].final_state, by_id["1"].start, by_id["1"].run_count) == (COMPLETED, 500, 1)
    assert (by_id["2"].final_state, by_id["2"].start) == (REJECTED, None)
    assert (by_id["3"].final_state, by_id["3"].start) == (REJECTED, None)
    assert (by_id["4"].final_state, by_id["4"].start) == (COMPLETED, 0)


class Reader:
    """Notes what runjob reads of each job's Resource_List."""

    plugin_info = PluginInfo(events=("runjob",), sim_safe=("runjob",))

    def __init__(self):
        self.seen = {}

    @hookimpl
    def runjob(self, event):
        res = event.job.Resource_List
        self.seen[event.job.id] = (res["ncpus"], res["nodect"], res["mpiprocs"],
                                   event.job.schedselect)


def test_hooks_read_the_sums_the_engines_server_writes(register_plugin, pbsplug_plugins,
                                                       tmp_path):
    """A hook read Resource_List["ncpus"] of a select job as None (PBS's server writes the
    chunks' sums and nodect, and so does the engine's, `units.with_sums`); it reads the
    schedselect the engine's server stores too."""
    hook = Reader()
    register_plugin(hook, "reader", isolation="inprocess")
    simulate([tj(1, 0, 10, 3, 10), tj(2, 0, 10, 2, 10, select="2:mpiprocs=2")],
             nodes=4, plugins=pbsplug_plugins, tmp_path=tmp_path)
    assert hook.seen == {"1": (3, 3, None, "3:ncpus=1"),
                         "2": (2, 2, 4, "2:mpiprocs=2:ncpus=1")}


class WholeHost:
    """Asks place=exclhost for job 1 at its submission, and notes what each job ran on."""

    plugin_info = PluginInfo(events=("queuejob", "runjob", "execjob_begin"),
                             sim_safe=("queuejob", "runjob", "execjob_begin"))

    def __init__(self):
        self.exec_vnode, self.exec_host = {}, {}

    @hookimpl
    def queuejob(self, event):
        if event.job.id == "1":
            event.job.Resource_List["place"] = "exclhost"

    @hookimpl
    def runjob(self, event):
        self.exec_vnode[event.job.id] = event.job.exec_vnode

    @hookimpl
    def execjob_begin(self, event):
        self.exec_host[event.job.id] = event.job.exec_host


def test_a_job_given_its_host_whole_holds_the_rest_of_it_as_pbs_lists_it(register_plugin,
                                                                          pbsplug_plugins,
                                                                          tmp_path):
    """Two hosts of two one-cpu vnodes. j1 (one cpu, exclhost) has h0 whole: its exec_vnode
    lists h0b with no resources and exec_host gives it ``*0``, as OpenPBS does; j2 takes
    h1; j3 (one cpu) waits for j1's end, though h0b has a free cpu."""
    hook = WholeHost()
    register_plugin(hook, "wholehost", isolation="inprocess")
    model = default_power()
    machine = Machine([Host(f"h{i}", i, [f"h{i}a", f"h{i}b"], 1, None, None, model)
                       for i in range(2)], source="test")
    sink = Sink()
    Simulator(machine, sink, plugins=pbsplug_plugins, policy=policy_settings("easy"),
              workdir=tmp_path).run([tj(1, 0, 100, 1, 100), tj(2, 0, 100, 2, 100),
                                     tj(3, 0, 50, 1, 50)])
    assert sink.starts() == {"1": 0, "2": 0, "3": 100}
    assert hook.exec_vnode == {"1": "(h0a:ncpus=1)+(h0b)", "2": "(h1a:ncpus=1)+(h1b:ncpus=1)",
                               "3": "(h0a:ncpus=1)"}
    assert hook.exec_host == {"1": "h0/0+h0/1*0", "2": "h1/0+h1/1", "3": "h0/0"}
    assert {r.job.job_id: r.hosts for r in sink.jobs} == {"1": (0,), "2": (1,), "3": (0,)}


class Obit:
    """Notes what jobobit reads of each job that is over."""

    plugin_info = PluginInfo(events=("jobobit",), sim_safe=("jobobit",))

    def __init__(self):
        self.seen = {}

    @hookimpl
    def jobobit(self, event):
        job = event.job
        self.seen[job.id] = (job.job_state, job.Exit_status, job.resources_used["walltime"],
                             job.obittime - job.stime, job.comment)


def test_a_jobobit_hook_reads_the_job_as_the_engines_server_leaves_it(register_plugin,
                                                                      pbsplug_plugins,
                                                                      tmp_path):
    """jobobit sees the job over (`lifecycle.finished`): state F, its Exit_status, what it
    used, its obittime and comment. The simulator makes them only for a jobobit hook."""
    hook = Obit()
    register_plugin(hook, "obit", isolation="inprocess")
    simulate([tj(1, 0, 10, 1, 20), tj(2, 0, 30, 1, 20)], nodes=2, plugins=pbsplug_plugins,
             tmp_path=tmp_path)
    assert hook.seen == {
        "1": ("F", 0, "00:00:10", 10, f"Job run at {when(EPOCH)} on (n0:ncpus=1) and finished"),
        "2": ("F", -29, "00:00:20", 20, "job killed: walltime 00:00:21 exceeded limit 00:00:20")}


class NotSafe:
    plugin_info = PluginInfo(events=("runjob", "periodic"), sim_safe=("runjob",))

    @hookimpl
    def runjob(self, event):
        pass

    @hookimpl
    def periodic(self, event):
        raise AssertionError("a hook not declared sim_safe ran")


def test_hooks_not_declared_sim_safe_are_left_out_and_reported(register_plugin,
                                                               pbsplug_plugins, tmp_path):
    register_plugin(NotSafe(), "notsafe", isolation="inprocess", freq=30)
    sink, sim = simulate([tj(1, 0, 100, 1, 100)], plugins=pbsplug_plugins, tmp_path=tmp_path)
    lines = sim.summary.hooks.lines()
    assert "ran: notsafe runjob (1 time)" in lines
    assert "left out: notsafe periodic: not declared sim_safe by the plugin" in lines


def test_hook_counts_are_written_as_the_report_writes_its_other_counts():
    """docs/simulator.md's `ran: power periodic (1,110 times)`: the report said 1110."""
    use = HookUse()
    use.ran[("power", "periodic")] = 1110
    use.failed[("power", "periodic")] = 1001
    use.first_failure[("power", "periodic")] = "error: boom"
    use.ran[("power", "exechost_startup")] = 1
    assert use.lines() == [
        "ran: power exechost_startup (1 time)",
        "ran: power periodic (1,110 times, 1,001 failed, the first with error: boom)"]


class OfflineOne:
    """Takes n1 offline at start-up, and runs a periodic hook that changes nothing."""

    plugin_info = PluginInfo(events=("exechost_startup", "periodic"),
                             sim_safe=("exechost_startup", "periodic"))

    @hookimpl
    def exechost_startup(self, event):
        event.vnode_list["n1"].state = "offline"

    @hookimpl
    def periodic(self, event):
        pass


def test_a_replay_with_a_periodic_hook_ends_after_seven_days_of_nothing(register_plugin,
                                                                        pbsplug_plugins,
                                                                        tmp_path):
    register_plugin(OfflineOne(), "offline", isolation="inprocess", freq=3600)
    # j1 needs both vnodes and n1 is offline: it could run on an empty machine, so it
    # waits; nothing else ever changes. The periodic hook would run forever: the replay
    # ends once it has seen 7 days (STALL) of nothing, and j1 is reported never started.
    jobs = [tj(1, 100, 10, 2, 10), tj(2, 200, 50, 1, 50)]
    sink, sim = simulate(jobs, nodes=2, policy="pbs", plugins=pbsplug_plugins,
                         tmp_path=tmp_path)
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert (by_id["2"].start, by_id["2"].end) == (200, 250)  # on n0, beside the waiting j1
    assert by_id["1"].final_state == REJECTED and by_id["1"].start is None
    # Last change at 250 (j2's end); the periodic runs every hour from 100: the last run
    # is the first at or after 250 + 7 days, when the loop sees the stall.
    last = 100 + 3600 * math.ceil((250 + STALL - 100) / 3600)
    assert by_id["1"].end == last and sim.summary.end == last
    assert sim.summary.hooks.ran[("offline", "periodic")] == (last - 100) // 3600


def guarded_replay(register_plugin, plugins, tmp_path, monkeypatch, hook, name, jobs, nodes):
    """`jobs` replayed on `nodes` with `hook` (in process, its periodic run every hour)
    under `guard_periodic_runs`: the jobs' records by id, and the simulator."""
    register_plugin(hook, name, isolation="inprocess", freq=3600)
    guard_periodic_runs(monkeypatch)
    sink, sim = simulate(jobs, nodes=nodes, policy="pbs", plugins=plugins, tmp_path=tmp_path)
    return {r.job.job_id: r for r in sink.jobs}, sim


class OfflineOneNotes(OfflineOne):
    """Takes n1 offline at start-up; each periodic run writes n0's comment anew."""

    @hookimpl
    def periodic(self, event):
        event.vnode_list["n0"].comment = f"looked at {int(clock.now())}"


def test_a_periodic_hook_writing_a_comment_at_every_run_does_not_keep_a_replay_going(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """The replay above with a periodic hook that writes n0's comment at every run: a
    comment is nothing the scheduler reads, so it ends as above, 7 days after j2's end.
    It went on for ever (the hook's change counted as a change)."""
    by_id, sim = guarded_replay(register_plugin, pbsplug_plugins, tmp_path, monkeypatch,
                                OfflineOneNotes(), "offline",
                                [tj(1, 100, 10, 2, 10), tj(2, 200, 50, 1, 50)], nodes=2)
    last = 100 + 3600 * math.ceil((250 + STALL - 100) / 3600)
    assert by_id["1"].final_state == REJECTED and by_id["1"].end == last
    assert sim.vnode_attrs["n0"]["comment"] == f"looked at {int(EPOCH + last)}"


class OfflineOneToggles(OfflineOne):
    """Takes n1 offline at start-up; each periodic run takes n0 offline, or back."""

    @hookimpl
    def periodic(self, event):
        vnode = event.vnode_list["n0"]
        vnode.state = "free" if "offline" in vnode.states else "offline"


def test_a_periodic_hook_toggling_a_vnode_does_not_keep_a_replay_going(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """A periodic hook that takes n0 offline at one run and back at the next: its first
    run after j2's end (3,700) brings a state the scheduler has not seen since (the count
    starts again), then only states it has seen. The replay ends 7 days after that run.
    It went on for ever (each toggle counted as a change)."""
    by_id, sim = guarded_replay(register_plugin, pbsplug_plugins, tmp_path, monkeypatch,
                                OfflineOneToggles(), "offline",
                                [tj(1, 100, 10, 2, 10), tj(2, 200, 50, 1, 50)], nodes=2)
    assert (by_id["2"].start, by_id["2"].end) == (200, 250)  # n0 free until 3,700
    last = 3700 + 3600 * (math.floor(STALL / 3600) + 1)  # the first run past 3,700 + STALL
    assert by_id["1"].final_state == REJECTED and by_id["1"].end == last
    assert sim.summary.end == last


def power_n0(on: bool, now: float) -> None:
    """What the simulated power driver records when it powers host n0 on or off at `now`
    (its record in the replay's plugins' state folder), as a test's hook writes it."""
    import json

    from pbsplug.sim.engine import POWER_FILE

    record = Path(os.environ["PBSPLUG_HOME"]) / "hooks" / "tmp" / POWER_FILE
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps({"n0": {"power": "on" if on else "off", "since": now,
                                         "sleep_limit": 0}}))


class OfflineOnePowersN0(OfflineOne):
    """Takes n1 offline at start-up; each periodic run powers n0 off (its vnode asleep) or
    back on (awake), through the simulated driver's record, as the power plugin does."""

    @hookimpl
    def periodic(self, event):
        vnode = event.vnode_list["n0"]
        off = "sleep" not in vnode.states
        power_n0(not off, clock.now())
        vnode.state = "sleep" if off else "free"


def test_a_periodic_hook_powering_a_host_off_and_on_does_not_keep_a_replay_going(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """A periodic hook that powers n0 off at one run and on at the next, while j1 can
    never start: its runs from j2's end bring states the scheduler has not seen (n0 asleep
    and shutting down, then off; powered on and booting, then up) until the first boot's
    end (7,600); after that only states it has seen. The replay ends 7 days after 7,600.
    It went on for ever (each boot and shutdown's end counted as a change)."""
    by_id, sim = guarded_replay(register_plugin, pbsplug_plugins, tmp_path, monkeypatch,
                                OfflineOnePowersN0(), "offline",
                                [tj(1, 100, 10, 2, 10), tj(2, 200, 50, 1, 50)], nodes=2)
    assert (by_id["2"].start, by_id["2"].end) == (200, 250)
    end = 7600 + STALL  # (7,300's run powered n0 on: its 300 s boot ends at 7,600)
    assert by_id["1"].final_state == REJECTED and by_id["1"].end == end
    assert sim.summary.end == end
    last = 3700 + 3600 * math.floor((end - 3700) / 3600)  # the last run, at the end or before
    assert sim.summary.hooks.ran[("offline", "periodic")] == (last - 100) // 3600


class WakesN0Late:
    """Puts n0 to sleep and powers it off at 600; powers it on at 605,400 (boot 300 s), a
    run before the 7 days since j2 came (700) are over; clears sleep at the first run that
    finds it booted, as the power plugin does."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))
    ON_AT = 605400

    @hookimpl
    def periodic(self, event):
        now = clock.now()
        at = round(now - EPOCH)
        vnode = event.vnode_list["n0"]
        if at in (600, self.ON_AT):
            if at == 600:
                vnode.state = "sleep"
            power_n0(at == self.ON_AT, now)
        elif at > self.ON_AT + 300 and "sleep" in str(vnode.state):
            vnode.state = "free"


def test_a_boot_that_ends_after_a_long_sleep_is_a_change_for_the_stall(
        register_plugin, pbsplug_plugins, tmp_path):
    """A boot's end with nothing else happening counts when it brings a state not seen
    since the stall began (n0 up after a week off), as a host's power toggled for ever
    does not: had no boot's end counted, the replay ended at 605,700, the boot's end,
    before the hook's next run woke n0, and j2 was rejected."""
    register_plugin(WakesN0Late(), "maint", freq=600, isolation="inprocess")
    sink, sim = simulate([tj(1, 0, 10, 1, 10), tj(2, 700, 60, 1, 60)], nodes=1,
                         power=SLOW_BOOT, plugins=pbsplug_plugins, tmp_path=tmp_path)
    j2 = sink.by_id()["2"]
    assert (j2.final_state, j2.start, j2.end) == (COMPLETED, 606000, 606060)


class RollingMaintenance:
    """Maintenance of a 3-vnode machine, hour by hour: n1 is offline from the first run
    (3,800) for 8 days, n2 from day 4 to the same end; then both come back."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))
    END = 3800 + 8 * 86400

    @hookimpl
    def periodic(self, event):
        now = clock.now() - EPOCH
        for name, start in (("n1", 3800), ("n2", 3800 + 4 * 86400)):
            event.vnode_list[name].state = "offline" if start <= now < self.END else "free"


def test_a_periodic_hook_bringing_hosts_back_after_eight_days_has_their_jobs_start(
        register_plugin, pbsplug_plugins, tmp_path, monkeypatch):
    """j2 needs the 3 vnodes, which a maintenance hook keeps from it for 8 days after j1's
    end: the replay does not end before they come back. Day 4 (n2 too goes offline) and
    day 8 (both back) are states the scheduler had not seen since j1's end, each starts
    the count again. (Had no periodic change counted, as once tried, the replay ended 7
    days after j1's end and j2 was rejected.)"""
    by_id, sim = guarded_replay(register_plugin, pbsplug_plugins, tmp_path, monkeypatch,
                                RollingMaintenance(), "maint",
                                [tj(1, 200, 7000, 1, 7000), tj(2, 4000, 10, 3, 10)], nodes=3)
    assert by_id["1"].end == 7200  # n1 went offline at 3,800, before j2 came
    assert by_id["2"].final_state == COMPLETED
    assert by_id["2"].start == RollingMaintenance.END


class PeriodicProbe:
    """A sim-safe periodic hook that notes what it sees in `seen`."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.seen = []


class WritesThenFails(PeriodicProbe):
    """The first periodic run marks n0 offline and then fails; later runs note n0's state."""

    @hookimpl
    def periodic(self, event):
        if not self.seen:
            self.seen.append(None)
            event.vnode_list["n0"].state = "offline"
            raise RuntimeError("a bug after the write")
        self.seen.append(event.vnode_list["n0"].state)


def test_a_failed_hooks_write_reaches_neither_the_machine_nor_a_later_event(
        register_plugin, pbsplug_plugins, tmp_path):
    hook = WritesThenFails()
    register_plugin(hook, "failing", isolation="inprocess", freq=60)
    sink, sim = simulate([tj(1, 0, 200, 1, 300), tj(2, 10, 100, 2, 300)], nodes=2,
                         plugins=pbsplug_plugins, tmp_path=tmp_path)
    assert len(hook.seen) >= 3 and hook.seen[0] is None
    assert set(hook.seen[1:]) <= {"free", "job-busy"}  # never the failed run's "offline"
    assert sink.starts() == {"1": 0, "2": 200}


class DroppedWriter:
    """A periodic hook that writes to n1 only what the engine does not keep: its derived
    attributes, and the derived state job-busy (n1 is free)."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    def __init__(self):
        self.runs = 0

    @hookimpl
    def periodic(self, event):
        self.runs += 1
        vnode = event.vnode_list["n1"]
        vnode.jobs = ["9.elsewhere/0"]
        vnode.resources_assigned = {"ncpus": 1}
        vnode.state = "job-busy"


def test_a_vnode_write_that_is_dropped_leaves_the_vnode_as_it_was(
        register_plugin, pbsplug_plugins, tmp_path):
    """A hook's vnode change of which nothing is kept (`lifecycle.hook_vnode_changes`)
    leaves the replay's vnode as it was: the same attributes, the same object the
    schedulers read, none of them told it changed. It was made again and logged as
    changed, and the schedulers read it again, at every periodic run."""
    hook = DroppedWriter()
    register_plugin(hook, "dropped", isolation="inprocess", freq=60)
    sim = Simulator(uniform(2, 1, "test"), Sink(), plugins=pbsplug_plugins,
                    policy=policy_settings("pbs"), workdir=tmp_path / "work")
    before = copy.deepcopy(sim.vnode_attrs)
    objects = dict(sim.vnodes)
    sim.run([tj(1, 0, 600, 1, 600)])  # (on n0: n1 stays free)
    assert hook.runs >= 5
    # (made as the replay starts: its clock at the first submit, EPOCH)
    before["n1"].update(last_used_time=EPOCH, last_state_change_time=EPOCH)
    assert sim.vnode_attrs["n1"] == before["n1"]
    assert sim.vnodes["n1"] is objects["n1"] and sim._vnode_log.version == 0


class GrowsN0:
    """Gives n0 a second cpu at start-up."""

    plugin_info = PluginInfo(events=("exechost_startup",), sim_safe=("exechost_startup",))

    @hookimpl
    def exechost_startup(self, event):
        event.vnode_list["n0"].resources_available["ncpus"] = 2


def test_a_hooks_one_vnode_resource_leaves_the_others(register_plugin, pbsplug_plugins,
                                                      tmp_path):
    """A hook's one resources_available entry changes that entry only (it replaced the
    whole mapping, so n0 lost its host and vnode names). j2, submitted while j1 runs,
    starts at once on n0's second cpu: the simulator's count of free cpus, which decides
    whether a cycle could start a job, followed the change (it did not, and j2 waited for
    j1's end)."""
    register_plugin(GrowsN0(), "grow", isolation="inprocess")
    sink, sim = simulate([tj(1, 10, 200, 1, 300), tj(2, 80, 100, 1, 300)], nodes=1,
                         plugins=pbsplug_plugins, tmp_path=tmp_path)
    assert sim.vnode_attrs["n0"]["resources_available"] == {
        "ncpus": 2, "host": "n0", "vnode": "n0"}
    assert sink.starts() == {"1": 10, "2": 80}


class SetsN0Cpus:
    """Sets n0's resources_available.ncpus to `value` at start-up (None: unsets it; "all":
    unsets the whole of resources_available; a mapping: sets the whole of it)."""

    plugin_info = PluginInfo(events=("exechost_startup", "periodic"),
                             sim_safe=("exechost_startup", "periodic"))

    def __init__(self, value):
        self.value = value

    @hookimpl
    def exechost_startup(self, event):
        vnode = event.vnode_list["n0"]
        if self.value == "all":
            vnode.resources_available = None
        elif isinstance(self.value, dict):
            vnode.resources_available = self.value
        else:
            vnode.resources_available["ncpus"] = self.value

    @hookimpl
    def periodic(self, event):  # (an event that carries n0 again, after the change)
        pass


@pytest.mark.parametrize(("value", "shown"), [(-1, "-1"), ("-3", "-3"),
                                               ({"ncpus": -2, "host": "n0"}, "-2")])
def test_a_hooks_ncpus_below_zero_is_refused_as_on_the_engine(value, shown, register_plugin,
                                                              pbsplug_plugins, tmp_path):
    """A vnode's resources_available.ncpus below 0 is refused by the kernel's value rules
    where the hook writes it, as on the engine: the hook fails with a one-line error naming
    the attribute and the value, nothing of its change is kept, and n0 keeps its cpu (j1
    runs on it and j2 on both vnodes)."""
    register_plugin(SetsN0Cpus(value), "sets", isolation="inprocess", freq=60)
    sink, sim = simulate([tj(1, 10, 100, 1, 300), tj(2, 20, 100, 2, 300)], nodes=2,
                         plugins=pbsplug_plugins, tmp_path=tmp_path)
    assert sim.summary.hooks.first_failure[("sets", "exechost_startup")] == (
        f"error: BadValue: resources_available.ncpus: {shown} is outside "
        "[0, 9223372036854775807]")
    assert sim.vnode_attrs["n0"]["resources_available"] == {
        "ncpus": 1, "host": "n0", "vnode": "n0"}
    assert sink.starts() == {"1": 10, "2": 110}


@pytest.mark.parametrize("value", [0, None, "all"])
def test_a_vnode_a_hook_leaves_no_cpus_takes_no_job_and_the_replay_goes_on(
        value, register_plugin, pbsplug_plugins, tmp_path):
    """A hook may leave n0 with 0 cpus, or with its ncpus (or all its resources_available)
    unset, which the engine reads as 0 cpus: no job of cpus starts there, j2 (2 cpus on
    a machine left with 1) can never run, and j3 (chunks of no cpus) runs on n0, with n0
    in its exec_host (the platform's host). The replay stopped at the first event that
    carried n0 again (a KeyError, or a TypeError, on its ncpus) or at j3's start (its
    exec_host read n0's host resource)."""
    register_plugin(SetsN0Cpus(value), "sets", isolation="inprocess", freq=60)
    sink, sim = simulate([tj(1, 10, 100, 1, 300), tj(2, 20, 100, 2, 300),
                          tj(3, 30, 100, 1, 300, select="2:ncpus=0")], nodes=2,
                         plugins=pbsplug_plugins, tmp_path=tmp_path)
    by_id = sink.by_id()
    assert sim.summary.hooks.failed[("sets", "exechost_startup")] == 0
    assert sim.summary.hooks.ran[("sets", "periodic")] == 2  # (at 60 and 120)
    assert (by_id["1"].start, by_id["1"].hosts) == (10, (1,))
    assert by_id["2"].final_state == REJECTED
    assert by_id["2"].reason.startswith("Can Never Run")
    assert (by_id["3"].start, by_id["3"].final_state) == (30, COMPLETED)
    assert by_id["3"].hosts == (0,)
    assert sim.room["n0"] == 0 and sim._free_total == 1


class ReadsEstimates(PeriodicProbe):
    """A periodic hook that notes which queued jobs carry an estimate."""

    @hookimpl
    def periodic(self, event):
        self.seen.append(sorted(j for j, job in event.job_list.items()
                                if (job.estimated or {}).get("start_time") is not None))


@pytest.mark.parametrize("every_cycle", [False, True])
def test_a_periodic_hook_reads_the_last_cycles_estimates_only(every_cycle, register_plugin,
                                                               pbsplug_plugins, monkeypatch,
                                                               tmp_path):
    hook = ReadsEstimates()
    register_plugin(hook, "reader", isolation="inprocess", freq=60)
    if every_cycle:  # estimates in every cycle, not only in the last before a periodic run
        monkeypatch.setattr(Simulator, "_estimates_read", lambda self: True)
    # One estimate a cycle, bigger jobs first. Made in every cycle, j2's is made at 10; at
    # 20 j3 (2 cpus) ranks before it and takes the one estimate. At 60 the hook sees j3's
    # only either way: a job keeps only the last estimating cycle's estimates.
    jobs = [tj(1, 0, 1000, 2, 1000), tj(2, 10, 10, 1, 10), tj(3, 20, 10, 2, 10)]
    simulate(jobs, nodes=2, plugins=pbsplug_plugins, tmp_path=tmp_path,
             policy_overrides={"job_sort_formula": "ncpus", "estimate_limit": 1})
    assert hook.seen[0] == ["3"]


class KeepsJobs(PeriodicProbe):
    """A periodic hook that keeps the queued job objects it is given, and their estimates."""

    @hookimpl
    def periodic(self, event):
        self.seen.append({j: (job, dict(job.estimated or {}))
                          for j, job in event.job_list.items()})


def test_a_job_estimated_as_before_keeps_its_object(register_plugin, pbsplug_plugins,
                                                    tmp_path):
    """An estimating cycle that gives a job the estimate it has leaves its object as it is
    (a new one would have every scheduler read the job again); one that changes it gives a
    new object."""
    hook = KeepsJobs()
    register_plugin(hook, "keeper", isolation="inprocess", freq=60)
    # j1 holds both vnodes 0-1000; j2 (top job) is planned at 1000 at each estimating
    # cycle. j3 comes at 130: that cycle estimates j2 as before, and j3 for the first time.
    jobs = [tj(1, 0, 1000, 2, 1000), tj(2, 10, 100, 2, 100), tj(3, 130, 100, 1, 100)]
    _, sim = simulate(jobs, nodes=2, plugins=pbsplug_plugins, tmp_path=tmp_path)
    at_60, at_180 = hook.seen[0], hook.seen[2]
    assert at_60["2"][1] == at_180["2"][1]
    assert at_180["2"][1]["start_time"] == sim.epoch + 1000
    assert at_180["2"][0] is at_60["2"][0]
    assert "3" not in at_60 and at_180["3"][1]


# -- power ----------------------------------------------------------------------------------------

MODEL = PowerModel("t", busy=200.0, idle=100.0, asleep=10.0, off=5.0, booting=150.0,
                   shutting_down=120.0, boot=60.0, shutdown=30.0)


def power_plugins(register_plugin, pbsplug_plugins):
    import pbsplug_power

    register_plugin(pbsplug_power, "power", freq=60, isolation="inprocess", config={
        "driver": "simulated", "power_on_off_enable": "True", "node_idle_limit": "100",
        "min_node_down_delay": "1", "boot_delay": 60, "shutdown_delay": 30})
    return pbsplug_plugins


def test_an_idle_host_sleeps_and_is_woken_for_a_job(register_plugin, pbsplug_plugins,
                                                    tmp_path):
    require_module("pbsplug_power")
    plugins = power_plugins(register_plugin, pbsplug_plugins)
    jobs = [tj(1, 0, 10, 1, 10), tj(2, 1000, 10, 1, 10)]
    sink, sim = simulate(jobs, nodes=1, policy="easy", plugins=plugins, power=MODEL,
                         tmp_path=tmp_path)
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert by_id["1"].start == 0
    # The host is idle from 10; the power plugin's periodic runs at 60, 120, ...: at 120 it
    # has been idle 110 s > 100: powered off (30 s shutting down, then off). j2 arrives at
    # 1000; the cycle plans it on the sleeping host; the periodic run at 1020 powers it on
    # (60 s boot), and the run at 1080 finds it ready: j2 starts at 1080.
    assert by_id["2"].start == 1080
    states = [(s.time, s.counts["computing"], s.counts["idle"], s.counts["switching_off"],
               s.counts["sleeping"], s.counts["switching_on"]) for s in sink.states]
    assert (120, 0, 0, 1, 0, 0) in states
    assert (150, 0, 0, 0, 1, 0) in states
    assert (1020, 0, 0, 0, 0, 1) in states
    assert (1080, 1, 0, 0, 0, 0) in states
    # Energy by hand: busy 0-10 and 1080-1090 (200 W), idle 10-120 and 1080 boot done at
    # 1080 (idle 0 s), shutting down 120-150 (120 W), off 150-1020 (5 W), booting 1020-1080
    # (150 W).
    expected = (200 * 10 + 100 * 110 + 120 * 30 + 5 * 870 + 150 * 60 + 200 * 10)
    assert sim.summary.energy == pytest.approx(expected)
    assert by_id["2"].energy == pytest.approx(200 * 10)


def test_a_site_state_dir_is_left_for_the_replays_own_folder(register_plugin, pbsplug_plugins,
                                                             tmp_path):
    """A site config that gives the power plugin a state_dir (a live site's folder) replays
    as the default does: the plugin's state goes to the replay's work folder, where the
    simulator reads the simulated driver's record, and the site's folder is not touched.
    With the site's folder, the replay never saw the host powered off (the driver's record
    was elsewhere), and the driver wrote its records in the site's folder."""
    require_module("pbsplug_power")
    plugins = power_plugins(register_plugin, pbsplug_plugins)
    live = tmp_path / "live"
    live.mkdir()
    record = plugins.get("power")
    register_plugin(record.plugin, "power", freq=60, isolation="inprocess",
                    config={**record.config, "state_dir": str(live)})
    jobs = [tj(1, 0, 10, 1, 10), tj(2, 1000, 10, 1, 10)]
    sink, sim = simulate(jobs, nodes=1, policy="easy", plugins=plugins, power=MODEL,
                         tmp_path=tmp_path / "work")
    # As in test_an_idle_host_sleeps_and_is_woken_for_a_job, which has no state_dir.
    assert sink.by_id()["2"].start == 1080
    states = [(s.time, s.counts["switching_off"], s.counts["sleeping"],
               s.counts["switching_on"]) for s in sink.states]
    assert (120, 1, 0, 0) in states and (1020, 0, 0, 1) in states
    assert list(live.iterdir()) == []
    assert (tmp_path / "work" / "hooks" / "tmp" / "simulated_power.json").is_file()
    assert f"state folder: power state_dir {live} (the site's) left for the replay's " \
        "own work folder" in sim.summary.hooks.lines()


class KeepsRecords:
    """A plugin of no particular name with a state folder: where its periodic hook would
    keep its records, as its configure and its hook are given the folder. A site folder
    named "refused" makes configure refuse the replay's."""

    plugin_info = PluginInfo(api="1.13", events=("periodic",), sim_safe=("periodic",),
                             config={"records": Setting(str, "", state_folder=True),
                                     "picky": Setting(bool, False)})

    def __init__(self):
        self.configured: list[str] = []
        self.ran: set[str] = set()
        #: The pbsplug home at each configure.
        self.homes: list[Path] = []

    @hookimpl
    def configure(self, config):
        if config["picky"] and not config["records"]:
            raise RuntimeError("needs a folder of its own")
        self.configured.append(config["records"])
        self.homes.append(default_home())

    @hookimpl
    def periodic(self, event):
        self.ran.add(event.hook_config["records"])


def test_any_plugins_state_folder_is_the_replays_whatever_the_site_set(register_plugin,
                                                                        pbsplug_plugins):
    """The rule is the kernel's, for every plugin: a key its Setting marks state_folder is
    set back to its empty default (the pbsplug home's folder, the replay's work folder
    while it runs), its configure is called again with it, its hooks read it; the site's
    value is reported. A plugin that cannot take that folder stops the replay, named."""
    plugin = KeepsRecords()
    register_plugin(plugin, "keeps", freq=60, isolation="inprocess",
                    config={"records": "/var/spool/live"})
    sink, sim = simulate([tj(1, 0, 100, 1, 100)], nodes=1, plugins=pbsplug_plugins)
    assert plugin.configured[:2] == ["/var/spool/live", ""] and plugin.ran == {""}
    assert sim.summary.hooks.state_folders == {("keeps", "records"): "/var/spool/live"}
    register_plugin(KeepsRecords(), "keeps", freq=60, isolation="inprocess",
                    config={"records": "/var/spool/live", "picky": True})
    with pytest.raises(SimError, match="plugin keeps: configured with the replay's state "
                                       "folder: configure failed: RuntimeError: needs a "
                                       "folder of its own"):
        simulate([tj(1, 0, 100, 1, 100)], nodes=1, plugins=pbsplug_plugins)


def test_the_replays_state_folders_last_only_while_it_runs(register_plugin, pbsplug_plugins):
    """The plugin set a replay was given has the site's state folders back when the replay
    ends, its plugins configured with them again (a plugin its replay failed enabled
    again), as before the replay: the next user of the set (`sim compare`'s other run, a
    test, a process that goes on to serve) saw the replay's empty folders for good."""
    plugin = KeepsRecords()
    record = register_plugin(plugin, "keeps", freq=60, isolation="inprocess",
                             config={"records": "/var/spool/live"})
    simulate([tj(1, 0, 100, 1, 100)], nodes=1, plugins=pbsplug_plugins)
    assert plugin.configured == ["/var/spool/live", "", "/var/spool/live"]
    assert record.config["records"] == "/var/spool/live" and record.status == "enabled"
    # Again for a plugin the replay's folder fails: enabled again, with the site's.
    picky = KeepsRecords()
    record = register_plugin(picky, "keeps", freq=60, isolation="inprocess",
                             config={"records": "/var/spool/live", "picky": True})
    with pytest.raises(SimError, match="needs a folder of its own"):
        simulate([tj(1, 0, 100, 1, 100)], nodes=1, plugins=pbsplug_plugins)
    assert (record.status, record.error) == ("enabled", None)
    assert record.config["records"] == "/var/spool/live"
    assert picky.configured == ["/var/spool/live", "/var/spool/live"]
    assert [r.name for r in pbsplug_plugins.enabled] == ["keeps"]
    assert pbsplug_plugins.pm.get_plugin("keeps") is picky


def test_a_plugin_configured_for_the_replay_has_its_work_folder_as_home(
        register_plugin, pbsplug_plugins, tmp_path):
    """A Simulator given a set loaded otherwise configures a plugin again for the replay's
    folder with its work folder already the pbsplug home, so a configure that reads the
    empty folder as <home>/hooks/tmp has the replay's; the set is given back under the
    home it had. The work folder became the home only when `run` started: that configure
    was given the live home."""
    live = default_home()
    plugin = KeepsRecords()
    register_plugin(plugin, "keeps", freq=60, isolation="inprocess",
                    config={"records": "/var/spool/live"})
    simulate([tj(1, 0, 100, 1, 100)], nodes=1, plugins=pbsplug_plugins,
             tmp_path=tmp_path / "work")
    assert plugin.configured == ["/var/spool/live", "", "/var/spool/live"]
    assert plugin.homes == [live, tmp_path / "work", live]


def test_a_plugin_whose_state_folder_the_site_left_empty_is_configured_for_the_replay_too(
        register_plugin, pbsplug_plugins, tmp_path):
    """A plugin of a set loaded otherwise whose state folder the site left empty is
    configured again under the replay's home too, and under the home it had after: its
    first configure read the empty folder under the home it was loaded in (the live
    one's), and only a plugin whose folder the site set was configured again, so it kept
    the live folder through the replay."""
    live = default_home()
    plugin = KeepsRecords()
    register_plugin(plugin, "keeps", freq=60, isolation="inprocess")
    _, sim = simulate([tj(1, 0, 100, 1, 100)], nodes=1, plugins=pbsplug_plugins,
                      tmp_path=tmp_path / "work")
    assert plugin.configured == ["", "", ""] and plugin.ran == {""}
    assert plugin.homes == [live, tmp_path / "work", live]
    assert sim.summary.hooks.state_folders == {}


def test_a_simulator_runs_once(register_plugin, pbsplug_plugins, tmp_path):
    """A second `run` of one Simulator is an error that says so, and runs no hook: when the
    first ends, its plugins have the site's state folders back and its own work folder is
    gone, so a second replay ran the hooks with the live site's folder. Closed and never
    run, the same."""
    plugin = KeepsRecords()
    register_plugin(plugin, "keeps", freq=60, isolation="inprocess",
                    config={"records": "/var/spool/live"})
    _, sim = simulate([tj(1, 0, 100, 1, 100)], nodes=1, plugins=pbsplug_plugins)
    assert plugin.ran == {""}
    with pytest.raises(SimError, match=r"^this Simulator has already run \(or was closed\): "
                                       r"a simulator replays once; make a new Simulator "
                                       r"for another run$"):
        sim.run([tj(1, 0, 100, 1, 100)])
    assert plugin.ran == {""} and not sim.workdir.exists()
    sim = Simulator(uniform(1, 1, "test"), Sink(), plugins=pbsplug_plugins,
                    policy=policy_settings("easy"))
    work = sim.workdir
    assert work.is_dir()
    sim.close()
    assert not work.exists()
    with pytest.raises(SimError, match="already run"):
        sim.run([tj(1, 0, 100, 1, 100)])
    assert plugin.ran == {""}


def test_a_set_loaded_for_a_replay_never_gives_a_plugin_the_sites_state_folder(tmp_path):
    """A plugin set loaded with private_state (`pbsplug sim`'s) configures each plugin with
    its state folder's empty default the first time, whatever the site set; the replay
    reports the site's value, and never gives it back: configured again under the replay's
    home and after it, the plugin has the empty value each time. Loaded otherwise, the
    plugin's configure was first given the site's folder, which it may make or open, and
    the replay's override came only after."""
    from pbsplug.plugins import PluginSet
    from pbsplug.siteconfig import PluginSite, SiteConfig

    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"), private_state=True)
    plugins.site.plugins["keeps"] = PluginSite("keeps", enabled=True, attributes={
        "freq": 60, "isolation": "inprocess"}, config={"records": "/var/spool/live"})
    plugin = KeepsRecords()
    record = plugins.add("keeps", plugin)
    assert record.status == "enabled" and plugin.configured == [""]
    assert plugins.state_folders_set_aside == {("keeps", "records"): "/var/spool/live"}
    _, sim = simulate([tj(1, 0, 100, 1, 100)], nodes=1, plugins=plugins)
    assert plugin.configured == ["", "", ""] and plugin.ran == {""}
    assert record.config["records"] == ""
    assert sim.summary.hooks.state_folders == {("keeps", "records"): "/var/spool/live"}
    # A plugin the replay's folder fails is failed at load, saying why.
    plugins.site.plugins["keeps"].config["picky"] = True
    record = plugins.add("keeps", KeepsRecords())
    assert record.status == "failed" and record.error == (
        "configured with the replay's state folder: configure failed: RuntimeError: needs a "
        "folder of its own")


def test_a_set_loaded_for_a_replay_in_its_home_configures_each_plugin_once_a_run(tmp_path):
    """A plugin set loaded with private_state in the replay's home (`replay_home`, as
    `pbsplug sim` loads it) has each plugin configured once a run: with its state folder's
    empty default, under the replay's home, which its hooks then use. It was configured
    twice more, each time the same (as the replay began, and as it ended)."""
    from pbsplug.plugins import PluginSet
    from pbsplug.sim.engine import replay_home
    from pbsplug.siteconfig import PluginSite, SiteConfig

    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"), private_state=True)
    plugins.site.plugins["keeps"] = PluginSite("keeps", enabled=True, attributes={
        "freq": 60, "isolation": "inprocess"}, config={"records": "/var/spool/live"})
    plugin = KeepsRecords()
    with replay_home(tmp_path / "work") as work:
        assert plugins.add("keeps", plugin).status == "enabled"
        sim = Simulator(uniform(1, 1, "test"), Sink(), plugins=plugins,
                        policy=policy_settings("easy"), workdir=work)
        sim.run([tj(1, 0, 100, 1, 100)])
    assert plugin.configured == [""] and plugin.homes == [work] and plugin.ran == {""}
    assert sim.summary.hooks.state_folders == {("keeps", "records"): "/var/spool/live"}

def test_mjf_writes_nothing_in_a_replay(register_plugin, pbsplug_plugins, tmp_path):
    """The mjf plugin's folders ($MACHINEFEATURES, $JOBFEATURES) are not state folders (a
    real host's, written for its jobs; their defaults are not empty) and need not be: mjf
    declares no hook sim_safe and has no configure, so a replay leaves every hook of it
    out, each named, and the site's folders are never made or written."""
    require_module("pbsplug_mjf")
    import pbsplug_mjf

    live = tmp_path / "live"
    register_plugin(pbsplug_mjf, "mjf", freq=60, isolation="inprocess", config={
        "machinefeatures_dir": str(live / "machinefeatures"),
        "jobfeatures_dir": str(live / "jobfeatures"), "hs06_per_cpu": 10.0})
    sink, sim = simulate([tj(1, 0, 100, 1, 100), tj(2, 50, 300, 1, 300)], nodes=1,
                         plugins=pbsplug_plugins, tmp_path=tmp_path / "work")
    assert {r.job.job_id for r in sink.jobs} == {"1", "2"}
    assert sim.summary.hooks.left_out == {
        ("mjf", hook): "not declared sim_safe by the plugin"
        for hook in ("exechost_startup", "execjob_begin", "execjob_end", "execjob_launch")
    } | {("mjf", "exechost_periodic"): "no such event in a replayed trace"}
    assert sim.summary.hooks.state_folders == {}
    assert not live.exists()
    assert not any(p for p in (tmp_path / "work").rglob("*")
                   if "features" in p.name)


#: MODEL with a boot of 300 s, longer than the power plugin's boot_delay (60 s).
SLOW_BOOT = PowerModel("t", busy=200.0, idle=100.0, asleep=10.0, off=5.0, booting=150.0,
                       shutting_down=120.0, boot=300.0, shutdown=30.0)


def test_a_host_boots_for_the_platforms_boot_not_the_plugins_boot_delay(
        register_plugin, pbsplug_plugins, tmp_path):
    """The simulated driver takes each host's boot from the platform (the replay's
    simulated_platform.json): a platform boot (300 s) longer than the plugin's boot_delay
    (60 s) no longer has the plugin find the host ready, and jobs start on it, while the
    replay has it booting (they started at 1080 and ran on booting watts until 1320)."""
    require_module("pbsplug_power")
    plugins = power_plugins(register_plugin, pbsplug_plugins)
    jobs = [tj(1, 0, 10, 1, 10), tj(2, 1000, 420, 1, 420), tj(3, 1000, 100, 1, 100)]
    sink, sim = simulate(jobs, nodes=1, cpus=2, power=SLOW_BOOT,
                         plugins=plugins, tmp_path=tmp_path)
    by_id = sink.by_id()
    # Idle from 10, powered off at 120 (shutting down to 150); j2 and j3 come at 1000, the
    # run at 1020 powers the host on (booting to 1320, the platform's 300 s); the runs at
    # 1080 to 1260 find it still booting, the one at 1320 ready: j2 and j3 start at 1320.
    assert [(by_id[j].start, by_id[j].end) for j in "123"] == [(0, 10), (1320, 1740),
                                                                (1320, 1420)]
    states = [(s.time, s.watts) for s in sink.states]
    assert [(t, w) for t, w in states if 1000 < t <= 1320] == [(1020, 150.0), (1320, 200.0)]
    # Busy watts for their whole runs, a half each (one cpu of two).
    assert by_id["2"].energy == 200 * 420 / 2 and by_id["3"].energy == 200 * 100 / 2
    assert sim.summary.energy == pytest.approx(
        200 * (10 + 420) + 100 * 110 + 120 * 30 + 5 * 870 + 150 * 300)


class PullsThePlug:
    """A periodic hook that powers host n0 off at 120, under its job, and on again at 300,
    by writing the simulated driver's record as that driver does."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    @hookimpl
    def periodic(self, event):
        now = clock.now()
        at = round(now - EPOCH)
        if at in (120, 300):
            power_n0(at == 300, now)


def test_a_job_on_a_host_powered_off_and_booting_is_charged_what_the_host_drew(
        register_plugin, pbsplug_plugins, tmp_path):
    """A job is charged its share of what its host drew while it ran there: shutting-down,
    off and booting watts when the host drew those, not busy watts (busy for its whole run
    was 60,000 J, more than the host drew under it). The power plugin no longer does this
    to a job; a hook may."""
    register_plugin(PullsThePlug(), "pulls", freq=60, isolation="inprocess")
    sink, sim = simulate([tj(1, 0, 600, 1, 600)], nodes=1, cpus=2, power=MODEL,
                         plugins=pbsplug_plugins, tmp_path=tmp_path)
    by_id = sink.by_id()
    assert (by_id["1"].start, by_id["1"].end) == (0, 600)
    # Busy 0-120, shutting down 120-150 (30 s), off 150-300, booting 300-360 (60 s), busy
    # 360-600; the job holds one cpu of two (a half).
    assert [(s.time, s.watts) for s in sink.states] == [
        (0, 200.0), (120, 120.0), (150, 5.0), (300, 150.0), (360, 200.0), (600, 100.0)]
    drew = 200 * (120 + 240) + 120 * 30 + 5 * 150 + 150 * 60
    assert by_id["1"].energy == pytest.approx(drew / 2)
    assert sim.summary.energy == pytest.approx(drew)


class PullsThePlugThenGrows(PullsThePlug):
    """`PullsThePlug`, which then gives n0's vnode 20 cpus at 420."""

    @hookimpl
    def periodic(self, event):
        super().periodic(event)
        if round(clock.now() - EPOCH) == 420:
            event.vnode_list["n0"].resources_available["ncpus"] = 20


def test_a_job_on_a_host_powered_off_and_on_then_grown_is_charged_each_interval_by_its_cpus(
        register_plugin, pbsplug_plugins, tmp_path):
    """A job's share of what its host drew is worked out, interval by interval, with the
    host's cpus in that interval. Its shutting-down, off and booting time was charged with
    the cpus then (2) and its busy time with the cpus at its end (20): it came out
    negative (-22,650 J)."""
    register_plugin(PullsThePlugThenGrows(), "pulls", freq=60, isolation="inprocess")
    sink, sim = simulate([tj(1, 0, 600, 2, 600)], nodes=1, cpus=2, power=MODEL,
                         plugins=pbsplug_plugins, tmp_path=tmp_path)
    by_id = sink.by_id()
    assert (by_id["1"].start, by_id["1"].end) == (0, 600)
    assert [(s.time, s.watts) for s in sink.states] == [
        (0, 200.0), (120, 120.0), (150, 5.0), (300, 150.0), (360, 200.0), (600, 100.0)]
    # j1 holds both cpus of 2 until 420, 2 of 20 after: busy 0-120 (200 x 120 = 24,000),
    # shutting down 120-150 (120 x 30 = 3,600), off 150-300 (5 x 150 = 750), booting
    # 300-360 (150 x 60 = 9,000), busy 360-420 (200 x 60 = 12,000), all of it the job's;
    # busy 420-600, a tenth of 200 x 180 = 36,000: 3,600. (The old sum: busy 200 x 600 x
    # 2/20 = 12,000, less the odd times' busy charged by 2/2: 12,000 - 200 x 240 + 3,600 +
    # 750 + 9,000 = -22,650.)
    assert by_id["1"].energy == 24000 + 3600 + 750 + 9000 + 12000 + 3600 == 52950
    drew = 200 * (120 + 240) + 120 * 30 + 5 * 150 + 150 * 60
    assert sim.summary.energy == drew == 85350
    # What no job was charged: the 18 cpus of 20 no job held from 420 to 600.
    assert drew - by_id["1"].energy == 200 * 180 * 18 / 20


def test_a_host_a_job_holds_part_of_is_not_powered_off_under_it(register_plugin,
                                                              pbsplug_plugins, tmp_path):
    """A vnode with one of its two cpus held is free, and its last_used_time is the end of
    the job before: by PBS_power's rule alone (free, idle past node_idle_limit) the host
    was powered off under the job still running (at 120 here; the job then ran on a host
    drawing shutting-down and off watts)."""
    require_module("pbsplug_power")
    plugins = power_plugins(register_plugin, pbsplug_plugins)
    # One host of 2 cpus. j1 holds one cpu 0-10: last used at 10. j2 holds one from 20 to
    # 1020. The runs at 60, 120, ... see the vnode free (1 of 2 cpus) and last used at 10:
    # from 120 on, 110 s and more > node_idle_limit 100 s, yet j2 holds it: it stays up.
    # j2 ends at 1020 (last used then); the run at 1140 finds it idle 120 s: powered off,
    # shutting down to 1170. j3 comes at 1500, after that instant's run: the run at 1560
    # powers the host on, the one at 1620 finds it ready, and j3 runs 1620-1630.
    jobs = [tj(1, 0, 10, 1, 10), tj(2, 20, 1000, 1, 1000), tj(3, 1500, 10, 1, 10)]
    sink, sim = simulate(jobs, nodes=1, cpus=2, power=MODEL,
                         plugins=plugins, tmp_path=tmp_path)
    by_id = sink.by_id()
    assert [(by_id[j].start, by_id[j].end) for j in "123"] == [(0, 10), (20, 1020),
                                                                (1620, 1630)]
    # (a record at 1500 too: j3 queued)
    assert [(s.time, s.watts) for s in sink.states] == [
        (0, 200.0), (10, 100.0), (20, 200.0), (1020, 100.0), (1140, 120.0), (1170, 5.0),
        (1500, 5.0), (1560, 150.0), (1620, 200.0), (1630, 100.0)]
    assert by_id["2"].energy == 200 * 1000 / 2  # busy watts, its whole run


def test_a_host_a_job_holds_no_cpus_of_is_not_powered_off_under_it(register_plugin,
                                                                    pbsplug_plugins, tmp_path):
    """A job whose chunk on a host asks no cpus holds none there, yet runs there: the
    replay's vnode lists it in its ``jobs`` (``1/0``, as the engine lists such a chunk), and
    the power plugin keeps the host up. The vnode listed no job: idle since the start (its
    exechost_startup's last use at 0), the host was powered off under the job at 120."""
    require_module("pbsplug_power")
    plugins = power_plugins(register_plugin, pbsplug_plugins)
    seen = []

    class SeesJobs:
        plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

        @hookimpl
        def periodic(self, event):
            seen.append((round(clock.now() - EPOCH), event.vnode_list["n0"].jobs))

    register_plugin(SeesJobs(), "sees", freq=60, isolation="inprocess")
    # One host of one cpu; j1 (one chunk of no cpus) runs 0-1000, drawing idle watts (a job
    # of no cpus makes no host busy). Its end marks n0 last used at 1000: the run at 1140
    # finds it idle 140 s (> node_idle_limit 100 s) and powers it off, shutting down to
    # 1170. j2 comes at 1500: powered on at 1560, ready at 1620 (as in the test above).
    sink, sim = simulate([tj(1, 0, 1000, 1, 1000, select="1:ncpus=0"),
                          tj(2, 1500, 10, 1, 10)], nodes=1,
                         power=MODEL, plugins=plugins, tmp_path=tmp_path)
    by_id = sink.by_id()
    assert (by_id["1"].start, by_id["1"].end, by_id["1"].hosts) == (0, 1000, (0,))
    assert (by_id["2"].start, by_id["2"].end) == (1620, 1630)
    assert [(s.time, s.watts) for s in sink.states] == [
        (0, 100.0), (1000, 100.0), (1140, 120.0), (1170, 5.0), (1500, 5.0), (1560, 150.0),
        (1620, 200.0), (1630, 100.0)]
    assert (60, ["1/0"]) in seen and (960, ["1/0"]) in seen
    assert [jobs for at, jobs in seen if at >= 1020] == [[]] * len(
        [at for at, _ in seen if at >= 1020])


def test_under_power_a_cycle_that_can_start_nothing_and_whose_estimates_nobody_reads_is_skipped(
        register_plugin, pbsplug_plugins, monkeypatch, tmp_path):
    """The power plugin's availability hook says only when vnodes that cannot take a job
    now can: it makes no cycle run. A cycle whose estimates the periodic run does not read
    (another event comes first) and that can start nothing is skipped; the replay is the
    same as with every cycle run."""
    require_module("pbsplug_power")
    plugins = power_plugins(register_plugin, pbsplug_plugins)
    # j1 holds the one host 0-1000. j2 comes at 10, when nothing can start, and j3 at 20,
    # before the periodic run at 60: the cycle at 10 is skipped; the one at 20 estimates.
    jobs = [tj(1, 0, 1000, 1, 1000), tj(2, 10, 100, 1, 100), tj(3, 20, 100, 1, 100)]
    sink, sim = simulate(jobs, nodes=1, plugins=plugins, power=MODEL,
                         tmp_path=tmp_path / "skipping")
    assert sim.summary.cycles_skipped >= 1
    monkeypatch.setattr(Simulator, "_could_start", lambda self, only_new: True)
    every, every_sim = simulate(jobs, nodes=1, plugins=plugins, power=MODEL,
                                tmp_path=tmp_path / "every")
    assert every_sim.summary.cycles_skipped == 0
    assert sink.starts() == every.starts() == {"1": 0, "2": 1000, "3": 1100}
    assert [(s.time, s.counts) for s in sink.states] == [
        (s.time, s.counts) for s in every.states]
    assert sim.summary.energy == pytest.approx(every_sim.summary.energy)


class TermInHook:
    """Its runjob hook sends SIGTERM to the replay's own process, so the signal comes while
    a hook runs in the process (isolation inprocess)."""

    plugin_info = PluginInfo(events=("runjob",), sim_safe=("runjob",))

    @hookimpl
    def runjob(self, event):
        import signal

        os.kill(os.getpid(), signal.SIGTERM)


def test_sigterm_inside_an_inprocess_hook_ends_sim_run(register_plugin, pbsplug_plugins,
                                                       tmp_path, monkeypatch):
    """sim run's SIGTERM used to raise SystemExit, which the runner takes for the hook's own
    sys.exit: the hook failed and the replay went on."""
    from pbsplug.cli.sim import _TermIsExit

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)
    register_plugin(TermInHook(), "terminhook", isolation="inprocess")
    sim = Simulator(uniform(2, 1, "test"), Sink(), plugins=pbsplug_plugins,
                    policy=policy_settings("easy"))
    with pytest.raises(SystemExit) as stopped, _TermIsExit():
        sim.run([tj(1, 0, 10, 1, 10), tj(2, 100, 10, 1, 10)])
    assert stopped.value.code == 128 + 15
    assert sim.summary.hooks.ran.get(("terminhook", "runjob")) is None  # it never ended
    assert list(tmp_path.iterdir()) == []  # the work folder went with it


def test_a_replay_without_a_work_folder_makes_its_own_and_removes_it(register_plugin,
                                                                   pbsplug_plugins, tmp_path,
                                                                   monkeypatch):
    """With TMPDIR set, the replay's own work folder is made there (else in /dev/shm where
    the system has it); the power plugin keeps its state in it while the replay runs, and
    the folder is gone once the replay ends, as when it fails."""
    require_module("pbsplug_power")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # tempfile reads TMPDIR again
    assert scratch_root() is None
    plugins = power_plugins(register_plugin, pbsplug_plugins)
    seen = []

    class Looking(Sink):
        def job(self, result):  # at each job's end, while the replay runs
            folder = Path(os.environ["PBSPLUG_HOME"]) / "hooks" / "tmp"
            seen.append((folder.parents[2], sorted(
                p.name for p in folder.iterdir()) if folder.is_dir() else []))

    Simulator(uniform(1, 1, "test", MODEL), Looking(), plugins=plugins,
              policy=policy_settings("easy")).run([tj(1, 0, 10, 1, 10), tj(2, 1000, 10, 1, 10)])
    assert seen[-1] == (tmp_path, ["power_booting.json", "power_status.json",
                                   "simulated_platform.json", "simulated_power.json"])
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(SimError, match="before the job before it"):
        simulate([tj(1, 5, 10, 1, 10), tj(2, 0, 10, 1, 10)], nodes=1, plugins=plugins,
                 power=MODEL)
    assert list(tmp_path.iterdir()) == []


def test_ramp_mode_puts_an_idle_host_to_sleep_and_ramps_it_up_for_a_job(register_plugin,
                                                                        pbsplug_plugins,
                                                                        tmp_path):
    pbsplug_power = require_module("pbsplug_power")
    register_plugin(pbsplug_power, "power", freq=60, isolation="inprocess", config={
        "driver": "simulated", "power_ramp_rate_enable": "True", "node_idle_limit": "100",
        "min_node_down_delay": "1", "boot_delay": 60})
    jobs = [tj(1, 0, 10, 1, 10), tj(2, 1000, 10, 1, 10)]
    sink, sim = simulate(jobs, nodes=1, policy="easy", plugins=pbsplug_plugins, power=MODEL,
                         tmp_path=tmp_path)
    by_id = {r.job.job_id: r for r in sink.jobs}
    # Idle from 10; at 120 (idle 110 s > 100) the host is ramped down: asleep, its power
    # never off (no shutdown, no boot). j2 arrives at 1000 and is planned on the sleeping
    # host from 1060 (boot_delay); the run at 1020 finds that within 900 s and ramps it up
    # at once, and the cycle that follows starts j2 at 1020.
    assert by_id["2"].start == 1020
    states = [(s.time, s.counts["computing"], s.counts["idle"], s.counts["sleeping"],
               s.counts["switching_off"] + s.counts["switching_on"]) for s in sink.states]
    assert (120, 0, 0, 1, 0) in states and (1020, 1, 0, 0, 0) in states
    assert all(switching == 0 for *_, switching in states)
    # Energy by hand: busy 0-10 and 1020-1030 (200 W), idle 10-120 (100 W), asleep
    # 120-1020 (10 W).
    assert sim.summary.energy == pytest.approx(200 * 10 + 100 * 110 + 10 * 900 + 200 * 10)


class Resizes:
    """A periodic hook that gives one vnode a new number of cpus at each run, by the hour
    (4, 6, 2, 1 in turn, one vnode after the other): fewer at times than the jobs on it
    hold."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    @hookimpl
    def periodic(self, event):
        turn = int(clock.now()) // 60
        vnode = event.vnode_list[f"n{turn % 6}"]
        vnode.resources_available["ncpus"] = (4, 6, 2, 1)[turn // 6 % 4]


def mixed_hosts(power):
    """Hosts of one vnode (h0 to h3: 4 cpus) and of several (h4: 3 vnodes, h5: 2 vnodes,
    2 cpus each)."""
    shapes = [(1, 4)] * 4 + [(3, 2), (2, 2)]
    return Machine([Host(f"h{i}", i, [f"h{i}"] if n == 1 else [f"h{i}[{v}]" for v in range(n)],
                         cpus, None, None, power) for i, (n, cpus) in enumerate(shapes)],
                   source="test")


@pytest.mark.parametrize("case", ["uniform", "power", "zero ncpus", "resized", "mixed"])
def test_a_job_charged_in_one_pass_is_charged_as_vnode_by_vnode(case, register_plugin,
                                                               pbsplug_plugins, tmp_path):
    """A job whose vnodes each have a host of their own is charged in one pass, alike
    vnodes and hosts counted together (`_occupy_alike`): the same job results, machine
    states, energies and counts, and the same job's vnodes and hosts after each start and
    end, as vnode by vnode and host by host (`_occupy_each`), with
    hosts shared by jobs, partly busy, and: with the power plugin, hosts switched off and
    on between jobs; with chunks of no cpus (alone on a vnode, or beside others of the
    job, on free and full vnodes); with vnodes given more or fewer cpus by a hook while
    jobs run on them; on a machine where some hosts have several vnodes (their jobs go
    vnode by vnode either way)."""
    plugins = None
    if case == "power":
        plugins = power_plugins(register_plugin, pbsplug_plugins)
    elif case == "resized":
        register_plugin(Resizes(), "resizes", isolation="inprocess", freq=60)
        plugins = pbsplug_plugins
    rng = random.Random(7)
    jobs, now = [], 0
    for n in range(1, 121):
        now += rng.choice([0, 0, 1, 20, 90, 400])
        run = rng.choice([5, 30, 60, 200, 700])
        ncpus = rng.choice([1, 1, 2, 3, 4, 5, 8, 12, 24])
        select = None
        if case == "zero ncpus" and n % 3:
            select = rng.choice(["1:ncpus=0", f"1:ncpus=0+{ncpus}:ncpus=1",
                                 f"{ncpus}:ncpus=1+2:ncpus=0"])
        jobs.append(tj(n, now, run, ncpus, rng.choice([run, run * 2, run // 2]),
                       select=select))
    charged = []  # (in one pass when it can?, how) of each start and end

    def replayed(one_pass):
        sink = Sink()
        machine = mixed_hosts(MODEL) if case == "mixed" else uniform(6, 4, "test", MODEL)
        sim = Simulator(machine, sink, plugins=plugins, policy=policy_settings("easy"),
                        workdir=tmp_path / str(one_pass))
        if not one_pass:
            sim._alone = set()  # (no vnode has a host of its own: every job vnode by vnode)
        after = []  # the job's vnodes and hosts after each start and end

        def hosts(indices):
            return [(h.busy, h.watts, h.state, h.since, h.counted, dict(h.energy), h.cpus)
                    for h in map(sim.hosts.__getitem__, indices)]

        for how in ("_occupy_alike", "_occupy_each"):
            def counted(run, sign, real=getattr(sim, how), how=how):
                charged.append((one_pass, how))
                out = real(run, sign)
                after.append(({n: (sim.room[n], dict(sim.vnode_attrs[n])) for n in run.vnodes},
                              hosts(sorted({sim.vnode_host[n] for n in run.vnodes})),
                              dict(sim._counts), dict(sim._room_count), run.energy))
                return out

            setattr(sim, how, counted)
        sim.run(jobs)
        return (sink.jobs, sink.states, sim.summary.energy, list(sim._counts.items()),
                sim._room_count, sim.room, sim.vnode_attrs, hosts(range(len(sim.hosts))),
                after)

    result = replayed(True)
    assert result == replayed(False)
    assert charged.count((False, "_occupy_each")) == len(charged) // 2
    alike = charged.count((True, "_occupy_alike"))
    if case == "uniform":  # (every start and end but the first: no host was counted busy yet)
        assert alike == len(charged) // 2 - 1 == 239
    elif case == "power":  # hosts were off, then on again, between jobs: some not up when
        # a job came
        assert any(s.counts["sleeping"] for s in result[1])
        assert any(s.counts["switching_on"] for s in result[1])
        assert alike > 150
        assert charged.count((True, "_occupy_each")) > 0
    elif case == "zero ncpus":
        assert alike == len(charged) // 2 - 1
        assert {len(r.hosts) for r in result[0]} > {1, 2}
    elif case == "resized":
        assert alike == len(charged) // 2 - 1
        assert {v["resources_available"]["ncpus"] for v in result[6].values()} > {1}
    else:  # jobs on hosts of one vnode only are charged in one pass, the others not
        assert 0 < alike < len(charged) // 2 - 10


# -- several schedulers, each over its partitions ([sim.sched.NAME]) -------------------------------

class GrowsThenShrinks:
    """A periodic hook (every 60 s) that gives n0 8 cpus from 60 and 2 from 240."""

    plugin_info = PluginInfo(events=("periodic",), sim_safe=("periodic",))

    @hookimpl
    def periodic(self, event):
        t = clock.now() - EPOCH
        event.vnode_list["n0"].resources_available["ncpus"] = 2 if t >= 240 else 8


@pytest.mark.parametrize("one_pass", [True, False])
def test_jobs_on_a_resized_host_are_never_charged_more_than_it_drew_busy(
        one_pass, register_plugin, pbsplug_plugins, tmp_path):
    """One host of one vnode (4 cpus, busy 200 W). j1 (4 cpus) runs 0-300; at 60 a hook
    gives the vnode 8 cpus, so j2 (4 cpus) runs 100-300 beside j1; at 240 it leaves it 2,
    fewer than the jobs hold. Each job's share of an interval is of the most cpus the host
    had since it was last empty, then: 4 until 60, 8 after (not 2 from 240). j1 200 W x
    60 s x 4/4 + 200 W x 240 s x 4/8, j2 200 W x 200 s x 4/8, 56 kJ of the 60 kJ the host
    drew busy (of its 4 first cpus, 100 kJ; of its 2 at the end, 200 kJ; j1 was charged
    by 8 cpus for the whole run, 30 kJ, while it held the 4 of 4 until 60). Empty
    at 300, the host has its 2 cpus: j3 (2 cpus, 400-500) is charged all of its busy watts
    (of its 4 first cpus, half). In one pass (`_occupy_alike`) and vnode by vnode."""
    register_plugin(GrowsThenShrinks(), "resizes", isolation="inprocess", freq=60)
    sink = Sink()
    sim = Simulator(uniform(1, 4, "test", MODEL), sink, plugins=pbsplug_plugins,
                    policy=policy_settings("easy"), workdir=tmp_path)
    if not one_pass:
        sim._alone = set()  # (every job vnode by vnode)
    sim.run([tj(1, 0, 300, 4, 400), tj(2, 100, 200, 4, 300), tj(3, 400, 100, 2, 200)])
    by_id = sink.by_id()
    assert {j: (r.start, r.end) for j, r in by_id.items()} == {
        "1": (0, 300), "2": (100, 300), "3": (400, 500)}
    assert {j: r.energy for j, r in by_id.items()} == pytest.approx(
        {"1": 200 * 60 + 200 * 240 * 4 / 8, "2": 200 * 200 * 4 / 8, "3": 200 * 100})
    assert sim.hosts[0].energy["busy"] == pytest.approx(200 * 400)
    assert sum(r.energy for r in sink.jobs) <= sim.hosts[0].energy["busy"]
    assert sim.hosts[0].cpus == 2


def partitioned():
    """n0, n1 in partition p1 (queue qa); n2, n3 in p2 (queue qb); one cpu each."""
    base = uniform(4, 1, "test")
    hosts = [Host(h.name, h.index, h.vnodes, h.ncpus, h.mem, "p1" if h.index < 2 else "p2",
                  h.power) for h in base.hosts]
    return Machine(hosts, {"qa": {"partition": "p1"}, "qb": {"partition": "p2"}}, source="test")


PARTITIONED_TRACE = [
    tj(1, 0, 100, 2, 100, queue="qa"),
    tj(2, 0, 50, 1, 50, queue="qa"),
    tj(3, 0, 10, 2, 10, queue="qb"),
    tj(4, 5, 10, 1, 10, queue="qb"),
]


def run_partitioned(scheds, policy="easy"):
    sink = Sink()
    Simulator(partitioned(), sink, policy=policy_settings(policy), scheds=scheds).run(
        PARTITIONED_TRACE)
    return sink.starts(), {r.job.job_id: r.hosts for r in sink.jobs}


def test_a_second_scheduler_owns_its_partition_and_default_keeps_the_rest():
    # One scheduler (default) over everything: j1 takes n0,n1 and j2 n2 at 0; j3 (2 cpus)
    # is the top job, planned at 50 when j2 ends; j4 (ends at 15) is backfilled on n3 at 5.
    starts, hosts = run_partitioned(None)
    assert starts == {"1": 0, "2": 0, "3": 50, "4": 5}
    assert hosts["2"] == (2,) and hosts["4"] == (3,)
    # s2 owns p2: default keeps p1 (n0, n1) for qa, so j2 waits for j1 (100, on n0); s2
    # starts j3 on n2,n3 at 0 and j4 on n2 when j3 ends at 10.
    starts, hosts = run_partitioned({"s2": {"partition": "p2"}})
    assert starts == {"1": 0, "2": 100, "3": 0, "4": 10}
    assert hosts == {"1": (0, 1), "2": (0,), "3": (2, 3), "4": (2,)}
    # PBS's comma list, a trailing comma and blanks as qmgr takes them: the same schedulers.
    assert run_partitioned({"s2": {"partition": "p2,"}})[0] == starts
    assert run_partitioned({"s2": {"partition": " p2 "}})[0] == starts
    assert run_partitioned({"s2": {"partition": [" p2", "p2"]}})[0] == starts
    # Turned off (scheduling false), s2 still owns p2: qb's jobs are never started.
    sink = Sink()
    Simulator(partitioned(), sink, policy=policy_settings("easy"),
              scheds={"s2": {"partition": ["p2"], "scheduling": False}}).run(PARTITIONED_TRACE)
    assert {r.job.job_id for r in sink.jobs if r.final_state == REJECTED} == {"3", "4"}


def test_each_scheduler_has_its_own_policy_over_the_runs():
    # s2 without backfill (strict ordering): j4 waits behind the top job j3 although it fits.
    trace = [tj(1, 0, 100, 1, 100, queue="qb"), tj(2, 0, 10, 2, 10, queue="qb"),
             tj(3, 5, 10, 1, 10, queue="qb")]
    sink = Sink()
    Simulator(partitioned(), sink, policy=policy_settings("easy"),
              scheds={"s2": {"partition": "p2"}}).run(trace)
    assert sink.starts() == {"1": 0, "2": 100, "3": 5}  # EASY backfills j3 (ends 15 < 100)
    sink = Sink()
    Simulator(partitioned(), sink, policy=policy_settings("easy"),
              scheds={"s2": {"partition": "p2", "backfill": False}}).run(trace)
    assert sink.starts() == {"1": 0, "2": 100, "3": 110}


@pytest.mark.parametrize(("scheds", "message"), [
    ({"s2": {"partition": "p2", "colour": 1}}, "[sim.sched.s2].colour: unknown key"),
    ({"s2": {"partition": 7}}, "[sim.sched.s2].partition: 7: expected a partition name"),
    ({"s2": {"backfill": True}}, "[sim.sched.s2].partition: None: expected a partition"),
    ({"s2": {"partition": ","}}, "[sim.sched.s2].partition: ',': expected a partition"),
    ({"s2": {"partition": "p2", "scheduling": "yes"}}, "[sim.sched.s2].scheduling: 'yes'"),
    ({"s2": {"partition": "p2", "backfill_depth": "lots"}},
     "[sim.sched.s2]: scheduler policy setting backfill_depth='lots' is not a int"),
    ({"s2": "p2"}, "[sim.sched.s2]: 'p2': expected a table"),
    ({"s2": {"partition": "p2"}, "s3": {"partition": "p1, p2"}},
     "[sim.sched.s3].partition: 'p2': Partition is already associated with other scheduler "
     "([sim.sched.s2] has it)"),
    ({"default": {"partition": "p2"}},
     "[sim.sched.default].partition: 'p2': Operation is not permitted on default scheduler"),
    # qmgr's rules for a sched's partition (`set sched s2 partition = ...`), its messages.
    ({"s2": {"partition": "p1,pbs-default"}},
     "[sim.sched.s2].partition: 'pbs-default': Default partition name is not allowed"),
    ({"s2": {"partition": "p2\x07"}},
     "[sim.sched.s2].partition: 'p2\\x07': Illegal attribute or resource value partition"),
    ({"s2": {"partition": ["p2", 3]}}, "[sim.sched.s2].partition: ['p2', 3]: expected a"),
    # A partition no host has: the scheduler would schedule nothing.
    ({"s2": {"partition": "p2,p3"}}, "[sim.sched.s2].partition: 'p3': no host of the "
     "platform is in this partition (the platform's partitions: p1, p2)"),
    ({"s2": {"partition": " P2"}}, "[sim.sched.s2].partition: 'P2': no host"),
    ({"a-name-far-too-long": {"partition": "p2"}}, "a name is 1-15 letters"),
])
def test_bad_sched_objects_are_one_line_errors(scheds, message):
    with pytest.raises(SimError) as err:
        Simulator(partitioned(), Sink(), policy=policy_settings("easy"), scheds=scheds)
    assert message in str(err.value) and "\n" not in str(err.value)


class FailsAtEnd:
    plugin_info = PluginInfo(api="1.3", events=("execjob_end",), sim_safe=("execjob_end",))

    @hookimpl
    def execjob_end(self, event):
        raise RuntimeError("no such counter file")


def test_the_summary_counts_the_runs_that_failed_with_the_first_error(
        register_plugin, pbsplug_plugins, tmp_path):
    """A hook that raised on every run was reported as having run, nothing more (the
    errors were only on stderr)."""
    register_plugin(FailsAtEnd(), "failer", isolation="inprocess")
    sink, sim = simulate([tj(1, 0, 10, 1, 10), tj(2, 0, 10, 1, 10)], plugins=pbsplug_plugins,
                         tmp_path=tmp_path)
    assert "ran: failer execjob_end (2 times, 2 failed, the first with error: " \
           "RuntimeError: no such counter file)" in sim.summary.hooks.lines(), \
        sim.summary.hooks.lines()
    assert all(r.final_state == "COMPLETED_SUCCESSFULLY" for r in sink.jobs)  # (logged only)


@pytest.mark.parametrize("key, host", [("last_used_time HIGH", 1), ("last_used_time LOW", 2),
                                       (None, 0)])
def test_node_sort_key_on_last_use_reads_the_ends_of_the_replay(key, host):
    """Host 0 is last used at 100, host 1 at 200, host 2 never: a job at 300 goes to the
    most recently used (HIGH), the least (LOW), or the first by Priority and name. The
    vnodes' objects were made once, so the replay sorted on the time they were made."""
    jobs = [tj(1, 0, 100, 1, 100), tj(2, 10, 190, 1, 190), tj(3, 300, 10, 1, 10)]
    overrides = {"node_sort_key": key} if key else None
    sink, _ = simulate(jobs, nodes=3, cpus=1, policy_overrides=overrides)
    assert {r.job.job_id: r.hosts for r in sink.jobs} == {"1": (0,), "2": (1,), "3": (host,)}


def test_a_job_past_the_servers_resource_limits_is_rejected_at_submission():
    """The server's resources_max, as the engine's qsub refuses it (PBS's 15036, through
    `lifecycle.completed_request`): j1 asks for more walltime than the limit and never
    runs; j2 within it runs at once, and j3's request is completed the same way."""
    jobs = [tj(1, 0, 10, 1, 200), tj(2, 0, 10, 1, 150), tj(3, 5, 10, 2, 100)]
    sink, sim = simulate(jobs, server_attrs={"resources_max": {"walltime": "150"},
                                             "resources_default": {"mem": "1mb"}})
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert (by_id["1"].final_state, by_id["1"].start) == (REJECTED, None)
    assert [(by_id[j].final_state, by_id[j].start) for j in "23"] == [(COMPLETED, 0),
                                                                      (COMPLETED, 5)]
    assert sim.summary.rejected == 1
    sink, sim = simulate(jobs)
    assert sim.summary.rejected == 0


@pytest.mark.parametrize("limit", [{"max_run": "[u:PBS_GENERIC=1]"}, {"max_user_run": 1},
                                   {"max_run_res": {"ncpus": "[u:PBS_GENERIC=1]"}}])
def test_the_servers_limits_on_running_jobs_keep_a_job_queued(limit):
    """[sim.server]'s limits on running jobs are the scheduler's: alice may run one job at
    a time, so of her two at 0 on four cpus the second starts when the first ends (10);
    bob's runs at once."""
    jobs = [tj(1, 0, 10, 1, 20, user="alice"), tj(2, 0, 10, 1, 20, user="alice"),
            tj(3, 0, 10, 1, 20, user="bob")]
    sink, _ = simulate(jobs, server_attrs=limit)
    assert sink.starts() == {"1": 0, "2": 10, "3": 0}


def test_a_job_with_no_walltime_takes_the_limit_as_pbs_does_not_its_run_time():
    """Review: the run time given to a job that asked no walltime was compared with the
    limit, so j1 (200 s) was rejected; PBS gives it resources_max.walltime (150 s) and kills
    it there. Without a limit or default, it is planned with its run time and never
    killed."""
    jobs = [tj(1, 0, 200, 1, None), tj(2, 0, 100, 1, None)]
    sink, sim = simulate(jobs, server_attrs={"resources_max": {"walltime": "150"}})
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert [(by_id[j].final_state, by_id[j].end) for j in "12"] == [(WALLTIME, 150),
                                                                     (COMPLETED, 100)]
    sink, sim = simulate(jobs)
    assert {r.job.job_id: (r.final_state, r.end) for r in sink.jobs} == {
        "1": (COMPLETED, 200), "2": (COMPLETED, 100)}


class WalltimeSetter:
    """queuejob sets every job's walltime to 50 s, and nothing else."""

    plugin_info = PluginInfo(events=("queuejob",), sim_safe=("queuejob",))

    @hookimpl
    def queuejob(self, event):
        event.job.Resource_List["walltime"] = 50


def test_a_queuejob_hooks_one_resource_leaves_the_others(register_plugin, pbsplug_plugins,
                                                         tmp_path):
    """Review: the hook's changes replaced the whole Resource_List with the one entry it
    set, so the select of a 2-cpu job went, and the job ran converted on one cpu. It runs
    on two hosts, killed at the hook's 50 s."""
    register_plugin(WalltimeSetter(), "walltime", isolation="inprocess")
    sink, _ = simulate([tj(1, 0, 100, 2, 100)], nodes=4, plugins=pbsplug_plugins,
                       tmp_path=tmp_path)
    (result,) = sink.jobs
    assert (len(result.hosts), result.end, result.final_state) == (2, 50, WALLTIME)


def test_a_trace_select_with_a_quoted_string_is_kept_whole_without_memory():
    """Review: a machine without memory rewrote each select without it, unquoted, so
    ``arch="a:b"`` no longer parsed and the job was rejected for its select."""
    from pbsplug.sim.engine import _without_mem
    assert _without_mem('2:ncpus=1:mem=1gb:arch="a:b"') == '2:ncpus=1:arch="a:b"'


def test_a_platform_queues_limits_and_defaults_apply_to_its_jobs():
    """A platform file's [queues.NAME] resources_max and resources_default (docs/
    simulator.md): j1 asks more walltime than queue short allows and is rejected; j2 asks
    none and takes short's default of 30 s, and is killed there."""
    sink = Sink()
    machine = uniform(4, 1, "test", None)
    machine.queues["short"] = {"resources_max": {"walltime": "00:01:00"},
                               "resources_default": {"walltime": "30"}}
    sim = Simulator(machine, sink, policy=policy_settings("easy", None))
    sim.run([tj(1, 0, 10, 1, 120, queue="short"), tj(2, 0, 100, 1, None, queue="short")])
    by_id = {r.job.job_id: r for r in sink.jobs}
    assert (by_id["1"].final_state, by_id["2"].final_state, by_id["2"].end) == (
        REJECTED, WALLTIME, 30)
