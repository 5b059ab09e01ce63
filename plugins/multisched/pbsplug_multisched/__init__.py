"""multisched: several schedulers, each over its own partition of queues and nodes (seed 001,
PBS's multi-sched).

The sched objects, the ``partition`` attributes and PBS's rules for them are the server's
(qmgr; on the local engine `pbsplug.engine.partitions`), and the server runs each scheduler
in its own process. This plugin is what a site adds on top:

- ``sched_cycle_end``: each scheduler's last cycle (when, how long, jobs considered and
  started, the process) is recorded, in the scheduler's own process;
- ``pbsplug multisched status``: every scheduler, its partitions, state, pid, last cycle and
  jobs considered.

See README.md for the objects, attributes, errors and a walk-through.
"""

from __future__ import annotations

from typing import Any

from pbsplug import PluginInfo, Setting, absolute_path_or_empty, hookimpl

__version__ = "0.1.0"


def _command(value: list) -> str | None:
    return None if value and value[0] else "expected the qmgr program and its arguments"


plugin_info = PluginInfo(
    api="1.13",
    config={
        # Written by each scheduler's process, read by the status command's: a relative
        # folder is a different one for each.
        "state_dir": Setting(str, "", check=absolute_path_or_empty,
                             state_folder=True, doc="where each scheduler's last cycle "
                             "is recorded (default <pbsplug home>/hooks/tmp; a replay's own)"),
        "qmgr": Setting(list, ["pbsplug", "qmgr"], items=str, check=_command,
                        doc="the qmgr command the status asks (PBS's: [\"qmgr\"])"),
    },
    description="Several schedulers, each over its own partition, managed with qmgr",
)

#: The configuration this process loaded (`configure`).
_config: dict[str, Any] | None = None


@hookimpl
def configure(config: dict[str, Any]) -> None:
    global _config
    _config = config


@hookimpl
def sched_cycle_end(stats) -> None:
    """Record the cycle (in the scheduler's own process)."""
    from .records import record

    record(_config or {}, stats)


@hookimpl
def register_commands(cli) -> None:
    from .commands import register

    register(cli)
