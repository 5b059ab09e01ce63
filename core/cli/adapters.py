"""``pbsplug pbs ...`` and ``pbsplug slurm ...``: the site's plugins inside a real PBS
(`pbsplug.adapters.pbs`) or a real Slurm (`pbsplug.adapters.slurm`)."""

from __future__ import annotations

import json
import shlex
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from . import CliError
from .options import cli_seconds

if TYPE_CHECKING:
    from ..adapters import pbs as pbs_adapter
    from ..adapters import slurm as slurm_adapter
    from ..adapters.rootpaths import RootPath
    from ..adapters.slurm import SlurmConf

#: The longest wait `slurm periodic --every` takes (ten years; time.sleep overflows past
#: about 9.2e9 s).
MAX_EVERY = 315360000

_QMGR_HELP = "The qmgr command to run, split as a shell would (default: qmgr on PATH)."
_ALLOW_HELP = ("Install even where a user other than root could change what root would run "
               "(the interpreter, the packages, the site folders, the site config); each "
               "such path is printed.")


def _refuse_unsafe(command: str, paths: Sequence[RootPath], allow: bool,
                   how: str | None = None) -> None:
    """`CliError` naming the first path root would run, import or read that another user
    could change (`rootpaths`; `how`: how to go on all the same, if not --allow-unsafe-paths);
    with --allow-unsafe-paths, each one printed instead."""
    from ..adapters import rootpaths

    found = rootpaths.unsafe(paths)
    if found and not allow:
        raise CliError(rootpaths.message(command, *found[0], *([how] if how else [])))
    for rp, problem in found:
        typer.echo(rootpaths.accepted(command, rp, problem), err=True)


def _qmgr(command: str) -> pbs_adapter.Qmgr:
    from ..adapters.pbs import Qmgr

    return Qmgr(shlex.split(command) or ["qmgr"])


def _plan(ctx: typer.Context, site_dir: list[Path]) -> pbs_adapter.Plan:
    from ..adapters import pbs

    state = ctx.find_root().obj
    return pbs.plan(state.plugins("enabled"), pbs.site_dirs(site_dir))


def pbs_app() -> typer.Typer:
    app = typer.Typer(help="Put the site's enabled plugins into a real PBS as hooks.",
                      no_args_is_help=True, rich_markup_mode=None)

    @app.command("install")
    def install(ctx: typer.Context,
                dry_run: bool = typer.Option(False, "--dry-run",
                                             help="Print the qmgr commands and files; "
                                                  "change nothing."),
                site_dir: list[Path] = typer.Option([], "--site-dir", metavar="DIR",
                                                    help="Another folder the hooks import "
                                                         "from (repeatable)."),
                disable_pbs_hooks: bool = typer.Option(
                    False, "--disable-pbs-hooks",
                    help="Disable PBS's own hook for a feature a plugin provides "
                         "(PBS_power, PBS_cray_atom)."),
                qmgr: str = typer.Option("qmgr", "--qmgr", help=_QMGR_HELP),
                allow_unsafe_paths: bool = typer.Option(False, "--allow-unsafe-paths",
                                                        help=_ALLOW_HELP)) -> None:
        """One site hook per enabled plugin (pbsplug_<plugin>): created, or updated where it
        differs; hooks of plugins the site no longer enables are removed. Refused when a
        user other than root could change what the hooks run as root."""
        from ..adapters import pbs

        p = _plan(ctx, site_dir)
        _refuse_unsafe("pbs install", p.root_paths, allow_unsafe_paths)
        runner = _qmgr(qmgr)
        try:
            groups = pbs.install_steps(p, runner, disable_pbs_hooks)
            stale = pbs.stale_steps(p, runner)
        except pbs.PbsError as exc:
            if not dry_run:
                raise CliError(str(exc)) from None
            groups = pbs.install_steps(p, None, disable_pbs_hooks)
            stale = []
        for plugin, why in p.skipped:
            typer.echo(f"{plugin}: nothing to install: {why}")
        for hp, steps in groups:
            label = hp.plugin if hp is not None else "PBS's own hooks"
            for note in hp.notes if hp is not None else ():
                typer.echo(f"{label}: note: {note}")
            for hook, why in hp.left_out if hp is not None else ():
                typer.echo(f"{label}: not in PBS: {hook}: {why}")
            if not steps:
                typer.echo(f"{label}: {hp.hook} is up to date" if hp else
                           f"{label}: nothing to change")
                continue
            for step in steps:
                typer.echo(f"{label}: {step.shown()}")
                if dry_run and step.file_text is not None:
                    typer.echo(f"--- FILE ({step.suffix[1:]})\n{step.file_text.rstrip()}\n---")
            if not dry_run:
                try:
                    pbs.apply(steps, runner)
                except pbs.PbsError as exc:
                    raise CliError(str(exc)) from None
        for step in stale:
            typer.echo(f"removed (no longer enabled): {step.shown()}")
        if stale and not dry_run:
            pbs.apply(stale, runner)
        if dry_run:
            typer.echo("dry run: nothing was changed")

    @app.command("uninstall")
    def uninstall(dry_run: bool = typer.Option(False, "--dry-run",
                                               help="Print the qmgr commands only."),
                  qmgr: str = typer.Option("qmgr", "--qmgr", help=_QMGR_HELP)) -> None:
        """Delete every hook pbsplug installed (their config says so), and nothing else."""
        from ..adapters import pbs

        runner = _qmgr(qmgr)
        try:
            steps = pbs.uninstall_steps(runner)
            for step in steps:
                typer.echo(step.shown())
            if not steps:
                typer.echo("no pbsplug hook is installed")
            if not dry_run:
                pbs.apply(steps, runner)
        except pbs.PbsError as exc:
            raise CliError(str(exc)) from None

    @app.command("status")
    def status(ctx: typer.Context,
               as_json: bool = typer.Option(False, "--json", help="JSON output."),
               site_dir: list[Path] = typer.Option([], "--site-dir", metavar="DIR",
                                                   help="As given to install."),
               qmgr: str = typer.Option("qmgr", "--qmgr", help=_QMGR_HELP)) -> None:
        """Each enabled plugin's hook against PBS's: installed, missing, differs (with what
        differs), stale; and each plugin hook that cannot run inside PBS, with why."""
        from ..adapters import pbs

        try:
            rows = pbs.status(_plan(ctx, site_dir), _qmgr(qmgr))
        except pbs.PbsError as exc:
            raise CliError(str(exc)) from None
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        for row in rows:
            typer.echo(f"{row['plugin']}: {row['hook'] or '-'}: {row['state']}"
                       + (f" ({row['events']})" if row["events"] else ""))
            for line in row["differences"]:
                typer.echo(f"    differs: {line}")
            for line in row["left_out"]:
                typer.echo(f"    not in PBS: {line}")
            for line in row["notes"]:
                typer.echo(f"    note: {line}")
            for line in row["unsafe"]:
                typer.echo(f"    unsafe: {line}")

    return app


_SLURM_DIR = "/etc/slurm/pbsplug"


def _slurm_plan(ctx: typer.Context, directory: Path, site_dir: list[Path], bin_dir: str | None,
                slurm_conf: Path | None, state_dir: Path, log_file: Path, run_dir: Path,
                native: bool, conf: SlurmConf, command: str = "install"
                ) -> slurm_adapter.Plan:
    """The plan, with slurm.conf read through `conf`, the command's one view of it
    (`command`: which, for a message)."""
    from ..adapters import slurm

    state = ctx.find_root().obj
    try:
        bins = slurm.which(bin_dir)
    except slurm.SlurmInstallError as exc:
        raise CliError(str(exc)) from None
    for what, path in (("--dir", directory), ("--state-dir", state_dir),
                       ("--log-file", log_file), ("--run-dir", run_dir)):
        if not path.is_absolute():
            raise CliError(f"{what} {path}: expected an absolute path (Slurm's programs "
                           "run with no PATH and from any folder)")
    try:
        return slurm.plan(state.plugins("enabled"), directory, dirs=slurm.site_dirs(site_dir),
                          bin_dir=bins, slurm_conf=str(slurm_conf.resolve()) if slurm_conf
                          else "", state_dir=str(state_dir), log_file=str(log_file),
                          run_dir=str(run_dir), native=native,
                          slurm_user=lambda: slurm.read_slurm_user(conf, command),
                          site_conf=conf)
    except slurm.SlurmInstallError as exc:
        raise CliError(str(exc)) from None


def _echo_included(p: slurm_adapter.Plan, conf: Path) -> None:
    """Install's line for each setting of a key pbsplug sets in a file slurm.conf includes:
    left as it is, overridden by pbsplug's line (read after it)."""
    from ..adapters import slurm

    for s in slurm.included_settings(p):
        typer.echo(f"{s.file}:{s.line}: left as it is, pbsplug's line in {conf} overrides "
                   f"it: {s.text}{slurm.replaced_why(p, s.text)}")


def _conf_path(slurm_conf: Path | None) -> Path:
    import os

    return slurm_conf or Path(os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf")


def slurm_app() -> typer.Typer:
    app = typer.Typer(help="Put the site's enabled plugins into a real Slurm as its "
                           "Prolog, Epilog and power-saving programs.",
                      no_args_is_help=True, rich_markup_mode=None)
    dir_opt = typer.Option(Path(_SLURM_DIR), "--dir", metavar="DIR",
                           help="Where the programs go (the same path on every node).")
    conf_opt = typer.Option(None, "--slurm-conf", metavar="FILE",
                            help="slurm.conf (default $SLURM_CONF, else "
                                 "/etc/slurm/slurm.conf); named in the programs' config "
                                 "when given.")
    bin_opt = typer.Option(None, "--bin-dir", metavar="DIR",
                           help="The folder of scontrol and scancel (default: from PATH).")
    state_opt = typer.Option(Path("/var/spool/pbsplug-slurm"), "--state-dir", metavar="DIR",
                             help="Per-host state, root's: the slurmd starts "
                                  "HealthCheckProgram has seen; DIR/power holds the power "
                                  "programs' records, and DIR/slurmuser is the pbsplug home "
                                  "(and log) of the programs slurmctld runs as SlurmUser; "
                                  "with a SlurmUser that is not root both are SlurmUser's "
                                  "(install makes them so on the controller).")
    log_opt = typer.Option(Path("/var/log/pbsplug-slurm.log"), "--log-file", metavar="FILE",
                           help="Where the programs run as root log (Slurm keeps no "
                                "script output); SlurmUser's log to the file of that name "
                                "in <state-dir>/slurmuser.")
    run_opt = typer.Option(Path("/run/pbsplug"), "--run-dir", metavar="DIR",
                           help="The workers' sockets (root only).")
    site_opt = typer.Option([], "--site-dir", metavar="DIR",
                            help="Another folder the programs import from (repeatable).")
    native_opt = typer.Option(True, "--native/--no-native",
                              help="Slurm runs a small C launcher (built here with cc) that "
                                   "asks the running worker and falls back to the Python "
                                   "program; --no-native: the Python programs only.")

    @app.command("install")
    def install(ctx: typer.Context,
                apply: bool = typer.Option(False, "--apply",
                                           help="Merge the lines into slurm.conf (the "
                                                "site's lines they replace are kept, "
                                                "commented); else print them."),
                directory: Path = dir_opt, slurm_conf: Path | None = conf_opt,
                bin_dir: str | None = bin_opt, state_dir: Path = state_opt,
                log_file: Path = log_opt, run_dir: Path = run_opt,
                site_dir: list[Path] = site_opt, native: bool = native_opt,
                allow_unsafe_paths: bool = typer.Option(False, "--allow-unsafe-paths",
                                                        help=_ALLOW_HELP)) -> None:
        """Write one program per Slurm script the enabled plugins need, and the slurm.conf
        lines that name them; refused when a user other than root could change what the
        programs run as root. Run it as root, on the controller too when a plugin needs
        PrologSlurmctld, EpilogSlurmctld or the power programs: slurmctld runs those as
        SlurmUser (read from slurm.conf and the files it includes), and with one that
        is not root install makes their folders SlurmUser's (<state-dir>/power,
        <state-dir>/slurmuser and a state_dir the site gives such a plugin) and the config
        readable by SlurmUser's group."""
        from ..adapters import slurm

        conf = _conf_path(slurm_conf)
        view = slurm.SlurmConf(conf)  # (read once: every step below sees the same file)
        p = _slurm_plan(ctx, directory, site_dir, bin_dir, slurm_conf, state_dir, log_file,
                        run_dir, native, view)
        _refuse_unsafe("slurm install", p.root_paths, allow_unsafe_paths)
        if allow_unsafe_paths:  # ('slurm periodic' checks again, and accepts them too)
            p.config["allow_unsafe_paths"] = True
        for row in p.rows:
            if not row["runs"]:
                typer.echo(f"{row['plugin']}: nothing to install: none of its hooks has a "
                           "Slurm script")
            for hook, where in row["runs"].items():
                typer.echo(f"{row['plugin']}: {hook}: {where}")
            for hook, why in row["cannot"].items():
                typer.echo(f"{row['plugin']}: not in Slurm: {hook}: {why}")
        for note in p.notes:
            typer.echo(f"note: {note}")
        merged = None  # (what --apply writes)
        try:
            slurm.check_state_dirs(p, str(state_dir))
            if apply and p.conf_lines:  # (before anything is written: a refusal of
                #  slurm.conf's leaves all as it was)
                merged = slurm.merged_conf(view, p.conf_lines)
        except slurm.SlurmInstallError as exc:
            raise CliError(str(exc)) from None
        try:
            for path in slurm.write_programs(p):
                typer.echo(f"wrote {path}")
        except OSError as exc:
            raise CliError(f"cannot write the programs in {directory}: {exc}") from None
        except slurm.SlurmInstallError as exc:
            raise CliError(str(exc)) from None
        try:
            for line in slurm.prepare_state(p, str(state_dir)):
                typer.echo(line)
        except slurm.SlurmInstallError as exc:
            raise CliError(str(exc)) from None
        su = p.config.get("slurm_user")
        ctlds = slurm.controller_names(view)
        if su and ctlds and socket.gethostname().split(".")[0] not in ctlds:
            typer.echo(f"note: this host is not the controller ({', '.join(ctlds)}): run "
                       "install there too, as root, so that SlurmUser's folders are made "
                       "where slurmctld runs its programs")
        if p.conf_lines:
            typer.echo(f"Slurm runs: {slurm.launcher(directory)}")
        if not p.conf_lines:
            typer.echo("no Slurm script is needed: slurm.conf is left as it is")
            return
        if not apply:
            typer.echo(f"add to {conf} (or run again with --apply):")
            typer.echo(slurm.conf_block(p.conf_lines))
        try:
            if merged is not None:  # (first: its refusal is one line; the view keeps the
                #  text it read, which holds the lines it replaced)
                slurm.apply_merged(view, merged)
        except OSError as exc:  # (checked above: the folder changed since)
            raise CliError(f"{conf}: cannot write slurm.conf ({exc.strerror or exc}): left "
                           "as it is") from None
        except slurm.SlurmInstallError as exc:  # (its line names the file)
            raise CliError(str(exc)) from None
        try:
            replaced = slurm.replaced_lines(view, p.conf_lines)
        except OSError:  # (printed only: nothing to replace in a file not read)
            replaced = []
        done = "replaced" if apply else "--apply replaces"
        for line in replaced:
            typer.echo(f"{conf}: {done} (kept as a comment): {line}"
                       f"{slurm.replaced_why(p, line)}")
        _echo_included(p, conf)
        if apply:
            typer.echo(f"{conf}: pbsplug's lines merged; now run 'scontrol reconfigure' "
                       "(restart slurmctld for power saving)")

    @app.command("uninstall")
    def uninstall(directory: Path = dir_opt, slurm_conf: Path | None = conf_opt) -> None:
        """Remove pbsplug's programs and its slurm.conf lines (the site's own come back)."""
        from ..adapters import slurm

        try:
            done = slurm.uninstall(directory, slurm.SlurmConf(_conf_path(slurm_conf)))
        except (OSError, slurm.SlurmInstallError) as exc:
            raise CliError(f"uninstall: {exc}") from None
        for line in done:
            typer.echo(line)
        if not done:
            typer.echo("nothing of pbsplug's is installed")

    @app.command("periodic")
    def periodic(directory: Path = dir_opt,
                 every: float = typer.Option(0.0, "--every", metavar="SECONDS",
                                             parser=cli_seconds,
                                             help="Run again every SECONDS (default: "
                                                  "once).")) -> None:
        """The server periodic event (the power plugin's decision) over Slurm's nodes,
        reservations and pending jobs, as installed in DIR: run it on the controller from a
        timer (Slurm has no periodic script), as root or as SlurmUser. Run as root with a
        SlurmUser that is not root, the event runs as SlurmUser (the power programs' folders
        are SlurmUser's); its log lines go to root's --log-file. Refused in one line, as
        install refuses, when a user other than root could change the config or what it
        would import (the interpreter, the site folders, the pbsplug package, the plugins'
        packages), unless install was given --allow-unsafe-paths."""
        import os
        import site
        import time

        from ..adapters import rootpaths, slurm, slurm_bridge

        if every > MAX_EVERY:  # (time.sleep cannot wait so long: a traceback after one run)
            raise CliError(f"--every {every:g}: expected at most {MAX_EVERY} seconds (ten "
                           "years)")
        config = slurm.installed_config(directory)
        if config is None:
            raise CliError(f"{directory}: no pbsplug Slurm install here (run 'pbsplug slurm "
                           "install' first, or give --dir)")
        if every < 0:
            raise CliError(f"--every {every:g}: expected a number of seconds >= 0")
        dirs = [str(d) for d in config.get("site_dirs") or ()]
        allow = config.get("allow_unsafe_paths") is True
        how = "run 'pbsplug slurm install --allow-unsafe-paths' (its config then says so)"
        # Each refusal names who would run the code: the user running this (root, or
        # SlurmUser from its own timer), but SlurmUser for the plugins when root becomes
        # SlurmUser before it imports them.
        runner = slurm.user_name(os.geteuid())
        try:  # (one lookup: SlurmUser named below, then become)
            su = (slurm_bridge.slurm_user_entry(config, refuse_missing=True)
                  if os.geteuid() == 0 else None)
        except OSError as exc:
            raise CliError(str(exc)) from None
        _refuse_unsafe("slurm periodic", rootpaths.run_by(runner, rootpaths.installed_paths(
            str(directory / slurm.CONFIG_NAME), dirs)), allow, how)
        for folder in dirs:  # as the programs import (--site-dir); their .pth files run
            site.addsitedir(folder)
        _refuse_unsafe("slurm periodic", rootpaths.run_by(
            runner if su is None else su.pw_name,
            rootpaths.installed_plugin_paths(config.get("plugins") or {})), allow, how)
        if su is not None:
            # root's log opened as root; then SlurmUser for good, before a plugin is
            # loaded: no plugin code runs as root with PBSPLUG_HOME in SlurmUser's folder
            slurm_bridge.open_log(str(config.get("log_file") or ""))
            try:
                slurm_bridge.become_slurm_user(su)
            except OSError as exc:
                raise CliError(str(exc)) from None
        try:
            ctx_ = slurm_bridge.load(config)
        except RuntimeError as exc:
            raise CliError(str(exc)) from None
        while True:
            answer = slurm_bridge.dispatch(ctx_, {"script": "periodic",
                                                  "env": dict(os.environ), "argv": []})
            if answer.get("stdout"):
                typer.echo(answer["stdout"].rstrip("\n"))
            if answer.get("error"):
                typer.echo(answer["error"], err=True)
            if not every:
                if answer.get("exit"):
                    raise typer.Exit(1)
                return
            time.sleep(every)

    @app.command("status")
    def status(ctx: typer.Context,
               as_json: bool = typer.Option(False, "--json", help="JSON output."),
               directory: Path = dir_opt, slurm_conf: Path | None = conf_opt,
               bin_dir: str | None = bin_opt, state_dir: Path = state_opt,
               log_file: Path = log_opt, run_dir: Path = run_opt,
               site_dir: list[Path] = site_opt, native: bool = native_opt) -> None:
        """Per enabled plugin: which hooks run where in Slurm, which cannot (with why), and
        whether what is installed matches the site (give the options install was given)."""
        from ..adapters import slurm

        view = slurm.SlurmConf(_conf_path(slurm_conf))  # (read once: one view of the file)
        p = _slurm_plan(ctx, directory, site_dir, bin_dir, slurm_conf, state_dir, log_file,
                        run_dir, native, view, "status")
        try:
            rows = slurm.status(p, view)
        except slurm.SlurmInstallError as exc:  # (its line names the file)
            raise CliError(str(exc)) from None
        except OSError as exc:
            raise CliError(f"status: {exc}") from None
        if as_json:
            typer.echo(json.dumps(rows, indent=2))
            return
        typer.echo(f"Slurm runs: {slurm.launcher(directory)}")
        for row in rows:
            typer.echo(f"{row['plugin']}: {row['state']}")
            for hook, where in row["runs"].items():
                typer.echo(f"    {hook}: {where}")
            for hook, why in row["cannot"].items():
                typer.echo(f"    not in Slurm: {hook}: {why}")
            for line in row["problems"]:
                typer.echo(f"    differs: {line}")
            for line in row["unsafe"]:
                typer.echo(f"    unsafe: {line}")

    return app
