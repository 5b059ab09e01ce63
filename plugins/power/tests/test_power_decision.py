"""The periodic decision, rule by rule, as tables."""

from __future__ import annotations

import pytest

from pbsplug_power.config import power_config
from pbsplug_power.decision import NodeView, ResvView, decide, needed_by

NOW = 1_800_000_000
ON_OFF = power_config({"power_on_off_enable": "True", "node_idle_limit": "1800",
                       "min_node_down_delay": "1800", "max_concurrent_nodes": "5"})
RAMP = power_config({"power_ramp_rate_enable": "True", "node_idle_limit": "1800",
                     "min_node_down_delay": "1800", "max_concurrent_nodes": "5"})
WINDOW = 1800 + 900  # min_node_down_delay + 900


def node(name="n1", host=None, state="free", eligible=True, used=NOW - 3600,
         changed=NOW - 7200):
    return NodeView(name, host or name, frozenset(state.split(",")), eligible, used, changed)


@pytest.mark.parametrize(("config", "nodes", "resvs", "needed", "down"), [
    # idle time: exactly at the limit is not longer than it
    (ON_OFF, [node(used=NOW - 1800)], [], {}, []),
    (ON_OFF, [node(used=NOW - 1801)], [], {}, ["n1"]),
    (ON_OFF, [node(used=0)], [], {}, ["n1"]),  # never used: idle since the epoch
    # state must be exactly free
    (ON_OFF, [node(state="job-busy")], [], {}, []),
    (ON_OFF, [node(state="offline")], [], {}, []),
    (ON_OFF, [node(state="free,offline")], [], {}, []),
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


@pytest.mark.parametrize("config", [ON_OFF, RAMP])
def test_a_host_of_one_vnode_gets_the_general_rules_words(config):
    """decide_hosts reads a host of one vnode on a path of its own (most hosts, every run):
    the same reason, word for word, as the rules for a host of many vnodes give."""
    from pbsplug_power.decision import _down_problem

    views = [node(state=state, eligible=eligible, used=used)
             for state in ("free", "job-busy", "free,offline", "down,offline")
             for eligible in (True, False) for used in (0, NOW - 1800, NOW - 1801, NOW + 5)]
    resvs = [ResvView("RUNNING", NOW - 10, frozenset({"held"}))]
    for needed in ({}, {"n1": NOW + WINDOW - 1}, {"n1": NOW + WINDOW}):
        for view in views:
            for name in ("n1", "held"):
                one = view._replace(name=name, host=name)
                got = decide(config, NOW, [one], resvs, needed).why[name]
                held = {"held": "RUNNING"}
                general = _down_problem(config, NOW, [one], held, needed)
                assert got == (general or "idle and eligible: going down"), (one, needed)
