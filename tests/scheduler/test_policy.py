"""Hand-made scenarios: each test works out the right answer from PBS's rules."""

from dataclasses import replace

import pytest

from pbsplug import Queue, Server
from pbsplug.scheduler import UNKNOWN_WALLTIME, JobLog, Policy, Scheduler, Snapshot
from pbsplug.units import VNODE_SHARING, exclusivity

from .helpers import HOUR, NOW, job, resv, running, snapshot, vnode


def cycle(snap, **policy):
    return Scheduler(policy=Policy(**policy)).cycle(snap, NOW)


def started(result):
    return {r.job_id: r.exec_vnode for r in result.run}


def test_fifo_first_come_first_served():
    a, b = job("1:ncpus=4", id="1.s"), job("1:ncpus=4", id="2.s")
    result = cycle(snapshot([vnode("n1")], [b, a]))
    assert started(result) == {"1.s": "(n1:ncpus=4)"}
    # The second job starts when the first ends, on the same vnode.
    assert result.estimates["2.s"].start_time == NOW + HOUR
    assert result.estimates["2.s"].exec_vnode == "(n1:ncpus=4)"


def test_queue_priority_then_submit_time():
    queues = {"low": Queue("low", {"Priority": 10}), "high": Queue("high", {"Priority": 100})}
    early = job("1:ncpus=4", id="1.s", queue="low", qtime=NOW - 500)
    late = job("1:ncpus=4", id="2.s", queue="high", qtime=NOW - 10)
    assert set(started(cycle(snapshot([vnode("n1")], [early, late], queues)))) == {"2.s"}


def test_job_sort_formula_orders_within_a_queue():
    small = job("1:ncpus=1", id="1.s")
    big = job("1:ncpus=4", id="2.s")
    result = cycle(snapshot([vnode("n1")], [small, big]), job_sort_formula="ncpus * 10")
    assert started(result) == {"2.s": "(n1:ncpus=4)"}
    with pytest.raises(ValueError, match="Call is not allowed"):
        Scheduler(policy=Policy(job_sort_formula="__import__('os')"))


def test_a_size_takes_what_exec_vnode_shows_in_kilobytes_rounded_up():
    """exec_vnode shows ``1500b`` as ``2kb``, and the chunk takes 2kb: two such jobs did
    share a ``3000b`` vnode in one cycle (their exec_vnodes then holding 4kb of it), while
    the second was refused when the first was already running."""
    jobs = [job("1:ncpus=1:mem=1500b", id=f"{i}.s") for i in (1, 2)]
    first = cycle(snapshot([vnode("n1", ncpus=4, mem="3000b")], jobs))
    assert started(first) == {"1.s": "(n1:ncpus=1:mem=2kb)"}
    later = cycle(snapshot([vnode("n1", ncpus=4, mem="3000b")],
                           [running("1:ncpus=1:mem=1500b", "(n1:ncpus=1:mem=2kb)", id="1.s"),
                            jobs[1]]))
    assert started(later) == {}
    assert started(cycle(snapshot([vnode("n1", ncpus=4, mem="4kb")], jobs))) == {
        "1.s": "(n1:ncpus=1:mem=2kb)", "2.s": "(n1:ncpus=1:mem=2kb)"}


def test_a_chunk_that_asks_for_no_cpus_holds_one():
    """PBS gives a chunk what it lacks of default_chunk (its queue's, then the server's,
    which PBS makes with ncpus=1): ``select=1:mem=1mb`` is placed as
    ``1:mem=1mb:ncpus=1`` (OpenPBS 23.06's schedselect), so three such jobs do not all
    run on two cpus. Only ``ncpus=0`` asks for none."""
    jobs = [job("1:mem=1mb", id=f"{i}.s") for i in range(3)]
    result = cycle(snapshot([vnode("n1", ncpus=2)], jobs))
    assert started(result) == {"0.s": "(n1:mem=1024kb:ncpus=1)",
                               "1.s": "(n1:mem=1024kb:ncpus=1)"}
    none = cycle(snapshot([vnode("n1", ncpus=2)], [job("3:ncpus=0:mem=1mb", id="1.s")]))
    assert started(none) == {"1.s": "(n1:ncpus=0:mem=1024kb)+(n1:ncpus=0:mem=1024kb)+"
                                    "(n1:ncpus=0:mem=1024kb)"}


def test_default_chunk_of_the_queue_then_the_server_fills_what_a_chunk_lacks():
    """Each table's resources by name, the queue's first, as OpenPBS 23.06 appends them
    (``1:ngpus=0`` under the server's ncpus and mem is ``ngpus=0:mem=2mb:ncpus=1``)."""
    queues = {"workq": Queue("workq", {"queue_type": "execution", "started": True,
                                       "default_chunk": {"ncpus": 2}}),
              "other": Queue("other", {"queue_type": "execution", "started": True})}
    server = Server("srv", {"default_chunk": {"ncpus": 1, "mem": "2mb"}})
    jobs = [job("1:mem=1mb", id="1.s"), job("1:ngpus=0", id="2.s", queue="other"),
            job("1:ncpus=1", id="3.s", queue="other")]
    result = cycle(snapshot([vnode("n1", ncpus=8)], jobs, queues, server=server))
    assert started(result) == {"1.s": "(n1:mem=1024kb:ncpus=2)",
                               "2.s": "(n1:ngpus=0:mem=2048kb:ncpus=1)",
                               "3.s": "(n1:ncpus=1:mem=2048kb)"}


@pytest.mark.parametrize("first", ["small", "large"])
def test_a_jobs_stored_schedselect_is_its_own_beside_another_of_the_same_request(first):
    """Review: the parsed chunks were shared by jobs of one request, so of two jobs with
    the same select whose stored schedselects differ (one stored before a default_chunk
    changed), the second read the first's: a 4gb job ran on a 1gb vnode, or a 1-cpu job
    never ran."""
    small = job("1:ncpus=1", id="1.s", schedselect="1:ncpus=1")
    large = job("1:ncpus=1", id="2.s", schedselect="1:ncpus=1:mem=4gb")
    order = [small, large] if first == "small" else [large, small]
    result = cycle(snapshot([vnode("n1", ncpus=4, mem="1gb")], order))
    assert started(result) == {"1.s": "(n1:ncpus=1)"}


def test_job_sort_formula_reads_what_the_chunks_ask_for_not_a_job_wide_value_beside():
    """A job-wide ncpus written beside a select (a raw request; qsub refuses it) does not
    count: PBS's server sets the job-wide value from the select."""
    honest = job("1:ncpus=2", id="1.s")
    claims = job("1:ncpus=4", id="2.s", resources={"ncpus": 1})
    result = cycle(snapshot([vnode("n1", ncpus=4)], [honest, claims]),
                   job_sort_formula="-ncpus", strict_ordering=True)
    assert started(result) == {"1.s": "(n1:ncpus=2)"}


def test_job_sort_formula_over_chunks_of_which_one_names_the_resource():
    """A chunk that does not name the formula's resource asks for none of it (summing
    every chunk's raised KeyError, and every cycle failed)."""
    jobs = [job("1:ncpus=1:mem=1gb+1:ncpus=2", id="1.s"), job("1:ncpus=1:mem=2gb", id="2.s")]
    result = cycle(snapshot([vnode("n1", ncpus=3)], jobs), job_sort_formula="mem",
                   strict_ordering=True)
    assert started(result) == {"2.s": "(n1:ncpus=1:mem=2097152kb)"}


def test_mpiprocs_and_ompthreads_shape_the_job_and_hold_nothing_of_a_vnode():
    """OpenPBS 23.06 ran ``select=1:ncpus=1:mpiprocs=2:ompthreads=2`` on a vnode that has
    neither (they were read as amounts no vnode holds: Can Never Run); so does a chunk
    given mpiprocs or nchunk by default_chunk. exec_vnode keeps mpiprocs (the nodefile's
    ranks)."""
    jobs = [job("1:ncpus=2:mpiprocs=2", id="1.s"), job("1:ncpus=1:ompthreads=2", id="2.s")]
    server = Server("srv", {"default_chunk": {"nchunk": 2}})
    result = cycle(snapshot([vnode("n1", ncpus=4)], jobs, server=server))
    assert started(result) == {"1.s": "(n1:ncpus=2)",
                               "2.s": "(n1:ncpus=1)"}


def test_a_job_without_a_select_asks_its_chunk_for_its_host_level_resources():
    """OpenPBS 23.06 makes ``-l ncpus=1,arch=sparc`` the select ``1:arch=sparc:ncpus=1``;
    arch, host and the like were dropped, and the job ran anywhere."""
    vnodes = [vnode("x86", ncpus=4, resources={"arch": "linux"}),
              vnode("sp", ncpus=4, resources={"arch": "sparc"})]
    jobs = [job(None, id="1.s", resources={"ncpus": 1, "arch": "sparc"}),
            job(None, id="2.s", resources={"ncpus": 1, "host": "nowhere"}),
            job(None, id="3.s", resources={"ncpus": 2})]
    result = cycle(snapshot(vnodes, jobs))
    assert started(result) == {"1.s": "(sp:ncpus=1)", "3.s": "(sp:ncpus=2)"}
    assert result.comments["2.s"].startswith("Can Never Run")


def test_a_job_without_a_select_asks_its_chunk_for_its_custom_host_resources():
    """PBS's conversion puts a custom resource with flag h in the job's chunk too: the
    scheduler knew types, not flags, left ``-l scratch=5gb`` job-wide, and the job ran on a
    vnode with no scratch. The same request twice, with and without the flag, is two
    shapes (what one cycle parsed of it is not the other's)."""
    vnodes = [vnode("plain", ncpus=4), vnode("disk", ncpus=4, resources={"scratch": "10gb"})]
    jobs = [job(None, id="1.s", resources={"ncpus": 1, "scratch": "5gb"}),
            job(None, id="2.s", resources={"ncpus": 1, "scratch": "20gb"})]
    snap = snapshot(vnodes, jobs)
    snap.resource_types = {"scratch": "size"}
    result = cycle(replace(snap, host_resources=frozenset({"scratch"})))
    assert started(result) == {"1.s": "(disk:ncpus=1:scratch=5242880kb)"}
    assert result.comments["2.s"].startswith("Can Never Run"), result.comments
    result = cycle(replace(snap, host_resources=frozenset()))  # (job-wide: anywhere)
    assert started(result) == {"1.s": "(disk:ncpus=1)", "2.s": "(disk:ncpus=1)"}
    sched = Scheduler(policy=Policy())  # one instance, the flag given between two cycles
    assert set(started(sched.cycle(snap, NOW))) == {"1.s", "2.s"}
    held = snapshot(vnodes, jobs)
    held.resource_types, held.host_resources = {"scratch": "size"}, frozenset({"scratch"})
    assert set(started(sched.cycle(held, NOW))) == {"1.s"}


def test_a_kept_group_plan_is_made_again_when_a_smaller_set_frees_by_its_start():
    """A top job of place=group=switch is planned at 100 s on switch A (three vnodes; B's
    two are busy to 500 s). One of B's jobs ends at 10 s: from 100 s both sets hold the
    job, and PBS takes the smallest, B. The kept plan (a cycle reading only what changed)
    must be made again, as a fresh cycle makes it, though the job that ended held vnodes
    after all of the plan's and nothing can start sooner: the group's own rule
    (`_released_harmless`; with it removed, the kept plan stayed on A)."""
    vnodes = {v.name: v for v in [vnode(n, ncpus=1, resources={"switch": n[0].upper()})
                                  for n in ("a1", "a2", "a3", "b1", "b2")]}
    queues = {"workq": Queue("workq", {"queue_type": "execution", "started": True})}
    server = Server("srv")  # (one object: a new one starts the kept state afresh)
    gone = running("1:ncpus=1", "(b1:ncpus=1)", "00:08:20", id="rb1.s")
    jobs = [running("1:ncpus=1", f"({n}:ncpus=1)", "00:01:40", id=f"r{n}.s")
            for n in ("a1", "a2", "a3", "b2")] + [gone, job(
                "2:ncpus=1", "10:00:00", id="top.s", place="group=switch")]
    log = JobLog()
    for one in jobs:
        log.add(one)
    policy = Policy(strict_ordering=True, backfill_depth=1)
    kept = Scheduler(policy=policy)

    def planned(sched, jobs, now, logged=True):
        snap = Snapshot(server, queues, vnodes, list(jobs), vnodes_version=1,
                        job_log=log) if logged else snapshot(vnodes.values(), jobs)
        est = sched.cycle(snap, now).estimates["top.s"]
        return est.start_time - NOW, est.exec_vnode

    assert planned(kept, jobs, NOW) == (100, "(a1:ncpus=1)+(a2:ncpus=1)")
    log.remove(gone)
    rest = [one for one in jobs if one is not gone]
    fresh = planned(Scheduler(policy=policy), rest, NOW + 10, logged=False)
    assert fresh == (100, "(b1:ncpus=1)+(b2:ncpus=1)")
    assert planned(kept, rest, NOW + 10) == fresh


def switches():
    """OpenPBS 23.06's host vm: its natural vnode vm (two cpus, no switch), vm[0] and vm[1]
    on switch A, vm[2] to vm[4] on switch B, one cpu each."""
    return [vnode("vm", ncpus=2, host="vm")] + [
        vnode(f"vm[{i}]", ncpus=1, host="vm", resources={"switch": "AABBB"[i]})
        for i in range(5)]


@pytest.mark.parametrize("count, exec_vnode", [
    # What OpenPBS 23.06 ran with place=group=switch (its default do_not_span_psets false):
    (2, "(vm:ncpus=1)+(vm:ncpus=1)"),    # the vnodes without a switch are a set too
    (3, "(vm[2]:ncpus=1)+(vm[3]:ncpus=1)+(vm[4]:ncpus=1)"),  # only B holds 3
    (4, "(vm:ncpus=1)+(vm:ncpus=1)+(vm[0]:ncpus=1)+(vm[1]:ncpus=1)"),  # none: it spans
    (5, "(vm:ncpus=1)+(vm:ncpus=1)+(vm[0]:ncpus=1)+(vm[1]:ncpus=1)+(vm[2]:ncpus=1)"),
])
def test_place_group_keeps_a_job_in_one_set_the_smallest_first_else_spans(count,
                                                                           exec_vnode):
    snap = snapshot(switches(), [job(f"{count}:ncpus=1", id="1.s", place="group=switch")])
    snap.resource_types = {"switch": "string"}
    assert started(cycle(snap)) == {"1.s": exec_vnode}


def test_place_group_waits_for_the_set_that_holds_it_rather_than_span():
    """OpenPBS 23.06, with vm[2] busy: 'Not Running: Placement set switch=B has too few
    free resources'; A and the vnodes without a switch have three cpus free between them."""
    busy = running("1:ncpus=1", "(vm[2]:ncpus=1)", "00:30:00", id="9.s")
    snap = snapshot(switches(), [busy, job("3:ncpus=1", id="1.s", place="group=switch")])
    snap.resource_types = {"switch": "string"}
    result = cycle(snap)
    assert started(result) == {}
    assert result.estimates["1.s"].exec_vnode == \
        "(vm[2]:ncpus=1)+(vm[3]:ncpus=1)+(vm[4]:ncpus=1)"
    assert result.estimates["1.s"].start_time == NOW + 1800
    assert result.comments["1.s"] == \
        "Not Running: Placement set switch=B has too few free resources"


def test_place_group_on_a_string_array_puts_a_vnode_in_each_of_its_sets():
    """x1 is on switches A and B: B (x1, x2, x3) holds three chunks. Read as one text,
    "A,B" would be a set of its own, no set would hold three, and the job would span."""
    vnodes = [vnode("x0", resources={"switch": "A"}), vnode("x1", resources={"switch": "A,B"}),
              vnode("x2", resources={"switch": "B"}), vnode("x3", resources={"switch": "B"})]
    snap = snapshot(vnodes, [job("3:ncpus=4", id="1.s", place="group=switch")])
    snap.resource_types = {"switch": "string_array"}
    assert started(cycle(snap)) == {"1.s": "(x1:ncpus=4)+(x2:ncpus=4)+(x3:ncpus=4)"}


def test_place_group_tries_the_smallest_set_first_not_the_first_in_vnode_order():
    vnodes = [vnode(f"b{i}", ncpus=2, resources={"switch": "B"}) for i in range(3)] + [
        vnode(f"a{i}", ncpus=2, resources={"switch": "A"}) for i in range(2)]
    snap = snapshot(vnodes, [job("2:ncpus=2", id="1.s", place="group=switch")])
    assert started(cycle(snap)) == {"1.s": "(a0:ncpus=2)+(a1:ncpus=2)"}


def test_place_group_inside_a_reservation_reads_the_sets_of_its_vnodes():
    """The reservation holds v0 (switch A) and v2 (B): no set of its vnodes holds two
    chunks, so the job spans them there (it waited for ever, as one set of the machine
    holds it)."""
    vnodes = [vnode(f"v{i}", ncpus=1, resources={"switch": "AABBB"[i]}) for i in range(5)]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}
    held = resv("R1", "2:ncpus=1", NOW - 10, NOW + HOUR, state="RUNNING", queue="R1",
                resv_nodes="(v0:ncpus=1)+(v2:ncpus=1)")
    inside = job("2:ncpus=1", "00:10:00", queue="R1", id="1.s", place="group=switch")
    result = cycle(snapshot(vnodes, [inside], queues, reservations=[held]))
    assert started(result) == {"1.s": "(v0:ncpus=1)+(v2:ncpus=1)"}


def test_a_placement_hooks_choice_across_two_sets_is_not_taken(tmp_path):
    from pbsplug import PluginSet, hookimpl
    from pbsplug.siteconfig import SiteConfig

    asked = []

    class Across:
        @hookimpl
        def sched_node_placement(self, placement):
            asked.append(placement.job.id)
            return ["a0", "b0"]  # the first vnode of each set: breaks the group

    vnodes = [vnode("a0", resources={"switch": "A"}), vnode("a1", resources={"switch": "A"}),
              vnode("b0", resources={"switch": "B"})]
    plugins = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
    assert plugins.add("across", Across(), enable=True).status == "enabled"
    sched = Scheduler(policy=Policy(), hooks=plugins.hook)
    result = sched.cycle(snapshot(vnodes, [job("2:ncpus=4", id="1.s",
                                                 place="group=switch")]), NOW)
    assert asked and started(result) == {"1.s": "(a0:ncpus=4)+(a1:ncpus=4)"}


def test_job_sort_formula_counts_mpiprocs_as_the_chunks_ask():
    jobs = [job("2:ncpus=1:mpiprocs=4", id="1.s"), job("1:ncpus=1:mpiprocs=2", id="2.s")]
    result = cycle(snapshot([vnode("n1", ncpus=2)], jobs), job_sort_formula="-mpiprocs",
                   strict_ordering=True)
    assert started(result) == {"2.s": "(n1:ncpus=1)"}


def busy_machine():
    """n1 is fully used for an hour; n2 is free. A wants both; B is short, C is long."""
    vnodes = [vnode("n1"), vnode("n2")]
    hog = running("1:ncpus=4", "(n1:ncpus=4)", "01:00:00", id="9.s")
    a = job("2:ncpus=4", "01:00:00", id="1.s")
    b = job("1:ncpus=2", "00:30:00", id="2.s")
    c = job("1:ncpus=2", "02:00:00", id="3.s")
    return snapshot(vnodes, [hog, a, b, c])


def test_without_strict_ordering_whatever_fits_runs():
    result = cycle(busy_machine())
    assert set(started(result)) == {"2.s", "3.s"}


def test_strict_ordering_without_backfill_blocks_everything_after_the_top():
    result = cycle(busy_machine(), strict_ordering=True, backfill=False)
    assert started(result) == {}
    assert "strict_ordering" in result.comments["2.s"]


def test_backfill_runs_what_ends_before_the_shadow_and_holds_what_would_delay_it():
    result = cycle(busy_machine(), strict_ordering=True, backfill_depth=1)
    assert result.top_jobs == ["1.s"]
    # A's shadow: both vnodes from the hog's end.
    assert result.estimates["1.s"].start_time == NOW + HOUR
    assert result.estimates["1.s"].exec_vnode == "(n1:ncpus=4)+(n2:ncpus=4)"
    assert started(result) == {"2.s": "(n2:ncpus=2)"}        # 30 min: ends before A
    assert result.run[0].backfilled
    assert "3.s" not in started(result)                         # 2 h: would delay A
    assert result.comments["3.s"] == "Not Running: Job would conflict with reservation or top job"
    # C's estimate is after A.
    assert result.estimates["3.s"].start_time == NOW + 2 * HOUR


def test_backfill_on_vnodes_the_top_job_does_not_need():
    vnodes = [vnode("n1"), vnode("n2"), vnode("n3"), vnode("n4")]
    hog = running("2:ncpus=4", "(n1:ncpus=4)+(n2:ncpus=4)", id="9.s")
    top = job("3:ncpus=4", "01:00:00", id="1.s")   # shadow: n1, n2, n3 at +1 h
    long = job("1:ncpus=4", "10:00:00", id="2.s")  # n3 would delay the top job; n4 not
    result = cycle(snapshot(vnodes, [hog, top, long]), strict_ordering=True)
    assert result.estimates["1.s"].exec_vnode == "(n1:ncpus=4)+(n2:ncpus=4)+(n3:ncpus=4)"
    assert started(result) == {"2.s": "(n4:ncpus=4)"}


def test_an_estimate_planned_as_before_keeps_its_text_and_a_new_plan_gets_its_own():
    """Three one-cpu vnodes; the top job A needs two, B all three. While the hog holds n0
    and n1 for an hour, A is planned there at +1 h and B on all three at +2 h, cycle after
    cycle: the second cycle hands out the very texts of the first. Then other jobs hold
    n1 and n2 for an hour and n0 for three: A's plan moves to n1 and n2, B's to +3 h, and
    each estimate says so (a text kept past a change of plan would not)."""
    vnodes = [vnode(f"n{i}", ncpus=1) for i in range(3)]
    a, b = job("2:ncpus=1", "01:00:00", id="1.s"), job("3:ncpus=1", "01:00:00", id="2.s")
    hog = running("2:ncpus=1", "(n0:ncpus=1)+(n1:ncpus=1)", "01:00:00", id="9.s")
    sched = Scheduler(policy=Policy(strict_ordering=True, backfill_depth=1))
    first = sched.cycle(snapshot(vnodes, [hog, a, b]), NOW).estimates
    assert (first["1.s"].start_time, first["1.s"].exec_vnode) == (
        NOW + HOUR, "(n0:ncpus=1)+(n1:ncpus=1)")
    assert (first["2.s"].start_time, first["2.s"].exec_vnode) == (
        NOW + 2 * HOUR, "(n0:ncpus=1)+(n1:ncpus=1)+(n2:ncpus=1)")
    again = sched.cycle(snapshot(vnodes, [hog, a, b]), NOW + 60).estimates
    assert all(again[j].exec_vnode is first[j].exec_vnode for j in ("1.s", "2.s"))
    others = [running("2:ncpus=1", "(n1:ncpus=1)+(n2:ncpus=1)", "01:00:00", id="7.s"),
              running("1:ncpus=1", "(n0:ncpus=1)", "03:00:00", id="8.s")]
    moved = sched.cycle(snapshot(vnodes, [*others, a, b]), NOW + 120).estimates
    assert (moved["1.s"].start_time, moved["1.s"].exec_vnode) == (
        NOW + HOUR, "(n1:ncpus=1)+(n2:ncpus=1)")
    assert (moved["2.s"].start_time, moved["2.s"].exec_vnode) == (
        NOW + 3 * HOUR, "(n0:ncpus=1)+(n1:ncpus=1)+(n2:ncpus=1)")


def test_an_estimate_of_a_request_written_otherwise_is_written_as_asked():
    """The same job planned on the same vnode for the same amount, its request altered from
    1gb to 1024mb in between: the estimate spells it in kilobytes both times, as PBS
    writes a size in exec_vnode."""
    hog = running("1:ncpus=4", "(n0:ncpus=4)", "01:00:00", id="9.s")
    sched = Scheduler(policy=Policy(strict_ordering=True, backfill_depth=1))
    for when, mem in ((NOW, "1gb"), (NOW + 60, "1024mb")):
        asked = job(f"1:ncpus=1:mem={mem}", "01:00:00", id="1.s")
        estimate = sched.cycle(snapshot([vnode("n0")], [hog, asked]), when).estimates["1.s"]
        assert estimate.exec_vnode == "(n0:ncpus=1:mem=1048576kb)"


def kin_cycle(explain, later):
    """n1 is the hog's for an hour, A (both 4-cpu vnodes) the top job from then; B (3
    one-cpu chunks, 2 h) cannot backfill: n2 is A's from +1 h and n3 holds one. Then the
    `later` jobs ((select, walltime, id), queued after B), one cycle under EASY (with
    estimates when `explain`)."""
    vnodes = [vnode("n1"), vnode("n2"), vnode("n3", ncpus=1)]
    hog = running("1:ncpus=4", "(n1:ncpus=4)", "01:00:00", id="9.s")
    a = job("2:ncpus=4", "01:00:00", id="1.s")
    b = job("3:ncpus=1", "02:00:00", id="2.s")
    sched = Scheduler(policy=Policy(strict_ordering=True, backfill_depth=1,
                                    estimate_limit=1 if explain else 0))
    sched.explain = explain
    return sched.cycle(snapshot(vnodes, [hog, a, b, *(job(select, walltime, id=job_id)
                                                     for select, walltime, job_id in later)]),
                       NOW)


@pytest.mark.parametrize("explain", [True, False])
def test_a_job_that_did_not_fit_rules_out_only_bigger_and_longer_ones_of_its_kin(explain):
    """B's failure rules out C (more chunks, longer) without placing it, but not D (fewer,
    shorter) nor E (fewer, longer): both start, D on n2 before the shadow, E on n3."""
    result = kin_cycle(explain, [("4:ncpus=1", "03:00:00", "3.s"),    # C
                                 ("2:ncpus=1", "00:30:00", "4.s"),    # D
                                 ("1:ncpus=1", "04:00:00", "5.s")])   # E
    assert started(result) == {"4.s": "(n2:ncpus=1)+(n2:ncpus=1)", "5.s": "(n3:ncpus=1)"}


@pytest.mark.parametrize("explain", [True, False])
def test_a_job_that_did_not_fit_rules_out_its_kin_asking_more_than_the_room_it_found(
        explain, monkeypatch):
    """B found room for one chunk over its window (n3). C (2 chunks, 3 h: fewer than B's,
    longer) is ruled out without being placed at all; E (1 chunk, 4 h) is placed, and
    starts on n3."""
    placed = []
    fit = Scheduler._fit

    def counted(self, info, start, end, soft, now_mode, *args, **kwargs):
        if now_mode:
            placed.append(info.job.id)
        return fit(self, info, start, end, soft, now_mode, *args, **kwargs)

    monkeypatch.setattr(Scheduler, "_fit", counted)
    result = kin_cycle(explain, [("2:ncpus=1", "03:00:00", "3.s"),    # C
                                 ("1:ncpus=1", "04:00:00", "5.s")])   # E
    assert started(result) == {"5.s": "(n3:ncpus=1)"}
    assert "3.s" not in placed and {"2.s", "5.s"} <= set(placed)


def test_backfill_depth_two_protects_two_top_jobs():
    vnodes = [vnode("n1"), vnode("n2")]
    hog = running("2:ncpus=4", "(n1:ncpus=4)+(n2:ncpus=4)", "01:00:00", id="9.s")
    a = job("2:ncpus=4", "01:00:00", id="1.s")
    b = job("2:ncpus=4", "01:00:00", id="2.s")
    result = cycle(snapshot(vnodes, [hog, a, b]), strict_ordering=True, backfill_depth=2)
    assert result.top_jobs == ["1.s", "2.s"]
    assert result.estimates["1.s"].start_time == NOW + HOUR
    assert result.estimates["2.s"].start_time == NOW + 2 * HOUR


def test_estimates_for_the_first_queued_jobs_only():
    jobs = [job("1:ncpus=4", "01:00:00", id=f"{i}.s") for i in range(1, 8)]
    result = cycle(snapshot([vnode("n1")], jobs), estimate_limit=3)
    assert list(started(result)) == ["1.s"]
    assert sorted(result.estimates) == ["2.s", "3.s", "4.s"]
    assert [result.estimates[f"{i}.s"].start_time for i in (2, 3, 4)] == [
        NOW + HOUR, NOW + 2 * HOUR, NOW + 3 * HOUR]


@pytest.mark.parametrize("sharing", VNODE_SHARING)
@pytest.mark.parametrize("place", [None, "excl", "shared", "exclhost"])
def test_exclusivity_table(sharing, place):
    """Two 1-cpu jobs on one 4-cpu vnode: both run only when the job shares the vnode."""
    jobs = [job("1:ncpus=1", place=place, id="1.s"), job("1:ncpus=1", place=place, id="2.s")]
    result = cycle(snapshot([vnode("n1", sharing=sharing)], jobs))
    shares = exclusivity(place, sharing) == "shared"
    assert len(result.run) == (2 if shares else 1)


def test_exclhost_blocks_the_other_vnodes_of_the_host():
    vnodes = [vnode("h1[0]", host="h1"), vnode("h1[1]", host="h1"), vnode("h2", host="h2")]
    first = job("1:ncpus=1", place="exclhost", id="1.s")
    second = job("1:ncpus=1", id="2.s")
    result = cycle(snapshot(vnodes, [first, second]))
    assert started(result) == {"1.s": "(h1[0]:ncpus=1)+(h1[1])", "2.s": "(h2:ncpus=1)"}


@pytest.mark.parametrize("select, place, exec_vnode", [
    # What OpenPBS 23.06 gave on two hosts of two one-cpu vnodes (hA: a0, a1; hB: b0, b1):
    ("2:ncpus=1", "scatter:exclhost", "(a0:ncpus=1)+(a1)+(b0:ncpus=1)+(b1)"),
    ("3:ncpus=1", "free:exclhost", "(a0:ncpus=1)+(a1:ncpus=1)+(b0:ncpus=1)+(b1)"),
    ("2:ncpus=1", "exclhost", "(a0:ncpus=1)+(a1:ncpus=1)"),
])
def test_a_job_given_hosts_whole_lists_each_ones_rest_after_its_chunks(select, place,
                                                                       exec_vnode):
    vnodes = [vnode(name, ncpus=1, host=f"h{name[0].upper()}")
              for name in ("a0", "a1", "b0", "b1")]
    result = cycle(snapshot(vnodes, [job(select, place=place, id="1.s")]))
    assert started(result) == {"1.s": exec_vnode}


@pytest.mark.parametrize("key, select, exec_vnode", [
    # What OpenPBS 23.06 gave on host vm of vnodes vm (no cpus, no Priority), vm[0]
    # (Priority 5), vm[1] (-5) and vm[2] (10), one cpu each, under sched_config's
    # node_sort_key: place=exclhost. A vnode without a Priority sorts as 0.
    ("sort_priority HIGH", "1:ncpus=1", "(vm[2]:ncpus=1)+(vm[0])+(vm)+(vm[1])"),
    ("sort_priority HIGH", "2:ncpus=1", "(vm[2]:ncpus=1)+(vm[0]:ncpus=1)+(vm)+(vm[1])"),
    ("sort_priority LOW", "1:ncpus=1", "(vm[1]:ncpus=1)+(vm)+(vm[0])+(vm[2])"),
    ("sort_priority LOW", "2:ncpus=1", "(vm[1]:ncpus=1)+(vm[0]:ncpus=1)+(vm)+(vm[2])"),
])
def test_sort_priority_orders_the_chunks_and_the_rest_of_a_host_by_priority(
        key, select, exec_vnode):
    vnodes = [vnode("vm", ncpus=0, host="vm")] + [
        vnode(f"vm[{i}]", ncpus=1, host="vm", Priority=p) for i, p in enumerate((5, -5, 10))]
    result = cycle(snapshot(vnodes, [job(select, place="exclhost", id="1.s")]),
                   node_sort_key=key)
    assert started(result) == {"1.s": exec_vnode}


def test_the_default_vnode_order_is_by_priority_highest_first_then_name():
    """PBS's default sched_config has node_sort_key "sort_priority HIGH"."""
    assert Policy().node_sort_key == "sort_priority HIGH"
    vnodes = [vnode("a", ncpus=1), vnode("b", ncpus=1, Priority=-1), vnode("c", ncpus=1),
              vnode("d", ncpus=1, Priority=3)]
    jobs = [job("1:ncpus=1", id=f"{i}.s") for i in range(4)]
    result = Scheduler().cycle(snapshot(vnodes, jobs), NOW)
    assert [started(result)[f"{i}.s"] for i in range(4)] == [
        f"({n}:ncpus=1)" for n in ("d", "a", "c", "b")]


def test_an_estimate_names_the_rest_of_its_host_as_the_host_is_now():
    """The estimate's text is made again when the host gained a vnode or its vnodes'
    sharing changed, not kept from the last cycle's (same job, same plan)."""
    sched = Scheduler(policy=Policy(strict_ordering=True))

    def estimate(vnodes, busy, queued):
        return sched.cycle(snapshot(vnodes, [busy, queued]), NOW).estimates["1.s"].exec_vnode

    two = [vnode("h0", host="h"), vnode("h1", host="h")]
    on_h1 = running("1:ncpus=4", "(h1:ncpus=4)", id="9.s")
    whole = job("1:ncpus=4", id="1.s", place="exclhost")
    assert estimate(two, on_h1, whole) == "(h0:ncpus=4)+(h1)"
    assert estimate([*two, vnode("h2", host="h")], on_h1, whole) == "(h0:ncpus=4)+(h1)+(h2)"
    halves = running("2:ncpus=2", "(h0:ncpus=2)+(h1:ncpus=2)", id="9.s")
    plain = job("1:ncpus=4", id="1.s")
    forced = [vnode("h0", host="h", sharing="force_exclhost"),
              vnode("h1", host="h", sharing="force_exclhost")]
    assert estimate(two, halves, plain) == "(h0:ncpus=4)"
    assert estimate(forced, halves, plain) == "(h0:ncpus=4)+(h1)"
    assert estimate(two, halves, plain) == "(h0:ncpus=4)"  # and back


def test_a_host_held_whole_through_one_vnode_is_whole_on_its_shared_vnodes_too():
    """h0's n0 is force_exclhost: a job on n0 and n1 has all of h0, n1's spare cpus too,
    whether it runs or is planned (2.s would take n1 in front of the top job 1.s, which
    needs h0 whole at +1 h)."""
    vnodes = [vnode("n0", sharing="force_exclhost", host="h0"), vnode("n1", ncpus=8, host="h0")]
    busy = running("2:ncpus=4", "(n0:ncpus=4)+(n1:ncpus=4)", id="9.s")
    assert started(cycle(snapshot(vnodes, [busy, job("1:ncpus=2", id="2.s")]))) == {}
    top = job("2:ncpus=4", "02:00:00", id="1.s", qtime=NOW - 50)
    later = job("1:ncpus=2", "03:00:00", id="2.s", qtime=NOW - 10)
    busy = running("1:ncpus=4", "(n1:ncpus=4)", id="9.s")
    result = cycle(snapshot(vnodes, [busy, top, later]), strict_ordering=True)
    assert started(result) == {}
    assert result.estimates["1.s"].start_time == NOW + HOUR


def test_a_running_job_with_an_unreadable_place_holds_what_it_uses():
    """Its place cannot be read (a store edited by hand): it holds its cpus, as one with
    no place, and the cycle goes on."""
    vnodes = [vnode("n1")]
    odd = running("1:ncpus=3", "(n1:ncpus=3)", id="9.s", place="bogus")
    result = cycle(snapshot(vnodes, [odd, job("1:ncpus=2", id="1.s"),
                                     job("1:ncpus=1", id="2.s")]))
    assert started(result) == {"2.s": "(n1:ncpus=1)"}


def test_an_exclusive_job_needs_an_empty_vnode():
    vnodes = [vnode("n1"), vnode("n2")]
    small = running("1:ncpus=1", "(n1:ncpus=1)", id="9.s")
    excl = job("1:ncpus=1", place="excl", id="1.s")
    assert started(cycle(snapshot(vnodes, [small, excl]))) == {"1.s": "(n2:ncpus=1)"}


def test_multi_chunk_select():
    vnodes = [vnode("n1"), vnode("n2")]
    j = job("2:ncpus=2:mem=1gb+1:ncpus=4", id="1.s")
    assert started(cycle(snapshot(vnodes, [j]))) == {
        "1.s": "(n1:ncpus=2:mem=1048576kb)+(n1:ncpus=2:mem=1048576kb)+(n2:ncpus=4)"}


def test_exec_vnode_shows_sizes_in_kilobytes_rounded_up():
    """OpenPBS 23.06, checked: ``select=1:ncpus=1:mem=1500b+1:ncpus=1:mem=3mb`` ran on
    ``(vm:ncpus=1:mem=2kb)+(vm:ncpus=1:mem=3072kb)``; a custom size resource too."""
    snap = snapshot([vnode("n1", resources={"scratch": "10gb"})],
                    [job("1:ncpus=1:mem=1500b+1:ncpus=1:mem=3mb:scratch=1w", id="1.s")])
    snap.resource_types = {"scratch": "size"}
    assert started(cycle(snap)) == {
        "1.s": "(n1:ncpus=1:mem=2kb)+(n1:ncpus=1:mem=3072kb:scratch=1kb)"}


def test_memory_is_never_overcommitted():
    vnodes = [vnode("n1", ncpus=8, mem="4gb")]
    jobs = [job("1:ncpus=1:mem=3gb", id="1.s"), job("1:ncpus=1:mem=2gb", id="2.s")]
    assert set(started(cycle(snapshot(vnodes, jobs)))) == {"1.s"}


@pytest.mark.parametrize("place,expected", [
    ("scatter", "(a:ncpus=1)+(b:ncpus=1)"),
    ("pack", "(a:ncpus=1)+(a:ncpus=1)"),
    ("free", "(a:ncpus=1)+(a:ncpus=1)"),
    ("vscatter", "(a:ncpus=1)+(a2:ncpus=1)"),
])
def test_scatter_pack_free_vscatter(place, expected):
    vnodes = [vnode("a", host="ha"), vnode("a2", host="ha"), vnode("b", host="hb")]
    result = cycle(snapshot(vnodes, [job("2:ncpus=1", place=place, id="1.s")]))
    assert started(result) == {"1.s": expected}


def test_pack_needs_one_host_with_room_for_every_chunk():
    vnodes = [vnode("a", ncpus=2, host="ha"), vnode("b", ncpus=2, host="hb")]
    assert started(cycle(snapshot(vnodes, [job("3:ncpus=1", place="pack")]))) == {}
    assert len(cycle(snapshot(vnodes, [job("3:ncpus=1", place="free")])).run) == 1


def test_host_and_custom_resources_match():
    vnodes = [vnode("n1", resources={"ngpus": 0, "arch": "x86"}),
              vnode("n2", resources={"ngpus": 2, "arch": "arm"})]
    result = cycle(snapshot(vnodes, [job("1:ncpus=1:ngpus=1", id="1.s"),
                                     job("1:ncpus=1:arch=x86", id="2.s"),
                                     job("1:ncpus=1:host=n2", id="3.s")]))
    assert started(result) == {"1.s": "(n2:ncpus=1:ngpus=1)", "2.s": "(n1:ncpus=1)",
                               "3.s": "(n2:ncpus=1)"}


@pytest.mark.parametrize("state", ["offline", "down", "busy", "offline,job-busy", "sleep"])
def test_unusable_vnodes_are_never_chosen_now(state):
    vnodes = [vnode("bad", state=state), vnode("good", ncpus=1)]
    jobs = [job("1:ncpus=1", id="1.s"), job("1:ncpus=1", id="2.s")]
    result = cycle(snapshot(vnodes, jobs))
    assert started(result) == {"1.s": "(good:ncpus=1)"}


def test_a_sleeping_vnode_is_planned_after_its_boot_delay_but_not_used_now():
    vnodes = [vnode("sleepy", state="sleep")]
    result = cycle(snapshot(vnodes, [job("1:ncpus=2", id="1.s")]), boot_delay=600)
    assert started(result) == {}
    assert result.estimates["1.s"].start_time == NOW + 600
    assert result.estimates["1.s"].exec_vnode == "(sleepy:ncpus=2)"


@pytest.mark.parametrize("key, order", [
    ("last_used_time HIGH", ["n2", "n3", "n1", "none"]),
    ("last_used_time LOW", ["n1", "n3", "n2", "none"]),
    ("last_used_time", ["n1", "n3", "n2", "none"]),
    (None, ["n1", "n2", "n3", "none"]),
])
def test_node_sort_key_high_and_low(key, order):
    """PBS's ``node_sort_key: "last_used_time HIGH"`` (seed 004, Interface 5): one-cpu jobs
    land on the vnodes in that order; vnodes without the key come last."""
    vnodes = [vnode("n1", ncpus=1, last_used_time=NOW - 300),
              vnode("n2", ncpus=1, last_used_time=NOW - 10),
              vnode("n3", ncpus=1, last_used_time=NOW - 60), vnode("none", ncpus=1)]
    jobs = [job("1:ncpus=1", id=f"{i}.s") for i in range(4)]
    result = cycle(snapshot(vnodes, jobs), node_sort_key=key)
    assert [started(result)[f"{i}.s"] for i in range(4)] == [f"({n}:ncpus=1)" for n in order]


def test_offline_vnodes_are_not_planned_either():
    result = cycle(snapshot([vnode("n1", state="offline")], [job(id="1.s")]))
    assert result.run == [] and "1.s" not in result.estimates


def test_walltime_defaults_from_queue_then_server():
    queues = {"workq": Queue("workq", {"resources_default": {"walltime": "00:10:00"}}),
              "other": Queue("other", {})}
    server = Server("srv", {"resources_default": {"walltime": "02:00:00"}})
    vnodes = [vnode("n1", ncpus=1), vnode("n2", ncpus=1)]
    jobs = [job("1:ncpus=1", None, id="1.s"), job("1:ncpus=1", None, queue="other", id="2.s"),
            job("1:ncpus=1", None, id="3.s"), job("1:ncpus=1", None, queue="other", id="4.s")]
    result = cycle(snapshot(vnodes, jobs, queues, server=server))
    assert set(started(result)) == {"1.s", "2.s"}
    assert result.estimates["3.s"].start_time == NOW + 600          # after the 10 min one
    assert result.estimates["4.s"].start_time == NOW + 600 + 600    # queue default again


def test_a_job_without_any_walltime_is_planned_as_never_ending():
    vnodes = [vnode("n1", ncpus=1)]
    jobs = [job("1:ncpus=1", None, id="1.s"), job("1:ncpus=1", "00:01:00", id="2.s")]
    result = cycle(snapshot(vnodes, jobs))
    assert set(started(result)) == {"1.s"}
    assert "2.s" not in result.estimates  # n1 never frees up
    hog = running("1:ncpus=1", "(n1:ncpus=1)", walltime=None, id="9.s")
    later = cycle(snapshot([vnode("n1", ncpus=1), vnode("n2", ncpus=1)],
                           [hog, job("2:ncpus=1", "00:10:00", id="1.s")]))
    assert later.run == [] and "1.s" not in later.estimates
    assert UNKNOWN_WALLTIME > 365 * 24 * HOUR


def test_held_future_and_stopped_queue_jobs_are_not_run():
    queues = {"workq": Queue("workq", {}), "stopped": Queue("stopped", {"started": False})}
    jobs = [job(id="1.s", Hold_Types="u"), job(id="2.s", Execution_Time=NOW + 100),
            job(id="3.s", queue="stopped"), job(id="4.s")]
    assert set(started(cycle(snapshot([vnode("n1")], jobs, queues)))) == {"4.s"}


def test_reservation_confirmed_when_free_for_its_whole_window_and_denied_otherwise():
    vnodes = [vnode("n1"), vnode("n2")]
    hog = running("1:ncpus=4", "(n1:ncpus=4)", "02:00:00", id="9.s")
    ok = resv("R1", "1:ncpus=4", NOW + HOUR, NOW + 2 * HOUR, ctime=1)   # fits on n2
    clash = resv("R2", "2:ncpus=4", NOW + HOUR, NOW + 3 * HOUR, ctime=2)  # n1 busy until +2h
    later = resv("R3", "2:ncpus=4", NOW + 3 * HOUR, NOW + 4 * HOUR, ctime=3)
    result = cycle(snapshot(vnodes, [hog], reservations=[ok, clash, later]))
    decisions = {d.resv_id: d for d in result.reservations}
    assert decisions["R1"].confirmed and decisions["R1"].resv_nodes == "(n2:ncpus=4)"
    assert not decisions["R2"].confirmed and "denied" in decisions["R2"].reason
    assert decisions["R3"].confirmed
    assert decisions["R3"].resv_nodes == "(n1:ncpus=4)+(n2:ncpus=4)"


def test_a_reservations_vnodes_show_sizes_in_kb_as_pbs_writes_them():
    sized = resv("R1", "1:ncpus=1:mem=10mb", NOW + HOUR, NOW + 2 * HOUR)
    (decision,) = cycle(snapshot([vnode("n1")], [], reservations=[sized])).reservations
    assert decision.resv_nodes == "(n1:ncpus=1:mem=10240kb)"  # (was mem=10485760)


def test_a_confirmed_reservation_holds_its_vnodes_for_its_window():
    vnodes = [vnode("n1")]
    held = resv("R1", "1:ncpus=4", NOW + HOUR, NOW + 2 * HOUR, state="CONFIRMED",
                resv_nodes="(n1:ncpus=4)")
    short = job("1:ncpus=4", "00:30:00", id="1.s")   # ends before the reservation
    long = job("1:ncpus=4", "02:00:00", id="2.s")    # would overlap it
    result = cycle(snapshot(vnodes, [long, short], reservations=[held]))
    assert set(started(result)) == {"1.s"}
    assert result.estimates["2.s"].start_time == NOW + 2 * HOUR


def test_jobs_in_a_running_reservation_run_inside_it():
    vnodes = [vnode("n1"), vnode("n2")]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}
    held = resv("R1", "1:ncpus=4", NOW - 10, NOW + HOUR, state="RUNNING",
                resv_nodes="(n2:ncpus=4)", queue="R1")
    inside = [job("1:ncpus=2", queue="R1", id="1.s"), job("1:ncpus=2", queue="R1", id="2.s"),
              job("1:ncpus=2", queue="R1", id="3.s")]
    outside = job("1:ncpus=4", id="4.s")
    result = cycle(snapshot(vnodes, inside + [outside], queues, reservations=[held]))
    assert started(result) == {"1.s": "(n2:ncpus=2)", "2.s": "(n2:ncpus=2)",
                               "4.s": "(n1:ncpus=4)"}


@pytest.mark.parametrize("resv_nodes, runs", [("(n1:ncpus=4)", False),
                                               ("(n0:ncpus=8)+(n1:ncpus=4)", True)])
def test_an_exclhost_job_in_a_reservation_runs_only_if_it_holds_the_whole_host(resv_nodes,
                                                                               runs):
    """h0's vnodes are force_exclhost. R1 holding n1 alone does not have h0 whole (n0 is
    held from outside it): its job cannot run there (the cycle used to fail looking for n0
    in the reservation's own calendar). Holding n0 too, it can."""
    vnodes = [vnode("n0", ncpus=8, host="h0", sharing="force_exclhost"),
              vnode("n1", sharing="force_exclhost", host="h0")]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}
    held = resv("R1", "1:ncpus=4", NOW - 10, NOW + HOUR, state="RUNNING",
                resv_nodes=resv_nodes, queue="R1")
    inside = job("1:ncpus=2", "00:10:00", queue="R1", id="1.s")
    result = cycle(snapshot(vnodes, [inside], queues, reservations=[held]))
    assert started(result) == ({"1.s": "(n0:ncpus=2)+(n1)"} if runs else {})
    if not runs:
        assert result.comments["1.s"] == \
            "Not Running: Insufficient amount of resource in the reservation"


@pytest.mark.parametrize("sharing, place", [("force_exclhost", None), (None, "exclhost")])
def test_a_reservation_held_exclhost_is_confirmed_on_its_whole_host(sharing, place):
    """PBS gives a reservation it places exclhost the rest of the host: h0's other vnode is
    in resv_nodes with no resources. Running, the reservation then has h0 whole (an
    exclhost job in it starts), and nothing outside it starts on n1."""
    vnodes = [vnode("n0", host="h0", sharing=sharing), vnode("n1", host="h0", sharing=sharing)]
    select = {"select": "1:ncpus=4", **({"place": place} if place else {})}
    asked = resv("R1", "1:ncpus=4", NOW - 10, NOW + HOUR, Resource_List=select)
    decision = cycle(snapshot(vnodes, [], reservations=[asked])).reservations[0]
    assert decision.confirmed and decision.resv_nodes == "(n0:ncpus=4)+(n1)"
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}
    held = resv("R1", "1:ncpus=4", NOW - 10, NOW + HOUR, state="RUNNING", queue="R1",
                resv_nodes=decision.resv_nodes, Resource_List=select)
    inside = job("1:ncpus=2", "00:10:00", queue="R1", id="1.s", place="exclhost")
    outside = job("1:ncpus=1", "00:10:00", id="2.s")
    result = cycle(snapshot(vnodes, [inside, outside], queues, reservations=[held]))
    assert started(result) == {"1.s": "(n0:ncpus=2)+(n1)"}


def test_the_rest_of_the_hosts_comes_in_their_order():
    """Four hosts of two vnodes, a reservation on one vnode of each, exclhost: each host's
    other vnode follows that host's chunk, host by host, as OpenPBS 23.06 writes it
    (``(a0:ncpus=1)+(a1)+(b0:ncpus=1)+(b1)``), whatever the process's hash seed."""
    hosts = ("hA", "hB", "hC", "hD")
    vnodes = [vnode(f"{h}{i}", host=h) for h in hosts for i in range(2)]
    asked = resv("R1", "4:ncpus=2", NOW + 100, NOW + HOUR,
                 Resource_List={"select": "4:ncpus=2", "place": "scatter:exclhost"})
    decision = cycle(snapshot(vnodes, [], reservations=[asked])).reservations[0]
    assert decision.resv_nodes == "+".join(f"({h}0:ncpus=2)+({h}1)" for h in hosts)


def test_jobs_from_outside_still_on_a_running_reservations_vnodes_hold_them():
    """9.s, from outside R1, still runs (past its walltime, or run there by hand) on n1, the
    rest of h0 that R1 holds whole: an exclhost job in R1 waits (h0 is not empty), a shared
    one runs on n0. On n2 (8 cpus, 2 of them R1's) a job outside uses 6 cpus, its own
    part: R1's 2 stay R1's; using 7 (one of R1's), R1 has 1 left there."""
    vnodes = [vnode("n0", host="h0"), vnode("n1", host="h0"), vnode("n2", ncpus=8)]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}

    def run(outside, inside, resv_nodes="(n0:ncpus=4)+(n1)"):
        held = resv("R1", "1:ncpus=4", NOW - 10, NOW + HOUR, state="RUNNING", queue="R1",
                    resv_nodes=resv_nodes,
                    Resource_List={"select": "1:ncpus=4", "place": "exclhost"})
        return started(cycle(snapshot(vnodes, [outside, inside], queues,
                                      reservations=[held])))

    late = running("1:ncpus=4", "(n1:ncpus=4)", started=NOW - HOUR - 5, id="9.s")
    assert run(late, job("1:ncpus=2", "00:10:00", queue="R1", id="1.s",
                         place="exclhost")) == {}
    assert run(late, job("1:ncpus=2", "00:10:00", queue="R1", id="1.s")) == {
        "1.s": "(n0:ncpus=2)"}
    for used, fits in ((6, {"1:ncpus=2"}), (7, {"1:ncpus=1"})):
        beside = running(f"1:ncpus={used}", f"(n2:ncpus={used})", id="9.s")
        for select in ("1:ncpus=2", "1:ncpus=1"):
            got = run(beside, job(select, "00:10:00", queue="R1", id="1.s"), "(n2:ncpus=2)")
            want = {"1.s": f"(n2:{select[2:]})"} if select in fits or used == 6 else {}
            assert got == want, (used, select)


def test_an_exclhost_job_from_outside_on_the_rest_of_the_host_holds_it_all():
    """9.s, exclhost and past its walltime, runs on n1; R1 holds part of n0 on the same
    host: h0 is 9.s's whole, so R1's job waits."""
    vnodes = [vnode("n0", host="h0"), vnode("n1", host="h0")]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}
    held = resv("R1", "1:ncpus=2", NOW - 10, NOW + HOUR, state="RUNNING", queue="R1",
                resv_nodes="(n0:ncpus=2)")
    late = running("1:ncpus=4", "(n1:ncpus=4)", started=NOW - HOUR - 5, id="9.s",
                   place="exclhost")
    inside = job("1:ncpus=2", "00:10:00", queue="R1", id="1.s")
    assert started(cycle(snapshot(vnodes, [late, inside], queues,
                                  reservations=[held]))) == {}


def test_reservations_sharing_a_vnode_each_keep_their_part():
    """n0 (8 cpus) is split between R1 and R2 (4 each). An excl job in R2 is alone within
    R2's part only: R1's job still runs on R1's part. With a job from outside overrunning
    on 2 cpus, R1 and R2 each wanting 4 in one cycle: one starts, not both (10 on 8)."""
    vnodes = [vnode("n0", ncpus=8)]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {}), "R2": Queue("R2", {})}
    resvs = [resv(r, "1:ncpus=4", NOW - 10, NOW + HOUR, state="RUNNING", queue=r,
                  resv_nodes="(n0:ncpus=4)") for r in ("R1", "R2")]
    alone = running("1:ncpus=4", "(n0:ncpus=4)", id="8.s", queue="R2", place="excl")
    inside = job("1:ncpus=2", "00:10:00", queue="R1", id="1.s")
    assert started(cycle(snapshot(vnodes, [alone, inside], queues, reservations=resvs))) == {
        "1.s": "(n0:ncpus=2)"}
    late = running("1:ncpus=2", "(n0:ncpus=2)", started=NOW - HOUR - 5, id="9.s")
    wanting = [job("1:ncpus=4", "00:10:00", queue=r, id=f"{r}.s") for r in ("R1", "R2")]
    assert len(started(cycle(snapshot(vnodes, [late, *wanting], queues,
                                      reservations=resvs)))) == 1


def test_the_rest_of_a_host_stays_the_reservations_when_sharing_changes():
    """R1 was confirmed with all of h0 (2 of n0's cpus, n1 with nothing); h0's sharing has
    since been set back to default_shared: h0 is still R1's over its window, no job outside
    runs there, on n0's other cpus either."""
    vnodes = [vnode("n0", host="h0"), vnode("n1", host="h0")]
    held = resv("R1", "1:ncpus=2", NOW + 600, NOW + HOUR, state="CONFIRMED",
                resv_nodes="(n0:ncpus=2)+(n1)")
    result = cycle(snapshot(vnodes, [job("1:ncpus=1", "01:00:00", id="1.s")],
                            reservations=[held]))
    assert started(result) == {}
    assert result.estimates["1.s"].start_time == NOW + HOUR


def test_jobs_started_in_a_reservation_in_one_cycle_hold_their_memory():
    vnodes = [vnode("n0", ncpus=8, mem="16gb")]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}
    held = resv("R1", "1:ncpus=8:mem=16gb", NOW - 10, NOW + HOUR, state="RUNNING",
                resv_nodes="(n0:ncpus=8:mem=16gb)", queue="R1")
    jobs = [job("1:ncpus=1:mem=10gb", queue="R1", id=f"{n}.s") for n in (1, 2)]
    result = cycle(snapshot(vnodes, jobs, queues, reservations=[held]))
    assert started(result) == {"1.s": "(n0:ncpus=1:mem=10485760kb)"}


@pytest.mark.parametrize("place, sharing, resv_nodes", [
    ("excl", None, "(n0:ncpus=4)"),
    (None, "force_exclhost", "(n0:ncpus=4)+(n1:ncpus=4)"),
])
def test_an_exclusive_job_in_a_running_reservation_keeps_its_vnodes(place, sharing,
                                                                      resv_nodes):
    """9.s runs in R1 on n0 alone (excl), or with all of h0 (n0 is force_exclhost): 1.s,
    queued in R1 too, does not start beside it."""
    vnodes = [vnode("n0", host="h0", sharing=sharing), vnode("n1", host="h0")]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}
    held = resv("R1", "1:ncpus=4", NOW - 10, NOW + HOUR, state="RUNNING",
                resv_nodes=resv_nodes, queue="R1")
    alone = running("1:ncpus=1", "(n0:ncpus=1)", id="9.s", queue="R1", place=place)
    later = job("1:ncpus=1", "00:10:00", queue="R1", id="1.s")
    result = cycle(snapshot(vnodes, [alone, later], queues, reservations=[held]))
    assert started(result) == {}
    assert result.comments["1.s"] == \
        "Not Running: Insufficient amount of resource in the reservation"


def test_exclusive_jobs_started_in_a_reservation_in_one_cycle_keep_their_vnodes():
    vnodes = [vnode("n0"), vnode("n1")]
    queues = {"workq": Queue("workq", {}), "R1": Queue("R1", {})}
    held = resv("R1", "2:ncpus=4", NOW - 10, NOW + HOUR, state="RUNNING",
                resv_nodes="(n0:ncpus=4)+(n1:ncpus=4)", queue="R1")
    jobs = [job("1:ncpus=1", queue="R1", id="1.s", place="excl"),
            job("1:ncpus=1", queue="R1", id="2.s"), job("1:ncpus=1", queue="R1", id="3.s")]
    result = cycle(snapshot(vnodes, jobs, queues, reservations=[held]))
    assert started(result) == {"1.s": "(n0:ncpus=1)", "2.s": "(n1:ncpus=1)",
                               "3.s": "(n1:ncpus=1)"}


def test_a_sched_without_a_partition_schedules_nothing(caplog):
    sched = Scheduler("sc1", partitions=())
    result = sched.cycle(snapshot([vnode("n1")], [job()]), NOW)
    assert result.run == [] and "Scheduler does not contain a partition" in caplog.text


def test_partitions_slice_queues_and_vnodes():
    queues = {"wq1": Queue("wq1", {"partition": "P1"}), "workq": Queue("workq", {})}
    vnodes = [vnode("p1n", partition="P1"), vnode("dn")]
    jobs = [job("1:ncpus=4", queue="wq1", id="1.s"), job("1:ncpus=4", id="2.s"),
            job("1:ncpus=4", queue="wq1", id="3.s")]
    snap = snapshot(vnodes, jobs, queues)
    p1 = Scheduler("sc1", partitions=("P1",)).cycle(snap, NOW)
    default = Scheduler("default", claimed=("P1",)).cycle(snap, NOW)
    assert started(p1) == {"1.s": "(p1n:ncpus=4)"}
    assert started(default) == {"2.s": "(dn:ncpus=4)"}


def test_a_job_that_can_never_run_does_not_block_strict_ordering():
    huge = job("1:ncpus=64", id="1.s")
    small = job("1:ncpus=1", id="2.s")
    result = cycle(snapshot([vnode("n1")], [huge, small]), strict_ordering=True, backfill=False)
    assert set(started(result)) == {"2.s"}
    assert result.comments["1.s"].startswith("Can Never Run")
    assert "1.s" not in result.top_jobs and "1.s" not in result.estimates


def test_can_never_run_names_the_resource_with_pbs_figures():
    """PBS's format: requested, available now, total, for the resource that is short."""
    busy = running("1:ncpus=1", "(n1:ncpus=1)", id="9.s")
    never = job("1:ncpus=4", id="1.s")
    result = cycle(snapshot([vnode("n1", ncpus=2)], [busy, never]))
    assert result.comments["1.s"] == ("Can Never Run: Insufficient amount of resource: ncpus "
                                      "(R: 4 A: 1 T: 2)")


def test_can_never_run_names_a_chunk_too_big_for_any_vnode():
    """Enough CPUs in the complex, but no vnode holds one chunk: the largest vnode's
    figures."""
    never = job("1:ncpus=3", id="1.s")
    result = cycle(snapshot([vnode("n1", ncpus=2), vnode("n2", ncpus=2)], [never]))
    assert result.comments["1.s"] == ("Can Never Run: Insufficient amount of resource: ncpus "
                                      "(R: 3 A: 2 T: 2)")


def test_can_never_run_shows_sizes_as_pbs_does():
    never = job("1:ncpus=1:mem=64gb", id="1.s")
    result = cycle(snapshot([vnode("n1", mem="16gb")], [never]))
    assert result.comments["1.s"] == ("Can Never Run: Insufficient amount of resource: mem "
                                      "(R: 64gb A: 16gb T: 16gb)")


def test_a_sched_objects_policy_is_read_as_before_and_a_replays_is_bounded():
    """Sched objects' values are qmgr's to check: reading them refuses only what has the
    wrong type (one refusal stops every named scheduler). A replay's site table is also
    checked for range (`Policy.problem`)."""
    policy = Policy.from_attributes({"node_sort_key": "ncpus high", "backfill_depth": 0},
                                    strict=True)
    assert policy.node_sort_key == "ncpus high" and policy.problem() is None
    assert "backfill_depth=-1" in Policy(backfill_depth=-1).problem()
    assert "node_sort_key" in Policy(node_sort_key=" ncpus HIGH").problem()
    # PBS's third word: total (its default) is read; unused and assigned are refused
    assert Policy(node_sort_key="ncpus HIGH total").problem() is None
    assert "unused amount is not supported" in Policy(
        node_sort_key="ncpus HIGH unused").problem()
    assert "boot_delay" in Policy(boot_delay=float("nan")).problem()


def typed(vnodes, jobs, types):
    snap = snapshot(vnodes, jobs)
    snap.resource_types = types
    return snap


def test_a_boolean_resource_matches_as_pbs_reads_a_boolean():
    """OpenPBS 23.06 writes ``bigmem=true`` and ``bigmem=t`` as ``bigmem=True`` in the
    schedselect, and a vnode without the resource has it False."""
    vnodes = [vnode("big", ncpus=2, resources={"bigmem": True}), vnode("small", ncpus=2)]
    jobs = [job("1:ncpus=1:bigmem=true", id="1.s"), job("1:ncpus=1:bigmem=t", id="2.s"),
            job("1:ncpus=1:bigmem=false", id="3.s"), job("1:ncpus=1:bigmem=True", id="4.s")]
    result = cycle(typed(vnodes, jobs, {"bigmem": "boolean"}), node_sort_key="ncpus")
    assert started(result) == {"1.s": "(big:ncpus=1)",
                               "2.s": "(big:ncpus=1)",
                               "3.s": "(small:ncpus=1)"}


def test_a_string_resource_holding_digits_is_matched_not_consumed():
    """``rack=1`` names a rack: every job asking for it may share the vnode (it was read
    as one unit of a consumable, so one job at a time), and rack 2 is not rack 1."""
    vnodes = [vnode("r2", ncpus=4, resources={"rack": "2"}),
              vnode("r1", ncpus=4, resources={"rack": "1"})]
    jobs = [job("1:ncpus=1:rack=1", id=f"{i}.s") for i in range(3)]
    result = cycle(typed(vnodes, jobs, {"rack": "string"}))
    assert started(result) == {f"{i}.s": "(r1:ncpus=1)" for i in range(3)}


def test_a_size_resource_needs_no_unit_letter_and_is_consumed():
    vnodes = [vnode("n1", ncpus=8, resources={"scratch": "20gb"})]
    jobs = [job("1:ncpus=1:scratch=10g", id=f"{i}.s") for i in range(3)]
    result = cycle(typed(vnodes, jobs, {"scratch": "size"}))
    assert set(started(result)) == {"0.s", "1.s"}


def test_a_kept_scheduler_reads_values_again_when_a_resource_type_changes():
    sched = Scheduler(policy=Policy())
    vnodes = [vnode("r1", ncpus=4, resources={"rack": "1"})]
    jobs = [job("1:ncpus=1:rack=1", id=f"{i}.s") for i in range(2)]
    assert len(sched.cycle(typed(vnodes, jobs, {"rack": "long"}), NOW).run) == 1
    assert len(sched.cycle(typed(vnodes, jobs, {"rack": "string"}), NOW + 1).run) == 2
