"""The booking calendar: what each vnode holds, and when.

A booking reserves consumable resources (or the whole vnode, for an exclusive job) on one
vnode over ``[start, end)``. Running jobs, confirmed reservations, the top jobs' shadows and
jobs started in this cycle are *hard* bookings: nothing may overlap them. Estimates of the
other queued jobs are *soft*: later estimates plan around them, but a job starting now may
take their place (they are recomputed every cycle, as PBS's are).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

INFINITY = float("inf")

#: (kind, instant, whether bookings end then) -> (vnode, ncpus taken (+) or given back (-)).
_Changes = dict[tuple[int, float, int], list[tuple[str, int]]]


@dataclass(slots=True)
class Booking:
    start: float
    end: float
    resources: dict[str, int]
    exclusive: bool
    hard: bool
    owner: str
    #: What `Calendar.book` counted for it: (ncpus, started by then), or None when it
    #: ended before the calendar's `now`; `Calendar.unbook` takes exactly that back.
    applied: tuple[int, bool] | None = None


class Calendar:
    """Bookings per vnode, with capacity per vnode, seen from the instant `now`."""

    def __init__(self, capacity: dict[str, dict[str, int]], now: float = -INFINITY):
        self.capacity = capacity
        self.now = now
        self.bookings: dict[str, list[Booking]] = {name: [] for name in capacity}
        #: Bookings made and taken back so far (a caller tells from it that nothing moved).
        self.changes = 0
        # Each of the following is a pair: hard bookings only (kind 0), and hard plus soft
        # (kind 1). While no soft booking is held (a cycle without estimates, most of a
        # replay's) both of a pair are the same object, kept once (`_shared`).
        ncpus = {name: cap.get("ncpus", 0) for name, cap in capacity.items()}
        self._ncpus = dict(ncpus)  # (the capacity is never changed)
        self._shared = True
        #: Soft bookings held that count (not ended by the `now` they were booked at).
        self._soft = 0
        #: ncpus free on each vnode at `now`.
        self.room_now: tuple[dict[str, int], dict[str, int]] = (ncpus, ncpus)
        # The sum of what is free (> 0) in each, kept as they change (`free_total`).
        self._free = [sum(n for n in ncpus.values() if n > 0)] * 2
        #: The vnodes whose room now (hard bookings) came above 0 since the caller last
        #: emptied it: what a caller keeping the vnodes with room needs to look at again.
        self.opened: set[str] = set()
        #: The vnodes booked or taken back since the caller last emptied it: what a caller
        #: keeping what it read of some vnodes' bookings needs to read again.
        self.touched: set[str] = set()
        #: How many times a vnode's room now (hard bookings) went from above 0 to none:
        #: a caller keeping the vnodes with room narrows them only after one did.
        self.closed = 0
        # The changes after `now` (`timeline`): the instants, sorted; at each, the ncpus
        # each vnode takes (+) or gives back (-); and how many bookings end then. Per
        # instant, not per booking: a job's many vnodes share two instants, so booking one
        # is a few dict updates, not a sorted insertion per vnode.
        self._times: tuple[list[float], list[float]] = ([],) * 2
        self._deltas: tuple[dict[float, dict[str, int]], dict[float, dict[str, int]]] = (
            {},) * 2
        self._ending: tuple[dict[float, int], dict[float, int]] = ({},) * 2
        #: Bookings that had not started when booked (`later`), and per vnode (`rising`).
        self._later = [0, 0]
        self._rising: tuple[dict[str, list[float]], dict[str, list[float]]] = ({},) * 2
        # Per kind, once asked for (`instants`): each vnode's instants in the timeline.
        self._instants: list[dict[str, list[float]] | None] = [None, None]

    def free_total(self, kind: int) -> int:
        """The ncpus free at `now` over all vnodes: the sum of `room_now[kind]` where it is
        more than 0 (a cycle reads it without summing a thousand vnodes)."""
        return self._free[0 if self._shared else kind]

    def later(self, kind: int) -> int:
        """How many bookings start after `now` (or did, after the `now` they were booked
        at): none, and what a vnode has free at an instant it keeps until a booking ends."""
        return self._later[0 if self._shared else kind]

    def rising(self, kind: int) -> dict[str, list[float]]:
        """Per vnode, the starts of its bookings that had not started when booked, sorted
        (none: not listed). Only those take ncpus in `timeline(kind)`: a vnode gains room,
        never loses any, from `now` until the first of them. Callers only read it."""
        return self._rising[0 if self._shared else kind]

    def timeline(self, kind: int
                 ) -> tuple[list[float], dict[float, dict[str, int]], dict[float, int]]:
        """The ncpus changes after `now`: (instants sorted, vnode -> ncpus taken (+) or
        given back (-) at each, bookings ending at each). A sweep from `room_now[kind]`
        over them tells what each vnode has free at any later instant (`kind` 0: hard
        bookings only, 1: hard and soft). Callers only read them."""
        return self._times[kind], self._deltas[kind], self._ending[kind]

    def instants(self, kind: int) -> dict[str, list[float]]:
        """Each vnode's instants in `timeline(kind)`, in order (its change at each is in the
        timeline's deltas). Kept up to date from the first call on; callers only read it."""
        if self._shared:
            kind = 0
        instants = self._instants[kind]
        if instants is None:
            instants = self._instants[kind] = {}
            deltas = self._deltas[kind]
            for when in self._times[kind]:
                for vnode in deltas[when]:
                    instants.setdefault(vnode, []).append(when)
        return instants

    def _change(self, kind: int, when: float, pairs: list[tuple[str, int]], end: int) -> None:
        """At `when`, add to each vnode of `pairs` the ncpus it takes there (+) or gives
        back (-), in turn; `end`: bookings ending then (+) or taken back (-)."""
        deltas = self._deltas[kind]
        at = deltas.get(when)
        if at is None:
            at = deltas[when] = {}
            bisect.insort(self._times[kind], when)
        instants = self._instants[kind]
        if instants is None:  # the common case, kept apart from the index's upkeep
            get, pop = at.get, at.pop
            for vnode, used in pairs:
                total = get(vnode, 0) + used
                if total:
                    at[vnode] = total
                else:
                    pop(vnode, None)
        else:
            get, insort, bisect_left = at.get, bisect.insort, bisect.bisect_left
            for vnode, used in pairs:
                before = get(vnode)  # (never 0: a change that comes to none is dropped)
                if before is None:
                    if used:  # the vnode's first change at this instant
                        at[vnode] = used
                        mine = instants.get(vnode)
                        if mine is None:
                            instants[vnode] = [when]
                        else:
                            insort(mine, when)
                elif before + used:
                    at[vnode] = before + used
                else:  # its last change at this instant taken back
                    del at[vnode]
                    mine = instants[vnode]
                    del mine[bisect_left(mine, when)]
        ending = self._ending[kind]
        if end:
            count = ending.get(when, 0) + end
            if count:
                ending[when] = count
            else:
                del ending[when]
        if not at and when not in ending:
            del deltas[when]
            times = self._times[kind]
            del times[bisect.bisect_left(times, when)]

    def _separate(self) -> None:
        """Kind 1 made a copy of kind 0, before a soft booking is first counted in it."""
        self._shared = False
        self.room_now = (self.room_now[0], dict(self.room_now[0]))
        self._free[1], self._later[1] = self._free[0], self._later[0]
        self._times = (self._times[0], list(self._times[0]))
        self._deltas = (self._deltas[0], {when: dict(at) for when, at in self._deltas[0].items()})
        self._ending = (self._ending[0], dict(self._ending[0]))
        self._rising = (self._rising[0], {v: list(at) for v, at in self._rising[0].items()})
        self._instants[1] = None  # (built again when read)

    def _share(self) -> None:
        """Kind 1 is kind 0 again: the last soft booking counted was taken back."""
        self._shared = True
        self.room_now = (self.room_now[0],) * 2
        self._times, self._deltas, self._ending, self._rising = (
            (self._times[0],) * 2, (self._deltas[0],) * 2, (self._ending[0],) * 2,
            (self._rising[0],) * 2)
        self._instants[1] = None

    def book(self, vnode: str, booking: Booking) -> None:
        self.book_all(((vnode, booking),))

    def unbook(self, vnode: str, booking: Booking) -> None:
        self.unbook_all(((vnode, booking),))

    def book_all(self, items: Iterable[tuple[str, Booking]]) -> None:
        """Book each (vnode, booking) in turn; the timeline's changes are made per
        instant (a job's vnodes share two), in the same order."""
        changes: _Changes = {}
        now, ncpus_of, bookings = self.now, self._ncpus, self.bookings
        if self._shared:
            items = list(items)
            if any(not b.hard and b.end > now for _, b in items):
                self._separate()
        count = soft = 0
        # The run of alike bookings so far: its (start, end, hard, started), told apart
        # field by field (a job's hundreds of bookings are alike: no key made for each;
        # none yet: the first booking's start differs from None).
        run_key: tuple = ()
        run_start = run_end = run_hard = run_started = None
        run: list[tuple[str, int]] = []  # (vnode, ncpus) of a run of alike bookings
        touch = self.touched.add
        for vnode, booking in items:
            count += 1
            touch(vnode)
            bookings[vnode].append(booking)
            start, end = booking.start, booking.end
            if end <= now:
                booking.applied = None
                continue
            cap = ncpus_of[vnode]
            if booking.exclusive:
                used = cap
            else:
                used = booking.resources.get("ncpus", 0)
                if not used < cap:  # (min(cap, used), which gives cap on a tie)
                    used = cap
            started = start <= now
            booking.applied = (used, started)
            hard = booking.hard
            if not hard:
                soft += 1
            if start != run_start or end != run_end or hard is not run_hard or \
                    started is not run_started:
                if run:
                    self._note_run(changes, run_key, run, 1)
                run_start, run_end, run_hard, run_started = start, end, hard, started
                run_key, run = (start, end, hard, started), []
            run.append((vnode, used))
        if run:
            self._note_run(changes, run_key, run, 1)
        self._soft += soft
        self.changes += count
        for (kind, when, ends), pairs in changes.items():
            self._change(kind, when, pairs, len(pairs) if ends else 0)

    def unbook_all(self, items: Iterable[tuple[str, Booking]]) -> None:
        """Take back each (vnode, booking) `book` made, in turn (a caller that keeps a
        calendar between cycles removes what ended, and what one cycle planned)."""
        changes: _Changes = {}
        if not self._shared:
            items = list(items)
            if sum(1 for _, b in items if not b.hard and b.applied is not None) == self._soft:
                # Every soft booking counted goes (a cycle's estimates, at its end): kind 1
                # would end as kind 0 again (`_share`), so it is made so now, and neither
                # the soft bookings nor the hard ones are taken back from it one by one.
                self._share()
        shared = self._shared
        bookings = self.bookings
        count = soft = 0
        run_key: tuple = ()  # as in `book_all`
        run_start = run_end = run_hard = run_started = None
        run: list[tuple[str, int]] = []
        touch = self.touched.add
        for vnode, booking in items:
            count += 1
            touch(vnode)
            kept = bookings[vnode]
            if kept and kept[-1] is booking:  # mostly the last one booked there
                del kept[-1]
            else:
                for i in range(len(kept) - 2, -1, -1):
                    if kept[i] is booking:
                        del kept[i]
                        break
                else:
                    continue
            applied = booking.applied
            if applied is None:
                continue
            used, started = applied
            hard = booking.hard
            if not hard:
                soft += 1
                if shared:  # (counted in kind 1 alone, which is kind 0 again)
                    continue
            start, end = booking.start, booking.end
            if start != run_start or end != run_end or hard is not run_hard or \
                    started is not run_started:
                if run:
                    self._note_run(changes, run_key, run, -1)
                run_start, run_end, run_hard, run_started = start, end, hard, started
                run_key, run = (start, end, hard, started), []
            run.append((vnode, used))
        if run:
            self._note_run(changes, run_key, run, -1)
        self._soft -= soft
        self.changes += count
        for (kind, when, ends), pairs in changes.items():
            self._change(kind, when, pairs, -len(pairs) if ends else 0)
        if not self._soft and not self._shared:
            self._share()

    def _note_run(self, changes: _Changes, key: tuple, run: list[tuple[str, int]],
                  sign: int) -> None:
        """Book (`sign` 1) or take back (-1) a run of bookings alike in (start, end, hard,
        started by now), (vnode, ncpus) each: the room now of those started, else a
        change at their start; and a change at their end. Hard bookings count in both
        kinds (0 first), soft ones in kind 1 only; the changes are noted in `changes`,
        per (kind, instant, whether it is an end), in the order first met (kind 1 is kind
        0 while they are shared: a hard booking is counted once)."""
        start, end, hard, started = key
        for kind in ((0,) if self._shared else (0, 1)) if hard else (1,):
            if started:
                room, free = self.room_now[kind], self._free[kind]
                if kind:
                    for vnode, used in run:
                        before = room[vnode]
                        after = room[vnode] = before - sign * used
                        free += (after if after > 0 else 0) - (before if before > 0 else 0)
                else:  # (kind 0 also tells which vnodes opened and how many closed)
                    opened, closed = self.opened.add, 0
                    for vnode, used in run:
                        before = room[vnode]
                        after = room[vnode] = before - sign * used
                        free += (after if after > 0 else 0) - (before if before > 0 else 0)
                        if after > 0 >= before:
                            opened(vnode)
                        elif before > 0 >= after:
                            closed += 1
                    self.closed += closed
                self._free[kind] = free
            else:
                self._later[kind] += sign * len(run)
                rising = self._rising[kind]
                for vnode, _ in run:
                    if sign > 0:
                        starts = rising.get(vnode)
                        if starts is None:
                            rising[vnode] = [start]
                        else:
                            bisect.insort(starts, start)
                    elif len(starts := rising[vnode]) == 1:
                        del rising[vnode]
                    else:
                        del starts[bisect.bisect_left(starts, start)]
                at = changes.setdefault((kind, start, 0), [])
                at.extend(run if sign > 0 else [(vnode, -used) for vnode, used in run])
            if end < INFINITY:
                at = changes.setdefault((kind, end, 1), [])
                at.extend(run if sign < 0 else [(vnode, -used) for vnode, used in run])

    def free(self, vnode: str, start: float, end: float, soft: bool
             ) -> tuple[dict[str, int], bool] | None:
        """What `vnode` has free over the whole of [start, end): (resources, empty), where
        `empty` says nothing at all is booked there (an exclusive job needs that); None when
        an exclusive booking overlaps. `soft` counts soft bookings too."""
        cap = self.capacity[vnode]  # (callers only read it)
        held = self.bookings[vnode]
        if not held:
            return cap, True
        overlapping = [b for b in held  # one of no length holds nothing
                       if b.start < end and b.end > start and b.end > b.start
                       and (soft or b.hard)]
        if not overlapping:
            return cap, True
        if any(b.exclusive for b in overlapping):
            return None
        if len(overlapping) == 1:
            used = overlapping[0].resources
            return {k: v - used.get(k, 0) for k, v in cap.items()}, False
        # Peak use over the window: sweep the bookings' starts and ends.
        events: list[tuple[float, int, dict[str, int]]] = []
        for b in overlapping:
            events.append((max(b.start, start), 1, b.resources))
            events.append((b.end, -1, b.resources))
        events.sort(key=lambda e: (e[0], e[1]))  # ends before starts at the same time
        current: dict[str, int] = {}
        peak: dict[str, int] = {}
        for _, sign, res in events:
            for k, v in res.items():
                current[k] = current.get(k, 0) + sign * v
                if sign > 0 and current[k] > peak.get(k, 0):
                    peak[k] = current[k]
        return {k: v - peak.get(k, 0) for k, v in cap.items()}, False

