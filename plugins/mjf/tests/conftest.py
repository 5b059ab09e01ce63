"""Feature directories per test, and the plugin registered as a site would enable it."""

from __future__ import annotations

import pytest

import pbsplug_mjf as plugin
from pbsplug_mjf import reader


@pytest.fixture
def base(shared_tmp):
    """A base folder under /tmp that every user may traverse, for the two feature
    directories (`pbsplug.testing`'s shared_tmp)."""
    return shared_tmp


@pytest.fixture(autouse=True)
def _fresh_reader_cache():
    reader._static.clear()
    yield
    reader._static.clear()


@pytest.fixture
def config(base):
    return {"machinefeatures_dir": str(base / "machinefeatures"),
            "jobfeatures_dir": str(base / "jobfeatures")}


@pytest.fixture
def hook(register_plugin, fire_event, config):
    """``hook(event, data, **config)``: the plugin registered with the test's directories
    (plus `config`, given at the first call), one event fired in its own process as the
    execution host runs it."""
    registered: list[dict] = []

    def fire(event: str, data: dict | None = None, **more):
        settings = {**config, **more}
        if not registered:
            register_plugin(plugin, "mjf", config=settings)
            registered.append(settings)
        assert not more or registered == [settings], "one test, one configuration"
        return fire_event(event, data or {}, mode="process")

    return fire
