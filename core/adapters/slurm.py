"""``pbsplug slurm install|uninstall|status``: the site's plugins as Slurm's programs.

Slurm has no Python extension point. What it has are programs named in slurm.conf, each run
at one moment of a job's or a node's life (shared/reference/adapters.md §B.1): pbsplug puts
one program per script into a folder (`Plan.programs`), each the same few lines that hand
the event to pbsplug (`slurm_program`), and a config file beside them carrying what they need:
the environment to import pbsplug from, and each enabled plugin's entry point, hook
attributes and configuration (the execution hosts need no site config, only this folder, as
they need slurm.conf). The slurm.conf lines naming the programs are printed, or merged into
slurm.conf with ``--apply`` (the lines pbsplug replaces are kept, commented, and uninstall
puts them back). The site's own program a replaced line named (its Prolog, Epilog, NHC) is
not switched off: pbsplug's program runs it first (`CHAINED`, `read_site_programs`), but
for the power programs, which the power plugin takes over.

Only the scripts some enabled plugin needs are installed. `NOT_IN_SLURM` says, for every PBS
event without a Slurm script, why; `status` lists them per plugin.
"""

from __future__ import annotations

import copy
import errno
import fnmatch
import hashlib
import json
import os
import pwd
import py_compile
import re
import shutil
import socket
import stat
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .. import safedirs
from ..hookattrs import HookAttributes
from ..plugins import PluginRecord, PluginSet
from ..siteconfig import default_home
from . import slurm_program, worker_client
from .rootpaths import RootPath, root_paths, status_lines, unsafe
from .slurm_read import passwd_entry

#: The mark in the config that pbsplug made it.
INSTALLED_BY = "pbsplug slurm install"
CONFIG_NAME = "pbsplug-slurm.json"
TASK_CONFIG_NAME = "pbsplug-slurm-task.json"
#: The programs' one module, copied beside them.
PROGRAM_MODULE = "slurm_program.py"
#: The worker's client, shared with the PBS hook, copied beside slurm_program (it imports it).
CLIENT_MODULE = "worker_client.py"
PROGRAM_MARK = "written by 'pbsplug slurm install'"
BEGIN = "# BEGIN pbsplug slurm install: lines below are pbsplug's (pbsplug slurm uninstall)"
END = "# END pbsplug slurm install"
#: The native launcher's source (shipped in the package) and what a compiled one is named
#: after its script's program: ``prolog`` -> ``prolog-native``.
LAUNCHER_SOURCE = Path(__file__).with_name("slurm_launcher.c")
NATIVE_SUFFIX = "-native"
#: Scripts the launcher serves (the protocol of `slurm_program.main`); TaskProlog runs as the
#: job's user and keeps its Python program.
NATIVE_SCRIPTS = ("prolog_slurmctld", "prolog", "epilog", "epilog_slurmctld", "health_check",
                  "suspend", "resume", "resume_fail")
#: Characters a path built into the launcher may have (it becomes a C string literal).
_C_SAFE = re.compile(r"^/[A-Za-z0-9/._+:@-]*\Z")
#: What a path slurm.conf names may not hold: Slurm's parser ends a value at a blank and a
#: line at '#', and reads '"' as a quote.
_CONF_UNSAFE = re.compile(r'[\s#"\x00-\x1f\x7f]')
#: How a slurm.conf line that pbsplug replaced is kept.
REPLACED = "#pbsplug-replaced# "

#: Slurm script -> (slurm.conf key, program file, events it fires).
SCRIPTS = {
    "prolog_slurmctld": ("PrologSlurmctld", "prolog_slurmctld", ("runjob",)),
    "prolog": ("Prolog", "prolog", ("execjob_begin", "execjob_prologue", "execjob_launch")),
    "task_prolog": ("TaskProlog", "task_prolog", ("execjob_launch",)),
    "epilog": ("Epilog", "epilog", ("execjob_epilogue", "execjob_end")),
    "epilog_slurmctld": ("EpilogSlurmctld", "epilog_slurmctld", ("jobobit",)),
    "health_check": ("HealthCheckProgram", "health_check",
                     ("exechost_startup", "exechost_periodic")),
    "suspend": ("SuspendProgram", "suspend", ("periodic",)),
    "resume": ("ResumeProgram", "resume", ("periodic",)),
    "resume_fail": ("ResumeFailProgram", "resume_fail", ("periodic",)),
}
#: The scripts whose site program, named by the slurm.conf line install replaces, pbsplug's
#: program runs first (`slurm_program.run_site`); the power programs' lines are replaced
#: alone: the power plugin takes power over.
CHAINED = ("prolog_slurmctld", "prolog", "task_prolog", "epilog", "epilog_slurmctld",
           "health_check")
#: Slurm's power-saving settings when a plugin's periodic hook runs (why each: `SET_WHY`).
POWER_LINES = {"SuspendTime": "8640000", "SuspendRate": "0", "ResumeRate": "0"}
_NO_RATE = "no rate limit of Slurm's: the power plugin's max_concurrent_nodes is the limit"
#: Why pbsplug sets each slurm.conf key that names no program of its (`plan`), for install's
#: line about the site's line it replaces (`replaced_why`).
SET_WHY = {
    "HealthCheckInterval": "HealthCheckProgram runs exechost_periodic every "
                           "HealthCheckInterval: the smallest freq of the plugins' "
                           "exechost_periodic and exechost_startup hooks",
    "HealthCheckNodeState": "exechost_periodic runs on every node, busy or idle, as in PBS",
    "SuspendTime": "Slurm's own idle timer kept out of the way (100 days): the power "
                   "plugin's decision powers nodes off",
    "SuspendRate": _NO_RATE,
    "ResumeRate": _NO_RATE,
}
#: Scripts slurmctld runs as SlurmUser (shared/reference/adapters.md §B.1): with a SlurmUser
#: that is not root they run pbsplug as that user, in folders install makes theirs.
SLURM_USER_SCRIPTS = ("PrologSlurmctld", "EpilogSlurmctld", "SuspendProgram", "ResumeProgram",
                      "ResumeFailProgram")
#: Under --state-dir (root's): the power programs' records and lock (SlurmUser's), and
#: SlurmUser's own pbsplug home (PBSPLUG_HOME of its programs) with its log file.
POWER_SUBDIR = "power"
SLURM_USER_SUBDIR = "slurmuser"
#: Records an earlier install kept directly in --state-dir; install moves them into
#: `POWER_SUBDIR` (slurm_power's OFF_RECORD and WOKEN_RECORD).
OLD_POWER_RECORDS = ("power_off.json", "power_woken.json")
#: A user name as slurm.conf may give SlurmUser (or a uid).
_USER_NAME = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]{0,63}")
#: Where each event runs inside Slurm, as `status` shows it.
WHERE = {
    "runjob": "PrologSlurmctld, on the controller as SlurmUser; a reject requeues a batch job "
              "(Slurm cancels an srun/salloc job), never drains",
    "execjob_begin": "Prolog, on each node as root",
    "execjob_prologue": "Prolog, on each node as root, after execjob_begin",
    "execjob_launch": "TaskProlog, before each task: Slurm runs it as the job's user, and it "
                      "asks the node's root worker, which runs the hook with the task as "
                      "event.pid and returns the environment as export lines",
    "execjob_epilogue": "Epilog, on each node as root; rejects are ignored, as in PBS",
    "execjob_end": "Epilog, on each node as root; rejects are ignored, as in PBS",
    "jobobit": "EpilogSlurmctld, on the controller as SlurmUser",
    "exechost_startup": "HealthCheckProgram, as root, its first run after slurmd starts",
    "exechost_periodic": "HealthCheckProgram, as root, every HealthCheckInterval",
    "periodic": "'pbsplug slurm periodic' on the controller (a timer runs it: Slurm has no "
                "periodic script); its power decisions reach Slurm as state=power_down, "
                "and SuspendProgram/ResumeProgram call the plugin's drivers",
}
_SUBMIT = ("Slurm's submit-time extension point is job_submit (Lua, run under slurmctld's "
           "locks); pbsplug offers no bridge into it")
#: Why each PBS event has no Slurm script (nothing pretends to run it).
NOT_IN_SLURM = {
    "queuejob": _SUBMIT, "postqueuejob": _SUBMIT, "modifyjob": _SUBMIT,
    "movejob": "Slurm runs no script when a job changes partition",
    "resvsub": "Slurm runs no script for reservations",
    "resv_confirm": "Slurm runs no script for reservations",
    "resv_begin": "Slurm runs no script for reservations",
    "resv_end": "Slurm runs no script for reservations",
    "modifyvnode": "Slurm runs no script when a node's state changes",
    "provision": "Slurm's node reboot for features (RebootProgram) is not mapped",
    "management": "Slurm runs no script for scontrol's administration",
    "execjob_attach": "Slurm runs no script when a process joins a running job",
    "execjob_preterm": "Slurm runs no script before scancel kills a job",
    "execjob_abort": "Slurm runs the Epilog for an aborted job too: execjob_end sees it",
    "execjob_postsuspend": "Slurm runs no script around scontrol suspend",
    "execjob_preresume": "Slurm runs no script around scontrol resume",
    "execjob_resize": "Slurm runs no script when a job shrinks",
    "sched_": "Slurm's scheduler is C with no Python extension point: a Slurm site keeps "
              "its own priority and selection plugins",
    "register_attributes": "Slurm's node features and GRES are set in slurm.conf",
}
#: Hooks that are pbsplug's own and need no place in Slurm.
PBSPLUG_OWN = ("configure", "register_commands", "demo_setup", "demo_report")


class SlurmInstallError(RuntimeError):
    """What install or uninstall could not do, in one line."""


@dataclass
class Plan:
    """What the site wants in Slurm."""

    directory: Path
    config: dict[str, Any]
    programs: dict[str, str]            # file name -> text
    conf_lines: dict[str, str]          # slurm.conf key -> value
    rows: list[dict[str, Any]] = field(default_factory=list)   # per plugin, for status
    notes: list[str] = field(default_factory=list)
    extra_files: dict[str, str] = field(default_factory=dict)  # the task worker's config
    #: native launcher file name -> its -D definitions (`compile_launcher`); empty: Python
    native: dict[str, dict[str, str]] = field(default_factory=dict)
    compiler: str = ""
    #: What the programs and the workers, run as root, run, import and read (`rootpaths`)
    root_paths: list[RootPath] = field(default_factory=list)
    #: What the site's slurm.conf and the files it includes set (`site_settings`)
    site_settings: list[ConfSetting] = field(default_factory=list)

    @property
    def config_text(self) -> str:
        return json.dumps(self.config, indent=2, sort_keys=True, default=str) + "\n"


def site_dirs(extra: Sequence[str | os.PathLike[str]] = ()) -> list[str]:
    dirs = [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    dirs += [str(Path(d).resolve()) for d in extra]
    return list(dict.fromkeys(dirs))


def _where(hook: str) -> tuple[str | None, str | None]:
    """(where it runs, why it cannot) for one plugin hook."""
    if hook in WHERE:
        return WHERE[hook], None
    for prefix, why in NOT_IN_SLURM.items():
        if hook == prefix or (prefix.endswith("_") and hook.startswith(prefix)):
            return None, why
    return None, None


def compiler() -> str:
    """The C compiler install builds the launcher with (``cc``, else ``gcc``), from the
    system's folders only (never the caller's PATH: install runs as root), root's and
    writable by no one else; "" if none."""
    for name in ("cc", "gcc"):
        for folder in ("/usr/bin", "/usr/local/bin"):
            found = Path(folder, name)
            try:
                st = found.stat()
            except OSError:
                continue
            if st.st_uid == 0 and not st.st_mode & 0o022 and os.access(found, os.X_OK):
                return str(found)
    return ""


def plan(plugins: PluginSet, directory: Path, *, dirs: Sequence[str], bin_dir: str,
         slurm_conf: str, state_dir: str, log_file: str, run_dir: str,
         native: bool = True, slurm_user: str | Callable[[], str] = "root",
         site_conf: Path | SlurmConf | None = None) -> Plan:
    """What to install. `slurm_user`: SlurmUser's name, or what reads it (asked only when
    a script that runs as SlurmUser is needed); `site_conf`: the slurm.conf whose lines
    install replaces, whose programs pbsplug's run first (`read_site_programs`), read with
    the files it includes (`site_settings`; a path is read once for the plan)."""
    if _CONF_UNSAFE.search(str(directory)):
        raise SlurmInstallError(
            f"--dir {str(directory)!r}: slurm.conf names the programs by their path, which "
            "may hold no blank, '#', '\"' or control character (Slurm would not read that "
            "slurm.conf, or would read another path): choose another folder")
    specs: dict[str, Any] = {}
    rows = []
    events: set[str] = set()
    deadline = 0.0
    for record in sorted(plugins.enabled, key=lambda r: r.name):
        raw, _ = plugins.site.plugin_config_values(record.name)
        row = _row(record)
        rows.append(row)
        if not row["runs"]:
            continue
        events.update(e for e in row["runs"])
        attrs = _attributes(record)
        ep = record.entry_point
        specs[record.name] = {
            "entry_point": ep.value if ep is not None else f"pbsplug_{record.name}",
            "distribution": record.dist, "version": record.version,
            "attributes": {k: (list(v) if isinstance(v, tuple) else v)
                           for k, v in attrs.to_dict().items()},
            "config": raw}
        deadline += float(attrs.alarm) * 3 + 2  # at most three events of a script each
    directory = Path(directory)
    config_file = str(directory / CONFIG_NAME)
    cc = compiler() if native else ""
    needed = {script for script, (_, _, fired) in SCRIPTS.items() if events & set(fired)}
    if site_conf is not None:
        site_conf = _view(site_conf)
    settings = site_settings(site_conf)
    chain, notes = read_site_programs(settings, directory, needed)
    config: dict[str, Any] = {  # (a JSON document: `Plan.config`)
        "installed_by": INSTALLED_BY, "plugins": specs, "site_dirs": list(dirs),
        "python": sys.executable, "config_file": config_file,
        "bin_dir": bin_dir, "slurm_conf": slurm_conf, "state_dir": state_dir,
        "log_file": log_file, "run_dir": run_dir, "worker": True,
        "loader": "pbsplug.adapters.slurm_bridge:load",
        "dispatcher": "pbsplug.adapters.slurm_bridge:dispatch",
        "deadline": deadline + 30,  # and the scontrol calls
        "encoding": "marshal",
        "slurmstepd": slurmstepd(bin_dir),
        # in the digest: a worker that answers the native launcher is a new one
        "launcher": "native" if cc else "python",
        # PBSPLUG_HOME of the programs run as root: the installer's (a plugin's default
        # state folder is <home>/hooks/tmp), whatever slurmd's environment holds
        "home": os.path.abspath(default_home()),
    }
    if chain:  # the site's programs pbsplug's run first (slurm.conf's replaced lines)
        config["site_programs"] = chain
    user_scripts = {key for key, _, fired in SCRIPTS.values() if events & set(fired)
                    } & set(SLURM_USER_SCRIPTS)
    if "periodic" in events:
        config["power_dir"] = f"{state_dir.rstrip('/')}/{POWER_SUBDIR}"
    su: dict[str, str] | None = None  # (config's "slurm_user")
    if user_scripts:
        name = slurm_user if isinstance(slurm_user, str) else slurm_user()
        if name != "root" and user_entry(name).pw_uid != 0:  # (not another name of root's)
            # SlurmUser's programs: a pbsplug home and a log file of their own, in a folder
            # of theirs (root's home and log are root's alone, and root's programs refuse a
            # folder another user could change: cpuset's <home>/hooks/tmp on a controller
            # that is also a node)
            own = f"{state_dir.rstrip('/')}/{SLURM_USER_SUBDIR}"
            su = {"name": name, "home": own, "log_file": f"{own}/{Path(log_file).name}"}
            config["slurm_user"] = su
    # The programs import slurm_program from their own folder (a copy): TaskProlog runs as
    # the job's user, who may not reach this environment's folders.
    adapters_dir = str(directory)
    config_text = json.dumps(config, indent=2, sort_keys=True, default=str) + "\n"
    digest = hashlib.sha256(config_text.encode()).hexdigest()[:20]
    socket_path = f"{run_dir.rstrip('/')}/slurm-{digest}.sock"
    programs: dict[str, str] = {}
    conf: dict[str, str] = {}
    task: tuple[str, str] | None = None  # (the task worker's config and socket)
    extra: dict[str, str] = {}
    task_python = sys.executable
    native_defs: dict[str, dict[str, str]] = {}
    if native and not cc:
        notes.append("no C compiler (cc, gcc) found: Slurm runs the Python programs "
                     "(install one and run install again for the native launcher)")
    if su:
        pw = user_entry(su["name"])
        for path in [sys.executable, *dirs]:
            if not user_can_reach(path, pw):
                notes.append(f"SlurmUser {su['name']} cannot reach {path}: its programs "
                             f"({', '.join(sorted(user_scripts))}) will fail; install "
                             "pbsplug where every user can read it (e.g. /opt/pbsplug)")
                break
    if "execjob_launch" in events and not others_can_run(sys.executable):
        task_python = "/usr/bin/python3"
        notes.append(f"TaskProlog runs as the job's user, who cannot run {sys.executable}: "
                     f"it uses {task_python} (it needs only the standard library)")
    if "execjob_launch" in events:
        # TaskProlog runs as the job's user: its worker listens where users can reach it,
        # and checks who asks (slurm_bridge.task_prolog).
        task_config = {**config, "public": True, "encoding": "json",
                       "config_file": str(directory / TASK_CONFIG_NAME)}
        task_text = json.dumps(task_config, indent=2, sort_keys=True, default=str) + "\n"
        task_digest = hashlib.sha256(task_text.encode()).hexdigest()[:20]
        task = (str(directory / TASK_CONFIG_NAME),
                f"{run_dir.rstrip('/')}-task/slurm-task-{task_digest}.sock")
        extra[TASK_CONFIG_NAME] = task_text
    for script, (key, name, fired) in SCRIPTS.items():
        if not events & set(fired):
            continue
        if script == "task_prolog":
            assert task is not None  # (TaskProlog fires execjob_launch alone, which sets it)
            text = slurm_program.task_program_text(task_python, adapters_dir, task[1],
                                                   chain.get(script, ""))
        else:
            text = slurm_program.program_text(sys.executable, adapters_dir, script,
                                              config_file, socket_path,
                                              task if script == "prolog" else None,
                                              chain.get(script, ""))
        programs[name] = text
        conf[key] = str(directory / name)
        if cc and script in NATIVE_SCRIPTS:
            defs = native_defs_of(script, socket_path,
                                  task[1] if task and script == "prolog" else "",
                                  str(directory / name), chain.get(script, ""))
            if all(not v or _C_SAFE.match(v) for k, v in defs.items()
                   if k not in ("PBSPLUG_SCRIPT", "PBSPLUG_SITE")) and len(socket_path) < 100:
                native_defs[name + NATIVE_SUFFIX] = defs
                conf[key] = str(directory / (name + NATIVE_SUFFIX))
            elif not any("Python programs" in n for n in notes):
                notes.append(f"{directory} or {run_dir} has characters the native launcher "
                             "does not build in: Slurm runs the Python programs")
    if "SuspendProgram" in conf:
        conf.update(POWER_LINES)
    if "HealthCheckProgram" in conf:
        freqs = [int(s["attributes"].get("freq") or 120) for s in specs.values()
                 if {"exechost_periodic", "exechost_startup"} & set(
                     s["attributes"].get("events") or ())]
        conf["HealthCheckInterval"] = str(min(freqs) if freqs else 120)
        conf["HealthCheckNodeState"] = "ANY"
    if programs:
        programs[PROGRAM_MODULE] = (f"# {PROGRAM_MARK} from pbsplug.adapters.slurm_program:"
                                    " do not edit.\n"
                                    + Path(slurm_program.__file__).read_text())
        programs[CLIENT_MODULE] = (f"# {PROGRAM_MARK} from pbsplug.adapters.worker_client:"
                                   " do not edit.\n"
                                   + Path(worker_client.__file__).read_text())
    if not native_defs and cc:  # nothing native after all: planned again without it
        again = plan(plugins, directory, dirs=dirs, bin_dir=bin_dir, slurm_conf=slurm_conf,
                     state_dir=state_dir, log_file=log_file, run_dir=run_dir, native=False,
                     slurm_user=su["name"] if su else "root", site_conf=site_conf)
        again.notes = list(dict.fromkeys(notes + again.notes))
        return again
    problem = alone_problem(settings, conf)
    if problem:
        raise SlurmInstallError(problem)
    p = Plan(directory, config, programs, conf, rows, notes=notes, extra_files=extra,
             native=native_defs, compiler=cc,
             root_paths=root_paths(plugins, sys.executable, dirs,
                                   _slurm_commands(bin_dir) + _site_paths(chain)),
             site_settings=settings)
    if any(float(s["attributes"].get("alarm") or 30) >= 60 for s in specs.values()) and (
            "HealthCheckProgram" in conf):
        p.notes.append("slurmd kills a HealthCheckProgram after 60 s: a hook alarm of 60 s "
                       "or more is cut short there")
    if "health_check" in chain:
        p.notes.append(f"the site's HealthCheckProgram {chain['health_check']} runs first, "
                       "within slurmd's 60 s for the whole HealthCheckProgram: the time it "
                       "takes is time pbsplug's exechost events do not have")
    return p


def read_site_programs(settings: Sequence[ConfSetting], directory: Path,
                       scripts: Iterable[str]) -> tuple[dict[str, str], list[str]]:
    """The site's own program for each of `scripts` in `CHAINED` that slurm.conf names
    (`site_settings`: the files it includes read too): script -> path, or for the Prolog and
    Epilog a glob pattern as Slurm reads one, and notes; `SlurmInstallError` in one line for
    a value that is no absolute path. The last setting of a key wins, as in Slurm. A line
    that names pbsplug's own programs (in `directory`) is left out, with a note."""
    found: dict[str, ConfSetting] = {}
    for each in settings:
        found[each.key.lower()] = each
    chain, notes = {}, []
    ours = [os.path.join(str(directory), n) for n in _PROGRAM_NAMES]
    for script in [s for s in CHAINED if s in set(scripts)]:
        key = SCRIPTS[script][0]
        setting = found.get(key.lower())
        value = setting.value if setting else ""
        if not setting or not value:
            continue
        pattern = script in slurm_program.GLOB_SCRIPTS
        if not value.startswith("/") or "\x00" in value:
            raise SlurmInstallError(
                f"{setting.file}:{setting.line}: {key}={value[:200]!r}: pbsplug's {key} "
                "would run it first, as "
                "Slurm ran it: expected an absolute path"
                f"{' or a glob pattern of one' if pattern else ''}; correct the line (or "
                "remove it) and run install again")
        is_pattern = slurm_program.is_pattern(script, value)
        if any(fnmatch.fnmatchcase(o, value) if is_pattern else os.path.normpath(value) == o
               for o in ours):
            theirs = [m for m in slurm_program.site_programs(script, value)
                      if not _pbsplugs(m, directory)] if is_pattern else []
            if theirs:  # (left out, they would no longer run; run, so would pbsplug's)
                raise SlurmInstallError(
                    f"{setting.file}:{setting.line}: {key}={value[:200]}: the pattern matches "
                    f"pbsplug's programs in --dir {directory} and the site's {theirs[0]}, "
                    f"which pbsplug's {key} could not run without running its own again: "
                    "choose a --dir the pattern does not match and run install again")
            notes.append(f"{key}={value} names pbsplug's own program: not run twice")
            continue
        chain[script] = value
        if is_pattern and not slurm_program.site_programs(script, value):
            notes.append(f"the site's {key} pattern {value} matches nothing on this host: "
                         f"pbsplug's {key} runs what it matches where it runs, as Slurm did")
        elif not is_pattern and not os.path.lexists(value):
            notes.append(f"the site's {key} {value} is not on this host: pbsplug's {key} "
                         "runs it where it is, and fails where it is missing, as Slurm did")
    return chain, notes


def _pbsplugs(path: str, directory: Path) -> bool:
    """Whether `path` is a file install writes in its --dir (`directory`)."""
    names = {*_PROGRAM_NAMES, CONFIG_NAME, TASK_CONFIG_NAME, PROGRAM_MODULE, CLIENT_MODULE,
             "__pycache__"}
    return os.path.dirname(path) == str(directory) and os.path.basename(path) in names


#: The programs install may write in its --dir: each script's, Python and native.
_PROGRAM_NAMES = tuple(n + suffix for _, n, _ in SCRIPTS.values()
                       for suffix in ("", NATIVE_SUFFIX))


def _site_paths(chain: dict[str, str]) -> list[RootPath]:
    """The site's programs pbsplug's run (`read_site_programs`), and the folders they are
    in (a user who could add a file there could add a match to a pattern, or rename one),
    for `rootpaths.unsafe`."""
    out = []
    for script, value in chain.items():
        key = SCRIPTS[script][0]
        what = f"the site's {key} (pbsplug's {key} runs it)"
        why = ("every job's tasks would run code from it" if script == "task_prolog"
               else "Slurm's daemons would run code from it")
        matches = slurm_program.site_programs(script, value)
        folders = {os.path.dirname(m) for m in matches}
        if slurm_program.is_pattern(script, value):
            fixed = value.split("*")[0].split("?")[0].split("[")[0]
            folders.add(os.path.dirname(fixed) or "/")
        out += [RootPath(f"the folder of {what}", f, 0, why=why) for f in sorted(folders)]
        out += [RootPath(what, m, 0, why=why) for m in matches]
    return out


#: The Slurm commands root's programs run from --bin-dir (`slurm_read.Slurm`).
SLURM_COMMANDS = ("scontrol", "scancel", "squeue", "sinfo")


def _slurm_commands(bin_dir: str) -> list[RootPath]:
    """--bin-dir and the Slurm commands in it, which root's programs run."""
    bin_dir = bin_dir or "/usr/bin"  # (as `slurm_read.Slurm` takes it)
    out = [RootPath("the folder of Slurm's commands (--bin-dir)", bin_dir)]
    return out + [RootPath(f"Slurm's {name}", str(Path(bin_dir, name)))
                  for name in SLURM_COMMANDS if os.path.lexists(Path(bin_dir, name))]


def _attributes(record: PluginRecord) -> HookAttributes:
    """An enabled plugin's hook attributes (the loader sets them before it enables one)."""
    if record.attributes is None:
        raise SlurmInstallError(f"plugin {record.name}: no hook attributes (it is not "
                                "loaded): install takes the site's enabled plugins")
    return record.attributes


def _row(record: PluginRecord) -> dict[str, Any]:
    runs, cannot, own = {}, {}, []
    events = _attributes(record).events
    for hook in record.hooks:
        if hook in PBSPLUG_OWN:
            own.append(hook)
            continue
        if hook in events or hook not in WHERE:
            where, why = _where(hook)
            if where is not None and hook in events:
                runs[hook] = where
            elif why is not None:
                cannot[hook] = why
    return {"plugin": record.name, "runs": runs, "cannot": cannot}


# -- the files ------------------------------------------------------------------------------

def write_programs(p: Plan) -> list[Path]:
    """The programs and the config, written whole (config 0600: it holds the site's plugin
    configuration; programs 0755). Programs of scripts no longer needed are removed."""
    _check_private(p.directory)
    written = []
    su = p.config.get("slurm_user")
    # SlurmUser's programs read the config too: root's, readable by SlurmUser's group
    # (0640), else root's alone (0600)
    if su:
        _write(p.directory / CONFIG_NAME, p.config_text, 0o640,
               gid=config_group(user_entry(su["name"])))
    else:
        _write(p.directory / CONFIG_NAME, p.config_text, 0o600)
    written.append(p.directory / CONFIG_NAME)
    for name, text in p.extra_files.items():
        _write(p.directory / name, text, 0o600)
        written.append(p.directory / name)
    if TASK_CONFIG_NAME not in p.extra_files and (p.directory / TASK_CONFIG_NAME).exists():
        (p.directory / TASK_CONFIG_NAME).unlink()
    for name, text in p.programs.items():
        _write(p.directory / name, text, 0o755)
        written.append(p.directory / name)
    for name in (PROGRAM_MODULE, CLIENT_MODULE):
        if name in p.programs:
            # Compiled now, beside them: a program never compiles its modules (2 to 3 ms on
            # each run where the folder is read-only to it, a shared file system).
            py_compile.compile(str(p.directory / name), doraise=True)
    for name in [n for _, n, _ in SCRIPTS.values()] + [PROGRAM_MODULE, CLIENT_MODULE]:
        if name not in p.programs and _ours(p.directory / name):
            (p.directory / name).unlink()
    for name, defs in p.native.items():
        compile_launcher(p.compiler, defs, p.directory / name)
        written.append(p.directory / name)
    for _, name, _ in SCRIPTS.values():
        path = p.directory / (name + NATIVE_SUFFIX)
        if path.name not in p.native and _ours_native(path):
            path.unlink()
    return written


def native_defs_of(script: str, socket_path: str, task_socket: str, python: str,
                   site: str = "") -> dict[str, str]:
    """The -D definitions of one script's native launcher (`compile_launcher`); `site`,
    the site's program it runs first, built in as octal escapes (any byte is safe so)."""
    return {"PBSPLUG_SCRIPT": script, "PBSPLUG_SOCKET": socket_path,
            "PBSPLUG_TASK_SOCKET": task_socket, "PBSPLUG_PYTHON": python,
            "PBSPLUG_SITE": "".join(f"\\{b:03o}" for b in
                                    site.encode("utf-8", "surrogateescape"))}


def compile_launcher(cc: str, defs: dict[str, str], target: Path) -> None:
    """`LAUNCHER_SOURCE` built into `target` (0755) with `defs` as C string definitions;
    written whole, or `SlurmInstallError` with the compiler's first lines."""
    # Built in a private folder of its own, under umask 077, then opened up and moved into
    # place: nobody else ever holds the binary open for writing.
    build = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    part = build / target.name
    argv = [cc, "-O2", "-std=c99", "-Wall", "-fstack-protector-strong", "-D_FORTIFY_SOURCE=2",
            "-o", str(part)]
    argv += [f'-D{k}="{v}"' for k, v in defs.items()]
    argv.append(str(LAUNCHER_SOURCE))
    try:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120, umask=0o077,
                                  env={"PATH": "/usr/bin:/bin:/usr/local/bin", "LC_ALL": "C"})
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SlurmInstallError(f"{cc}: cannot build the native launcher: {exc} (or run "
                                    "install with --no-native)") from None
        if done.returncode != 0:
            first = " | ".join((done.stderr or done.stdout).strip().splitlines()[:3])
            raise SlurmInstallError(f"{cc}: cannot build the native launcher: {first} (or "
                                    "run install with --no-native)")
        os.chmod(part, 0o755)
        os.replace(part, target)
    finally:
        shutil.rmtree(build, ignore_errors=True)


def _ours_native(path: Path) -> bool:
    """A launcher pbsplug built (its mark is in the binary)."""
    try:
        if path.stat().st_size > 4 << 20:
            return False
        return PROGRAM_MARK.encode() in path.read_bytes()
    except OSError:
        return False


def launcher(directory: Path) -> str:
    """Which program Slurm runs for the installed scripts, in one line."""
    have = installed_config(directory) or {}
    found = sorted(n for _, n, _ in SCRIPTS.values()
                   if _ours_native(Path(directory) / (n + NATIVE_SUFFIX)))
    if have.get("launcher") == "native" and found:
        return f"native launcher ({', '.join(n + NATIVE_SUFFIX for n in found)}); " \
               "Python programs when it falls back"
    return "Python programs"


def _check_private(directory: Path) -> None:
    """Install's folder, made when missing, must follow `pbsplug.safedirs`' rule (it, every
    folder above it and every link on the way root's, or the installer's, and writable by
    no one else, or sticky above it as /tmp is): slurmd runs what is in it as root, and a
    user who could rename a folder on the way could put programs of their own there."""
    try:
        safedirs.ensure_folder(directory, "the programs' folder (--dir)")
    except safedirs.UnsafeFolder as exc:
        raise SlurmInstallError(f"{exc} (slurmd runs its programs as root)") from None


def _write(path: Path, text: str, mode: int, gid: int = -1, uid: int = -1) -> None:
    """`text` into `path` whole: a fresh file (`O_EXCL`, never through a link) given its
    owner, group and mode through its own descriptor, then renamed over `path`. An owner or
    group of -1 is the writer's: pbsplug's own files are root's whatever they were before
    (slurmd runs the programs as root), slurm.conf keeps the site's (`_rewrite_conf`)."""
    part = path.with_name(f".{path.name}.{os.getpid()}")
    part.unlink(missing_ok=True)  # never through a name someone left there
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        # (slurm.conf: the bytes `read_conf` read, line breaks and all)
        with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape", newline="") as fh:
            if (uid, gid) != (-1, -1):
                try:
                    os.fchown(fh.fileno(), uid, gid)
                except OSError as exc:
                    raise SlurmInstallError(
                        f"{path}: cannot give the new file owner {uid} and group {gid} "
                        f"({exc.strerror}): left as it was") from None
            os.fchmod(fh.fileno(), mode)  # after the owner: chown may clear mode bits
            fh.write(text)
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise


def _refuse_link(path: Path) -> None:
    """`SlurmInstallError` for a slurm.conf that is a link, which pbsplug does not replace
    by a file: a site whose slurm.conf names a shared file would get a copy on this host
    alone, which no later change to the shared file reaches."""
    if path.is_symlink():
        raise SlurmInstallError(
            f"{path} is a symbolic link to {os.readlink(path)}: pbsplug would replace the link "
            f"with a file of this host's; name the file itself with --slurm-conf "
            f"{os.path.realpath(path)} (every host that reads it sees the change): left as it was")


def _rewrite_conf(path: Path, text: str) -> None:
    """slurm.conf rewritten as `text` with its mode, owner and group kept: at many sites it
    is slurm:slurm, and written by root as any file it would become root:root. A link is
    refused, not replaced by a file (`_refuse_link`)."""
    _refuse_link(path)
    st = path.stat()
    _write(path, text, st.st_mode & 0o777, gid=st.st_gid, uid=st.st_uid)


def slurmstepd(bin_dir: str) -> str:
    """slurmstepd's real path (Debian's is slurmstepd-wlm behind a link): a TaskProlog
    request is answered only when the asker's parent runs it; "" when not found here."""
    for folder in (Path(bin_dir).parent / "sbin", Path("/usr/sbin"), Path("/usr/local/sbin")):
        if (folder / "slurmstepd").exists():
            return os.path.realpath(folder / "slurmstepd")
    return ""


def others_can_run(path: str) -> bool:
    """Whether a user other than root can run `path` (every folder to it searchable)."""
    real = Path(os.path.realpath(path))
    try:
        if not real.stat().st_mode & 0o001:
            return False
        return all(parent.stat().st_mode & 0o001 for parent in real.parents)
    except OSError:
        return False


def user_entry(name: str) -> pwd.struct_passwd:
    """The user `name` (or a uid), or `SlurmInstallError` in one line."""
    pw = passwd_entry(name)
    if pw is None:
        raise SlurmInstallError(f"SlurmUser={name}: no such user on this host (slurmctld "
                                "runs its programs as that user): create it, or correct "
                                "SlurmUser in slurm.conf")
    return pw


def config_group(pw: pwd.struct_passwd) -> int:
    """SlurmUser's primary group, which may read the config (0640), or `SlurmInstallError`
    in one line when other users (but root) are in it too: they would read the site's
    plugin configuration, root's alone otherwise."""
    import grp

    others = {u.pw_name for u in pwd.getpwall()
              if u.pw_gid == pw.pw_gid and u.pw_uid not in (0, pw.pw_uid)}
    try:
        group = grp.getgrgid(pw.pw_gid)
    except KeyError:
        name = str(pw.pw_gid)
    else:
        name = group.gr_name
        others |= set(group.gr_mem) - {pw.pw_name, "root"}
    if others:
        shown = ", ".join(sorted(others)[:5]) + (", ..." if len(others) > 5 else "")
        raise SlurmInstallError(
            f"SlurmUser {pw.pw_name}'s primary group {name} (gid {pw.pw_gid}) is also "
            f"{shown}'s: the config, which SlurmUser's programs read through that group, "
            "would be theirs to read; give SlurmUser a group of its own (Debian's slurm "
            "user has one)")
    return pw.pw_gid


def user_can_reach(path: str, pw: pwd.struct_passwd) -> bool:
    """Whether the user `pw` may enter every folder to `path` and read it, by the mode bits
    (owner, primary group, others): a note's guess, not a guarantee (ACLs, other groups)."""
    def allowed(info: os.stat_result, bits: int) -> bool:
        if pw.pw_uid == 0:
            return True
        shift = 6 if info.st_uid == pw.pw_uid else 3 if info.st_gid == pw.pw_gid else 0
        return info.st_mode >> shift & bits == bits
    real = Path(os.path.realpath(path))
    try:
        return allowed(real.stat(), 0o4) and all(allowed(parent.stat(), 0o1)
                                                  for parent in real.parents)
    except OSError:
        return False


def read_slurm_user(conf: Path | SlurmConf, command: str = "install") -> str:
    """SlurmUser, as Slurm 22.05 reads it: the last ``SlurmUser=`` line read, with the files
    slurm.conf's ``Include`` lines name read where those lines stand (`site_settings`; tried
    on 22.05: ``SlurmUser=root`` then an included ``SlurmUser=slurm`` runs slurmctld as
    slurm, the other way round as root); root, Slurm's default, when none sets it. Slurm
    reads one Key=value a line (but on NodeName, PartitionName... lines): a line such as
    ``ControlMachine=c SlurmUser=slurm`` is its 'Parse error', and slurmctld does not start.
    ``scontrol show config`` is not asked: it says what the running slurmctld read when it
    started, not what slurm.conf says now, and needs a running controller. `SlurmInstallError`
    in one line naming what was wrong: a slurm.conf or an included file that cannot be read,
    files that include each other, a SlurmUser on a line of several settings, a value that
    is no user name, a user this host does not have (`command`, which reads it, named)."""
    view = _view(conf)
    view.checked_text(f"{command} reads SlurmUser there")
    found, source = None, f"in {view.path}"
    for s in site_settings(view):
        if not s.alone and any(k.lower() == "slurmuser" for k in _pair_keys(s)):
            raise SlurmInstallError(_shares_line(s, "SlurmUser"))
        if s.key.lower() == "slurmuser":
            found = s.value
            source = f"in {s.file}:{s.line}" if s.included else f"in {view.path}"
    if found is None:
        return "root"
    if not _USER_NAME.fullmatch(found):
        raise SlurmInstallError(f"SlurmUser={found[:80]!r} {source}: expected a user name")
    if found != "root":
        try:
            if user_entry(found).pw_uid == 0:  # another name of root's (0, toor)
                return "root"
        except SlurmInstallError:
            raise SlurmInstallError(f"SlurmUser={found} {source}: no such user on this "
                                    "host (slurmctld runs its programs as that user): "
                                    "create it, or correct slurm.conf") from None
    return found


def controller_names(conf: Path | SlurmConf) -> list[str]:
    """The hosts slurm.conf names as controllers (SlurmctldHost, or the older
    ControlMachine), by their names (``name(address)``: the name), read as Slurm reads them
    (`site_settings`: included files too, an escaped ``\\#`` kept); [] if unread."""
    try:
        settings = site_settings(conf)
    except SlurmInstallError:
        return []
    return [s.value.strip().split("(", 1)[0] for s in settings
            if s.key.lower() in ("slurmctldhost", "controlmachine")]


def prepare_state(p: Plan, state_dir: str) -> list[str]:
    """The folders the installed programs write, made on this host (the controller, for the
    power programs): --state-dir root's (HealthCheckProgram, run as root, keeps its marks
    there); ``<state-dir>/power`` (the power programs' records and lock) and, with a
    SlurmUser that is not root, ``<state-dir>/slurmuser`` (its programs' pbsplug home and
    log file) and each ``state_dir`` configured for a plugin that runs in SlurmUser's
    scripts, made SlurmUser's (`safedirs.ensure_folder_owned_by`: every level above
    root's, the folder itself handed over through a descriptor). The records an earlier
    install kept directly in --state-dir are moved into ``power``. What was done, line by
    line; `SlurmInstallError` in one line.

    With a SlurmUser that is not root, the plugins whose hooks run as SlurmUser are
    recorded in the installer's pbsplug home (`pbsplug.hookhome`): root's commands (``pbsplug
    power status``) then read their records in SlurmUser's home; without one, that record
    is removed."""
    su = p.config.get("slurm_user")
    power = p.config.get("power_dir")
    if not su and not power:
        return _record_hook_homes(p)
    owner = _state_owner(p)
    name, uid, gid = owner
    theirs = _slurm_user_state_dirs(p, state_dir) if su else {}
    done = []
    try:
        _state_folder(p, state_dir, owner, make=True)
        if power:
            _own_folder(power, uid, gid, "the power programs' folder")
            moved = _move_old_records(Path(state_dir), Path(power), uid)
            if moved:
                _own_folder(power, uid, gid, "the power programs' folder")
                done.append(f"moved {', '.join(moved)} from {state_dir} (an earlier "
                            f"install's) into {power}")
            done.append(f"made {power} {name}'s (the power programs' records and lock)")
        if su:
            safedirs.ensure_folder_owned_by(su["home"], uid, gid, "SlurmUser's pbsplug home")
            done.append(f"made {su['home']} {name}'s (PBSPLUG_HOME of SlurmUser's programs; "
                        f"their log file {su['log_file']})")
            for folder, plugin in theirs.items():
                safedirs.ensure_folder_owned_by(folder, uid, gid,
                                                f"plugin {plugin}'s state_dir")
                done.append(f"made {folder} {name}'s (plugin {plugin}'s state_dir)")
    except (safedirs.UnsafeFolder, ValueError) as exc:
        raise SlurmInstallError(str(exc)) from None
    except OSError as exc:
        raise SlurmInstallError(f"cannot make {exc.filename or state_dir}: "
                                f"{exc.strerror or exc}") from None
    return done + _record_hook_homes(p)


def _user_events() -> set[str]:
    """The events fired in the scripts slurmctld runs as SlurmUser (and in ``pbsplug slurm
    periodic``, which runs as SlurmUser)."""
    return {e for key, _, fired in SCRIPTS.values() if key in SLURM_USER_SCRIPTS
            for e in fired} - {"execjob_launch"}


def _record_hook_homes(p: Plan) -> list[str]:
    """The plugins whose hooks run as a SlurmUser that is not root, with its name and
    pbsplug home, recorded in the installer's pbsplug home (`hookhome.record_hook_homes`),
    or that record removed; what was done."""
    from .. import hookhome

    home = p.config.get("home")
    if not home:
        return []
    su = p.config.get("slurm_user")
    homes = {name: (su["name"], su["home"]) for name, spec in p.config["plugins"].items()
             if su and set((spec.get("attributes") or {}).get("events") or ())
             & _user_events()}
    try:
        path = hookhome.record_hook_homes(homes, INSTALLED_BY, home)
    except safedirs.UnsafeFolder as exc:
        raise SlurmInstallError(str(exc)) from None
    except OSError as exc:
        raise SlurmInstallError(f"cannot write {exc.filename or home}: "
                                f"{exc.strerror or exc}") from None
    if path is None or not su:  # (a record is written for SlurmUser's plugins alone)
        return []
    return [f"recorded in {path} that {', '.join(sorted(homes))} run as {su['name']} with "
            f"the pbsplug home {su['home']} (root's commands read their records there)"]


def _own_folder(folder: str, uid: int, gid: int, what: str) -> None:
    """`folder` made `uid`'s: by the rule alone when that is who runs install."""
    if uid == os.geteuid():
        safedirs.ensure_folder(folder, what)
    else:
        safedirs.ensure_folder_owned_by(folder, uid, gid, what)


def check_state_dirs(p: Plan, state_dir: str) -> None:
    """`SlurmInstallError` in one line for what `prepare_state` would refuse that can be
    told before anything is made: a SlurmUser that is not root when install does not run
    as root, a --state-dir another user could change (the power programs' folder and
    SlurmUser's home are made in it), a ``state_dir`` the site gives a plugin that cannot
    be handed to a SlurmUser that is not root (`_slurm_user_state_dirs`). install checks
    before it writes anything."""
    if not p.config.get("slurm_user") and not p.config.get("power_dir"):
        return
    owner = _state_owner(p)
    try:
        _state_folder(p, state_dir, owner, make=False)
    except safedirs.UnsafeFolder as exc:
        raise SlurmInstallError(str(exc)) from None
    if p.config.get("slurm_user"):
        _slurm_user_state_dirs(p, state_dir)


def _state_owner(p: Plan) -> tuple[str, int, int]:
    """Who the folders `prepare_state` makes are for: SlurmUser's (name, uid, gid), or
    root's; `SlurmInstallError` for a SlurmUser that is not root when install is not run as
    root (it could not hand them over)."""
    su = p.config.get("slurm_user")
    name = su["name"] if su else "root"
    pw = user_entry(name) if su else None
    uid, gid = (pw.pw_uid, pw.pw_gid) if pw else (0, 0)
    if uid != 0 and os.geteuid() != 0:
        raise SlurmInstallError(f"SlurmUser is {name}: install must run as root to make "
                                "its folders its own")
    return name, uid, gid


def _state_folder(p: Plan, state_dir: str, owner: tuple[str, int, int], make: bool) -> None:
    """--state-dir checked by `pbsplug.safedirs`' rule (`safedirs.UnsafeFolder`), and made
    when `make`; a folder of SlurmUser's (`owner`: `_state_owner`'s), as an earlier pbsplug
    had it, is `SlurmInstallError` saying what to do."""
    try:
        if make:
            safedirs.ensure_folder(state_dir, "the state folder (--state-dir)")
        else:
            safedirs.check_folder(state_dir, "the state folder (--state-dir)")
    except safedirs.UnsafeFolder:
        name, uid, _ = owner
        if uid and _owned_by(state_dir, uid):  # as an earlier pbsplug's docs had it
            power = p.config.get("power_dir")
            raise SlurmInstallError(
                f"the state folder (--state-dir) {state_dir} is {name}'s, as an earlier "
                f"pbsplug had it (its power programs wrote there): make it root's "
                f"(chown root: {state_dir}); install then moves its records into "
                f"{power or state_dir + '/' + POWER_SUBDIR}, {name}'s") from None
        raise


def _slurm_user_state_dirs(p: Plan, state_dir: str) -> dict[str, str]:
    """Each ``state_dir`` the site configured for a plugin whose hooks run in SlurmUser's
    scripts -> the plugin; `SlurmInstallError` when that plugin's hooks also run as root
    (Prolog, Epilog, TaskProlog's worker, HealthCheckProgram: one folder cannot be both
    users'), when a plugin that runs only as root names the same folder (root's programs
    refuse a folder of SlurmUser's), or when it is, is in or holds a folder root's programs
    use (`_roots_folders`): given to SlurmUser, it could change what they read
    (HealthCheckProgram's marks, the config, root's plugins' records under the pbsplug
    home)."""
    user_events = _user_events()
    root_events = {e for key, _, fired in SCRIPTS.values() if key not in SLURM_USER_SCRIPTS
                   for e in fired}
    user = p.config["slurm_user"]["name"]
    theirs: dict[str, str] = {}
    roots: dict[str, str] = {}
    for name, spec in p.config["plugins"].items():
        folder = (spec.get("config") or {}).get("state_dir")
        if not isinstance(folder, str) or not folder.startswith("/"):
            continue
        events = set((spec.get("attributes") or {}).get("events") or ())
        if events & user_events and events & root_events:
            # One folder for hooks run by two users: on a host that runs both (a controller
            # that is also a node) it cannot be both users', and handed to SlurmUser on
            # a node it is a folder of SlurmUser's where root's hooks run.
            raise SlurmInstallError(
                f"plugin {name}'s hooks run as SlurmUser {user} "
                f"({', '.join(sorted(events & user_events))}) and as root "
                f"({', '.join(sorted(events & root_events))}): its state_dir {folder} cannot "
                "be both users'; leave state_dir unset (each user's programs then keep the "
                "plugin's state in their own pbsplug home) or set its events to one user's")
        (theirs if events & user_events else roots)[os.path.normpath(folder)] = name
    for folder, name in theirs.items():
        if folder in roots:
            raise SlurmInstallError(
                f"state_dir {folder} is plugin {name}'s, which runs as SlurmUser, and plugin "
                f"{roots[folder]}'s, which runs as root: give them folders of their own")
    own = {os.path.realpath(p.config[key]) for key in ("power_dir",) if p.config.get(key)}
    own.add(os.path.realpath(p.config["slurm_user"]["home"]))
    for folder, name in theirs.items():
        real = os.path.realpath(folder)
        if real in own:  # already SlurmUser's, made above
            continue
        for what, used in _roots_folders(p, state_dir):
            if real == used or _inside(used, real) or _inside(real, used):
                raise SlurmInstallError(
                    f"state_dir {folder} is plugin {name}'s, which runs as SlurmUser, and "
                    f"{'is' if real == used else 'holds' if _inside(used, real) else 'is in'}"
                    f" {what} {used}, which root's programs use: install gives SlurmUser no "
                    "folder of root's; give the plugin a folder of its own (e.g. "
                    f"/var/spool/pbsplug-{name})")
    return theirs


def _roots_folders(p: Plan, state_dir: str) -> list[tuple[str, str]]:
    """The folders root's programs read or write (what each is, its real path)."""
    out = [("the state folder (--state-dir)", state_dir), ("the programs' folder",
                                                           str(p.directory))]
    if p.config.get("home"):
        out.append(("root's pbsplug home", p.config["home"]))
    if p.config.get("log_file"):
        out.append(("the log file's folder", os.path.dirname(p.config["log_file"])))
    if p.config.get("run_dir"):
        out.append(("the workers' folder (--run-dir)", p.config["run_dir"]))
    return [(what, os.path.realpath(folder)) for what, folder in out]


def _inside(path: str, folder: str) -> bool:
    """Whether the real path `path` is under the real folder `folder`."""
    return path != folder and os.path.commonpath([path, folder]) == folder


def _owned_by(folder: str, uid: int) -> bool:
    try:
        return os.lstat(folder).st_uid == uid
    except OSError:
        return False


def _move_old_records(state_dir: Path, power: Path, uid: int = 0) -> list[str]:
    """An earlier install's power records (plain files directly in --state-dir, of root's
    or of `uid`'s, SlurmUser's: its power programs wrote them where an earlier pbsplug had
    the folder SlurmUser's) moved into `power` where it has none of that name; their
    names. (Moving a name of SlurmUser's into its own folder gives it nothing.)"""
    moved = []
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    src = os.open(state_dir, flags)
    try:
        dst = os.open(power, flags)
        try:
            for name in OLD_POWER_RECORDS:
                try:
                    info = os.stat(name, dir_fd=src, follow_symlinks=False)
                except FileNotFoundError:
                    continue
                try:
                    os.stat(name, dir_fd=dst, follow_symlinks=False)
                    continue  # the new folder has its own
                except FileNotFoundError:
                    pass
                if _plain_roots(info) or (uid and _plain_of(info, uid)):
                    os.rename(name, name, src_dir_fd=src, dst_dir_fd=dst)
                    moved.append(name)
        finally:
            os.close(dst)
    finally:
        os.close(src)
    return moved


def _plain_of(info: os.stat_result, uid: int) -> bool:
    """A plain file of `uid`'s with one name."""
    return stat.S_ISREG(info.st_mode) and info.st_uid == uid and info.st_nlink == 1


def _plain_roots(info: os.stat_result) -> bool:
    """A plain file of root's with one name, that no one else may write."""
    return stat.S_ISREG(info.st_mode) and info.st_uid == 0 and info.st_nlink == 1 \
        and not info.st_mode & 0o022


def _ours(path: Path) -> bool:
    try:
        return PROGRAM_MARK in path.read_text(errors="replace")[:400]
    except OSError:
        return False


def installed_config(directory: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((Path(directory) / CONFIG_NAME).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("installed_by") == INSTALLED_BY \
        else None


def conf_block(lines: dict[str, str]) -> str:
    return "\n".join(f"{k}={v}" for k, v in lines.items())


#: The start of a slurm.conf line that sets a key: the key, an operator Slurm allows
#: (``+=``...), '='.
_LINE_KEY = re.compile(r"\s*([A-Za-z0-9_.]+)\s*[-*+/]?=")
#: One Key=value pair as Slurm 22.05 reads it (after comments, continuations and escapes):
#: a quoted value may hold blanks; an unquoted one ends at a blank.
_PAIR = re.compile(r'\s*([A-Za-z0-9_.]+)\s*[-*+/]?=\s*(?:"([^"]*)"|(\S+))(?=\s|$)')
#: An Include line: the word at the very start of the line, blanks, a file name up to a blank
#: (no quotes, no glob pattern: Slurm 22.05 reads the name as it is).
_INCLUDE = re.compile(r"(?i)include\s+(\S*)")
#: A backslash and the character it escapes (a backslash alone at the end: nothing).
_ESCAPE = re.compile(r"\\(.?)", re.DOTALL)
#: How deep Include lines may nest (a loop of them is refused before this).
_INCLUDE_DEPTH = 20


@dataclass(frozen=True)
class ConfSetting:
    """One Key=value that slurm.conf, or a file it includes, sets, as Slurm reads it."""

    file: str
    line: int        # its first line's number, from 1
    key: str         # as written
    value: str       # without quotes and escapes
    text: str        # the line as written (a continued line's lines joined by a newline)
    alone: bool      # no other Key=value on the line (Slurm refuses others but on node lines)
    included: bool   # in a file slurm.conf includes, not in slurm.conf itself
    read: str = ""   # the line as Slurm reads it (`conf_lines`), kept for `_pair_keys`


def _cut_comment(line: str) -> str:
    """`line` up to its first '#' that no odd number of backslashes escapes."""
    escapes = 0
    for i, c in enumerate(line):
        if c == "#" and escapes % 2 == 0:
            return line[:i]
        escapes = escapes + 1 if c == "\\" else 0
    return line


def _physical(text: str) -> list[str]:
    """slurm.conf's lines as Slurm reads them, split at '\n' alone (a '\r' before it, a
    form feed... are the line's), the last one "" when the file ends in a line break:
    joined again by '\n', the same bytes."""
    return text.split("\n")


#: A file's lines as Slurm reads them (`conf_lines`).
_Lines = list[tuple[int, int, str]]
#: One physical line as Slurm reads it (`_line_read`).
_Read = tuple[str, bool]


def conf_lines(text: str) -> _Lines:
    """slurm.conf's lines as Slurm 22.05 reads them: (first, end) indexes into
    ``_physical(text)`` and what Slurm reads: each line cut at its comment, a line that
    then ends in an odd number of backslashes (blanks after them aside) continued by the
    next, and the escapes undone (``\\#`` is '#', ``\\\\`` a backslash)."""
    return _joined(_line_reads(text))


def _line_reads(text: str) -> list[_Read]:
    """Each physical line of `text` as Slurm reads it (`_line_read`): the one pass over a
    file's characters (`SlurmConf.lines` reads slurm.conf as the site wrote it from
    this pass over it as it is)."""
    return [_line_read(line) for line in _physical(text)]


def _line_read(line: str) -> _Read:
    """What one physical line adds to the line Slurm reads (cut at its comment; when it
    ends in an odd number of backslashes, blanks after them aside, without the last one
    and those blanks) and whether the next line continues it. Its escapes are left to
    `_joined`: an even run of backslashes at its end is whole pairs, so none escapes
    across lines."""
    part = _cut_comment(line)
    kept = part.rstrip()
    if (len(kept) - len(kept.rstrip("\\"))) % 2 == 0:
        return part, False
    return kept[:-1], True


def _joined(reads: Sequence[_Read]) -> _Lines:
    """`conf_lines` of the physical lines read as `reads`."""
    out, i = [], 0
    while i < len(reads):
        first, pieces = i, []  # (joined once: added one by one, each copied the line so
        while i < len(reads):  # far, and 200,000 continued lines took seconds)
            piece, more = reads[i]
            pieces.append(piece)
            i += 1
            if not more:
                break
        out.append((first, i, _ESCAPE.sub(r"\1", "".join(pieces))))
    return out


def _setting(read: str) -> tuple[str, str, bool] | None:
    """The key, value and whether it is alone of a line Slurm reads as `read`
    (`conf_lines`), by its first pair; None for a line that sets no key."""
    start = _LINE_KEY.match(read)
    if not start:
        return None
    pair = _PAIR.match(read)
    if not pair:  # (Slurm refuses the line: no value it reads)
        return start.group(1), "", not read[start.end():].strip()
    value = pair.group(2) if pair.group(2) is not None else pair.group(3)
    return pair.group(1), value, not read[pair.end():].strip()


def _pair_keys(s: ConfSetting) -> list[str]:
    """The keys of every Key=value pair on the line of setting `s`, as Slurm reads it (the
    parse kept: this read its text, a NodeName line of thousands of continued lines, again)."""
    read = s.read
    keys, at = [], 0
    while (pair := _PAIR.match(read, at)) is not None:
        keys.append(pair.group(1))
        at = pair.end()
    return keys


def site_settings(conf: Path | SlurmConf | None) -> list[ConfSetting]:
    """Every Key=value slurm.conf sets (as the site wrote it: an earlier install's lines
    undone), with the files its ``Include`` lines name read where they stand, as Slurm does:
    a relative name from the including file's folder, ``%c`` the ClusterName read so far.
    Only a line's first key is read: a NodeName or PartitionName line's other pairs are the
    node's or partition's. None for a slurm.conf that cannot be read; `SlurmInstallError` in
    one line for an included file that cannot be (Slurm does not start then either), or
    files that include each other. A `SlurmConf` parses its files once (`SlurmConf.settings`)."""
    if conf is None:
        return []
    return _view(conf).settings()


def _read_settings(view: SlurmConf, path: str, lines: tuple[str, _Lines],
                   out: list[ConfSetting], stack: list[str]) -> None:
    """The settings of the file `path` (its text and lines: `SlurmConf.lines`) into `out`,
    with the files it includes."""
    text, parsed = lines
    physical = _physical(text)
    for first, end, read in parsed:
        written = "\n".join(line.rstrip("\r") for line in physical[first:end])
        include = _INCLUDE.match(read)
        if include:
            _read_include(view, path, first + 1, include.group(1), out, stack)
            continue
        found = _setting(read)
        if found:
            out.append(ConfSetting(path, first + 1, found[0], found[1], written, found[2],
                                   len(stack) > 1, read))


def _read_include(view: SlurmConf, path: str, line: int, name: str, out: list[ConfSetting],
                  stack: list[str]) -> None:
    where = f"{path}:{line}: Include {name}"
    if "%c" in name:
        cluster = [s.value for s in out if s.key.lower() == "clustername"]
        if not cluster:
            raise SlurmInstallError(f"{where}: no ClusterName before it for %c, which Slurm "
                                    "needs too: correct the line and run install again")
        name = name.replace("%c", cluster[-1].lower())
    target = os.path.join(os.path.dirname(path), name)
    if target in stack or len(stack) > _INCLUDE_DEPTH:
        raise SlurmInstallError(f"{where}: the files include each other ({' -> '.join(stack)}"
                                f" -> {target}): correct the line and run install again")
    try:
        lines = view.lines(target)
    except (OSError, ValueError) as exc:  # (ValueError: a NUL byte in the name)
        raise SlurmInstallError(
            f"{where}: cannot read {target} ({getattr(exc, 'strerror', None) or exc}), which "
            "may set a program pbsplug's would run first; Slurm cannot read it either: "
            "correct the line (or the file) and run install again") from None
    _read_settings(view, target, lines, out, stack + [target])


def alone_problem(settings: Iterable[ConfSetting], keys: Iterable[str]) -> str:
    """One line for the first setting of `keys` that shares its line with other pairs:
    Slurm 22.05 refuses such a line (outside NodeName, PartitionName... lines) and install,
    which replaces a line of slurm.conf whole, would lose the others; "" when there is
    none."""
    keys = {k.lower() for k in keys}
    for s in settings:
        if s.key.lower() in keys and not s.alone:
            return _shares_line(s, s.key, "" if s.included
                                else ", which install would replace with it")
    return ""


def _shares_line(s: ConfSetting, key: str, lose: str = "") -> str:
    """One line: setting `s`'s line sets `key` beside other pairs, which Slurm refuses."""
    return (f"{s.file}:{s.line}: {' '.join(s.text.split())[:200]!r}: {key} shares its line "
            f"with other settings{lose}; Slurm reads one Key=value a line (but on NodeName, "
            "PartitionName... lines) and refuses this one ('Parse error'): put each on a line "
            "of its own and run install again")


def merge_conf(text: str | SlurmConf, lines: dict[str, str], path: str = "slurm.conf"
               ) -> str:
    """slurm.conf (its text, or a `SlurmConf`'s parse of it) with pbsplug's lines: any
    earlier pbsplug block replaced, each line of the site's that sets one of the same keys
    kept as a comment (`REPLACED`; each of a continued line's lines), the rest as it was.
    `SlurmInstallError` for a line that sets one with other settings (`alone_problem`)."""
    text, parsed = _site_lines(text)
    keys = {k.lower() for k in lines}
    out = _physical(text)
    for first, end, read in parsed:
        found = _setting(read)
        if not found or found[0].lower() not in keys:
            continue
        if not found[2]:
            raise SlurmInstallError(alone_problem(
                [ConfSetting(path, first + 1, found[0], found[1],
                             "\n".join(out[first:end]), False, False)], keys))
        out[first:end] = [REPLACED + line for line in out[first:end]]
    body = "\n".join(out)
    if body and not body.endswith("\n"):
        body += "\n"  # (a last line with no line break gets one: uninstall keeps it)
    return f"{body}{BEGIN}\n{conf_block(lines)}\n{END}\n"


def _site_lines(conf: str | SlurmConf) -> tuple[str, _Lines]:
    """slurm.conf's text as the site wrote it (`unmerge_conf`) and its lines as Slurm reads
    them (`conf_lines`): a `SlurmConf`'s kept parse, or the text `conf` parsed."""
    if isinstance(conf, SlurmConf):
        return conf.lines(site=True)
    text = unmerge_conf(conf)
    return text, conf_lines(text)


def unmerge_conf(text: str) -> str:
    """slurm.conf as it was before `merge_conf`, byte for byte (but for a last line that
    had no line break)."""
    return "\n".join(line for _, line, _ in _unmerged(_physical(text)))


def _unmerged(physical: list[str]) -> list[tuple[int, str, bool]]:
    """`unmerge_conf`'s physical lines: each with the index of the line of `physical` it
    is, and whether it was a replaced line (its mark taken off: its text is not that
    line's)."""
    out, inside = [], False
    for i, line in enumerate(physical):
        if line == BEGIN:
            inside = True
            continue
        if line == END:
            inside = False
            continue
        if inside:
            continue
        replaced = line.startswith(REPLACED)
        out.append((i, line[len(REPLACED):] if replaced else line, replaced))
    return out


def replaced_lines(text: str | SlurmConf, lines: dict[str, str]) -> list[str]:
    """The site's own lines `merge_conf` would comment out in slurm.conf (its text, or a
    `SlurmConf`'s parse of it), for install's output (a continued line's lines joined by a
    newline, a '\r' before one left out)."""
    keys = {k.lower() for k in lines}
    text, parsed = _site_lines(text)
    physical = _physical(text)
    return ["\n".join(line.rstrip("\r") for line in physical[first:end])
            for first, end, read in parsed
            if (found := _setting(read)) and found[0].lower() in keys]


def included_settings(p: Plan) -> list[ConfSetting]:
    """The settings of the keys pbsplug sets in the files slurm.conf includes: install
    leaves them as they are, and pbsplug's line, read after them, wins."""
    keys = {k.lower() for k in p.conf_lines}
    return [s for s in p.site_settings if s.included and s.key.lower() in keys]


def overriding_settings(conf: Path | SlurmConf, keys: Iterable[str]) -> list[ConfSetting]:
    """The settings Slurm reads after pbsplug's lines in `conf` (a line below its block, or
    in a file an ``Include`` line below it names) that set one of `keys` (pbsplug's): for
    each such key, the last one read, which is the value Slurm uses. [] when `conf` cannot
    be read or holds no pbsplug block; `SlurmInstallError` as `site_settings`."""
    view = _view(conf)
    try:
        lines = view.lines()
    except OSError:
        return []
    physical = _physical(lines[0])
    if BEGIN not in physical:
        return []
    begin = physical.index(BEGIN)
    end = physical.index(END, begin) if END in physical[begin:] else len(physical)
    settings: list[ConfSetting] = []
    # as it is: pbsplug's lines too
    _read_settings(view, str(view.path), lines, settings, [str(view.path)])
    last: dict[str, ConfSetting] = {}
    for each in settings:
        last[each.key.lower()] = each
    out = []
    for key in keys:
        found = last.get(key.lower())
        if found is not None and (found.included or not begin < found.line - 1 < end):
            out.append(found)
    return out


def overriding_line(s: ConfSetting, conf: Path, key: str) -> str:
    """`status`'s line for a setting `overriding_settings` found."""
    return (f"{s.file}:{s.line}: {s.key} is set again after pbsplug's {key} line in {conf} "
            f"and overrides it (Slurm uses the last value read): {s.key}={s.value[:200]}; run "
            "'pbsplug slurm install --apply' again (pbsplug's lines go last, a program "
            "the line names runs first)")


def replaced_why(p: Plan, line: str) -> str:
    """What becomes of the site's program a replaced slurm.conf `line` (as written) named,
    or why pbsplug sets the key it set (`SET_WHY`), for install's output: "" for neither."""
    read = conf_lines(line)
    found = _setting(read[0][2]) if read else None
    key, value = (found[0].lower(), found[1]) if found else ("", "")
    for name, why in SET_WHY.items():
        if name.lower() == key and name in p.conf_lines:
            return f"; pbsplug sets it to {p.conf_lines[name]}: {why}"
    for script, (name, _, _) in SCRIPTS.items():
        if name.lower() != key:
            continue
        chained = (p.config.get("site_programs") or {}).get(script)
        if chained is not None:
            return (f"; pbsplug's {name} runs it first" if chained == value else
                    f"; Slurm did not run it: a line read after it sets {name}")
        if script not in CHAINED:
            return "; not run: the power plugin takes over power"
    return ""


#: The most of a slurm.conf, or of a file it includes, `read_conf` reads: as much as root
#: reads of a file of another user's (slurm.conf is often SlurmUser's).
CONF_MAX = safedirs.OTHERS_FILE_MAX

#: What a path that is no regular file is, for `read_conf`'s refusal.
_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def read_conf(path: Path) -> str:
    """slurm.conf's text with every byte kept: its line breaks as they are ('\r\n' too), a
    byte that is no UTF-8 as a surrogate (`_write` writes it back as it was). An OSError
    (its strerror says why, in a few words) for a path that is no regular file, checked
    before it is opened and again once it is, without waiting for a writer (a FIFO hung
    install, /dev/zero filled its memory), or one of more than `CONF_MAX` bytes."""
    _conf_file_problem(os.stat(path), path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        _conf_file_problem(os.fstat(fd), path)
        chunks, size = [], 0
        while chunk := os.read(fd, min(1 << 20, CONF_MAX + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
            if size > CONF_MAX:
                _conf_file_problem(os.fstat(fd), path, size)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "surrogateescape")


class SlurmConf:
    """slurm.conf and the files its ``Include`` lines name, as one command reads them: each
    file read once (`read_conf`), when first asked for, and kept, and its settings parsed
    once (`settings`). install's plan, SlurmUser, the controllers, the lines it replaces and
    its --apply, status's checks and uninstall all read the one view: a file changed while
    the command runs cannot give it two. A file that could not be read is its error again
    at each ask: a fresh copy of the one kept (`_again`), with the same one line. Each
    file's lines are parsed once too (`lines`), for every reader. Each reader of slurm.conf
    here takes one, or a path, read afresh."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._texts: dict[str, str | OSError | ValueError] = {}
        self._settings: list[ConfSetting] | SlurmInstallError | None = None
        self._lines: dict[tuple[str, bool], tuple[str, _Lines]] = {}
        self._reads: dict[str, list[_Read]] = {}

    def settings(self) -> list[ConfSetting]:
        """`site_settings` of these files, parsed at the first ask and kept: install's plan,
        SlurmUser and the controllers read one parse. [] when slurm.conf cannot be read;
        a `SlurmInstallError` of the included files again at each ask."""
        if self._settings is None:
            try:
                read = self.lines(site=True)
            except OSError:
                self._settings = []
            else:
                out: list[ConfSetting] = []
                try:
                    _read_settings(self, str(self.path), read, out, [str(self.path)])
                    self._settings = out
                except SlurmInstallError as exc:
                    self._settings = _kept(exc)
        if isinstance(self._settings, SlurmInstallError):
            raise _again(self._settings)
        return list(self._settings)  # (a list of the caller's own)

    def lines(self, path: str | Path | None = None, *, site: bool = False
              ) -> tuple[str, _Lines]:
        """The text of slurm.conf (`site`: as the site wrote it, an earlier install's lines
        undone by `unmerge_conf`), or of the file `path` it includes, and its lines as Slurm
        reads them (`conf_lines`), parsed at the first ask and kept: every reader reads the
        one parse (and changes none of it). The file's characters are read once: slurm.conf
        as the site wrote it is read from the pass over it as it is (status reads both;
        it read the two texts through, each in full). OSError and ValueError as `text`."""
        name = str(self.path if path is None else path)
        if (name, site) not in self._lines:
            text = self.text(name)
            if name not in self._reads:
                self._reads[name] = _line_reads(text)
            reads = self._reads[name]
            if site:  # (from the one pass over the file as it is: a line it keeps is
                #  read as it was; only a replaced line, its mark off, is read again)
                kept = _unmerged(_physical(text))
                text = "\n".join(line for _, line, _ in kept)
                reads = [_line_read(line) if replaced else reads[i]
                         for i, line, replaced in kept] or [_line_read("")]  # ("": a line)
            self._lines[name, site] = (text, _joined(reads))
        return self._lines[name, site]

    def text(self, path: str | Path | None = None) -> str:
        """The text of slurm.conf, or of the file `path` it includes; OSError as `read_conf`
        (ValueError for a name with a NUL byte)."""
        name = str(self.path if path is None else path)
        if name not in self._texts:
            try:
                self._texts[name] = read_conf(Path(name))
            except (OSError, ValueError) as exc:
                self._texts[name] = _kept(exc)
        found = self._texts[name]
        if isinstance(found, (OSError, ValueError)):
            raise _again(found)
        return found

    def checked_text(self, reads: str) -> str:
        """The text of slurm.conf, or `SlurmInstallError` in one line naming it and why it
        cannot be read (`reads`: what the command reads there)."""
        try:
            return self.text()
        except OSError as exc:
            raise SlurmInstallError(f"{self.path}: cannot read slurm.conf ("
                                    f"{exc.strerror or exc}); {reads} (give --slurm-conf)"
                                    ) from None

    def changed(self) -> bool:
        """Whether slurm.conf no longer holds the text `text` read (written, or replaced,
        since): --apply would lose that change. Its text read again, not its mtime: a
        ``touch`` changes nothing, and an edit of the same size within one step of the
        filesystem's timestamps (coarse on many: a second, or a kernel clock tick) is a
        change."""
        kept = self._texts.get(str(self.path))
        try:
            return not isinstance(kept, str) or read_conf(self.path) != kept
        except OSError:
            return True


_E = TypeVar("_E", bound=Exception)


def _kept(exc: _E) -> _E:
    """`exc`, to keep in a `SlurmConf`, without what it held of the code that raised it
    (its traceback's frames, the error it was raised while handling)."""
    exc.__context__ = exc.__cause__ = None
    return exc.with_traceback(None)


def _again(kept: _E) -> _E:
    """A fresh copy of an error a `SlurmConf` keeps, to raise: the one kept is never
    raised itself (each raise would lengthen its traceback, and set what it was raised
    while handling, in every later reader's); the same type, arguments (errno, strerror,
    filename) and one line."""
    return copy.copy(kept)


def _view(conf: Path | SlurmConf) -> SlurmConf:
    return conf if isinstance(conf, SlurmConf) else SlurmConf(conf)


def _conf_file_problem(info: os.stat_result, path: Path, size: int = 0) -> None:
    kind = next((what for test, what in _KINDS if test(info.st_mode)), "no regular file")
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, f"{kind}, not a regular file", str(path))
    if max(size, info.st_size) > CONF_MAX:
        raise OSError(errno.EFBIG, f"more than {CONF_MAX} bytes, the most pbsplug reads of "
                      "it", str(path))


def merged_conf(conf: Path | SlurmConf, lines: dict[str, str]) -> str:
    """slurm.conf as `conf` read it with pbsplug's `lines` merged (`merge_conf`): what
    --apply writes. `SlurmInstallError` in one line for a slurm.conf that cannot be read
    (missing, a FIFO, a folder), a link (`_refuse_link`), a line merge_conf refuses, or
    in a folder install cannot write in (read-only, immutable): install asks before it
    writes anything, so that a refused install leaves all as it was."""
    view = _view(conf)
    view.checked_text("install merges pbsplug's lines into it")  # (read, or one line)
    _refuse_link(view.path)
    folder = view.path.parent
    if not os.access(folder, os.W_OK | os.X_OK,
                     effective_ids=os.access in os.supports_effective_ids):
        raise SlurmInstallError(f"{view.path}: install cannot write in its folder {folder} "
                                "(it writes the new slurm.conf there, then renames it over "
                                "the old): left as it is")
    return merge_conf(view, lines, str(view.path))


def apply_conf(conf: Path | SlurmConf, lines: dict[str, str]) -> None:
    """pbsplug's `lines` merged into slurm.conf as `conf` read it (`merged_conf`); refused,
    the file left as it is, when it has changed since (another's edit would be lost)."""
    view = _view(conf)
    apply_merged(view, merged_conf(view, lines))


def apply_merged(view: SlurmConf, merged: str) -> None:
    """slurm.conf rewritten as `merged`, what `merged_conf` gave for `view` (install asks
    for it before it writes anything, and writes that); refused, the file left as it is,
    when it has changed since (another's edit would be lost)."""
    _write_back(view, merged, "install")


def _write_back(view: SlurmConf, text: str, command: str) -> None:
    """slurm.conf rewritten as `text`, made from what `view` read (`_rewrite_conf`); refused,
    the file left as it is, when it has changed since (`command` named)."""
    if view.changed():
        raise SlurmInstallError(f"{view.path} changed while {command} ran, after {command} "
                                f"read it: left as it is; run {command} again")
    _rewrite_conf(view.path, text)


def uninstall(directory: Path, conf: Path | SlurmConf | None) -> list[str]:
    """Remove pbsplug's lines from slurm.conf, read through `conf` as install reads it (the
    replaced ones back), and the programs and config it wrote; what was done, line by line.
    `SlurmInstallError` in one line for a slurm.conf there that cannot be read (a FIFO, a
    folder), as install's and status's."""
    done = []
    view = _view(conf) if conf is not None else None
    if view is not None and view.path.exists():
        text = view.checked_text("uninstall removes pbsplug's lines from it")
        if BEGIN in text or REPLACED in text:
            _write_back(view, unmerge_conf(text), "uninstall")
            done.append(f"{view.path}: pbsplug's lines removed, the site's own restored")
    directory = Path(directory)
    for name in [n for _, n, _ in SCRIPTS.values()] + [PROGRAM_MODULE, CLIENT_MODULE]:
        if _ours(directory / name):
            (directory / name).unlink()
            done.append(f"removed {directory / name}")
        if _ours_native(directory / (name + NATIVE_SUFFIX)):
            (directory / (name + NATIVE_SUFFIX)).unlink()
            done.append(f"removed {directory / (name + NATIVE_SUFFIX)}")
    have = installed_config(directory)
    if have is not None and have.get("home"):
        from .. import hookhome

        if hookhome.forget_hook_homes(INSTALLED_BY, have["home"]):
            done.append(f"removed {Path(have['home']) / hookhome.RECORD}")
    if have is not None:
        (directory / CONFIG_NAME).unlink()
        done.append(f"removed {directory / CONFIG_NAME}")
        if (directory / TASK_CONFIG_NAME).exists():
            (directory / TASK_CONFIG_NAME).unlink()
            done.append(f"removed {directory / TASK_CONFIG_NAME}")
    cache = directory / "__pycache__"
    for compiled in [*cache.glob("slurm_program.*.pyc"), *cache.glob("worker_client.*.pyc")]:
        compiled.unlink()
    for folder in (cache, directory):
        try:
            folder.rmdir()
        except OSError:
            pass
    return done


def status(p: Plan, conf: Path | SlurmConf | None) -> list[dict[str, Any]]:
    """Per plugin: its hooks that run in Slurm (where), those that cannot (why), and whether
    the installed programs and slurm.conf match what the site wants now; ``overridden``:
    each setting Slurm reads after pbsplug's lines that sets a key of theirs
    (`overriding_settings`), one line of ``problems`` too. `SlurmInstallError` in one line
    for a slurm.conf there that cannot be read (a FIFO, a folder)."""
    have = installed_config(p.directory)
    view = _view(conf) if conf is not None else None
    conf_text = (view.checked_text("status compares pbsplug's lines with it")
                 if view is not None and view.path.exists() else None)
    problems = []
    if have is None:
        problems.append(f"not installed in {p.directory}")
    else:
        if have.get("plugins") != json.loads(json.dumps(p.config["plugins"], default=str)):
            problems.append("the installed plugins or their configuration differ from the "
                            "site's: run 'pbsplug slurm install' again")
        for name, text in p.programs.items():
            try:
                if (p.directory / name).read_text() != text:
                    problems.append(f"{p.directory / name} differs")
            except OSError:
                problems.append(f"{p.directory / name} is missing")
        for name in p.native:
            if not _ours_native(p.directory / name):
                problems.append(f"{p.directory / name} (the native launcher) is missing")
        if have.get("launcher", "python") != p.config["launcher"]:
            problems.append(f"installed with the {have.get('launcher', 'python')} launcher, "
                            f"the site's options ask for the {p.config['launcher']} one")
        problems += state_folder_problems(p, view)
    overridden = []
    if view is not None and conf_text is not None:
        # slurm.conf's own settings as Slurm reads them (the one parse of the file as it
        # is): a pattern over its text missed a line with a comment after it, quotes or a
        # continuation, and took a value in another case (a path Slurm would not find)
        _, parsed = view.lines()
        here = {(pair[0].lower(), pair[1]) for _, _, read in parsed
                if (pair := _setting(read)) and pair[2]}
        for key, value in p.conf_lines.items():
            if (key.lower(), value) not in here:
                problems.append(f"slurm.conf lacks {key}={value}")
        try:
            later = overriding_settings(view, p.conf_lines)
        except SlurmInstallError as exc:
            later = []
            problems.append(str(exc))
        for s in later:
            key = next(k for k in p.conf_lines if k.lower() == s.key.lower())
            problems.append(overriding_line(s, view.path, key))
            overridden.append({"file": s.file, "line": s.line, "key": key, "value": s.value,
                               "pbsplug_value": p.conf_lines[key]})
    state = "installed" if not problems else "missing" if have is None else "differs"
    found = unsafe(p.root_paths)
    rows = []
    for row in p.rows:
        rows.append({**row, "state": state if row["runs"] else "not needed",
                     "problems": problems if row["runs"] else [],
                     "unsafe": status_lines(found, row["plugin"]) if row["runs"] else [],
                     "overridden": overridden if row["runs"] else []})
    return rows


def state_folder_problems(p: Plan, conf: Path | SlurmConf | None = None) -> list[str]:
    """The folders install makes for the power programs and SlurmUser's programs
    (``<state-dir>/power``, ``<state-dir>/slurmuser``, a state_dir handed to SlurmUser), as
    they are on this host: one line for each that is not a folder of the user it should be
    (SlurmUser's, or root's when SlurmUser is root), or that others may write in, naming
    the folder, the owner found and the owner expected; one for each that is missing on a
    host slurm.conf names as a controller (where the programs run)."""
    su = p.config.get("slurm_user")
    expected = su["name"] if su else "root"
    folders: list[tuple[str, str]] = []
    problems = []
    if p.config.get("power_dir"):
        folders.append((p.config["power_dir"], "the power programs' folder"))
    if su:
        folders.append((su["home"], "SlurmUser's pbsplug home"))
        try:
            theirs = _slurm_user_state_dirs(p, str(p.config.get("state_dir") or ""))
        except SlurmInstallError as exc:
            problems.append(str(exc))
            theirs = {}
        folders += [(folder, f"plugin {name}'s state_dir") for folder, name in theirs.items()]
    try:
        uid = user_entry(expected).pw_uid if su else 0
    except SlurmInstallError as exc:
        return [*problems, str(exc)]
    here = socket.gethostname().split(".")[0]
    controller = conf is not None and here in controller_names(conf)
    fix = "run 'pbsplug slurm install' again, as root, on the controller"
    for folder, what in folders:
        try:
            info = os.lstat(folder)
        except FileNotFoundError:
            if controller:
                problems.append(f"{folder} ({what}) is missing on this host, a controller: "
                                f"{fix}")
            continue
        except OSError as exc:
            problems.append(f"{folder} ({what}) cannot be checked: {exc.strerror or exc}")
            continue
        mode = stat.S_IMODE(info.st_mode)
        kind = "a link" if stat.S_ISLNK(info.st_mode) else (
            "a folder" if stat.S_ISDIR(info.st_mode) else "not a folder")
        if kind != "a folder" or info.st_uid != uid or mode & 0o022:
            problems.append(f"{folder} ({what}) is {kind} owned by {user_name(info.st_uid)}, "
                            f"mode {mode:04o}; expected a folder owned by {expected}, "
                            f"writable by no one else: {fix}")
            continue
        above = safedirs.folder_problem(Path(folder).parent)
        if above:
            problems.append(f"{folder} ({what}): {above}: the programs refuse it")
    return problems


def user_name(uid: int) -> str:
    """The name of the user `uid` ("uid N" when this host has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"


def which(bin_dir: str | None) -> str:
    """The folder of Slurm's client commands (scontrol), checked."""
    if bin_dir:
        if not Path(bin_dir, "scontrol").exists():
            raise SlurmInstallError(f"--bin-dir {bin_dir}: no scontrol there")
        return str(Path(bin_dir).resolve())
    found = shutil.which("scontrol") or ("/usr/bin/scontrol" if Path(
        "/usr/bin/scontrol").exists() else None)
    if found is None:
        raise SlurmInstallError("scontrol not found on PATH: install Slurm's client, or give "
                                "--bin-dir")
    return str(Path(found).resolve().parent)


def plugin_names(rows: Iterable[dict[str, Any]]) -> list[str]:
    return [r["plugin"] for r in rows if r["runs"]]
