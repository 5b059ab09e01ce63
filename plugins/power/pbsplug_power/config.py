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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: PBS_power's defaults (pbs-behavior.md §3; the seed's table).
DEFAULTS: dict[str, Any] = {
    "power_ramp_rate_enable": False,
    "power_on_off_enable": False,
    "node_idle_limit": 1800,
    "min_node_down_delay": 1800,
    "max_jobs_analyze_limit": 100,
    "max_concurrent_nodes": 10,
}
BOOLEANS = ("power_ramp_rate_enable", "power_on_off_enable")
INTEGERS = ("node_idle_limit", "min_node_down_delay", "max_jobs_analyze_limit",
            "max_concurrent_nodes")
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


def _integer(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise PowerConfigError(f"{key}: {value!r} is not an integer")
    if isinstance(value, int):
        number = value
    else:
        try:
            number = int(str(value).strip())
        except ValueError:
            raise PowerConfigError(f"{key}: {value!r} is not an integer") from None
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
