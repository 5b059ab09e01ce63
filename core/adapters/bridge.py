"""What both adapters' bridges share: the site's plugins loaded from an installed config.

An adapter's install writes, for the programs it puts into the batch system, each plugin's
entry point, hook attributes and configuration as the site gives them (so the execution hosts
need no site config); `plugin_set` loads those plugins alone, enabled with those values, and
checks the configuration again where the event runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

from ..plugins import ENABLED, PluginSet, load_plugins
from ..siteconfig import PluginSite, SiteConfig


def plugin_set(specs: Mapping[str, Mapping[str, Any]], source: str) -> PluginSet:
    """The plugins of `specs` (name -> ``entry_point``, ``attributes``, ``config``), each
    enabled; `source` names where they came from in errors. A plugin that cannot be loaded
    is a RuntimeError with its failure text."""
    site = SiteConfig(path=Path(source), exists=True, plugins={
        name: PluginSite(name, enabled=True, attributes=dict(spec.get("attributes") or {}),
                         config=dict(spec.get("config") or {}))
        for name, spec in specs.items()})
    entries = [EntryPoint(name=name, value=str(spec["entry_point"]), group="pbsplug")
               for name, spec in specs.items()]
    plugins = load_plugins(site, only=set(specs), entry_points=entries, strict=False,
                           report=False, env={})
    for name in specs:
        record = plugins.get(name)
        if record is None or record.status != ENABLED:
            raise RuntimeError(record.failure_text() if record is not None
                               else f"pbsplug: plugin '{name}' could not be loaded")
    return plugins
