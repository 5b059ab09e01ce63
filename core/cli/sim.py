"""``pbsplug sim ...``: replay a workload trace through the site's policy and plugins
(`pbsplug.sim`)."""

from __future__ import annotations

import functools
import re
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from . import CliError
from .options import cli_count

if TYPE_CHECKING:  # (for the annotations only)
    from ..plugins import PluginSet
    from ..sim.machine import Machine
    from ..sim.traces import Trace
    from ..siteconfig import SiteConfig

_FORMATS = ("swf", "pbs", "sacct")


def _site_and_plugins(site: Path | None, root_site: Path | None
                      ) -> tuple[SiteConfig | None, PluginSet | None]:
    """The site config and its enabled plugins (None, None without a site file)."""
    from ..plugins import load_plugins
    from ..siteconfig import load_site, register_section

    register_section("sim")
    path = site or root_site
    if path is None:
        return None, None
    loaded = load_site(path)
    # (private_state: a plugin is never configured with the site's state folders, which a
    # replay sets aside: its configure may make or open the folder)
    plugins = load_plugins(loaded, which="enabled", report=False, private_state=True)
    # A replay without a plugin the site enables would answer another question: each one
    # that cannot load (or is not installed) is an error, not a warning.
    problems = [f"plugin '{r.name}': {r.error}" for r in plugins.failed]
    problems += [f"{loaded.path}: [plugins.{name}]: no installed plugin is named '{name}' "
                 f"(installed: {', '.join(plugins.installed) or 'none'})"
                 for name in loaded.plugins
                 if name not in plugins.records and loaded.is_enabled(name)]
    if problems:
        raise CliError("\n".join(problems))
    return loaded, plugins


def _server_attrs(table: Any, where: str) -> dict[str, Any] | None:
    """``[sim.server]``, checked as ``qmgr -c "set server ..."`` checks each attribute (the
    same attribute table); a resource attribute is a table of resources."""
    from ..engine.qmgr import AttrOp, QmgrError, convert, definitions, lookup
    from ..scheduler.instances import POLICY_KEYS

    if table is None:
        return None
    if not isinstance(table, dict):
        raise CliError(f"{where}: {table!r}: expected a table of server attributes")
    defs = definitions("server")
    out: dict[str, Any] = {}
    for name, value in table.items():
        defn = lookup(defs, name)
        if defn is None and name in POLICY_KEYS:
            raise CliError(f"{where}.{name}: a scheduler policy setting, not a server "
                           "attribute: set it in [sim.scheduler]")
        if defn is not None and defn.read_only:
            raise CliError(f"{where}.{name}: the server sets it; it cannot be set")
        try:
            if isinstance(value, dict):
                converted = {res: convert("server", AttrOp(name, str(res), "=", _text(v)),
                                          defs) for res, v in value.items()}
            else:
                converted = convert("server", AttrOp(name, None, "=", _text(value)), defs)
        except QmgrError as exc:
            raise CliError(f"{where}.{name} = {value!r}: {exc}") from None
        out[defn.name if defn is not None else name] = converted  # qmgr's spelling
    return out


def _text(value: Any) -> str:
    """A TOML value as qmgr's text for it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(_text, value))
    return str(value)


def _machine(trace: Trace | None, platform: Path | None, nodes: int | None,
             cpus_per_node: int | None) -> Machine:
    from ..sim.machine import from_header, load_platform, uniform

    if platform is not None:
        if nodes is not None or cpus_per_node is not None:
            raise CliError("--platform describes the machine: leave out --nodes and "
                           "--cpus-per-node")
        return load_platform(platform)
    if nodes is not None or cpus_per_node is not None:
        if nodes is None:
            raise CliError("--cpus-per-node needs --nodes")
        return uniform(nodes, 1 if cpus_per_node is None else cpus_per_node,
                       "--nodes/--cpus-per-node")
    assert trace is not None  # (None only with --platform or --nodes: returned above)
    return from_header(trace.info.max_nodes, trace.info.max_procs, str(trace.info.path))


class _Progress:
    """One stderr line, rewritten at most every half second: simulated time, jobs, jobs/s."""

    def __init__(self, enabled: bool, label: str = ""):
        self.enabled = enabled and sys.stderr.isatty()
        self.label = label
        self.t0 = time.perf_counter()
        self.shown = 0.0

    def __call__(self, simulated: float, jobs: int, queued: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if now - self.shown < 0.5:
            return
        self.shown = now
        rate = jobs / max(now - self.t0, 1e-9)
        days = simulated / 86400
        sys.stderr.write(f"\r{self.label}simulated {days:8.1f} days  {jobs:>9,} jobs  "
                         f"{queued:>6,} queued  {rate:>9,.0f} jobs/s ")
        sys.stderr.flush()

    def done(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the replay is. A KeyboardInterrupt, as Ctrl-C is: a hook run in
    the replay's own process ends as a hook's error when it raises SystemExit (sys.exit), so
    a SystemExit raised by the signal inside a hook was taken for the hook's, and the replay
    went on; the runner lets a KeyboardInterrupt through."""


class _TermIsExit:
    """While a replay runs from the command line, SIGTERM (a batch system's time limit, a
    `kill`) ends it as Ctrl-C does, through its clean-up (the work folder is removed), and
    the command exits with 128 + SIGTERM."""

    def __enter__(self) -> None:
        import signal

        self.signal = signal
        self.saved = signal.signal(signal.SIGTERM, self._raise)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise _Terminated(signum)

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        self.signal.signal(self.signal.SIGTERM, self.saved)
        if isinstance(exc, _Terminated):
            raise SystemExit(128 + exc.args[0]) from None


def _site_setup(site: Path | None, root_site: Path | None, policy: str,
                partitions: Any = None
                ) -> tuple[SiteConfig | None, PluginSet | None, dict[str, Any], dict[str, Any],
                           dict[str, Any] | None]:
    """The site's part of a run, checked before anything runs: (the site config, its
    plugins, its [sim] table, the policy settings, the server attributes). `partitions`,
    called when the site has sched objects, gives the machine's partitions, which their
    partitions must be (else the simulator checks that when the run starts)."""
    from ..sim.engine import SimError, policy_settings, sched_objects

    loaded, plugins = _site_and_plugins(site, root_site)
    table = (loaded.sections.get("sim") or {}) if loaded is not None else {}
    where = f"{loaded.path}: " if loaded is not None else ""
    if not isinstance(table, dict):
        raise CliError(f"{where}[sim]: expected a table")
    unknown = set(table) - {"scheduler", "server", "sched"}
    if unknown:
        raise CliError(f"{where}[sim].{sorted(unknown)[0]}: unknown key; expected "
                       "scheduler, server or sched")
    try:
        settings = policy_settings(policy, table.get("scheduler"))
        sched_objects(table.get("sched") or {}, settings,
                      partitions() if partitions is not None and table.get("sched") else None)
    except SimError as exc:
        raise CliError(f"{where}{exc}" if str(exc).startswith("[sim.") else str(exc)
                       ) from None
    server_attrs = _server_attrs(table.get("server"), f"{where}[sim.server]")
    return loaded, plugins, table, settings, server_attrs


def _machine_partitions(trace_path: Path, fmt: str | None, platform: Path | None,
                        nodes: int | None, cpus_per_node: int | None) -> set[str]:
    """The partitions of the machine a run replays on (its hosts'), for `compare` to check
    both sites' sched objects before either run."""
    from ..sim.machine import PlatformError
    from ..sim.traces import TraceError, open_trace

    try:
        trace = open_trace(trace_path, fmt) if platform is None and nodes is None and \
            cpus_per_node is None else None
        machine = _machine(trace, platform, nodes, cpus_per_node)
    except (PlatformError, TraceError) as exc:
        raise CliError(str(exc)) from None
    return {host.partition for host in machine.hosts if host.partition}


def simulate(trace_path: Path, out: Path, *, site: Path | None, root_site: Path | None,
             platform: Path | None, nodes: int | None, cpus_per_node: int | None,
             fmt: str | None, skip_bad: bool, limit: int | None, policy: str,
             plots: bool = True, progress: bool = True, label: str = "") -> dict[str, Any]:
    """One run into `out`; returns what the CLI prints."""
    import itertools

    from ..sim.engine import SimError, Simulator, replay_home
    from ..sim.machine import PlatformError
    from ..sim.output import OutputError, ResultWriter
    from ..sim.traces import TraceError, open_trace

    if fmt is not None and fmt not in _FORMATS:
        raise CliError(f"--format {fmt!r}: expected one of {', '.join(_FORMATS)}")
    if limit is not None and limit < 1:
        raise CliError(f"--limit {limit}: expected at least 1")
    # The replay's work folder is the home before the plugins load: a configure that reads
    # its empty state folder as <home>/hooks/tmp was given the live home's (the folder
    # became the home only when the run started). SIGTERM removes it from then on.
    with _TermIsExit(), replay_home() as workdir:
        loaded, plugins, table, settings, server_attrs = _site_setup(site, root_site, policy)
        try:
            trace = open_trace(trace_path, fmt, skip_bad=skip_bad)
            machine = _machine(trace, platform, nodes, cpus_per_node)
            sink = ResultWriter(out, cpus=machine.total_cpus, hosts=len(machine.hosts),
                                plots=plots)
            bar = _Progress(progress, label)
            sim = Simulator(machine, sink, plugins=plugins, policy=settings,
                            server_attrs=server_attrs, progress=bar,
                            scheds=table.get("sched"), workdir=workdir)
            jobs = iter(trace) if limit is None else itertools.islice(trace, limit)
            try:
                summary = sim.run(jobs, bad=trace.bad_job)
            finally:
                bar.done()
        except SimError as exc:
            # A site's [sim.*] table (or the sched objects it makes) at fault: name the file.
            from_site = loaded is not None and (str(exc).startswith("[sim.") or (
                str(exc).startswith("scheduler setup:") and table.get("sched")))
            raise CliError(f"{loaded.path}: {exc}" if from_site and loaded is not None
                           else str(exc)) from None
        except (PlatformError, TraceError, OutputError) as exc:
            raise CliError(str(exc)) from None
    return {"machine": machine.describe(), "summary": summary, "trace": trace,
            "metrics": sink.metrics() if hasattr(sink, "metrics") else {},
            "schedulers": [(s.name, tuple(sorted(s.partitions))) for s in sim.schedulers]}


def _out_dir(text: str) -> Path:
    """--out as a folder: not empty (Path('') is the current directory, so an empty --out,
    an unset variable in a script, wrote every result there)."""
    if not text:
        raise CliError(f"--out {text!r}: expected a directory (give --out . for the current "
                       "one)")
    return Path(text)


def _report(result: dict[str, Any], out: Path) -> None:
    summary = result["summary"]
    trace = result["trace"]
    typer.echo(f"machine: {result['machine']}")
    typer.echo(f"jobs: {summary.jobs:,} finished, {summary.rejected:,} rejected, "
               f"{summary.killed:,} killed at walltime; {summary.cycles:,} scheduling cycles "
               f"({summary.cycles_skipped:,} skipped: nothing could start)")
    from ..sim.output import rejected_reasons

    for reason, count in rejected_reasons(result.get("metrics") or {}):
        typer.echo(f"rejected: {count:,} job{'' if count == 1 else 's'}: {reason}")
    skipped = getattr(trace, "skipped", 0)
    if skipped:
        typer.echo(f"trace: {skipped:,} malformed lines skipped (--skip-bad); the first:")
        for reason in getattr(trace, "skip_reasons", ()):
            typer.echo(f"  {reason}")
    for reason, count in sorted((getattr(trace, "dropped", None) or {}).items()):
        typer.echo(f"trace: {count:,} records dropped: {reason}")
    simulated = summary.end - summary.start
    rate = (summary.jobs + summary.rejected) / summary.wall if summary.wall else 0.0
    typer.echo(f"time: {simulated / 86400:,.1f} days simulated in {summary.wall:,.2f} s "
               f"({rate:,.0f} jobs/s)")
    scheds = result.get("schedulers") or []
    if len(scheds) > 1:
        typer.echo("schedulers: " + "; ".join(
            f"{name} ({', '.join(parts)})" if parts else
            f"{name} ({'what no other owns' if name == 'default' else 'no partition'})"
            for name, parts in scheds))
    lines = summary.hooks.lines()
    typer.echo("hooks: none enabled" if not lines else "hooks:")
    for line in lines:
        typer.echo(f"  {line}")
    typer.echo(f"results: {out}")


def sim_app() -> typer.Typer:
    app = typer.Typer(help="Replay a workload trace through the site's policy and plugins "
                           "on a virtual clock.", no_args_is_help=True, rich_markup_mode=None)

    @app.command("run")
    def run(ctx: typer.Context,
            trace: Path = typer.Argument(..., help="SWF (.swf, .swf.gz), PBS accounting log "
                                                   "or sacct --parsable2 output."),
            site: Path | None = typer.Option(None, "--site", metavar="FILE",
                                             help="Site config whose enabled plugins run "
                                                  "(default: the root --site, else none)."),
            platform: Path | None = typer.Option(None, "--platform", metavar="FILE",
                                                 help="Platform TOML: hosts, vnodes, "
                                                      "partitions, power models."),
            nodes: int | None = typer.Option(None, "--nodes", parser=cli_count,
                                             help="Hosts (instead of the trace header's)."),
            cpus_per_node: int | None = typer.Option(None, "--cpus-per-node", parser=cli_count,
                                                     help="Cpus per host (with --nodes)."),
            out: str = typer.Option("sim-out", "--out", metavar="DIR",
                                    help="Where the results go."),
            skip_bad: bool = typer.Option(False, "--skip-bad",
                                          help="Count malformed trace lines and go on."),
            fmt: str | None = typer.Option(None, "--format", help="swf, pbs or sacct "
                                                                   "(default: guessed)."),
            limit: int | None = typer.Option(None, "--limit", parser=cli_count,
                                             help="Replay only the first N jobs."),
            policy: str = typer.Option("pbs", "--policy",
                                       help="pbs (PBS's default), easy (strict ordering, "
                                            "backfill depth 1) or fifo; the site's "
                                            "[sim.scheduler] overrides it."),
            plots: bool = typer.Option(True, "--plots/--no-plots", help="Draw PNG plots."),
            ) -> None:
        """Replay TRACE; metrics, Batsim CSVs and plots go to --out."""
        root_site = ctx.find_root().obj.site_arg if ctx.find_root().obj else None
        out_dir = _out_dir(out)
        result = simulate(trace, out_dir, site=site, root_site=root_site, platform=platform,
                          nodes=nodes, cpus_per_node=cpus_per_node, fmt=fmt,
                          skip_bad=skip_bad, limit=limit, policy=policy, plots=plots)
        _report(result, out_dir)

    @app.command("compare")
    def compare(ctx: typer.Context,
                trace: Path = typer.Argument(..., help="The trace both runs replay."),
                site: list[Path] = typer.Option([], "--site", metavar="FILE",
                                                help="The two site configs (A, then B)."),
                platform: Path | None = typer.Option(None, "--platform", metavar="FILE"),
                nodes: int | None = typer.Option(None, "--nodes", parser=cli_count),
                cpus_per_node: int | None = typer.Option(None, "--cpus-per-node",
                                                         parser=cli_count),
                out_text: str = typer.Option("sim-compare", "--out", metavar="DIR"),
                skip_bad: bool = typer.Option(False, "--skip-bad"),
                fmt: str | None = typer.Option(None, "--format"),
                limit: int | None = typer.Option(None, "--limit", parser=cli_count),
                policy: str = typer.Option("pbs", "--policy"),
                plots: bool = typer.Option(True, "--plots/--no-plots"),
                ) -> None:
        """The same trace under two site configs, side by side, with B's differences."""
        from ..sim.output import (
            COMPARE_FILES,
            RUN_FILES,
            OutputError,
            check_names,
            compare_results,
        )

        out = _out_dir(out_text)
        if len(site) != 2:
            raise CliError(f"give two --site files (A and B), not {len(site)}")
        if fmt is not None and fmt not in _FORMATS:
            raise CliError(f"--format {fmt!r}: expected one of {', '.join(_FORMATS)}")
        partitions = functools.cache(lambda: _machine_partitions(trace, fmt, platform, nodes,
                                                                 cpus_per_node))
        from ..sim.engine import replay_home

        for path in site:  # both checked before either runs: B's mistake is not an hour away
            with _TermIsExit(), replay_home():  # (loaded as for its run: never the live home)
                _site_setup(path, None, policy, partitions)
        # Each run's folder under --out is named after its site file, when that name is a
        # plain one and not the comparison's own files; else A and B.
        labels = [p.stem for p in site]
        if labels[0] == labels[1] or not all(
                re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", label)
                and not label.startswith("compare") for label in labels):
            labels = ["A", "B"]
        try:  # B's folder, and the comparison's, are checked before A's run, not after it
            check_names(out, COMPARE_FILES)
            for label in labels:
                check_names(out / label, RUN_FILES)
        except OutputError as exc:
            raise CliError(str(exc)) from None
        dirs = []
        for label, path in zip(labels, site, strict=True):
            run_dir = out / label
            result = simulate(trace, run_dir, site=path, root_site=None, platform=platform,
                              nodes=nodes, cpus_per_node=cpus_per_node, fmt=fmt,
                              skip_bad=skip_bad, limit=limit, policy=policy, plots=plots,
                              label=f"{label}: ")
            typer.echo(f"== {label} ({path})")
            _report(result, run_dir)
            dirs.append(run_dir)
        try:
            compare_results(dirs[0], dirs[1], out, labels[0], labels[1], plots=plots)
        except OutputError as exc:
            raise CliError(str(exc)) from None
        typer.echo((out / "compare.txt").read_text().rstrip())

    return app
