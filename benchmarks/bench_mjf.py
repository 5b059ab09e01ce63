"""What the mjf plugin adds per job, and what reading the features costs a payload (prints
figures; never asserts).

Per job: execjob_begin (the job's directory made whole), execjob_launch (the environment)
and execjob_end (the directory removed) through `Runner.fire`, as the local engine fires
them, against directories under /tmp. Rows, measured in the same run and taking turns so a
slow moment of the machine is shared:

- ``no hook``: the same three events with no plugin enabled (the runner's own cost);
- ``plugin, in process``: the hooks called in the runner's process;
- ``plugin, process``: each hook in a forked child, as execution-host hooks run by default.

Then a payload's side: `read_features` of a job directory, the first call (every key) and a
later one (the two dynamic keys only), from the local directory and over HTTP from
``pbsplug mjf serve`` on loopback. Issue 6 sets no figure.

    .venv/bin/python benchmarks/bench_mjf.py [--jobs 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import platform
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path

import pbsplug_mjf as mjf
from pbsplug import Event, PluginSet, Runner
from pbsplug.siteconfig import PluginSite, SiteConfig
from pbsplug_mjf import reader
from pbsplug_mjf.serve import serve

HOST = socket.gethostname().split(".", 1)[0]


def runner(base: Path, enabled: bool, isolation: str | None) -> Runner:
    site = SiteConfig(path=None)
    attributes = {"isolation": isolation} if isolation else {}
    config = {"machinefeatures_dir": str(base / "machinefeatures"),
              "jobfeatures_dir": str(base / "jobfeatures"), "hs06_per_cpu": 10.0,
              "grace_secs_job": 600}
    site.plugins["mjf"] = PluginSite("mjf", enabled=enabled, attributes=attributes,
                                     config=config)
    plugins = PluginSet(site)
    plugins.add("mjf", mjf)
    return Runner(plugins)


def job_events(seq: int) -> list[Event]:
    job = {"id": f"{seq}.{HOST}", "stime": int(time.time()), "exec_vnode": f"({HOST}:ncpus=2)",
           "Resource_List": {"walltime": "01:00:00", "mem": "2gb", "cput": "02:00:00"}}
    vnodes = {HOST: {"resources_available": {"ncpus": 8}}}
    return [Event.from_dict("execjob_begin", {"job": job, "vnode_list": vnodes}),
            Event.from_dict("execjob_launch", {"job": job, "vnode_list": vnodes,
                                               "env": {"PATH": "/bin"}, "argv": ["/bin/true"],
                                               "progname": "/bin/true"}),
            Event.from_dict("execjob_end", {"job": job, "vnode_list": vnodes})]


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * .99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300, help="jobs per row and repeat")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    base = Path(tempfile.mkdtemp(prefix="mjfbench", dir="/tmp"))
    seq = iter(range(10**9))
    rows = {"no hook": runner(base, False, None),
            "plugin, in process": runner(base, True, "inprocess"),
            "plugin, process": runner(base, True, "process")}
    samples: dict[str, list[float]] = {name: [] for name in rows}
    try:
        startup = Event.from_dict("exechost_startup", {"vnode_list": {
            HOST: {"resources_available": {"ncpus": 8}}}})
        assert rows["plugin, in process"].fire(startup).accepted
        for _ in range(args.repeat):
            for _ in range(args.jobs):
                for name, r in rows.items():
                    events = job_events(next(seq))
                    t0 = time.perf_counter()
                    for event in events:
                        outcome = r.fire(event)
                        assert outcome.accepted, outcome.message
                    samples[name].append(time.perf_counter() - t0)
        print(f"mjf per job (begin + launch + end), {args.jobs} jobs x {args.repeat}, "
              f"{platform.python_version()} on {platform.machine()}")
        floor = statistics.median(samples["no hook"])
        for name, values in samples.items():
            p50, p99 = quantiles(values)
            added = f"  added {1e3 * (p50 - floor):6.2f} ms" if name != "no hook" else ""
            print(f"  {name:<20} p50 {1e3 * p50:7.2f} ms  p99 {1e3 * p99:7.2f} ms{added}")

        events = job_events(next(seq))
        rows["plugin, in process"].fire(events[0])
        job_dir = str(base / "jobfeatures" / events[0].job.id)
        server = serve(base / "machinefeatures", base / "jobfeatures", "127.0.0.1:0",
                       quiet=True).start()
        try:
            print("read_features of a job directory (first call: every key; later: the "
                  "dynamic keys)")
            for label, location in (("local", job_dir),
                                    ("HTTP", f"{server.url}/jobfeatures/{events[0].job.id}")):
                first, later = [], []
                for _ in range(50):
                    reader._static.clear()
                    t0 = time.perf_counter()
                    reader.read_features(location)
                    first.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    reader.read_features(location)
                    later.append(time.perf_counter() - t0)
                print(f"  {label:<6} first p50 {1e3 * statistics.median(first):7.2f} ms  "
                      f"later p50 {1e3 * statistics.median(later):7.2f} ms")
        finally:
            server.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
