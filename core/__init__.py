"""pbsplug: a hook-and-plugin framework for PBS-style batch systems.

This module is the kernel's public API, and the only one plugins import (with
`pbsplug.testing` in their tests). The hooks a plugin may implement are declared, with their
documentation, in `pbsplug.hookspecs`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: The public API, by the kernel module that defines it. Each module is imported on first use
#: (PEP 562), so ``import pbsplug`` costs nothing until a name is used: the PBS commands
#: (``pbsplug qsub``) never load the kernel at all.
_EXPORTS: dict[str, tuple[str, ...]] = {
    "attributes": ("AttributeDef", "AttributeRegistry", "ObjectTypeDef"),
    "cli.options": ("cli_count", "cli_seconds"),
    "events": ("EVENTS", "HOST_EVENTS", "PBSE_HOOKERROR", "SERVER_EVENTS", "Event", "EventSpec",
               "HookExit"),
    "hookattrs": ("HookAttributeError", "HookAttributes"),
    "hookhome": ("HookHome", "hook_home"),
    "objects": ("AttributeReadOnly", "Job", "Queue", "Reservation", "Resources", "Server",
                "Vnode"),
    "plugins": ("PluginLoadError", "PluginRecord", "PluginSet", "hookimpl", "load_plugins",
                "plugin_config"),
    "runner": ("HookAlarm", "HookRun", "Outcome", "Runner"),
    "scheduling": ("CycleStats", "JobOrder", "Placement", "SchedulerInstance"),
    "settings": ("KERNEL_API", "ConfigError", "PluginInfo", "Setting", "absolute_path",
                 "absolute_path_or_empty"),
    "siteconfig": ("SiteConfig", "default_home", "load_site"),
    "units": ("exclusivity", "exec_vnode_names", "format_duration", "format_size",
              "parse_bool", "parse_duration", "parse_exec_vnode", "parse_place",
              "parse_select", "parse_size"),
    "values": ("digits", "resource_type"),
}
_MODULE_OF = {name: module for module, names in _EXPORTS.items() for name in names}
#: Kernel modules plugins use by name (``pbsplug.clock.now()``), imported on first use too.
_SUBMODULES = ("clock", "jsontext", "safedirs")

__all__ = sorted((*_MODULE_OF, *_SUBMODULES))

#: What a type checker reads (`py.typed`): each name from its module, as `__getattr__`
#: gives it at run time (else every name would be `Any` to it). tests/test_typed.py keeps
#: the two alike.
if TYPE_CHECKING:
    from . import clock as clock
    from . import jsontext as jsontext
    from . import safedirs as safedirs
    from .attributes import AttributeDef as AttributeDef
    from .attributes import AttributeRegistry as AttributeRegistry
    from .attributes import ObjectTypeDef as ObjectTypeDef
    from .cli.options import cli_count as cli_count
    from .cli.options import cli_seconds as cli_seconds
    from .events import EVENTS as EVENTS
    from .events import HOST_EVENTS as HOST_EVENTS
    from .events import PBSE_HOOKERROR as PBSE_HOOKERROR
    from .events import SERVER_EVENTS as SERVER_EVENTS
    from .events import Event as Event
    from .events import EventSpec as EventSpec
    from .events import HookExit as HookExit
    from .hookattrs import HookAttributeError as HookAttributeError
    from .hookattrs import HookAttributes as HookAttributes
    from .hookhome import HookHome as HookHome
    from .hookhome import hook_home as hook_home
    from .objects import AttributeReadOnly as AttributeReadOnly
    from .objects import Job as Job
    from .objects import Queue as Queue
    from .objects import Reservation as Reservation
    from .objects import Resources as Resources
    from .objects import Server as Server
    from .objects import Vnode as Vnode
    from .plugins import PluginLoadError as PluginLoadError
    from .plugins import PluginRecord as PluginRecord
    from .plugins import PluginSet as PluginSet
    from .plugins import hookimpl as hookimpl
    from .plugins import load_plugins as load_plugins
    from .plugins import plugin_config as plugin_config
    from .runner import HookAlarm as HookAlarm
    from .runner import HookRun as HookRun
    from .runner import Outcome as Outcome
    from .runner import Runner as Runner
    from .scheduling import CycleStats as CycleStats
    from .scheduling import JobOrder as JobOrder
    from .scheduling import Placement as Placement
    from .scheduling import SchedulerInstance as SchedulerInstance
    from .settings import KERNEL_API as KERNEL_API
    from .settings import ConfigError as ConfigError
    from .settings import PluginInfo as PluginInfo
    from .settings import Setting as Setting
    from .settings import absolute_path as absolute_path
    from .settings import absolute_path_or_empty as absolute_path_or_empty
    from .siteconfig import SiteConfig as SiteConfig
    from .siteconfig import default_home as default_home
    from .siteconfig import load_site as load_site
    from .units import exclusivity as exclusivity
    from .units import exec_vnode_names as exec_vnode_names
    from .units import format_duration as format_duration
    from .units import format_size as format_size
    from .units import parse_bool as parse_bool
    from .units import parse_duration as parse_duration
    from .units import parse_exec_vnode as parse_exec_vnode
    from .units import parse_place as parse_place
    from .units import parse_select as parse_select
    from .units import parse_size as parse_size
    from .values import digits as digits
    from .values import resource_type as resource_type


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)  # (import sets the attribute)
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module 'pbsplug' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
