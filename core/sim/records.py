"""What flows through the simulator: trace jobs in, job results and machine states out.

The trace readers (`pbsplug.sim.traces`) yield `TraceJob` records in submit order; the
simulator (`pbsplug.sim.engine`) replays them and hands every finished job as a `JobResult`,
and every change in the machine's state counts as a `MachineStates`, to a `ResultSink`
(`pbsplug.sim.output` writes them as metrics, Batsim CSV and plots). Times are seconds from
the trace's start (the first submit is not necessarily 0).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

#: Batsim's final states (docs/output-jobs.rst), written in `_jobs.csv`.
COMPLETED = "COMPLETED_SUCCESSFULLY"
FAILED = "COMPLETED_FAILED"
WALLTIME = "COMPLETED_WALLTIME_REACHED"
KILLED = "COMPLETED_KILLED"
REJECTED = "REJECTED"

#: The machine states counted over time (Batsim's `_machine_states.csv` columns).
MACHINE_STATES = ("sleeping", "switching_on", "switching_off", "idle", "computing")


@dataclass(slots=True)
class TraceInfo:
    """What a trace's header (or the reader) says about the machine and the log."""

    path: str
    format: str                       # "swf", "pbs" or "sacct"
    max_nodes: int | None = None      # SWF MaxNodes
    max_procs: int | None = None      # SWF MaxProcs
    unix_start_time: int | None = None
    time_zone: str | None = None
    queues: dict[str, str] = field(default_factory=dict)   # SWF Queues notes, by number
    partitions: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


@dataclass(slots=True)
class TraceJob:
    """One job as the trace recorded it."""

    job_id: str                # the trace's own id (SWF job number, PBS id, Slurm JobID)
    line: int                  # 1-based line of the file it came from
    submit: float              # seconds from the trace's start, >= 0
    run_time: float            # recorded run time, seconds, >= 0
    ncpus: int                 # processors requested (allocated where no request), >= 1
    walltime: float | None = None   # requested time, seconds; None when unknown
    nodes: int | None = None        # nodes requested, when the trace says
    mem: int | None = None          # memory requested for the whole job, bytes
    user: str = ""
    group: str = ""
    queue: str | None = None        # queue (PBS) or partition (Slurm, SWF partition number)
    select: str | None = None       # a PBS select statement, where the trace has one
    status: int | None = None       # SWF status: 1 done, 0 failed, 5 cancelled, -1 unknown
    recorded_wait: float | None = None   # the wait the real system gave it
    path: str = ""                  # its file, where the trace is a folder of files


@dataclass(slots=True)
class JobResult:
    """A job the simulator finished (or rejected)."""

    job: TraceJob
    final_state: str                 # one of the Batsim final states above
    start: float | None              # None when it never started (rejected)
    end: float
    hosts: tuple[int, ...] = ()      # indices of the hosts it ran on
    energy: float = 0.0              # joules charged to it by the power model
    run_count: int = 1
    reason: str | None = None        # why it was rejected (REJECTED only)


@dataclass(slots=True)
class MachineStates:
    """How many hosts are in each state from `time` on (until the next record)."""

    time: float
    counts: dict[str, int]           # keys from MACHINE_STATES
    watts: float = 0.0               # the machine's power draw from `time` on
    queued: int = 0                  # jobs waiting
    running: int = 0                 # jobs running
    busy_cpus: int = 0               # cpus assigned to running jobs


class ResultSink(Protocol):
    """Where the simulator sends what happened, in time order."""

    def job(self, result: JobResult) -> None: ...

    def machine(self, states: MachineStates) -> None: ...

    def close(self, end: float) -> None: ...
