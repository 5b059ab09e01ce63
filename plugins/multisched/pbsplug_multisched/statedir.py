"""Who may change the state folder (``state_dir``) and the records in it.

The hook runs as root and acts on what its records say, so nobody else may be able to plant,
edit or replace them. The rule is the mjf plugin's for its base folders (sshd's StrictModes,
with the sticky bit allowed on the way, as in /tmp): every folder from / down to the state
folder, and every symlink followed on the way, is owned by root (or by the user this process
runs as), and no folder is writable by its group or by everyone, unless it is sticky and
above the state folder (others may not rename or remove what is not theirs in it). The state
folder itself may not be writable by others even when sticky: they could plant a record (or
the lock) before the hook makes it. A record or a lock is a plain file, owned as above and
writable by nobody else; a link is never followed.

This module is the same in the cpuset, power and multisched plugins, each its own copy:
plugins import no other plugin, and a shared helper in the kernel would need a new kernel API
version.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from pathlib import Path

#: The mode of a folder this module makes: everyone may read the records (the status
#: commands), only the owner may change them.
DIR_MODE = 0o755


class UnsafeStateDir(OSError):
    """The state folder, or a file in it, is one another user could change; the message
    names it, its owner and its mode, and what to do."""


def _trusted() -> set[int]:
    return {0, os.geteuid()}


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _whose() -> str:
    """Who may own the folders, for the messages."""
    euid = os.geteuid()
    return "root's" if euid == 0 else f"root's or {_owner(euid)}'s (who runs the hook)"


def _entry_problem(path: Path | str, info: os.stat_result, trusted: set[int],
                   others_may_add: bool) -> str | None:
    """Why another user could change what `path` (a folder, or a symlink on the way) leads
    to, or None. The text names its owner and mode."""
    owner = _owner(info.st_uid)
    if stat.S_ISLNK(info.st_mode):  # nobody changes a link; replacing it is its folder's
        return None if info.st_uid in trusted else f"{path} is a link owned by {owner}"
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    if info.st_uid not in trusted:
        return f"{path} is owned by {owner}, {mode}"
    if not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    who = "everyone" if info.st_mode & stat.S_IWOTH else "its group"
    if not info.st_mode & stat.S_ISVTX:
        return f"{path} is writable by {who} (owner {owner}, {mode})"
    if not others_may_add:
        return (f"{path} is writable by {who} (owner {owner}, {mode}): others may add "
                "files to it")
    return None


def folder_problem(folder: str | Path) -> str | None:
    """Why a user other than root (or this process's own) could plant or change what is in
    `folder`, or None when nobody could. Levels not made yet are left out (a sticky folder
    that exists may be the one the rest is made in)."""
    trusted = _trusted()
    path = Path(os.path.abspath(folder))
    real = Path(os.path.realpath(path))
    checks: dict[Path, bool] = {}  # a real folder -> whether others may add to it
    for directory in (real, *real.parents):
        checks.setdefault(directory, directory != real)
    for prefix in reversed((path, *path.parents)):
        if not prefix.is_symlink():
            continue
        try:
            info = prefix.lstat()
        except OSError:
            continue  # vanished: the real path's check stands
        problem = _entry_problem(prefix, info, trusted, True)
        if problem:
            return problem
        parent = Path(os.path.realpath(prefix.parent))
        for directory in (parent, *parent.parents):
            checks.setdefault(directory, True)
    for directory in sorted(checks, key=lambda p: len(p.parts)):
        try:
            info = directory.lstat()
        except (FileNotFoundError, NotADirectoryError):
            continue  # not made yet (or cannot be: making it says so)
        except OSError as exc:
            return f"{directory} cannot be checked: {exc.strerror or exc}"
        problem = _entry_problem(directory, info, trusted, checks[directory])
        if problem:
            return problem
    return None


def refused(folder: str | Path, problem: str) -> UnsafeStateDir:
    return UnsafeStateDir(
        f"refusing state_dir {folder}: {problem}, so another user could plant or change the "
        f"hook's records there; make it and every folder above it {_whose()} and writable "
        "by no one else (a folder above it may be sticky, as /tmp), or set state_dir to "
        "another folder")


def check_folder(folder: str | Path) -> Path:
    """`folder`, or `UnsafeStateDir` when another user could change what is in it."""
    problem = folder_problem(folder)
    if problem:
        raise refused(folder, problem)
    return Path(folder)


def ensure_folder(folder: str | Path) -> Path:
    """The state folder, made (0755, with its parents) when missing. `UnsafeStateDir` when
    another user could change what is in it: checked before anything is made, then level by
    level on each folder as it is opened (a descriptor: what is checked is what is used).
    Made by path (``mkdir -p``), a link another user put at a missing level (in /tmp)
    between the check and the making had root make folders where the link pointed."""
    path = Path(os.path.abspath(folder))
    check_folder(path)
    trusted = _trusted()
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        parts = path.parts[1:]
        for n, part in enumerate(parts):
            here = Path("/", *parts[:n + 1])
            try:
                os.mkdir(part, DIR_MODE, dir_fd=fd)
                made = True
            except FileExistsError:
                made = False
            sub = _open_level(fd, part, here, folder, trusted)
            os.close(fd)
            fd = sub
            if made:
                os.fchmod(fd, DIR_MODE)  # whatever the umask: 0775 would be refused next
            problem = _entry_problem(here, os.fstat(fd), trusted, n < len(parts) - 1)
            if problem:
                raise refused(folder, problem)
    finally:
        os.close(fd)
    return Path(folder)


def _open_level(parent: int, name: str, here: Path, folder: str | Path,
                trusted: set[int]) -> int:
    """The folder `name` in `parent`: through a link only when the link is root's (or this
    process's user's), as /var/run -> /run is."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOCTTY
    try:
        return os.open(name, flags | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
    link = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if not stat.S_ISLNK(link.st_mode):  # a file on the way: the folder cannot be made
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(here))
    if link.st_uid not in trusted:
        raise refused(folder, f"{here} is a link owned by {_owner(link.st_uid)}")
    return os.open(name, flags, dir_fd=parent)


def file_problem(info: os.stat_result) -> str | None:
    """Why a file (`info`: its fstat) is not one only the hook could have written, or
    None. One of another user's was left from before the folder was made safe."""
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    if not stat.S_ISREG(info.st_mode):
        return f"not a plain file ({mode})"
    if info.st_uid not in _trusted():
        return f"owned by {_owner(info.st_uid)}, {mode}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by others (owner {_owner(info.st_uid)}, {mode})"
    return None


def open_file(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> int:
    """A descriptor on the record or lock `path`, never through a link; `UnsafeStateDir`
    when it is not a plain file only the hook could have written (`file_problem`), which
    names it, its owner and its mode. `FileNotFoundError` when absent (without O_CREAT)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
                     | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise UnsafeStateDir(f"refusing {path}: a link, never followed; remove it") from None
    try:
        info = os.fstat(fd)
        problem = file_problem(info)
        if problem:
            raise UnsafeStateDir(f"refusing {path}: {problem}, so another user could have "
                                 "written it; remove it")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_text(path: str | Path) -> str:
    """The record's text (`open_file`'s checks). `FileNotFoundError` when absent."""
    with os.fdopen(open_file(path), encoding="utf-8") as handle:
        return handle.read()
