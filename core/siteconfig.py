"""The site configuration: one TOML file that says which plugins run and how.

Where it is: ``--site FILE``, else ``$PBSPLUG_SITE``, else ``site.toml`` in the pbsplug home
(``$PBSPLUG_HOME``, else ``/var/spool/pbsplug`` for root and ``~/.local/share/pbsplug`` for
anyone else). A missing file is an empty configuration: every plugin off.

::

    enable_all_installed = false     # true: every installed plugin is on unless disabled here
    strict_plugins = false           # true: a plugin that fails to load is fatal

    [plugins.cray_atom]
    enabled = true
    alarm = 120                      # any hook attribute: events, order, alarm, freq,
                                     # fail_action, user, debug, isolation
    config_file = "/etc/pbs/PBS_cray_atom.CF"    # PBS-style JSON, and/or:
    [plugins.cray_atom.config]
    post_timeout = 10.0              # inline keys win over the .CF file's

The file's structure is checked here; each plugin's own keys are checked against its schema
when the plugin is loaded (`pbsplug.plugins`). Every error names the file, the key, the value
and what was expected.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

from .hookattrs import HookAttributeError, HookAttributes, resolve_attributes
from .settings import ConfigError, ConfigIssue, long_integer
from .values import digits

HOOK_ATTRIBUTE_KEYS = ("enabled", "events", "order", "alarm", "freq", "fail_action", "user",
                       "debug", "isolation")
PLUGIN_KEYS = HOOK_ATTRIBUTE_KEYS + ("config", "config_file")
_TOP_LEVEL: dict[str, type] = {"enable_all_installed": bool, "strict_plugins": bool,
                               "trace_file": str, "plugins": dict}
#: Tables that other layers own (the engine's, for example); the kernel checks only that they
#: are tables. `register_section` adds one.
_SECTIONS: set[str] = set()


def register_section(name: str) -> None:
    """Let a layer above the kernel own a top-level table of the site config."""
    _SECTIONS.add(name)


def default_home() -> Path:
    """The pbsplug home: $PBSPLUG_HOME, else /var/spool/pbsplug (root) or
    ~/.local/share/pbsplug."""
    env = os.environ.get("PBSPLUG_HOME")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/spool/pbsplug")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "pbsplug"


def site_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """Where the site config is: `explicit`, else $PBSPLUG_SITE, else <home>/site.toml."""
    if explicit:
        return Path(explicit)
    env = os.environ.get("PBSPLUG_SITE")
    if env:
        return Path(env)
    return default_home() / "site.toml"


@dataclass
class PluginSite:
    """One ``[plugins.<name>]`` table."""

    name: str
    enabled: bool | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    config_file: Path | None = None


@dataclass
class SiteConfig:
    path: Path
    exists: bool = False
    enable_all_installed: bool = False
    strict_plugins: bool = False
    trace_file: Path | None = None
    plugins: dict[str, PluginSite] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)

    def plugin(self, name: str) -> PluginSite:
        return self.plugins.get(name) or PluginSite(name)

    def is_enabled(self, name: str) -> bool:
        site = self.plugins.get(name)
        if site is not None and site.enabled is not None:
            return site.enabled
        return self.enable_all_installed

    def hook_attributes(self, name: str, declared: HookAttributes) -> HookAttributes:
        """The plugin's declared attributes with this site's overrides, checked by PBS's rules.
        `HookAttributeError` names this file and the plugin's table."""
        site = self.plugin(name)
        overrides = dict(site.attributes)
        overrides["enabled"] = self.is_enabled(name)
        try:
            return resolve_attributes(name, declared, overrides)
        except HookAttributeError as exc:
            raise HookAttributeError(f"{self.path}: [plugins.{name}]: {exc}") from None

    def plugin_config_values(self, name: str) -> tuple[dict[str, Any], dict[str, str]]:
        """The plugin's raw configuration (its .CF file, then inline keys) and, per key, where
        it came from (for error messages)."""
        from .settings import read_cf

        site = self.plugin(name)
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        if site.config_file is not None:
            for key, value in read_cf(site.config_file).items():
                values[key] = value
                sources[key] = str(site.config_file)
        for key, value in site.config.items():
            values[key] = value
            sources[key] = f"{self.path} [plugins.{name}.config]"
        return values, sources


class TomlError(ValueError):
    """A TOML file that cannot be read: `kind` is ``file`` (cannot be opened, not UTF-8) or
    ``syntax``; `text` says why in one line, without the file's name."""

    def __init__(self, kind: str, text: str, named: bool = False):
        super().__init__(text)
        self.kind, self.text, self.named = kind, text, named


def read_toml(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The TOML file `path` parsed, or `TomlError`: the one reader of the site file and the
    simulator's platform file, so that each way a file can be unreadable is one line."""
    try:  # (read once: an error's line is found in the text that was parsed)
        with open(path, "rb") as fh:
            text = fh.read().decode("utf-8")
    except OSError as exc:
        raise TomlError("file", f"cannot be read: {exc.strerror or exc}", True) from None
    except UnicodeDecodeError as exc:
        raise TomlError("file", f"not valid UTF-8 (byte {exc.start}): TOML files are "
                        "UTF-8") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TomlError("syntax", f"not valid TOML: {exc}") from None
    except RecursionError:
        raise TomlError("syntax", "not valid TOML: arrays or tables nested too deeply") \
            from None
    except ValueError:  # (an integer Python will not read: past 4300 digits)
        raise TomlError("syntax", _long_integer(text)) from None


def _long_integer(text: str) -> str:
    """Why tomllib raised a plain ValueError on `text`: an integer of more digits than int()
    reads (4300), and its line; in our words, not Python's."""
    number, why = long_integer(text)
    return f"not valid TOML: {why}" + (f" (at line {number})" if number else "")


def load_site(path: str | os.PathLike[str] | None = None, *,
              issues: list[ConfigIssue] | None = None,
              allow_missing: bool = False) -> SiteConfig:
    """Read and check the site config.

    Without `issues`, `ConfigError` lists every problem found. With a list, problems are
    appended to it and the valid part of the file is returned (`pbsplug config check` uses
    this to go on and check the plugins). A file named explicitly (argument or
    $PBSPLUG_SITE) must exist unless `allow_missing` (commands that create it).
    """
    p = site_path(path)
    problems: list[ConfigIssue] = []
    site = SiteConfig(path=p)
    if not p.exists():
        if not allow_missing and (path is not None or os.environ.get("PBSPLUG_SITE")):
            problems.append(ConfigIssue(str(p), "(file)", str(p), "does not exist"))
    else:
        try:
            data = read_toml(p)
        except TomlError as exc:
            problems.append(ConfigIssue(str(p), f"({exc.kind})",
                                        str(p) if exc.kind == "file" and exc.named else "",
                                        exc.text))
        else:
            site = parse_site(data, p, problems)
    if issues is not None:
        issues.extend(problems)
    elif problems:
        raise ConfigError(problems)
    return site


def parse_site(data: Mapping[str, Any], path: Path,
               issues: list[ConfigIssue] | None = None) -> SiteConfig:
    """Check the parsed TOML. Without `issues`, raise `ConfigError` listing every problem;
    with a list, append to it and keep only the valid values."""
    src = str(path)
    found: list[ConfigIssue] = []
    site = SiteConfig(path=path, exists=True)
    for key, value in data.items():
        if key in _SECTIONS:
            if not isinstance(value, dict):
                found.append(ConfigIssue(src, key, value, "expected a table"))
            else:
                site.sections[key] = value
            continue
        expected = _TOP_LEVEL.get(key)
        if expected is None:
            known = ", ".join(sorted(set(_TOP_LEVEL) | _SECTIONS))
            found.append(ConfigIssue(src, key, value, f"unknown key; known keys: {known}"))
        elif not isinstance(value, expected):
            wanted = "a table" if expected is dict else f"a {expected.__name__}"
            found.append(ConfigIssue(src, key, value, f"expected {wanted}"))
        # (each value has its key's type by now; the checker is told it key by key)
        elif key == "enable_all_installed" and isinstance(value, bool):
            site.enable_all_installed = value
        elif key == "strict_plugins" and isinstance(value, bool):
            site.strict_plugins = value
        elif key == "trace_file" and isinstance(value, str):
            site.trace_file = Path(value) if value else None
    for name, table in (data.get("plugins") or {}).items() if isinstance(
            data.get("plugins"), dict) else ():
        key = f"plugins.{name}"
        if not isinstance(table, dict):
            found.append(ConfigIssue(src, key, table, "expected a table"))
            continue
        entry = PluginSite(name)
        for attr, value in table.items():
            if attr not in PLUGIN_KEYS:
                found.append(ConfigIssue(src, f"{key}.{attr}", value,
                                         f"unknown key; known keys: {', '.join(PLUGIN_KEYS)}"))
            elif attr == "enabled":
                if isinstance(value, bool):
                    entry.enabled = value
                else:
                    found.append(ConfigIssue(src, f"{key}.enabled", value,
                                             "expected true or false"))
            elif attr == "config":
                if isinstance(value, dict):
                    entry.config = dict(value)
                else:
                    found.append(ConfigIssue(src, f"{key}.config", value, "expected a table"))
            elif attr == "config_file":
                if isinstance(value, str) and value:
                    cf = Path(value)
                    entry.config_file = cf if cf.is_absolute() else path.parent / cf
                else:
                    found.append(ConfigIssue(src, f"{key}.config_file", value,
                                             "expected a path to a JSON .CF file"))
            elif (problem := _attribute_form(name, attr, value)) is not None:
                found.append(ConfigIssue(src, f"{key}.{attr}", value, problem))
            else:
                entry.attributes[attr] = value
        site.plugins[name] = entry
    if issues is not None:
        issues.extend(found)
    elif found:
        raise ConfigError(found)
    return site


def _attribute_form(name: str, attr: str, value: Any) -> str | None:
    """PBS's check of one hook attribute's form, or None when it is good. Rules that depend
    on the plugin (order's range by type; freq, user and fail_action by events) are checked
    when the plugin is loaded, with its declaration."""
    try:
        if attr == "order":
            if isinstance(value, bool) or not isinstance(value, (int, str)) or not digits(
                    str(value).strip().lstrip("+-")):
                return f"invalid value '{value}' for hook attribute 'order': expected an integer"
        elif attr not in ("freq", "fail_action", "user"):
            resolve_attributes(name, HookAttributes(type="pbs"), {attr: value})
    except HookAttributeError as exc:
        return str(exc)
    return None
