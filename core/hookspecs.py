"""Every hook pbsplug offers, in lifecycle order. Read it top to bottom and you know the system.

Event hooks carry PBS's event names and take one argument, ``event`` (a `pbsplug.Event`), as
a PBS hook reads ``pbs.event()``. The runner calls them with PBS's chain semantics: the
plugins whose ``events`` attribute names the event run in ascending ``order`` (ties by plugin
name); the first reject, exception or alarm stops the chain; a hook that neither accepts nor
rejects accepts. What a reject, an exception or an alarm does to the request is written under
each event ("Reject:"), and is the same table as `pbsplug.EVENTS`.

The other hooks are extension points: the CLI, the server's attributes, the demo, the
scheduler. They are called directly (in-process) for every enabled plugin that implements
them.

Specs change only by adding hooks or arguments (the kernel API's minor version); a plugin may
implement a hook with fewer arguments than the spec.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from pathlib import Path

    import typer

    from .attributes import AttributeRegistry
    from .events import Event
    from .objects import Queue, Server, Vnode
    from .scheduling import CycleStats, JobOrder, Placement, SchedulerInstance

hookspec = pluggy.HookspecMarker("pbsplug")


# =============================================================================================
# Server: job submission and change
# =============================================================================================

@hookspec
def queuejob(event: Event) -> None:
    """A job is submitted (qsub), before it is queued.

    Carries ``event.job``: the job as requested. The hook may change any job attribute the
    submitter could set (``Resource_List``, ``Job_Name``, ``queue``, ``Variable_List``...);
    the changes are what gets queued. Reject: the submission is refused and qsub prints the
    message (PBS code 15136).
    """


@hookspec
def postqueuejob(event: Event) -> None:
    """A job has been queued (after queuejob accepted it and the server saved it).

    Carries ``event.job``. The hook may change the job's attributes, as in queuejob.
    Reject: the job, already queued, is deleted (pbsplug's rule; the message is its comment).
    """


@hookspec
def modifyjob(event: Event) -> None:
    """A job's attributes are being changed by qalter, before the change (PBS fires no
    hook for qhold or qrls).

    Carries ``event.job`` (the job with the requested changes) and ``event.job_o`` (the job
    as it was, read-only). Not fired for the scheduler's own changes. The hook may change job
    attributes as in queuejob. Reject: the change is refused.
    """


@hookspec
def movejob(event: Event) -> None:
    """qmove moves a job to another queue (a route queue passing a job on fires none, as
    in PBS).

    Carries ``event.job`` (``job.queue`` is the destination) and ``event.src_queue``.
    Reject: the move is refused and the job stays where it was.
    """


@hookspec
def runjob(event: Event) -> None:
    """The scheduler (or qrun) is about to run a job.

    Carries ``event.job`` with its ``exec_vnode``. A hook that rejects may still change
    ``Execution_Time``, ``Hold_Types``, ``project`` and ``depend``; a hook that accepts must
    change nothing, or the runner rejects with PBS's ``cannot modify job after runjob request
    has been accepted``. Reject: the job stays queued with the comment
    ``Not Running: PBS Error: <message>``.
    """


@hookspec
def jobobit(event: Event) -> None:
    """A job has ended and the server is recording its end (after the execution host's
    execjob_end).

    Carries ``event.job`` with ``Exit_status`` and ``resources_used``; read-only.
    Reject: logged only.
    """


# =============================================================================================
# Server: reservations
# =============================================================================================

@hookspec
def resvsub(event: Event) -> None:
    """An advance reservation is requested (pbs_rsub), before it is accepted.

    Carries ``event.resv``; the hook may change its attributes. Reject: the request is
    refused.
    """


@hookspec
def resv_confirm(event: Event) -> None:
    """A scheduler has found vnodes for a reservation and the server is about to confirm it.

    Carries ``event.resv`` with ``resv_nodes``; read-only. Reject: the reservation is not
    confirmed.
    """


@hookspec
def resv_begin(event: Event) -> None:
    """A confirmed reservation's window starts, before its beginning is stored (a hook the
    server's stop gives up leaves it confirmed, to begin at the next start).

    Carries ``event.resv``; read-only. Reject: logged only.
    """


@hookspec
def resv_end(event: Event) -> None:
    """A reservation's window ends, or pbs_rdel deletes it, begun or only confirmed (not
    an unconfirmed one: PBS's server fires it so), before its jobs are deleted. A hook the
    server's stop gives up leaves the reservation as it was: one whose window ended ends at
    the next start, and the pbs_rdel is refused (15010, the server is stopping). Also at
    the end of each occurrence of a standing reservation. Once per end: an end that failed
    after its hooks (a write refused, a full disk), tried again, fires none again (a
    restart in between does); the server's next poll finishes it whatever the window (a
    pbs_rdel refused so too), so a window that runs always gets its resv_end.

    Carries ``event.resv``; read-only. Reject: logged only.
    """


# =============================================================================================
# Server: vnodes, periodic work, provisioning, management
# =============================================================================================

@hookspec
def modifyvnode(event: Event) -> None:
    """A vnode's state or attributes change (pbsnodes -o/-r, qmgr, or the engine).

    Carries ``event.vnode`` (as the change leaves it) and ``event.vnode_o`` (as it was);
    read-only. ``event.requestor`` is the user who ran pbsnodes or qmgr (root for the
    engine's own). Fired before the change is written; a pbsnodes or qmgr change's while
    the server serves (the hook may make requests of it), a qmgr command's once every
    management hook of the command accepted. Reject: logged only; the change is made.
    """


@hookspec
def periodic(event: Event) -> None:
    """Every ``freq`` seconds on the server (default 120); a run never overlaps the previous
    one: the next starts ``freq`` seconds after the last one ended.

    Carries ``event.vnode_list`` (every vnode, writable: ``state``, ``comment``,
    ``resources_available`` and registered attributes), ``event.resv_list`` (read-only) and
    ``event.job_list`` (the queued jobs, read-only, with the scheduler's ``estimated``
    start_time and exec_vnode where it has them; pbsplug's addition, where a PBS hook runs
    qselect and qstat; a job of it takes no ``job.rerun()`` nor ``job.delete()``, which
    PBS gives only in MoM hooks: the call raises ``AttributeReadOnly``). A vnode holding
    suspended jobs also carries ``suspended_jobs``, their ids (pbsplug's addition,
    read-only): as PBS's server does, the engine releases a suspended job's cpus, so its
    vnodes' ``jobs`` and ``resources_assigned`` no longer show it, though its resume needs
    them. Vnode changes apply even when the hook rejects.
    What the server derives (``jobs``, ``resources_assigned``, ``resv``, ``suspended_jobs``,
    job-busy and the other derived states) a hook may write, no error, but the write is
    not kept, in a replay too. Reject: logged as ``periodic request rejected by '<hook>'``.
    """


@hookspec
def provision(event: Event) -> None:
    """A vnode must be provisioned with an application operating environment before a job.

    Carries ``event.vnode`` and ``event.aoe`` (the environment's name). Only one plugin may
    take this event, and a hook with it may take no other. Reject: provisioning fails and the
    job is held.
    """


@hookspec
def management(event: Event) -> None:
    """A qmgr command is about to be carried out.

    Carries ``event.management``: ``{"cmd": "set", "objtype": "node", "objname": "n1",
    "attribs": [{"name": ..., "op": "=", "value": ...}]}``; read-only. Reject: the qmgr
    command is refused.
    """


# =============================================================================================
# Execution host (PBS's MoM): a job's life on the host
# =============================================================================================

@hookspec
def execjob_begin(event: Event) -> None:
    """The execution host has received a job and is about to set it up (before its files,
    environment and processes exist).

    Carries ``event.job`` and ``event.vnode_list`` (the job's vnodes on this host, writable).
    A hook may change ``state`` and ``comment`` of those vnodes, call ``job.rerun()`` or
    ``job.delete()``, and set ``Execution_Time``, ``Hold_Types``, ``Variable_List`` and
    ``comment`` on the job. Reject: the job is requeued (after ``job.delete()``: deleted).
    Exception or alarm: requeued, and fail_action applies (offline_vnodes,
    scheduler_restart_cycle).
    """


@hookspec
def execjob_prologue(event: Event) -> None:
    """Just before the job's top process starts, after its files and environment exist (PBS's
    prologue).

    Carries ``event.job``, ``event.vnode_list`` and ``event.vnode_list_fail`` (vnodes whose
    setup failed). May change what execjob_begin may. Reject: requeued (after
    ``job.delete()``: deleted). Exception or alarm: requeued, and fail_action applies.
    """


@hookspec
def execjob_launch(event: Event) -> None:
    """The job's top process is about to be executed.

    Carries ``event.job``, ``event.vnode_list``, ``event.vnode_list_fail``, and the writable
    ``event.progname`` (the program), ``event.argv`` (its arguments, argv[0] first) and
    ``event.env`` (its environment): what they hold when the hooks end is what runs.
    ``event.pid`` (read-only; pbsplug's addition to PBS's launch event) is the process that
    will run the job once the hooks end; a hook may move it into a cgroup or set its limits:
    the job and every process it starts inherit them. It is None where there is no process
    (an event built from data without a pid). Reject: the job is deleted (after
    ``job.rerun()``: requeued) and that process ends. Exception or alarm: deleted, and
    execjob_abort runs.
    """


@hookspec
def execjob_attach(event: Event) -> None:
    """A process is being attached to a running job (pbs_attach, or an MPI launcher).

    Carries ``event.job`` and ``event.pid`` (the process being attached). Reject: the attach
    is refused.
    """


@hookspec
def execjob_preterm(event: Event) -> None:
    """A running job is about to be killed by qdel (before SIGTERM).

    Carries ``event.job`` and ``event.vnode_list``. Reject: the qdel is refused and the job
    keeps running.
    """


@hookspec
def execjob_epilogue(event: Event) -> None:
    """The job's processes have ended; before its files are cleaned up (PBS's epilogue).

    Carries ``event.job`` (with ``Exit_status`` and ``resources_used``) and
    ``event.vnode_list``. Reject: ignored (later hooks are skipped); ``job.rerun()``,
    ``job.delete()`` and attribute changes still apply. It may run twice for one end
    (the local engine stopped after it ran, before it could write the job's end: a full
    disk, then a restart): clean up so that a second run does no harm.
    """


@hookspec
def execjob_end(event: Event) -> None:
    """The job is finished on this host and everything of it is being removed; the last
    execution-host event of a job.

    Carries ``event.job`` (with ``Exit_status`` and ``resources_used``, as for the
    epilogue) and ``event.vnode_list``. Reject: ignored (later hooks are skipped); changes
    still apply. It may run twice for one end, as execjob_epilogue may: a second run
    must do no harm.
    """


@hookspec
def execjob_abort(event: Event) -> None:
    """The job's start-up failed (a launch hook failed, or setup failed); runs before
    execjob_end.

    Carries ``event.job`` and ``event.vnode_list``. Reject: ignored. It may run twice
    for one start-up (the local engine stopped after it ran, before it could note so):
    undo what execjob_begin made so that a second run finds nothing and does no harm.
    """


@hookspec
def execjob_postsuspend(event: Event) -> None:
    """The job has just been suspended (qsig -s suspend, or preemption).

    Carries ``event.job`` and ``event.vnode_list``. Reject: ignored.
    """


@hookspec
def execjob_preresume(event: Event) -> None:
    """A suspended job is about to be resumed.

    Carries ``event.job`` and ``event.vnode_list``. Reject: the job stays suspended.
    """


@hookspec
def execjob_resize(event: Event) -> None:
    """A running job's vnodes are about to change (pbs_release_nodes).

    Carries ``event.job`` (with the new ``exec_vnode``) and ``event.vnode_list``. Reject: the
    resize is refused.
    """


# =============================================================================================
# Execution host: the host itself
# =============================================================================================

@hookspec
def exechost_startup(event: Event) -> None:
    """The execution host starts (or its hook configuration is reloaded).

    Carries ``event.vnode_list`` (this host's vnodes, writable; a hook may add vnodes by
    assigning ``event.vnode_list[name] = pbsplug.Vnode(name, {...})``). Reject: logged.
    Exception or alarm with fail_action offline_vnodes: the host's vnodes go offline;
    clear_vnodes_upon_recovery brings them back at the next successful run.
    """


@hookspec
def exechost_periodic(event: Event) -> None:
    """Every ``freq`` seconds on each execution host (default 120); runs never overlap.

    Carries ``event.vnode_list`` (this host's vnodes, writable) and ``event.job_list`` (the
    jobs on this host, running or suspended; read-only). ``job.rerun()`` or ``job.delete()``
    on one of them kills nothing: as in PBS, the job runs on with Exit_status -18 (rerun)
    or -19 (delete), and its own end requeues it (whatever its Rerunable) or ends it; a
    delete wins over a rerun on one job. Vnode changes and these calls apply even when the
    hook rejects. Reject: logged.
    """


# =============================================================================================
# Extension points: the plugin's configuration, the CLI and the server's objects
# =============================================================================================

@hookspec
def configure(config: dict[str, Any]) -> None:
    """The plugin has been loaded and enabled with `config`: its checked configuration, every
    key of its schema with the site's value or the default.

    Event hooks read their configuration from ``event.hook_config``; this is for the hooks
    that get no event (the scheduler's, the demo's). Called on this plugin's implementation
    alone, once per load of the plugins, before any other hook; it is called again when the
    site's plugins are reloaded (a qmgr hook change). An exception fails the plugin, with
    the error, as a bad configuration does.
    """


@hookspec
def register_commands(cli: typer.Typer) -> None:
    """Add commands to the plugin's own command group, ``pbsplug <plugin> ...``.

    `cli` is a `typer.Typer` made for this plugin alone (named after it); add commands with
    ``@cli.command()``. Called only when the user runs one of the plugin's commands, so that
    ``pbsplug --help`` imports no plugin.
    """


@hookspec
def register_attributes(registry: AttributeRegistry) -> None:
    """Add attributes to the server's objects (node, queue, server, job, resv, sched) and new
    object types, with ``registry.add(object_type, name, type, default, set_by=...,
    validator=...)`` and ``registry.add_object_type(name)``.

    Called once when the plugins are loaded. The engine's qmgr and pbsnodes, and the objects
    events carry, treat what is registered like built-in attributes.
    """


# =============================================================================================
# Extension points: showing a plugin at work (``pbsplug demo``)
# =============================================================================================

@hookspec
def demo_setup(workdir: Path) -> dict[str, Any] | None:
    """``pbsplug demo`` is about to run a throw-away local engine with this plugin enabled:
    prepare what the plugin needs to do its real work on this machine, and return its site
    settings for the demo, as a ``[plugins.<name>]`` table would hold them:
    ``{"config": {...}, "freq": 5}``. None keeps the plugin's defaults.

    `workdir` is a folder of the plugin's own, removed after the demo. A stand-in for a
    service this machine lacks (Cray's ATOM, capmc) may be started here, in the demo's
    process; `demo_report` must stop it.
    """


@hookspec
def demo_report(workdir: Path) -> list[str] | None:
    """The demo's jobs are over: return lines for the demo's summary about what the plugin
    did (the demo counts the hook runs itself), and stop what `demo_setup` started. Called
    for every plugin whose `demo_setup` ran, even when the demo failed part-way.
    """


# =============================================================================================
# Extension points: the scheduler
# =============================================================================================

# (ignore: pluggy never calls a spec, it reads only its signature; no body returns)
@hookspec
def sched_instances(server: Server) -> list[SchedulerInstance]:  # type: ignore[empty-body]
    """Scheduler instances the plugin contributes, besides ``default``.

    Returns a list of `pbsplug.SchedulerInstance`; the lists of all plugins are joined. Each
    instance owns its partitions; the engine runs each instance's cycles in its own process.
    """


@hookspec(firstresult=True)
def sched_partition(obj: Queue | Vnode) -> str | None:
    """The partition a queue or a vnode belongs to; the first non-None answer wins.

    Without an answer the scheduler reads the object's ``partition`` attribute; an object in
    no partition belongs to the ``default`` scheduler.
    """


@hookspec
def sched_job_order(order: JobOrder) -> None:
    """Reorder one cycle's queued jobs, or name starving jobs.

    `order.jobs` arrives in the scheduler's policy order (queue priority, then job sort
    formula or submit time). A hook may reorder it in place and append job ids to
    `order.starving`; the most starving job becomes the top job, which the scheduler drains
    for and backfills around. Plugins run in the order of their names, each seeing the
    previous one's result.
    """


@hookspec(firstresult=True)
def sched_node_placement(placement: Placement) -> list[str] | None:
    """Choose exactly which vnodes a job gets; the first non-None answer wins.

    Asked for each job the scheduler's first fit places now, and when it plans ahead (a top
    job's drain, an estimate: `placement.start` is then the planned start).
    `placement.candidates` are `Vnode` objects (``.name``, ``.resources_available``,
    ``.comment``...). Returns the names of candidates, one per chunk in the job's select
    order (a name may repeat when a vnode takes several chunks), or None to leave the choice
    to the scheduler; `placement.fit(vnodes)` gives the scheduler's own first fit over a
    subset of the candidates (`Vnode` objects, tried in the order given), as names. An
    answer that does not fit the job is ignored and logged. Return ``[]`` to say the job
    must not start there (it waits, it does not straddle; when planning, a later start is
    tried); its comment then names the plugin.
    """


# (ignore: pluggy never calls a spec, it reads only its signature; no body returns)
@hookspec
def sched_node_availability(sched: str, now: float,  # type: ignore[empty-body]
                            vnodes: list[Vnode]) -> dict[str, float]:
    """Declare when vnodes that are not free now will be free.

    `vnodes` are the scheduler's vnodes that are not free now (busy, sleeping, stuck...).
    Returns ``{vnode name: time it will be free}`` (seconds since the epoch); the scheduler
    plans with the latest time any plugin gives for a vnode, in place of its own guess (the
    policy's ``boot_delay`` for a sleeping vnode), and never starts a job on a vnode before
    it is free.
    """


@hookspec
def sched_cycle_begin(sched: str, now: float) -> None:
    """A scheduling cycle of scheduler `sched` begins at `now`."""


@hookspec
def sched_cycle_end(stats: CycleStats) -> None:
    """A scheduling cycle ended; `stats` has its figures (jobs considered, started,
    backfilled, duration)."""
