"""One scheduling cycle over growing clusters and queues (prints figures; never asserts).

Each size is a busy machine: vnodes of 8 ncpus and 32gb, about 90% of them taken by running
jobs with staggered ends, and a queue of mixed jobs (1-4 chunks of 1-8 ncpus, walltimes from
10 minutes to 24 hours). Policy: strict_ordering with backfill_depth 1, estimates for the first
100 queued jobs. Goals (issue 3): 10,000 queued jobs over 1,000 vnodes <= 0.5 s; 100,000
over 10,000 <= 5 s; every extension hook implemented by a no-op plugin: <= 10% more.

"kept s" is the next cycle of a scheduler kept between cycles and fed through a `Feed`, as
the local engine feeds its own (issue 20): one running job ended and one job was submitted
since its last cycle. It includes the feed's comparison of every stored row.

    .venv/bin/python benchmarks/bench_scheduler.py [--sizes 1000x100,10000x1000,...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import time

from pbsplug import Job, PluginSet, Queue, Server, Vnode, hookimpl
from pbsplug.scheduler import Policy, Scheduler, Snapshot
from pbsplug.scheduler.feed import Feed, row
from pbsplug.siteconfig import SiteConfig

NOW = 1_800_000_000.0


def build(n_jobs: int, n_vnodes: int, seed: int = 7) -> Snapshot:
    rng = random.Random(seed)
    vnodes = {f"n{i:05d}": Vnode(f"n{i:05d}", {
        "state": "free", "resources_available": {"ncpus": 8, "mem": "32gb",
                                                 "host": f"n{i:05d}"}})
        for i in range(n_vnodes)}
    jobs = []
    seq = 0
    for name in list(vnodes)[: int(n_vnodes * 0.9)]:  # a busy machine
        seq += 1
        jobs.append(Job(f"{seq}.srv", {
            "queue": "workq", "job_state": "R", "stime": NOW - rng.randint(0, 3600),
            "exec_vnode": f"({name}:ncpus=8:mem=16gb)",
            "Resource_List": {"select": "1:ncpus=8:mem=16gb",
                              "walltime": f"{rng.randint(1, 12):02d}:00:00"}}))
    for i in range(n_jobs):
        seq += 1
        chunks = rng.choice((1, 1, 1, 2, 4))
        ncpus = rng.choice((1, 2, 4, 8))
        minutes = rng.choice((10, 30, 60, 120, 240, 720, 1440))
        jobs.append(Job(f"{seq}.srv", {
            "queue": "workq", "job_state": "Q", "qtime": NOW - n_jobs + i,
            "Resource_List": {"select": f"{chunks}:ncpus={ncpus}:mem={ncpus * 2}gb",
                              "walltime": f"{minutes // 60:02d}:{minutes % 60:02d}:00"}}))
    return Snapshot(Server("srv"), {"workq": Queue("workq", {"started": True})}, vnodes, jobs)


class NoOp:
    """Implements every scheduler extension hook and changes nothing."""

    @hookimpl
    def sched_partition(self, obj):
        return None

    @hookimpl
    def sched_job_order(self, order):
        pass

    @hookimpl
    def sched_node_placement(self, placement):
        return None

    @hookimpl
    def sched_node_availability(self, sched, now, vnodes):
        return {}

    @hookimpl
    def sched_cycle_begin(self, sched, now):
        pass

    @hookimpl
    def sched_cycle_end(self, stats):
        pass


def time_cycle(snap: Snapshot, hooks, repeat: int) -> tuple[float, object]:
    times = []
    result = None
    for _ in range(repeat):
        sched = Scheduler(policy=Policy(strict_ordering=True, backfill_depth=1), hooks=hooks)
        t0 = time.perf_counter()
        result = sched.cycle(snap, NOW)
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def time_kept(snap: Snapshot, repeat: int) -> float:
    """The cycle after one running job ended and one was submitted, of a scheduler kept
    and fed as the engine feeds it (the feed's row comparisons included)."""
    jobs = {job.id: row(job) for job in snap.jobs}
    feed = Feed()
    feed.set_server(snap.server.name, row(snap.server))
    feed.set_queues({n: row(q) for n, q in snap.queues.items()})
    vnodes = {n: row(v) for n, v in snap.vnodes.items()}
    sched = Scheduler(policy=Policy(strict_ordering=True, backfill_depth=1))

    def cycle() -> float:
        t0 = time.perf_counter()
        feed.set_vnodes(vnodes)
        feed.set_jobs(jobs)
        mark = feed.job_log.mark
        sched.cycle(feed.snapshot([]), NOW)
        feed.read(mark)
        return time.perf_counter() - t0

    cycle()
    times = []
    for n in range(repeat):
        ended = next(j for j, a in jobs.items() if a["job_state"] == "R")
        del jobs[ended]
        jobs[f"new{n}.srv"] = {"queue": "workq", "job_state": "Q", "qtime": NOW,
                               "Resource_List": {"select": "1:ncpus=2:mem=4gb",
                                                 "walltime": "01:00:00"}}
        times.append(cycle())
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000x100,10000x1000,30000x3000,100000x10000",
                        help="comma-separated JOBSxVNODES")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    plugins = PluginSet(SiteConfig(path=None))
    plugins.add("noop", NoOp(), enable=True)
    goals = {(10000, 1000): 0.5, (100000, 10000): 5.0}
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{platform.processor() or 'cpu'}; median of {args.repeat}")
    print(f"{'queued':>8} {'vnodes':>7} {'cycle s':>9} {'hooks s':>9} {'hooks +%':>9} "
          f"{'started':>8} {'estimates':>9} {'goal':>6} {'kept s':>9}")
    for size in args.sizes.split(","):
        n_jobs, n_vnodes = (int(x) for x in size.split("x"))
        snap = build(n_jobs, n_vnodes)
        plain, result = time_cycle(snap, None, args.repeat)
        hooked, _ = time_cycle(snap, plugins.hook, args.repeat)
        goal = goals.get((n_jobs, n_vnodes))
        verdict = "" if goal is None else ("met" if plain <= goal else "MISSED")
        kept = time_kept(snap, args.repeat)
        print(f"{n_jobs:>8} {n_vnodes:>7} {plain:>9.3f} {hooked:>9.3f} "
              f"{(hooked / plain - 1) * 100:>8.1f}% {len(result.run):>8} "
              f"{len(result.estimates):>9} {verdict:>6} {kept:>9.3f}")


if __name__ == "__main__":
    main()
