"""What an adapter's install points root at, and whether a user other than root could change
any of it (``pbsplug pbs install``, ``pbsplug slurm install`` and their status commands).

PBS's hooks, Slurm's programs and the workers they start run as root: the interpreter install
ran with (`sys.executable`, every link on the way to it, and the pyvenv.cfg that says which
environment it is), the libpython it is linked to, its standard library (and the pythonXY.zip
on its sys.path), the site folders they import from (this environment's site-packages and any
other the interpreter reads itself, each with its .pth files, run at start-up, and the folders
they add; ``--site-dir``), the pbsplug package (PBS's hook puts wire_dir, in it, on sys.path)
and each enabled plugin's package (a module of one file with its folder's __pycache__), and the
site config and .CF files install reads the plugins' configuration from (a power plugin's
commands, run as root). A user who could change any of these could run code as root. `unsafe`
checks each with `pbsplug.safedirs.code_problem`: one walker for both adapters.

A site folder's own entries are checked (a package or a .pth file planted there); a
dependency's subfolders are not walked, the pbsplug package's and the plugins' are.
"""

from __future__ import annotations

import importlib.util
import os
import site
import sys
import sysconfig
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .. import safedirs
from ..plugins import PluginSet

#: How install says what root would do with a path another user could change.
WHY = "root would run code from it"
#: ... with a file of configuration.
WHY_CONFIG = "root's hooks would do what it says"
#: The option that installs all the same.
ALLOW = "--allow-unsafe-paths"


@dataclass(frozen=True)
class RootPath:
    """One path root runs, imports or reads its orders from."""

    what: str                   # what it is, for messages: "the interpreter"
    path: str
    depth: int | None = 0       # how deep a folder's entries are checked (None: all)
    plugin: str | None = None   # the plugin it belongs to (None: every plugin's)
    why: str = WHY              # what root would do with it


def root_paths(plugins: PluginSet, python: str, site_dirs: Sequence[str],
               extra: Iterable[RootPath] = ()) -> list[RootPath]:
    """What an install that names `python` and `site_dirs` points root at, for the enabled
    `plugins` (`extra`: the adapter's own, checked after the interpreter's and before the
    packages')."""
    out = _interpreter_paths(python) + _site_dir_paths(site_dirs, python) + list(extra)
    out.append(_PBSPLUG)
    site = plugins.site
    if site.exists:
        out.append(RootPath("the site config", str(site.path), why=WHY_CONFIG))
    for record in sorted(plugins.enabled, key=lambda r: r.name):
        ep = record.entry_point
        out += _plugin_code(record.name, ep.value if ep is not None else None)
        cf = site.plugin(record.name).config_file
        if cf is not None:
            out.append(RootPath(f"plugin {record.name}'s config_file", str(cf), 0,
                                record.name, WHY_CONFIG))
    return list(dict.fromkeys(out))


#: The pbsplug package (its folders all checked).
_PBSPLUG = RootPath("the pbsplug package", str(Path(__file__).parent.parent), None)


def _interpreter_paths(python: str) -> list[RootPath]:
    out = [RootPath("the interpreter", python)]
    # Python reads pyvenv.cfg beside its executable, else one folder up (a venv's bin/..)
    exe_dir = os.path.dirname(os.path.abspath(python))
    out += [RootPath("the interpreter's pyvenv.cfg", os.path.join(d, "pyvenv.cfg"))
            for d in (exe_dir, os.path.dirname(exe_dir))]
    stdlib = os.path.dirname(os.__file__)  # (sysconfig's platstdlib is a venv's own lib)
    out += [RootPath("the standard library", folder, 1)
            for folder in (stdlib, os.path.join(stdlib, "lib-dynload"))]
    if os.path.abspath(python) == os.path.abspath(sys.executable):
        out += [RootPath("the standard library's zip file", zipped, 1)
                for zipped in _stdlib_zips()]
        out += [RootPath("the interpreter's libpython", lib) for lib in _libpython()]
    return out


#: What this process has mapped, each file by its path (Linux).
_MAPS = "/proc/self/maps"


def _libpython() -> list[str]:
    """The libpython this process's interpreter is linked to (a build with --enable-shared:
    sysconfig's LDLIBRARY and INSTSONAME in its LIBDIR, where the interpreter's run path
    finds it, and the file the loader mapped), none when it is not (Debian's python3 is
    built with Py_ENABLE_SHARED but links the library in). Where the maps cannot be read,
    LIBDIR's is checked all the same."""
    if not sysconfig.get_config_var("Py_ENABLE_SHARED"):
        return []
    try:
        with open(_MAPS, encoding="utf-8", errors="surrogateescape") as maps:
            lines = maps.read().splitlines()
    except OSError:
        lines = None
    mapped = []
    for line in lines or ():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and os.path.basename(fields[5]).startswith("libpython"):
            mapped.append(fields[5])
    if lines is not None and not mapped:
        return []
    libdir = sysconfig.get_config_var("LIBDIR")
    named = [os.path.join(libdir, str(name)) for name in (
        sysconfig.get_config_var("LDLIBRARY"), sysconfig.get_config_var("INSTSONAME"))
        if libdir and name]
    return list(dict.fromkeys(named + mapped))


def _stdlib_zips() -> list[str]:
    """The pythonXY.zip this process's interpreter put on sys.path (/usr/lib/python311.zip):
    it imports the standard library from it first, once it is there. One not there is
    checked where it would be made; another interpreter's are not this process's to say."""
    name = "python{}{}.zip".format(*sys.version_info[:2])
    return list(dict.fromkeys(os.path.abspath(entry) for entry in sys.path
                              if isinstance(entry, str) and os.path.basename(entry) == name))


def _site_dir_paths(site_dirs: Iterable[str], python: str) -> list[RootPath]:
    out = []
    for folder in dict.fromkeys([*site_dirs, *_interpreter_site_dirs(python)]):
        out.append(RootPath("a site folder root imports from", folder, 1))
        out += [RootPath(f"a path {pth} adds to sys.path", added, 1)
                for pth, added in _pth_folders(folder)]
    return out


def _plugin_code(name: str, entry_point: str | None) -> list[RootPath]:
    out = []
    for where in _module_paths(entry_point, name):
        if os.path.isdir(where):
            out.append(RootPath(f"plugin {name}'s code", where, None, name))
            continue
        # a module of one file: Python loads __pycache__/<name>.cpython-XY.pyc in its folder
        # in its place when the .py's mtime and size match (a package's folders are all
        # checked, its __pycache__ among them)
        out += [RootPath(f"plugin {name}'s code", where, 0, name),
                RootPath(f"plugin {name}'s compiled code",
                         os.path.join(os.path.dirname(where), "__pycache__"), 1, name)]
    return out


def installed_paths(config_file: str, site_dirs: Sequence[str]) -> list[RootPath]:
    """What a command run as root from an installed config (``pbsplug slurm periodic``)
    points root at before it puts the config's `site_dirs` on sys.path (their .pth files
    run then): the config itself (it names the plugins root imports), the interpreter
    running it with its standard library, each site folder and the folders its .pth files
    add, the pbsplug package. The plugins' packages: `installed_plugin_paths`, once the
    site folders are on sys.path."""
    return ([RootPath("the installed config", config_file, why=WHY_CONFIG)]
            + _interpreter_paths(sys.executable) + _site_dir_paths(site_dirs, sys.executable)
            + [_PBSPLUG])


def run_by(user: str, paths: Iterable[RootPath]) -> list[RootPath]:
    """`paths` as a command that `user` runs points `user` at them: what that user, not
    root, would do with each (``pbsplug slurm periodic`` run as SlurmUser, or the plugins
    it imports once root has become SlurmUser)."""
    whys = {WHY: f"{user} would run code from it", WHY_CONFIG: f"{user}'s hooks would do what "
            "it says"}
    return [replace(rp, why=whys.get(rp.why, rp.why)) for rp in paths]


def installed_plugin_paths(plugins: Any) -> list[RootPath]:
    """Each plugin's package an installed config names (name -> its ``entry_point``), where
    it would be imported from now (none for a config that is no mapping: loading it says
    what is wrong)."""
    out: list[RootPath] = []
    for name, spec in sorted(plugins.items() if isinstance(plugins, Mapping) else []):
        value = spec.get("entry_point") if isinstance(spec, Mapping) else None
        out += _plugin_code(str(name), str(value) if value else None)
    return out


def _interpreter_site_dirs(python: str) -> list[str]:
    """The site folders `python` (this process's interpreter, as both adapters name it)
    puts on sys.path itself, whichever install names (`site_dirs`): a worker's ``python -I``
    imports from them, before those, with their .pth files. Debian's python3 reads
    /usr/lib/python3/dist-packages too, and a venv made with --system-site-packages its base
    interpreter's site-packages. One not there yet is checked where it would be made (the
    interpreter adds it once it is). Another interpreter's are not this process's to say."""
    if os.path.abspath(python) != os.path.abspath(sys.executable):
        return []
    return list(site.getsitepackages())


def _pth_folders(folder: str) -> list[tuple[str, str]]:
    """(.pth file, path) for each path a .pth file in `folder` adds, as `site` reads them
    (a line that is not a comment nor an ``import``, relative to `folder`): a folder, a
    zip file (an egg), or one not there yet, which `site` adds once it is. `site` reads a
    .pth file that is a link at its target: read there too, once the link passes the check
    that refuses it otherwise (never another user's link, nor one to another user's file)."""
    out = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".pth"))
    except OSError:
        return []
    for name in names:
        path = os.path.join(folder, name)
        if os.path.islink(path):
            if safedirs.code_problem(path):
                continue  # (its folder's check says why)
            path = os.path.realpath(path)
        try:  # (never through a link, nor from a FIFO planted there: root reads it)
            with os.fdopen(safedirs.open_file(path), errors="replace") as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue  # (its own check says why)
        for line in lines:
            line = line.rstrip()
            if not line or line.startswith(("#", "import ", "import\t")):
                continue
            out.append((name, os.path.normpath(os.path.join(folder, line))))
    return out


def _module_paths(entry_point: str | None, name: str) -> list[str]:
    """Where a plugin's top-level package or module is (its folders, or its file), by its
    entry point's value."""
    value = entry_point or f"pbsplug_{name}"
    top = value.split(":", 1)[0].strip().split(".", 1)[0]
    module = sys.modules.get(top)
    spec = getattr(module, "__spec__", None) if module is not None else None
    if spec is None:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [str(p) for p in spec.submodule_search_locations]
    return [spec.origin] if spec.origin and os.path.isabs(spec.origin) else []


def unsafe(paths: Iterable[RootPath]) -> list[tuple[RootPath, str]]:
    """Each path another user could change, with why (`safedirs.code_problem`)."""
    out = []
    for rp in paths:
        problem = safedirs.code_problem(rp.path, rp.depth)
        if problem:
            out.append((rp, problem))
    return out


def message(command: str, rp: RootPath, problem: str, allow: str = f"give {ALLOW}") -> str:
    """Install's refusal, in one line (`allow`: how to go on all the same)."""
    return (f"{command}: refusing {rp.what} {rp.path}: {problem}; {rp.why}: make it and every "
            "folder above it root's and writable by no one else (a folder above them may be "
            f"sticky, as /tmp is), or {allow}")


def accepted(command: str, rp: RootPath, problem: str) -> str:
    """What `ALLOW` accepts, in one line."""
    return f"{command}: warning: accepted ({ALLOW}): {rp.what} {rp.path}: {problem}; {rp.why}"


def status_lines(found: Sequence[tuple[RootPath, str]], plugin: str) -> list[str]:
    """The problems that concern `plugin`'s hook or programs, for a status row."""
    return [f"{rp.what} {rp.path}: {problem}; {rp.why}" for rp, problem in found
            if rp.plugin in (None, plugin)]
