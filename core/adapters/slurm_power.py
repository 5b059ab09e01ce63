"""Power saving on Slurm with the plugins' own decisions (the power plugin: seed 004).

Slurm's power saving is a timer (SuspendTime) plus two programs; PBS_power is a decision
(idle limit, eligibility, reservations and queued jobs' expected starts, max_concurrent_nodes,
min_node_down_delay) plus drivers. pbsplug keeps the decision the plugin's and the
bookkeeping Slurm's:

- **The decision** runs as the server ``periodic`` event in ``pbsplug slurm periodic`` on
  the controller (Slurm has no periodic script: a systemd timer or cron runs it every
  ``freq`` seconds; docs/slurm.md), refused when Slurm's PrivateData hides other users' jobs
  or reservations from its caller (`refuse_hidden_jobs`). Its vnode_list is Slurm's nodes
  (powered-down ones asleep, so that the plugin wakes them ahead of a reservation or job:
  they register by themselves), ``poweroff_eligible`` unless
  SuspendExcNodes/SuspendExcParts/SuspendExcStates exclude them, last_used_time from Slurm's
  LastBusyTime, resources_assigned.ncpus from the cpus its jobs hold (the plugin keeps a
  MIXED node, PBS's free, up), jobs from squeue (those holding cpus there, ``12/0`` a cpu as
  the engine's: the plugin's reason names them, `running_jobs`), suspended_jobs from
  ``squeue -t S`` (Slurm leaves such a node IDLE); resv_list from ``scontrol show
  reservation``; job_list the pending jobs with Slurm's expected start and nodes (``squeue
  --start``; a squeue that fails is the run's error: nothing is powered off). The hosts the
  plugin powers off (its driver; their vnodes go to ``sleep``) are handed to Slurm with
  ``scontrol update nodename=... state=power_down``, recorded first so that the
  SuspendProgram Slurm then runs does not act twice.
- **SuspendProgram** (Slurm's own timer, or an admin's ``state=power_down``): for nodes not
  in that record, the plugin's periodic hook over those nodes alone, as idle and eligible
  (its driver powers off what its rules allow; what they refuse is logged). A node holding a
  suspended job (the periodic run's ``squeue -t S``, `suspended_jobs`) is not among them:
  Slurm shows it IDLE, and it is kept up in a line naming it and its jobs. A squeue that
  fails is the program's error: nothing is powered off.
- **ResumeProgram** (Slurm allocated a job to powered-down nodes): the plugin's periodic hook
  over those nodes, with the jobs of ``SLURM_RESUME_FILE`` wanting them now (and one need
  for the nodes no job there names), so its driver powers them on; every node Slurm names
  when sinfo gives none pbsplug reads. Repeated every 2 s until
  each node is up, or half of ResumeTimeout has passed (min_node_down_delay and
  max_concurrent_nodes may hold a node back). The plugin's own record of booting hosts, and
  pbsplug's of hosts found up but not yet registered with Slurm, keep a second call for the
  same nodes (after a controller restart) from powering them on twice. Runs are serialised
  by a lock.
- **ResumeFailProgram**: logged.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import pwd
import re
import stat
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import jsontext, safedirs
from ..events import Event
from ..runner import ACCEPT, Outcome
from ..values import LONG_MAX, quoted, shown, whole
from .slurm_read import (
    ARRAY_THROTTLE,
    SlurmError,
    compress_hostlist,
    cpu_id_list,
    epoch,
    expand_hostlist,
    parse_line,
    vnode_state,
)

if TYPE_CHECKING:  # slurm_bridge imports this module when a power program runs
    from .slurm_bridge import Context

log = logging.getLogger("pbsplug.slurm")
#: The hosts pbsplug powered off and handed to Slurm, with when.
OFF_RECORD = "power_off.json"
#: The hosts the plugins found up again after a ResumeProgram, with when (not woken twice
#: while Slurm waits for them to register).
WOKEN_RECORD = "power_woken.json"
#: What a refusal of the power programs' folder calls it (an earlier install's records
#: were in the state folder itself).
POWER_FOLDER = "the power programs' folder (<--state-dir>/power)"
STATE_FOLDER = "the state folder (--state-dir)"
#: The items of one answer left out (squeue's lines, sinfo's nodes, the resume file's jobs)
#: that are logged one by one; the rest are one line with their count (`_LeftOut`). So are
#: the resume file's jobs that want hosts woken.
LOGGED_LEFT_OUT = 5
#: squeue's states of a job that holds cpus on its nodes (configuring, running, completing,
#: resizing, signaling, staging out, stopped): slurm_bridge's NODE_JOB_STATES but suspended.
HOLDING_STATES = "CF,R,CG,RS,SI,SO,ST"
#: The cpus of one job on one node `cpu_slots` reads at most (its allocation's CPU_IDs).
MAX_CPU_IDS = 1 << 16
#: The suspended jobs a SuspendProgram line names for one node kept up; the rest counted.
NAMED_JOBS = 10
#: Slurm's node state flags in the order slurmctld matches a SuspendExcStates name against
#: them: the name may be cut short or longer (``MAINT``, ``DRAINED``), any case, and stands
#: for the first flag whose letters, as far as the shorter of the two goes, are its own.
STATE_FLAGS = ("BLOCKED", "CLOUD", "COMPLETING", "DRAIN", "DYNAMIC_FUTURE", "DYNAMIC_NORM",
               "EXTERNAL", "INVALID_REG", "FAIL", "MAINTENANCE", "POWER_DOWN", "POWER_UP",
               "PERFCTRS", "POWERED_DOWN", "REBOOT_REQUESTED", "REBOOT_ISSUED", "RESERVED",
               "RESUME", "NOT_RESPONDING", "PLANNED", "POWERING_UP", "POWERING_DOWN")
#: The flags SuspendExcStates takes (slurm.conf(5)); besides them only the base state DOWN.
EXC_STATE_FLAGS = frozenset({"CLOUD", "DRAIN", "DYNAMIC_FUTURE", "DYNAMIC_NORM", "FAIL",
                             "INVALID_REG", "MAINTENANCE", "PERFCTRS", "NOT_RESPONDING",
                             "PLANNED", "RESERVED"})


class _LeftOut:
    """The items of one answer left out (`item`: what one is called), each logged in one
    line up to `LOGGED_LEFT_OUT`; `done` logs one more line counting the rest, so a flood of
    them cannot fill the log. `level` and `rest` (what the count line says of them) serve
    items logged for another reason."""

    def __init__(self, what: str, item: str, level: int = logging.WARNING,
                 rest: str = "left out"):
        self.what, self.item, self.count = what, item, 0
        self.level, self.rest = level, rest

    def log(self, message: str, *args: Any) -> None:
        self.count += 1
        if self.count <= LOGGED_LEFT_OUT:
            log.log(self.level, message, *args)

    def done(self) -> None:
        more = self.count - LOGGED_LEFT_OUT
        if more > 0:  # ("1 more nodes" was written)
            log.log(self.level, "%s: %d more %s%s %s (not logged one by one)", self.what,
                    more, self.item, "s" * (more != 1), self.rest)


def _folder_name(ctx: Context) -> str:
    config = getattr(ctx, "config", None) or {}
    return POWER_FOLDER if config.get("power_dir") else STATE_FOLDER


def _hostlist(ctx: Context, text: str) -> list[str]:
    return ctx.slurm.hostnames(text) if text and text not in ("(null)", "") else []


def config_value(ctx: Context, key: str, text: str | None = None) -> str:
    """One ``scontrol show config`` value (22.05 has no JSON for it), from `text` when the
    caller has run it already."""
    if text is None:
        text = ctx.slurm.run("scontrol", "show", "config")
    match = re.search(rf"^{key}\s*=\s*(.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else ""


def refuse_hidden_jobs(ctx: Context, config: str, uid: int) -> None:
    """`SlurmError` in one line when Slurm's PrivateData hides other users' jobs, or the
    reservations it cannot use, from `uid`, the run's caller (`config`: ``scontrol show
    config``'s text; 22.05 has no ``--json`` for it and writes ``PrivateData             =
    cloud,jobs``, every flag for ``all``).

    With ``jobs`` there, squeue and scontrol show a caller that is neither root nor
    SlurmUser (nor an operator or admin of Slurm's accounting, which pbsplug cannot tell)
    only its own jobs, ``-a`` or not; with ``reservations``, only the reservations it may
    use. The decision would then see no other user's suspended job (Slurm shows its node
    IDLE) nor pending job, or no such reservation, and could power off the nodes they hold
    or wait for: refused, not warned about (a warning in a log nobody reads would not keep
    a node up). Slurm runs SuspendProgram and ResumeProgram as SlurmUser, which sees every
    job and reservation. The caller is pbsplug's own euid: commands of a --bin-dir that
    run as another user are not told from Slurm's (docs/slurm.md)."""
    value = config_value(ctx, "PrivateData", config)
    flags = {flag.strip().lower() for flag in value.split(",")}
    hidden = [what for flag, what in (
        ("jobs", ("other users' jobs", "their suspended and pending jobs")),
        ("reservations", ("the reservations it may not use", "those reservations")))
        if flag in flags]
    if not hidden:
        return
    slurm_user = re.search(r"\(([0-9]+)\)$", config_value(ctx, "SlurmUser", config))
    if uid == 0 or (slurm_user is not None and int(slurm_user.group(1)) == uid):
        return
    raise SlurmError(f"PrivateData={quoted(value, 80)} in slurm.conf hides "
                     f"{' and '.join(h[0] for h in hidden)} from uid {uid} (neither root nor "
                     f"SlurmUser): the power decision would not see "
                     f"{' and '.join(h[1] for h in hidden)} and could power off their "
                     "nodes; run 'pbsplug slurm periodic' as root or SlurmUser")


def excluded(ctx: Context, config: str) -> set[str]:
    """Nodes Slurm's SuspendExcNodes and SuspendExcParts keep up: not poweroff_eligible
    (`config`: ``scontrol show config``'s text).

    SuspendExcNodes is sets of nodes, comma-separated, each with an optional ``:count``
    (``n[1-8]:2,n[20-29]``: Slurm keeps two of n[1-8] up, and all of n[20-29]); every node
    of every set is kept up here. Only the first set was read: the nodes of the others were
    powered off."""
    out: set[str] = set()
    nodes = config_value(ctx, "SuspendExcNodes", config)
    if nodes and nodes != "(null)":
        out.update(_hostlist(ctx, re.sub(r":[0-9]+(?=,|$)", "", nodes)))
    parts = config_value(ctx, "SuspendExcParts", config)
    if parts and parts != "(null)":
        # (checked: a failed sinfo read as no nodes, and the run powered off the
        # partitions' nodes; now it is the run's error, and nothing is powered off)
        info = ctx.slurm.run("sinfo", "-h", "-o", "%R %N", "-p", parts)
        for line in info.splitlines():
            if len(line.split()) == 2:
                out.update(_hostlist(ctx, line.split()[1]))
    return out


def excluded_by_state(ctx: Context, config: str, nodes: Iterable[Mapping[str, Any]]
                      ) -> set[str]:
    """The `nodes` (`slurm_nodes`) Slurm's SuspendExcStates keeps up (Slurm 23.02 and
    later; `config`: ``scontrol show config``'s text): node states, comma-separated
    (``DOWN,DRAIN,RESERVED``), each the base state DOWN or one of `EXC_STATE_FLAGS`, read
    as slurmctld reads them (`exc_state`); a node whose base state or one of its flags is
    named is kept up. It was not read: a DOWN or drained node was poweroff_eligible.

    ``scontrol show config`` shows the value as slurm.conf (or ``scontrol update``) gave
    it, and slurmctld takes any case and a name cut short or longer: 'maint' and 'DRAINED'
    named no flag here exactly, and those nodes were powered off while Slurm kept them up;
    'IDLE', which slurmctld ignores, kept every idle node up. A name slurmctld ignores is
    ignored here too, in one log line."""
    value = config_value(ctx, "SuspendExcStates", config)
    states: set[str] = set()
    ignored = []
    for token in value.split(",") if value and value != "(null)" else ():
        if token.strip():
            state = exc_state(token.strip())
            if state is None:
                ignored.append(token.strip())
            else:
                states.add(state)
    if ignored:
        log.warning("SuspendExcStates: %s: no state Slurm keeps up (slurmctld ignores it "
                    "too); ignored", ", ".join(quoted(t, 40) for t in ignored[:10]))
    out = set()
    for node in nodes:
        names = {str(f).upper() for f in node.get("state_flags") or ()} & states
        if names or ("DOWN" in states and str(node.get("state") or "").upper() == "DOWN"):
            out.add(str(node["name"]))
    return out


def exc_state(token: str) -> str | None:
    """The state one SuspendExcStates name stands for, as slurmctld reads it: DOWN for
    ``DO``, ``DOW`` or ``DOWN``; else the first of `STATE_FLAGS` it matches (any case; as
    far as the shorter of the two goes), when SuspendExcStates takes that flag; else None
    (slurmctld logs it as invalid and ignores it)."""
    if not token.isascii():
        return None
    word = token.upper()
    if 2 <= len(word) <= 4 and "DOWN".startswith(word):
        return "DOWN"
    for flag in STATE_FLAGS:
        size = min(len(word), len(flag))
        if word[:size] == flag[:size]:
            return flag if flag in EXC_STATE_FLAGS else None
    return None


def slurm_nodes(ctx: Context) -> list[dict[str, Any]]:
    """``sinfo --json``'s nodes, each as 22.05 writes it (``_node``).

    Each node is read on its own: one in no shape pbsplug reads is one log line (the
    first `LOGGED_LEFT_OUT`, then one counting the rest) and left out, and the others'
    power saving goes on (it raised for the whole run: no node powered off, and a
    ResumeProgram woke none of the nodes Slurm named, which then wait out ResumeTimeout; one
    left out is woken as a node sinfo does not list). An answer none of whose nodes is read
    is the first one's error (ResumeProgram then wakes every node Slurm named)."""
    data = ctx.slurm.cluster_json("sinfo")
    nodes = data.get("nodes")
    if not isinstance(nodes, list):
        raise ValueError("sinfo --json: no list of nodes in its answer (pbsplug reads "
                         "Slurm 22.05 to 23.11's; later ones group nodes under 'sinfo')")
    out: list[dict[str, Any]] = []
    first: SlurmError | None = None
    left_out = _LeftOut("sinfo --json", "node")
    for index, raw in enumerate(nodes):
        try:
            if not isinstance(raw, dict) or not raw.get("name"):
                raise SlurmError(f"sinfo --json: node {index}: {quoted(raw, 60)} is not a "
                                 "node with a name")
            out.append(_node(raw))
        except SlurmError as exc:
            first = first or exc
            left_out.log("%s; left out", exc)
    left_out.done()
    if first is not None and not out:
        raise first
    return out


def _node(raw: Mapping[str, Any]) -> dict[str, Any]:
    """One node of ``sinfo --json`` in 22.05's shape, whichever Slurm wrote it.

    22.05 writes ``"state": "idle", "state_flags": ["POWERED_DOWN"]`` and plain numbers.
    23.02 and later write the base state and its flags as one list (``"state": ["IDLE",
    "POWERED_DOWN"]``), and from 23.11 some numbers as ``{"set", "infinite", "number"}``.
    Read as a string, such a list made a sleeping node look awake.

    ``alloc_cpus`` is the cpus jobs hold on it (22.05 to 23.11: a plain number; read as
    the others are). A node some of whose cpus a job holds is MIXED, which is PBS's
    ``free``, and its ``last_busy`` stays where the node was last idle while jobs run on
    it (seen on 22.05): without them, the plugin powered off a MIXED node under its job
    once ``last_busy`` was older than ``node_idle_limit``."""
    state, flags = raw.get("state") or "", raw.get("state_flags") or []
    if isinstance(state, list) and isinstance(flags, list):
        flags = state[1:] + flags
        state = state[0] if state else ""
    # (flags that are no list: a TypeError, or a string read letter by letter)
    if not isinstance(state, str) or not isinstance(flags, list) \
            or not all(isinstance(f, str) for f in flags):
        shown = f" (state_flags {str(raw.get('state_flags'))[:40]!r})" \
            if not isinstance(flags, list) else ""
        raise SlurmError(f"sinfo --json: node {str(raw.get('name'))[:40]!r}: state "
                         f"{str(raw.get('state'))[:60]!r}{shown} is not a state and its "
                         "flags")
    return {**raw, "state": state, "state_flags": flags,
            "cpus": _number(raw, "cpus"), "last_busy": _number(raw, "last_busy"),
            "alloc_cpus": _number(raw, "alloc_cpus")}


def _number(node: Mapping[str, Any], key: str) -> int:
    """A count or a time of ``sinfo --json``: a number, or 23.11's ``{"set": true, "infinite":
    false, "number": N}``; unset, infinite or absent is 0."""
    value = node.get(key)
    if isinstance(value, Mapping):
        value = value.get("number") if value.get("set") and not value.get("infinite") else 0
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << 63:
        raise SlurmError(f"sinfo --json: node {str(node.get('name'))[:40]!r}: {key} "
                         f"{str(node.get(key))[:60]!r} is not a count")
    return value


def vnode(node: Mapping[str, Any], eligible: bool, changed: int) -> dict[str, Any]:
    """One node (`_node`) as the periodic event's vnode; the cpus jobs hold on it are its
    ``resources_assigned.ncpus``, as PBS's: the plugin keeps a host up while any is held."""
    name = str(node["name"])
    state = "+".join([node["state"], *node["state_flags"]])
    # (MIXED is a job on some of its cpus whatever alloc_cpus says: a Slurm that leaves the
    # field out, read as 0, must not make it look idle)
    held = node["alloc_cpus"] or int(str(node["state"]).upper() in ("MIXED", "ALLOCATED"))
    return {"state": vnode_state(state), "poweroff_eligible": eligible,
            "resources_available": {"host": name, "vnode": name, "ncpus": node["cpus"]},
            "resources_assigned": {"ncpus": held},
            "last_used_time": node["last_busy"], "last_state_change_time": changed}


def reservations(ctx: Context) -> dict[str, dict[str, Any]]:
    """Slurm's reservations. Never one left out, whose nodes could then be powered off
    before or while it runs: one whose nodes do not read is the run's error (nothing is
    powered off), one whose start does not read is kept as begun (its nodes stay up),
    logged."""
    out = {}
    for resv in ctx.slurm.reservations():
        name = resv.get("ReservationName")
        if not name:
            continue
        try:
            nodes = _hostlist(ctx, str(resv.get("Nodes") or ""))
        except (ValueError, SlurmError) as exc:
            raise SlurmError(f"reservation {quoted(name, 60)}: its nodes not read: {exc}"
                             ) from None
        try:
            start = epoch(resv.get("StartTime"), "StartTime") or 0
        except (ValueError, SlurmError) as exc:
            log.warning("reservation %s: its start not read, taken as begun (its nodes stay "
                        "up): %s", quoted(name, 60), exc)
            start = 0
        out[name] = {
            "reserve_state": "RESV_RUNNING" if resv.get("State") == "ACTIVE"
            else "RESV_CONFIRMED",
            "reserve_start": start, "resv_nodes": "+".join(f"({n})" for n in nodes)}
    return out


def pending_jobs(ctx: Context) -> dict[str, dict[str, Any]]:
    """Pending jobs with Slurm's expected start and nodes (``squeue --start``; its JSON in
    22.05 has no scheduled nodes).

    A line not read (not the three fields asked for, or a start or nodes Slurm answers
    oddly for) is left out alone, one log line naming what was wrong; past the first
    `LOGGED_LEFT_OUT`, one line counts the rest (a flood of them cannot fill the log).

    A squeue that fails is `SlurmError` (the command, its exit status and what it said):
    the run's error, so nothing is powered off. It read as no pending jobs, and the nodes
    they wait for could be powered off."""
    text = ctx.slurm.run("squeue", "-h", "-a", "-t", "PD", "-o", "%i|%S|%Y")
    out = {}
    left_out = _LeftOut("squeue", "line")
    for number, line in enumerate(text.splitlines(), 1):
        parts = line.split("|")
        try:  # one job Slurm answers oddly for is left out, not the whole run
            if len(parts) != 3:
                what = f"squeue line {number}"
                raise SlurmError(f"{len(parts)} field{'s' * (len(parts) != 1)}, not 3 "
                                 f"(id|start|nodes): {quoted(line, 80)}")
            job_id, start, nodes = parts
            what = f"pending job {shown(job_id)}"
            when = epoch(start, "StartTime")
            names = _hostlist(ctx, nodes)
        except (ValueError, SlurmError) as exc:
            left_out.log("%s left out: %s", what, exc)
            continue
        if when is None or not names:
            continue
        out[job_id] = {"id": job_id, "job_state": "Q", "estimated": {
            "start_time": when, "exec_vnode": "+".join(f"({n}:ncpus=1)" for n in names)}}
    left_out.done()
    return out


def node_jobs(ctx: Context, states: str, what: str) -> dict[str, list[str]]:
    """Each node's jobs in squeue's `states` (``squeue -h -a -t STATES -o %A|%N``), in
    squeue's order; `what` names one such job in an error. Each job by its own id (``%A``,
    the id every job event's ``job.id`` and exechost_periodic's job list have: an array
    task's and a heterogeneous job part's own; ``%i`` wrote ``5_1``, ``7+1``, which no
    event has). A squeue that fails is `SlurmError`, the run's error (nothing is powered
    off); a line whose nodes do not read is that too: a job left out would leave its node
    unprotected."""
    text = ctx.slurm.run("squeue", "-h", "-a", "-t", states, "-o", "%A|%N")
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        job_id, bar, nodes = line.partition("|")
        if not bar or not job_id:
            raise SlurmError(f"squeue -t {states}: {quoted(line, 80)} is not id|nodes")
        try:
            names = _hostlist(ctx, nodes)
        except (ValueError, SlurmError) as exc:
            raise SlurmError(f"{what} {shown(job_id)}: its nodes not read: {exc}") from None
        for name in names:
            out.setdefault(name, []).append(job_id)
    return out


def suspended_jobs(ctx: Context) -> dict[str, list[str]]:
    """Each node's suspended jobs (``squeue -t S``, `node_jobs`). Slurm leaves a node whose
    only job is suspended IDLE (its own power saving skips a node with suspended jobs), so
    without them the plugin powered it off under the job."""
    return node_jobs(ctx, "S", "suspended job")


def running_jobs(ctx: Context) -> dict[str, list[str]]:
    """Each node's jobs that hold cpus there (`HOLDING_STATES`, `node_jobs`) as the periodic
    event's vnodes' ``jobs``, in the engine's form: one ``<job id>/<cpu>`` a cpu the job
    holds there (Slurm's CPU ids on the node, `cpu_slots`), in the cpus' order (``["12/0",
    "13/1"]``; they were bare ids). The job ids are the adapter's own (Slurm's, with no
    server part: its events' ``job.id``), so the plugins' reason for keeping a node up
    names the job as before (``n1 has a job (12), not idle``). squeue says which jobs
    hold a node; a job whose cpus there do not read is one entry, ``<job id>/0``."""
    held = node_jobs(ctx, HOLDING_STATES, "job")
    nodes_of: dict[str, set[str]] = {}
    for node, job_ids in held.items():
        for job_id in job_ids:
            nodes_of.setdefault(job_id, set()).add(node)
    cpus = cpu_slots(ctx, nodes_of) if held else {}
    out = {}
    for node, job_ids in held.items():
        entries = [(cpu, job_id) for job_id in job_ids
                   for cpu in cpus.get((job_id, node)) or [0]]
        out[node] = [f"{job_id}/{cpu}" for cpu, job_id in sorted(entries,
                                                                 key=lambda e: e[0])]
    return out


#: A job record's identity: the fields scontrol writes before the first of the job's own
#: text (its name), so that no text of any job can forge them: the job id (an array task's
#: and a heterogeneous job part's own, squeue's ``%A``), then an array task's or a
#: heterogeneous job part's ids (22.05: ``JobId=6 ArrayJobId=5 ArrayTaskId=1 JobName=``,
#: ``JobId=8 HetJobId=7 HetJobOffset=1 JobName=``; an array with a limit of tasks at
#: once, ``--array=1-3%3``, adds ``ArrayTaskThrottle=3`` after ``ArrayTaskId``).
_IDENTITY = re.compile(r"JobId=([0-9]+) (?:ArrayJobId=([0-9]+) ArrayTaskId=([0-9]+)"
                       rf"{ARRAY_THROTTLE} |HetJobId=([0-9]+) HetJobOffset=([0-9]+) )?JobName=")


def _identity(line: str) -> str | None:
    """The job a record is of, as squeue's ``%A`` writes it (`_IDENTITY`), or None."""
    match = _IDENTITY.match(line)
    return None if match is None else match.group(1)


#: How long `cpu_slots` waits for the jobs read twice, asked for alone (one scontrol
#: process for them all); those not answered by then are one entry a node.
ALONE_SECONDS = 20.0


def cpu_slots(ctx: Context, nodes_of: Mapping[str, Collection[str]]
              ) -> dict[tuple[str, str], list[int]]:
    """Each job's Slurm CPU ids on each of its nodes, by (its id as squeue's ``%A`` writes
    it: an array task's and a heterogeneous job part's own, as its events have it; node),
    for the jobs and nodes squeue named (`nodes_of`), from ``scontrol -a -o -d show job``'s
    allocation (``Nodes=n[1-2] CPU_IDs=0-1``; ``-a`` for the jobs of hidden partitions and
    of partitions the caller's groups may not use).

    Any job's text (its name, comment, paths) may hold keys or line breaks, and its owner
    writes it. So a record's job is read from its leading fields alone (`_IDENTITY`), and
    a line of another job is skipped before it is parsed (pending jobs, and a line a job
    name's line break starts without that header); a record with a key twice (what a job
    name that forges an allocation makes: ``NodeList=`` before Slurm's own) is left out
    before anything in it is expanded; a job read twice (a line break in another job's
    name can start a line as its record does) is asked for alone, ``show job <id>``, whose
    first line is its own record: each such job once, and only the jobs squeue named, all
    through one scontrol process (`Slurm.jobs_alone`) within `ALONE_SECONDS`, the rest
    one entry a node, logged once (a fixed cap of ten left every job past the tenth one
    entry a node, which any user's job name could make of a site's all; a process a job
    let one user's held job names cost a process a running job of the site, over a
    minute for 10,000, under the lock ResumeProgram waits on). The
    nodes expanded are at most as many as squeue named, over the run. A job left out, or
    whose allocation does not read, is one entry a node (`running_jobs`); a scontrol that
    fails leaves them all so, in one log line: which jobs hold a node is squeue's, and the
    cpus are not worth a run with no decision."""
    try:
        text = ctx.slurm.run("scontrol", "-a", "-o", "-d", "show", "job")
    except SlurmError as exc:
        log.warning("periodic: the jobs' cpus on their nodes not read (%s); each job is one "
                    "entry on each of its nodes", exc)
        return {}
    records: dict[str, list[str]] = {}
    for line in text.split("\n"):
        job_id = _identity(line)
        if job_id is not None and job_id in nodes_of:
            records.setdefault(job_id, []).append(line.rstrip("\r"))
    twice = [j for j, lines in records.items() if len(lines) > 1]  # (in nodes_of)
    if twice:
        try:
            alone, late = ctx.slurm.jobs_alone(twice, ALONE_SECONDS)
        except SlurmError as exc:
            alone, late = {}, []
            log.warning("periodic: %d jobs read twice not asked for alone (%s); each is one "
                        "entry on each of its nodes", len(twice), exc)
        if late:
            log.warning("periodic: %d of the %d jobs read twice not answered alone within "
                        "%g s (%s first); each is one entry on each of its nodes", len(late),
                        len(twice), ALONE_SECONDS, late[0])
        for job_id, first in alone.items():
            if _identity(first) == job_id:
                records[job_id] = [first]
    out: dict[tuple[str, str], list[int]] = {}
    budget = sum(len(nodes) for nodes in nodes_of.values())
    for job_id, lines in records.items():
        fields = parse_line(lines[0]) if len(lines) == 1 else {}
        if not fields or fields.get("_twice"):
            continue
        found = {}
        try:
            for alloc in fields.get("_alloc") or ():
                ids = cpu_id_list(str(alloc.get("CPU_IDs") or ""), MAX_CPU_IDS)
                nodes = str(alloc.get("Nodes") or "")
                names = expand_hostlist(nodes, budget)
                if names is None:  # (a form only Slurm expands)
                    names = _hostlist(ctx, nodes)
                budget -= len(names)
                if budget < 0:
                    raise SlurmError(f"more nodes than squeue named ({nodes[:40]!r})")
                found.update({(job_id, n): ids for n in names if n in nodes_of[job_id]})
        except (ValueError, SlurmError):
            continue
        out.update(found)
    return out


@contextmanager
def _locked(ctx: Context) -> Iterator[None]:
    """The power programs' lock, in their folder (``<state-dir>/power``, SlurmUser's: install
    makes it so). The folder follows `pbsplug.safedirs`' rule (another user could plant
    links to write through, or forge the records it acts on): `UnsafeFolder`, one line
    naming it, its owner and mode, and the program exits 1 with it. The lock is its
    owner's alone (0600): one another user could open, they could hold."""
    what = _folder_name(ctx)
    try:
        folder = safedirs.ensure_folder(ctx.power_dir, what)
    except safedirs.UnsafeFolder as exc:
        raise _as_slurm_user(ctx.power_dir, exc, what) from None
    except PermissionError as exc:
        if os.geteuid() == 0:
            raise
        raise OSError(f"{what} {ctx.power_dir} is missing and uid {os.geteuid()} "
                      f"cannot make it ({exc.strerror}): run 'pbsplug slurm install' as root "
                      "on this host (the controller), which makes it SlurmUser's") from None
    fd = safedirs.open_file(folder / "power.lock", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.fchmod(fd, 0o600)  # one an earlier pbsplug made 0644
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _as_slurm_user(folder: Path, exc: safedirs.UnsafeFolder,
                   what: str = POWER_FOLDER) -> safedirs.UnsafeFolder:
    """`exc`, or for a root run that met a state folder of another user's (with the folders
    above it root's), what to do: that is SlurmUser's folder (install makes it so when
    SlurmUser is not root, since its power programs write there), and making it root's
    would stop them; the run belongs to SlurmUser."""
    try:
        info = os.lstat(folder)
    except OSError:
        return exc
    if os.geteuid() != 0 or info.st_uid == 0 or not stat.S_ISDIR(info.st_mode) \
            or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH) \
            or safedirs.folder_problem(folder.parent):
        return exc
    try:
        user = pwd.getpwuid(info.st_uid).pw_name
        how = f" (e.g. 'runuser -u {user} -- pbsplug slurm periodic')"
    except KeyError:
        user, how = f"uid {info.st_uid}", ""
    return safedirs.UnsafeFolder(
        f"refusing {what} {folder} to root: it is {user}'s (uid {info.st_uid}, "
        f"mode {stat.S_IMODE(info.st_mode):04o}), as SlurmUser's power programs write "
        f"there; run 'pbsplug slurm install' again (it records SlurmUser, and a root run "
        f"then acts as SlurmUser), or run this as SlurmUser{how}, not as root, and leave "
        "the folder as it is", exc.problem)


def _off_record(ctx: Context) -> dict[str, int]:
    return _read_record(ctx, OFF_RECORD)


def _save_off(ctx: Context, record: Mapping[str, int]) -> None:
    _save_record(ctx, OFF_RECORD, record)


def _woken_record(ctx: Context) -> dict[str, int]:
    return _read_record(ctx, WOKEN_RECORD)


def _read_record(ctx: Context, name: str) -> dict[str, int]:
    """The record's hosts and times; a damaged one (not JSON, not a table, a time that is
    no number a long holds) is logged and read as empty, so power saving goes on (the next
    save writes it whole again). One that is a link, or that another user could have
    written, is `UnsafeFolder`."""
    path = ctx.power_dir / name
    try:
        data = jsontext.loads(safedirs.read_text(path), "the record", expect=dict)
    except FileNotFoundError:
        return {}
    except safedirs.UnsafeFolder:
        raise  # a link, or a file another user could have written: not acted on
    except (OSError, ValueError) as exc:  # (jsontext.JsonError: nested too deeply, ...)
        log.error("%s: not read (%s); starting from an empty record", path, exc)
        return {}
    # (a bound, not math.isfinite: an int of 400 digits was its OverflowError, a traceback)
    if not isinstance(data, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool)
            and -LONG_MAX <= v <= LONG_MAX for v in data.values()):
        log.error("%s: not a record of host -> time; starting from an empty record", path)
        return {}
    return {str(k): int(v) for k, v in data.items()}


def _save_record(ctx: Context, name: str, record: Mapping[str, int]) -> None:
    safedirs.write_text(ctx.power_dir / name, json.dumps(dict(record), sort_keys=True))


def _fire(ctx: Context, vnodes: Mapping[str, Any], jobs: Mapping[str, Any] | None = None,
          resvs: Mapping[str, Any] | None = None) -> Outcome:
    event = Event.from_dict("periodic", {"vnode_list": dict(vnodes),
                                         "resv_list": dict(resvs or {}),
                                         "job_list": dict(jobs or {})})
    out = ctx.runner.fire(event)
    if not out.accepted:
        (log.warning if out.kind == "reject" else log.error)(
            "periodic %s by '%s': %s", out.kind, out.hook, out.detail)
    return out


def _slept(out: Outcome, names: Iterable[str]) -> list[str]:
    """The vnodes the hooks put to sleep."""
    if out.kind not in (ACCEPT, "reject"):
        return []
    changes = out.changes.get("vnode_list") or {}
    return [n for n in names if "sleep" in str((changes.get(n) or {}).get("state", ""))]


def periodic(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    """One run of the server periodic event (``pbsplug slurm periodic``)."""
    with _locked(ctx):
        config = ctx.slurm.run("scontrol", "show", "config")
        refuse_hidden_jobs(ctx, config, os.geteuid())
        keep_up = excluded(ctx, config)
        record = _off_record(ctx)
        nodes = slurm_nodes(ctx)
        keep_up |= excluded_by_state(ctx, config, nodes)
        vnodes = {}
        asleep = []
        for node in nodes:
            flags = set(node.get("state_flags") or ())
            if "POWERING_DOWN" in flags:
                continue  # on its way down: neither awake nor wakeable yet
            name = str(node["name"])
            vnodes[name] = vnode(node, name not in keep_up, record.get(name, 0))
            if flags & {"POWERED_DOWN", "POWERING_UP"}:
                asleep.append(name)  # in state sleep: the plugin may wake it ahead of a need
        # (hookspecs.periodic: a vnode's jobs, and pbsplug's suspended_jobs)
        for key, on_node in (("suspended_jobs", suspended_jobs(ctx)), ("jobs", running_jobs(ctx))):
            for name, job_ids in on_node.items():
                if name in vnodes:
                    vnodes[name][key] = job_ids
        out = _fire(ctx, vnodes, pending_jobs(ctx), reservations(ctx))
        down = _slept(out, [n for n in vnodes if n not in asleep])
        up = _woke(out, asleep)
        now = int(time.time())
        for name in down:
            record[name] = now
        woken = _woken_record(ctx)
        for name in up:
            # Up and ready as its driver says: its slurmd registers by itself (Slurm 22.05
            # clears POWERED_DOWN then), and a ResumeProgram for it does not wake it again.
            record.pop(name, None)
            woken[name] = now
            log.info("node %s powered on by the plugins' decision ahead of a need; its slurmd "
                     "registers with Slurm", name)
        _save_off(ctx, record)
        _save_record(ctx, WOKEN_RECORD, woken)
        for name in down:
            ctx.slurm.update(f"nodename={name}", "state=power_down",
                             "reason=powered off by pbsplug's periodic decision")
            log.info("node %s powered off by the plugins' decision; Slurm told", name)
    return {"exit": 0, "stdout": "".join([f"powered off: {n}\n" for n in down]
                                         + [f"awake again: {n}\n" for n in up]),
            "error": ""}


def _without_suspended(hosts: list[str], suspended: Mapping[str, list[str]]) -> list[str]:
    """`hosts` but those holding a suspended job (`suspended_jobs`), each of which is kept
    up in a log line naming it and its jobs (the first `LOGGED_LEFT_OUT`, then one line
    counting the rest). Slurm shows a node whose only job is suspended IDLE, so its
    SuspendProgram may be asked to power it off (an admin's ``state=power_down``); the job's
    resume needs the node. Refused here, not left to the plugins' decision, whose driver
    would power off whatever a plugin that does not read ``suspended_jobs`` let go."""
    kept = _LeftOut("SuspendProgram", "node", rest="with suspended jobs kept up")
    out = []
    for host in hosts:
        job_ids = suspended.get(host)
        if not job_ids:
            out.append(host)
            continue
        named = ", ".join(job_ids[:NAMED_JOBS]) + (
            f" and {len(job_ids) - NAMED_JOBS} more" if len(job_ids) > NAMED_JOBS else "")
        kept.log("SuspendProgram %s: kept up: it has %s (%s), not idle (the resume needs "
                 "it); Slurm now counts it as powered down (docs/slurm.md)", host,
                 "a suspended job" if len(job_ids) == 1 else "suspended jobs", named)
    kept.done()
    return out


def suspend(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    hosts = _hostlist(ctx, argv[0] if argv else "")
    with _locked(ctx):
        record = _off_record(ctx)
        done = [h for h in hosts if h in record]
        todo = [h for h in hosts if h not in record]
        if done:
            log.info("SuspendProgram %s: already powered off by pbsplug", compress_hostlist(done))
        if todo:
            try:  # (no decision without the jobs: the nodes stay up)
                suspended = suspended_jobs(ctx)
                jobs = pending_jobs(ctx)
            except SlurmError as exc:
                raise SlurmError(f"SuspendProgram {compress_hostlist(todo)}: kept up, but "
                                 f"Slurm now counts them as powered down: {exc}") from None
            todo = _without_suspended(todo, suspended)
        if todo:
            nodes = {str(n["name"]): n for n in slurm_nodes(ctx)}
            vnodes = {h: {**vnode(nodes.get(h) or _node({"name": h}), True, 0), "state": "free",
                          "last_used_time": 0} for h in todo}
            out = _fire(ctx, vnodes, jobs, reservations(ctx))
            down = _slept(out, todo)
            refused = sorted(set(todo) - set(down))
            if refused:
                log.warning("SuspendProgram %s: the plugins' decision keeps them up, but Slurm "
                            "now counts them as powered down (docs/slurm.md)",
                            compress_hostlist(refused))
            now = int(time.time())
            for h in down:
                record[h] = now
        _save_off(ctx, record)
    return {"exit": 0, "stdout": "", "error": ""}


def _resume_jobs(env: Mapping[str, str], hosts: list[str], ctx: Context) -> dict[str, Any]:
    """What wants the nodes now: the jobs of SLURM_RESUME_FILE (Slurm built with JSON-C
    writes it), each wanting the nodes Slurm resumes for it, and one need for the hosts no
    job there names (all of them without the file). Slurm's argument names every node it
    resumes, those of an admin's ``state=power_up`` too, which no job lists.

    The file is ``{"jobs": [{"job_id": 123, "nodes": "n[1-3]"}, ...]}``: 22.05 names a
    job's nodes ``nodes``, 23.02 and later ``nodes_resume`` (and adds ``nodes_alloc``, the
    job's whole allocation, some of it up already). Each job is read on its own: one in no
    such shape is one log line (the file, its index, what was wrong), its hosts wake for the
    one need, and the jobs after it are read (one that was no object dropped them all)."""
    now = int(time.time())
    jobs: dict[str, Any] = {}
    path = env.get("SLURM_RESUME_FILE")
    data: Any = None
    read = False
    try:
        data = jsontext.loads(Path(env["SLURM_RESUME_FILE"]).read_text(), "its text")
        read = True
    except KeyError:
        pass  # Slurm built without JSON-C writes none, and a run by hand has none
    except (OSError, ValueError) as exc:
        log.warning("resume: SLURM_RESUME_FILE %s not read (%s); the hosts wake for one "
                    "need", path, exc)
    items = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(items, list):
        if read:  # (its kind, not its text: the log may be read more widely)
            what = (f"it is a JSON {jsontext.kind(data)}" if not isinstance(data, dict)
                    else "no 'jobs' in it" if "jobs" not in data
                    else f"its jobs are a JSON {jsontext.kind(items)}")
            log.warning("resume: SLURM_RESUME_FILE %s has no list of jobs (%s); the hosts "
                        "wake for one need", path, what)
        items = []
    named: set[str] = set()
    wanted: dict[str, list[str]] = {}
    left_out = _LeftOut(f"resume: SLURM_RESUME_FILE {path}", "job")
    wanting = _LeftOut(f"resume: SLURM_RESUME_FILE {path}", "job", logging.INFO,
                       "with hosts to wake")
    for index, job in enumerate(items):
        names = _resume_job(ctx, job)
        if isinstance(names, str):
            left_out.log("resume: SLURM_RESUME_FILE %s: job %d left out: %s", path, index,
                         names)
            continue
        names = [n for n in names if n in hosts]
        if names:
            job_id = str(job["job_id"])
            wanting.log("resume: job %s wants %s (SLURM_RESUME_FILE)", job_id,
                        compress_hostlist(names))
            # (a job named twice wants the nodes of both: the second replaced the first's,
            # which were counted as named and so had no need)
            known = wanted.setdefault(job_id, [])
            names = known + [n for n in names if n not in known]
            wanted[job_id] = names
            named.update(names)
            jobs[job_id] = {"id": job_id, "job_state": "Q", "estimated": {
                "start_time": now, "exec_vnode": "+".join(f"({n}:ncpus=1)"
                                                          for n in names)}}
    left_out.done()
    wanting.done()
    rest = [h for h in hosts if h not in named]
    if rest:
        jobs["slurm-resume"] = {"id": "slurm-resume", "job_state": "Q", "estimated": {
            "start_time": now, "exec_vnode": "+".join(f"({n}:ncpus=1)" for n in rest)}}
    return jobs


def _resume_job(ctx: Context, job: Any) -> list[str] | str:
    """One job of SLURM_RESUME_FILE: the nodes Slurm resumes for it, or what is wrong."""
    if not isinstance(job, dict):
        return f"a JSON {jsontext.kind(job)}, not an object"
    job_id = job.get("job_id")
    if isinstance(job_id, bool) or not isinstance(job_id, int) or not 0 < job_id < 1 << 32:
        return f"job_id {quoted(job_id, 60)} is not a job id"
    key = "nodes_resume" if "nodes_resume" in job else "nodes"
    nodes = job.get(key)
    if not isinstance(nodes, str):
        return f"job {job_id}: {key} {quoted(nodes, 60)} is not a hostlist"
    try:
        return _hostlist(ctx, nodes)
    except SlurmError as exc:
        return f"job {job_id}: {exc}"


def _woke(out: Outcome | None, names: Iterable[str]) -> list[str]:
    """The vnodes the hooks took out of sleep (their driver says the host is up)."""
    if out is None or out.kind not in (ACCEPT, "reject"):
        return []
    changes = out.changes.get("vnode_list") or {}
    return [n for n in names if "state" in (changes.get(n) or {})
            and "sleep" not in str(changes[n]["state"])]


def _powering(node: Mapping[str, Any] | None) -> bool:
    flags = set((node or {}).get("state_flags") or ())
    return bool(flags & {"POWERED_DOWN", "POWERING_UP"})


def _resume_nodes(ctx: Context, hosts: list[str], logged: bool
                  ) -> dict[str, dict[str, Any]] | None:
    """ResumeProgram's view of Slurm's nodes by name, or None when sinfo gave no node read
    (it failed, or answered in no shape pbsplug reads), logged unless `logged` (once a
    run): every host Slurm named is then woken as one sinfo does not list. Slurm's argument
    is its decision, and a job waits on it; raising here woke none, and Slurm marked them
    DOWN after ResumeTimeout and requeued the job."""
    try:
        return {str(n["name"]): n for n in slurm_nodes(ctx)}
    except (SlurmError, ValueError) as exc:
        if not logged:
            log.warning("ResumeProgram %s: Slurm's nodes not read (%s); each is woken as "
                        "Slurm asks", compress_hostlist(hosts), exc)
        return None


def resume(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    hosts = _hostlist(ctx, argv[0] if argv else "")
    if not hosts:
        return {"exit": 0, "stdout": "", "error": ""}
    jobs = _resume_jobs(env, hosts, ctx)
    resume_timeout = _resume_timeout(ctx)
    deadline = time.monotonic() + max(5.0, resume_timeout / 2)
    unread = False
    while True:
        with _locked(ctx):
            record = _off_record(ctx)
            woken = _woken_record(ctx)
            now = int(time.time())
            read = _resume_nodes(ctx, hosts, unread)
            unread = unread or read is None
            nodes = read or {}
            # A host the plugins found up (it has not registered with Slurm yet), in this
            # run or an earlier one (ResumeProgram again after a restart), is not woken again;
            # one still booting is the plugin's own record's to keep.
            # A host sinfo does not list (a powered-down CLOUD node, a hidden partition's)
            # is one Slurm named to wake: it waits too.
            waiting = [h for h in hosts if (h not in nodes or _powering(nodes[h]))
                       and now - woken.get(h, 0) > resume_timeout]
            vnodes = {h: {**vnode(nodes.get(h) or _node({"name": h}), False, record.get(h, 0)),
                          "state": "sleep"} for h in waiting}
            out = _fire(ctx, vnodes, jobs) if vnodes else None
            for h in _woke(out, waiting):
                woken[h] = now
            for h in hosts:
                record.pop(h, None)
            _save_off(ctx, record)
            _save_record(ctx, WOKEN_RECORD, woken)
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(2.0)
    return {"exit": 0, "stdout": "", "error": ""}


def _resume_timeout(ctx: Context) -> int:
    """Slurm's ResumeTimeout (``90 sec``) in seconds; 60 when it is not a number of them
    (int() of 5000 digits was its ValueError, and one of 4000 an OverflowError halved:
    the nodes were not woken)."""
    text = config_value(ctx, "ResumeTimeout") or "60"
    match = re.match(r"[0-9]+", text)
    seconds = whole(match.group(), LONG_MAX) if match else None
    if seconds is None:
        log.warning("ResumeTimeout %s: not a number of seconds; 60 s taken", quoted(text, 40))
    return 60 if seconds is None else seconds


def resume_fail(ctx: Context, env: Mapping[str, str], argv: list[str]) -> dict[str, Any]:
    log.error("ResumeFailProgram: %s did not come up within ResumeTimeout (Slurm marks them "
              "DOWN)", argv[0] if argv else "?")
    return {"exit": 0, "stdout": "", "error": ""}
