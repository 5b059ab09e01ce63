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
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..units import parse_exec_vnode

__all__ = ["CpuSlots"]


class CpuSlots:
    """The slots of the running jobs, kept from one call of `jobs_on` to the next."""

    def __init__(self) -> None:
        #: job id -> its (vnode, slot, takes the CPU) entries, in the order they were taken.
        self._held: dict[str, list[tuple[str, int, bool]]] = {}
        #: job id -> when it was given its slots (a count): the latest is listed first.
        self._given: dict[str, int] = {}
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
            del self._held[job_id]
            del self._given[job_id]
        taken: dict[str, set[int]] = {}
        for entries in self._held.values():
            for name, slot, cpu in entries:
                if cpu:
                    taken.setdefault(name, set()).add(slot)
        for job_id, exec_vnode in running:
            if job_id not in self._held:
                self._held[job_id] = self._take(exec_vnode, ncpus, taken)
                self._count += 1
                self._given[job_id] = self._count
        listed: dict[str, list[tuple[int, int, int, str]]] = {}
        for job_id, entries in self._held.items():
            for i, (name, slot, _) in enumerate(entries):
                if name in ncpus:  # (later entries of one job on one slot come first too)
                    listed.setdefault(name, []).append((slot, -self._given[job_id], -i,
                                                        job_id))
        return {name: [f"{job_id}/{slot}" for slot, _, _, job_id in sorted(entries)]
                for name, entries in listed.items()}

    @staticmethod
    def _take(exec_vnode: str, ncpus: Mapping[str, int], taken: dict[str, set[int]]
              ) -> list[tuple[str, int, bool]]:
        """The slots a starting job's `exec_vnode` takes, chunk by chunk (`taken` grows)."""
        entries: list[tuple[str, int, bool]] = []
        for name, res in parse_exec_vnode(exec_vnode):
            if name not in ncpus:
                continue
            cpus = _count(res.get("ncpus"))
            if not cpus:
                entries.append((name, 0, False))
                continue
            last = max(1, ncpus[name]) - 1
            busy = taken.setdefault(name, set())
            slot = 0
            for _ in range(cpus):
                while slot in busy and slot < last:
                    slot += 1
                busy.add(slot)
                entries.append((name, slot, True))
        return entries


def _count(value: object) -> int:
    """A chunk's ncpus as a count (0 for what is none: a bad value is not the slots')."""
    try:
        return max(0, int(float(str(value)))) if value is not None else 0
    except (TypeError, ValueError, OverflowError):
        return 0
