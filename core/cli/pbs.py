"""PBS's user commands: ``pbsplug qsub``, ``qstat``, ``qdel``, ``qhold``, ``qrls``,
``qrerun``, ``qrun``, ``qalter``, ``qmove``, ``qmgr``, ``pbsnodes``, ``pbs_rsub``,
``pbs_rstat``, ``pbs_rdel``, ``pbs_ralter``, ``pbs_attach`` and ``tracejob``.

They take PBS's options, parsed as PBS parses them (getopt), print PBS's output and messages
(``qdel: Unknown Job Id 12.host``), and exit with PBS's code (the error number modulo 256;
qmgr with the status its server answers, qrun 2 and pbsnodes 1 on any error, as OpenPBS
23.06's have them: tests/adapters/test_pbs_job_parity.py), so scripts written for PBS keep
working. This module needs neither typer nor the kernel:
`pbsplug.cli.main` runs these commands straight from `run`, which is what makes them start
quickly; `engine.add_engine_commands` also lists them in ``pbsplug --help``.
"""

from __future__ import annotations

import getopt
import os
import re
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (for the annotations only)
    from ..engine.client import Client
    from ..engine.errors import PbsError
    from ..engine.home import Home


def engine_home() -> Home:
    from ..engine.home import Home

    return Home.default()


def engine_client() -> Client:
    from ..engine.client import Client

    return Client(engine_home())


class CommandFailed(Exception):
    """A PBS command's error: printed as ``<command>: <text>``, exit `status`."""

    def __init__(self, text: str, status: int = 1):
        super().__init__(text)
        self.status = status


def _exit_status(code: int) -> int:
    return code % 256 or 1


def _getopt_message(exc: getopt.GetoptError) -> str:
    """GNU getopt's words, as PBS's commands print them (``invalid option -- 'Z'``)."""
    if exc.opt and exc.msg.endswith("not recognized"):
        return f"invalid option -- '{exc.opt}'"
    if exc.opt and exc.msg.endswith("requires argument"):
        return f"option requires an argument -- '{exc.opt}'"
    return str(exc)


#: A PBS command: its arguments in, its exit status out (None: 0).
_Command = Callable[[list[str]], int | None]
#: name -> (the command's function of its arguments, its usage line)
COMMANDS: dict[str, tuple[Callable[[list[str]], int | None], str]] = {}


def pbs_command(name: str, usage: str) -> Callable[[_Command], _Command]:
    """Register `fn(args)` as the PBS command `name`."""

    def decorate(fn: _Command) -> _Command:
        COMMANDS[name] = (fn, usage)
        return fn

    return decorate


def run(name: str, args: list[str]) -> int:
    """Run a PBS command with its arguments; prints its errors as PBS does (``qdel: ...``)
    and returns its exit status."""
    import socket

    from ..engine.client import ServerUnavailable
    from ..engine.errors import PbsError

    fn, usage = COMMANDS[name]
    if args == ["--version"]:  # every PBS command's, alone: the engine's version in PBS's line
        from .. import __version__

        print(f"pbs_version = {__version__}")
        return 0
    try:
        return fn(args) or 0
    except getopt.GetoptError as exc:
        print(f"{name}: {_getopt_message(exc)}\n{usage}", file=sys.stderr)
        return 2
    except CommandFailed as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return exc.status
    except PbsError as err:
        print(_server_error(name, err), file=sys.stderr)
        return _exit_status(err.code)
    except ServerUnavailable as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        line, status = _NO_SERVER.get(name, _NO_SERVER[""])
        print(line.format(name=name, server=socket.gethostname().split(".")[0]),
              file=sys.stderr)
        return status


#: What OpenPBS 23.06's commands say after why, and exit with, when no server answers
#: (checked with the server's port closed); `server` is the server's name, this host's.
_NO_SERVER = {
    "": ("{name}: cannot connect to server {server} (errno=15010)", 162),
    "qstat": ("{name}: cannot connect to server {server} (errno=15010)", 255),
    "qdel": ("Couldn't connect to cluster: {server}", 162),
    "pbsnodes": ("{name}: cannot connect to server {server}, error=15010", 1),
    "qmgr": ("{name}: cannot connect to server ", 3),
    "pbs_rstat": ("{name}: cannot connect to server (errno=15010)", 162),
    "qrun": ("{name}: could not connect to server  (15010)", 2),
}


# -- PBS's commands ------------------------------------------------------------------------------

def _getopt(args: list[str], spec: str) -> tuple[list[tuple[str, str]], list[str]]:
    return getopt.getopt(args, spec)


def _report_each(name: str, results: list[dict[str, Any]], client: Client | None = None,
                 named_by_server: tuple[int, ...] = (15004, 15159)) -> int:
    """Each error of `results` on its line; an error whose code is one of
    `named_by_server` names the job as the server's error does (its ``obj``)."""
    status = 0
    for result in results:
        err = result.get("error")
        if err:
            job_id = _full_job_id(client, result["id"]) if client else result["id"]
            if err["code"] in named_by_server and err.get("obj"):  # (as PBS's server names it)
                job_id = err["obj"]
            print(_job_error(name, err["code"], err["message"], job_id), file=sys.stderr)
            status = _exit_status(err["code"])
    return status


#: `_server_error`'s `about` when the error's own object is what it is about.
_ITS_OBJECT = object()


def _server_error(name: str, err: PbsError, about: Any = _ITS_OBJECT) -> str:
    """A command's line for a server error: ``<cmd>: <message>``, then what it is about
    (`about`, a string, or None for nothing; by default the error's object, if any) after
    a blank. 15007's text ends in a blank, as PBS's server writes it (OpenPBS 23.06,
    checked: ``qsub: Unauthorized Request `` for an ACL's refusal, ``qstat: Unauthorized
    Request  workq`` for ``qstat -Q workq``)."""
    from ..engine.errors import PBSE_PERM

    if about is _ITS_OBJECT:
        about = err.obj or None
    blank = " " if err.code == PBSE_PERM else ""
    return f"{name}: {err.message}{blank}" + (f" {about}" if about is not None else "")


def _job_error(name: str, code: int, message: str, job_id: str) -> str:
    """A job command's line for a server error, as OpenPBS 23.06's prints it (checked):
    ``<cmd>: <message> <job id>``; 15007's text ends in a blank (``Unauthorized Request
    12.host``, two blanks). (PBS's qhold, qrls, qalter and qrun name no job for 15139 `Job
    has finished`; pbsplug's do, so that of several ids the one that was wrong is known.)"""
    from ..engine.errors import PBSE_PERM

    return f"{name}: {message}{' ' if code == PBSE_PERM else ''} {job_id}"


#: A job identifier as PBS's commands take one: ``12``, ``12[]``, ``12.host``,
#: ``12.host@server`` (`pbsplug.engine.jobid`).
_JOB_ID = re.compile(r"^\d+(\[(\d+(-\d+(:\d+)?)?)?\])?(\.[^@\s]+)?(@[^@\s]+)?\Z")


def _well_formed(name: str, job_id: str, client: Client | None = None) -> bool:
    """Whether `job_id` is a job identifier of this server; if not, says so as PBS's
    commands do (`_checked_id`)."""
    return _checked_id(name, job_id, client) == 0


def _checked_id(name: str, job_id: str, client: Client | None = None) -> int:
    """0 when `job_id` is a job identifier of this server; else the command's exit status,
    having said why (`_id_problem`)."""
    problem = _id_problem(name, job_id, client)
    if problem is None:
        return 0
    print(problem[1], file=sys.stderr)
    return problem[0]


def _id_problem(name: str, job_id: str, client: Client | None = None
                ) -> tuple[int, str] | None:
    """None when `job_id` is a job identifier of this server (`pbsplug.engine.jobid`:
    ``12``, ``12.server``, ``12@server``, ``12.server@server``); else the command's exit
    status and what it says, as OpenPBS 23.06's commands say it (checked): text of another
    form, or ``12.other``, is ``illegally formed job identifier: 12.other`` (exit 1);
    ``12@other`` is another server's job (`_other_server`). `client` asks this server its
    name, only when the id names one."""
    from ..engine import jobid

    parts = jobid.parse(job_id) if _JOB_ID.match(job_id) else None
    if parts is not None and (parts.suffix or parts.at):
        server = _server_name(client or engine_client())
        names = jobid.host_names()
        if parts.suffix is not None and not jobid.names_server(parts.suffix, server, names):
            parts = None
        elif parts.at is not None and not jobid.names_server(parts.at, server, names):
            return _other_server(name, parts.at, server)
    if parts is None:
        return 1, f"{name}: illegally formed job identifier: {job_id}"
    return None


def _other_server(name: str, other: str, server: str) -> tuple[int, str]:
    """A job id naming server `other`, not this one (``12@nosuchhost``): the exit status and
    what OpenPBS 23.06's command says when it cannot reach it (checked: each command its own
    words; PBS's qhold, qrls, qalter, qmove and qrerun cut the name to 7 characters,
    pbsplug's do not). A name that resolves names no server either: the local engine is
    the one server of its host, and says so."""
    import socket

    status = {"qstat": 255, "qrun": 2}.get(name, _exit_status(15008))
    try:
        socket.getaddrinfo(other, None)
    except (OSError, UnicodeError):
        lines = {"qstat": f"qstat: cannot connect to server {server} (errno=15008)",
                 "qdel": f"Couldn't connect to cluster: {other}",
                 "qrun": f"qrun: could not connect to server {other} (15008)"}
        return status, "Unknown Host.\n" + lines.get(
            name, f"{name}: cannot connect to server {other} (errno=15008)")
    return status, (f"{name}: cannot connect to server {other}: the pbsplug local engine "
                    f"is the one server here ({server})")


def _full_job_id(client: Client, job_id: str) -> str:
    """``12``, ``12@server`` -> ``12.server``: PBS's commands name a job by its full id in
    their messages."""
    from ..engine import jobid

    return jobid.full_id(job_id, _server_name(client), jobid.host_names()) or job_id


def _each_refused(ids: list[str], request: Callable[[], list[dict[str, Any]]]
                  ) -> list[dict[str, Any]]:
    """`request()`'s results, one per job of `ids`; a refusal of the whole request (the
    server's acl_users: 15007, naming nothing) is each job's, so that each is named, as
    OpenPBS 23.06's commands name them (checked)."""
    from ..engine.errors import PBSE_PERM, PbsError

    try:
        return request()
    except PbsError as err:
        if err.code != PBSE_PERM or err.obj is not None:
            raise
        return [{"id": job_id, "error": err.to_dict()} for job_id in ids]


def _server_name(client: Client) -> str:
    """The server's name; for a user the server's acl_users refuses (15007), this host's
    short name, which the engine's server is named after (``server_host``): PBS's commands
    name a refused job by its full id all the same (OpenPBS 23.06, checked)."""
    import socket

    from ..engine.errors import PBSE_PERM, PbsError

    try:
        return client("status")["server"]
    except PbsError as err:
        if err.code != PBSE_PERM:
            raise
        return socket.gethostname().split(".")[0]


@pbs_command("qsub", "usage: qsub [-N name] [-q queue] [-l resource_list] [-o path] [-e path] "
             "[-j oe|eo|n] [-r y|n] [-h] [-v variable_list] [-V] [-W additional_attributes] "
             "[script | -- command [arg...]]")
def qsub(args: list[str]) -> int:
    import pwd
    import socket

    from ..engine.errors import PbsError
    from ..engine.jobspec import JobSpecError, parse_qsub

    host = socket.gethostname().split(".")[0]
    try:
        request = parse_qsub(args, cwd=os.getcwd(), env=os.environ,
                             user=pwd.getpwuid(os.getuid()).pw_name, host=host,
                             read_script=sys.stdin.read, server=host)
    except JobSpecError as exc:
        print(exc.stderr, file=sys.stderr)  # PBS's lines, each starting "qsub:"
        return exc.status
    if request.server is not None:  # (-q queue@server)
        try:
            socket.gethostbyname(request.server)
        except OSError:  # (OpenPBS 23.06's words, 15008; it cuts the name, pbsplug does not)
            print(f"Unknown Host.\nqsub: cannot connect to server {request.server} "
                  "(errno=15008)", file=sys.stderr)
            return _exit_status(15008)
    client = engine_client()
    if request.interactive:  # -I: the job's terminal is this one
        from ..engine import interactive

        return interactive.run(client, request)
    try:
        job_id = client("submit", attrs=request.attrs, script=request.script,
                        argv=request.argv)
    except PbsError as err:  # PBS's qsub prints the server's text alone: "qsub: Unknown queue"
        print(_server_error("qsub", err, about=None), file=sys.stderr)
        return _exit_status(err.code)
    if not request.quiet:
        print(job_id)
    if request.block:  # -W block=true: wait for the job, exit with its exit status
        while True:
            attrs = client("stat_jobs", ids=[job_id], history=True)[job_id]
            if attrs["job_state"] in ("F", "X"):
                return int(attrs.get("Exit_status", 0)) % 256
            time.sleep(0.2)
    return 0


#: OpenPBS 23.06's qstat usage (checked), which names options the engine's has not.
_QSTAT_USAGE = (
    "usage: \n"
    "qstat [-f] [-J] [-p] [-t] [-x] [-E] [-F format | -w] [-D delim] "
    "[ job_identifier... | destination... ]\n"
    "qstat [-a|-i|-r|-H|-T] [-J] [-t] [-u user] [-n] [-s] [-G|-M] [-1] [-w]\n"
    "\t[ job_identifier... | destination... ]\n"
    "qstat -Q [-f] [-F format] [-D delim] [ destination... ]\n"
    "qstat -q [-G|-M] [ destination... ]\n"
    "qstat -B [-f] [-F format] [-D delim] [ server_name... ]\n"
    "qstat --version")


#: qstat's options of the alternative format (OpenPBS 23.06's), -w aside.
_QSTAT_ALT = frozenset({"-a", "-i", "-r", "-H", "-u", "-n", "-s", "-q", "-G", "-M", "-1",
                        "-T"})
#: The job states qstat -i, -r and -H select (OpenPBS 23.06's), and -u's job owners.
_QSTAT_STATES = {"-i": "EHQTW", "-r": "RS", "-H": "MFX"}


def _qstat_conflicts(opts: list[tuple[str, str]], fmt: str | None) -> list[str]:
    """What OpenPBS 23.06's qstat says of options it takes not together (checked), in its
    order: ``-B`` or ``-Q`` after the other or after an option of the alternative format
    (unless ``-w`` came first), two of ``-a -i -r -q -H``, ``-G`` with ``-M``, ``-F``
    without ``-f`` (which a later ``-n`` or ``-s`` undoes), ``-q`` with ``-f``, ``-1``
    without ``-n`` or ``-s``, ``-w`` with ``-F``."""
    said: list[str] = []
    seen: set[str] = set()
    for opt, _ in opts:
        if opt in ("-B", "-Q") and (({"-B", "-Q"} - {opt}) & seen or (
                seen & _QSTAT_ALT and "-w" not in seen)):
            said.append("conflicting options.")
        seen.add(opt)
    full = _qstat_full(opts)
    if len(seen & {"-a", "-i", "-r", "-q", "-H"}) > 1:
        said.append("conflicting options.")
    if {"-G", "-M"} <= seen:
        said.append("conflicting options.")
    if fmt and not full:
        said.append("conflicting options.")
    if "-q" in seen and full:
        said.append("conflicting options.")
    if "-1" in seen and not seen & {"-n", "-s"}:
        said.append("conflicting options.")
    if "-w" in seen and fmt:
        said.append("option w cannot be used with -F")
    return said


def _qstat_full(opts: list[tuple[str, str]]) -> bool:
    """Whether qstat shows jobs in full: ``-f``, unless a later ``-n`` or ``-s`` asks for
    the alternative format (OpenPBS 23.06's)."""
    full = False
    for opt, _ in opts:
        if opt in ("-f", "-n", "-s"):
            full = opt == "-f"
    return full


def _qstat_keeps(flags: set[str], users: str | None) -> Callable[[dict[str, Any]], bool]:
    """What qstat's -i, -r, -H and -u select of the jobs of a destination (or of every
    job): their states, and owners by PBS's ACL rules (``user`` or ``user@host``)."""
    from ..engine import acl, display

    states = "".join(_QSTAT_STATES[f] for f in flags & set(_QSTAT_STATES))

    def keeps(attrs: dict[str, Any]) -> bool:
        if states and display.job_state_letter(attrs.get("job_state")) not in states:
            return False
        if users is None:
            return True
        user, _, host = str(attrs.get("Job_Owner") or "").partition("@")
        return acl.user_allowed(users, user, [host, host.split(".")[0]])

    return keeps


@pbs_command("qstat", _QSTAT_USAGE)
def qstat(args: list[str]) -> int:
    """As OpenPBS 23.06's qstat (checked): ``-F`` takes json or dsv, in any case, and only
    beside ``-f`` (without: ``conflicting options.`` and the usage, exit 2); dsv writes
    each object on one line, its attributes joined by ``-D``'s delimiter (``|`` by
    default), which takes no other format. ``-w``: the wide table, and ``-f`` without
    wrapping; not with ``-F``. ``-a -i -r -H -u -T -G -M -n -s -1``: the alternative
    format (`display.qstat_alt`), ``-i -r -H -u`` selecting among a destination's jobs (or
    all), never among jobs named; ``-p`` the ``% done`` column; ``-E`` the named jobs in
    the order of their numbers; ``-q`` the queues' summary."""
    from ..engine import display

    opts, ids = _getopt(args, "fxF:D:QBwainpqrsu:GHMET1tJ")
    flags = {o for o, _ in opts}
    given = next((v for o, v in reversed(opts) if o == "-F"), None)
    fmt = given.lower() if given is not None else None
    if fmt not in (None, "json", "dsv"):
        raise CommandFailed(f"invalid -F format {given!r}: use json or dsv", 2)
    delimiter = next((v for o, v in reversed(opts) if o == "-D"), None)
    if delimiter is not None and fmt != "dsv":  # (PBS's: its usage, exit 2)
        raise getopt.GetoptError("-D is the delimiter of -F dsv")
    dsv = (delimiter if delimiter is not None else "|") if fmt == "dsv" else None
    wide = "-w" in flags
    conflicts = _qstat_conflicts(opts, fmt)
    if conflicts:  # (PBS's words, each on its line, then its usage: exit 2)
        raise getopt.GetoptError("\nqstat: ".join(conflicts))
    full = _qstat_full(opts)
    alt = bool(flags & _QSTAT_ALT) and not (wide and full)
    unit = "gb" if "-G" in flags else "mw" if "-M" in flags else None
    mode = next((o for o, _ in reversed(opts) if o in ("-q", "-Q", "-B")), None)
    keeps = _qstat_keeps(flags, next((v for o, v in reversed(opts) if o == "-u"), None))
    history = bool(flags & {"-x", "-H"})
    from ..engine.errors import PBSE_HISTJOBID, PBSE_PERM, PBSE_UNKJOBID, PBSE_UNKQUE, PbsError

    if "-E" in flags and mode is None and any(not _JOB_ID.match(i) for i in ids):
        print("qstat: Express option can only be used with job ids", file=sys.stderr)
        return 1
    if "-E" in flags and mode is None:  # (one request, by number, as PBS's -E sends it)
        ids = sorted(ids, key=lambda i: int(re.match(r"\d+", i)[0]))  # type: ignore[index]
    client = engine_client()
    if mode == "-q":
        return _qstat_q(client, ids, unit)
    if mode in ("-B", "-Q"):
        # A refusal names the first queue asked for (OpenPBS 23.06, checked: `qstat -Q
        # workq` under the server's acl_users is ``Unauthorized Request  workq``), or for
        # the server the name given: none (PBS's qstat -Q without one names "(null)").
        try:
            if mode == "-B":
                server = client("stat_server")
            else:
                queues = client("stat_queues", names=ids or None)
        except PbsError as err:
            print(_server_error("qstat", err, err.obj or (
                ids[0] if ids and mode != "-B" else "")), file=sys.stderr)
            return _exit_status(err.code)
    if mode == "-B":
        out = display.qstat_server(server, full="-f" in flags, json_out=fmt == "json",
                                   dsv=dsv)
        if out or dsv is None:
            print(out)
        return 0
    if mode == "-Q":
        out = display.qstat_queues(queues, full="-f" in flags, json_out=fmt == "json",
                                   dsv=dsv)
        if out or dsv is None:
            print(out)
        return 0
    status = 0
    jobs: dict[str, Any] = {}
    header = True  # (PBS's comes with the first operand's jobs: none when it had none)
    unknown = None  # (-E: what PBS says when none of the jobs is known)
    if ids:
        for index, job_id in enumerate(ids):
            if index == 1 and "-E" not in flags:
                header = bool(jobs)
            if not _JOB_ID.match(job_id):  # a destination: a queue's jobs
                queue = job_id.partition("@")[0]
                if job_id[:1].isdigit() or not re.match(r"^[^@\s]*(@[^@\s]+)?\Z", job_id):
                    _well_formed("qstat", job_id)
                    status = 1
                    continue
                try:
                    if queue:
                        client("stat_queues", names=[queue])
                except PbsError as err:  # (PBS 23.06: "Unknown queue destination abc", 15018)
                    if err.code == PBSE_PERM:
                        raise  # (the server's acl_users: ``qstat: Unauthorized Request ``)
                    print(f"qstat: Unknown queue destination {job_id}", file=sys.stderr)
                    status = _exit_status(PBSE_UNKQUE)
                    continue
                jobs.update({i: a for i, a in client(
                    "stat_jobs", history=history, subjobs="-t" in flags).items()
                    if (not queue or a.get("queue") == queue) and keeps(a)})
                continue
            bad = _checked_id("qstat", job_id, client)
            if bad:
                status = bad
                continue
            try:
                jobs.update(client("stat_jobs", ids=[job_id], history=history,
                                   subjobs="-t" in flags))
            except PbsError as err:
                if err.code == PBSE_PERM and not err.obj:
                    raise  # (the server's acl_users: as above, once, naming no job)
                if err.code == PBSE_UNKJOBID and "-E" in flags:
                    unknown = f"qstat: {err.message} {err.obj or job_id}"
                    continue  # (PBS's -E asks for all at once: unknown only if all are)
                if err.code == PBSE_HISTJOBID:
                    print(f"qstat: {err.obj} {err.message}", file=sys.stderr)
                else:
                    print(f"qstat: {err.message} {err.obj or job_id}", file=sys.stderr)
                status = _exit_status(err.code)
        if unknown and not jobs:
            print(unknown, file=sys.stderr)
            status = _exit_status(PBSE_UNKJOBID)
    else:  # the table asks only for its columns (a job's environment may be a megabyte)
        columns = display.ALT_ATTRS if alt or "-p" in flags else display.TABLE_ATTRS
        jobs = {i: a for i, a in client("stat_jobs", history=history, attrs=None if (
            fmt or full) and not alt else list(columns), subjobs="-t" in flags).items()
            if keeps(a)}
    if "-J" in flags:  # arrays only; with -t, their subjobs only (OpenPBS 23.06's)
        jobs = {i: a for i, a in jobs.items() if "[" in i and ("[]" in i) != ("-t" in flags)}
    server = client("status")["server"]
    if fmt == "json":
        print(display.qstat_json(jobs, server))
    elif dsv is not None:
        out = display.qstat_dsv(jobs, dsv)
        if out:
            print(out)
    elif alt:
        if jobs:
            print(display.qstat_alt(
                jobs, client("stat_server"), wide=wide, nodes="-n" in flags,
                comments="-s" in flags, one_line="-1" in flags, start="-T" in flags,
                unit=unit, header=header))
    elif full:
        out = display.qstat_full(jobs, wide=wide)
        if out:
            print(out)
    elif jobs:
        print(display.qstat_table(jobs, server, wide=wide, percent="-p" in flags,
                                  header=header))
    return status


def _qstat_q(client: Client, names: list[str], unit: str | None) -> int:
    """``qstat -q [destination...]``: the queues' summary, one block per destination
    named (OpenPBS 23.06's), or one of every queue; an unknown queue is
    ``qstat: Unknown queue <name>``."""
    from ..engine import display
    from ..engine.errors import PbsError

    status = 0
    server = client("status")["server"]
    for name in [*names] if names else [None]:
        queue = name.partition("@")[0] if name else None
        try:
            queues = client("stat_queues", names=[queue] if queue else None)
        except PbsError as err:
            print(_server_error("qstat", err, err.obj or name), file=sys.stderr)
            status = _exit_status(err.code)
            continue
        print(display.qstat_queue_summary(queues, server, unit))
    return status


@pbs_command("qdel", "usage:\n\tqdel [-W force|suppress_email=X] [-x] job_identifier...\n"
             "\tqdel --version")
def qdel(args: list[str]) -> int:
    """As OpenPBS 23.06's qdel, whose usage it prints (checked); ``-x`` purges the job's
    history too (a finished job's at once: `Engine.req_delete`). ``-W`` takes ``force``,
    ``suppress_email=N`` (no mail is sent here) or a number of seconds, which OpenPBS
    23.06's qdel takes (checked) and no longer sends: the job gets its queue's
    kill_delay; anything else is PBS's ``illegal -W value`` (checked)."""
    opts, ids = _getopt(args, "W:x")
    for option, value in opts:
        if option == "-W" and not _qdel_w_value(value):
            raise getopt.GetoptError("illegal -W value")
    if not ids:
        raise getopt.GetoptError("a job id is required")
    force = any(o == "-W" and v == "force" for o, v in opts)
    purge = any(o == "-x" for o, _ in opts)
    client = engine_client()
    good, status = [], 0
    for job_id in ids:
        bad = _checked_id("qdel", job_id, client)
        if bad:
            status = bad
        else:
            good.append(job_id)
    # (PBS's qdel names each job as it was given, ``Unknown Job Id 12``, but a job over
    # as its server does: ``Job has finished 12.server``, a subjob's range as given)
    if good:
        units = _qdel_units(good)
        results = client("delete", ids=[sent for unit, _ in units for sent in unit],
                         force=force, purge=purge)
        status = _report_each("qdel", _qdel_merged(units, results),
                              named_by_server=(15004, 15139, 15159)) or status
    return status


#: The most digits of an index qdel merges with others of its array: an index of more
#: digits than any array holds is sent as it is, for the server to refuse (``int`` of 4,300
#: digits and more is a ValueError).
_MERGED_DIGITS = 18


def _qdel_units(ids: list[str]) -> list[tuple[list[str], str | None]]:
    """qdel's ids in the order OpenPBS 23.06.06's qdel sends them (measured): ordinary
    jobs first, then each array's ids in the order its first one came; the subjobs and
    ranges (without a step) of one array written alike (``12[1]``, ``12[3]``) are one id
    to it, their indices merged (``12[1,3]``, ``12[1-3]``), so that one error names them
    all and the indices are taken as a range's are (one over let be). Each unit is the
    ids sent (a range for each given one, those that overlap merged: the engine takes no
    list) and the merged id that names them, or None. A range written backwards
    (``12[3-1]``) names no index: it is sent as it is, and its error is its own (merged,
    it was lost: ``12[2] 12[3-1]`` sent ``12[2]`` alone)."""
    from ..engine.arrays import id_parts  # (standard library only, as this module)

    plain: list[tuple[list[str], str | None]] = []
    arrays_: dict[str, list[str]] = {}
    for job_id in ids:
        number = job_id.split("[", 1)[0] if "[" in job_id else None
        if number is None:
            plain.append(([job_id], None))
        else:
            arrays_.setdefault(number, []).append(job_id)
    units = list(plain)
    for number, named in arrays_.items():
        groups: dict[str, list[tuple[int, int, str]]] = {}
        for job_id in named:
            parts = id_parts(job_id)
            first, last = (parts.first, parts.last or parts.first) if parts else (None, None)
            if (parts is None or first is None or last is None or parts.step is not None
                    or max(len(first), len(last)) > _MERGED_DIGITS or int(last) < int(first)):
                # (the array itself, a range with a step or backwards: as it is)
                units.append(([job_id], None))
            else:
                groups.setdefault(parts.rest, []).append((int(first), int(last), job_id))
        for rest, spans in groups.items():
            if len({(first, last) for first, last, _ in spans}) == 1:
                units.append(([spans[0][2]], None))  # (one id, named again: as it is)
                continue
            texts = [f"{a}" if a == b else f"{a}-{b}" for a, b in _runs(spans, 1)]
            # (sent: the ranges that overlap as one, those that only touch each alone, so
            # that one with no index of the array is its error: 12[3] 12[4] of 12[1-3]
            # sent as 12[3-4] was no error at all)
            units.append(([f"{number}[{a}-{b}]{rest}" for a, b in _runs(spans, 0)],
                          f"{number}[{','.join(texts)}]"))
    return units


def _runs(spans: list[tuple[int, int, str]], touching: int) -> list[list[int]]:
    """`spans` (first, last, id) as runs of indices, in order: those that overlap merged,
    and with `touching` 1 those that follow one another too."""
    runs: list[list[int]] = []
    for first, last, _ in sorted(spans):
        if runs and first <= runs[-1][1] + touching:
            runs[-1][1] = max(runs[-1][1], last)
        else:
            runs.append([first, last])
    return runs


def _qdel_merged(units: list[tuple[list[str], str | None]], results: list[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """`results` (one per id sent) as one per unit (`_qdel_units`): a merged unit's first
    error, naming the merged id where it named the range sent."""
    merged, place = [], 0
    for sent, label in units:
        mine, place = results[place:place + len(sent)], place + len(sent)
        if label is None:
            merged.extend(mine)
            continue
        err = next((r["error"] for r in mine if r.get("error")), None)
        if err is None:
            merged.append({"id": label})
            continue
        runs = [s.split("[", 1)[1].split("]", 1)[0] for s in sent]
        obj = str(err.get("obj") or "")
        for run in runs:
            obj = obj.replace(f"[{run}]", f"[{label.split('[', 1)[1]}")
        merged.append({"id": label, "error": {**err, "obj": obj or None}})
    return merged


def _qdel_w_value(value: str) -> bool:
    """Whether qdel takes `value` for ``-W``, as OpenPBS 23.06's qdel does: ``force``,
    ``suppress_email=`` anything, or ASCII digits (a delay it no longer uses)."""
    if value == "force" or value.startswith("suppress_email="):
        return True
    return value != "" and all(c in "0123456789" for c in value)


def _hold_command(name: str, op: str) -> _Command:
    @pbs_command(name, f"usage: {name} [-h hold_list] job_identifier...")
    def command(args: list[str]) -> int:
        opts, ids = _getopt(args, "h:")
        if not ids:
            raise getopt.GetoptError("a job id is required")
        types = next((v for o, v in opts if o == "-h"), "u")
        if not types or set(types) - set("uosp"):  # (PBS's: exit 2, with the usage)
            raise getopt.GetoptError(f"illegal -h value {types!r}: use u, o, s and p")
        client = engine_client()
        # One line per refused id, and on to the next; the last refusal's exit status. An
        # argument that is no job id is `_well_formed`'s line (status 1), in its place.
        problems = {job_id: _id_problem(name, job_id, client) for job_id in ids}
        good = [job_id for job_id in ids if problems[job_id] is None]
        results = iter(_each_refused(good, lambda: client(op, ids=good, types=types))
                       if good else ())
        status = 0
        for job_id in ids:
            problem = problems[job_id]
            if problem is not None:
                print(problem[1], file=sys.stderr)
                status = problem[0]
                continue
            status = _report_each(name, [next(results)], client) or status
        return status

    return command


qhold = _hold_command("qhold", "hold")
qrls = _hold_command("qrls", "release")


@pbs_command("qrerun", "usage: qrerun [-W force] job_identifier...")
def qrerun(args: list[str]) -> int:
    """As OpenPBS 23.06's qrerun (checked): ``-W force`` requeues a job that is not
    rerunnable too; any other ``-W`` value is the usage error (exit 2)."""
    opts, ids = _getopt(args, "W:")
    for _, value in opts:
        if value != "force":
            raise getopt.GetoptError(f"illegal -W value {value!r}: the one is force")
    if not ids:
        raise getopt.GetoptError("a job id is required")
    force = bool(opts)
    return _each_job("qrerun", ids, lambda client, job_id: client("rerun", ids=[job_id],
                                                                   force=force))


def _each_job(name: str, ids: list[str], request: Callable[[Client, str], Any],
              named: Callable[[PbsError], str | None] | None = None) -> int:
    """`request(client, job_id)` for each job, in order; an error is printed as PBS's
    commands print it (``qrerun: <message> <full job id>``; `named(error)`, when not None,
    stands for the job id), an argument that is no job id is `_well_formed`'s line (status
    1), and the others still go ahead. The exit status is the last error's, as OpenPBS
    23.06's."""
    from ..engine.errors import PbsError

    client = engine_client()
    status = 0
    for job_id in ids:
        bad = _checked_id(name, job_id, client)
        if bad:
            status = bad
            continue
        try:
            request(client, job_id)
        except PbsError as err:
            shown = named(err) if named is not None else None
            print(_job_error(name, err.code, err.message,
                             _full_job_id(client, job_id) if shown is None else shown),
                  file=sys.stderr)
            status = _exit_status(err.code)
    return status


_QRUN_USAGE = "usage: qrun [-a] [-H vnode_specification | -H -] job_identifier..."


@pbs_command("qrun", _QRUN_USAGE)
def qrun(args: list[str]) -> int:
    """As OpenPBS 23.06's qrun (checked): a usage error (a bad option, -H without its
    value or with an empty one, no job id) exits 1; each job is run in turn, an argument
    that is no job id is `_well_formed`'s line (status 1) and a server's error exits 2,
    the last one counting. ``-H -`` runs the job where it ran before (its exec_vnode);
    ``-a`` is taken, and the engine answers at once all the same."""
    from ..engine.errors import PBSE_UNKNODE

    try:
        opts, ids = _getopt(args, "H:a")
    except getopt.GetoptError as exc:
        raise CommandFailed(f"{_getopt_message(exc)}\n{_QRUN_USAGE}", 1) from None
    vnodes = next((v for o, v in opts if o == "-H"), None)
    if vnodes == "":
        raise CommandFailed(f"illegal -H value: the vnode specification is empty\n"
                            f"{_QRUN_USAGE}", 1)
    if not ids:
        raise CommandFailed(f"a job id is required\n{_QRUN_USAGE}", 1)
    status = 0
    client = engine_client()
    for job_id in ids:
        bad = _checked_id("qrun", job_id, client)
        if bad:
            status = bad
            continue
        # An unknown vnode: PBS names the -H specification after its message ("Unknown
        # node "), not the job: ``qrun: Unknown node  nosuch``.
        if _each_job("qrun", [job_id], lambda client, one: client(
                "run", id=one, vnodes=vnodes), named=lambda err: f" {vnodes}" if
                err.code == PBSE_UNKNODE and vnodes is not None else None):
            status = 2
    return status


@pbs_command("qalter", "usage: qalter [-a date_time] [-A account_string] [-c interval] "
             "[-e path] [-h hold_list] [-j oe|eo|n] [-k keep] [-l resource_list] "
             "[-m mail_options] [-M user_list] [-N name] [-o path] [-p priority] "
             "[-P project] [-r y|n] [-R o|e|oe] [-S path] [-u user_list] "
             "[-W additional_attributes] job_identifier...")
def qalter(args: list[str]) -> int:
    """As OpenPBS 23.06's qalter: its options, each read and checked as qsub reads and
    checks it (`jobspec.qalter_attributes`), the server checking the values again;
    ``-W block`` and ``interactive`` are 15014 for the first job, as PBS's server answers
    them. A usage error (``illegal -p value``) exits 2 before any job is asked for."""
    import socket

    from ..engine.jobspec import (
        QALTER_OPTIONS,
        JobSpecError,
        qalter_attributes,
        resource_value,
    )

    opts, ids = _getopt(args, QALTER_OPTIONS)
    if not ids:
        raise getopt.GetoptError("a job id is required")
    try:
        attrs: dict[str, Any] = qalter_attributes(
            [(o[1], v) for o, v in opts if o not in ("-h", "-l", "-N")], cwd=os.getcwd(),
            env=os.environ, host=socket.gethostname().split(".")[0],
            server=socket.gethostname().split(".")[0])
    except JobSpecError as exc:  # qsub's words, said by qalter
        print(re.sub(r"(?m)^qsub: ", "qalter: ", exc.message) +
              (f"\n{COMMANDS['qalter'][1]}" if exc.usage else ""), file=sys.stderr)
        return exc.status
    for key in ("block", "interactive"):
        if key in attrs:
            return _refused_value(ids, key)
    for opt, value in opts:
        if opt == "-N":
            attrs["Job_Name"] = value
        elif opt == "-h":
            if not value or set(value) - set("uosnp"):  # (PBS's qalter: exit 2, usage)
                raise getopt.GetoptError(f"illegal -h value {value!r}: use u, o, s, p or n")
            attrs["Hold_Types"] = value
        elif opt == "-l":
            res = attrs.setdefault("Resource_List", {})
            for item in _split_resources(value):
                key, sep, val = item.partition("=")
                if not sep or not key:
                    raise CommandFailed(f"illegal -l value: {item}", 2)
                try:  # stored as qsub stores it (walltime=1:00:00 -> 01:00:00)
                    res[key] = resource_value(key, val)
                except ValueError:
                    return _refused_value(ids, f"Resource_List.{key}")
    return _each_job("qalter", ids, lambda client, job_id: client("alter", id=job_id,
                                                                   attrs=attrs))


def _refused_value(ids: list[str], attribute: str) -> int:
    """qalter's -l value that is no value: as OpenPBS 23.06's qalter (checked), whose
    client library checks it before asking, the 15014 line for the first job id and no
    further (exit 166); arguments before it that are no job id are `_well_formed`'s lines
    (exit 1 when there is no job id at all)."""
    from ..engine.errors import PBSE_BADATVAL

    client = engine_client()
    status = 1
    for job_id in ids:
        status = _checked_id("qalter", job_id, client)
        if not status:
            message = f"Illegal attribute or resource value {attribute}"
            print(_job_error("qalter", PBSE_BADATVAL, message,
                             _full_job_id(client, job_id)), file=sys.stderr)
            return _exit_status(PBSE_BADATVAL)
    return status


def _split_resources(value: str) -> list[str]:
    """``select=2:ncpus=1,walltime=1:00:00`` -> ["select=...", "walltime=..."]; a comma
    inside a value (after the first ``=`` of an item) only splits before ``name=``."""
    items: list[str] = []
    for part in value.split(","):
        if items and "=" not in part:
            items[-1] += "," + part
        else:
            items.append(part)
    return [i for i in items if i]


@pbs_command("qmgr", 'usage: qmgr [-c "directive"] (or directives on standard input)')
def qmgr(args: list[str]) -> int:
    opts, rest = _getopt(args, "c:")
    if rest:
        raise getopt.GetoptError(f"unexpected argument {rest[0]!r}")
    text = next((v for o, v in opts if o == "-c"), None)
    if text is None:
        answer = engine_client()("qmgr", text=sys.stdin.read())
    else:  # one command, as PBS's qmgr -c takes it
        answer = engine_client()("qmgr", text=text, one=True)
    return qmgr_answer(answer)


def qmgr_answer(answer: dict[str, Any]) -> int:
    """Print the server's answer to a qmgr text as qmgr does; its exit status (the
    server's, as OpenPBS 23.06's qmgr has it: see `pbsplug.engine.manager`)."""
    if answer.get("output"):
        print(answer["output"], end="" if answer["output"].endswith("\n") else "\n")
    for line in answer.get("errors") or ():
        print(line, file=sys.stderr)
    if "status" in answer:
        return int(answer["status"])
    return _exit_status(answer.get("code") or 1) if answer.get("errors") else 0


@pbs_command("pbsnodes", "usage: pbsnodes [-a] [-v] [-S [-j] [-L]] [-H] [-F json|dsv "
             "[-D delimiter]] [-o|-r] [-C comment] [node...]\n       pbsnodes [-v] -l")
def pbsnodes(args: list[str]) -> int:
    """As OpenPBS 23.06's pbsnodes (checked): ``-l`` lists the vnodes that are down,
    offline or unknown; ``-S`` (with ``-a``, or names) prints PBS's summary, ``-j`` its
    jobs' form, ``-L`` without cutting; ``-H`` names hosts, whose vnodes it shows; ``-F``
    takes json or dsv in any case (``-D``: dsv's delimiter). Without ``-v`` (or ``-H``)
    the listings are of hosts, as PBS's (`display.pbsnodes_hosts`), and names name hosts;
    ``-a`` lists them all, names or not. A combination PBS's usage does not allow
    (``-l`` with names or ``-S``, ``-v`` after ``-l -o -r -C -H``, ``-S`` alone, ``-H``
    without a host, no node and no ``-a -l``) is the usage error, exit 1."""
    from ..engine import display
    from ..engine.errors import PbsError
    from ..engine.qmgr import MESSAGES

    usage = COMMANDS["pbsnodes"][1]
    try:  # (OpenPBS 23.06's pbsnodes exits 1 on every error, a bad option too)
        opts, names = _getopt(args, "aF:orC:lvSjLHD:")
    except getopt.GetoptError as exc:
        raise CommandFailed(f"{_getopt_message(exc)}\n{usage}", 1) from None
    flags = {o for o, _ in opts}
    given = next((v for o, v in reversed(opts) if o == "-F"), None)
    fmt = given.lower() if given is not None else None
    if fmt not in (None, "json", "dsv"):
        raise CommandFailed(f"invalid -F format {given!r}: use json or dsv\n{usage}", 1)
    delimiter = next((v for o, v in reversed(opts) if o == "-D"), "|")
    comment = next((v for o, v in opts if o == "-C"), None)
    if "-l" in flags and (names or flags & {"-a", "-S", "-H"}):
        raise CommandFailed(f"-l takes no node and no other listing\n{usage}", 1)
    order = [o for o, _ in opts]
    if "-v" in flags and set(order[:order.index("-v")]) & {"-l", "-o", "-r", "-C", "-H"}:
        raise CommandFailed(f"-v goes before -l, -o, -r, -C and -H\n{usage}", 1)
    if not names and not flags & {"-a", "-l", "-o", "-r", "-C", "-H", "-S"}:
        raise CommandFailed(f"a node, -a or -l is required\n{usage}", 1)
    if "-S" in flags and not names and "-a" not in flags:
        raise CommandFailed(f"-S needs -a or a node\n{usage}", 1)
    if flags & {"-j", "-L"} and "-S" not in flags and not names and "-a" not in flags:
        raise CommandFailed(f"-j and -L go with -S\n{usage}", 1)
    if "-H" in flags and not names:
        raise CommandFailed(f"-H needs a host\n{usage}", 1)
    client = engine_client()
    status = 0
    hosts = not flags & {"-v", "-H"}  # (PBS's pbsnodes lists hosts, unless -v)
    marking = "-o" in flags or "-r" in flags or comment is not None
    try:
        every = client("stat_nodes") if not marking and (
            flags & {"-l", "-H"} or hosts) else {}
    except PbsError as err:  # (the server's acl_users: OpenPBS 23.06's words, checked)
        for name in names if names and "-a" not in flags else [None]:
            _node_error(name, err)
        return 1
    if "-l" in flags:
        out = display.pbsnodes_down(every if "-v" in flags else display.pbsnodes_hosts(every))
        if out:
            print(out)
        return 0
    if "-o" in flags or "-r" in flags or comment is not None:
        if not names:
            raise CommandFailed("a node name is required", 1)
        offline = True if "-o" in flags else (False if "-r" in flags else None)
        for name in names:  # PBS's words: ``Error marking node n1 - Unknown node ``
            try:
                client("node_state", names=[name], offline=offline, comment=comment)
            except PbsError as err:
                text = MESSAGES.get(err.code, err.message) if err.message == \
                    PbsError(err.code).message else err.message
                print(f"Error marking node {name} - {text}", file=sys.stderr)
                status = 1
        return status
    nodes: dict[str, Any] = {}
    for name in [None] if "-a" in flags else names:  # (-a: all, whatever is named)
        try:  # PBS's words: ``Node: n1,  Error: Unknown node ``
            if "-H" in flags:  # (a host's vnodes, in the server's order)
                found = {n: a for n, a in every.items() if name in (
                    n, (a.get("resources_available") or {}).get("host"))}
                if not found:
                    raise PbsError(15062)
                nodes.update(found)
            elif hosts:
                found = display.pbsnodes_hosts(every, only=name)
                if not found and name is not None:
                    raise PbsError(15062)
                nodes.update(found)
            else:
                nodes.update(client("stat_nodes", names=[name] if name else None))
        except PbsError as err:
            _node_error(name, err)
            status = 1
    if not nodes:
        return status
    if "-S" in flags:
        print(display.pbsnodes_summary(
            nodes, jobs="-j" in flags, long="-L" in flags, fmt=fmt, delimiter=delimiter,
            server=client("status")["server"] if fmt == "json" else None))
    elif fmt == "json":
        print(display.pbsnodes_json(nodes, client("status")["server"]))
    elif fmt == "dsv":
        print(display.pbsnodes_dsv(nodes, delimiter))
    else:
        print(display.pbsnodes_full(nodes))
    return status


@pbs_command("qmove", "usage: qmove destination job_identifier...")
def qmove(args: list[str]) -> int:
    _, rest = _getopt(args, "")
    if len(rest) < 2:
        raise getopt.GetoptError("a destination and a job id are required")
    client = engine_client()
    good, status = [], 0
    for job_id in rest[1:]:
        bad = _checked_id("qmove", job_id, client)
        if bad:
            status = bad
        else:
            good.append(job_id)
    if good:
        status = _report_each("qmove", _each_refused(good, lambda: client(
            "move", destination=rest[0], ids=good)), client) or status
    return status


@pbs_command("pbs_attach", "usage: pbs_attach -j job_identifier command [arg...]")
def pbs_attach(args: list[str]) -> int:
    opts, command = getopt.getopt(args, "+j:")  # options end at the command
    job_id = next((v for o, v in opts if o == "-j"), os.environ.get("PBS_JOBID"))
    if not job_id or not command:
        raise getopt.GetoptError("a job id (-j or $PBS_JOBID) and a command are required")
    engine_client()("attach", id=job_id, pid=os.getpid())
    try:
        os.execvp(command[0], command)  # the attached pid becomes the command
    except OSError as exc:
        raise CommandFailed(f"cannot run {command[0]}: {exc.strerror}", 1) from None


#: pbs_rsub's access lists: option -> (attribute, kind of list).
_RSUB_LISTS = {"-U": ("Authorized_Users", "user"), "-G": ("Authorized_Groups", "group"),
               "-H": ("Authorized_Hosts", "host")}


def _rsub_list(opt: str, value: str) -> list[str]:
    """A -U/-G/-H list, its entries as given, signs and all: an empty entry or a blank is
    PBS's ``illegal -U value``; one sign is the sign (``--bob`` refuses a user ``-bob``,
    ``+-`` lets in a user ``-``), and a sign alone, which OpenPBS takes as its answer for
    everyone the list does not name, is refused saying so (`values.acl_sign_alone`)."""
    from ..values import acl_sign_alone

    entries = value.split(",")
    if not all(e and not any(c.isspace() for c in e) for e in entries):
        raise CommandFailed(f"illegal {opt} value", 2)
    for entry in entries:
        if (why := acl_sign_alone(entry, _RSUB_LISTS[opt][1])) is not None:
            raise CommandFailed(f"illegal {opt} value: {why}", 2)
    return entries


def _rsub_variables(env: dict[str, str]) -> dict[str, str]:
    """The Variable_List pbs_rsub sends, as OpenPBS 23.06's: PBS_O_LOGNAME and PBS_O_MAIL
    from the environment (each only if set), PBS_O_HOST (this host, as qsub names it) and
    PBS_TZID if set (`pbs_rstat -f` shows ``Variable_List = PBS_O_HOST=vm``, checked)."""
    import socket

    out = {"PBS_O_LOGNAME": env.get("LOGNAME"),
           "PBS_O_HOST": socket.gethostname().split(".")[0],
           "PBS_O_MAIL": env.get("MAIL"), "PBS_TZID": env.get("PBS_TZID")}
    return {name: value for name, value in out.items() if value is not None}


#: pbs_rsub's and pbs_ralter's options that set an attribute to their value as given (each
#: command's getopt letters say which it takes; the server checks the values).
_RESV_VALUES = {"-D": "reserve_duration", "-N": "Reserve_Name", "-p": "partition",
                "-m": "Mail_Points", "-M": "Mail_Users"}


@pbs_command("pbs_rsub", "usage: pbs_rsub [-R start] [-E end] [-D duration] "
             "[-l select=...] [-l place=...] [-N name] [-p partition] "
             "[-U auth_user_list] [-G auth_group_list] [-H auth_host_list] "
             "[-r rrule_expression]")
def pbs_rsub(args: list[str]) -> int:
    from ..engine.jobspec import cvtdate

    opts, rest = _getopt(args, "R:E:D:l:N:p:U:G:H:r:")
    if rest:
        raise getopt.GetoptError(f"unexpected argument {rest[0]!r}")
    attrs: dict[str, Any] = {"Resource_List": {}}
    try:
        for opt, value in opts:
            if opt == "-R":
                attrs["reserve_start"] = cvtdate(value)
            elif opt == "-E":
                attrs["reserve_end"] = cvtdate(value)
            elif opt in _RESV_VALUES:
                attrs[_RESV_VALUES[opt]] = value
            elif opt == "-r":  # (a standing reservation: its zone is PBS_TZID's, as PBS's)
                if not os.environ.get("PBS_TZID"):
                    print("pbs_rsub error: a valid PBS_TZID timezone environment variable "
                          "is required.", file=sys.stderr)
                    return 2
                attrs["reserve_rrule"] = value
            elif opt in _RSUB_LISTS:
                attrs[_RSUB_LISTS[opt][0]] = _rsub_list(opt, value)
            elif opt == "-l":
                for item in _split_resources(value):
                    name, eq, res = item.partition("=")
                    if not eq or not name:
                        raise CommandFailed(f"illegal -l value: {item}", 2)
                    attrs["Resource_List"][name] = res
    except ValueError:
        raise CommandFailed("Bad time specification(s)", 2) from None
    attrs["Variable_List"] = _rsub_variables(dict(os.environ))
    answer = engine_client()("resv_submit", attrs=attrs)
    print(f"{answer['id']} {answer['state']}")
    return 0


def _node_error(name: str | None, err: PbsError) -> None:
    """pbsnodes' line for a server error: ``Node: n1,  Error: Unknown node `` for a node
    named, ``pbsnodes: Unauthorized Request `` for a listing (OpenPBS 23.06's, checked)."""
    from ..engine.errors import PbsError
    from ..engine.qmgr import MESSAGES

    if name is None:
        print(_server_error("pbsnodes", err), file=sys.stderr)
        return
    text = MESSAGES.get(err.code, err.message) if err.message == \
        PbsError(err.code).message else err.message
    print(f"Node: {name},  Error: {text}", file=sys.stderr)


@pbs_command("pbs_rstat", "usage: pbs_rstat [-f | -S | -B] [reservation_id...]")
def pbs_rstat(args: list[str]) -> int:
    from ..engine import display
    from ..engine.errors import PBSE_PERM, PbsError

    opts, ids = _getopt(args, "fSB")
    flags = {o for o, _ in opts}
    try:
        resvs = engine_client()("stat_resvs", ids=ids or None)
    except PbsError as err:  # (the server's acl_users: OpenPBS 23.06 exits 0, checked)
        if err.code != PBSE_PERM:
            raise
        print(_server_error("pbs_rstat", err), file=sys.stderr)
        return 0
    if "-f" in flags:
        out = display.rstat_full(resvs)
    elif "-B" in flags:
        out = "\n".join(f"Resv ID: {r}" for r in resvs)  # (OpenPBS 23.06's, checked)
    else:
        out = display.rstat_table(resvs)
    if out:
        print(out)
    return 0


@pbs_command("pbs_rdel", "usage: pbs_rdel reservation_id...")
def pbs_rdel(args: list[str]) -> int:
    _, ids = _getopt(args, "")
    if not ids:
        raise getopt.GetoptError("a reservation id is required")
    return _report_each("pbs_rdel", engine_client()("resv_delete", ids=ids))


_RALTER_USAGE = """usage: pbs_ralter [-I seconds] [-m mail_points] [-M mail_list]
                [-N reservation_name] [-R start_time] [-E end_time]
                [-U (+/-)username[,(+/-)username]...]
                [-G [(+/-)group[,(+/-)group]...]]
                [-D duration]
                [-W force]
                resv_id
       pbs_ralter --version"""


@pbs_command("pbs_ralter", _RALTER_USAGE)
def pbs_ralter(args: list[str]) -> int:
    """OpenPBS 23.06's pbs_ralter (checked): its options and usage, ``-l`` for a select
    only, ``-W force`` only; ``pbs_ralter: <id> ALTER REQUESTED`` once the server took
    the request (whether the new window was then confirmed is in pbs_rstat and the log;
    with ``-I``, ``CONFIRMED`` or ``DENIED`` in its place)."""
    from .. import values
    from ..engine.jobspec import cvtdate

    opts, rest = _getopt(args, "I:m:M:N:R:E:U:G:D:l:W:")
    attrs: dict[str, Any] = {}
    force = False
    interactive = None
    for opt, value in opts:
        if opt in ("-R", "-E"):
            try:
                attrs["reserve_start" if opt == "-R" else "reserve_end"] = cvtdate(value)
            except ValueError:
                raise getopt.GetoptError(f"illegal {opt} time value") from None
        elif opt == "-I":
            if not values.digits(value.removeprefix("-")):
                raise getopt.GetoptError("illegal -I time value")
            # (past any time, one past it, which the server refuses as any other: int()
            # refuses 4300 digits and more)
            interactive = (values.TIME_MAX + 1) * (-1 if value[0] == "-" else 1) \
                if values.past(value.removeprefix("-"), values.TIME_MAX) else int(value)
        elif opt in _RESV_VALUES:
            attrs[_RESV_VALUES[opt]] = value
        elif opt in ("-U", "-G"):
            attrs[_RSUB_LISTS[opt][0]] = _rsub_list(opt, value)
        elif opt == "-l":
            name, eq, select = value.partition("=")
            if name != "select" or not eq:
                print(f"pbs_ralter -l only allows for select\n{_RALTER_USAGE}",
                      file=sys.stderr)
                return 2
            attrs["select"] = select
        elif opt == "-W":
            if value != "force":
                raise getopt.GetoptError("illegal -W value")
            force = True
    if len(rest) != 1:
        print(_RALTER_USAGE, file=sys.stderr)
        return 2
    done = engine_client()("resv_alter", id=rest[0], attrs=attrs, force=force,
                           **({"interactive": interactive} if interactive is not None else {}))
    # (with -I, what came of a new window: OpenPBS 23.06 prints CONFIRMED, checked)
    shown = done["state"] if interactive is not None and done["state"] != "REQUESTED" else \
        "ALTER REQUESTED"
    print(f"pbs_ralter: {done['id']} {shown}")
    return 0


@pbs_command("tracejob", "usage: tracejob [-a|s|l|m|v] [-w size] [-p path] [-n days] "
             "[-f filter_type] job_identifier...")
def tracejob(args: list[str]) -> int:
    """One job's lines of the server log and the accounting log (`engine.tracejob`): files
    in the home only the server's user (root) may read."""
    import socket

    from ..engine import tracejob as trace

    return trace.main(args, engine_home().root, socket.gethostname().split(".")[0])


from . import qcommands as _qcommands  # noqa: E402,F401  (qselect, qsig, qorder, ...)

__all__ = ["COMMANDS", "run"]
