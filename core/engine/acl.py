"""PBS's access control lists: who may use the server, and who may put jobs in a queue.

An ACL is qmgr's list of entries (``acl_users = "alice,-bob,carol@*.example.org"``), read
in order: the first entry that names the user (group, host) decides, ``-`` refusing and
``+`` or no sign allowing; a name no entry matches is refused. It counts only while its
``acl_*_enable`` is true. What follows was checked on OpenPBS 23.06:

* A user entry is a user name, exact and case-sensitive (``pbs*`` names no one),
  optionally ``@host``. A group entry is a group name, exact, with no host part
  (``g@host`` names no group).
* A host, in a user entry or a host list, is compared without regard to case, from its
  end: an entry that starts with ``*`` names every host that ends with the rest of it
  after at least one more character (``*.example.org``, and ``*m`` names ``vm`` but
  ``*vm`` does not), and ``*`` alone names every host; a ``*`` anywhere else is a
  character like any other (``v*`` names no host ``vm``).
* The client's host is its address's name as the server resolves it; every pbsplug
  client is on the server's host (a UNIX socket), so its host is named by this host's
  short name and full one (`Engine.host_names`), never ``localhost`` nor an address (PBS,
  whose clients reach it by its host's name, refused ``bob@localhost`` to bob).
* A queue's ``acl_users``, ``acl_groups`` (any of the user's groups) and ``acl_hosts`` (the
  submitting host, here the server's own) refuse qsub into it, root's too, and qmove of a
  job whose owner they refuse, with 15007 (`Unauthorized Request`), the host list with
  15008 (`Access from host not allowed, or unknown host`), looked at first; a manager's
  qmove passes. A route queue's router passes over a destination that refuses the job's owner.
  A queue's ``acl_hosts`` switched on with no list lets in the server's own host only,
  so every pbsplug client.
* The server's ``acl_users`` (with ``acl_user_enable``) refuses every request of a user it
  does not name (qsub, qstat...); root and the other managers pass (pbsplug's reading:
  on PBS root passed, listed in acl_roots). The server's ``acl_hosts`` never refuses its
  own host, so no pbsplug client.
* An entry that is a sign alone (``+``, ``-``): OpenPBS stores it and takes it as the
  list's answer for everyone no entry names (``acl_users = +`` lets every user in,
  ``-root,+`` everyone but root, and the last such sign counts). pbsplug refuses it
  (`BadEntry`, 15014), so that no list lets everyone in or out unseen; one stored by an
  older pbsplug names no one and changes nothing (a name no other entry matches is
  still refused).
* A reservation's ``Authorized_Users``, ``Authorized_Groups`` and ``Authorized_Hosts``
  (pbs_rsub ``-U``/``-G``/``-H``) become its queue's ACLs, each switched on.

PBS keeps every such list in an order of its own, so "the first entry decides" reads the
stored order, not the order typed (`ordered`; checked on OpenPBS 23.06 with qmgr and
pbs_rsub). Each new entry goes before the first stored entry it must precede, else last:

* users (``acl_users``, ``managers``, ``operators``, ``acl_roots``): byte by byte, the sign
  left out, the lesser first and an entry that ends first before a longer one (``bob``,
  ``bob-y``, ``bob2``, ``bob@vm``: ``@`` is compared as a byte too); where both reach their
  ``@`` together, the two hosts go in the hosts' order;
* groups: by name, byte order;
* hosts: read from their last characters back, the first two that differ put the greater
  first (``zz,mm,aa``), but only while neither host has reached its first character: the
  one that reaches it first goes after (``x.y.com`` before ``z``, ``*.aa`` before ``aa``),
  and of two that reach it together the new one goes before a stored ``*``, after any
  other if it is a ``*`` itself, else the greater first (``y.aa,x.aa,*.aa``; ``-*.aa``
  set after ``*.aa`` goes before it).

The same entry twice (sign included: ``bob`` and ``+bob`` are two) is PBS's 15055,
``Duplicate entry in list``. A list holds at most `MAX_ENTRIES` entries (pbsplug's limit;
PBS sets none): PBS's way of ordering a list is quadratic, and a reservation's lists come
from any user.
"""

from __future__ import annotations

import grp
import os
import pwd
from collections.abc import Callable, Collection, Iterable, Mapping
from os.path import commonprefix
from typing import Any

from .. import units, values


def _on(value: Any) -> bool:
    """An ``acl_*_enable`` switch; one that does not read as a boolean (a row written by
    hand) counts as on: a list is never dropped because its switch is unreadable."""
    try:
        return units.parse_bool(value)
    except ValueError:
        return True


def _host_matches(pattern: str, hosts: Iterable[str]) -> bool:
    """Whether `pattern` (a host, or ``*`` followed by the end of one) names one of `hosts`
    (the short and the full names of one host), as PBS matches (the module's docstring)."""
    pattern = pattern.lower()
    for host in hosts:
        host = host.lower()
        if pattern == host or pattern == "*" or (
                pattern.startswith("*") and len(host) >= len(pattern)
                and host.endswith(pattern[1:])):
            return True
    return False


unsigned = values.acl_unsigned


def _entries(entries: Any) -> list[str]:
    """A stored list's entries."""
    if not isinstance(entries, (list, tuple)):
        entries = str(entries or "").split(",")
    return [e for e in (str(e).strip() for e in entries) if e]


def _decide(entries: Any, matches: Callable[[str], bool]) -> bool:
    """The first entry `matches` says names us decides (``-`` refuses); none refuses. A
    sign alone (stored by an older pbsplug) names no one."""
    for entry in _entries(entries):
        if values.acl_sign_alone(entry) is None and matches(unsigned(entry)):
            return not entry.startswith("-")
    return False


def user_allowed(entries: Any, user: str, hosts: Iterable[str]) -> bool:
    def matches(body: str) -> bool:
        name, at, where = body.partition("@")
        return name == user and (not at or _host_matches(where, hosts))
    return _decide(entries, matches)


def group_allowed(entries: Any, gids: Collection[int]) -> bool:
    """Whether a group ACL lets a user of groups `gids` in: each entry's group is looked
    up by name, once (a list is short; a user may be in a thousand groups)."""
    def matches(body: str) -> bool:
        try:
            return grp.getgrnam(body).gr_gid in gids
        except (KeyError, UnicodeError, ValueError):
            return False
    return _decide(entries, matches)


def group_named(entries: Any, groups: Collection[str]) -> bool:
    """Whether a group ACL lets in a job of the groups named `groups` (a replay's job: its
    trace's group, which this machine's group database need not know), by name."""
    return _decide(entries, lambda body: body in groups)


def host_allowed(entries: Any, hosts: Iterable[str]) -> bool:
    """Whether a host list lets in the host named `hosts`. An empty list lets in the
    server's own host, as PBS's does: `hosts` must be its names (every pbsplug client's)."""
    if not _entries(entries):
        return True
    return _decide(entries, lambda body: _host_matches(body, hosts))


def _host_precedes(new: str, old: str) -> bool:
    """Whether host `new` goes before host `old`: read from their last characters back, at
    the first that differ the greater goes first, as long as neither has reached its first
    character; one that reaches it first goes after the other; when both reach it together,
    the new one goes before a stored ``*``, a new ``*`` after any other, else the greater
    character first."""
    # (the common ending's length from C's string work, not a loop a character a turn: a
    # list's ordering compares each entry with most of the others)
    steps = max(0, min(len(commonprefix((new[::-1], old[::-1]))), len(new) - 1, len(old) - 1))
    i, j = len(new) - 1 - steps, len(old) - 1 - steps
    if i > 0 and j > 0:  # (where they differ)
        return new[i] > old[j]
    if i > 0 or j > 0:
        return j == 0 and i > 0
    if i < 0 or j < 0:  # (an empty host: stored by hand)
        return j < 0 <= i
    if old[0] == "*":  # (both ``*``: the new one first, ``-*`` set after ``*`` too)
        return True
    return new[0] != "*" and new[0] > old[0]


def _user_precedes(new: str, old: str) -> bool:
    """Byte by byte, the lesser first, unless both reach their ``@`` together (the same user
    name): then the hosts' order."""
    new, old = unsigned(new), unsigned(old)
    new_user, new_at, new_host = new.partition("@")
    old_user, old_at, old_host = old.partition("@")
    if new_at and old_at and new_user == old_user:
        return _host_precedes(new_host, old_host)
    return new < old


def _group_precedes(new: str, old: str) -> bool:
    return unsigned(new) < unsigned(old)


def _signed_host_precedes(new: str, old: str) -> bool:
    return _host_precedes(unsigned(new), unsigned(old))


#: Per kind of list, whether a new entry goes before a stored one (the module's docstring).
_PRECEDES = {"user": _user_precedes, "group": _group_precedes, "host": _signed_host_precedes}
#: The kind of each list attribute: servers', queues' and reservations' (as ACLs).
KIND = {"acl_users": "user", "managers": "user", "operators": "user", "acl_roots": "user",
        "Authorized_Users": "user", "acl_groups": "group", "Authorized_Groups": "group",
        "acl_hosts": "host", "Authorized_Hosts": "host"}


#: The most entries a list may hold (the module's docstring).
MAX_ENTRIES = values.ACL_MAX_ENTRIES


class DuplicateEntry(ValueError):
    """An entry already in the list (PBS's 15055)."""


class BadEntry(ValueError):
    """An entry no list may hold, and why (15014): a sign alone (the module's docstring)."""


class TooManyEntries(ValueError):
    """A list that would hold more than `MAX_ENTRIES` entries."""

    def __init__(self) -> None:
        super().__init__(values.ACL_TOO_MANY)


def insert(kind: str, entries: Iterable[str], new: Iterable[str],
           limit: int | None = MAX_ENTRIES) -> list[str]:
    """`entries` (a list of `kind`: ``user``, ``group`` or ``host``) with each of `new`
    put where PBS puts it; `BadEntry` for a sign alone among `new`, `DuplicateEntry` for
    one already there, `TooManyEntries` past `limit` entries (checked before any is put
    in; None: a list the server makes of lists it checked, as a reservation's with its
    owner)."""
    precedes = _PRECEDES[kind]
    out = list(entries)
    new = list(new)
    if limit is not None and len(out) + len(new) > limit:
        raise TooManyEntries
    for entry in new:
        if (why := values.acl_sign_alone(entry, kind)) is not None:
            raise BadEntry(why)
    for entry in new:
        if entry in out:
            raise DuplicateEntry(entry)
        at = next((i for i, old in enumerate(out) if precedes(entry, old)), len(out))
        out.insert(at, entry)
    return out


def ordered(kind: str, entries: Iterable[str], limit: int | None = MAX_ENTRIES) -> list[str]:
    """`entries` in PBS's order for a list of `kind` (`insert` into an empty one)."""
    return insert(kind, (), entries, limit)


def gids_of(user: str) -> frozenset[int]:
    """`user`'s group ids, its primary one among them (none for an unknown user)."""
    try:
        return frozenset(os.getgrouplist(user, pwd.getpwnam(user).pw_gid))
    except (KeyError, OSError):
        return frozenset()


def _refuses(table: Mapping[str, Any], name: str, allowed: Callable[[Any], bool]) -> bool:
    """Whether `table`'s ACL `name` (``acl_users``...) is on (its ``acl_user_enable``...)
    and `allowed` says no to its entries."""
    return _on(table.get(f"{name[:-1]}_enable", False)) and not allowed(table.get(name))


def queue_refusal(queue: Mapping[str, Any], user: str, hosts: Iterable[str],
                  groups: Collection[str] | None = None) -> str | None:
    """Which of `queue`'s ACLs that are on refuses `user`, submitting from the host named
    `hosts` (its short and full names), a job in it: ``acl_hosts`` (PBS's 15008),
    ``acl_users`` or ``acl_groups`` (15007), looked at in that order, as PBS does; None.
    The user's groups are this machine's (`gids_of`), or with `groups` those named there
    (`group_named`: a replay's)."""
    hosts = tuple(hosts)
    if _refuses(queue, "acl_hosts", lambda e: host_allowed(e, hosts)):
        return "acl_hosts"
    if _refuses(queue, "acl_users", lambda e: user_allowed(e, user, hosts)):
        return "acl_users"
    if _refuses(queue, "acl_groups", lambda e: group_allowed(e, gids_of(user))
                if groups is None else group_named(e, groups)):
        return "acl_groups"
    return None


def queue_allows(queue: Mapping[str, Any], user: str, hosts: Iterable[str]) -> bool:
    """Whether `queue`'s ACLs that are on let `user` put a job in it (`queue_refusal`)."""
    return queue_refusal(queue, user, hosts) is None


def server_allows(server: Mapping[str, Any], user: str, hosts: Iterable[str]) -> bool:
    """Whether the server's ACLs that are on let `user` (not a manager), on the host named
    `hosts`, send requests. Its ``acl_hosts`` never refuses the server's own host, as
    PBS's does not (checked), and every pbsplug client is on it."""
    return not _refuses(server, "acl_users", lambda e: user_allowed(e, user, hosts))
