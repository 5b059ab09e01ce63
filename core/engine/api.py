"""The server's API: JSON over HTTP on a UNIX socket in the engine's home.

``POST /v1/<request>`` with a JSON object of arguments; the answer is ``{"result": ...}``,
or ``{"error": {"code": 15007, "message": "Unauthorized Request", "obj": ...}}`` with status
400 (403 for a refused permission). The caller is known by its uid on the socket
(SO_PEERCRED), never by anything it says. The commands' side is `client.Client`.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import socketserver
import struct
import sys
import time
import traceback
from http.server import BaseHTTPRequestHandler
from typing import Any

from .errors import PBSE_PERM, PBSE_SYSTEM, PbsError
from .home import LOG_ERROR, LOG_SYSTEM, Home
from .server import Engine

#: How often the loop wakes to notice ended jobs and due cycles when no request comes.
POLL_INTERVAL = 0.05
#: At most this many requests are answered in a row before ended jobs and cycles are seen to.
MAX_BURST = 50


class _Handler(BaseHTTPRequestHandler):
    server: _SocketServer
    # One request per connection, and a slow client is dropped: the server is one thread.
    protocol_version = "HTTP/1.0"
    timeout = 10

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        engine = self.server.engine
        op = self.path.rsplit("/", 1)[-1]
        try:
            length = int(self.headers.get("Content-Length", 0))
            args = json.loads(self.rfile.read(length) or b"{}")
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
            result = engine.handle(op, args, self._peer_uid())
            body, status = {"result": result}, 200
        except PbsError as err:
            body, status = {"error": err.to_dict()}, 403 if err.code == PBSE_PERM else 400
        except (ValueError, TypeError) as exc:
            body, status = {"error": {"code": 15004, "message": f"Invalid request: {exc}",
                                      "obj": None}}, 400
        except Exception as exc:  # a bug must not take the server down
            engine.log(LOG_ERROR, "Server", engine.host,
                       f"request {op} failed: {traceback.format_exc()}")
            body, status = {"error": {"code": PBSE_SYSTEM, "message": f"System error: {exc}",
                                      "obj": None}}, 500
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _peer_uid(self) -> int:
        creds = self.request.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                        struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]

    def log_message(self, format: str, *args: Any) -> None:
        pass  # requests are logged by what they do, in server_logs


class _SocketServer(socketserver.UnixStreamServer):
    engine: Engine
    timeout = 0  # handle_request only runs when a connection is waiting

    def handle_error(self, request, client_address) -> None:
        self.engine.log(LOG_ERROR, "Server", self.engine.host,
                        f"connection failed: {sys.exc_info()[1]}")


class AlreadyRunning(RuntimeError):
    pass


def serve(home: Home, ready_fd: int | None = None) -> None:
    """Run the server in this process until `pbsplug server stop` or SIGTERM."""
    home.make()
    pid = home.server_pid()
    if pid is not None and pid != os.getpid():
        raise AlreadyRunning(f"a server already runs in {home.root} (pid {pid})")
    home.pidfile.write_text(f"{os.getpid()}\n")
    home.socket.unlink(missing_ok=True)
    engine = Engine(home)
    server = _SocketServer(str(home.socket), _Handler, bind_and_activate=True)
    server.engine = engine
    home.socket.chmod(0o777)  # every user may talk; the server decides what they may do

    def stop(signum, frame):
        engine.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    engine.log(LOG_SYSTEM, "Server", engine.host, f"Server@{engine.host} started, pid "
               f"{os.getpid()}, home {home.root}")
    if ready_fd is not None:
        os.write(ready_fd, b"ready")
        os.close(ready_fd)
    try:
        with selectors.DefaultSelector() as selector:
            selector.register(server, selectors.EVENT_READ)
            while not engine.stopping:
                # Answer what is waiting (up to a burst) before the bookkeeping, so that a
                # stream of qsubs shares one scheduling cycle instead of one each.
                burst = 0
                while burst < MAX_BURST and selector.select(POLL_INTERVAL if not burst else 0):
                    server.handle_request()
                    burst += 1
                engine.poll()
    finally:
        server.server_close()
        home.socket.unlink(missing_ok=True)
        if home.server_pid() == os.getpid():
            home.pidfile.unlink(missing_ok=True)
        engine.log(LOG_SYSTEM, "Server", engine.host, "Server stopped")
        engine.close()


def start_background(home: Home, timeout: float = 30.0) -> int:
    """Start a server for `home` as a daemon; returns its pid once it answers."""
    pid = home.server_pid()
    if pid is not None:
        raise AlreadyRunning(f"a server already runs in {home.root} (pid {pid})")
    home.make()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            os.setsid()
            if os.fork() != 0:  # the daemon is the grandchild
                os._exit(0)
            log = open(home.root / "server.out", "ab", buffering=0)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(log.fileno(), 1)
            os.dup2(log.fileno(), 2)
            serve(home, ready_fd=w)
        except BaseException:
            traceback.print_exc()
            code = 1
        finally:
            os._exit(code)
    os.close(w)
    os.waitpid(pid, 0)
    with os.fdopen(r, "rb") as ready:
        answer = ready.read()
    if answer != b"ready":
        log = home.root / "server.out"
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise RuntimeError(f"the server did not start; {log}:\n{tail}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid = home.server_pid()
        if pid is not None:
            return pid
        time.sleep(0.02)
    raise RuntimeError("the server did not write its pid file")
