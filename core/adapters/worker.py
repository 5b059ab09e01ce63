"""pbsplug's worker on an execution host: the plugins loaded once, each event in a fork.

PBS starts a fresh ``pbs_python`` for every execution-host event, and Slurm a fresh process
for every Prolog and Epilog, so a script that imported pbsplug and the plugins itself would
pay those imports on every job (benchmarks/bench_pbs.py, bench_slurm.py). Instead the script
(PBS: `pbs_hook`; Slurm: `slurm_program`) turns the event into plain data with the standard
library alone and sends it to this worker over a UNIX socket; the worker, started by the first
event that finds none, has imported pbsplug and loaded the plugins once, forks a child per
event (so that each event starts from the same state, as a fresh interpreter does, and a crash
ends only that child), and answers with the outcome for the script to carry out.

What the worker loads and how a child answers are the adapter's, named in the config:
``loader`` (``module:function``, called with the config, returns what the dispatcher takes)
and ``dispatcher`` (called with that and the request, returns the answer as plain data).
Without them, the PBS bridge's (`pbs_bridge.load`, and `pbs_bridge.dispatch` of the request's
``event`` and ``data``). Requests and answers are JSON, or with ``"encoding": "marshal"``
Python's marshal format.

- One worker per hook config: the hook names its socket after the config's SHA-256,
  ``/run/pbsplug/pbs-<digest>.sock`` (folder 0700, socket 0600: root only), so a new install
  starts a new worker and the old one leaves when idle. A config with ``"public": true``
  gets a socket any local user may reach (folder 0755, socket 0666), and every request
  carries its sender's ``(pid, uid, gid)`` from the kernel (``_peer``) for the dispatcher
  to check.
- A child still running at the config's ``deadline`` (seconds; default the hook's ``alarm``
  plus one second) is killed; the script, already ended by PBS's own alarm, sees no answer.
- The worker leaves after `IDLE_EXIT` seconds without an event.

    python -m pbsplug.adapters.worker SOCKET CONFIG
"""

from __future__ import annotations

import json
import marshal
import os
import select
import signal
import site
import socket
import struct
import sys
import time
from pathlib import Path

#: Seconds without an event after which the worker leaves.
IDLE_EXIT = 600.0
#: Largest request the worker reads (an event's plain data).
MAX_REQUEST = 64 << 20


def _read_all(conn: socket.socket, limit: int) -> bytes:
    chunks, size = [], 0
    while True:
        chunk = conn.recv(1 << 16)
        if not chunk:
            return b"".join(chunks)
        size += len(chunk)
        if size > limit:
            raise ValueError(f"request over {limit} bytes")
        chunks.append(chunk)


def _function(name: str):
    """``module:function``, imported."""
    import importlib

    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


def _pbs_dispatch(runner, request):
    from .pbs_bridge import dispatch

    return dispatch(runner, request["event"], request["data"])


def _child(conn: socket.socket, runner, dispatch, encoding: str = "json") -> None:
    # marshal (the Slurm programs'): decoded by the interpreter's core, so the program that
    # sends it imports neither json nor socket; only root can reach the socket.
    loads, dumps = ((marshal.loads, marshal.dumps) if encoding == "marshal"
                    else (json.loads, lambda v: json.dumps(v, default=str).encode()))
    try:
        request = loads(_read_all(conn, MAX_REQUEST))
        if isinstance(request, dict):  # who is asking, as the kernel says: (pid, uid, gid)
            request["_peer"] = list(struct.unpack("3i", conn.getsockopt(
                socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))))
        outcome = dispatch(runner, request)
    except KeyboardInterrupt:
        outcome = None
    except Exception as exc:  # the event could not be built or run: the hook's error
        outcome = {"kind": "error", "detail": f"pbsplug worker: {type(exc).__name__}: {exc}",
                   "changes": {}, "logs": [], "hook": None, "event": None}
    if outcome is not None:
        conn.sendall(dumps(outcome))
    conn.close()


def serve(path: Path, config_file: Path) -> None:
    # A worker started by a batch system's script may inherit blocked signals (Slurm's
    # daemons block SIGALRM and SIGTERM): the hooks' alarms need them.
    signal.pthread_sigmask(signal.SIG_SETMASK, [])
    config = json.loads(config_file.read_bytes())
    for directory in config.get("site_dirs") or ():
        site.addsitedir(directory)
    load = _function(config.get("loader") or "pbsplug.adapters.pbs_bridge:load")
    dispatch = (_function(config["dispatcher"]) if config.get("dispatcher")
                else _pbs_dispatch)
    encoding = config.get("encoding") or "json"
    runner = load(config)
    alarm = float(config.get("deadline")
                  or float((config.get("attributes") or {}).get("alarm") or 30) + 1.0)
    # "public": a socket every local user may reach (Slurm's TaskProlog runs as the job's
    # user); the dispatcher then sees who is asking (the request's "_peer") and decides.
    public = bool(config.get("public"))
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path.parent, 0o755 if public else 0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    tmp = path.with_name(f"{path.name}.{os.getpid()}")
    old = os.umask(0o077)
    try:
        listener.bind(str(tmp))
    finally:
        os.umask(old)
    os.chmod(tmp, 0o666 if public else 0o600)
    listener.listen(socket.SOMAXCONN)
    os.replace(tmp, path)  # whole or absent: a hook never connects to a half-made worker
    inode = os.stat(path).st_ino
    children: dict[int, float] = {}
    last = time.monotonic()
    try:
        while True:
            ready, _, _ = select.select([listener], [], [], 0.5)
            now = time.monotonic()
            for pid, deadline in list(children.items()):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    del children[pid]
                elif now > deadline:
                    os.kill(pid, signal.SIGKILL)
            if ready:
                conn, _ = listener.accept()
                last = now
                pid = os.fork()
                if pid == 0:
                    listener.close()
                    code = 0
                    try:
                        _child(conn, runner, dispatch, encoding)
                    except BaseException:  # noqa: BLE001 - the child ends here, whatever
                        code = 1
                    os._exit(code)
                conn.close()
                children[pid] = now + alarm
            elif not children and now - last > IDLE_EXIT:
                return
            if _inode(path) != inode:
                return  # replaced or removed: another worker serves this config now
    finally:
        listener.close()
        if _inode(path) == inode:
            path.unlink(missing_ok=True)


def _inode(path: Path) -> int | None:
    try:
        return os.stat(path).st_ino
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        print("usage: python -m pbsplug.adapters.worker SOCKET CONFIG", file=sys.stderr)
        return 2
    serve(Path(args[0]), Path(args[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
