"""pbsplug: a hook-and-plugin framework for PBS-style batch systems.

This module is the kernel's public API, and the only one plugins import (with
`pbsplug.testing` in their tests). The hooks a plugin may implement are declared, with their
documentation, in `pbsplug.hookspecs`.
"""

from __future__ import annotations

from .attributes import AttributeDef, AttributeRegistry, ObjectTypeDef
from .events import EVENTS, HOST_EVENTS, PBSE_HOOKERROR, SERVER_EVENTS, Event, EventSpec, HookExit
from .hookattrs import HookAttributeError, HookAttributes
from .objects import AttributeReadOnly, Job, Queue, Reservation, Resources, Server, Vnode
from .plugins import (
    PluginLoadError,
    PluginRecord,
    PluginSet,
    hookimpl,
    load_plugins,
    plugin_config,
)
from .runner import HookAlarm, HookRun, Outcome, Runner
from .scheduling import CycleStats, JobOrder, Placement, SchedulerInstance
from .settings import KERNEL_API, ConfigError, PluginInfo, Setting
from .siteconfig import SiteConfig, load_site
from .units import (
    exclusivity,
    format_duration,
    format_size,
    parse_bool,
    parse_duration,
    parse_place,
    parse_select,
    parse_size,
)

__version__ = "0.1.0"

__all__ = [
    "EVENTS", "HOST_EVENTS", "KERNEL_API", "PBSE_HOOKERROR", "SERVER_EVENTS",
    "AttributeDef", "AttributeReadOnly", "AttributeRegistry", "ConfigError", "CycleStats",
    "Event", "EventSpec", "HookAlarm", "HookAttributeError", "HookAttributes", "HookExit",
    "HookRun", "Job", "JobOrder", "ObjectTypeDef", "Outcome", "Placement", "PluginInfo",
    "PluginLoadError", "PluginRecord", "PluginSet", "Queue", "Reservation", "Resources",
    "Runner", "SchedulerInstance", "Server", "Setting", "SiteConfig", "Vnode",
    "exclusivity", "format_duration", "format_size", "hookimpl", "load_plugins", "load_site",
    "parse_bool", "parse_duration", "parse_place", "parse_select", "parse_size", "plugin_config",
]
