"""``ipmitool``: chassis power on, off and status through each host's BMC, as a driver.

One call per host: ``ipmitool -I <interface> -H <bmc> -U <user> -f <password file> chassis
power on|off|status``. The password is read by ipmitool from the file (``-f``), so it is never
on a command line that ``ps`` shows. The BMC's address comes from the ``ipmi_host`` template
(``{host}-ipmi`` by default: ``n1`` -> ``n1-ipmi``).

IPMI has no sleep states, so this driver cannot ramp. A BMC knows the chassis power, not
whether the operating system has booted: ``Chassis Power is on`` counts as ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .driver import OFF, READY, UNKNOWN, Driver, Log, quiet, run_each


class Ipmitool(Driver):
    name = "ipmitool"
    can_ramp = False

    def __init__(self, config: Mapping[str, Any], timeout: float = 120.0, log: Log = quiet):
        self.program = config["ipmitool"]
        self.template = config["ipmi_host"]
        self.interface = config["ipmi_interface"]
        self.user = config["ipmi_user"]
        self.password_file = config["ipmi_password_file"]
        self.timeout = timeout
        self.log = log

    def argv(self, host: str, verb: str) -> list[str]:
        argv = [self.program, "-I", self.interface, "-H", self.template.format(host=host)]
        if self.user:
            argv += ["-U", self.user]
        if self.password_file:
            argv += ["-f", self.password_file]
        return [*argv, "chassis", "power", verb]

    def _each(self, action: str, verb: str, hosts: list[str]) -> dict[str, str]:
        """One call per host; every host is tried, and the failures are raised together."""
        outputs = run_each([self.argv(h, verb) for h in hosts], action, self.log, self.timeout)
        return dict(zip(hosts, outputs, strict=True))

    def power_off(self, hosts: list[str]) -> None:
        self._each("node_power_off", "off", hosts)

    def power_on(self, hosts: list[str]) -> None:
        self._each("node_power_on", "on", hosts)

    def status(self, hosts: list[str]) -> dict[str, str]:
        answers = self._each("node_power_status", "status", hosts)
        out = {}
        for host, text in answers.items():
            words = text.strip().lower().split()
            out[host] = (READY if words[-1:] == ["on"] else OFF if words[-1:] == ["off"]
                         else UNKNOWN)
        return out
