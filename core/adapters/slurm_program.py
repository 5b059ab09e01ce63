"""The program Slurm runs (Prolog, Epilog, PrologSlurmctld, EpilogSlurmctld,
HealthCheckProgram, SuspendProgram, ResumeProgram, ResumeFailProgram): standard library only.

``pbsplug slurm install`` writes one small executable per script (`program_text`), with the
environment's interpreter as an absolute path (Slurm gives its scripts no PATH), started with
``-IS``, and importing only what the interpreter has built in (``_socket``, ``marshal``,
``posix``: the ``socket``, ``json`` and even ``os`` modules cost more than the rest of the
program) and `worker_client`,
the hook scripts' shared side of the worker, copied beside it, so that nothing more
is loaded before the event leaves. It sends the script's name and Slurm's environment to the
host's pbsplug worker (`worker`, with `slurm_bridge.load` and `slurm_bridge.dispatch`, in
marshal's format) over the UNIX socket the install named after the config's digest, starting
the worker if there is none, and exits with the answer's status. Run as another user than root (a
SlurmUser that is not root), or where no worker can be had, it imports pbsplug and runs the
bridge in this process instead.

Where install found a C compiler, slurm.conf names the native launcher instead
(``slurm_launcher.c``, one per script beside these programs), which sends the same request
without starting an interpreter and execs this program for everything but that fast path.

A failure of pbsplug itself (no config, a worker that died) is one line on stderr and exit
status 1: Slurm's own rule for a failed script then applies, which stops the job rather
than letting it run unchecked.

The site's own program for the script, which install's slurm.conf line replaced (``site``:
a path, or for the Prolog and Epilog a glob pattern), runs first (`run_site`), with the
same environment and arguments; its failure is sent with the request, and the bridge
decides what then runs (`slurm_bridge.RUN_AFTER_SITE_FAILED`).
"""

import _signal
import marshal
import posix
import sys

try:
    import worker_client  # beside this module (the copies in install's --dir): stdlib only
except ImportError:  # imported as pbsplug.adapters.slurm_program (install, tests)
    from . import worker_client

# The functions' annotations are strings (a local variable's is never evaluated), and what
# they name is imported for the checker alone (mypy takes TYPE_CHECKING as true), as in
# `worker_client`: nothing more is imported for them when the program runs.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn


#: TaskProlog's request to the task worker, whole.
TASK_REQUEST = b'{"script": "task_prolog", "env": {}, "argv": [], "answer": "marshal"}'
#: Set by the native launcher in the environment of this program when it execs it after
#: running the site's programs itself: ``<pid> <status> <program>`` (none runs twice),
#: believed only when ``<pid>`` is this process's (exec keeps the pid: `_take_site_ran`).
SITE_RAN = "PBSPLUG_SITE_RAN"
#: The scripts whose site program may be a glob pattern (slurm.conf's Prolog and Epilog).
GLOB_SCRIPTS = ("prolog", "epilog")
#: The scripts that run every match of a pattern even after one failed: cleanup.
RUN_EVERY_MATCH = ("epilog",)
#: What the kernel adds to a process's /proc/<pid>/exe once the file it runs is removed or
#: replaced (a Slurm package upgraded while steps run).
DELETED = " (deleted)"


def is_stepd(exe: "str", stepd: "str") -> "bool":
    """Whether `exe` (a process's /proc/<pid>/exe) is slurmstepd: the path `stepd` install
    found, else any executable whose name starts with slurmstepd; either one as it was
    before a package upgrade replaced the file (`DELETED` once after it: the running
    steps' slurmstepd after a rolling upgrade). That admits no new process: the suffix
    comes only from a process that ran the file at `stepd`, a path of root's (a user can
    put no file there, nor one of that name beside it), and a user who runs that file
    themselves is refused further on as before (a step's slurmstepd must be root's and
    name its step). Shared by the task worker (`worker`) and TaskProlog's check of who
    asks (`slurm_bridge`)."""
    exe = exe.removesuffix(DELETED)
    return exe == stepd if stepd else exe.rpartition("/")[2].startswith("slurmstepd")


def program_text(python: str, adapters_dir: str, script: str, config_file: str,
                 socket_path: str, task: tuple[str, str] | None = None, site: str = "") -> str:
    """The executable for one Slurm script; `task`: the task worker's (config, socket),
    which the Prolog starts when it is not running, for the TaskProlog that follows;
    `site`: the site's own program it runs first (`run_site`)."""
    extra = f", {task[0]!r}, {task[1]!r}" if task else ""
    extra += f", site={site!r}" if site else ""
    return (f"#!{python} -IS\n"
            f"# pbsplug's {script} program for Slurm, written by 'pbsplug slurm install': "
            "do not edit.\n"
            "import sys\n"
            f"sys.path.insert(0, {adapters_dir!r})\n"
            "import slurm_program\n"
            f"slurm_program.leave(slurm_program.main({script!r}, {config_file!r}, "
            f"{socket_path!r}{extra}))\n")


def task_program_text(python: str, adapters_dir: str, socket_path: str, site: str = "") -> str:
    """TaskProlog: run by Slurm as the job's user before each task; runs the site's own
    TaskProlog (`site`) first, then asks the node's task worker (root) to run
    execjob_launch for this task, and prints both's lines, the site's first."""
    extra = f", site={site!r}" if site else ""
    return (f"#!{python} -IS\n"
            "# pbsplug's TaskProlog for Slurm, written by 'pbsplug slurm install': do not "
            "edit.\n"
            "import sys\n"
            f"sys.path.insert(0, {adapters_dir!r})\n"
            "import slurm_program\n"
            f"slurm_program.leave(slurm_program.task_main({socket_path!r}{extra}))\n")


def leave(status: "int") -> "NoReturn":
    """End the program with `status` once its output is out, skipping the interpreter's
    teardown (a millisecond or more per script; nothing of the program's needs it)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 1  # the output did not reach Slurm
        except AttributeError:  # None: a stream closed at the start (`_closed_stdio`)
            pass
    posix._exit(status)


def _closed_stdio() -> "None":
    """slurmctld 22.05 runs SuspendProgram, ResumeProgram and ResumeFailProgram with every
    file descriptor closed, stdin, stdout and stderr too, and Python then has None for
    sys.stdout and sys.stderr: `leave`'s flush of None was an AttributeError, exit 1 (in
    slurmctld's log: "power_save: program exit status of 1") each time no worker ran. Each
    of the three closed is opened on /dev/null, so that no file or socket the program
    opens later (the log, the worker's socket) takes its number, nor a worker it starts
    inherits it as its output; Python's streams that were None write there."""
    for fd in (0, 1, 2):
        try:
            posix.fstat(fd)
        except OSError:
            null = posix.open("/dev/null", posix.O_RDWR)
            if null != fd:  # (the lowest free number: this one, unless a lower one was free)
                posix.dup2(null, fd)
                posix.close(null)
    if sys.stdout is None:
        sys.stdout = open(1, "w", encoding="utf-8", errors="surrogateescape", closefd=False)
    if sys.stderr is None:
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace",
                          closefd=False)


def is_pattern(script: "str", site: "str") -> "bool":
    """Whether `site` is a glob pattern: only the Prolog's and the Epilog's may be."""
    return script in GLOB_SCRIPTS and any(c in site for c in "*?[")


def site_programs(script: "str", site: "str") -> "list[str]":
    """The programs `site` names: for the Prolog and Epilog a glob pattern's matches, in
    glob(3)'s order (byte by byte, as the C launcher's); else the path itself."""
    if is_pattern(script, site):
        import glob

        return sorted(glob.glob(_as_python_glob(site)),
                      key=lambda p: p.encode("utf-8", "surrogateescape"))
    return [site]


def _as_python_glob(pattern: "str") -> "str":
    """glob(3)'s `pattern` (Slurm's and the C launcher's) in Python's glob syntax: a
    backslash takes the next character as it is, and ``[^...]`` is ``[!...]``; Python's
    glob reads both as plain characters."""
    import glob

    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\" and i + 1 < len(pattern):
            out.append(glob.escape(pattern[i + 1]))
            i += 2
            continue
        if char == "[":
            j = i + 1 + (pattern[i + 1:i + 2] in ("!", "^"))
            j += pattern[j:j + 1] == "]"  # (a ']' first is one of the set)
            end = pattern.find("]", j)
            if end > 0 and "/" not in pattern[i:end]:
                body = pattern[i + 1:end]
                out.append("[" + ("!" + body[1:] if body.startswith("^") else body) + "]")
                i = end + 1
                continue
        out.append(char)
        i += 1
    return "".join(out)


def run_site(script: "str", site: "str", capture: "bool" = False
             ) -> "tuple[int, str, bytes]":
    """The site's programs for `script` run one after the other, each with this process's
    environment and arguments, stdin /dev/null, SIGPIPE and SIGXFSZ not ignored (as
    Python does in itself), waited for: (the first failure's status, that program, the
    programs' stdout when `capture`). After a failure the rest run only
    for an Epilog (`RUN_EVERY_MATCH`). One killed by a signal fails with 128 + its number;
    one that cannot be run, with 127."""
    status, failed, out = 0, "", b""
    for path in site_programs(script, site):
        code, data = _run_one(path, capture)
        out += data
        if code and not status:
            status, failed = code, path
            if script not in RUN_EVERY_MATCH:
                break
    return status, failed, out


def _run_one(path: "str", capture: "bool") -> "tuple[int, bytes]":
    args = [path, *sys.argv[1:]]
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # (the child would write them again)
    read_end, write_end = posix.pipe() if capture else (-1, -1)
    pid = posix.fork()
    if pid == 0:
        try:
            # (Python ignores these in itself; a program gets them back, as subprocess
            # gives them: a `loop | head -1` in the site's shell script ends)
            for number in (_signal.SIGPIPE, _signal.SIGXFSZ):
                _signal.signal(number, _signal.SIG_DFL)
            posix.dup2(posix.open("/dev/null", posix.O_RDONLY), 0)
            if capture:
                posix.dup2(write_end, 1)
            posix.execv(path, args)
        except OSError as exc:
            posix.write(2, f"pbsplug: cannot run the site's program {path}: "
                           f"{exc.strerror or exc}\n".encode("utf-8", "surrogateescape"))
        finally:
            posix._exit(127)
    data = b""
    if capture:
        posix.close(write_end)
        chunks: list[bytes] = []
        while chunk := posix.read(read_end, 65536):
            chunks.append(chunk)
        posix.close(read_end)
        data = b"".join(chunks)
    code = posix.waitstatus_to_exitcode(posix.waitpid(pid, 0)[1])
    return (128 - code if code < 0 else code), data


def task_main(socket_path: "str", site: "str" = "") -> "int":
    """TaskProlog's side: the request is nothing but "this task": who asks is what the
    kernel tells the worker. The request is JSON (the worker reads what a user sent); the
    answer, from root's worker, is asked for in marshal's format, as the other programs get
    theirs: ``json`` would cost this program more than the rest of it (``re`` comes with
    it). A refusal that comes before the request is read is JSON still."""
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])
    _closed_stdio()
    _take_site_ran()  # (the job's user's to set: never believed, shown to no one)
    if site:  # the site's lines first: pbsplug's, after them, win where both set a name
        status, program, out = run_site("task_prolog", site, capture=True)
        if out and not out.endswith(b"\n"):
            out += b"\n"  # (Slurm reads lines: pbsplug's first would end the site's last)
        sys.stdout.buffer.write(out)
        if status:
            print(f"pbsplug TaskProlog: the site's TaskProlog {program} exited {status}: "
                  "pbsplug's execjob_launch does not run", file=sys.stderr)
            return status
    conn = worker_client.connect(socket_path)
    if conn is None:
        print(f"pbsplug TaskProlog: no pbsplug task worker at {socket_path} (the Prolog "
              "starts it)", file=sys.stderr)
        return 1
    try:
        data = worker_client.exchange(conn, TASK_REQUEST)
    except OSError as exc:  # a worker killed mid-talk: reset, broken pipe
        print(f"pbsplug TaskProlog: the task worker at {socket_path} broke off: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 1
    try:
        if data[:2] == b'{"':  # JSON's object; marshal has no type code '"'
            import json

            answer = json.loads(data)
        else:
            answer = marshal.loads(data) if data else None
    except (ValueError, EOFError, TypeError):
        answer = None
    if not isinstance(answer, dict) or "exit" not in answer:
        print("pbsplug TaskProlog: no answer from the task worker", file=sys.stderr)
        return 1
    return _carry_out(answer)


def _carry_out(answer: "dict[str, Any]") -> "int":
    """The worker's answer as this script's output and exit status."""
    if answer.get("stdout"):
        sys.stdout.write(answer["stdout"])
    if answer.get("error"):
        print(answer["error"], file=sys.stderr)
    return int(answer.get("exit") or 0)


def native_answer(script: "str", answer: "object") -> "bytes":
    """`answer` as the native launcher (slurm_launcher.c) carries it out: what `main` and
    `_carry_out` would write and return, computed here in the worker's child, as
    ``PBSPLUG-ANSWER 1 <status> <stdout bytes> <stderr bytes>\\n`` and the bytes of both."""
    if not isinstance(answer, dict) or "exit" not in answer:  # the worker's own failure
        detail = answer.get("detail") if isinstance(answer, dict) else answer
        status, out, err = 1, "", f"pbsplug {script}: {detail}\n"
    else:
        out = answer["stdout"] if answer.get("stdout") else ""
        err = f"{answer['error']}\n" if answer.get("error") else ""
        status = int(answer.get("exit") or 0)
    # What Slurm's scripts' stdio is in the Python program (UTF-8, undecodable kept as is).
    out_b = out.encode("utf-8", "surrogateescape")
    err_b = err.encode("utf-8", "surrogateescape")
    return b"PBSPLUG-ANSWER 1 %d %d %d\n" % (status & 0xFF, len(out_b), len(err_b)) \
        + out_b + err_b


def _python(config_file: "str") -> "str":
    import json

    with open(config_file, "rb") as fh:
        return json.loads(fh.read())["python"]


def ask_worker(config_file: "str", path: "str", request: "dict[str, Any]",
               meanwhile: "Callable[[], object] | None" = None,
               failed: "Callable[[str], object] | None" = None) -> "Any":
    """The worker's answer, or None when there is no worker to ask (`worker_client.ask`:
    one reset connection is asked again, of a new worker). `meanwhile` is called once the
    request is sent, while the worker forks and runs the event (or when there is no
    worker); `failed` is told why there is none (it could not be started, or it reset the
    connection twice)."""
    data = worker_client.ask(lambda: _python(config_file), config_file, path,
                             marshal.dumps(request), failed=failed, meanwhile=meanwhile)
    if data is None:
        return None
    if not data:  # the event's process was killed at its deadline, or crashed
        return {"exit": 1, "stdout": "",
                "error": "pbsplug: the worker's process ended without an answer"}
    return marshal.loads(data)


def run_here(config_file: "str", request: "dict[str, Any]", no_worker: "str" = ""
             ) -> "dict[str, Any]":
    """Without a worker: pbsplug and the plugins imported in this process (`no_worker`: why
    none could be started, for the log)."""
    import json
    import site

    with open(config_file, "rb") as fh:
        config = json.loads(fh.read())
    for directory in config.get("site_dirs") or ():
        site.addsitedir(directory)
    from pbsplug.adapters.slurm_bridge import run_here as bridge

    return bridge(config_file, request, no_worker)


def _environ() -> "dict[str, str]":
    """The environment as ``os.environ`` decodes it (the file system's encoding, undecodable
    bytes kept as surrogates), without importing ``os``."""
    encoding = sys.getfilesystemencoding()
    return {key.decode(encoding, "surrogateescape"): value.decode(encoding, "surrogateescape")
            for key, value in posix.environ.items()}


def _take_site_ran() -> "bytes | None":
    """`SITE_RAN`'s ``<status> <program>`` when the native launcher set it for its exec of
    this process (its ``<pid>`` is this process's: exec keeps the pid, and a value this
    process's parent or anything before it set names another), else None. Either way the
    variable leaves the environment (``posix.environ``, which ``os.environ`` shares, and
    the C library's, which the site's programs get): the site's programs and the hooks
    never see it."""
    key = SITE_RAN.encode()
    ran = posix.environ.pop(key, None)
    posix.unsetenv(key)
    if ran is None:
        return None
    pid, _, rest = ran.partition(b" ")
    return rest if pid == b"%d" % posix.getpid() else None


def _site_ran(script: "str", site: "str", ran: "bytes | None") -> "tuple[int, str]":
    """(status, program) of the site's programs: as the native launcher that ran them says
    (`ran`, from `_take_site_ran`), else run here."""
    if ran is None:
        return run_site(script, site)[:2]
    code, _, program = ran.decode("utf-8", "surrogateescape").partition(" ")
    return (int(code) if code.isdigit() else 1), program


def main(script: "str", config_file: "str", socket_path: "str" = "", task_config: "str" = "",
         task_socket: "str" = "", site: "str" = "") -> "int":
    # slurmd and slurmctld start their scripts with signals blocked (SIGALRM, SIGTERM
    # among them: the shared recipe's signal-mask pitfall); the alarm needs SIGALRM, and a
    # worker started from here inherits the mask.
    _signal.pthread_sigmask(_signal.SIG_SETMASK, [])
    _closed_stdio()
    site_status = 0
    try:
        ran = _take_site_ran()  # before anything reads the environment
        request: dict[str, object] = {"script": script, "env": _environ(),
                                      "argv": sys.argv[1:]}
        if site:
            site_status, program = _site_ran(script, site, ran)
            if site_status:  # the bridge logs it and decides what runs
                request["site_status"], request["site_program"] = site_status, program
        root = posix.geteuid() == 0
        task_worker: Callable[[], None] | None = None
        if task_socket and root:  # the TaskProlog after this Prolog needs it running

            def task_worker() -> "None":
                conn = worker_client.connect(task_socket) or worker_client.start(
                    _python(task_config), task_config, task_socket)
                if conn is not None:
                    conn.close()

        # A worker that cannot be started (its folder not made: /run read-only, a full
        # disk; refused; its lock; its process; one that ends at start), or that reset the
        # connection twice, leaves the events to this process, with one line in the log
        # saying why: as this script's failure, a Prolog's drained the node. (The task
        # worker's start is not: see the docs.)
        answer: object = None
        no_worker: list[str] = []
        if socket_path and root:
            answer = ask_worker(config_file, socket_path, request, task_worker,
                                no_worker.append)
        elif task_worker is not None:
            task_worker()
        if answer is None:
            answer = run_here(config_file, request, no_worker[0] if no_worker else "")
    except Exception as exc:  # noqa: BLE001 - one line for Slurm's log, never a traceback
        print(f"pbsplug {script}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return site_status or 1
    if not isinstance(answer, dict) or "exit" not in answer:  # the worker's own failure
        detail = answer.get("detail") if isinstance(answer, dict) else answer
        print(f"pbsplug {script}: {detail}", file=sys.stderr)
        return site_status or 1
    status = _carry_out(answer)
    return site_status or status
