"""``pbsplug mjf serve``: the feature directories over HTTP, read-only.

For sites and VMs that read MJF over HTTP (``$JOBFEATURES=http://host:port/jobfeatures/<job
id>``). The URL space is ``/machinefeatures/<host>/<key>`` and ``/jobfeatures/<job id>/<key>``
over the two base directories:

* a key's value is ``text/plain`` with Last-Modified (the file's) and Cache-Control
  ``max-age``; If-Modified-Since answers 304, so readers can poll cheaply;
* a directory (with or without its trailing slash) is an HTML listing of what is in it;
* anything absent is a real 404 (never a 200 error page); GET and HEAD only (405 otherwise);
* the base directories must be ones nobody but root (or the user serving) could change
  (`files.check_base`, the hooks' own rule): `serve` refuses others, since the server runs
  as root;
* no way out of the base directories: every path segment must be a plain name (no ``..``,
  no leading dot, nothing percent-encoded into one), and each is opened relative to the
  directory opened before it, never through a link (``O_NOFOLLOW``). A check of the path
  first, then a read by path, served any file when a link was swapped in between;
* each request, from the wait for its first byte to the end of its answer, has
  `REQUEST_TIMEOUT` seconds: a client that sends nothing, or a byte at a time, is dropped
  then, rather than holding a thread and a descriptor for ever;
* a request's head (its line and headers) is at most `HEAD_LIMIT` bytes (431 beyond), and
  at most `MAX_CONNECTIONS` connections are served at once (503 beyond): http.server alone
  reads 100 headers of 64 KiB each, and accepts connections until the descriptors run out.
"""

from __future__ import annotations

import html
import io
import os
import re
import socket
import stat
import threading
import time
from email.utils import formatdate, parsedate_to_datetime
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit

from . import files
from .keys import KEY_NAME

#: A host name or job id as a path segment: no dot first, nothing but these characters.
_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-\[\]@]*")
#: Seconds a request may take, from the wait for it (a kept-alive connection waits for the
#: next) to the end of its answer. A socket timeout alone restarts at every byte: a client
#: sending one byte every few seconds would hold its thread for hours.
REQUEST_TIMEOUT = 10.0
#: The most a request's line and headers may hold: a feature's path is tens of bytes.
HEAD_LIMIT = 16384
#: Connections served at once; more are answered 503 and closed.
MAX_CONNECTIONS = 128
#: How a host's or job's directory, and a key, are opened: never through a link; a key
#: that is a FIFO must not hang the thread (it is no plain file: a 404).
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW
_KEY_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY


class _DeadlineReader(io.RawIOBase):
    """The connection's bytes, each read waiting only until the request's deadline, and no
    more than the head limit for each request (past it, the connection reads as ended and
    `cut` is set)."""

    def __init__(self, sock: socket.socket):
        super().__init__()
        self.sock = sock
        self.deadline = 0.0
        self.left = 0
        self.cut = False

    def start(self, seconds: float, limit: int = HEAD_LIMIT) -> None:
        """A new request: `seconds` from now for it, and `limit` bytes."""
        self.deadline = time.monotonic() + seconds  # a network deadline: wall time, not
        # the kernel's clock (which the simulator makes virtual)
        self.left, self.cut = limit, False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request took too long")
        if self.left <= 0:
            self.cut = True
            return 0
        self.sock.settimeout(left)
        got = self.sock.recv_into(memoryview(buffer)[:self.left])
        self.left -= got
        return got


class FeatureServer(ThreadingHTTPServer):
    """The server; `bases` maps the first path segment to a base directory."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], bases: dict[str, Path], max_age: int = 60,
                 quiet: bool = True, request_timeout: float = REQUEST_TIMEOUT,
                 max_connections: int = MAX_CONNECTIONS):
        self.bases = {name: Path(path).resolve() for name, path in bases.items()}
        self.max_age = max_age
        self.quiet = quiet
        self.request_timeout = request_timeout
        self.max_connections = max_connections
        self._active = 0
        self._active_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, _Handler)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def process_request(self, request, client_address) -> None:
        """A thread for the connection, or a 503 when max_connections are being served."""
        with self._active_lock:
            busy = self._active >= self.max_connections
            if not busy:
                self._active += 1
        if busy:
            request.setblocking(False)  # a client that does not read must not stall this
            try:
                request.send(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                             b"Retry-After: 1\r\nConnection: close\r\n\r\n")
            except OSError:
                pass
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self._active_lock:
            self._active -= 1

    def start(self) -> FeatureServer:
        """Serve in a background thread (tests, the demo)."""
        self._thread = threading.Thread(target=self.serve_forever, args=(0.05,),
                                        name="mjf-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        if self._thread is not None:
            self._thread.join()


def parse_bind(text: str) -> tuple[str, int]:
    """``ADDR:PORT`` (``[::1]:8080`` for IPv6) -> (addr, port); `ValueError` says why not."""
    addr, sep, port = text.rpartition(":")
    if not sep or not (port.isascii() and port.isdigit()) or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: expected ADDR:PORT, such as 127.0.0.1:8080")
    return addr.strip("[]") or "0.0.0.0", int(port)


class _Handler(BaseHTTPRequestHandler):
    server: FeatureServer
    server_version = "pbsplug-mjf"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (the base's name)
        if not self.server.quiet:
            super().log_message(format, *args)

    def setup(self) -> None:
        super().setup()
        self.rfile.close()
        self._reader = _DeadlineReader(self.connection)
        self.rfile = io.BufferedReader(self._reader)

    def handle_one_request(self) -> None:
        """One request within the server's request_timeout (`_DeadlineReader`); the answer
        is written within it too."""
        self._reader.start(self.server.request_timeout)
        super().handle_one_request()

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        if self._reader.cut:  # the head was cut at HEAD_LIMIT: what was read is not it
            self.close_connection = True
            self.send_error(HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, None,
                            f"a request's line and headers hold at most {HEAD_LIMIT} bytes")
            return False
        return True

    # -- routing ------------------------------------------------------------------------------
    def _target(self) -> tuple[str, int | None] | None:
        """What the request names: ``("root", None)``, ``("dir", fd)`` or ``("key", fd)``,
        the descriptor the caller closes; None for anything absent or outside the base
        directories (a 404). Each segment is opened relative to the directory before it and
        never through a link, so what is read is what was found, whatever is swapped in."""
        segments = unquote(urlsplit(self.path).path).split("/")[1:]
        if segments and segments[-1] == "":
            segments.pop()  # a directory's trailing slash
        if not segments:
            return "root", None
        base = self.server.bases.get(segments[0])
        if base is None or len(segments) > 3:
            return None
        if len(segments) > 1 and not _SEGMENT.fullmatch(segments[1]):
            return None
        if len(segments) == 3 and not KEY_NAME.fullmatch(segments[2]):
            return None
        kind = "key" if len(segments) == 3 else "dir"
        try:
            fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            for n, name in enumerate(segments[1:], start=2):
                flags = _KEY_FLAGS if kind == "key" and n == len(segments) else _DIR_FLAGS
                inner = os.open(name, flags, dir_fd=fd)
                os.close(fd)
                fd = inner
            if kind == "key" and not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError("not a plain file")  # a directory, a FIFO, a device
        except OSError:  # absent, a link (ELOOP, ENOTDIR), not a file
            os.close(fd)
            return None
        return kind, fd

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._answer(body=True)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(body=False)

    def _refuse(self) -> None:
        self.close_connection = True  # its body, unread, must not pass for a next request
        self._send(HTTPStatus.METHOD_NOT_ALLOWED, b"GET and HEAD only\n", "text/plain",
                   body=self.command != "HEAD", extra={"Allow": "GET, HEAD",
                                                       "Connection": "close"})

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_TRACE = _refuse  # noqa: N815

    # -- answers ------------------------------------------------------------------------------
    def _answer(self, body: bool) -> None:
        target = self._target()
        if target is None:
            self._send(HTTPStatus.NOT_FOUND, b"Not Found\n", "text/plain", body=body)
            return
        kind, fd = target
        if fd is None:
            self._send(HTTPStatus.OK, self._listing("/", sorted(self.server.bases)),
                       "text/html; charset=utf-8", body=body)
            return
        is_key = kind == "key"
        try:
            info = os.fstat(fd)
            if is_key:
                os.set_blocking(fd, True)
                with os.fdopen(fd, "rb", closefd=False) as handle:
                    content = handle.read()
            else:
                names = sorted(n for n in os.listdir(fd) if not n.startswith("."))
                content = self._listing(self.path, names)
        except OSError:  # a directory removed meanwhile
            self._send(HTTPStatus.NOT_FOUND, b"Not Found\n", "text/plain", body=body)
            return
        finally:
            os.close(fd)
        modified = int(info.st_mtime)
        since = self.headers.get("If-Modified-Since")
        if is_key and since:
            try:
                if modified <= parsedate_to_datetime(since).timestamp():
                    self._send(HTTPStatus.NOT_MODIFIED, b"", None, body=False,
                               extra=self._cache(modified))
                    return
            except (TypeError, ValueError, IndexError, OverflowError):
                pass  # a date we cannot read: answer in full
        kind = "text/plain; charset=us-ascii" if is_key else "text/html; charset=utf-8"
        self._send(HTTPStatus.OK, content, kind, body=body, extra=self._cache(modified))

    def _cache(self, modified: int) -> dict[str, str]:
        return {"Last-Modified": formatdate(modified, usegmt=True),
                "Cache-Control": f"max-age={self.server.max_age}"}

    def _listing(self, where: str, names: list[str]) -> bytes:
        where = "/" + urlsplit(where).path.strip("/")
        prefix = where.rstrip("/") + "/"
        items = "".join(f'<li><a href="{html.escape(prefix + n)}">{html.escape(n)}</a></li>\n'
                        for n in names)
        title = html.escape(where)
        return (f"<!DOCTYPE html>\n<html><head><title>{title}</title></head><body>\n"
                f"<h1>{title}</h1>\n<ul>\n{items}</ul>\n</body></html>\n").encode()

    def _send(self, status: HTTPStatus, content: bytes, kind: str | None, *, body: bool,
              extra: dict[str, str] | None = None) -> None:
        # What is left of the request's time (a client that does not read stalls the write).
        self.connection.settimeout(max(self._reader.deadline - time.monotonic(), 0.001))
        self.send_response(status)
        if kind:
            self.send_header("Content-Type", kind)
        if status != HTTPStatus.NOT_MODIFIED:
            self.send_header("Content-Length", str(len(content)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if body and content:
            self.wfile.write(content)


def serve(machine_base: str | os.PathLike, job_base: str | os.PathLike, bind: str,
          max_age: int = 60, quiet: bool = False) -> FeatureServer:
    """A `FeatureServer` over the two base directories, bound but not yet serving.
    `HostError` (naming the folder and why) when another user could change
    what is under either (`files.check_base`): the server, run as root, would serve what
    they put there."""
    for base in (machine_base, job_base):
        files.check_base(base)
    return FeatureServer(parse_bind(bind), {"machinefeatures": Path(machine_base),
                                            "jobfeatures": Path(job_base)},
                         max_age=max_age, quiet=quiet)
