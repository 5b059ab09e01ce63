"""qmgr's language: parsing, attribute definitions, values, operators and output. No I/O.

The local engine's server answers ``pbsplug qmgr`` with this module; it holds the objects, this
module knows PBS's rules. The server's glue::

    for cmd in qmgr.parse(text, server_name=host, registry=reg):   # QmgrSyntaxError
        defs = qmgr.definitions(cmd.obj_type, reg)
        qmgr.check_privilege(cmd, role, defs)                        # 15007, 15003, 15136
        for name in cmd.targets(existing_names):                     # unknown names: server
            if cmd.verb == "list":
                out += qmgr.list_object(cmd.obj_type, name, attrs, defs, role=role,
                                        only=cmd.attrs)
            else:                                                    # create, set, unset
                new = qmgr.apply(attrs, cmd.attrs, cmd.verb, defs, resource_types,
                                 obj_type=cmd.obj_type)              # 15002, 15014, 15035
                if cmd.obj_type == "hook":
                    qmgr.check_hook(name, new)                       # 15136
                store.put(cmd.obj_type, name, new)

``print`` goes through `print_objects` (all the objects of a type at once, under one
heading) or `print_server`. Errors from `apply` do not know the object's name yet:
``raise e.for_object(cmd.obj_type, name)`` adds it.

Every refusal is a `QmgrError` (a `PbsError`): ``e.code`` is PBS's number, ``e.message`` its
text, and ``e.server_text()`` / ``e.client_text()`` what qmgr prints::

    qmgr obj=workq svr=default: Undefined attribute
    qmgr: Error (15002) returned from server

Parse errors are `QmgrSyntaxError`: qmgr finds them itself, prints ``qmgr: Syntax error``, the
command and a caret under the offending character, and never asks the server.

Storage: attributes are a plain dict per object, keyed by PBS's attribute names (canonical case:
``Priority``, ``Mom``). Resource attributes (``resources_available``, ``resources_default``,
...) are dicts of resource -> value, with values as `pbsplug.engine.jobspec.resource_value`
stores them (long -> int, size -> ``"4gb"``, duration -> ``"01:00:00"``). Attribute values:
boolean -> bool, long -> int, float -> float, string -> str, string_array and ACLs -> list of
str, size -> ``"4gb"``, duration -> int seconds, time -> int epoch seconds, node ``state`` ->
PBS's comma-separated text (``"free"``, ``"offline"``).

Rules that are pbsplug's own (PBS has no equivalent, or the behaviour was not verifiable):

* As in OpenPBS 23.06 (checked), a queue or node command without names acts on the
  ``active`` ones of the text (``No Active Queues, nothing done.`` when there are none);
  ``@default`` means every one; ``list``/``print`` of other types without names show every
  object; ``set sched`` without a name is the default scheduler's.
* ``unset`` restores the definition's default where it has one (PBS does this for the
  attributes it marks as defaulted: ``scheduler_iteration``, sched attributes, hook
  attributes), and removes the attribute otherwise.
* ``pbshook`` names a PBS hook (``set pbshook PBS_power enabled = true``): the plugin that
  declares that ``pbs_name``; ``create`` and ``delete`` of one are refused (PBS's 15004
  ``Invalid request``), and so is ``print`` (OpenPBS's qmgr prints nothing for one and exits
  1). Without names, ``list hook``/``print hook`` are the site hooks and ``list
  pbshook`` the pbs hooks, by their PBS names, as in OpenPBS 23.06 (checked). The
  ``import``, ``export``, ``help`` and ``history`` commands are refused with 15029
  (PBSE_NOSUP): hooks come from plugins. Custom resources are ``resource`` objects with a
  ``type`` (and a ``flag``, kept but not used), as in PBS. ``quit`` / ``exit`` end the
  text, as in qmgr.
* A ``#`` starts a comment at the start of a command or after a blank, outside quotes.

Facts taken from PBS's sources but not checked against a running PBS: whether 15014/15003/
15035 replies name the attribute (PBS's server appends ``" attr[.resource]"``; its client-side
checks may not), the 80-column wrap of `list`, which defaults `list` shows, ``event = ""``
for a hook without events, and a node's ``Priority`` range.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .. import entlim, hookattrs, units, values
from ..attributes import AttributeDef, AttributeRegistry
from . import acl
from .arrays import MAX_PLACES
from .display import NODE_ORDER, QUEUE_ORDER, SERVER_ORDER
from .errors import PBSE_DUPLIST, PbsError
from .jobspec import RESOURCE_TYPES, resource_value

# -- PBS's error numbers and texts (pbs_error.h, pbs_messages.c) ----------------------------------
PBSE_NOATTR = 15002
PBSE_ATTRRO = 15003
PBSE_IVALREQ = 15004
PBSE_PERM = 15007
PBSE_BADATVAL = 15014
PBSE_UNKQUE = 15018
PBSE_QUEEXIST = 15025
PBSE_NOSUP = 15029
PBSE_NOSERVER = 15034
PBSE_UNKRESC = 15035
PBSE_UNKNODE = 15062
PBSE_QUENBIG = 15028
PBSE_NODENBIG = 15065
PBSE_NODEEXIST = 15066
PBSE_BADNDATVAL = 15067
PBSE_HOOKERROR = 15136
PBSE_NEEDQUET = 15137
PBSE_SCHEDEXIST = 15211
PBSE_SCHED_NAME_BIG = 15212
PBSE_UNKSCHED = 15213

#: PBS's texts, with the trailing blank some have (OpenPBS 23.06's qmgr prints
#: ``Undefined attribute `` and ``Unknown node ``; a named attribute follows that blank,
#: ``... permission  server_state``).
MESSAGES = {
    PBSE_NOATTR: "Undefined attribute ",
    PBSE_ATTRRO: "Cannot set attribute, read only or insufficient permission ",
    PBSE_IVALREQ: "Invalid request",
    PBSE_PERM: "Unauthorized Request ",
    PBSE_BADATVAL: "Illegal attribute or resource value",
    PBSE_DUPLIST: "Duplicate entry in list ",
    PBSE_UNKQUE: "Unknown queue",
    PBSE_QUEEXIST: "Queue already exists",
    PBSE_NOSUP: "No support for requested service",
    PBSE_NOSERVER: "No server specified",
    PBSE_UNKRESC: "Unknown resource",
    PBSE_UNKNODE: "Unknown node ",
    PBSE_NODEEXIST: "Node name already exists",
    PBSE_QUENBIG: "Queue name too long",
    PBSE_NODENBIG: "Node name is too big",
    PBSE_BADNDATVAL: "Illegal value for node",
    PBSE_HOOKERROR: "hook error",
    PBSE_NEEDQUET: "Queue type must be set",
    PBSE_SCHEDEXIST: "Scheduler already exists",
    PBSE_SCHED_NAME_BIG: "Scheduler name is too long",
    PBSE_UNKSCHED: "Unknown Scheduler",
}
#: The message of an error the server sends without a text (qmgr prints only its code).
_NO_TEXT = "\0"
#: Codes whose reply names the attribute (PBS's server appends " attr[.resource]"). OpenPBS
#: 23.06's 15014 to qmgr names none (checked); pbsplug's does, as every error of its names
#: what was wrong (docs/engine.md, "qmgr": the differences left).
_NAMES_ATTRIBUTE = frozenset({PBSE_ATTRRO, PBSE_BADATVAL, PBSE_UNKRESC, PBSE_BADNDATVAL,
                              PBSE_DUPLIST})
#: The text a non-manager gets for any hook request (pbs-behavior.md §1.1), as OpenPBS
#: 23.06 words it: ``user@host is unauthorized to access hooks data from server host``.
HOOK_UNAUTHORIZED = "unauthorized to access hooks data from server"
#: MoM's default port: `print node` adds ``Port=`` to ``create node`` only when it differs.
PBS_MOM_SERVICE_PORT = 15002

ROLES = ("user", "operator", "manager")
#: The types a custom resource may have (``create resource r type = long``).
RESOURCE_VALUE_TYPES = ("long", "float", "size", "duration", "string", "boolean",
                        "string_array")
VERBS = ("create", "delete", "set", "unset", "list", "print", "active")


class QmgrError(PbsError):
    """A refused qmgr request: PBS's code and text, and the object it was about."""

    def __init__(self, code: int, message: str | None = None, *, obj_type: str = "",
                 obj_name: str = "", attr: str | None = None):
        text = MESSAGES.get(code, "Error") if message is None else message or _NO_TEXT
        if attr and message is None and code in _NAMES_ATTRIBUTE:
            text = f"{text} {attr}"  # (15003's and 15055's texts end in a blank: two)
        super().__init__(code, text, obj=obj_name)
        self.obj_type = obj_type
        self.obj_name = obj_name

    def server_text(self, server: str = "default") -> str:
        """``qmgr obj=NAME svr=default: MESSAGE`` (the server's own name is empty)."""
        return f"qmgr obj={self.obj_name} svr={server}: {self.message}"

    def client_text(self, server: str = "default") -> str:
        """The lines qmgr prints on standard error for an error the server returned, as
        OpenPBS 23.06's qmgr does: the server's text (none when it gave none, as for 15028),
        then ``qmgr: Error (CODE) returned from server``, or for a hook error (15136)
        ``qmgr: hook error returned from server``."""
        last = ("qmgr: hook error returned from server" if self.code == PBSE_HOOKERROR
                else f"qmgr: Error ({self.code}) returned from server")
        return f"{self.server_text(server)}\n{last}" if self.message != _NO_TEXT else last

    def for_object(self, obj_type: str, obj_name: str) -> QmgrError:
        """This error, about one object (the helpers raise it before they know the name)."""
        self.obj_type, self.obj_name, self.obj = obj_type, obj_name, obj_name
        return self


class QmgrSyntaxError(QmgrError):
    """An error qmgr finds before sending anything: ``message`` is the whole text it prints
    (``qmgr: Syntax error``, the command, and a caret line; ``qmgr: Illegal operation: x``;
    ``qmgr: cannot connect to server x``), without the ``qmgr obj=`` prefix."""

    def __init__(self, message: str, code: int = PBSE_IVALREQ, *, obj_type: str = "",
                 exit_status: int = 1):
        super().__init__(code, message, obj_type=obj_type)
        #: qmgr's exit status for it (OpenPBS 23.06, checked): 1 an unknown command or a
        #: server it cannot reach, 2 a missing or unknown object type, 3 a bad name list,
        #: 4 a bad attribute list.
        self.exit_status = exit_status

    def server_text(self, server: str = "default") -> str:
        return self.message

    def client_text(self, server: str = "default") -> str:
        return self.message


# -- attribute definitions -------------------------------------------------------------------------
@dataclass(frozen=True)
class AttrDef:
    """One attribute of an object type, as qmgr treats it.

    `type`: boolean, long, float, string, string_array, acl (a string_array of entities),
    size, duration, time, entlim (``[u:PBS_GENERIC=10]``), choice (one of `choices`),
    node_state, resource (a dict of resources; each value typed by its resource), or
    entlim_res (a dict of resources, each an entlim whose values have its type:
    ``max_queued_res.ncpus = [u:PBS_GENERIC=64]``).
    `set_by`: operator, manager, or server (read-only: nobody sets it with qmgr).
    """

    name: str
    type: str
    set_by: str = "manager"
    default: Any = None
    choices: tuple[str, ...] = ()
    #: Accept any leading part of a choice, case-insensitively (queue_type's ``e``, ``r``).
    abbreviate: bool = False
    read_by: str = "user"
    check: Callable[[Any], str | None] | None = None
    #: A boolean shown as true/false (hooks) instead of True/False.
    lower_bool: bool = False
    #: How an empty list is shown (hook fail_action shows ``none``).
    empty: str | None = None
    #: What joins a list's entries (a vnode's ``jobs`` and ``resv``: ``, ``, as PBS's).
    separator: str = ","
    plugin: str = ""

    @property
    def read_only(self) -> bool:
        return self.set_by == "server"


def _ro(name: str, type: str = "string", default: Any = None, **kw: Any) -> AttrDef:
    return AttrDef(name, type, "server", default, **kw)


def _op(name: str, type: str, default: Any = None, **kw: Any) -> AttrDef:
    return AttrDef(name, type, "operator", default, **kw)


def _mg(name: str, type: str, default: Any = None, **kw: Any) -> AttrDef:
    return AttrDef(name, type, "manager", default, **kw)


def _array_size(value: Any) -> str | None:
    """An array's subjobs are numbered within it (`arrays.subjob_seq`): more indices than
    its places would give two arrays' subjobs one row."""
    return None if value <= MAX_PLACES else f"must be at most {MAX_PLACES}"


def _positive(value: Any) -> str | None:
    return None if value > 0 else "must be greater than zero"


def _c_long(value: Any) -> str | None:
    """PBS's server log_events is a C long it checks no further (any mask, -1 included)."""
    return None if -values.LONG_MAX - 1 <= value <= values.LONG_MAX else "must fit a C long"


def _not_negative(value: Any) -> str | None:
    return None if value >= 0 else "must be zero or more"


def _formula(value: Any) -> str | None:
    from ..scheduler.cycle import formula_problem

    return formula_problem(str(value))


def _node_sort_key(value: Any) -> str | None:
    from ..scheduler.model import parse_node_sort_key

    try:
        parse_node_sort_key(value)
    except ValueError as exc:
        return str(exc)
    return None


def _queue_priority(value: Any) -> str | None:
    return None if -1024 <= value <= 1023 else "must be in [-1024, 1023]"


_SHARING = ("default_shared", "default_excl", "default_exclhost", "ignore_excl", "force_excl",
            "force_exclhost")

#: The limits a server and a queue share: running jobs (the scheduler's, old and entity
#: style) and queued ones (the server's, `limits`).
_LIMITS = (
    _op("max_running", "long", check=_not_negative),
    _op("max_user_run", "long", check=_not_negative),
    _op("max_group_run", "long", check=_not_negative),
    _op("max_run", "entlim"), _op("max_run_res", "entlim_res"),
    _op("max_run_soft", "entlim"), _op("max_run_res_soft", "entlim_res"),
    _op("max_queued", "entlim"), _op("max_queued_res", "entlim_res"),
    _op("queued_jobs_threshold", "entlim"),
    _op("queued_jobs_threshold_res", "entlim_res"),
)

# Who may set what: as OpenPBS 23.06 lets an operator (checked as one, attribute by attribute:
# tests/adapters/test_pbs_parity.py's operator rows, docs/engine.md "qmgr"); pbsplug's own (a
# scheduler's policy attributes) are manager-only.
_BUILTIN: dict[str, tuple[AttrDef, ...]] = {
    "server": (
        _op("scheduling", "boolean", True),
        _op("scheduler_iteration", "long", 600, check=_positive),
        _op("default_queue", "string"),
        _op("comment", "string"),
        _op("log_events", "long", 511, check=_c_long),
        _mg("mail_from", "string", "adm"),
        _mg("query_other_jobs", "boolean", False),
        _mg("managers", "acl"), _mg("operators", "acl"),
        _mg("acl_host_enable", "boolean", False), _mg("acl_hosts", "acl"),
        _mg("acl_user_enable", "boolean", False), _mg("acl_users", "acl"),
        _mg("acl_roots", "acl"),
        _mg("flatuid", "boolean", False),
        *_LIMITS,
        _op("resources_available", "resource"), _op("resources_default", "resource"),
        _op("resources_max", "resource"), _op("default_chunk", "resource"),
        _op("default_qsub_arguments", "string"),
        _op("default_qdel_arguments", "string"),
        _op("node_fail_requeue", "long", 310),
        _mg("job_history_enable", "boolean", False),
        _mg("job_history_duration", "duration", 14 * 24 * 3600),
        _mg("eligible_time_enable", "boolean", False),
        # True while a plugin that declares it is enabled (seed 004: read-only).
        _ro("power_provisioning", "boolean", False),
        _op("backfill_depth", "long", 1, check=_positive),
        _mg("job_sort_formula", "string", check=_formula),
        _mg("python_restart_max_hooks", "long", 100, check=_positive),
        _mg("python_restart_max_objects", "long", 1000, check=_positive),
        _mg("python_restart_min_interval", "duration", 30),
        _mg("resv_enable", "boolean", True),
        _op("max_array_size", "long", 10000, check=_array_size),
        _mg("max_concurrent_provision", "long", 5, check=_positive),
        _mg("pbs_license_min", "long"), _mg("pbs_license_max", "long"),
        _op("single_signon_password_enable", "boolean", False),
        _mg("rpp_retry", "long"), _mg("rpp_highwater", "long"),
        _ro("server_state"), _ro("server_host"), _ro("total_jobs", "long"),
        _ro("state_count"), _ro("pbs_version"), _ro("resources_assigned", "resource"),
    ),
    "queue": (
        _op("queue_type", "choice", choices=("Execution", "Route"), abbreviate=True),
        _op("Priority", "long", check=_queue_priority),
        _op("enabled", "boolean"), _op("started", "boolean"),
        _op("comment", "string"),
        *_LIMITS, _op("max_queuable", "long", check=_not_negative),
        _op("max_array_size", "long"),  # (any long, as OpenPBS 23.06's: 0 or less refuses
        # every array; the server's bounds the subjobs' numbering)
        _op("resources_default", "resource"), _op("resources_max", "resource"),
        _op("resources_min", "resource"), _op("resources_available", "resource"),
        _op("default_chunk", "resource"),
        _op("acl_user_enable", "boolean"), _op("acl_users", "acl"),
        _op("acl_group_enable", "boolean"), _op("acl_groups", "acl"),
        _op("acl_host_enable", "boolean"), _op("acl_hosts", "acl"),
        _mg("partition", "string"),
        _mg("route_destinations", "string_array"),
        _op("route_held_jobs", "boolean"), _op("route_waiting_jobs", "boolean"),
        _op("route_retry_time", "long"), _op("route_lifetime", "long"),
        _mg("from_route_only", "boolean"),
        _op("kill_delay", "long"),
        _op("checkpoint_min", "long"),
        _ro("hasnodes", "boolean"), _ro("total_jobs", "long"), _ro("state_count"),
        _ro("resources_assigned", "resource"),
    ),
    "node": (
        _mg("Mom", "string"), _mg("Port", "long", PBS_MOM_SERVICE_PORT),
        _op("state", "node_state", "free"),
        _mg("sharing", "choice", "default_shared", choices=_SHARING),
        _op("comment", "string"),
        _op("resources_available", "resource"),
        _op("partition", "string"), _mg("queue", "string"),
        _op("Priority", "long", check=_queue_priority),
        _mg("resv_enable", "boolean", True),
        _mg("no_multinode_jobs", "boolean"),
        _mg("provision_enable", "boolean"),
        _mg("current_aoe", "string"), _mg("current_eoe", "string"),
        _mg("power_provisioning", "boolean"),
        _mg("poweroff_eligible", "boolean"),
        _ro("ntype", "string", "PBS"), _ro("pcpus", "long"),
        _ro("jobs", "string_array", separator=", "),
        _ro("resources_assigned", "resource"), _ro("resv", "string_array", separator=", "),
        _ro("last_state_change_time", "time"), _ro("last_used_time", "time"),
        _ro("in_multivnode_host", "long"),
    ),
    "hook": (
        _mg("type", "choice", "site", choices=("site", "pbs")),
        _mg("enabled", "boolean", True, lower_bool=True),
        _mg("event", "string_array", [], empty='""'),
        _mg("user", "choice", "pbsadmin", choices=("pbsadmin", "pbsuser")),
        _mg("alarm", "long", 30), _mg("freq", "long"),
        _mg("order", "long", 1),
        _mg("debug", "boolean", False, lower_bool=True),
        _mg("fail_action", "string_array", [], empty="none"),
    ),
    # A custom resource: its type types every value of it (resources_available.<name>...).
    "resource": (
        _mg("type", "choice", "string", choices=RESOURCE_VALUE_TYPES),
        _mg("flag", "string"),
    ),
    "sched": (
        _mg("scheduling", "boolean", False),
        _mg("scheduler_iteration", "long", 600, check=_positive),
        _op("sched_cycle_length", "duration", 1200),
        _mg("partition", "string_array"),
        _mg("sched_host", "string"), _mg("sched_port", "long"),
        _mg("sched_priv", "string"), _mg("sched_log", "string"), _mg("sched_user", "string"),
        _mg("job_accumulation_time", "long"),
        # The scheduler's own policy (PBS keeps most in sched_priv/sched_config; pbsplug
        # has them as attributes, read by the scheduling library's Policy).
        _mg("strict_ordering", "boolean"), _mg("backfill", "boolean"),
        _mg("backfill_depth", "long", check=_positive),
        _mg("job_sort_formula", "string", check=_formula),
        _mg("node_sort_key", "string", check=_node_sort_key),
        _mg("estimate_limit", "long", check=_positive),
        _mg("comment", "string"),
        _op("log_events", "long", 767),
        _mg("preempt_queue_prio", "long", 150),
        _mg("preempt_prio", "string"),
        _mg("preempt_order", "string", "SCR"),
        _mg("preempt_sort", "string", "min_time_since_start"),
        _mg("job_run_wait", "choice", "runjob_hook",
            choices=("none", "runjob_hook", "execjob_hook")),
        _mg("throughput_mode", "boolean", True),
        _mg("opt_backfill_fuzzy", "choice", choices=("off", "low", "medium", "high")),
        _mg("job_sort_formula_threshold", "float"),
        _op("do_not_span_psets", "boolean", False),
        _op("only_explicit_psets", "boolean", False),
        _mg("server_dyn_res_alarm", "long"),
        _ro("state"), _ro("pbs_version"),
    ),
}

#: How `list` names each built-in type; a plugin type is shown capitalised.
_TITLES = {"server": "Server", "queue": "Queue", "node": "Node", "hook": "Hook", "sched": "Sched",
           "resource": "Resource"}
#: Object words qmgr accepts, in the order it tries them for an abbreviation.
_OBJECT_WORDS = (("server", "server"), ("queue", "queue"), ("queues", "queue"),
                 ("node", "node"), ("nodes", "node"), ("resource", "resource"),
                 ("sched", "sched"), ("hook", "hook"), ("pbshook", "pbshook"))
_VERB_WORDS = ("create", "delete", "set", "unset", "list", "print", "active", "import",
               "export", "help", "?", "quit", "exit", "history")
_ENTLIM_TYPES = ("entlim", "entlim_res")
#: Types whose value is a dict of resources (``attr.resource = value``).
_KEYED = ("resource", "entlim_res")
#: Attributes whose unquoted value may contain blanks (PBS's "entlim" attributes).
_ENTLIM = frozenset(a.name for a in _BUILTIN["server"] if a.type in _ENTLIM_TYPES)
_SETTER_RANK = {"user": 0, "operator": 1, "manager": 2, "server": 3}


def known_types(registry: AttributeRegistry | None = None) -> tuple[str, ...]:
    """Object types qmgr manages: the built-ins and every type a plugin registered."""
    extra = tuple(t for t in (registry.object_types if registry else ()) if t not in _BUILTIN)
    return tuple(_BUILTIN) + extra


def _from_registry(a: AttributeDef) -> AttrDef:
    # `plugin` marks a registered attribute: its validator's text is what qmgr prints.
    return AttrDef(a.name, a.type, a.set_by, a.default, read_by=a.read_by,
                   plugin=a.plugin or "pbsplug", check=a.check)


def _in_pbs_order(obj_type: str, defs: tuple[AttrDef, ...]) -> tuple[AttrDef, ...]:
    """`defs` in PBS's listing order for `obj_type` (`display.SERVER_ORDER`,
    `QUEUE_ORDER`, `NODE_ORDER`); pbsplug's own attributes after, as defined."""
    order = {name: i for i, name in enumerate(_PBS_ORDER.get(obj_type, ()))}
    return tuple(sorted(defs, key=lambda d: order.get(d.name, len(order))))


_PBS_ORDER = {"server": SERVER_ORDER, "queue": QUEUE_ORDER, "node": NODE_ORDER}
_BUILTIN = {kind: _in_pbs_order(kind, defs) for kind, defs in _BUILTIN.items()}


def definitions(obj_type: str, registry: AttributeRegistry | None = None
                ) -> dict[str, AttrDef]:
    """The attributes of `obj_type`, built-ins first (in PBS's listing order), then the
    plugins'. A built-in keeps its definition if a plugin registers the same name."""
    defs = {a.name: a for a in _BUILTIN.get(obj_type, ())}
    if registry is not None:
        for name, attr in registry.for_type(obj_type).items():
            defs.setdefault(name, _from_registry(attr))
    return defs


def defaults(defs: Mapping[str, AttrDef]) -> dict[str, Any]:
    """The attributes a new object starts with: every definition that has a default."""
    return {n: _copy(d.default) for n, d in defs.items() if d.default is not None}


def _copy(value: Any) -> Any:
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    return value


def lookup(defs: Mapping[str, AttrDef], name: str) -> AttrDef | None:
    """The definition of `name`; PBS matches attribute names without regard to case."""
    if name in defs:
        return defs[name]
    low = name.lower()
    return next((d for n, d in defs.items() if n.lower() == low), None)


# -- parsing ---------------------------------------------------------------------------------------
@dataclass
class AttrOp:
    """``name[.resource] OP value``. `op` is ``=``, ``+=``, ``-=``, or ``""`` (a bare name,
    as unset, list and print take); `value` is None when there is none."""

    name: str
    resource: str | None = None
    op: str = ""
    value: str | None = None

    @property
    def full_name(self) -> str:
        return f"{self.name}.{self.resource}" if self.resource else self.name


@dataclass
class Command:
    """One qmgr directive. `names` is None when none were given (the server; for a queue
    or node, qmgr's active ones; for other types, every object), ``[]`` for ``@server``
    alone (every object of the type); `text` is the command as written, for messages."""

    verb: str
    obj_type: str
    names: list[str] | None = None
    attrs: list[AttrOp] = field(default_factory=list)
    text: str = ""
    #: Written as ``pbshook`` (PBS's own hooks): `names` are PBS hook names, such as
    #: ``PBS_power``, which the server maps to the plugins that declare them.
    pbshook: bool = False
    #: The server as the command names it (``workq@vm``: ``vm``), "" when it names none:
    #: qmgr's messages say ``svr=`` that, or ``default`` (OpenPBS 23.06, checked).
    server: str = ""

    def targets(self, existing: Iterable[str]) -> list[str]:
        """The objects the command acts on: its names, or every existing object of the
        type."""
        return list(self.names) if self.names else list(existing)


def _syntax(command: str, pos: int, status: int = 4) -> QmgrSyntaxError:
    """qmgr's syntax error: the command, then a caret under character `pos`; exit `status`
    3 in the name list, 4 in the attributes (OpenPBS 23.06's)."""
    return QmgrSyntaxError(f"qmgr: Syntax error\n{command}\n{' ' * max(pos, 0)}^",
                           exit_status=status)


def _split_commands(text: str) -> list[str]:
    """Commands in `text`: one per line or per ``;`` outside quotes; ``\\`` + newline joins
    lines; a ``#`` at the start of a command or after a blank (outside quotes) starts a
    comment that runs to the end of the line.
    An unterminated quote ends with its line (the parser then reports it)."""
    out: list[str] = []
    for line in text.replace("\\\n", "").split("\n"):
        current: list[str] = []
        quote = ""
        for ch in line:
            if quote:
                quote = "" if ch == quote else quote
            elif ch == ";":
                out.append("".join(current))
                current = []
                continue
            elif ch == "#" and (not current or current[-1].isspace()):
                break
            elif ch in "\"'":
                quote = ch
            current.append(ch)
        out.append("".join(current))
    return [c.strip() for c in out if c.strip()]


def _resolve(word: str, choices: Iterable[str]) -> str | None:
    """The first of `choices` that `word` abbreviates (qmgr compares only len(word) chars)."""
    return next((c for c in choices if word and c.startswith(word)), None)


def parse(text: str, server_name: str | None = None,
          registry: AttributeRegistry | None = None) -> list[Command]:
    """Every command in `text`, in order. Raises `QmgrSyntaxError` (the first bad command
    stops the parse) or `QmgrError` for an unsupported command or a remote server. ``quit``
    and ``exit`` end the text. (The server runs a text with `split_commands` and
    `parse_command`, each command on its own, as qmgr reading a file does.)"""
    commands = []
    for command in _split_commands(text):
        cmd = _parse_one(command, server_name, registry)
        if cmd is None:
            break
        commands.append(cmd)
    return commands


def split_commands(text: str) -> list[str]:
    """The commands of a text qmgr reads from a file: one per line or ``;``."""
    return _split_commands(text)


def parse_command(command: str, server_name: str | None = None,
                  registry: AttributeRegistry | None = None) -> Command | None:
    """One command (None for ``quit``/``exit``). Given with ``qmgr -c``, the text is one
    command whatever it holds: OpenPBS 23.06's qmgr reads ``;`` and newlines there as part
    of it (``list queue a;list queue b`` is a syntax error, exit 4)."""
    return _parse_one(command.strip(), server_name, registry)


def _parse_one(command: str, server_name: str | None,
               registry: AttributeRegistry | None) -> Command | None:
    words = re.match(r"(\S*)\s*", command)
    assert words is not None
    verb_word = words.group(1)
    pos = words.end()
    verb = _resolve(verb_word, _VERB_WORDS)
    if verb is None:
        raise QmgrSyntaxError(f"qmgr: Illegal operation: {verb_word}\n"
                              "Try 'help' if you are having trouble.")
    if verb in ("quit", "exit"):
        return None
    if verb not in VERBS:
        raise QmgrSyntaxError(f"qmgr: the {verb} command is not supported by pbsplug",
                              PBSE_NOSUP)
    obj_word = command[pos:].split(None, 1)[0] if command[pos:].strip() else ""
    if not obj_word:
        raise QmgrSyntaxError("qmgr: No object type given", exit_status=2)
    plugin_types = [t for t in known_types(registry) if t not in _BUILTIN]
    obj_type = dict(_OBJECT_WORDS).get(_resolve(obj_word, [w for w, _ in _OBJECT_WORDS]) or "")
    if obj_type is None:
        obj_type = obj_word if obj_word in plugin_types else None
    if obj_type is None:
        raise QmgrSyntaxError(f"qmgr: Illegal object type: {obj_word}.", exit_status=2)
    pbshook = obj_type == "pbshook"
    if pbshook:  # a PBS hook: the plugin whose pbs_name it is (the manager maps the name;
        obj_type = "hook"  # it refuses create, delete and print of one, as PBS does)
    pos = _skip_blank(command, pos + len(obj_word))
    defs = definitions(obj_type, registry)
    names: list[str] | None = None
    # The third word is a name list unless it is an attribute name (`set server scheduling`).
    end = pos
    while end < len(command) and not command[end].isspace() and not _is_op(command, end):
        end += 1
    word = command[pos:end]
    head = re.split(r"[.,]", word)[0]
    is_attribute = obj_type != "hook" and lookup(defs, head) is not None
    servers: list[str] = []
    if word and not is_attribute:
        names, servers = _parse_names(command, pos, word, obj_type)
        pos = _skip_blank(command, pos + len(word))
    if verb == "active":  # (`active server a,b` names servers: each must be this one)
        _check_servers(servers + (names or [] if obj_type == "server" else []), server_name)
        return Command(verb, obj_type, names, [], command, pbshook,
                       servers[0] if servers else "")
    attrs = _parse_attributes(command, pos, verb)
    if verb in ("set", "unset") and not attrs:
        raise _syntax(command, len(command))
    if obj_type == "server":  # a name there is a server's
        servers += names or []
        names = None
    _check_servers(servers, server_name)  # (after the syntax, as qmgr connects after parsing)
    if obj_type == "sched" and names is None and verb in ("set", "unset"):
        names = ["default"]  # as `print sched` writes the default scheduler's lines
    if verb in ("create", "delete", "set", "unset") and obj_type not in (
            "server", "queue", "node") and not names and (names is None or verb != "create"):
        # (`create sched @default`, a server and no name, goes to the server, which
        # refuses it as PBS's does)
        raise _syntax(command, pos, 3)
    return Command(verb, obj_type, names, attrs, command, pbshook,
                   servers[0] if servers else "")


def _check_servers(servers: Iterable[str], server_name: str | None) -> None:
    """qmgr's refusal of a server other than this one (``Unknown Host.``)."""
    for server in servers:
        if server != "default" and server not in _local_names(server_name):
            raise QmgrSyntaxError(f"Unknown Host.\nqmgr: cannot connect to server {server}",
                                  PBSE_NOSERVER)


def _skip_blank(command: str, pos: int) -> int:
    while pos < len(command) and command[pos].isspace():
        pos += 1
    return pos


def _parse_names(command: str, start: int, word: str, obj_type: str
                 ) -> tuple[list[str], list[str]]:
    """``name[@server][,name...]``: the names and the servers named. ``@server`` alone
    means every object of the type on that server (an empty list of names)."""
    names: list[str] = []
    servers: list[str] = []
    offset = 0
    for item in word.split(","):
        first = item[:1]
        ok = first.isalnum() if obj_type == "node" else first.isalpha()
        if not item:  # "a," or "a,,b": the caret goes under the comma
            raise _syntax(command, start + max(offset - 1, 0), 3)
        if not (ok or first == "@"):
            raise _syntax(command, start + offset, 3)
        name, at, server = item.partition("@")
        if at and (not server or "@" in server):
            raise _syntax(command, start + offset + len(name) + (len(server) if server
                                                                  else 0), 3)
        if at:
            servers.append(server)
        if name:
            names.append(name)
        offset += len(item) + 1
    return names, servers


def _local_names(server_name: str | None) -> set[str]:
    return {server_name, server_name.split(".")[0]} if server_name else set()


def _parse_attributes(command: str, pos: int, verb: str) -> list[AttrOp]:
    """``a = 1, b.r += "x y", c -= z`` (PBS: no operator for unset; list/print take names)."""
    attrs: list[AttrOp] = []
    n = len(command)
    pos = _skip_blank(command, pos)
    if pos >= n:
        return attrs
    while True:
        pos = _skip_blank(command, pos)
        start = pos
        while pos < n and command[pos] not in ".," and not command[pos].isspace() \
                and not _is_op(command, pos):
            pos += 1
        if pos == start:
            raise _syntax(command, start)
        op = AttrOp(command[start:pos])
        if pos < n and command[pos] == ".":
            pos += 1
            rstart = pos
            stop = "," if verb in ("unset", "list", "print") else ""
            while pos < n and not command[pos].isspace() and not _is_op(command, pos) \
                    and command[pos] not in stop:
                pos += 1
            if pos == rstart:
                raise _syntax(command, rstart)
            op.resource = command[rstart:pos]
        attrs.append(op)
        pos = _skip_blank(command, pos)
        if pos >= n:
            if verb in ("create", "set"):
                raise _syntax(command, pos)
            return attrs
        if command[pos] == ",":
            if verb in ("create", "set"):
                raise _syntax(command, pos)
            pos += 1
            continue
        if not _is_op(command, pos):
            raise _syntax(command, pos)
        if verb == "unset":
            raise _syntax(command, pos + (1 if command[pos] == "=" else 2))
        op.op = "=" if command[pos] == "=" else command[pos:pos + 2]
        pos = _skip_blank(command, pos + len(op.op))
        if pos >= n:
            raise _syntax(command, pos)
        op.value, pos = _parse_value(command, pos, allow_blank=op.name.lower() in _ENTLIM)
        pos = _skip_blank(command, pos)
        if pos >= n:
            return attrs
        if command[pos] != ",":
            raise _syntax(command, pos)
        pos += 1


def _is_op(command: str, pos: int) -> bool:
    return command[pos] == "=" or command[pos:pos + 2] in ("+=", "-=")


def _parse_value(command: str, pos: int, allow_blank: bool) -> tuple[str, int]:
    """A value: unquoted text up to a blank or comma, with '...' or "..." parts that keep
    blanks, commas and the other quote (PBS's quoting)."""
    out: list[str] = []
    start = pos
    n = len(command)
    while pos < n:
        ch = command[pos]
        if ch in "\"'":
            end = command.find(ch, pos + 1)
            if end < 0:
                raise _syntax(command, start)
            out.append(command[pos + 1:end])
            pos = end + 1
        elif ch == "," or (ch.isspace() and not allow_blank):
            break
        else:
            out.append(ch)
            pos += 1
    value = "".join(out)
    return (value.rstrip() if allow_blank else value), pos


# -- names -----------------------------------------------------------------------------------------
#: Which rule of `pbsplug.values.check_name` names each object type, and PBS's code for a name
#: that is too long (PBS_MAXQUEUENAME 15, PBS_MAXHOSTNAME 255).
_NAME_KINDS = {"queue": ("queue", PBSE_QUENBIG), "node": ("node", PBSE_NODENBIG),
               "resource": ("resource", PBSE_BADATVAL)}


def check_object_name(obj_type: str, name: str) -> None:
    """A new queue, node or resource's name: PBS's length (``Queue name too long``, ``Node
    name is too big``), and letters, digits and ``_ -`` (``.`` and ``[]`` in vnode names)
    only, with PBS's ``Invalid object name`` (15014)."""
    if obj_type not in _NAME_KINDS:
        return
    kind, too_long = _NAME_KINDS[obj_type]
    if len(name) > values.MAX_NAME[kind]:
        # (OpenPBS 23.06's server sends no text with 15028, so its qmgr prints only the
        # code line; pbsplug says what was wrong)
        raise QmgrError(too_long, obj_type=obj_type, obj_name=name)
    try:
        values.check_name(kind, name)
    except values.BadValue:
        if obj_type == "node":  # OpenPBS 23.06: `create node bad!name` is 15067
            raise QmgrError(PBSE_BADNDATVAL, obj_type=obj_type, obj_name=name) from None
        raise QmgrError(PBSE_BADATVAL, "Invalid object name", obj_type=obj_type,
                        obj_name=name) from None


# -- privileges ------------------------------------------------------------------------------------
def check_privilege(cmd: Command, role: str, defs: Mapping[str, AttrDef]) -> None:
    """Refuse `cmd` for a caller of `role` (user, operator, manager) as PBS does:

    * hooks: anything but a manager gets 15136 ``unauthorized to access hooks data from
      server``, even for list and print;
    * list and print: everybody;
    * create and delete, and any change of a resource: managers (15007 ``Unauthorized
      Request``);
    * set and unset: a user gets 15007; a read-only attribute, or a manager-only one set by
      an operator, gets 15003 ``Cannot set attribute, read only or insufficient permission``.
    """
    if role not in ROLES:
        raise ValueError(f"role {role!r} is not one of {', '.join(ROLES)}")
    if cmd.obj_type == "hook" and role != "manager":
        raise QmgrError(PBSE_HOOKERROR, HOOK_UNAUTHORIZED, obj_type="hook")
    if cmd.verb in ("list", "print"):
        return
    if (cmd.verb in ("create", "delete") or cmd.obj_type == "resource") and role != "manager":
        raise QmgrError(PBSE_PERM, obj_type=cmd.obj_type)  # (a resource's too, as PBS's)
    if role == "user":
        raise QmgrError(PBSE_PERM, obj_type=cmd.obj_type)
    for op in cmd.attrs:
        defn = lookup(defs, op.name)
        if defn is not None and not may_set(defn, role):
            raise QmgrError(PBSE_ATTRRO, obj_type=cmd.obj_type, attr=op.full_name)


def may_set(defn: AttrDef, role: str) -> bool:
    return not defn.read_only and _SETTER_RANK[role] >= _SETTER_RANK[defn.set_by]


def may_read(defn: AttrDef | AttributeDef | None, role: str) -> bool:
    return defn is None or _SETTER_RANK[role] >= _SETTER_RANK.get(defn.read_by, 0)


# -- values ----------------------------------------------------------------------------------------
def _resource_kind(op: AttrOp, resource_types: Mapping[str, str] | None) -> str:
    kinds = {**RESOURCE_TYPES, **(resource_types or {})}
    if op.resource not in kinds:
        raise QmgrError(PBSE_UNKRESC, attr=op.full_name)
    return kinds[op.resource]


def convert(obj_type: str, op: AttrOp, defs: Mapping[str, AttrDef],
            resource_types: Mapping[str, str] | None = None) -> Any:
    """The stored value for ``op.value`` (see the module docstring for each type).

    Raises QmgrError: 15002 ``Undefined attribute`` (unknown name, or a resource on an
    attribute that has none), 15035 ``Unknown resource <attr.res>``, 15014 ``Illegal attribute
    or resource value <attr>``, 15067 for a node state qmgr may not set, and 15136 with a
    hook's text for a hook attribute. A plugin's validator's text is returned as is (15014).
    """
    defn = lookup(defs, op.name)
    if defn is None:
        raise QmgrError(PBSE_NOATTR, obj_type=obj_type)
    if (defn.type in _KEYED) != (op.resource is not None):
        if defn.type not in _KEYED:
            raise QmgrError(PBSE_NOATTR, obj_type=obj_type)
        raise QmgrError(PBSE_BADATVAL, obj_type=obj_type, attr=op.full_name)
    text = op.value if op.value is not None else ""
    if defn.type == "entlim_res":
        try:
            entlim.parse(text, _resource_kind(op, resource_types))
        except ValueError as exc:
            raise QmgrError(PBSE_BADATVAL, f"Illegal attribute or resource value "
                            f"{op.full_name}: {exc}", obj_type=obj_type) from None
        return text.strip()
    if defn.type == "resource":
        kind = _resource_kind(op, resource_types)
        try:
            return resource_value(op.resource or "", text, kind)
        except ValueError:
            raise QmgrError(PBSE_BADATVAL, obj_type=obj_type, attr=op.full_name) from None
    try:
        value = _typed(defn, text)
    except ValueError as exc:
        if obj_type == "hook":
            raise QmgrError(PBSE_HOOKERROR, f"invalid value '{text}' for hook attribute "
                            f"'{defn.name}': {exc}", obj_type=obj_type) from None
        if defn.type == "node_state":
            raise QmgrError(PBSE_BADNDATVAL, obj_type=obj_type, attr=defn.name) from None
        if defn.type == "entlim":  # which item is wrong, and why
            raise QmgrError(PBSE_BADATVAL, f"Illegal attribute or resource value "
                            f"{defn.name}: {exc}", obj_type=obj_type) from None
        raise QmgrError(PBSE_BADATVAL, obj_type=obj_type, attr=defn.name) from None
    if defn.check is not None and (problem := defn.check(value)):
        if defn.plugin:
            raise QmgrError(PBSE_BADATVAL, problem, obj_type=obj_type)
        raise QmgrError(PBSE_BADATVAL, obj_type=obj_type, attr=defn.name)
    return value


#: Node states qmgr may set (the rest are the server's: job-busy, down, ...).
SETTABLE_NODE_STATES = ("free", "offline")


def _typed(defn: AttrDef, text: str) -> Any:
    kind = defn.type
    if kind == "boolean":
        return units.parse_bool(text)
    if kind in ("long", "time"):
        if not re.fullmatch(r"\s*[+-]?[0-9]+\s*", text):
            raise ValueError("expected an integer")
        return int(text)
    if kind == "float":
        return values.number(text, defn.name)  # (finite: nan and inf are no amounts)
    if kind in ("string_array", "acl"):
        items = [v.strip() for v in text.split(",")]
        items = [values.text(v, defn.name) for v in items if v]  # no control characters
        if kind == "acl":
            for item in items:
                user, _, host = acl.unsigned(item).partition("@")
                if len(user) > values.MAX_NAME["user"] or len(host) > values.MAX_NAME["host"]:
                    raise ValueError(f"{item!r} is longer than PBS's user@host")
        if defn.empty == "none" and items == ["none"]:
            return []
        return items
    if kind == "size":
        return resource_value(defn.name, text, "size")
    if kind == "duration":
        return units.parse_duration(text)
    if kind == "entlim":
        entlim.parse(text)  # a count each
        return text.strip()
    if kind == "choice":
        low = text.strip().lower()
        for choice in defn.choices:
            if choice.lower() == low or (defn.abbreviate and low and
                                         choice.lower().startswith(low)):
                return choice
        raise ValueError(f"expected one of {', '.join(defn.choices)}")
    if kind == "node_state":
        states = [s.strip() for s in text.split(",") if s.strip()]
        if not states or any(s not in SETTABLE_NODE_STATES for s in states):
            raise ValueError("qmgr sets only free or offline")
        return ",".join(states)
    return values.text(text, defn.name, prose=defn.name == "comment")


# -- operators -------------------------------------------------------------------------------------
def apply(current: Mapping[str, Any], ops: Iterable[AttrOp], verb: str,
          defs: Mapping[str, AttrDef], resource_types: Mapping[str, str] | None = None,
          obj_type: str = "") -> dict[str, Any]:
    """The object's attributes after `verb` (create, set or unset) with `ops`; `current` is
    not changed. ``create`` starts from `defaults` and then sets the attributes given.

    * ``=`` replaces; ``+=`` adds: list items not already there, numbers, sizes and durations
      summed, strings appended, booleans or-ed; ``-=`` takes away the same way (a list item
      that is not there is ignored; a size or duration stops at zero; a string loses the
      value only from its end). An operator on an unset attribute starts from nothing.
    * An ACL (``acl_users``, ``managers``...) is stored in PBS's order (`acl.insert`); an
      entry given twice, or added when it is there, is 15055.
    * A list or resource dict left empty is removed, as PBS unsets an empty array.
    * ``unset`` restores the default where the definition has one, else removes; unsetting a
      resource removes only that resource.
    * Node ``state``: ``= offline`` makes the node offline, ``+= offline`` / ``-= offline``
      add and remove the flag; an empty state is ``free``.
    """
    attrs = {k: _copy(v) for k, v in current.items()}
    if verb == "create":
        attrs = {**defaults(defs), **attrs}
    for op in ops:
        defn = lookup(defs, op.name)
        if defn is None:
            raise QmgrError(PBSE_NOATTR, obj_type=obj_type)
        name = defn.name
        if verb == "unset":
            _unset(attrs, defn, op)
            continue
        value = convert(obj_type, op, defs, resource_types)
        if defn.type in _KEYED:
            kind = "entlim" if defn.type == "entlim_res" else _resource_kind(op, resource_types)
            res = _keyed(attrs.get(name))
            res[op.resource or ""] = _combine(kind, res.get(op.resource or ""), value, op.op)
            res = {k: v for k, v in res.items() if v != ""}  # an entlim emptied by -=
            if res:
                attrs[name] = res
            else:
                attrs.pop(name, None)
            continue
        if defn.type == "acl" and op.op in ("=", "", "+=") and isinstance(value, list):
            new = _acl_combine(name, attrs.get(name) if op.op == "+=" else None, value,
                               obj_type)
        else:
            new = _combine(defn.type, attrs.get(name), value, op.op)
        if (isinstance(new, list) and not new and defn.empty is None) or \
                (defn.type == "entlim" and not new):
            attrs.pop(name, None)
        else:
            attrs[name] = new
    return attrs


def _acl_combine(name: str, old: Any, new: list[str], obj_type: str) -> list[str]:
    """An ACL set (`old` None) or added to, its entries where PBS puts them (`acl.insert`);
    an entry given twice or already there is PBS's 15055."""
    try:
        return acl.insert(acl.KIND.get(name, "user"),
                          old if isinstance(old, list) else (), new)
    except acl.DuplicateEntry:
        raise QmgrError(PBSE_DUPLIST, obj_type=obj_type, attr=name) from None
    except (acl.TooManyEntries, acl.BadEntry) as exc:  # (BadEntry: a sign alone)
        raise QmgrError(PBSE_BADATVAL, f"{MESSAGES[PBSE_BADATVAL]} {name}: {exc}",
                        obj_type=obj_type) from None


def _keyed(value: Any) -> dict[str, Any]:
    """A stored dict of resources, as a copy; anything else (a ``max_queued_res`` stored as
    one text by an older pbsplug, which limited nothing) starts it afresh."""
    return dict(value) if isinstance(value, dict) else {}


def _unset(attrs: dict[str, Any], defn: AttrDef, op: AttrOp) -> None:
    if op.resource is not None and defn.type in _KEYED:
        res = _keyed(attrs.get(defn.name))
        res.pop(op.resource, None)
        if res:
            attrs[defn.name] = res
        else:
            attrs.pop(defn.name, None)
        return
    if defn.default is not None:
        attrs[defn.name] = _copy(defn.default)
    else:
        attrs.pop(defn.name, None)


def _combine(kind: str, old: Any, new: Any, op: str) -> Any:
    if op == "=" or op == "" or old is None:
        if op == "-=" and kind in ("string_array", "acl"):
            return []
        if op == "-=" and kind == "node_state":
            return "free"
        if op == "-=" and kind == "entlim":
            return ""
        return new
    sign = 1 if op == "+=" else -1
    if kind in ("string_array", "acl"):
        if sign > 0:
            return list(old) + [v for v in new if v not in old]
        return [v for v in old if v not in new]
    if kind == "node_state":
        states = [s for s in str(old).split(",") if s and s != "free"]
        change = [s for s in new.split(",") if s != "free"]
        states = states + [s for s in change if s not in states] if sign > 0 else [
            s for s in states if s not in change]
        return ",".join(states) or "free"
    if kind == "boolean":
        return bool(old or new) if sign > 0 else bool(old and not new)
    if kind in ("long", "float", "time"):
        return old + sign * new
    if kind == "size":
        total = max(units.parse_size(old) + sign * units.parse_size(new), 0)
        return units.format_size(total)
    if kind == "duration":
        if isinstance(new, str):  # a resource: "HH:MM:SS"
            total = max(units.parse_duration(old) + sign * units.parse_duration(new), 0)
            return units.format_duration(total)
        return max(old + sign * new, 0)
    if kind == "entlim":
        return entlim.combine(old, new, sign)
    if isinstance(old, str) and isinstance(new, str):
        if sign > 0:
            return old + new
        return old[:-len(new)] if new and old.endswith(new) else old
    return new


def check_hook(name: str, attrs: Mapping[str, Any]) -> None:
    """PBS's rules across a hook's attributes (pbs-behavior.md §1.1), or 15136 with PBS's
    text: ``order given (0) is outside the acceptable range of [1, 1000] for type 'site'.``"""
    try:
        hookattrs.check_attributes(name, hookattrs.HookAttributes(
            enabled=bool(attrs.get("enabled", True)),
            events=tuple(attrs.get("event") or ()),
            order=int(attrs.get("order", 1)), alarm=int(attrs.get("alarm", 30)),
            freq=int(attrs.get("freq") or 120),
            fail_action=tuple(attrs.get("fail_action") or ()),
            user=str(attrs.get("user", "pbsadmin")), type=str(attrs.get("type", "site")),
            debug=bool(attrs.get("debug", False))),
            given={"freq"} if attrs.get("freq") is not None else set())
    except hookattrs.HookAttributeError as exc:
        raise QmgrError(PBSE_HOOKERROR, str(exc), obj_type="hook", obj_name=name) from None


# -- output ----------------------------------------------------------------------------------------
def format_value(defn: AttrDef | None, value: Any) -> str:
    """An attribute value as qmgr shows it: True/False (true/false for hooks), lists
    comma-joined, durations HH:MM:SS, times as epoch seconds (OpenPBS 23.06's ``list
    node``), everything else as stored."""
    if isinstance(value, bool):
        text = "True" if value else "False"
        return text.lower() if defn is not None and defn.lower_bool else text
    if isinstance(value, (list, tuple)):
        if not value and defn is not None and defn.empty is not None:
            return defn.empty
        return (defn.separator if defn is not None else ",").join(str(v) for v in value)
    kind = defn.type if defn is not None else ""
    if kind == "duration" and isinstance(value, (int, float)):
        return units.format_duration(value)
    if kind == "time" and isinstance(value, (int, float)):
        return str(int(value))
    if isinstance(value, float):
        return f"{value:g}" if value == int(value) else repr(value)
    return str(value)


def _entries(attrs: Mapping[str, Any], defs: Mapping[str, AttrDef], role: str
             ) -> list[tuple[AttrDef | None, str, str | None, Any]]:
    """(definition, attribute, resource, value) in listing order: the definitions' order,
    then attributes without one in stored order; resources in stored order."""
    order = [n for n in defs if n in attrs] + [n for n in attrs if n not in defs]
    out: list[tuple[AttrDef | None, str, str | None, Any]] = []
    for name in order:
        defn, value = defs.get(name), attrs[name]
        if value is None or not may_read(defn, role):
            continue
        if value == [] and (defn is None or defn.empty is None):
            continue  # an empty list is unset (PBS lists no `managers = `)
        if isinstance(value, dict):
            out.extend((defn, name, res, v) for res, v in value.items() if v is not None)
        else:
            out.append((defn, name, None, value))
    return out


def title(obj_type: str) -> str:
    return _TITLES.get(obj_type, obj_type.capitalize())


def list_object(obj_type: str, name: str, attrs: Mapping[str, Any],
                defs: Mapping[str, AttrDef] | None = None, *, role: str = "manager",
                only: Iterable[AttrOp] = ()) -> str:
    """``qmgr list``: ``Queue workq``, then ``    name = value`` per attribute (resources
    as ``resources_available.ncpus = 4``), then a blank line. A long list wraps as qmgr
    wraps it: at a comma, onto a new line that starts with a tab. `only` (the command's
    attribute names: ``list queue workq enabled,resources_max.mem``) limits the lines, as
    OpenPBS 23.06's qmgr lists them (checked): in the reverse of the order named, an
    attribute as often as it is named, and a resource named as its whole attribute
    (``resources_max.mem`` lists every ``resources_max``); attributes `role` may not read
    are left out."""
    defs = defs if defs is not None else definitions(obj_type)
    entries = _entries(attrs, defs, role)
    only = list(only)
    if only:
        by_name: dict[str, list[tuple[AttrDef | None, str, str | None, Any]]] = {}
        for entry in entries:
            by_name.setdefault(entry[1].lower(), []).append(entry)
        entries = [entry for op in reversed(only) for entry in by_name.get(op.name.lower(), ())]
    lines = [f"{title(obj_type)} {name}"]
    for defn, attr, res, value in entries:
        label = f"{attr}.{res}" if res else attr
        text = format_value(defn, value)
        width = len(attr) + 8 + (len(res) + 1 if res else 0) + 3
        parts = text.split(",")
        out = ""
        for i, part in enumerate(parts):
            width += len(part) + 1
            if i and width >= 80:
                out += "\n\t"
                part = part.lstrip()
            out += part + ("," if i < len(parts) - 1 else "")
        lines.append(f"    {label} = {out}")
    return "\n".join(lines) + "\n\n"


#: print's heading per object type (the sched type has none).
_PRINT_HEADINGS = {
    "server": "#\n# Set server attributes.\n#\n",
    "queue": "#\n# Create queues and set their attributes.\n#\n",
    "node": "#\n# Create nodes and set their properties.\n#\n",
    "hook": "#\n# Create hooks and set their properties.\n#\n",
}


def print_heading(obj_type: str) -> str:
    """The heading `print_objects` starts with for `obj_type` ("" for none)."""
    return _PRINT_HEADINGS.get(obj_type, "")


def _quote(text: str) -> str:
    if any(c in text for c in "\"' ,"):
        q = "'" if '"' in text else '"'
        return f"{q}{text}{q}"
    return text


def print_objects(obj_type: str, objects: Mapping[str, Mapping[str, Any]],
                  defs: Mapping[str, AttrDef] | None = None,
                  resource_types: Mapping[str, str] | None = None, *,
                  role: str = "manager") -> str:
    """``qmgr print``: commands that recreate `objects` (name -> attributes) when fed back.

    A heading for the type, then per object ``#\\n# Create and define queue workq\\n#``,
    ``create queue workq`` and one ``set`` per settable attribute; read-only attributes are
    left out. A string is one value, quoted if it holds a blank, comma or quote; a list
    gives one ``=`` line and then one ``+=`` line per further item. A node's ``create``
    line carries ``Mom=`` and ``Port=`` when they differ from the name and 15002, and a
    ``down`` or ``state-unknown`` state is left out, and so is what `role` may not read.
    The server is printed with `print_server`.
    """
    defs = defs if defs is not None else definitions(obj_type)
    kinds = {**RESOURCE_TYPES, **(resource_types or {})}
    out = [_PRINT_HEADINGS.get(obj_type, "")]
    for name, attrs in objects.items():
        out.append(_print_one(obj_type, name, attrs, defs, kinds, role))
    return "".join(out)


def _print_one(obj_type: str, name: str, attrs: Mapping[str, Any],
               defs: Mapping[str, AttrDef], kinds: Mapping[str, str], role: str) -> str:
    word = {"sched": "scheduler"}.get(obj_type, obj_type)
    out = []
    if obj_type != "server":
        create = f"create {obj_type} {name}"
        if obj_type == "node":
            extra = []
            mom = attrs.get("Mom")
            if mom and mom != name:
                extra.append(f"Mom={_quote(str(mom)) if ',' in str(mom) else mom}")
            port = attrs.get("Port")
            if port is not None and int(port) != PBS_MOM_SERVICE_PORT:
                extra.append(f"Port={port}")
            if extra:
                create += " " + ",".join(extra)
        out.append(f"#\n# Create and define {word} {name}\n#\n{create}\n")
    if obj_type == "server" or (obj_type == "sched" and name == "default"):
        prefix = f"set {obj_type} "
    else:
        prefix = f"set {obj_type} {name} "
    for defn, attr, res, value in _entries(attrs, defs, role):
        if defn is None or defn.read_only:
            continue
        if obj_type == "node" and attr in ("Mom", "Port"):
            continue  # on the create line
        if obj_type == "node" and attr == "state" and (
                str(value).startswith("state-unknown") or str(value) == "down"):
            continue
        label = f"{attr}.{res}" if res else attr
        text = format_value(defn, value)
        if value == [] and defn.empty is not None:
            out.append(f"{prefix}{label} = {defn.empty}\n")
            continue
        single = (defn.type in ("string", "choice") if res is None
                  else kinds.get(res, "string") in ("string", "select", "place"))
        if single:
            if text:
                out.append(f"{prefix}{label} = {_quote(text)}\n")
            continue
        for i, part in enumerate(p for p in text.split(",") if p):
            out.append(f"{prefix}{label} {'+=' if i else '='} {_quote(part)}\n")
    return "".join(out)


def print_server(attrs: Mapping[str, Any], defs: Mapping[str, AttrDef] | None = None, *,
                 queues: Mapping[str, Mapping[str, Any]] | None = None,
                 queue_defs: Mapping[str, AttrDef] | None = None,
                 custom_resources: Mapping[str, str] | None = None,
                 role: str = "manager") -> str:
    """``qmgr print server``: custom resources, then the queues, then the server's own
    attributes (nodes are printed with ``print node @default``). Flags of custom resources
    (``flag = nh``) are not known to pbsplug and are not printed."""
    out = []
    kinds = dict(custom_resources or {})
    if custom_resources:
        out.append("#\n# Create resources and set their properties.\n#\n")
        for rname, kind in custom_resources.items():
            out.append(f"#\n# Create and define resource {rname}\n#\n"
                       f"create resource {rname}\nset resource {rname} type = {kind}\n")
    if queues:
        out.append(print_objects("queue", queues, queue_defs, kinds, role=role))
    out.append(_PRINT_HEADINGS["server"])
    out.append(_print_one("server", "", attrs, defs if defs is not None
                          else definitions("server"), {**RESOURCE_TYPES, **kinds}, role))
    return "".join(out)


__all__ = [
    "AttrDef", "AttrOp", "Command", "MESSAGES", "QmgrError", "QmgrSyntaxError",
    "SETTABLE_NODE_STATES", "apply", "check_hook", "check_privilege", "convert", "defaults",
    "definitions", "format_value", "known_types", "list_object", "lookup", "may_read",
    "may_set", "parse", "print_objects", "print_server", "title",
]
