"""``pbsplug cray_atom check`` and ``pbsplug cray_atom fake-service``."""

from __future__ import annotations

import json
import logging
import stat
from pathlib import Path

import typer

from pbsplug import cli_seconds, plugin_config


def register(cli: typer.Typer) -> None:
    @cli.command("check")
    def check(timeout: float = typer.Option(5.0, parser=cli_seconds,
                                            help="Seconds to wait for ATOM's answer."),
              socket_file: str = typer.Option(None, "--socket",
                                              help="Ask this socket instead of the "
                                                   "configured unix_socket_file.")) -> None:
        """Whether ATOM's socket exists, whether ATOM answers, and what it answers on
        GET /rm/v1/jobs. Exits 0 when ATOM answers 200, 1 otherwise."""
        from . import MAX_TIMEOUT
        from .atom import Atom, AtomFailure, answer, describe, jobs_url

        if not 0 < timeout <= MAX_TIMEOUT:  # also refuses inf and nan
            typer.echo(f"pbsplug cray_atom check: --timeout {timeout:g}: expected seconds "
                       f"> 0 and <= {MAX_TIMEOUT:g}", err=True)
            raise typer.Exit(2)
        config = plugin_config("cray_atom")
        if socket_file:
            config["unix_socket_file"] = socket_file
        path = Path(config["unix_socket_file"])
        typer.echo(f"unix_socket_file  {path}")
        if not path.exists():
            typer.echo("socket            missing: not a Shasta node here, so the hook accepts "
                       "every job without a request")
            raise typer.Exit(1)
        if not stat.S_ISSOCK(path.stat().st_mode):
            typer.echo("socket            exists but is not a UNIX socket")
            raise typer.Exit(1)
        typer.echo("socket            present")
        url = jobs_url(str(path))
        quiet = logging.getLogger("pbsplug_cray_atom.check")  # this command prints it all
        quiet.propagate = False
        if not quiet.handlers:
            quiet.addHandler(logging.NullHandler())
        atom = Atom(config, quiet)
        try:
            response = atom.list_jobs(timeout)
        except AtomFailure as exc:  # no answer in time, or no connection
            typer.echo(f"GET {url}  {str(exc).split(': ', 1)[1]}")
            raise typer.Exit(1) from None
        finally:
            atom.close()
        typer.echo(f"GET {url}  {describe(response)}")
        if response.status_code == 200:
            try:
                jobs = answer(response)
            except ValueError:  # (jsontext's JsonError: describe said why)
                jobs = None
            if isinstance(jobs, list):
                typer.echo(f"jobs ATOM holds   {len(jobs)}")
                for job in jobs:
                    typer.echo("  " + json.dumps(job, sort_keys=True))
            return
        raise typer.Exit(1)

    @cli.command("fake-service")
    def fake_service(socket_file: str = typer.Option(..., "--socket",
                                                     help="Where to listen.")) -> None:
        """Run a stand-in ATOM service on a UNIX socket until Ctrl-C, to try the plugin on
        the local engine (it answers as ATOM's job API does)."""
        from .fake import FakeAtom

        atom = FakeAtom(socket_file)
        typer.echo(f"fake ATOM service listening on {socket_file} (Ctrl-C stops it)")
        try:
            atom.serve_forever()
        except KeyboardInterrupt:
            typer.echo(f"stopped; it saw {len(atom.requests)} requests")
