"""The scheduler instances of a site: ``default`` plus those plugins contribute.

`build_schedulers` checks the instances as PBS's qmgr checks sched objects and gives each its
slice: a contributed instance owns its partitions; ``default`` owns every object in no
partition, or in a partition no instance owns. No two instances own the same partition, so
their cycles never decide about the same job or vnode and may run at the same time.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from ..objects import Server
from ..scheduling import SchedulerInstance
from ..units import parse_bool
from .cycle import DEFAULT_PARTITION, Scheduler
from .model import Policy

#: PBS limits sched object names to 15 characters.
MAX_SCHED_NAME = 15
#: The policy settings a sched object may carry (its sched_config, in PBS).
POLICY_KEYS = frozenset(f.name for f in dataclasses.fields(Policy))


class SchedulerSetupError(ValueError):
    """Contributed scheduler instances that cannot all run; one line per problem."""


def sched_instance(name: str, attrs: Mapping[str, Any]) -> SchedulerInstance:
    """A sched object (``qmgr create sched``, or a simulation's ``[sim.sched.NAME]``): its
    partitions (a list, or PBS's comma-separated text), switch, iteration and policy. The
    values are checked by `build_schedulers`."""
    parts = attrs.get("partition")
    parts = parts if isinstance(parts, (list, tuple)) else str(parts or "").split(",")
    policy = {k: v for k, v in attrs.items() if k in POLICY_KEYS}
    return SchedulerInstance(name, tuple(str(p).strip() for p in parts if str(p).strip()),
                             parse_bool(attrs.get("scheduling", False)),
                             int(attrs.get("scheduler_iteration", 600)), policy)


def build_schedulers(instances: Iterable[SchedulerInstance], server: Server | None = None,
                     hooks: Any = None) -> dict[str, Scheduler]:
    """``default`` (its policy, scheduling and scheduler_iteration from the server's
    attributes) and the contributed `instances`, by name.

    Raises `SchedulerSetupError` listing every instance that breaks PBS's rules: a name that
    is empty, too long, ``default`` or used twice; a partition named ``pbs-default`` or
    already owned by another instance; a bad policy setting."""
    server = server or Server("server")
    problems: list[str] = []
    owner: dict[str, str] = {}
    contributed: list[tuple[SchedulerInstance, Policy]] = []
    for inst in instances:
        name = str(inst.name or "")
        where = f"scheduler {name!r}"
        bad = len(problems)
        if not name or len(name) > MAX_SCHED_NAME or \
                not name.replace("_", "").replace("-", "").isalnum():
            problems.append(f"{where}: a name is 1-{MAX_SCHED_NAME} letters, digits, _ or -")
        elif name == "default":
            problems.append(f"{where}: Operation is not permitted on default scheduler")
        elif any(name == other.name for other, _ in contributed):
            problems.append(f"{where}: two plugins contribute a scheduler of this name")
        for part in inst.partitions:
            if part == DEFAULT_PARTITION:
                problems.append(f"{where}: Default partition name is not allowed "
                                f"({DEFAULT_PARTITION})")
            elif part in owner and owner[part] != name:
                problems.append(f"{where}: Partition is already associated with other "
                                f"scheduler ({part!r} belongs to {owner[part]!r})")
        try:
            policy = Policy.from_attributes(dict(inst.policy), strict=True)
        except ValueError as exc:
            problems.append(f"{where}: {exc}")
        if len(problems) == bad:
            owner.update({part: name for part in inst.partitions})
            contributed.append((inst, policy))
    if problems:
        raise SchedulerSetupError("\n".join(problems))

    default = Scheduler("default", policy=Policy.from_attributes(server.to_dict()),
                        hooks=hooks, claimed=owner,
                        scheduling=(True if server.scheduling is None
                                    else parse_bool(server.scheduling)),
                        iteration=int(server.scheduler_iteration or 600))
    scheds = {"default": default}
    for inst, policy in contributed:
        scheds[inst.name] = Scheduler(inst.name, inst.partitions, policy, hooks,
                                      scheduling=bool(inst.scheduling),
                                      iteration=int(inst.scheduler_iteration))
    return scheds

