"""Several schedulers against one (prints figures; never asserts). Issue 9: K partitions with
N queued jobs each, K = 1, 2, 4: the time until every job has been considered, by K
scheduler processes at once (the local engine's way, `pbsplug.engine.schedprocs`) against
one scheduler over the same jobs and vnodes; the speed-up, whose goal is close to
min(K, cores).

Each partition has `--vnodes` four-CPU vnodes, a third of them busy, and N queued jobs of 1
to 8 CPUs (most cannot start: the cycle also plans their estimates). The K processes are
started before the clock runs; what is timed is the trigger (the snapshot pickled to each),
the cycles, and the decisions read back.

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
from pbsplug.engine.schedprocs import SchedulerProcesses
from pbsplug.scheduler import Policy, Scheduler, Snapshot

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


def one_scheduler(snap: Snapshot) -> float:
    """The same jobs and vnodes, unpartitioned, under one scheduler."""
    flat = Snapshot(snap.server,
                    {n: Queue(n, {**q.to_dict(), "partition": None}) for n, q in
                     snap.queues.items()},
                    {n: Vnode(n, {**v.to_dict(), "partition": None}) for n, v in
                     snap.vnodes.items()}, snap.jobs)
    t0 = time.perf_counter()
    Scheduler("default", policy=Policy()).cycle(flat, NOW)
    return time.perf_counter() - t0


def k_processes(procs: SchedulerProcesses, k: int, snap: Snapshot) -> float:
    t0 = time.perf_counter()
    for p in range(k):  # each gets its slice, as the server sends it
        part = Scheduler(f"s{p}", (f"P{p}",))
        procs.trigger(f"s{p}", ((f"P{p}",), Policy(), frozenset(), 600, part.slice(snap),
                                NOW))
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
    for k in (1, 2, 4):
        snap = snapshot(k, args.jobs, args.vnodes)
        procs = SchedulerProcesses(None, lambda sched, msg: None)
        for p in range(k):
            procs.start(f"s{p}", {})
        try:
            single, multi = [], []
            for _ in range(args.repeat):  # taking turns
                single.append(one_scheduler(snap))
                multi.append(k_processes(procs, k, snap))
        finally:
            procs.stop_all()
        one, many = statistics.median(single), statistics.median(multi)
        goal = min(k, cores)
        print(f"  K={k}: one scheduler {one:6.2f} s, {k} processes {many:6.2f} s, "
              f"speed-up {one / many:4.2f} (goal close to {goal})")


if __name__ == "__main__":
    main()
