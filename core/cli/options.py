"""Numbers on the command line, the kernel's commands' and plugins' (kernel API 1.7).

typer reads an ``int`` or ``float`` option with Python's own rules: ``1_0`` is 10, and a
float may be ``nan`` or ``inf``, which no count or number of seconds is. These parsers read
numbers as PBS does (ASCII digits; `pbsplug.digits`, `values.number`) and are given to an
option as typer's ``parser=``::

    last: int = typer.Option(20, "--last", parser=pbsplug.cli_count)
    timeout: float = typer.Option(30.0, "--timeout", parser=pbsplug.cli_seconds)

A bad value is typer's usage error, one line naming the option (exit 2). A default is
taken as it is.
"""

from __future__ import annotations

from typing import Any

import typer

from ..values import LONG_MAX, BadValue, digits, number, past, quoted


def cli_count(text: Any) -> int:
    """A whole number from 0 to 2**63-1, written in ASCII digits (``--last 20``)."""
    if type(text) is int:  # (the option's default)
        return text
    if not isinstance(text, str) or not digits(text.strip()):
        raise typer.BadParameter(f"{quoted(text)} is not a whole number (digits 0-9)")
    text = text.strip()
    if past(text, LONG_MAX):
        raise typer.BadParameter(f"{quoted(text)} is more than {LONG_MAX}")
    return int(text)


def cli_seconds(text: Any) -> float:
    """A finite number of seconds, 0 or more (``--timeout 2.5``): digits, a point, an
    exponent; not ``nan``, ``inf`` or ``1_0``."""
    if type(text) in (int, float):  # (the option's default)
        return float(text)
    try:
        value = number(text, "")
    except BadValue:
        value = -1.0
    if value < 0:
        raise typer.BadParameter(f"{quoted(text)} is not a number of seconds >= 0")
    return value + 0.0  # (-0 is 0)


__all__ = ["cli_count", "cli_seconds"]
