"""``pbsplug demo``: the whole system on this machine in under a minute.

A throw-away engine home; four vnodes defined with qmgr; every installed plugin enabled with
its defaults and what its `demo_setup` hook asks for; a small mixed workload of real jobs
(short ones, a two-chunk vscatter job, one that overruns its walltime, one that fails, one
held then released, one deleted while it runs); live progress; and a summary of what ran,
what each plugin's hooks did and what each plugin's `demo_report` says. It stops its server
and leaves no process behind.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..plugins import PluginSet, installed_entry_points
from .api import start_background
from .client import Client
from .home import Home

if TYPE_CHECKING:  # (rich is imported where it is used)
    from rich.console import Console

VNODES = ("demo1", "demo2", "demo3", "demo4")
TIMEOUT = 60.0


def _workload(work: Path) -> list[dict[str, Any]]:
    def job(name: str, command: str, **attrs: Any) -> dict[str, Any]:
        res = attrs.pop("Resource_List", {})
        res.setdefault("walltime", "00:01:00")
        return {"name": name, "argv": ["/bin/sh", "-c", command], "attrs": {
            "Job_Name": name, "Resource_List": res,
            "Variable_List": {"PBS_O_WORKDIR": str(work), "PBS_O_PATH": os.environ.get(
                "PATH", "/usr/bin:/bin")}, **attrs}}

    return [
        job("hello", "echo hello from $PBS_JOBID on $(cat $PBS_NODEFILE); sleep 1"),
        *(job(f"short{i}", f"sleep {1 + i % 2}") for i in range(4)),
        job("vscatter", "sleep 2", Resource_List={"select": "2:ncpus=1",
                                                  "place": "vscatter:excl"}),
        job("overtime", "sleep 30", Resource_List={"walltime": "00:00:02"}),
        job("fails", "echo about to fail >&2; exit 3"),
        job("held", "sleep 1", Hold_Types="u"),
        job("deleted", "sleep 30"),
    ]


class PluginDemo:
    """The plugins' part of the demo (`demo_setup`, `demo_report`): each plugin prepares
    what it needs on this machine and adds its settings to the demo's site config, then
    reports what it did and stops what it started."""

    def __init__(self, home: Home, workdir: Path, console: Console,
                 plugins: PluginSet | None = None):
        self.home = home
        self.workdir = workdir
        self.console = console
        self.plugins = plugins  # default: the installed plugins the site enables
        self.started: list[tuple[str, Any]] = []  # (plugin, its demo_report hookimpl)

    def setup(self) -> None:
        import tomlkit

        from ..plugins import load_plugins
        from ..siteconfig import load_site

        if self.plugins is None:
            self.plugins = load_plugins(load_site(self.home.site), report=False)
        reports = {i.plugin_name: i for i in self.plugins.hook.demo_report.get_hookimpls()}
        document = tomlkit.parse(self.home.site.read_text())
        for impl in self.plugins.hook.demo_setup.get_hookimpls():
            name = impl.plugin_name
            workdir = self.workdir / name
            workdir.mkdir(parents=True, exist_ok=True)
            try:
                settings = impl.function(workdir=workdir) or {}
            except Exception as exc:  # one plugin's demo must not stop the others'
                self.console.print(f"[red]{name}: demo_setup failed:[/] {exc}")
                continue
            if name in reports:
                self.started.append((name, reports[name]))
            if not isinstance(settings, Mapping):  # (its settings.items() stopped the demo)
                self.console.print(f"[red]{name}: demo_setup returned "
                                   f"{type(settings).__name__}, expected a table of settings "
                                   "or None[/]")
                continue
            if "plugins" not in document:
                document["plugins"] = tomlkit.table(is_super_table=True)
            if name not in document["plugins"]:
                document["plugins"][name] = {"enabled": True}
            for key, value in settings.items():
                document["plugins"][name][key] = value
        self.home.site.write_text(tomlkit.dumps(document))

    def report(self) -> None:
        while self.started:
            name, impl = self.started.pop(0)
            try:
                lines = impl.function(workdir=self.workdir / name) or []
            except Exception as exc:
                lines = [f"demo_report failed: {exc}"]
            if not isinstance(lines, list):  # (else the reports after it were never made)
                lines = [f"demo_report returned {type(lines).__name__}, expected a list of "
                         "lines or None"]
            for line in lines:
                self.console.print(f"{name}: {line}")


def run_demo(keep: bool = False, console: Console | None = None) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    console = console or Console()
    root = Path(tempfile.mkdtemp(prefix="pbsplug-demo-", dir="/tmp"))
    root.chmod(0o755)
    home = Home(root)
    work = root / "work"
    work.mkdir()
    plugins = sorted({ep.name for ep in installed_entry_points()})
    home.site.write_text("".join(f"[plugins.{n}]\nenabled = true\n\n" for n in plugins))
    console.print(f"[bold]pbsplug demo[/] in {root}")
    console.print("plugins enabled: " + (", ".join(plugins) if plugins else
                                         "none installed (pip install a pbsplug-<name> "
                                         "plugin, then run the demo again)"))
    demo = PluginDemo(home, root / "plugins", console)
    pid = None
    unfinished: list[str] = []
    try:
        demo.setup()
        pid = start_background(home)
        client = Client(home)
        old = client("stat_nodes")
        text = "".join(f"create node {n} resources_available.ncpus = 1, "
                       f"resources_available.mem = 1gb\n" for n in VNODES)
        text += "".join(f"delete node {n}\n" for n in old)
        answer = client("qmgr", text=text)
        if answer.get("errors"):
            raise RuntimeError("qmgr: " + " ".join(answer["errors"]))
        console.print(f"server pid {pid}; vnodes {', '.join(VNODES)} (1 ncpus each)")
        ids = {}
        for spec in _workload(work):
            ids[client("submit", attrs=spec["attrs"], argv=spec["argv"])] = spec["name"]
        by_name = {name: job_id for job_id, name in ids.items()}
        released = deleted = False
        started = time.monotonic()

        def table() -> Table:
            jobs = client("stat_jobs", history=True)
            t = Table(title=f"jobs ({time.monotonic() - started:4.1f} s)")
            for col in ("Job id", "Name", "S", "Exit", "exec_vnode / comment"):
                t.add_column(col)
            for job_id, name in ids.items():
                a = jobs.get(job_id, {})
                t.add_row(job_id, name, a.get("job_state", "?"),
                          str(a.get("Exit_status", "")),
                          a.get("exec_vnode") or a.get("comment") or "")
            return t

        with Live(table(), console=console, refresh_per_second=4) as live:
            while time.monotonic() - started < TIMEOUT:
                jobs = client("stat_jobs", history=True)
                if not released and time.monotonic() - started > 2:
                    client("release", ids=[by_name["held"]])
                    released = True
                if not deleted and jobs[by_name["deleted"]]["job_state"] == "R":
                    client("delete", ids=[by_name["deleted"]])
                    deleted = True
                live.update(table())
                if all(jobs[j]["job_state"] == "F" for j in ids):
                    break
                time.sleep(0.25)
        console.print()
        jobs = client("stat_jobs", history=True)
        unfinished = [j for j in ids if jobs[j]["job_state"] != "F"]
        if unfinished:  # leave no process behind
            console.print(f"[red]not finished within {TIMEOUT:g} s:[/] {', '.join(unfinished)}")
            client("delete", ids=unfinished, force=True)
            deadline = time.monotonic() + 15
            while time.monotonic() < deadline and any(
                    client("stat_jobs", ids=[j], history=True)[j]["job_state"] != "F"
                    for j in unfinished):
                time.sleep(0.2)
            jobs = client("stat_jobs", history=True)
        _summary(console, ids, jobs, home, plugins)
        demo.report()
        client("shutdown")
    finally:
        demo.report()  # stops what the plugins started, if the demo failed part-way
        if pid is not None:
            _stop(home, pid)
        if not keep:
            shutil.rmtree(root, ignore_errors=True)
        else:
            console.print(f"kept {root} (PBSPLUG_HOME={root} pbsplug qstat -x)")
    return 1 if unfinished else 0


def _summary(console: Console, ids: dict[str, str], jobs: dict[str, dict[str, Any]],
             home: Home, plugins: list[str]) -> None:
    from rich.table import Table

    t = Table(title="what ran")
    for col in ("Name", "Exit_status", "walltime", "how it ended"):
        t.add_column(col)
    for job_id, name in ids.items():
        a = jobs[job_id]
        t.add_row(name, str(a.get("Exit_status", "")),
                  (a.get("resources_used") or {}).get("walltime", ""), a.get("comment", ""))
    console.print(t)
    runs: Counter[tuple[str, str]] = Counter()
    outcomes: Counter[tuple[str, str]] = Counter()
    if home.trace.exists():
        for line in home.trace.read_text().splitlines():
            run = json.loads(line)
            runs[(run["hook"], run["event"])] += 1
            outcomes[(run["hook"], run["outcome"])] += 1
    if not plugins:
        console.print("no plugin ran: none is installed")
        return
    p = Table(title="what each plugin did (hook runs)")
    for col in ("plugin", "event", "runs"):
        p.add_column(col)
    for (hook, event), n in sorted(runs.items()):
        p.add_row(hook, event, str(n))
    console.print(p)
    for (hook, outcome), n in sorted(outcomes.items()):
        if outcome != "accept":
            console.print(f"{hook}: {n} run(s) ended in {outcome}")


def _stop(home: Home, pid: int) -> None:
    deadline = time.monotonic() + 10
    while home.server_pid() is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    if home.server_pid() is not None:
        os.kill(pid, 9)
