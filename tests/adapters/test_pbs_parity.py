"""The local engine's qmgr answers as OpenPBS 23.06's does: the same standard output, standard
error and exit status for each command of a table, run on the real PBS (conftest.py) and on a
local engine in the same session. PBS admins script against exit statuses, so they count as
much as the texts.

Normalised, and only this: each server's host name (``{host}`` in a command is that side's
host; in the answers it becomes ``HOST``), and the ``Max open servers: 49`` line OpenPBS's qmgr
prints first when it reads commands from a file (a diagnostic of its client library about its
connection table, which the engine has not), and a queue's ``resources_assigned.*`` lines,
which OpenPBS lists (at 0) once any job has run in the queue and the engine keeps for no
queue: the shared PBS has run other tests' jobs in workq, a fresh one none. Attributes the
engine does not have (the server's ``mailer`` or ``license_count``, a node's
``pbs_version``...) are kept out of the table
by listing chosen attributes (``list node {host} ntype,state``) instead of whole objects; the
remaining differences are `DIFFERENT`, each with its reason (docs/engine.md, "qmgr").

Privilege rows run as a second Unix user (neither manager nor operator) on both: OpenPBS's
command through its namespace as that user, the engine's through the `attacker`'s own
environment. Operator rows run as that user too, while the `operator` fixture (conftest.py)
has made it an operator of both servers (and puts their ``operators`` back afterwards).

The real PBS is shared: rows change nothing on it that they do not put back (`CLEANUP`)."""

from __future__ import annotations

import re
import socket

from pbsplug.engine.testing import LocalEngine

from .conftest import WRAPPERS, RealPbs, assert_agree

#: (qmgr -c text, as whom: "" root, "user" the second user). Each row is one qmgr -c.
ROWS: list[tuple[str, str]] = [
    # syntax: each kind has its own exit status (1 command, 2 object type, 3 names, 4 attrs)
    ("frobnicate", ""),
    ("set", ""),
    ("list frob", ""),
    ("set server", ""),
    ("set queue workq enabled", ""),
    ("set queue workq enabled =", ""),
    ("set queue workq = true", ""),
    ("set queue workq enabled = true,", ""),
    ("unset queue workq enabled = true", ""),
    ("set server no_such_attribute = 1", ""),
    ("list queue workq,", ""),
    ("list queue ,workq", ""),
    ("create queue 1abc", ""),
    ("create resource 1bad type = long", ""),
    # one -c is one command: `;` and newlines are part of it
    ("list queue workq;list queue workq", ""),
    ("list queue workq ; list queue workq", ""),
    ("list queue workq\nlist queue workq", ""),
    ("set queue workq enabled = true; set queue nosuch enabled = true", ""),
    ("list queue nosuch\nlist queue workq", ""),
    # unknown objects, by verb
    ("list queue nosuch", ""), ("print queue nosuch", ""), ("set queue nosuch enabled = true", ""),
    ("delete queue nosuch", ""),
    ("list node nosuch", ""), ("print node nosuch", ""), ("set node nosuch comment = x", ""),
    ("delete node nosuch", ""),
    ("list hook nosuch", ""), ("print hook nosuch", ""), ("set hook nosuch enabled = true", ""),
    ("delete hook nosuch", ""),
    ("list pbshook nosuch", ""), ("set pbshook nosuch enabled = true", ""),
    ("list sched nosuch", ""), ("print sched nosuch", ""),
    ("set sched nosuch scheduling = false", ""), ("delete sched nosuch", ""),
    ("list resource nosuch", ""), ("print resource nosuch", ""),
    ("set resource nosuch type = long", ""), ("delete resource nosuch", ""),
    ("list server nosuch", ""), ("print server nosuch", ""), ("list queue workq@nosuch", ""),
    ("list queue workq,nosuch", ""), ("list queue nosuch,workq", ""),
    # pbs hooks
    ("create hook PBSx", ""), ("create pbshook X", ""), ("delete pbshook PBS_power", ""),
    ("print pbshook X", ""), ("print pbshook PBS_power", ""),
    # existing objects, bad attributes and values, read-only attributes
    ("create queue workq", ""), ("create sched default", ""),
    ("create sched averyveryverylongschedname", ""),
    ("create queue toolongqueuename16", ""), ("create node bad!name", ""),
    ("set queue workq no_such_attribute = 1", ""), ("set queue workq max_running = lots", ""),
    ("set server scheduler_iteration = abc", ""), ("set queue workq Priority = 5000", ""),
    ("set queue workq queue_type = bogus", ""), ("create resource pq_r type = nosuchtype", ""),
    ("set node {host} state = busy", ""), ("set node {host} resources_available.nosuchres = 1", ""),
    ("set server resources_default.nosuchres = 1", ""),
    ("unset server server_state", ""), ("unset queue workq total_jobs", ""),
    ("set server server_state = Idle", ""), ("set sched default partition = p1", ""),
    ("list queue workq nosuchattr", ""), ("print queue workq nosuchattr", ""),
    ("set queue workq acl_hosts = 'a,b,a'", ""), ("set queue workq acl_users += 'x,x'", ""),
    ("set queue workq acl_groups = x", ""), ("set queue workq acl_groups += x", ""),
    # list and print, with and without names, and abbreviations
    ("list queue workq", ""), ("print queue workq", ""), ("l q workq", ""),
    ("list queue workq enabled,started", ""), ("list queue workq,workq", ""),
    ("list queue @default", ""), ("list queue workq@{host}", ""),
    ("list node {host} ntype,state", ""), ("list node @default ntype", ""),
    ("list queue", ""), ("print queue", ""), ("list node", ""), ("print node", ""),
    ("c q", ""), ("d q", ""), ("set queue enabled = true", ""), ("delete node", ""),
    ("list resource", ""), ("print resource", ""),
    ("s s scheduling = true", ""), ("s q workq enabled = t", ""),
    ("active queue", ""), ("active server", ""), ("active queue workq", ""),
    ("active server {host}", ""), ("active server {host},default", ""),
    ("active server nosuch", ""), ("active node nosuch", ""), ("active sched", ""),
    ("active sched default", ""), ("active sched nosuch", ""),
    ("active hook", ""), ("active hook nosuch", ""), ("active pbshook", ""),
    ("active pbshook PBS_power", ""), ("active resource", ""), ("active resource nosuch", ""),
    # a server and no name: nothing is created
    ("create queue @default", ""), ("create queue @{host}", ""), ("create node @default", ""),
    ("create sched @default", ""), ("create hook @default", ""),
    ("create resource @default", ""),
    # the server named is the one qmgr's messages name (svr=)
    ("set queue nosuch@{host} enabled = true", ""), ("list queue nosuch@{host}", ""),
    ("set server {host} no_such_attribute = 1", ""),
    ("quit", ""), ("exit", ""),
    # create, then create again, then delete (CLEANUP deletes it whatever happens)
    ("create queue pq1", ""), ("create queue pq1", ""), ("list queue pq1 queue_type", ""),
    ("delete queue pq1", ""), ("delete queue pq1", ""),
    # old-style and new-style limits are never set together, anywhere (15141); the
    # cleanup unsets what a row leaves (never `-=`: OpenPBS keeps a list emptied so in its
    # database, and has it back at its next start)
    ("create queue pq_lim queue_type = execution", ""),
    ("set server max_running = 10", ""), ("set server max_run = '[o:PBS_ALL=10]'", ""),
    ("set queue pq_lim max_run_res.ncpus = '[o:PBS_ALL=10]'", ""),
    ("set queue pq_lim max_queued = '[o:PBS_ALL=10]'", ""),
    ("set server queued_jobs_threshold = '[o:PBS_ALL=10]'", ""),
    ("list queue pq_lim max_run_res,max_queued", ""), ("unset server max_running", ""),
    ("set queue pq_lim max_queuable = 5", ""), ("set server max_run = '[o:PBS_ALL=10]'", ""),
    ("unset queue pq_lim max_queuable", ""),
    ("set queue pq_lim max_run = '[u:PBS_GENERIC=4]'", ""),
    ("set queue pq_lim max_queuable = 5", ""), ("set server max_user_run = 5", ""),
    ("set queue workq max_group_run = 5", ""), ("unset queue pq_lim max_run", ""),
    ("set server max_running = 5, max_run = '[o:PBS_ALL=5]'", ""),
    ("list server max_running,max_run", ""), ("delete queue pq_lim", ""),
    # a route queue's attribute on an execution queue, and the other way round (15026);
    # a queue without a type takes its first typed attribute's
    ("create queue pq_ex queue_type = execution", ""),
    ("set queue pq_ex route_held_jobs = true", ""), ("set queue pq_ex comment = x", ""),
    ("list queue pq_ex route_held_jobs", ""), ("unset queue pq_ex route_held_jobs", ""),
    ("set queue pq_ex route_waiting_jobs = true", ""),
    ("unset queue pq_ex route_waiting_jobs", ""),
    ("set queue pq_ex route_retry_time = 10", ""), ("unset queue pq_ex route_retry_time", ""),
    ("set queue pq_ex route_lifetime = 10", ""), ("unset queue pq_ex route_lifetime", ""),
    ("set queue pq_ex route_destinations = workq", ""),
    ("unset queue pq_ex route_destinations", ""),
    ("create queue pq_ex2 queue_type = execution, route_lifetime = 10", ""),
    ("list queue pq_ex2 route_lifetime", ""),
    ("create queue pq_rt queue_type = route", ""),
    ("set queue pq_rt kill_delay = 5", ""), ("unset queue pq_rt kill_delay", ""),
    ("set queue pq_rt max_user_run = 5", ""), ("unset queue pq_rt max_user_run", ""),
    ("set queue pq_rt default_chunk.ncpus = 1", ""),
    ("unset queue pq_rt default_chunk.ncpus", ""),
    ("set queue pq_rt resources_available.ncpus = 2", ""),
    ("unset queue pq_rt resources_available.ncpus", ""),
    ("set queue pq_rt max_running = 5", ""), ("unset queue pq_rt max_running", ""),
    ("create queue pq_un", ""), ("set queue pq_un route_held_jobs = true", ""),
    ("set queue pq_un kill_delay = 5", ""), ("set queue pq_un queue_type = execution", ""),
    ("delete queue pq_ex", ""), ("delete queue pq_rt", ""), ("delete queue pq_un", ""),
    # kill_delay: a whole number (a negative one too); anything else is 15014
    ("set queue workq kill_delay = abc", ""), ("set queue workq kill_delay = 1.5", ""),
    ("set queue workq kill_delay = 30s", ""), ("set queue workq kill_delay = -5", ""),
    ("list queue workq kill_delay", ""), ("set queue workq kill_delay = 30", ""),
    ("list queue workq kill_delay", ""), ("unset queue workq kill_delay", ""),
    # privilege: a user who is neither manager nor operator
    ("list hook", "user"), ("list pbshook", "user"), ("print hook", "user"),
    ("list hook nosuch", "user"), ("print hook nosuch", "user"),
    ("list pbshook PBS_power", "user"),
    ("set hook nosuch enabled = true", "user"), ("create queue zz", "user"),
    ("set queue workq enabled = true", "user"), ("unset queue workq enabled", "user"),
    ("delete queue workq", "user"), ("list queue workq", "user"),
    ("print queue workq", "user"), ("set server scheduling = true", "user"),
    ("set sched default scheduling = true", "user"),
    ("create resource pq_r type = long", "user"),
    # last: PBS sets workq's comment here (CLEANUP unsets it)
    ("set queue nosuch,workq comment = x", ""), ("list queue workq comment", ""),
]

#: Rows whose answers still differ, and why (docs/engine.md, "qmgr"). Each is expected to
#: differ: a row that comes to agree fails, so that it leaves this table.
_SAYS = ("the same exit status and output; where PBS's qmgr says nothing of what was wrong "
         "the engine says it (every error of pbsplug's names what was wrong)")
_NAMES = ("the same code, exit status and output; PBS's 15014 names no attribute, the "
          "engine's names the one that was wrong")
_FORMULA = ("the same exit status and output; PBS's qmgr writes server_priv/sched_formula "
            "itself before it asks the server, and run by a user who may not write there "
            "first says it failed to; the engine's qmgr writes no file")
_CRASH = ("OpenPBS 23.06's qmgr crashes on it (SIGSEGV, nothing printed); the engine says "
          "that a sched has no active list and exits 2, qmgr's status for a bad object type")
_TYPED = ("after the same refusal of a queue's attribute its type does not take (15026, "
          "`Warning: type of queue Q incompatible with attribute A`), PBS has kept the "
          "attribute (its queue made at create too), and answers 15026 to every later "
          "change of that queue while it stays, which looks like a bug; the engine's "
          "command changes nothing, so its later commands are answered as any")
#: Reasons that still require PBS's exit status and standard output.
_SAME_STATUS = (_SAYS, _NAMES, _FORMULA)
DIFFERENT: dict[str, str] = {
    "list queue workq comment":
        "after `set queue nosuch,workq comment = x` (same answers: 15018, exit 170) PBS has "
        "set workq's comment; the engine's command is one transaction and changed neither",
    "list sched nosuch": _SAYS, "print sched nosuch": _SAYS, "print pbshook X": _SAYS,
    "print pbshook PBS_power": _SAYS, "create queue toolongqueuename16": _SAYS,
    "set queue workq max_running = lots": _NAMES,
    "set server scheduler_iteration = abc": _NAMES,
    "set queue workq Priority = 5000": _NAMES, "set queue workq queue_type = bogus": _NAMES,
    "create resource pq_r type = nosuchtype": _NAMES,
    "set queue workq kill_delay = abc": _NAMES, "set queue workq kill_delay = 1.5": _NAMES,
    "set queue workq kill_delay = 30s": _NAMES,
    "active sched default": _CRASH, "active sched nosuch": _CRASH,
    "active hook": _SAYS, "active hook nosuch": _SAYS, "active pbshook": _SAYS,
    "active pbshook PBS_power": _SAYS, "active resource": _SAYS,
    "active resource nosuch": _SAYS, "create resource @default": _SAYS,
    # operator rows: PBS's qmgr prints nothing for a node's 15003, nor the attribute of
    # acl_roots's
    "set node {host} resv_enable = true": _SAYS, "set node {host} queue = workq": _SAYS,
    "set node {host} Mom = {host}": _SAYS, "set server acl_roots = root": _SAYS,
    "set server job_sort_formula = ncpus": _FORMULA,
    # a queue's attribute of the other queue type
    "set queue pq_ex comment = x": _TYPED, "list queue pq_ex route_held_jobs": _TYPED,
    "list queue pq_ex2 route_lifetime": _TYPED,
}

#: What the rows may leave on the real PBS and the engine, put back after the table.
CLEANUP = ("delete queue pq1", "delete queue zz", "unset queue workq comment",
           "delete resource pq_r", "unset queue workq acl_groups", "delete queue pq_lim",
           "unset server max_running", "unset server max_run", "unset server max_user_run",
           "unset server queued_jobs_threshold", "unset queue workq max_group_run",
           "delete queue pq_ex", "delete queue pq_ex2", "delete queue pq_rt",
           "delete queue pq_un", "unset queue workq kill_delay")

#: OpenPBS's qmgr reading a file first prints this diagnostic of its client library.
MAX_OPEN = re.compile(r"^Max open servers: \d+\n")


#: A queue's resources_assigned lines (see the module docstring).
ASSIGNED = re.compile(r"^    resources_assigned\.\S+ = .*\n", re.MULTILINE)


def _norm(text: str, host: str) -> str:
    return ASSIGNED.sub("", re.sub(rf"\b{re.escape(host)}\b", "HOST", text))


def _pbs_host(pbs: RealPbs) -> str:
    return pbs.run("hostname", "-s").stdout.strip()


def _real(pbs: RealPbs, text: str, user: str, unix_user: str, stdin: bool = False):
    argv = ["qmgr"] if stdin else ["qmgr", "-c", text]
    if user:
        argv = [str(WRAPPERS / "pbs-ns"), "runuser", "-u", unix_user, "--",
                "/opt/pbs/bin/qmgr", *argv[1:]]
    done = pbs.run(*argv, input=text if stdin else None, check=False)
    return done.returncode, MAX_OPEN.sub("", done.stdout) if stdin else done.stdout, \
        done.stderr


def _engine(local: LocalEngine, text: str, user: str, attacker, stdin: bool = False):
    args = ("qmgr",) if stdin else ("qmgr", "-c", text)
    if user:
        done = attacker.pbs(local, *args, input=text if stdin else None)
    else:
        done = local.pbs(*args, input=text if stdin else None)
    return done.returncode, done.stdout, done.stderr


def _compare(rows, run_real, run_engine, pbs_host, engine_host):
    differences, agreed = [], []
    for text, user in rows:
        real = run_real(text.replace("{host}", pbs_host), user)
        mine = run_engine(text.replace("{host}", engine_host), user)
        real = (real[0], _norm(real[1], pbs_host), _norm(real[2], pbs_host))
        mine = (mine[0], _norm(mine[1], engine_host), _norm(mine[2], engine_host))
        label = f"[{user or 'root'}] {text!r}"
        if real != mine and (text not in DIFFERENT or (
                DIFFERENT[text].startswith(_SAME_STATUS) and real[:2] != mine[:2])):
            # (a row that only says more must still exit and print as PBS's does)
            differences.append(f"{label}\n  pbs:    {real!r}\n  engine: {mine!r}")
        if real == mine and text in DIFFERENT:
            agreed.append(label)
    return differences, agreed


def test_qmgr_answers_as_openpbs(pbs, local, attacker, unix_user):
    pbs_host = _pbs_host(pbs)
    engine_host = socket.gethostname().split(".")[0]
    try:
        differences, agreed = _compare(
            ROWS, lambda t, u: _real(pbs, t, u, unix_user),
            lambda t, u: _engine(local, t, u, attacker), pbs_host, engine_host)
    finally:
        for text in CLEANUP:  # (both sides: the engine is the module's, the next test's)
            pbs.qmgr(text, check=False)
            local.pbs("qmgr", "-c", text)
    assert_agree(differences, len(ROWS))
    assert not agreed, f"rows in DIFFERENT that now agree: {agreed}"


#: Rows run as an operator (the `operator` fixture), each one qmgr -c: what OpenPBS 23.06
#: lets an operator set and unset on queues, nodes, the server and the default scheduler,
#: and what it refuses (15003 for an attribute, 15007 for create, delete and any change of
#: a resource, a hook error for hooks). They change only the test's own queues (pq_op, an
#: execution queue, and pq_oproute, a route one, made first), its resource pq_opres, and
#: attributes `OPERATOR_CLEANUP` puts back; rows that set the shared PBS's own attributes
#: give them the values it has.
OPERATOR_ROWS: list[str] = [
    "set queue pq_op enabled = true", "set queue pq_op comment = x",
    "unset queue pq_op comment", "set queue pq_op Priority = 10",
    "set queue pq_op max_running = 5", "set queue pq_op resources_max.ncpus = 2",
    "set queue pq_op queue_type = execution", "set queue pq_op acl_users = x",
    "set queue pq_op acl_user_enable = false", "unset queue pq_op acl_users",
    "set queue pq_op acl_groups = x", "set queue pq_op acl_hosts = x",
    "set queue pq_op kill_delay = 10", "set queue pq_op partition = p1",
    "set queue pq_op from_route_only = false", "set queue pq_op route_destinations = workq",
    "set queue pq_op total_jobs = 1", "set queue pq_oproute route_held_jobs = false",
    "set queue pq_oproute route_lifetime = 30",
    "set node {host} comment = x", "unset node {host} comment",
    "set node {host} Priority = 5", "unset node {host} Priority",
    "set node {host} partition = p1", "unset node {host} partition",
    "set node {host} resources_available.pq_opres = 1",
    "unset node {host} resources_available.pq_opres",
    "set node {host} resv_enable = true", "set node {host} queue = workq",
    "set node {host} Mom = {host}",
    "set server scheduling = true", "set server comment = x", "unset server comment",
    "set server max_array_size = 10000", "set server backfill_depth = 1",
    "unset server backfill_depth", "set server query_other_jobs = true",
    "set server managers += x@*", "set server operators += x@*",
    "set server acl_roots = root", "set server mail_from = adm", "set server flatuid = false",
    "set server job_sort_formula = ncpus",
    "set sched default scheduling = true", "set sched default comment = x",
    "set sched default log_events = 767", "set sched default sched_cycle_length = 00:20:00",
    "set sched default preempt_order = SCR", "set sched default partition = p1",
    "set resource pq_opres type = long", "unset resource pq_opres flag",
    "create queue pq_opz", "delete queue pq_op", "create node pq_opz", "delete node nosuch",
    "create resource pq_opz type = long", "delete resource pq_opres",
    "create sched pq_opz", "delete sched nosuch", "create hook pq_opz", "list hook",
    "set hook nosuch enabled = true",
    "list queue pq_op", "list node {host} comment,Priority,partition",
    "list server operators",
]
OPERATOR_SETUP = ("create queue pq_op queue_type = execution",
                  "create queue pq_oproute queue_type = route",
                  "create resource pq_opres type = long")
OPERATOR_CLEANUP = (
    "delete queue pq_op", "delete queue pq_oproute", "delete queue pq_opz",
    "delete node pq_opz", "delete sched pq_opz", "delete resource pq_opz",
    "unset node {host} comment", "unset node {host} Priority", "unset node {host} partition",
    "unset node {host} resources_available.pq_opres", "delete resource pq_opres",
    "unset server comment", "unset server backfill_depth",
    "unset sched default log_events", "unset sched default sched_cycle_length")
#: What the operator rows must leave on the real PBS as they found it.
KEPT = ("print server", "print node @default", "list sched default")


def test_qmgr_operator_answers_as_openpbs(pbs, local, attacker, unix_user, operator):
    pbs_host = _pbs_host(pbs)
    engine_host = socket.gethostname().split(".")[0]

    def kept() -> dict[str, str]:
        return {text: "".join(line for line in pbs.qmgr(text).splitlines(keepends=True)
                              if " operators " not in line) for text in KEPT}

    before = kept()
    try:
        for text in OPERATOR_SETUP:
            pbs.qmgr(text)
            local.pbs("qmgr", "-c", text, check=True)
        differences, agreed = _compare(
            [(text, "operator") for text in OPERATOR_ROWS],
            lambda t, u: _real(pbs, t, u, unix_user),
            lambda t, u: _engine(local, t, u, attacker), pbs_host, engine_host)
    finally:
        for text in OPERATOR_CLEANUP:
            pbs.qmgr(text.replace("{host}", pbs_host), check=False)
            local.pbs("qmgr", "-c", text.replace("{host}", engine_host))
    assert kept() == before, "the operator rows left the real PBS changed"
    assert_agree(differences, len(OPERATOR_ROWS))
    assert not agreed, f"rows in DIFFERENT that now agree: {agreed}"


#: Commands read from standard input: each runs, an error does not stop the next, the exit
#: status is the last command's, and `;` separates commands there.
STDIN_ROWS: list[tuple[str, str]] = [
    ("list queue workq;list queue workq enabled\n", ""),
    ("list queue workq enabled\nlist queue nosuch\nlist queue workq started\n", ""),
    ("set queue nosuch enabled = true\nlist queue workq enabled\n", ""),
    ("list queue workq enabled\nfrobnicate\nlist queue workq started\n", ""),
    ("list queue workq enabled\nset server\n", ""),
    ("set server\nset queue nosuch enabled = true\n", ""),
    ("list queue nosuch\nset server\n", ""),
    ("active queue workq\nlist queue enabled\n", ""),
    ("# a comment\nlist queue workq enabled # another\n", ""),
    ("list queue workq \\\n enabled\n", ""),
    ("list queue workq enabled\nquit\nlist queue nosuch\n", ""),
]


def test_qmgr_reading_commands_answers_as_openpbs(pbs, local, attacker, unix_user):
    pbs_host = _pbs_host(pbs)
    engine_host = socket.gethostname().split(".")[0]
    differences, _ = _compare(
        STDIN_ROWS, lambda t, u: _real(pbs, t, u, unix_user, stdin=True),
        lambda t, u: _engine(local, t, u, attacker, stdin=True), pbs_host, engine_host)
    assert not differences, "\n".join(differences)

