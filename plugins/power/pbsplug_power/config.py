"""The seed's JSON configuration (Interface 2), read with PBS_power's rules.

PBS admins bring their ``PBS_power.CF``, where every value is a string (``"True"``,
``"1800"``). The rules are PBS's:

- a boolean is ``True``/``False`` in any case (or a JSON boolean);
- a number is an integer (or a string of one);
- a value of 0 or less falls back to its default;
- a number that is not an integer is an error, which the periodic event reports by rejecting
  with the message;
- both modes on means on/off wins, with PBS's warning in the log.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pbsplug import Setting, absolute_path_or_empty

from .capmc import DEFAULT_CAPMC
from .command import COMMANDS, template_problem
from .driver import DRIVERS

#: PBS_power's defaults (pbs-behavior.md §3; the seed's table).
DEFAULTS: dict[str, Any] = {
    "power_ramp_rate_enable": False,
    "power_on_off_enable": False,
    "node_idle_limit": 1800,
    "min_node_down_delay": 1800,
    "max_jobs_analyze_limit": 100,
    "max_concurrent_nodes": 10,
}
#: The defaults as PBS's .CF writes them (strings).
DEFAULT_VALUES = {key: str(value) for key, value in DEFAULTS.items()}
BOOLEANS = ("power_ramp_rate_enable", "power_on_off_enable")
INTEGERS = ("node_idle_limit", "min_node_down_delay", "max_jobs_analyze_limit",
            "max_concurrent_nodes")
#: The longest a driver command may take: a day (1e300 made every command an OverflowError,
#: past what the clock can add).
MAX_TIMEOUT = 86400.0
#: The longest boot, boot timeout or shutdown: ten years (a larger JSON integer made the
#: scheduler's availability and the periodic run raise OverflowError turning it to a float).
MAX_DELAY = 10 * 365 * 86400

#: PBS's log line when both modes are on.
BOTH_MODES_WARNING = "Hook config: power_on_off_enable is over-riding power_ramp_rate_enable"


class PowerConfigError(ValueError):
    """A configuration value PBS_power would refuse; the message names the key and value."""


@dataclass(frozen=True)
class PowerConfig:
    ramp: bool
    on_off: bool
    node_idle_limit: int
    min_node_down_delay: int
    max_jobs_analyze_limit: int
    max_concurrent_nodes: int

    @property
    def mode(self) -> str | None:
        """``on_off``, ``ramp``, or None (power management off)."""
        return "on_off" if self.on_off else "ramp" if self.ramp else None

    @property
    def both_modes(self) -> bool:
        return self.ramp and self.on_off


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "false"):
        return text == "true"
    raise PowerConfigError(f"{key}: {value!r} is not True or False")


#: An integer as a .CF string writes one: ASCII digits with a sign (int() alone also reads
#: "١٨٠٠" as 1800 and "1_800" as 1800).
_INTEGER = re.compile(r"\s*[+-]?[0-9]{1,18}\s*", re.ASCII)


def _integer(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise PowerConfigError(f"{key}: {value!r} is not an integer")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _INTEGER.fullmatch(value):
        number = int(value)
    else:
        raise PowerConfigError(f"{key}: {value!r} is not an integer")
    return number if number > 0 else DEFAULTS[key]


def power_config(values: Mapping[str, Any]) -> PowerConfig:
    """The power settings from the hook's configuration (keys not given take PBS's
    defaults). `PowerConfigError` for a value PBS would refuse."""
    ramp = _boolean("power_ramp_rate_enable",
                    values.get("power_ramp_rate_enable", DEFAULTS["power_ramp_rate_enable"]))
    on_off = _boolean("power_on_off_enable",
                      values.get("power_on_off_enable", DEFAULTS["power_on_off_enable"]))
    numbers = {key: _integer(key, values.get(key, DEFAULTS[key])) for key in INTEGERS}
    return PowerConfig(ramp=ramp, on_off=on_off, **numbers)


# -- the plugin's configuration schema --------------------------------------------------------
# PBS_power's keys take any value at load: PBS reads them at each periodic run, and a bad one
# is that run's reject (`power_config`). pbsplug's own keys (the driver's) are checked at load.

def _program(value: str) -> str | None:
    return None if value else "expected a program"


def _bmc_template(value: str) -> str | None:
    try:
        value.format(host="h")
    except (KeyError, IndexError, ValueError):
        return "expected a template whose only field is {host}, such as {host}-ipmi"
    return None if "{host}" in value else "expected a template naming {host}"


def _nid_map(value: dict) -> str | None:
    bad = [h for h, n in value.items() if isinstance(n, bool) or not isinstance(n, int)
           or n < 0]
    return f"expected host = nid (a whole number) for each host; wrong: {', '.join(bad)}" \
        if bad else None


def settings() -> dict[str, Any]:
    """`PluginInfo.config`: the seed's keys and the drivers'."""
    def pbs_key(key: str, doc: str) -> Setting:
        return Setting(object, DEFAULT_VALUES[key], doc=doc)

    out = {
        "power_ramp_rate_enable": pbs_key("power_ramp_rate_enable",
                                          "ramp idle hosts down to deep sleep, and back up"),
        "power_on_off_enable": pbs_key("power_on_off_enable",
                                       "power idle eligible hosts off, and back on (wins over "
                                       "ramping)"),
        "node_idle_limit": pbs_key("node_idle_limit",
                                   "seconds idle before a host goes down"),
        "min_node_down_delay": pbs_key("min_node_down_delay",
                                       "seconds after a state change before power on"),
        "max_jobs_analyze_limit": pbs_key("max_jobs_analyze_limit",
                                          "queued jobs' estimates looked at per run"),
        "max_concurrent_nodes": pbs_key("max_concurrent_nodes",
                                        "hosts taken down, and woken, at most per run"),
        "driver": Setting(str, "capmc", choices=DRIVERS, doc="what switches the power"),
        "boot_delay": Setting(int, 300, ge=0, le=MAX_DELAY,
                              doc="seconds a host needs to come up; the scheduler plans woken "
                                  "hosts from then"),
        "boot_timeout": Setting(int, 1800, gt=0, le=MAX_DELAY,
                                doc="seconds a powered-on host may take before it is given up "
                                    "as failed to boot"),
        "shutdown_delay": Setting(int, 0, ge=0, le=MAX_DELAY,
                                  doc="simulated: seconds a host takes to power off"),
        "timeout": Setting(float, 120.0, gt=0, le=MAX_TIMEOUT,
                           doc="seconds a driver command may take"),
        "state_dir": Setting(str, "", check=absolute_path_or_empty,
                             state_folder=True, doc="where the hook keeps its record "
                             "(default <pbsplug home>/hooks/tmp; a replay's own)"),
        "capmc": Setting(str, DEFAULT_CAPMC, check=_program, doc="capmc: the program"),
        "nids": Setting(dict, {}, check=_nid_map, doc="capmc: host = Cray nid, for vnodes "
                        "without resources_available.PBScraynid"),
        "ipmitool": Setting(str, "ipmitool", check=_program, doc="ipmitool: the program"),
        "ipmi_host": Setting(str, "{host}-ipmi", check=_bmc_template,
                             doc="ipmitool: each host's BMC address"),
        "ipmi_interface": Setting(str, "lanplus", doc="ipmitool: -I",
                                  check=lambda v: None if v else
                                  "expected an interface, such as lanplus"),
        "ipmi_user": Setting(str, "", doc="ipmitool: -U"),
        "ipmi_password_file": Setting(str, "", check=absolute_path_or_empty,
                                      doc="ipmitool: -f, the file holding the BMC password"),
    }
    for key in COMMANDS:
        out[key] = Setting(list, [], items=str, check=template_problem,
                           doc="command: argv template with {host} or {hosts}")
    return out


def check_config(config: Mapping[str, Any]):
    """Rules across the driver's keys."""
    driver = config["driver"]
    if driver == "command":
        for key in ("power_on_command", "power_off_command", "status_command"):
            if not config[key]:
                yield key, "the command driver needs it"
    if driver == "ipmitool" and config["ipmi_user"] and not config["ipmi_password_file"]:
        yield "ipmi_password_file", ("set it with ipmi_user: the password is read from a "
                                     "file, never given on a command line")
