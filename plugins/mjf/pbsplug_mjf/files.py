"""The feature directories on disk: one per host under ``machinefeatures_dir``, one per job
under ``jobfeatures_dir``.

Every file is written atomically (a temporary file in the same directory, then a rename), so
a reader never sees half a value; a job's directory is built whole under a temporary name
and renamed into place, so it is never seen half-made and a failure leaves nothing behind.
Directories are 0755 and files 0644, owned by the hooks' user: the job reads them and cannot
change them. Temporary names start with a dot, which no key does.
"""

from __future__ import annotations

import contextlib
import errno
import os
import pwd
import shutil
import stat
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from .derive import HostError, MJFError
from .keys import KEY_NAME, Value, format_value, parse_value

DIR_MODE = 0o755
FILE_MODE = 0o644


def _failure(what: str, path: Path | str, exc: OSError) -> MJFError:
    return MJFError(f"cannot {what} {path}: {exc.strerror or exc}")


def checked_name(kind: str, name: str) -> str:
    """A host name or job id usable as a directory name (no ``/``, no leading dot)."""
    if not name or "/" in name or name.startswith(".") or "\0" in name:
        raise MJFError(f"{kind} {name!r} cannot name a features directory")
    return name


def _owner(uid: int) -> str:
    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _entry_problem(path: Path, info: os.stat_result, trusted: set[int],
                   others_may_add: bool) -> str | None:
    """Why another user could change what `path` (a directory or a symlink on the way to a
    base folder) leads to, or None."""
    if info.st_uid not in trusted:
        return f"{path} is owned by {_owner(info.st_uid)}"
    if stat.S_ISLNK(info.st_mode):
        return None  # nobody changes a symlink; replacing it is its directory's business
    writable = info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    if not writable:
        return None
    who = "everyone" if info.st_mode & stat.S_IWOTH else "its group"
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    if not info.st_mode & stat.S_ISVTX:
        return f"{path} is writable by {who} ({mode})"
    if not others_may_add:
        return f"{path} is writable by {who} ({mode}): others may add folders to it"
    return None  # sticky: others may not rename or remove what is not theirs


def base_problem(base: str | Path, *, whole: bool = True) -> str | None:
    """Why a user other than root (or this process's own, when it is not root) could replace
    what is under the base folder `base`, or None when nobody could.

    The rule is the one sshd's StrictModes applies to a user's key files, with the sticky bit
    allowed on the way as in /tmp: every directory from / to the base, and every symlink
    followed, must be owned by root (or this process's user), and no directory may be
    writable by its group or by everyone unless it is sticky and what is in it on the way is
    owned as above. With `whole`, the base itself must not be writable by others even when
    sticky: they could put a job's name in it first. Folders not made yet are left out (a
    sticky folder that exists may be the one the rest is made in)."""
    trusted = {0, os.geteuid()}
    path = Path(os.path.abspath(base))
    real = Path(os.path.realpath(path))
    checks: dict[Path, bool] = {}  # a real directory -> whether others may add to it
    for directory in (real, *real.parents):
        checks.setdefault(directory, directory != real or not whole)
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


def check_base(base: str | Path) -> None:
    """`HostError` naming the folder and why, when others could change what is in it."""
    problem = base_problem(base)
    if problem:
        raise _refused(base, problem)


def _refused(base: str | Path, problem: str) -> HostError:
    return HostError(f"refusing the features folder {base}: {problem}, so another user could "
                     "replace the features in it; make that root's and writable by root "
                     "alone, or choose another folder")


def ensure_base(base: str | Path) -> Path:
    """The base directory, made (0755, with its parents) when missing. `HostError` when
    another user could change what is under it (`base_problem`): checked before anything is
    made, and then level by level on each folder as it is opened (a descriptor: what is
    checked is what is used). Made by path, a link another user put at a missing level
    (in /tmp, say) between the check and the mkdir had root make and chmod a folder where
    the link pointed."""
    path = Path(os.path.abspath(base))
    check_base(path)
    trusted = {0, os.geteuid()}
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
                raise _failure("make the base directory", here, exc) from None
            sub = _open_level(fd, part, here, path, trusted)
            os.close(fd)
            fd = sub
            if made:
                os.fchmod(fd, DIR_MODE)  # 0755 whatever the umask: jobs must get through
            problem = _entry_problem(here, os.fstat(fd), trusted, n < len(parts) - 1)
            if problem:
                raise _refused(base, problem)
    finally:
        os.close(fd)
    return path


def _open_level(parent: int, name: str, here: Path, base: Path, trusted: set[int]) -> int:
    """The folder `name` in `parent`: through a link only when the link is root's (or this
    process's user's), as /var/run -> /run is."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOCTTY
    try:
        return os.open(name, flags | os.O_NOFOLLOW, dir_fd=parent)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise _failure("open the base directory", here, exc) from None
        try:
            link = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except OSError as again:
            raise _failure("open the base directory", here, again) from None
        if not stat.S_ISLNK(link.st_mode):  # a file on the way: nobody can make the base
            raise _failure("make the base directory", base,
                           OSError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))) from None
        if link.st_uid not in trusted:
            raise _refused(base, f"{here} is a link owned by {_owner(link.st_uid)}") from None
    try:
        return os.open(name, flags, dir_fd=parent)
    except OSError as exc:
        raise _failure("open the base directory", here, exc) from None


def write_key(directory: Path, key: str, value: Value) -> None:
    """Write one key atomically."""
    if not KEY_NAME.fullmatch(key):
        raise MJFError(f"{key!r} is not a key name ([a-z0-9_])")
    content = format_value(key, value)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", dir=directory)
    except OSError as exc:
        raise _failure("write in", directory, exc) from None
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(content)
            os.fchmod(handle.fileno(), FILE_MODE)
        os.replace(tmp, directory / key)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _failure("write", directory / key, exc) from None


def remove_key(directory: Path, key: str) -> bool:
    """Remove a key; True when it was there."""
    try:
        (directory / key).unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _failure("remove", directory / key, exc) from None
    return True


def read_key(directory: Path, key: str) -> Value | None:
    """A key's typed value, None when absent; `MJFError` when unreadable or malformed."""
    try:
        text = (directory / key).read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _failure("read", directory / key, exc) from None
    try:
        return parse_value(key, text)
    except ValueError as exc:
        raise MJFError(f"{directory}: {exc}") from None


def sync_keys(directory: Path, values: Mapping[str, Value], keys: Iterable[str]) -> list[str]:
    """Make `keys` in `directory` hold `values` (a key not in `values` is removed), writing
    only files whose content changes, so their Last-Modified stays meaningful. Returns the
    keys changed."""
    changed = []
    for key in keys:
        if key in values:
            try:
                current = (directory / key).read_text()
            except OSError:
                current = None
            if current != format_value(key, values[key]):
                write_key(directory, key, values[key])
                changed.append(key)
        elif remove_key(directory, key):
            changed.append(key)
    return changed


def make_dir_whole(base: Path, name: str, values: Mapping[str, Value]) -> Path:
    """``base/name`` holding exactly `values`, built under a temporary name and renamed into
    place (an earlier directory of that name is replaced). Nothing is left on failure."""
    target = base / checked_name("job", name)
    try:
        build = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=base))
    except OSError as exc:
        raise _failure("make a directory in", base, exc) from None
    try:
        for key, value in values.items():  # nobody sees `build` yet: plain writes will do
            if not KEY_NAME.fullmatch(key):
                raise MJFError(f"{key!r} is not a key name ([a-z0-9_])")
            fd = os.open(build / key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(fd, "w") as handle:
                handle.write(format_value(key, value))
                os.fchmod(handle.fileno(), FILE_MODE)  # whatever the umask
        build.chmod(DIR_MODE)
        if target.exists():
            remove_dir(target)
        os.rename(build, target)
    except (OSError, MJFError, ValueError) as exc:
        shutil.rmtree(build, ignore_errors=True)
        if isinstance(exc, OSError):
            raise _failure("make", target, exc) from None
        raise
    return target


def remove_dir(path: Path) -> bool:
    """Remove a features directory: renamed aside first, so it vanishes at once for readers
    even while its files are deleted. True when it was there."""
    aside = path.with_name(f".{path.name}.gone.{os.getpid()}.{time.monotonic_ns()}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise _failure("remove", path, exc) from None
    shutil.rmtree(aside, ignore_errors=True)
    return True


def job_dirs(base: Path) -> list[Path]:
    """The job directories under `base` (not the temporary ones)."""
    try:
        return [p for p in base.iterdir() if not p.name.startswith(".") and p.is_dir()]
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise _failure("list", base, exc) from None
