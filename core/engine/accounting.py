"""PBS's accounting log: ``server_priv/accounting/YYYYMMDD`` in the engine's home.

One record a line, as OpenPBS 23.06 writes them (checked on a running PBS):
``MM/DD/YYYY HH:MM:SS;T;<id>;key=value key=value ...``, T being the record's type: jobs
``Q`` queued (at qsub, and again in each queue a qmove or a route queue puts it in: 23.06
writes no ``M``), ``S`` started, ``E`` ended, ``R`` requeued (rerun), ``D`` deleted at
someone's request, ``A`` aborted by the server, ``a`` altered (qalter), ``z`` suspended and
``r`` resumed (qsig); reservations ``U``
unconfirmed (submitted), ``Y`` confirmed, ``B`` begun, ``k`` deleted by its owner or ended
(23.06 writes no ``F``), ``K`` deleted by the server (denied) or by someone else.
`tracejob` and `pbsplug sim run` read it back.

A value never breaks its line: control characters are written as ``^X`` (DEL ``^?``, the C1
controls ``\\x9b``), a value holding a blank or a double quote is written in double quotes
with ``\\"`` and ``\\\\`` inside, and a value longer than `MAX_VALUE` characters is cut, ending
in ``...``. The file is the server's alone (0600 in 0700 folders), opened through no link
(O_NOFOLLOW, in a folder opened O_NOFOLLOW too) and appended to (O_APPEND), one whole
record a write. A record that cannot be written (a full disk, a link at the file's name) is
counted and logged once, never raised; the first record written afterwards is preceded in
the server log by how many were lost.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ..units import format_duration
from . import executor
from .display import show_nonprint
from .home import LOG_ERROR, Home

#: A value longer than this is cut (a select of thousands of chunks, a site's long string).
MAX_VALUE = 65536
#: The keys of a job's record that come before its resources (S adds start, exec_host and
#: exec_vnode after them), as OpenPBS 23.06 orders them; resvname and resvID only for a
#: job in a reservation's queue.
_JOB_HEAD = ("user", "group", "account", "project", "jobname", "queue", "resvname", "resvID",
             "ctime", "qtime", "etime")
#: What the server changes beside a qalter's attributes: no `a` record of its own.
_NOT_ALTERED = frozenset({"mtime", "job_state", "substate", "comment", "Variable_List",
                          "schedselect", "estimated"})
_RUN_FLAGS = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | \
    os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC

#: A job's Exit_status in an R record when its run did not end by itself: PBS's
#: JOB_EXEC_RERUN (a qrerun, a lost job), and JOB_EXEC_FAILHOOK_RERUN (a hook's requeue).
RERUN_STATUS, HOOK_RERUN_STATUS = -11, -16


def shown(text: str) -> str:
    """`text` on one line as the commands show it (`display.show_nonprint`: controls as
    ``^X``, DEL ``^?``, C1 ``\\x9b``, the line and paragraph separators as ``\\u2028``
    and ``\\u2029``: a job name holding one forged a record for a reader that splits with
    Python's ``str.splitlines``), a tab too (``^I``), cut past `MAX_VALUE` characters."""
    if len(text) > MAX_VALUE:
        text = text[:MAX_VALUE] + "..."
    return show_nonprint(text, tab=False)


def text_of(value: Any) -> str:
    """`value` as one token of a record: `shown`, and quoted when it holds a blank or a
    quote."""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    text = shown(value if isinstance(value, str) else str(value))
    if " " in text or '"' in text or "\u00a0" in text or text == "":
        text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _sorted_resources(prefix: str, res: Any) -> list[tuple[str, Any]]:
    if not isinstance(res, Mapping):
        return []
    return [(f"{prefix}.{k}", v) for k, v in sorted(res.items()) if v is not None]


def _ncpus(exec_vnode: str) -> int:
    total = 0
    for part in exec_vnode.replace("(", " ").replace(")", " ").replace("+", " ").split():
        for item in part.split(":")[1:]:
            key, _, value = item.partition("=")
            if key == "ncpus" and value.isdigit():
                total += int(value)
    return total


def _session(runtime: Mapping[str, Any] | None) -> int:
    """The run's session id (its process group), as its launch or, when the launch was
    stored before its shepherd knew it, its shepherd's file says; 0 when unknown."""
    launch = runtime.get("launch") if isinstance(runtime, Mapping) else None
    if not isinstance(launch, Mapping):
        return 0
    pgid = launch.get("pgid")
    if isinstance(pgid, int) and pgid > 0:
        return pgid
    try:
        recorded = executor.Launch.recorded(str(launch["status_file"]), str(launch["tmpdir"]))
    except (KeyError, TypeError, ValueError):
        return 0
    return recorded.pgid if recorded is not None and isinstance(recorded.pgid, int) else 0


class Accounting:
    """The engine's accounting log. `clock` is the engine's clock; `log(kind, obj_type,
    name, message)` is the server log, told once when records start being lost."""

    def __init__(self, home: Home, host: str, clock: Callable[[], float],
                 log: Callable[[int, str, str, str], None]):
        self.dir = home.accounting
        self.host = host
        self.clock = clock
        self.log = log
        self._day = ""
        self._fd: int | None = None
        self.lost = 0  # records not written since the last one that was
        self._lost_why = ""
        #: A queue's reservation, as (its name, its id), or None: set by the server
        #: (`Reservations.of_queue`); a job's records in it name the reservation.
        self.resv_of: Callable[[str], tuple[str, str] | None] = lambda queue: None

    # -- the file ---------------------------------------------------------------------------
    def record(self, kind: str, obj_id: str, pairs: Iterable[tuple[str, Any]] | str,
               trailing: bool = False) -> None:
        """Write one record; `pairs` are its key=value pairs (None values left out), or a
        text (an A record's message). Never raises."""
        try:
            now = time.localtime(self.clock())
            if isinstance(pairs, str):
                body = shown(pairs)
            else:
                body = " ".join(f"{k}={text_of(v)}" for k, v in pairs if v is not None)
                if trailing:  # (PBS ends its Q, S and B records with a blank)
                    body += " "
            name = shown(obj_id).replace(";", "\\x3b")  # (ids are the server's: never one)
            line = (f"{time.strftime('%m/%d/%Y %H:%M:%S', now)};{kind};{name};{body}\n"
                    ).encode("utf-8", "replace")
            self._write(time.strftime("%Y%m%d", now), line)
        except (OSError, ValueError, OverflowError) as exc:
            why = getattr(exc, "strerror", None) or str(exc)
            if not self.lost:
                self.log(LOG_ERROR, "Server", self.host, f"accounting record not written: "
                         f"{why} ({self.dir}); the server goes on")
            self.lost += 1
            self._lost_why = why
            self.close()
            return
        if self.lost:
            self.log(LOG_ERROR, "Server", self.host, f"{self.lost} accounting records lost: "
                     f"{self._lost_why}")
            self.lost = 0

    def _write(self, day: str, line: bytes) -> None:
        if self._fd is None or day != self._day:
            self.close()
            folder = os.open(self.dir, _DIR_FLAGS)
            try:
                fd = os.open(day, _RUN_FLAGS, 0o600, dir_fd=folder)
            finally:
                os.close(folder)
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1 or \
                    st.st_uid != os.geteuid():
                os.close(fd)
                raise OSError(0, f"{self.dir / day} is not the server's own plain file")
            if stat.S_IMODE(st.st_mode) & 0o077:
                os.fchmod(fd, 0o600)
            self._fd, self._day = fd, day
        view = memoryview(line)
        while view:  # (O_APPEND: each write lands at the end; a short one goes on there)
            view = view[os.write(self._fd, view):]

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError:
                pass

    # -- jobs -------------------------------------------------------------------------------
    def _job_pairs(self, attrs: Mapping[str, Any], ran: bool,
                   ended: bool = False) -> list[tuple[str, Any]]:
        values = {"user": attrs.get("euser"), "group": attrs.get("egroup"),
                  "account": attrs.get("Account_Name"),
                  "project": attrs.get("project") or "_pbs_project_default",
                  "jobname": attrs.get("Job_Name"), "queue": attrs.get("queue"),
                  "ctime": attrs.get("ctime"), "qtime": attrs.get("qtime"),
                  "etime": attrs.get("etime") or (
                      attrs.get("qtime") if attrs.get("job_state") in ("Q", "R", "E", "F", "B")
                      else 0)}
        values["resvname"], values["resvID"] = self.resv_of(str(values["queue"] or "")) or (
            None, None)
        pairs: list[tuple[str, Any]] = [(k, values[k]) for k in _JOB_HEAD]
        pairs.append(("depend", attrs.get("depend")))
        if ran:
            pairs.append(("start", attrs.get("stime")))
            if not attrs.get("array"):  # (an array runs on no host of its own)
                pairs += [("exec_host", attrs.get("exec_host")),
                          ("exec_vnode", attrs.get("exec_vnode"))]
        if attrs.get("array") and not ended:  # (its Q and S, not its E: PBS's, checked)
            pairs.append(("array_indices", attrs.get("array_indices_submitted")))
        return pairs + _sorted_resources("Resource_List", attrs.get("Resource_List"))

    def queued(self, job_id: str, attrs: Mapping[str, Any]) -> None:
        """Q: the job entered a queue (qsub, qmove, a route queue's move); an array's with
        its ``array_indices`` (as submitted) before its resources."""
        self.record("Q", job_id, self._job_pairs(attrs, ran=False), trailing=True)

    def array_begun(self, job_id: str, attrs: Mapping[str, Any]) -> None:
        """S of an array, as OpenPBS 23.06 writes it when its first subjob starts (checked):
        Q's keys with ``start`` before ``array_indices``; no host, no
        ``resource_assigned``."""
        self.record("S", job_id, self._job_pairs(attrs, ran=True), trailing=True)

    def array_ended(self, job_id: str, attrs: Mapping[str, Any]) -> None:
        """E of an array that began, as OpenPBS 23.06 writes it when the array is over
        (checked, after its last subjob's E, a qdel's too): S's keys without
        ``array_indices``, then ``session=0 end Exit_status run_count`` and no
        ``resources_used`` (its subjobs' records have them)."""
        if attrs.get("stime") is None:
            return
        self.record("E", job_id, [*self._job_pairs(attrs, ran=True, ended=True),
                                  ("session", 0), ("end", int(self.clock())),
                                  ("Exit_status", attrs.get("Exit_status")),
                                  ("run_count", attrs.get("run_count") or 0)])

    def started(self, job_id: str, attrs: Mapping[str, Any]) -> None:
        """S: the job runs, once its execjob_begin hooks are over (before its prologue and
        launch hooks), as PBS's server writes it once the job's MoM took the job (its
        begin hooks run before the MoM answers); none for a start its begin hooks refused
        (it never ran), nor for one the server's stop gave up in its begin hooks."""
        pairs = self._job_pairs(attrs, ran=True)
        pairs.append(("resource_assigned.ncpus", _ncpus(str(attrs.get("exec_vnode") or ""))))
        self.record("S", job_id, pairs, trailing=True)

    def _run_end(self, attrs: Mapping[str, Any], runtime: Mapping[str, Any] | None,
                 exit_status: Any) -> list[tuple[str, Any]]:
        return [*self._job_pairs(attrs, ran=True), ("session", _session(runtime)),
                ("end", int(self.clock())), ("Exit_status", exit_status),
                *_sorted_resources("resources_used", attrs.get("resources_used")),
                ("run_count", attrs.get("run_count", 0))]

    def ended(self, job_id: str, attrs: Mapping[str, Any],
              runtime: Mapping[str, Any] | None) -> None:
        """E: the job is over. One that never ran (deleted or aborted while queued) has
        its D or A record instead, as in PBS."""
        if attrs.get("stime") is None:
            return
        self.record("E", job_id, self._run_end(attrs, runtime, attrs.get("Exit_status")))

    def rerun(self, job_id: str, attrs: Mapping[str, Any],
              runtime: Mapping[str, Any] | None, comment: str) -> None:
        """R: the run is over and the job goes back to its queue (`comment` says why)."""
        if attrs.get("stime") is None:
            return
        status = attrs.get("Exit_status")
        if status is None or "qrerun" in comment:
            status = HOOK_RERUN_STATUS if " hook" in comment else RERUN_STATUS
        self.record("R", job_id, self._run_end(attrs, runtime, status))

    def suspended(self, job_id: str, attrs: Mapping[str, Any]) -> None:
        """z: qsig -s suspend; the run's resources_used so far (its walltime at least: a
        job its shepherd has not sampled yet has no other)."""
        used = dict(attrs.get("resources_used") or {})
        if "walltime" not in used and attrs.get("stime") is not None:
            used["walltime"] = format_duration(max(0, int(self.clock()) - int(attrs["stime"])))
        self.record("z", job_id, _sorted_resources("resources_used", used))

    def resumed(self, job_id: str) -> None:
        """r: qsig -s resume; no keys, as PBS writes it."""
        self.record("r", job_id, "")

    def deleted(self, job_id: str, requestor: str) -> None:
        """D: qdel (`requestor` is ``user@host``)."""
        self.record("D", job_id, [("requestor", requestor)])

    def aborted(self, job_id: str, why: str) -> None:
        """A: the server deleted the job (a hook, a dependency, a reservation's end)."""
        self.record("A", job_id, why)

    def altered(self, job_id: str, before: Mapping[str, Any], after: Mapping[str, Any],
                asked: Iterable[str], resources: Iterable[str]) -> None:
        """a: what a qalter changed, in one record (none when nothing changed): each
        attribute it `asked` for and each resource it set (`resources`, a hook's too),
        with its new value; not what the server derived (a select's sums), as PBS's."""
        names, res_names = set(asked) - _NOT_ALTERED, set(resources)
        pairs: list[tuple[str, Any]] = []
        for key in sorted(names):
            old, new = before.get(key), after.get(key)
            if key == "Resource_List":
                was = old if isinstance(old, Mapping) else {}
                now = new if isinstance(new, Mapping) else {}
                pairs += [(f"Resource_List.{res}", now.get(res, ""))
                          for res in sorted(res_names) if was.get(res) != now.get(res)]
            elif old != new:
                pairs.append((key, "" if new is None else new))
        if pairs:
            self.record("a", job_id, pairs)

    # -- reservations -----------------------------------------------------------------------
    def resv_submitted(self, resv_id: str, requestor: str) -> None:
        self.record("U", resv_id, [("requestor", requestor)])

    def resv_confirmed(self, resv_id: str, attrs: Mapping[str, Any]) -> None:
        self.record("Y", resv_id, [("requestor", f"Scheduler@{self.host}"),
                                   ("start", attrs.get("reserve_start")),
                                   ("end", attrs.get("reserve_end")),
                                   ("nodes", attrs.get("resv_nodes"))])

    def _resv_pairs(self, attrs: Mapping[str, Any]) -> list[tuple[str, Any]]:
        given = attrs.get("Resource_List")
        res: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        users = attrs.get("Authorized_Users")
        if isinstance(users, (list, tuple)):
            users = ",".join(str(u) for u in users)
        first = ("ncpus", "nodect", "select", "place", "walltime")
        return [("owner", attrs.get("Reserve_Owner")), ("name", attrs.get("Reserve_Name")),
                ("queue", attrs.get("queue")), ("ctime", attrs.get("ctime")),
                ("start", attrs.get("reserve_start")), ("end", attrs.get("reserve_end")),
                ("duration", attrs.get("reserve_duration")),
                ("nodes", attrs.get("resv_nodes")), ("Authorized_Users", users),
                *[(f"Resource_List.{k}", res[k]) for k in first if res.get(k) is not None],
                *[(f"Resource_List.{k}", v) for k, v in sorted(res.items())
                  if k not in first and v is not None]]

    def resv_begun(self, resv_id: str, attrs: Mapping[str, Any]) -> None:
        self.record("B", resv_id, self._resv_pairs(attrs), trailing=True)

    def resv_finished(self, resv_id: str, attrs: Mapping[str, Any], requestor: str) -> None:
        """Its period is over: OpenPBS 23.06 writes no F there, but its server's user
        (`requestor`) deleting it: a k when that is its owner, else a K (checked with a
        reservation of root's and one of a user's)."""
        self.record("k" if attrs.get("Reserve_Owner") == requestor else "K", resv_id,
                    [("requestor", requestor)])

    def resv_deleted(self, resv_id: str, requestor: str, by_owner: bool) -> None:
        self.record("k" if by_owner else "K", resv_id, [("requestor", requestor)])
