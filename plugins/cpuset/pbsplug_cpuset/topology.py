"""The host's NUMA layout, read from sysfs under an injectable root.

sysfs needs no dependency and is what the kernel itself reports; the root is a parameter so
tests and the demo describe other machines with files (see ``fake_sysfs``). Only online CPUs
count: an offline CPU can be in no cpuset, so it is dropped from every list read here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from .nodemask import format_list, parse_list

__all__ = ["NumaNode", "Topology", "TopologyError", "read_topology"]

_NODE_MEMTOTAL = re.compile(r"^Node\s+([0-9]+)\s+MemTotal:\s+([0-9]+)\s+kB\s*$", re.M | re.A)
_MEMTOTAL = re.compile(r"^MemTotal:\s+([0-9]+)\s+kB\s*$", re.M | re.A)


class TopologyError(ValueError):
    """A sysfs file that is missing or does not hold what the kernel writes there."""


@dataclass(frozen=True)
class NumaNode:
    """One NUMA node: its online CPUs (none for a memory-only node) and its memory."""

    id: int
    cpus: tuple[int, ...]
    mem_bytes: int


@dataclass(frozen=True)
class Topology:
    """The NUMA nodes, which threads share a core, and which package holds each CPU.

    ``siblings`` and ``packages`` have an entry for every online CPU and no other.
    """

    nodes: dict[int, NumaNode]
    siblings: dict[int, tuple[int, ...]]
    packages: dict[int, int]

    @property
    def cpus(self) -> tuple[int, ...]:
        """Every online CPU, sorted."""
        return tuple(sorted(self.siblings))

    @property
    def memory_nodes(self) -> tuple[int, ...]:
        """The ids of the nodes that have memory, sorted: what ``cpuset.mems`` may hold."""
        return tuple(sorted(n.id for n in self.nodes.values() if n.mem_bytes > 0))

    @cached_property
    def _node_by_cpu(self) -> dict[int, int]:
        return {cpu: node.id for node in self.nodes.values() for cpu in node.cpus}

    def node_of(self, cpu: int) -> int:
        """The NUMA node holding online CPU ``cpu``."""
        try:
            return self._node_by_cpu[cpu]
        except KeyError:
            raise ValueError(
                f"CPU {cpu} is in no NUMA node of this host (online CPUs: "
                f"{_format(self.cpus)})"
            ) from None

    def first_threads(self, cpus: Iterable[int] | None = None) -> list[int]:
        """Of ``cpus`` (default: all), only the lowest-numbered one on each core, sorted.

        What ``use_hyperthreads = false`` gives a job: one thread per core, so the job's
        threads do not share a core's execution units. A core is kept if any of its threads
        is in ``cpus``, through the lowest of those.
        """
        chosen = self.cpus if cpus is None else sorted(set(cpus))
        unknown = [c for c in chosen if c not in self.siblings]
        if unknown:
            raise ValueError(
                f"CPUs {_format(unknown)} are not online on this host (online CPUs: "
                f"{_format(self.cpus)})"
            )
        seen: set[tuple[int, ...]] = set()
        first: list[int] = []
        for cpu in chosen:  # ascending, so the first met of each core is its lowest
            core = self.siblings[cpu]
            if core not in seen:
                seen.add(core)
                first.append(cpu)
        return first


def _format(ids: Iterable[int]) -> str:
    return format_list(ids) or "none"


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise TopologyError(f"cannot read {path}: {exc.strerror or exc}") from None


def _read_list(path: Path) -> list[int]:
    text = _read(path)
    try:
        return parse_list(text)
    except ValueError:
        raise TopologyError(
            f"{path} holds {text!r}, not a CPU or node list such as '0-3,8'"
        ) from None


def _read_int(path: Path) -> int:
    text = _read(path)
    try:
        return int(text.strip())
    except ValueError:
        raise TopologyError(f"{path} holds {text!r}, not a whole number") from None


def read_topology(root: str | Path = "/") -> Topology:
    """The NUMA nodes and CPU topology of the machine whose sysfs is under ``root``.

    Without ``sys/devices/system/node`` (a kernel built without NUMA) the host is one node 0
    with every online CPU and ``proc/meminfo``'s MemTotal. A CPU without a ``topology``
    directory is its own core in package 0. Raises TopologyError, naming the file, when a
    file is missing or does not parse.
    """
    base = Path(root)
    system = base / "sys/devices/system"
    online = _read_list(system / "cpu/online")
    online_set = set(online)

    siblings: dict[int, tuple[int, ...]] = {}
    packages: dict[int, int] = {}
    for cpu in online:
        topo = system / f"cpu/cpu{cpu}/topology"
        if not topo.is_dir():
            siblings[cpu], packages[cpu] = (cpu,), 0
            continue
        threads = tuple(c for c in _read_list(topo / "thread_siblings_list") if c in online_set)
        if cpu not in threads:
            raise TopologyError(
                f"{topo / 'thread_siblings_list'} does not list CPU {cpu} itself "
                f"(online siblings: {_format(threads)})"
            )
        siblings[cpu] = threads
        package = _read_int(topo / "physical_package_id")
        if package < -1:
            raise TopologyError(
                f"{topo / 'physical_package_id'} holds {package}, not a package id (>= 0, "
                "or -1 for none)"
            )
        # -1 is how the kernel says the platform gives no package id: one package, then.
        packages[cpu] = max(package, 0)

    node_dir = system / "node"
    if not node_dir.is_dir():
        meminfo = base / "proc/meminfo"
        text = _read(meminfo)
        match = _MEMTOTAL.search(text)
        if match is None:
            raise TopologyError(f"{meminfo} has no 'MemTotal: <n> kB' line")
        nodes = {0: NumaNode(0, tuple(online), int(match[1]) * 1024)}
        return Topology(nodes, siblings, packages)

    nodes = {}
    for node_id in _read_list(node_dir / "online"):
        here = node_dir / f"node{node_id}"
        cpus = tuple(c for c in _read_list(here / "cpulist") if c in online_set)
        meminfo = here / "meminfo"
        text = _read(meminfo)
        match = _NODE_MEMTOTAL.search(text)
        if match is None or int(match[1]) != node_id:
            first = text.splitlines()[0] if text.strip() else ""
            raise TopologyError(
                f"{meminfo} has no 'Node {node_id} MemTotal: <n> kB' line (first line: {first!r})"
            )
        nodes[node_id] = NumaNode(node_id, cpus, int(match[2]) * 1024)
    return Topology(nodes, siblings, packages)
