"""Each key's value, worked out from what the events carry and the site's configuration.

Pure functions of their arguments (no files, no clock), so every rule is a unit test. A value
that cannot be known is left out; a value the job asked for that does not parse is an
`MJFError` naming the job, the resource and the value, raised before anything is written.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from pbsplug import digits, parse_duration, parse_exec_vnode, parse_size, resource_type

from .keys import Value


class MJFError(Exception):
    """Something the features cannot be made from: the message names what and why."""


class HostError(Exception):
    """This host cannot provide the features as configured (a base folder other users could
    change, a scratch_path that is not there, a scratch_resource the server does not define
    as a size). The hooks let it out, so it is the hook's error: fail_action offline_vnodes
    takes the host's vnodes out of service rather than requeueing every job that lands there.
    """


# -- configuration rules ----------------------------------------------------------------------

_FACTOR_RULE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*\*\s*mem\s*", re.ASCII)
#: The largest factor of mem a swap rule may give: far past any real one, and small enough
#: that the product is a finite number (400 nines made every job's begin an OverflowError,
#: the hook's error: its host went offline).
SWAP_FACTOR_MAX = 1000


def swap_rule_problem(rule: str) -> str | None:
    """None when `rule` is a swap rule: ``vmem-mem``, ``none``, ``F*mem`` or a PBS size."""
    factor = _FACTOR_RULE.fullmatch(rule)
    if factor:
        if float(factor.group(1)) > SWAP_FACTOR_MAX:
            return f"expected a factor of mem of at most {SWAP_FACTOR_MAX}, such as '0.5*mem'"
        return None
    if rule in ("vmem-mem", "none"):
        return None
    try:
        parse_size(rule)
    except ValueError:
        return ("expected 'vmem-mem', 'none', a factor of mem such as '0.5*mem', or a PBS "
                "size such as '2gb'")
    return None


def _rounded(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 3)


# -- $MACHINEFEATURES -------------------------------------------------------------------------

def total_cpu(vnodes: Iterable[Any]) -> int | None:
    """The CPUs jobs may be given on this host: the sum of its vnodes' ncpus."""
    total, known = 0, False
    for vnode in vnodes:
        ncpus = vnode.resources_available["ncpus"]
        if ncpus is None:
            continue
        try:
            total += _int(ncpus)
        except (TypeError, ValueError):
            raise MJFError(f"vnode {vnode.name}: resources_available.ncpus = {ncpus!r} is "
                           "not an integer") from None
        known = True
    return total if known else None


def machine_features(config: Mapping[str, Any], vnodes: Iterable[Any]) -> dict[str, Value]:
    """The static machine keys (shutdowntime is the drain's): total_cpu, hs06, grace_secs."""
    features: dict[str, Value] = {}
    cpus = total_cpu(vnodes)
    if cpus is not None:
        features["total_cpu"] = cpus
    if config.get("hs06") is not None:
        features["hs06"] = _rounded(config["hs06"])
    elif config.get("hs06_per_cpu") is not None and cpus:
        features["hs06"] = _rounded(config["hs06_per_cpu"] * cpus)
    # Always written (default 0): the note requires grace_secs wherever a shutdown may be set
    # for jobs already running, and a drain may come at any time.
    features["grace_secs"] = int(config.get("grace_secs") or 0)
    return features


# -- $JOBFEATURES -----------------------------------------------------------------------------

def _resource(job: Any, name: str, parse, what: str) -> int | None:
    value = job.Resource_List[name]
    if value is None:
        return None
    try:
        return parse(value)
    except ValueError:
        raise MJFError(f"job {job.id}: Resource_List.{name} = {value!r} is not {what}") from None


def _local_chunks(job: Any, vnode_names: Iterable[str]) -> tuple[list[dict[str, str]], bool]:
    """The job's exec_vnode chunks on this host, and whether that is all of its chunks."""
    chunks = parse_exec_vnode(job.exec_vnode or "")
    names = set(vnode_names)
    local = [res for name, res in chunks if not names or name in names]
    return local, len(local) == len(chunks)


def _chunk_sum(job: Any, chunks: list[dict[str, str]], name: str, parse,
               what: str) -> int | None:
    """The sum of resource `name` over `chunks`, or None when no chunk has it."""
    values = [res[name] for res in chunks if name in res]
    if not values:
        return None
    total = 0
    for value in values:
        try:
            total += parse(value)
        except ValueError:
            raise MJFError(f"job {job.id}: exec_vnode {name}={value!r} is not {what}") from None
    return total


def _int(value: Any) -> int:
    """A whole number, or its ASCII digits: int() alone also reads '١٢' as 12 and '1_0' as
    10, which no batch system writes."""
    if isinstance(value, bool) or not (isinstance(value, int) or digits(str(value))):
        raise ValueError(value)
    return int(value)


def job_features(config: Mapping[str, Any], job: Any, vnode_names: Iterable[str], now: int,
                 host_total_cpu: int | None = None,
                 host_shutdowntime: int | None = None) -> dict[str, Value]:
    """The job's keys on this host. Per-host amounts (allocated_cpu, memory, scratch) are the
    sums over the job's chunks on this host's vnodes (`vnode_names`); the job-wide
    Resource_List value stands in only when all of the job's chunks are here."""
    chunks, single_host = _local_chunks(job, vnode_names)
    features: dict[str, Value] = {"job_id": str(job.id)}

    def per_host(name: str, parse, what: str) -> int | None:
        amount = _chunk_sum(job, chunks, name, parse, what)
        if amount is None and single_host:
            amount = _resource(job, name, parse, what)
        return amount

    cpus = per_host("ncpus", _int, "an integer")
    if cpus is not None:
        features["allocated_cpu"] = cpus
    if cpus:
        if config.get("hs06_per_cpu") is not None:
            features["hs06_job"] = _rounded(config["hs06_per_cpu"] * cpus)
        elif config.get("hs06") is not None and host_total_cpu:
            share = config["hs06"] / host_total_cpu * cpus
            if round(share, 3) <= 0:  # written with three decimals, it would be 0
                raise MJFError(f"job {job.id}: hs06_job: hs06 = {config['hs06']:g} shared over "
                               f"total_cpu {host_total_cpu} gives {share:g} for {cpus} cpus, "
                               "which is 0 to three decimals: hs06 is the whole machine's "
                               "rating")
            features["hs06_job"] = _rounded(share)
    start = job.stime
    try:
        features["jobstart_secs"] = int(start) if start is not None else int(now)
    except (TypeError, ValueError):
        raise MJFError(f"job {job.id}: stime = {start!r} is not a time in seconds") from None
    duration = "a duration ([[HH:]MM:]SS)"
    wall = _resource(job, "walltime", parse_duration, duration)
    if wall is not None:
        features["wall_limit_secs"] = wall
    cput = _resource(job, "cput", parse_duration, duration)
    if cput is not None:
        features["cpu_limit_secs"] = cput
    size = "a size (for example 4gb)"
    mem = per_host("mem", parse_size, size)
    if mem is not None:
        features["max_rss_bytes"] = mem
    swap = _swap(config["swap_rule"], mem, per_host("vmem", parse_size, size))
    if swap is not None:
        features["max_swap_bytes"] = swap
    scratch = _scratch(config, job, per_host)
    if scratch is not None:
        features["scratch_limit_bytes"] = scratch
    # Static and always written (default 0): the note requires it of any job whose
    # shutdowntime_job may be set after it starts, and a drain may come at any time.
    features["grace_secs_job"] = int(config.get("grace_secs_job") or 0)
    if host_shutdowntime is not None:
        end = features["jobstart_secs"] + wall if wall is not None else None
        features["shutdowntime_job"] = min(t for t in (end, host_shutdowntime)
                                           if t is not None)
    return features


def _swap(rule: str, mem: int | None, vmem: int | None) -> int | None:
    if rule == "none":
        return None
    if rule == "vmem-mem":
        return max(vmem - mem, 0) if vmem is not None and mem is not None else None
    factor = _FACTOR_RULE.fullmatch(rule)
    if factor:
        return int(float(factor.group(1)) * mem) if mem is not None else None
    return parse_size(rule)


_RESOURCE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")  # PBS's rule for a resource's name


def scratch_resource_problem(name: str) -> str | None:
    """None when `name` may be scratch_resource: empty, or a resource name that is not one of
    PBS's own resources of another type than size. A custom resource's type is known only to
    the server, so it is checked when a job runs (`_scratch`)."""
    if not name:
        return None
    if not _RESOURCE_NAME.fullmatch(name):
        return "expected a resource name (a letter, then letters, digits, '_', '.', '-')"
    kind = resource_type(name, {})  # PBS's own resources only
    if kind is not None and kind != "size":
        return (f"{name} is a {kind} resource; expected a size resource, such as one made "
                "with 'qmgr -c \"create resource scratch type=size\"'")
    return None


def scratch_size(path: str) -> int:
    """The size of the file system at scratch_path; `HostError` when this host has none
    there (every job would be refused, so the host is what is wrong)."""
    try:
        fs = os.statvfs(path)
    except OSError as exc:
        raise HostError(f"scratch_path = {path!r}: {exc.strerror or exc} on this host; "
                        "make it, or set scratch_path to the jobs' scratch file system") from None
    return fs.f_blocks * fs.f_frsize


def _scratch(config: Mapping[str, Any], job: Any, per_host) -> int | None:
    """The job's scratch resource where the site names one and the job has it, else the size
    of the file system jobs' scratch (TMPDIR) is on: the note's value without quotas."""
    name = config.get("scratch_resource")
    if name:
        kind = resource_type(name)  # the server's custom resources, where it has said them
        if kind is None:
            raise HostError(f"scratch_resource = {name!r}: the server defines no such "
                            f"resource; create it (qmgr -c \"create resource {name} "
                            "type=size\") or correct the key")
        try:
            amount = per_host(name, parse_size, "a size (for example 10gb)")
        except MJFError as exc:
            if kind == "size":  # the job's own value: the server should have refused it
                raise
            raise HostError(f"scratch_resource = {name!r} is a {kind} resource, not a size: "
                            f"{exc}") from None
        if amount is not None:
            return amount
    path = config.get("scratch_path")
    if path:
        return scratch_size(path)
    return None


# -- drain ------------------------------------------------------------------------------------

def job_end(features: Mapping[str, Value]) -> int | None:
    """When the job's walltime runs out, from its own keys."""
    start, wall = features.get("jobstart_secs"), features.get("wall_limit_secs")
    return int(start) + int(wall) if start is not None and wall is not None else None


def announced_shutdown(existing: int | None, end: int | None, host_shutdown: int | None,
                       grace_job: int | None, now: int) -> int | None:
    """The shutdowntime_job to announce to a running job, or None to remove it.

    The wanted time is the earlier of the job's end and the host's shutdown. A newly set or
    changed time is never sooner than grace_secs_job from now (the note's promise), nor later
    than the job's end. A time already announced is kept unless the wanted time is later, or
    the promise allows an earlier one."""
    if host_shutdown is None:
        return None
    wanted = min(t for t in (end, host_shutdown) if t is not None)
    if existing is not None and wanted == existing:
        return existing
    announced = max(wanted, now + (grace_job or 0))
    if end is not None:  # the walltime ends the job then anyway: no promise is broken
        announced = min(announced, end)
    if existing is None or wanted > existing or announced < existing:
        return announced
    return existing
