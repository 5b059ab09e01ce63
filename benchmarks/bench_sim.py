"""The simulator on real traces (prints figures; never asserts).

Rows (issue 20):
- KTH-SP2 (28,475 jobs) with EASY (strict ordering, backfill depth 1, requested time as the
  estimate, first fit), jobs killed at their walltime (pbsplug's rule) and, for the
  comparison, running their recorded time (AccaSim's rule); beside it AccaSim 1.1.3 in the
  same run when a Python <= 3.9 with accasim can be found (--accasim-python, else
  $ACCASIM_PYTHON, else ~/.pyenv/versions/3.9*/ with `pip install accasim` done).
  Goals: >= 20x AccaSim's jobs/s; mean wait and mean bounded slowdown within 2% of AccaSim's.
  Beside them, pbsplug under AccaSim's EASY rules (accasim_rules.py: the plugin that
  reproduces them through pbsplug's scheduler hooks), first checked job by job against
  AccaSim's own schedule of a small hand-made trace (accasim_rules.TINY_SWF).
- RICC (447,794 jobs) with EASY: goal <= 60 s and <= 150 MB peak memory (--ricc-limit N
  replays only the first N jobs).
- The simulator alone: KTH-SP2 again with each cycle's result replayed from a first run
  instead of computed (`one_split`), so the scheduler costs nothing; the same files, and the
  time left is the simulator's own (the trace, the jobs' lives, the hosts' accounting, the
  output files). The goal's time minus it is what the scheduler may take at most.
  --split-ricc does the same for RICC after its row.
- The floor: EASY on KTH-SP2 in plain Python on one count of free cpus, nothing of PBS and
  no output (`one_floor`): what the language charges for the rule, beside the goal's time.
- With --widen K: KTH-SP2 with every job's processors and the machine's K times as many
  (`widened`): the same schedule on K times the vnodes, so the time it adds tells what grows
  with the vnodes a job holds from what does not (per job, per cycle).
- With --power: energy saved and mean wait added by the power plugin (on/off, simulated
  driver) against always-on, on KTH-SP2 (about 2 minutes) and RICC with --power-ricc
  (about an hour for all of it; --ricc-limit N for its first N jobs).

Each run is its own process, so its peak memory (max RSS) is its own. Results (metrics and
Batsim CSVs, no plots) go to a temporary folder.

    .venv/bin/python benchmarks/bench_sim.py [--skip-accasim] [--skip-rules] [--skip-ricc]
                                             [--ricc-limit N] [--split-ricc] [--power]
                                             [--widen K]
"""

from __future__ import annotations

import argparse
import glob
import gzip
import json
import math
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRACES = Path(os.environ.get("PBSPLUG_TRACES", "/work/shared/data/traces"))
ACCASIM = Path(os.environ.get("PBSPLUG_ACCASIM", "/work/shared/reference/accasim"))
KTH = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"
RICC = TRACES / "RICC-2010-2.swf.gz"
ACCASIM_JOBS_S = 1271  # measured here (shared/reference/simulators.md), when it cannot run

POWER_SITE = """
[plugins.power]
enabled = true
isolation = "inprocess"
freq = 300
[plugins.power.config]
driver = "simulated"
power_on_off_enable = "True"
node_idle_limit = "1800"
min_node_down_delay = "1800"
boot_delay = 300
shutdown_delay = 60
"""

#: What the plugin run changes (benchmarks/README.md, bench_sim.py section, says why).
RULES_DIFFER = """rules that differ, pbsplug's EASY -> AccaSim's EASY (the plugin's run):
  1. a job started past the blocked job's planned start is kept off the vnodes planned for
     it -> it is not kept off any (strict_ordering false: every job that fits starts, in order)
  2. the blocked job is planned again every cycle and starts as soon as it fits -> planned
     once, when it first blocks, and not tried before that time even if room frees earlier
     (the plugin holds it in sched_node_placement); from then on tried first at every cycle
  3. a job of 0 s ends at once and a second cycle runs at the same instant -> it holds its
     cpus to the end of the one dispatch at that instant (the plugin starts nothing in a
     second cycle at one instant)"""


def simulation(trace: str, out: str, limit: int | None, kill: bool, site: str | None = None,
               policy: dict | None = None, workdir: Path | None = None):
    """A Simulator of `trace` under EASY (`policy` sets keys over it) and the site's
    plugins, writing metrics and Batsim CSVs (no plots) to `out`, and its first `limit`
    jobs (all with None). With a site, call it inside `replay_home` and give its folder
    as `workdir`, as `pbsplug sim` does: the plugins load with it as their home."""
    import itertools

    from pbsplug.plugins import load_plugins
    from pbsplug.sim.engine import Simulator, policy_settings
    from pbsplug.sim.machine import from_header
    from pbsplug.sim.output import ResultWriter
    from pbsplug.sim.traces import open_trace
    from pbsplug.siteconfig import load_site

    plugins = load_plugins(load_site(Path(site)), report=False,
                           private_state=True) if site else None
    tr = open_trace(trace)
    machine = from_header(tr.info.max_nodes, tr.info.max_procs, trace)
    sink = ResultWriter(out, cpus=machine.total_cpus, hosts=len(machine.hosts), plots=False)
    sim = Simulator(machine, sink, plugins=plugins, policy=policy_settings("easy", policy),
                    kill_at_walltime=kill, workdir=workdir)
    return itertools.islice(tr, limit), sim


def one_run(trace: str, out: str, limit: int | None, kill: bool, site: str | None,
            policy: dict | None = None, starts: bool = False) -> dict:
    """One simulation in this process: figures as a dict. `policy` sets keys over EASY's;
    with `starts`, each job's start too."""
    from pbsplug.sim.engine import replay_home

    with replay_home() as workdir:  # (the plugins' home from their load on)
        jobs, sim = simulation(trace, out, limit, kill, site, policy, workdir)
        t0 = time.perf_counter()
        summary = sim.run(jobs)
        wall = time.perf_counter() - t0
    m = json.loads((Path(out) / "metrics.json").read_text())
    started = None
    if starts:
        import csv

        with open(Path(out) / "out_jobs.csv", newline="") as jobs_csv:
            started = {row["job_id"]: float(row["starting_time"])
                       for row in csv.DictReader(jobs_csv) if row["starting_time"]}
    return {"starts": started, "jobs": summary.jobs + summary.rejected, "wall": wall,
            "mean_wait": m.get("mean_wait_s"), "bsld": m.get("mean_bounded_slowdown"),
            "energy_kwh": m.get("energy_kwh"), "killed": summary.killed,
            "cycles": summary.cycles, "skipped": summary.cycles_skipped,
            "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def one_split(trace: str, out: str, kill: bool, limit: int | None = None) -> dict:
    """Two simulations of `trace` (its first `limit` jobs) in this process: the first
    records each scheduling cycle's result; the second, timed, is given those results
    instead of running the scheduler (the same starts, so the same files). Its time is the
    simulator's own."""
    tr, sim = simulation(trace, os.path.join(out, "scheduled"), limit, kill)
    (sched,) = sim.schedulers
    results = []
    real = sched.cycle

    def recorded(snap, now=None):
        results.append(real(snap, now))
        return results[-1]

    sched.cycle = recorded
    sim.run(tr)
    tr, sim = simulation(trace, os.path.join(out, "replayed"), limit, kill)
    (sched,) = sim.schedulers
    sched.cycle = lambda snap, now=None, _next=iter(results).__next__: _next()
    t0 = time.perf_counter()
    summary = sim.run(tr)
    wall = time.perf_counter() - t0
    same = all((Path(out) / "scheduled" / name).read_bytes()
               == (Path(out) / "replayed" / name).read_bytes()
               for name in ("out_jobs.csv", "out_machine_states.csv", "out_series.csv",
                            "metrics.json", "metrics.txt"))
    return {"jobs": summary.jobs + summary.rejected, "wall": wall, "same": same}


def one_floor(trace: str, limit: int | None = None, hosts: bool = False) -> dict:
    """The floor: what Python itself charges for EASY on this trace. Each job is three
    numbers (cpus, requested time, run time) read from its SWF line; the machine is one
    count of free cpus (with `hosts`, a list of free one-cpu hosts, lowest first: a job
    takes the first ones and gives them back at its end, and its hosts are written as
    Batsim's intervals, so what naming each job's hosts costs shows); at each instant,
    ends, then submissions, then jobs start in order
    while they fit, and when the first does not, its shadow time (the running jobs' ends
    by requested time, in order, until enough cpus are free) lets a later job start if it
    fits now and ends by then or takes no more than the cpus left over at that time. A job
    runs its recorded time, at most its requested time. No PBS rule (vnodes, chunks,
    hooks, attributes) and no output: a reference for the goal's time, not a scheduler."""
    import gzip
    import heapq

    from pbsplug.sim.output import intervals

    t0 = time.perf_counter()
    jobs, total = [], 0
    with gzip.open(trace, "rt") as lines:
        for line in lines:
            fields = line.split()
            if not fields or fields[0].startswith(";"):
                if fields[1:2] == ["MaxProcs:"]:
                    total = int(fields[2])
                continue
            cpus = int(fields[7]) if int(fields[7]) > 0 else int(fields[4])
            if cpus <= 0:
                continue
            run = max(int(fields[3]), 0)
            asked = int(fields[8]) if int(fields[8]) > 0 else run
            jobs.append((int(fields[1]), int(fields[0]), cpus, max(asked, 1), run))
            if len(jobs) == limit:
                break
    jobs.sort()
    free, queue, ends, planned = total, [], [], {}
    waited, count, i = 0.0, 0, 0
    free_hosts, texts = list(range(total)), []

    def start(job: tuple, now: int) -> None:
        nonlocal free, waited, count, free_hosts
        free -= job[2]
        held = job[2]
        if hosts:
            held, free_hosts = free_hosts[:job[2]], free_hosts[job[2]:]
            texts.append(intervals(held))
        heapq.heappush(ends, (now + min(job[4], job[3]), job[1], held))
        planned[job[1]] = (now + job[3], job[2])
        waited += now - job[0]
        count += 1

    while i < len(jobs) or ends:
        now = min(ends[0][0] if ends else math.inf, jobs[i][0] if i < len(jobs) else math.inf)
        while ends and ends[0][0] <= now:
            _, number, held = heapq.heappop(ends)
            if hosts:
                free += len(held)
                free_hosts = sorted(free_hosts + held)
            else:
                free += held
            del planned[number]
        while i < len(jobs) and jobs[i][0] <= now:
            queue.append(jobs[i])
            i += 1
        while queue and queue[0][2] <= free:
            start(queue.pop(0), now)
        if not queue or not free:
            continue
        have, shadow, spare = free, math.inf, 0
        for end, cpus in sorted(planned.values()):
            have += cpus
            if have >= queue[0][2]:
                shadow, spare = end, have - queue[0][2]
                break
        k = 1
        while k < len(queue) and free:
            job = queue[k]
            if job[2] <= free and (now + job[3] <= shadow or job[2] <= spare):
                if now + job[3] > shadow:
                    spare -= job[2]
                start(queue.pop(k), now)
            else:
                k += 1
    return {"jobs": count, "wall": time.perf_counter() - t0, "mean_wait": waited / count}


def widened(trace: Path, k: int, folder: Path) -> Path:
    """An SWF copy of `trace` (an SWF.gz) in `folder` with every job's processors (fields 5
    and 8, where known) and the header's MaxNodes and MaxProcs times `k`. On KTH-SP2 (one-cpu
    hosts, first fit) EASY gives it the same schedule, on k times the vnodes."""
    out = folder / f"{trace.name.removesuffix('.gz').removesuffix('.swf')}-x{k}.swf"
    with gzip.open(trace, "rt") as src, open(out, "w") as dst:
        for line in src:
            if line.startswith(";"):
                key, _, value = line[1:].partition(":")
                if key.strip() in ("MaxNodes", "MaxProcs"):
                    line = f"; {key.strip()}: {int(value) * k}\n"
            elif line.strip():
                fields = line.split()
                for i in (4, 7):
                    if int(fields[i]) > 0:
                        fields[i] = str(int(fields[i]) * k)
                line = " ".join(fields) + "\n"
            dst.write(line)
    return out


def split_child(trace: Path, limit: int | None) -> dict:
    """`one_split` in a child process (jobs killed at walltime, as in the rows beside it)."""
    out = tempfile.mkdtemp(prefix="bench-sim-split-")
    try:
        return in_child(f"one_split({str(trace)!r}, {out!r}, True, {limit!r})")
    finally:
        shutil.rmtree(out, ignore_errors=True)


def run_child(trace: Path, limit: int | None, kill: bool = True, site: str | None = None,
              policy: dict | None = None, path: str | None = None, starts: bool = False
              ) -> dict:
    """One simulation in a child process; `path` goes first on its sys.path (a plugin's
    dist)."""
    out = tempfile.mkdtemp(prefix="bench-sim-out-")
    try:
        return in_child(f"one_run({str(trace)!r}, {out!r}, {limit!r}, {kill!r}, {site!r}, "
                        f"{policy!r}, {starts!r})", path)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def in_child(call: str, path: str | None = None):
    """`call` (a call of a function of this file) in a child process: its JSON result."""
    paths = [str(Path(__file__).parent)] + ([path] if path else [])
    code = (f"import json,sys; sys.path[:0] = {paths!r}; import bench_sim; "
            f"print(json.dumps(bench_sim.{call}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"simulation failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def one_starts(trace: str, site: str, policy: dict | None) -> dict[str, float]:
    """Each job's start in one simulation of `trace` (jobs run their recorded time), in
    this process."""
    from pbsplug.plugins import load_plugins
    from pbsplug.sim.engine import Simulator, policy_settings, replay_home
    from pbsplug.sim.machine import from_header
    from pbsplug.sim.traces import open_trace
    from pbsplug.siteconfig import load_site

    class Starts:
        """A ResultSink that keeps each job's start."""

        def __init__(self) -> None:
            self.starts: dict[str, float] = {}

        def job(self, result) -> None:
            self.starts[result.job.job_id] = result.start

        def machine(self, states) -> None:
            pass

        def close(self, end) -> None:
            pass

    tr = open_trace(trace)
    sink = Starts()
    with replay_home() as workdir:  # (the plugins' home from their load on)
        sim = Simulator(from_header(tr.info.max_nodes, tr.info.max_procs, trace), sink,
                        plugins=load_plugins(load_site(Path(site)), report=False,
                                             private_state=True),
                        policy=policy_settings("easy", policy), kill_at_walltime=False,
                        workdir=workdir)
        sim.run(iter(tr))
    return sink.starts


def find_accasim(explicit: str | None) -> str | None:
    candidates = [explicit, os.environ.get("ACCASIM_PYTHON")]
    candidates += sorted(glob.glob("/tmp/*acc39*/bin/python")) + sorted(glob.glob(
        str(Path.home() / ".pyenv/versions/3.9*/bin/python")))
    for python in candidates:
        if python and Path(python).exists() and subprocess.run(
                [python, "-c", "import accasim"], capture_output=True).returncode == 0:
            return python
    return None


def accasim_schedule(python: str, work: Path, swf: Path, config: str
                     ) -> tuple[float, Path | None]:
    """AccaSim 1.1.3 with EASY and first fit (the reference scripts) on `swf`, in `work`
    (which holds config/): its wall time and its schedule file (sched-*), None on failure."""
    shutil.copy(ACCASIM / "run_accasim.py", work)
    t0 = time.perf_counter()
    done = subprocess.run([python, "run_accasim.py", str(swf), config, "easy"],
                          cwd=work, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        print(f"AccaSim failed: {done.stderr.strip().splitlines()[-1:]}")
        return wall, None
    return wall, next(iter(sorted(work.glob("results_easy/sched-*"))), None)


def run_accasim(python: str) -> dict | None:
    """AccaSim 1.1.3 on KTH-SP2 with EASY and first fit (the reference scripts)."""
    work = Path(tempfile.mkdtemp(prefix="bench-accasim-"))
    (work / "workloads").mkdir()
    swf = work / "workloads" / "KTH-SP2-1996-2.1-cln.swf"
    import gzip

    with gzip.open(KTH, "rb") as src, open(swf, "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copytree(ACCASIM / "config", work / "config")
    wall, schedule = accasim_schedule(python, work, swf, "config/KTH.config")
    figures = None
    if schedule is not None:
        figures = {"wall": wall, "jobs": 28475}
        line = subprocess.run([sys.executable, str(ACCASIM / "metrics.py"), str(schedule),
                               "100"], capture_output=True, text=True).stdout
        for part in line.split():
            key, _, value = part.partition("=")
            if key in ("jobs", "mean_wait", "mean_bsld10"):
                figures[key] = float(value.rstrip("s"))
        with open(swf) as lines:
            submits = {f[0]: float(f[1]) for f in map(str.split, lines)
                       if f and not f[0].startswith(";")}
        figures["starts"] = schedule_starts(schedule, submits)
    shutil.rmtree(work, ignore_errors=True)
    return figures


def schedule_starts(schedule: Path, submits: dict[str, float]) -> dict[str, float]:
    """Each job's start from AccaSim's schedule file, in the trace's seconds: its submit
    time plus its wait (start minus queue time, both written as dates)."""
    import datetime as dt

    def date(text: str) -> dt.datetime:
        return dt.datetime.strptime(text, "%Y-%m-%d %H:%M:%S")

    starts = {}
    for line in schedule.read_text().splitlines():
        head, _, rest = line.partition("__")
        fields = head.split(";")
        start = rest.partition("__")[2].split(";")[0]
        if len(fields) >= 3 and start:
            job = fields[0]
            starts[job] = submits[job] + (date(start) - date(fields[2])).total_seconds()
    return starts


def tiny_check(python: str | None, site: str, path: str) -> None:
    """The plugin against AccaSim's own schedule of accasim_rules.TINY_SWF, job by job."""
    import accasim_rules

    work = Path(tempfile.mkdtemp(prefix="bench-accasim-tiny-"))
    (work / "config").mkdir()
    swf = work / "tiny.swf"
    swf.write_text(accasim_rules.TINY_SWF)
    (work / "config" / "tiny.config").write_text(accasim_rules.TINY_CONFIG)
    submits = {line.split()[0]: float(line.split()[1])
               for line in accasim_rules.TINY_SWF.splitlines() if not line.startswith(";")}
    ours = in_child(f"one_starts({str(swf)!r}, {site!r}, {accasim_rules.POLICY!r})", path)
    theirs, source = dict(accasim_rules.ACCASIM_TINY_STARTS), "as recorded (no AccaSim here)"
    if python is not None:
        _, schedule = accasim_schedule(python, work, swf, "config/tiny.config")
        if schedule is not None:
            theirs, source = schedule_starts(schedule, submits), "AccaSim in this run"
    shutil.rmtree(work, ignore_errors=True)
    differ = sorted((j for j in submits if ours.get(j) != theirs.get(j)), key=int)
    print(f"small trace ({len(submits)} jobs, 4 nodes), starts under AccaSim's rules against "
          f"{source}: " + ("all the same" if not differ else "DIFFER: " + ", ".join(
              f"job {j} {ours.get(j)} vs {theirs.get(j)}" for j in differ)))


def pct(a: float, b: float, digits: int = 1) -> str:
    return f"{100 * (a - b) / b:+.{digits}f}%"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--skip-accasim", action="store_true")
    parser.add_argument("--accasim-python")
    parser.add_argument("--ricc-limit", type=int, default=None)
    parser.add_argument("--skip-ricc", action="store_true")
    parser.add_argument("--power", action="store_true")
    parser.add_argument("--power-ricc", action="store_true")
    parser.add_argument("--split-ricc", action="store_true",
                        help="RICC's simulator alone too (each cycle's result replayed; "
                             "holds them all: 1.7 GB for all of RICC)")
    parser.add_argument("--skip-rules", action="store_true",
                        help="leave out the run under AccaSim's EASY rules (the plugin)")
    parser.add_argument("--widen", type=int, metavar="K",
                        help="KTH-SP2 again with every job's processors and the machine's K "
                             "times as many (the same schedule): what grows with the vnodes")
    args = parser.parse_args()
    if args.widen is not None and args.widen < 2:
        parser.error(f"--widen must be 2 or more, not {args.widen}")
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} "
          f"cpus, load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    kth = run_child(KTH, None, kill=True)
    same = run_child(KTH, None, kill=False)
    python = None if args.skip_accasim else find_accasim(args.accasim_python)
    rules = None
    if not args.skip_rules:
        import accasim_rules

        folder = Path(tempfile.mkdtemp(prefix="bench-sim-rules-"))
        dist = str(accasim_rules.write_dist(folder))
        site = folder / "site.toml"
        site.write_text(accasim_rules.SITE)
        tiny_check(python, str(site), dist)
        rules = run_child(KTH, None, kill=False, site=str(site), policy=accasim_rules.POLICY,
                          path=dist, starts=True)
        shutil.rmtree(folder, ignore_errors=True)
    acc = None
    if not args.skip_accasim:
        acc = run_accasim(python) if python else None
        if python is None:
            print("AccaSim: no Python <= 3.9 with accasim found; its figure is the one "
                  f"measured here before ({ACCASIM_JOBS_S} jobs/s)")
    acc_rate = acc["jobs"] / acc["wall"] if acc else ACCASIM_JOBS_S
    print("\nKTH-SP2, EASY (strict ordering, backfill depth 1, requested time, first fit)")
    print(f"{'run':44} {'wall s':>8} {'jobs/s':>9} {'mean wait s':>12} {'mean BSLD':>10} "
          f"{'peak MB':>8}")
    rows = [("pbsplug, killed at walltime", kth),
            ("pbsplug, recorded run time (AccaSim's rule)", same)]
    if rules:
        rows.append(("pbsplug, AccaSim's EASY rules (plugin)", rules))
    for name, r in rows:
        print(f"{name:44} {r['wall']:8.2f} {r['jobs'] / r['wall']:9,.0f} "
              f"{r['mean_wait']:12,.1f} {r['bsld']:10.2f} {r['rss_mb']:8.0f}")
    if acc:
        print(f"{'AccaSim 1.1.3 (same run)':44} {acc['wall']:8.2f} {acc_rate:9,.0f} "
              f"{acc.get('mean_wait', float('nan')):12,.1f} "
              f"{acc.get('mean_bsld10', float('nan')):10.2f} {'':>8}")
    ratio = same["jobs"] / same["wall"] / acc_rate
    print(f"speed: {ratio:.1f}x AccaSim (goal >= 20x): {'met' if ratio >= 20 else 'MISSED'}")
    if acc and "mean_wait" in acc:
        dw = abs(same["mean_wait"] - acc["mean_wait"]) / acc["mean_wait"]
        db = abs(same["bsld"] - acc["mean_bsld10"]) / acc["mean_bsld10"]
        print(f"mean wait {pct(same['mean_wait'], acc['mean_wait'])}, mean BSLD "
              f"{pct(same['bsld'], acc['mean_bsld10'])} against AccaSim (goal within 2%): "
              f"{'met' if dw <= 0.02 and db <= 0.02 else 'MISSED'}")
    if acc and "mean_wait" in acc and rules:
        dw = abs(rules["mean_wait"] - acc["mean_wait"]) / acc["mean_wait"]
        db = abs(rules["bsld"] - acc["mean_bsld10"]) / acc["mean_bsld10"]
        print(f"under AccaSim's rules: mean wait {pct(rules['mean_wait'], acc['mean_wait'], 2)}, "
              f"mean BSLD {pct(rules['bsld'], acc['mean_bsld10'], 2)} against AccaSim (goal "
              f"within 2%): {'met' if dw <= 0.02 and db <= 0.02 else 'MISSED'}")
    if acc and acc.get("starts") and rules:
        ours, theirs = rules["starts"], acc["starts"]
        differ = [j for j in theirs.keys() | ours.keys() if ours.get(j) != theirs.get(j)]
        print(f"under AccaSim's rules, job by job: {len(differ):,} of {len(theirs):,} jobs "
              "start at another time than in AccaSim's schedule"
              + (f" (first: {', '.join(sorted(differ, key=str)[:5])})" if differ else ""))
    if rules:
        print(RULES_DIFFER)
    print(f"cycles: {kth['cycles']:,} run, {kth['skipped']:,} skipped; "
          f"{kth['killed']:,} jobs killed at walltime")
    alone = split_child(KTH, None)
    goal = kth["jobs"] / (20 * acc_rate)
    print(f"the simulator alone (each cycle's result replayed, "
          f"{'the same files' if alone['same'] else 'OTHER FILES'}): {alone['wall']:.2f} s of "
          f"{kth['wall']:.2f} s, the scheduler {kth['wall'] - alone['wall']:.2f} s; the goal's "
          f"time for the whole replay: {goal:.2f} s")
    floor = in_child(f"one_floor({str(KTH)!r})")
    print(f"the floor (EASY on one count of free cpus in plain Python, `one_floor`: no PBS "
          f"rule, no output): {floor['wall']:.2f} s for {floor['jobs']:,} jobs, the goal "
          f"{goal / floor['wall']:.1f}x it, pbsplug {kth['wall'] / floor['wall']:.0f}x it")
    named = in_child(f"one_floor({str(KTH)!r}, hosts=True)")
    print(f"the floor with each job's hosts named (a list of free hosts, first fit, Batsim's "
          f"intervals made): {named['wall']:.2f} s")
    if args.widen:
        folder = Path(tempfile.mkdtemp(prefix="bench-sim-widen-"))
        try:
            wide = run_child(widened(KTH, args.widen, folder), None, kill=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        same_schedule = all(wide[key] == kth[key]
                            for key in ("jobs", "cycles", "mean_wait", "bsld", "killed"))
        grows = (wide["wall"] - kth["wall"]) / (args.widen - 1)
        print(f"KTH-SP2 widened {args.widen}x (each job's processors and the machine): "
              f"{wide['wall']:.2f} s, {'the same' if same_schedule else 'ANOTHER'} schedule; "
              f"what grows with a job's vnodes {grows:.2f} s of {kth['wall']:.2f} s "
              f"({100 * grows / kth['wall']:.0f}%), the rest {kth['wall'] - grows:.2f} s")

    if not args.skip_ricc:
        ricc = run_child(RICC, args.ricc_limit, kill=True)
        what = "all" if args.ricc_limit is None else f"first {args.ricc_limit:,}"
        met = args.ricc_limit is None and ricc["wall"] <= 60 and ricc["rss_mb"] <= 150
        print(f"\nRICC ({what} jobs), EASY: {ricc['jobs']:,} jobs in {ricc['wall']:.1f} s "
              f"({ricc['jobs'] / ricc['wall']:,.0f} jobs/s), peak {ricc['rss_mb']:.0f} MB, "
              f"mean wait {ricc['mean_wait']:,.0f} s, mean BSLD {ricc['bsld']:.1f} "
              f"(goal all jobs <= 60 s, <= 150 MB: "
              f"{'met' if met else 'MISSED'})")
        floor = in_child(f"one_floor({str(RICC)!r}, {args.ricc_limit!r})")
        print(f"the floor (as for KTH-SP2): {floor['wall']:.1f} s for {floor['jobs']:,} jobs")
        if args.split_ricc:
            alone = split_child(RICC, args.ricc_limit)
            print(f"the simulator alone (each cycle's result replayed, "
                  f"{'the same files' if alone['same'] else 'OTHER FILES'}): "
                  f"{alone['wall']:.1f} s of {ricc['wall']:.1f} s, the scheduler "
                  f"{ricc['wall'] - alone['wall']:.1f} s")

    if args.power or args.power_ricc:
        site = Path(tempfile.mkdtemp(prefix="bench-sim-site-")) / "site.toml"
        site.write_text(POWER_SITE)
        cases = [("KTH-SP2", KTH, kth)] if args.power else []
        if args.power_ricc:
            cases.append(("RICC", RICC, None))
        print("\npower plugin (on/off, simulated driver, idle 1800 s, boot 300 s) against "
              "always-on, EASY")
        for name, trace, base in cases:
            base = base or run_child(trace, args.ricc_limit, kill=True)
            with_power = run_child(trace, args.ricc_limit if trace == RICC else None,
                                   kill=True, site=str(site))
            saved = base["energy_kwh"] - with_power["energy_kwh"]
            print(f"{name}: energy {base['energy_kwh']:,.0f} -> {with_power['energy_kwh']:,.0f} "
                  f"kWh (saved {saved:,.0f} kWh, {100 * saved / base['energy_kwh']:.1f}%), "
                  f"mean wait {base['mean_wait']:,.0f} -> {with_power['mean_wait']:,.0f} s "
                  f"(added {with_power['mean_wait'] - base['mean_wait']:+,.0f} s); "
                  f"{with_power['wall']:.1f} s to simulate")


if __name__ == "__main__":
    main()
