"""The plugin's configuration: the keys of PBS's cgroups hook (cpuset part), the seed's
octants, and the scheduler's starvation and stuck-cpuset rules.

Every key is checked when the site config is loaded; an error names the key, the value and
what was expected. `Octants` (octants.py) and `HostRules` (host.py) read the checked values.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pbsplug import Setting, absolute_path, absolute_path_or_empty

from .nodemask import ID_LIMIT, NodeMap, parse_list

#: PBS's placement_type: which NUMA node a job's CPUs come from first.
PLACEMENT_TYPES = ("load_balanced", "load_packed", "job_balanced")
#: The longest of the periods in seconds: ten years. A JSON .CF file holds any integer, and
#: one of 400 digits raised OverflowError where the hooks turn it into a float (the
#: scheduler's at every cycle, the host's at every report).
MAX_SECONDS = 10 * 365 * 86400
#: The longest kill_timeout: a day (the hook's alarm, 90 s unless the site raises it, ends
#: a longer wait first).
MAX_KILL_TIMEOUT = 86400.0


def _list_text(value: str) -> str | None:
    try:
        parse_list(value)
    except ValueError as exc:
        return str(exc)
    return None


def _cpu_ids(value: list) -> str | None:
    bad = [str(n) for n in value if n < 0]  # (items=int: whole numbers already)
    return f"expected CPU ids (whole numbers >= 0); wrong: {', '.join(bad)}" if bad else None


def _octant_ranges(value: list) -> str | None:
    seen: dict[int, int] = {}
    for n, text in enumerate(value):
        try:
            ids = parse_list(text)
        except ValueError as exc:
            return f"octant {n}: {exc}"
        if not ids:
            return f"octant {n} is empty"
        for i in ids:
            if i in seen:
                return f"physical id {i} is in octant {seen[i]} and in octant {n}"
            seen[i] = n
    return None


def _physical_ids(value: str) -> str | None:
    if not value:
        return None
    try:
        NodeMap.parse(value)
    except ValueError as exc:
        return str(exc)
    return None


def _prefix(value: str) -> str | None:
    """A cpuset under the cgroup root, named by one or more plain levels (``pbs_jobs``,
    ``site/pbs_jobs``)."""
    levels = value.strip("/").split("/")
    if not value.strip("/") or any(level in ("", ".", "..") for level in levels):
        return "expected a cpuset under the cgroup root, such as pbs_jobs (no '..', not /)"
    return None


def _whole_numbers(what: str, limit: int | None = None):
    """A check for a table of vnode = `what` (a whole number >= 0, below `limit`)."""
    def check(value: dict) -> str | None:
        bad = [name for name, n in value.items()
               if isinstance(n, bool) or not isinstance(n, int) or n < 0
               or (limit is not None and n >= limit)]
        below = f", below {limit}" if limit is not None else ""
        return (f"expected vnode = {what} (a whole number >= 0{below}); wrong: "
                f"{', '.join(bad)}") if bad else None
    return check


def settings() -> dict[str, Setting]:
    """`PluginInfo.config`."""
    return {
        # -- the execution host: cgroups (PBS's pbs_cgroups names where it has them) --------
        "cgroup_root": Setting(str, "/sys/fs/cgroup", check=absolute_path,
                               doc="where the cgroup hierarchies are mounted"),
        "cgroup_version": Setting(str, "auto", choices=("auto", "1", "2"),
                                  doc="auto: cgroup v1's cpuset hierarchy when mounted, "
                                      "else v2 with the cpuset controller"),
        "emulate": Setting(bool, False, doc="cgroup_root is a plain directory and pbsplug "
                           "does what the kernel would (tests, trying the plugin out)"),
        "cgroup_prefix": Setting(str, "pbs_jobs", check=_prefix,
                                 doc="the cpuset under which each job's cpuset is made, "
                                     "named after the job"),
        "state_dir": Setting(str, "", check=absolute_path_or_empty,
                             state_folder=True, doc="where the hook keeps its record "
                             "(default <pbsplug home>/hooks/tmp; a replay's own)"),
        "sysfs_root": Setting(str, "/", check=absolute_path,
                              doc="where sys/devices/system is read from"),
        "exclude_cpus": Setting(list, [], items=int, check=_cpu_ids,
                                doc="CPUs never given to a job"),
        "use_hyperthreads": Setting(bool, False, doc="give every thread of a core; else "
                                    "only the first thread of each core"),
        "mem_fences": Setting(bool, True, doc="cpuset.mems is the job's NUMA nodes; false: "
                              "every memory node"),
        "mem_hardwall": Setting(bool, False, doc="cpuset.mem_hardwall (cgroup v1)"),
        "memory_spread_page": Setting(bool, False, doc="cpuset.memory_spread_page (cgroup v1)"),
        "allow_zero_cpus": Setting(bool, True, doc="a job without ncpus runs without a "
                                   "cpuset; false: it is refused"),
        "placement_type": Setting(str, "load_balanced", choices=PLACEMENT_TYPES,
                                  doc="NUMA node tried first: most free CPUs, fewest, or "
                                      "fewest jobs"),
        "vnode_numa": Setting(dict, {}, check=_whole_numbers("NUMA node id"),
                              doc="vnode = NUMA node whose CPUs it has (host[N] is node N "
                                  "without it; other vnodes use the whole host)"),
        "kill_timeout": Setting(float, 10.0, gt=0, le=MAX_KILL_TIMEOUT,
                                doc="seconds to kill and remove a job's "
                                    "cpuset, retrying every 0.2 s, before it is stuck"),
        "offline_stuck_after": Setting(int, 600, ge=0, le=MAX_SECONDS,
                                       doc="seconds a cpuset may stay stuck "
                                           "before its vnodes go offline"),
        "online_offlined_nodes": Setting(bool, True, doc="vnodes offlined for a stuck cpuset "
                                         "come back once it is gone"),
        "online_nodes_min_delay": Setting(int, 30, ge=0, le=MAX_SECONDS,
                                          doc="seconds offline at least "
                                              "before they come back"),
        # -- octants (seed 002, section 4) ------------------------------------------------
        "octants": Setting(list, [], items=str, check=_octant_ranges,
                           doc="one list of physical node ids per octant, such as 0-63; "
                               "empty: no octant rule"),
        "physical_ids": Setting(str, "", check=_physical_ids,
                                doc="physical id of logical node 0, 1, 2... in order "
                                    "(0-61,64-65,62-63); empty: the same numbers"),
        "node_numbers": Setting(dict, {}, check=_whole_numbers("logical node number",
                                                               ID_LIMIT),
                                doc="vnode = logical node number, for vnodes not named "
                                    "host[N] or ending in digits"),
        "octant_scope": Setting(str, "host", choices=("host", "complex"),
                                doc="host: each host's nodes form its own octants; complex: "
                                    "node numbers span hosts (switch groups)"),
        "straddle_after": Setting(int, 0, ge=0, le=MAX_SECONDS,
                                  doc="seconds queued after which a small "
                                      "job may straddle octants; 0: never"),
        # -- the scheduler (seed 002, section 5) ------------------------------------------
        "starve_after": Setting(int, 8 * 3600, ge=0, le=MAX_SECONDS,
                                doc="seconds queued after which a job "
                                    "is starving and drained for; 0: never"),
        "stuck_grace": Setting(int, 600, ge=0, le=MAX_SECONDS,
                               doc="seconds a stuck cpuset counts as soon "
                                   "free; older ones count as lost until reclaimed"),
    }


def check_config(config: Mapping[str, Any]):
    """Rules across keys."""
    if config["physical_ids"] and config["octants"]:
        known = set(NodeMap.parse(config["physical_ids"]).to_physical(
            range(len(NodeMap.parse(config["physical_ids"])))))
        for n, text in enumerate(config["octants"]):
            unknown = sorted(set(parse_list(text)) - known)
            if unknown:
                yield "octants", (f"octant {n} names physical ids that physical_ids does not "
                                  f"map: {unknown[:8]}")
