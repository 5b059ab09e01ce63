"""Each scheduler's last cycle, one small JSON file per scheduler written by that
scheduler's own process (so two never write the same file)::

    multisched_sc1.json  {"sched": "sc1", "pid": 4242, "started": 1700000000.0,
                          "duration": 0.012, "jobs_considered": 40, "jobs_started": 3}
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pbsplug import default_home, jsontext, safedirs

log = logging.getLogger("pbsplug.multisched")


def state_dir(config: Mapping[str, Any]) -> Path:
    return Path(config.get("state_dir") or default_home() / "hooks" / "tmp")


#: The last refusal this process logged, so that one folder's is not logged every cycle.
_refused: list[str] = []


def record(config: Mapping[str, Any], stats) -> None:
    """The cycle's record, in a state folder nobody else could write in (`pbsplug.safedirs`): a
    scheduler's record in a folder another user could write is not written, and the
    scheduler's log says so, once (the status command refuses such a folder too)."""
    directory = state_dir(config)
    data = {"sched": stats.sched, "pid": os.getpid(), "started": stats.started,
            "duration": stats.duration, "jobs_considered": stats.jobs_considered,
            "jobs_started": stats.jobs_started}
    try:
        safedirs.ensure_folder(directory, "state_dir")
        safedirs.write_text(directory / f"multisched_{stats.sched}.json", json.dumps(data))
    except safedirs.UnsafeFolder as exc:
        if _refused != [str(exc)]:
            _refused[:] = [str(exc)]
            log.error("multisched: %s", exc)
    except OSError:
        pass  # a record is for the status command; a cycle never fails for it


#: The latest cycle start a record may hold (year 5138): past it, turning it into a date
#: overflows.
LATEST_TIME = 10**11


def _number(value: Any, *, whole: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return (isinstance(value, int) or not whole) and 0 <= value <= LATEST_TIME


def last_cycles(config: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every scheduler's last cycle, by name. Files that do not parse, or are not a record
    of the scheduler they are named after (a time that is not a number, counts that are not
    whole numbers), are skipped: the status showed them, or stopped on them. So are files
    another user could have written (`safedirs.open_file`). A state folder another user
    could write in is refused: `safedirs.UnsafeFolder`, naming it, its owner and mode."""
    out = {}
    folder = safedirs.check_folder(state_dir(config), "state_dir")
    for path in sorted(folder.glob("multisched_*.json")):
        try:
            data = jsontext.loads(safedirs.read_text(path), str(path), expect=dict)
        except (OSError, ValueError):  # (ValueError: jsontext's JsonError, not UTF-8)
            continue
        if (isinstance(data, dict) and data.get("sched") == path.stem[len("multisched_"):]
                and _number(data.get("started")) and _number(data.get("duration"))
                and all(_number(data.get(key), whole=True)
                        for key in ("jobs_considered", "jobs_started"))):
            out[data["sched"]] = data
    return out
