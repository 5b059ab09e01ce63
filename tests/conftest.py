"""Shared fixtures: real installed plugin distributions, and the CLI as a real process."""

from __future__ import annotations

import gc
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pbsplug.testing import missing

PBSPLUG = str(Path(sys.executable).with_name("pbsplug"))


class Distributions:
    """Plugin distributions installed into a folder on PYTHONPATH, as pip would lay them out
    (a module plus ``<dist>-<version>.dist-info`` with METADATA and entry_points.txt), so
    importlib.metadata finds them exactly as it finds pip-installed ones."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def add(self, name: str, source: str, *, version: str = "1.0",
            module: str | None = None) -> str:
        module = module or f"pbsplug_{name}"
        (self.root / f"{module}.py").write_text(textwrap.dedent(source))
        dist = f"pbsplug_{name}"
        info = self.root / f"{dist}-{version}.dist-info"
        info.mkdir(exist_ok=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: pbsplug-{name.replace('_', '-')}\n"
            f"Version: {version}\n")
        (info / "entry_points.txt").write_text(f"[pbsplug]\n{name} = {module}\n")
        return module

    def enabled(self, name: str, source: str, folder: Path, also: tuple[str, ...] = ()):
        """Install plugin `name` from `source`, enable it (and the plugins `also`, added
        before) in `folder`/site.toml, and load them with these distributions on sys.path:
        their `PluginSet`."""
        from pbsplug.plugins import load_plugins
        from pbsplug.siteconfig import load_site

        self.add(name, source)
        site = folder / "site.toml"
        site.write_text("".join(f"[plugins.{n}]\nenabled = true\n" for n in (name, *also)))
        sys.path.insert(0, str(self.root))
        try:
            return load_plugins(load_site(site), env={})
        finally:
            sys.path.remove(str(self.root))

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PBSPLUG_")}
        env["PYTHONPATH"] = os.pathsep.join(
            [str(self.root)] + ([os.environ["PYTHONPATH"]] if "PYTHONPATH" in os.environ
                                else []))
        env.update(extra)
        return env


@pytest.fixture(autouse=True)
def _root_logger_kept():
    """Put the root logger back as it was after each test. The CLI's ``main()`` sets it up
    for its process (one handler, on the stderr of the moment), and tests call it in
    process: its handler on capsys's stderr, closed after the test, printed "--- Logging
    error ---" in later tests, far from where it was made. (The root logger only: an
    in-process engine of a module's fixture keeps its handler on ``pbsplug.hook``.)"""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers = handlers
    root.setLevel(level)


@pytest.fixture
def open_fds():
    """``open_fds()``: how many descriptors this process holds, counted after a garbage
    collection. A test counts before and after what must leave none open; without the
    collection, the cyclic garbage of earlier tests (sockets, pipes) was freed in between
    and the count fell (79 to 51 in one CI run)."""

    def count() -> int:
        gc.collect()
        return len(os.listdir("/proc/self/fd"))

    return count


@pytest.fixture
def needs_root() -> None:
    """For ``@pytest.mark.usefixtures("needs_root")``: the test does what only root may
    (give files to another user, switch to a job's owner, write ns_last_pid); without it,
    `missing` (fails under CI, skips elsewhere)."""
    if os.geteuid() != 0:
        missing("needs root")


@pytest.fixture
def dists(tmp_path) -> Distributions:
    return Distributions(tmp_path / "site-packages")


@pytest.fixture
def home(tmp_path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli(dists, home):
    """``cli(*args, input=None, **env)``: run ``pbsplug`` as a real process with the test's
    installed distributions and home (`env` may replace PBSPLUG_HOME); returns the
    CompletedProcess (text)."""

    def run(*args: str, input: str | None = None, **env: str):
        environment = dists.env(**{"PBSPLUG_HOME": str(home), **env})
        return subprocess.run([PBSPLUG, *args], capture_output=True, text=True, input=input,
                              env=environment, timeout=120)

    return run
