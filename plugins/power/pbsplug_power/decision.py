"""Which hosts to ramp down or power off, and which to wake: the periodic decision as a pure
function of the time, the vnodes, the reservations and what queued jobs need.

The rules are PBS_power's (pbs-behavior.md §3), host by host (a host is the vnodes sharing
``resources_available.host``):

- **Down** (ramp down, or power off) when every vnode of the host is free (nothing else in
  its state), holds no job, and, in on/off mode, is ``poweroff_eligible``; when every one
  has been idle for longer than ``node_idle_limit``; and when no reservation holds it now,
  and no reservation or queued job needs it within ``min_node_down_delay`` + 900 s.
- **Up** (ramp up, or power on) when the host sleeps, a queued job's estimated start or a
  reservation needs it within 900 s, and, in on/off mode, it is not still booting and
  ``min_node_down_delay`` has passed since its last state change.
- At most ``max_concurrent_nodes`` hosts each way per run, walking hosts by name.

Two departures from PBS_power, on purpose:

- A host that a queued job's estimate needs within the down window is kept up too.
  PBS_power looks only at reservations, so it may power off a host that the scheduler has
  planned a job on, and then may not power it on again for ``min_node_down_delay``.
- A host with a job on any of its vnodes is not idle, whatever their state says. A vnode
  with some of its cpus assigned is ``free`` (``job-busy`` needs all of them), and
  ``last_used_time`` moves when a job ends, not while it runs: by PBS_power's rule alone a
  job running longer than ``node_idle_limit`` after the host's last job ended has its host
  powered off under it. (On a Cray, where PBS_power runs, jobs take whole nodes.) A
  suspended job counts too: PBS releases its cpus, so its vnodes look free and unused, but
  its resume needs the host (the periodic event's ``suspended_jobs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from .config import PowerConfig

#: How far ahead a need wakes a host (PBS_power's 900 s).
WAKE_AHEAD = 900
#: Reservation states in which a reservation holds its vnodes now.
HOLDING = frozenset({"RUNNING", "DELETED", "BEING_ALTERED", "DELETING_JOBS"})
#: The state of a vnode that may go down.
FREE = frozenset({"free"})
#: Reservation states whose start wakes, and keeps up, their vnodes.
COMING = frozenset({"CONFIRMED", "DEGRADED"})


class NodeView(NamedTuple):
    """What the decision reads of one vnode (a tuple: 10,000 of them are made per run)."""

    name: str
    host: str
    states: frozenset[str]
    eligible: bool = False  # poweroff_eligible
    last_used_time: int = 0  # 0 when unset, as PBS_power reads it
    last_state_change_time: int = 0
    #: A running job on it (the first its ``jobs`` names), or "" when it names none.
    job: str = ""
    #: Its ``resources_assigned.ncpus`` (what tells a job is there where ``jobs`` is not
    #: given, or names none: Slurm).
    assigned: int = 0
    #: A suspended job on it (the first its ``suspended_jobs`` names), or "": its cpus are
    #: released, so neither ``jobs`` nor ``resources_assigned`` shows it.
    suspended: str = ""


@dataclass(frozen=True)
class ResvView:
    state: str
    start: int
    vnodes: frozenset[str]


@dataclass
class Decision:
    """Hosts to bring down and up this run, and for every host why (or why not)."""

    down: list[str] = field(default_factory=list)
    up: list[str] = field(default_factory=list)
    why: dict[str, str] = field(default_factory=dict)


def needed_by(jobs: Iterable[tuple[int, Iterable[str]]], resvs: Iterable[ResvView],
              limit: int) -> dict[str, int]:
    """The earliest time each vnode is needed: from the first `limit` queued jobs' estimated
    (start, vnodes), and from coming reservations' starts."""
    needed: dict[str, int] = {}
    get = needed.get
    for count, (start, vnodes) in enumerate(jobs):
        if count >= limit:
            break
        for name in vnodes:
            if get(name, start) >= start:  # (a job's hundreds of vnodes: no min() call)
                needed[name] = start
    for resv in resvs:
        if resv.state in COMING:
            for name in resv.vnodes:
                needed[name] = min(needed.get(name, resv.start), resv.start)
    return needed


def hosts_of(nodes: Iterable[NodeView]) -> dict[str, list[NodeView]]:
    hosts: dict[str, list[NodeView]] = {}
    for node in nodes:
        hosts.setdefault(node.host, []).append(node)
    return dict(sorted(hosts.items()))


def _down_problem(config: PowerConfig, now: int, vnodes: list[NodeView],
                  held: Mapping[str, str], needed: Mapping[str, int], window: int,
                  shown: dict[frozenset[str], str]) -> str | None:
    """Why the host may not go down now; None when it may. `window` is the run's
    now + min_node_down_delay + 900 s; `shown` keeps each state set's text for the run.
    Two plain loops, no lists or generators: a run looks at every host, and most hosts have
    one vnode. Each loop gathers for several checks; the checks still answer in their order."""
    on_off = config.on_off
    busy = None  # the first vnode not free
    running = None  # the first vnode holding a job
    for v in vnodes:
        if on_off and not v.eligible:
            names = ", ".join(w.name for w in vnodes if not w.eligible)
            return f"poweroff_eligible is False on {names}"
        if busy is None and v.states != FREE:
            busy = v
        if running is None and (v.job or v.assigned > 0 or v.suspended):
            running = v
    if busy is not None:
        states = busy.states
        text = shown.get(states)
        if text is None:
            text = shown[states] = ",".join(sorted(states))
        return f"{busy.name} is {text}, not free"
    if running is not None:  # (free, but a job holds some of it: pbsplug's rule)
        if running.job:
            return f"{running.name} has a job ({running.job}), not idle"
        if running.suspended:  # (its resume needs the host up)
            return f"{running.name} has a suspended job ({running.suspended}), not idle"
        return f"{running.name} has {running.assigned} cpus assigned to jobs, not idle"
    holding = None  # the first held vnode's reservation state
    soonest = window
    last_used = vnodes[0].last_used_time
    for v in vnodes:
        name = v.name
        if held and holding is None:
            holding = held.get(name)
        when = needed.get(name, window)
        if when < soonest:
            soonest = when
        if v.last_used_time > last_used:
            last_used = v.last_used_time
    if holding:
        return f"a reservation holds it ({holding})"
    if soonest < window:
        return f"needed at {soonest}, within min_node_down_delay + {WAKE_AHEAD} s"
    if last_used > now:  # (a host's clock ahead of the run's)
        return f"last used {last_used - now} s after the run's time, not idle"
    if now - last_used <= config.node_idle_limit:
        return (f"idle {now - last_used} s, not more than node_idle_limit "
                f"{config.node_idle_limit} s")
    return None


def _up_problem(config: PowerConfig, now: int, vnodes: list[NodeView],
                needed: Mapping[str, int], booting: frozenset[str]) -> str | None:
    """Why the sleeping host may not be woken now; None when it may."""
    host = vnodes[0].host
    if config.on_off and host in booting:
        return "still booting"
    times = [needed[v.name] for v in vnodes if v.name in needed]
    if not times or min(times) >= now + WAKE_AHEAD:
        return ("asleep; nothing needs it within 900 s" if not times
                else f"asleep; needed at {min(times)}, not within {WAKE_AHEAD} s")
    if config.on_off:
        since = now - max(v.last_state_change_time for v in vnodes)
        if since < config.min_node_down_delay:
            return (f"needed at {min(times)}, but its state changed {since} s ago, less than "
                    f"min_node_down_delay {config.min_node_down_delay} s")
    return None


def decide(config: PowerConfig, now: int, nodes: Iterable[NodeView],
           resvs: Iterable[ResvView] = (), needed: Mapping[str, int] | None = None,
           booting: Iterable[str] = ()) -> Decision:
    """This run's decision. `needed` is `needed_by`'s answer; `booting` the hosts powered on
    and not yet reported ready (on/off mode)."""
    return decide_hosts(config, now, hosts_of(nodes), resvs, needed, booting)


def decide_hosts(config: PowerConfig, now: int, hosts: Mapping[str, list[NodeView]],
                 resvs: Iterable[ResvView] = (), needed: Mapping[str, int] | None = None,
                 booting: Iterable[str] = ()) -> Decision:
    """`decide` for vnodes already grouped by host (`hosts_of`), walked in that order."""
    decision = Decision()
    if config.mode is None:
        return decision
    held = {name: resv.state for resv in resvs if resv.state in HOLDING
            for name in resv.vnodes}  # vnodes a reservation holds now
    needed = needed or {}
    booting = frozenset(booting)
    limit = config.max_concurrent_nodes
    why = decision.why
    window = now + config.min_node_down_delay + WAKE_AHEAD
    shown: dict[frozenset[str], str] = {}  # states -> their text (`_down_problem`)
    for host, vnodes in hosts.items():
        asleep = False
        for v in vnodes:  # (no generator: most hosts have one vnode)
            if "sleep" in v.states:
                asleep = True
                break
        if asleep:
            problem = _up_problem(config, now, vnodes, needed, booting)
            if problem is None and len(decision.up) < limit:
                decision.up.append(host)
                why[host] = "asleep and needed within 900 s: waking"
            else:
                why[host] = problem or (
                    f"needed soon; waits: max_concurrent_nodes ({limit}) woken this run")
            continue
        problem = _down_problem(config, now, vnodes, held, needed, window, shown)
        if problem is None and len(decision.down) < limit:
            decision.down.append(host)
            why[host] = "idle and eligible: going down"
        else:
            why[host] = problem or (
                f"idle and eligible; waits: max_concurrent_nodes ({limit}) taken this run")
    return decision
