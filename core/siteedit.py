"""Edits to the site config that keep the admin's comments and layout (tomlkit).

Every edit is checked as a whole before it is written, and written atomically: a bad edit
leaves the file as it was.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit

from .hookattrs import write_atomically
from .siteconfig import SiteConfig, parse_site


def update_plugin(path: Path, name: str, values: Mapping[str, Any],
                  config: Mapping[str, Any] | None = None) -> SiteConfig:
    """Set keys of ``[plugins.<name>]`` (and, with `config`, replace its ``config`` table)
    in the site config at `path`, creating the file if needed. Returns the new config."""
    path = Path(path)
    doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    if "plugins" not in doc:
        doc["plugins"] = tomlkit.table(is_super_table=True)
    plugins = doc["plugins"]
    if name not in plugins:
        plugins[name] = tomlkit.table()
    table = plugins[name]
    for key, value in values.items():
        table[key] = value
    if config is not None:
        cfg = tomlkit.table()
        for key, value in config.items():
            cfg[key] = value
        table["config"] = cfg
    text = tomlkit.dumps(doc)
    site = parse_site(tomlkit.parse(text).unwrap(), path)  # ConfigError: nothing written
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)
    return site


def remove_plugin(path: Path, name: str) -> SiteConfig:
    """Drop ``[plugins.<name>]`` from the site config at `path` (the plugin is then off, and
    its settings are the defaults again). Other sections and comments stay as they were."""
    path = Path(path)
    doc = tomlkit.parse(path.read_text()) if path.exists() else tomlkit.document()
    plugins = doc.get("plugins")
    if plugins is not None and name in plugins:
        del plugins[name]
    text = tomlkit.dumps(doc)
    site = parse_site(tomlkit.parse(text).unwrap(), path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(path, text)
    return site
