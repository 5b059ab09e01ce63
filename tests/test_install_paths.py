"""``pbsplug pbs install`` and ``pbsplug slurm install`` refuse to point root at code another
user could change: the interpreter (and every link to it), the site folders, the pbsplug
package, the plugins' packages, the site config (`pbsplug.adapters.rootpaths`, checked by
`pbsplug.safedirs.code_problem`). Without PBS or Slurm: qmgr is ``true``, scontrol a stand-in
that is never run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from pbsplug import safedirs

NOBODY = 65534

PLUGIN = """
from pbsplug import PluginInfo, hookimpl

plugin_info = PluginInfo(events=("execjob_begin",))


@hookimpl
def execjob_begin(event):
    pass
"""
FIX = ("make it and every folder above it root's and writable by no one else (a folder "
       "above them may be sticky, as /tmp is), or give --allow-unsafe-paths")


def _tree(top: Path) -> Path:
    """A package as pip lays it out, root's: folders 0755, files 0644."""
    pkg = top / "lib" / "pkg"
    (pkg / "sub").mkdir(parents=True)
    for path in (top, top / "lib", pkg, pkg / "sub"):
        path.chmod(0o755)
    for path in (pkg / "__init__.py", pkg / "sub" / "deep.py"):
        path.write_text("x = 1\n")
        path.chmod(0o644)
    return pkg


# -- the walker ----------------------------------------------------------------------------

def test_a_tree_of_roots_passes(shared_tmp):
    pkg = _tree(shared_tmp / "t")
    assert safedirs.code_problem(pkg, None) is None
    assert safedirs.code_problem(pkg / "sub" / "deep.py") is None


@pytest.mark.usefixtures("needs_root")
def test_a_file_or_folder_of_another_users_is_refused(shared_tmp):
    pkg = _tree(shared_tmp / "t")
    os.chown(pkg / "sub" / "deep.py", NOBODY, NOBODY)
    assert safedirs.code_problem(pkg, None) == (
        f"{pkg}/sub/deep.py is owned by uid {NOBODY} (nobody), mode 0644")
    assert safedirs.code_problem(pkg, 1) is None  # (only its own entries: sub is root's)
    os.chown(pkg / "sub" / "deep.py", 0, 0)
    os.chown(shared_tmp / "t" / "lib", NOBODY, NOBODY)  # a folder above: they may rename pkg
    assert safedirs.code_problem(pkg / "__init__.py") == (
        f"{shared_tmp}/t/lib is owned by uid {NOBODY} (nobody), mode 0755")


def test_the_compiled_modules_of_the_last_level_checked_are_checked(shared_tmp):
    """A folder checked to a depth (a site folder, the standard library: its entries) has
    its __pycache__'s entries checked too: Python runs a module's .pyc from there in its
    place. Only the __pycache__ folder itself was checked."""
    lib = _tree(shared_tmp / "t").parent
    (lib / "mod.py").write_text("x = 1\n")
    (lib / "mod.py").chmod(0o644)
    cache = lib / "__pycache__"
    cache.mkdir()
    cache.chmod(0o755)
    compiled = cache / f"mod.{sys.implementation.cache_tag}.pyc"
    compiled.write_bytes(b"")
    compiled.chmod(0o644)
    assert safedirs.code_problem(lib, 1) is None
    compiled.chmod(0o666)
    assert safedirs.code_problem(lib, 1) == (
        f"{compiled} is writable by others (owner uid 0 (root), mode 0666)")
    assert safedirs.code_problem(lib, 0) is None  # (the folder alone)


@pytest.mark.parametrize("mode,who", [(0o775, "its group"), (0o757, "everyone")])
def test_a_folder_others_may_write_is_refused(shared_tmp, mode, who):
    pkg = _tree(shared_tmp / "t")
    (pkg / "sub").chmod(mode)
    assert safedirs.code_problem(pkg, None) == (
        f"{pkg}/sub is writable by {who} (owner uid 0 (root), mode {mode:04o})")
    (pkg / "sub").chmod(0o755)
    (pkg / "__init__.py").chmod(0o664)
    assert safedirs.code_problem(pkg / "__init__.py") == (
        f"{pkg}/__init__.py is writable by others (owner uid 0 (root), mode 0664)")


def test_a_sticky_folder_may_be_above_but_not_hold_the_code(shared_tmp):
    sticky = shared_tmp / "tmp"
    sticky.mkdir()
    sticky.chmod(0o1777)  # as /tmp
    pkg = _tree(sticky / "t")  # its child is root's and 0755: nobody else may change it
    assert safedirs.code_problem(pkg, None) is None
    (sticky / "mod.py").write_text("x = 1\n")  # a module in /tmp: anyone may add one beside
    assert safedirs.code_problem(sticky / "mod.py") == (
        f"{sticky} is writable by everyone (owner uid 0 (root), mode 1777): others may add "
        "files to it")
    # not there yet: where it would be made counts
    assert safedirs.code_problem(pkg / "missing" / "site") is None
    assert safedirs.code_problem(sticky / "missing" / "site") == (
        f"{sticky} is writable by everyone (owner uid 0 (root), mode 1777): others may add "
        "files to it")


def test_a_link_to_an_interpreter_in_a_folder_others_may_write_is_refused(shared_tmp):
    """A venv's bin/python is a link to the interpreter it was made from: the folder of the
    link and the folder of every target on the way are checked."""
    bin_dir = shared_tmp / "venv" / "bin"
    real = shared_tmp / "opt" / "bin"
    for folder in (bin_dir, real):
        folder.mkdir(parents=True)
        folder.chmod(0o755)
    (real / "python3.11").write_text("#!/bin/sh\n")
    (real / "python3.11").chmod(0o755)
    os.symlink("python3.11", real / "python3")
    os.symlink(real / "python3", bin_dir / "python")
    assert safedirs.code_problem(bin_dir / "python") is None
    real.chmod(0o777)
    assert safedirs.code_problem(bin_dir / "python") == (
        f"{real} is writable by everyone (owner uid 0 (root), mode 0777)")
    real.chmod(0o755)
    (shared_tmp / "venv").chmod(0o775)  # above the link's folder: they may rename bin
    assert safedirs.code_problem(bin_dir / "python") == (
        f"{shared_tmp}/venv is writable by its group (owner uid 0 (root), mode 0775)")


def test_a_link_whose_target_goes_back_out_of_a_link_is_refused(shared_tmp):
    """bin/python -> sub/l/../python3, sub/l a link to other/deep: the system runs
    other/python3, in a folder everyone may write, where the check, reading '..' as
    written, looked at bin/sub/python3 (not there, in root's folder) and passed."""
    top = shared_tmp / "t"
    for folder in (top / "bin" / "sub", top / "other" / "deep"):
        folder.mkdir(parents=True)
    for folder in (top, top / "bin", top / "bin" / "sub", top / "other" / "deep"):
        folder.chmod(0o755)
    (top / "other").chmod(0o777)
    (top / "other" / "python3").write_text("#!/bin/sh\n")
    os.symlink(top / "other" / "deep", top / "bin" / "sub" / "l")
    os.symlink("sub/l/../python3", top / "bin" / "python")
    assert safedirs.code_problem(top / "bin" / "python") == (
        f"{top}/bin/python is a link to sub/l/../python3, whose '..' after a link names "
        "another folder than the one written; name the target without '..'")


@pytest.mark.usefixtures("needs_root")
def test_a_link_of_another_users_is_refused(shared_tmp):
    pkg = _tree(shared_tmp / "t")
    os.symlink(pkg / "__init__.py", pkg / "link.py")
    assert safedirs.code_problem(pkg, None) is None
    os.lchown(pkg / "link.py", NOBODY, NOBODY)
    assert safedirs.code_problem(pkg, None) == (
        f"{pkg}/link.py is a link owned by uid {NOBODY} (nobody)")


# -- what install points root at ------------------------------------------------------------

def _refusals(home: Path, python: str = sys.executable,
              site_dirs: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    """(what, path, problem) for each path install would refuse, with no plugin enabled,
    for the interpreter `python` and the site folders `site_dirs`."""
    from pbsplug.adapters import rootpaths
    from pbsplug.plugins import load_plugins
    from pbsplug.siteconfig import SiteConfig

    plugins = load_plugins(SiteConfig(path=home / "site.toml"), env={})
    return [(rp.what, rp.path, problem) for rp, problem in
            rootpaths.unsafe(rootpaths.root_paths(plugins, python, list(site_dirs)))]


def test_install_checks_the_interpreter_it_names(shared_tmp, home):
    from pbsplug.adapters import rootpaths
    from pbsplug.plugins import load_plugins
    from pbsplug.siteconfig import SiteConfig

    python = shared_tmp / "bin" / "python"
    python.parent.mkdir()
    python.parent.chmod(0o777)
    os.symlink(sys.executable, python)
    plugins = load_plugins(SiteConfig(path=home / "site.toml"), env={})
    found = rootpaths.unsafe(rootpaths.root_paths(plugins, str(python), []))
    assert [(rp.what, problem) for rp, problem in found] == [
        ("the interpreter", f"{python.parent} is writable by everyone (owner uid 0 (root), "
                            "mode 0777)"),
        ("the interpreter's pyvenv.cfg", f"{python.parent} is writable by everyone (owner "
                                         "uid 0 (root), mode 0777)")]
    assert rootpaths.message("pbs install", *found[0]) == (
        f"pbs install: refusing the interpreter {python}: {python.parent} is writable by "
        f"everyone (owner uid 0 (root), mode 0777); root would run code from it: {FIX}")


def test_install_checks_the_site_folders_the_interpreter_reads_itself(shared_tmp, home,
                                                                     monkeypatch):
    """A site folder the interpreter puts on sys.path itself (Debian's
    /usr/lib/python3/dist-packages, a --system-site-packages venv's base site-packages) is
    checked though install was given none: a worker's ``python -I`` imports from it."""
    import site

    dist_packages = shared_tmp / "dist-packages"
    dist_packages.mkdir()
    dist_packages.chmod(0o777)
    monkeypatch.setattr(site, "getsitepackages", lambda: [str(dist_packages)])
    assert _refusals(home) == [
        ("a site folder root imports from", str(dist_packages),
         f"{dist_packages} is writable by everyone (owner uid 0 (root), mode 0777)")]
    # (another interpreter's are not this process's to say)
    assert _refusals(home, "/usr/bin/true") == []


def test_install_checks_the_standard_librarys_zip_file(shared_tmp, home, monkeypatch):
    """The interpreter puts pythonXY.zip on sys.path before its standard library's folder
    (/usr/lib/python311.zip) and imports from it once it is there: checked as a file where
    it is, else where it would be made. It was not checked."""
    lib = shared_tmp / "lib"
    lib.mkdir()
    lib.chmod(0o777)
    zipped = lib / "python{}{}.zip".format(*sys.version_info[:2])
    monkeypatch.setattr(sys, "path", [str(zipped), *sys.path])
    assert _refusals(home) == [
        ("the standard library's zip file", str(zipped),
         f"{lib} is writable by everyone (owner uid 0 (root), mode 0777)")]
    lib.chmod(0o755)
    assert _refusals(home) == []
    zipped.write_bytes(b"PK")
    zipped.chmod(0o664)
    assert _refusals(home) == [
        ("the standard library's zip file", str(zipped),
         f"{zipped} is writable by others (owner uid 0 (root), mode 0664)")]
    # (another interpreter's are not this process's to say)
    assert _refusals(home, "/usr/bin/true") == []


def test_install_checks_the_libpython_the_interpreter_is_linked_to(shared_tmp, home,
                                                                   monkeypatch):
    """A build with --enable-shared runs libpython (sysconfig's LDLIBRARY, INSTSONAME in
    LIBDIR) as root with every hook: checked when the interpreter is linked to it (this
    process has it mapped), or when that cannot be told. It was not checked."""
    import sysconfig

    from pbsplug.adapters import rootpaths

    lib = shared_tmp / "lib"
    lib.mkdir()
    lib.chmod(0o755)
    shared = lib / "libpython3.11.so.1.0"
    shared.write_bytes(b"")
    shared.chmod(0o755)
    os.symlink(shared.name, lib / "libpython3.11.so")
    fake = {"Py_ENABLE_SHARED": 1, "LIBDIR": str(lib), "LDLIBRARY": "libpython3.11.so",
            "INSTSONAME": "libpython3.11.so.1.0"}
    real = sysconfig.get_config_var
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: fake.get(name, real(name)))
    maps = shared_tmp / "maps"
    maps.write_text(f"7f0-7f1 r--p 00000000 fd:01 4242                       {shared}\n"
                    "7f2-7f3 r-xp 00000000 fd:01 4243                       /usr/lib/libc.so.6\n")
    monkeypatch.setattr(rootpaths, "_MAPS", str(maps), raising=False)
    assert _refusals(home) == []
    shared.chmod(0o775)
    problem = f"{shared} is writable by others (owner uid 0 (root), mode 0775)"
    assert _refusals(home) == [
        ("the interpreter's libpython", f"{lib}/libpython3.11.so", problem),
        ("the interpreter's libpython", str(shared), problem)]
    maps.write_text("7f2-7f3 r-xp 00000000 fd:01 4243      /usr/lib/libc.so.6\n")
    # (linked in, as Debian's python3 is: the library is not run)
    assert _refusals(home) == []
    monkeypatch.setattr(rootpaths, "_MAPS", str(shared_tmp / "none"), raising=False)
    assert len(_refusals(home)) == 2  # (not to be told: checked)
    fake["Py_ENABLE_SHARED"] = 0
    assert _refusals(home) == []
    # (another interpreter's is not this process's to say)
    fake["Py_ENABLE_SHARED"] = 1
    assert _refusals(home, "/usr/bin/true") == []


def test_what_a_pth_line_adds_is_checked_though_no_folder_is_there(shared_tmp, home):
    """A .pth line adds to sys.path whatever is there at start-up: a zip file (an egg),
    or a folder made later by whoever may make it. Only folders there at install were
    checked."""
    site_dir, shared = shared_tmp / "site", shared_tmp / "shared"
    for folder in (site_dir, shared):
        folder.mkdir()
    site_dir.chmod(0o755)
    shared.chmod(0o1777)  # (as /tmp)
    egg = shared_tmp / "x.egg"
    egg.write_bytes(b"PK")
    egg.chmod(0o666)
    (site_dir / "eggs.pth").write_text(f"# a comment\nimport os\n{egg}\n{shared}/later\n")
    (site_dir / "eggs.pth").chmod(0o644)
    assert [found for found in _refusals(home, "/usr/bin/true", (str(site_dir),))
            if found[0].startswith("a path eggs.pth")] == [
        ("a path eggs.pth adds to sys.path", str(egg),
         f"{egg} is writable by others (owner uid 0 (root), mode 0666)"),
        ("a path eggs.pth adds to sys.path", f"{shared}/later",
         f"{shared} is writable by everyone (owner uid 0 (root), mode 1777): others may "
         "add files to it")]


def _refusals_without_hanging(site_dir: Path, home: Path,
                              fifo: Path | None = None) -> list[tuple[str, str, str]]:
    """`_refusals` with the site folder `site_dir`. Root reading `fifo` (a FIFO) would
    block until someone opened it to write: run in a thread, as a hang guard only, and
    released if it hangs (a failure)."""
    import threading

    found: list[tuple[str, str, str]] = []

    def check() -> None:
        found.extend(_refusals(home, "/usr/bin/true", (str(site_dir),)))

    worker = threading.Thread(target=check, daemon=True)
    worker.start()
    worker.join(60)
    if worker.is_alive():
        if fifo is not None:
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # (its reader sees the end)
            worker.join()
        pytest.fail(f"the check of {site_dir} hung")
    return found


def test_a_fifo_planted_as_a_pth_file_is_refused_not_read(shared_tmp, home):
    """A FIFO ``x.pth`` in a site folder hung install and status as root (reading a .pth
    file to find what it adds) before the folder's check could refuse it."""
    site_dir = shared_tmp / "site"
    site_dir.mkdir()
    site_dir.chmod(0o755)
    os.mkfifo(site_dir / "x.pth", 0o644)
    assert _refusals_without_hanging(site_dir, home, site_dir / "x.pth") == [
        ("a site folder root imports from", str(site_dir),
         f"{site_dir}/x.pth is not a plain file (mode 0644)")]
    site_dir.chmod(0o777)  # (as a user who may write there would plant it)
    assert _refusals_without_hanging(site_dir, home, site_dir / "x.pth") == [
        ("a site folder root imports from", str(site_dir),
         f"{site_dir} is writable by everyone (owner uid 0 (root), mode 0777)")]


@pytest.mark.usefixtures("needs_root")
def test_a_pth_link_of_another_users_is_refused_not_followed(shared_tmp, home):
    """A .pth file that is another user's link, to a FIFO of theirs: the link is refused
    and not followed (root reading through it hung as on a FIFO)."""
    site_dir, theirs = shared_tmp / "site", shared_tmp / "theirs"
    for folder in (site_dir, theirs):
        folder.mkdir()
        folder.chmod(0o755)
    os.mkfifo(theirs / "fifo", 0o644)
    os.symlink(theirs / "fifo", site_dir / "y.pth")
    os.lchown(site_dir / "y.pth", NOBODY, NOBODY)
    assert _refusals_without_hanging(site_dir, home, theirs / "fifo") == [
        ("a site folder root imports from", str(site_dir),
         f"{site_dir}/y.pth is a link owned by uid {NOBODY} (nobody)")]


def test_what_a_pth_link_of_roots_adds_is_checked(shared_tmp, home):
    """`site` reads a .pth file that is a link at its target (a link of root's to a file of
    root's passes the check): what that adds to sys.path is checked too. Reading no .pth
    file through a link left it unchecked."""
    site_dir, lib, shared = shared_tmp / "site", shared_tmp / "lib", shared_tmp / "shared"
    for folder in (site_dir, lib, shared):
        folder.mkdir()
        folder.chmod(0o755)
    shared.chmod(0o1777)  # (as /tmp)
    (lib / "real.pth").write_text(f"{shared}/later\n")
    (lib / "real.pth").chmod(0o644)
    os.symlink(lib / "real.pth", site_dir / "z.pth")
    assert _refusals_without_hanging(site_dir, home) == [
        ("a path z.pth adds to sys.path", f"{shared}/later",
         f"{shared} is writable by everyone (owner uid 0 (root), mode 1777): others may "
         "add files to it")]


def _refused(done, command: str, what: str, path, problem: str,
             why: str = "root would run code from it") -> None:
    """`done` is install's one-line refusal of `path`."""
    assert done.returncode == 2
    assert done.stderr == (f"pbsplug: error: {command} install: refusing {what} {path}: "
                           f"{path} {problem}; {why}: {FIX}\n")


def _site(dists, home: Path) -> None:
    dists.add("probe", PLUGIN)
    (home / "site.toml").write_text("[plugins.probe]\nenabled = true\n")
    dists.root.chmod(0o755)


def test_pbs_install_refuses_a_site_folder_others_may_write(cli, dists, home):
    _site(dists, home)
    args = ("pbs", "install", "--qmgr", "true", "--site-dir", str(dists.root))
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    dists.root.chmod(0o775)
    done = cli(*args)
    _refused(done, "pbs", "a site folder root imports from", dists.root,
             "is writable by its group (owner uid 0 (root), mode 0775)")
    assert "create hook" not in done.stdout
    done = cli(*args, "--allow-unsafe-paths")
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(
        f"pbs install: warning: accepted (--allow-unsafe-paths): a site folder root imports "
        f"from {dists.root}: {dists.root} is writable by its group (owner uid 0 (root), mode "
        "0775); root would run code from it\n")
    assert "create hook pbsplug_probe" in done.stdout
    status = cli("pbs", "status", "--qmgr", "true", "--site-dir", str(dists.root))
    assert (f"    unsafe: a site folder root imports from {dists.root}: {dists.root} is "
            "writable by its group") in status.stdout


@pytest.mark.usefixtures("needs_root")
def test_pbs_install_refuses_a_plugin_of_another_users(cli, dists, home):
    _site(dists, home)
    module = dists.root / "pbsplug_probe.py"
    os.chown(module, NOBODY, NOBODY)
    done = cli("pbs", "install", "--qmgr", "true")  # (imported from PYTHONPATH here)
    _refused(done, "pbs", "plugin probe's code", module,
             f"is owned by uid {NOBODY} (nobody), mode 0644")


@pytest.mark.usefixtures("needs_root")
def test_pbs_install_refuses_a_plugin_modules_compiled_code_of_another_users(cli, dists,
                                                                               home):
    """A plugin of one module: Python runs __pycache__/<name>.cpython-XY.pyc in its folder
    in the module's place when the .py's mtime and size match, so a user who may write that
    folder or that file runs code as root. Only the .py was checked."""
    _site(dists, home)
    cache = dists.root / "__pycache__"
    cache.mkdir(exist_ok=True)
    cache.chmod(0o777)
    done = cli("pbs", "install", "--qmgr", "true")
    _refused(done, "pbs", "plugin probe's compiled code", cache,
             "is writable by everyone (owner uid 0 (root), mode 0777)")
    cache.chmod(0o755)
    compiled = cache / f"pbsplug_probe.{sys.implementation.cache_tag}.pyc"
    compiled.write_bytes(b"")
    os.chown(compiled, NOBODY, NOBODY)
    done = cli("pbs", "install", "--qmgr", "true")
    assert done.returncode == 2
    assert done.stderr.startswith(
        f"pbsplug: error: pbs install: refusing plugin probe's compiled code {cache}: "
        f"{compiled} is owned by uid {NOBODY} (nobody), mode 0644; ")
    compiled.unlink()
    done = cli("pbs", "install", "--qmgr", "true")
    assert done.returncode == 0, done.stderr


def test_pbs_install_refuses_a_site_config_others_may_write(cli, dists, home):
    _site(dists, home)
    (home / "site.toml").chmod(0o646)
    done = cli("pbs", "install", "--qmgr", "true")
    _refused(done, "pbs", "the site config", f"{home}/site.toml",
             "is writable by others (owner uid 0 (root), mode 0646)",
             "root's hooks would do what it says")


@pytest.mark.usefixtures("needs_root")
def test_slurm_install_refuses_a_slurm_command_of_another_users(cli, dists, home, tmp_path):
    _site(dists, home)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nexit 1\n")  # (never run here)
    (bin_dir / "scontrol").chmod(0o755)
    (tmp_path / "slurm.conf").write_text("")
    args = ("slurm", "install", "--no-native", "--dir", str(tmp_path / "programs"),
            "--bin-dir", str(bin_dir), "--slurm-conf", str(tmp_path / "slurm.conf"),
            "--state-dir", str(tmp_path / "state"), "--log-file", str(tmp_path / "log"),
            "--run-dir", str(tmp_path / "run"), "--site-dir", str(dists.root))
    os.chown(bin_dir / "scontrol", NOBODY, NOBODY)
    done = cli(*args)
    _refused(done, "slurm", "Slurm's scontrol", f"{bin_dir}/scontrol",
             f"is owned by uid {NOBODY} (nobody), mode 0755")
    assert not (tmp_path / "programs").exists()  # refused before anything was written
    os.chown(bin_dir / "scontrol", 0, 0)
    done = cli(*args)
    assert done.returncode == 0, done.stderr
    assert f"wrote {tmp_path}/programs/prolog" in done.stdout


def test_slurm_periodic_refuses_what_install_refuses(cli, dists, home, tmp_path):
    """'pbsplug slurm periodic', run as root from a timer, reads the installed config (any
    --dir) and imports its site folders and plugins: it did so with no check, so a config,
    a site folder or a plugin another user could change ran their code as root. It refuses
    as install does, in one line, unless install was given --allow-unsafe-paths (the config
    records it), and then prints each path it accepts."""
    _site(dists, home)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "scontrol").chmod(0o755)
    (tmp_path / "slurm.conf").write_text("")
    programs = tmp_path / "programs"
    install = ("slurm", "install", "--no-native", "--dir", str(programs),
               "--bin-dir", str(bin_dir), "--slurm-conf", str(tmp_path / "slurm.conf"),
               "--state-dir", str(tmp_path / "state"), "--log-file", str(tmp_path / "log"),
               "--run-dir", str(tmp_path / "run"), "--site-dir", str(dists.root))
    done = cli(*install)
    assert done.returncode == 0, done.stderr
    config = programs / "pbsplug-slurm.json"
    assert "allow_unsafe_paths" not in config.read_text()
    periodic = ("slurm", "periodic", "--dir", str(programs))
    how = "run 'pbsplug slurm install --allow-unsafe-paths' (its config then says so)"
    fix = FIX.replace("give --allow-unsafe-paths", how)
    dists.root.chmod(0o775)
    done = cli(*periodic)
    assert done.returncode == 2
    assert done.stderr == (
        f"pbsplug: error: slurm periodic: refusing a site folder root imports from "
        f"{dists.root}: {dists.root} is writable by its group (owner uid 0 (root), mode "
        f"0775); root would run code from it: {fix}\n")
    dists.root.chmod(0o755)
    config.chmod(0o646)
    done = cli(*periodic)
    assert done.returncode == 2
    assert done.stderr == (
        f"pbsplug: error: slurm periodic: refusing the installed config {config}: {config} "
        "is writable by others (owner uid 0 (root), mode 0646); root's hooks would do what "
        f"it says: {fix}\n")
    config.chmod(0o600)
    if os.geteuid() == 0:  # a plugin found on sys.path (PYTHONPATH here), no site folder
        text = config.read_text()
        data = json.loads(text)
        data["site_dirs"].remove(str(dists.root))
        config.write_text(json.dumps(data))
        module = dists.root / "pbsplug_probe.py"
        os.chown(module, NOBODY, NOBODY)
        done = cli(*periodic)
        assert done.returncode == 2
        assert done.stderr.startswith(
            f"pbsplug: error: slurm periodic: refusing plugin probe's code {module}: {module} "
            f"is owned by uid {NOBODY} (nobody), mode 0644; root would run code from it")
        os.chown(module, 0, 0)
        config.write_text(text)
    # Installed with --allow-unsafe-paths: periodic goes on, and says what it accepts.
    dists.root.chmod(0o775)
    done = cli(*install, "--allow-unsafe-paths")
    assert done.returncode == 0, done.stderr
    assert '"allow_unsafe_paths": true' in config.read_text()
    done = cli(*periodic)
    assert "refusing" not in done.stderr and "Traceback" not in done.stderr
    assert f"{bin_dir}/scontrol show config: exit status 1" in done.stderr  # (it ran on)
    assert done.stderr.startswith(
        f"slurm periodic: warning: accepted (--allow-unsafe-paths): a site folder root "
        f"imports from {dists.root}: {dists.root} is writable by its group (owner uid 0 "
        "(root), mode 0775); root would run code from it\n"), done.stderr


@pytest.mark.usefixtures("needs_root")
def test_slurm_periodic_names_the_user_that_would_run_the_code_it_refuses(cli, dists, home,
                                                                          tmp_path):
    """Run as root with a SlurmUser that is not root, 'pbsplug slurm periodic' imports the
    plugins only once it has become SlurmUser: its refusal of a plugin's code said "root
    would run code from it". It names SlurmUser now; a site folder, whose .pth files run
    before the switch, is still root's to run. (The plugin is found on sys.path,
    PYTHONPATH here, as in the test above: in a site folder, that folder's own check, run
    first, refuses it.)"""
    _site(dists, home)
    programs = tmp_path / "programs"
    programs.mkdir()
    config = {"installed_by": "pbsplug slurm install", "site_dirs": [],
              "plugins": {"probe": {"entry_point": "pbsplug_probe"}},
              "log_file": str(tmp_path / "log"), "state_dir": str(tmp_path / "state"),
              "slurm_user": {"name": "nobody", "home": str(tmp_path / "su"),
                             "log_file": str(tmp_path / "su" / "log")}}
    (programs / "pbsplug-slurm.json").write_text(json.dumps(config))
    module = dists.root / "pbsplug_probe.py"
    module.chmod(0o646)
    how = "run 'pbsplug slurm install --allow-unsafe-paths' (its config then says so)"
    fix = FIX.replace("give --allow-unsafe-paths", how)
    done = cli("slurm", "periodic", "--dir", str(programs))
    assert done.returncode == 2
    assert done.stderr == (
        f"pbsplug: error: slurm periodic: refusing plugin probe's code {module}: {module} is "
        "writable by others (owner uid 0 (root), mode 0646); nobody would run code from it: "
        f"{fix}\n")
    module.chmod(0o644)
    config["site_dirs"] = [str(dists.root)]
    (programs / "pbsplug-slurm.json").write_text(json.dumps(config))
    dists.root.chmod(0o775)
    done = cli("slurm", "periodic", "--dir", str(programs))
    assert done.returncode == 2
    assert "; root would run code from it: " in done.stderr
    assert done.stderr.startswith(
        f"pbsplug: error: slurm periodic: refusing a site folder root imports from "
        f"{dists.root}: ")
