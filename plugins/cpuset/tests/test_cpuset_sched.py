"""The scheduler's side as scenarios with a worked-out answer: octant placement, starving
jobs and their drain, and stuck cpusets in the plan (seed 002, sections 4 and 5)."""

from __future__ import annotations

import pytest

import pbsplug_cpuset
from pbsplug import Job, PluginSet, Queue, Server, Vnode
from pbsplug.scheduler import Policy, Scheduler, Snapshot
from pbsplug.siteconfig import PluginSite, SiteConfig

NOW = 1_800_000_000.0
HOUR = 3600


def vnode(name: str, ncpus: int = 2, state: str = "free", **attrs) -> Vnode:
    return Vnode(name, {"state": state, "resources_available": {
        "ncpus": ncpus, "mem": "8gb", "host": attrs.pop("host", "big")}, **attrs})


def job(job_id: str, select: str, walltime: str = "01:00:00", qtime: float = NOW - 60,
        **attrs) -> Job:
    return Job(job_id, {"queue": "workq", "job_state": "Q", "qtime": qtime,
                        "Resource_List": {"select": select, "walltime": walltime}, **attrs})


def running(job_id: str, exec_vnode: str, walltime: str, started: float = NOW) -> Job:
    return Job(job_id, {"queue": "workq", "job_state": "R", "stime": started,
                        "exec_vnode": exec_vnode, "qtime": started,
                        "Resource_List": {"walltime": walltime}})


def on(*names: str, ncpus: int = 2) -> str:
    return "+".join(f"({name}:ncpus={ncpus})" for name in names)


@pytest.fixture
def cycle(tmp_path):
    """``cycle(vnodes, jobs, **config)``: one cycle of the default scheduler with the plugin
    configured as given (each call a plugin set of its own, as a site would load it)."""
    calls = iter(range(100))

    def run(vnodes, jobs, policy=None, **config):
        site = SiteConfig(path=tmp_path / f"site{next(calls)}.toml")
        site.plugins["cpuset"] = PluginSite("cpuset", enabled=True, config=config)
        plugins = PluginSet(site)
        record = plugins.add("cpuset", pbsplug_cpuset)
        assert record.status == "enabled", record.failure_text()
        sched = Scheduler("default", (), policy or Policy(), hooks=plugins.hook)
        queues = {"workq": Queue("workq", {"queue_type": "execution", "started": True})}
        return sched.cycle(Snapshot(Server("srv"), queues, {v.name: v for v in vnodes},
                                    list(jobs)), NOW)

    return run


def started(result) -> dict[str, str]:
    return {r.job_id: r.exec_vnode for r in result.run}


EIGHT = [f"n{i}" for i in range(8)]
TWO_OCTANTS = {"octants": ["0-3", "4-7"]}


def test_a_small_job_runs_inside_one_octant_not_where_first_fit_would_put_it(cycle):
    # n0, n1 and n4 are busy: octant 0 has 2 free nodes, octant 1 has 3.
    busy = [running("1.s", on("n0", "n1"), "02:00:00"), running("2.s", on("n4"), "02:00:00")]
    result = cycle([vnode(n) for n in EIGHT], [*busy, job("3.s", "3:ncpus=2")], **TWO_OCTANTS)
    assert started(result) == {"3.s": on("n5", "n6", "n7")}
    without = cycle([vnode(n) for n in EIGHT], [*busy, job("3.s", "3:ncpus=2")])
    assert started(without) == {"3.s": on("n2", "n3", "n5")}  # what it avoided: a straddle


def test_a_small_job_waits_rather_than_straddle(cycle):
    busy = [running("1.s", on("n0", "n1"), "02:00:00"),
            running("2.s", on("n4", "n5"), "01:00:00")]
    result = cycle([vnode(n) for n in EIGHT], [*busy, job("3.s", "3:ncpus=2")], **TWO_OCTANTS)
    assert started(result) == {}
    assert result.comments["3.s"].startswith("Not Running")
    # Its estimate keeps it inside octant 1, once 2.s has ended.
    assert result.estimates["3.s"].start_time == NOW + HOUR
    assert result.estimates["3.s"].exec_vnode == on("n4", "n5", "n6")


def test_straddle_after_lets_a_long_waiting_small_job_straddle(cycle):
    busy = [running("1.s", on("n0", "n1"), "02:00:00"),
            running("2.s", on("n4", "n5"), "01:00:00")]
    fresh = job("3.s", "3:ncpus=2", qtime=NOW - 100)
    old = job("4.s", "3:ncpus=2", qtime=NOW - 2 * HOUR)
    result = cycle([vnode(n) for n in EIGHT], [*busy, old, fresh], straddle_after=HOUR,
                   **TWO_OCTANTS)
    assert started(result) == {"4.s": on("n2", "n3", "n6")}


def test_a_large_job_goes_wherever_the_nodes_are(cycle):
    busy = [running("1.s", on("n0", "n1"), "02:00:00"), running("2.s", on("n4"), "02:00:00")]
    result = cycle([vnode(n) for n in EIGHT], [*busy, job("3.s", "5:ncpus=2")], **TWO_OCTANTS)
    assert started(result) == {"3.s": on("n2", "n3", "n5", "n6", "n7")}


def test_octants_are_physical_ids_translated_from_logical_node_numbers(cycle):
    # Logical nodes 0-3 are physical 4-7 (octant 1) and 4-7 are physical 0-3 (octant 0):
    # octant 0 is n4..n7, tried first, lowest logical number first.
    busy = [running("1.s", on("n0"), "02:00:00")]
    result = cycle([vnode(n) for n in EIGHT], [*busy, job("3.s", "3:ncpus=2")],
                   physical_ids="4-7,0-3", **TWO_OCTANTS)
    assert started(result) == {"3.s": on("n4", "n5", "n6")}


def test_octants_are_per_host_by_default_and_span_hosts_in_complex_scope(cycle):
    # Two hosts, each with nodes numbered 0-3 (host[N]); octants of two nodes.
    nodes = [vnode(f"{h}[{i}]", host=h) for h in ("a", "b") for i in range(4)]
    busy = [running("1.s", on("a[0]", "b[2]"), "02:00:00")]
    config = {"octants": ["0-1", "2-3"]}
    result = cycle(nodes, [*busy, job("3.s", "2:ncpus=2")], **config)
    assert started(result) == {"3.s": on("a[2]", "a[3]")}
    # complex scope: a[2] and b[2] are the same node number; the octant {0,1} is
    # a[0],a[1],b[0],b[1] and has room first, lowest node number first.
    spanned = cycle(nodes, [*busy, job("3.s", "2:ncpus=2")], octant_scope="complex", **config)
    assert started(spanned) == {"3.s": on("b[0]", "a[1]")}


def test_a_node_the_host_reports_taken_is_not_given(cycle):
    # The host's mask (bit N = node N free) says node 0 is taken (an orphan cpuset, say),
    # though the server has no job on it.
    nodes = [vnode(n, cpuset_free_mask="0e") for n in EIGHT[:4]]
    result = cycle(nodes, [job("3.s", "1:ncpus=2")])
    assert started(result) == {"3.s": on("n1")}


def drain_scene(stuck_since: float | None = None):
    """n0..n4. 1.s holds n0 and n1 for an hour, 2.s holds n2 for three. n3 is free, or
    held by a cpuset stuck since `stuck_since`; n4 is free. The starving 9.s needs three
    nodes for two hours; three one-node jobs wait behind it."""
    n3 = vnode("n3") if stuck_since is None else vnode(
        "n3", state="busy", cpuset_stuck=f"7.s@{int(stuck_since)}")
    nodes = [vnode("n0"), vnode("n1"), vnode("n2"), n3, vnode("n4")]
    jobs = [running("1.s", on("n0", "n1"), "01:00:00"),
            running("2.s", on("n2"), "03:00:00"),
            job("9.s", "3:ncpus=2", "02:00:00", qtime=NOW - 9 * HOUR),
            job("10.s", "1:ncpus=2", "00:30:00", qtime=NOW - 300),
            job("11.s", "1:ncpus=2", "02:00:00", qtime=NOW - 200),
            job("12.s", "1:ncpus=2", "02:00:00", qtime=NOW - 100)]
    return nodes, jobs


def test_a_starving_job_is_drained_for_and_only_harmless_jobs_backfill(cycle):
    nodes, jobs = drain_scene()
    result = cycle(nodes, jobs)
    assert result.top_jobs == ["9.s"]
    # Enough nodes in an hour (1.s ends): n0, n1 and n3.
    assert result.estimates["9.s"].start_time == NOW + HOUR
    assert result.estimates["9.s"].exec_vnode == on("n0", "n1", "n3")
    # 10.s ends before that on n3; 11.s takes n4, which 9.s will not need; 12.s would
    # delay it.
    assert started(result) == {"10.s": on("n3"), "11.s": on("n4")}
    assert "12.s" not in started(result)


def test_without_starvation_no_job_is_drained_for(cycle):
    nodes, jobs = drain_scene()
    result = cycle(nodes, jobs, starve_after=0)
    assert result.top_jobs == []
    assert started(result) == {"10.s": on("n3"), "11.s": on("n4")}
    assert "9.s" not in result.top_jobs


def test_a_recently_stuck_cpuset_counts_as_soon_free_for_the_drain(cycle):
    nodes, jobs = drain_scene(stuck_since=NOW - 60)
    result = cycle(nodes, jobs)
    assert result.top_jobs == ["9.s"]
    assert result.estimates["9.s"].start_time == NOW + HOUR
    assert result.estimates["9.s"].exec_vnode == on("n0", "n1", "n3")
    assert "n3" not in " ".join(started(result).values())  # never used while stuck


def test_an_old_stuck_cpuset_counts_as_lost_until_reclaimed(cycle):
    nodes, jobs = drain_scene(stuck_since=NOW - 601)
    result = cycle(nodes, jobs)
    # n3 is out of the plan: the drain takes n4 instead, so 11.s may no longer start there;
    # only 10.s, which ends first, does.
    assert result.top_jobs == ["9.s"]
    assert result.estimates["9.s"].start_time == NOW + HOUR
    assert result.estimates["9.s"].exec_vnode == on("n0", "n1", "n4")
    assert started(result) == {"10.s": on("n4")}


def test_with_every_spare_node_stuck_too_long_the_drain_waits_for_a_running_job(cycle):
    nodes, jobs = drain_scene(stuck_since=NOW - 601)
    nodes[4] = vnode("n4", state="busy", cpuset_stuck=f"8.s@{int(NOW - 700)}")
    result = cycle(nodes, jobs)
    # Neither n3 nor n4 counts: the job runs when 2.s frees n2, and is not given up.
    assert result.top_jobs == ["9.s"]
    assert result.estimates["9.s"].start_time == NOW + 3 * HOUR
    assert result.estimates["9.s"].exec_vnode == on("n0", "n1", "n2")


def test_stuck_grace_is_the_sites(cycle):
    nodes, jobs = drain_scene(stuck_since=NOW - 601)
    result = cycle(nodes, jobs, stuck_grace=3600)
    assert result.estimates["9.s"].start_time == NOW + HOUR
    assert result.estimates["9.s"].exec_vnode == on("n0", "n1", "n3")


def test_the_most_starved_job_goes_first(cycle):
    nodes = [vnode("n0")]
    jobs = [running("1.s", on("n0"), "01:00:00"),
            job("2.s", "1:ncpus=2", qtime=NOW - 9 * HOUR),
            job("3.s", "1:ncpus=2", qtime=NOW - 20 * HOUR),
            job("4.s", "1:ncpus=2", qtime=NOW - 60)]
    result = cycle(nodes, jobs)
    assert result.top_jobs == ["3.s"]


def test_a_starving_small_job_is_planned_inside_one_octant(cycle):
    busy = [running("1.s", on("n0", "n1"), "01:00:00"),
            running("2.s", on("n4", "n5"), "03:00:00")]
    starving = job("9.s", "3:ncpus=2", qtime=NOW - 9 * HOUR)
    result = cycle([vnode(n) for n in EIGHT], [*busy, starving], **TWO_OCTANTS)
    assert result.top_jobs == ["9.s"]
    # n2, n3, n6, n7 are free now but straddle; octant 0 has three free in an hour.
    assert result.estimates["9.s"].start_time == NOW + HOUR
    assert result.estimates["9.s"].exec_vnode == on("n0", "n1", "n2")


@pytest.mark.parametrize("select, place, expected", [
    ("5:ncpus=1", "", 3),          # five CPUs fill three two-CPU nodes, however placed
    ("2:ncpus=2+1:ncpus=1", "", 3),
    ("2:ncpus=1", "scatter", 2),   # one node per chunk
    ("1:ncpus=1", "", 1),
])
def test_a_jobs_size_is_what_it_asks_for(select, place, expected):
    from pbsplug_cpuset.octants import nodes_needed

    asked = job("1.s", select)
    if place:
        asked.Resource_List["place"] = place
    assert nodes_needed(asked, [vnode("n0"), vnode("n1")]) == expected


def test_a_small_job_may_run_on_vnodes_in_no_octant(cycle):
    nodes = [vnode(n) for n in EIGHT] + [vnode("login"), vnode("spare")]
    busy = [running("1.s", on(*EIGHT[:2], *EIGHT[4:6]), "02:00:00")]
    # Each octant has two free nodes; the two vnodes without a number hold the job.
    result = cycle(nodes, [*busy, job("3.s", "3:ncpus=2")], node_numbers={"spare": 99},
                   **TWO_OCTANTS)
    assert started(result) == {}  # 'login' has no number, 'spare' is node 99: 2 outside
    result = cycle(nodes + [vnode("extra")], [*busy, job("3.s", "3:ncpus=2")],
                   **TWO_OCTANTS)
    assert started(result) == {"3.s": on("extra", "login", "spare")}


def test_a_logical_number_is_ascii_digits():
    """\\d also takes Arabic-Indic digits: 'n\u0661\u0667' was node 17, in an octant."""
    from pbsplug_cpuset.octants import logical_number

    assert logical_number("n17", {}) == 17 and logical_number("h[3]", {}) == 3
    assert logical_number("n\u0661\u0667", {}) is None
    assert logical_number("h[\u0663]", {}) is None
