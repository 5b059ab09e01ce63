"""``command``: the site's own programs, as argument-list templates, as a driver.

Each of ``power_on_command``, ``power_off_command``, ``ramp_up_command``,
``ramp_down_command`` and ``status_command`` is a list of strings, for example
``["/usr/local/sbin/pdu", "off", "{hosts}"]``:

- ``{hosts}`` becomes the hosts, comma-separated, and the program runs once;
- ``{host}`` becomes one host, and the program runs once per host;
- nothing else is replaced, and no shell ever sees the words.

A non-zero exit is a failure. ``status_command`` prints one line per host, ``<host>
<state>``, with state ``ready``, ``on`` or ``off``. A command left empty is an action the
site's hardware does not have (no ramp commands: ramp mode is refused).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .driver import OFF, ON, READY, UNKNOWN, Driver, DriverError, Log, quiet, run_each

COMMANDS = ("power_on_command", "power_off_command", "ramp_up_command", "ramp_down_command",
            "status_command")


def template_problem(argv: list[str]) -> str | None:
    """Why a command template cannot be used, or None."""
    if not argv:
        return None
    if not argv[0]:
        return "the program (the first word) is empty"
    if sum(word.count("{host}") + word.count("{hosts}") for word in argv) > 1:
        return "name {host} or {hosts} once"
    return None


class Command(Driver):
    name = "command"

    def __init__(self, config: Mapping[str, Any], timeout: float = 120.0, log: Log = quiet):
        self.templates = {key: list(config[key]) for key in COMMANDS}
        self.timeout = timeout
        self.log = log
        self.can_ramp = bool(self.templates["ramp_up_command"]
                             and self.templates["ramp_down_command"])

    def _run(self, key: str, action: str, hosts: list[str]) -> list[str]:
        template = self.templates[key]
        if not template:
            raise DriverError(f"{key} is not set: the command driver cannot {action}")
        per_host = any("{host}" in word for word in template)
        groups = [[h] for h in hosts] if per_host else [hosts]
        argvs = [[w.replace("{hosts}", ",".join(group)).replace("{host}", group[0])
                  for w in template] for group in groups]
        return run_each(argvs, action, self.log, self.timeout)

    def power_off(self, hosts: list[str]) -> None:
        self._run("power_off_command", "node_power_off", hosts)

    def power_on(self, hosts: list[str]) -> None:
        self._run("power_on_command", "node_power_on", hosts)

    def ramp_down(self, hosts: list[str]) -> None:
        self._run("ramp_down_command", "power_ramp_down", hosts)

    def ramp_up(self, hosts: list[str]) -> None:
        self._run("ramp_up_command", "power_ramp_up", hosts)

    def status(self, hosts: list[str]) -> dict[str, str]:
        out = dict.fromkeys(hosts, UNKNOWN)
        for text in self._run("status_command", "node_power_status", hosts):
            for line in text.splitlines():
                words = line.split()
                if len(words) == 2 and words[0] in out and words[1] in (READY, ON, OFF):
                    out[words[0]] = words[1]
        return out
