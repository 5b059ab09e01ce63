"""Pytest fixtures for plugin authors (loaded through the ``pytest11`` entry point).

::

    from pbsplug import hookimpl

    class Reject:
        @hookimpl
        def queuejob(self, event):
            if event.job.Resource_List["walltime"] is None:
                event.reject("walltime is required")

    def test_walltime_required(register_plugin, fire_event):
        register_plugin(Reject(), "walltime_check")
        outcome = fire_event("queuejob", {"job": {"id": "1.s"}})
        assert not outcome.accepted and outcome.message == "walltime is required"

Each test gets a fresh `PluginSet` with autoload off (no installed plugin is loaded) and an
empty site config in its tmp_path. `register_plugin` enables a plugin object for that test,
with optional hook attributes and configuration; `fire_event` runs an event through the
registered hooks and returns the `pbsplug.Outcome`. `local_engine` starts a real
local-engine server with the installed plugins for end-to-end tests (`site_toml` writes its
site config), and `until` waits for what it does. `unix_user` is a second Unix user (root
only), for ``engine.as_user(...)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest

from .events import Event
from .plugins import FAILED, PluginRecord, PluginSet
from .runner import Outcome, Runner
from .siteconfig import PluginSite, SiteConfig


@pytest.fixture
def pbsplug_plugins(tmp_path) -> PluginSet:
    """A fresh plugin set with no plugin loaded and an empty site config."""
    return PluginSet(SiteConfig(path=tmp_path / "site.toml"))


@pytest.fixture
def register_plugin(pbsplug_plugins: PluginSet) -> Callable[..., PluginRecord]:
    """``register_plugin(plugin, name=None, *, config=None, check=True, **attributes)``:
    enable `plugin` (a module or object with hookimpls) for this test.

    `attributes` override hook attributes as the site would (``order=5``, ``alarm=2``,
    ``isolation="process"``...); `config` is the plugin's configuration, checked against its
    schema. With `check` (the default) a plugin that fails to load fails the test with the
    loader's message; without it the failed record is returned.
    """

    def register(plugin: Any, name: str | None = None, *, config: Mapping[str, Any] | None = None,
                 check: bool = True, **attributes: Any) -> PluginRecord:
        name = name or getattr(plugin, "__name__", None) or type(plugin).__name__.lower()
        pbsplug_plugins.site.plugins[name] = PluginSite(
            name, enabled=True, attributes=dict(attributes), config=dict(config or {}))
        record = pbsplug_plugins.add(name, plugin)
        if check and record.status == FAILED:
            pytest.fail(record.failure_text(), pytrace=False)
        return record

    return register


@pytest.fixture
def fire_event(pbsplug_plugins: PluginSet) -> Callable[..., Outcome]:
    """``fire_event(event, data=None, *, mode=None)``: run an event through the registered
    hooks. `event` is an event name (with `data` keyed by PBS's names: job, vnode_list, ...)
    or a `pbsplug.Event`; `mode` forces ``process`` or ``inprocess`` for every hook."""

    def fire(event: str | Event, data: Mapping[str, Any] | None = None, *,
             mode: str | None = None) -> Outcome:
        ev = event if isinstance(event, Event) else Event.from_dict(event, data or {})
        return Runner(pbsplug_plugins, mode=mode).fire(ev)

    return fire


@pytest.fixture
def local_engine() -> Iterator[Callable[..., Any]]:
    """``local_engine(site_toml="", env=None)``: a real local-engine server, started in a
    fresh home under /tmp with `site_toml` as its site config, for end-to-end tests of
    installed plugins (`pbsplug.engine.testing.LocalEngine`: ``submit``, ``wait``, ``job``,
    ``nodes``, ``log``, ``client(op, ...)``, ``pbs("qstat", "-f")``). Servers, their jobs and
    their homes are gone after the test."""
    from .engine.testing import LocalEngine, make_root, remove_root

    made: list[Any] = []

    def make(site: str = "", env: Mapping[str, str] | None = None) -> Any:
        engine = LocalEngine(make_root(), site, env)
        made.append(engine)
        return engine.start()

    yield make
    for engine in made:
        engine.stop()
        remove_root(engine.root)


#: The second Unix user `unix_user` makes.
SECOND_USER = "pbsplugtu"


@pytest.fixture(scope="session")
def unix_user() -> str:
    """A second Unix user (made once, with useradd), for tests of what another user may do:
    jobs run as their owner, files a job must not change. Skips, saying why, without root
    or without useradd, runuser or curl."""
    import os
    import pwd
    import shutil
    import subprocess

    if os.geteuid() != 0:
        pytest.skip("needs root: creates a Unix user and runs jobs as their owners")
    for tool, package in (("useradd", "passwd"), ("runuser", "util-linux"), ("curl", "curl")):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool} (Debian package {package}) to act as a second user")
    try:
        pwd.getpwnam(SECOND_USER)
    except KeyError:
        subprocess.run(["useradd", "--no-create-home", "--shell", "/bin/sh", SECOND_USER],
                       check=True)
    return SECOND_USER


def site_toml(plugin: str, config: Mapping[str, Any] | None = None, **attributes: Any) -> str:
    """The site config that enables `plugin` with hook `attributes` (``freq=1``) and its
    `config`, as TOML text for ``local_engine(site_toml(...))``."""
    import tomlkit

    section: dict[str, Any] = {"enabled": True, **attributes}
    if config:
        section["config"] = dict(config)
    return tomlkit.dumps({"plugins": {plugin: section}})


def until(check: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """Poll `check` every 50 ms until it returns something true, and return that; fail the
    test (AssertionError) after `timeout` seconds. For what a server does in its own time:
    ``until(lambda: engine.job(j)["job_state"] == "R", what="the job to run")``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what or check}"
        time.sleep(0.05)
