"""Access control lists decide as OpenPBS 23.06's do: for each row of a table, the same list
is set (as root, with qmgr) on the real PBS (conftest.py) and on a local engine in the same
session, and the second Unix user's command is answered with the same exit status and
standard error on both (a job id printed is replaced by ``ID``; a refusal's text ends in a
blank on both, ``qsub: Unauthorized Request ``). The rows cover how a host
part names the client's host (``user@host`` in acl_users, acl_hosts), a group entry with a
host, the server's lists, and pbs_rsub's -U/-G/-H lists read with their signs.

Both servers' clients are on the server's host: PBS's reach it by its host's name (the
recipe's namespace maps it to an address of its own), pbsplug's over a UNIX socket. In a
row, ``{host}`` is that side's short host name, ``{user}`` the second user and ``{group}``
their group; in the answers each side's host becomes ``HOST``.

`DIFFERENT` holds the rows that are expected to differ, each with its reason
(docs/engine.md, "Access control lists"): a row there that comes to agree fails, so that
it leaves the table. The real PBS is shared: the rows' queue is deleted, the server's lists
are put back and the reservations deleted after the table."""

from __future__ import annotations

import grp
import pwd
import re
import socket
import time

from pbsplug.engine.testing import LocalEngine

from .conftest import WRAPPERS, RealPbs, assert_agree
from .test_pbs_parity import _norm, _pbs_host

QUEUE = "pqacl"

#: (qmgr settings made as root before the command, the command the second user runs).
#: Each row starts from the queue with no ACL on and the server's lists off.
ROWS: list[tuple[str, str]] = [
    # user@host: the host part, against the client's host
    *((f"set queue {QUEUE} acl_user_enable=true,acl_users='{{user}}@{h}'", "qsub")
      for h in ("{host}", "{HOST}", "*", "*{last}", "*{LAST}", "*{host}", "{first}*",
                "x*{host}", "*.{host}", "**", "*.*", "{host}.", "localhost", "127.0.0.1",
                "other.example.com", "*.example.com", "{host}.example.com", "")),
    (f"set queue {QUEUE} acl_user_enable=true,acl_users='{{USER}}'", "qsub"),
    (f"set queue {QUEUE} acl_user_enable=true,acl_users='-{{user}}@*,{{user}}'", "qsub"),
    (f"set queue {QUEUE} acl_user_enable=true,acl_users='{{user}}@{{host}},-{{user}}'", "qsub"),
    (f"set queue {QUEUE} acl_user_enable=true,acl_users='--,{{user}}'", "qsub"),
    # acl_hosts: the client's host, 15008 when refused; switched on with no list
    *((f"set queue {QUEUE} acl_host_enable=true,acl_hosts='{h}'", "qsub")
      for h in ("{host}", "{HOST}", "*", "*{last}", "{first}*", "*.{host}", "localhost",
                "127.0.0.1", "other", "*.example.com", "-{host},*")),
    (f"set queue {QUEUE} acl_host_enable=true", "qsub"),
    # the host list is looked at before the user list
    (f"set queue {QUEUE} acl_host_enable=true,acl_hosts=other,acl_user_enable=true,"
     "acl_users=nobody", "qsub"),
    # groups: a name, exact, no host part
    *((f"set queue {QUEUE} acl_group_enable=true,acl_groups='{g}'", "qsub")
      for g in ("{group}", "{GROUP}", "{group}@{host}", "{group}@*", "-{group},{group}")),
    # the server's lists: acl_users with hosts; acl_hosts never refuses its own host
    *((f"set server acl_users='{{user}}@{h}'\nset server acl_user_enable=true", "qstat")
      for h in ("{host}", "*.example.com", "*{last}", "localhost")),
    ("set server acl_hosts='other.example.com'\nset server acl_host_enable=true", "qstat"),
    # other commands the server's acl_users refuses: a job named, pbs_rstat, pbsnodes
    *(("set server acl_users=root\nset server acl_user_enable=true", command)
      for command in ("qhold 99999", "qsig 99999", "qmove workq 99999", "pbs_rstat",
                      "pbsnodes -a", "pbsnodes {host}")),
    # a sign alone
    (f"set queue {QUEUE} acl_user_enable=true,acl_users=+", "qsub"),
    (f"set queue {QUEUE} acl_user_enable=true,acl_users='-root,+'", "qsub"),
    # pbs_rsub's lists: one sign is the sign, every sign kept
    *(("", f"pbs_rsub {opt} {value}") for opt, value in (
        ("-U", "+{user},-bob"), ("-U", "--"), ("-U", "+-"), ("-U", "-+,++bob"),
        ("-G", "--,+root"), ("-H", "+-,-other"), ("-U", ",bob"), ("-U", "bob,,carol"),
        ("-U", "+"), ("-G", "-"), ("-U", "+,{user}"))),
]

_SIGN = ("OpenPBS stores a sign alone and reads it as the list's answer for everyone no "
         "entry names; pbsplug refuses it (qmgr's or pbs_rsub's one line naming it), so "
         "that no list lets everyone in or out unseen")
_RSUB_USAGE = ("the same exit status and first line; OpenPBS's pbs_rsub prints its usage "
               "after it, pbsplug's does not")
DIFFERENT: dict[str, str] = {
    f"set queue {QUEUE} acl_user_enable=true,acl_users=+": _SIGN,
    f"set queue {QUEUE} acl_user_enable=true,acl_users='-root,+'": _SIGN,
    "pbs_rsub -U +": _SIGN, "pbs_rsub -G -": _SIGN, "pbs_rsub -U +,{user}": _SIGN,
    "pbs_rsub -U ,bob": _RSUB_USAGE, "pbs_rsub -U bob,,carol": _RSUB_USAGE,
}

#: What the rows may leave, put back after each row (both sides; errors ignored).
RESET = (f"set queue {QUEUE} acl_user_enable=false", f"unset queue {QUEUE} acl_users",
         f"set queue {QUEUE} acl_host_enable=false", f"unset queue {QUEUE} acl_hosts",
         f"set queue {QUEUE} acl_group_enable=false", f"unset queue {QUEUE} acl_groups",
         "set server acl_user_enable=false", "unset server acl_users",
         "set server acl_host_enable=false", "unset server acl_hosts")

#: A reservation id as pbs_rsub prints it.
RESV_ID = re.compile(r"^R\d+\.\S+")


class _Side:
    """One server: its root qmgr, the second user's commands, and what they made."""

    def __init__(self, host: str, user: str):
        self.host = host
        self.made_jobs: list[str] = []
        self.made_resvs: list[str] = []
        group = grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
        self.names = {"host": host, "HOST": host.upper(), "first": host[0],
                      "last": host[-1], "LAST": host[-1].upper(), "user": user,
                      "USER": user.upper(), "group": group, "GROUP": group.upper()}
        self.hours = 2

    def fill(self, text: str) -> str:
        return text.format(**self.names)

    def command(self, which: str) -> tuple[list[str], str | None]:
        if which == "qsub":
            return ["qsub", "-h", "-q", QUEUE], "true\n"
        if which == "qstat":
            return ["qstat", "-B"], None
        if not which.startswith("pbs_rsub"):
            return self.fill(which).split(), None
        self.hours += 1  # (each reservation its own window: none is denied for another)
        start = time.strftime("%Y%m%d%H%M", time.localtime(time.time() + 3600 * self.hours))
        _, opt, value = which.split()
        return ["pbs_rsub", "-R", start, "-D", "00:10:00", opt, self.fill(value)], None

    def answer(self, done, which: str) -> tuple[int, str, str]:
        """Exit status, standard output (a job or reservation id as ``ID``; qstat's table
        left out: the counts are each server's own) and standard error."""
        out = done.stdout.strip()
        if which == "qstat":
            out = ""
        elif done.returncode == 0 and out:
            made = self.made_resvs if RESV_ID.match(out) else self.made_jobs
            made.append(out.split()[0])
            out = " ".join(["ID", *out.split()[1:]])
        return done.returncode, out, _norm(done.stderr, self.host)


class _Real(_Side):
    def __init__(self, pbs: RealPbs, user: str):
        super().__init__(_pbs_host(pbs), user)
        self.pbs, self.user = pbs, user

    def qmgr(self, text: str):
        return self.pbs.run("qmgr", "-c", text, check=False)

    def run(self, which: str):
        argv, stdin = self.command(which)
        argv = [str(WRAPPERS / "pbs-ns"), "runuser", "-u", self.user, "--",
                f"/opt/pbs/bin/{argv[0]}", *argv[1:]]
        done = self.pbs.run(*argv, input=stdin, check=False)
        done.stderr = done.stderr.replace("/opt/pbs/bin/pbsnodes:", "pbsnodes:")  # (argv[0])
        return self.answer(done, which)

    def stat_resv(self, resv_id: str) -> str:
        return self.pbs.run("pbs_rstat", "-f", resv_id, check=False).stdout

    def clean(self) -> None:
        if self.made_jobs:
            self.pbs.run("qdel", "-W", "force", *self.made_jobs, check=False)
        for resv_id in self.made_resvs:
            self.pbs.run("pbs_rdel", resv_id, check=False)


class _Engine(_Side):
    def __init__(self, local: LocalEngine, attacker, user: str):
        super().__init__(socket.gethostname().split(".")[0], user)
        self.local, self.attacker = local, attacker

    def qmgr(self, text: str):
        return self.local.pbs("qmgr", "-c", text)

    def run(self, which: str):
        argv, stdin = self.command(which)
        return self.answer(self.attacker.pbs(self.local, *argv, input=stdin), which)

    def stat_resv(self, resv_id: str) -> str:
        return self.local.pbs("pbs_rstat", "-f", resv_id).stdout

    def clean(self) -> None:
        if self.made_jobs:
            self.local.pbs("qdel", *self.made_jobs)
        for resv_id in self.made_resvs:
            self.local.pbs("pbs_rdel", resv_id)


def _lists(side: _Side, resv_id: str) -> list[str]:
    """A reservation's Authorized_* lines, its host as ``HOST``."""
    return [_norm(line.strip(), side.host) for line in side.stat_resv(resv_id).splitlines()
            if line.strip().startswith("Authorized_")]


def _row(side: _Side, settings: str, command: str):
    """The second user's answer after `settings`; for a reservation, its lists too."""
    try:
        for line in side.fill(settings).splitlines():
            done = side.qmgr(line)
            if done.returncode != 0:
                return ("qmgr", line, done.returncode, _norm(done.stderr, side.host))
        answer = side.run(command)
        if answer[0] == 0 and side.made_resvs and command.startswith("pbs_rsub"):
            return (*answer, _lists(side, side.made_resvs[-1]))
        return answer
    finally:
        for text in RESET:
            side.qmgr(text)


def test_acls_decide_as_openpbs(pbs, local, attacker, unix_user):
    real, mine = _Real(pbs, unix_user), _Engine(local, attacker, unix_user)
    differences, agreed = [], []
    create = f"create queue {QUEUE} queue_type=execution,enabled=true,started=true"
    try:
        for side in (real, mine):
            side.qmgr(f"delete queue {QUEUE}")
            assert side.qmgr(create).returncode == 0
        for settings, command in ROWS:
            label = f"{settings} | {command}".strip(" |")
            key = command if command.startswith("pbs_rsub") else settings
            key = label if command not in ("qsub", "qstat") else key
            theirs, ours = _row(real, settings, command), _row(mine, settings, command)
            if key in DIFFERENT and DIFFERENT[key] == _RSUB_USAGE:
                theirs = (theirs[0], theirs[1], theirs[2].splitlines()[0])
                ours = (ours[0], ours[1], ours[2].splitlines()[0])
                if theirs != ours:
                    differences.append(f"{label}\n  pbs:    {theirs!r}\n  engine: {ours!r}")
                continue
            if theirs != ours and key not in DIFFERENT:
                differences.append(f"{label}\n  pbs:    {theirs!r}\n  engine: {ours!r}")
            if theirs == ours and key in DIFFERENT:
                agreed.append(label)
    finally:
        for side in (real, mine):
            side.clean()
            for text in RESET:
                side.qmgr(text)
            side.qmgr(f"delete queue {QUEUE}")
    assert_agree(differences, len(ROWS))
    assert not agreed, f"rows in DIFFERENT that now agree: {agreed}"
