"""What the periodic hook keeps between runs, in its state folder (PBS keeps its
``pbs_power_nodes_file`` in server_priv/hooks/tmp):

``power_state.json``, written whole (a temporary file renamed) at the end of every run::

    {"time": 1700000000, "mode": "on_off", "driver": "simulated", "boot_delay": 300,
     "booting": {"h3": 1699999990},         # hosts powered on, not ready yet: since when
     "hosts": {"h1": {"power": "asleep", "idle": 4000, "eligible": true,
                      "why": "asleep; nothing needs it within 900 s"}}}

``booting`` is what the next run asks the driver about, and what the scheduler's availability
hook reads; ``hosts`` is what ``pbsplug power status`` shows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pbsplug import default_home

STATE_FILE = "power_state.json"


def state_dir(config: Mapping[str, Any]) -> Path:
    """The configured ``state_dir``, else ``<pbsplug home>/hooks/tmp``."""
    return Path(config.get("state_dir") or default_home() / "hooks" / "tmp")


def load(directory: Path) -> dict[str, Any]:
    """The last run's record; an empty one when there is none. A record that does not parse
    is an `OSError` naming the file (the hook must not silently forget booting hosts)."""
    path = Path(directory) / STATE_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {"booting": {}, "hosts": {}}
    except ValueError as exc:
        raise OSError(f"{path}: not the power hook's JSON record ({exc}); remove it to "
                      "start afresh") from None
    if not isinstance(data, dict):
        raise OSError(f"{path}: not the power hook's JSON record; remove it to start afresh")
    data.setdefault("booting", {})
    data.setdefault("hosts", {})
    return data


def save(directory: Path, record: Mapping[str, Any]) -> None:
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    part = directory / f".{STATE_FILE}.{os.getpid()}"
    part.write_text(json.dumps(record, sort_keys=True))
    os.replace(part, directory / STATE_FILE)
