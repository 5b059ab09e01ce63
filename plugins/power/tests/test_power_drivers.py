"""The ipmitool and command drivers, run against real executables: a stand-in ipmitool that
answers as ipmitool does (``Chassis Power is on``) and records its argv, and shell scripts
as the site's commands. No argument ever goes through a shell."""

from __future__ import annotations

import json
import stat
import sys

import pytest

from pbsplug_power.command import Command
from pbsplug_power.driver import DriverError, make_driver
from pbsplug_power.ipmitool import Ipmitool

IPMITOOL = """#!{python}
import json, sys
calls, power = {calls!r}, {power!r}
with open(calls, "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
host = sys.argv[sys.argv.index("-H") + 1]
verb = sys.argv[-1]
state = json.load(open(power))
if host not in state:
    print("Error: Unable to establish IPMI v2 / RMCP+ session", file=sys.stderr)
    sys.exit(1)
if verb == "status":
    print("Chassis Power is " + state[host])
else:
    state[host] = verb
    json.dump(state, open(power, "w"))
    print("Chassis Power Control: " + ("Up/On" if verb == "on" else "Down/Off"))
"""


def executable(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.fixture
def ipmi(tmp_path):
    calls, power = tmp_path / "calls", tmp_path / "power.json"
    power.write_text(json.dumps({"n1-bmc": "on", "n2-bmc": "off"}))
    program = executable(tmp_path / "ipmitool", IPMITOOL.format(
        python=sys.executable, calls=str(calls), power=str(power)))
    lines = []
    driver = Ipmitool({"ipmitool": program, "ipmi_host": "{host}-bmc",
                       "ipmi_interface": "lanplus", "ipmi_user": "admin",
                       "ipmi_password_file": "/etc/pbsplug/bmc.pw"},
                      timeout=30, log=lambda a, m: lines.append((a, m)))

    def argvs():
        return [json.loads(line) for line in calls.read_text().splitlines()]

    return driver, argvs, lines, program


def test_ipmitool_runs_chassis_power_per_host_with_the_password_in_a_file(ipmi):
    driver, argvs, lines, program = ipmi
    assert driver.status(["n1", "n2"]) == {"n1": "ready", "n2": "off"}
    driver.power_on(["n2"])
    driver.power_off(["n1"])
    assert driver.status(["n1", "n2"]) == {"n1": "off", "n2": "ready"}
    base = ["-I", "lanplus", "-U", "admin", "-f", "/etc/pbsplug/bmc.pw", "chassis", "power"]
    assert argvs()[2] == ["-I", "lanplus", "-H", "n2-bmc", *base[2:], "on"]
    assert all("-P" not in argv for argv in argvs())  # never the password itself
    assert lines[4:6] == [("node_power_on", f"launch: {program} -I lanplus -H n2-bmc -U admin"
                           " -f /etc/pbsplug/bmc.pw chassis power on"),
                          ("node_power_on", "launch: finished")]
    assert not driver.can_ramp
    with pytest.raises(DriverError, match="cannot ramp"):
        driver.ramp_down(["n1"])


def test_ipmitool_tries_every_host_and_reports_the_failures_together(ipmi):
    driver, argvs, _, _ = ipmi
    with pytest.raises(DriverError) as failed:
        driver.power_off(["n3", "n1", "n4"])
    assert str(failed.value).count("exit status 1: Error: Unable to establish IPMI") == 2
    assert "n3-bmc" in str(failed.value) and "n4-bmc" in str(failed.value)
    assert [argv[3] for argv in argvs()] == ["n3-bmc", "n1-bmc", "n4-bmc"]


def test_the_command_driver_expands_host_and_hosts_as_single_words(tmp_path):
    calls = tmp_path / "calls"
    script = executable(tmp_path / "pdu", f"""#!/bin/sh
printf '%s|' "$@" >> {calls}
echo >> {calls}
if [ "$1" = status ]; then echo "h1 ready"; echo "h2 off"; echo "junk"; fi
""")
    lines = []
    driver = Command({"power_on_command": [script, "on", "{hosts}"],
                      "power_off_command": [script, "off", "--node={host}"],
                      "ramp_up_command": [], "ramp_down_command": [],
                      "status_command": [script, "status", "{hosts}"]},
                     timeout=30, log=lambda a, m: lines.append((a, m)))
    driver.power_on(["h1", "h2; rm -rf /"])
    driver.power_off(["h1", "h2"])
    assert driver.status(["h1", "h2", "h3"]) == {"h1": "ready", "h2": "off", "h3": "unknown"}
    assert calls.read_text().splitlines() == [
        "on|h1,h2; rm -rf /|", "off|--node=h1|", "off|--node=h2|", "status|h1,h2,h3|"]
    assert lines[0] == ("node_power_on", f"launch: {script} on h1,h2; rm -rf /")
    assert not driver.can_ramp
    with pytest.raises(DriverError, match="ramp_down_command is not set"):
        driver.ramp_down(["h1"])


@pytest.mark.parametrize(("argv", "error"), [
    (["/nonexistent/pdu", "{hosts}"], "/nonexistent/pdu does not exist"),
    (["/bin/sh", "-c", "echo dead PDU >&2; exit 3", "{hosts}"], "exit status 3: dead PDU"),
    (["/bin/sh", "-c", "sleep 5", "{hosts}"], "no answer within 0.5 s"),
])
def test_a_failing_command_is_a_driver_error_naming_it(argv, error):
    driver = Command({"power_on_command": argv, "power_off_command": argv,
                      "ramp_up_command": [], "ramp_down_command": [], "status_command": argv},
                     timeout=0.5)
    with pytest.raises(DriverError, match=error):
        driver.power_on(["h1"])


def test_make_driver_reads_cray_nids_from_the_vnodes(tmp_path):
    from pbsplug import Vnode

    config = {"driver": "capmc", "timeout": 10, "capmc": "capmc", "nids": {"x": 9}}
    vnodes = [Vnode("a1", {"resources_available": {"host": "a", "PBScraynid": "24"}}),
              Vnode("b1", {"resources_available": {"host": "b"}})]
    driver = make_driver(config, vnodes)
    assert driver.nids == {"x": 9, "a": 24}
    assert driver.problem("a") is None and "no Cray nid" in driver.problem("b")
