"""What the periodic hook keeps between runs, in its state folder (PBS keeps its
``pbs_power_nodes_file`` in server_priv/hooks/tmp). Two files, each written whole (a
temporary file renamed):

``power_booting.json``: the hosts powered on and not ready yet, with when, and the boot delay.
The next run asks the driver about them; the scheduler's availability hook reads it every
cycle, so it stays small::

    {"booting": {"h3": 1699999990}, "boot_delay": 300}

``power_status.json``: the last run, host by host, as ``pbsplug power status`` shows it::

    {"time": 1700000000, "mode": "on_off", "driver": "simulated",
     "hosts": {"h1": {"power": "asleep", "last_used": 1699996000, "eligible": true,
                      "why": "asleep; nothing needs it within 900 s"}}}

Each host holds when it was last used (``last_used``: its vnodes' latest ``last_used_time``,
the run's time for a host it woke, null when never used), not how long it has been idle:
`status` gives each host its ``idle`` as of the run, ``time`` - ``last_used``, which is what
its ``why`` is as of. So a run whose hosts and reasons are the last run's writes the last
run's text with its own time, and does not go over the hosts again. A record of the previous
release, with ``idle`` (seconds) instead of ``last_used``, is read as it was; the next run
writes it anew.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pbsplug import default_home, hook_home, jsontext, safedirs

BOOTING_FILE = "power_booting.json"
STATUS_FILE = "power_status.json"


def state_dir(config: Mapping[str, Any]) -> Path:
    """The configured ``state_dir``, else ``<pbsplug home>/hooks/tmp``."""
    configured = config.get("state_dir")
    env = os.environ
    return _state_dir(str(configured) if configured else None, env.get("PBSPLUG_HOME"),
                      env.get("XDG_DATA_HOME"), env.get("HOME"), os.geteuid())


@functools.lru_cache(maxsize=64)
def _state_dir(configured: str | None, *home: Any) -> Path:
    """`state_dir`, made once for each configured folder and what `default_home` reads
    (`home`: only a key); the scheduler's hook asks for it every cycle."""
    return Path(configured) if configured else default_home() / "hooks" / "tmp"


def records_dir(config: Mapping[str, Any]) -> tuple[Path, int | None]:
    """Where the periodic hook keeps its records, for a command of this process's user to
    read (`status`, `booting`), and the uid of the user whose they are when that is
    another user (else None). An adapter that runs the hook as another user with a home
    of its own (Slurm's SlurmUser) records it (`pbsplug.hook_home`): the default folder is
    then under that home, and the configured ``state_dir`` is that user's too. `OSError`
    in one line when that record cannot be used."""
    away = hook_home("power")
    if away is None:
        return state_dir(config), None
    configured = config.get("state_dir")
    return (Path(str(configured)) if configured else away.home / "hooks" / "tmp"), away.uid


def folder_error(exc: OSError, directory: Path) -> str:
    """`exc`, raised reading or writing the records in `directory`, in one line naming the
    setting: an error of the system's (``state_dir`` a file, unreadable) named only the
    record's path. A refusal or a record of the wrong shape says so itself."""
    if isinstance(exc, safedirs.UnsafeFolder) or not exc.errno:
        return str(exc)
    where = f" ({exc.filename})" if exc.filename and str(exc.filename) != str(directory) else ""
    return f"state_dir {directory}: {exc.strerror}{where}"


def _not_ours(path: Path, why: str) -> OSError:
    """A record the hook cannot use: an `OSError` naming the file and what is wrong, which
    the periodic run turns into its reject (it must not silently forget booting hosts)."""
    return OSError(f"{path}: not the power hook's JSON record ({why}); remove it to start "
                   "afresh")


def checked_dir(directory: Path, owner: int | None = None) -> Path:
    """`directory`, or `safedirs.UnsafeFolder` (an `OSError`: the periodic run rejects
    with it, `power status` says it) naming it, its owner and its mode when another user
    could plant or change the records in it: a forged booting record had the scheduler plan
    hosts as waking and the run power them as it said. `owner`: the uid of the user whose
    records they are (`records_dir`), when that is not this process's."""
    return safedirs.check_folder(directory, "state_dir", owner=owner)


def _read(path: Path, owner: int | None = None) -> dict[str, Any] | None:
    """The file's JSON object; None when there is no file. A file that does not parse, or
    is not an object, or that another user could have written (`safedirs.open_file`), is an
    `OSError` naming it."""
    try:
        return jsontext.loads(safedirs.read_text(path, owner=owner), str(path), expect=dict)
    except FileNotFoundError:
        return None
    except jsontext.JsonError as exc:  # (NaN and 1e400 too: status --json wrote them out)
        raise _not_ours(path, exc.why) from None
    except UnicodeDecodeError as exc:  # (read_text's: not UTF-8)
        raise _not_ours(path, str(exc)) from None


#: The latest epoch time a record may hold (year 5138): any later one is not the hook's,
#: and would overflow where it is turned into a float or a date.
LATEST_TIME = 10**11


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_time(value: Any) -> bool:
    """An epoch time as the hook writes it: a whole number of seconds, 0 to `LATEST_TIME`."""
    if not _is_number(value):
        return False
    return (isinstance(value, int) or value.is_integer()) and 0 <= value <= LATEST_TIME


@functools.lru_cache(maxsize=64)
def _booting_path(directory: Path | str) -> Path:
    """The booting record's path in `directory`, made once: the scheduler's hook asks at
    every cycle while a host sleeps, with the one folder `state_dir` keeps."""
    return Path(directory) / BOOTING_FILE


def booting(directory: Path, owner: int | None = None) -> dict[str, int]:
    """The booting hosts: host -> when it was powered on. A record of another shape is an
    `OSError` naming the file and what is wrong. A record read before, in a file nobody
    touched since, is not read again (`_booting_read`). A folder another user could
    write in is refused (`checked_dir`), unless what it holds was read from it before and
    is unchanged since: a replay asks at every cycle, and what was read then, through the
    checks, is what is there (a rename or write in the folder gives the file another
    identity, and the checks again). `owner`: as `checked_dir`'s."""
    path = _booting_path(directory)
    try:
        identity = file_identity(path.stat())
    except FileNotFoundError:
        checked_dir(Path(directory), owner)
        return {}
    known = _booting_read.known(path, identity)
    if known is not None:
        return dict(known)
    checked_dir(Path(directory), owner)
    data = _read(path, owner)
    if data is None:
        return {}
    hosts = data.get("booting", _ABSENT)
    if not isinstance(hosts, dict):
        raise _not_ours(path, f'"booting" is {_shown(hosts)}, expected an object of host: '
                              "power-on time")
    for host, since in hosts.items():
        if not _is_time(since):
            raise _not_ours(path, f'"booting" {host!r} is {_shown(since)}, expected an '
                                  "integer epoch time")
    found = {str(h): int(t) for h, t in hosts.items()}
    _booting_read.keep(path, identity, found)  # (the identity from before the read)
    return dict(found)


def status(directory: Path, owner: int | None = None) -> dict[str, Any] | None:
    """The last run's status record, or None when no run has been recorded, each host with
    its ``idle`` seconds as of the run (``time`` - ``last_used``; null when never used) in
    place of its ``last_used``: the record as `pbsplug power status` shows it. A record of
    the previous release, with ``idle`` itself, is taken as it is. A record of another shape
    is an `OSError` naming the file and what is wrong, as is a folder another user could
    write in (`checked_dir`; `owner` as there)."""
    path = checked_dir(Path(directory), owner) / STATUS_FILE
    data = _read(path, owner)
    if data is None:
        return None
    when = data.get("time", _ABSENT)
    if not _is_time(when):
        raise _not_ours(path, f'"time" is {_shown(when)}, expected an integer epoch time')
    hosts = data.get("hosts", _ABSENT)
    if not isinstance(hosts, dict):
        raise _not_ours(path, f'"hosts" is {_shown(hosts)}, expected an object of host: entry')
    shown = {}
    for host, entry in hosts.items():
        problem = _host_entry_problem(entry)
        if problem:
            raise _not_ours(path, f'"hosts" {host!r}: {problem}')
        if "last_used" in entry:
            entry = dict(entry)
            used = entry.pop("last_used")
            entry["idle"] = None if used is None else int(when) - int(used)
        shown[host] = entry
    # (every release wrote both; `power status` names them: a list as the mode raised
    # TypeError, a mode it did not know was shown as "off", no driver as "None")
    mode = data.get("mode", _ABSENT)
    if mode not in ("on_off", "ramp", None):
        raise _not_ours(path, f'"mode" is {_shown(mode)}, expected "on_off", "ramp" or null')
    driver = data.get("driver", _ABSENT)
    if not isinstance(driver, str):
        raise _not_ours(path, f'"driver" is {_shown(driver)}, expected a string')
    return {**data, "hosts": shown}


def _host_entry_problem(entry: Any) -> str | None:
    """What is wrong with one host of the status record, as `pbsplug power status` reads it:
    ``last_used`` (this release) or ``idle`` (the previous one's), each checked when there."""
    if not isinstance(entry, dict):
        return f"{_shown(entry)}, expected an object"
    for key, ok, expected in (
            ("power", lambda v: isinstance(v, str), "a string"),
            ("eligible", lambda v: isinstance(v, bool), "true or false"),
            ("why", lambda v: isinstance(v, str), "a string"),
            ("last_used", lambda v: v is None or _is_time(v),
             "an integer epoch time or null"),
            # idle may be negative: a last_used_time a little ahead of this clock
            ("idle", lambda v: v is None or _is_time(abs(v) if _is_number(v) else v),
             "a whole number of seconds or null")):
        value = entry.get(key, None if key in ("idle", "last_used") else _ABSENT)
        if not ok(value):
            return f'"{key}" is {_shown(value)}, expected {expected}'
    return None


_ABSENT = object()


def _shown(value: Any) -> str:
    """A value as JSON, cut short: the message stays one line."""
    if value is _ABSENT:
        return "missing"
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def file_identity(st: os.stat_result) -> tuple[int, int, int, int]:
    """What any write, rename or utime of a file changes: (inode, size, mtime, ctime)."""
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class FileMemo(dict):
    """path -> (the file's identity, what this process read from it or wrote to it), so
    that a file nobody touched since is neither read nor written again. A value read is
    kept with the identity from before the read: a file changed between the two has
    another identity next time, and is read again. Past 64 files (one process, many state
    folders: replays) it forgets them all."""

    def known(self, path: Path, identity: tuple[int, int, int, int]) -> Any:
        """What was kept of `path` while it had `identity`; None otherwise."""
        entry = self.get(path)
        return entry[1] if entry is not None and entry[0] == identity else None

    def keep(self, path: Path, identity: tuple[int, int, int, int], value: Any) -> None:
        if len(self) >= 64:
            self.clear()
        self[path] = (identity, value)


#: What this process last wrote to each file: a record that would be written again
#: unchanged, to a file nobody touched since, is left as it is (the booting hosts rarely
#: change; a replay runs the hook thousands of times).
_written = FileMemo()
#: The booting hosts last read from each file: the scheduler's hook reads them at every
#: cycle while a host sleeps (a replay: every event).
_booting_read = FileMemo()


def _write(path: Path, data: Mapping[str, Any] | str) -> None:
    """Write `data` as JSON with its keys sorted (a `str`: that JSON, made by the caller,
    as `status_text`)."""
    text = data if isinstance(data, str) else json.dumps(data, sort_keys=True)
    last = _written.get(path)
    if last is not None and last[1] == text:
        try:
            st = path.stat()
        except OSError:
            pass
        else:
            if file_identity(st) == last[0]:
                return
    safedirs.write_text(path, text)
    _written.keep(path, file_identity(path.stat()), text)


#: Each string `status_head` wrote, as JSON: a run writes mostly the host names, power
#: states and reasons of the runs before (not all: a reason may name a time).
_texts: dict[str, str] = {}
#: Each host's entry as `status_head` wrote it: (host, eligible, last used, power, why) ->
#: its JSON. A run's hosts are mostly as they were the run before.
_entries: dict[tuple[str, bool, int | None, str, str], str] = {}


def status_head(mode: str | None, driver: str,
                hosts: Sequence[tuple[str, bool, int | None, str, str]]) -> str:
    """The status record's JSON as ``json.dumps(record, sort_keys=True)`` writes it, all but
    its time and closing brace (`status_text`), from its mode and driver and each host's
    (host, eligible, last used, power, why), in host order. Written for a thousand hosts a
    run: each host's entry a string made once (`_entries`), no mapping built and walked
    again."""
    texts, entries = _texts, _entries
    if len(texts) > 4 * len(hosts) + 1024:  # (mostly reasons that named a time: let go)
        texts.clear()
    if len(entries) > 4 * len(hosts) + 1024:
        entries.clear()

    def shown(value: str) -> str:
        out = texts.get(value)
        if out is None:
            out = texts[value] = json.dumps(value)
        return out

    parts = []
    for row in hosts:
        entry = entries.get(row)
        if entry is None:
            host, eligible, used, power, why = row
            entry = entries[row] = (
                f'{shown(host)}: {{"eligible": {"true" if eligible else "false"}, '
                f'"last_used": {"null" if used is None else used}, "power": {shown(power)}, '
                f'"why": {shown(why)}}}')
        parts.append(entry)
    return (f'{{"driver": {shown(driver)}, "hosts": {{{", ".join(parts)}}}, '
            f'"mode": {json.dumps(mode)}, "time": ')


def status_text(when: int, head: str) -> str:
    """The status record's JSON: `status_head`'s, with the run's time."""
    return f"{head}{when}}}"


def save(directory: Path, booting: Mapping[str, int], boot_delay: int,
         status: Mapping[str, Any] | str | None = None) -> None:
    """Write the booting hosts and, when given, the status record (a mapping, or its JSON
    from `status_text`). The folder is made when missing, and refused
    (`safedirs.UnsafeFolder`) when another user could change what is in it."""
    directory = safedirs.ensure_folder(directory, "state_dir")
    _write(directory / BOOTING_FILE, {"booting": dict(booting), "boot_delay": boot_delay})
    if status is not None:
        _write(directory / STATUS_FILE, status)
