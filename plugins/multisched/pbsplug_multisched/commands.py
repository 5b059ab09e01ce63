"""``pbsplug multisched status``: every scheduler with its partitions, state, pid, last cycle
and jobs considered. The schedulers come from ``qmgr -c "list sched"`` (pbsplug's or PBS's:
the output is the same), the pid from ``<sched_priv>/sched.lock``, the cycles from the
schedulers' own records."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from pbsplug import PluginLoadError, clock, plugin_config
from pbsplug.safedirs import UnsafeFolder

from .records import last_cycles


class StatusError(Exception):
    """The status cannot be had; the message says why."""


def parse_list(text: str) -> dict[str, dict[str, str]]:
    """qmgr's ``list sched`` output: ``Sched NAME`` then ``    attr = value`` lines."""
    out: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    for line in text.splitlines():
        if line.startswith("Sched "):
            current = out.setdefault(line[6:].strip(), {})
        elif current is not None and " = " in line:
            key, _, value = line.strip().partition(" = ")
            current[key] = value
    return out


def qmgr_command(qmgr: list[str]) -> list[str]:
    """`qmgr` as it is run. The default's ``pbsplug`` is the one of this environment (beside
    its interpreter), so the status works from a pbsplug that is not on PATH (a virtual
    environment not activated), and never asks another installation's server."""
    own = Path(sys.executable).with_name("pbsplug")
    if qmgr[:1] == ["pbsplug"] and own.is_file():
        return [str(own), *qmgr[1:]]
    return qmgr


def schedulers(qmgr: list[str]) -> dict[str, dict[str, str]]:
    qmgr = qmgr_command(qmgr)
    try:
        done = subprocess.run([*qmgr, "-c", "list sched"], capture_output=True, text=True,
                              timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise StatusError(f"cannot run {' '.join(qmgr)}: {exc}") from None
    if done.returncode != 0:
        raise StatusError(f"{' '.join(qmgr)} -c 'list sched' failed: "
                          f"{(done.stderr or done.stdout).strip()}")
    return parse_list(done.stdout)


def status_record(qmgr: list[str], config: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        cycles = last_cycles(config)
    except UnsafeFolder as exc:  # records anyone could have forged: none is shown
        raise StatusError(str(exc)) from None
    rows = []
    for name, attrs in schedulers(qmgr).items():
        pid = None
        lock = Path(attrs.get("sched_priv", "")) / "sched.lock"
        if name != "default" and attrs.get("state") != "down":
            try:
                pid = int(lock.read_text())
            except (OSError, ValueError):
                pid = None
        cycle = cycles.get(name, {})
        rows.append({"sched": name, "partitions": attrs.get("partition", ""),
                     "state": attrs.get("state", ""), "scheduling": attrs.get("scheduling"),
                     "pid": pid if name != "default" else "server",
                     "last_cycle": cycle.get("started"),
                     "jobs_considered": cycle.get("jobs_considered"),
                     "jobs_started": cycle.get("jobs_started"),
                     "comment": attrs.get("comment", "")})
    return rows


def status_lines(rows: list[dict[str, Any]], now: float) -> list[str]:
    table = [("sched", "partitions", "state", "pid", "last cycle", "considered", "comment")]
    for row in rows:
        when = "-" if row["last_cycle"] is None else (
            f"{datetime.fromtimestamp(row['last_cycle']).strftime('%H:%M:%S')} "
            f"({max(0, int(now - row['last_cycle']))} s ago)")
        considered = "-" if row["jobs_considered"] is None else str(row["jobs_considered"])
        table.append((row["sched"], row["partitions"] or ("(unpartitioned)" if row["sched"]
                                                          == "default" else "none"),
                      row["state"], str(row["pid"] or "-"), when, considered,
                      row["comment"]))
    widths = [max(len(r[i]) for r in table) for i in range(6)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=False)) + "  " + r[6]
            for r in table]


def register(cli: typer.Typer) -> None:
    @cli.command()
    def status(as_json: bool = typer.Option(False, "--json", help="the status as JSON")):
        """Every scheduler: its partitions, state, pid, last cycle and jobs considered."""
        try:
            config = plugin_config("multisched")
            rows = status_record(list(config["qmgr"]), config)
        except (PluginLoadError, StatusError) as exc:
            typer.echo(f"pbsplug multisched: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            typer.echo(json.dumps(rows, indent=1))
        else:
            typer.echo("\n".join(status_lines(rows, clock.now())).rstrip())
