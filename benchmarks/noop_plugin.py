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
    (dist / "pbsplug_benchnoop.py").write_text(NOOP)
    info = dist / "pbsplug_benchnoop-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: pbsplug-benchnoop\n"
                                   "Version: 1.0\n")
    (info / "entry_points.txt").write_text("[pbsplug]\nbenchnoop = pbsplug_benchnoop\n")
    return dist
