"""Cray XC's ``capmc``: node power on/off, power status and sleep-state limits, as a driver.

``capmc`` is a command-line client. Each call is ``capmc <verb> --nids <list>`` with a
compact nid list (``24-25,30``). It prints one JSON object, where ``e`` is 0 and ``err_msg``
is ``"Success"`` when the call worked; anything else is a failure. ``node_status`` adds
lists of nids by state: ``on``, ``off``, ``ready`` (booted and usable) and others.

The command is run with an argument list, never through a shell, so no host or nid can
become shell syntax.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pbsplug import jsontext

from .driver import OFF, ON, READY, UNKNOWN, Driver, DriverError, Log, quiet, run_command

DEFAULT_CAPMC = "/opt/cray/capmc/default/bin/capmc"
#: The sleep-state limits the seed's log lines show: deep sleep (C6) down, C1 up.
RAMP_DOWN_LIMIT = 4
RAMP_UP_LIMIT = 0


def nid_list(nids: Iterable[int]) -> str:
    """capmc's compact list: [24, 25, 30] -> ``24-25,30``."""
    ordered = sorted(set(nids))
    parts: list[str] = []
    start = prev = None
    for nid in ordered:
        if prev is not None and nid == prev + 1:
            prev = nid
            continue
        if start is not None:
            parts.append(f"{start}-{prev}" if prev != start else str(start))
        start = prev = nid
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else str(start))
    return ",".join(parts)


def parse_nid_list(text: str) -> list[int]:
    """``24-25,30`` -> [24, 25, 30]; `ValueError` for anything else."""
    nids: list[int] = []
    for part in text.split(","):
        low, sep, high = part.strip().partition("-")
        if not (low.isascii() and low.isdigit()) or (
                sep and not (high.isascii() and high.isdigit())):
            raise ValueError(f"{text!r} is not a nid list such as 24-25,30")
        nids.extend(range(int(low), int(high) + 1) if sep else [int(low)])
    return nids


class Capmc(Driver):
    """The capmc driver for the hosts in `nids` (host -> Cray nid)."""

    name = "capmc"

    def __init__(self, nids: Mapping[str, int], capmc: str = DEFAULT_CAPMC,
                 timeout: float = 120.0, log: Log = quiet):
        self.nids = dict(nids)
        self.capmc = capmc
        self.timeout = timeout
        self.log = log

    def problem(self, host: str) -> str | None:
        if host in self.nids:
            return None
        return "capmc knows no Cray nid for it (resources_available.PBScraynid, or nids)"

    def _nids(self, hosts: Iterable[str]) -> str:
        unknown = sorted(h for h in hosts if h not in self.nids)
        if unknown:
            raise DriverError(f"capmc: no Cray nid is known for {', '.join(unknown)}")
        return nid_list(self.nids[h] for h in hosts)

    def run(self, action: str, verb: str, hosts: Iterable[str], *extra: str) -> dict:
        """One capmc call; its JSON answer, or `DriverError`."""
        argv = [self.capmc, verb, "--nids", self._nids(hosts), *extra]
        command = " ".join(argv)
        done = run_command(argv, action, self.log, self.timeout, finished=False)
        try:
            answer = jsontext.loads(done.stdout, "capmc's answer")
        except jsontext.JsonError:  # (the command and its answer are named below)
            answer = None
        if not isinstance(answer, dict):
            why = (done.stderr.strip() or done.stdout.strip() or "no output")[:500]
            raise DriverError(f"{command}: exit status {done.returncode}, not capmc's JSON: "
                              f"{why}")
        if answer.get("e") != 0 or answer.get("err_msg") != "Success":
            raise DriverError(f"{command}: e={answer.get('e')!r} "
                              f"err_msg={answer.get('err_msg')!r}")
        self.log(action, "launch: finished")
        return answer

    def power_off(self, hosts: list[str]) -> None:
        self.run("node_power_off", "node_off", hosts)

    def power_on(self, hosts: list[str]) -> None:
        self.run("node_power_on", "node_on", hosts)

    def ramp_down(self, hosts: list[str]) -> None:
        self.run("power_ramp_down", "set_sleep_state_limit", hosts, "--limit",
                 str(RAMP_DOWN_LIMIT))

    def ramp_up(self, hosts: list[str]) -> None:
        self.run("power_ramp_up", "set_sleep_state_limit", hosts, "--limit",
                 str(RAMP_UP_LIMIT))

    def status(self, hosts: list[str]) -> dict[str, str]:
        """Each host's power: ``ready`` (booted), ``on`` (booting) or ``off``."""
        answer = self.run("node_power_status", "node_status", hosts)
        by_nid: dict[int, str] = {}
        for state in (OFF, ON, READY):  # ready wins over on
            for nid in answer.get(state) or ():
                by_nid[int(nid)] = state
        return {h: by_nid.get(self.nids[h], UNKNOWN) for h in hosts}
