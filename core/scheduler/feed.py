"""What a caller that reads its state afresh every cycle keeps, so that its scheduler's cycle
still costs only what changed (docs/scheduler.md, "Between cycles").

The local engine reads its jobs, queues and vnodes from its database before each cycle, and a
scheduler process gets its slice from the server; both would hand the scheduler new objects
every time, and a scheduler given new objects reparses every job and vnode and books every
running job again. A `Feed` compares each row with the one it was given last: an unchanged row
keeps its object, and the changed ones are noted in the `JobLog` and `VnodeLog` that the
`Snapshot` carries. The scheduler then reads only those, and decides exactly as it would from
new objects (tests/scheduler/test_feed.py).

A row is a mapping of attributes as stored (plain data); the caller does not change a row
after giving it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..objects import Job, PbsObject, Queue, Reservation, Server, Vnode
from .model import JobLog, Snapshot, VnodeLog


def row(obj: PbsObject) -> dict[str, Any]:
    """An object's attributes as plain data, without its name or id: a row to feed."""
    return PbsObject.to_dict(obj)


class Feed:
    """One caller's jobs, queues and vnodes, as objects kept while their rows stay the same."""

    def __init__(self) -> None:
        self.job_log = JobLog()
        self.vnode_log = VnodeLog()
        #: The objects a snapshot carries: these dicts are the same from cycle to cycle.
        self.jobs: dict[str, Job] = {}
        self.queues: dict[str, Queue] = {}
        self.vnodes: dict[str, Vnode] = {}
        self.server = Server("server")
        self._server_key: tuple | None = None  # (name, row) it was made from
        self._rows: dict[type, dict[str, Mapping[str, Any]]] = {Job: {}, Queue: {}, Vnode: {}}

    def set_server(self, name: str, row: Mapping[str, Any]) -> None:
        """The server's name and attributes. A server that changed is a new object, which
        makes the scheduler start afresh (its defaults shape every job)."""
        if self._server_key != (name, row):
            self.server = Server(name, row)
            self._server_key = (name, row)

    def set_jobs(self, rows: Mapping[str, Mapping[str, Any]]) -> None:
        """Every job the scheduler is to see (id -> attributes)."""
        known = self._rows[Job]
        self.change_jobs({job_id: row for job_id, row in rows.items()
                          if known.get(job_id) != row},
                         [job_id for job_id in self.jobs if job_id not in rows])

    def change_jobs(self, changed: Mapping[str, Mapping[str, Any]],
                    gone: Iterable[str] = ()) -> None:
        """The jobs new or changed since the last call (id -> attributes), and those gone."""
        log, known = self.job_log, self._rows[Job]
        for job_id in gone:
            old = self.jobs.pop(job_id, None)
            if old is not None:
                log.remove(old)
                del known[job_id]
        for job_id, row in changed.items():
            old = self.jobs.get(job_id)
            if old is not None and known[job_id] == row:
                continue
            job = Job(job_id, row)  # first: a row it cannot read changes nothing here
            if old is not None:
                log.remove(old)
            self.jobs[job_id] = job
            known[job_id] = row
            log.add(job)

    def set_queues(self, rows: Mapping[str, Mapping[str, Any]]) -> None:
        """Every queue (name -> attributes). A queue that changed is a new object, which
        makes the scheduler start afresh (a queue's defaults and partition shape its jobs)."""
        self._set(Queue, self.queues, rows, None)

    def set_vnodes(self, rows: Mapping[str, Mapping[str, Any]]) -> None:
        """Every vnode (name -> attributes)."""
        self._set(Vnode, self.vnodes, rows, self.vnode_log)

    def _set(self, kind: type, objects: dict[str, Any], rows: Mapping[str, Mapping[str, Any]],
             log: VnodeLog | None) -> None:
        known = self._rows[kind]
        for name in [name for name in objects if name not in rows]:
            del objects[name], known[name]
            if log is not None:
                log.changed(name)
        for name, row in rows.items():
            if known.get(name) != row:
                objects[name] = kind(name, row)
                known[name] = row
                if log is not None:
                    log.changed(name)

    def snapshot(self, reservations: list[Reservation],
                 resource_types: Mapping[str, str] | None = None,
                 host_resources: frozenset[str] = frozenset()) -> Snapshot:
        """The snapshot of what the feed holds, with its logs."""
        return Snapshot(self.server, self.queues, self.vnodes, self.jobs.values(), reservations,
                        vnodes_version=self.vnode_log.version, job_log=self.job_log,
                        vnode_log=self.vnode_log, resource_types=dict(resource_types or {}),
                        host_resources=frozenset(host_resources))

    def read(self, mark: int) -> None:
        """The scheduler fed has read the job log up to `mark` (`job_log.mark` before its
        cycle): the entries before are dropped."""
        self.job_log.forget(mark)
