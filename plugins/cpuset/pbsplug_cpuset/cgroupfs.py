"""One cpuset hierarchy behind one small interface: cgroup v1, cgroup v2, or an emulated tree.

``detect`` finds the hierarchy and returns a ``Cpusets``; every other module talks only to
that object, with names relative to its root ("pbs_jobs/12.host"). The logic (what to
write, in which order, how to tear down) is written once; only the "kernel" under it
changes:

- ``_Kernel``: the real cgroupfs, where the kernel enforces every rule;
- ``_EmulatedKernel``: a plain directory that keeps the rules the plugin relies on, so
  tests and a trial of the plugin on a machine without cpusets see the same failures a
  real machine gives (a naive fake would overwrite ``cgroup.procs`` instead of migrating,
  give ENOTEMPTY instead of EBUSY, and never notice that a process died).

Facts from this machine's kernel (6.18), which the emulation copies: on v1, CPUs outside
the parent's give EACCES, ids the machine does not have give EINVAL (ERANGE past the
kernel's CPU count), and a cpuset with no CPUs or memory nodes refuses tasks (ENOSPC);
``mem_exclusive`` needs an exclusive parent (EACCES) and siblings with disjoint
``cpuset.mems`` (EINVAL). On v2, CPUs outside the parent's are accepted and only the
``*.effective`` lists are narrowed; processes live only in leaf cgroups (EBUSY); and
cgroups cannot be renamed (EPERM).
"""

from __future__ import annotations

import errno
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from .nodemask import format_list, parse_list

__all__ = ["CgroupError", "Cpusets", "detect"]

MEM_EXCLUSIVE = "cpuset.mem_exclusive"
V1_FLAGS = (MEM_EXCLUSIVE, "cpuset.mem_hardwall", "cpuset.memory_spread_page")
LISTS = ("cpuset.cpus", "cpuset.mems")
# v2 names the granted lists "<file>.effective"; the v2 root has only those.
EFFECTIVE = {name: f"{name}.effective" for name in LISTS}
# Controllers the kernel knows: "+bogus" is EINVAL, a known one the parent withholds ENOENT.
_KNOWN_CONTROLLERS = {"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}


class CgroupError(Exception):
    """A cgroup operation failed; the message names the path, the value and the errno text."""


def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state, ppid) of a process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces
    return fields[0], int(fields[1])


def _alive(pid: int) -> bool:
    """A zombie has left its cgroup (the kernel lets rmdir proceed), so it counts as gone."""
    stat = _proc_stat(pid)
    return stat is not None and stat[0] not in ("Z", "X")


def _oserror(code: int, path: Path) -> OSError:
    return OSError(code, os.strerror(code), str(path))


def _ids(text: str) -> set[int]:
    return set(parse_list(text))


class _Kernel:
    """The real cgroupfs: every rule is the kernel's, these are plain system calls."""

    def read(self, path: Path) -> str:
        return path.read_text()

    def write(self, path: Path, value: str) -> None:
        # One write per value (cgroup.procs takes one pid per write), and never O_CREAT: a
        # missing interface file is an error here as it is on cgroupfs. A zero-length write
        # may never reach the kernel, so "nothing" is written as a newline, like echo does.
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode() if value else b"\n")
        finally:
            os.close(fd)

    def mkdir(self, path: Path) -> None:
        os.mkdir(path)

    def rmdir(self, path: Path) -> None:
        os.rmdir(path)

    def rename(self, path: Path, new: Path) -> None:
        os.rename(path, new)


class _EmulatedKernel(_Kernel):
    """A plain directory that behaves like cgroupfs where the plugin depends on it.

    State lives only in the files, so several processes (hooks run as separate processes)
    share one emulated tree. Processes forked by an attached process join its cgroup, as
    on the kernel; the emulation learns of them when it next looks (any read of
    cgroup.procs, rmdir, cgroup.kill), so a child whose parent died before that, or one
    that existed before its parent was attached, is missed or wrongly included.
    """

    def __init__(self, root: Path, version: int) -> None:
        self.root = root
        self.version = version

    # -- the tree ------------------------------------------------------------------------

    def _cgroups(self, top: Path | None = None) -> Iterator[Path]:
        for dirpath, _dirs, _files in os.walk(top or self.root):
            yield Path(dirpath)

    @staticmethod
    def _subdirs(cgroup: Path) -> list[Path]:
        return [p for p in cgroup.iterdir() if p.is_dir()]

    @staticmethod
    def _recorded(cgroup: Path) -> list[int]:
        try:
            return [int(word) for word in (cgroup / "cgroup.procs").read_text().split()]
        except FileNotFoundError:
            return []

    @staticmethod
    def _record(cgroup: Path, pids: list[int]) -> None:
        (cgroup / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in pids))

    def _sync(self) -> None:
        """Forget dead processes and take in the live descendants of recorded ones."""
        owner: dict[int, Path] = {}
        for cgroup in self._cgroups():
            recorded = self._recorded(cgroup)
            live = [pid for pid in recorded if _alive(pid)]
            if live != recorded:
                self._record(cgroup, live)
            owner.update(dict.fromkeys(live, cgroup))
        if not owner:
            return
        parent: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                stat = _proc_stat(int(entry))
                if stat is not None and stat[0] not in ("Z", "X"):
                    parent[int(entry)] = stat[1]
        adopted: dict[Path, list[int]] = {}
        for pid in parent:
            if pid in owner:
                continue
            ancestor, hops = parent[pid], 0
            while ancestor not in owner and ancestor in parent and hops < len(parent):
                ancestor, hops = parent[ancestor], hops + 1
            if ancestor in owner:
                adopted.setdefault(owner[ancestor], []).append(pid)
        for cgroup, pids in adopted.items():
            self._record(cgroup, self._recorded(cgroup) + sorted(pids))

    def _subtree_pids(self, top: Path) -> list[int]:
        return [pid for cgroup in self._cgroups(top) for pid in self._recorded(cgroup)]

    # -- reads ---------------------------------------------------------------------------

    def read(self, path: Path) -> str:
        name = path.name
        if name in ("cgroup.procs", "tasks", "cgroup.events") and path.is_file():
            self._sync()
            cgroup = path.parent
            if name == "tasks":
                tids: list[int] = []
                for pid in self._recorded(cgroup):
                    try:
                        tids.extend(int(t) for t in os.listdir(f"/proc/{pid}/task"))
                    except FileNotFoundError:
                        pass
                path.write_text("".join(f"{tid}\n" for tid in sorted(tids)))
            elif name == "cgroup.events":
                populated = int(bool(self._subtree_pids(cgroup)))
                path.write_text(f"populated {populated}\nfrozen 0\n")
        return path.read_text()

    # -- writes --------------------------------------------------------------------------

    def write(self, path: Path, value: str) -> None:
        if not path.is_file():
            raise _oserror(errno.ENOENT, path)
        name, cgroup = path.name, path.parent
        if name in ("cgroup.procs", "tasks"):
            self._attach(cgroup, value, path)
        elif name == "cgroup.kill":
            self._kill(cgroup, value, path)
        elif name == "cgroup.subtree_control":
            self._subtree_control(cgroup, value, path)
        elif name in LISTS:
            self._write_list(cgroup, name, value, path)
        elif name in V1_FLAGS or name == "cpuset.cpu_exclusive":
            self._write_flag(cgroup, name, value, path)
        elif name in ("cgroup.events", "cgroup.controllers") or name.endswith(".effective"):
            raise _oserror(errno.EINVAL, path)  # read-only on the kernel
        else:
            path.write_text(value)

    def _attach(self, cgroup: Path, value: str, path: Path) -> None:
        text = value.strip()
        if not text.isascii() or not text.isdigit():
            raise _oserror(errno.EINVAL, path)
        pid = int(text) or os.getpid()  # "0" is the writer itself, as on the kernel
        if not _alive(pid):
            raise _oserror(errno.ESRCH, path)
        if self.version == 1:
            if not all((cgroup / name).read_text().strip() for name in LISTS):
                raise _oserror(errno.ENOSPC, path)
        elif cgroup != self.root and (cgroup / "cgroup.subtree_control").read_text().split():
            raise _oserror(errno.EBUSY, path)  # v2: no processes in a cgroup with controllers
        for other in self._cgroups():
            recorded = self._recorded(other)
            if pid in recorded:
                self._record(other, [p for p in recorded if p != pid])
        self._record(cgroup, self._recorded(cgroup) + [pid])

    def _kill(self, cgroup: Path, value: str, path: Path) -> None:
        text = value.strip()
        if text != "1":
            code = errno.ERANGE if text.isascii() and text.isdigit() else errno.EINVAL
            raise _oserror(code, path)
        self._sync()
        for pid in self._subtree_pids(cgroup):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _subtree_control(self, cgroup: Path, value: str, path: Path) -> None:
        available = (cgroup / "cgroup.controllers").read_text().split()
        enabled = path.read_text().split()
        for token in value.split():
            sign, controller = token[:1], token[1:]
            if sign not in ("+", "-") or controller not in _KNOWN_CONTROLLERS:
                raise _oserror(errno.EINVAL, path)
            if controller not in available:
                raise _oserror(errno.ENOENT, path)
            children = self._subdirs(cgroup)
            if sign == "+" and controller not in enabled:
                self._sync()
                if cgroup != self.root and self._recorded(cgroup):
                    raise _oserror(errno.EBUSY, path)
                enabled.append(controller)
                for child in children:
                    self._grant(child, controller)
            elif sign == "-" and controller in enabled:
                if any(controller in (c / "cgroup.subtree_control").read_text().split()
                       for c in children):
                    raise _oserror(errno.EBUSY, path)
                enabled.remove(controller)
                for child in children:
                    self._withdraw(child, controller)
        path.write_text(" ".join(enabled) + "\n" if enabled else "")

    def _grant(self, child: Path, controller: str) -> None:
        """The parent enabled ``controller``: it appears in the child, with its files."""
        controllers = (child / "cgroup.controllers").read_text().split()
        (child / "cgroup.controllers").write_text(" ".join([*controllers, controller]) + "\n")
        if controller == "cpuset":
            self._grant_files(child)

    def _withdraw(self, child: Path, controller: str) -> None:
        controllers = (child / "cgroup.controllers").read_text().split()
        remaining = [c for c in controllers if c != controller]
        (child / "cgroup.controllers").write_text(" ".join(remaining) + "\n" if remaining else "")
        if controller == "cpuset":
            for name in LISTS:
                (child / name).unlink(missing_ok=True)
                (child / EFFECTIVE[name]).unlink(missing_ok=True)

    def _write_list(self, cgroup: Path, name: str, value: str, path: Path) -> None:
        try:
            ids = _ids(value)
        except ValueError:
            raise _oserror(errno.EINVAL, path) from None
        if self.version == 1:
            if cgroup == self.root:
                raise _oserror(errno.EACCES, path)  # the top cpuset is the machine
            if not ids <= _ids((self.root / name).read_text()):
                raise _oserror(errno.EINVAL, path)
            if not ids <= _ids((cgroup.parent / name).read_text()):
                raise _oserror(errno.EACCES, path)
            if any(not _ids((c / name).read_text()) <= ids for c in self._subdirs(cgroup)):
                raise _oserror(errno.EBUSY, path)
            if name == "cpuset.mems" and self._exclusive_overlap(cgroup, ids):
                raise _oserror(errno.EINVAL, path)
            path.write_text(format_list(ids) + "\n")
            return
        if not ids <= _ids((self.root / EFFECTIVE[name]).read_text()):
            raise _oserror(errno.EINVAL, path)
        path.write_text(format_list(ids) + "\n")
        self._narrow(cgroup, name)

    def _narrow(self, cgroup: Path, name: str) -> None:
        """v2: grant what was asked within the parent's grant; nothing granted inherits."""
        wanted = _ids((cgroup / name).read_text())
        granted = _ids((cgroup.parent / EFFECTIVE[name]).read_text())
        (cgroup / EFFECTIVE[name]).write_text(format_list((wanted & granted) or granted) + "\n")
        for child in self._subdirs(cgroup):
            if (child / name).is_file():
                self._narrow(child, name)

    def _exclusive_overlap(self, cgroup: Path, mems: set[int], exclusive: bool | None = None
                           ) -> bool:
        """v1: if either of two siblings is mem_exclusive, their mems must be disjoint."""
        if exclusive is None:
            exclusive = self._flag(cgroup, MEM_EXCLUSIVE)
        return any((exclusive or self._flag(s, MEM_EXCLUSIVE))
                   and mems & _ids((s / "cpuset.mems").read_text())
                   for s in self._subdirs(cgroup.parent) if s != cgroup)

    @staticmethod
    def _flag(cgroup: Path, name: str) -> bool:
        return (cgroup / name).read_text().strip() == "1"

    def _write_flag(self, cgroup: Path, name: str, value: str, path: Path) -> None:
        text = value.strip()
        if not text.isascii() or not text.isdigit():
            raise _oserror(errno.EINVAL, path)
        on = int(text) != 0  # the kernel takes any number: non-zero is on
        if name == MEM_EXCLUSIVE and cgroup != self.root:
            if on and not self._flag(cgroup.parent, name):
                raise _oserror(errno.EACCES, path)
            if not on and any(self._flag(c, name) for c in self._subdirs(cgroup)):
                raise _oserror(errno.EBUSY, path)
            mems = _ids((cgroup / "cpuset.mems").read_text())
            if on and self._exclusive_overlap(cgroup, mems, exclusive=True):
                raise _oserror(errno.EINVAL, path)
        path.write_text("1\n" if on else "0\n")

    # -- directories ---------------------------------------------------------------------

    def mkdir(self, path: Path) -> None:
        os.mkdir(path)  # ENOENT without a parent, EEXIST if there, as on the kernel
        if self.version == 1:
            files = dict.fromkeys(("cgroup.procs", "tasks", *LISTS), "")
            files |= dict.fromkeys((*V1_FLAGS, "cpuset.cpu_exclusive"), "0\n")
        else:
            enabled = (path.parent / "cgroup.subtree_control").read_text()
            files = {"cgroup.procs": "", "cgroup.kill": "", "cgroup.subtree_control": "",
                     "cgroup.events": "populated 0\nfrozen 0\n", "cgroup.controllers": enabled}
        for name, text in files.items():
            (path / name).write_text(text)
        if self.version == 2 and "cpuset" in enabled.split():
            self._grant_files(path)

    @staticmethod
    def _grant_files(path: Path) -> None:
        """v2: the cpuset files appear empty (inherit) and granted the parent's lists."""
        for name in LISTS:
            (path / name).write_text("")
            (path / EFFECTIVE[name]).write_text((path.parent / EFFECTIVE[name]).read_text())

    def rmdir(self, path: Path) -> None:
        if path == self.root:
            raise _oserror(errno.EBUSY, path)
        if not path.is_dir():
            raise _oserror(errno.ENOENT, path)
        if self._subdirs(path):
            raise _oserror(errno.EBUSY, path)
        self._sync()
        if self._recorded(path):
            raise _oserror(errno.EBUSY, path)
        for entry in path.iterdir():
            entry.unlink()
        os.rmdir(path)

    def rename(self, path: Path, new: Path) -> None:
        if self.version == 2:
            raise _oserror(errno.EPERM, path)
        if not path.is_dir():
            raise _oserror(errno.ENOENT, path)
        if new.parent != path.parent:
            raise _oserror(errno.EIO, path)
        if new.exists():
            raise _oserror(errno.EEXIST, new)
        os.rename(path, new)


class Cpusets:
    """One cpuset hierarchy; every name is a path relative to ``root`` ("pbs_jobs/12.host").

    ``version`` is 1 or 2; ``emulated`` says the tree is a plain directory that only
    behaves like cgroupfs (nothing is really confined).
    """

    def __init__(self, root: str | Path, version: int, *, emulated: bool = False) -> None:
        if version not in (1, 2):
            raise ValueError(f"cgroup version {version!r}: use 1 or 2")
        self.root = Path(root)
        self.version = version
        self.emulated = emulated
        self._kernel = _EmulatedKernel(self.root, version) if emulated else _Kernel()

    def __repr__(self) -> str:
        kind = "emulated " if self.emulated else ""
        return f"<Cpusets {kind}cgroup v{self.version} at {self.root}>"

    def path(self, name: str) -> Path:
        """The directory of cgroup ``name``; "" is the root. Names never leave the root."""
        rel = PurePosixPath(name)
        if rel.is_absolute() or ".." in rel.parts:
            raise CgroupError(f"cgroup name {name!r}: give a path relative to {self.root} "
                              "without '..' or a leading '/'")
        return self.root.joinpath(*rel.parts)

    # -- building ------------------------------------------------------------------------

    def ensure_parent(self, prefix: str, *, mem_exclusive: bool = False) -> Path:
        """Make ``prefix`` (and any level above it) able to hold job cpusets; idempotent.

        v1: each level gets the root's CPUs and memory nodes, since a v1 cpuset with empty
        lists refuses tasks and children must be subsets; ``mem_exclusive`` also marks each
        level exclusive, which the kernel requires before a job cpuset may be (it fails if a
        cpuset beside the prefix shares memory nodes). v2: "+cpuset" goes into the
        cgroup.subtree_control of the root and of each level, so the children get cpuset
        files; empty lists inherit, so nothing is copied.
        """
        levels = PurePosixPath(prefix).parts
        if not levels:
            raise CgroupError(f"prefix {prefix!r}: name a directory under {self.root} "
                              "(such as 'pbs_jobs'); job cpusets never sit in the root itself")
        self.path(prefix)  # refuses names that leave the root
        current = self.root
        if self.version == 2:
            self._enable_cpuset(current)
        for level in levels:
            current = current / level
            if not current.is_dir():
                self._mkdir(current)
            if self.version == 1:
                for name in ("cpuset.mems", "cpuset.cpus"):  # mems first: cpus may need them
                    self._write(current / name, self._read(self.root / name).strip())
                if mem_exclusive:
                    self._write(current / MEM_EXCLUSIVE, "1")
            else:
                self._enable_cpuset(current)
        return current

    def _enable_cpuset(self, cgroup: Path) -> None:
        control = cgroup / "cgroup.subtree_control"
        if "cpuset" not in self._read(control).split():
            self._write(control, "+cpuset")

    def create(self, name: str, cpus: list[int], mems: list[int], *,
               mem_exclusive: bool = False, mem_hardwall: bool = False,
               memory_spread_page: bool = False) -> Path:
        """Make (or reuse and rewrite) the cpuset ``name`` with these CPUs and memory nodes.

        mems is written before cpus: the kernel migrates memory when mems change, which is
        cheapest before any task runs. The three flags are v1 files; v2 has no such files
        (no exclusive memory, hardwall or page spreading) and ignores them.
        """
        path = self.path(name)
        if path == self.root:
            raise CgroupError(f"cgroup name {name!r}: the root cpuset is the whole machine "
                              "and cannot be rewritten; name a job cpuset under a prefix")
        if not path.is_dir():
            self._mkdir(path)
        self._write(path / "cpuset.mems", format_list(mems))
        self._write(path / "cpuset.cpus", format_list(cpus))
        if self.version == 1:
            wanted = (mem_exclusive, mem_hardwall, memory_spread_page)
            for flag, on in zip(V1_FLAGS, wanted, strict=True):
                self._write(path / flag, "1" if on else "0")
        return path

    def attach(self, name: str, pid: int) -> None:
        """Move process ``pid`` (all its threads) into ``name``; its future children follow."""
        path = self.path(name)
        if not path.is_dir():
            raise CgroupError(f"{path}: no such cgroup: create() it before attaching pid {pid}")
        self._write(path / "cgroup.procs", str(pid))

    # -- reading -------------------------------------------------------------------------

    def exists(self, name: str) -> bool:
        return self.path(name).is_dir()

    def children(self, prefix: str) -> list[str]:
        """The names (last component only) of the cgroups directly under ``prefix``,
        sorted; a prefix that does not exist has none."""
        try:
            entries = list(os.scandir(self.path(prefix)))
        except FileNotFoundError:
            return []
        return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))

    def read(self, name: str) -> tuple[list[int], list[int]]:
        """(cpus, mems) of ``name``. On v2 these are the effective lists: what the kernel
        granted (an empty cpuset.cpus means "inherit", and the root has no other)."""
        path = self.path(name)
        files = LISTS if self.version == 1 else tuple(EFFECTIVE[n] for n in LISTS)
        cpus, mems = (self._read(path / f) for f in files)
        return parse_list(cpus), parse_list(mems)

    def pids(self, name: str) -> list[int]:
        """Live processes in ``name`` and in the cgroups below it, sorted; [] once gone."""
        found: set[int] = set()
        for dirpath, _dirs, _files in os.walk(self.path(name)):
            try:
                text = self._kernel.read(Path(dirpath) / "cgroup.procs")
            except FileNotFoundError:  # removed while we walked
                continue
            found.update(int(word) for word in text.split())
        return sorted(pid for pid in found if _alive(pid))

    # -- tearing down ----------------------------------------------------------------------

    def kill(self, name: str) -> None:
        """SIGKILL every process in ``name`` and below. v2's cgroup.kill does it in one
        race-free step; otherwise each pid, children before parents, so no parent outlives
        its children long enough to notice and start more."""
        path = self._not_root(name, "kill")
        if not path.is_dir():
            return
        if (path / "cgroup.kill").is_file():
            self._write(path / "cgroup.kill", "1")
            return
        pids = self.pids(name)
        parent = {pid: (_proc_stat(pid) or ("", 0))[1] for pid in pids}

        def depth(pid: int) -> int:
            hops = 0
            while parent.get(pid) in parent and hops < len(parent):
                pid, hops = parent[pid], hops + 1
            return hops

        for pid in sorted(pids, key=depth, reverse=True):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            except PermissionError as err:
                raise CgroupError(f"{path}: cannot kill pid {pid}: {err.strerror}; "
                                  "managing cpusets needs root") from err

    def remove(self, name: str, timeout: float = 10.0, interval: float = 0.2) -> bool:
        """Kill and remove ``name`` and the cgroups below it; True once gone (a name that
        does not exist is gone), False if it is still there after ``timeout`` seconds.

        A killed process leaves its cgroup only when the kernel has finished with it (a
        core dump to a slow filesystem can take minutes), so rmdir gives EBUSY for a while:
        kill and retry, leaves first, waiting 10 ms at first and doubling up to
        ``interval``. Only errors other than EBUSY raise.
        """
        path = self._not_root(name, "remove")
        deadline = time.monotonic() + timeout
        pause = min(0.01, interval)
        while path.is_dir():
            self.kill(name)
            if self._rmdir_tree(path):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, interval)
        return True

    def _rmdir_tree(self, path: Path) -> bool:
        for dirpath, _dirs, _files in os.walk(path, topdown=False):
            try:
                self._kernel.rmdir(Path(dirpath))
            except FileNotFoundError:
                pass
            except OSError as err:
                if err.errno not in (errno.EBUSY, errno.ENOTEMPTY):
                    raise CgroupError(f"{dirpath}: cannot remove: {err.strerror}"
                                      f"{self._hint(Path(dirpath), err.errno)}") from err
        return not path.exists()

    def rename(self, name: str, new_name: str) -> None:
        """Rename a cgroup in place (an orphan: "<jobid>" -> "<jobid>.orphan").

        Only v1 can: the v2 kernel refuses every rename (EPERM).
        """
        path, new = self._not_root(name, "rename"), self._not_root(new_name, "rename to")
        try:
            self._kernel.rename(path, new)
        except OSError as err:
            hint = {
                errno.EPERM: ": cgroup v2 cannot rename cgroups; track the orphan by its "
                             "name instead",
                errno.EEXIST: f": {new} already exists; remove it first",
                errno.EIO: ": a cgroup can only be renamed within its parent",
                errno.ENOENT: f": {path} does not exist",
            }.get(err.errno or 0, "")
            raise CgroupError(f"{path}: cannot rename to {new}: {err.strerror}{hint}") from err

    # -- system calls with messages ------------------------------------------------------

    def _not_root(self, name: str, action: str) -> Path:
        path = self.path(name)
        if path == self.root:
            raise CgroupError(f"refusing to {action} the root of {self.root}: it holds every "
                              "process on the machine; name a job cgroup")
        return path

    def _read(self, path: Path) -> str:
        try:
            return self._kernel.read(path)
        except OSError as err:
            hint = "" if path.parent.is_dir() else f": no such cgroup {path.parent}"
            raise CgroupError(f"{path}: cannot read: {err.strerror}{hint}") from err

    def _mkdir(self, path: Path) -> None:
        try:
            self._kernel.mkdir(path)
        except FileExistsError:
            pass  # made by someone else meanwhile: the caller rewrites it anyway
        except OSError as err:
            hint = ""
            if err.errno == errno.ENOENT:
                hint = f": {path.parent} does not exist; call ensure_parent() for the prefix"
            elif err.errno in (errno.EACCES, errno.EPERM):
                hint = ": managing cpusets needs root"
            raise CgroupError(f"{path}: cannot create: {err.strerror}{hint}") from err

    def _write(self, path: Path, value: str) -> None:
        try:
            self._kernel.write(path, value)
        except OSError as err:
            raise CgroupError(f"{path}: cannot write {value!r}: {err.strerror}"
                              f"{self._hint(path, err.errno, value)}") from err

    def _hint(self, path: Path, code: int | None, value: str = "") -> str:
        """What to do about a refused write, in the kernel's terms."""
        name, parent = path.name, path.parent
        if not parent.is_dir():
            return f": no such cgroup {parent}; create() it first"
        if code == errno.ENOENT and name.startswith("cpuset.") and self.version == 2:
            return (": the cpuset controller is not enabled for this cgroup; ensure_parent() "
                    f"writes +cpuset into {parent.parent}/cgroup.subtree_control")
        if name in LISTS:
            kind = "CPUs" if name == "cpuset.cpus" else "memory nodes"
            if code == errno.ERANGE:
                return f": this machine has no such {kind}"
            if code in (errno.EACCES, errno.EINVAL):
                try:
                    allowed = self._kernel.read(parent.parent / name).strip()
                except OSError:
                    allowed = "?"
                extra = ("; with cpuset.mem_exclusive on either side, sibling cpusets "
                         "cannot share memory nodes") if name == "cpuset.mems" else ""
                return (f": the {kind} must exist on this machine and lie within the parent's "
                        f"({parent.parent / name} is {allowed!r}){extra}")
            if code == errno.EBUSY:
                return f": a child cpuset still uses {kind} outside {value!r}; change it first"
        if name == MEM_EXCLUSIVE:
            if code == errno.EACCES:
                return (f": the parent {parent.parent} is not mem_exclusive; use "
                        "ensure_parent(prefix, mem_exclusive=True)")
            if code == errno.EINVAL:
                return (": a sibling cpuset shares memory nodes with this one; exclusive "
                        "memory needs disjoint cpuset.mems")
        if name in ("cgroup.procs", "tasks"):
            if code == errno.ESRCH:
                return f": no process {value}"
            if code == errno.ENOSPC:
                return ": its cpuset.cpus or cpuset.mems is empty; create() it with both"
            if code == errno.EBUSY:
                return (": cgroup v2 keeps processes only in leaf cgroups and this one "
                        "passes controllers to its children; attach to a job cgroup below it")
        if name == "cgroup.subtree_control":
            if code == errno.EBUSY:
                return (": the cgroup holds processes (or a child still uses the controller); "
                        "cgroup v2 enables controllers only above leaf cgroups: move them out")
            if code == errno.ENOENT:
                return f": the controller is not offered here (see {parent}/cgroup.controllers)"
        if code in (errno.EACCES, errno.EPERM):
            return ": managing cpusets needs root"
        return ""


# -- finding the hierarchy -------------------------------------------------------------------

_OCTAL = re.compile(r"\\([0-7]{3})")


def _mount_table(mounts: str | Path) -> dict[Path, tuple[str, set[str]]]:
    """Mount point -> (fstype, options); the last mount on a point is the one visible."""
    table: dict[Path, tuple[str, set[str]]] = {}
    for line in Path(mounts).read_text().splitlines():
        fields = line.split()
        if len(fields) >= 4:
            point = _OCTAL.sub(lambda m: chr(int(m[1], 8)), fields[1])
            table[Path(point)] = (fields[2], set(fields[3].split(",")))
    return table


def _describe(path: Path, table: dict[Path, tuple[str, set[str]]]) -> str:
    if path not in table:
        return f"{path} is {'not a mount point' if path.exists() else 'missing'}"
    fstype, options = table[path]
    if fstype == "cgroup2":
        try:
            controllers = (path / "cgroup.controllers").read_text().split()
        except OSError:
            controllers = []
        return f"{path} is cgroup2 with controllers {' '.join(controllers) or '(none)'!r}"
    if fstype == "cgroup":
        return f"{path} is cgroup v1 with {','.join(sorted(options))!r}"
    return f"{path} is {fstype}"


def detect(mount: str | Path = "/sys/fs/cgroup", version: str = "auto",
           emulate: bool = False, *, cpus: list[int] | None = None,
           mems: list[int] | None = None, mounts: str | Path = "/proc/self/mounts"
           ) -> Cpusets:
    """The cpuset hierarchy under ``mount``.

    version "auto" prefers a v1 cpuset mount (``<mount>/cpuset`` or ``mount`` itself) and
    falls back to a cgroup2 mount (``mount`` or ``<mount>/unified``) whose cgroup.controllers
    offers cpuset; "1" or "2" accepts only that one. ``emulate`` uses ``mount`` as a plain
    directory instead (tests, trying the plugin without cpusets): v1 if version is "1" or
    ``<mount>/cpuset`` exists, else v2, with the root's files made when missing; its CPUs
    are ``cpus`` (default: those this process may run on) and its memory nodes ``mems``
    (default [0]). ``mounts`` is the mount table to read.
    """
    version = str(version)
    if version not in ("auto", "1", "2"):
        raise CgroupError(f"cgroup version {version!r}: use 'auto', '1' or '2'")
    base = Path(os.path.abspath(mount))
    if not base.is_dir():
        what = "is not a directory" if base.exists() else "does not exist"
        raise CgroupError(f"{base} {what}: give the cgroup mount point (usually /sys/fs/cgroup)"
                          ", or an existing directory with emulate=True")
    table = _mount_table(mounts)
    if emulate:
        return _emulated(base, version, table, cpus, mems)
    looked: list[Path] = []
    if version in ("auto", "1"):
        for candidate in (base / "cpuset", base):
            looked.append(candidate)
            fstype, options = table.get(candidate, ("", set()))
            if fstype == "cgroup" and "cpuset" in options:
                return Cpusets(candidate, 1)
    if version in ("auto", "2"):
        for candidate in (base, base / "unified"):
            looked.append(candidate)
            if table.get(candidate, ("",))[0] == "cgroup2":
                try:
                    controllers = (candidate / "cgroup.controllers").read_text().split()
                except OSError:
                    controllers = []
                if "cpuset" in controllers:
                    return Cpusets(candidate, 2)
    wanted = {"auto": "cpuset hierarchy (v1 or v2)", "1": "cgroup v1 cpuset hierarchy",
              "2": "cgroup v2 hierarchy with the cpuset controller"}[version]
    found = "; ".join(_describe(p, table) for p in dict.fromkeys(looked))
    raise CgroupError(f"no {wanted} at {base}: {found}. Mount one or point at it; to use a "
                      "plain directory as an emulated hierarchy, pass emulate=True")


def _emulated(base: Path, version: str, table: dict[Path, tuple[str, set[str]]],
              cpus: list[int] | None, mems: list[int] | None) -> Cpusets:
    if version == "2":
        root, number = base, 2
    elif (base / "cpuset").is_dir():
        root, number = base / "cpuset", 1
    elif version == "1" or (base / "tasks").is_file():
        root, number = (base if (base / "tasks").is_file() else base / "cpuset"), 1
    else:
        root, number = base, 2
    for point, (fstype, _options) in table.items():
        if fstype in ("cgroup", "cgroup2") and (root == point or point in root.parents):
            raise CgroupError(f"{root} is on a real {fstype} filesystem (mounted at {point}); "
                              "emulate=True needs a plain directory: drop emulate to use it")
    root.mkdir(exist_ok=True)
    cpu_list = format_list(sorted(os.sched_getaffinity(0)) if cpus is None else cpus) + "\n"
    mem_list = format_list([0] if mems is None else mems) + "\n"
    if number == 1:
        files = {"cgroup.procs": "", "tasks": "", "cpuset.cpus": cpu_list,
                 "cpuset.mems": mem_list, "cpuset.cpu_exclusive": "1\n",
                 MEM_EXCLUSIVE: "1\n", "cpuset.mem_hardwall": "0\n",
                 "cpuset.memory_spread_page": "0\n"}
    else:  # the v2 root has no cpuset.cpus/mems of its own, only what it grants
        files = {"cgroup.procs": "", "cgroup.controllers": "cpuset\n",
                 "cgroup.subtree_control": "", "cpuset.cpus.effective": cpu_list,
                 "cpuset.mems.effective": mem_list}
    for name, text in files.items():
        if not (root / name).exists():
            (root / name).write_text(text)
    return Cpusets(root, number, emulated=True)
