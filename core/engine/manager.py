"""The server's side of qmgr: which objects a command means, and carrying it out.

`pbsplug.engine.qmgr` knows the language and PBS's rules; this room knows where the objects
live. Commands run in order, each written in one transaction; as OpenPBS
23.06's qmgr reading a file (checked), a refusal or a syntax error does not stop the next
command, and the exit status is the last command's. ``qmgr -c`` text is one command.

- **server**: the ``server`` row; ``scheduling`` and ``scheduler_iteration`` are also the
  default scheduler's.
- **queue**, **node**, **resource** and plugin-registered types: rows of their type. A node
  starts ``free`` on this host; a busy queue (jobs in it) or node (jobs on it) cannot be
  deleted (15027 ``Cannot delete busy object``).
- **sched**: ``default`` is made from the server's attributes; other schedulers are rows,
  and become scheduler instances beside those plugins contribute.
- **hook**: a hook is a plugin. ``list``/``print`` show each installed plugin's hook
  attributes; ``set``/``unset`` write them to the site config (keeping its comments);
  ``create hook X`` adds ``[plugins.X]`` with ``enabled = true`` (X must be installed);
  ``delete hook X`` removes that section. The server reloads its plugins after each change.

Each create, delete, set and unset first fires the ``management`` event for each object it
names; a reject refuses the command with 15136 and the hook's text. Then a node's create, set
or unset fires ``modifyvnode`` for each vnode as the command leaves it. Every hook of a
command is judged before anything of it is written, outside any transaction, and the server
serves while they run (`Engine._drive`: a hook may itself ask the server for something);
what they accepted is then written in one transaction, on top of the vnodes as they are
then (`Engine.vnode_steps`, pbsnodes' too: another request's write meanwhile is kept, and
one to what the command changes refuses it, nothing of it written). A refusal at any
object leaves every object as it was, and the vnodes of a command refused by a management
hook are told no change.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from ..objects import is_route_queue
from ..settings import PluginInfo
from ..siteconfig import ConfigError
from ..units import parse_exec_vnode
from . import partitions, qmgr
from .errors import PBSE_SYSTEM, STOPPING, PbsError, stopped
from .home import LOG_ADMIN, log_events
from .qmgr import QmgrError, QmgrSyntaxError

if TYPE_CHECKING:
    from ..runner import Outcome
    from .server import Caller, Engine

    #: What a command asks its driver for (`Engine._drive`): an event's outcome.
    _Ask = tuple[str, Caller, dict[str, Any]]

PBSE_ATTRTYPE = 15026
PBSE_OBJBUSY = 15027
PBSE_QUE_INCOMPLETE = 15030
PBSE_MIXENTLIMS = 15141
PBSE_RESCBUSY = 15174
PBSE_HOOKERROR = 15136
PBSE_SCHED_NO_DEL = 15214
MAX_SCHED_NAME = 15

#: PBS's old-style limits (a queue's max_queuable is one too) and its new-style, entity ones,
#: which OpenPBS 23.06 never lets be set together, anywhere (`Manager._check_limit_styles`).
OLD_STYLE_LIMITS = frozenset({"max_running", "max_user_run", "max_group_run"})
OLD_STYLE_QUEUE_LIMITS = OLD_STYLE_LIMITS | {"max_queuable"}
NEW_STYLE_LIMITS = frozenset({"max_run", "max_run_res", "max_run_soft", "max_run_res_soft",
                              "max_queued", "max_queued_res", "queued_jobs_threshold",
                              "queued_jobs_threshold_res"})
#: The new-style limits whose being set refuses an old-style one: on the server its run
#: limits, on a queue also max_queued and queued_jobs_threshold (PBS looks at no others).
NEW_STYLE_SEEN = frozenset({"max_run", "max_run_res", "max_run_soft", "max_run_res_soft"})
NEW_STYLE_SEEN_QUEUE = NEW_STYLE_SEEN | {"max_queued", "queued_jobs_threshold"}

#: Queue attributes of one queue type, execution's then route's, in OpenPBS 23.06's order:
#: its check of a queue names the first one its type does not take (`_type_conflict`).
EXECUTION_QUEUE_ONLY = ("checkpoint_min", "default_chunk", "resources_available",
                        "kill_delay", "max_user_run", "max_group_run", "max_run",
                        "max_run_res", "max_run_soft", "max_run_res_soft", "hasnodes",
                        "backfill_depth")
ROUTE_QUEUE_ONLY = ("route_destinations", "route_held_jobs", "route_waiting_jobs",
                    "route_retry_time", "route_lifetime")

#: Hook attributes as qmgr names them -> as the site config names them.
_HOOK_KEYS = {"enabled": "enabled", "event": "events", "order": "order", "alarm": "alarm",
              "freq": "freq", "fail_action": "fail_action", "user": "user", "debug": "debug"}


#: The most commands (lines or ``;``-separated) one qmgr request may carry: a request is
#: limited in work, not only in bytes (300,000 ``list server`` held the server 15 s).
MAX_COMMANDS = 10_000


class Manager:
    """Runs qmgr text for one engine."""

    def __init__(self, engine: Engine):
        self.engine = engine
        #: Declarations read from disabled plugins an admin named by their PBS hook name.
        self._declared: dict[str, PluginInfo] = {}

    # -- the request ------------------------------------------------------------------------------
    def run(self, caller: Caller, text: str, one: bool = False) -> dict[str, Any]:
        """`steps`, its hooks run in the server's thread (a request made by the server)."""
        result: dict[str, Any] = self.engine._drive(self.steps(caller, text, one),
                                                    defer=False)
        return result

    def steps(self, caller: Caller, text: str, one: bool = False
              ) -> Generator[_Ask, Outcome | None, dict[str, Any]]:
        """``{"output": what qmgr prints, "errors": [lines for stderr], "code": PBS's number
        of the last error, or 0, "status": qmgr's exit status}``, each hook event's outcome
        asked of its driver (`Engine._drive`).

        As OpenPBS 23.06's qmgr (checked): with `one` (``qmgr -c``) the text is one command,
        ``;`` and newlines included; otherwise (commands read from a file) every command runs,
        an error does not stop the next, and the exit status is the last command's."""
        eng = self.engine
        eng.reload_site()  # a site.toml edited by hand since the last look counts already
        registry = eng.plugins.attribute_registry()
        if text.count("\n") + text.count(";") > MAX_COMMANDS:  # before parsing any of it
            return {"output": "", "errors": [
                f"qmgr: more than {MAX_COMMANDS} commands in one request",
                "qmgr: Error (15004) returned from server"], "code": 15004, "status": 156}
        output: list[str] = []
        errors: list[str] = []
        code = status = 0
        active: dict[str, list[str]] = {}  # qmgr's `active` objects, for this text
        for command in [text] if one else qmgr.split_commands(text):
            try:
                cmd = qmgr.parse_command(command, eng.server_name, registry)
            except QmgrSyntaxError as err:
                errors += err.client_text().splitlines()
                code, status = err.code, err.exit_status
                continue
            if cmd is None:  # quit, exit
                break
            out, lines, status, error = yield from self._one(caller, cmd, active)
            output.append(out)
            errors += lines
            code = error or code
        return {"output": "".join(output), "errors": errors, "code": code, "status": status}

    def _one(self, caller: Caller, cmd: qmgr.Command, active: dict[str, list[str]]
             ) -> Generator[_Ask, Outcome | None, tuple[str, list[str], int, int]]:
        """One command: (what it prints, its error lines, its exit status, PBS's number of
        its error or 0), as OpenPBS 23.06's qmgr answers it (checked)."""
        plural = {"queue": "Queues", "node": "Nodes"}
        if cmd.verb == "active":
            return self._active(cmd, active)
        if cmd.names is None and cmd.obj_type in plural:  # no names: the active ones
            if not active.get(cmd.obj_type):
                return "", [f"No Active {plural[cmd.obj_type]}, nothing done."], 0, 0
            cmd.names = list(active[cmd.obj_type])
        reading = cmd.verb in ("list", "print")
        if cmd.pbshook and cmd.verb == "print":  # (OpenPBS's qmgr exits 1, saying nothing)
            return "", ["qmgr: print pbshook is not supported; list pbshook shows a PBS "
                        "hook"], 1, 0
        if cmd.pbshook and cmd.verb in ("create", "delete"):
            err = QmgrError(qmgr.PBSE_IVALREQ, obj_type="hook", obj_name=(cmd.names or [""])[0])
            return "", err.client_text(cmd.server or "default").splitlines(), 156, err.code
        if reading and cmd.names and cmd.obj_type != "server":
            # Each name on its own: the known ones are shown, each unknown one is an error,
            # and any error makes the exit status 1.
            out: list[str] = []
            lines, error = [], 0
            for name in cmd.names:
                one = qmgr.Command(cmd.verb, cmd.obj_type, [name], cmd.attrs, cmd.text,
                                   cmd.pbshook, cmd.server)
                try:
                    text = yield from self.command(caller, one)
                    heading = qmgr.print_heading(cmd.obj_type)
                    if out and heading and text.startswith(heading):
                        text = text[len(heading):]  # one heading for them all
                    out.append(text)
                except QmgrError as err:
                    lines += self._error_lines(caller, one, err)
                    if cmd.obj_type == "sched" and err.code == qmgr.PBSE_UNKSCHED:
                        continue  # (OpenPBS's qmgr exits 0, saying nothing)
                    error = err.code
            return "".join(out), lines, 1 if error else 0, error
        try:
            return (yield from self.command(caller, cmd)), [], 0, 0
        except QmgrError as err:
            lines = self._error_lines(caller, cmd, err)
            if reading and err.code == PBSE_HOOKERROR and caller.role != "manager" and \
                    cmd.verb == "list":
                return "", lines[:1], 0, 0  # (PBS's qmgr prints only why, and exits 0)
            return "", lines, 1 if reading else (err.code % 256 or 1), err.code

    @staticmethod
    def _active(cmd: qmgr.Command, active: dict[str, list[str]]
                ) -> tuple[str, list[str], int, int]:
        """``active``: names the queues or nodes that commands without names act on, or
        lists them; as OpenPBS 23.06's qmgr (checked), ``active server`` lists the one
        server (naming servers prints nothing) and ``active sched`` lists none. For other
        types PBS's qmgr does nothing (it exits 0, or 1 when names are given, and says
        nothing; ``active sched NAME`` crashes it): pbsplug says so in a line, exiting 1,
        or 0 without names, and 2 for a sched named (qmgr's status for a bad object type,
        where PBS's has none to give)."""
        if cmd.obj_type == "server":
            return ("" if cmd.names else "Active servers:\ndefault\n"), [], 0, 0
        if cmd.obj_type in ("queue", "node"):
            if cmd.names:
                active[cmd.obj_type] = list(cmd.names)
                return "", [], 0, 0
            names = active.get(cmd.obj_type, [])
            return f"Active {cmd.obj_type}s:\n" + "".join(f"{n}\n" for n in names), [], 0, 0
        if cmd.obj_type == "sched" and not cmd.names:
            return "Active schedulers:\n", [], 0, 0
        word = "pbshook" if cmd.pbshook else cmd.obj_type
        line = f"qmgr: active takes a server, queue or node, not a {word}"
        if not cmd.names:
            return "", [line], 0, 0
        return "", [line], 2 if cmd.obj_type == "sched" else 1, qmgr.PBSE_IVALREQ

    def _error_lines(self, caller: Caller, cmd: qmgr.Command, err: QmgrError) -> list[str]:
        """What qmgr prints for `err`: about the first object named (none for the server),
        a non-manager's hook refusal in PBS's words (OpenPBS 23.06: about the hook named,
        as any error; without names, ``list`` says why alone and ``print`` names none)."""
        eng = self.engine
        if not err.obj_name and cmd.names:
            err.for_object(cmd.obj_type, cmd.names[0])
        if cmd.obj_type == "server":  # (the server as named: `set server vm x = 1`)
            err.obj_name = cmd.server
        if err.code == PBSE_HOOKERROR and caller.role != "manager":
            err.message = (f"{caller.user}@{eng.host} is unauthorized to access hooks data "
                           f"from server {eng.host}")
            if cmd.verb == "list" and not cmd.names:
                return [err.message]
            if cmd.verb == "print" and not cmd.names:
                err.obj_name = ""
        elif err.code == PBSE_HOOKERROR and cmd.verb in ("list", "print") and (
                err.message.endswith("does not exist!")):
            err.message = "hook not found"
        return err.client_text(cmd.server or "default").splitlines()

    def command(self, caller: Caller, cmd: qmgr.Command
                ) -> Generator[_Ask, Outcome | None, str]:
        eng = self.engine
        shown: dict[str, str] = {}  # plugin -> the PBS hook name it was asked by
        if cmd.obj_type == "sched":  # seed 001 spells it `partitions`
            for op in cmd.attrs:
                if op.name == "partitions":
                    op.name = "partition"
        registry = eng.plugins.attribute_registry()
        defs = qmgr.definitions(cmd.obj_type, registry)
        qmgr.check_privilege(cmd, caller.role, defs)
        # (after the privilege: finding the plugin imports every installed one)
        if cmd.pbshook and cmd.names:  # PBS_power -> the plugin that declares that pbs_name
            shown = {self._plugin_of_pbs_name(n): n for n in cmd.names}
            cmd.names = list(shown)
        objects = self.objects(cmd.obj_type)
        if cmd.obj_type == "hook" and not cmd.names:
            # As PBS's qmgr: `list hook` is the site hooks, `list pbshook` the pbs hooks
            # (by their PBS names); a disabled plugin's declaration gives its type.
            kind = "pbs" if cmd.pbshook else "site"
            infos = {p: self._declaration(p) for p in objects}
            objects = {p: a for p, a in self._hooks().items() if a["type"] == kind}
            if cmd.pbshook:
                shown = {p: getattr(infos.get(p), "pbs_name", None) or p for p in objects}
        if cmd.obj_type == "server":
            names = [eng.server_name]
        elif cmd.verb == "create":
            names = list(cmd.names or [])
            if not names:  # (`create queue @default`: a server, and no name)
                raise self._nameless(cmd.obj_type)
        else:
            names = cmd.targets(objects)
            for name in names:
                if name not in objects:
                    raise self._unknown(cmd.obj_type, name)
        if cmd.verb in ("list", "print"):
            for op in cmd.attrs:
                if qmgr.lookup(defs, op.name) is None:
                    raise QmgrError(qmgr.PBSE_NOATTR, obj_type=cmd.obj_type)
        if cmd.verb == "list":
            return "".join(qmgr.list_object(cmd.obj_type, shown.get(n, n), objects[n], defs,
                                             role=caller.role, only=cmd.attrs) for n in names)
        if cmd.verb == "print":
            chosen = {n: objects[n] for n in names}
            if cmd.obj_type == "server":
                return qmgr.print_server(objects[eng.server_name], defs,
                                         queues=self.objects("queue"),
                                         queue_defs=qmgr.definitions("queue", registry),
                                         custom_resources=self.resource_types(),
                                         role=caller.role)
            return qmgr.print_objects(cmd.obj_type, chosen, defs, self.resource_types(),
                                      role=caller.role)
        # One command is all or nothing. Its hooks are judged first, outside any
        # transaction (the server serves meanwhile): every name's management hooks, then
        # each vnode's modifyvnode on a copy as the command leaves it. Then its changes to
        # every object it names are one transaction, so a refusal for the last name leaves
        # the first ones as they were, and no vnode is told a change that is not made.
        seen = eng.store.changes
        for name in names:
            yield from self._management(caller, cmd, name)
        if cmd.obj_type == "node" and cmd.verb != "delete":
            if eng.store.changes != seen:  # (the management hooks ran while others wrote:
                # the command applies to the vnodes as they are now, not as first read)
                objects, seen = self.objects("node"), eng.store.changes
            named = {op.full_name for op in cmd.attrs}
            planned = {name: (*self._node_change(cmd, name, objects, defs), named)
                       for name in names}

            def fresh(name: str) -> dict[str, Any]:
                """Vnode `name`'s stored row now, the command checked again on it."""
                nonlocal objects, seen
                if eng.store.changes != seen:  # (others' requests ran meanwhile)
                    objects, seen = self.objects("node"), eng.store.changes
                return self._node_change(cmd, name, objects, defs)[0]

            try:
                yield from eng.vnode_steps(caller, planned, fresh)
            except QmgrError:
                raise
            except PbsError as err:  # (the stop's, CHANGED_MEANWHILE)
                raise QmgrError(err.code, err.message, obj_type="node",
                                obj_name=err.obj or "") from None
        else:
            with eng.store.transaction():
                if eng.store.changes != seen or cmd.obj_type == "hook":
                    objects = self.objects(cmd.obj_type)  # (others' requests ran meanwhile)
                for name in names:
                    if cmd.obj_type == "hook":
                        self._hook(cmd, name, objects.get(name), defs)
                    elif cmd.verb == "create":
                        self._create(cmd, name, objects, defs)
                    elif name not in objects:  # (deleted meanwhile)
                        raise self._unknown(cmd.obj_type, name)
                    elif cmd.verb == "delete":
                        self._delete(cmd.obj_type, name, objects[name])
                    else:
                        self._change(cmd, name, objects[name], defs)
            if cmd.obj_type == "node" and cmd.verb == "delete":  # (once the command is
                for name in names:  # written whole: one refused for a busy vnode deletes none)
                    eng.vnode_deleted(name)
        for name in names:
            eng.log(LOG_ADMIN, cmd.obj_type.capitalize(), name,
                    f"{cmd.text.strip()} at request of {caller.user}@{eng.host}")
        eng.want_cycle = True
        return ""

    def _management(self, caller: Caller, cmd: qmgr.Command, name: str
                    ) -> Generator[_Ask, Outcome | None, None]:
        attribs = [{"name": op.full_name, "op": op.op or None, "value": op.value}
                   for op in cmd.attrs]
        outcome = yield from self._asked("management", caller, name, {"management": {
            "cmd": cmd.verb, "objtype": cmd.obj_type, "objname": name, "attribs": attribs}},
            cmd.obj_type)
        if not outcome.accepted:
            raise QmgrError(PBSE_HOOKERROR, outcome.message, obj_type=cmd.obj_type,
                            obj_name=name)

    def _asked(self, event: str, caller: Caller, name: str, objects: dict[str, Any],
               obj_type: str = "node") -> Generator[_Ask, Outcome | None, Outcome]:
        """`event`'s outcome for object `name`, asked of the driver (`Engine._drive`), with
        the command's `caller` as event.requestor (PBS's: the user who ran qmgr). One the
        server's stop gave up (None: its chain given up while it waited, or `stopped`) is
        the command's refusal, 15010 (the server is stopping), never the hook's error."""
        outcome = yield event, caller, objects
        if outcome is None or stopped(outcome, self.engine.stopping):
            raise QmgrError(PBSE_SYSTEM, STOPPING, obj_type=obj_type, obj_name=name)
        return outcome

    # -- where objects live -----------------------------------------------------------------------
    def objects(self, obj_type: str) -> dict[str, dict[str, Any]]:
        eng = self.engine
        if obj_type == "server":
            server = eng.server_attrs()
            return {eng.server_name: {**server, "total_jobs": sum(eng.job_counts().values())}}
        if obj_type == "node":
            return {n: {k: v for k, v in vn.to_dict().items() if k != "name"}
                    for n, vn in eng._vnodes().items()}
        if obj_type == "sched":
            server = eng.store.get("server", "server") or {}
            default = {"scheduling": server.get("scheduling", True),
                       "scheduler_iteration": server.get("scheduler_iteration", 600),
                       "sched_host": eng.host, "sched_port": 15004,
                       "sched_priv": str(eng.home.root / "sched_priv"),
                       "sched_log": str(eng.home.root / "sched_logs"),
                       "sched_user": server_user(), "state": "idle"}
            stored = eng.store.all("sched")
            default.update(stored.pop("default", {}))  # its own policy attributes
            live = {name: {**attrs, "state": eng.sched_procs.state(name)}
                    for name, attrs in stored.items()}
            return {"default": default, **live}
        if obj_type == "hook":
            return self._hooks()
        if obj_type == "queue":  # with total_jobs, state_count and resources_assigned, as
            from .server import state_count  # PBS's qmgr lists them

            counts = eng.queue_counts(_COUNTED)
            assigned = eng.queues_assigned()
            return {name: {**attrs, "total_jobs": sum(counts.get(name, {}).values()),
                           "state_count": state_count(counts.get(name, {})) + " ",
                           **({"resources_assigned": assigned[name]} if assigned.get(name)
                              else {})}
                    for name, attrs in eng.store.all("queue").items()}
        return eng.store.all(obj_type)

    def resource_types(self) -> dict[str, str]:
        return {n: str(a.get("type", "string")) for n, a in
                self.engine.store.all("resource").items()}

    def _unknown(self, obj_type: str, name: str) -> QmgrError:
        codes = {"queue": qmgr.PBSE_UNKQUE, "node": qmgr.PBSE_UNKNODE,
                 "sched": qmgr.PBSE_UNKSCHED, "resource": qmgr.PBSE_UNKRESC}
        if obj_type == "hook":
            return QmgrError(PBSE_HOOKERROR, f"{name} does not exist!", obj_type="hook",
                             obj_name=name)
        return QmgrError(codes.get(obj_type, qmgr.PBSE_IVALREQ),
                         None if obj_type in codes else f"Unknown {obj_type}",
                         obj_type=obj_type, obj_name=name)

    @staticmethod
    def _nameless(obj_type: str) -> QmgrError:
        """``create <type> @server``, no name: what OpenPBS 23.06's server answers (checked),
        and for a resource (PBS's 15014 names nothing) what was wrong."""
        if obj_type == "queue":  # (its text this time: `Queue name too long`)
            return QmgrError(qmgr.PBSE_QUENBIG, obj_type=obj_type)
        if obj_type == "node":
            return QmgrError(qmgr.PBSE_UNKNODE, obj_type=obj_type)
        if obj_type == "sched":
            return QmgrError(qmgr.PBSE_SCHEDEXIST, obj_type=obj_type)
        if obj_type == "hook":
            return QmgrError(PBSE_HOOKERROR, "no hook name specified", obj_type=obj_type)
        if obj_type == "resource":
            return QmgrError(qmgr.PBSE_BADATVAL, f"{qmgr.MESSAGES[qmgr.PBSE_BADATVAL]}: no "
                             "resource name given", obj_type=obj_type)
        return QmgrError(qmgr.PBSE_IVALREQ, f"no {obj_type} name given", obj_type=obj_type)

    # -- create, delete, set, unset ---------------------------------------------------------------
    def _create(self, cmd: qmgr.Command, name: str, objects: dict[str, dict[str, Any]],
                defs: dict[str, qmgr.AttrDef]) -> dict[str, Any]:
        """What `create` stores of object `name` (written here unless it is a vnode: its
        hooks judge it first)."""
        eng = self.engine
        if name in objects:
            code = {"queue": qmgr.PBSE_QUEEXIST, "node": qmgr.PBSE_NODEEXIST,
                    "sched": qmgr.PBSE_SCHEDEXIST}.get(cmd.obj_type, qmgr.PBSE_IVALREQ)
            raise QmgrError(code, None if code != qmgr.PBSE_IVALREQ else
                            f"{cmd.obj_type} {name} already exists", obj_type=cmd.obj_type,
                            obj_name=name)
        if cmd.obj_type == "sched" and len(name) > MAX_SCHED_NAME:
            raise QmgrError(qmgr.PBSE_SCHED_NAME_BIG, obj_type="sched", obj_name=name)
        qmgr.check_object_name(cmd.obj_type, name)
        otype = eng.plugins.attribute_registry().object_types.get(cmd.obj_type)
        if otype is not None and otype.max_name_length and len(name) > otype.max_name_length:
            raise QmgrError(qmgr.PBSE_BADATVAL, f"{cmd.obj_type} name is longer than "
                            f"{otype.max_name_length}", obj_type=cmd.obj_type, obj_name=name)
        start: dict[str, Any] = {}
        if cmd.obj_type == "sched":
            start = partitions.sched_defaults(name, eng.home.root, eng.host, server_user(),
                                              self.objects("sched"))
        if cmd.obj_type == "node":
            start = {"state": "free", "Mom": eng.host, "ntype": "PBS",
                     "resources_available": {"host": eng.host, "vnode": name},
                     "sharing": "default_shared", "resv_enable": True,
                     "last_used_time": int(eng.clock())}  # seed 004: set when created
        new = self._apply(cmd, name, start, "create", defs)
        self._check_limit_styles(cmd, name, new)
        self._check_route(cmd, name, new)
        self._check_partitions(cmd, name, {}, new,
                               {"sched_priv", "sched_log"} if cmd.obj_type == "sched" else set())
        self._check_queue_type(cmd, name, {}, new)
        if cmd.obj_type == "node":
            return new
        if cmd.obj_type == "sched":
            partitions.make_directories(new)
            self._validate_directories(name, new)
            new.pop("state", None)  # live, from the scheduler's process
        with eng.store.transaction() as st:
            st.put(cmd.obj_type, name, new)
        return new

    def _delete(self, obj_type: str, name: str, attrs: dict[str, Any]) -> None:
        eng = self.engine
        if obj_type == "server":
            raise QmgrError(qmgr.PBSE_IVALREQ, obj_type="server", obj_name=name)
        if obj_type == "sched" and name == "default":
            raise QmgrError(PBSE_SCHED_NO_DEL, "Can not delete Scheduler", obj_type="sched",
                            obj_name=name)
        active = eng.store.jobs(("Q", "H", "W", "R", "E", "T", "S"), lean=True)
        busy = False
        if obj_type == "queue":
            busy = any(a.get("queue") == name for a in active.values())
        elif obj_type == "node":
            busy = any(n == name for a in active.values()
                       for n, _ in parse_exec_vnode(a.get("exec_vnode", "")))
        if busy:
            raise QmgrError(PBSE_OBJBUSY, "Cannot delete busy object", obj_type=obj_type,
                            obj_name=name)
        if obj_type == "resource" and self._resource_set(name, active):
            # PBS's 15174: a resource set on an object (a limit, a default, a vnode's
            # resources, a job's request) stays; left there it would be read as text.
            raise QmgrError(PBSE_RESCBUSY, "Resource busy", obj_type=obj_type,
                            obj_name=name)
        with eng.store.transaction() as st:
            st.delete(obj_type, name)
        if obj_type == "queue":  # (one made again of its name lists nothing assigned yet)
            eng.assigned.forget(name)

    def _resource_set(self, name: str, jobs: dict[str, dict[str, Any]]) -> bool:
        """Whether resource `name` is set on the server, a queue, a vnode or a job not
        done (a key of one of their resource mappings)."""
        store = self.engine.store
        objects = [store.get("server", "server") or {}, *store.all("queue").values(),
                   *store.all("node").values()]
        return any(isinstance(value, dict) and name in value
                   for attrs in objects for value in attrs.values()) or any(
            name in (attrs.get("Resource_List") or {}) for attrs in jobs.values())

    def _node_change(self, cmd: qmgr.Command, name: str, objects: dict[str, dict[str, Any]],
                     defs: dict[str, qmgr.AttrDef]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Vnode `name`'s stored row and what the command (create, set, unset) makes of it,
        checked, from `objects` (`objects("node")`); nothing written."""
        if cmd.verb == "create":
            return {}, self._create(cmd, name, objects, defs)
        if name not in objects:  # (deleted meanwhile)
            raise self._unknown("node", name)
        return self._change(cmd, name, objects[name], defs)

    def _change(self, cmd: qmgr.Command, name: str, attrs: dict[str, Any],
                defs: dict[str, qmgr.AttrDef]) -> tuple[dict[str, Any], dict[str, Any]]:
        """The set or unset of object `name`, written unless it is a vnode; its row as it
        was and as it is now (a vnode's: as the command makes it)."""
        eng = self.engine
        if cmd.obj_type == "sched" and name == "default":
            partitions.check_sched(name, {op.name for op in cmd.attrs}, attrs,
                                   partitions.World({}, {}, {}))
        new = self._apply(cmd, name, attrs, cmd.verb, defs)
        self._check_limit_styles(cmd, name, new)
        self._check_route(cmd, name, new)
        self._check_partitions(cmd, name, attrs, new)
        self._check_queue_type(cmd, name, attrs, new)
        if cmd.obj_type == "server" and new.get("default_queue") is not None and (
                eng.store.get("queue", str(new["default_queue"])) is None):
            # PBS refuses a default_queue that does not exist (15018 Unknown queue).
            raise QmgrError(qmgr.PBSE_UNKQUE, obj_type="server", obj_name=name)
        if cmd.obj_type == "node":
            stored = eng.store.get("node", name) or {}
            derived = {"resources_assigned", "jobs", "resv"}
            keep = {k: v for k, v in new.items() if k not in derived}
            states = set(str(keep.get("state", "free")).split(",")) - {
                "job-busy", "job-exclusive", "resv-exclusive", "free", ""}
            keep["state"] = ",".join(sorted(states)) or "free"
            return stored, keep
        if cmd.obj_type == "server" or (cmd.obj_type == "sched" and name == "default"):
            server = eng.store.get("server", "server") or {}
            with eng.store.transaction() as st:
                if cmd.obj_type == "sched":
                    # scheduling and scheduler_iteration are the server's; the rest of
                    # default's own attributes (its policy) live in its sched row.
                    shared = ("scheduling", "scheduler_iteration")
                    st.put("server", "server", {**server, **{
                        k: new[k] for k in shared if k in new}})
                    st.put("sched", "default", {k: v for k, v in new.items()
                                                if k not in shared and k not in _DEFAULT_VIEW})
                else:
                    new.pop("total_jobs", None)
                    st.put("server", "server", new)
            if cmd.obj_type == "server":  # read here once, not at each line
                eng.log.events = log_events(new)
        else:
            if cmd.obj_type == "sched":
                self._validate_directories(name, new)
                new.pop("state", None)  # live, from the scheduler's process
                if "scheduling" in {op.name for op in cmd.attrs}:
                    eng.sched_procs.forgive(name)  # a new start after NEEDS_ATTENTION
            if cmd.obj_type == "queue":  # counted, not stored
                new.pop("total_jobs", None)
                new.pop("state_count", None)
                new.pop("resources_assigned", None)
            with eng.store.transaction() as st:
                st.put(cmd.obj_type, name, new)
        return attrs, new

    def _validate_directories(self, name: str, attrs: dict[str, Any]) -> None:
        """A scheduler about to schedule must have good sched_priv and sched_log; if not,
        its comment says which and its scheduling goes off (PBS's rule; the qmgr command
        itself succeeds)."""
        if not qmgr_bool(attrs.get("scheduling")):
            return
        problems = partitions.directory_problems(attrs)
        if problems:
            attrs["comment"] = problems[0]
            attrs["scheduling"] = False
            self.engine.log(LOG_ADMIN, "Sched", name, f"{problems[0]}: scheduling is off "
                            f"(sched_priv {attrs.get('sched_priv')}, sched_log "
                            f"{attrs.get('sched_log')})")

    def _check_limit_styles(self, cmd: qmgr.Command, name: str, new: dict[str, Any]) -> None:
        """PBS's 15141 (OpenPBS 23.06, checked): a new-style limit is not set while an
        old-style one is set on the server or any queue, nor an old-style one while a
        `NEW_STYLE_SEEN` one is (the server's max_queued refuses none); both in one
        command are refused too. `new` is the object as the command leaves it."""
        if cmd.obj_type not in ("server", "queue") or cmd.verb not in ("set", "create"):
            return
        given = {op.name for op in cmd.attrs}
        old_given = given & (OLD_STYLE_QUEUE_LIMITS if cmd.obj_type == "queue"
                             else OLD_STYLE_LIMITS)
        new_given = given & NEW_STYLE_LIMITS
        if not old_given and not new_given:
            return
        store = self.engine.store
        server = new if cmd.obj_type == "server" else store.get("server", "server") or {}
        queues = store.all("queue")
        if cmd.obj_type == "queue":
            queues[name] = new

        def any_set(names: frozenset[str], queue_names: frozenset[str]) -> bool:
            return any(server.get(n) not in (None, {}, []) for n in names) or any(
                attrs.get(n) not in (None, {}, []) for attrs in queues.values()
                for n in queue_names)

        if (new_given and any_set(OLD_STYLE_LIMITS, OLD_STYLE_QUEUE_LIMITS)) or (
                old_given and any_set(NEW_STYLE_SEEN, NEW_STYLE_SEEN_QUEUE)):
            raise QmgrError(PBSE_MIXENTLIMS, "Cannot mix old and new style queue/run limit "
                            "enforcement types", obj_type=cmd.obj_type, obj_name=name)

    @staticmethod
    def _check_queue_type(cmd: qmgr.Command, name: str, old: dict[str, Any],
                          new: dict[str, Any]) -> None:
        """PBS's 15026 (OpenPBS 23.06, checked) for a command that leaves a queue with an
        attribute its type does not take (`_type_conflict`). PBS keeps the attribute and
        answers so, and then to every later change of the queue while it stays; the engine
        keeps nothing of the command, and a queue stored so before is let be."""
        if cmd.obj_type != "queue" or cmd.verb not in ("set", "create"):
            return
        bad = _type_conflict(new)
        if bad is not None and _type_conflict(old) is None:
            raise QmgrError(PBSE_ATTRTYPE, f"Warning: type of queue {name} incompatible "
                            f"with attribute {bad}", obj_type="queue", obj_name=name)

    @staticmethod
    def _check_route(cmd: qmgr.Command, name: str, new: dict[str, Any]) -> None:
        """PBS's 15030 for a queue enabled without a queue_type, or a route queue enabled
        without a route_destinations (OpenPBS 23.06, checked: at create too, and a type or
        destinations given in the same request count; unsetting the list of an enabled
        route queue is let be), and its 15137 for any unset of a queue_type (checked:
        enabled or not), which would leave an enabled queue without one."""
        if cmd.obj_type == "queue" and cmd.verb == "unset" and \
                "queue_type" in {op.name for op in cmd.attrs}:
            raise QmgrError(qmgr.PBSE_NEEDQUET, obj_type="queue", obj_name=name)
        if cmd.obj_type == "queue" and "enabled" in {op.name for op in cmd.attrs} and \
                qmgr_bool(new.get("enabled")) and (not new.get("queue_type") or (
                    is_route_queue(new) and not new.get("route_destinations"))):
            raise QmgrError(PBSE_QUE_INCOMPLETE, "Cannot enable queue, incomplete definition",
                            obj_type="queue", obj_name=name)

    def _check_partitions(self, cmd: qmgr.Command, name: str, old: dict[str, Any],
                          new: dict[str, Any], also: set[str] | frozenset[str] = frozenset()
                          ) -> None:
        """PBS's rules for schedulers, queues and nodes in partitions (`partitions`)."""
        if cmd.obj_type not in ("sched", "queue", "node", "server"):
            return
        self.check_partitions(cmd.obj_type, name, old, new,
                              {op.name for op in cmd.attrs} | set(also))

    def check_partitions(self, obj_type: str, name: str, old: dict[str, Any],
                         new: dict[str, Any], changed: set[str],
                         world: partitions.World | None = None) -> None:
        """`_check_partitions` for a change of `changed` attributes, from qmgr or a hook
        (a periodic hook's vnode changes meet qmgr's rules: a busy vnode keeps its
        partition). `world` (`partition_world`) may be made once for many changes."""
        if obj_type == "node" and "partition" not in changed and "queue" not in changed:
            return
        world = world or self.partition_world(busy=obj_type == "node")
        if obj_type == "server":
            partitions.check_server(name, changed, new, world)
        elif obj_type == "sched":
            partitions.check_sched(name, changed, new, world)
        elif obj_type == "queue":
            partitions.check_queue(name, changed, new, world)
        else:
            partitions.check_node(name, changed, old, new, world)

    def partition_world(self, busy: bool = True) -> partitions.World:
        """What the partition checks read besides the object: the schedulers, queues,
        vnodes and server formula, and with `busy` the vnodes running jobs or held by
        reservations."""
        eng = self.engine
        held: set[str] = set()
        if busy:
            for attrs in eng.store.jobs(("R", "E", "S", "U"), lean=True).values():
                held.update(n for n, _ in parse_exec_vnode(attrs.get("exec_vnode", "")))
            for resv in eng.resvs.objects():
                held.update(n for n, _ in parse_exec_vnode(str(resv.resv_nodes or "")))
        server = eng.store.get("server", "server") or {}
        return partitions.World(self.objects("sched"), eng.store.all("queue"),
                                eng.store.all("node"), frozenset(held),
                                server.get("job_sort_formula"))

    def _apply(self, cmd: qmgr.Command, name: str, attrs: dict[str, Any], verb: str,
               defs: dict[str, qmgr.AttrDef]) -> dict[str, Any]:
        try:
            return qmgr.apply(attrs, cmd.attrs, verb, defs, self.resource_types(),
                              obj_type=cmd.obj_type)
        except QmgrError as err:
            raise err.for_object(cmd.obj_type, name) from None

    # -- hooks are plugins ------------------------------------------------------------------------
    def _declaration(self, plugin: str) -> PluginInfo | None:
        """The plugin's `PluginInfo`, or None. A disabled plugin is not imported; an admin
        naming a PBS hook or listing hooks by type is the one time its declaration is read
        (a blocked one stays unread), and it is kept for `_hooks`."""
        record = self.engine.plugins.records.get(plugin)
        if record is None:
            return None
        if record.info is not None:
            return record.info
        if plugin not in self._declared and record.status == "disabled" and \
                record.entry_point:
            try:
                info = getattr(record.entry_point.load(), "plugin_info", None)
            except Exception:  # noqa: BLE001 - a broken plugin is simply no pbs hook
                info = None
            if isinstance(info, PluginInfo):
                self._declared[plugin] = info
        return self._declared.get(plugin)

    def _plugin_of_pbs_name(self, name: str) -> str:
        """The installed plugin whose ``pbs_name`` is `name` (PBS_power -> power)."""
        for plugin in sorted(self.engine.plugins.records):
            if getattr(self._declaration(plugin), "pbs_name", None) == name:
                return plugin
        raise QmgrError(PBSE_HOOKERROR, f"{name} does not exist!", obj_type="pbshook",
                        obj_name=name)

    def _hooks(self) -> dict[str, dict[str, Any]]:
        plugins = self.engine.plugins
        out = {}
        for name in sorted(set(plugins.installed) | set(plugins.records)):
            record = plugins.get(name)
            attrs = record.attributes if record is not None else None
            if attrs is None and name in self._declared:
                # A disabled pbs hook keeps its type (and so its order range, -1000..2000).
                info = self._declared[name]
                try:
                    attrs = plugins.site.hook_attributes(
                        name, info.hook_attributes(tuple(info.events or ())))
                except (TypeError, ValueError):
                    attrs = None
            if attrs is None:
                out[name] = {"type": "site", "enabled": False}
                continue
            out[name] = {"type": attrs.type, "enabled": bool(attrs.enabled),
                         "event": list(attrs.events), "user": attrs.user,
                         "alarm": attrs.alarm, "order": attrs.order, "debug": attrs.debug,
                         "fail_action": list(attrs.fail_action)}
            if {"periodic", "exechost_periodic"} & set(attrs.events):
                out[name]["freq"] = attrs.freq
        return out

    def _hook(self, cmd: qmgr.Command, name: str, current: dict[str, Any] | None,
              defs: dict[str, qmgr.AttrDef]) -> None:
        from ..siteedit import remove_plugin, update_plugin

        eng = self.engine
        site = eng.home.site
        if cmd.verb == "create":
            if name.startswith("PBS"):  # PBS checks the name before anything else
                raise QmgrError(PBSE_HOOKERROR, f"hook_name '{name}', cannot use PBS as a "
                                "prefix it is reserved for pbs hooks", obj_type="hook",
                                obj_name=name)
            if name not in eng.plugins.installed:
                raise QmgrError(PBSE_HOOKERROR, f"no plugin '{name}' is installed: a hook "
                                f"is a plugin (pip install pbsplug-{name})", obj_type="hook",
                                obj_name=name)
            if name in eng.plugins.site.plugins:
                raise QmgrError(PBSE_HOOKERROR, f"hook name '{name}' already registered, "
                                "try another name", obj_type="hook", obj_name=name)
            values: dict[str, Any] = {"enabled": True}
            self._one_provision_hook(name, self._declared_events(name))
        elif cmd.verb == "delete":
            values = {}
        else:
            new = self._apply(cmd, name, current or {}, cmd.verb, defs)
            qmgr.check_hook(name, new)
            self._one_provision_hook(name, new.get("event") or ())
            values = {}
            for op in cmd.attrs:
                key = _HOOK_KEYS.get(op.name)
                if key is None:
                    raise QmgrError(PBSE_HOOKERROR, f"cannot set hook attribute "
                                    f"'{op.name}' of a plugin", obj_type="hook",
                                    obj_name=name)
                value = new.get(op.name)
                if key == "fail_action" and not value:
                    value = ["none"]
                values[key] = value if value is not None else _default_hook(key)
        try:
            if cmd.verb == "delete":
                remove_plugin(site, name)
            else:
                update_plugin(site, name, values)
        except ConfigError as exc:
            raise QmgrError(PBSE_HOOKERROR, str(exc).splitlines()[0], obj_type="hook",
                            obj_name=name) from None
        self.reload_plugins()

    def _declared_events(self, name: str) -> tuple[str, ...]:
        """The events plugin `name` has, or would have once created: a disabled plugin is
        imported to read them (creating the hook imports it anyway)."""
        from ..events import EVENTS
        from ..plugins import _hookimpl_names

        record = self.engine.plugins.get(name)
        if record is None:
            return ()
        if record.attributes is not None:
            return tuple(record.attributes.events)
        if record.status != "disabled" or record.entry_point is None:
            return ()
        try:
            module = record.entry_point.load()
        except Exception:  # noqa: BLE001 - a broken plugin fails when it is loaded
            return ()
        info = getattr(module, "plugin_info", None)
        declared = getattr(info, "events", None)
        if declared is not None:
            return tuple(e.strip() for e in declared.split(",")) if isinstance(declared, str) \
                else tuple(declared)
        return tuple(h for h in _hookimpl_names(module) if h in EVENTS)

    def _one_provision_hook(self, name: str, events: Any) -> None:
        """PBS allows one provision hook: another hook of the site that has the event
        refuses it (15136, PBS's text)."""
        if "provision" not in events:
            return
        plugins = self.engine.plugins
        for other in sorted(plugins.site.plugins):
            record = plugins.get(other)
            if other != name and record is not None and record.attributes is not None and (
                    "provision" in record.attributes.events):
                raise QmgrError(PBSE_HOOKERROR, f"Another hook '{other}' already has event "
                                "'provision', only one 'provision' hook allowed",
                                obj_type="hook", obj_name=name)

    def reload_plugins(self) -> None:
        """Load the plugins again from the site config (after a hook change); the server
        keeps its last good configuration when the file cannot be loaded."""
        eng = self.engine
        if not eng.reload_site(force=True):
            raise QmgrError(PBSE_HOOKERROR, f"site config {eng.home.site} cannot be loaded; "
                            "the server keeps its last good configuration (see server_logs)")


#: The states qmgr's `list queue` counts (state_count's, without S).
_COUNTED = ("T", "Q", "H", "W", "R", "E", "B")

#: What `list sched default` shows that is the server's, not default's own row.
_DEFAULT_VIEW = frozenset({"sched_host", "sched_port", "sched_priv", "sched_log", "sched_user",
                           "state"})


def qmgr_bool(value: Any) -> bool:
    from ..units import parse_bool

    try:
        return parse_bool(value) if value is not None else False
    except ValueError:
        return False


def server_user() -> str:
    """The user the server runs as (root's name, as PBS's server runs): a scheduler's
    sched_user, the requestor of what the server does itself."""
    import pwd

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _default_hook(key: str) -> Any:
    from ..hookattrs import HookAttributes

    value = getattr(HookAttributes(), key)
    return list(value) if isinstance(value, tuple) else value


__all__ = ["Manager"]


def _type_conflict(queue: dict[str, Any]) -> str | None:
    """The first attribute, in PBS's order, that the queue's type does not take
    (`EXECUTION_QUEUE_ONLY`, `ROUTE_QUEUE_ONLY`), or None. A queue without a type takes
    that of its first such attribute, as OpenPBS 23.06 reads it."""
    kind = str(queue.get("queue_type") or "")[:1].lower()
    for name in (*EXECUTION_QUEUE_ONLY, *ROUTE_QUEUE_ONLY):
        if queue.get(name) in (None, {}, []):
            continue
        needs = "e" if name in EXECUTION_QUEUE_ONLY else "r"
        if not kind:
            kind = needs
        elif kind != needs:
            return name
    return None
