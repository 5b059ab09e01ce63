"""What the cray_atom plugin adds per job: execjob_begin plus execjob_end against the
stand-in ATOM service on a local UNIX socket (prints figures; never asserts).

Each job fires execjob_begin (POST /rm/v1/jobs) and then execjob_end (DELETE
/rm/v1/jobs/<id>) through `Runner.fire`, as the local engine does, with the plugin enabled
and configured for the stand-in service (`pbsplug_cray_atom.fake`, in this process, on a
socket under /tmp). Rows, measured in the same run and taking turns so a slow moment of
the machine is shared:

- ``no hook``: the same two events with no plugin enabled (the runner's own cost);
- ``HTTP only``: the POST and the DELETE with requests-unixsocket, no hook around them (what
  ATOM's protocol costs on this machine);
- ``plugin, in process``: the hook called in the runner's process;
- ``plugin, process``: the hook in a forked child, as execution-host hooks run by default.

"added" is each row's median minus the no-hook median. Issue 5 sets no figure.

    .venv/bin/python benchmarks/bench_cray_atom.py [--jobs 300] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import platform
import pwd
import shutil
import socket
import statistics
import tempfile
import time
from pathlib import Path

import requests_unixsocket

import pbsplug_cray_atom as cray_atom
from pbsplug import Event, PluginSet, Runner
from pbsplug.siteconfig import PluginSite, SiteConfig
from pbsplug_cray_atom.atom import jobs_url
from pbsplug_cray_atom.fake import FakeAtom

HOST = socket.gethostname().split(".", 1)[0]
USER = pwd.getpwuid(os.getuid()).pw_name


def runner(sock: Path, enabled: bool, isolation: str | None) -> Runner:
    site = SiteConfig(path=None)
    attributes = {"isolation": isolation} if isolation else {}
    site.plugins["cray_atom"] = PluginSite("cray_atom", enabled=enabled, attributes=attributes,
                                           config={"unix_socket_file": str(sock)})
    plugins = PluginSet(site)
    plugins.add("cray_atom", cray_atom)
    return Runner(plugins)


def job_events(seq: int) -> tuple[Event, Event]:
    data = {"job": {"id": f"{seq}.{HOST}", "euser": USER, "Job_Owner": f"{USER}@{HOST}",
                    "Resource_List": {"select": "1:ncpus=1"}},
            "vnode_list": {HOST: {"resources_available": {"ncpus": 2}}}}
    return Event.from_dict("execjob_begin", data), Event.from_dict("execjob_end", data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=300, help="jobs per row and repeat")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="atombench", dir="/tmp"))
    sock = workdir / "atomd.sock"
    service = FakeAtom(sock).start()
    session = requests_unixsocket.Session()
    seq = iter(range(10**9))

    def fire_both(r: Runner) -> float:
        begin, end = job_events(next(seq))
        t0 = time.perf_counter()
        for event in (begin, end):
            outcome = r.fire(event)
            assert outcome.accepted, outcome.message
        return time.perf_counter() - t0

    def http_only() -> float:
        jobid = f"{next(seq)}.{HOST}"
        t0 = time.perf_counter()
        session.post(jobs_url(str(sock)), json={"jobid": jobid, "uid": os.getuid(),
                                                "exclusive": False}, timeout=30
                     ).raise_for_status()
        session.delete(jobs_url(str(sock), jobid), timeout=30).raise_for_status()
        return time.perf_counter() - t0

    rows = {
        "no hook": lambda r=runner(sock, False, None): fire_both(r),
        "HTTP only (POST + DELETE)": http_only,
        "plugin, in process": lambda r=runner(sock, True, "inprocess"): fire_both(r),
        "plugin, process (default)": lambda r=runner(sock, True, None): fire_both(r),
    }
    samples: dict[str, list[float]] = {name: [] for name in rows}
    try:
        for fn in rows.values():  # warm up: imports, the first connection, the first fork
            for _ in range(5):
                fn()
        service.clear()
        for _ in range(args.repeat):
            for _ in range(args.jobs):
                for name, fn in rows.items():
                    samples[name].append(fn())
        requests = service.requests
    finally:
        session.close()
        service.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cpus, "
          f"load {load}; {args.jobs} jobs x {args.repeat} repeats per row")
    base = statistics.median(samples["no hook"])
    print(f"{'per job (begin + end)':30} {'p50 ms':>8} {'p99 ms':>8} {'added p50 ms':>13}")
    for name, values in samples.items():
        values.sort()
        p50 = statistics.median(values)
        p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
        added = "" if name == "no hook" else f"{(p50 - base) * 1000:13.2f}"
        print(f"{name:30} {p50 * 1000:8.2f} {p99 * 1000:8.2f} {added}")
    posts = sum(1 for r in requests if r.method == "POST")
    deletes = sum(1 for r in requests if r.method == "DELETE")
    print(f"the stand-in service saw {posts} POST and {deletes} DELETE "
          f"(expected {3 * args.jobs * args.repeat} of each)")


if __name__ == "__main__":
    main()
