"""PBS's access control lists: who may use the server, and who may put jobs in a queue.

An ACL is qmgr's list of entries (``acl_users = "alice,-bob,carol@*.example.org"``), read
in order: the first entry that names the user (group, host) decides, ``-`` refusing and
``+`` or no sign allowing; a name no entry matches is refused. It counts only while its
``acl_*_enable`` is true. What follows was checked on OpenPBS 23.06:

* A user entry is a user name, exact (``pbs*`` names no one), optionally ``@host``, where
  the host may start with ``*`` for a domain (``*.example.org``) or be ``*``.
* A queue's ``acl_users``, ``acl_groups`` (any of the user's groups) and ``acl_hosts`` (the
  submitting host, here the server's own) refuse qsub into it with 15007 (`Unauthorized
  Request`), root's too, and qmove of a job whose owner they refuse; a manager's qmove
  passes. A route queue's router passes over a destination that refuses the job's owner.
* The server's ``acl_users`` (with ``acl_user_enable``) refuses every request of a user it
  does not name (qsub, qstat...); root and the other managers pass (pbsplug's reading:
  on PBS root passed, listed in acl_roots).
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Iterable, Mapping
from typing import Any

from .. import units

#: A queue's lists and the switch that makes each count.
QUEUE_LISTS = (("acl_user_enable", "acl_users"), ("acl_group_enable", "acl_groups"),
               ("acl_host_enable", "acl_hosts"))


def _host_matches(pattern: str, host: str) -> bool:
    pattern, host = pattern.lower(), host.lower()
    if pattern == "*":
        return True
    if pattern.startswith("*"):
        return host.endswith(pattern[1:])
    if "." in pattern and "." in host:
        return pattern == host
    return pattern.split(".")[0] == host.split(".")[0]  # (a short name and its FQDN)


def _decide(entries: Any, matches) -> bool:
    """The first entry `matches` says names us decides (``-`` refuses); none refuses."""
    if not isinstance(entries, (list, tuple)):
        entries = [e for e in str(entries or "").split(",") if e.strip()]
    for entry in entries:
        entry = str(entry).strip()
        allow = not entry.startswith("-")
        if matches(entry.lstrip("+-")):
            return allow
    return False


def user_allowed(entries: Any, user: str, host: str) -> bool:
    def matches(body: str) -> bool:
        name, at, where = body.partition("@")
        return name == user and (not at or _host_matches(where, host))
    return _decide(entries, matches)


def group_allowed(entries: Any, groups: Iterable[str]) -> bool:
    mine = set(groups)
    return _decide(entries, lambda body: body in mine)


def host_allowed(entries: Any, host: str) -> bool:
    return _decide(entries, lambda body: _host_matches(body, host))


def groups_of(user: str) -> list[str]:
    """The names of `user`'s groups, its primary one first (none for an unknown user)."""
    try:
        gid = pwd.getpwnam(user).pw_gid
        ids = os.getgrouplist(user, gid)
    except (KeyError, OSError):
        return []
    names = []
    for one in ids:
        try:
            names.append(grp.getgrgid(one).gr_name)
        except KeyError:
            continue
    return names


def queue_allows(queue: Mapping[str, Any], user: str, host: str) -> bool:
    """Whether `queue`'s ACLs that are on let `user`, submitting from `host`, put a job in
    it."""
    for switch, key in QUEUE_LISTS:
        if not units.parse_bool(queue.get(switch, False)):
            continue
        if key == "acl_users" and not user_allowed(queue.get(key), user, host):
            return False
        if key == "acl_groups" and not group_allowed(queue.get(key), groups_of(user)):
            return False
        if key == "acl_hosts" and not host_allowed(queue.get(key), host):
            return False
    return True


def server_allows(server: Mapping[str, Any], user: str, host: str) -> bool:
    """Whether the server's ACLs that are on let `user` (not a manager) send requests."""
    if units.parse_bool(server.get("acl_user_enable", False)) and \
            not user_allowed(server.get("acl_users"), user, host):
        return False
    return not (units.parse_bool(server.get("acl_host_enable", False)) and
                not host_allowed(server.get("acl_hosts"), host))
