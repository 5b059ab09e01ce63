"""PBS's output formats, rendered from attribute dicts: qstat, pbsnodes and pbs_rstat.

Every function takes objects as the server returns them (a mapping of name to attribute dict,
or dicts carrying their own ``id`` / ``name`` / ``resvid``, or kernel objects) and returns
the text PBS would print, without its final newline: ``print(qstat_full(jobs))`` writes
exactly what ``qstat -f`` writes. Attribute values are the kernel's plain data (int epoch
times, bools, resource dicts, Variable_List as a dict); they are shown as PBS shows them:
times as ``ctime(3)`` (``Mon Nov 23 01:53:58 2026``), booleans as ``True``/``False``, resources
one per line as ``Resource_List.walltime = 01:00:00`` in name order.

The layouts follow PBS's commands:

* ``qstat``: ``Job id``/``Name``/``User``/``Time Use``/``S``/``Queue`` columns of 17, 16, 16,
  8, 1 and 16 characters; a longer value is cut with ``*`` as its last character.
* ``qstat -f``: ``Job Id: <id>``, then ``    name = value`` lines. A long value is broken at
  its commas to stay within 78 columns, continuation lines starting with a tab, and a single
  piece longer than a line is cut wherever the line is full.
* ``-F json``: ``timestamp``, ``pbs_version``, ``pbs_server`` and the objects, four spaces a
  level, ``"key":value`` with no space, resources and Variable_List as nested objects; a value
  that reads as a number is written as one (``"ncpus":4``), everything else as a string
  (``"Rerunable":"True"``).
* ``qstat -Q``/``-B``, ``pbsnodes -a`` (five-space indent, no wrapping) and ``pbs_rstat``
  (``Today 14:00`` style times in the table, ``%a %b %d %H:%M:%S %Y`` with ``-f``).
* ``qstat -a`` and its kin (`qstat_alt`), ``qstat -p`` (`qstat_table`), ``qstat -q``
  (`qstat_queue_summary`); pbsnodes without ``-v`` lists hosts (`pbsnodes_hosts`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any, TypeGuard

from ..units import format_duration, format_size, parse_duration

#: A line of ``qstat -f`` stays within this many columns (continuations start with a tab).
CHAR_LINE_LIMIT = 78
#: The character that marks a value cut to fit its column.
TRUNC = "*"
#: What ``-F dsv`` puts before the delimiter inside a value.
BACKSLASH = "\\"

#: PBS's job states, by the letter qstat shows.
JOB_STATES = {
    "T": "transit", "Q": "queued", "H": "held", "W": "waiting", "R": "running",
    "E": "exiting", "X": "expired", "B": "begun", "S": "suspended", "U": "user-suspended",
    "M": "moved", "F": "finished",
}
_STATE_LETTERS = {name: letter for letter, name in JOB_STATES.items()}

#: Reservation states: PBS's number, its short form (pbs_rstat) and long form (pbs_rstat -f).
RESV_STATES = (
    ("NO", "RESV_NONE"), ("UN", "RESV_UNCONFIRMED"), ("CO", "RESV_CONFIRMED"),
    ("WT", "RESV_WAIT"), ("TR", "RESV_TIME_TO_RUN"), ("RN", "RESV_RUNNING"),
    ("FN", "RESV_FINISHED"), ("BD", "RESV_BEING_DELETED"), ("DE", "RESV_DELETED"),
    ("DJ", "RESV_DELETING_JOBS"), ("DG", "RESV_DEGRADED"), ("AL", "RESV_BEING_ALTERED"),
    ("IC", "RESV_IN_CONFLICT"),
)

#: Job attributes that hold an epoch time; qstat -f shows them with ctime(3).
JOB_TIME_ATTRIBUTES = frozenset({
    "ctime", "etime", "stime", "mtime", "qtime", "obittime", "Execution_Time",
    "reserve_start", "reserve_end", "credential_validity",
})
NODE_TIME_ATTRIBUTES = frozenset({"last_state_change_time", "last_used_time"})
RESV_TIME_ATTRIBUTES = frozenset({"reserve_start", "reserve_end", "ctime", "mtime",
                                  "reserve_retry"})

_DURATION_RESOURCES = frozenset({"walltime", "cput", "pcput", "soft_walltime",
                                 "min_walltime", "max_walltime"})
_SIZE_RESOURCES = frozenset({"mem", "vmem", "pmem", "pvmem", "file", "accelerator_memory"})

# The order PBS lists attributes in (its attribute tables); others follow in their own order.
JOB_ORDER = (
    "Job_Name", "Job_Owner", "resources_used", "job_state", "queue", "server",
    "Account_Name", "Checkpoint", "ctime", "depend", "Error_Path", "exec_host", "exec_vnode",
    "Execution_Time", "group_list", "Hold_Types", "Join_Path", "Keep_Files", "Mail_Points",
    "Mail_Users", "mtime", "Output_Path", "Priority", "qtime", "Rerunable", "Resource_List",
    "stime", "obittime", "session_id", "Shell_Path_List", "jobdir", "sandbox", "substate",
    "umask", "User_List", "Variable_List", "euser", "egroup", "comment", "estimated",
    "etime", "eligible_time", "run_count", "Stageout_status", "Exit_status",
    "Submit_arguments", "history_timestamp", "project", "Submit_Host",
)
#: Queue and server attributes in PBS's own order (OpenPBS 23.06's definitions): qstat -Qf,
#: qstat -Bf, qmgr's list and print all follow it; one not named here goes after, in the
#: order it was defined or stored.
QUEUE_ORDER = (
    "queue_type", "Priority", "max_queuable", "total_jobs", "state_count", "max_running",
    "max_queued", "max_queued_res", "acl_host_enable", "acl_hosts", "acl_user_enable",
    "acl_users", "from_route_only", "resources_max", "resources_min", "resources_default",
    "require_cred_enable", "require_cred", "max_array_size", "comment", "acl_group_enable",
    "acl_groups", "checkpoint_min", "rendezvous_retry", "reserved_expedite", "reserved_sync",
    "default_chunk", "resources_available", "resources_assigned", "kill_delay",
    "max_user_run", "max_group_run", "max_run", "max_run_res", "max_run_soft",
    "max_run_res_soft", "hasnodes", "max_user_res", "max_group_res", "max_user_run_soft",
    "max_group_run_soft", "max_user_res_soft", "max_group_res_soft", "node_group_key",
    "backfill_depth", "route_destinations", "alt_router", "route_held_jobs",
    "route_waiting_jobs", "route_retry_time", "route_lifetime", "enabled", "started",
    "queued_jobs_threshold", "queued_jobs_threshold_res", "partition",
)
SERVER_ORDER = (
    "server_state", "server_host", "scheduling", "max_running", "max_queued",
    "max_queued_res", "max_run", "max_run_res", "max_run_soft", "max_run_res_soft",
    "max_user_run", "max_group_run", "max_user_res", "max_group_res", "max_user_run_soft",
    "max_group_run_soft", "max_user_res_soft", "max_group_res_soft", "pnames", "total_jobs",
    "state_count", "acl_host_enable", "acl_hosts", "acl_host_moms_enable",
    "acl_resv_host_enable", "acl_resv_hosts", "acl_resv_group_enable", "acl_resv_groups",
    "acl_user_enable", "acl_users", "acl_resv_user_enable", "acl_resv_users", "acl_roots",
    "managers", "operators", "default_queue", "log_events", "mailer", "mail_from",
    "query_other_jobs", "resources_available", "resources_default", "default_chunk",
    "resources_max", "resources_assigned", "resources_cost", "system_cost",
    "scheduler_iteration", "comment", "default_node", "node_pack", "flatuid", "resv_enable",
    "node_fail_requeue", "max_array_size", "require_cred_enable", "require_cred",
    "node_group_enable", "node_group_key", "default_qdel_arguments",
    "default_qsub_arguments", "rpp_retry", "rpp_highwater", "pbs_license_info",
    "pbs_license_min", "pbs_license_max", "pbs_license_linger_time", "license_count",
    "pbs_version", "job_sort_formula", "eligible_time_enable", "reserve_retry_time",
    "reserve_retry_init", "job_history_enable", "job_history_duration",
    "max_concurrent_provision", "resv_post_processing_time", "backfill_depth",
    "job_requeue_timeout", "python_restart_max_hooks", "python_restart_max_objects",
    "python_restart_min_interval", "queued_jobs_threshold", "queued_jobs_threshold_res",
    "jobscript_max_size", "power_provisioning", "show_hidden_attribs",
    "sync_mom_hookfiles_timeout", "rpp_max_pkt_check", "max_job_sequence_id",
    "has_runjob_hook", "acl_krb_realm_enable", "acl_krb_realms", "acl_krb_submit_realms",
    "cred_renew_enable", "cred_renew_tool", "cred_renew_period", "cred_renew_cache_period",
)
#: A vnode's attributes in PBS's own order (OpenPBS 23.06's definitions; pbsnodes, qmgr's
#: list and print follow it, checked).
NODE_ORDER = (
    "Mom", "Port", "pbs_version", "ntype", "state", "pcpus", "Priority", "jobs",
    "max_running", "max_user_run", "max_group_run", "no_tasks", "pnames", "resv",
    "resources_available", "resources_assigned", "queue", "comment", "resv_enable",
    "no_multinode_jobs", "sharing", "provision_enable", "current_aoe", "in_multivnode_host",
    "maintenance_jobs", "license", "license_info", "topology_info", "vnode_pool",
    "power_provisioning", "current_eoe", "partition", "poweroff_eligible",
    "last_state_change_time", "last_used_time",
)
RESV_ORDER = (
    "Reserve_Name", "Reserve_Owner", "reserve_type", "reserve_state", "reserve_substate",
    "reserve_start", "reserve_end", "reserve_duration", "queue", "Resource_List",
    "schedselect", "resv_nodes", "Authorized_Users", "Authorized_Groups", "Authorized_Hosts",
    "server", "ctime", "Mail_Points", "Mail_Users", "mtime", "interactive",
    "Variable_List", "euser", "egroup", "reserve_rrule", "reserve_index", "reserve_count",
    "reserve_retry", "schedselect_orig", "partition",
)

#: Keys that name an object rather than describe it; they are not attributes to print.
_NAME_KEYS = frozenset({"id", "name", "resvid"})


# -- values -----------------------------------------------------------------------------------

def ctime(epoch: Any) -> str:
    """``Mon Nov 23 01:53:58 2026``: ctime(3) in local time, without its newline; a time
    past what the platform's clock can show (an estimate behind a job of a 10^18 s
    walltime) as its number of seconds, so that one job never stops qstat."""
    try:
        return time.ctime(int(float(epoch)))
    except (OverflowError, OSError, ValueError):
        return str(epoch)


def job_state_letter(state: Any) -> str:
    """The one-letter state qstat shows: ``R`` for ``R``, ``running`` or ``RUNNING``."""
    text = str(state or "")
    if len(text) == 1:
        return text.upper()
    return _STATE_LETTERS.get(text.lower(), text[:1].upper())


def resv_state(state: Any, *, long: bool = False) -> str:
    """A reservation state as pbs_rstat shows it (``CO``, or ``RESV_CONFIRMED`` with
    ``long``), from PBS's number, either form, or the bare name (``CONFIRMED``)."""
    text = str(state if state is not None else "").strip()
    index: int | None = None
    if text.isdigit():
        index = int(text)
    else:
        upper = text.upper()
        for i, (short, full) in enumerate(RESV_STATES):
            if upper in (short, full, full.removeprefix("RESV_")):
                index = i
                break
    if index is None or not 0 <= index < len(RESV_STATES):
        return text
    return RESV_STATES[index][1 if long else 0]


def value_text(value: Any, resource: str | None = None) -> str:
    """An attribute (or resource) value as PBS prints it."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if resource is not None and isinstance(value, int):
        if resource in _DURATION_RESOURCES:
            return format_duration(value)
        if resource in _SIZE_RESOURCES:
            # PBS shows an empty amount in kilobytes (resources_assigned.mem = 0kb).
            return format_size(value) if value else "0kb"
    if isinstance(value, Mapping):
        return ",".join(f"{k}={_escape_commas(value_text(v))}" for k, v in value.items())
    if isinstance(value, (list, tuple)):  # (ACLs, managers, route_destinations: "a,b")
        return ",".join(value_text(v) for v in value)
    return str(value)


def _escape_commas(text: str) -> str:
    # PBS keeps a comma inside a Variable_List value as "\,".
    return text.replace(",", "\\,")


def show_nonprint(text: str, tab: bool = True) -> str:
    """`text` on one line, as the commands print a value and the accounting log writes one
    (`accounting.shown`): control characters as ``^X``, as PBS's commands print them,
    newline too (PBS leaves it: a user's value then starts a row of its own, a forged
    ``Job Id:`` block), DEL as ``^?``, the C1 controls (a terminal acts on them too) as
    ``\\x9b``, and the line and paragraph separators, which are no controls, as
    ``\\u2028`` and ``\\u2029`` (a reader that splits with Python's ``str.splitlines``
    ends a line at each, as at every control it breaks at, all escaped). A tab stays, as
    PBS prints it, unless `tab` is False (``^I``: a record's tokens are split at blanks)."""
    return "".join(c if " " <= c < "\x7f" or "\x9f" < c < "\u2028" or c > "\u2029" or (
                       tab and c == "\t") else
                   f"^{chr(ord(c) + 64)}" if c < " " else "^?" if c == "\x7f" else
                   f"\\x{ord(c):02x}" if c <= "\x9f" else f"\\u{ord(c):04x}"
                   for c in text)


def _records(objs: Any, *keys: str) -> list[tuple[str, dict[str, Any]]]:
    """(name, attributes) pairs from a name -> attributes mapping, dicts that carry their
    name under one of `keys`, or kernel objects."""
    if objs is None:
        return []
    if isinstance(objs, Mapping):
        return [(str(name), _plain(attrs)) for name, attrs in objs.items()]
    out = []
    for obj in objs:
        data = _plain(obj)
        name = next((data[k] for k in keys if data.get(k) is not None), None)
        if name is None:
            raise ValueError(f"{obj!r} has no {' or '.join(keys)} to name it")
        out.append((str(name), data))
    return out


def _plain(obj: Any) -> dict[str, Any]:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return dict(obj or {})


def _ordered(attrs: Mapping[str, Any], order: Iterable[str]) -> list[tuple[str, Any]]:
    seen = set()
    out = []
    for name in order:
        if name in attrs and attrs[name] is not None:
            out.append((name, attrs[name]))
            seen.add(name)
    out.extend((k, v) for k, v in attrs.items()
               if k not in seen and k not in _NAME_KEYS and v is not None)
    # PBS lists no attribute that is unset; an empty list (a vnode without jobs) is unset.
    return [(k, v) for k, v in out if not (isinstance(v, (list, tuple)) and not v)]


def _lines(attrs: Mapping[str, Any], order: Iterable[str], times: frozenset[str],
           *, estimated_start: bool = False) -> list[tuple[str, str]]:
    """(label, text) for each attribute: resources flattened to ``name.resource`` in name
    order, times as ctime."""
    out: list[tuple[str, str]] = []
    for name, value in _ordered(attrs, order):
        if isinstance(value, Mapping) and name != "Variable_List":
            for res in sorted(value):
                v = value[res]
                if v is None:
                    continue
                if estimated_start and name == "estimated" and res == "start_time":
                    text = "UNKNOWN" if not v else ctime(v)
                else:
                    text = value_text(v, res)
                out.append((f"{name}.{res}", text))
        elif name in times and _is_epoch(value):
            out.append((name, ctime(value)))
        else:
            out.append((name, value_text(value)))
    return out


def _is_epoch(value: Any) -> TypeGuard[int | float | str]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) or (
        isinstance(value, str) and value.isdigit())


def wrap_attribute(label: str, value: str) -> str:
    """``    label = value`` as ``qstat -f`` prints it.

    The value is printed piece by piece (its commas separate the pieces). A piece that fits
    before column 78 goes on the current line; one that does not starts a new line that
    begins with a tab, and a piece too long for any line is cut wherever the line fills up.
    """
    out = [f"    {label} = "]
    start = len(label) + 7
    pieces = [p for p in value.split(",") if p]
    for i, piece in enumerate(pieces):
        if len(piece) + start < CHAR_LINE_LIMIT:
            out.append(show_nonprint(piece))
            start += len(piece)
        else:
            if i > 0:
                out.append("\n\t")
                start = 9
            for ch in piece:
                out.append(show_nonprint(ch))
                start += 1
                if start > CHAR_LINE_LIMIT:
                    start = 8
                    out.append("\n\t")
        if i + 1 < len(pieces):
            out.append(",")
    return "".join(out)


def _trunc(text: str, width: int) -> str:
    """A value longer than its column: its first width-1 characters and ``*``."""
    return text if len(text) <= width else text[:width - 1] + TRUNC


def _istrue(value: Any) -> bool:
    return value is True or str(value) in ("TRUE", "True", "true", "1")


def _counts(state_count: Any) -> dict[str, str]:
    """``Transit:0 Queued:2 ...`` -> {"Transit": "0", "Queued": "2", ...}, values cut to 5."""
    out = {}
    items: list[tuple[str, ...]]
    if isinstance(state_count, Mapping):
        items = [(str(k), str(v)) for k, v in state_count.items()]
    else:
        items = [tuple(tok.split(":", 1)) for tok in str(state_count or "").split()
                 if ":" in tok]
    for name, count in items:
        out[name] = _trunc(count, 5)
    return out


def _summary_columns(name: str, attrs: Mapping[str, Any]) -> tuple[str, str]:
    """The columns ``qstat -Q`` and ``qstat -B`` share: the name, Max and Tot, then the six
    state counts (Que Run Hld Wat Trn Ext)."""
    counts = _counts(attrs.get("state_count"))
    return (f"{_trunc(name, 16):<16} {_trunc(str(attrs.get('max_running', 0)), 5):>5} "
            f"{_trunc(str(attrs.get('total_jobs', 0)), 5):>5}",
            " ".join(f"{counts.get(s, '0'):>5}" for s in
                     ("Queued", "Running", "Held", "Waiting", "Transit", "Exiting")))


# -- JSON as PBS writes it --------------------------------------------------------------------

class _Number(str):
    """A value written without quotes."""


class _Text(str):
    """A value always written as a string, even if it reads as a number (pbs_version)."""


_JSON_NUMBER = re.compile(r"-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?")


def json_value(value: Any) -> Any:
    """A scalar as PBS's JSON writes it: numbers unquoted (a number with a leading zero stays
    a string unless it is below 1), everything else, True and False included, a string."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (int, float)):
        return _Number(repr(value) if isinstance(value, float) else str(value))
    text = str(value)
    if _JSON_NUMBER.fullmatch(text) and (not text.startswith("0") or float(text) < 1):
        return _Number(text)
    return text


def _json_text(obj: Mapping[str, Any], indent: int = 4) -> str:
    pad = " " * indent
    parts = []
    for key, value in obj.items():
        name = json.dumps(str(key), ensure_ascii=False)
        if isinstance(value, Mapping):
            parts.append(f"{pad}{name}:{{{_json_text(value, indent + 4)}\n{pad}}}")
        elif isinstance(value, list):
            inner = " " * (indent + 4)
            items = "".join(f"{',' if i else ''}\n{inner}{_json_scalar(v)}"
                            for i, v in enumerate(value))
            parts.append(f"{pad}{name}:[{items}\n{pad}]")
        else:
            parts.append(f"{pad}{name}:{_json_scalar(value)}")
    return "".join(f"{',' if i else ''}\n{p}" for i, p in enumerate(parts))


def _json_scalar(value: Any) -> str:
    value = json_value(value) if not isinstance(value, (_Number, _Text)) else value
    if isinstance(value, _Number):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def _json_document(body: Mapping[str, Any], server: str, version: str | None,
                   timestamp: int | None) -> str:
    if version is None:
        from .. import __version__ as version
    doc: dict[str, Any] = {
        "timestamp": _Number(str(int(time.time() if timestamp is None else timestamp))),
        "pbs_version": _Text(version), "pbs_server": _Text(server),
    }
    doc.update(body)
    return "{" + _json_text(doc) + "\n}"


def _json_attrs(attrs: Mapping[str, Any], order: Iterable[str],
                times: frozenset[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in _ordered(attrs, order):
        if isinstance(value, Mapping):
            inner = {}
            for res in (value if name == "Variable_List" else sorted(value)):
                v = value[res]
                if v is None:
                    continue
                if name == "estimated" and res == "start_time" and _is_epoch(v):
                    inner[res] = ctime(v) if v else "UNKNOWN"
                else:
                    inner[res] = json_value(value_text(v, None if name == "Variable_List"
                                                       else res))
            out[name] = inner
        elif name in times and _is_epoch(value):
            out[name] = ctime(value)
        else:
            out[name] = json_value(value_text(value))
    return out


def _server_name(server: Any) -> str:
    if isinstance(server, str):
        return server
    records = _server_records(server)
    return records[0][0] if records else ""


def _server_records(server: Any) -> list[tuple[str, dict[str, Any]]]:
    if server is None:
        return []
    if isinstance(server, str):
        return [(server, {})]
    if hasattr(server, "to_dict"):
        server = server.to_dict()
    if isinstance(server, Mapping):
        if server and all(isinstance(v, Mapping) for v in server.values()):
            return [(str(k), dict(v)) for k, v in server.items()]
        name = server.get("name")
        if name is not None:
            return [(str(name), dict(server))]
    return _records(server, "name")


# -- qstat ------------------------------------------------------------------------------------

def _short_job_id(job_id: str, width: int = 17) -> str:
    """The id qstat lists: up to the first part of the server name, cut to `width`."""
    seq, dot, rest = job_id.partition(".")
    short = seq + (dot + rest.split(".")[0] if dot else "")
    return _trunc(short, width)


#: The job attributes `qstat_table` shows.
TABLE_ATTRS = ("Job_Name", "Job_Owner", "resources_used", "job_state", "queue")


#: The job attributes `qstat_alt` and `percent_done` show.
ALT_ATTRS = (*TABLE_ATTRS, "session_id", "Resource_List", "exec_host", "comment",
             "estimated", "stime")


#: ``qstat -w``'s columns (OpenPBS 23.06, checked): Job id, Name, User, Queue.
WIDE_WIDTHS = (30, 15, 15, 15)


def qstat_table(jobs: Any, server: Any = None, *, wide: bool = False,
                percent: bool = False, header: bool = True) -> str:
    """``qstat``: one line per job under PBS's header; empty when there are no jobs.
    ``wide`` (``qstat -w``): PBS's wider columns, Job id 30, Name, User and Queue 15 (a
    name of 15 or more is cut to 14 and ``*``, as PBS cuts it). ``percent`` (``qstat
    -p``): the ``% done`` column (`percent_done`) in Time Use's place. Without
    ``header``, the jobs' lines alone (PBS's qstat prints its header with the first job id's
    answer, and none when that id was an error).

    ``server`` may carry a ``comment`` (the server's attributes), which qstat prints first.
    """
    records = _records(jobs, "id")
    if not records:
        return ""
    lines = []
    comment = None
    for _name, attrs in _server_records(server):
        comment = attrs.get("comment") or comment
    if comment and header:
        lines.append(show_nonprint(str(comment)))
    if percent and header:
        lines += PERCENT_HEADER[wide]
    if wide:
        id_w, name_w, user_w, queue_w = WIDE_WIDTHS
    if wide and not percent and header:
        lines.append(f"{'Job id':<{id_w + 1}}{'Name':<{name_w + 1}}{'User':<{user_w + 2}}"
                     "Time Use S Queue")
        lines.append(f"{'-' * (id_w - 1)}  {'-' * name_w} {'-' * user_w}  -------- - "
                     f"{'-' * queue_w}")
    if not wide:
        id_w, name_w, user_w, queue_w = 17, 16, 16, 16
    if not wide and not percent and header:
        lines.append("Job id            Name             User              Time Use S Queue")
        lines.append("----------------  ---------------- ----------------  -------- - -----")
    for job_id, attrs in records:
        name = str(attrs.get("Job_Name") or "")
        if len(name) >= name_w:
            name = name[:name_w - 1] + TRUNC
        owner = _trunc(str(attrs.get("Job_Owner") or "").split("@")[0], user_w)
        used = (attrs.get("resources_used") or {}).get("cput")
        time_use = _trunc(value_text(used, "cput"), 8) if used is not None else "0"
        if percent:
            time_use = percent_done(attrs)
        state = job_state_letter(attrs.get("job_state"))
        queue = _trunc(str(attrs.get("queue") or "").split("@")[0], queue_w)
        lines.append(f"{_short_job_id(job_id, id_w):<{id_w}} {name:<{name_w}} "
                     f"{owner:<{user_w}}  {time_use:>8} {state:>1} {queue:<{queue_w}}")
    return "\n".join(lines)


# -- qstat's other job listings: -p, and the alternative format (-a and its kin) ----------------

#: ``qstat -p``'s header, in place of the table's (OpenPBS 23.06's): the ``% done`` column.
PERCENT_HEADER = {
    False: ("Job id            Name             User               % done  S Queue",
            "----------------  ---------------- ----------------  -------- - -----"),
    True: ("Job id                         Name            User              % done  S Queue",
           "-----------------------------  --------------- ---------------  -------- - "
           "---------------")}


def _seconds(text: str) -> int:
    """A duration as qstat reads one: each ``:``-separated part's leading digits."""
    total = 0
    for part in text.split(":"):
        digits = re.match(r"\d*", part.strip())[0]  # type: ignore[index]
        total = total * 60 + int(digits or 0)
    return total


def percent_done(attrs: Mapping[str, Any]) -> str:
    """``qstat -p``'s ``% done``: ``-- `` for a job queued, waiting or in transit, ``100``
    for an expired one, else the larger of cput used over cput asked and walltime used over
    walltime asked (a job without either: ``-- ``), as OpenPBS 23.06 works it out (the
    times as its table shows them, cut to 8 characters; cput used counts 0 when unset)."""
    state = job_state_letter(attrs.get("job_state"))
    if state in ("Q", "T", "W"):
        return "-- "
    if state == "X":
        return "100"
    asked = attrs.get("Resource_List") or {}
    used = attrs.get("resources_used") or {}
    best = -1
    for resource in ("cput", "walltime"):
        if asked.get(resource) is None:
            continue
        spent = used.get(resource)
        if spent is None and resource == "walltime":
            continue
        top = _seconds(_trunc(value_text(spent, resource), 8)) if spent is not None else 0
        bottom = _seconds(_trunc(value_text(asked[resource], resource), 8))
        if bottom:
            best = max(best, top * 100 // bottom)
    return f"{best:3d} " if 0 <= best else "-- "


#: The alternative format's columns (``-a``, ``-i``, ``-r``, ``-H``, ``-u``, ``-T``, ``-G``,
#: ``-M``, ``-n``, ``-s``), as OpenPBS 23.06 sizes them, without and with ``-w``: Job ID,
#: Username, Queue, Jobname, SessID, NDS, TSK; then Memory 6, Time 5, S 1 and Time 5.
ALT_WIDTHS = {False: (15, 8, 8, 10, 6, 3, 3), True: (30, 15, 15, 15, 8, 4, 5)}
#: The alternative format's titles without ``-w``.
ALT_HEADER = (
    "Job ID          Username Queue    Jobname    SessID NDS TSK Memory Time  S Time",
    "--------------- -------- -------- ---------- ------ --- --- ------ ----- - -----")
#: What the alternative format shows for a value a job has not.
ALT_BLANK = " -- "
#: The longest comment ``-s`` shows whole, without and with ``-w``; a longer one is cut to
#: 70 (110) characters and ``...``.
ALT_COMMENT = {False: (74, 70), True: (114, 110)}


def size_column(value: Any, unit: str | None = None) -> str:
    """A size as qstat's alternative format and ``-q`` show it (OpenPBS 23.06): in its own
    unit, or in gigabytes (`unit` ``gb``, ``-G``) or megawords (``mw``, ``-M``, a word of
    8 bytes), rounded up; a number over 9999 goes up a unit (rounded up) until it fits."""
    m = re.match(r"^\s*(\d+)([kmgtp]?)([bw]?)", value_text(value, "mem").lower())
    if m is None:
        return ALT_BLANK
    number, given = int(m[1]), max(" kmgt".find(m[2] or " "), 0)  # (PBS reads p as b)
    words = m[3] == "w"
    if words:
        number *= 8
    shown = {"gb": 3, "mw": 2}.get(unit or "", given)
    if unit:
        words = unit == "mw"
    shift = 10 * (given - shown)
    number = number << shift if shift >= 0 else (number + (1 << -shift) - 1) >> -shift
    if words:
        number = (number + 7) >> 3
    while number > 9999:
        number = (number + 1023) >> 10
        shown += 1
    return f"{number}{' kmgtp?'[min(shown, 6)]}{'w' if words else 'b'}"


def estimated_start(epoch: Any, now: float | None = None) -> str:
    """``qstat -T``'s Est Start (OpenPBS 23.06): ``?`` for an unknown time (0), ``--``
    for none or one gone by, ``HH:MM`` today, ``Sa 14`` (day, hour) within a week, the
    month's name this year, the year within 5 years, else ``>5yrs``."""
    try:
        start = int(float(epoch))
    except (TypeError, ValueError):
        return "--"
    if start == 0:
        return "?"
    now = time.time() if now is None else now
    if start < now:
        return "--"
    try:
        then, today = time.localtime(start), time.localtime(now)
    except (OverflowError, OSError, ValueError):
        return ">5yrs"
    if (then.tm_year, then.tm_yday) == (today.tm_year, today.tm_yday):
        return time.strftime("%H:%M", then)
    if start - now < 7 * 24 * 3600:
        return f"{time.strftime('%a', then)[:2]} {time.strftime('%H', then)}"
    if then.tm_year == today.tm_year:
        return time.strftime("%b", then)
    return time.strftime("%Y", then) if then.tm_year - today.tm_year < 5 else ">5yrs"


def _start_order(records: list[tuple[str, dict[str, Any]]], now: float
                 ) -> list[tuple[str, dict[str, Any]]]:
    """``qstat -T``'s order: jobs that started first, by their start, then those with an
    estimated start still to come, soonest first, then the rest."""
    def key(record: tuple[str, dict[str, Any]]) -> tuple[int, float]:
        attrs = record[1]
        if _is_epoch(attrs.get("stime")):
            return 0, float(attrs["stime"])
        est = (attrs.get("estimated") or {}).get("start_time")
        if _is_epoch(est) and float(est) >= now:
            return 1, float(est)
        return 2, 0.0

    return sorted(records, key=key)


def _exec_hosts(exec_host: str, one_line: bool) -> list[str]:
    """``qstat -n``'s lines of a job's exec_host: each host without its domain, broken at
    a ``+`` before 77 columns (the ``+`` kept at the line's end); one line with ``-1``."""
    lines, line = [], ""
    for part in exec_host.split("+"):
        host, slash, rest = part.partition("/")
        if not re.fullmatch(r"\d+\.\d+\.\d+\.\d+", host):
            host = host.split(".")[0]
        piece = f"{host}{slash}{rest}+"
        if len(line) + len(piece) - 1 >= 77 and not one_line:
            lines.append(line)
            line = ""
        line += piece
    return [*lines, line[:-1]] if line else lines


def _alt_row(job_id: str, attrs: Mapping[str, Any], wide: bool, start: bool,
             unit: str | None, now: float) -> str:
    """One job's line of the alternative format (`qstat_alt`)."""
    w_id, w_user, w_queue, w_name, w_sess, w_nds, w_tsk = ALT_WIDTHS[wide]
    asked = attrs.get("Resource_List") or {}
    used = attrs.get("resources_used") or {}

    def text(value: Any, width: int, resource: str | None = None) -> str:
        """A value cut to its column with ``*``; the fixed columns (``width`` 0) are only
        cut, by their format, as PBS's."""
        if value is None:
            return ALT_BLANK
        shown = value_text(value, resource)
        return _trunc(shown, width) if width else shown

    ncpus = asked.get("ncpus")
    time_of = "cput" if asked.get("cput") is not None else "walltime"
    state = job_state_letter(attrs.get("job_state")) if attrs.get("job_state") else ALT_BLANK
    if start:
        est = (attrs.get("estimated") or {}).get("start_time")
        last = estimated_start(est, now) if est is not None and state in "QSB" else "--"
    else:
        last = text(used.get(time_of), 0, time_of)
    mem = asked.get("mem")
    owner = attrs.get("Job_Owner")
    queue = attrs.get("queue")
    return (f"{_trunc(job_id, w_id):<{w_id}.{w_id}} "
            f"{text(owner and str(owner).split('@')[0], w_user):<{w_user}.{w_user}} "
            f"{text(queue and str(queue).split('@')[0], w_queue):<{w_queue}.{w_queue}} "
            f"{text(attrs.get('Job_Name'), w_name):<{w_name}.{w_name}} "
            f"{text(attrs.get('session_id'), w_sess):>{w_sess}.{w_sess}} "
            f"{text(asked.get('nodect'), w_nds):>{w_nds}.{w_nds}} "
            f"{text(None if str(ncpus) == '0' else ncpus, w_tsk):>{w_tsk}.{w_tsk}} "
            f"{ALT_BLANK if mem is None else size_column(mem, unit):>6.6} "
            f"{text(asked.get(time_of), 0, time_of):>5.5} {state:>1.1} {last:>5.5}")


def qstat_alt(jobs: Any, server: Any = None, *, wide: bool = False, nodes: bool = False,
              comments: bool = False, one_line: bool = False, start: bool = False,
              unit: str | None = None, now: float | None = None, header: bool = True) -> str:
    """qstat's alternative format (``-a``, and ``-i``, ``-r``, ``-H``, ``-u``, ``-T``,
    ``-G``, ``-M``, ``-n``, ``-s``), as OpenPBS 23.06 prints it: a blank line, the server's
    name and comment, a two-line title (Req'd Memory, Req'd Time, Elap Time; with `start`,
    ``-T``, the Est Start Time column, its jobs in start order), then a line per job: Job
    ID, Username, Queue, Jobname, SessID, NDS (nodect), TSK (ncpus), Memory, Time (cput
    if asked, else walltime), S and Elap (that time used), ``--`` for what a job has not.
    `nodes` (``-n``) adds its exec_host under it, `comments` (``-s``) its comment, and
    `one_line` (``-1``) puts them on the job's line. `unit`: ``gb`` (``-G``) or ``mw``
    (``-M``). Empty when there are no jobs; the jobs alone without `header`
    (`qstat_table`)."""
    records = _records(jobs, "id")
    if not records:
        return ""
    now = time.time() if now is None else now
    if start:
        records = _start_order(records, now)
    name, attrs = (_server_records(server) or [("", {})])[0]
    lines = ["", f"{name}: {show_nonprint(str(attrs.get('comment') or ''))}"]
    last = "Start" if start else "Elap"
    if not header:
        lines = []
    elif wide:
        pad = " " * (sum(ALT_WIDTHS[True]) + len(ALT_WIDTHS[True]))
        titles = ("Job ID", "Username", "Queue", "Jobname", "SessID", "NDS", "TSK")
        if start:
            lines.append(f"{pad}               Est")
        lines += [f"{pad}Req'd  Req'd   {last}",
                  " ".join(f"{t:<{w}}" for t, w in zip(titles, ALT_WIDTHS[True],
                                                        strict=True)) + " Memory Time  S Time",
                  " ".join("-" * w for w in ALT_WIDTHS[True]) + " ------ ----- - -----"]
    else:
        if start:
            lines.append(f"{'':75}Est")
        lines += [f"{'':60}Req'd  Req'd   {last}", *ALT_HEADER]
    for job_id, attrs in records:
        row = _alt_row(job_id, attrs, wide, start, unit, now)
        if nodes:
            hosts = [show_nonprint(line) for line in _exec_hosts(
                str(attrs.get("exec_host") or ALT_BLANK), one_line)]
            row += " " + "".join(hosts) if one_line else "".join(
                f"\n   {line}" for line in hosts)
        elif one_line:
            row += " "
        if comments:
            text = str(attrs.get("comment") or ALT_BLANK)
            longest, cut = ALT_COMMENT[wide]
            text = show_nonprint(text[:cut] + "..." if len(text) > longest else text)
            row += f"\n   {text}" if nodes or not one_line else f"   {text}"
        lines.append(row)
    return "\n".join(lines)


def _limit(most: Mapping[str, Any], resource: str, blank: str = "  --   ") -> str:
    value = most.get(resource)
    return blank if value is None else value_text(value, resource)


def qstat_queue_summary(queues: Any, server: Any, unit: str | None = None) -> str:
    """``qstat -q``, as OpenPBS 23.06 prints it: a blank line, ``server: <name>``, a blank
    line, then per queue its resources_max.mem (`size_column`, `unit` as for
    `qstat_alt`), .cput, .walltime and .nodect, its running and queued (queued, held,
    waiting) jobs, max_running and ``E``/``D`` (enabled) ``R``/``S`` (started); and the
    running and queued totals."""
    lines = ["", f"server: {_server_name(server)}", "",
             "Queue            Memory CPU Time Walltime Node   Run   Que   Lm  State",
             "---------------- ------ -------- -------- ---- ----- ----- ----  -----"]
    total_run = total_queued = 0
    for name, attrs in _records(queues, "name"):
        most = attrs.get("resources_max") or {}
        counts = {k: _count(v) for k, _, v in (
            part.partition(":") for part in str(attrs.get("state_count") or "").split())}
        running = counts.get("Running", 0)
        queued = counts.get("Queued", 0) + counts.get("Held", 0) + counts.get("Waiting", 0)
        total_run, total_queued = total_run + running, total_queued + queued

        mem = "--  " if most.get("mem") is None else size_column(most["mem"], unit)
        max_run = attrs.get("max_running")
        lines.append(f"{name:<16.16} {mem:>6.6} {_limit(most, 'cput'):>8.8} "
                     f"{_limit(most, 'walltime'):>8.8} {_limit(most, 'nodect', '-- '):>4.4} "
                     f"{running:5d} {queued:5d} "
                     f"{'  --   ' if max_run is None else str(max_run):>4.4}   "
                     f"{'E' if _istrue(attrs.get('enabled')) else 'D'} "
                     f"{'R' if _istrue(attrs.get('started')) else 'S'}")
    lines += [f"{'':47}----- -----", f"{'':47}{total_run:5d} {total_queued:5d}"]
    return "\n".join(lines)

def _full(kind: str, records: list[tuple[str, dict[str, Any]]], order: Iterable[str],
          times: frozenset[str], *, estimated: bool = False, wide: bool = False) -> str:
    blocks = []
    order = tuple(order)
    for name, attrs in records:
        body = "\n".join(f"    {label} = {show_nonprint(text)}" if wide else
                         wrap_attribute(label, text)
                         for label, text in _lines(attrs, order, times,
                                                   estimated_start=estimated))
        blocks.append(f"{kind}: {name}\n{body}\n" if body else f"{kind}: {name}\n")
    return "\n".join(blocks)


def qstat_full(jobs: Any, *, wide: bool = False) -> str:
    """``qstat -f``: ``Job Id: <id>`` and its attributes, a blank line after each job;
    with ``wide`` (``qstat -fw``) each attribute on one line, however long, as PBS's."""
    return _full("Job Id", _records(jobs, "id"), JOB_ORDER, JOB_TIME_ATTRIBUTES,
                 estimated=True, wide=wide)


def qstat_dsv(jobs: Any, delimiter: str = "|") -> str:
    """``qstat -f -F dsv [-D delimiter]``: each job on one line, ``Job Id: <id>`` then
    ``name=value`` for each attribute, joined by the delimiter (`dsv_line`)."""
    return "\n".join(dsv_line("Job Id", job_id, _lines(attrs, JOB_ORDER, JOB_TIME_ATTRIBUTES,
                                                        estimated_start=True), delimiter)
                     for job_id, attrs in _records(jobs, "id"))


def dsv_line(kind: str, name: str, lines: Iterable[tuple[str, str]], delimiter: str) -> str:
    r"""One object as PBS's ``-F dsv`` writes it (OpenPBS 23.06, checked): ``<kind>: <name>``,
    then each ``label=value`` (values as ``-f`` shows them, times as ctime), joined by the
    delimiter; the delimiter inside a value gets a backslash before it (with ``-D ,``,
    Variable_List's commas are ``\,`` and a comma it escaped already ``\\,``)."""
    return delimiter.join([f"{kind}: {name}", *(
        f"{label}={show_nonprint(text).replace(delimiter, BACKSLASH + delimiter)}"
        for label, text in lines)])


def qstat_json(jobs: Any, server: Any, version: str | None = None, *,
               timestamp: int | None = None) -> str:
    """``qstat -f -F json``: ``{"timestamp", "pbs_version", "pbs_server", "Jobs": {id: {...}}}``
    (no ``Jobs`` key when there is no job, as PBS)."""
    records = _records(jobs, "id")
    body: dict[str, Any] = {}
    if records:
        body["Jobs"] = {job_id: _json_attrs(attrs, JOB_ORDER, JOB_TIME_ATTRIBUTES)
                        for job_id, attrs in records}
    return _json_document(body, _server_name(server), version, timestamp)


def qstat_queues(queues: Any, *, full: bool = False, json_out: bool = False,
                 server: Any = None, version: str | None = None,
                 timestamp: int | None = None, dsv: str | None = None) -> str:
    """``qstat -Q`` (the queue table), ``qstat -Qf`` (``Queue: <name>`` and its attributes),
    ``qstat -Qf -F json`` (``"Queue": {name: {...}}``) and ``qstat -Qf -F dsv`` (one line
    a queue, `dsv` its delimiter: `dsv_line`)."""
    records = _records(queues, "name")
    if dsv is not None:
        return "\n".join(dsv_line("Queue", n, _lines(a, QUEUE_ORDER, frozenset()), dsv)
                         for n, a in records)
    if json_out:
        body = {"Queue": {n: _json_attrs(a, QUEUE_ORDER, frozenset()) for n, a in records}}
        return _json_document(body if records else {}, _server_name(server), version,
                              timestamp)
    if full:
        return _full("Queue", records, QUEUE_ORDER, frozenset())
    if not records:
        return ""
    lines = ["Queue              Max   Tot Ena Str   Que   Run   Hld   Wat   Trn   Ext Type",
             "---------------- ----- ----- --- --- ----- ----- ----- ----- ----- ----- ----"]
    for name, attrs in records:
        head, counts = _summary_columns(name, attrs)
        qtype = attrs.get("queue_type")
        qtype = "not defined" if qtype is None else _trunc(str(qtype), 4)
        lines.append(f"{head} {'yes' if _istrue(attrs.get('enabled')) else 'no':>3} "
                     f"{'yes' if _istrue(attrs.get('started')) else 'no':>3} "
                     f"{counts} {qtype:<4}")
    return "\n".join(lines)


def qstat_server(server: Any, *, full: bool = False, json_out: bool = False,
                 version: str | None = None, timestamp: int | None = None,
                 dsv: str | None = None) -> str:
    """``qstat -B`` (the server table), ``qstat -Bf`` (``Server: <name>`` and its
    attributes), ``qstat -Bf -F json`` (``"Server": {name: {...}}``) and ``qstat -Bf -F
    dsv`` (one line, `dsv` its delimiter: `dsv_line`)."""
    records = _server_records(server)
    if dsv is not None:
        return "\n".join(dsv_line("Server", n, _lines(a, SERVER_ORDER, frozenset()), dsv)
                         for n, a in records)
    if json_out:
        body = {"Server": {n: _json_attrs(a, SERVER_ORDER, frozenset()) for n, a in records}}
        name = records[0][0] if records else ""
        return _json_document(body if records else {}, name, version, timestamp)
    if full:
        return _full("Server", records, SERVER_ORDER, frozenset())
    lines = ["Server             Max   Tot   Que   Run   Hld   Wat   Trn   Ext Status",
             "---------------- ----- ----- ----- ----- ----- ----- ----- ----- -----------"]
    for name, attrs in records:
        head, counts = _summary_columns(name, attrs)
        status = _trunc(str(attrs.get("server_state") or ""), 10)
        lines.append(f"{head} {counts} {status:<10}")
    return "\n".join(lines)


# -- pbsnodes ---------------------------------------------------------------------------------

def pbsnodes_full(vnodes: Any) -> str:
    """``pbsnodes -a``: the vnode's name, then ``     name = value`` lines (five spaces, no
    wrapping; last_state_change_time and last_used_time as ctime; ``jobs = 1.s/0, 1.s/1``
    and ``resv = R3.s, R2.s``), a blank line after each."""
    blocks = []
    for name, attrs in _records(vnodes, "name"):
        lines = [name]
        attrs = {**attrs, **{key: ", ".join(map(str, attrs[key])) for key in _SPACED
                             if attrs.get(key) and isinstance(attrs[key], (list, tuple))}}
        for label, text in _lines(attrs, _node_order(attrs), NODE_TIME_ATTRIBUTES):
            lines.append(f"     {label} = {show_nonprint(text)}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


#: A vnode's lists PBS prints with a space after each comma (its ``jobs`` and ``resv``).
_SPACED = ("jobs", "resv")


def pbsnodes_json(vnodes: Any, server: Any, version: str | None = None, *,
                  timestamp: int | None = None) -> str:
    """``pbsnodes -a -F json``: ``{"timestamp", "pbs_version", "pbs_server", "nodes": {...}}``.

    As PBS writes it: resources_available and resources_assigned are objects (resources
    assigned as zero are left out), jobs is an array of job ids (one for a job's CPUs in a
    row), resv one string (``"R3.s, R2.s"``), times stay epoch numbers.
    """
    nodes: dict[str, Any] = {}
    for name, attrs in _records(vnodes, "name"):
        node: dict[str, Any] = {}
        for attr, value in _ordered(attrs, _node_order(attrs)):
            if attr == "jobs":
                ids: list[Any] = []
                for job in (value if isinstance(value, (list, tuple))
                            else str(value).replace(" ", "").split(",")):
                    job_id = str(job).split("/")[0]
                    if job_id and (not ids or ids[-1] != job_id):
                        ids.append(job_id)
                node[attr] = ids
            elif attr == "resv" and isinstance(value, (list, tuple)):
                node[attr] = ", ".join(map(str, value))
            elif attr == "resources_assigned" and isinstance(value, Mapping):
                node[attr] = {r: json_value(value_text(v, r)) for r, v in sorted(value.items())
                              if v is not None and not _zero(value_text(v, r))}
            elif isinstance(value, Mapping):
                node[attr] = {r: json_value(value_text(v, r)) for r, v in sorted(value.items())
                              if v is not None}
            else:
                node[attr] = json_value(value_text(value))
        nodes[name] = node
    return _json_document({"nodes": nodes}, _server_name(server), version, timestamp)


def pbsnodes_dsv(vnodes: Any, delimiter: str = "|") -> str:
    """``pbsnodes -a -F dsv``: each vnode on one line, ``Name=<name>`` then each
    ``name=value`` joined by the delimiter; times stay epoch numbers and lists take commas
    (``jobs=1.s/0,1.s/1``). PBS writes a delimiter inside a value as it is (checked)."""
    lines = []
    for name, attrs in _records(vnodes, "name"):
        attrs = {**attrs, **{key: ",".join(map(str, attrs[key])) for key in _SPACED
                             if attrs.get(key) and isinstance(attrs[key], (list, tuple))}}
        fields = [f"Name={name}"]
        for label, text in _lines(attrs, _node_order(attrs), frozenset()):
            fields.append(f"{label}={show_nonprint(text)}")
        lines.append(delimiter.join(fields))
    return "\n".join(lines)


#: What ``pbsnodes`` without ``-v`` shows of a host of several vnodes, in this order
#: (OpenPBS 23.06's pbs_stathost): each the first vnode's value, ``<various>`` where
#: they differ, ``jobs`` all of them; then the resources.
HOST_ATTRS = (
    "Mom", "Port", "pbs_version", "ntype", "state", "pcpus", "Priority", "jobs",
    "max_running", "max_user_run", "max_group_run", "no_tasks", "pnames", "resv", "queue",
    "comment", "resv_enable", "no_multinode_jobs", "sharing", "provision_enable",
    "current_aoe", "license", "license_info", "topology_info", "vnode_pool",
    "power_provisioning", "current_eoe", "poweroff_eligible", "last_state_change_time",
    "last_used_time")
VARIOUS = "<various>"
#: The resources PBS's server always reports in a vnode's resources_assigned (the
#: engine's leaves out what is 0), which pbs_stathost therefore sums.
ASSIGNED_ALWAYS = frozenset({"ncpus", "mem", "vmem", "naccelerators", "accelerator_memory",
                             "hbmem"})
_KB_SHIFT = {"k": 0, "m": 10, "g": 20, "t": 30, "p": 30}  # (PBS's: a pb counts as a tb)


def _kb(text: str) -> int:
    """A consumable amount as pbs_stathost adds it: a size in kb (bytes and words
    rounded down), a number as it is."""
    m = re.match(r"\s*(-?\d+)(.?)", text)
    if m is None:
        return 0
    number, letter = int(m[1]), m[2].lower()
    if not re.search(r"[kmgtpbw]", text[m.end(1):], re.IGNORECASE):
        return number
    return number << _KB_SHIFT[letter] if letter in _KB_SHIFT else number >> 10


def pbsnodes_hosts(vnodes: Any, only: str | None = None) -> dict[str, dict[str, Any]]:
    """The hosts ``pbsnodes`` lists without ``-v`` (OpenPBS 23.06's pbs_stathost): one
    per ``resources_available.host`` (in any case), in the order of their first vnode; a
    host of one vnode is that vnode, a host of several is named after the host, with the
    attributes of `HOST_ATTRS` and the resources of its vnodes: a resource some vnode has
    assigned is summed (a size in kb), any other is the vnodes' value or ``<various>``. A
    vnode without a host is not listed; an indirect value (``@vnode``) is left out.
    `only`: that host alone (``pbsnodes <host>``), none when no vnode has it."""
    records = _records(vnodes, "name")
    hosts: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    spelled: dict[str, str] = {}
    consumable: set[str] = set(ASSIGNED_ALWAYS)
    sized: set[str] = {r for r in ASSIGNED_ALWAYS if r in _SIZE_RESOURCES or r == "hbmem"}
    for name, attrs in records:
        for kind in ("resources_available", "resources_assigned"):
            for res, value in _resources(attrs, kind).items():
                text = value_text(value, res)
                if "@" in text:
                    continue
                if kind == "resources_assigned":
                    consumable.add(res)
                if re.search(r"[kmgtpbw]", text, re.IGNORECASE):
                    sized.add(res)
        host = _resources(attrs, "resources_available").get("host")
        if host is None:
            continue
        key = str(host).lower()
        if only is not None and key != only.lower():
            continue
        spelled.setdefault(key, str(host))
        hosts.setdefault(key, []).append((name, attrs))
    out: dict[str, dict[str, Any]] = {}
    for key, members in hosts.items():
        if len(members) == 1:
            out[members[0][0]] = members[0][1]
            continue
        merged: dict[str, Any] = {}
        for attr in HOST_ATTRS:
            texts = [_node_text(attr, a[attr]) for _, a in members
                     if a.get(attr) not in (None, "", [], ())]
            if attr == "jobs" and texts:  # (a list, as a vnode's: every vnode's jobs)
                merged[attr] = [job for text in texts for job in text.split(", ")]
            elif texts:
                merged[attr] = texts[0] if all(t == texts[0] for t in texts) else VARIOUS
        avail: dict[str, Any] = {}
        assigned: dict[str, Any] = {}
        for res in sorted({str(r) for _, a in members
                           for kind in ("resources_available", "resources_assigned")
                           for r in _resources(a, kind)}):
            have = [value_text(v, res) for _, a in members
                    if (v := _resources(a, "resources_available").get(res)) is not None]
            used = [value_text(v, res) for _, a in members
                    if (v := _resources(a, "resources_assigned").get(res)) is not None]
            unit = "kb" if res in sized else ""
            if res in consumable:
                avail[res] = f"{sum(_kb(t) for t in have if '@' not in t)}{unit}"
                if used:  # (the engine's vnodes leave out what is 0, and so their host)
                    assigned[res] = f"{sum(_kb(t) for t in used if '@' not in t)}{unit}"
            elif have:
                avail[res] = have[0] if all(t.lower() == have[0].lower() for t in have) \
                    else VARIOUS
        if avail:
            merged["resources_available"] = avail
        if assigned:
            merged["resources_assigned"] = assigned
        out[spelled[key]] = merged
    return out


def _resources(attrs: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    value = attrs.get(kind)
    return value if isinstance(value, Mapping) else {}


def _node_order(attrs: Mapping[str, Any]) -> tuple[str, ...]:
    """The order of a vnode's attributes, or of a host's of several vnodes (which
    `pbsnodes_hosts` made: its vnode resource is theirs, ``<various>``): PBS lists a
    host's resources last."""
    if _resources(attrs, "resources_available").get("vnode") == VARIOUS:
        return (*HOST_ATTRS, "resources_available", "resources_assigned")
    return NODE_ORDER


def _node_text(attr: str, value: Any) -> str:
    if attr in _SPACED and isinstance(value, (list, tuple)):
        return ", ".join(map(str, value))
    return value_text(value)

#: The states ``pbsnodes -l`` lists a vnode in (OpenPBS 23.06, checked: not free, busy or
#: sleep).
DOWN_STATES = frozenset({"offline", "down", "state-unknown", "unresolvable", "stale"})


def pbsnodes_down(vnodes: Any) -> str:
    """``pbsnodes -l``: a line per vnode that is down, offline or unknown (`DOWN_STATES`):
    its name in 20 columns, its state and its comment (PBS's line ends in a blank when
    there is none); empty when none is."""
    lines = []
    for name, attrs in _records(vnodes, "name"):
        state = str(attrs.get("state") or "")
        if DOWN_STATES & set(state.split(",")):
            comment = show_nonprint(str(attrs.get("comment") or ""))
            lines.append(f"{name:<20} {state} {comment}")
    return "\n".join(lines)


#: ``pbsnodes -S``'s and ``-Sj``'s headers, as OpenPBS 23.06 prints them (checked).
SUMMARY_HEADER = (
    "vnode           state           OS       hardware host            queue        mem"
    "     ncpus   nmics   ngpus  comment",
    "--------------- --------------- -------- -------- --------------- ---------- --------"
    " ------- ------- ------- ---------")
SUMMARY_JOBS_HEADER = (
    "                                                        mem       ncpus   nmics   ngpus",
    "vnode           state           njobs   run   susp      f/t        f/t     f/t     f/t"
    "   jobs",
    "--------------- --------------- ------ ----- ------ ------------ ------- ------- -------"
    " -------")

#: A size as pbsnodes -S shows it: the unit that keeps it under 1000, rounded half up.
_SUMMARY_UNITS = (" b", "kb", "mb", "gb", "tb", "pb")
_SIZE_PARTS = re.compile(r"^\s*([0-9]+)\s*([kmgtp]?)[bw]?\s*$", re.IGNORECASE)


def summary_size(value: Any) -> str:
    """A size as ``pbsnodes -S`` shows it (OpenPBS 23.06, checked): in the unit that keeps
    it below 1000, rounded half up (``24683792kb`` is ``24gb``, ``1000kb`` ``1mb``,
    ``999kb`` ``999kb``, ``2560mb`` ``3gb``), bytes as ``100 b``; a word counts as a byte,
    as PBS counts it here (``5w`` is ``5 b``). An unset or unreadable size is ``0kb``."""
    amount = _size_amount(value)
    if amount is None:
        return "0kb"
    number, shift = amount
    while number >= 1000 and shift < len(_SUMMARY_UNITS) - 1:
        number /= 1024
        shift += 1
    return f"{int(number + 0.5)}{_SUMMARY_UNITS[shift]}"


def _size_amount(value: Any) -> tuple[float, int] | None:
    """A size as (number, unit: 0 bytes, 1 kb, 2 mb...), None when it is none."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value), 0
    m = _SIZE_PARTS.match(str(value))
    if m is None:
        return None
    return float(m[1]), "kmgtp".find(m[2].lower()) + 1 if m[2] else 0


def _free_size(total: Any, used: Any) -> str:
    """`total` less `used`, as `summary_size` shows it (in the smaller of their units)."""
    have, taken = _size_amount(total), _size_amount(used)
    if have is None:
        return summary_size(None)
    if taken is None:
        return summary_size(total)
    unit = min(have[1], taken[1])
    free = have[0] * 1024 ** (have[1] - unit) - taken[0] * 1024 ** (taken[1] - unit)
    number, shift = max(free, 0.0), unit
    while number >= 1000 and shift < len(_SUMMARY_UNITS) - 1:
        number /= 1024
        shift += 1
    return f"{int(number + 0.5)}{_SUMMARY_UNITS[shift]}"


def _count(value: Any) -> int:
    try:
        return int(float(value or 0))
    except (TypeError, ValueError):
        return 0


def _summary(name: str, attrs: Mapping[str, Any], long: bool) -> dict[str, Any]:
    """What ``pbsnodes -S`` and ``-Sj`` show of one vnode."""
    avail = attrs.get("resources_available") or {}
    assigned = attrs.get("resources_assigned") or {}
    state = str(attrs.get("state") or "")
    jobs: list[str] = []
    for job in attrs.get("jobs") or ():
        job_id = str(job).split("/")[0]
        if job_id and job_id not in jobs:
            jobs.append(job_id)

    def free(resource: str) -> str:
        total = _count(avail.get(resource))
        return f"{total - _count(assigned.get(resource))}/{total}"

    return {
        "vnode": name, "state": state if long else state.split(",")[0],
        "OS": str(avail.get("OS") or "--"), "hardware": str(avail.get("hardware") or "--"),
        "host": str(avail.get("host") or "--"), "queue": str(attrs.get("queue") or "--"),
        "mem": summary_size(avail.get("mem")), "ncpus": _count(avail.get("ncpus")),
        "nmics": _count(avail.get("nmics")), "ngpus": _count(avail.get("ngpus")),
        "comment": show_nonprint(str(attrs.get("comment") or "")) or "--",
        "jobs": jobs, "mem f/t": f"{_free_size(avail.get('mem'), assigned.get('mem'))}/"
                                 f"{summary_size(avail.get('mem'))}",
        "ncpus f/t": free("ncpus"), "nmics f/t": free("nmics"), "ngpus f/t": free("ngpus"),
    }


def pbsnodes_summary(vnodes: Any, *, jobs: bool = False, long: bool = False,
                     fmt: str | None = None, delimiter: str = "|", server: Any = None,
                     version: str | None = None, timestamp: int | None = None) -> str:
    """``pbsnodes -aS`` (or ``-S`` of named vnodes): a line per vnode, its state, OS,
    hardware, host, queue, mem, ncpus, nmics, ngpus and comment; with `jobs` (``-Sj``) its
    jobs instead, counted and listed (by their numbers), with the free and the total of
    mem, ncpus, nmics and ngpus. As OpenPBS 23.06 prints them (checked): without `long`
    (``-L``) the name, host and queue are cut to their columns and the state is its first
    word; `fmt` ``json`` or ``dsv`` writes the same in PBS's words for them (a count of 0
    is ``""`` in its JSON; dsv lists the jobs by their full ids)."""
    rows = [_summary(name, attrs, long) for name, attrs in _records(vnodes, "name")]
    if fmt == "json":
        def count(n: int) -> Any:
            return _Number(str(n)) if n else ""

        nodes: dict[str, Any] = {}
        for r in rows:
            if jobs:
                nodes[r["vnode"]] = {
                    "State": r["state"], "Total Jobs": count(len(r["jobs"])),
                    "Running Jobs": count(len(r["jobs"])), "Suspended Jobs": "",
                    "mem f/t": r["mem f/t"], "ncpus f/t": r["ncpus f/t"],
                    "nmics f/t": r["nmics f/t"], "ngpus f/t": r["ngpus f/t"],
                    "jobs": list(r["jobs"])}
            else:
                nodes[r["vnode"]] = {
                    "State": r["state"], "OS": r["OS"], "hardware": r["hardware"],
                    "host": r["host"], "queue": r["queue"], "Memory": r["mem"],
                    "ncpus": count(r["ncpus"]), "nmics": count(r["nmics"]),
                    "ngpus": count(r["ngpus"]), "comment": r["comment"]}
        return _json_document({"nodes": nodes}, _server_name(server), version, timestamp)
    if fmt == "dsv":
        if jobs:
            keys = (("vnode", "vnode"), ("state", "state"), ("njobs", None), ("run", None),
                    ("susp", None), ("mem(f/t)", "mem f/t"), ("ncpus(f/t)", "ncpus f/t"),
                    ("nmics(f/t)", "nmics f/t"), ("ngpus(f/t)", "ngpus f/t"))
            return "\n".join(delimiter.join(
                [f"{label}={r[key] if key else (0 if label == 'susp' else len(r['jobs']))}"
                 for label, key in keys] + [f"jobs={','.join(r['jobs']) or '--'}"])
                for r in rows)
        return "\n".join(delimiter.join(
            f"{key}={r[key]}" for key in ("vnode", "state", "OS", "hardware", "host", "queue",
                                          "mem", "ncpus", "nmics", "ngpus", "comment"))
            for r in rows)

    def cut(text: str, width: int) -> str:
        return text if long else text[:width]

    lines = list(SUMMARY_JOBS_HEADER if jobs else SUMMARY_HEADER)
    for r in rows:
        head = f"{cut(r['vnode'], 15):<15} {cut(r['state'], 15):<15}"
        if jobs:
            numbers = ",".join(job.split(".")[0] for job in r["jobs"]) or "--"
            lines.append(f"{head} {len(r['jobs']):>6} {len(r['jobs']):>5} {0:>6} "
                         f"{r['mem f/t']:>12} {r['ncpus f/t']:>7} {r['nmics f/t']:>7} "
                         f"{r['ngpus f/t']:>7} {numbers}")
        else:
            lines.append(f"{head} {cut(r['OS'], 8):<8} {cut(r['hardware'], 8):<8} "
                         f"{cut(r['host'], 15):<15} {cut(r['queue'], 10):<10} "
                         f"{r['mem']:>8} {r['ncpus']:>7} {r['nmics']:>7} {r['ngpus']:>7} "
                         f"{r['comment']}")
    return "\n".join(lines)


def _zero(text: str) -> bool:
    # PBS drops an assigned amount that reads as zero ("0", "0kb").
    m = re.match(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)", text)
    return (float(m.group(1)) == 0) if m else False


# -- pbs_rstat --------------------------------------------------------------------------------

def convert_time(epoch: Any, now: float | None = None) -> str:
    """A reservation time as pbs_rstat's table shows it: ``Today 14:00`` today, ``Sat 10:30``
    this week, ``Sat Mar 14 10:30`` this year, ``Sat Mar 14 2027 10:30`` otherwise."""
    then = time.localtime(int(float(epoch)))
    today = time.localtime(time.time() if now is None else now)
    if then.tm_year != today.tm_year:
        return time.strftime("%a %b %d %Y %H:%M", then)
    if then.tm_yday == today.tm_yday:
        return time.strftime("Today %H:%M", then)
    wday = (today.tm_wday + 1) % 7     # days since Sunday, as C's tm_wday
    if today.tm_yday - wday <= then.tm_yday <= today.tm_yday + 6 - wday:
        return time.strftime("%a %H:%M", then)
    return time.strftime("%a %b %d %H:%M", then)


def rstat_table(resvs: Any, *, now: float | None = None) -> str:
    """``pbs_rstat``: ``Resv ID``, ``Queue``, ``User``, ``State`` and ``Start / Duration /
    End`` per reservation under PBS's header; empty when there is none."""
    records = _records(resvs, "resvid", "name", "id")
    if not records:
        return ""
    lines = [f"{'Resv ID':<10.10} {'Queue':<8.8} {'User':<8.8} {'State':<5.5} "
             f"{'Start':>17.17} / Duration / {'End':<17.17}", "-" * 69]
    for resvid, attrs in records:
        users = attrs.get("Authorized_Users")
        user = ",".join(users) if isinstance(users, (list, tuple)) else str(users or "")
        start, end = attrs.get("reserve_start"), attrs.get("reserve_end")
        duration = attrs.get("reserve_duration")
        if duration is None and start is not None and end is not None:
            duration = int(float(end)) - int(float(start))
        seconds = parse_duration(duration) if duration is not None else 0
        start_text = convert_time(start, now) if start is not None else ""
        end_text = convert_time(end, now) if end is not None else ""
        lines.append(f"{resvid:<10.10} {str(attrs.get('queue') or ''):<8.8} {user:<8.8} "
                     f"{resv_state(attrs.get('reserve_state')):<5.5} {start_text:>17.17} / "
                     f"{seconds} / {end_text:<17.17}")
    return "\n".join(lines)


#: A reservation's attributes pbs_rstat -f does not list (``reserve_type``: none of
#: OpenPBS 23.06's; pbsplug stores it; a standing reservation's zone and first start,
#: which PBS keeps unlisted too: its PBS_TZID shows in Variable_List).
_RESV_UNLISTED = frozenset({"resv_execvnodes", "reserve_type", "reserve_timezone",
                            "reserve_series_start", "reserve_series_duration"})


def _resv_resource_order(resources: Mapping[str, Any]) -> list[str]:
    """A reservation's resources as pbs_rstat -f lists them: by name, ``place`` after
    ``select`` (``ncpus, nodect, select, place, walltime``; checked)."""
    names = sorted(resources)
    if "place" in names and "select" in names:
        names.remove("place")
        names.insert(names.index("select") + 1, "place")
    return names


def rstat_full(resvs: Any) -> str:
    """``pbs_rstat -f``: ``Resv ID: <id>``, then ``name = value`` lines (no indent; times as
    ``%a %b %d %H:%M:%S %Y``, reserve_state in its long form; resources in name order but
    ``place`` right after ``select``, as OpenPBS 23.06 lists them), a blank line after
    each."""
    blocks = []
    for resvid, attrs in _records(resvs, "resvid", "name", "id"):
        lines = [f"Resv ID: {resvid}"]
        for name, value in _ordered(attrs, RESV_ORDER):
            if name in _RESV_UNLISTED:
                continue
            if isinstance(value, Mapping) and name != "Variable_List":
                for res in _resv_resource_order(value):
                    if value[res] is not None:
                        lines.append(f"{name}.{res} = "
                                     f"{show_nonprint(value_text(value[res], res))}")
                continue
            if name == "reserve_state":
                text = resv_state(value, long=True)
            elif name in RESV_TIME_ATTRIBUTES and _is_epoch(value):
                text = time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(int(float(value))))
            else:
                text = value_text(value)
            lines.append(f"{name} = {show_nonprint(text)}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


__all__ = [
    "CHAR_LINE_LIMIT", "JOB_ORDER", "JOB_STATES", "JOB_TIME_ATTRIBUTES", "NODE_ORDER",
    "QUEUE_ORDER", "RESV_ORDER", "RESV_STATES", "SERVER_ORDER", "convert_time", "ctime",
    "dsv_line", "job_state_letter", "json_value", "pbsnodes_down", "pbsnodes_dsv",
    "pbsnodes_full", "pbsnodes_json", "pbsnodes_summary", "summary_size",
    "qstat_dsv", "qstat_full", "qstat_json", "qstat_queues", "qstat_server", "qstat_table",
    "resv_state", "rstat_full", "rstat_table", "show_nonprint", "value_text",
    "WIDE_WIDTHS", "wrap_attribute",
]
