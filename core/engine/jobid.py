"""Job identifiers as PBS's commands take them, read in one place for the commands and the
server: ``12``, ``12.server``, ``12@server`` and ``12.server@server`` (``12[]`` too), the
server named by its name or its host's, in any case; an array's subjobs
``12[3]``, ``12[2-5]`` and ``12[1-9:2]`` too (OpenPBS 23.06 takes ``12@VM`` and
``12.VM`` for server ``vm``, checked). Standard library only: the commands import it."""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable
from typing import NamedTuple

#: A job identifier's form: its number (with PBS's ``[]`` of an array), the server after a
#: ``.`` and the server after an ``@``.
_FORM = re.compile(r"^(\d+(?:\[(?:\d+(?:-\d+(?::\d+)?)?)?\])?)(?:\.([^@\s]+))?(?:@([^@\s]+))?\Z")


class JobId(NamedTuple):
    """A job identifier's parts: `number` (``12``), `suffix` (what follows the ``.``, or
    None) and `at` (the server after the ``@``, or None)."""

    number: str
    suffix: str | None
    at: str | None


def parse(text: str) -> JobId | None:
    """`text`'s parts, or None when it has not a job identifier's form (``abc``,
    ``1@a@b``)."""
    m = _FORM.match(text) if isinstance(text, str) else None
    return None if m is None else JobId(m[1], m[2], m[3])


def names_server(name: str, server: str, host_names: Iterable[str] = ()) -> bool:
    """Whether `name` is this server's: its name or one of its host's names, in any case."""
    return name.lower() in {n.lower() for n in (server, *host_names)}


def host_names() -> tuple[str, ...]:
    """This host's names, short and full, as the server reads them (`Engine.host_names`)."""
    short = socket.gethostname().split(".")[0]
    fqdn = socket.getfqdn()
    return tuple(dict.fromkeys((short, socket.gethostname(),
                                *([fqdn] if fqdn.split(".")[0] == short else []))))


def names_this_host(name: str, names: Iterable[str] = ()) -> bool:
    """Whether `name` (``-o name:/path``'s host) is this machine: ``localhost`` or one of
    its names (`names`, by default `host_names()`), in any case."""
    return name.lower() in {n.lower() for n in (*(names or host_names()), "localhost")}


def full_id(text: str, server: str, host_names: Iterable[str] = ()) -> str | None:
    """``<number>.<server>``, the id the server keeps, for any of the forms this server's
    jobs take (`parse`); None for text of another form, or naming another server."""
    parts = parse(text)
    if parts is None:
        return None
    names = tuple(host_names)
    for named in (parts.suffix, parts.at):
        if named is not None and not names_server(named, server, names):
            return None
    return f"{parts.number}.{server}"


__all__ = ["JobId", "full_id", "host_names", "names_server", "parse"]
