"""Several schedulers against one (prints figures; never asserts). Issue 9: K partitions with
N queued jobs each, K = 1, 2, 4: the time until every job has been considered, by K
scheduler processes at once (the local engine's way, `pbsplug.engine.schedprocs`) against
one scheduler over the same jobs and vnodes; the speed-up, whose goal is close to
min(K, cores).

Each partition has `--vnodes` four-CPU vnodes, a third of them busy, and N queued jobs of 1
to 8 CPUs (most cannot start: the cycle also plans their estimates). The K processes are
started, and sent their jobs once, before the clock runs (as a running server's schedulers
have them); each timed cycle then has one job in fifty changed (a new comment), as cycles
change estimates and comments. What is timed is the trigger (each scheduler's slice, and
the changed jobs pickled to it), the cycles, and the decisions read back. Every scheduler,
the one and the K, is kept between cycles and fed only what changed (`Feed`), as the
engine's are since issue 20. Two rows each: every scheduler afresh (a server setting
changed each cycle, which makes each start afresh: the whole cycle's work, what issue 9's
goal is about), and every scheduler kept (only the changed jobs read; what is left is
mostly the slice, its pickling and the round trip, which one scheduler in the server's
thread does not pay).

    .venv/bin/python benchmarks/bench_multisched.py [--jobs 2000] [--vnodes 100] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time

from pbsplug import Job, Queue, Server, Vnode
from pbsplug.engine.schedprocs import SchedulerProcesses, Work
from pbsplug.scheduler import Policy, Scheduler, Snapshot
from pbsplug.scheduler.feed import Feed, row

NOW = 1_800_000_000.0


def snapshot(k: int, jobs: int, vnodes: int) -> Snapshot:
    rng = random.Random(9)
    queues, nodes, all_jobs = {}, {}, []
    for p in range(k):
        part = f"P{p}"
        queues[f"q{p}"] = Queue(f"q{p}", {"queue_type": "execution", "started": True,
                                          "partition": part})
        for v in range(vnodes):
            name = f"p{p}n{v}"
            nodes[name] = Vnode(name, {"state": "free", "partition": part,
                                       "resources_available": {"ncpus": 4, "mem": "16gb",
                                                               "host": name}})
            if v % 3 == 0:
                all_jobs.append(Job(f"r{p}.{v}", {
                    "queue": f"q{p}", "job_state": "R", "stime": NOW - 60,
                    "exec_vnode": f"({name}:ncpus=4)",
                    "Resource_List": {"walltime": "02:00:00"}}))
        for j in range(jobs):
            all_jobs.append(Job(f"{p}{j:06d}.s", {
                "queue": f"q{p}", "job_state": "Q", "qtime": NOW - 1000 + j,
                "Resource_List": {"select": f"{rng.randint(1, 3)}:ncpus={rng.randint(1, 4)}",
                                  "walltime": f"0{rng.randint(1, 4)}:00:00"}}))
    return Snapshot(Server("s"), queues, nodes, all_jobs)


class OneScheduler:
    """The same jobs and vnodes, unpartitioned, under one scheduler in this thread, kept
    between cycles and fed as the server feeds its own (`Feed`: every stored row compared
    with the last cycle's), as each process keeps and feeds its own."""

    def __init__(self, snap: Snapshot):
        self.queues = {n: {**row(q), "partition": None} for n, q in snap.queues.items()}
        self.vnodes = {n: {**row(v), "partition": None} for n, v in snap.vnodes.items()}
        self.feed = Feed()
        self.sched = Scheduler("default", policy=Policy())

    def cycle(self, rows: dict[str, dict], server: dict) -> float:
        t0 = time.perf_counter()
        feed = self.feed
        feed.set_server("s", server)
        feed.set_queues(self.queues)
        feed.set_vnodes(self.vnodes)
        feed.set_jobs(rows)
        mark = feed.job_log.mark
        self.sched.cycle(feed.snapshot([]), NOW)
        feed.read(mark)
        return time.perf_counter() - t0


def k_processes(procs: SchedulerProcesses, k: int, snap: Snapshot,
                rows: dict[str, dict], server: dict) -> float:
    """As the server does it: each scheduler's slice (without jobs) and its jobs' stored
    rows, of which only those changed since its last cycle are sent."""
    t0 = time.perf_counter()
    for p in range(k):
        part = Scheduler(f"s{p}", (f"P{p}",)).slice(
            Snapshot(Server("s", server), snap.queues, snap.vnodes, [], snap.reservations))
        procs.trigger(f"s{p}", Work((f"P{p}",), Policy(), frozenset(), 600, part,
                                    {j: a for j, a in rows.items()
                                     if a.get("queue") in part.queues}, NOW))
    done: set[str] = set()
    while len(done) < k:
        for name, _ in procs.poll():
            done.add(name)
        time.sleep(0.01)  # as the server, which polls between requests
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=2000, help="queued jobs per partition")
    parser.add_argument("--vnodes", type=int, default=100, help="vnodes per partition")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"{platform.python_implementation()} {platform.python_version()} on "
          f"{platform.machine()}, {cores} cpus, load {os.getloadavg()[0]:.2f}; {args.jobs} "
          f"queued jobs and {args.vnodes} vnodes per partition; median of {args.repeat}")
    for k, afresh in ((1, True), (2, True), (4, True), (1, False), (2, False), (4, False)):
        if k == 1:
            print("every scheduler afresh each cycle (a server setting changed)" if afresh
                  else "every scheduler kept, one job in fifty changed each cycle")
        snap = snapshot(k, args.jobs, args.vnodes)
        procs = SchedulerProcesses(None, lambda sched, msg: None)
        for p in range(k):
            procs.start(f"s{p}", {})
        rows = {job.id: row(job) for job in snap.jobs}  # what the server reads each cycle
        try:
            single, multi = [], []
            one = OneScheduler(snap)
            for n in range(args.repeat + 1):  # taking turns; the first fills the schedulers
                fresh = {j: {**a, "comment": f"cycle {n}"} if a["job_state"] == "Q" and
                         int(j.split(".")[0][1:]) % 50 == 0 else a for j, a in rows.items()}
                server = {"comment": f"cycle {n}"} if afresh else {}
                single.append(one.cycle(fresh, server))
                multi.append(k_processes(procs, k, snap, fresh, server))
            single, multi = single[1:], multi[1:]
        finally:
            procs.stop_all()
        one, many = statistics.median(single), statistics.median(multi)
        goal = f" (goal close to {min(k, cores)})" if afresh else ""
        print(f"  K={k}: one scheduler {one:6.3f} s, {k} processes {many:6.3f} s, "
              f"speed-up {one / many:4.2f}{goal}")


if __name__ == "__main__":
    main()
