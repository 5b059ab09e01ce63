"""Advance and standing reservations: pbs_rsub, pbs_rstat, pbs_ralter and pbs_rdel, and a
reservation's life.

A reservation ``R<seq>.<server>`` (the number comes from the jobs' sequence, as in PBS) asks
for ``select``/``place`` resources over ``[reserve_start, reserve_end)``; a standing one
(``pbs_rsub -r``, `recurrence`) of more than one occurrence is ``S<seq>.<server>``, its
window the current occurrence's. Its states, stored under PBS's names in
``reserve_state``:

``RESV_UNCONFIRMED``
    after pbs_rsub, once the resvsub hooks accepted it; its queue ``R<seq>`` is made at
    once, disabled and stopped (`new_queue`). The next scheduling cycle either confirms it
    on vnodes free for its whole window or denies it; a denied reservation is deleted with
    its queue and the reason logged (PBS mails its owner).
``RESV_CONFIRMED``
    the resv_confirm hooks accepted the scheduler's ``resv_nodes``; the queue is enabled
    (still stopped), so its owner can submit jobs into it ahead of time. A resv_confirm
    reject denies the reservation.
``RESV_RUNNING``
    from ``reserve_start``: resv_begin fires, the queue starts, and its jobs run on the
    reservation's vnodes (which show ``resv-exclusive`` where PBS's would:
    `resv_exclusive`); what it holds counts in their resources_assigned
    (`with_resv_assigned`).
``RESV_BEING_DELETED``
    at ``reserve_end`` (or on pbs_rdel): resv_end fires for a reservation that had begun
    (on pbs_rdel, for any but an unconfirmed one, as PBS's server fires it),
    jobs still in the queue are deleted (running ones killed), the queue is disabled and
    stopped, the vnodes' ``last_used_time`` is set; it stays listed while its running jobs
    go, then leaves pbs_rstat with its queue. A standing one's occurrence that is not its
    last ends otherwise: its running jobs are killed and it is confirmed for the next
    (`Reservations._next_occurrence`).

Who may do what: anybody may submit a reservation; its owner or an operator or manager may
alter or delete it; everybody sees them all (PBS's default). Who may submit jobs to its
queue is its ``Authorized_Users`` (pbs_rsub ``-U``; the owner is put in where the list's
order puts it, unless there), ``Authorized_Groups`` (``-G``) and ``Authorized_Hosts``
(``-H``): they are the queue's ``acl_users``, ``acl_groups`` and ``acl_hosts``, each
switched on (as OpenPBS 23.06 makes them, in its lists' order: `acl.ordered`), and the
queue's ACLs decide from then on, as any queue's (a manager may change them).
"""

from __future__ import annotations

import copy
import grp
import pwd
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import units, values
from ..objects import Job, Reservation
from ..scheduler import DEFAULT_PARTITION
from ..scheduler.model import job_select, resource_amount, schedselect
from ..units import parse_exec_vnode
from . import acl, manager, recurrence
from .errors import (
    PBSE_BADATVAL,
    PBSE_HOOKERROR,
    PBSE_PERM,
    PBSE_R_UID,
    PbsError,
    check_resources,
    each,
    refuse_if_stopped,
    stopped,
)
from .home import LOG_ADMIN, LOG_DEBUG, LOG_ERROR, LOG_RESV
from .store import Store, StoreWriteError

if TYPE_CHECKING:
    from ..scheduler import ResvDecision
    from .server import Caller, Engine

PBSE_UNKRESVID = 15084
PBSE_BADSTATE = 15016
PBSE_RESV_NOT_EMPTY = 15178   # a running reservation's start, with jobs in its queue
PBSE_SELECT_NOT_SUBSET = 15183
PBSE_RESVAUTH = 15094   # the server's resv_enable is false
PBSE_BADTSPEC = 15086

#: A reservation's access lists and its queue's ACL each becomes, with its switch.
ACCESS_LISTS = {"Authorized_Users": ("acl_users", "acl_user_enable"),
                "Authorized_Groups": ("acl_groups", "acl_group_enable"),
                "Authorized_Hosts": ("acl_hosts", "acl_host_enable")}
#: What pbs_rsub sends; anything else in a request is PBS's 15002.
_RSUB_ATTRIBUTES = frozenset({"Reserve_Name", "reserve_start", "reserve_end", "reserve_duration",
                              "Resource_List", "Variable_List", "partition", "reserve_rrule",
                              *ACCESS_LISTS})

#: What pbs_ralter may change (``select`` is its -l select).
_RALTER_ATTRIBUTES = frozenset({"Reserve_Name", "reserve_start", "reserve_end",
                                "reserve_duration", "Mail_Points", "Mail_Users", "select",
                                "Authorized_Users", "Authorized_Groups"})

#: A standing reservation's later occurrences the scheduler books (and confirmation checks).
BOOKED_AHEAD = 100
#: Seconds between two looks at whether a waiting reservation's partition has a scheduler.
OWNERS_EVERY = 2.0
UNCONFIRMED, CONFIRMED, RUNNING, FINISHED, BEING_DELETED = (
    "RESV_UNCONFIRMED", "RESV_CONFIRMED", "RESV_RUNNING", "RESV_FINISHED",
    "RESV_BEING_DELETED")


@dataclass
class _Ending:
    """What an end of a reservation (`Reservations._end`), or of one occurrence of a
    standing one (`Reservations._next_occurrence`), has done so far: its resv_end hooks
    fired (or it fires none) once it exists. Kept while the end is not stored (a write of
    it refused: a full disk), so that a try again does the rest only."""
    #: Its k/K record written (an end's; an occurrence's writes none).
    recorded: bool = False
    #: The running jobs whose D record it wrote (an end's; an occurrence's writes none).
    deleted: set[str] = field(default_factory=set)
    #: The running jobs it killed (their kill written, then signalled).
    killed: set[str] = field(default_factory=set)
    #: A pbs_rdel's end: its `Reservations._end` arguments (why, requestor, by_owner,
    #: deleter), for the poll to finish it as the pbs_rdel began it, whatever its window.
    deletion: dict[str, Any] | None = None


class Reservations:
    """The engine's reservations (stored as ``resv`` objects)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        resvs = engine.store.all("resv")
        #: Queues whose reservation has ended, kept until the jobs killed at its end are gone.
        self.leftover_queues = {q for q, a in engine.store.all("queue").items()
                                if a.get("reservation") and (
                                    a["reservation"] not in resvs or resvs[a["reservation"]]
                                    .get("reserve_state") == BEING_DELETED)}
        #: Unpartitioned reservations: the schedulers that could not fit them, so far.
        self.denials: dict[str, set[str]] = {}
        self._with_acls()
        #: A standing reservation's occurrences, by its rule, first start and zone.
        self._starts_seen: dict[str, tuple[Any, list[int]]] = {}
        #: When `poll` next looks whether the unconfirmed ones' partitions have a scheduler.
        self._owners_due = 0.0
        #: The reservations whose end (`_end`), or whose occurrence's end
        #: (`_next_occurrence`), fired its resv_end hooks but did not get as far as storing
        #: it (a write refused: a full disk), with what it did: tried again (the next poll,
        #: a pbs_rdel), it does the rest only (`_ended_once`). One under way is finished by
        #: the next poll whatever its window (a pbs_rdel's too), and its window cannot be
        #: altered: its hooks and its record are done, its reservation does not go on.
        self.ending: dict[str, _Ending] = {}

    @staticmethod
    def of_queue(store: Store, queue: str) -> tuple[str, str] | None:
        """Queue `queue`'s reservation as a job's accounting records name it, (its
        ``Reserve_Name``, ``NULL`` when it has none, and its id), as OpenPBS 23.06 writes
        ``resvname`` and ``resvID`` (checked); None for any other queue. Read from `store`
        alone: the records a server's start writes (`Engine._recover`) come before its
        `Reservations` is made."""
        resv_id = (store.get("queue", queue) or {}).get("reservation") if queue else None
        if not resv_id:
            return None
        resv = store.get("resv", str(resv_id)) or {}
        return str(resv.get("Reserve_Name") or "NULL"), str(resv_id)

    # -- requests ---------------------------------------------------------------------------------
    def submit(self, caller: Caller, attrs: dict[str, Any]) -> dict[str, str]:
        """pbs_rsub: returns the id and state (``R3.host``, ``UNCONFIRMED``)."""
        eng = self.engine
        if not units.parse_bool(eng.server_attrs().get("resv_enable", True)):
            raise PbsError(PBSE_RESVAUTH, f"reservations disallowed on {eng.server_name}")
        eng.check_root(caller, PBSE_R_UID)
        now = int(eng.clock())
        start = attrs.get("reserve_start")
        end = attrs.get("reserve_end")
        duration = attrs.get("reserve_duration")
        try:
            start = values.epoch(start, "reserve_start") if start is not None else now
            if duration is not None:
                duration = int(units.parse_duration(duration))
            if end is not None:
                end = values.epoch(end, "reserve_end")
            elif duration is not None:
                end = start + duration
            else:
                raise ValueError("no end")
        except (TypeError, ValueError, OverflowError):
            raise PbsError(PBSE_BADTSPEC, "Bad time specification(s)") from None
        if start < now - 60 or end <= start or end > values.TIME_MAX or (
                duration is not None and end - start != duration):
            raise PbsError(PBSE_BADTSPEC, "Bad time specification(s)")
        attrs = self._checked(attrs)
        series = self._series(attrs, start, end) if "reserve_rrule" in attrs else None
        if attrs.get("partition") and self._unowned(str(attrs["partition"])):
            raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value partition: "
                           f"no scheduler has partition {attrs['partition']}")
        res = dict(attrs.get("Resource_List") or {})
        if not res.get("select"):
            res["select"] = "1:ncpus=1"
        check_resources({k: res.get(k) for k in ("select", "place")})
        res["walltime"] = units.format_duration(end - start)
        with eng.store.transaction() as st:
            seq = st.next_seq()
        # (a standing reservation of more than one occurrence is S<seq>, as PBS names it)
        resv_id = f"{'S' if series and series[1] > 1 else 'R'}{seq}.{eng.server_name}"
        owner = f"{caller.user}@{eng.host}"
        users = attrs.get("Authorized_Users") or []
        if owner not in users:  # (past the limit by one: what the user gave was checked)
            users = acl.insert("user", users, [owner], limit=None)
        resv = Reservation(resv_id, {
            "Reserve_Name": attrs.get("Reserve_Name") or "NULL",
            "Reserve_Owner": f"{caller.user}@{eng.host}", "reserve_type": 2,
            "reserve_state": UNCONFIRMED, "reserve_substate": 1,
            "reserve_start": start, "reserve_end": end, "reserve_duration": end - start,
            "Resource_List": res, "Authorized_Users": users,
            **{name: attrs[name] for name in ("Authorized_Groups", "Authorized_Hosts")
               if attrs.get(name)},
            "server": eng.server_name, "ctime": now, "mtime": now, "euser": caller.user,
            "egroup": _group_of(caller.user), "reserve_count": series[1] if series else 1,
            **({"reserve_rrule": attrs["reserve_rrule"]} if series else {}),
            # (pbs_rsub sends PBS_O_HOST and the like; a request without is shown none)
            **({"Variable_List": dict(attrs["Variable_List"])}
               if attrs.get("Variable_List") else {}),
            # pbs_rsub -p: only that partition's scheduler decides it
            **({"partition": str(attrs["partition"])} if attrs.get("partition") else {})})
        before = copy.deepcopy(resv.to_dict())  # (nothing of it in the hooks' resv)
        outcome = eng._event("resvsub", caller, resv=resv)
        refuse_if_stopped(outcome, eng.stopping)
        if not outcome.accepted:
            raise PbsError(PBSE_HOOKERROR, outcome.message)
        stored = eng._after_hooks(before, outcome, "resv")  # (never the hooks' resv)
        stored.pop("name", None)
        eng._check_hooked("resvsub", outcome, stored, before, kind="resv")
        self._hooked_times(outcome, stored, before, now)
        if series is not None:  # (checked again: a hook may have moved the window)
            tz, count, first = self._series(stored, int(stored["reserve_start"]),
                                            int(stored["reserve_end"]))
            if (count > 1) != (series[1] > 1):
                raise PbsError(PBSE_HOOKERROR, "a resvsub hook changed how many "
                               "occurrences the reservation has")
            stored.update(reserve_count=count, reserve_timezone=tz,
                          reserve_series_start=first,
                          reserve_series_duration=int(stored["reserve_duration"]))
        self._completed(resv_id, stored)
        start, end = stored["reserve_start"], stored["reserve_end"]
        queue = resv_id.split(".")[0]
        stored["queue"] = queue
        with eng.store.transaction() as st:
            st.put("resv", resv_id, stored)
            if st.get("queue", queue) is None:  # (a manager's of that name: denied later)
                st.put("queue", queue, new_queue(resv_id, stored))
        rule = (f" recurrence_rrule={stored['reserve_rrule']} timezone="
                f"{stored['reserve_timezone']}" if series is not None else "")
        eng.log(LOG_RESV, "Resv", resv_id, f"New reservation submitted start={_ctime(start)}"
                f" end={_ctime(end)}{rule}")
        eng.accounting.resv_submitted(resv_id, owner)
        eng.want_cycle = True
        return {"id": resv_id, "state": "UNCONFIRMED"}

    def _series(self, attrs: Mapping[str, Any], start: int, end: int
                ) -> tuple[str, int, int]:
        """A standing reservation's zone (PBS_TZID, from the Variable_List pbs_rsub sent),
        its number of occurrences and its first start, once its rule is checked as
        OpenPBS 23.06 checks it (`recurrence`)."""
        tz = (attrs.get("Variable_List") or {}).get("PBS_TZID")
        try:
            _, starts = recurrence.checked(attrs.get("reserve_rrule"), start, end - start, tz)
        except recurrence.RuleError as exc:
            raise PbsError(exc.code, exc.message) from None
        return str(tz), len(starts), start

    def occurrence_starts(self, attrs: Mapping[str, Any]) -> list[int]:
        """A standing reservation's occurrences' starts ([] for one whose rule no longer
        reads: set aside by no one, it ends with its current occurrence)."""
        try:
            rule = recurrence.parse(attrs.get("reserve_rrule"))
            return recurrence.occurrences(rule, int(attrs["reserve_series_start"]),
                                          recurrence.zone(attrs.get("reserve_timezone")))
        except (recurrence.RuleError, KeyError, TypeError, ValueError):
            return []

    def _completed(self, resv_id: str, stored: dict[str, Any]) -> None:
        """The reservation's Resource_List as PBS's server completes it, and its
        ``schedselect`` (OpenPBS 23.06, checked): ``place=free`` when it asks for no place,
        the select's sums beside it (``ncpus``, ``nodect``, ``mem``...) and its chunks with
        the server's ``default_chunk`` (`units.with_sums`, `job_select`, as a job's). After
        the resvsub hooks, so that what they changed is summed."""
        eng = self.engine
        tables = (None, eng.server_attrs().get("default_chunk"))
        res = dict(stored.get("Resource_List") or {})
        res.setdefault("place", "free")
        try:
            res = units.with_sums(res, tables, {**values.RESOURCE_TYPES,
                                                **eng.resource_types()})
            chunks = job_select(Job(resv_id, {"Resource_List": res}), tables,
                                eng.host_resources())
        except ValueError as exc:  # (a select a hook left that reads as no chunks)
            raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value "
                           f"Resource_List.select: {exc}") from None
        for name, value in (eng.server_attrs().get("resources_default") or {}).items():
            res.setdefault(name, value)  # (after the sums: the select's come first)
        stored["Resource_List"] = res
        stored["schedselect"] = schedselect(chunks)

    def _hooked_times(self, outcome: Any, stored: dict[str, Any], before: dict[str, Any],
                      now: int) -> None:
        """The window a resvsub hook left, made whole as pbs_rsub's: a changed duration or
        start moves the end (the duration stays), a changed end sets the duration; the
        three must then agree, with the same bounds as pbs_rsub's, and the walltime
        follows. A window they cannot make is the hook's error: PBS's 15086, its hook
        named in the server log, nothing stored."""
        keys = ("reserve_start", "reserve_end", "reserve_duration")
        if all(stored.get(k) == before.get(k) for k in keys):
            return
        start, end = int(stored["reserve_start"]), int(stored["reserve_end"])
        duration = stored.get("reserve_duration")
        if end == before["reserve_end"] and duration is not None:
            end = start + int(duration)  # (the duration or the start changed)
        elif duration is None or duration == before["reserve_duration"]:
            duration = end - start  # (the end changed)
        if start < now - 60 or end <= start or end > values.TIME_MAX or \
                end - start != int(duration):
            hook = outcome.runs[-1].hook if outcome.runs else "resvsub"
            self.engine.log(LOG_ERROR, "Hook", hook, f"resvsub hook '{hook}' left a window "
                            f"that cannot be: start {start}, end {end}, duration {duration}")
            raise PbsError(PBSE_BADTSPEC, "Bad time specification(s)")
        stored.update(reserve_start=start, reserve_end=end, reserve_duration=end - start)
        stored["Resource_List"] = {**(stored.get("Resource_List") or {}),
                                   "walltime": units.format_duration(end - start)}

    def _checked(self, attrs: Any) -> dict[str, Any]:
        """pbs_rsub's attributes under the one set of rules (`pbsplug.values`): the name,
        the resources (an undefined one is 15035), the variables, the partition and the
        access lists (an entry twice is 15055)."""
        if not isinstance(attrs, dict):
            raise PbsError(15014, "Illegal attribute or resource value attrs")
        out = dict(attrs)
        custom = self.engine.resource_types()
        unknown = sorted(str(name) for name in set(attrs) - _RSUB_ATTRIBUTES)
        if unknown:
            raise PbsError(15002, f"Undefined attribute {values.shown(unknown[0])}")
        try:
            for name in ("Reserve_Name", "Variable_List", "partition", *ACCESS_LISTS):
                if attrs.get(name) is not None:
                    out[name] = values.resv_value(name, attrs[name])
            if attrs.get("Resource_List") is not None:
                out["Resource_List"] = values.resources(attrs["Resource_List"], "Resource_List",
                                                        custom)
        except values.BadValue as exc:
            raise PbsError(exc.code, exc.pbs_text) from None
        return out

    def stat(self, caller: Caller, ids: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """pbs_rstat: every reservation, or the named ones (one stored by an older
        pbsplug, unconfirmed, shows the name of its queue to come)."""
        resvs = {resv_id: {**attrs, "queue": attrs.get("queue") or resv_id.split(".")[0]}
                 for resv_id, attrs in self.engine.store.all("resv").items()}
        if not ids:
            return resvs
        out = {}
        for name in ids:
            full = self._full_id(name)
            if full not in resvs:
                raise PbsError(PBSE_UNKRESVID, "Unknown Reservation Id", obj=name)
            out[full] = resvs[full]
        return out

    def delete(self, caller: Caller, ids: list[str]) -> list[dict[str, Any]]:
        """pbs_rdel: each reservation's result, so one bad id does not stop the others."""
        def delete_one(name: str) -> None:
            full = self._full_id(name)
            attrs = self.engine.store.get("resv", full)
            if attrs is None:
                raise PbsError(PBSE_UNKRESVID, "Unknown Reservation Id", obj=name)
            if not caller.privileged and attrs.get("euser") != caller.user:
                raise PbsError(PBSE_PERM, obj=full)
            if attrs.get("reserve_state") == BEING_DELETED:
                return  # (ended already: its jobs are going)
            self._end(full, attrs, f"deleted at request of {caller.user}@{self.engine.host}",
                      requestor=f"{caller.user}@{self.engine.host}",
                      by_owner=attrs.get("euser") == caller.user, deleter=True)

        return each(ids, delete_one)

    def alter(self, caller: Caller, name: str, attrs: Any, force: bool = False,
              interactive: int | None = None) -> dict[str, Any]:
        """pbs_ralter: change a reservation's window, name, mail, access lists or select
        (to a subset of its chunks), as OpenPBS 23.06 takes them (checked). Its owner's, an
        operator's or a manager's. A new window of a confirmed or running one is confirmed
        again on its vnodes (`_window_fits`), or refused and put back (``Reservation alter
        denied`` in the log), unless `force`; an unconfirmed one's is the scheduler's to
        decide, as its first. One being deleted takes a new name, mail or lists, nothing
        else. `interactive` (-I) is kept as its ``interactive``. Returns ``{"id", "state"}``:
        ``CONFIRMED`` or ``DENIED`` for a window decided now, else ``REQUESTED``."""
        eng = self.engine
        full = self._full_id(str(name))
        resv = eng.store.get("resv", full)
        if resv is None:
            raise PbsError(PBSE_UNKRESVID, "Unknown Reservation Id")
        if not caller.privileged and resv.get("euser") != caller.user:
            raise PbsError(PBSE_PERM)
        if not isinstance(attrs, dict) or not isinstance(force, bool):
            raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value attrs")
        unknown = sorted(str(k) for k in set(attrs) - _RALTER_ATTRIBUTES)
        if unknown:
            raise PbsError(15002, f"Undefined attribute {values.shown(unknown[0])}")
        state = resv.get("reserve_state")
        changes = self._alter_checked(attrs)
        windowed = {"reserve_start", "reserve_end", "reserve_duration", "select"} & set(changes)
        # (one whose end is under way, its hooks and record done, a write refused: a full
        # disk, `ending`, is as one being deleted: the next poll finishes its end)
        if state == BEING_DELETED or full in self.ending:
            if windowed:
                raise PbsError(PBSE_BADSTATE, "Request invalid for state of job")
        elif state not in (UNCONFIRMED, CONFIRMED, RUNNING):
            raise PbsError(PBSE_BADSTATE, "Request invalid for state of job")
        if interactive is not None and (isinstance(interactive, bool) or not isinstance(
                interactive, int) or abs(interactive) > values.TIME_MAX):
            raise PbsError(PBSE_BADATVAL, "Illegal attribute or resource value interactive")
        now = int(eng.clock())
        new = dict(resv)
        if interactive is not None:
            new["interactive"] = interactive  # (as OpenPBS 23.06 keeps it, checked)
        for key in ("Reserve_Name", "Mail_Points", "Mail_Users", *ACCESS_LISTS):
            if key in changes:
                new[key] = changes[key]
            if key in ACCESS_LISTS and key in changes:  # (as PBS shows them: in its order)
                new[key] = acl.ordered(acl.KIND[key], dict.fromkeys(changes[key]),
                                       limit=None)
        timed = self._altered_window(resv, changes, now)
        if timed:
            start, end = timed
            if state == RUNNING and start != resv["reserve_start"]:
                if self._queue_jobs(str(resv.get("queue") or "")):
                    raise PbsError(PBSE_RESV_NOT_EMPTY, "Reservation not empty")
            new.update(reserve_start=start, reserve_end=end, reserve_duration=end - start)
            new["Resource_List"] = {**(resv.get("Resource_List") or {}),
                                    "walltime": units.format_duration(end - start)}
        if "select" in changes:
            self._new_select(full, resv, new, str(changes["select"]))
        shown = "".join(f" {key}={_ctime(new[f'reserve_{key}'])}" for key in ("start", "end")
                        if new[f"reserve_{key}"] != resv[f"reserve_{key}"])
        eng.log(LOG_RESV, "Resv", full, f"Attempting to modify reservation{shown}")
        new["mtime"] = now
        decided = timed or "select" in changes
        if decided and state != UNCONFIRMED and resv.get("schedselect"):
            # (OpenPBS 23.06 keeps the select a confirmed one had before, checked)
            new.setdefault("schedselect_orig", resv["schedselect"])
        if decided and state != UNCONFIRMED and not force:
            why = self._window_fits(full, new, now)
            if why is not None:
                eng.log(LOG_RESV, "Resv", full, "Reservation alter denied")
                eng.log(LOG_DEBUG, "Resv", full, f"alter denied: {why}")
                return {"id": full, "state": "DENIED"}
        if state == RUNNING and new["reserve_start"] > now:
            new.update(reserve_state=CONFIRMED, reserve_substate=2)  # (not begun after all)
        queue = str(resv.get("queue") or "")
        with eng.store.transaction() as st:
            st.put("resv", full, new)
            held = st.get("queue", queue) if queue else None
            if held is not None and held.get("reservation") == full:
                acls = queue_acls(new)
                held = {**held, **{k: v for k, v in acls.items()}}
                if new.get("reserve_state") == CONFIRMED:
                    held["started"] = False
                st.put("queue", queue, held)
        answer = "REQUESTED"
        if decided and state != UNCONFIRMED:
            eng.log(LOG_RESV, "Resv", full, "Reservation alter confirmed")
            answer = "CONFIRMED"
        eng._track_states()
        eng.want_cycle = True
        return {"id": full, "state": answer}

    def _alter_checked(self, attrs: dict[str, Any]) -> dict[str, Any]:
        """pbs_ralter's values, each checked as pbs_rsub's (or qsub's, for the mail)."""
        out: dict[str, Any] = {}
        try:
            for key, value in attrs.items():
                if value is None:
                    raise values.BadValue(PBSE_BADATVAL, key, "no value")
                if key in ("Mail_Points", "Mail_Users"):
                    out[key] = values.job_value(key, value)
                elif key == "select":
                    out[key] = values.resources({"select": value}, "Resource_List",
                                                self.engine.resource_types())["select"]
                    check_resources({"select": out[key]})
                elif key in ("reserve_start", "reserve_end"):
                    out[key] = values.epoch(value, key)
                elif key == "reserve_duration":
                    out[key] = int(units.parse_duration(value))
                else:
                    out[key] = values.resv_value(key, value)
        except values.BadValue as exc:
            raise PbsError(exc.code, exc.pbs_text) from None
        except (TypeError, ValueError, OverflowError):
            raise PbsError(PBSE_BADTSPEC, "Bad time specification(s)") from None
        return out

    def _altered_window(self, resv: dict[str, Any], changes: dict[str, Any], now: int
                        ) -> tuple[int, int] | None:
        """The new (start, end), or None when pbs_ralter changes neither: a new start keeps
        the end (PBS's: the duration follows), a duration alone moves the end; a start in
        the past or an end not after the start is 15086."""
        if not {"reserve_start", "reserve_end", "reserve_duration"} & set(changes):
            return None
        start = int(changes.get("reserve_start", resv["reserve_start"]))
        if "reserve_end" in changes:
            end = int(changes["reserve_end"])
            if "reserve_duration" in changes and "reserve_start" not in changes:
                start = end - int(changes["reserve_duration"])
        elif "reserve_duration" in changes:
            end = start + int(changes["reserve_duration"])
        else:
            end = int(resv["reserve_end"])
        if (start != resv["reserve_start"] and start < now) or end <= start or \
                end > values.TIME_MAX or end <= now:
            raise PbsError(PBSE_BADTSPEC, "Bad time specification(s)")
        return start, end

    def _new_select(self, resv_id: str, resv: dict[str, Any], new: dict[str, Any],
                    select: str) -> None:
        """A select made of the reservation's chunks, fewer of each (OpenPBS 23.06's rule,
        15183 otherwise); a confirmed one keeps the vnodes of the chunks it keeps, the
        first of each kind in ``resv_nodes``' order."""
        old = _chunk_counts(str((resv.get("Resource_List") or {}).get("select") or ""))
        wanted = _chunk_counts(select)
        if not wanted or any(spec not in old or count > old[spec]
                             for spec, count in wanted.items()):
            raise PbsError(PBSE_SELECT_NOT_SUBSET, "New select must be made up of a subset "
                           "of the original chunks")
        res = {k: v for k, v in (resv.get("Resource_List") or {}).items()
               if k in ("place", "walltime")}
        res["select"] = select
        for key, value in (new.get("Resource_List") or {}).items():
            if key == "walltime":
                res[key] = value
        new["Resource_List"] = res
        self._completed(resv_id, new)
        if resv.get("resv_nodes"):
            left = dict(wanted)
            kept = []
            for spec, chunk in zip(_expanded(str(resv["Resource_List"]["select"])),
                                   re.findall(r"\([^)]*\)", str(resv["resv_nodes"])),
                                   strict=False):
                if left.get(spec, 0) > 0:
                    left[spec] -= 1
                    kept.append(chunk)
            new["resv_nodes"] = "+".join(kept)

    def _queue_jobs(self, queue: str) -> bool:
        return bool(queue) and any(j.get("queue") == queue for j in self.engine.store.jobs(
            ("Q", "H", "W", "R", "E", "S", "U", "T"), lean=True).values())

    def _window_fits(self, resv_id: str, new: dict[str, Any], now: int) -> str | None:
        """Why the reservation's vnodes cannot hold it over its new window, or None: what
        the other confirmed and running reservations hold there in an overlapping window,
        and the jobs running outside it (to their walltime's end; for ever without one),
        beside what it holds, against each vnode's resources_available."""
        eng = self.engine
        types = eng.resource_types()
        start, end = int(new["reserve_start"]), int(new["reserve_end"])
        mine: dict[str, dict[str, int]] = {}
        _add_amounts(mine, str(new.get("resv_nodes") or ""), types)
        if not mine:
            return None
        used: dict[str, dict[str, int]] = {}
        queues = {str(new.get("queue") or "")}
        for other_id, other in eng.store.all("resv").items():
            if other_id == resv_id or other.get("reserve_state") not in (CONFIRMED, RUNNING):
                continue
            if other.get("queue"):
                queues.add(str(other["queue"]))
            if int(other["reserve_start"]) < end and start < int(other["reserve_end"]):
                _add_amounts(used, str(other.get("resv_nodes") or ""), types)
        for job in eng.store.jobs(("R", "E"), lean=True).values():
            if job.get("queue") in queues:
                continue  # (inside a reservation: that one's holding counts)
            walltime = (job.get("Resource_List") or {}).get("walltime")
            try:
                until = float(job.get("stime") or now) + units.parse_duration(walltime) \
                    if walltime is not None else float("inf")
            except (TypeError, ValueError):
                until = float("inf")
            if until > start:
                _add_amounts(used, str(job.get("exec_vnode") or ""), types)
        nodes = eng.store.all("node")
        for vnode, amounts in mine.items():
            have = (nodes.get(vnode) or {}).get("resources_available") or {}
            for key, amount in amounts.items():
                cap = resource_amount(key, have.get(key), types) if key in have else None
                if cap is not None and used.get(vnode, {}).get(key, 0) + amount > cap:
                    return f"{vnode} has not {key} for it then"
        return None

    def may_submit(self, queue: str) -> None:
        """To the queue of a reservation that is over (left until its last job is gone), no
        job goes. (Who may put jobs in the queue of one that is not is its ACLs' to say.)"""
        if not any(attrs.get("queue") == queue and attrs.get("reserve_state") != BEING_DELETED
                   for attrs in self.engine.store.all("resv").values()):
            raise PbsError(PBSE_PERM, obj=queue)

    def _unowned(self, partition: str) -> bool:
        """Whether no scheduler has `partition` (``pbs-default`` is the default one's): a
        reservation only its scheduler may decide would wait, unconfirmed, to its end. Not
        while a plugin failed to name its schedulers, nor for a partition a refused
        scheduler claims (`Engine._schedulers`): that may be for a moment only."""
        if partition == DEFAULT_PARTITION:
            return False
        scheds = self.engine._schedulers()
        if not self.engine.schedulers_whole:
            return False
        return not any(partition in (sched.partitions or ()) or partition in sched.claimed
                       for sched in scheds.values())

    def _full_id(self, name: str) -> str:
        return name if "." in name else f"{name}.{self.engine.server_name}"

    def _with_acls(self) -> None:
        """The queues of reservations confirmed by a pbsplug that did not give them ACLs
        (it checked the owner's name itself) are given them, so the queue's ACLs decide.
        Once per database (its meta key `_ACLS_GIVEN`): a manager may unset them later."""
        eng = self.engine
        if eng.store.get_meta(_ACLS_GIVEN) is not None:
            return
        with eng.store.transaction() as st:
            for attrs in st.all("resv").values():
                queue = st.get("queue", attrs.get("queue") or "")
                if queue is not None and queue.get("reservation") and \
                        "acl_user_enable" not in queue:
                    st.put("queue", attrs["queue"], {**queue, **queue_acls(attrs)})
            st.set_meta(_ACLS_GIVEN, "1")

    # -- life -------------------------------------------------------------------------------------
    def set_aside(self) -> int:
        """Reservations whose stored times, resources or vnodes the server cannot use (an
        older version, a bug) end now, as pbs_rdel would end them, with the reason logged,
        so that the server starts and goes on. Returns how many."""
        eng = self.engine
        count = 0
        custom = eng.resource_types()
        for resv_id, attrs in eng.store.all("resv").items():
            problems = values.resv_problems(attrs, custom) if isinstance(attrs, dict) else {
                "attributes": "the reservation's attributes are not a mapping"}
            if not problems:
                continue
            why = "; ".join(problems.values())
            eng.log(LOG_ADMIN | LOG_ERROR, "Resv", resv_id,
                    f"set aside: a stored value the server cannot use: {why}")
            fixed = {k: v for k, v in (attrs if isinstance(attrs, dict) else {}).items()
                     if k not in problems}
            self._end(resv_id, fixed, f"deleted: bad attribute value set aside: {why}",
                      requestor=f"Server@{eng.host}@{eng.host}")
            count += 1
        return count

    def objects(self) -> list[Reservation]:
        """The reservations as the scheduler books them: each, and a standing one's next
        occurrences (up to `BOOKED_AHEAD`, on the same vnodes, named ``S3.host#4``) so that
        nothing is confirmed or started where they will be."""
        out = []
        for name, attrs in self.engine.store.all("resv").items():
            out.append(Reservation(name, attrs))
            out += [Reservation(f"{name}#{index}", later)
                    for index, later in self._later(name, attrs)]
        return out

    def _later(self, name: str, attrs: Mapping[str, Any]) -> list[tuple[int, dict[str, Any]]]:
        """A confirmed standing reservation's next occurrences (index, attributes)."""
        if not attrs.get("reserve_rrule") or not attrs.get("resv_nodes") or \
                attrs.get("reserve_state") not in (CONFIRMED, RUNNING):
            return []
        key = (attrs.get("reserve_rrule"), attrs.get("reserve_series_start"),
               attrs.get("reserve_timezone"))
        if self._starts_seen.get(name, (None,))[0] != key:
            self._starts_seen[name] = (key, self.occurrence_starts(attrs))
        starts = self._starts_seen[name][1]
        index = int(attrs.get("reserve_index") or 1)
        duration = _series_duration(attrs)
        shown = {k: v for k, v in attrs.items() if k != "queue"}
        return [(at + 1, {**shown, "reserve_start": when, "reserve_end": when + duration,
                          "reserve_state": CONFIRMED, "reserve_substate": 2})
                for at, when in enumerate(starts[index:index + BOOKED_AHEAD], start=index)]

    def _series_conflict(self, resv_id: str, attrs: Mapping[str, Any]) -> str | None:
        """Why a standing reservation's later occurrences (`BOOKED_AHEAD` of them) cannot
        have the vnodes its first was confirmed on, or None: what the other confirmed
        reservations (their later occurrences too) hold there then, against each vnode's
        resources_available."""
        eng = self.engine
        types = eng.resource_types()
        mine: dict[str, dict[str, int]] = {}
        _add_amounts(mine, str(attrs.get("resv_nodes") or ""), types)
        held = {**attrs, "reserve_state": CONFIRMED, "reserve_index": 1}
        windows = [(int(a["reserve_start"]), int(a["reserve_end"]), i)
                   for i, a in self._later(resv_id, held)]
        others = []
        for other in self.objects():
            if other.name.split("#")[0] == resv_id or other.reserve_state not in (
                    CONFIRMED, RUNNING) or not other.resv_nodes:
                continue
            amounts: dict[str, dict[str, int]] = {}
            _add_amounts(amounts, str(other.resv_nodes), types)
            others.append((int(other.reserve_start), int(other.reserve_end), amounts))
        nodes = eng.store.all("node")
        for start, end, index in windows:
            used: dict[str, dict[str, int]] = {}
            for o_start, o_end, amounts in others:
                if o_start < end and start < o_end:
                    for vnode, res in amounts.items():
                        acc = used.setdefault(vnode, {})
                        for key, amount in res.items():
                            acc[key] = acc.get(key, 0) + amount
            for vnode, res in mine.items():
                have = (nodes.get(vnode) or {}).get("resources_available") or {}
                for key, amount in res.items():
                    cap = resource_amount(key, have.get(key), types) if key in have else None
                    if cap is not None and used.get(vnode, {}).get(key, 0) + amount > cap:
                        return f"occurrence {index}: {vnode} has not {key} for it then"
        return None

    def _next_occurrence(self, resv_id: str, attrs: dict[str, Any], now: int) -> bool:
        """A standing reservation's occurrence ended: its running jobs are killed, the
        ones queued or held stay for the next, its queue stops, and it is confirmed for
        its next occurrence still to end (OpenPBS 23.06, checked: reserve_index counts
        them). False when none is left: it ends as any reservation."""
        eng = self.engine
        starts = self.occurrence_starts(attrs)
        index = int(attrs.get("reserve_index") or 1)
        duration = _series_duration(attrs)
        following = [i for i in range(index, len(starts)) if starts[i] + duration > now]
        if not following:
            return False
        queue = str(attrs.get("queue") or "")
        held = eng.store.get("queue", queue) if queue else None
        if held is None or held.get("reservation") != resv_id:
            queue = ""
        began = attrs.get("reserve_state") == RUNNING
        ending = self._ended_once(resv_id, attrs, began)
        if ending is None:
            return True  # (the stop's: the occurrence ends when the server starts again)
        why = f"Job deleted: reservation {resv_id} occurrence {index} ended"
        for job_id, job in eng.store.jobs(("R", "E")).items():
            if queue and job.get("queue") == queue and job_id in eng.launches and \
                    job_id not in ending.killed:
                eng._kill(job_id, why)
                ending.killed.add(job_id)
        nxt = following[0]
        attrs.update(reserve_index=nxt + 1, reserve_start=starts[nxt],
                     reserve_end=starts[nxt] + duration, reserve_duration=duration,
                     reserve_state=CONFIRMED, reserve_substate=2, mtime=now)
        attrs["Resource_List"] = {**(attrs.get("Resource_List") or {}),
                                  "walltime": units.format_duration(duration)}
        with eng.store.transaction() as st:
            st.put("resv", resv_id, attrs)
            if queue:
                st.put("queue", queue, {**(st.get("queue", queue) or held or {}),
                                        "started": False})
            if began:
                for name, _ in parse_exec_vnode(str(attrs.get("resv_nodes") or "")):
                    node = st.get("node", name)
                    if node is not None:
                        node["last_used_time"] = now
                        st.put("node", name, node)
        self.ending.pop(resv_id, None)
        eng.log(LOG_RESV, "Resv", resv_id, f"Reservation occurrence {index} ended; "
                f"occurrence {nxt + 1} of {len(starts)} starts {_ctime(starts[nxt])}")
        eng._track_states()
        eng.want_cycle = True
        return True

    def decide(self, decisions: list[ResvDecision], sched: str = "default",
               deciders: frozenset[str] = frozenset()) -> None:
        """Scheduler `sched`'s answers for unconfirmed reservations. `deciders` are the
        schedulers with scheduling on: a reservation in no partition is offered to each, and
        the first to confirm it makes it its partition's; it is denied only once every one of
        them could not fit it (PBS, pbs-behavior.md §2.5)."""
        for decision in decisions:
            try:
                self._decide_one(decision, sched, deciders)
            except StoreWriteError:
                raise  # (the server's own disk: the cycle's caller answers for it)
            except Exception as exc:  # noqa: BLE001 - one reservation must not stop the others
                self.engine.log(LOG_ERROR, "Resv", decision.resv_id, "deciding it failed, "
                                f"tried again next cycle: {type(exc).__name__}: {exc}")

    def _decide_one(self, decision: ResvDecision, sched: str, deciders: frozenset[str]
                    ) -> None:
        """One of `decide`'s answers."""
        eng = self.engine
        attrs = eng.store.get("resv", decision.resv_id)
        if attrs is None or attrs.get("reserve_state") != UNCONFIRMED:
            return  # another scheduler confirmed it first
        if not decision.confirmed:
            denied = self.denials.setdefault(decision.resv_id, set())
            denied.add(sched)
            if attrs.get("partition") or not (set(deciders) - denied):
                self.denials.pop(decision.resv_id, None)
                self._deny(decision.resv_id, attrs, decision.reason or "no room")
            return
        if len(decision.resv_nodes) > values.MAX_LONG_STRING:  # (stored, it would be
            self._deny(decision.resv_id, attrs,  # set aside as a bad row at restart)
                       f"its vnodes' text (resv_nodes) is longer than "
                       f"{values.MAX_LONG_STRING} characters")
            return
        queue = decision.resv_id.split(".")[0]
        held = eng.store.get("queue", queue)
        if held is not None and held.get("reservation") != decision.resv_id:
            # (a manager's queue of that name: its jobs are not the reservation's, and
            # the reservation's end would delete them and it)
            self._deny(decision.resv_id, attrs, f"queue {queue} already exists")
            return
        if attrs.get("reserve_rrule"):
            why = self._series_conflict(decision.resv_id,
                                        {**attrs, "resv_nodes": decision.resv_nodes})
            if why is not None:
                self._deny(decision.resv_id, attrs, why)
                return
        resv = Reservation(decision.resv_id, {**attrs, "resv_nodes": decision.resv_nodes})
        outcome = eng._event("resv_confirm", resv=resv)
        if stopped(outcome, eng.stopping):  # (the stop's, not the hook's reject: not denied)
            eng.log(LOG_RESV, "Resv", decision.resv_id, "its resv_confirm hooks were "
                    "stopped: the server is stopping; the reservation stays unconfirmed, "
                    "to be confirmed when the server starts again")
            return
        if not outcome.accepted:
            self._deny(decision.resv_id, attrs, outcome.message or "resv_confirm reject")
            return
        self.denials.pop(decision.resv_id, None)
        partition = attrs.get("partition") or decision.partition or "pbs-default"
        attrs.update(reserve_state=CONFIRMED, reserve_substate=2, queue=queue,
                     resv_nodes=decision.resv_nodes, mtime=int(eng.clock()),
                     partition=partition)
        if attrs.get("reserve_rrule"):
            attrs.setdefault("reserve_index", 1)
        with eng.store.transaction() as st:
            st.put("resv", decision.resv_id, attrs)
            # (made at submission, disabled; one of an older pbsplug's, now)
            resv_queue = st.get("queue", queue) or new_queue(decision.resv_id, attrs)
            resv_queue["enabled"] = True
            if partition != "pbs-default":  # its jobs go to the scheduler that confirmed it
                resv_queue["partition"] = partition
            st.put("queue", queue, resv_queue)
        eng.log(LOG_RESV, "Resv", decision.resv_id, "Reservation confirmed")
        eng.accounting.resv_confirmed(decision.resv_id, attrs)

    def _deny(self, resv_id: str, attrs: dict[str, Any], why: str) -> None:
        eng = self.engine
        queue = str(attrs.get("queue") or "")
        with eng.store.transaction() as st:
            st.delete("resv", resv_id)
            held = st.get("queue", queue) if queue else None
        if held is not None and held.get("reservation") == resv_id:  # (not a manager's)
            self.leftover_queues.add(queue)
            self._drop_empty_queues()
        eng.log(LOG_RESV, "Resv", resv_id,
                f"Reservation denied: {why.removeprefix('Reservation denied: ')}")
        eng.accounting.resv_deleted(resv_id, f"Server@{eng.host}@{eng.host}", by_owner=False)

    def poll(self, now: float) -> None:
        """Begin the reservations whose window opened and end those whose window closed;
        deny an unconfirmed one whose partition no scheduler has any more."""
        eng = self.engine
        unowned: dict[str, bool] = {}
        look = now >= self._owners_due  # (every few seconds: it asks the plugins)
        if look:
            self._owners_due = now + OWNERS_EVERY
        for resv_id, attrs in eng.store.all("resv").items():
            state = attrs.get("reserve_state")
            part = attrs.get("partition")
            ending = self.ending.get(resv_id)
            if ending is not None and ending.deletion is not None:
                # (a pbs_rdel's end that failed half way, its hooks and record done: the
                # server finishes it, whatever its window, as the pbs_rdel began it)
                self._end(resv_id, attrs, **ending.deletion)
                continue
            if look and state == UNCONFIRMED and part and now < float(attrs["reserve_end"]):
                if part not in unowned:
                    unowned[part] = self._unowned(str(part))
                if unowned[part]:
                    self._deny(resv_id, attrs, f"no scheduler has partition {part}")
                    continue
            if ending is None and state == CONFIRMED and float(
                    attrs["reserve_start"]) <= now < float(
                    attrs["reserve_end"]):  # (a window missed whole ends, unbegun)
                attrs.update(reserve_state=RUNNING, reserve_substate=5, mtime=int(now))
                # (its hooks first: one the server's stop gives up leaves it confirmed, to
                # begin, its hooks run again, when the server starts again)
                outcome = eng._event("resv_begin", resv=Reservation(resv_id, attrs))
                if stopped(outcome, eng.stopping):
                    eng.log(LOG_RESV, "Resv", resv_id, "its resv_begin hooks were stopped: "
                            "the server is stopping; the reservation begins when the "
                            "server starts again")
                    continue
                with eng.store.transaction() as st:
                    st.put("resv", resv_id, attrs)
                    queue = st.get("queue", attrs["queue"])
                    if queue is not None:
                        st.put("queue", attrs["queue"], {**queue, "started": True})
                eng.log(LOG_RESV, "Resv", resv_id, "Reservation period starting")
                eng.accounting.resv_begun(resv_id, attrs)
                if not outcome.accepted:
                    eng.log(LOG_ADMIN, "Hook", outcome.hook or "",
                            f"resv_begin request rejected: {outcome.message}")
                eng._track_states()
                eng.want_cycle = True
            elif state in (CONFIRMED, RUNNING, UNCONFIRMED) and (
                    ending is not None or now >= float(attrs["reserve_end"])):
                if state != UNCONFIRMED and attrs.get("reserve_rrule") and \
                        self._next_occurrence(resv_id, attrs, int(now)):
                    continue
                # (its jobs' comment names it; the log line is PBS's words for the event,
                # which PBS mails its owner: its server log says nothing of it, checked)
                self._end(resv_id, attrs, "reservation period ended",
                          logged="Reservation period ended")
        if self.leftover_queues:
            self._drop_empty_queues()

    def _drop_empty_queues(self) -> None:
        """Remove the ended reservations' queues that no running job is in any more, and
        the reservations left listed (``RESV_BEING_DELETED``) while their jobs went. A job
        still queued there (one requeued while it was being killed at the end) is deleted
        first, as the reservation's jobs all are: a queue is never removed under a job."""
        eng = self.engine
        busy = {j.get("queue") for j in eng.store.jobs(("R", "E"), lean=True).values()}
        empty = self.leftover_queues - busy
        if empty:  # (read only then: a poll with a queue left must not read every job)
            for job_id, job in eng.store.jobs(("Q", "H", "W"), lean=True).items():
                if job.get("queue") in empty:
                    eng._drop(job_id, eng.store.job(job_id) or job,
                              f"Job deleted: the reservation of queue {job.get('queue')} "
                              "ended")
        if empty:
            with eng.store.transaction() as st:
                for queue in empty:
                    held = st.get("queue", queue) or {}
                    resv = st.get("resv", str(held.get("reservation") or ""))
                    if resv is not None and resv.get("reserve_state") == BEING_DELETED:
                        st.delete("resv", str(held["reservation"]))
                    st.delete("queue", queue)
            self.leftover_queues -= empty

    def _resv_end(self, resv_id: str, attrs: dict[str, Any], refuse: bool = False) -> bool:
        """The resv_end hooks of a reservation that had begun, or that a pbs_rdel deletes
        confirmed, begun or not (`attrs` as they see it), fired before its end (or its
        occurrence's) is carried out, as PBS's server fires them before it deletes its jobs
        (req_delete.c, read in its source); a reject or an error is logged, and the end
        goes on. False when the runner gave a hook up for the
        server's stop (`stopped`): the stop's, not the hook's; nothing of the end is done,
        and the reservation ends, its hooks run again, when the server starts again; a
        pbs_rdel (`refuse`) is refused with `STOPPING`, as any request the stop cuts."""
        eng = self.engine
        outcome = eng._event("resv_end", resv=Reservation(resv_id, attrs))
        if stopped(outcome, eng.stopping):
            if refuse:
                refuse_if_stopped(outcome, eng.stopping, resv_id)
            eng.log(LOG_RESV, "Resv", resv_id, "its resv_end hooks were stopped: the server "
                    "is stopping; the reservation ends when the server starts again")
            return False
        if not outcome.accepted:
            eng.log(LOG_ADMIN, "Hook", outcome.hook or "",
                    f"resv_end request rejected: {outcome.message}")
        return True

    def _ended_once(self, resv_id: str, attrs: dict[str, Any], fires: bool,
                    refuse: bool = False) -> _Ending | None:
        """The end of `resv_id` (or of its occurrence) under way: its resv_end hooks fired
        (`_resv_end`, when it `fires`, `attrs` as they see it) the first time it is tried,
        not again when it is tried again after it failed half way (a full disk: `ending`
        says what it did). None when the server's stop gave a hook up: nothing is done."""
        ending = self.ending.get(resv_id)
        if ending is None:
            if fires and not self._resv_end(resv_id, attrs, refuse=refuse):
                return None
            ending = self.ending[resv_id] = _Ending()
        return ending

    def _end(self, resv_id: str, attrs: dict[str, Any], why: str, logged: str | None = None,
             requestor: str | None = None, by_owner: bool = False,
             deleter: bool = False) -> None:
        """The reservation ends (`why`, in its jobs' comments; the log line is `logged`,
        else ``Reservation <why>``): deleted at `requestor`'s request (its owner's when
        `by_owner`), else its period is over. Its queue is disabled and stopped; while
        its running jobs are being killed it stays listed as ``RESV_BEING_DELETED``, and
        goes with its queue once they are gone (OpenPBS 23.06, checked).

        Its record comes first, then each job's D, as OpenPBS 23.06 writes them (checked):
        the requestor of the jobs' D is `requestor` when it is someone's deletion
        (`deleter`: pbs_rdel), else the server's user (its period is over, or the server
        set it aside), who is the requestor of the reservation's own record at its end.

        An end that fails after its hooks (a write refused: a full disk) leaves the
        reservation stored as it was; tried again, it does the rest only: no second
        resv_end, k/K record, or running job's D record or kill (`ending`, kept in memory:
        a restart in between fires and writes them again). A pbs_rdel's end that failed so
        is refused, and finished by the next poll whatever its window (`poll`). A running
        job's kill is written before its SIGTERM (`Engine._kill`): a kill
        refused signals nothing, and the job ends with the reservation's end reason."""
        eng = self.engine
        # resv_end fires at the end of a reservation that began, and at a pbs_rdel of any
        # but an unconfirmed one, begun or not, as PBS's server fires it (req_delete.c)
        state = attrs.get("reserve_state")
        began = state == RUNNING
        fires = state != UNCONFIRMED if deleter else began
        server_user = f"{manager.server_user()}@{eng.host}"
        ending = self._ended_once(resv_id, {**attrs, "reserve_state": FINISHED,
                                            "reserve_substate": 6, "mtime": int(eng.clock())},
                                  fires, refuse=deleter)
        if ending is None:
            return  # (the stop's: it ends when the server starts again)
        if deleter and ending.deletion is None:  # (for the poll to finish it: `poll`)
            ending.deletion = {"why": why, "logged": logged, "requestor": requestor,
                               "by_owner": by_owner, "deleter": True}
        if not ending.recorded:
            if requestor is not None:
                eng.accounting.resv_deleted(resv_id, requestor, by_owner)
            else:
                eng.accounting.resv_finished(resv_id, attrs, server_user)
            ending.recorded = True
        jobs_requestor = requestor if deleter and requestor else server_user
        queue = str(attrs.get("queue") or "")
        held = eng.store.get("queue", queue) if queue else None
        if held is None or held.get("reservation") != resv_id:
            queue = ""  # (none, or a manager's queue of its name: not the reservation's)
        killed = False
        if queue:
            for job_id, job in eng.store.jobs(("Q", "H", "W", "R", "E")).items():
                if job.get("queue") != queue:
                    continue
                if job_id in eng.launches:  # (each step once, tried again: `ending`)
                    if job_id not in ending.deleted:
                        eng.accounting.deleted(job_id, jobs_requestor)  # (its E at its end)
                        ending.deleted.add(job_id)
                    if job_id not in ending.killed:
                        eng._kill(job_id, f"Job deleted: reservation {resv_id} {why}")
                        ending.killed.add(job_id)
                    killed = True
                elif eng._ends_alone(job_id):  # (its processes ended: it ends when its
                    killed = True  # end hooks are over, the reservation listed till then)
                else:
                    eng._drop(job_id, job, f"Job deleted: reservation {resv_id} {why}",
                              requestor=jobs_requestor)
        now = int(eng.clock())
        attrs.update(reserve_state=FINISHED, reserve_substate=6, mtime=now)
        with eng.store.transaction() as st:
            if killed:
                st.put("resv", resv_id, {**attrs, "reserve_state": BEING_DELETED,
                                         "reserve_substate": 9})  # (PBS's, checked)
            else:
                st.delete("resv", resv_id)
            if queue:
                st.put("queue", queue, {**(st.get("queue", queue) or held or {}),
                                        "enabled": False, "started": False})
            if began:
                for name, _ in parse_exec_vnode(attrs.get("resv_nodes", "")):
                    node = st.get("node", name)
                    if node is not None:
                        node["last_used_time"] = now
                        st.put("node", name, node)
        self.ending.pop(resv_id, None)
        if queue:
            self.leftover_queues.add(queue)
            self._drop_empty_queues()
        eng.log(LOG_RESV, "Resv", resv_id, logged or f"Reservation {why}")
        eng._track_states()
        eng.want_cycle = True


#: The store's meta key telling that `Reservations._with_acls` was done.
_ACLS_GIVEN = "resv_queue_acls_given"


def resv_exclusive(resvs: Iterable[Mapping[str, Any]], nodes: Mapping[str, Mapping[str, Any]]
                   ) -> set[str]:
    """The vnodes of running reservations that show ``resv-exclusive``, as OpenPBS 23.06
    marks them when a reservation begins: a vnode whose ``sharing`` is force_excl or
    force_exclhost; one whose reservation asks for it (``place`` excl or exclhost, or an
    ``aoe`` in its select) unless its sharing is ignore_excl; one whose sharing is
    default_excl or default_exclhost unless the place is ``shared`` (`units.exclusivity`,
    the rule of a job's). The others are free, job-busy or job-exclusive as their jobs
    make them (checked: a plain ``select=1:ncpus=2`` reservation leaves its vnode free)."""
    out: set[str] = set()
    for resv in resvs:
        if resv.get("reserve_state") != RUNNING:
            continue
        res = resv.get("Resource_List") or {}
        place = res.get("place") if isinstance(res, Mapping) else None
        select = resv.get("schedselect") or (res.get("select") if isinstance(res, Mapping)
                                             else None)
        aoe = "aoe=" in str(select or "")
        for name, _ in parse_exec_vnode(str(resv.get("resv_nodes") or "")):
            sharing = (nodes.get(name) or {}).get("sharing")
            if name in nodes and (
                    units.exclusivity(str(place or ""), sharing) != units.SHARED or
                    (aoe and sharing != "ignore_excl")):
                out.add(name)
    return out


def resvs_on_vnodes(resvs: Mapping[str, Mapping[str, Any]], nodes: Iterable[str]
                    ) -> dict[str, list[str]]:
    """Each vnode's ``resv``: the confirmed and running reservations on it, the latest
    first, as OpenPBS 23.06 lists them (``resv = R613.vm, R612.vm``, checked; an
    unconfirmed one is on no vnode yet)."""
    known = set(nodes)
    out: dict[str, list[str]] = {}
    for resv_id in sorted(resvs, key=lambda r: (-_resv_seq(r), r)):
        resv = resvs[resv_id]
        if resv.get("reserve_state") not in (CONFIRMED, RUNNING):
            continue
        for name, _ in parse_exec_vnode(str(resv.get("resv_nodes") or "")):
            on = out.setdefault(name, []) if name in known else None
            if on is not None and resv_id not in on:
                on.append(resv_id)
    return out


def with_resv_assigned(rows: Mapping[str, Mapping[str, Any]],
                       resvs: Mapping[str, Mapping[str, Any]],
                       running: Mapping[str, Mapping[str, Any]],
                       types: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The vnodes' rows as pbsnodes shows them: a running reservation counts in its vnodes'
    ``resources_assigned`` what its ``resv_nodes`` holds, and the jobs running inside it
    add nothing (OpenPBS 23.06, checked: from the reservation's start to its end, not
    from its confirmation). Only what is shown: the scheduler and the server's own checks
    read the jobs' amounts (a job inside a reservation uses what it holds)."""
    delta: dict[str, dict[str, int]] = {}

    def add(exec_vnode: str, sign: int) -> None:
        for name, res in parse_exec_vnode(exec_vnode):
            for key, value in res.items():
                amount = resource_amount(key, value, types)
                if amount is not None and name in rows:
                    acc = delta.setdefault(name, {})
                    acc[key] = acc.get(key, 0) + sign * amount

    queues = set()
    for resv in resvs.values():
        if resv.get("reserve_state") == RUNNING:
            try:
                add(str(resv.get("resv_nodes") or ""), 1)
            except ValueError:
                continue  # (set aside at the start; shown without it until then)
            if resv.get("queue"):
                queues.add(resv["queue"])
    for job in running.values():
        if job.get("queue") in queues:
            try:
                add(str(job.get("exec_vnode") or ""), -1)
            except ValueError:
                continue
    if not delta:
        return {name: dict(row) for name, row in rows.items()}
    sizes = {k for k, t in {**values.RESOURCE_TYPES, **types}.items() if t == "size"}
    out = {}
    for name, row in rows.items():
        if name not in delta:
            out[name] = dict(row)
            continue
        shown = {k: resource_amount(k, v, types) or 0
                 for k, v in (row.get("resources_assigned") or {}).items()}
        for key, amount in delta[name].items():
            shown[key] = max(0, shown.get(key, 0) + amount)
        out[name] = {**row, "resources_assigned": {
            k: (f"{units.kilobytes(v)}kb" if k in sizes else v) for k, v in shown.items()}}
    return out


def _series_duration(attrs: Mapping[str, Any]) -> int:
    """A standing reservation's occurrences' length (pbs_ralter changes the current
    occurrence's only)."""
    return int(attrs.get("reserve_series_duration") or attrs.get("reserve_duration") or 0)


def _add_amounts(into: dict[str, dict[str, int]], exec_vnode: str,
                 types: Mapping[str, str]) -> None:
    for name, res in parse_exec_vnode(exec_vnode):
        acc = into.setdefault(name, {})
        for key, value in res.items():
            amount = resource_amount(key, value, types)
            if amount is not None:
                acc[key] = acc.get(key, 0) + amount


def _expanded(select: str) -> list[str]:
    """A select's chunks one by one, each as its resources in name order (``2:ncpus=1``
    is ``["ncpus=1", "ncpus=1"]``)."""
    out = []
    for chunk in units.parse_select(select):
        out += [":".join(f"{k}={v}" for k, v in sorted(chunk.resources.items()))] * \
            int(chunk.count)
    return out


def _chunk_counts(select: str) -> dict[str, int]:
    """How many chunks of each kind a select asks for ({} for one that does not parse)."""
    try:
        chunks = _expanded(select)
    except (TypeError, ValueError):
        return {}
    counts: dict[str, int] = {}
    for spec in chunks:
        counts[spec] = counts.get(spec, 0) + 1
    return counts


def _resv_seq(resv_id: str) -> int:
    """The number of ``R12.host`` (0 for an id without one)."""
    digits = resv_id[1:].split(".")[0]
    return int(digits) if digits.isdigit() else 0


def new_queue(resv_id: str, attrs: Mapping[str, Any]) -> dict[str, Any]:
    """A reservation's queue, as OpenPBS 23.06 makes it at pbs_rsub (checked): an execution
    queue, disabled (confirmation enables it) and stopped (its start starts it), its ACLs
    from the access lists, and ``resources_available`` and ``resources_max`` of each
    amount the reservation asks for (``ncpus``, ``mem``: not its select, place, nodect or
    walltime)."""
    asked = {k: v for k, v in (attrs.get("Resource_List") or {}).items()
             if k not in ("select", "place", "nodect", "walltime")}
    return {"queue_type": "Execution", "enabled": False, "started": False,
            "reservation": resv_id, **queue_acls(dict(attrs)),
            **({"resources_available": dict(asked), "resources_max": dict(asked)}
               if asked else {})}


def _ctime(epoch: Any) -> str:
    """A time as PBS's server log writes a reservation's (``Sun Dec 06 00:25:31 2026``)."""
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(int(epoch)))


def _group_of(user: str) -> str:
    """The user's primary group (a reservation's ``egroup``), "" for one not known here."""
    try:
        return grp.getgrgid(pwd.getpwnam(user).pw_gid).gr_name
    except KeyError:
        return ""


def queue_acls(attrs: dict[str, Any]) -> dict[str, Any]:
    """The ACLs of a reservation's queue, from its access lists (in PBS's order, each
    switched on; its users always, with its owner in them)."""
    out: dict[str, Any] = {}
    for name, (acl_name, switch) in ACCESS_LISTS.items():
        entries = attrs.get(name)
        if name == "Authorized_Users" and not entries:
            entries = [attrs.get("Reserve_Owner") or ""]
        if entries:
            out[acl_name] = acl.ordered(acl.KIND[name], dict.fromkeys(map(str, entries)),
                                        limit=None)  # (checked at pbs_rsub, or older)
            out[switch] = True
    return out

