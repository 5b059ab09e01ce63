"""One run of the server periodic hook: read what the event carries, decide, act, record.

In order (PBS_power's algorithm, pbs-behavior.md §3):

1. The seed's keys by PBS's rules; a bad one rejects the run with its message. Neither mode
   on: nothing to do. Both on: on/off wins, with PBS's warning.
2. Hosts the driver cannot act on (capmc: no Cray nid) are left alone, with the reason.
3. What is needed when: the queued jobs' estimates (``event.job_list``, earliest first, at
   most ``max_jobs_analyze_limit``) and the confirmed reservations' starts.
4. `decision.decide`: hosts to take down and to wake.
5. Down: the driver ramps them down or powers them off; their vnodes go to state ``sleep``.
   Up: ramp mode ramps them up, and their vnodes are free again with ``last_used_time`` now;
   on/off mode powers them on and records them as booting.
6. On/off mode asks the driver about the hosts that were booting before this run: a ready
   one leaves ``sleep`` with ``last_used_time`` now; one booting longer than
   ``boot_timeout`` is given up (logged; it stays asleep and may be woken again).
7. The record is saved. A driver failure leaves the hosts it concerned as they were, is
   logged, and rejects the run with the driver's message after everything else is done.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Iterable, Mapping
from typing import Any

from pbsplug import clock, exec_vnode_names

from . import state
from .config import BOTH_MODES_WARNING, PowerConfig, PowerConfigError, power_config
from .decision import Decision, NodeView, ResvView, decide_hosts, hosts_of, needed_by
from .driver import READY, DriverError, make_driver

SLEEP = "sleep"


def _int(value: Any, default: int = 0) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return default


#: How PBS writes a true poweroff_eligible (a boolean, or its text in an event built from
#: qmgr's or pbsnodes' output).
TRUE = frozenset({True, "True", "true", "TRUE", "1", "t", "y"})


def _first_job(jobs: Any) -> str:
    """The first job a vnode's ``jobs`` names: a list on pbsplug's engine (``["3.s/0",
    "4.s/1"]``), one string from PBS (``"3.s/0, 4.s/1"``); each entry is a job id and the
    number of one of the vnode's cpus. "" when it names none."""
    entries = jobs.split(",") if isinstance(jobs, str) else jobs
    for entry in entries if isinstance(entries, (list, tuple)) else ():
        job = str(entry).strip().partition("/")[0].strip()
        if job:
            return job
    return ""


#: Each vnode object the last run was given, with its view: an engine carries an object
#: again only while nothing changed it (docs/plugin-authors.md, "An object carried again
#: is unchanged"), so the view made of it then still holds. A replay's periodic event
#: carries every vnode thousands of times, most of them unchanged since the run before.
_views_of: dict[int, tuple[Any, NodeView]] = {}


def node_views(vnodes: Iterable[Any]) -> list[NodeView]:
    """The decision's view of each vnode. Written for 10,000 vnodes a run: plain reads
    (`Vnode.get`), each distinct state text parsed once, and an object seen by the last
    run not read again (`_views_of`)."""
    global _views_of
    out = []
    last, seen = _views_of, {}
    parsed: dict[str, frozenset[str]] = {}
    for vn in vnodes:
        known = last.get(id(vn))
        if known is not None and known[0] is vn:
            view = known[1]
        else:
            get = vn.get
            text = get("state") or ""
            states = parsed.get(text)
            if states is None:
                states = parsed[text] = frozenset(s for s in str(text).split(",") if s)
            avail = get("resources_available")  # `host_of`, inlined: 10,000 calls a run
            used, changed = get("last_used_time"), get("last_state_change_time")
            jobs, assigned = get("jobs"), get("resources_assigned")
            ncpus = assigned.get("ncpus") if assigned else None
            suspended = get("suspended_jobs")
            view = NodeView(
                vn.name, str((avail.get("host") if avail else None) or vn.name), states,
                get("poweroff_eligible") in TRUE,
                used if type(used) is int else _int(used),
                changed if type(changed) is int else _int(changed),
                _first_job(jobs) if jobs else "",
                ncpus if type(ncpus) is int else _int(ncpus),
                _first_job(suspended) if suspended else "")
        seen[id(vn)] = (vn, view)  # (the object held: its id is not another's meanwhile)
        out.append(view)
    _views_of = seen
    return out


#: The last run's views and their grouping by host (`hosts_of`), which callers only read.
_grouped: tuple[list[NodeView], dict[str, list[NodeView]]] = ([], {})


def views_by_host(views: list[NodeView]) -> dict[str, list[NodeView]]:
    """`hosts_of(views)`; the last run's again when its views are the very same (no vnode
    changed since, `node_views`)."""
    global _grouped
    last, grouped = _grouped
    if len(last) == len(views) and all(map(operator.is_, last, views)):
        return grouped
    grouped = hosts_of(views)
    _grouped = (views, grouped)
    return grouped


@functools.lru_cache(maxsize=256)
def _vnode_names(exec_vnode: str) -> tuple[str, ...]:
    """The vnodes of an exec_vnode. Cached: a queued job's estimate is read again at every
    run until it changes."""
    return exec_vnode_names(exec_vnode)


def estimates(jobs: Mapping[str, Any]) -> list[tuple[int, tuple[str, ...]]]:
    """Queued jobs' (estimated start, vnodes), earliest first; jobs without both skipped."""
    out = []
    for job in jobs.values():  # (`get`: thousands of queued jobs a run, most without one)
        est = job.get("estimated")
        if not est or str(job.get("job_state") or "Q") != "Q":
            continue
        start = _int(est.get("start_time"), -1)
        names = _vnode_names(str(est.get("exec_vnode") or ""))
        if start >= 0 and names:
            out.append((start, names))
    out.sort(key=lambda pair: pair[0])
    return out


def resv_views(resvs: Mapping[str, Any]) -> list[ResvView]:
    out = []
    for resv in resvs.values():
        names = frozenset(exec_vnode_names(str(resv.resv_nodes or "")))
        out.append(ResvView(str(resv.reserve_state or "").removeprefix("RESV_"),
                            _int(resv.reserve_start), names))
    return out


def _set_sleep(vnodes: Iterable[Any], asleep: bool, now: int) -> None:
    for vn in vnodes:
        states = set(vn.states) - {"free"}
        if asleep:
            states.add(SLEEP)
        else:
            states.discard(SLEEP)
            vn.last_used_time = now
        vn.state = ",".join(sorted(states)) or "free"


def run(event: Any, now: int | None = None) -> None:
    """The periodic hook's body (see the module's documentation)."""
    config = event.hook_config
    try:
        power = power_config(config)
    except PowerConfigError as exc:
        event.reject(str(exc))
    if power.both_modes:
        event.logger.warning(BOTH_MODES_WARNING)
    now = int(clock.now()) if now is None else now
    directory = state.state_dir(config)
    try:
        was_booting = state.booting(directory)
    except OSError as exc:
        event.reject(f"power: {state.folder_error(exc, directory)}")
    vnodes = event.vnode_list
    views = node_views(vnodes.values())
    if power.mode is None:  # PBS does nothing; the record says why, for `power status`
        off = Decision(why={v.host: "power management is off: power_on_off_enable and "
                            "power_ramp_rate_enable are both False" for v in views})
        _save(event, directory, power, config, views_by_host(views), off, was_booting,
              set(), set(), now)
        event.accept()
    driver = make_driver(config, vnodes.values(), event.logjobmsg)
    if power.mode == "ramp" and not driver.can_ramp:
        event.reject(f"power: the {driver.name} driver cannot ramp hosts; set "
                     "power_on_off_enable instead of power_ramp_rate_enable")
    by_host = views_by_host(views)
    unreachable = {h: p for h in by_host if (p := driver.problem(h))}
    booting = {h: t for h, t in was_booting.items() if h in by_host} if power.on_off else {}
    resvs = resv_views(event.resv_list or {})
    needed = needed_by(estimates(event.job_list or {}), resvs, power.max_jobs_analyze_limit)
    decision = decide_hosts(power, now, {h: vs for h, vs in by_host.items()
                                         if h not in unreachable} if unreachable else by_host,
                            resvs, needed, booting)
    for host, problem in unreachable.items():
        decision.why[host] = problem
    slept: set[str] = set()
    woke: set[str] = set()
    errors = _act(event, power, driver, decision, by_host, booting, slept, woke, now)
    _save(event, directory, power, config, by_host, decision, booting, slept, woke, now)
    if errors:
        event.reject("; ".join(errors))


def _act(event: Any, power: PowerConfig, driver: Any, decision: Decision,
         by_host: Mapping[str, list[NodeView]], booting: dict[str, int], slept: set[str],
         woke: set[str], now: int) -> list[str]:
    """The driver's actions; `slept` and `woke` get the hosts whose vnodes changed."""
    vnodes = event.vnode_list
    errors: list[str] = []

    def members(hosts: Iterable[str]) -> list[Any]:
        return [vnodes[v.name] for h in hosts for v in by_host[h]]

    def attempt(action, hosts: list[str]) -> bool:
        try:
            action(hosts)
        except DriverError as exc:
            event.logger.error("power: %s", exc)
            errors.append(str(exc))
            for host in hosts:
                decision.why[host] = f"the driver failed: {exc}"
            return False
        return True

    if power.mode == "ramp":
        event.logger.info("power_ramp_limit: nodes to ramp up: %s", decision.up)
        event.logger.info("power_ramp_limit: nodes to ramp down: %s", decision.down)
    down = driver.ramp_down if power.mode == "ramp" else driver.power_off
    if decision.down and attempt(down, decision.down):
        _set_sleep(members(decision.down), True, now)
        slept.update(decision.down)
    waiting = sorted(booting)  # PBS asks only about hosts booting before this run
    if decision.up and power.mode == "ramp":
        if attempt(driver.ramp_up, decision.up):
            _set_sleep(members(decision.up), False, now)
            woke.update(decision.up)
    elif decision.up and attempt(driver.power_on, decision.up):
        booting.update(dict.fromkeys(decision.up, now))
    if waiting:
        try:
            answers = driver.status(waiting)
        except DriverError as exc:
            event.logger.error("power: %s", exc)
            errors.append(str(exc))
            answers = {}
        for host in waiting:
            if answers.get(host) == READY:
                del booting[host]
                _set_sleep(members([host]), False, now)
                woke.add(host)
                decision.why[host] = "powered on and ready: awake again"
            elif now - booting[host] > _int(event.hook_config["boot_timeout"]):
                del booting[host]
                message = (f"{host} did not come up within boot_timeout "
                           f"({event.hook_config['boot_timeout']} s); it stays asleep")
                event.logger.error("power: %s", message)
                decision.why[host] = message
    return errors


#: The last run's status record but its time (`state.status_head`), with what it was made
#: of: (hosts, mode, driver, booting hosts, reasons). See `_save`.
_last_status: tuple[tuple[Any, ...], str] | None = None


def _save(event: Any, directory, power: PowerConfig, config: Mapping[str, Any],
          by_host: Mapping[str, list[NodeView]], decision: Decision,
          booting: Mapping[str, int], slept: set[str], woke: set[str], now: int) -> None:
    """The booting hosts, and every host as `pbsplug power status` shows it (`by_host`:
    `hosts_of`'s, sorted by host as the record is). The record holds when each host was last
    used, not its idle time: a run whose hosts (the very same views: `views_by_host`), mode,
    driver, booting hosts and reasons are the last run's, and that changed no vnode, writes
    the last run's record with its own time, without going over the hosts (1,298 of the
    3,009 runs of KTH-SP2's first 1,000 jobs; the others changed a vnode, or a reason that
    names a time)."""
    global _last_status
    ramp = power.mode == "ramp"
    why = decision.why
    driver = str(config["driver"])
    made_of = (by_host, power.mode, driver, booting.keys(), why)
    last = _last_status
    if (last is not None and not slept and not woke and last[0][0] is by_host
            and last[0][1:] == made_of[1:]):
        head = last[1]
    else:
        rows = []
        for host, group in by_host.items():
            if len(group) == 1:  # (most hosts: one vnode each)
                view = group[0]
                eligible, asleep = view.eligible or ramp, SLEEP in view.states
                used = max(view.last_used_time, 0)
            else:
                eligible = ramp or all(v.eligible for v in group)
                asleep = any(SLEEP in v.states for v in group)
                used = max(0, *(v.last_used_time for v in group))
            used = now if host in woke else used
            rows.append((host, eligible, used or None,
                         "booting" if host in booting else "asleep"
                         if (asleep or host in slept) and host not in woke else "awake",
                         why.get(host, "")))
        head = state.status_head(power.mode, driver, rows)
        # (copies: what the next run compares must not change with this run's objects; a
        # run that changed vnodes is not kept: the next one has other views of them)
        _last_status = None if slept or woke else (
            (by_host, power.mode, driver, set(booting), dict(why)), head)
    try:
        state.save(directory, booting, int(config["boot_delay"]),
                   state.status_text(now, head))
    except OSError as exc:
        event.logger.error("power: cannot save its record: %s", state.folder_error(exc, directory))
