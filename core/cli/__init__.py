"""The ``pbsplug`` command line (typer).

The application is built by `make_app`, a factory, so tests need no module reloads. Plugin
command groups (``pbsplug <plugin> ...``) are added only when the command line names one:
``pbsplug --version`` and ``pbsplug --help`` import no plugin, and PBS's commands
(``pbsplug qsub``, `pbs`) run without typer. Errors print one line
(``pbsplug: error: ...``, exit 2) unless ``--debug`` is given.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (typer is imported where it is used: `--version` does without it)
    import typer

EXIT_ERROR = 2
#: Options of the root command that take a value (skipped when looking for the command name).
_VALUE_OPTIONS = ("--site",)


class CliError(Exception):
    """An error the CLI reports in one line (exit 2)."""


def _version() -> str:
    from .. import __version__

    return f"pbsplug {__version__}"


def _command_name(argv: Sequence[str]) -> str | None:
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg in _VALUE_OPTIONS:
            skip = True
            continue
        if arg.startswith("-"):
            continue
        return arg
    return None


def _site_arg(argv: Sequence[str]) -> str | None:
    for i, arg in enumerate(argv):
        if arg == "--site" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--site="):
            return arg.split("=", 1)[1]
    return None


def _hoist_site(argv: Sequence[str]) -> list[str]:
    """``--site FILE`` is the root command's option; accept it after the subcommand too
    (``pbsplug plugins list --site FILE``) by moving it just before the subcommand, where a
    later one still wins, and leaving what follows a ``--`` alone. Not under ``sim``, whose
    commands read their own (``sim compare`` takes two)."""
    if _command_name(argv) == "sim":  # `sim compare` takes two --site of its own
        return list(argv)
    out: list[str] = []
    hoisted: list[str] = []
    command_at = -1
    args = iter(argv)
    for arg in args:
        if arg == "--":
            out.append(arg)
            out.extend(args)
            break
        if command_at >= 0 and arg.startswith("--site="):
            hoisted.append(arg)
            continue
        if command_at >= 0 and arg == "--site":
            value = next(args, None)
            if value is None:
                out.append(arg)  # no value: left for typer to report
            else:
                hoisted.extend([arg, value])
            continue
        if command_at < 0 and not arg.startswith("-") and (
                not out or out[-1] not in _VALUE_OPTIONS):
            command_at = len(out)
        out.append(arg)
    if command_at < 0 or not hoisted:
        return out
    return out[:command_at] + hoisted + out[command_at:]


def make_app(argv: Sequence[str] = ()) -> typer.Typer:
    """The typer application; when `argv` names a plugin's command group, with that group."""
    from .commands import BUILTIN_GROUPS, build_app

    app = build_app()
    name = _command_name(argv)
    if name and name not in BUILTIN_GROUPS:
        from .commands import add_plugin_group

        add_plugin_group(app, name, _site_arg(argv), "--strict" in argv)
    return app


def _setup_logging(debug: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("pbsplug: %(levelname)s: %(message)s"))
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``pbsplug`` script."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv in (["--version"], ["-V"]):  # fast path: no typer, no plugin
        print(_version())
        return 0
    if argv:
        from . import pbs

        if argv[0] in pbs.COMMANDS:  # PBS's commands parse their own options: no typer
            args = _hoist_site(argv)
            at = 0  # `pbsplug qstat --site FILE`: set as the root command's option sets it
            while args[at] == "--site" or args[at].startswith("--site="):
                site = args[at + 1] if args[at] == "--site" else args[at].split("=", 1)[1]
                os.environ["PBSPLUG_SITE"] = site
                at += 2 if args[at] == "--site" else 1
            return pbs.run(argv[0], args[at + 1:])
    debug = "--debug" in argv or os.environ.get("PBSPLUG_DEBUG") == "1"
    _setup_logging(debug)
    from ..hookattrs import HookAttributeError
    from ..plugins import PluginLoadError
    from ..settings import ConfigError

    argv = _hoist_site(argv)
    try:
        app = make_app(argv)
        # Standalone mode: typer reports usage errors itself and ends with SystemExit.
        app(args=argv, prog_name="pbsplug", standalone_mode=True)
        return 0
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except (CliError, ConfigError, PluginLoadError, HookAttributeError, ValueError,
            OSError) as exc:
        if debug:
            raise
        text = str(exc)
        lines = text.splitlines() or [type(exc).__name__]
        print(f"pbsplug: error: {lines[0]}", file=sys.stderr)
        for line in lines[1:]:
            print(f"pbsplug: error: {line}", file=sys.stderr)
        return EXIT_ERROR


__all__ = ["CliError", "main", "make_app"]
