"""The simulated machine: hosts, their vnodes, partitions, and each host's power model.

A machine comes from a platform file (TOML), from ``--nodes``/``--cpus-per-node``, or from a
trace's header (SWF MaxNodes/MaxProcs). A platform file::

    [power.thin]            # a power model: watts per state, seconds per transition
    busy = 190.0            # a host running at least one job
    idle = 95.0             # up, no job
    asleep = 9.0            # a host the power plugin ramped down
    off = 0.0               # powered off
    booting = 120.0         # powering on (for `boot` seconds)
    shutting_down = 120.0   # powering off (for `shutdown` seconds); default: booting
    boot = 300              # seconds
    shutdown = 30

    [[hosts]]               # a group of identical hosts
    prefix = "n"            # host names n0001 .. n0100 (or `names = ["a", "b"]`)
    count = 100
    vnodes = 1              # vnodes per host (named <host>[0], <host>[1] ... when > 1)
    ncpus = 8               # per vnode
    mem = "32gb"            # per vnode, optional
    partition = "p1"        # optional
    power = "thin"          # the power model; optional when there is exactly one
    poweroff_eligible = true

    [queues.long]           # optional: a queue's partition and Priority
    partition = "p1"
    priority = 10
    resources_max = {walltime = "24:00:00"}   # optional, as qmgr's; also
                                              # resources_default and resources_min

    [queues.workq]          # a route queue (queue_type and route_* keys as qmgr's)
    queue_type = "Route"
    route_destinations = ["long"]

    [queues.vip]            # who and how many may enter (ENTRY_KEYS, as qmgr's)
    acl_user_enable = true
    acl_users = ["12"]      # the trace's users: an SWF user id is its number
    from_route_only = true
    max_queued = "[u:PBS_GENERIC=10]"

Every value is checked on load; an error names the file, the key and the value.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..siteconfig import TomlError, read_toml
from ..units import parse_size
from ..values import BadValue, check_name, resources

#: The power model of a machine that does not give one: round figures for a dual-socket
#: server of the 2010s, so that energy is never silently zero. A platform file sets real ones.
DEFAULT_POWER = {"busy": 200.0, "idle": 100.0, "asleep": 10.0, "off": 0.0, "booting": 150.0,
                 "shutting_down": 150.0, "boot": 300.0, "shutdown": 60.0}
_WATTS = ("busy", "idle", "asleep", "off", "booting", "shutting_down")
_SECONDS = ("boot", "shutdown")
_HOST_KEYS = {"prefix", "names", "count", "vnodes", "ncpus", "mem", "partition", "power",
              "poweroff_eligible"}
#: The largest machine a replay builds (vnodes in all), and the most cpus on one vnode:
#: ten times today's largest systems, and a bound on the memory a typo can ask for.
MAX_VNODES = 1_000_000
MAX_NCPUS = 1_000_000
#: The largest watts and seconds in a power model.
MAX_FIGURE = 1e9
#: A queue's name: PBS's characters and length (letters, digits, `_`, `-`; at most 15),
#: but it may start with a digit, since SWF numbers its queues (`[queues.1]`).
_QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,14}")
#: A partition's name: one a sched's partition attribute can list (PBS's list is
#: comma-separated): letters, digits, `_`, `.`, `-`.
_PARTITION_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,254}")
#: The default scheduler's own partition, which PBS refuses on a queue or a node.
_DEFAULT_PARTITION = "pbs-default"
#: PBS's range of a queue's Priority.
_PRIORITY = (-1024, 1023)
#: A route queue's keys (as qmgr sets them; docs/engine.md, Routing queues).
ROUTE_KEYS = ("queue_type", "route_destinations", "route_held_jobs", "route_waiting_jobs",
              "route_lifetime", "route_retry_time")
#: A queue's rules on who and how many may enter it (as qmgr sets them; docs/engine.md):
#: checked by the engine's own code when a job is submitted to the queue or routed to it.
ENTRY_KEYS = ("from_route_only", "acl_user_enable", "acl_users", "acl_group_enable",
              "acl_groups", "max_queued", "max_queued_res", "queued_jobs_threshold",
              "queued_jobs_threshold_res", "max_queuable")
#: What a replay cannot model: its jobs come from no host (each is its owner's at the
#: server, ``user@sim``), so a host list would refuse all or none of them.
_HOST_ACL_KEYS = ("acl_host_enable", "acl_hosts")
#: Where a replay puts the jobs of a queue the platform does not declare.
DEFAULT_QUEUE = "workq"


class PlatformError(ValueError):
    """A platform that cannot be simulated; one line naming the file, the key and the value."""


@dataclass(frozen=True, slots=True)
class PowerModel:
    name: str
    busy: float
    idle: float
    asleep: float
    off: float
    booting: float
    shutting_down: float
    boot: float
    shutdown: float

    def __hash__(self) -> int:  # the simulator counts hosts by model at every change
        return hash(self.name)


@dataclass(slots=True)
class Host:
    name: str
    index: int
    vnodes: list[str]
    ncpus: int                 # per vnode
    mem: int | None            # bytes per vnode
    partition: str | None
    power: PowerModel
    poweroff_eligible: bool = True


@dataclass(slots=True)
class Machine:
    hosts: list[Host]
    queues: dict[str, dict[str, Any]] = field(default_factory=dict)
    source: str = ""

    @property
    def total_cpus(self) -> int:
        return sum(h.ncpus * len(h.vnodes) for h in self.hosts)

    def describe(self) -> str:
        cpus = {h.ncpus * len(h.vnodes) for h in self.hosts}
        per = f"{cpus.pop()} cpus each" if len(cpus) == 1 else "cpus varying"
        return (f"{len(self.hosts)} hosts, {sum(len(h.vnodes) for h in self.hosts)} vnodes, "
                f"{self.total_cpus} cpus ({per}; from {self.source})")


def default_power() -> PowerModel:
    return PowerModel("default", **DEFAULT_POWER)


def uniform(nodes: int, cpus_per_node: int, source: str,
            power: PowerModel | None = None) -> Machine:
    """`nodes` hosts of one vnode with `cpus_per_node` cpus each."""
    if not 1 <= nodes <= MAX_VNODES:
        raise PlatformError(f"{source}: nodes: {nodes}: expected 1 to {MAX_VNODES:,}")
    if not 1 <= cpus_per_node <= MAX_NCPUS:
        raise PlatformError(f"{source}: cpus per node: {cpus_per_node}: expected 1 to "
                            f"{MAX_NCPUS:,}")
    model = power or default_power()
    width = len(str(nodes))
    hosts = [Host(f"n{i:0{width}d}", i, [f"n{i:0{width}d}"], cpus_per_node, None, None, model)
             for i in range(nodes)]
    return Machine(hosts, source=source)


def from_header(max_nodes: int | None, max_procs: int | None, path: str) -> Machine:
    """The machine a trace's header describes: MaxNodes hosts of MaxProcs / MaxNodes cpus
    (one cpu per host when only MaxProcs is given, as RLScheduler reads it)."""
    if max_nodes and max_procs and max_procs % max_nodes == 0:
        return uniform(max_nodes, max_procs // max_nodes, f"{path} header")
    if max_procs:
        return uniform(max_procs, 1, f"{path} header (MaxProcs)")
    if max_nodes:
        return uniform(max_nodes, 1, f"{path} header (MaxNodes)")
    raise PlatformError(f"{path}: the header gives neither MaxNodes nor MaxProcs; give "
                        "--nodes and --cpus-per-node, or --platform")


def load_platform(path: str | Path) -> Machine:
    path = str(path)
    try:
        data = read_toml(path)
    except TomlError as exc:
        raise PlatformError(f"{path}: {exc.text}") from None
    unknown = set(data) - {"power", "hosts", "queues"}
    if unknown:
        raise PlatformError(f"{path}: {sorted(unknown)[0]}: unknown section; expected power, "
                            "hosts or queues")
    models = {name: _power(path, name, table)
              for name, table in _table(path, "power", data.get("power", {})).items()}
    groups = data.get("hosts")
    if not isinstance(groups, list) or not groups:
        raise PlatformError(f"{path}: hosts: {groups!r}: expected one or more [[hosts]] tables")
    hosts: list[Host] = []
    seen: set[str] = set()  # host and vnode names
    vnodes = 0
    for n, group in enumerate(groups):
        more = _group(path, f"hosts[{n}]", group, models, seen, len(hosts), vnodes)
        hosts.extend(more)
        vnodes += sum(len(h.vnodes) for h in more)
    queues = {}
    for name, table in _table(path, "queues", data.get("queues", {})).items():
        if not _QUEUE_NAME.fullmatch(name):
            raise PlatformError(f"{path}: queues.{name!r}: expected a queue name (1 to 15 "
                                "letters, digits, _ or -)")
        where = f"queues.{name}"
        extra = set(_table(path, where, table)) - {"partition", "priority", *_QUEUE_RESOURCES,
                                                   *ROUTE_KEYS, *ENTRY_KEYS}
        for key in _HOST_ACL_KEYS:
            if key in extra:
                raise PlatformError(f"{path}: {where}.{key}: not modelled in a replay: its "
                                    "jobs come from no host (give acl_users or acl_groups)")
        if extra:
            raise PlatformError(f"{path}: {where}.{sorted(extra)[0]}: unknown key; expected "
                                "partition, priority, resources_default, resources_max, "
                                "resources_min, a route queue's queue_type, "
                                "route_destinations, route_held_jobs, route_waiting_jobs, "
                                "route_lifetime or route_retry_time, or "
                                f"{', '.join(ENTRY_KEYS)}")
        queue: dict[str, Any] = _route_keys(path, name, table)
        queue.update(_entry_keys(path, name, table))
        for key in _QUEUE_RESOURCES:
            if key in table:
                queue[key] = _resources(path, f"{where}.{key}", table[key])
        if "partition" in table:
            queue["partition"] = _partition(path, f"{where}.partition", table["partition"])
            if not any(h.partition == queue["partition"] for h in hosts):
                raise PlatformError(f"{path}: {where}.partition: {queue['partition']!r}: no "
                                    "host is in it, so no job of the queue could ever run")
        if "priority" in table:
            queue["Priority"] = _int(path, f"{where}.priority", table["priority"], *_PRIORITY)
        queues[name] = queue
    _check_routes(path, queues)
    return Machine(hosts, queues, source=path)


def _route_keys(path: str, name: str, table: dict[str, Any]) -> dict[str, Any]:
    """A queue's queue_type and route_* keys, each read and checked as ``qmgr -c "set queue
    NAME KEY = VALUE"`` reads it (the engine's own conversion: ``queue_type = "r"`` is
    Route, a list is PBS's comma-separated one), and by the engine's rules for a route
    queue: no partition (`partitions.check_queue`), and destinations to enable it. The
    route_* keys of an execution queue are refused: they would do nothing."""
    given = [key for key in ROUTE_KEYS if key in table]
    if not given:
        return {}
    from ..engine.partitions import World, check_queue
    from ..engine.qmgr import AttrOp, QmgrError, convert, definitions

    defs = definitions("queue")
    where = f"queues.{name}"
    out: dict[str, Any] = {}
    for key in given:
        value = table[key]
        text = ("true" if value else "false") if isinstance(value, bool) else \
            ",".join(map(str, value)) if isinstance(value, list) else str(value)
        try:
            out[key] = convert("queue", AttrOp(key, None, "=", text), defs)
        except QmgrError as exc:
            raise PlatformError(f"{path}: {where}.{key}: {value!r}: {exc}") from None
    route = out.get("queue_type") == "Route"
    if not route:
        extra = [key for key in given if key != "queue_type"]
        if extra:
            raise PlatformError(f"{path}: {where}.{extra[0]}: only a route queue (queue_type = "
                                '"Route") has it')
        return out
    try:
        check_queue(name, set(table) & {"partition", "queue_type"},
                    {**out, "partition": table.get("partition")},
                    World(scheds={}, queues={}, nodes={}))
    except QmgrError as exc:
        raise PlatformError(f"{path}: {where}.partition: {table.get('partition')!r}: "
                            f"{exc}") from None
    if not out.get("route_destinations"):
        raise PlatformError(f"{path}: {where}.route_destinations: none given: Cannot enable "
                            "queue, incomplete definition (a route queue needs destinations)")
    return out


def _entry_keys(path: str, name: str, table: dict[str, Any]) -> dict[str, Any]:
    """A queue's `ENTRY_KEYS`, each read, checked and stored as ``qmgr -c "set queue NAME
    KEY = VALUE"`` stores it (the engine's own `qmgr.apply`: an ACL in PBS's order, a
    limit as PBS's ``[u:name=N]`` text, a list of items joined); a ``_res`` limit is a
    table of resources (``max_queued_res = {ncpus = "[o:PBS_ALL=64]"}``)."""
    given = [key for key in ENTRY_KEYS if key in table]
    if not given:
        return {}
    from ..engine.qmgr import AttrOp, QmgrError, apply, definitions

    defs = definitions("queue")
    out: dict[str, Any] = {}
    for key in given:
        value = table[key]
        where = f"queues.{name}.{key}"
        keyed = key.endswith("_res")
        if keyed and (not isinstance(value, dict) or not value):
            raise PlatformError(f"{path}: {where}: {value!r}: expected a table of resources "
                                "such as {ncpus = \"[o:PBS_ALL=64]\"}")
        items = value.items() if keyed else [(None, value)]
        for res, one in items:
            text = ("true" if one else "false") if isinstance(one, bool) else \
                ",".join(map(str, one)) if isinstance(one, list) else str(one)
            try:
                out = apply(out, [AttrOp(key, None if res is None else str(res), "=", text)],
                            "set", defs, obj_type="queue")
            except QmgrError as exc:
                shown = f"{where}.{res}" if res is not None else where
                raise PlatformError(f"{path}: {shown}: {one!r}: {exc}") from None
    return out


def _check_routes(path: str, queues: dict[str, dict[str, Any]]) -> None:
    """Each route queue's destinations are queues of the replay (its [queues.NAME] tables
    and workq, where the jobs of other queues go), other than itself, and no job can be
    routed around a loop of route queues (the engine moves such a job one hop a second,
    for ever)."""
    routes = {name: [str(d) for d in q["route_destinations"]] for name, q in queues.items()
              if q.get("queue_type") == "Route"}
    for name, dests in routes.items():
        for dest in dests:
            if dest == name:
                raise PlatformError(f"{path}: queues.{name}.route_destinations: {dest!r}: the "
                                    "queue itself")
            if dest not in queues and dest != DEFAULT_QUEUE:
                raise PlatformError(f"{path}: queues.{name}.route_destinations: {dest!r}: no "
                                    f"such queue: expected a [queues.NAME] of the platform or "
                                    f"{DEFAULT_QUEUE}")
    loop = _loop(routes)
    if loop:
        raise PlatformError(f"{path}: queues.{loop[0]}.route_destinations: route queues "
                            f"{' -> '.join(loop)} make a loop, which a job would go round "
                            "for ever")


def _loop(routes: dict[str, list[str]]) -> list[str] | None:
    """A loop of route queues (``a -> b -> a``), the first a depth-first walk in the
    platform's order finds; None when there is none."""
    done: set[str] = set()
    trail: list[str] = []

    def walk(name: str) -> list[str] | None:
        trail.append(name)
        for dest in routes[name]:
            if dest in trail:
                return trail[trail.index(dest):] + [dest]
            if dest in routes and dest not in done:
                found = walk(dest)
                if found:
                    return found
        trail.pop()
        done.add(name)
        return None

    for name in routes:
        if name not in done:
            found = walk(name)
            if found:
                return found
    return None


def _table(path: str, key: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PlatformError(f"{path}: {key}: {value!r}: expected a table")
    return value


def _number(path: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
            math.isfinite(value) and 0 <= value <= MAX_FIGURE):
        raise PlatformError(f"{path}: {key}: {value!r}: expected a number from 0 to "
                            f"{MAX_FIGURE:.0e}")
    return float(value)


def _int(path: str, key: str, value: Any, least: int = 1, most: int = MAX_VNODES) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
        raise PlatformError(f"{path}: {key}: {value!r}: expected an integer from {least} to "
                            f"{most:,}")
    return value


#: A queue's resource tables a platform file may set (qmgr's names).
_QUEUE_RESOURCES = ("resources_default", "resources_max", "resources_min")


def _resources(path: str | Path, where: str, value: Any) -> dict[str, Any]:
    """A table of PBS resources (``{walltime = "24:00:00", mem = "64gb"}``), each a
    resource PBS defines and a value of its type, as qmgr checks it."""
    try:
        return resources(value, where, {})  # (a replay defines no custom resource)
    except BadValue as exc:
        raise PlatformError(f"{path}: {exc}") from None


def _text(path: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise PlatformError(f"{path}: {key}: {value!r}: expected a name")
    return value


def _partition(path: str, key: str, value: Any) -> str:
    if not isinstance(value, str) or not _PARTITION_NAME.fullmatch(value):
        raise PlatformError(f"{path}: {key}: {value!r}: expected a partition name (letters, "
                            "digits, _, . and -; one name, not a list)")
    if value == _DEFAULT_PARTITION:
        raise PlatformError(f"{path}: {key}: {value!r}: Default partition name is not "
                            "allowed (the default scheduler's own)")
    return value


def _power(path: str, name: str, table: Any) -> PowerModel:
    where = f"power.{name}"
    table = _table(path, where, table)
    extra = set(table) - set(_WATTS) - set(_SECONDS)
    if extra:
        raise PlatformError(f"{path}: {where}.{sorted(extra)[0]}: unknown key; expected one of "
                            f"{', '.join(_WATTS + _SECONDS)}")
    values = {}
    for key in _WATTS + _SECONDS:
        if key in table:
            values[key] = _number(path, f"{where}.{key}", table[key])
        elif key == "shutting_down" and "booting" in table:
            values[key] = values["booting"]
        else:
            values[key] = DEFAULT_POWER[key]
    return PowerModel(name, **values)


def _group(path: str, where: str, group: Any, models: dict[str, PowerModel],
           seen: set[str], first: int, vnodes_before: int) -> list[Host]:
    group = _table(path, where, group)
    extra = set(group) - _HOST_KEYS
    if extra:
        raise PlatformError(f"{path}: {where}.{sorted(extra)[0]}: unknown key; expected one "
                            f"of {', '.join(sorted(_HOST_KEYS))}")
    if "names" in group and ("count" in group or "prefix" in group):
        other = "count" if "count" in group else "prefix"
        raise PlatformError(f"{path}: {where}: names with {other}: give either names, or "
                            "count and prefix")
    if "names" in group:
        names = group["names"]
        if not isinstance(names, list) or not names or not all(
                isinstance(n, str) and n for n in names):
            raise PlatformError(f"{path}: {where}.names: {names!r}: expected a list of names")
    else:
        count = _int(path, f"{where}.count", group.get("count"))
        prefix = _text(path, f"{where}.prefix", group.get("prefix", "n"))
        width = len(str(count))
        names = [f"{prefix}{i:0{width}d}" for i in range(count)]
    per_host = _int(path, f"{where}.vnodes", group.get("vnodes", 1))
    if vnodes_before + len(names) * per_host > MAX_VNODES:
        raise PlatformError(f"{path}: {where}: {len(names):,} hosts of {per_host:,} vnodes "
                            f"make the machine over {MAX_VNODES:,} vnodes")
    ncpus = _int(path, f"{where}.ncpus", group.get("ncpus"), most=MAX_NCPUS)
    mem = None
    if "mem" in group:
        try:
            mem = parse_size(group["mem"])
        except (ValueError, TypeError):
            raise PlatformError(f"{path}: {where}.mem: {group['mem']!r}: expected a size "
                                "such as 32gb") from None
    partition = _partition(path, f"{where}.partition", group["partition"]) \
        if "partition" in group else None
    if "power" in group:
        model_name = _text(path, f"{where}.power", group["power"])
        if model_name not in models:
            raise PlatformError(f"{path}: {where}.power: {model_name!r}: no [power."
                                f"{model_name}] table")
        model = models[model_name]
    elif len(models) == 1:
        model = next(iter(models.values()))
    elif not models:
        model = default_power()
    else:
        raise PlatformError(f"{path}: {where}.power: missing: expected one of "
                            f"{', '.join(sorted(models))}")
    eligible = group.get("poweroff_eligible", True)
    if not isinstance(eligible, bool):
        raise PlatformError(f"{path}: {where}.poweroff_eligible: {eligible!r}: expected true "
                            "or false")
    hosts: list[Host] = []
    for name in names:
        try:
            check_name("host", name, f"{where}: host name")
        except BadValue as exc:
            raise PlatformError(f"{path}: {exc}") from None
        if name in seen:
            raise PlatformError(f"{path}: {where}: host {name!r} is named twice")
        seen.add(name)
        vnodes = [name] if per_host == 1 else [f"{name}[{i}]" for i in range(per_host)]
        for vnode in vnodes if per_host > 1 else ():
            if vnode in seen:
                raise PlatformError(f"{path}: {where}: vnode {vnode!r} of host {name!r} is "
                                    "named twice")
            seen.add(vnode)
        hosts.append(Host(name, first + len(hosts), vnodes, ncpus, mem, partition, model,
                          eligible))
    return hosts
