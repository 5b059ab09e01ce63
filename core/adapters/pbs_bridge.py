"""The bridge between PBS's hook interpreter and a pbsplug plugin.

`run(pbs, config)` is called by the hook script (`pbs_hook`) that ``pbsplug pbs install`` put
into PBS, with PBS's ``pbs`` module and the hook's config (the plugin, its hook attributes and
configuration), for server events and wherever the host's worker (`worker`) cannot be
used. `pbs_wire` turns ``pbs.event()`` into plain data; `dispatch` builds pbsplug's `Event`
from it and runs the plugin's hook as pbsplug's runner does (in this process: PBS enforces
the alarm), and returns the outcome as plain data (kind, message, changes, log lines), which
`pbs_wire.finish` carries out with PBS's own types and calls: accept, reject with the hook's
message, job attribute changes, ``job.rerun()`` and ``job.delete()``, vnode states, comments
and resources, the launch environment, the hook's log lines through ``pbs.logmsg`` and
``pbs.logjobmsg``, and an exception where the plugin's hook failed, so that PBS applies the
hook's fail_action.

Server hooks share one long-lived interpreter, so the loaded plugin is kept between events
(`_LOADED`, keyed by the config's text).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..events import EVENTS, PBS_OBJECT, Event
from ..runner import ACCEPT, Runner, call_hook
from . import pbs_wire as wire

#: The plugin loaded in this interpreter, by the config text it was loaded from.
_LOADED: dict[str, Runner] = {}


class _Capture(logging.Handler):
    """The hook's log records, as plain data for `pbs_wire.log_records`."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[tuple[str, int, str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad log call must not fail the hook
            message = str(record.msg)
        self.records.append((record.name, record.levelno, message,
                             getattr(record, PBS_OBJECT, None)))


def load(config: Mapping[str, Any], key: str | None = None) -> Runner:
    """The plugin's `Runner` (over a `PluginSet` of that plugin alone), made once per config."""
    key = key or json.dumps(config, sort_keys=True)
    loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    from .bridge import plugin_set

    name = config["plugin"]
    source = config.get("hook_config_file") or f"<{config.get('hook_name', name)}.CF>"
    plugins = plugin_set({name: config}, source)
    loaded = _LOADED[key] = Runner(plugins, mode="inprocess")
    return loaded


def dispatch(runner: Any, name: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """Run the plugin's hook for event `name` built from `data` (`pbs_wire.event_data`); the
    outcome as plain data: ``kind`` (accept, reject, error; an alarm is a KeyboardInterrupt
    that goes through), ``detail``, ``changes``, ``logs``, ``hook``, ``event``."""
    chain = runner.chain(name)
    if not chain:  # the plugin has no hook for this event (PBS's hook lists more events)
        return {"kind": ACCEPT, "detail": None, "changes": {}, "logs": [], "hook": None,
                "event": name}
    entry = chain[0]
    event = Event.from_dict(name, data)
    logger = logging.getLogger("pbsplug.hook")
    capture = _Capture()
    logger.addHandler(capture)
    level, propagate = logger.level, logger.propagate
    logger.setLevel(logging.DEBUG if entry.attrs.debug else logging.INFO)
    logger.propagate = False
    try:
        event.take_changes()
        kind, detail, changes, _ = call_hook(entry, event, None)  # (its job action in changes)
    finally:
        logger.removeHandler(capture)
        logger.setLevel(level)
        logger.propagate = propagate
    return {"kind": kind, "detail": detail, "changes": changes, "logs": capture.records,
            "hook": entry.name, "event": name}


def run(pbs: Any, config: Mapping[str, Any]) -> None:
    """Run the configured plugin's hook for ``pbs.event()`` here and hand PBS the outcome.
    Ends, as every PBS hook does, through ``event.accept()`` or ``event.reject()``
    (SystemExit), or by raising when the plugin's hook failed (PBS then applies fail_action).
    A failure of the bridge itself is logged with its traceback (PBS logs only the
    exception's type) and is the hook's error too."""
    try:
        pevent = pbs.event()
        types = wire.Types(pbs)
        name = types.event_name(pevent.type, EVENTS)
        if name is None:
            pevent.accept()  # (PBS ends the hook here: SystemExit)
            return
        spec = EVENTS[name]
        # Before the plugin is loaded: a load that fails is the hook's error, and
        # pbs_python then writes a launch's argv back as it came (refuse_broken_launch).
        running: list[Any] = []  # the periodic's running jobs, for plan_estimates alone
        data = wire.event_data_or_reject(pbs, pevent, types, spec.objects, spec.host,
                                         running)
        runner = load(config)
        if name == "periodic":
            try:
                plan_estimates(pbs, types, data, runner, running)
            except Exception as exc:  # the plan is an extra: the hook still runs without it
                pbs.logmsg(pbs.LOG_WARNING, wire.one_line(
                    f"pbsplug bridge: no estimates of pbsplug's own this time: "
                    f"{type(exc).__name__}: {exc}"))
        outcome = dispatch(runner, name, data)
        wire.log_records(pbs, outcome["logs"])
        wire.finish(pbs, pevent, outcome, types)
    except Exception as exc:
        if not isinstance(exc, wire.PluginHookError):
            import traceback

            pbs.logmsg(pbs.LOG_ERROR, wire.one_line("pbsplug bridge: " + " | ".join(
                traceback.format_exc().splitlines())))
        raise


def plan_estimates(pbs: Any, types: wire.Types, data: dict[str, Any], runner: Any,
                   running: Iterable[Any]) -> None:
    """Give the server periodic's queued jobs that PBS left without an estimate one from
    pbsplug's scheduler, planned on PBS's vnodes, running jobs (`running`: PBS's objects,
    from the walk of ``pbs.server().jobs()`` that found the queued ones) and reservations.

    PBS's scheduler estimates only onto vnodes it could use now: a job that needs a sleeping
    vnode gets no ``estimated`` at all, so a power plugin would never see it coming. pbsplug's
    scheduler plans a sleeping vnode from when it can take work (the plugins'
    ``sched_node_availability``, else the policy's boot delay), as on the local engine. The
    estimate is the plugin's view only: it is not written back to PBS, and a job PBS did
    estimate keeps PBS's."""
    jobs = data.get("job_list")
    if not jobs or all(_estimated(attrs) for attrs in jobs.values()):
        return
    from .. import clock
    from ..objects import Job, Queue, Reservation, Server, Vnode, object_from_dict
    from ..scheduler.cycle import Scheduler
    from ..scheduler.model import Snapshot

    def build(cls: Any, objects: Mapping[str, Any] | None) -> list[Any]:
        return [object_from_dict(cls, attrs, name) for name, attrs in (objects or {}).items()]

    pserver = pbs.server()
    queues = build(Queue, {str(q.name): wire.attributes(q, types) for q in pserver.queues()})
    snap = Snapshot(
        object_from_dict(Server, wire.attributes(pserver, types), str(pserver.name or "pbs")),
        {q.name: q for q in queues},
        {v.name: v for v in build(Vnode, data.get("vnode_list"))},
        build(Job, jobs) + build(Job, {str(pj.id): wire.attributes(pj, types)
                                       for pj in running}),
        build(Reservation, data.get("resv_list")))
    plan = Scheduler(hooks=runner.plugins.hook).cycle(snap, now=clock.now())
    for job_id, attrs in jobs.items():
        estimate = plan.estimates.get(job_id)
        if estimate is not None and not _estimated(attrs):
            attrs["estimated"] = {**(attrs.get("estimated") or {}),
                                  "start_time": estimate.start_time,
                                  "exec_vnode": estimate.exec_vnode}


def _estimated(attrs: Mapping[str, Any]) -> bool:
    estimated = attrs.get("estimated") or {}
    return bool(estimated.get("start_time") and estimated.get("exec_vnode"))


def hook_objects() -> dict[str, tuple[list[str], bool]]:
    """Per event, the objects pbsplug's event carries and whether it is a host event: what the
    hook script needs to send an event to the worker without importing pbsplug (as JSON, a
    list of the two)."""
    return {name: (list(spec.objects), spec.host) for name, spec in EVENTS.items()}
