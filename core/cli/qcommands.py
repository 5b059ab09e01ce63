"""PBS's qselect, qsig, qorder, qmsg, qstart, qstop, qenable, qdisable and qterm, registered
with `pbs.pbs_command` beside the other PBS commands (``pbsplug qselect -s R``).

Each parses its options and prints its output, messages and exit status as OpenPBS 23.06's
does (checked on a running PBS: tests/adapters/test_pbs_control_parity.py); the server's
side is `pbsplug.engine.jobcontrol`. Standard library only, as `pbs`.
"""

from __future__ import annotations

import functools
import getopt
import re
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .pbs import (
    COMMANDS,
    _checked_id,
    _each_refused,
    _exit_status,
    _full_job_id,
    _id_problem,
    _server_error,
    engine_client,
    pbs_command,
)

if TYPE_CHECKING:  # (for the annotations only)
    from ..engine.client import Client

#: OpenPBS 23.06's qselect usage (checked); -H, -J, -t and -T are not the engine's.
_QSELECT_USAGE = (
    "usage: qselect [-a [op]date_time] [-A account_string] [-c [op]interval]\n"
    "\t[-h hold_list] [-H] [-J] [-l resource_list] [-N name] [-p [op]priority]\n"
    "\t[-q destination] [-r y|n] [-s states] [-t subopt[op]date_time] [-T] "
    "[-P project_name]\n"
    "\t[-x] [-u user_name]\n"
    "       qselect --version")
_OPS = ("eq", "ne", "ge", "gt", "le", "lt")
#: ``.op.`` before a value (``-p .gt.0``), as PBS's qselect reads it.
_OP_PREFIX = re.compile(r"^\.([A-Za-z]{2})\.(.*)$", re.S)
#: ``name.op.value`` of -l.
_RESOURCE_TEST = re.compile(r"^([^.,=\s]+)\.(eq|ne|ge|gt|le|lt)\.(.+)\Z", re.S)
#: The job states -s takes.
_STATES = frozenset("BEFHMQRSTUWX")
#: A checkpoint interval -c takes.
_CHECKPOINT = re.compile(r"^(n|s|c|u|w|[cw]=\d+)\Z")


class _Illegal(Exception):
    """A qselect option value PBS's qselect refuses itself: ``illegal -X value``, its
    usage, exit 2 (`more` lines between the two)."""

    def __init__(self, opt: str, more: str = ""):
        super().__init__(opt)
        self.opt, self.more = opt, more


def _with_op(opt: str, value: str, unknown_is_eq: bool = False) -> tuple[str, str]:
    """``.gt.5`` -> ("gt", "5"); a value without one compares equal. An op PBS does not
    know is equality for -p (OpenPBS 23.06's ``-p .xx.0`` took priority 0, checked), and
    an illegal value for the others."""
    match = _OP_PREFIX.match(value)
    if match is None:
        return "eq", value
    op = match.group(1).lower()
    if op in _OPS:
        return op, match.group(2)
    if unknown_is_eq:
        return "eq", match.group(2)
    raise _Illegal(opt)


def _destination(name: str, text: str, client: Client) -> tuple[str | None, str | None]:
    """-q's (or qstart's) ``queue``, ``queue@server`` or ``@server``: (the queue or None,
    a problem's line or None). A server other than this one is `_id_problem`'s words."""
    queue, at, server = text.partition("@")
    if at:
        problem = _id_problem(name, f"0@{server}", client)
        if problem is not None:
            return None, problem[1] + f"\0{problem[0]}"
    return queue or None, None


def _select_criteria(opts: list[tuple[str, str]]) -> tuple[list[list[str]], str | None]:
    """qselect's options as the server's criteria, and -q's destination (or None)."""
    from ..engine.jobspec import cvtdate

    criteria: list[list[str]] = []
    destination = None
    for opt, value in opts:
        if opt == "-a":
            op, when = _with_op(opt, value)
            try:
                criteria.append(["Execution_Time", op, str(cvtdate(when))])
            except ValueError:
                raise _Illegal(opt) from None
        elif opt == "-A":
            criteria.append(["Account_Name", "eq", value])
        elif opt == "-c":
            op, interval = _with_op(opt, value)
            if not _CHECKPOINT.match(interval):
                raise _Illegal(opt)
            criteria.append(["Checkpoint", op, interval])
        elif opt == "-h":
            if not value or set(value) - set("uosnp") or ("n" in value and len(value) > 1):
                raise _Illegal(opt)
            criteria.append(["Hold_Types", "eq", value])
        elif opt == "-l":
            for item in value.split(","):
                match = _RESOURCE_TEST.match(item)
                if match is None:
                    raise _Illegal(opt, f"resource_list: {value}\n")
                criteria.append([f"Resource_List.{match.group(1)}", match.group(2),
                                 match.group(3)])
        elif opt == "-N":
            criteria.append(["Job_Name", "eq", value])
        elif opt == "-p":
            op, priority = _with_op(opt, value, unknown_is_eq=True)
            criteria.append(["Priority", op, priority])
        elif opt == "-q":
            destination = value
        elif opt == "-r":
            if value not in ("y", "n"):
                raise _Illegal(opt)
            criteria.append(["Rerunable", "eq", value])
        elif opt == "-s":
            if not value or set(value) - _STATES:
                raise _Illegal(opt)
            criteria.append(["job_state", "eq", value])
        elif opt == "-u":
            if not value or any(not u for u in value.split(",")):
                raise _Illegal(opt)
            criteria.append(["Job_Owner", "eq", value])
        elif opt == "-P":
            criteria.append(["project", "eq", value])
    return criteria, destination


@pbs_command("qselect", _QSELECT_USAGE)
def qselect(args: list[str]) -> int:
    """As OpenPBS 23.06's qselect (checked): the ids of the jobs meeting every option, one
    a line, in queue order; nothing (exit 0) when none. A value the command itself
    refuses is ``illegal -s value`` and the usage (exit 2); the server checks the rest
    (``Unknown resource Resource_List.nosuch``, 187; ``Unknown queue destination``, 170)."""
    from ..engine.errors import PbsError

    opts, rest = getopt.getopt(args, "a:A:c:h:l:N:p:q:r:s:u:xP:J")
    if rest:  # (PBS's: its usage alone)
        print(_QSELECT_USAGE, file=sys.stderr)
        return 2
    try:
        criteria, destination = _select_criteria(opts)
    except _Illegal as bad:
        print(f"qselect: illegal {bad.opt} value\n{bad.more}{_QSELECT_USAGE}", file=sys.stderr)
        return 2
    client = engine_client()
    if destination is not None:
        queue, problem = _destination("qselect", destination, client)
        if problem is not None:
            text, status = problem.rsplit("\0", 1)
            print(text, file=sys.stderr)
            return int(status)
        if queue is not None:
            criteria.append(["queue", "eq", queue])
    try:
        found = client("select", criteria=criteria, history=any(o == "-x" for o, _ in opts))
    except PbsError as err:
        print(_server_error("qselect", err, about=None), file=sys.stderr)
        return _exit_status(err.code)
    if any(o == "-J" for o, _ in opts):  # (arrays only, as OpenPBS 23.06's -J)
        found = [job_id for job_id in found if "[]" in job_id]
    if found:
        print("\n".join(found))
    return 0


def _usage_only(name: str) -> int:
    print(COMMANDS[name][1], file=sys.stderr)
    return 2


def _each_result(name: str, client: Client, ids: list[str], results: list[dict[str, Any]]
                 ) -> int:
    """Each job's refusal as OpenPBS 23.06's qsig and qmsg print it (checked):
    ``<cmd>: <message> <full id>``, but ``<cmd>: Job has finished`` alone, and 15004 as
    ``Server returned error 15004 for job <id>``; the last one's status."""
    from ..engine.errors import PBSE_HISTJOBID, PBSE_IVALREQ, PBSE_PERM

    status = 0
    for result in results:
        err = result.get("error")
        if not err:
            continue
        code, message = err["code"], err["message"]
        job_id = err.get("obj") or _full_job_id(client, result["id"])
        if code == PBSE_HISTJOBID:
            print(f"{name}: {message}", file=sys.stderr)
        elif code == PBSE_IVALREQ:
            print(f"{name}: Server returned error {code} for job {job_id}", file=sys.stderr)
        else:
            blank = " " if code == PBSE_PERM else ""
            print(f"{name}: {message}{blank} {job_id}", file=sys.stderr)
        status = _exit_status(code)
    return status


def _good_ids(name: str, ids: list[str], client: Client) -> tuple[list[str], int]:
    good, status = [], 0
    for job_id in ids:
        bad = _checked_id(name, job_id, client)
        if bad:
            status = bad
        else:
            good.append(job_id)
    return good, status


@pbs_command("qsig", "usage: qsig [-s signal] job_identifier...\n       qsig --version")
def qsig(args: list[str]) -> int:
    """As OpenPBS 23.06's qsig (checked): ``-s`` a signal's name (with or without SIG) or
    number, or ``suspend``/``resume`` (operators' and managers'); SIGTERM by default; each
    job in turn, the exit status the last error's."""
    opts, ids = getopt.getopt(args, "s:")
    if not ids:
        return _usage_only("qsig")
    sig = next((v for o, v in reversed(opts) if o == "-s"), "TERM")
    client = engine_client()
    good, status = _good_ids("qsig", ids, client)
    for job_id in good:  # (one at a time: a refusal is printed in the ids' order)
        results = _each_refused([job_id], functools.partial(client, "signal", ids=[job_id],
                                                            signal=sig))
        status = _each_result("qsig", client, [job_id], results) or status
    return status


@pbs_command("qorder", "usage: qorder job_identifier job_identifier\n       qorder --version")
def qorder(args: list[str]) -> int:
    """As OpenPBS 23.06's qorder (checked): two jobs change places; an error names both
    (``qorder: Unknown Job Id 1.host or 2.host``), but ``Job has finished``."""
    from ..engine.errors import PBSE_HISTJOBID, PBSE_PERM, PbsError

    _, ids = getopt.getopt(args, "")
    if len(ids) != 2:
        return _usage_only("qorder")
    client = engine_client()
    for job_id in ids:
        bad = _checked_id("qorder", job_id, client)
        if bad:
            return bad
    try:
        client("order", ids=ids)
    except PbsError as err:
        if err.code == PBSE_HISTJOBID:
            print(f"qorder: {err.message}", file=sys.stderr)
        else:
            both = err.obj or " or ".join(_full_job_id(client, i) for i in ids)
            blank = " " if err.code == PBSE_PERM else ""
            print(f"qorder: {err.message}{blank} {both}", file=sys.stderr)
        return _exit_status(err.code)
    return 0


@pbs_command("qmsg", "usage: qmsg [-O] [-E] msg_string job_identifier...\n"
             "       qmsg --version")
def qmsg(args: list[str]) -> int:
    """As OpenPBS 23.06's qmsg (checked): the message appended to each running job's error
    file (``-E``, the default) and/or its output file (``-O``)."""
    opts, rest = getopt.getopt(args, "EO")
    if len(rest) < 2:
        return _usage_only("qmsg")
    flags = {o for o, _ in opts}
    text, ids = rest[0], rest[1:]
    client = engine_client()
    good, status = _good_ids("qmsg", ids, client)
    for job_id in good:
        status = _each_result("qmsg", client, [job_id], client(
            "message", ids=[job_id], text=text, output="-O" in flags,
            error="-E" in flags or "-O" not in flags)) or status
    return status


def _queue_command(name: str, attribute: str, on: bool
                   ) -> Callable[[list[str]], int | None]:
    usage = f"Usage: {name} [queue][@server] ...\n       {name} --version"

    @pbs_command(name, usage)
    def command(args: list[str]) -> int:
        """As OpenPBS 23.06's (checked): no options (``-Z`` is a queue's name); each
        destination in turn (``queue``, ``queue@server``); every server error exits 2;
        no destination is the usage, exit 1."""
        if not args:
            print(usage, file=sys.stderr)
            return 1
        client = engine_client()
        status = 0
        for text in args:
            if not re.match(r"^[^@\s!]*(@[^@\s]+)?\Z", text):
                print(f"{name}: illegally formed destination: {text}", file=sys.stderr)
                status = 1
                continue
            queue, problem = _destination(name, text, client)
            if problem is not None:
                line, _ = problem.rsplit("\0", 1)
                print(line.replace(f"{name}: cannot connect to server",
                                   f"{name}: could not connect to server").replace(
                    "(errno=15008)", "(15008)"), file=sys.stderr)
                status = 2
                continue
            names = [queue] if queue else sorted(client("stat_queues"))
            for result in client("queue_state", names=names, attribute=attribute, on=on):
                err = result.get("error")
                if err:
                    from ..engine.errors import PBSE_PERM

                    blank = " " if err["code"] == PBSE_PERM else ""
                    print(f"{name}: {err['message']}{blank} {result['id']}", file=sys.stderr)
                    status = 2
        return status

    command.__name__ = name
    return command


qstart = _queue_command("qstart", "started", True)
qstop = _queue_command("qstop", "started", False)
qenable = _queue_command("qenable", "enabled", True)
qdisable = _queue_command("qdisable", "enabled", False)

_QTERM_USAGE = ("Usage: qterm [-t immediate|delay|[quick]] [-m] [-s] [-f|-i] [server ...]\n"
                "       qterm --version")


@pbs_command("qterm", _QTERM_USAGE)
def qterm(args: list[str]) -> int:
    """As OpenPBS 23.06's qterm (checked): ``-t quick`` (the default), ``immediate`` or
    ``delay``; an operator's or a manager's (else ``qterm: Unauthorized Request  ``, exit
    2). ``-m`` and ``-s`` (the MoMs, the schedulers) are taken: the engine has no MoM, and
    its schedulers stop with it; ``-f``/``-i`` (a secondary server's) are taken and do
    nothing. A usage error exits 1."""
    from ..engine.errors import PBSE_PERM, PbsError

    try:
        opts, servers = getopt.getopt(args, "t:msfi")
    except getopt.GetoptError as exc:
        from .pbs import _getopt_message

        print(f"qterm: {_getopt_message(exc)}\n{_QTERM_USAGE}", file=sys.stderr)
        return 1
    mode = next((v for o, v in reversed(opts) if o == "-t"), "quick")
    if mode not in ("quick", "immediate", "delay") or (
            {"-f", "-i"} <= {o for o, _ in opts}):
        print(_QTERM_USAGE, file=sys.stderr)
        return 1
    client = engine_client()
    for server in servers:
        _, problem = _destination("qterm", f"@{server}", client)
        if problem is not None:
            print(problem.rsplit("\0", 1)[0], file=sys.stderr)
            return 2
    try:
        client("terminate", mode=mode)
    except PbsError as err:
        blank = " " if err.code == PBSE_PERM else ""
        print(f"qterm: {err.message}{blank} {' '.join(servers)}", file=sys.stderr)
        return 2
    return 0
