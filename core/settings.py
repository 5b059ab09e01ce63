"""What a plugin declares about itself (`PluginInfo`) and its configuration schema (`Setting`).

A plugin module (or object) sets ``plugin_info = PluginInfo(...)``::

    plugin_info = PluginInfo(
        api="1.0",
        events=("execjob_begin", "execjob_end"), order=100, alarm=300,
        fail_action=("offline_vnodes",),
        config={
            "post_timeout": Setting(float, 30.0, gt=0, doc="seconds to wait for a POST"),
            "unix_socket_file": Setting(str, "/var/run/atomd/atomd.sock"),
        },
    )

The site's values (inline ``[plugins.<name>.config]`` or a PBS-style JSON ``.CF`` file) are
checked against the schema when loaded: every error names the file, the key, the bad value and
what was expected, and an unknown key is an error.
"""

from __future__ import annotations

import builtins
import json
import math
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .hookattrs import HookAttributes, _as_list
from .jsontext import JsonError, loads
from .values import QUOTE_MAX, cut, quoted

#: The kernel's API version. A plugin needs the same major and a minor no greater than this.
#: Hook specs change only by adding arguments or hooks, which bumps the minor version.
KERNEL_API = (1, 13)

_REQUIRED = object()
_TYPE_NAMES = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
               list: "a list", dict: "a table"}
_ITEM_NAMES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def _bound(limit: float, whole: bool) -> str:
    """A number's bound in words: an int (or a whole bound of an int setting, `whole`) in
    digits, ``315360000`` and not ``3.1536e+08``; a float bound of a float setting as
    ``:g`` writes it (``0.001``, ``1e+09``) when that is its exact value, else its repr."""
    if isinstance(limit, int) and not isinstance(limit, bool):
        return cut(str(limit)) if limit.bit_length() < 4000 else quoted(limit)
    if not isinstance(limit, float) or not math.isfinite(limit):
        return quoted(limit)
    if whole and limit.is_integer() and abs(limit) < 2**53:
        return str(int(limit))
    text = f"{limit:g}"
    return text if float(text) == limit else repr(limit)


@dataclass(frozen=True)
class Setting:
    """One configuration key: its type, default and limits.

    `type` is bool, int, float, str, list or dict (a float key accepts integers). `gt`, `ge`
    and `le` bound numbers; `choices` lists the allowed values; `items` is the type of a
    list's items; `check` is a function returning an error text, or None when the value is
    good. Leave `default` out to make the key required.

    `state_folder` marks the folder the plugin keeps its records in between runs (kernel API
    1.13): a str whose default is empty, which the plugin reads as
    ``default_home() / "hooks" / "tmp"`` when its hook runs. A replay (`pbsplug sim`) sets
    every such key back to empty, whatever the site set, before the plugin's first
    `configure` (`load_plugins(private_state=True)`; `PluginSet.private_state_folders` for a
    set loaded otherwise, which configures each plugin with such a key again under the
    replay's home while the replay runs): the records then go to the replay's own
    work folder, which it makes the pbsplug home, and never to a live site's folder.
    """

    # (builtins.type: inside the class, the `type` field shadows the builtin for the checker)
    type: builtins.type
    default: Any = _REQUIRED
    doc: str = ""
    choices: tuple[Any, ...] | None = None
    gt: float | None = None
    ge: float | None = None
    le: float | None = None
    items: builtins.type | None = None
    check: Callable[[Any], str | None] | None = None
    state_folder: bool = False

    @property
    def required(self) -> bool:
        return self.default is _REQUIRED

    def expected(self) -> str:
        """What a good value looks like, in words."""
        text = _TYPE_NAMES.get(self.type, self.type.__name__)
        if self.items is not None:
            text += f" of {_ITEM_NAMES.get(self.items, self.items.__name__)}s"
        limits = []
        whole = self.type is int
        if self.gt is not None:
            limits.append(f"> {_bound(self.gt, whole)}")
        if self.ge is not None:
            limits.append(f">= {_bound(self.ge, whole)}")
        if self.le is not None:
            limits.append(f"<= {_bound(self.le, whole)}")
        if limits:
            text += " " + " and ".join(limits)
        if self.choices:
            text += " (one of " + ", ".join(map(repr, self.choices)) + ")"
        return text

    def coerce(self, value: Any) -> Any:
        """The value, typed; `ValueError` with what was expected when it is wrong."""
        t = self.type
        ok = isinstance(value, t) and not (t in (int, float) and isinstance(value, bool))
        if t is float and isinstance(value, int) and not isinstance(value, bool):
            try:
                value, ok = float(value), True
            except OverflowError:  # 400 digits in a JSON .CF file
                ok = False
        if not ok or (t is float and not math.isfinite(value)):
            # inf passed every bound (and NaN every one but choices): a timeout of inf made
            # each request raise OverflowError, a hs06 of inf was written as 'inf'
            raise ValueError(f"expected {self.expected()}, a finite number"
                             if ok else f"expected {self.expected()}")
        if self.items is not None and not all(
                isinstance(v, self.items) and not (self.items is not bool and
                                                   isinstance(v, bool)) for v in value):
            raise ValueError(f"expected {self.expected()}")
        if self.gt is not None and not value > self.gt:
            raise ValueError(f"expected {self.expected()}")
        if self.ge is not None and not value >= self.ge:
            raise ValueError(f"expected {self.expected()}")
        if self.le is not None and not value <= self.le:
            raise ValueError(f"expected {self.expected()}")
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"expected {self.expected()}")
        if self.check is not None:
            problem = self.check(value)
            if problem:
                raise ValueError(problem)
        return value


def absolute_path(value: str) -> str | None:
    """A `Setting` check for a path (kernel API 1.9): None when `value` is absolute, else
    why not. '..' is refused too: root checks and makes a folder level by level as written
    (`pbsplug.safedirs`), and '..' after a symbolic link names the link target's parent,
    another folder than the one checked. A NUL character no system call takes."""
    if "\0" in value:
        return "expected a path without a NUL character"
    if not value.startswith("/"):
        return "expected an absolute path"
    return "expected a path without '..'" if ".." in value.split("/") else None


def absolute_path_or_empty(value: str) -> str | None:
    """`absolute_path`, or "" for a setting whose empty value means a default folder (the
    plugin's `default_home() / "hooks" / "tmp"`) or no file (kernel API 1.9)."""
    if not value:
        return None
    problem = absolute_path(value)
    return 'expected an absolute path or ""' if problem == "expected an absolute path" \
        else problem


@dataclass(frozen=True)
class PluginInfo:
    """What a plugin declares: the kernel API it is written for, its hook attributes (with
    PBS's defaults for anything left out) and its configuration schema.

    `events` defaults to every event the plugin implements. `pbs_name` is the name of the PBS
    hook the plugin replaces (``PBS_cray_atom``), accepted in imported .HK files.
    `check_config` checks what one key's `Setting` cannot: it gets the typed configuration
    (defaults filled in) and returns ``(key, problem)`` pairs, each reported like a bad value
    of that key. `server_flags` names boolean server attributes that are True exactly while
    the plugin is enabled, and that nobody may set (PBS_power's ``power_provisioning``).
    """

    api: str = "1.0"
    events: tuple[str, ...] | None = None
    order: int = 1
    alarm: int = 30
    freq: int = 120
    fail_action: tuple[str, ...] = ()
    user: str = "pbsadmin"
    type: str = "site"
    isolation: str | None = None
    config: Mapping[str, Setting] = field(default_factory=dict)
    pbs_name: str | None = None
    description: str = ""
    check_config: Callable[[Mapping[str, Any]], Iterable[tuple[str, str]]] | None = None
    server_flags: tuple[str, ...] = ()
    #: The hooks (events and scheduler hooks) the plugin declares safe to run in the
    #: simulator: they touch no cgroup, socket, process or file of a real host, and read the
    #: time from `pbsplug.clock`. The simulator leaves every other hook out, and says so.
    sim_safe: tuple[str, ...] = ()
    #: Why the plugin's (checked) configuration must not run in a simulation, or None when
    #: it may: `sim_safe` holds only under some settings (the power plugin's simulated
    #: driver; another switches real hosts). The simulator refuses such a site, naming it.
    sim_check: Callable[[Mapping[str, Any]], str | None] | None = None

    def hook_attributes(self, implemented: tuple[str, ...]) -> HookAttributes:
        # A list may be written as PBS writes it, "offline_vnodes,scheduler_restart_cycle".
        events = _as_list(self.events, "event") if self.events is not None else implemented
        return HookAttributes(
            enabled=False, events=events, order=self.order, alarm=self.alarm, freq=self.freq,
            fail_action=_as_list(self.fail_action, "fail_action"), user=self.user,
            type=self.type,
            isolation=self.isolation)


def api_compatible(required: str) -> str | None:
    """None when this kernel offers API `required` ("1" or "1.0"), else why not."""
    try:
        parts = [int(p) for p in str(required).split(".")]
        major, minor = parts[0], (parts[1] if len(parts) > 1 else 0)
    except (ValueError, IndexError):
        return f"plugin_info.api {required!r} is not a version like '1.0'"
    if major != KERNEL_API[0] or minor > KERNEL_API[1]:
        return (f"needs kernel API {major}.{minor}, this pbsplug offers "
                f"{KERNEL_API[0]}.{KERNEL_API[1]}")
    return None


@dataclass(frozen=True)
class ConfigIssue:
    """One configuration error: where, which key, what value, and what was expected."""

    source: str
    key: str
    value: Any
    expected: str

    def __str__(self) -> str:
        # (a key is a site's text too: one with a line break is quoted, as a value is)
        key = cut(self.key) if self.key.isprintable() else quoted(self.key)
        if self.value is _MISSING:
            return f"{self.source}: {key}: missing; expected {self.expected}"
        return f"{self.source}: {key} = {_show(self.value)}: {self.expected}"


_MISSING = object()


def _show(value: Any) -> str:
    """A bad value as the error quotes it: as JSON (a TOML or .CF value reads so), cut to
    `values.QUOTE_MAX` characters (a 400-digit number, a megabyte of text)."""
    if isinstance(value, str) and len(value) > 2 * QUOTE_MAX:
        value = value[:2 * QUOTE_MAX]  # (still cut below: the JSON of all is not made)
    try:
        return cut(json.dumps(value))
    except (TypeError, ValueError):  # (not JSON; an int past Python's 4300 digits)
        return quoted(value)


class ConfigError(ValueError):
    """One or more `ConfigIssue`; str() lists them one per line."""

    def __init__(self, issues: list[ConfigIssue]):
        self.issues = issues
        super().__init__("\n".join(map(str, issues)))


def validate_config(schema: Mapping[str, Setting], values: Mapping[str, Any], source: str,
                    prefix: str = "") -> tuple[dict[str, Any], list[ConfigIssue]]:
    """Check `values` against `schema`: the typed configuration (defaults filled in) and the
    issues found. `prefix` is prepended to key names in the issues (``plugins.x.config.``)."""
    issues: list[ConfigIssue] = []
    config: dict[str, Any] = {}
    for key, value in values.items():
        setting = schema.get(key)
        if setting is None:
            known = ", ".join(sorted(schema)) or "none"
            issues.append(ConfigIssue(source, prefix + key, value,
                                      f"unknown key; known keys: {known}"))
            continue
        try:
            config[key] = setting.coerce(value)
        except ValueError as exc:
            issues.append(ConfigIssue(source, prefix + key, value, str(exc)))
    for key, setting in schema.items():
        if key in config or any(i.key == prefix + key for i in issues):
            continue
        if setting.required:
            issues.append(ConfigIssue(source, prefix + key, _MISSING, setting.expected()))
        else:
            config[key] = setting.default
    return config, issues


def long_integer(text: str) -> tuple[int, str]:
    """The line of `text` (a TOML file's) with an integer of more digits than int() reads
    (4300: the parser's plain ValueError, in Python's words), and ours. The parser read the
    text in order and raised at the first such integer value: digits in a string, a comment,
    a key, a float, a date or a 0x/0o/0b number are not one (`_long_integer_at`)."""
    most = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
    found = _long_integer_at(text, most) if most else None
    if found is None:
        return 0, f"an integer of more than the {most:,} digits read"
    at, count = found
    return (text.count("\n", 0, at) + 1,
            f"an integer of {count:,} digits, more than the {most:,} read")


#: A TOML token, for `_long_integer_at`: a comment, a string of each of the four kinds, a
#: bare word (a key, or a value that is no string: number, date, boolean), or one character
#: of ``= [ ] { } ,`` or a newline. A string not closed runs to its line's end or the text's
#: (each character is read once, never again from each quote inside it). Each string's body
#: is an unrolled loop (a run of plain characters, then an escape or a lone quote and a run,
#: ...), whose parts cannot match the same character: the regex never backtracks.
_TOML_TOKEN = re.compile(
    r"#[^\n]*"
    r'|"""[^"\\]*(?:(?:\\[\s\S]|"(?!""))[^"\\]*)*(?:"{3,5}|\\?\Z)'
    r"|'''[^']*(?:'(?!'')[^']*)*(?:'{3,5}|\Z)"
    r'|"[^"\\\n]*(?:\\.[^"\\\n]*)*"?'
    r"|'[^'\n]*'?"
    r"|[A-Za-z0-9_+\-.:]+"
    r"|[^ \t\r]")
#: A decimal integer as the parser reads one (its number regex): one that a fraction or an
#: exponent follows is a float's start, which float() reads whatever its digits.
_TOML_INTEGER = re.compile(r"[+-]?(?:0|[1-9](?:_?[0-9])*)(?!_?[0-9]|\.[0-9]|[eE][+-]?[0-9])")


def _long_integer_at(text: str, most: int) -> tuple[int, int] | None:
    """Where in `text` the first integer value of more than `most` digits is, and its
    digits: one pass over the tokens, keeping whether a value or a key comes next (after
    ``=``, and in an array after ``[`` and ``,``: a value; at a line's start outside
    brackets, in a table header and in an inline table: a key). The text up to that
    integer is valid TOML (the parser raised there first), which is what is relied on."""
    nested: list[str] = []  # "[" an array, "{" an inline table, "h" a table header
    value = False
    for token in _TOML_TOKEN.finditer(text):
        start, end = token.span()
        first = text[start]
        if first == "=":
            value = True
        elif first == "\n":
            value = value and bool(nested)
        elif first == "[":
            nested.append("[" if value else "h")
        elif first == "{":
            nested.append("{")
            value = False
        elif first in "]}":
            if nested:
                nested.pop()
            value = False
        elif first == ",":
            value = bool(nested) and nested[-1] == "["
        elif first != "#":
            if value and end - start > most:
                integer = _TOML_INTEGER.match(text, start, end)
                count = len(integer[0].lstrip("+-")) - integer[0].count("_") if integer else 0
                if count > most:
                    return start, count
            value = False
    return None


def read_cf(path: Path) -> dict[str, Any]:
    """A PBS-style JSON ``.CF`` file: one JSON object. `ConfigError` names the file and what
    is wrong with it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([ConfigIssue(str(path), "(file)", str(path),
                                       f"cannot be read: {exc.strerror or exc}")]) from None
    except UnicodeDecodeError as exc:
        raise ConfigError([ConfigIssue(str(path), "(file)", str(path), f"not valid UTF-8 "
                                       f"(byte {exc.start}): JSON files are UTF-8")]) from None
    try:  # (a site's file, or one a PBS admin brought: `pbsplug.jsontext`'s limits)
        data = loads(text, str(path))
    except JsonError as exc:
        line = exc.line
        lines = text.splitlines()
        near = lines[line - 1].strip() if line and 0 < line <= len(lines) else ""
        raise ConfigError([ConfigIssue(
            str(path), f"(line {line})" if line else "(file)", near if line else str(path),
            f"not valid JSON: {exc.why.removeprefix('not JSON: ')}")]) from None
    if not isinstance(data, dict):
        raise ConfigError([ConfigIssue(str(path), "(file)", data, "expected a JSON object")])
    return data
