"""The bridge between PBS's hook interpreter and a pbsplug plugin.

`run(pbs, config)` is called by the hook script (`pbs_hook`) that ``pbsplug pbs install`` put
into PBS, once per event, with PBS's ``pbs`` module and the hook's config (the plugin, its
hook attributes and configuration). It builds pbsplug's `Event` from ``pbs.event()``, runs
the plugin's hook for it as pbsplug's runner does (in this process: PBS enforces the alarm),
and carries the outcome back with PBS's own types and calls: accept, reject with the hook's
message, job attribute changes, ``job.rerun()`` and ``job.delete()``, vnode states, comments
and resources, the launch environment, the hook's log lines through ``pbs.logmsg`` and
``pbs.logjobmsg``, and an exception where the plugin's hook failed, so that PBS applies the
hook's fail_action.

PBS's values are PBS types (size, duration, select, job and vnode states as numbers...), not
str: `plain` turns each into the plain data pbsplug's objects hold, `pbs_value` the other way.
Server hooks share one long-lived interpreter, so the loaded plugin is kept between events
(`_LOADED`, keyed by the config's text); MoM hooks start a fresh interpreter each time.

Only what this module needs is imported: the kernel's events, objects, plugins and runner.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import Any

from ..events import EVENTS, PBS_OBJECT, Event
from ..objects import RESOURCE_ATTRIBUTES, Job, Reservation, Vnode
from ..runner import ACCEPT, ALARM, REJECT, HookAlarm, call_hook, client_message

#: PBS's job states (``pbs.JOB_STATE_<NAME>``) as the letters pbsplug uses.
JOB_STATES = {"TRANSIT": "T", "QUEUED": "Q", "HELD": "H", "WAITING": "W", "RUNNING": "R",
              "EXITING": "E", "EXPIRED": "X", "BEGUN": "B", "SUSPEND": "S",
              "SUSPEND_USERACTIVE": "U", "MOVED": "M", "FINISHED": "F"}
#: Attributes a PBS object lists that pbsplug's objects do not carry.
_SKIP = frozenset({"_name", "_has_value", "_connect_server", "_readonly", "_rerun",
                   "_delete", "_checkpointed", "_msmom", "_stdout_file", "_stderr_file",
                   "_attributes_hook_set", "_attributes_unknown"})

#: The plugin loaded in this interpreter, by the config text it was loaded from.
_LOADED: dict[str, Any] = {}


# -- PBS values to plain data -----------------------------------------------------------------

class _Types:
    """PBS's constants and its own converters for vnode states and sharing (``_pbs_v1``,
    the C module behind ``pbs``), read once."""

    def __init__(self, pbs: Any):
        import _pbs_v1  # PBS's C module: present wherever ``pbs`` is

        self.pbs = pbs
        self.c = _pbs_v1
        self.job_states = {getattr(pbs, f"JOB_STATE_{k}"): v for k, v in JOB_STATES.items()
                           if hasattr(pbs, f"JOB_STATE_{k}")}
        self.job_state_of = {v: k for k, v in self.job_states.items()}
        self.events = {getattr(pbs, name.upper()): name for name in EVENTS
                       if hasattr(pbs, name.upper())}

    def vnode_state(self, value: int) -> str:
        return self.c.vnode_state_to_str(int(value)) or "free"

    def vnode_bits_of(self, state: str) -> int:
        bits = 0
        for name in str(state).split(","):
            name = name.strip()
            if name and name != "free":
                bit = int(self.c.str_to_vnode_state(name) or 0)  # PBS answers a string
                if bit <= 0:  # 0 is PBS's answer for free and for a name it does not know
                    raise ValueError(f"PBS has no vnode state '{name}'")
                bits |= bit
        return bits


def plain(value: Any, types: _Types, attr: str = "") -> Any:
    """A PBS attribute value as pbsplug's plain data."""
    if value is None:
        return None
    kind = type(value).__name__
    if kind == "job_state":
        return types.job_states.get(int(value), str(value))
    if kind == "vnode_state":
        return types.vnode_state(value)
    if kind == "vnode_sharing":
        return types.c.vnode_sharing_to_str(int(value))
    if kind == "vnode_ntype":
        return types.c.vnode_ntype_to_str(int(value))
    if kind == "pbs_resource":
        out = {}
        for key in value.keys():
            item = value[key]
            if item is not None:
                out[str(key)] = plain(item, types)
        return out
    if kind == "pbs_env" or isinstance(value, dict):
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if isinstance(value, bool) or kind == "pbs_bool":
        return value if isinstance(value, bool) else str(value).lower() in ("true", "1")
    if type(value) in (int, float) or kind in ("pbs_int", "pbs_float"):
        return value.real if kind in ("pbs_int", "pbs_float") else value
    if isinstance(value, (list, tuple)):
        return [plain(v, types) for v in value]
    return str(value)


def _attributes(obj: Any) -> dict[str, Any]:
    """A PBS object's set attributes, by name (each PBS class lists its attribute names)."""
    names = getattr(type(obj), "attributes", None) or {}
    out = {}
    for name in names:
        if name in _SKIP or name.startswith("_"):
            continue
        try:
            value = getattr(obj, name)
        except Exception:  # an attribute PBS cannot give in this event
            continue
        if value is not None:
            out[name] = value
    return out


def _plain_attributes(obj: Any, types: _Types) -> dict[str, Any]:
    out = {}
    for name, value in _attributes(obj).items():
        value = plain(value, types, name)
        if value is None or (name in RESOURCE_ATTRIBUTES and not isinstance(value, dict)):
            continue  # PBS's schedselect is a select string, not a resource mapping
        out[name] = value
    return out


def job_from_pbs(pjob: Any, types: _Types) -> Job:
    return Job(str(pjob.id), _plain_attributes(pjob, types))


def vnode_from_pbs(name: str, pvnode: Any, types: _Types) -> Vnode:
    attrs = _plain_attributes(pvnode, types)
    attrs.pop("name", None)
    return Vnode(str(name), attrs)


def resv_from_pbs(name: str, presv: Any, types: _Types) -> Reservation:
    attrs = _plain_attributes(presv, types)
    attrs.pop("resvid", None)
    return Reservation(str(name), attrs)


def event_from_pbs(pbs: Any, pevent: Any, types: _Types, name: str) -> Event:
    """pbsplug's Event for PBS's event `pevent` (of type `name`)."""
    spec = EVENTS[name]
    kwargs: dict[str, Any] = {"requestor": str(getattr(pevent, "requestor", "") or "root"),
                              "requestor_host": str(getattr(pevent, "requestor_host", "") or "")}
    for key in spec.objects:
        value = getattr(pevent, key, None) if key not in ("pid", "job_list") or (
            spec.host) else None
        if key == "job" and value is not None:
            kwargs["job"] = job_from_pbs(value, types)
        elif key == "job_o" and value is not None:
            kwargs["job_o"] = job_from_pbs(value, types)
        elif key in ("vnode_list", "vnode_list_fail") and value is not None:
            kwargs[key] = {str(n): vnode_from_pbs(n, v, types) for n, v in value.items()}
        elif key in ("vnode", "vnode_o") and value is not None:
            kwargs[key] = vnode_from_pbs(str(value.name), value, types)
        elif key == "resv" and value is not None:
            kwargs["resv"] = resv_from_pbs(str(value.resvid), value, types)
        elif key == "resv_list" and value is not None:
            kwargs["resv_list"] = {str(n): resv_from_pbs(n, r, types) for n, r in value.items()}
        elif key == "job_list":
            if spec.host:
                kwargs["job_list"] = {str(j): job_from_pbs(pj, types)
                                      for j, pj in (value or {}).items()}
            else:  # the server periodic: pbsplug carries the queued jobs and their estimates
                kwargs["job_list"] = _queued_jobs(pbs, types)
        elif key in ("progname",) and value is not None:
            kwargs["progname"] = str(value)
        elif key == "argv" and value is not None:
            kwargs["argv"] = [str(a) for a in value]
        elif key == "env" and value is not None:
            kwargs["env"] = {str(k): "" if v is None else str(v) for k, v in value.items()}
        elif key == "pid" and name == "execjob_launch":
            # The launch hook's parent is the process that becomes the job (the MoM's child
            # that execs it): what pbsplug's event.pid names on the local engine too.
            kwargs["pid"] = os.getppid()
        elif key == "pid" and value is not None:
            kwargs["pid"] = int(value)
        elif key == "aoe" and value is not None:
            kwargs["aoe"] = str(value)
    return Event(name, **kwargs)


def _queued_jobs(pbs: Any, types: _Types) -> dict[str, Job]:
    queued = types.job_state_of.get("Q")
    jobs = {}
    for pjob in pbs.server().jobs():
        if queued is not None and pjob.job_state != queued:
            continue
        jobs[str(pjob.id)] = job_from_pbs(pjob, types)
    return jobs


# -- changes back into PBS ------------------------------------------------------------------

def pbs_value(pbs: Any, attr: str, value: Any, types: _Types) -> Any:
    """A plain value as PBS takes it for `attr` (PBS converts strings to its own types)."""
    if value is None:
        return None
    if attr == "job_state":
        return types.job_state_of.get(str(value), value)
    if attr == "state":
        return pbs.vnode_state(types.vnode_bits_of(value))
    if attr == "sharing":
        return pbs.vnode_sharing(int(types.c.str_to_vnode_sharing(str(value))))
    if isinstance(value, bool):
        return value
    return value


def _set(pbs: Any, pobj: Any, changes: Mapping[str, Any], types: _Types) -> None:
    for attr, value in changes.items():
        if attr.startswith("_"):
            continue
        current = getattr(pobj, attr, None)
        if isinstance(value, dict) and type(current).__name__ == "pbs_resource":
            for key, item in value.items():
                current[key] = None if item is None else pbs_value(pbs, key, item, types)
        elif isinstance(value, dict) and current is not None and hasattr(current, "items"):
            for key in [k for k in current.keys() if k not in value]:
                del current[key]
            for key, item in value.items():
                current[key] = item
        else:
            setattr(pobj, attr, pbs_value(pbs, attr, value, types))


def apply_changes(pbs: Any, pevent: Any, name: str, changes: Mapping[str, Any],
                  types: _Types) -> None:
    """What the hook changed, set on PBS's own objects."""
    job_changes = dict(changes.get("job") or {})
    action = job_changes.pop("_action", None)
    pjob = getattr(pevent, "job", None)
    if job_changes and pjob is not None:
        _set(pbs, pjob, job_changes, types)
    if action and pjob is not None:
        getattr(pjob, action)()  # job.rerun() / job.delete()
    for key in ("vnode_list", "vnode_list_fail"):
        pvnodes = getattr(pevent, key, None)
        for vname, vchanges in (changes.get(key) or {}).items():
            if pvnodes is None:
                continue
            if vchanges.get("_new") and vname not in pvnodes:
                pvnodes[vname] = pbs.vnode(vname)
            _set(pbs, pvnodes[vname], {k: v for k, v in vchanges.items()
                                       if k not in ("name", "_new")}, types)
    if name == "execjob_launch" and "env" in changes:
        penv = pevent.env
        wanted = changes["env"]
        for key in [k for k in list(penv.keys()) if k not in wanted]:
            del penv[key]
        for key, value in wanted.items():
            if penv.get(key) != value:
                penv[key] = value
        if changes.get("argv") is not None:
            pevent.argv = list(changes["argv"])
        if changes.get("progname"):
            pevent.progname = changes["progname"]


# -- logging -----------------------------------------------------------------------------------

class PbsLogHandler(logging.Handler):
    """A hook's log lines into PBS's log: ``pbs.logmsg`` at PBS's level, and a line logged
    against a job (`Event.logjobmsg`) through ``pbs.logjobmsg``."""

    def __init__(self, pbs: Any):
        super().__init__(logging.DEBUG)
        self.pbs = pbs

    def emit(self, record: logging.LogRecord) -> None:
        pbs = self.pbs
        try:
            message = record.getMessage()
            obj = getattr(record, PBS_OBJECT, None)
            if obj and obj[0] == "Job" and hasattr(pbs, "logjobmsg"):
                pbs.logjobmsg(obj[1], message)
                return
            level = (pbs.LOG_ERROR if record.levelno >= logging.ERROR else
                     pbs.LOG_WARNING if record.levelno >= logging.WARNING else
                     pbs.LOG_DEBUG if record.levelno >= logging.INFO else
                     getattr(pbs, "EVENT_DEBUG3", pbs.LOG_DEBUG))
            pbs.logmsg(level, f"{record.name.removeprefix('pbsplug.hook.')}: {message}")
        except Exception:  # a log line must never fail the hook
            pass


# -- the plugin ----------------------------------------------------------------------------------

def _load(config: Mapping[str, Any], key: str):
    """The plugin's hook entries (a `Runner` over a `PluginSet` of that plugin alone)."""
    loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    from importlib.metadata import EntryPoint
    from pathlib import Path

    from ..plugins import ENABLED, load_plugins
    from ..runner import Runner
    from ..siteconfig import PluginSite, SiteConfig

    name = config["plugin"]
    source = Path(config.get("hook_config_file") or f"<{config.get('hook_name', name)}.CF>")
    site = SiteConfig(path=source, exists=True, plugins={name: PluginSite(
        name, enabled=True, attributes=dict(config.get("attributes") or {}),
        config=dict(config.get("config") or {}))})
    entry = EntryPoint(name=name, value=config["entry_point"], group="pbsplug")
    plugins = load_plugins(site, only={name}, entry_points=[entry], strict=False,
                           report=False, env={})
    record = plugins.get(name)
    if record is None or record.status != ENABLED:
        raise RuntimeError(record.failure_text() if record is not None
                           else f"pbsplug: plugin '{name}' could not be loaded")
    loaded = _LOADED[key] = Runner(plugins, mode="inprocess")
    return loaded


def run(pbs: Any, config: Mapping[str, Any]) -> None:
    """Run the configured plugin's hook for ``pbs.event()`` and hand PBS the outcome. Ends,
    as every PBS hook does, through ``event.accept()`` or ``event.reject()`` (SystemExit), or
    by raising when the plugin's hook failed (PBS then applies fail_action). A failure of the
    bridge itself is logged with its traceback (PBS logs only the exception's type) and is
    the hook's error too."""
    try:
        _run(pbs, config)
    except Exception as exc:
        if not isinstance(exc, PluginHookError):
            import traceback

            pbs.logmsg(pbs.LOG_ERROR, "pbsplug bridge: " + " | ".join(
                traceback.format_exc().splitlines()))
        raise


def _run(pbs: Any, config: Mapping[str, Any]) -> None:
    pevent = pbs.event()
    types = _Types(pbs)
    name = types.events.get(pevent.type)
    if name is None:
        pevent.accept()
    key = json.dumps(config, sort_keys=True)
    runner = _load(config, key)
    chain = runner.chain(name)
    if not chain:  # the plugin has no hook for this event (PBS's hook lists more events)
        pevent.accept()
    event = event_from_pbs(pbs, pevent, types, name)
    logger = logging.getLogger("pbsplug.hook")
    handler = PbsLogHandler(pbs)
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if chain[0].attrs.debug else logging.INFO)
    try:
        event.take_changes()
        try:
            kind, detail = call_hook(chain[0], event, None)
        except HookAlarm:
            raise
        changes = event.take_changes() if kind in (ACCEPT, REJECT) else {}
    finally:
        logger.removeHandler(handler)
    if kind in (ACCEPT, REJECT):
        apply_changes(pbs, pevent, name, changes, types)
    if kind == ACCEPT:
        pevent.accept()
    if kind == REJECT:
        if detail:
            pevent.reject(detail)
        pevent.reject()
    if kind == ALARM:
        raise KeyboardInterrupt(client_message(name, kind, chain[0].name, detail))
    raise PluginHookError(f"pbsplug plugin '{chain[0].name}' failed in {name}: {detail}")


class PluginHookError(RuntimeError):
    """The plugin's hook raised: PBS's hook error (15136), where fail_action applies."""
