"""Which CPUs and memory nodes a job's cpuset gets: PBS's cgroups hook rules.

- Usable CPUs: the online CPUs of each NUMA node, only the first thread of each core unless
  ``use_hyperthreads``, minus ``exclude_cpus``, minus the CPUs other cpusets hold (jobs',
  stuck ones', orphans').
- A vnode bound to NUMA node N (``host[N]``, or the site's ``vnode_numa``) gives its chunks'
  CPUs from node N only, lowest-numbered free first; it fails when node N has too few.
- The other vnodes (one per host, or site-made ones) give theirs from the host: the NUMA node
  tried first follows ``placement_type`` (load_balanced: most free CPUs; load_packed: fewest
  that still fit; job_balanced: fewest jobs), lowest-numbered free CPUs there; when no single
  node has room, the lowest free CPUs of the whole host.
- Memory nodes (``mem_fences``): the NUMA nodes of the CPUs given, plus the memory-only
  nodes; without mem_fences, every memory node.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .topology import Topology

_BRACKET = re.compile(r"\[([0-9]+)\]$")  # ASCII: int() also reads "[١]"


class AssignError(Exception):
    """The host cannot give the job what it was allotted; the message says why."""


@dataclass(frozen=True)
class Rules:
    exclude_cpus: frozenset[int] = frozenset()
    use_hyperthreads: bool = False
    mem_fences: bool = True
    placement_type: str = "load_balanced"
    vnode_numa: Mapping[str, int] | None = None

    @classmethod
    def from_config(cls, config: Mapping) -> Rules:
        return cls(frozenset(config["exclude_cpus"]), bool(config["use_hyperthreads"]),
                   bool(config["mem_fences"]), str(config["placement_type"]),
                   dict(config["vnode_numa"]))


def numa_of(vnode: str, topology: Topology, rules: Rules) -> int | None:
    """The NUMA node a vnode stands for, or None (the whole host)."""
    if rules.vnode_numa and vnode in rules.vnode_numa:
        return int(rules.vnode_numa[vnode])
    match = _BRACKET.search(vnode)
    if match and int(match.group(1)) in topology.nodes:
        return int(match.group(1))
    return None


def usable_cpus(topology: Topology, rules: Rules) -> dict[int, list[int]]:
    """Per NUMA node, the CPUs a job may ever get."""
    out = {}
    for node in topology.nodes.values():
        # One thread per core first, then the exclusions: excluding CPU 0 keeps jobs off
        # core 0 altogether, not on its second thread.
        cpus = node.cpus if rules.use_hyperthreads else topology.first_threads(node.cpus)
        out[node.id] = sorted(c for c in cpus if c not in rules.exclude_cpus)
    return out


def assign(topology: Topology, rules: Rules, wanted: Mapping[str, int],
           held: Iterable[int] = (), jobs_per_node: Mapping[int, int] | None = None
           ) -> tuple[list[int], list[int]]:
    """The (cpus, mems) of a job wanting ``{vnode: ncpus}`` on this host, when `held` CPUs
    are taken by other cpusets. `AssignError` when it does not fit."""
    taken = set(held)
    usable = usable_cpus(topology, rules)
    free = {node: [c for c in cpus if c not in taken] for node, cpus in usable.items()}
    chosen: list[int] = []
    unbound = 0
    for vnode, ncpus in wanted.items():
        node = numa_of(vnode, topology, rules)
        if node is None:
            unbound += ncpus
            continue
        if node not in free:
            raise AssignError(f"vnode {vnode} stands for NUMA node {node}, which this host "
                              f"does not have (nodes: {sorted(free)})")
        if len(free[node]) < ncpus:
            raise AssignError(f"vnode {vnode} (NUMA node {node}) has {len(free[node])} free "
                              f"CPUs, the job was given {ncpus}")
        chosen += free[node][:ncpus]
        free[node] = free[node][ncpus:]
    if unbound:
        chosen += _from_host(free, unbound, rules.placement_type, jobs_per_node or {})
    return sorted(chosen), _mems(topology, rules, chosen)


def _from_host(free: dict[int, list[int]], ncpus: int, placement_type: str,
               jobs_per_node: Mapping[int, int]) -> list[int]:
    fitting = [node for node, cpus in free.items() if len(cpus) >= ncpus]
    if fitting:
        if placement_type == "load_packed":
            key = lambda n: (len(free[n]), n)  # noqa: E731
        elif placement_type == "job_balanced":
            key = lambda n: (jobs_per_node.get(n, 0), n)  # noqa: E731
        else:
            key = lambda n: (-len(free[n]), n)  # noqa: E731
        node = min(fitting, key=key)
        return free[node][:ncpus]
    every = sorted(c for cpus in free.values() for c in cpus)
    if len(every) < ncpus:
        raise AssignError(f"this host has {len(every)} free CPUs, the job was given {ncpus}")
    return every[:ncpus]


def _mems(topology: Topology, rules: Rules, cpus: list[int]) -> list[int]:
    memory = [node.id for node in topology.nodes.values() if node.mem_bytes > 0]
    if not rules.mem_fences:
        return sorted(memory) or sorted(topology.nodes)
    used = {topology.node_of(cpu) for cpu in cpus}
    memory_only = {node.id for node in topology.nodes.values() if not node.cpus}
    return sorted(used | memory_only) or sorted(memory) or sorted(topology.nodes)
