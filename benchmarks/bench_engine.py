"""The local engine end to end: job throughput, and jobs kept across server crashes (prints
figures; never asserts).

A real server (`pbsplug.engine.api.start_background`) runs in a fresh, short home under /tmp
with every installed plugin enabled, as ``pbsplug demo`` does. The server is started by a small
helper interpreter (``python -c 'start_background(Home(root))'``) rather than forked from this
process, so that it is what ``pbsplug server start`` gives, can be restarted while this
process runs a submitting thread, and carries ``PBSPLUG_HOME`` in its environment, which is
how the clean-up finds the server and its shepherds by pid at the end.

throughput (issue goals: >= 50 jobs/s on a 2-core machine; qsub p50 <= 20 ms)
    N ``/bin/true`` jobs (walltime 00:01:00, ncpus=1) submitted one after the other through
    `Client`; jobs/s is N over the time from the first submission to the moment the last job
    is seen finished (polled, so a little late rather than early). Submission latency is per
    request through the client; a small sample of the ``pbsplug qsub -- /bin/true`` command as
    a process shows what a user waits for, interpreter start-up included. The jobs run on the
    machine's default vnodes, unless ``--ncpus`` is given and the server has qmgr.
crash (issue goals: lost 0; non-rerunnable jobs run twice 0)
    Jobs (half of them ``Rerunable`` false) each append their ``$PBS_JOBID`` to a marker file
    of their own and sleep 0.2 to 1 s. While a thread submits them, the server is killed with
    SIGKILL at random moments and restarted each time; then every job must finish. A
    submission that failed because the server was down is retried; only one whose reply came
    back counts as submitted.

limits (no goal: a check costs the same with 100 jobs or 100,000)
    Held jobs asking different walltimes are stored beside the server (as many as
    ``--limit-jobs``), then ``--limit-sample`` held submissions through `Client` are timed
    with no limit set, with ``max_queued``, and with ``max_queued_res.walltime`` too, then
    held arrays of 100 indices with both: the first request after a limit is set makes
    the count (one pass over the jobs); the others bring it up to date. One stored job in
    100 is a held array of 1,000 indices.

usage (no goal: what saving the running jobs' resources_used costs the store)
    ``--usage-jobs`` running jobs (each with a 40-variable Variable_List) are stored, and a
    sample file is written for each, as their shepherds write them. Timed: the server's
    read of every sample (`executor.Usage.read`), its look when none is new (a stat
    each), one `server.save_usage` transaction for all the jobs (what the server does
    every USAGE_SAVE_EVERY seconds), and one transaction a job (what a write per job per
    sample would cost).

arrays (no goal: what an array costs grows with what is asked, not with the array)
    An `Engine` in this process (no server loop, no job runs) holds an array of
    ``--array-sizes`` indices (``max_run_subjobs`` 256) and 20 queued jobs, with none of its
    subjobs begun or all but the last few (their rows written as over). Timed: the cycle's
    read of its jobs and `Arrays.feed` (the array as at the last cycle, and changed), and
    ``--array-sample`` subjobs started and ended in a row as the server does it
    (`Arrays.over_limit`, `Arrays.instantiate`, the end written, `Arrays.subjob_over`).
    Then suspended jobs waiting to resume on ``--resume-vnodes`` vnodes whose cpus running
    jobs hold: one `JobControl.poll` with nothing written since the last, and after a
    job's row was written.

slow clients (issue 17 goal: root's qstat p99 within 2x of none)
    Root's qstat (``stat_jobs`` through `Client`) timed in blocks, alternately with no other
    client and with 8 connections that trickle a request one byte per 0.5 s (reconnecting
    when the server drops them at its request deadline); p50/p99 of each.

    .venv/bin/python benchmarks/bench_engine.py [--only throughput|crash|slow-clients|isolation|
                                                        limits|usage|arrays]
                                                [--slow-clients 8] [--qstat-sample 200]
                                                [--jobs 1000]
                                                [--cli-sample 20] [--crash-jobs 200]
                                                [--kills 10] [--seed 1] [--sleep-max 1]
                                                [--ncpus N] [--keep]
                                                [--limit-jobs 10000] [--limit-sample 200]
                                                [--usage-jobs 100,1000,5000]
                                                [--array-sizes 1000,10000]
                                                [--array-sample 200] [--resume-vnodes 64]
                                                [--resume-waiting 1,10,100]
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

from pbsplug.engine.client import Client, ServerUnavailable
from pbsplug.engine.errors import PbsError
from pbsplug.engine.home import Home
from pbsplug.plugins import installed_entry_points

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))
GOAL_JOBS_PER_S = 50.0
GOAL_QSUB_P50_MS = 20.0
START = ("import sys\n"
         "from pbsplug.engine.api import start_background\n"
         "from pbsplug.engine.home import Home\n"
         "from pathlib import Path\n"
         "print(start_background(Home(Path(sys.argv[1]))))\n")


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def percentile(values: list[float], p: float) -> float:
    """The nearest-rank percentile (p in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(p / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


class Bench:
    """One engine home under /tmp, its server, and the processes it leaves."""

    def __init__(self, plugins: list[str]):
        self.root = Path(tempfile.mkdtemp(prefix="pbb", dir="/tmp"))
        self.root.chmod(0o755)
        self.home = Home(self.root)
        self.home.make()
        self.work = self.root / "work"
        self.work.mkdir(mode=0o777)
        self.work.chmod(0o777)
        self.home.site.write_text("".join(f"[plugins.{n}]\nenabled = true\n\n"
                                          for n in plugins))
        # The commands and servers started here cache their bytecode in the home (an
        # environment with PYTHONDONTWRITEBYTECODE would compile pbsplug at every start).
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("PBSPLUG_") and k != "PYTHONDONTWRITEBYTECODE"}
        self.env.update(PBSPLUG_HOME=str(self.root),
                        PYTHONPYCACHEPREFIX=str(self.root / "pycache"))
        self.variables = {"PBS_O_WORKDIR": str(self.work),
                          "PBS_O_PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        self.starts: list[float] = []  # seconds each start took, helper interpreter included

    def start(self) -> int:
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", START, str(self.root)], env=self.env,
                              capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"the server did not start:\n{done.stderr}")
        self.starts.append(time.perf_counter() - t0)
        return int(done.stdout.split()[-1])

    def client(self, timeout: float = 60.0) -> Client:
        return Client(self.home, timeout=timeout)

    def kill_server(self) -> tuple[float, float]:
        """SIGKILL, as a crash would; returns once `Home.server_pid` says no server runs:
        the seconds until the process had died (a zombie), and until then."""
        pid = self.home.server_pid()
        if pid is None:
            return 0.0, 0.0
        t0 = time.perf_counter()
        os.kill(pid, signal.SIGKILL)
        died = None
        while self.home.server_pid() is not None:
            if died is None and _state(pid) in ("Z", None):
                died = time.perf_counter() - t0
            time.sleep(0.002)
        gone = time.perf_counter() - t0
        return (gone if died is None else died), gone

    def stop(self) -> None:
        """Shut the server down, kill what is left of it and its jobs, by pid."""
        pid = self.home.server_pid()
        if pid is not None:
            try:
                self.client(timeout=10)("shutdown")
            except (ServerUnavailable, PbsError, OSError):
                pass
            deadline = time.monotonic() + 10
            while self.home.server_pid() is not None and time.monotonic() < deadline:
                time.sleep(0.02)
            if self.home.server_pid() is not None:
                os.kill(pid, signal.SIGKILL)
        for _ in range(3):  # jobs first (by process group), then shepherds
            left = self.leftovers()
            if not left:
                return
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        if self.leftovers():
            print(f"bench: processes left behind: {self.leftovers()}", file=sys.stderr)

    def leftovers(self) -> list[int]:
        """Our servers and shepherds (PBSPLUG_HOME is this home) and jobs (their work or tmp
        directories are under it), not counting this process."""
        marks = [f"PBSPLUG_HOME={self.root}\0".encode(),
                 f"PBS_O_WORKDIR={self.root}/".encode(),
                 f"TMPDIR={self.root}/".encode()]
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if _state(int(entry.name)) not in ("Z", None) and any(m in environ for m in marks):
                found.append(int(entry.name))
        return found

    def cpu_seconds(self, pid: int) -> tuple[float, float]:
        """The process's own CPU time, and that of its reaped children (its shepherds)."""
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return ((int(fields[11]) + int(fields[12])) / tick,
                (int(fields[13]) + int(fields[14])) / tick)

    def remove(self, keep: bool) -> None:
        if keep:
            print(f"kept {self.root} (PBSPLUG_HOME={self.root} {PBSPLUG} qstat -x)")
        else:
            shutil.rmtree(self.root, ignore_errors=True)


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def machine_line(plugins: list[str]) -> str:
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    enabled = (f"plugins enabled: {', '.join(plugins)}" if plugins
               else "no plugin installed: none enabled")
    return (f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} "
            f"cpus, {platform.processor() or 'cpu'}, load {load}; {enabled}")


def wait_all_finished(client: Client, ids: list[str], timeout: float) -> float:
    """Poll until no job is active; returns the time (perf_counter) it was first seen so.
    The poll interval shrinks as the queue empties, to load the server little."""
    deadline = time.monotonic() + timeout
    while True:
        active = client("stat_jobs")
        now = time.perf_counter()
        if not active:
            return now
        if time.monotonic() > deadline:
            raise TimeoutError(f"{len(active)} jobs still active after {timeout:g} s")
        time.sleep(min(0.5, 0.02 + 0.0005 * len(active)))


def try_qmgr(client: Client, ncpus: int | None) -> str:
    """Give each vnode `ncpus` through qmgr, when the server has it; says what was done."""
    nodes = client("stat_nodes")
    machine = ", ".join(f"{n} ({a.get('resources_available', {}).get('ncpus')} ncpus)"
                        for n, a in nodes.items())
    try:
        client("qmgr", text="list server\n")
    except PbsError as err:
        note = f"qmgr unavailable ({err})"
        return f"vnodes from the machine: {machine}; " + (
            f"{note}, --ncpus {ncpus} not applied" if ncpus else note)
    if not ncpus:
        return f"vnodes from the machine: {machine} (qmgr available; --ncpus not given)"
    text = "".join(f"set node {n} resources_available.ncpus = {ncpus}\n" for n in nodes)
    answer = client("qmgr", text=text)
    if isinstance(answer, dict) and answer.get("errors"):
        raise SystemExit("bench: qmgr: " + " ".join(answer["errors"]))
    return f"vnodes set with qmgr: {', '.join(nodes)} ({ncpus} ncpus each)"


def bench_throughput(args: argparse.Namespace, plugins: list[str]) -> None:
    print(f"\n== throughput: {args.jobs} /bin/true jobs through the API client, "
          f"then {args.cli_sample} `pbsplug qsub -- /bin/true` commands")
    bench = Bench(plugins)
    try:
        pid = bench.start()
        client = bench.client()
        print(try_qmgr(client, args.ncpus))
        attrs = {"Resource_List": {"walltime": "00:01:00", "ncpus": 1},
                 "Variable_List": bench.variables}
        cpu0 = bench.cpu_seconds(pid)
        latencies = []
        ids = []
        first = time.perf_counter()
        for _ in range(args.jobs):
            t0 = time.perf_counter()
            ids.append(client("submit", attrs=attrs, argv=["/bin/true"]))
            latencies.append(time.perf_counter() - t0)
        submitted = time.perf_counter()
        last = wait_all_finished(client, ids, args.timeout)
        cpu1 = bench.cpu_seconds(pid)
        jobs = client("stat_jobs", history=True)
        states = Counter(jobs[j]["job_state"] for j in ids if j in jobs)
        exits = Counter(jobs[j].get("Exit_status") for j in ids if j in jobs)

        cli: list[float] = []
        cli_ids: list[str] = []
        if args.cli_sample:  # untimed: fills the bytecode cache
            subprocess.run([PBSPLUG, "qsub", "--", "/bin/true"], env=bench.env, cwd=bench.work,
                           capture_output=True, timeout=120)
        for _ in range(args.cli_sample):
            t0 = time.perf_counter()
            done = subprocess.run([PBSPLUG, "qsub", "--", "/bin/true"], env=bench.env,
                                  cwd=bench.work, capture_output=True, text=True, timeout=120)
            cli.append(time.perf_counter() - t0)
            if done.returncode != 0:
                raise SystemExit(f"bench: pbsplug qsub failed ({done.returncode}): "
                                 f"{done.stderr}")
            cli_ids.append(done.stdout.strip())
        if cli:
            wait_all_finished(client, [], args.timeout)
            final = client("stat_jobs", history=True)
            cli_exits = Counter(final.get(j, {}).get("Exit_status") for j in cli_ids)

        elapsed = last - first
        rate = args.jobs / elapsed
        print(f"{'figure':<34} {'value':>10}  goal")
        print(f"{'jobs/s (first submit to all F)':<34} {rate:>10.1f}  >= {GOAL_JOBS_PER_S:g} "
              f"{verdict(rate >= GOAL_JOBS_PER_S)}")
        print(f"{'  elapsed s':<34} {elapsed:>10.2f}")
        print(f"{'  submitting s':<34} {submitted - first:>10.2f}")
        print(f"{'  after the last submit s':<34} {last - submitted:>10.2f}")
        p50 = statistics.median(latencies) * 1e3
        print(f"{'qsub request p50 ms (client)':<34} {p50:>10.2f}  <= {GOAL_QSUB_P50_MS:g} "
              f"{verdict(p50 <= GOAL_QSUB_P50_MS)}")
        print(f"{'qsub request p99 ms (client)':<34} {percentile(latencies, 99) * 1e3:>10.2f}")
        print(f"{'qsub request max ms (client)':<34} {max(latencies) * 1e3:>10.2f}")
        if cli:
            p50_cli = statistics.median(cli) * 1e3
            print(f"{f'pbsplug qsub p50 ms (process, n={len(cli)})':<34} {p50_cli:>10.1f}  "
                  f"<= {GOAL_QSUB_P50_MS:g} {verdict(p50_cli <= GOAL_QSUB_P50_MS)} "
                  "(interpreter start-up included, bytecode cached)")
            print(f"{f'pbsplug qsub p99 ms (process, n={len(cli)})':<34} "
                  f"{percentile(cli, 99) * 1e3:>10.1f}")
        print(f"API jobs: states {dict(states)}, Exit_status {dict(exits)}" + (
            f"; pbsplug qsub jobs: Exit_status {dict(cli_exits)}" if cli else ""))
        # Per-job breakdown: CPU the server and its shepherds (with the jobs) used, and
        # the engine's own timestamps (whole seconds).
        server_cpu = cpu1[0] - cpu0[0]
        child_cpu = cpu1[1] - cpu0[1]
        print(f"per job: server CPU {server_cpu / args.jobs * 1e3:.2f} ms, shepherds and jobs "
              f"CPU {child_cpu / args.jobs * 1e3:.2f} ms, wall {elapsed / args.jobs * 1e3:.2f} "
              f"ms")
        waits = [jobs[j]["stime"] - jobs[j]["qtime"] for j in ids
                 if jobs.get(j, {}).get("stime") is not None]
        runs = [jobs[j]["obittime"] - jobs[j]["stime"] for j in ids
                if jobs.get(j, {}).get("stime") is not None and "obittime" in jobs[j]]
        if waits and runs:
            print(f"engine stamps (whole s): queued to started median {statistics.median(waits)}"
                  f" max {max(waits)}; started to finished median {statistics.median(runs)} "
                  f"max {max(runs)}")
        print(f"server start-up {bench.starts[0] * 1e3:.0f} ms (helper interpreter included)")
    finally:
        bench.stop()
        bench.remove(args.keep)


def bench_crash(args: argparse.Namespace, plugins: list[str]) -> None:
    print(f"\n== crash: {args.crash_jobs} jobs (half not rerunnable), the server killed "
          f"(SIGKILL) {args.kills} times and restarted; seed {args.seed}")
    rng_jobs = random.Random(args.seed)
    rng_kills = random.Random(args.seed + 1)
    bench = Bench(plugins)
    specs = []
    for i in range(args.crash_jobs):
        seconds = round(rng_jobs.uniform(0.2, args.sleep_max), 2)
        marker = bench.work / f"mark.{i}"
        specs.append({
            "rerunnable": i % 2 == 0, "marker": marker, "gap": rng_jobs.uniform(0, 0.04),
            "argv": ["/bin/sh", "-c", f'echo "$PBS_JOBID" >> {marker}; sleep {seconds}'],
            "attrs": {"Job_Name": f"crash{i}", "Rerunable": i % 2 == 0,
                      "Resource_List": {"walltime": "00:01:00", "ncpus": 1},
                      "Variable_List": bench.variables}})
    submitted: dict[int, str] = {}  # spec index -> job id, for each reply received
    tries = Counter()
    errors: list[str] = []

    def submit_all() -> None:
        client = bench.client(timeout=30)
        for i, spec in enumerate(specs):
            while True:
                try:
                    submitted[i] = client("submit", attrs=spec["attrs"], argv=spec["argv"])
                    break
                except ServerUnavailable:
                    tries["server down"] += 1
                    time.sleep(0.02)
                except PbsError as err:
                    tries["refused"] += 1
                    errors.append(f"job {i}: {err}")
                    if tries["refused"] > 50:
                        return
                    time.sleep(0.1)
            time.sleep(spec["gap"])

    try:
        bench.start()
        print(try_qmgr(bench.client(), args.ncpus))
        t0 = time.perf_counter()
        submitter = threading.Thread(target=submit_all, name="submitter", daemon=True)
        submitter.start()
        downtimes, deaths, reaps = [], [], []
        for _ in range(args.kills):
            time.sleep(rng_kills.uniform(0.2, 2.5))
            down = time.perf_counter()
            died, gone = bench.kill_server()
            bench.start()
            downtimes.append(time.perf_counter() - down)
            deaths.append(died)
            reaps.append(gone)
        submitter.join()
        client = bench.client()
        ids = list(submitted.values())
        try:
            wait_all_finished(client, ids, args.timeout)
            timed_out = ""
        except TimeoutError as exc:
            timed_out = str(exc)
        elapsed = time.perf_counter() - t0
        jobs = client("stat_jobs", history=True)

        lost = [j for j in ids if jobs.get(j, {}).get("job_state") != "F"]
        twice, twice_rerun, never = [], [], []
        for i, job_id in submitted.items():
            spec = specs[i]
            lines = (spec["marker"].read_text().split() if spec["marker"].exists() else [])
            runs = lines.count(job_id)
            if runs == 0:
                never.append(job_id)
            if runs > 1:
                (twice_rerun if spec["rerunnable"] else twice).append(f"{job_id} x{runs}")
        orphans = sorted(set(jobs) - set(ids), key=lambda j: int(j.split(".")[0]))
        exits = Counter(jobs[j].get("Exit_status") for j in ids if j in jobs)
        comments = Counter(jobs[j].get("comment", "").split(":")[0] for j in ids
                           if j in jobs and jobs[j].get("Exit_status") != 0)
        n_rerun = sum(1 for i in submitted if specs[i]["rerunnable"])
        log = "".join(p.read_text(errors="replace") for p in sorted(bench.home.logs.glob("*")))
        recovery = {"adopted": log.count("job adopted again after a server restart"),
                    "requeued": log.count("Job requeued after a server restart"),
                    "failed": sum(1 for j in ids if str(jobs.get(j, {}).get("comment", ""))
                                  .startswith("Job failed after a server restart"))}

        print(f"{'submitted':<44} {len(ids):>6}  (of {len(specs)})")
        print(f"{'finished (F)':<44} {len(ids) - len(lost):>6}")
        print(f"{'lost (unknown or never finished)':<44} {len(lost):>6}  goal 0 "
              f"{verdict(not lost)}")
        print(f"{'non-rerunnable jobs run twice':<44} {len(twice):>6}  goal 0 "
              f"{verdict(not twice)}")
        print(f"{'rerunnable jobs run twice (informational)':<44} {len(twice_rerun):>6}  "
              f"(of {n_rerun})")
        print(f"{'jobs never started (no marker line)':<44} {len(never):>6}")
        print(f"{'jobs the server has that no reply named':<44} {len(orphans):>6}")
        print(f"{'submissions retried (server down)':<44} {tries['server down']:>6}")
        print(f"{'submissions refused (other errors)':<44} {tries['refused']:>6}")
        print(f"{'time taken s':<44} {elapsed:>6.1f}")
        if downtimes:
            print(f"kill to restarted: median {statistics.median(downtimes) * 1e3:.0f} ms, max "
                  f"{max(downtimes) * 1e3:.0f} ms; of which the killed server died in a median "
                  f"{statistics.median(deaths) * 1e3:.0f} ms, and Home.server_pid() saw it "
                  f"gone after {statistics.median(reaps) * 1e3:.0f} ms")
        print(f"Exit_status of the submitted jobs: {dict(exits)}")
        print(f"recovery at restarts: {recovery['adopted']} running jobs adopted, "
              f"{recovery['requeued']} requeued, {recovery['failed']} failed (the others had "
              "ended while the server was down, or were queued)")
        if comments:
            print(f"comments of the jobs that did not exit 0: {dict(comments)}")
        for label, items in (("lost", lost), ("run twice", twice),
                             ("rerunnable run twice", twice_rerun), ("orphans", orphans),
                             ("errors", errors)):
            if items:
                print(f"  {label}: {', '.join(items[:10])}{' ...' if len(items) > 10 else ''}")
        if timed_out:
            print(f"  {timed_out}")
    finally:
        bench.stop()
        bench.remove(args.keep)


# -- slow clients ----------------------------------------------------------------------------
GOAL_SLOW_P99_RATIO = 2.0


class SlowClients:
    """`count` connections to the server's socket that each send one byte of a request every
    `interval` seconds, reconnecting when the server drops them (its request deadline), in a
    thread of their own until `stop`."""

    REQUEST = (b"POST /v1/stat_jobs HTTP/1.0\r\nContent-Type: application/json\r\n"
               b"Content-Length: 2\r\n\r\n{}")

    def __init__(self, path: Path, count: int, interval: float = 0.5):
        import socket

        self.socket = socket
        self.path, self.count, self.interval = str(path), count, interval
        self.done = threading.Event()
        self.dropped = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self):
        s = self.socket.socket(self.socket.AF_UNIX, self.socket.SOCK_STREAM)
        s.connect(self.path)
        s.setblocking(False)
        return s

    def _run(self) -> None:
        conns: dict = {}
        while not self.done.is_set():
            while len(conns) < self.count:
                conns[self._connect()] = 0
            for s, sent in list(conns.items()):
                try:
                    if sent < len(self.REQUEST):
                        s.send(self.REQUEST[sent:sent + 1])
                        conns[s] = sent + 1
                    closed = s.recv(4096) == b""
                except BlockingIOError:
                    closed = False
                except OSError:
                    closed = True
                if closed or conns[s] >= len(self.REQUEST):
                    self.dropped += closed
                    s.close()
                    del conns[s]
            self.done.wait(self.interval)
        for s in conns:
            s.close()

    def __enter__(self) -> SlowClients:
        self.thread.start()
        time.sleep(2 * self.interval)  # all connected and trickling
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        self.thread.join()


def bench_slow_clients(args: argparse.Namespace, plugins: list[str]) -> None:
    print(f"\n== slow clients: root's qstat (stat_jobs through the API client) with "
          f"{args.slow_clients} connections trickling a request one byte per 0.5 s, against "
          f"none, {args.qstat_sample} requests per block, blocks alternated 3 times")
    bench = Bench(plugins)
    try:
        bench.start()
        client = bench.client()
        for i in range(20):  # something to list
            client("submit", attrs={"Job_Name": f"held{i}", "Hold_Types": "u",
                                    "Variable_List": bench.variables}, script="true\n")

        def block() -> list[float]:
            times = []
            for _ in range(args.qstat_sample):
                t0 = time.perf_counter()
                client("stat_jobs", history=True)
                times.append(time.perf_counter() - t0)
            return times

        quiet: list[float] = []
        slow: list[float] = []
        dropped = 0
        for _ in range(3):
            quiet += block()
            with SlowClients(bench.home.socket, args.slow_clients) as clients:
                slow += block()
            dropped += clients.dropped
        rows = [("no slow client", quiet), (f"{args.slow_clients} slow clients", slow)]
        print(f"{'':<20} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8}")
        for name, times in rows:
            print(f"{name:<20} {percentile(times, 50) * 1e3:>8.2f} "
                  f"{percentile(times, 99) * 1e3:>8.2f} {max(times) * 1e3:>8.2f}")
        ratio = percentile(slow, 99) / percentile(quiet, 99)
        print(f"p99 ratio {ratio:.2f} (goal <= {GOAL_SLOW_P99_RATIO:g}: "
              f"{verdict(ratio <= GOAL_SLOW_P99_RATIO)}); slow connections the server dropped "
              f"at its request deadline: {dropped}")
    finally:
        bench.stop()
        bench.remove(args.keep)


# -- hook isolation: what a forked hook costs per qsub ------------------------------------------

#: A plugin with a no-op queuejob and postqueuejob hook, the two events every qsub fires.
NOOP_PLUGIN = ("from pbsplug import PluginInfo, hookimpl\n"
               "plugin_info = PluginInfo(events=('queuejob', 'postqueuejob'))\n"
               "@hookimpl\n"
               "def queuejob(event):\n"
               "    pass\n"
               "@hookimpl\n"
               "def postqueuejob(event):\n"
               "    pass\n")


def _install_noop(folder: Path) -> None:
    """The plugin as pip lays a distribution out, for the server's entry points."""
    from noop_plugin import add_plugin  # beside this script

    add_plugin(folder, "benchnoop", "pbsplug_benchnoop", NOOP_PLUGIN)


def bench_isolation(args: argparse.Namespace) -> None:
    """qsub latency with no hook, with the no-op hooks in the server's process (inprocess),
    and in a forked child (process, the default): the difference is what isolation costs."""
    n = args.isolation_jobs
    print(f"\n== hook isolation: {n} held submissions through the API client per setting, "
          "one no-op queuejob and postqueuejob hook")
    folder = Path(tempfile.mkdtemp(prefix="pbn", dir="/tmp"))
    _install_noop(folder)
    results: dict[str, list[float]] = {}
    try:
        for setting in ("no hook", "inprocess", "process"):
            bench = Bench([])
            bench.env["PYTHONPATH"] = os.pathsep.join(
                [str(folder)] + ([os.environ["PYTHONPATH"]] if "PYTHONPATH" in os.environ
                                 else []))
            if setting != "no hook":
                bench.home.site.write_text("[plugins.benchnoop]\nenabled = true\n"
                                           f'isolation = "{setting}"\n')
            try:
                bench.start()
                client = bench.client()
                attrs = {"Hold_Types": "u", "Variable_List": bench.variables}
                for _ in range(min(20, n)):  # warm-up: caches, the first fork
                    client("submit", attrs=attrs, argv=["/bin/true"])
                latencies = []
                for _ in range(n):
                    t0 = time.perf_counter()
                    client("submit", attrs=attrs, argv=["/bin/true"])
                    latencies.append(time.perf_counter() - t0)
                results[setting] = latencies
            finally:
                bench.stop()
                bench.remove(args.keep)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print(f"{'qsub request ms (client)':<28} {'p50':>8} {'p99':>8} {'mean':>8}")
    for setting, lat in results.items():
        print(f"{setting:<28} {statistics.median(lat) * 1e3:>8.2f} "
              f"{percentile(lat, 99) * 1e3:>8.2f} {statistics.fmean(lat) * 1e3:>8.2f}")
    cost = statistics.median(results["process"]) - statistics.median(results["inprocess"])
    hooks = statistics.median(results["inprocess"]) - statistics.median(results["no hook"])
    print(f"isolation costs {cost * 1e3:.2f} ms per qsub (p50, process - inprocess; two forks:"
          f" queuejob and postqueuejob); the hooks themselves {hooks * 1e3:.2f} ms in process")


def bench_limits(args: argparse.Namespace) -> None:
    """qsub latency with PBS's limits on queued jobs set, many jobs already queued."""
    from pbsplug.engine.store import Store

    n, sample = args.limit_jobs, args.limit_sample
    print(f"\n== limits on queued jobs: {n:,} held jobs stored (each its own walltime), "
          f"{sample} held submissions through the API client per setting")
    bench = Bench([])
    try:
        bench.start()
        server = bench.client()("stat_server")
        name = next(iter(server))
        bench.stop()
        store = Store(bench.home.db)
        with store.transaction():
            for seq in range(n):
                # (one in 100 a held array of 1,000 indices: 1,000 jobs to the limits)
                array = {"array": True, "array_indices_submitted": "0-999",
                         "array_indices_remaining": "0-999"} if seq % 100 == 99 else {}
                store.add_job(store.next_seq(), f"{seq}{'[]' if array else ''}.{name}", {
                    "job_state": "H", "Hold_Types": "u", "queue": "workq", "euser": "root",
                    "egroup": "root", "Job_Owner": f"root@{name}", "Job_Name": "STDIN",
                    "Resource_List": {"walltime": str(60 + seq), "ncpus": 1,
                                      "select": "1:ncpus=1"},
                    "Variable_List": bench.variables, **array}, "true\n")
        store.close()
        bench.start()
        client = bench.client()
        attrs = {"Hold_Types": "u", "Variable_List": bench.variables,
                 "Resource_List": {"walltime": "00:10:00"}}
        print(f"{'qsub request ms (client)':<44} {'first':>8} {'p50':>8} {'p99':>8}")
        for setting, text in (
                ("no limit", None),
                ("max_queued", f"set server max_queued = [u:PBS_GENERIC={100 * n}]"),
                ("max_queued and max_queued_res.walltime",
                 f"set server max_queued_res.walltime = [o:PBS_ALL={100 * n}:00:00]"),
                ("the same, arrays of 100 submitted", "")):
            if text:
                client("qmgr", text=text)
            latencies = []
            for _ in range(sample + 1):
                t0 = time.perf_counter()
                client("submit", argv=["/bin/true"], attrs={
                    **attrs, **({"array_indices_submitted": "1-100"} if text == "" else {})})
                latencies.append(time.perf_counter() - t0)
            first, rest = latencies[0], latencies[1:]
            print(f"{setting:<44} {first * 1e3:>8.2f} {statistics.median(rest) * 1e3:>8.2f} "
                  f"{percentile(rest, 99) * 1e3:>8.2f}")
    finally:
        bench.stop()
        bench.remove(args.keep)


def bench_usage(args: argparse.Namespace) -> None:
    """The running jobs' resources_used: reading their samples and saving them."""
    from pbsplug.engine import executor, server
    from pbsplug.engine.store import Store

    print("\n== resources_used of running jobs: ms for all the jobs at once")
    print(f"{'running jobs':>12} {'read new':>9} {'look, none new':>15} "
          f"{'one transaction':>16} {'one a job':>10}")
    for n in (int(v) for v in args.usage_jobs.split(",")):
        root = Path(tempfile.mkdtemp(prefix="pbu", dir="/tmp"))
        try:
            store = Store(root / "server.db")
            variables = {f"VAR_{i}": f"value-{i}-" + "x" * 20 for i in range(40)}
            with store.transaction():
                for seq in range(n):
                    store.add_job(store.next_seq(), f"{seq}.host", {
                        "job_state": "R", "queue": "workq", "euser": "root",
                        "Job_Name": "STDIN", "exec_vnode": "(host:ncpus=1)",
                        "Resource_List": {"walltime": "01:00:00", "ncpus": 1,
                                          "select": "1:ncpus=1"},
                        "Variable_List": variables}, "true\n")
            samples = {}
            for seq in range(n):
                status = root / f"{seq}.status"
                status.with_suffix(".usage").write_text(
                    '{"walltime": 61.5, "cput": 12.25, "mem_kb": 20480, "vmem_kb": 65536}')
                samples[f"{seq}.host"] = status
            t0 = time.perf_counter()
            read = {job_id: executor.Usage.read(path) for job_id, path in samples.items()}
            fresh = time.perf_counter() - t0
            t0 = time.perf_counter()
            for job_id, path in samples.items():
                executor.Usage.read(path, read[job_id][1])
            look = time.perf_counter() - t0
            used = {job_id: usage for job_id, (usage, _) in read.items()}
            t0 = time.perf_counter()
            server.save_usage(store, used)  # type: ignore[arg-type]
            batched = time.perf_counter() - t0
            t0 = time.perf_counter()
            for job_id, usage in used.items():
                server.save_usage(store, {job_id: usage})  # type: ignore[dict-item]
            each = time.perf_counter() - t0
            store.close()
            print(f"{n:>12,} {fresh * 1e3:>9.1f} {look * 1e3:>15.1f} {batched * 1e3:>16.1f} "
                  f"{each * 1e3:>10.1f}")
        finally:
            shutil.rmtree(root, ignore_errors=True)


def _engine_here(root: Path):
    """An `Engine` in this process with no plugin and no server loop (the tests'
    ``inprocess_engine``): its paths are timed as method calls."""
    from pbsplug.engine.server import Engine
    from pbsplug.plugins import PluginSet
    from pbsplug.siteconfig import SiteConfig

    return Engine(Home(root), plugins=PluginSet(SiteConfig(path=None)))


def _median_ms(call, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def _array_figures(n: int, late: bool, sample: int) -> tuple[float, float, float]:
    """For an array of `n` indices, its first subjobs begun or all but the last few
    (`late`): the cycle's read of its jobs and `Arrays.feed` (ms), the array as at the last
    cycle and changed, and one subjob's start and end as the server makes them (s each,
    `sample` in a row)."""
    from pbsplug.engine import arrays
    from pbsplug.engine.server import ROLE_MANAGER, Caller

    root_caller = Caller(0, ROLE_MANAGER)
    folder = Path(tempfile.mkdtemp(prefix="pba", dir="/tmp"))
    try:
        eng = _engine_here(folder)
        array_job = eng.req_submit(root_caller, {
            "array_indices_submitted": f"0-{n - 1}", "max_run_subjobs": 256,
            "Resource_List": {"ncpus": 1}}, "true\n")
        for _ in range(20):  # (ordinary jobs beside it, queued)
            eng.req_submit(root_caller, {"Resource_List": {"ncpus": 1}}, "true\n")
        begun = n - sample - 10 if late else 0
        parent = eng.store.job(array_job) or {}
        number = int(array_job.split("[", 1)[0])
        with eng.store.transaction() as st:
            for place in range(begun):  # (each a subjob run and over)
                st.add_job(arrays.subjob_seq(number, place), arrays.subjob_id(array_job, place),
                           arrays.subjob_attrs(parent, array_job, place, "F"), None)
            if begun:
                parent.update(job_state="B", array_indices_remaining=arrays.format_indices(
                    range(begun, n), 1))
                st.put_job(array_job, parent)
        states = ("Q", "B", "R", "E")  # (what the cycle reads)
        feed = _median_ms(lambda: eng.arrays.feed(eng.store.jobs(states, lean=True)), 20)

        def changed() -> None:  # (its row changed since the last cycle: a subjob started)
            eng.arrays._fed = {}
            eng.arrays.feed(eng.store.jobs(states, lean=True))
        feed_changed = _median_ms(changed, 20)
        t0 = time.perf_counter()
        for place in range(begun, begun + sample):  # (as `_apply_cycle`, then `_ended`)
            sub = arrays.subjob_id(array_job, place)
            assert eng.store.job(sub) is None and not eng.arrays.over_limit(sub)
            attrs = eng.arrays.instantiate(sub)
            assert attrs is not None
            attrs.update(job_state="F")
            with eng.store.transaction() as st:
                st.put_job(sub, attrs)
            eng.arrays.subjob_over(sub, attrs)
        each = (time.perf_counter() - t0) / sample
        eng.store.close()
        return feed, feed_changed, each
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _resume_figures(waiting: int, vnodes: int) -> tuple[float, float]:
    """`waiting` suspended jobs waiting to resume on `vnodes` vnodes of 8 cpus, each held
    by a running job: one `JobControl.poll` (ms) with nothing written since the last, and
    after a job's row was written (the write included)."""
    folder = Path(tempfile.mkdtemp(prefix="pbr", dir="/tmp"))
    try:
        eng = _engine_here(folder)
        queue = next(iter(eng.store.all("queue")))
        with eng.store.transaction() as st:
            for name in list(st.all("node")):
                st.delete("node", name)
            for v in range(vnodes):
                st.put("node", f"vn{v}", {"state": "free", "resources_available": {
                    "ncpus": 8, "host": "h0"}})
            seq = 1
            for state, count in (("R", vnodes), ("S", waiting)):
                for i in range(count):
                    job_id = f"{seq}.{eng.server_name}"
                    st.add_job(seq, job_id, {
                        "job_state": state, "queue": queue, "qtime": seq, "stime": 1,
                        "substate": 42 if state == "R" else 45,
                        "exec_vnode": f"(vn{i % vnodes}:ncpus=8)",
                        "Resource_List": {"select": "1:ncpus=8", "ncpus": 8}}, None)
                    if state == "S":  # (no process: its cpus never come free here)
                        st.set_runtime(job_id, {"resume": True})
                        eng.launches[job_id] = object()  # type: ignore[assignment]
                    seq += 1
        eng.control.poll()  # (the first finds the jobs waiting)
        quiet = _median_ms(eng.control.poll, 20)
        first = f"1.{eng.server_name}"

        def after_write() -> None:
            with eng.store.transaction() as st:
                st.put_job(first, eng.store.job(first) or {})
            eng.control.poll()
        written = _median_ms(after_write, 20)
        eng.launches.clear()
        eng.store.close()
        return quiet, written
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def bench_arrays(args: argparse.Namespace) -> None:
    """What a job array costs the server's hot paths early and late in its life, and what
    suspended jobs waiting to resume cost each poll, timed as method calls of an `Engine`
    in this process (no server loop, no job runs)."""
    sample = args.array_sample
    print("\n== job arrays: the cycle's read and feed (ms; the array as at the last cycle, "
          f"and changed), and a subjob's start and end (us each, {sample} in a row), with the "
          "array's first subjobs begun and with all but the last few")
    print(f"{'indices':>8} {'begun':>7} {'read+feed ms':>13} {'array changed':>14} "
          f"{'start+end us':>13}")
    for n in (int(v) for v in args.array_sizes.split(",")):
        for late in (False, True):
            feed, feed_changed, each = _array_figures(n, late, sample)
            print(f"{n:>8,} {n - sample - 10 if late else 0:>7,} {feed:>13.2f} "
                  f"{feed_changed:>14.2f} {each * 1e6:>13.0f}")
    vnodes = args.resume_vnodes
    print(f"\n== suspended jobs waiting to resume: one poll (ms), {vnodes} vnodes of 8 cpus, "
          "each held by a running job")
    print(f"{'waiting':>8} {'nothing new':>12} {'after a job write':>18}")
    for k in (int(v) for v in args.resume_waiting.split(",")):
        quiet, written = _resume_figures(k, vnodes)
        print(f"{k:>8,} {quiet:>12.3f} {written:>18.3f}")

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("throughput", "crash", "slow-clients",
                                            "isolation", "limits", "usage", "arrays"),
                        help="run one benchmark (default: all)")
    parser.add_argument("--slow-clients", type=int, default=8,
                        help="slow clients: connections trickling a request")
    parser.add_argument("--qstat-sample", type=int, default=200,
                        help="slow clients: qstat requests timed per block")
    parser.add_argument("--jobs", type=int, default=1000, help="throughput: jobs submitted")
    parser.add_argument("--cli-sample", type=int, default=20,
                        help="throughput: `pbsplug qsub` commands timed as processes")
    parser.add_argument("--ncpus", type=int,
                        help="ncpus per vnode, set with qmgr when the server has it "
                             "(default: the machine's vnodes as they are)")
    parser.add_argument("--crash-jobs", type=int, default=200, help="crash: jobs submitted")
    parser.add_argument("--kills", type=int, default=10, help="crash: server kills")
    parser.add_argument("--seed", type=int, default=1, help="crash: random seed")
    parser.add_argument("--sleep-max", type=float, default=1.0,
                        help="crash: each job sleeps 0.2 s to this many seconds")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for the jobs to finish")
    parser.add_argument("--keep", action="store_true", help="keep the engine homes")
    parser.add_argument("--isolation-jobs", type=int, default=300,
                        help="isolation: submissions timed per setting")
    parser.add_argument("--limit-jobs", type=int, default=10_000,
                        help="limits: held jobs stored before the submissions")
    parser.add_argument("--limit-sample", type=int, default=200,
                        help="limits: submissions timed per setting")
    parser.add_argument("--usage-jobs", default="100,1000,5000",
                        help="usage: numbers of running jobs, comma-separated")
    parser.add_argument("--array-sizes", default="1000,10000",
                        help="arrays: indices of the arrays timed, comma-separated")
    parser.add_argument("--array-sample", type=int, default=200,
                        help="arrays: subjobs started and ended in a row, timed")
    parser.add_argument("--resume-vnodes", type=int, default=64,
                        help="arrays: vnodes the suspended jobs wait for")
    parser.add_argument("--resume-waiting", default="1,10,100",
                        help="arrays: numbers of suspended jobs waiting to resume")
    args = parser.parse_args()

    plugins = sorted({ep.name for ep in installed_entry_points()})
    print(machine_line(plugins))
    if args.only in (None, "throughput"):
        bench_throughput(args, plugins)
    if args.only in (None, "crash"):
        bench_crash(args, plugins)
    if args.only in (None, "slow-clients"):
        bench_slow_clients(args, plugins)
    if args.only in (None, "isolation"):
        bench_isolation(args)
    if args.only in (None, "limits"):
        bench_limits(args)
    if args.only in (None, "usage"):
        bench_usage(args)
    if args.only in (None, "arrays"):
        bench_arrays(args)


if __name__ == "__main__":
    main()
