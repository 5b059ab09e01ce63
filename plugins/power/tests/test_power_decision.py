"""The periodic decision, rule by rule, as tables."""

from __future__ import annotations

from itertools import combinations

import pytest

from pbsplug_power.config import power_config
from pbsplug_power.decision import NodeView, ResvView, _down_problem, decide, needed_by

NOW = 1_800_000_000
ON_OFF = power_config({"power_on_off_enable": "True", "node_idle_limit": "1800",
                       "min_node_down_delay": "1800", "max_concurrent_nodes": "5"})
RAMP = power_config({"power_ramp_rate_enable": "True", "node_idle_limit": "1800",
                     "min_node_down_delay": "1800", "max_concurrent_nodes": "5"})
WINDOW = 1800 + 900  # min_node_down_delay + 900


def node(name="n1", host=None, state="free", eligible=True, used=NOW - 3600,
         changed=NOW - 7200, job="", assigned=0, suspended=""):
    return NodeView(name, host or name, frozenset(state.split(",")), eligible, used, changed,
                    job, assigned, suspended)


@pytest.mark.parametrize(("config", "nodes", "resvs", "needed", "down"), [
    # idle time: exactly at the limit is not longer than it
    (ON_OFF, [node(used=NOW - 1800)], [], {}, []),
    (ON_OFF, [node(used=NOW - 1801)], [], {}, ["n1"]),
    (ON_OFF, [node(used=0)], [], {}, ["n1"]),  # never used: idle since the epoch
    # state must be exactly free
    (ON_OFF, [node(state="job-busy")], [], {}, []),
    (ON_OFF, [node(state="offline")], [], {}, []),
    (ON_OFF, [node(state="free,offline")], [], {}, []),
    # a job on a free vnode (some of its cpus), however long ago the host was last used
    (ON_OFF, [node(used=NOW - 86400, job="7.s")], [], {}, []),
    (ON_OFF, [node(used=NOW - 86400, assigned=1)], [], {}, []),
    (ON_OFF, [node("a", "h"), node("b", "h", job="7.s")], [], {}, []),
    (RAMP, [node(used=NOW - 86400, assigned=1)], [], {}, []),
    # a suspended job: its cpus released (no job in `jobs`, none assigned), its host kept up
    (ON_OFF, [node(used=NOW - 86400, suspended="7.s")], [], {}, []),
    (ON_OFF, [node("a", "h"), node("b", "h", suspended="7.s")], [], {}, []),
    (RAMP, [node(used=NOW - 86400, suspended="7.s")], [], {}, []),
    # eligibility: one ineligible vnode keeps the whole host up in on/off mode
    (ON_OFF, [node("a", "h"), node("b", "h", eligible=False)], [], {}, []),
    (RAMP, [node("a", "h"), node("b", "h", eligible=False)], [], {}, ["h"]),
    # one vnode of the host not idle long enough keeps it up
    (ON_OFF, [node("a", "h"), node("b", "h", used=NOW - 60)], [], {}, []),
    # reservations: just inside and just outside the window
    (ON_OFF, [node()], [ResvView("CONFIRMED", NOW + WINDOW - 1, frozenset({"n1"}))], None, []),
    (ON_OFF, [node()], [ResvView("CONFIRMED", NOW + WINDOW, frozenset({"n1"}))], None,
     ["n1"]),
    (ON_OFF, [node()], [ResvView("RUNNING", NOW - 10, frozenset({"n1"}))], None, []),
    (ON_OFF, [node()], [ResvView("CONFIRMED", NOW + 60, frozenset({"n2"}))], None, ["n1"]),
    # a queued job's estimate within the window keeps it up (pbsplug's addition)
    (ON_OFF, [node()], [], {"n1": NOW + WINDOW - 1}, []),
    (ON_OFF, [node()], [], {"n1": NOW + WINDOW}, ["n1"]),
])
def test_going_down(config, nodes, resvs, needed, down):
    if needed is None:
        needed = needed_by([], resvs, 100)
    decision = decide(config, NOW, nodes, resvs, needed)
    assert decision.down == down and decision.up == []


@pytest.mark.parametrize(("config", "nodes", "needed", "booting", "up"), [
    (ON_OFF, [node(state="sleep")], {"n1": NOW + 899}, (), ["n1"]),
    (ON_OFF, [node(state="sleep")], {"n1": NOW + 900}, (), []),  # not within 900 s
    (ON_OFF, [node(state="sleep")], {}, (), []),                  # nothing needs it
    (ON_OFF, [node(state="sleep")], {"n1": NOW - 5}, (), ["n1"]),  # overdue
    # a recent state change blocks a power-on, in on/off mode only
    (ON_OFF, [node(state="sleep", changed=NOW - 1799)], {"n1": NOW + 60}, (), []),
    (ON_OFF, [node(state="sleep", changed=NOW - 1800)], {"n1": NOW + 60}, (), ["n1"]),
    (RAMP, [node(state="sleep", changed=NOW - 10)], {"n1": NOW + 60}, (), ["n1"]),
    # a host still booting is not powered on again
    (ON_OFF, [node(state="sleep")], {"n1": NOW + 60}, ("n1",), []),
    (RAMP, [node(state="sleep")], {"n1": NOW + 60}, ("n1",), ["n1"]),
    # any vnode of the host needed wakes the host
    (ON_OFF, [node("a", "h", state="sleep"), node("b", "h", state="sleep")],
     {"b": NOW + 10}, (), ["h"]),
])
def test_waking(config, nodes, needed, booting, up):
    decision = decide(config, NOW, nodes, [], needed, booting)
    assert decision.up == up and decision.down == []


def test_neither_mode_does_nothing_and_both_is_on_off():
    off = power_config({})
    assert decide(off, NOW, [node()]).down == []
    both = power_config({"power_ramp_rate_enable": True, "power_on_off_enable": True})
    assert both.mode == "on_off" and both.both_modes
    # on/off rules apply: the ineligible vnode stays up
    assert decide(both, NOW, [node(eligible=False)]).down == []


def test_max_concurrent_nodes_cuts_each_list():
    config = power_config({"power_on_off_enable": "True", "max_concurrent_nodes": "2"})
    idle = [node(f"d{i}") for i in range(4)]
    asleep = [node(f"s{i}", state="sleep") for i in range(3)]
    needed = {f"s{i}": NOW + 10 for i in range(3)}
    decision = decide(config, NOW, idle + asleep, [], needed)
    assert decision.down == ["d0", "d1"] and decision.up == ["s0", "s1"]
    assert "max_concurrent_nodes (2)" in decision.why["d2"]
    assert "max_concurrent_nodes (2)" in decision.why["s2"]


def test_every_host_gets_a_reason():
    nodes = [node("a", used=NOW - 60), node("b", eligible=False), node("c", state="sleep"),
             node("d")]
    decision = decide(ON_OFF, NOW, nodes, [], {})
    assert decision.why == {
        "a": "idle 60 s, not more than node_idle_limit 1800 s",
        "b": "poweroff_eligible is False on b",
        "c": "asleep; nothing needs it within 900 s",
        "d": "idle and eligible: going down",
    }


def test_needed_by_takes_the_earliest_need_among_the_first_jobs():
    jobs = [(NOW + 500, ["a", "b"]), (NOW + 100, ["b"]), (NOW + 50, ["c"])]
    resvs = [ResvView("CONFIRMED", NOW + 20, frozenset({"a"})),
             ResvView("UNCONFIRMED", NOW + 1, frozenset({"d"}))]
    assert needed_by(jobs, resvs, 2) == {"a": NOW + 20, "b": NOW + 100}
    assert needed_by(jobs, [], 3)["c"] == NOW + 50


def soon(at):
    return f"needed at {at}, within min_node_down_delay + 900 s"


IDLE = "idle {} s, not more than node_idle_limit 1800 s".format
HOST = [node("a", "h"), node("b", "h"), node("c", "h")]


def host(**changes):
    """HOST with some vnodes changed: host(b={"eligible": False})."""
    return [v._replace(**changes.get(v.name, {})) for v in HOST]


# A host of one vnode and a host of three, rule by rule in the order the rules are checked:
# each row breaks its rule and later ones too, so the reason shows which rule comes first.
RECENT = {"last_used_time": NOW - 60}
NEAR = NOW + WINDOW - 1


@pytest.mark.parametrize(("config", "vnodes", "held", "needed", "why"), [
    # poweroff_eligible (on/off mode only): every ineligible vnode named, in host order
    (ON_OFF, [node(eligible=False, state="job-busy", used=NOW - 60)], {"n1": "RUNNING"},
     {"n1": NEAR}, "poweroff_eligible is False on n1"),
    (ON_OFF, host(a={"states": frozenset({"job-busy"})}, b={"eligible": False},
                  c={"eligible": False}), {"a": "RUNNING"}, {},
     "poweroff_eligible is False on b, c"),
    (RAMP, [node(eligible=False, state="job-busy")], {}, {}, "n1 is job-busy, not free"),
    # not free: the first such vnode, its states sorted
    (ON_OFF, [node(state="offline,job-busy,free", used=NOW - 60)], {"n1": "RUNNING"},
     {"n1": NEAR}, "n1 is free,job-busy,offline, not free"),
    (ON_OFF, host(b={"states": frozenset({"job-busy"})},
                  c={"states": frozenset({"offline", "down"})}), {"a": "RUNNING"}, {},
     "b is job-busy, not free"),
    (ON_OFF, host(a={"job": "7.s"}, c={"states": frozenset({"offline"})}), {}, {},
     "c is offline, not free"),
    # free but holding a job (some of its cpus: pbsplug's rule, not PBS_power's): the first
    # such vnode, by the job its `jobs` names, else by its cpus assigned
    (ON_OFF, [node(job="7.s", assigned=1)], {"n1": "RUNNING"}, {"n1": NEAR},
     "n1 has a job (7.s), not idle"),
    (ON_OFF, host(b={"assigned": 1}, c={"job": "9.s"}), {"a": "RUNNING"}, {},
     "b has 1 cpus assigned to jobs, not idle"),
    (ON_OFF, host(c={"job": "9.s"}), {}, {}, "c has a job (9.s), not idle"),
    (RAMP, [node(job="7.s", eligible=False)], {}, {}, "n1 has a job (7.s), not idle"),
    # a suspended job (its cpus released): named after a running one's
    (ON_OFF, [node(suspended="7.s")], {"n1": "RUNNING"}, {"n1": NEAR},
     "n1 has a suspended job (7.s), not idle"),
    (ON_OFF, host(b={"suspended": "8.s"}, c={"job": "9.s"}), {}, {},
     "b has a suspended job (8.s), not idle"),
    (ON_OFF, [node(job="7.s", suspended="8.s")], {}, {}, "n1 has a job (7.s), not idle"),
    # a reservation holds it now: the first held vnode's reservation state
    (ON_OFF, [node(used=NOW - 60)], {"n1": "RUNNING"}, {"n1": NEAR},
     "a reservation holds it (RUNNING)"),
    (ON_OFF, host(a=RECENT), {"b": "DELETING_JOBS", "c": "RUNNING"}, {"a": NEAR},
     "a reservation holds it (DELETING_JOBS)"),
    # needed within min_node_down_delay + 900 s: the earliest need within it
    (ON_OFF, [node(used=NOW - 60)], {"x": "RUNNING"}, {"n1": NEAR}, soon(NEAR)),
    (ON_OFF, host(a=RECENT), {}, {"a": NOW + WINDOW, "b": NOW + 500, "c": NOW + 100},
     soon(NOW + 100)),
    # idle no longer than node_idle_limit: the most recently used vnode counts
    (ON_OFF, [node(used=NOW - 1800)], {}, {"n1": NOW + WINDOW}, IDLE(1800)),
    (ON_OFF, host(a={"last_used_time": NOW - 7200}, b=RECENT), {}, {}, IDLE(60)),
    # used after the run's time (a host's clock ahead): not idle, said so ("idle -2 s" before)
    (ON_OFF, [node(used=NOW + 2)], {}, {"n1": NOW + WINDOW},
     "last used 2 s after the run's time, not idle"),
    # none: it may go down (no cpus assigned: none held; a job of no cpus is named in jobs)
    (ON_OFF, [node(used=NOW - 1801)], {}, {"n1": NOW + WINDOW}, None),
    (ON_OFF, [node(assigned=0)], {}, {}, None),
    (ON_OFF, host(), {"x": "RUNNING"}, {"x": NOW}, None),
])
def test_why_a_host_may_not_go_down_for_one_vnode_and_many(config, vnodes, held, needed,
                                                            why):
    """One `_down_problem` for hosts of one vnode (most hosts) and of many, in the words the
    admin reads; and `decide` gives the same reason for the host."""
    window = NOW + config.min_node_down_delay + 900
    assert _down_problem(config, NOW, vnodes, held, needed, window, {}) == why
    resvs = [ResvView(state, NOW - 10, frozenset({name})) for name, state in held.items()]
    got = decide(config, NOW, vnodes, resvs, needed).why[vnodes[0].host]
    assert got == (why or "idle and eligible: going down")


def test_each_host_names_its_own_vnode_when_states_repeat():
    """The state text is kept for the run (one join per state set), the vnode's name is not."""
    nodes = [node("a", state="job-busy"), node("b", state="job-busy"),
             node("c", "h", state="down,offline"), node("d", "h"), node("e", state="offline,down")]
    assert decide(ON_OFF, NOW, nodes).why == {
        "a": "a is job-busy, not free", "b": "b is job-busy, not free",
        "h": "c is down,offline, not free", "e": "e is down,offline, not free"}


def test_a_state_text_is_sorted_whatever_order_the_set_keeps():
    """A frozenset's order changes from process to process (string hashes): take a set this
    process keeps out of order, so a text not sorted shows every time."""
    names = ("down", "free", "job-busy", "offline", "resv-exclusive", "stale")
    states = next(s for s in map(frozenset, combinations(names, 3)) if list(s) != sorted(s))
    text, listed = ",".join(sorted(states)), ",".join(states)
    for vnodes in ([node(state=listed)], [node("a", "h"), node("b", "h", listed)]):
        why = _down_problem(ON_OFF, NOW, vnodes, {}, {}, NOW + WINDOW, {})
        assert why == f"{vnodes[-1].name} is {text}, not free"


def test_a_host_with_any_vnode_asleep_is_judged_for_waking():
    nodes = [node("a", "h"), node("b", "h", state="sleep"), node("c", state="sleep")]
    decision = decide(ON_OFF, NOW, nodes, [], {"a": NOW + 10})
    assert decision.up == ["h"] and decision.down == []
    assert decision.why["c"] == "asleep; nothing needs it within 900 s"
