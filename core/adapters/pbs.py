"""``pbsplug pbs install|uninstall|status``: the site's plugins as hooks in a real PBS.

Each plugin the site enables becomes one *site* hook in the running PBS server, named
``pbsplug_<plugin>`` (PBS keeps names starting with ``PBS`` for its own hooks). Its attributes
are the plugin's declared ones with the site's overrides (event, order, alarm, freq,
fail_action, user, debug), its script is `pbs_hook` (the same for every plugin) and its
config file is JSON carrying what the script needs: the environment to import pbsplug from,
the plugin's entry point, its hook attributes and its configuration. Everything is done
through PBS's own ``qmgr`` (``create hook``, ``set hook``, ``import hook``), which pushes MoM
hooks to every execution host.

`plan` works out what the site wants; `current` reads what PBS has (``list hook`` and
``export hook``); `changes` is the difference as qmgr commands, so a second install updates
what changed and touches nothing else, and `uninstall` deletes exactly the hooks whose
config says pbsplug made them. What cannot run inside PBS (the scheduler's extension hooks:
PBS's scheduler is C with no Python extension point) is listed, with why.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..events import EVENTS
from ..jsontext import JsonError, loads
from ..plugins import PluginRecord, PluginSet
from .pbs_bridge import hook_objects
from .rootpaths import RootPath, root_paths, status_lines, unsafe

#: Every hook pbsplug installs is named so; uninstall touches no other.
PREFIX = "pbsplug_"
#: The mark in a hook's config that pbsplug made it.
INSTALLED_BY = "pbsplug pbs install"
#: The hook script, the same for every plugin.
SCRIPT = Path(__file__).with_name("pbs_hook.py")
#: PBS's range for a site hook's order (pbs-behavior.md §1.1).
SITE_ORDER = (1, 1000)
#: Events whose hooks may carry each fail_action (pbs-behavior.md §1.1).
FAIL_ACTION_EVENTS = {
    "offline_vnodes": {"execjob_begin", "exechost_startup", "execjob_prologue"},
    "clear_vnodes_upon_recovery": {"exechost_startup"},
    "scheduler_restart_cycle": {"execjob_begin", "execjob_prologue"},
}
#: Why each kind of plugin hook has no place inside PBS (configure, register_commands and
#: the demo hooks need none: the bridge configures the plugin, the CLI is pbsplug's own).
NOT_IN_PBS = {
    "sched_node_availability": "PBS's scheduler (pbs_sched) is C code and cannot ask it; the "
                               "server periodic's bridge does, to estimate jobs PBS left "
                               "without an estimate (a job needing a sleeping vnode)",
    "sched_": "PBS's scheduler (pbs_sched) is C code with no Python extension point",
    "register_attributes": "PBS defines custom resources with qmgr 'create resource'",
}
#: PBS's own hooks that do what a pbsplug plugin does, by the plugin's pbs_name.
PBS_OWN_HOOKS = ("PBS_power", "PBS_cray_atom")


class PbsError(RuntimeError):
    """qmgr refused a command, or PBS could not be asked: one line with PBS's text."""


@dataclass
class HookPlan:
    """One plugin as a PBS hook."""

    plugin: str
    hook: str
    attributes: dict[str, str]          # qmgr attribute -> value, as `set hook` takes it
    config: dict[str, Any]              # the hook's JSON config file
    script: str
    notes: list[str] = field(default_factory=list)
    left_out: list[tuple[str, str]] = field(default_factory=list)  # (plugin hook, why)

    @property
    def config_text(self) -> str:
        return json.dumps(self.config, indent=2, sort_keys=True, default=str) + "\n"


@dataclass
class Plan:
    hooks: list[HookPlan]
    skipped: list[tuple[str, str]]      # (plugin, why nothing is installed for it)
    #: What the hooks and the worker, run as root, run, import and read (`rootpaths`)
    root_paths: list[RootPath] = field(default_factory=list)


def site_dirs(extra: Sequence[str | os.PathLike[str]] = ()) -> list[str]:
    """Where the hook imports pbsplug from: this environment's site-packages (where pbsplug
    and the plugins are installed, .pth files included) and `extra` folders."""
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    dirs += [str(Path(d).resolve()) for d in extra]
    return list(dict.fromkeys(dirs))


def plan(plugins: PluginSet, dirs: Sequence[str]) -> Plan:
    """What the site wants in PBS: one hook per enabled plugin with events PBS runs."""
    script = SCRIPT.read_text()
    hooks, skipped = [], []
    for record in sorted(plugins.enabled, key=lambda r: r.name):
        raw, _ = plugins.site.plugin_config_values(record.name)
        hp = _hook_plan(record, raw, dirs, script)
        if hp is None:
            why = ("PBS runs several schedulers over partitions natively (qmgr 'create "
                   "sched', 'set queue/node partition')"
                   if record.name == "multisched" or any(h.startswith("sched_")
                                                         for h in record.hooks)
                   else "it implements no PBS hook event")
            skipped.append((record.name, why))
            continue
        hooks.append(hp)
    # pbs_hook puts wire_dir (`_hook_plan`) first on sys.path; the worker runs sys.executable
    wire = RootPath("wire_dir", str(SCRIPT.parent), 1)
    return Plan(hooks, skipped, root_paths(plugins, sys.executable, dirs, [wire]))


def _hook_plan(record: PluginRecord, raw_config: dict[str, Any], dirs: Sequence[str],
               script: str) -> HookPlan | None:
    """`raw_config` is the site's own values (inline and .CF): checked again, with the
    defaults, where the hook runs."""
    attrs = record.attributes
    if attrs is None:  # (the loader sets them before it enables a plugin)
        raise PbsError(f"plugin {record.name}: no hook attributes (it is not loaded): "
                       "install takes the site's enabled plugins")
    events = [e for e in attrs.events if e in EVENTS and e in record.hooks]
    left_out = [(h, next(why for prefix, why in NOT_IN_PBS.items() if h.startswith(prefix)))
                for h in record.hooks if any(h.startswith(p) for p in NOT_IN_PBS)]
    if not events:
        return None
    name = f"{PREFIX}{record.name}"
    notes = []
    low, high = SITE_ORDER
    order = min(max(attrs.order, low), high)
    if order != attrs.order:
        notes.append(f"order {attrs.order} is outside PBS's range for a site hook "
                     f"[{low}, {high}]: installed with order {order}")
    fail_action = [a for a in attrs.fail_action
                   if FAIL_ACTION_EVENTS.get(a, set()) & set(events)]
    qattrs = {"event": ",".join(events), "order": str(order), "alarm": str(attrs.alarm),
              "fail_action": ",".join(fail_action) or "none", "user": attrs.user,
              "debug": "true" if attrs.debug else "false", "enabled": "true"}
    if {"periodic", "exechost_periodic"} & set(events):
        qattrs["freq"] = str(attrs.freq)
    info = record.info
    if info is not None and info.pbs_name in PBS_OWN_HOOKS:
        notes.append(f"PBS ships its own hook for this feature, {info.pbs_name}: keep it "
                     f"disabled ('qmgr -c \"set pbshook {info.pbs_name} enabled = false\"'; "
                     "install --disable-pbs-hooks does it)")
    ep = record.entry_point
    config = {
        "installed_by": INSTALLED_BY, "hook_name": name, "plugin": record.name,
        "entry_point": ep.value if ep is not None else f"pbsplug_{record.name}",
        "distribution": record.dist, "version": record.version, "site_dirs": list(dirs),
        "attributes": {**{k: (list(v) if isinstance(v, tuple) else v)
                          for k, v in attrs.to_dict().items() if k != "isolation"},
                       "enabled": True},
        "config": raw_config,
        # Execution-host events go to the host's worker (`worker`), started with this
        # environment's interpreter; the hook script reads pbs_wire from wire_dir.
        "worker": True, "python": sys.executable, "wire_dir": str(SCRIPT.parent),
        "objects": {e: v for e, v in hook_objects().items() if e in events},
    }
    return HookPlan(record.name, name, qattrs, json.loads(json.dumps(config, default=str)),
                    script, notes, left_out)


# -- PBS's side ------------------------------------------------------------------------------

class Qmgr:
    """PBS's qmgr, run as a process (`command` may be a wrapper: ``pbs-ns qmgr``)."""

    def __init__(self, command: Sequence[str] = ("qmgr",)):
        self.command = list(command)

    #: How long a name stays taken after its hook was deleted (PBS removes the MoMs' copies
    #: first: ``hook name 'X' is pending delete, try another name``).
    PENDING_DELETE_WAIT = 30.0

    def run(self, directive: str, check: bool = True) -> str:
        deadline = time.monotonic() + self.PENDING_DELETE_WAIT
        while True:
            done = self._run(directive)
            if done.returncode == 0 or "pending delete" not in done.stderr + done.stdout or (
                    time.monotonic() > deadline):
                break
            time.sleep(0.5)
        if check and done.returncode != 0:
            text = " ".join((done.stderr or done.stdout).split()) or f"exit {done.returncode}"
            raise PbsError(f"qmgr -c {directive!r}: {text}")
        return done.stdout

    def _run(self, directive: str) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([*self.command, "-c", directive], capture_output=True,
                                  text=True, timeout=60)
        except FileNotFoundError:
            raise PbsError(f"{self.command[0]}: not found; is PBS installed and on PATH "
                           "(or give --qmgr)?") from None
        except subprocess.TimeoutExpired:
            raise PbsError(f"qmgr -c {directive!r}: no answer in 60 s") from None

    def hooks(self) -> dict[str, dict[str, str]]:
        """Every site hook PBS has, with its attributes (``list hook``)."""
        return _parse_list(self.run("list hook", check=False), "Hook")

    def pbshook(self, name: str) -> dict[str, str] | None:
        return _parse_list(self.run(f"list pbshook {name}", check=False), "Hook").get(name)

    def export(self, hook: str, content_type: str) -> str | None:
        out = self._run(f"export hook {hook} {content_type} default")
        return out.stdout if out.returncode == 0 else None


def _parse_list(text: str, heading: str) -> dict[str, dict[str, str]]:
    objects: dict[str, dict[str, str]] = {}
    current: dict[str, str] | None = None
    key = None
    for line in text.splitlines():
        if line.startswith(f"{heading} "):
            current = objects.setdefault(line.split(None, 1)[1].strip(), {})
            key = None
        elif current is not None and line.startswith("\t") and key is not None:
            current[key] += line.strip()  # qmgr wraps a long list onto tab-indented lines
        elif current is not None and " = " in line:
            key, value = line.strip().split(" = ", 1)
            key = key.strip()
            current[key] = value.strip()
    return objects


@dataclass
class Step:
    """One thing install or uninstall does: a qmgr directive, with a file it imports."""

    directive: str
    file_text: str | None = None        # written to a file whose path ends the directive
    suffix: str = ""

    def shown(self, path: str = "FILE") -> str:
        directive = f"{self.directive} {path}" if self.file_text is not None else self.directive
        return f"qmgr -c {shlex.quote(directive)}"


def changes(hp: HookPlan, have: dict[str, str] | None, qmgr: Qmgr | None) -> list[Step]:
    """The qmgr steps that bring PBS's hook `hp.hook` (now `have`) to `hp`."""
    steps = []
    if have is None:
        steps.append(Step(f"create hook {hp.hook}"))
        have = {}
    # event before freq and fail_action: PBS checks those against the events.
    for key in ("event", "user", "fail_action", "order", "alarm", "freq", "debug", "enabled"):
        if key not in hp.attributes:
            continue
        want = hp.attributes[key]
        if _normal(key, have.get(key)) != _normal(key, want):
            steps.append(Step(f"set hook {hp.hook} {key} = {_quoted(want)}"))
    script = qmgr.export(hp.hook, "application/x-python") if qmgr and have else None
    if script is None or script.strip() != hp.script.strip():
        steps.append(Step(f"import hook {hp.hook} application/x-python default",
                          hp.script, ".py"))
    config = qmgr.export(hp.hook, "application/x-config") if qmgr and have else None
    if config is None or _json(config) != _json(hp.config_text):
        steps.append(Step(f"import hook {hp.hook} application/x-config default",
                          hp.config_text, ".json"))
    return steps


def _normal(key: str, value: str | None) -> str:
    if value is None:
        return {"fail_action": "none", "debug": "false", "user": "pbsadmin",
                "order": "1", "alarm": "30", "enabled": "true", "event": ""}.get(key, "")
    value = value.strip().strip('"').strip("'")
    if key in ("event", "fail_action"):
        return ",".join(sorted(v.strip() for v in value.split(",") if v.strip())) or (
            "none" if key == "fail_action" else "")
    return value.lower()


def _quoted(value: str) -> str:
    return f'"{value}"' if "," in value or " " in value else value


def _json(text: str) -> Any:
    """A hook's config as qmgr exports it, or None when it is no JSON that pbsplug wrote
    (`pbsplug.jsontext`: json.loads took a key twice, the last one, NaN and nesting 600
    deep, and counted such a config as pbsplug's; nested 100,000 deep it raised)."""
    try:
        return loads(text, "the hook's config")
    except JsonError:
        return None


def apply(steps: Sequence[Step], qmgr: Qmgr) -> None:
    """Carry the steps out; a file a step imports is written to a private temporary folder
    (0700: a hook's configuration is the site's), which root's qmgr reads."""
    with tempfile.TemporaryDirectory(prefix="pbsplug-pbs-") as tmp:
        for i, step in enumerate(steps):
            directive = step.directive
            if step.file_text is not None:
                path = Path(tmp) / f"hook{i}{step.suffix}"
                path.write_text(step.file_text)
                directive = f"{directive} {path}"
            qmgr.run(directive)


def installed(qmgr: Qmgr) -> dict[str, dict[str, Any]]:
    """The hooks pbsplug installed in PBS: name -> their config (which says so)."""
    out = {}
    for name in qmgr.hooks():
        if not name.startswith(PREFIX):
            continue
        config = _json(qmgr.export(name, "application/x-config") or "")
        if isinstance(config, dict) and config.get("installed_by") == INSTALLED_BY:
            out[name] = config
    return out


def install_steps(p: Plan, qmgr: Qmgr | None, disable_pbs_hooks: bool = False
                  ) -> list[tuple[HookPlan | None, list[Step]]]:
    """Every step of an install, grouped by hook (a None group: PBS's own hooks)."""
    have = qmgr.hooks() if qmgr is not None else {}
    out: list[tuple[HookPlan | None, list[Step]]] = []
    for hp in p.hooks:
        out.append((hp, changes(hp, have.get(hp.hook), qmgr)))
    if disable_pbs_hooks:
        own = []
        for hp in p.hooks:
            for name in PBS_OWN_HOOKS:
                if any(name in note for note in hp.notes):
                    pbs_hook = qmgr.pbshook(name) if qmgr is not None else {}
                    if pbs_hook is not None and _normal("enabled", pbs_hook.get(
                            "enabled")) != "false":
                        own.append(Step(f"set pbshook {name} enabled = false"))
        if own:
            out.append((None, own))
    return out


def uninstall_steps(qmgr: Qmgr) -> list[Step]:
    return [Step(f"delete hook {name}") for name in sorted(installed(qmgr))]


def status(p: Plan, qmgr: Qmgr) -> list[dict[str, Any]]:
    """Each enabled plugin's hook against what PBS has, and pbsplug hooks PBS has that the
    site no longer enables."""
    have = qmgr.hooks()
    ours = installed(qmgr)
    found = unsafe(p.root_paths)
    rows: list[dict[str, Any]] = []
    for hp in p.hooks:
        pending = changes(hp, have.get(hp.hook), qmgr)
        state = ("missing" if hp.hook not in have else "differs" if pending else "installed")
        rows.append({"plugin": hp.plugin, "hook": hp.hook, "state": state,
                     "events": hp.attributes["event"],
                     "differences": [s.shown() for s in pending if "create" not in
                                     s.directive],
                     "left_out": [f"{h}: {why}" for h, why in hp.left_out],
                     "notes": hp.notes, "unsafe": status_lines(found, hp.plugin)})
    for plugin, why in p.skipped:
        rows.append({"plugin": plugin, "hook": None, "state": "not needed", "events": "",
                     "differences": [], "left_out": [], "notes": [why], "unsafe": []})
    wanted = {hp.hook for hp in p.hooks}
    for name in sorted(set(ours) - wanted):
        rows.append({"plugin": ours[name].get("plugin"), "hook": name, "state": "stale",
                     "events": have.get(name, {}).get("event", ""), "differences": [],
                     "left_out": [], "notes": ["installed, but the site no longer enables "
                                               "this plugin: 'pbsplug pbs install' removes "
                                               "it"], "unsafe": []})
    return rows


def stale_steps(p: Plan, qmgr: Qmgr) -> list[Step]:
    """Hooks pbsplug installed for plugins the site no longer enables."""
    wanted = {hp.hook for hp in p.hooks}
    return [Step(f"delete hook {name}") for name in sorted(set(installed(qmgr)) - wanted)]


__all__ = ["HookPlan", "PbsError", "Plan", "Qmgr", "Step", "apply", "install_steps",
           "installed", "plan", "site_dirs", "stale_steps", "status", "uninstall_steps"]
