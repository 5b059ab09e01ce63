"""The engine's state: one SQLite database in the engine's home folder.

Every object is a row of PBS attributes (JSON) keyed by its name: the server, queues, nodes
(vnodes), jobs and reservations, and objects of types plugins register. Every change the
server acknowledges is one transaction (`Store.transaction`), committed before the reply, in
WAL mode with ``synchronous=FULL``: killing the server at any moment loses nothing it has
answered for. The schema carries a version; `migrate` brings an older database forward.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..lifecycle import set_substate
from .errors import PBSE_SYSTEM, PbsError

#: The schema this code reads and writes; `migrate` upgrades older databases step by step.
SCHEMA_VERSION = 3
#: The job attribute kept in its own column (`env`): it may be a megabyte, and most reads
#: (the scheduler's, the counts) do without it.
ENV = "Variable_List"
#: `Store.depend_held` filters in SQL by at most this many named jobs (past it, in Python).
_NAMED_AT_MOST = 64

_MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE objects (
        type  TEXT NOT NULL,            -- server, queue, node, resv, or a plugin's type
        name  TEXT NOT NULL,
        attrs TEXT NOT NULL,            -- PBS attributes as JSON
        PRIMARY KEY (type, name)
    );
    CREATE TABLE jobs (
        seq     INTEGER PRIMARY KEY,     -- the number in <seq>.<server>
        id      TEXT NOT NULL UNIQUE,
        state   TEXT NOT NULL,           -- job_state, duplicated for the scheduler's query
        attrs   TEXT NOT NULL,
        script  TEXT,                    -- the job script, or NULL for `qsub -- cmd`
        runtime TEXT                     -- executor bookkeeping of a running job (JSON)
    );
    CREATE INDEX jobs_state ON jobs (state);
    """,
    # A job's Variable_List in a column of its own, last, so that a read without it never
    # loads its pages. Rows written before keep it in attrs until they are written again.
    2: """
    ALTER TABLE jobs ADD COLUMN env TEXT;   -- the job's Variable_List (JSON), or NULL
    """,
    # What of a job's Resource_List the server wrote rather than was asked for, so that
    # qmove can replace one queue's defaults with another's and qalter can derive a
    # converted job's select again (`Engine._completed`). NULL: nothing (a row written
    # before: all its values count as asked for).
    3: """
    ALTER TABLE jobs ADD COLUMN written TEXT;  -- {"defaults": {...}, "derived": {...}}
    """,
}


#: A row whose attributes are not JSON (written by hand, a bug, a damaged disk) reads as
#: ``{UNREADABLE: its text}`` (a job's also with its ``job_state`` column) instead of
#: failing the read: the engine sets such a row aside (`Engine.set_aside`) and starts.
UNREADABLE = "(unreadable)"


def _loads(text: Any) -> Any:
    # json.loads, not `pbsplug.jsontext`: every row is the server's own json.dumps, in its
    # own database. jsontext's limits are for what another party wrote; a value that
    # passed them when it came in is stored inside a job's or an object's attributes, a
    # level or more deeper, and a row refused would set a job aside that pbsplug wrote.
    # A row that is not JSON (a damaged disk) reads as UNREADABLE all the same.
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):
        return {UNREADABLE: text if isinstance(text, str) else repr(text)}


def _job_attrs(text: Any, state: Any, env: Any = None) -> Any:
    attrs = _loads(text)
    if isinstance(attrs, dict) and UNREADABLE in attrs:
        attrs["job_state"] = str(state)
    elif env is not None and isinstance(attrs, dict):
        # Not a mapping (a damaged row): read as ``{UNREADABLE: text}``, which the value
        # rules refuse (and a job's start), so the job is set aside without its
        # environment, not without everything; written back, it stays the same.
        value = _loads(env)
        attrs[ENV] = value if isinstance(value, dict) else {UNREADABLE: env}
    return attrs


def _counted(state: str, picked: Any) -> dict[str, Any]:
    """A job as `Store.counted_groups` reads it: its state and `Store.COUNTED` attributes
    (SQLite's JSON array of them)."""
    values = _loads(picked)
    values = values if isinstance(values, list) else [None] * len(Store.COUNTED)
    return {**dict(zip(Store.COUNTED, values, strict=False)), "job_state": state}


def _job_row(attrs: dict[str, Any]) -> tuple[str, str | None]:
    """A job's attributes as stored: (attrs without Variable_List, Variable_List or None
    for none). Its substate is made PBS's for its state first (`lifecycle.set_substate`,
    in `attrs` too): every state change passes here."""
    if UNREADABLE not in attrs:
        set_substate(attrs)
    value = attrs.get(ENV)
    rest = {k: v for k, v in attrs.items() if k != ENV}
    return json.dumps(rest, sort_keys=True), (
        None if value is None else json.dumps(value, sort_keys=True))


class StoreError(RuntimeError):
    """The database cannot be used (another version, corrupt, unwritable)."""


class StoreWriteError(PbsError):
    """A change could not be written (the disk is full, an I/O error): PBS's System error
    (15010) with SQLite's reason. Nothing of the change is kept; reads still work, and
    writes work again once the cause is gone."""

    def __init__(self, reason: str):
        super().__init__(PBSE_SYSTEM, f"System error: {reason}")


class Store:
    """The engine's SQLite database. Not shared between threads or processes: each process
    opens its own."""

    UNREADABLE = UNREADABLE

    def __init__(self, path: str | Path):
        self.path = Path(path)
        #: Bumped by every write of an object the jobs are counted against (`COUNTED_BY`)
        #: and every rollback of a change that wrote any row: what the server keeps
        #: derived from them (the limits' tally) is to be made again when it moved.
        self.generation = 0
        #: Bumped by every write of a row (an object's or a job's) and every rollback of a
        #: change that wrote one: a reader that keeps what it worked out from rows (the
        #: suspended jobs waiting for their cpus, `JobControl.poll`) reads again only
        #: when it moved.
        self.changes = 0
        #: The rows written since `take_written` last took them, ``(type, name)``, a job's
        #: as ``("job", id)``; None (every row) past MAX_WRITTEN of them, or after a rollback
        #: of a change that wrote one.
        self.written_rows: set[tuple[str, str]] | None = set()
        self._wrote = False  # the current transaction wrote a row
        # The jobs' changes since `counted_groups` (`counted_moves`): None when not kept.
        self._moves: list[tuple[Any, Any]] | None = None
        self._pick: tuple[str, tuple[str, ...]] = ("", ())  # the query of one job, its states
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
            self.db.execute("PRAGMA foreign_keys=ON")
            self.migrate()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: {exc}") from None
        self._depth = 0
        #: The last write failed (a full disk): `probe_write` checks before costly work.
        self.write_failed = False

    def close(self) -> None:
        self.db.close()

    # -- schema ---------------------------------------------------------------------------------
    def version(self) -> int:
        exists = self.db.execute(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'").fetchone()
        if not exists:
            return 0
        row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    def migrate(self) -> None:
        """Bring the schema to `SCHEMA_VERSION`, one transaction per step."""
        current = self.version()
        if current > SCHEMA_VERSION:
            raise StoreError(f"{self.path}: schema version {current} is newer than this "
                             f"pbsplug ({SCHEMA_VERSION}); upgrade pbsplug")
        for version in range(current + 1, SCHEMA_VERSION + 1):
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for statement in _MIGRATIONS[version].split(";"):
                    if statement.strip():
                        self.db.execute(statement)
                self.db.execute("INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)",
                                (str(version),))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    # -- transactions ---------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """One atomic change; nested uses join the outer transaction."""
        if self._depth:
            self._depth += 1
            try:
                yield self
            finally:
                self._depth -= 1
            return
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            self.write_failed = True
            raise StoreWriteError(str(exc)) from None
        self._depth = 1
        self._wrote = False
        try:
            yield self
            self.db.execute("COMMIT")
            self.write_failed = False
        except sqlite3.Error as exc:
            self._rollback()
            self.write_failed = True
            raise StoreWriteError(str(exc)) from None
        except BaseException:
            self._rollback()
            raise
        finally:
            self._depth = 0

    def _rollback(self) -> None:
        if self._wrote:  # rows the server may have counted are as they were before
            self.generation += 1
            self.changes += 1
            self._moves = None
            self.written_rows = None  # (a reader may have read them before the rollback)
        # SQLite may have rolled back already (a full disk does); a failing rollback must
        # not hide why the change failed.
        if self.db.in_transaction:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def probe_write(self) -> None:
        """After a failed write, raise `StoreWriteError` unless a small change can be written
        now: checked before work that should not be done twice (a job's end hooks) while its
        record cannot be written. Free while writes succeed."""
        if self.write_failed:
            with self.transaction():
                self.set_meta("write_probe", "1")

    # -- meta -----------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

    # -- objects (server, queue, node, resv, plugin types) ----------------------------------------
    def get(self, type: str, name: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT attrs FROM objects WHERE type=? AND name=?",
                              (type, name)).fetchone()
        return _loads(row[0]) if row else None

    @staticmethod
    def unreadable(attrs: Any) -> bool:
        """Whether `attrs` is what a row that is not JSON reads as."""
        return isinstance(attrs, dict) and UNREADABLE in attrs

    def all(self, type: str) -> dict[str, dict[str, Any]]:
        rows = self.db.execute("SELECT name, attrs FROM objects WHERE type=? ORDER BY name",
                               (type,))
        return {name: _loads(attrs) for name, attrs in rows}

    def put(self, type: str, name: str, attrs: dict[str, Any]) -> None:
        self.db.execute("INSERT OR REPLACE INTO objects VALUES (?, ?, ?)",
                        (type, name, json.dumps(attrs, sort_keys=True)))
        self._note_written(type, name)
        self.changes += 1
        self.generation += type in self.COUNTED_BY

    def delete(self, type: str, name: str) -> bool:
        gone = self.db.execute("DELETE FROM objects WHERE type=? AND name=?",
                               (type, name)).rowcount > 0
        self._note_written(type, name)
        self.changes += 1
        self.generation += type in self.COUNTED_BY
        return gone

    # -- jobs -----------------------------------------------------------------------------------
    def next_seq(self) -> int:
        row = self.db.execute("SELECT value FROM meta WHERE key='next_seq'").fetchone()
        seq = int(row[0]) if row else 0
        self.set_meta("next_seq", str(seq + 1))
        return seq

    def add_job(self, seq: int, job_id: str, attrs: dict[str, Any], script: str | None
                ) -> None:
        text, env = _job_row(attrs)
        self.db.execute("INSERT INTO jobs (seq, id, state, attrs, script, env) "
                        "VALUES (?,?,?,?,?,?)",
                        (seq, job_id, attrs.get("job_state", "Q"), text, script, env))
        self._moved(job_id, None)

    def job(self, job_id: str, lean: bool = False) -> dict[str, Any] | None:
        """One job's attributes; `lean` leaves its Variable_List out (`jobs`)."""
        row = self.db.execute(f"SELECT attrs, state, {'NULL' if lean else 'env'} FROM jobs "
                              "WHERE id=?", (job_id,)).fetchone()
        return _job_attrs(*row) if row else None

    def job_script(self, job_id: str) -> str | None:
        row = self.db.execute("SELECT script FROM jobs WHERE id=?", (job_id,)).fetchone()
        return row[0] if row else None

    def jobs(self, states: tuple[str, ...] | None = None, lean: bool = False
             ) -> dict[str, dict[str, Any]]:
        """Jobs by id, in submission order; only those in `states` when given. `lean`
        leaves out their Variable_List (unread: a row written by an older pbsplug may
        still hold it), for the readers that do without it; a lean job written back with
        `put_job(..., keep_env=True)` keeps the stored one."""
        env = "NULL" if lean else "env"
        if states:
            marks = ",".join("?" * len(states))
            rows = self.db.execute(
                f"SELECT id, attrs, state, {env} FROM jobs WHERE state IN ({marks}) "
                "ORDER BY seq", states)
        else:
            rows = self.db.execute(f"SELECT id, attrs, state, {env} FROM jobs ORDER BY seq")
        return {job_id: _job_attrs(attrs, state, vl) for job_id, attrs, state, vl in rows}

    def jobs_among(self, ids: Iterable[str], states: tuple[str, ...]
                   ) -> dict[str, dict[str, Any]]:
        """Of the jobs `ids`, those in `states`, lean (`jobs`): SQLite picks them by their
        state column, so a row in another state is never decoded."""
        marks = ",".join("?" * len(states))
        ids = list(ids)
        out: dict[str, dict[str, Any]] = {}
        for at in range(0, len(ids), 500):  # (under SQLite's bound on a query's values)
            some = ids[at:at + 500]
            rows = self.db.execute(
                f"SELECT id, attrs, state FROM jobs WHERE state IN ({marks}) AND id IN "
                f"({','.join('?' * len(some))})", (*states, *some))
            out.update((job_id, _job_attrs(attrs, state, None)) for job_id, attrs, state in rows)
        return out

    def subjobs(self, array_id: str, lean: bool = True) -> dict[str, dict[str, Any]]:
        """The instantiated subjobs of array `array_id` (``12[].server``), lean (`jobs`)
        unless not `lean`, in index order: their ids lie between ``12[`` and ``12\\``
        (``\\`` follows ``[``), so SQLite reads them from its index of ids, whatever else
        is stored."""
        number = array_id.split("[", 1)[0]
        rows = self.db.execute(
            f"SELECT id, attrs, state, {'NULL' if lean else 'env'} FROM jobs WHERE id > ? "
            "AND id < ? AND id <> ? ORDER BY seq", (f"{number}[", f"{number}\\", array_id))
        return {job_id: _job_attrs(attrs, state, vl) for job_id, attrs, state, vl in rows}

    def subjob_states(self, array_id: str) -> list[tuple[Any, str]]:
        """(array_index, job_state) of each instantiated subjob of array `array_id`, read
        by SQLite without decoding a row in Python: what an array's counts need, cheap for
        thousands of subjobs (`subjobs` has the whole rows)."""
        number = array_id.split("[", 1)[0]
        args = (f"{number}[", f"{number}\\", array_id)
        try:
            return [(index, state) for index, state in self.db.execute(
                "SELECT CASE WHEN json_valid(attrs) THEN json_extract(attrs, '$.array_index') "
                "END, state FROM jobs WHERE id > ? AND id < ? AND id <> ?", args)]
        except sqlite3.Error:  # no JSON functions
            return [(a.get("array_index"), a["job_state"])
                    for a in self.subjobs(array_id).values()]

    def subjobs_in(self, array_id: str, states: tuple[str, ...]) -> int:
        """How many instantiated subjobs of array `array_id` are in `states`, read through
        SQLite's index of job states: it costs what the jobs in `states` are (the running
        ones: a machine's few), not the array's size (`subjob_states` reads them all)."""
        number = array_id.split("[", 1)[0]
        marks = ",".join("?" * len(states))
        try:
            row = self.db.execute(
                f"SELECT count(*) FROM jobs INDEXED BY jobs_state WHERE state IN ({marks}) "
                "AND id > ? AND id < ? AND id <> ?",
                (*states, f"{number}[", f"{number}\\", array_id)).fetchone()
        except sqlite3.Error:  # (no such index: a damaged database) every subjob read
            return sum(state in states for _, state in self.subjob_states(array_id))
        return int(row[0])

    def any_not_over(self, first_seq: int, end_seq: int) -> bool:
        """Whether a job whose seq lies in [`first_seq`, `end_seq`) (an array's subjobs:
        `arrays.subjob_seq`) is in a state other than F and X, read by SQLite in the
        table's own order from the last place down: subjobs end about in the order they
        start, so it stops at one of the last few rather than after every subjob."""
        return self.db.execute(
            "SELECT 1 FROM jobs WHERE seq >= ? AND seq < ? AND state NOT IN ('F', 'X') "
            "ORDER BY seq DESC LIMIT 1", (first_seq, end_seq)).fetchone() is not None

    def waiting_due(self, now: float) -> dict[str, dict[str, Any]]:
        """The jobs in W whose Execution_Time has come (or that have none), lean
        (`jobs`): SQLite picks them, so thousands waiting for later cost little."""
        try:
            rows = self.db.execute(
                "SELECT id, attrs, state, NULL FROM jobs WHERE state = 'W' AND NOT ("
                "json_valid(attrs) AND json_type(attrs, '$.Execution_Time') IN "
                "('integer', 'real') AND json_extract(attrs, '$.Execution_Time') > ?) "
                "ORDER BY seq", (now,)).fetchall()
        except sqlite3.Error:  # no JSON functions
            return {job_id: attrs for job_id, attrs in self.jobs(("W",), lean=True).items()
                    if not isinstance(when := attrs.get("Execution_Time"), (int, float))
                    or when <= now}
        return {job_id: _job_attrs(attrs, state, vl) for job_id, attrs, state, vl in rows}

    def jobs_in_queues(self, queues: list[str], states: tuple[str, ...]
                       ) -> dict[str, dict[str, Any]]:
        """The jobs in `states` whose queue is one of `queues`, lean (`jobs`), in
        submission order: SQLite picks them, so the route queues' few jobs cost little
        beside thousands queued elsewhere."""
        if not queues:
            return {}
        marks, qmarks = ",".join("?" * len(states)), ",".join("?" * len(queues))
        try:
            rows = self.db.execute(
                f"SELECT id, attrs, state, NULL FROM jobs WHERE state IN ({marks}) AND "
                f"json_valid(attrs) AND json_extract(attrs, '$.queue') IN ({qmarks}) "
                "ORDER BY seq", (*states, *queues)).fetchall()
        except sqlite3.Error:  # no JSON functions
            return {job_id: attrs for job_id, attrs in self.jobs(states, lean=True).items()
                    if attrs.get("queue") in queues}
        return {job_id: _job_attrs(attrs, state, vl) for job_id, attrs, state, vl in rows}

    def depend_held(self, naming: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The jobs in H with a system hold and a ``depend`` attribute (those that may wait
        on other jobs), lean (`jobs`): SQLite picks them, so a job's start or end costs
        little beside thousands of jobs held otherwise. With `naming` (a few job ids), only
        those whose depend's text holds one of them: a qdel of one job beside thousands
        waiting on others decodes none of theirs."""
        extra, args = "", []
        if naming is not None and len(naming) <= _NAMED_AT_MOST:
            if not naming:
                return {}
            extra = " AND (" + " OR ".join(
                ["instr(CAST(json_extract(attrs, '$.depend') AS TEXT), ?) > 0"] * len(naming)
            ) + ")"
            args = [str(n) for n in naming]
        try:
            rows = self.db.execute(
                "SELECT id, attrs, state, NULL FROM jobs WHERE state = 'H' AND "
                "json_valid(attrs) AND coalesce(json_extract(attrs, '$.depend'), '') <> '' AND "
                "instr(CAST(json_extract(attrs, '$.Hold_Types') AS TEXT), 's') > 0"
                f"{extra} ORDER BY seq", args).fetchall()
        except sqlite3.Error:  # no JSON functions: the same test, in Python
            return {j: a for j, a in self.jobs(("H",), lean=True).items()
                    if a.get("depend") and "s" in str(a.get("Hold_Types", ""))}
        return {job_id: _job_attrs(attrs, state, vl) for job_id, attrs, state, vl in rows}

    def state_counts(self, states: tuple[str, ...]) -> dict[tuple[str | None, str], int]:
        """How many jobs of each (queue, state), for the jobs in `states`, read without
        decoding a row in Python (a row whose queue cannot be read counts under None)."""
        marks = ",".join("?" * len(states))
        try:
            rows = self.db.execute(
                "SELECT CASE WHEN json_valid(attrs) THEN json_extract(attrs, '$.queue') END, "
                f"state, count(*) FROM jobs WHERE state IN ({marks}) GROUP BY 1, 2",
                states).fetchall()
        except sqlite3.Error:  # no JSON functions
            counts: dict[tuple[str | None, str], int] = {}
            for attrs in self.jobs(states, lean=True).values():
                key = (attrs.get("queue"), attrs["job_state"])
                counts[key] = counts.get(key, 0) + 1
            return counts
        return {(queue if isinstance(queue, str) else None, state): n
                for queue, state, n in rows}

    #: What `counted_groups` reads of each job (the keys of the limits' counts).
    COUNTED = ("queue", "euser", "egroup", "project", "Resource_List",
               "array_indices_remaining")  # (an array counts as its subjobs not begun)
    #: The objects whose attributes hold the limits and the defaults jobs count with.
    COUNTED_BY = frozenset({"server", "queue", "resource"})
    #: The most job changes kept for `counted_moves` (past them, the count is made again).
    MAX_MOVES = 10_000
    #: The most rows `written_rows` notes (past them, a reader reads every row again).
    MAX_WRITTEN = 10_000

    def counted_groups(self, done: tuple[str, ...]) -> list[tuple[dict[str, Any], int]]:
        """The jobs not in a `done` state, grouped: (their state and `COUNTED` attributes,
        how many jobs have exactly those). SQLite picks the attributes out of each row and
        groups them, so Python sees each kind of job once, and no job's environment.
        From then on, every job write is noted for `counted_moves`."""
        marks = ",".join("?" * len(done))
        paths = ", ".join(f"'$.{key}'" for key in self.COUNTED)  # one parse of each row
        self._moves = None
        try:
            rows = self.db.execute(
                f"SELECT state, json_extract(attrs, {paths}) AS picked, count(*) FROM jobs "
                f"WHERE state NOT IN ({marks}) AND json_valid(attrs) GROUP BY state, picked",
                done).fetchall()
        except sqlite3.Error:  # no JSON functions: decode the rows (and note no changes)
            return [({**{k: attrs.get(k) for k in self.COUNTED}, "job_state": state}, 1)
                    for attrs in self.jobs(lean=True).values()
                    if isinstance(attrs, dict) and not self.unreadable(attrs)
                    for state in (attrs.get("job_state"),) if state not in done]
        self._pick = (f"SELECT state, json_extract(attrs, {paths}) FROM jobs WHERE id=? "
                      f"AND state NOT IN ({marks}) AND json_valid(attrs)", done)
        self._moves = []
        return [(_counted(state, picked), count) for state, picked, count in rows]

    def counted_moves(self, stop: bool = False
                      ) -> list[tuple[dict[str, Any] | None, dict[str, Any] | None]] | None:
        """The job writes since `counted_groups` or the last call, each as (before, after),
        read as `counted_groups` reads a job (None: no job, or one done), those that change
        nothing counted left out; None when they were not all kept (a rolled-back change,
        more than `MAX_MOVES`, no `counted_groups` yet): count again. With `stop`, writes
        are no longer noted (until `counted_groups`)."""
        moves = self._moves
        if moves is None:
            return None
        self._moves = None if stop else []
        return [(old and _counted(*old), new and _counted(*new)) for old, new in moves]

    def _note_written(self, type: str, name: str) -> None:
        self._wrote = True
        if self.written_rows is not None:
            self.written_rows.add((type, name))
            if len(self.written_rows) > self.MAX_WRITTEN:
                self.written_rows = None

    def take_written(self) -> set[tuple[str, str]] | None:
        """The rows written since the last call (`written_rows`), noted afresh from now."""
        taken, self.written_rows = self.written_rows, set()
        return taken

    def _picked(self, job_id: str) -> tuple[str, str] | None:
        """What `counted_groups` reads of a job (undecoded), when changes are noted."""
        if self._moves is None:
            return None
        query, done = self._pick
        row = self.db.execute(query, (job_id, *done)).fetchone()
        return (row[0], row[1]) if row else None

    def _moved(self, job_id: str, old: tuple[str, str] | None) -> None:
        """A job row was written (it read as `old` before): noted for `counted_moves`."""
        self._note_written("job", job_id)
        self.changes += 1
        if self._moves is None:
            return
        new = self._picked(job_id)
        if new != old:
            self._moves.append((old, new))
            if len(self._moves) > self.MAX_MOVES:
                self._moves = None

    def unreadable_jobs(self) -> dict[str, dict[str, Any]]:
        """The jobs, in any state, whose attributes are not JSON (see `UNREADABLE`)."""
        query = "SELECT id, attrs, state FROM jobs {} ORDER BY seq"
        try:  # SQLite's json_valid picks the candidates; Python's json decides
            rows = self.db.execute(query.format("WHERE NOT json_valid(attrs)")).fetchall()
        except sqlite3.Error:  # no JSON functions, or a BLOB it refuses
            rows = self.db.execute(query.format("")).fetchall()
        found = {job_id: _job_attrs(attrs, state) for job_id, attrs, state in rows}
        return {job_id: attrs for job_id, attrs in found.items() if self.unreadable(attrs)}

    def put_job(self, job_id: str, attrs: dict[str, Any], keep_env: bool = False) -> None:
        """The job's attributes written, its Variable_List too (none: none is kept); with
        `keep_env` (attributes from a `lean` read), the stored Variable_List stays."""
        text, env = _job_row(attrs)
        old = self._picked(job_id)
        if keep_env and ENV not in attrs:
            self.db.execute("UPDATE jobs SET state=?, attrs=? WHERE id=?",
                            (attrs.get("job_state", "Q"), text, job_id))
        else:
            self.db.execute("UPDATE jobs SET state=?, attrs=?, env=? WHERE id=?",
                            (attrs.get("job_state", "Q"), text, env, job_id))
        self._moved(job_id, old)

    def runtime(self, job_id: str) -> dict[str, Any] | None:
        row = self.db.execute("SELECT runtime FROM jobs WHERE id=?", (job_id,)).fetchone()
        return _loads(row[0]) if row and row[0] else None

    def set_runtime(self, job_id: str, runtime: dict[str, Any] | None) -> None:
        self.db.execute("UPDATE jobs SET runtime=? WHERE id=?",
                        (json.dumps(runtime) if runtime is not None else None, job_id))

    def merge_runtime(self, job_id: str, /, **changes: Any) -> None:
        """`changes` set in the job's runtime, its other keys kept (none stored: just
        `changes`). Read and written in one transaction, the caller's when it has one,
        so that nothing written in between is lost."""
        with self.transaction() as st:
            st.set_runtime(job_id, {**(st.runtime(job_id) or {}), **changes})

    def written(self, job_id: str) -> dict[str, dict[str, Any]] | None:
        """What of the job's Resource_List the server wrote (`Engine._completed`):
        ``{"defaults": {...}, "derived": {...}}``; None when nothing readable is kept (a
        row written by an older pbsplug, or a record that does not read as that)."""
        row = self.db.execute("SELECT written FROM jobs WHERE id=?", (job_id,)).fetchone()
        value = _loads(row[0]) if row and row[0] else None
        if not isinstance(value, dict) or not all(
                isinstance(value.get(key), dict) for key in ("defaults", "derived")):
            return None
        return {"defaults": value["defaults"], "derived": value["derived"]}

    def set_written(self, job_id: str, written: dict[str, dict[str, Any]]) -> None:
        self.db.execute("UPDATE jobs SET written=? WHERE id=?",
                        (json.dumps(written, sort_keys=True), job_id))

    def delete_job(self, job_id: str) -> None:
        old = self._picked(job_id)
        self.db.execute("DELETE FROM jobs WHERE id=?", (job_id,))
        self._moved(job_id, old)
