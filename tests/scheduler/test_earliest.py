"""The earliest-start search against a plain one, on random calendars.

`Scheduler._earliest` sweeps the calendar's changes, places jobs of alike ncpus-only chunks
from counts, and passes over starts a second sweep ahead proves too short of room. The plain
search here tries the general first fit (`_fit`, with `Calendar.free`) at every candidate
start in turn. Plans are stacked as a cycle stacks estimates and top jobs, so later jobs
plan around earlier ones' later starts: both searches must give the same start and vnodes.
The calendar books a job's vnodes at once; that too is checked against booking each in turn.
"""

from __future__ import annotations

import dataclasses
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbsplug.scheduler import Policy, Scheduler
from pbsplug.scheduler.calendar import INFINITY, Booking, Calendar

from .helpers import NOW, job, resv, running, snapshot, vnode

EXAMPLES = int(os.environ.get("PBSPLUG_PROPERTY_EXAMPLES", "80"))
UNIT = 600  # seconds per walltime unit


def hhmmss(units: int) -> str:
    seconds = units * UNIT
    return f"{seconds // 3600:02d}:{seconds % 3600 // 60:02d}:00"


def plain_earliest(sched: Scheduler, info, now: float, soft: bool):
    """The first candidate start (now, or any booking's end) where the job fits."""
    ends = {b.end for bookings in sched.calendar.bookings.values() for b in bookings
            if (soft or b.hard) and now < b.end < INFINITY}
    for t in sorted({now} | ends):
        candidates = [v for v in sched.order if v.plan_from <= t]
        chunks = sched._fit(info, t, info.end(t), soft=soft, now_mode=False,
                            candidates=candidates)
        if chunks is not None:
            return t, chunks
    return INFINITY, None


@st.composite
def scenes(draw):
    names = [f"n{i}" for i in range(draw(st.integers(2, 6)))]
    cpus = {n: draw(st.integers(1, 8)) for n in names}
    vnodes = [vnode(n, ncpus=cpus[n], mem="16gb", host=f"h{i // 2}")
              for i, n in enumerate(names)]
    room = dict(cpus)
    jobs = []
    for _ in range(draw(st.integers(0, 6))):
        name = draw(st.sampled_from(names))
        if room[name] == 0:
            continue
        n = draw(st.integers(1, room[name]))
        room[name] -= n
        hours = draw(st.integers(1, 6))
        jobs.append(running(f"1:ncpus={n}", f"({name}:ncpus={n})",
                            walltime=hhmmss(hours),
                            started=NOW - draw(st.integers(0, 300))))
    plans = []
    for _ in range(draw(st.integers(1, 8))):
        count = draw(st.integers(1, 6))
        ncpus = draw(st.integers(1, 4))
        select = f"{count}:ncpus={ncpus}"
        if draw(st.booleans()) and draw(st.booleans()):
            select += ":mem=2gb"  # not placed from counts
        place = draw(st.sampled_from([None, None, "scatter", "pack"]))
        units = draw(st.integers(1, 8))
        plans.append((job(select, hhmmss(units), place=place), draw(st.booleans()),
                      draw(st.booleans())))
    return vnodes, jobs, plans


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenes())
def test_earliest_matches_a_plain_search(scene):
    vnodes, jobs, plans = scene
    sched = Scheduler(policy=Policy(estimate_limit=0))
    snap = snapshot(vnodes, jobs)
    sched.cycle(snap, NOW)  # keeps the vnodes and a calendar of the running jobs
    for queued, soft, book_hard in plans:
        info = sched._job_info(queued, snap.queues["workq"], snap.server, NOW, snap.queues)
        want = plain_earliest(sched, info, NOW, soft)
        got = sched._earliest(info, NOW, soft)
        assert got == want, (queued.Resource_List, soft)
        if got[1] is not None:  # stacked, as a cycle's plans are
            sched._book_chunks(queued.id, got[1], info.place, got[0], info.end(got[0]),
                               hard=book_hard)


def test_a_start_the_room_ahead_rules_out_is_passed_over():
    """A hand-made case for the sweep ahead: two vnodes, one cpu each. A one-hour job holds
    n0 and a soft plan takes both from 1 h to 3 h. A two-cpu job of 2 h cannot start now or
    at 1 h (both windows cross the plan); it starts at 3 h, when the plan ends."""
    sched = Scheduler(policy=Policy(estimate_limit=0))
    vnodes = [vnode("n0", ncpus=1), vnode("n1", ncpus=1)]
    snap = snapshot(vnodes, [running("1:ncpus=1", "(n0:ncpus=1)", walltime="01:00:00")])
    sched.cycle(snap, NOW)
    plan = sched._job_info(job("2:ncpus=1", "02:00:00"), snap.queues["workq"], snap.server,
                           NOW, snap.queues)
    start, chunks = sched._earliest(plan, NOW, soft=True)
    assert start == NOW + 3600 and sorted(v for v, _ in chunks) == ["n0", "n1"]
    sched._book_chunks("plan", chunks, plan.place, start, plan.end(start), hard=False)
    wide = sched._job_info(job("2:ncpus=1", "02:00:00"), snap.queues["workq"], snap.server,
                           NOW, snap.queues)
    assert sched._earliest(wide, NOW, soft=True)[0] == NOW + 3 * 3600
    assert sched._earliest(wide, NOW, soft=False)[0] == NOW + 3600  # hard bookings only



def test_an_estimate_starts_no_sooner_than_one_of_its_shape_before_it(monkeypatch):
    """Room only shrinks during a cycle: an estimate of the same shape as one made before
    it, for as long a window or longer, starts no sooner, and the starts before are not
    tried again; a shorter window may start sooner. Two vnodes of one cpu: a job holds n0
    for 1 h and a top job plan takes both from 1 h to 2 h."""
    sched = Scheduler(policy=Policy(estimate_limit=0))
    vnodes = [vnode("n0", ncpus=1), vnode("n1", ncpus=1)]
    snap = snapshot(vnodes, [running("1:ncpus=1", "(n0:ncpus=1)", walltime="01:00:00")])
    sched.cycle(snap, NOW)
    sched._floors = {}  # as in a cycle's run loop

    def info(select, walltime):
        return sched._job_info(job(select, walltime), snap.queues["workq"], snap.server,
                               NOW, snap.queues)

    def plan(what, soft):
        start, chunks = sched._earliest(what, NOW, soft=soft)
        if chunks is not None:
            sched._book_chunks(what.job.id, chunks, what.place, start, what.end(start),
                               hard=not soft)
        return start, sorted(name for name, _ in (chunks or ()))

    assert plan(info("2:ncpus=1", "01:00:00"), soft=False) == (NOW + 3600, ["n0", "n1"])
    tries = []
    real_fill = Scheduler._fill
    monkeypatch.setattr(Scheduler, "_fill", lambda self, job, candidates, *rest: (
        tries.append(job.job.id), real_fill(self, job, candidates, *rest))[1])
    first = info("1:ncpus=1", "02:00:00")
    assert plan(first, soft=True) == (NOW + 7200, ["n0"])
    assert len(tries) == 2  # now (n1 is taken at 1 h), then 2 h (1 h: passed over ahead)
    tries.clear()
    assert plan(info("1:ncpus=1", "02:00:00"), soft=True) == (NOW + 7200, ["n1"])
    assert len(tries) == 1  # only from 2 h on: now was tried for the first
    assert plan(info("1:ncpus=1", "00:30:00"), soft=True) == (NOW, ["n1"])  # shorter
    fits = []
    real_fit = Scheduler._fit
    monkeypatch.setattr(Scheduler, "_fit", lambda self, job, *rest, **kw: (
        fits.append(job.job.id), real_fit(self, job, *rest, **kw))[1])
    never = "1:ncpus=1:mem=64gb"  # more memory than any vnode has
    assert plan(info(never, "00:10:00"), soft=True) == (INFINITY, []) and fits
    fits.clear()
    assert plan(info(never, "00:20:00"), soft=True) == (INFINITY, [])
    assert not fits  # known never to fit: not tried anywhere


def calendar_state(cal: Calendar) -> tuple:
    for kind in (0, 1):  # the kept total is what summing the room gives
        assert cal.free_total(kind) == sum(n for n in cal.room_now[kind].values() if n > 0)
        # and the starts of the bookings still to start are those the bookings give
        rising = {vnode: sorted(b.start for b in held if b.applied is not None
                                and not b.applied[1] and (kind or b.hard))
                  for vnode, held in cal.bookings.items()}
        assert cal.rising(kind) == {vnode: at for vnode, at in rising.items() if at}
        assert sum(map(len, rising.values())) == cal.later(kind)
    return (cal.room_now, cal.timeline(0), cal.timeline(1), cal.instants(0), cal.instants(1),
            cal.later(0), cal.later(1), cal.changes, cal.bookings, cal.free_total(0),
            cal.free_total(1), cal.rising(0), cal.rising(1))


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-2, 4),
                          st.integers(1, 4), st.integers(0, 3), st.booleans(), st.booleans()),
                min_size=1, max_size=12),
       st.lists(st.integers(0, 11), max_size=12))
def test_booking_at_once_is_booking_in_turn(specs, gone):
    """`Calendar.book_all` and `unbook_all` leave the calendar as `book` and `unbook` of
    each in turn do: the same room, timeline, index and bookings; and the free total each
    keeps is the room's (exclusive bookings take a vnode below nothing free)."""
    def bookings():
        return [(name, Booking(NOW + start * UNIT, NOW + (start + length) * UNIT,
                               {"ncpus": ncpus}, exclusive, hard, "j"))
                for name, start, length, ncpus, exclusive, hard in specs]

    taken = list(dict.fromkeys(i for i in gone if i < len(specs)))
    one, many = (Calendar({v: {"ncpus": 4} for v in "abc"}, NOW) for _ in range(2))
    one.instants(0)  # an index kept from the start (the other is built when read)
    many.instants(1)
    in_turn, at_once = bookings(), bookings()
    for name, booking in in_turn:
        one.book(name, booking)
    many.book_all(at_once)
    assert calendar_state(one) == calendar_state(many)
    assert one.closed == many.closed
    for i in taken:
        one.unbook(*in_turn[i])
    many.unbook_all(at_once[i] for i in taken)
    assert calendar_state(one) == calendar_state(many)
    assert one.closed == many.closed


def test_the_calendar_notes_the_vnodes_booked_or_taken_back():
    """`Calendar.touched` names every vnode booked or taken back since the caller emptied
    it, a booking that ended before now too: a scheduler keeps what it read of the others'
    bookings from cycle to cycle."""
    cal = Calendar({v: {"ncpus": 4} for v in "abc"}, NOW)
    later = Booking(NOW + 10, NOW + 60, {"ncpus": 2}, False, True, "1")
    cal.book_all([("a", later), ("b", Booking(NOW - 9, NOW - 1, {"ncpus": 1}, False, True, "2"))])
    assert cal.touched == {"a", "b"}
    cal.touched.clear()
    cal.book("c", Booking(NOW, NOW + 5, {"ncpus": 1}, False, False, "3"))  # soft
    assert cal.touched == {"c"}
    cal.touched.clear()
    cal.unbook("a", later)
    cal.unbook("b", Booking(NOW, NOW + 1, {}, False, True, "never booked"))
    assert cal.touched == {"a", "b"}


def test_the_calendar_counts_the_vnodes_whose_room_now_ran_out():
    """`Calendar.closed` counts each time a vnode's room now (hard bookings) went from some
    to none, and `opened` notes the vnodes given some back: a scheduler filters its vnodes
    with room again only after one ran out."""
    cal = Calendar({v: {"ncpus": 4} for v in "ab"}, NOW)
    whole = Booking(NOW - 1, NOW + 60, {"ncpus": 4}, False, True, "1")
    cal.book_all([("a", whole), ("b", Booking(NOW, NOW + 60, {"ncpus": 2}, False, True, "2"))])
    assert (cal.closed, cal.opened) == (1, set())
    cal.book("b", Booking(NOW + 10, NOW + 60, {"ncpus": 2}, False, True, "3"))  # later
    cal.book("a", Booking(NOW, NOW + 60, {"ncpus": 1}, False, False, "4"))  # soft
    assert cal.closed == 1
    cal.unbook("a", whole)
    assert (cal.closed, cal.opened) == (1, {"a"})
    cal.book("a", Booking(NOW, NOW + 60, {"ncpus": 4}, True, True, "5"))  # exclusive
    assert cal.closed == 2


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-2, 4),
                          st.integers(1, 4), st.integers(0, 3), st.booleans(), st.booleans()),
                min_size=1, max_size=12),
       st.lists(st.integers(0, 11), max_size=12), st.booleans())
def test_taking_bookings_back_leaves_what_booking_the_others_gives(specs, gone, hard_first):
    """Booking all and taking some back leaves the calendar as booking only the others
    does. The hard-and-soft view is the hard one's own objects while no soft booking is
    held, and a copy kept apart while one is: made at the first soft booking, given up
    when the last is taken back (`hard_first`: the soft ones booked after)."""
    def bookings():
        made = [(name, Booking(NOW + start * UNIT, NOW + (start + length) * UNIT,
                               {"ncpus": ncpus}, exclusive, hard, "j"))
                for name, start, length, ncpus, exclusive, hard in specs]
        return sorted(made, key=lambda item: not item[1].hard) if hard_first else made

    taken = sorted({i for i in gone if i < len(specs)})
    kept, fresh = (Calendar({v: {"ncpus": 4} for v in "abc"}, NOW) for _ in range(2))
    made, others = bookings(), bookings()
    for item in made:
        kept.book(*item)
    kept.unbook_all(made[i] for i in taken)
    fresh.book_all(item for i, item in enumerate(others) if i not in taken)

    def state(cal: Calendar) -> tuple:
        whole = calendar_state(cal)
        return whole[:7] + whole[8:]  # (not `changes`: how many were made and taken back)

    assert state(kept) == state(fresh)
    held = any(not b.hard and b.applied is not None
               for i, (_, b) in enumerate(made) if i not in taken)
    assert (kept.room_now[0] is kept.room_now[1]) is not held


@settings(max_examples=EXAMPLES, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(-2, 4),
                          st.integers(1, 4), st.integers(0, 3), st.booleans(), st.booleans()),
                min_size=1, max_size=12),
       st.lists(st.booleans(), min_size=12, max_size=12))
def test_taking_back_every_soft_booking_at_once_leaves_the_hard_ones(specs, hard_gone):
    """A cycle's end takes back all its estimates (soft) with some hard bookings in one
    `unbook_all`, which then gives up the hard-and-soft view at once instead of taking each
    booking back from it: the calendar is as booking only the hard ones left gives."""
    def bookings():
        return [(name, Booking(NOW + start * UNIT, NOW + (start + length) * UNIT,
                               {"ncpus": ncpus}, exclusive, hard, "j"))
                for name, start, length, ncpus, exclusive, hard in specs]

    kept, fresh = (Calendar({v: {"ncpus": 4} for v in "abc"}, NOW) for _ in range(2))
    kept.instants(1)  # (an index kept from the start, in the view given up too)
    made, others = bookings(), bookings()
    kept.book_all(made)
    taken = [i for i, (_, b) in enumerate(made) if not b.hard or hard_gone[i]]
    kept.unbook_all(made[i] for i in reversed(taken))
    fresh.book_all(item for i, item in enumerate(others) if i not in taken)

    def state(cal: Calendar) -> tuple:
        whole = list(calendar_state(cal))
        whole[3:5] = [{v: at for v, at in index.items() if at} for index in whole[3:5]]
        return tuple(whole[:7] + whole[8:])  # (an index may keep a vnode with no instant)

    assert state(kept) == state(fresh)
    assert kept.room_now[0] is kept.room_now[1]


def test_a_booking_made_before_its_start_weighs_on_a_job_starting_now():
    """A running job booked by a cycle before its start time (a server clock ahead of the
    scheduler's) is not in the room now of the next cycle's calendar, only in its bookings:
    a job starting now is placed from the bookings then. n0 (4 cpus) holds 2 for that job
    and is to hold 1 more for a reservation within the new job's window, so a 2-cpu job
    goes to n1."""
    sched = Scheduler(policy=Policy(estimate_limit=0))
    vnodes = [vnode("n0", ncpus=4), vnode("n1", ncpus=4)]
    early = running("1:ncpus=2", "(n0:ncpus=2)", walltime="01:00:00", started=NOW + 5)
    first = dataclasses.replace(snapshot(vnodes, [early]), vnodes_version=1)
    sched.cycle(first, NOW)  # the calendar is kept: same vnodes, same version
    held = resv("R1.srv", "1:ncpus=1", NOW + 400, NOW + 500, state="CONFIRMED",
                resv_nodes="(n0:ncpus=1)")
    wide = job("1:ncpus=2", "00:10:00")
    result = sched.cycle(dataclasses.replace(first, jobs=[early, wide], reservations=[held]),
                         NOW + 10)
    assert [(d.job_id, d.exec_vnode) for d in result.run] == [(wide.id, "(n1:ncpus=2)")]
