"""The execution host's side: each job in its own cpuset, stuck cpusets, orphans, and the
report to the scheduler (seed 002, section 3; PBS's cgroups hook for the rules).

==================  =====================================================================
exechost_startup    the parent cpuset (``cgroup_prefix``) exists; cpusets with no process
                    left (jobs that ended while the host was down) are removed; NUMA
                    vnodes' ncpus is what the job may really get; the report
execjob_begin       the job's cpuset: its CPUs and memory nodes (`assign`); a stale one of
                    the same job is removed first
execjob_launch      the job's top process (``event.pid``) goes in: the job and everything
                    it starts are confined
execjob_epilogue    kill what is left and remove the cpuset, retrying every 0.2 s up to
execjob_end         ``kill_timeout``; one that survives is *stuck*
exechost_periodic   stuck cpusets retried; cpusets of jobs the host no longer runs renamed
                    ``<job>.orphan`` and removed; vnodes offlined and back; the report
==================  =====================================================================

A vnode held by a stuck cpuset is ``busy`` (it takes no job); once stuck longer than
``offline_stuck_after`` it is also ``offline`` with the comment ``Hook cpuset: Unable to
clean up one or more cgroups`` (PBS's text), and it comes back (``online_offlined_nodes``,
after ``online_nodes_min_delay``) once nothing holds it.

What the hook keeps between events is in ``cpuset_state.json`` in ``state_dir``: which
vnodes (and how many CPUs of each) every cpuset holds, when each stuck cpuset got stuck,
and which vnodes the hook made busy or offline.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pbsplug import clock, default_home, digits, jsontext, parse_exec_vnode, safedirs

from . import report
from .assign import AssignError, Rules, assign, numa_of, usable_cpus
from .cgroupfs import CgroupError, detect
from .nodemask import ID_LIMIT, encode_mask, format_list
from .octants import logical_number
from .topology import read_topology

STATE_FILE = "cpuset_state.json"
ORPHAN = ".orphan"
#: The name of a cpuset this hook makes: a job id (PBS ``12.server``, ``12[3].server``;
#: Slurm ``12``), or one set aside (``.orphan``). Another cpuset under the prefix is the
#: site's own, and never reaped.
JOB_CPUSET = re.compile(r"[0-9]+(?:\[[0-9]*\])?(?:\.[^/]+)?")  # ASCII, not \d
#: How long a retry of a stuck cpuset may take at exechost_periodic (each of them).
RETRY_TIMEOUT = 1.0
#: What one exechost_periodic (or startup) may spend retrying and reaping, all cpusets
#: together; the rest waits for the next run (the hook's alarm is 90 s).
PERIODIC_BUDGET = 30.0
ZERO_CPUS_REFUSED = ("cpuset enabled with mandatory ncpus >= 1, but job does not request "
                     "ncpus on mother superior: rejecting job")


def offline_message(hook: str) -> str:
    return f"Hook {hook}: Unable to clean up one or more cgroups"


class HostError(Exception):
    """The host cannot do cpusets as configured; the message says what to fix."""


class Host:
    """This host's cpusets under the configuration (made once per configuration)."""

    def __init__(self, config: Mapping[str, Any], hook: str = "cpuset"):
        self.config = config
        self.hook = hook
        self.rules = Rules.from_config(config)
        self.prefix = str(config["cgroup_prefix"]).strip("/")
        try:
            self.topology = read_topology(config["sysfs_root"])
            # An emulated tree's root has the described machine's CPUs and memory nodes.
            self.cpusets = detect(config["cgroup_root"], config["cgroup_version"],
                                  bool(config["emulate"]), cpus=list(self.topology.cpus),
                                  mems=list(self.topology.memory_nodes))
        except (CgroupError, ValueError, OSError) as exc:
            raise HostError(str(exc)) from exc
        self.numbers = dict(config["node_numbers"])
        self.state_path = Path(config["state_dir"] or default_home() / "hooks" / "tmp") / \
            STATE_FILE

    # -- the record -----------------------------------------------------------------------
    def load(self) -> dict[str, Any]:
        """The record. A state folder or record another user could have written is the
        host's error (`HostError`, which says whose and what mode): the hook kills what a
        cpuset named in the record holds, and waits on the lock beside it."""
        try:
            safedirs.check_folder(self.state_path.parent, "state_dir")
            data = jsontext.loads(safedirs.read_text(self.state_path), str(self.state_path),
                                  expect=dict)
        except FileNotFoundError:
            data = {}
        except safedirs.UnsafeFolder as exc:
            raise HostError(str(exc)) from None
        except ValueError as exc:  # (jsontext's JsonError; read_text's UnicodeDecodeError)
            raise HostError(f"{self.state_path}: not the cpuset hook's JSON record "
                            f"({getattr(exc, 'why', exc)}); remove it to start afresh") from None
        for key in ("nodes", "jobs", "stuck", "offlined"):
            data.setdefault(key, {})
        data.setdefault("busy", [])
        return data

    def save(self, data: dict[str, Any]) -> None:
        """The record written whole: a new file of a name nobody can guess, then a rename.
        The fixed ``cpuset_state.tmp`` was opened through whatever was there: in a
        state_dir others may write, a planted link had the hook (root) overwrite the file
        it pointed at. The folder is checked (and made) first, as at `record`."""
        self._state_folder()
        safedirs.write_text(self.state_path, json.dumps(data, sort_keys=True))

    def path(self, name: str) -> str:
        return f"{self.prefix}/{name}"

    # -- events ---------------------------------------------------------------------------
    def startup(self, event) -> None:
        with self.record() as data:
            self._ensure_parent()
            self._set_ncpus(event.vnode_list)
            self._remember_nodes(data, event.vnode_list, event)
            self._reconcile(data)
            # A cpuset with no process left belongs to a job that ended while the host was
            # down; one with processes may be a job the server adopts again (periodic,
            # which knows the running jobs, decides about it).
            budget = _Budget(PERIODIC_BUDGET)
            for name in self._ours(data):
                if name not in data["stuck"] and not self.cpusets.pids(self.path(name)):
                    self._reap_orphan(data, name, event, budget)
            self._report(data, event.vnode_list, clock.now())

    def begin(self, event) -> None:
        job = event.job
        wanted = self.wanted(job, event.vnode_list)
        if not sum(wanted.values()):
            if not self.config["allow_zero_cpus"]:
                job.delete()
                event.reject(ZERO_CPUS_REFUSED)
            return  # no CPUs: the job runs in the parent cpuset, as PBS's hook does
        with self.record() as data:
            self._ensure_parent()
            if self.cpusets.exists(self.path(job.id)):  # an earlier run's, left behind
                if not self._remove(data, job.id, float(self.config["kill_timeout"]), event):
                    self._set_aside(data, job, event)
            try:
                cpus, mems = self._assign(job.id, wanted)
            except AssignError:
                self._retry_stuck(data, event, _Budget(PERIODIC_BUDGET))  # PBS: clean up,
                try:                                                    # then once more
                    cpus, mems = self._assign(job.id, wanted)
                except AssignError as exc:
                    job.rerun()
                    event.reject(f"cpuset for job {job.id}: {exc}")
            self.cpusets.create(self.path(job.id), cpus, mems,
                                mem_hardwall=bool(self.config["mem_hardwall"]),
                                memory_spread_page=bool(self.config["memory_spread_page"]))
            data["jobs"][job.id] = wanted
            self._report(data, event.vnode_list, clock.now())
        event.logger.info("job %s: cpuset %s with cpus %s, mems %s", job.id,
                          self.path(job.id), _text(cpus), _text(mems))

    def launch(self, event) -> None:
        job = event.job
        if not self.cpusets.exists(self.path(job.id)):
            if sum(self.wanted(job, event.vnode_list).values()):
                job.rerun()
                event.reject(f"the cpuset of job {job.id} is missing; requeued")
            return
        if event.pid is None:
            event.reject(f"job {job.id}: the engine gave no process to confine")
        self.cpusets.attach(self.path(job.id), int(event.pid))

    def end(self, event) -> None:
        """epilogue, end and abort: remove the job's cpuset; record it stuck if it stays."""
        job_id = event.job.id
        with self.record() as data:
            # Once stuck (the epilogue waited kill_timeout already), the end tries once more.
            timeout = 0.0 if job_id in data["stuck"] else float(self.config["kill_timeout"])
            self._remove(data, job_id, timeout, event)
            self._report(data, event.vnode_list, clock.now())

    def periodic(self, event) -> None:
        budget = _Budget(PERIODIC_BUDGET)
        with self.record() as data:
            self._ensure_parent()
            self._remember_nodes(data, event.vnode_list, event)
            self._reconcile(data)
            self._retry_stuck(data, event, budget)
            running = set(event.job_list or {})
            for name in self._ours(data):
                if name not in running and name not in data["stuck"]:
                    self._reap_orphan(data, name, event, budget)
            self._report(data, event.vnode_list, clock.now())

    # -- helpers --------------------------------------------------------------------------
    def wanted(self, job, vnode_list: Mapping[str, Any]) -> dict[str, int]:
        """``{vnode: ncpus}`` the job was given on this host (its exec_vnode's chunks on the
        event's vnodes)."""
        out: dict[str, int] = {}
        for name, res in parse_exec_vnode(str(job.exec_vnode or "")):
            if name in vnode_list:
                ncpus = str(res.get("ncpus", "0") or "0")
                if not digits(ncpus):  # int() alone reads "١٢" as 12 and "1_0" as 10
                    raise ValueError(f"exec_vnode {name}: ncpus={ncpus!r} is not a whole "
                                     "number")
                out[name] = out.get(name, 0) + int(ncpus)
        return out

    @contextmanager
    def record(self) -> Iterator[dict[str, Any]]:
        """The record, saved whatever happens (a reject, an alarm): what was done to the
        cgroup tree is never forgotten.

        Held under an exclusive lock (``cpuset_state.lock`` beside it) from the reading to
        the saving: Slurm runs prologs for several jobs at once, and PBS's MoM runs hooks as
        processes of their own, so two events could read the same cpusets as taken, give
        two jobs the same CPUs, and each save a record without the other's job.

        The state folder must be one nobody else can write (`pbsplug.safedirs`), and the lock a
        file of the hook's that nobody else can open: another user holding it had every
        event wait until its alarm."""
        self._state_folder()
        lock = self.state_path.with_suffix(".lock")
        try:
            fd = safedirs.open_file(lock, os.O_RDWR | os.O_CREAT, 0o600)
        except safedirs.UnsafeFolder as exc:
            raise HostError(str(exc)) from None
        try:
            if os.fstat(fd).st_mode & 0o077:
                os.fchmod(fd, 0o600)  # the hook's own, but others could open it to hold it
            fcntl.flock(fd, fcntl.LOCK_EX)  # the hook's alarm bounds the wait
            data = self.load()
            try:
                yield data
            finally:
                self.save(data)
        finally:
            os.close(fd)  # and the lock with it

    def _state_folder(self) -> None:
        """The state folder, made when missing; `HostError` when another user could plant
        or change the record or the lock there."""
        try:
            safedirs.ensure_folder(self.state_path.parent, "state_dir")
        except safedirs.UnsafeFolder as exc:
            raise HostError(str(exc)) from None
        except OSError as exc:
            raise HostError(f"state_dir {self.state_path.parent}: "
                            f"{exc.strerror or exc}") from None

    def _ensure_parent(self) -> None:
        """The prefix cpuset; a tree that cannot have it is the host's fault (offline)."""
        try:
            self.cpusets.ensure_parent(self.prefix)
        except CgroupError as exc:
            raise HostError(f"cgroup_prefix {self.prefix!r}: {exc}") from exc

    def _ours(self, data: dict) -> list[str]:
        """The cpusets under the prefix this hook made: named as a job or set aside, or in
        its record."""
        return [name for name in self.cpusets.children(self.prefix)
                if name in data["jobs"] or JOB_CPUSET.fullmatch(name)]

    def _reconcile(self, data: dict) -> None:
        """Forget cpusets the tree no longer has (removed by hand, or gone with a reboot)."""
        present = set(self.cpusets.children(self.prefix))
        for key in ("jobs", "stuck"):
            for name in [n for n in data[key] if n not in present]:
                del data[key][name]

    def _set_ncpus(self, vnode_list: Mapping[str, Any]) -> None:
        """``resources_available.ncpus``: what a job may really get. A NUMA vnode gets its
        node's usable CPUs; a host's only vnode, when not a NUMA one, the host's."""
        usable = usable_cpus(self.topology, self.rules)
        for name, vnode in vnode_list.items():
            node = numa_of(name, self.topology, self.rules)
            if node is not None and node in usable:
                vnode.resources_available["ncpus"] = len(usable[node])
            elif node is None and len(vnode_list) == 1:
                vnode.resources_available["ncpus"] = sum(map(len, usable.values()))

    def _set_aside(self, data: dict, job, event) -> None:
        """An earlier run's cpuset of this job will not go: it becomes an orphan (stuck), so
        the job gets a new one; where it cannot be renamed (cgroup v2), the job is
        requeued."""
        try:
            self.cpusets.rename(self.path(job.id), self.path(job.id + ORPHAN))
        except CgroupError as exc:
            job.rerun()
            event.reject(f"cpuset for job {job.id}: the cpuset of an earlier run is stuck "
                         f"and cannot be set aside ({exc}); requeued")
        orphan = job.id + ORPHAN
        data["jobs"][orphan] = data["jobs"].pop(job.id, {})
        data["stuck"][orphan] = data["stuck"].pop(job.id)

    def _reap_orphan(self, data: dict, name: str, event, budget: _Budget) -> None:
        """A cpuset of no job this host runs: renamed ``<name>.orphan`` (PBS's way; cgroup
        v2 cannot rename, so it keeps its name there) and removed."""
        if not name.endswith(ORPHAN):
            try:
                self.cpusets.rename(self.path(name), self.path(name + ORPHAN))
            except CgroupError:
                event.logger.warning("cpuset %s belongs to no job on this host: reaped",
                                     self.path(name))
            else:
                data["jobs"][name + ORPHAN] = data["jobs"].pop(name, {})
                event.logger.warning("cpuset %s belongs to no job on this host: renamed "
                                     "%s%s and reaped", self.path(name), name, ORPHAN)
                name += ORPHAN
        self._remove(data, name, budget.take(RETRY_TIMEOUT), event)

    def _assign(self, job_id: str, wanted: Mapping[str, int]):
        held: set[int] = set()
        jobs_per_node: dict[int, int] = {}
        nodes = {cpu: node.id for node in self.topology.nodes.values() for cpu in node.cpus}
        for name in self.cpusets.children(self.prefix):
            if name == job_id:
                continue
            cpus, _ = self.cpusets.read(self.path(name))
            held.update(cpus)
            for node in {nodes[c] for c in cpus if c in nodes}:
                jobs_per_node[node] = jobs_per_node.get(node, 0) + 1
        return assign(self.topology, self.rules, wanted, held, jobs_per_node)

    def _remove(self, data: dict, name: str, timeout: float, event) -> bool:
        """Remove cpuset `name`; True when gone. One that stays is recorded stuck."""
        gone = self.cpusets.remove(self.path(name), timeout=timeout)
        if gone:
            data["jobs"].pop(name, None)
            if data["stuck"].pop(name, None) is not None:
                event.logger.info("stuck cpuset %s reclaimed", self.path(name))
            return True
        if name not in data["stuck"]:
            data["stuck"][name] = clock.now()
            if not data["jobs"].get(name):
                data["jobs"][name] = self._vnodes_of(data, name)
            pids = self.cpusets.pids(self.path(name))
            event.logger.error("cpuset %s is stuck: %d process(es) outlived the kill (%s); "
                               "retried at every exechost_periodic", self.path(name),
                               len(pids), " ".join(map(str, pids[:8])))
        return False

    def _vnodes_of(self, data: dict, name: str) -> dict[str, int]:
        """``{vnode: CPUs}`` a cpuset the record knows nothing of holds (an orphan): the
        NUMA vnodes its CPUs are on."""
        try:
            cpus, _ = self.cpusets.read(self.path(name))
        except CgroupError:
            return {}
        nodes = {cpu: node.id for node in self.topology.nodes.values() for cpu in node.cpus}
        bound = {vnode: numa_of(vnode, self.topology, self.rules) for vnode in data["nodes"]}
        out: dict[str, int] = {}
        for cpu in cpus:
            for vnode, node in bound.items():
                if node is not None and node == nodes.get(cpu):
                    out[vnode] = out.get(vnode, 0) + 1
        if not out and cpus:  # no NUMA vnode: the host's others may all draw on its CPUs
            out = {vnode: len(cpus) for vnode, node in bound.items() if node is None}
        return out

    def _retry_stuck(self, data: dict, event, budget: _Budget) -> None:
        for name in list(data["stuck"]):
            self._remove(data, name, budget.take(RETRY_TIMEOUT), event)

    def _remember_nodes(self, data: dict, vnode_list: Mapping[str, Any], event) -> None:
        """The host's vnodes, their logical numbers and ncpus (from the events that carry
        them all), for the free-node mask. A number no mask can hold (a name ending in
        1048576 or more) leaves the vnode out of the mask, logged."""
        nodes = {}
        for name, vnode in vnode_list.items():
            number = logical_number(name, self.numbers)
            if number is not None and number >= ID_LIMIT:
                event.logger.warning("vnode %s: logical number %d is beyond the free-node "
                                     "mask's (%d); set node_numbers for it", name, number,
                                     ID_LIMIT - 1)
            elif number is not None:
                nodes[name] = [number, int(vnode.resources_available["ncpus"] or 0)]
        data["nodes"] = nodes

    def held(self, data: dict) -> dict[str, int]:
        """CPUs held on each vnode by the cpusets the host has."""
        out: dict[str, int] = {}
        for wanted in data["jobs"].values():
            for vnode, ncpus in wanted.items():
                out[vnode] = out.get(vnode, 0) + int(ncpus)
        return out

    def free_mask(self, data: dict) -> str:
        """The free-node mask: bit N set when the vnode numbered N has CPUs no cpuset
        holds and no stuck cpuset on it."""
        nodes = data["nodes"]
        if not nodes:
            return ""
        held = self.held(data)
        stuck_vnodes = {v for name in data["stuck"] for v in data["jobs"].get(name, {})}
        free = [number for vnode, (number, ncpus) in nodes.items()
                if held.get(vnode, 0) < ncpus and vnode not in stuck_vnodes]
        width = max(number for number, _ in nodes.values()) + 1
        return encode_mask(free, width)

    def _report(self, data: dict, vnode_list: Mapping[str, Any], now: float) -> None:
        """The attributes and states of the event's vnodes from the record."""
        stuck_on: dict[str, dict[str, float]] = {}
        for name, since in data["stuck"].items():
            for vnode in data["jobs"].get(name, {}):
                stuck_on.setdefault(vnode, {})[name] = since
        mask = self.free_mask(data)
        message = offline_message(self.hook)
        busy = set(data["busy"])
        for name, vnode in vnode_list.items():
            stuck = stuck_on.get(name, {})
            states = set(vnode.states) - {"free"}
            comment = str(vnode.comment or "")
            if stuck:
                states.add("busy")
                busy.add(name)
                if now - min(stuck.values()) >= float(self.config["offline_stuck_after"]) \
                        and name not in data["offlined"]:
                    states.add("offline")
                    data["offlined"][name] = now
                    comment = f"{comment}; {message}" if comment and message not in comment \
                        else comment or message
            else:
                if name in busy:
                    states.discard("busy")
                    busy.discard(name)
                if "offline" not in states:  # brought back by hand: nothing of ours left
                    data["offlined"].pop(name, None)
                since = data["offlined"].get(name)
                if since is not None and self.config["online_offlined_nodes"] and \
                        now - since >= float(self.config["online_nodes_min_delay"]):
                    if message in comment:
                        states.discard("offline")
                        comment = comment.replace(f"; {message}", "").replace(message, "")
                    del data["offlined"][name]
            new_state = ",".join(sorted(states)) or "free"
            if new_state != vnode.state:
                vnode.state = new_state
            if comment != str(vnode.comment or ""):
                vnode.comment = comment or None
            text = report.format_stuck(stuck) or None
            if text != vnode.get(report.STUCK):
                setattr(vnode, report.STUCK, text)
            if mask and mask != vnode.get(report.FREE_MASK):
                setattr(vnode, report.FREE_MASK, mask)
        data["busy"] = sorted(busy)


class _Budget:
    """Seconds left for blocking retries in one event."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds

    def take(self, seconds: float) -> float:
        """Up to `seconds` of what is left (0 once spent: one quick try each)."""
        return max(0.0, min(seconds, self.deadline - time.monotonic()))


def _text(ids: list[int]) -> str:
    return format_list(ids) or "-"
