"""Plugin discovery, per-site enablement, and the plugin manager.

Plugins are distributions with an entry point in the ``pbsplug`` group; the entry point's
name is the plugin's name everywhere (site config, CLI group, logs). Loading goes:

1. list the entry points (no import);
2. apply ``$PBSPLUG_LOAD_PLUGINS`` (an allowlist; set but empty means none) and
   ``$PBSPLUG_DISABLE_PLUGINS`` (a denylist), both comma-separated: a plugin they exclude is
   *blocked* and never imported;
3. import the plugins the site enables (``[plugins.<name>] enabled = true``, or
   ``enable_all_installed = true``); the others are *disabled* and stay unimported unless
   asked for (``plugins list``);
4. check each: kernel API version, hook names that no spec declares, hook signatures, hook
   attributes and configuration. A plugin that fails any of it is *failed*: reported with its
   name, distribution version, error and the command that disables it, and skipped. In strict
   mode (``$PBSPLUG_STRICT_PLUGINS=1``, ``--strict`` or ``strict_plugins = true``) any
   failure raises `PluginLoadError`.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata as md
import inspect
import logging
import os
import signal
import threading
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pluggy

from . import hookspecs
from .attributes import AttributeRegistry
from .events import EVENTS, message_text
from .hookattrs import HookAttributeError, HookAttributes, config_suffix_error
from .settings import (
    KERNEL_API,
    ConfigError,
    ConfigIssue,
    PluginInfo,
    api_compatible,
    validate_config,
)
from .siteconfig import SiteConfig, default_home
from .values import quoted

log = logging.getLogger("pbsplug.plugins")

ENTRY_POINT_GROUP = "pbsplug"
ENABLED, DISABLED, BLOCKED, FAILED = "enabled", "disabled", "blocked", "failed"

hookimpl = pluggy.HookimplMarker("pbsplug")


class PluginLoadError(RuntimeError):
    """Strict mode: one or more plugins failed to load."""

    def __init__(self, failed: list[PluginRecord]):
        self.failed = failed
        super().__init__("\n".join(r.failure_text() for r in failed))


def make_plugin_manager() -> pluggy.PluginManager:
    """A plugin manager with pbsplug's hook specs and no plugin (autoload off)."""
    pm = pluggy.PluginManager("pbsplug")
    pm.add_hookspecs(hookspecs)
    return pm


def spec_names() -> frozenset[str]:
    return frozenset(name for name, obj in vars(hookspecs).items()
                     if callable(obj) and hasattr(obj, "pbsplug_spec"))


@dataclass
class PluginRecord:
    """One plugin as the loader saw it."""

    name: str
    dist: str = ""
    version: str = ""
    status: str = DISABLED
    error: str | None = None
    plugin: Any = None
    info: PluginInfo | None = None
    hooks: tuple[str, ...] = ()
    attributes: HookAttributes | None = None
    config: dict[str, Any] = field(default_factory=dict)
    entry_point: Any = None

    @property
    def events(self) -> tuple[str, ...]:
        return tuple(h for h in self.hooks if h in EVENTS)

    def failure_text(self) -> str:
        ver = f" {self.dist} {self.version}" if self.dist else ""
        return (f"plugin '{self.name}'{ver} failed: {self.error} "
                f"(disable it: pbsplug plugins disable {self.name}, "
                f"or PBSPLUG_DISABLE_PLUGINS={self.name})")

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "distribution": self.dist, "version": self.version,
            "status": self.status, "hooks": list(self.hooks), "error": self.error,
        }
        if self.attributes is not None:
            out["attributes"] = self.attributes.to_dict()
        return out


def _env_list(name: str, env: Mapping[str, str]) -> set[str] | None:
    if name not in env:
        return None
    return {p.strip() for p in env[name].split(",") if p.strip()}


def strict_from_env(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("PBSPLUG_STRICT_PLUGINS", "").strip().lower() in ("1", "true", "yes", "y")


def installed_entry_points() -> list[md.EntryPoint]:
    """The ``pbsplug`` entry points, without importing anything."""
    return sorted(md.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)


class PluginSet:
    """The loaded plugins: their records, the plugin manager with the enabled ones
    registered, and what they registered (attributes, object types).

    With `private_state` (a set loaded for a replay, `pbsplug sim`), every plugin's state
    folders (the keys its `Setting` marks `state_folder`) are their empty default from its
    first `configure` on, whatever the site set: the site's values are in
    `state_folders_set_aside`, and no plugin is ever given them."""

    def __init__(self, site: SiteConfig, pm: pluggy.PluginManager | None = None, *,
                 private_state: bool = False):
        self.site = site
        self.pm = pm or make_plugin_manager()
        self.records: dict[str, PluginRecord] = {}
        #: Names of every installed plugin (entry points), loaded or not.
        self.installed: list[str] = []
        self._registry: AttributeRegistry | None = None
        self.private_state = private_state
        #: With `private_state`: the site's values of the state folders left at their
        #: default, by (plugin, key).
        self.state_folders_set_aside: dict[tuple[str, str], Any] = {}
        #: The pbsplug home each plugin was last configured under (`_configure`), where
        #: it may have resolved an empty state folder (`private_state_folders`).
        self._configured_home: dict[str, Path] = {}

    # -- queries ---------------------------------------------------------------------------------
    @property
    def enabled(self) -> list[PluginRecord]:
        return [r for r in self.records.values() if r.status == ENABLED]

    @property
    def failed(self) -> list[PluginRecord]:
        return [r for r in self.records.values() if r.status == FAILED]

    def get(self, name: str) -> PluginRecord | None:
        return self.records.get(name)

    @property
    def hook(self) -> pluggy.HookRelay:
        """The plugin manager's hook caller (``plugins.hook.sched_cycle_begin(...)``)."""
        return self.pm.hook

    def attribute_registry(self) -> AttributeRegistry:
        """What the enabled plugins registered through `register_attributes` (computed once,
        and again after a plugin is registered or unregistered: `add`, `_fail`). A plugin
        whose registration fails is reported and skipped, like a failed import."""
        if self._registry is None:
            registry = AttributeRegistry()
            for impl in self.pm.hook.register_attributes.get_hookimpls():
                registry._plugin = impl.plugin_name
                self.guarded(self.records[impl.plugin_name], "register_attributes",
                             functools.partial(impl.function, registry=registry))
            registry._plugin = ""
            self._registry = registry
        return self._registry

    # -- loading ---------------------------------------------------------------------------------
    def add(self, name: str, plugin: Any, *, dist: str = "", version: str = "",
            enable: bool | None = None) -> PluginRecord:
        """Register a plugin object (a module or any object with hookimpls) under `name`,
        as if an entry point had named it. `enable` overrides the site's choice. A name
        added again is the plugin loaded again (a test's other configuration): what was
        registered under it leaves the plugin manager first (pluggy takes a name once),
        and its record is a new one, with nothing of the earlier add on it."""
        if self.pm.get_plugin(name) is not None:
            self.pm.unregister(name=name)
            self._registry = None  # (what it registered goes with it)
        for key in [k for k in self.state_folders_set_aside if k[0] == name]:
            del self.state_folders_set_aside[key]
        record = PluginRecord(name, dist, version)
        self.records[name] = record
        record.plugin = plugin
        enabled = self.site.is_enabled(name) if enable is None else enable
        self._check_and_register(record, enabled)
        return record

    def guarded(self, record: PluginRecord, what: str, call: Callable[[], Any]) -> bool:
        """Run one of a plugin's load-time calls (its import, `configure`,
        `register_attributes`); False when it failed the plugin. Whatever it raises
        (`SystemExit` too) fails the plugin, not the tool; so does a change it makes to the
        process's signal handlers, umask or working folder, which is undone (a handler for
        SIGCHLD set to ignore at import made every job's shepherd lose its job)."""
        before = _process_state()
        try:
            call()
        except KeyboardInterrupt:
            _restore_process_state(before)
            raise
        except BaseException as exc:  # noqa: BLE001 - a plugin must never take the tool down
            _restore_process_state(before)
            where = ""
            if what == "import" and exc.__traceback__:  # which of its files, and where
                last = traceback.extract_tb(exc.__traceback__)[-1]
                where = f" at {last.filename}:{last.lineno}"
            self._fail(record, f"{what} failed: {type(exc).__name__}: "
                               f"{message_text(exc)}{where}{_older_kernel(what, exc)}")
            return False
        changed = _restore_process_state(before)
        if changed:
            self._fail(record, f"{what} changed the process's {changed} (undone): a plugin "
                               "may not change what the whole process shares")
            return False
        return True

    def _fail(self, record: PluginRecord, error: str) -> None:
        record.status = FAILED
        record.error = error
        # (only under its own name: the object may be another name's, which pluggy's
        # refusal of this one leaves registered)
        if record.plugin is not None and self.pm.get_plugin(record.name) is record.plugin:
            self.pm.unregister(name=record.name)
            self._registry = None  # (what it registered goes with it)

    def _check_and_register(self, record: PluginRecord, enabled: bool) -> None:
        plugin = record.plugin
        info = getattr(plugin, "plugin_info", None)
        if info is None:
            info = PluginInfo()
        elif not isinstance(info, PluginInfo):
            return self._fail(record, "plugin_info is not a pbsplug.PluginInfo")
        record.info = info
        if problem := api_compatible(info.api):
            return self._fail(record, problem)
        names = spec_names()
        impls = _hookimpl_names(plugin)
        unknown = sorted(set(impls) - names)
        if unknown:
            return self._fail(record, f"implements hooks no spec declares: {', '.join(unknown)}"
                                      " (check the spelling against `pbsplug hooks specs`)")
        try:
            problem = _plugin_info_problem(info, impls, names)
        except Exception as exc:  # noqa: BLE001 - a bad plugin_info (config=42), a check that raises
            problem = f"{type(exc).__name__}: {message_text(exc)}"
        if problem:
            return self._fail(record, f"bad plugin_info: {problem}")
        record.hooks = tuple(sorted(impls))
        implemented = tuple(h for h in impls if h in EVENTS)
        try:
            declared = info.hook_attributes(implemented)
            attributes = self.site.hook_attributes(record.name, declared)
            record.attributes = attributes
        except HookAttributeError as exc:
            return self._fail(record, str(exc))
        except Exception as exc:  # noqa: BLE001 - a bad plugin_info (alarm="60")
            return self._fail(record, f"bad plugin_info: {type(exc).__name__}: "
                                      f"{message_text(exc)}")
        if not_implemented := sorted(set(attributes.events) - set(implemented)):
            return self._fail(record, f"events {', '.join(not_implemented)} are enabled but "
                                      "the plugin implements no hook for them")
        config_file = self.site.plugin(record.name).config_file
        if config_file is not None and (why := config_suffix_error(config_file)):
            return self._fail(record, f"bad configuration: {why}")
        try:
            values, sources = self.site.plugin_config_values(record.name)
            record.config, issues = _validate_plugin_config(record.name, info, values, sources)
        except ConfigError as exc:
            issues = exc.issues
        except Exception as exc:  # noqa: BLE001 - the plugin's own check_config raised
            return self._fail(record, f"checking its configuration failed: "
                                      f"{type(exc).__name__}: {message_text(exc)}")
        if issues:
            return self._fail(record, "bad configuration: " + "; ".join(map(str, issues)))
        set_aside = self._default_state_folders(record) if self.private_state else {}
        self.state_folders_set_aside.update(set_aside)
        record.attributes = attributes = replace(attributes, enabled=enabled)
        if not enabled:
            record.status = DISABLED
            return
        if "provision" in attributes.events:  # PBS: only one hook may have it
            other = next((r.name for r in self.enabled if r is not record
                          and r.attributes is not None and "provision" in r.attributes.events),
                         None)
            if other is not None:
                return self._fail(record, f"Another hook '{other}' already has event "
                                          "'provision', only one 'provision' hook allowed")
        try:
            self.pm.register(plugin, name=record.name)
        except (pluggy.PluginValidationError, ValueError) as exc:
            # (pluggy's text takes three lines; an error here is one)
            why = _argument_problem(plugin, record.hooks) or " ".join(str(exc).split())
            return self._fail(record, f"cannot register: {why}")
        self._registry = None  # (its register_attributes is read at the next call)
        if self._configure(record):
            record.status = ENABLED
        elif set_aside:  # (as the simulator says it of a set loaded otherwise)
            record.error = f"configured with the replay's state folder: {record.error}"

    def _configure(self, record: PluginRecord) -> bool:
        """Give a registered plugin its configuration (its `configure` hook, if any); False
        when that failed the plugin."""
        for impl in self.pm.hook.configure.get_hookimpls():
            if impl.plugin_name != record.name:
                continue
            args = {"config": dict(record.config)} if impl.argnames else {}
            if not self.guarded(record, "configure", functools.partial(impl.function, **args)):
                self._configured_home.pop(record.name, None)
                return False
        self._configured_home[record.name] = default_home()
        return True

    @staticmethod
    def _default_state_folders(record: PluginRecord) -> dict[tuple[str, str], Any]:
        """Set `record`'s state folders (the keys its `Setting` marks `state_folder`) that
        the site set back to their empty default; the site's values, by (plugin, key)."""
        schema = record.info.config if record.info is not None else {}
        set_aside = {}
        for key, setting in schema.items():
            if setting.state_folder and record.config.get(key, setting.default) \
                    != setting.default:
                set_aside[(record.name, key)] = record.config[key]
                record.config[key] = setting.default
        return set_aside

    @contextlib.contextmanager
    def private_state_folders(self) -> Iterator[dict[tuple[str, str], Any]]:
        """While the block runs, every enabled plugin's state folders (the keys its
        `Setting` marks `state_folder`) are their empty default, whatever the site set, and
        each plugin that has one is configured again with it, under the pbsplug home of the
        block, unless it was last configured so under that home (a set loaded with
        `private_state` in the replay's home, as `pbsplug sim` loads it: configured once a
        run, not again here nor after): a replay (`pbsplug sim`), which makes its own work
        folder the pbsplug home, then has every plugin keep its records there, never in a
        live site's folder. A
        plugin whose folder was left empty too: its first `configure` may have resolved
        the empty folder under the home it was loaded in (``<home>/hooks/tmp``). Gives the
        site's values set aside, by (plugin, key), with those set aside at load
        (`private_state`). A plugin whose `configure` now fails is failed, as at load.

        When the block ends, each plugin it configured has its configuration back and is
        configured again with it, under the home of that moment (a plugin failed in the
        block is registered again first), so that whatever uses the set afterwards (the
        next run of `sim compare`, a test) sees the site's folders, as before the block."""
        overridden = {key: value for key, value in self.state_folders_set_aside.items()
                      if (r := self.records.get(key[0])) is not None and r.status == ENABLED}
        changed: list[tuple[PluginRecord, dict[str, Any]]] = []
        try:
            for record in self.enabled:
                schema = record.info.config if record.info is not None else {}
                if not any(setting.state_folder for setting in schema.values()):
                    continue
                before = dict(record.config)
                overridden.update(self._default_state_folders(record))
                if record.config == before and \
                        self._configured_home.get(record.name) == default_home():
                    continue  # (configured so already, in this home)
                changed.append((record, before))
                self._configure(record)
            yield overridden
        finally:
            for record, before in reversed(changed):
                record.config = before
                if record.status == FAILED:  # (by its configure in the block)
                    record.status, record.error = ENABLED, None
                    self.pm.register(record.plugin, name=record.name)
                    self._registry = None
                self._configure(record)

    def config_issues(self) -> list[str]:
        """Every configuration problem of the site's plugins (for `pbsplug config check`)."""
        out = []
        for record in self.records.values():
            if record.status == FAILED and record.error:
                out.append(f"{record.name}: {record.error}")
        for name in self.site.plugins:
            if name not in self.records:
                out.append(f"{self.site.path}: [plugins.{name}]: no installed plugin is named "
                           f"'{name}' (installed: {', '.join(sorted(self.records)) or 'none'})")
        return out


_SIGNALS = tuple(s for s in signal.valid_signals() if s not in (signal.SIGKILL, signal.SIGSTOP))


def _older_kernel(what: str, exc: BaseException) -> str:
    """A hint for an import that failed on a name or module pbsplug lacks: the plugin is
    likely written for a newer kernel API, which `plugin_info.api` cannot say (it is read
    after the import)."""
    name = getattr(exc, "name", None) or ""
    if what != "import" or not isinstance(exc, ImportError) or \
            not (name == "pbsplug" or name.startswith("pbsplug.")):
        return ""
    return (f" (this pbsplug offers kernel API {KERNEL_API[0]}.{KERNEL_API[1]}: the plugin "
            "may need a newer one)")


def _process_state() -> dict[str, Any]:
    """What a plugin's import or configure must leave as it was: the signal handlers (read
    only in the main thread, where they can be set), the umask and the working folder."""
    state: dict[str, Any] = {}
    if threading.current_thread() is threading.main_thread():
        state["signals"] = {s: signal.getsignal(s) for s in _SIGNALS}
    mask = os.umask(0o022)
    os.umask(mask)
    state["umask"] = mask
    try:
        state["cwd"] = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        state["cwd"] = None
    return state


def _restore_process_state(before: dict[str, Any]) -> str:
    """Put back what `_process_state` read; what had changed, '' for nothing."""
    changed = []
    for sig, handler in before.get("signals", {}).items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)
            changed.append(f"{signal.Signals(sig).name} handler")
    mask = os.umask(before["umask"])
    if mask != before["umask"]:
        changed.append(f"umask ({mask:04o})")
    fd = before["cwd"]
    if fd is not None:
        try:
            if not os.path.samestat(os.stat("."), os.fstat(fd)):
                os.fchdir(fd)
                changed.append("working folder")
        except OSError:
            os.fchdir(fd)
            changed.append("working folder")
        finally:
            os.close(fd)
    return ", ".join(changed)


def _plugin_info_problem(info: PluginInfo, impls: Iterable[str],
                         names: frozenset[str]) -> str | None:
    """What `plugin_info` declares that cannot be: a `sim_safe` name that is no hook of the
    plugin (a typo would leave the hook out of every replay in silence), a configuration
    default its own `Setting` refuses (the hook would read it unchecked), a `state_folder`
    that a replay could not move into its own work folder."""
    sim_safe = info.sim_safe
    if not isinstance(sim_safe, (tuple, list)) or not all(isinstance(n, str) for n in sim_safe):
        return (f"sim_safe must be a tuple of hook names, not {quoted(sim_safe)} "
                "(one name: ('periodic',))")
    for name in sim_safe:
        if name not in names:
            return (f"sim_safe names {quoted(name)}, which is no hook (check the spelling "
                    "against `pbsplug hooks specs`)")
        if name not in impls:
            return f"sim_safe names {name}, which the plugin does not implement"
    for key, setting in info.config.items():
        if setting.state_folder and (setting.type is not str or setting.default != ""):
            return (f"config key {quoted(key)} is a state_folder: it must be a str whose "
                    "default is empty (read as the pbsplug home's hooks/tmp, which a replay "
                    "makes its own work folder), not " + ("a required key" if setting.required
                                                          else f"{setting.type.__name__} "
                                                          f"{quoted(setting.default)}"))
        if setting.required or setting.default is None:  # (None: optional, unset)
            continue
        try:
            setting.coerce(setting.default)
        except ValueError as exc:
            return (f"the default of config key {quoted(key)}, {quoted(setting.default)}, "
                    f"breaks its own Setting: {message_text(exc)}")
    return None


def _argument_problem(plugin: Any, hooks: Iterable[str]) -> str | None:
    """A hook that takes an argument its spec does not have, said in one line."""
    for name in sorted(hooks):
        function, spec = getattr(plugin, name, None), getattr(hookspecs, name, None)
        if function is None or spec is None:
            continue
        try:
            params = inspect.signature(function).parameters.values()
            allowed = list(inspect.signature(spec).parameters)
        except (TypeError, ValueError):
            continue
        taken = [p.name for p in params if p.default is p.empty and p.kind in (
            p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if extra := [a for a in taken if a not in allowed]:
            return (f"hook {name}({', '.join(taken)}) takes {', '.join(extra)}, which its spec "
                    f"{name}({', '.join(allowed)}) does not have: a hook takes the spec's "
                    "arguments by name, or fewer (`pbsplug hooks specs`)")
    return None


def _hookimpl_names(plugin: Any) -> list[str]:
    names = []
    for attr in dir(plugin):
        try:
            obj = getattr(plugin, attr)
        except Exception:  # a property that raises is no hook
            continue
        if inspect.isroutine(obj) and hasattr(obj, "pbsplug_impl"):
            names.append(getattr(obj, "__name__", attr) if attr.startswith("_") else attr)
    return names


def _validate_plugin_config(name: str, info: PluginInfo, values: Mapping[str, Any],
                            sources: Mapping[str, str]
                            ) -> tuple[dict[str, Any], list[ConfigIssue]]:
    config, issues = validate_config(info.config, values, "", prefix="")
    if not issues and info.check_config is not None:
        issues = [ConfigIssue("", key, config.get(key), problem)
                  for key, problem in info.check_config(config)]
    fixed = []
    for issue in issues:
        src = sources.get(issue.key, f"[plugins.{name}.config]")
        key = issue.key if src.endswith(".CF") or src.endswith(".json") else (
            f"plugins.{name}.config.{issue.key}")
        fixed.append(type(issue)(src, key, issue.value, issue.expected))
    return config, fixed


def _load(ep: md.EntryPoint, out: list[Any]) -> None:
    """Import the plugin `ep` names, into `out` (a call for `PluginSet.guarded`)."""
    out.append(ep.load())


def load_plugins(site: SiteConfig, *, which: str = "enabled", strict: bool | None = None,
                 env: Mapping[str, str] | None = None,
                 entry_points: Iterable[md.EntryPoint] | None = None,
                 only: set[str] | None = None, report: bool = True,
                 private_state: bool = False) -> PluginSet:
    """Discover the installed plugins and load them for `site`.

    `which` is ``"enabled"`` (import only what the site enables) or ``"all"`` (import every
    plugin not blocked, to report on it; only enabled ones are registered). `strict` defaults
    to the environment and the site. `only` restricts loading to the named plugins (the
    others are listed in `PluginSet.installed` but not looked at). With `report`, each
    failed plugin is logged as a warning (unless strict mode raises instead). With
    `private_state` (a replay's set), no plugin is configured with a state folder the site
    set (`PluginSet`).
    """
    env = os.environ if env is None else env
    if strict is None:
        strict = strict_from_env(env) or site.strict_plugins
    allow = _env_list("PBSPLUG_LOAD_PLUGINS", env)
    deny = _env_list("PBSPLUG_DISABLE_PLUGINS", env) or set()
    plugins = PluginSet(site, private_state=private_state)
    eps = list(installed_entry_points() if entry_points is None else entry_points)
    plugins.installed = sorted({ep.name for ep in eps})
    for ep in eps:
        if only is not None and ep.name not in only:
            continue
        dist = getattr(ep, "dist", None)
        dist_name = dist.metadata["Name"] if dist is not None else ""
        version = dist.version if dist is not None else ""
        if ep.name in plugins.records:
            first = plugins.records[ep.name]
            plugins._fail(first, f"two distributions provide plugin '{ep.name}': "
                                 f"{first.dist} and {dist_name}")
            continue
        record = PluginRecord(ep.name, dist_name, version, entry_point=ep)
        plugins.records[ep.name] = record
        if (allow is not None and ep.name not in allow) or ep.name in deny:
            record.status = BLOCKED
            record.error = ("blocked by PBSPLUG_LOAD_PLUGINS" if allow is not None
                            and ep.name not in allow else "blocked by PBSPLUG_DISABLE_PLUGINS")
            continue
        enabled = site.is_enabled(ep.name)
        if not enabled and which != "all":
            record.status = DISABLED
            continue
        loaded: list[Any] = []
        if not plugins.guarded(record, "import", functools.partial(_load, ep, loaded)):
            continue
        record.plugin = loaded[0]
        plugins._check_and_register(record, enabled)
    if strict and plugins.failed:
        raise PluginLoadError(plugins.failed)
    if report:
        for record in plugins.failed:
            log.warning(record.failure_text())
    return plugins


def plugin_config(name: str, site: SiteConfig | None = None) -> dict[str, Any]:
    """The checked configuration of plugin `name` for `site` (default: the site config the
    CLI uses), for a plugin's own commands. Raises `PluginLoadError` when the plugin is not
    installed, is blocked, or fails to load (its configuration included)."""
    from .siteconfig import load_site

    site = site if site is not None else load_site()
    plugins = load_plugins(site, which="all", strict=False, only={name}, report=False)
    record = plugins.get(name)
    if record is None or record.status in (FAILED, BLOCKED):
        record = record or PluginRecord(name, error="not installed")
        record.status = FAILED
        raise PluginLoadError([record])
    return dict(record.config)
