"""Properties over random small clusters and workloads, with cycles repeated as time moves on.

- no vnode is ever over-committed, and an exclusive job is alone on its vnodes;
- no job gets less than its chunks ask;
- no job overlaps a confirmed reservation on the reservation's resources;
- every job that fits the empty machine eventually runs.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pbsplug.objects import Reservation
from pbsplug.scheduler import Policy, Scheduler, parse_exec_vnode
from pbsplug.scheduler.model import job_select, resource_amount
from pbsplug.units import EXCLHOST, SHARED, VNODE_SHARING, exclusivity, parse_place

from .helpers import NOW, job, resv, snapshot, vnode

UNIT = 600  # seconds per walltime unit
#: More examples for a deeper search: PBSPLUG_PROPERTY_EXAMPLES=1000 pytest tests/scheduler
EXAMPLES = int(os.environ.get("PBSPLUG_PROPERTY_EXAMPLES", "80"))


@st.composite
def clusters(draw):
    vnodes = []
    for h in range(draw(st.integers(1, 3))):
        for v in range(draw(st.integers(1, 3))):
            vnodes.append(vnode(f"h{h}v{v}", ncpus=draw(st.integers(1, 6)),
                                mem=f"{draw(st.integers(1, 8))}gb", host=f"h{h}",
                                sharing=draw(st.sampled_from((None,) + VNODE_SHARING))))
    return vnodes


@st.composite
def workloads(draw):
    jobs = []
    for i in range(draw(st.integers(1, 10))):
        chunks = [f"{draw(st.integers(1, 2))}:ncpus={draw(st.integers(1, 4))}"
                  f":mem={draw(st.integers(1, 4))}gb" for _ in range(draw(st.integers(1, 2)))]
        place = draw(st.sampled_from([None, "scatter", "pack", "vscatter", "excl",
                                      "scatter:excl", "shared", "exclhost"]))
        walltime = draw(st.integers(1, 6)) * UNIT
        jobs.append(job("+".join(chunks), f"{walltime // 3600:02d}:{walltime % 3600 // 60:02d}:00",
                        id=f"{i + 1}.s", place=place, qtime=NOW - 100 + i))
    resvs = []
    for i in range(draw(st.integers(0, 2))):
        start = NOW + draw(st.integers(0, 8)) * UNIT
        resvs.append(resv(f"R{i}", f"1:ncpus={draw(st.integers(1, 4))}", start,
                          start + draw(st.integers(1, 4)) * UNIT, ctime=i))
    return jobs, resvs


def chunk_demand(j):
    return [dict((k, resource_amount(k, v)) for k, v in c.resources.items())
            for c in job_select(j) for _ in range(c.count)]


def check_state(vnodes, running, confirmed, now):
    """Over-commitment, exclusivity and reservations, at time `now`."""
    by_name = {v.name: v for v in vnodes}
    use = {n: {"ncpus": 0, "mem": 0} for n in by_name}
    holders = {n: [] for n in by_name}
    for j in running:
        for name, res in parse_exec_vnode(j.exec_vnode):
            for k in ("ncpus", "mem"):
                use[name][k] += resource_amount(k, res.get(k, 0)) or 0
            if j not in holders[name]:
                holders[name].append(j)
    for r in confirmed:
        if r.reserve_start <= now < r.reserve_end:
            continue  # a running reservation's resources are its jobs' (none here)
        for name, res in parse_exec_vnode(r.resv_nodes):
            overlapping = [j for j in holders[name]
                           if j.stime + j.Resource_List.seconds("walltime") > r.reserve_start]
            used = sum(resource_amount("ncpus", rr.get("ncpus", 0)) or 0
                       for j in overlapping for n2, rr in parse_exec_vnode(j.exec_vnode)
                       if n2 == name)
            cap = by_name[name].resources_available["ncpus"]
            assert used + int(res.get("ncpus", 0)) <= cap, (name, r.name, used)
            if not res:  # the rest of a host it holds exclhost: nobody else's meanwhile
                assert not overlapping, (name, r.name)
    for name, v in by_name.items():
        cap = v.resources_available
        assert use[name]["ncpus"] <= cap["ncpus"], (name, use[name])
        assert use[name]["mem"] <= resource_amount("mem", cap["mem"]), (name, use[name])
        for j in holders[name]:
            level = exclusivity(parse_place(j.Resource_List["place"]), v.sharing)
            if level != SHARED:
                assert {x.id for x in holders[name]} == {j.id}, (name, j.id)
            if level == EXCLHOST:  # the whole host is the job's, its shared vnodes too
                host = cap["host"]
                for other in by_name.values():
                    if other.resources_available["host"] == host:
                        assert {x.id for x in holders[other.name]} <= {j.id}, (
                            other.name, j.id)


def with_rest_of_hosts(vnodes, j, names):
    """The vnodes of a job's exec_vnode placed on `names`, as PBS lists them: after the
    job's last chunk on each host one of them gives it whole (exclhost), that host's
    other vnodes, in the vnodes' order."""
    by_name = {v.name: v for v in vnodes}
    place = parse_place(j.Resource_List["place"])

    def host(name):
        return by_name[name].resources_available["host"]

    whole = {host(n) for n in names if exclusivity(place, by_name[n].sharing) == EXCLHOST}
    last = {host(n): i for i, n in enumerate(names)}
    out = []
    for i, name in enumerate(names):
        out.append(name)
        if host(name) in whole and last[host(name)] == i:
            out += sorted(v.name for v in vnodes
                          if host(v.name) == host(name) and v.name not in names)
    return out


def fits_empty(vnodes, j):
    result = Scheduler().cycle(snapshot([vnode(v.name, v.resources_available["ncpus"],
                                               v.resources_available["mem"],
                                               host=v.resources_available["host"],
                                               sharing=v.sharing) for v in vnodes],
                                        [job(j.Resource_List["select"], "01:00:00", id="x.s",
                                             place=j.Resource_List["place"])]), NOW)
    return bool(result.run)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.booleans(), st.integers(0, 2))
def test_random_workloads(vnodes, workload, strict, depth):
    jobs, resvs = workload
    sched = Scheduler(policy=Policy(strict_ordering=strict, backfill_depth=depth))
    queued = {j.id: j for j in jobs}
    running, done, confirmed = [], [], []
    pending = list(resvs)
    now = NOW
    for _ in range(60):
        snap = snapshot(vnodes, list(queued.values()) + running,
                        reservations=pending + confirmed)
        result = sched.cycle(snap, now)
        for d in result.reservations:
            r = next(x for x in pending if x.name == d.resv_id)
            pending.remove(r)
            if d.confirmed:  # (as the server confirms it: its own fields, not a hook's)
                confirmed.append(Reservation(r.name, {**r.to_dict(), "reserve_state":
                                                      "CONFIRMED",
                                                      "resv_nodes": d.resv_nodes}))
        for decision in result.run:
            j = queued.pop(decision.job_id)
            # Every chunk is given exactly what it asked for; then, with no resources, the
            # rest of each host it holds whole (exclhost), as PBS lists them.
            own = [(name, res) for name, res in decision.chunks if res]
            given = [dict((k, resource_amount(k, v)) for k, v in res.items())
                     for _, res in own]
            assert given == chunk_demand(j)
            assert [name for name, _ in decision.chunks] == with_rest_of_hosts(
                vnodes, j, [name for name, _ in own])
            j.job_state, j.exec_vnode, j.stime = "R", decision.exec_vnode, now
            running.append(j)
        check_state(vnodes, running, confirmed, now)
        ends = [j.stime + j.Resource_List.seconds("walltime") for j in running]
        ends += [t for r in confirmed for t in (r.reserve_start, r.reserve_end) if t > now]
        if not queued or not ends:
            break
        now = min(t for t in ends if t > now) if any(t > now for t in ends) else now + UNIT
        for j in [j for j in running if j.stime + j.Resource_List.seconds("walltime") <= now]:
            running.remove(j)
            done.append(j)
        confirmed = [r for r in confirmed if r.reserve_end > now]
    starved = [j.id for j in queued.values() if fits_empty(vnodes, j)]
    assert not starved, f"jobs that fit the empty machine never ran: {starved}"


def test_a_booking_of_no_length_holds_nothing():
    """A 0 s exclusive booking (a job of walltime 0) takes no room over any window: the
    calendar's answer for a window agrees with its timeline, which nets it out."""
    from pbsplug.scheduler.calendar import Booking, Calendar

    cal = Calendar({"a": {"ncpus": 4}}, now=0)
    cal.book("a", Booking(0, 100, {"ncpus": 1}, False, True, "j1"))
    cal.book("a", Booking(50, 50, {}, True, True, "j0"))
    cal.book("a", Booking(60, 90, {"ncpus": 1}, False, True, "j2"))
    free = cal.free("a", 10, 80, soft=False)
    assert free is not None and free[0]["ncpus"] == 2
