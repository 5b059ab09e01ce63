"""PBS's event as plain data, and a plugin's outcome back into PBS: standard library only.

This module runs inside PBS's hook interpreter. It imports nothing of pbsplug, so that an
execution-host hook (a fresh ``pbs_python`` per event) can hand its event to the host's
pbsplug worker (`worker`) at the cost of ``json`` and ``socket`` alone; the in-process
bridge (`pbs_bridge`) uses it too, for server events. The hook script imports it by path.

- `event_data`: ``pbs.event()``'s objects, keyed by PBS's names (``job``, ``vnode_list``,
  ...), every set attribute as the plain data pbsplug's objects hold (`plain`: sizes,
  durations, select, place and exec_vnode as PBS prints them, job states as letters, vnode
  states and sharing through PBS's own converters).
- `apply_changes`: what the plugin's hook changed, set on PBS's own objects (`pbs_value`).
- `log_records`: the hook's log lines through ``pbs.logmsg`` / ``pbs.logjobmsg``.
- `finish`: the outcome as PBS ends a hook: ``accept()``, ``reject(msg)`` or an exception.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

#: PBS's job states (``pbs.JOB_STATE_<NAME>``) as the letters pbsplug uses.
JOB_STATES = {"TRANSIT": "T", "QUEUED": "Q", "HELD": "H", "WAITING": "W", "RUNNING": "R",
              "EXITING": "E", "EXPIRED": "X", "BEGUN": "B", "SUSPEND": "S",
              "SUSPEND_USERACTIVE": "U", "MOVED": "M", "FINISHED": "F"}
#: pbsplug's attributes holding resource mappings (`pbsplug.objects.RESOURCE_ATTRIBUTES`).
RESOURCE_ATTRIBUTES = frozenset({
    "Resource_List", "resources_used", "resources_available", "resources_assigned",
    "resources_max", "resources_min", "resources_default", "estimated",
})
#: The objects an event may carry, as pbsplug's `Event` names them.
OBJECT_KEYS = ("job", "job_o", "vnode", "vnode_o", "vnode_list", "vnode_list_fail", "resv",
               "resv_list", "job_list", "progname", "argv", "env", "pid", "aoe")
#: A queuejob's job has no id yet in PBS (the server gives it after the hooks): its id then.
NEW_JOB = "(new job)"
#: Log levels of pbsplug's outcome records (Python's logging numbers).
ERROR_LEVEL, WARNING_LEVEL, INFO_LEVEL = 40, 30, 20


class Types:
    """PBS's constants and its own converters for vnode states and sharing (``_pbs_v1``,
    the C module behind ``pbs``), read once."""

    def __init__(self, pbs: Any):
        import _pbs_v1  # PBS's C module: present wherever ``pbs`` is

        self.pbs = pbs
        self.c = _pbs_v1
        self.job_states = {getattr(pbs, f"JOB_STATE_{k}"): v for k, v in JOB_STATES.items()
                           if hasattr(pbs, f"JOB_STATE_{k}")}
        self.job_state_of = {v: k for k, v in self.job_states.items()}

    def event_name(self, value: Any, names: Any) -> str | None:
        """pbsplug's name of PBS's event type `value`, among `names`."""
        for name in names:
            if getattr(self.pbs, name.upper(), None) == value:
                return name
        return None

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


# -- PBS values to plain data -----------------------------------------------------------------

def plain(value: Any, types: Types) -> Any:
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


def attributes(obj: Any, types: Types) -> dict[str, Any]:
    """A PBS object's set attributes as plain data (each PBS class lists its names)."""
    out = {}
    for name in getattr(type(obj), "attributes", None) or {}:
        if name.startswith("_"):
            continue
        try:
            value = plain(getattr(obj, name), types)
        except Exception:  # an attribute PBS cannot give in this event
            continue
        if value is None or (name in RESOURCE_ATTRIBUTES and not isinstance(value, dict)):
            continue
        out[name] = value
    return out


#: Objects an event that carries them never goes without. When PBS cannot build one (a job
#: attribute that is not UTF-8 makes pbs_python log "Encountered an error while setting
#: event" and run the hook without vnode_list, or with job_list None), a native hook
#: reading it fails; left out, pbsplug's event would carry an empty one, and plugins would
#: act on it: a job with no vnodes here runs without a cpuset, and a periodic run with no
#: jobs reaps every job's cpuset and folders.
MUST_HAVE = frozenset({"job", "vnode_list", "job_list", "resv", "vnode"})


class EventIncomplete(RuntimeError):
    """PBS ran the hook without an object its event must carry (`event_data_or_reject`)."""


class LaunchRefused(RuntimeError):
    """An execjob_launch whose progname or argv holds a line break (`refuse_broken_launch`)."""


def refuse_broken_launch(pbs: Any, pevent: Any) -> None:
    """Reject an execjob_launch whose progname or an argument, as ``pbs.event()`` gives
    them, holds a line break, after setting each on one line (`one_line`). pbs_python
    writes progname and argv back unquoted, one ``name=value`` line each, into the results
    the MoM reads after the hook, accepted or rejected, so the lines after a break were
    read as results of their own (``pbs.reboot=True``, a vnode's state). The MoM writes
    them unquoted into the hook's input too, where an argument in three double quotes is
    read as one value over several lines: a job owner's ``qsub -- prog ARG`` put them
    there. PBS deletes a job whose launch is rejected; no plugin runs, and fail_action
    does not apply (a job owner's argument is no reason to take the node offline)."""
    if getattr(pevent, "type", None) != getattr(pbs, "EXECJOB_LAUNCH", object()):
        return
    progname = getattr(pevent, "progname", None)
    argv = [str(a) for a in getattr(pevent, "argv", None) or ()]
    broken = ["progname"] if progname is not None and "\n" in str(progname) else []
    broken += [f"argv[{i}]" for i, a in enumerate(argv) if "\n" in a]
    if not broken:
        return
    pevent.argv = [one_line(a) for a in argv]
    if progname is not None:
        pevent.progname = one_line(progname)
    named = ", ".join(broken[:3]) + (f" and {len(broken) - 3} more" if len(broken) > 3 else "")
    why = (f"pbsplug: the job's {named} {'holds' if len(broken) == 1 else 'hold'} a line"
           " break, which PBS would write unquoted into the hook's results; the launch is"
           " rejected")
    job = getattr(pevent, "job", None)
    pbs.logmsg(pbs.LOG_ERROR, one_line(f"{why} (job {getattr(job, 'id', None)})"))
    pevent.reject(why)
    raise LaunchRefused(why)  # only where reject does not end the hook (a stand-in pbs module)


def event_data_or_reject(pbs: Any, pevent: Any, types: Types, objects: Any, host: bool,
                         running: list[Any] | None = None) -> dict[str, Any]:
    """`event_data`; an event PBS could not build (`EventIncomplete`) is rejected, logged,
    and the hook ends there (SystemExit): nothing runs on an empty object, and fail_action
    does not apply (a job owner's odd bytes are no reason to take the node offline). A
    job's begin is then refused (PBS requeues the job), a periodic run is left out. A
    launch whose progname or argv holds a line break is rejected first
    (`refuse_broken_launch`)."""
    refuse_broken_launch(pbs, pevent)
    try:
        return event_data(pbs, pevent, types, objects, host, running)
    except EventIncomplete as exc:
        pbs.logmsg(pbs.LOG_ERROR, one_line(f"pbsplug: {exc}; the event is rejected"))
        pevent.reject(one_line(f"pbsplug: {exc}"))
        raise  # only where reject does not end the hook (a stand-in pbs module)


def event_data(pbs: Any, pevent: Any, types: Types, objects: Any, host: bool,
               running: list[Any] | None = None) -> dict[str, Any]:
    """The event's `objects` (the names pbsplug's event of this type carries) as plain data,
    keyed by PBS's names, as `pbsplug.Event.from_dict` takes them. An object of `MUST_HAVE`
    that PBS could not give is an `EventIncomplete` error, never an empty one. Given
    `running`, the server periodic adds to it PBS's objects of the running jobs, from the
    same walk of ``pbs.server().jobs()`` as the queued ones (`_queued_jobs`); they are not
    in the event's data. The server periodic's vnodes holding suspended jobs name them
    (`SUSPENDED_JOBS`)."""
    data: dict[str, Any] = {"requestor": str(getattr(pevent, "requestor", "") or ""),
                            "requestor_host": str(getattr(pevent, "requestor_host", "") or "")}
    suspended: dict[str, list[str]] = {}  # (the server periodic: vnode -> suspended jobs)
    for key in objects:
        if key == "pid":
            if getattr(pevent, "type", None) == getattr(pbs, "EXECJOB_LAUNCH", object()):
                # The launch hook's parent becomes the job (the MoM's child that execs it):
                # what pbsplug's event.pid names on the local engine too.
                data["pid"] = os.getppid()
            elif getattr(pevent, "pid", None) is not None:
                data["pid"] = int(pevent.pid)
            continue
        if key == "job_list" and not host:  # the server periodic: the queued jobs
            data["job_list"] = _queued_jobs(pbs, types, running, suspended)
            continue
        try:
            value = getattr(pevent, key)
        except Exception as exc:  # PBS could not build it (EventIncompatibleError...)
            if key in MUST_HAVE:
                raise EventIncomplete(f"PBS gave this event no {key}: {exc}") from None
            continue
        if value is None:
            if key in MUST_HAVE:
                raise EventIncomplete(f"PBS gave this event no {key}")
            continue
        if key in ("job", "job_o"):
            data[key] = {**attributes(value, types), "id": str(value.id or NEW_JOB)}
        elif key in ("vnode", "vnode_o"):
            data[key] = {**_named(attributes(value, types)), "name": str(value.name)}
        elif key == "resv":
            data[key] = {**_named(attributes(value, types)), "resvid": str(value.resvid)}
        elif key in ("vnode_list", "vnode_list_fail", "resv_list"):
            data[key] = {str(n): _named(attributes(v, types)) for n, v in value.items()}
        elif key == "job_list":
            data[key] = {str(j): {**attributes(pj, types), "id": str(j)}
                         for j, pj in value.items()}
        elif key == "argv":
            data[key] = [str(a) for a in value]
        elif key == "env":
            data[key] = {str(k): "" if v is None else str(v) for k, v in value.items()}
        else:
            data[key] = str(value)
    # PBS frees a suspended job's vnodes (its `jobs` unset, its cpus unassigned), yet its
    # resume needs them: the server periodic's vnodes name it (hookspecs.periodic).
    for name, job_ids in suspended.items():
        vnode = (data.get("vnode_list") or {}).get(name)
        if vnode is not None:
            vnode[SUSPENDED_JOBS] = job_ids
    return data


def _named(attrs: dict[str, Any]) -> dict[str, Any]:
    attrs.pop("name", None)
    attrs.pop("resvid", None)
    return attrs


#: PBS's substates of a suspended job (JOB_SUBSTATE_SUSPEND, by qsig; _SCHSUSP, by the
#: scheduler): its state may read R where PBS shows S only in a status reply.
SUSPENDED_SUBSTATES = frozenset({43, 45})
#: The server periodic's vnode attribute naming the suspended jobs on a vnode
#: (`pbsplug.units.SUSPENDED_JOBS`; this module imports nothing of pbsplug).
SUSPENDED_JOBS = "suspended_jobs"


def _queued_jobs(pbs: Any, types: Types, running: list[Any] | None = None,
                 suspended: dict[str, list[str]] | None = None) -> dict[str, dict[str, Any]]:
    """The queued jobs as plain data; PBS's objects of the running jobs added to `running`;
    each vnode's suspended jobs to `suspended`. One walk for all: each
    ``pbs.server().jobs()`` makes PBS build every job object again, and log its error again
    for each job with an attribute that is not UTF-8."""
    queued, running_state = types.job_state_of.get("Q"), types.job_state_of.get("R")
    stopped = {types.job_state_of.get(s) for s in ("S", "U")} - {None}
    jobs = {}
    for pjob in pbs.server().jobs():
        state = pjob.job_state
        if queued is None or state == queued:
            jobs[str(pjob.id)] = {**attributes(pjob, types), "id": str(pjob.id)}
        if running is not None and state == running_state:
            running.append(pjob)
        if suspended is not None and (state in stopped or (
                state == running_state and _int_or_none(getattr(pjob, "substate", None))
                in SUSPENDED_SUBSTATES)):
            for name in _exec_vnode_names(getattr(pjob, "exec_vnode", None)):
                listed = suspended.setdefault(name, [])
                if str(pjob.id) not in listed:
                    listed.append(str(pjob.id))
    return jobs


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _exec_vnode_names(exec_vnode: Any) -> list[str]:
    """The vnodes of PBS's exec_vnode (``(n1:ncpus=1)+(n2:ncpus=2)``), as
    `pbsplug.units.exec_vnode_names` reads it; none when it is unset."""
    if exec_vnode is None:
        return []
    names = (part.strip().strip("()").split(":", 1)[0].strip()
             for part in str(exec_vnode).split("+"))
    return [name for name in names if name]


# -- changes back into PBS ------------------------------------------------------------------

def pbs_value(pbs: Any, attr: str, value: Any, types: Types) -> Any:
    """A plain value as PBS takes it for `attr` (PBS converts strings to its own types)."""
    if value is None:
        return None
    if attr == "job_state":
        return types.job_state_of.get(str(value), value)
    if attr == "state":
        return pbs.vnode_state(types.vnode_bits_of(value))
    if attr == "sharing":
        return pbs.vnode_sharing(int(types.c.str_to_vnode_sharing(str(value))))
    return value


def _set(pbs: Any, pobj: Any, changes: Mapping[str, Any], types: Types) -> None:
    """`changes` set on `pobj`. A text goes on one line (`one_line`): pbs_python writes what
    a hook set into the results file the MoM (and the server, for a periodic hook) reads
    back, one ``name=value`` line each and unquoted but for Variable_List, so a line break
    in a comment (free text, which pbsplug lets hold one) made lines of results of their
    own (``pbs.reboot=True``, a vnode's state) of whatever the text held."""
    for attr, value in changes.items():
        if attr.startswith("_"):
            continue
        # PBS's own value, of PBS's types (no annotations): a pbs_resource, a dict, a str...
        current: Any = getattr(pobj, attr, None)
        if isinstance(value, dict) and type(current).__name__ == "pbs_resource":
            for key, item in value.items():
                current[key] = None if item is None else pbs_value(
                    pbs, key, one_line(item) if isinstance(item, str) else item, types)
        elif isinstance(value, dict) and current is not None and hasattr(current, "items"):
            for key in [k for k in current.keys() if k not in value]:
                del current[key]
            for key, item in value.items():
                current[key] = item
        else:
            setattr(pobj, attr, pbs_value(
                pbs, attr, one_line(value) if isinstance(value, str) else value, types))


#: What a hook may ask of a job of exechost_periodic's job_list.
_JOB_ACTIONS = ("rerun", "delete")


def apply_changes(pbs: Any, pevent: Any, changes: Mapping[str, Any], types: Types) -> None:
    """What the hook changed (`pbsplug.Event.take_changes`), set on PBS's own objects."""
    job_changes = dict(changes.get("job") or {})
    action = job_changes.pop("_action", None)
    pjob = getattr(pevent, "job", None)
    if job_changes and pjob is not None:
        _set(pbs, pjob, job_changes, types)
    if action and pjob is not None:
        getattr(pjob, action)()  # job.rerun() / job.delete()
    pjobs = getattr(pevent, "job_list", None)
    for job_id, asked in (changes.get("job_list") or {}).items():
        # exechost_periodic's job.rerun() / job.delete() on a job of its list, passed on
        # (PBS kills nothing: its server marks the job, Exit_status -18/-19, and acts at its end)
        if pjobs is not None and job_id in pjobs and asked.get("_action") in _JOB_ACTIONS:
            getattr(pjobs[job_id], asked["_action"])()
    for key in ("vnode_list", "vnode_list_fail"):
        pvnodes = getattr(pevent, key, None)
        for vname, vchanges in (changes.get(key) or {}).items():
            if pvnodes is None:
                continue
            if vchanges.get("_new") and vname not in pvnodes:
                pvnodes[vname] = pbs.vnode(vname)
            _set(pbs, pvnodes[vname], {k: v for k, v in vchanges.items()
                                       if k not in ("name", "_new")}, types)
    if "env" in changes:
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


def one_line(text: Any) -> str:
    """`text` on one line: a line break or other control character in it shown escaped
    (``\\n``). PBS writes a hook's log lines, its reject message and its exception as they
    come, and the MoM reads a hook's outcome back from a file of ``name=value`` lines
    (pbs_python's results): a line break in a text a plugin took from a job owner (a
    Variable_List value) made lines of the owner's own there: a forged record in PBS's log,
    and lines the MoM reads as the hook's results (``pbs.reboot=True``, a vnode's state)."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def log_records(pbs: Any, records: Any) -> None:
    """The hook's log lines, ``(logger, level, message, (type, name) | None)``, into PBS's
    log: ``pbs.logjobmsg`` for a line about a job, else ``pbs.logmsg`` at PBS's level; each
    one record, `one_line` (a traceback's lines too, as the bridge logs its own). Not a
    record per line: a job owner's value of 100,000 line breaks in a message made as many
    records, each with PBS's stamp."""
    for name, level, message, obj in records:
        try:
            if obj and obj[0] == "Job" and hasattr(pbs, "logjobmsg"):
                pbs.logjobmsg(obj[1], one_line(message))
                continue
            pbs_level = (pbs.LOG_ERROR if level >= ERROR_LEVEL else
                         pbs.LOG_WARNING if level >= WARNING_LEVEL else
                         pbs.LOG_DEBUG if level >= INFO_LEVEL else
                         getattr(pbs, "EVENT_DEBUG3", pbs.LOG_DEBUG))
            pbs.logmsg(pbs_level, one_line(f"{str(name).removeprefix('pbsplug.hook.')}: "
                                           f"{message}"))
        except Exception:  # a log line must never fail the hook
            pass


class PluginHookError(RuntimeError):
    """The plugin's hook raised: PBS's hook error (15136), where fail_action applies."""


def finish(pbs: Any, pevent: Any, outcome: Mapping[str, Any], types: Types) -> None:
    """Carry out the plugin's outcome, ``{"kind", "detail", "changes", "hook", "event"}``, as
    a PBS hook ends: changes set (after an accept or a reject), then ``accept()`` /
    ``reject(msg)`` (SystemExit), or an exception for an error or an alarm."""
    kind, detail = outcome["kind"], outcome.get("detail")
    if kind in ("accept", "reject"):
        apply_changes(pbs, pevent, outcome.get("changes") or {}, types)
    if kind == "accept":
        pevent.accept()
    if kind == "reject":
        if detail:
            pevent.reject(one_line(detail))
        pevent.reject()
    what = "got an alarm call" if kind == "alarm" else "failed"
    raise PluginHookError(one_line(f"pbsplug plugin '{outcome.get('hook')}' {what} in "
                                   f"{outcome.get('event')}: {detail}"))
