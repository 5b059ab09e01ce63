"""Folders and files only root could have changed: where a hook that runs as root keeps what
it acts on (its records, its lock, the folders it serves), so that no other user can plant,
edit or replace them (kernel API 1.6).

The rule is sshd's StrictModes for a user's key files, with the sticky bit allowed on the
way as in /tmp: every folder from / down to the folder, and every symlink followed on the
way, is owned by root (or by the user this process runs as), and no folder is writable by
its group or by everyone, unless it is sticky and above the folder (others may not rename or
remove what is not theirs in it). The folder itself may not be writable by others even when
sticky (`whole`, the default): they could plant a file in it before the hook makes it. A
file is a plain file, owned as above and writable by nobody else; a link to it is never
followed.

Root reading what another user's programs keep (a command of root's reading the records a
plugin's hooks wrote as a batch system's service user, `pbsplug.hook_home`) names that user
(``owner=uid``): the folders on the way, and the files read, may then be that user's too,
still writable by no one else; a link on the way is followed only when it is root's and
no folder of that user's is above it, and the file is opened level by level from ``/``,
each folder through its parent's descriptor, so that the user cannot swap a folder for a
link between the check and the read, and `read_text` reads no more than `OTHERS_FILE_MAX`
bytes of it (a sparse file of any size costs that user nothing). Only for reading: root
writes nothing there.

A plugin wraps `UnsafeFolder` in its own error, which says what the folder is for::

    from pbsplug import jsontext, safedirs

    try:
        safedirs.ensure_folder(config["state_dir"], "state_dir")
        data = jsontext.loads(safedirs.read_text(path), str(path), expect=dict)
    except (safedirs.UnsafeFolder, jsontext.JsonError) as exc:  # one line each
        raise HostError(str(exc)) from None
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import stat
import tempfile
from pathlib import Path

__all__ = ["DIR_MODE", "OTHERS_FILE_MAX", "UnsafeFolder", "check_folder", "ensure_folder",
           "file_problem", "folder_problem", "open_file", "read_text", "write_text"]

#: The mode of a folder `ensure_folder` makes: everyone may read what is in it (a status
#: command, a job reading its features), only the owner may change it.
DIR_MODE = 0o755


class UnsafeFolder(OSError):
    """A folder, or a file in it, that another user could change. `str(exc)` is one line
    naming it, why (its owner and mode) and what to do; `problem` is the why alone."""

    def __init__(self, message: str, problem: str = ""):
        super().__init__(message)
        self.problem = problem or message

    def __str__(self) -> str:
        return str(self.args[0])


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
    return "root's" if euid == 0 else f"root's or {_owner(euid)}'s (who runs this)"


def _refused(what: str, folder: str | Path, problem: str,
             owner: int | None = None) -> UnsafeFolder:
    make = (f"it and every folder above it {_whose()} and writable by no one else"
            if owner is None else f"it {_owner(owner)}'s and every folder above it root's, "
            "each writable by no one else")
    return UnsafeFolder(
        f"refusing {what} {folder}: {problem}, so another user could plant or change what "
        f"is in it; make {make} (a folder above it may be sticky, as /tmp is), or choose "
        "another folder", problem)


def _entry_problem(path: Path | str, info: os.stat_result, trusted: set[int],
                   others_may_add: bool) -> str | None:
    """Why another user could change what `path` (a folder, or a symlink on the way) leads
    to, or None. The text names its owner and mode."""
    # (The owner's name is looked up only for a message: a user database lookup per level
    # was most of a check's cost, and a replay checks a state folder thousands of times.)
    if stat.S_ISLNK(info.st_mode):  # nobody changes a link; replacing it is its folder's
        return None if info.st_uid in trusted else (
            f"{path} is a link owned by {_owner(info.st_uid)}")
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    if info.st_uid not in trusted:
        return f"{path} is owned by {_owner(info.st_uid)}, {mode}"
    if not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    if info.st_mode & stat.S_ISVTX and others_may_add:
        return None
    who = "everyone" if info.st_mode & stat.S_IWOTH else "its group"
    writable = f"{path} is writable by {who} (owner {_owner(info.st_uid)}, {mode})"
    return writable if not info.st_mode & stat.S_ISVTX else (
        f"{writable}: others may add files to it")


def folder_problem(folder: str | Path, *, whole: bool = True,
                   owner: int | None = None) -> str | None:
    """Why a user other than root (or this process's own) could plant or change what is in
    `folder`, or None when nobody could. Without `whole`, the folder itself may be sticky
    and writable by others (only what is in it on the way counts). Levels not made yet are
    left out (a sticky folder that exists may be the one the rest is made in). `owner` (a
    uid): the folders on the way may be that user's too, though no link of theirs (read,
    not written: the module's docstring)."""
    return _folder_check(folder, whole, owner)[0]


def _folder_check(folder: str | Path, whole: bool,
                  owner: int | None = None) -> tuple[str | None, bool]:
    """`folder_problem`, and whether every level was there, a folder: then nothing is left
    to make, and no one else can change any level (each is root's or this user's, in a
    folder no one else may write, or sticky). Paths are plain strings here, not pathlib's
    objects, which were most of a check's cost: a replay's power hook checks its state
    folder at every run."""
    trusted = _trusted()
    path = os.path.abspath(folder)
    real = os.path.realpath(path)
    checks: dict[str, bool] = {}  # a real folder -> whether others may add to it
    for directory in _and_parents(real):
        checks.setdefault(directory, directory != real or not whole)
    for prefix in reversed(_and_parents(path)):
        try:
            info = os.lstat(prefix)
        except OSError as exc:
            if exc.errno in _NOT_THERE:
                continue  # (not a link: as `Path.is_symlink` answers)
            raise
        except ValueError:
            continue
        if not stat.S_ISLNK(info.st_mode):
            continue
        problem = _entry_problem(prefix, info, trusted, True)
        if problem:
            return problem, False
        for directory in _and_parents(os.path.realpath(os.path.dirname(prefix))):
            checks.setdefault(directory, True)
    complete = True
    # (from / down: a real path's levels are its slashes, "/" one)
    for directory in sorted(checks, key=lambda p: p.count("/") if p != "/" else 0):
        try:
            info = os.lstat(directory)
        except (FileNotFoundError, NotADirectoryError):
            complete = False
            continue  # not made yet (or cannot be: making it says so)
        except OSError as exc:
            return f"{directory} cannot be checked: {exc.strerror or exc}", False
        problem = _entry_problem(directory, info, trusted | (
            {owner} if owner is not None and not stat.S_ISLNK(info.st_mode) else set()),
            checks[directory])
        if problem:
            return problem, False
        complete = complete and stat.S_ISDIR(info.st_mode)
    return None, complete


#: What `Path.is_symlink` reads as "no link there" rather than an error.
_NOT_THERE = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP})


def _and_parents(path: str) -> list[str]:
    """`path` (absolute, normalized) and each folder above it, up to /."""
    out = [path]
    while True:
        parent = os.path.dirname(path)
        if parent == path:
            return out
        out.append(parent)
        path = parent


def check_folder(folder: str | Path, what: str = "folder", owner: int | None = None) -> Path:
    """`folder`, or `UnsafeFolder` when another user could change what is in it; its message
    calls the folder `what` (``"state_dir"``, ``"the features folder"``). `owner` (a uid):
    a folder of that user's to read, not to write (the module's docstring)."""
    problem = folder_problem(folder, owner=owner)
    if problem:
        raise _refused(what, folder, problem, owner)
    return Path(folder)


def ensure_folder(folder: str | Path, what: str = "folder") -> Path:
    """`folder` (called `what` in messages), made (`DIR_MODE`, with its parents) when
    missing. `UnsafeFolder` when another user could change what is in it: checked before
    anything is made, then level by level on each folder as it is opened (a descriptor:
    what is checked is what is used). Made by path (``mkdir -p``), a link another user put
    at a missing level (in /tmp) between the check and the making would have root make
    folders where the link points. Any other failure is the OSError that stopped it,
    naming the level."""
    path = Path(os.path.abspath(folder))
    problem, complete = _folder_check(folder, True)
    if problem:
        raise _refused(what, folder, problem)
    if complete:  # (nothing to make, and no level another user could change meanwhile)
        return Path(folder)
    os.close(_walk(path, what, folder))
    return Path(folder)


def _walk(path: Path, what: str, folder: str | Path) -> int:
    """A descriptor on `path` (absolute), each missing level made (`DIR_MODE`) and every
    level checked by the rule as it is opened (`ensure_folder`)."""
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
            except OSError as exc:
                raise OSError(exc.errno, exc.strerror, str(here)) from None
            sub = _open_level(fd, part, here, trusted, what, folder)
            os.close(fd)
            fd = sub
            if made:
                os.fchmod(fd, DIR_MODE)  # whatever the umask: 0775 would be refused next
            problem = _entry_problem(here, os.fstat(fd), trusted, n < len(parts) - 1)
            if problem:
                raise _refused(what, folder, problem)
    except BaseException:
        os.close(fd)
        raise
    return fd


def ensure_folder_owned_by(folder: str | Path, uid: int, gid: int,
                           what: str = "folder") -> Path:
    """`folder` (called `what` in messages), made when missing and handed to `uid`:`gid`,
    for root preparing where a service user's programs write (the Slurm adapter's install,
    for SlurmUser's power programs). Every level above it follows the rule, as
    `ensure_folder` makes and checks them; the folder itself is opened from its parent's
    descriptor, never through a link, refused (`UnsafeFolder`) when it is not a folder or
    is neither root's nor `uid`'s, and then ``fchown``-ed to `uid`:`gid` and ``fchmod``-ed
    to `DIR_MODE`: no path another user could swap between the check and the change. The
    plain files directly in it that root owns, with no other name (a hard link), are
    handed to `uid` the same way (its programs rewrite them in place: a lock). A folder of
    root's others may write in, or one holding a folder of root's, is refused: it is in use
    by others than the one service (/tmp, /var/spool). Not for plugins: it needs root, and
    a hook never gives its folders away."""
    path = Path(os.path.abspath(folder))
    if path.parent == path:
        raise ValueError(f"{what} {folder}: not a folder to hand over")
    problem, _ = _folder_check(path.parent, True)
    if problem:
        raise _refused(what, folder, problem)
    parent = _walk(path.parent, what, folder)
    try:
        try:
            os.mkdir(path.name, DIR_MODE, dir_fd=parent)
        except FileExistsError:
            pass
        except OSError as exc:
            raise OSError(exc.errno, exc.strerror, str(path)) from None
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
                         | os.O_NOCTTY, dir_fd=parent)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            raise _refused(what, folder, f"{path} is not a folder (a link, or a file)"
                           ) from None
    finally:
        os.close(parent)
    try:
        info = os.fstat(fd)
        if info.st_uid not in (0, uid):
            raise _refused(what, folder, f"{path} is owned by {_owner(info.st_uid)}, mode "
                                         f"{stat.S_IMODE(info.st_mode):04o}")
        if info.st_uid != uid:
            _check_giveable(fd, path, what, folder)
        os.fchown(fd, uid, gid)
        os.fchmod(fd, DIR_MODE)
        for name in os.listdir(fd):
            _hand_over_file(fd, name, uid, gid)
    finally:
        os.close(fd)
    return Path(folder)


def _check_giveable(fd: int, path: Path, what: str, folder: str | Path) -> None:
    """`UnsafeFolder` unless the folder of root's `fd` is one made for a user to be given:
    not one others write in (a /tmp: made the user's and 0755, every other user's files in
    it would be the user's to remove), and holding no folder of root's (a /var/spool: the
    user could rename a folder root uses, cron's, and put one of its own in its place)."""
    mode = stat.S_IMODE(os.fstat(fd).st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH | stat.S_ISVTX):
        raise UnsafeFolder(f"refusing to give {what} {folder} away: {path} is root's and "
                           f"others may write in it (mode {mode:04o}); choose a folder of "
                           "its own", f"{path} is shared, mode {mode:04o}")
    for name in sorted(os.listdir(fd)):
        try:
            info = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if stat.S_ISDIR(info.st_mode) and info.st_uid == 0:
            raise UnsafeFolder(
                f"refusing to give {what} {folder} away: {path} holds {name}, a folder of "
                "root's, so it is not a folder made for one service alone; choose a folder "
                "of its own (or make what is in it that user's first)",
                f"{path} holds {name}, a folder of root's")


def _hand_over_file(folder: int, name: str, uid: int, gid: int) -> None:
    """The file `name` in the folder `folder` (a descriptor) made `uid`'s when it is a
    plain file of root's with one name; anything else is left as it is."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
                     | os.O_NOCTTY, dir_fd=folder)
    except OSError:
        return  # a link, or gone
    try:
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_uid == 0 and info.st_nlink == 1:
            os.fchown(fd, uid, gid)
    finally:
        os.close(fd)


def _open_level(parent: int, name: str, here: Path, trusted: set[int], what: str,
                folder: str | Path) -> int:
    """The folder `name` in `parent`: through a link only when the link is root's (or this
    process's user's), as /var/run -> /run is."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOCTTY
    try:
        return os.open(name, flags | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise OSError(exc.errno, exc.strerror, str(here)) from None
    link = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if not stat.S_ISLNK(link.st_mode):  # a file on the way: the folder cannot be made
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(here))
    if link.st_uid not in trusted:
        raise _refused(what, folder, f"{here} is a link owned by {_owner(link.st_uid)}")
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(here)) from None


def file_problem(info: os.stat_result, owner: int | None = None) -> str | None:
    """Why a file (`info`: its fstat) is not one only root (or this process's user) could
    have written, or None. `owner` (a uid): a file in that user's folder, to read: it may
    be that user's too; one of root's there must have no other name (a hard link that
    user made to a file of root's they may not read)."""
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    if not stat.S_ISREG(info.st_mode):
        return f"not a plain file ({mode})"
    if info.st_uid not in _trusted() | ({owner} if owner is not None else set()):
        return f"owned by {_owner(info.st_uid)}, {mode}"
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"writable by others (owner {_owner(info.st_uid)}, {mode})"
    if owner is not None and info.st_uid != owner and info.st_nlink != 1:
        return f"a file of {_owner(info.st_uid)} with other names (hard links), {mode}"
    return None


def open_file(path: str | Path, flags: int = os.O_RDONLY, mode: int = 0o644,
              owner: int | None = None) -> int:
    """A descriptor on the file `path`, never through a link; `UnsafeFolder` when it is
    not a plain file only root (or this process's user) could have written
    (`file_problem`), which names it, its owner and its mode. `FileNotFoundError` when
    absent (without O_CREAT). A FIFO planted there does not block the open. `owner` (a
    uid): a file in that user's folder, opened to read (`file_problem`); `ValueError`
    with any other `flags`."""
    if owner is not None:
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND):
            raise ValueError("safedirs.open_file: owner= opens a file to read only")
        return _open_to_read(Path(os.path.abspath(path)), owner)
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
                     | os.O_NONBLOCK, mode)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise UnsafeFolder(f"refusing {path}: a link, never followed; remove it",
                           "a link") from None
    return _checked_file(fd, path, owner)


def _checked_file(fd: int, path: str | Path, owner: int | None) -> int:
    """`fd` (opened without blocking), blocking again once `file_problem` finds nothing
    wrong with it; else closed, and `UnsafeFolder` naming `path`."""
    try:
        problem = file_problem(os.fstat(fd), owner)
        if problem:
            raise UnsafeFolder(f"refusing {path}: {problem}, so another user could have "
                               "written it; remove it", problem)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_to_read(path: Path, owner: int) -> int:
    """`open_file` of `path` (absolute) to read, in folders that may be `owner`'s: opened
    level by level from ``/``, each folder through its parent's descriptor and checked as
    it is opened (`_entry_problem`, `owner` trusted for folders), a link followed only when
    it is root's (or this user's) and no folder of `owner`'s is above it, the file never
    through a link and checked by `file_problem`."""
    trusted = _trusted()
    parts = path.parts[1:]
    if not parts:
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    theirs = False  # a folder of owner's is above: no link is followed any more
    try:
        for n, part in enumerate(parts[:-1]):
            here = Path("/", *parts[:n + 1])
            if theirs:
                try:
                    sub = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                  | os.O_CLOEXEC | os.O_NOCTTY, dir_fd=fd)
                except OSError as exc:
                    if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                        raise OSError(exc.errno, exc.strerror, str(here)) from None
                    raise UnsafeFolder(
                        f"refusing {path}: {here} is not a folder (a link, or a file) in a "
                        f"folder of {_owner(owner)}'s, never followed; remove it",
                        f"{here} is a link") from None
            else:
                sub = _open_level(fd, part, here, trusted, "the folder of", path)
            os.close(fd)
            fd = sub
            info = os.fstat(fd)
            problem = _entry_problem(here, info, trusted | {owner}, n < len(parts) - 2)
            if problem:
                raise _refused("the folder of", path, problem, owner)
            theirs = theirs or info.st_uid == owner
        try:
            out = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NOCTTY
                          | os.O_NONBLOCK, dir_fd=fd)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise OSError(exc.errno, exc.strerror, str(path)) from None
            raise UnsafeFolder(f"refusing {path}: a link, never followed; remove it",
                               "a link") from None
    finally:
        os.close(fd)
    return _checked_file(out, path, owner)


#: The most bytes `read_text` reads of a file of another user's (``owner=``): its size is
#: theirs to choose, and a sparse file of any size takes them no disk.
OTHERS_FILE_MAX = 64 << 20


def read_text(path: str | Path, owner: int | None = None) -> str:
    """The text of the file `path` (UTF-8), with `open_file`'s checks (`owner`: a file in
    that user's folder, refused, `UnsafeFolder`, past `OTHERS_FILE_MAX` bytes).
    `FileNotFoundError` when absent."""
    with os.fdopen(open_file(path, owner=owner), encoding="utf-8") as handle:
        if owner is None:
            return handle.read()
        size = os.fstat(handle.fileno()).st_size
        text = handle.read(OTHERS_FILE_MAX + 1) if size <= OTHERS_FILE_MAX else None
        if text is None or len(text) > OTHERS_FILE_MAX:
            problem = (f"{size} bytes" if text is None else "grown while read") + (
                f", more than the {OTHERS_FILE_MAX} read of a file of another user's")
            raise UnsafeFolder(f"refusing {path}: {problem}; remove it", problem)
        return text


def write_text(path: str | Path, text: str, mode: int = 0o644) -> None:
    """`path` holding `text` (UTF-8), written whole: a new file of a name nobody can guess
    in the same folder, then a rename over `path`. A fixed temporary name (``NAME.tmp``,
    ``.NAME.<pid>``) is opened through whatever is there: in a folder others may write, a
    link planted under it has root overwrite the file it points at. `mode` is the file's
    whatever the umask (0644: a status command of any user reads it)."""
    path = Path(path)
    fd, part = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), mode)
            handle.write(text)
        os.replace(part, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(part)
        raise


#: How many links `code_problem` follows from one path before it gives up (the kernel's own
#: limit, ELOOP, is 40).
_MAX_LINKS = 40


def code_problem(path: str | Path, depth: int | None = 0) -> str | None:
    """Why another user could change the code root would run or import at `path` (a
    program, a module, a folder on ``sys.path``, a file root reads its orders from), or
    None. Not for plugins: the adapters' installs check what they point root at (PBS's
    hooks, Slurm's programs, the workers).

    Stricter than `folder_problem`: every folder on the way is root's (or this process's
    user's) and writable by no one else, even when sticky, except the folders above the
    one that holds what is checked (/tmp may be above, but no module may sit in /tmp, where
    anyone may add one beside it). A link is followed one step at a time, and the folder
    of each target is checked the same way (a venv's bin/python -> /opt/python/bin/python3
    checks both folders); every link is root's. What is at the end is a plain file or a
    folder of root's, writable by no one else; in a folder, each entry down to `depth`
    levels (None: all of them) too, a link among them checked by this rule, and the entries
    of the __pycache__ of each folder checked (the compiled modules of its level). A path
    that is not there yet is checked where it would be made: only root may make it."""
    current = os.path.abspath(path)
    trusted = _trusted()
    for _ in range(_MAX_LINKS):
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            return _where_made_problem(current)
        except OSError as exc:
            return f"{current} cannot be checked: {exc.strerror or exc}"
        folder = os.path.dirname(current)
        if stat.S_ISDIR(info.st_mode):
            return folder_problem(current) or _entries_problem(current, depth)
        problem = folder_problem(folder)
        if problem:
            return problem
        if not stat.S_ISLNK(info.st_mode):
            return _code_file_problem(current, info)
        problem = _entry_problem(current, info, trusted, False)
        if problem:
            return problem
        written = os.readlink(current)
        target = os.path.join(os.path.realpath(folder), written)
        lexical = os.path.normpath(target)
        # ('..' after a link is the link target's parent, not the folder written before it,
        # which is the one the next step would check)
        if os.path.realpath(os.path.dirname(target)) != \
                os.path.realpath(os.path.dirname(lexical)):
            return (f"{current} is a link to {written}, whose '..' after a link names "
                    "another folder than the one written; name the target without '..'")
        current = lexical
    return f"{path} is a chain of more than {_MAX_LINKS} links"


def _code_file_problem(path: str, info: os.stat_result) -> str | None:
    problem = file_problem(info)
    return f"{path} is {problem}" if problem else None


def _where_made_problem(path: str) -> str | None:
    """`code_problem` of a path not there: the folder that would hold its first missing
    level, which may not be sticky (anyone could make it there)."""
    parent = os.path.dirname(path)
    while parent != os.path.dirname(parent) and not os.path.lexists(parent):
        parent = os.path.dirname(parent)
    return folder_problem(parent)


def _entries_problem(top: str, depth: int | None) -> str | None:
    """`code_problem` of what is in the folder `top` (checked), down to `depth` levels."""
    if depth == 0:
        return None
    trusted = _trusted()
    for folder, dirs, files in os.walk(top):
        names = sorted(dirs + files)
        if depth is not None and folder[len(top):].count(os.sep) + 1 >= depth:
            # (the entries of this one are the last level checked, and those of its
            # __pycache__: Python runs a .pyc there in place of a module of this level)
            dirs[:] = [d for d in dirs if d == "__pycache__"]
        for name in names:
            entry = os.path.join(folder, name)
            try:
                info = os.lstat(entry)
            except FileNotFoundError:
                continue  # removed meanwhile (a .pyc being replaced)
            if stat.S_ISLNK(info.st_mode):
                problem = code_problem(entry, 0)  # (it checks the link itself first)
            elif stat.S_ISDIR(info.st_mode):
                problem = _entry_problem(entry, info, trusted, False)
            else:
                problem = _code_file_problem(entry, info)
            if problem:
                return problem
    return None
