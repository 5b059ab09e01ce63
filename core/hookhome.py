"""Where a plugin's hooks keep their state when a batch system runs them as another user than
the one who runs a command (kernel API 1.8).

A plugin's default state folder is under the pbsplug home of the process that runs the hook
(``<home>/hooks/tmp``). Inside Slurm with a SlurmUser that is not root, slurmctld runs some
hooks (PrologSlurmctld, the power programs) as SlurmUser, whose pbsplug home is a folder of
its own (docs/slurm.md); a command of the plugin's run by root (``pbsplug power status``)
looked in root's home and found nothing. The adapter's install records, in the pbsplug home
of the user who ran it (`RECORD`), which plugins' hooks run as which user with which home;
`hook_home` reads it, and the command reads that user's records as theirs, by
`pbsplug.safedirs`' rule for such reads (``owner=``)::

    from pbsplug import default_home, hook_home, safedirs

    away = hook_home("mine")          # None: the hooks run with this process's home
    home = away.home if away else default_home()
    text = safedirs.read_text(home / "hooks" / "tmp" / "mine.json",
                              owner=away.uid if away else None)

`hook_home` raises `OSError` (one line naming the file and what is wrong) for a record that
is not one, or that another user could have written.
"""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from . import safedirs
from .jsontext import JsonError, loads
from .siteconfig import default_home

__all__ = ["RECORD", "HookHome", "forget_hook_homes", "hook_home", "record_hook_homes"]

#: The record, in a pbsplug home.
RECORD = "hook_homes.json"


@dataclass(frozen=True)
class HookHome:
    """Plugin `plugin`'s hooks run as `user` (uid `uid`) with the pbsplug home `home`, as
    `recorded_by` (the install that wrote it, ``"pbsplug slurm install"``) says."""

    plugin: str
    home: Path
    user: str
    uid: int
    recorded_by: str


def _bad(path: Path, why: str) -> OSError:
    return OSError(f"{path}: not a record of where plugins' hooks run ({why}); run the "
                   "install that wrote it again, or remove it")


def hook_home(plugin: str, home: str | os.PathLike[str] | None = None) -> HookHome | None:
    """Where plugin `plugin`'s hooks run, as recorded in the pbsplug home `home` (default:
    this process's, `default_home`); None when nothing is recorded for it (its hooks run
    with this process's home). `OSError` in one line when the record cannot be used: not
    one, written by another user (`pbsplug.safedirs`), or naming a user this host does not
    have."""
    path = Path(home if home is not None else default_home()) / RECORD
    try:
        safedirs.check_folder(path.parent, "the pbsplug home")
        text = safedirs.read_text(path)
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:  # (was the traceback of 'pbsplug power status')
        raise _bad(path, f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset "
                         f"{exc.start:,})") from None
    try:  # (root reads it: it may be a service user's; `pbsplug.jsontext`'s limits)
        data = loads(text, "the record")
    except JsonError as exc:
        raise _bad(path, exc.why) from None
    plugins = data.get("plugins") if isinstance(data, dict) else None
    if not isinstance(plugins, dict):
        raise _bad(path, 'no "plugins" object')
    entry = plugins.get(plugin)
    if entry is None:
        return None
    if not isinstance(entry, dict) or not isinstance(entry.get("user"), str) \
            or not isinstance(entry.get("home"), str) or not entry["home"].startswith("/"):
        raise _bad(path, f'plugin {plugin!r}: expected {{"user": name, "home": absolute '
                         f"path}}, found {json.dumps(entry)[:80]}")
    if "\0" in entry["user"] or "\0" in entry["home"]:  # (pwd and stat raised ValueError)
        raise _bad(path, f"plugin {plugin!r}: a NUL character in its user or home, found "
                         f"{json.dumps(entry)[:80]}")
    try:  # (JSON's \ud800 alone: pwd and stat raised UnicodeEncodeError, naming nothing)
        os.fsencode(entry["user"]), os.fsencode(entry["home"])
    except UnicodeError:
        raise _bad(path, f"plugin {plugin!r}: a character no name or path holds (a lone "
                         f"surrogate) in its user or home, found {json.dumps(entry)[:80]}"
                   ) from None
    try:
        uid = pwd.getpwnam(entry["user"]).pw_uid
    except KeyError:
        raise OSError(f"{path}: plugin {plugin}'s hooks run as {entry['user'][:40]!r}, who is "
                      "no user on this host; run the install that wrote it again") from None
    return HookHome(plugin, Path(entry["home"]), entry["user"], uid,
                    str(data.get("recorded_by") or ""))


def record_hook_homes(homes: Mapping[str, tuple[str, str]], recorded_by: str,
                      home: str | os.PathLike[str] | None = None) -> Path | None:
    """For an adapter's install: plugin -> (user, pbsplug home) of its hooks recorded in the
    pbsplug home `home` (default: this process's), written whole, 0644 (every user's
    commands may read it); with no `homes`, a record `recorded_by` wrote is removed
    (`forget_hook_homes`). The record's path, or None when there is none. The folder is
    made when missing, by `pbsplug.safedirs`' rule (`UnsafeFolder` otherwise)."""
    if not homes:
        forget_hook_homes(recorded_by, home)
        return None
    folder = safedirs.ensure_folder(os.fspath(home) if home is not None else default_home(),
                                    "the pbsplug home")
    data = {"recorded_by": recorded_by,
            "plugins": {name: {"user": user, "home": str(where)}
                        for name, (user, where) in sorted(homes.items())}}
    safedirs.write_text(folder / RECORD, json.dumps(data, indent=1, sort_keys=True) + "\n")
    return folder / RECORD


def forget_hook_homes(recorded_by: str, home: str | os.PathLike[str] | None = None) -> bool:
    """The record in the pbsplug home `home` removed if `recorded_by` wrote it; whether it
    was."""
    path = Path(home if home is not None else default_home()) / RECORD
    try:
        data = loads(safedirs.read_text(path), "the record")
    except (OSError, ValueError):
        return False
    if not isinstance(data, dict) or data.get("recorded_by") != recorded_by:
        return False
    path.unlink(missing_ok=True)
    return True
