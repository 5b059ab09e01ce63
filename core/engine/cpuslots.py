"""Which of its vnodes' CPUs each running job holds, as PBS numbers them in a vnode's
``jobs``: ``jobs = 603.vm/0, 604.vm/1, 604.vm/2, 605.vm/3``, one entry a CPU.

OpenPBS 23.06's server (checked on the real one, and its rules read in its source) gives a
vnode one slot per CPU (one at least), numbered from 0. A chunk of a starting job takes, CPU
by CPU, the next free slot from where its last CPU went, the chunk's first CPU looking from
slot 0; when none is left after it, the vnode's last slot, in use or not (a vnode whose
``ncpus`` was lowered under its jobs). A chunk of no CPU is put on slot 0 without taking it.
The slots a job holds are its own until it ends, whatever starts or ends meanwhile: on a
vnode of 6 CPUs where 603 (one CPU) has slot 0, 604 (two) slots 1 and 2 and 605 (one) slot
3, once 604 ended a job of one CPU takes slot 1, and then one of two CPUs slots 2 and 4.
``jobs`` lists the slots in order, and on one slot the job that came last first (a job of
no CPU is listed before the one holding slot 0).

The engine works the slots out as jobs start and end (the server calls `CpuSlots.jobs_on`
at each start and end), in memory: after a restart, the running jobs are given slots again
in the order they started, as PBS's server gives them again in the order it recovers them.
The simulator numbers them with the same rules, job by job as each starts and ends
(`CpuSlots.take`, `CpuSlots.free`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..units import parse_exec_vnode

__all__ = ["CpuSlots"]


class CpuSlots:
    """The slots of the running jobs, kept from one call of `jobs_on` to the next (the
    engine's), or from one `take` and `free` to the next (the simulator's, at each start
    and end: `listed` then gives a vnode's ``jobs`` without going over every job)."""

    def __init__(self) -> None:
        #: job id -> its (vnode, slot, takes the CPU) entries, in the order they were taken.
        self._held: dict[str, list[tuple[str, int, bool]]] = {}
        #: job id -> when it was given its slots (a count): the latest is listed first.
        self._given: dict[str, int] = {}
        #: vnode -> job id -> its (slot, takes the CPU) entries there, in that order.
        self._on: dict[str, dict[str, list[tuple[int, bool]]]] = {}
        self._count = 0

    def jobs_on(self, running: Iterable[tuple[str, str]], ncpus: Mapping[str, int]
                ) -> dict[str, list[str]]:
        """Each vnode's ``jobs`` (``["3.s/0", "4.s/1", "4.s/2"]``), from the running jobs,
        ``(job id, exec_vnode)`` in the order they started, and each vnode's ``ncpus``
        (a vnode not there is left out). A job not seen before is given its slots now; one
        no longer running frees its own."""
        running = list(running)
        now_running = {job_id for job_id, _ in running}
        for job_id in [j for j in self._held if j not in now_running]:
            self.free(job_id)
        for job_id, exec_vnode in running:
            if job_id not in self._held:
                self.take(job_id, parse_exec_vnode(exec_vnode), ncpus)
        return {name: self.listed(name) for name in self._on if name in ncpus}

    def take(self, job_id: str, chunks: Iterable[tuple[str, Mapping[str, object]]],
             ncpus: Mapping[str, int]) -> None:
        """A starting job's slots, chunk by chunk (`chunks`: its parsed exec_vnode; a
        vnode not in `ncpus` is left out)."""
        entries: list[tuple[str, int, bool]] = []
        on = self._on
        for name, res in chunks:
            if name not in ncpus:
                continue
            held = on.setdefault(name, {})
            mine = held.setdefault(job_id, [])
            cpus = _count(res.get("ncpus"))
            if not cpus:
                entries.append((name, 0, False))
                mine.append((0, False))
                continue
            last = max(1, ncpus[name]) - 1
            busy = {slot for job in held.values() for slot, cpu in job if cpu}
            slot = 0
            for _ in range(cpus):
                while slot in busy and slot < last:
                    slot += 1
                busy.add(slot)
                entries.append((name, slot, True))
                mine.append((slot, True))
        self._held[job_id] = entries
        self._count += 1
        self._given[job_id] = self._count

    def free(self, job_id: str) -> None:
        """The slots of a job that ended (none for a job that holds none)."""
        for name in dict.fromkeys(name for name, _, _ in self._held.pop(job_id, ())):
            held = self._on[name]
            del held[job_id]
            if not held:
                del self._on[name]
        self._given.pop(job_id, None)

    def listed(self, name: str) -> list[str]:
        """Vnode `name`'s ``jobs``: the slots in order, on one slot the job that came last
        first (and a job's later entries there first); [] when no job holds one."""
        given = self._given
        entries = sorted((slot, -given[job_id], -i, job_id)
                         for job_id, held in self._on.get(name, {}).items()
                         for i, (slot, _) in enumerate(held))
        return [f"{job_id}/{slot}" for slot, _, _, job_id in entries]


def _count(value: object) -> int:
    """A chunk's ncpus as a count (0 for what is none: a bad value is not the slots')."""
    try:
        return max(0, int(float(str(value)))) if value is not None else 0
    except (TypeError, ValueError, OverflowError):
        return 0
