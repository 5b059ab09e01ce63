"""What Slurm says about jobs, nodes and reservations, as the plain data pbsplug's objects hold.

Slurm is asked through its own commands, never a library bound to one Slurm version:

- one job, or a few nodes: ``scontrol -o show job -d ID`` / ``scontrol -o show node NAMES``,
  one ``Key=Value`` line each. Slurm 22.05's scontrol has no ``--json``, and its ``squeue
  --json`` and ``sinfo --json`` ignore their filters (``-j``, ``-n``) and list the whole
  cluster, too much for a Prolog that runs for every job;
- the whole cluster (the power programs): ``sinfo --json`` and ``squeue --json``
  (openapi v0.0.38 in 22.05), and ``scontrol -o show reservation`` (no JSON in 22.05);
- hostlists: ``scontrol show hostnames``.

Every value read is checked; what does not parse is a `SlurmError` naming the command, the
key and the value.
"""

from __future__ import annotations

import json
import logging
import math
import pwd
import re
import secrets
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Any

from .. import jsontext
from ..values import LONG_MAX, cut, digits, past, quoted, whole

log = logging.getLogger("pbsplug.slurm")

#: How long a Slurm command may take.
TIMEOUT = 30.0
# Every pattern is compiled at import: the worker's forked child, which parses a reading,
# would otherwise compile each of them again on every event (a few milliseconds in all).
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_/:]*=")
_HOSTLIST_MARK = re.compile(r"[\[\],]")
_HOSTNAME = re.compile(r"[A-Za-z0-9_.-]+")
#: ``2026-11-24T02:25:13``, as loosely as ``time.strptime`` with ``%Y-%m-%dT%H:%M:%S``
#: takes it (one or two digits past the year).
_TIME = re.compile(r"(\d{4})-(\d{1,2})-(\d{1,2})T(\d{1,2}):(\d{1,2}):(\d{1,2})")
#: Slurm's ``[D-]HH:MM:SS``: at most 10 digits a part (its limits are 32-bit minutes), so
#: that no part is past what int() reads or a long holds.
_DURATION = re.compile(r"(?:([0-9]{1,10})-)?(?:([0-9]{1,10}):)?([0-9]{1,10}):([0-9]{1,10})")
_SIZE = re.compile(r"(\d{1,18}(?:\.\d{1,6})?)([KMGTP]?)")
_NAME_ID = re.compile(r"([^()]*)\([0-9]+\)")
_STATE_WORDS = re.compile(r"[+ ,]")
#: Slurm's job states as PBS's letters.
JOB_STATES = {"PENDING": "Q", "CONFIGURING": "R", "RUNNING": "R", "COMPLETING": "E",
              "SUSPENDED": "S", "REQUEUED": "Q", "REQUEUE_HOLD": "H", "REQUEUE_FED": "Q",
              "RESV_DEL_HOLD": "H", "SPECIAL_EXIT": "H", "STOPPED": "S", "SIGNALING": "R",
              "STAGE_OUT": "E", "RESIZING": "R"}


class SlurmError(RuntimeError):
    """A Slurm command failed or answered something that does not parse."""


def passwd_entry(name: str) -> pwd.struct_passwd | None:
    """The passwd entry of SlurmUser `name` (a user name, or a uid: slurm.conf takes
    either), or None when this host has no such user. Install and the programs both look
    it up here, as Slurm does: the user of that name first, then a uid when the name is a
    number (ASCII digits, as C's strtol reads them: spaces and a sign before them) a
    uid_t holds. A uid was looked up first: a user whose name is digits ('1000') was taken
    for the user of uid 1000, not the one slurmctld runs as. '²' is a digit to
    str.isdigit, and int() refused it (a ValueError); a name getpwnam refuses (a NUL in
    it) is no user."""
    try:
        return pwd.getpwnam(name)
    except (KeyError, ValueError):
        pass
    if not _UID.fullmatch(name):
        return None
    uid = int(name)
    try:
        return pwd.getpwuid(uid) if 0 <= uid <= 0xFFFFFFFF else None
    except (KeyError, OverflowError):
        return None


#: A uid as Slurm's uid_from_string reads a SlurmUser that names no user (strtol).
_UID = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+", re.ASCII)


class JobTextError(SlurmError):
    """A job's reading refused because text its owner wrote (a name, a comment, a path)
    may have been read as Slurm's keys or records: the job's doing, not the node's or the
    controller's."""


class UnnamedJobError(SlurmError):
    """A job not acted on because the name that acts on it alone was not read
    (`Slurm.alone`): its bare id may name every task of an array. Not a reason to cancel
    a job that could not be requeued."""


class Slurm:
    """Slurm's commands at absolute paths (Slurm's scripts get no PATH), with ``SLURM_CONF``
    when the install named one."""

    def __init__(self, bin_dir: str = "/usr/bin", slurm_conf: str = "",
                 env: Mapping[str, str] | None = None):
        self.bin_dir = bin_dir.rstrip("/") or "/usr/bin"
        self.env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        if env:
            self.env.update({k: v for k, v in env.items() if k.startswith("MUNGE")})
        if slurm_conf:
            self.env["SLURM_CONF"] = slurm_conf

    def run(self, command: str, *args: str, check: bool = True) -> str:
        argv = [f"{self.bin_dir}/{command}", *args]
        shown = " ".join(argv)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT,
                                  env=self.env, stdin=subprocess.DEVNULL,
                                  encoding="utf-8", errors="replace")
        except FileNotFoundError:
            raise SlurmError(f"{argv[0]} does not exist (is Slurm's client installed? "
                             "'pbsplug slurm install --bin-dir' names its folder)") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"{shown}: no answer within {TIMEOUT:g} s") from None
        if check and done.returncode != 0:
            why = " ".join((done.stderr or done.stdout).split())[:300] or "no output"
            raise SlurmError(f"{shown}: exit status {done.returncode}: {why}")
        return done.stdout

    def hostnames(self, hostlist: str) -> list[str]:
        if not hostlist or hostlist in ("(null)", "None"):
            return []
        simple = expand_hostlist(hostlist)
        if simple is not None:
            return simple
        return self.run("scontrol", "show", "hostnames", hostlist).split()

    def job(self, job_id: str) -> dict[str, Any]:
        """The job's attributes as PBS names them (`job_attributes`)."""
        checked_job_id(job_id)
        text = self.run("scontrol", "-o", "-d", "show", "job", job_id)
        lines = _records(text)
        own = _own_record(lines, job_id) if len(lines) > 1 else None
        alone = _asked_alone(own, job_id) if own is not None else None
        if alone is not None:
            lines = _records(self.run("scontrol", "-o", "-d", "show", "job", alone))
        if len(lines) > 1:
            raise JobTextError(_SPLIT.format(job_id=job_id))
        if not lines or not lines[0].startswith("JobId="):  # (not the job's text: Slurm's)
            raise SlurmError(f"scontrol show job {job_id}: no job in its answer")
        return job_attributes(parse_line(lines[0]), self)

    def job_and_nodes(self, job_id: str, names: Sequence[str]
                      ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """The job and the nodes from one scontrol process (its commands on stdin): what
        a Prolog or Epilog needs, at the cost of one process rather than two."""
        checked_job_id(job_id)
        for name in names:  # each goes into scontrol's input: one line, one name
            if not NODE_NAME.fullmatch(name):
                raise SlurmError(f"node name {name[:80]!r}: expected a host name")
        job, nodes, lines = self._job_and_nodes(job_id, job_id, names)
        own = _own_record(lines, job_id) if len(lines) > 1 else None
        alone = _asked_alone(own, job_id) if own is not None else None
        if alone is not None:
            job, nodes, lines = self._job_and_nodes(job_id, alone, names)
        if len(lines) > 1:
            raise JobTextError(_SPLIT.format(job_id=job_id))
        return job, nodes

    def _job_and_nodes(self, job_id: str, asked: str, names: Sequence[str]
                       ) -> tuple[dict[str, Any], dict[str, dict[str, Any]], list[str]]:
        """`job_and_nodes`' one scontrol, for `asked` (the job, or the form that asks for
        it alone, `_asked_alone`): the job, the nodes and the answer's job lines (one,
        unless a line break in the job's text or the job's other parts)."""
        commands = f"show job {asked}\n" + (f"show node {','.join(names)}\n" if names
                                             else "")
        argv = [f"{self.bin_dir}/scontrol", "-o", "-d"]
        try:
            done = subprocess.run(argv, input=commands, capture_output=True, text=True,
                                  timeout=TIMEOUT, env=self.env, encoding="utf-8",
                                  errors="replace")
        except FileNotFoundError:
            raise SlurmError(f"{argv[0]} does not exist (is Slurm's client installed? "
                             "'pbsplug slurm install --bin-dir' names its folder)") from None
        except subprocess.TimeoutExpired:
            raise SlurmError(f"scontrol show job {job_id}: no answer within {TIMEOUT:g} s"
                             ) from None
        nodes = {}
        # scontrol echoes each command it reads ("scontrol: show job 3"); exactly those
        # lines are not records.
        echoes = {f"scontrol: {c}".rstrip() for c in commands.splitlines()} | {"scontrol:"}
        lines = [line for line in _records(done.stdout)
                 if line.rstrip() not in echoes]
        jobs = [line for line in lines if line.startswith("JobId=")]
        if not jobs:
            why = " ".join(done.stderr.split())[:300] or "no answer"
            raise SlurmError(f"scontrol show job {job_id}: {why}")
        if len(jobs) > 1:
            return {}, {}, jobs  # (a split job's text, or a heterogeneous job's parts)
        if len(lines) > 1 + len(names):
            raise JobTextError(_SPLIT.format(job_id=job_id))
        for line in lines:
            if line.startswith("NodeName="):
                fields = parse_line(line)
                nodes[fields.get("NodeName", "")] = vnode_attributes(fields)
            elif not line.startswith("JobId="):
                raise JobTextError(_SPLIT.format(job_id=job_id))
        return job_attributes(parse_line(jobs[0]), self), nodes, jobs

    def nodes(self, names: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The nodes' attributes as PBS's vnodes (`vnode_attributes`), by name."""
        if not names:
            return {}
        text = self.run("scontrol", "-o", "show", "node", ",".join(names))
        out = {}
        for line in text.splitlines():
            if line.strip():
                fields = parse_line(line)
                out[fields.get("NodeName", "")] = vnode_attributes(fields)
        return out

    def update(self, *args: str) -> None:
        """``scontrol update ARGS``; a job's (``jobid=<id>`` first) by its `alone` form."""
        if args and args[0].startswith("jobid="):
            args = (f"jobid={self.alone(args[0][6:])}", *args[1:])
        self.run("scontrol", "update", *args)

    def requeue(self, job_id: str) -> None:
        """``scontrol requeue``; a heterogeneous job's part: the whole heterogeneous job
        (`_het_whole`)."""
        self.run("scontrol", "requeue", _het_whole(self.alone(job_id)))

    def requeue_hold(self, job_id: str) -> None:
        self.run("scontrol", "requeuehold", _het_whole(self.alone(job_id)))

    def cancel(self, job_id: str) -> None:
        """``scancel``; a heterogeneous job's part 1 or later alone (``7+1``), its part 0
        with the whole heterogeneous job (`_het_whole`)."""
        name = self.alone(job_id)
        self.run("scancel", _het_whole(name) if name.endswith("+0") else name)

    def job_state(self, job_id: str) -> str:
        """Slurm's state of job `job_id` now (``JobState`` of its own record, `_own_record`:
        ``RUNNING``, ``PENDING``, ``CANCELLED``...), ``GONE`` when Slurm no longer knows
        the id (22.05: ``Invalid job id specified``, an ended job purged). `SlurmError`
        when it cannot be told: scontrol failed, or the record is not the id's, or holds
        ``JobState`` twice (a job's text)."""
        checked_job_id(job_id)
        try:
            text = self.run("scontrol", "-o", "show", "job", job_id)
        except SlurmError as exc:
            if "Invalid job id specified" in str(exc):
                return "GONE"
            raise
        own = _own_record(_records(text), job_id)
        fields = parse_line(own) if own is not None else {}
        state = str(fields.get("JobState") or "")
        if "JobState" in fields.get("_twice", ()) or not re.fullmatch(r"[A-Z_]+", state):
            raise SlurmError(f"scontrol show job {job_id}: its state was not read")
        return state

    def alone(self, job_id: str) -> str:
        """The name Slurm's commands act on `job_id` alone by: the id an array's last task
        to start keeps is the array's, and ``scancel``, ``scontrol requeue`` and ``update
        jobid=`` act on every task of the array by it (tried on 22.05: a hook's reject or
        delete of that task stopped them all, its comment set on all); ``<id>_<task>`` is
        that task alone (`_asked_alone`, from ``scontrol show job <id>``; the id itself
        when that names one job). A heterogeneous job's part is ``<het id>+<offset>``
        (`_het_part`): part 0 keeps the heterogeneous job's id, by which Slurm's commands
        act on every part (a comment set on part 0 went on all), and Slurm's documented
        name of one part is that one; what scancel and requeue can act on is
        `_het_whole`'s. A read that fails is
        `UnnamedJobError`, the action's one-line error: the bare id was taken, and a stop
        of that task acted on every task of its array, silently. So is an id whose record
        is an array's tasks not started yet (`_array_remainder`): no one job, and no event
        is for it (each task's events have its own id); the bare id acted on every task of
        the array, those running too, and ``<id>_[2-5]`` would stop tasks no hook judged.
        The id's record is the answer's first, as 22.05 writes it (`_own_record`); an
        answer whose first record is not the id's is refused: in another order the bare
        id was taken for the tasks not started yet, and a later line claiming the id can
        be a job's forgery. A task's name (``4_3``) already names that task alone and is
        given back as it is, unread (scontrol's answer to it is the record of ``JobId=<its
        own id>``, which is no record of ``4_3``)."""
        checked_job_id(job_id)
        if "_" in job_id:
            return job_id
        try:
            lines = _records(self.run("scontrol", "-o", "show", "job", job_id))
        except SlurmError as exc:
            raise UnnamedJobError(
                f"job {job_id}: not acted on: which job its id names was not read (its "
                f"id may name every task of an array): {exc}") from None
        own = _own_record(lines, job_id)
        if own is None:
            raise UnnamedJobError(
                f"job {job_id}: not acted on: the first record of scontrol's answer is not "
                "its id's (its id may name every task of an array)")
        tasks = _array_remainder(own, job_id)
        if tasks is not None:
            raise UnnamedJobError(
                f"job {job_id}: not acted on: its id names the tasks of its array not "
                f"started yet ({job_id}_[{tasks}]), not one job")
        part = _het_part(own, job_id)
        if part is not None:
            return f"{part[0]}+{part[1]}"
        form = _asked_alone(own, job_id) if len(lines) > 1 else None
        return form if form is not None and "_" in form else job_id

    def jobs_alone(self, job_ids: Sequence[str], seconds: float
                   ) -> tuple[dict[str, str], list[str]]:
        """Each job's own record (``scontrol -a -o -d show job <id>``'s first line, when it is
        the id's: `_own_record`) from ONE
        scontrol process, fed a ``show job <id>`` line a job on its input (a process a job
        took one second a hundred jobs, under the power programs' lock), and the jobs not
        answered within `seconds` (the process is then stopped). The answers are told apart
        by a line of random letters between them, which scontrol echoes (``scontrol:
        <line>``, and "invalid keyword" on stderr): no job's text can forge it, so no
        job's name can pass for the start of another's answer. A job Slurm does not know
        (it ended) or an answer without those echoes is in neither."""
        mark = f"pbsplug-{secrets.token_hex(16)}"
        commands = "".join(f"{mark}\nshow job {job_id}\n" for job_id in job_ids) + mark + "\n"
        argv = [f"{self.bin_dir}/scontrol", "-a", "-o", "-d"]
        late = False
        try:
            out = subprocess.run(argv, input=commands, capture_output=True, text=True,
                                 timeout=seconds, env=self.env, encoding="utf-8",
                                 errors="replace").stdout
        except FileNotFoundError:
            raise SlurmError(f"{argv[0]} does not exist (is Slurm's client installed? "
                             "'pbsplug slurm install --bin-dir' names its folder)") from None
        except subprocess.TimeoutExpired as exc:  # (what it wrote so far, undecoded)
            late, written = True, exc.stdout or b""
            out = (written.decode("utf-8", errors="replace") if isinstance(written, bytes)
                   else written)
        lines = _records(out)
        echo = f"scontrol: {mark}"
        marks = [i for i, line in enumerate(lines) if line.rstrip() == echo]
        found = {}
        for job_id, start, end in zip(job_ids, marks, marks[1:], strict=False):
            answer = [line for line in lines[start + 1:end]
                      if line.rstrip() != f"scontrol: show job {job_id}"]
            if (own := _own_record(answer, job_id)) is not None:
                found[job_id] = own
        unanswered = list(job_ids[max(len(marks) - 1, 0):]) if late else []
        return found, unanswered

    def cluster_json(self, command: str) -> dict[str, Any]:
        text = self.run(command, "--json")
        try:  # (nested 100,000 deep, say: json.loads' RecursionError went through)
            data: dict[str, Any] = jsontext.loads(text, f"{command} --json", expect=dict)
        except jsontext.JsonError as exc:
            if exc.why.startswith("a number of "):  # (where it is, too)
                raise SlurmError(_huge_number(command, text)) from None
            raise SlurmError(str(exc)) from None
        return data

    def reservations(self) -> list[dict[str, str]]:
        text = self.run("scontrol", "-o", "show", "reservation")
        return [parse_line(line) for line in text.splitlines()
                if line.strip() and "=" in line]


class _Huge(str):
    """A number of ``--json`` output too long to read, kept as its text (`_huge_number`)."""


def _huge_number(command: str, text: str) -> str:
    """The one line for ``command --json`` output holding a number of more digits than
    `jsontext.MAX_DIGITS` (int() refuses 4300 or more in Python's words): where the first
    one is (``nodes[2].cpus``) and its length. Slurm writes no such number: its counts and
    times are 64-bit."""
    def parse_int(number: str) -> int | _Huge:
        if len(number.lstrip("-")) > jsontext.MAX_DIGITS:
            return _Huge(number)
        return int(number)

    try:
        data = json.loads(text, parse_int=parse_int)
    except ValueError as exc:  # (past the number)
        return f"{command} --json: not JSON ({exc})"
    except RecursionError:
        return f"{command} --json: arrays or objects nested too deeply"
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:  # (depth first, in the output's order; no recursion: nesting may be deep)
        path, value = stack.pop()
        if isinstance(value, _Huge):
            size = len(value.lstrip("-"))
            return (f"{command} --json: {cut(path, 120) or 'its answer'} is a number of "
                    f"{size:,} digits: Slurm writes none (its counts and times are "
                    "64-bit): not read")
        if isinstance(value, dict):
            stack += [(_field_path(path, key), item) for key, item in reversed(value.items())]
        elif isinstance(value, list):
            stack += [(f"{path}[{i}]", item) for i, item in reversed(list(enumerate(value)))]
    return f"{command} --json: a number too long to read, which Slurm does not write: not read"


#: A JSON key an error names as it is (``nodes[2].cpus``); another is quoted, cut short.
_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,39}")


def _field_path(path: str, key: str) -> str:
    if _FIELD.fullmatch(key):
        return f"{path}.{key}" if path else key
    return f"{path}[{quoted(key, 40)}]"


_RANGE = re.compile(r"([A-Za-z0-9_.-]*)\[([0-9,-]+)\]([A-Za-z0-9_.-]*)")


#: The most hosts a hostlist expands to here (a typo's billion-host range is an error).
MAX_HOSTS = 1_000_000


#: A reading that holds more than one job and its nodes: some free text broke a line.
_SPLIT = ("scontrol show job {job_id}: its answer has more lines than the job and its nodes "
          "(a job name, comment or path with a line break): not read")


#: What 22.05 writes after an array task's ``ArrayTaskId=`` when its array has a limit of
#: tasks running at once (``sbatch --array=1-3%3``: ``JobId=1 ArrayJobId=1 ArrayTaskId=3
#: ArrayTaskThrottle=3 JobName=``; seen on the real cluster), and nothing otherwise.
ARRAY_THROTTLE = "(?: ArrayTaskThrottle=[0-9]+)?"


def _asked_alone(line: str, job_id: str) -> str | None:
    """How to ask scontrol for `job_id`'s record alone when its answer to ``show job
    <job_id>`` starts with `line` and holds more records, or None. 22.05 answers the id
    of a heterogeneous job's part 0 with every part, a record each (``JobId=7 HetJobId=7
    HetJobOffset=0 JobName=``, then ``JobId=8 HetJobId=7 ...``), and the id an array's
    last task to start keeps (the array's) with every task of the array (``JobId=4
    ArrayJobId=4 ArrayTaskId=3 JobName=``, then ``JobId=5 ArrayJobId=4 ...`` and the
    pending tasks' ``ArrayTaskId=4-9``); ``7+0`` and ``4_3`` answer that job alone. The
    fields before JobName are Slurm's: no job's text comes before them (an array with a
    limit of tasks at once, ``--array=1-3%3``, adds ``ArrayTaskThrottle=3``: `ARRAY_THROTTLE`)."""
    own = re.escape(job_id)
    match = re.match(rf"JobId={own} (?:HetJobId={own} HetJobOffset=0|ArrayJobId={own} "
                     rf"ArrayTaskId=([0-9]+){ARRAY_THROTTLE}) JobName=", line)
    if match is None:
        return None
    return f"{job_id}+0" if match.group(1) is None else f"{job_id}_{match.group(1)}"


def _het_part(line: str, job_id: str) -> tuple[str, int] | None:
    """(the heterogeneous job's id, the part's offset) when Slurm's record `line` of job
    `job_id` is a part of a heterogeneous job (22.05: ``JobId=8 HetJobId=7 HetJobOffset=1
    JobName=``; part 0's ``JobId=7 HetJobId=7 HetJobOffset=0``), else None. The fields
    before JobName are Slurm's (`_asked_alone`)."""
    match = re.match(rf"JobId={re.escape(job_id)} HetJobId=([0-9]+) HetJobOffset=([0-9]+) "
                     "JobName=", line)
    if match is None:
        return None
    return match.group(1), int(match.group(2))


def _het_whole(name: str) -> str:
    """The name scancel and ``scontrol requeue`` act on for `name`, a job's `Slurm.alone`
    form: for a heterogeneous job's part (``7+1``), the heterogeneous job's id, by which
    they act on every part; any other name as it is. Slurm requeues a heterogeneous job
    only whole, by that id (its documentation: a part's requeue is an error), and
    cancels no part 0 alone (a cancel of part 0 is the whole job's)."""
    het_id, plus, _ = name.partition("+")
    return het_id if plus else name


def _own_record(lines: Sequence[str], job_id: str) -> str | None:
    """The record of `job_id` itself among scontrol's answer `lines` to ``show job
    <job_id>``: its first line when that is the id's (``JobId=<id> ``), else None. 22.05
    writes the id's own record first (for an array's id or a heterogeneous job's part 0,
    the other tasks' or parts' records after it), and the order is relied on: the first
    line is Slurm's, as every record starts with Slurm's fields, while any later line
    starting ``JobId=<id> `` may be a job's own text (a line break in its name or comment)
    forging a record, ``HetJobId=`` and all. One was taken when no first line was the id's:
    a forged ``HetJobId=999`` had the root adapter stop another user's job."""
    claim = f"JobId={job_id} "
    return lines[0] if lines and lines[0].startswith(claim) else None


def _array_remainder(line: str, job_id: str) -> str | None:
    """The tasks Slurm's record `line` of job `job_id` stands for when it is an array's
    tasks not started yet, split off from it one by one as each starts, or None. 22.05
    writes them as one pending record with the array's id and a task expression, not a
    task: ``JobId=1 ArrayJobId=1 ArrayTaskId=2-5%1 ArrayTaskThrottle=1 JobName=`` (with
    ``--array=1-5%1``, its first task running as job 2) or ``ArrayTaskId=1,3,7-9 JobName=``.
    The fields before JobName are Slurm's (`_asked_alone`). The tasks are given without
    the expression's throttle (``2-5``, not ``2-5%1``): no Slurm command takes ``%N`` in
    a list of tasks, so ``1_[2-5%1]`` named none that could be used."""
    own = re.escape(job_id)
    match = re.match(rf"JobId={own} ArrayJobId={own} ArrayTaskId=([^ ]+){ARRAY_THROTTLE} "
                     "JobName=", line)
    if match is None or re.fullmatch("[0-9]+", match.group(1)):
        return None
    return match.group(1).partition("%")[0]


def _records(text: str) -> list[str]:
    """scontrol -o's records, one per line (only a line feed ends one: the free text of a
    record may hold any other separator)."""
    return [line.rstrip("\r") for line in text.split("\n") if line.strip()]


def _hostlist_parts(text: str) -> list[str]:
    """`text` split at each comma outside brackets: one whose next bracket is ``]`` is
    inside. Read from the end, one pass; the pattern ``,(?![^[]*])`` looked ahead to the
    end from every comma (a list of 16,000 names took 4 s, of 32,000 16 s)."""
    cuts, inside = [], False
    for mark in reversed(list(_HOSTLIST_MARK.finditer(text))):
        char = mark.group()
        if char != ",":
            inside = char == "]"
        elif not inside:
            cuts.append(mark.start())
    edges = [-1, *reversed(cuts), len(text)]
    return [text[a + 1:b] for a, b in zip(edges[:-1], edges[1:], strict=True)]


def expand_hostlist(text: str, limit: int = MAX_HOSTS) -> list[str] | None:
    """``n1``, ``n[1-3,5]``, ``a1,b[2-3]`` expanded here (Slurm's own ``scontrol show
    hostnames`` costs a process); None for what this does not handle (several brackets in
    one name), which Slurm expands. More than `limit` hosts is `SlurmError`, raised
    before the range that passes it is expanded."""
    out: list[str] = []
    for part in _hostlist_parts(text):
        if not part:
            continue
        if "[" not in part:
            if not _HOSTNAME.fullmatch(part):
                return None
            out.append(part)
            continue
        match = _RANGE.fullmatch(part)
        if match is None:
            return None
        prefix, ranges, suffix = match.groups()
        for item in ranges.split(","):
            low_text, dash, high_text = item.partition("-")
            low, high = whole(low_text, LONG_MAX), whole(high_text or low_text, LONG_MAX)
            if low is None or high is None or (dash and not high_text) or high < low:
                huge = [t for t in (low_text, high_text) if digits(t) and past(t, LONG_MAX)]
                if huge:  # (no host number: Slurm's are 32-bit)
                    raise SlurmError(f"hostlist {text[:80]!r}: a host number of "
                                     f"{len(huge[0]):,} digits")
                return None  # Slurm's to expand, or to refuse (a range that runs backwards)
            width = len(low_text)
            if len(out) + high - low >= limit:
                raise SlurmError(f"hostlist {text[:80]!r}: over {limit:,} hosts")
            for number in range(low, high + 1):
                out.append(f"{prefix}{number:0{width}d}{suffix}")
    return out


_NUMBERED = re.compile(r"(.*?)([0-9]+)")


def compress_hostlist(names: Iterable[str]) -> str:
    """`names` as one Slurm hostlist (``n[1-3,7],login1``), for a log line: `expand_hostlist`
    reads it back to the same names, each once. Names that end in a number are grouped by
    what comes before it (each group where its first name is; its numbers by their length,
    then their value), and runs of numbers one after the other are ranges (``n[9-10]``,
    ``n[09-10]``); other names stay as they are."""
    groups: dict[tuple[str, bool], set[str]] = {}  # (a name alone is no group's prefix)
    for name in names:
        match = _NUMBERED.fullmatch(name)
        if match and match.group(1) and len(match.group(2)) <= 18:  # (no int() of 5000 digits)
            groups.setdefault((match.group(1), True), set()).add(match.group(2))
        else:
            groups.setdefault((name, False), set())
    out = []
    for (prefix, numbered), numbers in groups.items():
        if not numbered:
            out.append(prefix)
            continue
        ranges: list[tuple[str, str]] = []
        for text in sorted(numbers, key=lambda t: (len(t), int(t))):
            number = int(text)
            if ranges:
                low, high = ranges[-1]
                if number == int(high) + 1 and f"{number:0{len(low)}d}" == text:
                    ranges[-1] = (low, text)
                    continue
            ranges.append((text, text))
        items = [low if low == high else f"{low}-{high}" for low, high in ranges]
        out.append(f"{prefix}{items[0]}" if len(items) == 1 and "-" not in items[0]
                   else f"{prefix}[{','.join(items)}]")
    return ",".join(out)


#: A job id as the scripts' environment gives it (compiled at import: the worker's forked
#: child would otherwise compile it on every event).
_JOB_ID = re.compile(r"[0-9]+(_[0-9]+)?")


#: A node name, as checked where one goes into scontrol's input or a path.
NODE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")


def checked_job_id(value: Any) -> str:
    text = str(value or "")
    if not _JOB_ID.fullmatch(text):
        raise SlurmError(f"SLURM_JOB_ID={quoted(text, 60)}: expected a job number")
    return text


def parse_line(line: str) -> dict[str, Any]:
    """``scontrol -o`` output: ``Key=Value`` pairs separated by spaces, where a value may hold
    spaces (a job's name, a node's OS, a reason); a word without ``Key=`` continues the value
    before it. The job's ``-d`` allocation lines (``Nodes= CPU_IDs= Mem= GRES=``, once per
    node set) are collected under ``_alloc``.

    A value's words are gathered in a list and joined once: added to a string one by one,
    each word copied the value so far, and a comment of 200,000 one-letter words (which its
    owner sets) took 3 s of a Prolog."""
    words: dict[str, list[str]] = {}
    alloc: list[dict[str, list[str]]] = []
    twice: set[str] = set()
    key = None
    for word in line.split(" "):
        if not word:
            continue
        if _KEY.match(word):
            key, value = word.split("=", 1)
            # The allocation lines come after NodeList and before MinCPUsNode; a Nodes=
            # elsewhere is some free text's (a job name, a comment).
            if key == "Nodes" and "NodeList" in words and "MinCPUsNode" not in words:
                alloc.append({"Nodes": [value]})
                continue
            if alloc and key in ("CPU_IDs", "Mem", "GRES") and key not in alloc[-1] \
                    and "MinCPUsNode" not in words:
                alloc[-1][key] = [value]
                continue
            if key in words:
                twice.add(key)
            words[key] = [value]
        elif key is not None:
            if alloc and key in alloc[-1]:
                alloc[-1][key].append(word)
            else:
                words[key].append(word)
    out: dict[str, Any] = {k: " ".join(v) for k, v in words.items()}
    if alloc:
        out["_alloc"] = [{k: " ".join(v) for k, v in node.items()} for node in alloc]
    if twice:
        out["_twice"] = twice
    return out


def _null(value: Any) -> str | None:
    text = str(value) if value is not None else ""
    return None if text in ("", "(null)", "N/A", "None", "Unknown", "n/a") else text


def epoch(value: Any, what: str) -> int | None:
    """Slurm's ``2026-11-24T02:25:13`` (local time) as seconds since the epoch.

    Read here rather than by ``time.strptime``, which imports ``_strptime`` (with
    ``calendar``, ``datetime`` and ``locale``) and builds its patterns on its first call:
    about 4 ms in every worker child that reads a job. The rules are strptime's: one or two
    digits past the year; a month, day, hour, minute or second out of range (a 30 February,
    hour 24) is an error; seconds up to 61 are taken.

    A time at or before the epoch is refused too: Slurm writes a time of 0 as Unknown, and
    keeps none earlier. Year 0000 was read as 62 billion seconds before 1970.

    The local time is made seconds by the C library's ``mktime`` (its zone rules, daylight
    saving told as it tells it): on a 64-bit ``time_t`` any year to 9999; where ``time_t``
    is 32 bits, a time after 2038-01-19 03:14:07 UTC is that field's one-line error (it was
    mktime's OverflowError, which no caller reads as Slurm's answer). Reading it without
    mktime would need the zone's rules from elsewhere (zoneinfo, with datetime: the import
    this avoids)."""
    text = _null(value)
    if text is None:
        return None
    match = _TIME.fullmatch(text)
    if match:
        year, month, day, hour, minute, second = (int(g) for g in match.groups())
        if (1 <= month <= 12 and 1 <= day <= _month_days(year, month) and hour <= 23
                and minute <= 59 and second <= 61):
            if year >= 1970:
                try:
                    seconds = int(time.mktime((year, month, day, hour, minute, second, 0, 0,
                                               -1)))
                except (OverflowError, ValueError):  # (past a 32-bit time_t)
                    raise SlurmError(f"{what}={quoted(text, 60)}: past the latest time this "
                                     "host's C library converts (2038 where time_t is 32 "
                                     "bits)") from None
                if seconds > 0:
                    return seconds
            raise SlurmError(f"{what}={quoted(text, 60)}: not after the epoch (1970-01-01 UTC):"
                             " Slurm writes no such time")
    raise SlurmError(f"{what}={quoted(text, 60)}: expected a time as YYYY-MM-DDTHH:MM:SS")


def _month_days(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def duration(value: Any, what: str) -> int | None:
    """Slurm's ``[D-]HH:MM:SS`` (or MM:SS, or UNLIMITED) as seconds. Slurm writes minutes
    and seconds below 60, and hours below 24 where it writes days; anything else is not its
    writing and is refused."""
    text = _null(value)
    if text is None or text in ("UNLIMITED", "INFINITE", "Partition_Limit"):
        return None
    match = _DURATION.fullmatch(text)
    if match:
        days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
        if minutes < 60 and seconds < 60 and (match.group(1) is None or hours < 24):
            return ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    raise SlurmError(f"{what}={text[:40]!r}: expected [D-]HH:MM:SS")


_MB_PER_UNIT: dict[str, Fraction | int] = {"K": Fraction(1, 1024), "M": 1, "G": 1024,
                                            "T": 1024 ** 2, "P": 1024 ** 3}


def size_mb(value: Any, what: str) -> int | None:
    """``100M``, ``1.5G``, ``1000`` (MB) as MB, rounded up. A size Slurm would not write is an
    error: left out, a job's memory would go unlimited."""
    text = _null(value)
    if text is None:
        return None
    match = _SIZE.fullmatch(text)
    if not match:
        raise SlurmError(f"{what}={text[:40]!r}: expected a size as N[KMGTP]")
    return math.ceil(Fraction(match.group(1)) * _MB_PER_UNIT[match.group(2) or "M"])


def _cpu_ranges(cpu_ids: str) -> list[tuple[int, int]]:
    """``-d``'s ``CPU_IDs=0-3,8``: [(0, 3), (8, 8)]."""
    out = []
    for part in cpu_ids.split(","):
        low, dash, high = part.partition("-")
        first, last = whole(low, LONG_MAX), whole(high if dash else low, LONG_MAX)
        if first is None or last is None or first > last:
            raise SlurmError(f"CPU_IDs={cpu_ids[:40]!r}: expected cpu ids as N[-M][,...]")
        out.append((first, last))
    return out


def _count(cpu_ids: str) -> int:
    """The cpus in ``-d``'s ``CPU_IDs=0-3,8,10-11``: 7."""
    return sum(last - first + 1 for first, last in _cpu_ranges(cpu_ids))


def cpu_id_list(cpu_ids: str, limit: int) -> list[int]:
    """The cpus in ``-d``'s ``CPU_IDs=0-3,8``, each: [0, 1, 2, 3, 8]; more than `limit` of
    them is `SlurmError` (none is expanded)."""
    ranges = _cpu_ranges(cpu_ids)
    if sum(last - first + 1 for first, last in ranges) > limit:
        raise SlurmError(f"CPU_IDs={cpu_ids[:40]!r}: over {limit:,} cpus")
    return [cpu for first, last in ranges for cpu in range(first, last + 1)]


def _name(value: Any) -> str:
    """``root(0)`` as root (the number is not read: nothing needs it)."""
    match = _NAME_ID.fullmatch(str(value or ""))
    return match.group(1) if match else str(value or "")


def job_attributes(fields: Mapping[str, Any], slurm: Slurm | None = None) -> dict[str, Any]:
    """One ``scontrol -o -d show job`` line as PBS's job attributes."""
    if "JobId" not in fields:
        raise SlurmError("scontrol show job: no JobId in its answer")
    job_id = checked_job_id(fields["JobId"])
    fields = _unambiguous(job_id, fields)
    user = _name(fields.get("UserId"))
    group = _name(fields.get("GroupId"))
    state = str(fields.get("JobState") or "")
    resources: dict[str, Any] = {}
    ncpus = _int(fields.get("NumCPUs"), "NumCPUs")
    if ncpus is not None:
        resources["ncpus"] = ncpus
    nodect = _int(fields.get("NumNodes"), "NumNodes")
    if nodect is not None:
        resources["nodect"] = nodect
    wall = duration(fields.get("TimeLimit"), "TimeLimit")
    if wall is not None:
        resources["walltime"] = f"{wall // 3600:02d}:{wall % 3600 // 60:02d}:{wall % 60:02d}"
    mem = size_mb(fields.get("MinMemoryNode"), "MinMemoryNode")
    if mem:
        resources["mem"] = f"{mem * max(nodect or 1, 1)}mb"
    else:
        per_cpu = size_mb(fields.get("MinMemoryCPU"), "MinMemoryCPU")
        if per_cpu and ncpus:
            resources["mem"] = f"{per_cpu * ncpus}mb"
    oversubscribe = str(fields.get("OverSubscribe") or "")
    resources["place"] = "scatter:excl" if oversubscribe == "NO" else "scatter"
    chunks = []
    for alloc in fields.get("_alloc") or ():
        cpus = _count(alloc.get("CPU_IDs", ""))
        names = slurm.hostnames(alloc["Nodes"]) if slurm is not None else [alloc["Nodes"]]
        chunks += [f"({name}:ncpus={cpus})" for name in names]
    attrs: dict[str, Any] = {
        "id": job_id, "Job_Name": str(fields.get("JobName") or ""),
        "Job_Owner": user, "euser": user, "egroup": group,
        "job_state": JOB_STATES.get(state, "F"), "queue": _null(fields.get("Partition")),
        "Account_Name": _null(fields.get("Account")),
        "comment": _null(fields.get("Comment")),
        "Rerunable": fields.get("Requeue") == "1",
        "run_count": _int(fields.get("Restarts"), "Restarts") or 0,
        "Resource_List": resources,
        "ctime": epoch(fields.get("SubmitTime"), "SubmitTime"),
        "qtime": epoch(fields.get("SubmitTime"), "SubmitTime"),
        "etime": epoch(fields.get("EligibleTime"), "EligibleTime"),
        "stime": epoch(fields.get("StartTime"), "StartTime") if state not in (
            "PENDING",) else None,
        "jobdir": _null(fields.get("WorkDir")),
        "Output_Path": _null(fields.get("StdOut")),
        "Error_Path": _null(fields.get("StdErr")),
        "slurm_job_state": state,
    }
    if chunks:
        attrs["exec_vnode"] = "+".join(chunks)
        attrs["exec_host"] = "+".join(c[1:].split(":", 1)[0] + "/0" for c in chunks)
    return {k: v for k, v in attrs.items() if v is not None}


def _unambiguous(job_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """`fields`, when nothing in them can have been forged. ``scontrol -o`` does not quote
    values, so a job named ``x UserId=bob(1002) NumCPUs=64`` or a comment holding
    ``Nodes=n1 CPU_IDs=0-63`` reads as those keys. Slurm prints each key once (and one of
    MinMemoryNode and MinMemoryCPU), so a key read twice is one the job's text holds; which
    one is Slurm's cannot be told, and leaving it out would fail open (a job without an
    allocation runs unconfined in a cpuset plugin): the reading is refused (`JobTextError`):
    the Prolog holds the job, and no script drains the node for it."""
    twice = set(fields.get("_twice") or ())
    if "MinMemoryNode" in fields and "MinMemoryCPU" in fields:
        twice |= {"MinMemoryNode", "MinMemoryCPU"}
    if twice:
        raise JobTextError(f"scontrol show job {job_id}: {_some_keys(twice)} appear more "
                           "than once (a job name, comment or path holds them): which is "
                           "Slurm's cannot be told, so the job is not read")
    missing = [key for key in _ALWAYS if key not in fields]
    if missing:  # (a record cut short: read as is, it would fail open)
        raise SlurmError(f"scontrol show job {job_id}: no {', '.join(missing)} in its answer:"
                         " the job is not read")
    return dict(fields)


#: How many keys, and how much of each, an error names (a job name may forge thousands).
_KEYS_SHOWN, _KEY_SHOWN = 5, 40


def _some_keys(keys: set[str]) -> str:
    """The first few of `keys` (sorted), each cut short, and how many more: the keys a
    reading found twice, which a job's text may hold by the thousand (one line of its
    error named them all: its log line grew with the job's name)."""
    names = sorted(keys)
    shown = ", ".join(cut(k, _KEY_SHOWN) for k in names[:_KEYS_SHOWN])
    more = len(names) - _KEYS_SHOWN
    return f"{shown} and {more:,} more keys" if more > 0 else shown


#: Keys Slurm 22.05 prints for every job (of those `job_attributes` reads).
_ALWAYS = ("UserId", "GroupId", "JobState", "Partition", "NumNodes", "NumCPUs", "TimeLimit",
           "OverSubscribe")


def _int(value: Any, what: str) -> int | None:
    """A count Slurm writes: ASCII digits, at most a long (int() took ``-1``, `` 7``,
    ``1_0`` and ``٣``, and 4300 digits or more were its ValueError)."""
    text = _null(value)
    if text is None:
        return None
    number = whole(text, LONG_MAX)
    if number is None:
        why = "out of range" if digits(text) else "expected a whole number"
        raise SlurmError(f"{what}={quoted(text, 40)}: {why}")
    return number


#: Slurm's node states (and flags) as PBS's vnode states.
def vnode_state(state: str) -> str:
    """``IDLE``, ``MIXED+DRAIN``, ``IDLE+POWERED_DOWN``... as PBS's vnode state."""
    words = {w for w in _STATE_WORDS.split(state.upper()) if w}
    out = set()
    if words & {"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "POWERING_UP", "CLOUD"}:
        out.add("sleep")
    if words & {"DRAIN", "DRAINING", "DRAINED", "FAIL", "MAINT"}:
        out.add("offline")
    if "DOWN" in words or "NOT_RESPONDING" in words:
        out.add("down")
    if words & {"ALLOCATED", "COMPLETING"}:
        out.add("job-busy")
    if "RESERVED" in words:
        out.add("resv-exclusive")
    return ",".join(sorted(out)) or "free"


def vnode_attributes(fields: Mapping[str, Any]) -> dict[str, Any]:
    """One ``scontrol -o show node`` line as PBS's vnode attributes."""
    name = str(fields.get("NodeName") or "")
    avail: dict[str, Any] = {"host": name, "vnode": name}
    cpus = _int(fields.get("CPUTot"), "CPUTot")
    if cpus is not None:
        avail["ncpus"] = cpus
    mem = _int(fields.get("RealMemory"), "RealMemory")
    if mem:
        avail["mem"] = f"{mem}mb"
    features = _null(fields.get("AvailableFeatures"))
    attrs: dict[str, Any] = {
        "state": vnode_state(str(fields.get("State") or "")),
        "resources_available": avail,
        "resources_assigned": {"ncpus": _int(fields.get("CPUAlloc"), "CPUAlloc") or 0},
        "comment": _null(fields.get("Reason")),
        "Mom": _null(fields.get("NodeHostName")) or name,
        "last_used_time": epoch(fields.get("LastBusyTime"), "LastBusyTime"),
        "last_state_change_time": epoch(fields.get("BootTime"), "BootTime"),
        "slurm_state": str(fields.get("State") or ""),
        "slurmd_start_time": epoch(fields.get("SlurmdStartTime"), "SlurmdStartTime"),
    }
    if features:
        attrs["slurm_features"] = features.split(",")
    return {k: v for k, v in attrs.items() if v is not None}
