"""The cpuset plugin's scheduler side and its masks (prints figures; never asserts).

Issue 8: placement for 10,000 queued jobs over 1,024 nodes in 16 octants, and mask encode and
decode at 4,096 bits.

The machine: one host of 1,024 vnodes ``big[0]`` .. ``big[1023]`` of 2 CPUs each, in 16
octants of 64 nodes (physical ids = logical numbers but for a swapped pair in every octant,
so the translation is real); half the nodes run jobs (in blocks, so each octant has room of
a different size). 10,000 jobs are queued: most need 1 to 8 nodes (small: one octant), some
16 to 48, a few 80 to 128 (large: anywhere); every 50th has been queued 9 hours (starving).

Rows, measured in the same run, taking turns:

- ``cycle, no plugin``: the scheduler alone (the baseline);
- ``cycle, cpuset``: with the plugin (octant placement, starvation order, stuck answers);
- ``per placement``: the plugin's answer for one job, alone.

Then the masks at 4,096 bits: encode, decode, and the logical/physical translation.

    .venv/bin/python benchmarks/bench_cpuset.py [--jobs 10000] [--nodes 1024] [--repeat 5]
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path

import pbsplug_cpuset
from pbsplug import Job, Placement, PluginSet, Queue, Server, Vnode
from pbsplug.scheduler import Policy, Scheduler, Snapshot
from pbsplug.siteconfig import PluginSite, SiteConfig
from pbsplug_cpuset.nodemask import NodeMap, decode_bits, encode_bits, mask_of
from pbsplug_cpuset.octants import Octants

NOW = 1_800_000_000.0


def machine(nodes: int, jobs: int, octant: int):
    rng = random.Random(8)
    vnodes = {f"big[{i}]": Vnode(f"big[{i}]", {"state": "free", "resources_available": {
        "ncpus": 2, "mem": "8gb", "host": "big"}}) for i in range(nodes)}
    running = []
    i = 0
    while i < nodes:  # blocks of busy nodes, about half the machine
        size = rng.randint(1, octant // 2)
        if rng.random() < 0.5:
            names = [f"big[{n}]" for n in range(i, min(i + size, nodes))]
            running.append(Job(f"r{i}.big", {
                "queue": "workq", "job_state": "R", "stime": NOW - 600, "qtime": NOW - 900,
                "exec_vnode": "+".join(f"({n}:ncpus=2)" for n in names),
                "Resource_List": {"walltime": f"{rng.randint(1, 8)}:00:00"}}))
        i += size
    queued = []
    for n in range(jobs):
        roll = rng.random()
        count = rng.randint(1, 8) if roll < 0.85 else rng.randint(16, 48) if roll < 0.97 \
            else rng.randint(80, 128)
        qtime = NOW - 9 * 3600 if n % 50 == 0 else NOW - rng.randint(60, 3600)
        queued.append(Job(f"{n}.big", {
            "queue": "workq", "job_state": "Q", "qtime": qtime,
            "Resource_List": {"select": f"{count}:ncpus=2",
                              "walltime": f"{rng.randint(1, 4)}:00:00"}}))
    return vnodes, running + queued


def config(nodes: int, octant: int) -> dict:
    physical = []
    for base in range(0, nodes, octant):  # swap the first two of every octant
        ids = list(range(base, min(base + octant, nodes)))
        ids[0], ids[1] = ids[1], ids[0]
        physical += ids
    return {"octants": [f"{b}-{min(b + octant, nodes) - 1}" for b in range(0, nodes, octant)],
            "physical_ids": ",".join(map(str, physical))}


def plugin_set(values: dict | None, tmp: Path) -> PluginSet | None:
    if values is None:
        return None
    site = SiteConfig(path=tmp / "site.toml")
    site.plugins["cpuset"] = PluginSite("cpuset", enabled=True, config=values)
    plugins = PluginSet(site)
    record = plugins.add("cpuset", pbsplug_cpuset)
    assert record.status == "enabled", record.failure_text()
    return plugins


def timed(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--nodes", type=int, default=1024)
    parser.add_argument("--octants", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    octant = args.nodes // args.octants
    vnodes, jobs = machine(args.nodes, args.jobs, octant)
    queues = {"workq": Queue("workq", {"queue_type": "execution", "started": True})}
    snap = Snapshot(Server("big"), queues, vnodes, jobs)
    values = config(args.nodes, octant)
    print(f"{platform.python_implementation()} {platform.python_version()} on "
          f"{platform.machine()}; {args.nodes} nodes in {args.octants} octants of {octant}; "
          f"{args.jobs} queued jobs; median of {args.repeat}")
    with tempfile.TemporaryDirectory() as tmp:
        with_plugin = plugin_set(values, Path(tmp))
        rows = {"cycle, no plugin": None, "cycle, cpuset": with_plugin}
        figures: dict[str, list[float]] = {name: [] for name in rows}
        results = {}
        for _ in range(args.repeat):  # taking turns, so both see the same machine state
            for name, plugins in rows.items():
                sched = Scheduler("default", (), Policy(),
                                  hooks=plugins.hook if plugins else None)
                seconds, results[name] = timed(lambda s=sched: s.cycle(snap, NOW), 1)
                figures[name].append(seconds)
        for name, times in figures.items():
            result = results[name]
            print(f"  {name:<20} {statistics.median(times) * 1000:9.1f} ms   "
                  f"started {len(result.run)}, top jobs {len(result.top_jobs)}")
        base = statistics.median(figures["cycle, no plugin"])
        extra = statistics.median(figures["cycle, cpuset"]) - base
        print(f"  the plugin's share: {extra * 1000:.1f} ms "
              f"({extra / max(base, 1e-9) * 100:.0f}% over the scheduler alone)")
        # Straddles: small jobs the plain scheduler spread over octants, and the plugin's.
        octants = Octants({"octant_scope": "host", "straddle_after": 0, "node_numbers": {},
                           **values})
        for name, result in results.items():
            small = [r for r in result.run if len(r.vnodes) <= octant]
            split = sum(len({octants.octant_of(vnodes[v]) for v in r.vnodes}) > 1
                        for r in small)
            print(f"  {name:<20} small jobs started across octants: {split} of {len(small)}")
        # One placement question, alone: a 4-node job over every free node.
        free = [v for v in vnodes.values()]
        question = Placement("default", NOW, jobs[-1], free,
                             fit=lambda vs: [v.name for v in vs[:4]] if len(vs) >= 4 else None)
        per, _ = timed(lambda: octants.place(question), max(args.repeat, 20))
        print(f"  {'per placement':<20} {per * 1e6:9.1f} µs   (1,024 candidates, 16 octants)")
    # Masks at 4,096 bits.
    width = 4096
    rng = random.Random(4)
    ids = sorted(rng.sample(range(width), width // 2))
    mask = mask_of(ids)
    text = encode_bits(mask, width)
    physical = list(range(width))
    rng.shuffle(physical)
    node_map = NodeMap(physical)
    print(f"masks at {width} bits, half set; median of 200")
    for name, fn in (("encode", lambda: encode_bits(mask, width)),
                     ("decode", lambda: decode_bits(text, width)),
                     ("logical -> physical", lambda: node_map.mask_to_physical(mask)),
                     ("physical -> logical", lambda: node_map.mask_to_logical(mask))):
        seconds, _ = timed(fn, 200)
        print(f"  {name:<20} {seconds * 1e6:9.1f} µs")


if __name__ == "__main__":
    main()
