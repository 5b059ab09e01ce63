"""A cycle that reads only what changed (the simulator's `JobLog`, kept vnodes) decides
exactly as one that reads every job and vnode afresh: the same replay run both ways gives
the same start, end and vnodes for every job."""

from __future__ import annotations

import dataclasses
import random

import pytest

from pbsplug import PluginInfo, hookimpl
from pbsplug.scheduler import JobLog, Scheduler, Snapshot, VnodeLog
from pbsplug.sim import engine
from pbsplug.sim.engine import Simulator, policy_settings
from pbsplug.sim.machine import uniform
from pbsplug.sim.records import TraceJob
from pbsplug.testing import require_module


class Sink:
    def __init__(self):
        self.jobs = {}

    def job(self, result):
        self.jobs[result.job.job_id] = (result.start, result.end, result.final_state,
                                        result.hosts)

    def machine(self, states):
        pass

    def close(self, end):
        pass


def workload(seed: int, count: int, cpus: int) -> list[TraceJob]:
    """Jobs of many shapes arriving in bursts: some end early, some run past their walltime,
    some need the whole machine, some ask one-cpu chunks by the dozen."""
    rng = random.Random(seed)
    jobs, now = [], 0.0
    for n in range(1, count + 1):
        now += rng.choice([0, 0, 1, 5, 30, 120, 600])
        ncpus = rng.choice([1, 1, 2, 3, 4, 8, 12, cpus // 2, cpus])
        walltime = rng.choice([60, 300, 600, 3600, 7200])
        run = walltime * rng.choice([0.1, 0.5, 0.9, 1.0, 1.3])
        jobs.append(TraceJob(str(n), n, now, float(int(run)), ncpus, float(walltime)))
    return jobs


def replay(jobs, policy, kill, monkeypatch, afresh: bool, nodes=8, cpus=4, plugins=None):
    if afresh:  # every cycle reads every job and vnode, as without a log
        real = engine.Snapshot

        def without_log(*args, **kwargs):
            return dataclasses.replace(real(*args, **kwargs), job_log=None,
                                       vnodes_version=None)

        monkeypatch.setattr(engine, "Snapshot", without_log)
    sink = Sink()
    sim = Simulator(uniform(nodes, cpus, "test"), sink, policy=policy_settings(policy),
                    kill_at_walltime=kill, plugins=plugins)
    sim.run(jobs)
    monkeypatch.undo()
    return sink.jobs, sim.summary


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_room_counted_from_the_summed_losses_decides_as_vnode_by_vnode(seed, monkeypatch):
    """A job of one-cpu chunks that does not fit now is told so from what the usable
    vnodes have free less what each loses to bookings still to start, summed and kept
    from cycle to cycle (`Scheduler._held_through`): each count is what the bookings give
    vnode by vnode (the least ncpus free on each over the window), the replay decides as
    without the sums, and with them no such fit goes through the vnodes (`_fill`)."""
    counts, failed = [], {"sums": 0, "vnodes": 0}
    real_fill, real_held = Scheduler._fill, Scheduler._held_through

    def held(self, end):
        count = real_held(self, end)
        if count is not None:
            lows = [self.calendar.free(v.name, self.now, end, soft=False)
                    for v in self._kept.usable]
            counts.append((count, sum(max(0, low[0]["ncpus"]) for low in lows if low)))
        return count

    def counted(way):
        def fill(self, info, candidates, room, window=None, lows=None):
            chunks = real_fill(self, info, candidates, room, window, lows)
            failed[way] += chunks is None and lows is not None  # (placed now)
            return chunks
        return fill

    jobs = workload(seed, 400, 64)
    monkeypatch.setattr(Scheduler, "_fill", counted("sums"))
    monkeypatch.setattr(Scheduler, "_held_through", held)
    summed, summed_summary = replay(jobs, "easy", True, monkeypatch, afresh=False, nodes=16)
    monkeypatch.setattr(Scheduler, "_fill", counted("vnodes"))
    monkeypatch.setattr(Scheduler, "_held_through", lambda self, end: None)
    by_vnode, by_vnode_summary = replay(jobs, "easy", True, monkeypatch, afresh=False,
                                        nodes=16)
    assert len(counts) > 100
    assert [count for count, _ in counts] == [truth for _, truth in counts]
    assert summed == by_vnode
    assert summed_summary.cycles == by_vnode_summary.cycles
    assert failed["vnodes"] > 50  # (fits that failed, each through every vnode)
    assert failed["sums"] == 0  # (each told by the sums)


@pytest.mark.parametrize("policy", ["easy", "pbs", "fifo"])
@pytest.mark.parametrize("kill", [True, False])
@pytest.mark.parametrize("seed", [1, 2])
def test_reading_only_what_changed_decides_the_same(policy, kill, seed, monkeypatch):
    jobs = workload(seed, 400, 32)
    kept, kept_summary = replay(jobs, policy, kill, monkeypatch, afresh=False)
    fresh, fresh_summary = replay(jobs, policy, kill, monkeypatch, afresh=True)
    assert len(kept) == 400
    assert kept == fresh
    # Not a trivial replay: jobs waited, and some started around a blocked one.
    assert sum(1 for job in jobs if kept[job.job_id][0] > job.submit) > 100
    assert kept_summary.cycles == fresh_summary.cycles


class FirstTryRefuser:
    """runjob refuses every fifth job the first time it is started: its bookings, made by
    the cycle that started it, are taken back by the next as a job's end is."""

    plugin_info = PluginInfo(events=("runjob",), sim_safe=("runjob",))

    def __init__(self):
        self.tried: set[str] = set()

    @hookimpl
    def runjob(self, event):
        job_id = event.job.id
        if int(job_id) % 5 == 0 and job_id not in self.tried:
            self.tried.add(job_id)
            event.reject("not on the first try")


@pytest.mark.parametrize("policy", ["easy", "pbs"])
def test_jobs_refused_at_runjob_and_short_jobs_decide_the_same(policy, monkeypatch,
                                                                register_plugin,
                                                                pbsplug_plugins):
    """Jobs a cycle started that are not running at the next (refused by runjob, or ended
    already) leave the kept top job's plan only when it still holds."""
    refuser = FirstTryRefuser()
    register_plugin(refuser, "refuser", isolation="inprocess")
    jobs = workload(3, 300, 32)
    kept, _ = replay(jobs, policy, True, monkeypatch, afresh=False, plugins=pbsplug_plugins)
    refused = set(refuser.tried)
    refuser.tried.clear()
    fresh, _ = replay(jobs, policy, True, monkeypatch, afresh=True, plugins=pbsplug_plugins)
    assert len(kept) == 300 and kept == fresh
    assert len(refused) > 30 and refused == refuser.tried


def test_the_log_is_read_from_the_last_mark_and_forgets():
    log = JobLog()
    assert log.mark == 0 and log.since(0) == []
    a, b = object(), object()
    log.add(a)
    log.remove(b)
    assert log.since(0) == [(a, True), (b, False)] and log.since(1) == [(b, False)]
    log.forget(1)
    assert log.since(0) is None  # forgotten: the reader must read every job
    assert log.since(1) == [(b, False)] and log.mark == 2
    assert log.since(3) is None  # a mark from another log


def test_a_snapshot_without_a_log_is_read_whole():
    assert Snapshot(None, {}, {}, []).job_log is None


def sleepy_workload(seed: int, count: int, cpus: int) -> list[TraceJob]:
    """Bursts with long quiet gaps between them, so that idle hosts go to sleep and queued
    jobs wake them."""
    rng = random.Random(seed)
    jobs, now = [], 0.0
    for n in range(1, count + 1):
        now += rng.choice([0, 0, 5, 60, 600, 3000])
        ncpus = rng.choice([1, 2, 4, cpus // 2, cpus])
        walltime = rng.choice([60, 300, 1200])
        run = walltime * rng.choice([0.2, 0.9, 1.0])
        jobs.append(TraceJob(str(n), n, now, float(int(run)), ncpus, float(walltime)))
    return jobs


@pytest.mark.parametrize(("seed", "formula"), [(1, None), (2, None), (3, "ncpus")])
def test_vnodes_that_sleep_and_wake_are_refreshed_in_place_and_decide_the_same(
        seed, formula, register_plugin, pbsplug_plugins, monkeypatch, tmp_path):
    """The power plugin puts hosts to sleep and wakes them between cycles: a scheduler that
    updates only those vnodes in place (`Snapshot.vnode_log`) decides as one that reparses
    every vnode at each change, and as one that reads everything afresh. And estimates made
    only in the last cycle before each periodic run (the hook reads them) wake the same
    hosts as estimates made in every cycle, also when a job_sort_formula reorders the queue
    (a job estimated by an earlier cycle and not by the last has no estimate)."""
    pbsplug_power = require_module("pbsplug_power")

    register_plugin(pbsplug_power, "power", freq=60, isolation="inprocess", config={
        "driver": "simulated", "power_on_off_enable": "True", "node_idle_limit": "300",
        "min_node_down_delay": "60", "boot_delay": 120, "shutdown_delay": 30})
    jobs = sleepy_workload(seed, 150, 16)
    refreshed = []
    real_refresh = Scheduler._refresh_states

    def counting(self, kept, snap, now):
        done = real_refresh(self, kept, snap, now)
        refreshed.append(done)
        return done

    def run(variant):
        real = engine.Snapshot
        if variant == "refresh":
            monkeypatch.setattr(Scheduler, "_refresh_states", counting)
        elif variant == "estimates":  # every cycle estimates, not only the periodic's last
            monkeypatch.setattr(Simulator, "_estimates_read", lambda self: True)
        else:
            def changed(*args, **kwargs):
                snap = real(*args, **kwargs)
                return dataclasses.replace(snap, vnode_log=None) if variant == "reparse" \
                    else dataclasses.replace(snap, job_log=None, vnodes_version=None)

            monkeypatch.setattr(engine, "Snapshot", changed)
        sink = Sink()
        policy = policy_settings("easy", {"job_sort_formula": formula} if formula else None)
        sim = Simulator(uniform(4, 4, "test"), sink, plugins=pbsplug_plugins,
                        policy=policy, workdir=tmp_path / variant)
        sim.run(jobs)
        monkeypatch.undo()
        return sink.jobs, sim.summary

    kept, kept_summary = run("refresh")
    reparsed, _ = run("reparse")
    fresh, fresh_summary = run("afresh")
    estimated, _ = run("estimates")
    assert len(kept) == 150 and kept == reparsed == fresh == estimated
    assert kept_summary.cycles == fresh_summary.cycles
    # Not trivial: hosts did sleep (jobs waited for a boot), and the in-place path ran.
    assert kept_summary.hooks.ran[("power", "periodic")] > 100
    assert sum(refreshed) > 10
    assert sum(1 for job in jobs if kept[job.job_id][0] > job.submit) > 20


def test_the_vnode_log_names_what_changed_since_a_version_and_forgets():
    log = VnodeLog(keep=2)
    assert log.version == 0 and log.since(0) == set()
    for name in ("a", "b", "a", "c", "d"):
        log.changed(name)
    assert log.version == 5
    assert log.since(3) == {"c", "d"} and log.since(5) == set()
    assert log.since(0) is None  # forgotten: reparse every vnode
    assert log.since(6) is None  # a version from another log
