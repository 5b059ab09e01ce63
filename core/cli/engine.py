"""The local engine's commands as typer knows them: ``pbsplug server start|stop|status``,
``pbsplug demo``, and PBS's user commands (`pbs`) for ``pbsplug --help``."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import typer

if TYPE_CHECKING:  # (for the annotations only)
    import click
    from typer.core import TyperCommand

from . import CliError, pbs
from .options import cli_seconds
from .pbs import engine_client, engine_home

#: Seconds `server stop` waits for the server to take its request before it sends SIGTERM
#: (when it may: the server's user or root).
STOP_ANSWER = 5.0
#: Raw commands: typer hands them every argument untouched.
_RAW = {"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []}


def _raw_command_class() -> type[TyperCommand]:
    """A typer command that keeps its arguments exactly as given: the option parser would
    drop a ``--`` (``qsub -- command args`` needs it)."""
    from typer.core import TyperCommand

    class RawCommand(TyperCommand):
        def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
            ctx.meta["pbs_args"] = list(args)
            return super().parse_args(ctx, args)

    return RawCommand


def add_engine_commands(app: typer.Typer) -> None:
    app.add_typer(_server_app(), name="server")

    @app.command("demo")
    def demo(keep: bool = typer.Option(False, "--keep",
                                       help="Keep the demo's home folder to look at.")) -> None:
        """Run the local engine with every installed plugin on a small real workload."""
        from ..engine.demo import run_demo

        raise typer.Exit(run_demo(keep=keep))

    raw = _raw_command_class()
    for name, (_, usage) in pbs.COMMANDS.items():
        app.command(name, cls=raw, context_settings=_RAW, add_help_option=False)(
            _typer_command(name, usage))


def _typer_command(name: str, usage: str) -> Callable[..., Any]:
    """A PBS command as typer lists it; `pbsplug.cli.main` runs these without typer."""

    def command(ctx: typer.Context) -> None:
        raise typer.Exit(pbs.run(name, list(ctx.meta.get("pbs_args", ctx.args))))

    command.__doc__ = f"PBS's {name}. {usage}"
    command.__name__ = name
    return command


# -- the server ---------------------------------------------------------------------------------

def _server_app() -> typer.Typer:
    app = typer.Typer(help="Start, stop and query the local engine's server.",
                      no_args_is_help=True)

    @app.command("start")
    def start(foreground: bool = typer.Option(False, "--foreground", "-f",
                                              help="Run in this process until stopped.")
              ) -> None:
        """Start the server of this home ($PBSPLUG_HOME)."""
        from ..engine.api import AlreadyRunning, serve, start_background

        home = engine_home()
        try:
            if foreground:
                serve(home)
                return
            pid = start_background(home)
        except (AlreadyRunning, RuntimeError) as exc:  # one that died at start says why
            raise CliError(str(exc)) from None
        typer.echo(f"pbsplug server started (pid {pid}) in {home.root}")

    @app.command("stop")
    def stop(timeout: float = typer.Option(30.0, parser=cli_seconds,
                                           help="Seconds to wait for it to stop.")
             ) -> None:
        """Stop the server; running jobs keep running and are adopted by the next start."""
        from ..engine.client import ServerUnavailable
        from ..engine.errors import PbsError

        home = engine_home()
        pid = home.server_pid()
        if pid is None:
            raise CliError(f"no server runs in {home.root}")
        from ..engine.client import Client

        try:
            Client(home, timeout=STOP_ANSWER)("shutdown")
        except ServerUnavailable as exc:
            # Busy (a hook still running, say): its owner may still stop it with SIGTERM,
            # which kills a running hook's process at once.
            try:
                os.kill(pid, signal.SIGTERM)
            except OSError:
                raise CliError(str(exc)) from None
        except PbsError as err:  # PBS's qterm: "Unauthorized Request" for a non-manager
            raise CliError(f"cannot stop the server: {err.message} ({err.code})") from None
        deadline = time.monotonic() + timeout
        while home.server_pid() is not None:
            if time.monotonic() > deadline:
                raise CliError(f"the server (pid {pid}) did not stop within {timeout:g} s")
            time.sleep(0.05)
        typer.echo(f"pbsplug server stopped (pid {pid})")

    @app.command("status")
    def status(as_json: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
        """Whether a server runs in this home, and what it holds."""
        from ..engine.client import ServerUnavailable
        from ..engine.errors import PbsError

        home = engine_home()
        if home.server_pid() is None:
            typer.echo(f"no server runs in {home.root}")
            raise typer.Exit(1)
        try:
            info = engine_client()("status")
        except ServerUnavailable as exc:
            raise CliError(str(exc)) from None
        except PbsError as err:
            raise CliError(f"{err.message} ({err.code})") from None
        if as_json:
            typer.echo(json.dumps(info, indent=2))
            return
        jobs = ", ".join(f"{n} {s}" for s, n in info["jobs"].items())
        typer.echo(f"server {info['server']} (pid {info['pid']}) in {info['home']}: "
                   f"jobs {jobs}; plugins enabled: {', '.join(info['plugins']) or 'none'}")

    return app


__all__ = ["add_engine_commands"]
