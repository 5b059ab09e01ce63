"""The hook scripts' side of the worker (`worker`): connect, start one, ask. Standard library
only, and only what the interpreter has built in at the top (``_socket``; not even ``os``,
which with ``collections.abc`` costs a Slurm program about 1.5 ms), because both
scripts load it by path without pbsplug on ``sys.path``: PBS's hook script (`pbs_hook`, in
pbs_python, from the install's ``wire_dir``) and Slurm's programs (`slurm_program`, from the
copy beside them that ``pbsplug slurm install`` writes). What goes over the socket (JSON,
marshal) and what an answer means stay each script's own.
"""

import _socket
import posix
import sys

#: Seconds to wait for a worker a script started.
WORKER_START = 20.0
#: The environment a worker is started with (no user's PATH, no user site).
WORKER_ENV = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "PYTHONNOUSERSITE": "1"}


def connect(path):
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


def safe_folder(folder):
    """Whether only root (or this user) can change what `folder` holds: a real folder of
    theirs that no one else may write to, every folder above it (as named, and as its links
    resolve) theirs too and writable by no one else, or sticky as /tmp is (where no one
    else may rename or remove what is theirs). A worker's socket and lock live there."""
    import os
    import stat

    trusted = (0, os.geteuid())
    try:
        st = os.lstat(folder)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid not in trusted or st.st_mode & 0o022:
            return False
        for path in (os.path.abspath(folder), os.path.realpath(folder)):
            while path != os.path.dirname(path):
                path = os.path.dirname(path)
                st = os.lstat(path)
                if st.st_uid not in trusted or (
                        not stat.S_ISLNK(st.st_mode) and st.st_mode & 0o022
                        and not st.st_mode & stat.S_ISVTX):
                    return False
    except OSError:
        return False
    return True


def exchange(conn, data, meanwhile=None):
    """Send `data`, then read the whole answer (the worker closes when done); b"" when the
    worker's process ended without one. `conn` is closed. `meanwhile`, when given, is
    called between the two, while the worker works."""
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
    finally:
        conn.close()
    return b"".join(chunks)


def start(python, config_file, path, folder_mode=0o700):
    """Start ``python -m pbsplug.adapters.worker path config_file`` unless one answers at
    `path` already (one start, however many scripts wait: a lock beside the socket), and
    wait up to `WORKER_START` seconds for it (not once it has ended); a connection to it,
    or None."""
    import fcntl
    import os
    import subprocess
    import time

    folder = os.path.dirname(path)
    os.makedirs(folder, mode=folder_mode, exist_ok=True)
    if not safe_folder(folder):
        print(f"pbsplug: {folder}: not a folder only root may write to (nor every folder "
              "above it): no worker started there", file=sys.stderr)
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
    finally:
        os.close(lock)
    return conn


def ask(python, config_file, path, data, may_start=True):
    """The worker's answer to `data` (bytes; b"" when its process ended without one), the
    worker started when none answers and `may_start`; None when there is no worker to ask.
    A connection reset before any answer (a worker that left with it unaccepted: nothing
    was done) is asked again once, of a new worker."""
    for _ in range(2):
        conn = connect(path) or (start(python, config_file, path) if may_start else None)
        if conn is None:
            return None
        try:
            return exchange(conn, data)
        except (ConnectionResetError, BrokenPipeError):
            continue
    return None
