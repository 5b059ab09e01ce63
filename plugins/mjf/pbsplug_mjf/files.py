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
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from pbsplug import safedirs

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


def check_base(base: str | Path) -> None:
    """`HostError` naming the folder and why, when others could change what is in it
    (`pbsplug.safedirs`: sshd's StrictModes rule, sticky folders allowed on the way)."""
    try:
        safedirs.check_folder(base, "the features folder")
    except safedirs.UnsafeFolder as exc:
        raise HostError(str(exc)) from None


def ensure_base(base: str | Path) -> Path:
    """The base directory, made (0755, with its parents) when missing, level by level
    through descriptors (`pbsplug.safedirs.ensure_folder`). `HostError` when another user
    could change what is under it; `MJFError` when it cannot be made."""
    try:
        safedirs.ensure_folder(base, "the features folder")
    except safedirs.UnsafeFolder as exc:
        raise HostError(str(exc)) from None
    except OSError as exc:
        raise _failure("make the base directory", os.path.abspath(base), exc) from None
    return Path(os.path.abspath(base))


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
