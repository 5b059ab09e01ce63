"""The scheduler: PBS's default policy as a library that does no I/O.

Given a `Snapshot` (jobs, queues, vnodes, reservations, the server) and the time, one
`Scheduler.cycle` returns its decisions (run this job on these vnodes, confirm or deny this
reservation) and the estimates for queued jobs. The local engine and the simulator both drive
it; plugins shape it through the kernel's scheduler hooks (`pbsplug.hookspecs`), never by
importing it.
"""

from .cycle import DEFAULT_PARTITION, Scheduler, parse_exec_vnode
from .instances import SchedulerSetupError, build_schedulers
from .model import (
    UNKNOWN_WALLTIME,
    CycleResult,
    Estimate,
    JobLog,
    Policy,
    ResvDecision,
    RunDecision,
    Snapshot,
    VnodeLog,
    format_exec_vnode,
)

__all__ = [
    "DEFAULT_PARTITION", "UNKNOWN_WALLTIME", "CycleResult", "Estimate", "JobLog", "Policy",
    "ResvDecision", "RunDecision", "Scheduler", "SchedulerSetupError", "Snapshot",
    "VnodeLog", "build_schedulers", "format_exec_vnode", "parse_exec_vnode",
]
