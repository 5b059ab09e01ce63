"""The capmc driver against the stand-in capmc, a real executable run as a process."""

from __future__ import annotations

import json
import time

import pytest

from pbsplug_power.capmc import Capmc, DriverError, nid_list, parse_nid_list
from pbsplug_power.fake_capmc import install

NIDS = {"nid00024": 24, "nid00025": 25, "nid00030": 30}


@pytest.fixture
def fake(tmp_path):
    state = tmp_path / "state.json"
    path = install(tmp_path / "capmc", state, {24: "on", 25: "on", 30: "off"})

    def calls():
        return json.loads(state.read_text())["calls"]

    def script(**changes):
        data = json.loads(state.read_text())
        data.update(changes)
        state.write_text(json.dumps(data))

    return path, calls, script


@pytest.fixture
def driver(fake):
    lines: list[tuple[str, str]] = []
    capmc = Capmc(NIDS, str(fake[0]), timeout=30, log=lambda a, m: lines.append((a, m)))
    return capmc, lines


@pytest.mark.parametrize(("nids", "text"), [
    ([24, 25], "24-25"), ([30, 24, 25], "24-25,30"), ([1], "1"), ([1, 3, 5], "1,3,5"),
    ([7, 8, 9, 10, 12], "7-10,12"), ([], "")])
def test_nid_lists(nids, text):
    assert nid_list(nids) == text
    if text:
        assert parse_nid_list(text) == sorted(nids)


def test_each_action_runs_the_seeds_command_and_logs_its_lines(driver, fake):
    capmc, lines = driver
    path, calls, _ = fake
    capmc.power_off(["nid00024", "nid00025"])
    capmc.power_on(["nid00030"])
    capmc.ramp_down(["nid00024", "nid00025"])
    capmc.ramp_up(["nid00025", "nid00024"])
    assert calls() == [["node_off", "--nids", "24-25"], ["node_on", "--nids", "30"],
                       ["set_sleep_state_limit", "--nids", "24-25", "--limit", "4"],
                       ["set_sleep_state_limit", "--nids", "24-25", "--limit", "0"]]
    assert lines[:2] == [("node_power_off", f"launch: {path} node_off --nids 24-25"),
                         ("node_power_off", "launch: finished")]
    assert lines[4] == ("power_ramp_down",
                        f"launch: {path} set_sleep_state_limit --nids 24-25 --limit 4")
    assert lines[6][0] == "power_ramp_up"


def test_status_follows_power_and_a_slow_boot(driver, fake):
    capmc, _ = driver
    _, _, script = fake
    assert capmc.status(list(NIDS)) == {"nid00024": "ready", "nid00025": "ready",
                                        "nid00030": "off"}
    script(boot_delay=1.0)
    capmc.power_on(["nid00030"])
    assert capmc.status(["nid00030"]) == {"nid00030": "on"}  # booting
    time.sleep(1.1)
    assert capmc.status(["nid00030"]) == {"nid00030": "ready"}


@pytest.mark.parametrize(("fail", "message"), [
    ({"node_off": {"e": 52, "err_msg": "Invalid nid"}}, "e=52 err_msg='Invalid nid'"),
    ({"node_off": {"e": 0, "err_msg": "Partial failure"}}, "e=0 err_msg='Partial failure'"),
])
def test_a_failure_names_the_command_and_capmcs_answer(driver, fake, fail, message):
    capmc, lines = driver
    path, _, script = fake
    script(fail=fail)
    with pytest.raises(DriverError) as info:
        capmc.power_off(["nid00024"])
    assert str(info.value) == f"{path} node_off --nids 24: {message}"
    assert lines == [("node_power_off", f"launch: {path} node_off --nids 24")]  # no finished


def test_a_host_without_a_nid_runs_nothing(driver, fake):
    capmc, _ = driver
    with pytest.raises(DriverError, match="no Cray nid is known for login1"):
        capmc.power_on(["nid00024", "login1"])
    assert fake[1]() == []


def test_a_missing_hanging_or_talking_capmc_is_a_clear_error(tmp_path):
    with pytest.raises(DriverError, match=r"/nonexistent/capmc does not exist"):
        Capmc(NIDS, "/nonexistent/capmc").power_on(["nid00024"])
    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    with pytest.raises(DriverError, match=r"node_on --nids 24: no answer within 0.5 s"):
        Capmc(NIDS, str(slow), timeout=0.5).power_on(["nid00024"])
    talker = tmp_path / "talker"
    talker.write_text("#!/bin/sh\necho 'capmc: could not reach the SMW' >&2\nexit 3\n")
    talker.chmod(0o755)
    with pytest.raises(DriverError, match=r"exit status 3, not capmc's JSON: capmc: could "
                                          r"not reach the SMW"):
        Capmc(NIDS, str(talker)).power_off(["nid00025"])


@pytest.mark.parametrize("answer", ["[" * 100_000, '{"e": %s}' % ("9" * 5000),
                                    '{"e": 1, "err_msg": "Success", "e": 0}',
                                    '{"e": 0, "err_msg": "Success", "nids": [NaN]}'])
def test_an_answer_json_loads_fails_on_is_not_capmcs_json(tmp_path, answer):
    """json.loads' RecursionError (nesting) and int()'s ValueError (5,000 digits) went
    through `run`: the hook's error in Python's words, not the command and its answer.
    json.loads kept the last of a key twice (e=1 then e=0 was success) and read NaN."""
    (tmp_path / "answer").write_text(answer)
    odd = tmp_path / "odd"
    odd.write_text(f"#!/bin/sh\ncat {tmp_path / 'answer'}\n")
    odd.chmod(0o755)
    with pytest.raises(DriverError, match=r"node_off --nids 25: exit status 0, not capmc's "
                                          r"JSON: [\[{]") as caught:
        Capmc(NIDS, str(odd)).power_off(["nid00025"])
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 700
