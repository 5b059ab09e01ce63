"""``pbsplug mjf drain | undrain | serve | show | time-left``."""

from __future__ import annotations

import json
import os
from datetime import datetime

import typer

from pbsplug import cli_count, clock, plugin_config


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"pbsplug mjf: {message}", err=True)
    return typer.Exit(code)


def _when(seconds: int) -> str:
    return datetime.fromtimestamp(seconds).astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")


def parse_time(text: str) -> int:
    """Seconds since the epoch, or an ISO 8601 time (local time unless it names a zone)."""
    text = text.strip()
    if text.lstrip("-").isascii() and text.lstrip("-").isdigit():
        return int(text)
    try:
        return int(datetime.fromisoformat(text).timestamp())
    except ValueError:
        raise typer.BadParameter(f"{text!r}: expected seconds since the epoch or an ISO 8601 "
                                 "time such as 2026-11-23T18:00", param_hint="--at") from None


def _host_dir(config, host: str | None):
    from . import files, machine_dir, this_host
    from .derive import HostError, MJFError

    try:
        directory = machine_dir(config, host)
    except MJFError as exc:
        raise typer.BadParameter(str(exc), param_hint="--host") from None
    if not directory.is_dir():
        raise _fail(f"no $MACHINEFEATURES for host {host or this_host()} at {directory}: is "
                    "the mjf plugin enabled on that host's engine, and has it started?")
    try:  # drain and undrain write there, as root on a real host
        files.check_base(directory)
    except HostError as exc:
        raise _fail(str(exc)) from None
    return directory


def _locations(job: str | None, host: str | None) -> tuple[str, str]:
    """$MACHINEFEATURES and $JOBFEATURES: the job's own environment, or (--job, --host) the
    configured directories on this execution host."""
    config = plugin_config("mjf") if job or host else None
    machine = (str(_host_dir(config, host)) if host
               else os.environ.get("MACHINEFEATURES") or (
                   str(_host_dir(config, None)) if config else ""))
    if job:
        from . import job_dir
        from .derive import MJFError

        try:
            path = job_dir(config, job)
        except MJFError as exc:
            raise typer.BadParameter(str(exc), param_hint="--job") from None
        if not path.is_dir():
            raise _fail(f"no $JOBFEATURES for job {job} at {path}: is it running on this host?")
        job_location = str(path)
    else:
        job_location = os.environ.get("JOBFEATURES", "")
    if not job_location:
        raise _fail("not inside a job: $JOBFEATURES is not set (on the execution host, name "
                    "the job with --job JOBID)")
    if not machine:
        raise _fail("$MACHINEFEATURES is not set (on the execution host, use --host HOST)")
    return machine, job_location


def register(cli: typer.Typer) -> None:
    @cli.command("drain")
    def drain(at: str = typer.Option(None, "--at", metavar="TIME",
                                     help="When the host shuts down: seconds since the epoch, "
                                          "or ISO 8601 such as 2026-11-23T18:00."),
              in_: int = typer.Option(None, "--in", metavar="SECONDS", parser=cli_count,
                                      help="When the host shuts down, in seconds from now."),
              host: str = typer.Option(None, "--host",
                                       help="The host to drain (default: this one).")) -> None:
        """Announce the host's shutdown: $MACHINEFEATURES/shutdowntime now, and each running
        job's shutdowntime_job at the next exechost_periodic (the earlier of the job's end and
        the shutdown, never sooner than grace_secs_job from then). A time sooner than
        grace_secs from now is refused."""
        from . import files
        from .derive import MJFError

        if (at is None) == (in_ is None):
            raise typer.BadParameter("give the shutdown time with --at TIME or --in SECONDS "
                                     "(one of them)")
        now = int(clock.now())
        when = parse_time(at) if at is not None else now + in_
        try:  # (a count or an epoch past any date: its message cannot even name it)
            _when(when)
        except (OverflowError, OSError, ValueError):
            raise _fail(f"the drain time {when} is no date (seconds since the epoch up to "
                        "the year 9999)", 2) from None
        config = plugin_config("mjf")
        if when <= now:
            raise _fail(f"the drain time {when} ({_when(when)}) is in the past", 2)
        grace = config["grace_secs"]  # 0 by default: always written beside shutdowntime
        if when < now + grace:
            raise _fail(f"the drain time {when} ({_when(when)}) is sooner than grace_secs "
                        f"({grace} s) from now; the earliest allowed is {now + grace} "
                        f"({_when(now + grace)})", 2)
        directory = _host_dir(config, host)
        try:
            before = files.read_key(directory, "shutdowntime")
            files.write_key(directory, "grace_secs", grace)
            files.write_key(directory, "shutdowntime", when)
        except MJFError as exc:
            raise _fail(str(exc)) from None
        typer.echo(f"{directory.name}: shutdowntime {when} ({_when(when)})"
                   + (f", was {before}" if before is not None else "")
                   + "; running jobs get shutdowntime_job at the next exechost_periodic")

    @cli.command("undrain")
    def undrain(host: str = typer.Option(None, "--host",
                                         help="The host (default: this one).")) -> None:
        """Withdraw the host's shutdown: $MACHINEFEATURES/shutdowntime removed now, the
        running jobs' shutdowntime_job at the next exechost_periodic."""
        from . import files
        from .derive import MJFError

        directory = _host_dir(plugin_config("mjf"), host)
        try:
            before = files.read_key(directory, "shutdowntime")
            files.remove_key(directory, "shutdowntime")
        except MJFError as exc:
            raise _fail(str(exc)) from None
        if before is None:
            typer.echo(f"{directory.name}: was not draining")
        else:
            typer.echo(f"{directory.name}: shutdowntime {before} removed; running jobs lose "
                       "shutdowntime_job at the next exechost_periodic")

    @cli.command("serve")
    def serve(bind: str = typer.Option(..., "--bind", metavar="ADDR:PORT",
                                       help="Where to listen, such as 0.0.0.0:8080."),
              max_age: int = typer.Option(60, "--max-age", parser=cli_count,
                                          help="Cache-Control max-age, in seconds."),
              quiet: bool = typer.Option(False, "--quiet",
                                         help="No access log on stderr.")) -> None:
        """Publish the feature directories over HTTP, read-only, until Ctrl-C:
        /machinefeatures/<host>/<key> and /jobfeatures/<job id>/<key>."""
        from .derive import HostError
        from .serve import parse_bind
        from .serve import serve as make_server

        try:
            parse_bind(bind)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--bind") from None
        config = plugin_config("mjf")
        try:
            server = make_server(config["machinefeatures_dir"], config["jobfeatures_dir"],
                                 bind, max_age=max_age, quiet=quiet)
        except HostError as exc:  # folders another user could change: not served
            raise _fail(str(exc)) from None
        except OSError as exc:
            raise _fail(f"cannot listen on {bind}: {exc.strerror or exc}") from None
        typer.echo(f"serving $MACHINEFEATURES from {config['machinefeatures_dir']} and "
                   f"$JOBFEATURES from {config['jobfeatures_dir']} at {server.url} "
                   "(Ctrl-C stops)", err=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()

    @cli.command("show")
    def show(job: str = typer.Option(None, "--job", help="A job on this execution host "
                                                         "(default: $JOBFEATURES)."),
             host: str = typer.Option(None, "--host", help="A host (default: "
                                                           "$MACHINEFEATURES)."),
             as_json: bool = typer.Option(False, "--json", help="JSON, for scripts.")) -> None:
        """The current job's features, machine and job, and the time it has left."""
        from . import read_features, time_left
        from .derive import MJFError

        machine_at, job_at = _locations(job, host)
        try:
            machine, job_values = read_features(machine_at), read_features(job_at)
        except MJFError as exc:
            raise _fail(str(exc)) from None
        left = time_left(machine, job_values)
        if as_json:
            typer.echo(json.dumps({"machinefeatures": {"location": machine_at,
                                                       "features": machine},
                                   "jobfeatures": {"location": job_at, "features": job_values},
                                   "time_left": left}, indent=2))
            return
        for title, location, values in (("$MACHINEFEATURES", machine_at, machine),
                                        ("$JOBFEATURES", job_at, job_values)):
            typer.echo(f"{title} {location}")
            width = max((len(k) for k in values), default=0)
            for key, value in values.items():
                typer.echo(f"  {key:<{width}}  {value}")
        typer.echo(f"time left  {left if left is not None else 'unknown'}")

    @cli.command("time-left")
    def time_left_command(job: str = typer.Option(None, "--job", help="A job on this "
                                                                      "execution host."),
                          host: str = typer.Option(None, "--host", help="A host.")) -> None:
        """Seconds the current job may still run, as DIRAC computes them: the earliest of
        jobstart_secs + wall_limit_secs, shutdowntime_job and shutdowntime, minus now. Exits
        1 when none of them is known."""
        from . import read_features, time_left
        from .derive import MJFError

        machine_at, job_at = _locations(job, host)
        try:
            left = time_left(read_features(machine_at), read_features(job_at))
        except MJFError as exc:
            raise _fail(str(exc)) from None
        if left is None:
            raise _fail("no limit is known: no walltime, shutdowntime_job or shutdowntime")
        typer.echo(str(left))
