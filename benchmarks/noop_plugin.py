"""The no-op plugin the adapter benchmarks install (bench_pbs.py, bench_slurm.py): a hook on
execjob_begin, execjob_launch and execjob_end that does nothing, laid out as pip would
install it so that discovery finds it through its entry point."""

from __future__ import annotations

from pathlib import Path

NOOP = """
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(api="1.0")


@hookimpl
def execjob_begin(event):
    pass


@hookimpl
def execjob_launch(event):
    pass


@hookimpl
def execjob_end(event):
    pass
"""


def write_dist(parent: Path) -> Path:
    """``parent/site-packages`` holding the plugin ``benchnoop`` (dist pbsplug-benchnoop)."""
    dist = parent / "site-packages"
    dist.mkdir()
    add_plugin(dist, "benchnoop", "pbsplug_benchnoop", NOOP)
    return dist


def add_plugin(dist: Path, name: str, entry: str, source: str | None = None) -> None:
    """A dist ``pbsplug-<name>`` in the folder `dist` whose entry point `name` (group
    ``pbsplug``) is `entry` (``module`` or ``module:object``); with `source`, the module
    ``pbsplug_<name>.py`` beside it."""
    if source is not None:
        (dist / f"pbsplug_{name}.py").write_text(source)
    info = dist / f"pbsplug_{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: pbsplug-{name}\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text(f"[pbsplug]\n{name} = {entry}\n")
