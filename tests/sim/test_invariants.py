"""Invariants of the scheduler, driven through the simulator over a few hundred small random
workloads (seeded: the same workloads at every run): tiny machines of 2-8 hosts of 1-4
cpus, with partitions (a scheduler of their own or not), queue priorities, exclusive and
scattered placement and multi-chunk selects.

Whatever the workload:

- no vnode ever holds more cpus than it has, an excl job is alone on its vnodes and an
  exclhost one on its hosts (holding every vnode of them), and a job runs only on its
  scheduler's vnodes;
- a job starts at or after its submission and runs exactly min(run time, walltime);
- every job that obviously fits its part of the machine runs (none waits for ever);
- FIFO (strict ordering, no backfill): no job starts while a job ranked before it in its
  scheduler's order is waiting;
- EASY (strict ordering, backfill depth 1, one-cpu chunks): the job at the head of the
  queue starts no later than the earliest start the running jobs' walltimes give it at
  any instant it waits there, so nothing backfilled around it ever delays it;
- the scheduler that keeps state between cycles (its calendar, the job log read since the
  last cycle, the kept top job's plan) decides as a new scheduler made for every cycle;
- the same inputs give byte-identical output files.

The checks are plain functions over the replay's records; the last tests show that each
catches a schedule that breaks it.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from pbsplug.scheduler import Scheduler, cycle
from pbsplug.sim.engine import Simulator, policy_settings
from pbsplug.sim.machine import load_platform
from pbsplug.sim.output import ResultWriter
from pbsplug.sim.records import REJECTED, WALLTIME, TraceJob
from pbsplug.units import SHARED, parse_size

from .helpers import Sink

JOBS = 40  # the most jobs of a workload
PLACES = (None, "free", "pack", "scatter", "vscatter", "excl", "scatter:excl", "shared",
          "exclhost", "scatter:exclhost", "vscatter:excl", "free:group=host",
          "vscatter:group=host", "excl:group=host")
GB = 1 << 30


# -- workloads ------------------------------------------------------------------------------
@dataclass
class Case:
    seed: int
    platform: str                          # the platform file's text
    jobs: list[TraceJob]
    policy: str
    settings: dict = field(default_factory=dict)   # [sim.scheduler] keys over the preset
    scheds: dict = field(default_factory=dict)     # [sim.sched.NAME] tables
    kill: bool = True                              # a job is killed at its walltime


def random_case(seed: int, policy: str, counted: bool = False) -> Case:
    """A machine of one or two partitions and a burst of jobs. `counted`: every job asks
    one-cpu chunks placed anywhere and the queues of a scheduler share one priority, so
    that a job's earliest start is a count of cpus (the EASY check). Some times have
    fractions of a second, which the replay rounds to whole seconds (`whole_seconds`): the
    check reads the rounded times. (Before, a job started at 10.5 with a walltime of 10 had
    an stime of 10: the scheduler planned it to end at 20, not 20.5, and the top job
    planned on its cpus started half a second after the count's earliest start.)"""
    rng = random.Random(seed)
    groups = []
    partitions = ["p1", "p2"] if rng.random() < 0.5 else [None]
    mem = not counted and rng.random() < 0.3  # (every vnode has 2-8 gb, a chunk asks 0-2)
    for n, part in enumerate(partitions):
        for g in range(rng.choice([1, 1, 2])):
            groups.append({"prefix": f"h{n}{g}x", "count": rng.randint(1, 4 if part else 6),
                           "vnodes": rng.choice([1, 1, 2]), "ncpus": rng.randint(1, 4),
                           "partition": part,
                           "mem": f"{rng.choice([2, 4, 8])}gb" if mem else None})
    lines = []
    for group in groups:
        lines.append("[[hosts]]")
        for key, value in group.items():
            if value is not None:
                lines.append(f"{key} = {value!r}".replace("'", '"'))
    queues = []
    for n, part in enumerate(partitions):
        for q in range(rng.choice([1, 2])):
            name = f"q{n}{q}"
            queues.append(name)
            lines.append(f"[queues.{name}]")
            if part is not None:
                lines.append(f'partition = "{part}"')
            if not counted:
                if rng.random() < 0.4:
                    lines.append(f"priority = {rng.choice([-5, 0, 10])}")
                place = rng.choice(PLACES)
                if place is not None:
                    lines.append(f'resources_default = {{place = "{place}"}}')
    scheds = {"s2": {"partition": "p2"}} if partitions[0] and rng.random() < 0.6 else {}
    settings = {}
    if policy == "easy" and not counted and rng.random() < 0.3:
        settings["backfill_depth"] = rng.choice([2, 3])
    if rng.random() < 0.3:
        settings["node_sort_key"] = rng.choice(["ncpus LOW", "ncpus HIGH",
                                                "last_used_time HIGH"])
    if not counted and rng.random() < 0.2:
        settings["job_sort_formula"] = rng.choice(["ncpus", "walltime", "-ncpus"])
    if rng.random() < 0.3:  # (estimates are soft bookings: they change no decision)
        settings["estimate_limit"] = rng.choice([1, 3, 100])
    jobs, now = [], 0
    for n in range(1, rng.randint(8, JOBS) + 1):
        now += rng.choice([0, 0, 0, 1, 3, 10, 50, 200])
        walltime = rng.choice([10, 30, 60, 100, 300])
        run = rng.choice([0, 1, walltime // 3, walltime // 2, walltime, walltime, walltime + 5])
        if rng.random() < 0.3:  # (SWF keeps fractions of a second)
            now += rng.choice([0.25, 0.5, 0.75])
            run += rng.choice([-0.5, 0.5]) if run >= 1 else 0.5
        if rng.random() < 0.05:
            walltime = None  # (planned with its run time, never killed)
        chunks = []
        for _ in range(1 if counted or rng.random() < 0.6 else rng.randint(2, 3)):
            count = rng.choice([1, 1, 1, 2, 3, 4, 6])
            ncpus = 1 if counted else rng.choice([1, 1, 2, 3, 4])
            chunks.append(f"{count}:ncpus={ncpus}" + (
                f":mem={rng.choice([1, 2])}gb" if mem and rng.random() < 0.5 else ""))
        select = "+".join(chunks)
        jobs.append(TraceJob(str(n), n, float(now), float(run), 1,
                             None if walltime is None else float(walltime),
                             queue=rng.choice(queues), select=select))
    return Case(seed, "\n".join(lines) + "\n", jobs, policy, settings, scheds,
                kill=rng.random() < 0.8)


# -- replays --------------------------------------------------------------------------------
@dataclass
class Ran:
    """One job of a replay."""

    job: TraceJob
    state: str
    start: float | None
    end: float
    vnodes: dict[str, int]          # vnode -> ncpus it held (0: the rest of a host it holds)
    place: str
    queue: str
    mem: dict[str, int] = field(default_factory=dict)   # vnode -> bytes it held


class Recorder(Simulator):
    """The simulator, keeping what each job was given when it started."""

    def __init__(self, *args, **kwargs):
        self.given: dict[str, tuple] = {}
        super().__init__(*args, **kwargs)

    def _start(self, run, exec_vnode, chunks):
        super()._start(run, exec_vnode, chunks)
        if self.running.get(run.tj.job_id) is run:
            res = run.attrs["Resource_List"]
            mem: dict[str, int] = {}
            for name, chunk in chunks:
                mem[name] = mem.get(name, 0) + parse_size(chunk.get("mem", 0))
            self.given[run.tj.job_id] = (dict(run.vnodes), str(res.get("place", "free")),
                                         run.attrs["queue"], mem)


def fresh_every_cycle(monkeypatch) -> None:
    """Every cycle of every scheduler is that of a new scheduler of the same settings:
    nothing kept from the cycle before (calendar, parsed jobs and vnodes, job log mark,
    top job's plan, exec_vnode texts)."""
    real = Scheduler.cycle

    def cycle(self, snap, now=None):
        new = Scheduler(self.name, self.partitions, self.policy, self.hooks, self.claimed,
                        self.scheduling, self.iteration)
        new.explain = self.explain
        self.__dict__.clear()
        self.__dict__.update(new.__dict__)
        return real(self, snap, now)

    monkeypatch.setattr(Scheduler, "cycle", cycle)


def machine_of(case: Case, tmp: Path):
    path = tmp / f"platform-{case.seed}.toml"
    path.write_text(case.platform)
    return load_platform(path)


def replay(case: Case, tmp: Path):
    machine = machine_of(case, tmp)
    sink = Sink()
    sim = Recorder(machine, sink, policy=policy_settings(case.policy, case.settings or None),
                   scheds=case.scheds, kill_at_walltime=case.kill)
    sim.run(case.jobs)
    ran = {}
    for result in sink.jobs:
        vnodes, place, queue, mem = sim.given.get(result.job.job_id,
                                                  ({}, "", result.job.queue, {}))
        ran[result.job.job_id] = Ran(result.job, result.final_state, result.start, result.end,
                                     vnodes, place, queue, mem)
    return machine, sim, ran


# -- the machine as each scheduler sees it --------------------------------------------------
@dataclass
class World:
    capacity: dict[str, int]               # vnode -> ncpus
    memory: dict[str, int]                 # vnode -> bytes (none: no limit)
    host_of: dict[str, str]                # vnode -> host
    vnodes_of: dict[str, list[str]]        # host -> its vnodes
    owner_of_vnode: dict[str, str]         # vnode -> the scheduler that sees it
    owner_of_queue: dict[str, str]         # queue -> the scheduler whose jobs it holds
    priority: dict[str, int]               # queue -> Priority
    formula: str | None                    # the job_sort_formula
    places: dict[str, str]                 # queue -> the place its jobs get by default


def world_of(machine, sim: Simulator, case: Case) -> World:
    owned = {p: name for name, table in case.scheds.items() for p in [table["partition"]]}
    capacity, memory, host_of, vnodes_of, owner = {}, {}, {}, {}, {}
    for host in machine.hosts:
        vnodes_of[host.name] = list(host.vnodes)
        for v in host.vnodes:
            capacity[v] = host.ncpus
            if host.mem is not None:
                memory[v] = host.mem
            host_of[v] = host.name
            owner[v] = owned.get(host.partition, "default")
    queues = {name: owned.get(attrs.get("partition"), "default")
              for name, attrs in machine.queues.items()}
    priority = {name: int(attrs.get("Priority", 0)) for name, attrs in machine.queues.items()}
    return World(capacity, memory, host_of, vnodes_of, owner, queues, priority,
                 case.settings.get("job_sort_formula"), places_of(machine))


# -- the invariants -------------------------------------------------------------------------
def check_resources(ran: dict[str, Ran], world: World) -> list[str]:
    """No vnode over its cpus (or its memory); excl alone on its vnodes, exclhost alone on
    its hosts (and holding all of their vnodes); every vnode the job's scheduler's."""
    problems = []
    events = []
    for r in ran.values():
        if r.start is None:
            continue
        for v, ncpus in r.vnodes.items():
            if world.owner_of_vnode[v] != world.owner_of_queue[r.queue]:
                problems.append(f"job {r.job.job_id} of queue {r.queue} on {v}, another "
                                "scheduler's vnode")
            events.append((r.end, 0, v, -ncpus, -r.mem.get(v, 0)))
            events.append((r.start, 1, v, ncpus, r.mem.get(v, 0)))
        tokens = r.place.split(":")
        if "exclhost" in tokens:
            for host in {world.host_of[v] for v in r.vnodes}:
                missing = set(world.vnodes_of[host]) - set(r.vnodes)
                if missing:
                    problems.append(f"job {r.job.job_id} (exclhost) lacks {sorted(missing)} "
                                    f"of its host {host}")
    use, mem = dict.fromkeys(world.capacity, 0), dict.fromkeys(world.capacity, 0)
    for t, _, v, ncpus, size in sorted(events):
        use[v] += ncpus
        mem[v] += size
        if use[v] > world.capacity[v]:
            problems.append(f"{v} holds {use[v]} cpus of {world.capacity[v]} at {t}")
        if mem[v] > world.memory.get(v, math.inf):
            problems.append(f"{v} holds {mem[v]} bytes of {world.memory[v]} at {t}")
    spans = [r for r in ran.values() if r.start is not None and r.end > r.start]
    for a in spans:
        tokens = a.place.split(":")
        level = "exclhost" if "exclhost" in tokens else "excl" if "excl" in tokens else None
        if level is None:
            continue
        mine = set(a.vnodes) if level == "excl" else \
            {v for v in world.capacity if world.host_of[v] in {world.host_of[u] for u in a.vnodes}}
        for b in spans:
            if b is not a and b.start < a.end and a.start < b.end and mine & set(b.vnodes):
                problems.append(f"job {b.job.job_id} shares {sorted(mine & set(b.vnodes))} "
                                f"with {level} job {a.job.job_id} ({b.start}-{b.end} and "
                                f"{a.start}-{a.end})")
    return problems


def planned(job: TraceJob) -> int:
    """The walltime a job runs under: its own (whole seconds), else its run time."""
    return max(1, math.ceil(job.run_time if job.walltime is None else job.walltime))


def check_times(ran: dict[str, Ran], kill: bool = True) -> list[str]:
    """Starts at or after submission; runs min(run time, walltime), killed past it (or its
    run time when the replay kills no job)."""
    problems = []
    for r in ran.values():
        if r.start is None:
            continue
        limit = planned(r.job) if kill else math.inf
        length = min(r.job.run_time, limit)
        if r.start < r.job.submit:
            problems.append(f"job {r.job.job_id} started at {r.start} before its submission "
                            f"at {r.job.submit}")
        if abs(r.end - r.start - length) > 1e-6:
            problems.append(f"job {r.job.job_id} ran {r.end - r.start} s, not {length}")
        if (r.state == WALLTIME) != (r.job.run_time > limit):
            problems.append(f"job {r.job.job_id} ended {r.state} after {r.job.run_time} s of "
                            f"a {limit} s walltime")
    return problems


def obviously_fits(r: Ran, world: World, place: str) -> bool:
    """Whether the job fits its scheduler's empty vnodes by a rule first fit cannot miss:
    each chunk on a vnode (a host, for scatter) of its own, or all on one vnode (pack)."""
    mine = [v for v, o in world.owner_of_vnode.items() if o == world.owner_of_queue[r.queue]]
    sizes, mem = [], 0
    for part in r.job.select.split("+"):
        count, *res = part.split(":")
        asked = dict(item.split("=") for item in res)
        sizes += int(count) * [int(asked["ncpus"])]
        mem += int(count) * parse_size(asked.get("mem", 0))
    tokens = place.split(":")
    if "pack" in tokens:
        return any(sum(sizes) <= world.capacity[v] and mem <= world.memory.get(v, math.inf)
                   for v in mine)
    if "scatter" in tokens or "exclhost" in tokens:
        hosts = {world.host_of[v] for v in mine}
        least = min((max(world.capacity[v] for v in world.vnodes_of[h]) for h in hosts),
                    default=0)
        return len(sizes) <= len(hosts) and max(sizes) <= least
    return len(sizes) <= len(mine) and max(sizes) <= min(world.capacity[v] for v in mine)


def check_liveness(ran: dict[str, Ran], world: World, places: dict[str, str]) -> list[str]:
    return [f"job {r.job.job_id} ({r.job.select}, place {places[r.queue]}) never ran: "
            f"{r.state}" for r in ran.values()
            if r.state == REJECTED and obviously_fits(r, world, places[r.queue])]


def rank(r: Ran, world: World) -> tuple:
    """Where the scheduler orders a job: queue priority, then the formula (higher first)
    or submission, then job number."""
    if world.formula is None:
        return (-world.priority[r.queue], r.job.submit, int(r.job.job_id))
    value = {"ncpus": sum(r.vnodes.values()), "walltime": planned(r.job),
             "-ncpus": -sum(r.vnodes.values())}[world.formula]
    return (-world.priority[r.queue], -value, int(r.job.job_id))


def check_fifo(ran: dict[str, Ran], world: World) -> list[str]:
    """Strict ordering without backfill: a job B starts only when every job its scheduler
    ranks before it that is queued by then starts too (at B's start or before)."""
    problems = []
    started = [r for r in ran.values() if r.start is not None]
    for b in started:
        for a in started:
            if world.owner_of_queue[a.queue] == world.owner_of_queue[b.queue] and \
                    rank(a, world) < rank(b, world) and a.job.submit <= b.start < a.start:
                problems.append(f"job {b.job.job_id} started at {b.start} while job "
                                f"{a.job.job_id}, before it, waited (it started at {a.start})")
    return problems


def check_easy(ran: dict[str, Ran], world: World) -> list[str]:
    """EASY over one-cpu chunks: at each instant t the first job of its scheduler's queue
    (every job ranked before it started by t) waits, the running jobs' walltimes give it
    an earliest start: the first time as many cpus are free as it asks, counting the jobs
    running before t's cycle and those ranked before it started at t. It starts by then:
    the jobs started around it never delay it."""
    problems = []
    started = [r for r in ran.values() if r.start is not None]
    instants = sorted({t for r in started for t in (r.start, r.end)} |
                      {r.job.submit for r in ran.values()})
    passes = {r.start for r in started if r.end == r.start}
    for top in started:
        owner = world.owner_of_queue[top.queue]
        cap = sum(c for v, c in world.capacity.items() if world.owner_of_vnode[v] == owner)
        mine = [r for r in started if world.owner_of_queue[r.queue] == owner]
        before = [r for r in mine if rank(r, world) < rank(top, world)]
        head_from = max([top.job.submit] + [r.start for r in before])
        need = sum(top.vnodes.values())
        for t in instants:
            if not head_from <= t < top.start or (t in passes and any(
                    r.start == t for r in before)):
                # (a job that ran 0 s makes a second cycle at t: one ranked before this
                # one may have started only there, after others were backfilled around
                # the job then at the head)
                continue
            # (one started at t before it was looked at holds its cpus in that cycle, even
            # when it ran 0 s: it ends in a second pass at t, after what was backfilled)
            running = [r for r in mine if r is not top and (
                (r.start < t < r.end) or (r.start == t and rank(r, world) < rank(top, world)))]
            until = {r.job.job_id: r.start + planned(r.job) for r in running}
            ends = sorted({t} | set(until.values()))
            earliest = next(e for e in ends if cap - sum(
                sum(r.vnodes.values()) for r in running if until[r.job.job_id] > e) >= need)
            if top.start > earliest:
                problems.append(f"job {top.job.job_id} (head of the queue at {t}) started at "
                                f"{top.start}, after {earliest}, when the jobs running at "
                                f"{t} left it {need} cpus")
                break
    return problems


def starts(ran: dict[str, Ran]) -> dict[str, tuple]:
    return {k: (r.state, r.start, r.end, tuple(sorted(r.vnodes.items())))
            for k, r in ran.items()}


def places_of(machine) -> dict[str, str]:
    return {name: str(attrs.get("resources_default", {}).get("place", "free"))
            for name, attrs in machine.queues.items()}


def all_problems(case: Case, tmp: Path, ran=None) -> list[str]:
    machine, sim, ran = replay(case, tmp) if ran is None else ran
    world = world_of(machine, sim, case)
    assert len(ran) == len(case.jobs)
    problems = check_resources(ran, world) + check_times(ran, case.kill) + \
        check_liveness(ran, world, world.places)
    if case.policy == "fifo":
        problems += check_fifo(ran, world)
    if case.policy == "easy" and all(j.select == f"{j.select.split(':')[0]}:ncpus=1"
                                     for j in case.jobs) and \
            case.settings.get("backfill_depth", 1) == 1 and case.kill and \
            len(set(world.priority.values())) <= 1:
        problems += check_easy(ran, world)
    return problems


# -- the tests ------------------------------------------------------------------------------
SEEDS = range(200)


@pytest.mark.parametrize("policy", ["fifo", "easy", "pbs"])
def test_random_workloads_keep_the_invariants(policy, tmp_path):
    failures = {}
    for seed in SEEDS:
        case = random_case(seed, policy)
        problems = all_problems(case, tmp_path)
        if problems:
            failures[seed] = problems[:3]
    assert not failures, failures


def test_easy_never_delays_the_head_of_the_queue(tmp_path):
    failures = {}
    checked = 0
    for seed in range(1000, 1300):
        case = random_case(seed, "easy", counted=True)
        case.kill = True
        machine, sim, ran = replay(case, tmp_path)
        world = world_of(machine, sim, case)
        checked += sum(1 for r in ran.values() if r.start is not None and r.start > r.job.submit)
        problems = check_easy(ran, world) + check_resources(ran, world)
        if problems:
            failures[seed] = problems[:3]
    assert not failures, failures
    assert checked > 500  # (jobs that waited: the check had heads of the queue to look at)


@pytest.mark.parametrize("policy", ["easy", "pbs", "fifo"])
def test_the_kept_state_decides_as_a_new_scheduler_every_cycle(policy, tmp_path, monkeypatch):
    kept, fresh, differ = {}, {}, {}
    cases = [random_case(seed, policy, counted=seed % 3 == 0) for seed in range(2000, 2150)]
    for case in cases:
        kept[case.seed] = starts(replay(case, tmp_path)[2])
    fresh_every_cycle(monkeypatch)
    for case in cases:
        fresh[case.seed] = starts(replay(case, tmp_path)[2])
        if fresh[case.seed] != kept[case.seed]:
            differ[case.seed] = {k: (kept[case.seed][k], v) for k, v in fresh[case.seed].items()
                                 if kept[case.seed][k] != v}
    assert not differ, differ


def test_the_same_inputs_give_the_same_bytes(tmp_path):
    names = ("metrics.json", "metrics.txt", "out_jobs.csv", "out_machine_states.csv",
             "out_series.csv")
    for seed in range(3000, 3030):
        case = random_case(seed, ["easy", "pbs", "fifo"][seed % 3])
        outs = []
        for n in range(2):
            machine = machine_of(case, tmp_path)
            out = tmp_path / f"out-{seed}-{n}"
            writer = ResultWriter(out, cpus=machine.total_cpus, hosts=len(machine.hosts),
                                  plots=False)
            sim = Simulator(machine, writer, policy=policy_settings(case.policy,
                                                                    case.settings or None),
                            scheds=case.scheds, kill_at_walltime=case.kill)
            sim.run(case.jobs)
            outs.append([(out / name).read_bytes() for name in names])
        assert outs[0] == outs[1], seed


def swf_of(case: Case) -> str:
    """The case as an extended SWF trace: its queue by number (q00 is 1, q11 is 12), its
    select after field 18."""
    lines = []
    for j in case.jobs:
        wall = -1 if j.walltime is None else j.walltime
        fields = [j.job_id, j.submit, -1, j.run_time, 1, -1, -1, 1, wall, -1, 1, 1, 1, -1,
                  int(j.queue[1:]) + 1, -1, -1, -1, j.select]
        lines.append(" ".join(str(f) for f in fields))
    return "\n".join(lines) + "\n"


MAIN = "import sys\nfrom pbsplug.cli import main\nsys.exit(main(sys.argv[1:]))"


def test_the_same_run_gives_the_same_bytes_in_another_process(tmp_path):
    """`pbsplug sim run` twice, each with its own hash seed: nothing depends on the order
    of a set or a dict of strings."""
    names = ("metrics.json", "metrics.txt", "out_jobs.csv", "out_machine_states.csv",
             "out_series.csv")
    for seed in (3105, 3113, 3124):  # (each with a scheduler of partition p2)
        case = random_case(seed, "easy")
        trace = tmp_path / f"t{seed}.swf"
        trace.write_text(swf_of(case))
        platform = tmp_path / f"p{seed}.toml"
        platform.write_text(re.sub(r"queues\.q(\d+)", lambda m: f"queues.{int(m[1]) + 1}",
                                   case.platform))
        site = tmp_path / f"s{seed}.toml"
        site.write_text("[sim.scheduler]\n" + "".join(
            f'{k} = {json.dumps(v)}\n' for k, v in case.settings.items()) + "".join(
            f'[sim.sched.{name}]\npartition = "{t["partition"]}"\n'
            for name, t in case.scheds.items()))
        outs = []
        for hashseed in ("1", "2"):
            out = tmp_path / f"out-{seed}-{hashseed}"
            done = subprocess.run([sys.executable, "-c", MAIN, "sim", "run", str(trace),
                                   "--site", str(site), "--platform", str(platform),
                                   "--policy", "easy", "--no-plots", "--out", str(out)],
                                  check=True, capture_output=True,
                                  env={**os.environ, "PYTHONHASHSEED": hashseed})
            assert b"s2 (p2)" in done.stdout
            outs.append([(out / name).read_bytes() for name in names])
        assert outs[0] == outs[1], seed
        assert outs[0][2].count(b"\n") == len(case.jobs) + 1


# -- each check catches a scheduler that breaks it -------------------------------------------
def broken(monkeypatch, how: str) -> None:
    """A scheduler broken on purpose in one way."""
    if how == "exclusivity":  # every job shares its vnodes
        monkeypatch.setattr(cycle, "exclusivity", lambda place, sharing: SHARED)
    elif how == "capacity":  # running jobs read afresh hold nothing
        monkeypatch.setattr(Scheduler, "_running_chunks", lambda self, job: [])
        fresh_every_cycle(monkeypatch)
    elif how == "protection":  # the top job's plan is a soft booking: backfill may delay it
        real = Scheduler._book_chunks

        def book(self, owner, chunks, place, start, end, hard):
            return real(self, owner, chunks, place, start, end, hard and start <= self.now)

        monkeypatch.setattr(Scheduler, "_book_chunks", book)
    elif how == "liveness":  # a job of more than 3 cpus never fits
        real_fit = Scheduler._fit
        monkeypatch.setattr(Scheduler, "_fit", lambda self, info, *a, **k: None
                            if info.ncpus > 3 else real_fit(self, info, *a, **k))
    elif how == "kept plan":  # the kept top job's plan outlives any end
        monkeypatch.setattr(Scheduler, "_released_harmless", lambda *args: True)


@pytest.mark.parametrize(("how", "policy", "counted", "check"), [
    ("exclusivity", "pbs", False, lambda ran, world: check_resources(ran, world)),
    ("capacity", "pbs", False, lambda ran, world: check_resources(ran, world)),
    ("protection", "easy", True, check_easy),
    ("liveness", "pbs", False, lambda ran, world: check_liveness(ran, world, world.places)),
])
def test_each_check_catches_a_scheduler_that_breaks_it(how, policy, counted, check,
                                                       monkeypatch, tmp_path):
    broken(monkeypatch, how)
    caught = 0
    for seed in range(40):
        case = random_case(seed, policy, counted=counted)
        case.kill = True
        machine, sim, ran = replay(case, tmp_path)
        caught += bool(check(ran, world_of(machine, sim, case)))
    assert caught >= 3


def test_fifos_check_catches_backfill(tmp_path):
    caught = 0
    for seed in range(40):
        case = random_case(seed, "easy")
        machine, sim, ran = replay(case, tmp_path)
        caught += bool(check_fifo(ran, world_of(machine, sim, case)))
    assert caught >= 3


def test_the_fresh_comparison_catches_a_kept_plan_that_outlives_an_end(monkeypatch, tmp_path):
    cases = [random_case(seed, "easy", counted=True) for seed in range(2000, 2060)]
    kept = [starts(replay(case, tmp_path)[2]) for case in cases]
    broken(monkeypatch, "kept plan")
    wrong = [starts(replay(case, tmp_path)[2]) for case in cases]
    assert sum(a != b for a, b in zip(kept, wrong, strict=True)) >= 2


def test_the_times_check_catches_a_job_started_early_or_run_long():
    job = TraceJob("1", 1, 10.0, 5.0, 1, 3.0, queue="q00", select="1:ncpus=1")
    assert check_times({"1": Ran(job, WALLTIME, 10.0, 13.0, {"n0": 1}, "free", "q00")}) == []
    assert len(check_times({"1": Ran(job, WALLTIME, 9.0, 12.0, {"n0": 1}, "free", "q00")})) == 1
    assert len(check_times({"1": Ran(job, WALLTIME, 10.0, 15.0, {"n0": 1}, "free", "q00")})) == 1
