"""Schedulers and partitions as PBS's server keeps them (pbs-behavior.md §2; seed 001).

- A new sched object gets PBS's defaults: the next free ``sched_port`` from 15050,
  ``sched_priv`` and ``sched_log`` named after it under the engine home, ``sched_host`` this
  host, ``sched_user`` the server's user, ``scheduling`` False, ``state`` down.
- Every qmgr rule about schedulers, queues and nodes in partitions, refused with PBS's code
  and text (15215 to 15228).
- A scheduler's sched_priv and sched_log directories are checked (they exist, belong to
  ``sched_user``, mode 750 / 755 or tighter for others) before it schedules; a failure sets
  its comment and turns its scheduling off.

The manager (`manager.py`) calls these with the object's attributes before and after the
command; the checks read the other objects through the small `World` view.
"""

from __future__ import annotations

import errno
import os
import pwd
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..objects import is_route_queue
from .qmgr import QmgrError

DEFAULT_PARTITION = "pbs-default"
FIRST_SCHED_PORT = 15050

PBSE_SCHED_PRIV_EXIST = 15215
PBSE_SCHED_LOG_EXIST = 15216
PBSE_ROUTE_QUE_NO_PARTITION = 15217
PBSE_CANNOT_SET_ROUTE_QUE = 15218
PBSE_QUE_NOT_IN_PARTITION = 15219
PBSE_PARTITION_NOT_IN_QUE = 15220
PBSE_INVALID_PARTITION_QUE = 15221
PBSE_SCHED_OP_NOT_PERMITTED = 15223
PBSE_SCHED_PARTITION_ALREADY_EXISTS = 15224
PBSE_SCHED_JSF_INCOMPAT = 15226
PBSE_NODE_BUSY = 15227
PBSE_DEFAULT_PARTITION = 15228

#: The comments PBS sets on a scheduler whose directories fail its checks.
PRIV_INVALID = "PBS failed validation checks for sched_priv directory"
LOG_INVALID = "Unable to change the sched_log directory"


@dataclass
class World:
    """What the checks look at besides the object itself."""

    scheds: Mapping[str, Mapping[str, Any]]
    queues: Mapping[str, Mapping[str, Any]]
    nodes: Mapping[str, Mapping[str, Any]]
    busy_nodes: frozenset[str] = frozenset()   # nodes with jobs or reservations on them
    server_formula: str | None = None           # the server's job_sort_formula


def check_server(server: str, changed: set[str], new: Mapping[str, Any], world: World) -> None:
    """The server's job_sort_formula may not differ from a scheduler's (either way)."""
    formula = new.get("job_sort_formula")
    if "job_sort_formula" in changed and formula and any(
            a.get("job_sort_formula") and a.get("job_sort_formula") != formula
            for a in world.scheds.values()):
        raise _refuse(PBSE_SCHED_JSF_INCOMPAT,
                      "Server's job_sort_formula value is incompatible with sched's",
                      "server", server)


def partitions_of(attrs: Mapping[str, Any]) -> list[str]:
    """A sched object's partitions (a list, or a comma-separated string)."""
    value = attrs.get("partition")
    if value is None:
        return []
    items = value if isinstance(value, list) else str(value).split(",")
    return [p.strip() for p in items if str(p).strip()]


def sched_defaults(name: str, home: Path, host: str, user: str,
                   scheds: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """What ``create sched NAME`` sets."""
    used = {int(a["sched_port"]) for a in scheds.values() if a.get("sched_port")}
    port = FIRST_SCHED_PORT
    while port in used:
        port += 1
    return {"sched_port": port, "sched_host": host, "sched_user": user,
            "sched_priv": str(home / f"sched_priv_{name}"),
            "sched_log": str(home / f"sched_logs_{name}"),
            "scheduling": False, "scheduler_iteration": 600, "state": "down"}


def _refuse(code: int, text: str, obj_type: str, name: str) -> QmgrError:
    return QmgrError(code, text, obj_type=obj_type, obj_name=name)


def check_sched(name: str, changed: set[str], new: Mapping[str, Any], world: World) -> None:
    """The rules for a scheduler's new attributes (`changed` are those the command set)."""
    if name == "default" and changed & {"partition", "sched_priv", "sched_log", "sched_port",
                                        "sched_host"}:
        raise _refuse(PBSE_SCHED_OP_NOT_PERMITTED,
                      "Operation is not permitted on default scheduler", "sched", name)
    if "partition" in changed:
        for part in partitions_of(new):
            if part == DEFAULT_PARTITION:
                raise _refuse(PBSE_DEFAULT_PARTITION, "Default partition name is not allowed",
                              "sched", name)
            if any(part in partitions_of(a) for other, a in world.scheds.items()
                   if other != name):
                raise _refuse(PBSE_SCHED_PARTITION_ALREADY_EXISTS,
                              "Partition is already associated with other scheduler",
                              "sched", name)
    formula = new.get("job_sort_formula")
    if "job_sort_formula" in changed and formula and world.server_formula and \
            formula != world.server_formula:
        raise _refuse(PBSE_SCHED_JSF_INCOMPAT,
                      "Server's job_sort_formula value is incompatible with sched's",
                      "sched", name)
    for key, code in (("sched_priv", PBSE_SCHED_PRIV_EXIST),
                      ("sched_log", PBSE_SCHED_LOG_EXIST)):
        value = new.get(key)
        if key in changed and value and any(
                os.path.normpath(str(a.get(key) or "")) == os.path.normpath(str(value))
                for other, a in world.scheds.items() if other != name):
            raise _refuse(code, f"Another scheduler also has same value for its {key} "
                          "directory", "sched", name)


def check_queue(name: str, changed: set[str], new: Mapping[str, Any], world: World) -> None:
    part = new.get("partition")
    route = is_route_queue(new)
    if "partition" in changed and part:
        if part == DEFAULT_PARTITION:
            raise _refuse(PBSE_DEFAULT_PARTITION, "Default partition name is not allowed",
                          "queue", name)
        if route:
            raise _refuse(PBSE_ROUTE_QUE_NO_PARTITION,
                          "Cannot assign a partition to route queue", "queue", name)
        for node in world.nodes.values():
            if node.get("queue") == name and node.get("partition") and \
                    node.get("partition") != part:
                raise _refuse(PBSE_INVALID_PARTITION_QUE, "Invalid partition in queue",
                              "queue", name)
    if "queue_type" in changed and route and part:
        raise _refuse(PBSE_CANNOT_SET_ROUTE_QUE,
                      "Route queues are incompatible with the partition attribute",
                      "queue", name)


def check_node(name: str, changed: set[str], old: Mapping[str, Any], new: Mapping[str, Any],
               world: World) -> None:
    part, queue = new.get("partition"), new.get("queue")
    if "partition" in changed:
        if part == DEFAULT_PARTITION:
            raise _refuse(PBSE_DEFAULT_PARTITION, "Default partition name is not allowed",
                          "node", name)
        if part != old.get("partition") and name in world.busy_nodes:
            raise _refuse(PBSE_NODE_BUSY, "Node is busy", "node", name)
        queue_part = world.queues.get(str(queue), {}).get("partition") if queue else None
        if part and queue and queue_part != part:
            raise _refuse(PBSE_QUE_NOT_IN_PARTITION,
                          f"Queue {queue} is not part of partition for node", "node", name)
    if "queue" in changed and queue and part:
        if world.queues.get(str(queue), {}).get("partition") != part:
            raise _refuse(PBSE_PARTITION_NOT_IN_QUE,
                          f"Partition {part} is not part of queue for node", "node", name)


def sched_uid(attrs: Mapping[str, Any]) -> int:
    """sched_user's uid (this process's when none is set); -1 for a user unknown here."""
    user = str(attrs.get("sched_user") or "")
    try:
        return pwd.getpwnam(user).pw_uid if user else os.geteuid()
    except KeyError:
        return -1


def directory_problems(attrs: Mapping[str, Any]) -> list[str]:
    """Why the scheduler's sched_priv or sched_log fails PBS's checks: each must be a
    directory owned by sched_user, writable by nobody else (sched_priv 750, sched_log 755
    at most). The comments PBS sets, or []."""
    uid = sched_uid(attrs)
    problems = []
    for key, most, comment in (("sched_priv", 0o750, PRIV_INVALID),
                               ("sched_log", 0o755, LOG_INVALID)):
        path = attrs.get(key)
        try:
            info = os.stat(str(path)) if path else None
        except OSError:
            info = None
        if info is None or not stat.S_ISDIR(info.st_mode) or info.st_uid != uid or \
                stat.S_IMODE(info.st_mode) & ~most:
            problems.append(comment)
    return problems


def make_directories(attrs: Mapping[str, Any]) -> None:
    """Make a scheduler's default directories when they do not exist yet (as PBS's
    installation makes sched_priv and sched_logs), owned by sched_user, 750 and 755: level
    by level through descriptors (`open_sched_dir`), so a link planted on the way is never
    followed where someone but root could have put it, and the new folder is handed over
    through its descriptor. A folder that exists is left as it is, and one that cannot be
    reached so is not made (the scheduler's comment says why, `directory_problems`)."""
    owner = sched_uid(attrs)
    user = str(attrs.get("sched_user") or "")
    try:
        ids = pwd.getpwnam(user) if user else None
    except KeyError:
        ids = None
    for key, mode in (("sched_priv", 0o750), ("sched_log", 0o755)):
        path = attrs.get(key)
        if not path:
            continue
        try:
            fd, made = open_sched_dir(str(path), owner, make=mode)
        except OSError:
            continue  # not made: `directory_problems` says what is wrong with it
        try:
            if made:
                os.fchmod(fd, mode)
                if ids is not None and os.geteuid() == 0:
                    os.fchown(fd, ids.pw_uid, ids.pw_gid)
        finally:
            os.close(fd)


def open_sched_dir(directory: str, owner: int, make: int | None = None) -> tuple[int, bool]:
    """A descriptor of the folder `directory`, opened level by level from ``/``: each level
    root's or `owner`'s (or refused), and a link followed only while every level before it
    is root's alone (no one else could have put it there, as /var/run -> /run). A link
    sched_user put at any level it may write, the last or one above, had root write
    where it pointed. With `make` (a mode), missing levels are made (the last with that
    mode, those above 0755, root's: a level found replaced between its mkdir and its
    opening is refused); the flag says whether the last one was."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOCTTY
    if not directory.startswith("/"):
        raise OSError(errno.EINVAL, "not an absolute path", directory)
    parts = [p for p in directory.split("/") if p and p != "."]
    if ".." in parts:
        raise OSError(errno.EINVAL, "'..' in a scheduler's folder", directory)
    fd = os.open("/", flags)
    trusted = True  # every level so far root's and writable by root alone
    made = False
    try:
        for at, part in enumerate(parts):
            made = False
            try:
                sub = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
            except FileNotFoundError:
                if make is None:
                    raise
                mode = make if at == len(parts) - 1 else 0o755
                os.mkdir(part, mode, dir_fd=fd)
                sub = os.open(part, flags | os.O_NOFOLLOW, dir_fd=fd)
                made = True
                info = os.fstat(sub)
                # Swapped meanwhile (an empty check: btrfs counts no links of folders).
                if info.st_uid != os.geteuid() or os.listdir(sub):
                    os.close(sub)
                    raise OSError(errno.EPERM, f"{part!r} was replaced as it was made",
                                  directory) from None
                os.fchmod(sub, mode)  # whatever the umask (the server's is 077)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR) or not trusted or \
                        os.stat(part, dir_fd=fd, follow_symlinks=False).st_uid != 0:
                    raise OSError(errno.EPERM, f"{part!r} is a link or no folder, and not "
                                  "root's where only root may write", directory) from None
                sub = os.open(part, flags, dir_fd=fd)  # root's link in root's folder
            os.close(fd)
            fd = sub
            info = os.fstat(fd)
            if info.st_uid not in (owner, 0):
                raise OSError(errno.EPERM, "a level on the way is not root's nor "
                              "sched_user's", directory)
            trusted = trusted and info.st_uid == 0 and not info.st_mode & 0o022
        return fd, made
    except BaseException:
        os.close(fd)
        raise
