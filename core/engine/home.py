"""The engine's home folder, its files, and PBS's server_logs line format."""

from __future__ import annotations

import logging
import os
import socket
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from ..siteconfig import default_home

# PBS's log event classes (the second field of a server_logs line, in hex).
LOG_ERROR, LOG_SYSTEM, LOG_ADMIN, LOG_JOB, LOG_JOB_USAGE = 0x0001, 0x0002, 0x0004, 0x0008, 0x0010
LOG_SECURITY, LOG_SCHED, LOG_DEBUG, LOG_DEBUG2, LOG_RESV = 0x0020, 0x0040, 0x0080, 0x0100, 0x0200
#: The server's ``log_events`` when unset: PBS's 511, every class up to debug2 (0x0100), so
#: not the reservation lines (0x0200) nor PBS's debug3 and debug4 (0x0400, 0x0800).
LOG_EVENTS_DEFAULT = 0x01FF
#: `pbsplug.events.PBS_OBJECT`, spelled out so that the commands (which import this module)
#: start without the kernel.
PBS_OBJECT = "pbs_object"


#: The server process's umask: whatever it makes is private unless it says otherwise.
SERVER_UMASK = 0o077
#: The home's folders and their modes (the server owns them all).
FOLDER_MODES = {"": 0o755, "server_logs": 0o700, "jobs": 0o711, "tmp": 0o711, "hooks": 0o700,
                "hooks/tmp": 0o700, "server_priv": 0o700, "server_priv/accounting": 0o700}
#: The server's private files in the home (server.pid and the socket stay readable).
PRIVATE_FILES = ("server.db", "server.db-wal", "server.db-shm", "site.toml",
                 "hook_trace.jsonl", "server.out")


def _chmod_own(path: Path, mode: int, regular: bool = False) -> None:
    """chmod `path` to `mode` if it is the server's own file or folder (not a link, not a
    user's job file; only a regular file with `regular`): for homes made before the files
    were private."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        return
    if regular and not stat.S_ISREG(st.st_mode):
        return
    if st.st_uid == os.geteuid() and not stat.S_ISLNK(st.st_mode) and (
            stat.S_IMODE(st.st_mode) != mode):
        path.chmod(mode)


@dataclass(frozen=True)
class Home:
    """Where one engine keeps everything: ``$PBSPLUG_HOME`` (or the documented default)."""

    root: Path

    @classmethod
    def default(cls) -> Home:
        return cls(default_home())

    @property
    def db(self) -> Path:
        return self.root / "server.db"

    @property
    def socket(self) -> Path:
        return self.root / "server.sock"

    @property
    def pidfile(self) -> Path:
        return self.root / "server.pid"

    @property
    def logs(self) -> Path:
        return self.root / "server_logs"

    @property
    def accounting(self) -> Path:
        """PBS's accounting log folder, where PBS keeps it under PBS_HOME (`accounting.py`)."""
        return self.root / "server_priv" / "accounting"

    @property
    def jobs(self) -> Path:
        return self.root / "jobs"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def hooks_tmp(self) -> Path:
        return self.root / "hooks" / "tmp"

    @property
    def trace(self) -> Path:
        return self.root / "hook_trace.jsonl"

    @property
    def site(self) -> Path:
        return self.root / "site.toml"

    def make(self) -> None:
        """Make the home, or tighten one made by an older pbsplug: the server's files are
        private (0600 files, 0700 folders; the server runs with `SERVER_UMASK` so that what
        it makes later is too). Users traverse the home to the socket, and `jobs/` and
        `tmp/` to their own job's files by name, never listing them."""
        self.root.mkdir(parents=True, exist_ok=True)
        for path, mode in FOLDER_MODES.items():
            folder = self.root / path if path else self.root
            folder.mkdir(exist_ok=True)
            _chmod_own(folder, mode)
        for name in PRIVATE_FILES:
            _chmod_own(self.root / name, 0o600)
        for folder in (self.logs, self.jobs, self.hooks_tmp, self.accounting):
            for entry in folder.iterdir() if folder.is_dir() else ():
                _chmod_own(entry, 0o600, regular=True)

    def server_pid(self) -> int | None:
        """The pid of the server running in this home, or None."""
        try:
            pid = int(self.pidfile.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        try:  # a killed server its parent has not reaped yet is a zombie: not running
            if Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0] == b"Z":
                return None
        except (OSError, IndexError):
            pass
        return pid


def log_events(server: dict[str, Any] | None) -> int:
    """The classes the server log writes: the server's ``log_events``, or PBS's default."""
    value = (server or {}).get("log_events")
    return value if isinstance(value, int) and not isinstance(value, bool) else \
        LOG_EVENTS_DEFAULT


class ServerLog:
    """server_logs/YYYYMMDD, one line per event:
    ``MM/DD/YYYY HH:MM:SS;0008;Server@host;Job;1.host;Job Queued at request of ...``.

    A line is written when its class shares a bit with `events` (the server's
    ``log_events``, which the server sets here when it changes, so that no line reads it).
    A line that cannot be written (a full disk) is counted, never raised: the server goes
    on, and the first line written afterwards is preceded by one saying how many were lost
    and why."""

    def __init__(self, home: Home, host: str | None = None):
        self.dir = home.logs
        self.host = host or socket.gethostname().split(".")[0]
        self._day = ""
        self._file: TextIO | None = None
        self.lost = 0  # lines not written since the last one that was
        self._lost_why = ""
        self.events = LOG_EVENTS_DEFAULT

    def __call__(self, kind: int, obj_type: str, name: str, message: str) -> None:
        if not kind & self.events:
            return
        now = time.localtime()
        stamp = time.strftime("%m/%d/%Y %H:%M:%S", now)
        lines = [f"{stamp};{kind:04x};Server@{self.host};{obj_type};{name};{line}\n"
                 for line in str(message).splitlines() or [""]]
        if self.lost:
            lines.insert(0, f"{stamp};{LOG_ERROR:04x};Server@{self.host};Server;{self.host};"
                            f"{self.lost} log lines lost: {self._lost_why}\n")
        try:
            day = time.strftime("%Y%m%d", now)
            if day != self._day or self._file is None:
                self.close()
                # (text a hook logged may hold lone surrogates, as JSON lets a report
                # carry them: shown escaped, \udcff, rather than the line lost)
                self._file = open(self.dir / day, "a", encoding="utf-8",
                                  errors="backslashreplace")
                self._day = day
            self._file.write("".join(lines))
            self._file.flush()
        except (OSError, ValueError) as exc:
            self.lost += len(lines) - (1 if self.lost else 0)
            self._lost_why = getattr(exc, "strerror", None) or str(exc)
            self.close()  # reopened by the next line: what was buffered is dropped
            return
        self.lost = 0

    def close(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            try:
                file.close()
            except OSError:
                pass  # its buffer could not be written (a full disk); counted already


class HookLogHandler(logging.Handler):
    """What hooks log (``event.logger``, the ``pbsplug.hook.<name>`` loggers) into
    server_logs as PBS writes a hook's ``pbs.logmsg``: object type ``Hook``, the hook's name,
    and the event type by level: error 0001, warning 0002, info 0080 (PBS's LOG_DEBUG, which
    its default log_events shows), debug 0100. A line logged against an object
    (`Event.logjobmsg`) is written as PBS's ``pbs.logjobmsg`` writes it: ``Job;<id>`` and
    event type 0008, whatever its level."""

    def __init__(self, log: ServerLog):
        super().__init__()
        self.server_log = log

    def emit(self, record: logging.LogRecord) -> None:
        kind = (LOG_ERROR if record.levelno >= logging.ERROR else
                LOG_SYSTEM if record.levelno >= logging.WARNING else
                LOG_DEBUG if record.levelno >= logging.INFO else LOG_DEBUG2)
        obj_type, name = getattr(record, PBS_OBJECT, None) or (
            "Hook", record.name.removeprefix("pbsplug.hook").lstrip(".") or "hook")
        if obj_type == "Job":
            kind = LOG_JOB
        try:
            self.server_log(kind, obj_type, name, record.getMessage())
        except Exception:  # a log line must never take the server down
            self.handleError(record)
