"""One event through 5 enabled no-op plugins, per isolation mode (prints figures; never asserts).

Five plugins each implement queuejob (a server event) and execjob_begin (a host event) and do
nothing; both run in a forked child by default. Each event is fired with `Runner.fire` on
a fresh `Event`, as a server or MoM would; the plugins are registered through `PluginSet.add`
with a site config that enables them and sets their ``isolation``, as `pbsplug.testing` does.

Goals (issue 2, benchmarks): in-process <= 20 us per event; process isolation (the runner
forks one warm child for the 5 consecutive process-mode hooks) <= 3 ms per event; and, in the
same run, PBS's model of one fresh Python interpreter per hook call (``python -c`` that imports
pbsplug and the plugin and runs its one hook), which process isolation should beat by >= 10x.
The "fork floor" row is what the machine itself charges for process isolation: a bare fork
from this process, a child that writes one byte and _exits, and the wait.

A second table is what the reader of a big document pays: a hook's report of
`--report-jobs` jobs' changes (2 MB at the default) and an ``sinfo --json`` of as many
nodes, mostly numbers, each read by json.loads and by `pbsplug.jsontext.loads` (as the
runner reads a process-mode hook's report, and the Slurm adapter sinfo's output), and their
ratio (no goal). Times are the process's CPU time, which another process's load on the
machine moves less than the wall clock's.

    .venv/bin/python benchmarks/bench_events.py [--events 2000] [--forked-events 200]
                                                [--fresh-events 4] [--repeat 5]
                                                [--report-jobs 10000]
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
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

from pbsplug import Event, PluginSet, Runner, jsontext
from pbsplug.siteconfig import PluginSite, SiteConfig

N_PLUGINS = 5
MODULE = "pbsplug_bench_noop"
# The plugins live in a module of their own, so the fresh-interpreter baseline imports the same
# code a real hook would.
SOURCE = textwrap.dedent("""
    from pbsplug import hookimpl


    class NoOp:
        @hookimpl
        def queuejob(self, event):
            pass

        @hookimpl
        def execjob_begin(self, event):
            pass
""")
INPUTS = {
    "queuejob": {"job": {"id": "1.srv", "Job_Name": "bench", "Job_Owner": "alice@login",
                         "queue": "workq",
                         "Resource_List": {"select": "1:ncpus=4:mem=8gb",
                                           "walltime": "01:00:00"}}},
    "execjob_begin": {"job": {"id": "1.srv", "Job_Name": "bench", "Job_Owner": "alice@login",
                              "euser": "alice", "queue": "workq", "job_state": "R",
                              "exec_vnode": "(n001:ncpus=4:mem=8gb)",
                              "Resource_List": {"select": "1:ncpus=4:mem=8gb",
                                                "walltime": "01:00:00"}},
                      "vnode_list": {"n001": {"state": "job-busy",
                                              "resources_available": {"ncpus": 8,
                                                                      "mem": "32gb"}}}},
}
# One hook in a fresh interpreter: read the event as JSON on stdin, load the one plugin, run
# it, print the outcome as JSON (PBS's pbs_python per hook, with pbsplug's chain semantics).
FRESH = textwrap.dedent(f"""
    import json, sys
    from pbsplug import Event, PluginSet, Runner, jsontext
    from pbsplug.siteconfig import PluginSite, SiteConfig
    from {MODULE} import NoOp
    name, event = sys.argv[1], sys.argv[2]
    site = SiteConfig(path=None)
    site.plugins[name] = PluginSite(name, enabled=True, attributes={{"isolation": "inprocess"}})
    plugins = PluginSet(site)
    plugins.add(name, NoOp())
    outcome = Runner(plugins).fire(Event.from_dict(event, json.load(sys.stdin)))
    json.dump(outcome.to_dict(), sys.stdout)
""")
GOALS = {"inprocess": 20.0, "process": 3000.0}  # us per event


def plugin_set(mode: str, noop: type) -> PluginSet:
    site = SiteConfig(path=Path("bench-site.toml"))
    plugins = PluginSet(site)
    for i in range(N_PLUGINS):
        name = f"noop{i}"
        site.plugins[name] = PluginSite(name, enabled=True, attributes={"isolation": mode})
        record = plugins.add(name, noop())
        if record.status != "enabled":
            raise SystemExit(f"bench: {record.failure_text()}")
    return plugins


def time_kernel(plugins: PluginSet, event: str, n: int, repeat: int) -> tuple[float, float]:
    """Median and best over `repeat` runs of the mean seconds per event, over `n` events."""
    runner = Runner(plugins)
    data = INPUTS[event]
    runner.fire(Event.from_dict(event, data))  # warm: the chain is built once per runner
    per_event = []
    for _ in range(repeat):
        events = [Event.from_dict(event, data) for _ in range(n)]
        t0 = time.perf_counter()
        for ev in events:
            outcome = runner.fire(ev)
        per_event.append((time.perf_counter() - t0) / n)
        if not outcome.accepted or len(outcome.runs) != N_PLUGINS:
            raise SystemExit(f"bench: unexpected outcome {outcome.to_dict()}")
    return statistics.median(per_event), min(per_event)


def time_fresh(event: str, n: int, repeat: int, env: dict[str, str]) -> tuple[float, float]:
    """Like `time_kernel`, with each of the 5 hooks run by a fresh interpreter."""
    payload = json.dumps(INPUTS[event])
    per_event = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            for i in range(N_PLUGINS):
                proc = subprocess.run([sys.executable, "-c", FRESH, f"noop{i}", event],
                                      input=payload, capture_output=True, text=True, env=env)
                if proc.returncode or not json.loads(proc.stdout)["accepted"]:
                    raise SystemExit(f"bench: fresh interpreter failed:\n{proc.stderr}")
        per_event.append((time.perf_counter() - t0) / n)
    return statistics.median(per_event), min(per_event)


def time_fork_floor(n: int, repeat: int) -> tuple[float, float]:
    per_event = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(n):
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.write(write_fd, b"x")
                os._exit(0)
            os.close(write_fd)
            os.read(read_fd, 1)
            os.waitpid(pid, 0)
            os.close(read_fd)
        per_event.append((time.perf_counter() - t0) / n)
    return statistics.median(per_event), min(per_event)


def big_report(jobs: int) -> bytes:
    """A report of `jobs` jobs' changes, shaped as a hook's: its brackets outside and inside
    strings, a few numbers each."""
    changes = [{"job": f"{i}.server", "attrs": {
        "Resource_List": {"ncpus": 8, "mem": "4gb", "walltime": 3600.5},
        "comment": f"ran on [n{i % 64}] {{cpuset}}", "exec_vnode": [f"(n{i % 64}:ncpus=8)"]},
        "log": ["accepted", "cpuset made"]} for i in range(jobs)]
    return json.dumps([0.25, {"changes": changes}, []]).encode()


def big_sinfo(nodes: int) -> bytes:
    """An ``sinfo --json``-like document of `nodes` nodes: mostly numbers."""
    return json.dumps({"nodes": [{
        "name": f"n{i}", "cpus": {"set": True, "number": 64}, "real_memory": 256000,
        "cpu_load": 0.25 + i % 7, "boards": 1, "sockets": 2, "cores": 32, "threads": 2,
        "weight": 1, "port": 6818, "state": ["IDLE"]} for i in range(nodes)]}).encode()


def time_report(loads: Callable[[bytes], object], data: bytes,
                repeat: int) -> tuple[float, float]:
    """Median and best over `repeat` reads of `data` by `loads`, in CPU seconds."""
    took = []
    for _ in range(repeat):
        t0 = time.process_time()
        loads(data)
        took.append(time.process_time() - t0)
    return statistics.median(took), min(took)


def verdict(us: float, goal: float | None) -> str:
    if goal is None:
        return ""
    return "met" if us <= goal else "MISSED"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000, help="events per in-process run")
    parser.add_argument("--forked-events", type=int, default=200,
                        help="events per process-isolation run")
    parser.add_argument("--fresh-events", type=int, default=4,
                        help="events per fresh-interpreter run (5 interpreters each)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--report-jobs", type=int, default=10_000,
                        help="jobs' changes in the big report read")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="pbsplug-bench-") as tmp:
        (Path(tmp) / f"{MODULE}.py").write_text(SOURCE)
        sys.path.insert(0, tmp)
        noop = __import__(MODULE).NoOp
        env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
        env["PYTHONPATH"] = os.pathsep.join([tmp] + ([env["PYTHONPATH"]]
                                                     if env.get("PYTHONPATH") else []))

        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"python {platform.python_version()} on {platform.machine()}, "
              f"{os.cpu_count()} cpus, {platform.processor() or 'cpu'}, load {load}; "
              f"{N_PLUGINS} no-op plugins; median (and best) of {args.repeat}")
        rows = []
        figures: dict[tuple[str, str], float] = {}
        for mode, n in (("inprocess", args.events), ("process", args.forked_events)):
            plugins = plugin_set(mode, noop)
            for event in INPUTS:
                median, best = time_kernel(plugins, event, n, args.repeat)
                figures[mode, event] = median
                rows.append((mode, event, n, median, best, GOALS[mode]))
        median, best = time_fork_floor(args.forked_events, args.repeat)
        rows.append(("fork floor", "", args.forked_events, median, best, None))
        for event in INPUTS:
            median, best = time_fresh(event, args.fresh_events, args.repeat, env)
            figures["fresh", event] = median
            rows.append(("fresh interpreter", event, args.fresh_events, median, best, None))
        print(f"{'mode':<18} {'event':<14} {'events':>6} {'us/event':>10} {'best':>10} "
              f"{'goal us':>8} {'':>6}")
        for mode, event, n, median, best, goal in rows:
            goal_text = "" if goal is None else f"<= {goal:g}"
            print(f"{mode:<18} {event:<14} {n:>6} {median * 1e6:>10.1f} {best * 1e6:>10.1f} "
                  f"{goal_text:>8} {verdict(median * 1e6, goal):>6}")
        print()
        for event in INPUTS:
            speedup = figures["fresh", event] / figures["process", event]
            print(f"process isolation over a fresh interpreter per hook, {event}: "
                  f"{speedup:.0f}x (goal >= 10x) {'met' if speedup >= 10 else 'MISSED'}")
        print()
        print(f"{'document':<22} {'MB':>5} {'reader':<16} {'cpu ms':>10} {'best':>10} "
              f"{'x json.loads':>13}")
        for name, doc in ((f"report, {args.report_jobs:,} jobs", big_report(args.report_jobs)),
                          (f"sinfo, {args.report_jobs:,} nodes", big_sinfo(args.report_jobs))):
            plain = time_report(json.loads, doc, args.repeat)
            limited = time_report(lambda data: jsontext.loads(data, "it"), doc, args.repeat)
            for reader, (median, best) in (("json.loads", plain), ("jsontext.loads", limited)):
                print(f"{name:<22} {len(doc) / 1e6:>5.1f} {reader:<16} {median * 1e3:>10.1f} "
                      f"{best * 1e3:>10.1f} {median / plain[0]:>13.2f}")

if __name__ == "__main__":
    main()
