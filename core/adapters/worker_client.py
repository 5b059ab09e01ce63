"""The hook scripts' side of the worker (`worker`): connect, start one, ask. Standard library
only, and only what the interpreter has built in at the top (``_socket``; not even ``os``,
which with ``collections.abc`` costs a Slurm program about 1.5 ms), because both
scripts load it by path without pbsplug on ``sys.path``: PBS's hook script (`pbs_hook`, in
pbs_python, from the install's ``wire_dir``) and Slurm's programs (`slurm_program`, from the
copy beside them that ``pbsplug slurm install`` writes). What goes over the socket (JSON,
marshal) and what an answer means stay each script's own; this module knows only where
an answer ends (`whole`: the client stops reading there, not at the connection's end, which
a helper process a hook left running could hold off).
"""

import _socket
import posix
import sys

# The functions' annotations are strings (a local variable's is never evaluated), and what
# they name is imported for the checker alone (mypy takes TYPE_CHECKING as true): at run time
# this module imports nothing more for them, not even ``typing`` or ``__future__``.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import os
    from collections.abc import Callable

#: Seconds to wait for a worker a script started.
WORKER_START = 20.0
#: The environment a worker is started with (no user's PATH, no user site).
WORKER_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONNOUSERSITE": "1"}


def connect(path: "str") -> "_socket.socket | None":
    """A connection to the worker's socket at `path`, or None when nothing answers there,
    or when what answers is not root's (nor this user's): a socket someone else put there
    is no worker, and is told nothing (the native launcher checks the same)."""
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(path)
        peer = conn.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, 12)
    except OSError:
        conn.close()
        return None
    uid = int.from_bytes(peer[4:8], sys.byteorder)  # struct ucred: pid, uid, gid
    if uid != 0 and uid != posix.geteuid():
        conn.close()
        return None
    return conn


def _owner(uid: "int") -> "str":
    import pwd

    try:
        return f"uid {uid} ({pwd.getpwuid(uid).pw_name})"
    except KeyError:
        return f"uid {uid}"


def _entry_problem(path: "str", info: "os.stat_result", trusted: "tuple[int, ...]",
                   others_may_add: "bool") -> "str | None":
    """`pbsplug.safedirs._entry_problem`, in its words."""
    import stat

    owner = _owner(info.st_uid)
    if stat.S_ISLNK(info.st_mode):
        return None if info.st_uid in trusted else f"{path} is a link owned by {owner}"
    mode = f"mode {stat.S_IMODE(info.st_mode):04o}"
    if info.st_uid not in trusted:
        return f"{path} is owned by {owner}, {mode}"
    if not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return None
    who = "everyone" if info.st_mode & stat.S_IWOTH else "its group"
    if not info.st_mode & stat.S_ISVTX:
        return f"{path} is writable by {who} (owner {owner}, {mode})"
    if not others_may_add:
        return (f"{path} is writable by {who} (owner {owner}, {mode}): others may add "
                "files to it")
    return None


def _and_parents(path: "str") -> "list[str]":
    import os

    out = [path]
    while os.path.dirname(out[-1]) != out[-1]:  # (abspath keeps a leading "//": its own top)
        out.append(os.path.dirname(out[-1]))
    return out


def folder_problem(folder: "str") -> "str | None":
    """Why a user other than root (or this user) could plant or change what is in `folder`
    (a worker's socket and lock live there), or None: `pbsplug.safedirs.folder_problem`'s
    rule and words (the folder and every folder above it, as named and as its links
    resolve, theirs and writable by no one else, or sticky above it as /tmp is; every link
    followed theirs), copied because this module may not import pbsplug (tests check the
    two agree). Levels not made yet are left out."""
    import os

    trusted = (0, os.geteuid())
    path = os.path.abspath(folder)
    real = os.path.realpath(path)
    checks: dict[str, bool] = {}  # a real folder -> whether others may add to it
    for directory in _and_parents(real):
        checks.setdefault(directory, directory != real)
    for prefix in reversed(_and_parents(path)):
        if not os.path.islink(prefix):
            continue
        try:
            info = os.lstat(prefix)
        except OSError:
            continue
        problem = _entry_problem(prefix, info, trusted, True)
        if problem:
            return problem
        for directory in _and_parents(os.path.realpath(os.path.dirname(prefix))):
            checks.setdefault(directory, True)
    for directory in sorted(checks, key=lambda p: len(p.rstrip("/").split("/"))):
        try:
            info = os.lstat(directory)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as exc:
            return f"{directory} cannot be checked: {exc.strerror or exc}"
        problem = _entry_problem(directory, info, trusted, checks[directory])
        if problem:
            return problem
    return None


#: The mode of a level above a worker's folder that a start makes (``mkdir -p``'s, whatever
#: the umask): every user passes through it, as Slurm's TaskProlog, run as the job's
#: user, must to reach the public task worker's folder beside the private one.
PARENT_MODE = 0o755


def _make_folder(folder: "str", mode: "int") -> "str | None":
    """`folder` made level by level, itself `mode` and each missing level above it
    `PARENT_MODE`, or why it is refused (`folder_problem`). A level is never made through a
    link another user put there: mkdir does not follow one, and each level is looked at
    once it is there. Another failure is its OSError. (Each level made `mode` before: the
    first worker to start, the private one, made the common parent 0700, and no user's
    TaskProlog could reach the task worker's socket.)"""
    import os
    import stat

    problem = folder_problem(folder)
    if problem:
        return problem
    trusted = (0, os.geteuid())
    top = os.path.abspath(folder)
    for level in reversed(_and_parents(top)[:-1]):
        wanted = mode if level == top else PARENT_MODE
        try:
            os.mkdir(level, wanted)
            made = True
        except FileExistsError:
            made = False
        info = os.lstat(level)
        if stat.S_ISLNK(info.st_mode) and info.st_uid not in trusted:
            return f"{level} is a link owned by {_owner(info.st_uid)}"
        if made and stat.S_IMODE(info.st_mode) != wanted:  # (the umask took bits away)
            fd = os.open(level, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
            try:
                os.fchmod(fd, wanted)
            finally:
                os.close(fd)
    return folder_problem(folder)


def exchange(conn: "_socket.socket", data: "bytes",
             meanwhile: "Callable[[], object] | None" = None) -> "bytes":
    """Send `data`, then read the answer: up to the end of one whole answer (`whole`), or
    else to the connection's end; b"" when the worker's process ended without one. `conn`
    is closed. `meanwhile`, when given, is called between the two, while the worker works.

    Not to the end alone: a helper process a hook left running (os.fork, a daemonising
    library) holds a copy of the connection, and a worker from before the worker shut the
    connection down after its answer (`worker`'s docstring) let the end come only when
    that helper ended: the script waited until PBS's alarm or Slurm's timeout. An answer
    that is not one whole document is still read to the end, as before."""
    try:
        conn.sendall(data)
        conn.shutdown(_socket.SHUT_WR)
        if meanwhile is not None:
            meanwhile()
        chunks = []
        while True:
            chunk = conn.recv(1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
            if chunk[-1:] in (b"}", b"0"):  # how a JSON object and a marshal dict end
                chunks = [b"".join(chunks)]
                if whole(chunks[0]):
                    break
    finally:
        conn.close()
    return b"".join(chunks)


def whole(answer: "bytes") -> "bool":
    """Whether `answer` is one whole worker's answer: a JSON object (the PBS hook's answer, a
    refusal) or a marshal dict (the Slurm programs'). Both say where they end, so no
    proper beginning of one reads as whole; anything else (the native answer, which only
    the native launcher reads) is never whole here, and is read to the connection's end.
    The modules are imported only then: ``json`` where the script has it already (the PBS
    hook; a Slurm program for a refusal), ``marshal`` built in."""
    loads: Callable[[bytes], object]
    if answer[:2] == b'{"':  # JSON's object; marshal has no type code '"'
        if answer[-1:] != b"}":
            return False
        import json

        loads = json.loads
    else:
        if answer[-1:] != b"0":  # marshal's dict ends with its TYPE_NULL
            return False
        import marshal

        loads = marshal.loads
    try:
        return isinstance(loads(answer), dict)
    except (ValueError, EOFError, TypeError):
        return False


def start(python: "str", config_file: "str", path: "str", folder_mode: "int" = 0o700,
          failed: "Callable[[str], object] | None" = None) -> "_socket.socket | None":
    """Start ``python -m pbsplug.adapters.worker path config_file`` unless one answers at
    `path` already (one start, however many scripts wait: a lock beside the socket), and
    wait up to `WORKER_START` seconds for it (not once it has ended); a connection to it,
    or None.

    `failed`, when given, is told in one line why there is no worker (its folder refused
    or not made, its lock, its process, one that ended at start or never answered), and
    None is returned: the caller runs the event without one. (The PBS hook gives it: a
    start that raised failed the hook, and PBS's fail_action could take the node offline,
    while a worker that could not be asked already left the plugin to run in pbs_python.)
    Without it, a refused folder is said on stderr and any other failure raised."""
    try:
        return _start(python, config_file, path, folder_mode, failed)
    except OSError as exc:
        if failed is None:
            raise
        failed(f"no worker could be started at {path}: {exc}")
        return None


def _start(python: "str", config_file: "str", path: "str", folder_mode: "int",
           failed: "Callable[[str], object] | None") -> "_socket.socket | None":
    """`start`'s work."""
    import fcntl
    import os
    import subprocess
    import time

    folder = os.path.dirname(path)
    problem = _make_folder(folder, folder_mode)
    if problem:
        why = (f"refusing the worker's folder {folder}: {problem}, so another user could "
               "plant a socket or a link in it")
        if failed is not None:
            failed(why)
        else:
            print(f"pbsplug: {why}: no worker started there, the event runs without one",
                  file=sys.stderr)
        return None
    lock = os.open(path + ".lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                   0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = connect(path)
        if conn is None:
            # -I: no PYTHON* variables, no user site, not the current folder on sys.path
            # (which is the hook's: PBS runs it in mom_priv/hooks/tmp). -B: no .pyc written,
            # since until clean_process the starter's limits hold (a file size limit cut
            # .pyc files short, and every later import of them failed).
            worker = subprocess.Popen(
                [python, "-I", "-B", "-m", "pbsplug.adapters.worker", path, config_file],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, close_fds=True, start_new_session=True,
                env=dict(WORKER_ENV), cwd="/")
            deadline = time.monotonic() + WORKER_START
            while conn is None and time.monotonic() < deadline:
                time.sleep(0.02)
                conn = connect(path)
                if conn is None and worker.poll() is not None:
                    break  # it ended (a plugin that cannot load): no use waiting for it
            if conn is None and failed is not None:
                status = worker.poll()
                failed(f"the worker started at {path} ended at start, exit status {status}"
                       if status is not None else
                       f"the worker started at {path} did not answer in {WORKER_START:g} s")
    finally:
        os.close(lock)
    return conn


def ask(python: "str | Callable[[], str]", config_file: "str", path: "str", data: "bytes",
        may_start: "bool" = True, failed: "Callable[[str], object] | None" = None,
        meanwhile: "Callable[[], object] | None" = None) -> "bytes | None":
    """The worker's answer to `data` (bytes; b"" when its process ended without one), the
    worker started when none answers and `may_start` (`failed`: `start`'s; `python`, the
    interpreter to start it with, or a function that returns it, called only then: a Slurm
    program reads it from its config, and imports ``json`` for that only then); None
    when there is no worker to ask. `meanwhile`, when given, is called once: while the
    worker works (`exchange`), or before None is returned.
    A connection reset before any answer (a worker that left with it unaccepted: nothing
    was done) is asked again once, of a new worker; reset again, `failed` is told so.
    Shared by PBS's hook and the Slurm programs (`slurm_program.ask_worker`)."""
    pending = [meanwhile] if meanwhile is not None else []

    def once() -> "None":
        while pending:
            pending.pop()()

    for attempt in range(2):
        conn = connect(path)
        if conn is None and may_start:
            conn = start(python() if callable(python) else python, config_file, path,
                         failed=failed)
        if conn is None:
            break
        try:
            return exchange(conn, data, once)
        except (ConnectionResetError, BrokenPipeError) as exc:
            if attempt and failed is not None:
                failed(f"the worker at {path} reset the connection twice, unanswered: "
                       f"{exc.strerror or exc}")
    once()
    return None
