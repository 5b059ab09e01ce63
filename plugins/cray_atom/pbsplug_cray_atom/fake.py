"""A stand-in for Cray's ATOM service: REST over HTTP on a UNIX socket, as the real one
speaks it to the batch system, for the tests, the benchmark, ``pbsplug demo`` and
``pbsplug cray_atom fake-service``.

It answers what the ATOM job API answers (seed 000 and the PBS_cray_atom hook):

- ``POST /rm/v1/jobs`` with ``{"jobid", "uid", "exclusive"}``: 200 and the job; 400 when
  the body is not that object or the job is already known (ATOM still holds it);
- ``DELETE /rm/v1/jobs/<jobid>``: 204 and no body; 404 for an unknown job;
- ``GET /rm/v1/jobs`` (200, a list) and ``GET /rm/v1/jobs/<jobid>`` (200 or 404);
- 404 for any other path, 405 for any other method.

A test scripts what comes next with `FakeAtom.script` (a status and body, or the body's
raw bytes, a delay, a dropped connection), and reads `FakeAtom.requests`: each request's
method, path and JSON body, in order. Standard library only; one thread per connection, so
a slow answer does not hold up the next request.
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote

API = "/rm/v1"


class Seen(NamedTuple):
    """One request as the service received it; compares equal to a plain
    ``(method, path, body)`` tuple."""

    method: str
    path: str
    body: Any = None  # the parsed JSON body, or the raw text when it was not JSON


@dataclass
class Scripted:
    """What the next matching request gets instead of the service's own answer."""

    method: str
    status: int | None = None     # None: the service's own answer (after the delay)
    body: Any = None
    delay: float = 0.0            # seconds before answering
    drop: bool = False            # close the connection without an answer
    times: int = 1
    raw: bytes | None = None      # the body's bytes as they are, instead of `body`'s JSON


@dataclass
class _State:
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    requests: list[Seen] = field(default_factory=list)
    script: list[Scripted] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:  # noqa: N802 (http.server's names)
        self._serve("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._serve("POST")

    def do_DELETE(self) -> None:  # noqa: N802
        self._serve("DELETE")

    def do_PUT(self) -> None:  # noqa: N802
        self._serve("PUT")

    def _serve(self, method: str) -> None:
        state = self.server.state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode(errors="replace") if length else ""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw
        with state.lock:
            state.requests.append(Seen(method, self.path, body))
            scripted = next((s for s in state.script if s.method == method), None)
            if scripted is not None:
                scripted.times -= 1
                if scripted.times <= 0:
                    state.script.remove(scripted)
        if scripted is not None and scripted.delay:
            time.sleep(scripted.delay)
        if scripted is not None and scripted.drop:
            self.close_connection = True
            self.connection.shutdown(socket.SHUT_RDWR)
            return
        raw = None
        if scripted is not None and scripted.status is not None:
            status, answer, raw = scripted.status, scripted.body, scripted.raw
        else:
            with state.lock:
                status, answer = _answer(state, method, self.path, body)
        self._reply(status, answer, raw)

    def _reply(self, status: int, answer: Any, raw: bytes | None = None) -> None:
        data = raw if raw is not None else b"" if answer is None else json.dumps(answer).encode()
        self.send_response(status)
        if data:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def _error(status: HTTPStatus, detail: str) -> tuple[int, dict[str, Any]]:
    return status.value, {"status": status.value, "title": status.phrase, "detail": detail}


def _answer(state: _State, method: str, path: str, body: Any) -> tuple[int, Any]:
    """The service's own answer, and its effect on the jobs it holds."""
    if path.rstrip("/") == f"{API}/jobs":
        if method == "GET":
            return 200, list(state.jobs.values())
        if method != "POST":
            return _error(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not allowed here")
        if not (isinstance(body, dict) and isinstance(body.get("jobid"), str)
                and isinstance(body.get("uid"), int) and not isinstance(body["uid"], bool)
                and isinstance(body.get("exclusive"), bool)):
            return _error(HTTPStatus.BAD_REQUEST,
                          "expected {\"jobid\": string, \"uid\": integer, \"exclusive\": "
                          "boolean}")
        if body["jobid"] in state.jobs:
            return _error(HTTPStatus.BAD_REQUEST, f"job {body['jobid']} already exists")
        job = {"jobid": body["jobid"], "uid": body["uid"], "exclusive": body["exclusive"],
               "state": "running"}
        state.jobs[job["jobid"]] = job
        return 200, job
    if path.startswith(f"{API}/jobs/"):
        jobid = unquote(path[len(f"{API}/jobs/"):])
        if method == "GET":
            return (200, state.jobs[jobid]) if jobid in state.jobs else _error(
                HTTPStatus.NOT_FOUND, f"job {jobid} not found")
        if method != "DELETE":
            return _error(HTTPStatus.METHOD_NOT_ALLOWED, f"{method} is not allowed here")
        if state.jobs.pop(jobid, None) is None:
            return _error(HTTPStatus.NOT_FOUND, f"job {jobid} not found")
        return 204, None
    return _error(HTTPStatus.NOT_FOUND, f"no such resource: {path}")


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    state: _State

    def handle_error(self, request, client_address) -> None:
        pass  # a client that went away (a timeout) is not the service's error


class FakeAtom:
    """A running stand-in ATOM service on `socket_path`::

        with FakeAtom("/tmp/t/atomd.sock") as atom:
            atom.script("POST", 500, {"detail": "node unhealthy"})
            ...
            assert atom.requests == [("POST", "/rm/v1/jobs", {...})]
    """

    def __init__(self, socket_path: str | os.PathLike, mode: int = 0o666):
        self.socket_path = Path(socket_path)
        self.mode = mode
        self._state = _State()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- the service --------------------------------------------------------------------------
    def start(self) -> FakeAtom:
        self.socket_path.parent.mkdir(parents=True, exist_ok=True)
        self.socket_path.unlink(missing_ok=True)
        self._server = _Server(str(self.socket_path), _Handler)
        self._server.state = self._state
        os.chmod(self.socket_path, self.mode)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self, remove_socket: bool = True) -> None:
        """Stop answering. With `remove_socket` false the socket file stays, as after a
        crash of the service: connections to it are refused."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if remove_socket:
            self.socket_path.unlink(missing_ok=True)

    def serve_forever(self) -> None:
        """Run in the foreground until interrupted (``pbsplug cray_atom fake-service``)."""
        self.start()
        try:
            while True:
                time.sleep(3600)
        finally:
            self.stop()

    def __enter__(self) -> FakeAtom:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- scripting and recording ----------------------------------------------------------------
    def script(self, method: str, status: int | None = None, body: Any = None, *,
               delay: float = 0.0, drop: bool = False, times: int = 1,
               raw: bytes | None = None) -> None:
        """The next `times` requests with `method` get `status` and `body` (JSON) instead of
        the service's own answer, after `delay` seconds; `drop` closes the connection
        without an answer. `raw`: the body's bytes as they are, with the same headers (an
        answer no JSON writer makes: ``NaN``, a key twice). Scripts for one method are used
        in the order given."""
        with self._state.lock:
            self._state.script.append(Scripted(method.upper(), status, body, delay, drop,
                                               times, raw))

    @property
    def requests(self) -> list[Seen]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def jobs(self) -> dict[str, dict[str, Any]]:
        """The jobs the service holds now."""
        with self._state.lock:
            return {k: dict(v) for k, v in self._state.jobs.items()}

    def clear(self) -> None:
        """Forget the requests seen so far (the jobs held stay)."""
        with self._state.lock:
            self._state.requests.clear()
