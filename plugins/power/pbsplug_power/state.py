"""What the periodic hook keeps between runs, in its state folder (PBS keeps its
``pbs_power_nodes_file`` in server_priv/hooks/tmp). Two files, each written whole (a
temporary file renamed):

``power_booting.json``: the hosts powered on and not ready yet, with when, and the boot delay.
The next run asks the driver about them; the scheduler's availability hook reads it every
cycle, so it stays small::

    {"booting": {"h3": 1699999990}, "boot_delay": 300}

``power_status.json``: the last run, host by host, as ``pbsplug power status`` shows it::

    {"time": 1700000000, "mode": "on_off", "driver": "simulated",
     "hosts": {"h1": {"power": "asleep", "idle": 4000, "eligible": true,
                      "why": "asleep; nothing needs it within 900 s"}}}
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pbsplug import default_home

BOOTING_FILE = "power_booting.json"
STATUS_FILE = "power_status.json"


def state_dir(config: Mapping[str, Any]) -> Path:
    """The configured ``state_dir``, else ``<pbsplug home>/hooks/tmp``."""
    return Path(config.get("state_dir") or default_home() / "hooks" / "tmp")


def _read(path: Path) -> dict[str, Any] | None:
    """The file's JSON object; None when there is no file. A file that does not parse is an
    `OSError` naming it (the hook must not silently forget booting hosts)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise OSError(f"{path}: not the power hook's JSON record ({exc}); remove it to "
                      "start afresh") from None
    if not isinstance(data, dict):
        raise OSError(f"{path}: not the power hook's JSON record; remove it to start afresh")
    return data


def booting(directory: Path) -> dict[str, int]:
    """The booting hosts: host -> when it was powered on."""
    data = _read(Path(directory) / BOOTING_FILE) or {}
    return {str(h): int(t) for h, t in (data.get("booting") or {}).items()}


def status(directory: Path) -> dict[str, Any] | None:
    """The last run's status record, or None when no run has been recorded."""
    return _read(Path(directory) / STATUS_FILE)


#: What this process last wrote to each file, with the file's identity after (inode,
#: size, mtime, ctime: any write, rename or utime changes one): a record that would be
#: written again unchanged, to a file nobody touched since, is left as it is (the booting
#: hosts rarely change; a replay runs the hook thousands of times).
_written: dict[Path, tuple[str, tuple[int, int, int, int]]] = {}


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _write(path: Path, data: Mapping[str, Any]) -> None:
    text = json.dumps(data, sort_keys=True)
    last = _written.get(path)
    if last is not None and last[0] == text:
        try:
            st = path.stat()
        except OSError:
            pass
        else:
            if _identity(st) == last[1]:
                return
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(f".{path.name}.{os.getpid()}")
    part.write_text(text)
    os.replace(part, path)
    if len(_written) >= 64:  # one process, many state folders (replays): forget them
        _written.clear()
    _written[path] = (text, _identity(path.stat()))


def save(directory: Path, booting: Mapping[str, int], boot_delay: int,
         status: Mapping[str, Any] | None = None) -> None:
    """Write the booting hosts and, when given, the status record."""
    directory = Path(directory)
    _write(directory / BOOTING_FILE, {"booting": dict(booting), "boot_delay": boot_delay})
    if status is not None:
        _write(directory / STATUS_FILE, status)
