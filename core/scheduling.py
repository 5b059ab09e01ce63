"""The data the scheduler's extension points exchange with plugins.

The scheduler itself (its policy, backfill, placement) is not a kernel module; these types are
the contract between it and plugins, so that a plugin imports only `pbsplug`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .objects import Job, Vnode


@dataclass
class SchedulerInstance:
    """A scheduler a plugin contributes (PBS's ``sched`` object).

    It owns `partitions`: it sees only the jobs of queues in them and the vnodes in them, plus
    the server-wide settings. The ``default`` scheduler sees what no instance owns. Two
    instances never own the same partition, so their cycles may run at the same time.
    """

    name: str
    partitions: tuple[str, ...] = ()
    scheduling: bool = False
    scheduler_iteration: int = 600
    #: Policy settings of this instance (backfill_depth, strict_ordering, job_sort_formula...).
    policy: dict[str, Any] = field(default_factory=dict)


@dataclass
class JobOrder:
    """The queued jobs of one cycle, in the order the scheduler will consider them.

    A `sched_job_order` hook may reorder `jobs` in place and add job ids to `starving`, most
    starving first. The starving jobs are considered first, in that order, and the first
    becomes the top job: the scheduler drains for it and backfills around it.
    """

    sched: str
    now: float
    jobs: list[Job]
    starving: list[str] = field(default_factory=list)


@dataclass
class Placement:
    """A node-placement question: which of `candidates` should `job` get?

    `candidates` are the vnodes, in the scheduler's preference order, that could take at
    least one of the job's chunks now, or at `start` when the scheduler plans ahead (a top
    job's drain, an estimate; `start` is None when the job would start now).

    `fit(vnodes)` is the scheduler's own first fit, tried over the given vnodes only and in
    the order given (each one of `candidates`): the vnode names, one per chunk, or None when
    the job does not fit there. A plugin that narrows the choice (one group of vnodes, a
    preferred order) lets the scheduler do the resource arithmetic.
    """

    sched: str
    now: float
    job: Job
    candidates: list[Vnode]
    start: float | None = None
    fit: Callable[[Sequence[Vnode]], list[str] | None] = field(
        default=lambda vnodes: None, repr=False)


@dataclass
class CycleStats:
    """What one scheduling cycle did."""

    sched: str
    started: float
    duration: float = 0.0
    jobs_considered: int = 0
    jobs_started: int = 0
    jobs_backfilled: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
