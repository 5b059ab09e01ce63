"""Interactive jobs (``qsub -I``): the job's shell on a terminal that reaches the waiting qsub.

qsub listens on a UNIX socket in a folder of its own (0700, made by qsub as its user), and
sends the server the socket's path and a random token with the job (`checked_spec` is the
server's check of them; they stay in the job's private runtime). When the job starts, its
process, already the job's owner (`executor._run_job`), connects there (`attach`): it
checks that the listener is its owner's (SO_PEERCRED), opens a pseudo-terminal, makes it
its controlling terminal in a session of its own, and sends qsub the terminal's master side
and the token over the socket (SCM_RIGHTS). qsub checks the peer's uid and the token, then
relays its own terminal to the master (`relay`). The server and the shepherd, as root,
never open, create or connect to anything of the user's: the shepherd only receives, from
the job's process, the terminal's slave side (to write the server's notes, as an error
file) and its end of the connection, whose closing tells it that qsub went away.

This module needs only the standard library: qsub imports it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hmac
import json
import os
import secrets
import select
import shutil
import signal
import socket
import stat
import struct
import sys
import tempfile
import termios
import time
import tty
from typing import TYPE_CHECKING, Any, TypedDict

from ..jsontext import loads

if TYPE_CHECKING:  # (for the annotations only)
    from .client import Client
    from .jobspec import JobRequest

#: What OpenPBS 23.06's qsub says when -I has no terminal (checked), and exits 1.
NOT_A_TERMINAL = ("qsub:\tstandard input and output must be a terminal for\n"
                  "\tinteractive job submission")
#: What it says of -I with -J (checked), before its usage, and exits 2.
ARRAY_AND_INTERACTIVE = "qsub: interactive and array job submission cannot be used together"
#: The longest socket path a sockaddr_un holds.
MAX_PATH = 107
#: Seconds the job's process waits to reach its qsub.
CONNECT_TIMEOUT = 10.0
#: The token's length, in hex digits.
TOKEN_HEX = 32
#: How the name of qsub's folder starts (`Listener`; `remove_left` removes no other).
FOLDER_PREFIX = "pbsplug-qsub-"
#: Why a job whose qsub is gone cannot start (nothing listens on its socket any more).
QSUB_GONE = "its qsub is gone (nothing listens on its socket)"


class Spec(TypedDict, total=False):
    """An interactive job's qsub as its job's process gets it (`attach`): the socket and
    the token (always there) and its TERM (`checked_spec`'s, kept in the job's runtime; a
    job queued by an older pbsplug has none), and ``login``, the server's: run the
    owner's login shell (no ``--`` command)."""

    socket: str
    token: str
    term: str
    login: bool


def checked_spec(value: Any) -> dict[str, Any]:
    """The server's check of what qsub -I sends with the job: ``{"socket": absolute path,
    "token": hex, "term": TERM}``. ValueError names what is wrong."""
    if not isinstance(value, dict) or set(value) - {"socket", "token", "term"}:
        raise ValueError("not a mapping of socket, token and term")
    path, token, term = value.get("socket"), value.get("token"), value.get("term", "")
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path or \
            len(path.encode()) > MAX_PATH:
        raise ValueError("socket is not an absolute path of at most 107 bytes")
    if not isinstance(token, str) or len(token) != TOKEN_HEX or \
            not all(c in "0123456789abcdef" for c in token):
        raise ValueError(f"token is not {TOKEN_HEX} hex digits")
    if not isinstance(term, str) or len(term) > 64 or not term.isprintable() or \
            any(c.isspace() for c in term):
        raise ValueError("term is not a terminal type")
    return {"socket": path, "token": token, "term": term}


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


# -- the job's side (run by the job's process, as its owner) ------------------------------------

def attach(spec: Spec, job_id: str) -> tuple[int, socket.socket]:
    """Connect to the job's qsub, as the job's owner, in a session of the caller's own
    (`os.setsid` first): a pseudo-terminal is opened and made the controlling terminal,
    its master side sent to qsub with the token. Returns the slave side and the
    connection. OSError (PermissionError: the listener is not the owner's)."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_TIMEOUT)
        try:
            conn.connect(spec["socket"])
        except ConnectionRefusedError:  # nothing listens: its qsub was killed (SIGKILL)
            remove_left(spec["socket"])
            raise ConnectionRefusedError(errno.ECONNREFUSED, QSUB_GONE) from None
        if _peer_uid(conn) != os.getuid():
            raise PermissionError("the interactive socket is not the job owner's")
        master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)
            hello = json.dumps({"token": spec["token"], "job": job_id}).encode()
            socket.send_fds(conn, [hello], [master])
        except BaseException:
            os.close(slave)
            raise
        finally:
            os.close(master)
        conn.settimeout(None)
        return slave, conn
    except BaseException:
        conn.close()
        raise


def remove_left(path: str) -> None:
    """Remove the folder of a qsub that was killed before it could (SIGKILL), with the
    socket nothing listens on any more: called by the job's process, as the job's owner,
    which found no listener there. Only what such a qsub leaves is removed: a folder named
    as `Listener` names it, the owner's, holding its socket ``s`` alone; the path is
    walked without following a link. Anything else is left as it is, silently."""
    folder, name = os.path.split(path)
    parts = folder.split("/")[1:]
    if name != "s" or os.path.normpath(path) != path or not parts or \
            not parts[-1].startswith(FOLDER_PREFIX) or any(p in ("", ".", "..") for p in parts):
        return
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    fds = [os.open("/", flags)]
    try:
        for part in parts:
            fds.append(os.open(part, flags, dir_fd=fds[-1]))
        st = os.fstat(fds[-1])
        if st.st_uid != os.getuid() or os.listdir(fds[-1]) != [name]:
            return
        left = os.stat(name, dir_fd=fds[-1], follow_symlinks=False)
        if not stat.S_ISSOCK(left.st_mode) or left.st_uid != os.getuid():
            return
        os.unlink(name, dir_fd=fds[-1])
        os.rmdir(parts[-1], dir_fd=fds[-2])
    except OSError:
        pass  # (gone already, or not the owner's to remove: left as it is)
    finally:
        for fd in fds:
            os.close(fd)


def qsub_gone(conn: int) -> bool:
    """Whether the connection `conn` (the shepherd's end) says its qsub went away; what
    qsub sends (nothing is expected) is read and dropped."""
    try:
        data = os.read(conn, 4096)
    except BlockingIOError:
        return False
    except OSError:
        return True
    return not data


# -- qsub's side ----------------------------------------------------------------------------------

class Listener:
    """qsub -I's socket, in a private folder of its own, and the token the job must bring."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX)  # 0700, qsub's user's
        self.path = os.path.join(self.folder, "s")
        if len(self.path.encode()) > MAX_PATH:  # (a long $TMPDIR)
            os.rmdir(self.folder)
            self.folder = tempfile.mkdtemp(prefix=FOLDER_PREFIX, dir="/tmp")
            self.path = os.path.join(self.folder, "s")
        self.token = secrets.token_hex(TOKEN_HEX // 2)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(4)

    def spec(self) -> dict[str, str]:
        return {"socket": self.path, "token": self.token, "term": os.environ.get("TERM", "")}

    def accept(self, timeout: float) -> tuple[int, socket.socket] | None:
        """The terminal's master side and the connection of the job that came with the
        token, or None. A peer of another uid, or without the token, is dropped."""
        if not select.select([self.sock], [], [], timeout)[0]:
            return None
        conn, _ = self.sock.accept()
        fds: list[int] = []
        try:
            conn.settimeout(CONNECT_TIMEOUT)
            if _peer_uid(conn) != os.getuid():
                raise PermissionError("another user")
            data, fds, _flags, _addr = socket.recv_fds(conn, 4096, 1)
            # (`pbsplug.jsontext`: a hello nested deeply was json.loads' RecursionError,
            # which ended this qsub; one with the token twice or other text json.loads
            # takes wrongly is no hello)
            hello = loads(data, "the hello", expect=dict)
            if not fds or not hmac.compare_digest(str(hello.get("token")), self.token):
                raise PermissionError("no token")
            conn.settimeout(None)
            return fds[0], conn
        except (OSError, ValueError):
            # (the terminal sent with any bad hello is closed, not kept open in this qsub)
            for fd in fds:
                os.close(fd)
            conn.close()
            return None

    def close(self) -> None:
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def _copy_size(src: int, dst: int) -> None:
    with contextlib.suppress(OSError):
        size = fcntl.ioctl(src, termios.TIOCGWINSZ, b"\0" * 8)
        fcntl.ioctl(dst, termios.TIOCSWINSZ, size)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


#: Seconds qsub keeps copying what the job wrote to its terminal once the job's shepherd is
#: gone (`relay`): the terminal's last bytes may reach its master side after the shepherd's
#: connection closes.
DRAIN_SECONDS = 2.0


def _copy_out(master: int, stdout: int) -> bool:
    """Copy what the job's terminal has for qsub to `stdout`; False once its side is closed
    (EIO: every process of the job let the terminal go)."""
    try:
        data = os.read(master, 65536)
    except OSError:
        return False
    if data:
        _write_all(stdout, data)
    return bool(data)


def _drain(master: int, stdout: int, seconds: float = DRAIN_SECONDS) -> None:
    """Copy what is left on the job's terminal, until its side is closed or `seconds` pass
    (a process of the job the shepherd's kill missed could hold it open and write on)."""
    deadline = time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0 and \
            select.select([master], [], [], left)[0] and _copy_out(master, stdout):
        pass


def relay(master: int, conn: socket.socket | None = None, stdin: int = 0,
          stdout: int = 1) -> None:
    """Relay the terminal on `stdin`/`stdout` to the job's terminal `master` until the job's
    side closes (EIO), or its shepherd does (`conn` at its end: what the job wrote last is
    copied first, `_drain`, and the job then gets the terminal's hangup when qsub lets
    `master` go): raw mode, its window size now and at each SIGWINCH; the terminal's
    settings come back afterwards."""
    saved = termios.tcgetattr(stdin)
    old_winch = signal.signal(signal.SIGWINCH, lambda *_: _copy_size(stdin, master))
    _copy_size(stdin, master)
    tty.setraw(stdin, termios.TCSANOW)
    reading = True
    try:
        while True:
            ready = select.select([master] + ([stdin] if reading else []) + (
                [conn] if conn is not None else []), [], [])[0]
            if master in ready and not _copy_out(master, stdout):
                return
            if conn is not None and conn in ready:
                try:
                    gone = not conn.recv(4096)
                except OSError:
                    gone = True
                if gone:  # its shepherd is gone: the job, left to itself, ends with qsub
                    _drain(master, stdout)
                    return
            if stdin in ready:
                data = os.read(stdin, 65536)
                if data:
                    _write_all(master, data)
                else:
                    reading = False
    finally:
        termios.tcsetattr(stdin, termios.TCSADRAIN, saved)
        signal.signal(signal.SIGWINCH, old_winch)


def _state(client: Client, job_id: str) -> str | None:
    """The job's state; F when the server no longer knows it, None when no server answers
    (stopped or restarting: the job, kept in its database, may still start)."""
    from .client import ServerUnavailable
    from .errors import PbsError

    try:
        return str(client("stat_jobs", ids=[job_id], history=True)[job_id]["job_state"])
    except (PbsError, KeyError):
        return "F"
    except ServerUnavailable:
        return None


class _Signalled(Exception):
    """qsub got SIGTERM or SIGHUP: it ends as after ^C, its terminal put back first."""


def _signalled(signum: int, _frame: Any) -> None:
    raise _Signalled(signum)


#: What OpenPBS 23.06's qsub says of -I with -W block=true (checked), and goes on.
BLOCK_WARNING = ('qsub (Warning) : setting "block" attribute as "true" for an interactive '
                 "job will not return job's exit status")


def run(client: Client, request: JobRequest) -> int:
    """qsub -I: submit the job, wait for it to start, relay the terminal to it, and say
    when it is over, as OpenPBS 23.06's qsub says it (checked). Exit status: 0 once the
    job completed, 1 when it was deleted before it started (or without a terminal), 2
    for an array."""
    from .errors import PbsError
    from .jobspec import USAGE

    if not (os.isatty(0) and os.isatty(1)):  # (before anything else, as PBS's qsub)
        print(NOT_A_TERMINAL, file=sys.stderr)
        return 1
    if request.attrs.get("array_indices_submitted") is not None:
        print(f"{ARRAY_AND_INTERACTIVE}\n{USAGE}", file=sys.stderr)
        return 2
    if request.block:
        print(BLOCK_WARNING, file=sys.stderr)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _signalled)
    try:
        listener = Listener()
    except OSError as exc:
        print(f"qsub: cannot listen for the interactive job: {exc}", file=sys.stderr)
        return 1
    job_id, ready = "", False
    try:
        try:
            job_id = client("submit", attrs=request.attrs, script=request.script,
                            argv=request.argv, interactive=listener.spec())
        except PbsError as err:
            print(f"qsub: {err.message}", file=sys.stderr)
            return err.code % 256 or 1
        print(f"qsub: waiting for job {job_id} to start", flush=True)
        got = None
        while got is None:
            got = listener.accept(0.5)
            if got is None and _state(client, job_id) in ("F", "X"):
                print(f"qsub: job {job_id} apparently deleted", flush=True)
                return 1
        master, conn = got
        ready = True
        listener.close()
        print(f"qsub: job {job_id} ready\n", flush=True)
        try:
            relay(master, conn)
        finally:
            os.close(master)
            conn.close()
        while _state(client, job_id) not in ("F", "X", None):  # (no server: it is over)
            time.sleep(0.2)
        print(f"\nqsub: job {job_id} completed", flush=True)
        return 0
    except (KeyboardInterrupt, _Signalled):  # while waiting, the job goes with qsub
        if job_id and not ready:
            with contextlib.suppress(PbsError, OSError):
                client("delete", ids=[job_id])
        return 1
    finally:
        listener.close()
