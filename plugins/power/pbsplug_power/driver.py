"""The one small interface every power driver has, the command runner they share, and the
choice of driver from the configuration.

A driver acts on hosts (the names in ``resources_available.host``), several at a time:

- ``power_off(hosts)`` / ``power_on(hosts)``: on/off mode;
- ``ramp_down(hosts)`` / ``ramp_up(hosts)``: ramp-rate mode (deep sleep states, and back);
- ``status(hosts)``: each host's power, ``ready`` (up and usable), ``on`` (powered, not ready
  yet), ``off`` or ``unknown``;
- ``problem(host)``: why the driver cannot act on a host (capmc: no Cray nid), else
  None. Such a host is never taken down;
- ``can_ramp``: whether ramp mode is possible at all.

Every failure is a `DriverError` naming the command and what it answered. Commands are run
with argument lists, never through a shell, and each run is logged as the seed's lines:
``launch: <command>`` then ``launch: finished``, under the action's name
(``node_power_off``, ``node_power_on``, ``power_ramp_down``, ``power_ramp_up``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterable, Mapping
from typing import Any

#: `log(action, message)`: one of the seed's lines (`Event.logjobmsg` in the hook).
Log = Callable[[str, str], None]
DRIVERS = ("capmc", "ipmitool", "command", "simulated")
#: What `status` answers per host.
READY, ON, OFF, UNKNOWN = "ready", "on", "off", "unknown"


class DriverError(RuntimeError):
    """A power command failed; the message names the command and what it answered."""


def quiet(action: str, message: str) -> None:
    """The default log: nothing."""


def run_command(argv: list[str], action: str, log: Log, timeout: float,
                *, finished: bool = True) -> subprocess.CompletedProcess:
    """Run `argv` (no shell), logging ``launch: <command>``; a missing or non-executable
    program, a timeout and a non-zero exit are `DriverError`s. With `finished`, a clean
    exit logs ``launch: finished`` (capmc's caller logs it after reading the answer)."""
    command = " ".join(argv)
    log(action, f"launch: {command}")
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise DriverError(f"{command}: {argv[0]} does not exist") from None
    except PermissionError:
        raise DriverError(f"{command}: {argv[0]} is not executable") from None
    except subprocess.TimeoutExpired:
        raise DriverError(f"{command}: no answer within {timeout:g} s") from None
    if done.returncode != 0 and finished:
        why = (done.stderr.strip() or done.stdout.strip() or "no output")[:500]
        raise DriverError(f"{command}: exit status {done.returncode}: {why}")
    if finished:
        log(action, "launch: finished")
    return done


def run_each(argvs: list[list[str]], action: str, log: Log, timeout: float) -> list[str]:
    """`run_command` for each argv (one per host, or one for all): every one is tried, their
    outputs are returned in order, and the failures are raised together."""
    outputs, failed = [], []
    for argv in argvs:
        try:
            outputs.append(run_command(argv, action, log, timeout).stdout)
        except DriverError as exc:
            failed.append(str(exc))
    if failed:
        raise DriverError("; ".join(failed))
    return outputs


class Driver:
    """The interface; see the module's documentation."""

    name = ""
    can_ramp = True

    def problem(self, host: str) -> str | None:
        return None

    def power_off(self, hosts: list[str]) -> None:
        raise NotImplementedError

    def power_on(self, hosts: list[str]) -> None:
        raise NotImplementedError

    def ramp_down(self, hosts: list[str]) -> None:
        raise DriverError(f"the {self.name} driver cannot ramp hosts down; use "
                          "power_on_off_enable")

    def ramp_up(self, hosts: list[str]) -> None:
        raise DriverError(f"the {self.name} driver cannot ramp hosts up; use "
                          "power_on_off_enable")

    def status(self, hosts: list[str]) -> dict[str, str]:
        raise NotImplementedError


def host_of(vnode: Any) -> str:
    """The host a vnode belongs to: ``resources_available.host``, else its own name."""
    avail = vnode.get("resources_available")
    return str((avail.get("host") if avail else None) or vnode.name)


def make_driver(config: Mapping[str, Any], vnodes: Iterable[Any] = (),
                log: Log = quiet, clock: Callable[[], float] | None = None) -> Driver:
    """The driver the configuration names, for these vnodes (capmc reads their
    ``resources_available.PBScraynid``)."""
    name = config["driver"]
    timeout = float(config["timeout"])
    if name == "capmc":
        from .capmc import Capmc

        nids = {str(h): int(n) for h, n in config["nids"].items()}
        for vnode in vnodes:
            avail = vnode.get("resources_available")
            nid = avail.get("PBScraynid") if avail else None
            if nid is not None and str(nid).strip().isascii() and str(nid).strip().isdigit():
                nids.setdefault(host_of(vnode), int(str(nid).strip()))
        return Capmc(nids, config["capmc"], timeout=timeout, log=log)
    if name == "ipmitool":
        from .ipmitool import Ipmitool

        return Ipmitool(config, timeout=timeout, log=log)
    if name == "command":
        from .command import Command

        return Command(config, timeout=timeout, log=log)
    if name == "simulated":
        from .simulated import Simulated

        return Simulated(config, log=log, clock=clock)
    raise DriverError(f"unknown driver {name!r}; drivers are: {', '.join(DRIVERS)}")
