"""Small builders for scheduler scenarios."""

from __future__ import annotations

from pbsplug import Job, Queue, Reservation, Server, Vnode
from pbsplug.scheduler import Snapshot

NOW = 1_800_000_000.0
HOUR = 3600


def vnode(name: str, ncpus: int = 4, mem: str = "16gb", state: str = "free",
          sharing: str | None = None, host: str | None = None, **extra) -> Vnode:
    avail = {"ncpus": ncpus, "mem": mem, "host": host or name}
    avail.update(extra.pop("resources", {}))
    attrs = {"state": state, "resources_available": avail, **extra}
    if sharing:
        attrs["sharing"] = sharing
    return Vnode(name, attrs)


_seq = iter(range(1, 10**9))


def job(select: str = "1:ncpus=1", walltime: str | None = "01:00:00", *, id: str | None = None,
        queue: str = "workq", place: str | None = None, state: str = "Q",
        qtime: float | None = None, exec_vnode: str | None = None, stime: float | None = None,
        **extra) -> Job:
    seq = next(_seq)
    res = {"select": select}
    if walltime is not None:
        res["walltime"] = walltime
    if place:
        res["place"] = place
    res.update(extra.pop("resources", {}))
    attrs = {"queue": queue, "job_state": state, "Resource_List": res,
             "qtime": qtime if qtime is not None else NOW - 1000 + seq, **extra}
    if exec_vnode:
        attrs["exec_vnode"] = exec_vnode
        attrs["stime"] = stime if stime is not None else NOW
    return Job(id or f"{seq}.srv", attrs)


def running(select: str, exec_vnode: str, walltime: str = "01:00:00", started: float = NOW,
            **kw) -> Job:
    return job(select, walltime, state="R", exec_vnode=exec_vnode, stime=started, **kw)


def snapshot(vnodes, jobs, queues=None, reservations=(), server=None) -> Snapshot:
    queues = queues or {"workq": Queue("workq", {"queue_type": "execution", "started": True})}
    return Snapshot(server or Server("srv"), dict(queues), {v.name: v for v in vnodes},
                    list(jobs), list(reservations))


def resv(name: str, select: str, start: float, end: float, state: str = "UNCONFIRMED",
         **extra) -> Reservation:
    return Reservation(name, {"Resource_List": {"select": select}, "reserve_start": start,
                              "reserve_end": end, "reserve_state": state, **extra})
