"""``pbsplug power status``: each host's power, idle time, eligibility, and why it is or is not
a candidate, as the periodic hook saw them at its last run."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import typer

from pbsplug import PluginLoadError, clock, format_duration, plugin_config

from . import state


def _when(seconds: int) -> str:
    return datetime.fromtimestamp(seconds).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def _text(value: Any) -> str:
    """`value` as the terminal gets it: a control character (an escape sequence's start, a
    line break) shown escaped. The record may be another user's (Slurm's SlurmUser, an
    account that may be taken over, writes it and root reads it): as it was, it reached
    root's terminal (a title set, the screen cleared) or made a row of its own."""
    text = str(value)
    return text if text.isprintable() else "".join(
        c if c.isprintable() else repr(c)[1:-1] for c in text)


def status_lines(record: dict[str, Any], now: int) -> list[str]:
    """The record as text: a heading, then one row per host. A host last used after the
    run's time (a clock stepped back, or a host's clock ahead) was not idle then: its idle
    time shows as 00:00:00 with a mark, and a last line says by how much it was ahead. A run
    ahead of this host's clock says so in the heading, not "0 s ago"."""
    age = now - int(record["time"])
    mode = {"on_off": "power on/off", "ramp": "ramp rate"}.get(record.get("mode"), "off")
    lines = [f"{mode} with the {_text(record.get('driver'))} driver; as of the periodic run "
             f"at {_when(int(record['time']))} "
             + (f"({age} s ago)" if age >= 0 else
                f"({-age} s ahead of this host's clock: was a clock stepped back?)")]
    rows = [("host", "power", "idle", "eligible", "why")]
    ahead = 0
    for host, entry in sorted(record["hosts"].items()):
        idle = entry.get("idle")
        if idle is None:
            shown = "never used"
        elif idle < 0:
            shown, ahead = "00:00:00*", max(ahead, -int(idle))
        else:
            shown = format_duration(int(idle))
        rows.append((_text(host), _text(entry["power"]), shown,
                     "yes" if entry["eligible"] else "no", _text(entry["why"])))
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    for row in rows:
        lines.append("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False))
                     + "  " + row[4])
    if ahead:
        lines.append(f"* last used after the run's time (by up to {format_duration(ahead)}), "
                     "so not idle then: was a clock stepped back?")
    return lines


def register(cli: typer.Typer) -> None:
    @cli.command()
    def status(as_json: bool = typer.Option(False, "--json", help="the record as JSON")):
        """Each host's power state, idle time and eligibility, and why it is or is not a
        candidate to go down or to wake, as of the hook's last run."""
        try:
            config = plugin_config("power")
        except PluginLoadError as exc:
            typer.echo(f"pbsplug power: {exc}", err=True)
            raise typer.Exit(1) from None
        try:
            # (the hook's records, which may be another user's: Slurm's SlurmUser)
            directory, owner = state.records_dir(config)
            record = state.status(directory, owner)
            booting = state.booting(directory, owner)
        except OSError as exc:
            typer.echo(f"pbsplug power: {exc}", err=True)
            raise typer.Exit(1) from None
        if record is None:
            typer.echo(f"pbsplug power: no periodic run is recorded in {directory}: is the "
                       "power hook enabled (qmgr -c 'set hook power enabled = true'), with "
                       "power_on_off_enable or power_ramp_rate_enable?", err=True)
            raise typer.Exit(1)
        if as_json:
            typer.echo(json.dumps({**record, "booting": booting}, indent=1, sort_keys=True))
        else:
            typer.echo("\n".join(status_lines(record, int(clock.now()))))
