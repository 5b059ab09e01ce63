"""The commands' side of the server's API (`api`): one JSON request per connection on the
home's UNIX socket.

Only the standard library (http.client over an AF_UNIX socket), so that a command such as
``pbsplug qsub`` starts without loading the server, the kernel or requests.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
from typing import Any

from .errors import PBSE_IVALREQ, PbsError
from .home import Home

#: The protocol's limits, which the server (`api`) enforces and the commands check first: a
#: request's head (request line and headers) and its JSON body, in bytes.
MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 8 * 1024 * 1024


class ServerUnavailable(RuntimeError):
    """No server answers in this home: not started, gone, or too slow."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, socket_path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        # With a timeout the socket is non-blocking, and a UNIX socket's connect then fails
        # at once with EAGAIN while the server's listen queue is full (many clients at once,
        # or one user opening hundreds): wait for room, within the timeout, as a blocking
        # connect would.
        deadline = time.monotonic() + (self.timeout or 60.0)
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(self.timeout)
            try:
                sock.connect(self.socket_path)
            except BlockingIOError:
                sock.close()
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.01)
                continue
            except OSError:
                sock.close()
                raise
            self.sock = sock
            return


class Client:
    """Requests to the server of one home: ``client("stat_jobs", ids=[...])`` returns the
    result, or raises the server's `PbsError`, or `ServerUnavailable`."""

    def __init__(self, home: Home, timeout: float = 60.0):
        self.home = home
        self.timeout = timeout

    def __call__(self, op: str, **args: Any) -> Any:
        if not self.home.socket.exists():
            raise ServerUnavailable(f"no server runs in {self.home.root} (start one with "
                                    "`pbsplug server start`)")
        data = json.dumps(args).encode()
        if len(data) > MAX_BODY_BYTES:
            raise PbsError(PBSE_IVALREQ, f"Invalid request: {op} request of {len(data)} bytes "
                           f"is over the server's limit of {MAX_BODY_BYTES}")
        conn = _UnixConnection(str(self.home.socket), self.timeout)
        try:
            try:
                conn.request("POST", f"/v1/{op}", body=data,
                             headers={"Content-Type": "application/json"})
            except (BrokenPipeError, ConnectionResetError):
                pass  # the server refused early (too many connections): its answer says why
            body = json.loads(conn.getresponse().read())
        except TimeoutError:
            raise ServerUnavailable(f"the server in {self.home.root} did not answer within "
                                    f"{self.timeout:g} s") from None
        except (OSError, http.client.HTTPException, ValueError) as exc:
            raise ServerUnavailable(f"cannot connect to the server in {self.home.root} "
                                    f"({exc}; is it running? `pbsplug server status`)") from None
        finally:
            conn.close()
        if "error" in body:
            err = body["error"]
            raise PbsError(err["code"], err["message"], err.get("obj"))
        return body["result"]
