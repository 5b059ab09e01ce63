"""``simulated``: hosts whose power lives in a file, for the local engine, the demo and the
simulator.

Nothing is switched; the file ``simulated_power.json`` in the state folder remembers, per
host, whether it is on or off and since when::

    {"n1": {"power": "off", "since": 1700000000.0, "sleep_limit": 0}}

A host not in the file is on and ready. A host powered on is ``on`` (booting) for
``boot_delay`` seconds, then ``ready``; one powered off is ``on`` (shutting down) for
``shutdown_delay`` seconds, then ``off``, and one powered on while still shutting down boots
after its shutdown ends. Ramping records the sleep-state limit (4 down, 0 up) and is
immediate. The engine keeps a sleeping host's vnodes in state ``sleep``, so no job starts on
them: a simulated host that sleeps really is unavailable.

In a replay the platform says how long each host boots and shuts down: the simulator writes
``simulated_platform.json`` in the state folder, ``{"hosts": {"n1": {"boot": 300,
"shutdown": 60}}}``, and a host named there boots and shuts down in its seconds, not in
``boot_delay`` and ``shutdown_delay``. So the driver finds a host ready when the replay has
it up, never while it still boots (docs/simulator.md, Power and energy).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import Any

from pbsplug import clock as kernel_clock
from pbsplug import jsontext, safedirs

from .driver import OFF, ON, READY, Driver, DriverError, Log, quiet
from .state import FileMemo, file_identity, state_dir

STATE_FILE = "simulated_power.json"
#: Each host's boot and shutdown seconds, by the simulator's platform (a replay only).
PLATFORM_FILE = "simulated_platform.json"


def _platform_problem(data: Any) -> str | None:
    """What is wrong with the platform file's content, or None."""
    hosts = data.get("hosts") if isinstance(data, dict) else None
    if not isinstance(hosts, dict):
        return 'expected an object with "hosts", an object of host: delays'
    for host, entry in hosts.items():
        if not isinstance(entry, dict):
            return f"{host!r} is {json.dumps(entry)[:60]}, expected an object"
        for key in ("boot", "shutdown"):
            value = entry.get(key)
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value < 0:
                return f"{host!r}: \"{key}\" is {json.dumps(value)[:60]}, expected seconds " \
                       "(a number, 0 or more)"
    return None


def _record_problem(data: Any) -> str | None:
    """What is wrong with the file's content, or None."""
    if not isinstance(data, dict):
        return "expected an object of host: entry"
    for host, entry in data.items():
        if not isinstance(entry, dict):
            return f"{host!r} is {json.dumps(entry)[:60]}, expected an object"
        if entry.get("power") not in ("on", "off"):
            return f"{host!r}: \"power\" is {json.dumps(entry.get('power'))[:60]}, " \
                   "expected \"on\" or \"off\""
        since = entry.get("since")
        if isinstance(since, bool) or not isinstance(since, (int, float)) \
                or not math.isfinite(since):
            return f"{host!r}: \"since\" is {json.dumps(since)[:60]}, expected a number"
    return None


#: The hosts last read from each record, or written to it (`FileMemo`). A replay asks about
#: booting hosts at nearly every periodic run.
_seen = FileMemo()
#: The platform file's hosts as last read (`Simulated._delays`).
_platform_seen = FileMemo()


class Simulated(Driver):
    name = "simulated"

    def __init__(self, config: Mapping[str, Any], log: Log = quiet,
                 clock: Callable[[], float] | None = None):
        self.path = state_dir(config) / STATE_FILE
        self.platform_path = self.path.parent / PLATFORM_FILE
        self.boot_delay = float(config["boot_delay"])
        self.shutdown_delay = float(config["shutdown_delay"])
        self.log = log
        self.clock = clock or kernel_clock.now

    def _delays(self) -> Mapping[str, Mapping[str, float]]:
        """The platform's hosts with their boot and shutdown seconds (a replay's
        `PLATFORM_FILE`); {} without the file: every host takes `boot_delay` and
        `shutdown_delay`. A file that does not parse, or holds anything else, is a
        `DriverError` naming it: the driver would find hosts ready that the replay has
        booting."""
        path = self.platform_path
        try:
            identity = file_identity(path.stat())
            known = _platform_seen.known(path, identity)
            if known is not None:
                return known
            safedirs.check_folder(path.parent, "state_dir")
            data = jsontext.loads(safedirs.read_text(path), str(path))
        except FileNotFoundError:
            return {}
        except safedirs.UnsafeFolder as exc:
            raise DriverError(str(exc)) from None
        except ValueError as exc:
            raise DriverError(f"{path}: not the simulator's platform record "
                              f"({getattr(exc, 'why', exc)})") from None
        problem = _platform_problem(data)
        if problem:
            raise DriverError(f"{path}: not the simulator's platform record ({problem})")
        hosts = data["hosts"]
        _platform_seen.keep(path, identity, hosts)
        return hosts

    def _boot(self, delays: Mapping[str, Mapping[str, float]], host: str) -> float:
        entry = delays.get(host)
        return float(entry["boot"]) if entry is not None else self.boot_delay

    def _shutdown(self, delays: Mapping[str, Mapping[str, float]], host: str) -> float:
        entry = delays.get(host)
        return float(entry["shutdown"]) if entry is not None else self.shutdown_delay

    def hosts(self) -> dict[str, dict[str, Any]]:
        """The file's hosts (the caller's own copy). A file that does not parse, or holds
        anything but host entries as this driver writes them, is a `DriverError` naming
        it: a host the driver forgot would count as on and ready."""
        return {host: dict(entry) for host, entry in self._known().items()}

    def _known(self) -> Mapping[str, Mapping[str, Any]]:
        """`hosts`, read only: the record as last read or written, which nobody changes (a
        file read before and untouched since is not read again, `_seen`). A replay asks
        about booting hosts at nearly every periodic run, of a thousand hosts. The folder
        is checked when the file is read (or absent): what was read or written before
        through the checks, in a file untouched since, is what is there."""
        try:
            try:
                identity = file_identity(self.path.stat())
            except FileNotFoundError:
                safedirs.check_folder(self.path.parent, "state_dir")
                raise
            known = _seen.known(self.path, identity)
            if known is not None:
                return known
            safedirs.check_folder(self.path.parent, "state_dir")
            data = jsontext.loads(safedirs.read_text(self.path), str(self.path))
        except FileNotFoundError:
            return {}
        except safedirs.UnsafeFolder as exc:  # another user's hosts: never believed
            raise DriverError(str(exc)) from None
        except ValueError as exc:  # (jsontext's JsonError; read_text's UnicodeDecodeError)
            raise DriverError(f"{self.path}: not the simulated driver's JSON record "
                              f"({getattr(exc, 'why', exc)}); remove it to start "
                              "afresh") from None
        problem = _record_problem(data)
        if problem:
            raise DriverError(f"{self.path}: not the simulated driver's JSON record "
                              f"({problem}); remove it to start afresh")
        _seen.keep(self.path, identity, data)  # (the identity from before the read)
        return data

    def _save(self, hosts: dict[str, dict[str, Any]]) -> None:
        """Write `hosts`, kept as the record (the caller hands it over: nobody changes it
        from here on)."""
        try:
            safedirs.ensure_folder(self.path.parent, "state_dir")
        except safedirs.UnsafeFolder as exc:
            raise DriverError(str(exc)) from None
        safedirs.write_text(self.path, json.dumps(hosts, sort_keys=True))
        _seen.keep(self.path, file_identity(self.path.stat()), hosts)

    def _change(self, action: str, verb: str, hosts: list[str], **change: Any) -> None:
        self.log(action, f"launch: simulated {verb} {','.join(hosts)}")
        now = self.clock()
        known = dict(self._known())  # (the entries changed are copied, the others shared)
        delays = self._delays() if change.get("power") == "on" else {}
        for host in hosts:
            entry = known[host] = dict(known.get(host) or
                                       {"power": "on", "since": 0.0, "sleep_limit": 0})
            if change.get("power") == "on" and entry["power"] == "off":
                # A host still shutting down boots once it is down.
                entry.update(power="on", since=max(now, entry["since"] +
                                                   self._shutdown(delays, host)))
            elif change.get("power") == "off" and entry["power"] == "on":
                entry.update(power="off", since=now)
            if "sleep_limit" in change:
                entry["sleep_limit"] = change["sleep_limit"]
        self._save(known)
        self.log(action, "launch: finished")

    def power_off(self, hosts: list[str]) -> None:
        self._change("node_power_off", "node_off", hosts, power="off")

    def power_on(self, hosts: list[str]) -> None:
        self._change("node_power_on", "node_on", hosts, power="on")

    def ramp_down(self, hosts: list[str]) -> None:
        self._change("power_ramp_down", "set_sleep_state_limit 4", hosts, sleep_limit=4)

    def ramp_up(self, hosts: list[str]) -> None:
        self._change("power_ramp_up", "set_sleep_state_limit 0", hosts, sleep_limit=0)

    def status(self, hosts: list[str]) -> dict[str, str]:
        now = self.clock()
        known = self._known()
        delays = self._delays()
        out = {}
        for host in hosts:
            entry = known.get(host)
            if entry is None:
                out[host] = READY
            elif entry["power"] == "off":
                out[host] = OFF if now >= entry["since"] + self._shutdown(delays, host) else ON
            else:
                out[host] = READY if now >= entry["since"] + self._boot(delays, host) else ON
        return out

