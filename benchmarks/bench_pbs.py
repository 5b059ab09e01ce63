"""What a pbsplug hook adds per job inside a real OpenPBS (prints figures; never asserts).

Needs root; builds and starts PBS with ../shared/reference/openpbs-local (as the tests do),
and leaves it running. Measured in one run, each configuration in turn:

- **before the hook runs**: in PBS's own ``pbs_python``, what a MoM event pays before the
  plugin's hook runs: ``import pbs`` alone (the empty hook's floor); the hook script's path
  to the host's warm worker (``pbs_wire`` imported, the event as plain data, one round trip
  on a UNIX socket, a fork in the worker); and, for comparison, pbsplug and the plugin
  imported in pbs_python itself (the path without a worker). The issue's goal: the bridge's
  import and dispatch add at most 20 ms per MoM event over the empty hook.
- **per job**: jobs run one after another (qsub to state F), with no hook, with an empty
  hand-written hook on execjob_begin, execjob_launch and execjob_end, and with a pbsplug
  no-op plugin on the same three events; "added per MoM event" is the difference of the
  medians over three events.
- **throughput**: a batch of jobs submitted at once, until all are finished, with no hook
  and with the mjf plugin installed by ``pbsplug pbs install``.

    sudo .venv/bin/python benchmarks/bench_pbs.py [--jobs 15] [--batch 40]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from noop_plugin import write_dist

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT.parent / "shared" / "reference" / "openpbs-local"
PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))
ENV = {**os.environ, "PATH": f"/run/openpbs-local/bin:{os.environ.get('PATH', '')}"}
PBS_PATH = "/opt/pbs/lib/python/altair:/opt/pbs/lib/python/altair/pbs/v1"
EVENTS = "execjob_begin,execjob_launch,execjob_end"
GOAL_MS = 20.0
EMPTY_HOOK = "import pbs\npbs.event().accept()\n"


def run(*argv: str, input: str | None = None, check: bool = True, **kw) -> str:
    done = subprocess.run(list(argv), capture_output=True, text=True, input=input, env=ENV,
                          timeout=600, **kw)
    if check and done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr}{done.stdout}")
    return done.stdout


def qmgr(directive: str, check: bool = True) -> str:
    return run("qmgr", "-c", directive, check=check)


def clean() -> None:
    for line in qmgr("list hook").splitlines():
        if line.startswith(("Hook pbsplug_", "Hook bench_")):
            qmgr(f"delete hook {line.split()[1]}", check=False)
    time.sleep(3)  # deletes reach the MoM asynchronously
    jobs = run("qselect", check=False).split()
    if jobs:
        run("qdel", "-W", "force", *jobs, check=False)


def job_state(job: str) -> str:
    return json.loads(run("qstat", "-xf", "-F", "json", job))["Jobs"][job]["job_state"]


def one_job() -> float:
    t0 = time.perf_counter()
    job = run("qsub", "-o", "/dev/null", "-e", "/dev/null", input="true\n").strip()
    while job_state(job) != "F":
        time.sleep(0.02)
    return time.perf_counter() - t0


def batch(n: int) -> float:
    t0 = time.perf_counter()
    jobs = [run("qsub", "-o", "/dev/null", "-e", "/dev/null", input="true\n").strip()
            for _ in range(n)]
    for job in jobs:
        while job_state(job) != "F":
            time.sleep(0.05)
    return time.perf_counter() - t0


def wait_mom(name: str) -> None:
    hooks = Path("/var/spool/pbs/mom_priv/hooks")
    deadline = time.monotonic() + 30
    while not (hooks / f"{name}.PY").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.5)


def import_cost(site_dir: Path, tmpdir: Path, repeat: int) -> tuple[float, float, float]:
    """Medians (ms), in pbs_python, of what a MoM event pays before the plugin's hook runs:
    ``import pbs`` alone (the empty hook's floor); the hook script's path to a warm worker
    (pbs_wire, the event as plain data, one round trip, a fork in the worker); and the
    in-process bridge (site dirs, pbsplug and the plugin imported: the fallback path)."""
    from pbsplug import adapters
    from pbsplug.adapters.pbs_bridge import hook_objects

    config = {"plugin": "benchnoop", "entry_point": "pbsplug_benchnoop",
              "site_dirs": [sysconfig.get_paths()["purelib"], str(site_dir)],
              "attributes": {"events": EVENTS.split(","), "enabled": True}, "config": {},
              "objects": hook_objects()}
    config_file = tmpdir / "worker.json"
    config_file.write_text(json.dumps(config))
    sock = tmpdir / "run" / "pbs-bench.sock"
    worker = subprocess.Popen([sys.executable, "-m", "pbsplug.adapters.worker", str(sock),
                               str(config_file)], env={**os.environ, "PYTHONPATH": str(site_dir)})
    while not sock.exists():
        time.sleep(0.05)
    floor = "import time; t0 = time.perf_counter(); import pbs; print(time.perf_counter() - t0)"
    fast = f"""
import time; t0 = time.perf_counter()
import json, socket, sys, pbs
sys.path.insert(0, {str(Path(adapters.__file__).parent)!r})
import pbs_wire
types = pbs_wire.Types(pbs)
data = {{"job": {{"id": "1.vm", "Job_Name": "x"}}, "vnode_list": {{"vm": {{"state": "free"}}}}}}
conn = socket.socket(socket.AF_UNIX); conn.connect({str(sock)!r})
conn.sendall(json.dumps({{"event": "execjob_begin", "data": data}}).encode())
conn.shutdown(socket.SHUT_WR)
answer = b""
while chunk := conn.recv(65536):
    answer += chunk
assert json.loads(answer)["kind"] == "accept"
print(time.perf_counter() - t0)
"""
    bridge = f"""
import time; t0 = time.perf_counter()
import site, pbs
site.addsitedir({sysconfig.get_paths()['purelib']!r}); site.addsitedir({str(site_dir)!r})
from pbsplug.adapters.pbs_bridge import load
load({ {k: config[k] for k in ("plugin", "entry_point", "attributes", "config")}!r}
     ).chain("execjob_begin")
print(time.perf_counter() - t0)
"""
    out = []
    try:
        for code in (floor, fast, bridge):
            times = []
            for _ in range(repeat):
                done = subprocess.run(["/opt/pbs/bin/pbs_python", "-c", code],
                                      capture_output=True, text=True,
                                      env={"PYTHONPATH": PBS_PATH, "PATH": "/usr/bin"})
                if done.returncode != 0:
                    raise SystemExit(done.stderr)
                times.append(float(done.stdout) * 1000)
            out.append(statistics.median(times))
    finally:
        worker.kill()
        worker.wait()
    return out[0], out[1], out[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=15, help="sequential jobs per row")
    parser.add_argument("--batch", type=int, default=40, help="jobs in a throughput batch")
    parser.add_argument("--repeat", type=int, default=15, help="pbs_python runs per row")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench_pbs.py needs root (it builds and starts OpenPBS)")
    for step in ("build.sh", "start.sh"):
        subprocess.run(["bash", str(RECIPE / step)], check=True, capture_output=True)
    print(f"python {platform.python_version()} {platform.machine()}, {os.cpu_count()} cpus, "
          f"load {os.getloadavg()[0]:.2f}; OpenPBS {run('qstat', '--version').strip()}")
    clean()
    with tempfile.TemporaryDirectory(prefix="bench-pbs-") as tmp:
        tmpdir = Path(tmp)
        tmpdir.chmod(0o755)
        dist = write_dist(tmpdir)

        floor, fast, bridge = import_cost(dist, tmpdir, args.repeat)
        added = fast - floor
        print(f"\nbefore the hook runs, per MoM event (pbs_python, median of {args.repeat}):")
        print(f"  import pbs only (an empty hook)          {floor:8.1f} ms")
        print(f"  + pbs_wire and a warm worker's answer    {fast:8.1f} ms   added {added:.1f} "
              f"ms (goal <= {GOAL_MS:.0f} ms: {'met' if added <= GOAL_MS else 'MISSED'})")
        print(f"  + pbsplug and the plugin imported here   {bridge:8.1f} ms   (no worker: "
              f"added {bridge - floor:.1f} ms)")

        rows = {}
        rows["no hook"] = [one_job() for _ in range(args.jobs)]
        script = tmpdir / "empty.py"
        script.write_text(EMPTY_HOOK)
        qmgr("create hook bench_empty")
        qmgr(f'set hook bench_empty event = "{EVENTS}"')
        qmgr(f"import hook bench_empty application/x-python default {script}")
        wait_mom("bench_empty")
        rows["empty hand-written hook"] = [one_job() for _ in range(args.jobs)]
        clean()
        home = tmpdir / "home"
        home.mkdir()
        (home / "site.toml").write_text("[plugins.benchnoop]\nenabled = true\n")
        env = {**ENV, "PYTHONPATH": str(dist), "PBSPLUG_HOME": str(home)}
        subprocess.run([PBSPLUG, "--site", str(home / "site.toml"), "pbs", "install",
                        "--site-dir", str(dist)], check=True, env=env, capture_output=True)
        wait_mom("pbsplug_benchnoop")
        rows["pbsplug no-op plugin"] = [one_job() for _ in range(args.jobs)]
        clean()
        print(f"\nper job, qsub to F, {args.jobs} jobs one after another (median):")
        for name, times in rows.items():
            print(f"  {name:26s} {statistics.median(times) * 1000:8.0f} ms")
        per_event = (statistics.median(rows["pbsplug no-op plugin"])
                     - statistics.median(rows["empty hand-written hook"])) * 1000 / 3
        print(f"  added per MoM event over the empty hook: {per_event:.0f} ms "
              f"(goal <= {GOAL_MS:.0f} ms: {'met' if per_event <= GOAL_MS else 'MISSED'})")

        plain = batch(args.batch)
        mjf_home = tmpdir / "mjf"
        mjf_home.mkdir()
        (mjf_home / "site.toml").write_text(
            "[plugins.mjf]\nenabled = true\n[plugins.mjf.config]\n"
            f'jobfeatures_dir = "{tmpdir}/jf"\nmachinefeatures_dir = "{tmpdir}/mf"\n')
        subprocess.run([PBSPLUG, "--site", str(mjf_home / "site.toml"), "pbs", "install"],
                       check=True, env={**ENV, "PBSPLUG_HOME": str(mjf_home)},
                       capture_output=True)
        wait_mom("pbsplug_mjf")
        with_mjf = batch(args.batch)
        clean()
        print(f"\nthroughput, {args.batch} jobs submitted at once:")
        print(f"  no hook    {args.batch / plain:6.2f} jobs/s")
        print(f"  mjf plugin {args.batch / with_mjf:6.2f} jobs/s")


if __name__ == "__main__":
    main()
