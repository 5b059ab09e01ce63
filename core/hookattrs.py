"""Hook attributes (enabled, events, order, alarm, freq, fail_action, user) with PBS's
defaults and rules, and PBS's ``.HK`` file format.

A plugin declares its attributes in its `PluginInfo`; the site overrides them in
``[plugins.<name>]``. Both go through `resolve_attributes`, which applies PBS's checks in PBS's
order (event before freq, type before order) and answers in PBS's wording
(shared/reference/pbs-behavior.md §1.1). ``isolation`` is pbsplug's own attribute: where the
hook runs (see `pbsplug.runner`).
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from . import units, values
from .events import EVENTS

#: fail_action values, and the events a hook needs to have one of them.
FAIL_ACTIONS: dict[str, tuple[str, ...]] = {
    "offline_vnodes": ("execjob_begin", "exechost_startup", "execjob_prologue"),
    "clear_vnodes_upon_recovery": ("exechost_startup",),
    "scheduler_restart_cycle": ("execjob_begin", "execjob_prologue"),
}
#: Events a hook needs to run as the job owner (user = pbsuser).
PBSUSER_EVENTS = ("execjob_prologue", "execjob_epilogue", "execjob_preterm")
ORDER_RANGE = {"site": (1, 1000), "pbs": (-1000, 2000)}
ISOLATION_MODES = ("process", "inprocess")
#: The longest alarm a hook may have (pbsplug's bound: PBS sets none, and a value past what
#: a timer can hold failed every run of the hook).
MAX_SECONDS = 86_400
#: The longest freq of a periodic hook (pbsplug's bound, for the same reason).
MAX_FREQ = 366 * 86_400
#: The suffixes PBS accepts for a hook's config file (qmgr import hook ... x-config).
CONFIG_SUFFIXES = (".json", ".py", ".txt", ".xml", ".ini")
#: What PBS names the config file it stored (server_priv/hooks/<h>.CF): read as is.
STORED_CONFIG_SUFFIX = ".CF"


def config_suffix_error(path: str | os.PathLike[str]) -> str | None:
    """PBS's refusal of a hook config file by its suffix, or None. PBS's own stored
    ``<hook>.CF`` (what `pbsplug hook export` writes) is taken too."""
    suffix = Path(path).suffix
    if suffix in CONFIG_SUFFIXES or suffix == STORED_CONFIG_SUFFIX:
        return None
    return f"{path} contains an invalid suffix, should be one of: {' '.join(CONFIG_SUFFIXES)}"


class HookAttributeError(ValueError):
    """An invalid hook attribute, worded as PBS's qmgr words it (PBSE_HOOKERROR, 15136)."""

    code = 15136


@dataclass(frozen=True)
class HookAttributes:
    """A hook's attributes. Defaults are PBS's, except `enabled`: an installed plugin stays
    off until the site enables it."""

    enabled: bool = False
    events: tuple[str, ...] = ()
    order: int = 1
    alarm: int = 30
    freq: int = 120
    fail_action: tuple[str, ...] = ()      # () is PBS's `none`
    user: str = "pbsadmin"
    type: str = "site"
    debug: bool = False
    isolation: str | None = None           # None: "process" (inprocess is an opt-in)

    def mode_for(self, event: str) -> str:
        """Where this hook runs for `event`: in a forked process unless the site trusts it
        with ``isolation = "inprocess"``; a pbsuser hook always runs in its own process.
        No hook can take the server down by default, whatever the event."""
        if self.user == "pbsuser":
            return "process"
        return self.isolation or "process"

    def to_dict(self) -> dict[str, Any]:
        return {f.name: (list(v) if isinstance(v := getattr(self, f.name), tuple) else v)
                for f in fields(self)}


def parse_bool(value: Any, attr: str) -> bool:
    if isinstance(value, (bool, str)):
        try:
            return units.parse_bool(value)
        except ValueError:
            pass
    raise HookAttributeError(
        f"invalid value '{value}' for hook attribute '{attr}': "
        "expected true|t|y|1|false|f|n|0")


def _as_list(value: Any, attr: str) -> tuple[str, ...]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
        return tuple(v for v in items if v)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(v.strip() for v in value if v.strip())
    raise HookAttributeError(
        f"invalid value '{value}' for hook attribute '{attr}': expected a comma-separated "
        "list or a list of strings")


def _as_int(value: Any, attr: str, digits_only: bool = False) -> int:
    if isinstance(value, bool):
        raise HookAttributeError(f"invalid value '{value}' for hook attribute '{attr}'")
    if isinstance(value, int):
        return value
    text = str(value).strip()
    number = text if digits_only else text.lstrip("+-")
    if not values.digits(number):
        raise HookAttributeError(
            f"invalid value '{value}' for hook attribute '{attr}': expected an integer")
    if values.past(number, values.LONG_MAX):  # (before int(): 4300 digits and more refused)
        raise HookAttributeError(f"invalid value '{values.cut(text, 40)}' for hook "
                                 f"attribute '{attr}': out of range")
    return int(text)


def resolve_attributes(name: str, base: HookAttributes,
                       overrides: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
                       ) -> HookAttributes:
    """Apply `overrides` (``attr -> value``, in order) to `base` and check the result with
    PBS's rules. Values may be PBS strings (as in a .HK file or qmgr) or TOML values.

    `events` also accepts PBS's ``event`` name. Raises `HookAttributeError` with PBS's text.
    """
    items = list(overrides.items() if isinstance(overrides, Mapping) else overrides)
    values = base.to_dict()
    given = set()
    for attr, value in items:
        attr = "events" if attr == "event" else attr
        given.add(attr)
        if attr in ("enabled", "debug"):
            values[attr] = parse_bool(value, attr)
        elif attr == "events":
            values[attr] = _as_list(value, "event")
        elif attr == "fail_action":
            actions = _as_list(value, attr)
            values[attr] = () if actions == ("none",) else actions
        elif attr in ("order", "alarm"):
            values[attr] = _as_int(value, attr)
        elif attr == "freq":
            values[attr] = _as_int(value, attr, digits_only=True)
        elif attr in ("user", "type", "isolation"):
            values[attr] = None if value in (None, "") and attr == "isolation" else str(value)
        else:
            raise HookAttributeError(f"unknown hook attribute '{attr}' for hook '{name}'")
    # (to_dict's lists back to tuples; the fields' types differ, as to_dict's result says)
    resolved: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v
                                for k, v in values.items()}
    attrs = replace(base, **resolved)
    check_attributes(name, attrs, given | _declared(base))
    return attrs


def _declared(base: HookAttributes) -> set[str]:
    """Attributes of `base` that differ from PBS's defaults (their rules apply too)."""
    default = HookAttributes()
    return {f.name for f in fields(base) if getattr(base, f.name) != getattr(default, f.name)}


def check_attributes(name: str, attrs: HookAttributes, given: Iterable[str] = ()) -> None:
    """PBS's rules, in PBS's order. `given` names the attributes set explicitly: freq's rule
    applies only when freq was set, as in qmgr."""
    given = set(given)
    if attrs.type not in ORDER_RANGE:
        raise HookAttributeError(f"invalid hook type '{attrs.type}': expected site or pbs")
    if attrs.type == "site" and name.startswith("PBS"):
        raise HookAttributeError(
            f"hook_name '{name}', cannot use PBS as a prefix it is reserved for pbs hooks")
    unknown = [e for e in attrs.events if e not in EVENTS]
    if unknown:
        raise HookAttributeError(
            f"invalid argument ({','.join(unknown)}) to event. Should be one or more of: "
            f"{','.join(EVENTS)}")
    if "provision" in attrs.events and len(attrs.events) > 1:
        raise HookAttributeError(
            "'provision' event cannot be combined with any other event")
    if len(set(attrs.events)) != len(attrs.events):
        raise HookAttributeError(f"event list of hook '{name}' names an event twice")
    low, high = ORDER_RANGE[attrs.type]
    if not low <= attrs.order <= high:
        raise HookAttributeError(
            f"order given ({attrs.order}) is outside the acceptable range of "
            f"[{low}, {high}] for type '{attrs.type}'.")
    if attrs.alarm <= 0:
        raise HookAttributeError(
            f"set_hook_alarm: alarm value '{attrs.alarm}' of a hook must be > 0")
    if attrs.alarm > MAX_SECONDS:
        raise HookAttributeError(f"set_hook_alarm: alarm value '{attrs.alarm}' of a hook "
                                 f"must be at most {MAX_SECONDS} (a day)")
    if attrs.freq <= 0:
        raise HookAttributeError(f"set_hook_freq: freq value '{attrs.freq}' of a hook must be > 0")
    if attrs.freq > MAX_FREQ:
        raise HookAttributeError(f"set_hook_freq: freq value '{attrs.freq}' of a hook must be "
                                 f"at most {MAX_FREQ} (a year)")
    if "freq" in given and attrs.freq != HookAttributes.freq and not (
            {"periodic", "exechost_periodic"} & set(attrs.events)):
        raise HookAttributeError(
            f"Can't set hook freq value to '{attrs.freq}': hook event must contain at "
            "least'exechost_periodic' or 'periodic'")
    if attrs.user not in ("pbsadmin", "pbsuser"):
        raise HookAttributeError(
            f"invalid value '{attrs.user}' for hook attribute 'user': expected pbsadmin or "
            "pbsuser")
    if attrs.user == "pbsuser":
        if not set(PBSUSER_EVENTS) & set(attrs.events) or (
                {"periodic", "exechost_periodic"} & set(attrs.events)):
            raise HookAttributeError(
                "Can't set hook user value to 'pbsuser': hook event must contain at least "
                + ",".join(PBSUSER_EVENTS))
    if "none" in attrs.fail_action:
        raise HookAttributeError(
            "Can't set hook fail_action value to 'none' together with another value")
    for action in attrs.fail_action:
        if action not in FAIL_ACTIONS:
            raise HookAttributeError(
                f"Can't set hook fail_action value to '{action}': expected none or any of "
                f"{', '.join(FAIL_ACTIONS)}")
        needs = FAIL_ACTIONS[action]
        if not set(needs) & set(attrs.events):
            raise HookAttributeError(
                f"Can't set hook fail_action value to '{action}': hook event must contain at "
                f"least one of {', '.join(needs)}")
    if attrs.isolation is not None and attrs.isolation not in ISOLATION_MODES:
        raise HookAttributeError(
            f"invalid value '{attrs.isolation}' for hook attribute 'isolation': expected "
            "process or inprocess")


# -- .HK files ---------------------------------------------------------------------------------
# PBS writes hook_name first, then only the attributes that differ from PBS's defaults, in this
# order. PBS's default for `enabled` is true, unlike pbsplug's.
_HK_ORDER = ("type", "enabled", "debug", "user", "fail_action", "event", "order", "alarm", "freq")
_PBS_DEFAULTS = {"type": "site", "enabled": True, "debug": False, "user": "pbsadmin",
                 "fail_action": (), "events": (), "order": 1, "alarm": 30, "freq": 120}


def format_hk(name: str, attrs: HookAttributes) -> str:
    """The text of ``<name>.HK`` as PBS writes it."""
    lines = [f"hook_name={name}"]
    for key in _HK_ORDER:
        attr = "events" if key == "event" else key
        value = getattr(attrs, attr)
        if value == _PBS_DEFAULTS[attr]:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, tuple):
            text = ",".join(value) if value else ("none" if key == "fail_action" else '""')
        else:
            text = str(value)
        lines.append(f"{key}={text}")
    return "\n".join(lines) + "\n"


def parse_hk(text: str, source: str, expected_names: Iterable[str]) -> list[tuple[str, Any]]:
    """The ``attr=value`` pairs of a .HK file, in file order, without hook_name.

    `expected_names` are the names the file may carry in hook_name (the plugin's name and its
    PBS name); a different one fails PBS's integrity check. Unset attributes keep PBS's
    defaults, so the result starts from them: pass it to `resolve_attributes`.
    """
    expected = list(expected_names)
    pairs: list[tuple[str, Any]] = []
    hook_name = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise HookAttributeError(f"{source}:{lineno}: '{line}' is not attr=value")
        if key == "hook_name":
            hook_name = value
            continue
        if key == "pending_delete":
            continue
        if value == '""':
            value = ""
        pairs.append((key, value))
    if hook_name is None or hook_name not in expected:
        raise HookAttributeError(
            f"{source}: hook_name {hook_name!r} failed integrity check "
            f"(expected {' or '.join(map(repr, expected))})")
    # Start from PBS's defaults, so that an attribute the file leaves out means PBS's default.
    return [("enabled", "true")] + pairs


def write_atomically(path: Path, text: str) -> None:
    """Write through a temporary file, fsync and rename, as PBS saves its hook files."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".new")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
