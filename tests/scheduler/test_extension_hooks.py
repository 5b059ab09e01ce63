"""Each scheduler extension hook, implemented by a plugin, changes a decision."""

import pytest

from pbsplug import PluginSet, Queue, SchedulerInstance, Server, hookimpl
from pbsplug.scheduler import Policy, Scheduler, SchedulerSetupError, build_schedulers
from pbsplug.siteconfig import SiteConfig

from .helpers import HOUR, NOW, job, running, snapshot, vnode


def scheduler(tmp_path, *plugins, name="default", partitions=(), **policy):
    plugin_set = PluginSet(SiteConfig(path=tmp_path / "site.toml"))
    for i, plugin in enumerate(plugins):
        assert plugin_set.add(f"p{i}", plugin, enable=True).status == "enabled"
    return Scheduler(name, partitions, Policy(**policy), hooks=plugin_set.hook)


def started(result):
    return {r.job_id: r.exec_vnode for r in result.run}


def test_sched_job_order_reorders(tmp_path):
    class Reverse:
        @hookimpl
        def sched_job_order(self, order):
            order.jobs.reverse()

    jobs = [job("1:ncpus=4", id="1.s"), job("1:ncpus=4", id="2.s")]
    result = scheduler(tmp_path, Reverse()).cycle(snapshot([vnode("n1")], jobs), NOW)
    assert set(started(result)) == {"2.s"}


def test_a_starving_job_becomes_the_top_job_without_strict_ordering(tmp_path):
    class Starve:
        @hookimpl
        def sched_job_order(self, order):
            order.starving.append("1.s")

    vnodes = [vnode("n1"), vnode("n2")]
    hog = running("1:ncpus=4", "(n1:ncpus=4)", "01:00:00", id="9.s")
    big = job("2:ncpus=4", "01:00:00", id="1.s", qtime=NOW - 9 * HOUR)
    long = job("1:ncpus=4", "05:00:00", id="2.s")
    short = job("1:ncpus=4", "00:30:00", id="3.s")
    snap = snapshot(vnodes, [hog, big, long, short])
    plain = Scheduler().cycle(snap, NOW)
    assert set(started(plain)) == {"2.s"}  # without the hook the big job starves on
    result = scheduler(tmp_path, Starve()).cycle(snap, NOW)
    assert result.top_jobs == ["1.s"]
    assert result.estimates["1.s"].start_time == NOW + HOUR
    assert set(started(result)) == {"3.s"}  # only what ends before the drain backfills


def test_sched_node_placement_chooses_the_vnodes(tmp_path):
    class LastFirst:
        @hookimpl
        def sched_node_placement(self, placement):
            return [placement.candidates[-1].name]

    vnodes = [vnode("n1"), vnode("n2"), vnode("n3")]
    result = scheduler(tmp_path, LastFirst()).cycle(snapshot(vnodes, [job(id="1.s")]), NOW)
    assert started(result) == {"1.s": "(n3:ncpus=1)"}


def test_placement_candidates_are_the_vnodes_with_room_now(tmp_path):
    seen = {}

    class Record:
        @hookimpl
        def sched_node_placement(self, placement):
            seen[placement.job.id] = [v.name for v in placement.candidates]

    vnodes = [vnode("full"), vnode("half"), vnode("down", state="offline"), vnode("idle")]
    jobs = [running("1:ncpus=4", "(full:ncpus=4)", id="1.s"),
            running("1:ncpus=2", "(half:ncpus=2)", id="2.s"),
            job("1:ncpus=2", id="3.s"), job("1:ncpus=3", id="4.s")]
    result = scheduler(tmp_path, Record()).cycle(snapshot(vnodes, jobs), NOW)
    assert started(result) == {"3.s": "(half:ncpus=2)", "4.s": "(idle:ncpus=3)"}
    assert seen == {"3.s": ["half", "idle"], "4.s": ["idle"]}


def test_sched_node_placement_can_hold_a_job_and_bad_answers_are_ignored(tmp_path, caplog):
    class Hold:
        @hookimpl
        def sched_node_placement(self, placement):
            return [] if placement.job.id == "1.s" else ["nowhere"]

    result = scheduler(tmp_path, Hold()).cycle(
        snapshot([vnode("n1")], [job(id="1.s"), job(id="2.s")]), NOW)
    assert started(result) == {"2.s": "(n1:ncpus=1)"}
    assert "does not fit" in caplog.text
    # the held job's comment names the plugin, not a resource it does not lack
    assert result.comments["1.s"] == "Not Running: held by plugin p0 (sched_node_placement)"


def test_first_placement_answer_wins(tmp_path):
    class Abstain:
        @hookimpl
        def sched_node_placement(self, placement):
            return None

    class Second:
        @hookimpl
        def sched_node_placement(self, placement):
            return ["n2"]

    result = scheduler(tmp_path, Abstain(), Second()).cycle(
        snapshot([vnode("n1"), vnode("n2")], [job(id="1.s")]), NOW)
    assert started(result) == {"1.s": "(n2:ncpus=1)"}


def test_placement_fit_is_the_schedulers_first_fit_over_the_vnodes_given(tmp_path):
    """A plugin narrows the choice to one group of vnodes; `fit` does the arithmetic."""
    class SecondHalf:
        @hookimpl
        def sched_node_placement(self, placement):
            names = placement.fit([v for v in placement.candidates if v.name >= "n3"])
            return names if names is not None else []

    vnodes = [vnode(f"n{i}", ncpus=2) for i in range(1, 5)]
    jobs = [job("2:ncpus=2", id="1.s"), job("1:ncpus=2", id="2.s")]
    result = scheduler(tmp_path, SecondHalf()).cycle(snapshot(vnodes, jobs), NOW)
    # 1.s fills n3 and n4; 2.s fits only in n1 or n2, which the plugin refuses: it waits.
    assert started(result) == {"1.s": "(n3:ncpus=2)+(n4:ncpus=2)"}
    assert result.comments["2.s"].startswith("Not Running")


@pytest.mark.parametrize("place, answer", [
    ("vscatter", ["n1", "n1"]),          # one chunk per vnode
    ("scatter", ["a1", "a2"]),           # one chunk per host
    ("pack", ["a1", "n1"]),              # one host
])
def test_a_placement_answer_that_breaks_the_jobs_place_is_ignored(tmp_path, caplog, place,
                                                                  answer):
    class Answer:
        @hookimpl
        def sched_node_placement(self, placement):
            return answer

    vnodes = [vnode("a1", host="a"), vnode("a2", host="a"), vnode("n1")]
    result = scheduler(tmp_path, Answer()).cycle(
        snapshot(vnodes, [job("2:ncpus=1", id="1.s", place=place)]), NOW)
    assert "does not fit" in caplog.text
    chosen = [part.split(":")[0].strip("(") for part in started(result)["1.s"].split("+")]
    assert chosen != answer  # the scheduler's own choice stands


def test_an_answer_on_a_host_an_excl_host_job_cannot_have_is_ignored(tmp_path, caplog):
    class Answer:
        @hookimpl
        def sched_node_placement(self, placement):
            return ["a1"]

    vnodes = [vnode("a1", host="a"), vnode("a2", host="a"), vnode("n1")]
    jobs = [running("1:ncpus=1", "(a2:ncpus=1)", id="9.s"),
            job("1:ncpus=1", id="1.s", place="exclhost")]
    result = scheduler(tmp_path, Answer()).cycle(snapshot(vnodes, jobs), NOW)
    assert "does not fit" in caplog.text
    assert started(result) == {"1.s": "(n1:ncpus=1)"}


def test_placement_is_asked_when_planning_and_the_plan_follows_it(tmp_path):
    """A top job's drain plans on the vnodes the plugin allows, from when they are free."""
    asked = []

    class OnlyN2:
        @hookimpl
        def sched_node_placement(self, placement):
            asked.append(placement.start)
            return placement.fit([v for v in placement.candidates if v.name == "n2"]) or []

    vnodes = [vnode("n1"), vnode("n2")]
    jobs = [running("1:ncpus=4", "(n2:ncpus=4)", "02:00:00", id="9.s"),
            job("1:ncpus=4", "01:00:00", id="1.s")]
    result = scheduler(tmp_path, OnlyN2(), strict_ordering=True).cycle(
        snapshot(vnodes, jobs), NOW)
    assert started(result) == {}
    assert result.top_jobs == ["1.s"]
    # n1 is free now, but the plugin wants n2, free in two hours.
    assert result.estimates["1.s"].start_time == NOW + 2 * HOUR
    assert result.estimates["1.s"].exec_vnode == "(n2:ncpus=4)"
    assert None in asked and NOW + 2 * HOUR in asked


def test_sched_node_availability_makes_a_vnode_plannable(tmp_path):
    class SoonFree:
        @hookimpl
        def sched_node_availability(self, sched, now, vnodes):
            return {v.name: now + 120 for v in vnodes if v.comment == "stuck cpuset"}

    vnodes = [vnode("n1", state="offline", comment="stuck cpuset")]
    snap = snapshot(vnodes, [job("1:ncpus=4", id="1.s")])
    assert "1.s" not in Scheduler().cycle(snap, NOW).estimates
    result = scheduler(tmp_path, SoonFree()).cycle(snap, NOW)
    assert result.run == []  # never started on a vnode that is not free now
    assert result.estimates["1.s"].start_time == NOW + 120


def test_the_latest_availability_wins(tmp_path):
    class A:
        @hookimpl
        def sched_node_availability(self, sched, now, vnodes):
            return {"n1": now + 100}

    class B:
        @hookimpl
        def sched_node_availability(self, sched, now, vnodes):
            return {"n1": now + 500}

    snap = snapshot([vnode("n1", state="down")], [job("1:ncpus=4", id="1.s")])
    result = scheduler(tmp_path, A(), B()).cycle(snap, NOW)
    assert result.estimates["1.s"].start_time == NOW + 500


def test_sched_partition_moves_a_vnode(tmp_path):
    class Split:
        @hookimpl
        def sched_partition(self, obj):
            return "P1" if obj.name in ("n2", "wq1") else None

    queues = {"workq": Queue("workq", {}), "wq1": Queue("wq1", {})}
    vnodes = [vnode("n1"), vnode("n2")]
    jobs = [job("1:ncpus=4", id="1.s"), job("1:ncpus=4", id="2.s"),
            job("1:ncpus=4", queue="wq1", id="3.s")]
    snap = snapshot(vnodes, jobs, queues)
    default = scheduler(tmp_path, Split(), name="default").cycle(snap, NOW)
    assert started(default) == {"1.s": "(n1:ncpus=4)", "2.s": "(n2:ncpus=4)"}
    # With P1 owned by another instance, the default scheduler leaves n2 and wq1 alone.
    plugin_set = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    plugin_set.add("split", Split(), enable=True)
    owner = Scheduler("sc1", ("P1",), hooks=plugin_set.hook).cycle(snap, NOW)
    rest = Scheduler("default", claimed=("P1",), hooks=plugin_set.hook).cycle(snap, NOW)
    assert started(owner) == {"3.s": "(n2:ncpus=4)"}
    assert started(rest) == {"1.s": "(n1:ncpus=4)"}


def test_cycle_begin_and_end_see_the_figures(tmp_path):
    seen = []

    class Watch:
        @hookimpl
        def sched_cycle_begin(self, sched, now):
            seen.append(("begin", sched, now))

        @hookimpl
        def sched_cycle_end(self, stats):
            seen.append(("end", stats.sched, stats.jobs_considered, stats.jobs_started,
                         stats.jobs_backfilled))

    vnodes = [vnode("n1"), vnode("n2")]
    hog = running("1:ncpus=4", "(n1:ncpus=4)", "01:00:00", id="9.s")
    jobs = [hog, job("2:ncpus=4", id="1.s"), job("1:ncpus=2", "00:30:00", id="2.s")]
    scheduler(tmp_path, Watch(), strict_ordering=True).cycle(snapshot(vnodes, jobs), NOW)
    assert seen == [("begin", "default", NOW), ("end", "default", 2, 1, 1)]


def test_sched_instances_contribute_schedulers(tmp_path):
    class Two:
        @hookimpl
        def sched_instances(self, server):
            return [SchedulerInstance("sc1", ("P1",), True, 30, {"backfill_depth": 2}),
                    SchedulerInstance("sc2", ("P2",), False)]

    plugin_set = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    plugin_set.add("two", Two(), enable=True)
    server = Server("srv", {"scheduler_iteration": 120, "backfill_depth": 3})
    instances = [i for lst in plugin_set.hook.sched_instances(server=server) for i in lst]
    scheds = build_schedulers(instances, server, plugin_set.hook)
    assert {n: (s.partitions, s.policy.backfill_depth, s.scheduling, s.iteration)
            for n, s in scheds.items()} == {
        "default": (frozenset(), 3, True, 120),
        "sc1": (frozenset({"P1"}), 2, True, 30),
        "sc2": (frozenset({"P2"}), 1, False, 600)}

    # Each sees its own slice: no job or vnode is decided by two of them.
    queues = {q: Queue(q, {"started": True, "partition": p})
              for q, p in (("wq1", "P1"), ("wq2", "P2"), ("wq3", "P3"), ("workq", None))}
    vnodes = [vnode(f"n{p}", partition=p) for p in ("P1", "P2", "P3")] + [vnode("nd")]
    jobs = [job(id=f"{q}.s", queue=q) for q in queues]
    snap = snapshot(vnodes, jobs, queues=queues)
    ran = {name: started(s.cycle(snap, NOW)) for name, s in scheds.items()}
    assert ran == {"default": {"wq3.s": "(nP3:ncpus=1)", "workq.s": "(nP3:ncpus=1)"},
                   "sc1": {"wq1.s": "(nP1:ncpus=1)"}, "sc2": {"wq2.s": "(nP2:ncpus=1)"}}


@pytest.mark.parametrize("instances, message", [
    ([SchedulerInstance("default", ("P1",))],
     "scheduler 'default': Operation is not permitted on default scheduler"),
    ([SchedulerInstance("a_very_long_sched_name", ("P1",))],
     "scheduler 'a_very_long_sched_name': a name is 1-15 letters, digits, _ or -"),
    ([SchedulerInstance("sc1", ("pbs-default",))],
     "scheduler 'sc1': Default partition name is not allowed (pbs-default)"),
    ([SchedulerInstance("sc1", ("P1",)), SchedulerInstance("sc2", ("P1",))],
     "scheduler 'sc2': Partition is already associated with other scheduler ('P1' belongs "
     "to 'sc1')"),
    ([SchedulerInstance("sc1", ("P1",)), SchedulerInstance("sc1", ("P2",))],
     "scheduler 'sc1': two plugins contribute a scheduler of this name"),
    ([SchedulerInstance("sc1", ("P1",), policy={"backfill_dept": 2})],
     "scheduler 'sc1': unknown scheduler policy setting 'backfill_dept'"),
    ([SchedulerInstance("sc1", ("P1",), policy={"strict_ordering": "maybe"})],
     "scheduler 'sc1': scheduler policy setting strict_ordering='maybe' is not a bool"),
])
def test_bad_scheduler_instances_are_refused_with_pbs_errors(instances, message):
    with pytest.raises(SchedulerSetupError) as err:
        build_schedulers(instances)
    assert str(err.value) == message


def test_every_bad_instance_is_listed():
    with pytest.raises(SchedulerSetupError) as err:
        build_schedulers([SchedulerInstance("default"), SchedulerInstance("sc1", ("P1",)),
                          SchedulerInstance("sc2", ("P1", "pbs-default"))])
    assert len(str(err.value).splitlines()) == 3


def test_a_failing_ordering_hook_does_not_stop_the_cycle(tmp_path, caplog):
    class Broken:
        @hookimpl
        def sched_job_order(self, order):
            raise RuntimeError("bad plugin")

    result = scheduler(tmp_path, Broken()).cycle(snapshot([vnode("n1")], [job(id="1.s")]),
                                                  NOW)
    assert started(result) == {"1.s": "(n1:ncpus=1)"}
    assert "sched_job_order of p0 failed" in caplog.text


def test_a_broken_plugin_never_stops_a_cycle_and_plugins_run_in_name_order(tmp_path, caplog):
    calls = []

    class Broken:
        @hookimpl
        def sched_partition(self, obj):
            raise RuntimeError("partition")

        @hookimpl
        def sched_node_availability(self, sched, now, vnodes):
            raise RuntimeError("availability")

        @hookimpl
        def sched_cycle_begin(self, sched, now):
            raise RuntimeError("begin")

        @hookimpl
        def sched_cycle_end(self, stats):
            raise RuntimeError("end")

        @hookimpl
        def sched_node_placement(self, placement):
            raise RuntimeError("placement")

    class Named:
        def __init__(self, name):
            self.name = name

        @hookimpl
        def sched_job_order(self, order):
            calls.append(self.name)

    plugin_set = PluginSet(SiteConfig(path=tmp_path / "s.toml"))
    for name, plugin in (("zz", Named("zz")), ("broken", Broken()), ("aa", Named("aa"))):
        plugin_set.add(name, plugin, enable=True)
    snap = snapshot([vnode("n1"), vnode("n2", state="offline")], [job(id="1.s")])
    result = Scheduler(hooks=plugin_set.hook).cycle(snap, NOW)
    assert started(result) == {"1.s": "(n1:ncpus=1)"}
    assert calls == ["aa", "zz"]
    for name in ("sched_partition", "sched_node_availability", "sched_cycle_begin",
                 "sched_cycle_end", "sched_node_placement"):
        assert f"{name} of broken failed; its answer is ignored" in caplog.text
