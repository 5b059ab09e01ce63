"""``pbsplug cpuset status``: this host's free-node mask, each job's cpuset with its CPUs and
memory nodes, stuck cpusets with their age, and orphans, read from the cgroup tree itself and
the hook's record."""

from __future__ import annotations

import json
from typing import Any

import typer

from pbsplug import PluginLoadError, clock, format_duration, plugin_config

from .cgroupfs import CgroupError
from .host import ORPHAN, Host, HostError
from .nodemask import decode_mask, format_list


def status_record(host: Host, now: float) -> dict[str, Any]:
    """What the command shows, as plain data."""
    data = host.load()
    mask = host.free_mask(data)
    free_nodes = decode_mask(mask) if mask else []
    numbers = {number: vnode for vnode, (number, _) in data["nodes"].items()}
    cpusets = []
    for name in host.cpusets.children(host.prefix):
        try:
            cpus, mems = host.cpusets.read(host.path(name))
        except CgroupError:
            continue  # removed by the hooks while we looked
        since = data["stuck"].get(name)
        cpusets.append({
            "name": name, "path": host.path(name), "cpus": format_list(cpus),
            "mems": format_list(mems), "vnodes": sorted(data["jobs"].get(name, {})),
            "processes": len(host.cpusets.pids(host.path(name))),
            "orphan": name.endswith(ORPHAN),
            "stuck_for": None if since is None else int(now - since)})
    return {"root": str(host.cpusets.root), "version": host.cpusets.version,
            "emulated": host.cpusets.emulated, "prefix": host.prefix,
            "free_mask": mask, "free_nodes": format_list(free_nodes),
            "free_vnodes": [numbers[n] for n in free_nodes if n in numbers],
            "cpusets": cpusets, "offline": sorted(data["offlined"])}


def status_lines(record: dict[str, Any]) -> list[str]:
    kind = f"cgroup v{record['version']}" + (" (emulated)" if record["emulated"] else "")
    lines = [f"{kind} cpusets under {record['root']}/{record['prefix']}",
             f"free-node mask: {record['free_mask'] or '-'} (nodes "
             f"{record['free_nodes'] or 'none'})"]
    rows = [("cpuset", "cpus", "mems", "vnodes", "procs", "state")]
    for entry in record["cpusets"]:
        state = "orphan" if entry["orphan"] else "job"
        if entry["stuck_for"] is not None:
            state = f"stuck for {format_duration(entry['stuck_for'])}" + (
                " (orphan)" if entry["orphan"] else "")
        rows.append((entry["name"], entry["cpus"] or "-", entry["mems"] or "-",
                     ",".join(entry["vnodes"]) or "-", str(entry["processes"]), state))
    if len(rows) == 1:
        lines.append("no cpusets")
    else:
        widths = [max(len(row[i]) for row in rows) for i in range(5)]
        for row in rows:
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False))
                         + "  " + row[5])
    if record["offline"]:
        lines.append("offline for stuck cpusets: " + ", ".join(record["offline"]))
    return lines


def register(cli: typer.Typer) -> None:
    @cli.command()
    def status(as_json: bool = typer.Option(False, "--json", help="the status as JSON")):
        """This host's free-node mask, job cpusets (CPUs, memory nodes), stuck cpusets with
        their age, and orphans."""
        try:
            host = Host(plugin_config("cpuset"))
            record = status_record(host, clock.now())
        except (PluginLoadError, HostError, CgroupError) as exc:
            typer.echo(f"pbsplug cpuset: {exc}", err=True)
            raise typer.Exit(1) from None
        if as_json:
            typer.echo(json.dumps(record, indent=1, sort_keys=True))
        else:
            typer.echo("\n".join(status_lines(record)))
