"""The simulator's inputs and outputs on the real traces (prints figures; never asserts).

1. Reading: every job of KTH-SP2 (28,476 records) and RICC (447,794) through `open_trace`,
   each repeat in a fresh process; the figures are the wall time of the read and the
   process's peak RSS, beside the RSS of the same process after its imports (what the
   reader adds). SWF is streamed, so the two traces should need the same memory.
2. Writing: a RICC-sized run (447,794 `JobResult`s, two machine states per job) through
   `ResultWriter` with its plots, in a fresh process: wall time beyond what building the
   same records for a sink that does nothing takes, and peak RSS (most of it matplotlib's,
   imported only at `close` when plots are written).

Goals (issue 20): a whole RICC simulation in at most 60 s and 150 MB. The issue sets no
figure for the reader or the writer alone; this script holds each to a tenth of the time
(6 s) and to 100 MB of peak RSS, so that neither is the simulation's bottleneck.

    .venv/bin/python benchmarks/bench_traces.py [--repeat 3] [--traces DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# ../shared beside the repository (or beside the folder of its worktrees).
TRACES = next((p / "shared" / "data" / "traces" for p in (ROOT.parent, ROOT.parent.parent)
               if (p / "shared" / "data" / "traces").is_dir()),
              ROOT.parent / "shared" / "data" / "traces")
NAMES = ("KTH-SP2-1996-2.1-cln.swf.gz", "RICC-2010-2.swf.gz")
GOAL_SECONDS, GOAL_MB = 6.0, 100.0

READ = """
import json, resource, sys, time
from pbsplug.sim.traces import open_trace
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t = time.perf_counter()
trace = open_trace(sys.argv[1])
n = sum(1 for _ in trace)
took = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"jobs": n, "dropped": sum(trace.dropped.values()), "seconds": took,
                  "base_kb": base, "peak_kb": peak}))
"""

WRITE = """
import json, resource, sys, time
from pbsplug.sim.output import ResultWriter
from pbsplug.sim.records import COMPLETED, JobResult, MachineStates, TraceJob
n, out = int(sys.argv[1]), sys.argv[2]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class Null:
    def job(self, result): pass
    def machine(self, states): pass
    def close(self, end): pass


def feed(w):
  for i in range(n):
    now = i * 30.0
    job = TraceJob(job_id=str(i), line=i + 1, submit=now, run_time=600.0, ncpus=8,
                   walltime=3600.0, queue=str(i % 2))
    w.machine(MachineStates(now, {"computing": 20, "idle": 1004}, watts=1e5, queued=i % 7,
                            running=20, busy_cpus=160))
    w.job(JobResult(job, COMPLETED, now + i % 50, now + i % 50 + 600, hosts=(i % 1024,),
                    energy=1e5))
    w.machine(MachineStates(now + 15, {"computing": 19, "idle": 1005}, watts=9e4,
                            queued=i % 5, running=19, busy_cpus=152))
  w.close(n * 30.0 + 700)


t = time.perf_counter()
feed(Null())
records = time.perf_counter() - t
t = time.perf_counter()
feed(ResultWriter(out, cpus=8192, hosts=1024))
took = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"jobs": n, "seconds": took - records, "records": records, "base_kb": base,
                  "peak_kb": peak}))
"""


def child(code: str, *args: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code, *args], check=True, capture_output=True,
                         text=True)
    return json.loads(out.stdout)


def verdict(seconds: float, mb: float) -> str:
    ok = seconds <= GOAL_SECONDS and mb <= GOAL_MB
    return f"(goal <= {GOAL_SECONDS:g} s and <= {GOAL_MB:g} MB: {'met' if ok else 'MISSED'})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per figure")
    parser.add_argument("--traces", type=Path, default=TRACES, help="folder of the traces")
    parser.add_argument("--jobs", type=int, default=447_794, help="jobs in the writer's run")
    args = parser.parse_args()
    print(f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus, "
          f"load average {os.getloadavg()[0]:.2f}; median of {args.repeat} fresh processes")
    for name in NAMES:
        path = args.traces / name
        if not path.exists():
            print(f"{name}: not found in {args.traces} (skipped)")
            continue
        runs = [child(READ, str(path)) for _ in range(args.repeat)]
        seconds = statistics.median(r["seconds"] for r in runs)
        peak = statistics.median(r["peak_kb"] for r in runs) / 1024
        base = statistics.median(r["base_kb"] for r in runs) / 1024
        r = runs[0]
        print(f"read  {name:<30} {r['jobs']:>8,} jobs (+{r['dropped']} dropped) "
              f"{seconds:6.2f} s  {r['jobs'] / seconds:>9,.0f} jobs/s  peak RSS "
              f"{peak:5.1f} MB (after imports {base:.1f} MB) {verdict(seconds, peak)}")
    runs = []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory() as out:
            runs.append(child(WRITE, str(args.jobs), out))
    seconds = statistics.median(r["seconds"] for r in runs)
    peak = statistics.median(r["peak_kb"] for r in runs) / 1024
    base = statistics.median(r["base_kb"] for r in runs) / 1024
    records = statistics.median(r["records"] for r in runs)
    print(f"write a run of {args.jobs:,} jobs and {2 * args.jobs:,} machine states with plots: "
          f"{seconds:6.2f} s beyond the {records:.2f} s that making the records takes; peak "
          f"RSS {peak:5.1f} MB (after imports {base:.1f} MB) {verdict(seconds, peak)}")


if __name__ == "__main__":
    main()
