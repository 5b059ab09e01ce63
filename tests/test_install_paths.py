"""`pbsplug.safedirs.code_problem`: whether another user could change the code root would
run or import at a path (what the adapters' installs point root at)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pbsplug import safedirs

NOBODY = 65534
needs_root = pytest.mark.skipif(os.geteuid() != 0 and os.environ.get("CI") != "true",
                                reason="giving a file to another user needs root")



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


@needs_root
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


@needs_root
def test_a_link_of_another_users_is_refused(shared_tmp):
    pkg = _tree(shared_tmp / "t")
    os.symlink(pkg / "__init__.py", pkg / "link.py")
    assert safedirs.code_problem(pkg, None) is None
    os.lchown(pkg / "link.py", NOBODY, NOBODY)
    assert safedirs.code_problem(pkg, None) == (
        f"{pkg}/link.py is a link owned by uid {NOBODY} (nobody)")
