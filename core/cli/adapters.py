"""``pbsplug pbs ...``: the site's plugins inside a real PBS (`pbsplug.adapters.pbs`)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import typer

from . import CliError

_QMGR_HELP = "The qmgr command to run, split as a shell would (default: qmgr on PATH)."


def _qmgr(command: str):
    from ..adapters.pbs import Qmgr

    return Qmgr(shlex.split(command) or ["qmgr"])


def _plan(ctx: typer.Context, site_dir: list[Path]):
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
                qmgr: str = typer.Option("qmgr", "--qmgr", help=_QMGR_HELP)) -> None:
        """One site hook per enabled plugin (pbsplug_<plugin>): created, or updated where it
        differs; hooks of plugins the site no longer enables are removed."""
        from ..adapters import pbs

        p = _plan(ctx, site_dir)
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

    return app
