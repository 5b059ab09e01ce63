"""pbsplug: a hook-and-plugin framework for PBS-style batch systems.

This module is the kernel's public API, and the only one plugins import (with
`pbsplug.testing` in their tests). The hooks a plugin may implement are declared, with their
documentation, in `pbsplug.hookspecs`.
"""

from __future__ import annotations

import importlib
from typing import Any

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
_SUBMODULES = ("clock", "safedirs")

__all__ = sorted((*_MODULE_OF, *_SUBMODULES))


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
