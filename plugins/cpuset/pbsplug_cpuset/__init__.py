"""cpuset: each job in its own cpuset, small jobs kept inside one octant, stuck cpusets and
starving jobs handled (seed 002, NAS's PBS on large SGI Origins; PBS's cgroups hook).

Execution host (`host`): the job's cpuset at execjob_begin, its process put in at
execjob_launch, the cpuset killed and removed at execjob_epilogue/end (stuck ones retried,
reported, offlined and brought back), orphans reaped, and the free-node mask and stuck list
reported on the vnodes.

Scheduler (`sched`, `octants`): small jobs inside one octant (sched_node_placement), the
longest-starving job drained for (sched_job_order), and recently stuck cpusets counted as
soon free (sched_node_availability).

See README.md for the keys, the octant format and the rules.
"""

from __future__ import annotations

from typing import Any

from pbsplug import PluginInfo, clock, hookimpl

from .config import check_config, settings

__version__ = "0.1.0"

plugin_info = PluginInfo(
    api="1.13",
    # pbs_cgroups.HK: order 100, alarm 90, freq 120, fail_action offline_vnodes; off until
    # the site enables it.
    events=("exechost_startup", "exechost_periodic", "execjob_begin", "execjob_launch",
            "execjob_epilogue", "execjob_end", "execjob_abort"),
    order=100, alarm=90, freq=120, fail_action=("offline_vnodes",),
    config=settings(), check_config=check_config,
    # The scheduler's side (octant placement, the starvation drain, stuck cpusets in the
    # plan) is pure decision: safe in the simulator. The host events make real cgroups.
    sim_safe=("sched_job_order", "sched_node_placement", "sched_node_availability"),
    description="A cpuset per job, octant-aware placement, stuck cpusets and the "
                "starvation drain",
)

#: The configuration this process loaded (`configure`), and what was built from it.
_config: dict[str, Any] | None = None
_host = None
_sched = None


@hookimpl
def configure(config: dict[str, Any]) -> None:
    global _config, _host, _sched
    _config, _host, _sched = config, None, None


def _the_host(event):
    """The host's cpusets under the loaded configuration; a host that cannot do them
    (no cpuset hierarchy, an unreadable topology, a broken record) is logged with what to
    fix, and the error stands (fail_action offline_vnodes takes the host's vnodes out)."""
    global _host
    from .host import Host, HostError

    if _host is None or _host.hook != (event.hook_name or "cpuset"):
        try:
            _host = Host(_config if _config is not None else event.hook_config,
                         event.hook_name or "cpuset")
        except HostError as exc:
            event.logger.error("cpusets cannot be made on this host: %s", exc)
            raise
    return _host


#: What the job's comment gets after an unexpected error (PBS's cgroups hook's words).
SYSTEM_HOLD = "(system hold set)"


#: The events before the job runs: an unexpected error there holds and requeues it.
_STARTING = ("execjob_begin", "execjob_launch")


def _run(event, what: str) -> None:
    """One host event. A host that cannot do cpusets stays the hook's error (fail_action
    offline_vnodes takes its vnodes out); any other unexpected error before the job runs
    holds the job (``s``) and requeues it, and leaves the node in service, as PBS's cgroups
    hook does. Once the job has run (epilogue, end, abort) the error is only logged and the
    event rejected: the job is not run again for it."""
    from .host import HostError

    host = _the_host(event)
    try:
        getattr(host, what)(event)
    except HostError:
        raise
    except Exception as exc:  # a bug or an odd host: the job waits for an admin
        event.logger.exception("%s: unexpected error", event.type)
        job = event.job
        text = f"{event.type}: {type(exc).__name__}: {exc}"
        if job is not None and event.type in _STARTING:
            job.Hold_Types = "s"
            job.rerun()
            event.reject(f"{text} {SYSTEM_HOLD}")
        event.reject(text)


@hookimpl
def exechost_startup(event) -> None:
    _run(event, "startup")


@hookimpl
def exechost_periodic(event) -> None:
    _run(event, "periodic")


@hookimpl
def execjob_begin(event) -> None:
    _run(event, "begin")


@hookimpl
def execjob_launch(event) -> None:
    _run(event, "launch")


@hookimpl
def execjob_epilogue(event) -> None:
    _run(event, "end")


@hookimpl
def execjob_end(event) -> None:
    _run(event, "end")


@hookimpl
def execjob_abort(event) -> None:
    _run(event, "end")


def _sched_side():
    global _sched
    if _sched is None and _config is not None:
        from .sched import SchedSide

        _sched = SchedSide(_config)
    return _sched


@hookimpl
def sched_job_order(order) -> None:
    side = _sched_side()
    if side is not None:
        from .sched import job_order

        job_order(order, side.starve_after)


@hookimpl
def sched_node_placement(placement):
    side = _sched_side()
    return side.placement(placement) if side is not None else None


@hookimpl
def sched_node_availability(sched: str, now: float, vnodes: list) -> dict[str, float]:
    side = _sched_side()
    if side is None:
        return {}
    from .sched import availability

    return availability(now, vnodes, side.stuck_grace)


@hookimpl
def register_attributes(registry) -> None:
    from .report import register

    register(registry)


@hookimpl
def register_commands(cli) -> None:
    from .commands import register

    register(cli)


def _demo_config(workdir) -> dict[str, Any]:
    return {"emulate": True, "cgroup_version": "1", "cgroup_root": str(workdir / "cgroup"),
            "sysfs_root": str(workdir / "sys"), "state_dir": str(workdir),
            "vnode_numa": {"demo1": 0, "demo2": 1, "demo3": 2, "demo4": 3},
            "octants": ["1-2", "3-4"]}


@hookimpl
def demo_setup(workdir) -> dict:
    """The demo's four one-CPU vnodes as four NUMA nodes of a described machine (a sysfs
    tree), with an emulated cgroup tree in the demo's folder (this machine may have neither
    the CPUs nor cpusets), and two octants of two nodes each."""
    from .fake_sysfs import write_sysfs

    write_sysfs(workdir / "sys", {0: "0", 1: "1", 2: "2", 3: "3"})
    (workdir / "cgroup").mkdir(exist_ok=True)
    return {"freq": 2, "config": _demo_config(workdir)}


@hookimpl
def demo_report(workdir) -> list[str]:
    """The host's cpusets as the demo left them (``pbsplug cpuset status``)."""
    from .commands import status_lines, status_record
    from .host import Host, HostError

    config = {key: setting.default for key, setting in settings().items()}
    try:
        host = Host({**config, **_demo_config(workdir)})
        return status_lines(status_record(host, clock.now()))
    except HostError as exc:
        return [f"cpuset: {exc}"]
