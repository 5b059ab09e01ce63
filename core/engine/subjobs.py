"""The server's side of job arrays (`arrays` has their forms): submission, the subjobs the
scheduler is shown, a subjob's instantiation when it starts, and the array's end.

The array's row keeps the indices not yet instantiated in ``array_indices_remaining``; a
subjob's row is made when it starts (or when a command needs it), and keeps its own life
from then on, as any job's (hooks, the shepherd, recovery after a restart, qrerun). What
qstat shows of an array (``array_indices_remaining``, ``array_state_count``, the subjobs of
``qstat -t``) is worked out from the array's row and its subjobs' rows when it is asked
for (`Arrays.shown`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import lifecycle
from ..objects import Job
from . import arrays
from .errors import PBSE_BADATVAL, PBSE_MAXARRAYSIZE, PbsError
from .home import LOG_JOB

if TYPE_CHECKING:
    from .server import Engine

#: Subjob states a live array counts as Queued, Running and Exiting.
_QUEUED, _RUNNING, _EXITING = ("Q", "H", "W", "T"), ("R",), ("E",)
#: The most subjobs of one array a scheduling cycle is shown (with the array's
#: ``max_run_subjobs`` lower still): on one machine no cycle starts more jobs than it has
#: CPUs, so a 10,000-index array costs a cycle what its next few subjobs cost.
FEED_AT_MOST = 256
#: The most bytes of subjobs' environments (Variable_List) one qstat answer carries; the
#: subjobs past it are shown without one. Every subjob of an array has the array's
#: environment: without a bound, one submission (1 MiB of environment, 10,000 indices)
#: made a ``qstat -f -t`` answer of 10 GiB in the root server's memory. 64 MiB is what 64
#: ordinary jobs of the largest environment cost one answer.
MAX_SHOWN_ENV = 64 << 20


class EnvBudget:
    """What is left of `MAX_SHOWN_ENV` for one answer (`Arrays.shown`)."""

    def __init__(self, left: int = MAX_SHOWN_ENV):
        self.left = left
        self._sizes: dict[int, int] = {}  # (an array's environment, shared: sized once)

    def take(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """`attrs`, or a copy without its Variable_List once the budget is spent."""
        env = attrs.get("Variable_List")
        if not isinstance(env, dict):
            return attrs
        size = self._sizes.get(id(env))
        if size is None:
            size = sum(len(str(k)) + len(str(v)) + 6 for k, v in env.items())
            self._sizes[id(env)] = size
        if size > self.left:
            self.left = 0
            return {k: v for k, v in attrs.items() if k != "Variable_List"}
        self.left -= size
        return attrs


class Arrays:
    """Job arrays in an `Engine`."""

    def __init__(self, engine: Engine):
        self.engine = engine
        #: What `feed` made of each array at its last cycle: (the array's row, how many
        #: subjobs, those subjobs' rows), given again while the row and room stay the same.
        self._fed: dict[str, tuple[dict[str, Any], int, dict[str, dict[str, Any]]]] = {}

    # -- submission ------------------------------------------------------------------------
    def check_submitted(self, attrs: dict[str, Any]) -> arrays.Spec | None:
        """An array's submission (after queuejob, as PBS checks it): its size against the
        server's and its queue's ``max_array_size`` (15107, `check_size`), and it must be
        rerunnable (PBS's qsub refuses ``-r n``; a raw request gets 15014). None for an
        ordinary job."""
        submitted = attrs.get("array_indices_submitted")
        if submitted is None:
            return None
        try:
            spec = arrays.parse_submitted(submitted)
        except ValueError:
            raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value "
                           "array_indices_submitted") from None
        limit = self.engine.server_attrs().get("max_array_size", arrays.MAX_ARRAY_SIZE)
        try:
            limit = int(limit)
        except (TypeError, ValueError):
            limit = arrays.MAX_ARRAY_SIZE
        if len(spec.indices) > limit:
            raise PbsError(PBSE_MAXARRAYSIZE)
        self.check_size(attrs, str(attrs.get("queue") or ""))
        if attrs.get("Rerunable") is False:
            raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value Rerunable: "
                           "an array job must be rerunnable")
        return spec

    def check_size(self, attrs: dict[str, Any], queue: str, obj: str | None = None) -> None:
        """Array `attrs` in `queue`: no more indices than the queue's ``max_array_size``
        when it has one, as OpenPBS 23.06 (checked): 15107 as the server's limit, the
        smaller of the two refusing (a route queue's at qsub too; 0 or less refuses
        every array)."""
        limit = (self.engine.store.get("queue", queue) or {}).get("max_array_size")
        if limit is None or attrs.get("array_indices_submitted") is None:
            return
        try:
            count = len(arrays.parse_submitted(attrs["array_indices_submitted"]).indices)
            too_many = count > int(limit)
        except (TypeError, ValueError):
            return  # (no array's indices, or no number: nothing to hold it to)
        if too_many:
            raise PbsError(PBSE_MAXARRAYSIZE, obj=obj)

    @staticmethod
    def submitted(attrs: dict[str, Any], spec: arrays.Spec) -> None:
        """The array's own attributes, as PBS sets them at submission."""
        attrs["array"] = True
        attrs["array_indices_remaining"] = arrays.format_indices(spec.indices, spec.step)
        attrs["array_state_count"] = arrays.state_count(len(spec.indices), 0, 0, 0)

    # -- reading ---------------------------------------------------------------------------
    def remaining(self, attrs: dict[str, Any]) -> list[int]:
        """The indices of array `attrs` not instantiated yet."""
        return [index for run in self.runs(attrs) for index in run]

    @staticmethod
    def runs(attrs: dict[str, Any]) -> list[range]:
        """`remaining` as its runs, not expanded (`arrays.parse_runs`)."""
        try:
            return arrays.parse_runs(attrs.get("array_indices_remaining"))
        except ValueError:
            return []

    def shown(self, array_job: str, attrs: dict[str, Any], subjobs: bool = False,
              lean: bool = True, budget: EnvBudget | None = None
              ) -> dict[str, dict[str, Any]]:
        """Array `array_job` as qstat shows it: its ``array_indices_remaining`` (the queued
        indices, instantiated or not) and ``array_state_count``; with `subjobs`, each of its
        subjobs after it, in index order (a row where there is one, else made up from the
        array: Q while its index remains, X once it is gone, F once the array is); their
        Variable_List too unless `lean`, while `budget` (one per answer) lasts."""
        store = self.engine.store
        # (the counts from SQLite alone; whole rows only for the subjobs shown)
        rows = store.subjobs(array_job, lean=lean) if subjobs else {}
        pending = set(self.remaining(attrs))
        by_index = {int(a["array_index"]): (j, a) for j, a in rows.items()
                    if isinstance(a, dict) and isinstance(a.get("array_index"), int)}
        indexed = {int(i): state for i, state in store.subjob_states(array_job)
                   if isinstance(i, int)}
        states = list(indexed.values())
        queued_rows = {i for i, state in indexed.items() if state in _QUEUED}
        try:
            spec = arrays.parse_submitted(attrs.get("array_indices_submitted"))
        except ValueError:
            return {array_job: attrs}
        out = dict(attrs)
        done = attrs.get("job_state") in ("F", "X")
        if done:  # (Expired: the indices with no row, never begun or purged: PBS's)
            never = len([i for i in spec.indices if i not in indexed])
            out["array_state_count"] = arrays.state_count(0, 0, 0, never)
            out["array_indices_remaining"] = "-"
        else:
            queued = len(pending) + len(queued_rows)
            running = sum(s in _RUNNING for s in states)
            exiting = sum(s in _EXITING for s in states)
            out["array_state_count"] = arrays.state_count(
                queued, running, exiting, len(spec.indices) - queued - running - exiting)
            out["array_indices_remaining"] = arrays.format_indices(
                pending | queued_rows, spec.step)
        shown = {array_job: out}
        if subjobs:
            budget = budget if budget is not None else EnvBudget()
            for index in spec.indices:
                if index in by_index:
                    sub, sub_attrs = by_index[index]
                    if not done and sub_attrs.get("job_state") == "F":
                        sub_attrs = {**sub_attrs, "job_state": "X"}  # (PBS's, checked)
                    shown[sub] = budget.take(sub_attrs)
                else:
                    state = "F" if done else ("Q" if index in pending else "X")
                    shown[arrays.subjob_id(array_job, index)] = budget.take(self.made_up(
                        array_job, attrs, index, state))
        return shown

    def as_shown(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """A job's `attrs` as qstat shows it when named: a subjob over (F) while its array
        runs on is X, F once its array is over, as OpenPBS 23.06's ``qstat``, ``-x`` and
        ``-f`` show it (checked); any other job's as they are."""
        array_job = attrs.get("array_id")
        if attrs.get("job_state") != "F" or not isinstance(array_job, str):
            return attrs
        array = self.engine.store.job(array_job, lean=True)
        if array is None or array.get("job_state") in ("F", "X"):
            return attrs
        return {**attrs, "job_state": "X"}

    @staticmethod
    def made_up(array_job: str, attrs: dict[str, Any], index: int, state: str
                ) -> dict[str, Any]:
        """A subjob with no row of its own (not begun, deleted before it began, or purged
        by a qdel -x) as qstat shows it: one queued with its array's comment and
        Exit_status; one gone (X, F) with its array's stime, substate and Exit_status (and
        obittime once the array is over) and the comment ``Subjob finished``, as OpenPBS
        23.06.06 showed it (measured)."""
        sub = arrays.subjob_attrs(attrs, array_job, index, state)
        if state in ("X", "F"):
            sub.update((k, attrs[k]) for k in ("stime", "substate", "Exit_status",
                                               "obittime") if k in attrs)
            sub["comment"] = "Subjob finished"
        else:  # (one not begun shows its array's comment and Exit_status: PBS's)
            sub.update((k, attrs[k]) for k in ("comment", "Exit_status") if k in attrs)
        return sub

    def subjob(self, sub_id: str, array_job: str, index: int) -> dict[str, Any] | None:
        """Subjob `sub_id` as stored, or made up from its array; None when the array has
        no such index (or there is no such array)."""
        stored = self.engine.store.job(sub_id)
        if stored is not None:
            return stored
        attrs = self.engine.store.job(array_job)
        if attrs is None or not attrs.get("array"):
            return None
        try:
            spec = arrays.parse_submitted(attrs.get("array_indices_submitted"))
        except ValueError:
            return None
        if index not in spec.indices:
            return None
        done = attrs.get("job_state") in ("F", "X")
        pending = any(index in run for run in self.runs(attrs))
        state = "F" if done else ("Q" if pending else "X")
        return self.made_up(array_job, attrs, index, state)

    # -- scheduling ------------------------------------------------------------------------
    def feed(self, rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """A cycle's jobs (`rows`: queued, begun, running, exiting) with each array replaced
        by the subjobs it may start now: its next indices not yet instantiated, at most
        `FEED_AT_MOST` and what its ``max_run_subjobs`` leaves, taken from the runs of its
        ``array_indices_remaining`` without expanding the rest. An array that is held,
        waiting or finished starts none. Instantiated subjobs are rows of their own in
        `rows` already. An array whose row and room are as at the last cycle gives the
        same subjob rows again (the scheduler's `Feed` then finds them unchanged at once)."""
        out: dict[str, dict[str, Any]] = {}
        running: dict[str, int] = {}
        for attrs in rows.values():
            if attrs.get("array_id") and attrs.get("job_state") in ("R", "E"):
                key = str(attrs["array_id"])
                running[key] = running.get(key, 0) + 1
        live = []
        for job_id, attrs in rows.items():
            if attrs.get("array"):
                if attrs.get("job_state") in ("Q", "B"):
                    live.append((job_id, attrs))
            elif attrs.get("job_state") != "B":
                out[job_id] = attrs
        fed = {}
        for job_id, attrs in live:
            room = FEED_AT_MOST
            if attrs.get("max_run_subjobs") is not None:
                try:
                    room = min(room, int(attrs["max_run_subjobs"]) - running.get(job_id, 0))
                except (TypeError, ValueError):
                    pass
            room = max(room, 0)
            kept = self._fed.get(job_id)
            if kept is not None and kept[1] == room and kept[0] == attrs:
                subs = kept[2]
            else:
                subs = {arrays.subjob_id(job_id, index): arrays.subjob_attrs(
                            attrs, job_id, index)
                        for index in arrays.first_indices(self.runs(attrs), room)}
            fed[job_id] = (attrs, room, subs)
            out.update(subs)
        self._fed = fed
        return out

    def over_limit(self, sub_id: str) -> bool:
        """Whether starting subjob `sub_id` now would pass its array's
        ``max_run_subjobs`` (its array may have started others since the cycle was
        planned): its running subjobs counted by SQLite among the running jobs, whatever
        the array's size."""
        named = arrays.named(sub_id)
        if named is None:
            return False
        array_job = arrays.array_id(named.number, sub_id.split(".", 1)[-1])
        array = self.engine.store.job(array_job, lean=True)
        if not array or array.get("max_run_subjobs") is None:
            return False
        running = self.engine.store.subjobs_in(array_job, ("R", "E"))
        try:
            return running >= int(array["max_run_subjobs"])
        except (TypeError, ValueError):
            return False

    def instantiate(self, sub_id: str, held_too: bool = False) -> dict[str, Any] | None:
        """Subjob `sub_id`'s row made from its array (one transaction: its row, and its
        index out of the array's ``array_indices_remaining``; the array begun, ``B``, at
        its first); its attributes, or None when its array cannot start it (gone, held
        unless `held_too`: qrun's, as OpenPBS 23.06 runs a held array's subjob, the index
        not remaining)."""
        named = arrays.named(sub_id)
        if named is None or not named.single or named.first is None:
            return None
        index = named.first
        store = self.engine.store
        array_job = arrays.array_id(named.number, sub_id.split(".", 1)[1])
        parent = store.job(array_job)
        if parent is None or parent.get("job_state") not in (
                ("Q", "B", "H", "W") if held_too else ("Q", "B")):
            return None
        runs = self.runs(parent)
        if not any(index in run for run in runs):
            return None
        spec = arrays.parse_submitted(parent["array_indices_submitted"])
        attrs = arrays.subjob_attrs(parent, array_job, index)
        now = int(self.engine.clock())
        seq = arrays.subjob_seq(int(named.number), spec.indices.index(index))
        begins = parent.get("stime") is None
        with store.transaction() as st:
            st.add_job(seq, sub_id, attrs, st.job_script(array_job))
            runtime = st.runtime(array_job) or {}
            if "argv" in runtime:
                st.set_runtime(sub_id, {"argv": runtime["argv"]})
            written = st.written(array_job)
            if written is not None:
                st.set_written(sub_id, written)
            parent["array_indices_remaining"] = arrays.without_index(runs, index, spec.step)
            if begins:  # (its first subjob: the array has begun)
                parent.update(stime=now, comment=f"Job Array Began at {lifecycle.when(now)}")
            if parent["job_state"] == "Q":
                parent.update(job_state="B", substate=70)
            parent["mtime"] = now
            st.put_job(array_job, parent)
        if begins:  # (its S before its first subjob's, as PBS writes them)
            self.engine.accounting.array_begun(array_job, parent)
        return store.job(sub_id)

    # -- the end ---------------------------------------------------------------------------
    def subjob_over(self, sub_id: str, attrs: dict[str, Any]) -> None:
        """Subjob `sub_id` left the queue for good (it ended, or was deleted): its array
        ends with it when nothing of it is left to run. Until then, one that ran leaves
        its Exit_status on the array, 0 or 1 as it exited 0 or not, as OpenPBS 23.06
        shows a running array's (checked: 1 after a subjob that exited 3, 0 again after
        the next one exited 0); the array ends with it (`end_if_over`)."""
        array_job = attrs.get("array_id")
        if not isinstance(array_job, str):
            return
        status = attrs.get("Exit_status")
        store = self.engine.store
        if attrs.get("stime") is not None and isinstance(status, int) and \
                lifecycle.began(store.runtime(sub_id)):  # (not one its begin hooks deleted)
            array = store.job(array_job)
            shown = 0 if status == 0 else 1
            if array is not None and array.get("job_state") not in ("F", "X") and \
                    array.get("Exit_status") != shown:
                array["Exit_status"] = shown
                with store.transaction() as st:
                    st.put_job(array_job, array)
        self.end_if_over(array_job)

    def end_if_over(self, array_job: str, deleted_by: str | None = None) -> None:
        """Array `array_job` finishes when no index remains and none of its subjobs is
        queued or running: ``F``, its Exit_status that of its subjob that ended last, 0
        or 1 (`subjob_over`; its E record's too: OpenPBS 23.06.06's, measured), its
        comment ``Job Array Began at <when> and finished`` (``failed`` when a subjob that
        ran did not exit 0, substate 93; ``terminated`` after a qdel of the array), as
        OpenPBS 23.06 ends it (checked); jobobit fires for it once. After a qdel
        -x of the array, its history and its subjobs' go then (`Engine._purge_at_end`)."""
        store = self.engine.store
        parent = store.job(array_job)
        if parent is None or parent.get("job_state") in ("F", "X"):
            return
        if any(self.runs(parent)) or self._any_not_over(array_job):
            return
        rows = store.subjobs(array_job)
        now = int(self.engine.clock())
        runtime = store.runtime(array_job) or {}
        # (a subjob deleted makes it `terminated` too; one purged counts for nothing:
        # OpenPBS 23.06.06's, measured)
        deleted = deleted_by or runtime.get("deleted_by") or any(
            a.get("substate") == 91 for a in rows.values())
        # (a subjob that ran and did not exit 0; not one its begin hooks deleted, no S)
        failed = any(a.get("stime") is not None and a.get("Exit_status") not in (0, None) and
                     lifecycle.began(store.runtime(sub)) for sub, a in rows.items())
        parent.update(job_state="F", mtime=now, obittime=now, array_indices_remaining="-")
        parent["substate"] = 91 if deleted else (93 if failed else 92)
        if parent.get("stime") is not None:
            parent.setdefault("Exit_status", 0)  # (its last subjob's, set as it ended)
            how = "terminated" if deleted else ("failed" if failed else "finished")
            parent["comment"] = f"Job Array Began at {lifecycle.when(parent['stime'])} and {how}"
        else:
            parent.pop("comment", None)
        with store.transaction() as st:
            st.put_job(array_job, parent)
        self.engine.accounting.array_ended(array_job, parent)
        self.engine.log(LOG_JOB, "Job", array_job,
                        f"Job Array {'deleted' if deleted else 'finished'}")
        self.engine._event("jobobit", job=Job(array_job, parent))
        self.engine._resolve_depend([array_job])  # (the jobs waiting on the array)
        purged_by = runtime.get("purge")
        if isinstance(purged_by, str):  # (a qdel -x of the array: `Engine._purge_at_end`)
            self.engine._purge_array(purged_by, array_job)

    def _any_not_over(self, array_job: str) -> bool:
        """Whether a subjob of `array_job` is neither finished nor expired: every subjob's
        end asks, so its rows (their seqs, `arrays.subjob_seq`) are looked at from the last
        place down, not read every one."""
        number = array_job.split("[", 1)[0]
        if not number.isdigit():  # (no array's id: every subjob read)
            return any(state not in ("F", "X")
                       for _, state in self.engine.store.subjob_states(array_job))
        return self.engine.store.any_not_over(arrays.subjob_seq(int(number), 0),
                                              arrays.subjob_seq(int(number) + 1, 0))

    def delete(self, caller_name: str, array_job: str, attrs: dict[str, Any],
               indices: list[int] | None, purge: bool = False,
               marked: Mapping[str, int] | None = None) -> list[str]:
        """qdel of array `array_job` whole (`indices` None) or of some of its indices:
        those not instantiated are gone at once (``X``, then ``F`` with the array); returns
        the instantiated subjobs still to delete one by one (running ones are killed and
        end as any job). The array's deletion (``deleted_by``, its first deleter's kept)
        and a `purge` of it whole (qdel -x: its history goes once it is over,
        `end_if_over`) are one write: the -x in a write of its own after the array's D
        record failed on a full disk with the deletion written, no subjob reached. The
        running subjobs whose execjob_preterm chains are to come, `marked` (subjob -> the
        uid of who asked), are marked in that write to be deleted at the next start
        (``delete_at_start``, as `Engine.stop_chains` marks them), cleared as each chain
        is over: a server killed during the chains left them running on for ever."""
        pending = self.remaining(attrs)
        spec = arrays.parse_submitted(attrs["array_indices_submitted"])
        gone = set(pending) if indices is None else set(pending) & set(indices)
        rows = self.engine.store.subjobs(array_job)
        wanted = None if indices is None else set(indices)
        todo = [j for j, a in rows.items() if a.get("job_state") not in ("F", "X")
                and (wanted is None or a.get("array_index") in wanted)]
        if gone or indices is None:
            attrs["array_indices_remaining"] = arrays.format_indices(
                [i for i in pending if i not in gone], spec.step)
            attrs["mtime"] = int(self.engine.clock())
        if gone or indices is None or marked:
            with self.engine.store.transaction() as st:
                if gone or indices is None:
                    st.put_job(array_job, attrs)
                if indices is None:
                    runtime = {"deleted_by": caller_name, **(st.runtime(array_job) or {})}
                    if purge:
                        runtime["purge"] = caller_name
                    st.set_runtime(array_job, runtime)
                for sub, uid in (marked or {}).items():
                    st.merge_runtime(sub, delete_at_start=uid)
        return todo

