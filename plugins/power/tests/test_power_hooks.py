"""The hooks through the kernel's runner: the periodic run with the simulated driver (both
modes, booting hosts, failures, the record), exechost_startup, the scheduler's availability
answer, and the configuration's load-time rules."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import pbsplug_power
from pbsplug_power import state
from pbsplug_power.driver import DriverError
from pbsplug_power.simulated import PLATFORM_FILE, STATE_FILE, Simulated

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))
NOW = int(time.time())
OLD = NOW - 7200


@pytest.fixture
def power(register_plugin, tmp_path):
    """``power(**config)``: the plugin enabled with the simulated driver and this config."""

    def enable(**config):
        values = {"driver": "simulated", "state_dir": str(tmp_path), "boot_delay": 0,
                  "min_node_down_delay": "1", **config}
        return register_plugin(pbsplug_power, "power", config=values)

    return enable


def vnodes(*specs, host_of=lambda name: name.rstrip("0123456789") or name):
    """``("a1", "free", True, OLD)`` -> the vnode_list entry (host: the name's letters)."""
    return {name: {"state": st, "poweroff_eligible": ok, "last_used_time": used,
                   "last_state_change_time": OLD,
                   "resources_available": {"host": host_of(name), "ncpus": 1}}
            for name, st, ok, used in specs}


def record(tmp_path) -> dict:
    """The last run's status, with the booting hosts."""
    return {**json.loads((tmp_path / state.STATUS_FILE).read_text()),
            "booting": state.booting(tmp_path)}


def test_hook_periodic_powers_off_idle_eligible_hosts_and_records_why(power, fire_event,
                                                                     tmp_path, caplog):
    power(power_on_off_enable="True", node_idle_limit="600")
    caplog.set_level(logging.INFO)
    out = fire_event("periodic", {"vnode_list": vnodes(
        ("a1", "free", True, OLD), ("a2", "free", True, OLD),   # host a: both idle
        ("b1", "free", True, OLD), ("b2", "job-busy", True, OLD),  # host b: one busy
        ("c1", "free", False, OLD),                               # not eligible
        ("d1", "free", True, int(time.time()) - 60))})                         # used a minute ago
    assert out.accepted and out.changes == {
        "vnode_list": {"a1": {"state": "sleep"}, "a2": {"state": "sleep"}}}
    lines = [(r.pbs_object, r.getMessage()) for r in caplog.records
             if getattr(r, "pbs_object", None)]
    assert lines == [(("Job", "node_power_off"), "launch: simulated node_off a"),
                     (("Job", "node_power_off"), "launch: finished")]
    why = {h: e["why"] for h, e in record(tmp_path)["hosts"].items()}
    assert why["a"] == "idle and eligible: going down"
    assert why["b"] == "b2 is job-busy, not free"
    assert why["c"] == "poweroff_eligible is False on c1"
    assert re.fullmatch(r"idle 6\d s, not more than node_idle_limit 600 s", why["d"])


def test_hook_periodic_ramp_mode_logs_the_seeds_lines_and_ignores_eligibility(
        power, fire_event, tmp_path, caplog):
    power(power_ramp_rate_enable="True")
    caplog.set_level(logging.INFO)
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "free", False, OLD)),
                                  "job_list": []})
    assert out.changes == {"vnode_list": {"a1": {"state": "sleep"}}}
    messages = [r.getMessage() for r in caplog.records]
    assert "power_ramp_limit: nodes to ramp up: []" in messages
    assert "power_ramp_limit: nodes to ramp down: ['a']" in messages
    assert "launch: simulated set_sleep_state_limit 4 a" in messages
    # Woken by a queued job's estimate: ramped up at once, free and just used.
    job = {"id": "1.s", "job_state": "Q",
           "estimated": {"start_time": NOW + 100, "exec_vnode": "(a1:ncpus=1)"}}
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "sleep", False, OLD)),
                                  "job_list": [job]})
    changes = out.changes["vnode_list"]["a1"]
    assert changes["state"] == "free" and changes["last_used_time"] >= NOW
    assert "launch: simulated set_sleep_state_limit 0 a" in [r.getMessage()
                                                             for r in caplog.records]


def test_hook_periodic_both_modes_on_off_wins_with_pbs_warning(power, fire_event, caplog):
    power(power_ramp_rate_enable="True", power_on_off_enable="True")
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "free", False, OLD))})
    assert out.accepted and out.changes == {}  # on/off mode: a1 is not eligible
    assert ("Hook config: power_on_off_enable is over-riding power_ramp_rate_enable"
            in [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING])


def test_hook_periodic_power_on_waits_for_the_driver_to_say_ready(power, fire_event,
                                                                  tmp_path):
    """On/off mode: a needed host is powered on and recorded as booting; it leaves sleep at
    the first run after the driver reports it ready; a reservation needs it too."""
    power(power_on_off_enable="True", boot_delay=3)
    Simulated({"state_dir": str(tmp_path), "boot_delay": 3, "shutdown_delay": 0}
              ).power_off(["a", "b"])
    asleep = vnodes(("a1", "sleep", True, OLD), ("b1", "sleep", True, OLD))
    resv = {"R1.s": {"reserve_state": "RESV_CONFIRMED", "reserve_start": NOW + 600,
                     "resv_nodes": "(b1:ncpus=1)"}}
    job = {"id": "1.s", "job_state": "Q",
           "estimated": {"start_time": NOW + 60, "exec_vnode": "(a1:ncpus=1)"}}
    out = fire_event("periodic", {"vnode_list": asleep, "resv_list": resv, "job_list": [job]})
    assert out.accepted and out.changes == {}  # powered on, still asleep while booting
    booting = record(tmp_path)["booting"]
    assert sorted(booting) == ["a", "b"]
    out = fire_event("periodic", {"vnode_list": asleep, "resv_list": resv, "job_list": [job]})
    assert out.changes == {} and record(tmp_path)["hosts"]["a"]["power"] == "booting"
    time.sleep(3.1)  # the simulated boot_delay
    out = fire_event("periodic", {"vnode_list": asleep, "resv_list": resv, "job_list": [job]})
    assert {n: c["state"] for n, c in out.changes["vnode_list"].items()} == {
        "a1": "free", "b1": "free"}
    assert record(tmp_path)["booting"] == {}


def test_hook_periodic_gives_up_a_host_that_never_boots(power, fire_event, tmp_path, caplog):
    power(power_on_off_enable="True", boot_delay=1000, boot_timeout=5)
    state.save(tmp_path, {"a": NOW - 60}, 1000)
    simulated = Simulated({"state_dir": str(tmp_path), "boot_delay": 1000,
                           "shutdown_delay": 0})
    simulated.power_off(["a"])
    simulated.power_on(["a"])
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "sleep", True, OLD))})
    assert out.accepted and out.changes == {} and record(tmp_path)["booting"] == {}
    assert "power: a did not come up within boot_timeout (5 s); it stays asleep" in [
        r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]


def test_hook_periodic_max_concurrent_nodes_per_run(power, fire_event):
    power(power_on_off_enable="True", max_concurrent_nodes="2")
    out = fire_event("periodic", {"vnode_list": vnodes(
        *[(f"{h}1", "free", True, OLD) for h in "abcd"])})
    assert sorted(out.changes["vnode_list"]) == ["a1", "b1"]


@pytest.mark.parametrize(("config", "message"), [
    ({"power_on_off_enable": "True", "node_idle_limit": "1.5"},
     "node_idle_limit: '1.5' is not an integer"),
    ({"power_on_off_enable": "yes"}, "power_on_off_enable: 'yes' is not True or False"),
    ({"power_ramp_rate_enable": "True", "driver": "ipmitool"},
     "power: the ipmitool driver cannot ramp hosts; set power_on_off_enable instead of "
     "power_ramp_rate_enable"),
])
def test_hook_periodic_rejects_bad_pbs_values_and_a_driver_that_cannot_ramp(
        register_plugin, fire_event, tmp_path, config, message):
    register_plugin(pbsplug_power, "power", config={"state_dir": str(tmp_path), **config})
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "free", True, OLD))})
    assert (out.kind, out.detail, out.changes) == ("reject", message, {})


def test_hook_periodic_a_broken_record_rejects_rather_than_forget_booting_hosts(
        power, fire_event, tmp_path):
    power(power_on_off_enable="True")
    (tmp_path / state.BOOTING_FILE).write_text("{not json")
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "free", True, OLD))})
    assert out.kind == "reject" and "not the power hook's JSON record" in out.detail
    assert out.changes == {}


def test_hook_periodic_a_state_dir_that_is_a_file_rejects_naming_the_setting(
        register_plugin, fire_event, tmp_path):
    """It named only the record's path (`[Errno 20] Not a directory: '.../f/power_booting
    .json'`), not the setting to change."""
    (tmp_path / "f").write_text("")
    register_plugin(pbsplug_power, "power", config={"state_dir": str(tmp_path / "f"),
                                                    "power_on_off_enable": "True"})
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "free", True, OLD))})
    assert (out.kind, out.detail) == (
        "reject", f"power: state_dir {tmp_path / 'f'}: Not a directory "
                  f"({tmp_path / 'f' / state.BOOTING_FILE})")


WRONG_SHAPES = [
    ('{"booting": {"a": "soon"}}', '"booting" \'a\' is "soon", expected an integer epoch'),
    ('{"booting": ["a"]}', '"booting" is ["a"], expected an object of host: power-on time'),
    ('{"booting": {"a": null}}', '"booting" \'a\' is null, expected an integer epoch time'),
    ('{"booting": {"a": true}}', '"booting" \'a\' is true, expected an integer epoch time'),
    ('{"booting": {"a": 1e300}}', '"booting" \'a\' is 1e+300, expected an integer epoch'),
    ('{"boot_delay": 300}', '"booting" is missing, expected an object'),
    ('[1, 2]', "a JSON array, not an object"),
    # what json.loads took (the last of a key twice; a value too deep to copy) or refused
    # in Python's words (int()'s, past 4,300 digits)
    ('{"booting": {"a": 1700000000, "a": 1}}', 'the key "a" twice in one object'),
    ('{"booting": {"a": %s}}' % ("9" * 5000), "a number of 5,000 digits (at most 1,000)"),
    ('{"booting": {}, "x": ' + "[" * 600 + "1" + "]" * 600 + "}",
     "arrays or objects nested more than 100 levels deep"),
]


@pytest.mark.parametrize(("content", "problem"), WRONG_SHAPES)
def test_hook_periodic_a_record_of_the_wrong_shape_rejects_naming_it(power, fire_event,
                                                                     tmp_path, content,
                                                                     problem):
    """Valid JSON, not the hook's record: the run rejects naming the file and what is wrong
    (it raised ValueError, AttributeError or TypeError: a hook error, not the README's
    reject)."""
    power(power_on_off_enable="True")
    path = tmp_path / state.BOOTING_FILE
    path.write_text(content)
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "sleep", True, OLD))})
    assert out.kind == "reject", out.detail
    assert out.detail.startswith(f"power: {path}: not the power hook's JSON record (")
    assert problem in out.detail and out.detail.endswith("remove it to start afresh")
    assert "\n" not in out.detail
    assert out.changes == {} and path.read_text() == content  # left for the admin to see


@pytest.mark.parametrize(("content", "problem"), WRONG_SHAPES)
def test_state_booting_refuses_a_record_of_the_wrong_shape_as_an_oserror(tmp_path, content,
                                                                          problem):
    (tmp_path / state.BOOTING_FILE).write_text(content)
    with pytest.raises(OSError, match=re.escape(problem)):
        state.booting(tmp_path)


def test_state_booting_refuses_a_record_that_is_not_utf8_as_an_oserror(tmp_path):
    (tmp_path / state.BOOTING_FILE).write_bytes(b'{"booting": {"\xff": 1}}')
    with pytest.raises(OSError, match="power_booting.json: not the power hook's JSON record "
                                      r"\('utf-8' codec can't decode byte 0xff"):
        state.booting(tmp_path)


def test_hook_sched_node_availability_plans_past_a_record_of_the_wrong_shape(
        power, pbsplug_plugins, tmp_path):
    """The scheduler's hook must not raise into the scheduler's cycle: it plans as if no
    host were booting, and the periodic run reports the record."""
    from pbsplug import Vnode

    power(power_on_off_enable="True", boot_delay=120)
    (tmp_path / state.BOOTING_FILE).write_text('{"booting": {"a": "soon"}}')
    answer = {}
    for part in pbsplug_plugins.hook.sched_node_availability(sched="default", now=NOW, vnodes=[
            Vnode("a1", {"state": "sleep", "resources_available": {"host": "a"}})]):
        answer.update(part)
    assert answer == {"a1": NOW + 120}


@pytest.mark.parametrize(("content", "problem"), [
    ("{not json", "Expecting property name"),
    ('["a"]', "expected an object of host: entry"),
    ('{"a": {"power": "sideways", "since": 0}}', '\'a\': "power" is "sideways"'),
    ('{"a": {"power": "off"}}', '\'a\': "since" is null, expected a number'),
    ('{"a": {"power": "off", "since": 0, "power": "on"}}', 'the key "power" twice in one '
                                                           'object'),
])
def test_hook_periodic_a_broken_simulated_power_file_is_the_drivers_failure(
        power, fire_event, tmp_path, content, problem):
    """The simulated driver's own file: a DriverError naming it, so the run goes on and
    rejects with the driver's message (it raised a raw ValueError or KeyError)."""
    power(power_on_off_enable="True")
    path = tmp_path / STATE_FILE
    path.write_text(content)
    state.save(tmp_path, {"a": NOW - 60}, 0)  # booting: the run asks the driver about it
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "sleep", True, OLD))})
    assert out.kind == "reject", out.detail
    assert f"{path}: not the simulated driver's JSON record (" in out.detail
    assert problem in out.detail


def test_hook_periodic_with_power_management_off_records_why(power, fire_event, tmp_path):
    power()
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "free", True, OLD))})
    assert out.accepted and out.changes == {}
    assert record(tmp_path)["hosts"]["a"]["why"].startswith("power management is off")


def test_hook_exechost_startup_marks_awake_vnodes_used(power, fire_event):
    power(power_on_off_enable="True")
    out = fire_event("exechost_startup", {"vnode_list": vnodes(
        ("a1", "free", True, OLD), ("b1", "sleep", True, OLD))})
    assert list(out.changes["vnode_list"]) == ["a1"]
    assert out.changes["vnode_list"]["a1"]["last_used_time"] >= NOW


def test_hook_sched_node_availability_answers_the_drivers_boot_delay(power, pbsplug_plugins,
                                                                     tmp_path):
    from pbsplug import Vnode

    power(power_on_off_enable="True", boot_delay=120)
    state.save(tmp_path, {"b": NOW - 100}, 120)
    answer = {}
    for part in pbsplug_plugins.hook.sched_node_availability(sched="default", now=NOW, vnodes=[
            Vnode("a1", {"state": "sleep", "resources_available": {"host": "a"}}),
            Vnode("b1", {"state": "sleep", "resources_available": {"host": "b"}}),
            Vnode("c1", {"state": "offline", "resources_available": {"host": "c"}})]):
        answer.update(part)
    assert answer == {"a1": NOW + 120, "b1": NOW + 20}  # offline: not power's business


@pytest.mark.parametrize(("config", "problem"), [
    ({"driver": "wol"}, "one of 'capmc', 'ipmitool', 'command', 'simulated'"),
    ({"driver": "command", "power_on_command": ["/bin/on", "{hosts}"]},
     "power_off_command"),
    ({"power_on_command": ["/bin/on", "{host}", "{hosts}"]}, "name {host} or {hosts} once"),
    ({"driver": "ipmitool", "ipmi_user": "admin"}, "ipmi_password_file"),
    ({"ipmi_host": "{node}-bmc"}, "whose only field is {host}"),
    ({"nids": {"n1": "24"}}, "wrong: n1"),
    ({"state_dir": "relative/dir"}, "expected an absolute path"),
    # checked level by level as written: '..' after a link names another folder
    ({"state_dir": "/var/x/../y"}, "state_dir = \"/var/x/../y\": expected a path without '..'"),
    ({"driver": "ipmitool", "ipmi_user": "admin", "ipmi_password_file": "/etc/x/../pw"},
     "ipmi_password_file = \"/etc/x/../pw\": expected a path without '..'"),
    ({"boot_delay": -1}, "boot_delay"),
    # No program: each run's command failed with ' is not executable', naming no key.
    ({"capmc": ""}, "capmc = \"\": expected a program"),
    ({"driver": "ipmitool", "ipmitool": ""}, "ipmitool = \"\": expected a program"),
    # ipmitool -I "": each run's call failed, naming no key
    ({"driver": "ipmitool", "ipmi_interface": ""}, "ipmi_interface = \"\": expected an "
                                                   "interface, such as lanplus"),
])
def test_driver_settings_are_checked_at_load(register_plugin, config, problem):
    record = register_plugin(pbsplug_power, "power", config=config, check=False)
    assert record.status == "failed" and problem in record.error, record.error


def test_the_simulated_driver_boots_and_shuts_down_in_its_own_time(tmp_path):
    clock = [1000.0]
    sim = Simulated({"state_dir": str(tmp_path), "boot_delay": 30, "shutdown_delay": 10},
                    clock=lambda: clock[0])
    assert sim.status(["a"]) == {"a": "ready"}  # unknown hosts are up
    sim.power_off(["a"])
    assert sim.status(["a"]) == {"a": "on"}  # shutting down
    clock[0] += 5
    sim.power_on(["a"])  # boots once its shutdown is over (1010), ready at 1040
    clock[0] = 1039.0
    assert sim.status(["a"]) == {"a": "on"}
    clock[0] = 1040.0
    assert sim.status(["a"]) == {"a": "ready"}
    sim.power_off(["a"])
    clock[0] += 10
    assert sim.status(["a"]) == {"a": "off"}
    assert json.loads((tmp_path / STATE_FILE).read_text())["a"]["power"] == "off"


def test_in_a_replay_the_simulated_driver_takes_each_hosts_delays_from_the_platform(
        tmp_path):
    """A host the simulator's platform record names boots and shuts down in its seconds,
    not boot_delay and shutdown_delay (before, "a" was ready at 1040: the driver's 30 s); a
    host it does not name keeps the driver's."""
    (tmp_path / PLATFORM_FILE).write_text(json.dumps(
        {"hosts": {"a": {"boot": 300, "shutdown": 60.5}}}))
    clock = [1000.0]
    sim = Simulated({"state_dir": str(tmp_path), "boot_delay": 30, "shutdown_delay": 10},
                    clock=lambda: clock[0])
    sim.power_off(["a", "b"])
    clock[0] = 1010.0
    assert sim.status(["a", "b"]) == {"a": "on", "b": "off"}  # a shuts down until 1060.5
    sim.power_on(["a", "b"])  # a boots from 1060.5, ready at 1360.5; b ready at 1040
    clock[0] = 1040.0
    assert sim.status(["a", "b"]) == {"a": "on", "b": "ready"}
    clock[0] = 1360.0
    assert sim.status(["a"]) == {"a": "on"}
    clock[0] = 1360.5
    assert sim.status(["a"]) == {"a": "ready"}


@pytest.mark.parametrize(("text", "problem"), [
    ("{", "not the simulator's platform record ("),
    ('{"a": {}}', 'expected an object with "hosts"'),
    ('{"hosts": {"a": 300}}', "'a' is 300, expected an object"),
    ('{"hosts": {"a": {"boot": 300}}}', "'a': \"shutdown\" is null, expected seconds"),
    ('{"hosts": {"a": {"boot": -1, "shutdown": 0}}}', "'a': \"boot\" is -1, expected"),
    ('{"hosts": {"a": {"boot": true, "shutdown": 0}}}', "'a': \"boot\" is true, expected"),
])
def test_a_broken_platform_record_is_the_simulated_drivers_failure(tmp_path, text, problem):
    """One line naming the file and what is wrong: a host whose boot were taken as the
    driver's own would be found ready while the replay has it booting."""
    (tmp_path / PLATFORM_FILE).write_text(text)
    sim = Simulated({"state_dir": str(tmp_path), "boot_delay": 30, "shutdown_delay": 10})
    sim.power_off(["a"])
    with pytest.raises(DriverError) as failed:
        sim.status(["a"])
    message = str(failed.value)
    assert message.startswith(str(tmp_path / PLATFORM_FILE)) and problem in message
    assert "\n" not in message


def test_a_run_that_changed_nothing_but_the_time_writes_the_last_record_with_its_time(
        power, fire_event, tmp_path, monkeypatch):
    """The record holds when each host was last used, not its idle time: a run whose vnodes
    (the very objects: an engine carries an object again only while nothing changed it)
    and reasons are the last run's writes the last record with its own time, without going
    over the hosts. `state.status` gives each host's idle time as of its run."""
    from pbsplug import Event, Vnode, clock

    power(power_on_off_enable="True")
    objects = {name: Vnode(name, attrs) for name, attrs in vnodes(
        ("b1", "job-busy", True, OLD), ("c1", "free", False, OLD),
        ("e1", "job-busy", True, 0)).items()}  # e1: never used
    made = []
    real_head = state.status_head
    monkeypatch.setattr(state, "status_head", lambda *row: made.append(1) or real_head(*row))
    texts = []
    for now in (NOW, NOW + 300):
        with clock.use(lambda now=now: now):
            out = fire_event(Event("periodic", vnode_list=objects), mode="inprocess")
        assert out.accepted and out.changes == {}, out
        texts.append((tmp_path / state.STATUS_FILE).read_text())
    assert texts[1] == texts[0].replace(f'"time": {NOW}}}', f'"time": {NOW + 300}}}')
    assert len(made) == 1  # the second run went over no host
    hosts = state.status(tmp_path)["hosts"]
    assert {h: e["idle"] for h, e in hosts.items()} == {"b": NOW + 300 - OLD,
                                                        "c": NOW + 300 - OLD, "e": None}
    assert "last_used" not in hosts["b"]
    # A vnode changed (another object): the hosts are gone over again.
    objects["b1"] = Vnode("b1", {**vnodes(("b1", "free", False, NOW + 500))["b1"]})
    with clock.use(lambda: NOW + 600):
        fire_event(Event("periodic", vnode_list=objects), mode="inprocess")
    assert len(made) == 2
    record = state.status(tmp_path)
    assert record["time"] == NOW + 600 and record["hosts"]["b"] == {
        "power": "awake", "idle": 100, "eligible": False,
        "why": "poweroff_eligible is False on b1"}


def test_a_record_unchanged_is_not_written_again_unless_someone_touched_the_file(tmp_path):
    from pbsplug_power import state

    state.save(tmp_path, {"h1": 100}, 300)
    path = tmp_path / state.BOOTING_FILE
    inode = path.stat().st_ino
    state.save(tmp_path, {"h1": 100}, 300)
    assert path.stat().st_ino == inode  # the same content: left as it was (no new file)
    path.write_text("{}")  # someone else wrote it: the record is written again
    state.save(tmp_path, {"h1": 100}, 300)
    assert state.booting(tmp_path) == {"h1": 100}
    path.unlink()
    state.save(tmp_path, {"h1": 100}, 300)
    assert state.booting(tmp_path) == {"h1": 100}
    state.save(tmp_path, {"h1": 100, "h2": 200}, 300)
    assert state.booting(tmp_path) == {"h1": 100, "h2": 200}


_status_rows = st.lists(
    st.tuples(st.text(), st.booleans(), st.none() | st.integers(1, state.LATEST_TIME),
              st.sampled_from(["awake", "asleep", "booting"]) | st.text(), st.text()),
    unique_by=lambda row: row[0])


@settings(max_examples=300, deadline=None)
@given(_status_rows, st.integers(0, state.LATEST_TIME),
       st.sampled_from([None, "on_off", "ramp"]), st.text())
def test_the_status_text_is_the_records_json_as_written_with_sorted_keys(rows, when, mode,
                                                                        driver):
    """`status_text` writes, host by host, what ``json.dumps`` of the record with sorted keys
    writes, for any host names and reasons (quotes, control and non-ASCII characters)."""
    rows = sorted(rows)  # (by host: the names are unique)
    record = {"time": when, "mode": mode, "driver": driver, "hosts": {
        host: {"power": power, "why": why, "last_used": used, "eligible": eligible}
        for host, eligible, used, power, why in rows}}
    text = state.status_text(when, state.status_head(mode, driver, rows))
    assert text == json.dumps(record, sort_keys=True)
    assert state.status_text(when, state.status_head(mode, driver, rows)) == text  # (kept)
    later = [(host, eligible, None if used is None else used - 1, power, why)
             for host, eligible, used, power, why in rows]  # (another last use)
    for host, _, used, _, _ in later:
        record["hosts"][host]["last_used"] = used
    assert (state.status_text(when, state.status_head(mode, driver, later))
            == json.dumps(record, sort_keys=True))


def test_the_booting_hosts_are_read_again_only_when_someone_touched_the_file(tmp_path,
                                                                             monkeypatch):
    reads = []
    real_read = state._read
    monkeypatch.setattr(state, "_read",
                        lambda path, *owner: reads.append(path) or real_read(path, *owner))
    state.save(tmp_path, {"h1": 100}, 300)
    assert state.booting(tmp_path) == {"h1": 100} and len(reads) == 1
    found = state.booting(tmp_path)
    assert found == {"h1": 100} and len(reads) == 1  # the same file: not read again
    found["h9"] = 1  # the caller's own copy
    assert state.booting(tmp_path) == {"h1": 100}
    path = tmp_path / state.BOOTING_FILE
    other = tmp_path / "other.json"  # another writer: a new file, same size, renamed over
    other.write_text(path.read_text().replace("100", "200"))
    os.replace(other, path)
    assert state.booting(tmp_path) == {"h1": 200} and len(reads) == 2
    path.write_text('{"booting": {"h2": 7}}')  # written in place
    assert state.booting(tmp_path) == {"h2": 7} and len(reads) == 3
    path.unlink()
    assert state.booting(tmp_path) == {}


def test_a_vnode_object_carried_again_is_not_read_again():
    """An engine carries an object again only while nothing changed it: its view is the
    last run's; another object of the same vnode is read afresh."""
    from pbsplug import Vnode
    from pbsplug_power.periodic_run import node_views, views_by_host

    specs = vnodes(("a1", "free", True, OLD), ("a2", "free", True, OLD),
                   ("b1", "sleep", True, OLD))
    objects = [Vnode(name, attrs) for name, attrs in specs.items()]
    first = node_views(objects)
    grouped = views_by_host(first)
    again = node_views(objects)
    assert all(x is y for x, y in zip(first, again, strict=True))
    assert views_by_host(again) is grouped
    changed = Vnode("a2", {**specs["a2"], "state": "sleep", "last_used_time": NOW})
    third = node_views([objects[0], changed, objects[2]])
    assert third[0] is first[0] and third[2] is first[2]
    assert third[1].states == {"sleep"} and third[1].last_used_time == NOW
    regrouped = views_by_host(third)
    assert regrouped is not grouped and regrouped["a"][1] is third[1]


@pytest.mark.parametrize(("attrs", "job", "assigned"), [
    ({"jobs": ["7.s/1", "8.s/0"], "resources_assigned": {"ncpus": 2}}, "7.s", 2),  # engine
    ({"suspended_jobs": ["7.s", "8.s"], "resources_assigned": {"ncpus": 0}}, "", 0),
    ({"jobs": "7.s/1, 8.s/0", "resources_assigned": {"ncpus": 2}}, "7.s", 2),  # PBS
    ({"jobs": [" /3", "9.s/0"]}, "9.s", 0),
    ({"jobs": ["12", "13"], "resources_assigned": {"ncpus": 1}}, "12", 1),  # Slurm: squeue's
    ({"resources_assigned": {"ncpus": 1}}, "", 1),  # the simulator: no jobs
    ({"resources_assigned": {"ncpus": "3"}}, "", 3),
    ({"jobs": [], "resources_assigned": {"ncpus": 0}}, "", 0),  # an empty vnode
    ({"jobs": "", "resources_assigned": {}}, "", 0),
    ({}, "", 0),
])
def test_a_vnode_view_says_which_job_it_holds_whatever_form_its_engine_gives(attrs, job,
                                                                            assigned):
    from pbsplug import Vnode
    from pbsplug_power.periodic_run import node_views

    view, = node_views([Vnode("a1", {**vnodes(("a1", "free", True, OLD))["a1"], **attrs})])
    assert (view.job, view.assigned) == (job, assigned)
    assert view.suspended == ("7.s" if "suspended_jobs" in attrs else "")


def test_the_simulated_driver_reads_its_record_again_only_when_the_file_changed(tmp_path):
    clock = [1000.0]
    sim = Simulated({"state_dir": str(tmp_path), "boot_delay": 30, "shutdown_delay": 10},
                    clock=lambda: clock[0])
    sim.power_off(["a", "b"])
    first = sim.hosts()
    first["a"]["power"] = "on"  # the caller's own copy
    assert sim.hosts()["a"]["power"] == "off"
    path = tmp_path / STATE_FILE
    before = sim._known()  # what a status read, shared with the driver: never changed
    as_read = json.loads(json.dumps(before))
    clock[0] = 1005.0
    sim.power_on(["a"])
    assert before == as_read and sim._known() == json.loads(path.read_text())
    assert sim.hosts()["a"] == {"power": "on", "since": 1010.0, "sleep_limit": 0}
    other = tmp_path / "other.json"  # another writer: a new file renamed over it
    other.write_text(json.dumps({"a": {"power": "on", "since": 0.0, "sleep_limit": 0}}))
    os.replace(other, path)
    clock[0] = 2000.0
    assert sim.status(["a", "b"]) == {"a": "ready", "b": "ready"}
    path.write_text("[]")  # broken in place: the driver's failure, not the old hosts
    with pytest.raises(DriverError, match="not the simulated driver's JSON record"):
        sim.hosts()



FORGE = """
import json, os, sys
state, now = sys.argv[1], int(sys.argv[2])
if not os.path.isdir(state):
    os.mkdir(state, 0o755)  # made before the admin's: the attacker's own
for name, record in (("power_booting.json", {"booting": {"a": now - 100}, "boot_delay": 0}),
                     ("power_status.json", {"time": now, "hosts": {}}),
                     ("simulated_power.json", {"a": {"power": "on", "since": 0.0}})):
    with open(os.path.join(state, name), "w") as handle:
        json.dump(record, handle)
"""


@pytest.mark.parametrize("kind", ["made by the attacker", "world-writable"])
def test_a_state_dir_others_may_write_is_refused_and_its_records_never_believed(
        register_plugin, pbsplug_plugins, fire_event, shared_tmp, attacker, kind):
    """Another user who could write in state_dir forged the booting record (the scheduler
    planned the host as waking, the run took it as powered on and, once the forged
    simulated record said ready, woke its vnodes) and the status. Such a folder is now
    refused: the run rejects with one line naming it, its owner and its mode, and changes
    nothing; the scheduler plans as if no host were booting; `power status` exits 1."""
    from pbsplug import Vnode

    sticky = shared_tmp / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp
    state_dir = sticky / "powerstate"
    if kind == "world-writable":
        state_dir.mkdir()
        state_dir.chmod(0o1777)
    done = attacker.python(FORGE, str(state_dir), str(NOW))
    assert done.returncode == 0, done.stderr
    planted = {p.name: p.read_bytes() for p in state_dir.iterdir()}
    register_plugin(pbsplug_power, "power", config={
        "driver": "simulated", "state_dir": str(state_dir), "boot_delay": 120,
        "power_on_off_enable": "True"})
    out = fire_event("periodic", {"vnode_list": vnodes(("a1", "sleep", True, OLD))})
    problem = (f"{state_dir} is owned by uid {attacker.uid} ({attacker.user}), mode 0755"
               if kind == "made by the attacker" else
               f"{state_dir} is writable by everyone (owner uid 0 (root), mode 1777): "
               "others may add files to it")
    assert out.kind == "reject" and out.changes == {}
    assert out.detail.startswith(f"power: refusing state_dir {state_dir}: {problem}, so "
                                 "another user could plant or change what is in it")
    assert "\n" not in out.detail
    answer = {}
    for part in pbsplug_plugins.hook.sched_node_availability(sched="default", now=NOW, vnodes=[
            Vnode("a1", {"state": "sleep", "resources_available": {"host": "a"}})]):
        answer.update(part)
    assert answer == {"a1": NOW + 120}  # not 20 s from now, as the forged power-on said
    with pytest.raises(DriverError, match="refusing state_dir"):
        Simulated({"state_dir": str(state_dir), "boot_delay": 0, "shutdown_delay": 0}
                  ).status(["a"])
    assert {p.name: p.read_bytes() for p in state_dir.iterdir()} == planted
    home = shared_tmp / "home"
    home.mkdir()
    (home / "site.toml").write_text(f'[plugins.power]\nenabled = true\n[plugins.power.'
                                    f'config]\nstate_dir = "{state_dir}"\n')
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
    done = subprocess.run([PBSPLUG, "power", "status"], capture_output=True, text=True,
                          env={**clean, "PBSPLUG_HOME": str(home)}, timeout=60)
    assert done.returncode == 1
    assert done.stderr.startswith(f"pbsplug power: refusing state_dir {state_dir}: {problem}")


def test_a_record_of_another_user_left_in_the_state_dir_is_refused(tmp_path, attacker):
    """A folder made safe after a user could write in it may still hold that user's
    records, theirs to edit: refused, naming the file, its owner and its mode."""
    state.save(tmp_path, {"h1": NOW}, 0, {"time": NOW, "mode": None, "driver": "simulated",
                                           "hosts": {}})
    os.chown(tmp_path / state.BOOTING_FILE, attacker.uid, attacker.gid)
    with pytest.raises(OSError, match=(
            rf"^refusing {tmp_path / state.BOOTING_FILE}: owned by uid {attacker.uid} "
            rf"\({attacker.user}\), mode 0644, so another user could have written it")):
        state.booting(tmp_path)
    assert state.status(tmp_path)["time"] == NOW  # root's own: read


def test_a_record_read_before_and_unchanged_is_not_checked_again(tmp_path, monkeypatch):
    """The scheduler's hook asks for the booting hosts at every cycle and the simulated
    driver for its hosts at nearly every run: a check of state_dir at each was a third of
    a power replay's time (KTH-SP2's first 3,000 jobs: 18 s -> 24 s). What was read
    through the checks, in a file untouched since, is what is there; a file replaced or
    written since is read, and its folder checked, again."""
    from pbsplug import safedirs

    checked = []
    real = safedirs.check_folder
    monkeypatch.setattr(safedirs, "check_folder",
                        lambda folder, what="folder", **owner: checked.append(folder)
                        or real(folder, what, **owner))
    state.save(tmp_path, {"h1": NOW}, 0)
    sim = Simulated({"state_dir": str(tmp_path), "boot_delay": 0, "shutdown_delay": 0})
    sim.power_off(["a"])
    assert state.booting(tmp_path) == {"h1": NOW} and sim.hosts()["a"]["power"] == "off"
    checked.clear()
    for _ in range(3):
        assert state.booting(tmp_path) == {"h1": NOW} and sim.hosts()["a"]["power"] == "off"
    assert checked == []
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"booting": {"h2": NOW}, "boot_delay": 0}))
    os.replace(other, tmp_path / state.BOOTING_FILE)
    assert state.booting(tmp_path) == {"h2": NOW} and checked == [tmp_path]
    (tmp_path / STATE_FILE).write_text(json.dumps({}))
    assert sim.hosts() == {} and checked == [tmp_path, tmp_path]
