"""The scheduler's side (seed 002, section 5): octant placement, starving jobs, and stuck
cpusets in the plan.

- `job_order`: a job queued longer than ``starve_after`` is starving; the longest-waiting
  first. The scheduler makes the most starving one its top job: it computes when and on which
  vnodes it will run, drains those, and backfills only what ends before or stays off them.
- `placement`: the octant rule (`Octants.place`).
- `availability`: a vnode held by cpusets stuck for less than ``stuck_grace`` will be free
  soon (NAS: most are reclaimed within a minute or two), so the drain counts it; one stuck
  longer counts as lost until it is reclaimed, so the drain never waits on a wedged cpuset.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pbsplug import JobOrder, Placement, Vnode

from .octants import Octants
from .report import STUCK, parse_stuck

#: States a stuck cpuset's vnode is in (``busy`` while stuck, ``offline`` once stuck too
#: long); a vnode also unusable for another reason is left to the scheduler's own rule.
_STUCK_STATES = frozenset({"busy", "offline", "free"})


def job_order(order: JobOrder, starve_after: float) -> None:
    """Name the starving jobs, longest queued first."""
    if starve_after <= 0:
        return
    starving = []
    for job in order.jobs:
        queued = job.qtime or job.ctime
        if queued is not None and order.now - float(queued) >= starve_after:
            starving.append((float(queued), job.id))
    order.starving.extend(job_id for _, job_id in sorted(starving)
                          if job_id not in order.starving)


def availability(now: float, vnodes: list[Vnode], stuck_grace: float) -> dict[str, float]:
    """``{vnode: now}`` for the vnodes whose every stuck cpuset is younger than
    `stuck_grace`; the others get no answer (never free, for the scheduler)."""
    out = {}
    for vnode in vnodes:
        stuck = parse_stuck(vnode.get(STUCK))
        if not stuck or vnode.states - _STUCK_STATES:
            continue
        if all(now - since < stuck_grace for since in stuck.values()):
            out[vnode.name] = now
    return out


class SchedSide:
    """The scheduler's view of the plugin's configuration (set by `configure`)."""

    def __init__(self, config: Mapping[str, Any]):
        self.octants = Octants(config)
        self.starve_after = float(config["starve_after"])
        self.stuck_grace = float(config["stuck_grace"])

    def placement(self, placement: Placement) -> list[str] | None:
        return self.octants.place(placement)
