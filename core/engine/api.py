"""The server's API: JSON over HTTP on a UNIX socket in the engine's home.

``POST /v1/<request>`` with a JSON object of arguments; the answer is ``{"result": ...}``,
or ``{"error": {"code": 15007, "message": "Unauthorized Request", "obj": ...}}`` with status
400 (403 for a refused permission). The caller is known by its uid on the socket
(SO_PEERCRED), never by anything it says. The commands' side is `client.Client`.

The server is one thread (the hook runner forks, which threads would make unsafe), so no
client may hold it: connections are read and written without blocking by one selector loop,
each request has an overall deadline and size limits (`client.MAX_HEADER_BYTES`,
`client.MAX_BODY_BYTES`, `REQUEST_DEADLINE`), the number of open connections is capped, a
user's answers not yet taken hold back that user's next requests (`MAX_UNSENT_PER_UID`), and
only complete requests reach `Engine.handle`. Between them the loop runs `Engine.poll` at
least every `POLL_INTERVAL` (plus at most one burst of answers), whatever clients do.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import json
import os
import re
import resource
import selectors
import signal
import socket
import struct
import time
import traceback
from collections.abc import Callable
from typing import Any

from .. import jsontext, values
from .client import MAX_BODY_BYTES, MAX_HEADER_BYTES, Client, ServerUnavailable
from .errors import PBSE_IVALREQ, PBSE_NOCONNECTS, PBSE_PERM, PBSE_SYSTEM, PbsError
from .home import LOG_ERROR, LOG_SECURITY, LOG_SYSTEM, Home
from .server import Engine, LaterAnswer

#: How often the loop wakes to notice ended jobs and due cycles when no request comes.
POLL_INTERVAL = 0.05
#: At most this many requests are answered in a row before ended jobs and cycles are seen to.
MAX_BURST = 50
#: ... and a burst of answers ends after this long whatever its count.
MAX_BURST_SECONDS = 0.5
#: Seconds from a connection's accept to its whole request read; a slower client is dropped.
REQUEST_DEADLINE = 10.0
#: Seconds a client has to take its answer once it is ready; a client that does not read
#: its answer is dropped then.
WRITE_DEADLINE = 10.0
#: Seconds the server's stop gives all its clients together to take the answers they are
#: still owed; then it closes their connections. (Each connection had 1 s in turn: a user's
#: 32 connections that never read held `pbsplug server stop` 32 s.)
STOP_WRITE_DEADLINE = 1.0
#: Open connections at once, and per uid (root and the server's owner excepted): past
#: either, a new connection gets PBS's "No free connections" (15033) and is closed.
MAX_CONNECTIONS = 256
MAX_CONNECTIONS_PER_UID = 32
#: Request bytes read and not yet answered, per uid (root and the server's owner excepted):
#: a connection that would take a user past it gets "No free connections" (15033).
MAX_BUFFERED_PER_UID = 4 * MAX_BODY_BYTES
#: Answer bytes made and not yet taken by their clients, per uid (root and the server's owner
#: excepted): past it, that uid's next request waits until its clients read (or are dropped
#: at `WRITE_DEADLINE`). A user who sent 16 qstat -f of 40 MiB each and read none had the
#: server hold all 16 answers, 700 MB, and 32 connections of bigger ones could exhaust memory.
MAX_UNSENT_PER_UID = MAX_BUFFERED_PER_UID
#: Connections the kernel queues before the loop accepts them.
LISTEN_BACKLOG = socket.SOMAXCONN
#: A dropped connection is logged once per uid and reason in this many seconds.
DROP_LOG_INTERVAL = 60.0
#: What a client's own text looks like in a reason (quoted, or a number).
_CLIENT_TEXT = re.compile(r"'[^']*'|\"[^\"]*\"|\d+")

_CHUNK = 1 << 16
_OP = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_REASONS = {200: "OK", 400: "Bad Request", 403: "Forbidden", 408: "Request Timeout",
            413: "Content Too Large", 431: "Request Header Fields Too Large",
            500: "Internal Server Error", 503: "Service Unavailable"}
# A connection's states: reading its request, answered early and draining what it still
# sends (so that it can read the error), or being written its answer.
_READING, _DRAINING, _WRITING = "reading", "draining", "writing"
#: The selector's mark on a hook's report pipe (`Engine.asking_fds`), registered for a wait.
_HOOK = object()


class _Refused(Exception):
    """A request refused before it reaches the engine: HTTP status, PBS code, text."""

    def __init__(self, status: int, code: int, message: str, why: str):
        super().__init__(message)
        self.status, self.code, self.message, self.why = status, code, message, why


def _invalid(status: int, what: str) -> _Refused:
    return _Refused(status, PBSE_IVALREQ, f"Invalid request: {what}", what)


class _Connection:
    """One client's connection: what it sent so far, and what it is still owed."""

    __slots__ = ("sock", "uid", "deadline", "buf", "head_end", "op", "length", "state", "out")

    def __init__(self, sock: socket.socket, uid: int, deadline: float):
        self.sock = sock
        self.uid = uid
        self.deadline = deadline
        self.buf = bytearray()
        self.head_end = -1  # where the body starts, once the head is read
        self.op = ""
        self.length = 0
        self.state = _READING
        self.out = memoryview(b"")  # its answer not yet taken, counted in `unsent` (`owe`)

    def parse_head(self) -> None:
        """Find the end of the head; once found, check the request line and headers."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self.buf) > MAX_HEADER_BYTES:
                raise _invalid(431, f"request headers over {MAX_HEADER_BYTES} bytes")
            return
        if end + 4 > MAX_HEADER_BYTES:
            raise _invalid(431, f"request headers over {MAX_HEADER_BYTES} bytes")
        lines = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            raise _invalid(400, "malformed request line")
        method, target, _ = parts
        if method != "POST":
            raise _invalid(400, f"method {method[:16]!r}: requests are POST /v1/<request>")
        op = target.removeprefix("/v1/")
        if op == target or not _OP.fullmatch(op):
            raise _invalid(400, f"path {target[:80]!r}: requests are POST /v1/<request>")
        length: int | None = None
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise _invalid(400, "malformed header line")
            name, value = name.strip().lower(), value.strip()
            if name == "transfer-encoding":
                raise _invalid(400, "Transfer-Encoding is not supported; send Content-Length")
            if name == "content-length":
                # (ASCII digits: the head is read as latin-1, and `isdigit` takes ``²``)
                if not values.digits(value) or len(value) > 12 or (
                        length is not None and int(value) != length):
                    raise _invalid(400, f"bad Content-Length {value[:20]!r}")
                length = int(value)
        if (length or 0) > MAX_BODY_BYTES:
            raise _invalid(413, f"request body of {length} bytes is over the server's limit "
                                f"of {MAX_BODY_BYTES}")
        self.op, self.length, self.head_end = op, length or 0, end + 4

    @property
    def complete(self) -> bool:
        return self.head_end >= 0 and len(self.buf) >= self.head_end + self.length

    def body(self) -> bytes:
        return bytes(self.buf[self.head_end:self.head_end + self.length])


def _response(status: int, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    head = (f"HTTP/1.0 {status} {_REASONS.get(status, 'Error')}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n")
    return head.encode() + data


def _error_body(code: int, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "obj": None}}


class _Listener:
    """The selector loop: accepts, reads, answers and writes, and runs `Engine.poll`."""

    def __init__(self, engine: Engine, sock: socket.socket):
        self.engine = engine
        self.sock = sock
        self.selector = selectors.DefaultSelector()
        self.selector.register(sock, selectors.EVENT_READ)
        self.conns: dict[int, _Connection] = {}  # by file descriptor
        self.per_uid: collections.Counter[int] = collections.Counter()
        self.buffered: collections.Counter[int] = collections.Counter()  # bytes, per uid
        #: Answer bytes not yet taken by their clients, per uid (`MAX_UNSENT_PER_UID`).
        self.unsent: collections.Counter[int] = collections.Counter()
        #: Complete requests waiting for their answer, per uid; the uids take turns
        #: (`next_ready`), so a user's many requests never wait out another user's one.
        self.ready: dict[int, collections.deque[_Connection]] = {}
        #: When each uid was last answered (a count of answers; uids not answered lately
        #: are not in it).
        self.turns: dict[int, int] = {}
        self.answered = 0
        self.privileged = {0, os.getuid()}
        # Stay well inside the descriptors this process may open: jobs, hooks and the
        # database need theirs too.
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.max_connections = MAX_CONNECTIONS if soft == resource.RLIM_INFINITY else max(
            8, min(MAX_CONNECTIONS, soft // 4))
        self.accept_paused_until = 0.0
        self.drops: dict[tuple[int, str], list[float]] = {}  # -> [last logged, not logged]
        self.poll_failure: tuple[str, float] = ("", 0.0)  # the last one logged, and when
        #: Requests whose answer waits for hook chains the server steps meanwhile (a qdel
        #: of a job whose execjob_preterm has a pbsuser hook, a qmgr or pbsnodes command
        #: with hooks): answered once complete.
        self.parked: dict[_Connection, LaterAnswer] = {}

    # -- the loop -------------------------------------------------------------------------------
    def run(self) -> None:
        engine = self.engine
        next_poll = time.monotonic()
        while not engine.stopping:
            if self.wait(POLL_INTERVAL):  # (a parked request's hook, or a vnode change's, wrote)
                try:
                    engine.poll_asking()
                except Exception:  # (as a poll's: a bug stepping one chain must not stop it)
                    self.log_poll_failure(traceback.format_exc())
                self.answer_parked()
            # Answer what is complete (up to a burst) before the bookkeeping, so that a
            # stream of qsubs shares one scheduling cycle instead of one each.
            answered, started = 0, time.monotonic()
            while self.ready and answered < MAX_BURST and not engine.stopping and (
                    time.monotonic() - started < MAX_BURST_SECONDS):
                conn = self.next_ready()
                if conn is None:  # (every waiting uid has answers unread: `blocked`)
                    break
                self.answer(conn)
                answered += 1
                if not self.ready:
                    self.wait(0)  # what came in meanwhile joins the burst
            now = time.monotonic()
            self.expire(now)
            if answered or now >= next_poll:
                try:
                    engine.poll()
                except Exception:  # a bad job or a full disk must not stop the server
                    self.log_poll_failure(traceback.format_exc())
                next_poll = time.monotonic() + POLL_INTERVAL
                self.answer_parked()

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` for sockets to be ready, and serve them without blocking;
        True when a hook that a parked request waits for wrote, or one told of the server's
        own vnode change (`Engine.asking_fds`)."""
        if any(not self.blocked(uid) for uid in self.ready):
            timeout = 0
        now = time.monotonic()
        if self.accept_paused_until and now >= self.accept_paused_until:
            self.accept_paused_until = 0.0
            self.selector.register(self.sock, selectors.EVENT_READ)
        hooks = []
        for fd in self.engine.asking_fds():
            with contextlib.suppress(OSError, ValueError, KeyError):  # (its poll steps it)
                self.selector.register(fd, selectors.EVENT_READ, _HOOK)
                hooks.append(fd)
        try:
            ready = self.selector.select(timeout)
        finally:
            for fd in hooks:
                self.selector.unregister(fd)
        hook_wrote = False
        for key, _ in ready:
            if key.data is _HOOK:
                hook_wrote = True
                continue
            if key.fileobj is self.sock:
                try:
                    self.accept()
                except Exception:  # a bug must not take the server down
                    self.log(LOG_ERROR, f"accepting failed: {traceback.format_exc()}")
                continue
            conn = self.conns.get(key.fd)
            if conn is not None:
                self.serve(conn)
        return hook_wrote

    def serve(self, conn: _Connection) -> None:
        """Read from or write to one connection; whatever fails in it (a bug) drops that
        client alone, logged."""
        try:
            if conn.state == _WRITING:
                self.flush(conn)
            else:
                self.read(conn)
        except Exception:
            self.log(LOG_ERROR, f"connection from uid {conn.uid} dropped: "
                                f"{traceback.format_exc()}")
            self.drop(conn)

    def close(self) -> None:
        """Send what answers are still owed, a request still waiting for hook chains
        refused, for `STOP_WRITE_DEADLINE` in all (written without blocking, as the loop
        writes them), and close every connection. The engine's hook chains are stopped
        first (`Engine.stop_chains`): the qdels waiting for them get their own answers
        (an array's told that its deletion stands), not this loop's bare refusal."""
        try:
            self.engine.stop_chains()
        except Exception:  # (the engine's close stops them again, and raises it)
            self.log(LOG_ERROR, f"stopping the hook chains failed: {traceback.format_exc()}")
        self.answer_parked()
        for conn in list(self.parked):
            del self.parked[conn]
            self.owe(conn, _response(500, _error_body(
                PBSE_SYSTEM, "System error: the server is stopping")))
        with contextlib.suppress(KeyError, ValueError):  # (unregistered while accept paused)
            self.selector.unregister(self.sock)
        deadline = time.monotonic() + STOP_WRITE_DEADLINE
        for conn in list(self.conns.values()):
            if conn.state == _WRITING and conn.out:
                self.serve(conn)  # (registered for writing when not all is sent at once)
            else:
                self.drop(conn)
        while self.conns and (left := deadline - time.monotonic()) > 0:
            for key, _ in self.selector.select(left):
                writing = self.conns.get(key.fd)
                if writing is not None:
                    self.serve(writing)
        for conn in list(self.conns.values()):
            self.log_drop(conn.uid, "answer not taken before the server stopped")
            self.drop(conn)
        self.selector.close()

    # -- connections ----------------------------------------------------------------------------
    def accept(self) -> None:
        for _ in range(64):  # then let the others have their turn
            try:
                sock, _ = self.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # Out of descriptors: stop accepting for a moment rather than spin.
                    self.log_drop(-1, f"cannot accept a connection: {exc.strerror}")
                    self.selector.unregister(self.sock)
                    self.accept_paused_until = time.monotonic() + POLL_INTERVAL
                return
            try:
                sock.setblocking(False)
                creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        struct.calcsize("3i"))
                uid = struct.unpack("3i", creds)[1]
            except OSError:
                sock.close()
                continue
            if len(self.conns) >= self.max_connections or (
                    uid not in self.privileged
                    and self.per_uid[uid] >= MAX_CONNECTIONS_PER_UID):
                limit = (f"{MAX_CONNECTIONS_PER_UID} per user"
                         if len(self.conns) < self.max_connections
                         else f"{self.max_connections} in all")
                self.log_drop(uid, f"connection refused: {limit} open already")
                try:  # a best-effort one-line answer; the client may not even read it
                    sock.send(_response(503, _error_body(
                        PBSE_NOCONNECTS, f"No free connections ({limit} open already)")))
                except OSError:
                    pass
                sock.close()
                continue
            conn = _Connection(sock, uid, time.monotonic() + REQUEST_DEADLINE)
            self.conns[sock.fileno()] = conn
            self.per_uid[uid] += 1
            self.selector.register(sock, selectors.EVENT_READ)
            self.serve(conn)  # a client usually sends at once: no loop round (and poll) between

    def read(self, conn: _Connection) -> None:
        try:
            data = conn.sock.recv(_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            self.drop(conn)
            return
        if conn.state == _DRAINING:
            if not data:
                self.drop(conn)
            return
        if not data:  # the client gave up before its request was whole
            self.drop(conn)
            return
        if conn.uid not in self.privileged and (
                self.buffered[conn.uid] + len(data) > MAX_BUFFERED_PER_UID):
            self.refuse(conn, _Refused(
                503, PBSE_NOCONNECTS, f"No free connections ({MAX_BUFFERED_PER_UID} bytes of "
                                      "this user's requests are being read already)",
                f"over {MAX_BUFFERED_PER_UID} bytes of requests being read"))
            return
        conn.buf += data
        self.buffered[conn.uid] += len(data)
        try:
            if conn.head_end < 0:
                conn.parse_head()
        except _Refused as refused:
            self.refuse(conn, refused)
            return
        if conn.complete:
            self.selector.unregister(conn.sock)
            conn.state = _WRITING  # nothing more is read; its answer comes next
            self.ready.setdefault(conn.uid, collections.deque()).append(conn)

    def blocked(self, uid: int) -> bool:
        """Whether `uid`'s requests wait for its clients to take the answers they have."""
        return uid not in self.privileged and self.unsent[uid] >= MAX_UNSENT_PER_UID

    def next_ready(self) -> _Connection | None:
        """The next request to answer: the oldest of the waiting uid answered least
        recently (one not answered lately first, in the order they came): a uid's next
        request waits behind every other uid's, those that came while it was answered too.
        None when every waiting uid is `blocked`."""
        turns = self.turns
        free = [u for u in self.ready if not self.blocked(u)]
        if not free:
            return None
        uid = min(free, key=lambda u: turns.get(u, -1))
        waiting = self.ready[uid]
        conn = waiting.popleft()
        if not waiting:
            del self.ready[uid]
        self.answered += 1
        turns[uid] = self.answered
        if len(turns) > 4 * MAX_CONNECTIONS:  # (bounded: those with no connection forgotten)
            self.turns = {u: t for u, t in turns.items() if u in self.per_uid}
        return conn

    def refuse(self, conn: _Connection, refused: _Refused) -> None:
        """Answer a refused request at once, then drain what the client still sends until it
        closes or its deadline, so that a client writing its body still reads the error."""
        self.log_drop(conn.uid, refused.why)
        self.release(conn)
        try:
            conn.sock.send(_response(refused.status, _error_body(refused.code,
                                                                 refused.message)))
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.drop(conn)
            return
        conn.state = _DRAINING

    def answer(self, conn: _Connection) -> None:
        """Hand a complete request to the engine and start writing its answer."""
        engine = self.engine
        op = conn.op
        try:
            # (any local user's: read with the kernel's limits, each refusal named)
            args = jsontext.loads(conn.body() or b"{}", "arguments", expect=dict)
            result = engine.handle(op, args, conn.uid)
            if isinstance(result, LaterAnswer):  # answered when complete (`answer_parked`)
                self.release(conn)
                conn.deadline = float("inf")
                self.parked[conn] = result
                return
            data = _response(200, {"result": result})
        except PbsError as err:
            data = _response(403 if err.code == PBSE_PERM else 400, {"error": err.to_dict()})
        except (ValueError, TypeError) as exc:
            data = _response(400, _error_body(PBSE_IVALREQ, f"Invalid request: {exc}"))
        except Exception as exc:  # a bug must not take the server down
            self.log(LOG_ERROR, f"request {op} failed: {traceback.format_exc()}")
            data = _response(500, _error_body(PBSE_SYSTEM, f"System error: {exc}"))
        self.release(conn)
        self.owe(conn, data)
        conn.deadline = time.monotonic() + WRITE_DEADLINE
        self.flush(conn)

    def answer_parked(self) -> None:
        """Start writing the answers of the parked requests that are complete."""
        for conn, later in list(self.parked.items()):
            if later.missing <= 0:
                del self.parked[conn]
                self.owe(conn, _response(200, {"result": later.result()}) if later.error is None
                         else _response(400, {"error": later.error.to_dict()}))
                conn.deadline = time.monotonic() + WRITE_DEADLINE
                self.flush(conn)

    def owe(self, conn: _Connection, data: bytes) -> None:
        """`data` is the connection's answer, counted against its uid until taken: every
        answer is set here, so what is left of it (`conn.out`) is what is counted."""
        conn.out = memoryview(data)
        self.unsent[conn.uid] += len(data)

    def paid(self, conn: _Connection, sent: int) -> None:
        """The first `sent` bytes of the connection's answer are taken (or no longer owed)."""
        conn.out = conn.out[sent:]
        if sent:
            self.unsent[conn.uid] -= sent
            if self.unsent[conn.uid] <= 0:
                del self.unsent[conn.uid]

    def flush(self, conn: _Connection) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except BlockingIOError:
            sent = 0
        except OSError:
            self.drop(conn)
            return
        self.paid(conn, sent)
        if not conn.out:
            self.drop(conn)
        elif conn.sock.fileno() not in self.selector.get_map():
            self.selector.register(conn.sock, selectors.EVENT_WRITE)

    def expire(self, now: float) -> None:
        for conn in list(self.conns.values()):
            if now < conn.deadline or conn in self.ready.get(conn.uid, ()):
                continue
            if conn.state == _READING:
                self.log_drop(conn.uid, f"request not complete within {REQUEST_DEADLINE:g} s")
                try:
                    conn.sock.send(_response(408, _error_body(
                        PBSE_IVALREQ, f"Invalid request: not complete within "
                                      f"{REQUEST_DEADLINE:g} s")))
                except OSError:
                    pass
            elif conn.state == _WRITING:
                self.log_drop(conn.uid, f"answer not read within {WRITE_DEADLINE:g} s")
            self.drop(conn)

    def release(self, conn: _Connection) -> None:
        """Forget what the connection's request held."""
        if conn.buf:
            self.buffered[conn.uid] -= len(conn.buf)
            if self.buffered[conn.uid] <= 0:
                del self.buffered[conn.uid]
            conn.buf = bytearray()

    def drop(self, conn: _Connection) -> None:
        fd = conn.sock.fileno()
        self.parked.pop(conn, None)
        if self.conns.pop(fd, None) is None:
            return
        self.release(conn)
        self.paid(conn, len(conn.out))
        self.per_uid[conn.uid] -= 1
        if self.per_uid[conn.uid] <= 0:
            del self.per_uid[conn.uid]
        try:
            self.selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    # -- the log ----------------------------------------------------------------------------------
    def log(self, kind: int, message: str) -> None:
        try:
            self.engine.log(kind, "Server", self.engine.host, message)
        except Exception:  # a log that cannot be written must not stop the loop
            pass

    def log_poll_failure(self, text: str) -> None:
        """The same failure again (every 50 ms while its cause lasts) is logged once a
        `DROP_LOG_INTERVAL`."""
        now = time.monotonic()
        if text == self.poll_failure[0] and now - self.poll_failure[1] < DROP_LOG_INTERVAL:
            return
        self.poll_failure = (text, now)
        self.log(LOG_ERROR, f"poll failed: {text}")

    def log_drop(self, uid: int, why: str) -> None:
        """One line per uid and kind of reason per `DROP_LOG_INTERVAL`: a client making
        thousands of bad connections must not fill the disk with the log of them. The kind
        is the reason without what the client sent (a key with its text let each request
        that differed in it have its own line)."""
        now = time.monotonic()
        key = (uid, _CLIENT_TEXT.sub("_", why))
        seen = self.drops.get(key)
        if seen is not None and now - seen[0] < DROP_LOG_INTERVAL:
            seen[1] += 1
            return
        more = f" ({int(seen[1])} more since the last line)" if seen and seen[1] else ""
        self.drops[key] = [now, 0]
        if len(self.drops) > 1024:  # forget the oldest
            for key in sorted(self.drops, key=lambda k: self.drops[k][0])[:512]:
                del self.drops[key]
        who = f"uid {uid}" if uid >= 0 else "a client"
        self.log(LOG_SECURITY, f"connection from {who} dropped: {why}{more}")


class AlreadyRunning(RuntimeError):
    pass


def serve(home: Home, ready: Callable[[], None] | None = None) -> None:
    """Run the server in this process until `pbsplug server stop` or SIGTERM; `ready` is
    called once it accepts requests."""
    home.make()
    pid = home.server_pid()
    if pid is not None and pid != os.getpid():
        raise AlreadyRunning(f"a server already runs in {home.root} (pid {pid})")
    home.pidfile.write_text(f"{os.getpid()}\n")
    # What was set up is undone in the reverse order, each step even if one after it (run
    # before it) failed: the pid file goes last, so that who waits for it to go (`server
    # stop`, a new start) finds the hook chains stopped, their processes killed, and the log
    # and database closed (a listener whose close raised left the engine open: its chains'
    # hooks running, its database open).
    with contextlib.ExitStack() as undo:
        undo.callback(_remove_pidfile, home)
        engine = Engine(home)
        undo.callback(engine.close)
        undo.callback(engine.log, LOG_SYSTEM, "Server", engine.host, "Server stopped")
        home.socket.unlink(missing_ok=True)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        undo.callback(_close_socket, sock, home)
        sock.bind(str(home.socket))
        home.socket.chmod(0o777)  # every user may talk; the server decides what they may do
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
        listener = _Listener(engine, sock)
        undo.callback(listener.close)
        engine.defer_answers = True  # (this loop answers a `LaterAnswer` when complete)

        def stop(signum: int, frame: object) -> None:
            engine.stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        engine.log(LOG_SYSTEM, "Server", engine.host, f"Server@{engine.host} started, pid "
                   f"{os.getpid()}, home {home.root}")
        if ready is not None:
            ready()
        listener.run()


def _close_socket(sock: socket.socket, home: Home) -> None:
    sock.close()
    home.socket.unlink(missing_ok=True)


def _remove_pidfile(home: Home) -> None:
    if home.server_pid() == os.getpid():
        home.pidfile.unlink(missing_ok=True)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _last_error(log: os.PathLike[str] | str) -> str:
    """The last line of the daemon's output (the end of a traceback), or ''."""
    try:
        lines = [ln for ln in open(log, errors="replace").read()[-8192:].splitlines()
                 if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip() if lines else ""


def start_background(home: Home, timeout: float = 30.0) -> int:
    """Start a server for `home` as a daemon; returns its pid once it has answered a
    request. A server that dies at start is a RuntimeError with its reason in one line."""
    pid = home.server_pid()
    if pid is not None:
        raise AlreadyRunning(f"a server already runs in {home.root} (pid {pid})")
    home.make()
    out = home.root / "server.out"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        told = False

        def ready() -> None:
            nonlocal told
            os.write(w, b"ready\n")
            os.close(w)
            told = True

        try:
            os.setsid()
            if os.fork() != 0:  # the daemon is the grandchild
                os._exit(0)
            # Its plugins' default folders are under the home it serves (`default_home`),
            # whatever the caller's environment named (`pbsplug demo` starts one in /tmp).
            os.environ["PBSPLUG_HOME"] = str(home.root)
            log = open(out, "ab", buffering=0)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            serve(home, ready=ready)
        except BaseException as exc:
            traceback.print_exc()
            code = 1
            if not told:
                try:
                    os.write(w, f"error {_one_line(exc)}\n".encode())
                except OSError:
                    pass
        finally:
            os._exit(code)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as pipe:  # one line: a child the server forked may hold the pipe
        answer = pipe.readline().decode(errors="replace").strip()
    if answer != "ready":
        reason = answer.removeprefix("error ").strip() or _last_error(out) or "no reason given"
        raise RuntimeError(f"the server did not start: {reason} (details in {out})")
    # Ready means listening; the server has started only once it answers a real request.
    deadline = time.monotonic() + timeout
    client = Client(home, timeout=max(1.0, timeout))
    while True:
        try:
            info = client("status")
            return int(info["pid"])
        except (ServerUnavailable, PbsError) as exc:
            if home.server_pid() is None:
                reason = _last_error(out) or str(exc)
                raise RuntimeError(f"the server died at start: {reason} (details in {out} "
                                   f"and {home.logs})") from None
            if time.monotonic() > deadline:
                raise RuntimeError(f"the server did not answer within {timeout:g} s: {exc} "
                                   f"(details in {out} and {home.logs})") from None
        time.sleep(0.05)
