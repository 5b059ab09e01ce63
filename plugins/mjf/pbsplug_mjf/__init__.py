"""mjf: HEP Machine/Job Features (HSF-TN-2016-02, seed 003) for every job.

Each execution host keeps ``$MACHINEFEATURES`` (``<machinefeatures_dir>/<host>``) current from
exechost_startup and exechost_periodic; each job gets ``$JOBFEATURES``
(``<jobfeatures_dir>/<job id>``) at execjob_begin, before it starts, both variables in its
environment at execjob_launch, and its directory removed at execjob_end. A drain
(``pbsplug mjf drain``) sets the host's shutdowntime; the periodic hook announces it to the
running jobs as shutdowntime_job, keeping the grace_secs_job promise. Payloads read the
features with `read_features` (local or HTTP) and `time_left`. See README.md.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pbsplug import PluginInfo, Setting, absolute_path, absolute_path_or_empty, clock, hookimpl

from . import files
from .derive import (
    HostError,
    MJFError,
    announced_shutdown,
    job_end,
    job_features,
    machine_features,
    scratch_resource_problem,
    scratch_size,
    swap_rule_problem,
)
from .keys import MACHINE_KEYS
from .reader import read_features, time_left

__version__ = "0.1.0"
__all__ = ["MJFError", "read_features", "time_left"]

#: Machine keys the hooks keep current (shutdowntime belongs to the drain).
STATIC_MACHINE_KEYS = tuple(k for k in MACHINE_KEYS if k != "shutdowntime")
#: A directory of a job this host does not run is swept only once it is this old: a job whose
#: execjob_begin is under way may not be in exechost_periodic's job list yet.
SWEEP_AFTER = 60
#: Bounds on the configured HS06 ratings: the smallest is what three decimals can write (a
#: rating is never 0); the largest are far beyond any machine (a core rates tens of HS06),
#: and keep every product finite, so no rating is written as 'inf'.
HS06_MIN = 0.001
HS06_MAX = 1e9
HS06_PER_CPU_MAX = 1e6
#: The longest grace a site may promise: ten years.
GRACE_MAX = 10 * 365 * 86400


def _grace(value: int) -> str | None:
    return None if value <= GRACE_MAX else f"expected at most {GRACE_MAX} (ten years)"


def _check(config: Mapping[str, Any]):
    if config["hs06"] is not None and config["hs06_per_cpu"] is not None:
        yield "hs06_per_cpu", "set hs06 (the whole machine's rating) or hs06_per_cpu, not both"
    machine, job = Path(config["machinefeatures_dir"]), Path(config["jobfeatures_dir"])
    if machine == job or machine in job.parents or job in machine.parents:
        yield "jobfeatures_dir", (f"must be apart from machinefeatures_dir ({machine}): the "
                                  "periodic sweep removes what is not a running job's")


plugin_info = PluginInfo(
    api="1.9",
    events=("exechost_startup", "exechost_periodic", "execjob_begin", "execjob_launch",
            "execjob_end"),
    # A host that cannot provide the features (an unsafe base folder, no scratch_path) is
    # the hook's error at exechost_startup or execjob_begin: its vnodes go offline, as with
    # PBS's cgroups hook, rather than every job being requeued through it.
    order=50, alarm=30, freq=120, fail_action=("offline_vnodes",),
    config={
        "machinefeatures_dir": Setting(str, "/var/run/pbsplug-mjf/machinefeatures",
                                       check=absolute_path,
                                       doc="each host's $MACHINEFEATURES is <this>/<host>"),
        "jobfeatures_dir": Setting(str, "/var/run/pbsplug-mjf/jobfeatures",
                                   check=absolute_path,
                                   doc="each job's $JOBFEATURES is <this>/<job id>"),
        "hs06": Setting(float, None, ge=HS06_MIN, le=HS06_MAX,
                        doc="the whole machine's HS06 rating"),
        "hs06_per_cpu": Setting(float, None, ge=HS06_MIN, le=HS06_PER_CPU_MAX,
                                doc="HS06 per allocatable CPU"),
        "grace_secs": Setting(int, 0, ge=0, check=_grace,
                              doc="a drain is never announced sooner than this from now"),
        "grace_secs_job": Setting(int, 0, ge=0, check=_grace,
                                  doc="a running job's shutdowntime_job is never set sooner "
                                      "than this from now"),
        "scratch_resource": Setting(str, "", check=scratch_resource_problem,
                                    doc="the job resource (a size) that limits its scratch "
                                        "space, such as 'scratch'"),
        "scratch_path": Setting(str, "", check=absolute_path_or_empty,
                                doc="the file system jobs' scratch is on; its size is "
                                    "scratch_limit_bytes for jobs without scratch_resource"),
        "swap_rule": Setting(str, "vmem-mem", check=swap_rule_problem,
                             doc="max_swap_bytes: 'vmem-mem', 'none', 'F*mem' or a size"),
    },
    check_config=_check,
    description="HEP Machine/Job Features ($MACHINEFEATURES, $JOBFEATURES) for every job",
)


# -- where things are -------------------------------------------------------------------------

def this_host() -> str:
    """The execution host's name, as the engine names its vnodes' Mom."""
    return socket.gethostname().split(".", 1)[0]


def machine_dir(config: Mapping[str, Any], host: str | None = None) -> Path:
    return Path(config["machinefeatures_dir"]) / files.checked_name("host", host or this_host())


def job_dir(config: Mapping[str, Any], job_id: str) -> Path:
    return Path(config["jobfeatures_dir"]) / files.checked_name("job", job_id)


# -- the execution host -----------------------------------------------------------------------

def refresh_machine(config: Mapping[str, Any], vnodes) -> Path:
    """Write this host's static machine keys (only those whose value changed)."""
    directory = machine_dir(config)
    files.ensure_base(directory)
    files.sync_keys(directory, machine_features(config, vnodes), STATIC_MACHINE_KEYS)
    return directory


def _stale_shutdown(directory: Path, now: float, logger, why: str) -> int | None:
    """The host's shutdowntime; one already past is stale and removed."""
    shutdown = files.read_key(directory, "shutdowntime")
    if shutdown is not None and shutdown <= now:
        files.remove_key(directory, "shutdowntime")
        logger.info("removed a stale shutdowntime %d (%s) from %s", shutdown, why, directory)
        return None
    return shutdown


@hookimpl
def exechost_startup(event) -> None:
    """$MACHINEFEATURES written; a shutdowntime left from before this start removed. A host
    that cannot provide the features (`HostError`) is the hook's error: offline_vnodes."""
    config = event.hook_config
    if config["scratch_path"]:
        try:
            scratch_size(config["scratch_path"])
        except HostError as exc:  # may be mounted after the MoM starts: logged, and only
            # a job that starts while it is still missing takes the host out
            event.logger.warning("mjf: %s", exc)
    try:
        directory = refresh_machine(config, event.vnode_list.values())
        _stale_shutdown(directory, clock.now(), event.logger, "the host has restarted")
    except MJFError as exc:
        event.reject(f"mjf: {exc}")


@hookimpl
def exechost_periodic(event) -> None:
    """$MACHINEFEATURES kept current; the host's drain announced to its running jobs; the
    directories of jobs that are gone swept away."""
    config = event.hook_config
    now = int(clock.now())
    problems = []
    shutdown = None
    try:
        directory = refresh_machine(config, event.vnode_list.values())
        shutdown = files.read_key(directory, "shutdowntime")
    except (MJFError, HostError) as exc:  # reported below; the jobs are still looked after
        problems.append(str(exc))
    running = set(event.job_list or ())
    job_base = Path(config["jobfeatures_dir"])
    try:
        if job_base.exists():  # nothing is written or removed where others could swap it
            files.check_base(job_base)
        job_dirs = files.job_dirs(job_base)
    except (MJFError, HostError) as exc:
        job_dirs = []
        problems.append(str(exc))
    for path in job_dirs:
        try:
            if path.name in running:
                announce_drain(path, shutdown, config["grace_secs_job"], now, event.logger)
            elif (now - path.stat().st_mtime > SWEEP_AFTER
                  and files.read_key(path, "job_id") == path.name  # a job directory, ours
                  and files.remove_dir(path)):
                event.logger.info("removed $JOBFEATURES of job %s, which no longer runs here",
                                  path.name)
        except (MJFError, OSError) as exc:
            if path.is_dir():  # a directory that vanished meanwhile is a job that ended
                problems.append(str(exc))
    if problems:
        event.reject("mjf: " + "; ".join(problems))


def announce_drain(path: Path, shutdown: int | None, grace_job: int, now: int,
                   logger) -> None:
    """Bring one running job's shutdowntime_job in line with the host's shutdowntime. The
    grace kept is the job's own grace_secs_job (the promise it was given when it started),
    or the configured one where that is longer."""
    features = {k: files.read_key(path, k) for k in ("jobstart_secs", "wall_limit_secs",
                                                      "shutdowntime_job", "grace_secs_job")}
    existing = features["shutdowntime_job"]
    grace_job = max(grace_job, int(features["grace_secs_job"] or 0))
    new = announced_shutdown(existing, job_end(features), shutdown, grace_job, now)
    if new == existing:
        return
    if new is None:
        files.remove_key(path, "shutdowntime_job")
        logger.info("job %s: shutdowntime_job removed (the host is no longer draining)",
                    path.name)
    else:
        files.write_key(path, "shutdowntime_job", new)
        logger.info("job %s: shutdowntime_job set to %d", path.name, new)


@hookimpl
def execjob_begin(event) -> None:
    """$JOBFEATURES made whole before the job starts; a request that does not parse, or a
    directory that cannot be written, rejects (the job is requeued) and leaves nothing. A
    host that cannot provide the features (`HostError`) is the hook's error:
    offline_vnodes."""
    config, job = event.hook_config, event.job
    now = clock.now()
    try:
        host = machine_dir(config)
        total = files.read_key(host, "total_cpu") if host.is_dir() else None
        shutdown = (_stale_shutdown(host, now, event.logger, "its time had passed when job "
                                    f"{job.id} started") if host.is_dir() else None)
        features = job_features(config, job, event.vnode_list or {}, int(now), total,
                                shutdown)
        base = files.ensure_base(config["jobfeatures_dir"])
        files.make_dir_whole(base, str(job.id), features)
    except MJFError as exc:
        event.reject(f"mjf: {exc}")


@hookimpl
def execjob_launch(event) -> None:
    """MACHINEFEATURES and JOBFEATURES in the job's environment (where they exist)."""
    config = event.hook_config
    host, job = machine_dir(config), job_dir(config, str(event.job.id))
    if host.is_dir():
        event.env["MACHINEFEATURES"] = str(host)
    if job.is_dir():
        event.env["JOBFEATURES"] = str(job)


@hookimpl
def execjob_end(event) -> None:
    """The job's $JOBFEATURES removed."""
    config = event.hook_config
    try:
        path = job_dir(config, str(event.job.id))
        if path.parent.exists():
            files.check_base(path.parent)
        files.remove_dir(path)
    except (MJFError, HostError) as exc:
        event.reject(f"mjf: {exc}")


# -- the demo ---------------------------------------------------------------------------------

@hookimpl
def demo_setup(workdir) -> dict:
    """The demo keeps its features under its own folder, and runs the periodic hook often
    enough to see the demo's vnodes (made after the host started)."""
    return {"freq": 2, "config": {"machinefeatures_dir": f"{workdir}/machinefeatures",
                                  "jobfeatures_dir": f"{workdir}/jobfeatures",
                                  "hs06_per_cpu": 10.0, "grace_secs": 3600,
                                  "grace_secs_job": 600}}


@hookimpl
def demo_report(workdir) -> list[str]:
    lines = []
    for host in sorted(Path(workdir, "machinefeatures").glob("*")):
        values = read_features(str(host))
        shown = " ".join(f"{k}={values[k]:g}" for k in MACHINE_KEYS if k in values)
        lines.append(f"$MACHINEFEATURES for {host.name}: {shown}")
    left = files.job_dirs(Path(workdir, "jobfeatures"))
    lines.append(f"$JOBFEATURES directories left after the jobs: {len(left)}")
    return lines


# -- commands ---------------------------------------------------------------------------------

@hookimpl
def register_commands(cli) -> None:
    from . import commands

    commands.register(cli)

