"""The kernel's commands: plugins, hooks, config, event, hook import/export, plugin new."""

from __future__ import annotations

import inspect
import json
import logging
import os
import shlex
import sys
from pathlib import Path
from typing import Any

import typer

from .. import hookspecs, jsontext
from ..events import EVENTS, Event
from ..hookattrs import (
    HookAttributeError,
    HookAttributes,
    config_suffix_error,
    format_hk,
    parse_hk,
    resolve_attributes,
    write_atomically,
)
from ..plugins import (
    BLOCKED,
    FAILED,
    PluginRecord,
    PluginSet,
    installed_entry_points,
    load_plugins,
    spec_names,
)
from ..runner import Outcome, Runner
from ..settings import ConfigError, PluginInfo, read_cf, validate_config
from ..siteconfig import ConfigIssue, SiteConfig, default_home, load_site, site_path
from . import CliError
from .options import cli_count

BUILTIN_GROUPS = ("plugins", "hooks", "config", "event", "hook", "plugin", "server", "qsub",
                  "qstat", "qdel", "qhold", "qrls", "qrerun", "qrun", "qalter", "qmgr",
                  "pbsnodes", "pbs_rsub", "pbs_rstat", "pbs_rdel",
                  "qmove", "pbs_attach", "demo", "pbs", "slurm", "sim")


class State:
    """What the root options set, with the site and plugins loaded on first use."""

    def __init__(self, site: Path | None, strict: bool):
        self.site_arg = site
        self.strict = strict
        #: Set by commands that write the site config, which may create it.
        self.writing = False
        self._site: SiteConfig | None = None

    def site(self) -> SiteConfig:
        if self._site is None:
            self._site = load_site(self.site_arg, allow_missing=self.writing)
        return self._site

    def site_path(self) -> Path:
        return site_path(self.site_arg)

    def plugins(self, which: str = "enabled", only: set[str] | None = None,
                report: bool = True) -> PluginSet:
        return load_plugins(self.site(), which=which, strict=True if self.strict else None,
                            only=only, report=report)


def _state(ctx: typer.Context) -> State:
    return ctx.find_root().obj


def _epilog() -> str:
    names = sorted({ep.name for ep in installed_entry_points()})
    if not names:
        return "No plugin is installed."
    return ("Installed plugins (each may add a command group, `pbsplug <plugin> --help`): "
            + ", ".join(names))


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="pbsplug", no_args_is_help=True, add_completion=False,
        pretty_exceptions_enable=False,
        help="pbsplug: PBS-style hooks and plugins for batch systems.",
        epilog=_epilog(), rich_markup_mode=None)

    def version_callback(value: bool) -> None:
        if value:
            from . import _version

            typer.echo(_version())
            raise typer.Exit()

    @app.callback()
    def root(ctx: typer.Context,
             version: bool = typer.Option(False, "--version", "-V", is_eager=True,
                                          callback=version_callback,
                                          help="Print the version and exit."),
             site: Path | None = typer.Option(None, "--site", metavar="FILE",
                                              help="Site config (default: $PBSPLUG_SITE, "
                                                   "else <home>/site.toml)."),
             strict: bool = typer.Option(False, "--strict",
                                         help="Fail when any plugin fails to load."),
             debug: bool = typer.Option(False, "--debug",
                                        help="Show tracebacks and debug logs.")) -> None:
        if site is not None:
            # Plugin commands read their configuration through the same site file.
            os.environ["PBSPLUG_SITE"] = str(site)
        ctx.obj = State(site, strict)

    app.add_typer(_plugins_app(), name="plugins")
    app.add_typer(_hooks_app(), name="hooks")
    app.add_typer(_config_app(), name="config")
    app.add_typer(_hook_app(), name="hook")
    app.add_typer(_plugin_app(), name="plugin")
    app.command("event")(event_command)
    from .adapters import pbs_app, slurm_app

    app.add_typer(pbs_app(), name="pbs")
    app.add_typer(slurm_app(), name="slurm")
    from .sim import sim_app

    app.add_typer(sim_app(), name="sim")
    from .engine import add_engine_commands

    add_engine_commands(app)
    return app


def add_plugin_group(app: typer.Typer, name: str, site_arg: str | None, strict: bool) -> None:
    """Load plugin `name` alone and add its command group, if it has one."""
    site = load_site(site_arg)
    plugins = load_plugins(site, which="all", strict=True if strict else None, only={name},
                           report=False)
    record = plugins.get(name)
    if record is None:
        return  # typer reports the unknown command
    if record.status in (FAILED, BLOCKED):
        raise CliError(record.failure_text() if record.status == FAILED
                       else f"plugin '{name}' is {record.error}")
    register = getattr(record.plugin, "register_commands", None)
    if register is None or not hasattr(register, "pbsplug_impl"):
        raise CliError(f"plugin '{name}' has no commands")
    group = typer.Typer(name=name, no_args_is_help=True, rich_markup_mode=None,
                        help=(record.info.description if record.info else "") or
                        f"Commands of plugin {name}.")

    @group.callback()
    def _group() -> None:
        pass

    register(cli=group)
    app.add_typer(group, name=name)


def _print_json(data: Any) -> None:
    typer.echo(json.dumps(data, indent=2, sort_keys=False, default=str))


def _table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(str(r[i])) for r in rows + [header]) for i in range(len(header))]
    for row in [header] + rows:
        typer.echo("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


# =============================================================================================
# pbsplug plugins ...
# =============================================================================================

def _plugins_app() -> typer.Typer:
    app = typer.Typer(help="List, inspect, enable and disable plugins.", no_args_is_help=True)

    @app.command("list")
    def list_(ctx: typer.Context,
              all_: bool = typer.Option(False, "--all",
                                        help="Also import disabled plugins, to show their "
                                             "hooks and any import failure."),
              as_json: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
        """Installed plugins: name, distribution, version, status, hooks, error."""
        plugins = _state(ctx).plugins("all" if all_ else "enabled")
        records = sorted(plugins.records.values(), key=lambda r: r.name)
        if as_json:
            _print_json([r.to_dict() for r in records])
            return
        if not records:
            typer.echo("No plugin is installed (entry-point group 'pbsplug').")
            return
        _table([[r.name, r.dist, r.version, r.status, ",".join(r.hooks) or "-",
                 r.error or ""] for r in records],
               ["NAME", "DISTRIBUTION", "VERSION", "STATUS", "HOOKS", "ERROR"])

    @app.command("info")
    def info(ctx: typer.Context, name: str,
             as_json: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
        """One plugin in full: status, hooks, effective attributes, configuration."""
        plugins = _state(ctx).plugins("all", only={name}, report=False)
        record = plugins.get(name)
        if record is None:
            raise CliError(_unknown_plugin(name, plugins))
        data = record.to_dict()
        data["config"] = record.config
        if record.info is not None:
            data["description"] = record.info.description
            data["api"] = record.info.api
            data["config_schema"] = {
                k: {"type": s.type.__name__, "default": None if s.required else s.default,
                    "required": s.required, "expected": s.expected(), "doc": s.doc}
                for k, s in record.info.config.items()}
        if as_json:
            _print_json(data)
            return
        for key in ("name", "distribution", "version", "status", "api", "description",
                    "error"):
            if data.get(key):
                typer.echo(f"{key}: {data[key]}")
        typer.echo(f"hooks: {', '.join(record.hooks) or '-'}")
        if record.attributes is not None:
            typer.echo("attributes:")
            for key, value in record.attributes.to_dict().items():
                shown = json.dumps(value)
                if key == "isolation" and value is None:
                    shown = '"process" (the default)'
                typer.echo(f"  {key} = {shown}")
        if data.get("config_schema"):
            typer.echo("configuration:")
            for key, s in data["config_schema"].items():
                current = json.dumps(record.config.get(key)) if key in record.config else "-"
                typer.echo(f"  {key} = {current}  ({s['expected']}; default "
                           f"{json.dumps(s['default'])}) {s['doc']}".rstrip())

    @app.command("enable")
    def enable(ctx: typer.Context, name: str) -> None:
        """Enable a plugin in the site config (comments and layout are kept)."""
        state = _state(ctx)
        state.writing = True
        names = {ep.name for ep in installed_entry_points()}
        if name not in names:
            raise CliError(f"no installed plugin is named '{name}' (installed: "
                           f"{', '.join(sorted(names)) or 'none'})")
        from ..siteedit import update_plugin

        path = state.site_path()
        update_plugin(path, name, {"enabled": True})
        typer.echo(f"plugin '{name}' enabled in {path}; {_server_sees(path)}")

    @app.command("disable")
    def disable(ctx: typer.Context, name: str) -> None:
        """Disable a plugin in the site config (works for a broken or missing one too)."""
        from ..siteedit import update_plugin

        path = _state(ctx).site_path()
        update_plugin(path, name, {"enabled": False})
        typer.echo(f"plugin '{name}' disabled in {path}; {_server_sees(path)}")

    return app


def _server_sees(path: Path) -> str:
    """Whether a local-engine server will see a change to site config `path`: the server
    of a home reads that home's site.toml and reloads it within a second of a change."""
    from .pbs import engine_home

    home = engine_home()
    if home.server_pid() is None:
        return f"no server is running in {home.root}"
    try:
        same = path.resolve() == home.site.resolve()
    except OSError:
        same = False
    if same:
        return f"the running server in {home.root} picks it up"
    return f"the running server in {home.root} reads {home.site}, not this file"


def _unknown_plugin(name: str, plugins: PluginSet) -> str:
    return (f"no installed plugin is named '{name}' (installed: "
            f"{', '.join(plugins.installed) or 'none'})")


# =============================================================================================
# pbsplug hooks ...
# =============================================================================================

def _hooks_app() -> typer.Typer:
    app = typer.Typer(help="Enabled hooks per event, the hook specs, and the run trace.",
                      no_args_is_help=True)

    @app.command("list")
    def list_(ctx: typer.Context,
              event: str | None = typer.Option(None, "--event", help="Only this event."),
              as_json: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
        """Per event, the enabled hooks in run order with their attributes."""
        if event is not None and event not in EVENTS:
            raise CliError(f"unknown event '{event}'; events are: {', '.join(EVENTS)}")
        runner = Runner(_state(ctx).plugins())
        data: dict[str, list[dict[str, Any]]] = {}
        for name in [event] if event else EVENTS:
            chain = runner.chain(name)
            if chain:
                data[name] = [{"hook": e.name, "order": e.attrs.order, "mode": e.mode,
                               "alarm": e.attrs.alarm, "freq": e.attrs.freq
                               if EVENTS[name].periodic else None,
                               "fail_action": list(e.attrs.fail_action) or ["none"],
                               "user": e.attrs.user} for e in chain]
        if as_json:
            _print_json(data)
            return
        if not data:
            typer.echo("No enabled hook" + (f" for {event}." if event else "."))
            return
        for name, hooks in data.items():
            typer.echo(f"{name}:")
            _table([["", h["hook"], str(h["order"]), h["mode"], str(h["alarm"]),
                     str(h["freq"] or "-"), ",".join(h["fail_action"]), h["user"]]
                    for h in hooks],
                   ["", "HOOK", "ORDER", "MODE", "ALARM", "FREQ", "FAIL_ACTION", "USER"])

    @app.command("specs")
    def specs(as_json: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
        """Every hook spec with its signature and first line of documentation."""
        rows = []
        for name in sorted(spec_names(), key=list(vars(hookspecs)).index):
            fn = getattr(hookspecs, name)
            doc = (inspect.getdoc(fn) or "").splitlines()[0]
            signature = f"{name}{inspect.signature(fn)}".replace("'", "")
            rows.append({"name": name, "signature": signature,
                         "event": name in EVENTS, "doc": doc})
        if as_json:
            _print_json(rows)
            return
        for row in rows:
            typer.echo(f"{row['signature']}\n    {row['doc']}")

    @app.command("trace")
    def trace(ctx: typer.Context,
              last: int = typer.Option(20, "--last", parser=cli_count,
                                       help="How many hook runs."),
              as_json: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
        """The latest hook runs recorded in the trace file."""
        path = trace_path(_state(ctx).site())
        if not path.exists():
            typer.echo(f"No hook has run yet (no trace at {path}).")
            return
        every = path.read_text(errors="replace").splitlines()
        tail = every[-last:]
        runs = [_trace_record(line, f"{path} line {number}")
                for number, line in enumerate(tail, len(every) - len(tail) + 1)
                if line.strip()]
        if as_json:
            _print_json(runs)
            return
        _table([[r["event"], r["hook"], str(r["order"]), r["mode"],
                 f"{r['duration'] * 1000:.2f} ms", r["outcome"], r.get("message") or ""]
                for r in runs], ["EVENT", "HOOK", "ORDER", "MODE", "DURATION", "OUTCOME",
                                 "MESSAGE"])

    return app


def _trace_record(line: str, what: str) -> dict[str, Any]:
    """One line of the trace (`HookRun.to_dict`), or `CliError` naming the line and what is
    wrong with it (a line cut short by a full disk, another program's)."""
    try:
        record = jsontext.loads(line, what, expect=dict)
    except jsontext.JsonError as exc:
        raise CliError(f"{exc}: not a hook run's record") from None
    if not all(type(record.get(key)) is str for key in ("event", "hook", "mode", "outcome")) \
            or type(record.get("order")) is not int \
            or type(record.get("duration")) not in (int, float) \
            or not isinstance(record.get("message"), (str, type(None))):
        raise CliError(f"{what}: not a hook run's record (event, hook, order, mode, duration, "
                       "outcome, message)")
    return record


def trace_path(site: SiteConfig) -> Path:
    return site.trace_file or default_home() / "hook_trace.jsonl"


# =============================================================================================
# pbsplug config check
# =============================================================================================

def _config_app() -> typer.Typer:
    app = typer.Typer(help="Check the site configuration.", no_args_is_help=True)

    @app.command("check")
    def check(ctx: typer.Context) -> None:
        """Validate the site config and every enabled plugin's configuration.
        Exit 0 when all is valid, 2 with every error listed otherwise."""
        state = _state(ctx)
        issues: list[ConfigIssue] = []
        site = load_site(state.site_arg, issues=issues)
        problems = [str(issue) for issue in issues]
        plugins = load_plugins(site, which="enabled", strict=False, report=False)
        problems += plugins.config_issues()
        for problem in problems:
            typer.echo(f"error: {problem}", err=True)
        if problems:
            raise typer.Exit(2)
        where = site.path if site.exists else f"{site.path} (absent: every plugin off)"
        enabled = [r.name for r in plugins.enabled]
        typer.echo(f"{where}: valid; enabled plugins: {', '.join(enabled) or 'none'}")

    return app


# =============================================================================================
# pbsplug event EVENT --input FILE
# =============================================================================================

def event_command(ctx: typer.Context,
                  event: str = typer.Argument(..., help="A PBS event name (queuejob, ...)."),
                  input_file: Path = typer.Option(..., "--input", "-i", metavar="FILE.json",
                                                  help="The event's objects, keyed by PBS's "
                                                       "names; - for standard input."),
                  as_json: bool = typer.Option(False, "--json", help="JSON output."),
                  mode: str | None = typer.Option(None, "--mode",
                                                  help="Force every hook's isolation: "
                                                       "process or inprocess.")) -> None:
    """Run one event through the enabled hooks and print the outcome.
    Exit 0 when accepted, 1 when rejected."""
    if event not in EVENTS:
        raise CliError(f"unknown event '{event}'; events are: {', '.join(EVENTS)}")
    if mode not in (None, "process", "inprocess"):
        raise CliError(f"--mode {mode!r}: expected process or inprocess")
    try:
        text = sys.stdin.buffer.read() if str(input_file) == "-" else input_file.read_bytes()
    except OSError as exc:
        raise CliError(f"{input_file}: cannot be read: {exc.strerror or exc}") from None
    try:  # (invalid UTF-8, nesting 100,000 deep...: each in one line, not a traceback)
        data = jsontext.loads(text, str(input_file))
    except jsontext.JsonError as exc:
        raise CliError(f"{input_file}: not valid JSON: {exc.why.removeprefix('not JSON: ')}"
                       ) from None
    try:
        ev = Event.from_dict(event, data)
    except ValueError as exc:
        raise CliError(f"{input_file}: {exc}") from None
    state = _state(ctx)
    site = state.site()
    trace = _writable_trace(site)
    if logging.getLogger().level > logging.DEBUG:  # without --debug: one line per failure
        for handler in logging.getLogger().handlers:
            handler.addFilter(_first_line_only)
    runner = Runner(state.plugins(), mode=mode, trace_file=trace,
                    debug_dir=trace.parent / "hooks" / "tmp" if trace else None)
    outcome = runner.fire(ev)
    if as_json:
        _print_json(outcome.to_dict())
    else:
        _print_outcome(outcome)
    raise typer.Exit(0 if outcome.accepted else 1)


def _first_line_only(record: logging.LogRecord) -> bool:
    """A failed hook's log record cut to its first line (the hook and the error; the
    traceback needs --debug); the runner's own line repeats what the outcome shows."""
    if record.name == "pbsplug.runner" and record.levelno >= logging.WARNING:
        return False
    if record.name.startswith("pbsplug.hook"):
        text = record.getMessage()
        if "\n" in text:
            record.msg, record.args = text.split("\n", 1)[0], ()
        record.exc_info = record.exc_text = None
    return True


def _writable_trace(site: SiteConfig) -> Path | None:
    path = trace_path(site)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):
            pass
    except OSError:
        return None
    return path


def _print_outcome(outcome: Outcome) -> None:
    if outcome.accepted:
        typer.echo(f"{outcome.event}: accepted")
    else:
        typer.echo(f"{outcome.event}: rejected by '{outcome.hook}' ({outcome.kind})")
        typer.echo(f"message: {outcome.message}")
        if outcome.detail and outcome.detail != outcome.message:
            typer.echo(f"detail: {outcome.detail}")
        typer.echo(f"fail_action: {','.join(outcome.fail_action) or 'none'}")
        typer.echo(f"consequence: {outcome.consequence}")
    if outcome.job_action:
        typer.echo(f"job action: {outcome.job_action}")
    if outcome.runs:
        typer.echo("hook runs:")
        _table([["", r.hook, str(r.order), r.mode, f"{r.duration * 1000:.2f} ms", r.outcome,
                 r.message or ""] for r in outcome.runs],
               ["", "HOOK", "ORDER", "MODE", "DURATION", "OUTCOME", "MESSAGE"])
    else:
        typer.echo("hook runs: none (no enabled hook for this event)")
    if outcome.changes:
        typer.echo("changes:")
        for key, value in outcome.changes.items():
            if key in ("vnode_list", "vnode_list_fail"):
                for name, attrs in value.items():
                    for attr, v in attrs.items():
                        typer.echo(f"  {key}[{name}].{attr} = {json.dumps(v)}")
            elif isinstance(value, dict):
                for attr, v in value.items():
                    typer.echo(f"  {key}.{attr} = {json.dumps(v)}")
            else:
                typer.echo(f"  {key} = {json.dumps(value)}")


# =============================================================================================
# pbsplug hook import / export
# =============================================================================================

def _hook_app() -> typer.Typer:
    app = typer.Typer(help="Bring PBS's .HK/.CF hook files in, or write them out.",
                      no_args_is_help=True)

    @app.command("import")
    def import_(ctx: typer.Context, name: str = typer.Argument(..., help="Plugin name."),
                hk: Path = typer.Option(..., "--hk", metavar="FILE.HK",
                                        help="PBS hook attribute file."),
                cf: Path | None = typer.Option(None, "--cf", metavar="FILE.CF",
                                               help="PBS hook config file (JSON).")) -> None:
        """Write a PBS .HK file's attributes (and a .CF's configuration) into the site
        config's [plugins.NAME]. Nothing is written unless all of it is valid."""
        state = _state(ctx)
        state.writing = True
        record, info, _ = _one_plugin(state, name)
        try:
            text = hk.read_text()
        except OSError as exc:
            raise CliError(f"{hk}: cannot be read: {exc.strerror or exc}") from None
        names = [name] + ([info.pbs_name] if info.pbs_name else [])
        pairs = parse_hk(text, str(hk), names)
        declared = info.hook_attributes(record.events)
        try:
            attrs = resolve_attributes(name, declared, pairs)
        except HookAttributeError as exc:
            raise CliError(f"{hk}: {exc}") from None
        if missing := sorted(set(attrs.events) - set(record.events)):
            raise CliError(f"{hk}: plugin '{name}' implements no hook for "
                           f"{', '.join(missing)}; it implements {', '.join(record.events)}")
        values: dict[str, Any] = {}
        given = {"events" if k == "event" else k for k, _ in pairs}
        for key in ("enabled", "events", "order", "alarm", "freq", "fail_action", "user",
                    "debug"):
            if key in given:
                value = getattr(attrs, key)
                values[key] = list(value) if isinstance(value, tuple) else value
        if "fail_action" in values and not values["fail_action"]:
            values["fail_action"] = ["none"]
        config = None
        if cf is not None:
            if why := config_suffix_error(cf):
                raise CliError(why)
            raw = read_cf(cf)
            config, issues = validate_config(info.config, raw, str(cf))
            if issues:
                raise ConfigError(issues)
            config = {k: v for k, v in raw.items()}
        from ..siteedit import update_plugin

        path = state.site_path()
        update_plugin(path, name, values, config)
        typer.echo(f"imported {hk}{' and ' + str(cf) if cf else ''} into [plugins.{name}] "
                   f"of {path}")

    @app.command("export")
    def export(ctx: typer.Context, name: str = typer.Argument(..., help="Plugin name."),
               directory: Path = typer.Option(..., "--dir", metavar="DIR",
                                              help="Where to write NAME.HK and NAME.CF."),
               hook_name: str | None = typer.Option(None, "--hook-name",
                                                    help="hook_name to write (default: "
                                                         "the plugin's name).")) -> None:
        """Write the plugin's effective attributes as PBS's NAME.HK and its configuration
        as NAME.CF (JSON)."""
        record, info, attributes = _one_plugin(_state(ctx), name)
        hname = hook_name or name
        if not directory.is_dir():
            raise CliError(f"--dir {directory}: no such directory")
        hk_path = directory / f"{hname}.HK"
        write_atomically(hk_path, format_hk(hname, attributes))
        typer.echo(f"wrote {hk_path}")
        if info.config:
            cf_path = directory / f"{hname}.CF"
            write_atomically(cf_path, json.dumps(record.config, indent=4) + "\n")
            typer.echo(f"wrote {cf_path}")

    return app


def _one_plugin(state: State, name: str) -> tuple[PluginRecord, PluginInfo, HookAttributes]:
    """Plugin `name` loaded, enabled or not: its record, its plugin_info and its effective
    hook attributes."""
    plugins = state.plugins("all", only={name}, report=False)
    record = plugins.get(name)
    if record is None:
        raise CliError(_unknown_plugin(name, plugins))
    if record.status in (FAILED, BLOCKED):
        raise CliError(record.failure_text() if record.status == FAILED
                       else f"plugin '{name}' is {record.error}")
    # (the loader sets both for every plugin of "all" it neither blocked nor failed)
    assert record.info is not None and record.attributes is not None
    return record, record.info, record.attributes


# =============================================================================================
# pbsplug plugin new
# =============================================================================================

def _plugin_app() -> typer.Typer:
    app = typer.Typer(help="Write a new plugin.", no_args_is_help=True)

    @app.command("new")
    def new(name: str = typer.Argument(..., help="The plugin's name ([a-z][a-z0-9_]*)."),
            directory: Path = typer.Option(Path("."), "--dir", metavar="DIR",
                                           help="Parent folder (default: here).")) -> None:
        """A new plugin distribution: pyproject, package with one hook, README, a test."""
        from ..scaffold import new_plugin

        if name in BUILTIN_GROUPS:
            raise CliError(f"'{name}' is a pbsplug command; choose another plugin name")
        root = new_plugin(name, directory)
        # This interpreter's pip and pytest: a bare `pip` or `pytest` may be another
        # environment's, which would not see pbsplug or the plugin (plugin-authors.md).
        python = shlex.quote(sys.executable)
        typer.echo(f"wrote {root}\nnext: {python} -m pip install -e "
                   f"{shlex.quote(f'{root}[test]')} && pbsplug plugins enable {name} && "
                   f"{python} -m pytest {shlex.quote(str(root / 'tests'))}")

    return app
