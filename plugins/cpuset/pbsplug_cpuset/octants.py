"""Octants: groups of nodes a small job must not straddle (seed 002, sections 4 and 5).

A *node* here is a vnode (today a NUMA node, a socket, or a host of a switch group). Each has
a *logical* number (the OS's compact node id: ``host[N]`` is N, else the digits its name ends
with, else the site's ``node_numbers``) and a *physical* id (the seed's nasid, which is
usually but not always the same: ``physical_ids``). Octants are lists of physical ids. With
``octant_scope = "host"`` each host's nodes form that host's octants (one big NUMA machine);
with ``"complex"`` the numbers span hosts.

The free-node mask the execution host reports is over logical numbers; the scheduler reads
each vnode's own bit. Octant membership goes the other way, logical number to physical id to
octant, once per vnode (NAS's pbs_sched translated whole masks; pbsplug's scheduler already
knows which vnodes are free, so it needs only each candidate's octant).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from pbsplug import Placement, Vnode, parse_select

from .nodemask import NodeMap, decode_bits, parse_list
from .report import FREE_MASK

# ASCII digits: \d and int() also take "١٧" (Arabic-Indic) as 17.
_BRACKET = re.compile(r"\[([0-9]+)\]$")
_DIGITS = re.compile(r"([0-9]+)$")

#: An octant: (host, index) under scope "host", (None, index) under "complex".
OctantKey = tuple


def logical_number(name: str, numbers: Mapping[str, int]) -> int | None:
    """A vnode's logical node number: the site's `numbers`, else ``[N]``, else the digits
    its name ends with; None when it has none (it is in no octant)."""
    if name in numbers:
        return int(numbers[name])
    match = _BRACKET.search(name) or _DIGITS.search(name)
    return int(match.group(1)) if match else None


def host_of(vnode: Vnode) -> str:
    avail = vnode.resources_available
    return str(avail["host"] or vnode.name) if "host" in avail else vnode.name


@lru_cache(maxsize=4096)
def _free_bits(mask: str) -> int:
    return decode_bits(mask)


def mask_allows(vnode: Vnode, numbers: Mapping[str, int]) -> bool:
    """Whether the vnode's own bit is set in the free-node mask its host reported (a vnode
    without a mask, or without a number, is not held back)."""
    mask = vnode.get(FREE_MASK)
    if not mask:
        return True
    number = logical_number(vnode.name, numbers)
    if number is None:
        return True
    try:
        return bool(_free_bits(str(mask)) >> number & 1)
    except ValueError:
        return True  # a mask that does not parse says nothing


class Octants:
    """The site's octants and node numbering (from the checked configuration)."""

    def __init__(self, config: Mapping[str, Any]):
        self.ranges = [parse_list(text) for text in config["octants"]]
        self.map = NodeMap.parse(config["physical_ids"]) if config["physical_ids"] else None
        self.numbers: dict[str, int] = dict(config["node_numbers"])
        self.per_host = config["octant_scope"] == "host"
        self.straddle_after = int(config["straddle_after"])
        self._index = {pid: n for n, ids in enumerate(self.ranges) for pid in ids}
        self._keys: dict[str, tuple[OctantKey, int] | None] = {}

    def __bool__(self) -> bool:
        return bool(self.ranges)

    @property
    def nodes_per_octant(self) -> int:
        """The largest octant's node count: a job needing more nodes is large."""
        return max((len(ids) for ids in self.ranges), default=0)

    def physical_of(self, logical: int) -> int | None:
        if self.map is None:
            return logical
        return self.map.physical_of(logical) if logical < len(self.map) else None

    def _place_of(self, vnode: Vnode) -> tuple[OctantKey, int] | None:
        """(octant, logical number) of the vnode, or None when it is in no octant; worked
        out once per vnode name."""
        place = self._keys.get(vnode.name, False)
        if place is False:
            number = logical_number(vnode.name, self.numbers)
            physical = None if number is None else self.physical_of(number)
            index = None if physical is None else self._index.get(physical)
            place = None if index is None else (
                (host_of(vnode) if self.per_host else None, index), number)
            self._keys[vnode.name] = place
        return place

    def octant_of(self, vnode: Vnode) -> OctantKey | None:
        """The vnode's octant, or None when it is in none."""
        place = self._place_of(vnode)
        return None if place is None else place[0]

    def groups(self, vnodes: Iterable[Vnode]) -> list[list[Vnode]]:
        """The vnodes by octant, octants in order, each octant's vnodes lowest number
        first; then the vnodes in no octant, as one more group."""
        out: dict[OctantKey, list[tuple[int, str, Vnode]]] = {}
        outside = []
        for vnode in vnodes:
            place = self._place_of(vnode)
            if place is None:
                outside.append(vnode)
            else:
                out.setdefault(place[0], []).append((place[1], vnode.name, vnode))
        groups = [[v for *_, v in sorted(members)] for _, members in
                  sorted(out.items(), key=lambda item: (str(item[0][0]), item[0][1]))]
        return groups + [outside] if outside else groups

    def place(self, placement: Placement) -> list[str] | None:
        """The octant rule for one placement question (None: no opinion).

        A job that needs no more nodes than an octant holds runs inside one octant: the
        first octant with room, lowest-numbered nodes first, or else entirely on vnodes in
        no octant. When none has room it waits (``[]``) unless it has been queued longer
        than ``straddle_after``. Nodes whose own bit is clear in their host's free-node mask
        are not given now, nor planned on from now."""
        candidates = placement.candidates
        if placement.start is None or placement.start <= placement.now:
            allowed = [v for v in candidates if mask_allows(v, self.numbers)]
        else:
            allowed = candidates  # the mask says what is free now, not at a later start
        if not self.ranges:
            if len(allowed) == len(candidates):
                return None
            return placement.fit(allowed) or []
        default = placement.fit(allowed)
        if default is None:
            return []
        chosen = {v.name: v for v in allowed}
        if nodes_needed(placement.job, [chosen[n] for n in default]) > self.nodes_per_octant:
            return default  # a large job goes wherever the nodes are
        for members in self.groups(allowed):
            names = placement.fit(members)
            if names is not None:
                return names
        queued = float(placement.job.qtime or placement.job.ctime or placement.now)
        if self.straddle_after and placement.now - queued >= self.straddle_after:
            return default
        return []


@lru_cache(maxsize=1024)
def _request(select: str, ncpus: int, place: str) -> tuple[int, int, bool]:
    """(CPUs, chunks, one chunk per node) of a job's request."""
    if not select:
        return ncpus, 1, False
    chunks = parse_select(select)
    cpus = sum(c.count * int(c.resources.get("ncpus", 1) or 0) for c in chunks)
    count = sum(c.count for c in chunks)
    return cpus, count, "scatter" in place  # scatter and vscatter


def nodes_needed(job, vnodes: Iterable[Vnode]) -> int:
    """How many nodes the job asks for (the seed: 128 CPUs are 64 two-CPU nodes): its CPUs
    over the CPUs of a node (the largest among `vnodes`, those its first fit chose), or one
    node per chunk when it scatters."""
    res = job.Resource_List
    cpus, count, scatter = _request(str(res["select"] or ""), int(res["ncpus"] or 1),
                                    str(res["place"] or ""))
    per_node = max((int(v.resources_available["ncpus"] or 0) for v in vnodes), default=0)
    needed = -(-cpus // per_node) if per_node > 0 else count
    return max(needed, count) if scatter else needed
