"""AccaSim 1.1.3's EASY backfilling, as a pbsplug scheduler-hook plugin, for bench_sim.py.

bench_sim.py compares pbsplug's EASY with AccaSim's on KTH-SP2. The two differ in two rules
(benchmarks/README.md, docs/simulator.md; read from AccaSim's `EASYBackfilling` and
`FirstFit` classes):

1. AccaSim does not keep a backfilled job off the blocked job's processors: its fill passes
   no reserved nodes, so every queued job that fits starts, in queue order, whatever its
   length. pbsplug's policy with ``strict_ordering`` false does exactly this.
2. AccaSim plans the blocked job once, when it first blocks (running jobs end at start +
   requested time, jobs started in the same pass at now + requested time), and does not try
   it again before that time, even when room frees earlier; from then on it is tried first
   at every dispatch, and the other jobs still fill behind it.
3. AccaSim dispatches once per instant. A job of zero run time started in a dispatch holds
   its processors to the end of that dispatch and frees them after it, and nothing else
   starts at that instant; pbsplug's simulator ends it at once and runs a second cycle at
   the same instant (docs/simulator.md, "Ties and determinism"), which may start more jobs.

This plugin adds rules 2 and 3 on top of that policy, through the kernel's scheduler hooks,
with ``estimate_limit`` 1 (the first job that does not start gets ``estimated.start_time``,
which the simulator writes onto the job):

- `sched_job_order`: the first queued job that carries an estimate and has no reservation
  yet gets that estimate as its reservation time, once (a later cycle's estimate does not
  move it); a reserved job that is no longer queued (it started) is forgotten. A cycle at
  the same instant as the one before it is noted.
- `sched_node_placement`: holds (``[]``) the reserved job when it would start now while the
  clock is before its reservation time, and every job in a second cycle at one instant.
  Plans (``placement.start`` set) are left alone.

The state lives in the plugin object, so it works where the scheduler's hooks run in one
process for the whole run: the simulator. It is a benchmark's model of another simulator,
not a policy for a site.

    [plugins.accasim_rules]
    enabled = true
    isolation = "inprocess"
    [sim.scheduler]
    strict_ordering = false
    estimate_limit = 1
"""

from __future__ import annotations

from pathlib import Path

from pbsplug import JobOrder, Placement, PluginInfo, clock, hookimpl

#: The policy the plugin needs: AccaSim's unprotected fill, and an estimate for the first job
#: that does not start (the blocked job's reservation time).
POLICY = {"strict_ordering": False, "backfill": True, "backfill_depth": 1, "estimate_limit": 1}


class AccasimRules:
    """One run's state, per scheduler: the blocked job and its reservation time, and
    whether this cycle is a second one at the same instant."""

    plugin_info = PluginInfo(
        api="1.3",
        sim_safe=("sched_job_order", "sched_node_placement"),
        description="AccaSim 1.1.3's EASY rules (a benchmark's model, not a site policy)",
    )

    def __init__(self) -> None:
        self.reserved: dict[str, tuple[str, float]] = {}
        self.last_cycle: dict[str, float] = {}
        self.again: set[str] = set()  # schedulers in a second cycle at one instant

    @hookimpl
    def sched_job_order(self, order: JobOrder) -> None:
        if self.last_cycle.get(order.sched) == order.now:
            self.again.add(order.sched)
        else:
            self.again.discard(order.sched)
        self.last_cycle[order.sched] = order.now
        held = self.reserved.get(order.sched)
        if held is not None and all(job.id != held[0] for job in order.jobs):
            del self.reserved[order.sched]  # it started (or left the queue)
            held = None
        if held is not None:
            return
        for job in order.jobs:
            estimate = job.estimated
            start = estimate.get("start_time") if estimate else None
            if start is not None:
                self.reserved[order.sched] = (job.id, float(start))
                return

    @hookimpl
    def sched_node_placement(self, placement: Placement) -> list[str] | None:
        if placement.start is not None:
            return None
        if placement.sched in self.again:
            return []
        held = self.reserved.get(placement.sched)
        if held is not None and held[0] == placement.job.id and clock.now() < held[1]:
            return []
        return None


#: What the entry point names: one plugin object for the process (one run per process).
plugin = AccasimRules()

SITE = """
[plugins.accasim_rules]
enabled = true
isolation = "inprocess"
"""


def write_dist(parent: Path) -> Path:
    """``parent/site-packages`` holding the dist pbsplug-accasim_rules, whose entry point
    ``accasim_rules`` names this module's `plugin` (this folder must be on sys.path too)."""
    from noop_plugin import add_plugin  # beside this module, as the bench runs it

    dist = parent / "site-packages"
    dist.mkdir()
    add_plugin(dist, "accasim_rules", "accasim_rules:plugin")
    return dist


#: A small trace (4 one-cpu nodes) on which the two rules decide, and the starts AccaSim 1.1.3
#: gives it (EASYBackfilling with FirstFit, run by bench_sim.py; seconds from the first
#: submission). Job 3 blocks at 10 and is planned at 200 (job 2 asked for 200 s): it is held
#: when the machine empties at 100, while job 4 fills at 150, and starts at the next dispatch
#: after 200 (250). Job 8 fills at 1010 past job 7's planned start (1100), which delays job 7
#: to 1510; job 9 still fills at 1150. Jobs 10 and 14 run past their requested time: job 11
#: is planned at 2100 and tried first from then on; job 15 blocks at 3150 after job 14's
#: planned end (3100), so it is never held. Job 18 is submitted as job 17 ends. Job 21 runs
#: 0 s: it takes the last free processor at 5200, where job 20 (planned at 5100) is tried
#: first and does not fit, and job 22 waits for the next dispatch (5300), not for job 21's
#: end at the same instant.
TINY_SWF = """\
; MaxNodes: 4
; MaxProcs: 4
1 0 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
2 0 -1 50 2 -1 -1 2 200 -1 1 1 1 -1 1 -1 -1 -1
3 10 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1
4 150 -1 30 1 -1 -1 1 30 -1 1 1 1 -1 1 -1 -1 -1
5 250 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1
6 1000 -1 100 2 -1 -1 2 100 -1 1 1 1 -1 1 -1 -1 -1
7 1000 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1
8 1010 -1 500 2 -1 -1 2 500 -1 1 1 1 -1 1 -1 -1 -1
9 1150 -1 20 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1
10 2000 -1 300 3 -1 -1 3 100 -1 1 1 1 -1 1 -1 -1 -1
11 2000 -1 50 2 -1 -1 2 50 -1 1 1 1 -1 1 -1 -1 -1
12 2200 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1
13 2205 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 1 -1 -1 -1
14 3000 -1 300 3 -1 -1 3 100 -1 1 1 1 -1 1 -1 -1 -1
15 3150 -1 50 2 -1 -1 2 50 -1 1 1 1 -1 1 -1 -1 -1
16 3160 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1
17 4000 -1 100 4 -1 -1 4 100 -1 1 1 1 -1 1 -1 -1 -1
18 4100 -1 10 4 -1 -1 4 10 -1 1 1 1 -1 1 -1 -1 -1
19 5000 -1 300 3 -1 -1 3 100 -1 1 1 1 -1 1 -1 -1 -1
20 5000 -1 10 2 -1 -1 2 10 -1 1 1 1 -1 1 -1 -1 -1
21 5200 -1 0 1 -1 -1 1 60 -1 1 1 1 -1 1 -1 -1 -1
22 5200 -1 10 1 -1 -1 1 10 -1 1 1 1 -1 1 -1 -1 -1
"""
#: AccaSim's configuration for it: 4 nodes of one core, a processor is a core.
TINY_CONFIG = ('{"system_name": "tiny", "start_time": 1000000, '
               '"equivalence": {"processor": {"core": 1}}, "groups": {"g0": {"core": 1}}, '
               '"resources": {"g0": 4}}\n')
ACCASIM_TINY_STARTS = {"1": 0, "2": 0, "3": 250, "4": 150, "5": 350, "6": 1000, "7": 1510,
                       "8": 1010, "9": 1150, "10": 2000, "11": 2300, "12": 2200, "13": 2300,
                       "14": 3000, "15": 3300, "16": 3160, "17": 4000, "18": 4100, "19": 5000,
                       "20": 5300, "21": 5200, "22": 5300}
